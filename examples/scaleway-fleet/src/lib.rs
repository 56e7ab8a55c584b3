//! A fleet on Scaleway: a bucket, a queue and its dead-letter queue, a container
//! registry namespace, an API key in Secret Manager, an IAM application, a function
//! namespace with a function and a container namespace with a container that receive
//! the key by reference, and a PostgreSQL database whose administrator's password is a
//! generated secret.

use std::collections::{BTreeMap, BTreeSet};

use infra_core::kinds::{
    Access, Container, ContainerNamespace, Function, FunctionNamespace, Iam, ImageRegistry,
    ObjectStore, Postgres, PostgresClassic, Queues, Secrets,
};
use infra_core::prelude::{CheckReport, Expr, Fleet, Partial, Scaleway, ScalewayRegion};

/// Where everything lives.
const REGION: ScalewayRegion = ScalewayRegion::FrPar;

fn known<T: infra_core::prelude::Value>(value: T) -> Partial<Expr<T>> {
    Partial::Known(Expr::lit(value))
}

/// The fleet, with `-suffix` after every name when a suffix is given (bucket and
/// registry names are shared by every Scaleway customer of a region). With a
/// `project`, the fleet belongs to that project alone: a run whose key and
/// configuration act in another one is refused before anything is listed.
pub fn fleet(suffix: Option<&str>, project: Option<&str>) -> Result<Fleet, CheckReport> {
    let name = |base: &str| match suffix {
        Some(s) => format!("{base}-{s}"),
        None => base.to_owned(),
    };
    let tags = known(BTreeMap::from([("app".to_owned(), "scw-fleet".to_owned())]));
    let mut fleet = Fleet::builder(name("scw-fleet"));
    if let Some(project) = project {
        fleet.account::<Scaleway>(project);
    }

    fleet.declare(
        REGION,
        name("scw-fleet-assets"),
        ObjectStore {
            versioning: known(true),
            expire_after_days: known(Some(30)),
            tags: tags.clone(),
        },
    );
    // Scaleway Queues take no tags.
    let queue = |dead_letter, count| Queues {
        fifo: Expr::lit(false),
        visibility_timeout_seconds: known(60),
        retention_seconds: known(4 * 24 * 3600),
        dead_letter: Partial::Known(dead_letter),
        max_receive_count: count,
        tags: Partial::Unknown,
    };
    let dead = fleet.declare(
        REGION,
        name("scw-fleet-jobs-dead"),
        queue(None, Partial::Unknown),
    );
    fleet.declare(REGION, name("scw-fleet-jobs"), queue(Some(dead), known(5)));

    let api_key = fleet.declare(
        REGION,
        name("scw-fleet-api-key"),
        Secrets {
            description: known("the jobs API key".to_owned()),
            tags: tags.clone(),
            ..Secrets::generated(32)
        },
    );
    // Scaleway's registry has neither scan on push nor immutable tags.
    fleet.declare(
        REGION,
        name("scw-fleet-images"),
        ImageRegistry {
            scan_on_push: known(false),
            immutable_tags: known(false),
            tags: tags.clone(),
        },
    );
    fleet.declare(
        REGION,
        name("scw-fleet-runner"),
        Iam {
            policies: Expr::lit(BTreeSet::from(["ObjectStorageReadOnly".to_owned()])),
            assumed_by: Expr::lit(BTreeSet::new()),
            description: known("reads the assets".to_owned()),
            tags: tags.clone(),
        },
    );
    let secrets = Partial::Known(BTreeMap::from([("API_KEY".to_owned(), api_key)]));
    let environment = known(BTreeMap::from([(
        "MODE".to_owned(),
        "production".to_owned(),
    )]));
    let namespace_tags = known(BTreeSet::from(["app=scw-fleet".to_owned()]));
    let functions = fleet.declare(
        REGION,
        name("scw-fleet-fns"),
        FunctionNamespace {
            description: known("the jobs functions".to_owned()),
            environment: environment.clone(),
            secret_environment: secrets.clone(),
            tags: namespace_tags.clone(),
        },
    );
    fleet.declare(
        REGION,
        name("scw-fleet-worker"),
        Function {
            namespace: functions,
            runtime: Expr::lit("python311".to_owned()),
            handler: Expr::lit("handler.handle".to_owned()),
            memory_mb: known(256),
            min_scale: known(0),
            max_scale: known(2),
            timeout_seconds: known(60),
            source_bucket: Partial::Known(None),
            code: Partial::Unknown,
            environment: environment.clone(),
            access: Access::Private.into(),
        },
    );
    let containers = fleet.declare(
        REGION,
        name("scw-fleet-apps"),
        ContainerNamespace {
            description: known("the jobs API".to_owned()),
            environment: environment.clone(),
            secret_environment: secrets,
            tags: namespace_tags,
        },
    );
    fleet.declare(
        REGION,
        name("scw-fleet-api"),
        Container {
            namespace: containers,
            image: Expr::lit("rg.fr-par.scw.cloud/scw-fleet/api:1.0.0".to_owned()),
            port: known(8080),
            cpu_limit: known(560),
            memory_limit_mb: known(1024),
            min_scale: known(1),
            max_scale: known(3),
            timeout_seconds: known(60),
            environment,
            secret_environment: Partial::Unknown,
            access: Access::Private.into(),
        },
    );
    let password = fleet.declare(
        REGION,
        name("scw-fleet-db-password"),
        Secrets::generated(32),
    );
    fleet.declare(
        REGION,
        name("scw-fleet-db"),
        Postgres {
            storage_gb: known(20),
            backup_retention_days: known(7),
            tags,
            ..Postgres::classic(PostgresClassic {
                engine_version: "16",
                instance_class: "DB-DEV-S",
                master_username: "app",
                master_password: password,
            })
        },
    );
    fleet.build()
}
