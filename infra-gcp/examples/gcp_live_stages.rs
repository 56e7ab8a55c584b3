//! The staged scenario against a real Google Cloud project: full → ramp-up → ramp-down
//! → trimmed → empty, then a sweep that nothing with the run's prefix is left.
//!
//! It creates real resources, which cost money (a Cloud SQL instance takes minutes and
//! is billed by the hour), so it runs only when asked twice: by running this example,
//! and with `INFRA_GCP_LIVE=yes` in the environment. The project and credentials come
//! the standard way (`GOOGLE_CLOUD_PROJECT`, application default credentials). Never
//! run in CI. `INFRA_GCP_LIVE_KINDS=objectStore,queues,secrets` limits the kinds
//! (default: all but `postgres` and `compute`, which are billed by the hour or need
//! source in Cloud Storage).
//!
//! ```sh
//! INFRA_GCP_LIVE=yes GOOGLE_CLOUD_PROJECT=my-sandbox cargo run -p infra-gcp --example gcp_live_stages
//! ```

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::sync::Arc;

use infra_core::sdk::SystemClock;
use infra_gcp::GcpBackend;
use infra_testkit::conformance::staged::{gcp_fleet, live};

#[tokio::main]
async fn main() -> ExitCode {
    if std::env::var("INFRA_GCP_LIVE").as_deref() != Ok("yes") {
        eprintln!("==================== SKIPPED ====================");
        eprintln!("INFRA_GCP_LIVE is not `yes`: nothing was created. This example creates");
        eprintln!("real resources in the project of GOOGLE_CLOUD_PROJECT; see its header.");
        eprintln!("=================================================");
        return ExitCode::SUCCESS;
    }
    let backend = GcpBackend::from_env().await;
    if let Some(why) = backend.unreachable() {
        eprintln!("Google Cloud cannot be reached: {why}");
        return ExitCode::FAILURE;
    }
    match backend.account().await {
        Ok(project) => println!("project: {project}"),
        Err(e) => {
            eprintln!("the project check failed: {e}");
            return ExitCode::FAILURE;
        }
    }
    let wanted: Option<BTreeSet<String>> = std::env::var("INFRA_GCP_LIVE_KINDS")
        .ok()
        .map(|k| k.split(',').map(|s| s.trim().to_owned()).collect());
    let kinds: BTreeSet<&'static str> = backend
        .capabilities()
        .kinds
        .into_iter()
        .filter(|k| match &wanted {
            Some(w) => w.contains(*k),
            None => !matches!(*k, "postgres" | "compute"),
        })
        .collect();
    let clock = Arc::new(SystemClock::new());
    let fleet = |prefix: &str, stage| gcp_fleet(prefix, &kinds, stage);
    match live(backend.clone(), clock, &kinds, &["europe-west1"], fleet).await {
        Ok((prefix, counts)) => {
            for (stage, c) in counts {
                println!("{}: {c:?}", stage.name());
            }
            println!("nothing with the prefix {prefix} is left");
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("{why}");
            ExitCode::FAILURE
        }
    }
}
