//! A throttling storm: the stand-in refuses half of all calls with 429 and a
//! `Retry-After` for thirty seconds of the clock the backend's retries wait on, while a
//! fleet of several resources of every REST kind is applied through the engine. The
//! engine retries nothing: the REST client's retry policy alone must carry the apply
//! through, making every resource exactly once, and never trying a refused call again
//! sooner than it was asked to.
//!
//! The clock is a `ManualClock`: every wait of every task moves it on by its length, so
//! that the waits of calls made side by side add up, and thirty seconds of it pass in
//! about ten refusals of three seconds (plus the waits of statuses being awaited). The
//! storm covers the observation and the first creates.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use infra_core::engine::{Engine, MemoryStore, Options};
use infra_core::kinds::*;
use infra_core::prelude::{Backends, Expr, Fleet, Partial, ScalewayRegion};
use infra_core::sdk::{Backend, ManualClock};
use infra_testkit::conformance::staged::EMPTY_ZIP;
use infra_testkit::storm::{Storm, StormFigures};

use super::support::{backend_on, stand_in_on};

/// How many resources of each REST kind the fleet holds.
const EACH: usize = 3;
/// The share refused, in thousandths: every other call.
const REFUSED_PER_MILLE: u32 = 500;
const LASTS: Duration = Duration::from_secs(30);
const RETRY_AFTER: Duration = Duration::from_secs(3);

fn known<T: infra_core::prelude::Value>(value: T) -> Partial<Expr<T>> {
    Partial::Known(Expr::lit(value))
}

/// `EACH` resources of every REST kind (secrets, registries, databases with their
/// passwords, IAM applications, function namespaces with a function each, computes,
/// container namespaces with a container each), in fr-par.
fn fleet(archive: &str) -> Fleet {
    let here = ScalewayRegion::FrPar;
    let mut f = Fleet::builder("storm");
    for i in 0..EACH {
        f.declare(
            here,
            format!("storm-secret-{i}"),
            Secrets {
                description: known(format!("secret {i}")),
                ..Secrets::generated(24)
            },
        );
        f.declare(
            here,
            format!("storm-images-{i}"),
            ImageRegistry {
                scan_on_push: known(false),
                immutable_tags: known(false),
                tags: Partial::Unknown,
            },
        );
        let password = f.declare(
            here,
            format!("storm-db-password-{i}"),
            Secrets::generated(32),
        );
        f.declare(
            here,
            format!("storm-db-{i}"),
            Postgres {
                storage_gb: known(20),
                ..Postgres::classic(PostgresClassic {
                    engine_version: "16",
                    instance_class: "DB-DEV-S",
                    master_username: "app",
                    master_password: password,
                })
            },
        );
        f.declare(
            here,
            format!("storm-runner-{i}"),
            Iam {
                policies: Expr::lit(BTreeSet::from(["ObjectStorageReadOnly".to_owned()])),
                assumed_by: Expr::lit(BTreeSet::new()),
                description: known(format!("runner {i}")),
                tags: Partial::Unknown,
            },
        );
        let functions = f.declare(
            here,
            format!("storm-fns-{i}"),
            FunctionNamespace {
                description: known(format!("functions {i}")),
                environment: Partial::Unknown,
                secret_environment: Partial::Unknown,
                tags: Partial::Unknown,
            },
        );
        f.declare(
            here,
            format!("storm-worker-{i}"),
            Function {
                namespace: functions,
                runtime: Expr::lit("python311".to_owned()),
                handler: Expr::lit("handler.handle".to_owned()),
                memory_mb: known(256),
                min_scale: known(0),
                max_scale: known(1),
                timeout_seconds: known(60),
                source_bucket: Partial::Known(None),
                code: Partial::Unknown,
                environment: Partial::Unknown,
                access: Access::Private.into(),
            },
        );
        f.declare(
            here,
            format!("storm-api-{i}"),
            Compute {
                runtime: Expr::lit("python3.11".to_owned()),
                handler: Expr::lit("handler.handle".to_owned()),
                code: Expr::lit(archive.to_owned()),
                code_sha256: Partial::Unknown,
                memory_mb: known(256),
                timeout_seconds: known(60),
                environment: Partial::Unknown,
                secret_environment: Partial::Unknown,
                role: None,
                tags: Partial::Unknown,
                access: Access::Private.into(),
            },
        );
        let containers = f.declare(
            here,
            format!("storm-apps-{i}"),
            ContainerNamespace {
                description: known(format!("containers {i}")),
                environment: Partial::Unknown,
                secret_environment: Partial::Unknown,
                tags: Partial::Unknown,
            },
        );
        f.declare(
            here,
            format!("storm-web-{i}"),
            Container {
                namespace: containers,
                image: Expr::lit("rg.fr-par.scw.cloud/storm/web:1.0".to_owned()),
                port: known(8080),
                cpu_limit: known(560),
                memory_limit_mb: known(1024),
                min_scale: known(0),
                max_scale: known(1),
                timeout_seconds: known(60),
                environment: Partial::Unknown,
                secret_environment: Partial::Unknown,
                access: Access::Private.into(),
            },
        );
    }
    f.build().expect("the storm's fleet is sound")
}

/// The kinds the fleet declares, and how many of each.
fn declared() -> BTreeMap<&'static str, usize> {
    BTreeMap::from([
        ("secrets", 2 * EACH),
        ("imageRegistry", EACH),
        ("postgres", EACH),
        ("iam", EACH),
        ("functionNamespace", EACH),
        ("function", EACH),
        ("compute", EACH),
        ("containerNamespace", EACH),
        ("container", EACH),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttling_storm_is_waited_out_and_every_resource_is_made_once() {
    let clock = Arc::new(ManualClock::new());
    let server = stand_in_on(&clock).await;
    let backend = backend_on(&server, &clock, None);
    let dir = tempfile::tempdir().expect("a scratch directory");
    let archive = dir.path().join("api.zip");
    std::fs::write(&archive, EMPTY_ZIP).expect("the archive is written");
    let fleet = fleet(&archive.to_string_lossy());

    let engine = Engine::new(
        Backends::new().with(backend.clone() as Arc<dyn Backend>),
        Arc::new(MemoryStore::new()),
    )
    .with_clock(clock.clone());
    let storm = Storm::new(clock.clone(), LASTS)
        .refusing(REFUSED_PER_MILLE)
        .evenly()
        .retry_after_every(1, RETRY_AFTER);
    server.storm(storm.clone());
    let outcome = engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .expect("the apply runs");
    let calls = server.storm_calls();
    server.restore();
    // A write of one resource is made by one task of the apply, so two calls of a write
    // alike (method, path, query and body) are the same call tried again; reads are
    // made alike by several tasks, and left out.
    let figures = StormFigures::judging(&storm, &calls, |c| c.method != "GET");
    eprintln!(
        "storm on the stand-in (infra-scaleway): {figures}; {} resources applied",
        outcome.result.applied.len()
    );

    // No failure, and everything made.
    assert!(
        outcome.result.failed.is_empty(),
        "{:#?}",
        outcome.result.failed
    );
    assert!(outcome.is_success(), "{:#?}", outcome.result);
    assert_eq!(outcome.result.applied.len(), fleet.len());

    // The storm did refuse, for as long as it was to, every refusal asking for its
    // wait, and was waited out: every refused write came again, no sooner than its
    // Retry-After asked.
    figures.assert_outlasted();
    assert!(
        calls
            .iter()
            .filter(|c| c.refused)
            .all(|c| c.at < LASTS && c.retry_after == Some(RETRY_AFTER)),
        "{figures}"
    );

    // Every create landed once: one successful POST per resource, and the stand-in
    // holds each name once.
    let mut made: BTreeMap<(String, String), usize> = BTreeMap::new();
    for r in server
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.status < 300)
    {
        if let Some(name) = r.body.get("name").and_then(|n| n.as_str()) {
            *made.entry((r.path.clone(), name.to_owned())).or_default() += 1;
        }
    }
    let twice: Vec<_> = made.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "created more than once: {twice:?}");
    for (kind, count) in declared() {
        let listed = backend.list(kind, "fr-par").await.expect("listed");
        let names: BTreeSet<&str> = listed.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            (names.len(), listed.len()),
            (count, count),
            "{kind}: {listed:?}"
        );
    }
    server.shutdown().await;
}
