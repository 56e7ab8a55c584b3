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

use std::process::ExitCode;

use infra_testkit::sim::{SimCloud, world_file};

fn main() -> ExitCode {
    infra_core::cli::run(examples::quickstart::fleet(), |_fleet| {
        SimCloud::backends_at(world_file())
    })
}
