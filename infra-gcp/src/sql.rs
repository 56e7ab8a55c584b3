//! The `postgres` kind: Cloud SQL for PostgreSQL instances, through the Cloud SQL Admin
//! API v1 (`SqlInstancesService`, `SqlUsersService`, and `SqlOperationsService` for
//! Cloud SQL's own operations).
//!
//! **The handle** is the instance's name (its id in the project: lowercase letters,
//! digits and hyphens, starting with a letter, and at most 98 characters together with
//! the project id and a colon). Cloud SQL names are unique in a project across regions,
//! and the region is a real property of the instance (`region`): `list` reads every page
//! of the project's instances and keeps the PostgreSQL instances (not replicas) of the
//! region asked about, and a read of an instance of another region is `NotFound`.
//!
//! **The marker** is one of the instance's labels (`settings.userLabels`), sent in the
//! `instances.insert` call itself. `instances.patch` merges labels into those the
//! instance has, so an update that adds or changes labels patches them; one that must
//! remove a label sends the instance's whole settings again with `instances.update`
//! (with the `settingsVersion` read just before, so that a concurrent change is refused
//! rather than overwritten). `mark` patches the labels with the marker added.
//!
//! **Writes are operations** (`sql#operation`): each is polled with
//! `SqlOperationsService::get` until `DONE`, on the configured clock and within its
//! deadline; one that ends with `error` is a refusal. A create whose outcome is unknown
//! is settled by looking the instance up by name (`instances.get`): without this
//! fleet's marker, the name is someone else's (`Conflict`). When the insert's answer
//! was lost and the instance carries the marker, it is the one the create made: it is
//! awaited until `RUNNABLE` and the create goes on (the administrator). When the insert
//! was answered but its operation was still running at the deadline, the error stands
//! (marked "may have been sent"): the engine records the outcome as uncertain.
//!
//! **Limits.** Cloud SQL keeps a deleted instance's name for about a week, so a
//! replace (delete, then create under the same name) is refused with `Conflict` on
//! Google Cloud until then; the stand-in frees the name at once. A create whose
//! administrator could not be made (after the instance was) leaves an instance whose
//! only user is `postgres`: the next plan reads `masterUsername` as `postgres` and
//! replaces the instance.
//!
//! **Mapping.**
//! - `engineVersion` `"16"` is `databaseVersion` `POSTGRES_16` (`"9.6"` is
//!   `POSTGRES_9_6`); a major version the client does not know is refused before any
//!   call. A higher version is a major-version upgrade in place (`instances.patch`); a
//!   lower one is refused before any call, since Cloud SQL never downgrades.
//! - `capacity`: `Classic { instanceClass }` is the machine tier (`settings.tier`:
//!   `db-f1-micro`, `db-g1-small`, `db-custom-<vCPUs>-<MiB>`, or an Enterprise Plus
//!   `db-perf-optimized-N-<vCPUs>`). The edition is sent with it: Enterprise Plus for a
//!   `db-perf-optimized-` tier, Enterprise for every other (Cloud SQL picks Enterprise
//!   Plus by default for PostgreSQL 16 and later, where the shared-core and custom tiers
//!   are refused). `Serverless` is refused before any call: Cloud SQL has no
//!   serverless shape (no capacity range that scales on its own).
//! - `storageGb` is `settings.dataDiskSizeGb`. Declaring it also turns the automatic
//!   storage increase off (`storageAutoResize: false`): a disk that grew by itself would
//!   read back larger than declared, and a smaller declared size is a replace. A disk
//!   only grows: a smaller size is refused here before any call (the spec turns it
//!   into a replace before it gets here). Not declared, Cloud SQL's own default (10 GB,
//!   growing on its own) is left in place.
//! - `backupRetentionDays` n is `settings.backupConfiguration`: `enabled: n > 0`, and
//!   for n > 0 `backupRetentionSettings { retainedBackups: n, retentionUnit: COUNT }`.
//!   Cloud SQL keeps a number of automated backups, not a number of days; it takes one a
//!   day, so n backups cover about n days.
//! - `tags` are `settings.userLabels`, the marker among them.
//! - `masterUsername` / `masterPassword`: the password is the latest value of the
//!   referenced Secret Manager secret, read (`secret_value::latest_value`) just before
//!   the call that sets it, and never logged nor put in an error. For the user
//!   `postgres` it is the instance's `rootPassword` in `instances.insert`; any other name
//!   is a built-in user made with `users.insert` once the instance is ready. Cloud SQL
//!   does not say which password a user has, so every `update` sets the administrator's
//!   password again from the secret's current value (`users.update`, or `users.insert`
//!   when the user is missing): an update after the secret changed carries the new
//!   password to the database.
//!
//! **Observed:** `id` is the instance name; `endpoint` is its `PRIMARY` (public) IP
//! address, else its `PRIVATE` one, else its DNS name, else its connection name
//! (`project:region:name`, what the Cloud SQL connectors and Auth Proxy take); `port` is
//! 5432.
//!
//! What read reports when Cloud SQL does not say:
//! - `engineVersion`: the major version of `databaseVersion`; `Unknown` when it is not a
//!   PostgreSQL version this client knows.
//! - `capacity`: `Classic` with `settings.tier`; `Unknown` without a tier.
//! - `storageGb`: `settings.dataDiskSizeGb`; `Unknown` when absent.
//! - `masterUsername`: from `users.list` (built-in users only): the one user that is
//!   neither `postgres` nor a Cloud SQL system user (`cloudsql…`); `postgres` when there
//!   is no such user (the administrator is then the root user, whose password the create
//!   set); `Unknown` when there are several (users made elsewhere: which one is the
//!   administrator cannot be told), and while the instance is not `RUNNABLE` (users
//!   cannot be listed then).
//! - `masterPassword`: never reported (`Unknown`): Cloud SQL does not say which
//!   password, let alone which secret, a user has.
//! - `backupRetentionDays`: `0` when automated backups are off; `retainedBackups` when
//!   they are on and counted (`COUNT`); `Unknown` when the instance has no backup
//!   configuration or backups are on without a count.
//! - `tags`: `settings.userLabels` (none is the truth, an empty map), marker included.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use google_cloud_gax::paginator::ItemPaginator as _;
use google_cloud_sql_v1::model::{
    BackupConfiguration, BackupRetentionSettings, DatabaseInstance, Operation, Settings,
    SqlDatabaseVersion, SqlInstanceType, SqlIpAddressType, User,
    backup_retention_settings::RetentionUnit, database_instance::SqlInstanceState,
    operation::SqlOperationStatus, settings::Edition, user::SqlUserType,
};
use infra_core::kinds::{Capacity, Postgres, PostgresObserved, PostgresReported, PostgresSettled};
use infra_core::prelude::{Partial, SecretString};
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, ErrorKind, KindBackend, ListArgs, Listed, MarkArgs,
    Marker, OwnershipArgs, RawTags, ReadArgs, Reading, UpdateArgs, Written,
};

use crate::clients::Clients;
use crate::error::{NOT_FOUND, classify, refusal};
use crate::labels;
use crate::poll::{self, Waited};
use crate::secret_value::latest_value;

/// The PostgreSQL port Cloud SQL serves.
const PORT: u16 = 5432;
/// Cloud SQL's root user of a PostgreSQL instance, whose password `rootPassword` sets.
const ROOT_USER: &str = "postgres";
/// The prefix of Cloud SQL's own system users and roles.
const SYSTEM_PREFIX: &str = "cloudsql";
/// The prefix of the Enterprise Plus machine tiers.
const PERF_OPTIMIZED: &str = "db-perf-optimized-";
/// How many times a read right after a write is tried while the instance is not
/// visible yet (eventual consistency).
const READ_ATTEMPTS: u32 = 5;

/// `Postgres` on Google Cloud: Cloud SQL for PostgreSQL.
pub(crate) struct SqlInstances {
    clients: Arc<Clients>,
}

impl SqlInstances {
    /// The kind, reaching Google Cloud through `clients`.
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        SqlInstances { clients }
    }

    fn project(&self) -> &str {
        self.clients.project()
    }

    /// `instances.get`: the instance, or `NotFound`.
    async fn get(&self, name: &str) -> Result<DatabaseInstance, BackendError> {
        self.clients
            .sql_instances()
            .await?
            .get()
            .set_project(self.project())
            .set_instance(name)
            .send()
            .await
            .map_err(|e| classify("sql:instances.get", e, NOT_FOUND))
    }

    /// The PostgreSQL instance `name` of `region`, or `NotFound` (absent, of another
    /// region, or not a PostgreSQL instance).
    async fn get_in(&self, region: &str, name: &str) -> Result<DatabaseInstance, BackendError> {
        let instance = self.get(name).await?;
        if instance.region != region {
            return Err(BackendError::not_found(format!(
                "Cloud SQL instance {name} is in {}, not in {region}",
                instance.region
            ))
            .with_code("NOT_FOUND"));
        }
        if !is_postgres(&instance) {
            return Err(BackendError::not_found(format!(
                "Cloud SQL instance {name} is not a PostgreSQL instance ({})",
                instance.database_version
            ))
            .with_code("NOT_FOUND"));
        }
        Ok(instance)
    }

    /// Waits for the Cloud SQL operation `op` to finish: its final state, a refusal when
    /// it ended in error, or `still_running` at the deadline.
    async fn await_operation(&self, what: &str, op: Operation) -> Result<Operation, BackendError> {
        let name = op.name.clone();
        if op.status == SqlOperationStatus::Done {
            return operation_outcome(what, op);
        }
        let operations = self.clients.sql_operations().await?;
        let project = self.project();
        let waited = poll::until_done(&self.clients, what, || {
            let name = name.clone();
            async move {
                let op = operations
                    .get()
                    .set_project(project)
                    .set_operation(name)
                    .send()
                    .await
                    .map_err(|e| classify("sql:operations.get", e, &[]))?;
                Ok((op.status == SqlOperationStatus::Done).then_some(op))
            }
        })
        .await?;
        match waited {
            Waited::Done(op) => operation_outcome(what, op),
            Waited::StillRunning => Err(poll::still_running(what, self.clients.polling())),
        }
    }

    /// Waits until the instance `name` is no longer being created (after a create
    /// whose operation could not be followed): `RUNNABLE` is ready; any state but
    /// `PENDING_CREATE` is an error.
    async fn await_runnable(&self, name: &str) -> Result<(), BackendError> {
        let what = format!("sql: creating instance {name}");
        let waited = poll::until_done(&self.clients, &what, || async {
            let instance = match self.get(name).await {
                Ok(instance) => instance,
                // Not visible yet (eventual consistency): wait.
                Err(e) if e.kind == ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            };
            match instance.state {
                SqlInstanceState::Runnable => Ok(Some(())),
                SqlInstanceState::PendingCreate => Ok(None),
                other => Err(BackendError::new(
                    ErrorKind::Other,
                    format!("Cloud SQL instance {name} ended its creation in state {other}"),
                )),
            }
        })
        .await?;
        match waited {
            Waited::Done(()) => Ok(()),
            Waited::StillRunning => Err(poll::still_running(&what, self.clients.polling())),
        }
    }

    /// `users.list`: the instance's users.
    async fn users(&self, instance: &str) -> Result<Vec<User>, BackendError> {
        let answer = self
            .clients
            .sql_users()
            .await?
            .list()
            .set_project(self.project())
            .set_instance(instance)
            .send()
            .await
            .map_err(|e| classify("sql:users.list", e, NOT_FOUND))?;
        Ok(answer.items)
    }

    /// Makes the built-in user `user` exist with `password`: `users.update` of its
    /// password when it exists, `users.insert` when it does not.
    async fn set_user_password(
        &self,
        instance: &str,
        user: &str,
        password: &SecretString,
    ) -> Result<(), BackendError> {
        let exists = self.users(instance).await?.iter().any(|u| u.name == user);
        if !exists {
            match self.insert_user(instance, user, password).await {
                Ok(()) => return Ok(()),
                // Made meanwhile, or made by an insert whose answer was lost: its
                // password is set below all the same.
                Err(e) if e.kind == ErrorKind::Conflict || e.may_have_been_sent => {
                    tracing::debug!("sql:users.insert of {user} on {instance}: {e}; updating it");
                }
                Err(e) => return Err(e),
            }
        }
        let op = self
            .clients
            .sql_users()
            .await?
            .update()
            .set_project(self.project())
            .set_instance(instance)
            .set_name(user)
            .set_body(User::new().set_name(user).set_password(password.expose()))
            .send()
            .await
            .map_err(|e| classify("sql:users.update", e, &[]))?;
        self.await_operation(&format!("sql:users.update of {user} on {instance}"), op)
            .await?;
        Ok(())
    }

    /// [`Self::set_user_password`], repeated while it fails transiently (throttled,
    /// unavailable) within the polling deadline: a create that made the instance does
    /// not give up on its administrator at the first busy answer.
    async fn set_admin_password(
        &self,
        instance: &str,
        user: &str,
        password: &SecretString,
    ) -> Result<(), BackendError> {
        let what = format!("sql: setting the password of {user} on {instance}");
        let waited = poll::until_done(&self.clients, &what, || async {
            self.set_user_password(instance, user, password)
                .await
                .map(Some)
        })
        .await?;
        match waited {
            Waited::Done(()) => Ok(()),
            Waited::StillRunning => Err(poll::still_running(&what, self.clients.polling())),
        }
    }

    /// `users.insert` of a built-in user with a password, awaited.
    async fn insert_user(
        &self,
        instance: &str,
        user: &str,
        password: &SecretString,
    ) -> Result<(), BackendError> {
        let op = self
            .clients
            .sql_users()
            .await?
            .insert()
            .set_project(self.project())
            .set_instance(instance)
            .set_body(
                User::new()
                    .set_name(user)
                    .set_password(password.expose())
                    .set_type(SqlUserType::BuiltIn),
            )
            .send()
            .await
            .map_err(|e| classify("sql:users.insert", e, &[]))?;
        self.await_operation(&format!("sql:users.insert of {user} on {instance}"), op)
            .await?;
        Ok(())
    }

    /// The reading of `instance`: with its users listed, when it is ready.
    async fn reading(
        &self,
        instance: &DatabaseInstance,
    ) -> Result<Reading<Postgres>, BackendError> {
        let admin = if instance.state == SqlInstanceState::Runnable {
            let labels = instance
                .settings
                .as_ref()
                .map(|s| labels::from_map(&s.user_labels))
                .unwrap_or_default();
            let users = self.users(&instance.name).await?;
            let admin = administrator_of(&users, &labels);
            if admin == Partial::Unknown
                && administrator(&users) == Partial::Known(ROOT_USER.into())
            {
                // Created for an administrator of its own that was never made: the run
                // stopped between the insert and users.insert. Saying nothing would
                // read as "no changes"; reading `postgres` would plan a replacement.
                return Err(BackendError::new(
                    ErrorKind::Other,
                    format!(
                        "Cloud SQL instance {} was created for an administrator of its own, \
                         which was never made (the run that created it stopped first): make \
                         the user (`gcloud sql users create NAME --instance={}`) or delete the \
                         instance, then plan again",
                        instance.name, instance.name
                    ),
                ));
            }
            admin
        } else {
            Partial::Unknown
        };
        Ok(reading_of(instance, admin))
    }

    /// A read right after a write of `name`: tried a few times on the clock while the
    /// instance is not visible yet (eventual consistency), after which `NotFound`
    /// stands.
    async fn read_after_write(
        &self,
        region: &str,
        name: &str,
    ) -> Result<Reading<Postgres>, BackendError> {
        let mut wait = self.clients.polling().first;
        let mut attempt = 1;
        loop {
            match self.get_in(region, name).await {
                Ok(instance) => return self.reading(&instance).await,
                Err(e) if e.kind == ErrorKind::NotFound && attempt < READ_ATTEMPTS => {
                    self.clients.clock().sleep(wait).await;
                    wait = (wait * 2)
                        .min(self.clients.polling().longest.max(Duration::from_millis(1)));
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// `instances.patch` (or `instances.update`, when `replace_all`) with `body`, awaited.
    async fn write_settings(
        &self,
        name: &str,
        body: DatabaseInstance,
        replace_all: bool,
    ) -> Result<(), BackendError> {
        let client = self.clients.sql_instances().await?;
        let op = if replace_all {
            client
                .update()
                .set_project(self.project())
                .set_instance(name)
                .set_body(body)
                .send()
                .await
                .map_err(|e| settings_refusal("sql:instances.update", e))?
        } else {
            client
                .patch()
                .set_project(self.project())
                .set_instance(name)
                .set_body(body)
                .send()
                .await
                .map_err(|e| settings_refusal("sql:instances.patch", e))?
        };
        let what = if replace_all {
            format!("sql:instances.update of {name}")
        } else {
            format!("sql:instances.patch of {name}")
        };
        self.await_operation(&what, op).await?;
        Ok(())
    }

    /// What `settle_uncertain` looks for: the instance `name` and its labels, `None`
    /// when it does not exist. An instance of the name in another region is reported
    /// without labels: it is not the one this create made.
    async fn find(&self, region: &str, name: &str) -> Result<Option<(RawTags, ())>, BackendError> {
        match self.get(name).await {
            Ok(instance) if instance.region == region => Ok(Some((instance_labels(&instance), ()))),
            Ok(_) => Ok(Some((RawTags::new(), ()))),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The create proper: insert, await, settle an uncertain outcome.
    async fn insert(
        &self,
        region: &str,
        name: &str,
        body: DatabaseInstance,
        marker: &Marker,
    ) -> Result<(), BackendError> {
        let what = format!("sql:instances.insert of {name}");
        let sent = self
            .clients
            .sql_instances()
            .await?
            .insert()
            .set_project(self.project())
            .set_body(body)
            .send()
            .await
            .map_err(|e| classify("sql:instances.insert", e, &[]));
        let op = match sent {
            Ok(op) => op,
            Err(e) => {
                // The insert may have been carried out: an instance of the name carrying
                // this fleet's marker is the one it made, and is awaited to be ready.
                poll::settle_uncertain(e, marker, &what, self.find(region, name)).await?;
                return self.await_runnable(name).await;
            }
        };
        match self.await_operation(&what, op).await {
            Ok(_) => Ok(()),
            Err(e) if e.may_have_been_sent => {
                // Still running at the deadline (or its polls lost): the instance is
                // there, ours or someone else's, and its creation is not finished. The
                // outcome stays uncertain; a name taken by another is a `Conflict`.
                let uncertain = e.clone();
                poll::settle_uncertain(e, marker, &what, self.find(region, name)).await?;
                Err(uncertain)
            }
            Err(e) => Err(e),
        }
    }
}

/// Whether `instance` is a PostgreSQL primary instance (not a replica).
fn is_postgres(instance: &DatabaseInstance) -> bool {
    instance
        .database_version
        .name()
        .is_some_and(|n| n.starts_with("POSTGRES_"))
        && matches!(
            instance.instance_type,
            SqlInstanceType::CloudSqlInstance | SqlInstanceType::Unspecified
        )
}

/// The refusal of a write of settings: a stale `settingsVersion` (412, someone changed
/// the instance meanwhile) is a `Conflict`, to be tried again after a new read.
fn settings_refusal(what: &str, err: google_cloud_gax::error::Error) -> BackendError {
    let stale = err.http_status_code() == Some(412);
    let out = classify(what, err, NOT_FOUND);
    if stale {
        BackendError {
            kind: ErrorKind::Conflict,
            ..out
        }
    } else {
        out
    }
}

/// A finished Cloud SQL operation's outcome: itself, or its error as a refusal.
fn operation_outcome(what: &str, op: Operation) -> Result<Operation, BackendError> {
    let Some(errors) = op.error.as_ref().filter(|e| !e.errors.is_empty()) else {
        return Ok(op);
    };
    let first = &errors.errors[0];
    let message = errors
        .errors
        .iter()
        .map(|e| {
            if e.message.is_empty() {
                e.code.clone()
            } else {
                format!("{} ({})", e.message, e.code)
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    Err(refusal(
        what,
        status_of_operation_error(&first.code),
        None,
        &message,
        &[],
    ))
}

/// The canonical status a Cloud SQL operation error code stands for: the codes are
/// Cloud SQL's own (`INSTANCE_ALREADY_EXISTS`, `QUOTA_EXCEEDED`, `INTERNAL_ERROR`, …);
/// one this crate does not recognise is left as it is (and is then `Other`).
fn status_of_operation_error(code: &str) -> &str {
    let upper = code.to_ascii_uppercase();
    if upper.contains("ALREADY_EXISTS") {
        "ALREADY_EXISTS"
    } else if upper.contains("QUOTA") {
        "RESOURCE_EXHAUSTED"
    } else if upper.contains("PERMISSION") || upper.contains("NOT_AUTHORIZED") {
        "PERMISSION_DENIED"
    } else if upper.contains("INVALID") || upper.contains("BAD_REQUEST") {
        "INVALID_ARGUMENT"
    } else if upper == "INTERNAL_ERROR" {
        "INTERNAL"
    } else {
        code
    }
}

/// Refuses an instance id Cloud SQL would refuse.
fn check_instance_id(project: &str, name: &str) -> Result<(), BackendError> {
    let valid = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !valid {
        return Err(BackendError::invalid(format!(
            "`{name}` cannot name a Cloud SQL instance: an instance id is lowercase letters, \
             digits and hyphens, starting with a letter"
        )));
    }
    let full = project.len() + 1 + name.len();
    if full > 98 {
        return Err(BackendError::invalid(format!(
            "`{name}` cannot name a Cloud SQL instance in project {project}: \
             `project:instance` is {full} characters, and Cloud SQL allows at most 98"
        )));
    }
    Ok(())
}

/// The `databaseVersion` of a declared major version (`"16"`, `"9.6"`).
fn database_version(major: &str) -> Result<SqlDatabaseVersion, BackendError> {
    let major = major.trim();
    let name = format!("POSTGRES_{}", major.replace('.', "_"));
    let version = SqlDatabaseVersion::from(name.as_str());
    let plain = !major.is_empty() && major.chars().all(|c| c.is_ascii_digit() || c == '.');
    if plain && version.value().is_some() {
        Ok(version)
    } else {
        Err(BackendError::invalid(format!(
            "Cloud SQL has no PostgreSQL major version `{major}` (known: 9.6 and 10 to 18, \
             as `engineVersion` \"16\")"
        )))
    }
}

/// The major version (`"16"`, `"9.6"`) of a PostgreSQL `databaseVersion`.
fn major_version(version: &SqlDatabaseVersion) -> Option<String> {
    version.value()?;
    let rest = version.name()?.strip_prefix("POSTGRES_")?;
    Some(rest.replace('_', "."))
}

/// The machine tier of a capacity; the serverless shape is refused.
fn tier_of(capacity: &Capacity) -> Result<&str, BackendError> {
    match capacity {
        Capacity::Classic { instance_class } => {
            let tier = instance_class.as_str();
            let valid = tier.starts_with("db-")
                && tier.len() > 3
                && tier
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if valid {
                Ok(tier)
            } else {
                Err(BackendError::invalid(format!(
                    "`{tier}` is not a Cloud SQL machine tier: tiers are named like \
                     db-f1-micro, db-g1-small, db-custom-2-7680 or db-perf-optimized-N-2"
                )))
            }
        }
        Capacity::Serverless { .. } => Err(BackendError::invalid(
            "Cloud SQL has no serverless shape: an instance has a fixed machine tier, and no \
             capacity range that scales on its own; declare `Capacity::Classic` with a tier \
             such as db-custom-2-7680",
        )),
        other => Err(BackendError::invalid(format!(
            "this build of infra-gcp does not know the capacity {other:?}"
        ))),
    }
}

/// The edition a tier belongs to.
fn edition_of(tier: &str) -> Edition {
    if tier.starts_with(PERF_OPTIMIZED) {
        Edition::EnterprisePlus
    } else {
        Edition::Enterprise
    }
}

/// The backup configuration of `days` of retention.
fn backup_configuration(days: u32) -> BackupConfiguration {
    let config = BackupConfiguration::new().set_enabled(days > 0);
    if days == 0 {
        return config;
    }
    config.set_backup_retention_settings(
        BackupRetentionSettings::new()
            .set_retained_backups(i32::try_from(days).unwrap_or(i32::MAX))
            .set_retention_unit(RetentionUnit::Count),
    )
}

/// The days of retention a backup configuration says.
fn backup_days(config: Option<&BackupConfiguration>) -> Partial<u32> {
    let Some(config) = config else {
        return Partial::Unknown;
    };
    match config.enabled {
        Some(false) => Partial::Known(0),
        Some(true) => config
            .backup_retention_settings
            .as_ref()
            .filter(|r| r.retention_unit == RetentionUnit::Count)
            .and_then(|r| r.retained_backups)
            .and_then(|n| u32::try_from(n).ok())
            .map_or(Partial::Unknown, Partial::Known),
        None => Partial::Unknown,
    }
}

/// The labels an instance carries.
fn instance_labels(instance: &DatabaseInstance) -> RawTags {
    instance
        .settings
        .as_ref()
        .map(|s| labels::from_map(&s.user_labels))
        .unwrap_or_default()
}

/// Where clients connect: the public address, the private one, the DNS name, or the
/// connection name.
fn endpoint_of(instance: &DatabaseInstance) -> String {
    let address = |kind: SqlIpAddressType| {
        instance
            .ip_addresses
            .iter()
            .find(|a| a.r#type == kind && !a.ip_address.is_empty())
            .map(|a| a.ip_address.clone())
    };
    address(SqlIpAddressType::Primary)
        .or_else(|| address(SqlIpAddressType::Private))
        .or_else(|| instance.dns_name.clone().filter(|d| !d.is_empty()))
        .unwrap_or_else(|| {
            if instance.connection_name.is_empty() {
                format!("{}:{}:{}", instance.project, instance.region, instance.name)
            } else {
                instance.connection_name.clone()
            }
        })
}

/// The administrator among an instance's users (see the module documentation).
/// The administrator of an instance whose labels are `labels`: as [`administrator`]
/// finds it, except that an instance created for an administrator of its own (the
/// `infra-administrator=user` label its insert carried) whose user is not there yet —
/// a run that stopped between the insert and `users.insert` — is unknown, never read as
/// `postgres` (which would plan the database's replacement).
fn administrator_of(users: &[User], labels: &infra_core::sdk::RawTags) -> Partial<String> {
    match administrator(users) {
        Partial::Known(name)
            if name == ROOT_USER
                && labels.get(labels::ADMIN_LABEL).map(String::as_str) == Some("user") =>
        {
            Partial::Unknown
        }
        found => found,
    }
}

fn administrator(users: &[User]) -> Partial<String> {
    let mut others = users.iter().filter(|u| {
        u.r#type == SqlUserType::BuiltIn
            && u.name != ROOT_USER
            && !u.name.starts_with(SYSTEM_PREFIX)
    });
    match (others.next(), others.next()) {
        (None, _) => Partial::Known(ROOT_USER.to_owned()),
        (Some(one), None) => Partial::Known(one.name.clone()),
        (Some(_), Some(_)) => Partial::Unknown,
    }
}

/// The reading of an instance, its administrator found already.
fn reading_of(instance: &DatabaseInstance, master_username: Partial<String>) -> Reading<Postgres> {
    let settings = instance.settings.as_ref();
    let tier = settings.map(|s| s.tier.as_str()).filter(|t| !t.is_empty());
    Reading::new(
        instance.name.clone(),
        PostgresObserved {
            id: instance.name.clone(),
            endpoint: endpoint_of(instance),
            port: PORT,
        },
        PostgresReported {
            engine_version: major_version(&instance.database_version)
                .map_or(Partial::Unknown, Partial::Known),
            capacity: tier.map_or(Partial::Unknown, |t| {
                Partial::Known(Capacity::Classic {
                    instance_class: t.to_owned(),
                })
            }),
            storage_gb: settings
                .and_then(|s| s.data_disk_size_gb)
                .and_then(|gb| u32::try_from(gb).ok())
                .map_or(Partial::Unknown, Partial::Known),
            master_username,
            master_password: Partial::Unknown,
            backup_retention_days: backup_days(
                settings.and_then(|s| s.backup_configuration.as_ref()),
            ),
            tags: Partial::Known(labels::reported(&instance_labels(instance))),
        },
    )
    // The labels are in hand: the engine decides ownership from them without asking.
    .with_raw_tags(instance_labels(instance))
}

/// The body of `instances.insert`.
fn insert_body(
    region: &str,
    name: &str,
    spec: &PostgresSettled,
    labels: &RawTags,
    root_password: Option<&SecretString>,
) -> Result<DatabaseInstance, BackendError> {
    let version = database_version(&spec.engine_version)?;
    let tier = tier_of(&spec.capacity)?;
    let mut settings = Settings::new()
        .set_tier(tier)
        .set_edition(edition_of(tier))
        .set_user_labels(labels.clone());
    if let Some(&gb) = spec.storage_gb.known() {
        settings = settings
            .set_data_disk_size_gb(i64::from(gb))
            .set_storage_auto_resize(false);
    }
    if let Some(&days) = spec.backup_retention_days.known() {
        settings = settings.set_backup_configuration(backup_configuration(days));
    }
    let mut body = DatabaseInstance::new()
        .set_name(name)
        .set_region(region)
        .set_database_version(version)
        .set_settings(settings);
    if let Some(password) = root_password {
        body = body.set_root_password(password.expose());
    }
    Ok(body)
}

/// What an update writes: the body, and whether it must replace the settings whole
/// (`instances.update`, to remove a label) rather than patch them. `None` when the
/// instance is as declared already.
fn update_body(
    current: &DatabaseInstance,
    spec: &PostgresSettled,
) -> Result<Option<(DatabaseInstance, bool)>, BackendError> {
    let name = &current.name;
    let now = current.settings.clone().unwrap_or_default();
    let mut body = DatabaseInstance::new();
    let mut settings = Settings::new();
    let mut changed = false;

    let version = database_version(&spec.engine_version)?;
    if version != current.database_version {
        let (to, from) = (
            major_version(&version),
            major_version(&current.database_version),
        );
        if let (Some(to), Some(from)) = (&to, &from)
            && version_number(to) < version_number(from)
        {
            return Err(BackendError::invalid(format!(
                "Cloud SQL instance {name} runs PostgreSQL {from}: Cloud SQL upgrades a major \
                 version in place but never downgrades one (to {to}); declare {from} or later, \
                 or a new instance"
            )));
        }
        body = body.set_database_version(version);
        changed = true;
    }

    let tier = tier_of(&spec.capacity)?;
    if tier != now.tier {
        settings = settings.set_tier(tier).set_edition(edition_of(tier));
        changed = true;
    }

    if let Some(&gb) = spec.storage_gb.known() {
        let gb = i64::from(gb);
        match now.data_disk_size_gb {
            Some(current_gb) if gb < current_gb => {
                return Err(BackendError::invalid(format!(
                    "Cloud SQL instance {name} has {current_gb} GB of storage: a disk only grows, \
                     so {gb} GB needs a new instance"
                )));
            }
            Some(current_gb) if gb == current_gb && now.storage_auto_resize == Some(false) => {}
            _ => {
                settings = settings
                    .set_data_disk_size_gb(gb)
                    .set_storage_auto_resize(false);
                changed = true;
            }
        }
    }

    if let Some(&days) = spec.backup_retention_days.known()
        && backup_days(now.backup_configuration.as_ref()) != Partial::Known(days)
    {
        settings = settings.set_backup_configuration(backup_configuration(days));
        changed = true;
    }

    let current_labels = labels::from_map(&now.user_labels);
    let mut replace_all = false;
    if let Some(declared) = spec.tags.known() {
        let wanted = labels::for_update(declared, &current_labels)?;
        if wanted != current_labels {
            replace_all = current_labels.keys().any(|k| !wanted.contains_key(k));
            settings = settings.set_user_labels(wanted);
            changed = true;
        }
    }

    if !changed {
        return Ok(None);
    }
    if replace_all {
        // `instances.update` replaces the settings whole: start from those in force,
        // with what changes, and the version read (a concurrent change is refused).
        let mut whole = now.clone();
        if !settings.tier.is_empty() {
            whole.tier = settings.tier.clone();
            whole.edition = settings.edition.clone();
        }
        if settings.data_disk_size_gb.is_some() {
            whole.data_disk_size_gb = settings.data_disk_size_gb;
            whole.storage_auto_resize = settings.storage_auto_resize;
        }
        if settings.backup_configuration.is_some() {
            whole.backup_configuration = settings.backup_configuration.clone();
        }
        whole.user_labels = settings.user_labels.clone();
        let mut full = current.clone();
        full.settings = Some(whole);
        if body.database_version != SqlDatabaseVersion::default() {
            full.database_version = body.database_version.clone();
        }
        full.root_password = String::new();
        return Ok(Some((full, true)));
    }
    Ok(Some((body.set_settings(settings), false)))
}

/// A major version as numbers, for ordering (`"9.6"` < `"10"`).
fn version_number(major: &str) -> Vec<u32> {
    major.split('.').filter_map(|p| p.parse().ok()).collect()
}

#[async_trait]
impl KindBackend<Postgres> for SqlInstances {
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let mut instances = self
            .clients
            .sql_instances()
            .await?
            .list()
            .set_project(self.project())
            .by_item();
        let mut listed = Vec::new();
        while let Some(instance) = instances.next().await {
            let instance = instance.map_err(|e| classify("sql:instances.list", e, &[]))?;
            if instance.region == region && is_postgres(&instance) {
                listed.push(Listed::new(instance.name.clone(), instance.name));
            }
        }
        listed.sort();
        listed.dedup();
        Ok(listed)
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<Postgres>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let instance = self.get_in(region, handle).await?;
        self.reading(&instance).await
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
        check_instance_id(self.project(), name)?;
        let kind_of_admin = if spec.master_username.trim() == ROOT_USER {
            "root"
        } else {
            "user"
        };
        let labels = labels::for_create(
            spec.tags.known(),
            marker,
            &[(labels::ADMIN_LABEL, kind_of_admin)],
        )?;
        // Everything refused before any call is refused here, before the password is read.
        insert_body(region, name, spec, &labels, None)?;
        let user = spec.master_username.trim();
        if user.is_empty() {
            return Err(BackendError::invalid(
                "`masterUsername` is empty: Cloud SQL needs a user name",
            ));
        }
        if user != ROOT_USER && user.starts_with(SYSTEM_PREFIX) {
            return Err(BackendError::invalid(format!(
                "`{user}` cannot be the administrator: Cloud SQL keeps user names starting \
                 with `{SYSTEM_PREFIX}` for its own"
            )));
        }
        // The password is read before anything is created: a secret that cannot be read
        // leaves nothing behind.
        let password = latest_value(&self.clients, spec.master_password.as_str()).await?;
        let root = (user == ROOT_USER).then_some(&password);
        let body = insert_body(region, name, spec, &labels, root)?;
        self.insert(region, name, body, marker).await?;
        if user != ROOT_USER {
            self.set_admin_password(name, user, &password).await?;
        }
        Ok(Written::Done(self.read_after_write(region, name).await?))
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
        let current = self.get_in(region, handle).await?;
        let change = update_body(&current, spec)?;
        let password = latest_value(&self.clients, spec.master_password.as_str()).await?;
        if let Some((body, replace_all)) = change {
            self.write_settings(handle, body, replace_all).await?;
        }
        self.set_admin_password(handle, spec.master_username.trim(), &password)
            .await?;
        Ok(Written::Done(self.read_after_write(region, handle).await?))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        self.get_in(region, handle).await?;
        let op = self
            .clients
            .sql_instances()
            .await?
            .delete()
            .set_project(self.project())
            .set_instance(handle)
            .send()
            .await
            .map_err(|e| classify("sql:instances.delete", e, NOT_FOUND))?;
        self.await_operation(&format!("sql:instances.delete of {handle}"), op)
            .await?;
        Ok(())
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        Ok(instance_labels(&self.get_in(region, handle).await?))
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let current = self.get_in(region, handle).await?;
        let what = format!("Cloud SQL instance {handle}");
        if let Some(all) = labels::marking(&instance_labels(&current), marker, &what)? {
            // `instances.patch` merges labels: the others stay as they are.
            let body = DatabaseInstance::new().set_settings(Settings::new().set_user_labels(all));
            self.write_settings(handle, body, false).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use google_cloud_sql_v1::model::IpMapping;
    use infra_core::prelude::Handle;

    fn spec() -> PostgresSettled {
        PostgresSettled {
            engine_version: "16".to_owned(),
            capacity: Capacity::Classic {
                instance_class: "db-f1-micro".to_owned(),
            },
            storage_gb: Partial::Known(20),
            master_username: "app".to_owned(),
            master_password: Handle::new("projects/p/secrets/db-password".to_owned()),
            backup_retention_days: Partial::Known(7),
            tags: Partial::Known(RawTags::from([("team".to_owned(), "web".to_owned())])),
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> RawTags {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn major_versions_map_to_database_versions_and_back() {
        let v16 = database_version("16").unwrap();
        assert_eq!(v16, SqlDatabaseVersion::Postgres16);
        assert_eq!(v16.value(), Some(272));
        assert_eq!(major_version(&v16).as_deref(), Some("16"));
        let v96 = database_version("9.6").unwrap();
        assert_eq!(v96, SqlDatabaseVersion::Postgres96);
        assert_eq!(major_version(&v96).as_deref(), Some("9.6"));
        for bad in ["99", "16.3", "", "latest", "POSTGRES_16"] {
            let err = database_version(bad).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Invalid, "{bad}");
        }
        assert!(version_number("9.6") < version_number("10"));
        assert!(major_version(&SqlDatabaseVersion::Mysql80).is_none());
    }

    #[test]
    fn instance_ids_follow_cloud_sqls_rules() {
        assert!(check_instance_id("p", "orders-db-1").is_ok());
        for bad in ["1db", "Orders", "db_1", "db.1", ""] {
            assert_eq!(
                check_instance_id("p", bad).unwrap_err().kind,
                ErrorKind::Invalid,
                "{bad}"
            );
        }
        let long = format!("a{}", "b".repeat(96));
        assert!(check_instance_id("p", &long[..96]).is_ok());
        assert!(check_instance_id("p", &long).is_err());
    }

    #[test]
    fn the_serverless_shape_and_foreign_classes_are_refused() {
        let serverless = Capacity::Serverless {
            min_capacity: infra_core::kinds::Acu::whole(1),
            max_capacity: infra_core::kinds::Acu::whole(2),
        };
        let err = tier_of(&serverless).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid);
        assert!(
            err.message.contains("no serverless shape"),
            "{}",
            err.message
        );
        let rds = Capacity::Classic {
            instance_class: "db.t4g.micro".to_owned(),
        };
        assert_eq!(tier_of(&rds).unwrap_err().kind, ErrorKind::Invalid);
        assert_eq!(edition_of("db-f1-micro"), Edition::Enterprise);
        assert_eq!(edition_of("db-custom-2-7680"), Edition::Enterprise);
        assert_eq!(edition_of("db-perf-optimized-N-2"), Edition::EnterprisePlus);
    }

    #[test]
    fn the_insert_carries_the_declaration_and_the_marker() {
        let marker = Marker::new("shop");
        let labels = labels::for_create(spec().tags.known(), &marker, &[]).unwrap();
        let body = insert_body("europe-west1", "orders", &spec(), &labels, None).unwrap();
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(json["name"], "orders");
        assert_eq!(json["region"], "europe-west1");
        assert_eq!(json["databaseVersion"], 272);
        assert_eq!(json["settings"]["tier"], "db-f1-micro");
        assert_eq!(json["settings"]["edition"], 2);
        assert_eq!(json["settings"]["dataDiskSizeGb"], "20");
        assert_eq!(json["settings"]["storageAutoResize"], false);
        assert_eq!(
            json["settings"]["userLabels"],
            serde_json::json!({"managed-by-infra": "shop", "team": "web"})
        );
        assert_eq!(
            json["settings"]["backupConfiguration"],
            serde_json::json!({"enabled": true, "backupRetentionSettings": {"retainedBackups": 7, "retentionUnit": 1}})
        );
        assert!(json.get("rootPassword").is_none());
        let root = SecretString::new("s3cret-value");
        let with_root =
            insert_body("europe-west1", "orders", &spec(), &labels, Some(&root)).unwrap();
        assert_eq!(
            serde_json::to_value(&with_root).unwrap()["rootPassword"],
            "s3cret-value"
        );
    }

    #[test]
    fn backup_retention_round_trips_and_zero_turns_backups_off() {
        for days in [0, 1, 7, 35] {
            let config = backup_configuration(days);
            assert_eq!(backup_days(Some(&config)), Partial::Known(days));
        }
        let off = serde_json::to_value(backup_configuration(0)).unwrap();
        assert_eq!(off, serde_json::json!({"enabled": false}));
        assert_eq!(backup_days(None), Partial::Unknown);
        let on_without_count = BackupConfiguration::new().set_enabled(true);
        assert_eq!(backup_days(Some(&on_without_count)), Partial::Unknown);
    }

    fn user(name: &str) -> User {
        User::new().set_name(name)
    }

    #[test]
    fn the_administrator_is_the_one_user_that_is_not_root_nor_cloud_sqls() {
        assert_eq!(
            administrator(&[user("postgres"), user("app")]),
            Partial::Known("app".to_owned())
        );
        assert_eq!(
            administrator(&[user("postgres"), user("cloudsqladmin")]),
            Partial::Known("postgres".to_owned())
        );
        assert_eq!(
            administrator(&[user("postgres"), user("app"), user("reader")]),
            Partial::Unknown
        );
        let iam = user("someone@example.com").set_type(SqlUserType::CloudIamUser);
        assert_eq!(
            administrator(&[user("postgres"), user("app"), iam]),
            Partial::Known("app".to_owned())
        );
    }

    #[test]
    fn an_administrator_not_made_yet_is_unknown_never_root() {
        let asked = |kind: &str| {
            infra_core::sdk::RawTags::from([(labels::ADMIN_LABEL.to_owned(), kind.to_owned())])
        };
        let only_root = [user("postgres")];
        assert_eq!(
            administrator_of(&only_root, &asked("user")),
            Partial::Unknown
        );
        assert_eq!(
            administrator_of(&only_root, &asked("root")),
            Partial::Known("postgres".to_owned())
        );
        // An instance made elsewhere carries no such label: as before.
        assert_eq!(
            administrator_of(&only_root, &Default::default()),
            Partial::Known("postgres".to_owned())
        );
        assert_eq!(
            administrator_of(&[user("postgres"), user("app")], &asked("user")),
            Partial::Known("app".to_owned())
        );
    }

    fn instance() -> DatabaseInstance {
        DatabaseInstance::new()
            .set_name("orders")
            .set_project("p")
            .set_region("europe-west1")
            .set_connection_name("p:europe-west1:orders")
            .set_database_version(SqlDatabaseVersion::Postgres16)
            .set_state(SqlInstanceState::Runnable)
            .set_settings(
                Settings::new()
                    .set_tier("db-f1-micro")
                    .set_data_disk_size_gb(20)
                    .set_storage_auto_resize(false)
                    .set_backup_configuration(backup_configuration(7))
                    .set_user_labels(labels(&[("managed-by-infra", "shop"), ("team", "web")])),
            )
    }

    #[test]
    fn a_read_reports_what_cloud_sql_says_and_nothing_else() {
        let read = reading_of(&instance(), Partial::Known("app".to_owned()));
        assert_eq!(read.observed().id, "orders");
        assert_eq!(read.observed().port, 5432);
        // No address yet: the connection name.
        assert_eq!(read.observed().endpoint, "p:europe-west1:orders");
        let reported = serde_json::Value::Object(read.reported().clone());
        assert_eq!(reported["engineVersion"], "16");
        assert_eq!(reported["storageGb"], 20);
        assert_eq!(reported["backupRetentionDays"], 7);
        assert_eq!(reported["masterUsername"], "app");
        assert!(reported.get("masterPassword").is_none(), "{reported}");
        assert_eq!(reported["tags"]["managed-by-infra"], "shop");
        let with_ip = instance().set_ip_addresses([
            IpMapping::new()
                .set_type(SqlIpAddressType::Outgoing)
                .set_ip_address("10.0.0.9"),
            IpMapping::new()
                .set_type(SqlIpAddressType::Primary)
                .set_ip_address("34.1.2.3"),
        ]);
        assert_eq!(endpoint_of(&with_ip), "34.1.2.3");
        let bare = DatabaseInstance::new()
            .set_name("x")
            .set_database_version(SqlDatabaseVersion::Postgres16);
        let reported = reading_of(&bare, Partial::Unknown).reported().clone();
        for field in [
            "capacity",
            "storageGb",
            "backupRetentionDays",
            "masterUsername",
        ] {
            assert!(
                reported.get(field).is_none(),
                "{field} is not said: {reported:?}"
            );
        }
    }

    #[test]
    fn an_update_sends_only_what_differs_and_patches_labels_it_keeps() {
        assert!(update_body(&instance(), &spec()).unwrap().is_none());
        let mut changed = spec();
        changed.backup_retention_days = Partial::Known(14);
        changed.tags = Partial::Known(labels(&[("team", "web"), ("tier", "gold")]));
        let (body, replace_all) = update_body(&instance(), &changed).unwrap().unwrap();
        assert!(!replace_all);
        let json = serde_json::to_value(&body).unwrap();
        assert!(json.get("databaseVersion").is_none());
        assert!(json["settings"].get("tier").is_none());
        assert!(json["settings"].get("dataDiskSizeGb").is_none());
        assert_eq!(
            json["settings"]["backupConfiguration"]["backupRetentionSettings"]["retainedBackups"],
            14
        );
        assert_eq!(
            json["settings"]["userLabels"],
            serde_json::json!({"managed-by-infra": "shop", "team": "web", "tier": "gold"})
        );
        // Undeclared fields are left as they are.
        let mut quiet = spec();
        quiet.storage_gb = Partial::Unknown;
        quiet.backup_retention_days = Partial::Unknown;
        quiet.tags = Partial::Unknown;
        assert!(update_body(&instance(), &quiet).unwrap().is_none());
    }

    #[test]
    fn removing_a_label_replaces_the_settings_whole_with_the_version_read() {
        let current = instance().set_settings(
            instance()
                .settings
                .unwrap()
                .set_settings_version(4)
                .set_user_labels(labels(&[
                    ("managed-by-infra", "shop"),
                    ("team", "web"),
                    ("old", "x"),
                ])),
        );
        let (body, replace_all) = update_body(&current, &spec()).unwrap().unwrap();
        assert!(replace_all);
        let settings = body.settings.unwrap();
        assert_eq!(settings.settings_version, Some(4));
        assert_eq!(settings.tier, "db-f1-micro");
        assert_eq!(
            labels::from_map(&settings.user_labels),
            labels(&[("managed-by-infra", "shop"), ("team", "web")])
        );
    }

    #[test]
    fn an_update_refuses_a_downgrade_and_a_shrink_and_upgrades_in_place() {
        let mut older = spec();
        older.engine_version = "15".to_owned();
        let err = update_body(&instance(), &older).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid);
        assert!(err.message.contains("never downgrades"), "{}", err.message);
        let mut smaller = spec();
        smaller.storage_gb = Partial::Known(10);
        assert_eq!(
            update_body(&instance(), &smaller).unwrap_err().kind,
            ErrorKind::Invalid
        );
        let mut newer = spec();
        newer.engine_version = "17".to_owned();
        newer.storage_gb = Partial::Known(30);
        let (body, _) = update_body(&instance(), &newer).unwrap().unwrap();
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(json["databaseVersion"], 408);
        assert_eq!(json["settings"]["dataDiskSizeGb"], "30");
    }

    #[test]
    fn a_failed_operation_is_a_refusal_naming_its_errors() {
        use google_cloud_sql_v1::model::{OperationError, OperationErrors};
        let op = Operation::new()
            .set_status(SqlOperationStatus::Done)
            .set_error(
                OperationErrors::new().set_errors([OperationError::new()
                    .set_code("INVALID_REQUEST")
                    .set_message("Invalid request: tier")]),
            );
        let err = operation_outcome("sql:x", op).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid);
        assert!(
            err.message.contains("Invalid request: tier"),
            "{}",
            err.message
        );
        let done = Operation::new().set_status(SqlOperationStatus::Done);
        assert!(operation_outcome("sql:x", done).is_ok());
        assert_eq!(status_of_operation_error("SOMETHING_NEW"), "SOMETHING_NEW");
    }
}
