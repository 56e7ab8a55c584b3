//! Shared set-up: one manual clock, the simulated cloud for the built-in kinds, the DNS
//! service, and an engine over both, with every call recorded in one sequence (one
//! `Recorder` layer, cloned around both backends).

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use custom_provider::{
    DnsBackend, DnsRecord, DnsRegion, DnsService, RecordType, ZONE, bucket_host,
};
use infra_core::kinds::{ObjectStore, ObjectStoreObserved};
use infra_core::sdk::layer::{Layered, Recorded, Recorder};
use infra_core::{
    engine::{Engine, ManualClock, MemoryStore},
    prelude::{AwsRegion, Backends, Expr, Fleet, Partial},
    sdk::Backend,
};
use infra_testkit::sim::SimCloud;

/// Everything one test needs.
pub struct World {
    pub clock: Arc<ManualClock>,
    pub cloud: SimCloud,
    pub dns: DnsService,
    pub engine: Engine,
    pub store: Arc<MemoryStore>,
    pub recorder: Recorder,
}

impl World {
    /// The writes (create, update, delete, mark) made so far, across both providers,
    /// in the order they ended.
    pub fn writes(&self) -> Vec<Recorded> {
        self.recorder.writes()
    }

    /// Forgets the writes asked for so far (and the service's own call log).
    pub fn clear(&self) {
        self.recorder.clear();
        self.dns.clear_calls();
        self.cloud.clear_calls();
    }

    /// The bucket's observed state, as the simulated cloud holds it.
    pub fn bucket_observed(&self, name: &str) -> ObjectStoreObserved {
        let found = self.cloud.find("aws", "objectStore", name);
        assert_eq!(found.len(), 1, "one bucket {name}");
        serde_json::from_value(found[0].observed.clone()).unwrap()
    }
}

/// A fresh world: AWS (and the other built-in clouds) simulated from `seed`, an empty
/// DNS service, both on one manual clock, and an engine with records in memory.
pub fn world(seed: u64) -> World {
    let clock = Arc::new(ManualClock::new());
    let cloud = SimCloud::with_clock(seed, clock.clone());
    let dns = DnsService::with_clock(clock.clone());
    let recorder = Recorder::new();
    let record =
        |inner: Arc<dyn Backend>| -> Arc<dyn Backend> { Layered::wrap(inner, recorder.clone()) };
    let backends = Backends::new()
        .with(record(cloud.backend("aws")))
        .with(record(DnsBackend::new(dns.clone()).into_backend()));
    let store = Arc::new(MemoryStore::new());
    let engine = Engine::new(backends, store.clone()).with_clock(clock.clone());
    World {
        clock,
        cloud,
        dns,
        engine,
        store,
        recorder,
    }
}

/// The example fleet's shape, with the parts the tests change as parameters: the
/// CNAME's TTL, and the `www` record's type and value.
pub fn fleet(assets_ttl: u32, www_type: RecordType, www_value: &str) -> Fleet {
    let mut f = Fleet::builder(custom_provider::FLEET_NAME);
    let bucket = f.declare(
        AwsRegion::EuWest3,
        "dns-demo-assets",
        ObjectStore {
            versioning: Partial::Known(Expr::lit(true)),
            ..ObjectStore::new()
        },
    );
    f.declare(
        DnsRegion::Eu,
        "assets",
        DnsRecord::new(
            RecordType::Cname,
            ZONE,
            Expr::observed(bucket).map(bucket_host),
        )
        .with_ttl(assets_ttl)
        .with_tags([("team", "web")]),
    );
    f.declare(
        DnsRegion::Global,
        "www",
        DnsRecord::new(www_type, ZONE, www_value),
    );
    f.build().expect("the test fleet is sound")
}
