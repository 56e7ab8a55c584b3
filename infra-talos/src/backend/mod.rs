//! The `talosMachine` kind and its backend for the `infra-core` engine.
//!
//! The provider is `talos`; its regions are clusters ([`TalosCluster`]); its one kind is
//! [`TalosMachine`]. [`TalosBackend`] implements the SDK's typed
//! [`KindBackend<TalosMachine>`](KindBackend), and the engine takes it as a [`Router`]
//! ([`TalosBackend::into_backend`]), which routes by kind, declares the capabilities,
//! answers `account` with the configured account id and refuses secrets (the provider
//! has none). The backend reads through the controller's store and the read-only
//! observation client, and writes only to the store: it never sends anything to a node.
//!
//! # What each call does
//!
//! - `list`: the machines the store's inventory holds for the cluster (the region code
//!   is the cluster's name, mapped to its Talos cluster ID with
//!   [`TalosBackend::cluster`]). An empty cluster is an empty list.
//! - `read`: the machine's Desired and Applied from the store, and one observation
//!   through [`NodeReader`]. A value the node did not give (unreachable, permission
//!   denied, deadline) is reported unknown, never as a difference; only a machine
//!   missing from the inventory is `NotFound`. See [`TalosMachine`] for how pending
//!   convergence and drift show in a plan.
//! - `create` and `update` (the apply): in **governed** mode, the default, the backend
//!   creates a controller plan for the machine's Desired release through the store, as
//!   the publisher identity it was configured with, and answers [`Written::Deferred`]
//!   ([`Deferral::awaiting_approval`]) naming the plan: a change recorded for approval
//!   is not an error; the engine reports the resource
//!   *not attempted (awaiting-approval)*, and nothing reaches the node until an approver
//!   approves and the controller runs the plan. An apply that finds a live plan for the
//!   same binding (release, baseline and assignment revisions, drift record) names that
//!   plan instead of making another one. A drifted machine whose drift record is open
//!   gets a revert plan; drift the controller has not recorded yet, a machine held by an
//!   operation, a declared release that is not Desired, and an identity that is not the
//!   inventoried one are refused with the reason. `create` is only ever called for a
//!   machine the inventory lacks, and is refused: the engine does not inventory
//!   machines.
//! - **Direct** mode ([`TalosBackend::direct`]), for clusters nobody reviews plan by
//!   plan: the apply makes the plan as the backend's publisher identity, approves it
//!   under the cluster's *blanket approval* ([`Store::grant_blanket_approval`]: an
//!   approver's recorded, revocable decision, held in its epoch only) and runs it at
//!   once through the controller's [`Executor`] — commitment, attempt, send,
//!   response, completion observation and classification, exactly as a governed
//!   plan runs once approved. Automation still approves nothing: without a blanket
//!   approval in force the plan waits for an approver and the resource is reported
//!   *not attempted (awaiting-approval)*. The outcome is the operation's: completed
//!   is a change made; rejected (a validation `InvalidArgument`) is `Invalid`; an
//!   outcome not known yet (a lost response, a request held past its deadline) is a
//!   failure that *may have been sent*, and the machine stays held until
//!   recovery-admin accounts for it and a controller resumes the operation. The
//!   engine applies machines in parallel; machines of one rollout scope queue in the
//!   backend and run one at a time, as the store's rollout slot requires (a machine
//!   left unresolved keeps the slot, and the next is refused by comparison 5).
//! - `delete`: refused with `Invalid`. Machines leave the inventory by an operator's act,
//!   never by the engine; a machine removed from a fleet makes the next apply fail to
//!   prune it (`forget` its ledger row instead).
//! - `ownership`: the inventory stands in for the ownership marker — a machine
//!   inventoried in the cluster answers the marker of the fleet the backend was built
//!   for.
//!
//! The conformance suite of `infra-testkit` does not apply to this kind: it creates and
//! deletes resources, and a Talos machine is neither created nor deleted by the engine.

mod inventory;
mod kind;
mod reader;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use infra_core::sdk::layer::{Layered, Retry};
use infra_core::sdk::{
    Backend, BackendError, Clock, CreateArgs, Deferral, DeleteArgs, ErrorKind, KindBackend,
    ListArgs, Listed, MARKER_KEY, OwnershipArgs, Partial, Provider, RawTags, ReadArgs, Reading,
    Retrier, RetryPolicy, Router, UpdateArgs, Written,
};

pub use inventory::{Inventory, InventoryRecord, PlanRecord};
pub use kind::{
    MachineKey, Talos, TalosCluster, TalosMachine, TalosMachineObserved, TalosMachineReported,
    TalosMachineSettled,
};
pub use reader::{NodeReader, TalosconfigReader};

use crate::contract::operation::OperationState;
use crate::contract::plan::PlanState;
use crate::contract::{InstantMs, SpanMs};
use crate::controller::{Executor, ExecutorError};
use crate::observation::Observation;
use crate::store::{Actor, MachineView, PlanSpec, Store, StoreError};

/// The reported `release` of a machine whose Applied is the configuration it was
/// handed over with: no release, but a known configuration.
pub const HANDED_OVER: &str = "(handed-over baseline)";

/// The terms every plan the backend makes binds (§2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanTerms {
    /// How long a plan stays approvable and committable.
    pub lifetime: SpanMs,
    /// How old dispatch evidence may be.
    pub max_evidence_age: SpanMs,
    /// The transport deadline of each request.
    pub transport_deadline: SpanMs,
    /// The verification deadline.
    pub verification_deadline: SpanMs,
    /// The attempt budget.
    pub max_attempts: u32,
}

impl Default for PlanTerms {
    fn default() -> Self {
        Self {
            lifetime: SpanMs::from_secs(24 * 3600),
            max_evidence_age: SpanMs::from_secs(60),
            transport_deadline: SpanMs::from_secs(30),
            verification_deadline: SpanMs::from_secs(120),
            max_attempts: 3,
        }
    }
}

/// Wall-clock time for plan expiry: a reading of the wall clock taken once, moved on
/// by an [`infra_core::engine::Clock`].
#[derive(Clone)]
pub struct WallTime {
    origin: InstantMs,
    at_origin: std::time::Duration,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for WallTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WallTime")
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl WallTime {
    /// The system's wall clock, read once now, moved on by `clock`.
    #[must_use]
    pub fn system(clock: Arc<dyn Clock>) -> Self {
        #[allow(
            clippy::disallowed_methods,
            reason = "plan expiry is a wall-clock time the database compares with its own clock; it is read once, then moved by the injected clock"
        )]
        let now = std::time::SystemTime::now();
        let ms = now
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Self::starting_at(InstantMs(ms), clock)
    }

    /// Wall time `origin` now, moved on by `clock`.
    #[must_use]
    pub fn starting_at(origin: InstantMs, clock: Arc<dyn Clock>) -> Self {
        Self {
            origin,
            at_origin: clock.now(),
            clock,
        }
    }

    /// The clock the wall time is moved on by.
    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    /// The current wall time as a [`std::time::SystemTime`] (for certificate
    /// validity and token expiry).
    #[must_use]
    pub fn system_time(&self) -> std::time::SystemTime {
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(self.now().0)
    }

    /// The current wall time.
    #[must_use]
    pub fn now(&self) -> InstantMs {
        let elapsed = self.clock.now().saturating_sub(self.at_origin);
        self.origin.plus(SpanMs(
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        ))
    }
}

/// How an apply reaches a machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Plans are created as this publisher and wait for an approver.
    Governed {
        /// The publisher identity plans are created as.
        publisher: Actor,
    },
    /// Plans are created as this publisher, approved under the cluster's blanket
    /// approval and run at once (see the module documentation).
    Direct {
        /// The publisher identity plans are created (and blanket-approved) as.
        publisher: Actor,
    },
}

impl Mode {
    fn publisher(&self) -> &Actor {
        match self {
            Mode::Governed { publisher } | Mode::Direct { publisher } => publisher,
        }
    }
}

/// The `talos` provider's implementation of `talosMachine`. Cheap to clone; safe to
/// call concurrently. The engine takes it as a [`Router`]: [`TalosBackend::into_backend`].
#[derive(Clone)]
pub struct TalosBackend {
    store: Arc<dyn Store>,
    inventory: Arc<dyn Inventory>,
    reader: Arc<dyn NodeReader>,
    clusters: BTreeMap<String, String>,
    fleet: String,
    account: String,
    mode: Mode,
    executor: Option<Arc<Executor>>,
    /// Direct mode's queue per rollout scope: one machine of a scope runs at a time
    /// (the store's rollout slot would refuse a second commitment).
    rollouts: Arc<std::sync::Mutex<BTreeMap<String, Arc<tokio::sync::Mutex<()>>>>>,
    terms: PlanTerms,
    wall: WallTime,
}

impl std::fmt::Debug for TalosBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TalosBackend")
            .field("clusters", &self.clusters)
            .field("fleet", &self.fleet)
            .field("mode", &self.mode)
            .field("terms", &self.terms)
            .finish_non_exhaustive()
    }
}

impl TalosBackend {
    /// A governed backend: an apply creates plans as `publisher` (who must hold the
    /// publisher role in the store) for an approver to approve. Machines inventoried in
    /// a cluster count as fleet `fleet`'s.
    pub fn governed<S: Store + Inventory + 'static>(
        store: Arc<S>,
        reader: Arc<dyn NodeReader>,
        publisher: Actor,
        fleet: impl Into<String>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self::build(store, reader, Mode::Governed { publisher }, fleet, clock)
    }

    /// A backend in direct mode: an apply makes the plan as `publisher`, approves it
    /// under the cluster's blanket approval and runs it through `executor` at once.
    /// Without a blanket approval in force the plan waits for an approver, as in
    /// governed mode.
    pub fn direct<S: Store + Inventory + 'static>(
        store: Arc<S>,
        reader: Arc<dyn NodeReader>,
        publisher: Actor,
        executor: Arc<Executor>,
        fleet: impl Into<String>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let mut backend = Self::build(store, reader, Mode::Direct { publisher }, fleet, clock);
        backend.executor = Some(executor);
        backend
    }

    fn build<S: Store + Inventory + 'static>(
        store: Arc<S>,
        reader: Arc<dyn NodeReader>,
        mode: Mode,
        fleet: impl Into<String>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let inventory: Arc<dyn Inventory> = store.clone();
        Self {
            store,
            inventory,
            reader,
            clusters: BTreeMap::new(),
            fleet: fleet.into(),
            account: "talos".to_owned(),
            mode,
            executor: None,
            rollouts: Arc::default(),
            terms: PlanTerms::default(),
            wall: WallTime::system(clock),
        }
    }

    /// The same backend, mapping the cluster named `name` (a region code) to the Talos
    /// cluster ID `cluster_id`. A cluster not mapped is looked up by its name as the
    /// cluster ID.
    #[must_use]
    pub fn cluster(mut self, name: impl Into<String>, cluster_id: impl Into<String>) -> Self {
        self.clusters.insert(name.into(), cluster_id.into());
        self
    }

    /// The same backend, making plans with these terms.
    #[must_use]
    pub fn with_terms(mut self, terms: PlanTerms) -> Self {
        self.terms = terms;
        self
    }

    /// The same backend, on this wall time for plan expiry.
    #[must_use]
    pub fn with_wall_time(mut self, wall: WallTime) -> Self {
        self.wall = wall;
        self
    }

    /// The same backend, answering `account` as the account id.
    #[must_use]
    pub fn with_account(mut self, account: impl Into<String>) -> Self {
        self.account = account.into();
        self
    }

    /// The mode.
    #[must_use]
    pub fn mode(&self) -> &Mode {
        &self.mode
    }

    /// The provider's backend, as the engine takes it: a [`Router`] for provider
    /// `talos` that realises `talosMachine` with this implementation and answers
    /// `account` with the account id ([`TalosBackend::with_account`]). Observation
    /// calls are retried under the one retry policy (`INFRA_RETRY_BUDGET`, on the
    /// backend's clock); a configuration is applied once per call, since whether an
    /// apply may be made again is the execution contract's to decide.
    #[must_use]
    pub fn into_backend(self) -> Arc<dyn Backend> {
        let policy = RetryPolicy::from_env().unwrap_or_default();
        let retrier = Retrier::new(policy, self.wall.clock());
        let router = Router::new(Talos::ID, self.account.clone()).kind::<TalosMachine>(self);
        Layered::wrap(Arc::new(router), Retry::observing_only(retrier))
    }

    fn cluster_id(&self, region: &str) -> String {
        self.clusters
            .get(region)
            .cloned()
            .unwrap_or_else(|| region.to_owned())
    }

    /// The inventory record of `machine` in cluster `region`; `NotFound` otherwise.
    async fn record_in(
        &self,
        region: &str,
        machine: &str,
    ) -> Result<InventoryRecord, BackendError> {
        let cluster = self.cluster_id(region);
        match self
            .inventory
            .machine_record(machine)
            .await
            .map_err(store_error)?
        {
            Some(r) if r.cluster_id == cluster => Ok(r),
            _ => Err(BackendError::not_found(format!(
                "machine {machine} is not inventoried in cluster {region}"
            ))),
        }
    }

    async fn state(
        &self,
        region: &str,
        machine: &str,
    ) -> Result<(InventoryRecord, MachineView, Option<String>, Observation), BackendError> {
        let record = self.record_in(region, machine).await?;
        let view = self.store.machine(machine).await.map_err(store_error)?;
        let holding = self
            .store
            .operations_of(machine)
            .await
            .map_err(store_error)?
            .into_iter()
            .find(|o| !o.state.is_terminal())
            .map(|o| o.id);
        let observation = self.reader.observe(&record).await?;
        Ok((record, view, holding, observation))
    }

    async fn converge(
        &self,
        region: &str,
        machine: &str,
        spec: &TalosMachineSettled,
    ) -> Result<Written<Reading<TalosMachine>>, BackendError> {
        let publisher = self.mode.publisher();
        let (record, view, holding, observation) = self.state(region, machine).await?;
        let inventoried = MachineKey::from(&record.identity);
        let refuse = |kind: ErrorKind, why: String| {
            Err(BackendError::new(
                kind,
                format!("machine {machine}: {why}; no plan was made"),
            ))
        };
        match view.desired_release.as_deref() {
            None => {
                return refuse(
                    ErrorKind::Invalid,
                    "no release is published for it, so it has no Desired".to_owned(),
                );
            }
            Some(desired) if desired != spec.release => {
                return refuse(
                    ErrorKind::Invalid,
                    format!(
                        "the fleet declares release {}, but its Desired is {desired}; publish {} for it first (publishing selects Desired)",
                        spec.release, spec.release
                    ),
                );
            }
            Some(_) => {}
        }
        if let Partial::Known(declared) = &spec.identity
            && *declared != inventoried
        {
            return refuse(
                ErrorKind::Invalid,
                format!("the fleet declares {declared}, but the inventory records {inventoried}"),
            );
        }
        if let Some(seen) = reported_identity(&record, &observation)
            && seen != inventoried
        {
            return refuse(
                ErrorKind::Conflict,
                format!("the node presents {seen}, not the inventoried {inventoried}"),
            );
        }
        if let Some(operation) = &holding {
            return refuse(
                ErrorKind::Conflict,
                format!(
                    "operation {operation} holds it; the controller carries that operation to a named state first"
                ),
            );
        }
        let pending = view.applied_release.as_deref() != Some(spec.release.as_str());
        let live_drift = matches!(
            (view.applied_digest, observation.config_digest.value()),
            (Some(applied), Some(seen)) if applied != *seen
        );
        let revert = view.open_drift.is_some();
        if live_drift && !revert {
            return refuse(
                ErrorKind::Conflict,
                "its configuration differs from Applied's, and no drift record is open yet: the controller's drift pass records it, then a revert plan (or an adoption) can be made".to_owned(),
            );
        }
        if !pending && !revert {
            return Ok(Written::Done(reading(
                &record,
                &view,
                holding.as_deref(),
                &observation,
            )));
        }
        let now = self.wall.now();
        let plans = self
            .inventory
            .plans_of(machine)
            .await
            .map_err(store_error)?;
        if let Some(live) = plans.iter().find(|p| {
            p.release == spec.release
                && p.baseline_revision == view.baseline_revision
                && p.assignment_revision == view.assignment_revision
                && p.bound_drift == view.open_drift
                && matches!(p.state, PlanState::Proposed | PlanState::Approved)
                && p.expires_at > now
        }) {
            if let Some(executor) = &self.executor {
                return self
                    .run_direct(executor, region, &record, &live.id, live.state)
                    .await;
            }
            return Ok(Written::Deferred(Deferral::awaiting_approval(format!(
                "plan {} for machine {machine} (release {}) is already recorded and {}; nothing new was made",
                live.id,
                spec.release,
                if live.state == PlanState::Approved {
                    "approved, waiting for the controller"
                } else {
                    "waiting for an approver"
                }
            ))));
        }
        let base = format!(
            "{machine}-{}-b{}{}",
            spec.release,
            view.baseline_revision.0,
            if revert { "-revert" } else { "" }
        );
        let id = (1..)
            .map(|n| {
                if n == 1 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                }
            })
            .find(|id| !plans.iter().any(|p| &p.id == id))
            .unwrap_or(base);
        let plan = self
            .store
            .create_plan(
                publisher,
                PlanSpec {
                    id: id.clone(),
                    machine: machine.to_owned(),
                    release: spec.release.clone(),
                    expires_at: now.plus(self.terms.lifetime),
                    max_evidence_age: self.terms.max_evidence_age,
                    transport_deadline: self.terms.transport_deadline,
                    verification_deadline: self.terms.verification_deadline,
                    max_attempts: self.terms.max_attempts,
                    revert,
                },
            )
            .await
            .map_err(|e| match e {
                StoreError::Refused { act, reason } => BackendError::new(
                    ErrorKind::Conflict,
                    format!("machine {machine}: {act} refused: {reason}"),
                ),
                other => store_error(other),
            })?;
        if let Some(executor) = &self.executor {
            return self
                .run_direct(executor, region, &record, &plan.id, plan.state)
                .await;
        }
        Ok(Written::Deferred(Deferral::awaiting_approval(format!(
            "plan {} recorded for machine {machine} ({} to release {}); it waits for an approver",
            plan.id,
            if revert { "a revert" } else { "convergence" },
            spec.release
        ))))
    }
}

impl TalosBackend {
    /// Direct mode's apply of plan `plan_id`: approve it under the cluster's blanket
    /// approval if it is only proposed, run it, and report the operation's outcome.
    async fn run_direct(
        &self,
        executor: &Executor,
        region: &str,
        record: &InventoryRecord,
        plan_id: &str,
        state: PlanState,
    ) -> Result<Written<Reading<TalosMachine>>, BackendError> {
        let machine = record.id.as_str();
        // The engine applies machines in parallel; the contract lets one machine of
        // a rollout scope be in flight at a time. The others queue here.
        let queue = self
            .rollouts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(record.rollout_scope.clone())
            .or_default()
            .clone();
        let _turn = queue.lock().await;
        if state == PlanState::Proposed {
            match self
                .store
                .approve_under_blanket(self.mode.publisher(), plan_id)
                .await
            {
                Ok(_) => {}
                Err(StoreError::Refused { reason, .. }) => {
                    return Ok(Written::Deferred(Deferral::awaiting_approval(format!(
                        "plan {plan_id} recorded for machine {machine}; direct mode could not approve it ({reason}), so it waits for an approver"
                    ))));
                }
                Err(other) => return Err(store_error(other)),
            }
        }
        let outcome = match executor.run_plan(plan_id).await {
            Ok(outcome) => outcome,
            Err(e) => {
                let sent = self.may_have_sent(plan_id).await;
                return Err(executor_error(machine, plan_id, e, sent));
            }
        };
        let operation = &outcome.operation;
        if let Some(refusal) = &outcome.refusal {
            return Err(BackendError::new(
                ErrorKind::Conflict,
                format!(
                    "machine {machine}: operation {operation} of plan {plan_id}: the attempt was refused, nothing was sent: {refusal}"
                ),
            ));
        }
        match outcome.state {
            OperationState::Completed => {
                let (record, view, holding, observation) = self.state(region, machine).await?;
                Ok(Written::Done(reading(&record, &view, holding.as_deref(), &observation)))
            }
            OperationState::Rejected => Err(BackendError::invalid(format!(
                "machine {machine}: the node rejected plan {plan_id}'s configuration (operation {operation}); nothing changed"
            ))),
            OperationState::Cancelled => Err(BackendError::new(
                ErrorKind::Conflict,
                format!("machine {machine}: operation {operation} of plan {plan_id} was cancelled"),
            )),
            OperationState::Failed => {
                let error = BackendError::new(
                    ErrorKind::Other,
                    format!(
                        "machine {machine}: operation {operation} of plan {plan_id} failed ({}); {} request(s) sent",
                        outcome
                            .classification
                            .as_ref()
                            .map_or_else(|| "no classification".to_owned(), ToString::to_string),
                        outcome.sends
                    ),
                );
                Err(if outcome.sends > 0 { error.maybe_sent() } else { error })
            }
            state => Err(BackendError::new(
                ErrorKind::Other,
                format!(
                    "machine {machine}: operation {operation} of plan {plan_id} is {state}: its outcome is not known yet; recovery-admin accounts for it and a controller resumes it"
                ),
            )
            .maybe_sent()),
        }
    }
}

impl TalosBackend {
    /// Whether a request for plan `plan_id` may have reached the node: an attempt is
    /// on record, or the store cannot say.
    async fn may_have_sent(&self, plan_id: &str) -> bool {
        let Ok(plan) = self.store.plan(plan_id).await else {
            return true;
        };
        let Some(operation) = plan.operation else {
            return false;
        };
        self.store
            .attempts(&operation)
            .await
            .map_or(true, |attempts| !attempts.is_empty())
    }
}

/// An executor's error, in the portable vocabulary.
fn executor_error(machine: &str, plan: &str, e: ExecutorError, sent: bool) -> BackendError {
    if sent {
        return BackendError::new(
            ErrorKind::Other,
            format!(
                "machine {machine}: plan {plan} stopped after an attempt was recorded, so a request may have reached the node: {e}"
            ),
        )
        .maybe_sent();
    }
    let kind = match &e {
        ExecutorError::Access(_) | ExecutorError::Store(StoreError::Database(_)) => {
            ErrorKind::Unavailable
        }
        ExecutorError::Settings(_) => ErrorKind::Invalid,
        _ => ErrorKind::Conflict,
    };
    BackendError::new(
        kind,
        format!("machine {machine}: plan {plan} was not run, nothing was sent: {e}"),
    )
}

/// A store error in the portable vocabulary: only a missing machine is `NotFound`.
fn store_error(e: StoreError) -> BackendError {
    match e {
        StoreError::NotFound {
            what: "machine",
            id,
        } => BackendError::not_found(format!("machine {id} does not exist in the store")),
        StoreError::Database(_) => BackendError::new(ErrorKind::Unavailable, e.to_string()),
        other => BackendError::new(ErrorKind::Conflict, other.to_string()),
    }
}

/// The identity the node reports, of the kind the inventory records it by.
fn reported_identity(record: &InventoryRecord, observation: &Observation) -> Option<MachineKey> {
    match &record.identity {
        crate::store::IdentityKey::SmbiosUuid(_) => observation
            .identity
            .smbios_uuid
            .value()
            .map(|v| MachineKey::SmbiosUuid(v.clone())),
        crate::store::IdentityKey::NodeId(_) => observation
            .identity
            .node_id
            .value()
            .map(|v| MachineKey::NodeId(v.clone())),
    }
}

fn known<T>(value: Option<T>) -> Partial<T> {
    value.map_or(Partial::Unknown, Partial::Known)
}

/// A read of a machine: the store's values and the node's.
fn reading(
    record: &InventoryRecord,
    view: &MachineView,
    holding: Option<&str>,
    observation: &Observation,
) -> Reading<TalosMachine> {
    let observed_digest = observation.config_digest.value().copied();
    let drift = match (holding, view.applied_digest, observed_digest) {
        (Some(_), _, _) => None,
        (None, Some(applied), Some(seen)) => Some(applied != seen),
        (None, Some(_), None) if view.open_drift.is_some() => Some(true),
        _ => None,
    };
    let applied_release = match (&view.applied_release, &view.applied_digest) {
        (Some(r), _) => Some(r.clone()),
        (None, Some(_)) => Some(HANDED_OVER.to_owned()),
        (None, None) => None,
    };
    let observed = TalosMachineObserved {
        machine: record.id.clone(),
        cluster_id: record.cluster_id.clone(),
        endpoint: record.endpoint.clone(),
        identity: MachineKey::from(&record.identity),
        desired_release: view.desired_release.clone(),
        applied_release: view.applied_release.clone(),
        applied_digest: view.applied_digest.map(|d| d.to_hex()),
        observed_digest: observed_digest.map(|d| d.to_hex()),
        talos_version: observation.talos_version.value().cloned(),
        pending_convergence: view.desired_release.is_some()
            && view.desired_release != view.applied_release,
        drift,
        holding_operation: holding.map(str::to_owned),
        open_drift: view.open_drift.map(|r| r.0),
    };
    let reported = TalosMachineReported {
        release: known(applied_release),
        identity: known(reported_identity(record, observation)),
        drift: known(drift),
    };
    Reading::new(record.id.clone(), observed, reported)
}

// Tags are "readable" (the inventory stands in for them) and names do not repeat: the
// defaults of `tags_readable` and `duplicate_names`. `mark` keeps its default (`Invalid`):
// a machine is brought under a fleet by inventorying it, not by marking it.
#[async_trait]
impl KindBackend<TalosMachine> for TalosBackend {
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let cluster = self.cluster_id(args.region);
        Ok(self
            .inventory
            .machines()
            .await
            .map_err(store_error)?
            .into_iter()
            .filter(|m| m.cluster_id == cluster)
            .map(|m| Listed::new(m.id.clone(), m.id))
            .collect())
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<TalosMachine>, BackendError> {
        let (record, view, holding, observation) = self.state(args.region, args.handle).await?;
        Ok(reading(&record, &view, holding.as_deref(), &observation))
    }

    async fn create(
        &self,
        args: CreateArgs<'_, TalosMachine>,
    ) -> Result<Written<Reading<TalosMachine>>, BackendError> {
        Err(BackendError::invalid(format!(
            "machine {} is not inventoried in cluster {}: the engine does not add machines; register it in the inventory (`talos inventory add`) first",
            args.name, args.region
        )))
    }

    async fn update(
        &self,
        args: UpdateArgs<'_, TalosMachine>,
    ) -> Result<Written<Reading<TalosMachine>>, BackendError> {
        self.converge(args.region, args.handle, args.spec).await
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        Err(BackendError::invalid(format!(
            "machine {} in cluster {} is not deleted by the engine: machines leave the inventory by an operator's act; `forget` it to stop managing it",
            args.handle, args.region
        )))
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        self.record_in(args.region, args.handle).await?;
        Ok(RawTags::from([(MARKER_KEY.to_owned(), self.fleet.clone())]))
    }
}
