//! Throttling by rate: the stand-in admits one call a second per API (a token bucket),
//! answering the calls beyond it 429 `RESOURCE_EXHAUSTED` with a `Retry-After`. The
//! client waits as asked and tries again, a create included (a throttled call did
//! nothing), and every resource is created exactly once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use infra_core::engine::{Engine, MemoryStore, Options};
use infra_core::kinds::{ImageRegistry, ObjectStore};
use infra_core::prelude::{Backends, Expr, Fleet, GcpRegion, Partial};
use infra_core::sdk::{Backend, RetryPolicy, SystemClock};
use infra_gcp::{GcpBackend, GcpConfig};
use infra_testkit::gcp::RateLimit;

use super::{PROJECT, TEST_POLLING, stand_in};

fn known<T: infra_core::prelude::Value>(value: T) -> Partial<Expr<T>> {
    Partial::Known(Expr::lit(value))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_throttled_by_rate_is_retried_and_creates_exactly_one_resource() {
    let server = stand_in().await;
    let config = GcpConfig::stand_in(PROJECT, &server.address())
        .expect("loopback")
        .clock(Arc::new(SystemClock::new()))
        .polling(TEST_POLLING)
        // The default budget: the waits asked for are whole seconds.
        .retry_policy(
            RetryPolicy::default()
                .with_backoff(Duration::from_millis(1), Duration::from_millis(20)),
        );
    let backend: Arc<dyn Backend> = Arc::new(GcpBackend::new(config));
    let mut f = Fleet::builder("rated");
    f.declare(
        GcpRegion::EuropeWest1,
        "rated-bucket",
        ObjectStore {
            versioning: known(true),
            expire_after_days: known(None),
            tags: known(BTreeMap::new()),
        },
    );
    f.declare(
        GcpRegion::EuropeWest1,
        "rated-images",
        ImageRegistry {
            scan_on_push: known(false),
            immutable_tags: known(true),
            tags: known(BTreeMap::new()),
        },
    );
    let fleet = f.build().expect("the fleet is sound");
    // One call a second per API: the list of each kind takes the one token there is,
    // and the create right after it is refused.
    server.limit_rate(Some(RateLimit::per_second(1)));
    let outcome = Engine::new(Backends::new().with(backend), Arc::new(MemoryStore::new()))
        .apply(&fleet.plan(), &Options::default())
        .await
        .expect("the apply runs");
    server.limit_rate(None);
    assert!(outcome.is_success(), "{:#?}", outcome.result);
    assert!(server.refused_by_rate() > 0, "the rate refused nothing");

    let requests = server.requests();
    let creates = |path_end: &str| -> Vec<u16> {
        requests
            .iter()
            .filter(|r| r.method == "POST" && r.path.ends_with(path_end))
            .map(|r| r.status)
            .collect()
    };
    for end in ["/storage/v1/b", "/repositories"] {
        let statuses = creates(end);
        assert_eq!(
            statuses.iter().filter(|s| **s < 300).count(),
            1,
            "{end}: created exactly once ({statuses:?})"
        );
        assert!(
            statuses.contains(&429),
            "{end}: the create was throttled first ({statuses:?})"
        );
        assert_eq!(statuses.last(), Some(&200), "{end}: {statuses:?}");
    }
    server.shutdown().await;
}
