//! §6.5 drift states, checked over every (state, event) pair.

use super::drift::{
    Closure, DriftEvent as E, DriftObservation, DriftRefusal, DriftSource as Src, DriftState as S,
    transition,
};

/// §6.1's basis rules for an observation other than the failed operation's.
fn counts(o: &DriftObservation) -> bool {
    matches!(
        o.source,
        Src::Drift | Src::Restoration | Src::RefusedCommitmentEvidence
    ) && !o.baseline_changed_since_basis
        && !o.scope_held_since_basis
        && !o.higher_basis_digest_read
}

/// The failed operation's completion observation: exempt from the scope and
/// higher-basis rules.
fn failed_counts(o: &DriftObservation) -> bool {
    o.source == Src::FailedCompletion && !o.baseline_changed_since_basis
}

/// The §6.5 table of `docs/contract.md`.
type Row = (S, S, fn(&E) -> bool);

fn rows() -> [Row; 5] {
    [
        (
            S::None,
            S::Open,
            |e| matches!(e, E::Observed(o) if o.differs_from_applied && (counts(o) || failed_counts(o))),
        ),
        (S::Open, S::Open, |e| match e {
            E::Freeze | E::Unfreeze => true,
            E::Observed(o) => o.differs_from_applied && (counts(o) || failed_counts(o)),
            _ => false,
        }),
        (S::Open, S::Closed(Closure::Adopted), |e| {
            *e == E::AdoptionRecorded
        }),
        (S::Open, S::Closed(Closure::Reverted), |e| {
            *e == E::RevertCompleted
        }),
        (
            S::Open,
            S::Closed(Closure::Returned),
            |e| matches!(e, E::Observed(o) if !o.differs_from_applied && counts(o)),
        ),
    ]
}

fn events() -> Vec<E> {
    let mut out = vec![
        E::Freeze,
        E::Unfreeze,
        E::AdoptionRecorded,
        E::RevertCompleted,
    ];
    for source in Src::ALL {
        for differs_from_applied in [false, true] {
            for baseline_changed_since_basis in [false, true] {
                for higher_basis_digest_read in [false, true] {
                    for scope_held_since_basis in [false, true] {
                        out.push(E::Observed(DriftObservation {
                            source,
                            differs_from_applied,
                            baseline_changed_since_basis,
                            higher_basis_digest_read,
                            scope_held_since_basis,
                        }));
                    }
                }
            }
        }
    }
    out
}

/// 5 states × 84 events = 420 cases.
#[test]
fn section_6_5_full_cross_product() {
    let rows = rows();
    let mut cases = 0;
    for state in S::ALL {
        for event in events() {
            cases += 1;
            let matching: Vec<S> = rows
                .iter()
                .filter(|(from, _, when)| *from == state && when(&event))
                .map(|(_, to, _)| *to)
                .collect();
            assert!(matching.len() <= 1, "rows overlap: {state:?} {event:?}");
            let got = transition(state, event);
            assert_eq!(
                got.ok(),
                matching.first().copied(),
                "{state:?} {event:?}: {got:?}"
            );
            if let (S::Closed(closure), Err(r)) = (state, got) {
                assert_eq!(r, DriftRefusal::Closed { closure, event });
            }
        }
    }
    assert_eq!(cases, 420);
}

#[test]
fn refusals_name_the_rule() {
    let base = DriftObservation {
        source: Src::Drift,
        differs_from_applied: true,
        baseline_changed_since_basis: false,
        higher_basis_digest_read: false,
        scope_held_since_basis: false,
    };
    let cases = [
        (
            DriftObservation {
                source: Src::Other,
                ..base
            },
            DriftRefusal::NoDriftRules,
        ),
        (
            DriftObservation {
                baseline_changed_since_basis: true,
                ..base
            },
            DriftRefusal::BaselineChanged,
        ),
        (
            DriftObservation {
                scope_held_since_basis: true,
                ..base
            },
            DriftRefusal::ScopeHeld,
        ),
        (
            DriftObservation {
                higher_basis_digest_read: true,
                ..base
            },
            DriftRefusal::HigherBasisRead,
        ),
        (
            DriftObservation {
                differs_from_applied: false,
                ..base
            },
            DriftRefusal::MatchesApplied,
        ),
    ];
    for (o, refusal) in cases {
        assert_eq!(transition(S::None, E::Observed(o)), Err(refusal));
    }
    let failed_equal = DriftObservation {
        source: Src::FailedCompletion,
        differs_from_applied: false,
        scope_held_since_basis: true,
        ..base
    };
    assert_eq!(
        transition(S::Open, E::Observed(failed_equal)),
        Err(DriftRefusal::FailedCompletionClosesNothing)
    );
    assert_eq!(
        transition(S::None, E::Freeze),
        Err(DriftRefusal::NothingOpen { event: E::Freeze })
    );
}

#[test]
fn serde_names() {
    let json: Vec<String> = S::ALL
        .iter()
        .map(|s| serde_json::to_string(s).unwrap())
        .collect();
    assert_eq!(
        json,
        [
            "\"none\"",
            "\"open\"",
            "{\"closed\":\"adopted\"}",
            "{\"closed\":\"reverted\"}",
            "{\"closed\":\"returned\"}"
        ]
    );
    for s in S::ALL {
        let back: S = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }
}
