//! Queues' activation and credentials: a plan shows the activation, the first write
//! does it once, every SQS call is signed with Queues credentials the backend made for
//! the run (never the API key), those are deleted when the backend is dropped, stale
//! ones of earlier runs by the next run, and a key without the rights is refused before
//! any queue call. The control plane is the stand-in's (`mnq`); the queues are moto's,
//! reached through a recording relay (`infra_testkit::relay`).

use std::sync::Arc;
use std::time::Duration;

use infra_core::engine::{Engine, MemoryStore, Options};
use infra_core::kinds::{Queues, QueuesSettled, Tags};
use infra_core::prelude::{Backends, Expr, Fleet, Partial, ScalewayRegion, SecretString};
use infra_core::sdk::{Backend, ErrorKind, ManualClock, Polling, Router};
use infra_scaleway::{QueuesKey, ScalewayBackend, ScalewayConfig};
use infra_testkit::scaleway::{STAND_IN_SECRET_KEY, ScalewayProduct, ScalewayServer};

use super::support::{create, stand_in};
use infra_testkit::relay::Relay;

use super::wire::fresh;
use super::{ORGANIZATION, PROJECT, moto};

const REGION: &str = "fr-par";
/// The API key's access key in a stand-in configuration.
const API_KEY: &str = "SCWSTANDIN0000000000";

/// A configuration on `server` without an SQS endpoint of its own: the backend takes
/// the one Queues answers (`sqs_endpoint_url`).
fn config(server: &ScalewayServer, s3: &str) -> ScalewayConfig {
    ScalewayConfig::new(API_KEY, SecretString::new(STAND_IN_SECRET_KEY), PROJECT)
        .organization(ORGANIZATION)
        .api_url(server.address())
        .s3_endpoint(s3)
        // The stand-in's statuses settle on its clock, which the backend's waits move.
        .clock(server.clock())
        .polling(Polling {
            first: Duration::from_millis(100),
            longest: Duration::from_secs(1),
            deadline: Duration::from_secs(60),
        })
}

fn queue() -> QueuesSettled {
    QueuesSettled {
        fifo: false,
        visibility_timeout_seconds: Partial::Known(30),
        retention_seconds: Partial::Known(345_600),
        dead_letter: Partial::Known(None),
        max_receive_count: Partial::Unknown,
        tags: Partial::Known(Tags::new()),
    }
}

fn fleet(names: &[String]) -> Fleet {
    let mut fleet = Fleet::builder("queued");
    for name in names {
        fleet.declare(
            ScalewayRegion::FrPar,
            name.as_str(),
            Queues {
                fifo: Expr::lit(false),
                visibility_timeout_seconds: Partial::Known(Expr::lit(30)),
                retention_seconds: Partial::Unknown,
                dead_letter: Partial::Known(None),
                max_receive_count: Partial::Unknown,
                tags: Partial::Unknown,
            },
        );
    }
    fleet.build().expect("a sound fleet")
}

/// The calls to Queues' control plane, as `METHOD last-segment` lines.
fn mnq_calls(server: &ScalewayServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/mnq/"))
        .map(|r| {
            let last = r.path.rsplit('/').next().unwrap_or_default();
            format!("{} {last}", r.method)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn activation_is_shown_in_the_plan_then_done_once_by_the_first_write() {
    let Some(moto) = moto() else {
        return;
    };
    let server = stand_in().await;
    server.queues_endpoint(&moto);
    let backend = Arc::new(ScalewayBackend::new(config(&server, &moto)));
    let engine = Engine::new(
        Backends::new().with(backend.clone() as Arc<dyn Backend>),
        Arc::new(MemoryStore::new()),
    )
    .with_clock(Arc::new(ManualClock::new()));
    let first = [fresh("activated-a")];
    let plan = engine
        .plan(&fleet(&first).plan(), &Options::default())
        .await
        .expect("the plan runs");
    let said: Vec<&str> = plan.prerequisites.iter().map(|p| p.what.as_str()).collect();
    let activation = format!("Queues' SQS API will be activated for project {PROJECT} in {REGION}");
    assert!(said.contains(&activation.as_str()), "{said:?}");
    assert!(
        plan.render().contains(&activation),
        "the plan shows it:\n{}",
        plan.render()
    );
    // A plan looks only: Queues' status was read, nothing activated or made, and no SQS
    // call was needed (a project without Queues holds no queue).
    let calls = mnq_calls(&server);
    assert!(
        !calls.is_empty() && calls.iter().all(|c| c == "GET sqs-info"),
        "{calls:?}"
    );

    let applied = engine
        .apply(&fleet(&first).plan(), &Options::default())
        .await
        .expect("the apply runs");
    assert!(applied.is_success(), "{:#?}", applied.result);
    let calls = mnq_calls(&server);
    let count = |line: &str| calls.iter().filter(|c| *c == line).count();
    assert_eq!(count("POST activate-sqs"), 1, "{calls:?}");
    assert_eq!(count("POST sqs-credentials"), 1, "{calls:?}");

    // Activated: the next plan says nothing of it, and more queues need nothing more.
    let both = [first[0].clone(), fresh("activated-b")];
    let plan = engine
        .plan(&fleet(&both).plan(), &Options::default())
        .await
        .expect("the plan runs");
    assert!(plan.prerequisites.is_empty(), "{:?}", plan.prerequisites);
    let applied = engine
        .apply(&fleet(&both).plan(), &Options::default())
        .await
        .expect("the apply runs");
    assert!(applied.is_success(), "{:#?}", applied.result);
    let calls = mnq_calls(&server);
    let count = |line: &str| calls.iter().filter(|c| *c == line).count();
    assert_eq!(
        (count("POST activate-sqs"), count("POST sqs-credentials")),
        (1, 1),
        "{calls:?}"
    );
    let destroyed = engine
        .apply(&fleet(&both).teardown(), &Options::default())
        .await
        .expect("the teardown runs");
    assert!(destroyed.is_success(), "{:#?}", destroyed.result);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_calls_are_signed_with_queues_credentials_made_for_the_run_and_deleted_after() {
    let Some(moto) = moto() else {
        return;
    };
    let server = stand_in().await;
    let relay = Relay::start(&moto).await.expect("the relay starts");
    server.queues_endpoint(&relay.address());
    // Left by runs that could not delete theirs: one two days old, one of an hour ago;
    // and credentials of someone else's, old too.
    let stale =
        server.add_queues_credentials(REGION, "infra-scaleway-run-0dd", "2026-11-01T00:00:00Z");
    let recent =
        server.add_queues_credentials(REGION, "infra-scaleway-run-1ee", "2026-11-30T23:00:00Z");
    let foreign = server.add_queues_credentials(REGION, "ci-queues", "2026-01-01T00:00:00Z");

    let backend: Arc<Router> = Arc::new(ScalewayBackend::new(config(&server, &moto)));
    let name = fresh("signed");
    let read = create(backend.as_ref(), REGION, &name, &queue(), "shop")
        .await
        .expect("the create succeeds");
    backend
        .read("queues", REGION, &read.handle)
        .await
        .expect("read");
    let held = server.queues_credentials(REGION);
    let ours: Vec<_> = held
        .iter()
        .filter(|c| ![&stale, &recent, &foreign].contains(&&c.id))
        .collect();
    assert_eq!(ours.len(), 1, "one set made for the run: {held:?}");
    assert!(ours[0].name.starts_with("infra-scaleway-run-"), "{ours:?}");
    let made = server
        .requests()
        .into_iter()
        .find(|r| r.method == "POST" && r.path.ends_with("/sqs-credentials"))
        .expect("credentials made");
    assert_eq!(
        made.body["permissions"],
        serde_json::json!({"can_publish": false, "can_receive": false, "can_manage": true}),
        "manage only"
    );
    assert!(
        held.iter().all(|c| c.id != stale),
        "the stale run's are deleted"
    );
    assert!(
        held.iter().any(|c| c.id == recent),
        "a recent run's are kept"
    );
    assert!(
        held.iter().any(|c| c.id == foreign),
        "someone else's are kept"
    );

    let seen = relay.take();
    assert!(seen.iter().any(|s| s.action() == "CreateQueue"), "{seen:?}");
    for s in &seen {
        assert_eq!(
            s.access_key(),
            Some(ours[0].access_key.as_str()),
            "{} was signed with another key",
            s.action()
        );
        assert_ne!(
            s.access_key(),
            Some(API_KEY),
            "{} was signed with the API key",
            s.action()
        );
    }

    backend
        .delete("queues", REGION, &read.handle)
        .await
        .expect("deleted");
    drop(backend);
    let left: Vec<String> = server
        .queues_credentials(REGION)
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert!(
        !left.contains(&ours[0].id),
        "the run's credentials are deleted: {left:?}"
    );
    assert_eq!(left.len(), 2, "{left:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_queues_credentials_are_used_as_they_are() {
    let Some(moto) = moto() else {
        return;
    };
    let server = stand_in().await;
    let relay = Relay::start(&moto).await.expect("the relay starts");
    let config = config(&server, &moto)
        .sqs_endpoint(relay.address())
        .queues_key(QueuesKey::new(
            "SCWQCONFIGURED",
            SecretString::new("q-secret"),
        ));
    let backend = ScalewayBackend::new(config);
    let read = create(&backend, REGION, &fresh("configured"), &queue(), "shop")
        .await
        .expect("the create succeeds");
    assert!(
        backend
            .prerequisites("queues", REGION)
            .await
            .expect("asked")
            .is_empty()
    );
    backend
        .delete("queues", REGION, &read.handle)
        .await
        .expect("deleted");
    assert!(mnq_calls(&server).is_empty(), "{:?}", mnq_calls(&server));
    let seen = relay.take();
    assert!(!seen.is_empty());
    assert!(
        seen.iter()
            .all(|s| s.access_key() == Some("SCWQCONFIGURED")),
        "{seen:?}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_without_queues_holds_none_and_nothing_is_activated_to_look() {
    let server = stand_in().await;
    // No SQS is served here: a call to it would be recorded as a request to `/`.
    server.queues_endpoint(&server.address());
    let backend = ScalewayBackend::new(config(&server, &server.address()));
    assert!(
        backend
            .list("queues", REGION)
            .await
            .expect("listed")
            .is_empty()
    );
    let url = format!("https://sqs.mnq.{REGION}.scaleway.com/{PROJECT}/orders");
    let e = backend.read("queues", REGION, &url).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    let e = backend.delete("queues", REGION, &url).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    let requests = server.requests();
    assert!(
        requests
            .iter()
            .all(|r| r.method == "GET" && r.path.ends_with("/sqs-info")),
        "{requests:?}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_without_the_rights_is_refused_naming_the_permission_set_before_any_queue_call() {
    let server = stand_in().await;
    server.queues_endpoint(&server.address());
    let backend = ScalewayBackend::new(config(&server, &server.address()));
    server.deny(ScalewayProduct::Queues);
    let e = create(&backend, REGION, "refused", &queue(), "shop")
        .await
        .expect_err("refused");
    assert_eq!(e.kind, ErrorKind::Denied, "{e}");
    assert!(e.message.contains("MessagingAndQueuingFullAccess"), "{e}");
    assert!(
        e.message.contains("INFRA_SCALEWAY_QUEUES_ACCESS_KEY"),
        "{e}"
    );
    let e = backend.prerequisites("queues", REGION).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Denied, "{e}");
    assert!(e.message.contains("MessagingAndQueuingFullAccess"), "{e}");
    let e = backend.list("queues", REGION).await.unwrap_err();
    assert_eq!(
        e.kind,
        ErrorKind::Denied,
        "a denied status is no empty listing: {e}"
    );
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.path.starts_with("/mnq/")),
        "a queue was called: {:?}",
        server.requests()
    );
    server.shutdown().await;
}
