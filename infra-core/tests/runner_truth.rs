//! The runner tells the truth: a run that could not look never says "no changes", every
//! apply accounts for every resource, and the plan a person confirms — at the prompt or
//! in a plan file — is the plan that runs.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use infra_core::kinds::*;
use infra_core::{
    engine::{FileStore, LedgerRow, RecordStore},
    prelude::{AwsRegion, Backends, Expr, Fleet, Partial, compose_secret},
    sdk::Unreachable,
};
use infra_testkit::sim::Op;
use serde_json::json;
use support::console::{answering, json, session};

/// The README's "your own fleet": one bucket on AWS.
fn readme_fleet() -> Result<Fleet, infra_core::prelude::CheckReport> {
    let mut fleet = Fleet::builder("shop");
    fleet.declare(AwsRegion::EuWest3, "shop-assets", ObjectStore::new());
    fleet.build()
}

#[tokio::test]
async fn a_provider_left_without_a_backend_never_reads_as_no_changes() {
    let mut s = answering(false, true);
    let (code, out, _) = s
        .run_on(
            readme_fleet(),
            Backends::new(),
            &["plan", "--detailed-exitcode"],
        )
        .await;
    assert_eq!(code, 1, "{out}");
    assert!(!out.contains("No changes"), "{out}");
    insta::assert_snapshot!(out);

    let (code, out, _) = s
        .run_on(readme_fleet(), Backends::new(), &["plan", "--json"])
        .await;
    assert_eq!(code, 1);
    let plan = json(&out);
    assert_eq!(plan["complete"], false);
    assert_eq!(plan["changes"][0]["reason"], "no-binding");
    assert_eq!(
        plan["changes"][0]["detail"],
        "no aws backend was given to the runner"
    );

    // The README's snippet run as written: apply fails loudly, and says what it did
    // not do.
    let (code, out, _) = s
        .run_on(
            readme_fleet(),
            Backends::new(),
            &["apply", "--yes", "--json"],
        )
        .await;
    assert_eq!(code, 1);
    let result = json(&out);
    assert_eq!(result["notAttempted"][0]["reason"], "no-binding");
    assert_eq!(result["applied"], json!([]));
}

#[tokio::test]
async fn an_unreachable_backend_is_reported_in_its_own_words() {
    let mut s = answering(false, true);
    let why = "no AWS credentials were found (looked in AWS_PROFILE, the environment and ~/.aws)";
    let blind = || Backends::new().with(Arc::new(Unreachable::new("aws", why)));
    let (code, out, _) = s
        .run_on(readme_fleet(), blind(), &["plan", "--detailed-exitcode"])
        .await;
    assert_eq!(code, 1);
    assert!(out.contains(why), "{out}");
    assert!(out.contains("Incomplete: 1 of 1 resource"), "{out}");
    let (_, out, _) = s.run_on(readme_fleet(), blind(), &["plan", "--json"]).await;
    let plan = json(&out);
    assert_eq!(plan["changes"][0]["reason"], "no-credentials");
    assert!(plan["changes"][0]["detail"].as_str().unwrap().contains(why));
}

#[tokio::test]
async fn a_read_the_cloud_denies_makes_the_plan_incomplete() {
    let cloud = support::cloud(21);
    let mut s = answering(false, true);
    let (code, _, _) = s.run(readme_fleet(), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0);
    cloud.deny("aws", Some("objectStore"), None);
    let (code, out, _) = s
        .run(readme_fleet(), &cloud, &["plan", "--detailed-exitcode"])
        .await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("failed"), "{out}");
    assert!(out.contains("AccessDenied"), "{out}");
    assert!(!out.contains("No changes"), "{out}");
}

#[tokio::test]
async fn a_gate_refusal_still_accounts_for_every_declared_resource_and_ledger_row() {
    let cloud = support::cloud(22);
    let mut s = answering(false, true);
    let two = || {
        let mut f = Fleet::builder("shop");
        f.declare(AwsRegion::EuWest3, "shop-assets", ObjectStore::new());
        f.declare(AwsRegion::EuWest3, "shop-logs", ObjectStore::new());
        f.build()
    };
    s.run(two(), &cloud, &["apply", "--yes"]).await;
    // The declaration keeps one of the two; the credentials are gone.
    let blind = Backends::new().with(Arc::new(Unreachable::new("aws", "no credentials")));
    let (code, out, err) = s
        .run_on(readme_fleet(), blind, &["apply", "--yes", "--json"])
        .await;
    assert_eq!(code, 1);
    assert!(err.contains("unreachable"), "{err}");
    let result = infra_core::engine::ApplyResult::from_envelope(&json(&out)).unwrap();
    result.check_disjoint().unwrap();
    let names: Vec<&str> = result
        .not_attempted
        .iter()
        .map(|n| n.resource.name.as_str())
        .collect();
    assert_eq!(names, ["shop-assets", "shop-logs"]);
    assert!(
        result
            .not_attempted
            .iter()
            .all(|n| n.reason == infra_core::engine::NotAttemptedReason::Refused)
    );
}

/// A fleet with a queue, a bucket and a database, in two versions: the second changes a
/// field in place on each of the first two, moves the database to the serverless shape,
/// and composes the connection string differently.
fn versioned(second: bool) -> Result<Fleet, infra_core::prelude::CheckReport> {
    let mut f = Fleet::builder("shop");
    let here = AwsRegion::EuWest3;
    let password = f.declare(here, "db-password", Secrets::generated(24));
    let db = f.declare(
        here,
        "db",
        if second {
            Postgres::serverless(PostgresServerless {
                engine_version: "16",
                min_capacity: Acu::halves(1),
                max_capacity: Acu::whole(4),
                master_username: "app",
                master_password: password,
            })
        } else {
            Postgres::classic(PostgresClassic {
                engine_version: "16",
                instance_class: "db.t4g.micro",
                master_username: "app",
                master_password: password,
            })
        },
    );
    let host = Expr::observed(db).map(|o: &PostgresObserved| o.endpoint.clone());
    let url = if second {
        compose_secret!("postgres://app:{}@{}/shop", Expr::secret(password), host)
    } else {
        compose_secret!("postgres://app:{}@{}/app", Expr::secret(password), host)
    };
    f.declare(here, "db-url", Secrets::composed(url));
    f.declare(
        here,
        "jobs",
        Queues {
            fifo: Expr::lit(false),
            visibility_timeout_seconds: Partial::Known(Expr::lit(if second { 60 } else { 30 })),
            retention_seconds: Partial::Unknown,
            dead_letter: Partial::Known(None),
            max_receive_count: Partial::Unknown,
            tags: Partial::Known(Expr::lit(BTreeMap::from([(
                "team".to_owned(),
                if second { "web" } else { "ops" }.to_owned(),
            )]))),
        },
    );
    f.declare(
        here,
        "shop-assets",
        ObjectStore {
            versioning: Partial::Known(Expr::lit(second)),
            ..ObjectStore::new()
        },
    );
    f.build()
}

#[tokio::test]
async fn updates_show_each_field_old_and_new_and_secrets_as_sensitive() {
    let cloud = support::cloud(23);
    let mut s = answering(false, true);
    let (code, _, _) = s.run(versioned(false), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0);
    let (code, out, _) = s
        .run(versioned(true), &cloud, &["plan", "--detailed-exitcode"])
        .await;
    assert_eq!(code, 2, "{out}");
    insta::assert_snapshot!("changed_fields_text", out);
    let (_, out, _) = s.run(versioned(true), &cloud, &["plan", "--json"]).await;
    let plan = json(&out);
    insta::assert_json_snapshot!("changed_fields_json", plan["changes"]);

    // No secret value reaches the plan, in either form.
    let secrets: Vec<String> = cloud
        .resources()
        .iter()
        .filter_map(|r| cloud.stored_secret(&r.handle))
        .map(|v| v.expose().to_owned())
        .collect();
    assert_eq!(secrets.len(), 2);
    for v in &secrets {
        assert!(!out.contains(v.as_str()));
    }
}

#[tokio::test]
async fn an_interactive_apply_refuses_when_the_world_moved_while_it_asked() {
    let cloud = support::cloud(24);
    let mut s = answering(false, true);
    s.run(versioned(false), &cloud, &["apply", "--yes"]).await;
    let bucket = cloud.find("aws", "objectStore", "shop-assets")[0]
        .handle
        .clone();

    // While the person reads the plan, someone changes the bucket.
    let moved = cloud.clone();
    let mut s2 = session(
        true,
        Box::new(move |_| {
            moved.set_field(&bucket, "versioning", json!(true));
            true
        }),
    );
    s2.state = s.state;
    cloud.clear_calls();
    let (code, out, err) = s2.run(versioned(true), &cloud, &["apply"]).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("the plan is stale")
            && err.contains("aws/objectStore/shop-assets (eu-west-3) changed in the cloud"),
        "{err}"
    );
    assert!(
        out.contains("not attempted: refused (refused: the plan is stale)"),
        "{out}"
    );
    assert!(cloud.writes().is_empty(), "{:#?}", cloud.writes());
}

#[tokio::test]
async fn a_delete_the_prompt_never_showed_does_not_run_after_yes() {
    let cloud = support::cloud(25);
    let mut s = answering(false, true);
    s.run(versioned(false), &cloud, &["apply", "--yes"]).await;
    // A stranger's resource that carries this fleet's marker.
    let stray = cloud
        .insert_foreign(
            "aws",
            "objectStore",
            "eu-west-3",
            "shop-stray",
            [("managed-by-infra".to_owned(), "shop".to_owned())].into(),
        )
        .unwrap();

    // While the person reads a plan that deletes nothing, another run records the
    // stray in the ledger: a plan made again would prune it.
    let state = s.state.path().to_owned();
    let mut s2 = session(
        true,
        Box::new(move |_| {
            let store = FileStore::new(&state);
            let mut ledger = store.load_ledger("shop").unwrap();
            ledger.rows.insert(LedgerRow {
                provider: "aws".into(),
                kind: "objectStore".into(),
                name: "shop-stray".into(),
                region: "eu-west-3".into(),
            });
            store.save_ledger("shop", &ledger).unwrap();
            true
        }),
    );
    s2.state = s.state;
    cloud.clear_calls();
    let (code, out, err) = s2.run(versioned(true), &cloud, &["apply"]).await;
    assert_eq!(code, 1, "{out}");
    // The plan shown deletes nothing; the refused result accounts for the row the
    // other run wrote.
    assert!(!out.contains("- aws/objectStore/shop-stray"), "{out}");
    assert!(
        out.contains("· aws/objectStore/shop-stray (eu-west-3)")
            && out.contains("not attempted: refused"),
        "{out}"
    );
    assert!(err.contains("the records changed"), "{err}");
    assert!(cloud.resource(&stray).is_some(), "the stray was deleted");
    assert!(cloud.writes().is_empty());
}

#[tokio::test]
async fn a_plan_file_is_applied_exactly_and_refused_once_stale() {
    let cloud = support::cloud(26);
    let mut s = answering(false, true);
    s.run(versioned(false), &cloud, &["apply", "--yes"]).await;
    let file = s.path("plan.json");

    let (code, shown, _) = s
        .run(
            versioned(true),
            &cloud,
            &["plan", "--out", &file, "--detailed-exitcode"],
        )
        .await;
    assert_eq!(code, 2);
    let text = std::fs::read_to_string(&file).unwrap();
    let saved = json(&text);
    assert_eq!(saved["planFile"], "v1");
    assert_eq!(saved["fleet"], "shop");
    assert!(saved["fingerprint"]["declaration"].as_str().unwrap().len() == 64);
    for secret in cloud
        .resources()
        .iter()
        .filter_map(|r| cloud.stored_secret(&r.handle))
    {
        assert!(
            !text.contains(secret.expose()),
            "a secret value in the plan file"
        );
    }

    // Applied as it is: no question asked, what was shown is what ran.
    cloud.clear_calls();
    let (code, out, _) = s.run(versioned(true), &cloud, &["apply", &file]).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with(&shown),
        "the plan applied is the plan shown:\n{out}"
    );
    assert!(out.contains("Apply complete"), "{out}");
    assert!(!cloud.writes().is_empty());
    let (code, _, _) = s
        .run(versioned(true), &cloud, &["plan", "--detailed-exitcode"])
        .await;
    assert_eq!(code, 0);

    // The same file again: what it was made from has changed.
    cloud.clear_calls();
    let (code, _, err) = s.run(versioned(true), &cloud, &["apply", &file]).await;
    assert_eq!(code, 1);
    assert!(err.contains("the plan is stale"), "{err}");
    assert!(
        err.contains("the records changed") || err.contains("changed in the cloud"),
        "{err}"
    );
    assert!(cloud.writes().is_empty());
}

#[tokio::test]
async fn a_plan_file_made_from_another_declaration_or_fleet_is_refused() {
    let cloud = support::cloud(27);
    let mut s = answering(false, true);
    let file = s.path("plan.json");
    s.run(versioned(false), &cloud, &["plan", "--out", &file])
        .await;

    // The declaration changed since: refused, naming it.
    let (code, _, err) = s.run(versioned(true), &cloud, &["apply", &file]).await;
    assert_eq!(code, 1);
    assert!(err.contains("the declaration changed"), "{err}");
    assert!(cloud.writes().is_empty());

    // Another fleet's binary: refused before anything is looked at.
    let mut blog = Fleet::builder("blog");
    blog.declare(AwsRegion::EuWest3, "blog-assets", ObjectStore::new());
    let (code, _, err) = s.run(blog.build(), &cloud, &["apply", &file]).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("this plan is for fleet `shop`, not `blog`"),
        "{err}"
    );

    // A plan file carries its own scope.
    let (code, _, err) = s
        .run(
            versioned(false),
            &cloud,
            &["apply", &file, "--target", "db"],
        )
        .await;
    assert_eq!(code, 1);
    assert!(err.contains("carries its own scope"), "{err}");

    // A file that is not a plan is refused with its line.
    std::fs::write(&file, "{\n  \"planFile\": 7\n}\n").unwrap();
    let (code, _, err) = s.run(versioned(false), &cloud, &["apply", &file]).await;
    assert_eq!(code, 1);
    assert!(err.contains("plan.json:2:"), "{err}");
    assert!(cloud.writes().is_empty());
}

#[tokio::test]
async fn every_address_a_plan_prints_targets_and_a_typo_is_an_error() {
    let cloud = support::cloud(28);
    let mut s = answering(false, true);
    for address in ["aws/postgres/db (eu-west-3)", "aws/postgres/db", "db"] {
        let (code, out, err) = s
            .run(versioned(false), &cloud, &["plan", "--target", address])
            .await;
        assert_eq!(code, 0, "{address}: {err}");
        // The database and what it depends on; the rest left out.
        assert!(out.contains("+ aws/postgres/db (eu-west-3)"), "{out}");
        assert!(
            out.contains("+ aws/secrets/db-password (eu-west-3)"),
            "{out}"
        );
        assert!(out.contains("(filtered)"), "{out}");
    }
    let (code, out, err) = s
        .run(versioned(false), &cloud, &["plan", "--target", "jbos"])
        .await;
    assert_eq!(code, 1);
    assert!(out.is_empty());
    insta::assert_snapshot!("unknown_target", err);
    let (code, _, err) = s
        .run(
            versioned(false),
            &cloud,
            &["apply", "--yes", "--exclude", "aws/queues/job"],
        )
        .await;
    assert_eq!(code, 1);
    assert!(
        err.contains("--exclude \"aws/queues/job\" names no resource"),
        "{err}"
    );
    assert!(err.contains("aws/queues/jobs (eu-west-3)"), "{err}");
    assert!(cloud.writes().is_empty());
}

#[tokio::test]
async fn destroy_takes_a_target_and_what_depends_on_it() {
    let cloud = support::cloud(29);
    let mut s = answering(false, true);
    s.run(versioned(false), &cloud, &["apply", "--yes"]).await;
    let (code, out, _) = s
        .run(
            versioned(false),
            &cloud,
            &["destroy", "--yes", "--target", "aws/postgres/db"],
        )
        .await;
    assert_eq!(code, 0, "{out}");
    // The database and the secret composed from its endpoint go; the rest stays.
    assert!(cloud.find("aws", "postgres", "db").is_empty());
    assert!(cloud.find("aws", "secrets", "db-url").is_empty());
    assert_eq!(cloud.find("aws", "secrets", "db-password").len(), 1);
    assert_eq!(cloud.find("aws", "queues", "jobs").len(), 1);
    let deletes: Vec<String> = cloud
        .calls()
        .iter()
        .filter(|c| c.op == Op::Delete)
        .filter_map(|c| c.name.clone())
        .collect();
    assert_eq!(deletes, ["db-url", "db"], "dependants first");
}
