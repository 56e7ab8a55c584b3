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
//!
//! # Stages
//! One module per stage, in the order a run goes through them:
//!
//! | module | what it does |
//! |---|---|
//! | `gates` | the refusals before anything is listed (an unsound plan, records of an unreachable provider, the wrong account), and the brake before any change |
//! | `observe` | the slots in play (declared resources and the ledger's orphans), then list, match and read |
//! | `scope` | what `--target` and `--exclude` keep |
//! | `decide` | a decision per slot, replaces ordered and cascaded |
//! | `report` | the plan as text and JSON |
//! | `refusal` | what a plan says when carrying it out would be refused (the brake, `prevent_destroy`) |
//! | `schedule` | the graph of calls and the order ready calls start in |
//! | `execute`, `calls` | the graph run in parallel; the provider calls of one node |
//! | `verdict` | each resource in exactly one bucket of the result |
//! | `records` | the ledger's adoptions, intents and removals, and the cache |
//! | `discover` | the ledger rebuilt from markers |
//! | `import` | the next plan of a declared resource once a resource made elsewhere is taken in as it |
//!
//! `model` holds what they share: the slots, what was seen, what was decided.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::backend::{Capabilities, Sighting};
use crate::sdk::adaptive::{Adaptive, Concurrency};
use crate::sdk::layer::Layered;

mod calls;
mod decide;
mod discover;
mod error;
mod execute;
mod gates;
#[cfg(feature = "cli")]
mod import;
mod model;
mod observe;
mod prerequisites;
mod proposal;
mod records;
mod refusal;
mod report;
mod schedule;
mod scope;
mod secrets;
mod verdict;

pub use discover::Discovery;
#[cfg(feature = "cli")]
pub(crate) use import::ImportPreview;

// What an embedder driving the engine needs besides the engine itself: the results it
// answers, the plans it carries out, the records it keeps, the clock it runs on.
pub use crate::apply_result::{
    Applied, ApplyResult, Change, Failed, NotAttempted, NotAttemptedReason, Pruned, Step, Subject,
};
pub use crate::backend::Backends;
pub use crate::clock::{Clock, ManualClock, SystemClock};
pub use crate::diverge::{Divergence, Repair, divergence, repair_of};
pub use crate::env::{Dep, Env, NotYet, Nothing, ObservedValue};
pub use crate::fleet::KindMeta;
pub use crate::key::KeyId;
pub use crate::merge::{Conflict, Side, WriterConflict, merge_writers};
pub use crate::plan::{ForeignKey, Plan, PlanConflict};
pub use crate::records::{
    CacheEntry, FileStore, Lease, Ledger, LedgerProgress, LedgerRow, LockError, LockGuard,
    LockHolder, MemoryStore, RecordError, RecordStore, Records, lock_fleet,
};
pub use crate::settle::{MapEnv, settle};
pub use error::ApplyError;
pub use prerequisites::PlannedPrerequisite;
pub use proposal::{
    FileOptions, Fingerprint, PLAN_FILE_VERSION, PlanFile, Proposal, ResourceDigest,
};
pub use refusal::{ProtectedResource, Refusal, with_refusal};
pub use report::{PlanReport, PlannedChange, RecordChange, UnmatchedExclusion, symbol};
#[cfg(feature = "cli")]
pub(crate) use scope::resolve_address;

use model::{Observation, owned_sighting};

/// How an apply (or a plan) runs: `Options::default()`, then the setters.
///
/// ```
/// use infra_core::engine::Options;
/// let options = Options::default().force(true).targets(["web"]).parallelism(4);
/// assert!(options.force && options.parallelism == 4);
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Delete more than half of the ledger while still declaring something.
    pub force: bool,
    /// Provider calls in flight at once (at least 1): the ceiling of each (provider,
    /// region, API)'s window.
    pub parallelism: usize,
    /// Whether the windows yield to throttling (the default) or hold `parallelism`
    /// whatever the clouds answer.
    pub adaptive: bool,
    /// Only these resources (by name or `provider/kind/name`) and what they depend on.
    pub targets: Vec<String>,
    /// Not these resources, nor anything that depends on them.
    pub excludes: Vec<String>,
    /// Deletes confirmed by name: resources `discover` adopted on their marker alone
    /// are deleted only when named here (any address form a plan prints).
    pub allow_delete: Vec<String>,
    /// Resources to replace although they would otherwise be left unchanged or updated
    /// (`--replace`; any address form a plan prints). What cannot outlive them is
    /// replaced with them, as for any replace.
    pub replace: Vec<String>,
}

impl Options {
    /// Whether to delete more than half of the ledger while still declaring something.
    #[must_use]
    pub fn force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }

    /// Provider calls in flight at once (at least 1).
    #[must_use]
    pub fn parallelism(mut self, parallelism: usize) -> Self {
        self.parallelism = parallelism;
        self
    }

    /// Whether the windows yield to throttling (see [`Options::adaptive`]).
    #[must_use]
    pub fn adaptive(mut self, adaptive: bool) -> Self {
        self.adaptive = adaptive;
        self
    }

    /// Only these resources (by name or `provider/kind/name`) and what they depend on.
    #[must_use]
    pub fn targets<S: Into<String>>(mut self, targets: impl IntoIterator<Item = S>) -> Self {
        self.targets = targets.into_iter().map(Into::into).collect();
        self
    }

    /// Not these resources, nor anything that depends on them.
    #[must_use]
    pub fn excludes<S: Into<String>>(mut self, excludes: impl IntoIterator<Item = S>) -> Self {
        self.excludes = excludes.into_iter().map(Into::into).collect();
        self
    }

    /// Resources to replace (see [`Options::replace`]).
    #[must_use]
    pub fn replacing<S: Into<String>>(mut self, addresses: impl IntoIterator<Item = S>) -> Self {
        self.replace = addresses.into_iter().map(Into::into).collect();
        self
    }

    /// Deletes confirmed by name (see [`Options::allow_delete`]).
    #[must_use]
    pub fn allow_deletes<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.allow_delete = names.into_iter().map(Into::into).collect();
        self
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            force: false,
            parallelism: 16,
            adaptive: true,
            targets: Vec::new(),
            excludes: Vec::new(),
            allow_delete: Vec::new(),
            replace: Vec::new(),
        }
    }
}

/// The outcome of an apply: what was planned, and what happened.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// What the apply set out to do.
    pub plan: PlanReport,
    /// What happened, resource by resource.
    pub result: ApplyResult,
    /// Why the records could not be saved after the calls, if they could not: the
    /// result is still what happened in the clouds, but the next run will not know it
    /// from the records (the ledger's intents, written before any call, still name
    /// every resource this run may have created).
    pub unsaved: Option<String>,
}

impl Outcome {
    /// Whether every resource converged or was pruned, and the records were saved.
    pub fn is_success(&self) -> bool {
        self.result.is_success() && self.unsaved.is_none()
    }
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
    concurrency: Arc<Concurrency>,
    store: Arc<dyn RecordStore>,
    clock: Arc<dyn Clock>,
    progress: Option<ProgressHook>,
    lease: Option<Lease>,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("backends", &self.backends)
            .finish_non_exhaustive()
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

impl Engine {
    /// An engine over `backends`, keeping records in `store`, on the system clock.
    ///
    /// The engine makes each backend call once: retrying a call is its backend's work,
    /// done by the machinery of the client it reaches its cloud with under the one
    /// [`RetryPolicy`](crate::sdk::RetryPolicy) (a backend whose client has none is
    /// wrapped in [`layer::Retry`](crate::sdk::layer::Retry)), so that nothing is retried
    /// twice over.
    ///
    /// The engine does not lock the records: a program that may run twice at once on
    /// one fleet takes the fleet's lock around each run that writes records, from its
    /// first read to its last write, with [`crate::lock_fleet`] (as the command-line
    /// runner does).
    ///
    /// Each backend is held to [`Concurrency`] windows: per (provider, region, API), as
    /// many calls in flight as answer without throttling, never more than a run's
    /// `parallelism` ([`crate::sdk::adaptive`]).
    pub fn new(backends: Backends, store: Arc<dyn RecordStore>) -> Self {
        let concurrency = Arc::new(Concurrency::default());
        let mut held = Backends::new();
        for provider in backends.providers() {
            let backend = Arc::clone(backends.get(provider).expect("listed above"));
            held.insert(Layered::wrap(
                backend,
                Adaptive::new(provider, Arc::clone(&concurrency)),
            ));
        }
        Engine {
            backends: held,
            concurrency,
            store,
            clock: Arc::new(SystemClock::new()),
            progress: None,
            lease: None,
        }
    }

    /// The same engine, confirming `lease` (the fleet's lock, [`LockGuard::lease`])
    /// before an apply starts any call.
    ///
    /// # Guarantees
    /// - A call is started only right after the lease was confirmed: once it cannot be,
    ///   the apply starts nothing more, reports every resource it had not started as
    ///   not attempted (`refused`, saying why), and writes no record (another run may
    ///   hold the lock by then; the marks and intents written before each call tell the
    ///   next run what this one may have done).
    ///
    /// # Caveats
    /// - A call already in flight when the lock is lost runs to its end: the lease is
    ///   confirmed before calls start, not while they run. The resource's record still
    ///   names it (a create's intent, a delete's mark), so the next run finds what the
    ///   call did; but for that moment two runs may be calling the cloud at once.
    pub fn with_lease(mut self, lease: Lease) -> Self {
        self.lease = Some(lease);
        self
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

    /// The records this engine keeps.
    pub fn store(&self) -> &Arc<dyn RecordStore> {
        &self.store
    }

    /// The windows its calls are held to: each (provider, region, API)'s calls in
    /// flight allowed now, and the throttles seen (for `-v` and metrics).
    pub fn concurrency(&self) -> &Arc<Concurrency> {
        &self.concurrency
    }

    /// The backends this engine reaches (each held to its [`Concurrency`] windows).
    pub fn backends(&self) -> &Backends {
        &self.backends
    }

    /// What an apply of `plan` would do. Makes no backend write and changes no record.
    pub async fn plan(&self, plan: &Plan, options: &Options) -> Result<PlanReport, ApplyError> {
        let observation = self.prepare(plan, options).await?;
        Ok(self.report_owned(plan, observation))
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
        self.report_owned(plan, observation)
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

    /// Brings the clouds to `plan`: [`Engine::propose`], then [`Engine::carry_out`].
    pub async fn apply(&self, plan: &Plan, options: &Options) -> Result<Outcome, ApplyError> {
        let proposal = self.propose(plan, options).await?;
        self.carry_out(&proposal).await
    }

    /// The result of a run of `plan` stopped as a whole before any call: every
    /// resource it covers — each declared resource in play and each row of the records
    /// (when they can be read) — not attempted, for `reason`, with `why`.
    pub fn stopped(&self, plan: &Plan, reason: NotAttemptedReason, why: &str) -> ApplyResult {
        let fleet = plan.fleet();
        let declared = fleet.resources().filter_map(|r| {
            let rf = r.reference();
            (!matches!(plan.targets[r.index()], crate::Status::Unmanaged))
                .then(|| model::subject(rf.provider, rf.kind, &rf.name, r.region()))
        });
        let recorded: Vec<Subject> = self
            .store
            .load_ledger(fleet.name())
            .map(|l| {
                l.rows
                    .iter()
                    .map(|r| model::subject(&r.provider, &r.kind, &r.name, &r.region))
                    .collect()
            })
            .unwrap_or_default();
        ApplyResult::none_attempted(declared.chain(recorded), reason, why)
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
        observation.prerequisites = self.prerequisites(&observation).await;
        Ok(observation)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{Engine, Options};
    use crate::Backends;

    #[test]
    fn engine_futures_are_send() {
        fn send<T: Send>(_: &T) {}
        let engine = Engine::new(
            Backends::new(),
            Arc::new(crate::records::MemoryStore::new()),
        );
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
