//! Observation by the page: a list that hands each resource over whole spares the reads,
//! and a list that misses a resource the records hold never makes it absent without a
//! read. Checked on the simulated cloud, through layers that make its lists complete or
//! incomplete, counting the calls the engine makes.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use infra_core::engine::{Backends, Engine, MemoryStore, Options};
use infra_core::kinds::ObjectStore;
use infra_core::prelude::{AwsRegion, Expr, Fleet, Partial};
use infra_core::sdk::layer::{Answer, Call, Layer, Layered, Next, Op, Recorder};
use infra_core::sdk::{Backend, BackendError, Capabilities, Listed};
use infra_testkit::sim::SimCloud;

const KIND: &str = "objectStore";

/// Lists made whole (each resource's read and tags handed over with it) and, for the
/// names in `omitted`, incomplete (left out, as an eventually consistent list may).
#[derive(Clone, Default)]
struct Lists {
    whole: bool,
    omitted: Arc<Mutex<BTreeSet<String>>>,
}

#[async_trait]
impl Layer for Lists {
    fn capabilities(&self, mut caps: Capabilities) -> Capabilities {
        if self.whole {
            caps.complete_lists.insert(KIND);
        }
        caps
    }

    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        let Call::List { kind, region } = call else {
            return next.run(call).await;
        };
        let Answer::List(listed) = next.run(call).await? else {
            unreachable!("a list answers a list");
        };
        let omitted = self.omitted.lock().unwrap().clone();
        let mut out = Vec::new();
        for l in listed {
            if omitted.contains(&l.name) {
                continue;
            }
            if self.whole {
                // Below the recorder: these calls are the list's own, not the engine's.
                let reading = next.backend().read(kind, region, &l.handle).await?;
                let tags = next.backend().ownership(kind, region, &l.handle).await?;
                out.push(Listed::new(l.name, l.handle).with_reading(reading.with_raw_tags(tags)));
            } else {
                out.push(l);
            }
        }
        Ok(Answer::List(out))
    }
}

struct Setup {
    cloud: SimCloud,
    engine: Engine,
    recorder: Recorder,
    lists: Lists,
    fleet: Fleet,
}

async fn applied(whole: bool) -> Setup {
    let cloud = SimCloud::new(37);
    let lists = Lists {
        whole,
        ..Lists::default()
    };
    let recorder = Recorder::new();
    let backend: Arc<dyn Backend> = Layered::wrap(
        Layered::wrap(cloud.backend("aws"), lists.clone()),
        recorder.clone(),
    );
    let engine = Engine::new(Backends::new().with(backend), Arc::new(MemoryStore::new()));
    let mut f = Fleet::builder("pages");
    for name in ["pages-a", "pages-b", "pages-c"] {
        f.declare(
            AwsRegion::EuWest3,
            name,
            ObjectStore {
                versioning: Partial::Known(Expr::lit(false)),
                ..ObjectStore::new()
            },
        );
    }
    let fleet = f.build().unwrap();
    let outcome = engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert!(outcome.is_success(), "{:?}", outcome.result);
    recorder.clear();
    Setup {
        cloud,
        engine,
        recorder,
        lists,
        fleet,
    }
}

fn ops(recorder: &Recorder, op: Op) -> Vec<String> {
    recorder
        .calls()
        .into_iter()
        .filter(|c| c.op == op)
        .filter_map(|c| c.target)
        .collect()
}

fn lists(recorder: &Recorder) -> usize {
    recorder
        .calls()
        .into_iter()
        .filter(|c| c.op == Op::List)
        .count()
}

fn handle(cloud: &SimCloud, name: &str) -> String {
    let found = cloud.find("aws", KIND, name);
    assert_eq!(found.len(), 1, "{name}: {found:?}");
    found[0].handle.clone()
}

#[tokio::test]
async fn whole_lists_spare_every_read_and_ownership_call_of_a_no_change_plan() {
    let s = applied(true).await;
    let report = s
        .engine
        .plan(&s.fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert!(
        !report.has_changes() && report.is_complete(),
        "{}",
        report.render()
    );
    assert_eq!(ops(&s.recorder, Op::Read), Vec::<String>::new());
    assert_eq!(ops(&s.recorder, Op::Ownership), Vec::<String>::new());
    assert_eq!(
        s.recorder
            .calls()
            .iter()
            .filter(|c| c.op == Op::List)
            .count(),
        1
    );

    // What the list handed over is what the plan decides on: a change made out of
    // band shows without a read.
    let b = handle(&s.cloud, "pages-b");
    assert!(s.cloud.set_field(&b, "versioning", serde_json::json!(true)));
    s.recorder.clear();
    let report = s
        .engine
        .plan(&s.fleet.plan(), &Options::default())
        .await
        .unwrap();
    let changed: Vec<_> = report
        .changes
        .iter()
        .filter(|c| c.action != "unchanged")
        .map(|c| (c.resource.name.as_str(), c.action))
        .collect();
    assert_eq!(changed, [("pages-b", "update")], "{}", report.render());
    assert_eq!(ops(&s.recorder, Op::Read), Vec::<String>::new());
}

#[tokio::test]
async fn a_recorded_resource_its_list_omits_is_read_before_it_is_called_absent() {
    for whole in [false, true] {
        let s = applied(whole).await;
        let b = handle(&s.cloud, "pages-b");
        s.lists.omitted.lock().unwrap().insert("pages-b".to_owned());

        // Still there: the read finds it, and nothing is to change.
        let report = s
            .engine
            .plan(&s.fleet.plan(), &Options::default())
            .await
            .unwrap();
        assert!(!report.has_changes(), "whole={whole}: {}", report.render());
        assert!(ops(&s.recorder, Op::Read).contains(&b), "whole={whole}");
        assert_eq!(
            lists(&s.recorder),
            1,
            "whole={whole}: the cache holds its handle, so it is read, not waited for"
        );

        // Gone: called absent only after a read said so.
        assert!(s.cloud.remove(&b));
        s.recorder.clear();
        let report = s
            .engine
            .plan(&s.fleet.plan(), &Options::default())
            .await
            .unwrap();
        let changed: Vec<_> = report
            .changes
            .iter()
            .filter(|c| c.action != "unchanged")
            .map(|c| (c.resource.name.as_str(), c.action))
            .collect();
        assert_eq!(changed, [("pages-b", "create")], "whole={whole}");
        let reads = ops(&s.recorder, Op::Read);
        assert!(reads.contains(&b), "whole={whole}: {reads:?}");
        assert_eq!(lists(&s.recorder), 1, "whole={whole}");
        if whole {
            assert_eq!(
                reads,
                std::slice::from_ref(&b),
                "the others came whole with their list"
            );
        }
    }
}

#[tokio::test]
async fn with_records_lost_whole_lists_tell_the_fleets_strays_without_an_ownership_call() {
    let s = applied(true).await;
    // A fleet that declares only one of the three, with no records: the other two carry
    // its marker and are found among what was listed, on the tags the list handed over.
    let lost = Engine::new(s.engine.backends().clone(), Arc::new(MemoryStore::new()));
    let mut f = Fleet::builder("pages");
    f.declare(
        AwsRegion::EuWest3,
        "pages-a",
        ObjectStore {
            versioning: Partial::Known(Expr::lit(false)),
            ..ObjectStore::new()
        },
    );
    let fleet = f.build().unwrap();
    let report = lost.plan(&fleet.plan(), &Options::default()).await.unwrap();
    let strays: Vec<&str> = report.strays.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(strays, ["pages-b", "pages-c"], "{}", report.render());
    assert_eq!(ops(&s.recorder, Op::Ownership), Vec::<String>::new());
    assert_eq!(ops(&s.recorder, Op::Read), Vec::<String>::new());
}
