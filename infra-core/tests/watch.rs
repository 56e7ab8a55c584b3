//! Watching for drift on a manual clock: a change made out of band between two
//! intervals is one line per field, nothing is written unless asked, an unreachable
//! backend is never drift, and a stop is obeyed between rounds.

mod support;

use std::sync::Arc;
use std::time::Duration;

use infra_core::engine::{Engine, LockHolder, ManualClock, Options};
use infra_core::kinds::{Rule, SecurityGroup};
use infra_core::prelude::{AwsRegion, Backends, Expr, Fleet, Partial};
use infra_core::sdk::Unreachable;
use infra_core::watch::{Counters, Round, WatchOptions, watch};
use infra_testkit::sim::SimCloud;
use serde_json::json;
use support::console::answering;

const MINUTE: Duration = Duration::from_secs(60);

fn fleet() -> Fleet {
    let mut f = Fleet::builder("watch");
    f.declare(
        AwsRegion::EuWest3,
        "web",
        SecurityGroup {
            description: "watched".into(),
            vpc_id: Partial::Unknown,
            ingress: Expr::lit([Rule::tcp(443, "0.0.0.0/0")].into()),
            egress: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    f.build().unwrap()
}

async fn applied(seed: u64) -> (SimCloud, Engine, String) {
    let cloud = support::cloud(seed);
    let (engine, _) = support::engine_in_memory(&cloud);
    let outcome = engine
        .apply(&fleet().plan(), &Options::default())
        .await
        .unwrap();
    assert!(outcome.is_success());
    let handle = cloud.find("aws", "securityGroup", "web")[0].handle.clone();
    cloud.clear_calls();
    (cloud, engine, handle)
}

/// Runs a watch, making `between` happen after the first round.
async fn rounds(
    engine: &Engine,
    options: WatchOptions,
    clock: &ManualClock,
    counters: &Counters,
    between: impl Fn(),
) -> Vec<Round> {
    let mut seen = Vec::new();
    watch(
        engine,
        &fleet(),
        &options,
        clock,
        counters,
        std::future::pending(),
        |r| {
            if r.number == 1 {
                between();
            }
            seen.push(r.clone());
        },
    )
    .await
    .expect("the records are readable");
    seen
}

const SSH: &str = r#"[{"cidr":"0.0.0.0/0","fromPort":22,"protocol":"tcp","toPort":22}]"#;
const HTTPS: &str = r#"[{"protocol":"tcp","fromPort":443,"toPort":443,"cidr":"0.0.0.0/0"}]"#;

#[tokio::test]
async fn a_change_between_two_intervals_is_one_line_per_field_and_nothing_is_written() {
    let (cloud, engine, handle) = applied(51).await;
    let clock = ManualClock::new();
    let counters = Counters::default();
    let seen = rounds(
        &engine,
        WatchOptions::every(MINUTE).rounds(Some(2)),
        &clock,
        &counters,
        || {
            cloud.set_field(&handle, "ingress", serde_json::from_str(SSH).unwrap());
        },
    )
    .await;
    assert_eq!(seen.len(), 2);
    assert!(seen[0].lines.is_empty(), "{:?}", seen[0].lines);
    assert_eq!(
        seen[1].lines,
        [format!(
            "drift: aws/securityGroup/web (eu-west-3) ingress: {SSH} → {HTTPS}"
        )]
    );
    assert_eq!((seen[1].drifted, seen[1].applied), (1, None));
    assert_eq!(clock_now(&clock), MINUTE, "one interval between two rounds");
    assert!(cloud.writes().is_empty(), "{:?}", cloud.writes());
    let Some(metrics) = exposed(&counters, 1_000.0) else {
        return;
    };
    assert!(
        metrics.contains("infra_watch_rounds_total{fleet=\"watch\"} 2"),
        "{metrics}"
    );
    // The gauges: the last round's states, and when a round last saw everything (the
    // second, one minute after the clock's origin).
    for (state, n) in [
        ("in_sync", 0),
        ("drifted", 1),
        ("not_observable", 0),
        ("skipped", 0),
    ] {
        let line = format!("infra_watch_resources{{fleet=\"watch\",state=\"{state}\"}} {n}\n");
        assert!(metrics.contains(&line), "{line}{metrics}");
    }
    assert!(
        metrics.contains(
            "infra_watch_last_successful_observation_timestamp_seconds{fleet=\"watch\"} 1060.0\n"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("infra_watch_drifted_resources_total{fleet=\"watch\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("infra_watch_applies_total{fleet=\"watch\"} 0"),
        "{metrics}"
    );
}

/// The counts as `--metrics-addr` serves them, or `None` in a build without the feature
/// `metrics` (which `the_metrics_need_the_metrics_feature` says out loud, and fails
/// under `CI=true`).
fn exposed(counters: &Counters, wall_at_origin: f64) -> Option<String> {
    #[cfg(feature = "metrics")]
    {
        Some(counters.render("watch", wall_at_origin))
    }
    #[cfg(not(feature = "metrics"))]
    {
        let _ = (counters, wall_at_origin);
        None
    }
}

#[cfg(not(feature = "metrics"))]
#[test]
fn the_metrics_need_the_metrics_feature() {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true but infra-core was built without `metrics`: the tests of its metrics did \
         not run; run `cargo test --workspace` or add `--features metrics`"
    );
    eprintln!("!!! SKIPPED: the metrics tests — build infra-core with `--features metrics` !!!");
}

fn clock_now(clock: &ManualClock) -> Duration {
    use infra_core::engine::Clock;
    clock.now()
}

#[tokio::test]
async fn with_apply_the_drift_is_repaired_at_the_next_round() {
    let (cloud, engine, handle) = applied(52).await;
    let clock = ManualClock::new();
    let counters = Counters::default();
    let seen = rounds(
        &engine,
        WatchOptions::every(MINUTE).apply(true).rounds(Some(3)),
        &clock,
        &counters,
        || {
            cloud.set_field(&handle, "ingress", serde_json::from_str(SSH).unwrap());
        },
    )
    .await;
    assert_eq!(seen[1].applied, Some(true), "{:?}", seen[1].lines);
    assert!(seen[2].lines.is_empty(), "{:?}", seen[2].lines);
    assert_eq!(
        cloud.find("aws", "securityGroup", "web")[0].config["ingress"],
        json!([{"protocol": "tcp", "fromPort": 443, "toPort": 443, "cidr": "0.0.0.0/0"}])
    );
}

#[tokio::test]
async fn an_unreachable_backend_is_reported_as_unreachable_never_as_drift() {
    let (_cloud, engine, _) = applied(53).await;
    let unreachable = Engine::new(
        Backends::new().with(Arc::new(Unreachable::new(
            "aws",
            "no credentials were found",
        ))),
        Arc::clone(engine.store()),
    );
    let clock = ManualClock::new();
    let counters = Counters::default();
    let seen = rounds(
        &unreachable,
        WatchOptions::every(MINUTE).apply(true).rounds(Some(1)),
        &clock,
        &counters,
        || {},
    )
    .await;
    assert_eq!(seen[0].drifted, 0);
    assert_eq!(seen[0].applied, None);
    assert_eq!(seen[0].lines.len(), 1, "{:?}", seen[0].lines);
    assert!(
        seen[0].lines[0].starts_with("unreachable: "),
        "{:?}",
        seen[0].lines
    );
    assert!(!seen[0].lines[0].contains("drift"), "{:?}", seen[0].lines);
    // A round that could not look is never a successful observation.
    let Some(metrics) = exposed(&counters, 1_000.0) else {
        return;
    };
    assert!(
        metrics.contains(
            "infra_watch_last_successful_observation_timestamp_seconds{fleet=\"watch\"} 0.0\n"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("infra_watch_unreachable_resources_total{fleet=\"watch\"} 1\n"),
        "{metrics}"
    );
}

/// The lock is taken for the apply alone: free between rounds, and a round whose apply
/// finds it held by another run says so, writes nothing, and the next round repairs.
#[tokio::test]
async fn with_apply_the_lock_is_held_for_the_apply_alone() {
    let (cloud, engine, handle) = applied(55).await;
    cloud.set_field(&handle, "ingress", serde_json::from_str(SSH).unwrap());
    let clock = ManualClock::new();
    let counters = Counters::default();
    let store = Arc::clone(engine.store());
    let other = std::sync::Mutex::new(Some(
        store
            .try_lock("watch", &LockHolder::this_process("apply"))
            .expect("the lock is free before the watch"),
    ));
    let mut seen = Vec::new();
    watch(
        &engine,
        &fleet(),
        &WatchOptions::every(MINUTE).apply(true).rounds(Some(3)),
        &clock,
        &counters,
        std::future::pending(),
        |r| {
            if r.number == 1 {
                assert!(cloud.writes().is_empty(), "{:?}", cloud.writes());
                // The other run ends.
                other.lock().unwrap().take();
            }
            // Between rounds, whatever the round did, the lock is free.
            drop(
                store
                    .try_lock("watch", &LockHolder::this_process("refresh"))
                    .unwrap_or_else(|e| panic!("after round {}: {e}", r.number)),
            );
            seen.push(r.clone());
        },
    )
    .await
    .expect("the records are readable");
    assert_eq!(seen[0].applied, None, "{:?}", seen[0].lines);
    assert_eq!(seen[0].drifted, 1);
    assert!(
        seen[0]
            .lines
            .iter()
            .any(|l| l.starts_with("apply skipped this round: ") && l.contains("apply")),
        "{:?}",
        seen[0].lines
    );
    assert_eq!(seen[1].applied, Some(true), "{:?}", seen[1].lines);
    assert!(seen[2].lines.is_empty(), "{:?}", seen[2].lines);
    assert_eq!(
        cloud.find("aws", "securityGroup", "web")[0].config["ingress"],
        json!([{"protocol": "tcp", "fromPort": 443, "toPort": 443, "cidr": "0.0.0.0/0"}])
    );
    let Some(metrics) = exposed(&counters, 0.0) else {
        return;
    };
    assert!(
        metrics.contains("infra_watch_resources{fleet=\"watch\",state=\"in_sync\"} 1\n"),
        "{metrics}"
    );
}

/// A backend that stops answering between two rounds (here: its access denied, while
/// the resource also drifts out of band) is reported as not observable, never as
/// drift, and the last successful observation stays the first round's.
#[tokio::test]
async fn a_backend_that_becomes_unreachable_is_never_drift() {
    let (cloud, engine, handle) = applied(57).await;
    let clock = ManualClock::new();
    let counters = Counters::default();
    let seen = rounds(
        &engine,
        WatchOptions::every(MINUTE).apply(true).rounds(Some(2)),
        &clock,
        &counters,
        || {
            cloud.set_field(&handle, "ingress", serde_json::from_str(SSH).unwrap());
            cloud.deny("aws", None, None);
        },
    )
    .await;
    assert!(seen[0].lines.is_empty(), "{:?}", seen[0].lines);
    let second = &seen[1];
    assert_eq!((second.drifted, second.unreachable), (0, 1), "{second:?}");
    assert_eq!(second.applied, None, "nothing is applied on a blind plan");
    assert!(
        second.lines.iter().all(|l| !l.starts_with("drift")),
        "{:?}",
        second.lines
    );
    assert!(cloud.writes().is_empty(), "{:?}", cloud.writes());
    let Some(metrics) = exposed(&counters, 1_000.0) else {
        return;
    };
    assert!(
        metrics.contains("infra_watch_resources{fleet=\"watch\",state=\"not_observable\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            "infra_watch_last_successful_observation_timestamp_seconds{fleet=\"watch\"} 1000.0\n"
        ),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_stop_is_obeyed_between_rounds() {
    let (_cloud, engine, _) = applied(54).await;
    let clock = ManualClock::new();
    let counters = Counters::default();
    let mut seen = 0;
    watch(
        &engine,
        &fleet(),
        &WatchOptions::every(MINUTE),
        &clock,
        &counters,
        std::future::ready(()),
        |_| seen += 1,
    )
    .await
    .expect("the records are readable");
    assert_eq!(seen, 1, "the round under way finishes; no other starts");
    assert_eq!(clock_now(&clock), Duration::ZERO);
}

#[tokio::test]
async fn the_watch_verb_prints_each_rounds_drift_and_writes_nothing() {
    let cloud = support::cloud(55);
    let mut s = answering(false, true);
    let (code, _, err) = s.run(Ok(fleet()), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0, "{err}");
    let handle = cloud.find("aws", "securityGroup", "web")[0].handle.clone();
    cloud.set_field(&handle, "ingress", serde_json::from_str(SSH).unwrap());
    cloud.clear_calls();
    let (code, out, err) = s
        .run(
            Ok(fleet()),
            &cloud,
            &[
                "watch",
                "--every",
                "1ms",
                "--rounds",
                "2",
                "--metrics-addr",
                "127.0.0.1:0",
            ],
        )
        .await;
    if cfg!(not(feature = "metrics")) {
        // No server in this build: said before the first round, and nothing runs.
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("feature `metrics`"), "{err}");
        assert!(out.is_empty() && cloud.calls().is_empty(), "{out}");
        return;
    }
    assert_eq!(code, 0, "{err}");
    let line = format!("drift: aws/securityGroup/web (eu-west-3) ingress: {SSH} → {HTTPS}\n");
    assert_eq!(out, format!("{line}{line}"));
    assert!(
        err.contains("serving Prometheus counts at http://127.0.0.1:"),
        "{err}"
    );
    assert!(err.contains("round 2: 1 drifted, 0 not looked at"), "{err}");
    assert!(cloud.writes().is_empty(), "{:?}", cloud.writes());
}

/// The names of every metric `--metrics-addr` serves, with their types: dashboards and
/// alerts name them, so they are kept from release to release.
#[cfg(feature = "metrics")]
const METRIC_NAMES: [(&str, &str); 7] = [
    ("infra_watch_rounds_total", "counter"),
    ("infra_watch_drifted_resources_total", "counter"),
    ("infra_watch_unreachable_resources_total", "counter"),
    ("infra_watch_applies_total", "counter"),
    ("infra_watch_failed_applies_total", "counter"),
    ("infra_watch_resources", "gauge"),
    (
        "infra_watch_last_successful_observation_timestamp_seconds",
        "gauge",
    ),
];

/// The watch verb serves its counts while clients that connect and say nothing hold
/// connections open: a scrape is answered all the same.
#[cfg(feature = "metrics")]
#[tokio::test]
async fn the_metrics_address_serves_the_counts_while_watching() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let cloud = support::cloud(56);
    let mut s = answering(false, true);
    let (code, _, err) = s.run(Ok(fleet()), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0, "{err}");
    // A free port on loopback, let go for the watch to take.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let args = [
        "watch",
        "--every",
        "1s",
        "--rounds",
        "2",
        "--metrics-addr",
        &addr,
    ];
    let watching = s.run(Ok(fleet()), &cloud, &args);
    let get = async |path: &str| {
        let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        stream
            .write_all(
                format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes(),
            )
            .await
            .unwrap();
        let mut body = String::new();
        stream.read_to_string(&mut body).await.unwrap();
        body
    };
    let scrape = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Two clients that connect and send nothing, kept open during the scrapes.
        let silent = (
            tokio::net::TcpStream::connect(&addr).await.unwrap(),
            tokio::net::TcpStream::connect(&addr).await.unwrap(),
        );
        // A guard against a hang (a server that serves one connection at a time waits
        // on the silent ones for ever), not a measurement.
        let answers = tokio::time::timeout(Duration::from_secs(60), async {
            (get("/metrics").await, get("/").await)
        })
        .await
        .expect("a scrape is answered while silent clients are connected");
        drop(silent);
        answers
    };
    let ((code, _, err), (body, elsewhere)) = tokio::join!(watching, scrape);
    assert_eq!(code, 0, "{err}");
    assert!(
        elsewhere.starts_with("HTTP/1.1 404 Not Found"),
        "{elsewhere}"
    );
    assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
    assert!(
        body.contains("content-type: text/plain; version=0.0.4"),
        "{body}"
    );
    for (name, kind) in METRIC_NAMES {
        assert!(
            body.contains(&format!("\n# TYPE {name} {kind}\n")),
            "{name}: {body}"
        );
        assert!(
            body.contains(&format!("\n{name}{{fleet=\"watch\"")),
            "{name}: {body}"
        );
    }
    assert!(
        body.contains("infra_watch_rounds_total{fleet=\"watch\"} 1\n"),
        "{body}"
    );
    assert!(
        body.contains("infra_watch_resources{fleet=\"watch\",state=\"in_sync\"} 1\n"),
        "{body}"
    );
    // The concurrency window of the one API called: at the ceiling, nothing throttled.
    let window = "{fleet=\"watch\",provider=\"aws\",region=\"eu-west-3\",api=\"securityGroup\"}";
    assert!(
        body.contains("\n# TYPE infra_concurrency_limit gauge\n")
            && body.contains(&format!("\ninfra_concurrency_limit{window} 16\n")),
        "{body}"
    );
    assert!(
        body.contains(&format!("\ninfra_throttled_calls_total{window} 0\n")),
        "{body}"
    );
    // The first round saw everything: its time is a wall-clock time, this century's.
    let at: f64 = body
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "infra_watch_last_successful_observation_timestamp_seconds{fleet=\"watch\"} ",
            )
        })
        .unwrap_or_else(|| panic!("no timestamp: {body}"))
        .parse()
        .unwrap();
    assert!((1.7e9..4.1e9).contains(&at), "{at}");
}

/// The whole exposition of known counts, names and values pinned.
#[cfg(feature = "metrics")]
#[test]
fn the_exposition_keeps_every_name() {
    let counters = Counters::default();
    insta::assert_snapshot!(counters.render("watch", 1_000.0));
}

/// An interval of zero would plan without pause, and zero rounds would be none: both
/// are refused before anything runs.
#[tokio::test]
async fn a_zero_interval_and_zero_rounds_are_refused() {
    let cloud = support::cloud(58);
    let mut s = answering(false, true);
    for (args, why) in [
        (
            &["watch", "--every", "0s"][..],
            "\"0s\": the interval must be longer than zero",
        ),
        (&["watch", "--every", "0"][..], "must be longer than zero"),
        (&["watch", "--every", "1m", "--rounds", "0"][..], "--rounds"),
    ] {
        let (code, out, err) = s.run(Ok(fleet()), &cloud, args).await;
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    assert!(cloud.calls().is_empty(), "{:?}", cloud.calls());
}

/// Like a plan, a watch whose last round could not look at everything exits 1.
#[tokio::test]
async fn the_watch_verb_exits_1_when_its_last_round_could_not_look() {
    let cloud = support::cloud(59);
    let mut s = answering(false, true);
    let (code, _, err) = s.run(Ok(fleet()), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0, "{err}");
    cloud.deny("aws", None, None);
    let args = ["watch", "--every", "1s", "--rounds", "1"];
    let (code, out, err) = s.run(Ok(fleet()), &cloud, &args).await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("round 1: 0 drifted, 1 not looked at"), "{err}");
    // A read refused is a failure to look, never drift.
    assert!(
        out.starts_with("failed: aws/securityGroup/web") && out.contains("denied"),
        "{out}"
    );
    assert!(!out.contains("drift"), "{out}");
}
