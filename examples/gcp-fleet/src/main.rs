//! A fleet on Google Cloud, with the credentials of whoever runs it: what a consumer of
//! infra writes for a real cloud. See the README for running it against a project and
//! against the stand-ins.
//!
//! ```sh
//! GOOGLE_CLOUD_PROJECT=my-project GCP_FLEET_PROJECT=my-project GCP_FLEET_SUFFIX=yourname \
//!     cargo run -p gcp-fleet -- plan
//! ```
//!
//! `GCP_FLEET_PROJECT` names the one project the fleet belongs to: a run whose
//! configuration acts in another project is refused before anything is listed.

use std::process::ExitCode;

use infra_core::prelude::Backends;

fn main() -> ExitCode {
    let var = |name: &str| std::env::var(name).ok().filter(|s| !s.is_empty());
    let (suffix, project) = (var("GCP_FLEET_SUFFIX"), var("GCP_FLEET_PROJECT"));
    let fleet = gcp_fleet::fleet(suffix.as_deref(), project.as_deref());
    infra_core::cli::run_async(fleet, async |_fleet| {
        Backends::new().with(infra_gcp::GcpBackend::from_env().await)
    })
}
