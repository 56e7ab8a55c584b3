//! Fencing on PostgreSQL: a run whose database session is ended under it (the session
//! holding the fleet's lock, `pg_terminate_backend`) starts no further cloud call,
//! reports what it had not started as not attempted, exits 1, and writes no record;
//! the next run takes the lock and converges, and no row is lost.
//!
//! Set `INFRA_TEST_DATABASE_URL` (e.g. `postgres://postgres@127.0.0.1:55434/postgres`)
//! to a role that may create databases: each test works in a database of its own,
//! dropped when it ends. Without the variable each test prints a loud skip line, and
//! fails when `CI=true`.

#![cfg(feature = "postgres")]

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use infra_core::kinds::*;
use infra_core::prelude::{AwsRegion, Backends, Fleet};
use infra_core::records::{PostgresStore, RecordStore};
use infra_core::sdk::BackendError;
use infra_core::sdk::layer::{Answer, Call, Layer, Layered, Next, Op};
use infra_testkit::sim::SimCloud;
use sqlx::Connection as _;
use sqlx::postgres::PgConnection;
use support::console::{answering, json};
use support::pg::{Db, database_url};

const FLEET: &str = "fenced";

fn buckets() -> Result<Fleet, infra_core::prelude::CheckReport> {
    let mut f = Fleet::builder(FLEET);
    for i in 1..=6 {
        f.declare(
            AwsRegion::EuWest3,
            format!("fenced-{i}"),
            ObjectStore::new(),
        );
    }
    f.build()
}

/// Ends the session holding the fleet's lock (as an administrator would, or a server
/// restart, or a cut connection) when the run makes its `at`th call of `op`, then lets
/// that call go on: the call in flight when the session is lost. Counts the calls the
/// run starts after that one.
struct Terminate {
    url: String,
    op: Op,
    at: u64,
    seen: AtomicU64,
    ended: AtomicBool,
    after: Mutex<Vec<String>>,
}

#[async_trait]
impl Layer for Terminate {
    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        if self.ended.load(Ordering::SeqCst) {
            self.after
                .lock()
                .unwrap()
                .push(format!("{} {:?}", call.op(), call.target()));
        } else if call.op() == self.op && self.seen.fetch_add(1, Ordering::SeqCst) + 1 == self.at {
            let mut conn = PgConnection::connect(&self.url).await.expect("connect");
            let pid: i32 =
                sqlx::query_scalar("SELECT backend_pid FROM infra_lock_holders WHERE fleet = $1")
                    .bind(FLEET)
                    .fetch_one(&mut conn)
                    .await
                    .expect("the run describes itself as the lock's holder");
            let ended: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1, 5000)")
                .bind(pid)
                .fetch_one(&mut conn)
                .await
                .expect("terminate");
            assert!(ended, "the lock's session did not end");
            self.ended.store(true, Ordering::SeqCst);
        }
        next.run(call).await
    }
}

fn terminating(cloud: &SimCloud, url: &str, op: Op, at: u64) -> (Backends, Arc<Terminate>) {
    let layer = Arc::new(Terminate {
        url: url.to_owned(),
        op,
        at,
        seen: AtomicU64::new(0),
        ended: AtomicBool::new(false),
        after: Mutex::new(Vec::new()),
    });
    let backends = Backends::new().with(Layered::wrap(
        cloud.backend("aws"),
        Shared(Arc::clone(&layer)),
    ));
    (backends, layer)
}

/// The layer a backend owns, sharing the test's [`Terminate`].
struct Shared(Arc<Terminate>);

#[async_trait]
impl Layer for Shared {
    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        self.0.call(call, next).await
    }
}

fn names_in(cloud: &SimCloud) -> Vec<String> {
    let mut names: Vec<String> = cloud.resources().into_iter().map(|r| r.name).collect();
    names.sort();
    names
}

fn declared() -> Vec<String> {
    (1..=6).map(|i| format!("fenced-{i}")).collect()
}

/// The run's result: what was applied, pruned and not attempted (with the detail).
fn verdicts(out: &str) -> (usize, usize, Vec<(String, String)>) {
    let result = json(out);
    let not_attempted = result["notAttempted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["reason"].as_str().unwrap().to_owned(),
                n["detail"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    (
        result["applied"].as_array().unwrap().len(),
        result["pruned"].as_array().unwrap().len(),
        not_attempted,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_lock_session_ends_starts_no_further_call_and_the_next_run_converges() {
    let Some(admin) = database_url("fencing: an apply") else {
        return;
    };
    let db = Db::new(&admin, "fence_apply");
    let cloud = support::cloud(71);
    let mut s = answering(false, true);
    let records = ["--records", db.url.as_str()];

    // The session ends as the third create is sent: that create is in flight.
    let (backends, layer) = terminating(&cloud, &db.url, Op::Create, 3);
    let mut args = vec!["apply", "--yes", "--json", "--parallelism", "1"];
    args.extend(records);
    let (code, out, err) = s.run_on(buckets(), backends, &args).await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        layer.after.lock().unwrap().is_empty(),
        "calls after the session ended: {:?}",
        layer.after.lock().unwrap()
    );
    let (applied, _, not_attempted) = verdicts(&out);
    assert_eq!(applied, 3, "two made, and the one in flight: {out}");
    assert_eq!(not_attempted.len(), 3, "{out}");
    for (reason, detail) in &not_attempted {
        assert_eq!(reason, "refused");
        assert!(
            detail.contains("the fleet's lock could not be confirmed"),
            "{detail}"
        );
        assert!(
            detail.contains("the session holding the fleet's lock ended"),
            "{detail}"
        );
    }
    assert!(
        err.contains("the records were left as this run last wrote them"),
        "{err}"
    );
    assert_eq!(cloud.len(), 3);
    // No row lost: the intents written before any call name all six.
    let ledger = PostgresStore::connect(&db.url)
        .unwrap()
        .load_ledger(FLEET)
        .unwrap();
    assert_eq!(ledger.len(), 6);
    assert_eq!(ledger.intents.len(), 6);

    // The next run takes the lock and converges.
    let mut args = vec!["apply", "--yes"];
    args.extend(records);
    let (code, out, err) = s.run(buckets(), &cloud, &args).await;
    assert_eq!(code, 0, "{out}{err}");
    let mut args = vec!["plan", "--detailed-exitcode"];
    args.extend(records);
    let (code, out, _) = s.run(buckets(), &cloud, &args).await;
    assert_eq!(code, 0, "{out}");
    assert_eq!(names_in(&cloud), declared(), "no twin, none missing");
    let ledger = PostgresStore::connect(&db.url)
        .unwrap()
        .load_ledger(FLEET)
        .unwrap();
    assert_eq!(ledger.len(), 6);
    assert!(ledger.intents.is_empty() && ledger.deleting.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destroy_whose_lock_session_ends_leaves_marks_the_next_apply_reads() {
    let Some(admin) = database_url("fencing: a destroy") else {
        return;
    };
    let db = Db::new(&admin, "fence_destroy");
    let cloud = support::cloud(72);
    let mut s = answering(false, true);
    let records = ["--records", db.url.as_str()];
    let mut args = vec!["apply", "--yes"];
    args.extend(records);
    let (code, out, err) = s.run(buckets(), &cloud, &args).await;
    assert_eq!(code, 0, "{out}{err}");

    // The session ends as the fourth delete is sent: three are done, one in flight.
    let (backends, layer) = terminating(&cloud, &db.url, Op::Delete, 4);
    let mut args = vec!["destroy", "--yes", "--json", "--parallelism", "1"];
    args.extend(records);
    let (code, out, err) = s.run_on(buckets(), backends, &args).await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        layer.after.lock().unwrap().is_empty(),
        "calls after the session ended: {:?}",
        layer.after.lock().unwrap()
    );
    let (_, pruned, not_attempted) = verdicts(&out);
    assert_eq!((pruned, not_attempted.len()), (4, 2), "{out}");
    assert_eq!(cloud.len(), 2);
    // The rows of the deletes confirmed before the loss were dropped as they went; the
    // one in flight is still marked.
    let ledger = PostgresStore::connect(&db.url)
        .unwrap()
        .load_ledger(FLEET)
        .unwrap();
    assert_eq!(ledger.len(), 3, "{ledger:?}");
    assert_eq!(ledger.deleting.len(), 1, "{ledger:?}");

    // An apply without --force: the marked row found absent is a confirmed delete, not
    // a managed resource gone missing; four are made again.
    let mut args = vec!["apply", "--yes"];
    args.extend(records);
    let (code, out, err) = s.run(buckets(), &cloud, &args).await;
    assert_eq!(code, 0, "{out}{err}");
    let mut args = vec!["plan", "--detailed-exitcode"];
    args.extend(records);
    let (code, out, _) = s.run(buckets(), &cloud, &args).await;
    assert_eq!(code, 0, "{out}");
    assert_eq!(names_in(&cloud), declared(), "no twin, none missing");
}
