//! The store test suite on PostgreSQL, the lock races of §3.2 driven step by step,
//! and a throughput measurement.
//!
//! Set `INFRA_TEST_DATABASE_URL` (e.g. `postgres://postgres@127.0.0.1:55433/postgres`)
//! to run them. Each test works in its own schema, dropped at the end. Without the
//! variable the tests print a skip line, and fail when `CI=true`.

mod pg_support;
mod store_suite;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use infra_talos::contract::Role;
use infra_talos::contract::comparison::Comparison;
use infra_talos::contract::epoch::{EpochBearer, ForeignEpoch};
use infra_talos::contract::operation::{ControllerId, OperationState, OwnerToken};
use infra_talos::contract::plan::{AuthorityRefusal, PlanState, Stage};
use infra_talos::contract::recovery::ScopeState;
use infra_talos::store::postgres::PgStore;
use infra_talos::store::{
    Actor, Committed, ContributionKind, Guards, Hook, HookPoint, ReleaseSpec, Settings, Store,
    StoreError,
};
use store_suite::*;
use tokio::sync::{Notify, oneshot};

type Make = fn(Guards) -> Pin<Box<dyn Future<Output = Env<PgStore>> + Send>>;

fn database_url() -> Option<String> {
    pg_support::database_url("store test")
}

async fn env_with(settings: Settings, clock: infra_talos::store::ManualClock) -> Env<PgStore> {
    let url = database_url().expect("checked by make()");
    let (schema, options) = pg_support::schema(&url, "t").await;
    let store = PgStore::connect_for_tests(options, 4, settings)
        .await
        .unwrap();
    Env {
        store,
        clock,
        keep: Box::new(schema),
    }
}

async fn env(guards: Guards) -> Env<PgStore> {
    let (settings, clock) = settings(guards);
    env_with(settings, clock).await
}

fn make() -> Option<Make> {
    database_url()?;
    Some(|g| Box::pin(env(g)))
}

store_suite!(make);
verification_suite!(make);
blanket_suite!(make);
drift_suite!(make);
recovery_suite!(make);
identity_suite!(make);
evidence_suite!(make);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_url_means_skip_or_failure_in_ci() {
    // The rule itself: absent URL → skip (or panic under CI=true). Nothing else to
    // check when the URL is there.
    let _ = make();
}

/// A hook that stops the first transaction reaching `wanted` until released.
struct Gate {
    entered: Arc<Notify>,
    release: Arc<Mutex<Option<oneshot::Receiver<()>>>>,
}

fn gate_hook(wanted: fn(&HookPoint) -> bool) -> (Hook, Gate, oneshot::Sender<()>) {
    let (tx, rx) = oneshot::channel();
    let gate = Gate {
        entered: Arc::new(Notify::new()),
        release: Arc::new(Mutex::new(Some(rx))),
    };
    let entered = gate.entered.clone();
    let release = gate.release.clone();
    let hook: Hook = Arc::new(move |point| {
        let waiter = if wanted(&point) {
            release.lock().unwrap().take()
        } else {
            None
        };
        let entered = entered.clone();
        Box::pin(async move {
            if let Some(rx) = waiter {
                entered.notify_one();
                let _ = rx.await;
            }
        })
    });
    (hook, gate, tx)
}

async fn racing_env(
    wanted: fn(&HookPoint) -> bool,
) -> Option<(Env<PgStore>, Gate, oneshot::Sender<()>)> {
    database_url()?;
    let (mut settings, clock) = settings(Guards::default());
    let (hook, gate, release) = gate_hook(wanted);
    settings.hook = Some(hook);
    Some((env_with(settings, clock).await, gate, release))
}

/// Wait until some session of this store waits on a lock (pg_stat_activity).
async fn wait_for_lock_waiter(store: &PgStore) {
    for _ in 0..500 {
        let row: (i64,) = sqlx::query_as(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE wait_event_type = 'Lock' AND application_name = current_setting('application_name')",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        if row.0 > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the second transaction never waited on a lock");
}

fn commitment_by(c: ControllerId) -> impl Fn(&HookPoint) -> bool {
    move |p| matches!(p, HookPoint::CommitmentLocked { controller, .. } if *controller == c)
}

/// A commitment of plan p1 (made ready on m1) by controller A, spawned and held at
/// its lock point (the machine row locked, the approval read to share) until
/// `release` is sent.
async fn commitment_held_at_its_lock() -> Option<(
    Arc<Env<PgStore>>,
    tokio::task::JoinHandle<Result<Committed, StoreError>>,
    oneshot::Sender<()>,
)> {
    let (env, gate, release) =
        racing_env(|p| matches!(p, HookPoint::CommitmentLocked { .. })).await?;
    let env = Arc::new(env);
    world(&env.store).await;
    ready(&env, "p1", "m1", A).await;
    let committer = {
        let env = env.clone();
        tokio::spawn(async move { env.store.commit("p1", A).await })
    };
    gate.entered.notified().await;
    Some((env, committer, release))
}

/// DS row 003: a revocation racing the commitment. The commitment holds the machine
/// row and has read the approval; the revocation waits for it, then commits; the
/// attempt that follows is refused by comparison 1 and nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_003_revocation_waits_for_commitment() {
    let Some((env, committer, release)) = commitment_held_at_its_lock().await else {
        return;
    };
    let revoker = {
        let env = env.clone();
        tokio::spawn(async move { env.store.revoke_approval(&bob(), "p1").await })
    };
    wait_for_lock_waiter(&env.store).await;
    assert!(!revoker.is_finished(), "the revocation did not wait");
    // A second connection sees neither act yet.
    let s = &env.store;
    let from = kinds(s, "m1").await.len();
    let revoked: bool = sqlx::query_scalar(
        "SELECT revoked FROM approvals WHERE plan_id = 'p1' ORDER BY seq DESC LIMIT 1",
    )
    .fetch_one(s.pool())
    .await
    .unwrap();
    assert!(!revoked, "the revocation is visible before it committed");
    assert_eq!(s.plan("p1").await.unwrap().state, PlanState::Approved);
    release.send(()).unwrap();
    let c = committer.await.unwrap().unwrap();
    revoker.await.unwrap().unwrap();
    assert_eq!(
        entries_from(s, "m1", from).await,
        strings(&[("commitment", None), ("approval_revoked", None)])
    );
    assert_eq!(
        env.store.plan("p1").await.unwrap().state,
        PlanState::Committed
    );
    let err = env.store.attempt(&c.operation, c.owner).await.unwrap_err();
    assert_eq!(
        err,
        StoreError::AttemptRefused {
            comparison: Comparison::Authority,
            reason: AuthorityRefusal::ApprovalRevoked.to_string(),
        }
    );
    assert_eq!(
        env.store.operation(&c.operation).await.unwrap().state,
        OperationState::Cancelled
    );
    assert!(
        !env.store
            .timeline("m1")
            .await
            .unwrap()
            .iter()
            .any(|e| e.kind == "attempt")
    );
}

/// DS row 009: two executors commit the same plan; the second waits on the machine
/// row and is then refused by comparison 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_009_same_plan_twice() {
    let Some((env, gate, release)) = racing_env(|p| commitment_by(A)(p)).await else {
        return;
    };
    let env = Arc::new(env);
    world(&env.store).await;
    ready(&env, "p1", "m1", A).await;
    evidence(&env.store, "p1", "m1", B, facts("m1", base_digest("m1"))).await;
    let first = {
        let env = env.clone();
        tokio::spawn(async move { env.store.commit("p1", A).await })
    };
    gate.entered.notified().await;
    let second = {
        let env = env.clone();
        tokio::spawn(async move { env.store.commit("p1", B).await })
    };
    wait_for_lock_waiter(&env.store).await;
    assert!(!second.is_finished());
    release.send(()).unwrap();
    first.await.unwrap().unwrap();
    let err = second.await.unwrap().unwrap_err();
    assert_eq!(
        err.comparison(),
        Some(Comparison::PlanHasNoOperation),
        "{err}"
    );
    assert_eq!(plan_operations(&env.store, "m1").await.len(), 1);
}

/// DS row 010: a second plan for a machine whose first plan is committing waits,
/// then is refused by comparison 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn race_010_second_plan_while_held() {
    let Some((env, gate, release)) =
        racing_env(|p| matches!(p, HookPoint::CommitmentLocked { plan, .. } if plan == "p1")).await
    else {
        return;
    };
    let env = Arc::new(env);
    world(&env.store).await;
    ready(&env, "p1", "m1", A).await;
    ready(&env, "p2", "m1", B).await;
    let first = {
        let env = env.clone();
        tokio::spawn(async move { env.store.commit("p1", A).await })
    };
    gate.entered.notified().await;
    let second = {
        let env = env.clone();
        tokio::spawn(async move { env.store.commit("p2", B).await })
    };
    wait_for_lock_waiter(&env.store).await;
    assert!(!second.is_finished());
    release.send(()).unwrap();
    first.await.unwrap().unwrap();
    let err = second.await.unwrap().unwrap_err();
    assert_eq!(err.comparison(), Some(Comparison::MachineScope), "{err}");
    refusal_on_timeline(
        &env.store,
        "m1",
        "commitment_refused",
        Comparison::MachineScope,
    )
    .await;
}

/// Two takeovers of one generation on separate connections: one winner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_takeovers_elect_one() {
    let Some(make) = make() else { return };
    let env = Arc::new(make(Guards::default()).await);
    world(&env.store).await;
    ready(&env, "p1", "m1", A).await;
    let c = env.store.commit("p1", A).await.unwrap();
    let tasks: Vec<_> = (0..4u128)
        .map(|k| {
            let env = env.clone();
            let op = c.operation.clone();
            tokio::spawn(async move { env.store.takeover(&op, 1, ControllerId(0x100 + k)).await })
        })
        .collect();
    let mut winners = 0;
    for t in tasks {
        if t.await.unwrap().is_ok() {
            winners += 1;
        }
    }
    assert_eq!(winners, 1);
    assert_eq!(
        env.store
            .operation(&c.operation)
            .await
            .unwrap()
            .owner
            .generation,
        2
    );
}

/// Wait until at least `n` sessions of this store wait on a lock.
async fn wait_for_lock_waiters(store: &PgStore, n: i64) {
    for _ in 0..500 {
        let row: (i64,) = sqlx::query_as(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE wait_event_type = 'Lock' AND application_name = current_setting('application_name')",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        if row.0 >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("fewer than {n} transactions ever waited on a lock");
}

/// Plans p1 (m1) and p3 (m3), both approved by bob with controller A's evidence, and
/// p3's commitment spawned and held at its lock point: m3's row locked, the
/// installation row and bob's approval and principal rows read to share.
async fn p3_commitment_held() -> Option<(
    Arc<Env<PgStore>>,
    tokio::task::JoinHandle<Result<Committed, StoreError>>,
    oneshot::Sender<()>,
)> {
    let (env, gate, release) =
        racing_env(|p| matches!(p, HookPoint::CommitmentLocked { plan, .. } if plan == "p3"))
            .await?;
    let env = Arc::new(env);
    world(&env.store).await;
    ready(&env, "p1", "m1", A).await;
    ready(&env, "p3", "m3", A).await;
    let committer = {
        let env = env.clone();
        tokio::spawn(async move { env.store.commit("p3", A).await })
    };
    gate.entered.notified().await;
    Some((env, committer, release))
}

/// With p3's commitment held, spawn `act` (which locks machine rows in id order, so
/// it takes m1 and waits for m3), then p1's commitment, which waits behind the act for
/// m1. Returns both once both wait on a lock and neither has finished.
async fn act_between_two_commitments<T: Send + 'static>(
    env: &Arc<Env<PgStore>>,
    act: impl Future<Output = Result<T, StoreError>> + Send + 'static,
) -> (
    tokio::task::JoinHandle<Result<T, StoreError>>,
    tokio::task::JoinHandle<Result<Committed, StoreError>>,
) {
    let act = tokio::spawn(act);
    wait_for_lock_waiters(&env.store, 1).await;
    let p1 = {
        let env = env.clone();
        tokio::spawn(async move { env.store.commit("p1", A).await })
    };
    wait_for_lock_waiters(&env.store, 2).await;
    assert!(
        !act.is_finished(),
        "the act did not wait for p3's commitment"
    );
    assert!(
        !p1.is_finished(),
        "p1's commitment did not wait for the act"
    );
    (act, p1)
}

/// The kinds of `machine`'s timeline entries, oldest first.
async fn kinds(s: &PgStore, machine: &str) -> Vec<String> {
    s.timeline(machine)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect()
}

/// The kinds of `machine`'s timeline entries from `from` on, with a refusal's
/// comparison.
async fn entries_from(s: &PgStore, machine: &str, from: usize) -> Vec<(String, Option<u8>)> {
    s.timeline(machine).await.unwrap()[from..]
        .iter()
        .map(|e| (e.kind.clone(), e.comparison.map(u8::from)))
        .collect()
}

fn strings(kinds: &[(&str, Option<u8>)]) -> Vec<(String, Option<u8>)> {
    kinds.iter().map(|(k, c)| ((*k).to_owned(), *c)).collect()
}

/// A real identity revocation racing real commitments, each way. bob approved p1
/// (m1) and p3 (m3). With p3's commitment held at its lock point, the revocation of
/// bob (which locks the machines of his approvals in id order before his principal
/// row) takes m1 and waits for m3; p1's commitment waits behind it for m1. While
/// both wait, a second connection sees bob unrevoked and no new entry. Released:
/// p3's commitment is ahead of the revocation and stands (its commitment entry
/// precedes the revocation's on m3, and its attempt is then refused by comparison 1
/// and the operation cancelled, nothing sent); the revocation is ahead of p1's
/// commitment, which waited for it, then saw it and was refused by comparison 1
/// (the plan revoked with its approver), recorded after the revocation on m1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commitment_waits_for_identity_revocation() {
    let Some((env, p3, release)) = p3_commitment_held().await else {
        return;
    };
    let s = &env.store;
    let (m1_from, m3_from) = (kinds(s, "m1").await.len(), kinds(s, "m3").await.len());
    let revoker = {
        let env = env.clone();
        async move { env.store.revoke_identity(&root(), "bob").await }
    };
    let (revoker, p1) = act_between_two_commitments(&env, revoker).await;
    let revoked: bool = sqlx::query_scalar("SELECT revoked FROM principals WHERE id = 'bob'")
        .fetch_one(s.pool())
        .await
        .unwrap();
    assert!(!revoked, "the revocation is visible before it committed");
    assert_eq!(entries_from(s, "m1", m1_from).await, []);
    assert_eq!(entries_from(s, "m3", m3_from).await, []);
    release.send(()).unwrap();
    let c3 = p3.await.unwrap().unwrap();
    revoker.await.unwrap().unwrap();
    // The revocation withdrew p1's approval with the identity: the plan is revoked.
    let err = p1.await.unwrap().unwrap_err();
    assert_eq!(
        err,
        StoreError::CommitmentRefused {
            comparison: Comparison::Authority,
            reason: AuthorityRefusal::PlanState {
                stage: Stage::Commitment,
                state: PlanState::Revoked,
            }
            .to_string(),
        }
    );
    assert_eq!(s.plan("p1").await.unwrap().state, PlanState::Revoked);
    assert_eq!(
        entries_from(s, "m3", m3_from).await,
        // One entry per plan bob approved: the handover's, then p3.
        strings(&[
            ("commitment", None),
            ("identity_revoked", None),
            ("identity_revoked", None)
        ])
    );
    assert_eq!(
        entries_from(s, "m1", m1_from).await,
        strings(&[
            ("identity_revoked", None),
            ("identity_revoked", None),
            ("commitment_refused", Some(1))
        ])
    );
    assert_eq!(s.plan("p1").await.unwrap().operation, None);
    assert_eq!(
        s.plan("p3").await.unwrap().operation,
        Some(c3.operation.clone())
    );
    let err = s.attempt(&c3.operation, c3.owner).await.unwrap_err();
    assert_eq!(
        err,
        StoreError::AttemptRefused {
            comparison: Comparison::Authority,
            reason: AuthorityRefusal::IdentityRevoked.to_string(),
        }
    );
    assert_eq!(
        s.operation(&c3.operation).await.unwrap().state,
        OperationState::Cancelled
    );
    assert!(!kinds(s, "m3").await.iter().any(|k| k == "attempt"));
}

/// A real recovery-mode entry racing real commitments, each way. With p3's
/// commitment held at its lock point, the entry (which locks every machine row in
/// id order before the installation row) takes m1 and m2 and waits for m3; p1's
/// commitment waits behind it for m1. While both wait, a second connection sees the
/// old epoch, recovery mode off, every scope normal and no new entry. Released: p3's
/// commitment is ahead of the entry and stands, in the old epoch, and the entry takes
/// its operation over into the new one (unresolved, controller B, generation 2);
/// the entry is ahead of p1's commitment, which waited for it, then saw the new epoch
/// and was refused by comparison 1 (its approval is from the old epoch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commitment_waits_for_recovery_entry() {
    let Some((env, p3, release)) = p3_commitment_held().await else {
        return;
    };
    let s = &env.store;
    let old = s.current_epoch().await.unwrap();
    let (m1_from, m3_from) = (kinds(s, "m1").await.len(), kinds(s, "m3").await.len());
    let entry = {
        let env = env.clone();
        async move {
            let entry = entry_now(&env.store, B).await;
            env.store.enter_recovery(&root(), entry).await
        }
    };
    let (entry, p1) = act_between_two_commitments(&env, entry).await;
    assert_eq!(s.current_epoch().await.unwrap(), old);
    let recovery: bool = sqlx::query_scalar("SELECT recovery_mode FROM installation")
        .fetch_one(s.pool())
        .await
        .unwrap();
    assert!(!recovery, "the entry is visible before it committed");
    for m in ["m1", "m2", "m3"] {
        assert_eq!(s.machine(m).await.unwrap().scope, ScopeState::Normal, "{m}");
    }
    assert_eq!(entries_from(s, "m1", m1_from).await, []);
    assert_eq!(entries_from(s, "m3", m3_from).await, []);
    release.send(()).unwrap();
    let c3 = p3.await.unwrap().unwrap();
    let new = entry.await.unwrap().unwrap();
    assert_ne!(new, old);
    assert_eq!(c3.owner.epoch, old);
    let err = p1.await.unwrap().unwrap_err();
    assert_eq!(
        err,
        StoreError::CommitmentRefused {
            comparison: Comparison::Authority,
            reason: AuthorityRefusal::ForeignEpoch(ForeignEpoch {
                bearer: EpochBearer::Approval,
                carried: old,
                current: new,
            })
            .to_string(),
        }
    );
    assert_eq!(
        entries_from(s, "m3", m3_from).await,
        strings(&[
            ("commitment", None),
            ("recovery_entry", None),
            ("takeover", None)
        ])
    );
    assert_eq!(
        entries_from(s, "m1", m1_from).await,
        strings(&[("recovery_entry", None), ("commitment_refused", Some(1))])
    );
    let op = s.operation(&c3.operation).await.unwrap();
    assert_eq!(op.state, OperationState::Unresolved);
    assert_eq!(
        op.owner,
        OwnerToken {
            controller: B,
            generation: 2,
            epoch: new,
        }
    );
    assert_eq!(s.plan("p1").await.unwrap().operation, None);
    for m in ["m1", "m2", "m3"] {
        assert_eq!(
            s.machine(m).await.unwrap().scope,
            ScopeState::PreRestoreUnaccounted,
            "{m}"
        );
    }
}

/// A real approval revocation ahead of a real commitment: p1, approved under
/// cluster-1's blanket approval, and carol's revocation of that blanket, which
/// revokes p1's approval as `revoke_approval` would. The revocation is held at its
/// lock point (every machine row of the cluster locked); p1's commitment waits for m1.
/// While it waits, a second connection sees p1's approval unrevoked, the plan
/// approved and no new entry. Released: the revocation commits first; the commitment
/// then sees it and is refused by comparison 1 (the approval revoked), recorded after
/// the revocation, and p1 is revoked with no operation. (The other way round, a plain
/// `revoke_approval` waiting for a held commitment, is
/// `race_003_revocation_waits_for_commitment`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commitment_waits_for_approval_revocation() {
    let Some((env, gate, release)) =
        racing_env(|p| matches!(p, HookPoint::BlanketRevocationLocked { .. })).await
    else {
        return;
    };
    let env = Arc::new(env);
    let s = &env.store;
    world(s).await;
    let blanket = s
        .grant_blanket_approval(&bob(), "cluster-1", "direct mode", WEEK)
        .await
        .unwrap();
    s.create_plan(&alice(), spec("p1", "m1", "rel-1", env.clock.now()))
        .await
        .unwrap();
    s.approve_under_blanket(&Actor::new("bot", Role::Automation), "p1")
        .await
        .unwrap();
    evidence(s, "p1", "m1", A, facts("m1", base_digest("m1"))).await;
    let from = kinds(s, "m1").await.len();
    let revoker = {
        let (env, id) = (env.clone(), blanket.id.clone());
        tokio::spawn(async move { env.store.revoke_blanket_approval(&carol(), &id).await })
    };
    gate.entered.notified().await;
    let committer = {
        let env = env.clone();
        tokio::spawn(async move { env.store.commit("p1", A).await })
    };
    wait_for_lock_waiter(s).await;
    assert!(!committer.is_finished(), "the commitment did not wait");
    let revoked: bool = sqlx::query_scalar(
        "SELECT revoked FROM approvals WHERE plan_id = 'p1' ORDER BY seq DESC LIMIT 1",
    )
    .fetch_one(s.pool())
    .await
    .unwrap();
    assert!(!revoked, "the revocation is visible before it committed");
    assert_eq!(s.plan("p1").await.unwrap().state, PlanState::Approved);
    assert_eq!(entries_from(s, "m1", from).await, []);
    release.send(()).unwrap();
    revoker.await.unwrap().unwrap();
    let err = committer.await.unwrap().unwrap_err();
    assert_eq!(
        err,
        StoreError::CommitmentRefused {
            comparison: Comparison::Authority,
            reason: AuthorityRefusal::PlanState {
                stage: Stage::Commitment,
                state: PlanState::Revoked,
            }
            .to_string(),
        }
    );
    assert_eq!(
        entries_from(s, "m1", from).await,
        strings(&[
            ("approval_revoked", None),
            ("blanket_revoked", None),
            ("commitment_refused", Some(1))
        ])
    );
    let plan = s.plan("p1").await.unwrap();
    assert_eq!((plan.state, plan.operation), (PlanState::Revoked, None));
}

/// Two machines of one rollout scope commit at once: their machine locks do not
/// order them, so the rollout-slot index does. The first is held after its checks,
/// the second commits, and the first's insert is refused by the index
/// (comparison 5). Control: without the index both commit and two operations hold
/// the one slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_slot_index_orders_two_machines() {
    for indexed in [true, false] {
        let Some(_) = database_url() else { return };
        let (mut settings, clock) = settings(Guards {
            scope_index: indexed,
            ..Guards::default()
        });
        let (hook, gate, release) =
            gate_hook(|p| matches!(p, HookPoint::CommitmentChecked { plan, .. } if plan == "p1"));
        settings.hook = Some(hook);
        let env = Arc::new(env_with(settings, clock).await);
        world(&env.store).await;
        ready(&env, "p1", "m1", A).await;
        ready(&env, "p2", "m2", A).await;
        let first = {
            let env = env.clone();
            tokio::spawn(async move { env.store.commit("p1", A).await })
        };
        gate.entered.notified().await;
        env.store.commit("p2", A).await.unwrap();
        release.send(()).unwrap();
        let result = first.await.unwrap();
        let mut holding = 0;
        for m in ["m1", "m2"] {
            holding += env
                .store
                .operations_of(m)
                .await
                .unwrap()
                .iter()
                .filter(|o| !o.state.is_terminal())
                .count();
        }
        if indexed {
            assert_eq!(
                result.unwrap_err().comparison(),
                Some(Comparison::RolloutSlot)
            );
            assert_eq!(holding, 1);
        } else {
            result.expect("without the index both commit");
            assert_eq!(holding, 2);
        }
    }
}

/// The public constructor, with the database's own clock, and a second store on the
/// same schema: migrations are applied once and the epoch is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_clock_happy_path() {
    let Some(url) = database_url() else { return };
    let (schema, options) = pg_support::schema(&url, "t").await;
    let store = PgStore::connect_with(options.clone(), 4).await.unwrap();
    let epoch = store.current_epoch().await.unwrap();
    store_suite::happy_path(Env {
        store,
        clock: infra_talos::store::ManualClock::starting_at(T0),
        keep: Box::new(()),
    })
    .await;
    let again = PgStore::connect_with(options, 2).await.unwrap();
    assert_eq!(again.current_epoch().await.unwrap(), epoch);
    assert_eq!(
        again
            .machine("m1")
            .await
            .unwrap()
            .applied_release
            .as_deref(),
        Some("rel-1")
    );
    again.pool().close().await;
    drop(schema);
}

/// A schema at version 1 migrates to the current version with its data intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrates_version_one_to_current() {
    let Some(url) = database_url() else { return };
    let (schema, options) = pg_support::schema(&url, "t").await;
    let (settings, clock) = settings(Guards::default());
    let store = PgStore::connect_at_version_for_tests(options.clone(), 2, settings.clone(), 1)
        .await
        .unwrap();
    let old = Env {
        store,
        clock: clock.clone(),
        keep: Box::new(()),
    };
    let before = fill_version_one(&old).await;
    let versions = sqlx::query_scalar::<_, i64>("SELECT version FROM store_migrations")
        .fetch_all(old.store.pool())
        .await
        .unwrap();
    assert_eq!(versions, [1]);
    old.store.pool().close().await;
    drop(old);
    let store = PgStore::connect_for_tests(options, 2, settings)
        .await
        .unwrap();
    let versions =
        sqlx::query_scalar::<_, i64>("SELECT version FROM store_migrations ORDER BY version")
            .fetch_all(store.pool())
            .await
            .unwrap();
    assert_eq!(versions, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    check_current_version(&store, &clock, before).await;
    store.pool().close().await;
    drop(schema);
}

/// A schema at version 9 (identities, no certificate bindings) migrates to version
/// 10: its identity journal is kept entry for entry, no certificate is bound, and
/// bindings are journaled under their new kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrates_version_nine_to_certificate_bindings() {
    let Some(url) = database_url() else { return };
    let (schema, options) = pg_support::schema(&url, "t").await;
    let (settings, _clock) = settings(Guards::default());
    let old = PgStore::connect_at_version_for_tests(options.clone(), 2, settings.clone(), 9)
        .await
        .unwrap();
    store_suite::identities::identities_before_bindings(&old).await;
    old.pool().close().await;
    drop(old);
    let store = PgStore::connect_for_tests(options, 2, settings)
        .await
        .unwrap();
    store_suite::identities::bindings_after_migration(&store).await;
    store.pool().close().await;
    drop(schema);
}

/// A schema migrated to scope states while in recovery mode: every scope starts
/// pre-restore unaccounted, and the procedure leads out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrated_in_recovery_mode() {
    let Some(url) = database_url() else { return };
    let (schema, options) = pg_support::schema(&url, "t").await;
    let (settings, clock) = settings(Guards::default());
    let store = PgStore::connect_at_version_for_tests(options.clone(), 2, settings.clone(), 4)
        .await
        .unwrap();
    let old = Env {
        store,
        clock: clock.clone(),
        keep: Box::new(()),
    };
    store_suite::recovery::in_recovery_before_scope_states(&old).await;
    old.store.pool().close().await;
    drop(old);
    let store = PgStore::connect_for_tests(options, 2, settings)
        .await
        .unwrap();
    let env = Env {
        store,
        clock,
        keep: Box::new(()),
    };
    store_suite::recovery::recovery_carried_over_by_migration(&env).await;
    env.store.pool().close().await;
    drop(schema);
}

/// On PostgreSQL without a hand-moved clock, the store's time is the database's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn now_is_the_database_clock() {
    let Some(url) = database_url() else { return };
    let (schema, options) = pg_support::schema(&url, "t").await;
    let store = PgStore::connect_with(options, 2).await.unwrap();
    let row: (i64,) =
        sqlx::query_as("SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT")
            .fetch_one(store.pool())
            .await
            .unwrap();
    let now = store.now().await.unwrap();
    let db = u64::try_from(row.0).unwrap();
    assert!(now.0 >= db && now.0 < db + 60_000, "{now} against {db}");
    store.pool().close().await;
    drop(schema);
}

/// An attempt spawned for plan p1's fresh operation, held at its lock point (the
/// machine row locked, the approval read to share) until `release` is sent.
async fn attempt_held_at_its_lock() -> Option<(
    Arc<Env<PgStore>>,
    Committed,
    tokio::task::JoinHandle<Result<infra_talos::attempt::CommittedAttempt, StoreError>>,
    oneshot::Sender<()>,
)> {
    let (env, gate, release) = racing_env(|p| matches!(p, HookPoint::AttemptLocked { .. })).await?;
    let env = Arc::new(env);
    world(&env.store).await;
    ready(&env, "p1", "m1", A).await;
    let c = env.store.commit("p1", A).await.unwrap();
    let attempter = {
        let (env, c) = (env.clone(), c.clone());
        tokio::spawn(async move { env.store.attempt(&c.operation, c.owner).await })
    };
    gate.entered.notified().await;
    Some((env, c, attempter, release))
}

/// The attempt transaction's locks: a revocation racing an attempt waits for it. The
/// attempt holds the machine row and has read the approval to share; the revocation
/// commits after it, so the attempt stands (its request may be sent, case 005) and
/// the timeline orders attempt before revocation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_waits_for_an_attempt() {
    let Some((env, c, attempter, release)) = attempt_held_at_its_lock().await else {
        return;
    };
    let revoker = {
        let env = env.clone();
        tokio::spawn(async move { env.store.revoke_approval(&bob(), "p1").await })
    };
    wait_for_lock_waiter(&env.store).await;
    assert!(!revoker.is_finished(), "the revocation did not wait");
    release.send(()).unwrap();
    let proof = attempter.await.unwrap().unwrap();
    assert_eq!(proof.attempt(), 1);
    revoker.await.unwrap().unwrap();
    let timeline = env.store.timeline("m1").await.unwrap();
    let rev = |k: &str| timeline.iter().find(|e| e.kind == k).unwrap().revision;
    assert!(rev("attempt") < rev("approval_revoked"));
    assert_eq!(env.store.attempts(&c.operation).await.unwrap().len(), 1);
}

/// A takeover racing an attempt waits for it: the attempt, recorded under the old
/// generation, stands (the fence stops attempts not yet written, §3.4); the takeover
/// then moves the operation to unresolved under generation 2, and the old token's
/// next attempt is refused by comparison 7.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_waits_for_an_attempt() {
    let Some((env, c, attempter, release)) = attempt_held_at_its_lock().await else {
        return;
    };
    let taker = {
        let (env, op) = (env.clone(), c.operation.clone());
        tokio::spawn(async move { env.store.takeover(&op, 1, B).await })
    };
    wait_for_lock_waiter(&env.store).await;
    assert!(!taker.is_finished(), "the takeover did not wait");
    release.send(()).unwrap();
    let _proof = attempter.await.unwrap().unwrap();
    let token = taker.await.unwrap().unwrap();
    assert_eq!(token.generation, 2);
    let op = env.store.operation(&c.operation).await.unwrap();
    assert_eq!(op.state, OperationState::Unresolved);
    let attempts = env.store.attempts(&c.operation).await.unwrap();
    assert_eq!(attempts.len(), 1);
    let timeline = env.store.timeline("m1").await.unwrap();
    let rev = |k: &str| timeline.iter().find(|e| e.kind == k).unwrap().revision;
    assert!(rev("attempt") < rev("takeover"));
    // With fresh evidence of its own, the old owner's next attempt meets the fence.
    evidence(&env.store, "p1", "m1", A, facts("m1", base_digest("m1"))).await;
    let err = env.store.attempt(&c.operation, c.owner).await.unwrap_err();
    assert_eq!(err.comparison(), Some(Comparison::Ownership), "{err}");
}

/// An assignment change racing a commitment waits on the machine row, then is
/// refused: the operation the commitment created holds the scope. Control: the
/// same change on another machine goes through at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assignment_change_waits_for_a_commitment_and_is_refused() {
    let Some((env, committer, release)) = commitment_held_at_its_lock().await else {
        return;
    };
    // Another machine's row is free.
    assert_eq!(env.store.change_assignment(&ann(), "m2").await.unwrap(), 2);
    let changer = {
        let env = env.clone();
        tokio::spawn(async move { env.store.change_assignment(&ann(), "m1").await })
    };
    wait_for_lock_waiter(&env.store).await;
    assert!(!changer.is_finished(), "the assignment change did not wait");
    release.send(()).unwrap();
    committer.await.unwrap().unwrap();
    let err = changer.await.unwrap().unwrap_err();
    assert!(err.to_string().contains("holds the machine scope"), "{err}");
    assert_eq!(
        env.store.machine("m1").await.unwrap().assignment_revision,
        1
    );
}

/// A blanket revocation holds every machine row of its cluster: an approval under
/// the blanket asked for meanwhile waits, then finds no blanket in force and is
/// refused. Control: an approval under another cluster's blanket goes through while
/// the revocation is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_under_a_blanket_waits_for_its_revocation() {
    let Some((env, gate, release)) =
        racing_env(|p| matches!(p, HookPoint::BlanketRevocationLocked { .. })).await
    else {
        return;
    };
    let env = Arc::new(env);
    let s = &env.store;
    world(s).await;
    let mut m4 = machine_spec("m4", "r4");
    m4.cluster_id = "cluster-2".into();
    s.create_machine(&ann(), m4).await.unwrap();
    s.publish_release(
        &alice(),
        ReleaseSpec {
            id: "rel-0-m4".into(),
            artifacts: vec![("m4".into(), sealed("m4", "rel-0-m4"))],
            contributions: vec![("ann".into(), ContributionKind::Authored)],
        },
    )
    .await
    .unwrap();
    hand_over(s, "m4").await;
    s.publish_release(
        &alice(),
        ReleaseSpec {
            id: "rel-4".into(),
            artifacts: vec![("m4".into(), sealed("m4", "rel-4"))],
            contributions: vec![("ann".into(), ContributionKind::Authored)],
        },
    )
    .await
    .unwrap();
    let first = s
        .grant_blanket_approval(&bob(), "cluster-1", "lab", WEEK)
        .await
        .unwrap();
    s.grant_blanket_approval(&bob(), "cluster-2", "staging", WEEK)
        .await
        .unwrap();
    let now = env.clock.now();
    s.create_plan(&alice(), spec("p1", "m1", "rel-1", now))
        .await
        .unwrap();
    s.create_plan(&alice(), spec("p4", "m4", "rel-4", now))
        .await
        .unwrap();
    let bot = Actor::new("bot", Role::Automation);
    let revoker = {
        let (env, id) = (env.clone(), first.id.clone());
        tokio::spawn(async move { env.store.revoke_blanket_approval(&carol(), &id).await })
    };
    gate.entered.notified().await;
    s.approve_under_blanket(&bot, "p4").await.unwrap();
    let approver = {
        let (env, bot) = (env.clone(), bot.clone());
        tokio::spawn(async move { env.store.approve_under_blanket(&bot, "p1").await })
    };
    wait_for_lock_waiter(s).await;
    assert!(!approver.is_finished(), "the approval did not wait");
    release.send(()).unwrap();
    revoker.await.unwrap().unwrap();
    let err = approver.await.unwrap().unwrap_err();
    assert!(
        err.to_string().contains("no blanket approval is in force"),
        "{err}"
    );
    assert_eq!(s.plan("p1").await.unwrap().state, PlanState::Proposed);
    assert_eq!(s.plan("p4").await.unwrap().state, PlanState::Approved);
}
