//! Secret Manager: what the conformance suite does not reach (the wire shape of a
//! create, a generated value kept out of every record, answer and error, values read
//! from the environment through the router's reader, versions written only when the
//! value changes, folders, lost answers, denials, throttling, pagination, scheduled
//! deletion, `mark` of a secret made elsewhere).

use infra_core::kinds::{SecretSourceSettled, SecretsSettled};
use infra_core::prelude::Partial;
use infra_core::sdk::{Backend, ErrorKind, MARKER_KEY, Marker, RawTags, Sighting};
use infra_testkit::scaleway::{RecordedRequest, ScalewayProduct};
use serde_json::{Value, json};

use super::support::{composed, create, raw, stand_in, tags, untried, update};
use super::{PROJECT, backend};

const REGION: &str = "fr-par";
const OTHER: &str = "nl-ams";
const FLEET: &str = "shop";

fn spec(value_from: SecretSourceSettled) -> SecretsSettled {
    SecretsSettled {
        value_from,
        description: Partial::Known("the shop's database password".to_owned()),
        tags: Partial::Known(tags(&[("team", "web")])),
    }
}

fn generated(length: u16) -> SecretsSettled {
    spec(SecretSourceSettled::Generated { length })
}

fn secrets_path(region: &str) -> String {
    format!("/secret-manager/v1beta1/regions/{region}/secrets")
}

/// The version writes among `requests`.
fn version_writes(requests: &[RecordedRequest]) -> Vec<&RecordedRequest> {
    requests
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/versions"))
        .collect()
}

/// Everything a read shows, as text.
fn shown(read: &Sighting) -> String {
    format!(
        "{read:?} {} {}",
        Value::Object(read.reported().clone()),
        read.observed_json()
    )
}

#[tokio::test]
async fn a_generated_secret_is_sent_once_marked_and_never_shown() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let read = create(
        backend.as_ref(),
        REGION,
        "db-password",
        &generated(24),
        FLEET,
    )
    .await
    .expect("the create succeeds");
    let requests = server.requests();
    let call = requests
        .iter()
        .find(|r| r.method == "POST" && r.path == secrets_path(REGION))
        .expect("a CreateSecret call");
    assert_eq!(call.body["name"], "db-password");
    assert_eq!(call.body["path"], "/");
    assert_eq!(call.body["type"], "opaque");
    assert_eq!(call.body["protected"], false);
    assert_eq!(call.body["project_id"], PROJECT);
    assert_eq!(call.body["description"], "the shop's database password");
    assert_eq!(
        call.body["tags"],
        json!(["managed-by-infra=shop", "team=web"]),
        "the marker is written by the creating call"
    );
    let writes = version_writes(&requests);
    assert_eq!(writes.len(), 1, "the value is sent once");
    assert_eq!(writes[0].body["data"], "<redacted>");

    let value = backend
        .secret_value(REGION, &read.handle)
        .await
        .expect("the router reads the value");
    assert_eq!(value.expose().len(), 24);
    for r in &server.requests() {
        assert!(
            !r.body.to_string().contains(value.expose()),
            "{} {} carries the value",
            r.method,
            r.path
        );
    }
    assert!(
        !shown(&read).contains(value.expose()),
        "the create's answer shows it"
    );
    let again = backend.read("secrets", REGION, &read.handle).await.unwrap();
    assert!(!shown(&again).contains(value.expose()), "a read shows it");
    assert_eq!(read.observed_json()["version"], json!("1"));
    assert_eq!(read.reported()["tags"][MARKER_KEY], json!("shop"));
    assert!(read.reported().get("valueFrom").is_none_or(Value::is_null));
    server.shutdown().await;
}

#[tokio::test]
async fn a_value_from_the_environment_is_read_back_and_versioned_only_when_it_changes() {
    // Cargo sets both variables for the tests it runs.
    let name = std::env::var("CARGO_PKG_NAME").expect("cargo sets CARGO_PKG_NAME");
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let from = |var: &str| spec(SecretSourceSettled::FromEnv(var.to_owned()));
    let server = stand_in().await;
    let backend = backend(&server, None);
    let read = create(
        backend.as_ref(),
        REGION,
        "app/env-value",
        &from("CARGO_PKG_NAME"),
        FLEET,
    )
    .await
    .expect("the create succeeds");
    let value = backend.secret_value(REGION, &read.handle).await.unwrap();
    assert_eq!(value.expose(), name);

    server.clear_requests();
    let same = update(
        backend.as_ref(),
        REGION,
        &read.handle,
        &from("CARGO_PKG_NAME"),
    )
    .await
    .expect("the update succeeds");
    let requests = server.requests();
    assert!(
        version_writes(&requests).is_empty(),
        "the same value again: no version"
    );
    assert!(
        requests.iter().all(|r| r.method != "PATCH"),
        "nothing else differs"
    );
    assert_eq!(same.observed_json()["version"], json!("1"));

    server.clear_requests();
    let changed = update(
        backend.as_ref(),
        REGION,
        &read.handle,
        &from("CARGO_MANIFEST_DIR"),
    )
    .await
    .expect("the update succeeds");
    let requests = server.requests();
    let writes = version_writes(&requests);
    assert_eq!(writes.len(), 1, "a new value: one new version");
    assert_eq!(writes[0].body["disable_previous"], true);
    assert_eq!(changed.observed_json()["version"], json!("2"));
    let value = backend.secret_value(REGION, &read.handle).await.unwrap();
    assert_eq!(value.expose(), dir);
    for r in &requests {
        assert!(
            !r.body.to_string().contains(&dir),
            "{} {}",
            r.method,
            r.path
        );
    }

    let e = update(
        backend.as_ref(),
        REGION,
        &read.handle,
        &from("INFRA_SCALEWAY_NEVER_SET"),
    )
    .await
    .expect_err("a variable that is not set");
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    server.shutdown().await;
}

#[tokio::test]
async fn description_and_tags_round_trip_and_an_update_keeps_the_marker() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let read = create(backend.as_ref(), REGION, "described", &generated(16), FLEET)
        .await
        .unwrap();
    assert_eq!(
        read.reported()["description"],
        json!("the shop's database password")
    );
    assert_eq!(
        read.reported()["tags"],
        json!({"managed-by-infra": "shop", "team": "web"})
    );
    server.clear_requests();
    let changed = SecretsSettled {
        description: Partial::Known(String::new()),
        tags: Partial::Known(tags(&[("team", "ops"), ("url", "a=b")])),
        ..generated(16)
    };
    let after = update(backend.as_ref(), REGION, &read.handle, &changed)
        .await
        .unwrap();
    let requests = server.requests();
    let patch = requests
        .iter()
        .find(|r| r.method == "PATCH")
        .expect("an UpdateSecret call");
    assert_eq!(
        patch.body,
        json!({"description": "", "tags": ["managed-by-infra=shop", "team=ops", "url=a=b"]})
    );
    assert!(
        version_writes(&requests).is_empty(),
        "a generated value is never rewritten"
    );
    assert_eq!(after.reported()["description"], json!(""));
    assert_eq!(
        after.reported()["tags"],
        json!({"managed-by-infra": "shop", "team": "ops", "url": "a=b"})
    );
    let owned = backend
        .ownership("secrets", REGION, &read.handle)
        .await
        .unwrap();
    assert_eq!(owned.get(MARKER_KEY).map(String::as_str), Some("shop"));
    server.shutdown().await;
}

#[tokio::test]
async fn names_are_checked_before_any_call_and_folders_are_paths() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    for bad in ["db/", "a//b", "a/../b", "/db"] {
        let e = create(backend.as_ref(), REGION, bad, &generated(16), FLEET)
            .await
            .expect_err("refused");
        assert_eq!(e.kind, ErrorKind::Invalid, "{bad}: {e}");
    }
    let big = composed(&"x".repeat(70_000));
    let e = create(backend.as_ref(), REGION, "big", &big, FLEET)
        .await
        .expect_err("refused");
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    assert!(
        !e.message.contains("xxxxxxxx"),
        "the error quotes the value"
    );
    assert!(server.requests().is_empty(), "{:?}", server.requests());

    let nested = create(
        backend.as_ref(),
        REGION,
        "app/prod/db",
        &generated(16),
        FLEET,
    )
    .await
    .unwrap();
    let top = create(backend.as_ref(), REGION, "db", &generated(16), FLEET)
        .await
        .unwrap();
    let call = server
        .requests()
        .into_iter()
        .find(|r| r.method == "POST" && r.path == secrets_path(REGION))
        .unwrap();
    assert_eq!(
        (call.body["name"].clone(), call.body["path"].clone()),
        (json!("db"), json!("/app/prod"))
    );
    let listed = backend.list("secrets", REGION).await.unwrap();
    let names: Vec<(&str, &str)> = listed
        .iter()
        .map(|l| (l.name.as_str(), l.handle.as_str()))
        .collect();
    assert!(
        names.contains(&("app/prod/db", nested.handle.as_str())),
        "{names:?}"
    );
    assert!(names.contains(&("db", top.handle.as_str())), "{names:?}");
    let e = create(
        backend.as_ref(),
        REGION,
        "app/prod/db",
        &generated(16),
        FLEET,
    )
    .await
    .expect_err("taken");
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_lost_create_answer_is_settled_by_name_and_marker_and_the_value_sent_once() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    server.lose_answers(ScalewayProduct::SecretManager, 1);
    let read = create(backend.as_ref(), REGION, "lost", &generated(20), FLEET)
        .await
        .expect("the create is settled as made");
    let requests = server.requests();
    assert_eq!(
        (requests[0].method.as_str(), requests[0].status),
        ("POST", 504)
    );
    let lookup = requests
        .iter()
        .find(|r| r.method == "GET" && r.path == secrets_path(REGION))
        .expect("a lookup by name");
    assert_eq!(lookup.query["name"], "lost");
    assert_eq!(lookup.query["path"], "/");
    assert_eq!(version_writes(&requests).len(), 1);
    assert_eq!(read.reported()["tags"][MARKER_KEY], json!("shop"));
    let value = backend.secret_value(REGION, &read.handle).await.unwrap();
    assert_eq!(value.expose().len(), 20);

    // Both answers lost: the version is found on the secret, and not sent again.
    server.clear_requests();
    server.lose_answers(ScalewayProduct::SecretManager, 2);
    let read = create(
        backend.as_ref(),
        REGION,
        "lost-twice",
        &generated(20),
        FLEET,
    )
    .await
    .expect("settled");
    assert_eq!(version_writes(&server.requests()).len(), 1);
    assert_eq!(read.observed_json()["version"], json!("1"));
    server.shutdown().await;
}

#[tokio::test]
async fn a_denial_is_denied_and_throttling_throttled_never_absent() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let read = create(backend.as_ref(), REGION, "guarded", &generated(16), FLEET)
        .await
        .unwrap();
    server.deny(ScalewayProduct::SecretManager);
    let e = backend.list("secrets", REGION).await.expect_err("denied");
    assert_eq!(e.kind, ErrorKind::Denied, "{e}");
    let e = backend
        .read("secrets", REGION, &read.handle)
        .await
        .expect_err("denied");
    assert_eq!(e.kind, ErrorKind::Denied, "{e}");
    let e = backend
        .secret_value(REGION, &read.handle)
        .await
        .expect_err("denied");
    assert_eq!(e.kind, ErrorKind::Denied, "{e}");
    let e = backend
        .delete("secrets", REGION, &read.handle)
        .await
        .expect_err("denied");
    assert_eq!(e.kind, ErrorKind::Denied, "{e}");
    server.restore();
    server.throttle(ScalewayProduct::SecretManager, 1);
    let e = untried(&server)
        .read("secrets", REGION, &read.handle)
        .await
        .expect_err("throttled");
    assert_eq!(e.kind, ErrorKind::Throttled, "{e}");
    server.throttle(ScalewayProduct::SecretManager, 1);
    backend
        .read("secrets", REGION, &read.handle)
        .await
        .expect("retried, the read is answered");
    server.shutdown().await;
}

#[tokio::test]
async fn every_page_is_listed_and_a_secret_belongs_to_its_region() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    for i in 0..101 {
        let body = json!({"name": format!("s{i:03}"), "project_id": PROJECT, "protected": false});
        let (status, _) = raw(&server, "POST", &secrets_path(REGION), Some(body)).await;
        assert_eq!(status, 200);
    }
    server.clear_requests();
    let listed = backend.list("secrets", REGION).await.expect("listed");
    assert_eq!(listed.len(), 101);
    let pages = server.requests();
    assert_eq!(pages.len(), 2, "two pages of 100");
    assert_eq!(pages[1].query["page"], "2");
    assert!(backend.list("secrets", OTHER).await.unwrap().is_empty());
    let handle = &listed[0].handle;
    let e = backend
        .read("secrets", OTHER, handle)
        .await
        .expect_err("another region's");
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    // Made without a version: nothing to number, and no value.
    let read = backend.read("secrets", REGION, handle).await.unwrap();
    assert!(read.observed_json()["version"].is_null());
    let e = backend
        .secret_value(REGION, handle)
        .await
        .expect_err("no value");
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_deleted_secret_is_scheduled_gone_for_the_engine_and_its_name_free() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let first = create(backend.as_ref(), REGION, "rotated", &generated(16), FLEET)
        .await
        .unwrap();
    backend
        .delete("secrets", REGION, &first.handle)
        .await
        .expect("deleted");
    let delete = server
        .requests()
        .into_iter()
        .find(|r| r.method == "DELETE")
        .unwrap();
    assert_eq!(delete.status, 204);
    for e in [
        backend
            .read("secrets", REGION, &first.handle)
            .await
            .map(|_| ()),
        backend.delete("secrets", REGION, &first.handle).await,
        backend
            .ownership("secrets", REGION, &first.handle)
            .await
            .map(|_| ()),
    ] {
        assert_eq!(e.expect_err("scheduled").kind, ErrorKind::NotFound);
    }
    assert!(backend.list("secrets", REGION).await.unwrap().is_empty());
    let second = create(backend.as_ref(), REGION, "rotated", &generated(16), FLEET)
        .await
        .expect("the name is free again");
    assert_ne!(second.handle, first.handle);
    server.lose_answers(ScalewayProduct::SecretManager, 1);
    backend
        .delete("secrets", REGION, &second.handle)
        .await
        .expect("the answer was lost, and the secret is scheduled: deleted");
    server.shutdown().await;
}

#[tokio::test]
async fn an_error_of_a_call_carrying_the_value_never_quotes_it() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let read = create(
        backend.as_ref(),
        REGION,
        "churning",
        &composed("value-00"),
        FLEET,
    )
    .await
    .unwrap();
    // Scaleway keeps 20 versions of a secret: the 21st value is refused.
    for i in 1..20 {
        update(
            backend.as_ref(),
            REGION,
            &read.handle,
            &composed(&format!("value-{i:02}")),
        )
        .await
        .expect("a new version");
    }
    let e = update(
        backend.as_ref(),
        REGION,
        &read.handle,
        &composed("value-20"),
    )
    .await
    .expect_err("the quota");
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    assert!(!e.message.contains("value-20"), "{e}");
    assert!(!e.message.contains("dmFsdWUtMjA"), "{e}");
    server.shutdown().await;
}

#[tokio::test]
async fn mark_adds_the_marker_alone_to_a_secret_made_elsewhere() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let body = json!({"name": "legacy", "project_id": PROJECT, "tags": ["team=web"], "description": "kept"});
    let (_, made) = raw(&server, "POST", &secrets_path(REGION), Some(body)).await;
    let handle = made["id"].as_str().unwrap().to_owned();
    let marker = Marker::new("shop");
    backend
        .mark("secrets", REGION, &handle, &marker)
        .await
        .expect("marked");
    backend
        .mark("secrets", REGION, &handle, &marker)
        .await
        .expect("marked twice, nothing written");
    let patches = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect::<Vec<_>>();
    assert_eq!(patches.len(), 1);
    assert_eq!(
        patches[0].body,
        json!({"tags": ["team=web", "managed-by-infra=shop"]})
    );
    let owned = backend.ownership("secrets", REGION, &handle).await.unwrap();
    assert_eq!(
        owned,
        RawTags::from([
            (MARKER_KEY.to_owned(), "shop".to_owned()),
            ("team".to_owned(), "web".to_owned())
        ])
    );
    let e = backend
        .mark("secrets", REGION, &handle, &Marker::new("blog"))
        .await
        .expect_err("another fleet's");
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    let read = backend.read("secrets", REGION, &handle).await.unwrap();
    assert_eq!(read.reported()["description"], json!("kept"));
    server.shutdown().await;
}
