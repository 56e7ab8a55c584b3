//! Serverless Containers (API `containers/v1beta1`): the `containerNamespace` kind, as a
//! containers namespace, and the `container` kind, as a serverless container in one.
//!
//! Handles are the resources' ids (UUIDs), regional: `list`, `read` and every write go
//! to `/containers/v1beta1/regions/{region}/…`, so a handle of another region is
//! `NotFound` in this one. Names are refused as `Invalid` before any call when Scaleway
//! would refuse them: a namespace name is 1 to 63 lowercase letters, digits and hyphens
//! starting with a letter and ending with a letter or digit; a container name the same,
//! at most 34 characters.
//!
//! Namespaces: `CreateNamespace` (`name`, `project_id`, `description`,
//! `environment_variables`, `secret_environment_variables`, `tags`), `GetNamespace`,
//! `UpdateNamespace` (a `PATCH` of what differs), `DeleteNamespace`, `ListNamespaces`
//! (every page, `project_id` set). A new namespace is `pending` until its registry
//! namespace exists, then `ready`; writes await `ready` on the configuration's clock.
//! Deleting a namespace deletes the containers in it, as Scaleway does; the delete is
//! awaited until the namespace is gone. A container such a deletion is taking along
//! refuses a delete of its own (`transient_state`): that delete awaits its end all the
//! same, and succeeds (the engine prunes orphans without ordering them).
//!
//! Containers: `CreateContainer` (`namespace_id`, `name`, `registry_image`, `port`,
//! `cpu_limit`, `memory_limit`, `min_scale`, `max_scale`, `timeout` as a duration
//! string such as `"300s"`, `environment_variables`, `secret_environment_variables`,
//! `tags`), then `DeployContainer`: a new container is `created` until deployed, then
//! `pending`, then `ready`, which is awaited. `UpdateContainer` sends what differs with
//! `redeploy: true`, so that Scaleway deploys the change (a new image included), and
//! the redeploy is awaited; a container never deployed is deployed. A container cannot
//! move to another namespace (`UpdateContainer` takes no `namespace_id`): the kind marks
//! `namespace` as forcing a replace. `ListContainers` wants a namespace: `list` asks it
//! of every namespace of the project in the region. A container whose deploy ends in
//! `error` is reported failed with Scaleway's `error_message`; it exists, marked, and
//! the next apply finds it by name and updates it. An update of a resource Scaleway is
//! still working on (`pending`, `creating`: a namespace whose variables changed
//! redeploys its containers) first awaits it, since Scaleway refuses writes to it
//! (`transient_state`).
//!
//! Refused as `Invalid` before any call, as Scaleway refuses them: an image reference
//! that is not a registry path (`rg.fr-par.scw.cloud/ns/app:1.4`, `nginx:latest`); a
//! port outside 1 to 65535 or one of Scaleway's own (8008, 8012, 8013, 8022, 9090,
//! 9091); a CPU limit outside 70 to 6000 mvCPU, memory outside 128 to 12228 MB, or a
//! pair that does not fit (Scaleway wants between 1 and 4 MB of memory per mvCPU:
//! "2000 mvCPU require a minimum of 2000 MB and a maximum of 8000 MB"), the pair being
//! what the declaration says over what the container has (Scaleway's defaults of 1000
//! mvCPU and 2048 MB for a new one); a minimum scale above 50 or above the maximum, a
//! maximum outside 1 to 50; a timeout outside 1 to 900 s; an environment variable with
//! no name, a `=` in its name, a value over 1000 characters, more than 100 variables,
//! a name Scaleway reserves (`PORT`, `SCW_*`), or a name in both maps; a secret value
//! over 65536 bytes.
//!
//! Secret environment variables: Scaleway takes their values, stores them hashed and
//! answers only `{key, hashed_value}`. Each referenced secret's latest value is read
//! from Secret Manager for the one write that needs it, sent, and never logged, kept or
//! put in an error. Since the hashes cannot be compared, an update that touches the
//! resource sends every declared secret variable again (an unchanged value rewrites the
//! same hash) and removes those no longer declared (`{key}` without a value).
//!
//! The marker: Scaleway tags are plain strings (`crate::tags`). A namespace's declared
//! tags are a set of strings; `CreateNamespace` carries them with the marker
//! `managed-by-infra=<fleet>`. The `container` kind declares no tags, yet containers
//! carry them on the wire: `CreateContainer` carries the marker alone. Updates keep the
//! marker; `mark` writes the tags with the marker added (for a container, with
//! `redeploy: false`, so that nothing is redeployed). A create whose answer was lost,
//! or whose deploy was still running at the deadline, is settled by looking the
//! resource up by name (a container in its namespace) and marker.
//!
//! What read reports when Scaleway does not say:
//! - `description` (namespace): Scaleway leaves an empty description out; none is the
//!   truth `""`.
//! - `environment`: the resource's own variables (a container's do not include its
//!   namespace's); `Unknown` only when the answer has no map at all.
//! - `secretEnvironment`: `Unknown`, always: Scaleway answers hashes, never values nor
//!   the secrets they came from, so the engine compares what it last wrote.
//! - `tags` (namespace): the tags, marker included; none is the truth, an empty set.
//! - `image`, `port`, `cpuLimit`, `memoryLimitMb`, `minScale`, `maxScale`: as answered;
//!   `Unknown` when absent (and a port of 0 or beyond 65535).
//! - `timeoutSeconds`: the `timeout` duration in whole seconds; `Unknown` when absent,
//!   not a duration, or fractional.
//! - `namespace`: the container's `namespace_id`, the namespace kind's handle.
//!
//! Observed: a namespace's `id` and `registry_endpoint` (`Unknown` while empty); a
//! container's `id` and `domain_name` (`Unknown` while empty). Raw tags are attached to
//! every read.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use infra_core::kinds::{
    Container, ContainerNamespace, ContainerNamespaceReported, ContainerNamespaceSettled,
    ContainerReported, ContainerSettled, EnvVars, NamespaceObserved, Secrets, ServerlessObserved,
};
use infra_core::prelude::{Handle, Partial};
use infra_core::sdk::poll::{self, Waited};
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, ErrorKind, KindBackend, ListArgs, Listed, MarkArgs,
    Marker, OwnershipArgs, RawTags, ReadArgs, Reading, Router, UpdateArgs, Written,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::api::Call;
use crate::clients::Clients;
use crate::secret_value::latest_value as secret_value;
use crate::tags;

/// The `not_found` resource types that mean "this namespace does not exist".
const NO_NAMESPACE: &[&str] = &["namespace"];
/// The `not_found` resource types that mean "this container does not exist".
const NO_CONTAINER: &[&str] = &["container"];
/// Ports Scaleway's platform uses itself.
const RESERVED_PORTS: [u32; 6] = [8008, 8012, 8013, 8022, 9090, 9091];
/// Scaleway's defaults for a container created without CPU or memory limits.
const DEFAULT_CPU: u32 = 1000;
const DEFAULT_MEMORY: u32 = 2048;

/// Adds the Serverless Containers kinds to `router`.
pub(crate) fn register(mut router: Router, clients: &Arc<Clients>) -> Router {
    router.add::<ContainerNamespace>(ContainerNamespaces {
        clients: Arc::clone(clients),
    });
    router.add::<Container>(Containers {
        clients: Arc::clone(clients),
    });
    router
}

// ---- Scaleway's shapes -------------------------------------------------------------

/// A secret variable as Scaleway answers it (`hashed_value` is not read).
#[derive(Debug, Deserialize)]
struct HashedVar {
    key: String,
}

/// A namespace as `GetNamespace` answers it (the fields read here).
#[derive(Debug, Deserialize)]
struct NamespaceWire {
    id: String,
    name: String,
    #[serde(default)]
    project_id: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    environment_variables: Option<EnvVars>,
    #[serde(default)]
    secret_environment_variables: Option<Vec<HashedVar>>,
    #[serde(default)]
    registry_endpoint: Option<String>,
    #[serde(default)]
    error_message: Option<String>,
    #[serde(default)]
    tags: Option<Vec<String>>,
}

/// A container as `GetContainer` answers it (the fields read here).
#[derive(Debug, Deserialize)]
struct ContainerWire {
    id: String,
    name: String,
    #[serde(default)]
    namespace_id: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    environment_variables: Option<EnvVars>,
    #[serde(default)]
    secret_environment_variables: Option<Vec<HashedVar>>,
    #[serde(default)]
    min_scale: Option<u32>,
    #[serde(default)]
    max_scale: Option<u32>,
    #[serde(default)]
    memory_limit: Option<u32>,
    #[serde(default)]
    cpu_limit: Option<u32>,
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default)]
    registry_image: Option<String>,
    #[serde(default)]
    port: Option<u32>,
    #[serde(default)]
    domain_name: Option<String>,
    #[serde(default)]
    error_message: Option<String>,
    #[serde(default)]
    tags: Option<Vec<String>>,
}

/// The keys of the secret variables a resource holds.
fn secret_keys(vars: Option<&Vec<HashedVar>>) -> BTreeSet<String> {
    vars.into_iter().flatten().map(|v| v.key.clone()).collect()
}

fn known<T>(value: Option<T>) -> Partial<T> {
    value.map_or(Partial::Unknown, Partial::Known)
}

fn non_empty(value: Option<&String>) -> Option<String> {
    value.filter(|v| !v.is_empty()).cloned()
}

// ---- What Scaleway refuses ----------------------------------------------------------

fn invalid(message: impl Into<String>) -> BackendError {
    BackendError::invalid(message)
}

/// Refuses a name Scaleway refuses: 1 to `max` lowercase letters, digits and hyphens,
/// starting with a letter, ending with a letter or digit.
fn check_name(what: &str, name: &str, max: usize) -> Result<(), BackendError> {
    let well_formed = (1..=max).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if well_formed {
        Ok(())
    } else {
        Err(invalid(format!(
            "`{name}` cannot name a Scaleway {what}: 1 to {max} lowercase letters, digits and \
             hyphens, starting with a letter and ending with a letter or a digit"
        )))
    }
}

/// Refuses environment variables Scaleway refuses. `plain` and `secret` are the names
/// (and for `plain` the values) declared; either may be unsaid.
fn check_env(
    plain: Option<&EnvVars>,
    secret: Option<&BTreeMap<String, Handle<Secrets>>>,
) -> Result<(), BackendError> {
    let names: Vec<&String> = plain
        .into_iter()
        .flat_map(|m| m.keys())
        .chain(secret.into_iter().flat_map(|m| m.keys()))
        .collect();
    if names.len() > 100 {
        return Err(invalid(format!(
            "{} environment variables are declared; Scaleway takes at most 100",
            names.len()
        )));
    }
    let mut seen = BTreeSet::new();
    for name in names {
        if name.is_empty() || name.contains('=') {
            return Err(invalid(format!(
                "{name:?} cannot name an environment variable"
            )));
        }
        if name == "PORT" || name.starts_with("SCW_") {
            return Err(invalid(format!(
                "the environment variable {name} is reserved by Scaleway (PORT and SCW_*)"
            )));
        }
        if !seen.insert(name) {
            return Err(invalid(format!(
                "the environment variable {name} is declared twice (in both `environment` \
                 and `secretEnvironment`?)"
            )));
        }
    }
    for (name, value) in plain.into_iter().flatten() {
        if value.chars().count() > 1000 {
            return Err(invalid(format!(
                "the value of the environment variable {name} is longer than the 1000 \
                 characters Scaleway takes"
            )));
        }
    }
    Ok(())
}

/// Refuses an image reference that is not a registry path:
/// `[host[:port]/]path[:tag][@algorithm:hex]`, path components lowercase.
fn check_image(image: &str) -> Result<(), BackendError> {
    if image_reference_ok(image) {
        Ok(())
    } else {
        Err(invalid(format!(
            "`image` is {image:?}; Scaleway takes a registry path such as \
             `rg.fr-par.scw.cloud/namespace/app:1.4` or `nginx:latest`"
        )))
    }
}

fn image_reference_ok(image: &str) -> bool {
    let (rest, digest) = match image.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (image, None),
    };
    let digest_ok = digest.is_none_or(|d| {
        d.split_once(':').is_some_and(|(alg, hex)| {
            !alg.is_empty()
                && alg.chars().all(|c| c.is_ascii_alphanumeric())
                && hex.len() >= 32
                && hex.chars().all(|c| c.is_ascii_hexdigit())
        })
    });
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    let tag_ok = tag.is_none_or(|t| {
        (1..=128).contains(&t.len())
            && !t.starts_with(['.', '-'])
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    });
    let mut parts: Vec<&str> = name.split('/').collect();
    let has_host = parts.len() > 1 && (parts[0].contains(['.', ':']) || parts[0] == "localhost");
    let host_ok = !has_host || host_ok(parts[0]);
    if has_host {
        parts.remove(0);
    }
    let path_ok = !parts.is_empty() && parts.iter().all(|p| path_component_ok(p));
    digest_ok && tag_ok && host_ok && path_ok && name.len() <= 255
}

fn host_ok(host: &str) -> bool {
    let (name, port) = match host.split_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host, None),
    };
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
    let name_ok = name.split('.').all(|label| {
        !label.is_empty()
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    });
    port_ok && name_ok
}

/// A path component: lowercase letters and digits, separated by `.`, `_`, `__` or
/// hyphens.
fn path_component_ok(part: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !part.starts_with(alnum) || !part.ends_with(alnum) {
        return false;
    }
    let mut separator = String::new();
    for c in part.chars() {
        if alnum(c) {
            let ok = separator.is_empty()
                || separator == "."
                || separator == "_"
                || separator == "__"
                || separator.chars().all(|s| s == '-');
            if !ok {
                return false;
            }
            separator.clear();
        } else if matches!(c, '.' | '_' | '-') {
            separator.push(c);
        } else {
            return false;
        }
    }
    true
}

fn check_port(port: u16) -> Result<(), BackendError> {
    if port == 0 || RESERVED_PORTS.contains(&u32::from(port)) {
        return Err(invalid(format!(
            "`port` is {port}; Scaleway takes 1 to 65535 except its own ports 8008, 8012, \
             8013, 8022, 9090 and 9091"
        )));
    }
    Ok(())
}

/// Refuses a CPU and memory pair Scaleway refuses.
fn check_resources(cpu: u32, memory: u32) -> Result<(), BackendError> {
    if !(70..=6000).contains(&cpu) {
        return Err(invalid(format!(
            "`cpuLimit` is {cpu} mvCPU; Scaleway takes 70 to 6000"
        )));
    }
    if !(128..=12228).contains(&memory) {
        return Err(invalid(format!(
            "`memoryLimitMb` is {memory} MB; Scaleway takes 128 to 12228"
        )));
    }
    let (least, most) = (cpu.max(128), cpu.saturating_mul(4));
    if !(least..=most).contains(&memory) {
        return Err(invalid(format!(
            "{cpu} mvCPU take {least} to {most} MB of memory on Scaleway (1 to 4 MB per \
             mvCPU), not {memory}"
        )));
    }
    Ok(())
}

fn check_scale(min: Option<u32>, max: Option<u32>) -> Result<(), BackendError> {
    if let Some(min) = min.filter(|m| *m > 50) {
        return Err(invalid(format!(
            "`minScale` is {min}; Scaleway takes 0 to 50"
        )));
    }
    if let Some(max) = max.filter(|m| !(1..=50).contains(m)) {
        return Err(invalid(format!(
            "`maxScale` is {max}; Scaleway takes 1 to 50"
        )));
    }
    if let (Some(min), Some(max)) = (min, max)
        && min > max
    {
        return Err(invalid(format!(
            "`minScale` ({min}) exceeds `maxScale` ({max})"
        )));
    }
    Ok(())
}

fn check_timeout(seconds: u32) -> Result<(), BackendError> {
    if (1..=900).contains(&seconds) {
        Ok(())
    } else {
        Err(invalid(format!(
            "`timeoutSeconds` is {seconds}; Scaleway takes 1 to 900"
        )))
    }
}

/// A timeout as Scaleway's duration string.
fn duration(seconds: u32) -> String {
    format!("{seconds}s")
}

/// Whole seconds of a duration string (`"300s"`, `"300.000s"`), or `None`.
fn seconds_of(duration: &str) -> Option<u32> {
    let number = duration.strip_suffix('s')?;
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() || !fraction.chars().all(|c| c == '0') {
        return None;
    }
    whole.parse().ok()
}

/// Refuses a container spec Scaleway would refuse. `current` is the container being
/// updated (its CPU, memory and scale fill in what the spec leaves unsaid).
fn check_container(
    spec: &ContainerSettled,
    current: Option<&ContainerWire>,
) -> Result<(), BackendError> {
    check_image(&spec.image)?;
    if let Some(&port) = spec.port.known() {
        check_port(port)?;
    }
    let cpu = spec
        .cpu_limit
        .known()
        .copied()
        .or_else(|| current.and_then(|c| c.cpu_limit))
        .unwrap_or(DEFAULT_CPU);
    let memory = spec
        .memory_limit_mb
        .known()
        .copied()
        .or_else(|| current.and_then(|c| c.memory_limit))
        .unwrap_or(DEFAULT_MEMORY);
    check_resources(cpu, memory)?;
    let min = spec
        .min_scale
        .known()
        .copied()
        .or_else(|| current.and_then(|c| c.min_scale));
    let max = spec
        .max_scale
        .known()
        .copied()
        .or_else(|| current.and_then(|c| c.max_scale));
    check_scale(min, max)?;
    if let Some(&seconds) = spec.timeout_seconds.known() {
        check_timeout(seconds)?;
    }
    check_env(spec.environment.known(), spec.secret_environment.known())
}

// ---- Secret variables -----------------------------------------------------------------

/// `secret_environment_variables` to send: each declared variable with its secret's
/// latest value, and each variable `current` holds that is no longer declared as a key
/// without a value (which removes it). Empty when there is nothing to write.
async fn secret_vars(
    clients: &Clients,
    region: &str,
    declared: &BTreeMap<String, Handle<Secrets>>,
    current: &BTreeSet<String>,
) -> Result<Vec<Value>, BackendError> {
    let mut vars = Vec::new();
    for (key, handle) in declared {
        let value = secret_value(clients, region, handle.as_str())
            .await
            .map_err(|e| match e.kind {
                // The secret is not the resource written: its absence is the
                // declaration's fault, never "this resource is absent".
                ErrorKind::NotFound => invalid(format!(
                    "the secret {} of the variable {key} has no value to read: {}",
                    handle.as_str(),
                    e.message
                )),
                _ => e,
            })?;
        if value.expose().len() > 65536 {
            return Err(invalid(format!(
                "the secret {} of the variable {key} is larger than the 65536 bytes \
                 Scaleway takes",
                handle.as_str()
            )));
        }
        vars.push(json!({ "key": key, "value": value.expose() }));
    }
    for key in current.iter().filter(|k| !declared.contains_key(*k)) {
        vars.push(json!({ "key": key }));
    }
    Ok(vars)
}

// ---- Waiting ---------------------------------------------------------------------------

/// A resource whose status Scaleway moves on its own.
trait Status {
    fn status(&self) -> &str;
    fn error_message(&self) -> Option<&String>;
}

impl Status for NamespaceWire {
    fn status(&self) -> &str {
        &self.status
    }
    fn error_message(&self) -> Option<&String> {
        self.error_message.as_ref()
    }
}

impl Status for ContainerWire {
    fn status(&self) -> &str {
        &self.status
    }
    fn error_message(&self) -> Option<&String> {
        self.error_message.as_ref()
    }
}

/// Whether `resource` is settled (`ready`): `Ok(false)` while Scaleway is still at
/// work, an error when it failed or is locked.
fn settled(what: &str, id: &str, resource: &impl Status) -> Result<bool, BackendError> {
    match resource.status() {
        "ready" => Ok(true),
        "error" => Err(BackendError::new(
            ErrorKind::Other,
            format!(
                "{what}: {id} is in error: {}",
                resource
                    .error_message()
                    .map_or("Scaleway gave no reason", String::as_str)
            ),
        )
        .with_code("error")),
        "locked" => Err(BackendError::new(
            ErrorKind::Denied,
            format!("{what}: {id} is locked by Scaleway"),
        )
        .with_code("locked")),
        "deleting" => Err(BackendError::new(
            ErrorKind::Conflict,
            format!("{what}: {id} is being deleted"),
        )
        .with_code("deleting")),
        _ => Ok(false),
    }
}

/// Polls `get` until the resource `id` is `ready`.
async fn await_ready<T, F, Fut>(
    clients: &Clients,
    what: &str,
    id: &str,
    get: F,
) -> Result<Waited<T>, BackendError>
where
    T: Status,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, BackendError>>,
{
    poll::until_done(clients.clock(), clients.polling(), what, || async {
        let resource = get().await?;
        Ok(settled(what, id, &resource)?.then_some(resource))
    })
    .await
}

/// The resource `get` answers, once Scaleway has finished its work on it: a write to a
/// resource in a transient status is refused (`transient_state`).
async fn when_settled<T, F, Fut>(
    clients: &Clients,
    what: &str,
    id: &str,
    get: F,
) -> Result<T, BackendError>
where
    T: Status,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, BackendError>>,
{
    let current = get().await?;
    if !matches!(current.status(), "pending" | "creating") {
        return Ok(current);
    }
    match await_ready(clients, what, id, get).await? {
        Waited::Done(settled) => Ok(settled),
        Waited::StillRunning => Err(poll::still_running(what, clients.polling())),
    }
}

/// Polls `get` until it answers `NotFound`.
async fn await_gone<T, F, Fut>(clients: &Clients, what: &str, get: F) -> Result<(), BackendError>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, BackendError>>,
{
    let waited = poll::until_done(clients.clock(), clients.polling(), what, || async {
        match get().await {
            Err(e) if e.kind == ErrorKind::NotFound => Ok(Some(())),
            Err(e) => Err(e),
            Ok(_) => Ok(None),
        }
    })
    .await?;
    match waited {
        Waited::Done(()) => Ok(()),
        Waited::StillRunning => Err(poll::still_running(what, clients.polling())),
    }
}

/// Deletes with `delete` and awaits the resource's end with `get`. A resource Scaleway
/// is deleting already (a namespace's deletion takes its containers along) refuses the
/// delete (`transient_state`); it is awaited like one this call deletes.
async fn delete_and_await<T, D, DFut, F, Fut>(
    clients: &Clients,
    what: &str,
    delete: D,
    get: F,
) -> Result<(), BackendError>
where
    T: Status,
    D: FnOnce() -> DFut,
    DFut: Future<Output = Result<(), BackendError>>,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, BackendError>>,
{
    match delete().await {
        Ok(()) => {}
        Err(refused) if refused.code.as_deref() == Some("transient_state") => match get().await {
            Ok(current) if current.status() == "deleting" => {}
            Err(e) if e.kind == ErrorKind::NotFound => return Ok(()),
            _ => return Err(refused),
        },
        Err(e) => return Err(e),
    }
    await_gone(clients, what, get).await
}

/// The outcome of a create whose resource may not be settled: `waited` settled is the
/// resource; still running at the deadline, it is settled by name and marker.
async fn after_wait<T, F>(
    waited: Waited<T>,
    what: &str,
    clients: &Clients,
    marker: &Marker,
    find: F,
) -> Result<T, BackendError>
where
    F: Future<Output = Result<Option<(RawTags, T)>, BackendError>>,
{
    match waited {
        Waited::Done(done) => Ok(done),
        Waited::StillRunning => {
            let err = poll::still_running(what, clients.polling());
            poll::settle_uncertain(err, marker, what, find).await
        }
    }
}

// ---- Namespaces --------------------------------------------------------------------

/// `containerNamespace` on Scaleway: Serverless Containers namespaces.
pub(crate) struct ContainerNamespaces {
    clients: Arc<Clients>,
}

fn namespaces_path(region: &str) -> String {
    format!("/containers/v1beta1/regions/{region}/namespaces")
}

fn namespace_path(region: &str, id: &str) -> String {
    format!("{}/{id}", namespaces_path(region))
}

/// What read reports of `ns`.
fn namespace_reading(ns: &NamespaceWire) -> Reading<ContainerNamespace> {
    let raw = ns.tags.clone().unwrap_or_default();
    Reading::new(
        ns.id.clone(),
        NamespaceObserved {
            id: ns.id.clone(),
            registry_endpoint: known(non_empty(ns.registry_endpoint.as_ref())),
        },
        ContainerNamespaceReported {
            description: Partial::Known(ns.description.clone().unwrap_or_default()),
            environment: known(ns.environment_variables.clone()),
            secret_environment: Partial::Unknown,
            tags: Partial::Known(raw.iter().cloned().collect()),
        },
    )
    .with_raw_tags(tags::to_map(&raw))
}

/// The `PATCH` body bringing `current` to `spec`, without the secret variables: only
/// what differs.
fn namespace_changes(
    spec: &ContainerNamespaceSettled,
    current: &NamespaceWire,
) -> Map<String, Value> {
    let mut body = Map::new();
    if let Some(description) = spec.description.known()
        && current.description.as_deref().unwrap_or_default() != description
    {
        body.insert("description".into(), json!(description));
    }
    if let Some(env) = spec.environment.known()
        && current.environment_variables.as_ref() != Some(env)
    {
        body.insert("environment_variables".into(), json!(env));
    }
    if let Some(declared) = spec.tags.known() {
        let now = current.tags.clone().unwrap_or_default();
        let wanted = tags::for_update(tags::from_set(declared), &now);
        let now_set: BTreeSet<&String> = now.iter().collect();
        if wanted.iter().collect::<BTreeSet<_>>() != now_set {
            body.insert("tags".into(), json!(wanted));
        }
    }
    body
}

impl ContainerNamespaces {
    async fn get(&self, region: &str, id: &str) -> Result<NamespaceWire, BackendError> {
        self.clients
            .api()
            .call(
                Call::get("containers:GetNamespace", namespace_path(region, id))
                    .not_found(NO_NAMESPACE),
            )
            .await
    }

    /// The namespace of this project named `name` in `region`, with its raw tags.
    async fn find(
        &self,
        region: &str,
        name: &str,
    ) -> Result<Option<(RawTags, NamespaceWire)>, BackendError> {
        let found: Vec<NamespaceWire> = self
            .clients
            .api()
            .list_all(
                Call::get("containers:ListNamespaces", namespaces_path(region))
                    .query("project_id", self.clients.project_id())
                    .query("name", name),
                "namespaces",
            )
            .await?;
        Ok(found.into_iter().find(|ns| ns.name == name).map(|ns| {
            let raw = tags::to_map(ns.tags.as_deref().unwrap_or_default());
            (raw, ns)
        }))
    }

    async fn patch(
        &self,
        region: &str,
        id: &str,
        body: &Map<String, Value>,
    ) -> Result<(), BackendError> {
        self.clients
            .api()
            .act(
                Call::patch("containers:UpdateNamespace", namespace_path(region, id))
                    .not_found(NO_NAMESPACE),
                Some(body),
            )
            .await
    }
}

#[async_trait]
impl KindBackend<ContainerNamespace> for ContainerNamespaces {
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let all: Vec<NamespaceWire> = self
            .clients
            .api()
            .list_all(
                Call::get("containers:ListNamespaces", namespaces_path(region))
                    .query("project_id", self.clients.project_id()),
                "namespaces",
            )
            .await?;
        Ok(all
            .into_iter()
            .filter(|ns| ns.project_id.is_empty() || ns.project_id == self.clients.project_id())
            .map(|ns| Listed {
                name: ns.name,
                handle: ns.id,
            })
            .collect())
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<ContainerNamespace>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        Ok(namespace_reading(&self.get(region, handle).await?))
    }

    async fn create(
        &self,
        args: CreateArgs<'_, ContainerNamespace>,
    ) -> Result<Written<Reading<ContainerNamespace>>, BackendError> {
        const WHAT: &str = "containers:CreateNamespace";
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = args;
        check_name("containers namespace", name, 63)?;
        check_env(spec.environment.known(), spec.secret_environment.known())?;
        let declared_tags = spec.tags.known().map(tags::from_set).unwrap_or_default();
        let mut body = Map::new();
        body.insert("name".into(), json!(name));
        body.insert("project_id".into(), json!(self.clients.project_id()));
        body.insert(
            "tags".into(),
            json!(tags::for_create(declared_tags, marker)),
        );
        if let Some(description) = spec.description.known() {
            body.insert("description".into(), json!(description));
        }
        if let Some(env) = spec.environment.known() {
            body.insert("environment_variables".into(), json!(env));
        }
        if let Some(secrets) = spec.secret_environment.known() {
            let vars = secret_vars(&self.clients, region, secrets, &BTreeSet::new()).await?;
            body.insert("secret_environment_variables".into(), Value::Array(vars));
        }
        let sent = self
            .clients
            .api()
            .send::<NamespaceWire>(Call::post(WHAT, namespaces_path(region)), Some(&body))
            .await;
        drop(body);
        let created = match sent {
            Ok(ns) => ns,
            Err(e) => poll::settle_uncertain(e, marker, WHAT, self.find(region, name)).await?,
        };
        let waited = await_ready(&self.clients, WHAT, &created.id, || {
            self.get(region, &created.id)
        })
        .await?;
        let ready =
            after_wait(waited, WHAT, &self.clients, marker, self.find(region, name)).await?;
        Ok(Written::Done(namespace_reading(&ready)))
    }

    async fn update(
        &self,
        args: UpdateArgs<'_, ContainerNamespace>,
    ) -> Result<Written<Reading<ContainerNamespace>>, BackendError> {
        const WHAT: &str = "containers:UpdateNamespace";
        let UpdateArgs {
            region,
            handle,
            spec,
            ..
        } = args;
        check_env(spec.environment.known(), spec.secret_environment.known())?;
        let current =
            when_settled(&self.clients, WHAT, handle, || self.get(region, handle)).await?;
        let mut body = namespace_changes(spec, &current);
        if let Some(secrets) = spec.secret_environment.known() {
            let held = secret_keys(current.secret_environment_variables.as_ref());
            let vars = secret_vars(&self.clients, region, secrets, &held).await?;
            if !vars.is_empty() {
                body.insert("secret_environment_variables".into(), Value::Array(vars));
            }
        }
        if body.is_empty() {
            return Ok(Written::Done(namespace_reading(&current)));
        }
        let patched = self.patch(region, handle, &body).await;
        drop(body);
        patched?;
        match await_ready(&self.clients, WHAT, handle, || self.get(region, handle)).await? {
            Waited::Done(ns) => Ok(Written::Done(namespace_reading(&ns))),
            Waited::StillRunning => Err(poll::still_running(WHAT, self.clients.polling())),
        }
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        const WHAT: &str = "containers:DeleteNamespace";
        let DeleteArgs { region, handle, .. } = args;
        let delete = || {
            let call = Call::delete(WHAT, namespace_path(region, handle)).not_found(NO_NAMESPACE);
            self.clients.api().act(call, None::<&()>)
        };
        delete_and_await(&self.clients, WHAT, delete, || self.get(region, handle)).await
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let ns = self.get(region, handle).await?;
        Ok(tags::to_map(ns.tags.as_deref().unwrap_or_default()))
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let ns = self.get(region, handle).await?;
        let what = format!("containers namespace {handle}");
        let current = ns.tags.unwrap_or_default();
        if let Some(all) = tags::marking(&current, marker, &what)? {
            let mut body = Map::new();
            body.insert("tags".into(), json!(all));
            self.patch(region, handle, &body).await?;
        }
        Ok(())
    }
}

// ---- Containers --------------------------------------------------------------------

/// `container` on Scaleway: serverless containers.
pub(crate) struct Containers {
    clients: Arc<Clients>,
}

fn containers_path(region: &str) -> String {
    format!("/containers/v1beta1/regions/{region}/containers")
}

fn container_path(region: &str, id: &str) -> String {
    format!("{}/{id}", containers_path(region))
}

/// What read reports of `c`.
fn container_reading(c: &ContainerWire) -> Reading<Container> {
    let raw = tags::to_map(c.tags.as_deref().unwrap_or_default());
    Reading::new(
        c.id.clone(),
        ServerlessObserved {
            id: c.id.clone(),
            domain_name: known(non_empty(c.domain_name.as_ref())),
        },
        ContainerReported {
            namespace: known(
                (!c.namespace_id.is_empty()).then(|| Handle::new(c.namespace_id.clone())),
            ),
            image: known(non_empty(c.registry_image.as_ref())),
            port: known(
                c.port
                    .and_then(|p| u16::try_from(p).ok())
                    .filter(|p| *p > 0),
            ),
            cpu_limit: known(c.cpu_limit),
            memory_limit_mb: known(c.memory_limit),
            min_scale: known(c.min_scale),
            max_scale: known(c.max_scale),
            timeout_seconds: known(c.timeout.as_deref().and_then(seconds_of)),
            environment: known(c.environment_variables.clone()),
            secret_environment: Partial::Unknown,
        },
    )
    .with_raw_tags(raw)
}

/// The fields of a `CreateContainer` or `UpdateContainer` body that bring `current`
/// (none for a create) to `spec`, without the secret variables: for an update, only
/// what differs.
fn container_fields(
    spec: &ContainerSettled,
    current: Option<&ContainerWire>,
) -> Map<String, Value> {
    let mut body = Map::new();
    let mut put = |field: &str, wanted: Option<Value>, now: Option<Value>| {
        if let Some(wanted) = wanted
            && now.as_ref() != Some(&wanted)
        {
            body.insert(field.to_owned(), wanted);
        }
    };
    put(
        "registry_image",
        Some(json!(spec.image)),
        current
            .and_then(|c| c.registry_image.as_ref())
            .map(|i| json!(i)),
    );
    put(
        "port",
        spec.port.known().map(|p| json!(p)),
        current.and_then(|c| c.port).map(|p| json!(p)),
    );
    put(
        "cpu_limit",
        spec.cpu_limit.known().map(|v| json!(v)),
        current.and_then(|c| c.cpu_limit).map(|v| json!(v)),
    );
    put(
        "memory_limit",
        spec.memory_limit_mb.known().map(|v| json!(v)),
        current.and_then(|c| c.memory_limit).map(|v| json!(v)),
    );
    put(
        "min_scale",
        spec.min_scale.known().map(|v| json!(v)),
        current.and_then(|c| c.min_scale).map(|v| json!(v)),
    );
    put(
        "max_scale",
        spec.max_scale.known().map(|v| json!(v)),
        current.and_then(|c| c.max_scale).map(|v| json!(v)),
    );
    put(
        "timeout",
        spec.timeout_seconds.known().map(|s| json!(duration(*s))),
        current
            .and_then(|c| c.timeout.as_deref())
            .and_then(seconds_of)
            .map(|s| json!(duration(s))),
    );
    put(
        "environment_variables",
        spec.environment.known().map(|e| json!(e)),
        current
            .and_then(|c| c.environment_variables.as_ref())
            .map(|e| json!(e)),
    );
    body
}

impl Containers {
    async fn get_namespace(&self, region: &str, id: &str) -> Result<NamespaceWire, BackendError> {
        ContainerNamespaces {
            clients: Arc::clone(&self.clients),
        }
        .get(region, id)
        .await
    }

    async fn get(&self, region: &str, id: &str) -> Result<ContainerWire, BackendError> {
        self.clients
            .api()
            .call(
                Call::get("containers:GetContainer", container_path(region, id))
                    .not_found(NO_CONTAINER),
            )
            .await
    }

    /// Every container of the namespace `namespace`, named `name` when given.
    async fn in_namespace(
        &self,
        region: &str,
        namespace: &str,
        name: Option<&str>,
    ) -> Result<Vec<ContainerWire>, BackendError> {
        let mut call = Call::get("containers:ListContainers", containers_path(region))
            .query("namespace_id", namespace)
            .query("project_id", self.clients.project_id())
            .not_found(NO_NAMESPACE);
        if let Some(name) = name {
            call = call.query("name", name);
        }
        match self.clients.api().list_all(call, "containers").await {
            // A namespace gone since it was listed holds nothing.
            Err(e) if e.kind == ErrorKind::NotFound => Ok(Vec::new()),
            other => other,
        }
    }

    /// The container named `name` in the namespace `namespace`, with its raw tags.
    async fn find(
        &self,
        region: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<(RawTags, ContainerWire)>, BackendError> {
        let found = self.in_namespace(region, namespace, Some(name)).await?;
        Ok(found.into_iter().find(|c| c.name == name).map(|c| {
            let raw = tags::to_map(c.tags.as_deref().unwrap_or_default());
            (raw, c)
        }))
    }

    async fn patch(
        &self,
        region: &str,
        id: &str,
        body: &Map<String, Value>,
    ) -> Result<ContainerWire, BackendError> {
        self.clients
            .api()
            .send(
                Call::patch("containers:UpdateContainer", container_path(region, id))
                    .not_found(NO_CONTAINER),
                Some(body),
            )
            .await
    }

    async fn deploy(&self, region: &str, id: &str) -> Result<(), BackendError> {
        let path = format!("{}/deploy", container_path(region, id));
        self.clients
            .api()
            .act(
                Call::post("containers:DeployContainer", path).not_found(NO_CONTAINER),
                Some(&json!({})),
            )
            .await
    }

    /// Sends `CreateContainer` with the marker; a lost answer is settled by name.
    async fn send_create(
        &self,
        region: &str,
        name: &str,
        spec: &ContainerSettled,
        marker: &Marker,
    ) -> Result<ContainerWire, BackendError> {
        const WHAT: &str = "containers:CreateContainer";
        let namespace = spec.namespace.as_str();
        let mut body = container_fields(spec, None);
        body.insert("namespace_id".into(), json!(namespace));
        body.insert("name".into(), json!(name));
        body.insert("tags".into(), json!(tags::for_create(Vec::new(), marker)));
        if let Some(secrets) = spec.secret_environment.known() {
            let vars = secret_vars(&self.clients, region, secrets, &BTreeSet::new()).await?;
            body.insert("secret_environment_variables".into(), Value::Array(vars));
        }
        let sent = self
            .clients
            .api()
            .send::<ContainerWire>(Call::post(WHAT, containers_path(region)), Some(&body))
            .await;
        drop(body);
        match sent {
            Ok(c) => Ok(c),
            Err(e) => {
                poll::settle_uncertain(e, marker, WHAT, self.find(region, namespace, name)).await
            }
        }
    }
}

#[async_trait]
impl KindBackend<Container> for Containers {
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let namespaces: Vec<NamespaceWire> = self
            .clients
            .api()
            .list_all(
                Call::get("containers:ListNamespaces", namespaces_path(region))
                    .query("project_id", self.clients.project_id()),
                "namespaces",
            )
            .await?;
        let mut listed = Vec::new();
        for ns in namespaces {
            for c in self.in_namespace(region, &ns.id, None).await? {
                listed.push(Listed {
                    name: c.name,
                    handle: c.id,
                });
            }
        }
        Ok(listed)
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<Container>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        Ok(container_reading(&self.get(region, handle).await?))
    }

    async fn create(
        &self,
        args: CreateArgs<'_, Container>,
    ) -> Result<Written<Reading<Container>>, BackendError> {
        const WHAT: &str = "containers:CreateContainer";
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = args;
        check_name("container", name, 34)?;
        check_container(spec, None)?;
        // A namespace still being made (a run stopped before it was ready) refuses new
        // containers with `transient_state`: wait for it first.
        let ns = spec.namespace.as_str();
        when_settled(&self.clients, WHAT, ns, || self.get_namespace(region, ns)).await?;
        let created = self.send_create(region, name, spec, marker).await?;
        if created.status == "created" {
            self.deploy(region, &created.id).await?;
        }
        let waited = await_ready(&self.clients, WHAT, &created.id, || {
            self.get(region, &created.id)
        })
        .await?;
        let find = self.find(region, spec.namespace.as_str(), name);
        let ready = after_wait(waited, WHAT, &self.clients, marker, find).await?;
        Ok(Written::Done(container_reading(&ready)))
    }

    async fn update(
        &self,
        args: UpdateArgs<'_, Container>,
    ) -> Result<Written<Reading<Container>>, BackendError> {
        const WHAT: &str = "containers:UpdateContainer";
        let UpdateArgs {
            region,
            handle,
            spec,
            ..
        } = args;
        let current =
            when_settled(&self.clients, WHAT, handle, || self.get(region, handle)).await?;
        if current.namespace_id != spec.namespace.as_str() {
            return Err(invalid(format!(
                "{WHAT}: container {handle} is in the namespace {}, and a container cannot \
                 move to another namespace ({}): it must be replaced",
                current.namespace_id,
                spec.namespace.as_str()
            )));
        }
        check_container(spec, Some(&current))?;
        let mut body = container_fields(spec, Some(&current));
        if let Some(secrets) = spec.secret_environment.known() {
            let held = secret_keys(current.secret_environment_variables.as_ref());
            let vars = secret_vars(&self.clients, region, secrets, &held).await?;
            if !vars.is_empty() {
                body.insert("secret_environment_variables".into(), Value::Array(vars));
            }
        }
        let mut status = current.status.clone();
        if !body.is_empty() {
            body.insert("redeploy".into(), json!(true));
            let patched = self.patch(region, handle, &body).await;
            drop(body);
            status = patched?.status;
        } else if status == "ready" {
            return Ok(Written::Done(container_reading(&current)));
        }
        if status == "created" {
            self.deploy(region, handle).await?;
        }
        match await_ready(&self.clients, WHAT, handle, || self.get(region, handle)).await? {
            Waited::Done(c) => Ok(Written::Done(container_reading(&c))),
            Waited::StillRunning => Err(poll::still_running(WHAT, self.clients.polling())),
        }
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        const WHAT: &str = "containers:DeleteContainer";
        let DeleteArgs { region, handle, .. } = args;
        let delete = || {
            let call = Call::delete(WHAT, container_path(region, handle)).not_found(NO_CONTAINER);
            self.clients.api().act(call, None::<&()>)
        };
        delete_and_await(&self.clients, WHAT, delete, || self.get(region, handle)).await
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let c = self.get(region, handle).await?;
        Ok(tags::to_map(c.tags.as_deref().unwrap_or_default()))
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let c = self.get(region, handle).await?;
        let what = format!("container {handle}");
        let current = c.tags.unwrap_or_default();
        if let Some(all) = tags::marking(&current, marker, &what)? {
            let mut body = Map::new();
            body.insert("tags".into(), json!(all));
            body.insert("redeploy".into(), json!(false));
            self.patch(region, handle, &body).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container_spec() -> ContainerSettled {
        ContainerSettled {
            namespace: Handle::new("ns-1"),
            image: "rg.fr-par.scw.cloud/ns/app:1".to_owned(),
            port: Partial::Known(8080),
            cpu_limit: Partial::Known(1000),
            memory_limit_mb: Partial::Known(2048),
            min_scale: Partial::Known(0),
            max_scale: Partial::Known(2),
            timeout_seconds: Partial::Known(300),
            environment: Partial::Known(EnvVars::from([("MODE".to_owned(), "test".to_owned())])),
            secret_environment: Partial::Unknown,
        }
    }

    fn wire(body: Value) -> ContainerWire {
        serde_json::from_value(body).expect("a container")
    }

    #[test]
    fn names_follow_scaleways_grammar() {
        for good in ["a", "app-1", "ct1abc-mkr-container"] {
            assert!(check_name("container", good, 34).is_ok(), "{good}");
        }
        for bad in ["", "1app", "App", "app-", "app_1", &"a".repeat(35)] {
            let err = check_name("container", bad, 34).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Invalid, "{bad}");
        }
        assert!(check_name("namespace", &"a".repeat(63), 63).is_ok());
    }

    #[test]
    fn images_are_registry_paths() {
        for good in [
            "rg.fr-par.scw.cloud/ns/app:1.4",
            "nginx:latest",
            "nginx",
            "ghcr.io/owner/image",
            "localhost:5000/team/app:dev",
            "docker.io/library/a__b.c-d:1",
            "rg.fr-par.scw.cloud/ns/app@sha256:0123456789abcdef0123456789abcdef",
        ] {
            assert!(check_image(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "https://rg.fr-par.scw.cloud/ns/app",
            "rg.fr-par.scw.cloud/NS/app",
            "app:",
            "a b",
            "ns//app",
            "app@sha256:xyz",
            "-app",
        ] {
            assert!(check_image(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn memory_must_fit_the_cpu_and_ports_and_timeouts_their_ranges() {
        for (cpu, memory) in [
            (1000, 1024),
            (1000, 2048),
            (70, 128),
            (2000, 8000),
            (2240, 4096),
        ] {
            assert!(check_resources(cpu, memory).is_ok(), "{cpu}/{memory}");
        }
        for (cpu, memory) in [
            (2000, 1024),
            (70, 300),
            (60, 128),
            (6001, 12228),
            (1000, 100),
        ] {
            assert!(check_resources(cpu, memory).is_err(), "{cpu}/{memory}");
        }
        assert!(check_port(8080).is_ok());
        assert!(check_port(9090).is_err() && check_port(0).is_err());
        assert!(
            check_timeout(900).is_ok() && check_timeout(901).is_err() && check_timeout(0).is_err()
        );
        assert!(check_scale(Some(3), Some(2)).is_err() && check_scale(None, Some(0)).is_err());
        // What the spec leaves unsaid is the container's own (here 4000 MB), or the
        // default of 1000 mvCPU.
        let mut spec = container_spec();
        spec.cpu_limit = Partial::Unknown;
        let current =
            wire(json!({ "id": "c", "name": "c", "cpu_limit": 500, "memory_limit": 4000 }));
        assert!(
            check_container(&spec, Some(&current)).is_err(),
            "500 mvCPU take at most 2000 MB"
        );
        assert!(check_container(&spec, None).is_ok());
    }

    #[test]
    fn timeouts_are_duration_strings() {
        assert_eq!(duration(300), "300s");
        assert_eq!(seconds_of("300s"), Some(300));
        assert_eq!(seconds_of("300.000s"), Some(300));
        for bad in ["300.5s", "5m", "s", "300", ""] {
            assert_eq!(seconds_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn environment_variables_scaleway_refuses_are_refused() {
        let secret = |name: &str| BTreeMap::from([(name.to_owned(), Handle::new("s1"))]);
        let plain = |name: &str, value: &str| EnvVars::from([(name.to_owned(), value.to_owned())]);
        assert!(check_env(Some(&plain("MODE", "x")), Some(&secret("DB"))).is_ok());
        assert!(check_env(Some(&plain("PORT", "1")), None).is_err());
        assert!(check_env(None, Some(&secret("SCW_TOKEN"))).is_err());
        assert!(check_env(Some(&plain("A=B", "1")), None).is_err());
        assert!(check_env(Some(&plain("DB", "x")), Some(&secret("DB"))).is_err());
        assert!(check_env(Some(&plain("LONG", &"x".repeat(1001))), None).is_err());
        let many: EnvVars = (0..101).map(|i| (format!("V{i}"), String::new())).collect();
        assert!(check_env(Some(&many), None).is_err());
    }

    #[test]
    fn a_namespace_reads_back_with_its_marker_and_an_empty_description() {
        let ns: NamespaceWire = serde_json::from_value(json!({
            "id": "ns-1", "name": "web", "status": "ready", "description": null,
            "environment_variables": { "MODE": "test" },
            "secret_environment_variables": [{ "key": "DB", "hashed_value": "$argon2id$x" }],
            "registry_endpoint": "", "tags": ["team=web", "managed-by-infra=shop"],
        }))
        .unwrap();
        let read = namespace_reading(&ns);
        let reported = read.reported();
        assert_eq!(reported["description"], "");
        assert_eq!(reported["environment"], json!({ "MODE": "test" }));
        assert_eq!(
            reported["tags"],
            json!(["managed-by-infra=shop", "team=web"])
        );
        assert!(
            !reported.contains_key("secretEnvironment"),
            "Scaleway answers hashes only"
        );
        assert_eq!(read.observed().registry_endpoint, Partial::Unknown);
        assert_eq!(read.handle(), "ns-1");
    }

    #[test]
    fn a_container_reads_back_as_declared_and_unknown_where_scaleway_is_silent() {
        let c = wire(json!({
            "id": "c-1", "name": "app", "namespace_id": "ns-1", "status": "ready",
            "registry_image": "rg.fr-par.scw.cloud/ns/app:1", "port": 8080,
            "cpu_limit": 1000, "memory_limit": 2048, "min_scale": 0, "max_scale": 2,
            "timeout": "300s", "environment_variables": { "MODE": "test" },
            "secret_environment_variables": [{ "key": "DB", "hashed_value": "h" }],
            "domain_name": "web1-app.functions.fnc.fr-par.scw.cloud",
            "tags": ["managed-by-infra=shop"],
        }));
        let read = container_reading(&c);
        let reported = read.reported();
        assert_eq!(reported["namespace"], "ns-1");
        assert_eq!(reported["image"], "rg.fr-par.scw.cloud/ns/app:1");
        assert_eq!(reported["port"], 8080);
        assert_eq!(reported["memoryLimitMb"], 2048);
        assert_eq!(reported["timeoutSeconds"], 300);
        assert!(!reported.contains_key("secretEnvironment"));
        // What was applied is what is read: no field of the spec differs.
        assert!(container_fields(&container_spec(), Some(&c)).is_empty());
        let silent = wire(json!({ "id": "c-2", "name": "app", "port": 0, "timeout": "1.5s" }));
        let read = container_reading(&silent);
        for field in [
            "port",
            "timeoutSeconds",
            "image",
            "environment",
            "namespace",
        ] {
            assert!(!read.reported().contains_key(field), "{field}");
        }
    }

    #[test]
    fn a_create_sends_what_is_said_and_an_update_only_what_differs() {
        let mut quiet = container_spec();
        quiet.min_scale = Partial::Unknown;
        quiet.port = Partial::Unknown;
        let create = container_fields(&quiet, None);
        assert_eq!(create["timeout"], "300s");
        assert!(!create.contains_key("min_scale") && !create.contains_key("port"));
        let current = wire(json!({
            "id": "c-1", "name": "app", "namespace_id": "ns-1",
            "registry_image": "rg.fr-par.scw.cloud/ns/app:1", "port": 8080,
            "cpu_limit": 1000, "memory_limit": 1024, "min_scale": 0, "max_scale": 2,
            "timeout": "300.000s", "environment_variables": { "MODE": "test" },
        }));
        let update = container_fields(&container_spec(), Some(&current));
        assert_eq!(Value::Object(update), json!({ "memory_limit": 2048 }));
    }

    #[test]
    fn a_namespace_update_keeps_the_marker_and_sends_only_what_differs() {
        let current: NamespaceWire = serde_json::from_value(json!({
            "id": "ns-1", "name": "web", "description": "d",
            "environment_variables": { "MODE": "test" },
            "tags": ["managed-by-infra=shop", "suite=conformance"],
        }))
        .unwrap();
        let spec = ContainerNamespaceSettled {
            description: Partial::Known("d".to_owned()),
            environment: Partial::Known(EnvVars::from([("MODE".to_owned(), "changed".to_owned())])),
            secret_environment: Partial::Unknown,
            tags: Partial::Known(BTreeSet::from(["suite=conformance".to_owned()])),
        };
        let body = namespace_changes(&spec, &current);
        assert_eq!(
            Value::Object(body),
            json!({ "environment_variables": { "MODE": "changed" } })
        );
        let mut retagged = spec.clone();
        retagged.tags = Partial::Known(BTreeSet::from(["team=web".to_owned()]));
        let body = namespace_changes(&retagged, &current);
        assert_eq!(body["tags"], json!(["managed-by-infra=shop", "team=web"]));
    }
}
