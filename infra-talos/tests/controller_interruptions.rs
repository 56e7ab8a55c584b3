//! The five interruption points of §5.3, each reached by a controller process that
//! is killed there with `SIGKILL` (it stops at the point and says so; the test kills
//! it): the state it leaves, and how a second executor resolves it, with the
//! simulated node's apply-request count showing what was sent.

mod controller_common;

use std::io::{BufRead as _, BufReader};
use std::os::unix::process::ExitStatusExt as _;
use std::process::{Command, Stdio};
use std::sync::Arc;

use controller_common::*;
use infra_talos::config_digest;
use infra_talos::contract::InstantMs;
use infra_talos::contract::operation::OperationState;
use infra_talos::contract::plan::PlanState;
use infra_talos::controller::{Executor, Interruption};
use infra_talos::store::sqlite::SqliteStore;
use infra_talos::store::{AccountingRequest, ManualClock, Store, StoreError};

/// `SIGKILL`.
const KILL: i32 = 9;
const FIRST: u128 = 0x1111;
const SECOND: u128 = 0x2222;

/// Runs the controller process for plan `p1` until it stops at `point`, then kills
/// it with `SIGKILL`.
async fn crash_at(w: &World, point: Interruption) {
    // The file is the controller's alone while it runs.
    w.store.pool().close().await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_controller_crash"))
        .env("CRASH_DB", &w.db)
        .env("CRASH_TALOSCONFIG", &w.talosconfig)
        .env("CRASH_NODE", w.sim.node_address())
        .env("CRASH_KEYS", w.dir.path().join("keys"))
        .env("CRASH_PLAN", "p1")
        .env("CRASH_MACHINE", MACHINE)
        .env("CRASH_CONTROLLER", format!("{FIRST:x}"))
        .env("CRASH_POINT", point.name())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the controller starts");
    let pid = child.id();
    let stdout = child.stdout.take().expect("the controller's output");
    let status = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        let read = BufReader::new(stdout).read_line(&mut line);
        // Killed whether or not it reached the point, so no process is left behind.
        let _ = child.kill();
        let status = child.wait();
        (read, line, status)
    })
    .await
    .unwrap();
    let (read, line, status) = status;
    read.unwrap_or_else(|e| panic!("controller {pid}: output unreadable: {e}"));
    assert_eq!(
        line.trim_end(),
        format!("reached {}", point.name()),
        "controller {pid} did not stop at the point"
    );
    let status = status.unwrap_or_else(|e| panic!("controller {pid} could not be waited for: {e}"));
    assert_eq!(status.signal(), Some(KILL), "controller {pid}: {status}");
}

/// The store reopened after the crash, on a hand-moved clock a second past the
/// last entry the controller wrote (on the database's own clock).
async fn reopen(w: &World) -> (Arc<SqliteStore>, ManualClock) {
    let probe = SqliteStore::open(&w.db).await.unwrap();
    let last = probe
        .timeline(MACHINE)
        .await
        .unwrap()
        .iter()
        .map(|e| e.at)
        .max()
        .unwrap();
    probe.pool().close().await;
    open_store(&w.db, InstantMs(last.0.max(w.clock.now().0) + 1000)).await
}

async fn decide(store: &SqliteStore, operation: &str) -> Result<(), StoreError> {
    store
        .record_accounting_decision(
            &admin(),
            AccountingRequest {
                operation: operation.into(),
                attempt: 1,
                settle_floor: FLOOR,
                explanation: None,
            },
        )
        .await
}

/// Takes over at start, is held while the attempt is unaccounted, observes until
/// recovery-admin's decision holds, then completes after it.
async fn account_and_complete(store: &SqliteStore, second: &Executor, operation: &str) {
    let outcomes = second.start().await.unwrap();
    assert_eq!(outcomes.len(), 1);
    assert!(outcomes[0].awaits_accounting(), "{outcomes:?}");
    assert_eq!(outcomes[0].sends, 0);
    assert!(
        decide(store, operation).await.is_err(),
        "no decision before the settle"
    );
    let mut last = None;
    for _ in 0..6 {
        second.recovery_observation(operation).await.unwrap();
        match decide(store, operation).await {
            Ok(_) => {
                last = None;
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    assert_eq!(last, None, "the accounting decision never became possible");
    let out = second.after_accounting(operation).await.unwrap();
    assert_eq!(out.state, OperationState::Completed, "{out:?}");
}

async fn prepared() -> World {
    // The set-up (the handover's read among it) precedes, on the hand-moved clock,
    // what the controller process writes on the database's own clock.
    let now =
        infra_talos::backend::WallTime::system(Arc::new(infra_core::engine::SystemClock::new()))
            .now();
    let w = World::new_at(InstantMs(now.0 - 600_000)).await;
    w.approved_plan("p1", "rel-1", 3).await;
    w
}

fn operation_of(plan: &infra_talos::store::PlanView) -> String {
    plan.operation.clone().expect("the plan has its operation")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_before_commitment() {
    let w = prepared().await;
    crash_at(&w, Interruption::BeforeCommitment).await;
    let (store, clock) = reopen(&w).await;
    let plan = store.plan("p1").await.unwrap();
    assert_eq!(plan.state, PlanState::Approved);
    assert_eq!(plan.operation, None);
    assert_eq!(w.applies(), 0);

    // Any controller runs the plan again from §3.1.
    let second = w.executor_on(SECOND, store.clone(), &clock);
    let out = second.run_plan("p1").await.unwrap();
    assert_eq!(out.state, OperationState::Completed);
    assert_eq!(w.applies(), 1);
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_commitment_before_any_attempt() {
    let w = prepared().await;
    crash_at(&w, Interruption::Committed).await;
    let (store, clock) = reopen(&w).await;
    let op = operation_of(&store.plan("p1").await.unwrap());
    let view = store.operation(&op).await.unwrap();
    assert_eq!(view.state, OperationState::Committed);
    assert_eq!(view.attempts, 0);
    assert_eq!(w.applies(), 0);

    // Takeover; nothing to account; a recovery observation at the pre-dispatch
    // digest allows the retry; one landing.
    let second = w.executor_on(SECOND, store.clone(), &clock);
    let outcomes = second.start().await.unwrap();
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].state, OperationState::Completed, "{outcomes:?}");
    assert_eq!(w.applies(), 1);
    let timeline = store.timeline(MACHINE).await.unwrap();
    assert!(timeline.iter().any(|e| e.kind == "takeover"));
    assert!(
        timeline
            .iter()
            .any(|e| e.kind == "classification" && e.detail == "safe to retry")
    );
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_attempt_before_the_send() {
    let w = prepared().await;
    crash_at(&w, Interruption::AttemptRecorded).await;
    let (store, clock) = reopen(&w).await;
    let op = operation_of(&store.plan("p1").await.unwrap());
    let view = store.operation(&op).await.unwrap();
    assert_eq!(view.state, OperationState::Sending);
    assert_eq!(view.attempts, 1);
    let timeline = store.timeline(MACHINE).await.unwrap();
    assert!(!timeline.iter().any(|e| e.kind == "response"));
    assert_eq!(w.applies(), 0);

    // The attempt was never sent, but nothing on record proves it: it is accounted
    // by decision; the completion observation then shows the pre-dispatch digest,
    // and the retry is the one request that lands.
    let second = w.executor_on(SECOND, store.clone(), &clock);
    account_and_complete(&store, &second, &op).await;
    assert_eq!(w.applies(), 1);
    assert_eq!(store.operation(&op).await.unwrap().attempts, 2);
    assert_eq!(
        config_digest(&w.sim.config()),
        config_digest(&artifact("rel-1"))
    );
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_acceptance_before_the_response_is_recorded() {
    let w = prepared().await;
    crash_at(&w, Interruption::ResponseReceived).await;
    let (store, clock) = reopen(&w).await;
    let op = operation_of(&store.plan("p1").await.unwrap());
    let view = store.operation(&op).await.unwrap();
    assert_eq!(view.state, OperationState::Sending);
    let timeline = store.timeline(MACHINE).await.unwrap();
    assert!(!timeline.iter().any(|e| e.kind == "response"));
    assert_eq!(w.applies(), 1, "the node accepted");

    let second = w.executor_on(SECOND, store.clone(), &clock);
    account_and_complete(&store, &second, &op).await;
    assert_eq!(w.applies(), 1, "no second request");
    assert_eq!(store.operation(&op).await.unwrap().attempts, 1);
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_a_matching_observation_before_completion() {
    let w = prepared().await;
    crash_at(&w, Interruption::CompletionObserved).await;
    let (store, clock) = reopen(&w).await;
    let op = operation_of(&store.plan("p1").await.unwrap());
    let view = store.operation(&op).await.unwrap();
    assert_eq!(view.state, OperationState::Verifying);
    let timeline = store.timeline(MACHINE).await.unwrap();
    assert!(
        timeline
            .iter()
            .any(|e| e.kind == "response" && e.detail.ends_with("accepted"))
    );
    assert_eq!(w.applies(), 1);
    let completions = |t: &[infra_talos::store::TimelineEntry]| {
        t.iter()
            .filter(|e| e.kind == "observation_started" && e.detail == "purpose completion")
            .count()
    };
    assert_eq!(completions(&timeline), 1);

    // Takeover, a new completion observation, completed.
    let second = w.executor_on(SECOND, store.clone(), &clock);
    let outcomes = second.start().await.unwrap();
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].state, OperationState::Completed, "{outcomes:?}");
    assert_eq!(outcomes[0].sends, 0);
    assert_eq!(w.applies(), 1);
    let timeline = store.timeline(MACHINE).await.unwrap();
    assert_eq!(completions(&timeline), 2);
    w.stop().await;
}
