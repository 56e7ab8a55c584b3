//! Approvals (§2, §3.2 comparison 1, §6.4): approving a plan, with its self-approval
//! mark (choice §10.4) and a revert's unseenOverwrite mark (choice §10.16); renewing
//! an approval from another epoch; revoking one. [`Withdrawal`] withdraws approvals
//! in bulk, for a revoked identity or blanket approval.

use crate::contract::Role;
use crate::contract::epoch::Epoch;
use crate::contract::plan::{self, PlanEvent, PlanState, SelfApproval};
use crate::store::common::*;
use crate::store::engine::SqlStore;
use crate::store::lookups::{
    installation, lock_machine, read_plan, require_role, set_plan_state, standing_approval,
    unreleased,
};
use crate::store::sql::{Row, Tx, query};
use crate::store::transaction::{Entry, R, append};
use crate::store::{Actor, StoreResult};

impl SqlStore {
    /// [`Store::approve`](crate::store::Store::approve): approve a plan (or renew an approval
    /// from another epoch); returns the self-approval mark recorded with it.
    pub(in crate::store) async fn approve(
        &self,
        actor: &Actor,
        plan_id: &str,
    ) -> StoreResult<SelfApproval> {
        const ACT: &str = "approving";
        self.transaction(|tx| {
            Box::pin(async move {
                let machine_id = read_plan(tx, plan_id).await?.machine_id;
                let machine = lock_machine(tx, &machine_id).await?;
                let inst = installation(tx, true).await?;
                let human = require_role(tx, actor, &[Role::Approver], ACT).await?;
                if !human {
                    return Err(refused(ACT, "automation is never an approver").into());
                }
                let approval = Approving {
                    plan: plan_id,
                    approver: &actor.id,
                    blanket: None,
                };
                self.record_approval(tx, actor, &machine, &inst, approval, ACT)
                    .await
            })
        })
        .await
    }
}

/// An approval about to be recorded: by an approver's own act, or under a blanket.
pub(in crate::store) struct Approving<'a> {
    pub(in crate::store) plan: &'a str,
    pub(in crate::store) approver: &'a str,
    pub(in crate::store) blanket: Option<&'a str>,
}

impl SqlStore {
    /// The common part of [`Store::approve`](crate::store::Store::approve) and
    pub(in crate::store) async fn record_approval(
        &self,
        tx: &mut Tx,
        actor: &Actor,
        machine: &MachineRow,
        inst: &InstallationRow,
        approving: Approving<'_>,
        act: &'static str,
    ) -> R<SelfApproval> {
        let plan_id = approving.plan;
        if unreleased(machine, inst)? {
            return Err(refused(act, "recovery mode: the scope is not released").into());
        }
        let plan = read_plan(tx, plan_id).await?;
        let state = plan_state_of(&plan.state)?;
        let event = match (state, standing_approval(tx, plan_id).await?) {
            (PlanState::Approved, Some(a)) => PlanEvent::Reapprove {
                standing: a.epoch,
                current: inst.epoch,
            },
            _ => PlanEvent::Approve,
        };
        let next = plan::transition(state, event).map_err(|e| refused(act, e.to_string()))?;
        let mark = self_approval_mark(tx, &plan, approving.approver).await?;
        if inst.approval_policy.needs_second_person() && mark != SelfApproval::NotSelfApproval {
            return Err(refused(
                act,
                format!(
                    "this installation's approvals need a second person, and {} may not \
                     approve plan {plan_id}: {mark}",
                    approving.approver
                ),
            )
            .into());
        }
        let now = self.store_time(tx).await?;
        let under = approving
            .blanket
            .map(|b| {
                format!(
                    "under the standing grant of {} (blanket approval {b}), not a review of \
                     this plan; ",
                    approving.approver
                )
            })
            .unwrap_or_default();
        // Under a blanket the approval rests on its approver's standing grant: the entry
        // is the asker's act under that grant, never recorded as the approver's own
        // review of the plan (comparison 1 reads the approval row, which names the
        // approver and the blanket).
        let entry = match approving.blanket {
            Some(_) => Entry::by(actor, "approval_under_grant"),
            None => Entry::by(actor, "approval"),
        };
        // §6.4, choice §10.16: a revert's approval says it overwrites what nobody saw.
        let unseen = plan
            .bound_drift
            .filter(|_| plan.operation_kind == "apply_config")
            .map(|r| {
                format!(
                    "unseenOverwrite: overwrites the configuration of drift record r{r}, which \
                     no reviewer has seen; "
                )
            })
            .unwrap_or_default();
        let rev = append(
            tx,
            &machine.id,
            now,
            entry.plan(plan_id).detail(format!(
                "{under}{unseen}{}; epoch {}",
                self_approval_name(mark),
                inst.epoch
            )),
        )
        .await?;
        insert_approval(tx, &approving, inst.epoch, mark, rev).await?;
        set_plan_state(tx, plan_id, next).await?;
        Ok(mark)
    }
}

impl SqlStore {
    /// [`Store::revoke_approval`](crate::store::Store::revoke_approval): revoke a plan's
    /// approval; locks the machine row, then the approval.
    pub(in crate::store) async fn revoke_approval(
        &self,
        actor: &Actor,
        plan_id: &str,
    ) -> StoreResult<()> {
        const ACT: &str = "revoking an approval";
        self.transaction(|tx| {
            Box::pin(async move {
                let machine_id = read_plan(tx, plan_id).await?.machine_id;
                // The machine row first, then the approval (the order of §3.2's locks).
                lock_machine(tx, &machine_id).await?;
                require_role(tx, actor, &[Role::Approver, Role::RecoveryAdmin], ACT).await?;
                let row = query(
                    "SELECT seq, revoked FROM approvals WHERE plan_id = $1 \
                     ORDER BY seq DESC LIMIT 1 FOR UPDATE",
                )
                .bind(plan_id)
                .fetch_optional(tx)
                .await?
                .ok_or_else(|| refused(ACT, "the plan has no approval"))?;
                if row.try_get::<bool, _>("revoked")? {
                    return Err(refused(ACT, "the approval is already revoked").into());
                }
                let seq: i64 = row.try_get("seq")?;
                query("UPDATE approvals SET revoked = TRUE WHERE plan_id = $1 AND seq = $2")
                    .bind(plan_id)
                    .bind(seq)
                    .execute(tx)
                    .await?;
                let plan = read_plan(tx, plan_id).await?;
                let state = plan_state_of(&plan.state)?;
                let detail = match plan::transition(state, PlanEvent::RevokeApproval) {
                    Ok(next) => {
                        set_plan_state(tx, plan_id, next).await?;
                        format!("plan {state} -> {next}")
                    }
                    Err(e) => e.to_string(),
                };
                let now = self.store_time(tx).await?;
                append(
                    tx,
                    &machine_id,
                    now,
                    Entry::by(actor, "approval_revoked")
                        .plan(plan_id)
                        .detail(detail),
                )
                .await?;
                Ok(())
            })
        })
        .await
    }
}

/// The self-approval mark of `approver` approving `plan` (§2, choice §10.4): from who
/// created the plan and who contributed to its release, each a person or a token
/// with the person responsible for it.
async fn self_approval_mark(tx: &mut Tx, plan: &PlanRow, approver: &str) -> R<SelfApproval> {
    let creator_kind = query("SELECT kind, responsible FROM principals WHERE id = $1")
        .bind(&plan.creator_id)
        .fetch_optional(tx)
        .await?
        .map(|r| -> R<(String, Option<String>)> {
            Ok((r.try_get("kind")?, r.try_get("responsible")?))
        })
        .transpose()?;
    let creator = principal_actor(creator_kind, &plan.creator_id);
    let rows = query(
        "SELECT c.principal_id, c.contribution, p.kind, p.responsible \
         FROM release_contributions c LEFT JOIN principals p ON p.id = c.principal_id \
         WHERE c.release_id = $1 ORDER BY c.principal_id, c.contribution",
    )
    .bind(&plan.release_id)
    .fetch_all(tx)
    .await?;
    let mut release = Vec::new();
    for r in &rows {
        let id: String = r.try_get("principal_id")?;
        let kind: Option<String> = r.try_get("kind")?;
        let responsible: Option<String> = r.try_get("responsible")?;
        let contribution: String = r.try_get("contribution")?;
        release.push(plan::ReleaseContribution {
            actor: principal_actor(kind.map(|k| (k, responsible)), &id),
            contribution: if contribution == "authored" {
                plan::Contribution::Authored
            } else {
                plan::Contribution::Published
            },
        });
    }
    let approver = plan::PrincipalId(approver.to_owned());
    Ok(plan::mark_self_approval(plan::SelfApprovalInput {
        approver: &approver,
        plan_creator: &creator,
        release: &release,
    }))
}

/// Principal `id` as the self-approval rule sees it, from its recorded kind and
/// responsible person; a principal with no record is a token nobody is responsible
/// for.
fn principal_actor(kind: Option<(String, Option<String>)>, id: &str) -> plan::Actor {
    match kind {
        Some((k, _)) if k == "human" => plan::Actor::Human(plan::PrincipalId(id.to_owned())),
        Some((_, responsible)) => plan::Actor::Token {
            token: plan::PrincipalId(id.to_owned()),
            responsible: responsible.map(plan::PrincipalId),
        },
        None => plan::Actor::Token {
            token: plan::PrincipalId(id.to_owned()),
            responsible: None,
        },
    }
}

/// The approval row, next in the plan's sequence, with its timeline revision `rev`.
async fn insert_approval(
    tx: &mut Tx,
    approving: &Approving<'_>,
    epoch: Epoch,
    mark: SelfApproval,
    rev: i64,
) -> R<()> {
    let plan_id = approving.plan;
    let seq: i64 = query("SELECT COUNT(*) FROM approvals WHERE plan_id = $1")
        .bind(plan_id)
        .fetch_one(tx)
        .await?
        .try_get(0)?;
    // The blanket's column is written only when there is one, so a database not
    // yet migrated to it takes every other approval.
    let sql = if approving.blanket.is_some() {
        "INSERT INTO approvals (plan_id, seq, approver_id, role, epoch, self_approval, \
         revision, blanket_id) VALUES ($1, $2, $3, 'approver', $4, $5, $6, $7)"
    } else {
        "INSERT INTO approvals (plan_id, seq, approver_id, role, epoch, self_approval, \
         revision) VALUES ($1, $2, $3, 'approver', $4, $5, $6)"
    };
    let mut insert = query(sql)
        .bind(plan_id)
        .bind(seq + 1)
        .bind(approving.approver)
        .bind(epoch.to_bytes().to_vec())
        .bind(self_approval_name(mark))
        .bind(rev);
    if let Some(b) = approving.blanket {
        insert = insert.bind(b);
    }
    insert.execute(tx).await?;
    Ok(())
}

/// An approval withdrawn from plans in bulk (an identity or a blanket approval
/// revoked): the plan event, and the timeline entry that says why.
pub(in crate::store) struct Withdrawal<'a> {
    pub(in crate::store) actor: &'a Actor,
    pub(in crate::store) kind: &'static str,
    pub(in crate::store) event: PlanEvent,
    pub(in crate::store) why: String,
    pub(in crate::store) now: i64,
}

impl Withdrawal<'_> {
    /// Applies the withdrawal to the plan of row `r` (columns `plan_id`,
    /// `machine_id`, `state`), locking its machine row first unless `machines`
    /// says this transaction holds it.
    pub(in crate::store) async fn record(
        &self,
        tx: &mut Tx,
        machines: &mut Vec<String>,
        r: &Row,
    ) -> R<()> {
        let plan_id: String = r.try_get("plan_id")?;
        let machine_id: String = r.try_get("machine_id")?;
        if !machines.contains(&machine_id) {
            lock_machine(tx, &machine_id).await?;
            machines.push(machine_id.clone());
        }
        let state = plan_state_of(&r.try_get::<String, _>("state")?)?;
        let detail = match plan::transition(state, self.event) {
            Ok(next) => {
                set_plan_state(tx, &plan_id, next).await?;
                format!("{}; plan {state} -> {next}", self.why)
            }
            Err(e) => format!("{}; {e}", self.why),
        };
        append(
            tx,
            &machine_id,
            self.now,
            Entry::by(self.actor, self.kind)
                .plan(&plan_id)
                .detail(detail),
        )
        .await?;
        Ok(())
    }
}
