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
mod iam;
mod pubsub;
mod run;
mod secrets;
mod sql;
mod storage;

use std::sync::Arc;
use std::time::Duration;

use infra_core::sdk::{Backend, ManualClock, Router};
use infra_gcp::{GcpBackend, GcpConfig, Polling, Service};
use infra_testkit::conformance::{Conformance, samples};
use infra_testkit::gcp::{GcpHooks, GcpServer};

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

/// A backend on `server` (and the Pub/Sub emulator when there is one), polling
/// operations on a manual clock.
pub(crate) fn backend(server: &GcpServer, pubsub: Option<&str>) -> Arc<Router> {
    let mut config = GcpConfig::stand_in(PROJECT, &server.address())
        .expect("the stand-in is on loopback")
        .clock(Arc::new(ManualClock::new()))
        .polling(Polling {
            first: Duration::from_millis(100),
            longest: Duration::from_secs(1),
            deadline: Duration::from_secs(60),
        });
    if let Some(pubsub) = pubsub {
        config = config
            .stand_in_endpoint(Service::PubSub, pubsub)
            .expect("the emulator is on loopback");
    }
    Arc::new(GcpBackend::new(config))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gcp_backend_passes_the_conformance_suite_on_the_stand_ins() {
    let server = GcpServer::start(PROJECT)
        .await
        .expect("the stand-in starts");
    let pubsub = pubsub_emulator();
    let backend = backend(&server, pubsub.as_deref());
    let only: Option<Vec<String>> = std::env::var("INFRA_GCP_KINDS")
        .ok()
        .map(|k| k.split(',').map(str::to_owned).collect());
    let mut samples = samples::builtin_for("gcp");
    samples.retain(|s| only.as_ref().is_none_or(|o| o.iter().any(|k| k == s.kind)));
    if pubsub.is_none() {
        samples.retain(|s| s.kind != "queues");
    }
    let report = Conformance::new(backend.clone() as Arc<dyn Backend>, samples)
        .regions("europe-west1", Some("us-central1"))
        .hooks(Arc::new(GcpHooks::new(&server)))
        .skip_check(
            "queues",
            "update_changes_only_mutable_fields",
            "the Pub/Sub emulator refuses to update labels (400 \"labels is not a known \
             Topic field\"), and the sample's in-place change includes its labels",
        )
        .run()
        .await;
    eprintln!("{report}");
    report.assert_passed_with(true);
    server.shutdown().await;
}
