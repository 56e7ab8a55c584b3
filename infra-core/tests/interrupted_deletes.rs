//! A run killed while it deletes never leaves the fleet stuck: `destroy --yes` (and an
//! `apply --yes` that prunes) killed at a random cloud call, with SIGKILL or SIGTERM,
//! is followed by an `apply --yes` without `--force` that converges, a `plan
//! --detailed-exitcode` that exits 0, no twin of any resource, and a foreign resource
//! left exactly as it was.
//!
//! Every run is the runner in a process of its own, as a user starts it: this test
//! binary started again on the ignored test `runner_process`, which runs
//! `infra_core::cli::run_with` on the process's own standard streams, with its records
//! in a state directory and its cloud the simulated world kept in a file. The kill
//! point is a count of cloud calls, not a sleep: the process stops at its `n`th call
//! (before it reaches the world, or after it was applied and before its answer), says
//! so on standard output, and waits there to be killed. With one call in flight at a
//! time, nothing else happens between that call and the signal.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use infra_core::cli::{Console, run_with};
use infra_core::engine::{FileStore, RecordStore};
use infra_core::kinds::*;
use infra_core::prelude::{AwsRegion, Backends, Expr, Fleet, Partial};
use infra_core::sdk::layer::{Answer, Call, Layer, Layered, Next};
use infra_core::sdk::{BackendError, RawTags};
use infra_testkit::sim::{SimCloud, SimResource};

/// The fleet name every run of this file uses.
const FLEET: &str = "kills";

/// The fleet: ten resources with edges (two instances on one security group, a chain
/// of three queues by their dead letters), three buckets and a generated secret. With
/// `trimmed`, four of them are no longer declared (web-2, q3, kill-c, db-password), so
/// an apply prunes them — fewer than half, so the brake lets it.
fn fleet(trimmed: bool) -> Result<Fleet, infra_core::prelude::CheckReport> {
    let mut f = Fleet::builder(FLEET);
    let here = AwsRegion::EuWest3;
    let web = f.declare(
        here,
        "web",
        SecurityGroup {
            description: "web".into(),
            vpc_id: Partial::Unknown,
            ingress: Expr::lit([Rule::tcp(443, "0.0.0.0/0")].into()),
            egress: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    let instances: &[&str] = if trimmed {
        &["web-1"]
    } else {
        &["web-1", "web-2"]
    };
    for name in instances {
        f.declare(
            here,
            *name,
            AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Micro), web),
        );
    }
    let queue = |dead_letter: Option<infra_core::prelude::Key<Queues>>| Queues {
        fifo: Expr::lit(false),
        visibility_timeout_seconds: Partial::Known(Expr::lit(30)),
        retention_seconds: Partial::Unknown,
        dead_letter: Partial::Known(dead_letter),
        max_receive_count: Partial::Unknown,
        tags: Partial::Unknown,
    };
    let q1 = f.declare(here, "q1", queue(None));
    let q2 = f.declare(here, "q2", queue(Some(q1)));
    if !trimmed {
        f.declare(here, "q3", queue(Some(q2)));
    }
    let buckets: &[&str] = if trimmed {
        &["kill-a", "kill-b"]
    } else {
        &["kill-a", "kill-b", "kill-c"]
    };
    for name in buckets {
        f.declare(here, *name, ObjectStore::new());
    }
    if !trimmed {
        f.declare(here, "db-password", Secrets::generated(24));
    }
    f.build()
}

/// Stops the run at its `at`th cloud call: says `STALLED` on standard output, then
/// never answers. With `applied`, the call reaches the world first (its answer is what
/// is lost); otherwise it never does.
#[derive(Clone)]
struct Stall {
    calls: Arc<AtomicU64>,
    at: u64,
    applied: bool,
}

#[async_trait]
impl Layer for Stall {
    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n != self.at {
            return next.run(call).await;
        }
        let op = call.op();
        if self.applied {
            let _ = next.run(call).await;
        }
        let mut out = std::io::stdout();
        let _ = writeln!(out, "\nSTALLED {n} {op}");
        let _ = out.flush();
        std::future::pending().await
    }
}

/// What a runner process is given, through the environment.
const SPEC_VAR: &str = "INFRA_KILL_RUNNER";

/// A helper, not a test: the runner as a process of its own, run by the tests below.
#[test]
#[ignore = "started by the tests of this file in a process of its own"]
fn runner_process() {
    let Ok(spec) = std::env::var(SPEC_VAR) else {
        return;
    };
    let spec: serde_json::Value = serde_json::from_str(&spec).expect("a runner spec");
    let world = PathBuf::from(spec["world"].as_str().unwrap());
    let trimmed = spec["trimmed"].as_bool().unwrap();
    // Counts every call; stalls at none without `stallAt`.
    let stall = Stall {
        calls: Arc::new(AtomicU64::new(0)),
        at: spec["stallAt"].as_u64().unwrap_or(0),
        applied: spec["stallApplied"].as_bool().unwrap_or(false),
    };
    let calls = Arc::clone(&stall.calls);
    let argv: Vec<String> = serde_json::from_value(spec["argv"].clone()).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let code = runtime.block_on(async move {
        let cloud = SimCloud::open(&world).expect("the world opens");
        let backends = ["aws", "gcp", "scaleway"]
            .into_iter()
            .fold(Backends::new(), |b, p| {
                b.with(Layered::wrap(cloud.backend(p), stall.clone()))
            });
        let mut console = Console::stdio();
        run_with(argv, fleet(trimmed), |_| backends, &mut console).await
    });
    let mut out = std::io::stdout();
    let _ = writeln!(out, "\nCALLS {}", calls.load(Ordering::SeqCst));
    let _ = out.flush();
    std::process::exit(i32::from(code));
}

/// One place: a world file and a state directory.
struct Place {
    dir: tempfile::TempDir,
}

/// How a runner process ended.
struct Ended {
    code: Option<i32>,
    out: String,
    err: String,
    /// The call it stalled at, if it did (and was killed there).
    stalled: Option<String>,
}

impl Place {
    fn new() -> Self {
        Place {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn world(&self) -> PathBuf {
        self.dir.path().join("world.json")
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn cloud(&self) -> SimCloud {
        SimCloud::open(self.world()).unwrap()
    }

    fn spawn(&self, trimmed: bool, args: &[&str], stall: Option<(u64, bool)>) -> Child {
        let mut argv = vec![
            "infra-test".to_owned(),
            "--state-dir".to_owned(),
            self.state().to_str().unwrap().to_owned(),
        ];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let spec = serde_json::json!({
            "world": self.world(),
            "trimmed": trimmed,
            "stallAt": stall.map(|s| s.0),
            "stallApplied": stall.map(|s| s.1),
            "argv": argv,
        });
        Command::new(std::env::current_exe().unwrap())
            .args(["runner_process", "--exact", "--ignored", "--nocapture"])
            .env(SPEC_VAR, spec.to_string())
            .env_remove("INFRA_RECORDS_URL")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the runner process starts")
    }

    /// Runs to the end.
    fn run(&self, trimmed: bool, args: &[&str]) -> Ended {
        let out = self.spawn(trimmed, args, None).wait_with_output().unwrap();
        Ended {
            code: out.status.code(),
            out: String::from_utf8_lossy(&out.stdout).into_owned(),
            err: String::from_utf8_lossy(&out.stderr).into_owned(),
            stalled: None,
        }
    }

    /// Runs until the `at`th cloud call, and kills the process there with `signal`;
    /// runs to the end if it makes fewer calls.
    fn run_killed(
        &self,
        trimmed: bool,
        args: &[&str],
        at: u64,
        applied: bool,
        signal: &str,
    ) -> Ended {
        let mut child = self.spawn(trimmed, args, Some((at, applied)));
        let mut stderr = child.stderr.take().unwrap();
        let err_reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let mut out = String::new();
        let mut stalled = None;
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        for line in lines.by_ref() {
            let line = line.unwrap();
            if let Some(call) = line.strip_prefix("STALLED ") {
                stalled = Some(call.to_owned());
                let sent = Command::new("kill")
                    .args([&format!("-{signal}"), &child.id().to_string()])
                    .status()
                    .expect("the kill command");
                assert!(sent.success(), "kill -{signal} failed");
                break;
            }
            out.push_str(&line);
            out.push('\n');
        }
        for line in lines {
            out.push_str(&line.unwrap_or_default());
            out.push('\n');
        }
        let status = child.wait().unwrap();
        let err = err_reader.join().unwrap();
        if stalled.is_some() {
            use std::os::unix::process::ExitStatusExt as _;
            let expected = if signal == "KILL" { 9 } else { 15 };
            assert_eq!(
                status.signal(),
                Some(expected),
                "the runner was not ended by SIG{signal}: {status}\n{out}{err}"
            );
        }
        Ended {
            code: status.code(),
            out,
            err,
            stalled,
        }
    }
}

/// A small deterministic generator (SplitMix64): the kill points come from a seed, so
/// a failure names a case that can be run again.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The resources of the world, by (provider, kind, name), each with how many there are.
fn census(cloud: &SimCloud) -> BTreeMap<(String, String, String), usize> {
    let mut counts = BTreeMap::new();
    for r in cloud.resources() {
        *counts.entry((r.provider, r.kind, r.name)).or_default() += 1;
    }
    counts
}

/// A foreign bucket, made by someone else, carrying no marker.
fn foreign(cloud: &SimCloud) -> SimResource {
    let handle = cloud
        .insert_foreign(
            "aws",
            "objectStore",
            "eu-west-3",
            "someone-elses-bucket",
            RawTags::from([("team".to_owned(), "billing".to_owned())]),
        )
        .unwrap();
    cloud.resource(&handle).unwrap()
}

/// What one kill case was.
#[derive(Debug)]
struct Case {
    at: u64,
    applied: bool,
    signal: &'static str,
    parallelism: u64,
}

/// How many cloud calls a whole uninterrupted run of `args` makes on a fresh place
/// after `apply --yes` of the full fleet.
fn calls_of(trimmed: bool, args: &[&str]) -> u64 {
    let place = Place::new();
    let setup = place.run(false, &["apply", "--yes"]);
    assert_eq!(setup.code, Some(0), "{}{}", setup.out, setup.err);
    let ended = place.run(trimmed, args);
    assert_eq!(ended.code, Some(0), "{}{}", ended.out, ended.err);
    ended
        .out
        .lines()
        .find_map(|l| l.strip_prefix("CALLS "))
        .expect("the runner counts its calls")
        .parse()
        .unwrap()
}

/// Kills `args` at a drawn call in `cases` places, and checks each recovery. The call is
/// drawn among all of the run's calls but the first `skip_percent` per cent of them.
/// Returns how many runs were killed at their drawn call, and how many of those after
/// at least one delete had reached the world and before the last one had.
fn kill_and_recover(
    trimmed: bool,
    args: &[&str],
    (cases, skip_percent): (u64, u64),
    seed: u64,
) -> (u64, u64) {
    let total = calls_of(trimmed, args);
    let skip = total * skip_percent / 100;
    let declared: Vec<(String, String, String)> = {
        let fleet = fleet(trimmed).unwrap();
        let mut names: Vec<_> = fleet
            .resources()
            .map(|r| {
                let rf = r.reference();
                (rf.provider.to_owned(), rf.kind.to_owned(), rf.name.clone())
            })
            .collect();
        names.sort();
        names
    };
    let deletes_in_full = if trimmed { 4 } else { 10 };
    let mut draws = Draws(seed);
    let mut mid = 0;
    let mut hit = 0;
    for _ in 0..cases {
        let case = Case {
            at: 1 + skip + draws.below(total - skip),
            applied: draws.below(2) == 1,
            signal: if draws.below(2) == 1 { "KILL" } else { "TERM" },
            parallelism: if draws.below(4) == 0 { 4 } else { 1 },
        };
        let place = Place::new();
        let setup = place.run(false, &["apply", "--yes"]);
        assert_eq!(setup.code, Some(0), "{case:?}: {}{}", setup.out, setup.err);
        let theirs = foreign(&place.cloud());
        let parallelism = case.parallelism.to_string();
        let mut killed_args = args.to_vec();
        killed_args.extend(["--parallelism", &parallelism]);
        let killed = place.run_killed(trimmed, &killed_args, case.at, case.applied, case.signal);
        if killed.stalled.is_some() {
            hit += 1;
            let left: usize = census(&place.cloud()).values().sum();
            // Ten of the fleet's and the foreign one before the run.
            let deleted = 11 - left;
            if deleted > 0 && deleted < deletes_in_full {
                mid += 1;
            }
        }

        let apply = place.run(trimmed, &["apply", "--yes"]);
        assert_eq!(
            apply.code,
            Some(0),
            "{case:?}: the apply after the killed run did not converge\n\
             killed run: {:?}\n{}{}\napply:\n{}{}",
            killed.stalled,
            killed.out,
            killed.err,
            apply.out,
            apply.err
        );
        let plan = place.run(trimmed, &["plan", "--detailed-exitcode"]);
        assert_eq!(
            plan.code,
            Some(0),
            "{case:?}: the plan after the recovery is not empty\n{}{}",
            plan.out,
            plan.err
        );
        // No twins: exactly the declared resources, once each, and the foreign one.
        let cloud = place.cloud();
        let mut expected: BTreeMap<(String, String, String), usize> =
            declared.iter().cloned().map(|k| (k, 1)).collect();
        expected.insert(
            (
                "aws".to_owned(),
                "objectStore".to_owned(),
                "someone-elses-bucket".to_owned(),
            ),
            1,
        );
        assert_eq!(census(&cloud), expected, "{case:?}");
        assert_eq!(
            cloud.resource(&theirs.handle).as_ref(),
            Some(&theirs),
            "{case:?}: the foreign bucket was touched"
        );
        // The records name exactly what is declared.
        let ledger = FileStore::new(place.state()).load_ledger(FLEET).unwrap();
        let mut rows: Vec<(String, String, String)> = ledger
            .rows
            .iter()
            .map(|r| (r.provider.clone(), r.kind.clone(), r.name.clone()))
            .collect();
        rows.sort();
        assert_eq!(rows, declared, "{case:?}");
    }
    (hit, mid)
}

fn report(what: &str, cases: u64, (hit, mid): (u64, u64)) {
    let _ = writeln!(
        std::io::stderr(),
        "{what}: {cases} runs, {hit} killed at their drawn call, {mid} of them between the \
         first and the last delete"
    );
}

#[test]
fn a_destroy_killed_at_any_call_is_followed_by_an_apply_that_converges() {
    let cases = 100;
    let counts = kill_and_recover(false, &["destroy", "--yes"], (cases, 0), 0x5eed_de57);
    report("killed destroys", cases, counts);
    assert!(
        counts.1 >= cases / 4,
        "too few kills landed mid-destroy to prove anything: {counts:?}"
    );
}

#[test]
fn an_apply_killed_while_pruning_is_followed_by_an_apply_that_converges() {
    let cases = 40;
    // Orphans are pruned last: the draw leaves out the first half of the calls.
    let counts = kill_and_recover(true, &["apply", "--yes"], (cases, 50), 0x0bad_cafe);
    report("killed pruning applies", cases, counts);
    assert!(
        counts.1 >= cases / 4,
        "too few kills landed mid-prune to prove anything: {counts:?}"
    );
}
