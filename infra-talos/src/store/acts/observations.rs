//! Observations and drift (§3.1, §4.1, §6.1, §6.5): starting an observation (its
//! basis is the revision of its start entry), recording what it read, recording a
//! use-time dependency check (§3.1 item 2), and the drift rules that open, extend or
//! close a machine's drift record.

use crate::contract::Revision;
use crate::contract::drift;
use crate::contract::evidence::ObservationPurpose;
use crate::store::common::*;
use crate::store::engine::SqlStore;
use crate::store::lookups::{holder, lock_machine, observations_after, read_plan};
use crate::store::sql::{Tx, query};
use crate::store::transaction::{Entry, R, append};
use crate::store::{
    DependencyCheck, ObservationRequest, ObservationTicket, ObservedFacts, StoreResult,
};

impl SqlStore {
    /// [`Store::begin_observation`](crate::store::Store::begin_observation): record
    /// "observation started"; its revision is the observation's basis.
    pub(in crate::store) async fn begin_observation(
        &self,
        request: ObservationRequest,
    ) -> StoreResult<ObservationTicket> {
        let request = &request;
        self.transaction(|tx| {
            Box::pin(async move {
                lock_machine(tx, &request.machine).await?;
                if let Some(p) = &request.plan {
                    let plan = read_plan(tx, p).await?;
                    if plan.machine_id != request.machine {
                        return Err(refused(
                            "starting an observation",
                            "the plan is for another machine",
                        )
                        .into());
                    }
                }
                let now = self.store_time(tx).await?;
                let purpose = purpose_name(request.purpose);
                let mut entry = Entry::controller(request.controller, "observation_started")
                    .detail(format!("purpose {purpose}"));
                entry.plan = request.plan.as_deref();
                let basis = append(tx, &request.machine, now, entry).await?;
                query(
                    "INSERT INTO observation_starts (machine_id, basis, purpose, plan_id, \
                     controller, started_at_ms) VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(&request.machine)
                .bind(basis)
                .bind(purpose)
                .bind(&request.plan)
                .bind(controller_bytes(request.controller))
                .bind(now)
                .execute(tx)
                .await?;
                Ok(ObservationTicket {
                    machine: request.machine.clone(),
                    basis: Revision(u(basis)),
                })
            })
        })
        .await
    }

    /// [`Store::record_observation`](crate::store::Store::record_observation): record what the
    /// observation with this basis read.
    pub(in crate::store) async fn record_observation(
        &self,
        ticket: &ObservationTicket,
        facts: ObservedFacts,
    ) -> StoreResult<Revision> {
        const ACT: &str = "recording an observation";
        let facts = &facts;
        self.transaction(|tx| {
            Box::pin(async move {
                let machine = lock_machine(tx, &ticket.machine).await?;
                let basis = i(ticket.basis.0);
                let start = query(
                    "SELECT s.purpose, s.plan_id, s.controller, o.basis AS recorded \
                     FROM observation_starts s LEFT JOIN observations o \
                     ON o.machine_id = s.machine_id AND o.basis = s.basis \
                     WHERE s.machine_id = $1 AND s.basis = $2",
                )
                .bind(&ticket.machine)
                .bind(basis)
                .fetch_optional(tx)
                .await?
                .ok_or_else(|| refused(ACT, "no observation started at this basis"))?;
                if start.try_get::<Option<i64>, _>("recorded")?.is_some() {
                    return Err(refused(ACT, "the observation is already recorded").into());
                }
                let purpose: String = start.try_get("purpose")?;
                let plan: Option<String> = start.try_get("plan_id")?;
                let controller: Vec<u8> = start.try_get("controller")?;
                let now = self.store_time(tx).await?;
                let mut entry = Entry::controller(controller_of(&controller)?, "observation")
                    .detail(format!(
                        "purpose {purpose}, basis r{basis}, digest {}, config version {}",
                        facts
                            .digest
                            .map_or_else(|| "unread".to_owned(), |d| d.to_hex()),
                        facts
                            .config_version
                            .map_or_else(|| "unread".to_owned(), |v| v.to_string()),
                    ));
                entry.plan = plan.as_deref();
                let rev = append(tx, &ticket.machine, now, entry).await?;
                query(
                    "INSERT INTO observations (machine_id, basis, recorded_revision, \
                     recorded_at_ms, smbios_uuid, node_id, cluster_id, talos_version, digest, \
                     config_version, access_version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, \
                     $10, $11)",
                )
                .bind(&ticket.machine)
                .bind(basis)
                .bind(rev)
                .bind(now)
                .bind(&facts.smbios_uuid)
                .bind(&facts.node_id)
                .bind(&facts.cluster_id)
                .bind(&facts.talos_version)
                .bind(facts.digest.map(|d| d.to_hex()))
                .bind(facts.config_version.map(i))
                .bind(&facts.access_version)
                .execute(tx)
                .await?;
                // §6.1: a drift or restoration observation is compared with Applied.
                let source = match purpose_of(&purpose)? {
                    ObservationPurpose::Drift => Some(drift::DriftSource::Drift),
                    ObservationPurpose::Restoration => Some(drift::DriftSource::Restoration),
                    _ => None,
                };
                if let (Some(source), Some(digest)) = (source, facts.digest) {
                    let entry = Entry::controller(controller_of(&controller)?, "drift");
                    drift_rules(tx, &machine, basis, &digest.to_hex(), now, entry, source).await?;
                }
                Ok(Revision(u(rev)))
            })
        })
        .await
    }

    /// [`Store::record_dependency_check`](crate::store::Store::record_dependency_check): record
    /// a use-time dependency check (§3.1 item 2).
    pub(in crate::store) async fn record_dependency_check(
        &self,
        check: DependencyCheck,
    ) -> StoreResult<Revision> {
        let check = &check;
        self.transaction(|tx| {
            Box::pin(async move {
                let machine_id = read_plan(tx, &check.plan).await?.machine_id;
                lock_machine(tx, &machine_id).await?;
                let now = self.store_time(tx).await?;
                let rev = append(
                    tx,
                    &machine_id,
                    now,
                    Entry::controller(check.controller, "dependency_check")
                        .plan(&check.plan)
                        .detail(format!(
                            "access {} version {}; artifact decrypts: {}",
                            check.access_path, check.access_version, check.artifact_decrypts
                        )),
                )
                .await?;
                query(
                    "INSERT INTO dependency_checks (machine_id, revision, plan_id, controller, \
                     access_path, access_version, artifact_decrypts, checked_at_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                )
                .bind(&machine_id)
                .bind(rev)
                .bind(&check.plan)
                .bind(controller_bytes(check.controller))
                .bind(&check.access_path)
                .bind(&check.access_version)
                .bind(check.artifact_decrypts)
                .bind(now)
                .execute(tx)
                .await?;
                Ok(Revision(u(rev)))
            })
        })
        .await
    }
}

/// Apply §6.1 and §6.5 to an observation of `machine` at `basis` that read `digest`:
/// the facts are gathered here, the decision is `contract::drift::transition`'s, and
/// its result is written: a record opened (its opening entry is the digest-mismatch
/// alert, choice §10.35), extended with the latest differing digest, or closed as
/// returned. Anything the rules refuse leaves the record as it is.
/// §6.1, §5.2: a drift whose observed digest is the artifact of an operation on the
/// machine with an attempt accounted by decision is linked to that operation as a
/// possible late landing, one entry per operation naming it and the record. An
/// operation already linked to the record is not linked again.
async fn link_late_landings(
    tx: &mut Tx,
    machine: &str,
    record: i64,
    digest: &str,
    at: i64,
    actor: Entry<'_>,
) -> R<()> {
    let rows = query(
        "SELECT DISTINCT o.id FROM operations o JOIN plans p ON p.id = o.plan_id \
         JOIN attempts a ON a.operation_id = o.id \
         WHERE o.machine_id = $1 AND a.accounted_by_decision AND p.artifact_digest = $2 \
         AND NOT EXISTS (SELECT 1 FROM timeline t WHERE t.machine_id = o.machine_id \
           AND t.kind = 'late_landing_linked' AND t.operation_id = o.id \
           AND t.revision > $3) \
         ORDER BY o.id",
    )
    .bind(machine)
    .bind(digest)
    .bind(record - 1)
    .fetch_all(tx)
    .await?;
    for row in &rows {
        let operation: String = row.try_get("id")?;
        append(
            tx,
            machine,
            at,
            Entry {
                kind: "late_landing_linked",
                detail: format!(
                    "record r{record}: the drifted digest is the artifact of operation \
                     {operation}, whose attempt was accounted by decision: a possible late \
                     landing (§6.1, §5.2)"
                ),
                ..actor.clone()
            }
            .op(&operation),
        )
        .await?;
    }
    Ok(())
}

pub(in crate::store) async fn drift_rules(
    tx: &mut Tx,
    machine: &MachineRow,
    basis: i64,
    digest: &str,
    at: i64,
    actor: Entry<'_>,
    source: drift::DriftSource,
) -> R<()> {
    let Some(applied) = machine.applied_digest.as_deref() else {
        // No Applied: nothing to differ from (a machine awaiting its handover).
        return Ok(());
    };
    let observation = drift::DriftObservation {
        source,
        differs_from_applied: applied != digest,
        baseline_changed_since_basis: machine.baseline_revision > basis,
        higher_basis_digest_read: observations_after(tx, &machine.id, basis)
            .await?
            .iter()
            .any(|o| o.digest.is_some()),
        scope_held_since_basis: scope_held_since(tx, &machine.id, basis).await?,
    };
    let state = if machine.open_drift.is_some() {
        drift::DriftState::Open
    } else {
        drift::DriftState::None
    };
    let Ok(next) = drift::transition(state, drift::DriftEvent::Observed(observation)) else {
        return Ok(());
    };
    match (state, next) {
        (drift::DriftState::None, drift::DriftState::Open) => {
            let rev = append(
                tx,
                &machine.id,
                at,
                Entry {
                    kind: "drift_opened",
                    detail: format!(
                        "digest mismatch: observation basis r{basis} shows digest {digest}; \
                         Applied is {applied}"
                    ),
                    ..actor.clone()
                },
            )
            .await?;
            link_late_landings(tx, &machine.id, rev, digest, at, actor).await?;
            set_open_drift(tx, &machine.id, Some((rev, digest))).await
        }
        (drift::DriftState::Open, drift::DriftState::Open) => {
            let opened = machine.open_drift.unwrap_or_default();
            append(
                tx,
                &machine.id,
                at,
                Entry {
                    kind: "drift_extended",
                    detail: format!(
                        "record r{opened}: observation basis r{basis} shows digest {digest}"
                    ),
                    ..actor.clone()
                },
            )
            .await?;
            link_late_landings(tx, &machine.id, opened, digest, at, actor).await?;
            set_open_drift(tx, &machine.id, Some((opened, digest))).await
        }
        (_, drift::DriftState::Closed(closure)) => {
            let opened = machine.open_drift.unwrap_or_default();
            append(
                tx,
                &machine.id,
                at,
                Entry {
                    kind: "drift_closed",
                    detail: format!(
                        "record r{opened} closed ({}): observation basis r{basis} shows Applied's \
                         digest again",
                        closure_name(closure)
                    ),
                    ..actor
                },
            )
            .await?;
            set_open_drift(tx, &machine.id, None).await
        }
        _ => Ok(()),
    }
}

fn closure_name(closure: drift::Closure) -> &'static str {
    match closure {
        drift::Closure::Adopted => "adopted",
        drift::Closure::Reverted => "reverted",
        drift::Closure::Returned => "returned",
    }
}

/// Whether an operation held or took the machine scope at or after `basis` (§6.1):
/// one holds it now, or an entry naming an operation was appended after the basis.
async fn scope_held_since(tx: &mut Tx, machine: &str, basis: i64) -> R<bool> {
    if holder(tx, true, machine).await?.is_some() {
        return Ok(true);
    }
    let row = query(
        "SELECT revision FROM timeline WHERE machine_id = $1 AND revision > $2 \
         AND operation_id IS NOT NULL LIMIT 1",
    )
    .bind(machine)
    .bind(basis)
    .fetch_optional(tx)
    .await?;
    Ok(row.is_some())
}

/// Record the open drift record (its opening revision and latest differing digest),
/// or clear it.
pub(in crate::store) async fn set_open_drift(
    tx: &mut Tx,
    machine: &str,
    open: Option<(i64, &str)>,
) -> R<()> {
    query("UPDATE machines SET open_drift = $2, open_drift_digest = $3 WHERE id = $1")
        .bind(machine)
        .bind(open.map(|(rev, _)| rev))
        .bind(open.map(|(_, digest)| digest))
        .execute(tx)
        .await?;
    Ok(())
}
