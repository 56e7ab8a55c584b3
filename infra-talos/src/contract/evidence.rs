//! Recorded evidence the state machines read: attempt responses and their accounting,
//! observations, withdrawals of authority (§4, §4.1, §5.1).
//!
//! These are facts as the timeline records them; nothing here decides an outcome.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Revision;

/// How a request ended without an answer from the node (§5.1). Recorded, but it
/// accounts for nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportOutcome {
    /// The transport deadline ended the client's wait.
    DeadlineExceeded,
    /// The connection broke after the request left.
    ConnectionLost,
    /// gRPC Unavailable, a dial failure included: whether it proves no send is unknown.
    Unavailable,
}

/// The recorded response class of one attempt (§4.1 response entry, §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseClass {
    /// Nothing recorded yet.
    Pending,
    /// The node accepted the request.
    Accepted,
    /// gRPC InvalidArgument of the validation-error class: the one class shown to
    /// precede any mutation.
    ValidationRejection,
    /// Any other code the node returned, another InvalidArgument (such as the
    /// immediate-mode refusal) included. It accounts for the attempt but decides
    /// no outcome.
    OtherRefusal,
    /// No answer from the node.
    Transport(TransportOutcome),
}

impl ResponseClass {
    /// Whether the node itself answered, which is what accounts for an attempt (§5.1).
    #[must_use]
    pub const fn from_target(self) -> bool {
        matches!(
            self,
            Self::Accepted | Self::ValidationRejection | Self::OtherRefusal
        )
    }
}

/// One recorded attempt, as classification reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// The response class recorded for it.
    pub response: ResponseClass,
    /// Whether recovery-admin recorded a §5.2 accounting decision covering it (see
    /// [`super::accounting::check_decision`]).
    pub accounted_by_decision: bool,
}

impl AttemptRecord {
    /// An attempt with this response and no accounting decision.
    #[must_use]
    pub const fn responded(response: ResponseClass) -> Self {
        Self {
            response,
            accounted_by_decision: false,
        }
    }

    /// How the attempt is accounted for (§4): a response from the node first, then a
    /// §5.2 decision; a transport outcome is neither.
    #[must_use]
    pub const fn accounting(&self) -> Accounting {
        if self.response.from_target() {
            Accounting::ByResponse
        } else if self.accounted_by_decision {
            Accounting::ByDecision
        } else {
            Accounting::Unaccounted
        }
    }
}

/// How an attempt is accounted for (§4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Accounting {
    /// A response from the node is recorded.
    ByResponse,
    /// A §5.2 accounting decision is recorded.
    ByDecision,
    /// Neither: the attempt may still land.
    Unaccounted,
}

/// Counts over an operation's recorded attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AttemptSummary {
    /// Attempts recorded.
    pub recorded: usize,
    /// Attempts with neither a node response nor a decision.
    pub unaccounted: usize,
    /// Attempts the node accepted.
    pub accepted: usize,
    /// Attempts with a validation rejection.
    pub validation_rejected: usize,
}

impl AttemptSummary {
    /// Count `attempts`.
    #[must_use]
    pub fn of(attempts: &[AttemptRecord]) -> Self {
        let mut s = Self::default();
        for a in attempts {
            s.recorded += 1;
            if a.accounting() == Accounting::Unaccounted {
                s.unaccounted += 1;
            }
            match a.response {
                ResponseClass::Accepted => s.accepted += 1,
                ResponseClass::ValidationRejection => s.validation_rejected += 1,
                _ => {}
            }
        }
        s
    }

    /// Every recorded attempt is accounted for (vacuously true with none).
    #[must_use]
    pub const fn all_accounted(&self) -> bool {
        self.unaccounted == 0
    }

    /// At least one attempt, and every one has a validation rejection (§5.1 rejected).
    #[must_use]
    pub const fn all_validation_rejected(&self) -> bool {
        self.recorded > 0 && self.validation_rejected == self.recorded
    }
}

/// Something recorded after commitment that takes authority away from an operation
/// (§3.3). All but [`Withdrawal::GateClosed`] are grounds for cancelled when no
/// attempt is recorded; a closed gate can reopen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Withdrawal {
    /// The approval was revoked.
    ApprovalRevoked,
    /// The approving identity was revoked.
    IdentityRevoked,
    /// The plan was cancelled.
    PlanCancelled,
    /// The plan expired.
    PlanExpired,
    /// The approval belongs to an earlier or other epoch.
    ForeignEpoch,
    /// The scope gate closed (freeze or recovery mode).
    GateClosed,
}

impl Withdrawal {
    /// Every withdrawal.
    pub const ALL: [Self; 6] = [
        Self::ApprovalRevoked,
        Self::IdentityRevoked,
        Self::PlanCancelled,
        Self::PlanExpired,
        Self::ForeignEpoch,
        Self::GateClosed,
    ];

    /// The cause it gives for cancelled, or `None` for a closed gate (§3.3, §4).
    #[must_use]
    pub const fn cancel_cause(self) -> Option<CancelCause> {
        match self {
            Self::ApprovalRevoked => Some(CancelCause::ApprovalRevoked),
            Self::IdentityRevoked => Some(CancelCause::IdentityRevoked),
            Self::PlanCancelled => Some(CancelCause::PlanCancelled),
            Self::PlanExpired => Some(CancelCause::PlanExpired),
            Self::ForeignEpoch => Some(CancelCause::ForeignEpoch),
            Self::GateClosed => None,
        }
    }
}

impl fmt::Display for Withdrawal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ApprovalRevoked => "the approval was revoked",
            Self::IdentityRevoked => "the approving identity was revoked",
            Self::PlanCancelled => "the plan was cancelled",
            Self::PlanExpired => "the plan expired",
            Self::ForeignEpoch => "the approval is from another epoch",
            Self::GateClosed => "the scope gate closed",
        })
    }
}

/// What ended an operation as cancelled (§5.1 cancelled row).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelCause {
    /// The approval was revoked.
    ApprovalRevoked,
    /// The approving identity was revoked.
    IdentityRevoked,
    /// The plan was cancelled.
    PlanCancelled,
    /// The plan expired.
    PlanExpired,
    /// The approval belongs to an earlier or other epoch.
    ForeignEpoch,
    /// recovery-admin resolved the operation as cancelled on a recorded reason.
    Resolution,
}

impl fmt::Display for CancelCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ApprovalRevoked => "the approval was revoked",
            Self::IdentityRevoked => "the approving identity was revoked",
            Self::PlanCancelled => "the plan was cancelled",
            Self::PlanExpired => "the plan expired",
            Self::ForeignEpoch => "the approval is from another epoch",
            Self::Resolution => "recovery-admin resolved it on a recorded reason",
        })
    }
}

/// Whether an operation came through a restore, and where its scope stands (§7.3
/// step 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RestoreStatus {
    /// The operation was not pending at a recovery-mode entry.
    NotRestored,
    /// A restored operation whose scope still waits for the §7.3 step 1 decision.
    ScopeUnaccounted,
    /// A restored operation whose scope the step 1 decision has accounted.
    ScopeAccounted,
}

impl RestoreStatus {
    /// Every status.
    pub const ALL: [Self; 3] = [
        Self::NotRestored,
        Self::ScopeUnaccounted,
        Self::ScopeAccounted,
    ];

    /// Whether the operation came through a restore.
    #[must_use]
    pub const fn restored(self) -> bool {
        !matches!(self, Self::NotRestored)
    }
}

/// Why an observation was taken (§4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObservationPurpose {
    /// Dispatch evidence for a plan (§3.1).
    Evidence,
    /// Completion of an operation (§4).
    Completion,
    /// Recovery after a lost response or a restore (§5.2, §7.3 step 1).
    Recovery,
    /// Periodic drift detection (§6.1).
    Drift,
    /// Restoration after recovery-mode entry (§7.3 step 4).
    Restoration,
    /// Publication's read-only look at the node.
    Publication,
}

impl ObservationPurpose {
    /// Every purpose.
    pub const ALL: [Self; 6] = [
        Self::Evidence,
        Self::Completion,
        Self::Recovery,
        Self::Drift,
        Self::Restoration,
        Self::Publication,
    ];
}

/// How an observed configuration digest compares with the plan's two digests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DigestMatch {
    /// The bound artifact's digest.
    Artifact,
    /// The bound pre-dispatch digest (and not the artifact's).
    PreDispatch,
    /// Neither.
    Other,
}

/// Compare an observed digest with the artifact's and the pre-dispatch one. When the
/// two bound digests are equal, a match counts as the artifact's.
#[must_use]
pub fn match_digest<D: PartialEq + ?Sized>(
    observed: &D,
    artifact: &D,
    pre_dispatch: &D,
) -> DigestMatch {
    if observed == artifact {
        DigestMatch::Artifact
    } else if observed == pre_dispatch {
        DigestMatch::PreDispatch
    } else {
        DigestMatch::Other
    }
}

/// A bound health check's result (§4, choices §10.25 and §10.33).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// The plan binds no health check.
    NotBound,
    /// The bound check passes.
    Passing,
    /// The bound check fails.
    Failing,
}

/// The postcondition values an observation read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ObservedValues {
    /// The configuration digest, against the plan's digests.
    pub digest: DigestMatch,
    /// Whether identity key and cluster ID match the bound machine.
    pub identity_matches: bool,
    /// Whether the assignment revision is the bound one.
    pub assignment_matches: bool,
    /// The bound health check.
    pub health: Health,
}

/// What an observation read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reading {
    /// A value could not be read: it establishes and contradicts nothing.
    Unread,
    /// Every postcondition value was read.
    Read(ObservedValues),
}

/// An observation that counts for an operation: recorded, tied to it, ordered after
/// its last accounting and not overtaken by a disagreeing higher-basis read (see
/// [`observation_counts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Observation {
    /// Why it was taken.
    pub purpose: ObservationPurpose,
    /// What it read.
    pub reading: Reading,
}

/// Whether an observation with this basis may decide an operation (§4): its read
/// began after the operation's last accounting entry, and no later-based recorded
/// observation disagrees with it on a bound postcondition.
#[must_use]
pub fn observation_counts(
    basis: Revision,
    last_accounting: Option<Revision>,
    higher_basis_disagrees: bool,
) -> bool {
    let after_accounting = last_accounting.is_none_or(|acc| basis > acc);
    after_accounting && !higher_basis_disagrees
}

/// What a completion observation says about the postconditions (§4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompletionVerdict {
    /// No completion observation that counts, or one that could not read a value.
    Absent,
    /// Every postcondition holds.
    Establishes,
    /// The digest, the identity or the assignment contradicts them.
    Contradicts,
    /// Everything holds but a bound health check is red; that disproves the
    /// postconditions only once the verification deadline is reached (choice §10.25).
    HealthFailing,
}

impl CompletionVerdict {
    /// Every verdict.
    pub const ALL: [Self; 4] = [
        Self::Absent,
        Self::Establishes,
        Self::Contradicts,
        Self::HealthFailing,
    ];
}

/// The verdict of an observation: only one of purpose completion that read every
/// value establishes or contradicts anything.
#[must_use]
pub fn completion_verdict(observation: Option<&Observation>) -> CompletionVerdict {
    let Some(obs) = observation else {
        return CompletionVerdict::Absent;
    };
    if obs.purpose != ObservationPurpose::Completion {
        return CompletionVerdict::Absent;
    }
    let Reading::Read(v) = obs.reading else {
        return CompletionVerdict::Absent;
    };
    if !v.identity_matches || !v.assignment_matches || v.digest != DigestMatch::Artifact {
        CompletionVerdict::Contradicts
    } else if v.health == Health::Failing {
        CompletionVerdict::HealthFailing
    } else {
        CompletionVerdict::Establishes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_outcomes_account_for_nothing() {
        for t in [
            TransportOutcome::DeadlineExceeded,
            TransportOutcome::ConnectionLost,
            TransportOutcome::Unavailable,
        ] {
            let a = AttemptRecord::responded(ResponseClass::Transport(t));
            assert_eq!(a.accounting(), Accounting::Unaccounted);
            let decided = AttemptRecord {
                accounted_by_decision: true,
                ..a
            };
            assert_eq!(decided.accounting(), Accounting::ByDecision);
        }
        assert_eq!(
            AttemptRecord::responded(ResponseClass::Pending).accounting(),
            Accounting::Unaccounted
        );
        assert_eq!(
            AttemptRecord::responded(ResponseClass::OtherRefusal).accounting(),
            Accounting::ByResponse
        );
    }

    #[test]
    fn digest_matching_prefers_the_artifact() {
        assert_eq!(match_digest("a", "a", "a"), DigestMatch::Artifact);
        assert_eq!(match_digest("p", "a", "p"), DigestMatch::PreDispatch);
        assert_eq!(match_digest("x", "a", "p"), DigestMatch::Other);
    }

    /// The pure rule alone: an observation counts when its basis is above the last
    /// accounting and no higher-basis read disagrees. That the store orders
    /// observations by basis, not by when they were recorded, is the store suite's
    /// `observations_decide_in_basis_order`.
    #[test]
    fn observation_counts_after_accounting_unless_a_higher_basis_disagrees() {
        assert!(observation_counts(Revision(5), None, false));
        assert!(observation_counts(Revision(5), Some(Revision(4)), false));
        assert!(!observation_counts(Revision(4), Some(Revision(4)), false));
        assert!(!observation_counts(Revision(3), Some(Revision(4)), false));
        assert!(!observation_counts(Revision(9), Some(Revision(4)), true));
        assert!(!observation_counts(Revision(9), None, true));
    }

    #[test]
    fn only_completion_observations_give_a_verdict() {
        let values = ObservedValues {
            digest: DigestMatch::Artifact,
            identity_matches: true,
            assignment_matches: true,
            health: Health::NotBound,
        };
        for purpose in ObservationPurpose::ALL {
            let obs = Observation {
                purpose,
                reading: Reading::Read(values),
            };
            let expected = if purpose == ObservationPurpose::Completion {
                CompletionVerdict::Establishes
            } else {
                CompletionVerdict::Absent
            };
            assert_eq!(completion_verdict(Some(&obs)), expected, "{purpose:?}");
        }
    }
}
