//! The fleet's command line (`check`, `plan`, `apply`, `destroy`, … ; `--help` lists
//! them), on the simulated cloud: no credentials, no services. The simulated world is
//! kept in the file `INFRA_SIM_WORLD` names, or `.infra/simulated-cloud.json`, so that
//! one run sees what the last one did.
//!
//! For real clouds, build the backends of your providers here instead (`infra-aws`:
//! `infra_aws::AwsBackend::from_env()`).

use std::process::ExitCode;

use infra_testkit::sim::{SimCloud, world_file};

fn main() -> ExitCode {
    infra_core::cli::run(consumer::fleet(), |_fleet| {
        SimCloud::backends_at(world_file())
    })
}
