//! P6: `infra-aws` on moto's server against the SDK's own calls. An apply of `n` SQS
//! queues through the engine and the AWS backend, against the same calls made directly
//! with the SDK, both `PARALLELISM` queues at a time on the same server: the floor for
//! that stand-in. The backend makes four calls per queue — `GetQueueUrl` (CreateQueue
//! answers a queue of the same name as if it had made it, so a taken name is looked
//! for first), `CreateQueue` with the marker among its tags, then the read of what was
//! made, `GetQueueAttributes` and `ListQueueTags` (which also proves the marker is
//! ours) — and the direct side makes the same four. A second figure sets the apply
//! against bare `CreateQueue` calls: what those checks cost. Runs when
//! `AWS_ENDPOINT_URL` names a moto server (`.ci/run` starts one); says why not
//! otherwise.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use infra_core::engine::{Engine, MemoryStore, Options};
use infra_core::kinds::Queues;
use infra_core::prelude::{AwsRegion, Backends, Expr, Fleet, Partial};

use super::now;

const PARALLELISM: usize = 16;

/// Rounds of each side; the fastest is kept.
const ROUNDS: usize = 3;

/// Prints `P6 apply_vs_sdk_on_moto`, or why not on standard error.
pub(crate) fn p6(rt: &tokio::runtime::Runtime, n: usize) {
    let Some(endpoint) = std::env::var("AWS_ENDPOINT_URL")
        .ok()
        .filter(|e| !e.is_empty())
    else {
        eprintln!("P6 apply_vs_sdk_on_moto skipped: set AWS_ENDPOINT_URL to a moto server");
        return;
    };
    let config = rt.block_on(
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(endpoint)
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_credential_types::Credentials::new(
                "test", "test", None, None, "bench",
            ))
            .load(),
    );
    let run = format!("p6-{}", std::process::id());
    // Interleaved rounds, the fastest of each kept: the server's own pace drifts.
    let (mut same, mut bare, mut infra) = (Duration::MAX, Duration::MAX, Duration::MAX);
    for round in 0..ROUNDS {
        let prefix = format!("{run}-{round}");
        infra = infra.min(through_the_engine(
            rt,
            &config,
            &format!("{prefix}-infra"),
            n,
        ));
        same = same.min(direct(
            rt,
            &config,
            &format!("{prefix}-same"),
            n,
            Calls::Same,
        ));
        bare = bare.min(direct(
            rt,
            &config,
            &format!("{prefix}-bare"),
            n,
            Calls::CreateOnly,
        ));
    }
    println!(
        "P6 apply_vs_sdk_on_moto n={n} parallelism={PARALLELISM} ratio={:.2} infra_ms={:.0} \
         sdk_same_calls_ms={:.0} vs_create_only={:.2} sdk_create_only_ms={:.0}",
        infra.as_secs_f64() / same.as_secs_f64(),
        infra.as_secs_f64() * 1000.0,
        same.as_secs_f64() * 1000.0,
        infra.as_secs_f64() / bare.as_secs_f64(),
        bare.as_secs_f64() * 1000.0
    );
}

/// Which calls the direct side makes for each queue.
#[derive(Clone, Copy)]
enum Calls {
    /// The backend's four.
    Same,
    /// `CreateQueue` alone.
    CreateOnly,
}

/// `n` queues made with `calls`, `PARALLELISM` at a time, timed; then deleted.
fn direct(
    rt: &tokio::runtime::Runtime,
    config: &aws_config::SdkConfig,
    prefix: &str,
    n: usize,
    calls: Calls,
) -> Duration {
    let sqs = aws_sdk_sqs::Client::new(config);
    let create = |i: usize| {
        let sqs = sqs.clone();
        let name = format!("{prefix}-{i}");
        async move {
            if let Calls::Same = calls {
                let taken = sqs.get_queue_url().queue_name(&name).send().await;
                assert!(taken.is_err(), "{name} is not taken");
            }
            let out = sqs
                .create_queue()
                .queue_name(&name)
                .tags("managed-by-infra", prefix)
                .send()
                .await;
            let url = out.expect("CreateQueue").queue_url().map(str::to_owned)?;
            if let Calls::Same = calls {
                let attributes = sqs
                    .get_queue_attributes()
                    .queue_url(&url)
                    .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
                    .send()
                    .await;
                attributes.expect("GetQueueAttributes");
                let tags = sqs.list_queue_tags().queue_url(&url).send().await;
                assert!(tags.expect("ListQueueTags").tags().is_some());
            }
            Some(url)
        }
    };
    let start = now();
    let urls: Vec<Option<String>> = rt.block_on(
        futures::stream::iter(0..n)
            .map(create)
            .buffer_unordered(PARALLELISM)
            .collect(),
    );
    let took = start.elapsed();
    assert_eq!(urls.iter().flatten().count(), n, "every queue was made");
    rt.block_on(
        futures::stream::iter(urls.into_iter().flatten()).for_each_concurrent(PARALLELISM, |url| {
            let sqs = sqs.clone();
            async move {
                sqs.delete_queue()
                    .queue_url(url)
                    .send()
                    .await
                    .expect("DeleteQueue");
            }
        }),
    );
    took
}

/// An apply of `n` queues through the engine and `infra-aws`, timed; then destroyed.
fn through_the_engine(
    rt: &tokio::runtime::Runtime,
    config: &aws_config::SdkConfig,
    prefix: &str,
    n: usize,
) -> Duration {
    let backend = infra_aws::AwsBackend::new(config.clone());
    let backends = Backends::new().with(Arc::new(backend));
    let engine = Engine::new(backends, Arc::new(MemoryStore::new()));
    let mut f = Fleet::builder(prefix);
    for i in 0..n {
        f.declare(
            AwsRegion::UsEast1,
            format!("{prefix}-{i}"),
            Queues {
                fifo: Expr::lit(false),
                visibility_timeout_seconds: Partial::Unknown,
                retention_seconds: Partial::Unknown,
                dead_letter: Partial::Known(None),
                max_receive_count: Partial::Unknown,
                tags: Partial::Unknown,
            },
        );
    }
    let fleet = f.build().expect("a fleet of queues");
    let options = Options::default().parallelism(PARALLELISM);
    let start = now();
    let applied = rt
        .block_on(engine.apply(&fleet.plan(), &options))
        .expect("apply");
    let took = start.elapsed();
    assert!(applied.result.is_success(), "the apply succeeds");
    let destroyed = rt
        .block_on(engine.apply(&fleet.teardown(), &options.force(true)))
        .expect("destroy");
    assert!(destroyed.result.is_success(), "the destroy succeeds");
    took
}
