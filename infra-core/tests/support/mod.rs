//! Shared helpers for the engine's tests: an engine over a simulated cloud, and the
//! staged fleet.

#![allow(dead_code, unreachable_pub)]

pub mod altered;
pub mod console;
#[cfg(feature = "postgres")]
pub mod pg;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use infra_core::kinds::*;
use infra_core::{
    engine::{ApplyResult, Engine, ManualClock, MemoryStore, Plan, RecordStore, Subject},
    prelude::{AwsRegion, Expr, Fleet, Partial, ScalewayRegion, compose_secret},
};
use infra_testkit::sim::SimCloud;

/// A simulated cloud on a manual clock: nothing waits on real time.
pub fn cloud(seed: u64) -> SimCloud {
    SimCloud::with_clock(seed, Arc::new(ManualClock::new()))
}

/// An engine over `cloud`, keeping records in `store`.
pub fn engine(cloud: &SimCloud, store: Arc<dyn RecordStore>) -> Engine {
    Engine::new(cloud.backends(), store).with_clock(cloud.clock())
}

/// An engine with records in memory.
pub fn engine_in_memory(cloud: &SimCloud) -> (Engine, Arc<MemoryStore>) {
    let store = Arc::new(MemoryStore::new());
    (engine(cloud, store.clone()), store)
}

/// Every resource a plan hands to an apply: its declared, non-unmanaged keys, and the
/// ledger's orphans.
pub fn handed_in(plan: &Plan, orphans: &[Subject]) -> BTreeSet<Subject> {
    let fleet = plan.fleet();
    fleet
        .resources()
        .map(|r| Subject {
            provider: r.reference().provider.to_owned(),
            kind: r.reference().kind.to_owned(),
            name: r.reference().name.clone(),
            region: r.region().to_owned(),
        })
        .chain(orphans.iter().cloned())
        .collect()
}

/// Asserts the result is total over `expected` and disjoint.
pub fn assert_total_and_disjoint(result: &ApplyResult, expected: &BTreeSet<Subject>) {
    result.check_disjoint().expect("disjoint");
    assert_eq!(
        &result.subject_set(),
        expected,
        "the result must account for every resource exactly once"
    );
}

/// The stages of the staged scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Full,
    RampUp,
    RampDown,
    Trimmed,
    Empty,
}

fn known<T: infra_core::prelude::Value>(v: T) -> Partial<Expr<T>> {
    Partial::Known(Expr::lit(v))
}

/// The staged fleet: fourteen resources with a fan-out (three instances on one group),
/// a fan-in with a redundant edge (the database URL reads the password directly and
/// through the database), a four-deep chain of dead-letter queues, and cross-cloud
/// edges (a Scaleway namespace reading an AWS secret, a Scaleway function fetching from
/// an AWS bucket).
pub fn staged(stage: Stage) -> Fleet {
    let mut f = Fleet::builder("staged");
    if stage == Stage::Empty {
        return f.build().expect("an empty fleet");
    }
    let big = stage == Stage::RampUp;
    let here = AwsRegion::EuWest3;
    let password = f.declare(here, "db-password", Secrets::generated(24));
    let db = f.declare(
        here,
        "db",
        Postgres {
            backup_retention_days: known(if big { 14 } else { 7 }),
            ..Postgres::classic(PostgresClassic {
                engine_version: "16",
                instance_class: "db.t4g.micro",
                master_username: "app",
                master_password: password,
            })
        },
    );
    let host = Expr::observed(db).map(|o: &PostgresObserved| o.endpoint.clone());
    let url = f.declare(
        here,
        "db-url",
        Secrets::composed(compose_secret!(
            "postgres://app:{}@{}/app",
            Expr::secret(password),
            host
        )),
    );
    let web = f.declare(
        here,
        "web",
        SecurityGroup {
            description: "web".into(),
            vpc_id: Partial::Unknown,
            ingress: Expr::lit([Rule::tcp(443, "0.0.0.0/0")].into()),
            egress: Partial::Unknown,
            tags: known(BTreeMap::from([("stage".to_owned(), "test".to_owned())])),
        },
    );
    let instances: &[&str] = if stage == Stage::Trimmed {
        &["web-1", "web-2"]
    } else {
        &["web-1", "web-2", "web-3"]
    };
    for name in instances {
        f.declare(
            here,
            *name,
            AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Micro), web),
        );
    }
    let queue = |dead_letter: Option<infra_core::prelude::Key<Queues>>| Queues {
        fifo: Expr::lit(false),
        visibility_timeout_seconds: known(if big { 60 } else { 30 }),
        retention_seconds: Partial::Unknown,
        dead_letter: Partial::Known(dead_letter),
        max_receive_count: Partial::Unknown,
        tags: Partial::Unknown,
    };
    let q1 = f.declare(here, "q1", queue(None));
    let q2 = f.declare(here, "q2", queue(Some(q1)));
    let q3 = f.declare(here, "q3", queue(Some(q2)));
    if stage != Stage::Trimmed {
        f.declare(here, "q4", queue(Some(q3)));
    }
    let bucket = f.declare(
        here,
        "staged-artifacts",
        S3Bucket {
            versioning: known(true),
            object_lock: Partial::Unknown,
            block_public_access: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    let fns = f.declare(
        ScalewayRegion::FrPar,
        "fns",
        FunctionNamespace {
            description: Partial::Unknown,
            environment: Partial::Unknown,
            secret_environment: Partial::Known(BTreeMap::from([("DATABASE_URL".to_owned(), url)])),
            tags: Partial::Unknown,
        },
    );
    f.declare(
        ScalewayRegion::FrPar,
        "worker",
        Function {
            namespace: fns,
            runtime: "python311".into(),
            handler: "worker.handle".into(),
            memory_mb: known(if big { 512 } else { 256 }),
            min_scale: known(0),
            max_scale: known(if big { 5 } else { 2 }),
            timeout_seconds: Partial::Unknown,
            source_bucket: Partial::Known(Some(bucket)),
            code: Partial::Unknown,
            environment: Partial::Unknown,
            access: Access::Private.into(),
        },
    );
    if stage == Stage::Trimmed {
        f.declare(here, "staged-logs", ObjectStore::new());
    }
    f.build().expect("the staged fleet is sound")
}
