//! A pure model of the store's scope constraints (§3.2 comparisons 0, 4 and 5;
//! §8 invariants 1, 5 and 12; choices §10.3 and §10.5).
//!
//! The store enforces these with unique indexes inside its transactions. This
//! in-memory model states the same constraints so that tests can drive random event
//! sequences through them, and the store's own tests can compare against it.

use std::collections::BTreeMap;

use super::operation::{self, OperationKind, OperationRefusal, OperationState, TransitionFacts};

/// A model operation identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OperationId(pub u64);

/// A model plan identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PlanId(pub u64);

/// A model machine identifier: one machine, one coordination scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MachineId(pub u64);

/// A model rollout scope identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RolloutScopeId(pub u64);

/// One operation in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Its plan.
    pub plan: PlanId,
    /// Its machine.
    pub machine: MachineId,
    /// Its rollout scope; `None` for an adopt operation, which takes no slot.
    pub rollout: Option<RolloutScopeId>,
    /// What it does.
    pub kind: OperationKind,
    /// Its state.
    pub state: OperationState,
}

/// Why the model refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RegistryRefusal {
    /// Comparison 0: the plan already has its operation.
    #[error("comparison 0: plan {} already has operation {} (§8 invariant 12)", .plan.0, .existing.0)]
    PlanHasOperation {
        /// The plan.
        plan: PlanId,
        /// Its operation.
        existing: OperationId,
    },
    /// Comparison 4: another operation holds the machine scope.
    #[error("comparison 4: operation {} holds the machine scope (§8 invariant 1)", .holder.0)]
    MachineScopeHeld {
        /// The holder.
        holder: OperationId,
    },
    /// Comparison 5: the rollout scope's one slot is taken.
    #[error("comparison 5: operation {} holds the rollout scope's only slot (choice §10.5)", .holder.0)]
    RolloutSlotHeld {
        /// The holder.
        holder: OperationId,
    },
    /// The identifier is taken.
    #[error("operation {} already exists", .0.0)]
    DuplicateOperation(OperationId),
    /// No such operation.
    #[error("operation {} does not exist", .0.0)]
    UnknownOperation(OperationId),
    /// The §4 table refused the move.
    #[error(transparent)]
    Transition(#[from] OperationRefusal),
}

/// Operations by identifier, with the scope constraints of §3.2.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeRegistry {
    operations: BTreeMap<OperationId, Entry>,
}

impl ScopeRegistry {
    /// An empty model.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The operation, if it exists.
    #[must_use]
    pub fn get(&self, id: OperationId) -> Option<&Entry> {
        self.operations.get(&id)
    }

    /// Every operation, by identifier.
    pub fn iter(&self) -> impl Iterator<Item = (OperationId, &Entry)> {
        self.operations.iter().map(|(id, e)| (*id, e))
    }

    /// The plan's operation, if it has one.
    #[must_use]
    pub fn operation_of_plan(&self, plan: PlanId) -> Option<OperationId> {
        self.iter().find(|(_, e)| e.plan == plan).map(|(id, _)| id)
    }

    /// The operation holding the machine's scope, if any.
    #[must_use]
    pub fn scope_holder(&self, machine: MachineId) -> Option<OperationId> {
        self.iter()
            .find(|(_, e)| e.machine == machine && e.state.holds_machine_scope())
            .map(|(id, _)| id)
    }

    /// The operation holding the rollout scope's slot, if any.
    #[must_use]
    pub fn slot_holder(&self, rollout: RolloutScopeId) -> Option<OperationId> {
        self.iter()
            .find(|(_, e)| e.rollout == Some(rollout) && e.state.holds_rollout_slot())
            .map(|(id, _)| id)
    }

    fn admit(&self, id: OperationId, plan: PlanId) -> Result<(), RegistryRefusal> {
        if self.operations.contains_key(&id) {
            return Err(RegistryRefusal::DuplicateOperation(id));
        }
        if let Some(existing) = self.operation_of_plan(plan) {
            return Err(RegistryRefusal::PlanHasOperation { plan, existing });
        }
        Ok(())
    }

    /// The commitment transaction's comparisons 0, 4 and 5, then the new operation
    /// in committed.
    ///
    /// # Errors
    ///
    /// [`RegistryRefusal`] for the first comparison that fails.
    pub fn commit(
        &mut self,
        id: OperationId,
        plan: PlanId,
        machine: MachineId,
        rollout: RolloutScopeId,
    ) -> Result<(), RegistryRefusal> {
        self.admit(id, plan)?;
        if let Some(holder) = self.scope_holder(machine) {
            return Err(RegistryRefusal::MachineScopeHeld { holder });
        }
        if let Some(holder) = self.slot_holder(rollout) {
            return Err(RegistryRefusal::RolloutSlotHeld { holder });
        }
        self.operations.insert(
            id,
            Entry {
                plan,
                machine,
                rollout: Some(rollout),
                kind: OperationKind::ApplyConfig,
                state: OperationState::Committed,
            },
        );
        Ok(())
    }

    /// The adoption record (§6.3): no operation for the plan, none holding the
    /// machine scope; the adopt operation is created completed and takes no slot.
    ///
    /// # Errors
    ///
    /// [`RegistryRefusal`] for the first requirement that fails.
    pub fn record_adoption(
        &mut self,
        id: OperationId,
        plan: PlanId,
        machine: MachineId,
    ) -> Result<(), RegistryRefusal> {
        self.admit(id, plan)?;
        if let Some(holder) = self.scope_holder(machine) {
            return Err(RegistryRefusal::MachineScopeHeld { holder });
        }
        self.operations.insert(
            id,
            Entry {
                plan,
                machine,
                rollout: None,
                kind: OperationKind::Adopt,
                state: OperationState::Completed,
            },
        );
        Ok(())
    }

    /// Move an operation as the §4 table allows on `facts` (whose `kind` is taken
    /// from the model, not from the caller).
    ///
    /// # Errors
    ///
    /// [`RegistryRefusal::UnknownOperation`], or the table's refusal.
    pub fn apply(
        &mut self,
        id: OperationId,
        to: OperationState,
        facts: &TransitionFacts<'_>,
    ) -> Result<OperationState, RegistryRefusal> {
        let entry = self
            .operations
            .get_mut(&id)
            .ok_or(RegistryRefusal::UnknownOperation(id))?;
        let facts = TransitionFacts {
            kind: entry.kind,
            ..*facts
        };
        operation::check_transition(Some(entry.state), to, &facts)?;
        entry.state = to;
        Ok(to)
    }
}
