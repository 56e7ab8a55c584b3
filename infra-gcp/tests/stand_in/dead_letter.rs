//! Dead letters that work: a queue with a dead letter grants the project's Pub/Sub
//! service agent `roles/pubsub.publisher` on the dead-letter topic and
//! `roles/pubsub.subscriber` on its subscription, or is refused before anything is
//! made.
//!
//! These run on `infra_testkit::gcp::GcpServer`'s Pub/Sub, not on Google's emulator:
//! the emulator answers every IAM policy call (`getIamPolicy`, `setIamPolicy`,
//! `testIamPermissions` of topics and subscriptions) 501 `UNIMPLEMENTED`, so the grants
//! cannot be seen there. The queue tests on the emulator (`pubsub.rs`) show that a dead
//! letter still works against it, the grants being skipped on a local endpoint that
//! serves no policies.

use infra_core::kinds::{Queues, QueuesSettled};
use infra_core::prelude::{Handle, Partial};
use infra_core::sdk::{Backend, BackendError, ErrorKind, Marker, SettledSpec, Sighting};
use infra_testkit::gcp::GcpServer;

use super::{PROJECT, backend};
use crate::stand_in;

const REGION: &str = "europe-west1";
/// The Pub/Sub service agent of the stand-in's project (its number is 123456789012).
const AGENT: &str = "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com";

fn topic(name: &str) -> String {
    format!("projects/{PROJECT}/topics/{name}")
}

fn subscription(name: &str) -> String {
    format!("projects/{PROJECT}/subscriptions/{name}")
}

fn queue(dead_letter: Option<&str>, visibility: u32) -> QueuesSettled {
    QueuesSettled {
        fifo: false,
        visibility_timeout_seconds: Partial::Known(visibility),
        retention_seconds: Partial::Unknown,
        dead_letter: Partial::Known(dead_letter.map(|n| Handle::new(topic(n)))),
        max_receive_count: if dead_letter.is_some() {
            Partial::Known(5)
        } else {
            Partial::Unknown
        },
        tags: Partial::Known([("team".to_owned(), "web".to_owned())].into()),
    }
}

async fn create(
    backend: &dyn Backend,
    name: &str,
    spec: &QueuesSettled,
) -> Result<Sighting, BackendError> {
    backend
        .create(
            "queues",
            REGION,
            name,
            SettledSpec::new::<Queues>(spec),
            &Marker::new("shop"),
        )
        .await
        .map(|w| w.expect_done("Pub/Sub never defers"))
}

/// Whether `member` holds `role` in the stand-in's policy of `resource`.
fn holds(server: &GcpServer, resource: &str, role: &str, member: &str) -> bool {
    server
        .policy_bindings(resource)
        .iter()
        .any(|(r, members)| r == role && members.iter().any(|m| m == member))
}

fn policy_writes(server: &GcpServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with(":setIamPolicy"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_grants_the_pubsub_service_agent_what_it_needs_once() {
    let server = stand_in().await;
    // Every service on the stand-in, Pub/Sub included.
    let backend = backend(&server, None);
    create(&*backend, "dl-dead", &queue(None, 30))
        .await
        .expect("the dead-letter queue");
    assert_eq!(policy_writes(&server), 0, "no dead letter, no grant");
    let read = create(&*backend, "dl-jobs", &queue(Some("dl-dead"), 30))
        .await
        .expect("the queue with a dead letter");
    assert_eq!(read.reported()["deadLetter"], topic("dl-dead"));
    assert!(
        holds(&server, &topic("dl-dead"), "roles/pubsub.publisher", AGENT),
        "{:?}",
        server.policy_bindings(&topic("dl-dead"))
    );
    assert!(
        holds(
            &server,
            &subscription("dl-jobs"),
            "roles/pubsub.subscriber",
            AGENT
        ),
        "{:?}",
        server.policy_bindings(&subscription("dl-jobs"))
    );
    assert_eq!(policy_writes(&server), 2);
    // The project number was asked of Resource Manager.
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.method == "GET" && r.path == format!("/v3/projects/{PROJECT}"))
    );
    // An update declaring the dead letter again grants again, idempotently: the
    // policies are read, and nothing is written.
    let _updated = backend
        .update(
            "queues",
            REGION,
            &read.handle,
            SettledSpec::new::<Queues>(&queue(Some("dl-dead"), 45)),
        )
        .await
        .expect("the update");
    assert_eq!(
        policy_writes(&server),
        2,
        "the agent held both roles already"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_whose_grants_cannot_be_made_is_refused_before_anything_is_made() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    create(&*backend, "dl-dead-two", &queue(None, 30))
        .await
        .expect("the dead-letter queue");
    server.deny_policy_writes();
    let err = create(&*backend, "dl-jobs-two", &queue(Some("dl-dead-two"), 30))
        .await
        .expect_err("refused");
    assert_eq!(err.kind, ErrorKind::Denied, "{err}");
    assert!(
        err.message
            .contains(AGENT.trim_start_matches("serviceAccount:")),
        "{err}"
    );
    assert!(err.message.contains("roles/pubsub.publisher"), "{err}");
    let (topics, subscriptions) = server.pubsub_names();
    assert!(!topics.contains(&topic("dl-jobs-two")), "{topics:?}");
    assert!(
        !subscriptions.contains(&subscription("dl-jobs-two")),
        "{subscriptions:?}"
    );
    server.shutdown().await;
}
