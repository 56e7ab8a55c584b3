//! The staged fleet on Scaleway.

use std::collections::{BTreeMap, BTreeSet};

use infra_core::kinds::*;
use infra_core::prelude::{
    Expr, Fleet, FleetBuilder, Key, Partial, ScalewayRegion, compose_secret,
};

use super::{Stage, known, staged_tags};

/// The smallest valid zip archive (an empty one): what the staged compute resource
/// deploys when no archive of its own is given.
pub const EMPTY_ZIP: [u8; 22] = [
    0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
];

/// The staged fleet on Scaleway, in `fr-par`, named from `prefix` (the fleet, and every
/// resource): of the eleven kinds, those in `kinds` (the backend's), with references
/// between them — a function namespace and a container namespace whose secret
/// environment is a generated secret, a function and a container in them, a `compute`
/// function deployed from the zip archive at `archive`, a database whose password is a
/// generated secret, a queue sending to its dead-letter queue, a secret composed from
/// the queue's id and another secret.
///
/// Queues carry no tags (Scaleway Queues take none), and none is added and removed
/// again (an orphan queue is never deleted); the registry is kept to the last stage for
/// the same reason (an orphan registry namespace is never deleted either), and asks for
/// neither scan on push nor immutable tags (Scaleway has neither).
pub fn scaleway_fleet(prefix: &str, kinds: &BTreeSet<&str>, stage: Stage, archive: &str) -> Fleet {
    let mut f = Fleet::builder(format!("{prefix}staged"));
    if stage == Stage::Empty {
        return f.build().expect("an empty fleet is sound");
    }
    let here = ScalewayRegion::FrPar;
    let has = |kind: &str| kinds.contains(kind);
    let s = Staging {
        prefix,
        stage,
        changed: stage != Stage::Full,
        added: stage == Stage::RampUp,
    };
    if has("objectStore") {
        s.buckets(&mut f, here);
    }
    let api_key = has("secrets").then(|| s.secrets(&mut f, here));
    if has("queues") {
        s.queues(&mut f, here, api_key);
    }
    // Kept to the end, like the queues: a registry namespace's ownership cannot be
    // proven, so one left out of the declaration is never deleted as an orphan.
    if has("imageRegistry") {
        f.declare(
            here,
            s.name("images"),
            ImageRegistry {
                scan_on_push: known(false),
                immutable_tags: known(false),
                tags: staged_tags(),
            },
        );
    }
    if stage == Stage::Trimmed {
        return f.build().expect("the trimmed fleet is sound");
    }
    if has("iam") {
        s.iam(&mut f, here);
    }
    if has("functionNamespace") {
        s.functions(&mut f, here, api_key, has("function"));
    }
    if has("compute") {
        s.compute(&mut f, here, archive);
    }
    if has("containerNamespace") {
        s.containers(&mut f, here, api_key, has("container"));
    }
    if has("postgres") && has("secrets") {
        s.database(&mut f, here);
    }
    f.build().expect("the staged fleet is sound")
}

/// What every part of the fleet is declared from.
struct Staging<'a> {
    prefix: &'a str,
    stage: Stage,
    changed: bool,
    added: bool,
}

impl Staging<'_> {
    fn name(&self, base: &str) -> String {
        format!("{}{base}", self.prefix)
    }

    fn buckets(&self, f: &mut FleetBuilder, here: ScalewayRegion) {
        f.declare(
            here,
            self.name("assets"),
            ObjectStore {
                versioning: known(self.changed),
                expire_after_days: known(Some(if self.changed { 60 } else { 30 })),
                tags: staged_tags(),
            },
        );
        if self.added {
            f.declare(
                here,
                self.name("exports"),
                ObjectStore {
                    tags: staged_tags(),
                    ..ObjectStore::new()
                },
            );
        }
    }

    fn secrets(&self, f: &mut FleetBuilder, here: ScalewayRegion) -> Key<Secrets> {
        let key = f.declare(
            here,
            self.name("api-key"),
            Secrets {
                description: known(format!("the API key ({})", self.stage.name())),
                tags: staged_tags(),
                ..Secrets::generated(24)
            },
        );
        if self.added {
            f.declare(
                here,
                self.name("extra-key"),
                Secrets {
                    tags: staged_tags(),
                    ..Secrets::generated(16)
                },
            );
        }
        key
    }

    fn queues(&self, f: &mut FleetBuilder, here: ScalewayRegion, api_key: Option<Key<Secrets>>) {
        let changed = self.changed;
        let queue = |dead_letter, count, visibility| Queues {
            fifo: Expr::lit(false),
            visibility_timeout_seconds: known(visibility),
            retention_seconds: known(if changed { 2 * 86_400 } else { 86_400 }),
            dead_letter: Partial::Known(dead_letter),
            max_receive_count: count,
            tags: Partial::Unknown,
        };
        let dead = f.declare(
            here,
            self.name("jobs-dead"),
            queue(None, Partial::Unknown, 30),
        );
        let jobs = f.declare(
            here,
            self.name("jobs"),
            queue(Some(dead), known(5), if changed { 60 } else { 30 }),
        );
        // No queue is added in ramp-up: a queue's ownership cannot be read, so one left
        // out of the declaration is never deleted as an orphan.
        if let Some(key) = api_key {
            let queue_id = Expr::observed(jobs).map(|q: &QueuesObserved| q.id.clone());
            f.declare(
                here,
                self.name("worker-config"),
                Secrets {
                    tags: staged_tags(),
                    ..Secrets::composed(compose_secret!(
                        "queue={} key={}",
                        queue_id,
                        Expr::secret(key)
                    ))
                },
            );
        }
    }

    fn iam(&self, f: &mut FleetBuilder, here: ScalewayRegion) {
        let mut policies = BTreeSet::from(["ObjectStorageReadOnly".to_owned()]);
        if self.changed {
            policies.insert("SecretManagerReadOnly".to_owned());
        }
        f.declare(
            here,
            self.name("runner"),
            Iam {
                policies: Expr::lit(policies),
                assumed_by: Expr::lit(BTreeSet::new()),
                description: known(format!("runs the API ({})", self.stage.name())),
                tags: staged_tags(),
            },
        );
    }

    fn namespace_tags(&self) -> Partial<Expr<BTreeSet<String>>> {
        known(BTreeSet::from(["scenario=staged".to_owned()]))
    }

    fn secret_environment(
        api_key: Option<Key<Secrets>>,
    ) -> Partial<BTreeMap<String, Key<Secrets>>> {
        match api_key {
            Some(key) => Partial::Known(BTreeMap::from([("API_KEY".to_owned(), key)])),
            None => Partial::Unknown,
        }
    }

    fn environment(&self) -> Partial<Expr<EnvVars>> {
        known(BTreeMap::from([(
            "STAGE".to_owned(),
            self.stage.name().to_owned(),
        )]))
    }

    fn functions(
        &self,
        f: &mut FleetBuilder,
        here: ScalewayRegion,
        api_key: Option<Key<Secrets>>,
        with_function: bool,
    ) {
        let namespace = f.declare(
            here,
            self.name("fns"),
            FunctionNamespace {
                description: known(format!("functions ({})", self.stage.name())),
                environment: self.environment(),
                secret_environment: Self::secret_environment(api_key),
                tags: self.namespace_tags(),
            },
        );
        if with_function {
            f.declare(
                here,
                self.name("worker"),
                Function {
                    namespace,
                    runtime: Expr::lit("python311".to_owned()),
                    handler: Expr::lit("handler.handle".to_owned()),
                    memory_mb: known(if self.changed { 512 } else { 256 }),
                    min_scale: known(0),
                    max_scale: known(if self.changed { 2 } else { 1 }),
                    timeout_seconds: known(60),
                    source_bucket: Partial::Known(None),
                    code: Partial::Unknown,
                    environment: self.environment(),
                    access: Access::Private.into(),
                },
            );
        }
    }

    fn compute(&self, f: &mut FleetBuilder, here: ScalewayRegion, archive: &str) {
        f.declare(
            here,
            self.name("api"),
            Compute {
                runtime: Expr::lit("python3.11".to_owned()),
                handler: Expr::lit("handler.handle".to_owned()),
                code: Expr::lit(archive.to_owned()),
                code_sha256: Partial::Unknown,
                memory_mb: known(if self.changed { 512 } else { 256 }),
                timeout_seconds: known(60),
                environment: self.environment(),
                secret_environment: Partial::Unknown,
                role: None,
                tags: staged_tags(),
                access: Access::Private.into(),
            },
        );
    }

    fn containers(
        &self,
        f: &mut FleetBuilder,
        here: ScalewayRegion,
        api_key: Option<Key<Secrets>>,
        with_container: bool,
    ) {
        let namespace = f.declare(
            here,
            self.name("apps"),
            ContainerNamespace {
                description: known(format!("containers ({})", self.stage.name())),
                environment: self.environment(),
                secret_environment: Self::secret_environment(api_key),
                tags: self.namespace_tags(),
            },
        );
        if with_container {
            f.declare(
                here,
                self.name("web"),
                Container {
                    namespace,
                    image: Expr::lit("rg.fr-par.scw.cloud/staged/web:1.0".to_owned()),
                    port: known(8080),
                    cpu_limit: known(if self.changed { 1120 } else { 560 }),
                    memory_limit_mb: known(if self.changed { 2048 } else { 1024 }),
                    min_scale: known(0),
                    max_scale: known(2),
                    timeout_seconds: known(if self.changed { 120 } else { 60 }),
                    environment: self.environment(),
                    secret_environment: Partial::Unknown,
                    access: Access::Private.into(),
                },
            );
        }
    }

    fn database(&self, f: &mut FleetBuilder, here: ScalewayRegion) {
        let password = f.declare(here, self.name("db-password"), Secrets::generated(32));
        f.declare(
            here,
            self.name("db"),
            Postgres {
                storage_gb: known(20),
                backup_retention_days: known(if self.changed { 14 } else { 7 }),
                tags: staged_tags(),
                ..Postgres::classic(PostgresClassic {
                    engine_version: "16",
                    instance_class: "DB-DEV-S",
                    master_username: "app",
                    master_password: password,
                })
            },
        );
    }
}
