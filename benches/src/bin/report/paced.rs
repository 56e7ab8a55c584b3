//! The fleet the L and Q lines run: a realistic mix, mostly of kinds whose lists are
//! complete, some whose lists are bare, few dependencies (a security group and the
//! instances in it); and this program as its runner.
//!
//! Of every twenty resources: four EC2 security groups and eleven EC2 instances in one
//! of two AWS regions (alternating by twenties), four Cloud Storage buckets in
//! `europe-west1` — kinds whose lists answer whole objects, tags included — and one SQS
//! queue, whose list answers names only (a read, and a tag call, each).

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use infra_core::kinds::{
    AwsInstance, BurstableSize, Image, InstanceType, ObjectStore, Queues, Rule, SecurityGroup,
};
use infra_core::prelude::{AwsRegion, Backends, Expr, Fleet, GcpRegion, Partial};
use infra_core::sdk::BackendError;
use infra_core::sdk::layer::{Answer, Call, Layer, Layered, Next};
use infra_testkit::sim::SimCloud;
use tokio::sync::Semaphore;

/// The environment variable that makes this program the runner of the paced fleet of
/// that many resources.
pub(crate) const AS_PACED: &str = "INFRA_BENCH_AS_PACED_FLEET";

/// The environment variable that bounds the runner's calls in flight, across all its
/// providers, as Terraform's `-parallelism` bounds its operations (10 by default).
pub(crate) const IN_FLIGHT: &str = "INFRA_BENCH_IN_FLIGHT";

/// The fleet's name: the marker its resources carry.
pub(crate) const FLEET: &str = "bench-paced";

/// The paced fleet of `n` resources.
pub(crate) fn fleet(n: usize) -> Fleet {
    let mut f = Fleet::builder(FLEET);
    let mut group = None;
    for i in 0..n {
        let aws = if (i / 20) % 2 == 0 {
            AwsRegion::EuWest3
        } else {
            AwsRegion::UsEast1
        };
        let name = format!("res-{i}");
        match i % 20 {
            0..4 => {
                group = Some(f.declare(
                    aws,
                    name,
                    SecurityGroup {
                        description: format!("group {i}").into(),
                        vpc_id: Partial::Unknown,
                        ingress: Expr::lit(BTreeSet::from([Rule::tcp(443, "10.0.0.0/8")])),
                        egress: Partial::Unknown,
                        tags: Partial::Unknown,
                    },
                ));
            }
            4..15 => {
                let group = group.expect("declared first in its twenty");
                f.declare(
                    aws,
                    name,
                    AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Nano), group),
                );
            }
            15..19 => {
                f.declare(GcpRegion::EuropeWest1, name, ObjectStore::new());
            }
            _ => {
                f.declare(
                    aws,
                    name,
                    Queues {
                        fifo: Expr::lit(false),
                        visibility_timeout_seconds: Partial::Unknown,
                        retention_seconds: Partial::Unknown,
                        dead_letter: Partial::Unknown,
                        max_receive_count: Partial::Unknown,
                        tags: Partial::Unknown,
                    },
                );
            }
        }
    }
    f.build().expect("the paced fleet is sound")
}

/// At most so many calls in flight at once, shared by every backend it wraps.
#[derive(Clone)]
struct InFlight(Arc<Semaphore>);

#[async_trait]
impl Layer for InFlight {
    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        let _permit = self
            .0
            .acquire()
            .await
            .expect("the semaphore is never closed");
        next.run(call).await
    }
}

/// When [`AS_PACED`] is set, runs the runner on the paced fleet of that many resources
/// with the simulated cloud of `INFRA_SIM_WORLD` (set up by its own variables:
/// latency, rate, bare lists), its calls bounded by [`IN_FLIGHT`] when that is set;
/// `None` otherwise.
pub(crate) fn as_fleet() -> Option<std::process::ExitCode> {
    let n: usize = std::env::var(AS_PACED).ok()?.parse().ok()?;
    let in_flight: Option<usize> = std::env::var(IN_FLIGHT).ok().and_then(|v| v.parse().ok());
    Some(infra_core::cli::run(Ok(fleet(n)), move |_| {
        let backends = SimCloud::backends_at(infra_testkit::sim::world_file());
        match in_flight {
            None => backends,
            Some(bound) => {
                let layer = InFlight(Arc::new(Semaphore::new(bound.max(1))));
                let providers: Vec<&'static str> = backends.providers().collect();
                providers.into_iter().fold(Backends::new(), |b, p| {
                    let inner = Arc::clone(backends.get(p).expect("listed"));
                    b.with(Layered::wrap(inner, layer.clone()))
                })
            }
        }
    }))
}
