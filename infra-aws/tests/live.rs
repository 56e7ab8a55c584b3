//! The conformance suite against a real AWS account, with the credentials of the
//! environment (`AWS_PROFILE`, the environment's keys, SSO).
//!
//! It creates real resources (then deletes them), which may cost money, so it runs only
//! with `INFRA_AWS_LIVE=yes`; otherwise it prints a loud skip and passes. It never runs
//! in CI.
//!
//! ```sh
//! INFRA_AWS_LIVE=yes AWS_PROFILE=sandbox cargo test -p infra-aws --test live -- --nocapture
//! ```
//!
//! - `INFRA_AWS_LIVE_REGION` (default `eu-west-3`) and `INFRA_AWS_LIVE_SECOND_REGION`
//!   (default `us-east-1`) are the regions the checks use.
//! - `INFRA_AWS_LIVE_KINDS` picks the kinds, comma-separated. By default the ones that
//!   cost next to nothing and are quick: `s3Bucket`, `objectStore`, `queues`,
//!   `secrets`, `imageRegistry`, `securityGroup` and `iam`. `awsInstance` and
//!   `postgres` (which bill by the hour, and take minutes) run only when named. The
//!   suite reports every kind left out as skipped, loudly.
//! - `compute` has no live sample: a function needs a code archive in S3 and a role
//!   Lambda accepts, which this file does not make.

use std::collections::BTreeSet;

use infra_aws::AwsBackend;
use infra_core::kinds::Iam;
use infra_core::prelude::{Aws, Expr, Partial};
use infra_testkit::conformance::{Conformance, KindSample, Variant, samples};

/// The kinds that run when `INFRA_AWS_LIVE_KINDS` does not say.
const CHEAP_KINDS: &[&str] = &[
    "s3Bucket",
    "objectStore",
    "queues",
    "secrets",
    "imageRegistry",
    "securityGroup",
    "iam",
];

fn setting(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_owned())
}

/// The samples of the kinds asked for. The built-in `iam` sample names a policy that is
/// not AWS-managed: this one names real ones.
fn live_samples(kinds: &BTreeSet<String>) -> Vec<KindSample> {
    let mut out: Vec<KindSample> = samples::builtin_for("aws")
        .into_iter()
        .filter(|s| !matches!(s.kind, "iam" | "compute"))
        .collect();
    out.push(
        KindSample::new::<Aws, Iam>(|f, region, name, v| {
            let mut policies = BTreeSet::from(["ReadOnlyAccess".to_owned()]);
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
    out.retain(|s| kinds.contains(s.kind));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aws_backend_passes_the_conformance_suite_on_a_real_account() {
    if std::env::var("INFRA_AWS_LIVE").as_deref() != Ok("yes") {
        eprintln!("\n==================== SKIPPED ====================");
        eprintln!("INFRA_AWS_LIVE is not `yes`: the conformance suite did not run on real AWS.");
        eprintln!("It creates real resources; set INFRA_AWS_LIVE=yes (and credentials) to run it.");
        eprintln!("=================================================\n");
        return;
    }
    let backend = AwsBackend::from_env().await;
    if let Some(why) = backend.unreachable() {
        panic!("INFRA_AWS_LIVE=yes, but AWS is unreachable: {why}");
    }
    let account = backend
        .account()
        .await
        .expect("sts:GetCallerIdentity names the account the suite runs in");
    let region = setting("INFRA_AWS_LIVE_REGION", "eu-west-3");
    let second = setting("INFRA_AWS_LIVE_SECOND_REGION", "us-east-1");
    let kinds: BTreeSet<String> = setting("INFRA_AWS_LIVE_KINDS", &CHEAP_KINDS.join(","))
        .split(',')
        .map(|k| k.trim().to_owned())
        .filter(|k| !k.is_empty())
        .collect();
    eprintln!(
        "running the conformance suite in AWS account {account}, regions {region} and \
         {second}, kinds {}",
        kinds.iter().cloned().collect::<Vec<_>>().join(", ")
    );
    let report = Conformance::new(backend, live_samples(&kinds))
        .regions(&region, Some(&second))
        .run()
        .await;
    eprintln!("{report}");
    report.assert_passed_with(true);
}
