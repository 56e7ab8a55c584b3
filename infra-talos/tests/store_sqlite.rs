//! The store test suite on the embedded SQLite store, and the tests that need a
//! database file. Random interleavings of acts checking the §8 invariants on this
//! store are in `invariants_store.rs`.

mod store_suite;

use std::future::Future;
use std::pin::Pin;

use infra_talos::store::sqlite::SqliteStore;
use infra_talos::store::{Guards, Store};
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
identity_suite!(make);
evidence_suite!(make);

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

/// A store file at schema version 9 (identities, no certificate bindings) migrates
/// to version 10: its identity journal is kept entry for entry, no certificate is
/// bound, and bindings are journaled under their new kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrates_version_nine_to_certificate_bindings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let (settings, clock) = settings(Guards::default());
    let old = SqliteStore::open_at_version_for_tests(Some(&path), settings.clone(), 9)
        .await
        .unwrap();
    store_suite::identities::identities_before_bindings(&old).await;
    old.pool().close().await;
    drop(old);
    let store = SqliteStore::open_for_tests(Some(&path), settings)
        .await
        .unwrap();
    let _ = clock;
    store_suite::identities::bindings_after_migration(&store).await;
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
    assert_eq!(versions, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    check_current_version(&store, &clock, before).await;
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
