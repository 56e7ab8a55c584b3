//! The Cloud SQL Admin API v1 stand-in, as `google-cloud-sql-v1` calls it: PostgreSQL
//! instances, their built-in users, and Cloud SQL's own operations (`sql#operation`).
//!
//! Served:
//!
//! | call | path |
//! |---|---|
//! | `instances.insert` / `list` | `POST` / `GET /v1/projects/{p}/instances` |
//! | `instances.get` / `patch` / `update` / `delete` | `GET` / `PATCH` / `PUT` / `DELETE /v1/projects/{p}/instances/{i}` |
//! | `users.insert` / `list` / `update` | `POST` / `GET` / `PUT /v1/projects/{p}/instances/{i}/users` (`update` names the user with `?name=`) |
//! | `operations.get` | `GET /v1/projects/{p}/operations/{op}` |
//!
//! Every write answers an operation `{kind: "sql#operation", name, status: PENDING,
//! operationType, targetId, targetLink, …}` that is `RUNNING` until the stand-in's
//! settling time has passed on its clock, then `DONE`, whether or not anyone looks at
//! it: what it does to its instance happens then, and a read or a list of the instance
//! sees it. Enums are answered as integers when the client asks for
//! `enum-encoding=int` (as the official clients do), as names otherwise; both are
//! accepted. 64-bit integers are strings.
//!
//! An instance is `PENDING_CREATE` until its create operation is done, then `RUNNABLE`;
//! a deleted one is `PENDING_DELETE` until its delete operation is done, then gone. It
//! has a `PRIMARY` address, the connection name `project:region:name`, a self link, a
//! create time, an etag, and `settings.settingsVersion`, which every change of settings
//! increases. Its users are `postgres` and those inserted; passwords (`rootPassword`,
//! a user's `password`) are accepted and never kept nor answered.
//!
//! Rules enforced, as Cloud SQL does:
//! - an instance id is lowercase letters, digits and hyphens starting with a letter, and
//!   `project:id` is at most 98 characters (400); a name taken is 409 `ALREADY_EXISTS`;
//!   a missing instance, user or operation is 404 `NOT_FOUND`; another project is 403;
//! - a write to an instance that has an operation still running is 409 ("another
//!   operation was already in progress");
//! - `databaseVersion` is required and must be a PostgreSQL version (this stand-in
//!   serves no MySQL nor SQL Server: 400), and only goes up (a major-version upgrade
//!   through `patch` or `update`; a downgrade is 400);
//! - `settings.tier` is required; the edition defaults to Enterprise Plus for PostgreSQL
//!   16 and later and to Enterprise before, as Google documents; Enterprise accepts
//!   `db-f1-micro`, `db-g1-small` and `db-custom-N-M` (N 1 or an even number up to 96; M
//!   MiB, a multiple of 256, from 3840 and 0.9 GiB to 6.5 GiB per vCPU), Enterprise
//!   Plus accepts `db-perf-optimized-N-{2,4,8,16,32,48,64,80,96,128}`: any other tier is
//!   400;
//! - `settings.dataDiskSizeGb` is 10 to 65536 (default 10) and never decreases (400);
//! - `backupRetentionSettings.retainedBackups` is 1 to 365 (400), counted (`COUNT`);
//! - `settings.userLabels` follow the label rules (keys of lowercase letters, digits,
//!   `_` and `-` starting with a letter, values of the same; both at most 63: 400);
//! - `patch` merges what it is given into the settings (labels included: a label is
//!   removed only by sending it as `null`); `update` (PUT) replaces the settings whole
//!   and needs the current `settings.settingsVersion` (400 without it, 412 "Condition
//!   does not match." when stale); `patch` checks one too when given;
//! - `users.list` pages are not cut; `instances.list` pages hold `maxResults` instances
//!   (2 when not given) and refuse a `filter` (not served) with 400.
//!
//! Not modelled: operations that end in error, MySQL and SQL Server, replicas, the
//! reservation of a deleted instance's name (Cloud SQL keeps it for about a week),
//! restarts, maintenance, private networking, and automatic storage growth.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::State;
use super::wire::{Reply, Req, int64};

/// The page size of `instances.list` when the client names none.
const PAGE: usize = 2;

/// What the stand-in holds of this service.
#[derive(Debug, Default)]
pub(crate) struct Sql {
    instances: BTreeMap<String, Instance>,
    operations: BTreeMap<String, Op>,
    next: u64,
}

/// One instance: its body as answered (enums as names), and its users.
#[derive(Debug)]
struct Instance {
    body: Value,
    users: BTreeMap<String, Value>,
}

/// What finishing an operation does to its instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effect {
    None,
    Runnable,
    Remove,
}

/// One operation in flight (or done).
#[derive(Debug)]
struct Op {
    body: Value,
    /// When it is done, on the stand-in's clock.
    due: Duration,
    done: bool,
    instance: String,
    effect: Effect,
}

// Enum tables: name and integer, as `google-cloud-sql-v1` 2.12 numbers them.
const DATABASE_VERSION: &[(&str, i64)] = &[
    ("POSTGRES_9_6", 9),
    ("POSTGRES_10", 18),
    ("POSTGRES_11", 10),
    ("POSTGRES_12", 19),
    ("POSTGRES_13", 23),
    ("POSTGRES_14", 110),
    ("POSTGRES_15", 172),
    ("POSTGRES_16", 272),
    ("POSTGRES_17", 408),
    ("POSTGRES_18", 557),
];
const STATE: &[(&str, i64)] = &[
    ("RUNNABLE", 1),
    ("SUSPENDED", 2),
    ("PENDING_DELETE", 3),
    ("PENDING_CREATE", 4),
    ("MAINTENANCE", 5),
    ("FAILED", 6),
];
const INSTANCE_TYPE: &[(&str, i64)] = &[("CLOUD_SQL_INSTANCE", 1)];
const BACKEND_TYPE: &[(&str, i64)] = &[("SECOND_GEN", 2)];
const EDITION: &[(&str, i64)] = &[("ENTERPRISE", 2), ("ENTERPRISE_PLUS", 3)];
const AVAILABILITY: &[(&str, i64)] = &[("ZONAL", 1), ("REGIONAL", 2)];
const PRICING: &[(&str, i64)] = &[("PACKAGE", 1), ("PER_USE", 2)];
const ACTIVATION: &[(&str, i64)] = &[("ALWAYS", 1), ("NEVER", 2)];
const DISK_TYPE: &[(&str, i64)] = &[("PD_SSD", 1), ("PD_HDD", 2)];
const RETENTION_UNIT: &[(&str, i64)] = &[("COUNT", 1)];
const SSL_MODE: &[(&str, i64)] = &[
    ("ALLOW_UNENCRYPTED_AND_ENCRYPTED", 1),
    ("ENCRYPTED_ONLY", 2),
    ("TRUSTED_CLIENT_CERTIFICATE_REQUIRED", 3),
];
const IP_TYPE: &[(&str, i64)] = &[("PRIMARY", 1), ("OUTGOING", 2), ("PRIVATE", 3)];
const OP_STATUS: &[(&str, i64)] = &[("PENDING", 1), ("RUNNING", 2), ("DONE", 3)];
const OP_TYPE: &[(&str, i64)] = &[
    ("CREATE", 3),
    ("UPDATE", 4),
    ("DELETE", 5),
    ("CREATE_USER", 19),
    ("UPDATE_USER", 21),
    ("MAJOR_VERSION_UPGRADE", 54),
];
const USER_TYPE: &[(&str, i64)] = &[
    ("BUILT_IN", 0),
    ("CLOUD_IAM_USER", 1),
    ("CLOUD_IAM_SERVICE_ACCOUNT", 2),
];

/// The enum fields of an instance, by JSON pointer, with their tables.
const INSTANCE_ENUMS: &[(&str, &[(&str, i64)])] = &[
    ("/databaseVersion", DATABASE_VERSION),
    ("/state", STATE),
    ("/instanceType", INSTANCE_TYPE),
    ("/backendType", BACKEND_TYPE),
    ("/settings/edition", EDITION),
    ("/settings/availabilityType", AVAILABILITY),
    ("/settings/pricingPlan", PRICING),
    ("/settings/activationPolicy", ACTIVATION),
    ("/settings/dataDiskType", DISK_TYPE),
    (
        "/settings/backupConfiguration/backupRetentionSettings/retentionUnit",
        RETENTION_UNIT,
    ),
    ("/settings/ipConfiguration/sslMode", SSL_MODE),
];

/// The name of an enum value given as a name or an integer; `Err` for a value the
/// table does not hold.
fn enum_name(value: &Value, table: &[(&'static str, i64)]) -> Result<&'static str, String> {
    let found = match value {
        Value::String(s) => table.iter().find(|(n, _)| n == s),
        Value::Number(n) => n.as_i64().and_then(|i| table.iter().find(|(_, v)| *v == i)),
        _ => None,
    };
    found
        .map(|(n, _)| *n)
        .ok_or_else(|| format!("Invalid value {value}"))
}

/// Rewrites the enum at `pointer` of `body` as an integer, when `int`.
fn encode(body: &mut Value, pointer: &str, table: &[(&str, i64)], int: bool) {
    if !int {
        return;
    }
    if let Some(v) = body.pointer_mut(pointer)
        && let Some(i) = v
            .as_str()
            .and_then(|s| table.iter().find(|(n, _)| *n == s))
            .map(|(_, i)| *i)
    {
        *v = json!(i);
    }
}

/// Whether the client asked for enums as integers.
fn int_enums(req: &Req<'_>) -> bool {
    req.query
        .get("$alt")
        .is_some_and(|a| a.contains("enum-encoding=int"))
}

fn instance_json(body: &Value, int: bool) -> Value {
    let mut out = body.clone();
    for (pointer, table) in INSTANCE_ENUMS {
        encode(&mut out, pointer, table, int);
    }
    if int && let Some(ips) = out.get_mut("ipAddresses").and_then(Value::as_array_mut) {
        for ip in ips {
            encode(ip, "/type", IP_TYPE, true);
        }
    }
    out
}

fn op_json(body: &Value, int: bool) -> Value {
    let mut out = body.clone();
    encode(&mut out, "/status", OP_STATUS, int);
    encode(&mut out, "/operationType", OP_TYPE, int);
    out
}

fn user_json(body: &Value, int: bool) -> Value {
    let mut out = body.clone();
    if out.get("type") == Some(&json!("BUILT_IN")) {
        // The default value is left out, as Google's JSON does.
        if let Some(o) = out.as_object_mut() {
            o.remove("type");
        }
    }
    encode(&mut out, "/type", USER_TYPE, int);
    out
}

/// Serves a request of this service, or `None` when the path is not one of its own.
pub(crate) fn route(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let parts = req.under("/v1/projects")?;
    let (project, rest) = parts.split_first()?;
    let rest: Vec<&str> = rest.to_vec();
    let known = matches!(
        (req.method, rest.as_slice()),
        ("GET" | "POST", ["instances"])
            | ("GET" | "PATCH" | "PUT" | "DELETE", ["instances", _])
            | ("GET" | "POST" | "PUT", ["instances", _, "users"])
            | ("GET", ["operations", _])
    );
    if !known {
        return None;
    }
    if !state.is_project(project) {
        return Some(State::foreign_project(project));
    }
    let int = int_enums(req);
    Some(match (req.method, rest.as_slice()) {
        ("POST", ["instances"]) => insert(state, req, int),
        ("GET", ["instances"]) => list(state, req, int),
        ("GET", ["instances", name]) => get(state, name, int),
        ("PATCH", ["instances", name]) => write(state, req, name, false, int),
        ("PUT", ["instances", name]) => write(state, req, name, true, int),
        ("DELETE", ["instances", name]) => delete(state, name, int),
        ("GET", ["instances", name, "users"]) => users_list(state, name, int),
        ("POST", ["instances", name, "users"]) => users_insert(state, req, name, int),
        ("PUT", ["instances", name, "users"]) => users_update(state, req, name, int),
        ("GET", ["operations", op]) => operation(state, op, int),
        _ => return None,
    })
}

impl Sql {
    /// Whether `instance` has an operation still running.
    fn busy(&self, instance: &str) -> bool {
        self.operations
            .values()
            .any(|op| op.instance == instance && !op.done)
    }

    /// Ends every operation whose time has come by `now` (`stamp`, in RFC 3339),
    /// carrying out what it does to its instance; the others are running.
    pub(crate) fn settle(&mut self, now: Duration, stamp: &str) {
        let mut effects = Vec::new();
        for op in self.operations.values_mut().filter(|op| !op.done) {
            if op.due > now {
                op.body["status"] = json!("RUNNING");
                continue;
            }
            op.done = true;
            op.body["status"] = json!("DONE");
            op.body["endTime"] = json!(stamp);
            effects.push((op.instance.clone(), op.effect));
        }
        for (instance, effect) in effects {
            match effect {
                Effect::None => {}
                Effect::Runnable => {
                    if let Some(i) = self.instances.get_mut(&instance) {
                        i.body["state"] = json!("RUNNABLE");
                    }
                }
                Effect::Remove => {
                    self.instances.remove(&instance);
                }
            }
        }
    }

    /// Starts an operation of `kind` on `instance`; answers it as first seen.
    fn start(
        &mut self,
        project: &str,
        instance: &str,
        kind: &str,
        effect: Effect,
        (now, due): (&str, Duration),
    ) -> Value {
        self.next += 1;
        let n = self.next;
        let name = format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            0x5eed_0000 + n,
            n % 0x1_0000,
            n % 0x1000,
            (n * 7) % 0x1000,
            n
        );
        let body = json!({
            "kind": "sql#operation",
            "name": name,
            "selfLink": format!("https://sqladmin.googleapis.com/v1/projects/{project}/operations/{name}"),
            "targetLink": self_link(project, instance),
            "targetId": instance,
            "targetProject": project,
            "status": "PENDING",
            "operationType": kind,
            "user": "stand-in@example.com",
            "insertTime": now,
            "startTime": now,
        });
        self.operations.insert(
            name,
            Op {
                body: body.clone(),
                due,
                done: false,
                instance: instance.to_owned(),
                effect,
            },
        );
        body
    }
}

fn self_link(project: &str, instance: &str) -> String {
    format!("https://sqladmin.googleapis.com/v1/projects/{project}/instances/{instance}")
}

fn missing(name: &str) -> Reply {
    Reply::error(
        404,
        "NOT_FOUND",
        format!("The Cloud SQL instance {name} does not exist."),
    )
}

fn busy(name: &str) -> Reply {
    Reply::error(
        409,
        "ABORTED",
        format!(
            "Operation failed because another operation was already in progress on instance \
             {name}."
        ),
    )
}

/// Whether `name` is a valid instance id in `project`.
fn valid_id(project: &str, name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && project.len() + 1 + name.len() <= 98
}

/// A major version as numbers (`POSTGRES_9_6` → `[9, 6]`).
fn major(version: &str) -> Vec<u32> {
    version
        .trim_start_matches("POSTGRES_")
        .split('_')
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Whether `tier` is one of `edition`'s.
fn valid_tier(tier: &str, edition: &str) -> bool {
    if edition == "ENTERPRISE_PLUS" {
        return tier
            .strip_prefix("db-perf-optimized-N-")
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|n| [2, 4, 8, 16, 32, 48, 64, 80, 96, 128].contains(&n));
    }
    if tier == "db-f1-micro" || tier == "db-g1-small" {
        return true;
    }
    let Some(shape) = tier.strip_prefix("db-custom-") else {
        return false;
    };
    let Some((cpus, mib)) = shape.split_once('-') else {
        return false;
    };
    let (Ok(cpus), Ok(mib)) = (cpus.parse::<u64>(), mib.parse::<u64>()) else {
        return false;
    };
    (cpus == 1 || (cpus % 2 == 0 && (2..=96).contains(&cpus)))
        && mib % 256 == 0
        && mib >= 3840
        && mib * 10 >= cpus * 1024 * 9
        && mib * 2 <= cpus * 1024 * 13
}

fn valid_label(text: &str, key: bool) -> bool {
    text.len() <= 63
        && (!key || text.starts_with(|c: char| c.is_ascii_lowercase()))
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// Merges `patch` into `target`: objects field by field, `null` removing a field,
/// anything else replacing it.
fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(target), Some(patch)) => {
            for (k, v) in patch {
                if v.is_null() {
                    target.remove(k);
                } else if v.is_object() && target.get(k).is_some_and(Value::is_object) {
                    if let Some(t) = target.get_mut(k) {
                        merge(t, v);
                    }
                } else {
                    target.insert(k.clone(), v.clone());
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

/// The settings as kept: `given` checked and completed with Cloud SQL's defaults, for a
/// `version`, a disk that was `disk_before` GB (on a change), `settings_version`, in
/// `zone`.
fn settings(
    given: &Value,
    version: &str,
    disk_before: Option<i64>,
    settings_version: i64,
    zone: &str,
) -> Result<Value, Reply> {
    let Some(given) = given.as_object() else {
        return Err(Reply::invalid(
            "Invalid request: settings are required (settings.tier).",
        ));
    };
    let mut out: Map<String, Value> = given.clone();
    let bad = |field: &str, why: String| {
        Reply::invalid(format!("Invalid value at 'settings.{field}': {why}"))
    };

    let default_edition = if major(version).first().is_some_and(|m| *m >= 16) {
        "ENTERPRISE_PLUS"
    } else {
        "ENTERPRISE"
    };
    let edition = match given.get("edition") {
        None | Some(Value::Null) => default_edition,
        Some(v) if v == &json!(0) || v == &json!("EDITION_UNSPECIFIED") => default_edition,
        Some(v) => enum_name(v, EDITION).map_err(|e| bad("edition", e))?,
    };
    out.insert("edition".into(), json!(edition));

    let tier = given.get("tier").and_then(Value::as_str).unwrap_or("");
    if tier.is_empty() {
        return Err(Reply::invalid(
            "Invalid request: settings.tier is required.",
        ));
    }
    if !valid_tier(tier, edition) {
        return Err(Reply::invalid(format!(
            "Invalid request: Invalid Tier ({tier}) for ({edition}) Edition."
        )));
    }

    let disk = match given.get("dataDiskSizeGb") {
        None | Some(Value::Null) => disk_before.unwrap_or(10),
        Some(v) => int64(Some(v))
            .ok_or_else(|| bad("data_disk_size_gb", format!("{v} is not an int64")))?,
    };
    if !(10..=65_536).contains(&disk) {
        return Err(Reply::invalid(format!(
            "Invalid request: the disk size must be between 10 and 65536 GB, not {disk}."
        )));
    }
    if let Some(before) = disk_before
        && disk < before
    {
        return Err(Reply::invalid(format!(
            "Invalid request: the disk size cannot be decreased (from {before} GB to {disk} GB)."
        )));
    }
    out.insert("dataDiskSizeGb".into(), json!(disk.to_string()));
    if !out.contains_key("storageAutoResize") {
        out.insert("storageAutoResize".into(), json!(true));
    }
    out.insert(
        "storageAutoResizeLimit".into(),
        json!(
            int64(given.get("storageAutoResizeLimit"))
                .unwrap_or(0)
                .to_string()
        ),
    );

    for (field, table, default) in [
        ("availabilityType", AVAILABILITY, "ZONAL"),
        ("pricingPlan", PRICING, "PER_USE"),
        ("activationPolicy", ACTIVATION, "ALWAYS"),
        ("dataDiskType", DISK_TYPE, "PD_SSD"),
    ] {
        let name = match given.get(field) {
            None | Some(Value::Null) => default,
            Some(v) if v == &json!(0) => default,
            Some(v) => enum_name(v, table).map_err(|e| bad(field, e))?,
        };
        out.insert(field.into(), json!(name));
    }

    let mut backup = given
        .get("backupConfiguration")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let enabled = backup
        .get("enabled")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let retention = backup
        .get("backupRetentionSettings")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let retained = match retention.get("retainedBackups") {
        None | Some(Value::Null) => 7,
        Some(v) => v.as_i64().ok_or_else(|| {
            bad(
                "backup_configuration.backup_retention_settings.retained_backups",
                format!("{v} is not an int32"),
            )
        })?,
    };
    if !(1..=365).contains(&retained) {
        return Err(Reply::invalid(format!(
            "Invalid request: retained backups must be between 1 and 365, not {retained}."
        )));
    }
    let unit = match retention.get("retentionUnit") {
        None | Some(Value::Null) => "COUNT",
        Some(v) if v == &json!(0) => "COUNT",
        Some(v) => enum_name(v, RETENTION_UNIT).map_err(|e| {
            bad(
                "backup_configuration.backup_retention_settings.retention_unit",
                e,
            )
        })?,
    };
    backup["kind"] = json!("sql#backupConfiguration");
    backup["enabled"] = json!(enabled);
    if backup.get("startTime").is_none() {
        backup["startTime"] = json!("03:00");
    }
    backup["backupRetentionSettings"] =
        json!({ "retentionUnit": unit, "retainedBackups": retained });
    if backup.get("transactionLogRetentionDays").is_none() {
        backup["transactionLogRetentionDays"] = json!(7);
    }
    out.insert("backupConfiguration".into(), backup);

    let labels = given
        .get("userLabels")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let Some(label_map) = labels.as_object() else {
        return Err(bad("user_labels", "not a map".into()));
    };
    for (k, v) in label_map {
        let value = v.as_str().unwrap_or("\u{0}");
        if !valid_label(k, true) || !valid_label(value, false) {
            return Err(Reply::invalid(format!(
                "Invalid request: invalid label {k}={v}: keys and values are lowercase letters, \
                 digits, '_' and '-' (keys start with a letter), at most 63 characters."
            )));
        }
    }
    if label_map.len() > 64 {
        return Err(Reply::invalid("Invalid request: at most 64 labels."));
    }
    out.insert("userLabels".into(), labels);

    out.insert("kind".into(), json!("sql#settings"));
    out.insert(
        "settingsVersion".into(),
        json!(settings_version.to_string()),
    );
    let mut ip = out
        .remove("ipConfiguration")
        .filter(|ip| !ip.is_null())
        .unwrap_or_else(|| json!({ "ipv4Enabled": true }));
    if !ip.is_object() {
        return Err(bad("ip_configuration", "not an object".into()));
    }
    let ssl = match ip.get("sslMode") {
        None | Some(Value::Null) => "ALLOW_UNENCRYPTED_AND_ENCRYPTED",
        Some(v) if v == &json!(0) => "ALLOW_UNENCRYPTED_AND_ENCRYPTED",
        Some(v) => enum_name(v, SSL_MODE).map_err(|e| bad("ip_configuration.ssl_mode", e))?,
    };
    ip["sslMode"] = json!(ssl);
    out.insert("ipConfiguration".into(), ip);
    out.insert(
        "locationPreference".into(),
        json!({ "kind": "sql#locationPreference", "zone": zone }),
    );
    Ok(Value::Object(out))
}

/// The `databaseVersion` of a request: a PostgreSQL version's name.
fn postgres_version(value: Option<&Value>) -> Result<&'static str, Reply> {
    match value {
        None | Some(Value::Null) => Err(Reply::invalid(
            "Invalid request: databaseVersion is required: this stand-in serves PostgreSQL \
             instances only (POSTGRES_*), and Cloud SQL's default is MySQL.",
        )),
        Some(v) => enum_name(v, DATABASE_VERSION).map_err(|_| {
            Reply::invalid(format!(
                "Invalid value at 'body.database_version' ({v}): this stand-in serves \
                 PostgreSQL instances only (POSTGRES_9_6 to POSTGRES_18)."
            ))
        }),
    }
}

fn insert(state: &mut State, req: &Req<'_>, int: bool) -> Reply {
    let project = state.project.clone();
    let body = req.body;
    let name = body.get("name").and_then(Value::as_str).unwrap_or("");
    if !valid_id(&project, name) {
        return Reply::invalid(format!(
            "Invalid request: instance name ({name}) is invalid: use lowercase letters, \
             numbers and hyphens, starting with a letter; `project:instance` is at most 98 \
             characters."
        ));
    }
    let version = match postgres_version(body.get("databaseVersion")) {
        Ok(v) => v,
        Err(reply) => return reply,
    };
    let region = body
        .get("region")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
        .unwrap_or("us-central1")
        .to_owned();
    let zone = format!("{region}-b");
    let given = body.get("settings").cloned().unwrap_or(Value::Null);
    let settings = match settings(&given, version, None, 1, &zone) {
        Ok(s) => s,
        Err(reply) => return reply,
    };
    if state.sql.instances.contains_key(name) {
        return Reply::error(
            409,
            "ALREADY_EXISTS",
            format!("The Cloud SQL instance {name} already exists."),
        );
    }
    let now = state.timestamp();
    let due = state.due();
    let sql = &mut state.sql;
    sql.next += 1;
    let n = sql.next;
    let address = format!(
        "34.{}.{}.{}",
        100 + n / 65_536 % 100,
        n / 256 % 256,
        n % 256
    );
    let installed = match version {
        "POSTGRES_9_6" => "POSTGRES_9_6_24".to_owned(),
        v => format!("{v}_4"),
    };
    let instance = json!({
        "kind": "sql#instance",
        "name": name,
        "project": project,
        "region": region,
        "gceZone": zone,
        "databaseVersion": version,
        "databaseInstalledVersion": installed,
        "state": "PENDING_CREATE",
        "backendType": "SECOND_GEN",
        "instanceType": "CLOUD_SQL_INSTANCE",
        "connectionName": format!("{project}:{region}:{name}"),
        "selfLink": self_link(&project, name),
        "serviceAccountEmailAddress": format!("p{n:012}-abcdef@gcp-sa-cloud-sql.iam.gserviceaccount.com"),
        "ipAddresses": [{ "type": "PRIMARY", "ipAddress": address }],
        "createTime": now,
        "etag": format!("etag-{n}-1"),
        "settings": settings,
    });
    let root = json!({
        "kind": "sql#user",
        "name": "postgres",
        "host": "",
        "instance": name,
        "project": project,
        "etag": format!("user-etag-{n}"),
        "type": "BUILT_IN",
    });
    sql.instances.insert(
        name.to_owned(),
        Instance {
            body: instance,
            users: BTreeMap::from([("postgres".to_owned(), root)]),
        },
    );
    let op = sql.start(&project, name, "CREATE", Effect::Runnable, (&now, due));
    state.created(&format!("/v1/projects/{project}/instances/{name}"));
    Reply::ok(op_json(&op, int))
}

fn list(state: &mut State, req: &Req<'_>, int: bool) -> Reply {
    if req.param("filter").is_some() {
        return Reply::invalid("Invalid request: `filter` is not served by this stand-in.");
    }
    let size = match req.param("maxResults") {
        None => PAGE,
        Some(m) => match m.parse::<usize>() {
            Ok(0) => PAGE,
            Ok(m) => m,
            Err(_) => return Reply::invalid(format!("Invalid value for maxResults: {m}")),
        },
    };
    let names: Vec<&String> = state.sql.instances.keys().collect();
    // A page token is the last name of the page before.
    let start = match req.param("pageToken") {
        None => 0,
        Some(token) => names
            .iter()
            .position(|n| n.as_str() > token)
            .unwrap_or(names.len()),
    };
    let page: Vec<Value> = names
        .iter()
        .skip(start)
        .take(size)
        .filter_map(|n| state.sql.instances.get(*n))
        .map(|i| instance_json(&i.body, int))
        .collect();
    let mut out = json!({ "kind": "sql#instancesList", "items": page });
    if start + size < names.len()
        && let Some(last) = names.get(start + size - 1)
    {
        out["nextPageToken"] = json!(last);
    }
    Reply::ok(out)
}

fn get(state: &mut State, name: &str, int: bool) -> Reply {
    match state.sql.instances.get(name) {
        Some(i) => Reply::ok(instance_json(&i.body, int)),
        None => missing(name),
    }
}

fn write(state: &mut State, req: &Req<'_>, name: &str, whole: bool, int: bool) -> Reply {
    let project = state.project.clone();
    let Some(current) = state.sql.instances.get(name) else {
        return missing(name);
    };
    if state.sql.busy(name) {
        return busy(name);
    }
    let body = req.body;
    let before = current.body.clone();
    let version_now = before["databaseVersion"].as_str().unwrap_or("").to_owned();
    let settings_version = int64(before.pointer("/settings/settingsVersion")).unwrap_or(1);
    let given_version = int64(body.pointer("/settings/settingsVersion"));
    match given_version {
        None if whole => {
            return Reply::invalid("Missing parameter: Settings version.");
        }
        Some(v) if v != settings_version => {
            return Reply::error(412, "FAILED_PRECONDITION", "Condition does not match.");
        }
        _ => {}
    }
    let version = match body.get("databaseVersion") {
        None | Some(Value::Null) => version_now.clone(),
        Some(v) if v == &json!(0) => version_now.clone(),
        given => match postgres_version(given) {
            Ok(v) => v.to_owned(),
            Err(reply) => return reply,
        },
    };
    if major(&version) < major(&version_now) {
        return Reply::invalid(format!(
            "Invalid request: the database version cannot be downgraded (from {version_now} \
             to {version})."
        ));
    }
    let zone = before["gceZone"].as_str().unwrap_or("").to_owned();
    let disk_before = int64(before.pointer("/settings/dataDiskSizeGb"));
    let given = match body.get("settings") {
        Some(s) if !s.is_null() => {
            if whole {
                s.clone()
            } else {
                let mut merged = before["settings"].clone();
                merge(&mut merged, s);
                merged
            }
        }
        _ if whole => Value::Null,
        _ => before["settings"].clone(),
    };
    let settings = match settings(&given, &version, disk_before, settings_version + 1, &zone) {
        Ok(s) => s,
        Err(reply) => return reply,
    };
    let now = state.timestamp();
    let due = state.due();
    let sql = &mut state.sql;
    let upgrade = version != version_now;
    if let Some(instance) = sql.instances.get_mut(name) {
        instance.body["settings"] = settings;
        instance.body["databaseVersion"] = json!(version);
        if upgrade {
            instance.body["databaseInstalledVersion"] = json!(format!("{version}_4"));
        }
        instance.body["etag"] = json!(format!("etag-{}-{}", name.len(), settings_version + 1));
    }
    let kind = if upgrade {
        "MAJOR_VERSION_UPGRADE"
    } else {
        "UPDATE"
    };
    let op = sql.start(&project, name, kind, Effect::None, (&now, due));
    Reply::ok(op_json(&op, int))
}

fn delete(state: &mut State, name: &str, int: bool) -> Reply {
    let project = state.project.clone();
    if !state.sql.instances.contains_key(name) {
        return missing(name);
    }
    // An instance being deleted has its delete operation running: a second delete is
    // refused as busy until it is gone.
    if state.sql.busy(name) {
        return busy(name);
    }
    let now = state.timestamp();
    let due = state.due();
    let sql = &mut state.sql;
    if let Some(instance) = sql.instances.get_mut(name) {
        instance.body["state"] = json!("PENDING_DELETE");
    }
    let op = sql.start(&project, name, "DELETE", Effect::Remove, (&now, due));
    Reply::ok(op_json(&op, int))
}

fn users_list(state: &mut State, name: &str, int: bool) -> Reply {
    match state.sql.instances.get(name) {
        Some(i) => Reply::ok(json!({
            "kind": "sql#usersList",
            "items": i.users.values().map(|u| user_json(u, int)).collect::<Vec<_>>(),
        })),
        None => missing(name),
    }
}

fn users_insert(state: &mut State, req: &Req<'_>, name: &str, int: bool) -> Reply {
    let project = state.project.clone();
    let Some(instance) = state.sql.instances.get(name) else {
        return missing(name);
    };
    let user = req.body.get("name").and_then(Value::as_str).unwrap_or("");
    if user.is_empty() || user.len() > 63 {
        return Reply::invalid("Invalid request: a user name is 1 to 63 characters.");
    }
    let kind = match req.body.get("type") {
        None | Some(Value::Null) => "BUILT_IN",
        Some(v) => match enum_name(v, USER_TYPE) {
            Ok(t) => t,
            Err(e) => return Reply::invalid(format!("Invalid value at 'body.type': {e}")),
        },
    };
    if instance.users.contains_key(user) {
        return Reply::error(
            409,
            "ALREADY_EXISTS",
            format!("User {user} already exists on instance {name}."),
        );
    }
    if state.sql.busy(name) {
        return busy(name);
    }
    let now = state.timestamp();
    let due = state.due();
    let sql = &mut state.sql;
    sql.next += 1;
    let record = json!({
        "kind": "sql#user",
        "name": user,
        "host": "",
        "instance": name,
        "project": project,
        "etag": format!("user-etag-{}", sql.next),
        "type": kind,
    });
    if let Some(instance) = sql.instances.get_mut(name) {
        instance.users.insert(user.to_owned(), record);
    }
    let op = sql.start(&project, name, "CREATE_USER", Effect::None, (&now, due));
    Reply::ok(op_json(&op, int))
}

fn users_update(state: &mut State, req: &Req<'_>, name: &str, int: bool) -> Reply {
    let project = state.project.clone();
    let Some(instance) = state.sql.instances.get(name) else {
        return missing(name);
    };
    let Some(user) = req.param("name") else {
        return Reply::invalid("Missing parameter: name.");
    };
    if !instance.users.contains_key(user) {
        return Reply::error(
            404,
            "NOT_FOUND",
            format!("User {user} does not exist on instance {name}."),
        );
    }
    if state.sql.busy(name) {
        return busy(name);
    }
    let now = state.timestamp();
    let due = state.due();
    let sql = &mut state.sql;
    sql.next += 1;
    let etag = format!("user-etag-{}", sql.next);
    if let Some(record) = sql
        .instances
        .get_mut(name)
        .and_then(|i| i.users.get_mut(user))
    {
        record["etag"] = json!(etag);
    }
    let op = sql.start(&project, name, "UPDATE_USER", Effect::None, (&now, due));
    Reply::ok(op_json(&op, int))
}

fn operation(state: &mut State, name: &str, int: bool) -> Reply {
    if !state.sql.operations.contains_key(name) {
        return Reply::error(
            404,
            "NOT_FOUND",
            format!("The operation {name} does not exist."),
        );
    }
    match state.sql.operations.get(name) {
        Some(op) => Reply::ok(op_json(&op.body, int)),
        None => Reply::not_found(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_are_checked_against_their_edition() {
        for tier in [
            "db-f1-micro",
            "db-g1-small",
            "db-custom-1-3840",
            "db-custom-2-7680",
        ] {
            assert!(valid_tier(tier, "ENTERPRISE"), "{tier}");
            assert!(!valid_tier(tier, "ENTERPRISE_PLUS"), "{tier}");
        }
        for tier in [
            "db-custom-3-7680",
            "db-custom-2-1024",
            "db-custom-2-7000",
            "db.t4g.micro",
            "db-n1-standard-1",
        ] {
            assert!(!valid_tier(tier, "ENTERPRISE"), "{tier}");
        }
        assert!(valid_tier("db-perf-optimized-N-2", "ENTERPRISE_PLUS"));
        assert!(!valid_tier("db-perf-optimized-N-3", "ENTERPRISE_PLUS"));
    }

    #[test]
    fn enums_are_read_as_names_or_integers_and_answered_as_asked() {
        assert_eq!(enum_name(&json!(272), DATABASE_VERSION), Ok("POSTGRES_16"));
        assert_eq!(
            enum_name(&json!("POSTGRES_16"), DATABASE_VERSION),
            Ok("POSTGRES_16")
        );
        assert!(enum_name(&json!(20), DATABASE_VERSION).is_err());
        let body = json!({"databaseVersion": "POSTGRES_16", "state": "RUNNABLE", "settings": {"edition": "ENTERPRISE"}});
        let ints = instance_json(&body, true);
        assert_eq!(ints["databaseVersion"], 272);
        assert_eq!(ints["state"], 1);
        assert_eq!(ints["settings"]["edition"], 2);
        assert_eq!(instance_json(&body, false), body);
    }

    #[test]
    fn a_patch_merges_labels_and_null_removes_one() {
        let mut target = json!({"tier": "db-f1-micro", "userLabels": {"a": "1", "b": "2"}});
        merge(&mut target, &json!({"userLabels": {"b": null, "c": "3"}}));
        assert_eq!(
            target,
            json!({"tier": "db-f1-micro", "userLabels": {"a": "1", "c": "3"}})
        );
    }

    #[test]
    fn settings_get_defaults_and_refuse_what_cloud_sql_refuses() {
        let s = settings(
            &json!({"tier": "db-f1-micro", "edition": 2}),
            "POSTGRES_16",
            None,
            1,
            "z",
        )
        .unwrap();
        assert_eq!(s["dataDiskSizeGb"], "10");
        assert_eq!(s["storageAutoResize"], true);
        assert_eq!(s["backupConfiguration"]["enabled"], false);
        // PostgreSQL 16 defaults to Enterprise Plus, where db-f1-micro is refused.
        assert!(settings(&json!({"tier": "db-f1-micro"}), "POSTGRES_16", None, 1, "z").is_err());
        assert!(settings(&json!({"tier": "db-f1-micro"}), "POSTGRES_15", None, 1, "z").is_ok());
        let shrink = json!({"tier": "db-f1-micro", "edition": 2, "dataDiskSizeGb": "20"});
        assert_eq!(
            settings(&shrink, "POSTGRES_16", Some(30), 2, "z")
                .unwrap_err()
                .status,
            400
        );
        let labels = json!({"tier": "db-f1-micro", "edition": 2, "userLabels": {"Team": "x"}});
        assert_eq!(
            settings(&labels, "POSTGRES_16", None, 1, "z")
                .unwrap_err()
                .status,
            400
        );
        assert!(major("POSTGRES_9_6") < major("POSTGRES_10"));
    }
}
