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
//!
//! Credentials in the environment never send it to a real cloud. Only an explicit
//! opt-in does: `INFRA_QUICKSTART_CLOUDS=real` in a build with the `real-clouds`
//! feature builds the real AWS and Scaleway backends from their standard sources
//! (`cargo run -p examples --features real-clouds --example quickstart -- plan`).

use std::process::ExitCode;

use infra_testkit::sim::{SimCloud, world_file};

/// Where the quickstart's resources go.
enum Clouds {
    /// The embedded simulated cloud (the default).
    Simulated,
    /// Real AWS and Scaleway accounts, from their standard credential sources.
    Real,
}

/// `INFRA_QUICKSTART_CLOUDS`: unset, empty or `simulated`, or `real`.
fn clouds() -> Result<Clouds, String> {
    match std::env::var("INFRA_QUICKSTART_CLOUDS").as_deref() {
        Err(_) | Ok("" | "simulated") => Ok(Clouds::Simulated),
        Ok("real") => Ok(Clouds::Real),
        Ok(other) => Err(format!(
            "INFRA_QUICKSTART_CLOUDS is {other:?}: it is `simulated` (the default) or `real`"
        )),
    }
}

fn main() -> ExitCode {
    match clouds() {
        Ok(Clouds::Simulated) => infra_core::cli::run(examples::quickstart::fleet(), |_fleet| {
            SimCloud::backends_at(world_file())
        }),
        Ok(Clouds::Real) => real(),
        Err(why) => {
            eprintln!("error: {why}");
            ExitCode::from(2)
        }
    }
}

#[cfg(feature = "real-clouds")]
fn real() -> ExitCode {
    use infra_core::prelude::Backends;
    infra_core::cli::run_async(examples::quickstart::fleet(), async |_fleet| {
        Backends::new()
            .with(infra_aws::AwsBackend::from_env().await)
            .with(infra_scaleway::ScalewayBackend::from_env().await)
    })
}

#[cfg(not(feature = "real-clouds"))]
fn real() -> ExitCode {
    eprintln!(
        "error: INFRA_QUICKSTART_CLOUDS=real needs the real AWS and Scaleway backends, which \
         this build leaves out; build it with them:\n  cargo run -p examples --features \
         real-clouds --example quickstart -- …"
    );
    ExitCode::from(2)
}
