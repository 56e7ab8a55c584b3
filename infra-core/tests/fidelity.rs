//! Divergence as the clouds answer it: sets in any order are the same set, a database
//! moving between shapes is replaced, a new code artifact is seen through its digest,
//! a composed secret is written again when what it is composed from changes, and a
//! field the cloud never reports is compared with what was last written there (which a
//! deleted cache forgets) — without any secret value reaching a record.

mod support;

use std::collections::BTreeSet;

use infra_core::kinds::*;
use infra_core::{
    engine::{Change, FileStore, Options, RecordStore},
    prelude::{AwsRegion, Expr, Fleet, Partial, compose_secret},
};
use serde_json::json;

#[tokio::test]
async fn a_set_the_cloud_answers_in_another_order_is_no_drift() {
    let cloud = support::cloud(51);
    let (engine, _) = support::engine_in_memory(&cloud);
    let mut f = Fleet::builder("sets");
    f.declare(
        AwsRegion::EuWest3,
        "runner",
        Iam {
            policies: Expr::lit(BTreeSet::from([
                "a".to_owned(),
                "b".to_owned(),
                "c".to_owned(),
            ])),
            assumed_by: Expr::lit(BTreeSet::from(["lambda.amazonaws.com".to_owned()])),
            description: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    let fleet = f.build().unwrap();
    engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    let role = cloud.find("aws", "iam", "runner")[0].handle.clone();
    cloud.set_field(&role, "policies", json!(["c", "a", "b"]));
    let report = engine
        .plan(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert!(!report.has_changes(), "{}", report.render());
    // A set that really differs is drift.
    cloud.set_field(&role, "policies", json!(["c", "a"]));
    let report = engine
        .plan(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert_eq!(report.changes[0].action, "update", "{}", report.render());
}

fn database(serverless: bool, username: &str) -> Fleet {
    let mut f = Fleet::builder("shapes");
    let here = AwsRegion::EuWest3;
    let password = f.declare(here, "db-password", Secrets::generated(24));
    let db = f.declare(
        here,
        "db",
        if serverless {
            Postgres::serverless(PostgresServerless {
                engine_version: "16",
                min_capacity: Acu::halves(1),
                max_capacity: Acu::whole(4),
                master_username: username,
                master_password: password,
            })
        } else {
            Postgres::classic(PostgresClassic {
                engine_version: "16",
                instance_class: "db.t4g.micro",
                master_username: username,
                master_password: password,
            })
        },
    );
    let host = Expr::observed(db).map(|o: &PostgresObserved| o.endpoint.clone());
    f.declare(
        here,
        "db-url",
        Secrets::composed(compose_secret!(
            "postgres://app:{}@{}/app",
            Expr::secret(password),
            host
        )),
    );
    f.build().unwrap()
}

#[tokio::test]
async fn a_database_moving_between_shapes_is_replaced_not_updated() {
    let cloud = support::cloud(52);
    let (engine, _) = support::engine_in_memory(&cloud);
    engine
        .apply(&database(false, "app").plan(), &Options::default())
        .await
        .unwrap();
    let serverless = database(true, "app");
    let report = engine
        .plan(&serverless.plan(), &Options::default())
        .await
        .unwrap();
    let db = report
        .changes
        .iter()
        .find(|c| c.resource.name == "db")
        .unwrap();
    assert_eq!(db.action, "replace", "{}", report.render());
    let outcome = engine
        .apply(&serverless.plan(), &Options::default())
        .await
        .unwrap();
    assert!(outcome.is_success(), "{:#?}", outcome.result);
    assert!(
        outcome
            .result
            .applied
            .iter()
            .any(|a| a.resource.name == "db" && a.change == Change::Replaced)
    );
    let again = engine
        .plan(&serverless.plan(), &Options::default())
        .await
        .unwrap();
    assert!(!again.has_changes(), "{}", again.render());
}

#[tokio::test]
async fn a_composed_secret_is_written_again_when_its_inputs_change() {
    let cloud = support::cloud(53);
    let (engine, store) = support::engine_in_memory(&cloud);
    engine
        .apply(&database(false, "app").plan(), &Options::default())
        .await
        .unwrap();
    let url = |cloud: &infra_testkit::sim::SimCloud| {
        let handle = cloud.find("aws", "secrets", "db-url")[0].handle.clone();
        cloud.stored_secret(&handle).unwrap().expose().to_owned()
    };
    let endpoint = |cloud: &infra_testkit::sim::SimCloud| {
        cloud.find("aws", "postgres", "db")[0].observed["endpoint"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let first = url(&cloud);
    assert!(first.contains(&endpoint(&cloud)));
    let again = engine
        .plan(&database(false, "app").plan(), &Options::default())
        .await
        .unwrap();
    assert!(
        !again.has_changes(),
        "equal values are no change: {}",
        again.render()
    );

    // A new administrator name replaces the database, which gets a new endpoint: the
    // connection string composed from it is written again.
    let renamed = database(false, "admin");
    let outcome = engine
        .apply(&renamed.plan(), &Options::default())
        .await
        .unwrap();
    assert!(outcome.is_success(), "{:#?}", outcome.result);
    let second = url(&cloud);
    assert_ne!(first, second);
    assert!(
        second.contains(&endpoint(&cloud)),
        "the new endpoint is in the secret"
    );
    let again = engine
        .plan(&renamed.plan(), &Options::default())
        .await
        .unwrap();
    assert!(!again.has_changes(), "{}", again.render());

    // An edit behind the engine's back is seen, as a sensitive difference, and repaired.
    let handle = cloud.find("aws", "secrets", "db-url")[0].handle.clone();
    let backend = cloud.backend("aws");
    let settled = SecretsSettled {
        value_from: SecretSourceSettled::Composed(infra_core::prelude::SecretString::new(
            "tampered",
        )),
        description: Partial::Unknown,
        tags: Partial::Unknown,
    };
    backend
        .update(
            "secrets",
            "eu-west-3",
            &handle,
            infra_core::sdk::SettledSpec::new::<Secrets>(&settled),
        )
        .await
        .unwrap()
        .expect_done("the simulated cloud writes at once");
    let report = engine
        .plan(&renamed.plan(), &Options::default())
        .await
        .unwrap();
    let line = report
        .changes
        .iter()
        .find(|c| c.resource.name == "db-url")
        .unwrap();
    assert_eq!(line.action, "update", "{}", report.render());
    assert!(line.fields[0].sensitive);
    assert!(report.render().contains("valueFrom: (sensitive)"));
    engine
        .apply(&renamed.plan(), &Options::default())
        .await
        .unwrap();
    assert_eq!(url(&cloud), second);

    // No value, nor anything it was composed from, reached the records.
    let ledger = store.load_ledger("shapes").unwrap();
    let mut records = format!("{ledger:?}");
    for (provider, kind) in store.cached_pairs("shapes").unwrap() {
        let entries = store.load_cache("shapes", &provider, &kind).unwrap();
        records.push_str(&serde_json::to_string(&entries).unwrap());
    }
    let password = cloud.find("aws", "secrets", "db-password")[0]
        .handle
        .clone();
    let password = cloud.stored_secret(&password).unwrap();
    assert!(!records.contains(password.expose()));
    assert!(!records.contains(&second));
}

#[tokio::test]
async fn a_new_code_artifact_under_the_same_location_is_seen_through_its_digest() {
    let cloud = support::cloud(54);
    let (engine, _) = support::engine_in_memory(&cloud);
    let function = |digest: Option<String>| {
        let mut f = Fleet::builder("code");
        let here = AwsRegion::EuWest3;
        let role = f.declare(
            here,
            "fn-role",
            Iam {
                policies: Expr::lit(BTreeSet::new()),
                assumed_by: Expr::lit(BTreeSet::from(["lambda.amazonaws.com".to_owned()])),
                description: Partial::Unknown,
                tags: Partial::Unknown,
            },
        );
        f.declare(
            here,
            "handler",
            Compute {
                runtime: "python3.12".into(),
                handler: "app.handle".into(),
                code: "s3://code/app.zip".into(),
                code_sha256: match digest {
                    Some(d) => Partial::Known(Expr::lit(d)),
                    None => Partial::Unknown,
                },
                memory_mb: Partial::Unknown,
                timeout_seconds: Partial::Unknown,
                environment: Partial::Unknown,
                secret_environment: Partial::Unknown,
                role: Some(role),
                tags: Partial::Unknown,
                access: Access::Private.into(),
            },
        );
        f.build().unwrap()
    };
    let v1 = code_digest(b"version one");
    engine
        .apply(&function(Some(v1.clone())).plan(), &Options::default())
        .await
        .unwrap();
    let quiet = engine
        .plan(&function(Some(v1)).plan(), &Options::default())
        .await
        .unwrap();
    assert!(!quiet.has_changes(), "{}", quiet.render());
    // The artifact under the same location is rebuilt: only its digest says so.
    let v2 = code_digest(b"version two");
    let report = engine
        .plan(&function(Some(v2.clone())).plan(), &Options::default())
        .await
        .unwrap();
    let line = report
        .changes
        .iter()
        .find(|c| c.resource.name == "handler")
        .unwrap();
    assert_eq!(line.action, "update", "{}", report.render());
    assert_eq!(line.fields[0].field, "codeSha256");
    engine
        .apply(&function(Some(v2.clone())).plan(), &Options::default())
        .await
        .unwrap();
    let again = engine
        .plan(&function(Some(v2)).plan(), &Options::default())
        .await
        .unwrap();
    assert!(!again.has_changes(), "{}", again.render());
}

#[tokio::test]
async fn a_renamed_password_secret_reaches_its_database_across_clouds_one_call_at_a_time() {
    let declare = |secret_name: &str| {
        let mut f = Fleet::builder("moves");
        let password = f.declare(
            infra_core::prelude::GcpRegion::EuropeWest1,
            secret_name,
            Secrets::generated(16),
        );
        f.declare(
            AwsRegion::EuWest3,
            "orders",
            Postgres::classic(PostgresClassic {
                engine_version: "16",
                instance_class: "db.t4g.micro",
                master_username: "admin",
                master_password: password,
            }),
        );
        f.build().unwrap()
    };
    for parallelism in [1, 16] {
        let cloud = support::cloud(55);
        let (engine, _) = support::engine_in_memory(&cloud);
        let options = Options::default().parallelism(parallelism);
        let first = engine.apply(&declare("pw").plan(), &options).await.unwrap();
        assert!(first.is_success(), "{:#?}", first.result);
        let renamed = engine
            .apply(&declare("pw-v2").plan(), &options)
            .await
            .unwrap();
        assert!(
            renamed.is_success(),
            "parallelism {parallelism}: {:#?}",
            renamed.result
        );
        let secret = &cloud.find("gcp", "secrets", "pw-v2")[0];
        let db = &cloud.find("aws", "postgres", "orders")[0];
        assert_eq!(db.config["masterPassword"], json!(secret.handle));
    }
}

#[tokio::test]
async fn a_declared_change_to_a_field_the_cloud_never_reports_is_seen_through_what_was_written() {
    let declare = |uses_second: bool| {
        let mut f = Fleet::builder("recall");
        let here = AwsRegion::EuWest3;
        let first = f.declare(here, "pw-one", Secrets::generated(16));
        let second = f.declare(here, "pw-two", Secrets::generated(16));
        let password = if uses_second { second } else { first };
        f.declare(
            here,
            "orders",
            Postgres::classic(PostgresClassic {
                engine_version: "16",
                instance_class: "db.t4g.micro",
                master_username: "admin",
                master_password: password,
            }),
        );
        f.build().unwrap()
    };
    let cloud = support::cloud(56);
    let (engine, store) = support::engine_in_memory(&cloud);
    engine
        .apply(&declare(false).plan(), &Options::default())
        .await
        .unwrap();
    // RDS never reports the password's secret; the cache keeps what was written.
    let db = &cloud.find("aws", "postgres", "orders")[0];
    let one = cloud.find("aws", "secrets", "pw-one")[0].handle.clone();
    let two = cloud.find("aws", "secrets", "pw-two")[0].handle.clone();
    assert_eq!(db.config["masterPassword"], json!(one));
    let cached = store.load_cache("recall", "aws", "postgres").unwrap();
    assert_eq!(cached[0].written["masterPassword"], json!(one));
    // What the cloud reports is left to the cloud.
    assert!(!cached[0].written.contains_key("engineVersion"));

    let report = engine
        .plan(&declare(true).plan(), &Options::default())
        .await
        .unwrap();
    let line = report
        .changes
        .iter()
        .find(|c| c.resource.name == "orders")
        .unwrap();
    assert_eq!(line.action, "update", "{}", report.render());
    assert_eq!(line.fields[0].field, "masterPassword");
    assert_eq!(
        (&line.fields[0].before, &line.fields[0].after),
        (&json!(one), &json!(two))
    );
    let outcome = engine
        .apply(&declare(true).plan(), &Options::default())
        .await
        .unwrap();
    assert!(outcome.is_success(), "{:#?}", outcome.result);
    let db = &cloud.find("aws", "postgres", "orders")[0];
    assert_eq!(db.config["masterPassword"], json!(two));
    let again = engine
        .plan(&declare(true).plan(), &Options::default())
        .await
        .unwrap();
    assert!(!again.has_changes(), "{}", again.render());
}

#[tokio::test]
async fn without_the_cache_a_plan_still_runs_and_a_change_to_an_unreported_field_waits() {
    let declare = |uses_second: bool, backup_days: Option<u32>| {
        let mut f = Fleet::builder("recall");
        let here = AwsRegion::EuWest3;
        let first = f.declare(here, "pw-one", Secrets::generated(16));
        let second = f.declare(here, "pw-two", Secrets::generated(16));
        let mut db = Postgres::classic(PostgresClassic {
            engine_version: "16",
            instance_class: "db.t4g.micro",
            master_username: "admin",
            master_password: if uses_second { second } else { first },
        });
        if let Some(days) = backup_days {
            db.backup_retention_days = Partial::Known(Expr::lit(days));
        }
        f.declare(here, "orders", db);
        f.build().unwrap()
    };
    let state = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(FileStore::new(state.path()));
    let cloud = support::cloud(57);
    let engine = support::engine(&cloud, store.clone());
    let first = engine
        .apply(&declare(false, None).plan(), &Options::default())
        .await
        .unwrap();
    assert!(first.is_success(), "{:#?}", first.result);
    let two = cloud.find("aws", "secrets", "pw-two")[0].handle.clone();

    // The cache deleted: the plan runs, finds every resource, and cannot see the change.
    let cache = store.cache_path("recall", "aws", "postgres").unwrap();
    std::fs::remove_file(&cache).unwrap();
    let report = engine
        .plan(&declare(true, None).plan(), &Options::default())
        .await
        .unwrap();
    assert!(!report.has_changes(), "{}", report.render());

    // Another change to the database writes the field, and the cache records it again.
    let outcome = engine
        .apply(&declare(true, Some(7)).plan(), &Options::default())
        .await
        .unwrap();
    assert!(outcome.is_success(), "{:#?}", outcome.result);
    let db = &cloud.find("aws", "postgres", "orders")[0];
    assert_eq!(db.config["masterPassword"], json!(two));
    let cached = store.load_cache("recall", "aws", "postgres").unwrap();
    assert_eq!(cached[0].written["masterPassword"], json!(two));
}
