#![doc = include_str!("../README.md")]

pub mod precise;
pub mod side_by_side;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use infra_core::sdk::{
    CreateArgs, DeleteArgs, KindBackend, ListArgs, OwnershipArgs, ReadArgs, Reading, Router,
    UpdateArgs, Written,
};
use infra_core::{
    engine::Clock,
    prelude::{Expr, Fleet, Key, Provider, Region, Spec, Supports},
    sdk::{Backend, BackendError, Listed, RawTags},
};
use serde::{Deserialize, Serialize};

/// The provider of the benchmark's own cloud.
#[derive(Clone, Copy, Debug, Default)]
pub struct Bench;

/// Its only region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BenchRegion {
    /// `local`.
    Local,
}

impl Provider for Bench {
    const ID: &'static str = "bench";
    type Region = BenchRegion;
}

impl Region for BenchRegion {
    type Provider = Bench;
    fn code(&self) -> &'static str {
        "local"
    }
    fn all() -> &'static [Self] {
        &[BenchRegion::Local]
    }
}

/// A node of a benchmark graph: any number of references to earlier nodes.
#[derive(Clone, Debug, PartialEq, Spec)]
#[spec(kind = "benchNode", observed = NodeObserved)]
pub struct Node {
    /// What it depends on.
    pub after: Vec<Key<Node>>,
    /// A value that changes in place.
    pub size: Expr<u32>,
}

/// What the benchmark cloud reports of a node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeObserved {
    /// Its id.
    pub id: String,
}

impl Supports<Node> for Bench {}

/// The runtime every measurement runs on: two worker threads, as this machine has
/// two cores.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// A small deterministic generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// A random graph of `n` nodes in at most `depth` levels; each node past the first
/// level refers to 1 to 3 nodes (2 on average) of lower levels, so no chain is longer
/// than `depth`. Returns the fleet and its longest chain (in nodes).
pub fn dag(n: usize, depth: usize, seed: u64) -> (Fleet, usize) {
    dag_sized(n, depth, seed, |_| 1)
}

/// [`dag`], with node `i` of size `size(i)`: the same graph for the same seed, so a
/// fleet planned against the world another built shows in-place changes where the
/// sizes differ.
pub fn dag_sized(n: usize, depth: usize, seed: u64, size: impl Fn(usize) -> u32) -> (Fleet, usize) {
    let edges = graph(n, depth, seed);
    let mut f = Fleet::builder("bench");
    let mut keys: Vec<Key<Node>> = Vec::with_capacity(n);
    for (i, after) in edges.iter().enumerate() {
        keys.push(f.declare(
            BenchRegion::Local,
            format!("n{i}"),
            Node {
                after: after.iter().map(|&j| keys[j]).collect(),
                size: Expr::lit(size(i)),
            },
        ));
    }
    (
        f.build().expect("generated graphs are sound"),
        longest_chain(&edges),
    )
}

/// The edges of a random graph of `n` nodes in at most `depth` levels: node `i`'s
/// list holds the earlier nodes it refers to. Each node past the first level refers to
/// 1 to 3 distinct nodes (2 on average) of lower levels, so no chain is longer than
/// `depth`. The same seed gives the same graph.
pub fn graph(n: usize, depth: usize, seed: u64) -> Vec<Vec<usize>> {
    let mut rng = Rng::new(seed);
    let mut level_start: Vec<usize> = Vec::new();
    let mut edges: Vec<Vec<usize>> = Vec::with_capacity(n);
    for i in 0..n {
        let level = i * depth / n.max(1);
        if level_start.len() <= level {
            level_start.push(i);
        }
        let mut after = Vec::new();
        if level > 0 {
            let below = level_start[level];
            for _ in 0..(1 + rng.below(3)) {
                let j = usize::try_from(rng.below(below as u64)).expect("fits");
                if !after.contains(&j) {
                    after.push(j);
                }
            }
        }
        edges.push(after);
    }
    edges
}

/// The longest chain of a graph from [`graph`], in nodes.
pub fn longest_chain(edges: &[Vec<usize>]) -> usize {
    let mut chain: Vec<usize> = Vec::with_capacity(edges.len());
    for after in edges {
        let longest = after.iter().map(|&j| chain[j]).max().unwrap_or(0);
        chain.push(longest + 1);
    }
    chain.into_iter().max().unwrap_or(0)
}

/// A fleet of `n` built-in resources for the simulated cloud of `infra-testkit`, in
/// groups of five alternating between two regions: a security group, two instances in
/// it, a queue whose dead letters go to the queue of the previous group in its region,
/// and a bucket. `version` varies
/// the queues' visibility timeout and the buckets' versioning, so a fleet planned
/// against the world of another version has in-place changes.
pub fn mixed(n: usize, version: u32) -> Fleet {
    use infra_core::kinds::{
        AwsInstance, BurstableSize, Image, InstanceType, ObjectStore, Queues, Rule, SecurityGroup,
    };
    use infra_core::prelude::{AwsRegion, Partial};
    let mut f = Fleet::builder("bench-mixed");
    let mut queues: [Option<Key<Queues>>; 2] = [None, None];
    let mut group = None;
    for i in 0..n {
        let side = (i / 5) % 2;
        let region = if side == 0 {
            AwsRegion::EuWest3
        } else {
            AwsRegion::UsEast1
        };
        let name = format!("res-{i}");
        match i % 5 {
            0 => {
                group = Some(f.declare(
                    region,
                    name,
                    SecurityGroup {
                        description: format!("group {i}").into(),
                        vpc_id: Partial::Unknown,
                        ingress: Expr::lit([Rule::tcp(443, "10.0.0.0/8")].into()),
                        egress: Partial::Unknown,
                        tags: Partial::Unknown,
                    },
                ));
            }
            1 | 2 => {
                let group = group.expect("declared first in its group");
                f.declare(
                    region,
                    name,
                    AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Nano), group),
                );
            }
            3 => {
                let dead_letter = queues[side];
                queues[side] = Some(f.declare(
                    region,
                    name,
                    Queues {
                        fifo: Expr::lit(false),
                        visibility_timeout_seconds: Partial::Known(Expr::lit(30 + version)),
                        retention_seconds: Partial::Unknown,
                        dead_letter: Partial::Known(dead_letter),
                        max_receive_count: Partial::Unknown,
                        tags: Partial::Unknown,
                    },
                ));
            }
            _ => {
                f.declare(
                    region,
                    name,
                    ObjectStore {
                        versioning: Partial::Known(Expr::lit(version.is_multiple_of(2))),
                        ..ObjectStore::new()
                    },
                );
            }
        }
    }
    f.build().expect("the mixed fleet is sound")
}

/// An in-memory cloud for nodes, every call taking `latency` on its clock.
pub struct BenchCloud {
    clock: Arc<dyn Clock>,
    latency: Duration,
    nodes: Mutex<BTreeMap<String, (u32, RawTags)>>,
    span: Mutex<Option<(Duration, Duration)>>,
    /// The calls made, and their time summed.
    busy: Mutex<(usize, Duration)>,
}

impl std::fmt::Debug for BenchCloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BenchCloud")
            .field("latency", &self.latency)
            .finish()
    }
}

impl BenchCloud {
    /// A cloud whose every call takes `latency` on `clock`.
    pub fn new(clock: Arc<dyn Clock>, latency: Duration) -> Self {
        BenchCloud {
            clock,
            latency,
            nodes: Mutex::new(BTreeMap::new()),
            span: Mutex::new(None),
            busy: Mutex::new((0, Duration::ZERO)),
        }
    }

    /// The time on the cloud's clock.
    pub fn now(&self) -> Duration {
        self.clock.now()
    }

    /// When, on the cloud's clock, its first call began and its last call returned.
    pub fn span(&self) -> Option<(Duration, Duration)> {
        *self.span.lock().expect("lock")
    }

    /// How many calls were made, and their time summed (each call's own, from its
    /// start to its return, on the cloud's clock).
    pub fn busy(&self) -> (usize, Duration) {
        *self.busy.lock().expect("lock")
    }

    async fn wait(&self) {
        let start = self.clock.now();
        if !self.latency.is_zero() {
            self.clock.sleep(self.latency).await;
        }
        let end = self.clock.now();
        {
            let mut busy = self.busy.lock().expect("lock");
            busy.0 += 1;
            busy.1 += end.saturating_sub(start);
        }
        let mut span = self.span.lock().expect("lock");
        *span = Some(span.map_or((start, end), |(s, e)| (s.min(start), e.max(end))));
    }

    fn reading(name: &str, size: u32) -> Reading<Node> {
        Reading::new(
            name,
            NodeObserved {
                id: name.to_owned(),
            },
            NodeReported {
                after: infra_core::prelude::Partial::Unknown,
                size: infra_core::prelude::Partial::Known(size),
            },
        )
    }

    /// Removes a node behind the engine's back, as someone deleting it by hand would.
    pub fn remove_out_of_band(&self, name: &str) {
        self.nodes.lock().expect("lock").remove(name);
    }

    /// How many nodes the cloud holds.
    pub fn len(&self) -> usize {
        self.nodes.lock().expect("lock").len()
    }

    /// Whether the cloud holds no node.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The engine's backend for this cloud.
    pub fn backend(self: &Arc<Self>) -> Arc<dyn Backend> {
        Arc::new(Router::new(Bench::ID, "bench".to_owned()).kind::<Node>(Arc::clone(self)))
    }
}

fn gone(handle: &str) -> BackendError {
    BackendError::not_found(format!("no node {handle}"))
}

#[async_trait]
impl KindBackend<Node> for BenchCloud {
    async fn list(&self, _: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        self.wait().await;
        Ok(self
            .nodes
            .lock()
            .expect("lock")
            .keys()
            .map(|n| Listed::new(n.clone(), n.clone()))
            .collect())
    }
    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<Node>, BackendError> {
        self.wait().await;
        let node = self.nodes.lock().expect("lock").get(args.handle).cloned();
        node.map(|(size, tags)| Self::reading(args.handle, size).with_raw_tags(tags))
            .ok_or_else(|| gone(args.handle))
    }
    async fn create(
        &self,
        args: CreateArgs<'_, Node>,
    ) -> Result<Written<Reading<Node>>, BackendError> {
        self.wait().await;
        let size = args.spec.size;
        let marker = args.marker;
        let tags = RawTags::from([(marker.key().to_owned(), marker.value().to_owned())]);
        self.nodes
            .lock()
            .expect("lock")
            .insert(args.name.to_owned(), (size, tags));
        Ok(Written::Done(Self::reading(args.name, size)))
    }
    async fn update(
        &self,
        args: UpdateArgs<'_, Node>,
    ) -> Result<Written<Reading<Node>>, BackendError> {
        self.wait().await;
        let size = args.spec.size;
        let mut nodes = self.nodes.lock().expect("lock");
        let node = nodes
            .get_mut(args.handle)
            .ok_or_else(|| gone(args.handle))?;
        node.0 = size;
        Ok(Written::Done(Self::reading(args.handle, size)))
    }
    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        self.wait().await;
        self.nodes
            .lock()
            .expect("lock")
            .remove(args.handle)
            .map(|_| ())
            .ok_or_else(|| gone(args.handle))
    }
    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        self.wait().await;
        let tags = self
            .nodes
            .lock()
            .expect("lock")
            .get(args.handle)
            .map(|n| n.1.clone());
        tags.ok_or_else(|| gone(args.handle))
    }
}
