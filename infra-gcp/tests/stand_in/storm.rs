//! A throttling storm: for thirty seconds the stand-in refuses half of all calls with
//! 429 `RESOURCE_EXHAUSTED` (one refusal in four asking, by `Retry-After`, for two
//! seconds), while a fleet of several resources of every kind the stand-in serves is
//! applied through the engine. Every resource must be created exactly once, nothing
//! may fail, and every `Retry-After` must have been waited for, as the stand-in's own
//! log of the storm's calls shows.
//!
//! Time is simulated: the test runs on a paused tokio clock, which the official
//! clients sleep on, the crate's own waits use (`SystemClock` reads tokio's time), and
//! the storm keeps. A paused clock that has nothing to run jumps to its next timer, and
//! with requests on loopback in flight that next timer could be a request's timeout,
//! which would then fire without the request being slow at all. A metronome (a task
//! sleeping one millisecond at a time) keeps every jump to a millisecond, so that a
//! request on loopback is always answered long before its timeout comes due.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use infra_core::engine::{Engine, MemoryStore, Options};
use infra_core::kinds::*;
use infra_core::prelude::{Backends, Expr, Fleet, GcpRegion, Partial};
use infra_core::sdk::{Backend, Clock, RetryPolicy, SystemClock};
use infra_gcp::{GcpBackend, GcpConfig, Polling};
use infra_testkit::gcp::RecordedRequest;
use infra_testkit::storm::{Storm, StormCall, StormFigures};

use super::PROJECT;
use crate::stand_in;

/// How many resources of each kind the fleet declares.
const EACH: usize = 3;
/// How long the storm lasts, on the simulated clock (about as long as the apply takes
/// through it: the apply may end while it still blows).
const STORM: Duration = Duration::from_secs(30);
/// The wait one refusal in four asks for.
const ASKED: Duration = Duration::from_secs(2);

fn known<T: infra_core::prelude::Value>(value: T) -> Partial<Expr<T>> {
    Partial::Known(Expr::lit(value))
}

/// Several resources of every kind the stand-in serves, some referring to others.
fn fleet() -> Fleet {
    let mut f = Fleet::builder("storm");
    let here = GcpRegion::EuropeWest1;
    let tags = known(BTreeMap::from([(
        "scenario".to_owned(),
        "storm".to_owned(),
    )]));
    for i in 0..EACH {
        f.declare(
            here,
            format!("storm-bucket-{i}"),
            ObjectStore {
                versioning: known(i % 2 == 0),
                expire_after_days: known(Some(30)),
                tags: tags.clone(),
            },
        );
        let key = f.declare(
            here,
            format!("storm-key-{i}"),
            Secrets {
                tags: tags.clone(),
                ..Secrets::generated(20)
            },
        );
        f.declare(
            here,
            format!("storm-images-{i}"),
            ImageRegistry {
                scan_on_push: known(true),
                immutable_tags: known(i % 2 == 1),
                tags: tags.clone(),
            },
        );
        let runner = f.declare(
            here,
            format!("storm-runner-{i}"),
            Iam {
                policies: Expr::lit(BTreeSet::from(["roles/logging.logWriter".to_owned()])),
                assumed_by: Expr::lit(BTreeSet::new()),
                description: known(format!("runner {i}")),
                tags: tags.clone(),
            },
        );
        f.declare(
            here,
            format!("storm-api-{i}"),
            Compute {
                runtime: Expr::lit("python312".to_owned()),
                handler: Expr::lit("main.handle".to_owned()),
                code: Expr::lit(format!("gs://storm-sources/api-{i}.zip")),
                code_sha256: Partial::Unknown,
                memory_mb: known(256),
                timeout_seconds: known(60),
                environment: known(BTreeMap::from([("N".to_owned(), i.to_string())])),
                secret_environment: Partial::Known(BTreeMap::from([("KEY".to_owned(), key)])),
                role: Some(runner),
                tags: tags.clone(),
                access: if i == 0 {
                    Access::Public
                } else {
                    Access::Private
                }
                .into(),
            },
        );
        let dead = f.declare(
            here,
            format!("storm-dead-{i}"),
            Queues {
                fifo: Expr::lit(false),
                visibility_timeout_seconds: known(30),
                retention_seconds: known(86_400),
                dead_letter: Partial::Known(None),
                max_receive_count: Partial::Unknown,
                tags: tags.clone(),
            },
        );
        f.declare(
            here,
            format!("storm-jobs-{i}"),
            Queues {
                fifo: Expr::lit(false),
                visibility_timeout_seconds: known(60),
                retention_seconds: known(86_400),
                dead_letter: Partial::Known(Some(dead)),
                max_receive_count: known(5),
                tags: tags.clone(),
            },
        );
        if i < 2 {
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
                    backup_retention_days: known(7),
                    tags: tags.clone(),
                    ..Postgres::classic(PostgresClassic {
                        engine_version: "16",
                        instance_class: "db-f1-micro",
                        master_username: "app",
                        master_password: password,
                    })
                },
            );
        }
    }
    f.build().expect("the storm's fleet is sound")
}

/// The resource a successful create request made, `(kind of call, name)`; `None` for
/// any other request.
fn created(r: &RecordedRequest) -> Option<(&'static str, String)> {
    if r.status >= 300 {
        return None;
    }
    let last = r.path.rsplit('/').next().unwrap_or("");
    let body = |key: &str| r.body.get(key).and_then(|v| v.as_str()).map(str::to_owned);
    match r.method.as_str() {
        "POST" if r.path == "/storage/v1/b" => Some(("bucket", body("name")?)),
        "POST" if last == "secrets" => Some(("secret", r.query.get("secretId")?.clone())),
        "POST" if last == "repositories" => {
            Some(("repository", r.query.get("repositoryId")?.clone()))
        }
        "POST" if last == "services" => Some(("service", r.query.get("serviceId")?.clone())),
        "POST" if last == "serviceAccounts" => Some(("account", body("accountId")?)),
        "POST" if last == "instances" => Some(("instance", body("name")?)),
        "PUT" if r.path.contains("/topics/") => Some(("topic", last.to_owned())),
        "PUT" if r.path.contains("/subscriptions/") => Some(("subscription", last.to_owned())),
        _ => None,
    }
}

/// Whether the same request is made by several resources' flows at once, so that the
/// next one seen after a refusal need not be its retry: the reads of the project (its
/// IAM policy, which every service account's bindings read; the project itself).
fn shared(call: &StormCall) -> bool {
    let project = format!("/v3/projects/{PROJECT}");
    call.what
        .starts_with(&format!("POST {project}:getIamPolicy?"))
        || call.what.starts_with(&format!("GET {project}?"))
}

#[tokio::test(start_paused = true)]
async fn a_fleet_is_applied_through_a_throttling_storm_with_every_resource_made_once() {
    // The metronome: see the module documentation.
    let metronome = tokio::spawn(async {
        loop {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
    let server = stand_in().await;
    let config = GcpConfig::stand_in(PROJECT, &server.address())
        .expect("loopback")
        .clock(Arc::clone(&clock))
        .polling(Polling {
            first: Duration::from_millis(100),
            longest: Duration::from_secs(1),
            deadline: Duration::from_secs(300),
        })
        // The default policy (two minutes of retries, waits up to twenty seconds),
        // with the default request timeout; nothing here is made easier.
        .retry_policy(RetryPolicy::default());
    let backend: Arc<dyn Backend> = Arc::new(GcpBackend::new(config));
    let fleet = fleet();
    let storm = Storm::new(Arc::clone(&clock), STORM)
        .refusing(500)
        .retry_after_every(4, ASKED)
        .seeded(7);
    server.storm(storm.clone());
    let started = clock.now();
    let engine = Engine::new(
        Backends::new().with(backend.clone()),
        Arc::new(MemoryStore::new()),
    )
    .with_clock(Arc::clone(&clock));
    let outcome = engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .expect("the apply runs");
    let took = clock.now().saturating_sub(started);
    let figures = StormFigures::judging(&storm, &server.storm_calls(), |c| !shared(c));
    metronome.abort();
    eprintln!(
        "storm on the stand-in (infra-gcp): {figures}; the apply took {:.1} s of simulated \
         time (the waits of the requests several flows make left out)",
        took.as_secs_f64()
    );

    // Nothing failed, and everything was created.
    assert!(
        outcome.result.failed.is_empty(),
        "{:#?}",
        outcome.result.failed
    );
    assert!(outcome.is_success(), "{:#?}", outcome.result);
    assert_eq!(outcome.result.applied.len(), fleet.len());

    // Every resource created exactly once, by the stand-in's own record of the calls
    // that succeeded.
    let mut made: BTreeMap<(&str, String), usize> = BTreeMap::new();
    for r in &server.requests() {
        if let Some(resource) = created(r) {
            *made.entry(resource).or_default() += 1;
        }
    }
    let twice: Vec<_> = made.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "made more than once: {twice:?}");
    let per_kind = |kind: &str| made.keys().filter(|(k, _)| *k == kind).count();
    assert_eq!(per_kind("bucket"), EACH);
    assert_eq!(per_kind("repository"), EACH);
    assert_eq!(per_kind("service"), EACH);
    assert_eq!(per_kind("account"), EACH);
    assert_eq!(per_kind("instance"), 2);
    assert_eq!(per_kind("secret"), EACH + 2);
    assert_eq!(per_kind("topic"), 2 * EACH);
    assert_eq!(per_kind("subscription"), 2 * EACH);
    let (topics, subscriptions) = server.pubsub_names();
    assert_eq!(topics.len(), 2 * EACH, "{topics:?}");
    assert_eq!(subscriptions.len(), 2 * EACH, "{subscriptions:?}");

    // The storm was a storm (half refused, within fifteen points), and every wait it
    // asked for was waited, by a call that came again.
    figures.assert_weathered();
    assert!(
        figures.refusals >= 20,
        "the storm refused too few calls: {figures}"
    );
    assert!(
        figures.with_retry_after >= 5,
        "too few refusals asked for a wait: {figures}"
    );
    server.shutdown().await;
}
