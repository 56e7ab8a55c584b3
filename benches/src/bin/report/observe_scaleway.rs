//! O (Scaleway): the backend calls per resource of a no-change plan of `n` resources
//! of the Scaleway kinds whose lists are complete (container and function namespaces,
//! containers, functions, registry namespaces: `infra_testkit::scaleway::
//! complete_list_fleet`), on the Scaleway stand-in started in this process on loopback
//! (statuses settling at once, on a manual clock the backend waits on). The fleet is
//! applied once; then one no-change plan is counted with a `Recorder` layer, and the
//! same plan again through a layer that strips each listed resource's reading and raw
//! tags — one read per resource, as before lists handed them over: the baseline, in
//! the same run. The stand-in's HTTP requests of each plan go to standard error.

use std::sync::Arc;
use std::time::Duration;

use infra_core::engine::{Engine, ManualClock, MemoryStore, Options};
use infra_core::prelude::Backends;
use infra_core::sdk::layer::{BareLists, Layered, Recorder};
use infra_core::sdk::{Backend, Clock, Polling};
use infra_scaleway::{ScalewayBackend, ScalewayConfig};
use infra_testkit::scaleway::{ScalewayOptions, ScalewayServer, complete_list_fleet};

const PROJECT: &str = "11111111-1111-4111-8111-111111111111";
const ORGANIZATION: &str = "22222222-2222-4222-8222-222222222222";

/// The target, calls per resource, for kinds with complete lists.
const TARGET: f64 = 0.05;

/// Backend calls and stand-in requests of one no-change plan through `backend`.
fn counted_plan(
    rt: &tokio::runtime::Runtime,
    backend: Arc<dyn Backend>,
    store: &Arc<MemoryStore>,
    clock: &Arc<ManualClock>,
    server: &ScalewayServer,
    n: usize,
) -> (usize, usize) {
    let recorder = Recorder::new();
    let layered = Layered::wrap(backend, recorder.clone());
    let engine = Engine::new(
        Backends::new().with(layered as Arc<dyn Backend>),
        store.clone(),
    )
    .with_clock(Arc::clone(clock) as Arc<dyn Clock>);
    server.clear_requests();
    let plan = rt
        .block_on(engine.plan(&complete_list_fleet("o-", n).plan(), &Options::default()))
        .expect("the plan runs");
    assert!(!plan.has_changes(), "a no-change plan: {:?}", plan.changes);
    (recorder.calls().len(), server.requests().len())
}

/// Prints `O calls_per_resource cloud=scaleway …` for `n` resources.
pub(crate) fn o_line(rt: &tokio::runtime::Runtime, n: usize) {
    let clock = Arc::new(ManualClock::new());
    let options = ScalewayOptions::new()
        .clock(Arc::clone(&clock) as Arc<dyn Clock>)
        .settling(Duration::ZERO);
    let server = rt
        .block_on(ScalewayServer::start_with(PROJECT, ORGANIZATION, options))
        .expect("the stand-in starts on loopback");
    let api = server.address();
    let config = ScalewayConfig::stand_in(PROJECT, ORGANIZATION, &api, &api)
        .expect("the stand-in is on loopback")
        .clock(Arc::clone(&clock) as Arc<dyn Clock>)
        .polling(Polling {
            first: Duration::from_millis(100),
            longest: Duration::from_secs(1),
            deadline: Duration::from_secs(60),
        });
    let backend: Arc<dyn Backend> = Arc::new(ScalewayBackend::new(config));
    let store = Arc::new(MemoryStore::new());
    let engine = Engine::new(Backends::new().with(Arc::clone(&backend)), store.clone())
        .with_clock(Arc::clone(&clock) as Arc<dyn Clock>);
    let applied = rt
        .block_on(engine.apply(&complete_list_fleet("o-", n).plan(), &Options::default()))
        .expect("the apply runs");
    assert!(
        applied.is_success(),
        "the fleet is applied: {:?}",
        applied.result
    );

    let (complete, complete_http) =
        counted_plan(rt, Arc::clone(&backend), &store, &clock, &server, n);
    let stripped = Layered::wrap(Arc::clone(&backend), BareLists) as Arc<dyn Backend>;
    let (each, each_http) = counted_plan(rt, stripped, &store, &clock, &server, n);
    rt.block_on(server.shutdown());

    let per = |calls: usize| calls as f64 / n as f64;
    println!(
        "O calls_per_resource cloud=scaleway n={n} complete_lists={:.3} one_read_each={:.3} \
         target={TARGET}",
        per(complete),
        per(each)
    );
    eprintln!(
        "  O scaleway detail: backend calls {complete} and {each}; stand-in HTTP requests \
         {complete_http} ({:.3} per resource) and {each_http} ({:.3})",
        per(complete_http),
        per(each_http)
    );
}
