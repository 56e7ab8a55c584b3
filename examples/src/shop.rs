//! `shop`: a web shop on AWS, with its event workers on Scaleway and its analytics on
//! Google Cloud.
//!
//! It uses each of the fourteen kinds, references between them (within a cloud and
//! across clouds), and a composed secret: the database URL, built from the master
//! password and the endpoint the database gets when it is created.

use std::collections::BTreeMap;

use infra_core::kinds::*;
use infra_core::{
    interp,
    prelude::{
        AwsRegion, CheckReport, Expr, Fleet, GcpRegion, Partial, ScalewayRegion, compose_secret,
    },
};

fn tags(pairs: &[(&str, &str)]) -> Partial<Expr<Tags>> {
    Partial::Known(Expr::lit(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    ))
}

fn known<T: infra_core::prelude::Value>(value: T) -> Partial<Expr<T>> {
    Partial::Known(Expr::lit(value))
}

/// Declares the shop's fleet.
pub fn fleet() -> Result<Fleet, CheckReport> {
    let mut f = Fleet::builder("shop");
    let paris = AwsRegion::EuWest3;
    let virginia = AwsRegion::UsEast1;
    let scw = ScalewayRegion::FrPar;

    // Storage.
    let assets = f.declare(
        paris,
        "shop-assets",
        ObjectStore {
            versioning: known(true),
            expire_after_days: known(None),
            tags: tags(&[("team", "web")]),
        },
    );
    let artifacts = f.declare(
        virginia,
        "shop-artifacts",
        S3Bucket {
            versioning: known(true),
            object_lock: Partial::Unknown,
            block_public_access: known(true),
            tags: tags(&[("team", "platform")]),
        },
    );

    // Secrets, the database, and the URL composed from both.
    let db_password = f.declare(paris, "db-password", Secrets::generated(32));
    let db = f.declare(
        paris,
        "orders-db",
        Postgres {
            backup_retention_days: known(7),
            tags: tags(&[("team", "web")]),
            ..Postgres::serverless(PostgresServerless {
                engine_version: "16",
                min_capacity: Acu::halves(1),
                max_capacity: Acu::whole(8),
                master_username: "shop",
                master_password: db_password,
            })
        },
    );
    let endpoint = Expr::observed(db).map(|o: &PostgresObserved| o.endpoint.clone());
    let port = Expr::observed(db).map(|o: &PostgresObserved| o.port);
    let db_url = f.declare(
        paris,
        "db-url",
        Secrets::composed(compose_secret!(
            "postgres://shop:{}@{}:{}/orders",
            Expr::secret(db_password),
            endpoint.clone(),
            port,
        )),
    );

    // Network and the web server.
    let web = f.declare(
        paris,
        "web",
        SecurityGroup {
            description: "shop web servers".into(),
            vpc_id: Partial::Unknown,
            ingress: Expr::lit([Rule::tcp(443, "0.0.0.0/0"), Rule::tcp(22, "10.0.0.0/8")].into()),
            egress: Partial::Unknown,
            tags: tags(&[("team", "web")]),
        },
    );
    f.declare(
        paris,
        "web-1",
        AwsInstance {
            user_data: Partial::Known(interp!(
                "#!/bin/sh\necho DB_HOST={} >> /etc/shop.env\n",
                endpoint
            )),
            tags: tags(&[("team", "web"), ("role", "frontend")]),
            ..AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Small), web)
        },
    );

    // Identity, queue, registry and the order handler.
    let runner = f.declare(
        paris,
        "order-runner",
        Iam {
            policies: Expr::lit(["AWSLambdaBasicExecutionRole".to_owned()].into()),
            assumed_by: Expr::lit(["lambda.amazonaws.com".to_owned()].into()),
            description: known("runs the order handler".to_owned()),
            tags: Partial::Unknown,
        },
    );
    let dead_orders = f.declare(
        paris,
        "orders-dead",
        Queues {
            fifo: Expr::lit(false),
            visibility_timeout_seconds: Partial::Unknown,
            retention_seconds: known(1_209_600),
            dead_letter: Partial::Known(None),
            max_receive_count: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    f.declare(
        paris,
        "orders",
        Queues {
            fifo: Expr::lit(false),
            visibility_timeout_seconds: known(60),
            retention_seconds: known(345_600),
            dead_letter: Partial::Known(Some(dead_orders)),
            max_receive_count: known(5),
            tags: tags(&[("team", "web")]),
        },
    );
    f.declare(
        paris,
        "shop-images",
        ImageRegistry {
            scan_on_push: known(true),
            immutable_tags: known(true),
            tags: Partial::Unknown,
        },
    );
    f.declare(
        paris,
        "order-handler",
        Compute {
            runtime: "python3.12".into(),
            handler: "orders.handle".into(),
            code: Expr::observed(artifacts).map(|o: &S3BucketObserved| {
                format!(
                    "s3://{}/order-handler.zip",
                    o.arn.rsplit(':').next().unwrap_or_default()
                )
            }),
            code_sha256: Partial::Unknown,
            memory_mb: known(256),
            timeout_seconds: known(30),
            environment: Partial::Known(Expr::observed(assets).map(|o: &ObjectStoreObserved| {
                BTreeMap::from([("ASSETS_BUCKET".to_owned(), o.id.clone())])
            })),
            secret_environment: Partial::Known(BTreeMap::from([(
                "DATABASE_URL".to_owned(),
                db_url,
            )])),
            role: Some(runner),
            tags: tags(&[("team", "web")]),
            access: Access::Private.into(),
        },
    );

    // Event workers on Scaleway.
    let functions = f.declare(
        scw,
        "workers",
        FunctionNamespace {
            description: known("order event workers".to_owned()),
            environment: Partial::Unknown,
            secret_environment: Partial::Known(BTreeMap::from([(
                "DATABASE_URL".to_owned(),
                db_url,
            )])),
            tags: Partial::Known(Expr::lit(["shop".to_owned()].into())),
        },
    );
    f.declare(
        scw,
        "receipt-mailer",
        Function {
            namespace: functions,
            runtime: "python311".into(),
            handler: "mailer.handle".into(),
            memory_mb: known(256),
            min_scale: known(0),
            max_scale: known(5),
            timeout_seconds: Partial::Unknown,
            source_bucket: Partial::Known(Some(artifacts)),
            code: Partial::Unknown,
            environment: Partial::Unknown,
            access: Access::Private.into(),
        },
    );
    let containers = f.declare(
        scw,
        "storefront",
        ContainerNamespace {
            description: Partial::Unknown,
            environment: known(BTreeMap::from([(
                "SHOP_ENV".to_owned(),
                "production".to_owned(),
            )])),
            secret_environment: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    f.declare(
        scw,
        "storefront-web",
        Container {
            namespace: containers,
            image: "rg.fr-par.scw.cloud/shop/storefront:1.4.2".into(),
            port: known(8080),
            cpu_limit: known(560),
            memory_limit_mb: known(1024),
            min_scale: known(1),
            max_scale: known(4),
            timeout_seconds: Partial::Unknown,
            environment: Partial::Unknown,
            secret_environment: Partial::Known(BTreeMap::from([(
                "DATABASE_URL".to_owned(),
                db_url,
            )])),
            access: Access::Private.into(),
        },
    );

    // Analytics on Google Cloud: order exports land in a bucket, order events go out on
    // a Pub/Sub topic (no subscription is asked for: the analytics team subscribes), and
    // the loader runs as a service account of its own.
    let belgium = GcpRegion::EuropeWest1;
    f.declare(
        belgium,
        "shop-order-exports",
        ObjectStore {
            versioning: known(false),
            expire_after_days: known(Some(400)),
            tags: tags(&[("team", "analytics")]),
        },
    );
    f.declare(
        belgium,
        "order-events",
        Queues {
            fifo: Expr::lit(false),
            visibility_timeout_seconds: Partial::Unknown,
            retention_seconds: known(604_800),
            dead_letter: Partial::Unknown,
            max_receive_count: Partial::Unknown,
            tags: tags(&[("team", "analytics")]),
        },
    );
    f.declare(
        belgium,
        "export-loader",
        Iam {
            policies: Expr::lit(["roles/storage.objectViewer".to_owned()].into()),
            assumed_by: Expr::lit(["group:analytics@shop.example".to_owned()].into()),
            description: known("loads the order exports".to_owned()),
            tags: tags(&[("team", "analytics")]),
        },
    );

    // A queue the shop no longer wants, removed from the records without a delete.
    f.forget::<infra_core::prelude::Aws, Queues>("legacy-orders");

    f.build()
}
