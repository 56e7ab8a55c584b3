//! Verification cases the executor tests did not yet reach, against the SQLite store
//! and the simulated worker: a revocation after the attempt (approval and identity),
//! a retry refused after such a revocation, a retry refused when the node shows
//! another identity, and a read failure while verifying.

mod controller_common;

use std::sync::Arc;

use controller_common::*;
use infra_talos::config_digest;
use infra_talos::contract::classify::{
    Classification, FailedReason, RetryBlocker, UnresolvedReason,
};
use infra_talos::contract::comparison::Comparison;
use infra_talos::contract::operation::OperationState;
use infra_talos::controller::{Interruption, InterruptionHook};
use infra_talos::store::{Store, StoreError};
use infra_testkit::talos::{ApplyFault, Landing, ReadFault, SimResource};

/// Which revocation a test records.
#[derive(Debug, Clone, Copy)]
enum Revocation {
    Approval,
    Identity,
}

impl Revocation {
    async fn record(self, store: &impl Store) {
        match self {
            Self::Approval => store.revoke_approval(&approver(), "p1").await,
            Self::Identity => store.revoke_identity(&admin(), "bob").await,
        }
        .expect("revocation recorded");
    }

    const fn entry(self) -> &'static str {
        match self {
            Self::Approval => "approval_revoked",
            Self::Identity => "identity_revoked",
        }
    }
}

/// A hook that records `revocation` once the attempt transaction has committed and
/// before the request is sent.
fn revoke_after_attempt(w: &World, revocation: Revocation) -> InterruptionHook {
    let store = w.store.clone();
    Arc::new(move |point| {
        let store = store.clone();
        Box::pin(async move {
            if point == Interruption::AttemptRecorded {
                revocation.record(&*store).await;
            }
        })
    })
}

/// A revocation after the attempt was recorded does not stop its send: the attempt goes out and is classified like any other.
async fn revoked_after_the_attempt_completes(revocation: Revocation) {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    let out = w
        .executor(A)
        .with_interruptions(revoke_after_attempt(&w, revocation))
        .run_plan("p1")
        .await
        .expect("run");
    assert_eq!(out.state, OperationState::Completed, "{out:?}");
    assert_eq!(out.sends, 1);
    assert_eq!(w.applies(), 1);
    assert_eq!(
        config_digest(&w.sim.config()),
        config_digest(&artifact("rel-1"))
    );
    // The revocation sits between the attempt and the response on the timeline.
    let timeline = w.timeline().await;
    let rev = |k: &str| {
        timeline
            .iter()
            .find(|e| e.kind == k)
            .unwrap_or_else(|| panic!("no {k} entry: {timeline:#?}"))
            .revision
    };
    assert!(rev("attempt") < rev(revocation.entry()));
    assert!(rev(revocation.entry()) < rev("response"));
    w.stop().await;
}

/// Dispatch-safety case 005: an approval revoked after the attempt transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_revoked_after_the_attempt_is_sent_and_completes() {
    revoked_after_the_attempt_completes(Revocation::Approval).await;
}

/// The approving identity revoked after the attempt transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_revoked_after_the_attempt_is_sent_and_completes() {
    revoked_after_the_attempt_completes(Revocation::Identity).await;
}

/// The attempt's request is held and never lands; the revocation comes after the
/// attempt. After accounting, the completion observation shows the pre-dispatch
/// digest: with the approval failing comparison 1 the operation is failed, not
/// retried (`held_request_that_never_lands_is_retried_once` in
/// `controller_executor.rs` is the same path without a revocation, which retries).
async fn revoked_after_an_unknown_attempt_refuses_the_retry(revocation: Revocation) {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    w.sim.fail_next_apply(ApplyFault::Hold(Landing::OnRelease));
    let out = w
        .executor(A)
        .with_interruptions(revoke_after_attempt(&w, revocation))
        .run_plan("p1")
        .await
        .expect("run");
    assert_eq!(out.state, OperationState::Unresolved);
    assert!(out.awaits_accounting(), "{out:?}");
    assert_eq!(out.sends, 1);
    let op = out.operation.clone();

    let b = w.executor(B);
    b.take_over(&op).await.unwrap();
    observe_until_decided(&w, &b, &op).await;
    let out = b.after_accounting(&op).await.unwrap();
    assert_eq!(out.state, OperationState::Failed, "{out:?}");
    assert_eq!(
        out.classification,
        Some(Classification::Failed(FailedReason::PreDispatchNoRetry(
            RetryBlocker::ApprovalFails
        )))
    );
    assert_eq!(out.sends, 0);
    assert_eq!(w.applies(), 1, "no retry was sent");
    assert_eq!(w.store.operation(&op).await.unwrap().attempts, 1);
    assert_eq!(w.sim.config(), base_config());
    w.stop().await;
}

/// Dispatch-safety case 005's "no retry", for an approval revocation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_revoked_after_an_unknown_attempt_refuses_the_retry() {
    revoked_after_an_unknown_attempt_refuses_the_retry(Revocation::Approval).await;
}

/// Identity revocation after an attempt, with the retry refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_revoked_after_an_unknown_attempt_refuses_the_retry() {
    revoked_after_an_unknown_attempt_refuses_the_retry(Revocation::Identity).await;
}

/// What the node shows after the retry was classified.
#[derive(Debug, Clone, Copy)]
enum Swap {
    SmbiosUuid,
    NodeId,
    ClusterId,
    /// Control: nothing changes.
    Nothing,
}

/// A held request that never lands, accounted; the completion observation shows
/// the pre-dispatch digest (safe to retry); then, before the retry's evidence is
/// read, the node at the machine's address shows `swap`. The retry's attempt is
/// refused by comparison 3 and nothing more is sent, except in the control, where
/// the retry is sent and completes.
async fn retry_on_another_identity(swap: Swap) {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    w.sim.fail_next_apply(ApplyFault::Hold(Landing::OnRelease));
    let out = w.executor(A).run_plan("p1").await.expect("run");
    assert!(out.awaits_accounting(), "{out:?}");
    let op = out.operation.clone();

    let sim = w.sim.clone();
    let original = sim.facts();
    let hook: InterruptionHook = Arc::new(move |point| {
        if point == Interruption::CompletionObserved {
            match swap {
                Swap::SmbiosUuid => sim.set_identity(
                    "99999999-8888-7777-6666-555555555555",
                    original.node_id.clone(),
                ),
                Swap::NodeId => sim.set_identity(original.smbios_uuid.clone(), "another-node"),
                Swap::ClusterId => sim.set_cluster_id("another-cluster"),
                Swap::Nothing => {}
            }
        }
        Box::pin(async {})
    });
    let b = w.executor(B).with_interruptions(hook);
    b.take_over(&op).await.unwrap();
    observe_until_decided(&w, &b, &op).await;
    let out = b.after_accounting(&op).await.unwrap();
    assert!(
        w.timeline()
            .await
            .iter()
            .any(|e| e.kind == "classification" && e.detail == "safe to retry"),
        "the retry was never classified"
    );
    match swap {
        Swap::SmbiosUuid | Swap::ClusterId => {
            assert_eq!(
                out.refusal.as_ref().and_then(StoreError::comparison),
                Some(Comparison::Evidence),
                "{out:?}"
            );
            assert_eq!(out.sends, 0);
            assert_eq!(w.applies(), 1, "the retry was sent to another machine");
            assert_eq!(w.store.operation(&op).await.unwrap().attempts, 1);
            // The owner's refusal by 3 leaves the operation unresolved (§3.3).
            assert_eq!(out.state, OperationState::Unresolved, "{out:?}");
        }
        // The machine is recorded by SMBIOS UUID: a matching UUID and cluster ID
        // with another node ID is the planned machine, and the retry goes out.
        Swap::NodeId | Swap::Nothing => {
            assert_eq!(out.state, OperationState::Completed, "{out:?}");
            assert_eq!(out.sends, 1);
            assert_eq!(w.applies(), 2);
        }
    }
    drop(b);
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_refused_on_another_smbios_uuid() {
    retry_on_another_identity(Swap::SmbiosUuid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_refused_on_another_cluster_id() {
    retry_on_another_identity(Swap::ClusterId).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_admitted_on_another_node_id_for_a_machine_keyed_by_uuid() {
    retry_on_another_identity(Swap::NodeId).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_admitted_on_the_same_identity() {
    retry_on_another_identity(Swap::Nothing).await;
}

/// Dispatch-safety case 017: the node accepts; while verifying, the connection is
/// lost as the machine configuration is read (the node cuts it instead of
/// answering), so the completion observation establishes nothing and the operation
/// is not completed; once the node answers again, a fresh completion observation on
/// a new connection completes it, with no second request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_lost_while_verifying_then_a_fresh_read_completes() {
    verifying_read_fails_then_completes(ReadFault::ConnectionLost).await;
}

/// The same with the node answering `Unavailable` to the read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_failure_while_verifying_then_a_fresh_read_completes() {
    verifying_read_fails_then_completes(ReadFault::Unavailable).await;
}

async fn verifying_read_fails_then_completes(fault: ReadFault) {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    let sim = w.sim.clone();
    let hook: InterruptionHook = Arc::new(move |point| {
        if point == Interruption::ResponseReceived {
            sim.fail_reads(SimResource::MachineConfig, fault);
        }
        Box::pin(async {})
    });
    let a = w.executor(A).with_interruptions(hook);
    let out = a.run_plan("p1").await.expect("run");
    assert_eq!(out.sends, 1);
    // The completion read got no digest: it establishes and contradicts nothing, so
    // the classification is unresolved for want of completion evidence and the
    // accepted attempt's operation stays verifying (its deadline has not passed).
    assert_eq!(out.state, OperationState::Verifying, "{out:?}");
    assert_eq!(
        out.classification,
        Some(Classification::Unresolved(
            UnresolvedReason::NoCompletionEvidence
        )),
        "{out:?}"
    );
    assert_eq!(out.refusal, None, "{out:?}");
    let op = out.operation.clone();
    assert_eq!(
        w.store.machine(MACHINE).await.unwrap().applied_digest,
        Some(config_digest(&base_config())),
        "a completion observation that read no digest moved Applied"
    );

    w.sim.clear_faults();
    let out = a.resume(&op).await.unwrap();
    assert_eq!(out.state, OperationState::Completed, "{out:?}");
    assert_eq!(out.sends, 0);
    assert_eq!(w.applies(), 1);
    assert_eq!(
        w.store.machine(MACHINE).await.unwrap().applied_digest,
        Some(config_digest(&artifact("rel-1")))
    );
    drop(a);
    w.stop().await;
}

/// A machine keyed by SMBIOS UUID whose system information cannot be read (each
/// failure the node can give) never commits: an evidence read that still shows a
/// node ID or cluster ID is compared and refused by comparison 3, one that read no
/// identity at all is missing evidence (choice §10.28) — never a match. Nothing is
/// sent. Control: once the node answers, the same plan runs to completion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unread_smbios_uuid_is_refused_end_to_end() {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    let a = w.executor(A);
    for fault in [
        ReadFault::PermissionDenied,
        ReadFault::Unavailable,
        ReadFault::Malformed,
        ReadFault::ConnectionLost,
    ] {
        w.sim.fail_reads(SimResource::SystemInformation, fault);
        let err = a.run_plan("p1").await.expect_err("refused");
        assert!(
            matches!(
                &err,
                infra_talos::controller::ExecutorError::Store(StoreError::CommitmentRefused {
                    comparison: Comparison::Evidence,
                    ..
                })
            ) || matches!(
                &err,
                infra_talos::controller::ExecutorError::Store(StoreError::EvidenceMissing {
                    reason
                }) if reason.contains("identity")
            ),
            "{fault:?}: {err}"
        );
        assert_eq!(
            w.store.plan("p1").await.unwrap().operation,
            None,
            "{fault:?}"
        );
        assert_eq!(w.applies(), 0, "{fault:?}");
        w.sim.clear_faults();
    }
    let out = a.run_plan("p1").await.expect("run");
    assert_eq!(out.state, OperationState::Completed, "{out:?}");
    assert_eq!(w.applies(), 1);
    drop(a);
    w.stop().await;
}
