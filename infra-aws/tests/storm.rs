//! The throttling storm, on moto's server: a relay in front of it refuses half of the
//! calls with `429 Too Many Requests` (one refusal in five asking for a `Retry-After`
//! of a few seconds) for thirty seconds of simulated time, and passes the rest on. The
//! backend's clock, which the SDK's retries sleep on, is the storm's `ManualClock`:
//! nothing waits for real.
//!
//! A small fleet of every kind this crate has on moto but compute, instances and
//! databases (buckets, queues, secrets, roles, repositories, security groups) is
//! applied through the engine. Every resource must be made exactly once (moto holds
//! one of each, and the relay passed on one create per resource), the apply must
//! report no failure, and no retry may come before the time its refusal asked for.
//!
//! The server is found through `AWS_ENDPOINT_URL` (`.ci/run` starts one). Without it the
//! test prints a loud skip, and fails when `CI=true`.

mod moto_support;

use moto_support::{endpoint, sdk};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use infra_aws::AwsBackend;
use infra_core::engine::{Change, Engine, MemoryStore, Options, SystemClock};
use infra_core::kinds::*;
use infra_core::prelude::{AwsRegion, Backends, Expr, Fleet, Partial};
use infra_core::sdk::{ManualClock, RetryPolicy};
use infra_testkit::relay::{Exchange, Relay};
use infra_testkit::storm::{Storm, StormFigures};

/// The region every resource is made in.
const REGION: &str = "eu-west-3";
/// How long the storm lasts, on the manual clock.
const STORM: Duration = Duration::from_secs(30);

/// How many of each kind the fleet declares.
const COUNTS: [(&str, usize); 7] = [
    ("objectStore", 3),
    ("s3Bucket", 2),
    ("queues", 3),
    ("secrets", 3),
    ("iam", 3),
    ("imageRegistry", 2),
    ("securityGroup", 2),
];

/// The fleet: [`COUNTS`] of each kind, named `{prefix}{kind}-{n}` (lower case).
fn fleet(prefix: &str) -> Fleet {
    let here = AwsRegion::EuWest3;
    let mut f = Fleet::builder(format!("{prefix}storm"));
    let name = |kind: &str, n: usize| format!("{prefix}{}-{n}", kind.to_ascii_lowercase());
    for n in 0..3 {
        f.declare(here, name("objectStore", n), ObjectStore::new());
        f.declare(
            here,
            name("queues", n),
            Queues {
                fifo: Expr::lit(false),
                visibility_timeout_seconds: Partial::Known(Expr::lit(30)),
                retention_seconds: Partial::Unknown,
                dead_letter: Partial::Known(None),
                max_receive_count: Partial::Unknown,
                tags: Partial::Unknown,
            },
        );
        f.declare(here, name("secrets", n), Secrets::generated(24));
        f.declare(
            here,
            name("iam", n),
            Iam {
                policies: Expr::lit(["AWSLambdaBasicExecutionRole".to_owned()].into()),
                assumed_by: Expr::lit(["lambda.amazonaws.com".to_owned()].into()),
                description: Partial::Known(Expr::lit("storm".to_owned())),
                tags: Partial::Unknown,
            },
        );
    }
    for n in 0..2 {
        f.declare(
            here,
            name("s3Bucket", n),
            S3Bucket {
                versioning: Partial::Known(Expr::lit(true)),
                object_lock: Partial::Unknown,
                block_public_access: Partial::Known(Expr::lit(true)),
                tags: Partial::Unknown,
            },
        );
        f.declare(
            here,
            name("imageRegistry", n),
            ImageRegistry {
                scan_on_push: Partial::Known(Expr::lit(false)),
                immutable_tags: Partial::Known(Expr::lit(true)),
                tags: Partial::Unknown,
            },
        );
        f.declare(
            here,
            name("securityGroup", n),
            SecurityGroup {
                description: "storm".into(),
                vpc_id: Partial::Unknown,
                ingress: Expr::lit([Rule::tcp(443, "10.0.0.0/8")].into()),
                egress: Partial::Unknown,
                tags: Partial::Unknown,
            },
        );
    }
    f.build().expect("the storm fleet is sound")
}

/// What moto holds whose name starts with `prefix`, per kind, asked directly with the
/// SDK (buckets of both bucket kinds are counted together, as `buckets`).
async fn in_moto(config: &aws_types::SdkConfig, prefix: &str) -> BTreeMap<&'static str, usize> {
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(config)
            .force_path_style(true)
            .build(),
    );
    let buckets = s3.list_buckets().send().await.expect("ListBuckets");
    let buckets = buckets
        .buckets()
        .iter()
        .filter(|b| b.name().is_some_and(|n| n.starts_with(prefix)))
        .count();
    let sqs = aws_sdk_sqs::Client::new(config);
    let queues = sqs
        .list_queues()
        .queue_name_prefix(prefix)
        .send()
        .await
        .expect("ListQueues")
        .queue_urls()
        .len();
    let sm = aws_sdk_secretsmanager::Client::new(config);
    let secrets = sm
        .list_secrets()
        .max_results(100)
        .send()
        .await
        .expect("ListSecrets")
        .secret_list()
        .iter()
        .filter(|s| s.name().is_some_and(|n| n.starts_with(prefix)))
        .count();
    let iam = aws_sdk_iam::Client::new(config);
    let roles = iam
        .list_roles()
        .max_items(1000)
        .send()
        .await
        .expect("ListRoles")
        .roles()
        .iter()
        .filter(|r| r.role_name().starts_with(prefix))
        .count();
    let ecr = aws_sdk_ecr::Client::new(config);
    let repositories = ecr
        .describe_repositories()
        .send()
        .await
        .expect("DescribeRepositories")
        .repositories()
        .iter()
        .filter(|r| r.repository_name().is_some_and(|n| n.starts_with(prefix)))
        .count();
    let ec2 = aws_sdk_ec2::Client::new(config);
    let groups = ec2
        .describe_security_groups()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("group-name")
                .values(format!("{prefix}*"))
                .build(),
        )
        .send()
        .await
        .expect("DescribeSecurityGroups")
        .security_groups()
        .len();
    BTreeMap::from([
        ("buckets", buckets),
        ("queues", queues),
        ("secrets", secrets),
        ("roles", roles),
        ("repositories", repositories),
        ("security groups", groups),
    ])
}

/// Whether `x` makes something: a `Create…` action, or S3's `PUT` of a bucket.
fn creates(x: &Exchange) -> bool {
    let action = x.action();
    action.starts_with("Create") || action == "PUT bucket"
}

/// The creates the relay passed on to moto, by the action's name on the wire.
fn creates_passed_on(exchanges: &[Exchange]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for x in exchanges.iter().filter(|x| x.fault.is_none() && creates(x)) {
        *out.entry(x.action()).or_default() += 1;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_applied_through_a_throttling_storm_is_made_once_and_nothing_fails() {
    let Some(endpoint) = endpoint("the AWS storm test") else {
        return;
    };
    let clock = Arc::new(ManualClock::new());
    let relay = Relay::start(&endpoint).await.expect("the relay starts");
    let backend = Arc::new(
        AwsBackend::builder(sdk(&relay.address(), REGION).await)
            .retry_policy(RetryPolicy::default())
            .clock(clock.clone())
            .build(),
    );
    let prefix = infra_testkit::conformance::fresh_prefix(&SystemClock::new());
    let fleet = fleet(&prefix);
    let engine = Engine::new(
        Backends::new().with(backend.clone()),
        Arc::new(MemoryStore::new()),
    );

    let storm = Storm::new(clock.clone(), STORM)
        .seeded(0x5eed)
        .retry_after_between(5, Duration::from_secs(1), Duration::from_secs(3));
    relay.storm(storm.clone());
    let outcome = engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .expect("the apply runs");
    relay.restore();
    let exchanges = relay.exchanges();
    let figures = StormFigures::of(&storm, &relay.storm_calls());
    eprintln!("storm on moto (infra-aws): {figures}");

    assert!(
        outcome.result.failed.is_empty(),
        "{:#?}",
        outcome.result.failed
    );
    assert!(outcome.result.is_success(), "{:#?}", outcome.result);
    let created = outcome
        .result
        .applied
        .iter()
        .filter(|a| a.change == Change::Created)
        .count();
    assert_eq!(created, fleet.len(), "{:#?}", outcome.result);
    // The storm happened, was waited out on the manual clock, and no retry came before
    // the time its refusal asked for.
    figures.assert_outlasted();
    assert!(
        figures.refusals > 10 && figures.retries >= figures.refusals,
        "{figures}"
    );
    let refused_creates = exchanges
        .iter()
        .filter(|x| x.fault.is_some() && creates(x))
        .count();
    assert!(refused_creates > 0, "no create met the storm: {figures}");

    // One of each in moto, and one create of each passed on.
    let moto = sdk(&endpoint, REGION).await;
    let held = in_moto(&moto, &prefix).await;
    let declared = |kinds: &[&str]| -> usize {
        COUNTS
            .iter()
            .filter(|(k, _)| kinds.contains(k))
            .map(|(_, n)| n)
            .sum()
    };
    let expected = BTreeMap::from([
        ("buckets", declared(&["objectStore", "s3Bucket"])),
        ("queues", declared(&["queues"])),
        ("secrets", declared(&["secrets"])),
        ("roles", declared(&["iam"])),
        ("repositories", declared(&["imageRegistry"])),
        ("security groups", declared(&["securityGroup"])),
    ]);
    assert_eq!(held, expected, "what moto holds");
    let passed_on = creates_passed_on(&exchanges);
    let expected_creates: BTreeMap<String, usize> = [
        ("PUT bucket", declared(&["objectStore", "s3Bucket"])),
        ("CreateQueue", declared(&["queues"])),
        ("CreateSecret", declared(&["secrets"])),
        ("CreateRole", declared(&["iam"])),
        ("CreateRepository", declared(&["imageRegistry"])),
        ("CreateSecurityGroup", declared(&["securityGroup"])),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_owned(), n))
    .collect();
    assert_eq!(passed_on, expected_creates, "creates that reached moto");

    // Clean up, the storm over.
    let emptied = engine
        .apply(
            &Fleet::builder(format!("{prefix}storm"))
                .build()
                .expect("an empty fleet")
                .plan(),
            &Options::default().force(true),
        )
        .await
        .expect("the teardown runs");
    assert!(emptied.result.is_success(), "{:#?}", emptied.result);
    let left: usize = in_moto(&moto, &prefix).await.values().sum();
    assert_eq!(left, 0, "left behind after the teardown");
}
