//! Observation by the page: the kinds whose list answers each resource whole.
//!
//! - Google's discovery documents say a list item of each such kind is the very schema
//!   its get answers, and that the list is paged (`pageToken` in, `nextPageToken` out):
//!   nothing a get carries is missing from a list item.
//! - Each listed reading is what a `read` of the same resource answers (on the
//!   stand-in, and on the Pub/Sub emulator for queues).
//! - Through the engine, a no-change plan of a fleet of these kinds makes no `read` and
//!   no `ownership` call at all, and a resource deleted out of band, still in the
//!   records, is shown missing only after a read by its handle.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use infra_core::engine::{Engine, MemoryStore, Options};
use infra_core::kinds::{ImageRegistry, ObjectStore, Queues};
use infra_core::prelude::{Backends, Expr, Fleet, GcpRegion, Partial};
use infra_core::sdk::layer::{Layered, Op, Recorder};
use infra_core::sdk::{Backend, Router, SystemClock};
use infra_testkit::conformance::fresh_prefix;
use serde_json::Value;

use super::{backend, pubsub_emulator, schema, stand_in};

/// A list method, the field of its answer holding the items, and the get method whose
/// answer each item must be.
type ListAndGet = (&'static str, &'static str, &'static str);

/// For each kind whose list is complete: its API, and its lists with their gets (a
/// queue's read is a topic and a subscription: both).
const COMPLETE: &[(&str, &str, &[ListAndGet])] = &[
    (
        "objectStore",
        "storage.v1",
        &[("buckets.list", "items", "buckets.get")],
    ),
    (
        "imageRegistry",
        "artifactregistry.v1",
        &[(
            "projects.locations.repositories.list",
            "repositories",
            "projects.locations.repositories.get",
        )],
    ),
    (
        "queues",
        "pubsub.v1",
        &[
            ("projects.topics.list", "topics", "projects.topics.get"),
            (
                "projects.subscriptions.list",
                "subscriptions",
                "projects.subscriptions.get",
            ),
        ],
    ),
];

/// The method `id` (`buckets.list`) of a discovery document, found under its resources.
fn method<'a>(doc: &'a Value, id: &str) -> &'a Value {
    let mut at = doc;
    let parts: Vec<&str> = id.split('.').collect();
    let (name, resources) = parts.split_last().expect("a method id");
    for r in resources {
        at = &at["resources"][*r];
    }
    let found = &at["methods"][*name];
    assert!(found.is_object(), "no method {id} in the document");
    found
}

#[test]
fn a_complete_list_answers_the_schema_its_get_answers_page_by_page() {
    let docs: BTreeMap<&str, Value> = schema::extracts().into_iter().collect();
    // Every kind the backend says lists complete has its evidence here, and no other.
    let router = on_nothing();
    let claimed = router.capabilities().complete_lists;
    let evidenced: BTreeSet<&str> = COMPLETE.iter().map(|(kind, _, _)| *kind).collect();
    assert_eq!(
        claimed, evidenced,
        "the kinds claiming complete lists and those with evidence below"
    );
    for (kind, api, pairs) in COMPLETE {
        let doc = &docs[api];
        let schemas = &doc["schemas"];
        for (list, field, get) in *pairs {
            let list = method(doc, list);
            let get = method(doc, get);
            let page = list["response"]["$ref"].as_str().expect("a list answer");
            let item = &schemas[page]["properties"][field];
            assert_eq!(item["type"], "array", "{kind}: {page}.{field}");
            assert_eq!(
                item["items"]["$ref"], get["response"]["$ref"],
                "{kind}: an item of {page}.{field} is what the get answers"
            );
            assert!(
                list["parameters"]["pageToken"].is_object(),
                "{kind}: the list is paged"
            );
            assert!(
                schemas[page]["properties"]["nextPageToken"].is_object(),
                "{kind}: {page} says where the next page starts"
            );
        }
    }
    // The kinds left out: their read makes calls a list cannot answer.
    for kind in ["secrets", "compute", "postgres", "iam"] {
        assert!(router.capabilities().kinds.contains(kind), "{kind}");
        assert!(!claimed.contains(kind), "{kind}");
    }
}

/// A backend for what its capabilities say, reaching nothing.
fn on_nothing() -> Router {
    infra_gcp::GcpBackend::new(
        infra_gcp::GcpConfig::stand_in(super::PROJECT, "http://127.0.0.1:9").expect("loopback"),
    )
}

fn known<T: infra_core::prelude::Value>(value: T) -> Partial<Expr<T>> {
    Partial::Known(Expr::lit(value))
}

/// `n` buckets and `n` Docker repositories, and `n` queues when there is an emulator,
/// their names after `prefix` (fresh: the emulator outlives a test run).
fn fleet(prefix: &str, n: usize, queues: bool) -> Fleet {
    let mut f = Fleet::builder("by-the-page");
    let here = GcpRegion::EuropeWest1;
    let tags = known(BTreeMap::from([("page".to_owned(), "one".to_owned())]));
    for i in 0..n {
        f.declare(
            here,
            format!("{prefix}bucket-{i}"),
            ObjectStore {
                versioning: known(i % 2 == 0),
                expire_after_days: known(Some(30)),
                tags: tags.clone(),
            },
        );
        f.declare(
            here,
            format!("{prefix}images-{i}"),
            ImageRegistry {
                scan_on_push: known(true),
                immutable_tags: known(i % 2 == 1),
                tags: tags.clone(),
            },
        );
        if queues {
            f.declare(
                here,
                format!("{prefix}queue-{i}"),
                Queues {
                    fifo: Expr::lit(false),
                    visibility_timeout_seconds: known(30),
                    retention_seconds: known(86_400),
                    dead_letter: Partial::Known(None),
                    max_receive_count: Partial::Unknown,
                    tags: tags.clone(),
                },
            );
        }
    }
    f.build().expect("the fleet is sound")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_listed_reading_is_what_a_read_answers() {
    let server = stand_in().await;
    let emulator = pubsub_emulator();
    let backend: Arc<dyn Backend> = backend(&server, emulator.as_deref());
    let engine = Engine::new(
        Backends::new().with(Arc::clone(&backend)),
        Arc::new(MemoryStore::new()),
    );
    let fleet = fleet(&fresh_prefix(&SystemClock::new()), 3, emulator.is_some());
    let outcome = engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .expect("the apply runs");
    assert!(outcome.is_success(), "{:#?}", outcome.result);
    let kinds: &[&'static str] = if emulator.is_some() {
        &["objectStore", "imageRegistry", "queues"]
    } else {
        &["objectStore", "imageRegistry"]
    };
    for kind in kinds {
        let listed = backend
            .list(kind, "europe-west1")
            .await
            .expect("the list answers");
        assert!(listed.len() >= 3, "{kind}: {listed:?}");
        for l in &listed {
            let whole = l
                .reading()
                .unwrap_or_else(|| panic!("{kind} {} is listed without its read", l.name));
            let read = backend
                .read(kind, "europe-west1", &l.handle)
                .await
                .expect("the read answers");
            assert_eq!(whole.handle, read.handle, "{kind} {}", l.name);
            assert_eq!(
                whole.observed_json(),
                read.observed_json(),
                "{kind} {}",
                l.name
            );
            assert_eq!(whole.reported(), read.reported(), "{kind} {}", l.name);
            assert_eq!(whole.raw_tags(), read.raw_tags(), "{kind} {}", l.name);
            assert!(whole.raw_tags().is_some(), "{kind} {}: its labels", l.name);
        }
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_change_plan_reads_nothing_and_a_resource_gone_is_read_before_it_is_missing() {
    const N: usize = 8;
    let server = stand_in().await;
    let emulator = pubsub_emulator();
    let backend: Arc<dyn Backend> = backend(&server, emulator.as_deref());
    let store = Arc::new(MemoryStore::new());
    let prefix = fresh_prefix(&SystemClock::new());
    let fleet = fleet(&prefix, N, emulator.is_some());
    let gone = format!("{prefix}bucket-0");
    let applied = Engine::new(Backends::new().with(Arc::clone(&backend)), store.clone())
        .apply(&fleet.plan(), &Options::default())
        .await
        .expect("the apply runs");
    assert!(applied.is_success(), "{:#?}", applied.result);

    let recorder = Recorder::new();
    let recorded: Arc<dyn Backend> = Layered::wrap(Arc::clone(&backend), recorder.clone());
    let engine = Engine::new(Backends::new().with(recorded), store);
    let plan = engine
        .plan(&fleet.plan(), &Options::default())
        .await
        .expect("the plan runs");
    let actions: BTreeSet<&str> = plan.changes.iter().map(|c| c.action).collect();
    assert_eq!(actions, BTreeSet::from(["unchanged"]), "{plan:#?}");
    assert_eq!(plan.changes.len(), fleet.len());
    assert_eq!(recorder.count(Op::Read), 0, "{:#?}", recorder.calls());
    assert_eq!(recorder.count(Op::Ownership), 0, "{:#?}", recorder.calls());
    let scopes = if emulator.is_some() { 3 } else { 2 };
    assert_eq!(recorder.count(Op::List), scopes, "{:#?}", recorder.calls());

    // A bucket deleted behind the records' back: the list no longer shows it, and it
    // is read by its handle, found gone, and only then planned to be made again.
    backend
        .delete("objectStore", "europe-west1", &gone)
        .await
        .expect("the delete behind the records' back");
    recorder.clear();
    let plan = engine
        .plan(&fleet.plan(), &Options::default())
        .await
        .expect("the plan runs");
    let reads: Vec<_> = recorder
        .calls()
        .into_iter()
        .filter(|c| c.op == Op::Read)
        .collect();
    assert_eq!(reads.len(), 1, "{reads:#?}");
    assert_eq!(reads[0].kind, Some("objectStore"));
    assert_eq!(reads[0].target.as_deref(), Some(gone.as_str()));
    assert_eq!(recorder.count(Op::Ownership), 0);
    let missing: Vec<_> = plan
        .changes
        .iter()
        .filter(|c| c.action != "unchanged")
        .map(|c| (c.resource.name.as_str(), c.action))
        .collect();
    assert_eq!(missing, [(gone.as_str(), "create")], "{plan:#?}");
    server.shutdown().await;
}
