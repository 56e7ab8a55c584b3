//! Fleet properties: a user's real declaration, run against the simulated cloud under
//! random faults, orders and interruptions, with every guarantee of the engine checked.
//!
//! ```
//! use infra_core::{prelude::AwsRegion, prelude::Fleet, kinds::ObjectStore};
//!
//! let mut fleet = Fleet::builder("shop");
//! fleet.declare(AwsRegion::EuWest3, "shop-assets", ObjectStore::new());
//! let fleet = fleet.build().unwrap();
//!
//! infra_testkit::check_fleet(&fleet); // panics with the seed and the faults on a failure
//! ```
//!
//! Each case draws a seed, a fault schedule (throttling, unavailability, timeouts that
//! may have been sent, lost responses), a point at which the applying process dies, and
//! a parallelism, then checks, in order:
//!
//! 1. a dry run makes no write;
//! 2. an apply under those faults accounts for every resource exactly once: each
//!    declared resource and each row of the records it started from, in one bucket each,
//!    and nothing else;
//! 3. after the faults stop (and the "process" restarts from the records it left), an
//!    apply converges: every resource applied, none twice in the cloud, and a second
//!    plan empty. A resource is found by what its kind can prove: the fleet's marker
//!    where the backend can read a kind's ownership, and its name in its region where it
//!    cannot (a Scaleway Queues queue carries no tags; a Scaleway registry namespace's
//!    can be written by anyone), as the backend's
//!    [`Capabilities::ownership`](infra_core::sdk::Capabilities::ownership) declares;
//! 4. no secret value reaches a record;
//! 5. prune is owned-only, on the calls made: with a foreign resource and an owned
//!    orphan in one scope, exactly one delete, of the orphan — and the orphan's row is
//!    accounted for in the result (in the scope of the first declared kind whose
//!    ownership can be read: an orphan of any other kind is never pruned);
//! 6. the brake holds: with more owned orphans than declared resources, the apply is
//!    refused and writes nothing (in the same scope);
//! 7. teardown deletes every resource after everything that depends on it, and leaves
//!    nothing of the fleet behind.
//!
//! Call it from a plain `#[test]`: it runs its own async runtime.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use infra_core::{
    engine::{
        ApplyError, ApplyResult, CacheEntry, Engine, Ledger, LedgerRow, ManualClock, MemoryStore,
        Options, Plan, RecordError, RecordStore, Subject,
    },
    prelude::{Backends, Fleet},
    sdk::{Backend, MARKER_KEY, RawTags, RetryPolicy},
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use crate::sim::{FaultPlan, Op, SimCloud};

static CASES: AtomicU64 = AtomicU64::new(0);

/// How many fleet × fault cases this process has run so far.
pub fn cases_run() -> u64 {
    CASES.load(Ordering::Relaxed)
}

/// Counts one fleet × fault case.
pub(crate) fn count_case() {
    CASES.fetch_add(1, Ordering::Relaxed);
}

/// The circumstances of one case: what the world does while the fleet is applied.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// The simulated world's seed (handles, fault draws).
    pub seed: u64,
    /// The fault schedule installed for the first apply.
    pub faults: FaultPlan,
    /// The call after which the applying process dies, if it does.
    pub crash_after: Option<u64>,
    /// Provider calls in flight at once.
    pub parallelism: usize,
}

/// Scenarios: faults at up to `max_rate` of the calls, a crash in half of them.
pub fn scenario(max_rate: f64) -> impl Strategy<Value = Scenario> {
    (
        any::<u64>(),
        0.0..=max_rate,
        prop::option::weighted(0.5, 1u64..200),
        prop::sample::select(vec![1usize, 2, 4, 16]),
    )
        .prop_map(|(seed, rate, crash_after, parallelism)| Scenario {
            seed,
            faults: FaultPlan::random(seed, 400, rate),
            crash_after,
            parallelism,
        })
}

/// Records that stop changing once the simulated process has died: what a killed
/// process leaves on disk.
pub struct CrashStore {
    inner: MemoryStore,
    cloud: SimCloud,
}

impl fmt::Debug for CrashStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrashStore")
            .field("inner", &self.inner)
            .finish()
    }
}

impl CrashStore {
    /// Records in memory that freeze when `cloud` crashes.
    pub fn new(cloud: &SimCloud) -> Self {
        CrashStore {
            inner: MemoryStore::new(),
            cloud: cloud.clone(),
        }
    }

    /// Every record of `fleet`, as text (to search for what must not be there).
    pub fn text(&self, fleet: &str) -> String {
        let mut text = format!("{:?}", self.inner.load_ledger(fleet));
        for (provider, kind) in self.inner.cached_pairs(fleet).unwrap_or_default() {
            let entries = self
                .inner
                .load_cache(fleet, &provider, &kind)
                .unwrap_or_default();
            text.push_str(&serde_json::to_string(&entries).unwrap_or_default());
        }
        text
    }
}

impl RecordStore for CrashStore {
    fn load_ledger(&self, fleet: &str) -> Result<Ledger, RecordError> {
        self.inner.load_ledger(fleet)
    }
    fn save_ledger(&self, fleet: &str, ledger: &Ledger) -> Result<(), RecordError> {
        if self.cloud.is_crashed() {
            return Ok(());
        }
        self.inner.save_ledger(fleet, ledger)
    }
    fn record_progress(
        &self,
        fleet: &str,
        progress: &infra_core::engine::LedgerProgress,
    ) -> Result<(), RecordError> {
        if self.cloud.is_crashed() {
            return Ok(());
        }
        self.inner.record_progress(fleet, progress)
    }
    fn load_cache(
        &self,
        fleet: &str,
        provider: &str,
        kind: &str,
    ) -> Result<Vec<CacheEntry>, RecordError> {
        self.inner.load_cache(fleet, provider, kind)
    }
    fn save_cache(
        &self,
        fleet: &str,
        provider: &str,
        kind: &str,
        entries: &[CacheEntry],
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

/// A property that did not hold, with everything needed to replay it.
#[derive(Clone, Debug)]
pub struct Failure {
    /// Which property.
    pub property: &'static str,
    /// What was seen.
    pub detail: String,
    /// The circumstances (seed, fault schedule, crash point, parallelism), shrunk.
    pub scenario: Scenario,
    /// The change made to the fleet before the failing step, if any.
    pub mutation: Option<String>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "property failed: {}", self.property)?;
        writeln!(f, "  {}", self.detail)?;
        writeln!(f, "  seed: {}", self.scenario.seed)?;
        writeln!(f, "  parallelism: {}", self.scenario.parallelism)?;
        writeln!(f, "  crash after call: {:?}", self.scenario.crash_after)?;
        writeln!(f, "  fault schedule: {:?}", self.scenario.faults)?;
        if let Some(m) = &self.mutation {
            writeln!(f, "  mutation: {m}")?;
        }
        Ok(())
    }
}

/// Runs the fleet properties over many scenarios. See the [module](self) docs.
#[derive(Clone)]
pub struct FleetCheck {
    cases: u32,
    max_fault_rate: f64,
    extra: Vec<BackendFactory>,
    records: Option<RecordsLayer>,
}

/// Makes a fresh backend for one case (from the case's seed).
type BackendFactory = Arc<dyn Fn(u64) -> Arc<dyn Backend> + Send + Sync>;

/// Wraps the records the engine of a case keeps.
pub type RecordsLayer = Arc<dyn Fn(Arc<dyn RecordStore>) -> Arc<dyn RecordStore> + Send + Sync>;

impl fmt::Debug for FleetCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetCheck")
            .field("cases", &self.cases)
            .field("max_fault_rate", &self.max_fault_rate)
            .field("extra_backends", &self.extra.len())
            .field("records_layer", &self.records.is_some())
            .finish()
    }
}

impl Default for FleetCheck {
    fn default() -> Self {
        Self::new()
    }
}

/// Checks `fleet` with the default options; panics with a replayable report on failure.
pub fn check_fleet(fleet: &Fleet) {
    FleetCheck::new().assert(fleet);
}

impl FleetCheck {
    /// 64 cases (or `INFRA_CHECK_CASES`), faults on up to 20% of calls.
    pub fn new() -> Self {
        let cases = std::env::var("INFRA_CHECK_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64);
        FleetCheck {
            cases,
            max_fault_rate: 0.2,
            extra: Vec::new(),
            records: None,
        }
    }

    /// How many scenarios to run.
    pub fn cases(mut self, cases: u32) -> Self {
        self.cases = cases;
        self
    }

    /// The highest share of calls hit by a fault (0 for none).
    pub fn max_fault_rate(mut self, rate: f64) -> Self {
        self.max_fault_rate = rate.clamp(0.0, 1.0);
        self
    }

    /// A backend for a provider the simulated cloud does not serve (a custom one),
    /// made afresh for every case from the case's seed, so that cases share no state.
    pub fn backend(
        mut self,
        make: impl Fn(u64) -> Arc<dyn Backend> + Send + Sync + 'static,
    ) -> Self {
        self.extra.push(Arc::new(make));
        self
    }

    /// A layer around the records each case's engine keeps (a record store of your
    /// own in front of the in-memory one; or, in this crate's tests, a broken one that
    /// shows the checks can fail). The checks read the records beneath the layer.
    pub fn records(
        mut self,
        layer: impl Fn(Arc<dyn RecordStore>) -> Arc<dyn RecordStore> + Send + Sync + 'static,
    ) -> Self {
        self.records = Some(Arc::new(layer));
        self
    }

    /// Runs every case; the first failure (shrunk to its simplest scenario) comes back.
    pub fn run(&self, fleet: &Fleet) -> Result<u32, Box<Failure>> {
        let mut runner = TestRunner::new(Config {
            cases: self.cases,
            failure_persistence: None,
            ..Config::default()
        });
        let last: Mutex<Option<Failure>> = Mutex::new(None);
        let result = runner.run(&scenario(self.max_fault_rate), |scenario| {
            let extra: Vec<Arc<dyn Backend>> =
                self.extra.iter().map(|make| make(scenario.seed)).collect();
            match run_case_with(fleet, &scenario, &extra, self.records.as_ref()) {
                Ok(()) => Ok(()),
                Err(failure) => {
                    let message = failure.to_string();
                    *last.lock().expect("lock") = Some(*failure);
                    Err(TestCaseError::fail(message))
                }
            }
        });
        match result {
            Ok(()) => Ok(self.cases),
            Err(_) => Err(Box::new(
                last.into_inner()
                    .expect("lock")
                    .expect("a failing case recorded its failure"),
            )),
        }
    }

    /// Runs every case and panics with the failure's report.
    pub fn assert(&self, fleet: &Fleet) {
        if let Err(failure) = self.run(fleet) {
            panic!("fleet `{}`: {failure}", fleet.name());
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
}

/// The simulated world's providers.
const SIMULATED: [&str; 3] = ["aws", "gcp", "scaleway"];

fn engine(
    cloud: &SimCloud,
    store: Arc<dyn RecordStore>,
    extra: &[Arc<dyn Backend>],
    layer: Option<&RecordsLayer>,
) -> Engine {
    let store = match layer {
        Some(layer) => layer(store),
        None => store,
    };
    cloud.set_retry_policy(
        RetryPolicy::default()
            .with_budget(std::time::Duration::from_secs(2))
            .with_backoff(
                std::time::Duration::from_millis(50),
                std::time::Duration::from_secs(1),
            ),
    );
    let mut backends: Backends = cloud.backends();
    for b in extra {
        backends.insert(Arc::clone(b));
    }
    Engine::new(backends, store).with_clock(cloud.clock())
}

/// The subjects a plan hands to an apply, orphans aside.
pub fn declared_subjects(fleet: &Fleet) -> BTreeSet<Subject> {
    fleet
        .resources()
        .filter(|r| r.status() != "unmanaged")
        .map(|r| Subject {
            provider: r.reference().provider.to_owned(),
            kind: r.reference().kind.to_owned(),
            name: r.reference().name.clone(),
            region: r.region().to_owned(),
        })
        .collect()
}

/// What an apply of `fleet` is handed, from records holding `ledger`: each declared
/// resource in play and each row of the records (rows released with `forget` aside:
/// they leave the records without a call, and the plan reports them).
pub fn handed_in(fleet: &Fleet, ledger: &Ledger) -> BTreeSet<Subject> {
    let forgotten: BTreeSet<(&str, &str, &str)> = fleet
        .forgets()
        .iter()
        .map(|r| {
            (
                r.resource.provider,
                r.resource.kind,
                r.resource.name.as_str(),
            )
        })
        .collect();
    let rows = ledger
        .rows
        .iter()
        .filter(|r| !forgotten.contains(&(r.provider.as_str(), r.kind.as_str(), r.name.as_str())))
        .map(|r| Subject {
            provider: r.provider.clone(),
            kind: r.kind.clone(),
            name: r.name.clone(),
            region: r.region.clone(),
        });
    declared_subjects(fleet).into_iter().chain(rows).collect()
}

/// Checks that a result accounts for exactly `expected`, each once: nothing handed in is
/// missing (a dropped orphan fails it), nothing else is there, nothing is there twice.
pub fn total_and_disjoint(
    result: &ApplyResult,
    expected: &BTreeSet<Subject>,
) -> Result<(), String> {
    result.check_disjoint().map_err(|e| e.to_string())?;
    let got = result.subject_set();
    if let Some(missing) = expected.iter().find(|s| !got.contains(*s)) {
        return Err(format!(
            "{missing} was handed in and is missing from the result"
        ));
    }
    if let Some(extra) = got.iter().find(|s| !expected.contains(*s)) {
        return Err(format!("{extra} is in the result but was not handed in"));
    }
    Ok(())
}

/// Resources of the simulated world carrying `fleet`'s marker, by provider, kind and
/// name, with how many of each there are.
pub fn marked(cloud: &SimCloud, fleet: &str) -> BTreeMap<(String, String, String), usize> {
    let mut out = BTreeMap::new();
    for r in cloud.resources() {
        if r.raw_tags.get(MARKER_KEY).map(String::as_str) == Some(fleet) {
            *out.entry((r.provider, r.kind, r.name)).or_default() += 1;
        }
    }
    out
}

/// What each simulated kind can prove about a resource of this fleet, as the simulated
/// backends declare it in their capabilities: its ownership marker, where the backend
/// can read the kind's ownership; nothing but its name in its region elsewhere.
#[derive(Clone, Debug, Default)]
pub struct Proofs {
    marked: BTreeSet<(&'static str, &'static str)>,
}

impl Proofs {
    /// The proofs of every kind of every provider the simulated world serves.
    pub fn of(cloud: &SimCloud) -> Self {
        let backends = cloud.backends();
        let mut marked = BTreeSet::new();
        for provider in backends.providers() {
            if let Some(backend) = backends.get(provider) {
                for kind in backend.capabilities().ownership {
                    marked.insert((provider, kind));
                }
            }
        }
        Proofs { marked }
    }

    /// Whether a resource like `subject` is found by the fleet's marker (`false`: by
    /// its name in its region, since the kind cannot carry a marker that proves whose it
    /// is).
    pub fn by_marker(&self, subject: &Subject) -> bool {
        self.marked
            .iter()
            .any(|(p, k)| *p == subject.provider && *k == subject.kind)
    }

    /// How `subject` is looked for, in words.
    pub fn describe(&self, subject: &Subject) -> &'static str {
        if self.by_marker(subject) {
            "looked for by the fleet's marker"
        } else {
            "looked for by name: its kind's ownership cannot be read"
        }
    }
}

/// How many resources of the simulated world are `subject`: with `fleet`'s marker when
/// `by_marker`, or else by provider, kind, name and region alone.
pub fn copies(cloud: &SimCloud, fleet: &str, subject: &Subject, by_marker: bool) -> usize {
    cloud
        .resources()
        .iter()
        .filter(|r| {
            r.provider == subject.provider
                && r.kind == subject.kind
                && r.name == subject.name
                && r.region == subject.region
        })
        .filter(|r| !by_marker || r.raw_tags.get(MARKER_KEY).map(String::as_str) == Some(fleet))
        .count()
}

/// Every secret value the simulated world holds.
pub fn secret_values(cloud: &SimCloud) -> Vec<String> {
    cloud
        .resources()
        .iter()
        .filter(|r| r.kind == "secrets")
        .filter_map(|r| cloud.stored_secret(&r.handle))
        .map(|s| s.expose().to_owned())
        .collect()
}

/// One case: every property, in order, for `fleet` in `scenario`.
pub fn run_case(
    fleet: &Fleet,
    scenario: &Scenario,
    extra: &[Arc<dyn Backend>],
) -> Result<(), Box<Failure>> {
    run_case_with(fleet, scenario, extra, None)
}

/// [`run_case`], with a layer around the engine's records.
pub fn run_case_with(
    fleet: &Fleet,
    scenario: &Scenario,
    extra: &[Arc<dyn Backend>],
    layer: Option<&RecordsLayer>,
) -> Result<(), Box<Failure>> {
    count_case();
    let fail = |property: &'static str, detail: String| {
        Box::new(Failure {
            property,
            detail,
            scenario: scenario.clone(),
            mutation: None,
        })
    };
    runtime().block_on(async {
        let cloud = SimCloud::with_clock(scenario.seed, Arc::new(ManualClock::new()));
        let store = Arc::new(CrashStore::new(&cloud));
        let options = Options::default().parallelism(scenario.parallelism);
        let plan = fleet.plan();
        let expected = declared_subjects(fleet);
        let ledger_of =
            |store: &CrashStore| store.load_ledger(fleet.name()).expect("memory records");

        // 1. A dry run makes no write.
        let engine0 = engine(&cloud, store.clone(), extra, layer);
        engine0
            .plan(&plan, &options)
            .await
            .map_err(|e| fail("a dry run succeeds", e.to_string()))?;
        if !cloud.writes().is_empty() {
            return Err(fail(
                "a dry run makes no write",
                format!("{:?}", cloud.writes()),
            ));
        }

        // 2. Under faults (and perhaps a crash), the result is still total and disjoint.
        cloud.install(&scenario.faults);
        if let Some(n) = scenario.crash_after {
            cloud.crash_after(n);
        }
        let handed = handed_in(fleet, &ledger_of(&store));
        if let Ok(outcome) = engine0.apply(&plan, &options).await
            && !cloud.is_crashed()
        {
            total_and_disjoint(&outcome.result, &handed)
                .map_err(|e| fail("the result is total and disjoint under faults", e))?;
        }
        cloud.clear_faults();
        cloud.revive();

        // 3. A new process, from the records the old one left, converges.
        let engine1 = engine(&cloud, store.clone(), extra, layer);
        let handed = handed_in(fleet, &ledger_of(&store));
        let outcome = engine1
            .apply(&plan, &options)
            .await
            .map_err(|e| fail("a clean apply after faults succeeds", e.to_string()))?;
        total_and_disjoint(&outcome.result, &handed)
            .map_err(|e| fail("the result is total and disjoint", e))?;
        if !outcome.result.is_success() {
            return Err(fail(
                "the apply converges",
                format!("{:#?}", outcome.result),
            ));
        }
        let again = engine1
            .plan(&plan, &options)
            .await
            .map_err(|e| fail("a second plan succeeds", e.to_string()))?;
        if again.has_changes() {
            return Err(fail("a second plan is empty", again.render()));
        }
        let proofs = Proofs::of(&cloud);
        for s in expected
            .iter()
            .filter(|s| SIMULATED.contains(&s.provider.as_str()))
        {
            match copies(&cloud, fleet.name(), s, proofs.by_marker(s)) {
                0 => {
                    return Err(fail(
                        "every declared resource exists",
                        format!("{s} is missing ({})", proofs.describe(s)),
                    ));
                }
                1 => {}
                n => {
                    return Err(fail(
                        "no twin after an interrupted apply",
                        format!("{s} exists {n} times ({})", proofs.describe(s)),
                    ));
                }
            }
        }
        let ours = marked(&cloud, fleet.name());
        if let Some((twin, n)) = ours.iter().find(|(_, n)| **n > 1) {
            return Err(fail(
                "no twin after an interrupted apply",
                format!("{twin:?} exists {n} times"),
            ));
        }

        // 4. No secret value in any record.
        let records = store.text(fleet.name());
        if secret_values(&cloud)
            .iter()
            .any(|v| records.contains(v.as_str()))
        {
            return Err(fail(
                "no secret value reaches a record",
                "a secret value is in the records".into(),
            ));
        }

        // 5. Prune is owned-only, on the calls made, in a scope whose owned orphans can
        // be told from foreign resources.
        let scope = expected
            .iter()
            .find(|s| SIMULATED.contains(&s.provider.as_str()) && proofs.by_marker(s));
        if let Some(scope) = scope {
            let foreign = cloud
                .insert_foreign(
                    &scope.provider,
                    &scope.kind,
                    &scope.region,
                    "zz-foreign-res",
                    RawTags::new(),
                )
                .map_err(|e| fail("a foreign resource can be placed", e.to_string()))?;
            let orphan = cloud
                .insert_foreign(
                    &scope.provider,
                    &scope.kind,
                    &scope.region,
                    "zz-orphan-res",
                    [(MARKER_KEY.to_owned(), fleet.name().to_owned())].into(),
                )
                .map_err(|e| fail("an owned orphan can be placed", e.to_string()))?;
            let mut ledger = ledger_of(&store);
            ledger.rows.insert(LedgerRow {
                provider: scope.provider.clone(),
                kind: scope.kind.clone(),
                name: "zz-orphan-res".into(),
                region: scope.region.clone(),
            });
            store
                .save_ledger(fleet.name(), &ledger)
                .expect("memory records");
            // What the apply is handed: from the rows written here, not from what the
            // engine reads back, so that a row lost on the way fails the check.
            let handed = handed_in(fleet, &ledger);
            cloud.clear_calls();
            let outcome = engine1
                .apply(&plan, &options.clone().force(true))
                .await
                .map_err(|e| fail("an apply with an orphan succeeds", e.to_string()))?;
            total_and_disjoint(&outcome.result, &handed).map_err(|e| {
                fail(
                    "the result accounts for every declared resource and every ledger row",
                    e,
                )
            })?;
            let deletes: Vec<String> = cloud
                .calls()
                .iter()
                .filter(|c| c.op == Op::Delete)
                .filter_map(|c| c.handle.clone())
                .collect();
            if deletes != [orphan.clone()] || cloud.resource(&foreign).is_none() {
                return Err(fail(
                    "prune deletes exactly the owned orphan",
                    format!("deletes {deletes:?}; orphan {orphan}; foreign {foreign}"),
                ));
            }
            if outcome.result.pruned.len() != 1 {
                return Err(fail(
                    "the orphan is reported pruned",
                    format!("{:#?}", outcome.result),
                ));
            }
            cloud.remove(&foreign);
        }

        // 6. The brake holds.
        if let Some(scope) = scope {
            let mut ledger = ledger_of(&store);
            for i in 0..=expected.len() {
                let name = format!("zz-brake-{i:03}");
                cloud
                    .insert_foreign(
                        &scope.provider,
                        &scope.kind,
                        &scope.region,
                        &name,
                        [(MARKER_KEY.to_owned(), fleet.name().to_owned())].into(),
                    )
                    .map_err(|e| fail("an owned orphan can be placed", e.to_string()))?;
                ledger.rows.insert(LedgerRow {
                    provider: scope.provider.clone(),
                    kind: scope.kind.clone(),
                    name,
                    region: scope.region.clone(),
                });
            }
            store
                .save_ledger(fleet.name(), &ledger)
                .expect("memory records");
            cloud.clear_calls();
            match engine1.apply(&plan, &options).await {
                Err(ApplyError::Brake { .. }) => {}
                other => {
                    return Err(fail(
                        "the brake refuses to delete most of the ledger",
                        format!("{:?}", other.map(|o| o.result)),
                    ));
                }
            }
            if !cloud.writes().is_empty() {
                return Err(fail(
                    "the brake lets no write through",
                    format!("{:?}", cloud.writes()),
                ));
            }
            engine1
                .apply(&plan, &options.clone().force(true))
                .await
                .map_err(|e| fail("a forced apply succeeds", e.to_string()))?;
        }

        // 7. Teardown: dependants first, nothing left.
        cloud.clear_calls();
        let handed = handed_in(fleet, &ledger_of(&store));
        let outcome = engine1
            .apply(&Plan::absent(fleet), &options)
            .await
            .map_err(|e| fail("a teardown succeeds", e.to_string()))?;
        total_and_disjoint(&outcome.result, &handed)
            .map_err(|e| fail("the teardown's result is total and disjoint", e))?;
        if !outcome.result.is_success() {
            return Err(fail(
                "the teardown converges",
                format!("{:#?}", outcome.result),
            ));
        }
        let deleted: BTreeMap<String, u64> = cloud
            .calls()
            .iter()
            .filter(|c| c.op == Op::Delete && c.outcome.is_ok())
            .filter_map(|c| c.name.clone().map(|n| (n, c.seq)))
            .collect();
        let names: Vec<&str> = fleet
            .resources()
            .map(|r| r.reference().name.as_str())
            .collect();
        for r in fleet.resources() {
            for &d in r.deps() {
                if let (Some(a), Some(b)) =
                    (deleted.get(&r.reference().name), deleted.get(names[d]))
                    && a > b
                {
                    return Err(fail(
                        "teardown deletes dependants first",
                        format!(
                            "{} was deleted after {}, which it depends on",
                            r.reference().name,
                            names[d]
                        ),
                    ));
                }
            }
        }
        let left = marked(&cloud, fleet.name());
        if !left.is_empty() {
            return Err(fail("teardown leaves nothing behind", format!("{left:?}")));
        }
        if let Some(s) = expected.iter().find(|s| {
            SIMULATED.contains(&s.provider.as_str())
                && copies(&cloud, fleet.name(), s, proofs.by_marker(s)) > 0
        }) {
            return Err(fail(
                "teardown leaves nothing behind",
                format!("{s} is still there ({})", proofs.describe(s)),
            ));
        }
        Ok(())
    })
}
