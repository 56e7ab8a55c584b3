//! The Serverless Containers stand-in (`containers/v1beta1`): namespaces and the
//! containers in them, from memory, as Scaleway documents them.
//!
//! Served, under `/containers/v1beta1/regions/{region}`:
//!
//! | call | request |
//! |---|---|
//! | ListNamespaces | `GET …/namespaces?project_id=&name=&page=&page_size=` |
//! | CreateNamespace | `POST …/namespaces` |
//! | GetNamespace | `GET …/namespaces/{id}` |
//! | UpdateNamespace | `PATCH …/namespaces/{id}` |
//! | DeleteNamespace | `DELETE …/namespaces/{id}` |
//! | ListContainers | `GET …/containers?namespace_id=&name=&project_id=&page=&page_size=` |
//! | CreateContainer | `POST …/containers` |
//! | GetContainer | `GET …/containers/{id}` |
//! | UpdateContainer | `PATCH …/containers/{id}` |
//! | DeleteContainer | `DELETE …/containers/{id}` |
//! | DeployContainer | `POST …/containers/{id}/deploy` |
//!
//! Statuses move over reads of the resource (`GET`; listings show the status without
//! counting): a new namespace is `pending`, then `ready`; a new container is `created`
//! and stays so until deployed; a deploy makes it `pending`, then `ready`. An update of
//! a deployed container redeploys it (`pending`, then `ready`) unless `redeploy` is
//! `false`; an update of a namespace's variables makes it `pending` and redeploys its
//! `ready` containers. A delete answers the resource `deleting`; it goes on answering
//! so for a few reads, then is gone (404). Deleting a namespace deletes its
//! containers with it, as Scaleway does. An update or a deploy of a resource in a
//! transient status (`pending`, `deleting`) answers 409 `transient_state`, as does a
//! container created in a namespace in one, or a delete of what is being deleted.
//!
//! Refused as Scaleway refuses them (400 `invalid_arguments` naming the argument,
//! unless said): an unknown region; a namespace name that is not 1 to 63 lowercase
//! letters, digits and hyphens starting with a letter and ending with a letter or a
//! digit, a container name the same in at most 34; a name taken in the project and
//! region (namespaces) or in the namespace (containers) (409 `already_exists`); a
//! missing or foreign `project_id` (403 `permissions_denied` for a foreign one, on
//! listings too); more than 100 namespaces in a project (403 `quotas_exceeded`); an
//! unknown namespace or container (404 `not_found`, resource `namespace` or
//! `container`); `ListContainers` without `namespace_id`; an image reference that is
//! not a registry path; a port outside 1 to 65535 or one of 8008, 8012, 8013, 8022,
//! 9090, 9091; CPU outside 70 to 6000 mvCPU, memory outside 128 to 12228 MB, or
//! memory outside 1 to 4 MB per mvCPU (Scaleway's "2000 mvCPU require a minimum of
//! 2000 MB and a maximum of 8000 MB of memory"); `min_scale` above 50 or above
//! `max_scale`, `max_scale` outside 1 to 50; a `timeout` that is not a whole number of
//! seconds (`"300s"`) from 1 to 900; an unknown `privacy`, `protocol`, `http_option` or
//! `sandbox`; an environment variable with no name, a `=` in its name, `PORT` or
//! `SCW_*`, a value over 1000 characters, more than 100 variables on a container and
//! its namespace together; a secret variable without a value on a create, or one over
//! 65536 bytes; a deploy of a container without an image.
//!
//! Secret variables are kept as a digest of their value (the stand-in's own, not
//! Scaleway's) and answered as `{key, hashed_value}`; an update merges them: a key with
//! a value sets it, a key without one removes it. Defaults as Scaleway fills them: 1000
//! mvCPU, 2048 MB, `min_scale` 0, `max_scale` 20, `timeout` `"300s"`, port 8080,
//! `public`, `http1`, `enabled`, sandbox `v2`, `max_concurrency` 80.
//!
//! Not modelled: the Container Registry namespace a containers namespace makes (its
//! `registry_endpoint` and `registry_namespace_id` are made up, and nothing appears in
//! the registry stand-in), images being pulled (any well-formed reference deploys),
//! deploys that fail, crons, domains, tokens and triggers, health checks, scaling
//! options, private networks, and the organization's container and memory quotas.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash as _, Hasher as _};

use serde_json::{Map, Value, json};

use super::State;
use super::wire::{Reply, Req, Settling, unknown_region};

const PREFIX: &str = "/containers/v1beta1/regions";
/// Ports the platform keeps for itself.
const RESERVED_PORTS: [u64; 6] = [8008, 8012, 8013, 8022, 9090, 9091];
/// The status a deleted resource settles to: it is then gone.
const GONE: &str = "gone";

/// The product's resources.
#[derive(Debug, Default)]
pub(crate) struct Containers {
    namespaces: BTreeMap<String, Namespace>,
    containers: BTreeMap<String, Ctr>,
}

/// A containers namespace.
#[derive(Debug)]
struct Namespace {
    id: String,
    region: String,
    name: String,
    project: String,
    organization: String,
    description: Option<String>,
    env: BTreeMap<String, String>,
    /// Secret variables: key → digest of the value.
    secrets: BTreeMap<String, String>,
    tags: Vec<String>,
    status: Settling,
    registry_namespace_id: String,
    created_at: String,
    updated_at: String,
}

/// A container.
#[derive(Debug)]
struct Ctr {
    id: String,
    region: String,
    namespace_id: String,
    name: String,
    env: BTreeMap<String, String>,
    secrets: BTreeMap<String, String>,
    settings: Map<String, Value>,
    tags: Vec<String>,
    status: Settling,
    deployed: bool,
    domain_name: String,
    created_at: String,
    updated_at: String,
    ready_at: Option<String>,
}

/// Serves a request of the product, or `None` when the path is not one of its.
pub(crate) fn route(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let rest = req.under(PREFIX)?;
    let (region, rest) = rest.split_first()?;
    let region = (*region).to_owned();
    if let Some(refused) = unknown_region(&region) {
        return Some(refused);
    }
    sweep(&mut state.containers);
    let reply = match (req.method, rest) {
        ("GET", ["namespaces"]) => list_namespaces(state, req, &region),
        ("POST", ["namespaces"]) => create_namespace(state, req, &region),
        ("GET", ["namespaces", id]) => get_namespace(state, &region, id),
        ("PATCH", ["namespaces", id]) => update_namespace(state, req, &region, id),
        ("DELETE", ["namespaces", id]) => delete_namespace(state, &region, id),
        ("GET", ["containers"]) => list_containers(state, req, &region),
        ("POST", ["containers"]) => create_container(state, req, &region),
        ("GET", ["containers", id]) => get_container(state, &region, id),
        ("PATCH", ["containers", id]) => update_container(state, req, &region, id),
        ("DELETE", ["containers", id]) => delete_container(state, &region, id),
        ("POST", ["containers", id, "deploy"]) => deploy_container(state, &region, id),
        _ => return None,
    };
    Some(reply.unwrap_or_else(|refusal| refusal))
}

/// Forgets what has finished being deleted, and the containers of a namespace gone.
fn sweep(all: &mut Containers) {
    all.namespaces.retain(|_, ns| ns.status.status() != GONE);
    let namespaces = &all.namespaces;
    all.containers
        .retain(|_, c| c.status.status() != GONE && namespaces.contains_key(&c.namespace_id));
}

// ---- Validation --------------------------------------------------------------------

/// Whether `name` is 1 to `max` lowercase letters, digits and hyphens, starting with a
/// letter and ending with a letter or a digit.
fn name_ok(name: &str, max: usize) -> bool {
    (1..=max).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Whether `image` is a registry path: `[host[:port]/]path[:tag][@alg:hex]`, the path's
/// components lowercase letters and digits joined by `.`, `_` or `-`.
fn image_ok(image: &str) -> bool {
    let (rest, pinned) = image.split_once('@').unwrap_or((image, ""));
    if image.contains('@')
        && !pinned.split_once(':').is_some_and(|(alg, hex)| {
            !alg.is_empty() && hex.len() >= 32 && hex.chars().all(|c| c.is_ascii_hexdigit())
        })
    {
        return false;
    }
    let slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[slash..].split_once(':') {
        Some((last, tag)) => (&rest[..slash + last.len()], tag),
        None => (rest, "latest"),
    };
    let tag_ok = (1..=128).contains(&tag.len())
        && tag.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    let mut parts: Vec<&str> = name.split('/').collect();
    if parts.len() > 1 && (parts[0].contains(['.', ':']) || parts[0] == "localhost") {
        let host = parts.remove(0);
        let host_ok = host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'));
        if !host_ok || host.starts_with(['.', '-', ':']) {
            return false;
        }
    }
    let component_ok = |p: &&str| {
        let edge = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        p.starts_with(edge)
            && p.ends_with(edge)
            && p.chars().all(|c| edge(c) || matches!(c, '.' | '_' | '-'))
            && !p.contains("..")
            && !p.contains("___")
    };
    tag_ok && name.len() <= 255 && !parts.is_empty() && parts.iter().all(component_ok)
}

/// The refusal of an environment variable Scaleway refuses, or `None`.
fn env_refusal(argument: &str, key: &str, value: Option<&str>) -> Option<Reply> {
    if key.is_empty() || key.contains('=') {
        return Some(Reply::invalid(
            argument,
            format!("{key:?} is not a variable name"),
        ));
    }
    if key == "PORT" || key.starts_with("SCW_") {
        return Some(Reply::invalid(
            argument,
            format!("{key} is reserved (PORT and SCW_* are set by the platform)"),
        ));
    }
    if value.is_some_and(|v| v.chars().count() > 1000) {
        return Some(Reply::invalid(
            argument,
            format!("the value of {key} is longer than 1000 characters"),
        ));
    }
    None
}

/// The body's `field` as a map of strings (`None` when absent or null).
fn string_map(body: &Value, field: &str) -> Result<Option<BTreeMap<String, String>>, Reply> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => {
            let mut out = BTreeMap::new();
            for (key, value) in map {
                let Some(value) = value.as_str() else {
                    return Err(Reply::invalid(
                        field,
                        format!("the value of {key} is not a string"),
                    ));
                };
                if let Some(refused) = env_refusal(field, key, Some(value)) {
                    return Err(refused);
                }
                out.insert(key.clone(), value.to_owned());
            }
            Ok(Some(out))
        }
        Some(_) => Err(Reply::invalid(field, "not a map of strings")),
    }
}

/// A digest of a secret value: what is kept and answered instead of it.
fn digest(value: &str) -> String {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    format!("$stand-in${:016x}", hasher.finish())
}

/// The body's `secret_environment_variables`, merged into `into`: a value sets the
/// key, no value removes it (refused on a create, where every key needs one).
fn merge_secrets(
    body: &Value,
    into: &mut BTreeMap<String, String>,
    create: bool,
) -> Result<bool, Reply> {
    const FIELD: &str = "secret_environment_variables";
    let vars = match body.get(FIELD) {
        None | Some(Value::Null) => return Ok(false),
        Some(Value::Array(vars)) => vars,
        Some(_) => return Err(Reply::invalid(FIELD, "not a list of {key, value}")),
    };
    for var in vars {
        let Some(key) = var.get("key").and_then(Value::as_str) else {
            return Err(Reply::invalid(FIELD, "an entry has no `key`"));
        };
        if let Some(refused) = env_refusal(FIELD, key, None) {
            return Err(refused);
        }
        match var.get("value").and_then(Value::as_str) {
            Some(value) if value.len() > 65536 => {
                return Err(Reply::invalid(
                    FIELD,
                    format!("the value of {key} is over 65536 bytes"),
                ));
            }
            Some(value) => {
                into.insert(key.to_owned(), digest(value));
            }
            None if create => {
                return Err(Reply::invalid(FIELD, format!("{key} has no value")));
            }
            None => {
                into.remove(key);
            }
        }
    }
    Ok(true)
}

/// The body's `tags`, when given.
fn tags_of(body: &Value) -> Result<Option<Vec<String>>, Reply> {
    match body.get("tags") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(tags)) => tags
            .iter()
            .map(|t| {
                t.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| Reply::invalid("tags", "a tag is not a string"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(Reply::invalid("tags", "not a list of strings")),
    }
}

/// The body's `description`, when given.
fn description_of(body: &Value) -> Result<Option<String>, Reply> {
    match body.get("description") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(d)) => Ok(Some(d.clone())),
        Some(_) => Err(Reply::invalid("description", "not a string")),
    }
}

/// The refusal of a project that is missing or not the stand-in's.
fn project_refusal(state: &State, project: Option<&str>) -> Option<Reply> {
    match project {
        None | Some("") => Some(Reply::invalid("project_id", "a project is required")),
        other => state.foreign_project(other),
    }
}

// ---- Namespaces --------------------------------------------------------------------

fn namespace_json(ns: &Namespace, status: &str) -> Value {
    let prefix: String = ns.name.chars().filter(|c| *c != '-').collect();
    let secrets: Vec<Value> = ns
        .secrets
        .iter()
        .map(|(k, h)| json!({ "key": k, "hashed_value": h }))
        .collect();
    json!({
        "id": ns.id,
        "name": ns.name,
        "environment_variables": ns.env,
        "organization_id": ns.organization,
        "project_id": ns.project,
        "status": status,
        "registry_namespace_id": ns.registry_namespace_id,
        "error_message": null,
        "registry_endpoint": format!("rg.{}.scw.cloud/funcscw{prefix}{}", ns.region, &ns.id[..8]),
        "description": ns.description.as_deref().filter(|d| !d.is_empty()),
        "secret_environment_variables": secrets,
        "region": ns.region,
        "tags": ns.tags,
        "created_at": ns.created_at,
        "updated_at": ns.updated_at,
        "vpc_integration_activated": true,
    })
}

fn namespace_mut<'a>(
    state: &'a mut State,
    region: &str,
    id: &str,
) -> Result<&'a mut Namespace, Reply> {
    state
        .containers
        .namespaces
        .get_mut(id)
        .filter(|ns| ns.region == region)
        .ok_or_else(|| Reply::not_found("namespace", id))
}

fn list_namespaces(state: &mut State, req: &Req<'_>, region: &str) -> Result<Reply, Reply> {
    if let Some(refused) = state.foreign_project(req.param("project_id")) {
        return Err(refused);
    }
    let name = req.param("name");
    let items = state
        .containers
        .namespaces
        .values()
        .filter(|ns| ns.region == region && ns.project == state.project)
        .filter(|ns| name.is_none_or(|n| n == ns.name))
        .map(|ns| namespace_json(ns, ns.status.status()))
        .collect();
    Ok(Reply::page(req, "namespaces", items))
}

fn create_namespace(state: &mut State, req: &Req<'_>, region: &str) -> Result<Reply, Reply> {
    if let Some(refused) = project_refusal(state, req.str("project_id")) {
        return Err(refused);
    }
    let name = req.str("name").unwrap_or_default().to_owned();
    if !name_ok(&name, 63) {
        return Err(Reply::invalid(
            "name",
            "namespace name must begin with a letter, followed by lowercase letters, numbers \
             or hyphens, and end with a letter or number (at most 63)",
        ));
    }
    let all = &state.containers.namespaces;
    let mine = all.values().filter(|ns| ns.project == state.project);
    if mine
        .clone()
        .any(|ns| ns.region == region && ns.name == name)
    {
        return Err(Reply::exists("namespace", &name));
    }
    if mine.count() >= 100 {
        return Err(Reply::quota("namespaces", 100));
    }
    let env = string_map(req.body, "environment_variables")?.unwrap_or_default();
    let mut secrets = BTreeMap::new();
    merge_secrets(req.body, &mut secrets, true)?;
    if env.len() + secrets.len() > 100 {
        return Err(Reply::invalid(
            "environment_variables",
            "more than 100 variables",
        ));
    }
    let (id, registry_namespace_id, now) = (state.new_id(), state.new_id(), state.timestamp());
    let ns = Namespace {
        id: id.clone(),
        region: region.to_owned(),
        name,
        project: state.project.clone(),
        organization: state.organization.clone(),
        description: description_of(req.body)?,
        env,
        secrets,
        tags: tags_of(req.body)?.unwrap_or_default(),
        status: Settling::after("pending", "ready", state.settle_reads),
        registry_namespace_id,
        created_at: now.clone(),
        updated_at: now,
    };
    let answer = namespace_json(&ns, ns.status.status());
    state.containers.namespaces.insert(id, ns);
    Ok(Reply::ok(answer))
}

fn get_namespace(state: &mut State, region: &str, id: &str) -> Result<Reply, Reply> {
    let ns = namespace_mut(state, region, id)?;
    let status = ns.status.read();
    Ok(Reply::ok(namespace_json(ns, status)))
}

fn update_namespace(
    state: &mut State,
    req: &Req<'_>,
    region: &str,
    id: &str,
) -> Result<Reply, Reply> {
    let reads = state.settle_reads;
    let now = state.timestamp();
    let ns = namespace_mut(state, region, id)?;
    if ns.status.busy() {
        return Err(Reply::transient("namespace", id, ns.status.status()));
    }
    let env = string_map(req.body, "environment_variables")?;
    let description = description_of(req.body)?;
    let tags = tags_of(req.body)?;
    let mut secrets = ns.secrets.clone();
    let secrets_given = merge_secrets(req.body, &mut secrets, false)?;
    let variables_changed = env.as_ref().is_some_and(|e| *e != ns.env) || secrets != ns.secrets;
    if let Some(env) = env {
        ns.env = env;
    }
    if secrets_given {
        ns.secrets = secrets;
    }
    if let Some(description) = description {
        ns.description = Some(description);
    }
    if let Some(tags) = tags {
        ns.tags = tags;
    }
    ns.updated_at = now;
    if variables_changed {
        ns.status = Settling::after("pending", "ready", reads);
    }
    let answer = namespace_json(ns, ns.status.status());
    if variables_changed {
        // Every ready container of the namespace is redeployed with the new variables.
        let ready = state.containers.containers.values_mut();
        for c in ready.filter(|c| c.namespace_id == id && c.status.status() == "ready") {
            c.status = Settling::after("pending", "ready", reads);
        }
    }
    Ok(Reply::ok(answer))
}

fn delete_namespace(state: &mut State, region: &str, id: &str) -> Result<Reply, Reply> {
    let reads = state.settle_reads;
    let ns = namespace_mut(state, region, id)?;
    if ns.status.transient == "deleting" {
        return Err(Reply::transient("namespace", id, "deleting"));
    }
    ns.status = Settling::after("deleting", GONE, reads);
    let answer = namespace_json(ns, "deleting");
    let inside = state.containers.containers.values_mut();
    for c in inside.filter(|c| c.namespace_id == id) {
        c.status = Settling::after("deleting", GONE, reads);
    }
    Ok(Reply::ok(answer))
}

// ---- Containers --------------------------------------------------------------------

fn container_json(c: &Ctr, status: &str) -> Value {
    let secrets: Vec<Value> = c
        .secrets
        .iter()
        .map(|(k, h)| json!({ "key": k, "hashed_value": h }))
        .collect();
    let mut out = json!({
        "id": c.id,
        "name": c.name,
        "namespace_id": c.namespace_id,
        "status": status,
        "environment_variables": c.env,
        "secret_environment_variables": secrets,
        "error_message": null,
        "domain_name": c.domain_name,
        "region": c.region,
        "tags": c.tags,
        "created_at": c.created_at,
        "updated_at": c.updated_at,
        "ready_at": c.ready_at.as_ref().filter(|_| status == "ready"),
        "command": [],
        "args": [],
    });
    if let Some(out) = out.as_object_mut() {
        out.extend(c.settings.clone());
    }
    out
}

fn container_mut<'a>(state: &'a mut State, region: &str, id: &str) -> Result<&'a mut Ctr, Reply> {
    state
        .containers
        .containers
        .get_mut(id)
        .filter(|c| c.region == region)
        .ok_or_else(|| Reply::not_found("container", id))
}

/// Scaleway's defaults for what a create leaves out.
fn default_settings() -> Map<String, Value> {
    let defaults = json!({
        "cpu_limit": 1000, "memory_limit": 2048, "min_scale": 0, "max_scale": 20,
        "timeout": "300s", "port": 8080, "privacy": "public", "protocol": "http1",
        "http_option": "enabled", "sandbox": "v2", "max_concurrency": 80,
        "local_storage_limit": 1000, "description": null, "registry_image": null,
    });
    match defaults {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Applies the settings `body` gives over `settings`, refusing what Scaleway refuses.
fn apply_settings(settings: &mut Map<String, Value>, body: &Value) -> Result<(), Reply> {
    let numbers = [
        "cpu_limit",
        "memory_limit",
        "min_scale",
        "max_scale",
        "port",
        "max_concurrency",
        "local_storage_limit",
    ];
    for field in numbers {
        match body.get(field) {
            None | Some(Value::Null) => {}
            Some(v) if v.as_u64().is_some_and(|n| n <= u64::from(u32::MAX)) => {
                settings.insert(field.to_owned(), v.clone());
            }
            Some(_) => return Err(Reply::invalid(field, "not a whole number")),
        }
    }
    let choices: [(&str, &[&str]); 4] = [
        ("privacy", &["public", "private"]),
        ("protocol", &["http1", "h2c"]),
        ("http_option", &["enabled", "redirected"]),
        ("sandbox", &["v1", "v2"]),
    ];
    for (field, allowed) in choices {
        match body.get(field) {
            None | Some(Value::Null) => {}
            // What Scaleway's SDKs send for "not said": the setting is kept (on a create,
            // the default).
            Some(Value::String(s)) if s == "unknown_privacy" && field == "privacy" => {}
            Some(Value::String(s)) if allowed.contains(&s.as_str()) => {
                settings.insert(field.to_owned(), json!(s));
            }
            Some(_) => {
                return Err(Reply::invalid(
                    field,
                    format!("one of {}", allowed.join(", ")),
                ));
            }
        }
    }
    for field in ["timeout", "registry_image", "description"] {
        match body.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => {
                settings.insert(field.to_owned(), json!(s));
            }
            Some(_) => return Err(Reply::invalid(field, "not a string")),
        }
    }
    check_settings(settings)
}

/// Refuses settings that do not hold together.
fn check_settings(settings: &Map<String, Value>) -> Result<(), Reply> {
    let n = |field: &str| {
        settings
            .get(field)
            .and_then(Value::as_u64)
            .unwrap_or_default()
    };
    let (cpu, memory) = (n("cpu_limit"), n("memory_limit"));
    if !(70..=6000).contains(&cpu) {
        return Err(Reply::invalid("cpu_limit", "70 to 6000 mvCPU"));
    }
    if !(128..=12228).contains(&memory) {
        return Err(Reply::invalid("memory_limit", "128 to 12228 MB"));
    }
    let (least, most) = (cpu.max(128), cpu * 4);
    if !(least..=most).contains(&memory) {
        return Err(Reply::invalid(
            "memory_limit",
            format!(
                "{cpu} mvCPU require a minimum of {least} MB and a maximum of {most} MB of memory"
            ),
        ));
    }
    let (min, max) = (n("min_scale"), n("max_scale"));
    if min > 50 || !(1..=50).contains(&max) || min > max {
        return Err(Reply::invalid(
            "max_scale",
            "0 <= min_scale <= max_scale, max_scale from 1 to 50",
        ));
    }
    let port = n("port");
    if !(1..=65535).contains(&port) || RESERVED_PORTS.contains(&port) {
        return Err(Reply::invalid(
            "port",
            "1 to 65535, except 8008, 8012, 8013, 8022, 9090 and 9091",
        ));
    }
    let timeout = settings
        .get("timeout")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let seconds = timeout
        .strip_suffix('s')
        .and_then(|s| s.parse::<u64>().ok());
    if !seconds.is_some_and(|s| (1..=900).contains(&s)) {
        return Err(Reply::invalid("timeout", "a duration of 1s to 900s"));
    }
    match settings.get("registry_image").and_then(Value::as_str) {
        Some(image) if !image_ok(image) => Err(Reply::invalid(
            "registry_image",
            format!(
                "{image:?} is not an image reference (rg.fr-par.scw.cloud/namespace/image:tag)"
            ),
        )),
        _ => Ok(()),
    }
}

/// The refusal of more than 100 variables on a container and its namespace together.
fn too_many_variables(ns: &Namespace, env: usize, secrets: usize) -> Option<Reply> {
    let total = ns.env.len() + ns.secrets.len() + env + secrets;
    (total > 100).then(|| {
        Reply::invalid(
            "environment_variables",
            format!("{total} variables on the container and its namespace; at most 100"),
        )
    })
}

fn list_containers(state: &mut State, req: &Req<'_>, region: &str) -> Result<Reply, Reply> {
    if let Some(refused) = state.foreign_project(req.param("project_id")) {
        return Err(refused);
    }
    let Some(namespace) = req.param("namespace_id") else {
        return Err(Reply::invalid("namespace_id", "a namespace is required"));
    };
    let name = req.param("name");
    let items = state
        .containers
        .containers
        .values()
        .filter(|c| c.region == region && c.namespace_id == namespace)
        .filter(|c| name.is_none_or(|n| n == c.name))
        .map(|c| container_json(c, c.status.status()))
        .collect();
    Ok(Reply::page(req, "containers", items))
}

fn create_container(state: &mut State, req: &Req<'_>, region: &str) -> Result<Reply, Reply> {
    let namespace_id = req.str("namespace_id").unwrap_or_default().to_owned();
    if namespace_id.is_empty() {
        return Err(Reply::invalid("namespace_id", "a namespace is required"));
    }
    let ns = namespace_mut(state, region, &namespace_id)?;
    if ns.status.busy() {
        return Err(Reply::transient(
            "namespace",
            &namespace_id,
            ns.status.status(),
        ));
    }
    let name = req.str("name").unwrap_or_default().to_owned();
    if !name_ok(&name, 34) {
        return Err(Reply::invalid(
            "name",
            "1 to 34 lowercase letters, numbers or hyphens, starting with a letter and \
             ending with a letter or a number",
        ));
    }
    let mut settings = default_settings();
    apply_settings(&mut settings, req.body)?;
    let env = string_map(req.body, "environment_variables")?.unwrap_or_default();
    let mut secrets = BTreeMap::new();
    merge_secrets(req.body, &mut secrets, true)?;
    if let Some(refused) = too_many_variables(ns, env.len(), secrets.len()) {
        return Err(refused);
    }
    let domain_prefix: String = ns.name.chars().filter(|c| *c != '-').collect();
    let domain_prefix = format!("{domain_prefix}{}", &ns.id[..8]);
    let taken = state.containers.containers.values();
    if taken
        .into_iter()
        .any(|c| c.namespace_id == namespace_id && c.name == name)
    {
        return Err(Reply::exists("container", &name));
    }
    let (id, now) = (state.new_id(), state.timestamp());
    let c = Ctr {
        id: id.clone(),
        region: region.to_owned(),
        domain_name: format!("{domain_prefix}-{name}.functions.fnc.{region}.scw.cloud"),
        namespace_id,
        name,
        env,
        secrets,
        settings,
        tags: tags_of(req.body)?.unwrap_or_default(),
        status: Settling::settled("created"),
        deployed: false,
        created_at: now.clone(),
        updated_at: now,
        ready_at: None,
    };
    let answer = container_json(&c, c.status.status());
    state.containers.containers.insert(id, c);
    Ok(Reply::ok(answer))
}

fn get_container(state: &mut State, region: &str, id: &str) -> Result<Reply, Reply> {
    let c = container_mut(state, region, id)?;
    let status = c.status.read();
    Ok(Reply::ok(container_json(c, status)))
}

fn update_container(
    state: &mut State,
    req: &Req<'_>,
    region: &str,
    id: &str,
) -> Result<Reply, Reply> {
    let (reads, now) = (state.settle_reads, state.timestamp());
    let c = container_mut(state, region, id)?;
    if c.status.busy() {
        return Err(Reply::transient("container", id, c.status.status()));
    }
    let mut settings = c.settings.clone();
    apply_settings(&mut settings, req.body)?;
    let env = string_map(req.body, "environment_variables")?;
    let mut secrets = c.secrets.clone();
    merge_secrets(req.body, &mut secrets, false)?;
    let tags = tags_of(req.body)?;
    let redeploy = req.body.get("redeploy").and_then(Value::as_bool) != Some(false);
    let namespace_id = c.namespace_id.clone();
    let env_count = env.as_ref().map_or(c.env.len(), BTreeMap::len);
    if let Some(ns) = state.containers.namespaces.get(&namespace_id)
        && let Some(refused) = too_many_variables(ns, env_count, secrets.len())
    {
        return Err(refused);
    }
    let c = container_mut(state, region, id)?;
    c.settings = settings;
    c.secrets = secrets;
    if let Some(env) = env {
        c.env = env;
    }
    if let Some(tags) = tags {
        c.tags = tags;
    }
    c.updated_at = now.clone();
    if c.deployed && redeploy {
        c.status = Settling::after("pending", "ready", reads);
        c.ready_at = Some(now);
    }
    Ok(Reply::ok(container_json(c, c.status.status())))
}

fn deploy_container(state: &mut State, region: &str, id: &str) -> Result<Reply, Reply> {
    let (reads, now) = (state.settle_reads, state.timestamp());
    let c = container_mut(state, region, id)?;
    if c.status.busy() {
        return Err(Reply::transient("container", id, c.status.status()));
    }
    if c.settings
        .get("registry_image")
        .and_then(Value::as_str)
        .is_none()
    {
        return Err(Reply::invalid(
            "registry_image",
            "the container has no image to deploy",
        ));
    }
    c.deployed = true;
    c.status = Settling::after("pending", "ready", reads);
    c.ready_at = Some(now);
    Ok(Reply::ok(container_json(c, c.status.status())))
}

fn delete_container(state: &mut State, region: &str, id: &str) -> Result<Reply, Reply> {
    let reads = state.settle_reads;
    let c = container_mut(state, region, id)?;
    if c.status.transient == "deleting" {
        return Err(Reply::transient("container", id, "deleting"));
    }
    c.status = Settling::after("deleting", GONE, reads);
    Ok(Reply::ok(container_json(c, "deleting")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_scaleways_grammar() {
        assert!(name_ok("app-1", 34) && name_ok("a", 34));
        for bad in ["", "1app", "App", "app-", "app_1", &"a".repeat(35)] {
            assert!(!name_ok(bad, 34), "{bad}");
        }
        assert!(name_ok(&"a".repeat(63), 63));
    }

    #[test]
    fn image_references_are_registry_paths() {
        for good in [
            "rg.fr-par.scw.cloud/ns/app:1.4",
            "nginx:latest",
            "nginx",
            "ghcr.io/owner/image",
            "localhost:5000/app:dev",
            "rg.fr-par.scw.cloud/ns/app@sha256:0123456789abcdef0123456789abcdef",
        ] {
            assert!(image_ok(good), "{good}");
        }
        for bad in [
            "",
            "https://rg.fr-par.scw.cloud/ns/app",
            "rg.fr-par.scw.cloud/NS/app",
            "app:",
            "a b",
            "ns//app",
            "app@sha256:xyz",
        ] {
            assert!(!image_ok(bad), "{bad}");
        }
    }

    #[test]
    fn memory_must_fit_the_cpu() {
        let mut settings = default_settings();
        settings.insert("registry_image".into(), json!("nginx:latest"));
        assert!(check_settings(&settings).is_ok());
        settings.insert("cpu_limit".into(), json!(2000));
        settings.insert("memory_limit".into(), json!(1024));
        let refused = check_settings(&settings).unwrap_err();
        assert!(
            refused.body.to_string().contains("minimum of 2000 MB"),
            "{}",
            refused.body
        );
        settings.insert("memory_limit".into(), json!(8000));
        assert!(check_settings(&settings).is_ok());
        settings.insert("timeout".into(), json!("901s"));
        assert_eq!(check_settings(&settings).unwrap_err().status, 400);
    }

    #[test]
    fn secrets_are_kept_as_digests_and_removed_without_a_value() {
        let mut held = BTreeMap::new();
        let body = json!({ "secret_environment_variables": [{ "key": "DB", "value": "hunter2" }] });
        assert!(merge_secrets(&body, &mut held, true).unwrap());
        assert_ne!(held["DB"], "hunter2");
        assert!(!held["DB"].contains("hunter2"));
        let removal = json!({ "secret_environment_variables": [{ "key": "DB" }] });
        assert!(merge_secrets(&removal, &mut held.clone(), true).is_err());
        merge_secrets(&removal, &mut held, false).unwrap();
        assert!(held.is_empty());
        let reserved =
            json!({ "secret_environment_variables": [{ "key": "SCW_X", "value": "v" }] });
        assert!(merge_secrets(&reserved, &mut held, true).is_err());
    }
}
