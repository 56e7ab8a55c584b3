//! The engine: observe → diff → order → apply.
//!
//! [`Engine::plan`] observes the world and says what an apply would do, making no
//! backend write. [`Engine::apply`] does it. Both run the same gates first: the
//! unreachable refusal, the account check and, for an apply, the brake.
//!
//! # Guarantees
//! - A declared key ends present, absent or not observed. Not observed never becomes a
//!   create or a delete, and only `NotFound` (from each provider's curated list) reads
//!   as absent: a permission error never does.
//! - A resource is changed or deleted only if it carries this fleet's ownership marker
//!   (or, for a kind whose tags cannot be read, a ledger row). The marker is read again
//!   right before every delete.
//! - Every declared resource that exists and is ours is recorded in the ledger, even
//!   when nothing had to change; a row is written *before* every create, so that an
//!   apply killed between the call and its record finds the resource next time instead
//!   of creating a twin or leaking it.
//! - Every resource handed to an apply appears exactly once in the [`ApplyResult`].
//!
//! # Caveats
//! - A replace of a kind whose names are unique deletes the old resource first, and so
//!   replaces with it every dependant of this fleet that holds it (the plan says so,
//!   naming the cause). A reference from outside the fleet still blocks the delete: the
//!   replace then fails with the provider's `DependencyViolation`.
//! - A replace found only while applying (a field that cannot change in place reads a
//!   dependency that was just replaced) runs both steps in one node, in the order the
//!   kind allows.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::{self, Write as _};
use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use serde::Serialize;

use crate::apply_result::{Applied, Failed, NotAttempted, Pruned};
use crate::backend::{Capabilities, SettledSpec, Sighting};
use crate::env::ObservedValue;
use crate::fleet::DynSpec;
use crate::key::KeyId;
use crate::{
    ApplyResult, Backend, BackendError, Backends, CacheEntry, Change, Clock, Dep, Divergence, Env,
    ErrorKind, Ledger, LedgerRow, Marker, NotAttemptedReason, NotYet, Ownership, Plan, Problem,
    RecordError, RecordStore, Repair, RetryPolicy, SecretString, Status, Step, Subject,
    SystemClock, divergence, repair_of, with_retries,
};

/// How an apply (or a plan) runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Delete more than half of the ledger while still declaring something.
    pub force: bool,
    /// Provider calls in flight at once (at least 1).
    pub parallelism: usize,
    /// Only these resources (by name or `provider/kind/name`) and what they depend on.
    pub targets: Vec<String>,
    /// Not these resources, nor anything that depends on them.
    pub excludes: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            force: false,
            parallelism: 16,
            targets: Vec::new(),
            excludes: Vec::new(),
        }
    }
}

/// Why an apply (or a plan) was refused as a whole.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A record could not be read or written.
    #[error(transparent)]
    Records(#[from] RecordError),
    /// The ledger holds rows for a provider whose backend cannot reach its cloud.
    #[error(
        "the ledger records {rows} {provider} resource{s}, but {provider} is unreachable ({why}). \
         Refusing: this run would report them gone without touching them. Load {provider}'s \
         credentials, or point the records elsewhere with --state-dir",
        s = if *rows == 1 { "" } else { "s" }
    )]
    Unreachable {
        /// The provider.
        provider: String,
        /// How many ledger rows it has.
        rows: usize,
        /// What the backend said.
        why: String,
    },
    /// The ledger holds rows for a provider no backend was given for.
    #[error(
        "the ledger records {rows} {provider} resource{s}, but no {provider} backend was given. \
         Refusing: this run could neither keep nor delete them. Add a {provider} backend, or \
         `forget` the rows",
        s = if *rows == 1 { "" } else { "s" }
    )]
    NoBinding {
        /// The provider.
        provider: String,
        /// How many ledger rows it has.
        rows: usize,
    },
    /// A backend is authenticated in an account the fleet does not name.
    #[error(
        "{provider} credentials act in account {found}, but fleet `{fleet}` may only touch {allowed}. \
         Refusing before anything is listed: switch credentials, or name the account with `account`"
    )]
    WrongAccount {
        /// The fleet.
        fleet: String,
        /// The provider.
        provider: String,
        /// The account the backend is in.
        found: String,
        /// The accounts the fleet names.
        allowed: String,
    },
    /// The account of a backend could not be read, so it could not be checked.
    #[error("could not tell which {provider} account the credentials act in: {error}")]
    AccountUnknown {
        /// The provider.
        provider: String,
        /// The backend's error.
        error: BackendError,
    },
    /// The apply would delete most of what the fleet manages while still declaring
    /// something.
    #[error(
        "refusing to delete {deletes} of the {managed} resources this fleet manages while it still \
         declares resources: this looks like a mistake (credentials, a filter, a lost declaration). \
         Use `destroy` to tear the fleet down, or `--force` if this is intended"
    )]
    Brake {
        /// How many resources the apply would delete.
        deletes: usize,
        /// How many the ledger holds.
        managed: usize,
    },
    /// The plan is not sound (a cycle, an invalid spec set with `Plan::set`).
    #[error("the plan is not sound:{}", problems.iter().map(|p| format!("\n  - {p}")).collect::<String>())]
    Unsound {
        /// What is wrong.
        problems: Vec<Problem>,
    },
}

/// What observation found of one resource.
#[derive(Clone, Debug)]
enum Seen {
    Present { sighting: Sighting, owner: Owner },
    Absent,
    Unobserved(Unobserved),
}

/// Whose a present resource is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Owner {
    Ours,
    /// Not ours: unmarked, or another fleet's.
    Not(Ownership),
    /// Its tags could not be read: the ledger row decides.
    Unreadable {
        in_ledger: bool,
    },
}

#[derive(Clone, Debug)]
enum Unobserved {
    Reason(NotAttemptedReason),
    Error(BackendError),
}

/// What the apply will do with one resource.
#[derive(Clone, Debug)]
enum Decision {
    Create,
    /// Exists and is ours; repair decided again at execution, once dependencies ran.
    Existing {
        repair: Repair,
        fields: Vec<Divergence>,
        pending: bool,
        /// For a planned replace: in which order its two steps run.
        replace: Option<ReplaceOrder>,
        /// For a replace forced by another: which one.
        because: Option<String>,
    },
    Delete,
    Prune,
    AlreadyAbsent,
    Skip(NotAttemptedReason),
    Fail(Step, BackendError),
}

/// The order of a replace's two steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReplaceOrder {
    /// Names are unique: delete the old one (after its dependants), then create.
    DeleteFirst,
    /// Two of one name may coexist: create the new one, move the dependants, then
    /// delete the old one.
    CreateFirst,
}

/// What a resource is to the run.
#[derive(Clone)]
enum Target {
    Present(DynSpec),
    Absent,
    Orphan,
}

#[derive(Clone)]
struct Slot {
    subject: Subject,
    provider: &'static str,
    kind: &'static str,
    /// The declared index, for declared resources.
    index: Option<usize>,
    target: Target,
    seen: Seen,
    decision: Decision,
}

/// One line of a plan: a resource and what the apply would do with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedChange {
    /// The resource.
    pub resource: Subject,
    /// `create`, `update`, `replace`, `delete`, `prune`, `unchanged`, `not-attempted` or
    /// `failed`.
    pub action: &'static str,
    /// The fields that differ, for an update or a replace.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<&'static str>,
    /// Why, for a resource that will not be attempted or cannot be.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What an apply would do, resource by resource, in the order it would do it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanReport {
    /// The fleet.
    pub fleet: String,
    /// One line per resource.
    pub changes: Vec<PlannedChange>,
    /// Ledger rows released with `forget` (records only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub forgotten: Vec<String>,
}

impl PlanReport {
    /// Whether the apply would change anything in a cloud or in the records.
    pub fn has_changes(&self) -> bool {
        !self.forgotten.is_empty()
            || self.changes.iter().any(|c| {
                matches!(
                    c.action,
                    "create" | "update" | "replace" | "delete" | "prune"
                )
            })
    }

    /// Whether some resource cannot be brought to its target.
    pub fn has_failures(&self) -> bool {
        self.changes.iter().any(|c| c.action == "failed")
    }

    /// How many resources would see each action.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for c in &self.changes {
            *counts.entry(c.action).or_default() += 1;
        }
        counts
    }

    /// The plan as JSON: `{"planReport": "v1", …}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = serde_json::json!({ "planReport": "v1" });
        if let (Some(map), Ok(serde_json::Value::Object(body))) =
            (value.as_object_mut(), serde_json::to_value(self))
        {
            map.extend(body);
        }
        value
    }

    /// The plan as text for people, one line per resource, without colour.
    pub fn render(&self) -> String {
        let counts = self.counts();
        let n = |a: &str| counts.get(a).copied().unwrap_or(0);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "fleet `{}`: {} to create, {} to update, {} to replace, {} to delete, {} unchanged",
            self.fleet,
            n("create"),
            n("update"),
            n("replace"),
            n("delete") + n("prune"),
            n("unchanged"),
        );
        let width = self
            .changes
            .iter()
            .map(|c| c.resource.to_string().len())
            .max()
            .unwrap_or(0);
        for c in &self.changes {
            let _ = write!(
                out,
                "  {} {:<width$}  {}",
                symbol(c.action),
                c.resource.to_string(),
                c.action
            );
            if !c.fields.is_empty() {
                let _ = write!(out, ": {}", c.fields.join(", "));
            }
            if let Some(d) = &c.detail {
                let _ = write!(out, " — {d}");
            }
            out.push('\n');
        }
        for f in &self.forgotten {
            let _ = writeln!(
                out,
                "  ~ {f}  forget (the record only; the cloud is untouched)"
            );
        }
        if !self.has_changes() && !self.has_failures() {
            out.push_str("No changes: the world matches the declaration.\n");
        }
        out
    }
}

/// The one-character mark of an action in a rendered plan.
pub fn symbol(action: &str) -> char {
    match action {
        "create" => '+',
        "update" => '~',
        "replace" => '±',
        "delete" | "prune" => '-',
        "failed" => '!',
        "not-attempted" => '·',
        _ => ' ',
    }
}

/// The outcome of an apply: what was planned, and what happened.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// What the apply set out to do.
    pub plan: PlanReport,
    /// What happened, resource by resource.
    pub result: ApplyResult,
}

/// One step of an apply's progress, for a progress line.
#[derive(Clone, Copy, Debug)]
pub struct Progress<'a> {
    /// Resources finished so far.
    pub done: usize,
    /// Resources with work in this apply.
    pub total: usize,
    /// The resource that just finished.
    pub resource: &'a Subject,
    /// What happened to it (`created`, `failed`, …).
    pub what: &'static str,
}

type ProgressHook = Arc<dyn Fn(Progress<'_>) + Send + Sync>;

/// Observes clouds and brings them to a plan. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    backends: Backends,
    store: Arc<dyn RecordStore>,
    clock: Arc<dyn Clock>,
    retry: RetryPolicy,
    progress: Option<ProgressHook>,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("backends", &self.backends)
            .field("retry", &self.retry)
            .finish()
    }
}

/// What [`Engine::observe_for`] found: the records and every resource's sighting for
/// one plan, before any decision. Opaque; hand it to [`Engine::plan_observed`].
#[derive(Clone)]
pub struct Observed(Observation);

impl fmt::Debug for Observed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observed")
            .field("resources", &self.0.slots.len())
            .finish()
    }
}

/// Handles and observed states of resources, for settling.
#[derive(Clone, Default)]
struct World {
    handles: HashMap<KeyId, String>,
    observed: HashMap<KeyId, Arc<ObservedValue>>,
    secrets: HashMap<KeyId, SecretString>,
}

impl Env for World {
    fn handle(&self, key: KeyId) -> Option<String> {
        self.handles.get(&key).cloned()
    }
    fn observed(&self, key: KeyId) -> Option<&ObservedValue> {
        self.observed.get(&key).map(|o| &**o)
    }
    fn secret(&self, key: KeyId) -> Option<SecretString> {
        self.secrets.get(&key).cloned()
    }
}

impl World {
    fn record(&mut self, key: KeyId, sighting: &Sighting) {
        self.handles.insert(key, sighting.handle.clone());
        self.observed.insert(key, sighting.observed_arc());
    }

    fn forget(&mut self, key: KeyId) {
        self.handles.remove(&key);
        self.observed.remove(&key);
    }
}

impl Slot {
    fn replace_order(&self) -> Option<ReplaceOrder> {
        match self.decision {
            Decision::Existing { replace, .. } => replace,
            _ => None,
        }
    }
}

/// Everything observed for one run, before deciding.
#[derive(Clone)]
struct Observation {
    slots: Vec<Slot>,
    ledger: Ledger,
    forgotten: Vec<LedgerRow>,
}

fn subject(provider: &str, kind: &str, name: &str, region: &str) -> Subject {
    Subject {
        provider: provider.to_owned(),
        kind: kind.to_owned(),
        name: name.to_owned(),
        region: region.to_owned(),
    }
}

fn row_of(s: &Subject) -> LedgerRow {
    LedgerRow {
        provider: s.provider.clone(),
        kind: s.kind.clone(),
        name: s.name.clone(),
        region: s.region.clone(),
    }
}

/// The kind id as the backend spells it, or a marker that the backend lacks the kind
/// (the slot then ends `NotAttempted(UnsupportedKind)`; its subject keeps the real id).
fn static_kind(kind: &str, backend: &dyn Backend) -> &'static str {
    backend
        .capabilities()
        .kinds
        .into_iter()
        .find(|k| *k == kind)
        .unwrap_or("(unsupported kind)")
}

impl Engine {
    /// An engine over `backends`, keeping records in `store`, on the system clock.
    pub fn new(backends: Backends, store: Arc<dyn RecordStore>) -> Self {
        Engine {
            backends,
            store,
            clock: Arc::new(SystemClock::new()),
            retry: RetryPolicy::default(),
            progress: None,
        }
    }

    /// The same engine, reporting each finished resource of an apply to `hook`.
    pub fn with_progress(mut self, hook: impl Fn(Progress<'_>) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(hook));
        self
    }

    /// The same engine on another clock (tests use a manual one).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The same engine with another retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The records this engine keeps.
    pub fn store(&self) -> &Arc<dyn RecordStore> {
        &self.store
    }

    /// The backends this engine reaches.
    pub fn backends(&self) -> &Backends {
        &self.backends
    }

    /// What an apply of `plan` would do. Makes no backend write and changes no record.
    pub async fn plan(&self, plan: &Plan, options: &Options) -> Result<PlanReport, ApplyError> {
        let observation = self.prepare(plan, options).await?;
        Ok(self.report(plan, &observation))
    }

    /// Runs the gates and observes what `plan` covers, deciding nothing yet: the first
    /// half of [`Engine::plan`], for callers that plan the same observation more than
    /// once (benchmarks do, to time the engine's own work apart from the clouds').
    pub async fn observe_for(
        &self,
        plan: &Plan,
        options: &Options,
    ) -> Result<Observed, ApplyError> {
        Ok(Observed(self.gather(plan, options).await?))
    }

    /// The second half of [`Engine::plan`]: decisions and their order, from an
    /// observation of the same plan. Reaches no backend.
    pub fn plan_observed(&self, plan: &Plan, observed: Observed) -> PlanReport {
        let mut observation = observed.0;
        self.decide(plan, &mut observation);
        self.report(plan, &observation)
    }

    /// Observes what `plan` covers and writes the observation cache. Never touches the
    /// ledger: observing is not a decision about what is managed.
    pub async fn refresh(&self, plan: &Plan) -> Result<PlanReport, ApplyError> {
        let observation = self.prepare(plan, &Options::default()).await?;
        let sightings: Vec<Option<Sighting>> =
            observation.slots.iter().map(owned_sighting).collect();
        self.save_cache(
            plan.fleet().name(),
            observation
                .slots
                .iter()
                .zip(sightings.iter().map(Option::as_ref)),
        )?;
        Ok(self.report(plan, &observation))
    }

    /// Brings the clouds to `plan`.
    pub async fn apply(&self, plan: &Plan, options: &Options) -> Result<Outcome, ApplyError> {
        let mut observation = self.prepare(plan, options).await?;
        let report = self.report(plan, &observation);
        self.brake(plan, &observation, options)?;
        let result = self.execute(plan, &mut observation, options).await?;
        Ok(Outcome {
            plan: report,
            result,
        })
    }

    /// Rebuilds the ledger from ownership markers: every resource in the regions the
    /// fleet uses (and the ledger names) that carries this fleet's marker gets a row.
    pub async fn discover(&self, plan: &Plan) -> Result<Ledger, ApplyError> {
        let fleet = plan.fleet();
        let old = self.store.load_ledger(fleet.name())?;
        self.gates(plan, &old).await?;
        let marker = Marker::new(fleet.name());
        let mut regions: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for r in fleet.resources() {
            regions
                .entry(r.reference().provider)
                .or_default()
                .insert(r.region().to_owned());
        }
        for row in &old.rows {
            if let Some(p) = self.backends.providers().find(|p| *p == row.provider) {
                regions.entry(p).or_default().insert(row.region.clone());
            }
        }
        let mut ledger = Ledger::default();
        for (provider, regions) in regions {
            let Some(backend) = self.backends.get(provider) else {
                continue;
            };
            if backend.unreachable().is_some() {
                continue;
            }
            let caps = backend.capabilities();
            for kind in caps.ownership.iter().copied() {
                for region in &regions {
                    let listed = with_retries(&*self.clock, self.retry, true, || {
                        backend.list(kind, region)
                    })
                    .await
                    .map_err(|error| ApplyError::AccountUnknown {
                        provider: provider.to_owned(),
                        error,
                    })?;
                    for l in listed {
                        let tags = with_retries(&*self.clock, self.retry, true, || {
                            backend.ownership(kind, region, &l.handle)
                        })
                        .await;
                        if let Ok(tags) = tags
                            && marker.verdict(&tags) == Ownership::Ours
                        {
                            ledger.rows.insert(LedgerRow {
                                provider: provider.to_owned(),
                                kind: kind.to_owned(),
                                name: l.name,
                                region: region.clone(),
                            });
                        }
                    }
                }
            }
        }
        self.store.save_ledger(fleet.name(), &ledger)?;
        Ok(ledger)
    }

    /// The refusals that come before anything is listed.
    async fn gates(&self, plan: &Plan, ledger: &Ledger) -> Result<(), ApplyError> {
        let fleet = plan.fleet();
        let problems = plan.check();
        if !problems.is_empty() {
            return Err(ApplyError::Unsound { problems });
        }
        let mut rows_by_provider: BTreeMap<&str, usize> = BTreeMap::new();
        for row in &ledger.rows {
            *rows_by_provider.entry(row.provider.as_str()).or_default() += 1;
        }
        for (&provider, &rows) in &rows_by_provider {
            match self.backends.get(provider) {
                None => {
                    return Err(ApplyError::NoBinding {
                        provider: provider.to_owned(),
                        rows,
                    });
                }
                Some(b) => {
                    if let Some(why) = b.unreachable() {
                        return Err(ApplyError::Unreachable {
                            provider: provider.to_owned(),
                            rows,
                            why,
                        });
                    }
                }
            }
        }
        let in_play: BTreeSet<&str> = fleet
            .providers()
            .into_iter()
            .chain(rows_by_provider.keys().copied())
            .collect();
        for provider in in_play {
            let Some(allowed) = fleet.accounts().get(provider) else {
                continue;
            };
            let Some(backend) = self.backends.get(provider) else {
                continue;
            };
            if backend.unreachable().is_some() {
                continue;
            }
            let found = with_retries(&*self.clock, self.retry, true, || backend.account())
                .await
                .map_err(|error| ApplyError::AccountUnknown {
                    provider: provider.to_owned(),
                    error,
                })?;
            if !allowed.contains(&found) {
                return Err(ApplyError::WrongAccount {
                    fleet: fleet.name().to_owned(),
                    provider: provider.to_owned(),
                    found,
                    allowed: allowed.iter().cloned().collect::<Vec<_>>().join(", "),
                });
            }
        }
        Ok(())
    }

    /// What each backend can do, asked once for a run.
    fn capabilities(&self) -> HashMap<&'static str, Capabilities> {
        self.backends
            .providers()
            .filter_map(|p| self.backends.get(p).map(|b| (p, b.capabilities())))
            .collect()
    }

    /// Gates, then observation, then decisions.
    async fn prepare(&self, plan: &Plan, options: &Options) -> Result<Observation, ApplyError> {
        let mut observation = self.gather(plan, options).await?;
        self.decide(plan, &mut observation);
        Ok(observation)
    }

    /// Gates, then observation.
    async fn gather(&self, plan: &Plan, options: &Options) -> Result<Observation, ApplyError> {
        let fleet = plan.fleet();
        let ledger = self.store.load_ledger(fleet.name())?;
        self.gates(plan, &ledger).await?;

        let forgotten_refs: BTreeSet<(String, String, String)> = fleet
            .forgets()
            .iter()
            .map(|r| {
                (
                    r.resource.provider.to_owned(),
                    r.resource.kind.to_owned(),
                    r.resource.name.clone(),
                )
            })
            .collect();
        // A row is an orphan unless a declaration names the same resource *in the same
        // region*: a resource moved to another region leaves its old one behind, which
        // is deleted (before the new one is created, since names may be unique).
        let declared_refs: BTreeSet<(String, String, String, String)> = fleet
            .resources()
            .map(|r| {
                let rf = r.reference();
                (
                    rf.provider.to_owned(),
                    rf.kind.to_owned(),
                    rf.name.clone(),
                    r.region().to_owned(),
                )
            })
            .collect();

        let mut slots = Vec::new();
        for (index, r) in fleet.resources().enumerate() {
            let target = match &plan.targets[index] {
                Status::Unmanaged => continue,
                Status::Absent => Target::Absent,
                Status::Present(spec) => Target::Present(spec.clone()),
            };
            let rf = r.reference();
            slots.push(Slot {
                subject: subject(rf.provider, rf.kind, &rf.name, r.region()),
                provider: rf.provider,
                kind: rf.kind,
                index: Some(index),
                target,
                seen: Seen::Absent,
                decision: Decision::AlreadyAbsent,
            });
        }
        let mut forgotten = Vec::new();
        for row in &ledger.rows {
            let id = (row.provider.clone(), row.kind.clone(), row.name.clone());
            if declared_refs.contains(&(
                row.provider.clone(),
                row.kind.clone(),
                row.name.clone(),
                row.region.clone(),
            )) {
                continue;
            }
            if forgotten_refs.contains(&id) {
                forgotten.push(row.clone());
                continue;
            }
            let provider = self
                .backends
                .providers()
                .find(|p| *p == row.provider)
                .expect("gates refuse rows of a provider without a backend");
            let backend = self.backends.get(provider).expect("found above");
            slots.push(Slot {
                subject: subject(&row.provider, &row.kind, &row.name, &row.region),
                provider,
                kind: static_kind(&row.kind, &**backend),
                index: None,
                target: Target::Orphan,
                seen: Seen::Absent,
                decision: Decision::AlreadyAbsent,
            });
        }

        let included = self.filter(plan, &slots, options);
        self.observe(fleet.name(), &mut slots, &ledger, &included)
            .await;

        Ok(Observation {
            slots,
            ledger,
            forgotten,
        })
    }

    /// Which slots the caller's `--target`/`--exclude` keep.
    fn filter(&self, plan: &Plan, slots: &[Slot], options: &Options) -> Vec<bool> {
        if options.targets.is_empty() && options.excludes.is_empty() {
            return vec![true; slots.len()];
        }
        // Patterns are looked up, not scanned: a long target list (a script naming
        // thousands of resources) costs one lookup per resource, not one per pair.
        let lookup =
            |patterns: &[String]| -> HashSet<String> { patterns.iter().cloned().collect() };
        let (targets, excludes) = (lookup(&options.targets), lookup(&options.excludes));
        let named = |s: &Subject, patterns: &HashSet<String>| {
            !patterns.is_empty()
                && (patterns.contains(&s.name)
                    || patterns.contains(&format!("{}/{}/{}", s.provider, s.kind, s.name)))
        };
        let deps = plan.deps();
        let n = plan.len();
        let mut dependants = vec![Vec::new(); n];
        for (i, ds) in deps.iter().enumerate() {
            for &d in ds {
                dependants[d].push(i);
            }
        }
        let closure = |start: Vec<usize>, edges: &[Vec<usize>]| {
            let mut seen = vec![false; n];
            let mut stack = start;
            while let Some(i) = stack.pop() {
                if !std::mem::replace(&mut seen[i], true) {
                    stack.extend(edges[i].iter().copied());
                }
            }
            seen
        };
        let declared_matching = |patterns: &HashSet<String>| -> Vec<usize> {
            slots
                .iter()
                .filter_map(|s| s.index.filter(|_| named(&s.subject, patterns)))
                .collect()
        };
        let targeted = (!targets.is_empty()).then(|| closure(declared_matching(&targets), deps));
        let excluded = closure(declared_matching(&excludes), &dependants);
        slots
            .iter()
            .map(|s| match s.index {
                Some(i) => targeted.as_ref().is_none_or(|t| t[i]) && !excluded[i],
                None => {
                    (targets.is_empty() || named(&s.subject, &targets))
                        && !named(&s.subject, &excludes)
                }
            })
            .collect()
    }

    /// Refuses to delete more than half of the ledger while still declaring something.
    fn brake(
        &self,
        plan: &Plan,
        observation: &Observation,
        options: &Options,
    ) -> Result<(), ApplyError> {
        if options.force {
            return Ok(());
        }
        let declares = plan.targets.iter().any(|t| matches!(t, Status::Present(_)));
        let deletes = observation
            .slots
            .iter()
            .filter(|s| matches!(s.decision, Decision::Delete | Decision::Prune))
            .count();
        let managed = observation.ledger.len();
        if declares && managed > 0 && deletes * 2 > managed {
            return Err(ApplyError::Brake { deletes, managed });
        }
        Ok(())
    }

    /// Writes the observation cache: one entry per resource that exists and is ours, by
    /// provider and kind; pairs left empty (and pairs no longer in play) lose their file.
    fn save_cache<'s>(
        &self,
        fleet: &str,
        slots: impl Iterator<Item = (&'s Slot, Option<&'s Sighting>)>,
    ) -> Result<(), RecordError> {
        let mut pairs: BTreeMap<(String, String), Vec<CacheEntry>> = BTreeMap::new();
        for (slot, sighting) in slots {
            let entries = pairs
                .entry((slot.provider.to_owned(), slot.kind.to_owned()))
                .or_default();
            if let Some(sighting) = sighting {
                entries.push(CacheEntry {
                    name: slot.subject.name.clone(),
                    region: slot.subject.region.clone(),
                    handle: sighting.handle.clone(),
                    observed: sighting.observed_json().clone(),
                });
            }
        }
        for (provider, kind) in self.store.cached_pairs(fleet)? {
            pairs.entry((provider, kind)).or_default();
        }
        for ((provider, kind), entries) in pairs {
            self.store.save_cache(fleet, &provider, &kind, &entries)?;
        }
        Ok(())
    }
}

/// The sighting of a resource that exists and is this fleet's.
fn owned_sighting(slot: &Slot) -> Option<Sighting> {
    match &slot.seen {
        Seen::Present {
            sighting,
            owner: Owner::Ours | Owner::Unreadable { in_ledger: true },
        } => Some(sighting.clone()),
        _ => None,
    }
}

/// The key of the resource declared at `index`.
fn key_id(plan: &Plan, index: usize) -> KeyId {
    KeyId {
        fleet: plan.fleet().inner.id,
        index: u32::try_from(index).expect("fewer than 2^32 resources"),
    }
}

mod decide;
mod execute;
mod observe;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_futures_are_send() {
        fn send<T: Send>(_: &T) {}
        let engine = Engine::new(Backends::new(), Arc::new(crate::MemoryStore::new()));
        let mut f = crate::Fleet::builder("send");
        f.declare(
            crate::AwsRegion::EuWest3,
            "send-bucket",
            crate::kinds::ObjectStore::new(),
        );
        let fleet = f.build().unwrap();
        let plan = fleet.plan();
        let options = Options::default();
        send(&engine.plan(&plan, &options));
        send(&engine.apply(&plan, &options));
        send(&engine.refresh(&plan));
        send(&engine.discover(&plan));
    }
}
