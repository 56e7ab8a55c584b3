//! Plans (§2, §3.1): making an immutable plan from the machine's Desired release,
//! with everything it binds read from the database under the machine row's lock;
//! cancelling one; and §3.1's preflight, the quick check without locks that the plan
//! stands and the gate is open.

use crate::contract::gate::{self, Mutation};
use crate::contract::plan::{self, PlanEvent, Stage};
use crate::contract::{Role, SpanMs};
use crate::store::common::*;
use crate::store::engine::SqlStore;
use crate::store::lookups::{
    authority_now, installation, lock_machine, read_machine, read_plan, require_role,
    set_plan_state, unreleased,
};
use crate::store::sql::{Row, Tx, query};
use crate::store::transaction::{Entry, Fail, R, append};
use crate::store::views::plan_view;
use crate::store::{Actor, PlanSpec, PlanView, StoreError, StoreResult};

impl SqlStore {
    /// Make an immutable plan from the machine's Desired release (§2): everything it
    /// binds is read from the database under the machine row's lock.
    pub(in crate::store) async fn create_plan(
        &self,
        actor: &Actor,
        spec: PlanSpec,
    ) -> StoreResult<PlanView> {
        check_plan_spec(&spec, self.settings.max_transport_deadline)?;
        let spec = &spec;
        self.transaction(|tx| {
            Box::pin(async move {
                let machine = lock_machine(tx, &spec.machine).await?;
                let inst = installation(tx, true).await?;
                require_role(tx, actor, &[Role::Publisher], CREATING).await?;
                if unreleased(&machine, &inst)? {
                    let reason = "recovery mode: the scope is not released";
                    return Err(refused(CREATING, reason).into());
                }
                if machine.desired_release.as_deref() != Some(spec.release.as_str()) {
                    let reason = "an apply-config plan must target the machine's Desired release";
                    return Err(refused(CREATING, reason).into());
                }
                let artifact = query(
                    "SELECT key_provider, key_id, key_version, digest FROM artifacts \
                     WHERE release_id = $1 AND machine_id = $2",
                )
                .bind(&spec.release)
                .bind(&spec.machine)
                .fetch_optional(tx)
                .await?
                .ok_or_else(|| refused(CREATING, "the release has no artifact for this machine"))?;
                let expected = expected_digest(&machine, spec.revert)?;
                let exists = query("SELECT id FROM plans WHERE id = $1")
                    .bind(&spec.id)
                    .fetch_optional(tx)
                    .await?;
                if exists.is_some() {
                    return Err(StoreError::Exists {
                        what: "plan",
                        id: spec.id.clone(),
                    }
                    .into());
                }
                let now = self.store_time(tx).await?;
                let detail = format!(
                    "release {}, baseline r{}",
                    spec.release, machine.baseline_revision
                );
                let entry = Entry::by(actor, "plan_created")
                    .plan(&spec.id)
                    .detail(detail);
                append(tx, &spec.machine, now, entry).await?;
                let bound = Bound {
                    machine: &machine,
                    artifact: &artifact,
                    expected,
                };
                insert_plan(tx, actor, spec, bound).await?;
                let plan = read_plan(tx, &spec.id).await?;
                Ok(plan_view(&plan, None)?)
            })
        })
        .await
    }

    /// [`Store::cancel_plan`](crate::store::Store::cancel_plan): cancel a plan (its creator, an
    /// approver or recovery-admin).
    pub(in crate::store) async fn cancel_plan(
        &self,
        actor: &Actor,
        plan_id: &str,
    ) -> StoreResult<()> {
        const ACT: &str = "cancelling a plan";
        self.transaction(|tx| {
            Box::pin(async move {
                let machine_id = read_plan(tx, plan_id).await?.machine_id;
                lock_machine(tx, &machine_id).await?;
                let plan = read_plan(tx, plan_id).await?;
                let allowed: &[Role] = if plan.creator_id == actor.id {
                    &[
                        Role::Author,
                        Role::Publisher,
                        Role::Approver,
                        Role::RecoveryAdmin,
                        Role::Automation,
                    ]
                } else {
                    &[Role::Approver, Role::RecoveryAdmin]
                };
                require_role(tx, actor, allowed, ACT).await?;
                if plan.cancelled {
                    return Err(refused(ACT, "the plan is already cancelled").into());
                }
                let state = plan_state_of(&plan.state)?;
                let detail = match plan::transition(state, PlanEvent::Cancel) {
                    Ok(next) => {
                        set_plan_state(tx, plan_id, next).await?;
                        format!("plan {state} -> {next}")
                    }
                    Err(plan::PlanRefusal::AfterCommitment { .. }) => {
                        "recorded against the committed plan".to_owned()
                    }
                    Err(e) => return Err(refused(ACT, e.to_string()).into()),
                };
                query("UPDATE plans SET cancelled = TRUE WHERE id = $1")
                    .bind(plan_id)
                    .execute(tx)
                    .await?;
                let now = self.store_time(tx).await?;
                append(
                    tx,
                    &machine_id,
                    now,
                    Entry::by(actor, "plan_cancelled")
                        .plan(plan_id)
                        .detail(detail),
                )
                .await?;
                Ok(())
            })
        })
        .await
    }

    /// [`Store::preflight`](crate::store::Store::preflight): §3.1's quick, non-atomic check
    /// that the plan stands and the gate is open.
    pub(in crate::store) async fn preflight(&self, plan_id: &str) -> StoreResult<()> {
        // Deliberately no locks: this is §3.1's quick check, not a guarantee.
        let mut tx = self.pool.begin().await.map_err(db_err)?;
        let result: R<()> = async {
            let plan = read_plan(&mut tx, plan_id).await?;
            let machine = read_machine(&mut tx, &plan.machine_id).await?;
            let row = query("SELECT epoch, recovery_mode FROM installation WHERE id = 1")
                .fetch_one(&mut tx)
                .await?;
            let epoch: Vec<u8> = row.try_get("epoch")?;
            let inst = InstallationRow {
                epoch: epoch_of(&epoch)?,
                recovery_mode: row.try_get("recovery_mode")?,
                recovery_entered_at_ms: None,
                recovery_stopped_at_ms: None,
                approval_policy: crate::store::ApprovalPolicy::default(),
            };
            let approval = query(
                "SELECT a.approver_id, a.epoch, a.revision, a.revoked, \
                 p.revoked AS identity_revoked \
                 FROM approvals a JOIN principals p ON p.id = a.approver_id \
                 WHERE a.plan_id = $1 ORDER BY a.seq DESC LIMIT 1",
            )
            .bind(plan_id)
            .fetch_optional(&mut tx)
            .await?
            .map(|r| -> R<ApprovalRow> {
                let e: Vec<u8> = r.try_get("epoch")?;
                Ok(ApprovalRow {
                    epoch: epoch_of(&e)?,
                    revision: r.try_get("revision")?,
                    revoked: r.try_get("revoked")?,
                    identity_revoked: r.try_get("identity_revoked")?,
                })
            })
            .transpose()?;
            let now = self.store_time(&mut tx).await?;
            authority_now(&plan, approval.as_ref(), now, inst.epoch, Stage::Commitment)
                .map_err(|e| refused("preflight", e.to_string()))?;
            gate::check_gate(Mutation::Commitment, &gate_facts(&machine, &plan, &inst)?)
                .map_err(|e| refused("preflight", e.to_string()))?;
            Ok(())
        }
        .await;
        let _ = tx.rollback().await;
        result.map_err(|f| match f {
            Fail::Db(e) => db_err(e),
            Fail::Store(e) => e,
        })
    }
}

/// What refusals of plan creation name.
const CREATING: &str = "creating a plan";

/// The plan's own parameters, before anything is read: deadlines in order, an attempt
/// budget, and a transport deadline within the deployment's maximum (§7.3 step 1).
fn check_plan_spec(spec: &PlanSpec, ceiling: SpanMs) -> StoreResult<()> {
    if spec.transport_deadline > spec.verification_deadline {
        return Err(refused(
            CREATING,
            "the transport deadline exceeds the verification deadline",
        ));
    }
    if spec.max_attempts == 0 {
        return Err(refused(CREATING, "the attempt budget must be at least one"));
    }
    if spec.transport_deadline > ceiling {
        return Err(refused(
            CREATING,
            format!(
                "the transport deadline {} exceeds the deployment's maximum of {ceiling} \
                 (§7.3 step 1)",
                spec.transport_deadline
            ),
        ));
    }
    Ok(())
}

/// The digest a plan expects before dispatch, and the drift record it binds: a
/// revert expects the open drift record's digest (§6.4), any other plan Applied's.
fn expected_digest(
    machine: &MachineRow,
    revert: bool,
) -> Result<(String, Option<i64>), StoreError> {
    if revert {
        match (&machine.open_drift, &machine.open_drift_digest) {
            (Some(r), Some(d)) => Ok((d.clone(), Some(*r))),
            _ => Err(refused(CREATING, "a revert needs an open drift record")),
        }
    } else {
        match &machine.applied_digest {
            Some(d) => Ok((d.clone(), None)),
            None => Err(refused(
                CREATING,
                "the machine has no Applied: an imported machine is handed over by an approved \
                 adopt plan first (§6.3)",
            )),
        }
    }
}

/// What a new plan binds from the database: the machine row as locked, the release's
/// artifact row for it, and the expected digest with the drift record it binds.
struct Bound<'a> {
    machine: &'a MachineRow,
    artifact: &'a Row,
    expected: (String, Option<i64>),
}

/// The plan row, proposed, binding `bound` and the publisher's parameters.
async fn insert_plan(tx: &mut Tx, actor: &Actor, spec: &PlanSpec, bound: Bound<'_>) -> R<()> {
    let Bound {
        machine,
        artifact: art,
        expected: (pre_dispatch, bound_drift),
    } = bound;
    query(
        "INSERT INTO plans (id, machine_id, release_id, artifact_digest, key_provider, \
         key_id, key_version, identity_kind, identity_value, cluster_id, \
         assignment_revision, desired_release, baseline_revision, pre_dispatch_digest, \
         bound_drift, route, talos_minor, max_evidence_age_ms, transport_deadline_ms, \
         verification_deadline_ms, max_attempts, rollout_scope, expires_at_ms, \
         creator_id, creator_role, state) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, \
         $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, \
         'proposed')",
    )
    .bind(&spec.id)
    .bind(&spec.machine)
    .bind(&spec.release)
    .bind(art.try_get::<String, _>("digest")?)
    .bind(art.try_get::<String, _>("key_provider")?)
    .bind(art.try_get::<String, _>("key_id")?)
    .bind(art.try_get::<i64, _>("key_version")?)
    .bind(&machine.identity_kind)
    .bind(&machine.identity_value)
    .bind(&machine.cluster_id)
    .bind(machine.assignment_revision)
    .bind(&spec.release)
    .bind(machine.baseline_revision)
    .bind(&pre_dispatch)
    .bind(bound_drift)
    .bind(&machine.endpoint)
    .bind(&machine.talos_minor)
    .bind(i(spec.max_evidence_age.0))
    .bind(i(spec.transport_deadline.0))
    .bind(i(spec.verification_deadline.0))
    .bind(i64::from(spec.max_attempts))
    .bind(&machine.rollout_scope)
    .bind(i(spec.expires_at.0))
    .bind(&actor.id)
    .bind(role_name(actor.role))
    .execute(tx)
    .await?;
    Ok(())
}
