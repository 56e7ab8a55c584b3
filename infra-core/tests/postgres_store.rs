//! `PostgresStore` against a real PostgreSQL (feature `postgres`).
//!
//! Set `INFRA_TEST_DATABASE_URL` (e.g. `postgres://postgres@127.0.0.1:55434/postgres`)
//! to a role that may create databases: each test works in a database of its own,
//! dropped when it ends, so that tests run in parallel. Without the variable each test
//! prints a loud skip line, and fails when `CI=true`.

#![cfg(feature = "postgres")]

mod support;

use std::collections::BTreeSet;
use std::io::{BufRead as _, Write as _};
use std::time::Duration;

use infra_core::records::{
    CacheEntry, Ledger, LedgerProgress, LedgerRow, LockError, LockHolder, MemoryStore,
    PostgresStore, RecordError, RecordStore,
};
use proptest::prelude::*;
use sqlx::Connection as _;
use sqlx::postgres::PgConnection;
use support::pg::{Db, database_url, unique};

/// The real time, for deadlines of the tests themselves.
#[allow(clippy::disallowed_methods, reason = "the tests wait on a real server")]
fn now() -> std::time::Instant {
    std::time::Instant::now()
}

fn row(provider: &str, kind: &str, name: &str, region: &str) -> LedgerRow {
    LedgerRow {
        provider: provider.into(),
        kind: kind.into(),
        name: name.into(),
        region: region.into(),
    }
}

fn ledger(rows: &[LedgerRow]) -> Ledger {
    Ledger {
        rows: rows.iter().cloned().collect(),
        ..Ledger::default()
    }
}

fn holder(verb: &str) -> LockHolder {
    LockHolder::this_process(verb)
}

// ---------------------------------------------------------------------------------
// Round trips: the same answers as the memory store.

/// One call that writes.
#[derive(Clone, Debug)]
enum Op {
    Ledger(usize, Ledger),
    Cache(usize, String, String, Vec<CacheEntry>),
    /// Marks and drops, by the rows' indices in the fleet's ledger as it is then.
    Progress(usize, Vec<usize>, Vec<usize>),
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![3 => "[a-z0-9-]{1,6}", 1 => "\\PC{0,6}"]
}

fn json() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        (-1000i64..1000).prop_map(|i| Value::from(i as f64 / 8.0)),
        "\\PC{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("\\PC{0,5}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn entry() -> impl Strategy<Value = CacheEntry> {
    let written = prop::collection::btree_map("[a-z]{1,4}", json(), 0..2);
    (text(), text(), "\\PC{0,8}", json(), written).prop_map(
        |(name, region, handle, observed, written)| CacheEntry {
            name,
            region,
            handle,
            observed,
            written: written.into_iter().collect(),
        },
    )
}

fn provider() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["aws", "gcp", "prøvider"]).prop_map(str::to_owned)
}

fn kind() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["bucket", "queue", "vm"]).prop_map(str::to_owned)
}

fn a_ledger() -> impl Strategy<Value = Ledger> {
    let one = (
        provider(),
        kind(),
        text(),
        text(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    );
    prop::collection::vec(one, 0..8).prop_map(|rows| {
        let mut l = Ledger::default();
        for (p, k, n, r, discovered, intent, deleting) in rows {
            let row = row(&p, &k, &n, &r);
            if discovered {
                l.discovered.insert(row.clone());
            }
            if intent {
                l.intents.insert(row.clone());
            }
            if deleting {
                l.deleting.insert(row.clone());
            }
            l.rows.insert(row);
        }
        l
    })
}

fn op() -> impl Strategy<Value = Op> {
    let entries = prop_oneof![
        1 => Just(Vec::new()),
        3 => prop::collection::vec(entry(), 1..5),
    ];
    prop_oneof![
        (0..2usize, a_ledger()).prop_map(|(f, l)| Op::Ledger(f, l)),
        (0..2usize, provider(), kind(), entries).prop_map(|(f, p, k, e)| Op::Cache(f, p, k, e)),
        (
            0..2usize,
            prop::collection::vec(0..8usize, 0..4),
            prop::collection::vec(0..8usize, 0..3)
        )
            .prop_map(|(f, marked, dropped)| Op::Progress(f, marked, dropped)),
    ]
}

fn apply(store: &dyn RecordStore, fleets: &[String], op: &Op) {
    match op {
        Op::Ledger(f, l) => store.save_ledger(&fleets[*f], l).expect("save ledger"),
        Op::Cache(f, p, k, e) => store.save_cache(&fleets[*f], p, k, e).expect("save cache"),
        Op::Progress(f, marked, dropped) => {
            // Rows of the ledger as it is (and one that is not there, for an index past
            // its end): a mark of a missing row changes nothing.
            let rows: Vec<LedgerRow> = store
                .load_ledger(&fleets[*f])
                .expect("load ledger")
                .rows
                .into_iter()
                .collect();
            let pick = |&i: &usize| {
                rows.get(i)
                    .cloned()
                    .unwrap_or_else(|| row("aws", "vm", "gone", "r"))
            };
            let progress = LedgerProgress {
                deleting: marked.iter().map(pick).collect(),
                dropped: dropped.iter().map(pick).collect(),
            };
            store
                .record_progress(&fleets[*f], &progress)
                .expect("record progress");
        }
    }
}

/// Numbers are equal by value when either is a float: `jsonb` keeps a number, not how
/// it was written (`-0.0` comes back as `0.0`, an integral float of 10¹⁶ or more as an
/// integer, others in plain decimal), and serde_json's default parsing (without
/// `float_roundtrip`) reads such a long decimal to within a few units in the last place.
fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            x == y || within_ulps(x, y, 4)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// Whether two floats of the same sign are at most `n` representable values apart.
fn within_ulps(x: f64, y: f64, n: u64) -> bool {
    x.is_sign_negative() == y.is_sign_negative() && x.to_bits().abs_diff(y.to_bits()) <= n
}

fn same_entries(a: &[CacheEntry], b: &[CacheEntry]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            (&x.name, &x.region, &x.handle) == (&y.name, &y.region, &y.handle)
                && same_json(&x.observed, &y.observed)
                && same_json(
                    &serde_json::Value::Object(x.written.clone()),
                    &serde_json::Value::Object(y.written.clone()),
                )
        })
}

/// Everything both stores hold for `fleets` reads the same.
fn assert_same(pg: &PostgresStore, memory: &MemoryStore, fleets: &[String]) {
    for fleet in fleets {
        assert_eq!(
            pg.load_ledger(fleet).unwrap(),
            memory.load_ledger(fleet).unwrap()
        );
        let pairs = memory.cached_pairs(fleet).unwrap();
        assert_eq!(pg.cached_pairs(fleet).unwrap(), pairs);
        for (p, k) in pairs {
            let (ours, theirs) = (
                pg.load_cache(fleet, &p, &k).unwrap(),
                memory.load_cache(fleet, &p, &k).unwrap(),
            );
            assert!(same_entries(&ours, &theirs), "{ours:#?}\n!=\n{theirs:#?}");
        }
        pg.verify(fleet).unwrap();
    }
}

#[test]
fn ledger_and_cache_read_back_as_the_memory_store_gives_them() {
    let Some(url) = database_url("round trips against the memory store") else {
        return;
    };
    let db = Db::new(&url, "round_trip");
    let pg = PostgresStore::connect(&db.url).unwrap();
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok());
    let config = ProptestConfig {
        cases: cases.unwrap_or(48),
        ..ProptestConfig::default()
    };
    proptest!(config, |(ops in prop::collection::vec(op(), 1..10))| {
        let memory = MemoryStore::new();
        let case = unique("fleet");
        let fleets = [format!("{case}-a"), format!("{case}-b")];
        for op in &ops {
            apply(&pg, &fleets, op);
            apply(&memory, &fleets, op);
            assert_same(&pg, &memory, &fleets);
        }
    });
}

#[test]
fn an_empty_list_removes_the_pair_and_a_fleet_sees_only_its_own() {
    let Some(url) = database_url("cache pairs") else {
        return;
    };
    let db = Db::new(&url, "pairs");
    let pg = PostgresStore::connect(&db.url).unwrap();
    let e = CacheEntry {
        name: "a".into(),
        region: "r".into(),
        handle: "h".into(),
        observed: serde_json::json!({"size": 1}),
        written: serde_json::Map::new(),
    };
    pg.save_cache("one", "aws", "bucket", std::slice::from_ref(&e))
        .unwrap();
    pg.save_cache("one", "aws", "queue", std::slice::from_ref(&e))
        .unwrap();
    pg.save_cache("two", "gcp", "vm", std::slice::from_ref(&e))
        .unwrap();
    pg.save_cache("one", "aws", "queue", &[]).unwrap();
    assert_eq!(
        pg.cached_pairs("one").unwrap(),
        [("aws".to_owned(), "bucket".to_owned())]
    );
    assert!(pg.load_cache("one", "aws", "queue").unwrap().is_empty());
    assert_eq!(
        pg.cached_pairs("two").unwrap(),
        [("gcp".to_owned(), "vm".to_owned())]
    );
    assert_eq!(db.text("SELECT count(*) FROM infra_cache_entries"), "2");
}

#[test]
fn a_name_postgresql_text_cannot_hold_is_refused() {
    let Some(url) = database_url("NUL in a name") else {
        return;
    };
    let db = Db::new(&url, "nul");
    let pg = PostgresStore::connect(&db.url).unwrap();
    let err = pg
        .save_ledger("f", &ledger(&[row("aws", "vm", "a\0b", "r")]))
        .unwrap_err();
    assert!(
        matches!(err, RecordError::BadName { what: "name", .. }),
        "{err}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn it_is_called_from_inside_a_single_threaded_runtime() {
    let Some(url) = database_url("calls from a current-thread runtime") else {
        return;
    };
    let db = Db::new(&url, "in_runtime");
    let pg = PostgresStore::connect(&db.url).unwrap();
    let l = ledger(&[row("aws", "vm", "web", "eu-west-3")]);
    pg.save_ledger("f", &l).unwrap();
    assert_eq!(pg.load_ledger("f").unwrap(), l);
    let guard = pg.try_lock("f", &holder("apply")).unwrap();
    drop(guard);
}

// ---------------------------------------------------------------------------------
// Migrations.

#[test]
fn a_newer_schema_is_refused_and_left_untouched() {
    let Some(url) = database_url("newer schema refused") else {
        return;
    };
    let db = Db::new(&url, "newer");
    let pg = PostgresStore::connect(&db.url).unwrap();
    pg.save_ledger("f", &ledger(&[row("aws", "vm", "web", "r")]))
        .unwrap();
    drop(pg);
    db.sql(
        "INSERT INTO infra_schema_versions (version, name, checksum) VALUES (99, 'future', 'x')",
    );
    let snapshot = || {
        (
            db.text(
                "SELECT string_agg(version || ':' || checksum, ',' ORDER BY version) \
                 FROM infra_schema_versions",
            ),
            db.text(
                "SELECT string_agg(table_name, ',' ORDER BY table_name) \
                 FROM information_schema.tables WHERE table_schema = 'public'",
            ),
            db.text("SELECT count(*) FROM infra_ledger_rows"),
        )
    };
    let before = snapshot();
    let err = PostgresStore::connect(&db.url).unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with(&db.url), "{text}");
    assert!(text.contains("version 99"), "{text}");
    assert!(
        text.contains(&format!("({})", PostgresStore::SCHEMA_VERSION)),
        "{text}"
    );
    assert!(text.contains("left untouched"), "{text}");
    assert_eq!(snapshot(), before);
}

#[test]
fn a_changed_migration_is_refused() {
    let Some(url) = database_url("changed migration refused") else {
        return;
    };
    let db = Db::new(&url, "checksum");
    drop(PostgresStore::connect(&db.url).unwrap());
    db.sql("UPDATE infra_schema_versions SET checksum = 'deadbeef' WHERE version = 1");
    let text = PostgresStore::connect(&db.url).unwrap_err().to_string();
    assert!(text.contains("checksum deadbeef"), "{text}");
    assert!(text.contains("migration 1"), "{text}");
    assert_eq!(
        db.text("SELECT checksum FROM infra_schema_versions WHERE version = 1"),
        "deadbeef"
    );
}

#[test]
fn first_connections_at_once_take_turns_on_the_migration() {
    let Some(url) = database_url("concurrent first connections") else {
        return;
    };
    let db = Db::new(&url, "concurrent");
    let stores: Vec<_> = (0..4)
        .map(|_| {
            let url = db.url.clone();
            std::thread::spawn(move || PostgresStore::connect(&url))
        })
        .map(|t| t.join().expect("no panic"))
        .collect();
    for store in &stores {
        assert!(store.is_ok(), "{:?}", store.as_ref().err());
    }
    // Each migration once, not once per connection.
    assert_eq!(
        db.text("SELECT count(*) FROM infra_schema_versions"),
        PostgresStore::SCHEMA_VERSION.to_string()
    );
}

// ---------------------------------------------------------------------------------
// The lock.

fn held_by(result: Result<infra_core::records::LockGuard, LockError>) -> Option<LockHolder> {
    match result {
        Err(LockError::Held { holder, waited, .. }) => {
            assert_eq!(waited, Duration::ZERO);
            holder.map(|h| *h)
        }
        Err(other) => panic!("not held but {other}"),
        Ok(guard) => panic!("taken: {guard:?}"),
    }
}

#[test]
fn a_row_not_written_by_the_session_holding_the_lock_is_never_named() {
    let Some(url) = database_url("a stale holder row is not named") else {
        return;
    };
    let db = Db::new(&url, "lock_stale_row");
    let first = PostgresStore::connect(&db.url).unwrap();
    let second = PostgresStore::connect(&db.url).unwrap();
    let guard = first.try_lock("prod", &holder("apply")).unwrap();
    // The row now describes a session that does not hold the lock: a run that died
    // whose row the holder has not yet replaced, as in the instant after taking it.
    db.sql("UPDATE infra_lock_holders SET backend_pid = 0, id = 'dead0000dead0000'");
    assert_eq!(held_by(second.try_lock("prod", &holder("destroy"))), None);
    drop(guard);
}

#[test]
fn a_second_session_is_turned_away_naming_the_holder_until_the_first_lets_go() {
    let Some(url) = database_url("lock held by another session") else {
        return;
    };
    let db = Db::new(&url, "lock_held");
    let first = PostgresStore::connect(&db.url).unwrap();
    let second = PostgresStore::connect(&db.url).unwrap();
    let apply = holder("apply");
    let guard = first.try_lock("prod", &apply).unwrap();
    assert_eq!(guard.replaced(), None);
    assert_eq!(
        held_by(second.try_lock("prod", &holder("destroy"))),
        Some(apply.clone())
    );
    // The same store asks on another session: turned away as well.
    assert!(held_by(first.try_lock("prod", &holder("plan"))).is_some());
    // Another fleet is another lock.
    drop(second.try_lock("staging", &holder("apply")).unwrap());
    // The guard outlives its store: the lock is kept until the guard goes.
    drop(first);
    assert!(held_by(second.try_lock("prod", &holder("destroy"))).is_some());
    drop(guard);
    assert_eq!(db.text("SELECT count(*) FROM infra_lock_holders"), "0");
    let next = second.try_lock("prod", &holder("destroy")).unwrap();
    assert_eq!(
        next.replaced(),
        None,
        "a released lock leaves nothing behind"
    );
}

/// A helper, not a test: run by `a_crashed_holder_is_replaced` in a child process,
/// where it takes the lock, says so, and sleeps until killed.
#[test]
#[ignore = "run by a_crashed_holder_is_replaced in a child process"]
fn lock_holder_child() {
    let Ok(spec) = std::env::var("INFRA_PG_LOCK_CHILD") else {
        return;
    };
    let (url, fleet) = spec.split_once(' ').expect("url and fleet");
    let store = PostgresStore::connect(url).unwrap();
    let guard = store.try_lock(fleet, &holder("apply")).unwrap();
    println!("READY {}", guard.holder().id);
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(300));
}

/// Starts `lock_holder_child`; returns it once it holds the lock, with its lock's id.
fn child_holding(url: &str, fleet: &str) -> (std::process::Child, String) {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["lock_holder_child", "--exact", "--ignored", "--nocapture"])
        .env("INFRA_PG_LOCK_CHILD", format!("{url} {fleet}"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the child starts");
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    for line in out.lines() {
        if let Some(id) = line.expect("child output").strip_prefix("READY ") {
            return (child, id.to_owned());
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the child ended without taking the lock");
}

#[test]
fn a_crashed_holder_is_replaced_by_the_next_run() {
    let Some(url) = database_url("crashed lock holder") else {
        return;
    };
    let db = Db::new(&url, "lock_crash");
    let store = PostgresStore::connect(&db.url).unwrap();
    let (mut child, id) = child_holding(&db.url, "prod");
    let held = held_by(store.try_lock("prod", &holder("apply"))).expect("described");
    assert_eq!((held.id.as_str(), held.pid), (id.as_str(), child.id()));
    child.kill().unwrap();
    child.wait().unwrap();
    // The server notices the closed socket and ends the session: soon, not at once.
    let deadline = now() + Duration::from_secs(10);
    let guard = loop {
        match store.try_lock("prod", &holder("apply")) {
            Ok(guard) => break guard,
            Err(LockError::Held { .. }) if now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(guard.replaced(), Some(&held));
}

#[test]
fn force_unlock_ends_a_live_holder_in_another_session() {
    let Some(url) = database_url("force-unlock") else {
        return;
    };
    let db = Db::new(&url, "force");
    let first = PostgresStore::connect(&db.url).unwrap();
    let second = PostgresStore::connect(&db.url).unwrap();
    let apply = holder("apply");
    let guard = first.try_lock("prod", &apply).unwrap();
    match second.force_unlock("prod", "not-the-id") {
        Err(LockError::NoSuchLock { current, .. }) => assert_eq!(current.as_deref(), Some(&apply)),
        other => panic!("{other:?}"),
    }
    assert_eq!(second.force_unlock("prod", &apply.id).unwrap(), apply);
    let destroy = holder("destroy");
    let taken = second.try_lock("prod", &destroy).unwrap();
    assert_eq!(taken.replaced(), None);
    // The old guard's release finds its session gone: no panic, no wait, and the new
    // holder's row stays.
    let started = now();
    drop(guard);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        held_by(first.try_lock("prod", &holder("plan"))),
        Some(destroy)
    );
    // The first store's pool lost nothing: it still works.
    first.save_ledger("prod", &Ledger::default()).unwrap();
    assert!(matches!(
        second.force_unlock("staging", "x"),
        Err(LockError::NoSuchLock { current: None, .. })
    ));
}

// ---------------------------------------------------------------------------------
// Crashes and failures.

#[test]
fn a_save_killed_mid_transaction_loses_nothing_already_written() {
    let Some(url) = database_url("save killed mid-transaction") else {
        return;
    };
    let db = Db::new(&url, "mid_save");
    let store = std::sync::Arc::new(PostgresStore::connect(&db.url).unwrap());
    let before = ledger(&[row("aws", "vm", "a", "r"), row("aws", "vm", "b", "r")]);
    store.save_ledger("prod", &before).unwrap();
    let after = ledger(&[row("aws", "vm", "c", "r"), row("aws", "vm", "d", "r")]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Another session inserts row `d` without committing: the save deletes `a` and `b`,
    // inserts `c`, then waits on `d`. Its session is ended there.
    let mut blocker = rt.block_on(PgConnection::connect(&db.url)).unwrap();
    rt.block_on(async {
        sqlx::raw_sql(
            "BEGIN; INSERT INTO infra_ledger_rows (fleet, provider, kind, name, region) \
             VALUES ('prod', 'aws', 'vm', 'd', 'r')",
        )
        .execute(&mut blocker)
        .await
    })
    .unwrap();
    let saving = {
        let (store, after) = (std::sync::Arc::clone(&store), after.clone());
        std::thread::spawn(move || store.save_ledger("prod", &after))
    };
    let pid = wait_for_blocked_insert(&db);
    db.sql(&format!("SELECT pg_terminate_backend({pid}, 5000)"));
    let err = saving.join().unwrap().unwrap_err();
    assert!(matches!(err, RecordError::Store { .. }), "{err}");
    rt.block_on(blocker.close()).unwrap();
    // Another session sees the ledger from before, whole.
    let fresh = PostgresStore::connect(&db.url).unwrap();
    assert_eq!(fresh.load_ledger("prod").unwrap(), before);
    // The store whose session was ended goes on.
    store.save_ledger("prod", &after).unwrap();
    assert_eq!(fresh.load_ledger("prod").unwrap(), after);
}

/// The backend of the save waiting on the uncommitted row.
fn wait_for_blocked_insert(db: &Db) -> String {
    let query = format!(
        "SELECT coalesce((SELECT pid FROM pg_stat_activity WHERE datname = '{}' \
         AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO infra_ledger_rows%' LIMIT 1), 0)",
        db.name
    );
    for _ in 0..200 {
        let pid = db.text(&query);
        if pid != "0" {
            return pid;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("the save never waited on the uncommitted row");
}

#[test]
fn no_password_reaches_describe_debug_or_an_error() {
    let Some(url) = database_url("no password shown") else {
        return;
    };
    let db = Db::new(&url, "password");
    // A password in the URL: the test database's own, or one trust authentication
    // accepts.
    let (scheme, rest) = db.url.split_once("://").expect("a URL");
    let (userinfo, host) = rest.split_once('@').unwrap_or(("postgres", rest));
    let (user, password) = userinfo
        .split_once(':')
        .unwrap_or((userinfo, "s3cr3t-pa55"));
    let with_password = format!("{scheme}://{user}:{password}@{host}");
    let store = PostgresStore::connect(&with_password).unwrap();
    let described = store.describe();
    assert!(
        described.starts_with("PostgreSQL records at postgres"),
        "{described}"
    );
    assert!(!described.contains(password), "{described}");
    assert!(!format!("{store:?}").contains(password));
    // An error from the database, after the tables went away.
    db.sql("DROP TABLE infra_ledger_rows");
    let err = store.load_ledger("f").unwrap_err().to_string();
    assert!(err.contains("infra_ledger_rows"), "{err}");
    assert!(!err.contains(password), "{err}");
    // An error connecting (nothing listens on port 9).
    let nowhere = format!("postgres://infra:{password}@127.0.0.1:9/db?password={password}");
    let err = PostgresStore::connect(&nowhere).unwrap_err().to_string();
    assert!(err.starts_with("postgres://infra@127.0.0.1:9/db:"), "{err}");
    assert!(!err.contains(password), "{err}");
}

#[test]
fn sslmode_require_is_refused_saying_why() {
    let Some(url) = database_url("sslmode without TLS") else {
        return;
    };
    let sep = if url.contains('?') { '&' } else { '?' };
    let err = PostgresStore::connect(&format!("{url}{sep}sslmode=require"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("without TLS"), "{err}");
    assert!(err.contains("sslmode"), "{err}");
}

#[test]
fn the_lock_holders_and_the_ledger_are_what_the_tables_say() {
    let Some(url) = database_url("tables") else {
        return;
    };
    let db = Db::new(&url, "tables");
    let store = PostgresStore::connect(&db.url).unwrap();
    let mut l = ledger(&[row("aws", "vm", "a", "r"), row("aws", "vm", "b", "r")]);
    l.discovered.insert(row("aws", "vm", "a", "r"));
    l.intents.insert(row("aws", "vm", "b", "r"));
    l.deleting.insert(row("aws", "vm", "a", "r"));
    store.save_ledger("prod", &l).unwrap();
    assert_eq!(
        db.text(
            "SELECT string_agg(name || ':' || discovered || ':' || intent || ':' || deleting, \
             ',' ORDER BY name) FROM infra_ledger_rows"
        ),
        "a:true:false:true,b:false:true:false"
    );
    let apply = holder("apply");
    let _guard = store.try_lock("prod", &apply).unwrap();
    assert_eq!(
        db.text(
            "SELECT id || ':' || verb || ':' || (backend_pid > 0) \
             FROM infra_lock_holders WHERE fleet = 'prod'"
        ),
        format!("{}:apply:true", apply.id)
    );
    let names: BTreeSet<String> = db
        .text(
            "SELECT string_agg(table_name, ',') FROM information_schema.tables \
             WHERE table_name LIKE 'infra\\_%'",
        )
        .split(',')
        .map(str::to_owned)
        .collect();
    assert_eq!(
        names,
        [
            "infra_cache_entries",
            "infra_ledger_rows",
            "infra_lock_holders",
            "infra_schema_versions"
        ]
        .map(str::to_owned)
        .into()
    );
}
