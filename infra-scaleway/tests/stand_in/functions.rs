//! Serverless Functions: namespaces, functions, and compute: what the conformance suite
//! does not reach (the archive uploaded and deployed, secret values kept out of every
//! record, statuses awaited on the clock, lost answers, denials, a compute's own
//! namespace).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use infra_core::kinds::{
    Access, ComputeSettled, EnvVars, FunctionNamespace, FunctionNamespaceSettled, FunctionSettled,
};
use infra_core::prelude::{Handle, Partial};
use infra_core::sdk::{Backend, Clock, ErrorKind, MARKER_KEY, ManualClock, Marker, SettledSpec};
use infra_testkit::scaleway::{RecordedRequest, ScalewayProduct, ScalewayServer};
use serde_json::Value;

use super::backend;
use super::support::{backend_on, create, secret, stand_in, update};

const REGION: &str = "fr-par";
const FLEET: &str = "fnfleet";

/// An empty zip archive whose comment is `note` (so that two archives differ).
fn zip(dir: &Path, file: &str, note: &str) -> String {
    let mut bytes = b"PK\x05\x06".to_vec();
    bytes.extend([0u8; 16]);
    bytes.extend(
        u16::try_from(note.len())
            .expect("a short note")
            .to_le_bytes(),
    );
    bytes.extend(note.as_bytes());
    let path = dir.join(file);
    std::fs::write(&path, bytes).expect("the archive is written");
    path.to_str().expect("a UTF-8 path").to_owned()
}

// ---- Helpers ------------------------------------------------------------------------

fn namespace_spec() -> FunctionNamespaceSettled {
    FunctionNamespaceSettled {
        description: Partial::Known("functions of the shop".to_owned()),
        environment: Partial::Known(EnvVars::from([("MODE".to_owned(), "test".to_owned())])),
        secret_environment: Partial::Unknown,
        tags: Partial::Known(BTreeSet::from(["team=web".to_owned()])),
    }
}

fn function_spec(namespace: &str, code: Option<String>) -> FunctionSettled {
    FunctionSettled {
        namespace: Handle::new(namespace),
        runtime: "python311".to_owned(),
        handler: "handler.handle".to_owned(),
        memory_mb: Partial::Known(256),
        min_scale: Partial::Known(0),
        max_scale: Partial::Known(2),
        timeout_seconds: Partial::Known(60),
        source_bucket: Partial::Known(None),
        code: code.map_or(Partial::Unknown, Partial::Known),
        environment: Partial::Known(EnvVars::from([("MODE".to_owned(), "test".to_owned())])),
        access: Access::Private,
    }
}

fn compute_spec(code: String) -> ComputeSettled {
    ComputeSettled {
        runtime: "nodejs22.x".to_owned(),
        handler: "handler.handle".to_owned(),
        code,
        code_sha256: Partial::Unknown,
        memory_mb: Partial::Known(512),
        timeout_seconds: Partial::Known(30),
        environment: Partial::Known(EnvVars::new()),
        secret_environment: Partial::Unknown,
        role: None,
        tags: Partial::Known(BTreeMap::from([("team".to_owned(), "web".to_owned())])),
        access: Access::Private,
    }
}

async fn namespace(backend: &dyn Backend, name: &str) -> String {
    create(backend, REGION, name, &namespace_spec(), FLEET)
        .await
        .expect("the namespace is created")
        .handle
}

fn calls<'r>(
    requests: &'r [RecordedRequest],
    method: &str,
    path_end: &str,
) -> Vec<&'r RecordedRequest> {
    requests
        .iter()
        .filter(|r| r.method == method && r.path.ends_with(path_end))
        .collect()
}

fn uploads(server: &ScalewayServer) -> Vec<RecordedRequest> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/uploads/"))
        .collect()
}

// ---- Code ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_archive_is_uploaded_to_the_url_handed_out_then_deployed() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let dir = tempfile::tempdir().unwrap();
    let code = zip(dir.path(), "api.zip", "version one");
    let size = std::fs::metadata(&code).unwrap().len().to_string();
    let ns = namespace(&*backend, "shop").await;
    server.clear_requests();
    let read = create(
        &*backend,
        REGION,
        "api",
        &function_spec(&ns, Some(code)),
        FLEET,
    )
    .await
    .expect("the function is created with its code");
    let requests = server.requests();
    let posted = calls(&requests, "POST", "/functions");
    assert_eq!(posted.len(), 1, "{requests:#?}");
    assert_eq!(posted[0].body["namespace_id"], ns.as_str());
    assert_eq!(posted[0].body["runtime"], "python311");
    assert_eq!(posted[0].body["timeout"], "60s");
    assert_eq!(
        posted[0].body["tags"],
        serde_json::json!([format!("{MARKER_KEY}={FLEET}")])
    );
    let id = read.handle.clone();
    let asked = calls(&requests, "GET", &format!("/functions/{id}/upload-url"));
    assert_eq!(asked.len(), 1);
    assert_eq!(
        asked[0].query.get("content_length"),
        Some(&size),
        "the archive's size is asked for"
    );
    // The stand-in refuses a size other than the one the URL was signed for: a 200 is
    // the whole archive.
    let put: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|r| r.path.starts_with("/uploads/"))
        .collect();
    assert_eq!(put.len(), 1);
    assert_eq!((put[0].method.as_str(), put[0].status), ("PUT", 200));
    assert_eq!(put[0].path, format!("/uploads/functions/{id}"));
    let order: Vec<usize> = [
        requests
            .iter()
            .position(|r| r.path.starts_with("/uploads/")),
        requests.iter().position(|r| r.path.ends_with("/deploy")),
    ]
    .into_iter()
    .map(|p| p.expect("both happened"))
    .collect();
    assert!(order[0] < order[1], "deployed after the upload");
    let after = backend.read("function", REGION, &id).await.unwrap();
    assert_eq!(after.reported()["memoryMb"], 256);
    assert!(
        !after.reported().contains_key("code"),
        "Scaleway never says where code came from"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_code_location_is_uploaded_and_deployed_again() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let dir = tempfile::tempdir().unwrap();
    let one = zip(dir.path(), "one.zip", "one");
    let two = zip(dir.path(), "two.zip", "the second version");
    let ns = namespace(&*backend, "shop").await;
    let id = create(
        &*backend,
        REGION,
        "api",
        &function_spec(&ns, Some(one)),
        FLEET,
    )
    .await
    .unwrap()
    .handle;
    server.clear_requests();
    update(
        &*backend,
        REGION,
        &id,
        &function_spec(&ns, Some(two.clone())),
    )
    .await
    .expect("the update deploys the new archive");
    let requests = server.requests();
    let asked = calls(&requests, "GET", "/upload-url");
    let size = std::fs::metadata(&two).unwrap().len().to_string();
    assert_eq!(
        asked[0].query.get("content_length"),
        Some(&size),
        "the new archive went up"
    );
    assert_eq!(uploads(&server).len(), 1);
    assert_eq!(calls(&requests, "POST", "/deploy").len(), 1);
    assert!(
        calls(&requests, "PATCH", &id).is_empty(),
        "nothing else changed: {requests:#?}"
    );
    // Without `code`, an update neither uploads nor deploys.
    server.clear_requests();
    let mut bigger = function_spec(&ns, None);
    bigger.memory_mb = Partial::Known(512);
    let read = update(&*backend, REGION, &id, &bigger).await.unwrap();
    assert_eq!(read.reported()["memoryMb"], 512);
    assert!(uploads(&server).is_empty());
    let patched = calls(&server.requests(), "PATCH", &id)[0].body.clone();
    assert_eq!(patched, serde_json::json!({ "memory_limit": 512 }));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_deployment_is_reported_with_scaleways_reason_and_undone() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let dir = tempfile::tempdir().unwrap();
    let not_zip = dir.path().join("api.zip");
    std::fs::write(&not_zip, b"print('hello')").unwrap();
    let ns = namespace(&*backend, "shop").await;
    let spec = function_spec(&ns, Some(not_zip.to_str().unwrap().to_owned()));
    let err = create(&*backend, REGION, "api", &spec, FLEET)
        .await
        .unwrap_err();
    assert!(err.message.contains("not a zip"), "{err}");
    assert!(err.message.contains("deleted again"), "{err}");
    assert!(
        backend.list("function", REGION).await.unwrap().is_empty(),
        "undone"
    );
    server.clear_requests();
    let url = create(
        &*backend,
        REGION,
        "web",
        &function_spec(&ns, Some("https://example.invalid/a.zip".into())),
        FLEET,
    )
    .await
    .unwrap_err();
    assert_eq!(url.kind, ErrorKind::Invalid);
    let missing = create(
        &*backend,
        REGION,
        "worker",
        &compute_spec("/nonexistent/w.zip".into()),
        FLEET,
    )
    .await
    .unwrap_err();
    assert_eq!(missing.kind, ErrorKind::Invalid);
    assert!(
        server.requests().is_empty(),
        "refused before any call: {:#?}",
        server.requests()
    );
    server.shutdown().await;
}

// ---- Secrets ------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_values_reach_scaleway_and_nothing_else() {
    const VALUE: &str = "s3cr3t-v4lue-of-the-shop";
    let server = stand_in().await;
    let backend = backend(&server, None);
    let handle = secret(&*backend, REGION, "db-password", VALUE, FLEET).await;
    let mut spec = namespace_spec();
    spec.secret_environment = Partial::Known(BTreeMap::from([(
        "DB_PASSWORD".to_owned(),
        Handle::new(handle),
    )]));
    let read = create(&*backend, REGION, "shop", &spec, FLEET)
        .await
        .unwrap();
    let posted = calls(&server.requests(), "POST", "/namespaces")[0]
        .body
        .clone();
    assert_eq!(
        posted["secret_environment_variables"][0]["key"],
        "DB_PASSWORD"
    );
    assert_eq!(
        posted["secret_environment_variables"][0]["value"], "<redacted>",
        "a value was sent"
    );
    assert!(!read.reported().contains_key("secretEnvironment"));
    let again = backend
        .read("functionNamespace", REGION, &read.handle)
        .await
        .unwrap();
    let taken = create(&*backend, REGION, "shop", &spec, FLEET)
        .await
        .unwrap_err();
    assert_eq!(taken.kind, ErrorKind::Conflict);
    // An update removes what is no longer declared, by key.
    spec.secret_environment = Partial::Known(BTreeMap::new());
    update(&*backend, REGION, &read.handle, &spec)
        .await
        .unwrap();
    let patched = calls(&server.requests(), "PATCH", &read.handle)[0]
        .body
        .clone();
    assert_eq!(
        patched["secret_environment_variables"],
        serde_json::json!([{ "key": "DB_PASSWORD" }])
    );
    let everything = format!(
        "{:?} {:?} {} {} {taken}",
        server.requests(),
        read,
        again.observed_json(),
        Value::Object(again.reported().clone())
    );
    assert!(
        !everything.contains(VALUE),
        "the value leaked: {everything}"
    );
    // A secret that does not exist is the declaration's fault: the write is refused
    // as invalid, naming the secret, never answered "not found" as if the namespace
    // itself were absent.
    const GONE: &str = "00000000-0000-4000-8000-000000000000";
    spec.secret_environment =
        Partial::Known(BTreeMap::from([("API_KEY".to_owned(), Handle::new(GONE))]));
    let err = update(&*backend, REGION, &read.handle, &spec)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    assert!(err.message.contains(GONE), "{err}");
    server.shutdown().await;
}

// ---- Statuses, lost answers, denials ------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_is_awaited_from_pending_to_ready_on_the_clock() {
    let server = stand_in().await;
    server.settle_after(3);
    let clock = Arc::new(ManualClock::new());
    let backend = backend_on(&server, &clock, None);
    let read = create(&*backend, REGION, "shop", &namespace_spec(), FLEET)
        .await
        .unwrap();
    let requests = server.requests();
    let polls = calls(&requests, "GET", &format!("/namespaces/{}", read.handle));
    let statuses: Vec<u16> = polls.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [200, 200, 200, 200],
        "three reads pending, the fourth ready"
    );
    assert!(
        clock.now() >= std::time::Duration::from_millis(100 + 200 + 400),
        "{:?}",
        clock.now()
    );
    assert!(
        read.observed_json()["registry_endpoint"].as_str().is_some(),
        "made once ready"
    );
    assert_eq!(
        read.reported()["tags"],
        serde_json::json!([format!("{MARKER_KEY}={FLEET}"), "team=web"])
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_create_answer_is_settled_by_name_and_marker() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    server.lose_answers(ScalewayProduct::Functions, 1);
    let read = create(&*backend, REGION, "shop", &namespace_spec(), FLEET)
        .await
        .expect("the lost create is found by name and marker");
    let listed = backend.list("functionNamespace", REGION).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].handle, read.handle);
    assert_eq!(
        calls(&server.requests(), "POST", "/namespaces")[0].status,
        504
    );
    // Both creates of a compute lost: the namespace, then the function.
    let dir = tempfile::tempdir().unwrap();
    server.lose_answers(ScalewayProduct::Functions, 2);
    let made = create(
        &*backend,
        REGION,
        "worker",
        &compute_spec(zip(dir.path(), "w.zip", "w")),
        FLEET,
    )
    .await
    .expect("both lost answers are settled");
    let computes = backend.list("compute", REGION).await.unwrap();
    assert_eq!(computes.len(), 1);
    assert_eq!(computes[0].handle, made.handle);
    // Another fleet's namespace under the name is not taken for ours.
    server.lose_answers(ScalewayProduct::Functions, 1);
    let other = backend
        .create(
            "functionNamespace",
            REGION,
            "shop",
            SettledSpec::new::<FunctionNamespace>(&namespace_spec()),
            &Marker::new("other"),
        )
        .await
        .unwrap_err();
    assert_eq!(other.kind, ErrorKind::Conflict);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_is_denied_and_throttling_is_throttled_never_absent() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let ns = namespace(&*backend, "shop").await;
    let f = create(&*backend, REGION, "api", &function_spec(&ns, None), FLEET)
        .await
        .unwrap()
        .handle;
    server.deny(ScalewayProduct::Functions);
    for (kind, handle) in [("functionNamespace", &ns), ("function", &f)] {
        assert_eq!(
            backend.read(kind, REGION, handle).await.unwrap_err().kind,
            ErrorKind::Denied
        );
        assert_eq!(
            backend
                .ownership(kind, REGION, handle)
                .await
                .unwrap_err()
                .kind,
            ErrorKind::Denied
        );
        assert_eq!(
            backend.list(kind, REGION).await.unwrap_err().kind,
            ErrorKind::Denied
        );
        assert_eq!(
            backend.delete(kind, REGION, handle).await.unwrap_err().kind,
            ErrorKind::Denied
        );
    }
    server.restore();
    server.throttle(ScalewayProduct::Functions, 1);
    assert_eq!(
        backend.read("function", REGION, &f).await.unwrap_err().kind,
        ErrorKind::Throttled
    );
    assert_eq!(
        backend.read("function", REGION, &f).await.unwrap().handle,
        f
    );
    // A throttled poll is repeated: the delete still completes.
    server.settle_after(2);
    server.clear_requests();
    server.throttle(ScalewayProduct::Functions, 1);
    backend
        .delete("function", REGION, &f)
        .await
        .expect("deleted");
    let statuses: Vec<u16> = server.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses.first(), Some(&429), "{statuses:?}");
    let gone = backend.read("function", REGION, &f).await.unwrap_err();
    assert_eq!(gone.kind, ErrorKind::NotFound);
    server.shutdown().await;
}

// ---- Namespaces and functions -----------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_stays_in_its_namespace_and_a_namespace_with_functions_stays() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let first = namespace(&*backend, "first").await;
    let second = namespace(&*backend, "second").await;
    let f = create(
        &*backend,
        REGION,
        "api",
        &function_spec(&first, None),
        FLEET,
    )
    .await
    .unwrap();
    assert_eq!(f.reported()["namespace"], first.as_str());
    server.clear_requests();
    let moved = update(&*backend, REGION, &f.handle, &function_spec(&second, None))
        .await
        .unwrap_err();
    assert_eq!(moved.kind, ErrorKind::Invalid, "{moved}");
    assert!(
        calls(&server.requests(), "PATCH", &f.handle).is_empty(),
        "nothing was sent"
    );
    let held = backend
        .delete("functionNamespace", REGION, &first)
        .await
        .unwrap_err();
    assert_eq!(held.kind, ErrorKind::DependencyViolation, "{held}");
    assert!(held.message.contains("api"), "{held}");
    assert_eq!(
        backend
            .read("function", REGION, &f.handle)
            .await
            .unwrap()
            .handle,
        f.handle
    );
    backend.delete("function", REGION, &f.handle).await.unwrap();
    // A delete whose answer was lost: the next one finds the namespace `deleting`, sends
    // nothing more, and awaits it gone.
    server.settle_after(2);
    server.lose_answers(ScalewayProduct::Functions, 1);
    let lost = backend
        .delete("functionNamespace", REGION, &first)
        .await
        .unwrap_err();
    assert!(lost.may_have_been_sent, "{lost}");
    server.clear_requests();
    backend
        .delete("functionNamespace", REGION, &first)
        .await
        .expect("empty now");
    assert!(calls(&server.requests(), "DELETE", &first).is_empty());
    assert_eq!(
        backend
            .read("functionNamespace", REGION, &first)
            .await
            .unwrap_err()
            .kind,
        ErrorKind::NotFound
    );
    assert_eq!(
        backend
            .delete("functionNamespace", REGION, &first)
            .await
            .unwrap_err()
            .kind,
        ErrorKind::NotFound
    );
    let bucket = FunctionSettled {
        source_bucket: Partial::Known(Some(Handle::new("code-bucket"))),
        ..function_spec(&second, None)
    };
    assert_eq!(
        create(&*backend, REGION, "web", &bucket, FLEET)
            .await
            .unwrap_err()
            .kind,
        ErrorKind::Invalid
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compute_has_its_own_namespace_which_goes_with_it() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let dir = tempfile::tempdir().unwrap();
    let read = create(
        &*backend,
        REGION,
        "worker",
        &compute_spec(zip(dir.path(), "w.zip", "w")),
        FLEET,
    )
    .await
    .unwrap();
    let (ns, f) = read.handle.split_once('/').expect("namespace/function");
    let requests = server.requests();
    let namespace_post = &calls(&requests, "POST", "/namespaces")[0].body;
    assert_eq!(namespace_post["name"], "worker");
    let tags = namespace_post["tags"].as_array().unwrap();
    assert!(
        tags.contains(&Value::from(format!("{MARKER_KEY}={FLEET}")))
            && tags.contains(&Value::from("infra-kind=compute"))
    );
    let function_post = &calls(&requests, "POST", "/functions")[0].body;
    assert_eq!(function_post["runtime"], "node22");
    assert_eq!(function_post["namespace_id"], ns);
    assert_eq!(read.reported()["runtime"], "nodejs22.x");
    assert_eq!(
        read.reported()["tags"],
        serde_json::json!({ MARKER_KEY: FLEET, "team": "web" })
    );
    assert!(
        read.observed_json()["url"]
            .as_str()
            .unwrap()
            .starts_with("https://")
    );
    // The compute's namespace and function are not another kind's to list (and prune).
    assert!(
        backend
            .list("functionNamespace", REGION)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(backend.list("function", REGION).await.unwrap().is_empty());
    let declared = create(&*backend, REGION, "worker", &namespace_spec(), FLEET)
        .await
        .unwrap_err();
    assert_eq!(declared.kind, ErrorKind::Conflict);
    let role = ComputeSettled {
        role: Some(Handle::new("runner")),
        ..compute_spec(zip(dir.path(), "r.zip", "r"))
    };
    assert_eq!(
        create(&*backend, REGION, "runner", &role, FLEET)
            .await
            .unwrap_err()
            .kind,
        ErrorKind::Invalid
    );
    backend
        .delete("compute", REGION, &read.handle)
        .await
        .expect("deleted");
    let gone = backend
        .read("functionNamespace", REGION, ns)
        .await
        .unwrap_err();
    assert_eq!(
        gone.kind,
        ErrorKind::NotFound,
        "the namespace went with the compute"
    );
    assert_eq!(
        backend.read("function", REGION, f).await.unwrap_err().kind,
        ErrorKind::NotFound
    );
    assert!(backend.list("compute", REGION).await.unwrap().is_empty());
    server.shutdown().await;
}
