//! P5: what keeping the records on PostgreSQL costs a run.
//!
//! A run of `apply` (the fleet's lock taken, the apply, the lock released) of `n`
//! resources of built-in kinds through `infra-testkit`'s simulated cloud at zero latency,
//! once with the records on PostgreSQL and once in files, each from empty records and a
//! fresh cloud; the median of a few rounds of each, and their ratio.

use std::sync::Arc;
use std::time::Duration;

use benches::mixed;
use infra_core::engine::{Engine, FileStore, Ledger, Options, Plan, RecordStore, lock_fleet};
use infra_core::records::PostgresStore;
use infra_testkit::sim::SimCloud;

use super::now;

/// Rounds of each; the median is reported.
const ROUNDS: usize = 7;

fn database_url() -> Option<String> {
    ["INFRA_BENCH_DATABASE_URL", "INFRA_TEST_DATABASE_URL"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|url| !url.is_empty()))
}

/// Prints `P5 records_postgres_vs_file`, or why not on standard error.
pub(crate) fn p5(rt: &tokio::runtime::Runtime, n: usize) {
    let Some(url) = database_url() else {
        eprintln!(
            "P5 records_postgres_vs_file skipped: set INFRA_BENCH_DATABASE_URL (or \
             INFRA_TEST_DATABASE_URL) to a PostgreSQL database"
        );
        return;
    };
    let pg: Arc<dyn RecordStore> = match PostgresStore::connect(&url) {
        Ok(store) => Arc::new(store),
        Err(e) => {
            eprintln!("P5 records_postgres_vs_file skipped: {e}");
            return;
        }
    };
    let dir = std::env::temp_dir().join(format!("infra-bench-records-{}", std::process::id()));
    let file: Arc<dyn RecordStore> = Arc::new(FileStore::new(&dir));
    let fleet = mixed(n, 1);
    let plan = fleet.plan();
    let (mut on_file, mut on_pg) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        on_file.push(timed_run(rt, &file, &plan));
        on_pg.push(timed_run(rt, &pg, &plan));
    }
    clear(&pg, fleet.name());
    let _ = std::fs::remove_dir_all(&dir);
    let (file_time, pg_time) = (median(on_file), median(on_pg));
    println!(
        "P5 records_postgres_vs_file n={n} ratio={:.2} file_ms={:.1} postgres_ms={:.1}",
        pg_time.as_secs_f64() / file_time.as_secs_f64(),
        file_time.as_secs_f64() * 1000.0,
        pg_time.as_secs_f64() * 1000.0
    );
}

/// One run from empty records and a fresh cloud: lock, apply, release.
fn timed_run(rt: &tokio::runtime::Runtime, store: &Arc<dyn RecordStore>, plan: &Plan) -> Duration {
    let name = plan.fleet().name();
    clear(store, name);
    let cloud = SimCloud::new(1);
    let engine = Engine::new(cloud.backends(), Arc::clone(store)).with_clock(cloud.clock());
    let start = now();
    let outcome = rt.block_on(async {
        let _guard = lock_fleet(&**store, name, "apply", Duration::ZERO)
            .await
            .expect("the fleet's lock");
        engine.apply(plan, &Options::default()).await
    });
    let took = start.elapsed();
    assert!(outcome.expect("apply").result.is_success());
    took
}

/// Empties the fleet's records.
fn clear(store: &Arc<dyn RecordStore>, fleet: &str) {
    store
        .save_ledger(fleet, &Ledger::default())
        .expect("the ledger is emptied");
    for (provider, kind) in store.cached_pairs(fleet).expect("the cache is listed") {
        store
            .save_cache(fleet, &provider, &kind, &[])
            .expect("the cache is emptied");
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}
