//! Temporary: runs the conformance suite on postgres and compute only.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use infra_aws::AwsBackend;
use infra_core::kinds::*;
use infra_core::{Backend, Expr, Partial};
use infra_testkit::conformance::{Conformance, KindSample, Variant, samples};

async fn config() -> aws_types::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(std::env::var("AWS_ENDPOINT_URL").unwrap())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_credential_types::Credentials::new("test", "test", None, None, "moto"))
        .load()
        .await
}

fn known<T: infra_core::Value>(v: T) -> Partial<Expr<T>> {
    Partial::Known(Expr::lit(v))
}

fn compute_sample(bucket: &'static str) -> KindSample {
    KindSample::new::<infra_core::Aws, Compute>(move |f, region, name, v| {
        let role = f.declare(region, format!("{name}-dep"), Iam {
            policies: Expr::lit(BTreeSet::new()),
            assumed_by: Expr::lit(BTreeSet::from(["lambda.amazonaws.com".to_owned()])),
            description: known("role".to_owned()),
            tags: Partial::Unknown,
        });
        f.declare(region, name, Compute {
            runtime: Expr::lit("python3.12".to_owned()),
            handler: Expr::lit("app.handler".to_owned()),
            code: Expr::lit(format!("s3://{bucket}/app.zip")),
            memory_mb: known(if v == Variant::Mutable { 256 } else { 128 }),
            timeout_seconds: known(30),
            environment: known(BTreeMap::from([("MODE".to_owned(), "test".to_owned())])),
            secret_environment: Partial::Unknown,
            role: Some(role),
            tags: known(BTreeMap::from([("suite".to_owned(), "conformance".to_owned())])),
        });
    })
    .mutable(true)
}

fn serverless_sample() -> KindSample {
    KindSample::new::<infra_core::Aws, Postgres>(|f, region, name, v| {
        let password = f.declare(region, format!("{name}-dep"), Secrets::generated(24));
        let user = if v == Variant::Replace { "conformance2" } else { "conformance" };
        let max = if v == Variant::Mutable { Acu::whole(4) } else { Acu::whole(2) };
        f.declare(region, name, Postgres {
            backup_retention_days: known(7),
            tags: known(BTreeMap::from([("suite".to_owned(), "conformance".to_owned())])),
            ..Postgres::serverless("16", Acu::halves(1), max, user, password)
        });
    })
    .mutable(true)
    .replace(true)
}

async fn make_bucket(bucket: &str) {
    let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&config().await).force_path_style(true).build());
    let _ = s3.create_bucket().bucket(bucket).send().await;
    // A minimal zip archive holding app.py.
    let zip: &[u8] = include_bytes!("/tmp/scratch/app.zip");
    s3.put_object().bucket(bucket).key("app.zip").body(zip.to_vec().into()).send().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scratch() {
    let which = std::env::var("SCRATCH").unwrap_or_default();
    let bucket = "scratchcode-rdslambda";
    make_bucket(bucket).await;
    let backend = Arc::new(AwsBackend::new(config().await));
    let mut list: Vec<KindSample> = match which.as_str() {
        "serverless" => vec![serverless_sample()],
        "compute" => vec![compute_sample(bucket)],
        "builtin" => samples::builtin_for("aws").into_iter().filter(|s| s.kind == "compute" || s.kind == "postgres").collect(),
        _ => samples::builtin_for("aws").into_iter().filter(|s| s.kind == "postgres").collect(),
    };
    if which.is_empty() {
        list.push(compute_sample(bucket));
    }
    let report = Conformance::new(backend.clone(), list).regions("eu-west-3", Some("us-east-1")).run().await;
    eprintln!("{report}");
    let _ = backend.capabilities();
}
