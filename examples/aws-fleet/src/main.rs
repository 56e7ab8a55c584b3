//! A fleet on AWS, with the credentials of whoever runs it: a bucket, a job queue with
//! its dead-letter queue, a generated API key, and the queue's settings composed into
//! one more secret. It is what a consumer of infra writes: declare the fleet, hand it
//! to the runner with the AWS backend.
//!
//! ```sh
//! AWS_PROFILE=sandbox AWS_FLEET_SUFFIX=yourname cargo run -p aws-fleet -- plan
//! AWS_PROFILE=sandbox AWS_FLEET_SUFFIX=yourname cargo run -p aws-fleet -- apply
//! ```
//!
//! Every name (the fleet's and its resources') ends with `-$AWS_FLEET_SUFFIX` when that
//! variable is set: S3 bucket names are shared by every AWS account, so a bucket called
//! plainly `aws-fleet-assets` is likely someone else's already. The README says how to
//! run it against a real account and against moto's server.

use std::process::ExitCode;

use infra_core::prelude::Backends;

fn main() -> ExitCode {
    let suffix = std::env::var("AWS_FLEET_SUFFIX")
        .ok()
        .filter(|s| !s.is_empty());
    infra_core::cli::run_async(aws_fleet::fleet(suffix.as_deref()), async |_fleet| {
        Backends::new().with(infra_aws::AwsBackend::from_env().await)
    })
}
