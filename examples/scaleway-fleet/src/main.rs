//! The Scaleway fleet of `lib.rs` as a binary: the runner's verbs on a fleet a team
//! would keep in its own repository. With an API key configured as Scaleway's tools
//! read it it acts on Scaleway; `.ci/run` runs it against the stand-ins.
//!
//! ```sh
//! SCW_FLEET_PROJECT=<project id> SCW_FLEET_SUFFIX=yourname cargo run -p scaleway-fleet -- plan
//! ```
//!
//! The key, the project and the organization come from `SCW_ACCESS_KEY`,
//! `SCW_SECRET_KEY`, `SCW_DEFAULT_PROJECT_ID`, `SCW_DEFAULT_ORGANIZATION_ID` or the
//! CLI's configuration file (`SCW_PROFILE`). `SCW_FLEET_PROJECT` names the one project
//! the fleet belongs to: a run whose configuration acts in another project is refused
//! before anything is listed.

use std::process::ExitCode;

use infra_core::prelude::Backends;

fn main() -> ExitCode {
    let var = |name: &str| std::env::var(name).ok().filter(|s| !s.is_empty());
    let (suffix, project) = (var("SCW_FLEET_SUFFIX"), var("SCW_FLEET_PROJECT"));
    let fleet = scaleway_fleet::fleet(suffix.as_deref(), project.as_deref());
    infra_core::cli::run_async(fleet, async |_fleet| {
        Backends::new().with(infra_scaleway::ScalewayBackend::from_env().await)
    })
}
