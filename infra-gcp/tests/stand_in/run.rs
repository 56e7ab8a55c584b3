//! Targeted tests of the `run` module (the `compute` kind on Cloud Run) against its
//! stand-in: what the conformance suite does not reach.

use std::collections::BTreeMap;

use infra_core::kinds::{Access, Compute, ComputeSettled, EnvVars, Iam, Secrets};
use infra_core::prelude::{Handle, Partial};
use infra_core::sdk::{Backend, ErrorKind, MARKER_KEY, Marker, SettledSpec, Sighting, Written};
use infra_testkit::gcp::{GcpServer, GcpService, RecordedRequest};
use serde_json::{Value, json};

use super::*;
use crate::stand_in;

const REGION: &str = "europe-west1";
const FLEET: &str = "runfleet";

fn spec() -> ComputeSettled {
    ComputeSettled {
        runtime: "python312".to_owned(),
        handler: "app.handler".to_owned(),
        code: "gs://run-code/app.zip".to_owned(),
        code_sha256: Partial::Unknown,
        memory_mb: Partial::Known(256),
        timeout_seconds: Partial::Known(30),
        environment: Partial::Known(EnvVars::from([("MODE".to_owned(), "test".to_owned())])),
        secret_environment: Partial::Unknown,
        role: None,
        tags: Partial::Known(BTreeMap::from([("team".to_owned(), "web".to_owned())])),
        access: Access::Private,
    }
}

fn handle_of(name: &str) -> String {
    format!("projects/{PROJECT}/locations/{REGION}/services/{name}")
}

async fn start() -> (GcpServer, Arc<Router>) {
    let server = stand_in().await;
    let backend = backend(&server, None);
    (server, backend)
}

async fn create(
    backend: &Router,
    name: &str,
    spec: &ComputeSettled,
) -> Result<Sighting, infra_core::sdk::BackendError> {
    let marker = Marker::new(FLEET);
    match backend
        .create(
            "compute",
            REGION,
            name,
            SettledSpec::new::<Compute>(spec),
            &marker,
        )
        .await?
    {
        Written::Done(read) => Ok(read),
        other => panic!("Cloud Run never defers: {other:?}"),
    }
}

async fn update(backend: &Router, handle: &str, spec: &ComputeSettled) -> Sighting {
    match backend
        .update("compute", REGION, handle, SettledSpec::new::<Compute>(spec))
        .await
        .expect("the update succeeds")
    {
        Written::Done(read) => read,
        other => panic!("Cloud Run never defers: {other:?}"),
    }
}

fn version(read: &Sighting) -> String {
    read.observed_json()["version"]
        .as_str()
        .unwrap_or_else(|| panic!("no version reported: {}", read.observed_json()))
        .to_owned()
}

fn writes(server: &GcpServer) -> Vec<RecordedRequest> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_sends_the_marker_and_the_build_in_the_one_create_request() {
    let (server, backend) = start().await;
    let read = create(&backend, "run-marker", &spec())
        .await
        .expect("created");
    assert_eq!(read.handle, handle_of("run-marker"));
    let writes = writes(&server);
    assert_eq!(writes.len(), 1, "one write, the create: {writes:#?}");
    let sent = &writes[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(
        sent.path,
        format!("/v2/projects/{PROJECT}/locations/{REGION}/services")
    );
    assert_eq!(
        sent.query.get("serviceId").map(String::as_str),
        Some("run-marker")
    );
    assert_eq!(sent.body["labels"][MARKER_KEY], FLEET);
    assert_eq!(sent.body["labels"]["team"], "web");
    assert_eq!(
        sent.body["buildConfig"]["sourceLocation"],
        "gs://run-code/app.zip"
    );
    assert_eq!(sent.body["buildConfig"]["functionTarget"], "app.handler");
    assert_eq!(
        sent.body["buildConfig"]["baseImage"],
        "europe-west1-docker.pkg.dev/serverless-runtimes/google-22-full/runtimes/python312"
    );
    let container = &sent.body["template"]["containers"][0];
    assert_eq!(container["resources"]["limits"]["memory"], "256Mi");
    assert_eq!(container["resources"]["cpuIdle"], true);
    assert_eq!(
        container["env"],
        json!([{ "name": "MODE", "value": "test" }])
    );
    assert_eq!(sent.body["template"]["timeout"], "30s");
    let reported = read.reported();
    assert_eq!(reported["runtime"], "python312");
    assert_eq!(reported["code"], "gs://run-code/app.zip");
    assert_eq!(reported["tags"][MARKER_KEY], FLEET);
    assert_eq!(
        reported["role"],
        Value::Null,
        "the default identity is no role"
    );
    assert!(
        !reported.contains_key("codeSha256"),
        "Cloud Run reports no digest"
    );
    let url = read.observed_json()["url"].as_str().unwrap_or("");
    assert!(url.starts_with("https://run-marker-"), "{url}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_operations_are_polled_to_their_end() {
    let (server, backend) = start().await;
    let clock = server.clock();
    let rollout = Duration::from_secs(5);
    server.settling(rollout);
    let started = clock.now();
    let read = create(&backend, "run-slow", &spec())
        .await
        .expect("created");
    let polls = |server: &GcpServer| {
        server
            .requests()
            .iter()
            .filter(|r| r.method == "GET" && r.path.contains("/operations/"))
            .count()
    };
    let mut seen = polls(&server);
    assert!(
        seen >= 2,
        "the create's operation was polled to its end: {seen}"
    );
    assert!(
        clock.now() - started >= rollout,
        "the create waited for its rollout"
    );
    assert!(version(&read).starts_with("run-slow-00001-"));
    let mut bigger = spec();
    bigger.memory_mb = Partial::Known(512);
    let started = clock.now();
    let updated = update(&backend, &read.handle, &bigger).await;
    assert_eq!(updated.reported()["memoryMb"], 512);
    assert!(
        version(&updated).starts_with("run-slow-00002-"),
        "ready at its end"
    );
    assert!(polls(&server) >= seen + 2, "and so was the update's");
    assert!(clock.now() - started >= rollout);
    seen = polls(&server);
    backend
        .delete("compute", REGION, &read.handle)
        .await
        .expect("deleted");
    assert!(polls(&server) >= seen + 2, "and the delete's");
    let gone = backend.read("compute", REGION, &read.handle).await;
    assert_eq!(gone.unwrap_err().kind, ErrorKind::NotFound);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_answer_was_lost_is_found_by_name() {
    let (server, backend) = start().await;
    server.lose_answers(GcpService::Run, 1);
    let read = create(&backend, "run-lost", &spec())
        .await
        .expect("the create is found and answered");
    assert_eq!(read.handle, handle_of("run-lost"));
    assert_eq!(read.reported()["tags"][MARKER_KEY], FLEET);
    let creates: Vec<_> = writes(&server)
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(creates.len(), 1, "the create was not sent again");
    assert_eq!(creates[0].status, 504, "its answer was lost");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_still_running_at_the_deadline_is_settled_by_name() {
    let server = stand_in().await;
    let backend = backend_polling(&server, None, SHORT_DEADLINE);
    // Far longer than the deadline allows (300 ms, in real time).
    server.settling(Duration::from_secs(3600));
    let read = create(&backend, "run-stuck", &spec())
        .await
        .expect("the service exists with this fleet's marker: the create happened");
    assert_eq!(read.handle, handle_of("run-stuck"));
    assert_eq!(read.reported()["tags"][MARKER_KEY], FLEET);
    // The name is now taken: another fleet's create of it is a conflict.
    let theirs = Marker::new("otherfleet");
    let taken = backend
        .create(
            "compute",
            REGION,
            "run-stuck",
            SettledSpec::new::<Compute>(&spec()),
            &theirs,
        )
        .await
        .unwrap_err();
    assert_eq!(taken.kind, ErrorKind::Conflict, "{taken}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_change_makes_a_new_revision_reported_as_version() {
    let (server, backend) = start().await;
    let read = create(&backend, "run-rev", &spec()).await.expect("created");
    let first = version(&read);
    assert!(first.starts_with("run-rev-00001-"), "{first}");

    let mut changed = spec();
    changed.environment =
        Partial::Known(EnvVars::from([("MODE".to_owned(), "changed".to_owned())]));
    let second = update(&backend, &read.handle, &changed).await;
    let second_version = version(&second);
    assert!(
        second_version.starts_with("run-rev-00002-"),
        "{second_version}"
    );
    assert_eq!(second.reported()["environment"]["MODE"], "changed");

    // Labels are the service's, not the template's: no new revision.
    let mut relabelled = changed.clone();
    relabelled.tags = Partial::Known(BTreeMap::from([("team".to_owned(), "ops".to_owned())]));
    let third = update(&backend, &read.handle, &relabelled).await;
    assert_eq!(version(&third), second_version);
    assert_eq!(third.reported()["tags"]["team"], "ops");
    assert_eq!(
        third.reported()["tags"][MARKER_KEY],
        FLEET,
        "the marker is kept"
    );

    // The same update again sends nothing.
    server.clear_requests();
    let again = update(&backend, &read.handle, &relabelled).await;
    assert_eq!(version(&again), second_version);
    assert!(writes(&server).is_empty(), "{:#?}", writes(&server));

    // New code is built again, and runs as a new revision.
    let mut moved = relabelled.clone();
    moved.code = "gs://run-code/app-2.zip".to_owned();
    let fourth = update(&backend, &read.handle, &moved).await;
    assert!(version(&fourth).starts_with("run-rev-00003-"));
    assert_eq!(fourth.reported()["code"], "gs://run-code/app-2.zip");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_passed_by_reference_and_an_identity_by_email() {
    let (server, backend) = start().await;
    let mut with_secret = spec();
    with_secret.secret_environment = Partial::Known(BTreeMap::from([(
        "DB_PASSWORD".to_owned(),
        Handle::<Secrets>::new(format!("projects/{PROJECT}/secrets/db")),
    )]));
    with_secret.role = Some(Handle::<Iam>::new(format!(
        "runner@{PROJECT}.iam.gserviceaccount.com"
    )));
    let read = create(&backend, "run-secret", &with_secret)
        .await
        .expect("created");
    let sent = &writes(&server)[0];
    let env = &sent.body["template"]["containers"][0]["env"];
    assert_eq!(
        env[1],
        json!({
            "name": "DB_PASSWORD",
            "valueSource": { "secretKeyRef": {
                "secret": format!("projects/{PROJECT}/secrets/db"),
                "version": "latest",
            } },
        })
    );
    let reported = read.reported();
    assert_eq!(
        reported["secretEnvironment"]["DB_PASSWORD"],
        format!("projects/{PROJECT}/secrets/db")
    );
    assert_eq!(reported["environment"], json!({ "MODE": "test" }));
    assert_eq!(
        reported["role"],
        format!("runner@{PROJECT}.iam.gserviceaccount.com")
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_runs_as_it_is_with_runtime_and_handler_unknown() {
    let (server, backend) = start().await;
    let mut image = spec();
    image.code = "europe-west1-docker.pkg.dev/p/repo/app:1".to_owned();
    let read = create(&backend, "run-image", &image)
        .await
        .expect("created");
    let sent = &writes(&server)[0];
    assert!(sent.body.get("buildConfig").is_none(), "{}", sent.body);
    assert_eq!(
        sent.body["template"]["containers"][0]["image"],
        "europe-west1-docker.pkg.dev/p/repo/app:1"
    );
    let reported = read.reported();
    assert_eq!(reported["code"], "europe-west1-docker.pkg.dev/p/repo/app:1");
    assert!(!reported.contains_key("runtime") && !reported.contains_key("handler"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cloud_run_would_refuse_is_refused_before_any_call() {
    let (server, backend) = start().await;
    let mut lambda_runtime = spec();
    lambda_runtime.runtime = "python3.12".to_owned();
    let mut s3 = spec();
    s3.code = "s3://bucket/app.zip".to_owned();
    let mut reserved = spec();
    reserved.environment = Partial::Known(EnvVars::from([("PORT".to_owned(), "8080".to_owned())]));
    let mut role = spec();
    role.role = Some(Handle::new("runner"));
    let mut label = spec();
    label.tags = Partial::Known(BTreeMap::from([("Team".to_owned(), "web".to_owned())]));
    let cases = [
        ("Bad_Name", spec()),
        ("run-ok", lambda_runtime),
        ("run-ok", s3),
        ("run-ok", reserved),
        ("run-ok", role),
        ("run-ok", label),
    ];
    for (name, bad) in cases {
        let err = create(&backend, name, &bad).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid, "{name}: {err}");
    }
    assert!(server.requests().is_empty(), "{:#?}", server.requests());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_read_is_retried_and_lag_does_not_fail_a_create() {
    let (server, backend) = start().await;
    server.lag(2);
    let read = create(&backend, "run-lag", &spec())
        .await
        .expect("a create whose service is not yet visible succeeds");
    assert_eq!(read.reported()["memoryMb"], 256);
    server.lag(0);
    server.clear_requests();
    server.throttle(GcpService::Run, 1);
    let again = backend
        .read("compute", REGION, &read.handle)
        .await
        .expect("the throttled read is retried");
    assert_eq!(again.handle, read.handle);
    let gets: Vec<u16> = server
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path == format!("/v2/{}", read.handle))
        .map(|r| r.status)
        .collect();
    assert_eq!(gets, [429, 200]);
    let listed = backend.list("compute", REGION).await.expect("listed");
    assert!(
        listed
            .iter()
            .any(|l| l.name == "run-lag" && l.handle == read.handle)
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_of_another_region_is_not_found_here_and_lists_take_every_page() {
    let (server, backend) = start().await;
    let read = create(&backend, "run-here", &spec())
        .await
        .expect("created");
    let elsewhere = backend.read("compute", "us-central1", &read.handle).await;
    assert_eq!(elsewhere.unwrap_err().kind, ErrorKind::NotFound);
    let deleted = backend.delete("compute", "us-central1", &read.handle).await;
    assert_eq!(deleted.unwrap_err().kind, ErrorKind::NotFound);
    for i in 0..55 {
        create(&backend, &format!("run-many-{i}"), &spec())
            .await
            .expect("created");
    }
    let listed = backend.list("compute", REGION).await.expect("listed");
    assert_eq!(
        listed.len(),
        56,
        "every page is read (the stand-in pages by 50)"
    );
    assert!(
        backend
            .list("compute", "us-central1")
            .await
            .expect("listed")
            .is_empty()
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mark_adds_the_marker_alone_to_a_service_made_elsewhere() {
    let (server, backend) = start().await;
    // Made by another tool, with the official client and no marker.
    let client = google_cloud_run_v2::client::Services::builder()
        .with_endpoint(server.address())
        .with_credentials(google_cloud_auth::credentials::anonymous::Builder::new().build())
        .build()
        .await
        .expect("the client builds");
    use google_cloud_run_v2::model::{Container, RevisionTemplate, Service};
    let mut template = RevisionTemplate::default();
    template
        .containers
        .push(Container::new().set_image("us-docker.pkg.dev/cloudrun/container/hello"));
    let mut service = Service::new();
    service.template = Some(template);
    service.labels = [("team".to_owned(), "web".to_owned())].into();
    let op = client
        .create_service()
        .set_parent(format!("projects/{PROJECT}/locations/{REGION}"))
        .set_service_id("run-foreign")
        .set_service(service)
        .send()
        .await
        .expect("the create is accepted");
    assert!(!op.name.is_empty());
    // The other tool waits for its rollout (time passes on the stand-in's clock).
    server
        .clock()
        .sleep(infra_testkit::gcp::DEFAULT_SETTLING)
        .await;
    let handle = handle_of("run-foreign");
    let before = backend
        .read("compute", REGION, &handle)
        .await
        .expect("read");
    let marker = Marker::new(FLEET);
    backend
        .mark("compute", REGION, &handle, &marker)
        .await
        .expect("marked");
    let tags = backend
        .ownership("compute", REGION, &handle)
        .await
        .expect("ownership");
    assert_eq!(
        tags,
        BTreeMap::from([
            (MARKER_KEY.to_owned(), FLEET.to_owned()),
            ("team".to_owned(), "web".to_owned()),
        ])
    );
    let after = backend
        .read("compute", REGION, &handle)
        .await
        .expect("read");
    assert_eq!(
        version(&after),
        version(&before),
        "a label is no new revision"
    );
    let mut reported = after.reported().clone();
    reported.remove("tags");
    let mut was = before.reported().clone();
    was.remove("tags");
    assert_eq!(reported, was, "nothing but the labels changed");
    // Marked twice: nothing is written.
    server.clear_requests();
    backend
        .mark("compute", REGION, &handle, &marker)
        .await
        .expect("marked again");
    assert!(writes(&server).is_empty());
    let other = backend
        .mark("compute", REGION, &handle, &Marker::new("otherfleet"))
        .await;
    assert_eq!(other.unwrap_err().kind, ErrorKind::Conflict);
    server.shutdown().await;
}

/// Sets the IAM policy of the service `name` behind the fleet's back, as another tool
/// would: `members` hold `roles/run.invoker`.
async fn grant_invoker_outside(server: &GcpServer, name: &str, members: &[&str]) {
    let answer = reqwest::Client::new()
        .post(format!(
            "{}/v2/{}:setIamPolicy",
            server.address(),
            handle_of(name)
        ))
        .json(&json!({"policy": {"bindings": [{"role": "roles/run.invoker", "members": members}]}}))
        .send()
        .await
        .expect("the stand-in answers");
    assert!(answer.status().is_success(), "{:?}", answer.text().await);
}

fn invokers(server: &GcpServer, name: &str) -> Vec<String> {
    server
        .policy_bindings(&handle_of(name))
        .into_iter()
        .filter(|(role, _)| role == "roles/run.invoker")
        .flat_map(|(_, members)| members)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_is_private_unless_declared_public_and_reads_back_who_may_call_it() {
    let (server, backend) = start().await;
    let private = create(&backend, "run-private", &spec())
        .await
        .expect("created");
    assert_eq!(private.reported()["access"], "private");
    assert!(
        invokers(&server, "run-private").is_empty(),
        "no one unnamed may call it"
    );

    let public = ComputeSettled {
        access: Access::Public,
        ..spec()
    };
    let read = create(&backend, "run-public", &public)
        .await
        .expect("created");
    assert_eq!(read.reported()["access"], "public");
    assert_eq!(invokers(&server, "run-public"), ["allUsers"]);
    let again = backend
        .read("compute", REGION, &read.handle)
        .await
        .expect("read");
    assert_eq!(again.reported()["access"], "public");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_found_public_when_declared_private_is_made_private_again() {
    let (server, backend) = start().await;
    let read = create(&backend, "run-opened", &spec())
        .await
        .expect("created");
    let caller = "serviceAccount:caller@another-project.iam.gserviceaccount.com";
    grant_invoker_outside(
        &server,
        "run-opened",
        &["allUsers", "allAuthenticatedUsers", caller],
    )
    .await;
    let seen = backend
        .read("compute", REGION, &read.handle)
        .await
        .expect("read");
    assert_eq!(seen.reported()["access"], "public", "the opening is seen");
    let closed = update(&backend, &read.handle, &spec()).await;
    assert_eq!(closed.reported()["access"], "private");
    assert_eq!(
        invokers(&server, "run-opened"),
        [caller],
        "anyone is gone; the caller someone named is kept"
    );
    // Declared public, it is opened again, by a write of the policy alone.
    server.clear_requests();
    let opened = update(
        &backend,
        &read.handle,
        &ComputeSettled {
            access: Access::Public,
            ..spec()
        },
    )
    .await;
    assert_eq!(opened.reported()["access"], "public");
    let writes: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.method != "GET")
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(writes, [format!("/v2/{}:setIamPolicy", read.handle)]);
    server.shutdown().await;
}
