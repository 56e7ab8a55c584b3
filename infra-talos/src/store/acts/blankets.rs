//! Blanket approvals (§2, direct mode): an approver's recorded decision that the
//! plans for one cluster's machines are approved as they are made. Granting, revoking
//! (and with it every approval made under it), approving a plan under one, and
//! listing them. A blanket holds only in the installation epoch it is granted in.

use crate::contract::epoch::Epoch;
use crate::contract::plan::{PlanEvent, SelfApproval};
use crate::contract::{InstantMs, Role, SpanMs};
use crate::store::acts::approvals::{Approving, Withdrawal};
use crate::store::common::*;
use crate::store::engine::SqlStore;
use crate::store::lookups::{installation, lock_machine, read_plan, require_role};
use crate::store::sql::{Tx, query};
use crate::store::transaction::{Entry, R, append};
use crate::store::{Actor, BLANKET_MAX, BlanketApproval, HookPoint, StoreResult};

impl SqlStore {
    /// [`Store::grant_blanket_approval`](crate::store::Store::grant_blanket_approval): record a
    /// blanket approval for cluster `cluster_id` (an approver, a person): plans for its
    /// machines may then be approved as they are made (`Store::approve_under_blanket`).
    pub(in crate::store) async fn grant_blanket_approval(
        &self,
        actor: &Actor,
        cluster_id: &str,
        reason: &str,
        lasting: SpanMs,
    ) -> StoreResult<BlanketApproval> {
        const ACT: &str = "granting a blanket approval";
        if lasting.0 == 0 || lasting > BLANKET_MAX {
            return Err(refused(
                ACT,
                "a blanket approval lasts more than nothing and at most 90 days",
            ));
        }
        self.transaction(|tx| {
            Box::pin(async move {
                // The machine rows first, in the order every other transaction takes them.
                let machines = lock_cluster(tx, cluster_id).await?;
                if machines.is_empty() {
                    let reason = format!("no machine of cluster {cluster_id} is in the inventory");
                    return Err(refused(ACT, reason).into());
                }
                let inst = installation(tx, true).await?;
                let human = require_role(tx, actor, &[Role::Approver], ACT).await?;
                if !human {
                    return Err(refused(ACT, "automation is never an approver").into());
                }
                if reason.trim().is_empty() {
                    return Err(refused(ACT, "a reason is required").into());
                }
                if inst.recovery_mode {
                    return Err(refused(ACT, "recovery mode is in effect").into());
                }
                let now = self.store_time(tx).await?;
                if let Some(live) = live_blanket(tx, cluster_id).await? {
                    if live.epoch == inst.epoch && now < live.expires_ms {
                        let reason = format!(
                            "blanket approval {} is already in force for cluster {cluster_id}",
                            live.id
                        );
                        return Err(refused(ACT, reason).into());
                    }
                    // Granted in an earlier epoch, or lapsed, it holds no longer: this
                    // grant replaces it on the record.
                    query(REVOKE_BLANKET)
                        .bind(&live.id)
                        .bind(&actor.id)
                        .bind(now)
                        .execute(tx)
                        .await?;
                }
                let id = format!("blanket-{}", hex16(crate::store::random_128()?));
                let expires = now.saturating_add(i(lasting.0));
                query(
                    "INSERT INTO blanket_approvals (id, cluster_id, approver_id, reason, epoch, \
                     granted_ms, expires_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                )
                .bind(&id)
                .bind(cluster_id)
                .bind(&actor.id)
                .bind(reason)
                .bind(inst.epoch.to_bytes().to_vec())
                .bind(now)
                .bind(expires)
                .execute(tx)
                .await?;
                for m in &machines {
                    let detail = format!(
                        "blanket approval {id} for cluster {cluster_id}, lapsing at t={expires}ms; \
                         epoch {}",
                        inst.epoch
                    );
                    append(
                        tx,
                        m,
                        now,
                        Entry::by(actor, "blanket_granted").detail(detail),
                    )
                    .await?;
                }
                Ok(BlanketApproval {
                    id,
                    cluster_id: cluster_id.to_owned(),
                    approver: actor.id.clone(),
                    reason: reason.to_owned(),
                    granted_at: InstantMs(u(now)),
                    current_epoch: true,
                    revoked: None,
                    expires_at: InstantMs(u(expires)),
                    expired: false,
                })
            })
        })
        .await
    }

    /// [`Store::revoke_blanket_approval`](crate::store::Store::revoke_blanket_approval): revoke
    /// a blanket approval (an approver or recovery-admin), and with it every approval made
    /// under it, as `Store::revoke_approval` would each.
    pub(in crate::store) async fn revoke_blanket_approval(
        &self,
        actor: &Actor,
        blanket_id: &str,
    ) -> StoreResult<()> {
        const ACT: &str = "revoking a blanket approval";
        self.transaction(|tx| {
            Box::pin(async move {
                let cluster_id: String =
                    query("SELECT cluster_id FROM blanket_approvals WHERE id = $1")
                        .bind(blanket_id)
                        .fetch_optional(tx)
                        .await?
                        .ok_or_else(|| not_found("blanket approval", blanket_id))?
                        .try_get(0)?;
                // Every machine row of the cluster first: an approval under the blanket
                // locks its machine's row before it reads the blanket, so none is made
                // while this runs.
                let cluster = lock_cluster(tx, &cluster_id).await?;
                let mut machines = cluster.clone();
                require_role(tx, actor, &[Role::Approver, Role::RecoveryAdmin], ACT).await?;
                let locked = HookPoint::BlanketRevocationLocked {
                    blanket: blanket_id.to_owned(),
                };
                self.hook(locked).await;
                let row = query("SELECT revoked FROM blanket_approvals WHERE id = $1 FOR UPDATE")
                    .bind(blanket_id)
                    .fetch_one(tx)
                    .await?;
                if row.try_get::<bool, _>("revoked")? {
                    return Err(refused(ACT, "the blanket approval is already revoked").into());
                }
                let now = self.store_time(tx).await?;
                query(REVOKE_BLANKET)
                    .bind(blanket_id)
                    .bind(&actor.id)
                    .bind(now)
                    .execute(tx)
                    .await?;
                let plans = query(
                    "SELECT a.plan_id, a.seq, p.machine_id, p.state FROM approvals a \
                     JOIN plans p ON p.id = a.plan_id \
                     WHERE a.blanket_id = $1 AND NOT a.revoked ORDER BY a.plan_id",
                )
                .bind(blanket_id)
                .fetch_all(tx)
                .await?;
                let withdrawal = Withdrawal {
                    actor,
                    kind: "approval_revoked",
                    event: PlanEvent::RevokeApproval,
                    why: format!("blanket approval {blanket_id} revoked"),
                    now,
                };
                for r in &plans {
                    let plan_id: String = r.try_get("plan_id")?;
                    query("UPDATE approvals SET revoked = TRUE WHERE plan_id = $1 AND seq = $2")
                        .bind(&plan_id)
                        .bind(r.try_get::<i64, _>("seq")?)
                        .execute(tx)
                        .await?;
                    // A machine moved to another cluster after its approval is locked here.
                    withdrawal.record(tx, &mut machines, r).await?;
                }
                for m in &cluster {
                    let detail = format!("blanket approval {blanket_id} for cluster {cluster_id}");
                    append(
                        tx,
                        m,
                        now,
                        Entry::by(actor, "blanket_revoked").detail(detail),
                    )
                    .await?;
                }
                Ok(())
            })
        })
        .await
    }

    /// [`Store::approve_under_blanket`](crate::store::Store::approve_under_blanket): approve a
    /// proposed plan under the blanket approval in force for its machine's cluster (a publisher
    /// or automation asks; the approval is recorded as the blanket's approver's, naming the
    /// blanket).
    pub(in crate::store) async fn approve_under_blanket(
        &self,
        actor: &Actor,
        plan_id: &str,
    ) -> StoreResult<SelfApproval> {
        const ACT: &str = "approving under a blanket approval";
        self.transaction(|tx| {
            Box::pin(async move {
                let machine_id = read_plan(tx, plan_id).await?.machine_id;
                let machine = lock_machine(tx, &machine_id).await?;
                let inst = installation(tx, true).await?;
                require_role(tx, actor, &[Role::Publisher, Role::Automation], ACT).await?;
                if read_plan(tx, plan_id).await?.operation_kind == "adopt" {
                    // An adoption accepts a configuration no reviewer has seen as
                    // Applied: it takes an approver's own review, never a standing grant.
                    let reason = "an adopt plan needs an approver's own approval";
                    return Err(refused(ACT, reason).into());
                }
                let blanket = live_blanket(tx, &machine.cluster_id)
                    .await?
                    .ok_or_else(|| {
                        let reason = format!(
                            "no blanket approval is in force for cluster {}; an approver \
                             grants one, or the plan waits for an approver",
                            machine.cluster_id
                        );
                        refused(ACT, reason)
                    })?;
                let now = self.store_time(tx).await?;
                if now >= blanket.expires_ms {
                    let reason = format!(
                        "blanket approval {} lapsed at t={}ms; an approver grants one again",
                        blanket.id, blanket.expires_ms
                    );
                    return Err(refused(ACT, reason).into());
                }
                if blanket.epoch != inst.epoch {
                    let reason = format!(
                        "blanket approval {} was granted in another epoch; an approver grants it \
                         again",
                        blanket.id
                    );
                    return Err(refused(ACT, reason).into());
                }
                // The approver's principal row, read to share as for any acting identity:
                // revoking it waits for this transaction, and a revoked identity, or one
                // no longer an approver, approves nothing.
                let approver = Actor::new(blanket.approver.clone(), Role::Approver);
                require_role(tx, &approver, &[Role::Approver], ACT).await?;
                let approval = Approving {
                    plan: plan_id,
                    approver: &blanket.approver,
                    blanket: Some(&blanket.id),
                };
                self.record_approval(tx, actor, &machine, &inst, approval, ACT)
                    .await
            })
        })
        .await
    }

    /// [`Store::blanket_approvals`](crate::store::Store::blanket_approvals): every blanket
    /// approval, in force or revoked, oldest first.
    pub(in crate::store) async fn blanket_approvals(&self) -> StoreResult<Vec<BlanketApproval>> {
        self.transaction(|tx| {
            Box::pin(async move {
                let inst = installation(tx, true).await?;
                let now = self.store_time(tx).await?;
                let rows = query(
                    "SELECT id, cluster_id, approver_id, reason, epoch, granted_ms, revoked, \
                     revoked_by, revoked_ms, expires_ms FROM blanket_approvals \
                     ORDER BY granted_ms, id",
                )
                .fetch_all(tx)
                .await?;
                let mut out = Vec::new();
                for r in &rows {
                    let epoch: Vec<u8> = r.try_get("epoch")?;
                    let revoked = if r.try_get::<bool, _>("revoked")? {
                        let by: Option<String> = r.try_get("revoked_by")?;
                        let at: Option<i64> = r.try_get("revoked_ms")?;
                        Some((by.unwrap_or_default(), InstantMs(u(at.unwrap_or_default()))))
                    } else {
                        None
                    };
                    out.push(BlanketApproval {
                        id: r.try_get("id")?,
                        cluster_id: r.try_get("cluster_id")?,
                        approver: r.try_get("approver_id")?,
                        reason: r.try_get("reason")?,
                        granted_at: InstantMs(u(r.try_get("granted_ms")?)),
                        current_epoch: epoch_of(&epoch)? == inst.epoch,
                        revoked,
                        expires_at: InstantMs(u(r.try_get("expires_ms")?)),
                        expired: now >= r.try_get::<i64, _>("expires_ms")?,
                    });
                }
                Ok(out)
            })
        })
        .await
    }
}

/// A blanket approval revoked by `$2` at store time `$3`.
const REVOKE_BLANKET: &str =
    "UPDATE blanket_approvals SET revoked = TRUE, revoked_by = $2, revoked_ms = $3 WHERE id = $1";

/// The machine rows of cluster `cluster_id`, locked in id order; their ids.
async fn lock_cluster(tx: &mut Tx, cluster_id: &str) -> R<Vec<String>> {
    let rows = query("SELECT id FROM machines WHERE cluster_id = $1 ORDER BY id FOR UPDATE")
        .bind(cluster_id)
        .fetch_all(tx)
        .await?;
    rows.iter()
        .map(|r| Ok(r.try_get::<String, _>(0)?))
        .collect()
}

/// A blanket approval as a transaction reads it.
struct BlanketRow {
    id: String,
    approver: String,
    epoch: Epoch,
    /// Store time it lapses at.
    expires_ms: i64,
}

/// The blanket approval in force for `cluster_id`, read to share: a revocation
/// waits for the reading transaction.
async fn live_blanket(tx: &mut Tx, cluster_id: &str) -> R<Option<BlanketRow>> {
    let row = query(
        "SELECT id, approver_id, epoch, expires_ms FROM blanket_approvals \
         WHERE cluster_id = $1 AND NOT revoked FOR SHARE",
    )
    .bind(cluster_id)
    .fetch_optional(tx)
    .await?;
    row.map(|r| -> R<BlanketRow> {
        let epoch: Vec<u8> = r.try_get("epoch")?;
        Ok(BlanketRow {
            id: r.try_get("id")?,
            approver: r.try_get("approver_id")?,
            epoch: epoch_of(&epoch)?,
            expires_ms: r.try_get("expires_ms")?,
        })
    })
    .transpose()
}
