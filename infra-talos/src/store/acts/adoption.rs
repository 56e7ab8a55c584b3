//! Adoption (§6.3): an adopt plan, which binds what the machine row holds and the
//! digest it adopts; and the adoption record transaction, its commitment, which sends
//! nothing. The record creates the plan's adopt operation directly in completed, sets
//! Applied to the plan's release at the adopted digest, advances the baseline revision
//! and closes the bound drift record as adopted. Whether it may is decided by
//! `contract::adoption::judge`; this module reads its facts under the machine row's
//! lock and writes the answer. A refusal is recorded once, in its own transaction.

use crate::contract::adoption::{self, Verdict};
use crate::contract::operation::{
    self, ControllerId, Creation, OperationKind, OperationState, OwnerToken, TransitionFacts,
};
use crate::contract::plan::{PlanState, Stage};
use crate::contract::{InstantMs, Revision, Role, SpanMs};
use crate::store::acts::observations::set_open_drift;
use crate::store::common::*;
use crate::store::engine::SqlStore;
use crate::store::lookups::{
    authority_now, holder, installation, latest_recorded, lock_machine, read_plan, require_role,
    set_plan_state, standing_approval, unreleased,
};
use crate::store::sql::{Row, Tx, query};
use crate::store::transaction::{Entry, Fail, R, append};
use crate::store::views::plan_view;
use crate::store::{Actor, AdoptPlanSpec, AdoptionOutcome, PlanView, StoreError, StoreResult};

/// What refusals of adopt plan creation name.
const CREATING: &str = "creating an adopt plan";
/// What refusals of the adoption record name when no requirement is at stake.
const RECORDING: &str = "recording an adoption";

impl SqlStore {
    /// [`Store::create_adopt_plan`](crate::store::Store::create_adopt_plan): §6.3's adopt
    /// plan, binding the machine row as locked and the digest it adopts.
    pub(in crate::store) async fn create_adopt_plan(
        &self,
        actor: &Actor,
        spec: AdoptPlanSpec,
    ) -> StoreResult<PlanView> {
        if spec.max_evidence_age == SpanMs(0) {
            return Err(refused(CREATING, "the evidence age limit must be positive"));
        }
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
                    let reason = "an adopt plan names the machine's Desired release, which \
                                  Applied will name";
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
                let adopted = adopted_digest(&machine)?;
                let exists = query("SELECT id FROM plans WHERE id = $1")
                    .bind(&spec.id)
                    .fetch_optional(tx)
                    .await?;
                if exists.is_some() {
                    let id = spec.id.clone();
                    return Err(StoreError::Exists { what: "plan", id }.into());
                }
                let now = self.store_time(tx).await?;
                let what = adopted.drift.map_or_else(
                    || "the import's configuration (handover)".to_owned(),
                    |r| format!("drift record r{r}"),
                );
                let detail = format!(
                    "adopt {what} at digest {}, naming release {}",
                    adopted.digest, spec.release
                );
                let entry = Entry::by(actor, "plan_created")
                    .plan(&spec.id)
                    .detail(detail);
                append(tx, &spec.machine, now, entry).await?;
                insert_adopt_plan(tx, actor, spec, &machine, &artifact, &adopted).await?;
                let plan = read_plan(tx, &spec.id).await?;
                Ok(plan_view(&plan, None)?)
            })
        })
        .await
    }

    /// [`Store::record_adoption`](crate::store::Store::record_adoption): the §6.3
    /// adoption record transaction; a refusal is recorded in a second transaction.
    pub(in crate::store) async fn record_adoption(
        &self,
        plan_id: &str,
        controller: ControllerId,
    ) -> StoreResult<AdoptionOutcome> {
        let verdict = self
            .transaction(|tx| Box::pin(async move { self.adoption(tx, plan_id, controller).await }))
            .await;
        match verdict {
            Err(StoreError::AdoptionRefused {
                requirement,
                reason,
            }) => {
                self.record_adoption_refusal(plan_id, controller, requirement, &reason)
                    .await?;
                Err(StoreError::AdoptionRefused {
                    requirement,
                    reason,
                })
            }
            other => other,
        }
    }

    /// The adoption record transaction's body: its facts under the machine row's
    /// lock, the judgement, and the record when every requirement holds.
    async fn adoption(
        &self,
        tx: &mut Tx,
        plan_id: &str,
        controller: ControllerId,
    ) -> R<AdoptionOutcome> {
        let machine_id = read_plan(tx, plan_id).await?.machine_id;
        let machine = lock_machine(tx, &machine_id).await?;
        let inst = installation(tx, true).await?;
        let plan = read_plan(tx, plan_id).await?;
        if plan.operation_kind != "adopt" {
            return Err(refused(RECORDING, "the plan is not an adopt plan").into());
        }
        let now = self.store_time(tx).await?;
        let read = AdoptionReads {
            approval: standing_approval(tx, plan_id).await?,
            adopted: query("SELECT id FROM operations WHERE plan_id = $1")
                .bind(plan_id)
                .fetch_optional(tx)
                .await?
                .is_some(),
            refused: refusal_recorded(tx, &machine_id, plan_id).await?,
            evidence: latest_recorded(tx, &machine_id).await?,
            holder: holder(tx, true, &machine_id).await?,
        };
        let baseline = digest_of(&plan.pre_dispatch_digest)?;
        let evidence_digest = read
            .evidence
            .as_ref()
            .and_then(|e| e.digest.as_deref())
            .map(digest_of)
            .transpose()?;
        let facts = adoption::Facts {
            adopted: read.adopted,
            refused: read.refused,
            authority: authority_now(
                &plan,
                read.approval.as_ref(),
                now,
                inst.epoch,
                Stage::Commitment,
            ),
            approved_at: read.approval.as_ref().map(|a| Revision(u(a.revision))),
            bound: adoption::Binding {
                assignment_revision: u(plan.assignment_revision),
                baseline_revision: plan
                    .bound_drift
                    .map(|_| Revision(u(plan.baseline_revision))),
                desired: Some(plan.desired_release.as_str()),
                drift: plan.bound_drift.map(|r| Revision(u(r))),
            },
            current: adoption::Binding {
                assignment_revision: u(machine.assignment_revision),
                baseline_revision: machine
                    .applied_digest
                    .as_ref()
                    .map(|_| Revision(u(machine.baseline_revision))),
                desired: machine.desired_release.as_deref(),
                drift: machine.open_drift.map(|r| Revision(u(r))),
            },
            identity: match plan.identity_kind.as_str() {
                "node_id" => adoption::Identity::NodeId(&plan.identity_value),
                _ => adoption::Identity::SmbiosUuid(&plan.identity_value),
            },
            cluster_id: &plan.cluster_id,
            baseline_digest: &baseline,
            max_age: SpanMs(u(plan.max_evidence_age_ms)),
            evidence: read.evidence.as_ref().map(|e| adoption::Evidence {
                basis: Revision(u(e.basis)),
                started_at: InstantMs(u(e.started_at_ms)),
                smbios_uuid: e.smbios_uuid.as_deref(),
                node_id: e.node_id.as_deref(),
                cluster_id: e.cluster_id.as_deref(),
                digest: evidence_digest.as_ref(),
            }),
            scope_holder: read.holder.as_deref(),
            gate: gate_facts(&machine, &plan, &inst)?,
            now: InstantMs(u(now)),
        };
        match adoption::judge(&facts) {
            Verdict::Hold(hold) => Ok(AdoptionOutcome::Held(hold)),
            Verdict::Refuse(refusal) => Err(Fail::Store(StoreError::AdoptionRefused {
                requirement: refusal.requirement(),
                reason: refusal.to_string(),
            })),
            Verdict::Record => {
                let basis = read.evidence.as_ref().map_or(0, |e| e.basis);
                let recorded = Recording {
                    plan: &plan,
                    machine: &machine,
                    owner: OwnerToken::at_commitment(controller, inst.epoch),
                    basis,
                    now,
                };
                let operation = write_adoption(tx, &recorded).await?;
                Ok(AdoptionOutcome::Recorded { operation })
            }
        }
    }

    /// Record a refusal of the adoption record in its own transaction, once.
    async fn record_adoption_refusal(
        &self,
        plan_id: &str,
        controller: ControllerId,
        requirement: u8,
        reason: &str,
    ) -> StoreResult<()> {
        self.transaction(|tx| {
            Box::pin(async move {
                let machine_id = read_plan(tx, plan_id).await?.machine_id;
                lock_machine(tx, &machine_id).await?;
                if refusal_recorded(tx, &machine_id, plan_id).await? {
                    return Ok(());
                }
                let now = self.store_time(tx).await?;
                let detail = format!("requirement {requirement} of §6.3: {reason}");
                let entry = Entry::controller(controller, "adoption_refused")
                    .plan(plan_id)
                    .detail(detail);
                append(tx, &machine_id, now, entry).await?;
                Ok(())
            })
        })
        .await
    }
}

/// What an adopt plan adopts: the digest, and the drift record it binds (none for a
/// handover).
struct Adopted {
    digest: String,
    drift: Option<i64>,
}

/// The open drift record's latest digest for a machine with Applied, the import's
/// digest for one without; anything else has nothing to adopt.
fn adopted_digest(machine: &MachineRow) -> Result<Adopted, StoreError> {
    match (&machine.applied_digest, machine.open_drift) {
        (Some(_), Some(record)) => {
            let digest = machine.open_drift_digest.clone().ok_or_else(|| {
                db_err(format!(
                    "drift record r{record} of {} has no digest",
                    machine.id
                ))
            })?;
            Ok(Adopted {
                digest,
                drift: Some(record),
            })
        }
        (Some(_), None) => Err(refused(
            CREATING,
            "the machine runs its Applied configuration and has no open drift record: \
             nothing to adopt",
        )),
        (None, _) => match &machine.import_digest {
            Some(digest) => Ok(Adopted {
                digest: digest.clone(),
                drift: None,
            }),
            None => Err(refused(
                CREATING,
                "the machine has no Applied and no import digest: nothing to adopt",
            )),
        },
    }
}

/// The adopt plan's row, proposed. It sends nothing, so its deadlines are the least
/// the schema admits and never read; its attempt budget is the one the schema needs.
async fn insert_adopt_plan(
    tx: &mut Tx,
    actor: &Actor,
    spec: &AdoptPlanSpec,
    machine: &MachineRow,
    art: &Row,
    adopted: &Adopted,
) -> R<()> {
    query(
        "INSERT INTO plans (id, machine_id, release_id, artifact_digest, key_provider, \
         key_id, key_version, identity_kind, identity_value, cluster_id, \
         assignment_revision, desired_release, baseline_revision, pre_dispatch_digest, \
         bound_drift, operation_kind, route, talos_minor, max_evidence_age_ms, \
         transport_deadline_ms, verification_deadline_ms, max_attempts, rollout_scope, \
         expires_at_ms, creator_id, creator_role, state) VALUES ($1, $2, $3, $4, $5, $6, \
         $7, $8, $9, $10, $11, $12, $13, $14, $15, 'adopt', $16, $17, $18, 0, 0, 1, $19, \
         $20, $21, $22, 'proposed')",
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
    .bind(&adopted.digest)
    .bind(adopted.drift)
    .bind(&machine.endpoint)
    .bind(&machine.talos_minor)
    .bind(i(spec.max_evidence_age.0))
    .bind(&machine.rollout_scope)
    .bind(i(spec.expires_at.0))
    .bind(&actor.id)
    .bind(role_name(actor.role))
    .execute(tx)
    .await?;
    Ok(())
}

/// The rows the adoption record reads besides the machine, plan and installation.
struct AdoptionReads {
    approval: Option<ApprovalRow>,
    adopted: bool,
    refused: bool,
    evidence: Option<ObsRow>,
    holder: Option<String>,
}

/// Whether a refusal of `plan`'s adoption record is on the timeline.
async fn refusal_recorded(tx: &mut Tx, machine: &str, plan: &str) -> R<bool> {
    let row = query(
        "SELECT revision FROM timeline WHERE machine_id = $1 AND plan_id = $2 \
         AND kind = 'adoption_refused' LIMIT 1",
    )
    .bind(machine)
    .bind(plan)
    .fetch_optional(tx)
    .await?;
    Ok(row.is_some())
}

/// What the record writes with.
struct Recording<'a> {
    plan: &'a PlanRow,
    machine: &'a MachineRow,
    owner: OwnerToken,
    /// The basis of the observation the record relied on.
    basis: i64,
    now: i64,
}

/// The adoption record: the adopt operation, created completed; Applied at the
/// adopted digest naming the plan's release; the bound drift record closed as
/// adopted; the plan committed.
async fn write_adoption(tx: &mut Tx, rec: &Recording<'_>) -> R<String> {
    let Recording {
        plan,
        machine,
        owner,
        basis,
        now,
    } = *rec;
    let facts = TransitionFacts {
        creation: Some(Creation::AdoptionRecord),
        ..TransitionFacts::quiet(OperationKind::Adopt, &[])
    };
    operation::check_transition(None, OperationState::Completed, &facts)
        .map_err(|e| refused(RECORDING, e.to_string()))?;
    let op_id = hex16(crate::store::random_128()?);
    let detail = format!(
        "operation {op_id} created completed; nothing sent; observation basis r{basis} \
         showed digest {}",
        plan.pre_dispatch_digest
    );
    let entry = Entry::token(&owner, "adoption")
        .plan(&plan.id)
        .op(&op_id)
        .detail(detail);
    let rev = append(tx, &machine.id, now, entry).await?;
    query(
        "INSERT INTO operations (id, plan_id, machine_id, rollout_scope, kind, state, \
         owner_controller, owner_generation, owner_epoch, commit_revision) \
         VALUES ($1, $2, $3, $4, 'adopt', 'completed', $5, 1, $6, $7)",
    )
    .bind(&op_id)
    .bind(&plan.id)
    .bind(&machine.id)
    .bind(&plan.rollout_scope)
    .bind(controller_bytes(owner.controller))
    .bind(owner.epoch.to_bytes().to_vec())
    .bind(rev)
    .execute(tx)
    .await?;
    let detail = format!(
        "release {} at digest {} (adopted)",
        plan.release_id, plan.pre_dispatch_digest
    );
    let entry = Entry::token(&owner, "applied_changed")
        .op(&op_id)
        .plan(&plan.id)
        .detail(detail);
    let applied = append(tx, &machine.id, now, entry).await?;
    query(
        "UPDATE machines SET applied_release = $2, applied_digest = $3, \
         applied_source = $4, baseline_revision = $5 WHERE id = $1",
    )
    .bind(&machine.id)
    .bind(&plan.release_id)
    .bind(&plan.pre_dispatch_digest)
    .bind(&op_id)
    .bind(applied)
    .execute(tx)
    .await?;
    if let Some(opened) = plan.bound_drift.filter(|r| Some(*r) == machine.open_drift) {
        let detail = format!("record r{opened} closed (adopted) by this adoption record");
        let entry = Entry::token(&owner, "drift_closed")
            .op(&op_id)
            .detail(detail);
        append(tx, &machine.id, now, entry).await?;
        set_open_drift(tx, &machine.id, None).await?;
    }
    set_plan_state(tx, &plan.id, PlanState::Committed).await?;
    Ok(op_id)
}
