//! The safety paths, each shown from the outside: the marker read again right before a
//! delete, an orphan whose tags cannot be read, refresh leaving the ledger alone, a
//! resource moved to another region, and a delete refusal that never clears.

mod support;

use std::sync::Arc;

use infra_core::kinds::*;
use infra_core::{
    engine::{Engine, MemoryStore, NotAttemptedReason, Options, RecordStore, Step},
    prelude::{AwsRegion, Backends, Expr, Fleet, Partial},
    sdk::ErrorKind,
};
use infra_testkit::sim::Op;
use support::altered::{Alteration, Altered};

fn buckets(names: &[(&str, AwsRegion)]) -> Fleet {
    let mut f = Fleet::builder("safe");
    for (name, region) in names {
        f.declare(*region, *name, ObjectStore::new());
    }
    f.build().unwrap()
}

fn queue() -> Queues {
    Queues {
        fifo: Expr::lit(false),
        visibility_timeout_seconds: Partial::Unknown,
        retention_seconds: Partial::Unknown,
        dead_letter: Partial::Unknown,
        max_receive_count: Partial::Unknown,
        tags: Partial::Unknown,
    }
}

#[tokio::test]
async fn the_marker_is_read_again_right_before_a_delete() {
    let cloud = support::cloud(41);
    let (engine, _) = support::engine_in_memory(&cloud);
    let paris = AwsRegion::EuWest3;
    let two = buckets(&[("safe-a", paris), ("safe-b", paris)]);
    engine
        .apply(&two.plan(), &Options::default())
        .await
        .unwrap();

    let one = buckets(&[("safe-a", paris)]);
    let proposal = engine
        .propose(&one.plan(), &Options::default())
        .await
        .unwrap();
    assert!(
        proposal
            .report()
            .changes
            .iter()
            .any(|c| c.resource.name == "safe-b" && c.action == "prune")
    );
    // Between the plan and the delete, the bucket changes hands.
    let b = cloud.find("aws", "objectStore", "safe-b")[0].handle.clone();
    cloud.set_raw_tags(
        &b,
        [("managed-by-infra".to_owned(), "other".to_owned())].into(),
    );
    cloud.clear_calls();
    let outcome = engine.carry_out(&proposal).await.unwrap();
    let failed = &outcome.result.failed;
    assert_eq!(failed.len(), 1, "{:#?}", outcome.result);
    assert_eq!(failed[0].step, Step::Claim);
    assert!(
        failed[0]
            .error
            .message
            .contains("no longer carries this fleet's marker")
    );
    assert!(cloud.resource(&b).is_some(), "it was deleted");
    // The marker was read, and no delete was sent.
    let ops: Vec<Op> = cloud
        .calls()
        .iter()
        .filter(|c| c.handle.as_deref() == Some(b.as_str()))
        .map(|c| c.op)
        .collect();
    assert_eq!(ops, [Op::Ownership]);
}

/// An engine whose backend cannot read the tags of queues.
fn blind_to_queues(cloud: &infra_testkit::sim::SimCloud, store: Arc<MemoryStore>) -> Engine {
    Engine::new(
        Backends::new().with(Altered::new(
            cloud.backend("aws"),
            "queues",
            Alteration::TagsUnreadable,
        )),
        store,
    )
    .with_clock(cloud.clock())
}

#[tokio::test]
async fn an_orphan_whose_tags_cannot_be_read_is_not_prunable() {
    let cloud = support::cloud(42);
    let store = Arc::new(MemoryStore::new());
    let engine = blind_to_queues(&cloud, store.clone());
    let mut f = Fleet::builder("safe");
    f.declare(AwsRegion::EuWest3, "jobs", queue());
    let with_queue = f.build().unwrap();
    let outcome = engine
        .apply(&with_queue.plan(), &Options::default())
        .await
        .unwrap();
    assert!(outcome.is_success());

    // Its line is deleted: the ledger names it, but nothing can prove it is ours now.
    let without = Fleet::builder("safe").build().unwrap();
    cloud.clear_calls();
    let outcome = engine
        .apply(&without.plan(), &Options::default().force(true))
        .await
        .unwrap();
    let n = &outcome.result.not_attempted;
    assert_eq!(n.len(), 1, "{:#?}", outcome.result);
    assert_eq!(n[0].reason, NotAttemptedReason::NotPrunable);
    assert!(n[0].detail.as_deref().unwrap().contains("cannot be read"));
    assert!(!outcome.is_success());
    assert!(cloud.writes().is_empty());
    assert_eq!(cloud.count("aws", "queues"), 1);
    assert_eq!(
        store.load_ledger("safe").unwrap().len(),
        1,
        "the row is kept"
    );

    // And a declared queue of that name that the ledger does not list is not claimed.
    let fresh = blind_to_queues(&cloud, Arc::new(MemoryStore::new()));
    let report = fresh
        .plan(&with_queue.plan(), &Options::default())
        .await
        .unwrap();
    assert_eq!(report.changes[0].action, "failed");
    assert!(!report.is_complete());
}

#[tokio::test]
async fn refresh_never_writes_the_ledger() {
    let cloud = support::cloud(43);
    let (engine, store) = support::engine_in_memory(&cloud);
    let paris = AwsRegion::EuWest3;
    let fleet = buckets(&[("safe-a", paris), ("safe-b", paris)]);

    engine.refresh(&fleet.plan()).await.unwrap();
    assert!(
        store.load_ledger("safe").unwrap().is_empty(),
        "refresh adopted"
    );

    engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    let before = store.load_ledger("safe").unwrap();
    let a = cloud.find("aws", "objectStore", "safe-a")[0].handle.clone();
    cloud.remove(&a);
    cloud.clear_calls();
    let report = engine.refresh(&fleet.plan()).await.unwrap();
    assert_eq!(report.changes[0].action, "create", "{}", report.render());
    assert_eq!(store.load_ledger("safe").unwrap(), before);
    // What was seen is in the cache, and only that.
    let cached = store.load_cache("safe", "aws", "objectStore").unwrap();
    assert_eq!(cached.len(), 1);
    assert_eq!(cached[0].name, "safe-b");
    assert!(cloud.writes().is_empty());
}

#[tokio::test]
async fn a_resource_moved_to_another_region_is_deleted_there_first() {
    let cloud = support::cloud(44);
    let (engine, store) = support::engine_in_memory(&cloud);
    let here = buckets(&[("safe-moving", AwsRegion::EuWest3)]);
    engine
        .apply(&here.plan(), &Options::default())
        .await
        .unwrap();

    let there = buckets(&[("safe-moving", AwsRegion::UsEast1)]);
    let report = engine
        .plan(&there.plan(), &Options::default())
        .await
        .unwrap();
    let actions: Vec<(&str, &str)> = report
        .changes
        .iter()
        .map(|c| (c.resource.region.as_str(), c.action))
        .collect();
    assert_eq!(actions, [("us-east-1", "create"), ("eu-west-3", "prune")]);
    cloud.clear_calls();
    let outcome = engine
        .apply(&there.plan(), &Options::default())
        .await
        .unwrap();
    assert!(outcome.is_success(), "{:#?}", outcome.result);
    // Bucket names are global: the old one must go before the new one can be made.
    let writes: Vec<(Op, String)> = cloud
        .writes()
        .iter()
        .map(|c| (c.op, c.region.clone().unwrap()))
        .collect();
    assert_eq!(
        writes,
        [
            (Op::Delete, "eu-west-3".to_owned()),
            (Op::Create, "us-east-1".to_owned())
        ]
    );
    let rows: Vec<String> = store
        .load_ledger("safe")
        .unwrap()
        .rows
        .iter()
        .map(|r| r.region.clone())
        .collect();
    assert_eq!(rows, ["us-east-1"]);
}

#[tokio::test]
async fn a_delete_refusal_that_never_clears_fails_after_bounded_rounds() {
    let cloud = support::cloud(45);
    let (engine, store) = support::engine_in_memory(&cloud);
    let mut f = Fleet::builder("safe");
    f.declare(
        AwsRegion::EuWest3,
        "web",
        SecurityGroup {
            description: "web".into(),
            vpc_id: Partial::Unknown,
            ingress: Expr::lit([Rule::tcp(443, "0.0.0.0/0")].into()),
            egress: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    let with_group = f.build().unwrap();
    engine
        .apply(&with_group.plan(), &Options::default())
        .await
        .unwrap();
    let group = cloud.find("aws", "securityGroup", "web")[0].handle.clone();
    // Someone else's instance holds the group, for ever.
    let mut config = serde_json::Map::new();
    config.insert("securityGroup".into(), serde_json::json!(group));
    cloud
        .insert_foreign_with(
            "aws",
            "awsInstance",
            "eu-west-3",
            "theirs",
            config,
            Default::default(),
        )
        .unwrap();

    cloud.clear_calls();
    let empty = Fleet::builder("safe").build().unwrap();
    let outcome = engine
        .apply(&empty.plan(), &Options::default().force(true))
        .await
        .unwrap();
    let failed = &outcome.result.failed;
    assert_eq!(failed.len(), 1, "{:#?}", outcome.result);
    assert_eq!(failed[0].step, Step::Delete);
    assert_eq!(failed[0].error.kind, ErrorKind::DependencyViolation);
    assert!(
        failed[0].error.message.contains("theirs"),
        "the provider's own words"
    );
    let deletes = cloud.calls().iter().filter(|c| c.op == Op::Delete).count();
    assert_eq!(
        deletes, 2,
        "one try, one round that freed nothing, then stop"
    );
    assert!(cloud.resource(&group).is_some());
    assert_eq!(store.load_ledger("safe").unwrap().len(), 1, "still managed");
}
