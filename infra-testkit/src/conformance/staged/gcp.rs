//! The staged fleet on Google Cloud.

use std::collections::{BTreeMap, BTreeSet};

use infra_core::kinds::*;
use infra_core::prelude::{Expr, Fleet, GcpRegion, Partial, compose_secret};

use super::{Stage, known, staged_tags};

/// The staged fleet on Google Cloud, in `europe-west1`, named from `prefix` (the
/// fleet, and every resource): of the seven portable kinds, those in `kinds` (the
/// backend's), with references between them — a Cloud Run service running as a
/// service account with a secret in its environment, a database whose password is a
/// generated secret, a queue sending to its dead-letter queue, a secret composed from
/// the queue's name and another secret.
///
/// Labels stay the same through the stages (the Pub/Sub emulator cannot update them);
/// what changes in place is each kind's own settings.
pub fn gcp_fleet(prefix: &str, kinds: &BTreeSet<&str>, stage: Stage) -> Fleet {
    let mut f = Fleet::builder(format!("{prefix}staged"));
    if stage == Stage::Empty {
        return f.build().expect("an empty fleet is sound");
    }
    let here = GcpRegion::EuropeWest1;
    let has = |kind: &str| kinds.contains(kind);
    let changed = stage != Stage::Full;
    let added = stage == Stage::RampUp;
    let full = stage != Stage::Trimmed;
    let name = |base: &str| format!("{prefix}{base}");
    let tags = staged_tags();

    if has("objectStore") {
        f.declare(
            here,
            name("assets"),
            ObjectStore {
                versioning: known(changed),
                expire_after_days: known(Some(if changed { 60 } else { 30 })),
                tags: tags.clone(),
            },
        );
        if added {
            f.declare(
                here,
                name("exports"),
                ObjectStore {
                    tags: tags.clone(),
                    ..ObjectStore::new()
                },
            );
        }
    }
    let mut api_key = None;
    if has("secrets") {
        let key = f.declare(
            here,
            name("api-key"),
            Secrets {
                description: known(format!("the API key ({})", stage.name())),
                tags: tags.clone(),
                ..Secrets::generated(24)
            },
        );
        api_key = Some(key);
        if added {
            f.declare(
                here,
                name("extra-key"),
                Secrets {
                    tags: tags.clone(),
                    ..Secrets::generated(16)
                },
            );
        }
    }
    if has("queues") {
        let queue = |dead_letter, count, visibility| Queues {
            fifo: Expr::lit(false),
            visibility_timeout_seconds: known(visibility),
            retention_seconds: known(if changed { 2 * 86_400 } else { 86_400 }),
            dead_letter: Partial::Known(dead_letter),
            max_receive_count: count,
            tags: tags.clone(),
        };
        let dead = f.declare(here, name("jobs-dead"), queue(None, Partial::Unknown, 30));
        let jobs = f.declare(
            here,
            name("jobs"),
            queue(Some(dead), known(5), if changed { 60 } else { 30 }),
        );
        if added {
            f.declare(here, name("events"), queue(None, Partial::Unknown, 20));
        }
        if let Some(key) = api_key {
            let topic = Expr::observed(jobs).map(|q: &QueuesObserved| q.id.clone());
            f.declare(
                here,
                name("worker-config"),
                Secrets {
                    tags: tags.clone(),
                    ..Secrets::composed(compose_secret!(
                        "topic={} key={}",
                        topic,
                        Expr::secret(key)
                    ))
                },
            );
        }
    }
    if !full {
        return f.build().expect("the trimmed fleet is sound");
    }
    if has("imageRegistry") {
        f.declare(
            here,
            name("images"),
            ImageRegistry {
                scan_on_push: known(changed),
                immutable_tags: known(true),
                tags: tags.clone(),
            },
        );
    }
    let mut runner = None;
    if has("iam") {
        runner = Some(f.declare(
            here,
            name("runner"),
            Iam {
                policies: Expr::lit(if changed {
                    BTreeSet::from([
                        "roles/logging.logWriter".to_owned(),
                        "roles/viewer".to_owned(),
                    ])
                } else {
                    BTreeSet::from(["roles/logging.logWriter".to_owned()])
                }),
                assumed_by: Expr::lit(BTreeSet::new()),
                description: known(format!("runs the API ({})", stage.name())),
                tags: tags.clone(),
            },
        ));
    }
    if has("compute") {
        f.declare(
            here,
            name("api"),
            Compute {
                runtime: Expr::lit("python312".to_owned()),
                handler: Expr::lit("main.handle".to_owned()),
                code: Expr::lit("gs://staged-sources/api.zip".to_owned()),
                code_sha256: Partial::Unknown,
                memory_mb: known(if changed { 512 } else { 256 }),
                timeout_seconds: known(60),
                environment: known(BTreeMap::from([("STAGE".to_owned(), "staged".to_owned())])),
                secret_environment: match api_key {
                    Some(key) => Partial::Known(BTreeMap::from([("API_KEY".to_owned(), key)])),
                    None => Partial::Unknown,
                },
                role: runner,
                tags: tags.clone(),
                access: Access::Private.into(),
            },
        );
    }
    if has("postgres") && has("secrets") {
        let password = f.declare(here, name("db-password"), Secrets::generated(32));
        f.declare(
            here,
            name("db"),
            Postgres {
                storage_gb: known(20),
                backup_retention_days: known(if changed { 14 } else { 7 }),
                tags,
                ..Postgres::classic(PostgresClassic {
                    engine_version: "16",
                    instance_class: "db-f1-micro",
                    master_username: "app",
                    master_password: password,
                })
            },
        );
    }
    f.build().expect("the staged fleet is sound")
}
