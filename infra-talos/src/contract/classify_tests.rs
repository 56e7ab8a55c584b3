//! §5 classification against the §5.1 evidence table, over every combination of
//! the inputs the table reads.
//!
//! [`rows`] restates the §5.1 table of `docs/contract.md` as data, independently of
//! `classify.rs`. [`oracle`] applies the document's precedence: an unaccounted
//! attempt leaves everything unresolved (§5.1, §8 invariant 6); the case that fits
//! the failed and safe-to-retry rows follows choice §10.10; a full set of
//! rejections wins over an observation (§11.3); a cancellation cause wins over
//! retry evidence when nothing was sent (§11.4).

use super::classify::{
    Classification, ClassifyInput, FailedReason, RetryBlocker, RetryConditions, UnresolvedReason,
    classify,
};
use super::evidence::{
    AttemptRecord, DigestMatch, Health, Observation, ObservationPurpose as P, ObservedValues,
    Reading, ResponseClass as R, RestoreStatus, Withdrawal,
};
use super::test_support::{attempt_histories, observations, withdrawals};

/// A §5 outcome by name only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Completed,
    SafeToRetry,
    Unresolved,
    Rejected,
    Failed,
    Cancelled,
}

fn outcome(c: &Classification) -> Outcome {
    match c {
        Classification::Completed => Outcome::Completed,
        Classification::SafeToRetry => Outcome::SafeToRetry,
        Classification::Unresolved(_) => Outcome::Unresolved,
        Classification::Rejected => Outcome::Rejected,
        Classification::Failed(_) => Outcome::Failed,
        Classification::Cancelled(_) => Outcome::Cancelled,
    }
}

fn accounted(a: &AttemptRecord) -> bool {
    matches!(
        a.response,
        R::Accepted | R::ValidationRejection | R::OtherRefusal
    ) || a.accounted_by_decision
}

fn completion_values(i: &ClassifyInput<'_>) -> Option<ObservedValues> {
    match i.observation {
        Some(Observation {
            purpose: P::Completion,
            reading: Reading::Read(v),
        }) => Some(v),
        _ => None,
    }
}

/// The "evidence required" column of §5.1, one predicate per row. The safe-to-retry
/// row here holds only its evidence; its three conditions are choice §10.10's.
type EvidenceRow = (Outcome, fn(&ClassifyInput<'_>) -> bool);

fn rows() -> [EvidenceRow; 5] {
    [
        (Outcome::Completed, |i| {
            !i.attempts.is_empty()
                && i.attempts.iter().all(accounted)
                && completion_values(i).is_some_and(|v| {
                    v.digest == DigestMatch::Artifact
                        && v.identity_matches
                        && v.assignment_matches
                        && v.health != Health::Failing
                })
        }),
        (Outcome::Rejected, |i| {
            !i.attempts.is_empty()
                && i.attempts
                    .iter()
                    .all(|a| a.response == R::ValidationRejection)
                && i.restore == RestoreStatus::NotRestored
        }),
        (Outcome::Failed, |i| {
            !i.attempts.is_empty()
                && i.attempts.iter().all(accounted)
                && completion_values(i).is_some_and(|v| {
                    v.digest != DigestMatch::Artifact
                        || !v.identity_matches
                        || !v.assignment_matches
                        || (v.health == Health::Failing && i.verification_deadline_passed)
                })
        }),
        (Outcome::SafeToRetry, |i| {
            i.attempts.iter().all(accounted)
                && !i
                    .attempts
                    .iter()
                    .any(|a| a.response == R::Accepted || a.response == R::ValidationRejection)
                && matches!(
                    i.observation,
                    Some(Observation {
                        purpose: P::Completion | P::Recovery,
                        reading: Reading::Read(ObservedValues {
                            digest: DigestMatch::PreDispatch,
                            identity_matches: true,
                            assignment_matches: true,
                            ..
                        })
                    })
                )
        }),
        (Outcome::Cancelled, |i| {
            let cause = i.cancel_resolution
                || matches!(
                    i.withdrawal,
                    Some(
                        Withdrawal::ApprovalRevoked
                            | Withdrawal::IdentityRevoked
                            | Withdrawal::PlanCancelled
                            | Withdrawal::PlanExpired
                            | Withdrawal::ForeignEpoch
                    )
                );
            // A restored operation's approval is always from another epoch
            // (§7.3 step 5), but it ends cancelled only once its scope is accounted.
            i.attempts.is_empty()
                && match i.restore {
                    RestoreStatus::NotRestored => cause,
                    RestoreStatus::ScopeAccounted => true,
                    RestoreStatus::ScopeUnaccounted => false,
                }
        }),
    ]
}

/// Choice §10.10's three conditions, and that a restored operation never retries.
fn retry_admissible(i: &ClassifyInput<'_>) -> bool {
    i.retry.attempts_left
        && i.retry.approval_passes
        && i.retry.gate_open
        && i.restore == RestoreStatus::NotRestored
}

fn oracle(i: &ClassifyInput<'_>) -> Outcome {
    if !i.attempts.iter().all(accounted) {
        return Outcome::Unresolved;
    }
    let fits: Vec<Outcome> = rows()
        .iter()
        .filter(|(_, when)| when(i))
        .map(|(o, _)| *o)
        .collect();
    let fits_row = |o| fits.contains(&o);
    if fits_row(Outcome::Rejected) {
        return Outcome::Rejected;
    }
    if fits_row(Outcome::Cancelled) {
        return Outcome::Cancelled;
    }
    if fits_row(Outcome::SafeToRetry) {
        // Choice §10.10: retry while admissible, otherwise failed if the failed row
        // fits too, otherwise nothing settles it.
        return if retry_admissible(i) {
            Outcome::SafeToRetry
        } else if fits_row(Outcome::Failed) {
            Outcome::Failed
        } else {
            Outcome::Unresolved
        };
    }
    assert!(
        fits.len() <= 1,
        "rows overlap unexpectedly: {fits:?} for {i:?}"
    );
    fits.first().copied().unwrap_or(Outcome::Unresolved)
}

const RETRY_CONDITIONS: [RetryConditions; 4] = [
    RetryConditions::MET,
    RetryConditions {
        attempts_left: false,
        ..RetryConditions::MET
    },
    RetryConditions {
        approval_passes: false,
        ..RetryConditions::MET
    },
    RetryConditions {
        gate_open: false,
        ..RetryConditions::MET
    },
];

/// 57 histories × 112 observations × 7 withdrawals × 2 resolutions × 4 retry
/// conditions × 2 deadlines × 3 restore statuses = 2 145 024 cases.
#[test]
fn section_5_1_full_cross_product() {
    let histories = attempt_histories();
    let observations = observations();
    let withdrawals = withdrawals();
    let mut cases = 0usize;
    for attempts in &histories {
        for &observation in &observations {
            for &withdrawal in &withdrawals {
                for cancel_resolution in [false, true] {
                    for retry in RETRY_CONDITIONS {
                        for verification_deadline_passed in [false, true] {
                            for restore in RestoreStatus::ALL {
                                let input = ClassifyInput {
                                    attempts,
                                    observation,
                                    withdrawal,
                                    cancel_resolution,
                                    retry,
                                    verification_deadline_passed,
                                    restore,
                                };
                                let got = classify(&input);
                                assert_eq!(outcome(&got), oracle(&input), "{input:#?} → {got:?}");
                                cases += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert_eq!(cases, 57 * 112 * 7 * 2 * 4 * 2 * 3);
    assert_eq!(cases, 2_145_024);
}

fn input(attempts: &[AttemptRecord], observation: Option<Observation>) -> ClassifyInput<'_> {
    ClassifyInput {
        attempts,
        observation,
        withdrawal: None,
        cancel_resolution: false,
        retry: RetryConditions::MET,
        verification_deadline_passed: false,
        restore: RestoreStatus::NotRestored,
    }
}

fn seen(purpose: P, digest: DigestMatch) -> Option<Observation> {
    Some(Observation {
        purpose,
        reading: Reading::Read(ObservedValues {
            digest,
            identity_matches: true,
            assignment_matches: true,
            health: Health::NotBound,
        }),
    })
}

/// Choice §10.10, the overlap of the failed and safe-to-retry rows: attempts exist,
/// all are accounted for, no acceptance and no rejection among them, and a completion
/// observation reads the pre-dispatch digest. It retries while the budget, comparison
/// 1 and the gate all allow it; otherwise it fails.
#[test]
fn two_row_case_choice_10_10() {
    let decided_lost = [AttemptRecord {
        response: R::Transport(super::evidence::TransportOutcome::DeadlineExceeded),
        accounted_by_decision: true,
    }];
    let obs = seen(P::Completion, DigestMatch::PreDispatch);
    assert_eq!(
        classify(&input(&decided_lost, obs)),
        Classification::SafeToRetry
    );
    let blocked = [
        (
            RetryConditions {
                attempts_left: false,
                ..RetryConditions::MET
            },
            RetryBlocker::NoAttemptsLeft,
        ),
        (
            RetryConditions {
                approval_passes: false,
                ..RetryConditions::MET
            },
            RetryBlocker::ApprovalFails,
        ),
        (
            RetryConditions {
                gate_open: false,
                ..RetryConditions::MET
            },
            RetryBlocker::GateClosed,
        ),
    ];
    for (retry, blocker) in blocked {
        let i = ClassifyInput {
            retry,
            ..input(&decided_lost, obs)
        };
        assert_eq!(
            classify(&i),
            Classification::Failed(FailedReason::PreDispatchNoRetry(blocker))
        );
    }
    // A restored operation never retries (§7.3 step 5).
    let restored = ClassifyInput {
        restore: RestoreStatus::ScopeAccounted,
        ..input(&decided_lost, obs)
    };
    assert_eq!(
        classify(&restored),
        Classification::Failed(FailedReason::PreDispatchNoRetry(RetryBlocker::Restored))
    );
    // A recovery observation fits only the retry row: blocked, it settles nothing.
    let recovery = ClassifyInput {
        retry: RetryConditions {
            gate_open: false,
            ..RetryConditions::MET
        },
        ..input(&decided_lost, seen(P::Recovery, DigestMatch::PreDispatch))
    };
    assert_eq!(
        classify(&recovery),
        Classification::Unresolved(UnresolvedReason::RetryBlocked(RetryBlocker::GateClosed))
    );
    // An accepted attempt rules the retry row out: plainly failed.
    let accepted = [AttemptRecord::responded(R::Accepted)];
    assert_eq!(
        classify(&input(&accepted, obs)),
        Classification::Failed(FailedReason::Digest(DigestMatch::PreDispatch))
    );
}

/// §5.1 and §8 invariant 6, by example: what absence of evidence leaves.
#[test]
fn absence_of_evidence_examples() {
    use super::evidence::TransportOutcome as TO;
    let artifact = seen(P::Completion, DigestMatch::Artifact);
    for unanswered in [
        R::Pending,
        R::Transport(TO::DeadlineExceeded),
        R::Transport(TO::ConnectionLost),
        R::Transport(TO::Unavailable),
    ] {
        let attempts = [AttemptRecord::responded(unanswered)];
        // Even the artifact's digest completes nothing while the attempt may land.
        assert_eq!(
            classify(&input(&attempts, artifact)),
            Classification::Unresolved(UnresolvedReason::UnaccountedAttempts { count: 1 })
        );
        let decided = [AttemptRecord {
            response: unanswered,
            accounted_by_decision: true,
        }];
        assert_eq!(
            classify(&input(&decided, artifact)),
            Classification::Completed
        );
        assert_eq!(
            classify(&input(&decided, None)),
            Classification::Unresolved(UnresolvedReason::NoCompletionEvidence)
        );
    }
    // Nothing sent: the artifact seen is not this operation's doing.
    assert_eq!(
        classify(&input(&[], artifact)),
        Classification::Unresolved(UnresolvedReason::NothingSent)
    );
    // A closed gate is no ground for cancelled.
    let gate = ClassifyInput {
        withdrawal: Some(Withdrawal::GateClosed),
        ..input(&[], None)
    };
    assert_eq!(
        classify(&gate),
        Classification::Unresolved(UnresolvedReason::NothingSent)
    );
}

/// §7.3 step 5: a restored operation is never rejected, and one with no attempt
/// ends cancelled once its scope is accounted.
#[test]
fn restored_operations() {
    let all_rejected = [AttemptRecord::responded(R::ValidationRejection); 2];
    let restored = ClassifyInput {
        restore: RestoreStatus::ScopeAccounted,
        ..input(&all_rejected, None)
    };
    assert_eq!(
        classify(&restored),
        Classification::Unresolved(UnresolvedReason::NoCompletionEvidence)
    );
    assert_eq!(
        classify(&input(&all_rejected, None)),
        Classification::Rejected
    );
    let waiting = ClassifyInput {
        restore: RestoreStatus::ScopeUnaccounted,
        ..input(&[], None)
    };
    assert_eq!(
        classify(&waiting),
        Classification::Unresolved(UnresolvedReason::RestoredScopeUnaccounted)
    );
    let accounted = ClassifyInput {
        restore: RestoreStatus::ScopeAccounted,
        ..input(&[], None)
    };
    assert_eq!(
        classify(&accounted),
        Classification::Cancelled(super::evidence::CancelCause::ForeignEpoch)
    );
}

/// Choice §10.25: a failing bound health check waits for the verification deadline.
#[test]
fn health_window() {
    let attempts = [AttemptRecord::responded(R::Accepted)];
    let obs = Some(Observation {
        purpose: P::Completion,
        reading: Reading::Read(ObservedValues {
            digest: DigestMatch::Artifact,
            identity_matches: true,
            assignment_matches: true,
            health: Health::Failing,
        }),
    });
    assert_eq!(
        classify(&input(&attempts, obs)),
        Classification::Unresolved(UnresolvedReason::HealthConverging)
    );
    let late = ClassifyInput {
        verification_deadline_passed: true,
        ..input(&attempts, obs)
    };
    assert_eq!(
        classify(&late),
        Classification::Failed(FailedReason::HealthAtDeadline)
    );
}
