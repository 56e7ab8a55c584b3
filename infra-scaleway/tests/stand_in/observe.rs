//! Observation by the page, through the engine: a no-change plan of a fleet of the
//! kinds whose lists are complete makes no `read` and no `ownership` call, only lists;
//! a resource deleted behind the engine's back, which the list no longer shows, is read
//! by its recorded handle before the plan calls it missing.

use std::sync::Arc;

use infra_core::engine::{Engine, MemoryStore, Options};
use infra_core::prelude::Backends;
use infra_core::sdk::layer::{Ended, Layered, Op, Recorder};
use infra_core::sdk::{Backend, ErrorKind, ManualClock};
use infra_testkit::scaleway::complete_list_fleet;

use super::support::{backend_on, raw, stand_in_on};

const REGION: &str = "fr-par";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_change_plan_of_complete_list_kinds_reads_nothing_and_a_vanished_resource_is_read_first()
 {
    let clock = Arc::new(ManualClock::new());
    let server = stand_in_on(&clock).await;
    let backend = backend_on(&server, &clock, None);
    let complete = backend.capabilities().complete_lists;
    for kind in [
        "imageRegistry",
        "containerNamespace",
        "container",
        "functionNamespace",
        "function",
        "compute",
    ] {
        assert!(
            complete.contains(kind),
            "{kind} lists complete: {complete:?}"
        );
    }
    let recorder = Recorder::new();
    let layered = Layered::wrap(backend.clone() as Arc<dyn Backend>, recorder.clone());
    let engine = Engine::new(
        Backends::new().with(layered as Arc<dyn Backend>),
        Arc::new(MemoryStore::new()),
    )
    .with_clock(clock.clone());
    let fleet = complete_list_fleet("ob-", 30);
    let made = engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .expect("the apply runs");
    assert!(made.is_success(), "{:#?}", made.result);

    recorder.clear();
    let plan = engine
        .plan(&fleet.plan(), &Options::default())
        .await
        .expect("the plan runs");
    assert!(!plan.has_changes(), "{:#?}", plan.changes);
    assert_eq!(recorder.count(Op::Read), 0, "{:#?}", recorder.calls());
    assert_eq!(recorder.count(Op::Ownership), 0, "{:#?}", recorder.calls());
    // One list per kind (and none per resource): 5 kinds of 30 resources.
    let lists = recorder.count(Op::List);
    assert!(
        (1..=6).contains(&lists),
        "{lists} lists: {:#?}",
        recorder.calls()
    );

    // A function deleted out of band: the list no longer shows it, the records do.
    let gone = backend
        .list("function", REGION)
        .await
        .expect("functions list")
        .into_iter()
        .find(|l| l.name == "ob-f4")
        .expect("ob-f4 is listed");
    let path = format!(
        "/functions/v1beta1/regions/{REGION}/functions/{}",
        gone.handle
    );
    let (status, _) = raw(&server, "DELETE", &path, None).await;
    assert_eq!(status, 200, "the out-of-band delete is accepted");
    clock.advance(std::time::Duration::from_secs(60));
    let listed = backend
        .list("function", REGION)
        .await
        .expect("functions list");
    assert!(listed.iter().all(|l| l.name != "ob-f4"), "{listed:?}");

    recorder.clear();
    let plan = engine
        .plan(&fleet.plan(), &Options::default())
        .await
        .expect("the plan runs");
    let missing: Vec<_> = plan
        .changes
        .iter()
        .filter(|c| c.action != "unchanged")
        .collect();
    assert_eq!(missing.len(), 1, "{missing:#?}");
    assert_eq!(missing[0].resource.name, "ob-f4");
    assert_eq!(missing[0].action, "create", "{:#?}", missing[0]);
    let reads: Vec<_> = recorder
        .calls()
        .into_iter()
        .filter(|c| c.op == Op::Read)
        .collect();
    assert_eq!(reads.len(), 1, "only the vanished one is read: {reads:#?}");
    assert_eq!(reads[0].target.as_deref(), Some(gone.handle.as_str()));
    assert_eq!(reads[0].ended, Ended::Failed(ErrorKind::NotFound));
    assert_eq!(recorder.count(Op::Ownership), 0, "{:#?}", recorder.calls());
    server.shutdown().await;
}
