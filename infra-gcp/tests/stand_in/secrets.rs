//! Targeted tests of the `secrets` module against its stand-in: what the conformance
//! suite does not reach (the wire shape of a create, a generated value kept out of every
//! answer, lost answers, throttling, eventual consistency, regions, pagination,
//! refusals before any call, `mark` of a secret made elsewhere).

use std::collections::BTreeMap;

use infra_core::kinds::{SecretSourceSettled, Secrets, SecretsSettled, Tags};
use infra_core::prelude::{Partial, SecretString};
use infra_core::sdk::{Backend, ErrorKind, MARKER_KEY, Marker, SettledSpec};
use infra_testkit::gcp::{GcpService, RecordedRequest};
use serde_json::{Value, json};

use super::{PROJECT, backend};
use crate::stand_in;

const REGION: &str = "europe-west1";
const OTHER: &str = "us-central1";

fn tags(pairs: &[(&str, &str)]) -> Tags {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect::<BTreeMap<_, _>>()
}

fn generated(length: u16) -> SecretsSettled {
    SecretsSettled {
        value_from: SecretSourceSettled::Generated { length },
        description: Partial::Known("the shop's database password".to_owned()),
        tags: Partial::Known(tags(&[("team", "web")])),
    }
}

fn composed(value: &str) -> SecretsSettled {
    SecretsSettled {
        value_from: SecretSourceSettled::Composed(SecretString::new(value)),
        description: Partial::Unknown,
        tags: Partial::Unknown,
    }
}

fn handle(name: &str) -> String {
    format!("projects/{PROJECT}/secrets/{name}")
}

fn add_versions(requests: &[RecordedRequest], name: &str) -> usize {
    let path = format!("/v1/{}:addVersion", handle(name));
    requests
        .iter()
        .filter(|r| r.method == "POST" && r.path == path)
        .count()
}

async fn create(
    backend: &dyn Backend,
    name: &str,
    spec: &SecretsSettled,
) -> Result<infra_core::sdk::Sighting, infra_core::sdk::BackendError> {
    let marker = Marker::new("shop");
    backend
        .create(
            "secrets",
            REGION,
            name,
            SettledSpec::new::<Secrets>(spec),
            &marker,
        )
        .await
        .map(|w| w.expect_done("the stand-in never defers"))
}

#[tokio::test]
async fn a_generated_secret_is_created_marked_in_its_region_and_its_value_is_never_shown() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let read = create(backend.as_ref(), "db-password", &generated(24))
        .await
        .expect("the create succeeds");
    let requests = server.requests();

    let create_call = requests
        .iter()
        .find(|r| r.method == "POST" && r.path == format!("/v1/projects/{PROJECT}/secrets"))
        .expect("a CreateSecret call");
    assert_eq!(create_call.query["secretId"], "db-password");
    assert_eq!(create_call.body["labels"][MARKER_KEY], "shop");
    assert_eq!(create_call.body["labels"]["team"], "web");
    assert!(create_call.body["labels"].get("infra-region").is_none());
    assert_eq!(
        create_call.body["replication"],
        json!({"userManaged": {"replicas": [{"location": REGION}]}})
    );
    assert_eq!(
        create_call.body["annotations"]["description"],
        "the shop's database password"
    );
    assert_eq!(add_versions(&requests, "db-password"), 1);

    let value = backend
        .secret_value(REGION, &handle("db-password"))
        .await
        .expect("the value is read");
    assert_eq!(value.expose().len(), 24);
    let shown = format!(
        "{read:?} {} {}",
        Value::Object(read.reported().clone()),
        read.observed_json()
    );
    assert!(
        !shown.contains(value.expose()),
        "the create's answer shows the value"
    );
    for r in &requests {
        assert!(
            !r.body.to_string().contains(value.expose()),
            "{} {} carries the value",
            r.method,
            r.path
        );
    }
    assert_eq!(read.handle, handle("db-password"));
    assert_eq!(read.observed_json()["version"], json!("1"));
    assert_eq!(
        read.reported()["description"],
        json!("the shop's database password")
    );
    assert_eq!(read.reported()["tags"]["team"], json!("web"));
    assert!(read.reported().get("valueFrom").is_none_or(Value::is_null));
    server.shutdown().await;
}

#[tokio::test]
async fn a_generated_secret_is_never_rewritten_and_a_composed_one_gets_a_new_version() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    create(backend.as_ref(), "api-key", &generated(32))
        .await
        .expect("the create succeeds");
    let before = backend
        .secret_value(REGION, &handle("api-key"))
        .await
        .unwrap();
    let retagged = SecretsSettled {
        tags: Partial::Known(tags(&[("team", "ops")])),
        ..generated(32)
    };
    server.clear_requests();
    let read = backend
        .update(
            "secrets",
            REGION,
            &handle("api-key"),
            SettledSpec::new::<Secrets>(&retagged),
        )
        .await
        .expect("the update succeeds")
        .expect_done("never deferred");
    let requests = server.requests();
    assert_eq!(add_versions(&requests, "api-key"), 0);
    let patch = requests
        .iter()
        .find(|r| r.method == "PATCH")
        .expect("an UpdateSecret call");
    assert_eq!(patch.query["updateMask"], "labels");
    assert_eq!(patch.body["labels"][MARKER_KEY], "shop");
    assert_eq!(patch.body["labels"]["team"], "ops");
    assert!(patch.body["etag"].as_str().is_some_and(|e| !e.is_empty()));
    assert_eq!(read.reported()["tags"]["team"], json!("ops"));
    let after = backend
        .secret_value(REGION, &handle("api-key"))
        .await
        .unwrap();
    assert_eq!(before.expose(), after.expose());

    create(
        backend.as_ref(),
        "db-url",
        &composed("postgres://a@db/shop"),
    )
    .await
    .expect("the create succeeds");
    server.clear_requests();
    let read = backend
        .update(
            "secrets",
            REGION,
            &handle("db-url"),
            SettledSpec::new::<Secrets>(&composed("postgres://b@db/shop")),
        )
        .await
        .expect("the update succeeds")
        .expect_done("never deferred");
    let requests = server.requests();
    assert_eq!(add_versions(&requests, "db-url"), 1);
    assert!(
        requests.iter().all(|r| r.method != "PATCH"),
        "nothing but the value was declared: no UpdateSecret"
    );
    assert_eq!(read.observed_json()["version"], json!("2"));
    let value = backend
        .secret_value(REGION, &handle("db-url"))
        .await
        .unwrap();
    assert_eq!(value.expose(), "postgres://b@db/shop");
    server.shutdown().await;
}

#[tokio::test]
async fn names_and_labels_secret_manager_refuses_are_refused_before_any_call() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    for name in ["app/db", "db.password"] {
        let e = create(backend.as_ref(), name, &generated(16))
            .await
            .expect_err("refused");
        assert_eq!(e.kind, ErrorKind::Invalid, "{name}: {e}");
        assert!(e.message.contains("secret id"), "{e}");
    }
    let bad_label = SecretsSettled {
        tags: Partial::Known(tags(&[("Team", "web")])),
        ..generated(16)
    };
    let e = create(backend.as_ref(), "labelled", &bad_label)
        .await
        .expect_err("refused");
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    let long = SecretsSettled {
        description: Partial::Known("x".repeat(20_000)),
        ..generated(16)
    };
    let e = create(backend.as_ref(), "described", &long)
        .await
        .expect_err("refused");
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    assert!(
        server.requests().is_empty(),
        "a refused create made calls: {:?}",
        server.requests()
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_create_whose_answer_is_lost_is_found_by_name_and_given_its_value_once() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    server.lose_answers(GcpService::SecretManager, 1);
    let read = create(backend.as_ref(), "lost", &generated(20))
        .await
        .expect("the create is settled as made");
    assert_eq!(read.handle, handle("lost"));
    let requests = server.requests();
    let first = &requests[0];
    assert_eq!((first.method.as_str(), first.status), ("POST", 504));
    assert_eq!(add_versions(&requests, "lost"), 1);
    let value = backend.secret_value(REGION, &handle("lost")).await.unwrap();
    assert_eq!(value.expose().len(), 20);
    server.shutdown().await;
}

#[tokio::test]
async fn a_throttled_create_is_retried_and_a_lagging_read_does_not_fail_it() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    server.throttle(GcpService::SecretManager, 1);
    create(backend.as_ref(), "throttled", &generated(16))
        .await
        .expect("the throttled create is retried and done");
    let creates: Vec<u16> = server
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/secrets"))
        .map(|r| r.status)
        .collect();
    assert_eq!(
        creates,
        [429, 200],
        "a throttled create did nothing: sent again"
    );
    assert_eq!(
        add_versions(&server.requests(), "throttled"),
        1,
        "one value for the one secret"
    );

    server.lag(2);
    let read = create(backend.as_ref(), "lagging", &generated(16))
        .await
        .expect("a create whose read lags still succeeds");
    assert_eq!(read.handle, handle("lagging"));
    assert_eq!(read.reported()["tags"][MARKER_KEY], json!("shop"));
    assert_eq!(
        add_versions(&server.requests(), "lagging"),
        1,
        "one value, whatever the lag"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_secret_belongs_to_its_replicas_region_and_every_page_is_listed() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    // More than one page of ListSecrets (25 when the client names no size).
    for i in 0..27 {
        create(backend.as_ref(), &format!("s{i:02}"), &composed("v"))
            .await
            .expect("the create succeeds");
    }
    let listed = backend.list("secrets", REGION).await.expect("listed");
    assert_eq!(listed.len(), 27);
    assert!(
        listed
            .iter()
            .any(|l| l.name == "s26" && l.handle == handle("s26"))
    );
    let pages = server
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path == format!("/v1/projects/{PROJECT}/secrets"))
        .count();
    assert_eq!(pages, 2);
    assert!(backend.list("secrets", OTHER).await.unwrap().is_empty());
    let e = backend
        .read("secrets", OTHER, &handle("s00"))
        .await
        .expect_err("another region's secret");
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    let e = backend
        .delete("secrets", OTHER, &handle("s00"))
        .await
        .expect_err("another region's secret");
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    backend
        .delete("secrets", REGION, &handle("s00"))
        .await
        .expect("deleted in its own region");
    let e = backend
        .delete("secrets", REGION, &handle("s00"))
        .await
        .expect_err("gone");
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    // A delete may be repeated: its answer lost, it is sent again, and finds the secret
    // gone (`NotFound`, which the engine counts as pruned).
    server.clear_requests();
    server.lose_answers(GcpService::SecretManager, 1);
    let e = backend
        .delete("secrets", REGION, &handle("s01"))
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
    assert_eq!(backend.list("secrets", REGION).await.unwrap().len(), 25);
    server.shutdown().await;
}

#[tokio::test]
async fn mark_adds_the_marker_alone_to_a_secret_made_elsewhere() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let made = reqwest::Client::new()
        .post(format!(
            "{}/v1/projects/{PROJECT}/secrets?secretId=legacy",
            server.address()
        ))
        .json(&json!({
            "replication": {"userManaged": {"replicas": [{"location": REGION}]}},
            "labels": {"team": "web"},
            "annotations": {"owner": "someone"},
        }))
        .send()
        .await
        .expect("the stand-in answers");
    assert_eq!(made.status(), 200);
    let marker = Marker::new("shop");
    backend
        .mark("secrets", REGION, &handle("legacy"), &marker)
        .await
        .expect("marked");
    let tags = backend
        .ownership("secrets", REGION, &handle("legacy"))
        .await
        .unwrap();
    assert_eq!(tags, tags_of(&[(MARKER_KEY, "shop"), ("team", "web")]));
    let other = Marker::new("blog");
    let e = backend
        .mark("secrets", REGION, &handle("legacy"), &other)
        .await
        .expect_err("another fleet's");
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    let read = backend
        .read("secrets", REGION, &handle("legacy"))
        .await
        .unwrap();
    // Made without a version: nothing to number. Without a description annotation:
    // no description.
    assert!(read.observed_json()["version"].is_null());
    assert_eq!(read.reported()["description"], json!(""));
    server.shutdown().await;
}

fn tags_of(pairs: &[(&str, &str)]) -> infra_core::sdk::RawTags {
    tags(pairs)
}
