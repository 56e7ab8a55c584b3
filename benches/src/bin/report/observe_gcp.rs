//! O (GCP): the backend calls per resource of a no-change plan, on the GCP stand-in of
//! `infra_testkit::gcp` (started in this process, on loopback, stopped afterwards).
//!
//! A fleet of `n` resources of the kinds whose list answers each resource whole
//! (Cloud Storage buckets, Artifact Registry Docker repositories, Pub/Sub queues, a
//! third each) is applied; then a no-change plan of it is made twice, every call the
//! engine makes counted by a `Recorder` layer: once as the backend answers (its lists
//! hand each resource over with its read), and once through a layer that strips what
//! each list handed over beyond the name and handle, so that each resource is read on
//! its own — the baseline, as observation was before. The stand-in's HTTP requests of
//! each plan are printed per resource on standard error beside them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use infra_core::engine::{Engine, MemoryStore, Options};
use infra_core::kinds::{ImageRegistry, ObjectStore, Queues};
use infra_core::prelude::{Backends, Expr, Fleet, GcpRegion, Partial};
use infra_core::sdk::layer::{BareLists, Layered, Recorder};
use infra_core::sdk::{Backend, RetryPolicy, SystemClock};
use infra_gcp::{GcpBackend, GcpConfig, Polling};
use infra_testkit::gcp::GcpServer;

const PROJECT: &str = "bench-project";

/// The target of calls per resource for kinds with complete lists.
const TARGET: f64 = 0.05;

fn known<T: infra_core::prelude::Value>(value: T) -> Partial<Expr<T>> {
    Partial::Known(Expr::lit(value))
}

/// `n` resources, a third each of buckets, Docker repositories and queues.
fn fleet(n: usize) -> Fleet {
    let mut f = Fleet::builder("observe-gcp");
    let here = GcpRegion::EuropeWest1;
    let tags = known(BTreeMap::from([("bench".to_owned(), "o".to_owned())]));
    for i in 0..n {
        match i % 3 {
            0 => {
                f.declare(
                    here,
                    format!("o-bucket-{i}"),
                    ObjectStore {
                        versioning: known(i % 2 == 0),
                        expire_after_days: known(Some(30)),
                        tags: tags.clone(),
                    },
                );
            }
            1 => {
                f.declare(
                    here,
                    format!("o-images-{i}"),
                    ImageRegistry {
                        scan_on_push: known(true),
                        immutable_tags: known(false),
                        tags: tags.clone(),
                    },
                );
            }
            _ => {
                f.declare(
                    here,
                    format!("o-queue-{i}"),
                    Queues {
                        fifo: Expr::lit(false),
                        visibility_timeout_seconds: known(30),
                        retention_seconds: known(86_400),
                        dead_letter: Partial::Known(None),
                        max_receive_count: Partial::Unknown,
                        tags: tags.clone(),
                    },
                );
            }
        }
    }
    f.build().expect("the bench fleet is sound")
}

/// The calls of one no-change plan of `fleet` through `backend`, and the stand-in's
/// requests it made.
async fn plan_calls(
    server: &GcpServer,
    backend: Arc<dyn Backend>,
    store: Arc<MemoryStore>,
    fleet: &Fleet,
) -> (usize, usize) {
    let recorder = Recorder::new();
    let engine = Engine::new(
        Backends::new().with(Layered::wrap(backend, recorder.clone())),
        store,
    );
    server.clear_requests();
    let report = engine
        .plan(&fleet.plan(), &Options::default())
        .await
        .expect("the plan runs");
    let changed = report
        .changes
        .iter()
        .filter(|c| c.action != "unchanged")
        .count();
    assert_eq!(changed, 0, "the bench's plan is a no-change plan");
    (recorder.calls().len(), server.requests().len())
}

/// Prints `O calls_per_resource cloud=gcp`.
pub(crate) fn o_gcp(rt: &tokio::runtime::Runtime, n: usize) {
    rt.block_on(async {
        let server = match GcpServer::start_with(PROJECT, 0, Arc::new(SystemClock::new())).await {
            Ok(server) => server,
            Err(e) => {
                eprintln!("O calls_per_resource cloud=gcp skipped: the stand-in cannot start: {e}");
                return;
            }
        };
        server.settling(Duration::ZERO);
        let config = GcpConfig::stand_in(PROJECT, &server.address())
            .expect("the stand-in is on loopback")
            .clock(Arc::new(SystemClock::new()))
            .polling(Polling {
                first: Duration::from_millis(1),
                longest: Duration::from_millis(5),
                deadline: Duration::from_secs(60),
            })
            .retry_policy(RetryPolicy::default());
        let backend: Arc<dyn Backend> = Arc::new(GcpBackend::new(config));
        let store = Arc::new(MemoryStore::new());
        let fleet = fleet(n);
        let applied = Engine::new(Backends::new().with(Arc::clone(&backend)), store.clone())
            .apply(&fleet.plan(), &Options::default())
            .await
            .expect("the apply runs");
        assert!(applied.is_success(), "the bench fleet is applied");
        let (complete, complete_http) =
            plan_calls(&server, Arc::clone(&backend), store.clone(), &fleet).await;
        let stripped: Arc<dyn Backend> = Layered::wrap(backend, BareLists);
        let (each, each_http) = plan_calls(&server, stripped, store, &fleet).await;
        let per = |calls: usize| calls as f64 / n as f64;
        println!(
            "O calls_per_resource cloud=gcp n={n} complete_lists={:.3} one_read_each={:.3} \
             target={TARGET}",
            per(complete),
            per(each)
        );
        eprintln!(
            "  O gcp detail: kinds objectStore, imageRegistry, queues (a third each); HTTP \
             requests per resource: complete_lists={:.3} one_read_each={:.3}",
            per(complete_http),
            per(each_http)
        );
        server.shutdown().await;
    });
}
