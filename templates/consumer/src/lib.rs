//! The fleet: what must exist, declared as values.

use infra_core::kinds::{ObjectStore, Queues};
use infra_core::prelude::*;

/// Declares the fleet: a bucket for uploads, and a queue of jobs whose messages move to
/// a dead-letter queue after five failed receives.
pub fn fleet() -> Result<Fleet, CheckReport> {
    let mut fleet = Fleet::builder("consumer");
    let region = AwsRegion::EuWest3;

    fleet.declare(
        region,
        "consumer-uploads",
        ObjectStore {
            versioning: Partial::Known(Expr::lit(true)),
            ..ObjectStore::new()
        },
    );
    let failed = fleet.declare(region, "consumer-jobs-failed", queue());
    fleet.declare(
        region,
        "consumer-jobs",
        Queues {
            // A typed key: the dead-letter queue is created first.
            dead_letter: Partial::Known(Some(failed)),
            max_receive_count: Partial::Known(Expr::lit(5)),
            ..queue()
        },
    );
    fleet.build()
}

/// A standard queue with nothing else said.
fn queue() -> Queues {
    Queues {
        fifo: Expr::lit(false),
        visibility_timeout_seconds: Partial::Unknown,
        retention_seconds: Partial::Unknown,
        dead_letter: Partial::Known(None),
        max_receive_count: Partial::Unknown,
        tags: Partial::Unknown,
    }
}
