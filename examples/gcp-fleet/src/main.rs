//! A fleet on Google Cloud, with the credentials of whoever runs it: what a consumer of
//! infra writes for a real cloud. See the README for running it against a project and
//! against the stand-ins.
//!
//! ```sh
//! GOOGLE_CLOUD_PROJECT=my-project GCP_FLEET_SUFFIX=yourname cargo run -p gcp-fleet -- plan
//! ```

use std::process::ExitCode;

use infra_core::prelude::Backends;

fn main() -> ExitCode {
    let suffix = std::env::var("GCP_FLEET_SUFFIX")
        .ok()
        .filter(|s| !s.is_empty());
    infra_core::cli::run_async(gcp_fleet::fleet(suffix.as_deref()), async |_fleet| {
        Backends::new().with(infra_gcp::GcpBackend::from_env().await)
    })
}
