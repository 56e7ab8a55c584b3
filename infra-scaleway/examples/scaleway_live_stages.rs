//! The staged scenario against a real Scaleway project: full → ramp-up → ramp-down →
//! trimmed → empty, then a sweep that nothing with the run's prefix is left.
//!
//! It creates real resources, which cost money (a database is billed by the hour and
//! takes minutes to be ready), so it runs only when asked twice: by running this
//! example, and with `INFRA_SCALEWAY_LIVE=yes` in the environment. The key and project
//! come as Scaleway's tools read them (`SCW_ACCESS_KEY`, `SCW_SECRET_KEY`,
//! `SCW_DEFAULT_PROJECT_ID`, or the CLI's configuration file). Never run in CI.
//! `INFRA_SCALEWAY_LIVE_KINDS=objectStore,secrets,iam` limits the kinds (default: all
//! but `postgres`, billed by the hour). `compute` deploys the empty archive
//! `EMPTY_ZIP`, written to a scratch file.
//!
//! ```sh
//! INFRA_SCALEWAY_LIVE=yes cargo run -p infra-scaleway --example scaleway_live_stages
//! ```

use std::collections::BTreeSet;
use std::process::ExitCode;
use std::sync::Arc;

use infra_core::sdk::SystemClock;
use infra_scaleway::ScalewayBackend;
use infra_testkit::conformance::staged::{EMPTY_ZIP, live, scaleway_fleet};

#[tokio::main]
async fn main() -> ExitCode {
    if std::env::var("INFRA_SCALEWAY_LIVE").as_deref() != Ok("yes") {
        eprintln!("==================== SKIPPED ====================");
        eprintln!("INFRA_SCALEWAY_LIVE is not `yes`: nothing was created. This example");
        eprintln!("creates real resources in your Scaleway project; see its header.");
        eprintln!("=================================================");
        return ExitCode::SUCCESS;
    }
    let backend = ScalewayBackend::from_env().await;
    if let Some(why) = backend.unreachable() {
        eprintln!("Scaleway cannot be reached: {why}");
        return ExitCode::FAILURE;
    }
    match backend.account().await {
        Ok(project) => println!("project: {project}"),
        Err(e) => {
            eprintln!("the project check failed: {e}");
            return ExitCode::FAILURE;
        }
    }
    let wanted: Option<BTreeSet<String>> = std::env::var("INFRA_SCALEWAY_LIVE_KINDS")
        .ok()
        .map(|k| k.split(',').map(|s| s.trim().to_owned()).collect());
    let kinds: BTreeSet<&'static str> = backend
        .capabilities()
        .kinds
        .into_iter()
        .filter(|k| match &wanted {
            Some(w) => w.contains(*k),
            None => *k != "postgres",
        })
        .collect();
    let scratch = std::env::temp_dir().join(format!("infra-live-{}.zip", std::process::id()));
    if let Err(e) = std::fs::write(&scratch, EMPTY_ZIP) {
        eprintln!("the archive {} cannot be written: {e}", scratch.display());
        return ExitCode::FAILURE;
    }
    let archive = scratch.to_string_lossy().into_owned();
    let clock = Arc::new(SystemClock::new());
    let fleet = |prefix: &str, stage| scaleway_fleet(prefix, &kinds, stage, &archive);
    let outcome = live(backend.clone(), clock, &kinds, &["fr-par"], fleet).await;
    let _ = std::fs::remove_file(&scratch);
    match outcome {
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
