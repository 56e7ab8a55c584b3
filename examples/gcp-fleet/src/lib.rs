//! The fleet of the `gcp-fleet` binary: one of each of the seven portable kinds on
//! Google Cloud, in `europe-west1`, with references between them — a bucket, a job
//! queue with its dead-letter queue, a generated API key and a generated database
//! password, a Docker registry, a service account, a Cloud Run service that runs as
//! that account with the key in its environment, and a Cloud SQL database.

use std::collections::{BTreeMap, BTreeSet};

use infra_core::kinds::{
    Access, Compute, Iam, ImageRegistry, ObjectStore, Postgres, PostgresClassic, Queues, Secrets,
};
use infra_core::prelude::{CheckReport, Expr, Fleet, Gcp, GcpRegion, Partial};

/// Where everything lives.
const REGION: GcpRegion = GcpRegion::EuropeWest1;

fn known<T: infra_core::prelude::Value>(value: T) -> Partial<Expr<T>> {
    Partial::Known(Expr::lit(value))
}

/// The fleet, with `-suffix` after every name when a suffix is given (bucket names are
/// shared by every Google Cloud customer). With a `project`, the fleet belongs to that
/// project alone: a run whose credentials and configuration act in another one is
/// refused before anything is listed.
pub fn fleet(suffix: Option<&str>, project: Option<&str>) -> Result<Fleet, CheckReport> {
    let name = |base: &str| match suffix {
        Some(s) => format!("{base}-{s}"),
        None => base.to_owned(),
    };
    let tags = known(BTreeMap::from([("app".to_owned(), "gcp-fleet".to_owned())]));
    let mut fleet = Fleet::builder(name("gcp-fleet"));
    if let Some(project) = project {
        fleet.account::<Gcp>(project);
    }

    fleet.declare(
        REGION,
        name("gcp-fleet-assets"),
        ObjectStore {
            versioning: known(true),
            expire_after_days: known(Some(30)),
            tags: tags.clone(),
        },
    );

    let queue = |dead_letter, count| Queues {
        fifo: Expr::lit(false),
        visibility_timeout_seconds: known(60),
        retention_seconds: known(4 * 24 * 3600),
        dead_letter: Partial::Known(dead_letter),
        max_receive_count: count,
        tags: tags.clone(),
    };
    let dead = fleet.declare(
        REGION,
        name("gcp-fleet-jobs-dead"),
        queue(None, Partial::Unknown),
    );
    fleet.declare(REGION, name("gcp-fleet-jobs"), queue(Some(dead), known(5)));

    let api_key = fleet.declare(
        REGION,
        name("gcp-fleet-api-key"),
        Secrets {
            description: known("the jobs API key".to_owned()),
            tags: tags.clone(),
            ..Secrets::generated(32)
        },
    );
    fleet.declare(
        REGION,
        name("gcp-fleet-images"),
        ImageRegistry {
            scan_on_push: known(true),
            immutable_tags: known(true),
            tags: tags.clone(),
        },
    );
    let runner = fleet.declare(
        REGION,
        name("gcp-fleet-runner"),
        Iam {
            policies: Expr::lit(BTreeSet::from(["roles/logging.logWriter".to_owned()])),
            assumed_by: Expr::lit(BTreeSet::new()),
            description: known("runs the jobs service".to_owned()),
            tags: tags.clone(),
        },
    );
    fleet.declare(
        REGION,
        name("gcp-fleet-jobs-api"),
        Compute {
            runtime: Expr::lit("python312".to_owned()),
            handler: Expr::lit("main.handle".to_owned()),
            code: Expr::lit("gs://gcp-fleet-sources/jobs-api.zip".to_owned()),
            code_sha256: Partial::Unknown,
            memory_mb: known(512),
            timeout_seconds: known(60),
            environment: known(BTreeMap::from([(
                "MODE".to_owned(),
                "production".to_owned(),
            )])),
            secret_environment: Partial::Known(BTreeMap::from([("API_KEY".to_owned(), api_key)])),
            role: Some(runner),
            tags: tags.clone(),
            access: Access::Private.into(),
        },
    );
    let password = fleet.declare(
        REGION,
        name("gcp-fleet-db-password"),
        Secrets::generated(32),
    );
    fleet.declare(
        REGION,
        name("gcp-fleet-db"),
        Postgres {
            storage_gb: known(20),
            backup_retention_days: known(7),
            tags,
            ..Postgres::classic(PostgresClassic {
                engine_version: "16",
                instance_class: "db-custom-1-3840",
                master_username: "app",
                master_password: password,
            })
        },
    );
    fleet.build()
}
