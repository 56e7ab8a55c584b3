//! §6.3's adoption record requirements, checked over generated facts against the
//! requirements written out one by one.

use proptest::prelude::*;

use super::adoption::{Binding, Evidence, Facts, Hold, Identity, Refusal, Verdict, judge};
use super::epoch::Epoch;
use super::gate::{DriftRecordId, GateFacts, RecoveryGate};
use super::plan::{AuthorityRefusal, PlanState, Stage};
use super::{InstantMs, Revision, SpanMs};
use crate::digest::Digest;

const BASELINE: Digest = Digest::from_bytes([1; 32]);
const OTHER: Digest = Digest::from_bytes([2; 32]);
const UUID: &str = "uuid-a";
const CLUSTER: &str = "cluster-a";

/// A recorded observation: basis, start time, SMBIOS UUID, cluster ID, digest.
type Read = (
    u64,
    u64,
    Option<&'static str>,
    Option<&'static str>,
    Option<Digest>,
);

/// Owned inputs the borrowed [`Facts`] are made from.
#[derive(Debug, Clone)]
struct World {
    adopted: bool,
    refused: bool,
    authority: Option<AuthorityRefusal>,
    approved_at: u64,
    bound: (u64, Option<u64>, Option<&'static str>, Option<u64>),
    current: (u64, Option<u64>, Option<&'static str>, Option<u64>),
    evidence: Option<Read>,
    holder: Option<&'static str>,
    frozen: bool,
    recovery: RecoveryGate,
    now: u64,
    max_age: u64,
}

fn binding(b: (u64, Option<u64>, Option<&'static str>, Option<u64>)) -> Binding<'static> {
    Binding {
        assignment_revision: b.0,
        baseline_revision: b.1.map(Revision),
        desired: b.2,
        drift: b.3.map(Revision),
    }
}

impl World {
    fn facts(&self) -> Facts<'_> {
        let evidence = self.evidence.as_ref().map(|e| Evidence {
            basis: Revision(e.0),
            started_at: InstantMs(e.1),
            smbios_uuid: e.2,
            node_id: None,
            cluster_id: e.3,
            digest: e.4.as_ref(),
        });
        let current = binding(self.current);
        Facts {
            adopted: self.adopted,
            refused: self.refused,
            authority: self.authority.map_or(Ok(()), Err),
            approved_at: Some(Revision(self.approved_at)),
            bound: binding(self.bound),
            current,
            identity: Identity::SmbiosUuid(UUID),
            cluster_id: CLUSTER,
            baseline_digest: &BASELINE,
            max_age: SpanMs(self.max_age),
            evidence,
            scope_holder: self.holder,
            gate: GateFacts {
                frozen: self.frozen,
                open_drift: current.drift.map(DriftRecordId),
                bound_drift: self.bound.3.map(Revision).map(DriftRecordId),
                recovery: self.recovery,
            },
            now: InstantMs(self.now),
        }
    }
}

fn arb_binding() -> impl Strategy<Value = (u64, Option<u64>, Option<&'static str>, Option<u64>)> {
    (
        1u64..3,
        prop::option::of(1u64..3),
        prop::sample::select(vec![None, Some("r1"), Some("r2")]),
        prop::option::of(1u64..3),
    )
}

fn arb_authority() -> impl Strategy<Value = Option<AuthorityRefusal>> {
    prop::sample::select(vec![
        None,
        None,
        None,
        Some(AuthorityRefusal::NoApproval),
        Some(AuthorityRefusal::PlanState {
            stage: Stage::Commitment,
            state: PlanState::Proposed,
        }),
        Some(AuthorityRefusal::ApprovalRevoked),
        Some(AuthorityRefusal::IdentityRevoked),
        Some(AuthorityRefusal::Cancelled),
    ])
}

fn arb_recovery() -> impl Strategy<Value = RecoveryGate> {
    prop::sample::select(vec![
        RecoveryGate::NotInEffect,
        RecoveryGate::NotInEffect,
        RecoveryGate::InEffect {
            current: Epoch::from_bytes([1; 16]),
            release: None,
        },
        RecoveryGate::InEffect {
            current: Epoch::from_bytes([1; 16]),
            release: Some(Epoch::from_bytes([1; 16])),
        },
    ])
}

prop_compose! {
    fn arb_world()(
        adopted in prop::bool::weighted(0.1),
        refused in prop::bool::weighted(0.1),
        authority in arb_authority(),
        approved_at in 5u64..15,
        bound in arb_binding(),
        same in prop::bool::weighted(0.7),
        current in arb_binding(),
        evidence in prop::option::weighted(0.9, (
            1u64..20,
            0u64..2_000,
            prop::sample::select(vec![None, Some(UUID), Some(UUID), Some("uuid-b")]),
            prop::sample::select(vec![None, Some(CLUSTER), Some(CLUSTER), Some("cluster-b")]),
            prop::sample::select(vec![None, Some(BASELINE), Some(BASELINE), Some(OTHER)]),
        )),
        holder in prop::sample::select(vec![None, None, Some("op-1")]),
        frozen in any::<bool>(),
        recovery in arb_recovery(),
        now in 1_000u64..3_000,
        max_age in 100u64..2_000,
    ) -> World {
        World {
            adopted, refused, authority, approved_at, bound,
            current: if same { bound } else { current },
            evidence, holder, frozen, recovery, now, max_age,
        }
    }
}

/// The requirements written out as §6.3 lists them, independently of `judge`.
fn requirements_hold(w: &World) -> bool {
    let bound_ok = w.bound.0 == w.current.0
        && w.bound.1 == w.current.1
        && w.bound.2 == w.current.2
        && w.current.3 == w.bound.3;
    let recovery_ok = match w.recovery {
        RecoveryGate::NotInEffect => true,
        RecoveryGate::InEffect { current, release } => release == Some(current),
    };
    let evidence_ok = w
        .evidence
        .is_some_and(|(basis, started, uuid, cluster, digest)| {
            basis > w.approved_at
                && w.now.saturating_sub(started) <= w.max_age
                && uuid == Some(UUID)
                && cluster == Some(CLUSTER)
                && digest == Some(BASELINE)
        });
    !w.adopted
        && !w.refused
        && w.authority.is_none()
        && bound_ok
        && w.holder.is_none()
        && recovery_ok
        && evidence_ok
}

proptest! {
    /// The record is written exactly when every requirement holds.
    #[test]
    fn recorded_exactly_when_every_requirement_holds(w in arb_world()) {
        prop_assert_eq!(judge(&w.facts()) == Verdict::Record, requirements_hold(&w));
    }

    /// A freeze never changes what the record does: adoption changes nothing on the
    /// machine (requirement 5).
    #[test]
    fn a_freeze_does_not_block_adoption(w in arb_world()) {
        let mut other = w.clone();
        other.frozen = !w.frozen;
        prop_assert_eq!(judge(&w.facts()), judge(&other.facts()));
    }

    /// A plan already adopted or refused is never recorded or refused again: racing
    /// instances record one outcome.
    #[test]
    fn one_outcome_per_plan(w in arb_world()) {
        let verdict = judge(&w.facts());
        if w.adopted {
            prop_assert_eq!(verdict, Verdict::Hold(Hold::AlreadyAdopted));
        } else if w.refused {
            prop_assert_eq!(verdict, Verdict::Hold(Hold::AlreadyRefused));
        }
    }

    /// Missing evidence holds; only evidence showing another value refuses, and it
    /// refuses under requirement 4 naming the observation relied on.
    #[test]
    fn missing_evidence_holds_contradicting_evidence_refuses(w in arb_world()) {
        match judge(&w.facts()) {
            Verdict::Refuse(Refusal::Evidence { basis, .. }) => {
                let (b, started, uuid, cluster, digest) = w.evidence.expect("evidence relied on");
                prop_assert_eq!(basis, Revision(b));
                prop_assert!(uuid.is_some() && cluster.is_some() && digest.is_some());
                prop_assert!(b > w.approved_at && w.now.saturating_sub(started) <= w.max_age);
                prop_assert!(uuid != Some(UUID) || cluster != Some(CLUSTER) || digest != Some(BASELINE));
            }
            Verdict::Hold(Hold::MissingEvidence { .. }) => {
                let complete = w.evidence.is_some_and(|(b, started, uuid, cluster, digest)| {
                    b > w.approved_at && w.now.saturating_sub(started) <= w.max_age
                        && uuid.is_some() && cluster.is_some() && digest.is_some()
                });
                prop_assert!(!complete);
            }
            _ => {}
        }
    }
}

fn record_ready() -> World {
    World {
        adopted: false,
        refused: false,
        authority: None,
        approved_at: 5,
        bound: (1, Some(3), Some("r1"), Some(4)),
        current: (1, Some(3), Some("r1"), Some(4)),
        evidence: Some((9, 1_000, Some(UUID), Some(CLUSTER), Some(BASELINE))),
        holder: None,
        frozen: false,
        recovery: RecoveryGate::NotInEffect,
        now: 1_500,
        max_age: 1_000,
    }
}

#[test]
fn the_digest_is_compared_with_the_baseline() {
    let mut w = record_ready();
    assert_eq!(judge(&w.facts()), Verdict::Record);
    w.evidence = Some((9, 1_000, Some(UUID), Some(CLUSTER), Some(OTHER)));
    assert_eq!(
        judge(&w.facts()),
        Verdict::Refuse(Refusal::Evidence {
            basis: Revision(9),
            reason: "the configuration digest read is not the baseline's".to_owned(),
        })
    );
}

#[test]
fn a_closed_drift_record_or_a_newer_selection_refuses_under_requirement_3() {
    let mut w = record_ready();
    w.current.3 = None;
    let Verdict::Refuse(refusal) = judge(&w.facts()) else {
        panic!("a closed drift record must refuse");
    };
    assert_eq!(refusal.requirement(), 3);
    let mut w = record_ready();
    w.current.2 = Some("r2");
    let Verdict::Refuse(refusal) = judge(&w.facts()) else {
        panic!("a newer Desired selection must refuse");
    };
    assert_eq!(refusal.requirement(), 3);
    assert!(
        refusal.to_string().contains("Desired release is r2"),
        "{refusal}"
    );
}

#[test]
fn a_handover_is_refused_once_the_machine_has_an_applied_release() {
    let mut w = record_ready();
    w.bound = (1, None, None, None);
    w.current = (1, None, None, None);
    assert_eq!(judge(&w.facts()), Verdict::Record);
    w.current = (1, Some(7), Some("r1"), None);
    assert!(matches!(
        judge(&w.facts()),
        Verdict::Refuse(Refusal::Binding { reason }) if reason.contains("handover")
    ));
}

#[test]
fn evidence_begun_before_the_approval_holds() {
    let mut w = record_ready();
    w.evidence = Some((5, 1_000, Some(UUID), Some(CLUSTER), Some(BASELINE)));
    assert!(matches!(
        judge(&w.facts()),
        Verdict::Hold(Hold::MissingEvidence { reason }) if reason.contains("before the approval")
    ));
}

#[test]
fn a_plan_revoked_or_cancelled_refuses_one_still_proposed_holds() {
    for state in [PlanState::Revoked, PlanState::Cancelled, PlanState::Expired] {
        let mut w = record_ready();
        w.authority = Some(AuthorityRefusal::PlanState {
            stage: Stage::Commitment,
            state,
        });
        let Verdict::Refuse(refusal) = judge(&w.facts()) else {
            panic!("a plan {state} must refuse");
        };
        assert_eq!(refusal.requirement(), 2, "{state}");
    }
    let mut w = record_ready();
    w.authority = Some(AuthorityRefusal::PlanState {
        stage: Stage::Commitment,
        state: PlanState::Proposed,
    });
    assert_eq!(judge(&w.facts()), Verdict::Hold(Hold::NotApproved));
}
