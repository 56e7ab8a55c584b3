//! The §4 transition table, checked over the full (from, to) cross product.
//!
//! [`table`] restates the §4 table of `docs/contract.md` as data, independently of
//! `operation.rs`: one entry per row, its condition written out over the raw facts.
//! The tests enumerate every (from, to) pair and every combination of the facts
//! that matter for the source state, and require `check_transition` to allow a
//! move exactly when some row does.

use proptest::prelude::*;

use super::Revision;
use super::epoch::Epoch;
use super::evidence::{
    AttemptRecord, CompletionVerdict as V, ResponseClass as R, RestoreStatus, Withdrawal,
};
use super::operation::{
    AdmissionFacts, AdmissionRefusal, AttemptComparison as C, AttemptTransaction as T,
    ControllerId, Creation, OperationKind as K, OperationRefusal, OperationState as S, OwnerToken,
    RetryBasis, TakeoverRefusal, TransitionFacts, check_admission, check_transition, takeover,
};
use super::test_support::{
    CREATIONS, KINDS, OwnedFacts, arb_facts, attempt_histories, attempt_transactions, withdrawals,
};

/// One row of the §4 table.
struct Row {
    from: Option<S>,
    to: S,
    when: fn(&TransitionFacts<'_>) -> bool,
}

fn node_answered(a: &AttemptRecord) -> bool {
    matches!(
        a.response,
        R::Accepted | R::ValidationRejection | R::OtherRefusal
    )
}

/// §4 "accounted": a response from the node, or a §5.2 decision.
fn accounted(a: &AttemptRecord) -> bool {
    node_answered(a) || a.accounted_by_decision
}

fn some_attempt_all_accounted(f: &TransitionFacts<'_>) -> bool {
    !f.attempts.is_empty() && f.attempts.iter().all(accounted)
}

fn rejected(a: &AttemptRecord) -> bool {
    a.response == R::ValidationRejection
}

fn latest(f: &TransitionFacts<'_>) -> Option<R> {
    f.attempts.last().map(|a| a.response)
}

fn earlier_all_rejected(f: &TransitionFacts<'_>) -> bool {
    let n = f.attempts.len();
    f.attempts[..n.saturating_sub(1)].iter().all(rejected)
}

fn restored(f: &TransitionFacts<'_>) -> bool {
    f.restore != RestoreStatus::NotRestored
}

fn contradicted(f: &TransitionFacts<'_>) -> bool {
    f.completion == V::Contradicts
        || (f.completion == V::HealthFailing && f.verification_deadline_passed)
}

/// The §4 table of `docs/contract.md`, row by row.
fn table() -> Vec<Row> {
    vec![
        // (none) → committed: the commitment transaction of an apply-config plan.
        Row {
            from: None,
            to: S::Committed,
            when: |f| f.kind == K::ApplyConfig && f.creation == Some(Creation::Commitment),
        },
        // (none) → completed: an adopt plan's adoption record commits.
        Row {
            from: None,
            to: S::Completed,
            when: |f| f.kind == K::Adopt && f.creation == Some(Creation::AdoptionRecord),
        },
        // committed → sending: an admitted attempt transaction.
        Row {
            from: Some(S::Committed),
            to: S::Sending,
            when: |f| f.attempt_transaction == T::Admitted,
        },
        // committed → unresolved: takeover; a withdrawal after commitment; or the
        // owner's attempt turned down by item 1, 2, 3 or 6.
        Row {
            from: Some(S::Committed),
            to: S::Unresolved,
            when: |f| {
                f.takeover
                    || f.withdrawal.is_some()
                    || matches!(
                        f.attempt_transaction,
                        T::Refused {
                            comparison: C::Authority | C::Bindings | C::Evidence | C::Gate,
                            by_owner: true
                        }
                    )
            },
        },
        // sending → verifying: the latest attempt's acceptance.
        Row {
            from: Some(S::Sending),
            to: S::Verifying,
            when: |f| latest(f) == Some(R::Accepted),
        },
        // sending → rejected: this attempt and every earlier one rejected; never
        // after a restore.
        Row {
            from: Some(S::Sending),
            to: S::Rejected,
            when: |f| {
                latest(f) == Some(R::ValidationRejection) && earlier_all_rejected(f) && !restored(f)
            },
        },
        // sending → unresolved: takeover; lost response (past the transport
        // deadline) or a transport outcome; another response class; a rejection
        // while some earlier attempt lacks one (or after a restore).
        Row {
            from: Some(S::Sending),
            to: S::Unresolved,
            when: |f| {
                f.takeover
                    || matches!(latest(f), Some(R::Transport(_) | R::OtherRefusal))
                    || (latest(f) == Some(R::Pending) && f.transport_deadline_passed)
                    || (latest(f) == Some(R::ValidationRejection)
                        && (!earlier_all_rejected(f) || restored(f)))
            },
        },
        // verifying → completed: established, every attempt accounted for.
        Row {
            from: Some(S::Verifying),
            to: S::Completed,
            when: |f| some_attempt_all_accounted(f) && f.completion == V::Establishes,
        },
        // verifying → failed: contradicted (health only at the deadline), every
        // attempt accounted for.
        Row {
            from: Some(S::Verifying),
            to: S::Failed,
            when: |f| some_attempt_all_accounted(f) && contradicted(f),
        },
        // verifying → unresolved: nothing decided by the deadline; an unaccounted
        // attempt; takeover.
        Row {
            from: Some(S::Verifying),
            to: S::Unresolved,
            when: |f| {
                f.takeover
                    || !f.attempts.iter().all(accounted)
                    || (f.verification_deadline_passed && f.completion == V::Absent)
            },
        },
        // unresolved → completed: established later, at least one attempt, all
        // accounted for.
        Row {
            from: Some(S::Unresolved),
            to: S::Completed,
            when: |f| some_attempt_all_accounted(f) && f.completion == V::Establishes,
        },
        // unresolved → failed: contradicted, at least one attempt, all accounted
        // for, not classified safe to retry.
        Row {
            from: Some(S::Unresolved),
            to: S::Failed,
            when: |f| some_attempt_all_accounted(f) && contradicted(f) && !f.safe_to_retry,
        },
        // unresolved → rejected: a delayed rejection completes "every attempt
        // rejected"; never after a restore.
        Row {
            from: Some(S::Unresolved),
            to: S::Rejected,
            when: |f| !f.attempts.is_empty() && f.attempts.iter().all(rejected) && !restored(f),
        },
        // unresolved → sending: safe to retry and an admitted attempt transaction.
        Row {
            from: Some(S::Unresolved),
            to: S::Sending,
            when: |f| f.safe_to_retry && f.attempt_transaction == T::Admitted,
        },
        // unresolved → cancelled: no attempt, and authority gone for good (a
        // restored operation's is) or a recovery-admin resolution; a restored one
        // only once its scope is accounted.
        Row {
            from: Some(S::Unresolved),
            to: S::Cancelled,
            when: |f| {
                let gone_for_good = matches!(
                    f.withdrawal,
                    Some(
                        Withdrawal::ApprovalRevoked
                            | Withdrawal::IdentityRevoked
                            | Withdrawal::PlanCancelled
                            | Withdrawal::PlanExpired
                            | Withdrawal::ForeignEpoch
                    )
                );
                // A restored operation's approval is from another epoch.
                f.attempts.is_empty()
                    && (gone_for_good
                        || f.cancel_resolution
                        || f.restore == RestoreStatus::ScopeAccounted)
                    && f.restore != RestoreStatus::ScopeUnaccounted
            },
        },
    ]
}

/// The oracle: some row allows it, and an adopt operation takes no state after its
/// creation.
fn oracle(rows: &[Row], from: Option<S>, to: S, f: &TransitionFacts<'_>) -> bool {
    let adopt_after_creation = from.is_some() && f.kind == K::Adopt;
    !adopt_after_creation
        && rows
            .iter()
            .any(|r| r.from == from && r.to == to && (r.when)(f))
}

fn origins() -> Vec<Option<S>> {
    std::iter::once(None).chain(S::ALL.map(Some)).collect()
}

/// Compare one case, and check the refusal's kind.
fn compare(rows: &[Row], from: Option<S>, to: S, f: &TransitionFacts<'_>) {
    let expected = oracle(rows, from, to, f);
    let got = check_transition(from, to, f);
    assert_eq!(
        got.is_ok(),
        expected,
        "{from:?} → {to:?} on {f:#?}: {got:?}"
    );
    if let Err(refusal) = got {
        let listed = rows.iter().any(|r| r.from == from && r.to == to);
        match refusal {
            OperationRefusal::Terminal { .. } => assert!(from.is_some_and(S::is_terminal)),
            OperationRefusal::AdoptTakesNoOtherState { .. } => assert_eq!(f.kind, K::Adopt),
            OperationRefusal::NotInTable { .. } => assert!(!listed, "{from:?} → {to:?} is a row"),
            OperationRefusal::Unmet { .. } => assert!(listed, "{from:?} → {to:?} is no row"),
        }
    }
}

/// Every (from, to) pair, over the facts each source state's rows read (with the
/// rest held quiet): 277 432 fact sets × 8 targets = 2 219 456 cases.
#[test]
fn section_4_table_full_cross_product() {
    let rows = table();
    let histories = attempt_histories();
    let transactions = attempt_transactions();
    let withdrawals = withdrawals();
    let few_transactions = [
        T::NotRun,
        T::Admitted,
        T::Refused {
            comparison: C::Authority,
            by_owner: true,
        },
    ];
    let mut cases = 0usize;
    let mut check = |from: Option<S>, f: &TransitionFacts<'_>| {
        for to in S::ALL {
            compare(&rows, from, to, f);
            cases += 1;
        }
    };
    for from in origins() {
        for kind in KINDS {
            match from {
                None => {
                    for creation in CREATIONS {
                        for takeover in [false, true] {
                            for &attempt_transaction in &transactions {
                                let f = TransitionFacts {
                                    creation,
                                    takeover,
                                    attempt_transaction,
                                    ..TransitionFacts::quiet(kind, &[])
                                };
                                check(from, &f);
                            }
                        }
                    }
                }
                Some(S::Committed) => {
                    for &attempt_transaction in &transactions {
                        for takeover in [false, true] {
                            for &withdrawal in &withdrawals {
                                let f = TransitionFacts {
                                    attempt_transaction,
                                    takeover,
                                    withdrawal,
                                    ..TransitionFacts::quiet(kind, &[])
                                };
                                check(from, &f);
                            }
                        }
                    }
                }
                Some(S::Sending) => {
                    for attempts in &histories {
                        for takeover in [false, true] {
                            for transport_deadline_passed in [false, true] {
                                for restore in RestoreStatus::ALL {
                                    let f = TransitionFacts {
                                        takeover,
                                        transport_deadline_passed,
                                        restore,
                                        ..TransitionFacts::quiet(kind, attempts)
                                    };
                                    check(from, &f);
                                }
                            }
                        }
                    }
                }
                Some(S::Verifying) => {
                    for attempts in &histories {
                        for completion in V::ALL {
                            for verification_deadline_passed in [false, true] {
                                for takeover in [false, true] {
                                    let f = TransitionFacts {
                                        completion,
                                        verification_deadline_passed,
                                        takeover,
                                        ..TransitionFacts::quiet(kind, attempts)
                                    };
                                    check(from, &f);
                                }
                            }
                        }
                    }
                }
                Some(S::Unresolved) => {
                    for attempts in &histories {
                        for completion in V::ALL {
                            for verification_deadline_passed in [false, true] {
                                for safe_to_retry in [false, true] {
                                    for attempt_transaction in few_transactions {
                                        for &withdrawal in &withdrawals {
                                            for cancel_resolution in [false, true] {
                                                for restore in RestoreStatus::ALL {
                                                    let f = TransitionFacts {
                                                        completion,
                                                        verification_deadline_passed,
                                                        safe_to_retry,
                                                        attempt_transaction,
                                                        withdrawal,
                                                        cancel_resolution,
                                                        restore,
                                                        ..TransitionFacts::quiet(kind, attempts)
                                                    };
                                                    check(from, &f);
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                Some(_terminal) => {
                    for attempts in &histories {
                        for completion in V::ALL {
                            for takeover in [false, true] {
                                for attempt_transaction in few_transactions {
                                    for safe_to_retry in [false, true] {
                                        for withdrawal in [None, Some(Withdrawal::ApprovalRevoked)]
                                        {
                                            let f = TransitionFacts {
                                                completion,
                                                takeover,
                                                attempt_transaction,
                                                safe_to_retry,
                                                withdrawal,
                                                cancel_resolution: true,
                                                ..TransitionFacts::quiet(kind, attempts)
                                            };
                                            check(from, &f);
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    // (none): 2 kinds × 3 creations × 2 × 16 transactions = 192 fact sets;
    // committed: 2 × 16 × 2 × 7 = 448; sending: 2 × 57 × 2 × 2 × 3 = 1 368;
    // verifying: 2 × 57 × 4 × 2 × 2 = 1 824; unresolved: 2 × 57 × 4 × 2 × 2 × 3 ×
    // 7 × 2 × 3 = 229 824; each terminal state: 2 × 57 × 4 × 2 × 3 × 2 × 2 = 10 944.
    // Every fact set is checked against all 8 targets.
    let fact_sets = 192 + 448 + 1_368 + 1_824 + 229_824 + 4 * 10_944;
    assert_eq!(cases, fact_sets * 8);
    assert_eq!(cases, 2_219_456);
}

/// The pairs the table lists, and no others, are the ones any facts ever allow.
#[test]
fn listed_pairs_are_exactly_the_table_rows() {
    let rows = table();
    let listed: Vec<(Option<S>, S)> = rows.iter().map(|r| (r.from, r.to)).collect();
    assert_eq!(listed.len(), 15);
    let mut pairs = 0;
    for from in origins() {
        for to in S::ALL {
            pairs += 1;
            if !listed.contains(&(from, to)) {
                let owned = OwnedFacts {
                    kind: K::ApplyConfig,
                    creation: Some(Creation::Commitment),
                    attempt_transaction: T::Admitted,
                    takeover: true,
                    withdrawal: Some(Withdrawal::ApprovalRevoked),
                    cancel_resolution: true,
                    attempts: vec![AttemptRecord::responded(R::ValidationRejection)],
                    transport_deadline_passed: true,
                    completion: V::Establishes,
                    verification_deadline_passed: true,
                    safe_to_retry: true,
                    restore: RestoreStatus::NotRestored,
                };
                let refusal = check_transition(from, to, &owned.facts());
                assert!(
                    matches!(
                        refusal,
                        Err(OperationRefusal::NotInTable { .. } | OperationRefusal::Terminal { .. })
                    ),
                    "{from:?} → {to:?}: {refusal:?}"
                );
            }
        }
    }
    assert_eq!(pairs, 72);
}

proptest! {
    /// Random facts, including the dimensions the exhaustive test holds quiet: the
    /// implementation still agrees with the table.
    #[test]
    fn section_4_table_agrees_on_random_facts(owned in arb_facts()) {
        let rows = table();
        let f = owned.facts();
        for from in origins() {
            for to in S::ALL {
                compare(&rows, from, to, &f);
            }
        }
    }
}

#[test]
fn terminal_scope_and_slot() {
    for s in S::ALL {
        let terminal = matches!(s, S::Completed | S::Rejected | S::Failed | S::Cancelled);
        assert_eq!(s.is_terminal(), terminal);
        assert_eq!(s.holds_machine_scope(), !terminal);
        assert_eq!(s.holds_rollout_slot(), !terminal);
    }
}

const EPOCH: Epoch = Epoch::from_bytes([3; 16]);
const OLD_EPOCH: Epoch = Epoch::from_bytes([4; 16]);

/// §3.4: 8 states × generation matching or not = 16 cases.
#[test]
fn takeover_cross_product() {
    let owner = OwnerToken::at_commitment(ControllerId(1), EPOCH);
    let mut cases = 0;
    for state in S::ALL {
        for expected_generation in [1, 2] {
            cases += 1;
            let got = takeover(state, owner, expected_generation, ControllerId(2), EPOCH);
            if state.is_terminal() {
                assert_eq!(got, Err(TakeoverRefusal::Terminal { state }));
            } else if expected_generation != 1 {
                assert_eq!(
                    got,
                    Err(TakeoverRefusal::GenerationMoved {
                        expected: 2,
                        actual: 1
                    })
                );
            } else {
                let t = got.unwrap();
                assert_eq!(t.state, S::Unresolved);
                assert_eq!(t.owner.generation, 2);
                assert_eq!(t.owner.controller, ControllerId(2));
                assert_eq!(t.owner.epoch, EPOCH);
            }
        }
    }
    assert_eq!(cases, 16);
    let exhausted = OwnerToken {
        generation: u64::MAX,
        ..owner
    };
    assert_eq!(
        takeover(S::Sending, exhausted, u64::MAX, ControllerId(2), EPOCH),
        Err(TakeoverRefusal::GenerationExhausted)
    );
}

/// §3.3 comparisons 7–9: 8 states × 5 presented tokens × 2 owner epochs × 5 retry
/// bases × 2 attempt budgets = 800 cases, against conditions written out here.
#[test]
fn admission_cross_product() {
    let owner_now = OwnerToken {
        controller: ControllerId(1),
        generation: 3,
        epoch: EPOCH,
    };
    let mut cases = 0;
    for state in S::ALL {
        for owner_epoch in [EPOCH, OLD_EPOCH] {
            let owner = OwnerToken {
                epoch: owner_epoch,
                ..owner_now
            };
            let presented_tokens = [
                owner,
                owner_now,
                OwnerToken {
                    controller: ControllerId(9),
                    ..owner
                },
                OwnerToken {
                    generation: 2,
                    ..owner
                },
                OwnerToken {
                    epoch: OLD_EPOCH,
                    ..owner
                },
            ];
            for presented in presented_tokens {
                let bases = [
                    None,
                    Some(RetryBasis {
                        classified_at: Revision(10),
                        classified_by: presented,
                        latest_fact: None,
                    }),
                    Some(RetryBasis {
                        classified_at: Revision(10),
                        classified_by: presented,
                        latest_fact: Some(Revision(10)),
                    }),
                    Some(RetryBasis {
                        classified_at: Revision(10),
                        classified_by: presented,
                        latest_fact: Some(Revision(11)),
                    }),
                    Some(RetryBasis {
                        classified_at: Revision(10),
                        classified_by: OwnerToken {
                            controller: ControllerId(8),
                            ..presented
                        },
                        latest_fact: None,
                    }),
                ];
                for retry in bases {
                    for attempts_recorded in [1, 2] {
                        cases += 1;
                        let facts = AdmissionFacts {
                            state,
                            owner,
                            presented,
                            current_epoch: EPOCH,
                            retry,
                            attempts_recorded,
                            max_attempts: 2,
                        };
                        let got = check_admission(&facts);
                        let c7 = presented.epoch == EPOCH
                            && owner.epoch == EPOCH
                            && presented.controller == owner.controller
                            && presented.generation == owner.generation
                            && match state {
                                S::Committed => true,
                                S::Unresolved => {
                                    retry.is_some_and(|b| b.classified_by == presented)
                                }
                                _ => false,
                            };
                        let c8 = state != S::Unresolved
                            || retry.is_some_and(|b| {
                                b.latest_fact.is_none_or(|l| l <= b.classified_at)
                            });
                        let c9 = attempts_recorded < 2;
                        assert_eq!(got.is_ok(), c7 && c8 && c9, "{facts:?}: {got:?}");
                        if let Err(r) = got {
                            let number = if !c7 {
                                7
                            } else if !c8 {
                                8
                            } else {
                                9
                            };
                            assert_eq!(r.comparison().number(), number, "{facts:?}: {r}");
                            if number == 7 {
                                assert!(!matches!(
                                    r,
                                    AdmissionRefusal::TimelineMoved { .. }
                                        | AdmissionRefusal::NoAttemptsLeft { .. }
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    assert_eq!(cases, 800);
}
