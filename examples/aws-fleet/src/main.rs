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

use std::collections::BTreeMap;
use std::process::ExitCode;

use infra_core::kinds::{ObjectStore, Queues, QueuesObserved, Secrets};
use infra_core::{AwsRegion, Backends, CheckReport, Expr, Fleet, Partial, compose_secret};

/// Where everything lives.
const REGION: AwsRegion = AwsRegion::UsEast1;

/// The fleet, with `-suffix` after every name when a suffix is given.
fn fleet(suffix: Option<&str>) -> Result<Fleet, CheckReport> {
    let name = |base: &str| match suffix {
        Some(s) => format!("{base}-{s}"),
        None => base.to_owned(),
    };
    let tags = Partial::Known(Expr::lit(BTreeMap::from([(
        "app".to_owned(),
        "aws-fleet".to_owned(),
    )])));
    let mut fleet = Fleet::builder(name("aws-fleet"));

    fleet.declare(
        REGION,
        name("aws-fleet-assets"),
        ObjectStore {
            versioning: Partial::Known(Expr::lit(true)),
            expire_after_days: Partial::Known(Expr::lit(Some(30))),
            tags: tags.clone(),
        },
    );

    let queue = |dead_letter| Queues {
        fifo: Expr::lit(false),
        visibility_timeout_seconds: Partial::Known(Expr::lit(60)),
        retention_seconds: Partial::Known(Expr::lit(4 * 24 * 3600)),
        dead_letter: Partial::Known(dead_letter),
        max_receive_count: Partial::Known(Expr::lit(5)),
        tags: tags.clone(),
    };
    let dead = fleet.declare(REGION, name("aws-fleet-jobs-dead"), queue(None));
    let jobs = fleet.declare(REGION, name("aws-fleet-jobs"), queue(Some(dead)));

    let api_key = fleet.declare(
        REGION,
        name("aws-fleet-api-key"),
        Secrets {
            description: Partial::Known(Expr::lit("the jobs API key".to_owned())),
            tags: tags.clone(),
            ..Secrets::generated(32)
        },
    );
    let queue_url = Expr::observed(jobs).map(|q: &QueuesObserved| q.id.clone());
    fleet.declare(
        REGION,
        name("aws-fleet-worker-config"),
        Secrets {
            description: Partial::Known(Expr::lit("what a worker needs".to_owned())),
            tags,
            ..Secrets::composed(compose_secret!(
                "queue={} key={}",
                queue_url,
                Expr::secret(api_key)
            ))
        },
    );
    fleet.build()
}

fn main() -> ExitCode {
    let suffix = std::env::var("AWS_FLEET_SUFFIX")
        .ok()
        .filter(|s| !s.is_empty());
    infra_core::cli::run_async(fleet(suffix.as_deref()), async |_fleet| {
        Backends::new().with(infra_aws::AwsBackend::from_env().await)
    })
}
