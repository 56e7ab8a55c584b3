//! A publication racing a commitment on PostgreSQL (§3.2 comparison 2's Desired
//! term): the publication waits for a commitment that holds the machine row, a
//! commitment waits for a publication that holds it and is then refused, and the
//! unlocked control shows a plain read of Desired holding nothing off.
//!
//! Set `INFRA_TEST_DATABASE_URL` to run them; without it they print a skip line,
//! and fail when `CI=true`.

mod pg_support;
mod store_suite;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use infra_talos::contract::comparison::Comparison;
use infra_talos::contract::operation::OperationState;
use infra_talos::contract::plan::PlanState;
use infra_talos::store::postgres::PgStore;
use infra_talos::store::{Guards, Hook, HookPoint, Store};
use store_suite::*;
use tokio::sync::{Notify, oneshot};

fn database_url() -> Option<String> {
    pg_support::database_url("verification test")
}

/// A store in a fresh schema, with `hook` at the store's hook points.
async fn env(url: &str, hook: Option<Hook>) -> Env<PgStore> {
    let (schema, options) = pg_support::schema(url, "v").await;
    let (mut settings, clock) = settings(Guards::default());
    settings.hook = hook;
    let store = PgStore::connect_for_tests(options, 4, settings)
        .await
        .unwrap();
    Env {
        store,
        clock,
        keep: Box::new(schema),
    }
}

/// A hook that stops the first transaction reaching a wanted point until released.
struct Gate {
    entered: Arc<Notify>,
    release: oneshot::Sender<()>,
}

fn gate_hook(wanted: fn(&HookPoint) -> bool) -> (Hook, Gate) {
    let (tx, rx) = oneshot::channel();
    let entered = Arc::new(Notify::new());
    let slot = Arc::new(Mutex::new(Some(rx)));
    let notify = entered.clone();
    let hook: Hook = Arc::new(move |point| {
        let waiter = if wanted(&point) {
            slot.lock().unwrap().take()
        } else {
            None
        };
        let notify = notify.clone();
        Box::pin(async move {
            if let Some(rx) = waiter {
                notify.notify_one();
                let _ = rx.await;
            }
        })
    });
    (
        hook,
        Gate {
            entered,
            release: tx,
        },
    )
}

/// How many sessions of this store's schema wait on a lock now.
async fn lock_waiters(store: &PgStore) -> i64 {
    let row: (i64,) = sqlx::query_as(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE wait_event_type = 'Lock' AND application_name = current_setting('application_name')",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    row.0
}

/// Wait until some session of this store waits on a lock.
async fn wait_for_lock_waiter(store: &PgStore) {
    for _ in 0..500 {
        if lock_waiters(store).await > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no transaction ever waited on a lock");
}

/// A publication starting while the commitment holds the machine row waits for it
/// and commits after it; the commitment went through on the release it read, and
/// its attempt is still admitted (comparison 2's Desired term is not repeated).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publication_waits_for_a_commitment_holding_the_machine_row() {
    let Some(url) = database_url() else { return };
    let (hook, gate) =
        gate_hook(|p| matches!(p, HookPoint::CommitmentLocked { plan, .. } if plan == "p1"));
    let env = Arc::new(env(&url, Some(hook)).await);
    world(&env.store).await;
    ready(&env, "p1", "m1", A).await;
    let committer = {
        let env = env.clone();
        tokio::spawn(async move { env.store.commit("p1", A).await })
    };
    gate.entered.notified().await;
    let publisher = {
        let env = env.clone();
        tokio::spawn(async move { publish(&env.store, "rel-2").await })
    };
    wait_for_lock_waiter(&env.store).await;
    assert!(!publisher.is_finished(), "the publication did not wait");
    gate.release.send(()).unwrap();
    let c = committer.await.unwrap().expect("the commitment went first");
    publisher.await.unwrap();
    let timeline = env.store.timeline("m1").await.unwrap();
    let commitment = timeline.iter().find(|e| e.kind == "commitment").unwrap();
    let selected = timeline
        .iter()
        .rfind(|e| e.kind == "desired_changed")
        .unwrap();
    assert!(commitment.revision < selected.revision);
    assert_eq!(
        env.store
            .machine("m1")
            .await
            .unwrap()
            .desired_release
            .as_deref(),
        Some("rel-2")
    );
    let proof = env.store.attempt(&c.operation, c.owner).await.unwrap();
    assert_eq!(proof.artifact_digest(), artifact_digest("m1", "rel-1"));
    assert_eq!(
        env.store.operation(&c.operation).await.unwrap().state,
        OperationState::Sending
    );
}

/// A publication holding the machine row (a raw transaction standing for one in
/// progress): the commitment waits for it, then sees the new Desired release and
/// is refused by comparison 2; nothing is committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commitment_waits_for_a_publication_and_is_refused() {
    let Some(url) = database_url() else { return };
    let env = Arc::new(env(&url, None).await);
    world(&env.store).await;
    ready(&env, "p1", "m1", A).await;
    // The release the raw transaction selects must exist.
    sqlx::query(
        "INSERT INTO releases (id, published_by, published_at) \
         SELECT 'rel-raw', published_by, published_at FROM releases WHERE id = 'rel-1'",
    )
    .execute(env.store.pool())
    .await
    .unwrap();
    let mut raw = env.store.pool().begin().await.unwrap();
    sqlx::query("SELECT desired_release FROM machines WHERE id = 'm1' FOR UPDATE")
        .execute(&mut *raw)
        .await
        .unwrap();
    let committer = {
        let env = env.clone();
        tokio::spawn(async move { env.store.commit("p1", A).await })
    };
    wait_for_lock_waiter(&env.store).await;
    assert!(!committer.is_finished(), "the commitment did not wait");
    sqlx::query("UPDATE machines SET desired_release = 'rel-raw' WHERE id = 'm1'")
        .execute(&mut *raw)
        .await
        .unwrap();
    raw.commit().await.unwrap();
    let err = committer.await.unwrap().unwrap_err();
    assert_eq!(err.comparison(), Some(Comparison::Bindings), "{err}");
    assert!(plan_operations(&env.store, "m1").await.is_empty());
    assert_eq!(
        env.store.plan("p1").await.unwrap().state,
        PlanState::Approved
    );
}

/// The control for the two above: a transaction that reads Desired with a plain
/// read holds no publication off, which then commits under it, so the value it
/// read is stale before it commits. With the row locked as the commitment locks
/// it, the same publication waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_read_of_desired_holds_no_publication_off() {
    let Some(url) = database_url() else { return };
    for locked in [false, true] {
        let env = Arc::new(env(&url, None).await);
        world(&env.store).await;
        let mut reader = env.store.pool().begin().await.unwrap();
        let sql = if locked {
            "SELECT desired_release FROM machines WHERE id = 'm1' FOR UPDATE"
        } else {
            "SELECT desired_release FROM machines WHERE id = 'm1'"
        };
        let (read,): (Option<String>,) = sqlx::query_as(sql).fetch_one(&mut *reader).await.unwrap();
        assert_eq!(read.as_deref(), Some("rel-1"));
        let publisher = {
            let env = env.clone();
            tokio::spawn(async move { publish(&env.store, "rel-2").await })
        };
        if locked {
            wait_for_lock_waiter(&env.store).await;
            assert!(!publisher.is_finished(), "the publication did not wait");
            reader.commit().await.unwrap();
            publisher.await.unwrap();
        } else {
            // The publication commits while the reader's transaction is open.
            tokio::time::timeout(Duration::from_secs(10), publisher)
                .await
                .expect("without the lock the publication does not wait")
                .unwrap();
            let now: (Option<String>,) =
                sqlx::query_as("SELECT desired_release FROM machines WHERE id = 'm1'")
                    .fetch_one(&mut *reader)
                    .await
                    .unwrap();
            assert_eq!(
                now.0.as_deref(),
                Some("rel-2"),
                "the value the reader decided on is stale inside its own transaction"
            );
            reader.commit().await.unwrap();
        }
    }
}
/// Observation ordering under a concurrent accounting decision (§4.1, §4 completion
/// observations): the decision's transaction is held at `AccountingLocked`, with the
/// machine row locked. An observation of the same machine started then waits on
/// the lock (`pg_stat_activity`), while one of another machine does not (the
/// control: the wait is the machine row's). Once the decision commits, the waiting
/// observation's basis lies after the decision's revision, and its reading of the
/// artifact completes the operation. An observation started before the decision
/// and recorded only after it, with the same reading, does not count: classified
/// with it alone the operation stays unresolved for want of completion evidence and
/// Applied does not move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observation_started_during_an_accounting_decision_waits_and_counts_after_it() {
    use infra_talos::contract::SpanMs;
    use infra_talos::contract::classify::{Classification, UnresolvedReason};
    use infra_talos::contract::evidence::{ObservationPurpose, ResponseClass, TransportOutcome};
    use infra_talos::store::{AccountingRequest, ObservationRequest};

    let Some(url) = database_url() else { return };
    let (hook, gate) = gate_hook(|p| matches!(p, HookPoint::AccountingLocked { .. }));
    let env = Arc::new(env(&url, Some(hook)).await);
    let s = &env.store;
    world(s).await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    let _proof = s.attempt(&c.operation, c.owner).await.unwrap();
    s.record_response(
        &c.operation,
        1,
        c.owner,
        ResponseClass::Transport(TransportOutcome::DeadlineExceeded),
    )
    .await
    .unwrap();
    // §5.2's conditions: taken over, a read after the transport deadline (5 s), the
    // settle floor, and a recovery observation after it.
    let owner = s.takeover(&c.operation, 1, B).await.unwrap();
    env.clock.advance(SpanMs::from_secs(6));
    observe(
        s,
        "m1",
        ObservationPurpose::Recovery,
        None,
        B,
        facts("m1", base_digest("m1")),
    )
    .await;
    env.clock.advance(SpanMs::from_secs(31));
    observe(
        s,
        "m1",
        ObservationPurpose::Recovery,
        None,
        B,
        facts("m1", base_digest("m1")),
    )
    .await;
    let completion = |machine: &str| ObservationRequest {
        machine: machine.into(),
        purpose: ObservationPurpose::Completion,
        plan: None,
        controller: B,
    };
    let early = s.begin_observation(completion("m1")).await.unwrap();

    let decision = {
        let env = env.clone();
        let operation = c.operation.clone();
        tokio::spawn(async move {
            env.store
                .record_accounting_decision(
                    &root(),
                    AccountingRequest {
                        operation,
                        attempt: 1,
                        settle_floor: SpanMs::from_secs(30),
                        explanation: None,
                    },
                )
                .await
        })
    };
    gate.entered.notified().await;
    // Control: another machine's row is not held, so its observation starts at once.
    tokio::time::timeout(
        Duration::from_secs(10),
        s.begin_observation(completion("m2")),
    )
    .await
    .expect("an observation of another machine waited for m1's decision")
    .unwrap();
    assert_eq!(lock_waiters(s).await, 0);
    let observer = {
        let env = env.clone();
        tokio::spawn(async move { env.store.begin_observation(completion("m1")).await })
    };
    wait_for_lock_waiter(s).await;
    assert!(!observer.is_finished(), "the observation did not wait");
    assert!(
        !decision.is_finished(),
        "the decision did not hold at its hook"
    );
    gate.release.send(()).unwrap();
    decision
        .await
        .unwrap()
        .expect("the decision's conditions hold");
    let late = observer.await.unwrap().unwrap();

    let accounting = s
        .timeline("m1")
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.kind == "accounting")
        .expect("the decision is on the timeline")
        .revision;
    assert!(early.basis < accounting, "{early:?} vs r{}", accounting.0);
    assert!(late.basis > accounting, "{late:?} vs r{}", accounting.0);

    // The early read, recorded after the decision, shows the artifact: it counts for
    // nothing.
    let shows_artifact = facts("m1", artifact_digest("m1", "rel-1"));
    let recorded = s
        .record_observation(&early, shows_artifact.clone())
        .await
        .unwrap();
    assert!(recorded > accounting);
    assert_eq!(
        s.classify(&c.operation, owner).await.unwrap(),
        Classification::Unresolved(UnresolvedReason::NoCompletionEvidence)
    );
    assert_eq!(
        s.machine("m1").await.unwrap().applied_digest,
        Some(base_digest("m1"))
    );
    // The read that waited for the decision counts.
    s.record_observation(&late, shows_artifact).await.unwrap();
    assert_eq!(
        s.classify(&c.operation, owner).await.unwrap(),
        Classification::Completed
    );
    assert_eq!(
        s.operation(&c.operation).await.unwrap().state,
        OperationState::Completed
    );
    assert_eq!(
        s.machine("m1").await.unwrap().applied_digest,
        Some(artifact_digest("m1", "rel-1"))
    );
}
