//! Targeted tests of the `artifacts` module against its stand-in: what the conformance
//! suite does not reach (the wire shape of a create, long operations, a lost answer, an
//! operation still running at the deadline, throttling, eventual consistency, update
//! masks, deletes awaited, regions, refusals before any call).

use infra_core::kinds::{ImageRegistry, ImageRegistrySettled, Tags};
use infra_core::prelude::Partial;
use infra_core::sdk::{
    Backend, BackendError, ErrorKind, MARKER_KEY, Marker, SettledSpec, Sighting,
};
use infra_testkit::gcp::{GcpService, RecordedRequest};
use serde_json::json;
use std::time::Duration;

use super::{PROJECT, SHORT_DEADLINE, backend, backend_polling};
use crate::stand_in;

const REGION: &str = "europe-west1";
const OTHER: &str = "us-central1";

fn spec(scan: bool, immutable: bool) -> ImageRegistrySettled {
    ImageRegistrySettled {
        scan_on_push: Partial::Known(scan),
        immutable_tags: Partial::Known(immutable),
        tags: Partial::Known(Tags::from([("team".to_owned(), "web".to_owned())])),
    }
}

fn handle(region: &str, name: &str) -> String {
    format!("projects/{PROJECT}/locations/{region}/repositories/{name}")
}

fn operation_polls(requests: &[RecordedRequest]) -> usize {
    requests
        .iter()
        .filter(|r| r.method == "GET" && r.path.contains("/operations/"))
        .count()
}

async fn create(
    backend: &dyn Backend,
    name: &str,
    spec: &ImageRegistrySettled,
) -> Result<Sighting, BackendError> {
    backend
        .create(
            "imageRegistry",
            REGION,
            name,
            SettledSpec::new::<ImageRegistry>(spec),
            &Marker::new("shop"),
        )
        .await
        .map(|w| w.expect_done("the stand-in never defers"))
}

#[tokio::test]
async fn a_create_is_awaited_through_a_long_operation_and_carries_the_marker() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    server.settling(Duration::from_secs(5));
    let read = create(backend.as_ref(), "web-images", &spec(false, true))
        .await
        .expect("the create succeeds");
    let requests = server.requests();
    let call = requests
        .iter()
        .find(|r| r.method == "POST")
        .expect("a CreateRepository call");
    assert_eq!(
        call.path,
        format!("/v1/projects/{PROJECT}/locations/{REGION}/repositories")
    );
    assert_eq!(call.query["repositoryId"], "web-images");
    assert_eq!(call.body["format"], json!(1));
    assert_eq!(call.body["labels"][MARKER_KEY], "shop");
    assert_eq!(call.body["labels"]["team"], "web");
    assert_eq!(call.body["dockerConfig"], json!({"immutableTags": true}));
    assert_eq!(
        call.body["vulnerabilityScanningConfig"],
        json!({"enablementConfig": 2})
    );
    assert!(operation_polls(&requests) >= 4, "{requests:?}");
    assert_eq!(read.handle, handle(REGION, "web-images"));
    assert_eq!(
        read.observed_json()["uri"],
        json!(format!("{REGION}-docker.pkg.dev/{PROJECT}/web-images"))
    );
    assert_eq!(read.reported()["scanOnPush"], json!(false));
    assert_eq!(read.reported()["immutableTags"], json!(true));
    assert_eq!(read.reported()["tags"][MARKER_KEY], json!("shop"));
    server.shutdown().await;
}

#[tokio::test]
async fn a_create_whose_answer_is_lost_is_found_by_name() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    server.settling(Duration::from_secs(5));
    server.lose_answers(GcpService::ArtifactRegistry, 1);
    let read = create(backend.as_ref(), "lost", &spec(true, false))
        .await
        .expect("the create is settled as made");
    assert_eq!(read.handle, handle(REGION, "lost"));
    let requests = server.requests();
    assert_eq!(
        (requests[0].method.as_str(), requests[0].status),
        ("POST", 504)
    );
    assert_eq!(operation_polls(&requests), 0, "no operation was known");
    assert_eq!(read.reported()["scanOnPush"], json!(true));
    server.shutdown().await;
}

#[tokio::test]
async fn a_create_still_running_at_the_deadline_is_settled_by_name() {
    let server = stand_in().await;
    let backend = backend_polling(&server, None, SHORT_DEADLINE);
    server.settling(Duration::from_secs(3600));
    let read = create(backend.as_ref(), "slow", &spec(true, false))
        .await
        .expect("the repository exists and is ours");
    assert_eq!(read.handle, handle(REGION, "slow"));
    let polls = operation_polls(&server.requests());
    assert!(
        polls > 5,
        "the operation was polled up to the deadline: {polls}"
    );
    // Someone else's repository under the name: the unknown outcome is a conflict.
    let e = backend
        .create(
            "imageRegistry",
            REGION,
            "slow",
            SettledSpec::new::<ImageRegistry>(&spec(true, false)),
            &Marker::new("blog"),
        )
        .await
        .expect_err("taken");
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    server.shutdown().await;
}

#[tokio::test]
async fn names_and_labels_artifact_registry_refuses_are_refused_before_any_call() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    for name in ["Web", "web_images", "1web", "web-", "web.images"] {
        let e = create(backend.as_ref(), name, &spec(true, false))
            .await
            .expect_err("refused");
        assert_eq!(e.kind, ErrorKind::Invalid, "{name}: {e}");
        assert!(e.message.contains("repository id"), "{e}");
    }
    let bad = ImageRegistrySettled {
        tags: Partial::Known(Tags::from([("team".to_owned(), "Web".to_owned())])),
        ..spec(true, false)
    };
    let e = create(backend.as_ref(), "labelled", &bad)
        .await
        .expect_err("refused");
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    assert!(server.requests().is_empty(), "{:?}", server.requests());
    server.shutdown().await;
}

#[tokio::test]
async fn a_throttled_create_is_retried_and_a_lagging_read_does_not_fail_it() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    // A throttled call did nothing: the client retries it, a create included.
    server.throttle(GcpService::ArtifactRegistry, 2);
    create(backend.as_ref(), "throttled", &spec(true, false))
        .await
        .expect("the throttled create is retried and done");
    let creates: Vec<u16> = server
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/repositories"))
        .map(|r| r.status)
        .collect();
    assert_eq!(creates, [429, 429, 200], "sent until it was not throttled");
    server.lag(2);
    let read = create(backend.as_ref(), "lagging", &spec(true, false))
        .await
        .expect("a create whose read lags still succeeds");
    assert_eq!(read.handle, handle(REGION, "lagging"));
    assert_eq!(read.reported()["tags"][MARKER_KEY], json!("shop"));
    server.shutdown().await;
}

#[tokio::test]
async fn an_update_masks_the_declared_fields_that_differ_and_keeps_the_marker() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    create(backend.as_ref(), "app", &spec(true, false))
        .await
        .expect("created");
    server.clear_requests();
    let changed = ImageRegistrySettled {
        tags: Partial::Unknown,
        ..spec(true, true)
    };
    let read = backend
        .update(
            "imageRegistry",
            REGION,
            &handle(REGION, "app"),
            SettledSpec::new::<ImageRegistry>(&changed),
        )
        .await
        .expect("updated")
        .expect_done("never deferred");
    let requests = server.requests();
    let patches: Vec<_> = requests.iter().filter(|r| r.method == "PATCH").collect();
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0].query["updateMask"], "dockerConfig.immutableTags");
    assert_eq!(read.reported()["immutableTags"], json!(true));
    assert_eq!(read.reported()["scanOnPush"], json!(true));
    assert_eq!(read.reported()["tags"][MARKER_KEY], json!("shop"));
    assert_eq!(read.reported()["tags"]["team"], json!("web"));
    // The same update again changes nothing, and sends nothing.
    server.clear_requests();
    let again = backend
        .update(
            "imageRegistry",
            REGION,
            &handle(REGION, "app"),
            SettledSpec::new::<ImageRegistry>(&changed),
        )
        .await
        .expect("updated")
        .expect_done("never deferred");
    assert_eq!(again.reported(), read.reported());
    assert!(server.requests().iter().all(|r| r.method == "GET"));
    server.shutdown().await;
}

#[tokio::test]
async fn a_delete_is_awaited_and_one_whose_answer_is_lost_is_sent_again() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    create(backend.as_ref(), "one", &spec(true, false))
        .await
        .expect("created");
    create(backend.as_ref(), "two", &spec(true, false))
        .await
        .expect("created");
    let e = backend
        .delete("imageRegistry", OTHER, &handle(REGION, "one"))
        .await
        .expect_err("not of that region");
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    assert!(
        backend
            .list("imageRegistry", OTHER)
            .await
            .unwrap()
            .is_empty()
    );
    server.settling(Duration::from_secs(4));
    server.clear_requests();
    backend
        .delete("imageRegistry", REGION, &handle(REGION, "one"))
        .await
        .expect("deleted");
    assert!(operation_polls(&server.requests()) >= 3);
    let e = backend
        .delete("imageRegistry", REGION, &handle(REGION, "one"))
        .await
        .expect_err("gone");
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    // A delete may be repeated: its answer lost, it is sent again, and finds the
    // repository gone (`NotFound`, which the engine counts as pruned).
    server.clear_requests();
    server.lose_answers(GcpService::ArtifactRegistry, 1);
    let e = backend
        .delete("imageRegistry", REGION, &handle(REGION, "two"))
        .await
        .expect_err("gone by the second attempt");
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    let deletes: Vec<u16> = server
        .requests()
        .iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.status)
        .collect();
    assert_eq!(deletes, [504, 404]);
    let listed = backend.list("imageRegistry", REGION).await.unwrap();
    assert!(listed.is_empty(), "{listed:?}");
    server.shutdown().await;
}
