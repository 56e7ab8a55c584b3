//! Shared set-up: one manual clock, the simulated cloud for the built-in kinds, the DNS
//! service, and an engine over both, with every write recorded in one sequence.

#![allow(dead_code, unreachable_pub)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use custom_provider::{
    DnsBackend, DnsRecord, DnsRegion, DnsService, RecordType, ZONE, bucket_host,
};
use infra_core::kinds::{ObjectStore, ObjectStoreObserved};
use infra_core::{
    AwsRegion, Backend, BackendError, Backends, Capabilities, Engine, Expr, Fleet, Listed,
    ManualClock, Marker, MemoryStore, Partial, RawTags, RetryPolicy, SecretString, SettledSpec,
    Sighting,
};
use infra_testkit::sim::SimCloud;

/// One write a backend was asked for, in the order the engine asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    pub provider: &'static str,
    pub op: &'static str,
    pub kind: &'static str,
    /// The name given to `create`, or the handle given to `update` and `delete`.
    pub target: String,
}

/// A backend that records the writes it is asked for, then passes every call on.
pub struct Recorded {
    inner: Arc<dyn Backend>,
    log: Arc<Mutex<Vec<Write>>>,
}

impl Recorded {
    fn note(&self, op: &'static str, kind: &'static str, target: &str) {
        self.log.lock().unwrap().push(Write {
            provider: self.inner.provider(),
            op,
            kind,
            target: target.to_owned(),
        });
    }
}

#[async_trait]
impl Backend for Recorded {
    fn provider(&self) -> &'static str {
        self.inner.provider()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn unreachable(&self) -> Option<String> {
        self.inner.unreachable()
    }
    async fn account(&self) -> Result<String, BackendError> {
        self.inner.account().await
    }
    async fn list(&self, kind: &'static str, region: &str) -> Result<Vec<Listed>, BackendError> {
        self.inner.list(kind, region).await
    }
    async fn read(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<Sighting, BackendError> {
        self.inner.read(kind, region, handle).await
    }
    async fn create(
        &self,
        kind: &'static str,
        region: &str,
        name: &str,
        spec: SettledSpec<'_>,
        marker: &Marker,
    ) -> Result<Sighting, BackendError> {
        self.note("create", kind, name);
        self.inner.create(kind, region, name, spec, marker).await
    }
    async fn update(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
        spec: SettledSpec<'_>,
    ) -> Result<Sighting, BackendError> {
        self.note("update", kind, handle);
        self.inner.update(kind, region, handle, spec).await
    }
    async fn delete(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<(), BackendError> {
        self.note("delete", kind, handle);
        self.inner.delete(kind, region, handle).await
    }
    async fn ownership(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<RawTags, BackendError> {
        self.inner.ownership(kind, region, handle).await
    }
    async fn secret_value(&self, region: &str, handle: &str) -> Result<SecretString, BackendError> {
        self.inner.secret_value(region, handle).await
    }
}

/// Everything one test needs.
pub struct World {
    pub clock: Arc<ManualClock>,
    pub cloud: SimCloud,
    pub dns: DnsService,
    pub engine: Engine,
    pub store: Arc<MemoryStore>,
    pub log: Arc<Mutex<Vec<Write>>>,
}

impl World {
    /// The writes asked for so far, in order.
    pub fn writes(&self) -> Vec<Write> {
        self.log.lock().unwrap().clone()
    }

    /// Forgets the writes asked for so far (and the service's own call log).
    pub fn clear(&self) {
        self.log.lock().unwrap().clear();
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
    let log = Arc::new(Mutex::new(Vec::new()));
    let record = |inner: Arc<dyn Backend>| -> Arc<dyn Backend> {
        Arc::new(Recorded {
            inner,
            log: Arc::clone(&log),
        })
    };
    let backends = Backends::new()
        .with(record(cloud.backend("aws")))
        .with(record(Arc::new(DnsBackend::new(dns.clone()))));
    let store = Arc::new(MemoryStore::new());
    let engine = Engine::new(backends, store.clone())
        .with_clock(clock.clone())
        .with_retry(RetryPolicy {
            attempts: 4,
            base: Duration::from_millis(100),
            cap: Duration::from_secs(1),
        });
    World {
        clock,
        cloud,
        dns,
        engine,
        store,
        log,
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
