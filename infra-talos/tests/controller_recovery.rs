//! The controller in recovery mode against the SQLite store and a simulated node over
//! real gRPC (§7.2, §7.3): the recovery pass paces recovery observations from the
//! entry, takes the restoration observation the mark relies on, sends nothing;
//! `start` leaves a scope alone until its step 1 decision, then classifies its restored
//! operation from a completion observation, sending nothing, so that the scope can be
//! marked, released and recovery mode left (§7.3 step 5).

mod controller_common;

use std::sync::Arc;

use controller_common::*;
use infra_talos::contract::SpanMs;
use infra_talos::contract::evidence::ObservationPurpose;
use infra_talos::contract::operation::{ControllerId, OperationState};
use infra_talos::contract::recovery::{BlockedOn, ScopeState};
use infra_talos::controller::{
    Executor, ExecutorSettings, Interruption, InterruptionHook, RecoveryAction, RecoveryPass,
};
use infra_talos::keys::KeyProvider;
use infra_talos::store::{DEFAULT_MAX_TRANSPORT_DEADLINE, ScopeAccounting, Store};

/// An executor whose maximum transport deadline is the store's, as one deployment
/// setting is both (§7.3 step 1).
fn deployed(w: &World, id: u128) -> Executor {
    Executor::new(
        ControllerId(id),
        w.store.clone(),
        w.connector.clone(),
        w.keyring.clone() as Arc<dyn KeyProvider>,
        Arc::new(LinkedClock(w.clock.clone())),
        ExecutorSettings {
            settle_floor: FLOOR,
            max_transport_deadline: DEFAULT_MAX_TRANSPORT_DEADLINE,
        },
    )
    .expect("executor")
}

fn action(pass: &RecoveryPass) -> RecoveryAction {
    assert!(pass.in_recovery, "{pass:?}");
    assert_eq!(pass.steps.len(), 1, "{pass:?}");
    pass.steps[0].action.clone()
}

async fn purposes(w: &World, purpose: ObservationPurpose) -> usize {
    w.store
        .observations(MACHINE)
        .await
        .expect("observations")
        .iter()
        .filter(|o| o.purpose == purpose)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recovery_pass_paces_reads_and_sends_nothing() {
    let w = World::new().await;
    let executor = deployed(&w, A);
    // Outside recovery mode the pass reads nothing.
    let idle = executor.recovery_pass().await.expect("pass");
    assert!(!idle.in_recovery && idle.steps.is_empty(), "{idle:?}");

    w.store
        .enter_recovery(&admin(), entry_now(w.store.as_ref(), ControllerId(B)).await)
        .await
        .expect("entry");
    let entered = w.clock.now();
    // The maximum transport deadline has not passed since the entry: nothing is
    // read yet.
    assert_eq!(
        action(&executor.recovery_pass().await.expect("pass")),
        RecoveryAction::NotDue {
            due: entered.plus(DEFAULT_MAX_TRANSPORT_DEADLINE)
        }
    );
    w.clock
        .advance(SpanMs(DEFAULT_MAX_TRANSPORT_DEADLINE.0 + 1000));
    assert!(matches!(
        action(&executor.recovery_pass().await.expect("pass")),
        RecoveryAction::RecoveryObserved { .. }
    ));
    // The next one waits a settle floor after the last was recorded.
    let RecoveryAction::NotDue { due } = action(&executor.recovery_pass().await.expect("pass"))
    else {
        panic!("a second read inside the settle floor");
    };
    assert_eq!(due, w.clock.now().plus(FLOOR));
    w.clock.advance(FLOOR);
    assert!(matches!(
        action(&executor.recovery_pass().await.expect("pass")),
        RecoveryAction::RecoveryObserved { .. }
    ));
    assert_eq!(purposes(&w, ObservationPurpose::Recovery).await, 2);

    // recovery-admin's step 1 decision relies on those two reads.
    w.store
        .account_scopes(
            &admin(),
            ScopeAccounting {
                machines: vec![MACHINE.into()],
                settle_floor: FLOOR,
                explanation: None,
            },
        )
        .await
        .expect("decision");
    let scope = w.store.machine(MACHINE).await.expect("machine").scope;
    assert_eq!(scope, ScopeState::Blocked(BlockedOn::AwaitingMark));
    // The pass takes the restoration observation the mark needs, once.
    assert!(matches!(
        action(&executor.recovery_pass().await.expect("pass")),
        RecoveryAction::RestorationObserved { .. }
    ));
    assert_eq!(
        action(&executor.recovery_pass().await.expect("pass")),
        RecoveryAction::Waits
    );
    assert_eq!(purposes(&w, ObservationPurpose::Restoration).await, 1);
    assert_eq!(
        w.store
            .mark_scope(&admin(), MACHINE, None)
            .await
            .expect("mark"),
        ScopeState::Ready
    );
    assert_eq!(w.applies(), 0, "the recovery pass never sends");
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_leaves_an_unreleased_scope_alone() {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    // The controller stops for good once the plan is committed, before its attempt.
    let hook: InterruptionHook = Arc::new(|point| {
        Box::pin(async move {
            if point == Interruption::Committed {
                std::future::pending::<()>().await;
            }
        })
    });
    let first = w.executor(A).with_interruptions(hook);
    let running = tokio::spawn(async move { first.run_plan("p1").await });
    while w.store.plan("p1").await.expect("plan").operation.is_none() {
        tokio::task::yield_now().await;
    }
    running.abort();
    w.store
        .enter_recovery(&admin(), entry_now(w.store.as_ref(), ControllerId(B)).await)
        .await
        .expect("entry");
    let second = w.executor(0xc3);
    let outcomes = second.start().await.expect("start");
    assert!(outcomes.is_empty(), "{outcomes:?}");
    let op = w
        .store
        .plan("p1")
        .await
        .expect("plan")
        .operation
        .expect("operation");
    let view = w.store.operation(&op).await.expect("operation");
    assert_eq!(
        view.owner.controller,
        ControllerId(B),
        "no takeover on an unreleased scope"
    );
    assert_eq!(w.applies(), 0);
    w.stop().await;
}

/// §7.3 step 5 with §8.7's operation S: its request landed, its answer was lost with
/// the controller, and the database came back with it sending. Once the step 1
/// decision accounts its attempt, the next start takes a completion observation and
/// classifies it completed, sending nothing; its scope is then marked ready,
/// released, and recovery mode is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_classifies_a_restored_operation_and_recovery_mode_ends() {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    let hook: InterruptionHook = Arc::new(|point| {
        Box::pin(async move {
            if point == Interruption::ResponseReceived {
                std::future::pending::<()>().await;
            }
        })
    });
    let first = w.executor(A).with_interruptions(hook);
    let running = tokio::spawn(async move { first.run_plan("p1").await });
    while w.applies() == 0 {
        tokio::task::yield_now().await;
    }
    running.abort();
    let op = w
        .store
        .plan("p1")
        .await
        .expect("plan")
        .operation
        .expect("operation");
    w.store
        .enter_recovery(&admin(), entry_now(w.store.as_ref(), ControllerId(B)).await)
        .await
        .expect("entry");
    let restart = deployed(&w, 0xc3);
    // Before the step 1 decision the start leaves the operation alone.
    assert!(restart.start().await.expect("start").is_empty());
    w.clock
        .advance(SpanMs(DEFAULT_MAX_TRANSPORT_DEADLINE.0 + 1000));
    let mut decided = false;
    for _ in 0..4 {
        restart.recovery_pass().await.expect("pass");
        let decision = w
            .store
            .account_scopes(
                &admin(),
                ScopeAccounting {
                    machines: vec![MACHINE.into()],
                    settle_floor: FLOOR,
                    explanation: None,
                },
            )
            .await;
        if decision.is_ok() {
            decided = true;
            break;
        }
        w.clock.advance(FLOOR);
    }
    assert!(decided, "the step 1 decision never passed");
    let scope = w.store.machine(MACHINE).await.expect("machine").scope;
    assert_eq!(scope, ScopeState::Unresolved);

    let outcomes = restart.start().await.expect("start");
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    assert_eq!(outcomes[0].operation, op);
    assert_eq!(outcomes[0].state, OperationState::Completed);
    assert_eq!(outcomes[0].sends, 0);
    let machine = w.store.machine(MACHINE).await.expect("machine");
    assert_eq!(machine.applied_release.as_deref(), Some("rel-1"));

    assert!(matches!(
        action(&restart.recovery_pass().await.expect("pass")),
        RecoveryAction::RestorationObserved { .. }
    ));
    assert_eq!(
        w.store
            .mark_scope(&admin(), MACHINE, None)
            .await
            .expect("mark"),
        ScopeState::Ready
    );
    w.store
        .release_scope(&admin(), MACHINE)
        .await
        .expect("release");
    w.store.leave_recovery(&admin()).await.expect("leave");
    assert_eq!(
        w.store.machine(MACHINE).await.expect("machine").scope,
        ScopeState::Normal
    );
    assert_eq!(
        w.applies(),
        1,
        "the restored operation's request was sent once"
    );
    w.stop().await;
}
