//! The store test suite on the embedded SQLite store, plus a property test of random
//! interleavings of acts checking §8 invariants 1, 5 and 12.

mod store_suite;

use std::future::Future;
use std::pin::Pin;

use infra_talos::contract::evidence::{ObservationPurpose, ResponseClass, TransportOutcome};
use infra_talos::contract::operation::{ControllerId, OperationState};
use infra_talos::contract::plan::PlanState;
use infra_talos::store::sqlite::SqliteStore;
use infra_talos::store::{Guards, Store};
use proptest::prelude::*;
use store_suite::*;

type Make = fn(Guards) -> Pin<Box<dyn Future<Output = Env<SqliteStore>> + Send>>;

async fn env(guards: Guards) -> Env<SqliteStore> {
    let (settings, clock) = settings(guards);
    let store = SqliteStore::open_for_tests(None, settings).await.unwrap();
    Env {
        store,
        clock,
        keep: Box::new(()),
    }
}

#[allow(clippy::unnecessary_wraps, reason = "the suite's makers may decline")]
fn make() -> Option<Make> {
    Some(|g| Box::pin(env(g)))
}

store_suite!(make);
verification_suite!(make);
blanket_suite!(make);
drift_suite!(make);
recovery_suite!(make);

/// The database file itself never holds the plaintext marker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_bytes_hold_no_plaintext() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let (settings, clock) = settings(Guards::default());
    let store = SqliteStore::open_for_tests(Some(&path), settings)
        .await
        .unwrap();
    let env = Env {
        store,
        clock,
        keep: Box::new(()),
    };
    world(&env.store).await;
    ready(&env, "p1", "m1", A).await;
    let c = env.store.commit("p1", A).await.unwrap();
    let _proof = env.store.attempt(&c.operation, c.owner).await.unwrap();
    env.store.pool().close().await;
    let bytes = std::fs::read(&path).unwrap();
    let marker = MARKER.as_bytes();
    assert!(!bytes.windows(marker.len()).any(|w| w == marker));
    // Control: the sealed bytes are in the file.
    let sealed = seal(&plaintext("m1", "rel-1"));
    assert!(bytes.windows(sealed.len()).any(|w| w == sealed.as_slice()));
}

/// A database file migrated to scope states while in recovery mode: every scope
/// starts pre-restore unaccounted, and the procedure leads out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrated_in_recovery_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let (settings, clock) = settings(Guards::default());
    let store = SqliteStore::open_at_version_for_tests(Some(&path), settings.clone(), 4)
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
    let store = SqliteStore::open_for_tests(Some(&path), settings)
        .await
        .unwrap();
    let env = Env {
        store,
        clock,
        keep: Box::new(()),
    };
    store_suite::recovery::recovery_carried_over_by_migration(&env).await;
}

/// A database file at schema version 1 migrates to the current version with its data intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrates_version_one_to_current() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let (settings, clock) = settings(Guards::default());
    let store = SqliteStore::open_at_version_for_tests(Some(&path), settings.clone(), 1)
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
    let store = SqliteStore::open_for_tests(Some(&path), settings)
        .await
        .unwrap();
    let versions =
        sqlx::query_scalar::<_, i64>("SELECT version FROM store_migrations ORDER BY version")
            .fetch_all(store.pool())
            .await
            .unwrap();
    assert_eq!(versions, [1, 2, 3, 4, 5]);
    check_current_version(&store, &clock, before).await;
}

#[derive(Debug, Clone)]
enum Act {
    Plan(usize),
    Commit(usize, bool),
    Attempt(usize),
    Respond(usize, u8),
    Takeover(usize),
    Revoke(usize),
    Complete(usize, bool),
    Assignment(usize),
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        (0..3usize).prop_map(Act::Plan),
        (0..6usize, any::<bool>()).prop_map(|(p, b)| Act::Commit(p, b)),
        (0..6usize).prop_map(Act::Attempt),
        (0..6usize, 0..4u8).prop_map(|(o, c)| Act::Respond(o, c)),
        (0..6usize).prop_map(Act::Takeover),
        (0..6usize).prop_map(Act::Revoke),
        (0..6usize, any::<bool>()).prop_map(|(o, a)| Act::Complete(o, a)),
        (0..3usize).prop_map(Act::Assignment),
    ]
}

const MACHINES: [&str; 3] = ["m1", "m2", "m3"];

async fn check_invariants(s: &SqliteStore, plans: &[(String, String)]) {
    for m in MACHINES {
        let ops = s.operations_of(m).await.unwrap();
        // 1: one operation at most holds a machine scope.
        let holding = ops.iter().filter(|o| !o.state.is_terminal()).count();
        assert!(holding <= 1, "invariant 1 on {m}: {ops:?}");
        // 5: a final operation has no unaccounted attempt.
        let timeline = s.timeline(m).await.unwrap();
        for o in ops.iter().filter(|o| o.state.is_terminal()) {
            let mine = |k: &str| {
                timeline
                    .iter()
                    .filter(|e| e.kind == k && e.operation.as_deref() == Some(o.id.as_str()))
                    .map(|e| e.detail.clone())
                    .collect::<Vec<_>>()
            };
            let attempts = mine("attempt").len();
            let answered: std::collections::BTreeSet<String> = mine("response")
                .into_iter()
                .filter(|d| {
                    d.contains("accepted")
                        || d.contains("validation_rejection")
                        || d.contains("other_refusal")
                })
                .map(|d| d.split(':').next().unwrap_or_default().to_owned())
                .collect();
            let decided = mine("accounting").len();
            assert!(
                answered.len() + decided >= attempts,
                "invariant 5: {o:?} final with unaccounted attempts"
            );
            if o.state == OperationState::Cancelled {
                assert_eq!(attempts, 0, "a cancelled operation has attempts");
            }
        }
    }
    // 12: before commitment no operation, afterwards exactly one.
    for (plan, machine) in plans {
        let view = s.plan(plan).await.unwrap();
        let ops = s.operations_of(machine).await.unwrap();
        let n = ops.iter().filter(|o| &o.plan == plan).count();
        if view.state == PlanState::Committed {
            assert_eq!(n, 1, "invariant 12: committed plan {plan}");
            assert_eq!(
                view.operation.as_deref(),
                ops.iter().find(|o| &o.plan == plan).map(|o| o.id.as_str())
            );
        } else {
            assert_eq!(
                n, 0,
                "invariant 12: {plan} is {} yet has an operation",
                view.state
            );
        }
    }
}

/// Run the acts, checking the invariants after each; returns how many commitments
/// succeeded and how many operations ended final.
async fn run_acts(acts: Vec<Act>) -> (usize, usize) {
    let env = env(Guards::default()).await;
    let s = &env.store;
    world(s).await;
    let mut plans: Vec<(String, String)> = Vec::new();
    let mut ops: Vec<(String, infra_talos::contract::operation::OwnerToken, String)> = Vec::new();
    for (n, a) in acts.into_iter().enumerate() {
        match a {
            Act::Plan(m) => {
                let id = format!("p{n}");
                let machine = MACHINES[m];
                approved(&env, &id, machine, "rel-1").await;
                let digest = s.machine(machine).await.unwrap().applied_digest.unwrap();
                let f = facts(machine, digest);
                evidence(s, &id, machine, A, f.clone()).await;
                evidence(s, &id, machine, B, f).await;
                plans.push((id, machine.to_owned()));
            }
            Act::Commit(p, b) => {
                if let Some((plan, machine)) = plans.get(p).cloned() {
                    let ctrl = if b { B } else { A };
                    if let Ok(c) = s.commit(&plan, ctrl).await {
                        ops.push((c.operation, c.owner, machine));
                    }
                }
            }
            Act::Attempt(o) => {
                if let Some((op, owner, _)) = ops.get(o) {
                    let _ = s.attempt(op, *owner).await;
                }
            }
            Act::Respond(o, class) => {
                if let Some((op, _, _)) = ops.get(o) {
                    let attempts = s.operation(op).await.unwrap().attempts;
                    if attempts > 0 {
                        let class = match class {
                            0 => ResponseClass::Accepted,
                            1 => ResponseClass::ValidationRejection,
                            2 => ResponseClass::OtherRefusal,
                            _ => ResponseClass::Transport(TransportOutcome::ConnectionLost),
                        };
                        let _ = s.record_response(op, attempts, class).await;
                    }
                }
            }
            Act::Takeover(o) => {
                if let Some((op, owner, _)) = ops.get_mut(o) {
                    let ctrl = ControllerId(owner.controller.0 + 16);
                    if let Ok(t) = s.takeover(op, owner.generation, ctrl).await {
                        *owner = t;
                    }
                }
            }
            Act::Revoke(p) => {
                if let Some((plan, _)) = plans.get(p) {
                    let _ = s.revoke_approval(&bob(), plan).await;
                }
            }
            Act::Complete(o, artifact) => {
                if let Some((op, owner, machine)) = ops.get(o).cloned() {
                    let digest = if artifact {
                        artifact_digest(&machine, "rel-1")
                    } else {
                        base_digest(&machine)
                    };
                    observe(
                        s,
                        &machine,
                        ObservationPurpose::Completion,
                        None,
                        owner.controller,
                        facts(&machine, digest),
                    )
                    .await;
                    let _ = s.classify(&op, owner).await;
                }
            }
            Act::Assignment(m) => {
                let _ = s.change_assignment(&ann(), MACHINES[m]).await;
            }
        }
        check_invariants(s, &plans).await;
    }
    let mut finals = 0;
    for m in MACHINES {
        finals += s
            .operations_of(m)
            .await
            .unwrap()
            .iter()
            .filter(|o| o.state.is_terminal())
            .count();
    }
    (ops.len(), finals)
}

/// The interleaving harness makes progress: a fixed sequence commits, completes,
/// refuses a second plan on the held machine and cancels after a revocation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaving_harness_reaches_final_states() {
    let acts = vec![
        Act::Plan(0),
        Act::Plan(0),
        Act::Commit(0, false),
        Act::Commit(1, true),
        Act::Attempt(0),
        Act::Respond(0, 0),
        Act::Complete(0, true),
        Act::Plan(2),
        Act::Commit(2, false),
        Act::Revoke(2),
        Act::Attempt(1),
    ];
    let (commits, finals) = run_acts(acts).await;
    assert_eq!(commits, 2);
    assert_eq!(finals, 2);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn interleavings_keep_invariants_1_5_12(acts in prop::collection::vec(act(), 1..24)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run_acts(acts));
    }
}

/// The public constructors, with the database's own clock: the happy path runs on
/// an in-memory store and on a file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_clock_happy_path() {
    let store = SqliteStore::in_memory().await.unwrap();
    store_suite::happy_path(Env {
        store,
        clock: infra_talos::store::ManualClock::starting_at(T0),
        keep: Box::new(()),
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_or_create(&dir.path().join("store.db"))
        .await
        .unwrap();
    store_suite::happy_path(Env {
        store,
        clock: infra_talos::store::ManualClock::starting_at(T0),
        keep: Box::new(()),
    })
    .await;
    // Reopening applies no migration twice and keeps the data.
    let store = SqliteStore::open(&dir.path().join("store.db"))
        .await
        .unwrap();
    assert_eq!(
        store
            .machine("m1")
            .await
            .unwrap()
            .applied_release
            .as_deref(),
        Some("rel-1")
    );
}
