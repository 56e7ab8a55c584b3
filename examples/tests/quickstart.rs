//! The quickstart fleet across "processes": each step opens the simulated world and the
//! records from their files again, as separate runs of the example would.

use std::path::Path;
use std::sync::Arc;

use infra_core::engine::{Engine, FileStore, ManualClock, Options, Plan};
use infra_testkit::sim::SimCloud;

fn open(world: &Path, state: &Path) -> (Engine, SimCloud) {
    let cloud =
        SimCloud::open_with_clock(world, Arc::new(ManualClock::new())).expect("the world opens");
    let engine =
        Engine::new(cloud.backends(), Arc::new(FileStore::new(state))).with_clock(cloud.clock());
    (engine, cloud)
}

/// Every byte under a directory, as text.
fn read_all(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            text.push_str(&read_all(&path));
        } else {
            text.push_str(&std::fs::read_to_string(&path).unwrap());
        }
    }
    text
}

#[tokio::test]
async fn apply_then_plan_then_destroy_across_runs() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path().join("simulated-cloud.json");
    let state = dir.path().join("state");
    let fleet = examples::quickstart::fleet().expect("the quickstart fleet is sound");
    assert!(fleet.len() >= 8);
    assert_eq!(fleet.providers().len(), 2);

    let (engine, _) = open(&world, &state);
    let outcome = engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert!(outcome.result.is_success(), "{:#?}", outcome.result);
    assert_eq!(outcome.result.applied.len(), fleet.len());

    // A new run: nothing to do.
    let (engine, cloud) = open(&world, &state);
    let report = engine
        .plan(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert!(!report.has_changes(), "{}", report.render());

    // The records never hold a secret value: neither the generated password nor the
    // URL composed from it.
    let secrets: Vec<String> = cloud
        .resources()
        .iter()
        .filter(|r| r.kind == "secrets")
        .filter_map(|r| cloud.stored_secret(&r.handle))
        .map(|s| s.expose().to_owned())
        .collect();
    assert_eq!(secrets.len(), 2);
    let records = read_all(&state);
    assert!(
        records.contains("app-db-url"),
        "the records name the secret"
    );
    for value in &secrets {
        assert!(
            !records.contains(value.as_str()),
            "a secret value reached the records"
        );
    }

    // A third run tears it down, dependants first, and leaves nothing.
    let (engine, _) = open(&world, &state);
    let outcome = engine
        .apply(&Plan::absent(&fleet), &Options::default())
        .await
        .unwrap();
    assert!(outcome.result.is_success(), "{:#?}", outcome.result);
    let (_, cloud) = open(&world, &state);
    assert!(cloud.is_empty(), "{:#?}", cloud.resources());
    assert!(
        !state.join("quickstart/aws").exists(),
        "emptied cache pairs delete their files"
    );
}
