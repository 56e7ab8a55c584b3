//! The conformance suite against a real Scaleway project, with the key and project of
//! the environment (`SCW_ACCESS_KEY`, `SCW_SECRET_KEY`, `SCW_DEFAULT_PROJECT_ID`, or the
//! CLI's configuration file).
//!
//! It creates real resources (then deletes them), which may cost money, so it runs only
//! with `INFRA_SCALEWAY_LIVE=yes`; otherwise it prints a loud skip and passes. It never
//! runs in CI.
//!
//! ```sh
//! INFRA_SCALEWAY_LIVE=yes cargo test -p infra-scaleway --test live -- --nocapture
//! ```
//!
//! - `INFRA_SCALEWAY_LIVE_REGION` (default `fr-par`) and
//!   `INFRA_SCALEWAY_LIVE_SECOND_REGION` (default `nl-ams`) are the regions the checks use.
//! - `INFRA_SCALEWAY_LIVE_KINDS` picks the kinds, comma-separated. By default every kind
//!   but `postgres` (billed by the hour, minutes to be ready), which runs only when named.
//!   The suite reports every kind left out as skipped, loudly.

use std::collections::BTreeSet;

use infra_scaleway::ScalewayBackend;
use infra_testkit::conformance::{Conformance, samples};

fn setting(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scaleway_backend_passes_the_conformance_suite_on_a_real_project() {
    if std::env::var("INFRA_SCALEWAY_LIVE").as_deref() != Ok("yes") {
        eprintln!("\n==================== SKIPPED ====================");
        eprintln!(
            "INFRA_SCALEWAY_LIVE is not `yes`: the conformance suite did not run on Scaleway."
        );
        eprintln!("It creates real resources; set INFRA_SCALEWAY_LIVE=yes (and a key) to run it.");
        eprintln!("=================================================\n");
        return;
    }
    let backend = ScalewayBackend::from_env().await;
    if let Some(why) = backend.unreachable() {
        panic!("INFRA_SCALEWAY_LIVE=yes, but Scaleway is unreachable: {why}");
    }
    let project = backend
        .account()
        .await
        .expect("the Account API confirms the project the suite runs in");
    let region = setting("INFRA_SCALEWAY_LIVE_REGION", "fr-par");
    let second = setting("INFRA_SCALEWAY_LIVE_SECOND_REGION", "nl-ams");
    let default_kinds: Vec<&str> = backend
        .capabilities()
        .kinds
        .into_iter()
        .filter(|k| *k != "postgres")
        .collect();
    let kinds: BTreeSet<String> = setting("INFRA_SCALEWAY_LIVE_KINDS", &default_kinds.join(","))
        .split(',')
        .map(|k| k.trim().to_owned())
        .filter(|k| !k.is_empty())
        .collect();
    eprintln!(
        "running the conformance suite in project {project}, regions {region} and {second}, \
         kinds {}",
        kinds.iter().cloned().collect::<Vec<_>>().join(", ")
    );
    let mut samples = samples::builtin_for("scaleway");
    samples.retain(|s| kinds.contains(s.kind));
    let report = Conformance::new(backend, samples)
        .regions(&region, Some(&second))
        .run()
        .await;
    eprintln!("{report}");
    report.assert_passed_with(true);
}
