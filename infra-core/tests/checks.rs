//! The checks that run before any network call, and their messages.

use infra_core::kinds::*;
use infra_core::prelude::{
    AwsRegion, Expr, Fleet, Partial, Problem, ScalewayRegion, SecretString, compose_secret,
};

fn group(description: &str) -> SecurityGroup {
    SecurityGroup {
        description: description.into(),
        vpc_id: Partial::Unknown,
        ingress: Expr::lit([Rule::tcp(443, "0.0.0.0/0")].into()),
        egress: Partial::Unknown,
        tags: Partial::Unknown,
    }
}

#[test]
fn a_sound_fleet_builds() {
    let mut f = Fleet::builder("sound");
    let web = f.declare(AwsRegion::EuWest3, "web", group("web"));
    f.declare(
        AwsRegion::EuWest3,
        "app",
        AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Micro), web),
    );
    let fleet = f.build().expect("no problems");
    assert_eq!(fleet.build_order(), &[0, 1]);
}

#[test]
fn every_problem_is_reported_at_once_and_names_its_resource() {
    let mut f = Fleet::builder("Broken_Fleet");
    let here = AwsRegion::EuWest3;
    f.declare(here, "web", group("first"));
    f.declare(AwsRegion::UsEast1, "web", group("second"));
    f.declare(here, "Bad_Name", group("bad name"));
    f.declare(
        here,
        "ab",
        S3Bucket {
            versioning: Partial::Unknown,
            object_lock: Partial::Unknown,
            block_public_access: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    // A plaintext constant, laundered through a composition with no holes.
    f.declare(
        here,
        "api-key",
        Secrets::composed(compose_secret!("hunter2")),
    );
    // And one laundered through `map`: still reads nothing from the fleet.
    f.declare(
        here,
        "api-key-2",
        Secrets::composed(Expr::lit(1u32).map(|_| SecretString::new("hunter2"))),
    );
    f.declare(here, "bad-env", Secrets::from_env("1NOT-A-VAR"));
    let password = f.declare(here, "pw", Secrets::from_env("PW"));
    f.declare(
        here,
        "db",
        Postgres::serverless(PostgresServerless {
            engine_version: "16",
            min_capacity: Acu::whole(8),
            max_capacity: Acu::whole(2),
            master_username: "app",
            master_password: password,
        }),
    );
    f.declare(
        here,
        "rules",
        SecurityGroup {
            ingress: Expr::lit(
                [
                    Rule::tcp(22, "10.0.0.1/8"),
                    Rule {
                        protocol: Protocol::Tcp,
                        from_port: 90,
                        to_port: 80,
                        cidr: "10.0.0.0/8".into(),
                    },
                ]
                .into(),
            ),
            ..group("rules")
        },
    );
    f.declare(
        here,
        "jobs",
        Queues {
            fifo: Expr::lit(false),
            visibility_timeout_seconds: Partial::Known(Expr::lit(50_000)),
            retention_seconds: Partial::Unknown,
            dead_letter: Partial::Unknown,
            max_receive_count: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    let ns = f.declare(
        ScalewayRegion::FrPar,
        "fns",
        FunctionNamespace {
            description: Partial::Unknown,
            environment: Partial::Unknown,
            secret_environment: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    f.declare(
        ScalewayRegion::FrPar,
        "fn",
        Function {
            namespace: ns,
            runtime: "python311".into(),
            handler: "h.h".into(),
            memory_mb: Partial::Unknown,
            min_scale: Partial::Known(Expr::lit(5)),
            max_scale: Partial::Known(Expr::lit(2)),
            timeout_seconds: Partial::Unknown,
            source_bucket: Partial::Unknown,
            code: Partial::Unknown,
            environment: Partial::Unknown,
            access: Access::Private.into(),
        },
    );
    // A cycle through forward references.
    let a = f.reserve::<_, Queues>(here, "loop-a");
    let b = f.declare(
        here,
        "loop-b",
        Queues {
            fifo: Expr::lit(false),
            visibility_timeout_seconds: Partial::Unknown,
            retention_seconds: Partial::Unknown,
            dead_letter: Partial::Known(Some(a)),
            max_receive_count: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    f.define(
        a,
        Queues {
            fifo: Expr::lit(false),
            visibility_timeout_seconds: Partial::Unknown,
            retention_seconds: Partial::Unknown,
            dead_letter: Partial::Known(Some(b)),
            max_receive_count: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    f.reserve::<_, Queues>(here, "never");
    f.forget::<infra_core::prelude::Aws, SecurityGroup>("web");
    f.limit::<infra_core::prelude::Aws, Secrets>(3);

    let report = f.build().expect_err("problems");
    insta::assert_snapshot!(report.to_string());
}

#[test]
fn an_all_protocols_rule_must_cover_every_port() {
    let mut f = Fleet::builder("rules");
    f.declare(
        AwsRegion::EuWest3,
        "open",
        SecurityGroup {
            ingress: Expr::lit([Rule::all("10.0.0.0/8")].into()),
            ..group("open")
        },
    );
    f.build().expect("Rule::all covers every port");

    let mut f = Fleet::builder("rules");
    f.declare(
        AwsRegion::EuWest3,
        "narrow",
        SecurityGroup {
            ingress: Expr::lit(
                [Rule {
                    protocol: Protocol::All,
                    from_port: 80,
                    to_port: 80,
                    cidr: "10.0.0.0/8".into(),
                }]
                .into(),
            ),
            ..group("narrow")
        },
    );
    let report = f.build().expect_err("ports on an all-protocols rule");
    assert!(
        report.to_string().contains("declare it with `Rule::all`"),
        "{report}"
    );
}

#[test]
fn a_key_of_another_fleet_is_refused() {
    let mut other = Fleet::builder("other");
    let foreign = other.declare(AwsRegion::EuWest3, "web", group("web"));
    let mut f = Fleet::builder("mine");
    f.declare(
        AwsRegion::EuWest3,
        "app",
        AwsInstance::new(
            Image::Latest,
            InstanceType::T3(BurstableSize::Micro),
            foreign,
        ),
    );
    let report = f.build().expect_err("a foreign key");
    assert!(matches!(
        report.problems.as_slice(),
        [Problem::ForeignKey { resource: Some(r), .. }] if r.name == "app"
    ));
}

#[test]
fn a_self_reference_is_a_cycle() {
    let mut f = Fleet::builder("selfish");
    let q = f.reserve::<_, Queues>(AwsRegion::EuWest3, "q");
    f.define(
        q,
        Queues {
            fifo: Expr::lit(false),
            visibility_timeout_seconds: Partial::Unknown,
            retention_seconds: Partial::Unknown,
            dead_letter: Partial::Known(Some(q)),
            max_receive_count: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    let report = f.build().expect_err("a cycle");
    assert_eq!(
        report
            .problems
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            "references form a cycle: aws/queues/q → aws/queues/q; break it by removing one reference"
        ]
    );
}

#[test]
fn a_composed_secret_that_reads_a_secret_is_accepted() {
    let mut f = Fleet::builder("fine");
    let pw = f.declare(AwsRegion::EuWest3, "pw", Secrets::from_env("PW"));
    f.declare(
        AwsRegion::EuWest3,
        "url",
        Secrets::composed(compose_secret!(
            "postgres://app:{}@db/main",
            Expr::secret(pw)
        )),
    );
    f.build().expect("a composed secret with a dependency");
}

#[test]
fn the_same_name_in_two_kinds_or_providers_is_fine() {
    let mut f = Fleet::builder("names");
    f.declare(AwsRegion::EuWest3, "data", ObjectStore::new());
    f.declare(ScalewayRegion::FrPar, "data", ObjectStore::new());
    f.declare(
        AwsRegion::EuWest3,
        "data",
        Queues {
            fifo: Expr::lit(false),
            visibility_timeout_seconds: Partial::Unknown,
            retention_seconds: Partial::Unknown,
            dead_letter: Partial::Unknown,
            max_receive_count: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    let fleet = f.build().expect("distinct keys");
    assert_eq!(fleet.keys().len(), 3);
}

#[test]
fn instance_types_parse_only_when_the_family_has_the_size() {
    assert_eq!(
        "t3.micro".parse::<InstanceType>(),
        Ok(InstanceType::T3(BurstableSize::Micro))
    );
    insta::assert_snapshot!(
        ["t3.32xlarge", "q9.large", "m5"]
            .iter()
            .map(|t| format!("{t}: {}", t.parse::<InstanceType>().unwrap_err()))
            .collect::<Vec<_>>()
            .join("\n")
    );
    for (family, sizes) in InstanceType::families() {
        for size in sizes {
            let text = format!("{family}.{size}");
            let parsed: InstanceType = text.parse().expect("listed");
            assert_eq!(parsed.to_string(), text);
        }
    }
}
