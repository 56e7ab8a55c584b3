//! Targeted tests of the `iam` module against its stand-in: the marker and the tags in
//! the description's trailer, the read-modify-write of the shared project policy under
//! a concurrent writer, refusals before any call, and the faults the suite does not
//! reach (a lost answer, throttling, eventual consistency).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use infra_core::kinds::{Iam, IamSettled, Tags};
use infra_core::prelude::Partial;
use infra_core::sdk::{
    Backend, BackendError, ErrorKind, MARKER_KEY, Marker, SettledSpec, Sighting, Written,
};
use infra_gcp::{GcpBackend, GcpConfig, Service};
use infra_testkit::gcp::{GcpServer, GcpService};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use super::{PROJECT, TEST_POLLING, test_retry};
use crate::stand_in;

const HERE: &str = "europe-west1";
const THERE: &str = "us-central1";

fn email(name: &str) -> String {
    format!("{name}@{PROJECT}.iam.gserviceaccount.com")
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn spec(description: Option<&str>, tags: Option<&[(&str, &str)]>) -> IamSettled {
    IamSettled {
        policies: set(&["roles/viewer"]),
        assumed_by: set(&["user:deployer@example.com"]),
        description: description.map_or(Partial::Unknown, |d| Partial::Known(d.to_owned())),
        tags: tags.map_or(Partial::Unknown, |t| {
            Partial::Known(
                t.iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<Tags>(),
            )
        }),
    }
}

async fn create(
    backend: &dyn Backend,
    region: &str,
    name: &str,
    spec: &IamSettled,
    fleet: &str,
) -> Result<Sighting, BackendError> {
    match backend
        .create(
            "iam",
            region,
            name,
            SettledSpec::new::<Iam>(spec),
            &Marker::new(fleet),
        )
        .await?
    {
        Written::Done(read) => Ok(read),
        other => panic!("a GCP create is never deferred: {other:?}"),
    }
}

/// The project's IAM policy, straight from the stand-in.
async fn project_policy(server: &GcpServer) -> Value {
    post(
        &server.address(),
        &format!("/v3/projects/{PROJECT}:getIamPolicy"),
        &json!({}),
    )
    .await
    .1
}

async fn post(base: &str, path: &str, body: &Value) -> (u16, Value) {
    let answer = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("the stand-in answers");
    let status = answer.status().as_u16();
    let bytes = answer.bytes().await.expect("a body");
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn members_of(policy: &Value, role: &str) -> BTreeSet<String> {
    policy["bindings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["role"] == role && b.get("condition").is_none())
        .flat_map(|b| b["members"].as_array().cloned().unwrap_or_default())
        .filter_map(|m| m.as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_marker_tags_and_region_travel_in_the_create_requests_description_and_read_back() {
    let server = stand_in().await;
    let backend = super::backend(&server, None);
    let name = "web-front";
    let declared = spec(Some("Runs the web front end."), Some(&[("team", "web")]));
    let read = create(&*backend, HERE, name, &declared, "shop")
        .await
        .expect("created");
    assert_eq!(read.handle, email(name));

    let creates: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| {
            r.method == "POST" && r.path == format!("/v1/projects/{PROJECT}/serviceAccounts")
        })
        .collect();
    assert_eq!(creates.len(), 1, "one CreateServiceAccount");
    let body = &creates[0].body;
    assert_eq!(body["accountId"], name);
    assert_eq!(body["serviceAccount"]["displayName"], name);
    assert_eq!(
        body["serviceAccount"]["description"],
        "Runs the web front end.\n[infra] managed-by-infra=shop infra-region=europe-west1 team=web",
        "the marker, the region and the tags are in the creating call's description"
    );
    let reported = read.reported();
    assert_eq!(reported["description"], "Runs the web front end.");
    assert_eq!(
        reported["tags"],
        json!({"managed-by-infra": "shop", "team": "web"}),
        "the region is bookkeeping; the marker is reported for the engine to strip"
    );
    assert_eq!(reported["policies"], json!(["roles/viewer"]));
    assert_eq!(reported["assumedBy"], json!(["user:deployer@example.com"]));
    assert_eq!(read.observed_json()["id"], email(name));

    let raw = backend
        .ownership("iam", HERE, &email(name))
        .await
        .expect("ownership");
    assert_eq!(raw.get(MARKER_KEY).map(String::as_str), Some("shop"));
    assert_eq!(raw.get("infra-region").map(String::as_str), Some(HERE));

    // The bindings, as GCP holds them.
    let policy = project_policy(&server).await;
    assert!(
        members_of(&policy, "roles/viewer").contains(&format!("serviceAccount:{}", email(name)))
    );
    assert_eq!(
        members_of(&policy, "roles/owner"),
        set(&["user:owner@example.com"]),
        "the project's other bindings stay"
    );

    // One region's account is another region's absence.
    let listed = backend.list("iam", HERE).await.expect("list");
    assert!(
        listed
            .iter()
            .any(|l| l.name == name && l.handle == email(name))
    );
    assert!(backend.list("iam", THERE).await.expect("list").is_empty());
    let elsewhere = backend.read("iam", THERE, &email(name)).await.unwrap_err();
    assert_eq!(elsewhere.kind, ErrorKind::NotFound, "{elsewhere}");

    // An update of the tags alone rewrites the description, keeping marker and region.
    server.clear_requests();
    let updated = backend
        .update(
            "iam",
            HERE,
            &email(name),
            SettledSpec::new::<Iam>(&spec(None, Some(&[("team", "ops")]))),
        )
        .await
        .expect("updated");
    let Written::Done(updated) = updated else {
        panic!("a GCP update is never deferred")
    };
    assert_eq!(updated.reported()["description"], "Runs the web front end.");
    assert_eq!(
        updated.reported()["tags"],
        json!({"managed-by-infra": "shop", "team": "ops"})
    );
    let patches: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect();
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0].body["updateMask"], "description");
    assert_eq!(
        patches[0].body["serviceAccount"]["description"],
        "Runs the web front end.\n[infra] managed-by-infra=shop infra-region=europe-west1 team=ops"
    );

    // The same update again writes nothing.
    server.clear_requests();
    let _ = backend
        .update(
            "iam",
            HERE,
            &email(name),
            SettledSpec::new::<Iam>(&spec(None, Some(&[("team", "ops")]))),
        )
        .await
        .expect("updated again");
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.method == "GET" || r.path.ends_with(":getIamPolicy")),
        "an update with nothing to change only reads: {:?}",
        server.requests()
    );

    // Delete takes the bindings away first, then the account.
    backend
        .delete("iam", HERE, &email(name))
        .await
        .expect("deleted");
    let policy = project_policy(&server).await;
    assert!(
        !policy.to_string().contains(&email(name)),
        "no binding, not even a `deleted:` one, is left: {policy}"
    );
    let again = backend.delete("iam", HERE, &email(name)).await.unwrap_err();
    assert_eq!(again.kind, ErrorKind::NotFound, "{again}");
    server.shutdown().await;
}

/// A proxy in front of the stand-in's Resource Manager that, before forwarding the
/// first `setIamPolicy`, changes the project policy itself (another binding added):
/// the forwarded request then carries a stale etag.
async fn interfering_proxy(upstream: String, armed: Arc<AtomicBool>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let address = format!("http://{}", listener.local_addr().expect("an address"));
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let upstream = upstream.clone();
            let armed = Arc::clone(&armed);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0_u8; 8192];
                let (head_len, body_len) = loop {
                    let Ok(n) = stream.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                        let len = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        break (end + 4, len);
                    }
                };
                while buf.len() < head_len + body_len {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf[..head_len]).into_owned();
                let mut first = head.lines().next().unwrap_or("").split(' ');
                let method = first.next().unwrap_or("GET").to_owned();
                let target = first.next().unwrap_or("/").to_owned();
                let body = buf[head_len..head_len + body_len].to_vec();
                if target.contains(":setIamPolicy") && armed.swap(false, Ordering::SeqCst) {
                    let get = format!("/v3/projects/{PROJECT}:getIamPolicy");
                    let (_, mut policy) = post(&upstream, &get, &json!({})).await;
                    policy["bindings"]
                        .as_array_mut()
                        .expect("the project has bindings")
                        .push(
                            json!({"role": "roles/editor", "members": ["user:other@example.com"]}),
                        );
                    let set = format!("/v3/projects/{PROJECT}:setIamPolicy");
                    let (status, _) = post(&upstream, &set, &json!({ "policy": policy })).await;
                    assert_eq!(status, 200, "the other writer's change is made");
                }
                let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
                let Ok(answer) = reqwest::Client::new()
                    .request(method, format!("{upstream}{target}"))
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                else {
                    return;
                };
                let status = answer.status();
                let bytes = answer.bytes().await.unwrap_or_default();
                let reply = format!(
                    "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n",
                    status.as_u16(),
                    status.canonical_reason().unwrap_or("Status"),
                    bytes.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
                let _ = stream.write_all(&bytes).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    address
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_change_to_the_project_policy_is_read_again_and_kept() {
    let server = stand_in().await;
    let armed = Arc::new(AtomicBool::new(false));
    let config = GcpConfig::stand_in(PROJECT, &server.address())
        .expect("loopback")
        .clock(server.clock())
        .polling(TEST_POLLING)
        .retry_policy(test_retry());
    let proxy = interfering_proxy(server.address(), Arc::clone(&armed)).await;
    let config = config
        .stand_in_endpoint(Service::ResourceManager, &proxy)
        .expect("loopback");
    let backend = Arc::new(GcpBackend::new(config));

    armed.store(true, Ordering::SeqCst);
    let read = create(&*backend, HERE, "raced-one", &spec(None, None), "shop")
        .await
        .expect("the create succeeds despite the concurrent change");
    assert!(!armed.load(Ordering::SeqCst), "the other writer did write");
    assert_eq!(read.reported()["policies"], json!(["roles/viewer"]));

    let sets: Vec<u16> = server
        .requests()
        .iter()
        .filter(|r| r.path == format!("/v3/projects/{PROJECT}:setIamPolicy"))
        .map(|r| r.status)
        .collect();
    assert_eq!(
        sets,
        [200, 409, 200],
        "the other writer's set, ours refused for its stale etag, ours again"
    );
    let policy = project_policy(&server).await;
    assert_eq!(
        members_of(&policy, "roles/editor"),
        set(&["user:other@example.com"]),
        "the other writer's binding is kept: {policy}"
    );
    assert_eq!(
        members_of(&policy, "roles/viewer"),
        set(&[&format!("serviceAccount:{}", email("raced-one"))])
    );
    assert_eq!(
        members_of(&policy, "roles/owner"),
        set(&["user:owner@example.com"])
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_gcp_would_refuse_is_refused_before_any_call() {
    let server = stand_in().await;
    let backend = super::backend(&server, None);
    let good = spec(Some("fine"), Some(&[("team", "web")]));
    let cases: Vec<(&str, IamSettled, &str)> = vec![
        ("abc", good.clone(), "6 to 30 characters"),
        ("Web_Front", good.clone(), "6 to 30 characters"),
        ("ends-with-", good.clone(), "6 to 30 characters"),
        (
            "bad-role",
            IamSettled {
                policies: set(&["viewer"]),
                ..good.clone()
            },
            "roles/",
        ),
        (
            "bad-member",
            IamSettled {
                assumed_by: set(&["deployer@example.com"]),
                ..good.clone()
            },
            "user:EMAIL",
        ),
        (
            "bad-tag",
            IamSettled {
                tags: Partial::Known(Tags::from([("Team".to_owned(), "web".to_owned())])),
                ..good.clone()
            },
            "\"Team\"",
        ),
        (
            "too-long",
            IamSettled {
                description: Partial::Known("d".repeat(220)),
                ..good.clone()
            },
            "256 bytes",
        ),
        (
            "fake-trailer",
            IamSettled {
                description: Partial::Known("x\n[infra] managed-by-infra=other".to_owned()),
                ..good.clone()
            },
            "[infra]",
        ),
    ];
    for (name, declared, says) in cases {
        let err = create(&*backend, HERE, name, &declared, "shop")
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid, "{name}: {err}");
        assert!(err.message.contains(says), "{name}: {}", err.message);
    }
    assert!(
        server.requests().is_empty(),
        "nothing was sent: {:?}",
        server.requests()
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_refused_after_the_create_says_the_account_exists_with_the_marker() {
    let server = stand_in().await;
    let backend = super::backend(&server, None);
    // Well formed, so not refused before calling; not in the project's hierarchy.
    let declared = IamSettled {
        policies: set(&["projects/another-project/roles/custom"]),
        ..spec(None, None)
    };
    let err = create(&*backend, HERE, "half-made", &declared, "shop")
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    assert!(
        err.message
            .contains("was created, carrying this fleet's marker")
            && err.message.contains("next apply"),
        "{}",
        err.message
    );
    let raw = backend
        .ownership("iam", HERE, &email("half-made"))
        .await
        .expect("the account exists");
    assert_eq!(raw.get(MARKER_KEY).map(String::as_str), Some("shop"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_answer_was_lost_is_found_by_email_and_marker() {
    let server = stand_in().await;
    let backend = super::backend(&server, None);
    server.lose_answers(GcpService::Iam, 1);
    let read = create(&*backend, HERE, "lost-answer", &spec(None, None), "shop")
        .await
        .expect("found and answered created");
    assert_eq!(read.handle, email("lost-answer"));
    assert_eq!(read.reported()["policies"], json!(["roles/viewer"]));
    let creates = server
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/serviceAccounts"))
        .count();
    assert_eq!(creates, 1, "the create was not sent twice");

    let raw = backend
        .ownership("iam", HERE, &email("lost-answer"))
        .await
        .expect("ownership");
    assert_eq!(raw.get(MARKER_KEY).map(String::as_str), Some("shop"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_create_is_retried_and_a_lagging_read_does_not_fail_it() {
    let server = stand_in().await;
    let backend = super::backend(&server, None);
    server.throttle(GcpService::Iam, 1);
    create(&*backend, HERE, "throttled", &spec(None, None), "shop")
        .await
        .expect("the throttled create is retried and done");
    let creates: Vec<u16> = server
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/serviceAccounts"))
        .map(|r| r.status)
        .collect();
    assert_eq!(creates, [429, 200], "sent again once it was throttled");

    server.lag(2);
    let read = create(
        &*backend,
        HERE,
        "lagging",
        &spec(Some("slow"), None),
        "shop",
    )
    .await
    .expect("a create whose read lags still answers");
    assert_eq!(read.handle, email("lagging"));
    assert_eq!(read.reported()["description"], "slow");
    assert_eq!(read.reported()["tags"], json!({"managed-by-infra": "shop"}));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_made_elsewhere_is_marked_in_its_description_and_listed() {
    let server = stand_in().await;
    let backend = super::backend(&server, None);
    let (status, _) = post(
        &server.address(),
        &format!("/v1/projects/{PROJECT}/serviceAccounts"),
        &json!({"accountId": "made-by-hand", "serviceAccount": {"description": "A person made me."}}),
    )
    .await;
    assert_eq!(status, 200);
    let handle = email("made-by-hand");
    assert!(backend.list("iam", HERE).await.expect("list").is_empty());
    let before = backend
        .ownership("iam", HERE, &handle)
        .await
        .expect("ownership");
    assert!(before.is_empty(), "{before:?}");

    backend
        .mark("iam", HERE, &handle, &Marker::new("shop"))
        .await
        .expect("marked");
    let read = backend.read("iam", HERE, &handle).await.expect("read");
    assert_eq!(read.reported()["description"], "A person made me.");
    assert_eq!(read.reported()["tags"], json!({"managed-by-infra": "shop"}));
    let listed = backend.list("iam", HERE).await.expect("list");
    assert_eq!(listed.len(), 1, "marked in {HERE}, it is listed there");

    let refused = backend
        .mark("iam", HERE, &handle, &Marker::new("blog"))
        .await
        .unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Conflict, "{refused}");
    let after = backend
        .ownership("iam", HERE, &handle)
        .await
        .expect("ownership");
    assert_eq!(after.get(MARKER_KEY).map(String::as_str), Some("shop"));
    server.shutdown().await;
}

/// A fleet of one account, `half-done`, granted `role`.
fn one_account(role: &str) -> infra_core::prelude::Fleet {
    let mut f = infra_core::prelude::Fleet::builder("shop");
    f.declare(
        infra_core::prelude::GcpRegion::EuropeWest1,
        "half-done",
        Iam {
            policies: infra_core::prelude::Expr::lit(set(&[role])),
            assumed_by: infra_core::prelude::Expr::lit(BTreeSet::new()),
            description: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    f.build().expect("the fleet is sound")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_grant_fails_the_next_apply_converges_without_a_second_create() {
    use infra_core::engine::{Change, Engine, MemoryStore, Options};
    let server = stand_in().await;
    let backend = super::backend(&server, None);
    let engine = Engine::new(
        infra_core::prelude::Backends::new().with(backend.clone()),
        Arc::new(MemoryStore::new()),
    );
    let options = Options::default();
    let failed = engine
        .apply(
            &one_account("projects/another-project/roles/custom").plan(),
            &options,
        )
        .await
        .expect("apply");
    assert!(!failed.result.is_success(), "{:#?}", failed.result);

    server.clear_requests();
    let fixed = engine
        .apply(&one_account("roles/viewer").plan(), &options)
        .await
        .expect("apply");
    assert!(fixed.result.is_success(), "{:#?}", fixed.result);
    assert!(
        fixed
            .result
            .applied
            .iter()
            .all(|a| a.change != Change::Created),
        "the account is not created again: {:#?}",
        fixed.result
    );
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.method == "POST" && r.path.ends_with("/serviceAccounts")),
        "no second CreateServiceAccount"
    );
    let policy = project_policy(&server).await;
    assert!(
        members_of(&policy, "roles/viewer")
            .contains(&format!("serviceAccount:{}", email("half-done")))
    );
    let again = engine
        .plan(&one_account("roles/viewer").plan(), &options)
        .await
        .expect("plan");
    assert!(!again.has_changes(), "{}", again.render());
    server.shutdown().await;
}
