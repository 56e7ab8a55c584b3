//! Properties of the engine over random fleets on the simulated cloud: convergence, an
//! empty second plan, a total and disjoint result, owned-only prune, teardown order, the
//! brake, zero writes in a dry run, and recovery from an interrupted apply.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use infra_core::kinds::*;
use infra_core::{
    engine::{
        ApplyError, Engine, Ledger, MemoryStore, Options, Plan, RecordError, RecordStore, Subject,
    },
    prelude::{AwsRegion, Expr, Fleet, Key, Partial, ScalewayRegion, compose_secret},
};
use infra_testkit::sim::{FaultPlan, Op, SimCloud};
use proptest::prelude::*;

/// One resource of a random fleet: which kind, which earlier resource it may refer to,
/// and a number to vary a field with.
#[derive(Clone, Debug)]
struct Item {
    kind: u8,
    pick: usize,
    number: u32,
}

fn items() -> impl Strategy<Value = Vec<Item>> {
    prop::collection::vec(
        (0u8..9, any::<prop::sample::Index>(), 1u32..4).prop_map(|(kind, pick, number)| Item {
            kind,
            pick: pick.index(1 << 16),
            number,
        }),
        1..12,
    )
}

/// Declares a fleet from items. Each reference goes to an earlier resource of the
/// right kind; an item whose reference has nothing to point at becomes a kind without
/// one. `keep` leaves items out (to make orphans).
fn fleet(items: &[Item], keep: impl Fn(usize) -> bool) -> Fleet {
    let mut f = Fleet::builder("prop");
    let aws = AwsRegion::EuWest3;
    let scw = ScalewayRegion::FrPar;
    let mut queues: Vec<Key<Queues>> = Vec::new();
    let mut groups: Vec<Key<SecurityGroup>> = Vec::new();
    let mut secrets: Vec<Key<Secrets>> = Vec::new();
    let mut databases: Vec<Key<Postgres>> = Vec::new();
    let mut namespaces: Vec<Key<FunctionNamespace>> = Vec::new();
    let pick = |n: usize, item: &Item| item.pick % n;
    for (i, item) in items.iter().enumerate() {
        if !keep(i) {
            continue;
        }
        let name = format!("res-{i}");
        let mut kind = item.kind;
        if (kind == 3 && groups.is_empty())
            || (kind == 5 || kind == 6 || kind == 7) && secrets.is_empty()
        {
            kind = if kind == 3 { 2 } else { 4 };
        }
        if kind == 8 && namespaces.is_empty() {
            kind = 7;
            if secrets.is_empty() {
                kind = 4;
            }
        }
        match kind {
            0 => {
                let spec = ObjectStore {
                    versioning: Partial::Known(Expr::lit(item.number % 2 == 0)),
                    ..ObjectStore::new()
                };
                if item.number == 3 {
                    f.declare(scw, name, spec);
                } else {
                    f.declare(aws, name, spec);
                }
            }
            1 => {
                let dead_letter = (!queues.is_empty() && item.number > 1)
                    .then(|| queues[pick(queues.len(), item)]);
                queues.push(f.declare(
                    aws,
                    name,
                    Queues {
                        fifo: Expr::lit(false),
                        visibility_timeout_seconds: Partial::Known(Expr::lit(item.number * 10)),
                        retention_seconds: Partial::Unknown,
                        dead_letter: Partial::Known(dead_letter),
                        max_receive_count: Partial::Unknown,
                        tags: Partial::Unknown,
                    },
                ));
            }
            2 => groups.push(f.declare(
                aws,
                name,
                SecurityGroup {
                    description: format!("group {i}").into(),
                    vpc_id: Partial::Unknown,
                    ingress: Expr::lit([Rule::tcp(item.number as u16 * 100, "10.0.0.0/8")].into()),
                    egress: Partial::Unknown,
                    tags: Partial::Unknown,
                },
            )),
            3 => {
                let group = groups[pick(groups.len(), item)];
                f.declare(
                    aws,
                    name,
                    AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Nano), group),
                );
            }
            4 => secrets.push(f.declare(aws, name, Secrets::generated(16 + item.number as u16))),
            5 => {
                let password = secrets[pick(secrets.len(), item)];
                databases.push(f.declare(
                    aws,
                    name,
                    Postgres::classic(PostgresClassic {
                        engine_version: "16",
                        instance_class: "db.t4g.micro",
                        master_username: "app",
                        master_password: password,
                    }),
                ));
            }
            6 => {
                let password = secrets[pick(secrets.len(), item)];
                let spec = match databases.last() {
                    Some(&db) => {
                        let host =
                            Expr::observed(db).map(|o: &PostgresObserved| o.endpoint.clone());
                        Secrets::composed(compose_secret!(
                            "postgres://app:{}@{}/x",
                            Expr::secret(password),
                            host
                        ))
                    }
                    None => Secrets::composed(compose_secret!("token:{}", Expr::secret(password))),
                };
                secrets.push(f.declare(aws, name, spec));
            }
            7 => {
                let secret = secrets[pick(secrets.len(), item)];
                namespaces.push(f.declare(
                    scw,
                    name,
                    FunctionNamespace {
                        description: Partial::Known(Expr::lit(format!("n{}", item.number))),
                        environment: Partial::Unknown,
                        secret_environment: Partial::Known(BTreeMap::from([(
                            "SECRET".to_owned(),
                            secret,
                        )])),
                        tags: Partial::Unknown,
                    },
                ));
            }
            _ => {
                let namespace = namespaces[pick(namespaces.len(), item)];
                f.declare(
                    scw,
                    name,
                    Function {
                        namespace,
                        runtime: "python311".into(),
                        handler: "h.h".into(),
                        memory_mb: Partial::Known(Expr::lit(128 * item.number)),
                        min_scale: Partial::Unknown,
                        max_scale: Partial::Unknown,
                        timeout_seconds: Partial::Unknown,
                        source_bucket: Partial::Known(None),
                        code: Partial::Unknown,
                        environment: Partial::Unknown,
                        access: Access::Private.into(),
                    },
                );
            }
        }
    }
    f.build().expect("generated fleets are sound")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
}

fn subjects_of(ledger: &Ledger) -> Vec<Subject> {
    ledger
        .rows
        .iter()
        .map(|r| Subject {
            provider: r.provider.clone(),
            kind: r.kind.clone(),
            name: r.name.clone(),
            region: r.region.clone(),
        })
        .collect()
}

fn ours(cloud: &SimCloud) -> Vec<(String, String, String)> {
    cloud
        .resources()
        .into_iter()
        .filter(|r| r.raw_tags.get("managed-by-infra").map(String::as_str) == Some("prop"))
        .map(|r| (r.provider, r.kind, r.name))
        .collect()
}

/// Records that stop changing once the simulated process has crashed: what a killed
/// process would have left on disk.
struct Frozen {
    inner: MemoryStore,
    cloud: SimCloud,
}

impl RecordStore for Frozen {
    fn load_ledger(&self, fleet: &str) -> Result<Ledger, RecordError> {
        self.inner.load_ledger(fleet)
    }
    fn save_ledger(&self, fleet: &str, ledger: &Ledger) -> Result<(), RecordError> {
        if self.cloud.is_crashed() {
            return Ok(());
        }
        self.inner.save_ledger(fleet, ledger)
    }
    fn load_cache(
        &self,
        fleet: &str,
        provider: &str,
        kind: &str,
    ) -> Result<Vec<infra_core::engine::CacheEntry>, RecordError> {
        self.inner.load_cache(fleet, provider, kind)
    }
    fn save_cache(
        &self,
        fleet: &str,
        provider: &str,
        kind: &str,
        entries: &[infra_core::engine::CacheEntry],
    ) -> Result<(), RecordError> {
        if self.cloud.is_crashed() {
            return Ok(());
        }
        self.inner.save_cache(fleet, provider, kind, entries)
    }
    fn cached_pairs(&self, fleet: &str) -> Result<Vec<(String, String)>, RecordError> {
        self.inner.cached_pairs(fleet)
    }
    fn try_lock(
        &self,
        fleet: &str,
        holder: &infra_core::engine::LockHolder,
    ) -> Result<infra_core::engine::LockGuard, infra_core::engine::LockError> {
        self.inner.try_lock(fleet, holder)
    }
    fn force_unlock(
        &self,
        fleet: &str,
        id: &str,
    ) -> Result<infra_core::engine::LockHolder, infra_core::engine::LockError> {
        self.inner.force_unlock(fleet, id)
    }
}

/// Every secret value the cloud holds for the fleet.
fn secret_values(cloud: &SimCloud) -> Vec<String> {
    cloud
        .resources()
        .iter()
        .filter(|r| r.kind == "secrets")
        .filter_map(|r| cloud.stored_secret(&r.handle))
        .map(|s| s.expose().to_owned())
        .collect()
}

/// Every record the store holds, as JSON text.
fn records_text(store: &MemoryStore, fleet: &str) -> String {
    let mut text = format!("{:?}", store.load_ledger(fleet).unwrap());
    for (provider, kind) in store.cached_pairs(fleet).unwrap() {
        text.push_str(
            &serde_json::to_string(&store.load_cache(fleet, &provider, &kind).unwrap()).unwrap(),
        );
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Apply converges; the result accounts for every resource once; a dry run writes
    /// nothing; a second plan is empty; no secret value reaches a record; the teardown
    /// deletes dependants first and leaves nothing of ours.
    #[test]
    fn apply_converges_and_teardown_reverses_it(items in items(), seed in 0u64..1000) {
        runtime().block_on(async {
            let cloud = support::cloud(seed);
            let (engine, store) = support::engine_in_memory(&cloud);
            let fleet = fleet(&items, |_| true);
            let plan = fleet.plan();

            let report = engine.plan(&plan, &Options::default()).await.unwrap();
            prop_assert!(cloud.writes().is_empty(), "a dry run wrote");
            prop_assert_eq!(report.changes.len(), fleet.len());

            let outcome = engine.apply(&plan, &Options::default()).await.unwrap();
            support::assert_total_and_disjoint(&outcome.result, &support::handed_in(&plan, &[]));
            prop_assert!(outcome.result.is_success(), "{:#?}", outcome.result);
            let again = engine.plan(&plan, &Options::default()).await.unwrap();
            prop_assert!(!again.has_changes(), "second plan:\n{}", again.render());

            let records = records_text(&store, "prop");
            for value in secret_values(&cloud) {
                prop_assert!(!records.contains(&value), "a secret value reached a record");
            }

            cloud.clear_calls();
            let teardown = engine.apply(&Plan::absent(&fleet), &Options::default()).await.unwrap();
            prop_assert!(teardown.result.is_success(), "{:#?}", teardown.result);
            let deleted: BTreeMap<String, u64> = cloud.calls().iter()
                .filter(|c| c.op == Op::Delete && c.outcome.is_ok())
                .filter_map(|c| c.name.clone().map(|n| (n, c.seq)))
                .collect();
            let names: Vec<&str> = fleet.resources().map(|r| r.reference().name.as_str()).collect();
            for r in fleet.resources() {
                for &d in r.deps() {
                    prop_assert!(deleted[&r.reference().name] < deleted[names[d]],
                        "{} deleted after {}, which it depends on", r.reference().name, names[d]);
                }
            }
            prop_assert!(ours(&cloud).is_empty(), "left behind: {:?}", ours(&cloud));
            prop_assert!(store.load_ledger("prop").unwrap().is_empty());
            Ok(())
        })?;
    }

    /// Planning in two halves (observe, then decide from the observation) gives the
    /// same plan as planning at once, over a world where part of the fleet exists and
    /// part has drifted; neither half writes.
    #[test]
    fn a_plan_from_a_kept_observation_is_the_plan(items in items(), seed in 0u64..1000) {
        runtime().block_on(async {
            let cloud = support::cloud(seed);
            let (engine, _store) = support::engine_in_memory(&cloud);
            let half = fleet(&items, |i| i % 2 == 0);
            engine.apply(&half.plan(), &Options::default()).await.unwrap();
            let full = fleet(&items, |_| true);
            let plan = full.plan();
            cloud.clear_calls();

            let observed = engine.observe_for(&plan, &Options::default()).await.unwrap();
            let twice = engine.plan_observed(&plan, observed.clone());
            let once = engine.plan(&plan, &Options::default()).await.unwrap();
            prop_assert_eq!(twice.to_json(), once.to_json());
            prop_assert_eq!(engine.plan_observed(&plan, observed).to_json(), once.to_json());
            prop_assert!(cloud.writes().is_empty(), "planning wrote");
            prop_assert!(half.len() == full.len() || once.has_changes());
            Ok(())
        })?;
    }

    /// With a foreign resource and an owned orphan side by side, prune deletes exactly
    /// the orphan.
    #[test]
    fn prune_deletes_only_what_is_owned(items in items(), seed in 0u64..1000) {
        prop_assume!(items.len() >= 2);
        runtime().block_on(async {
            let cloud = support::cloud(seed);
            let (engine, store) = support::engine_in_memory(&cloud);
            let last = items.len() - 1;
            let full = fleet(&items, |_| true);
            engine.apply(&full.plan(), &Options::default()).await.unwrap();
            let orphan = full.resources().find(|r| r.reference().name == format!("res-{last}"));
            // The last item's resource (when it was declared at all) becomes an orphan.
            let Some(orphan) = orphan else { return Ok(()) };
            let (provider, kind, region) = (orphan.reference().provider, orphan.reference().kind, orphan.region());
            let foreign = cloud.insert_foreign(provider, kind, region, "someone-elses", Default::default()).unwrap();
            let marked_elsewhere = cloud.insert_foreign(
                provider, kind, region, "another-fleets",
                [("managed-by-infra".to_owned(), "other".to_owned())].into(),
            ).unwrap();

            cloud.clear_calls();
            let trimmed = fleet(&items, |i| i != last);
            let outcome = engine
                .apply(&trimmed.plan(), &Options::default().force(true))
                .await
                .unwrap();
            let orphans = subjects_of(&Ledger {
                rows: store.load_ledger("prop").unwrap().rows,
                ..Ledger::default()
            });
            let _ = orphans;
            let deletes: Vec<String> = cloud.calls().iter()
                .filter(|c| c.op == Op::Delete)
                .filter_map(|c| c.name.clone())
                .collect();
            prop_assert_eq!(deletes, vec![format!("res-{last}")]);
            prop_assert!(cloud.resource(&foreign).is_some());
            prop_assert!(cloud.resource(&marked_elsewhere).is_some());
            prop_assert_eq!(outcome.result.pruned.len(), 1);
            Ok(())
        })?;
    }

    /// Deleting more than half of the ledger while still declaring something is
    /// refused, with no write, unless forced.
    #[test]
    fn the_brake_holds(items in items(), seed in 0u64..1000) {
        prop_assume!(items.len() >= 3);
        runtime().block_on(async {
            let cloud = support::cloud(seed);
            let (engine, _store) = support::engine_in_memory(&cloud);
            let full = fleet(&items, |_| true);
            engine.apply(&full.plan(), &Options::default()).await.unwrap();
            let kept = fleet(&items, |i| i == 0);
            let deleted = full.len() - kept.len();
            prop_assume!(deleted * 2 > full.len());
            cloud.clear_calls();
            match engine.apply(&kept.plan(), &Options::default()).await {
                Err(ApplyError::Brake { deletes, managed, .. }) => {
                    prop_assert_eq!(managed, full.len());
                    prop_assert!(deletes * 2 > managed);
                }
                other => prop_assert!(false, "expected the brake, got {:?}", other.map(|o| o.result)),
            }
            prop_assert!(cloud.writes().is_empty(), "the brake let writes through");
            let forced = engine.apply(&kept.plan(), &Options::default().force(true)).await.unwrap();
            prop_assert!(forced.result.is_success(), "{:#?}", forced.result);
            Ok(())
        })?;
    }

    /// An apply killed at a random call, then run again, converges: no twin, no leak.
    #[test]
    fn an_interrupted_apply_converges_without_leak_or_twin(items in items(), seed in 0u64..1000, at in 1u64..120) {
        runtime().block_on(async {
            let cloud = support::cloud(seed);
            let store = Arc::new(Frozen { inner: MemoryStore::new(), cloud: cloud.clone() });
            let engine: Engine = support::engine(&cloud, store.clone());
            let fleet = fleet(&items, |_| true);
            let plan = fleet.plan();

            cloud.crash_after(at);
            let _ = engine.apply(&plan, &Options::default()).await;
            cloud.revive();
            // A new process, with the records the old one left.
            let engine: Engine = support::engine(&cloud, store.clone());
            let outcome = engine.apply(&plan, &Options::default()).await.unwrap();
            prop_assert!(outcome.result.is_success(), "{:#?}", outcome.result);
            let again = engine.plan(&plan, &Options::default()).await.unwrap();
            prop_assert!(!again.has_changes(), "{}", again.render());
            let mut seen = BTreeSet::new();
            for r in ours(&cloud) {
                prop_assert!(seen.insert(r.clone()), "a twin: {:?}", r);
            }
            prop_assert_eq!(seen.len(), fleet.len());
            engine.apply(&Plan::absent(&fleet), &Options::default()).await.unwrap();
            prop_assert!(ours(&cloud).is_empty(), "leaked: {:?}", ours(&cloud));
            Ok(())
        })?;
    }

    /// Under random faults (throttling, unavailability, timeouts, lost responses) the
    /// result still accounts for every resource exactly once, and a clean second run
    /// converges without twins.
    #[test]
    fn faults_never_break_the_result_and_a_rerun_converges(items in items(), seed in 0u64..1000, rate in 0.0f64..0.3) {
        runtime().block_on(async {
            let cloud = support::cloud(seed);
            let (engine, _store) = support::engine_in_memory(&cloud);
            let fleet = fleet(&items, |_| true);
            let plan = fleet.plan();
            cloud.install(&FaultPlan::random(seed, 200, rate));
            if let Ok(outcome) = engine.apply(&plan, &Options::default()).await {
                support::assert_total_and_disjoint(&outcome.result, &support::handed_in(&plan, &[]));
            }
            cloud.clear_faults();
            let outcome = engine.apply(&plan, &Options::default()).await.unwrap();
            prop_assert!(outcome.result.is_success(), "{:#?}", outcome.result);
            let mut seen = BTreeSet::new();
            for r in ours(&cloud) {
                prop_assert!(seen.insert(r.clone()), "a twin: {:?}", r);
            }
            prop_assert_eq!(seen.len(), fleet.len());
            Ok(())
        })?;
    }
}
