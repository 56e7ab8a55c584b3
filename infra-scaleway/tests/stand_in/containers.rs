//! Serverless Containers: namespaces and containers: what the conformance suite does not reach
//! (what a create sends, the deploy and its statuses on the manual clock, secret values
//! kept out of every record, a redeploy after an image change, a change of namespace
//! planned as a replace, denials, throttling, lost answers, deletes awaited, refusals
//! before any call, pagination, `mark` of a container made elsewhere).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use infra_core::engine::{Engine, MemoryStore, Options};
use infra_core::kinds::{
    Access, Container, ContainerNamespace, ContainerNamespaceSettled, ContainerSettled, Secrets,
};
use infra_core::prelude::{Backends, Expr, Fleet, Handle, Key, Partial, ScalewayRegion};
use infra_core::sdk::{Backend, Clock, ErrorKind, MARKER_KEY, ManualClock, Marker, SettledSpec};
use infra_testkit::scaleway::{RecordedRequest, ScalewayProduct};
use serde_json::json;

use super::PROJECT;
use super::support::{
    backend_on, calls, create, raw, secret, stand_in, stand_in_and_backend, tags as env, update,
    writes,
};

const REGION: &str = "fr-par";
const OTHER: &str = "nl-ams";
const FLEET: &str = "shop";
const IMAGE: &str = "rg.fr-par.scw.cloud/shop/app:1";

fn namespace_spec() -> ContainerNamespaceSettled {
    ContainerNamespaceSettled {
        description: Partial::Known("the shop's containers".to_owned()),
        environment: Partial::Known(env(&[("MODE", "test")])),
        secret_environment: Partial::Unknown,
        tags: Partial::Known(BTreeSet::from(["team=web".to_owned()])),
    }
}

fn container_spec(namespace: &str) -> ContainerSettled {
    ContainerSettled {
        namespace: Handle::new(namespace),
        image: IMAGE.to_owned(),
        port: Partial::Known(8080),
        cpu_limit: Partial::Known(1000),
        memory_limit_mb: Partial::Known(2048),
        min_scale: Partial::Known(0),
        max_scale: Partial::Known(2),
        timeout_seconds: Partial::Known(300),
        environment: Partial::Known(env(&[("LEVEL", "info")])),
        secret_environment: Partial::Unknown,
        access: Access::Private,
    }
}

/// A namespace named `name`, and its handle.
async fn namespace(backend: &dyn Backend, name: &str) -> String {
    create(backend, REGION, name, &namespace_spec(), FLEET)
        .await
        .expect("the namespace is created")
        .handle
}

fn container_path(id: &str) -> String {
    format!("/containers/v1beta1/regions/{REGION}/containers/{id}")
}

fn namespace_path(id: &str) -> String {
    format!("/containers/v1beta1/regions/{REGION}/namespaces/{id}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_sends_the_marker_and_the_timeout_then_deploys() {
    let (server, backend) = stand_in_and_backend().await;
    let ns = create(
        backend.as_ref(),
        REGION,
        "shop-ns",
        &namespace_spec(),
        FLEET,
    )
    .await
    .expect("the namespace is created");
    let sent = &writes(&server)[0];
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/containers/v1beta1/regions/fr-par/namespaces")
    );
    assert_eq!(sent.body["project_id"], PROJECT);
    assert_eq!(
        sent.body["tags"],
        json!([format!("{MARKER_KEY}={FLEET}"), "team=web"])
    );
    assert_eq!(
        sent.body["environment_variables"],
        json!({ "MODE": "test" })
    );
    assert_eq!(ns.reported()["description"], "the shop's containers");
    assert!(
        ns.observed_json()["registry_endpoint"]
            .as_str()
            .is_some_and(|e| e.starts_with("rg.fr-par.scw.cloud/")),
        "{}",
        ns.observed_json()
    );

    server.clear_requests();
    let read = create(
        backend.as_ref(),
        REGION,
        "app",
        &container_spec(&ns.handle),
        FLEET,
    )
    .await
    .expect("the container is created");
    let writes = writes(&server);
    assert_eq!(writes.len(), 2, "the create, then the deploy: {writes:#?}");
    let posted = &writes[0];
    assert_eq!(posted.path, "/containers/v1beta1/regions/fr-par/containers");
    assert_eq!(posted.body["namespace_id"], ns.handle.as_str());
    assert_eq!(posted.body["name"], "app");
    assert_eq!(
        posted.body["tags"],
        json!([format!("{MARKER_KEY}={FLEET}")])
    );
    assert_eq!(posted.body["timeout"], "300s", "a duration string");
    assert_eq!(posted.body["registry_image"], IMAGE);
    assert_eq!(
        (&posted.body["cpu_limit"], &posted.body["memory_limit"]),
        (&json!(1000), &json!(2048))
    );
    assert_eq!(
        writes[1].path,
        format!("{}/deploy", container_path(&read.handle))
    );
    let reported = read.reported();
    assert_eq!(reported["namespace"], ns.handle.as_str());
    assert_eq!(reported["timeoutSeconds"], 300);
    assert_eq!(reported["environment"], json!({ "LEVEL": "info" }));
    assert!(!reported.contains_key("tags"), "the kind has no tags");
    let tags = read.raw_tags().expect("the read carries the raw tags");
    assert_eq!(tags.get(MARKER_KEY).map(String::as_str), Some(FLEET));
    assert!(
        read.observed_json()["domain_name"]
            .as_str()
            .is_some_and(|d| d.ends_with("-app.functions.fnc.fr-par.scw.cloud"))
    );
    let again = create(
        backend.as_ref(),
        REGION,
        "app",
        &container_spec(&ns.handle),
        FLEET,
    )
    .await;
    assert_eq!(again.unwrap_err().kind, ErrorKind::Conflict);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_are_awaited_on_the_manual_clock() {
    let server = stand_in().await;
    let clock = Arc::new(ManualClock::new());
    let backend = backend_on(&server, &clock, None);
    server.settle_after(4);
    let ns = namespace(backend.as_ref(), "slow").await;
    // Four reads `pending`, then `ready`: waits of 0.1, 0.2, 0.4 and 0.8 s in between.
    assert_eq!(calls(&server, "GET", &namespace_path(&ns)).len(), 5);
    assert_eq!(clock.now(), Duration::from_millis(1500));

    let read = create(backend.as_ref(), REGION, "app", &container_spec(&ns), FLEET)
        .await
        .expect("the container is created and deployed");
    // `created` until deployed, then `pending` for four reads: the create is answered
    // only once the container is `ready`.
    assert_eq!(
        calls(&server, "GET", &container_path(&read.handle)).len(),
        5
    );
    assert_eq!(clock.now(), Duration::from_millis(3000));

    // A deploy still pending at the deadline (a minute) is settled by name and marker.
    server.settle_after(10_000);
    let stuck = create(
        backend.as_ref(),
        REGION,
        "stuck",
        &container_spec(&ns),
        FLEET,
    )
    .await
    .expect("it exists, with this fleet's marker: the create happened");
    assert!(clock.now() >= Duration::from_secs(63), "{:?}", clock.now());
    let tags = backend
        .ownership("container", REGION, &stuck.handle)
        .await
        .expect("ownership");
    assert_eq!(tags.get(MARKER_KEY).map(String::as_str), Some(FLEET));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_change_is_sent_alone_and_its_redeploy_awaited() {
    let (server, backend) = stand_in_and_backend().await;
    let ns = namespace(backend.as_ref(), "shop-ns").await;
    let read = create(backend.as_ref(), REGION, "app", &container_spec(&ns), FLEET)
        .await
        .expect("created");
    server.settle_after(3);
    server.clear_requests();
    let mut changed = container_spec(&ns);
    changed.image = "rg.fr-par.scw.cloud/shop/app:2".to_owned();
    let after = update(backend.as_ref(), REGION, &read.handle, &changed)
        .await
        .expect("updated");
    let writes = writes(&server);
    assert_eq!(writes.len(), 1, "one PATCH, which redeploys: {writes:#?}");
    assert_eq!(writes[0].method, "PATCH");
    assert_eq!(
        writes[0].body,
        json!({ "registry_image": "rg.fr-par.scw.cloud/shop/app:2", "redeploy": true })
    );
    // The GET before the PATCH, three reads `pending`, then `ready`.
    assert_eq!(
        calls(&server, "GET", &container_path(&read.handle)).len(),
        5
    );
    assert_eq!(after.reported()["image"], "rg.fr-par.scw.cloud/shop/app:2");
    assert_eq!(after.handle, read.handle);

    // The same update again writes nothing.
    server.clear_requests();
    update(backend.as_ref(), REGION, &read.handle, &changed)
        .await
        .expect("updated again");
    assert!(self::writes(&server).is_empty(), "{:#?}", server.requests());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_values_are_sent_but_never_recorded_nor_reported() {
    const VALUE: &str = "correct-horse-battery-staple";
    let (server, backend) = stand_in_and_backend().await;
    let handle = secret(backend.as_ref(), REGION, "db-password", VALUE, FLEET).await;
    let secrets = BTreeMap::from([("DB_PASSWORD".to_owned(), Handle::<Secrets>::new(&handle))]);
    let mut ns_spec = namespace_spec();
    ns_spec.secret_environment = Partial::Known(secrets.clone());
    let ns = create(backend.as_ref(), REGION, "secretive", &ns_spec, FLEET)
        .await
        .expect("the namespace is created");
    let mut spec = container_spec(&ns.handle);
    spec.secret_environment = Partial::Known(secrets);
    let read = create(backend.as_ref(), REGION, "app", &spec, FLEET)
        .await
        .expect("the container is created");
    let creates: Vec<RecordedRequest> = writes(&server)
        .into_iter()
        .filter(|r| r.path.starts_with("/containers/") && r.method == "POST")
        .filter(|r| !r.path.ends_with("/deploy"))
        .collect();
    assert_eq!(creates.len(), 2);
    for create in &creates {
        assert_eq!(
            create.body["secret_environment_variables"],
            json!([{ "key": "DB_PASSWORD", "value": "<redacted>" }]),
            "the value was sent, and the record redacts it"
        );
    }
    let everything = format!("{:?}", server.requests());
    assert!(
        !everything.contains(VALUE),
        "a record holds the secret value"
    );
    for sighting in [&ns, &read] {
        let shown = format!("{:?} {}", sighting.reported(), sighting.observed_json());
        assert!(!shown.contains(VALUE), "a read reports the secret value");
        assert!(!sighting.reported().contains_key("secretEnvironment"));
    }

    // No longer declared: removed by its key alone.
    server.clear_requests();
    let mut without = container_spec(&ns.handle);
    without.secret_environment = Partial::Known(BTreeMap::new());
    update(backend.as_ref(), REGION, &read.handle, &without)
        .await
        .expect("updated");
    let patch = &writes(&server)[0];
    assert_eq!(
        patch.body["secret_environment_variables"],
        json!([{ "key": "DB_PASSWORD" }])
    );

    // A secret that cannot be read fails the write, and names the secret, not a value.
    let mut missing = container_spec(&ns.handle);
    missing.secret_environment = Partial::Known(BTreeMap::from([(
        "API_KEY".to_owned(),
        Handle::new("00000000-0000-4000-8000-000000000000"),
    )]));
    let err = create(backend.as_ref(), REGION, "other", &missing, FLEET)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    assert!(!err.message.contains(VALUE), "{err}");
    server.shutdown().await;
}

fn scaleway_fleet(in_second: bool) -> Fleet {
    let mut fleet = Fleet::builder(FLEET);
    let declared = |ns: &str| ContainerNamespace {
        description: Partial::Known(Expr::lit(format!("namespace {ns}"))),
        environment: Partial::Unknown,
        secret_environment: Partial::Unknown,
        tags: Partial::Unknown,
    };
    let first: Key<ContainerNamespace> =
        fleet.declare(ScalewayRegion::FrPar, "ns-first", declared("first"));
    let second = fleet.declare(ScalewayRegion::FrPar, "ns-second", declared("second"));
    fleet.declare(
        ScalewayRegion::FrPar,
        "mover",
        Container {
            namespace: if in_second { second } else { first },
            image: Expr::lit(IMAGE.to_owned()),
            port: Partial::Unknown,
            cpu_limit: Partial::Known(Expr::lit(560)),
            memory_limit_mb: Partial::Known(Expr::lit(1024)),
            min_scale: Partial::Unknown,
            max_scale: Partial::Unknown,
            timeout_seconds: Partial::Known(Expr::lit(60)),
            environment: Partial::Unknown,
            secret_environment: Partial::Unknown,
            access: Access::Private.into(),
        },
    );
    fleet.build().expect("a sound fleet")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_of_namespace_is_planned_as_a_replace() {
    let (server, backend) = stand_in_and_backend().await;
    let engine = Engine::new(
        Backends::new().with(backend.clone() as Arc<dyn Backend>),
        Arc::new(MemoryStore::new()),
    )
    .with_clock(Arc::new(ManualClock::new()));
    let first = engine
        .apply(&scaleway_fleet(false).plan(), &Options::default())
        .await
        .expect("the apply runs");
    assert!(first.is_success(), "{:?}", first.result.failed);
    let listed = backend.list("container", REGION).await.expect("listed");
    let before = listed.iter().find(|l| l.name == "mover").expect("created");
    let before = before.handle.clone();

    let plan = engine
        .plan(&scaleway_fleet(true).plan(), &Options::default())
        .await
        .expect("the plan runs");
    let line = plan
        .changes
        .iter()
        .find(|c| c.resource.name == "mover")
        .expect("the container is planned");
    assert_eq!(line.action, "replace", "{line:?}");
    assert!(
        line.fields.iter().any(|f| f.field == "namespace"),
        "{line:?}"
    );

    let moved = engine
        .apply(&scaleway_fleet(true).plan(), &Options::default())
        .await
        .expect("the apply runs");
    assert!(moved.is_success(), "{:?}", moved.result.failed);
    let gone = backend.read("container", REGION, &before).await;
    assert_eq!(gone.unwrap_err().kind, ErrorKind::NotFound);
    let namespaces = backend.list("containerNamespace", REGION).await.unwrap();
    let second = namespaces.iter().find(|l| l.name == "ns-second").unwrap();
    let listed = backend.list("container", REGION).await.unwrap();
    let after = listed.iter().find(|l| l.name == "mover").expect("replaced");
    let read = backend
        .read("container", REGION, &after.handle)
        .await
        .unwrap();
    assert_eq!(read.reported()["namespace"], second.handle.as_str());
    assert!(
        !writes(&server).iter().any(|w| w.method == "PATCH"),
        "a container is never moved by an update"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_is_denied_and_never_absent_and_throttling_is_throttled() {
    let (server, backend) = stand_in_and_backend().await;
    let ns = namespace(backend.as_ref(), "shop-ns").await;
    let read = create(backend.as_ref(), REGION, "app", &container_spec(&ns), FLEET)
        .await
        .expect("created");
    server.deny(ScalewayProduct::Containers);
    for (kind, handle) in [("containerNamespace", &ns), ("container", &read.handle)] {
        let err = backend.read(kind, REGION, handle).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Denied, "{kind}: {err}");
        let err = backend.list(kind, REGION).await.unwrap_err();
        assert_eq!(
            err.kind,
            ErrorKind::Denied,
            "a denied listing is no empty one"
        );
        let err = backend.delete(kind, REGION, handle).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Denied, "{kind}: {err}");
        let err = backend.ownership(kind, REGION, handle).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Denied, "{kind}: {err}");
    }
    server.restore();
    server.throttle(ScalewayProduct::Containers, 1);
    let err = backend
        .read("container", REGION, &read.handle)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Throttled);
    let again = backend.read("container", REGION, &read.handle).await;
    assert!(again.is_ok(), "the next call is answered: {again:?}");
    // A container of another region is not found here.
    let elsewhere = backend.read("container", OTHER, &read.handle).await;
    assert_eq!(elsewhere.unwrap_err().kind, ErrorKind::NotFound);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_answer_was_lost_is_settled_by_name_and_marker() {
    let (server, backend) = stand_in_and_backend().await;
    server.lose_answers(ScalewayProduct::Containers, 1);
    let ns = create(
        backend.as_ref(),
        REGION,
        "lost-ns",
        &namespace_spec(),
        FLEET,
    )
    .await
    .expect("the namespace is found by name, with this fleet's marker");
    server.lose_answers(ScalewayProduct::Containers, 1);
    let read = create(
        backend.as_ref(),
        REGION,
        "lost",
        &container_spec(&ns.handle),
        FLEET,
    )
    .await
    .expect("the container is found by name in its namespace, and deployed");
    let posts: Vec<RecordedRequest> = writes(&server)
        .into_iter()
        .filter(|r| r.method == "POST" && !r.path.ends_with("/deploy"))
        .collect();
    assert_eq!(posts.len(), 2, "neither create was sent again: {posts:#?}");
    assert!(
        posts.iter().all(|p| p.status == 504),
        "both answers were lost"
    );
    assert_eq!(
        read.raw_tags()
            .and_then(|t| t.get(MARKER_KEY))
            .map(String::as_str),
        Some(FLEET)
    );
    let status = backend
        .read("container", REGION, &read.handle)
        .await
        .expect("read");
    assert_eq!(status.reported()["image"], IMAGE, "deployed as declared");
    // The name is now taken: another fleet's create of it is a conflict.
    let theirs = backend
        .create(
            "containerNamespace",
            REGION,
            "lost-ns",
            SettledSpec::new::<ContainerNamespace>(&namespace_spec()),
            &Marker::new("otherfleet"),
        )
        .await
        .unwrap_err();
    assert_eq!(theirs.kind, ErrorKind::Conflict, "{theirs}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_are_awaited_until_gone_and_a_namespace_takes_its_containers() {
    let (server, backend) = stand_in_and_backend().await;
    let ns = namespace(backend.as_ref(), "shop-ns").await;
    let one = create(backend.as_ref(), REGION, "one", &container_spec(&ns), FLEET)
        .await
        .expect("created");
    let two = create(backend.as_ref(), REGION, "two", &container_spec(&ns), FLEET)
        .await
        .expect("created");
    server.settle_after(3);
    server.clear_requests();
    backend
        .delete("container", REGION, &one.handle)
        .await
        .expect("deleted");
    let gets = calls(&server, "GET", &container_path(&one.handle));
    assert_eq!(gets.len(), 4, "three reads `deleting`, then gone");
    assert_eq!(gets.last().map(|g| g.status), Some(404));
    let again = backend.delete("container", REGION, &one.handle).await;
    assert_eq!(again.unwrap_err().kind, ErrorKind::NotFound);

    backend
        .delete("containerNamespace", REGION, &ns)
        .await
        .expect("deleted");
    let gets = calls(&server, "GET", &namespace_path(&ns));
    assert_eq!(gets.last().map(|g| g.status), Some(404));
    for (kind, handle) in [("containerNamespace", &ns), ("container", &two.handle)] {
        let err = backend.read(kind, REGION, handle).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::NotFound, "{kind}: {err}");
    }
    assert!(backend.list("container", REGION).await.unwrap().is_empty());

    // A container its namespace's deletion is taking along refuses a delete of its own
    // (`transient_state`): the delete awaits it all the same, and succeeds.
    let ns = namespace(backend.as_ref(), "other-ns").await;
    let three = create(
        backend.as_ref(),
        REGION,
        "three",
        &container_spec(&ns),
        FLEET,
    )
    .await
    .expect("created");
    let (deleting, _) = raw(&server, "DELETE", &namespace_path(&ns), None).await;
    assert_eq!(deleting, 200);
    server.clear_requests();
    backend
        .delete("container", REGION, &three.handle)
        .await
        .expect("the container is gone with its namespace");
    let refused = writes(&server);
    assert_eq!(refused.len(), 1, "{refused:#?}");
    assert_eq!(refused[0].status, 409);
    let gets = calls(&server, "GET", &container_path(&three.handle));
    assert_eq!(gets.last().map(|g| g.status), Some(404));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_scaleway_would_refuse_is_refused_before_any_call() {
    let (server, backend) = stand_in_and_backend().await;
    let ns = "11111111-2222-4333-8444-555555555555";
    let mut image = container_spec(ns);
    image.image = "https://rg.fr-par.scw.cloud/shop/app:1".to_owned();
    let mut port = container_spec(ns);
    port.port = Partial::Known(9090);
    let mut memory = container_spec(ns);
    memory.cpu_limit = Partial::Known(2000);
    memory.memory_limit_mb = Partial::Known(1024);
    let mut timeout = container_spec(ns);
    timeout.timeout_seconds = Partial::Known(901);
    let mut reserved = container_spec(ns);
    reserved.environment = Partial::Known(env(&[("SCW_SECRET", "x")]));
    let mut scale = container_spec(ns);
    scale.min_scale = Partial::Known(3);
    let cases = [
        ("Bad_Name", container_spec(ns)),
        ("a-name-of-more-than-thirty-four-chars", container_spec(ns)),
        ("app", image),
        ("app", port),
        ("app", memory),
        ("app", timeout),
        ("app", reserved),
        ("app", scale),
    ];
    for (name, spec) in cases {
        let err = create(backend.as_ref(), REGION, name, &spec, FLEET)
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid, "{name}: {err}");
    }
    let err = create(backend.as_ref(), REGION, "-bad", &namespace_spec(), FLEET)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    assert!(server.requests().is_empty(), "{:#?}", server.requests());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_take_every_page_and_answer_their_region_only() {
    let (server, backend) = stand_in_and_backend().await;
    server.settle_after(0);
    let ns = namespace(backend.as_ref(), "many").await;
    for i in 0..103 {
        create(
            backend.as_ref(),
            REGION,
            &format!("app-{i}"),
            &container_spec(&ns),
            FLEET,
        )
        .await
        .expect("created");
    }
    let listed = backend.list("container", REGION).await.expect("listed");
    assert_eq!(listed.len(), 103, "every page is read");
    let pages: Vec<RecordedRequest> = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/containers"))
        .collect();
    assert!(
        pages
            .iter()
            .any(|p| p.query.get("page").map(String::as_str) == Some("2"))
    );
    assert!(
        pages
            .iter()
            .all(|p| p.query.get("namespace_id") == Some(&ns))
    );
    assert!(backend.list("container", OTHER).await.unwrap().is_empty());
    assert!(
        backend
            .list("containerNamespace", OTHER)
            .await
            .unwrap()
            .is_empty()
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mark_adds_the_marker_alone_without_a_redeploy() {
    let (server, backend) = stand_in_and_backend().await;
    let ns = namespace(backend.as_ref(), "shop-ns").await;
    // Made by another tool: no marker.
    let foreign = json!({
        "namespace_id": ns, "name": "foreign", "registry_image": IMAGE,
        "tags": ["team=web"],
    });
    let containers = format!("/containers/v1beta1/regions/{REGION}/containers");
    let (_, made) = raw(&server, "POST", &containers, Some(foreign)).await;
    let id = made["id"].as_str().expect("an id").to_owned();
    server.settle_after(0);
    let deploy = format!("{}/deploy", container_path(&id));
    raw(&server, "POST", &deploy, Some(json!({}))).await;
    server.settle_after(3);
    server.clear_requests();
    let marker = Marker::new(FLEET);
    backend
        .mark("container", REGION, &id, &marker)
        .await
        .expect("marked");
    let patch = &writes(&server)[0];
    assert_eq!(
        patch.body,
        json!({ "tags": ["team=web", format!("{MARKER_KEY}={FLEET}")], "redeploy": false })
    );
    let tags = backend
        .ownership("container", REGION, &id)
        .await
        .expect("ownership");
    assert_eq!(tags.get(MARKER_KEY).map(String::as_str), Some(FLEET));
    assert_eq!(tags.get("team").map(String::as_str), Some("web"));
    server.clear_requests();
    backend
        .mark("container", REGION, &id, &marker)
        .await
        .expect("marked again");
    assert!(writes(&server).is_empty(), "already ours: nothing written");
    let other = backend
        .mark("container", REGION, &id, &Marker::new("otherfleet"))
        .await;
    assert_eq!(other.unwrap_err().kind, ErrorKind::Conflict);
    // Marking redeployed nothing: the container is `ready` still.
    let (_, now) = raw(&server, "GET", &container_path(&id), None).await;
    assert_eq!(now["status"], "ready");
    server.shutdown().await;
}
