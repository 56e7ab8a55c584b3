//! The conformance suite against a real Google Cloud project, with the credentials of
//! the environment (application default credentials) and `GOOGLE_CLOUD_PROJECT`.
//!
//! It creates real resources (then deletes them), which may cost money, so it runs only
//! with `INFRA_GCP_LIVE=yes`; otherwise it prints a loud skip and passes. It never runs
//! in CI.
//!
//! ```sh
//! INFRA_GCP_LIVE=yes GOOGLE_CLOUD_PROJECT=my-sandbox cargo test -p infra-gcp --test live -- --nocapture
//! ```
//!
//! - `INFRA_GCP_LIVE_REGION` (default `europe-west1`) and `INFRA_GCP_LIVE_SECOND_REGION`
//!   (default `us-central1`) are the regions the checks use.
//! - `INFRA_GCP_LIVE_KINDS` picks the kinds, comma-separated. By default the ones that
//!   cost next to nothing and are quick: `objectStore`, `queues`, `secrets`,
//!   `imageRegistry` and `iam`. `postgres` (billed by the hour, minutes to create) and
//!   `compute` (its sample's source archive `gs://conformance-code/app.zip` must exist
//!   in the project) run only when named. The suite reports every kind left out as
//!   skipped, loudly.

use std::collections::BTreeSet;

use infra_gcp::GcpBackend;
use infra_testkit::conformance::{Conformance, samples};

/// The kinds that run when `INFRA_GCP_LIVE_KINDS` does not say.
const CHEAP_KINDS: &[&str] = &["objectStore", "queues", "secrets", "imageRegistry", "iam"];

fn setting(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gcp_backend_passes_the_conformance_suite_on_a_real_project() {
    if std::env::var("INFRA_GCP_LIVE").as_deref() != Ok("yes") {
        eprintln!("\n==================== SKIPPED ====================");
        eprintln!(
            "INFRA_GCP_LIVE is not `yes`: the conformance suite did not run on Google Cloud."
        );
        eprintln!("It creates real resources; set INFRA_GCP_LIVE=yes (and a project) to run it.");
        eprintln!("=================================================\n");
        return;
    }
    let backend = GcpBackend::from_env().await;
    if let Some(why) = backend.unreachable() {
        panic!("INFRA_GCP_LIVE=yes, but Google Cloud is unreachable: {why}");
    }
    let project = backend
        .account()
        .await
        .expect("Resource Manager confirms the project the suite runs in");
    let region = setting("INFRA_GCP_LIVE_REGION", "europe-west1");
    let second = setting("INFRA_GCP_LIVE_SECOND_REGION", "us-central1");
    let kinds: BTreeSet<String> = setting("INFRA_GCP_LIVE_KINDS", &CHEAP_KINDS.join(","))
        .split(',')
        .map(|k| k.trim().to_owned())
        .filter(|k| !k.is_empty())
        .collect();
    eprintln!(
        "running the conformance suite in project {project}, regions {region} and {second}, \
         kinds {}",
        kinds.iter().cloned().collect::<Vec<_>>().join(", ")
    );
    let mut samples = samples::builtin_for("gcp");
    samples.retain(|s| kinds.contains(s.kind));
    let report = Conformance::new(backend, samples)
        .regions(&region, Some(&second))
        .run()
        .await;
    eprintln!("{report}");
    report.assert_passed_with(true);
}
