//! Managed Database for PostgreSQL and MySQL (RDB API v1), from memory: Database
//! Instances, their users, and the catalogue of engines and node types.
//!
//! Served, under `/rdb/v1/regions/{region}`:
//!
//! | call | path |
//! |---|---|
//! | `ListDatabaseEngines` | `GET …/database-engines` (`engines`) |
//! | `ListNodeTypes` | `GET …/node-types` (`node_types`) |
//! | `ListInstances` / `CreateInstance` | `GET` / `POST …/instances` |
//! | `GetInstance` / `UpdateInstance` / `DeleteInstance` | `GET` / `PATCH` / `DELETE …/instances/{id}` |
//! | `UpgradeInstance` | `POST …/instances/{id}/upgrade` |
//! | `ListUsers` / `CreateUser` | `GET` / `POST …/instances/{id}/users` |
//! | `UpdateUser` / `DeleteUser` | `PATCH` / `DELETE …/instances/{id}/users/{name}` |
//!
//! Statuses: a new instance is `provisioning` until the stand-in's settling time has
//! passed on its clock, then `ready`; an upgrade makes it `configuring` for as long; a
//! deleted one is `deleting` for as long, then gone (404). While it is in any of
//! those, every write to it and to its users, and the listing of its users, answers 409
//! `transient_state` with its `current_state`. `DELETE` answers the instance, `deleting`.
//!
//! Rules enforced, as Scaleway documents them:
//! - `project_id` (or the deprecated `organization_id`) is required on create and must be
//!   the stand-in's (403 otherwise, on listings too); a region other than `fr-par`,
//!   `nl-ams`, `pl-waw` is 400;
//! - `engine` is one of the engines `database-engines` answers (`PostgreSQL-13` to
//!   `PostgreSQL-17`, `MySQL-8`); `PostgreSQL-12` is listed disabled (end of life) and
//!   cannot be created;
//! - `user_name` (none, or empty, for an instance without users): 1 to 63 characters
//!   (32 for MySQL), starting with a letter, of
//!   `a-zA-Z0-9_$-`, not starting with `_rdb` nor (PostgreSQL) `pg_`; a `password` is 8
//!   to 128 characters with at least a digit, an uppercase letter, a lowercase letter and
//!   a special character (a user's too). Passwords are never kept nor answered;
//! - `node_type` is one of the node types `node-types` answers, in any case; it is
//!   answered lowercase, as Scaleway does;
//! - `volume_type` (default `lssd`) must be one the node type offers: the DEV and GP
//!   offers have a local SSD (`lssd`, whose size is the node type's and not chosen) and
//!   block volumes, the PLAY2, PRO2 and POP2 offers block volumes only. `volume_size` is
//!   in bytes (a number or a decimal string), required for block volumes: `bssd` from 5
//!   GB in steps of 5 GB, `sbs_5k` and `sbs_15k` from 5 GB in steps of 1 GB, both up to
//!   10 TB (GB are 10^9 bytes);
//! - instance names are not unique (Scaleway allows two instances of one name); a user
//!   name is unique in its instance (409 `already_exists`, resource `user`);
//! - `UpgradeInstance` takes exactly one of `node_type`, `enable_ha`, `volume_size`,
//!   `volume_type`, `upgradable_version_id`, `major_upgrade_workflow`,
//!   `enable_encryption` (400 naming `upgrade_target` otherwise). A volume only grows
//!   (400), a local volume's size cannot be chosen (400), HA and encryption can only be
//!   turned on, the node type must change and keep the volume type on offer;
//! - `UpdateInstance`: `backup_schedule_retention` 1 to 365 days,
//!   `backup_schedule_frequency` 1 to 168 hours, `backup_schedule_start_hour` 0 to 23;
//! - an unknown instance is 404 `not_found` with resource `instance` (an instance of
//!   another region too), an unknown user 404 with resource `user`; listings are paged
//!   (`page`, `page_size`, `total_count`).
//!
//! Not modelled: major-version upgrades (no instance answers an `upgradable_version`,
//! so every `upgradable_version_id` is unknown: 400), read replicas, snapshots, backups,
//! ACLs, settings, private networks, maintenance, the `error`, `locked` and `disk_full`
//! statuses, stock. An instance answers its public endpoint once first provisioned (no
//! endpoint while `provisioning`, as Scaleway was recorded answering).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::State;
use super::wire::{Reply, Req, Settling, unknown_region};

/// A gigabyte, as Scaleway counts volume sizes.
const GB: u64 = 1_000_000_000;

/// One node type offered.
struct NodeType {
    /// Its name, as answered.
    name: &'static str,
    vcpus: u32,
    memory_gb: u64,
    /// The size of its local SSD in GB; 0 for the offers without one.
    lssd_gb: u64,
}

const NODE_TYPES: &[NodeType] = &[
    node("db-dev-s", 2, 2, 5),
    node("db-dev-m", 3, 4, 10),
    node("db-dev-l", 4, 8, 20),
    node("db-dev-xl", 4, 12, 40),
    node("db-gp-xs", 4, 16, 80),
    node("db-gp-s", 8, 32, 160),
    node("db-gp-m", 16, 64, 320),
    node("db-play2-pico", 1, 2, 0),
    node("db-play2-nano", 2, 4, 0),
    node("db-pro2-xxs", 2, 8, 0),
    node("db-pro2-xs", 4, 16, 0),
    node("db-pro2-s", 8, 32, 0),
    node("db-pop2-2c-8g", 2, 8, 0),
    node("db-pop2-4c-16g", 4, 16, 0),
];

const fn node(name: &'static str, vcpus: u32, memory_gb: u64, lssd_gb: u64) -> NodeType {
    NodeType {
        name,
        vcpus,
        memory_gb,
        lssd_gb,
    }
}

/// One volume type: its name, storage class, least size, step and most size (GB).
struct VolumeType {
    name: &'static str,
    class: &'static str,
    min_gb: u64,
    chunk_gb: u64,
    max_gb: u64,
}

const VOLUME_TYPES: &[VolumeType] = &[
    volume("lssd", "lssd", 0, 0, 0),
    volume("bssd", "bssd", 5, 5, 10_000),
    volume("sbs_5k", "sbs", 5, 1, 10_000),
    volume("sbs_15k", "sbs", 5, 1, 10_000),
];

const fn volume(
    name: &'static str,
    class: &'static str,
    min_gb: u64,
    chunk_gb: u64,
    max_gb: u64,
) -> VolumeType {
    VolumeType {
        name,
        class,
        min_gb,
        chunk_gb,
        max_gb,
    }
}

/// The engines: name, version, disabled.
const ENGINES: &[(&str, &str, bool)] = &[
    ("PostgreSQL", "12", true),
    ("PostgreSQL", "13", false),
    ("PostgreSQL", "14", false),
    ("PostgreSQL", "15", false),
    ("PostgreSQL", "16", false),
    ("PostgreSQL", "17", false),
    ("MySQL", "8", false),
];

/// The one-of group of `UpgradeInstance`.
const UPGRADE_TARGETS: [&str; 7] = [
    "node_type",
    "enable_ha",
    "volume_size",
    "volume_type",
    "upgradable_version_id",
    "major_upgrade_workflow",
    "enable_encryption",
];

/// The product's resources.
#[derive(Debug, Default)]
pub(crate) struct Rdb {
    instances: BTreeMap<String, Instance>,
    made: u64,
}

/// One Database Instance.
#[derive(Debug)]
struct Instance {
    id: String,
    region: String,
    project: String,
    name: String,
    engine: String,
    node_type: &'static str,
    is_ha: bool,
    volume_type: &'static str,
    volume_size: u64,
    backup: Backup,
    tags: Vec<String>,
    created_at: String,
    endpoint: Value,
    /// `ready` once the instance was first provisioned: its endpoint is answered from then.
    provisioned: Settling,
    encryption: bool,
    status: Settling,
    deleting: bool,
    /// Users in creation order, with whether each is an administrator.
    users: Vec<(String, bool)>,
    order: u64,
}

#[derive(Debug)]
struct Backup {
    disabled: bool,
    frequency: u64,
    retention: u64,
    same_region: bool,
    start_hour: u64,
}

/// What a create asks for, checked.
struct Asked {
    name: String,
    engine: String,
    user: Option<String>,
    node: &'static NodeType,
    volume: &'static VolumeType,
    size: u64,
    is_ha: bool,
    disable_backup: bool,
    same_region: bool,
    encryption: bool,
    tags: Vec<String>,
}

/// Serves a request of the product, or `None` when the path is not one of its.
pub(crate) fn route(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let rest = req.under("/rdb/v1/regions")?;
    let (region, rest) = rest.split_first()?;
    let region = *region;
    state.rdb.sweep();
    let served = matches!(
        (req.method, rest),
        ("GET", ["database-engines" | "node-types" | "instances"])
            | ("POST", ["instances"])
            | ("GET" | "PATCH" | "DELETE", ["instances", _])
            | ("POST", ["instances", _, "upgrade"])
            | ("GET" | "POST", ["instances", _, "users"])
            | ("PATCH" | "DELETE", ["instances", _, "users", _])
    );
    if !served {
        return None;
    }
    if let Some(refused) = unknown_region(region) {
        return Some(refused);
    }
    Some(match (req.method, rest) {
        ("GET", ["database-engines"]) => engines(req, region),
        ("GET", ["node-types"]) => node_types(req, region),
        ("GET", ["instances"]) => list(state, req, region),
        ("POST", ["instances"]) => create(state, req, region),
        ("GET", ["instances", id]) => get(state, region, id),
        ("PATCH", ["instances", id]) => update(state, req, region, id),
        ("DELETE", ["instances", id]) => delete(state, region, id),
        ("POST", ["instances", id, "upgrade"]) => upgrade(state, req, region, id),
        ("GET", ["instances", id, "users"]) => users_list(state, req, region, id),
        ("POST", ["instances", id, "users"]) => user_create(state, req, region, id),
        ("PATCH", ["instances", id, "users", name]) => user_update(state, req, region, id, name),
        (_, ["instances", id, "users", name]) => user_delete(state, region, id, name),
        _ => return None,
    })
}

impl Rdb {
    /// Forgets the instances whose deletion has finished.
    fn sweep(&mut self) {
        self.instances.retain(|_, i| !i.deleting || i.status.busy());
    }

    /// The instance `id` of `region`, or 404 `not_found` (resource `instance`).
    fn instance(&mut self, region: &str, id: &str) -> Result<&mut Instance, Reply> {
        self.instances
            .get_mut(id)
            .filter(|i| i.region == region)
            .ok_or_else(|| Reply::not_found("instance", id))
    }

    /// The instance `id` of `region` if a write may be made to it now: 404 when it does
    /// not exist, 409 `transient_state` while it is busy.
    fn idle(&mut self, region: &str, id: &str) -> Result<&mut Instance, Reply> {
        let instance = self.instance(region, id)?;
        if instance.deleting || instance.status.busy() {
            return Err(Reply::transient("instance", id, instance.status.status()));
        }
        Ok(instance)
    }
}

fn engine_json(name: &str, region: &str, versions: Vec<Value>) -> Value {
    json!({
        "name": name,
        "logo_url": format!("https://example.invalid/logos/{}.svg", name.to_lowercase()),
        "versions": versions,
        "region": region,
    })
}

/// `GET …/database-engines`, filtered by `name` and `version`.
fn engines(req: &Req<'_>, region: &str) -> Reply {
    let mut out = Vec::new();
    for engine in ["PostgreSQL", "MySQL"] {
        if req.param("name").is_some_and(|n| n != engine) {
            continue;
        }
        let versions: Vec<Value> = ENGINES
            .iter()
            .filter(|(e, v, _)| *e == engine && req.param("version").is_none_or(|w| w == *v))
            .map(|(e, v, disabled)| {
                json!({
                    "version": v,
                    "name": format!("{e}-{v}"),
                    "end_of_life": if *disabled { json!("2024-11-14T00:00:00Z") } else { Value::Null },
                    "available_settings": [],
                    "disabled": disabled,
                    "beta": false,
                    "available_init_settings": [],
                })
            })
            .collect();
        if !versions.is_empty() {
            out.push(engine_json(engine, region, versions));
        }
    }
    Reply::page(req, "engines", out)
}

/// `GET …/node-types`.
fn node_types(req: &Req<'_>, region: &str) -> Reply {
    let items = NODE_TYPES
        .iter()
        .map(|n| {
            let volumes: Vec<Value> = VOLUME_TYPES
                .iter()
                .filter(|v| offers(n, v))
                .map(|v| {
                    let (min, max, chunk) = if v.name == "lssd" {
                        (n.lssd_gb * GB, n.lssd_gb * GB, 0)
                    } else {
                        (v.min_gb * GB, v.max_gb * GB, v.chunk_gb * GB)
                    };
                    json!({
                        "type": v.name, "description": format!("{} volume", v.name),
                        "min_size": min, "max_size": max, "chunk_size": chunk, "class": v.class,
                    })
                })
                .collect();
            json!({
                "name": n.name,
                "stock_status": "available",
                "description": format!("{} vCPUs, {} GB of memory", n.vcpus, n.memory_gb),
                "vcpus": n.vcpus,
                "memory": n.memory_gb * (1 << 30),
                "disabled": false,
                "beta": false,
                "available_volume_types": volumes,
                "is_ha_required": false,
                "generation": if n.lssd_gb > 0 { "generation_v1" } else { "generation_v2" },
                "instance_range": n.name.split('-').nth(1).unwrap_or_default(),
                "region": region,
            })
        })
        .collect();
    Reply::page(req, "node_types", items)
}

/// Whether node type `n` offers volumes of type `v`.
fn offers(n: &NodeType, v: &VolumeType) -> bool {
    v.name != "lssd" || n.lssd_gb > 0
}

/// The instance as Scaleway answers it, its status being `status`.
fn instance_json(i: &Instance, organization: &str, status: &str) -> Value {
    let provisioned = i.provisioned.status() == "ready";
    let class = VOLUME_TYPES
        .iter()
        .find(|v| v.name == i.volume_type)
        .map_or("unknown_storage_class", |v| v.class);
    json!({
        "id": i.id,
        "name": i.name,
        "organization_id": organization,
        "project_id": i.project,
        "region": i.region,
        "status": status,
        "engine": i.engine,
        "upgradable_version": [],
        // Scaleway answers no endpoint until the instance is first provisioned.
        "endpoint": if provisioned { i.endpoint.clone() } else { Value::Null },
        "endpoints": if provisioned { json!([i.endpoint]) } else { json!([]) },
        "tags": i.tags,
        "settings": [],
        "backup_schedule": {
            "frequency": i.backup.frequency,
            "retention": i.backup.retention,
            "disabled": i.backup.disabled,
            "next_run_at": if i.backup.disabled { Value::Null } else {
                json!(format!("2027-01-01T{:02}:00:00Z", i.backup.start_hour))
            },
        },
        "is_ha_cluster": i.is_ha,
        "high_availability_mode": if i.is_ha { "single_zone" } else { "disabled" },
        "read_replicas": [],
        "node_type": i.node_type,
        "init_settings": [],
        "volume": { "type": i.volume_type, "size": i.volume_size, "class": class },
        "created_at": i.created_at,
        "logs_policy": { "max_age_retention": 30, "total_disk_retention": null },
        "backup_same_region": i.backup.same_region,
        "maintenances": [],
        "encryption": { "enabled": i.encryption },
    })
}

/// `GET …/instances`: the project's instances of the region, oldest first unless
/// `order_by` says otherwise; `name` keeps those whose name contains it, `tags` those
/// carrying the tag.
fn list(state: &mut State, req: &Req<'_>, region: &str) -> Reply {
    if let Some(refused) = state.foreign_project(req.param("project_id")) {
        return refused;
    }
    if let Some(org) = req.param("organization_id")
        && org != state.organization
    {
        return Reply::denied(format!(
            "the organization {org} cannot be reached with this key"
        ));
    }
    let order = req.param("order_by").unwrap_or("created_at_asc");
    let known = [
        "created_at_asc",
        "created_at_desc",
        "name_asc",
        "name_desc",
        "region",
        "status_asc",
        "status_desc",
    ];
    if !known.contains(&order) {
        return Reply::invalid("order_by", format!("unknown order {order:?}"));
    }
    let mut found: Vec<&Instance> = state
        .rdb
        .instances
        .values()
        .filter(|i| i.region == region)
        .filter(|i| req.param("name").is_none_or(|n| i.name.contains(n)))
        .filter(|i| {
            req.param("tags")
                .is_none_or(|t| i.tags.iter().any(|x| x == t))
        })
        .collect();
    found.sort_by(|a, b| match order {
        "created_at_desc" => b.order.cmp(&a.order),
        "name_asc" => a.name.cmp(&b.name).then(a.order.cmp(&b.order)),
        "name_desc" => b.name.cmp(&a.name).then(a.order.cmp(&b.order)),
        "status_asc" => a.status.status().cmp(b.status.status()),
        "status_desc" => b.status.status().cmp(a.status.status()),
        _ => a.order.cmp(&b.order),
    });
    let items = found
        .into_iter()
        .map(|i| instance_json(i, &state.organization, shown_status(i)))
        .collect();
    Reply::page(req, "instances", items)
}

/// The status an instance shows.
fn shown_status(i: &Instance) -> &'static str {
    if i.deleting {
        "deleting"
    } else {
        i.status.status()
    }
}

/// `GET …/instances/{id}`.
fn get(state: &mut State, region: &str, id: &str) -> Reply {
    let organization = state.organization.clone();
    match state.rdb.instance(region, id) {
        Ok(i) => Reply::ok(instance_json(i, &organization, shown_status(i))),
        Err(missing) => missing,
    }
}

/// A non-negative integer given as a JSON number or a decimal string; `Err` when it is
/// neither.
fn uint(value: &Value) -> Result<u64, ()> {
    match value {
        Value::Number(n) => n.as_u64().ok_or(()),
        Value::String(s) => s.parse().map_err(|_| ()),
        _ => Err(()),
    }
}

/// The body's field `name` when present and not null.
fn field<'r>(req: &'r Req<'_>, name: &str) -> Option<&'r Value> {
    req.body.get(name).filter(|v| !v.is_null())
}

/// The boolean field `name` (`default` when absent), or 400.
fn flag(req: &Req<'_>, name: &str, default: bool) -> Result<bool, Reply> {
    match field(req, name) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(Reply::invalid(name, "must be a boolean")),
    }
}

/// The string-array field `name`, or 400.
fn strings(req: &Req<'_>, name: &str) -> Result<Option<Vec<String>>, Reply> {
    match field(req, name) {
        None => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|t| {
                t.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| Reply::invalid(name, "must be a list of strings"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(Reply::invalid(name, "must be a list of strings")),
    }
}

/// Why `password` is refused, or `None`.
fn password_problem(password: &str) -> Option<&'static str> {
    let length = password.chars().count();
    if !(8..=128).contains(&length) {
        return Some("must be between 8 and 128 characters");
    }
    let has = |test: fn(&char) -> bool| password.chars().any(|c| test(&c));
    if !has(char::is_ascii_digit) {
        return Some("must contain at least one digit");
    }
    if !has(char::is_ascii_uppercase) {
        return Some("must contain at least one uppercase letter");
    }
    if !has(char::is_ascii_lowercase) {
        return Some("must contain at least one lowercase letter");
    }
    if !has(|c| !c.is_alphanumeric()) {
        return Some("must contain at least one special character");
    }
    None
}

/// The password field `name` checked, or 400 (the value is never quoted).
fn check_password(req: &Req<'_>, name: &str, required: bool) -> Result<(), Reply> {
    match field(req, name) {
        None if required => Err(Reply::invalid(name, "is required")),
        None => Ok(()),
        Some(Value::String(p)) => match password_problem(p) {
            Some(why) => Err(Reply::invalid(name, why)),
            None => Ok(()),
        },
        Some(_) => Err(Reply::invalid(name, "must be a string")),
    }
}

/// Why `name` cannot name a user of an instance of `engine`, or `None`.
fn user_problem(name: &str, engine: &str) -> Option<String> {
    let most = if engine.starts_with("MySQL") { 32 } else { 63 };
    let valid = (1..=most).contains(&name.chars().count())
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '-'));
    if !valid {
        return Some(format!(
            "must be 1 to {most} characters of a-zA-Z0-9_$-, starting with a letter"
        ));
    }
    if name.starts_with("_rdb") || (most == 63 && name.starts_with("pg_")) {
        return Some("must not start with _rdb nor pg_".to_owned());
    }
    None
}

/// The node type named `name`, in any case.
fn find_node(name: &str) -> Option<&'static NodeType> {
    NODE_TYPES
        .iter()
        .find(|n| n.name.eq_ignore_ascii_case(name))
}

/// The volume type named `name`.
fn find_volume(name: &str) -> Option<&'static VolumeType> {
    VOLUME_TYPES.iter().find(|v| v.name == name)
}

/// Why a block volume of type `v` cannot be `size` bytes, or `None`.
fn size_problem(v: &VolumeType, size: u64) -> Option<String> {
    let (min, max, chunk) = (v.min_gb * GB, v.max_gb * GB, v.chunk_gb * GB);
    if size < min || size > max || !size.is_multiple_of(chunk) {
        return Some(format!(
            "a {} volume is {} GB to {} GB, in steps of {} GB (sizes in bytes)",
            v.name, v.min_gb, v.max_gb, v.chunk_gb
        ));
    }
    None
}

/// The engine of a create, checked.
fn asked_engine(req: &Req<'_>) -> Result<String, Reply> {
    let engine = req
        .str("engine")
        .ok_or_else(|| Reply::invalid("engine", "is required"))?;
    match ENGINES
        .iter()
        .find(|(e, v, _)| format!("{e}-{v}") == engine)
    {
        Some((_, _, false)) => Ok(engine.to_owned()),
        Some((_, _, true)) => Err(Reply::invalid(
            "engine",
            format!("{engine} has reached its end of life: it cannot be created"),
        )),
        None => Err(Reply::invalid(
            "engine",
            format!("unknown engine {engine:?} (see database-engines)"),
        )),
    }
}

/// The volume of a create on node type `node`: its type and size in bytes.
fn asked_volume(req: &Req<'_>, node: &NodeType) -> Result<(&'static VolumeType, u64), Reply> {
    let name = match field(req, "volume_type") {
        None => "lssd",
        Some(v) => v
            .as_str()
            .ok_or_else(|| Reply::invalid("volume_type", "must be a string"))?,
    };
    let volume = find_volume(name)
        .ok_or_else(|| Reply::invalid("volume_type", format!("unknown volume type {name:?}")))?;
    if !offers(node, volume) {
        return Err(Reply::invalid(
            "volume_type",
            format!("node type {} offers no {name} volume", node.name),
        ));
    }
    if volume.name == "lssd" {
        return Ok((volume, node.lssd_gb * GB));
    }
    let size = field(req, "volume_size")
        .ok_or_else(|| Reply::invalid("volume_size", "is required for a block volume"))
        .and_then(|v| {
            uint(v).map_err(|()| Reply::invalid("volume_size", "must be a size in bytes"))
        })?;
    match size_problem(volume, size) {
        Some(why) => Err(Reply::invalid("volume_size", why)),
        None => Ok((volume, size)),
    }
}

/// What a create asks for, checked as Scaleway checks it.
fn asked(req: &Req<'_>, id: &str) -> Result<Asked, Reply> {
    let name = match field(req, "name") {
        None => format!("ins-{}", &id[..8]),
        Some(Value::String(n)) if !n.is_empty() && n.chars().count() <= 255 => n.clone(),
        Some(_) => return Err(Reply::invalid("name", "must be 1 to 255 characters")),
    };
    let engine = asked_engine(req)?;
    // No `user_name` (or an empty one, as Terraform sends it) makes an instance without
    // users, as Scaleway was recorded doing; a user named needs a password.
    let user = req.str("user_name").filter(|u| !u.is_empty());
    if let Some(user) = user {
        if let Some(why) = user_problem(user, &engine) {
            return Err(Reply::invalid("user_name", why));
        }
        check_password(req, "password", true)?;
    }
    let node_name = req
        .str("node_type")
        .ok_or_else(|| Reply::invalid("node_type", "is required"))?;
    let node = find_node(node_name).ok_or_else(|| {
        Reply::invalid(
            "node_type",
            format!("unknown node type {node_name:?} (see node-types)"),
        )
    })?;
    let (volume, size) = asked_volume(req, node)?;
    Ok(Asked {
        name,
        engine,
        user: user.map(str::to_owned),
        node,
        volume,
        size,
        is_ha: flag(req, "is_ha_cluster", false)?,
        disable_backup: flag(req, "disable_backup", false)?,
        same_region: flag(req, "backup_same_region", false)?,
        encryption: match field(req, "encryption") {
            None => false,
            Some(e) => e.get("enabled").and_then(Value::as_bool).unwrap_or(false),
        },
        tags: strings(req, "tags")?.unwrap_or_default(),
    })
}

/// `POST …/instances`.
fn create(state: &mut State, req: &Req<'_>, region: &str) -> Reply {
    let project = req.str("project_id");
    let organization = req.str("organization_id");
    if project.is_none() && organization.is_none() {
        return Reply::invalid("project_id", "is required");
    }
    if let Some(refused) = state.foreign_project(project) {
        return refused;
    }
    if let Some(org) = organization.filter(|o| *o != state.organization) {
        return Reply::denied(format!(
            "the organization {org} cannot be reached with this key"
        ));
    }
    let id = state.new_id();
    let asked = match asked(req, &id) {
        Ok(asked) => asked,
        Err(refused) => return refused,
    };
    state.rdb.made += 1;
    let n = state.rdb.made;
    let endpoint = json!({
        "id": state.new_id(),
        "ip": format!("51.159.{}.{}", 100 + n / 250, 1 + n % 250),
        "port": 20_000 + n,
        "name": null,
        "load_balancer": {},
    });
    let instance = Instance {
        id: id.clone(),
        region: region.to_owned(),
        project: project.map_or_else(|| state.project.clone(), str::to_owned),
        name: asked.name,
        engine: asked.engine,
        node_type: asked.node.name,
        is_ha: asked.is_ha,
        volume_type: asked.volume.name,
        volume_size: asked.size,
        backup: Backup {
            disabled: asked.disable_backup,
            frequency: 24,
            retention: 7,
            same_region: asked.same_region,
            start_hour: 0,
        },
        tags: asked.tags,
        created_at: state.timestamp(),
        endpoint,
        provisioned: state.settle().after("provisioning", "ready"),
        encryption: asked.encryption,
        status: state.settle().after("provisioning", "ready"),
        deleting: false,
        users: asked.user.into_iter().map(|u| (u, true)).collect(),
        order: n,
    };
    let body = instance_json(&instance, &state.organization, instance.status.status());
    state.rdb.instances.insert(id, instance);
    Reply::ok(body)
}

/// The changes an `UpdateInstance` asks for, checked; applied only when all are valid.
fn update_changes(req: &Req<'_>) -> Result<Vec<(&'static str, Value)>, Reply> {
    let mut out = Vec::new();
    if let Some(name) = field(req, "name") {
        match name.as_str() {
            Some(n) if !n.is_empty() && n.chars().count() <= 255 => {
                out.push(("name", name.clone()))
            }
            _ => return Err(Reply::invalid("name", "must be 1 to 255 characters")),
        }
    }
    if let Some(tags) = strings(req, "tags")? {
        out.push(("tags", json!(tags)));
    }
    let ranges: [(&'static str, u64, u64); 3] = [
        ("backup_schedule_frequency", 1, 168),
        ("backup_schedule_retention", 1, 365),
        ("backup_schedule_start_hour", 0, 23),
    ];
    for (name, least, most) in ranges {
        if let Some(value) = field(req, name) {
            match uint(value) {
                Ok(v) if (least..=most).contains(&v) => out.push((name, json!(v))),
                _ => {
                    return Err(Reply::invalid(name, format!("must be {least} to {most}")));
                }
            }
        }
    }
    for name in ["is_backup_schedule_disabled", "backup_same_region"] {
        if field(req, name).is_some() {
            out.push((name, json!(flag(req, name, false)?)));
        }
    }
    Ok(out)
}

/// `PATCH …/instances/{id}`.
fn update(state: &mut State, req: &Req<'_>, region: &str, id: &str) -> Reply {
    let organization = state.organization.clone();
    let instance = match state.rdb.idle(region, id) {
        Ok(instance) => instance,
        Err(refused) => return refused,
    };
    let changes = match update_changes(req) {
        Ok(changes) => changes,
        Err(refused) => return refused,
    };
    for (name, value) in changes {
        let number = value.as_u64().unwrap_or_default();
        match name {
            "name" => instance.name = value.as_str().unwrap_or_default().to_owned(),
            "tags" => instance.tags = serde_json::from_value(value).unwrap_or_default(),
            "backup_schedule_frequency" => instance.backup.frequency = number,
            "backup_schedule_retention" => instance.backup.retention = number,
            "backup_schedule_start_hour" => instance.backup.start_hour = number,
            "is_backup_schedule_disabled" => instance.backup.disabled = value == json!(true),
            _ => instance.backup.same_region = value == json!(true),
        }
    }
    Reply::ok(instance_json(
        instance,
        &organization,
        instance.status.status(),
    ))
}

/// `DELETE …/instances/{id}`: the instance is `deleting`, then gone.
fn delete(state: &mut State, region: &str, id: &str) -> Reply {
    let organization = state.organization.clone();
    let settle = state.settle();
    match state.rdb.idle(region, id) {
        Ok(instance) => {
            instance.deleting = true;
            instance.status = settle.after("deleting", "deleting");
            Reply::ok(instance_json(instance, &organization, "deleting"))
        }
        Err(refused) => refused,
    }
}

/// The one upgrade target a request names, or 400.
fn upgrade_target<'r>(req: &'r Req<'_>) -> Result<(&'static str, &'r Value), Reply> {
    let given: Vec<(&'static str, &Value)> = UPGRADE_TARGETS
        .iter()
        .filter_map(|name| field(req, name).map(|v| (*name, v)))
        .collect();
    match given.as_slice() {
        [one] => Ok(*one),
        _ => Err(Reply::invalid(
            "upgrade_target",
            format!(
                "exactly one of {} must be given ({} were)",
                UPGRADE_TARGETS.join(", "),
                given.len()
            ),
        )),
    }
}

/// Applies one upgrade to `i`, or refuses it.
fn apply_upgrade(i: &mut Instance, target: &str, value: &Value) -> Result<(), Reply> {
    let current = find_volume(i.volume_type).unwrap_or(&VOLUME_TYPES[0]);
    match target {
        "node_type" => {
            let node = value
                .as_str()
                .and_then(find_node)
                .ok_or_else(|| Reply::invalid("node_type", "unknown node type (see node-types)"))?;
            if node.name == i.node_type {
                return Err(Reply::invalid(
                    "node_type",
                    "is the instance's node type already",
                ));
            }
            if !offers(node, current) {
                return Err(Reply::invalid(
                    "node_type",
                    format!("node type {} offers no {} volume", node.name, current.name),
                ));
            }
            i.node_type = node.name;
            if current.name == "lssd" {
                i.volume_size = node.lssd_gb * GB;
            }
        }
        "volume_size" => {
            let size = uint(value)
                .map_err(|()| Reply::invalid("volume_size", "must be a size in bytes"))?;
            if current.name == "lssd" {
                return Err(Reply::invalid(
                    "volume_size",
                    "a local SSD volume has the size of its node type; move to a block volume first",
                ));
            }
            if size <= i.volume_size {
                return Err(Reply::invalid(
                    "volume_size",
                    "the volume can only be upgraded to a larger size",
                ));
            }
            if let Some(why) = size_problem(current, size) {
                return Err(Reply::invalid("volume_size", why));
            }
            i.volume_size = size;
        }
        "volume_type" => upgrade_volume_type(i, value)?,
        "enable_ha" | "enable_encryption" => {
            if value != &json!(true) {
                return Err(Reply::invalid(target, "can only be set to true"));
            }
            if target == "enable_ha" {
                i.is_ha = true;
            } else {
                i.encryption = true;
            }
        }
        _ => {
            return Err(Reply::invalid(
                target,
                "not an upgradable version of this instance (see its upgradable_version)",
            ));
        }
    }
    Ok(())
}

/// An upgrade of the volume type of `i`.
fn upgrade_volume_type(i: &mut Instance, value: &Value) -> Result<(), Reply> {
    let node = find_node(i.node_type).unwrap_or(&NODE_TYPES[0]);
    let volume = value
        .as_str()
        .and_then(find_volume)
        .ok_or_else(|| Reply::invalid("volume_type", "unknown volume type"))?;
    if volume.name == i.volume_type || volume.name == "lssd" || !offers(node, volume) {
        return Err(Reply::invalid(
            "volume_type",
            format!("cannot move from {} to {}", i.volume_type, volume.name),
        ));
    }
    let chunk = volume.chunk_gb * GB;
    i.volume_size = (i.volume_size.max(volume.min_gb * GB)).div_ceil(chunk) * chunk;
    i.volume_type = volume.name;
    Ok(())
}

/// `POST …/instances/{id}/upgrade`: one change, after which the instance is
/// `configuring` for a while.
fn upgrade(state: &mut State, req: &Req<'_>, region: &str, id: &str) -> Reply {
    let organization = state.organization.clone();
    let settle = state.settle();
    let instance = match state.rdb.idle(region, id) {
        Ok(instance) => instance,
        Err(refused) => return refused,
    };
    let outcome =
        upgrade_target(req).and_then(|(target, value)| apply_upgrade(instance, target, value));
    if let Err(refused) = outcome {
        return refused;
    }
    instance.status = settle.after("configuring", "ready");
    Reply::ok(instance_json(
        instance,
        &organization,
        instance.status.status(),
    ))
}

fn user_json(name: &str, is_admin: bool) -> Value {
    json!({ "name": name, "is_admin": is_admin })
}

/// `GET …/instances/{id}/users`, filtered by `name`.
fn users_list(state: &mut State, req: &Req<'_>, region: &str, id: &str) -> Reply {
    let instance = match state.rdb.idle(region, id) {
        Ok(instance) => instance,
        Err(refused) => return refused,
    };
    let order = req.param("order_by").unwrap_or("name_asc");
    if !["name_asc", "name_desc", "is_admin_asc", "is_admin_desc"].contains(&order) {
        return Reply::invalid("order_by", format!("unknown order {order:?}"));
    }
    let mut users: Vec<&(String, bool)> = instance
        .users
        .iter()
        .filter(|(n, _)| req.param("name").is_none_or(|w| w == n))
        .collect();
    users.sort_by(|a, b| match order {
        "name_desc" => b.0.cmp(&a.0),
        "is_admin_asc" => a.1.cmp(&b.1).then(a.0.cmp(&b.0)),
        "is_admin_desc" => b.1.cmp(&a.1).then(a.0.cmp(&b.0)),
        _ => a.0.cmp(&b.0),
    });
    let items = users.into_iter().map(|(n, a)| user_json(n, *a)).collect();
    Reply::page(req, "users", items)
}

/// `POST …/instances/{id}/users`.
fn user_create(state: &mut State, req: &Req<'_>, region: &str, id: &str) -> Reply {
    let instance = match state.rdb.idle(region, id) {
        Ok(instance) => instance,
        Err(refused) => return refused,
    };
    let Some(name) = req.str("name") else {
        return Reply::invalid("name", "is required");
    };
    if let Some(why) = user_problem(name, &instance.engine) {
        return Reply::invalid("name", why);
    }
    if let Err(refused) = check_password(req, "password", true) {
        return refused;
    }
    let is_admin = match flag(req, "is_admin", false) {
        Ok(a) => a,
        Err(refused) => return refused,
    };
    if instance.users.iter().any(|(n, _)| n == name) {
        return Reply::exists("user", name);
    }
    instance.users.push((name.to_owned(), is_admin));
    Reply::ok(user_json(name, is_admin))
}

/// `PATCH …/instances/{id}/users/{name}`: a new password, or administrator or not.
fn user_update(state: &mut State, req: &Req<'_>, region: &str, id: &str, name: &str) -> Reply {
    let instance = match state.rdb.idle(region, id) {
        Ok(instance) => instance,
        Err(refused) => return refused,
    };
    if let Err(refused) = check_password(req, "password", false) {
        return refused;
    }
    let Some(user) = instance.users.iter_mut().find(|(n, _)| n == name) else {
        return Reply::not_found("user", name);
    };
    match flag(req, "is_admin", user.1) {
        Ok(admin) => user.1 = admin,
        Err(refused) => return refused,
    }
    Reply::ok(user_json(&user.0, user.1))
}

/// `DELETE …/instances/{id}/users/{name}`.
fn user_delete(state: &mut State, region: &str, id: &str, name: &str) -> Reply {
    let instance = match state.rdb.idle(region, id) {
        Ok(instance) => instance,
        Err(refused) => return refused,
    };
    let before = instance.users.len();
    instance.users.retain(|(n, _)| n != name);
    if instance.users.len() == before {
        return Reply::not_found("user", name);
    }
    Reply::no_content()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_follow_scaleways_rule() {
        assert_eq!(password_problem("Abcdef1-"), None);
        assert!(password_problem("Ab1-").is_some(), "too short");
        assert!(password_problem("abcdefg1-").is_some(), "no uppercase");
        assert!(password_problem("ABCDEFG1-").is_some(), "no lowercase");
        assert!(password_problem("Abcdefgh-").is_some(), "no digit");
        assert!(
            password_problem("Abcdefgh1").is_some(),
            "no special character"
        );
        assert!(password_problem(&format!("Ab1-{}", "x".repeat(125))).is_some());
    }

    #[test]
    fn user_names_follow_scaleways_rule() {
        assert_eq!(user_problem("app_user$1-x", "PostgreSQL-16"), None);
        for bad in ["", "1app", "_rdbx", "pg_app", "app user", "app.user"] {
            assert!(user_problem(bad, "PostgreSQL-16").is_some(), "{bad}");
        }
        let long = "a".repeat(40);
        assert_eq!(user_problem(&long, "PostgreSQL-16"), None);
        assert!(user_problem(&long, "MySQL-8").is_some());
    }

    #[test]
    fn volume_sizes_are_bytes_in_steps_from_a_least() {
        let sbs = find_volume("sbs_5k").unwrap();
        assert_eq!(size_problem(sbs, 20 * GB), None);
        assert!(size_problem(sbs, 4 * GB).is_some());
        assert!(size_problem(sbs, 20 * GB + 1).is_some());
        assert!(size_problem(sbs, 10_001 * GB).is_some());
        let bssd = find_volume("bssd").unwrap();
        assert!(size_problem(bssd, 21 * GB).is_some());
        assert_eq!(size_problem(bssd, 25 * GB), None);
        assert!(find_node("DB-DEV-S").is_some_and(|n| n.name == "db-dev-s"));
        let play = find_node("db-play2-pico").unwrap();
        assert!(!offers(play, find_volume("lssd").unwrap()));
    }
}
