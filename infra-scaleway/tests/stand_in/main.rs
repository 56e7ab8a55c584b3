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

mod containers;
mod functions;
mod iam;
mod object_storage;
mod queues;
mod rdb;
mod registry;
mod secrets;

use std::sync::Arc;
use std::time::Duration;

use infra_core::sdk::{Backend, ManualClock, Polling, Router};
use infra_scaleway::{ScalewayBackend, ScalewayConfig};
use infra_testkit::conformance::{Conformance, samples};
use infra_testkit::scaleway::{ScalewayHooks, ScalewayServer};

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
/// the S3 and SQS endpoints point at the stand-in, which serves neither), polling on a
/// manual clock.
pub(crate) fn config(server: &ScalewayServer, moto: Option<&str>) -> ScalewayConfig {
    let api = server.address();
    ScalewayConfig::stand_in(PROJECT, ORGANIZATION, &api, moto.unwrap_or(&api))
        .expect("the stand-ins are on loopback")
        .clock(Arc::new(ManualClock::new()))
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
    let server = ScalewayServer::start(PROJECT, ORGANIZATION)
        .await
        .expect("the stand-in starts");
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
    let report = Conformance::new(backend.clone() as Arc<dyn Backend>, samples)
        .regions("fr-par", Some("nl-ams"))
        .hooks(Arc::new(ScalewayHooks::new(&server)))
        .run()
        .await;
    eprintln!("{report}");
    report.assert_passed_with(true);
    server.shutdown().await;
}
