//! The reads and locks the acts share, each inside the caller's transaction, in the
//! order the contract takes its locks (§3.2, §4.1):
//!
//! - the machine row `FOR UPDATE` ([`lock_machine`]): it orders everything on a
//!   machine and guards its revision counter;
//! - the installation row (epoch, recovery mode), the standing approval with its
//!   approver's principal row, and the acting principal `FOR SHARE`
//!   ([`installation`], [`standing_approval`], [`require_role`]): a revocation or a
//!   recovery-mode entry waits for the act or precedes it;
//! - what comparisons 1–6 read: the plan, the operation, its attempts, the
//!   observations, the latest evidence and use-time check, the stored artifact, and
//!   which operation holds a scope ([`holder`], comparisons 4 and 5);
//! - the small updates of plan and operation states.
//!
//! The column lists the row decoders (`super::rows`) read are here, with the
//! statements that select them.

use crate::contract::accounting::RecordedRead;
use crate::contract::epoch::Epoch;
use crate::contract::operation::{ControllerId, OperationState};
use crate::contract::plan::{self, PlanState, Stage};
use crate::contract::{InstantMs, Role};
use crate::store::Actor;
use crate::store::common::*;
use crate::store::rows::{
    absent_column, attempt_row, machine_row, obs_row, op_row, op_row_named, plan_row,
};
use crate::store::sql::{Row, Tx, query};
use crate::store::transaction::{Fail, R};

// Every column, so that a row of a store not yet migrated to version 5 (recovery scope
// states) still reads: its scope is then `normal`, as the migration's default says.
macro_rules! machine_cols {
    () => {
        "*"
    };
}

// The columns `super::rows::plan_row` reads.
macro_rules! plan_cols {
    () => {
        "id, machine_id, release_id, artifact_digest, key_provider, key_id, key_version, \
         identity_kind, identity_value, cluster_id, assignment_revision, desired_release, \
         baseline_revision, pre_dispatch_digest, bound_drift, operation_kind, route, talos_minor, \
         max_evidence_age_ms, transport_deadline_ms, verification_deadline_ms, max_attempts, \
         rollout_scope, expires_at_ms, creator_id, state, cancelled"
    };
}

// The columns `super::rows::op_row` reads, handed to `$then` (after `$args`): the one
// list both forms below are written from.
macro_rules! op_columns {
    ($then:ident $(, $args:tt)*) => {
        $then!(
            $($args,)* id, plan_id, machine_id, state, owner_controller, owner_generation,
            owner_epoch, attempts, commit_revision, retry_revision, retry_controller,
            retry_generation, retry_epoch, last_fact_revision, restored
        )
    };
}

// Columns as they are named.
macro_rules! plain_cols {
    ($first:ident $(, $col:ident)*) => {
        concat!(stringify!($first) $(, ", ", stringify!($col))*)
    };
}

// Columns of table alias `$table`, each named `$prefix` before its own name (as
// `super::rows::op_row_named` reads them).
macro_rules! prefixed_cols {
    ($table:literal, $prefix:literal, $first:ident $(, $col:ident)*) => {
        concat!(
            $table, ".", stringify!($first), " AS ", $prefix, stringify!($first)
            $(, ", ", $table, ".", stringify!($col), " AS ", $prefix, stringify!($col))*
        )
    };
}

// The columns `super::rows::op_row` reads.
macro_rules! op_cols {
    () => {
        op_columns!(plain_cols)
    };
}

// The columns `super::rows::obs_row` reads, and the join of a recorded observation
// with its start (a statement continues with its `WHERE`).
macro_rules! obs_cols {
    () => {
        "s.basis, s.purpose, s.plan_id, s.controller, s.started_at_ms, o.recorded_at_ms, \
         o.smbios_uuid, o.node_id, o.cluster_id, o.talos_version, \
         o.digest, o.config_version, o.access_version \
         FROM observations o JOIN observation_starts s \
         ON s.machine_id = o.machine_id AND s.basis = o.basis"
    };
}

// The columns `super::rows::attempt_row` reads.
macro_rules! attempt_cols {
    () => {
        "attempt_no, revision, transport_deadline_ms, verification_deadline_ms, response, \
         response_revision, accounted_by_decision, decision_revision"
    };
}

// The standing approval of the plan parameter `$plan` with its approver's principal
// row, without its lock clause.
macro_rules! standing_approval_sql {
    ($plan:literal) => {
        concat!(
            "SELECT a.approver_id, a.epoch, a.revision, a.revoked, \
             p.revoked AS identity_revoked \
             FROM approvals a JOIN principals p ON p.id = a.approver_id WHERE a.plan_id = ",
            $plan,
            " ORDER BY a.seq DESC LIMIT 1"
        )
    };
}

/// The machine row, locked `FOR UPDATE` for the rest of the transaction: every act on
/// a machine takes it first, so acts on one machine are ordered (§4.1).
pub(super) async fn lock_machine(tx: &mut Tx, id: &str) -> R<MachineRow> {
    let row = query(concat!(
        "SELECT ",
        machine_cols!(),
        " FROM machines WHERE id = $1 FOR UPDATE"
    ))
    .bind(id)
    .fetch_optional(tx)
    .await?
    .ok_or_else(|| not_found("machine", id))?;
    Ok(machine_row(&row)?)
}

/// What the machine row is found through: a plan or an operation, each of which
/// names its machine once and for all.
#[derive(Clone, Copy)]
pub(super) enum Via {
    /// A plan; the lock also returns its operation kind.
    Plan,
    /// An operation; the lock also returns its plan.
    Operation,
}

// The machine row of the plan or operation `$1`, locked `FOR UPDATE`, with the column
// `$column` of `$table`'s row as `named`.
macro_rules! machine_via_sql {
    ($table:literal, $column:literal) => {
        concat!(
            "SELECT *, (SELECT ",
            $column,
            " FROM ",
            $table,
            " WHERE id = $1) AS named FROM machines WHERE id = (SELECT machine_id FROM ",
            $table,
            " WHERE id = $1) FOR UPDATE"
        )
    };
}

// On PostgreSQL, the machine row as `machine_via_sql` locks it, then the installation
// row read `FOR SHARE`, as JSON, in the same statement: the locked row comes from a
// materialized `WITH` the outer query reads first, so that the installation's share
// lock is taken after the machine's (the contract's order), and a share lock returns the
// row's newest version even when the statement waited for the machine.
macro_rules! machine_via_and_installation_sql {
    ($table:literal, $column:literal) => {
        concat!(
            "WITH m AS MATERIALIZED (",
            machine_via_sql!($table, $column),
            ") SELECT m.*, (SELECT row_to_json(i)::TEXT FROM \
             (SELECT * FROM installation WHERE id = 1 FOR SHARE) i) AS installation_json FROM m"
        )
    };
}

impl Via {
    fn what(self) -> &'static str {
        match self {
            Via::Plan => "plan",
            Via::Operation => "operation",
        }
    }

    fn sql(self, dialect: crate::store::sql::Dialect) -> &'static str {
        match self {
            Via::Plan => dialect.pick(
                machine_via_and_installation_sql!("plans", "operation_kind"),
                machine_via_sql!("plans", "operation_kind"),
            ),
            Via::Operation => dialect.pick(
                machine_via_and_installation_sql!("operations", "plan_id"),
                machine_via_sql!("operations", "plan_id"),
            ),
        }
    }
}

/// A machine row locked as [`lock_machine`] locks it, found through a plan or an
/// operation ([`lock_machine_via`]).
pub(super) struct LockedVia {
    /// The machine row.
    pub(super) machine: MachineRow,
    /// The plan's operation kind, or the operation's plan (neither ever changes, so a
    /// wait for the lock cannot leave it stale).
    pub(super) named: String,
    /// The installation row, read to share after the machine's lock.
    pub(super) inst: InstallationRow,
}

/// The machine row of plan or operation `key`, locked `FOR UPDATE` as [`lock_machine`]
/// locks it and found and locked in one statement, then the installation row read to
/// share as [`installation`] reads it: on PostgreSQL in that same statement.
pub(super) async fn lock_machine_via(tx: &mut Tx, via: Via, key: &str) -> R<LockedVia> {
    let dialect = tx.dialect();
    let row = query(via.sql(dialect))
        .bind(key)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| not_found(via.what(), key))?;
    let machine = machine_row(&row)?;
    let named = row.try_get("named")?;
    // SQLite's statement locks nothing and reads no installation; PostgreSQL's reads
    // it as JSON (none only if the row is missing, which `installation` then reports).
    let json: Option<String> = if dialect.locks_rows() {
        row.try_get("installation_json")?
    } else {
        None
    };
    let inst = match json {
        Some(json) => installation_of_json(&json)?,
        None => installation(tx, true).await?,
    };
    Ok(LockedVia {
        machine,
        named,
        inst,
    })
}

/// What a commitment or an attempt compares besides the rows it locks, read in one
/// statement after the locks ([`guards`]).
pub(super) struct Guards {
    /// The plan.
    pub(super) plan: PlanRow,
    /// The database's clock when the statement ran.
    pub(super) db_now: i64,
    /// The plan's operation, if it has one (comparison 0; the operation an attempt
    /// makes).
    pub(super) operation: Option<OperationRow>,
    /// The revision of that operation's last attempt, if it has one.
    pub(super) last_attempt: Option<i64>,
    /// The stored artifact the plan binds: its digest and key version.
    pub(super) artifact: Option<(String, i64)>,
    /// The operation holding the plan's machine scope (comparison 4).
    pub(super) machine_holder: Option<String>,
    /// The operation holding a slot of the plan's rollout scope (comparison 5).
    pub(super) slot_holder: Option<String>,
    /// The controller's latest use-time dependency check for the plan (§3.1 item 2).
    pub(super) check: Option<DependencyRow>,
    /// The controller's newest recorded evidence observation for the plan
    /// (comparison 3; [`Guards::evidence_after`] keeps it only if it began after a
    /// revision).
    pub(super) evidence: Option<ObsRow>,
    /// Every recorded observation of the machine newer than the evidence, in basis
    /// order.
    pub(super) newer: Vec<ObsRow>,
    /// The plan's standing approval, read to share with its approver's principal row
    /// (as [`standing_approval`] reads them).
    pub(super) approval: Option<ApprovalRow>,
}

// The values of an observation, as a JSON array `observation_of_json` reads.
macro_rules! obs_json_values {
    () => {
        "s.basis, s.purpose, s.started_at_ms, o.recorded_at_ms, o.smbios_uuid, o.node_id, \
         o.cluster_id, o.talos_version, o.digest, o.config_version, o.access_version"
    };
}

// The recorded observations of the plan's machine from the controller's ($2) newest
// recorded evidence for the plan begun after revision $3: the evidence, and every
// one newer.
macro_rules! obs_from_evidence {
    () => {
        "FROM observations o JOIN observation_starts s \
         ON s.machine_id = o.machine_id AND s.basis = o.basis \
         WHERE s.machine_id = plans.machine_id AND s.basis >= (SELECT es.basis \
         FROM observations eo JOIN observation_starts es \
         ON es.machine_id = eo.machine_id AND es.basis = eo.basis \
         WHERE es.machine_id = plans.machine_id AND es.plan_id = plans.id \
         AND es.controller = $2 AND es.purpose = 'evidence' \
         ORDER BY es.basis DESC LIMIT 1)"
    };
}

// The guards' statement, around the clock's expression `$now`, the JSON array of
// observations `$observations` and the standing approval's lock `$lock` (the three
// differ between the databases).
macro_rules! guards_sql {
    ($now:expr, $observations:expr, $lock:expr) => {
        concat!(
            "SELECT ",
            plan_cols!(),
            ", (SELECT a.digest FROM artifacts a WHERE a.release_id = plans.release_id \
              AND a.machine_id = plans.machine_id) AS guard_artifact_digest, \
             (SELECT a.key_version FROM artifacts a WHERE a.release_id = plans.release_id \
              AND a.machine_id = plans.machine_id) AS guard_artifact_key_version, \
             (SELECT o.id FROM operations o WHERE o.machine_id = plans.machine_id \
              AND o.state IN ('committed', 'sending', 'verifying', 'unresolved') LIMIT 1) \
              AS guard_machine_holder, \
             (SELECT o.id FROM operations o WHERE o.rollout_scope = plans.rollout_scope \
              AND o.state IN ('committed', 'sending', 'verifying', 'unresolved') LIMIT 1) \
              AS guard_slot_holder, \
             (SELECT d.access_version FROM dependency_checks d \
              WHERE d.machine_id = plans.machine_id AND d.plan_id = plans.id \
              AND d.controller = $2 ORDER BY d.revision DESC LIMIT 1) \
              AS guard_check_access_version, \
             (SELECT d.artifact_decrypts FROM dependency_checks d \
              WHERE d.machine_id = plans.machine_id AND d.plan_id = plans.id \
              AND d.controller = $2 ORDER BY d.revision DESC LIMIT 1) AS guard_check_decrypts, ",
            $observations,
            " AS guard_observations, ",
            $now,
            " AS guard_now, sa.approver_id, sa.epoch, sa.revision, sa.revoked, \
             sa.identity_revoked, op.* FROM plans LEFT JOIN (",
            standing_approval_sql!("$1"),
            $lock,
            ") sa ON TRUE LEFT JOIN (SELECT ",
            op_columns!(prefixed_cols, "o", "op_"),
            ", (SELECT t.revision FROM attempts t WHERE t.operation_id = o.id \
              ORDER BY t.attempt_no DESC LIMIT 1) AS op_last_attempt_revision \
             FROM operations o WHERE o.plan_id = $1) op ON TRUE WHERE id = $1"
        )
    };
}

/// In one statement, under the locks the caller holds: plan `plan`, the database's
/// clock, and every other row comparisons 0 and 2–5 read — the plan's operation with
/// its last attempt's revision, the stored artifact, the scopes' holders (as
/// [`holder`] finds them), `controller`'s latest use-time check, its newest recorded
/// evidence for the plan, every recorded observation of the machine newer than that
/// evidence (as [`observations_after`] reads them), and the plan's standing
/// approval read to share with its approver's principal row (as
/// [`standing_approval`] reads them: the snapshot is taken after the machine row's
/// lock, and whoever writes an approval or revokes an identity holds that lock first).
pub(super) async fn guards(tx: &mut Tx, plan: &str, controller: ControllerId) -> R<Guards> {
    let sql = tx.dialect().pick(
        guards_sql!(
            crate::store::sql::pg_now!(),
            concat!(
                "(SELECT json_agg(json_build_array(",
                obs_json_values!(),
                "))::TEXT ",
                obs_from_evidence!(),
                ")"
            ),
            " FOR SHARE"
        ),
        guards_sql!(
            crate::store::sql::sqlite_now!(),
            concat!(
                "(SELECT json_group_array(json_array(",
                obs_json_values!(),
                ")) ",
                obs_from_evidence!(),
                ")"
            ),
            ""
        ),
    );
    let r = query(sql)
        .bind(plan)
        .bind(controller_bytes(controller))
        .fetch_optional(tx)
        .await?
        .ok_or_else(|| not_found("plan", plan))?;
    let digest: Option<String> = r.try_get("guard_artifact_digest")?;
    let key_version: Option<i64> = r.try_get("guard_artifact_key_version")?;
    let access_version: Option<String> = r.try_get("guard_check_access_version")?;
    let decrypts: Option<bool> = r.try_get("guard_check_decrypts")?;
    let observations: Option<String> = r.try_get("guard_observations")?;
    let mut observations = observations_of_json(observations.as_deref())?.into_iter();
    // The first is the evidence itself (a machine's observations have distinct
    // bases); every other is newer.
    let evidence = observations.next();
    Ok(Guards {
        plan: plan_row(&r)?,
        db_now: r.try_get("guard_now")?,
        operation: match r.try_get::<Option<String>, _>("op_id")? {
            Some(_) => Some(op_row_named(&r, "op_")?),
            None => None,
        },
        last_attempt: r.try_get("op_last_attempt_revision")?,
        artifact: digest.zip(key_version),
        machine_holder: r.try_get("guard_machine_holder")?,
        slot_holder: r.try_get("guard_slot_holder")?,
        check: access_version
            .zip(decrypts)
            .map(|(access_version, artifact_decrypts)| DependencyRow {
                access_version,
                artifact_decrypts,
            }),
        evidence,
        newer: observations.collect(),
        approval: match r.try_get::<Option<String>, _>("approver_id")? {
            Some(_) => Some(approval_row(&r)?),
            None => None,
        },
    })
}

impl Guards {
    /// These guards with the evidence kept only if it began after revision `after`
    /// (a retry needs evidence newer than the last attempt). The evidence is the
    /// newest there is, so none newer than `after` exists if it is not; nor then is
    /// anything newer than it read.
    pub(super) fn evidence_after(mut self, after: i64) -> Self {
        if self.evidence.as_ref().is_some_and(|e| e.basis <= after) {
            self.evidence = None;
            self.newer.clear();
        }
        self
    }
}

/// An observation's values as the guards' statement aggregates them
/// ([`obs_json_values`]): basis, purpose, start, record, identity, version,
/// digest, configuration version and access version.
type ObsJson = (
    i64,
    String,
    i64,
    i64,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<String>,
);

/// The observations of a JSON array of [`ObsJson`] (none for `NULL`, PostgreSQL's
/// aggregate of no rows), in basis order.
fn observations_of_json(json: Option<&str>) -> R<Vec<ObsRow>> {
    let values: Vec<ObsJson> = match json {
        Some(text) => {
            serde_json::from_str(text).map_err(|e| Fail::Db(sqlx::Error::Decode(Box::new(e))))?
        }
        None => Vec::new(),
    };
    let mut rows = values
        .into_iter()
        .map(|v| -> R<ObsRow> {
            Ok(ObsRow {
                basis: v.0,
                purpose: purpose_of(&v.1)?,
                started_at_ms: v.2,
                recorded_at_ms: v.3,
                smbios_uuid: v.4,
                node_id: v.5,
                cluster_id: v.6,
                talos_version: v.7,
                digest: v.8,
                config_version: v.9,
                access_version: v.10,
            })
        })
        .collect::<R<Vec<_>>>()?;
    rows.sort_by_key(|o| o.basis);
    Ok(rows)
}

/// Every machine row, each locked `FOR UPDATE` in id order (the order every act that
/// takes several machine rows uses, so two of them cannot deadlock).
pub(super) async fn lock_all_machines(tx: &mut Tx) -> R<Vec<MachineRow>> {
    let ids = query("SELECT id FROM machines ORDER BY id")
        .fetch_all(tx)
        .await?;
    let mut machines = Vec::with_capacity(ids.len());
    for r in &ids {
        let id: String = r.try_get(0)?;
        machines.push(lock_machine(tx, &id).await?);
    }
    Ok(machines)
}

/// Whether recovery mode leaves `machine`'s scope shut: in effect, and the scope not
/// released in the current epoch (§7.3 step 7).
pub(super) fn unreleased(machine: &MachineRow, inst: &InstallationRow) -> R<bool> {
    Ok(inst.recovery_mode
        && machine
            .released_epoch
            .as_deref()
            .map(epoch_of)
            .transpose()?
            != Some(inst.epoch))
}

/// The machine row, without a lock.
pub(super) async fn read_machine(tx: &mut Tx, id: &str) -> R<MachineRow> {
    let row = query(concat!(
        "SELECT ",
        machine_cols!(),
        " FROM machines WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(tx)
    .await?
    .ok_or_else(|| not_found("machine", id))?;
    Ok(machine_row(&row)?)
}

/// Every machine, by identifier (no lock: a read).
pub(super) async fn all_machines(tx: &mut Tx) -> R<Vec<MachineRow>> {
    let rows = query(concat!(
        "SELECT ",
        machine_cols!(),
        " FROM machines ORDER BY id"
    ))
    .fetch_all(tx)
    .await?;
    Ok(rows.iter().map(machine_row).collect::<Result<_, _>>()?)
}

/// The installation row read to share (commitment, attempt) or to change (entry).
const INSTALLATION_SQL: [&str; 2] = [
    "SELECT * FROM installation WHERE id = 1 FOR SHARE",
    "SELECT * FROM installation WHERE id = 1 FOR UPDATE",
];

/// The installation row (epoch, recovery mode), read `FOR SHARE` when `share`, or
/// `FOR UPDATE` to change it.
pub(super) async fn installation(tx: &mut Tx, share: bool) -> R<InstallationRow> {
    let row = query(INSTALLATION_SQL[usize::from(!share)])
        .fetch_one(tx)
        .await?;
    let epoch: Vec<u8> = row.try_get("epoch")?;
    Ok(InstallationRow {
        epoch: epoch_of(&epoch)?,
        recovery_mode: row.try_get("recovery_mode")?,
        recovery_entered_at_ms: row
            .try_get("recovery_entered_at_ms")
            .or_else(|e| absent_column(e, || None))?,
        recovery_stopped_at_ms: row
            .try_get("recovery_stopped_at_ms")
            .or_else(|e| absent_column(e, || None))?,
        approval_policy: approval_policy(
            row.try_get("approvals_need_second_person")
                .or_else(|e| absent_column(e, || false))?,
        ),
    })
}

/// The installation row as PostgreSQL's `row_to_json` writes it; the columns of later
/// migrations read as their defaults when a store predates them, as [`installation`]
/// reads them.
#[derive(serde::Deserialize)]
struct InstallationJson {
    /// `bytea` as PostgreSQL's JSON writes it: `\x` and hexadecimal digits.
    epoch: String,
    recovery_mode: bool,
    #[serde(default)]
    recovery_entered_at_ms: Option<i64>,
    #[serde(default)]
    recovery_stopped_at_ms: Option<i64>,
    #[serde(default)]
    approvals_need_second_person: bool,
}

/// The installation row from its JSON ([`InstallationJson`]).
fn installation_of_json(json: &str) -> R<InstallationRow> {
    let decode = |e: String| Fail::Db(sqlx::Error::Decode(e.into()));
    let row: InstallationJson = serde_json::from_str(json).map_err(|e| decode(e.to_string()))?;
    // The epoch's own hexadecimal form, behind bytea's `\x`.
    let epoch = row
        .epoch
        .strip_prefix("\\x")
        .and_then(|hex| hex.parse::<Epoch>().ok())
        .ok_or_else(|| decode("the installation's epoch is not a 16-byte bytea".into()))?;
    Ok(InstallationRow {
        epoch,
        recovery_mode: row.recovery_mode,
        recovery_entered_at_ms: row.recovery_entered_at_ms,
        recovery_stopped_at_ms: row.recovery_stopped_at_ms,
        approval_policy: approval_policy(row.approvals_need_second_person),
    })
}

/// The approval policy the installation's `approvals_need_second_person` holds.
pub(super) fn approval_policy(second_person: bool) -> crate::store::ApprovalPolicy {
    if second_person {
        crate::store::ApprovalPolicy::SecondPerson
    } else {
        crate::store::ApprovalPolicy::SelfApprovalMarked
    }
}

/// A plan row: everything the plan binds.
pub(super) async fn read_plan(tx: &mut Tx, id: &str) -> R<PlanRow> {
    let row = query(concat!(
        "SELECT ",
        plan_cols!(),
        " FROM plans WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(tx)
    .await?
    .ok_or_else(|| not_found("plan", id))?;
    Ok(plan_row(&row)?)
}

/// The standing approval, read together with its approver's principal row so that a
/// revocation of either waits for this transaction (FOR SHARE on PostgreSQL).
pub(super) async fn standing_approval(tx: &mut Tx, plan: &str) -> R<Option<ApprovalRow>> {
    let row = query(concat!(standing_approval_sql!("$1"), " FOR SHARE"))
        .bind(plan)
        .fetch_optional(tx)
        .await?;
    row.as_ref().map(approval_row).transpose()
}

/// The standing approval's values from a row holding its columns.
fn approval_row(r: &Row) -> R<ApprovalRow> {
    let epoch: Vec<u8> = r.try_get("epoch")?;
    Ok(ApprovalRow {
        epoch: epoch_of(&epoch)?,
        revision: r.try_get("revision")?,
        revoked: r.try_get("revoked")?,
        identity_revoked: r.try_get("identity_revoked")?,
    })
}

/// An operation row.
pub(super) async fn read_op(tx: &mut Tx, id: &str) -> R<OperationRow> {
    let row = query(concat!(
        "SELECT ",
        op_cols!(),
        " FROM operations WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(tx)
    .await?
    .ok_or_else(|| not_found("operation", id))?;
    op_row(&row)
}

/// Every operation of `machine`, in commitment order.
pub(super) async fn operations_of_machine(tx: &mut Tx, machine: &str) -> R<Vec<OperationRow>> {
    let rows = query(concat!(
        "SELECT ",
        op_cols!(),
        " FROM operations WHERE machine_id = $1 ORDER BY commit_revision"
    ))
    .bind(machine)
    .fetch_all(tx)
    .await?;
    rows.iter().map(op_row).collect()
}

/// Every operation holding its scope (committed, sending, verifying, unresolved), by
/// machine and then commitment order.
pub(super) async fn open_operations(tx: &mut Tx) -> R<Vec<OperationRow>> {
    let rows = query(concat!(
        "SELECT ",
        op_cols!(),
        " FROM operations WHERE state IN ('committed', 'sending', 'verifying', 'unresolved') \
         ORDER BY machine_id, commit_revision"
    ))
    .fetch_all(tx)
    .await?;
    rows.iter().map(op_row).collect()
}

/// An operation's attempt rows, oldest first.
pub(super) async fn read_attempts(tx: &mut Tx, op: &str) -> R<Vec<AttemptRow>> {
    let rows = query(concat!(
        "SELECT ",
        attempt_cols!(),
        " FROM attempts WHERE operation_id = $1 ORDER BY attempt_no"
    ))
    .bind(op)
    .fetch_all(tx)
    .await?;
    rows.iter().map(attempt_row).collect()
}

/// Every recorded observation of `machine` with a basis after `basis`, in basis order.
pub(super) async fn observations_after(tx: &mut Tx, machine: &str, basis: i64) -> R<Vec<ObsRow>> {
    let rows = query(concat!(
        "SELECT ",
        obs_cols!(),
        " WHERE s.machine_id = $1 AND s.basis > $2 ORDER BY s.basis"
    ))
    .bind(machine)
    .bind(basis)
    .fetch_all(tx)
    .await?;
    rows.iter().map(obs_row).collect()
}

/// The recorded observation of `machine` with the highest basis, of any purpose.
pub(super) async fn latest_recorded(tx: &mut Tx, machine: &str) -> R<Option<ObsRow>> {
    let row = query(concat!(
        "SELECT ",
        obs_cols!(),
        " WHERE s.machine_id = $1 ORDER BY s.basis DESC LIMIT 1"
    ))
    .bind(machine)
    .fetch_optional(tx)
    .await?;
    row.as_ref().map(obs_row).transpose()
}

/// The latest restoration observation of `machine` that is recorded (§7.3 step 6).
pub(super) async fn latest_restoration(tx: &mut Tx, machine: &str) -> R<Option<ObsRow>> {
    let row = query(concat!(
        "SELECT ",
        obs_cols!(),
        " WHERE s.machine_id = $1 AND s.purpose = 'restoration' ORDER BY s.basis DESC LIMIT 1"
    ))
    .bind(machine)
    .fetch_optional(tx)
    .await?;
    row.as_ref().map(obs_row).transpose()
}

/// The operation holding the machine scope of machine `value` (`column_is_machine`)
/// or a slot of rollout scope `value`: one in committed, sending, verifying or
/// unresolved (comparisons 4 and 5).
pub(super) async fn holder(tx: &mut Tx, column_is_machine: bool, value: &str) -> R<Option<String>> {
    let row = if column_is_machine {
        query(
            "SELECT id FROM operations WHERE machine_id = $1 \
             AND state IN ('committed', 'sending', 'verifying', 'unresolved') LIMIT 1",
        )
        .bind(value)
        .fetch_optional(tx)
        .await?
    } else {
        query(
            "SELECT id FROM operations WHERE rollout_scope = $1 \
             AND state IN ('committed', 'sending', 'verifying', 'unresolved') LIMIT 1",
        )
        .bind(value)
        .fetch_optional(tx)
        .await?
    };
    row.map(|r| -> R<String> { Ok(r.try_get("id")?) })
        .transpose()
}

/// The principal acting, read FOR SHARE: it exists, holds the role, is not revoked.
pub(super) async fn require_role(
    tx: &mut Tx,
    actor: &Actor,
    allowed: &[Role],
    act: &'static str,
) -> R<bool> {
    if !allowed.contains(&actor.role) {
        return Err(refused(
            act,
            format!("the role {} may not do this", role_name(actor.role)),
        )
        .into());
    }
    let row = query(
        "SELECT p.kind, p.revoked FROM principals p JOIN principal_roles r \
         ON r.principal_id = p.id WHERE p.id = $1 AND r.role = $2 FOR SHARE",
    )
    .bind(&actor.id)
    .bind(role_name(actor.role))
    .fetch_optional(tx)
    .await?
    .ok_or_else(|| {
        refused(
            act,
            format!(
                "{} does not hold the role {}",
                actor.id,
                role_name(actor.role)
            ),
        )
    })?;
    if row.try_get::<bool, _>("revoked")? {
        return Err(refused(act, format!("the identity {} is revoked", actor.id)).into());
    }
    let kind: String = row.try_get("kind")?;
    Ok(kind == "human")
}

/// Moves an operation to `state` (the caller has checked the §4 table).
pub(super) async fn set_op_state(tx: &mut Tx, op: &str, state: OperationState) -> R<()> {
    query("UPDATE operations SET state = $2 WHERE id = $1")
        .bind(op)
        .bind(state.name())
        .execute(tx)
        .await?;
    Ok(())
}

/// Moves a plan to `state` (the caller has checked the plan's transition).
pub(super) async fn set_plan_state(tx: &mut Tx, plan: &str, state: PlanState) -> R<()> {
    query("UPDATE plans SET state = $2 WHERE id = $1")
        .bind(plan)
        .bind(state.name())
        .execute(tx)
        .await?;
    Ok(())
}

/// Comparison 1 for an operation's plan, as an attempt transaction makes it.
pub(super) fn authority_now(
    plan: &PlanRow,
    approval: Option<&ApprovalRow>,
    now: i64,
    epoch: Epoch,
    stage: Stage,
) -> Result<(), plan::AuthorityRefusal> {
    plan::check_authority(
        stage,
        &authority_facts(plan, approval),
        InstantMs(u(now)),
        epoch,
    )
}

/// Every recorded read of `machine`, as a §5.2 decision relies on it.
pub(super) async fn recorded_reads(tx: &mut Tx, machine: &str) -> R<Vec<RecordedRead>> {
    Ok(observations_after(tx, machine, 0)
        .await?
        .iter()
        .map(|o| RecordedRead {
            purpose: o.purpose,
            started_at: InstantMs(u(o.started_at_ms)),
            recorded_at: InstantMs(u(o.recorded_at_ms)),
            config_version: o.config_version.map(u),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::evidence::ObservationPurpose;

    #[test]
    fn an_installation_reads_from_json_and_a_malformed_epoch_is_an_error() {
        let Ok(inst) = installation_of_json(
            r#"{"epoch": "\\x00112233445566778899aabbccddeeff", "recovery_mode": true}"#,
        ) else {
            panic!("a well-formed installation did not read");
        };
        assert_eq!(
            inst.epoch,
            Epoch::from_bytes([
                0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd,
                0xee, 0xff
            ])
        );
        assert!(inst.recovery_mode);
        for epoch in [
            "00112233445566778899aabbccddeeff",
            "\\x0011",
            "\\xzz112233445566778899aabbccddeeff",
        ] {
            let json = format!(r#"{{"epoch": "{epoch}", "recovery_mode": false}}"#);
            assert!(installation_of_json(&json).is_err(), "{json} read");
        }
    }

    fn read(json: Option<&str>) -> Vec<ObsRow> {
        let Ok(rows) = observations_of_json(json) else {
            panic!("{json:?} did not read");
        };
        rows
    }

    #[test]
    fn no_observations_read_as_none() {
        // PostgreSQL aggregates no rows to NULL, SQLite to an empty array.
        assert!(read(None).is_empty());
        assert!(read(Some("[]")).is_empty());
    }

    #[test]
    fn observations_read_in_basis_order_with_their_values() {
        let json = r#"[
            [9, "drift", 300, 310, null, "n", null, "v1.13.6", null, null, null],
            [4, "evidence", 100, 110, "u", "n", "c", "v1.13.6", "d", 7, "a1"]
        ]"#;
        let rows = read(Some(json));
        assert_eq!(rows.iter().map(|o| o.basis).collect::<Vec<_>>(), vec![4, 9]);
        let ev = &rows[0];
        assert_eq!(ev.purpose, ObservationPurpose::Evidence);
        assert_eq!((ev.started_at_ms, ev.recorded_at_ms), (100, 110));
        assert_eq!(ev.smbios_uuid.as_deref(), Some("u"));
        assert_eq!(ev.cluster_id.as_deref(), Some("c"));
        assert_eq!(ev.digest.as_deref(), Some("d"));
        assert_eq!(ev.config_version, Some(7));
        assert_eq!(ev.access_version.as_deref(), Some("a1"));
        assert_eq!(rows[1].purpose, ObservationPurpose::Drift);
        assert_eq!(rows[1].smbios_uuid, None);
    }

    #[test]
    fn an_unknown_purpose_or_a_malformed_array_is_an_error() {
        let unknown = r#"[[1, "guess", 1, 1, null, null, null, null, null, null, null]]"#;
        assert!(observations_of_json(Some(unknown)).is_err());
        assert!(observations_of_json(Some("[[1, 2]]")).is_err());
    }
}
