//! The GCP backend against stand-ins, with the official clients: the conformance suite
//! for every kind, the staged scenario, and the behaviours the suite does not reach.
//!
//! Cloud Storage, Secret Manager, Artifact Registry, Cloud Run, Cloud SQL, IAM and
//! Resource Manager are served by `infra_testkit::gcp::GcpServer`, started here on
//! loopback. Pub/Sub is Google's own emulator, found through `PUBSUB_EMULATOR_HOST`
//! (`.ci/run` starts it); without it the `queues` kind is left out after a loud skip,
//! which fails when `CI=true`.
//!
//! `INFRA_GCP_KINDS=secrets,iam` runs the suite on those kinds only.

mod artifacts;
mod complete_lists;
mod dead_letter;
mod iam;
mod official_client;
mod pubsub;
mod rate;
mod retry;
mod run;
mod schema;
mod secrets;
mod sql;
mod storage;
mod storm;

use std::sync::Arc;
use std::time::Duration;

use infra_core::kinds::Queues;
use infra_core::prelude::{Expr, Gcp, Partial};
use infra_core::sdk::{Backend, Clock, RetryPolicy, Router, SystemClock};
use infra_gcp::{GcpBackend, GcpConfig, Polling, Service};
use infra_testkit::conformance::{Conformance, KindSample, Variant, samples};
use infra_testkit::gcp::{GcpHooks, GcpServer};
use infra_testkit::relay::Relay;

pub(crate) const PROJECT: &str = "infra-test-project";

/// The Pub/Sub emulator's address, or `None` after a loud skip (failing under CI).
pub(crate) fn pubsub_emulator() -> Option<String> {
    match std::env::var("PUBSUB_EMULATOR_HOST")
        .ok()
        .filter(|h| !h.is_empty())
    {
        Some(host) => Some(format!("http://{}", host.trim_start_matches("http://"))),
        None => {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
            eprintln!("\n==================== SKIPPED ====================");
            eprintln!("PUBSUB_EMULATOR_HOST is not set: the `queues` kind is not tested.");
            eprintln!("Start the Pub/Sub emulator (see .ci/run) to test it.");
            eprintln!("=================================================\n");
            assert!(
                !ci,
                "CI=true and PUBSUB_EMULATOR_HOST is not set: the Pub/Sub tests did not run"
            );
            None
        }
    }
}

/// A deadline of operations short enough for a test to reach in real time.
pub(crate) const SHORT_DEADLINE: Polling = Polling {
    first: Duration::from_millis(2),
    longest: Duration::from_millis(10),
    deadline: Duration::from_millis(300),
};

/// The polling of the tests' backends: the clients' pollers wait on tokio's clock in
/// real time, so the waits are a few milliseconds.
pub(crate) const TEST_POLLING: Polling = Polling {
    first: Duration::from_millis(2),
    longest: Duration::from_millis(10),
    deadline: Duration::from_secs(30),
};

/// How long the stand-in's long-running work takes in these tests: real time, since the
/// clients' pollers wait on tokio's clock.
pub(crate) const TEST_SETTLING: Duration = Duration::from_millis(20);

/// The retry policy of the tests' backends: waits of a few milliseconds, and a budget of
/// a second, so that a fault armed for good (a read failing with 500) gives up soon.
pub(crate) fn test_retry() -> RetryPolicy {
    RetryPolicy::default()
        .with_budget(Duration::from_secs(1))
        .with_backoff(Duration::from_millis(1), Duration::from_millis(20))
        .with_request_timeout(Duration::from_secs(30))
}

/// The stand-in, on loopback, keeping the real time (tokio's: a test on a paused clock
/// pauses it too), its long-running work done [`TEST_SETTLING`] after it starts.
pub(crate) async fn stand_in() -> GcpServer {
    let server = GcpServer::start_with(PROJECT, 0, Arc::new(SystemClock::new()))
        .await
        .expect("the stand-in starts");
    server.settling(TEST_SETTLING);
    server
}

/// A backend on `server` (and the Pub/Sub emulator when there is one), waiting on the
/// stand-in's clock, polling operations every few milliseconds.
pub(crate) fn backend(server: &GcpServer, pubsub: Option<&str>) -> Arc<Router> {
    backend_polling(server, pubsub, TEST_POLLING)
}

/// [`backend`], awaiting operations by `polling`.
pub(crate) fn backend_polling(
    server: &GcpServer,
    pubsub: Option<&str>,
    polling: Polling,
) -> Arc<Router> {
    backend_at(&server.address(), server.clock(), pubsub, polling)
}

/// A backend on the stand-in at `address` (a relay in front of it, say) and the Pub/Sub
/// emulator when there is one, waiting on `clock`, awaiting operations by `polling`.
pub(crate) fn backend_at(
    address: &str,
    clock: Arc<dyn Clock>,
    pubsub: Option<&str>,
    polling: Polling,
) -> Arc<Router> {
    let mut config = GcpConfig::stand_in(PROJECT, address)
        .expect("the stand-in is on loopback")
        .clock(clock)
        .polling(polling)
        .retry_policy(test_retry());
    if let Some(pubsub) = pubsub {
        config = config
            .stand_in_endpoint(Service::PubSub, pubsub)
            .expect("the emulator is on loopback");
    }
    Arc::new(GcpBackend::new(config))
}

/// The built-in `queues` sample changes its labels with its in-place change; the Pub/Sub
/// emulator refuses every label update (400 "labels is not a known Topic field"), so
/// this one changes the ack deadline alone. Label updates of topics are checked where a
/// real project is (`tests/live.rs`); creating with labels is checked here.
fn queues_sample() -> KindSample {
    KindSample::new::<Gcp, Queues>(|f, region, name, v| {
        f.declare(
            region,
            name,
            Queues {
                fifo: Expr::lit(v == Variant::Replace),
                visibility_timeout_seconds: Partial::Known(Expr::lit(if v == Variant::Mutable {
                    60
                } else {
                    30
                })),
                retention_seconds: Partial::Known(Expr::lit(345_600)),
                dead_letter: Partial::Known(None),
                max_receive_count: Partial::Unknown,
                tags: Partial::Known(Expr::lit(
                    [("suite".to_owned(), "conformance".to_owned())].into(),
                )),
            },
        );
    })
    .mutable(true)
    .replace(true)
}

/// Relays in front of `server` and of the Pub/Sub emulator, when there is one: every
/// exchange is kept, to be held against Google's discovery documents.
async fn relays(server: &GcpServer, pubsub: Option<&str>) -> (Relay, Option<Relay>) {
    let relay = Relay::start(&server.address())
        .await
        .expect("the relay starts");
    let pubsub = match pubsub {
        Some(emulator) => Some(
            Relay::start(emulator)
                .await
                .expect("the Pub/Sub relay starts"),
        ),
        None => None,
    };
    (relay, pubsub)
}

/// Holds every exchange the relays saw against the discovery documents, checks that
/// each kind run was seen created, read, listed, updated and deleted, and publishes
/// the pairs as the evidence of `suite`.
fn hold_against_the_schema(relay: &Relay, pubsub: Option<&Relay>, kinds: &[&str], suite: &str) {
    let mut exchanges = relay.take();
    if let Some(pubsub) = pubsub {
        exchanges.extend(pubsub.take());
    }
    let held = schema::Held::check(&schema::catalogue(), &exchanges);
    held.assert_agreed();
    held.assert_covers(kinds, &["create", "read", "list", "update", "delete"]);
    eprintln!(
        "{} exchanges agree with Google's discovery documents ({} of the Pub/Sub \
         emulator's answers to IAM policy methods it does not implement left unchecked)",
        held.exchanges - held.unimplemented,
        held.unimplemented
    );
    held.publish(suite);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gcp_backend_passes_the_conformance_suite_on_the_stand_ins() {
    let server = stand_in().await;
    let pubsub = pubsub_emulator();
    let (relay, pubsub_relay) = relays(&server, pubsub.as_deref()).await;
    let pubsub_address = pubsub_relay.as_ref().map(Relay::address);
    let backend = backend_at(
        &relay.address(),
        server.clock(),
        pubsub_address.as_deref(),
        TEST_POLLING,
    );
    let only: Option<Vec<String>> = std::env::var("INFRA_GCP_KINDS")
        .ok()
        .map(|k| k.split(',').map(str::to_owned).collect());
    let mut samples = samples::builtin_for("gcp");
    samples.retain(|s| s.kind != "queues");
    samples.push(queues_sample());
    samples.retain(|s| only.as_ref().is_none_or(|o| o.iter().any(|k| k == s.kind)));
    if pubsub.is_none() {
        samples.retain(|s| s.kind != "queues");
    }
    let kinds: Vec<&str> = samples.iter().map(|s| s.kind).collect();
    let report = Conformance::new(backend.clone() as Arc<dyn Backend>, samples)
        .regions("europe-west1", Some("us-central1"))
        .hooks(Arc::new(GcpHooks::new(&server)))
        .run()
        .await;
    eprintln!("{report}");
    report.assert_passed_with(true);
    hold_against_the_schema(&relay, pubsub_relay.as_ref(), &kinds, "conformance");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_staged_scenario_runs_on_the_stand_ins_and_leaves_nothing_behind() {
    use infra_testkit::conformance::staged::{Stage, gcp_fleet, run_stages, sweep};
    let server = stand_in().await;
    let pubsub = pubsub_emulator();
    let (relay, pubsub_relay) = relays(&server, pubsub.as_deref()).await;
    let pubsub_address = pubsub_relay.as_ref().map(Relay::address);
    let backend = backend_at(
        &relay.address(),
        server.clock(),
        pubsub_address.as_deref(),
        TEST_POLLING,
    );
    let mut kinds: std::collections::BTreeSet<&'static str> =
        backend.capabilities().kinds.into_iter().collect();
    if pubsub.is_none() {
        kinds.remove("queues");
    }
    let clock = Arc::new(infra_core::sdk::ManualClock::new());
    let prefix = infra_testkit::conformance::fresh_prefix(&*clock);
    let counts = run_stages(backend.clone(), clock, |stage| {
        gcp_fleet(&prefix, &kinds, stage)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let stages: Vec<Stage> = counts.iter().map(|(s, _)| *s).collect();
    assert_eq!(stages, Stage::ALL);
    let left = sweep(&*backend, &kinds, &["europe-west1", "us-central1"], &prefix)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(left.is_empty(), "left behind: {left:#?}");
    let kinds: Vec<&str> = kinds.into_iter().collect();
    hold_against_the_schema(&relay, pubsub_relay.as_ref(), &kinds, "staged");
    server.shutdown().await;
}

/// The README's per-kind tables say, for every field, whether GCP reports it and how
/// it changes after creation; the simulated cloud's GCP rows must say the same, so that
/// a fleet planned against the simulator meets no surprise on GCP.
#[test]
fn the_readme_tables_and_the_simulated_cloud_agree_on_what_gcp_reports() {
    const KINDS: [&str; 7] = [
        "objectStore",
        "queues",
        "secrets",
        "imageRegistry",
        "compute",
        "postgres",
        "iam",
    ];
    let problems = infra_testkit::sim::readme_tables::disagreements(
        "gcp",
        &KINDS,
        include_str!("../../README.md"),
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
