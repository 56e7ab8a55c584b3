//! Decoding the rows the acts read — machines, plans, operations, observations,
//! attempts — into `super::common`'s row types, and attempt rows into the contract's
//! attempt records.
//!
//! A column added by a later migration reads as the value the migration gives it
//! from a store not yet migrated to it ([`absent_column`]), so that the migration
//! runner's tests can read a store at an older version.

use crate::contract::evidence::AttemptRecord;
use crate::contract::operation::OwnerToken;
use crate::store::StoreError;
use crate::store::common::*;
use crate::store::sql::Row;
use crate::store::transaction::R;

/// A machine row; the recovery-scope columns of version 5 read as their defaults from
/// a store not yet migrated to it.
pub(super) fn machine_row(r: &Row) -> Result<MachineRow, sqlx::Error> {
    Ok(MachineRow {
        id: r.try_get("id")?,
        identity_kind: r.try_get("identity_kind")?,
        identity_value: r.try_get("identity_value")?,
        cluster_id: r.try_get("cluster_id")?,
        endpoint: r.try_get("endpoint")?,
        rollout_scope: r.try_get("rollout_scope")?,
        talos_minor: r.try_get("talos_minor")?,
        revision: r.try_get("revision")?,
        assignment_revision: r.try_get("assignment_revision")?,
        desired_release: r.try_get("desired_release")?,
        applied_release: r.try_get("applied_release")?,
        applied_digest: r.try_get("applied_digest")?,
        baseline_revision: r.try_get("baseline_revision")?,
        frozen: r.try_get("frozen")?,
        released_epoch: r.try_get("released_epoch")?,
        open_drift: r.try_get("open_drift")?,
        open_drift_digest: r.try_get("open_drift_digest")?,
        scope_state: r
            .try_get("scope_state")
            .or_else(|e| absent_column(e, || "normal".to_owned()))?,
        scope_mark_desired: r
            .try_get("scope_mark_desired")
            .or_else(|e| absent_column(e, || None))?,
        scope_decision_revision: r
            .try_get("scope_decision_revision")
            .or_else(|e| absent_column(e, || None))?,
        import_digest: r
            .try_get("import_digest")
            .or_else(|e| absent_column(e, || None))?,
    })
}

/// The value a column added by a later migration stands for in a row read from a
/// store not yet migrated to it; any other error stays an error.
pub(super) fn absent_column<T>(
    e: sqlx::Error,
    default: impl FnOnce() -> T,
) -> Result<T, sqlx::Error> {
    match e {
        sqlx::Error::ColumnNotFound(_) => Ok(default()),
        other => Err(other),
    }
}

/// A plan row.
pub(super) fn plan_row(r: &Row) -> Result<PlanRow, sqlx::Error> {
    Ok(PlanRow {
        id: r.try_get("id")?,
        machine_id: r.try_get("machine_id")?,
        release_id: r.try_get("release_id")?,
        artifact_digest: r.try_get("artifact_digest")?,
        key_version: r.try_get("key_version")?,
        identity_kind: r.try_get("identity_kind")?,
        identity_value: r.try_get("identity_value")?,
        cluster_id: r.try_get("cluster_id")?,
        assignment_revision: r.try_get("assignment_revision")?,
        desired_release: r.try_get("desired_release")?,
        baseline_revision: r.try_get("baseline_revision")?,
        pre_dispatch_digest: r.try_get("pre_dispatch_digest")?,
        bound_drift: r.try_get("bound_drift")?,
        operation_kind: r.try_get("operation_kind")?,
        route: r.try_get("route")?,
        talos_minor: r.try_get("talos_minor")?,
        max_evidence_age_ms: r.try_get("max_evidence_age_ms")?,
        transport_deadline_ms: r.try_get("transport_deadline_ms")?,
        verification_deadline_ms: r.try_get("verification_deadline_ms")?,
        max_attempts: r.try_get("max_attempts")?,
        rollout_scope: r.try_get("rollout_scope")?,
        expires_at_ms: r.try_get("expires_at_ms")?,
        creator_id: r.try_get("creator_id")?,
        state: r.try_get("state")?,
        cancelled: r.try_get("cancelled")?,
    })
}

/// An owner token from its stored controller, generation and epoch.
pub(super) fn token_from(
    controller: &[u8],
    generation: i64,
    epoch: &[u8],
) -> Result<OwnerToken, StoreError> {
    Ok(OwnerToken {
        controller: controller_of(controller)?,
        generation: u(generation),
        epoch: epoch_of(epoch)?,
    })
}

/// An operation row, with its owner and, when classified safe to retry, who did so.
pub(super) fn op_row(r: &Row) -> R<OperationRow> {
    op_row_named(r, "")
}

/// An operation row whose columns are named with `prefix` before their own names
/// (as a statement that also reads a plan's columns names them).
pub(super) fn op_row_named(r: &Row, prefix: &str) -> R<OperationRow> {
    let col = |name: &str| format!("{prefix}{name}");
    let state: String = r.try_get(col("state").as_str())?;
    let oc: Vec<u8> = r.try_get(col("owner_controller").as_str())?;
    let oe: Vec<u8> = r.try_get(col("owner_epoch").as_str())?;
    let rc: Option<Vec<u8>> = r.try_get(col("retry_controller").as_str())?;
    let rg: Option<i64> = r.try_get(col("retry_generation").as_str())?;
    let re: Option<Vec<u8>> = r.try_get(col("retry_epoch").as_str())?;
    let retry_by = match (rc, rg, re) {
        (Some(c), Some(g), Some(e)) => Some(token_from(&c, g, &e)?),
        _ => None,
    };
    Ok(OperationRow {
        id: r.try_get(col("id").as_str())?,
        plan_id: r.try_get(col("plan_id").as_str())?,
        machine_id: r.try_get(col("machine_id").as_str())?,
        state: state_of(&state)?,
        owner: token_from(&oc, r.try_get(col("owner_generation").as_str())?, &oe)?,
        attempts: r.try_get(col("attempts").as_str())?,
        commit_revision: r.try_get(col("commit_revision").as_str())?,
        retry_revision: r.try_get(col("retry_revision").as_str())?,
        retry_by,
        last_fact_revision: r.try_get(col("last_fact_revision").as_str())?,
        restored: r.try_get(col("restored").as_str())?,
    })
}

/// A recorded observation joined with its start.
pub(super) fn obs_row(r: &Row) -> R<ObsRow> {
    let purpose: String = r.try_get("purpose")?;
    Ok(ObsRow {
        basis: r.try_get("basis")?,
        purpose: purpose_of(&purpose)?,
        started_at_ms: r.try_get("started_at_ms")?,
        recorded_at_ms: r.try_get("recorded_at_ms")?,
        smbios_uuid: r.try_get("smbios_uuid")?,
        node_id: r.try_get("node_id")?,
        cluster_id: r.try_get("cluster_id")?,
        talos_version: r.try_get("talos_version")?,
        digest: r.try_get("digest")?,
        config_version: r.try_get("config_version")?,
        access_version: r.try_get("access_version")?,
    })
}

/// An attempt row.
pub(super) fn attempt_row(r: &Row) -> R<AttemptRow> {
    let response: String = r.try_get("response")?;
    Ok(AttemptRow {
        attempt_no: r.try_get("attempt_no")?,
        revision: r.try_get("revision")?,
        transport_deadline_ms: r.try_get("transport_deadline_ms")?,
        verification_deadline_ms: r.try_get("verification_deadline_ms")?,
        response: response_of(&response)?,
        response_revision: r.try_get("response_revision")?,
        accounted_by_decision: r.try_get("accounted_by_decision")?,
        decision_revision: r.try_get("decision_revision")?,
    })
}

/// Attempt rows as the contract's attempt records (§5.1).
pub(super) fn records(attempts: &[AttemptRow]) -> Vec<AttemptRecord> {
    attempts
        .iter()
        .map(|a| AttemptRecord {
            response: a.response,
            accounted_by_decision: a.accounted_by_decision,
        })
        .collect()
}
