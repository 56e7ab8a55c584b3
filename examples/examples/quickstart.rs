//! The quickstart fleet against the embedded simulated cloud: no credentials, no
//! services. The simulated world is kept in `.infra/simulated-cloud.json` (or the file
//! `INFRA_SIM_WORLD` names), so that `apply`, `plan` and `destroy` can follow one
//! another across runs.
//!
//! ```sh
//! cargo run -p examples --example quickstart -- apply --yes
//! cargo run -p examples --example quickstart -- plan --detailed-exitcode
//! cargo run -p examples --example quickstart -- destroy --yes
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use infra_core::{Backends, Unreachable};
use infra_testkit::sim::SimCloud;

fn main() -> ExitCode {
    let world = std::env::var_os("INFRA_SIM_WORLD")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".infra/simulated-cloud.json"));
    infra_core::cli::run(
        examples::quickstart::fleet(),
        |_fleet| match SimCloud::open(&world) {
            Ok(cloud) => cloud.backends(),
            Err(e) => {
                // Without its world the simulated cloud is unreachable, and says why.
                let why = format!(
                    "the simulated cloud could not open {}: {e}",
                    world.display()
                );
                ["aws", "gcp", "scaleway"]
                    .into_iter()
                    .fold(Backends::new(), |b, p| {
                        b.with(Arc::new(Unreachable::new(p, why.clone())))
                    })
            }
        },
    )
}
