//! Operation states and the §4 transition table; the takeover fence (§3.4); the
//! attempt transaction's own comparisons 7–9 (§3.3).
//!
//! [`check_transition`] decides whether one (from, to) move is a row of the §4 table
//! whose condition the given [`TransitionFacts`] meet. Every other pair is refused
//! with an [`OperationRefusal`] that says why. Where the facts meet the conditions of
//! two rows (which the store's own checks make impossible, such as an admitted
//! attempt together with a takeover), each row is allowed on its own and the caller
//! records the one it acts on.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Revision;
use super::epoch::{self, Epoch, EpochBearer, ForeignEpoch};
use super::evidence::{
    AttemptRecord, AttemptSummary, CompletionVerdict, ResponseClass, RestoreStatus, Withdrawal,
};

/// The state of an operation (§4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationState {
    /// Created by the commitment transaction; scope and rollout slot held.
    Committed,
    /// An attempt is on record; its request is out, or its fate unknown.
    Sending,
    /// The request was accepted; completion evidence is being collected.
    Verifying,
    /// Terminal: the postconditions are established (or, for an adopt operation, the
    /// adoption record committed).
    Completed,
    /// Terminal: every attempt has a validation rejection.
    Rejected,
    /// Terminal: all attempts accounted for, and a completion observation disproves
    /// a postcondition.
    Failed,
    /// Terminal: no attempt recorded, and authority withdrawn or recovery-admin
    /// resolved it so. Never proof that nothing was sent.
    Cancelled,
    /// Evidence does not yet settle a terminal state or a safe retry; scope and slot
    /// stay held.
    Unresolved,
}

impl OperationState {
    /// Every operation state, in the order of the §4 state table.
    pub const ALL: [Self; 8] = [
        Self::Committed,
        Self::Sending,
        Self::Verifying,
        Self::Completed,
        Self::Rejected,
        Self::Failed,
        Self::Cancelled,
        Self::Unresolved,
    ];

    /// Completed, rejected, failed and cancelled are terminal (§4).
    #[must_use]
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Rejected | Self::Failed | Self::Cancelled
        )
    }

    /// Whether an operation in this state holds its machine's coordination scope
    /// (§3.2 comparison 4, §8 invariant 1).
    #[must_use]
    pub const fn holds_machine_scope(self) -> bool {
        !self.is_terminal()
    }

    /// Whether an operation in this state holds a slot of its rollout scope (§3.2
    /// comparison 5).
    #[must_use]
    pub const fn holds_rollout_slot(self) -> bool {
        !self.is_terminal()
    }

    /// The state's name, as the document and the store spell it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Committed => "committed",
            Self::Sending => "sending",
            Self::Verifying => "verifying",
            Self::Completed => "completed",
            Self::Rejected => "rejected",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Unresolved => "unresolved",
        }
    }
}

impl fmt::Display for OperationState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn origin(from: &Option<OperationState>) -> &'static str {
    from.map_or("(none)", OperationState::name)
}

/// What an operation does (§1, §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationKind {
    /// Apply a published artifact with apply-config in no-reboot mode.
    ApplyConfig,
    /// Accept the running configuration; created completed by the adoption record.
    Adopt,
}

/// The transaction that creates an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Creation {
    /// The §3.2 commitment transaction succeeded.
    Commitment,
    /// The §6.3 adoption record transaction succeeded.
    AdoptionRecord,
}

/// A comparison an attempt transaction makes (§3.3): it repeats 1, 2, 3 and 6 of
/// §3.2 and adds 7, 8 and 9.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptComparison {
    /// 1: approval, expiry, cancellation, revocations, epoch.
    Authority,
    /// 2: the bindings and the baseline revision.
    Bindings,
    /// 3: the execution-time evidence.
    Evidence,
    /// 6: the scope gate.
    Gate,
    /// 7: current owner, generation, epoch and an admitting state.
    Ownership,
    /// 8: nothing newer on the timeline than the retry's classification.
    TimelineUnchanged,
    /// 9: attempts left under the bound maximum.
    AttemptsLeft,
}

impl AttemptComparison {
    /// Every attempt comparison.
    pub const ALL: [Self; 7] = [
        Self::Authority,
        Self::Bindings,
        Self::Evidence,
        Self::Gate,
        Self::Ownership,
        Self::TimelineUnchanged,
        Self::AttemptsLeft,
    ];

    /// The comparison's number in §3.2 and §3.3.
    #[must_use]
    pub const fn number(self) -> u8 {
        match self {
            Self::Authority => 1,
            Self::Bindings => 2,
            Self::Evidence => 3,
            Self::Gate => 6,
            Self::Ownership => 7,
            Self::TimelineUnchanged => 8,
            Self::AttemptsLeft => 9,
        }
    }

    /// Whether a refusal by this comparison, made by the owner, moves a committed
    /// operation to unresolved (§4, choice §10.30): 1, 2, 3 and 6 do; 7, 8 and 9
    /// only record the refusal.
    #[must_use]
    pub const fn unresolves_committed(self) -> bool {
        matches!(
            self,
            Self::Authority | Self::Bindings | Self::Evidence | Self::Gate
        )
    }
}

/// How the latest attempt transaction went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptTransaction {
    /// None was run.
    NotRun,
    /// It committed and recorded an attempt.
    Admitted,
    /// It was refused and rolled back; a separate transaction records the refusal.
    Refused {
        /// The first comparison that failed.
        comparison: AttemptComparison,
        /// Whether the refused controller still owns the operation.
        by_owner: bool,
    },
}

/// The recorded facts a §4 transition condition reads. Every field is a plain input:
/// the store reads it from the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransitionFacts<'a> {
    /// What the operation does.
    pub kind: OperationKind,
    /// For a creation ((none) → …): the transaction that just succeeded.
    pub creation: Option<Creation>,
    /// The latest attempt transaction.
    pub attempt_transaction: AttemptTransaction,
    /// A takeover (§3.4) is being recorded.
    pub takeover: bool,
    /// Authority withdrawn after commitment, if any (§3.3).
    pub withdrawal: Option<Withdrawal>,
    /// recovery-admin resolves the operation as cancelled on a recorded reason.
    pub cancel_resolution: bool,
    /// The operation's recorded attempts, oldest first.
    pub attempts: &'a [AttemptRecord],
    /// The latest attempt's transport deadline has passed.
    pub transport_deadline_passed: bool,
    /// What the counting completion observation says, if any.
    pub completion: CompletionVerdict,
    /// The recorded verification deadline has passed.
    pub verification_deadline_passed: bool,
    /// The operation is classified safe to retry (§5).
    pub safe_to_retry: bool,
    /// Whether the operation came through a restore (§7.3 step 5).
    pub restore: RestoreStatus,
}

impl<'a> TransitionFacts<'a> {
    /// Facts with nothing recorded beyond `attempts`: no creation, no attempt
    /// transaction, no takeover, no withdrawal, no verdict, no deadline passed.
    #[must_use]
    pub const fn quiet(kind: OperationKind, attempts: &'a [AttemptRecord]) -> Self {
        Self {
            kind,
            creation: None,
            attempt_transaction: AttemptTransaction::NotRun,
            takeover: false,
            withdrawal: None,
            cancel_resolution: false,
            attempts,
            transport_deadline_passed: false,
            completion: CompletionVerdict::Absent,
            verification_deadline_passed: false,
            safe_to_retry: false,
            restore: RestoreStatus::NotRestored,
        }
    }
}

/// The part of a §4 condition that does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unmet {
    /// (none) → committed needs the commitment transaction.
    #[error("the §3.2 commitment transaction has not succeeded")]
    NoCommitment,
    /// (none) → completed needs the adoption record.
    #[error("no adoption record was committed (§6.3)")]
    NoAdoptionRecord,
    /// An adopt operation is never committed.
    #[error(
        "an adopt operation is created completed by its adoption record, never committed (§6.3)"
    )]
    AdoptIsNeverCommitted,
    /// Only an adopt operation is created completed.
    #[error("only an adopt operation is created completed; an apply-config one starts committed")]
    OnlyAdoptStartsCompleted,
    /// No attempt transaction admitted an attempt.
    #[error("no §3.3 attempt transaction has admitted an attempt")]
    AttemptNotAdmitted,
    /// Nothing moves a committed operation to unresolved.
    #[error(
        "there is no takeover, no withdrawal of authority after commitment, and the owner's \
         attempt was not refused by comparison 1, 2, 3 or 6"
    )]
    NoCauseFromCommitted,
    /// No attempt is recorded.
    #[error("no attempt is recorded")]
    NoAttempt,
    /// The latest attempt was not accepted.
    #[error("the latest attempt has no recorded acceptance")]
    LatestNotAccepted,
    /// The latest attempt was not rejected.
    #[error("the latest attempt has no validation rejection")]
    LatestNotRejected,
    /// An earlier attempt lacks a rejection.
    #[error("an earlier attempt has no validation rejection, so this one accounts for itself only")]
    EarlierNotRejected,
    /// Not every attempt is rejected.
    #[error("not every recorded attempt has a validation rejection")]
    NotAllRejected,
    /// A restored operation is never rejected.
    #[error(
        "a restored operation is never rejected: the restored journal may lack attempts made after the backup (§7.3 step 5)"
    )]
    RestoredNeverRejected,
    /// Nothing moves a sending operation to unresolved.
    #[error(
        "there is no takeover, no transport outcome or non-definitive response, no rejection \
         beside an unrejected earlier attempt, and no lost response past the transport deadline"
    )]
    NoCauseFromSending,
    /// Some attempt is unaccounted.
    #[error(
        "{count} recorded attempt(s) have neither a response from the node nor an accounting decision"
    )]
    Unaccounted {
        /// How many.
        count: usize,
    },
    /// Nothing establishes the postconditions.
    #[error("no counting completion observation establishes the postconditions")]
    NotEstablished,
    /// Nothing contradicts the postconditions.
    #[error("no counting completion observation contradicts the postconditions")]
    NotContradicted,
    /// A failing health check inside its convergence window.
    #[error(
        "only a bound health check fails, and the verification deadline has not passed (choice §10.25)"
    )]
    HealthInWindow,
    /// Classified safe to retry, so not failed.
    #[error("the operation is classified safe to retry (§5, choice §10.10)")]
    ClassifiedSafeToRetry,
    /// Nothing moves a verifying operation to unresolved.
    #[error(
        "there is no takeover, every attempt is accounted for, and the verification deadline has \
         not passed without a verdict"
    )]
    NoCauseFromVerifying,
    /// Not classified safe to retry.
    #[error("there is no safe-to-retry classification (§5)")]
    NotSafeToRetry,
    /// An attempt is recorded, so never cancelled.
    #[error("{count} attempt(s) are recorded; an operation with an attempt is never cancelled")]
    AttemptRecorded {
        /// How many.
        count: usize,
    },
    /// No ground for cancelled.
    #[error(
        "no revocation, cancellation, expiry, foreign epoch or recovery-admin resolution is \
         recorded; a closed gate can reopen and is no ground for cancelled"
    )]
    NoCancelCause,
    /// A restored operation waits for its scope's accounting.
    #[error("the restored operation's scope still waits for the §7.3 step 1 accounting decision")]
    RestoredScopeUnaccounted,
}

/// Why a (from, to) move of an operation was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OperationRefusal {
    /// The pair is not a row of the §4 table.
    #[error("{} → {to} is not a row of the §4 transition table", origin(.from))]
    NotInTable {
        /// Where from; `None` before the operation exists.
        from: Option<OperationState>,
        /// Where to.
        to: OperationState,
    },
    /// The operation is terminal.
    #[error("{from} is terminal; no transition leaves it (§4)")]
    Terminal {
        /// The terminal state.
        from: OperationState,
        /// Where to.
        to: OperationState,
    },
    /// An adopt operation takes no state but completed.
    #[error("an adopt operation is created completed and takes no other state (§4, §6.3)")]
    AdoptTakesNoOtherState {
        /// Where from.
        from: OperationState,
        /// Where to.
        to: OperationState,
    },
    /// The pair is a row, but its condition does not hold.
    #[error("{} → {to} refused: {unmet}", origin(.from))]
    Unmet {
        /// Where from; `None` before the operation exists.
        from: Option<OperationState>,
        /// Where to.
        to: OperationState,
        /// What does not hold.
        unmet: Unmet,
    },
}

/// Whether the §4 table allows moving an operation `from` → `to` on `facts`.
/// `from` is `None` for the creation rows.
///
/// # Errors
///
/// [`OperationRefusal`] for every pair the table does not list and for a listed pair
/// whose condition the facts do not meet.
pub fn check_transition(
    from: Option<OperationState>,
    to: OperationState,
    facts: &TransitionFacts<'_>,
) -> Result<(), OperationRefusal> {
    use OperationState as S;
    let not_in_table = || OperationRefusal::NotInTable { from, to };
    let unmet = |unmet| OperationRefusal::Unmet { from, to, unmet };
    let Some(state) = from else {
        return match to {
            S::Committed => creation(facts, OperationKind::ApplyConfig).map_err(unmet),
            S::Completed => creation(facts, OperationKind::Adopt).map_err(unmet),
            _ => Err(not_in_table()),
        };
    };
    if state.is_terminal() {
        return Err(OperationRefusal::Terminal { from: state, to });
    }
    if facts.kind == OperationKind::Adopt {
        return Err(OperationRefusal::AdoptTakesNoOtherState { from: state, to });
    }
    let attempts = AttemptSummary::of(facts.attempts);
    let result = match (state, to) {
        (S::Committed, S::Sending) | (S::Unresolved, S::Sending) => {
            if state == S::Unresolved && !facts.safe_to_retry {
                Err(Unmet::NotSafeToRetry)
            } else if facts.attempt_transaction == AttemptTransaction::Admitted {
                Ok(())
            } else {
                Err(Unmet::AttemptNotAdmitted)
            }
        }
        (S::Committed, S::Unresolved) => committed_to_unresolved(facts),
        (S::Sending, S::Verifying) => match facts.attempts.last() {
            Some(a) if a.response == ResponseClass::Accepted => Ok(()),
            _ => Err(Unmet::LatestNotAccepted),
        },
        (S::Sending, S::Rejected) => sending_to_rejected(facts),
        (S::Sending, S::Unresolved) => sending_to_unresolved(facts),
        (S::Verifying | S::Unresolved, S::Completed) => settled(&attempts).and_then(|()| {
            if facts.completion == CompletionVerdict::Establishes {
                Ok(())
            } else {
                Err(Unmet::NotEstablished)
            }
        }),
        (S::Verifying | S::Unresolved, S::Failed) => settled(&attempts)
            .and_then(|()| contradicted(facts))
            .and_then(|()| {
                if state == S::Unresolved && facts.safe_to_retry {
                    Err(Unmet::ClassifiedSafeToRetry)
                } else {
                    Ok(())
                }
            }),
        (S::Verifying, S::Unresolved) => {
            let no_verdict_by_deadline =
                facts.verification_deadline_passed && facts.completion == CompletionVerdict::Absent;
            if facts.takeover || !attempts.all_accounted() || no_verdict_by_deadline {
                Ok(())
            } else {
                Err(Unmet::NoCauseFromVerifying)
            }
        }
        (S::Unresolved, S::Rejected) => {
            if !attempts.all_validation_rejected() {
                Err(Unmet::NotAllRejected)
            } else if facts.restore.restored() {
                Err(Unmet::RestoredNeverRejected)
            } else {
                Ok(())
            }
        }
        (S::Unresolved, S::Cancelled) => unresolved_to_cancelled(facts, &attempts),
        _ => return Err(not_in_table()),
    };
    result.map_err(unmet)
}

fn creation(facts: &TransitionFacts<'_>, kind: OperationKind) -> Result<(), Unmet> {
    match (kind, facts.kind) {
        (OperationKind::ApplyConfig, OperationKind::Adopt) => Err(Unmet::AdoptIsNeverCommitted),
        (OperationKind::Adopt, OperationKind::ApplyConfig) => Err(Unmet::OnlyAdoptStartsCompleted),
        (OperationKind::ApplyConfig, _) if facts.creation != Some(Creation::Commitment) => {
            Err(Unmet::NoCommitment)
        }
        (OperationKind::Adopt, _) if facts.creation != Some(Creation::AdoptionRecord) => {
            Err(Unmet::NoAdoptionRecord)
        }
        _ => Ok(()),
    }
}

fn committed_to_unresolved(facts: &TransitionFacts<'_>) -> Result<(), Unmet> {
    let owner_refusal = matches!(
        facts.attempt_transaction,
        AttemptTransaction::Refused { comparison, by_owner: true } if comparison.unresolves_committed()
    );
    if facts.takeover || facts.withdrawal.is_some() || owner_refusal {
        Ok(())
    } else {
        Err(Unmet::NoCauseFromCommitted)
    }
}

fn earlier_all_rejected(attempts: &[AttemptRecord]) -> bool {
    let earlier = attempts.split_last().map_or(&[][..], |(_, e)| e);
    earlier
        .iter()
        .all(|a| a.response == ResponseClass::ValidationRejection)
}

fn sending_to_rejected(facts: &TransitionFacts<'_>) -> Result<(), Unmet> {
    match facts.attempts.last() {
        Some(a) if a.response == ResponseClass::ValidationRejection => {}
        _ => return Err(Unmet::LatestNotRejected),
    }
    if !earlier_all_rejected(facts.attempts) {
        Err(Unmet::EarlierNotRejected)
    } else if facts.restore.restored() {
        Err(Unmet::RestoredNeverRejected)
    } else {
        Ok(())
    }
}

fn sending_to_unresolved(facts: &TransitionFacts<'_>) -> Result<(), Unmet> {
    if facts.takeover {
        return Ok(());
    }
    let cause = match facts.attempts.last().map(|a| a.response) {
        Some(ResponseClass::Transport(_) | ResponseClass::OtherRefusal) => true,
        Some(ResponseClass::Pending) => facts.transport_deadline_passed,
        Some(ResponseClass::ValidationRejection) => {
            !earlier_all_rejected(facts.attempts) || facts.restore.restored()
        }
        Some(ResponseClass::Accepted) | None => false,
    };
    if cause {
        Ok(())
    } else {
        Err(Unmet::NoCauseFromSending)
    }
}

fn settled(attempts: &AttemptSummary) -> Result<(), Unmet> {
    if attempts.recorded == 0 {
        Err(Unmet::NoAttempt)
    } else if !attempts.all_accounted() {
        Err(Unmet::Unaccounted {
            count: attempts.unaccounted,
        })
    } else {
        Ok(())
    }
}

fn contradicted(facts: &TransitionFacts<'_>) -> Result<(), Unmet> {
    match facts.completion {
        CompletionVerdict::Contradicts => Ok(()),
        CompletionVerdict::HealthFailing if facts.verification_deadline_passed => Ok(()),
        CompletionVerdict::HealthFailing => Err(Unmet::HealthInWindow),
        CompletionVerdict::Absent | CompletionVerdict::Establishes => Err(Unmet::NotContradicted),
    }
}

fn unresolved_to_cancelled(
    facts: &TransitionFacts<'_>,
    attempts: &AttemptSummary,
) -> Result<(), Unmet> {
    if attempts.recorded > 0 {
        return Err(Unmet::AttemptRecorded {
            count: attempts.recorded,
        });
    }
    // A restored operation's approval is always from another epoch (§7.3 step 5).
    let cause = facts.cancel_resolution
        || facts.restore == RestoreStatus::ScopeAccounted
        || facts.withdrawal.is_some_and(|w| w.cancel_cause().is_some());
    if !cause {
        Err(Unmet::NoCancelCause)
    } else if facts.restore == RestoreStatus::ScopeUnaccounted {
        Err(Unmet::RestoredScopeUnaccounted)
    } else {
        Ok(())
    }
}

/// A controller instance's identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ControllerId(pub u128);

impl fmt::Display for ControllerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "controller {:032x}", self.0)
    }
}

/// Who owns an operation (§3.4): a controller, a fence generation, and the epoch
/// the token belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OwnerToken {
    /// The owning controller instance.
    pub controller: ControllerId,
    /// The fence generation; a takeover raises it by one.
    pub generation: u64,
    /// The epoch the token was issued in.
    pub epoch: Epoch,
}

impl OwnerToken {
    /// The token the commitment transaction gives the committing controller:
    /// generation 1 in the current epoch (§3.2).
    #[must_use]
    pub const fn at_commitment(controller: ControllerId, current_epoch: Epoch) -> Self {
        Self {
            controller,
            generation: 1,
            epoch: current_epoch,
        }
    }
}

/// The result of a takeover.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Takeover {
    /// The operation's state afterwards: always unresolved.
    pub state: OperationState,
    /// The new owner.
    pub owner: OwnerToken,
}

/// Why a takeover was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TakeoverRefusal {
    /// Terminal operations have no owner to fence.
    #[error("the operation is {state}, a terminal state; there is nothing to take over (§3.4)")]
    Terminal {
        /// The terminal state.
        state: OperationState,
    },
    /// Another takeover won the generation (§3.4: one winner per generation).
    #[error(
        "the owner's generation is {actual}, not the expected {expected}: another takeover won"
    )]
    GenerationMoved {
        /// The generation the taker read.
        expected: u64,
        /// The generation now recorded.
        actual: u64,
    },
    /// The generation counter cannot rise further.
    #[error("the owner's generation cannot be raised further")]
    GenerationExhausted,
}

/// A takeover (§3.4): the conditional update on the owner's generation that installs
/// `new_controller` at the next generation in `current_epoch` and moves a committed,
/// sending or verifying operation to unresolved (an unresolved one stays so). It
/// sends nothing and classifies nothing.
///
/// # Errors
///
/// [`TakeoverRefusal`] when the operation is terminal or the generation moved.
pub fn takeover(
    state: OperationState,
    owner: OwnerToken,
    expected_generation: u64,
    new_controller: ControllerId,
    current_epoch: Epoch,
) -> Result<Takeover, TakeoverRefusal> {
    if state.is_terminal() {
        return Err(TakeoverRefusal::Terminal { state });
    }
    if owner.generation != expected_generation {
        return Err(TakeoverRefusal::GenerationMoved {
            expected: expected_generation,
            actual: owner.generation,
        });
    }
    let generation = owner
        .generation
        .checked_add(1)
        .ok_or(TakeoverRefusal::GenerationExhausted)?;
    Ok(Takeover {
        state: OperationState::Unresolved,
        owner: OwnerToken {
            controller: new_controller,
            generation,
            epoch: current_epoch,
        },
    })
}

/// The safe-to-retry classification a retry rests on (§3.3 comparisons 7 and 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryBasis {
    /// The revision of the classification entry.
    pub classified_at: Revision,
    /// The owner that made it.
    pub classified_by: OwnerToken,
    /// The revision of the latest attempt response, ownership transition or
    /// reclassification of the operation, if any.
    pub latest_fact: Option<Revision>,
}

/// What an attempt transaction's comparisons 7–9 read (§3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdmissionFacts {
    /// The operation's state.
    pub state: OperationState,
    /// The operation's recorded owner.
    pub owner: OwnerToken,
    /// The token of the controller recording the attempt.
    pub presented: OwnerToken,
    /// The current recovery epoch.
    pub current_epoch: Epoch,
    /// The safe-to-retry classification, for a retry from unresolved.
    pub retry: Option<RetryBasis>,
    /// Attempts already recorded.
    pub attempts_recorded: u32,
    /// The plan's bound maximum number of attempts.
    pub max_attempts: u32,
}

/// Why comparison 7, 8 or 9 refused an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionRefusal {
    /// 7: a token from another epoch.
    #[error("comparison 7: {0}")]
    ForeignEpoch(ForeignEpoch),
    /// 7: not the owner.
    #[error("comparison 7: the operation is owned by {owner}, not by {presented}")]
    NotOwner {
        /// The recorded owner.
        owner: ControllerId,
        /// Who tried.
        presented: ControllerId,
    },
    /// 7: a stale generation.
    #[error("comparison 7: the owner is at generation {owner}, the token at {presented}")]
    StaleGeneration {
        /// The recorded generation.
        owner: u64,
        /// The presented generation.
        presented: u64,
    },
    /// 7: the state admits no attempt.
    #[error("comparison 7: a {state} operation admits no attempt")]
    StateAdmitsNoAttempt {
        /// The operation's state.
        state: OperationState,
    },
    /// 7: unresolved without a safe-to-retry classification.
    #[error("comparison 7: the unresolved operation has no safe-to-retry classification")]
    NoRetryClassification,
    /// 7: the classification was made by another owner.
    #[error(
        "comparison 7: the safe-to-retry classification was made by another owner or generation"
    )]
    ClassifiedByAnother,
    /// 8: the timeline moved after the classification.
    #[error(
        "comparison 8: a response, ownership transition or reclassification at {latest} is newer \
         than the retry's classification at {classified_at}; classify again"
    )]
    TimelineMoved {
        /// The classification's revision.
        classified_at: Revision,
        /// The newer fact's revision.
        latest: Revision,
    },
    /// 9: no attempts left.
    #[error("comparison 9: {recorded} of at most {max} attempts are recorded")]
    NoAttemptsLeft {
        /// Attempts recorded.
        recorded: u32,
        /// The bound maximum.
        max: u32,
    },
}

impl AdmissionRefusal {
    /// The comparison that refused.
    #[must_use]
    pub const fn comparison(&self) -> AttemptComparison {
        match self {
            Self::TimelineMoved { .. } => AttemptComparison::TimelineUnchanged,
            Self::NoAttemptsLeft { .. } => AttemptComparison::AttemptsLeft,
            _ => AttemptComparison::Ownership,
        }
    }
}

/// §3.3 comparisons 7, 8 and 9, in that order. 7: the caller's token equals the
/// recorded owner (controller, generation, epoch), the epoch is the present one, and
/// the operation is still committed or is unresolved and was classified safe to retry
/// by that owner. 8: for a retry, the timeline holds nothing newer than that
/// classification. 9: the attempt budget is not used up.
///
/// In the store, comparison 7 is part of the very write that stores the attempt
/// (§3.3); this function states what that write compares.
///
/// # Errors
///
/// The first [`AdmissionRefusal`].
pub fn check_admission(facts: &AdmissionFacts) -> Result<(), AdmissionRefusal> {
    let AdmissionFacts {
        state,
        owner,
        presented,
        current_epoch,
        retry,
        attempts_recorded,
        max_attempts,
    } = *facts;
    epoch::check_epoch(EpochBearer::OwnershipToken, presented.epoch, current_epoch)
        .and_then(|()| epoch::check_epoch(EpochBearer::OwnershipToken, owner.epoch, current_epoch))
        .map_err(AdmissionRefusal::ForeignEpoch)?;
    if owner.controller != presented.controller {
        return Err(AdmissionRefusal::NotOwner {
            owner: owner.controller,
            presented: presented.controller,
        });
    }
    if owner.generation != presented.generation {
        return Err(AdmissionRefusal::StaleGeneration {
            owner: owner.generation,
            presented: presented.generation,
        });
    }
    match state {
        OperationState::Committed => {}
        OperationState::Unresolved => {
            let Some(basis) = retry else {
                return Err(AdmissionRefusal::NoRetryClassification);
            };
            if basis.classified_by != presented {
                return Err(AdmissionRefusal::ClassifiedByAnother);
            }
            if let Some(latest) = basis.latest_fact
                && latest > basis.classified_at
            {
                return Err(AdmissionRefusal::TimelineMoved {
                    classified_at: basis.classified_at,
                    latest,
                });
            }
        }
        _ => return Err(AdmissionRefusal::StateAdmitsNoAttempt { state }),
    }
    if attempts_recorded >= max_attempts {
        return Err(AdmissionRefusal::NoAttemptsLeft {
            recorded: attempts_recorded,
            max: max_attempts,
        });
    }
    Ok(())
}
