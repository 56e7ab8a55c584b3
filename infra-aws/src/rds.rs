//! RDS: the `postgres` kind, in one of two shapes.
//!
//! - `Capacity::Classic` is one RDS DB instance (engine `postgres`); its handle and its
//!   name are the instance identifier.
//! - `Capacity::Serverless` is an Aurora PostgreSQL cluster scaling with Serverless v2,
//!   with one `db.serverless` instance in it (the writer, under the cluster's own
//!   identifier: instance and cluster identifiers are separate namespaces); its handle
//!   and its name are the cluster identifier.
//!
//! A handle is looked up as an instance first (one that is not a cluster's member),
//! then as a cluster. Listing answers both: the `postgres` instances not in a cluster,
//! and the `aurora-postgresql` clusters.
//!
//! What read reports when RDS does not say:
//! - `engineVersion`: RDS always answers; it is reported as the major version the spec
//!   declares (`16` from `16.3`), since a create asks for the major version and RDS
//!   picks the minor one.
//! - `capacity`: the instance's class, or the cluster's Serverless v2 range. A cluster
//!   with no Serverless v2 configuration is neither shape: `Unknown`.
//! - `storageGb`: the instance's allocated storage, the truth RDS answers (a create that
//!   does not say asks for 20 GiB). An Aurora cluster's storage grows on its own and is
//!   not a setting: `Unknown` (and a declared value is not sent).
//! - `masterUsername`, `backupRetentionDays`: RDS always answers; absent is `Unknown`.
//! - `masterPassword`: RDS never reports a password, nor where it came from. The
//!   handle (ARN) of the secret that holds it is kept in the bookkeeping tag
//!   [`PASSWORD_TAG`], written with the password, and reported from there; without the
//!   tag (a database this backend did not create), `Unknown`. The tag is kept out of the
//!   reported `tags`.
//! - `tags`: the `TagList` RDS describes (no list is the truth, an empty map). The
//!   marker is included; the engine strips it.
//!
//! The marker is part of `CreateDBInstance` / `CreateDBCluster` itself (their `Tags`),
//! and of the cluster's writer instance too.
//!
//! The master password is the value of one of the fleet's secrets, whose handle (its
//! ARN) the settled spec holds: it is read from Secrets Manager for the call that sets
//! it and never stored nor logged. A create sets it; an update sets it again only when
//! the declared secret is not the one [`PASSWORD_TAG`] names (the database was pointed
//! at another secret, or the secret was replaced), and then moves the tag.
//!
//! Moving between the classic and the serverless shapes cannot be done in place: an
//! `update` asked for it refuses with `Invalid`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_rds::client::Waiters as _;
use aws_sdk_rds::types::{DbCluster, DbInstance, ServerlessV2ScalingConfiguration, Tag};
use aws_smithy_runtime_api::client::waiters::error::WaiterError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use infra_core::kinds::{
    Acu, Capacity, Postgres, PostgresObserved, PostgresReported, PostgresSettled, Secrets,
};
use infra_core::sdk::{
    CreateArgs, DeleteArgs, KindBackend, ListArgs, MarkArgs, OwnershipArgs, ReadArgs, Reading,
    UpdateArgs, Written,
};
use infra_core::{
    prelude::{Handle, Partial},
    sdk::{BackendError, ErrorKind, Listed, RawTags},
};

use crate::clients::{Clients, RegionClients};
use crate::error::classify;
use crate::tags::{TagChanges, keep_marker, marking, tag_changes, with_marker};

/// Codes that mean the DB instance does not exist.
const NO_INSTANCE: &[&str] = &["DBInstanceNotFound", "DBInstanceNotFoundFault"];
/// Codes that mean the DB cluster does not exist.
const NO_CLUSTER: &[&str] = &["DBClusterNotFoundFault", "DBClusterNotFound"];
/// Codes that mean the tagged resource does not exist.
const NO_RESOURCE: &[&str] = &[
    "DBInstanceNotFound",
    "DBInstanceNotFoundFault",
    "DBClusterNotFoundFault",
    "DBClusterNotFound",
];
/// The engine of a classic database.
const ENGINE_CLASSIC: &str = "postgres";
/// The engine of a serverless database.
const ENGINE_AURORA: &str = "aurora-postgresql";
/// The instance class of a Serverless v2 writer.
const SERVERLESS_CLASS: &str = "db.serverless";
/// What a classic create asks for when `storageGb` is not said.
const DEFAULT_STORAGE_GB: i32 = 20;
/// The longest a create or a delete waits for RDS to finish.
const MAX_WAIT: Duration = Duration::from_secs(60 * 60);

/// A database as RDS describes it: one of the two shapes.
enum Db {
    Instance(Box<DbInstance>),
    Cluster(Box<DbCluster>),
}

impl Db {
    fn tags(&self) -> RawTags {
        let list = match self {
            Db::Instance(i) => i.tag_list(),
            Db::Cluster(c) => c.tag_list(),
        };
        raw_tags(list)
    }

    fn arn(&self) -> Option<&str> {
        match self {
            Db::Instance(i) => i.db_instance_arn(),
            Db::Cluster(c) => c.db_cluster_arn(),
        }
    }
}

/// The bookkeeping tag naming the secret (its ARN) whose value the master password was
/// last set from: RDS reports no password and no source, so this is how a read can say
/// which secret the database uses.
pub(crate) const PASSWORD_TAG: &str = "infra-master-password";

/// The secret the master password was last set from, as the bookkeeping tag says.
fn password_source(tags: &RawTags) -> Partial<Handle<Secrets>> {
    match tags.get(PASSWORD_TAG) {
        Some(arn) => Partial::Known(Handle::new(arn.clone())),
        None => Partial::Unknown,
    }
}

fn raw_tags(list: &[Tag]) -> RawTags {
    list.iter()
        .filter_map(|t| {
            Some((
                t.key()?.to_owned(),
                t.value().unwrap_or_default().to_owned(),
            ))
        })
        .collect()
}

fn tag_list(tags: &RawTags) -> Vec<Tag> {
    tags.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

/// The major version of a PostgreSQL version string: `16` from `16.3`, `9.6` from
/// `9.6.24` (before 10, the major version had two parts).
fn major_version(version: &str) -> String {
    let mut parts = version.split('.');
    let first = parts.next().unwrap_or_default();
    match (first.parse::<u32>(), parts.next()) {
        (Ok(n), Some(second)) if n < 10 => format!("{first}.{second}"),
        _ => first.to_owned(),
    }
}

/// Serverless v2 capacity in ACUs, as half units.
fn acu(value: f64) -> Option<Acu> {
    let halves = (value * 2.0).round();
    (halves >= 0.0 && halves <= f64::from(u16::MAX)).then(|| Acu::halves(halves as u16))
}

fn acu_value(acu: Acu) -> f64 {
    f64::from(acu.in_halves()) / 2.0
}

fn i32_of(value: u32, field: &str) -> Result<i32, BackendError> {
    i32::try_from(value)
        .map_err(|_| BackendError::invalid(format!("`{field}` is {value}, too large for RDS")))
}

/// The classic instance named `id`, if there is one (a cluster's member is not).
async fn find_instance(c: &RegionClients, id: &str) -> Result<Option<DbInstance>, BackendError> {
    match c
        .rds()
        .describe_db_instances()
        .db_instance_identifier(id)
        .send()
        .await
    {
        Ok(out) => Ok(out
            .db_instances()
            .iter()
            .find(|i| i.db_instance_identifier() == Some(id) && i.db_cluster_identifier().is_none())
            .cloned()),
        Err(e) => match classify("rds:DescribeDBInstances", e, NO_INSTANCE) {
            e if e.kind == ErrorKind::NotFound => Ok(None),
            e => Err(e),
        },
    }
}

/// The cluster named `id`, if there is one.
async fn find_cluster(c: &RegionClients, id: &str) -> Result<Option<DbCluster>, BackendError> {
    match c
        .rds()
        .describe_db_clusters()
        .db_cluster_identifier(id)
        .send()
        .await
    {
        Ok(out) => Ok(out
            .db_clusters()
            .iter()
            .find(|cl| cl.db_cluster_identifier() == Some(id))
            .cloned()),
        Err(e) => match classify("rds:DescribeDBClusters", e, NO_CLUSTER) {
            e if e.kind == ErrorKind::NotFound => Ok(None),
            e => Err(e),
        },
    }
}

/// The database behind `handle`, or `NotFound`.
async fn describe(c: &RegionClients, handle: &str) -> Result<Db, BackendError> {
    if let Some(instance) = find_instance(c, handle).await? {
        return Ok(Db::Instance(Box::new(instance)));
    }
    if let Some(cluster) = find_cluster(c, handle).await? {
        return Ok(Db::Cluster(Box::new(cluster)));
    }
    Err(BackendError::not_found(format!(
        "no PostgreSQL DB instance nor DB cluster {handle} in {}",
        c.region
    ))
    .with_code("DBInstanceNotFound"))
}

/// The database's read, raw tags included: the one conversion a `read` and a `list`
/// share (`DescribeDBInstances` and `DescribeDBClusters` answer the same objects to
/// both, `TagList` included).
fn reading(handle: &str, db: &Db) -> Result<Reading<Postgres>, BackendError> {
    Ok(shaped_reading(handle, db)?.with_raw_tags(db.tags()))
}

fn shaped_reading(handle: &str, db: &Db) -> Result<Reading<Postgres>, BackendError> {
    let raw = db.tags();
    let master_password = password_source(&raw);
    let mut declared = raw.clone();
    declared.remove(PASSWORD_TAG);
    let tags = Partial::Known(declared);
    match db {
        Db::Instance(i) => {
            let endpoint = i
                .endpoint()
                .and_then(|e| Some((e.address()?.to_owned(), e.port()?)));
            let Some((endpoint, port)) = endpoint else {
                return Err(BackendError::new(
                    ErrorKind::Unavailable,
                    format!(
                        "DB instance {handle} has no endpoint yet (status {}): it is still being created",
                        i.db_instance_status().unwrap_or("unknown")
                    ),
                ));
            };
            Ok(Reading::new(
                handle,
                PostgresObserved {
                    id: i.db_instance_arn().unwrap_or(handle).to_owned(),
                    endpoint,
                    port: u16::try_from(port).unwrap_or_default(),
                },
                PostgresReported {
                    engine_version: known(i.engine_version().map(major_version)),
                    capacity: known(i.db_instance_class().map(|class| Capacity::Classic {
                        instance_class: class.to_owned(),
                    })),
                    storage_gb: known(i.allocated_storage().and_then(|s| u32::try_from(s).ok())),
                    master_username: known(i.master_username().map(str::to_owned)),
                    master_password: master_password.clone(),
                    backup_retention_days: known(
                        i.backup_retention_period()
                            .and_then(|d| u32::try_from(d).ok()),
                    ),
                    tags,
                },
            ))
        }
        Db::Cluster(cl) => {
            let (Some(endpoint), Some(port)) = (cl.endpoint(), cl.port()) else {
                return Err(BackendError::new(
                    ErrorKind::Unavailable,
                    format!(
                        "DB cluster {handle} has no endpoint yet (status {}): it is still being created",
                        cl.status().unwrap_or("unknown")
                    ),
                ));
            };
            let capacity = cl.serverless_v2_scaling_configuration().and_then(|s| {
                Some(Capacity::Serverless {
                    min_capacity: acu(s.min_capacity()?)?,
                    max_capacity: acu(s.max_capacity()?)?,
                })
            });
            Ok(Reading::new(
                handle,
                PostgresObserved {
                    id: cl.db_cluster_arn().unwrap_or(handle).to_owned(),
                    endpoint: endpoint.to_owned(),
                    port: u16::try_from(port).unwrap_or_default(),
                },
                PostgresReported {
                    engine_version: known(cl.engine_version().map(major_version)),
                    capacity: known(capacity),
                    // Aurora storage grows on its own; a cluster's allocated storage is
                    // not a setting.
                    storage_gb: Partial::Unknown,
                    master_username: known(cl.master_username().map(str::to_owned)),
                    master_password,
                    backup_retention_days: known(
                        cl.backup_retention_period()
                            .and_then(|d| u32::try_from(d).ok()),
                    ),
                    tags,
                },
            ))
        }
    }
}

fn known<T>(value: Option<T>) -> Partial<T> {
    value.map_or(Partial::Unknown, Partial::Known)
}

/// A waiter's failure as a [`BackendError`].
fn waited<O, E>(what: &str, err: WaiterError<O, E>, not_found: &[&str]) -> BackendError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match err {
        WaiterError::OperationFailed(failed) => classify(what, failed.into_error(), not_found),
        WaiterError::ExceededMaxWait(_) => BackendError::new(
            ErrorKind::Unavailable,
            format!("{what}: not done after {} minutes", MAX_WAIT.as_secs() / 60),
        ),
        WaiterError::FailureState(_) => BackendError::new(
            ErrorKind::Other,
            format!("{what}: the database ended in a failed state"),
        ),
        // The waiter could not be built (or a failure this SDK version adds).
        _ => BackendError::new(ErrorKind::Other, format!("{what}: the wait could not run")),
    }
}

/// The master password: the value of the fleet's secret `handle`, for one call.
#[cfg(feature = "secretsmanager")]
async fn master_password(c: &RegionClients, handle: &str) -> Result<String, BackendError> {
    let out = c
        .secrets()
        .get_secret_value()
        .secret_id(handle)
        .send()
        .await
        .map_err(|e| {
            let e = classify("secretsmanager:GetSecretValue", e, &[]);
            if e.code.as_deref() == Some("ResourceNotFoundException") {
                BackendError::invalid(format!(
                    "the master password's secret {handle} does not exist in {}",
                    c.region
                ))
            } else {
                e
            }
        })?;
    out.secret_string().map(str::to_owned).ok_or_else(|| {
        BackendError::invalid(format!(
            "the master password's secret {handle} holds no string value"
        ))
    })
}

#[cfg(not(feature = "secretsmanager"))]
async fn master_password(_: &RegionClients, _: &str) -> Result<String, BackendError> {
    Err(BackendError::invalid(
        "a postgres database takes its master password from a secret, and this build of \
         infra-aws cannot read secrets; enable the secretsmanager feature",
    ))
}

async fn create_classic(
    c: &RegionClients,
    name: &str,
    spec: &PostgresSettled,
    instance_class: &str,
    tags: &RawTags,
) -> Result<(), BackendError> {
    let storage = match spec.storage_gb.known() {
        Some(&gb) => i32_of(gb, "storageGb")?,
        None => DEFAULT_STORAGE_GB,
    };
    let backup = spec
        .backup_retention_days
        .known()
        .map(|&d| i32_of(d, "backupRetentionDays"))
        .transpose()?;
    let password = master_password(c, spec.master_password.as_str()).await?;
    c.rds()
        .create_db_instance()
        .db_instance_identifier(name)
        .engine(ENGINE_CLASSIC)
        .engine_version(&spec.engine_version)
        .db_instance_class(instance_class)
        .allocated_storage(storage)
        .master_username(&spec.master_username)
        .master_user_password(password)
        .set_backup_retention_period(backup)
        .set_tags(Some(tag_list(tags)))
        .send()
        .await
        .map_err(|e| classify("rds:CreateDBInstance", e, &[]))?;
    c.rds()
        .wait_until_db_instance_available()
        .db_instance_identifier(name)
        .wait(MAX_WAIT)
        .await
        .map_err(|e| {
            waited(
                "rds:DescribeDBInstances (waiting for the new instance)",
                e,
                NO_INSTANCE,
            )
        })?;
    Ok(())
}

async fn create_serverless(
    c: &RegionClients,
    name: &str,
    spec: &PostgresSettled,
    (min, max): (Acu, Acu),
    tags: &RawTags,
) -> Result<(), BackendError> {
    let backup = spec
        .backup_retention_days
        .known()
        .map(|&d| i32_of(d, "backupRetentionDays"))
        .transpose()?;
    let password = master_password(c, spec.master_password.as_str()).await?;
    c.rds()
        .create_db_cluster()
        .db_cluster_identifier(name)
        .engine(ENGINE_AURORA)
        .engine_version(&spec.engine_version)
        .master_username(&spec.master_username)
        .master_user_password(password)
        .serverless_v2_scaling_configuration(scaling(min, max))
        .set_backup_retention_period(backup)
        .set_tags(Some(tag_list(tags)))
        .send()
        .await
        .map_err(|e| classify("rds:CreateDBCluster", e, &[]))?;
    c.rds()
        .create_db_instance()
        .db_instance_identifier(name)
        .db_cluster_identifier(name)
        .engine(ENGINE_AURORA)
        .db_instance_class(SERVERLESS_CLASS)
        .set_tags(Some(tag_list(tags)))
        .send()
        .await
        .map_err(|e| classify("rds:CreateDBInstance (the cluster's writer)", e, &[]))?;
    c.rds()
        .wait_until_db_instance_available()
        .db_instance_identifier(name)
        .wait(MAX_WAIT)
        .await
        .map_err(|e| {
            waited(
                "rds:DescribeDBInstances (waiting for the cluster's writer)",
                e,
                NO_INSTANCE,
            )
        })?;
    Ok(())
}

fn scaling(min: Acu, max: Acu) -> ServerlessV2ScalingConfiguration {
    ServerlessV2ScalingConfiguration::builder()
        .min_capacity(acu_value(min))
        .max_capacity(acu_value(max))
        .build()
}

/// Brings the tags of `arn` to the declared ones, keeping the marker.
async fn set_tags(
    c: &RegionClients,
    arn: &str,
    declared: &RawTags,
    current: &RawTags,
) -> Result<(), BackendError> {
    let TagChanges {
        remove: stale,
        write: changed,
    } = tag_changes(current, &keep_marker(Some(declared), current), &[]);
    if !stale.is_empty() {
        c.rds()
            .remove_tags_from_resource()
            .resource_name(arn)
            .set_tag_keys(Some(stale))
            .send()
            .await
            .map_err(|e| classify("rds:RemoveTagsFromResource", e, NO_RESOURCE))?;
    }
    if !changed.is_empty() {
        c.rds()
            .add_tags_to_resource()
            .resource_name(arn)
            .set_tags(Some(tag_list(&changed)))
            .send()
            .await
            .map_err(|e| classify("rds:AddTagsToResource", e, NO_RESOURCE))?;
    }
    Ok(())
}

async fn update_instance(
    c: &RegionClients,
    handle: &str,
    i: &DbInstance,
    spec: &PostgresSettled,
    password: Option<String>,
) -> Result<(), BackendError> {
    let Capacity::Classic { instance_class } = &spec.capacity else {
        return Err(shape_change(handle, "a classic DB instance", "serverless"));
    };
    let mut modify = c
        .rds()
        .modify_db_instance()
        .db_instance_identifier(handle)
        .apply_immediately(true);
    // A change already asked for and not yet applied is not asked for again, so that
    // the same update twice sends one modification.
    let pending = i.pending_modified_values();
    let mut changes = false;
    if let Some(password) = password {
        modify = modify.master_user_password(password);
        changes = true;
    }
    let class = pending
        .and_then(|p| p.db_instance_class())
        .or(i.db_instance_class());
    if class != Some(instance_class.as_str()) {
        modify = modify.db_instance_class(instance_class);
        changes = true;
    }
    let version = pending
        .and_then(|p| p.engine_version())
        .or(i.engine_version());
    if version.map(major_version).as_deref() != Some(spec.engine_version.as_str()) {
        modify = modify
            .engine_version(&spec.engine_version)
            .allow_major_version_upgrade(true);
        changes = true;
    }
    if let Some(&gb) = spec.storage_gb.known() {
        let gb = i32_of(gb, "storageGb")?;
        if pending
            .and_then(|p| p.allocated_storage())
            .or(i.allocated_storage())
            != Some(gb)
        {
            modify = modify.allocated_storage(gb);
            changes = true;
        }
    }
    if let Some(&days) = spec.backup_retention_days.known() {
        let days = i32_of(days, "backupRetentionDays")?;
        let current = pending
            .and_then(|p| p.backup_retention_period())
            .or(i.backup_retention_period());
        if current != Some(days) {
            modify = modify.backup_retention_period(days);
            changes = true;
        }
    }
    if changes {
        modify
            .send()
            .await
            .map_err(|e| classify("rds:ModifyDBInstance", e, NO_INSTANCE))?;
    }
    Ok(())
}

async fn update_cluster(
    c: &RegionClients,
    handle: &str,
    cl: &DbCluster,
    spec: &PostgresSettled,
    password: Option<String>,
) -> Result<(), BackendError> {
    let Capacity::Serverless {
        min_capacity,
        max_capacity,
    } = &spec.capacity
    else {
        return Err(shape_change(
            handle,
            "a serverless Aurora cluster",
            "classic",
        ));
    };
    let mut modify = c
        .rds()
        .modify_db_cluster()
        .db_cluster_identifier(handle)
        .apply_immediately(true);
    let mut changes = false;
    if let Some(password) = password {
        modify = modify.master_user_password(password);
        changes = true;
    }
    let current = cl
        .serverless_v2_scaling_configuration()
        .and_then(|s| Some((acu(s.min_capacity()?)?, acu(s.max_capacity()?)?)));
    if current != Some((*min_capacity, *max_capacity)) {
        modify = modify.serverless_v2_scaling_configuration(scaling(*min_capacity, *max_capacity));
        changes = true;
    }
    if cl.engine_version().map(major_version).as_deref() != Some(spec.engine_version.as_str()) {
        modify = modify
            .engine_version(&spec.engine_version)
            .allow_major_version_upgrade(true);
        changes = true;
    }
    if let Some(&days) = spec.backup_retention_days.known() {
        let days = i32_of(days, "backupRetentionDays")?;
        if cl.backup_retention_period() != Some(days) {
            modify = modify.backup_retention_period(days);
            changes = true;
        }
    }
    if changes {
        modify
            .send()
            .await
            .map_err(|e| classify("rds:ModifyDBCluster", e, NO_CLUSTER))?;
    }
    Ok(())
}

fn shape_change(handle: &str, is: &str, wanted: &str) -> BackendError {
    BackendError::invalid(format!(
        "{handle} is {is}, and the declaration asks for the {wanted} shape: moving between \
         the classic and the serverless shapes is a replace, which an update cannot do \
         (delete the database and create it again)"
    ))
}

async fn delete_instance(c: &RegionClients, id: &str, member: bool) -> Result<(), BackendError> {
    let mut delete = c.rds().delete_db_instance().db_instance_identifier(id);
    // Snapshots and automated backups of a cluster's member belong to the cluster.
    if !member {
        delete = delete
            .skip_final_snapshot(true)
            .delete_automated_backups(true);
    }
    delete
        .send()
        .await
        .map_err(|e| classify("rds:DeleteDBInstance", e, NO_INSTANCE))?;
    Ok(())
}

async fn wait_instance_deleted(c: &RegionClients, id: &str) -> Result<(), BackendError> {
    c.rds()
        .wait_until_db_instance_deleted()
        .db_instance_identifier(id)
        .wait(MAX_WAIT)
        .await
        .map_err(|e| waited("rds:DescribeDBInstances (waiting for the deletion)", e, &[]))?;
    Ok(())
}

/// Deletes the automated snapshots a deleted cluster left behind. AWS removes them with
/// the cluster when `DeleteAutomatedBackups` is set, so that this finds nothing there;
/// a stand-in that keeps them (moto does) would make the next cluster of the same name,
/// created within the same minute, fail on the automated snapshot's name. What was asked
/// for is that they go, so a failure here is logged, not returned: the cluster is gone.
async fn remove_left_automated_snapshots(c: &RegionClients, cluster: &str) {
    let left = match c
        .rds()
        .describe_db_cluster_snapshots()
        .db_cluster_identifier(cluster)
        .snapshot_type("automated")
        .send()
        .await
    {
        Ok(out) => out
            .db_cluster_snapshots()
            .iter()
            .filter(|s| s.db_cluster_identifier() == Some(cluster))
            .filter_map(|s| s.db_cluster_snapshot_identifier().map(str::to_owned))
            .collect::<Vec<_>>(),
        Err(e) => {
            let e = classify("rds:DescribeDBClusterSnapshots", e, &[]);
            tracing::warn!(cluster, error = %e, "could not look for automated snapshots left by a deleted cluster");
            return;
        }
    };
    for snapshot in left {
        if let Err(e) = c
            .rds()
            .delete_db_cluster_snapshot()
            .db_cluster_snapshot_identifier(&snapshot)
            .send()
            .await
        {
            let e = classify(
                "rds:DeleteDBClusterSnapshot",
                e,
                &["DBClusterSnapshotNotFoundFault"],
            );
            if e.kind != ErrorKind::NotFound {
                tracing::warn!(cluster, snapshot, error = %e, "could not delete an automated snapshot left by a deleted cluster");
            }
        }
    }
}

/// `postgres`, as an RDS instance or an Aurora Serverless v2 cluster.
pub(crate) struct RdsDatabases {
    clients: Arc<Clients>,
}

impl RdsDatabases {
    /// The kind, reaching AWS through `clients` (one set per region, made on first use).
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        RdsDatabases { clients }
    }
}

#[async_trait]
impl KindBackend<Postgres> for RdsDatabases {
    /// `DescribeDBInstances` and `DescribeDBClusters` answer each database whole, its
    /// `TagList` included.
    fn lists_complete(&self) -> bool {
        true
    }

    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let c = &self.clients.region(region);
        let instances = c
            .rds()
            .describe_db_instances()
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| classify("rds:DescribeDBInstances", e, &[]))?;
        let clusters = c
            .rds()
            .describe_db_clusters()
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| classify("rds:DescribeDBClusters", e, &[]))?;
        let classic = instances
            .into_iter()
            .filter(|i| i.engine() == Some(ENGINE_CLASSIC) && i.db_cluster_identifier().is_none())
            .filter_map(|i| {
                Some((
                    i.db_instance_identifier()?.to_owned(),
                    Db::Instance(i.into()),
                ))
            });
        let serverless = clusters
            .into_iter()
            .filter(|cl| cl.engine() == Some(ENGINE_AURORA))
            .filter_map(|cl| {
                Some((
                    cl.db_cluster_identifier()?.to_owned(),
                    Db::Cluster(cl.into()),
                ))
            });
        let mut listed: Vec<Listed> = classic
            .chain(serverless)
            .map(|(id, db)| {
                let found = Listed::new(id.clone(), id.clone());
                // One still being made has no endpoint yet: handed over bare, its read
                // says so.
                match reading(&id, &db) {
                    Ok(reading) => found.with_reading(reading),
                    Err(_) => found,
                }
            })
            .collect();
        // An instance and a cluster of one identifier: the instance, as `read` finds it
        // first (the sort is stable, and instances come first).
        listed.sort();
        listed.dedup();
        Ok(listed)
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<Postgres>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        reading(handle, &describe(c, handle).await?)
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
        let c = &self.clients.region(region);
        // Instances and clusters are separate namespaces in RDS; a postgres name is one.
        if find_instance(c, name).await?.is_some() || find_cluster(c, name).await?.is_some() {
            return Err(BackendError::new(
                ErrorKind::Conflict,
                format!(
                    "a DB instance or DB cluster named {name} already exists in {}",
                    c.region
                ),
            )
            .with_code("DBInstanceAlreadyExists"));
        }
        let mut tags = with_marker(spec.tags.known(), marker);
        tags.insert(
            PASSWORD_TAG.to_owned(),
            spec.master_password.as_str().to_owned(),
        );
        match &spec.capacity {
            Capacity::Classic { instance_class } => {
                create_classic(c, name, spec, instance_class, &tags).await?
            }
            Capacity::Serverless {
                min_capacity,
                max_capacity,
            } => create_serverless(c, name, spec, (*min_capacity, *max_capacity), &tags).await?,
            other => {
                return Err(BackendError::invalid(format!(
                    "this build of infra-aws does not know the capacity {other:?}"
                )));
            }
        }
        let read = self.read(ReadArgs::new(region, name)).await?;
        Ok(Written::Done(read))
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
        let c = &self.clients.region(region);
        let db = describe(c, handle).await?;
        let current = db.tags();
        // The password is set again only when the database was pointed at another
        // secret than the one it was last set from.
        let source = spec.master_password.as_str();
        let password = match current.get(PASSWORD_TAG) {
            Some(last) if last == source => None,
            _ => Some(master_password(c, source).await?),
        };
        match &db {
            Db::Instance(i) => update_instance(c, handle, i, spec, password).await?,
            Db::Cluster(cl) => update_cluster(c, handle, cl, spec, password).await?,
        }
        let arn = db.arn().ok_or_else(|| {
            BackendError::new(ErrorKind::Other, format!("RDS named no ARN for {handle}"))
        })?;
        let mut wanted = match spec.tags.known() {
            Some(declared) => declared.clone(),
            None => {
                let mut kept = current.clone();
                kept.remove(PASSWORD_TAG);
                kept
            }
        };
        wanted.insert(PASSWORD_TAG.to_owned(), source.to_owned());
        set_tags(c, arn, &wanted, &current).await?;
        let read = self.read(ReadArgs::new(region, handle)).await?;
        Ok(Written::Done(read))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        match describe(c, handle).await? {
            Db::Instance(_) => {
                delete_instance(c, handle, false).await?;
                wait_instance_deleted(c, handle).await
            }
            Db::Cluster(cl) => {
                let members: Vec<String> = cl
                    .db_cluster_members()
                    .iter()
                    .filter_map(|m| m.db_instance_identifier().map(str::to_owned))
                    .collect();
                for member in &members {
                    match delete_instance(c, member, true).await {
                        Err(e) if e.kind == ErrorKind::NotFound => {}
                        other => other?,
                    }
                }
                c.rds()
                    .delete_db_cluster()
                    .db_cluster_identifier(handle)
                    .skip_final_snapshot(true)
                    .delete_automated_backups(true)
                    .send()
                    .await
                    .map_err(|e| classify("rds:DeleteDBCluster", e, NO_CLUSTER))?;
                for member in &members {
                    wait_instance_deleted(c, member).await?;
                }
                c.rds()
                    .wait_until_db_cluster_deleted()
                    .db_cluster_identifier(handle)
                    .wait(MAX_WAIT)
                    .await
                    .map_err(|e| {
                        waited("rds:DescribeDBClusters (waiting for the deletion)", e, &[])
                    })?;
                remove_left_automated_snapshots(c, handle).await;
                Ok(())
            }
        }
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        Ok(describe(c, handle).await?.tags())
    }

    /// Marks the DB instance, or the DB cluster alone: a cluster's member instances are
    /// reached only through the cluster (its `ownership` reads the cluster's tags), and
    /// keep their tags as they were.
    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let c = &self.clients.region(region);
        let db = describe(c, handle).await?;
        if let Some(pair) = marking(&db.tags(), marker, &format!("database {handle}"))? {
            let arn = db.arn().ok_or_else(|| {
                BackendError::new(ErrorKind::Other, format!("RDS named no ARN for {handle}"))
            })?;
            // AddTagsToResource adds to the database's tags; the others stay as they are.
            c.rds()
                .add_tags_to_resource()
                .resource_name(arn)
                .set_tags(Some(tag_list(&pair)))
                .send()
                .await
                .map_err(|e| classify("rds:AddTagsToResource", e, NO_RESOURCE))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_major_version_is_what_the_spec_declares() {
        assert_eq!(major_version("16.3"), "16");
        assert_eq!(major_version("16"), "16");
        assert_eq!(major_version("9.6.24"), "9.6");
    }

    #[test]
    fn capacities_round_trip_through_acus() {
        for halves in [1, 2, 3, 8, 512] {
            assert_eq!(
                acu(acu_value(Acu::halves(halves))),
                Some(Acu::halves(halves))
            );
        }
    }
}
