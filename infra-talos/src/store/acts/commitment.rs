//! The commitment transaction (§3.2): comparisons 0–6 under the machine row's lock,
//! then the plan's one operation. A refused commitment rolls back, and a second
//! transaction records the refusal, naming the comparison (choice §10.30); an
//! unexpected digest in the evidence then runs the drift rules (§6.1).
//!
//! Comparison 3's reads ([`judge_evidence`]) are shared with the attempt transaction.

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
    authority_now, holder, installation, latest_check, latest_evidence, lock_machine,
    observations_after, read_plan, set_plan_state, standing_approval, stored_artifact,
};
use crate::store::sql::{Tx, query};
use crate::store::transaction::{Entry, Fail, R, append};
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

    /// The commitment transaction body (§3.2): the rows it compares, read under the
    /// machine row's lock, then comparisons 0–6, then the operation. `digest_seen`
    /// receives the evidence's basis and digest when comparison 3 fails on the digest.
    async fn commitment(
        &self,
        tx: &mut Tx,
        plan_id: &str,
        controller: ControllerId,
        digest_seen: &Mutex<Option<(i64, String)>>,
    ) -> R<Committed> {
        let machine_id = read_plan(tx, plan_id).await?.machine_id;
        let rows = Compared {
            machine: lock_machine(tx, &machine_id).await?,
            inst: installation(tx, true).await?,
            plan: read_plan(tx, plan_id).await?,
            approval: standing_approval(tx, plan_id).await?,
        };
        if rows.plan.operation_kind == "adopt" {
            let reason = "an adopt plan is recorded by the adoption record (§6.3), never committed";
            return Err(refused("committing", reason).into());
        }
        self.hook(HookPoint::CommitmentLocked {
            plan: plan_id.to_owned(),
            controller,
        })
        .await;
        let now = self.store_time(tx).await?;
        self.commitment_comparisons(tx, &rows, controller, now, digest_seen)
            .await?;
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
    async fn commitment_comparisons(
        &self,
        tx: &mut Tx,
        rows: &Compared,
        controller: ControllerId,
        now: i64,
        digest_seen: &Mutex<Option<(i64, String)>>,
    ) -> R<()> {
        let guards = self.settings.guards;
        let Compared {
            machine,
            inst,
            plan,
            approval,
        } = rows;
        // 0: the plan has no operation.
        let existing = query("SELECT id FROM operations WHERE plan_id = $1")
            .bind(&plan.id)
            .fetch_optional(tx)
            .await?;
        if existing.is_some() || plan.state == PlanState::Committed.name() {
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
        let artifact = stored_artifact(tx, plan).await?;
        if let Some(reason) = bindings_refusal(
            plan,
            machine,
            artifact.as_ref().map(|(d, v)| (d.as_str(), *v)),
            true,
        ) {
            return Err(commitment_refused(Comparison::Bindings, reason));
        }
        // 3: evidence.
        let judged = Judged {
            plan,
            controller,
            after: 0,
            retry: false,
            now,
        };
        if let Some(refusal) = judge_evidence(tx, judged, approval.as_ref()).await? {
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
            && let Some(op) = holder(tx, true, &machine.id).await?
        {
            return Err(commitment_refused(
                Comparison::MachineScope,
                format!("operation {op} holds the machine scope"),
            ));
        }
        // 5: rollout slot (limit one).
        if guards.scope_index
            && let Some(op) = holder(tx, false, &plan.rollout_scope).await?
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
    plan: PlanRow,
    approval: Option<ApprovalRow>,
}

/// The plan's one operation, committed by `controller` at generation 1 in the present
/// epoch: its entry, its row (where the unique indexes make comparisons 0, 4 and 5
/// once more), and the plan's move to committed.
async fn insert_operation(
    tx: &mut Tx,
    rows: &Compared,
    controller: ControllerId,
    now: i64,
) -> R<Committed> {
    let Compared {
        machine,
        inst,
        plan,
        ..
    } = rows;
    let owner = OwnerToken::at_commitment(controller, inst.epoch);
    let op_id = hex16(crate::store::random_128()?);
    let rev = append(
        tx,
        &machine.id,
        now,
        Entry::token(&owner, "commitment")
            .plan(&plan.id)
            .op(&op_id)
            .detail(format!("operation {op_id} committed, generation 1")),
    )
    .await?;
    let inserted = query(
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
    .await;
    if let Err(e) = inserted {
        return Err(match tx.dialect().unique_comparison(&e) {
            Some(c) => commitment_refused(c, format!("the unique index refused: {e}")),
            None => Fail::Db(e),
        });
    }
    set_plan_state(tx, &plan.id, PlanState::Committed).await?;
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

/// Which evidence comparison 3 judges: `controller`'s newest evidence for `plan`
/// begun after revision `after` (a retry's last attempt), at store time `now`.
pub(in crate::store) struct Judged<'a> {
    pub(in crate::store) plan: &'a PlanRow,
    pub(in crate::store) controller: ControllerId,
    pub(in crate::store) after: i64,
    pub(in crate::store) retry: bool,
    pub(in crate::store) now: i64,
}

/// Comparison 3 for a commitment or an attempt: reads the evidence, every recorded
/// observation newer than it and the controller's latest use-time check, under the
/// machine row's lock the caller holds, and judges them (`evidence_refusal`).
pub(in crate::store) async fn judge_evidence(
    tx: &mut Tx,
    judged: Judged<'_>,
    approval: Option<&ApprovalRow>,
) -> R<Option<EvidenceRefusal>> {
    let plan = judged.plan;
    let evidence = latest_evidence(tx, plan, judged.controller, judged.after).await?;
    let newer = match &evidence {
        Some(ev) => observations_after(tx, &plan.machine_id, ev.basis).await?,
        None => Vec::new(),
    };
    let check = latest_check(tx, plan, judged.controller).await?;
    Ok(evidence_refusal(
        plan,
        evidence.as_ref(),
        &newer,
        check.as_ref(),
        judged.now,
        judged.retry,
        approval.map(|a| a.revision),
    ))
}
