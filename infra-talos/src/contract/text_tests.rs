//! Snapshots of every human-facing text: state names as displayed and as stored,
//! and every refusal message.

use std::fmt::Write as _;

use serde::Serialize;

use super::accounting::{AccountingRefusal, Decision, JointRefusal, RecordedRead};
use super::classify::{Classification, FailedReason, RetryBlocker, UnresolvedReason};
use super::drift::{Closure, DriftEvent, DriftRefusal, DriftState};
use super::epoch::{Epoch, EpochBearer, ForeignEpoch};
use super::evidence::{CancelCause, DigestMatch, ObservationPurpose, Withdrawal};
use super::gate::{DriftRecordId, FreezeAct, FreezeRefusal, FreezeState, GateRefusal};
use super::operation::{
    AdmissionRefusal, ControllerId, OperationRefusal, OperationState, TakeoverRefusal, Unmet,
};
use super::plan::{
    AuthorityRefusal, PlanEvent, PlanRefusal, PlanState, SelfApproval, SelfApprovalBasis, Stage,
};
use super::recovery::{
    Act, BlockedOn, Dependency, ExitRefusal, ScopeEvent, ScopeRefusal, ScopeState,
};
use super::{InstantMs, Revision, Role, SpanMs};

const A: Epoch = Epoch::from_bytes([0xaa; 16]);
const B: Epoch = Epoch::from_bytes([0xbb; 16]);

fn state_lines<T: std::fmt::Display + Serialize>(states: &[T]) -> String {
    let mut out = String::new();
    for s in states {
        let json = serde_json::to_string(s).unwrap_or_default();
        let _ = writeln!(out, "{s} | {json}");
    }
    out
}

fn lines<T: std::fmt::Display>(items: &[T]) -> String {
    let mut out = String::new();
    for i in items {
        let _ = writeln!(out, "{i}");
    }
    out
}

#[test]
fn plan_texts() {
    let mut out = state_lines(&PlanState::ALL);
    out += "\n";
    out += &lines(&[
        PlanRefusal::Terminal {
            state: PlanState::Revoked,
            event: PlanEvent::Commit,
        },
        PlanRefusal::AfterCommitment {
            event: PlanEvent::Cancel,
        },
        PlanRefusal::NotApplicable {
            state: PlanState::Proposed,
            event: PlanEvent::Commit,
        },
        PlanRefusal::NotApplicable {
            state: PlanState::Proposed,
            event: PlanEvent::Reapprove {
                standing: A,
                current: B,
            },
        },
        PlanRefusal::ApprovalStillCurrent,
    ]);
    out += "\n";
    out += &lines(&[
        AuthorityRefusal::PlanState {
            stage: Stage::Commitment,
            state: PlanState::Proposed,
        },
        AuthorityRefusal::PlanState {
            stage: Stage::Attempt,
            state: PlanState::Approved,
        },
        AuthorityRefusal::Expired {
            expires_at: InstantMs(100),
            now: InstantMs(150),
        },
        AuthorityRefusal::Cancelled,
        AuthorityRefusal::NoApproval,
        AuthorityRefusal::ApprovalRevoked,
        AuthorityRefusal::IdentityRevoked,
        AuthorityRefusal::ForeignEpoch(ForeignEpoch {
            bearer: EpochBearer::Approval,
            carried: A,
            current: B,
        }),
    ]);
    out += "\n";
    out += &state_lines(&[
        SelfApproval::NotSelfApproval,
        SelfApproval::SelfApproval(SelfApprovalBasis::CreatedPlan),
        SelfApproval::SelfApproval(SelfApprovalBasis::AuthoredContent),
        SelfApproval::SelfApproval(SelfApprovalBasis::ResponsibleForToken),
        SelfApproval::Undetermined,
    ]);
    insta::assert_snapshot!("plan", out);
}

#[test]
fn operation_texts() {
    use OperationState as S;
    let mut out = state_lines(&S::ALL);
    out += "\n";
    let unmet = [
        (None, S::Committed, Unmet::NoCommitment),
        (None, S::Completed, Unmet::NoAdoptionRecord),
        (None, S::Committed, Unmet::AdoptIsNeverCommitted),
        (None, S::Completed, Unmet::OnlyAdoptStartsCompleted),
        (Some(S::Committed), S::Sending, Unmet::AttemptNotAdmitted),
        (
            Some(S::Committed),
            S::Unresolved,
            Unmet::NoCauseFromCommitted,
        ),
        (Some(S::Verifying), S::Completed, Unmet::NoAttempt),
        (Some(S::Sending), S::Verifying, Unmet::LatestNotAccepted),
        (Some(S::Sending), S::Rejected, Unmet::LatestNotRejected),
        (Some(S::Sending), S::Rejected, Unmet::EarlierNotRejected),
        (Some(S::Unresolved), S::Rejected, Unmet::NotAllRejected),
        (
            Some(S::Unresolved),
            S::Rejected,
            Unmet::RestoredNeverRejected,
        ),
        (Some(S::Sending), S::Unresolved, Unmet::NoCauseFromSending),
        (
            Some(S::Unresolved),
            S::Completed,
            Unmet::Unaccounted { count: 2 },
        ),
        (Some(S::Verifying), S::Completed, Unmet::NotEstablished),
        (Some(S::Unresolved), S::Failed, Unmet::NotContradicted),
        (Some(S::Verifying), S::Failed, Unmet::HealthInWindow),
        (Some(S::Unresolved), S::Failed, Unmet::ClassifiedSafeToRetry),
        (
            Some(S::Verifying),
            S::Unresolved,
            Unmet::NoCauseFromVerifying,
        ),
        (Some(S::Unresolved), S::Sending, Unmet::NotSafeToRetry),
        (
            Some(S::Unresolved),
            S::Cancelled,
            Unmet::AttemptRecorded { count: 1 },
        ),
        (Some(S::Unresolved), S::Cancelled, Unmet::NoCancelCause),
        (
            Some(S::Unresolved),
            S::Cancelled,
            Unmet::RestoredScopeUnaccounted,
        ),
    ];
    let mut refusals = vec![
        OperationRefusal::NotInTable {
            from: None,
            to: S::Sending,
        },
        OperationRefusal::NotInTable {
            from: Some(S::Committed),
            to: S::Completed,
        },
        OperationRefusal::Terminal {
            from: S::Failed,
            to: S::Unresolved,
        },
        OperationRefusal::AdoptTakesNoOtherState {
            from: S::Committed,
            to: S::Sending,
        },
    ];
    refusals.extend(
        unmet
            .into_iter()
            .map(|(from, to, unmet)| OperationRefusal::Unmet { from, to, unmet }),
    );
    out += &lines(&refusals);
    out += "\n";
    out += &lines(&[
        TakeoverRefusal::Terminal {
            state: S::Completed,
        },
        TakeoverRefusal::GenerationMoved {
            expected: 3,
            actual: 4,
        },
        TakeoverRefusal::GenerationExhausted,
    ]);
    out += "\n";
    out += &lines(&[
        AdmissionRefusal::ForeignEpoch(ForeignEpoch {
            bearer: EpochBearer::OwnershipToken,
            carried: A,
            current: B,
        }),
        AdmissionRefusal::NotOwner {
            owner: ControllerId(1),
            presented: ControllerId(2),
        },
        AdmissionRefusal::StaleGeneration {
            owner: 4,
            presented: 3,
        },
        AdmissionRefusal::StateAdmitsNoAttempt {
            state: S::Verifying,
        },
        AdmissionRefusal::NoRetryClassification,
        AdmissionRefusal::ClassifiedByAnother,
        AdmissionRefusal::TimelineMoved {
            classified_at: Revision(10),
            latest: Revision(12),
        },
        AdmissionRefusal::NoAttemptsLeft {
            recorded: 3,
            max: 3,
        },
    ]);
    insta::assert_snapshot!("operation", out);
}

#[test]
fn classification_texts() {
    let out = state_lines(&[
        Classification::Completed,
        Classification::SafeToRetry,
        Classification::Rejected,
        Classification::Unresolved(UnresolvedReason::UnaccountedAttempts { count: 1 }),
        Classification::Unresolved(UnresolvedReason::NoCompletionEvidence),
        Classification::Unresolved(UnresolvedReason::HealthConverging),
        Classification::Unresolved(UnresolvedReason::NothingSent),
        Classification::Unresolved(UnresolvedReason::RetryBlocked(RetryBlocker::GateClosed)),
        Classification::Unresolved(UnresolvedReason::RestoredScopeUnaccounted),
        Classification::Failed(FailedReason::Digest(DigestMatch::PreDispatch)),
        Classification::Failed(FailedReason::Digest(DigestMatch::Other)),
        Classification::Failed(FailedReason::Identity),
        Classification::Failed(FailedReason::Assignment),
        Classification::Failed(FailedReason::HealthAtDeadline),
        Classification::Failed(FailedReason::PreDispatchNoRetry(
            RetryBlocker::NoAttemptsLeft,
        )),
        Classification::Failed(FailedReason::PreDispatchNoRetry(
            RetryBlocker::ApprovalFails,
        )),
        Classification::Failed(FailedReason::PreDispatchNoRetry(RetryBlocker::Restored)),
        Classification::Cancelled(CancelCause::ApprovalRevoked),
        Classification::Cancelled(CancelCause::IdentityRevoked),
        Classification::Cancelled(CancelCause::PlanCancelled),
        Classification::Cancelled(CancelCause::PlanExpired),
        Classification::Cancelled(CancelCause::ForeignEpoch),
        Classification::Cancelled(CancelCause::Resolution),
    ]);
    let mut out = out;
    out += "\n";
    out += &state_lines(&Withdrawal::ALL);
    insta::assert_snapshot!("classification", out);
}

#[test]
fn accounting_texts() {
    let read = |at: u64, v: u64| RecordedRead {
        purpose: ObservationPurpose::Recovery,
        started_at: InstantMs(at),
        recorded_at: InstantMs(at + 500),
        config_version: Some(v),
    };
    let mut out = lines(&[
        AccountingRefusal::NotRecoveryAdmin {
            role: Role::Approver,
        },
        AccountingRefusal::FloorBelowMinimum {
            floor: SpanMs(10_000),
        },
        AccountingRefusal::ExecutorNotStopped,
        AccountingRefusal::NoReadAfterDeadline {
            deadline: InstantMs(90_000),
        },
        AccountingRefusal::FloorNotElapsed {
            floor_ends: InstantMs(130_000),
            now: InstantMs(120_000),
        },
        AccountingRefusal::NoRecoveryReadAfterFloor {
            floor_ends: InstantMs(130_000),
        },
        AccountingRefusal::UnexplainedVersionChange { start: 5, end: 6 },
    ]);
    out += &lines(&[JointRefusal {
        index: 2,
        refusal: AccountingRefusal::ExecutorNotStopped,
    }]);
    out += &lines(&[Decision {
        start: read(95_000, 5),
        end: read(140_000, 6),
        settle_from: InstantMs(100_000),
        floor_ends: InstantMs(130_000),
        version_changed: true,
    }]);
    insta::assert_snapshot!("accounting", out);
}

#[test]
fn gate_and_drift_texts() {
    let mut out = lines(&[
        GateRefusal::Frozen,
        GateRefusal::UnboundDrift {
            open: DriftRecordId(Revision(41)),
        },
        GateRefusal::BoundDriftClosed {
            bound: DriftRecordId(Revision(41)),
        },
        GateRefusal::NotReleased,
        GateRefusal::ReleaseFromAnotherEpoch(ForeignEpoch {
            bearer: EpochBearer::ScopeRelease,
            carried: A,
            current: B,
        }),
    ]);
    out += "\n";
    out += &state_lines(&[FreezeState::Unfrozen, FreezeState::Frozen]);
    out += &lines(&[
        FreezeRefusal::Role {
            act: FreezeAct::Freeze,
            role: Role::Automation,
        },
        FreezeRefusal::Role {
            act: FreezeAct::Unfreeze,
            role: Role::RecoveryAdmin,
        },
        FreezeRefusal::BlankReason,
        FreezeRefusal::ReasonTooLong { len: 2000 },
        FreezeRefusal::NoChange {
            state: FreezeState::Frozen,
        },
    ]);
    out += "\n";
    out += &state_lines(&DriftState::ALL);
    out += &lines(&[
        DriftRefusal::NoDriftRules,
        DriftRefusal::BaselineChanged,
        DriftRefusal::HigherBasisRead,
        DriftRefusal::ScopeHeld,
        DriftRefusal::MatchesApplied,
        DriftRefusal::FailedCompletionClosesNothing,
        DriftRefusal::NothingOpen {
            event: DriftEvent::AdoptionRecorded,
        },
        DriftRefusal::Closed {
            closure: Closure::Reverted,
            event: DriftEvent::Freeze,
        },
    ]);
    insta::assert_snapshot!("gate_and_drift", out);
}

#[test]
fn recovery_texts() {
    let mut out = state_lines(&ScopeState::ALL);
    out += "\n";
    out += &lines(&[
        ScopeRefusal::NotInRecovery {
            event: ScopeEvent::Release {
                desired_matches_mark: true,
            },
        },
        ScopeRefusal::AwaitingAccounting {
            event: ScopeEvent::Exit {
                every_scope_released: true,
            },
        },
        ScopeRefusal::AlreadyAccounted {
            state: ScopeState::Ready,
        },
        ScopeRefusal::NotReady {
            state: ScopeState::Blocked(BlockedOn::MissingDependency(Dependency::KeyVersion)),
        },
        ScopeRefusal::DesiredMoved,
        ScopeRefusal::Released {
            event: ScopeEvent::AccountingDecision {
                restored_operation_holds_scope: false,
            },
        },
        ScopeRefusal::NotAllReleased,
        ScopeRefusal::ExitBeforeRelease {
            state: ScopeState::Unresolved,
        },
    ]);
    out += &lines(&[ExitRefusal { unreleased: 3 }]);
    out += "\n";
    // Every refusal §7.5 actually produces, once each.
    let mut seen = std::collections::BTreeSet::new();
    for state in ScopeState::ALL {
        for act in Act::ALL {
            if let Err(refusal) = super::recovery::permits(state, act)
                && seen.insert(refusal.to_string())
            {
                let _ = writeln!(out, "{refusal}");
            }
        }
    }
    insta::assert_snapshot!("recovery", out);
}
