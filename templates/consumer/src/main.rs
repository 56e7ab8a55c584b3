//! The fleet's command line (`check`, `plan`, `apply`, `destroy`, … ; `--help` lists
//! them), on the simulated cloud: no credentials, no services. The simulated world is
//! kept in the file `INFRA_SIM_WORLD` names, or `.infra/simulated-cloud.json`, so that
//! one run sees what the last one did.
//!
//! For real clouds, build the backends of your providers here instead (`infra-aws`:
//! `infra_aws::AwsBackend::from_env()`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use infra_core::{Backends, Unreachable};
use infra_testkit::sim::SimCloud;

fn main() -> ExitCode {
    infra_core::cli::run(consumer::fleet(), |_fleet| simulated_cloud())
}

/// The simulated cloud's backends, or, when its world file cannot be read, backends
/// that say so: nothing is planned or applied against a world that was not read.
fn simulated_cloud() -> Backends {
    let world = match std::env::var_os("INFRA_SIM_WORLD") {
        Some(path) => PathBuf::from(path),
        None => {
            // Should this fail, the simulated cloud's first write says why.
            let _ = std::fs::create_dir_all(".infra");
            PathBuf::from(".infra/simulated-cloud.json")
        }
    };
    match SimCloud::open(&world) {
        Ok(cloud) => cloud.backends(),
        Err(e) => {
            let why = format!("cannot open {}: {e}", world.display());
            ["aws", "gcp", "scaleway"]
                .into_iter()
                .fold(Backends::new(), |backends, provider| {
                    backends.with(Arc::new(Unreachable::new(provider, why.clone())))
                })
        }
    }
}
