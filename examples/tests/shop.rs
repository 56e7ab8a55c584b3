//! The `shop` example: every kind, references within and across clouds, a composed
//! secret; its plan serialises deterministically.

use std::collections::BTreeSet;
use std::sync::Arc;

use infra_core::engine::{Engine, ManualClock, MemoryStore, Options};
use infra_testkit::sim::SimCloud;

#[test]
fn the_shop_declares_every_kind() {
    let fleet = examples::shop::fleet().expect("the example fleet is sound");
    let kinds: BTreeSet<&str> = fleet.keys().keys().map(|(_, kind)| *kind).collect();
    assert_eq!(
        kinds,
        BTreeSet::from([
            "awsInstance",
            "compute",
            "container",
            "containerNamespace",
            "function",
            "functionNamespace",
            "iam",
            "imageRegistry",
            "objectStore",
            "postgres",
            "queues",
            "s3Bucket",
            "secrets",
            "securityGroup",
        ])
    );
    let providers: BTreeSet<&str> = fleet.keys().keys().map(|(provider, _)| *provider).collect();
    assert_eq!(providers, BTreeSet::from(["aws", "gcp", "scaleway"]));
}

#[test]
fn the_plan_serialises_deterministically() {
    let first = examples::shop::fleet().unwrap().plan().to_json();
    let second = examples::shop::fleet().unwrap().plan().to_json();
    assert_eq!(first, second);
    insta::assert_json_snapshot!("shop_plan", first);
}

#[test]
fn the_plan_reads_well() {
    insta::assert_snapshot!(
        "shop_plan_text",
        examples::shop::fleet().unwrap().plan().render()
    );
}

#[test]
fn the_plan_holds_no_secret_value() {
    // The only secrets are a generated one and a composition; the plan shows what they
    // are made from, never a value, and never the composition's text.
    let plan = examples::shop::fleet()
        .unwrap()
        .plan()
        .to_json()
        .to_string();
    assert!(plan.contains("\"generated\":{\"length\":32}"), "{plan}");
    assert!(
        !plan.contains("postgres://"),
        "a composed secret's template was shown"
    );
}

#[tokio::test]
async fn the_shop_applies_on_the_simulated_clouds_of_all_three_providers() {
    let fleet = examples::shop::fleet().unwrap();
    let cloud = SimCloud::with_clock(7, Arc::new(ManualClock::new()));
    let engine =
        Engine::new(cloud.backends(), Arc::new(MemoryStore::new())).with_clock(cloud.clock());
    let outcome = engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert!(outcome.result.is_success(), "{:#?}", outcome.result);
    let report = engine
        .plan(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert!(!report.has_changes(), "{}", report.render());

    // The analytics part lives on Google Cloud, marked as the shop's.
    let gcp: Vec<_> = cloud
        .resources()
        .into_iter()
        .filter(|r| r.provider == "gcp")
        .collect();
    let names: BTreeSet<&str> = gcp.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        BTreeSet::from(["export-loader", "order-events", "shop-order-exports"])
    );
    for resource in &gcp {
        assert_eq!(resource.region, "europe-west1");
        assert_eq!(
            resource
                .raw_tags
                .get("managed-by-infra")
                .map(String::as_str),
            Some("shop"),
            "{resource:?}"
        );
    }
    // The topic was asked for no delivery setting: Pub/Sub made no subscription, so
    // nothing of one is in force.
    let events = gcp.iter().find(|r| r.name == "order-events").unwrap();
    assert!(
        !events.config.contains_key("visibilityTimeoutSeconds"),
        "{events:?}"
    );
}
