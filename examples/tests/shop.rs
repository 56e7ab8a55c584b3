//! The `shop` example: every kind, references within and across clouds, a composed
//! secret; its plan serialises deterministically.

use std::collections::BTreeSet;

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
    // The only secrets are an environment variable's name and a composition; the plan
    // shows what they read, never a value, and never the composition's text.
    let plan = examples::shop::fleet()
        .unwrap()
        .plan()
        .to_json()
        .to_string();
    assert!(plan.contains("\"fromEnv\":\"SHOP_DB_PASSWORD\""));
    assert!(
        !plan.contains("postgres://"),
        "a composed secret's template was shown"
    );
}
