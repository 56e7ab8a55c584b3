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

/// Where the world is kept when `INFRA_SIM_WORLD` is not set.
const DEFAULT_WORLD: &str = ".infra/simulated-cloud.json";

/// The world file: the one `INFRA_SIM_WORLD` names, taken as given (an empty path, or a
/// directory that does not exist, is the simulated cloud's to refuse: no write is ever
/// reported made that was not saved), or else the default, its directory made here.
fn world_file() -> PathBuf {
    if let Some(path) = std::env::var_os("INFRA_SIM_WORLD") {
        return PathBuf::from(path);
    }
    // Should this fail, the first write says why.
    let _ = std::fs::create_dir_all(".infra");
    PathBuf::from(DEFAULT_WORLD)
}

fn main() -> ExitCode {
    infra_core::cli::run(
        examples::quickstart::fleet(),
        |_fleet| match SimCloud::open(world_file()) {
            Ok(cloud) => cloud.backends(),
            Err(e) => {
                // Without its world the simulated cloud is unreachable, and says why.
                let why = format!("the simulated cloud could not open its world: {e}");
                ["aws", "gcp", "scaleway"]
                    .into_iter()
                    .fold(Backends::new(), |b, p| {
                        b.with(Arc::new(Unreachable::new(p, why.clone())))
                    })
            }
        },
    )
}
