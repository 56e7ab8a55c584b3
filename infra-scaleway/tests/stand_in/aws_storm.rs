//! The throttling storm, on moto's server standing in for Object Storage and Queues: a
//! relay in front of it refuses half of the calls with `429 Too Many Requests` (one
//! refusal in five asking for a `Retry-After` of a few seconds) for thirty seconds of
//! simulated time, and passes the rest on. The backend's clock, which the SDK's retries
//! sleep on, is the storm's `ManualClock`: nothing waits for real.
//!
//! Three buckets and three queues are applied through the engine. Every resource must be
//! made exactly once (moto holds one of each, and the relay passed on one create per
//! resource), the apply must report no failure, and no retry may come before the time
//! its refusal asked for.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use infra_core::engine::{Change, Engine, MemoryStore, Options};
use infra_core::kinds::{ObjectStore, Queues};
use infra_core::prelude::{Backends, Expr, Fleet, Partial, ScalewayRegion};
use infra_core::sdk::{Backend, ManualClock, RetryPolicy};
use infra_scaleway::ScalewayBackend;
use infra_testkit::relay::{Exchange, Relay};
use infra_testkit::storm::{Storm, StormFigures};

use super::support::stand_in_on;
use super::wire::{another_tool, another_tools_http, fresh};
use super::{config, moto};

const REGION: &str = "fr-par";
/// How long the storm lasts, on the manual clock.
const STORM: Duration = Duration::from_secs(30);
/// How many buckets, and how many queues: enough calls for the storm's thirty seconds
/// to pass on the manual clock (the sum of every retry's wait) before the apply ends.
const EACH: usize = 12;

fn fleet(prefix: &str) -> Fleet {
    let mut f = Fleet::builder(format!("{prefix}storm"));
    for n in 0..EACH {
        f.declare(
            ScalewayRegion::FrPar,
            format!("{prefix}bucket-{n}"),
            ObjectStore {
                versioning: Partial::Known(Expr::lit(true)),
                ..ObjectStore::new()
            },
        );
        f.declare(
            ScalewayRegion::FrPar,
            format!("{prefix}queue-{n}"),
            Queues {
                fifo: Expr::lit(false),
                visibility_timeout_seconds: Partial::Known(Expr::lit(45)),
                retention_seconds: Partial::Unknown,
                dead_letter: Partial::Known(None),
                max_receive_count: Partial::Unknown,
                tags: Partial::Unknown,
            },
        );
    }
    f.build().expect("the storm fleet is sound")
}

/// The buckets and queues moto holds whose names start with `prefix`, asked directly
/// with the SDK, as another tool would.
async fn in_moto(moto: &str, prefix: &str) -> (usize, usize) {
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::Config::builder()
            .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
            .region(aws_sdk_s3::config::Region::new(REGION))
            .endpoint_url(moto)
            .force_path_style(true)
            .credentials_provider(another_tool())
            .http_client(another_tools_http())
            .build(),
    );
    let buckets = s3
        .list_buckets()
        .send()
        .await
        .expect("ListBuckets")
        .buckets()
        .iter()
        .filter(|b| b.name().is_some_and(|n| n.starts_with(prefix)))
        .count();
    let sqs = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::Config::builder()
            .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
            .region(aws_sdk_sqs::config::Region::new(REGION))
            .endpoint_url(moto)
            .credentials_provider(another_tool())
            .http_client(another_tools_http())
            .build(),
    );
    let queues = sqs
        .list_queues()
        .queue_name_prefix(prefix)
        .send()
        .await
        .expect("ListQueues")
        .queue_urls()
        .len();
    (buckets, queues)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buckets_and_queues_applied_through_a_throttling_storm_are_made_once_and_nothing_fails() {
    let Some(moto) = moto() else { return };
    let clock = Arc::new(ManualClock::new());
    let server = stand_in_on(&clock).await;
    let relay = Relay::start(&moto).await.expect("the relay starts");
    let backend = Arc::new(ScalewayBackend::new(
        config(&server, Some(&relay.address()))
            .clock(clock.clone())
            .retry_policy(RetryPolicy::default()),
    ));
    let prefix = fresh("");
    let fleet = fleet(&prefix);
    let engine = Engine::new(
        Backends::new().with(backend.clone()),
        Arc::new(MemoryStore::new()),
    );

    let storm = Storm::new(clock.clone(), STORM)
        .seeded(0x5ca1e)
        .retry_after_between(5, Duration::from_secs(1), Duration::from_secs(3));
    relay.storm(storm.clone());
    let outcome = engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .expect("the apply runs");
    relay.restore();
    let exchanges = relay.exchanges();
    let figures = StormFigures::of(&storm, &relay.storm_calls());
    eprintln!("storm on moto (infra-scaleway): {figures}");

    assert!(
        outcome.result.failed.is_empty(),
        "{:#?}",
        outcome.result.failed
    );
    assert!(outcome.result.is_success(), "{:#?}", outcome.result);
    let created = outcome
        .result
        .applied
        .iter()
        .filter(|a| a.change == Change::Created)
        .count();
    assert_eq!(created, fleet.len(), "{:#?}", outcome.result);
    figures.assert_outlasted();
    assert!(
        figures.refusals > 10 && figures.retries >= figures.refusals,
        "{figures}"
    );
    let creates = |x: &Exchange| ["PUT bucket", "CreateQueue"].contains(&x.action().as_str());
    let refused_creates = exchanges
        .iter()
        .filter(|x| x.fault.is_some() && creates(x))
        .count();
    assert!(refused_creates > 0, "no create met the storm: {figures}");

    // One of each in moto, and one create of each passed on.
    assert_eq!(
        in_moto(&moto, &prefix).await,
        (EACH, EACH),
        "what moto holds"
    );
    let mut passed_on: BTreeMap<String, usize> = BTreeMap::new();
    for x in exchanges.iter().filter(|x| x.fault.is_none() && creates(x)) {
        *passed_on.entry(x.action()).or_default() += 1;
    }
    assert_eq!(
        passed_on,
        BTreeMap::from([
            ("CreateQueue".to_owned(), EACH),
            ("PUT bucket".to_owned(), EACH)
        ]),
        "creates that reached moto"
    );

    // Clean up, the storm over. Queues carry no marker: a queue no longer declared is not
    // pruned (it is reported not prunable), so they are deleted by handle.
    let emptied = engine
        .apply(
            &Fleet::builder(format!("{prefix}storm"))
                .build()
                .expect("an empty fleet")
                .plan(),
            &Options::default().force(true),
        )
        .await
        .expect("the teardown runs");
    assert!(
        emptied.result.failed.is_empty(),
        "{:#?}",
        emptied.result.failed
    );
    for listed in backend.list("queues", REGION).await.expect("the list") {
        if listed.name.starts_with(&prefix) {
            backend
                .delete("queues", REGION, &listed.handle)
                .await
                .expect("the queue is deleted");
        }
    }
    assert_eq!(in_moto(&moto, &prefix).await, (0, 0), "left behind");
    server.shutdown().await;
}
