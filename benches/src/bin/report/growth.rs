//! G: how a run's time grows with the fleet. Each stage runs as the runner runs it by
//! default — the fleet's lock taken, the records in files, the cloud the simulated one
//! with its world in a file — for `n` and for ten times `n` resources of built-in
//! kinds at zero latency: the first apply, a plan that finds nothing to change, and
//! the destroy. Linear growth reads 10.

use std::sync::Arc;
use std::time::Duration;

use benches::mixed;
use infra_core::engine::{Engine, FileStore, Options, Plan, RecordStore, lock_fleet};
use infra_testkit::sim::SimCloud;

use super::now;

/// The three stages' times for a fleet of `n`.
struct Stages {
    apply: Duration,
    plan: Duration,
    destroy: Duration,
}

/// Prints one `G` line per stage: the time at `10·n` ÷ the time at `n`.
pub(crate) fn growth(rt: &tokio::runtime::Runtime, n: usize) {
    let small = stages(rt, n);
    let large = stages(rt, n * 10);
    for (stage, a, b) in [
        ("apply", small.apply, large.apply),
        ("no_change_plan", small.plan, large.plan),
        ("destroy", small.destroy, large.destroy),
    ] {
        println!(
            "G {stage}_growth n={n}->{} ratio={:.1} small_ms={:.1} large_ms={:.1}",
            n * 10,
            b.as_secs_f64() / a.as_secs_f64(),
            a.as_secs_f64() * 1000.0,
            b.as_secs_f64() * 1000.0
        );
    }
}

fn stages(rt: &tokio::runtime::Runtime, n: usize) -> Stages {
    let dir = std::env::temp_dir().join(format!("infra-bench-growth-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store: Arc<dyn RecordStore> = Arc::new(FileStore::new(dir.join("records")));
    let cloud = SimCloud::open(dir.join("world.json")).expect("the simulated world opens");
    let engine = Engine::new(cloud.backends(), Arc::clone(&store)).with_clock(cloud.clock());
    let fleet = mixed(n, 1);
    let run = |plan: Plan| {
        let start = now();
        rt.block_on(async {
            let _guard = lock_fleet(&*store, plan.fleet().name(), "apply", Duration::ZERO)
                .await
                .expect("the fleet's lock");
            let outcome = engine
                .apply(&plan, &Options::default().force(true))
                .await
                .expect("apply");
            assert!(outcome.result.is_success(), "the run succeeds");
        });
        start.elapsed()
    };
    let apply = run(fleet.plan());
    let start = now();
    let report = rt
        .block_on(engine.plan(&fleet.plan(), &Options::default()))
        .expect("plan");
    let plan = start.elapsed();
    assert!(!report.has_changes(), "nothing left to change");
    let destroy = run(fleet.teardown());
    assert_eq!(cloud.len(), 0, "the destroy leaves nothing");
    drop((engine, cloud));
    let _ = std::fs::remove_dir_all(&dir);
    Stages {
        apply,
        plan,
        destroy,
    }
}
