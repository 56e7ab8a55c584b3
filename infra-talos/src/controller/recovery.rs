//! The controller in recovery mode (§7.2, §7.3): after a restore, a controller
//! instance runs no plan and resumes no operation on a scope the current epoch has
//! not released. What it does is read:
//!
//! - **recovery observations** (purpose recovery, naming no plan or operation) of
//!   each pre-restore unaccounted scope (§7.3 step 1): none before the entry time
//!   plus the deployment's maximum transport deadline — the latest an attempt the
//!   restore erased could have ended its wait — then one each time a settle floor has
//!   passed since the machine's last recorded one. recovery-admin's joint decision
//!   (`Store::account_scopes`) relies on them;
//! - **restoration observations** (§7.3 step 4) of each accounted scope that waits
//!   for one (blocked on no observation, on a failed one, on an identity mismatch, or
//!   awaiting its mark with none recorded since the decision), so that
//!   recovery-admin's mark (`Store::mark_scope`) rests on a read of the machine as it
//!   is now. The store applies the drift rules to it.
//!
//! - the restoration observation of an unresolved scope once no operation holds it
//!   any more, so that the mark after the classification below rests on one.
//!
//! The recovery pass never sends, and never decides: accounting, marking, release and
//! leaving recovery mode are recovery-admin's acts.
//!
//! Each restored operation with an attempt is classified once its scope is
//! accounted ([`Executor::classify_restored_operations`], §7.3 step 5): from a
//! completion observation taken then, sending nothing. A start in recovery mode
//! (`Executor::start`) does so once, and the service's controller every interval in
//! recovery mode, since the step 1 decision comes while it runs. That is what lets
//! an unresolved scope be marked, released, and recovery mode be left.

use serde::{Deserialize, Serialize};

use super::{Executor, ExecutorError, Outcome};
use crate::contract::evidence::ObservationPurpose;
use crate::contract::operation::OperationState;
use crate::contract::recovery::{BlockedOn, ScopeState};
use crate::contract::{InstantMs, Revision};
use crate::store::{MachineView, OperationView, StoreError};

/// What the recovery pass did for one machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "did")]
pub enum RecoveryAction {
    /// A recovery observation was recorded (§7.3 step 1).
    RecoveryObserved {
        /// Its basis.
        basis: Revision,
    },
    /// A restoration observation was recorded (§7.3 step 4).
    RestorationObserved {
        /// Its basis.
        basis: Revision,
    },
    /// The next recovery observation is not due yet.
    NotDue {
        /// When it is due (store time).
        due: InstantMs,
    },
    /// The scope waits for recovery-admin (its decision, mark, release), or is
    /// released: nothing for the controller to read.
    Waits,
    /// The machine could not be reached; nothing was recorded.
    Unreachable {
        /// Why, without configuration values.
        reason: String,
    },
}

/// One machine's line of a recovery pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryStep {
    /// The machine.
    pub machine: String,
    /// Its scope state when the pass looked.
    pub scope: ScopeState,
    /// What the pass did.
    #[serde(flatten)]
    pub action: RecoveryAction,
}

/// Every machine's line of one recovery pass; empty outside recovery mode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryPass {
    /// Whether recovery mode is in effect (some scope is not normal).
    pub in_recovery: bool,
    /// One line per machine, in machine order.
    pub steps: Vec<RecoveryStep>,
}

impl Executor {
    /// Whether the store is in recovery mode: a scope that is not normal exists.
    ///
    /// # Errors
    ///
    /// A store failure.
    pub async fn in_recovery(&self) -> Result<bool, ExecutorError> {
        Ok(self
            .store
            .machines()
            .await?
            .iter()
            .any(|m| m.scope != ScopeState::Normal))
    }

    /// One recovery pass over every machine (see the module documentation). Outside
    /// recovery mode it reads nothing.
    ///
    /// # Errors
    ///
    /// A store failure; an unreachable machine is a [`RecoveryAction`].
    pub async fn recovery_pass(&self) -> Result<RecoveryPass, ExecutorError> {
        let machines = self.store.machines().await?;
        let mut pass = RecoveryPass {
            in_recovery: machines.iter().any(|m| m.scope != ScopeState::Normal),
            steps: Vec::new(),
        };
        if !pass.in_recovery {
            return Ok(pass);
        }
        for machine in &machines {
            let action = match machine.scope {
                ScopeState::PreRestoreUnaccounted => self.recovery_read(machine).await?,
                ScopeState::Blocked(
                    BlockedOn::NoRestorationObservation
                    | BlockedOn::ObservationFailed
                    | BlockedOn::IdentityMismatch,
                ) => self.restoration_read(machine).await?,
                ScopeState::Blocked(BlockedOn::AwaitingMark)
                    if !self.restoration_recorded_since_decision(machine).await? =>
                {
                    self.restoration_read(machine).await?
                }
                ScopeState::Unresolved
                    if !self.operation_holds(machine).await?
                        && !self.restoration_recorded_since_decision(machine).await? =>
                {
                    self.restoration_read(machine).await?
                }
                _ => RecoveryAction::Waits,
            };
            pass.steps.push(RecoveryStep {
                machine: machine.id.clone(),
                scope: machine.scope,
                action,
            });
        }
        Ok(pass)
    }

    /// §7.3 step 5 over every restored open operation whose scope is not released:
    /// each is classified by [`Executor::classify_restored`], in the store's order,
    /// and the outcomes of those it classified (or found unreachable) are returned.
    /// An operation on a released scope is left for a start to resume: this never
    /// resumes, retries or sends. Outside recovery mode there is nothing to classify.
    ///
    /// A start in recovery mode calls it once; the service's controller calls it
    /// every interval in recovery mode, since the step 1 decision that lets an
    /// operation be classified is recovery-admin's, made while the service runs.
    ///
    /// # Errors
    ///
    /// A store failure.
    pub async fn classify_restored_operations(&self) -> Result<Vec<Outcome>, ExecutorError> {
        let mut outcomes = Vec::new();
        if !self.in_recovery().await? {
            return Ok(outcomes);
        }
        for view in self.store.open_operations().await? {
            let scope = self.store.machine(&view.machine).await?.scope;
            if scope != ScopeState::Released {
                outcomes.extend(self.classify_restored(&view, scope).await?);
            }
        }
        Ok(outcomes)
    }

    /// §7.3 step 5 in recovery mode, for one operation on a scope not
    /// released: a restored operation with an attempt, on a scope the step 1
    /// decision has accounted and with every attempt accounted (by its response or
    /// by that decision), is taken over (§3.4) and classified under §5.1 from a
    /// completion observation taken now — completed or failed, or left unresolved
    /// for a later pass when the evidence decides neither (a health check still
    /// converging, say). Nothing is sent: a restored operation never retries, its
    /// approval being from another epoch, and is never classified rejected (the
    /// store's classification holds both). `None` when the operation waits: its
    /// scope is still pre-restore unaccounted, it has no attempt (the step 1
    /// decision ends it cancelled), an attempt is still unaccounted, or another
    /// instance took it over first.
    ///
    /// # Errors
    ///
    /// A store failure; an unreachable machine leaves the operation as it is.
    pub async fn classify_restored(
        &self,
        view: &OperationView,
        scope: ScopeState,
    ) -> Result<Option<Outcome>, ExecutorError> {
        if scope == ScopeState::PreRestoreUnaccounted
            || view.state != OperationState::Unresolved
            || view.attempts == 0
            || !self.all_accounted(view).await?
        {
            return Ok(None);
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
                Err(StoreError::Refused { .. }) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        };
        let plan = self.store.plan(&view.plan).await?;
        let mut out = Outcome::new(&plan, &view.id);
        out.state = view.state;
        let clients = match self.connect(&view.machine).await {
            Ok(clients) => clients,
            Err(ExecutorError::Store(e)) => return Err(e.into()),
            Err(_) => return Ok(Some(out)),
        };
        self.completion_observation(&plan, &clients).await?;
        out.classification = Some(self.store.classify(&view.id, token).await?);
        out.state = self.store.operation(&view.id).await?.state;
        Ok(Some(out))
    }

    /// Whether an operation that is not terminal holds the machine's scope.
    async fn operation_holds(&self, machine: &MachineView) -> Result<bool, ExecutorError> {
        Ok(self
            .store
            .operations_of(&machine.id)
            .await?
            .iter()
            .any(|o| !o.state.is_terminal()))
    }

    /// A recovery observation of a pre-restore unaccounted scope, when due.
    async fn recovery_read(&self, machine: &MachineView) -> Result<RecoveryAction, ExecutorError> {
        let due = self.recovery_due_after_entry(&machine.id).await?;
        if self.store.now().await? < due {
            return Ok(RecoveryAction::NotDue { due });
        }
        Ok(
            match self
                .observe_unplanned(&machine.id, ObservationPurpose::Recovery)
                .await?
            {
                Ok((basis, _)) => RecoveryAction::RecoveryObserved { basis },
                Err(reason) => RecoveryAction::Unreachable { reason },
            },
        )
    }

    async fn restoration_read(
        &self,
        machine: &MachineView,
    ) -> Result<RecoveryAction, ExecutorError> {
        Ok(
            match self
                .observe_unplanned(&machine.id, ObservationPurpose::Restoration)
                .await?
            {
                Ok((basis, _)) => RecoveryAction::RestorationObserved { basis },
                Err(reason) => RecoveryAction::Unreachable { reason },
            },
        )
    }

    /// §7.3 step 1's pacing: the first read after the entry plus the maximum
    /// transport deadline, then one per settle floor after the last recorded one.
    async fn recovery_due_after_entry(&self, machine: &str) -> Result<InstantMs, ExecutorError> {
        let entry = self
            .store
            .timeline(machine)
            .await?
            .into_iter()
            .rev()
            .find(|e| e.kind == "recovery_entry")
            .map_or((Revision(0), InstantMs(0)), |e| (e.revision, e.at));
        let last = self
            .store
            .observations(machine)
            .await?
            .into_iter()
            .filter(|o| o.purpose == ObservationPurpose::Recovery && o.basis > entry.0)
            .filter_map(|o| o.recorded_at)
            .max();
        Ok(match last {
            None => entry.1.plus(self.settings().max_transport_deadline),
            Some(at) => at.plus(self.settings().settle_floor),
        })
    }

    /// Whether a restoration observation was recorded after the scope's step 1
    /// decision (its latest "accounting" entry).
    async fn restoration_recorded_since_decision(
        &self,
        machine: &MachineView,
    ) -> Result<bool, ExecutorError> {
        let decided = self
            .store
            .timeline(&machine.id)
            .await?
            .into_iter()
            .rev()
            .find(|e| e.kind == "accounting" || e.kind == "recovery_entry")
            .map_or(Revision(0), |e| e.revision);
        Ok(self.store.observations(&machine.id).await?.iter().any(|o| {
            o.purpose == ObservationPurpose::Restoration
                && o.basis > decided
                && o.recorded_at.is_some()
        }))
    }
}
