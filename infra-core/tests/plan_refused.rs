//! A plan that carrying out would refuse says so where programs read it: `plan --json`
//! carries `refused` (by the brake or by `prevent_destroy`, with what the refusal
//! names), and `plan --detailed-exitcode` exits 1, never 2 ("apply this"). A plan that
//! would not be refused has no `refused` member.

mod support;

use infra_core::kinds::ObjectStore;
use infra_core::prelude::{AwsRegion, CheckReport, Fleet};
use infra_testkit::sim::SimCloud;
use support::console::{Session, answering, json};

const NAMES: [&str; 4] = ["shop-a", "shop-b", "shop-c", "shop-d"];

/// Buckets `names`; with `protect`, `shop-a` is declared with `prevent_destroy`.
fn buckets(names: &[&str], protect: bool) -> Result<Fleet, CheckReport> {
    let mut f = Fleet::builder("shop");
    for name in names {
        let key = f.declare(AwsRegion::EuWest3, *name, ObjectStore::new());
        if protect && *name == "shop-a" {
            f.prevent_destroy(key);
        }
    }
    f.build()
}

/// The four buckets applied; `gone` of them then deleted behind the engine's back.
async fn with_absent(seed: u64, gone: usize, protect: bool) -> (SimCloud, Session) {
    let cloud = support::cloud(seed);
    let mut s = answering(false, true);
    let (code, _, err) = s
        .run(buckets(&NAMES, protect), &cloud, &["apply", "--yes"])
        .await;
    assert_eq!(code, 0, "{err}");
    for name in &NAMES[..gone] {
        let handle = cloud.find("aws", "objectStore", name)[0].handle.clone();
        assert!(cloud.remove(&handle));
    }
    cloud.clear_calls();
    (cloud, s)
}

#[tokio::test]
async fn a_plan_the_brake_would_refuse_says_so_in_its_json_and_exits_1() {
    let (cloud, mut s) = with_absent(71, 3, false).await;
    let fleet = || buckets(&NAMES, false);

    let (code, out, err) = s
        .run(fleet(), &cloud, &["plan", "--json", "--detailed-exitcode"])
        .await;
    assert_eq!(
        code, 1,
        "a plan that would be refused is not 'apply this': {err}"
    );
    let plan = json(&out);
    assert_eq!(plan["refused"]["by"], "brake", "{out}");
    assert_eq!(plan["refused"]["deletes"], 0);
    assert_eq!(plan["refused"]["absent"], 3);
    assert_eq!(plan["refused"]["managed"], 4);
    assert!(
        plan["refused"]["message"]
            .as_str()
            .unwrap()
            .contains("remove 3 of the 4 resources this fleet manages"),
        "{out}"
    );
    insta::assert_json_snapshot!("brake_plan_json", plan);
    assert!(err.contains("applying this plan would be refused"), "{err}");

    let (code, out, err) = s
        .run(fleet(), &cloud, &["plan", "--detailed-exitcode"])
        .await;
    assert_eq!(code, 1);
    insta::assert_snapshot!("brake_plan_text", format!("{out}\n--- stderr\n{err}"));

    // Without --detailed-exitcode the plan itself succeeded: the refusal is a warning,
    // which --force lifts.
    let (code, _, _) = s.run(fleet(), &cloud, &["plan", "--json"]).await;
    assert_eq!(code, 0);
    assert!(cloud.writes().is_empty(), "{:?}", cloud.writes());

    // Forced through, the next plan would not be refused: no `refused` member.
    let (code, _, err) = s.run(fleet(), &cloud, &["apply", "--yes", "--force"]).await;
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = s
        .run(fleet(), &cloud, &["plan", "--json", "--detailed-exitcode"])
        .await;
    assert_eq!(code, 0, "{out}");
    let plan = json(&out);
    assert!(plan.get("refused").is_none(), "{out}");
}

#[tokio::test]
async fn changes_the_brake_lets_through_still_exit_2() {
    // Exactly half read as absent: the brake passes, and the plan is "apply this".
    let (cloud, mut s) = with_absent(72, 2, false).await;
    let (code, out, _) = s
        .run(
            buckets(&NAMES, false),
            &cloud,
            &["plan", "--json", "--detailed-exitcode"],
        )
        .await;
    assert_eq!(code, 2, "{out}");
    assert!(json(&out).get("refused").is_none(), "{out}");
}

#[tokio::test]
async fn a_plan_prevent_destroy_would_refuse_names_each_protected_resource() {
    let (cloud, mut s) = with_absent(73, 0, true).await;
    let (code, out, err) = s
        .run(
            buckets(&NAMES, true),
            &cloud,
            &["plan", "--destroy", "--json", "--detailed-exitcode"],
        )
        .await;
    assert_eq!(code, 1, "{err}");
    let plan = json(&out);
    assert_eq!(plan["refused"]["by"], "prevent_destroy", "{out}");
    assert_eq!(
        plan["refused"]["resources"],
        serde_json::json!([
            {"resource": "aws/objectStore/shop-a (eu-west-3)", "action": "delete"}
        ])
    );
    insta::assert_json_snapshot!("prevent_destroy_plan_json", plan);
    assert!(err.contains("`prevent_destroy`"), "{err}");

    // The text plan, then the refusal as an error; without --detailed-exitcode too,
    // since no flag lifts it.
    let (code, out, err) = s
        .run(buckets(&NAMES, true), &cloud, &["plan", "--destroy"])
        .await;
    assert_eq!(code, 1);
    insta::assert_snapshot!(
        "prevent_destroy_plan_text",
        format!("{out}\n--- stderr\n{err}")
    );
    assert!(cloud.writes().is_empty(), "{:?}", cloud.writes());
}
