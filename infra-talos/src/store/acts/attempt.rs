//! The attempt transaction (§3.3): comparisons 1, 2, 3 and 6 again, then 7–9 inside
//! the one update that records the attempt, so that no request is sent without a
//! recorded attempt (§8 invariant 2). A refused attempt rolls back, and a second
//! transaction records the refusal and settles the operation (§4, choice §10.30).
//!
//! Statements, in the contract's lock order: one takes the machine row's lock and then
//! reads the installation to share (on SQLite two), one reads the operation with its
//! last attempt's revision, the standing approval to share and every other row
//! comparisons 1, 2, 3 and 6 compare ([`guards`]); on PostgreSQL one more writes the
//! entry, the admitting update and the attempt's row.

use crate::attempt::CommittedAttempt;
use crate::contract::Revision;
use crate::contract::comparison::Comparison;
use crate::contract::gate::{self, Mutation};
use crate::contract::operation::{
    self, AdmissionFacts, AttemptTransaction, OperationKind, OperationState, OwnerToken,
    RetryBasis, TransitionFacts,
};
use crate::contract::plan::Stage;
use crate::store::acts::commitment::{Judged, judge_evidence};
use crate::store::common::*;
use crate::store::engine::SqlStore;
use crate::store::lookups::{
    Guards, LockedVia, Via, authority_now, guards, installation, lock_machine, lock_machine_via,
    read_attempts, read_op, read_plan, set_op_state, standing_approval,
};
use crate::store::rows::records;
use crate::store::sql::{Tx, query};
use crate::store::transaction::{Entry, Fail, R, append, appending, bind_entry};
use crate::store::{HookPoint, StoreError, StoreResult};

impl SqlStore {
    /// [`Store::attempt`](crate::store::Store::attempt): a §3.3 attempt transaction:
    /// comparisons 1, 2, 3, 6, then 7–9 inside the update that records the attempt.
    pub(in crate::store) async fn attempt(
        &self,
        operation: &str,
        token: OwnerToken,
    ) -> StoreResult<CommittedAttempt> {
        let result = self
            .transaction(|tx| Box::pin(async move { self.attempt_tx(tx, operation, token).await }))
            .await;
        match result {
            Err(StoreError::AttemptRefused { comparison, reason }) => {
                self.record_attempt_refusal(operation, token, comparison, &reason)
                    .await?;
                Err(StoreError::AttemptRefused { comparison, reason })
            }
            other => other,
        }
    }

    /// The attempt transaction body (§3.3): the machine row's lock and the
    /// installation read to share; then in one statement the operation, the plan, its
    /// standing approval read to share and the other rows comparisons 1, 2, 3 and 6
    /// compare ([`guards`]); comparisons 1, 2, 3 and 6; then the attempt entry and the
    /// one update that makes comparisons 7–9 and records the attempt.
    async fn attempt_tx(&self, tx: &mut Tx, op_id: &str, token: OwnerToken) -> R<CommittedAttempt> {
        let LockedVia {
            machine,
            named: plan_id,
            inst,
        } = lock_machine_via(tx, Via::Operation, op_id).await?;
        self.hook(HookPoint::AttemptLocked {
            operation: op_id.to_owned(),
        })
        .await;
        let mut guards = guards(tx, &plan_id, token.controller).await?;
        // The plan's one operation is the one this attempt was asked for (the lock
        // found the plan through it).
        let op = guards
            .operation
            .take()
            .filter(|op| op.id == op_id)
            .ok_or_else(|| not_found("operation", op_id))?;
        // Comparison 3: a retry needs evidence newer than the last attempt.
        let after = if op.state == OperationState::Unresolved {
            guards.last_attempt.unwrap_or(op.commit_revision)
        } else {
            0
        };
        let guards = guards.evidence_after(after);
        let now = self.time_from(guards.db_now);
        let rows = Compared {
            machine,
            inst,
            op,
            guards,
        };
        attempt_comparisons(&rows, now)?;
        // 7, 8, 9 inside the update that records the attempt.
        let entry = Entry::token(&token, "attempt")
            .plan(&rows.guards.plan.id)
            .op(op_id);
        let Some(attempt_no) = self.admitting_update(tx, &rows, entry, token, now).await? else {
            return Err(admission_refusal(&rows, token));
        };
        let plan = &rows.guards.plan;
        let digest = digest_of(&plan.artifact_digest)?;
        Ok(CommittedAttempt::new(
            op_id.to_owned(),
            u32::try_from(attempt_no).unwrap_or(u32::MAX),
            rows.machine.id.clone(),
            digest,
            std::time::Duration::from_millis(u(plan.transport_deadline_ms)),
        ))
    }

    /// The attempt's entry, then comparisons 7, 8 and 9 inside the update that
    /// records the attempt (§3.3), then the attempt's row: on PostgreSQL one
    /// statement. The operation moves to sending only if `token` is its owner in the
    /// present epoch and it is committed, or unresolved and classified safe to retry
    /// by that owner with nothing newer since, and attempts are left. With the
    /// ownership fence off (a test control) only the state and the budget are
    /// compared. The attempt's number is returned; none means a comparison failed
    /// (and the entry is rolled back with the transaction).
    async fn admitting_update(
        &self,
        tx: &mut Tx,
        rows: &Compared,
        entry: Entry<'_>,
        token: OwnerToken,
        now: i64,
    ) -> R<Option<i64>> {
        let fenced = self.settings.guards.ownership_fence;
        let (machine, plan) = (&rows.machine.id, &rows.guards.plan);
        let op_id = rows.op.id.as_str();
        if tx.dialect().writes_in_one_statement() {
            let sql = if fenced {
                appending!(
                    ", admitted AS (UPDATE operations SET state = 'sending', \
                     attempts = attempts + 1, retry_revision = NULL, retry_controller = NULL, \
                     retry_generation = NULL, retry_epoch = NULL \
                     WHERE id = $7 AND owner_controller = $10 AND owner_generation = $11 \
                     AND owner_epoch = $12 AND owner_epoch = $13 \
                     AND (state = 'committed' OR (state = 'unresolved' \
                     AND retry_revision IS NOT NULL AND retry_controller = $10 \
                     AND retry_generation = $11 AND retry_epoch = $12 \
                     AND (last_fact_revision IS NULL OR last_fact_revision <= retry_revision))) \
                     AND attempts < $14 RETURNING attempts), \
                     recorded AS (INSERT INTO attempts (operation_id, attempt_no, revision, \
                     owner_controller, owner_generation, owner_epoch, route, \
                     transport_deadline_ms, verification_deadline_ms) \
                     SELECT $7, attempts, revision, $10, $11, $12, $15, $16, $17 \
                     FROM admitted, rev) \
                     SELECT attempts FROM admitted"
                )
            } else {
                // The present epoch ($13) is bound for the fenced text and compared by
                // nothing here.
                appending!(
                    ", admitted AS (UPDATE operations SET state = 'sending', \
                     attempts = attempts + 1 \
                     WHERE id = $7 AND state IN ('committed', 'unresolved') AND attempts < $14 \
                     AND $13::BYTEA IS NOT NULL RETURNING attempts), \
                     recorded AS (INSERT INTO attempts (operation_id, attempt_no, revision, \
                     owner_controller, owner_generation, owner_epoch, route, \
                     transport_deadline_ms, verification_deadline_ms) \
                     SELECT $7, attempts, revision, $10, $11, $12, $15, $16, $17 \
                     FROM admitted, rev) \
                     SELECT attempts FROM admitted"
                )
            };
            let row = bind_entry(query(sql), machine, now, entry)
                .bind(controller_bytes(token.controller))
                .bind(i(token.generation))
                .bind(token.epoch.to_bytes().to_vec())
                .bind(rows.inst.epoch.to_bytes().to_vec())
                .bind(plan.max_attempts)
                .bind(&plan.route)
                .bind(now.saturating_add(plan.transport_deadline_ms))
                .bind(now.saturating_add(plan.verification_deadline_ms))
                .fetch_optional(tx)
                .await?;
            return Ok(row.map(|r| r.try_get(0)).transpose()?);
        }
        let rev = append(tx, machine, now, entry).await?;
        let updated = if fenced {
            query(
                "UPDATE operations SET state = 'sending', attempts = attempts + 1, \
                 retry_revision = NULL, retry_controller = NULL, retry_generation = NULL, \
                 retry_epoch = NULL \
                 WHERE id = $1 AND owner_controller = $2 AND owner_generation = $3 \
                 AND owner_epoch = $4 AND owner_epoch = $5 \
                 AND (state = 'committed' OR (state = 'unresolved' \
                 AND retry_revision IS NOT NULL AND retry_controller = $2 \
                 AND retry_generation = $3 AND retry_epoch = $4 \
                 AND (last_fact_revision IS NULL OR last_fact_revision <= retry_revision))) \
                 AND attempts < $6 \
                 RETURNING attempts",
            )
            .bind(op_id)
            .bind(controller_bytes(token.controller))
            .bind(i(token.generation))
            .bind(token.epoch.to_bytes().to_vec())
            .bind(rows.inst.epoch.to_bytes().to_vec())
            .bind(plan.max_attempts)
            .fetch_optional(tx)
            .await?
        } else {
            query(
                "UPDATE operations SET state = 'sending', attempts = attempts + 1 \
                 WHERE id = $1 AND state IN ('committed', 'unresolved') AND attempts < $2 \
                 RETURNING attempts",
            )
            .bind(op_id)
            .bind(plan.max_attempts)
            .fetch_optional(tx)
            .await?
        };
        let Some(row) = updated else {
            return Ok(None);
        };
        let attempt_no: i64 = row.try_get(0)?;
        insert_attempt(tx, plan, op_id, attempt_no, rev, token, now).await?;
        Ok(Some(attempt_no))
    }

    /// Record an attempt refusal in its own transaction and settle the operation as
    /// choice §10.30 says.
    async fn record_attempt_refusal(
        &self,
        op_id: &str,
        token: OwnerToken,
        comparison: Comparison,
        reason: &str,
    ) -> StoreResult<()> {
        self.transaction(|tx| {
            Box::pin(async move {
                let machine_id = read_op(tx, op_id).await?.machine_id;
                lock_machine(tx, &machine_id).await?;
                let inst = installation(tx, true).await?;
                let op = read_op(tx, op_id).await?;
                let plan = read_plan(tx, &op.plan_id).await?;
                let approval = standing_approval(tx, &plan.id).await?;
                let now = self.store_time(tx).await?;
                append(
                    tx,
                    &machine_id,
                    now,
                    Entry::token(&token, "attempt_refused")
                        .plan(&plan.id)
                        .op(op_id)
                        .comparison(comparison)
                        .detail(reason.to_owned()),
                )
                .await?;
                // 1, 2, 3 and 6, made by the owner, settle the operation; 7, 8 and 9 only
                // record the refusal.
                let by_owner = op.owner == token;
                let Some(kind) = comparison
                    .attempt()
                    .filter(|c| c.unresolves_committed() && by_owner)
                else {
                    return Ok(());
                };
                let attempts = records(&read_attempts(tx, op_id).await?);
                let mut state = op.state;
                if state == OperationState::Committed {
                    let facts = TransitionFacts {
                        attempt_transaction: AttemptTransaction::Refused {
                            comparison: kind,
                            by_owner: true,
                        },
                        ..TransitionFacts::quiet(OperationKind::ApplyConfig, &attempts)
                    };
                    if operation::check_transition(Some(state), OperationState::Unresolved, &facts)
                        .is_ok()
                    {
                        state = OperationState::Unresolved;
                        set_op_state(tx, op_id, state).await?;
                        append(
                            tx,
                            &machine_id,
                            now,
                            Entry::token(&token, "state_changed")
                                .op(op_id)
                                .detail(format!(
                                    "committed -> unresolved after comparison {comparison}"
                                )),
                        )
                        .await?;
                    }
                }
                let withdrawal =
                    authority_now(&plan, approval.as_ref(), now, inst.epoch, Stage::Attempt)
                        .err()
                        .and_then(|e| e.withdrawal());
                if state == OperationState::Unresolved && attempts.is_empty() {
                    let facts = TransitionFacts {
                        withdrawal,
                        ..TransitionFacts::quiet(OperationKind::ApplyConfig, &attempts)
                    };
                    if operation::check_transition(Some(state), OperationState::Cancelled, &facts)
                        .is_ok()
                    {
                        set_op_state(tx, op_id, OperationState::Cancelled).await?;
                        append(
                            tx,
                            &machine_id,
                            now,
                            Entry::token(&token, "state_changed")
                                .op(op_id)
                                .detail(format!(
                                    "unresolved -> cancelled: {}",
                                    withdrawal.map_or(String::new(), |w| w.to_string())
                                )),
                        )
                        .await?;
                    }
                }
                Ok(())
            })
        })
        .await
    }
}

/// The rows an attempt compares, read under the machine row's lock.
struct Compared {
    machine: MachineRow,
    inst: InstallationRow,
    op: OperationRow,
    guards: Guards,
}

/// Comparisons 1, 2 (without the Desired term), 3 and 6, as the attempt transaction
/// repeats them (§3.3).
fn attempt_comparisons(rows: &Compared, now: i64) -> R<()> {
    let Compared {
        machine,
        inst,
        op,
        guards,
    } = rows;
    let plan = &guards.plan;
    // 1
    authority_now(
        plan,
        guards.approval.as_ref(),
        now,
        inst.epoch,
        Stage::Attempt,
    )
    .map_err(|e| attempt_refused(Comparison::Authority, e.to_string()))?;
    // 2 (without the Desired term)
    if let Some(reason) = bindings_refusal(
        plan,
        machine,
        guards.artifact.as_ref().map(|(d, v)| (d.as_str(), *v)),
        false,
    ) {
        return Err(attempt_refused(Comparison::Bindings, reason));
    }
    // 3: a retry judges the evidence newer than the last attempt (read so).
    let judged = Judged {
        plan,
        retry: op.state == OperationState::Unresolved,
        now,
    };
    if let Some(refusal) = judge_evidence(judged, guards) {
        return Err(attempt_refused(Comparison::Evidence, refusal.reason));
    }
    // 6
    gate::check_gate(Mutation::Attempt, &gate_facts(machine, plan, inst)?)
        .map_err(|e| attempt_refused(Comparison::Gate, e.to_string()))
}

/// Why the admitting update matched no row: the first of comparisons 7, 8 and 9 that
/// the recorded facts fail (`operation::check_admission`), or 7 when they all pass
/// (the row moved between the read and the update).
fn admission_refusal(rows: &Compared, token: OwnerToken) -> Fail {
    let Compared {
        inst, op, guards, ..
    } = rows;
    let plan = &guards.plan;
    let facts = AdmissionFacts {
        state: op.state,
        owner: op.owner,
        presented: token,
        current_epoch: inst.epoch,
        retry: op
            .retry_revision
            .zip(op.retry_by)
            .map(|(r, by)| RetryBasis {
                classified_at: Revision(u(r)),
                classified_by: by,
                latest_fact: op.last_fact_revision.map(|l| Revision(u(l))),
            }),
        attempts_recorded: u32::try_from(op.attempts).unwrap_or(u32::MAX),
        max_attempts: u32::try_from(plan.max_attempts).unwrap_or(u32::MAX),
    };
    match operation::check_admission(&facts) {
        Err(refusal) => attempt_refused(refusal.comparison().into(), refusal.to_string()),
        Ok(()) => attempt_refused(Comparison::Ownership, "the ownership update matched no row"),
    }
}

/// The attempt's row: its number, its entry's revision, the token it is made under,
/// the bound route, and its deadlines from the store time of the transaction.
async fn insert_attempt(
    tx: &mut Tx,
    plan: &PlanRow,
    op_id: &str,
    attempt_no: i64,
    rev: i64,
    token: OwnerToken,
    now: i64,
) -> R<()> {
    query(
        "INSERT INTO attempts (operation_id, attempt_no, revision, owner_controller, \
         owner_generation, owner_epoch, route, transport_deadline_ms, \
         verification_deadline_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(op_id)
    .bind(attempt_no)
    .bind(rev)
    .bind(controller_bytes(token.controller))
    .bind(i(token.generation))
    .bind(token.epoch.to_bytes().to_vec())
    .bind(&plan.route)
    .bind(now.saturating_add(plan.transport_deadline_ms))
    .bind(now.saturating_add(plan.verification_deadline_ms))
    .execute(tx)
    .await?;
    Ok(())
}

fn attempt_refused(comparison: Comparison, reason: impl Into<String>) -> Fail {
    Fail::Store(StoreError::AttemptRefused {
        comparison,
        reason: reason.into(),
    })
}
