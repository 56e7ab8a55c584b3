//! Enumerations and proptest strategies shared by the contract's tests.

use proptest::prelude::*;

use super::evidence::{
    AttemptRecord, CompletionVerdict, DigestMatch, Health, Observation, ObservationPurpose,
    ObservedValues, Reading, ResponseClass, RestoreStatus, TransportOutcome, Withdrawal,
};
use super::operation::{AttemptComparison, AttemptTransaction, Creation, OperationKind};

/// One attempt of each kind the tables distinguish: every response class, and the
/// two unanswered classes with a §5.2 decision.
pub(crate) const ATTEMPT_KINDS: [AttemptRecord; 7] = [
    AttemptRecord::responded(ResponseClass::Pending),
    AttemptRecord::responded(ResponseClass::Accepted),
    AttemptRecord::responded(ResponseClass::ValidationRejection),
    AttemptRecord::responded(ResponseClass::OtherRefusal),
    AttemptRecord::responded(ResponseClass::Transport(TransportOutcome::DeadlineExceeded)),
    AttemptRecord {
        response: ResponseClass::Transport(TransportOutcome::Unavailable),
        accounted_by_decision: true,
    },
    AttemptRecord {
        response: ResponseClass::Pending,
        accounted_by_decision: true,
    },
];

/// Every attempt history of length 0, 1 or 2 over [`ATTEMPT_KINDS`]: 57 histories.
pub(crate) fn attempt_histories() -> Vec<Vec<AttemptRecord>> {
    let mut out = vec![vec![]];
    for a in ATTEMPT_KINDS {
        out.push(vec![a]);
    }
    for a in ATTEMPT_KINDS {
        for b in ATTEMPT_KINDS {
            out.push(vec![a, b]);
        }
    }
    out
}

/// No attempt transaction, an admitted one, and every refusal by owner or not.
pub(crate) fn attempt_transactions() -> Vec<AttemptTransaction> {
    let mut out = vec![AttemptTransaction::NotRun, AttemptTransaction::Admitted];
    for comparison in AttemptComparison::ALL {
        for by_owner in [true, false] {
            out.push(AttemptTransaction::Refused {
                comparison,
                by_owner,
            });
        }
    }
    out
}

/// No withdrawal, then each.
pub(crate) fn withdrawals() -> Vec<Option<Withdrawal>> {
    std::iter::once(None)
        .chain(Withdrawal::ALL.into_iter().map(Some))
        .collect()
}

/// Both kinds.
pub(crate) const KINDS: [OperationKind; 2] = [OperationKind::ApplyConfig, OperationKind::Adopt];

/// No creation, then each.
pub(crate) const CREATIONS: [Option<Creation>; 3] = [
    None,
    Some(Creation::Commitment),
    Some(Creation::AdoptionRecord),
];

/// Every observed-values combination: 3 digests × identity × assignment × 3 healths.
pub(crate) fn observed_values() -> Vec<ObservedValues> {
    let mut out = vec![];
    for digest in [
        DigestMatch::Artifact,
        DigestMatch::PreDispatch,
        DigestMatch::Other,
    ] {
        for identity_matches in [true, false] {
            for assignment_matches in [true, false] {
                for health in [Health::NotBound, Health::Passing, Health::Failing] {
                    out.push(ObservedValues {
                        digest,
                        identity_matches,
                        assignment_matches,
                        health,
                    });
                }
            }
        }
    }
    out
}

/// No observation, then completion, recovery and drift observations that read
/// nothing or any combination of values: 1 + 3 × 37 = 112.
pub(crate) fn observations() -> Vec<Option<Observation>> {
    let mut out = vec![None];
    for purpose in [
        ObservationPurpose::Completion,
        ObservationPurpose::Recovery,
        ObservationPurpose::Drift,
    ] {
        out.push(Some(Observation {
            purpose,
            reading: Reading::Unread,
        }));
        for v in observed_values() {
            out.push(Some(Observation {
                purpose,
                reading: Reading::Read(v),
            }));
        }
    }
    out
}

pub(crate) fn arb_attempt() -> impl Strategy<Value = AttemptRecord> {
    let response = prop_oneof![
        Just(ResponseClass::Pending),
        Just(ResponseClass::Accepted),
        Just(ResponseClass::ValidationRejection),
        Just(ResponseClass::OtherRefusal),
        Just(ResponseClass::Transport(TransportOutcome::DeadlineExceeded)),
        Just(ResponseClass::Transport(TransportOutcome::ConnectionLost)),
        Just(ResponseClass::Transport(TransportOutcome::Unavailable)),
    ];
    (response, any::<bool>()).prop_map(|(response, accounted_by_decision)| AttemptRecord {
        response,
        accounted_by_decision,
    })
}

/// An attempt the node never answered and nobody accounted: only absence of
/// evidence.
pub(crate) fn arb_unaccounted_attempt() -> impl Strategy<Value = AttemptRecord> {
    prop_oneof![
        Just(ResponseClass::Pending),
        Just(ResponseClass::Transport(TransportOutcome::DeadlineExceeded)),
        Just(ResponseClass::Transport(TransportOutcome::ConnectionLost)),
        Just(ResponseClass::Transport(TransportOutcome::Unavailable)),
    ]
    .prop_map(AttemptRecord::responded)
}

pub(crate) fn arb_withdrawal() -> impl Strategy<Value = Option<Withdrawal>> {
    proptest::option::of(proptest::sample::select(Withdrawal::ALL.to_vec()))
}

pub(crate) fn arb_restore() -> impl Strategy<Value = RestoreStatus> {
    proptest::sample::select(RestoreStatus::ALL.to_vec())
}

pub(crate) fn arb_verdict() -> impl Strategy<Value = CompletionVerdict> {
    proptest::sample::select(CompletionVerdict::ALL.to_vec())
}

pub(crate) fn arb_attempt_transaction() -> impl Strategy<Value = AttemptTransaction> {
    proptest::sample::select(attempt_transactions())
}

pub(crate) fn arb_observation() -> impl Strategy<Value = Option<Observation>> {
    proptest::sample::select(observations())
}

/// [`super::operation::TransitionFacts`] without the borrowed attempts, so that a
/// strategy can own them.
#[derive(Debug, Clone)]
pub(crate) struct OwnedFacts {
    pub(crate) kind: OperationKind,
    pub(crate) creation: Option<Creation>,
    pub(crate) attempt_transaction: AttemptTransaction,
    pub(crate) takeover: bool,
    pub(crate) withdrawal: Option<Withdrawal>,
    pub(crate) cancel_resolution: bool,
    pub(crate) attempts: Vec<AttemptRecord>,
    pub(crate) transport_deadline_passed: bool,
    pub(crate) completion: CompletionVerdict,
    pub(crate) verification_deadline_passed: bool,
    pub(crate) safe_to_retry: bool,
    pub(crate) restore: RestoreStatus,
}

impl OwnedFacts {
    pub(crate) fn facts(&self) -> super::operation::TransitionFacts<'_> {
        super::operation::TransitionFacts {
            kind: self.kind,
            creation: self.creation,
            attempt_transaction: self.attempt_transaction,
            takeover: self.takeover,
            withdrawal: self.withdrawal,
            cancel_resolution: self.cancel_resolution,
            attempts: &self.attempts,
            transport_deadline_passed: self.transport_deadline_passed,
            completion: self.completion,
            verification_deadline_passed: self.verification_deadline_passed,
            safe_to_retry: self.safe_to_retry,
            restore: self.restore,
        }
    }
}

pub(crate) fn arb_facts() -> impl Strategy<Value = OwnedFacts> {
    let events = (
        proptest::sample::select(KINDS.to_vec()),
        proptest::sample::select(CREATIONS.to_vec()),
        arb_attempt_transaction(),
        any::<bool>(),
        arb_withdrawal(),
        any::<bool>(),
    );
    let evidence = (
        proptest::collection::vec(arb_attempt(), 0..4),
        any::<bool>(),
        arb_verdict(),
        any::<bool>(),
        any::<bool>(),
        arb_restore(),
    );
    (events, evidence).prop_map(
        |(
            (kind, creation, attempt_transaction, takeover, withdrawal, cancel_resolution),
            (
                attempts,
                transport_deadline_passed,
                completion,
                verification_deadline_passed,
                safe_to_retry,
                restore,
            ),
        )| OwnedFacts {
            kind,
            creation,
            attempt_transaction,
            takeover,
            withdrawal,
            cancel_resolution,
            attempts,
            transport_deadline_passed,
            completion,
            verification_deadline_passed,
            safe_to_retry,
            restore,
        },
    )
}
