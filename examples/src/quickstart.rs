//! `quickstart`: a small web application on AWS with its API container on Scaleway.
//!
//! Nine resources over two providers: a database whose password the provider generates,
//! a connection string composed from that password and the endpoint the database gets
//! when it is created, a security group and an instance, a bucket, a queue, and a
//! Scaleway container namespace and container that receive the connection string by
//! reference, across clouds.

use std::collections::BTreeMap;

use infra_core::kinds::*;
use infra_core::prelude::{
    AwsRegion, CheckReport, Expr, Fleet, Partial, ScalewayRegion, compose_secret,
};

/// Declares the quickstart fleet.
pub fn fleet() -> Result<Fleet, CheckReport> {
    let mut f = Fleet::builder("quickstart");
    let paris = AwsRegion::EuWest3;

    let password = f.declare(paris, "app-db-password", Secrets::generated(32));
    let db = f.declare(
        paris,
        "app-db",
        Postgres {
            backup_retention_days: Partial::Known(Expr::lit(7)),
            ..Postgres::classic(PostgresClassic {
                engine_version: "16",
                instance_class: "db.t4g.micro",
                master_username: "app",
                master_password: password,
            })
        },
    );
    let endpoint = Expr::observed(db).map(|o: &PostgresObserved| o.endpoint.clone());
    f.output("db-endpoint", endpoint.clone());
    let url = f.declare(
        paris,
        "app-db-url",
        Secrets::composed(compose_secret!(
            "postgres://app:{}@{}/app",
            Expr::secret(password),
            endpoint
        )),
    );
    f.secret_output("db-url", url);
    let web = f.declare(
        paris,
        "app-web",
        SecurityGroup {
            description: "quickstart web".into(),
            vpc_id: Partial::Unknown,
            ingress: Expr::lit([Rule::tcp(443, "0.0.0.0/0")].into()),
            egress: Partial::Unknown,
            tags: Partial::Known(Expr::lit(BTreeMap::from([(
                "app".to_owned(),
                "quickstart".to_owned(),
            )]))),
        },
    );
    f.declare(
        paris,
        "app-web-1",
        AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Micro), web),
    );
    f.declare(
        paris,
        "quickstart-artifacts",
        S3Bucket {
            versioning: Partial::Known(Expr::lit(true)),
            object_lock: Partial::Unknown,
            block_public_access: Partial::Known(Expr::lit(true)),
            tags: Partial::Unknown,
        },
    );
    f.declare(
        paris,
        "app-jobs",
        Queues {
            fifo: Expr::lit(false),
            visibility_timeout_seconds: Partial::Known(Expr::lit(30)),
            retention_seconds: Partial::Unknown,
            dead_letter: Partial::Known(None),
            max_receive_count: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    let namespace = f.declare(
        ScalewayRegion::FrPar,
        "app",
        ContainerNamespace {
            description: Partial::Known(Expr::lit("quickstart API".to_owned())),
            environment: Partial::Unknown,
            secret_environment: Partial::Known(BTreeMap::from([("DATABASE_URL".to_owned(), url)])),
            tags: Partial::Unknown,
        },
    );
    f.declare(
        ScalewayRegion::FrPar,
        "app-api",
        Container {
            namespace,
            image: "rg.fr-par.scw.cloud/app/api:1.0.0".into(),
            port: Partial::Known(Expr::lit(8080)),
            cpu_limit: Partial::Unknown,
            memory_limit_mb: Partial::Known(Expr::lit(512)),
            min_scale: Partial::Known(Expr::lit(1)),
            max_scale: Partial::Known(Expr::lit(3)),
            timeout_seconds: Partial::Unknown,
            environment: Partial::Unknown,
            secret_environment: Partial::Unknown,
            access: Access::Private.into(),
        },
    );
    f.build()
}
