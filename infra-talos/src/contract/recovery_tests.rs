//! §7.4 scope states and §7.5 per-scope rules, checked over every pair.

use super::recovery::{
    Act, ActRefusal, BlockedOn, Dependency, MarkFacts, RestorationReading as Rd, ScopeEvent as E,
    ScopeState as S, check_exit, inventoried, permits, transition,
};

/// §7.3 step 6 as `docs/contract.md` §7.4 states it.
fn expected_mark(f: &MarkFacts) -> S {
    if f.operation_holds_scope {
        S::Unresolved
    } else if f.reading == Rd::Matches && f.missing.is_none() {
        S::Ready
    } else if f.reading == Rd::Matches {
        S::Blocked(BlockedOn::MissingDependency(
            f.missing.unwrap_or(Dependency::ReleaseRecord),
        ))
    } else if f.reading == Rd::Failed {
        S::Blocked(BlockedOn::ObservationFailed)
    } else if f.reading == Rd::IdentityMismatch {
        S::Blocked(BlockedOn::IdentityMismatch)
    } else {
        S::Blocked(BlockedOn::NoRestorationObservation)
    }
}

type Row = (fn(S) -> bool, fn(&E) -> Option<S>);

/// The §7.4 table of `docs/contract.md`: which states a row leaves, and the target
/// its event gives (or `None` when its condition fails).
fn rows() -> [Row; 6] {
    [
        (
            |_| true,
            |e| (*e == E::Entry).then_some(S::PreRestoreUnaccounted),
        ),
        (
            |s| s == S::PreRestoreUnaccounted,
            |e| match e {
                E::AccountingDecision {
                    restored_operation_holds_scope: true,
                } => Some(S::Unresolved),
                _ => None,
            },
        ),
        (
            |s| s == S::PreRestoreUnaccounted,
            |e| match e {
                E::AccountingDecision {
                    restored_operation_holds_scope: false,
                } => Some(S::Blocked(BlockedOn::AwaitingMark)),
                _ => None,
            },
        ),
        (
            |s| matches!(s, S::Unresolved | S::Blocked(_) | S::Ready),
            |e| match e {
                E::Mark(f) => Some(expected_mark(f)),
                _ => None,
            },
        ),
        (
            |s| s == S::Ready,
            |e| {
                (*e == E::Release {
                    desired_matches_mark: true,
                })
                .then_some(S::Released)
            },
        ),
        (
            |s| s == S::Released,
            |e| {
                (*e == E::Exit {
                    every_scope_released: true,
                })
                .then_some(S::Normal)
            },
        ),
    ]
}

fn events() -> Vec<E> {
    let mut out = vec![E::Entry];
    for restored_operation_holds_scope in [false, true] {
        out.push(E::AccountingDecision {
            restored_operation_holds_scope,
        });
    }
    for operation_holds_scope in [false, true] {
        for reading in Rd::ALL {
            for missing in [
                None,
                Some(Dependency::ReleaseRecord),
                Some(Dependency::KeyVersion),
                Some(Dependency::ExecutorCredentials),
            ] {
                out.push(E::Mark(MarkFacts {
                    operation_holds_scope,
                    reading,
                    missing,
                }));
            }
        }
    }
    for desired_matches_mark in [false, true] {
        out.push(E::Release {
            desired_matches_mark,
        });
    }
    for every_scope_released in [false, true] {
        out.push(E::Exit {
            every_scope_released,
        });
    }
    out
}

/// 12 states × 47 events = 564 cases.
#[test]
fn section_7_4_full_cross_product() {
    let rows = rows();
    let events = events();
    assert_eq!(events.len(), 47);
    let mut cases = 0;
    for state in S::ALL {
        for event in &events {
            cases += 1;
            let targets: Vec<S> = rows
                .iter()
                .filter(|(leaves, _)| leaves(state))
                .filter_map(|(_, to)| to(event))
                .collect();
            assert!(targets.len() <= 1, "rows overlap: {state:?} {event:?}");
            let got = transition(state, *event);
            assert_eq!(
                got.ok(),
                targets.first().copied(),
                "{state:?} {event:?}: {got:?}"
            );
        }
    }
    assert_eq!(cases, 564);
}

/// §7.5: 12 states × 9 acts = 108 cases.
#[test]
fn section_7_5_cross_product() {
    let mut cases = 0;
    for state in S::ALL {
        for act in Act::ALL {
            cases += 1;
            let outside = matches!(state, S::Normal | S::Released);
            let always = matches!(
                act,
                Act::RemoveAuthority | Act::RecordRecovery | Act::InstallationWide
            );
            let expected = if outside || always {
                Ok(())
            } else if state == S::PreRestoreUnaccounted {
                Err(ActRefusal::Unaccounted { act })
            } else if matches!(act, Act::PlanCreation | Act::Approval | Act::Unfreeze) {
                Ok(())
            } else {
                Err(ActRefusal::NotReleased { act, state })
            };
            assert_eq!(permits(state, act), expected, "{state:?} {act:?}");
        }
    }
    assert_eq!(cases, 108);
}

#[test]
fn exit_needs_every_scope_released() {
    assert_eq!(check_exit(&[]), Ok(()));
    assert_eq!(check_exit(&[S::Released, S::Released]), Ok(()));
    assert_eq!(
        check_exit(&[S::Released, S::Ready, S::Blocked(BlockedOn::AwaitingMark)])
            .map_err(|e| e.unreleased),
        Err(2)
    );
    assert_eq!(inventoried(true), S::PreRestoreUnaccounted);
    assert_eq!(inventoried(false), S::Normal);
}

#[test]
fn serde_names() {
    let json: Vec<String> = [
        S::PreRestoreUnaccounted,
        S::Blocked(BlockedOn::MissingDependency(Dependency::KeyVersion)),
        S::Ready,
    ]
    .iter()
    .map(|s| serde_json::to_string(s).unwrap())
    .collect();
    assert_eq!(
        json,
        [
            "\"pre_restore_unaccounted\"",
            "{\"blocked\":{\"missing_dependency\":\"key_version\"}}",
            "\"ready\""
        ]
    );
    for s in S::ALL {
        let back: S = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }
}
