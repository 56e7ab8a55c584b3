//! The boundary's exclusion list, driven through the command-line runner on the
//! simulated cloud: a declared resource found without the fleet's marker is a failure
//! of every run, unless the declaration excludes it — then it is reported as excluded
//! and left exactly as it is. An exclusion that matches nothing is a warning.

mod support;

use std::collections::BTreeMap;

use infra_core::kinds::{ObjectStore, Rule, SecurityGroup};
use infra_core::prelude::{AwsRegion, CheckReport, Expr, Fleet, Partial};
use infra_testkit::sim::SimCloud;
use support::console::{Session, answering, json};

const HERE: AwsRegion = AwsRegion::EuWest3;
const REASON: &str = "made by hand in 2019; the network team owns it";

fn group(description: &str) -> SecurityGroup {
    SecurityGroup {
        description: description.into(),
        vpc_id: Partial::Unknown,
        ingress: Expr::lit([Rule::tcp(443, "0.0.0.0/0")].into()),
        egress: Partial::Unknown,
        tags: Partial::Unknown,
    }
}

/// `web` and `legacy-web` declared; `exclusions` as (kind is a security group) name
/// and reason, plus, when `stale` is set, two entries that match nothing.
fn fleet(exclude_legacy: bool, stale: bool) -> Result<Fleet, CheckReport> {
    let mut f = Fleet::builder("boundary");
    f.declare(HERE, "web", group("boundary web"));
    f.declare(HERE, "legacy-web", group("legacy web"));
    if exclude_legacy {
        f.exclude::<_, SecurityGroup>(HERE, "legacy-web", REASON);
    }
    if stale {
        // Declared and created by the fleet itself: marked, so nothing to exclude.
        f.exclude::<_, SecurityGroup>(HERE, "web", "was hand-made once");
        // Not declared at all.
        f.exclude::<_, ObjectStore>(HERE, "old-assets", "kept for the auditors");
    }
    f.build()
}

/// A world holding `legacy-web` as someone else made it: no marker.
fn world_with_a_stranger(seed: u64) -> (SimCloud, String) {
    let cloud = support::cloud(seed);
    let handle = cloud
        .insert_foreign(
            "aws",
            "securityGroup",
            "eu-west-3",
            "legacy-web",
            BTreeMap::from([("team".to_owned(), "network".to_owned())]),
        )
        .unwrap();
    (cloud, handle)
}

fn stranger(cloud: &SimCloud, handle: &str) -> String {
    let r = cloud.resource(handle).expect("the stranger is still there");
    format!("{:?} {:?}", r.raw_tags, r.config)
}

async fn run(
    s: &mut Session,
    cloud: &SimCloud,
    fleet: Result<Fleet, CheckReport>,
    args: &[&str],
) -> (u8, String, String) {
    s.run(fleet, cloud, args).await
}

#[tokio::test]
async fn an_unmarked_declared_resource_is_a_failure_unless_excluded() {
    let (cloud, handle) = world_with_a_stranger(31);
    let before = stranger(&cloud, &handle);
    let mut s = answering(false, true);

    // Not on the list: every run reports it as a failure, and leaves it alone.
    let (code, out, _) = run(&mut s, &cloud, fleet(false, false), &["apply", "--yes"]).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("does not carry the `managed-by-infra` marker"),
        "{out}"
    );
    assert_eq!(stranger(&cloud, &handle), before);

    // On the list: excluded, with the declaration's reason, and the run succeeds.
    cloud.clear_calls();
    let (code, out, _) = run(
        &mut s,
        &cloud,
        fleet(true, false),
        &["plan", "--detailed-exitcode"],
    )
    .await;
    assert_eq!(code, 0, "complete, nothing to do: {out}");
    insta::assert_snapshot!("excluded_plan", out);
    let (code, out, err) = run(
        &mut s,
        &cloud,
        fleet(true, false),
        &["apply", "--yes", "--json"],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let result = json(&out);
    assert_eq!(result["apply"], "v4");
    let excluded = &result["notAttempted"][0];
    assert_eq!(excluded["resource"]["name"], "legacy-web", "{out}");
    assert_eq!(excluded["reason"], "excluded");
    assert!(
        excluded["detail"].as_str().unwrap().contains(REASON),
        "{out}"
    );
    assert!(cloud.writes().is_empty(), "{:?}", cloud.writes());
    assert_eq!(stranger(&cloud, &handle), before, "the marker was written");

    // Still never adopted: the ledger does not list it.
    let (code, out, _) = run(&mut s, &cloud, fleet(true, false), &["state", "list"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("web") && !out.contains("legacy-web"), "{out}");
}

#[tokio::test]
async fn an_exclusion_that_matches_nothing_is_a_warning_in_the_plan_and_its_json() {
    let (cloud, _) = world_with_a_stranger(32);
    let mut s = answering(false, true);
    let (code, out, _) = run(&mut s, &cloud, fleet(true, true), &["apply", "--yes"]).await;
    assert_eq!(code, 0, "{out}");
    let (code, out, _) = run(&mut s, &cloud, fleet(true, true), &["plan"]).await;
    assert_eq!(code, 0, "{out}");
    insta::assert_snapshot!("unmatched_exclusions", out);
    let (code, out, _) = run(&mut s, &cloud, fleet(true, true), &["plan", "--json"]).await;
    assert_eq!(code, 0);
    let plan = json(&out);
    assert_eq!(plan["planReport"], "v3");
    let unmatched: Vec<(String, String)> = plan["unmatchedExclusions"]
        .as_array()
        .expect("unmatchedExclusions")
        .iter()
        .map(|u| {
            (
                u["resource"]["name"].as_str().unwrap().to_owned(),
                u["why"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        unmatched,
        [
            (
                "old-assets".to_owned(),
                "no resource of this provider, kind, name and region is declared".to_owned()
            ),
            (
                "web".to_owned(),
                "the resource carries this fleet's marker: the fleet manages it".to_owned()
            ),
        ]
    );
}

#[tokio::test]
async fn an_exclusion_does_not_cover_another_fleets_resource() {
    let cloud = support::cloud(33);
    let handle = cloud
        .insert_foreign(
            "aws",
            "securityGroup",
            "eu-west-3",
            "legacy-web",
            BTreeMap::from([("managed-by-infra".to_owned(), "other".to_owned())]),
        )
        .unwrap();
    let before = stranger(&cloud, &handle);
    let mut s = answering(false, true);
    let (code, out, _) = run(&mut s, &cloud, fleet(true, false), &["apply", "--yes"]).await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("carries the marker of fleet `other`"), "{out}");
    assert!(
        out.contains("warning: the exclusion of aws/securityGroup/legacy-web (eu-west-3) ("),
        "{out}"
    );
    assert_eq!(stranger(&cloud, &handle), before);
}

#[tokio::test]
async fn an_exclusion_without_a_reason_is_refused_by_check() {
    let mut f = Fleet::builder("boundary");
    f.declare(HERE, "legacy-web", group("legacy web"));
    f.exclude::<_, SecurityGroup>(HERE, "legacy-web", "  ");
    let mut s = answering(false, true);
    let cloud = support::cloud(34);
    let (code, _, err) = run(&mut s, &cloud, f.build(), &["check"]).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("excluded in eu-west-3 without a reason"),
        "{err}"
    );
}

mod law {
    use std::collections::BTreeMap;

    use infra_core::engine::{NotAttemptedReason, Options};
    use infra_core::kinds::SecurityGroup;
    use infra_core::prelude::Fleet;
    use proptest::prelude::*;

    use super::{HERE, group, support};

    const NAMES: [&str; 3] = ["alpha", "beta", "gamma"];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

        /// The law: a declared resource found without the marker is never written to;
        /// it ends excluded when the list names it, failed otherwise; and an entry whose
        /// resource the fleet created itself is reported as matching nothing.
        #[test]
        fn an_unmarked_resource_is_never_touched_and_ends_excluded_only_when_listed(
            foreign in proptest::array::uniform3(any::<bool>()),
            listed in proptest::array::uniform3(any::<bool>()),
            seed in 0u64..1000,
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let cloud = support::cloud(seed);
                let mut handles = BTreeMap::new();
                for (i, name) in NAMES.iter().enumerate() {
                    if foreign[i] {
                        let h = cloud
                            .insert_foreign("aws", "securityGroup", "eu-west-3", name, BTreeMap::new())
                            .unwrap();
                        handles.insert(*name, h);
                    }
                }
                let mut f = Fleet::builder("law");
                for (i, name) in NAMES.iter().enumerate() {
                    f.declare(HERE, *name, group(name));
                    if listed[i] {
                        f.exclude::<_, SecurityGroup>(HERE, *name, "someone else's");
                    }
                }
                let fleet = f.build().unwrap();
                let (engine, _) = support::engine_in_memory(&cloud);
                let outcome = engine.apply(&fleet.plan(), &Options::default()).await.unwrap();
                for w in cloud.writes() {
                    let touched = w.handle.as_ref().is_some_and(|h| handles.values().any(|f| f == h));
                    assert!(!touched, "a write reached a foreign resource: {w:?}");
                }
                for (i, name) in NAMES.iter().enumerate() {
                    let excluded = outcome.result.not_attempted.iter().any(|n| {
                        n.resource.name == *name && n.reason == NotAttemptedReason::Excluded
                    });
                    let failed = outcome.result.failed.iter().any(|x| x.resource.name == *name);
                    let unmatched = outcome.plan.unmatched_exclusions.iter().any(|u| u.resource.name == *name);
                    assert_eq!(excluded, foreign[i] && listed[i], "{name}");
                    assert_eq!(failed, foreign[i] && !listed[i], "{name}");
                    assert_eq!(unmatched, listed[i] && !foreign[i], "{name}");
                }
                assert_eq!(outcome.result.is_success(), !(0..3).any(|i| foreign[i] && !listed[i]));
            });
        }
    }
}
