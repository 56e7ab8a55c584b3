//! Classification of an interrupted or uncertain operation (§5, §5.1, choice
//! §10.10).
//!
//! [`classify`] reads what the timeline records for one apply-config operation and
//! says which §5 outcome the evidence supports. It never infers anything from
//! missing evidence: a transport outcome, a lost response, an executor that exited or
//! a pending entry leaves the operation unresolved (§8 invariant 6).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::evidence::{
    AttemptRecord, AttemptSummary, CancelCause, DigestMatch, Health, Observation,
    ObservationPurpose, Reading, RestoreStatus, Withdrawal,
};

/// The three retry conditions of choice §10.10 besides the evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RetryConditions {
    /// The bound maximum leaves at least one attempt.
    pub attempts_left: bool,
    /// The approval passes §3.2 comparison 1 now.
    pub approval_passes: bool,
    /// The scope gate is open now (§3.2 comparison 6).
    pub gate_open: bool,
}

impl RetryConditions {
    /// All three hold.
    pub const MET: Self = Self {
        attempts_left: true,
        approval_passes: true,
        gate_open: true,
    };
}

/// What classification reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassifyInput<'a> {
    /// The operation's recorded attempts, oldest first.
    pub attempts: &'a [AttemptRecord],
    /// The latest observation that counts for the operation (see
    /// [`super::evidence::observation_counts`]), if any.
    pub observation: Option<Observation>,
    /// Authority withdrawn after commitment, if any.
    pub withdrawal: Option<Withdrawal>,
    /// recovery-admin resolves the operation as cancelled on a recorded reason.
    pub cancel_resolution: bool,
    /// The retry conditions of choice §10.10.
    pub retry: RetryConditions,
    /// The recorded verification deadline has passed.
    pub verification_deadline_passed: bool,
    /// Whether the operation came through a restore (§7.3 step 5).
    pub restore: RestoreStatus,
}

/// Which retry condition fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryBlocker {
    /// No attempts left under the bound maximum.
    NoAttemptsLeft,
    /// The approval fails comparison 1.
    ApprovalFails,
    /// The scope gate is closed.
    GateClosed,
    /// A restored operation never retries: its approval is from another epoch.
    Restored,
}

impl fmt::Display for RetryBlocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NoAttemptsLeft => "no attempts are left",
            Self::ApprovalFails => "the approval fails comparison 1",
            Self::GateClosed => "the scope gate is closed",
            Self::Restored => "a restored operation never retries",
        })
    }
}

/// Why an operation stays unresolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnresolvedReason {
    /// Some attempt has neither a node response nor a §5.2 decision.
    UnaccountedAttempts {
        /// How many.
        count: usize,
    },
    /// Every attempt is accounted for, but no completion observation establishes or
    /// contradicts the postconditions.
    NoCompletionEvidence,
    /// A bound health check fails inside its convergence window (choice §10.25).
    HealthConverging,
    /// No attempt is recorded and no observation shows the pre-dispatch digest:
    /// nothing was sent that could complete, fail or be rejected.
    NothingSent,
    /// The safe-to-retry evidence is there, but a retry condition fails and nothing
    /// else settles the operation.
    RetryBlocked(RetryBlocker),
    /// A restored operation with no attempt waits for its scope's §7.3 step 1
    /// decision.
    RestoredScopeUnaccounted,
}

impl fmt::Display for UnresolvedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnaccountedAttempts { count } => write!(
                f,
                "{count} attempt(s) have neither a response from the node nor an accounting decision"
            ),
            Self::NoCompletionEvidence => f.write_str(
                "no completion observation establishes or contradicts the postconditions",
            ),
            Self::HealthConverging => {
                f.write_str("a bound health check fails before the verification deadline")
            }
            Self::NothingSent => f.write_str(
                "no attempt is recorded and no observation shows the pre-dispatch digest",
            ),
            Self::RetryBlocked(b) => write!(f, "a retry would be safe, but {b}"),
            Self::RestoredScopeUnaccounted => f.write_str(
                "the restored operation's scope waits for the step 1 accounting decision",
            ),
        }
    }
}

/// Why an operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailedReason {
    /// The completion observation shows another digest than the artifact's.
    Digest(DigestMatch),
    /// It shows another machine identity.
    Identity,
    /// It shows another assignment revision.
    Assignment,
    /// A bound health check is still red once the verification deadline is reached.
    HealthAtDeadline,
    /// The case that fits two rows, with a retry condition failing (choice §10.10).
    PreDispatchNoRetry(RetryBlocker),
}

impl fmt::Display for FailedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Digest(DigestMatch::PreDispatch) => {
                f.write_str("the completion observation shows the pre-dispatch digest")
            }
            Self::Digest(_) => {
                f.write_str("the completion observation shows a digest other than the artifact's")
            }
            Self::Identity => f.write_str("the completion observation shows another machine"),
            Self::Assignment => {
                f.write_str("the completion observation shows another assignment revision")
            }
            Self::HealthAtDeadline => {
                f.write_str("a bound health check fails at the verification deadline")
            }
            Self::PreDispatchNoRetry(b) => write!(
                f,
                "the pre-dispatch digest would admit a retry, but {b} (choice §10.10)"
            ),
        }
    }
}

/// The §5 outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Classification {
    /// Record completion, set Applied, release scope and slot.
    Completed,
    /// Admit one bounded retry through an attempt transaction.
    SafeToRetry,
    /// Hold the scope; observe further or ask recovery-admin.
    Unresolved(UnresolvedReason),
    /// Every attempt has a validation rejection: proof of non-mutation.
    Rejected,
    /// A completion observation contradicts the postconditions.
    Failed(FailedReason),
    /// No attempt recorded, and authority withdrawn or resolved so.
    Cancelled(CancelCause),
}

impl Classification {
    /// The §5 row's name.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::SafeToRetry => "safe to retry",
            Self::Unresolved(_) => "unresolved",
            Self::Rejected => "rejected",
            Self::Failed(_) => "failed",
            Self::Cancelled(_) => "cancelled",
        }
    }
}

impl fmt::Display for Classification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Completed | Self::SafeToRetry | Self::Rejected => f.write_str(self.name()),
            Self::Unresolved(r) => write!(f, "unresolved: {r}"),
            Self::Failed(r) => write!(f, "failed: {r}"),
            Self::Cancelled(c) => write!(f, "cancelled: {c}"),
        }
    }
}

fn blocker(retry: RetryConditions, restore: RestoreStatus) -> Option<RetryBlocker> {
    if restore.restored() {
        Some(RetryBlocker::Restored)
    } else if !retry.attempts_left {
        Some(RetryBlocker::NoAttemptsLeft)
    } else if !retry.approval_passes {
        Some(RetryBlocker::ApprovalFails)
    } else if !retry.gate_open {
        Some(RetryBlocker::GateClosed)
    } else {
        None
    }
}

/// Whether the observation is safe-to-retry evidence: a completion or recovery
/// observation that read the bound machine, at the bound assignment, at the
/// pre-dispatch digest.
fn shows_pre_dispatch(observation: Option<&Observation>) -> bool {
    let Some(obs) = observation else {
        return false;
    };
    let retry_purpose = matches!(
        obs.purpose,
        ObservationPurpose::Completion | ObservationPurpose::Recovery
    );
    retry_purpose
        && matches!(
            obs.reading,
            Reading::Read(v) if v.digest == DigestMatch::PreDispatch
                && v.identity_matches
                && v.assignment_matches
        )
}

/// Classify an apply-config operation under §5 and §5.1.
///
/// In order:
///
/// 1. With no attempt: a restored operation waits for its scope's accounting and
///    then ends cancelled (§7.3 step 5); a withdrawal other than a closed gate, or a
///    recovery-admin resolution, ends it cancelled; seeing the pre-dispatch digest
///    allows a retry when the retry conditions hold;
///    anything else leaves it unresolved (it sent nothing, so it cannot complete).
/// 2. An unaccounted attempt leaves it unresolved, whatever was observed.
/// 3. A validation rejection of every attempt makes it rejected, except after a
///    restore.
/// 4. With every attempt accounted for: an observation at the pre-dispatch digest
///    with no acceptance and no validation rejection fits the safe-to-retry row and,
///    when a completion observation, the failed row too; choice §10.10 makes it safe
///    to retry while the retry conditions hold and failed otherwise. Otherwise only
///    a completion observation decides: the artifact's digest at the bound identity
///    and assignment completes it (a failing bound health check waits for the
///    verification deadline), and any other value fails it.
#[must_use]
pub fn classify(input: &ClassifyInput<'_>) -> Classification {
    let attempts = AttemptSummary::of(input.attempts);
    let observation = input.observation.as_ref();
    if attempts.recorded == 0 {
        return classify_unsent(input, observation);
    }
    if !attempts.all_accounted() {
        return Classification::Unresolved(UnresolvedReason::UnaccountedAttempts {
            count: attempts.unaccounted,
        });
    }
    if attempts.all_validation_rejected() && !input.restore.restored() {
        return Classification::Rejected;
    }
    let is_completion = observation.is_some_and(|o| o.purpose == ObservationPurpose::Completion);
    if shows_pre_dispatch(observation)
        && attempts.accepted == 0
        && attempts.validation_rejected == 0
    {
        return match blocker(input.retry, input.restore) {
            None => Classification::SafeToRetry,
            Some(b) if is_completion => Classification::Failed(FailedReason::PreDispatchNoRetry(b)),
            Some(b) => Classification::Unresolved(UnresolvedReason::RetryBlocked(b)),
        };
    }
    let values = match observation {
        Some(Observation {
            purpose: ObservationPurpose::Completion,
            reading: Reading::Read(values),
        }) => *values,
        _ => return Classification::Unresolved(UnresolvedReason::NoCompletionEvidence),
    };
    if !values.identity_matches {
        return Classification::Failed(FailedReason::Identity);
    }
    if !values.assignment_matches {
        return Classification::Failed(FailedReason::Assignment);
    }
    match (values.digest, values.health) {
        (DigestMatch::Artifact, Health::Failing) if input.verification_deadline_passed => {
            Classification::Failed(FailedReason::HealthAtDeadline)
        }
        (DigestMatch::Artifact, Health::Failing) => {
            Classification::Unresolved(UnresolvedReason::HealthConverging)
        }
        (DigestMatch::Artifact, Health::NotBound | Health::Passing) => Classification::Completed,
        (digest, _) => Classification::Failed(FailedReason::Digest(digest)),
    }
}

fn classify_unsent(input: &ClassifyInput<'_>, observation: Option<&Observation>) -> Classification {
    match input.restore {
        RestoreStatus::ScopeUnaccounted => {
            return Classification::Unresolved(UnresolvedReason::RestoredScopeUnaccounted);
        }
        RestoreStatus::ScopeAccounted => {
            let cause = input
                .withdrawal
                .and_then(Withdrawal::cancel_cause)
                .unwrap_or(if input.cancel_resolution {
                    CancelCause::Resolution
                } else {
                    CancelCause::ForeignEpoch
                });
            return Classification::Cancelled(cause);
        }
        RestoreStatus::NotRestored => {}
    }
    if let Some(cause) = input.withdrawal.and_then(Withdrawal::cancel_cause) {
        return Classification::Cancelled(cause);
    }
    if input.cancel_resolution {
        return Classification::Cancelled(CancelCause::Resolution);
    }
    if shows_pre_dispatch(observation) {
        return match blocker(input.retry, input.restore) {
            None => Classification::SafeToRetry,
            Some(b) => Classification::Unresolved(UnresolvedReason::RetryBlocked(b)),
        };
    }
    Classification::Unresolved(UnresolvedReason::NothingSent)
}
