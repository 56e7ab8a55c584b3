//! What both backends share: the rows they read, how contract values are spelled in
//! the database, and the comparisons that need no database once the rows are read
//! under lock (§3.2 items 2, 3 and 6).

use crate::contract::epoch::Epoch;
use crate::contract::evidence::{
    Health, Observation, ObservationPurpose, ObservedValues, Reading, ResponseClass,
    TransportOutcome,
};
use crate::contract::gate::{DriftRecordId, GateFacts, RecoveryGate};
use crate::contract::operation::{ControllerId, OperationKind, OperationState, OwnerToken};
use crate::contract::plan::{ApprovalRecord, AuthorityFacts, PlanState, SelfApproval};
use crate::contract::recovery::{BlockedOn, Dependency, RestorationReading, ScopeState};
use crate::contract::{InstantMs, Revision, Role};
use crate::digest::Digest;

use super::{IdentityKey, StoreError};

pub(super) fn db_err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Database(e.to_string())
}

pub(super) fn refused(act: &'static str, reason: impl Into<String>) -> StoreError {
    StoreError::Refused {
        act,
        reason: reason.into(),
    }
}

pub(super) fn not_found(what: &'static str, id: &str) -> StoreError {
    StoreError::NotFound {
        what,
        id: id.to_owned(),
    }
}

pub(super) fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

pub(super) fn u(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

pub(super) fn role_name(role: Role) -> &'static str {
    match role {
        Role::Author => "author",
        Role::Publisher => "publisher",
        Role::Approver => "approver",
        Role::RecoveryAdmin => "recovery-admin",
        Role::Automation => "automation",
    }
}

pub(super) fn role_of(name: &str) -> Result<Role, StoreError> {
    [
        Role::Author,
        Role::Publisher,
        Role::Approver,
        Role::RecoveryAdmin,
        Role::Automation,
    ]
    .into_iter()
    .find(|r| role_name(*r) == name)
    .ok_or_else(|| db_err(format!("unknown role {name:?}")))
}

pub(super) fn state_of(name: &str) -> Result<OperationState, StoreError> {
    OperationState::ALL
        .into_iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| db_err(format!("unknown operation state {name:?}")))
}

pub(super) fn plan_state_of(name: &str) -> Result<PlanState, StoreError> {
    PlanState::ALL
        .into_iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| db_err(format!("unknown plan state {name:?}")))
}

/// An operation kind from its stored name.
pub(super) fn operation_kind_of(name: &str) -> Result<OperationKind, StoreError> {
    match name {
        "apply_config" => Ok(OperationKind::ApplyConfig),
        "adopt" => Ok(OperationKind::Adopt),
        other => Err(db_err(format!("unknown operation kind {other:?}"))),
    }
}

pub(super) fn response_name(class: ResponseClass) -> &'static str {
    match class {
        ResponseClass::Pending => "pending",
        ResponseClass::Accepted => "accepted",
        ResponseClass::ValidationRejection => "validation_rejection",
        ResponseClass::OtherRefusal => "other_refusal",
        ResponseClass::Transport(TransportOutcome::DeadlineExceeded) => "deadline_exceeded",
        ResponseClass::Transport(TransportOutcome::ConnectionLost) => "connection_lost",
        ResponseClass::Transport(TransportOutcome::Unavailable) => "unavailable",
    }
}

pub(super) fn response_of(name: &str) -> Result<ResponseClass, StoreError> {
    Ok(match name {
        "pending" => ResponseClass::Pending,
        "accepted" => ResponseClass::Accepted,
        "validation_rejection" => ResponseClass::ValidationRejection,
        "other_refusal" => ResponseClass::OtherRefusal,
        "deadline_exceeded" => ResponseClass::Transport(TransportOutcome::DeadlineExceeded),
        "connection_lost" => ResponseClass::Transport(TransportOutcome::ConnectionLost),
        "unavailable" => ResponseClass::Transport(TransportOutcome::Unavailable),
        other => return Err(db_err(format!("unknown response class {other:?}"))),
    })
}

pub(super) fn purpose_name(p: ObservationPurpose) -> &'static str {
    match p {
        ObservationPurpose::Evidence => "evidence",
        ObservationPurpose::Completion => "completion",
        ObservationPurpose::Recovery => "recovery",
        ObservationPurpose::Drift => "drift",
        ObservationPurpose::Restoration => "restoration",
        ObservationPurpose::Publication => "publication",
    }
}

pub(super) fn purpose_of(name: &str) -> Result<ObservationPurpose, StoreError> {
    ObservationPurpose::ALL
        .into_iter()
        .find(|p| purpose_name(*p) == name)
        .ok_or_else(|| db_err(format!("unknown observation purpose {name:?}")))
}

pub(super) fn self_approval_name(mark: SelfApproval) -> &'static str {
    use crate::contract::plan::SelfApprovalBasis as B;
    match mark {
        SelfApproval::NotSelfApproval => "not_self_approval",
        SelfApproval::SelfApproval(B::CreatedPlan) => "self_approval:created_plan",
        SelfApproval::SelfApproval(B::AuthoredContent) => "self_approval:authored_content",
        SelfApproval::SelfApproval(B::ResponsibleForToken) => "self_approval:responsible_for_token",
        SelfApproval::Undetermined => "self_approval_undetermined",
    }
}

pub(super) fn controller_bytes(c: ControllerId) -> Vec<u8> {
    c.0.to_be_bytes().to_vec()
}

pub(super) fn controller_of(bytes: &[u8]) -> Result<ControllerId, StoreError> {
    let arr: [u8; 16] = bytes
        .try_into()
        .map_err(|_| db_err("a controller identifier is 16 bytes"))?;
    Ok(ControllerId(u128::from_be_bytes(arr)))
}

pub(super) fn epoch_of(bytes: &[u8]) -> Result<Epoch, StoreError> {
    let arr: [u8; 16] = bytes
        .try_into()
        .map_err(|_| db_err("an epoch is 16 bytes"))?;
    Ok(Epoch::from_bytes(arr))
}

/// The identity key stored as `kind` (`smbios_uuid` or `node_id`) and `value`.
pub(super) fn identity_key(kind: &str, value: String) -> Result<IdentityKey, StoreError> {
    match kind {
        "smbios_uuid" => Ok(IdentityKey::SmbiosUuid(value)),
        "node_id" => Ok(IdentityKey::NodeId(value)),
        other => Err(db_err(format!("unknown identity kind {other:?}"))),
    }
}

pub(super) fn digest_of(hex: &str) -> Result<Digest, StoreError> {
    hex.parse()
        .map_err(|_| db_err("a stored digest is not 64 hex digits"))
}

/// 16 bytes as 32 lowercase hex digits (an operation's or a blanket approval's
/// identifier).
pub(super) fn hex16(bytes: [u8; 16]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn token_text(t: &OwnerToken) -> String {
    format!(
        "controller {:032x} generation {} epoch {}",
        t.controller.0, t.generation, t.epoch
    )
}

/// The installation row.
#[derive(Debug, Clone)]
pub(super) struct InstallationRow {
    pub(super) epoch: Epoch,
    pub(super) recovery_mode: bool,
    /// When recovery mode was last entered: every pre-restore instance had stopped by
    /// then (§7.3 step 1).
    pub(super) recovery_entered_at_ms: Option<i64>,
    /// The stop of the pre-restore instances the entry recorded.
    pub(super) recovery_stopped_at_ms: Option<i64>,
    /// Whether approvals need a second person (a store migrated before the setting
    /// existed reads as the contract's default).
    pub(super) approval_policy: crate::store::ApprovalPolicy,
}

/// A machine row.
#[derive(Debug, Clone)]
pub(super) struct MachineRow {
    pub(super) id: String,
    pub(super) identity_kind: String,
    pub(super) identity_value: String,
    pub(super) cluster_id: String,
    pub(super) endpoint: String,
    pub(super) rollout_scope: String,
    pub(super) talos_minor: String,
    pub(super) revision: i64,
    pub(super) assignment_revision: i64,
    pub(super) desired_release: Option<String>,
    pub(super) applied_release: Option<String>,
    pub(super) applied_digest: Option<String>,
    pub(super) baseline_revision: i64,
    pub(super) frozen: bool,
    pub(super) released_epoch: Option<Vec<u8>>,
    pub(super) open_drift: Option<i64>,
    pub(super) open_drift_digest: Option<String>,
    /// The recovery scope state (§7.4), as [`scope_text`] writes it.
    pub(super) scope_state: String,
    /// The Desired release the scope's last mark checked (§7.3 step 7).
    pub(super) scope_mark_desired: Option<String>,
    /// The revision of the scope's step 1 accounting decision.
    pub(super) scope_decision_revision: Option<i64>,
    /// The configuration digest an existing-cluster import read (§6.3), which a
    /// handover's adopt plan binds as its baseline.
    pub(super) import_digest: Option<String>,
}

/// A plan row: everything the plan binds.
#[derive(Debug, Clone)]
pub(super) struct PlanRow {
    pub(super) id: String,
    pub(super) machine_id: String,
    pub(super) release_id: String,
    pub(super) artifact_digest: String,
    pub(super) key_version: i64,
    pub(super) identity_kind: String,
    pub(super) identity_value: String,
    pub(super) cluster_id: String,
    pub(super) assignment_revision: i64,
    pub(super) desired_release: String,
    pub(super) baseline_revision: i64,
    pub(super) pre_dispatch_digest: String,
    pub(super) bound_drift: Option<i64>,
    /// `apply_config`, or `adopt` for an adopt plan (§6.3).
    pub(super) operation_kind: String,
    pub(super) route: String,
    pub(super) talos_minor: String,
    pub(super) max_evidence_age_ms: i64,
    pub(super) transport_deadline_ms: i64,
    pub(super) verification_deadline_ms: i64,
    pub(super) max_attempts: i64,
    pub(super) rollout_scope: String,
    pub(super) expires_at_ms: i64,
    pub(super) creator_id: String,
    pub(super) state: String,
    pub(super) cancelled: bool,
}

/// The standing approval and its approver's revocation.
#[derive(Debug, Clone)]
pub(super) struct ApprovalRow {
    pub(super) epoch: Epoch,
    /// The revision of its timeline entry.
    pub(super) revision: i64,
    pub(super) revoked: bool,
    pub(super) identity_revoked: bool,
}

/// An operation row.
#[derive(Debug, Clone)]
pub(super) struct OperationRow {
    pub(super) id: String,
    pub(super) plan_id: String,
    pub(super) machine_id: String,
    pub(super) state: OperationState,
    pub(super) owner: OwnerToken,
    pub(super) attempts: i64,
    pub(super) commit_revision: i64,
    pub(super) retry_revision: Option<i64>,
    pub(super) retry_by: Option<OwnerToken>,
    pub(super) last_fact_revision: Option<i64>,
    pub(super) restored: bool,
}

/// An attempt row.
#[derive(Debug, Clone)]
pub(super) struct AttemptRow {
    pub(super) attempt_no: i64,
    pub(super) revision: i64,
    pub(super) transport_deadline_ms: i64,
    pub(super) verification_deadline_ms: i64,
    pub(super) response: ResponseClass,
    pub(super) response_revision: Option<i64>,
    pub(super) accounted_by_decision: bool,
    pub(super) decision_revision: Option<i64>,
}

/// A recorded observation joined with its start.
#[derive(Debug, Clone)]
pub(super) struct ObsRow {
    pub(super) basis: i64,
    pub(super) purpose: ObservationPurpose,
    pub(super) started_at_ms: i64,
    pub(super) recorded_at_ms: i64,
    pub(super) smbios_uuid: Option<String>,
    pub(super) node_id: Option<String>,
    pub(super) cluster_id: Option<String>,
    pub(super) talos_version: Option<String>,
    pub(super) digest: Option<String>,
    pub(super) config_version: Option<i64>,
    pub(super) access_version: Option<String>,
}

/// A recorded dependency check.
#[derive(Debug, Clone)]
pub(super) struct DependencyRow {
    pub(super) access_version: String,
    pub(super) artifact_decrypts: bool,
}

/// Comparison 1's facts from the rows read under lock.
pub(super) fn authority_facts(plan: &PlanRow, approval: Option<&ApprovalRow>) -> AuthorityFacts {
    AuthorityFacts {
        plan_state: plan_state_of(&plan.state).unwrap_or(PlanState::Proposed),
        expires_at: InstantMs(u(plan.expires_at_ms)),
        cancelled: plan.cancelled,
        approval: approval.map(|a| ApprovalRecord {
            epoch: a.epoch,
            revoked: a.revoked,
            identity_revoked: a.identity_revoked,
        }),
    }
}

/// Comparison 6's facts.
pub(super) fn gate_facts(
    machine: &MachineRow,
    plan: &PlanRow,
    installation: &InstallationRow,
) -> Result<GateFacts, StoreError> {
    let recovery = if installation.recovery_mode {
        RecoveryGate::InEffect {
            current: installation.epoch,
            release: machine
                .released_epoch
                .as_deref()
                .map(epoch_of)
                .transpose()?,
        }
    } else {
        RecoveryGate::NotInEffect
    };
    Ok(GateFacts {
        frozen: machine.frozen,
        open_drift: machine.open_drift.map(|r| DriftRecordId(Revision(u(r)))),
        bound_drift: plan.bound_drift.map(|r| DriftRecordId(Revision(u(r)))),
        recovery,
    })
}

/// Comparison 2: the bindings against the machine and the stored artifact. The
/// Desired term is compared at commitment only (§3.3).
pub(super) fn bindings_refusal(
    plan: &PlanRow,
    machine: &MachineRow,
    artifact: Option<(&str, i64)>,
    at_commitment: bool,
) -> Option<String> {
    match artifact {
        None => return Some("the bound artifact is no longer stored".into()),
        Some((digest, version))
            if digest != plan.artifact_digest || version != plan.key_version =>
        {
            return Some("the stored artifact differs from the bound one".into());
        }
        Some(_) => {}
    }
    if machine.assignment_revision != plan.assignment_revision {
        return Some(format!(
            "the assignment revision is {}, the plan binds {}",
            machine.assignment_revision, plan.assignment_revision
        ));
    }
    if machine.baseline_revision != plan.baseline_revision {
        return Some(format!(
            "the baseline revision moved to r{}, the plan binds r{}",
            machine.baseline_revision, plan.baseline_revision
        ));
    }
    if machine.endpoint != plan.route {
        return Some("the machine's endpoint is not the bound route".into());
    }
    if machine.identity_kind != plan.identity_kind
        || machine.identity_value != plan.identity_value
        || machine.cluster_id != plan.cluster_id
    {
        return Some("the machine's recorded identity is not the bound one".into());
    }
    if at_commitment && machine.desired_release.as_deref() != Some(plan.desired_release.as_str()) {
        return Some(format!(
            "Desired is {}, the plan binds {}",
            machine.desired_release.as_deref().unwrap_or("(none)"),
            plan.desired_release
        ));
    }
    None
}

/// How comparison 3 failed.
#[derive(Debug, Clone)]
pub(super) struct EvidenceRefusal {
    pub(super) reason: String,
    /// The evidence showed an unexpected digest: the drift rules run on it.
    pub(super) digest: Option<(i64, String)>,
    /// The evidence is missing rather than contradicting (choice §10.28).
    pub(super) missing: bool,
}

fn minor_of(version: &str) -> Option<String> {
    let v = version.strip_prefix('v').unwrap_or(version);
    let mut parts = v.split('.');
    let major = parts.next()?;
    let minor = parts.next()?;
    Some(format!("{major}.{minor}"))
}

/// Whether two readings disagree on a value both read.
fn disagree<T: PartialEq>(a: Option<&T>, b: Option<&T>) -> bool {
    matches!((a, b), (Some(x), Some(y)) if x != y)
}

/// Whether a later observation contradicts a value the earlier one read.
fn contradicts(earlier: &ObsRow, later: &ObsRow) -> bool {
    disagree(earlier.digest.as_ref(), later.digest.as_ref())
        || disagree(earlier.smbios_uuid.as_ref(), later.smbios_uuid.as_ref())
        || disagree(earlier.node_id.as_ref(), later.node_id.as_ref())
        || disagree(earlier.cluster_id.as_ref(), later.cluster_id.as_ref())
}

/// Whether a later observation disagrees with an earlier one on a postcondition
/// `plan` binds (§4): a value both read differs, or the later read shows an SMBIOS
/// UUID on a machine recorded by node ID where the earlier one showed none, which
/// makes it another machine (choice §10.26) although no value both read differs.
pub(super) fn disagrees_on_postcondition(plan: &PlanRow, earlier: &ObsRow, later: &ObsRow) -> bool {
    let uuid_appeared = plan.identity_kind == "node_id"
        && earlier.smbios_uuid.is_none()
        && later.smbios_uuid.is_some();
    contradicts(earlier, later) || uuid_appeared
}

/// Whether the observation read the bound identity (choice §10.26).
pub(super) fn identity_matches(plan: &PlanRow, obs: &ObsRow) -> Result<(), String> {
    match plan.identity_kind.as_str() {
        "node_id" => {
            if obs.node_id.as_deref() != Some(plan.identity_value.as_str()) {
                return Err("the node ID read is not the bound one".into());
            }
            if obs.smbios_uuid.is_some() {
                return Err(
                    "the machine is recorded by node ID, yet the node reported an SMBIOS UUID"
                        .into(),
                );
            }
        }
        _ => {
            if obs.smbios_uuid.as_deref() != Some(plan.identity_value.as_str()) {
                return Err("the SMBIOS UUID read is not the bound one".into());
            }
        }
    }
    if obs.cluster_id.as_deref() != Some(plan.cluster_id.as_str()) {
        return Err("the cluster ID read is not the bound one".into());
    }
    Ok(())
}

/// Comparison 3 over the rows read under lock: `evidence` is the newest recorded
/// evidence observation for this plan by this controller, `newer` every recorded
/// observation of the machine with a higher basis (one that disagrees with the
/// evidence by `disagrees_on_postcondition` refuses: a value both read differs, or
/// an SMBIOS UUID appeared on a machine recorded by node ID), `check` the controller's latest
/// dependency check for the plan, `approved_at` the revision of the standing
/// approval.
///
/// Choice §10.28 sorts the outcomes in two: evidence that is missing (none, begun
/// before the approval, older than the plan allows, identity, configuration or
/// running version unread, no use-time check yet) decides nothing, and fresh evidence
/// is taken; evidence that shows another value refuses. The observed assignment is
/// not compared: comparison 2 compares the machine's assignment head under its lock,
/// and the Talos API carries no assignment of its own.
pub(super) fn evidence_refusal(
    plan: &PlanRow,
    evidence: Option<&ObsRow>,
    newer: &[ObsRow],
    check: Option<&DependencyRow>,
    now: i64,
    retry: bool,
    approved_at: Option<i64>,
) -> Option<EvidenceRefusal> {
    let missing = |reason: String| {
        Some(EvidenceRefusal {
            reason,
            digest: None,
            missing: true,
        })
    };
    let refused = |reason: String| {
        Some(EvidenceRefusal {
            reason,
            digest: None,
            missing: false,
        })
    };
    let Some(ev) = evidence else {
        return missing(if retry {
            "no evidence recorded for this operation by this controller since its last attempt"
                .into()
        } else {
            "no evidence recorded for this plan by this controller".into()
        });
    };
    if let Some(approval) = approved_at
        && ev.basis < approval
    {
        return missing(format!(
            "the evidence (basis r{}) began before the approval (r{approval})",
            ev.basis
        ));
    }
    let age = now.saturating_sub(ev.started_at_ms);
    if age > plan.max_evidence_age_ms {
        return missing(format!(
            "the evidence is {age}ms old; the plan allows {}ms",
            plan.max_evidence_age_ms
        ));
    }
    if ev.smbios_uuid.is_none() && ev.node_id.is_none() && ev.cluster_id.is_none() {
        return missing("the evidence did not read the machine's identity".into());
    }
    let Some(version) = ev.talos_version.as_deref() else {
        return missing("the evidence did not read the running Talos version".into());
    };
    let Some(digest) = ev.digest.as_deref() else {
        return missing("the evidence did not read the configuration digest".into());
    };
    if let Err(reason) = identity_matches(plan, ev) {
        return refused(reason);
    }
    if minor_of(version).as_deref() != Some(plan.talos_minor.as_str()) {
        return refused("the running Talos minor is not the artifact's".into());
    }
    if digest != plan.pre_dispatch_digest && !(retry && digest == plan.artifact_digest) {
        return Some(EvidenceRefusal {
            reason: format!(
                "the configuration digest read by observation r{} is not the expected \
                 pre-dispatch digest",
                ev.basis
            ),
            digest: Some((ev.basis, digest.to_owned())),
            missing: false,
        });
    }
    if let Some(later) = newer
        .iter()
        .find(|o| disagrees_on_postcondition(plan, ev, o))
    {
        return refused(format!(
            "a newer observation (basis r{}) contradicts the evidence",
            later.basis
        ));
    }
    match check {
        None => {
            missing("no use-time dependency check recorded for this plan by this controller".into())
        }
        Some(c) if !c.artifact_decrypts => {
            refused("the artifact did not decrypt with the bound key version".into())
        }
        Some(c) if Some(c.access_version.as_str()) != ev.access_version.as_deref() => refused(
            "the last use-time check read another Talos access version than the evidence".into(),
        ),
        Some(_) => None,
    }
}

/// The contract's view of a recorded observation, against the plan's digests.
///
/// The Talos API carries no assignment, so no observation reads one: the assignment
/// term is the machine's assignment head, read under the machine row's lock by the
/// caller (`assignment_head`), against the plan's bound revision — comparison 2's
/// term, which §8 invariant 9 keeps still while the operation holds the scope.
pub(super) fn contract_observation(
    plan: &PlanRow,
    obs: &ObsRow,
    assignment_head: i64,
) -> Observation {
    let identity_read = obs.smbios_uuid.is_some() || obs.node_id.is_some();
    let reading = match (&obs.digest, identity_read) {
        (Some(d), true) => Reading::Read(ObservedValues {
            digest: crate::contract::evidence::match_digest(
                d.as_str(),
                plan.artifact_digest.as_str(),
                plan.pre_dispatch_digest.as_str(),
            ),
            identity_matches: identity_matches(plan, obs).is_ok(),
            assignment_matches: assignment_head == plan.assignment_revision,
            health: Health::NotBound,
        }),
        _ => Reading::Unread,
    };
    Observation {
        purpose: obs.purpose,
        reading,
    }
}

/// How a recovery scope state (§7.4) is stored.
pub(super) fn scope_text(state: ScopeState) -> &'static str {
    match state {
        ScopeState::Normal => "normal",
        ScopeState::PreRestoreUnaccounted => "pre_restore_unaccounted",
        ScopeState::Unresolved => "unresolved",
        ScopeState::Blocked(BlockedOn::AwaitingMark) => "blocked:awaiting_mark",
        ScopeState::Blocked(BlockedOn::NoRestorationObservation) => {
            "blocked:no_restoration_observation"
        }
        ScopeState::Blocked(BlockedOn::ObservationFailed) => "blocked:observation_failed",
        ScopeState::Blocked(BlockedOn::IdentityMismatch) => "blocked:identity_mismatch",
        ScopeState::Blocked(BlockedOn::MissingDependency(Dependency::ReleaseRecord)) => {
            "blocked:missing_release_record"
        }
        ScopeState::Blocked(BlockedOn::MissingDependency(Dependency::KeyVersion)) => {
            "blocked:missing_key_version"
        }
        ScopeState::Blocked(BlockedOn::MissingDependency(Dependency::ExecutorCredentials)) => {
            "blocked:missing_executor_credentials"
        }
        ScopeState::Ready => "ready",
        ScopeState::Released => "released",
    }
}

/// The recovery scope state stored as `text`.
pub(super) fn scope_of(text: &str) -> Result<ScopeState, StoreError> {
    ScopeState::ALL
        .into_iter()
        .find(|s| scope_text(*s) == text)
        .ok_or_else(|| db_err(format!("unknown recovery scope state {text:?}")))
}

/// What a restoration observation showed against the machine record (§7.3 step 6,
/// choice §10.26): `decided_at` is the revision of the scope's step 1 decision.
pub(super) fn restoration_reading(
    machine: &MachineRow,
    obs: Option<&ObsRow>,
    decided_at: Option<i64>,
) -> RestorationReading {
    let Some(obs) = obs else {
        return RestorationReading::None;
    };
    if decided_at.is_none_or(|d| obs.basis <= d) {
        return RestorationReading::BeforeDecision;
    }
    if obs.smbios_uuid.is_none() && obs.node_id.is_none() && obs.cluster_id.is_none() {
        return RestorationReading::Failed;
    }
    let key_matches = match machine.identity_kind.as_str() {
        "node_id" => {
            obs.node_id.as_deref() == Some(machine.identity_value.as_str())
                && obs.smbios_uuid.is_none()
        }
        _ => obs.smbios_uuid.as_deref() == Some(machine.identity_value.as_str()),
    };
    if key_matches && obs.cluster_id.as_deref() == Some(machine.cluster_id.as_str()) {
        RestorationReading::Matches
    } else {
        RestorationReading::IdentityMismatch
    }
}
