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
//! - A replace deletes the old resource before creating the new one, unless the kind
//!   allows two resources of one name (then the new one comes first). A resource still
//!   referenced from elsewhere cannot be deleted first: the replace then fails with the
//!   provider's `DependencyViolation`.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::{self, Write as _};
use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use serde::Serialize;

use crate::apply_result::{Applied, Failed, NotAttempted, Pruned};
use crate::backend::{SettledSpec, Sighting};
use crate::expr::ObservedValue;
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
    },
    Delete,
    Prune,
    AlreadyAbsent,
    Skip(NotAttemptedReason),
    Fail(Step, BackendError),
}

/// What a resource is to the run.
#[derive(Clone)]
enum Target {
    Present(DynSpec),
    Absent,
    Orphan,
}

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

/// Everything observed for one run, before deciding.
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

    /// Gates, then observation, then decisions.
    async fn prepare(&self, plan: &Plan, options: &Options) -> Result<Observation, ApplyError> {
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
        let declared_refs: BTreeSet<(String, String, String)> = fleet
            .resources()
            .map(|r| {
                let rf = r.reference();
                (rf.provider.to_owned(), rf.kind.to_owned(), rf.name.clone())
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
            if declared_refs.contains(&id) {
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

        let mut observation = Observation {
            slots,
            ledger,
            forgotten,
        };
        self.decide(plan, &mut observation);
        Ok(observation)
    }

    /// Which slots the caller's `--target`/`--exclude` keep.
    fn filter(&self, plan: &Plan, slots: &[Slot], options: &Options) -> Vec<bool> {
        let matches = |s: &Subject, pattern: &str| {
            s.name == pattern || format!("{}/{}/{}", s.provider, s.kind, s.name) == pattern
        };
        if options.targets.is_empty() && options.excludes.is_empty() {
            return vec![true; slots.len()];
        }
        let deps = plan.dependencies();
        let n = plan.len();
        let mut dependants = vec![Vec::new(); n];
        for (i, ds) in deps.iter().enumerate() {
            for &d in ds {
                dependants[d].push(i);
            }
        }
        let closure = |start: Vec<usize>, edges: &Vec<Vec<usize>>| {
            let mut seen = vec![false; n];
            let mut stack = start;
            while let Some(i) = stack.pop() {
                if !std::mem::replace(&mut seen[i], true) {
                    stack.extend(edges[i].iter().copied());
                }
            }
            seen
        };
        let declared_matching = |patterns: &[String]| -> Vec<usize> {
            slots
                .iter()
                .filter_map(|s| {
                    s.index
                        .filter(|_| patterns.iter().any(|p| matches(&s.subject, p)))
                })
                .collect()
        };
        let targeted = (!options.targets.is_empty())
            .then(|| closure(declared_matching(&options.targets), &deps));
        let excluded = closure(declared_matching(&options.excludes), &dependants);
        slots
            .iter()
            .map(|s| match s.index {
                Some(i) => targeted.as_ref().is_none_or(|t| t[i]) && !excluded[i],
                None => {
                    let named = |ps: &[String]| ps.iter().any(|p| matches(&s.subject, p));
                    (options.targets.is_empty() || named(&options.targets))
                        && !named(&options.excludes)
                }
            })
            .collect()
    }

    /// Lists each (provider, kind, region) in play once, matches names, and reads every
    /// match (and its ownership), with reads in flight bounded.
    async fn observe(&self, fleet: &str, slots: &mut [Slot], ledger: &Ledger, included: &[bool]) {
        let marker = Marker::new(fleet);
        // Which slots each (provider, kind, region) must answer for.
        let mut scopes: BTreeMap<(&'static str, &'static str, String), Vec<usize>> =
            BTreeMap::new();
        for (i, slot) in slots.iter_mut().enumerate() {
            if !included[i] {
                slot.seen = Seen::Unobserved(Unobserved::Reason(NotAttemptedReason::Filtered));
                continue;
            }
            let Some(backend) = self.backends.get(slot.provider) else {
                slot.seen = Seen::Unobserved(Unobserved::Reason(NotAttemptedReason::NoBinding));
                continue;
            };
            if backend.unreachable().is_some() {
                slot.seen = Seen::Unobserved(Unobserved::Reason(NotAttemptedReason::NoCredentials));
                continue;
            }
            if !backend.capabilities().kinds.contains(slot.kind) {
                slot.seen =
                    Seen::Unobserved(Unobserved::Reason(NotAttemptedReason::UnsupportedKind));
                continue;
            }
            scopes
                .entry((slot.provider, slot.kind, slot.subject.region.clone()))
                .or_default()
                .push(i);
        }

        // List every scope, in flight together.
        let lists =
            futures::stream::iter(scopes.iter().map(|((provider, kind, region), members)| {
                let backend = Arc::clone(self.backends.get(provider).expect("checked above"));
                let expected: Vec<String> = members
                    .iter()
                    .filter(|&&i| ledger.rows.contains(&row_of(&slots[i].subject)))
                    .map(|&i| slots[i].subject.name.clone())
                    .collect();
                async move {
                    let result = self.list_settled(&*backend, kind, region, &expected).await;
                    ((*provider, *kind, region.clone()), result)
                }
            }))
            .buffer_unordered(16)
            .collect::<Vec<_>>()
            .await;

        let mut reads = Vec::new();
        for (scope, result) in lists {
            let members = &scopes[&scope];
            match result {
                Err(e) => {
                    for &i in members {
                        slots[i].seen = Seen::Unobserved(Unobserved::Error(e.clone()));
                    }
                }
                Ok(listed) => {
                    let by_name: HashMap<&str, &str> = listed
                        .iter()
                        .map(|l| (l.name.as_str(), l.handle.as_str()))
                        .collect();
                    for &i in members {
                        match by_name.get(slots[i].subject.name.as_str()) {
                            None => slots[i].seen = Seen::Absent,
                            Some(handle) => reads.push((i, (*handle).to_owned())),
                        }
                    }
                }
            }
        }

        let ownership_kinds: HashMap<&'static str, BTreeSet<&'static str>> = self
            .backends
            .providers()
            .filter_map(|p| {
                self.backends
                    .get(p)
                    .map(|b| (p, b.capabilities().ownership))
            })
            .collect();
        let observed = futures::stream::iter(reads.into_iter().map(|(i, handle)| {
            let slot = &slots[i];
            let backend = Arc::clone(self.backends.get(slot.provider).expect("checked above"));
            let (kind, region) = (slot.kind, slot.subject.region.clone());
            let readable = ownership_kinds
                .get(slot.provider)
                .is_some_and(|k| k.contains(kind));
            let in_ledger = ledger.rows.contains(&row_of(&slot.subject));
            let marker = &marker;
            async move {
                let seen = self
                    .read_one(
                        &*backend, kind, &region, &handle, readable, in_ledger, marker,
                    )
                    .await;
                (i, seen)
            }
        }))
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
        for (i, seen) in observed {
            slots[i].seen = seen;
        }
    }

    /// Lists one scope. A resource the ledger says exists but the list does not show is
    /// listed again a few times before it is believed gone: a list may lag a create.
    async fn list_settled(
        &self,
        backend: &dyn Backend,
        kind: &'static str,
        region: &str,
        expected: &[String],
    ) -> Result<Vec<crate::Listed>, BackendError> {
        let mut listed = with_retries(&*self.clock, self.retry, true, || {
            backend.list(kind, region)
        })
        .await?;
        for attempt in 0..3 {
            let names: HashMap<&str, ()> = listed.iter().map(|l| (l.name.as_str(), ())).collect();
            if expected.iter().all(|n| names.contains_key(n.as_str())) {
                break;
            }
            self.clock.sleep(self.retry.delay(attempt)).await;
            listed = with_retries(&*self.clock, self.retry, true, || {
                backend.list(kind, region)
            })
            .await?;
        }
        Ok(listed)
    }

    #[allow(clippy::too_many_arguments)]
    async fn read_one(
        &self,
        backend: &dyn Backend,
        kind: &'static str,
        region: &str,
        handle: &str,
        readable: bool,
        in_ledger: bool,
        marker: &Marker,
    ) -> Seen {
        let sighting = match with_retries(&*self.clock, self.retry, true, || {
            backend.read(kind, region, handle)
        })
        .await
        {
            Ok(s) => s.without_marker(),
            Err(e) if e.kind == ErrorKind::NotFound => return Seen::Absent,
            Err(e) => return Seen::Unobserved(Unobserved::Error(e)),
        };
        let owner = if readable {
            match with_retries(&*self.clock, self.retry, true, || {
                backend.ownership(kind, region, handle)
            })
            .await
            {
                Ok(tags) => match marker.verdict(&tags) {
                    Ownership::Ours => Owner::Ours,
                    other => Owner::Not(other),
                },
                Err(e) if e.kind == ErrorKind::NotFound => return Seen::Absent,
                Err(e) => return Seen::Unobserved(Unobserved::Error(e)),
            }
        } else {
            Owner::Unreadable { in_ledger }
        };
        Seen::Present { sighting, owner }
    }

    /// Decides every slot, in a world of what was observed (no secrets).
    fn decide(&self, plan: &Plan, observation: &mut Observation) {
        let mut world = World::default();
        for slot in &observation.slots {
            if let (Some(i), Seen::Present { sighting, .. }) = (slot.index, &slot.seen) {
                world.record(key_id(plan, i), sighting);
            }
        }
        let order = plan
            .build_order()
            .unwrap_or_else(|_| (0..plan.len()).collect());
        let slot_of: HashMap<usize, usize> = observation
            .slots
            .iter()
            .enumerate()
            .filter_map(|(s, slot)| slot.index.map(|i| (i, s)))
            .collect();
        let deps = plan.dependencies();
        // Resources whose handle or state will change in this run.
        let mut moving: BTreeSet<usize> = BTreeSet::new();
        let mut visit: Vec<usize> = order
            .iter()
            .filter_map(|i| slot_of.get(i).copied())
            .collect();
        visit
            .extend((0..observation.slots.len()).filter(|s| observation.slots[*s].index.is_none()));
        for s in visit {
            let slot = &observation.slots[s];
            let decision = match (&slot.target, &slot.seen) {
                (_, Seen::Unobserved(Unobserved::Reason(r))) => Decision::Skip(*r),
                (_, Seen::Unobserved(Unobserved::Error(e))) => {
                    Decision::Fail(Step::Observe, e.clone())
                }
                (Target::Present(_), Seen::Absent) => Decision::Create,
                (Target::Present(spec), Seen::Present { sighting, owner }) => {
                    match claim(owner, slot) {
                        Err(e) => Decision::Fail(Step::Claim, e),
                        Ok(()) => {
                            let target = spec.0.lenient_json(&world);
                            let kind_fields = plan.fleet().inner.resources
                                [slot.index.expect("declared")]
                            .kind
                            .fields;
                            let fields = divergence(kind_fields, &target, sighting.reported());
                            let pending = slot
                                .index
                                .is_some_and(|i| deps[i].iter().any(|d| moving.contains(d)));
                            Decision::Existing {
                                repair: repair_of(&fields),
                                fields,
                                pending,
                            }
                        }
                    }
                }
                (Target::Absent, Seen::Absent) | (Target::Orphan, Seen::Absent) => {
                    Decision::AlreadyAbsent
                }
                (Target::Absent, Seen::Present { owner, .. }) => match claim(owner, slot) {
                    Err(e) => Decision::Fail(Step::Claim, e),
                    Ok(()) => Decision::Delete,
                },
                (Target::Orphan, Seen::Present { owner, .. }) => match owner {
                    Owner::Unreadable { .. } => Decision::Skip(NotAttemptedReason::NotPrunable),
                    _ => match claim(owner, slot) {
                        Err(e) => Decision::Fail(Step::Claim, e),
                        Ok(()) => Decision::Prune,
                    },
                },
            };
            if let Some(i) = slot.index
                && matches!(
                    decision,
                    Decision::Create
                        | Decision::Existing {
                            repair: Repair::Replace | Repair::Update,
                            ..
                        }
                )
            {
                moving.insert(i);
            }
            observation.slots[s].decision = decision;
        }
    }

    /// The plan report, in execution order: builds in dependency order, then deletes in
    /// reverse, then orphans.
    fn report(&self, plan: &Plan, observation: &Observation) -> PlanReport {
        let order = plan
            .build_order()
            .unwrap_or_else(|_| (0..plan.len()).collect());
        let position: HashMap<usize, usize> =
            order.iter().enumerate().map(|(p, &i)| (i, p)).collect();
        let mut builds = Vec::new();
        let mut kills = Vec::new();
        let mut orphans = Vec::new();
        for slot in &observation.slots {
            let (action, fields, detail): (&'static str, Vec<&'static str>, Option<String>) =
                match &slot.decision {
                    Decision::Create => ("create", vec![], None),
                    Decision::Existing {
                        repair,
                        fields,
                        pending,
                    } => {
                        let names = fields.iter().map(|d| d.field).collect();
                        let note = pending
                            .then(|| "may change once what it depends on is applied".to_owned());
                        match repair {
                            Repair::Nothing => ("unchanged", names, note),
                            Repair::Update => ("update", names, note),
                            _ => ("replace", names, note),
                        }
                    }
                    Decision::Delete => ("delete", vec![], None),
                    Decision::Prune => ("prune", vec![], Some("no longer declared".to_owned())),
                    Decision::AlreadyAbsent => match slot.target {
                        Target::Orphan => (
                            "prune",
                            vec![],
                            Some("already gone; the record is dropped".to_owned()),
                        ),
                        _ => ("unchanged", vec![], Some("absent, as declared".to_owned())),
                    },
                    Decision::Skip(reason) => ("not-attempted", vec![], Some(reason.to_string())),
                    Decision::Fail(_, e) => ("failed", vec![], Some(e.to_string())),
                };
            let change = PlannedChange {
                resource: slot.subject.clone(),
                action,
                fields,
                detail,
            };
            match (slot.index, &slot.target) {
                (None, _) => orphans.push(change),
                (Some(i), Target::Absent) => {
                    kills.push((position.get(&i).copied().unwrap_or(i), change))
                }
                (Some(i), _) => builds.push((position.get(&i).copied().unwrap_or(i), change)),
            }
        }
        builds.sort_by_key(|(p, _)| *p);
        kills.sort_by_key(|(p, _)| std::cmp::Reverse(*p));
        orphans.sort_by(|a, b| a.resource.cmp(&b.resource));
        PlanReport {
            fleet: plan.fleet().name().to_owned(),
            changes: builds
                .into_iter()
                .map(|(_, c)| c)
                .chain(kills.into_iter().map(|(_, c)| c))
                .chain(orphans)
                .collect(),
            forgotten: observation
                .forgotten
                .iter()
                .map(|r| r.to_string())
                .collect(),
        }
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

    /// Runs the decisions: builds in dependency order, deletes in reverse, orphans
    /// without order and retried in rounds when refused for ordering reasons.
    async fn execute(
        &self,
        plan: &Plan,
        observation: &mut Observation,
        options: &Options,
    ) -> Result<ApplyResult, ApplyError> {
        let fleet = plan.fleet();
        let marker = Marker::new(fleet.name());

        // Adopt what exists and is ours, and record an intent before every create.
        let mut ledger = observation.ledger.clone();
        for row in &observation.forgotten {
            ledger.rows.remove(row);
        }
        for slot in &observation.slots {
            if matches!(slot.decision, Decision::Create | Decision::Existing { .. }) {
                ledger.rows.insert(row_of(&slot.subject));
            }
        }
        if ledger != observation.ledger {
            self.store.save_ledger(fleet.name(), &ledger)?;
        }

        let mut result = ApplyResult::default();
        let mut finals: Vec<Option<Sighting>> =
            observation.slots.iter().map(owned_sighting).collect();
        let mut world = World::default();
        for slot in &observation.slots {
            if let (Some(i), Seen::Present { sighting, .. }) = (slot.index, &slot.seen) {
                world.record(key_id(plan, i), sighting);
            }
        }

        // The graph of nodes: slots with work.
        let n = observation.slots.len();
        let slot_of_index: HashMap<usize, usize> = observation
            .slots
            .iter()
            .enumerate()
            .filter_map(|(s, slot)| slot.index.map(|i| (i, s)))
            .collect();
        let deps = plan.dependencies();
        let is_build =
            |s: &Slot| matches!(s.decision, Decision::Create | Decision::Existing { .. });
        let is_kill = |s: &Slot| matches!(s.decision, Decision::Delete | Decision::Prune);
        let mut declared_dependants: Vec<Vec<usize>> = vec![Vec::new(); deps.len()];
        for (j, dj) in deps.iter().enumerate() {
            for &i in dj {
                declared_dependants[i].push(j);
            }
        }
        let mut waits_on: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (s, slot) in observation.slots.iter().enumerate() {
            let Some(i) = slot.index else { continue };
            if is_build(slot) {
                for d in &deps[i] {
                    if let Some(&ds) = slot_of_index.get(d) {
                        waits_on[s].push(ds);
                    }
                }
            } else if is_kill(slot) {
                // A delete waits for the deletes of what depends on it.
                for j in &declared_dependants[i] {
                    if let Some(&js) = slot_of_index.get(j)
                        && is_kill(&observation.slots[js])
                    {
                        waits_on[s].push(js);
                    }
                }
            }
        }

        // Resolve what needs no call, and find what cannot start.
        let mut state: Vec<NodeState> = vec![NodeState::Waiting; n];
        for (s, slot) in observation.slots.iter().enumerate() {
            let done = match &slot.decision {
                Decision::Skip(reason) => Some(Done::NotAttempted(*reason)),
                Decision::Fail(step, e) => Some(Done::Failed(*step, e.clone())),
                Decision::AlreadyAbsent => Some(Done::Pruned {
                    already_absent: true,
                }),
                _ => None,
            };
            if let Some(done) = done {
                state[s] = NodeState::Done(done);
            }
        }
        let mut dependants: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (s, ws) in waits_on.iter().enumerate() {
            for &w in ws {
                dependants[w].push(s);
            }
        }
        // A build whose dependency failed or was skipped cannot run.
        for s in 0..n {
            if !matches!(state[s], NodeState::Waiting) {
                continue;
            }
            let slot = &observation.slots[s];
            let blocked = is_build(slot)
                && slot.index.is_some_and(|i| {
                    deps[i].iter().any(|d| {
                        slot_of_index.get(d).is_some_and(|&ds| {
                            matches!(
                                state[ds],
                                NodeState::Done(Done::Failed(..) | Done::NotAttempted(_))
                            ) && !matches!(observation.slots[ds].seen, Seen::Present { .. })
                        })
                    })
                });
            if blocked {
                fail_downstream(s, &dependants, &mut state);
            }
        }

        let mut remaining: Vec<usize> = waits_on
            .iter()
            .map(|ws| {
                ws.iter()
                    .filter(|&&w| matches!(state[w], NodeState::Waiting))
                    .count()
            })
            .collect();
        // Ready nodes start in build order, deletes in reverse, orphans last.
        let order = plan
            .build_order()
            .unwrap_or_else(|_| (0..plan.len()).collect());
        let rank: HashMap<usize, usize> = order.iter().enumerate().map(|(p, &i)| (i, p)).collect();
        let priority = |s: usize| -> (u8, usize) {
            let slot = &observation.slots[s];
            match (slot.index, is_build(slot)) {
                (Some(i), true) => (0, rank.get(&i).copied().unwrap_or(i)),
                (Some(i), false) => (1, usize::MAX - rank.get(&i).copied().unwrap_or(i)),
                (None, _) => (2, s),
            }
        };
        // The ready set is ordered, so that one call at a time runs exactly the build
        // order, and deletes exactly its reverse.
        let mut ready: BTreeSet<((u8, usize), usize)> = (0..n)
            .filter(|&s| matches!(state[s], NodeState::Waiting) && remaining[s] == 0)
            .map(|s| (priority(s), s))
            .collect();
        let mut deferred: Vec<(usize, BackendError)> = Vec::new();
        let parallelism = options.parallelism.max(1);
        let mut in_flight: FuturesUnordered<BoxFuture<'_, (usize, Done)>> = FuturesUnordered::new();
        let with_work = state
            .iter()
            .filter(|s| matches!(s, NodeState::Waiting))
            .count();
        let mut finished = 0;

        loop {
            while in_flight.len() < parallelism
                && let Some((_, s)) = ready.pop_first()
            {
                if !matches!(state[s], NodeState::Waiting) {
                    continue;
                }
                state[s] = NodeState::Running;
                let job = self.job(plan, &observation.slots[s], &world, &marker);
                in_flight.push(Box::pin(async move { (s, job.await) }));
            }
            let Some((s, done)) = in_flight.next().await else {
                break;
            };
            let slot = &observation.slots[s];
            finished += 1;
            if let Some(hook) = &self.progress {
                hook(Progress {
                    done: finished,
                    total: with_work,
                    resource: &slot.subject,
                    what: done.describe(),
                });
            }
            match &done {
                Done::Built { sighting, .. } => {
                    if let (Some(i), Some(sighting)) = (slot.index, sighting) {
                        world.record(key_id(plan, i), sighting);
                    }
                    if let Some(sighting) = sighting {
                        finals[s] = Some(sighting.clone());
                    }
                }
                Done::Pruned { .. } => {
                    finals[s] = None;
                    ledger.rows.remove(&row_of(&slot.subject));
                    if let Some(i) = slot.index {
                        world.forget(key_id(plan, i));
                    }
                }
                Done::Failed(_, e)
                    if slot.index.is_none() && e.kind == ErrorKind::DependencyViolation =>
                {
                    deferred.push((s, e.clone()));
                    state[s] = NodeState::Deferred;
                    continue;
                }
                _ => {}
            }
            let succeeded = matches!(done, Done::Built { .. } | Done::Pruned { .. });
            state[s] = NodeState::Done(done);
            if succeeded {
                for &d in &dependants[s] {
                    if matches!(state[d], NodeState::Waiting) {
                        remaining[d] -= 1;
                        if remaining[d] == 0 {
                            ready.insert((priority(d), d));
                        }
                    }
                }
            } else {
                for &d in &dependants[s] {
                    fail_downstream(d, &dependants, &mut state);
                }
            }
        }

        // Orphans refused for ordering reasons: retried in rounds until one frees nothing.
        while !deferred.is_empty() {
            let round = std::mem::take(&mut deferred);
            let before = round.len();
            for (s, _) in round {
                let done = self.job(plan, &observation.slots[s], &world, &marker).await;
                match done {
                    Done::Failed(_, e) if e.kind == ErrorKind::DependencyViolation => {
                        deferred.push((s, e))
                    }
                    other => {
                        if matches!(other, Done::Pruned { .. }) {
                            finals[s] = None;
                            ledger.rows.remove(&row_of(&observation.slots[s].subject));
                        }
                        state[s] = NodeState::Done(other);
                    }
                }
            }
            if deferred.len() == before {
                for (s, e) in deferred.drain(..) {
                    state[s] = NodeState::Done(Done::Failed(Step::Delete, e));
                }
            }
        }

        for (s, slot) in observation.slots.iter().enumerate() {
            let resource = slot.subject.clone();
            match std::mem::replace(&mut state[s], NodeState::Waiting) {
                NodeState::Done(Done::Built { change, .. }) => {
                    result.applied.push(Applied { resource, change })
                }
                NodeState::Done(Done::Pruned { already_absent }) => match slot.target {
                    Target::Present(_) => result.applied.push(Applied {
                        resource,
                        change: Change::Unchanged,
                    }),
                    _ => result.pruned.push(Pruned {
                        resource,
                        already_absent,
                    }),
                },
                NodeState::Done(Done::NotAttempted(reason)) => {
                    result.not_attempted.push(NotAttempted { resource, reason })
                }
                NodeState::Done(Done::Failed(step, error)) => result.failed.push(Failed {
                    resource,
                    step,
                    error,
                }),
                other => unreachable!("every node ends done, not {other:?}"),
            }
        }
        // A create that failed for sure leaves nothing behind: drop its intent.
        for f in &result.failed {
            if f.step == Step::Create && !f.error.may_have_been_sent {
                ledger.rows.remove(&row_of(&f.resource));
            }
        }
        for row in &observation.forgotten {
            ledger.rows.remove(row);
        }
        self.store.save_ledger(fleet.name(), &ledger)?;

        // The cache: what exists now, by the last sighting of each resource.
        self.save_cache(
            fleet.name(),
            observation
                .slots
                .iter()
                .zip(finals.iter().map(Option::as_ref)),
        )?;

        result.sort();
        debug_assert!(result.check_disjoint().is_ok());
        Ok(result)
    }

    /// The work of one node, as a future that makes the provider calls.
    fn job<'a>(
        &'a self,
        plan: &'a Plan,
        slot: &'a Slot,
        world: &World,
        marker: &'a Marker,
    ) -> BoxFuture<'a, Done> {
        let backend = Arc::clone(
            self.backends
                .get(slot.provider)
                .expect("observed slots have a backend"),
        );
        let region = slot.subject.region.clone();
        let kind = slot.kind;
        let name = slot.subject.name.clone();
        let caps = backend.capabilities();
        // Only what this node reads from the world travels with it.
        let mut env = World::default();
        let mut secrets_needed: Vec<(KeyId, &'static str, String, String)> = Vec::new();
        if let Target::Present(spec) = &slot.target {
            for dep in spec.0.deps() {
                let key = dep.key();
                if let Some(h) = world.handles.get(&key) {
                    env.handles.insert(key, h.clone());
                }
                if let Some(o) = world.observed.get(&key) {
                    env.observed.insert(key, Arc::clone(o));
                }
                if let Dep::Secret(key) = dep
                    && let (Some(h), Some(i)) =
                        (world.handles.get(&key), plan.fleet().index_of(key))
                {
                    let r = plan.fleet().resources().nth(i).expect("index in range");
                    secrets_needed.push((
                        key,
                        r.reference().provider,
                        r.region().to_owned(),
                        h.clone(),
                    ));
                }
            }
        }
        let existing = match &slot.seen {
            Seen::Present { sighting, .. } => Some(sighting.clone()),
            _ => None,
        };
        let fields = slot
            .index
            .map(|i| plan.fleet().inner.resources[i].kind.fields)
            .unwrap_or(&[]);
        let decision = slot.decision.clone();
        let target = slot.target.clone();
        Box::pin(async move {
            let clock = &*self.clock;
            let retry = self.retry;
            match (decision, target) {
                (Decision::Delete | Decision::Prune, _) => {
                    let handle = existing.expect("a delete is of something seen").handle;
                    self.delete_owned(
                        &*backend,
                        kind,
                        &region,
                        &handle,
                        caps.ownership.contains(kind),
                        marker,
                    )
                    .await
                }
                (Decision::Create, Target::Present(spec)) => {
                    let settled = match self.settle_with_secrets(&spec, env, &secrets_needed).await
                    {
                        Ok(s) => s,
                        Err(e) => return Done::Failed(Step::Create, e),
                    };
                    let settled_spec =
                        SettledSpec::erased(kind, &*settled, spec.0.settled_json_fn());
                    match backend
                        .create(kind, &region, &name, settled_spec, marker)
                        .await
                    {
                        Ok(sighting) => Done::Built {
                            change: Change::Created,
                            sighting: Some(sighting.without_marker()),
                        },
                        Err(e) => Done::Failed(Step::Create, e),
                    }
                }
                (Decision::Existing { .. }, Target::Present(spec)) => {
                    let sighting = existing.expect("an existing resource was seen");
                    // Decide again, now that what it depends on has run.
                    let target = spec.0.lenient_json(&env);
                    let repair = repair_of(&divergence(fields, &target, sighting.reported()));
                    if repair == Repair::Nothing {
                        return Done::Built {
                            change: Change::Unchanged,
                            sighting: Some(sighting),
                        };
                    }
                    let step = if repair == Repair::Update {
                        Step::Update
                    } else {
                        Step::Replace
                    };
                    let settled = match self.settle_with_secrets(&spec, env, &secrets_needed).await
                    {
                        Ok(s) => s,
                        Err(e) => return Done::Failed(step, e),
                    };
                    let settled_spec =
                        SettledSpec::erased(kind, &*settled, spec.0.settled_json_fn());
                    if repair == Repair::Update {
                        return match with_retries(clock, retry, true, || {
                            backend.update(kind, &region, &sighting.handle, settled_spec)
                        })
                        .await
                        {
                            Ok(s) => Done::Built {
                                change: Change::Updated,
                                sighting: Some(s.without_marker()),
                            },
                            Err(e) => Done::Failed(Step::Update, e),
                        };
                    }
                    let readable = caps.ownership.contains(kind);
                    if caps.duplicate_names.contains(kind) {
                        let created = match backend
                            .create(kind, &region, &name, settled_spec, marker)
                            .await
                        {
                            Ok(s) => s.without_marker(),
                            Err(e) => return Done::Failed(Step::Replace, e),
                        };
                        match self
                            .delete_owned(
                                &*backend,
                                kind,
                                &region,
                                &sighting.handle,
                                readable,
                                marker,
                            )
                            .await
                        {
                            Done::Failed(_, e) => Done::Failed(Step::Replace, e),
                            _ => Done::Built {
                                change: Change::Replaced,
                                sighting: Some(created),
                            },
                        }
                    } else {
                        if let Done::Failed(_, e) = self
                            .delete_owned(
                                &*backend,
                                kind,
                                &region,
                                &sighting.handle,
                                readable,
                                marker,
                            )
                            .await
                        {
                            return Done::Failed(Step::Replace, e);
                        }
                        match backend
                            .create(kind, &region, &name, settled_spec, marker)
                            .await
                        {
                            Ok(s) => Done::Built {
                                change: Change::Replaced,
                                sighting: Some(s.without_marker()),
                            },
                            Err(e) => Done::Failed(Step::Replace, e),
                        }
                    }
                }
                (decision, _) => unreachable!("no job for {decision:?}"),
            }
        })
    }

    /// Reads the secret values a spec composes (the only inbound plaintext path), then
    /// settles it. The values live in this call's environment only.
    async fn settle_with_secrets(
        &self,
        spec: &DynSpec,
        mut env: World,
        secrets: &[(KeyId, &'static str, String, String)],
    ) -> Result<Box<dyn Any + Send + Sync>, BackendError> {
        for (key, provider, region, handle) in secrets {
            let backend = self.backends.get(provider).ok_or_else(|| {
                BackendError::invalid(format!("no {provider} backend to read a secret from"))
            })?;
            let value = with_retries(&*self.clock, self.retry, true, || {
                backend.secret_value(region, handle)
            })
            .await?;
            env.secrets.insert(*key, value);
        }
        spec.0.settle_dyn(&env).map_err(|not_yet: NotYet| {
            BackendError::invalid(format!(
                "cannot be settled: {not_yet}, which this apply did not create; apply it first or declare it"
            ))
        })
    }

    /// Deletes a resource after reading its marker again.
    async fn delete_owned(
        &self,
        backend: &dyn Backend,
        kind: &'static str,
        region: &str,
        handle: &str,
        readable: bool,
        marker: &Marker,
    ) -> Done {
        let (clock, retry) = (&*self.clock, self.retry);
        if readable {
            match with_retries(clock, retry, true, || {
                backend.ownership(kind, region, handle)
            })
            .await
            {
                Ok(tags) => match marker.verdict(&tags) {
                    Ownership::Ours => {}
                    other => {
                        return Done::Failed(
                            Step::Claim,
                            BackendError::new(
                                ErrorKind::Conflict,
                                format!(
                                    "no longer carries this fleet's marker ({other:?}); not deleted"
                                ),
                            ),
                        );
                    }
                },
                Err(e) if e.kind == ErrorKind::NotFound => {
                    return Done::Pruned {
                        already_absent: true,
                    };
                }
                Err(e) => return Done::Failed(Step::Delete, e),
            }
        }
        match with_retries(clock, retry, true, || backend.delete(kind, region, handle)).await {
            Ok(()) => Done::Pruned {
                already_absent: false,
            },
            Err(e) if e.kind == ErrorKind::NotFound => Done::Pruned {
                already_absent: true,
            },
            Err(e) => Done::Failed(Step::Delete, e),
        }
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

/// Whether a present resource may be touched.
fn claim(owner: &Owner, slot: &Slot) -> Result<(), BackendError> {
    match owner {
        Owner::Ours | Owner::Unreadable { in_ledger: true } => Ok(()),
        Owner::Unreadable { in_ledger: false } => Err(BackendError::new(
            ErrorKind::Conflict,
            format!(
                "{} exists, its tags cannot be read to prove it is this fleet's, and the ledger \
                 does not list it: left alone. Delete it, or import it by hand",
                slot.subject
            ),
        )),
        Owner::Not(Ownership::OtherFleet { fleet }) => Err(BackendError::new(
            ErrorKind::Conflict,
            format!(
                "{} is declared and exists, but carries the marker of fleet `{fleet}`: left alone. \
                 Rename it here, or release it from the other fleet",
                slot.subject
            ),
        )),
        Owner::Not(_) => Err(BackendError::new(
            ErrorKind::Conflict,
            format!(
                "{} is declared and exists, but does not carry the `managed-by-infra` marker, so \
                 it is not this fleet's: it will not be created, changed or deleted. Delete it and \
                 let the fleet create it, or rename the declaration",
                slot.subject
            ),
        )),
    }
}

fn key_id(plan: &Plan, index: usize) -> KeyId {
    KeyId {
        fleet: plan.fleet().inner.id,
        index: u32::try_from(index).expect("fewer than 2^32 resources"),
    }
}

#[derive(Clone, Debug)]
enum Done {
    Built {
        change: Change,
        sighting: Option<Sighting>,
    },
    Pruned {
        already_absent: bool,
    },
    NotAttempted(NotAttemptedReason),
    Failed(Step, BackendError),
}

impl Done {
    fn describe(&self) -> &'static str {
        match self {
            Done::Built {
                change: Change::Created,
                ..
            } => "created",
            Done::Built {
                change: Change::Updated,
                ..
            } => "updated",
            Done::Built {
                change: Change::Replaced,
                ..
            } => "replaced",
            Done::Built {
                change: Change::Unchanged,
                ..
            } => "unchanged",
            Done::Pruned { .. } => "deleted",
            Done::NotAttempted(_) => "not attempted",
            Done::Failed(..) => "failed",
        }
    }
}

#[derive(Clone, Debug)]
enum NodeState {
    Waiting,
    Running,
    Deferred,
    Done(Done),
}

/// Marks a waiting node, and everything waiting on it, as not attempted.
fn fail_downstream(start: usize, dependants: &[Vec<usize>], state: &mut [NodeState]) {
    let mut stack = vec![start];
    while let Some(s) = stack.pop() {
        if matches!(state[s], NodeState::Waiting) {
            state[s] = NodeState::Done(Done::NotAttempted(NotAttemptedReason::DependencyFailed));
            stack.extend(dependants[s].iter().copied());
        }
    }
}
