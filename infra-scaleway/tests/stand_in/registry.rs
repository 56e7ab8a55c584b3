//! Container Registry namespaces: what the conformance suite does not reach (the wire
//! shape of a create, the tags in the description and a person's description never read
//! as tags, ownership never claimed and orphans never pruned, settings Scaleway lacks
//! refused, deletes awaited on the manual clock, lost answers, denials, throttling,
//! regions). The suite itself runs on every Scaleway sample from `main.rs`.

use std::sync::Arc;
use std::time::Duration;

use infra_core::engine::{Engine, MemoryStore, NotAttemptedReason, Options};
use infra_core::kinds::{ImageRegistry, ImageRegistrySettled};
use infra_core::prelude::{Backends, Expr, Fleet, Partial, ScalewayRegion};
use infra_core::sdk::{Backend, Clock, ErrorKind, ManualClock, Marker};
use infra_testkit::scaleway::{ScalewayProduct, ScalewayServer};
use serde_json::{Value, json};

use super::support::{backend_on, create, raw, stand_in, stand_in_on, tags, untried, update};
use super::{PROJECT, backend};

const REGION: &str = "fr-par";
const OTHER: &str = "nl-ams";
const FLEET: &str = "shop";

fn spec(pairs: &[(&str, &str)]) -> ImageRegistrySettled {
    ImageRegistrySettled {
        scan_on_push: Partial::Known(false),
        immutable_tags: Partial::Unknown,
        tags: Partial::Known(tags(pairs)),
    }
}

fn namespaces(region: &str) -> String {
    format!("/registry/v1/regions/{region}/namespaces")
}

/// Makes a namespace as another tool would, with `description`; answers its id.
async fn made_elsewhere(server: &ScalewayServer, name: &str, description: &str) -> String {
    let body = json!({"name": name, "description": description, "project_id": PROJECT, "is_public": false});
    let (_, made) = raw(server, "POST", &namespaces(REGION), Some(body)).await;
    made["id"].as_str().expect("an id").to_owned()
}

/// The description the stand-in holds for `handle`.
async fn description(server: &ScalewayServer, handle: &str) -> String {
    let path = format!("{}/{handle}", namespaces(REGION));
    let (_, got) = raw(server, "GET", &path, None).await;
    got["description"]
        .as_str()
        .expect("a description")
        .to_owned()
}

#[tokio::test]
async fn a_create_carries_the_marker_and_tags_in_its_description() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let read = create(
        backend.as_ref(),
        REGION,
        "web-images",
        &spec(&[("team", "web"), ("cost center", "r&d; 42")]),
        FLEET,
    )
    .await
    .expect("the create succeeds");
    let requests = server.requests();
    let call = requests
        .iter()
        .find(|r| r.method == "POST")
        .expect("a CreateNamespace call");
    assert_eq!(call.path, namespaces(REGION));
    assert_eq!(
        call.body,
        json!({
            "name": "web-images",
            "description": "managed-by-infra=shop; cost%20center=r%26d%3B%2042; team=web",
            "project_id": PROJECT,
            "is_public": false,
        })
    );
    assert_eq!(
        read.observed_json()["uri"],
        json!("rg.fr-par.scw.cloud/web-images")
    );
    assert_eq!(read.observed_json()["id"], json!(read.handle));
    assert_eq!(
        read.reported()["tags"],
        json!({"managed-by-infra": "shop", "team": "web", "cost center": "r&d; 42"})
    );
    for field in ["scanOnPush", "immutableTags"] {
        assert!(
            read.reported().get(field).is_none_or(Value::is_null),
            "{field}"
        );
    }
    let listed = backend.list("imageRegistry", REGION).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].name.as_str(), listed[0].handle.as_str()),
        ("web-images", read.handle.as_str())
    );
    assert!(
        backend
            .list("imageRegistry", OTHER)
            .await
            .unwrap()
            .is_empty()
    );
    let e = backend
        .read("imageRegistry", OTHER, &read.handle)
        .await
        .expect_err("another region's");
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    let e = create(backend.as_ref(), REGION, "web-images", &spec(&[]), FLEET)
        .await
        .expect_err("taken");
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    server.shutdown().await;
}

#[tokio::test]
async fn settings_scaleway_lacks_and_bad_names_are_refused_before_any_call() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let scanning = ImageRegistrySettled {
        scan_on_push: Partial::Known(true),
        ..spec(&[])
    };
    let e = create(backend.as_ref(), REGION, "scanned", &scanning, FLEET)
        .await
        .expect_err("refused");
    assert!(
        e.kind == ErrorKind::Invalid && e.message.contains("scanOnPush"),
        "{e}"
    );
    let immutable = ImageRegistrySettled {
        immutable_tags: Partial::Known(true),
        ..spec(&[])
    };
    let e = create(backend.as_ref(), REGION, "pinned", &immutable, FLEET)
        .await
        .expect_err("refused");
    assert!(
        e.kind == ErrorKind::Invalid && e.message.contains("immutableTags"),
        "{e}"
    );
    for bad in ["Web", "web_images", "web-", "-web"] {
        let e = create(backend.as_ref(), REGION, bad, &spec(&[]), FLEET)
            .await
            .expect_err("refused");
        assert_eq!(e.kind, ErrorKind::Invalid, "{bad}: {e}");
    }
    assert!(server.requests().is_empty(), "{:?}", server.requests());
    let read = create(backend.as_ref(), REGION, "plain", &spec(&[]), FLEET)
        .await
        .unwrap();
    let e = update(backend.as_ref(), REGION, &read.handle, &scanning)
        .await
        .expect_err("refused");
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    assert!(server.requests().iter().all(|r| r.method != "PATCH"));
    server.shutdown().await;
}

#[tokio::test]
async fn a_persons_description_is_never_tags_and_no_namespace_can_be_owned_or_marked() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    assert!(
        !backend.capabilities().ownership.contains("imageRegistry"),
        "a namespace's ownership cannot be read"
    );
    let human = "managed-by-infra shop; images of the web team";
    let handle = made_elsewhere(&server, "legacy", human).await;
    let listed = backend.list("imageRegistry", REGION).await.unwrap();
    assert!(
        listed.iter().any(|l| l.name == "legacy"),
        "listed whatever its owner"
    );
    let read = backend
        .read("imageRegistry", REGION, &handle)
        .await
        .unwrap();
    assert_eq!(read.reported()["tags"], json!({}));
    assert!(
        read.raw_tags().is_none(),
        "a read carries no proof of ownership"
    );

    // Nothing proves whose a namespace is, whatever its description says: ownership and
    // mark are refused, and mark writes nothing.
    let forged = made_elsewhere(&server, "forged", "managed-by-infra=shop").await;
    for handle in [&handle, &forged] {
        let e = backend
            .ownership("imageRegistry", REGION, handle)
            .await
            .expect_err("unprovable");
        assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
        let e = backend
            .mark("imageRegistry", REGION, handle, &Marker::new("shop"))
            .await
            .expect_err("cannot be marked");
        assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    }
    assert!(server.requests().iter().all(|r| r.method != "PATCH"));
    assert_eq!(description(&server, &handle).await, human);
    let e = backend
        .ownership(
            "imageRegistry",
            REGION,
            "00000000-0000-4000-8000-000000000000",
        )
        .await
        .expect_err("absent");
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");

    // Tags are written in the encoding, and a person's text after it is kept.
    let kept = made_elsewhere(&server, "kept", "managed-by-infra=shop | pushed by CI").await;
    let read = update(backend.as_ref(), REGION, &kept, &spec(&[("team", "web")]))
        .await
        .expect("the update succeeds");
    assert_eq!(
        description(&server, &kept).await,
        "managed-by-infra=shop; team=web | pushed by CI",
        "an update keeps the fleet pair and the person's text"
    );
    assert_eq!(
        read.reported()["tags"],
        json!({"managed-by-infra": "shop", "team": "web"})
    );
    server.clear_requests();
    update(backend.as_ref(), REGION, &kept, &spec(&[("team", "web")]))
        .await
        .unwrap();
    assert!(
        server.requests().iter().all(|r| r.method != "PATCH"),
        "nothing differs"
    );
    // A description a person wrote has no room for tags: said, never overwritten.
    let e = update(backend.as_ref(), REGION, &handle, &spec(&[("team", "web")]))
        .await
        .expect_err("no encoding");
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    assert_eq!(description(&server, &handle).await, human);
    server.shutdown().await;
}

/// A fleet of registries named `names`.
fn registries(names: &[&str]) -> Fleet {
    let mut fleet = Fleet::builder(FLEET);
    for name in names {
        fleet.declare(
            ScalewayRegion::FrPar,
            *name,
            ImageRegistry {
                scan_on_push: Partial::Known(Expr::lit(false)),
                immutable_tags: Partial::Unknown,
                tags: Partial::Unknown,
            },
        );
    }
    fleet.build().expect("a sound fleet")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphan_namespace_is_reported_not_prunable_and_never_deleted() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let engine = Engine::new(
        Backends::new().with(backend.clone() as Arc<dyn Backend>),
        Arc::new(MemoryStore::new()),
    )
    .with_clock(Arc::new(ManualClock::new()));
    let made = engine
        .apply(
            &registries(&["kept", "dropped"]).plan(),
            &Options::default(),
        )
        .await
        .expect("the apply runs");
    assert!(made.is_success(), "{:#?}", made.result);
    server.clear_requests();

    let trimmed = engine
        .apply(&registries(&["kept"]).plan(), &Options::default())
        .await
        .expect("the apply runs");
    let left = trimmed
        .result
        .not_attempted
        .iter()
        .find(|n| n.resource.name == "dropped")
        .unwrap_or_else(|| panic!("the orphan is not reported: {:#?}", trimmed.result));
    assert_eq!(left.reason, NotAttemptedReason::NotPrunable, "{left:?}");
    assert!(trimmed.result.pruned.is_empty(), "{:#?}", trimmed.result);
    assert!(
        server.requests().iter().all(|r| r.method != "DELETE"),
        "{:?}",
        server.requests()
    );
    let listed = backend.list("imageRegistry", REGION).await.unwrap();
    assert!(listed.iter().any(|l| l.name == "dropped"), "{listed:?}");

    // A teardown of what is declared deletes it: the ledger lists it.
    let gone = engine
        .apply(
            &registries(&["kept", "dropped"]).teardown(),
            &Options::default(),
        )
        .await
        .expect("the teardown runs");
    assert!(gone.is_success(), "{:#?}", gone.result);
    assert!(
        backend
            .list("imageRegistry", REGION)
            .await
            .unwrap()
            .is_empty()
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_delete_is_awaited_on_the_clock_until_the_namespace_is_gone() {
    let clock = Arc::new(ManualClock::new());
    let server = stand_in_on(&clock).await;
    let backend = backend_on(&server, &clock, None);
    let read = create(backend.as_ref(), REGION, "doomed", &spec(&[]), FLEET)
        .await
        .unwrap();
    server.settle_for(Duration::from_millis(700));
    server.clear_requests();
    backend
        .delete("imageRegistry", REGION, &read.handle)
        .await
        .expect("deleted");
    let requests = server.requests();
    assert_eq!(
        (requests[0].method.as_str(), requests[0].status),
        ("DELETE", 200)
    );
    let polls: Vec<u16> = requests[1..].iter().map(|r| r.status).collect();
    assert_eq!(polls, vec![200, 200, 200, 404], "read until gone");
    assert!(
        clock.now() >= Duration::from_millis(700),
        "waited on the clock: {:?}",
        clock.now()
    );
    assert!(
        backend
            .list("imageRegistry", REGION)
            .await
            .unwrap()
            .is_empty()
    );
    let e = backend
        .delete("imageRegistry", REGION, &read.handle)
        .await
        .expect_err("gone");
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    let again = create(backend.as_ref(), REGION, "doomed", &spec(&[]), FLEET)
        .await
        .expect("the name is free once the namespace is gone");

    // A delete whose answer is lost is awaited the same way.
    server.lose_answers(ScalewayProduct::Registry, 1);
    backend
        .delete("imageRegistry", REGION, &again.handle)
        .await
        .expect("the answer was lost, and the namespace went");
    assert!(
        backend
            .list("imageRegistry", REGION)
            .await
            .unwrap()
            .is_empty()
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_lost_create_answer_stays_uncertain_and_is_not_sent_again() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    server.lose_answers(ScalewayProduct::Registry, 1);
    let e = create(
        backend.as_ref(),
        REGION,
        "lost",
        &spec(&[("team", "web")]),
        FLEET,
    )
    .await
    .expect_err("no namespace found afterwards can be proven to be this create's");
    assert!(e.may_have_been_sent, "{e:?}");
    let requests = server.requests();
    assert_eq!(
        (requests[0].method.as_str(), requests[0].status),
        ("POST", 504)
    );
    assert_eq!(
        requests.iter().filter(|r| r.method == "POST").count(),
        1,
        "the create was not sent again"
    );
    let listed = backend.list("imageRegistry", REGION).await.unwrap();
    assert!(listed.iter().any(|l| l.name == "lost"), "it was made");
    server.shutdown().await;
}

#[tokio::test]
async fn a_denial_is_denied_and_throttling_throttled_never_absent() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let read = create(backend.as_ref(), REGION, "guarded", &spec(&[]), FLEET)
        .await
        .unwrap();
    server.deny(ScalewayProduct::Registry);
    let e = backend
        .list("imageRegistry", REGION)
        .await
        .expect_err("denied");
    assert_eq!(e.kind, ErrorKind::Denied, "{e}");
    for e in [
        backend
            .read("imageRegistry", REGION, &read.handle)
            .await
            .map(|_| ()),
        backend
            .ownership("imageRegistry", REGION, &read.handle)
            .await
            .map(|_| ()),
        backend.delete("imageRegistry", REGION, &read.handle).await,
    ] {
        assert_eq!(e.expect_err("denied").kind, ErrorKind::Denied);
    }
    server.restore();
    // Throttled without retries, the error says so; with them, the call goes through.
    server.throttle(ScalewayProduct::Registry, 1);
    let e = untried(&server)
        .list("imageRegistry", REGION)
        .await
        .expect_err("throttled");
    assert_eq!(e.kind, ErrorKind::Throttled, "{e}");
    server.throttle(ScalewayProduct::Registry, 2);
    assert_eq!(
        backend.list("imageRegistry", REGION).await.unwrap().len(),
        1
    );
    server.shutdown().await;
}
