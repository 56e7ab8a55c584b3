//! Measures the engine against its limits and prints one line per figure:
//! `cargo run --release -p benches --bin report` (`--quick` for smaller sizes,
//! `--detail` for a breakdown of P2 on standard error, `--growth N` for the G lines
//! alone, from N to 10·N, `--world N` for P1w alone, `--p2` for P2 alone with its
//! breakdown, `--scale` for P1, P1w and P4 at a million resources).
//!
//! - P1: planning time against a serde_json round trip of the same plan; P1w the same
//!   on a world a third unchanged, a third changed and a third missing.
//! - P2: an apply's wall time against its critical-path bound, with each call taking a
//!   real latency: L + max(depth·L, N·L/P), the list that observes the kind before any
//!   create and then the creates (without the list, as before, beside it).
//! - P3: a refresh's wall time against lists + N·L/P.
//! - P4: peak resident memory growth per resource while a large fleet is planned.
//! - P2seq: the speedup of parallel apply over one call at a time.
//! - G: how the first apply, a no-change plan and the destroy grow from n to 10·n
//!   resources, with the records in files and the simulated world in a file; Gr the
//!   same with each stage a whole runner process (this program, as the fleet's runner
//!   when `INFRA_BENCH_AS_FLEET` is set).
//! - L: a no-change plan with every call taking 50 ms, observed by the page against
//!   one read per resource at parallelism 10, each a whole runner process on the
//!   simulated cloud (this program, as the paced fleet's runner when
//!   `INFRA_BENCH_AS_PACED_FLEET` is set); `--latency N` for the L line alone.
//! - Q: an apply of the paced fleet on a simulated cloud admitting 50 calls a second per
//!   API, every call taking 50 ms: with the concurrency windows yielding to throttling
//!   (ceiling 64), against the best of a sweep of fixed parallelisms
//!   (`--fixed-parallelism`) and a fixed 16, failures and duplicates counted in the
//!   world; `--throttled N` for the Q line alone.
//! - T: this engine against Terraform on the same graph, as whole processes, read from
//!   the last run of `benches/side-by-side/run.py` (this program is its fleet's runner
//!   when `INFRA_BENCH_AS_GRAPH` is set, writes its Terraform configuration with
//!   `--terraform N VERSION` and counts a simulated world with `--world-len PATH`).
//! - P6 (feature `aws`, with `AWS_ENDPOINT_URL` naming a moto server): an apply of 200
//!   SQS queues through `infra-aws` against the same `CreateQueue` calls made directly
//!   with the SDK, at the same parallelism.
//! - O (feature `gcp`): the backend calls per resource of a no-change plan of 1,000
//!   resources (100 with `--quick`) of the GCP kinds whose lists are complete, on the
//!   GCP stand-in started in the process, with complete lists and with one read per
//!   resource (the baseline); `--observe-gcp N` prints it alone.
//! - O cloud=aws (feature `aws`, on moto likewise; `--observe-aws N` alone): calls per
//!   resource of a no-change plan of 1,000 resources (100 with `--quick`), with lists
//!   handing over reads and tags, against one read per resource (`one_read_each`).
//! - O (feature `scaleway`): backend calls per resource of a no-change plan of kinds
//!   whose lists are complete, on the Scaleway stand-in, against one read per resource
//!   in the same run (`--observe-scaleway N` for that line alone).
//! - P5 (feature `postgres`, with `INFRA_BENCH_DATABASE_URL` or
//!   `INFRA_TEST_DATABASE_URL` set): an apply with its records on PostgreSQL against the
//!   same apply with them in files.

use std::sync::Arc;
use std::time::{Duration, Instant};

use benches::precise::PreciseClock;
use benches::{BenchCloud, dag, dag_sized, runtime};
use infra_core::{
    engine::{Engine, ManualClock, MemoryStore, Options},
    prelude::Backends,
};

#[cfg(feature = "aws")]
#[path = "report/aws.rs"]
mod aws;
#[path = "report/growth.rs"]
mod growth;
#[path = "report/latency.rs"]
mod latency;
#[cfg(feature = "aws-observe")]
#[path = "report/observe_aws.rs"]
mod observe_aws;
#[cfg(feature = "gcp")]
#[path = "report/observe_gcp.rs"]
mod observe_gcp;
#[cfg(feature = "scaleway")]
#[path = "report/observe_scaleway.rs"]
mod observe_scaleway;
#[path = "report/paced.rs"]
mod paced;
#[cfg(feature = "postgres")]
#[path = "report/records.rs"]
mod records;
#[path = "report/side_by_side.rs"]
mod side_by_side;
#[path = "report/throttled.rs"]
mod throttled;

fn bench_engine(latency: Duration, real: bool) -> (Engine, Arc<BenchCloud>) {
    let clock: Arc<dyn infra_core::engine::Clock> = if real {
        Arc::new(PreciseClock::new())
    } else {
        Arc::new(ManualClock::new())
    };
    let cloud = Arc::new(BenchCloud::new(Arc::clone(&clock), latency));
    let backend = cloud.backend();
    let engine =
        Engine::new(Backends::new().with(backend), Arc::new(MemoryStore::new())).with_clock(clock);
    (engine, cloud)
}

#[allow(
    clippy::disallowed_methods,
    reason = "a benchmark measures the real time"
)]
fn now() -> Instant {
    Instant::now()
}

/// Peak resident set size of this process, in bytes (Linux).
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// A serde_json round trip of `plan`'s JSON, and `engine`'s plan of it, each timed:
/// the best of `tries` of each (a plan changes nothing, so each try sees the same
/// world), so that a busy machine's pauses weigh on neither side.
fn plan_against_serde(
    rt: &tokio::runtime::Runtime,
    engine: &Engine,
    plan: &infra_core::engine::Plan,
    tries: usize,
) -> (Duration, Duration, infra_core::engine::PlanReport) {
    let mut serde = Duration::MAX;
    let mut planned = Duration::MAX;
    let mut report = None;
    for _ in 0..tries.max(1) {
        let start = now();
        let text = serde_json::to_string(&plan.to_json()).expect("json");
        let back: serde_json::Value = serde_json::from_str(&text).expect("json");
        serde = serde.min(start.elapsed());
        assert!(back.is_object());
        drop((text, back));
        drop(report.take());
        let start = now();
        report = Some(
            rt.block_on(engine.plan(plan, &Options::default()))
                .expect("plan"),
        );
        planned = planned.min(start.elapsed());
    }
    (serde, planned, report.expect("planned at least once"))
}

fn p1(rt: &tokio::runtime::Runtime, n: usize) {
    let (fleet, _) = dag(n, 50, 1);
    let plan = fleet.plan();
    let (engine, _) = bench_engine(Duration::ZERO, false);
    let (serde, planned, report) = plan_against_serde(rt, &engine, &plan, 1);
    assert_eq!(report.changes.len(), n);
    println!(
        "P1 plan_vs_serde n={n} ratio={:.2} plan_ms={:.0}",
        planned.as_secs_f64() / serde.as_secs_f64(),
        planned.as_secs_f64() * 1000.0
    );
}

/// P1 on a world a third unchanged, a third changed in place and a third missing: the
/// fleet applied, then a third of its nodes removed out of band, then planned with a
/// third of its sizes changed (the best of three tries of each side, up to 100,000).
fn p1_world(rt: &tokio::runtime::Runtime, n: usize) {
    let (engine, cloud) = bench_engine(Duration::ZERO, false);
    let (before, _) = dag_sized(n, 50, 1, |_| 1);
    let outcome = rt
        .block_on(engine.apply(&before.plan(), &Options::default()))
        .expect("apply");
    assert!(outcome.result.is_success());
    for i in (2..n).step_by(3) {
        cloud.remove_out_of_band(&format!("n{i}"));
    }
    assert_eq!(cloud.len(), n - n.saturating_sub(2).div_ceil(3));
    let (fleet, _) = dag_sized(n, 50, 1, |i| if i % 3 == 1 { 2 } else { 1 });
    let tries = if n > 100_000 { 1 } else { 3 };
    let (serde, planned, report) = plan_against_serde(rt, &engine, &fleet.plan(), tries);
    let count = |action: &str| report.changes.iter().filter(|c| c.action == action).count();
    assert_eq!(count("create"), n / 3, "a third missing");
    assert_eq!(count("update"), (n + 1) / 3, "a third changed");
    println!(
        "P1w plan_vs_serde_on_a_world n={n} ratio={:.2} plan_ms={:.0}",
        planned.as_secs_f64() / serde.as_secs_f64(),
        planned.as_secs_f64() * 1000.0
    );
}

fn apply_wall(
    rt: &tokio::runtime::Runtime,
    n: usize,
    latency: Duration,
    parallelism: usize,
) -> Applied {
    let (fleet, depth) = dag(n, 50, 2);
    let (engine, cloud) = bench_engine(latency, true);
    let options = Options::default().parallelism(parallelism);
    let start = now();
    let on_the_cloud = cloud.now();
    let outcome = rt
        .block_on(engine.apply(&fleet.plan(), &options))
        .expect("apply");
    let wall = start.elapsed();
    let ended = cloud.now();
    assert!(outcome.result.is_success());
    let (first, last) = cloud.span().expect("the apply made calls");
    Applied {
        wall,
        depth,
        calls: last - first,
        before_and_after: (first - on_the_cloud, ended - last),
        busy: cloud.busy(),
        engine,
        fleet,
    }
}

/// P2: an apply of `n` through the benchmark cloud at 20 ms a call and parallelism 16,
/// against its critical-path bound; with `detail`, where the time went.
fn p2(rt: &tokio::runtime::Runtime, n: usize, detail: bool) -> Applied {
    let latency = Duration::from_millis(20);
    let p = 16;
    let applied = apply_wall(rt, n, latency, p);
    let l = latency.as_secs_f64();
    // Every create waits for the one list that observes the kind first: the critical
    // path starts with it.
    let bound_at = |l: f64| l + (applied.depth as f64 * l).max(n as f64 * l / p as f64);
    let bound = bound_at(l);
    let creates = bound - l;
    // The same bound at the latency the calls had: the clock's wake of each sleeper
    // lands a fraction of a millisecond late, and no schedule can win that back.
    let had = applied.busy.1.as_secs_f64() / applied.busy.0.max(1) as f64;
    println!(
        "P2 apply_vs_critical_path n={n} parallelism={p} latency_ms=20 ratio={:.3} \
         ratio_without_the_list={:.3} ratio_at_the_calls_latency={:.3}",
        applied.wall.as_secs_f64() / bound,
        applied.wall.as_secs_f64() / creates,
        applied.wall.as_secs_f64() / bound_at(had)
    );
    if detail {
        // Calls are whole: no schedule beats one list and ceil(N/P) rounds of creates.
        let floor = (1 + n.div_ceil(p)) as f64 * l;
        eprintln!(
            "  P2 detail: depth={} bound_ms={:.1} floor_ms={:.1} (ratio {:.3}) calls_ms={:.1} \
             engine_outside_calls_ms={:.1} (before {:.1}, after {:.1}) calls={} mean_call_ms={:.2} \
             slots_idle_in_calls={:.1}%",
            applied.depth,
            bound * 1000.0,
            floor * 1000.0,
            floor / bound,
            applied.calls.as_secs_f64() * 1000.0,
            (applied.wall - applied.calls).as_secs_f64() * 1000.0,
            applied.before_and_after.0.as_secs_f64() * 1000.0,
            applied.before_and_after.1.as_secs_f64() * 1000.0,
            applied.busy.0,
            applied.busy.1.as_secs_f64() * 1000.0 / applied.busy.0.max(1) as f64,
            100.0 * (1.0 - applied.busy.1.as_secs_f64() / (applied.calls.as_secs_f64() * p as f64)),
        );
    }
    applied
}

/// One apply through the benchmark cloud, timed.
struct Applied {
    wall: Duration,
    depth: usize,
    /// From the first call's start to the last call's return.
    calls: Duration,
    /// From the apply's start to the first call's, and from the last call's return to
    /// the apply's.
    before_and_after: (Duration, Duration),
    /// How many calls were made, and their time summed.
    busy: (usize, Duration),
    engine: Engine,
    fleet: infra_core::prelude::Fleet,
}

/// `--scale`: P1, P1w and P4 at a million resources, and a no-change plan of 100,000
/// through the runner (not in CI: minutes, and gigabytes of memory).
fn scale() {
    const N: usize = 1_000_000;
    let rt = runtime();
    p1(&rt, N);
    p1_world(&rt, N);
    drop(rt);
    let exe = std::env::current_exe().expect("this program");
    let out = std::process::Command::new(exe)
        .args(["--memory", &N.to_string()])
        .output()
        .expect("the memory probe runs");
    print!("{}", String::from_utf8_lossy(&out.stdout));
    growth::runner_plan(100_000);
}

/// In a fresh process: the growth of peak resident memory, per resource, while a fleet
/// of `n` is declared and planned against an observed world of the same size.
fn memory(n: usize) {
    let rt = runtime();
    let before = peak_rss().unwrap_or(0);
    let (fleet, _) = dag(n, 50, 3);
    let (engine, _) = bench_engine(Duration::ZERO, false);
    rt.block_on(engine.plan(&fleet.plan(), &Options::default()))
        .expect("plan");
    let after = peak_rss().unwrap_or(0);
    println!(
        "P4 bytes_per_resource n={n} value={}",
        after.saturating_sub(before) / n as u64
    );
}

fn main() -> std::process::ExitCode {
    if let Some(code) = growth::as_fleet() {
        return code;
    }
    if let Some(code) = paced::as_fleet() {
        return code;
    }
    if let Some(code) = side_by_side::as_graph() {
        return code;
    }
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--terraform") {
        let n = args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(100);
        let version = args.get(i + 2).and_then(|v| v.parse().ok()).unwrap_or(1);
        side_by_side::terraform(n, version);
        return std::process::ExitCode::SUCCESS;
    }
    if let Some(i) = args.iter().position(|a| a == "--world-len") {
        return side_by_side::world_len(args.get(i + 1).map_or("", String::as_str));
    }
    report();
    std::process::ExitCode::SUCCESS
}

fn report() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--memory") {
        memory(
            args.get(i + 1)
                .and_then(|n| n.parse().ok())
                .unwrap_or(100_000),
        );
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--world") {
        let n = args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(100_000);
        p1_world(&runtime(), n);
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--growth") {
        let n = args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(1000);
        growth::growth(&runtime(), n);
        growth::runner_growth(n);
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--latency") {
        let n = args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(10_000);
        latency::at_latency(n);
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--throttled") {
        let n = args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(1000);
        throttled::q(n);
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--runner-plan") {
        let n = args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(100_000);
        growth::runner_plan(n);
        return;
    }
    #[cfg(feature = "gcp")]
    if let Some(i) = args.iter().position(|a| a == "--observe-gcp") {
        let n = args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(1000);
        observe_gcp::o_gcp(&runtime(), n);
        return;
    }
    #[cfg(feature = "aws")]
    if let Some(i) = args.iter().position(|a| a == "--aws") {
        let n = args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(200);
        aws::p6(&runtime(), n);
        return;
    }
    #[cfg(feature = "aws-observe")]
    if let Some(i) = args.iter().position(|a| a == "--observe-aws") {
        let n = args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(1000);
        observe_aws::o(&runtime(), n);
        return;
    }
    #[cfg(feature = "scaleway")]
    if let Some(i) = args.iter().position(|a| a == "--observe-scaleway") {
        let n = args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(1000);
        observe_scaleway::o_line(&runtime(), n);
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--observe") {
        let n = args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(1000);
        observe(&runtime(), n);
        return;
    }
    if args.iter().any(|a| a == "--p2") {
        p2(&runtime(), 1000, true);
        return;
    }
    if args.iter().any(|a| a == "--scale") {
        scale();
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let detail = args.iter().any(|a| a == "--detail");
    let rt = runtime();
    let big = if quick { 10_000 } else { 100_000 };
    let n = if quick { 200 } else { 1000 };
    let latency = Duration::from_millis(20);
    let p = 16;

    p1(&rt, big);
    p1_world(&rt, big);

    let applied = p2(&rt, n, detail);
    let l = latency.as_secs_f64();
    let (engine, fleet) = (applied.engine, applied.fleet);

    let start = now();
    rt.block_on(engine.refresh(&fleet.plan())).expect("refresh");
    let refresh = start.elapsed();
    let lists = 1.0;
    println!(
        "P3 refresh_vs_bound n={n} parallelism={p} latency_ms=20 ratio={:.2}",
        refresh.as_secs_f64() / (lists * l + n as f64 * l / p as f64)
    );

    // Peak memory is a property of the whole process: measured in a fresh one.
    let exe = std::env::current_exe().expect("this program");
    let out = std::process::Command::new(exe)
        .args(["--memory", &big.to_string()])
        .output()
        .expect("the memory probe runs");
    print!("{}", String::from_utf8_lossy(&out.stdout));

    let seq = apply_wall(&rt, n, latency, 1).wall;
    let par = apply_wall(&rt, n, latency, p).wall;
    println!(
        "P2seq apply_speedup_vs_sequential n={n} value={:.2}",
        seq.as_secs_f64() / par.as_secs_f64()
    );

    growth::growth(&rt, if quick { 200 } else { 1000 });
    growth::runner_growth(if quick { 200 } else { 1000 });
    latency::at_latency(if quick { 1000 } else { 10_000 });
    throttled::q(if quick { 100 } else { 1000 });

    side_by_side::print();

    #[cfg(feature = "aws")]
    aws::p6(&rt, 200);
    #[cfg(not(feature = "aws"))]
    eprintln!("P6 apply_vs_sdk_on_moto skipped: build with --features aws");
    observe(&rt, if quick { 100 } else { 1000 });

    #[cfg(feature = "postgres")]
    records::p5(&rt, 1000);
    #[cfg(not(feature = "postgres"))]
    eprintln!("P5 records_postgres_vs_file skipped: build with --features postgres");
}

/// The O lines: each cloud's calls per resource of a no-change plan of `n`, for the
/// clouds this build has (a count of calls, the same in a debug build).
fn observe(rt: &tokio::runtime::Runtime, n: usize) {
    #[cfg(feature = "aws-observe")]
    observe_aws::o(rt, n);
    #[cfg(not(feature = "aws-observe"))]
    eprintln!("O calls_per_resource cloud=aws skipped: build with --features aws-observe");
    #[cfg(feature = "gcp")]
    observe_gcp::o_gcp(rt, n);
    #[cfg(not(feature = "gcp"))]
    eprintln!("O calls_per_resource cloud=gcp skipped: build with --features gcp");
    #[cfg(feature = "scaleway")]
    observe_scaleway::o_line(rt, n);
    #[cfg(not(feature = "scaleway"))]
    eprintln!("O calls_per_resource cloud=scaleway skipped: build with --features scaleway");
    let _ = (rt, n);
}
