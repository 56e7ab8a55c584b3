//! The `postgres` kind: Scaleway Managed Database for PostgreSQL, through the RDB API v1
//! (`/rdb/v1/regions/{region}/instances…`). One Database Instance per resource.
//!
//! **The handle** is the instance's id (a UUID); the region is the path's. `list` reads
//! every page of `ListInstances` for the configured project and keeps the PostgreSQL
//! instances (`engine` `PostgreSQL-N`); a MySQL instance, or an instance of another
//! region, reads as `NotFound`. Scaleway lets two instances share a name; this backend
//! does not: a create first lists the name (`ListInstances?name=`, kept to exact
//! matches) and answers `Conflict` when one is there.
//!
//! **The marker** is one of the instance's tags (`managed-by-infra=<fleet>`, tags being
//! plain `key=value` strings), sent in `CreateInstance` itself. An update keeps the
//! marker the instance carries (`UpdateInstance` `tags`); `mark` writes the tags with
//! the marker added. Reads answer the raw tags with the reading.
//!
//! **Waiting.** A new instance is `provisioning` (then `initializing`…) until `ready`;
//! an upgrade makes it `configuring`; a delete, `deleting` until it is gone. Each is
//! awaited with `poll::until_done` on the configuration's clock, reading the instance
//! (`GetInstance`). `error`, `locked` and `disk_full` end a wait with an error. A write
//! to a busy instance is answered 409 `transient_state`: it is tried again, with a read
//! of the instance between tries, until it is taken or the polling deadline passes.
//! A create whose answer was lost is settled by name and marker
//! (`poll::settle_uncertain`) and then awaited; a create still provisioning at the
//! deadline is an error "may have been sent": the instance is there, with the marker.
//!
//! **Mapping.**
//! - `engineVersion` `"16"` is `engine` `PostgreSQL-16`; a create checks it against
//!   `ListDatabaseEngines` (a disabled or unknown version is `Invalid` before the
//!   create). A different major version on an existing instance is refused (`Invalid`)
//!   before any call: Scaleway upgrades a major version only through its upgrade
//!   workflow, which builds a *new* Database Instance (a new id) next to the old one.
//! - `capacity`: `Classic { instanceClass }` is the node type, written as Scaleway's
//!   offers are named (`DB-DEV-S`, `DB-PRO2-XXS`; capitals, refused otherwise before any
//!   call, since the read answers capitals and a lowercase declaration would drift for
//!   ever). It is sent lowercase, as Scaleway answers it. A change is
//!   `UpgradeInstance` `node_type`. `Serverless` is refused (`Invalid`) before any call:
//!   a Database Instance has a fixed node type (Serverless SQL Database is another
//!   product, with another API).
//! - `storageGb` n is a Block Storage volume (`volume_type` `sbs_5k`) of n × 10^9 bytes
//!   (`volume_size`; Scaleway counts decimal GB); not declared, 20 GB. It grows with
//!   `UpgradeInstance` `volume_size`; a smaller size is refused before any call (the
//!   spec plans it as a replace). An instance on a local SSD (`lssd`, made elsewhere)
//!   has the size of its node type: a declared other size is refused.
//! - `backupRetentionDays` 0 is `disable_backup` at creation, `is_backup_schedule_disabled`
//!   after; n > 0 is `backup_schedule_retention` n days (`UpdateInstance`, once the new
//!   instance is ready, since `CreateInstance` takes no retention).
//! - `tags` are `key=value` strings, the marker among them.
//! - `masterUsername` / `masterPassword`: `user_name` and `password` of
//!   `CreateInstance`, which makes the user, an administrator, with the instance. The
//!   password is the latest value of the referenced secret (`secret_value::latest_value`,
//!   in the database's region), read just before the call that sets it and never
//!   logged, recorded nor put in an error; a value Scaleway's rule would refuse (8 to 128
//!   characters with a digit, an uppercase and a lowercase letter and a special
//!   character) is refused before any call, without quoting it. Scaleway never says
//!   which password a user has, so **every `update` sets the administrator's password
//!   again** (`UpdateUser` `password`; `CreateUser` as an administrator when the user is
//!   missing): a rotated secret reaches the database at the next update, and only then.
//!
//! **Observed:** `id` is the instance id; `endpoint` and `port` are those of its public
//! (load-balancer) endpoint, else of its first endpoint (Scaleway's public ports are not
//! 5432). An instance with no endpoint yet is `Unavailable` to read (still being made).
//!
//! What read reports when Scaleway does not say:
//! - `engineVersion`: the major version of `engine`; `Unknown` when it is not
//!   `PostgreSQL-N`.
//! - `capacity`: `Classic` with `node_type` in capitals; `Unknown` without one.
//! - `storageGb`: `volume.size` in GB; `Unknown` without a volume, or for a size that is
//!   not a whole number of GB.
//! - `masterUsername`: from `ListUsers`: the one administrator (`is_admin`); `Unknown`
//!   when there are several or none, and while the instance is not `ready` (its users
//!   cannot be listed then). A run killed while the instance was provisioning therefore
//!   reads the administrator as unknown (never as another name, which would plan a
//!   replace), and as the declared one once the instance is ready.
//! - `masterPassword`: never reported (`Unknown`).
//! - `backupRetentionDays`: `0` when the backup schedule is disabled, else its
//!   `retention`; `Unknown` without a backup schedule.
//! - `tags`: the instance's tags as `key=value` pairs (none is the truth, an empty map),
//!   the marker included.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use infra_core::kinds::{Capacity, Postgres, PostgresObserved, PostgresReported, PostgresSettled};
use infra_core::sdk::poll::{self, Waited};
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, ErrorKind, Idempotence, KindBackend, ListArgs, Listed,
    MarkArgs, Marker, Ownership, OwnershipArgs, Partial, RawTags, ReadArgs, Reading, Router,
    SecretString, UpdateArgs, Written, scrub_secret,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::api::Call;
use crate::clients::Clients;
use crate::secret_value::latest_value;
use crate::tags;

/// The engine name's prefix of a PostgreSQL instance.
const ENGINE_PREFIX: &str = "PostgreSQL-";
/// A gigabyte, as Scaleway counts volume sizes.
const GB: u64 = 1_000_000_000;
/// The volume type of a new instance: Block Storage, 5K IOPS.
const VOLUME_TYPE: &str = "sbs_5k";
/// The volume of a new instance whose declaration gives no `storageGb`.
const DEFAULT_STORAGE_GB: u32 = 20;
/// The statuses an instance passes through (Scaleway's transient ones, and `unknown`).
const TRANSIENT: &[&str] = &[
    "provisioning",
    "configuring",
    "deleting",
    "autohealing",
    "initializing",
    "backuping",
    "snapshotting",
    "restarting",
    "unknown",
];
/// `not_found` resources meaning the instance does not exist.
const NO_INSTANCE: &[&str] = &["instance"];
/// `not_found` resources meaning the user does not exist.
const NO_USER: &[&str] = &["user"];

/// Adds this product's kinds to `router`.
pub(crate) fn register(mut router: Router, clients: &Arc<Clients>) -> Router {
    router.add::<Postgres>(RdbInstances {
        clients: Arc::clone(clients),
    });
    router
}

/// `Postgres` on Scaleway: Database Instances of Managed Database for PostgreSQL.
struct RdbInstances {
    clients: Arc<Clients>,
}

/// A Database Instance, as read here.
#[derive(Debug, Clone, Deserialize)]
struct Instance {
    id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    engine: String,
    #[serde(default)]
    node_type: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    volume: Option<Volume>,
    #[serde(default)]
    backup_schedule: Option<BackupSchedule>,
    #[serde(default)]
    endpoints: Vec<Endpoint>,
    #[serde(default)]
    endpoint: Option<Endpoint>,
}

#[derive(Debug, Clone, Deserialize)]
struct Volume {
    #[serde(rename = "type", default)]
    kind: String,
    /// Bytes, as a number or a decimal string.
    #[serde(default)]
    size: Value,
}

#[derive(Debug, Clone, Deserialize)]
struct BackupSchedule {
    #[serde(default)]
    retention: Option<u32>,
    #[serde(default)]
    disabled: bool,
}

#[derive(Debug, Clone, Deserialize)]
struct Endpoint {
    #[serde(default)]
    ip: Option<String>,
    #[serde(default)]
    hostname: Option<String>,
    #[serde(default)]
    port: Option<u16>,
    #[serde(default)]
    load_balancer: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
struct User {
    name: String,
    #[serde(default)]
    is_admin: bool,
}

#[derive(Debug, Deserialize)]
struct Engine {
    #[serde(default)]
    versions: Vec<EngineVersion>,
}

#[derive(Debug, Deserialize)]
struct EngineVersion {
    #[serde(default)]
    name: String,
    #[serde(default)]
    disabled: bool,
}

/// The body of `CreateInstance`. It holds the password: never printed.
#[derive(Serialize)]
struct CreateBody<'a> {
    project_id: &'a str,
    name: &'a str,
    engine: &'a str,
    user_name: &'a str,
    password: &'a str,
    node_type: &'a str,
    is_ha_cluster: bool,
    disable_backup: bool,
    tags: &'a [String],
    volume_type: &'a str,
    volume_size: u64,
    backup_same_region: bool,
}

/// What a declaration asks of an instance, checked before any call.
#[derive(Debug, Clone, PartialEq)]
struct Wanted {
    /// `PostgreSQL-N`.
    engine: String,
    /// The node type, lowercase as sent.
    node_type: String,
    /// The volume's size in bytes.
    bytes: u64,
    /// The administrator.
    user: String,
}

/// What an update writes: upgrades, one field each, in order; and one `UpdateInstance`.
#[derive(Debug, Default, PartialEq)]
struct Changes {
    upgrades: Vec<(&'static str, Value)>,
    patch: Map<String, Value>,
}

fn instances_path(region: &str) -> String {
    format!("/rdb/v1/regions/{region}/instances")
}

fn instance_path(region: &str, id: &str) -> String {
    format!("/rdb/v1/regions/{region}/instances/{id}")
}

/// Whether `e` is Scaleway's answer to a write to a busy resource.
fn is_busy(e: &BackendError) -> bool {
    crate::api::is_busy(e)
}

impl RdbInstances {
    /// `GetInstance`: the PostgreSQL instance `id` of `region`, or `NotFound`.
    async fn get(&self, region: &str, id: &str) -> Result<Instance, BackendError> {
        let call = Call::get("rdb: GetInstance", instance_path(region, id)).not_found(NO_INSTANCE);
        let instance: Instance = self.clients.api().call(call).await?;
        if !instance.engine.starts_with(ENGINE_PREFIX) {
            return Err(BackendError::not_found(format!(
                "Database Instance {id} runs {}, not PostgreSQL",
                instance.engine
            ))
            .with_code("not_found"));
        }
        Ok(instance)
    }

    /// The PostgreSQL instances of the project in `region` named exactly `name`.
    async fn named(&self, region: &str, name: &str) -> Result<Vec<Instance>, BackendError> {
        let call = Call::get("rdb: ListInstances", instances_path(region))
            .query("project_id", self.clients.project_id())
            .query("name", name);
        let all: Vec<Instance> = self.clients.api().list_all(call, "instances").await?;
        Ok(all
            .into_iter()
            .filter(|i| i.name == name && i.engine.starts_with(ENGINE_PREFIX))
            .collect())
    }

    /// What `settle_uncertain` looks for: the instance named `name` (one carrying
    /// `marker` first), with its tags; `None` when there is none.
    async fn find(
        &self,
        region: &str,
        name: &str,
        marker: &Marker,
    ) -> Result<Option<(RawTags, String)>, BackendError> {
        let found = self.named(region, name).await?;
        let ours = found
            .iter()
            .find(|i| marker.verdict(&tags::to_map(&i.tags)) == Ownership::Ours);
        Ok(ours
            .or(found.first())
            .map(|i| (tags::to_map(&i.tags), i.id.clone())))
    }

    /// Waits until instance `id` is `ready`; `what` names the work.
    async fn await_ready(
        &self,
        region: &str,
        id: &str,
        what: &str,
    ) -> Result<Instance, BackendError> {
        let polling = self.clients.polling();
        let waited = poll::until_done(self.clients.clock(), polling, what, || async {
            let instance = self.get(region, id).await?;
            match instance.status.as_str() {
                "ready" => Ok(Some(instance)),
                s if TRANSIENT.contains(&s) => Ok(None),
                other => Err(BackendError::new(
                    ErrorKind::Other,
                    format!(
                        "{what}: Database Instance {id} is `{other}`{}",
                        if other == "disk_full" {
                            " (its volume is full: grow it, then apply again)"
                        } else {
                            ""
                        }
                    ),
                )),
            }
        })
        .await?;
        match waited {
            Waited::Done(instance) => Ok(instance),
            Waited::StillRunning => Err(poll::still_running(what, polling)),
        }
    }

    /// Makes the write `call` to instance `id`, trying it again while the instance is
    /// busy (`transient_state`), with a read of the instance between tries, until the
    /// polling deadline. (The retry policy repeats a busy call for its budget, minutes;
    /// an instance can be busy for far longer, an upgrade or a backup: this follows its
    /// status for as long as the polling deadline allows.)
    async fn when_idle<T, F, Fut>(
        &self,
        region: &str,
        id: &str,
        what: &str,
        mut call: F,
    ) -> Result<T, BackendError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, BackendError>>,
    {
        let polling = self.clients.polling();
        let waited = poll::until_done(self.clients.clock(), polling, what, || {
            let attempt = call();
            async move {
                match attempt.await {
                    Ok(done) => Ok(Some(Ok(done))),
                    Err(e) if is_busy(&e) => {
                        tracing::debug!("{what}: {e}; waiting");
                        // A busy instance moves on with time; reading it is how its
                        // status is followed.
                        self.get(region, id).await.map(|_| None)
                    }
                    // Throttling was waited out by the retry policy already: what is left
                    // of it is a failure, not a status to follow.
                    Err(e) => Ok(Some(Err(e))),
                }
            }
        })
        .await?;
        match waited {
            Waited::Done(outcome) => outcome,
            Waited::StillRunning => Err(BackendError::new(
                ErrorKind::Unavailable,
                format!(
                    "{what}: Database Instance {id} stayed busy (or the calls throttled) for \
                     {}s; nothing was changed",
                    polling.deadline.as_secs()
                ),
            )),
        }
    }

    /// `UpgradeInstance` with the one field `target`, then waits until it is `ready`.
    async fn upgrade(
        &self,
        region: &str,
        id: &str,
        target: &str,
        value: &Value,
    ) -> Result<(), BackendError> {
        let what = format!("rdb: UpgradeInstance {id} ({target})");
        let path = format!("{}/upgrade", instance_path(region, id));
        let body = json!({ target: value });
        self.when_idle(region, id, &what, || {
            // Not repeated once it may have landed: a landed upgrade keeps the instance
            // busy for minutes, and a repeat of it then is refused (or found already
            // done) rather than done twice, which would fail an update that succeeded.
            // The error says "may have been sent"; the next plan reads what came of it.
            let call = Call::action(
                "rdb: UpgradeInstance",
                path.clone(),
                Idempotence::NotIdempotent,
            )
            .not_found(NO_INSTANCE)
            .busy_awaited();
            self.clients.api().act(call, Some(&body))
        })
        .await?;
        self.await_ready(region, id, &what).await.map(|_| ())
    }

    /// `UpdateInstance` with `body`.
    async fn patch(&self, region: &str, id: &str, body: &Value) -> Result<(), BackendError> {
        let what = format!("rdb: UpdateInstance {id}");
        let path = instance_path(region, id);
        self.when_idle(region, id, &what, || {
            let call = Call::patch("rdb: UpdateInstance", path.clone())
                .not_found(NO_INSTANCE)
                .busy_awaited();
            self.clients.api().act(call, Some(body))
        })
        .await
    }

    /// Sets the password of `user` on instance `id` (`UpdateUser`), making the user an
    /// administrator with it when it does not exist (`CreateUser`).
    async fn set_password(
        &self,
        region: &str,
        id: &str,
        user: &str,
        password: &SecretString,
    ) -> Result<(), BackendError> {
        let what = format!("rdb: UpdateUser {user} of {id}");
        let users = format!("{}/users", instance_path(region, id));
        let path = format!("{users}/{user}");
        let body = json!({ "password": password.expose() });
        let updated = self
            .when_idle(region, id, &what, || {
                let call = Call::patch("rdb: UpdateUser", path.clone())
                    .not_found(NO_USER)
                    .busy_awaited();
                self.clients.api().act(call, Some(&body))
            })
            .await;
        let outcome = match updated {
            Err(e) if e.kind == ErrorKind::NotFound => {
                let what = format!("rdb: CreateUser {user} of {id}");
                let body = json!({ "name": user, "password": password.expose(), "is_admin": true });
                self.when_idle(region, id, &what, || {
                    let call = Call::create("rdb: CreateUser", users.clone())
                        .not_found(NO_INSTANCE)
                        .busy_awaited();
                    self.clients.api().act(call, Some(&body))
                })
                .await
            }
            other => other,
        };
        outcome.map_err(|e| scrub_secret(e, password))
    }

    /// The administrator of `instance`, from its users (see the module documentation).
    async fn administrator(
        &self,
        region: &str,
        instance: &Instance,
    ) -> Result<Partial<String>, BackendError> {
        if instance.status != "ready" {
            return Ok(Partial::Unknown);
        }
        let path = format!("{}/users", instance_path(region, &instance.id));
        let call = Call::get("rdb: ListUsers", path)
            .not_found(NO_INSTANCE)
            .busy_awaited();
        match self.clients.api().list_all::<User>(call, "users").await {
            Ok(users) => Ok(administrator(&users)),
            // Busy since it was read: its users cannot be listed now.
            Err(e) if is_busy(&e) => Ok(Partial::Unknown),
            Err(e) => Err(e),
        }
    }

    /// The reading of `instance`.
    async fn reading(
        &self,
        region: &str,
        instance: &Instance,
    ) -> Result<Reading<Postgres>, BackendError> {
        let admin = self.administrator(region, instance).await?;
        reading_of(instance, admin)
    }

    /// Refuses a PostgreSQL engine `ListDatabaseEngines` does not offer in `region`.
    async fn check_engine(&self, region: &str, engine: &str) -> Result<(), BackendError> {
        let path = format!("/rdb/v1/regions/{region}/database-engines");
        let call = Call::get("rdb: ListDatabaseEngines", path).query("name", "PostgreSQL");
        let engines: Vec<Engine> = self.clients.api().list_all(call, "engines").await?;
        let offered: Vec<&str> = engines
            .iter()
            .flat_map(|e| &e.versions)
            .filter(|v| !v.disabled && v.name.starts_with(ENGINE_PREFIX))
            .map(|v| v.name.as_str())
            .collect();
        if offered.contains(&engine) {
            return Ok(());
        }
        Err(BackendError::invalid(format!(
            "Scaleway does not offer {engine} for new Database Instances in {region} (offered: \
             {}); declare one of those major versions as `engineVersion`",
            offered.join(", ")
        )))
    }

    /// Refuses a name an instance of the region has already.
    async fn check_name_free(&self, region: &str, name: &str) -> Result<(), BackendError> {
        match self.named(region, name).await?.first() {
            None => Ok(()),
            Some(taken) => Err(BackendError::new(
                ErrorKind::Conflict,
                format!(
                    "a Database Instance named {name} exists in {region} already ({}, {}); \
                     Scaleway allows two of one name, this backend does not",
                    taken.id, taken.status
                ),
            )
            .with_code("already_exists")),
        }
    }

    /// `CreateInstance`, its outcome settled by name and marker when its answer is lost:
    /// the new instance's id.
    async fn post_create(
        &self,
        region: &str,
        name: &str,
        body: &CreateBody<'_>,
        marker: &Marker,
    ) -> Result<String, BackendError> {
        let call = Call::create("rdb: CreateInstance", instances_path(region));
        let sent: Result<Instance, BackendError> = self.clients.api().send(call, Some(body)).await;
        match sent {
            Ok(instance) => Ok(instance.id),
            Err(e) => {
                let what = format!("rdb: CreateInstance {name}");
                poll::settle_uncertain(e, marker, &what, self.find(region, name, marker)).await
            }
        }
    }

    /// After a `DeleteInstance` whose answer was lost (`err`): gone or going is done,
    /// anything else is `err`.
    async fn settle_delete(
        &self,
        region: &str,
        id: &str,
        err: BackendError,
    ) -> Result<(), BackendError> {
        match self.get(region, id).await {
            Err(e) if e.kind == ErrorKind::NotFound => Ok(()),
            Ok(i) if i.status == "deleting" => self.await_gone(region, id).await,
            _ => Err(err),
        }
    }

    /// Waits until instance `id`, being deleted, is gone.
    async fn await_gone(&self, region: &str, id: &str) -> Result<(), BackendError> {
        let what = format!("rdb: deleting Database Instance {id}");
        let polling = self.clients.polling();
        let waited = poll::until_done(self.clients.clock(), polling, &what, || async {
            match self.get(region, id).await {
                Err(e) if e.kind == ErrorKind::NotFound => Ok(Some(())),
                Ok(i) if i.status == "deleting" => Ok(None),
                Ok(i) => Err(BackendError::new(
                    ErrorKind::Other,
                    format!("{what}: the instance is `{}`, not being deleted", i.status),
                )),
                Err(e) => Err(e),
            }
        })
        .await?;
        match waited {
            Waited::Done(()) => Ok(()),
            Waited::StillRunning => Err(poll::still_running(&what, polling)),
        }
    }
}

/// `PostgreSQL-N` of a declared major version `N`.
fn engine_of(version: &str) -> Result<String, BackendError> {
    let version = version.trim();
    if version.is_empty() || !version.chars().all(|c| c.is_ascii_digit()) {
        return Err(BackendError::invalid(format!(
            "`engineVersion` {version:?} is not a PostgreSQL major version as Scaleway names \
             them (\"16\", for the engine PostgreSQL-16)"
        )));
    }
    Ok(format!("{ENGINE_PREFIX}{version}"))
}

/// The major version of an engine `PostgreSQL-N`.
fn major_of(engine: &str) -> Option<&str> {
    engine
        .strip_prefix(ENGINE_PREFIX)
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()))
}

/// The node type to send for a capacity; the serverless shape is refused.
fn node_type_of(capacity: &Capacity) -> Result<String, BackendError> {
    match capacity {
        Capacity::Classic { instance_class } => {
            let class = instance_class.trim();
            let valid = class.len() > 3
                && class.starts_with("DB-")
                && class
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-');
            if valid {
                Ok(class.to_ascii_lowercase())
            } else {
                Err(BackendError::invalid(format!(
                    "`{class}` is not a Scaleway node type as Scaleway names its offers: write \
                     it in capitals, like DB-DEV-S, DB-GP-XS or DB-PRO2-XXS (the read answers \
                     them so)"
                )))
            }
        }
        Capacity::Serverless { .. } => Err(BackendError::invalid(
            "a Scaleway Database Instance has no serverless shape: it runs on one node type, \
             with no capacity range that scales on its own (Serverless SQL Database is another \
             product); declare `Capacity::Classic` with a node type such as DB-DEV-S",
        )),
        other => Err(BackendError::invalid(format!(
            "this build of infra-scaleway does not know the capacity {other:?}"
        ))),
    }
}

/// Refuses a user name Scaleway would refuse for PostgreSQL.
fn check_user(name: &str) -> Result<(), BackendError> {
    let valid = (1..=63).contains(&name.chars().count())
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '-'))
        && !name.starts_with("_rdb")
        && !name.starts_with("pg_");
    if valid {
        return Ok(());
    }
    Err(BackendError::invalid(format!(
        "`masterUsername` {name:?} cannot name a Scaleway database user: 1 to 63 characters of \
         a-z, A-Z, 0-9, `_`, `$` and `-`, starting with a letter, and not starting with `pg_`"
    )))
}

/// Why Scaleway would refuse `password`, or `None`.
fn password_problem(password: &str) -> Option<&'static str> {
    let length = password.chars().count();
    let has = |test: fn(&char) -> bool| password.chars().any(|c| test(&c));
    if !(8..=128).contains(&length) {
        Some("is not 8 to 128 characters long")
    } else if !has(char::is_ascii_digit) {
        Some("has no digit")
    } else if !has(char::is_ascii_uppercase) {
        Some("has no uppercase letter")
    } else if !has(char::is_ascii_lowercase) {
        Some("has no lowercase letter")
    } else if !has(|c| !c.is_alphanumeric()) {
        Some("has no special character")
    } else {
        None
    }
}

/// Refuses a password Scaleway would refuse, naming the secret, never the value.
fn check_password(password: &SecretString, secret: &str) -> Result<(), BackendError> {
    match password_problem(password.expose()) {
        None => Ok(()),
        Some(why) => Err(BackendError::invalid(format!(
            "the value of secret {secret} {why}: Scaleway wants a database password of 8 to \
             128 characters with at least a digit, an uppercase letter, a lowercase letter and \
             a special character; nothing was sent"
        ))),
    }
}

/// What `spec` asks of an instance, checked.
fn wanted(spec: &PostgresSettled) -> Result<Wanted, BackendError> {
    let user = spec.master_username.trim().to_owned();
    check_user(&user)?;
    let gb = spec
        .storage_gb
        .known()
        .copied()
        .unwrap_or(DEFAULT_STORAGE_GB);
    Ok(Wanted {
        engine: engine_of(&spec.engine_version)?,
        node_type: node_type_of(&spec.capacity)?,
        bytes: u64::from(gb) * GB,
        user,
    })
}

/// A size in bytes, as Scaleway answers it (a number or a decimal string).
fn bytes_of(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// The days of backups an instance keeps.
fn backup_days(instance: &Instance) -> Partial<u32> {
    match &instance.backup_schedule {
        Some(s) if s.disabled => Partial::Known(0),
        Some(s) => s.retention.map_or(Partial::Unknown, Partial::Known),
        None => Partial::Unknown,
    }
}

/// Where clients connect: the public endpoint, else the first one.
fn endpoint_of(instance: &Instance) -> Option<(String, u16)> {
    let address = |e: &Endpoint| {
        let host = e.ip.clone().or_else(|| e.hostname.clone())?;
        Some((host, e.port?))
    };
    let public = instance
        .endpoints
        .iter()
        .filter(|e| e.load_balancer.is_some())
        .find_map(address);
    public
        .or_else(|| instance.endpoints.iter().find_map(address))
        .or_else(|| instance.endpoint.as_ref().and_then(address))
}

/// The one administrator among `users`, else `Unknown`.
fn administrator(users: &[User]) -> Partial<String> {
    let mut admins = users.iter().filter(|u| u.is_admin);
    match (admins.next(), admins.next()) {
        (Some(one), None) => Partial::Known(one.name.clone()),
        _ => Partial::Unknown,
    }
}

/// The reading of an instance, its administrator found already.
fn reading_of(
    instance: &Instance,
    master_username: Partial<String>,
) -> Result<Reading<Postgres>, BackendError> {
    let Some((endpoint, port)) = endpoint_of(instance) else {
        return Err(BackendError::new(
            ErrorKind::Unavailable,
            format!(
                "Database Instance {} has no endpoint yet (status `{}`): it is still being made",
                instance.id, instance.status
            ),
        ));
    };
    let raw = tags::to_map(&instance.tags);
    let storage_gb = instance
        .volume
        .as_ref()
        .and_then(|v| bytes_of(&v.size))
        .filter(|b| b.is_multiple_of(GB))
        .and_then(|b| u32::try_from(b / GB).ok());
    let capacity = (!instance.node_type.is_empty()).then(|| Capacity::Classic {
        instance_class: instance.node_type.to_ascii_uppercase(),
    });
    let reading = Reading::new(
        instance.id.clone(),
        PostgresObserved {
            id: instance.id.clone(),
            endpoint,
            port,
        },
        PostgresReported {
            engine_version: major_of(&instance.engine)
                .map_or(Partial::Unknown, |v| Partial::Known(v.to_owned())),
            capacity: capacity.map_or(Partial::Unknown, Partial::Known),
            storage_gb: storage_gb.map_or(Partial::Unknown, Partial::Known),
            master_username,
            master_password: Partial::Unknown,
            backup_retention_days: backup_days(instance),
            tags: Partial::Known(raw.clone()),
        },
    );
    Ok(reading.with_raw_tags(raw))
}

/// What an update of `current` to `spec` writes (see the module documentation).
fn changes(current: &Instance, spec: &PostgresSettled) -> Result<Changes, BackendError> {
    let id = &current.id;
    let wanted = wanted(spec)?;
    let mut out = Changes::default();
    if let Some(major) = major_of(&current.engine)
        && Some(major) != major_of(&wanted.engine)
    {
        return Err(BackendError::invalid(format!(
            "Database Instance {id} runs PostgreSQL {major}: Scaleway changes a major version \
             only through its upgrade workflow, which makes a new Database Instance (another \
             id) beside this one; declare {major}, or a new database for {}",
            spec.engine_version.trim()
        )));
    }
    if !current.node_type.eq_ignore_ascii_case(&wanted.node_type) {
        out.upgrades.push(("node_type", json!(wanted.node_type)));
    }
    if spec.storage_gb.known().is_some() {
        storage_change(current, wanted.bytes, &mut out)?;
    }
    if let Some(&days) = spec.backup_retention_days.known()
        && backup_days(current) != Partial::Known(days)
    {
        out.patch
            .insert("is_backup_schedule_disabled".into(), json!(days == 0));
        if days > 0 {
            out.patch
                .insert("backup_schedule_retention".into(), json!(days));
        }
    }
    if let Some(declared) = spec.tags.known() {
        let wanted = tags::for_update(tags::from_map(declared), &current.tags);
        let mut now = current.tags.clone();
        now.sort();
        now.dedup();
        if wanted != now {
            out.patch.insert("tags".into(), json!(wanted));
        }
    }
    Ok(out)
}

/// The upgrade that brings `current`'s volume to `bytes`, if any; a shrink, or a size
/// chosen for a local SSD, is refused.
fn storage_change(current: &Instance, bytes: u64, out: &mut Changes) -> Result<(), BackendError> {
    let id = &current.id;
    let volume = current.volume.as_ref();
    let now = volume.and_then(|v| bytes_of(&v.size));
    match (volume.map(|v| v.kind.as_str()), now) {
        (_, Some(size)) if size == bytes => Ok(()),
        (_, Some(size)) if bytes < size => Err(BackendError::invalid(format!(
            "the volume of Database Instance {id} holds {} GB: Scaleway only grows a volume, so \
             {} GB needs a new instance",
            size / GB,
            bytes / GB
        ))),
        (Some("lssd"), _) => Err(BackendError::invalid(format!(
            "Database Instance {id} keeps its data on a local SSD, whose size is its node \
             type's: move it to Block Storage (an `UpgradeInstance` of `volume_type`, in the \
             console) before declaring `storageGb`"
        ))),
        _ => {
            out.upgrades.push(("volume_size", json!(bytes)));
            Ok(())
        }
    }
}

/// The declared tags as Scaleway's strings.
fn declared_tags(spec: &PostgresSettled) -> Vec<String> {
    spec.tags.known().map(tags::from_map).unwrap_or_default()
}

#[async_trait]
impl KindBackend<Postgres> for RdbInstances {
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let call = Call::get("rdb: ListInstances", instances_path(region))
            .query("project_id", self.clients.project_id());
        let all: Vec<Instance> = self.clients.api().list_all(call, "instances").await?;
        Ok(all
            .into_iter()
            .filter(|i| i.engine.starts_with(ENGINE_PREFIX))
            .map(|i| Listed::new(i.name, i.id))
            .collect())
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<Postgres>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let instance = self.get(region, handle).await?;
        self.reading(region, &instance).await
    }

    async fn create(
        &self,
        args: CreateArgs<'_, Postgres>,
    ) -> Result<Written<Reading<Postgres>>, BackendError> {
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = args;
        // Everything refused before any call is refused here, before the password is read.
        let wanted = wanted(spec)?;
        let tags = tags::for_create(declared_tags(spec), marker);
        self.check_engine(region, &wanted.engine).await?;
        self.check_name_free(region, name).await?;
        let secret = spec.master_password.as_str();
        let password = latest_value(&self.clients, region, secret).await?;
        check_password(&password, secret)?;
        let days = spec.backup_retention_days.known().copied();
        let body = CreateBody {
            project_id: self.clients.project_id(),
            name,
            engine: &wanted.engine,
            user_name: &wanted.user,
            password: password.expose(),
            node_type: &wanted.node_type,
            is_ha_cluster: false,
            disable_backup: days == Some(0),
            tags: &tags,
            volume_type: VOLUME_TYPE,
            volume_size: wanted.bytes,
            backup_same_region: false,
        };
        let id = self
            .post_create(region, name, &body, marker)
            .await
            .map_err(|e| scrub_secret(e, &password))?;
        let what = format!("rdb: creating Database Instance {name} ({id})");
        let instance = self.await_ready(region, &id, &what).await?;
        if let Some(days) = days.filter(|d| *d > 0)
            && backup_days(&instance) != Partial::Known(days)
        {
            let body = json!({ "backup_schedule_retention": days });
            self.patch(region, &id, &body).await?;
        }
        let instance = self.get(region, &id).await?;
        Ok(Written::Done(self.reading(region, &instance).await?))
    }

    async fn update(
        &self,
        args: UpdateArgs<'_, Postgres>,
    ) -> Result<Written<Reading<Postgres>>, BackendError> {
        let UpdateArgs {
            region,
            handle,
            spec,
            ..
        } = args;
        let current = self.get(region, handle).await?;
        let changes = changes(&current, spec)?;
        let secret = spec.master_password.as_str();
        let password = latest_value(&self.clients, region, secret).await?;
        check_password(&password, secret)?;
        for (target, value) in &changes.upgrades {
            self.upgrade(region, handle, target, value).await?;
        }
        if !changes.patch.is_empty() {
            let body = Value::Object(changes.patch);
            self.patch(region, handle, &body).await?;
        }
        let user = spec.master_username.trim();
        self.set_password(region, handle, user, &password).await?;
        let instance = self.get(region, handle).await?;
        Ok(Written::Done(self.reading(region, &instance).await?))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        self.get(region, handle).await?;
        let what = format!("rdb: DeleteInstance {handle}");
        let path = instance_path(region, handle);
        let sent = self
            .when_idle(region, handle, &what, || {
                let call = Call::delete("rdb: DeleteInstance", path.clone())
                    .not_found(NO_INSTANCE)
                    .busy_awaited();
                self.clients.api().act(call, None::<&()>)
            })
            .await;
        match sent {
            Ok(()) => self.await_gone(region, handle).await,
            // Gone while it was awaited (deleted by another, or its own deletion ended).
            Err(e) if e.kind == ErrorKind::NotFound => Ok(()),
            Err(e) if e.may_have_been_sent => self.settle_delete(region, handle, e).await,
            Err(e) => Err(e),
        }
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        Ok(tags::to_map(&self.get(region, handle).await?.tags))
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let current = self.get(region, handle).await?;
        let what = format!("Database Instance {handle}");
        if let Some(all) = tags::marking(&current.tags, marker, &what)? {
            self.patch(region, handle, &json!({ "tags": all })).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infra_core::kinds::Acu;
    use infra_core::sdk::Handle;

    fn spec() -> PostgresSettled {
        PostgresSettled {
            engine_version: "16".to_owned(),
            capacity: Capacity::Classic {
                instance_class: "DB-DEV-S".to_owned(),
            },
            storage_gb: Partial::Known(20),
            master_username: "app".to_owned(),
            master_password: Handle::new("secret-id".to_owned()),
            backup_retention_days: Partial::Known(7),
            tags: Partial::Known(RawTags::from([("team".to_owned(), "web".to_owned())])),
        }
    }

    fn instance() -> Instance {
        serde_json::from_value(json!({
            "id": "11111111-2222-4333-8444-555555555555",
            "name": "orders",
            "status": "ready",
            "engine": "PostgreSQL-16",
            "node_type": "db-dev-s",
            "tags": ["team=web", "managed-by-infra=shop"],
            "volume": { "type": "sbs_5k", "size": 20_000_000_000u64, "class": "sbs" },
            "backup_schedule": { "frequency": 24, "retention": 7, "disabled": false },
            "endpoints": [
                { "id": "e1", "ip": "10.0.0.4", "port": 5432, "private_network": {} },
                { "id": "e2", "ip": "51.159.1.2", "port": 21345, "load_balancer": {} }
            ],
        }))
        .unwrap()
    }

    #[test]
    fn versions_and_node_types_map_to_scaleways_names() {
        assert_eq!(engine_of("16").unwrap(), "PostgreSQL-16");
        for bad in ["", "16.3", "latest", "PostgreSQL-16"] {
            assert_eq!(
                engine_of(bad).unwrap_err().kind,
                ErrorKind::Invalid,
                "{bad}"
            );
        }
        assert_eq!(major_of("PostgreSQL-16"), Some("16"));
        assert_eq!(major_of("MySQL-8"), None);
        let classic = |c: &str| Capacity::Classic {
            instance_class: c.to_owned(),
        };
        assert_eq!(
            node_type_of(&classic("DB-PRO2-XXS")).unwrap(),
            "db-pro2-xxs"
        );
        for bad in ["db-dev-s", "db.t4g.micro", "DB-", "DB DEV"] {
            assert_eq!(
                node_type_of(&classic(bad)).unwrap_err().kind,
                ErrorKind::Invalid
            );
        }
        let serverless = Capacity::Serverless {
            min_capacity: Acu::whole(1),
            max_capacity: Acu::whole(2),
        };
        let err = node_type_of(&serverless).unwrap_err();
        assert!(err.kind == ErrorKind::Invalid && err.message.contains("serverless"));
    }

    #[test]
    fn user_names_and_passwords_follow_scaleways_rules() {
        assert!(check_user("app_1$-x").is_ok());
        for bad in ["", "1app", "pg_app", "_rdb", "app.user", &"a".repeat(64)] {
            assert!(check_user(bad).is_err(), "{bad}");
        }
        assert_eq!(password_problem("Aa1-aaaa"), None);
        assert!(password_problem("Aa1-").is_some());
        assert!(
            password_problem("Aa1aaaaaaa").is_some(),
            "no special character"
        );
        assert!(
            password_problem("aa1-aaaaa").is_some(),
            "no uppercase letter"
        );
        let refused = check_password(&SecretString::new("plainvalue"), "sec").unwrap_err();
        assert_eq!(refused.kind, ErrorKind::Invalid);
        assert!(
            !refused.message.contains("plainvalue"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn a_read_reports_what_scaleway_says_and_nothing_else() {
        let read = reading_of(&instance(), Partial::Known("app".to_owned())).unwrap();
        assert_eq!(
            read.observed().endpoint,
            "51.159.1.2",
            "the public endpoint"
        );
        assert_eq!(read.observed().port, 21345);
        let reported = Value::Object(read.reported().clone());
        assert_eq!(reported["engineVersion"], "16");
        assert_eq!(reported["capacity"]["instanceClass"], "DB-DEV-S");
        assert_eq!(reported["storageGb"], 20);
        assert_eq!(reported["backupRetentionDays"], 7);
        assert_eq!(reported["masterUsername"], "app");
        assert_eq!(reported["tags"]["managed-by-infra"], "shop");
        assert!(reported.get("masterPassword").is_none());

        let mut bare = instance();
        bare.volume = None;
        bare.backup_schedule = None;
        bare.node_type = String::new();
        bare.engine = "PostgreSQL-x".to_owned();
        let reported = reading_of(&bare, Partial::Unknown)
            .unwrap()
            .reported()
            .clone();
        for field in [
            "engineVersion",
            "capacity",
            "storageGb",
            "backupRetentionDays",
            "masterUsername",
        ] {
            assert!(reported.get(field).is_none(), "{field}: {reported:?}");
        }
        let mut off = instance();
        off.backup_schedule = Some(BackupSchedule {
            retention: Some(7),
            disabled: true,
        });
        assert_eq!(backup_days(&off), Partial::Known(0));
        let mut no_endpoint = instance();
        no_endpoint.endpoints.clear();
        let err = reading_of(&no_endpoint, Partial::Unknown).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Unavailable);
    }

    #[test]
    fn the_administrator_is_the_one_admin_user() {
        let user = |name: &str, is_admin: bool| User {
            name: name.to_owned(),
            is_admin,
        };
        assert_eq!(
            administrator(&[user("app", true), user("reader", false)]),
            Partial::Known("app".to_owned())
        );
        assert_eq!(
            administrator(&[user("a", true), user("b", true)]),
            Partial::Unknown
        );
        assert_eq!(administrator(&[user("reader", false)]), Partial::Unknown);
    }

    #[test]
    fn an_update_writes_only_what_differs_one_upgrade_at_a_time() {
        assert_eq!(changes(&instance(), &spec()).unwrap(), Changes::default());
        let mut more = spec();
        more.capacity = Capacity::Classic {
            instance_class: "DB-GP-XS".to_owned(),
        };
        more.storage_gb = Partial::Known(50);
        more.backup_retention_days = Partial::Known(14);
        more.tags = Partial::Known(RawTags::new());
        let out = changes(&instance(), &more).unwrap();
        assert_eq!(
            out.upgrades,
            vec![
                ("node_type", json!("db-gp-xs")),
                ("volume_size", json!(50_000_000_000u64))
            ]
        );
        assert_eq!(out.patch["backup_schedule_retention"], 14);
        assert_eq!(out.patch["is_backup_schedule_disabled"], false);
        assert_eq!(
            out.patch["tags"],
            json!(["managed-by-infra=shop"]),
            "the marker stays"
        );
        let mut none = spec();
        none.backup_retention_days = Partial::Known(0);
        let out = changes(&instance(), &none).unwrap();
        assert_eq!(out.patch["is_backup_schedule_disabled"], true);
        assert!(out.patch.get("backup_schedule_retention").is_none());
    }

    #[test]
    fn an_update_refuses_a_shrink_a_major_version_and_a_local_volume_size() {
        let mut smaller = spec();
        smaller.storage_gb = Partial::Known(10);
        assert_eq!(
            changes(&instance(), &smaller).unwrap_err().kind,
            ErrorKind::Invalid
        );
        let mut newer = spec();
        newer.engine_version = "17".to_owned();
        let err = changes(&instance(), &newer).unwrap_err();
        assert!(err.kind == ErrorKind::Invalid && err.message.contains("upgrade workflow"));
        let mut local = instance();
        local.volume = Some(Volume {
            kind: "lssd".to_owned(),
            size: json!("5000000000"),
        });
        let err = changes(&local, &spec()).unwrap_err();
        assert!(err.message.contains("local SSD"), "{err}");
        let mut undeclared = spec();
        undeclared.storage_gb = Partial::Unknown;
        assert!(changes(&local, &undeclared).unwrap().upgrades.is_empty());
    }

    #[test]
    fn the_create_body_carries_the_marker_and_a_block_volume_in_bytes() {
        let marker = Marker::new("shop");
        let tags = tags::for_create(declared_tags(&spec()), &marker);
        let wanted = wanted(&spec()).unwrap();
        let body = CreateBody {
            project_id: "p",
            name: "orders",
            engine: &wanted.engine,
            user_name: &wanted.user,
            password: "Secret-1",
            node_type: &wanted.node_type,
            is_ha_cluster: false,
            disable_backup: false,
            tags: &tags,
            volume_type: VOLUME_TYPE,
            volume_size: wanted.bytes,
            backup_same_region: false,
        };
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(json["engine"], "PostgreSQL-16");
        assert_eq!(json["node_type"], "db-dev-s");
        assert_eq!(json["volume_type"], "sbs_5k");
        assert_eq!(json["volume_size"], 20_000_000_000u64);
        assert_eq!(json["tags"], json!(["managed-by-infra=shop", "team=web"]));
        let mut quiet = spec();
        quiet.storage_gb = Partial::Unknown;
        assert_eq!(super::wanted(&quiet).unwrap().bytes, 20 * GB);
    }
}

#[cfg(test)]
#[path = "recorded/rdb.rs"]
mod recorded;
