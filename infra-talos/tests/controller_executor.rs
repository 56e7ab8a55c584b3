//! The executor against the SQLite store and a simulated worker over real gRPC with
//! mutual TLS: the main path, each fault the node can show, takeover at start, and
//! the pacing of recovery observations (§3, §4, §5, §5.2).

mod controller_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use controller_common::*;
use infra_talos::config_digest;
use infra_talos::contract::classify::{
    Classification, FailedReason, RetryBlocker, UnresolvedReason,
};
use infra_talos::contract::comparison::Comparison;
use infra_talos::contract::operation::{ControllerId, OperationState};
use infra_talos::contract::plan::PlanState;
use infra_talos::contract::{InstantMs, SpanMs};
use infra_talos::controller::{
    Executor, ExecutorError, ExecutorSettings, Interruption, InterruptionHook, Outcome,
};
use infra_talos::store::{Store, StoreError};
use infra_testkit::talos::{ApplyFault, ApplyMode, Landing, RecordedCall};
use tokio::sync::Notify;

/// Consecutive recovery observations are at least a settle floor apart, and the
/// first started after the latest transport deadline.
async fn paced(executor: &Executor, operation: &str, deadline: InstantMs) {
    let reads = executor.recovery_reads(operation).await.expect("reads");
    assert!(!reads.is_empty());
    assert!(
        reads[0].started_at > deadline,
        "a recovery observation started at {} before the deadline {deadline}",
        reads[0].started_at
    );
    for pair in reads.windows(2) {
        assert!(
            pair[1].started_at.0 >= pair[0].recorded_at.0 + FLOOR.0,
            "recovery observations closer than the settle floor: {pair:?}"
        );
    }
}

/// When attempt `n` (from 0) of `operation` was recorded.
async fn attempt_time(w: &World, operation: &str, n: usize) -> InstantMs {
    w.store.attempts(operation).await.expect("attempts")[n].at
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn happy_path_sends_once_after_the_attempt_is_recorded() {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    let sim = w.sim.clone();
    let seen_at_attempt = Arc::new(AtomicUsize::new(usize::MAX));
    let seen = seen_at_attempt.clone();
    let hook: InterruptionHook = Arc::new(move |point| {
        if point == Interruption::AttemptRecorded {
            seen.store(sim.apply_requests().len(), Ordering::SeqCst);
        }
        Box::pin(async {})
    });
    let a = w.executor(A).with_interruptions(hook);

    let out = a.run_plan("p1").await.expect("run");
    assert_eq!(out.state, OperationState::Completed);
    assert_eq!(out.classification, Some(Classification::Completed));
    assert_eq!(out.sends, 1);

    // Exactly one apply, in no-reboot mode, of the artifact; none before the attempt.
    assert_eq!(seen_at_attempt.load(Ordering::SeqCst), 0);
    let applies = w.sim.apply_requests();
    assert_eq!(applies.len(), 1);
    let artifact_digest = config_digest(&artifact("rel-1"));
    assert_eq!(
        applies[0].call,
        RecordedCall::ApplyConfiguration {
            mode: ApplyMode::NoReboot,
            dry_run: false,
            data_digest: artifact_digest.to_hex(),
        }
    );
    let timeline = w.timeline().await;
    let attempt = timeline
        .iter()
        .find(|e| e.kind == "attempt")
        .expect("attempt on the timeline");
    assert!(u128::from(attempt.at.0) <= applies[0].at.as_millis());
    let commitment = timeline.iter().find(|e| e.kind == "commitment").unwrap();
    assert!(commitment.revision < attempt.revision);

    // Applied moved; the node runs the artifact.
    let machine = w.store.machine(MACHINE).await.unwrap();
    assert_eq!(machine.applied_digest, Some(artifact_digest));
    assert_eq!(machine.applied_release.as_deref(), Some("rel-1"));
    assert_eq!(config_digest(&w.sim.config()), artifact_digest);

    // The scope is free: the next plan commits and completes.
    w.approved_plan("p2", "rel-2", 3).await;
    let out = a.run_plan("p2").await.expect("second run");
    assert_eq!(out.state, OperationState::Completed);
    assert_eq!(w.applies(), 2);
    w.no_plaintext_stored().await;
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_rejection_is_rejected_and_frees_the_scope() {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    w.sim.fail_next_apply(ApplyFault::InvalidArgument(format!(
        "1 error occurred: bad token \"{MARKER}\""
    )));
    let a = w.executor(A);

    let out = a.run_plan("p1").await.expect("run");
    assert_eq!(out.state, OperationState::Rejected);
    // The node's message is kept as the dispatch client redacted it.
    let attempts = w.store.attempts(&out.operation).await.unwrap();
    assert_eq!(attempts.len(), 1);
    assert!(attempts[0].accounted());
    let text = attempts[0].response_text.as_deref().expect("message kept");
    assert!(text.starts_with("1 error occurred: bad token"), "{text}");
    assert!(
        text.contains("<withheld>") && !text.contains(MARKER),
        "{text}"
    );
    w.no_plaintext_stored().await;
    assert_eq!(w.applies(), 1, "a rejection is never retried");
    assert_eq!(w.sim.config(), base_config());
    let machine = w.store.machine(MACHINE).await.unwrap();
    assert_eq!(machine.applied_digest, Some(config_digest(&base_config())));

    w.approved_plan("p2", "rel-2", 3).await;
    let out = a.run_plan("p2").await.expect("next plan");
    assert_eq!(out.state, OperationState::Completed);
    assert_eq!(w.applies(), 2);
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_is_an_unknown_outcome_never_a_rejection() {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    w.sim.fail_next_apply(ApplyFault::Unavailable);
    let out = w.executor(A).run_plan("p1").await.expect("run");
    assert_eq!(out.state, OperationState::Unresolved);
    assert!(out.awaits_accounting(), "{out:?}");
    assert_eq!(
        out.classification,
        Some(Classification::Unresolved(
            UnresolvedReason::UnaccountedAttempts { count: 1 }
        ))
    );
    assert_eq!(w.applies(), 1);
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_response_waits_for_accounting_then_completes() {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    w.sim.fail_next_apply(ApplyFault::LoseResponse);
    let a = w.executor(A);
    let out = a.run_plan("p1").await.expect("run");
    assert_eq!(out.state, OperationState::Unresolved);
    assert!(out.awaits_accounting());
    let op = out.operation.clone();
    let artifact_digest = config_digest(&artifact("rel-1"));
    assert_eq!(config_digest(&w.sim.config()), artifact_digest, "it landed");

    // The owner's recovery observations: the first just after the transport
    // deadline, the next a settle floor later. They settle nothing.
    let deadline = attempt_time(&w, &op, 0).await.plus(TRANSPORT);
    let first = a.recovery_observation(&op).await.unwrap();
    assert_eq!(first.started_at, deadline.plus(SpanMs(1)));
    let second = a.recovery_observation(&op).await.unwrap();
    assert!(second.started_at.0 >= first.recorded_at.0 + FLOOR.0);
    assert_eq!(second.digest, Some(artifact_digest.to_hex()));
    let out = a.resume(&op).await.unwrap();
    assert!(out.awaits_accounting());
    assert_eq!(
        w.store.machine(MACHINE).await.unwrap().applied_digest,
        Some(config_digest(&base_config())),
        "a matching digest alone moves nothing"
    );

    // The executor merely being idle is no stop (§5.2 condition 1).
    assert!(matches!(
        decide(&w, &op).await,
        Err(StoreError::AccountingRefused { .. })
    ));
    // recovery-admin has another instance take over, which observes until the
    // decision holds.
    let b = w.executor(B);
    assert!(matches!(
        b.take_over_at_request(&op, &approver()).await,
        Err(ExecutorError::Store(StoreError::Refused { .. }))
    ));
    b.take_over_at_request(&op, &admin()).await.unwrap();
    let takeover = w
        .timeline()
        .await
        .into_iter()
        .find(|e| e.kind == "takeover")
        .expect("takeover recorded");
    assert_eq!(takeover.requested_by.as_deref(), Some("root"));
    assert!(matches!(
        a.recovery_observation(&op).await,
        Err(ExecutorError::NotOwner { .. })
    ));
    observe_until_decided(&w, &b, &op).await;
    paced(&b, &op, deadline).await;

    let out = b.after_accounting(&op).await.unwrap();
    assert_eq!(out.state, OperationState::Completed);
    assert_eq!(out.sends, 0);
    assert_eq!(w.applies(), 1);
    let machine = w.store.machine(MACHINE).await.unwrap();
    assert_eq!(machine.applied_digest, Some(artifact_digest));
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_request_landing_late_completes_after_accounting() {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    w.sim.fail_next_apply(ApplyFault::Hold(Landing::OnRelease));
    let out = w.executor(A).run_plan("p1").await.expect("run");
    assert_eq!(out.state, OperationState::Unresolved);
    assert!(out.awaits_accounting());
    let op = out.operation.clone();
    assert_eq!(w.sim.config(), base_config(), "held, not landed yet");

    // It lands after the client gave up.
    assert_eq!(w.sim.release_held(), 1);
    let artifact_digest = config_digest(&artifact("rel-1"));
    assert_eq!(config_digest(&w.sim.config()), artifact_digest);

    let b = w.executor(B);
    let outcomes = b.start().await.unwrap();
    assert_eq!(outcomes.len(), 1);
    assert!(outcomes[0].awaits_accounting(), "{outcomes:?}");
    observe_until_decided(&w, &b, &op).await;
    let deadline = attempt_time(&w, &op, 0).await.plus(TRANSPORT);
    paced(&b, &op, deadline).await;
    let out = b.after_accounting(&op).await.unwrap();
    assert_eq!(out.state, OperationState::Completed);
    assert_eq!(w.applies(), 1);
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_request_that_never_lands_is_retried_once() {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    w.sim.fail_next_apply(ApplyFault::Hold(Landing::OnRelease));
    let out = w.executor(A).run_plan("p1").await.expect("run");
    assert!(out.awaits_accounting());
    let op = out.operation.clone();

    let b = w.executor(B);
    b.take_over(&op).await.unwrap();
    observe_until_decided(&w, &b, &op).await;
    // The completion observation shows the pre-dispatch digest: safe to retry, with
    // fresh evidence and a new attempt transaction.
    let out = b.after_accounting(&op).await.unwrap();
    assert_eq!(out.state, OperationState::Completed);
    assert_eq!(out.sends, 1);
    assert_eq!(w.applies(), 2, "exactly one more apply request");
    assert_eq!(w.store.operation(&op).await.unwrap().attempts, 2);
    let timeline = w.timeline().await;
    assert!(
        timeline
            .iter()
            .any(|e| e.kind == "classification" && e.detail == "safe to retry")
    );
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_request_that_never_lands_fails_without_budget() {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 1).await;
    w.sim.fail_next_apply(ApplyFault::Hold(Landing::OnRelease));
    let out = w.executor(A).run_plan("p1").await.expect("run");
    let op = out.operation.clone();
    let b = w.executor(B);
    b.take_over(&op).await.unwrap();
    observe_until_decided(&w, &b, &op).await;
    let out = b.after_accounting(&op).await.unwrap();
    assert_eq!(out.state, OperationState::Failed);
    assert_eq!(
        out.classification,
        Some(Classification::Failed(FailedReason::PreDispatchNoRetry(
            RetryBlocker::NoAttemptsLeft
        )))
    );
    assert_eq!(w.applies(), 1);
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_identity_is_refused_before_any_send() {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    w.sim
        .set_identity("11111111-2222-3333-4444-555555555555", "other-node");
    let err = w.executor(A).run_plan("p1").await.expect_err("refused");
    assert!(
        matches!(
            err,
            ExecutorError::Store(StoreError::CommitmentRefused {
                comparison: Comparison::Evidence,
                ..
            })
        ),
        "{err}"
    );
    assert_eq!(w.applies(), 0);
    let plan = w.store.plan("p1").await.unwrap();
    assert_eq!(plan.state, PlanState::Approved);
    assert_eq!(plan.operation, None);
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_after_commitment_cancels_without_sending() {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    let store = w.store.clone();
    let hook: InterruptionHook = Arc::new(move |point| {
        let store = store.clone();
        Box::pin(async move {
            if point == Interruption::Committed {
                store
                    .revoke_approval(&approver(), "p1")
                    .await
                    .expect("revoke");
            }
        })
    });
    let out = w
        .executor(A)
        .with_interruptions(hook)
        .run_plan("p1")
        .await
        .expect("run");
    assert_eq!(out.state, OperationState::Cancelled);
    assert_eq!(out.sends, 0);
    assert_eq!(
        out.refusal.as_ref().and_then(StoreError::comparison),
        Some(Comparison::Authority)
    );
    assert_eq!(w.applies(), 0);
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_at_start_completes_and_fences_the_first_instance() {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    let paused = Arc::new(Notify::new());
    let go = Arc::new(Notify::new());
    let (p, g) = (paused.clone(), go.clone());
    let hook: InterruptionHook = Arc::new(move |point| {
        let (p, g) = (p.clone(), g.clone());
        Box::pin(async move {
            if point == Interruption::Committed {
                p.notify_one();
                g.notified().await;
            }
        })
    });
    let a = Arc::new(w.executor(A).with_interruptions(hook));
    let first = tokio::spawn({
        let a = a.clone();
        async move { a.run_plan("p1").await }
    });
    paused.notified().await;
    let op = w
        .store
        .plan("p1")
        .await
        .unwrap()
        .operation
        .expect("committed");
    assert_eq!(
        w.store.operation(&op).await.unwrap().state,
        OperationState::Committed
    );

    let b = w.executor(B);
    let outcomes = b.start().await.unwrap();
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].state, OperationState::Completed);
    assert_eq!(outcomes[0].sends, 1);
    assert_eq!(w.applies(), 1);

    // The first instance wakes up and tries its attempt with its old token.
    go.notify_one();
    let late: Outcome = first.await.unwrap().expect("late run");
    assert_eq!(late.sends, 0);
    // Its attempt transaction refuses: the operation it names has moved on (the
    // baseline it binds moved when the new owner completed it), and its token is no
    // longer the owner's. Nothing is sent and the refusal settles nothing.
    assert_eq!(
        late.refusal.as_ref().and_then(StoreError::comparison),
        Some(Comparison::Bindings),
        "{late:?}"
    );
    assert_eq!(w.applies(), 1);
    assert_eq!(
        w.store.operation(&op).await.unwrap().state,
        OperationState::Completed
    );
    let refused = w
        .timeline()
        .await
        .into_iter()
        .find(|e| e.kind == "attempt_refused")
        .expect("the refusal is recorded");
    assert!(refused.actor.contains(&format!("{A:032x}")), "{refused:?}");
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settle_floor_under_thirty_seconds_is_refused() {
    let w = World::new().await;
    let made = Executor::new(
        ControllerId(A),
        w.store.clone(),
        w.connector.clone(),
        w.keyring.clone(),
        Arc::new(LinkedClock(w.clock.clone())),
        ExecutorSettings {
            settle_floor: SpanMs::from_secs(29),
            max_transport_deadline: SpanMs::from_secs(10),
        },
    );
    assert!(matches!(made, Err(ExecutorError::Settings(_))));
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_observations_wait_for_the_transport_deadline() {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    w.sim.fail_next_apply(ApplyFault::LoseResponse);
    let a = w.executor(A);
    let out = a.run_plan("p1").await.expect("run");
    let op = out.operation;
    let before = w.clock.now();
    let read = a.recovery_observation(&op).await.unwrap();
    let deadline = attempt_time(&w, &op, 0).await.plus(TRANSPORT);
    assert!(before < deadline, "the test starts before the deadline");
    assert!(read.started_at > deadline);
    let purposes: Vec<_> = w
        .timeline()
        .await
        .into_iter()
        .filter(|e| e.kind == "observation_started" && e.detail == "purpose recovery")
        .map(|e| e.at)
        .collect();
    assert_eq!(purposes, vec![read.started_at]);
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_above_the_maximum_transport_deadline_is_not_run() {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    assert_eq!(
        w.store.plan("p1").await.unwrap().transport_deadline,
        TRANSPORT
    );
    let strict = Executor::new(
        ControllerId(A),
        w.store.clone(),
        w.connector.clone(),
        w.keyring.clone(),
        Arc::new(LinkedClock(w.clock.clone())),
        ExecutorSettings {
            settle_floor: FLOOR,
            max_transport_deadline: SpanMs(TRANSPORT.0 - 1),
        },
    )
    .unwrap();
    assert!(matches!(
        strict.run_plan("p1").await,
        Err(ExecutorError::Settings(_))
    ));
    assert_eq!(w.store.plan("p1").await.unwrap().operation, None);
    assert_eq!(w.applies(), 0);
    w.stop().await;
}
