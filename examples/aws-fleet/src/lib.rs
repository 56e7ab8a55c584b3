//! The fleet of the `aws-fleet` binary: a bucket, a job queue with its dead-letter
//! queue, a generated API key, and the queue's settings composed into one more secret,
//! all in one AWS region.
//!
//! The crate also compiles the Rust snippets of the repository's README and tutorial as
//! doctests (it is the one crate that has every dependency they name, infra-aws
//! included, without adding a cloud SDK to the quickstart's build).

use std::collections::BTreeMap;

use infra_core::kinds::{ObjectStore, Queues, QueuesObserved, Secrets};
use infra_core::prelude::{AwsRegion, CheckReport, Expr, Fleet, Partial, compose_secret};

/// Where everything lives.
const REGION: AwsRegion = AwsRegion::UsEast1;

/// The fleet, with `-suffix` after every name when a suffix is given.
pub fn fleet(suffix: Option<&str>) -> Result<Fleet, CheckReport> {
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

/// The Rust snippets of the repository's README, compiled (and those without
/// `no_run` run) as doctests, so that none shows an API that does not exist.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeSnippets;

/// The Rust snippets of the tutorial, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/tutorial.md")]
pub struct TutorialSnippets;
