//! The AWS backend against moto's server, with the real SDK: the conformance suite for
//! every kind moto supports, and the staged scenario.
//!
//! The server is found through `AWS_ENDPOINT_URL` (`.ci/run` starts one). Without it the
//! tests print a loud skip, and fail when `CI=true`.

mod moto_support;

use moto_support::{endpoint, sdk};

use std::collections::BTreeMap;
use std::sync::Arc;

use infra_aws::AwsBackend;
use infra_core::kinds::*;
use infra_core::sdk::Router;
use infra_core::{
    engine::{Engine, MemoryStore, Options, RecordStore},
    prelude::{AwsRegion, Expr, Fleet, Partial, compose_secret},
    sdk::Backend,
};
use infra_testkit::conformance::{Conformance, KindSample, Variant, samples};
use infra_testkit::evidence::{Evidence, Record};

/// A backend on the moto server named by `AWS_ENDPOINT_URL`, or `None` after a loud skip.
async fn moto() -> Option<Arc<Router>> {
    let endpoint = endpoint("the AWS suite")?;
    let config = sdk(&endpoint, "us-east-1").await;
    Some(Arc::new(AwsBackend::new(config)))
}

/// The built-in samples, except that the buckets' in-place change is a tag: moto cannot
/// show a bucket whose versioning was never enabled (it answers GetBucketVersioning with
/// a document the SDK refuses, which the backend reports as unknown), so a change of
/// versioning alone would be invisible there.
fn aws_samples(code_bucket: &str) -> Vec<KindSample> {
    let tags = |v: Variant| {
        Partial::Known(Expr::lit(BTreeMap::from([(
            "stage".to_owned(),
            if v == Variant::Mutable {
                "changed"
            } else {
                "base"
            }
            .to_owned(),
        )])))
    };
    let mut out: Vec<KindSample> = samples::builtin_for("aws")
        .into_iter()
        .filter(|s| !matches!(s.kind, "objectStore" | "s3Bucket" | "iam" | "compute"))
        .collect();
    // Lambda needs a role and code it can fetch: the sample declares a role beside the
    // function, and points at an archive the test uploaded first.
    let code = format!("s3://{code_bucket}/app.zip");
    out.push(
        KindSample::new::<infra_core::prelude::Aws, Compute>(move |f, region, name, v| {
            let role = f.declare(
                region,
                format!("{name}-role"),
                Iam {
                    policies: Expr::lit(["AWSLambdaBasicExecutionRole".to_owned()].into()),
                    assumed_by: Expr::lit(["lambda.amazonaws.com".to_owned()].into()),
                    description: Partial::Unknown,
                    tags: Partial::Unknown,
                },
            );
            f.declare(
                region,
                name,
                Compute {
                    runtime: "python3.12".into(),
                    handler: "app.handler".into(),
                    code: Expr::lit(code.clone()),
                    code_sha256: Partial::Unknown,
                    memory_mb: Partial::Known(Expr::lit(if v == Variant::Mutable {
                        256
                    } else {
                        128
                    })),
                    timeout_seconds: Partial::Known(Expr::lit(30)),
                    environment: Partial::Known(Expr::lit(BTreeMap::from([(
                        "STAGE".to_owned(),
                        "conformance".to_owned(),
                    )]))),
                    secret_environment: Partial::Unknown,
                    role: Some(role),
                    tags: Partial::Unknown,
                    access: Access::Private.into(),
                },
            );
        })
        .mutable(true),
    );
    // The built-in sample names a policy that is not AWS-managed; this one names real
    // ones, which moto knows when started with MOTO_IAM_LOAD_MANAGED_POLICIES=true.
    out.push(
        KindSample::new::<infra_core::prelude::Aws, Iam>(|f, region, name, v| {
            let mut policies = std::collections::BTreeSet::from(["ReadOnlyAccess".to_owned()]);
            if v == Variant::Mutable {
                policies.insert("AWSLambdaBasicExecutionRole".to_owned());
            }
            f.declare(
                region,
                name,
                Iam {
                    policies: Expr::lit(policies),
                    assumed_by: Expr::lit(["lambda.amazonaws.com".to_owned()].into()),
                    description: Partial::Known(Expr::lit("conformance".to_owned())),
                    tags: Partial::Unknown,
                },
            );
        })
        .mutable(true),
    );
    out.push(
        KindSample::new::<infra_core::prelude::Aws, ObjectStore>(move |f, region, name, v| {
            f.declare(
                region,
                name,
                ObjectStore {
                    versioning: Partial::Known(Expr::lit(true)),
                    expire_after_days: Partial::Known(Expr::lit(Some(30))),
                    tags: tags(v),
                },
            );
        })
        .mutable(true),
    );
    out.push(
        KindSample::new::<infra_core::prelude::Aws, S3Bucket>(move |f, region, name, v| {
            f.declare(
                region,
                name,
                S3Bucket {
                    versioning: Partial::Known(Expr::lit(true)),
                    object_lock: Partial::Known(Expr::lit(v == Variant::Replace)),
                    block_public_access: Partial::Known(Expr::lit(true)),
                    tags: tags(v),
                },
            );
        })
        .mutable(true)
        .replace(true),
    );
    out
}

/// An S3 client on the moto server.
async fn s3() -> aws_sdk_s3::Client {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(std::env::var("AWS_ENDPOINT_URL").expect("checked by moto()"))
        .region(aws_config::Region::new("eu-west-3"))
        .credentials_provider(aws_credential_types::Credentials::new(
            "test", "test", None, None, "moto",
        ))
        .load()
        .await;
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .build(),
    )
}

/// The smallest valid zip archive: an end-of-central-directory record alone, carrying
/// `comment` as the archive's comment (so that two archives can differ while both stay
/// valid and empty).
fn zip_archive(comment: &[u8]) -> Vec<u8> {
    let mut zip = b"PK\x05\x06".to_vec();
    zip.extend_from_slice(&[0; 16]);
    let length = u16::try_from(comment.len()).expect("a zip comment is under 64 KiB");
    zip.extend_from_slice(&length.to_le_bytes());
    zip.extend_from_slice(comment);
    zip
}

/// Writes `archive` as the code archive `app.zip` in `bucket`.
async fn put_code(bucket: &str, archive: Vec<u8>) {
    s3().await
        .put_object()
        .bucket(bucket)
        .key("app.zip")
        .body(archive.into())
        .send()
        .await
        .expect("the code archive");
}

/// A bucket holding an (empty) code archive for the Lambda sample, outside any fleet.
async fn upload_code() -> String {
    let bucket = format!(
        "{}code",
        infra_testkit::conformance::fresh_prefix(&infra_core::engine::SystemClock::new())
    );
    let s3 = s3().await;
    s3.create_bucket()
        .bucket(&bucket)
        .create_bucket_configuration(
            aws_sdk_s3::types::CreateBucketConfiguration::builder()
                .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::from(
                    "eu-west-3",
                ))
                .build(),
        )
        .send()
        .await
        .expect("the code bucket");
    put_code(&bucket, zip_archive(b"")).await;
    bucket
}

async fn remove_code(bucket: &str) {
    let s3 = s3().await;
    let _ = s3
        .delete_object()
        .bucket(bucket)
        .key("app.zip")
        .send()
        .await;
    let _ = s3.delete_bucket().bucket(bucket).send().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aws_backend_passes_the_conformance_suite_on_moto() {
    let Some(backend) = moto().await else { return };
    let kinds = backend.capabilities().kinds;
    let code_bucket = upload_code().await;
    let report = Conformance::new(backend, aws_samples(&code_bucket))
        .regions("eu-west-3", Some("us-east-1"))
        .run()
        .await;
    eprintln!("{report}");
    remove_code(&code_bucket).await;
    report.assert_passed_with(true);
    // Every kind this build realises was exercised.
    for kind in kinds {
        assert!(
            report.outcomes.iter().any(|o| o.kind == Some(kind)
                && matches!(o.verdict, infra_testkit::conformance::Verdict::Pass)),
            "{kind} was not exercised"
        );
    }
    report
        .evidence("aws", Record::Moto, "moto-conformance", |_| true)
        .publish();
}

/// The staged fleet: every kind this build realises, with references between them,
/// under a prefix unique to the run. `stage` 0 is full, 1 changes fields in place, 2
/// trims two lines and adds one, 3 declares nothing.
fn staged(prefix: &str, kinds: &std::collections::BTreeSet<&'static str>, stage: u8) -> Fleet {
    let mut f = Fleet::builder(format!("{prefix}staged"));
    if stage == 3 {
        return f.build().expect("an empty fleet");
    }
    let here = AwsRegion::EuWest3;
    let n = |s: &str| format!("{prefix}{s}");
    let tags = |t: &str| {
        Partial::Known(Expr::lit(BTreeMap::from([(
            "stage".to_owned(),
            t.to_owned(),
        )])))
    };
    let label = if stage == 0 { "full" } else { "changed" };
    let has = |k: &str| kinds.contains(k);
    if has("s3Bucket") && stage != 2 {
        f.declare(
            here,
            n("artifacts"),
            S3Bucket {
                versioning: Partial::Known(Expr::lit(true)),
                object_lock: Partial::Unknown,
                block_public_access: Partial::Known(Expr::lit(true)),
                tags: tags(label),
            },
        );
    }
    if has("objectStore") {
        f.declare(
            here,
            n("assets"),
            ObjectStore {
                tags: tags(label),
                ..ObjectStore::new()
            },
        );
        if stage == 2 {
            f.declare(here, n("logs"), ObjectStore::new());
        }
    }
    if has("securityGroup") {
        let group = f.declare(
            here,
            n("web"),
            SecurityGroup {
                description: "staged web".into(),
                vpc_id: Partial::Unknown,
                ingress: Expr::lit(
                    [Rule::tcp(if stage == 0 { 443 } else { 8443 }, "10.0.0.0/8")].into(),
                ),
                egress: Partial::Unknown,
                tags: tags(label),
            },
        );
        if has("awsInstance") && stage != 2 {
            f.declare(
                here,
                n("web-1"),
                AwsInstance {
                    tags: tags(label),
                    ..AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Micro), group)
                },
            );
        }
    }
    if has("queues") {
        let queue = |dead_letter, visibility: u32| Queues {
            fifo: Expr::lit(false),
            visibility_timeout_seconds: Partial::Known(Expr::lit(visibility)),
            retention_seconds: Partial::Unknown,
            dead_letter: Partial::Known(dead_letter),
            max_receive_count: Partial::Known(Expr::lit(5)),
            tags: Partial::Unknown,
        };
        let dead = f.declare(here, n("jobs-dead"), queue(None, 30));
        if stage != 2 {
            f.declare(
                here,
                n("jobs"),
                queue(Some(dead), if stage == 0 { 30 } else { 60 }),
            );
        }
    }
    if has("secrets") {
        let password = f.declare(here, n("db-password"), Secrets::generated(24));
        f.declare(
            here,
            n("token"),
            Secrets {
                description: Partial::Known(Expr::lit(format!("stage {label}"))),
                ..Secrets::composed(compose_secret!("token:{}", Expr::secret(password)))
            },
        );
        if has("postgres") {
            f.declare(
                here,
                n("db"),
                Postgres {
                    backup_retention_days: Partial::Known(Expr::lit(if stage == 0 {
                        7
                    } else {
                        14
                    })),
                    ..Postgres::classic(PostgresClassic {
                        engine_version: "16",
                        instance_class: "db.t4g.micro",
                        master_username: "app",
                        master_password: password,
                    })
                },
            );
        }
    }
    if has("imageRegistry") {
        f.declare(
            here,
            n("images"),
            ImageRegistry {
                scan_on_push: Partial::Known(Expr::lit(stage != 0)),
                immutable_tags: Partial::Known(Expr::lit(true)),
                tags: Partial::Unknown,
            },
        );
    }
    if has("iam") {
        f.declare(
            here,
            n("runner"),
            Iam {
                policies: Expr::lit(["AWSLambdaBasicExecutionRole".to_owned()].into()),
                assumed_by: Expr::lit(["lambda.amazonaws.com".to_owned()].into()),
                description: Partial::Known(Expr::lit(format!("stage {label}"))),
                tags: Partial::Unknown,
            },
        );
    }
    f.build().expect("the staged fleet is sound")
}

/// Every resource of the fleet's kinds, in the regions used, whose name carries `prefix`.
async fn sweep(backend: &Router, prefix: &str) -> Vec<String> {
    let mut left = Vec::new();
    for kind in backend.capabilities().kinds {
        for region in ["eu-west-3", "us-east-1"] {
            for l in backend.list(kind, region).await.expect("list") {
                if l.name.starts_with(prefix) {
                    left.push(format!("{kind} {region} {}", l.name));
                }
            }
        }
    }
    left
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_staged_scenario_runs_on_moto_and_leaves_nothing_behind() {
    let Some(backend) = moto().await else { return };
    let kinds = backend.capabilities().kinds;
    let prefix = infra_testkit::conformance::fresh_prefix(&infra_core::engine::SystemClock::new());
    let store = Arc::new(MemoryStore::new());
    let engine = Engine::new(
        infra_core::prelude::Backends::new().with(backend.clone()),
        store.clone(),
    );
    let mut evidence = Evidence::new("aws", Record::Moto, "moto-staged");
    for stage in 0..4 {
        let fleet = staged(&prefix, &kinds, stage);
        let outcome = engine
            .apply(&fleet.plan(), &Options::default().force(true))
            .await
            .unwrap_or_else(|e| panic!("stage {stage}: {e}"));
        assert!(
            outcome.result.is_success(),
            "stage {stage}: {:#?}",
            outcome.result
        );
        for applied in &outcome.result.applied {
            let act = match applied.change {
                infra_core::engine::Change::Created => "create",
                infra_core::engine::Change::Updated => "update",
                infra_core::engine::Change::Replaced => "replace",
                _ => "read",
            };
            evidence.checked(&applied.resource.kind, act);
        }
        for pruned in &outcome.result.pruned {
            evidence.checked(&pruned.resource.kind, "delete");
        }
        let created = outcome
            .result
            .applied
            .iter()
            .filter(|a| a.change == infra_core::engine::Change::Created)
            .count();
        let updated = outcome
            .result
            .applied
            .iter()
            .filter(|a| a.change == infra_core::engine::Change::Updated)
            .count();
        match stage {
            0 => assert_eq!(created, fleet.len(), "stage 0 creates everything"),
            1 => assert!(
                updated > 0 && created == 0,
                "stage 1 updates in place: {:#?}",
                outcome.result
            ),
            2 => assert!(
                created >= 1 && !outcome.result.pruned.is_empty(),
                "stage 2 adds and prunes: {:#?}",
                outcome.result
            ),
            _ => assert!(outcome.result.applied.is_empty(), "stage 3 only prunes"),
        }
        let again = engine
            .plan(&fleet.plan(), &Options::default())
            .await
            .expect("plan");
        assert!(
            !again.has_changes(),
            "stage {stage}: a second plan is not empty:\n{}",
            again.render()
        );
        assert_eq!(
            store.load_ledger(fleet.name()).unwrap().len(),
            fleet.len(),
            "stage {stage}: the ledger lists exactly the declaration"
        );
    }
    let left = sweep(&backend, &prefix).await;
    assert!(left.is_empty(), "left behind: {left:#?}");
    evidence.publish();
}

/// A fleet of one Lambda function (and the role it runs as) whose code is
/// `s3://{code_bucket}/app.zip`, declared with the digest `code_sha256`; with no digest,
/// the same fleet declaring nothing, so that an apply prunes both.
fn one_function(prefix: &str, code_bucket: &str, code_sha256: Option<String>) -> Fleet {
    let here = AwsRegion::EuWest3;
    let mut f = Fleet::builder(format!("{prefix}digest"));
    if let Some(digest) = code_sha256 {
        let role = f.declare(
            here,
            format!("{prefix}digest-role"),
            Iam {
                policies: Expr::lit(["AWSLambdaBasicExecutionRole".to_owned()].into()),
                assumed_by: Expr::lit(["lambda.amazonaws.com".to_owned()].into()),
                description: Partial::Unknown,
                tags: Partial::Unknown,
            },
        );
        f.declare(
            here,
            format!("{prefix}digest-fn"),
            Compute {
                runtime: "python3.12".into(),
                handler: "app.handler".into(),
                code: Expr::lit(format!("s3://{code_bucket}/app.zip")),
                code_sha256: Partial::Known(Expr::lit(digest)),
                memory_mb: Partial::Known(Expr::lit(128)),
                timeout_seconds: Partial::Known(Expr::lit(30)),
                environment: Partial::Unknown,
                secret_environment: Partial::Unknown,
                role: Some(role),
                tags: Partial::Unknown,
                access: Access::Private.into(),
            },
        );
    }
    f.build().expect("the fleet is sound")
}

/// The `codeSha256` the backend reads of the function `name`.
async fn deployed_digest(backend: &Router, name: &str) -> Option<serde_json::Value> {
    backend
        .read("compute", "eu-west-3", name)
        .await
        .expect("the function reads")
        .reported()
        .get("codeSha256")
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_archive_under_the_same_key_is_deployed_once_its_digest_is_declared() {
    let Some(backend) = moto().await else { return };
    let code_bucket = upload_code().await;
    let archive_a = zip_archive(b"");
    let archive_b = zip_archive(b"the second build");
    let (digest_a, digest_b) = (code_digest(&archive_a), code_digest(&archive_b));
    assert_ne!(digest_a, digest_b);
    let prefix = infra_testkit::conformance::fresh_prefix(&infra_core::engine::SystemClock::new());
    let function = format!("{prefix}digest-fn");
    let engine = Engine::new(
        infra_core::prelude::Backends::new().with(backend.clone()),
        Arc::new(MemoryStore::new()),
    );
    let options = Options::default();

    // Archive A, declared with its digest: created, and then nothing to do.
    let with_a = one_function(&prefix, &code_bucket, Some(digest_a.clone()));
    let created = engine.apply(&with_a.plan(), &options).await.expect("apply");
    assert!(created.result.is_success(), "{:#?}", created.result);
    assert_eq!(
        deployed_digest(&backend, &function).await,
        Some(serde_json::json!(digest_a)),
        "Lambda reports the digest of the archive it was created from"
    );
    let again = engine.plan(&with_a.plan(), &options).await.expect("plan");
    assert!(!again.has_changes(), "{}", again.render());

    // Archive B over the same key: unseen while A's digest is declared...
    put_code(&code_bucket, archive_b).await;
    let unchanged = engine.plan(&with_a.plan(), &options).await.expect("plan");
    assert!(!unchanged.has_changes(), "{}", unchanged.render());

    // ...and an update of `codeSha256` alone once B's is.
    let with_b = one_function(&prefix, &code_bucket, Some(digest_b.clone()));
    let planned = engine.plan(&with_b.plan(), &options).await.expect("plan");
    let changed: Vec<_> = planned
        .changes
        .iter()
        .filter(|c| c.action != "unchanged")
        .collect();
    assert_eq!(changed.len(), 1, "{}", planned.render());
    assert_eq!(changed[0].resource.name, function);
    assert_eq!(changed[0].action, "update");
    let fields: Vec<&str> = changed[0].fields.iter().map(|f| f.field).collect();
    assert_eq!(fields, ["codeSha256"]);
    // The plan shows the deployed digest and the declared one.
    assert_eq!(
        (&changed[0].fields[0].before, &changed[0].fields[0].after),
        (&serde_json::json!(digest_a), &serde_json::json!(digest_b))
    );

    let updated = engine.apply(&with_b.plan(), &options).await.expect("apply");
    assert!(updated.result.is_success(), "{:#?}", updated.result);
    assert!(
        updated
            .result
            .applied
            .iter()
            .any(|a| a.resource.name == function && a.change == infra_core::engine::Change::Updated),
        "{:#?}",
        updated.result
    );
    assert_eq!(
        deployed_digest(&backend, &function).await,
        Some(serde_json::json!(digest_b)),
        "the update deployed archive B"
    );
    let settled = engine.plan(&with_b.plan(), &options).await.expect("plan");
    assert!(!settled.has_changes(), "{}", settled.render());

    // Nothing declared: the function and its role are pruned.
    let emptied = engine
        .apply(&one_function(&prefix, &code_bucket, None).plan(), &options)
        .await
        .expect("apply");
    assert!(emptied.result.is_success(), "{:#?}", emptied.result);
    assert_eq!(emptied.result.pruned.len(), 2, "{:#?}", emptied.result);
    remove_code(&code_bucket).await;
}

/// A fleet of two generated secrets and a classic database whose master password comes
/// from the first or, with `second`, the second; with `None`, nothing (a teardown).
fn database_on(prefix: &str, second: Option<bool>) -> Fleet {
    let here = AwsRegion::EuWest3;
    let mut f = Fleet::builder(format!("{prefix}password"));
    if let Some(second) = second {
        let one = f.declare(here, format!("{prefix}pw-one"), Secrets::generated(24));
        let two = f.declare(here, format!("{prefix}pw-two"), Secrets::generated(24));
        f.declare(
            here,
            format!("{prefix}orders"),
            Postgres::classic(PostgresClassic {
                engine_version: "16",
                instance_class: "db.t4g.micro",
                master_username: "admin",
                master_password: if second { two } else { one },
            }),
        );
    }
    f.build().expect("the fleet is sound")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_pointed_at_another_password_secret_gets_its_value() {
    let Some(backend) = moto().await else { return };
    let prefix = infra_testkit::conformance::fresh_prefix(&infra_core::engine::SystemClock::new());
    let db = format!("{prefix}orders");
    let engine = Engine::new(
        infra_core::prelude::Backends::new().with(backend.clone()),
        Arc::new(MemoryStore::new()),
    );
    let options = Options::default();
    let source = |backend: Arc<Router>, db: String| async move {
        backend
            .read("postgres", "eu-west-3", &db)
            .await
            .expect("the database reads")
            .reported()
            .get("masterPassword")
            .cloned()
    };
    let first = engine
        .apply(&database_on(&prefix, Some(false)).plan(), &options)
        .await
        .expect("apply");
    assert!(first.result.is_success(), "{:#?}", first.result);
    let arn = |name: &str| {
        let name = format!("{prefix}{name}");
        let backend = backend.clone();
        async move {
            backend
                .list("secrets", "eu-west-3")
                .await
                .expect("secrets list")
                .into_iter()
                .find(|l| l.name == name)
                .expect("the secret exists")
                .handle
        }
    };
    let (one, two) = (arn("pw-one").await, arn("pw-two").await);
    // RDS reports no password source; the bookkeeping tag does, and only there.
    assert_eq!(
        source(backend.clone(), db.clone()).await,
        Some(serde_json::json!(one))
    );
    let quiet = engine
        .plan(&database_on(&prefix, Some(false)).plan(), &options)
        .await
        .expect("plan");
    assert!(!quiet.has_changes(), "{}", quiet.render());

    let moved = engine
        .plan(&database_on(&prefix, Some(true)).plan(), &options)
        .await
        .expect("plan");
    let line = moved
        .changes
        .iter()
        .find(|c| c.resource.name == db)
        .expect("the database is planned");
    assert_eq!(line.action, "update", "{}", moved.render());
    let fields: Vec<&str> = line.fields.iter().map(|f| f.field).collect();
    assert_eq!(fields, ["masterPassword"]);
    let updated = engine
        .apply(&database_on(&prefix, Some(true)).plan(), &options)
        .await
        .expect("apply");
    assert!(updated.result.is_success(), "{:#?}", updated.result);
    assert_eq!(
        source(backend.clone(), db.clone()).await,
        Some(serde_json::json!(two))
    );
    let read = backend
        .read("postgres", "eu-west-3", &db)
        .await
        .expect("the database reads");
    assert!(
        !read.reported()["tags"]
            .as_object()
            .expect("tags")
            .contains_key("infra-master-password"),
        "the bookkeeping tag is not a declared tag"
    );
    let settled = engine
        .plan(&database_on(&prefix, Some(true)).plan(), &options)
        .await
        .expect("plan");
    assert!(!settled.has_changes(), "{}", settled.render());

    let emptied = engine
        .apply(&database_on(&prefix, None).plan(), &options)
        .await
        .expect("apply");
    assert!(emptied.result.is_success(), "{:#?}", emptied.result);
}
