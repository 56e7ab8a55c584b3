//! Criterion benchmarks of the engine's stages: `cargo bench -p benches`.
//!
//! - `build_and_check/n`: declaring a random reference graph of n nodes and building
//!   the fleet, which runs every structural check.
//! - `plan/n`: decisions and their order from an observation already taken (the
//!   engine's own work in a plan), next to `serde_round_trip/n` of the same plan's JSON.
//!   A third of the nodes exist with another size, a third exist as declared, a third
//!   are missing.
//! - `schedule/n`: an apply of n nodes through a cloud that answers at once: the
//!   scheduler's own cost per node, observation included.
//! - `observe_sim/n` and `apply_sim/n`: the same fleet of built-in kinds observed and
//!   applied through `infra-testkit`'s simulated cloud, on a manual clock.

use std::sync::Arc;
use std::time::Duration;

use benches::{BenchCloud, dag, dag_sized, mixed, runtime};
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use infra_core::{
    engine::{Clock, Engine, ManualClock, MemoryStore, Options, RecordStore},
    prelude::Backends,
};
use infra_testkit::sim::SimCloud;

fn instant_engine() -> (Engine, Arc<BenchCloud>) {
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new());
    let cloud = Arc::new(BenchCloud::new(Arc::clone(&clock), Duration::ZERO));
    let engine = Engine::new(
        Backends::new().with(cloud.backend()),
        Arc::new(MemoryStore::new()),
    )
    .with_clock(clock);
    (engine, cloud)
}

fn sim_engine(cloud: &SimCloud) -> Engine {
    let store: Arc<dyn RecordStore> = Arc::new(MemoryStore::new());
    Engine::new(cloud.backends(), store).with_clock(cloud.clock())
}

fn build_and_check(c: &mut Criterion) {
    let mut group = c.benchmark_group("build_and_check");
    for n in [1_000, 10_000, 100_000] {
        group.throughput(Throughput::Elements(n as u64));
        if n >= 100_000 {
            group.sample_size(10);
        }
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter(|| dag(n, 50, 7));
        });
    }
    group.finish();
}

fn plan(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("plan");
    for n in [1_000, 10_000, 100_000] {
        group.throughput(Throughput::Elements(n as u64));
        if n >= 100_000 {
            group.sample_size(10);
        }
        // The world: the first two thirds applied, the first third of them at size 1.
        let (engine, _cloud) = instant_engine();
        let (before, _) = dag_sized(n, 50, 11, |i| if i < n / 3 { 1 } else { 2 });
        let first_two_thirds = Options::default().targets((0..2 * n / 3).map(|i| format!("n{i}")));
        rt.block_on(engine.apply(&before.plan(), &first_two_thirds))
            .expect("the world is built");
        let (fleet, _) = dag_sized(n, 50, 11, |_| 2);
        let target = fleet.plan();
        let observed = rt
            .block_on(engine.observe_for(&target, &Options::default()))
            .expect("observed");
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_batched(
                || observed.clone(),
                |o| engine.plan_observed(&target, o),
                BatchSize::LargeInput,
            );
        });
        let json = engine.plan_observed(&target, observed).to_json();
        group.bench_with_input(BenchmarkId::new("serde_round_trip", n), &n, |b, _| {
            b.iter(|| {
                let text = serde_json::to_string(&json).expect("json");
                serde_json::from_str::<serde_json::Value>(&text).expect("json")
            });
        });
    }
    group.finish();
}

fn schedule(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("schedule");
    for n in [1_000, 10_000] {
        group.throughput(Throughput::Elements(n as u64));
        let (fleet, _) = dag(n, 50, 13);
        let plan = fleet.plan();
        let options = Options::default().parallelism(16);
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_batched(
                || instant_engine().0,
                |engine| {
                    let outcome = rt.block_on(engine.apply(&plan, &options)).expect("apply");
                    assert!(outcome.result.is_success());
                },
                BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

fn through_the_simulator(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("sim");
    group.sample_size(20);
    for n in [100, 1_000] {
        group.throughput(Throughput::Elements(n as u64));
        let old = mixed(n, 1).plan();
        let new = mixed(n, 2).plan();

        let cloud = SimCloud::new(1);
        let engine = sim_engine(&cloud);
        rt.block_on(engine.apply(&old, &Options::default()))
            .expect("the world is built");
        group.bench_with_input(BenchmarkId::new("observe", n), &n, |b, _| {
            b.iter(|| {
                rt.block_on(engine.observe_for(&new, &Options::default()))
                    .expect("observed")
            });
        });

        group.bench_with_input(BenchmarkId::new("apply", n), &n, |b, _| {
            b.iter_batched(
                || {
                    let cloud = SimCloud::new(2);
                    let engine = sim_engine(&cloud);
                    (cloud, engine)
                },
                |(_cloud, engine)| {
                    let outcome = rt.block_on(engine.apply(&new, &Options::default()));
                    assert!(outcome.expect("apply").result.is_success());
                },
                BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

criterion_group! {
    name = stages;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = build_and_check, plan, schedule, through_the_simulator
}
criterion_main!(stages);
