//! The executor itself (see the module documentation of [`super`]).

use std::sync::Arc;
use std::time::Duration;

use infra_core::engine::Clock;

use crate::contract::accounting::{LastRecoveryRead, MIN_SETTLE_FLOOR, next_recovery_read};
use crate::contract::adoption::Hold;
use crate::contract::classify::{Classification, UnresolvedReason};
use crate::contract::evidence::{ObservationPurpose, ResponseClass, TransportOutcome};
use crate::contract::operation::{ControllerId, OperationKind, OperationState, OwnerToken};
use crate::contract::plan::PlanState;
use crate::contract::recovery::ScopeState;
use crate::contract::{InstantMs, Revision, SpanMs};
use crate::dispatch::{self, ApplyResponse, Delivery};
use crate::keys::{KeyProvider, SealedArtifact};
use crate::store::{
    Actor, AdoptionOutcome, AttemptView, DependencyCheck, ObservationRequest, ObservationView,
    ObservedFacts, OperationView, PlanView, Store, StoreError,
};

use super::{Connector, ExecutorError, Interruption, InterruptionHook, MachineClients};

/// How many moves one pass over an operation makes at most before it hands back what
/// it reached (each move is a store transaction or a read).
const MAX_MOVES: usize = 32;

/// How often a recovery observation found early by the store's clock is put off
/// before giving up.
const EARLY_READ_LIMIT: usize = 8;

/// Deployment settings kept outside the application database (choice §10.11, §7.3
/// step 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecutorSettings {
    /// The settle floor: at least 30 s.
    pub settle_floor: SpanMs,
    /// The deployment's maximum transport deadline: the executor runs no plan that
    /// binds a longer one.
    pub max_transport_deadline: SpanMs,
}

/// Where a pass over an operation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The plan.
    pub plan: String,
    /// Its operation.
    pub operation: String,
    /// The operation's state when the pass ended.
    pub state: OperationState,
    /// The last classification the pass obtained, if any.
    pub classification: Option<Classification>,
    /// An attempt transaction's refusal, when one ended the pass (nothing was sent
    /// for it).
    pub refusal: Option<StoreError>,
    /// Requests this pass sent.
    pub sends: u32,
}

impl Outcome {
    pub(super) fn new(plan: &PlanView, operation: &str) -> Self {
        Self {
            plan: plan.id.clone(),
            operation: operation.to_owned(),
            state: OperationState::Committed,
            classification: None,
            refusal: None,
            sends: 0,
        }
    }

    /// Whether an attempt is still waiting for a response or a §5.2 decision.
    #[must_use]
    pub fn awaits_accounting(&self) -> bool {
        matches!(
            self.classification,
            Some(Classification::Unresolved(
                UnresolvedReason::UnaccountedAttempts { .. }
            ))
        ) || self.state == OperationState::Sending
    }
}

/// A recovery observation as recovery-admin's §5.2 decision relies on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryRead {
    /// Its basis: the revision of its "observation started" entry.
    pub basis: Revision,
    /// When its read started (store time).
    pub started_at: InstantMs,
    /// When its result was recorded (store time).
    pub recorded_at: InstantMs,
    /// The configuration digest read (hex), if read.
    pub digest: Option<String>,
    /// The machine-config resource version read, if read.
    pub config_version: Option<u64>,
}

/// The controller loop of one controller instance (see [`super`]).
pub struct Executor {
    pub(super) id: ControllerId,
    pub(super) store: Arc<dyn Store>,
    pub(super) connector: Arc<dyn Connector>,
    keys: Arc<dyn KeyProvider>,
    pub(super) clock: Arc<dyn Clock>,
    settings: ExecutorSettings,
    hook: Option<InterruptionHook>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("id", &self.id)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Executor {
    /// An executor for controller instance `id` that opens each plan's sealed
    /// artifact from the store alone ([`Store::sealed_artifact`]).
    ///
    /// # Errors
    ///
    /// [`ExecutorError::Settings`] for a settle floor under 30 s or a zero maximum
    /// transport deadline.
    pub fn new(
        id: ControllerId,
        store: Arc<dyn Store>,
        connector: Arc<dyn Connector>,
        keys: Arc<dyn KeyProvider>,
        clock: Arc<dyn Clock>,
        settings: ExecutorSettings,
    ) -> Result<Self, ExecutorError> {
        if settings.settle_floor < MIN_SETTLE_FLOOR {
            return Err(ExecutorError::Settings(format!(
                "the settle floor is {}, below the minimum of {MIN_SETTLE_FLOOR}",
                settings.settle_floor
            )));
        }
        if settings.max_transport_deadline == SpanMs(0) {
            return Err(ExecutorError::Settings(
                "the maximum transport deadline must be positive".to_owned(),
            ));
        }
        Ok(Self {
            id,
            store,
            connector,
            keys,
            clock,
            settings,
            hook: None,
        })
    }

    /// Awaits `hook` at each [`Interruption`] point.
    #[doc(hidden)]
    #[must_use]
    pub fn with_interruptions(mut self, hook: InterruptionHook) -> Self {
        self.hook = Some(hook);
        self
    }

    /// This instance's identifier.
    #[must_use]
    pub fn id(&self) -> ControllerId {
        self.id
    }

    /// The settings.
    #[must_use]
    pub fn settings(&self) -> ExecutorSettings {
        self.settings
    }

    /// Runs an approved plan: pre-check, evidence, commitment, attempt, send,
    /// response, completion observation and classification, retrying only through a
    /// new attempt transaction after a safe-to-retry classification.
    ///
    /// # Errors
    ///
    /// A refused pre-check or commitment ([`ExecutorError::Store`]; nothing was
    /// sent), a plan binding a transport deadline above the deployment's maximum
    /// ([`ExecutorError::Settings`]), a failed use-time check, an unreachable store.
    /// A refused attempt is not an error: the [`Outcome`] carries it.
    pub async fn run_plan(&self, plan_id: &str) -> Result<Outcome, ExecutorError> {
        let plan = self.store.plan(plan_id).await?;
        if plan.kind == OperationKind::Adopt {
            return self.adopt(&plan).await;
        }
        self.store.preflight(plan_id).await?;
        if plan.transport_deadline > self.settings.max_transport_deadline {
            return Err(ExecutorError::Settings(format!(
                "plan {} binds a transport deadline of {}, above the deployment's maximum of {}",
                plan.id, plan.transport_deadline, self.settings.max_transport_deadline
            )));
        }
        let clients = self.connect(&plan.machine).await?;
        let sealed = self.sealed(&plan).await?;
        self.gather_evidence(&plan, &clients, &sealed).await?;
        self.pause(Interruption::BeforeCommitment).await;
        let committed = self.store.commit(plan_id, self.id).await?;
        self.pause(Interruption::Committed).await;
        // Straight to the first attempt transaction with the commitment's token: if
        // ownership moved meanwhile, the store refuses it and nothing is sent.
        let mut out = Outcome::new(&plan, &committed.operation);
        if !self
            .attempt_and_send(
                &plan,
                &clients,
                &committed.operation,
                committed.owner,
                &mut out,
            )
            .await?
        {
            return Ok(out);
        }
        self.advance(&plan, &clients, committed.owner, out).await
    }

    /// An adopt plan (§6.3): a fresh observation of the machine, then the adoption
    /// record transaction. Nothing is sent.
    async fn adopt(&self, plan: &PlanView) -> Result<Outcome, ExecutorError> {
        // No read for a plan that cannot be recorded: the store would hold it too.
        match plan.state {
            PlanState::Approved => {}
            PlanState::Committed => return Err(ExecutorError::AdoptionHeld(Hold::AlreadyAdopted)),
            _ => return Err(ExecutorError::AdoptionHeld(Hold::NotApproved)),
        }
        let clients = self.connect(&plan.machine).await?;
        self.observe(plan, &clients, ObservationPurpose::Evidence)
            .await?;
        match self.store.record_adoption(&plan.id, self.id).await? {
            AdoptionOutcome::Recorded { operation } => Ok(Outcome {
                state: OperationState::Completed,
                ..Outcome::new(plan, &operation)
            }),
            AdoptionOutcome::Held(hold) => Err(ExecutorError::AdoptionHeld(hold)),
        }
    }

    /// Takes over every non-terminal operation the store holds that another
    /// instance owns, then resumes each (§3.4, §5.3). Takeovers happen here and at
    /// recovery-admin's request ([`Executor::take_over_at_request`]), never on a
    /// timer. In recovery mode, operations on scopes not released in the current
    /// epoch are never resumed (§7.3 step 7): a restored one with an attempt whose
    /// scope the step 1 decision has accounted is classified instead, sending
    /// nothing ([`Executor::classify_restored_operations`], §7.3 step 5); the rest
    /// are left where they are.
    ///
    /// # Errors
    ///
    /// A store or access failure.
    pub async fn start(&self) -> Result<Vec<Outcome>, ExecutorError> {
        // In recovery mode, those on scopes not released are classified or left.
        let mut outcomes = self.classify_restored_operations().await?;
        let recovery = self.in_recovery().await?;
        for view in self.store.open_operations().await? {
            if recovery && self.store.machine(&view.machine).await?.scope != ScopeState::Released {
                continue;
            }
            let token = if view.owner.controller == self.id {
                view.owner
            } else {
                match self
                    .store
                    .takeover(&view.id, view.owner.generation, self.id)
                    .await
                {
                    Ok(token) => token,
                    // Another instance won this generation, or the operation ended
                    // meanwhile.
                    Err(StoreError::Refused { .. }) => continue,
                    Err(e) => return Err(e.into()),
                }
            };
            outcomes.push(self.resume_with(&view.id, token).await?);
        }
        Ok(outcomes)
    }

    /// Takes `operation` over (§3.4) without naming who asked.
    ///
    /// # Errors
    ///
    /// The store's refusal, e.g. when another takeover won the generation.
    pub async fn take_over(&self, operation: &str) -> Result<OwnerToken, ExecutorError> {
        self.take_over_requested(operation, None).await
    }

    /// Takes `operation` over at `requested_by`'s request (recovery-admin, §3.4);
    /// the store records who asked.
    ///
    /// # Errors
    ///
    /// The store's refusal: the principal does not hold recovery-admin, or another
    /// takeover won the generation.
    pub async fn take_over_at_request(
        &self,
        operation: &str,
        requested_by: &Actor,
    ) -> Result<OwnerToken, ExecutorError> {
        self.take_over_requested(operation, Some(requested_by))
            .await
    }

    async fn take_over_requested(
        &self,
        operation: &str,
        requested_by: Option<&Actor>,
    ) -> Result<OwnerToken, ExecutorError> {
        let view = self.store.operation(operation).await?;
        Ok(self
            .store
            .takeover_requested(operation, view.owner.generation, self.id, requested_by)
            .await?)
    }

    /// Resumes an operation this instance owns from the state it is in.
    ///
    /// # Errors
    ///
    /// [`ExecutorError::NotOwner`], or a store or access failure.
    pub async fn resume(&self, operation: &str) -> Result<Outcome, ExecutorError> {
        let view = self.store.operation(operation).await?;
        let token = self.owned(&view)?;
        self.resume_with(operation, token).await
    }

    /// After recovery-admin's §5.2 decision accounted the last unaccounted attempt:
    /// takes the completion observation and classifies, retrying through a new
    /// attempt transaction if the classification is safe to retry.
    ///
    /// # Errors
    ///
    /// As [`Executor::resume`].
    pub async fn after_accounting(&self, operation: &str) -> Result<Outcome, ExecutorError> {
        self.resume(operation).await
    }

    /// Takes the next recovery observation of an operation whose attempt is
    /// unaccounted, waiting on the clock until it is due (§5.2): none before the
    /// latest transport deadline, the first just after it, each later one a settle
    /// floor after the previous one was recorded. It settles nothing by itself.
    ///
    /// # Errors
    ///
    /// [`ExecutorError::NotOwner`], or a store or access failure.
    pub async fn recovery_observation(
        &self,
        operation: &str,
    ) -> Result<RecoveryRead, ExecutorError> {
        let view = self.store.operation(operation).await?;
        self.owned(&view)?;
        let plan = self.store.plan(&view.plan).await?;
        let clients = self.connect(&view.machine).await?;
        let due = self.recovery_due(operation, &view.machine).await?;
        for _ in 0..EARLY_READ_LIMIT {
            let now = self.store.now().await?;
            if due > now {
                self.clock.sleep(Duration::from_millis(due.0 - now.0)).await;
                continue;
            }
            let ticket = self
                .store
                .begin_observation(self.request(&plan, ObservationPurpose::Recovery))
                .await?;
            let started = self
                .observation(&view.machine, ticket.basis)
                .await?
                .map_or(InstantMs(0), |o| o.started_at);
            if started < due {
                // Early by the store's clock: this read is never made nor recorded,
                // so it counts for nothing.
                continue;
            }
            let facts = self.read(&clients).await;
            self.store
                .record_observation(&ticket, facts.clone())
                .await?;
            let recorded_at = self
                .observation(&view.machine, ticket.basis)
                .await?
                .and_then(|o| o.recorded_at)
                .unwrap_or(started);
            return Ok(RecoveryRead {
                basis: ticket.basis,
                started_at: started,
                recorded_at,
                digest: facts.digest.map(|d| d.to_hex()),
                config_version: facts.config_version,
            });
        }
        Err(ExecutorError::Access(format!(
            "the store's clock stayed before the due time {due} of the next recovery observation"
        )))
    }

    /// Takes recovery observations until every attempt of `operation` is accounted
    /// for or `limit` were taken; returns those taken.
    ///
    /// # Errors
    ///
    /// As [`Executor::recovery_observation`].
    pub async fn watch_unaccounted(
        &self,
        operation: &str,
        limit: usize,
    ) -> Result<Vec<RecoveryRead>, ExecutorError> {
        let mut taken = Vec::new();
        for _ in 0..limit {
            if self
                .store
                .attempts(operation)
                .await?
                .iter()
                .all(AttemptView::accounted)
            {
                break;
            }
            taken.push(self.recovery_observation(operation).await?);
        }
        Ok(taken)
    }

    /// The recovery observations recorded for the machine since `operation`'s first
    /// attempt: what recovery-admin's §5.2 decision relies on.
    ///
    /// # Errors
    ///
    /// A store failure.
    pub async fn recovery_reads(
        &self,
        operation: &str,
    ) -> Result<Vec<RecoveryRead>, ExecutorError> {
        let view = self.store.operation(operation).await?;
        let since = self
            .store
            .attempts(operation)
            .await?
            .first()
            .map_or(Revision(0), |a| a.revision);
        Ok(self
            .store
            .observations(&view.machine)
            .await?
            .into_iter()
            .filter(|o| o.purpose == ObservationPurpose::Recovery && o.basis > since)
            .filter_map(|o| {
                Some(RecoveryRead {
                    basis: o.basis,
                    started_at: o.started_at,
                    recorded_at: o.recorded_at?,
                    digest: o.digest().map(|d| d.to_hex()),
                    config_version: o.config_version(),
                })
            })
            .collect())
    }

    async fn resume_with(
        &self,
        operation: &str,
        token: OwnerToken,
    ) -> Result<Outcome, ExecutorError> {
        let view = self.store.operation(operation).await?;
        let plan = self.store.plan(&view.plan).await?;
        let clients = self.connect(&view.machine).await?;
        let out = Outcome::new(&plan, operation);
        self.advance(&plan, &clients, token, out).await
    }

    /// Clients for `machine`, reached at the endpoint the store records.
    pub(super) async fn connect(&self, machine: &str) -> Result<MachineClients, ExecutorError> {
        let view = self.store.machine(machine).await?;
        self.connector.connect(&view).await
    }

    fn owned(&self, view: &OperationView) -> Result<OwnerToken, ExecutorError> {
        if view.owner.controller == self.id {
            Ok(view.owner)
        } else {
            Err(ExecutorError::NotOwner {
                operation: view.id.clone(),
            })
        }
    }

    async fn pause(&self, point: Interruption) {
        if let Some(hook) = &self.hook {
            hook(point).await;
        }
    }

    /// Moves the operation as far as the evidence allows.
    async fn advance(
        &self,
        plan: &PlanView,
        clients: &MachineClients,
        token: OwnerToken,
        mut out: Outcome,
    ) -> Result<Outcome, ExecutorError> {
        let operation = out.operation.clone();
        let operation = operation.as_str();
        let mut retry = false;
        let mut observed_unsent = false;
        let mut completion_taken = false;
        for _ in 0..MAX_MOVES {
            let view = self.store.operation(operation).await?;
            out.state = view.state;
            match view.state {
                state if state.is_terminal() => return Ok(out),
                OperationState::Committed => {
                    if !self
                        .attempt_and_send(plan, clients, operation, token, &mut out)
                        .await?
                    {
                        return Ok(out);
                    }
                    completion_taken = false;
                }
                OperationState::Verifying => {
                    if completion_taken {
                        return Ok(out);
                    }
                    self.completion_observation(plan, clients).await?;
                    completion_taken = true;
                    out.classification = Some(self.store.classify(operation, token).await?);
                }
                OperationState::Unresolved => {
                    if retry {
                        retry = false;
                        let sealed = self.sealed(plan).await?;
                        self.gather_evidence(plan, clients, &sealed).await?;
                        if !self
                            .attempt_and_send(plan, clients, operation, token, &mut out)
                            .await?
                        {
                            return Ok(out);
                        }
                        completion_taken = false;
                        continue;
                    }
                    if view.attempts == 0 {
                        if !observed_unsent {
                            self.observe(plan, clients, ObservationPurpose::Recovery)
                                .await?;
                            observed_unsent = true;
                        }
                    } else if !completion_taken && self.all_accounted(&view).await? {
                        self.completion_observation(plan, clients).await?;
                        completion_taken = true;
                    }
                    let c = self.store.classify(operation, token).await?;
                    out.classification = Some(c);
                    match c {
                        Classification::SafeToRetry => retry = true,
                        Classification::Unresolved(_) => {
                            out.state = self.store.operation(operation).await?.state;
                            return Ok(out);
                        }
                        _ => {}
                    }
                }
                // Sending: an attempt whose response is not on record; only a takeover
                // and recovery observations lead on from here.
                _ => return Ok(out),
            }
        }
        Ok(out)
    }

    pub(super) async fn all_accounted(&self, view: &OperationView) -> Result<bool, ExecutorError> {
        Ok(self
            .store
            .attempts(&view.id)
            .await?
            .iter()
            .all(AttemptView::accounted))
    }

    /// The observation of `machine` with this basis.
    async fn observation(
        &self,
        machine: &str,
        basis: Revision,
    ) -> Result<Option<ObservationView>, ExecutorError> {
        Ok(self
            .store
            .observations(machine)
            .await?
            .into_iter()
            .find(|o| o.basis == basis))
    }

    pub(super) async fn completion_observation(
        &self,
        plan: &PlanView,
        clients: &MachineClients,
    ) -> Result<(), ExecutorError> {
        self.observe(plan, clients, ObservationPurpose::Completion)
            .await?;
        self.pause(Interruption::CompletionObserved).await;
        Ok(())
    }

    /// Decrypts, runs the attempt transaction, sends under the proof it returns and
    /// records the response class. `false` when the attempt was refused (nothing
    /// sent).
    async fn attempt_and_send(
        &self,
        plan: &PlanView,
        clients: &MachineClients,
        operation: &str,
        token: OwnerToken,
        out: &mut Outcome,
    ) -> Result<bool, ExecutorError> {
        let sealed = self.sealed(plan).await?;
        let plaintext = self.keys.open(&sealed).await?;
        if plaintext.digest() != plan.artifact_digest {
            return Err(ExecutorError::ArtifactMismatch {
                plan: plan.id.clone(),
            });
        }
        let artifact = plaintext.to_artifact();
        drop(plaintext);
        let attempt = match self.store.attempt(operation, token).await {
            Ok(attempt) => attempt,
            Err(refusal @ StoreError::AttemptRefused { .. }) => {
                out.refusal = Some(refusal);
                out.state = self.store.operation(operation).await?.state;
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        };
        self.pause(Interruption::AttemptRecorded).await;
        let number = attempt.attempt();
        let dispatched = clients
            .dispatcher
            .send(attempt, &artifact, Delivery::Apply)
            .await
            .map_err(|e| ExecutorError::Dispatch(e.to_string()))?;
        drop(artifact);
        out.sends += 1;
        self.pause(Interruption::ResponseReceived).await;
        out.state = self
            .store
            .record_response_text(
                operation,
                number,
                token,
                response_class(&dispatched.response),
                response_text(&dispatched.response),
            )
            .await?;
        Ok(true)
    }

    async fn sealed(&self, plan: &PlanView) -> Result<SealedArtifact, ExecutorError> {
        let sealed = self.store.sealed_artifact(&plan.id).await?;
        if sealed.digest != plan.artifact_digest {
            return Err(ExecutorError::ArtifactMismatch {
                plan: plan.id.clone(),
            });
        }
        Ok(sealed)
    }

    /// §3.1: the use-time dependency check, recorded whatever its result, then a
    /// fresh evidence observation.
    async fn gather_evidence(
        &self,
        plan: &PlanView,
        clients: &MachineClients,
        sealed: &SealedArtifact,
    ) -> Result<(), ExecutorError> {
        let checked = self.keys.check_artifact(sealed).await;
        self.store
            .record_dependency_check(DependencyCheck {
                plan: plan.id.clone(),
                controller: self.id,
                access_path: clients.access.path.clone(),
                access_version: clients.access.version.clone(),
                artifact_decrypts: checked.is_ok(),
            })
            .await?;
        checked?;
        self.observe(plan, clients, ObservationPurpose::Evidence)
            .await?;
        Ok(())
    }

    fn request(&self, plan: &PlanView, purpose: ObservationPurpose) -> ObservationRequest {
        ObservationRequest {
            machine: plan.machine.clone(),
            purpose,
            plan: Some(plan.id.clone()),
            controller: self.id,
        }
    }

    /// An observation whose basis is recorded before the read starts.
    async fn observe(
        &self,
        plan: &PlanView,
        clients: &MachineClients,
        purpose: ObservationPurpose,
    ) -> Result<Revision, ExecutorError> {
        let ticket = self
            .store
            .begin_observation(self.request(plan, purpose))
            .await?;
        let facts = self.read(clients).await;
        self.store.record_observation(&ticket, facts).await?;
        Ok(ticket.basis)
    }

    /// An observation of `machine` naming no plan (purpose drift, recovery or
    /// restoration): its basis and what it read, or `Err` with the reason when the
    /// machine could not be reached, in which case nothing is recorded.
    pub(super) async fn observe_unplanned(
        &self,
        machine: &str,
        purpose: ObservationPurpose,
    ) -> Result<Result<(Revision, ObservedFacts), String>, ExecutorError> {
        let clients = match self.connect(machine).await {
            Ok(clients) => clients,
            Err(ExecutorError::Store(e)) => return Err(e.into()),
            Err(e) => return Ok(Err(e.to_string())),
        };
        let ticket = self
            .store
            .begin_observation(ObservationRequest {
                machine: machine.to_owned(),
                purpose,
                plan: None,
                controller: self.id,
            })
            .await?;
        let facts = self.read(&clients).await;
        self.store
            .record_observation(&ticket, facts.clone())
            .await?;
        Ok(Ok((ticket.basis, facts)))
    }

    /// One read of the machine through the read-only client.
    async fn read(&self, clients: &MachineClients) -> ObservedFacts {
        let o = clients.observer.observe(self.clock.as_ref()).await;
        ObservedFacts {
            smbios_uuid: o.identity.smbios_uuid.value().cloned(),
            node_id: o.identity.node_id.value().cloned(),
            cluster_id: o.cluster_id.value().cloned(),
            talos_version: o.talos_version.value().cloned(),
            digest: o.config_digest.value().copied(),
            config_version: o.config_version.value().and_then(|v| v.parse().ok()),
            access_version: Some(clients.access.version.clone()),
        }
    }

    /// When the next recovery observation of `operation`'s machine is due (§5.2):
    /// from the attempts' recorded transport deadlines and the latest recovery
    /// observation recorded since the last attempt.
    async fn recovery_due(
        &self,
        operation: &str,
        machine: &str,
    ) -> Result<InstantMs, ExecutorError> {
        let attempts = self.store.attempts(operation).await?;
        let Some(last) = attempts.last() else {
            return Ok(InstantMs(0));
        };
        let latest_deadline = attempts
            .iter()
            .map(|a| a.transport_deadline)
            .max()
            .unwrap_or(last.transport_deadline);
        let previous = self
            .store
            .observations(machine)
            .await?
            .into_iter()
            .filter(|o| o.purpose == ObservationPurpose::Recovery && o.basis > last.revision)
            .filter_map(|o| o.recorded_at)
            .next_back();
        Ok(match previous {
            // The first read starts strictly after the deadline (§11.11).
            None => latest_deadline.plus(SpanMs(1)),
            Some(at) => next_recovery_read(
                latest_deadline,
                self.settings.settle_floor,
                LastRecoveryRead::Recorded { at },
            ),
        })
    }
}

/// The class recorded for a send's outcome (§3.5, §5.1).
fn response_class(response: &ApplyResponse) -> ResponseClass {
    match response {
        ApplyResponse::Accepted { .. } => ResponseClass::Accepted,
        ApplyResponse::Rejected { .. } => ResponseClass::ValidationRejection,
        ApplyResponse::Refused { .. } => ResponseClass::OtherRefusal,
        ApplyResponse::Unknown { outcome } => ResponseClass::Transport(match outcome {
            dispatch::TransportOutcome::DeadlineExceeded => TransportOutcome::DeadlineExceeded,
            dispatch::TransportOutcome::ConnectionLost => TransportOutcome::ConnectionLost,
            dispatch::TransportOutcome::Unavailable => TransportOutcome::Unavailable,
        }),
    }
}

/// The node's message as the dispatch client gave it: already redacted there, and
/// never anything else.
fn response_text(response: &ApplyResponse) -> Option<String> {
    match response {
        ApplyResponse::Accepted {
            warnings,
            mode_details,
        } => {
            let mut text = mode_details.clone();
            if !warnings.is_empty() {
                if !text.is_empty() {
                    text.push_str("; ");
                }
                text.push_str("warnings: ");
                text.push_str(&warnings.join("; "));
            }
            (!text.is_empty()).then_some(text)
        }
        ApplyResponse::Rejected { message } => Some(message.clone()),
        ApplyResponse::Refused { code, message } => Some(format!("{code:?}: {message}")),
        ApplyResponse::Unknown { .. } => None,
    }
}
