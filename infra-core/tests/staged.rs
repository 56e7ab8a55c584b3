//! The staged scenario on the simulated cloud: full → ramp-up → ramp-down → trimmed →
//! empty, with the exact actions and their order asserted at each stage.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use infra_core::{
    engine::{Options, Plan, RecordStore},
    prelude::Fleet,
};
use infra_testkit::sim::{CallRecord, Op, SimCloud};
use support::{Stage, assert_total_and_disjoint, staged};

/// `provider/kind/name` → what the apply did to it.
fn actions(result: &infra_core::engine::ApplyResult) -> BTreeMap<String, String> {
    let id = |s: &infra_core::engine::Subject| format!("{}/{}/{}", s.provider, s.kind, s.name);
    let mut out = BTreeMap::new();
    for a in &result.applied {
        out.insert(id(&a.resource), format!("{:?}", a.change).to_lowercase());
    }
    for p in &result.pruned {
        out.insert(id(&p.resource), "pruned".to_owned());
    }
    for n in &result.not_attempted {
        out.insert(id(&n.resource), format!("not-attempted:{}", n.reason));
    }
    for f in &result.failed {
        out.insert(id(&f.resource), format!("failed:{}", f.error));
    }
    out
}

fn only<'a>(actions: &'a BTreeMap<String, String>, what: &str) -> BTreeSet<&'a str> {
    actions
        .iter()
        .filter(|(_, a)| a.as_str() == what)
        .map(|(r, _)| r.as_str())
        .collect()
}

/// The position of each successful write of `op`, by resource name.
fn positions(calls: &[CallRecord], op: Op) -> BTreeMap<String, u64> {
    calls
        .iter()
        .filter(|c| c.op == op && c.outcome.is_ok())
        .filter_map(|c| c.name.clone().map(|n| (n, c.seq)))
        .collect()
}

/// Asserts that each write of `op` to a resource comes after (or, for deletes, before)
/// the writes to what it depends on, with edges read from `fleet`'s declaration.
fn assert_ordered(fleet: &Fleet, calls: &[CallRecord], op: Op) {
    let at = positions(calls, op);
    let names: Vec<&str> = fleet
        .resources()
        .map(|r| r.reference().name.as_str())
        .collect();
    for r in fleet.resources() {
        for &d in r.deps() {
            let (me, dep) = (r.reference().name.as_str(), names[d]);
            if let (Some(a), Some(b)) = (at.get(me), at.get(dep)) {
                match op {
                    Op::Delete => assert!(
                        a < b,
                        "{me} must be deleted before {dep}, which it depends on"
                    ),
                    _ => assert!(
                        b < a,
                        "{dep} must be written before {me}, which depends on it"
                    ),
                }
            }
        }
    }
}

async fn run_stage(
    cloud: &SimCloud,
    engine: &infra_core::engine::Engine,
    stage: Stage,
    orphans: &[infra_core::engine::Subject],
) -> BTreeMap<String, String> {
    cloud.clear_calls();
    let fleet = staged(stage);
    let plan = fleet.plan();
    // The plan is made first, and makes no write.
    let report = engine.plan(&plan, &Options::default()).await.expect("plan");
    assert!(
        cloud.writes().is_empty(),
        "planning wrote: {:?}",
        cloud.writes()
    );
    assert!(!report.has_failures(), "{}", report.render());
    let outcome = engine
        .apply(&plan, &Options::default())
        .await
        .expect("apply");
    assert_total_and_disjoint(&outcome.result, &support::handed_in(&plan, orphans));
    assert!(outcome.result.is_success(), "{:#?}", outcome.result);
    let calls = cloud.calls();
    assert_ordered(&fleet, &calls, Op::Create);
    assert_ordered(&fleet, &calls, Op::Update);
    // Right after, a second plan has nothing to do.
    let again = engine.plan(&plan, &Options::default()).await.expect("plan");
    assert!(
        !again.has_changes(),
        "a second plan after {stage:?} is not empty:\n{}",
        again.render()
    );
    actions(&outcome.result)
}

fn subject(kind: &str, name: &str, provider: &str, region: &str) -> infra_core::engine::Subject {
    infra_core::engine::Subject {
        provider: provider.into(),
        kind: kind.into(),
        name: name.into(),
        region: region.into(),
    }
}

#[tokio::test]
async fn the_staged_scenario_converges_stage_by_stage() {
    let cloud = support::cloud(7);
    let (engine, store) = support::engine_in_memory(&cloud);

    // Stage 1: full. Fourteen creates, dependencies first.
    let full = run_stage(&cloud, &engine, Stage::Full, &[]).await;
    assert_eq!(only(&full, "created").len(), 14, "{full:#?}");
    assert_eq!(store.load_ledger("staged").unwrap().len(), 14);

    // Stage 2: ramp-up. Same graph, bigger numbers: six updates in place.
    let up = run_stage(&cloud, &engine, Stage::RampUp, &[]).await;
    let updated: BTreeSet<&str> = [
        "aws/postgres/db",
        "aws/queues/q1",
        "aws/queues/q2",
        "aws/queues/q3",
        "aws/queues/q4",
        "scaleway/function/worker",
    ]
    .into();
    assert_eq!(only(&up, "updated"), updated);
    assert_eq!(only(&up, "unchanged").len(), 8);

    // Stage 3: ramp-down. The same paths back.
    let down = run_stage(&cloud, &engine, Stage::RampDown, &[]).await;
    assert_eq!(only(&down, "updated"), updated);

    // Stage 4: trimmed. Two lines deleted (only the ledger knows them), one added.
    let orphans = [
        subject("awsInstance", "web-3", "aws", "eu-west-3"),
        subject("queues", "q4", "aws", "eu-west-3"),
    ];
    let trimmed = run_stage(&cloud, &engine, Stage::Trimmed, &orphans).await;
    assert_eq!(
        only(&trimmed, "pruned"),
        ["aws/awsInstance/web-3", "aws/queues/q4"].into()
    );
    assert_eq!(
        only(&trimmed, "created"),
        ["aws/objectStore/staged-logs"].into()
    );
    assert_eq!(only(&trimmed, "unchanged").len(), 12);
    assert_eq!(
        cloud.writes().iter().filter(|c| c.op == Op::Delete).count(),
        2
    );
    assert_eq!(store.load_ledger("staged").unwrap().len(), 13);

    // Stage 5: empty. Everything is an orphan, and everything goes.
    let ledger = store.load_ledger("staged").unwrap();
    let orphans: Vec<_> = ledger
        .rows
        .iter()
        .map(|r| subject(&r.kind, &r.name, &r.provider, &r.region))
        .collect();
    let empty = run_stage(&cloud, &engine, Stage::Empty, &orphans).await;
    assert_eq!(only(&empty, "pruned").len(), 13, "{empty:#?}");
    assert!(store.load_ledger("staged").unwrap().is_empty());
    assert!(
        cloud
            .resources()
            .iter()
            .all(|r| r.raw_tags.get("managed-by-infra").map(String::as_str) != Some("staged")),
        "resources left behind: {:#?}",
        cloud.resources()
    );
}

#[tokio::test]
async fn destroy_ends_where_the_empty_stage_ends_with_dependants_deleted_first() {
    let cloud = support::cloud(11);
    let (engine, store) = support::engine_in_memory(&cloud);
    let fleet = staged(Stage::Full);
    engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .expect("apply");

    cloud.clear_calls();
    let teardown = Plan::absent(&fleet);
    let outcome = engine
        .apply(&teardown, &Options::default())
        .await
        .expect("destroy");
    assert!(outcome.result.is_success(), "{:#?}", outcome.result);
    assert_eq!(outcome.result.pruned.len(), 14);
    assert!(outcome.result.pruned.iter().all(|p| !p.already_absent));
    let calls = cloud.calls();
    // Ordered by the declaration's edges, read backwards: no delete was refused.
    assert_ordered(&fleet, &calls, Op::Delete);
    assert!(
        calls
            .iter()
            .all(|c| c.op != Op::Delete || c.outcome.is_ok()),
        "a delete was refused: {calls:#?}"
    );
    assert!(store.load_ledger("staged").unwrap().is_empty());
    assert!(cloud.is_empty(), "{:#?}", cloud.resources());
    // And the records of what was seen are gone with them.
    assert!(store.cached_pairs("staged").unwrap().is_empty());
}

#[tokio::test]
async fn the_teardown_is_the_build_order_reversed_when_run_one_call_at_a_time() {
    let cloud = support::cloud(3);
    let (engine, _store) = support::engine_in_memory(&cloud);
    let fleet = staged(Stage::Full);
    let one = Options::default().parallelism(1);
    cloud.clear_calls();
    engine.apply(&fleet.plan(), &one).await.expect("apply");
    let created: Vec<String> = cloud
        .calls()
        .iter()
        .filter(|c| c.op == Op::Create)
        .filter_map(|c| c.name.clone())
        .collect();
    cloud.clear_calls();
    engine
        .apply(&Plan::absent(&fleet), &one)
        .await
        .expect("destroy");
    let mut deleted: Vec<String> = cloud
        .calls()
        .iter()
        .filter(|c| c.op == Op::Delete)
        .filter_map(|c| c.name.clone())
        .collect();
    deleted.reverse();
    assert_eq!(deleted, created);
    insta::assert_snapshot!(created.join("\n"));
}
