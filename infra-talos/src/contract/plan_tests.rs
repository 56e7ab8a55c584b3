//! §2 plan states, §3.2 comparison 1 and the self-approval rule, exhaustively.

use super::InstantMs;
use super::epoch::Epoch;
use super::plan::{
    Actor, ApprovalRecord, AuthorityFacts, AuthorityRefusal, Contribution, PlanEvent as E,
    PlanRefusal, PlanState as S, PrincipalId, ReleaseContribution, SelfApproval, SelfApprovalBasis,
    SelfApprovalInput, Stage, check_authority, mark_self_approval, transition,
};

const NOW: Epoch = Epoch::from_bytes([1; 16]);
const OLD: Epoch = Epoch::from_bytes([2; 16]);

/// The §2 plan-state table of `docs/contract.md`, as (from, event, to) rows.
const ROWS: [(S, E, S); 13] = [
    (S::Proposed, E::Approve, S::Approved),
    (S::Proposed, E::Cancel, S::Cancelled),
    (S::Proposed, E::Expire, S::Expired),
    (S::Approved, E::Commit, S::Committed),
    (S::Approved, E::RevokeApproval, S::Revoked),
    (S::Approved, E::RevokeApproverIdentity, S::Revoked),
    (S::Approved, E::Cancel, S::Cancelled),
    (S::Approved, E::Expire, S::Expired),
    // An approved plan whose approval is from another epoch is approved again in
    // the current one (§2).
    (
        S::Approved,
        E::Reapprove {
            standing: OLD,
            current: NOW,
        },
        S::Approved,
    ),
    // After commitment these are noted on the plan and take effect on the operation
    // (§2, §3.3): listed here as "no state change", checked below.
    (S::Committed, E::RevokeApproval, S::Committed),
    (S::Committed, E::RevokeApproverIdentity, S::Committed),
    (S::Committed, E::Cancel, S::Committed),
    (S::Committed, E::Expire, S::Committed),
];

const EVENTS: [E; 8] = [
    E::Approve,
    E::Reapprove {
        standing: OLD,
        current: NOW,
    },
    E::Reapprove {
        standing: NOW,
        current: NOW,
    },
    E::RevokeApproval,
    E::RevokeApproverIdentity,
    E::Cancel,
    E::Expire,
    E::Commit,
];

/// 6 states × 8 events = 48 cases.
#[test]
fn plan_state_cross_product() {
    let mut cases = 0;
    for state in S::ALL {
        for event in EVENTS {
            cases += 1;
            let got = transition(state, event);
            let row = ROWS.iter().find(|(f, e, _)| *f == state && *e == event);
            match row {
                Some((_, _, S::Committed)) if state == S::Committed => {
                    assert_eq!(got, Err(PlanRefusal::AfterCommitment { event }));
                }
                Some((_, _, to)) => assert_eq!(got, Ok(*to), "{state:?} {event:?}"),
                None => {
                    assert!(got.is_err(), "{state:?} {event:?} → {got:?}");
                    if state.is_terminal() {
                        assert!(matches!(got, Err(PlanRefusal::Terminal { .. })));
                    }
                }
            }
        }
    }
    assert_eq!(cases, 48);
    assert_eq!(
        transition(
            S::Approved,
            E::Reapprove {
                standing: NOW,
                current: NOW
            }
        ),
        Err(PlanRefusal::ApprovalStillCurrent)
    );
}

/// §3.2 comparison 1: 2 stages × 6 plan states × 2 times × 2 cancellations × 7
/// approvals = 336 cases, against the conditions written out here.
#[test]
fn authority_cross_product() {
    let approvals = [
        None,
        Some(ApprovalRecord {
            epoch: NOW,
            revoked: false,
            identity_revoked: false,
        }),
        Some(ApprovalRecord {
            epoch: NOW,
            revoked: true,
            identity_revoked: false,
        }),
        Some(ApprovalRecord {
            epoch: NOW,
            revoked: false,
            identity_revoked: true,
        }),
        Some(ApprovalRecord {
            epoch: OLD,
            revoked: false,
            identity_revoked: false,
        }),
        Some(ApprovalRecord {
            epoch: OLD,
            revoked: true,
            identity_revoked: true,
        }),
        Some(ApprovalRecord {
            epoch: NOW,
            revoked: true,
            identity_revoked: true,
        }),
    ];
    let mut cases = 0;
    for stage in [Stage::Commitment, Stage::Attempt] {
        for plan_state in S::ALL {
            for now in [InstantMs(99), InstantMs(100)] {
                for cancelled in [false, true] {
                    for approval in approvals {
                        cases += 1;
                        let facts = AuthorityFacts {
                            plan_state,
                            expires_at: InstantMs(100),
                            cancelled,
                            approval,
                        };
                        let needed = if stage == Stage::Commitment {
                            S::Approved
                        } else {
                            S::Committed
                        };
                        let ok = plan_state == needed
                            && now < InstantMs(100)
                            && !cancelled
                            && approval.is_some_and(|a| {
                                !a.revoked && !a.identity_revoked && a.epoch == NOW
                            });
                        let got = check_authority(stage, &facts, now, NOW);
                        assert_eq!(got.is_ok(), ok, "{stage:?} {facts:?} {now:?}: {got:?}");
                    }
                }
            }
        }
    }
    assert_eq!(cases, 336);
    let foreign = check_authority(
        Stage::Attempt,
        &AuthorityFacts {
            plan_state: S::Committed,
            expires_at: InstantMs(100),
            cancelled: false,
            approval: Some(ApprovalRecord {
                epoch: OLD,
                revoked: false,
                identity_revoked: false,
            }),
        },
        InstantMs(1),
        NOW,
    );
    assert!(matches!(foreign, Err(AuthorityRefusal::ForeignEpoch(_))));
    assert_eq!(
        foreign.unwrap_err().withdrawal(),
        Some(super::evidence::Withdrawal::ForeignEpoch)
    );
}

fn human(s: &str) -> Actor {
    Actor::Human(PrincipalId(s.into()))
}

fn token(s: &str, responsible: Option<&str>) -> Actor {
    Actor::Token {
        token: PrincipalId(s.into()),
        responsible: responsible.map(|r| PrincipalId(r.into())),
    }
}

/// The self-approval rule (§2, choice §10.4): every creator × every single
/// contribution, plus no contribution: 6 creators × 13 releases = 78 cases.
#[test]
fn self_approval_cross_product() {
    let approver = PrincipalId("ann".into());
    let creators = [
        human("ann"),
        human("bob"),
        token("ci", Some("ann")),
        token("ci", Some("bob")),
        token("ci", None),
        human("carl"),
    ];
    let actors = [
        human("ann"),
        human("bob"),
        token("bot", Some("ann")),
        token("bot", Some("bob")),
        token("bot", None),
        human("dee"),
    ];
    let mut releases: Vec<Vec<ReleaseContribution>> = vec![vec![]];
    for actor in &actors {
        for contribution in [Contribution::Authored, Contribution::Published] {
            releases.push(vec![ReleaseContribution {
                actor: actor.clone(),
                contribution,
            }]);
        }
    }
    let mut cases = 0;
    for creator in &creators {
        for release in &releases {
            cases += 1;
            let got = mark_self_approval(SelfApprovalInput {
                approver: &approver,
                plan_creator: creator,
                release,
            });
            let is_ann = |a: &Actor| matches!(a, Actor::Human(h) if h.0 == "ann");
            let ann_responsible =
                |a: &Actor| matches!(a, Actor::Token { responsible: Some(h), .. } if h.0 == "ann");
            let unknown = |a: &Actor| {
                matches!(
                    a,
                    Actor::Token {
                        responsible: None,
                        ..
                    }
                )
            };
            let expected = if is_ann(creator) {
                SelfApproval::SelfApproval(SelfApprovalBasis::CreatedPlan)
            } else if release
                .iter()
                .any(|c| c.contribution == Contribution::Authored && is_ann(&c.actor))
            {
                SelfApproval::SelfApproval(SelfApprovalBasis::AuthoredContent)
            } else if ann_responsible(creator) || release.iter().any(|c| ann_responsible(&c.actor))
            {
                SelfApproval::SelfApproval(SelfApprovalBasis::ResponsibleForToken)
            } else if unknown(creator) || release.iter().any(|c| unknown(&c.actor)) {
                SelfApproval::Undetermined
            } else {
                SelfApproval::NotSelfApproval
            };
            assert_eq!(got, expected, "{creator:?} {release:?}");
        }
    }
    assert_eq!(cases, 78);
}

#[test]
fn serde_names() {
    let names: Vec<String> = S::ALL
        .iter()
        .map(|s| serde_json::to_string(s).unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "\"proposed\"",
            "\"approved\"",
            "\"committed\"",
            "\"revoked\"",
            "\"cancelled\"",
            "\"expired\""
        ]
    );
    assert_eq!(
        serde_json::to_string(&SelfApproval::Undetermined).unwrap(),
        "\"self_approval_undetermined\""
    );
    for s in S::ALL {
        let back: S = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }
}
