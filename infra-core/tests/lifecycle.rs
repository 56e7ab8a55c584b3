//! Lifecycle controls, driven through the command-line runner on the simulated cloud:
//! `--replace` (a replace asked for by address, with what cannot outlive it) and
//! `prevent_destroy` (no run deletes or replaces a protected resource, `--force` or
//! not). What is checked is what a person sees — the exit code, the text, the JSON —
//! and what the simulated world holds afterwards.

mod support;

use std::collections::BTreeMap;

use infra_core::kinds::{AwsInstance, BurstableSize, Image, InstanceType, Rule, SecurityGroup};
use infra_core::prelude::{AwsRegion, CheckReport, Expr, Fleet, Partial};
use infra_testkit::sim::SimCloud;
use proptest::prelude::*;
use support::console::{Session, answering, json};

/// How a test shapes the fleet: which resources are protected, which are declared.
#[derive(Clone, Copy, Debug, Default)]
struct Shape {
    /// `prevent_destroy` on the security group `web`.
    protect_web: bool,
    /// `prevent_destroy` on the instance `web-1`.
    protect_instance: bool,
    /// The instance's line removed from the declaration (its protection kept by name).
    drop_instance: bool,
    /// The group's inbound port.
    port: u16,
    /// The group's description, which cannot change in place.
    description: &'static str,
}

fn fleet(shape: Shape) -> Result<Fleet, CheckReport> {
    let mut f = Fleet::builder("lifecycle");
    let here = AwsRegion::EuWest3;
    let web = f.declare(
        here,
        "web",
        SecurityGroup {
            description: shape.description.into(),
            vpc_id: Partial::Unknown,
            ingress: Expr::lit([Rule::tcp(shape.port, "0.0.0.0/0")].into()),
            egress: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    if shape.protect_web {
        f.prevent_destroy(web);
    }
    if shape.drop_instance {
        if shape.protect_instance {
            f.prevent_destroy_of::<infra_core::prelude::Aws, AwsInstance>("web-1");
        }
    } else {
        let instance = f.declare(
            here,
            "web-1",
            AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Micro), web),
        );
        if shape.protect_instance {
            f.prevent_destroy(instance);
        }
    }
    f.build()
}

fn shape() -> Shape {
    Shape {
        port: 443,
        description: "lifecycle web",
        ..Shape::default()
    }
}

/// What the world holds, by name: each resource's handle and configuration.
fn world(cloud: &SimCloud) -> BTreeMap<String, (String, String)> {
    cloud
        .resources()
        .into_iter()
        .map(|r| {
            (
                r.name,
                (r.handle, serde_json::Value::Object(r.config).to_string()),
            )
        })
        .collect()
}

fn handle(cloud: &SimCloud, kind: &str, name: &str) -> String {
    let found = cloud.find("aws", kind, name);
    assert_eq!(found.len(), 1, "{name}: {found:?}");
    found[0].handle.clone()
}

#[tokio::test]
async fn replace_plans_and_applies_a_replace_of_an_unchanged_resource_with_its_cascade() {
    let cloud = support::cloud(21);
    let mut s = answering(false, true);
    let (code, _, err) = s.run(fleet(shape()), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0, "{err}");
    let (web, instance) = (
        handle(&cloud, "securityGroup", "web"),
        handle(&cloud, "awsInstance", "web-1"),
    );

    cloud.clear_calls();
    let (code, out, _) = s
        .run(
            fleet(shape()),
            &cloud,
            &["plan", "--replace", "web", "--detailed-exitcode"],
        )
        .await;
    assert_eq!(code, 2, "{out}");
    insta::assert_snapshot!("replace_plan", out);
    let (code, out, _) = s
        .run(
            fleet(shape()),
            &cloud,
            &["plan", "--replace", "web", "--json"],
        )
        .await;
    assert_eq!(code, 0);
    let plan = json(&out);
    let line = |name: &str| {
        plan["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["resource"]["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(line("web")["action"], "replace");
    assert_eq!(line("web")["detail"], "replace requested with --replace");
    assert_eq!(line("web-1")["action"], "replace");
    assert!(
        cloud.writes().is_empty(),
        "a plan wrote: {:?}",
        cloud.writes()
    );

    let (code, out, err) = s
        .run(
            fleet(shape()),
            &cloud,
            &["apply", "--yes", "--replace", "aws/securityGroup/web"],
        )
        .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2 replaced"), "{out}");
    assert_ne!(handle(&cloud, "securityGroup", "web"), web);
    assert_ne!(handle(&cloud, "awsInstance", "web-1"), instance);
    // Asked once, done once: the next plan is empty.
    let (code, out, _) = s
        .run(fleet(shape()), &cloud, &["plan", "--detailed-exitcode"])
        .await;
    assert_eq!(code, 0, "{out}");
}

#[tokio::test]
async fn a_replace_of_a_name_that_is_not_declared_is_refused_with_the_nearest_names() {
    let cloud = support::cloud(22);
    let mut s = answering(false, true);
    let (code, _, _) = s.run(fleet(shape()), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0);
    let before = world(&cloud);
    cloud.clear_calls();
    let (code, out, err) = s
        .run(
            fleet(shape()),
            &cloud,
            &["apply", "--yes", "--replace", "wbe"],
        )
        .await;
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("--replace \"wbe\" names no resource of this fleet or its records; did you mean 'aws/securityGroup/web (eu-west-3)'"),
        "{err}"
    );
    let (code, out, err) = s
        .run(fleet(shape()), &cloud, &["plan", "--replace", "wbe"])
        .await;
    assert_eq!(code, 1);
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("did you mean"), "{err}");
    assert!(cloud.writes().is_empty());
    assert_eq!(world(&cloud), before);
}

/// Applies the fleet unprotected, then runs `args` on the protected `shape`: the run
/// must be refused, naming the resource and the setting, with nothing written.
async fn refused_with_nothing_touched(
    s: &mut Session,
    cloud: &SimCloud,
    shape: Shape,
    args: &[&str],
    named: &str,
) -> (String, String) {
    let (code, _, err) = s
        .run(fleet(self::shape()), cloud, &["apply", "--yes"])
        .await;
    assert_eq!(code, 0, "{err}");
    let before = world(cloud);
    cloud.clear_calls();
    let (code, out, err) = s.run(fleet(shape), cloud, args).await;
    assert_eq!(code, 1, "{args:?}: {out}{err}");
    assert!(
        err.contains(named) && err.contains("`prevent_destroy`"),
        "{args:?}: {err}"
    );
    assert!(err.contains("--force does not lift it"), "{err}");
    assert!(cloud.writes().is_empty(), "{args:?}: {:?}", cloud.writes());
    assert_eq!(world(cloud), before, "{args:?} changed the world");
    (out, err)
}

#[tokio::test]
async fn prevent_destroy_refuses_a_destroy_and_reports_every_resource_refused() {
    let cloud = support::cloud(23);
    let mut s = answering(false, true);
    let protected = Shape {
        protect_web: true,
        ..shape()
    };
    let (out, err) = refused_with_nothing_touched(
        &mut s,
        &cloud,
        protected,
        &["destroy", "--yes", "--json"],
        "aws/securityGroup/web (eu-west-3)",
    )
    .await;
    insta::assert_snapshot!("prevent_destroy_error", err);
    let result = json(&out);
    let resources = result["notAttempted"].as_array().expect("{out}");
    assert_eq!(resources.len(), 2, "{out}");
    for r in resources {
        assert_eq!(r["reason"], "refused", "{out}");
    }
    // The plan of the teardown says the same, and exits 1.
    let (code, _, err) = s
        .run(fleet(protected), &cloud, &["plan", "--destroy"])
        .await;
    assert_eq!(code, 1);
    assert!(err.contains("`prevent_destroy`"), "{err}");
}

#[tokio::test]
async fn prevent_destroy_refuses_a_requested_replace_even_with_force() {
    let cloud = support::cloud(24);
    let mut s = answering(false, true);
    let protected = Shape {
        protect_instance: true,
        ..shape()
    };
    refused_with_nothing_touched(
        &mut s,
        &cloud,
        protected,
        &["apply", "--yes", "--force", "--replace", "web-1"],
        "aws/awsInstance/web-1 (eu-west-3)",
    )
    .await;
    // A replace cascaded from another resource is refused the same way.
    refused_with_nothing_touched(
        &mut s,
        &cloud,
        protected,
        &["apply", "--yes", "--replace", "web"],
        "aws/awsInstance/web-1 (eu-west-3)",
    )
    .await;
}

#[tokio::test]
async fn prevent_destroy_refuses_a_change_that_forces_a_replace() {
    let cloud = support::cloud(25);
    let mut s = answering(false, true);
    // The description, which EC2 cannot change in place, is changed in the declaration.
    let protected = Shape {
        protect_web: true,
        description: "a new description",
        ..shape()
    };
    let (out, _) = refused_with_nothing_touched(
        &mut s,
        &cloud,
        protected,
        &["apply", "--yes", "--force"],
        "aws/securityGroup/web (eu-west-3)",
    )
    .await;
    assert!(out.contains("± aws/securityGroup/web"), "{out}");
    // The plan shows what would happen, and says it would be refused.
    let (code, out, err) = s.run(fleet(protected), &cloud, &["plan"]).await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("2 to replace"), "{out}");
    assert!(
        err.contains("would replace aws/securityGroup/web (eu-west-3)"),
        "{err}"
    );
}

#[tokio::test]
async fn prevent_destroy_by_name_refuses_the_prune_of_a_removed_declaration() {
    let cloud = support::cloud(26);
    let mut s = answering(false, true);
    let removed = Shape {
        protect_instance: true,
        drop_instance: true,
        ..shape()
    };
    refused_with_nothing_touched(
        &mut s,
        &cloud,
        removed,
        &["apply", "--yes", "--force"],
        "aws/awsInstance/web-1 (eu-west-3)",
    )
    .await;
    // Without the protection, the same removal prunes it.
    let unprotected = Shape {
        protect_instance: false,
        ..removed
    };
    let (code, out, err) = s
        .run(fleet(unprotected), &cloud, &["apply", "--yes", "--force"])
        .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        cloud.find("aws", "awsInstance", "web-1").is_empty(),
        "{out}{:?}",
        cloud.find("aws", "awsInstance", "web-1")
    );
}

#[tokio::test]
async fn a_protected_resource_is_still_updated_in_place() {
    let cloud = support::cloud(27);
    let mut s = answering(false, true);
    let protected = Shape {
        protect_web: true,
        protect_instance: true,
        ..shape()
    };
    let (code, _, _) = s.run(fleet(protected), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0);
    let web = handle(&cloud, "securityGroup", "web");
    let changed = Shape {
        port: 8443,
        ..protected
    };
    let (code, out, err) = s.run(fleet(changed), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1 updated"), "{out}");
    assert_eq!(handle(&cloud, "securityGroup", "web"), web);
}

/// What a run may try against a protected resource.
#[derive(Clone, Copy, Debug)]
enum Attempt {
    Destroy,
    Replace(&'static str),
    EditDescription,
    DropInstance,
}

fn attempt() -> impl Strategy<Value = Attempt> {
    prop_oneof![
        Just(Attempt::Destroy),
        Just(Attempt::Replace("web")),
        Just(Attempt::Replace("web-1")),
        Just(Attempt::EditDescription),
        Just(Attempt::DropInstance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// The law: whatever a run tries, `--force` or not, a resource declared with
    /// `prevent_destroy` keeps its handle; a run that would take it refuses whole.
    #[test]
    fn a_run_never_deletes_or_replaces_a_protected_resource(
        protect_web in any::<bool>(),
        protect_instance in any::<bool>(),
        attempt in attempt(),
        force in any::<bool>(),
        seed in 0u64..1000,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let cloud = support::cloud(seed);
            let mut s = answering(false, true);
            let (code, _, _) = s.run(fleet(shape()), &cloud, &["apply", "--yes"]).await;
            assert_eq!(code, 0);
            let before = world(&cloud);
            let mut shape = Shape { protect_web, protect_instance, ..shape() };
            let mut args = vec!["apply", "--yes"];
            match attempt {
                Attempt::Destroy => args = vec!["destroy", "--yes"],
                Attempt::Replace(name) => args.extend(["--replace", name]),
                Attempt::EditDescription => shape.description = "another description",
                Attempt::DropInstance => shape.drop_instance = true,
            }
            // `destroy` is forced already.
            if force && !matches!(attempt, Attempt::Destroy) {
                args.push("--force");
            }
            let before_run = world(&cloud);
            let (code, out, err) = s.run(fleet(shape), &cloud, &args).await;
            let protected = [("web", protect_web), ("web-1", protect_instance)];
            for (name, is) in protected {
                if is {
                    let kept = before[name].0.clone();
                    let now: Vec<String> = cloud.resources().into_iter()
                        .filter(|r| r.name == name).map(|r| r.handle).collect();
                    assert_eq!(now, vec![kept], "{attempt:?} {args:?}: {out}{err}");
                }
            }
            if code == 0 {
                return;
            }
            // Refused whole: nothing at all was touched.
            assert!(err.contains("`prevent_destroy`"), "{attempt:?}: {err}");
            assert_eq!(world(&cloud), before_run, "{attempt:?} {args:?}");
        });
    }
}
