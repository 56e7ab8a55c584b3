//! `records move` with the records on a real PostgreSQL (feature `postgres`): both
//! fleets' rows change in one transaction — a write the server refuses half-way leaves
//! neither fleet's records changed, and the same move run again completes it — and a
//! destination whose lock another run holds refuses the move before anything changes.
//!
//! Set `INFRA_TEST_DATABASE_URL` to a role that may create databases (each test works in
//! a database of its own, dropped when it ends). Without it each test prints a loud skip
//! line, and fails when `CI=true`.

#![cfg(feature = "postgres")]

mod support;

use infra_core::kinds::*;
use infra_core::prelude::{AwsRegion, CheckReport, Expr, Fleet, Partial};
use infra_core::records::{LockHolder, PostgresStore, RecordStore};
use infra_core::sdk::MARKER_KEY;
use infra_testkit::sim::{Op, SimCloud};
use support::console::{Session, answering};
use support::pg::{Db, database_url, sql};

const HERE: AwsRegion = AwsRegion::EuWest3;

/// A site's bucket and a worker's queue and token, as `records_move.rs` declares them.
fn declared(fleet: &str, site: bool, worker: bool) -> Result<Fleet, CheckReport> {
    let mut f = Fleet::builder(fleet);
    if site {
        f.declare(HERE, "site-assets", ObjectStore::new());
    }
    if worker {
        f.declare(
            HERE,
            "jobs",
            Queues {
                fifo: Expr::lit(false),
                visibility_timeout_seconds: Partial::Known(Expr::lit(30)),
                retention_seconds: Partial::Unknown,
                dead_letter: Partial::Known(None),
                max_receive_count: Partial::Unknown,
                tags: Partial::Unknown,
            },
        );
        f.declare(HERE, "worker-token", Secrets::generated(24));
    }
    f.build()
}

async fn run(
    s: &mut Session,
    cloud: &SimCloud,
    db: &Db,
    f: Result<Fleet, CheckReport>,
    args: &[&str],
) -> (u8, String, String) {
    let mut all = vec!["--records", db.url.as_str()];
    all.extend(args);
    s.run(f, cloud, &all).await
}

fn rows(db: &Db, fleet: &str) -> (i64, i64) {
    (
        db.count(&format!(
            "SELECT count(*) FROM infra_ledger_rows WHERE fleet = '{fleet}'"
        )),
        db.count(&format!(
            "SELECT count(*) FROM infra_cache_entries WHERE fleet = '{fleet}'"
        )),
    )
}

fn marker(cloud: &SimCloud, kind: &str, name: &str) -> String {
    cloud.find("aws", kind, name).remove(0).raw_tags[MARKER_KEY].clone()
}

const MOVE: [&str; 7] = [
    "records",
    "move",
    "jobs",
    "worker-token",
    "--to",
    "worker",
    "--yes",
];

#[tokio::test]
async fn both_fleets_change_in_one_transaction_and_a_rerun_completes_a_refused_one() {
    let Some(admin) = database_url("records move in one transaction") else {
        return;
    };
    let db = Db::new(&admin, "move_tx");
    let cloud = support::cloud(81);
    let mut s = answering(false, true);
    let (code, out, err) = run(
        &mut s,
        &cloud,
        &db,
        declared("shop", true, true),
        &["apply", "--yes"],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(rows(&db, "shop"), (3, 3));

    // The server refuses the source's new ledger: the third write of the move, after
    // the destination's cache and ledger were written in the same transaction.
    sql(
        &db.url,
        "CREATE FUNCTION refuse_shop() RETURNS trigger AS $$ BEGIN \
         RAISE EXCEPTION 'refused by the test'; END $$ LANGUAGE plpgsql; \
         CREATE TRIGGER refuse_shop BEFORE INSERT ON infra_ledger_rows FOR EACH ROW \
         WHEN (NEW.fleet = 'shop') EXECUTE FUNCTION refuse_shop();",
    );
    let (code, out, err) = run(&mut s, &cloud, &db, declared("shop", true, true), &MOVE).await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("run the same move again"), "{err}");
    // The markers changed (the only cloud calls); neither fleet's records did.
    assert_eq!(marker(&cloud, "queues", "jobs"), "worker");
    assert_eq!(rows(&db, "worker"), (0, 0));
    assert_eq!(rows(&db, "shop"), (3, 3));

    sql(&db.url, "DROP TRIGGER refuse_shop ON infra_ledger_rows");
    let (code, out, err) = run(&mut s, &cloud, &db, declared("shop", true, true), &MOVE).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("an earlier move was interrupted"), "{out}");
    assert_eq!(rows(&db, "worker"), (2, 2));
    assert_eq!(rows(&db, "shop"), (1, 1));

    for f in [
        declared("shop", true, false),
        declared("worker", false, true),
    ] {
        let (code, out, err) = run(&mut s, &cloud, &db, f, &["plan", "--detailed-exitcode"]).await;
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("No changes"), "{out}");
    }
    let touched = cloud
        .calls()
        .into_iter()
        .filter(|c| matches!(c.op, Op::Create | Op::Delete))
        .count();
    assert_eq!(
        touched, 3,
        "the first apply's three creates, and nothing since"
    );
}

#[tokio::test]
async fn a_destination_locked_by_another_run_refuses_the_move_before_anything_changes() {
    let Some(admin) = database_url("records move under another run's lock") else {
        return;
    };
    let db = Db::new(&admin, "move_lock");
    let cloud = support::cloud(82);
    let mut s = answering(false, true);
    let (code, out, err) = run(
        &mut s,
        &cloud,
        &db,
        declared("shop", true, true),
        &["apply", "--yes"],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    cloud.clear_calls();

    let other = PostgresStore::connect(&db.url).unwrap();
    let holder = LockHolder {
        id: "held-by-the-test".into(),
        host: "elsewhere".into(),
        pid: 1,
        verb: "apply".into(),
        since: 0,
    };
    let guard = other.try_lock("worker", &holder).unwrap();
    let (code, out, err) = run(&mut s, &cloud, &db, declared("shop", true, true), &MOVE).await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("held-by-the-test"), "{err}");
    assert!(cloud.writes().is_empty(), "the move wrote to the cloud");
    assert_eq!(rows(&db, "shop"), (3, 3));
    assert_eq!(rows(&db, "worker"), (0, 0));
    // The source's lock was let go with the refusal.
    drop(guard);
    let (code, out, err) = run(&mut s, &cloud, &db, declared("shop", true, true), &MOVE).await;
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(rows(&db, "worker"), (2, 2));
}
