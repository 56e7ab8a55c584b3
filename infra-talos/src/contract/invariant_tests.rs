//! Property tests of the §8 invariants that the pure functions can hold by
//! themselves. Each test names its invariant; `docs/contract.md` §9 says which
//! invariants are left to the store and the controller.
//!
//! These test the contract's functions and its in-memory scope model, not the store:
//! the store does not call `ScopeRegistry` and calls `recovery::permits` only for
//! unfreezing. The same invariants are checked on what the store holds, after every
//! act of random interleavings on SQLite and PostgreSQL, in
//! `tests/invariants_store.rs` (1–13, invariant 13 with runs weighted towards the
//! §7.3 steps).

use proptest::prelude::*;

use super::accounting::{
    self, AccountingRefusal, DecisionFacts, ExecutorStop, RecordedRead, TransportDeadline,
};
use super::classify::{Classification, ClassifyInput, RetryConditions, classify};
use super::epoch::{self, Epoch, EpochBearer, ForeignEpoch};
use super::evidence::{
    AttemptRecord, CompletionVerdict, ObservationPurpose, RestoreStatus, Withdrawal,
    completion_verdict,
};
use super::gate::{self, DriftRecordId, GateFacts, GateRefusal, Mutation, RecoveryGate};
use super::operation::{
    self, AdmissionFacts, AdmissionRefusal, AttemptTransaction, ControllerId, OperationKind,
    OperationRefusal, OperationState as S, OwnerToken, TransitionFacts, check_transition,
};
use super::plan::{
    self, ApprovalRecord, AuthorityFacts, AuthorityRefusal, PlanEvent, PlanState, Stage,
};
use super::recovery::{self, Act, ActRefusal, ScopeState};
use super::registry::{MachineId, OperationId, PlanId, RolloutScopeId, ScopeRegistry};
use super::test_support::{
    OwnedFacts, arb_attempt, arb_facts, arb_observation, arb_restore, arb_unaccounted_attempt,
    arb_withdrawal,
};
use super::{InstantMs, Revision, Role, SpanMs};

fn arb_state() -> impl Strategy<Value = S> {
    proptest::sample::select(S::ALL.to_vec())
}

fn arb_epoch() -> impl Strategy<Value = Epoch> {
    any::<[u8; 16]>().prop_map(Epoch::from_bytes)
}

fn arb_retry() -> impl Strategy<Value = RetryConditions> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(a, b, c)| RetryConditions {
        attempts_left: a,
        approval_passes: b,
        gate_open: c,
    })
}

/// A command against the scope model.
#[derive(Debug, Clone)]
enum Command {
    Commit {
        op: u64,
        plan: u64,
        machine: u64,
        rollout: u64,
    },
    Adopt {
        op: u64,
        plan: u64,
        machine: u64,
    },
    Apply {
        op: u64,
        to: S,
        facts: OwnedFacts,
    },
}

fn arb_command() -> impl Strategy<Value = Command> {
    prop_oneof![
        (0..8u64, 0..6u64, 0..3u64, 0..2u64).prop_map(|(op, plan, machine, rollout)| {
            Command::Commit {
                op,
                plan,
                machine,
                rollout,
            }
        }),
        (0..8u64, 0..6u64, 0..3u64).prop_map(|(op, plan, machine)| Command::Adopt {
            op,
            plan,
            machine
        }),
        (0..8u64, arb_state(), arb_facts()).prop_map(|(op, to, facts)| Command::Apply {
            op,
            to,
            facts
        }),
        (0..8u64, arb_state(), arb_facts()).prop_map(|(op, to, facts)| Command::Apply {
            op,
            to,
            facts
        }),
    ]
}

fn holders<K: Ord + Copy>(
    reg: &ScopeRegistry,
    key: impl Fn(&super::registry::Entry) -> Option<K>,
) -> std::collections::BTreeMap<K, usize> {
    let mut out = std::collections::BTreeMap::new();
    for (_, e) in reg.iter() {
        if e.state.holds_machine_scope()
            && let Some(k) = key(e)
        {
            *out.entry(k).or_insert(0) += 1;
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Invariants 1, 5 and 12 in the pure scope model (`ScopeRegistry`, not the
    /// store): random commitments, adoption records and transitions for several
    /// operations on a few machines, plans and rollout scopes. At every step at most
    /// one operation holds each machine scope (1) and each rollout slot (choice
    /// §10.5); a plan has at most one operation, none before its commitment and the
    /// same one ever after (12); a terminal operation never moves again (5).
    #[test]
    fn scope_registry_model_keeps_invariants_1_5_12(commands in proptest::collection::vec(arb_command(), 1..60)) {
        let mut reg = ScopeRegistry::new();
        for command in commands {
            let before = reg.clone();
            let result = match &command {
                Command::Commit { op, plan, machine, rollout } => {
                    let plan_had = before.operation_of_plan(PlanId(*plan));
                    let held = before.scope_holder(MachineId(*machine));
                    let slot = before.slot_holder(RolloutScopeId(*rollout));
                    let exists = before.get(OperationId(*op)).is_some();
                    let r = reg.commit(OperationId(*op), PlanId(*plan), MachineId(*machine), RolloutScopeId(*rollout));
                    // Comparison 0, 4 and 5 decide exactly.
                    prop_assert_eq!(r.is_ok(), !exists && plan_had.is_none() && held.is_none() && slot.is_none());
                    r
                }
                Command::Adopt { op, plan, machine } => {
                    let r = reg.record_adoption(OperationId(*op), PlanId(*plan), MachineId(*machine));
                    if r.is_ok() {
                        prop_assert_eq!(before.scope_holder(MachineId(*machine)), None);
                    }
                    r
                }
                Command::Apply { op, to, facts } => {
                    reg.apply(OperationId(*op), *to, &facts.facts()).map(|_| ())
                }
            };
            if let Err(refusal) = result {
                prop_assert_eq!(&reg, &before, "a refusal changes nothing: {}", refusal);
            }
            // Invariant 1.
            for (machine, n) in holders(&reg, |e| Some(e.machine)) {
                prop_assert!(n <= 1, "machine {:?} held by {} operations", machine, n);
            }
            for (rollout, n) in holders(&reg, |e| e.rollout) {
                prop_assert!(n <= 1, "rollout {:?} held by {} operations", rollout, n);
            }
            // Invariant 12.
            let mut plans = std::collections::BTreeMap::new();
            for (id, e) in reg.iter() {
                prop_assert!(plans.insert(e.plan, id).is_none(), "plan {:?} has two operations", e.plan);
            }
            for (id, e) in before.iter() {
                prop_assert_eq!(reg.operation_of_plan(e.plan), Some(id));
                // Invariant 5: terminal is final.
                if e.state.is_terminal() {
                    prop_assert_eq!(reg.get(id).map(|n| n.state), Some(e.state));
                }
            }
        }
    }

    /// Invariant 12 on the plan side: whatever happens to a plan, it is committed at
    /// most once, and nothing moves a terminal plan.
    #[test]
    fn invariant_12_plan_commits_once(events in proptest::collection::vec(
        proptest::sample::select(vec![
            PlanEvent::Approve,
            PlanEvent::Reapprove { standing: Epoch::from_bytes([1; 16]), current: Epoch::from_bytes([2; 16]) },
            PlanEvent::RevokeApproval,
            PlanEvent::RevokeApproverIdentity,
            PlanEvent::Cancel,
            PlanEvent::Expire,
            PlanEvent::Commit,
        ]), 0..20)) {
        let mut state = PlanState::Proposed;
        let mut commits = 0;
        for event in events {
            if let Ok(next) = plan::transition(state, event) {
                prop_assert!(!state.is_terminal());
                if next == PlanState::Committed {
                    commits += 1;
                }
                state = next;
            }
        }
        prop_assert!(commits <= 1);
    }

    /// Invariant 5: scope and slot are given back only on entering a final state, and
    /// not while any recorded attempt lacks accounting.
    #[test]
    fn invariant_5_release_only_on_terminal(from in arb_state(), to in arb_state(), owned in arb_facts()) {
        let f = owned.facts();
        let released = !to.holds_machine_scope() || !to.holds_rollout_slot();
        if from.holds_machine_scope() && released && check_transition(Some(from), to, &f).is_ok() {
            prop_assert!(to.is_terminal());
            prop_assert!(
                f.attempts.iter().all(|a| a.accounting() != super::evidence::Accounting::Unaccounted),
                "{:?} → {:?} released the scope with an unaccounted attempt", from, to
            );
        }
    }

    /// Invariant 6, classification: a history with an attempt that has only a
    /// transport outcome or nothing, and no accounting decision, classifies as
    /// unresolved whatever else was observed or recorded.
    #[test]
    fn invariant_6_unaccounted_attempt_classifies_nothing(
        before in proptest::collection::vec(arb_attempt(), 0..3),
        lost in arb_unaccounted_attempt(),
        after in proptest::collection::vec(arb_attempt(), 0..3),
        observation in arb_observation(),
        withdrawal in arb_withdrawal(),
        cancel_resolution in any::<bool>(),
        retry in arb_retry(),
        verification_deadline_passed in any::<bool>(),
        restore in arb_restore(),
    ) {
        let attempts: Vec<AttemptRecord> = before.into_iter().chain([lost]).chain(after).collect();
        let input = ClassifyInput { attempts: &attempts, observation, withdrawal, cancel_resolution, retry, verification_deadline_passed, restore };
        let got = classify(&input);
        prop_assert!(matches!(got, Classification::Unresolved(_)), "{:?} → {:?}", input, got);
    }

    /// Invariant 6, classification: with only absence of evidence (unanswered,
    /// unaccounted attempts or none; no observation or one that cannot decide; no
    /// withdrawal but a closed gate; no resolution; no restore) the outcome stays
    /// unresolved.
    #[test]
    fn invariant_6_absence_of_evidence(
        attempts in proptest::collection::vec(arb_unaccounted_attempt(), 0..4),
        purpose in proptest::sample::select(vec![None, Some(ObservationPurpose::Drift), Some(ObservationPurpose::Evidence), Some(ObservationPurpose::Publication)]),
        observation in arb_observation(),
        gate_closed in any::<bool>(),
        retry in arb_retry(),
        verification_deadline_passed in any::<bool>(),
    ) {
        // An observation taken for another purpose, or none: no completion or
        // recovery evidence.
        let observation = purpose.and(observation).map(|o| super::evidence::Observation { purpose: purpose.unwrap_or(o.purpose), ..o });
        let input = ClassifyInput {
            attempts: &attempts,
            observation,
            withdrawal: gate_closed.then_some(Withdrawal::GateClosed),
            cancel_resolution: false,
            retry,
            verification_deadline_passed,
            restore: RestoreStatus::NotRestored,
        };
        let got = classify(&input);
        prop_assert!(matches!(got, Classification::Unresolved(_)), "{:?} → {:?}", input, got);
    }

    /// Invariant 6, the §4 table: with only absence of evidence, no operation state
    /// moves anywhere but unresolved.
    #[test]
    fn invariant_6_table_moves_only_to_unresolved(
        from in arb_state(),
        to in arb_state(),
        attempts in proptest::collection::vec(arb_unaccounted_attempt(), 0..4),
        transport_deadline_passed in any::<bool>(),
        verification_deadline_passed in any::<bool>(),
        takeover in any::<bool>(),
        gate_closed in any::<bool>(),
    ) {
        let f = TransitionFacts {
            takeover,
            transport_deadline_passed,
            verification_deadline_passed,
            withdrawal: gate_closed.then_some(Withdrawal::GateClosed),
            ..TransitionFacts::quiet(OperationKind::ApplyConfig, &attempts)
        };
        if check_transition(Some(from), to, &f).is_ok() {
            prop_assert_eq!(to, S::Unresolved, "{:?} → {:?} on absence of evidence", from, to);
        }
    }

    /// Invariant 2 (the part a state machine holds): an operation enters sending only
    /// through an admitted attempt transaction.
    #[test]
    fn invariant_2_sending_needs_an_admitted_attempt(from in proptest::option::of(arb_state()), owned in arb_facts()) {
        let f = owned.facts();
        if check_transition(from, S::Sending, &f).is_ok() {
            prop_assert_eq!(f.attempt_transaction, AttemptTransaction::Admitted);
        }
    }

    /// Invariant 3 (the part a state machine holds): an apply-config operation
    /// completes only when attempts exist, none is unaccounted, and a completion
    /// observation proves the postconditions; an adopt one only by its adoption
    /// record.
    #[test]
    fn invariant_3_completed_follows_evidence(from in proptest::option::of(arb_state()), owned in arb_facts()) {
        let f = owned.facts();
        if check_transition(from, S::Completed, &f).is_ok() {
            match f.kind {
                OperationKind::Adopt => {
                    prop_assert_eq!(from, None);
                    prop_assert_eq!(f.creation, Some(operation::Creation::AdoptionRecord));
                }
                OperationKind::ApplyConfig => {
                    prop_assert!(!f.attempts.is_empty());
                    prop_assert!(f.attempts.iter().all(|a| a.accounting() != super::evidence::Accounting::Unaccounted));
                    prop_assert_eq!(f.completion, CompletionVerdict::Establishes);
                }
            }
        }
    }

    /// §5 and §4 agree: the state a classification of an unresolved operation leads
    /// to is one the §4 table allows on the same evidence, and an unresolved
    /// classification allows no move out of unresolved.
    #[test]
    fn classification_agrees_with_the_section_4_table(
        attempts in proptest::collection::vec(arb_attempt(), 0..4),
        observation in arb_observation(),
        withdrawal in arb_withdrawal(),
        cancel_resolution in any::<bool>(),
        retry in arb_retry(),
        verification_deadline_passed in any::<bool>(),
        restore in arb_restore(),
    ) {
        let input = ClassifyInput { attempts: &attempts, observation, withdrawal, cancel_resolution, retry, verification_deadline_passed, restore };
        let got = classify(&input);
        let facts = TransitionFacts {
            attempt_transaction: if got == Classification::SafeToRetry { AttemptTransaction::Admitted } else { AttemptTransaction::NotRun },
            withdrawal,
            cancel_resolution,
            completion: completion_verdict(observation.as_ref()),
            verification_deadline_passed,
            safe_to_retry: got == Classification::SafeToRetry,
            restore,
            ..TransitionFacts::quiet(OperationKind::ApplyConfig, &attempts)
        };
        let target = match got {
            Classification::Completed => Some(S::Completed),
            Classification::SafeToRetry => Some(S::Sending),
            Classification::Rejected => Some(S::Rejected),
            Classification::Failed(_) => Some(S::Failed),
            Classification::Cancelled(_) => Some(S::Cancelled),
            Classification::Unresolved(_) => None,
        };
        match target {
            Some(to) => {
                let r = check_transition(Some(S::Unresolved), to, &facts);
                prop_assert!(r.is_ok(), "{:?} → {:?}: {:?}", input, got, r);
            }
            None => {
                for to in S::ALL {
                    let refused = check_transition(Some(S::Unresolved), to, &facts);
                    prop_assert!(
                        matches!(
                            refused,
                            Err(OperationRefusal::NotInTable { from: Some(S::Unresolved), to: t }
                                | OperationRefusal::Unmet { from: Some(S::Unresolved), to: t, .. })
                                if t == to
                        ),
                        "{:?} → {:?}, yet unresolved → {:?} gives {:?}", input, got, to, refused
                    );
                }
            }
        }
    }

    /// Invariant 8: approvals, owner tokens and scope releases carrying a foreign
    /// epoch pass no check; epochs compare by equality only.
    #[test]
    fn invariant_8_other_epoch_authorizes_nothing(carried in arb_epoch(), current in arb_epoch()) {
        prop_assume!(carried != current);
        prop_assert!(!epoch::authorizes(carried, current));
        prop_assert!(epoch::authorizes(current, current));
        let foreign = |bearer| ForeignEpoch { bearer, carried, current };
        for bearer in [EpochBearer::Approval, EpochBearer::OwnershipToken, EpochBearer::ScopeRelease] {
            prop_assert_eq!(epoch::check_epoch(bearer, carried, current), Err(foreign(bearer)));
        }
        // Approval (comparison 1), at commitment and at an attempt.
        for (stage, plan_state) in [(Stage::Commitment, PlanState::Approved), (Stage::Attempt, PlanState::Committed)] {
            let facts = AuthorityFacts {
                plan_state,
                expires_at: InstantMs(u64::MAX),
                cancelled: false,
                approval: Some(ApprovalRecord { epoch: carried, revoked: false, identity_revoked: false }),
            };
            prop_assert_eq!(
                plan::check_authority(stage, &facts, InstantMs(0), current),
                Err(AuthorityRefusal::ForeignEpoch(foreign(EpochBearer::Approval)))
            );
            prop_assert!(plan::check_authority(stage, &facts, InstantMs(0), carried).is_ok());
        }
        // Ownership token (comparison 7).
        let token = OwnerToken::at_commitment(ControllerId(7), carried);
        let admission = AdmissionFacts {
            state: S::Committed,
            owner: token,
            presented: token,
            current_epoch: current,
            retry: None,
            attempts_recorded: 0,
            max_attempts: 3,
        };
        prop_assert_eq!(
            operation::check_admission(&admission),
            Err(AdmissionRefusal::ForeignEpoch(foreign(EpochBearer::OwnershipToken)))
        );
        let same_epoch = AdmissionFacts { current_epoch: carried, ..admission };
        prop_assert!(operation::check_admission(&same_epoch).is_ok());
        // Scope release (comparison 6), for every gated transaction.
        let gate = GateFacts {
            frozen: false,
            open_drift: None,
            bound_drift: None,
            recovery: RecoveryGate::InEffect { current, release: Some(carried) },
        };
        for m in Mutation::ALL {
            prop_assert_eq!(
                gate::check_gate(m, &gate),
                Err(GateRefusal::ReleaseFromAnotherEpoch(foreign(EpochBearer::ScopeRelease)))
            );
        }
    }

    /// Invariant 10: no commitment or attempt through a frozen scope (the adoption
    /// record excepted), and nothing at all in recovery mode unless the scope holds a
    /// present-epoch release.
    #[test]
    fn invariant_10_no_mutation_through_a_closed_gate(
        frozen in any::<bool>(),
        open in proptest::option::of(0..3u64),
        bound in proptest::option::of(0..3u64),
        in_recovery in any::<bool>(),
        current in arb_epoch(),
        release in proptest::option::of(prop_oneof![Just(None), arb_epoch().prop_map(Some)]),
        mutation in proptest::sample::select(Mutation::ALL.to_vec()),
    ) {
        let release = release.map(|r| r.unwrap_or(current));
        let facts = GateFacts {
            frozen,
            open_drift: open.map(|r| DriftRecordId(Revision(r))),
            bound_drift: bound.map(|r| DriftRecordId(Revision(r))),
            recovery: if in_recovery { RecoveryGate::InEffect { current, release } } else { RecoveryGate::NotInEffect },
        };
        let ok = gate::check_gate(mutation, &facts).is_ok();
        if frozen && mutation != Mutation::AdoptionRecord {
            prop_assert!(!ok);
        }
        if in_recovery && release != Some(current) {
            prop_assert!(!ok);
        }
    }

    /// Invariant 11: only recovery-admin records an accounting decision, whatever
    /// the facts.
    #[test]
    fn invariant_11_only_recovery_admin_accounts(
        role in proptest::sample::select(vec![Role::Author, Role::Publisher, Role::Approver, Role::Automation]),
        stop_at in 0..200_000u64,
        deadline in 0..200_000u64,
        reads in proptest::collection::vec((0..300_000u64, 0..5_000u64, proptest::option::of(0..3u64)), 0..5),
        now in 0..400_000u64,
    ) {
        let reads: Vec<RecordedRead> = reads.into_iter().map(|(s, d, v)| RecordedRead {
            purpose: ObservationPurpose::Recovery,
            started_at: InstantMs(s),
            recorded_at: InstantMs(s + d),
            config_version: v,
        }).collect();
        let facts = DecisionFacts {
            decider: role,
            stop: ExecutorStop::TakenOver { at: InstantMs(stop_at) },
            deadline: TransportDeadline::Known(InstantMs(deadline)),
            settle_floor: SpanMs::from_secs(30),
            reads: &reads,
            now: InstantMs(now),
            version_change_explanation: Some("explained"),
        };
        prop_assert_eq!(
            accounting::check_decision(&facts),
            Err(AccountingRefusal::NotRecoveryAdmin { role })
        );
        // And recovery-admin's passing decision always honours the floor.
        if let Ok(d) = accounting::check_decision(&DecisionFacts { decider: Role::RecoveryAdmin, ..facts }) {
            prop_assert!(d.floor_ends.0 >= stop_at.max(deadline) + 30_000);
            prop_assert!(d.end.started_at >= d.floor_ends);
            prop_assert!(d.start.started_at.0 > deadline);
        }
    }

    /// Invariant 13 in the pure §7.5 table (`recovery::permits`, which the store
    /// consults only for unfreezing): a pre-restore unaccounted scope admits no act
    /// able to send, approve or adopt; a released scope behaves as if recovery mode
    /// were off; no other scope admits a commitment, an attempt or an adoption record.
    #[test]
    fn recovery_permits_table_keeps_invariant_13(
        state in proptest::sample::select(ScopeState::ALL.to_vec()),
        act in proptest::sample::select(Act::ALL.to_vec()),
    ) {
        let got = recovery::permits(state, act);
        if state == ScopeState::PreRestoreUnaccounted && act.could_send_approve_or_adopt() {
            prop_assert_eq!(got, Err(ActRefusal::Unaccounted { act }));
        }
        if state == ScopeState::Released {
            prop_assert_eq!(got, recovery::permits(ScopeState::Normal, act));
        }
        if matches!(act, Act::Commitment | Act::Attempt | Act::AdoptionRecord)
            && !matches!(state, ScopeState::Normal | ScopeState::Released)
        {
            let expected = if state == ScopeState::PreRestoreUnaccounted {
                ActRefusal::Unaccounted { act }
            } else {
                ActRefusal::NotReleased { act, state }
            };
            prop_assert_eq!(got, Err(expected));
        }
    }
}
