//! The Scaleway backend against stand-ins: the conformance suite for every kind, the
//! staged scenario, and the behaviours the suite does not reach.
//!
//! Secret Manager, Container Registry, RDB, IAM, Serverless Functions and Containers
//! are served by `infra_testkit::scaleway::ScalewayServer`, started here on loopback.
//! Object Storage and Queues are moto's server, found through `AWS_ENDPOINT_URL`
//! (`.ci/run` starts it with `MOTO_ALLOW_NONEXISTENT_REGION=true`, without which moto
//! refuses SQS in Scaleway's regions); without it those two kinds are left out after a
//! loud skip, which fails when `CI=true`.
//!
//! `INFRA_SCALEWAY_KINDS=secrets,iam` runs the suite on those kinds only.

mod access;
mod aws_storm;
mod aws_wire;
mod containers;
mod functions;
mod iam;
mod object_storage;
mod observe;
mod queues;
mod queues_access;
mod rate;
mod rdb;
mod recorded;
mod registry;
mod secrets;
mod storm;
mod support;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use infra_core::sdk::{Backend, ManualClock, Polling, Router};
use infra_scaleway::{ScalewayBackend, ScalewayConfig};
use infra_testkit::conformance::samples;
use infra_testkit::evidence::Record;
use infra_testkit::scaleway::ScalewayServer;

pub(crate) const PROJECT: &str = "11111111-1111-4111-8111-111111111111";
pub(crate) const ORGANIZATION: &str = "22222222-2222-4222-8222-222222222222";

/// The kinds moto's server stands in for.
pub(crate) const ON_MOTO: [&str; 2] = ["objectStore", "queues"];

/// moto's address, or `None` after a loud skip (failing under CI).
pub(crate) fn moto() -> Option<String> {
    match std::env::var("AWS_ENDPOINT_URL")
        .ok()
        .filter(|h| !h.is_empty())
    {
        Some(url) => Some(url),
        None => {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
            eprintln!("\n==================== SKIPPED ====================");
            eprintln!("AWS_ENDPOINT_URL is not set: `objectStore` and `queues` are not tested.");
            eprintln!("Start moto's server with MOTO_ALLOW_NONEXISTENT_REGION=true (see .ci/run).");
            eprintln!("=================================================\n");
            assert!(
                !ci,
                "CI=true and AWS_ENDPOINT_URL is not set: the Object Storage and Queues tests \
                 did not run"
            );
            None
        }
    }
}

/// The configuration of a backend on `server` (and moto when there is one; otherwise
/// the S3 and SQS endpoints point at the stand-in, which serves neither), polling on the
/// server's clock (a manual one: the backend's polling sleeps move it, and with it the
/// statuses of the stand-in).
pub(crate) fn config(server: &ScalewayServer, moto: Option<&str>) -> ScalewayConfig {
    let api = server.address();
    ScalewayConfig::stand_in(PROJECT, ORGANIZATION, &api, moto.unwrap_or(&api))
        .expect("the stand-ins are on loopback")
        .clock(server.clock())
        .polling(Polling {
            first: Duration::from_millis(100),
            longest: Duration::from_secs(1),
            deadline: Duration::from_secs(60),
        })
}

/// A backend on `server` (and moto when there is one).
pub(crate) fn backend(server: &ScalewayServer, moto: Option<&str>) -> Arc<Router> {
    Arc::new(ScalewayBackend::new(config(server, moto)))
}

/// The kinds named by `INFRA_SCALEWAY_KINDS`, or `None` for all.
pub(crate) fn only() -> Option<Vec<String>> {
    std::env::var("INFRA_SCALEWAY_KINDS")
        .ok()
        .filter(|k| !k.is_empty())
        .map(|k| k.split(',').map(str::to_owned).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scaleway_backend_passes_the_conformance_suite_on_the_stand_ins() {
    let server = support::stand_in().await;
    let moto = moto();
    let backend = backend(&server, moto.as_deref());
    let only = only();
    let kinds = backend.capabilities().kinds;
    let mut samples = samples::builtin_for("scaleway");
    samples.retain(|s| kinds.contains(s.kind));
    samples.retain(|s| only.as_ref().is_none_or(|o| o.iter().any(|k| k == s.kind)));
    if moto.is_none() {
        samples.retain(|s| !ON_MOTO.contains(&s.kind));
    }
    if samples.is_empty() {
        eprintln!("no Scaleway kind is realised yet, or none was asked for");
        server.shutdown().await;
        return;
    }
    let report = support::passes_conformance(&server, backend, samples).await;
    if moto.is_some() {
        // Object Storage and Queues ran on moto's S3 and SQS.
        report
            .evidence("scaleway", Record::Moto, "moto-conformance", |k| {
                ON_MOTO.contains(&k)
            })
            .publish();
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_staged_scenario_runs_on_the_stand_ins_and_leaves_nothing_behind() {
    use infra_testkit::conformance::staged::{EMPTY_ZIP, Stage, run_stages, scaleway_fleet, sweep};
    let server = support::stand_in().await;
    let moto = moto();
    let backend = backend(&server, moto.as_deref());
    let only = only();
    let mut kinds: std::collections::BTreeSet<&'static str> =
        backend.capabilities().kinds.into_iter().collect();
    kinds.retain(|k| only.as_ref().is_none_or(|o| o.iter().any(|x| x == k)));
    if moto.is_none() {
        kinds.retain(|k| !ON_MOTO.contains(k));
    }
    let dir = tempfile::tempdir().expect("a scratch directory");
    let archive = dir.path().join("api.zip");
    std::fs::write(&archive, EMPTY_ZIP).expect("the archive is written");
    let archive = archive.to_string_lossy().into_owned();
    let clock = Arc::new(ManualClock::new());
    let prefix = infra_testkit::conformance::fresh_prefix(&*clock);
    let counts = run_stages(backend.clone(), clock, |stage| {
        scaleway_fleet(&prefix, &kinds, stage, &archive)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let stages: Vec<Stage> = counts.iter().map(|(s, _)| *s).collect();
    assert_eq!(stages, Stage::ALL);
    let left = sweep(&*backend, &kinds, &["fr-par", "nl-ams"], &prefix)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(left.is_empty(), "left behind: {left:#?}");
    server.shutdown().await;
}

/// The README's per-kind tables say, for every field, whether Scaleway reports it and how
/// it changes after creation; the simulated cloud's Scaleway rows must say the same, so that
/// a fleet planned against the simulator meets no surprise on Scaleway.
#[test]
fn the_readme_tables_and_the_simulated_cloud_agree_on_what_scaleway_reports() {
    const KINDS: [&str; 11] = [
        "objectStore",
        "queues",
        "secrets",
        "imageRegistry",
        "postgres",
        "iam",
        "functionNamespace",
        "function",
        "compute",
        "containerNamespace",
        "container",
    ];
    let problems = infra_testkit::sim::readme_tables::disagreements(
        "scaleway",
        &KINDS,
        include_str!("../../README.md"),
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
