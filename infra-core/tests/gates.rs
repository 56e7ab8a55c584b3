//! The safety gates and the membership rules, each with the case that must still pass.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;

use infra_core::kinds::*;
use infra_core::{
    engine::{ApplyError, NotAttemptedReason, Options, Plan, RecordStore, Step},
    prelude::{Aws, AwsRegion, Backends, Expr, Fleet, Partial, ScalewayRegion},
    sdk::{ErrorKind, RawTags, Unreachable},
};
use infra_testkit::sim::{Op, SimCloud};
use support::altered::{Alteration, Altered};

fn web_group() -> SecurityGroup {
    SecurityGroup {
        description: "web".into(),
        vpc_id: Partial::Unknown,
        ingress: Expr::lit([Rule::tcp(443, "0.0.0.0/0")].into()),
        egress: Partial::Unknown,
        tags: Partial::Unknown,
    }
}

/// A simulated cloud with the small fleet already applied, its engine and records.
async fn applied(
    seed: u64,
) -> (
    SimCloud,
    infra_core::engine::Engine,
    Arc<infra_core::engine::MemoryStore>,
    Fleet,
) {
    let cloud = support::cloud(seed);
    let (engine, store) = support::engine_in_memory(&cloud);
    let fleet = small(&[]);
    engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    (cloud, engine, store, fleet)
}

fn small(accounts: &[&str]) -> Fleet {
    let mut f = Fleet::builder("gates");
    for a in accounts {
        f.account::<Aws>(*a);
    }
    let here = AwsRegion::EuWest3;
    let group = f.declare(here, "web", web_group());
    f.declare(
        here,
        "app",
        AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Micro), group),
    );
    f.declare(here, "gates-assets", ObjectStore::new());
    f.build().unwrap()
}

#[tokio::test]
async fn a_backend_in_another_account_is_refused_before_anything_is_listed() {
    let cloud = support::cloud(1);
    let (engine, _) = support::engine_in_memory(&cloud);
    let fleet = small(&["111111111111"]);
    match engine.apply(&fleet.plan(), &Options::default()).await {
        Err(ApplyError::WrongAccount {
            provider, found, ..
        }) => {
            assert_eq!(provider, "aws");
            assert_eq!(found, cloud.account("aws"));
        }
        other => panic!(
            "expected the account refusal, got {:?}",
            other.map(|o| o.result)
        ),
    }
    assert!(
        cloud.calls().iter().all(|c| c.op == Op::Account),
        "{:#?}",
        cloud.calls()
    );

    // The account the fleet names passes.
    cloud.set_account("aws", "111111111111");
    let outcome = engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert!(outcome.result.is_success());
}

#[tokio::test]
async fn an_unreachable_provider_with_records_is_refused_and_a_test_double_is_not() {
    let (cloud, _, store, fleet) = applied(2).await;

    // The same records, and no AWS credentials: refused, naming the provider.
    let blind = infra_core::engine::Engine::new(
        Backends::new().with(Arc::new(Unreachable::new(
            "aws",
            "no AWS credentials were found",
        ))),
        store.clone(),
    );
    cloud.clear_calls();
    for plan in [fleet.plan(), Plan::absent(&fleet)] {
        match blind.apply(&plan, &Options::default()).await {
            Err(e @ ApplyError::Unreachable { .. }) => {
                assert!(e.to_string().contains("aws"), "{e}")
            }
            other => panic!(
                "expected the unreachable refusal, got {:?}",
                other.map(|o| o.result)
            ),
        }
    }
    assert_eq!(
        store.load_ledger("gates").unwrap().len(),
        3,
        "the records are untouched"
    );

    // A backend with no rows at all is refused as unbound.
    let unbound = infra_core::engine::Engine::new(Backends::new(), store.clone());
    assert!(matches!(
        unbound.plan(&fleet.plan(), &Options::default()).await,
        Err(ApplyError::NoBinding { rows: 3, .. })
    ));

    // A stand-in used deliberately (the simulator answers that it is reachable) works.
    let (double, _) = support::engine_in_memory(&cloud);
    let outcome = double
        .apply(&Plan::absent(&fleet), &Options::default())
        .await
        .unwrap();
    assert!(outcome.result.is_success());
}

#[tokio::test]
async fn declared_resources_of_an_unreachable_provider_without_records_are_not_attempted() {
    let cloud = support::cloud(3);
    let mut f = Fleet::builder("partial");
    f.declare(AwsRegion::EuWest3, "partial-aws", ObjectStore::new());
    f.declare(ScalewayRegion::FrPar, "partial-scw", ObjectStore::new());
    let fleet = f.build().unwrap();
    let backends = Backends::new()
        .with(Arc::new(Unreachable::new(
            "aws",
            "no AWS credentials were found",
        )))
        .with(cloud.backend("scaleway"));
    let engine =
        infra_core::engine::Engine::new(backends, Arc::new(infra_core::engine::MemoryStore::new()));
    let outcome = engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert_eq!(outcome.result.not_attempted.len(), 1);
    assert_eq!(
        outcome.result.not_attempted[0].reason,
        NotAttemptedReason::NoCredentials
    );
    assert_eq!(outcome.result.applied.len(), 1);
    assert!(
        !outcome.result.is_success(),
        "a resource left undone is not a success"
    );
}

#[tokio::test]
async fn a_permission_error_is_never_read_as_absent() {
    let (cloud, engine, _, fleet) = applied(4).await;
    cloud.deny("aws", Some("objectStore"), None);
    cloud.clear_calls();
    let outcome = engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    let failed = &outcome.result.failed;
    assert_eq!(failed.len(), 1, "{:#?}", outcome.result);
    assert_eq!(failed[0].step, Step::Observe);
    assert_eq!(failed[0].error.kind, ErrorKind::Denied);
    assert!(
        cloud.writes().is_empty(),
        "a denied read led to a write: {:#?}",
        cloud.writes()
    );
}

#[tokio::test]
async fn a_declared_resource_that_is_not_ours_is_reported_and_left_alone() {
    let cloud = support::cloud(5);
    let (engine, store) = support::engine_in_memory(&cloud);
    let handle = cloud
        .insert_foreign(
            "aws",
            "objectStore",
            "eu-west-3",
            "gates-assets",
            RawTags::new(),
        )
        .unwrap();
    let fleet = small(&[]);
    let outcome = engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    let failed = &outcome.result.failed;
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].step, Step::Claim);
    assert!(
        failed[0]
            .error
            .message
            .contains("does not carry the `managed-by-infra` marker")
    );
    assert!(
        cloud
            .writes()
            .iter()
            .all(|c| c.handle.as_deref() != Some(handle.as_str()))
    );
    let rows = store.load_ledger("gates").unwrap();
    assert!(
        rows.rows.iter().all(|r| r.name != "gates-assets"),
        "never adopted by name"
    );

    // And a teardown leaves it standing.
    engine
        .apply(&Plan::absent(&fleet), &Options::default())
        .await
        .unwrap();
    assert!(cloud.resource(&handle).is_some());
}

#[tokio::test]
async fn forget_drops_the_record_and_touches_nothing() {
    let cloud = support::cloud(6);
    let (engine, store) = support::engine_in_memory(&cloud);
    engine
        .apply(&small(&[]).plan(), &Options::default())
        .await
        .unwrap();

    let mut f = Fleet::builder("gates");
    let here = AwsRegion::EuWest3;
    let group = f.declare(here, "web", web_group());
    f.declare(
        here,
        "app",
        AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Micro), group),
    );
    f.forget::<Aws, ObjectStore>("gates-assets");
    let fleet = f.build().unwrap();
    cloud.clear_calls();
    let outcome = engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert!(outcome.result.is_success());
    assert!(cloud.writes().is_empty());
    assert_eq!(cloud.find("aws", "objectStore", "gates-assets").len(), 1);
    let names: BTreeSet<String> = store
        .load_ledger("gates")
        .unwrap()
        .rows
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["app".to_owned(), "web".to_owned()].into());
}

#[tokio::test]
async fn drift_is_repaired_in_place_and_a_forces_replace_field_replaces() {
    let (cloud, engine, _, fleet) = applied(7).await;
    let group = cloud.find("aws", "securityGroup", "web").remove(0);
    cloud.set_field(
        &group.handle,
        "ingress",
        serde_json::json!([{"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidr": "0.0.0.0/0"}]),
    );
    let report = engine
        .plan(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    let change = report
        .changes
        .iter()
        .find(|c| c.resource.name == "web")
        .unwrap();
    let fields: Vec<&str> = change.fields.iter().map(|f| f.field).collect();
    assert_eq!(
        (change.action, fields.as_slice()),
        ("update", &["ingress"][..])
    );
    // The plan shows what the cloud holds and what the declaration asks for.
    assert_eq!(
        change.fields[0].before,
        serde_json::json!([{"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidr": "0.0.0.0/0"}])
    );
    assert_eq!(
        change.fields[0].after,
        serde_json::json!([{"protocol": "tcp", "fromPort": 443, "toPort": 443, "cidr": "0.0.0.0/0"}])
    );
    engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert!(
        !engine
            .plan(&fleet.plan(), &Options::default())
            .await
            .unwrap()
            .has_changes()
    );

    // A changed instance type cannot be changed in place.
    let mut f = Fleet::builder("gates");
    let here = AwsRegion::EuWest3;
    let g = f.declare(here, "web", web_group());
    f.declare(
        here,
        "app",
        AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Small), g),
    );
    f.declare(here, "gates-assets", ObjectStore::new());
    let bigger = f.build().unwrap();
    let outcome = engine
        .apply(&bigger.plan(), &Options::default())
        .await
        .unwrap();
    let replaced: Vec<_> = outcome
        .result
        .applied
        .iter()
        .filter(|a| a.change == infra_core::engine::Change::Replaced)
        .collect();
    assert_eq!(replaced.len(), 1);
    assert_eq!(replaced[0].resource.name, "app");
    assert_eq!(
        cloud.find("aws", "awsInstance", "app").len(),
        1,
        "the old instance is gone"
    );
}

#[tokio::test]
async fn a_list_that_lags_a_create_makes_no_twin() {
    let cloud = support::cloud(8);
    let (engine, _) = support::engine_in_memory(&cloud);
    let fleet = small(&[]);
    cloud.set_list_lag(2);
    engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert_eq!(cloud.find("aws", "awsInstance", "app").len(), 1);
}

#[tokio::test]
async fn target_takes_dependencies_along_and_exclude_leaves_dependants_out() {
    let cloud = support::cloud(9);
    let (engine, _) = support::engine_in_memory(&cloud);
    let fleet = small(&[]);
    let only_app = Options::default().targets(["app"]);
    let outcome = engine.apply(&fleet.plan(), &only_app).await.unwrap();
    let created: BTreeSet<&str> = outcome
        .result
        .applied
        .iter()
        .map(|a| a.resource.name.as_str())
        .collect();
    assert_eq!(created, ["app", "web"].into());
    assert_eq!(
        outcome.result.not_attempted[0].resource.name,
        "gates-assets"
    );
    assert_eq!(
        outcome.result.not_attempted[0].reason,
        NotAttemptedReason::Filtered
    );
    assert!(
        outcome.result.is_success(),
        "filtered resources are the caller's choice"
    );

    let cloud = support::cloud(10);
    let (engine, _) = support::engine_in_memory(&cloud);
    let without_web = Options::default().excludes(["aws/securityGroup/web"]);
    let outcome = engine.apply(&fleet.plan(), &without_web).await.unwrap();
    let filtered: BTreeSet<&str> = outcome
        .result
        .not_attempted
        .iter()
        .map(|n| n.resource.name.as_str())
        .collect();
    assert_eq!(filtered, ["app", "web"].into());
}

/// Each not-attempted resource's name and reason.
fn not_attempted(result: &infra_core::engine::ApplyResult) -> Vec<(&str, NotAttemptedReason)> {
    result
        .not_attempted
        .iter()
        .map(|n| (n.resource.name.as_str(), n.reason))
        .collect()
}

/// The small fleet applied through a backend that lacks security groups or, when
/// `governs`, only records changes to them for approval.
async fn apply_without_groups(seed: u64, governs: bool) -> (SimCloud, infra_core::engine::Outcome) {
    let cloud = support::cloud(seed);
    let how = if governs {
        Alteration::Governs
    } else {
        Alteration::Lacks
    };
    let backends = Backends::new().with(Altered::new(cloud.backend("aws"), "securityGroup", how));
    let engine =
        infra_core::engine::Engine::new(backends, Arc::new(infra_core::engine::MemoryStore::new()));
    let outcome = engine
        .apply(&small(&[]).plan(), &Options::default())
        .await
        .unwrap();
    (cloud, outcome)
}

#[tokio::test]
async fn a_kind_the_backend_lacks_is_not_attempted_and_its_dependants_wait() {
    let (_cloud, outcome) = apply_without_groups(11, false).await;
    let reasons = not_attempted(&outcome.result);
    assert_eq!(
        reasons,
        [
            ("app", NotAttemptedReason::DependencyFailed),
            ("web", NotAttemptedReason::UnsupportedKind)
        ]
    );
    assert_eq!(
        outcome.result.applied.len(),
        1,
        "the independent bucket still goes ahead"
    );
}

#[tokio::test]
async fn a_change_recorded_for_approval_is_not_attempted_and_not_a_failure() {
    let (cloud, outcome) = apply_without_groups(12, true).await;
    let reasons = not_attempted(&outcome.result);
    assert_eq!(
        reasons,
        [
            ("app", NotAttemptedReason::DependencyFailed),
            ("web", NotAttemptedReason::AwaitingApproval)
        ]
    );
    assert!(outcome.result.failed.is_empty(), "{:#?}", outcome.result);
    assert!(
        cloud
            .writes()
            .iter()
            .all(|w| w.kind != Some("securityGroup")),
        "the governed kind was changed"
    );
    // The envelope says which version knows the reason, and reads back.
    let envelope = outcome.result.to_envelope();
    assert_eq!(envelope["apply"], "v4");
    assert_eq!(envelope["notAttempted"][1]["reason"], "awaiting-approval");
    assert_eq!(
        infra_core::engine::ApplyResult::from_envelope(&envelope).unwrap(),
        outcome.result
    );
}

/// The small fleet with the instance one size up: a change that forces a replace, and
/// instances may share a name, so the new one is created before the old one goes.
fn small_resized() -> Fleet {
    let mut f = Fleet::builder("gates");
    let here = AwsRegion::EuWest3;
    let group = f.declare(here, "web", web_group());
    f.declare(
        here,
        "app",
        AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Small), group),
    );
    f.declare(here, "gates-assets", ObjectStore::new());
    f.build().unwrap()
}

#[tokio::test]
async fn a_create_whose_answer_was_lost_is_found_not_left_behind() {
    let (cloud, engine, _store, _fleet) = applied(31).await;
    let instances = |cloud: &SimCloud| {
        cloud
            .calls()
            .iter()
            .filter(|c| c.op == Op::Create && c.kind == Some("awsInstance"))
            .count()
    };
    let before = instances(&cloud);
    // The replace's create lands, but its answer never arrives.
    cloud.lose_response_nth_matching(
        infra_testkit::sim::CallFilter::op(Op::Create).kind("awsInstance"),
        1,
    );
    let outcome = engine
        .apply(&small_resized().plan(), &Options::default())
        .await
        .unwrap();
    assert!(outcome.result.is_success(), "{:#?}", outcome.result);
    assert_eq!(instances(&cloud) - before, 1, "created once, not again");
    let app: Vec<_> = cloud
        .calls()
        .iter()
        .filter(|c| c.op == Op::Delete && c.name.as_deref() == Some("app"))
        .map(|c| c.outcome)
        .collect();
    assert_eq!(app.len(), 1, "the old instance is deleted once: {app:?}");
    let again = engine
        .plan(&small_resized().plan(), &Options::default())
        .await
        .unwrap();
    assert!(!again.has_changes(), "{}", again.render());
}

#[tokio::test]
async fn discover_rebuilds_a_lost_ledger_from_markers_and_only_from_them() {
    let (cloud, _, store, fleet) = applied(12).await;
    let before = store.load_ledger("gates").unwrap();
    cloud
        .insert_foreign(
            "aws",
            "objectStore",
            "eu-west-3",
            "not-ours",
            RawTags::new(),
        )
        .unwrap();
    cloud
        .insert_foreign(
            "aws",
            "queues",
            "eu-west-3",
            "other-fleet",
            [("managed-by-infra".to_owned(), "another".to_owned())].into(),
        )
        .unwrap();

    // The records are lost.
    let (fresh, fresh_store) = support::engine_in_memory(&cloud);
    let rebuilt = fresh.discover(&fleet.plan()).await.unwrap();
    assert!(rebuilt.is_complete(), "{rebuilt:?}");
    assert_eq!(rebuilt.ledger.rows, before.rows);
    assert_eq!(rebuilt.added.len(), before.len());
    // Every resource found is declared: none needs a confirmation to be deleted.
    assert!(rebuilt.ledger.discovered.is_empty());
    assert_eq!(fresh_store.load_ledger("gates").unwrap(), before);
    assert!(cloud.writes().iter().all(|c| c.op != Op::Delete));
}

#[test]
fn the_engine_can_be_spawned_its_futures_are_send() {
    fn send<T: Send>(_: &T) {}
    let cloud = support::cloud(13);
    let (engine, _) = support::engine_in_memory(&cloud);
    let fleet = small(&[]);
    let plan = fleet.plan();
    let options = Options::default();
    send(&engine.plan(&plan, &options));
    send(&engine.apply(&plan, &options));
    send(&engine.refresh(&plan));
    send(&engine.discover(&plan));
}

#[tokio::test]
async fn two_resources_of_one_name_resolve_by_marker_or_are_a_conflict() {
    let (cloud, engine, _, fleet) = applied(14).await;

    // Someone else's instance with the same name: ours is still told apart.
    cloud
        .insert_foreign("aws", "awsInstance", "eu-west-3", "app", RawTags::new())
        .unwrap();
    let report = engine
        .plan(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert!(
        !report.has_changes() && !report.has_failures(),
        "{}",
        report.render()
    );

    // A second one carrying our marker: a person must decide.
    cloud
        .insert_foreign(
            "aws",
            "awsInstance",
            "eu-west-3",
            "app",
            [("managed-by-infra".to_owned(), "gates".to_owned())].into(),
        )
        .unwrap();
    cloud.clear_calls();
    let outcome = engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    let failed = &outcome.result.failed;
    assert_eq!(failed.len(), 1, "{:#?}", outcome.result);
    assert_eq!(
        (failed[0].step, failed[0].error.kind),
        (Step::Observe, ErrorKind::Conflict)
    );
    assert!(
        failed[0]
            .error
            .message
            .contains("3 resources are named \"app\""),
        "{}",
        failed[0].error
    );
    assert!(cloud.writes().is_empty());
}
