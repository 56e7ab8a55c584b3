//! G: how a run's time grows with the fleet. Each stage runs as the runner runs it by
//! default — the fleet's lock taken, the records in files, the cloud the simulated one
//! with its world in a file — for `n` and for ten times `n` resources of built-in
//! kinds at zero latency: the first apply, a plan that finds nothing to change, and
//! the destroy. Linear growth reads 10.

use std::path::PathBuf;
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

/// The environment variable that makes this program the runner of a fleet of that many
/// resources (see [`as_fleet`]).
pub(crate) const AS_FLEET: &str = "INFRA_BENCH_AS_FLEET";

/// When [`AS_FLEET`] is set, runs the runner (`infra_core::cli::run`) on the fleet of
/// that many resources with the simulated cloud of `INFRA_SIM_WORLD`, on this
/// process's arguments, as a consumer's binary would; `None` otherwise.
pub(crate) fn as_fleet() -> Option<std::process::ExitCode> {
    let n: usize = std::env::var(AS_FLEET).ok()?.parse().ok()?;
    Some(infra_core::cli::run(Ok(mixed(n, 1)), |_| {
        SimCloud::backends_at(infra_testkit::sim::world_file())
    }))
}

/// Prints one `Gr` line per stage: as [`growth`], each stage a whole runner process
/// (`apply --yes`, `plan --detailed-exitcode`, `destroy --yes`).
pub(crate) fn runner_growth(n: usize) {
    let small = runner_stages(n);
    let large = runner_stages(n * 10);
    for (stage, a, b) in [
        ("apply", small.apply, large.apply),
        ("no_change_plan", small.plan, large.plan),
        ("destroy", small.destroy, large.destroy),
    ] {
        println!(
            "Gr {stage}_growth_runner n={n}->{} ratio={:.1} small_ms={:.1} large_ms={:.1}",
            n * 10,
            b.as_secs_f64() / a.as_secs_f64(),
            a.as_secs_f64() * 1000.0,
            b.as_secs_f64() * 1000.0
        );
    }
}

fn runner_stages(n: usize) -> Stages {
    let runner = Runner::new("runner", n, None);
    let apply = runner.time(&["apply", "--yes"]);
    assert_eq!(runner.world_len(), n);
    let plan = runner.time(&["plan", "--detailed-exitcode"]);
    let destroy = runner.time(&["destroy", "--yes"]);
    assert_eq!(runner.world_len(), 0);
    Stages {
        apply,
        plan,
        destroy,
    }
}

/// This program run as the runner of a fleet of `n` (the mixed fleet of [`AS_FLEET`],
/// or another, [`Runner::of_fleet`]) in a scratch directory of its own, with its records
/// in files or at a database address. The directory is removed on drop.
pub(crate) struct Runner {
    dir: PathBuf,
    n: usize,
    records: Option<String>,
    fleet: &'static str,
}

/// How one runner process ended.
pub(crate) struct Ran {
    /// Its wall time, start to exit.
    pub(crate) took: Duration,
    /// Its exit code.
    pub(crate) code: Option<i32>,
    /// What it wrote on standard error.
    pub(crate) stderr: String,
}

impl Runner {
    pub(crate) fn new(purpose: &str, n: usize, records: Option<String>) -> Runner {
        let dir =
            std::env::temp_dir().join(format!("infra-bench-{purpose}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Runner {
            dir,
            n,
            records,
            fleet: AS_FLEET,
        }
    }

    /// The same runner, of the fleet the environment variable `var` makes this program
    /// the runner of.
    pub(crate) fn of_fleet(mut self, var: &'static str) -> Runner {
        self.fleet = var;
        self
    }

    pub(crate) fn world(&self) -> PathBuf {
        self.dir.join("world.json")
    }

    pub(crate) fn world_len(&self) -> usize {
        SimCloud::open(self.world()).expect("the world").len()
    }

    /// Runs one verb as a whole process and times it; it must exit 0.
    pub(crate) fn time(&self, args: &[&str]) -> Duration {
        self.time_with(args, &[])
    }

    /// [`Runner::time`], with these environment variables set.
    pub(crate) fn time_with(&self, args: &[&str], env: &[(&str, &str)]) -> Duration {
        let ran = self.run(args, env);
        assert_eq!(ran.code, Some(0), "{args:?}: {}", ran.stderr);
        ran.took
    }

    /// Runs one verb as a whole process, with these environment variables set, and
    /// says how it ended.
    pub(crate) fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Ran {
        let exe = std::env::current_exe().expect("this program");
        let mut command = std::process::Command::new(exe);
        command
            .args(args)
            .arg("--state-dir")
            .arg(self.dir.join("state"))
            .env(self.fleet, self.n.to_string())
            .env("INFRA_SIM_WORLD", self.world())
            .envs(env.iter().copied());
        if let Some(url) = &self.records {
            command.arg("--records").arg(url);
        }
        let start = now();
        let out = command.output().expect("the runner starts");
        Ran {
            took: start.elapsed(),
            code: out.status.code(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Prints `R no_change_plan_runner`: a plan that finds nothing to change of a fleet of
/// `n`, as a whole runner process (median of three), with the records in files and,
/// when a database is given (`INFRA_BENCH_DATABASE_URL` or `INFRA_TEST_DATABASE_URL`),
/// on PostgreSQL.
pub(crate) fn runner_plan(n: usize) {
    let url = ["INFRA_BENCH_DATABASE_URL", "INFRA_TEST_DATABASE_URL"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|url| !url.is_empty()));
    let mut stores = vec![("files", None)];
    match url {
        Some(url) => stores.push(("postgres", Some(url))),
        None => eprintln!(
            "R no_change_plan_runner records=postgres skipped: set INFRA_BENCH_DATABASE_URL"
        ),
    }
    for (records, url) in stores {
        let runner = Runner::new("rplan", n, url);
        runner.time(&["apply", "--yes"]);
        let mut times: Vec<Duration> = (0..3)
            .map(|_| runner.time(&["plan", "--detailed-exitcode"]))
            .collect();
        times.sort();
        runner.time(&["destroy", "--yes"]);
        let median = times[1];
        println!(
            "R no_change_plan_runner n={n} records={records} ms={:.0} per_resource_us={:.1}",
            median.as_secs_f64() * 1000.0,
            median.as_secs_f64() * 1e6 / n as f64
        );
    }
}
