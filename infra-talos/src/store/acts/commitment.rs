//! The commitment transaction (§3.2): comparisons 0–6 under the machine row's lock,
//! then the plan's one operation. A refused commitment rolls back, and a second
//! transaction records the refusal, naming the comparison (choice §10.30); an
//! unexpected digest in the evidence then runs the drift rules (§6.1).
//!
//! Comparison 3's judgement ([`judge_evidence`]) is shared with the attempt transaction.
//!
//! Statements, in the contract's lock order: one takes the machine row's lock and then
//! reads the installation to share (on SQLite two), one reads the standing approval to
//! share and every other row comparisons 0–6 compare ([`guards`]); on PostgreSQL one
//! more writes the entry, the operation and the plan's move.

use std::sync::{Mutex, PoisonError};

use crate::contract::comparison::Comparison;
use crate::contract::drift;
use crate::contract::gate::{self, Mutation};
use crate::contract::operation::{
    self, ControllerId, Creation, OperationKind, OperationState, OwnerToken, TransitionFacts,
};
use crate::contract::plan::{self, PlanEvent, PlanState, Stage};
use crate::store::acts::observations::drift_rules;
use crate::store::common::*;
use crate::store::engine::SqlStore;
use crate::store::lookups::{
    Guards, LockedVia, Via, authority_now, guards, lock_machine, lock_machine_via, read_plan,
    set_plan_state,
};
use crate::store::sql::{Tx, query};
use crate::store::transaction::{Entry, Fail, R, append, appending, bind_entry};
use crate::store::{Committed, HookPoint, StoreError, StoreResult};

impl SqlStore {
    /// [`Store::commit`](crate::store::Store::commit): the §3.2 commitment transaction,
    /// comparisons 0–6.
    pub(in crate::store) async fn commit(
        &self,
        plan_id: &str,
        controller: ControllerId,
    ) -> StoreResult<Committed> {
        // The body may run more than once (a retry); the digest it saw is kept here.
        let digest_seen = Mutex::new(None);
        let seen = &digest_seen;
        let result = self
            .transaction(|tx| {
                Box::pin(async move { self.commitment(tx, plan_id, controller, seen).await })
            })
            .await;
        match result {
            Err(refusal @ StoreError::CommitmentRefused { .. }) => {
                let digest_seen = digest_seen
                    .into_inner()
                    .unwrap_or_else(PoisonError::into_inner);
                self.record_commitment_refusal(plan_id, controller, &refusal, digest_seen)
                    .await?;
                Err(refusal)
            }
            other => other,
        }
    }

    /// The commitment transaction body (§3.2): the machine row's lock and the
    /// installation read to share; then, in one statement, the plan, its standing
    /// approval read to share and the other rows comparisons 0–6 compare
    /// ([`guards`]); then the comparisons and the operation.
    async fn commitment(
        &self,
        tx: &mut Tx,
        plan_id: &str,
        controller: ControllerId,
        digest_seen: &Mutex<Option<(i64, String)>>,
    ) -> R<Committed> {
        let LockedVia {
            machine,
            named: operation_kind,
            inst,
        } = lock_machine_via(tx, Via::Plan, plan_id).await?;
        if operation_kind == "adopt" {
            let reason = "an adopt plan is recorded by the adoption record (§6.3), never committed";
            return Err(refused("committing", reason).into());
        }
        self.hook(HookPoint::CommitmentLocked {
            plan: plan_id.to_owned(),
            controller,
        })
        .await;
        let guards = guards(tx, plan_id, controller).await?.evidence_after(0);
        let now = self.time_from(guards.db_now);
        let rows = Compared {
            machine,
            inst,
            guards,
        };
        self.commitment_comparisons(&rows, now, digest_seen)?;
        self.hook(HookPoint::CommitmentChecked {
            plan: plan_id.to_owned(),
            controller,
        })
        .await;
        insert_operation(tx, &rows, controller, now).await
    }

    /// Comparisons 0–6 over the rows read under lock, and the §4 table's creation
    /// row; the first that fails refuses (missing evidence decides nothing, choice
    /// §10.28).
    fn commitment_comparisons(
        &self,
        rows: &Compared,
        now: i64,
        digest_seen: &Mutex<Option<(i64, String)>>,
    ) -> R<()> {
        let guards = self.settings.guards;
        let Compared {
            machine,
            inst,
            guards: read,
        } = rows;
        let approval = &read.approval;
        let plan = &read.plan;
        // 0: the plan has no operation.
        if read.operation.is_some() || plan.state == PlanState::Committed.name() {
            return Err(commitment_refused(
                Comparison::PlanHasNoOperation,
                "the plan already has its operation",
            ));
        }
        // 1: authority.
        if guards.approval_in_transaction {
            authority_now(plan, approval.as_ref(), now, inst.epoch, Stage::Commitment)
                .map_err(|e| commitment_refused(Comparison::Authority, e.to_string()))?;
        }
        // 2: bindings, Desired included.
        if let Some(reason) = bindings_refusal(
            plan,
            machine,
            read.artifact.as_ref().map(|(d, v)| (d.as_str(), *v)),
            true,
        ) {
            return Err(commitment_refused(Comparison::Bindings, reason));
        }
        // 3: evidence.
        let judged = Judged {
            plan,
            retry: false,
            now,
        };
        if let Some(refusal) = judge_evidence(judged, read) {
            if refusal.missing {
                return Err(Fail::Store(StoreError::EvidenceMissing {
                    reason: refusal.reason,
                }));
            }
            *digest_seen.lock().unwrap_or_else(PoisonError::into_inner) = refusal.digest;
            return Err(commitment_refused(Comparison::Evidence, refusal.reason));
        }
        // 4: machine scope.
        if guards.scope_index
            && let Some(op) = &read.machine_holder
        {
            return Err(commitment_refused(
                Comparison::MachineScope,
                format!("operation {op} holds the machine scope"),
            ));
        }
        // 5: rollout slot (limit one).
        if guards.scope_index
            && let Some(op) = &read.slot_holder
        {
            return Err(commitment_refused(
                Comparison::RolloutSlot,
                format!("operation {op} holds the rollout scope's only slot"),
            ));
        }
        // 6: gate.
        gate::check_gate(Mutation::Commitment, &gate_facts(machine, plan, inst)?)
            .map_err(|e| commitment_refused(Comparison::Gate, e.to_string()))?;
        let facts = TransitionFacts {
            creation: Some(Creation::Commitment),
            ..TransitionFacts::quiet(OperationKind::ApplyConfig, &[])
        };
        operation::check_transition(None, OperationState::Committed, &facts)
            .map_err(|e| commitment_refused(Comparison::PlanHasNoOperation, e.to_string()))
    }

    /// Record a commitment refusal in its own transaction.
    async fn record_commitment_refusal(
        &self,
        plan_id: &str,
        controller: ControllerId,
        refusal: &StoreError,
        digest_seen: Option<(i64, String)>,
    ) -> StoreResult<()> {
        let comparison = refusal
            .comparison()
            .unwrap_or(Comparison::PlanHasNoOperation);
        let reason = match refusal {
            StoreError::CommitmentRefused { reason, .. } => reason.clone(),
            other => other.to_string(),
        };
        let (reason, digest_seen) = (&reason, &digest_seen);
        self.transaction(|tx| {
            Box::pin(async move {
                let plan = read_plan(tx, plan_id).await?;
                let machine = lock_machine(tx, &plan.machine_id).await?;
                let now = self.store_time(tx).await?;
                append(
                    tx,
                    &plan.machine_id,
                    now,
                    Entry::controller(controller, "commitment_refused")
                        .plan(plan_id)
                        .comparison(comparison)
                        .detail(reason.clone()),
                )
                .await?;
                // An expired plan moves to expired.
                if comparison == Comparison::Authority && now >= plan.expires_at_ms {
                    let state = plan_state_of(&plan.state)?;
                    if let Ok(next) = plan::transition(state, PlanEvent::Expire) {
                        set_plan_state(tx, plan_id, next).await?;
                    }
                }
                if let Some((basis, digest)) = &digest_seen {
                    drift_rules(
                        tx,
                        &machine,
                        *basis,
                        digest,
                        now,
                        Entry::controller(controller, "drift").plan(plan_id),
                        drift::DriftSource::RefusedCommitmentEvidence,
                    )
                    .await?;
                }
                Ok(())
            })
        })
        .await
    }
}

/// The rows a commitment compares, read under the machine row's lock.
struct Compared {
    machine: MachineRow,
    inst: InstallationRow,
    guards: Guards,
}

/// The plan's one operation, committed by `controller` at generation 1 in the present
/// epoch: its entry, its row (where the unique indexes make comparisons 0, 4 and 5
/// once more), and the plan's move to committed — on PostgreSQL in one statement.
async fn insert_operation(
    tx: &mut Tx,
    rows: &Compared,
    controller: ControllerId,
    now: i64,
) -> R<Committed> {
    let Compared {
        machine,
        inst,
        guards: Guards { plan, .. },
        ..
    } = rows;
    let owner = OwnerToken::at_commitment(controller, inst.epoch);
    let op_id = hex16(crate::store::random_128()?);
    let entry = Entry::token(&owner, "commitment")
        .plan(&plan.id)
        .op(&op_id)
        .detail(format!("operation {op_id} committed, generation 1"));
    let inserted = if tx.dialect().writes_in_one_statement() {
        let statement = query(appending!(
            ", operation AS (INSERT INTO operations (id, plan_id, machine_id, rollout_scope, \
             state, owner_controller, owner_generation, owner_epoch, commit_revision) \
             SELECT $7, $6, $1, $10, 'committed', $11, 1, $12, revision FROM rev), \
             committed AS (UPDATE plans SET state = 'committed' WHERE id = $6) \
             SELECT revision FROM rev"
        ));
        bind_entry(statement, &machine.id, now, entry)
            .bind(&plan.rollout_scope)
            .bind(controller_bytes(controller))
            .bind(inst.epoch.to_bytes().to_vec())
            .execute(tx)
            .await
            .map(|_| ())
    } else {
        let rev = append(tx, &machine.id, now, entry).await?;
        query(
            "INSERT INTO operations (id, plan_id, machine_id, rollout_scope, state, \
             owner_controller, owner_generation, owner_epoch, commit_revision) \
             VALUES ($1, $2, $3, $4, 'committed', $5, 1, $6, $7)",
        )
        .bind(&op_id)
        .bind(&plan.id)
        .bind(&machine.id)
        .bind(&plan.rollout_scope)
        .bind(controller_bytes(controller))
        .bind(inst.epoch.to_bytes().to_vec())
        .bind(rev)
        .execute(tx)
        .await
        .map(|_| ())
    };
    if let Err(e) = inserted {
        return Err(match tx.dialect().unique_comparison(&e) {
            Some(c) => commitment_refused(c, format!("the unique index refused: {e}")),
            None => Fail::Db(e),
        });
    }
    if !tx.dialect().writes_in_one_statement() {
        set_plan_state(tx, &plan.id, PlanState::Committed).await?;
    }
    Ok(Committed {
        operation: op_id,
        owner,
    })
}

fn commitment_refused(comparison: Comparison, reason: impl Into<String>) -> Fail {
    Fail::Store(StoreError::CommitmentRefused {
        comparison,
        reason: reason.into(),
    })
}

/// How comparison 3 judges: for `plan`, at store time `now`, as a retry or not.
pub(in crate::store) struct Judged<'a> {
    pub(in crate::store) plan: &'a PlanRow,
    pub(in crate::store) retry: bool,
    pub(in crate::store) now: i64,
}

/// Comparison 3 for a commitment or an attempt: judges the evidence, the recorded
/// observations newer than it and the controller's latest use-time check, read under
/// the machine row's lock the caller holds ([`guards`]), with `evidence_refusal`.
pub(in crate::store) fn judge_evidence(
    judged: Judged<'_>,
    read: &Guards,
) -> Option<EvidenceRefusal> {
    evidence_refusal(
        judged.plan,
        read.evidence.as_ref(),
        &read.newer,
        read.check.as_ref(),
        judged.now,
        judged.retry,
        read.approval.as_ref().map(|a| a.revision),
    )
}
