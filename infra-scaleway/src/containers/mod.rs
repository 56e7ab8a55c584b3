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

mod container;
mod namespace;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use infra_core::kinds::{Container, ContainerNamespace, ContainerSettled, EnvVars, Secrets};
use infra_core::prelude::Handle;
use infra_core::sdk::poll::{self, Waited};
use infra_core::sdk::{BackendError, ErrorKind, Marker, RawTags, Router};
use serde::Deserialize;

use crate::clients::Clients;
use crate::serverless::{
    self, HashedVar, Product, Resource, Scope, check_scale, check_timeout, impl_resource, invalid,
};

use container::Containers;
use namespace::ContainerNamespaces;

/// The `not_found` resource types that mean "this container does not exist".
const NO_CONTAINER: &[&str] = &["container"];
/// Ports Scaleway's platform uses itself.
const RESERVED_PORTS: [u32; 6] = [8008, 8012, 8013, 8022, 9090, 9091];
/// Scaleway's defaults for a container created without CPU or memory limits.
const DEFAULT_CPU: u32 = 1000;
const DEFAULT_MEMORY: u32 = 2048;

/// Adds the Serverless Containers kinds to `router`.
pub(crate) fn register(mut router: Router, clients: &Arc<Clients>) -> Router {
    router.add::<ContainerNamespace>(ContainerNamespaces::new(Arc::clone(clients)));
    router.add::<Container>(Containers::new(Arc::clone(clients)));
    router
}

// ---- One region's API ---------------------------------------------------------------

/// Serverless Containers, as one of the two serverless APIs.
enum ContainersApi {}

impl Product for ContainersApi {
    const API: &'static str = "/containers/v1beta1";
    const GET_NAMESPACE: &'static str = "containers:GetNamespace";
    const LIST_NAMESPACES: &'static str = "containers:ListNamespaces";
    const UPDATE_NAMESPACE: &'static str = "containers:UpdateNamespace";
    const RESOURCES: &'static str = "containers";
    const GET_RESOURCE: &'static str = "containers:GetContainer";
    const LIST_RESOURCES: &'static str = "containers:ListContainers";
    const NO_RESOURCE: &'static [&'static str] = NO_CONTAINER;
    const RESERVED_ENV: &'static [&'static str] = &["PORT"];
    type Wire = ContainerWire;
}

/// The Serverless Containers API of one region.
type Region<'a> = Scope<'a, ContainersApi>;

// ---- Scaleway's shapes -------------------------------------------------------------

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

impl_resource!(ContainerWire);

// ---- What Scaleway refuses ----------------------------------------------------------

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
    serverless::check_env(plain, secret, ContainersApi::RESERVED_ENV)
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

// ---- Waiting ---------------------------------------------------------------------------

/// Whether `resource` is settled (`ready`): `Ok(false)` while Scaleway is still at
/// work, an error when it failed or is locked.
fn settled(what: &str, id: &str, resource: &impl Resource) -> Result<bool, BackendError> {
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

impl Region<'_> {
    /// Polls `get` until the resource `id` is `ready`.
    async fn await_ready<T, F, Fut>(
        &self,
        what: &str,
        id: &str,
        get: F,
    ) -> Result<Waited<T>, BackendError>
    where
        T: Resource,
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, BackendError>>,
    {
        self.poll_until(what, get, |r| settled(what, id, r)).await
    }

    /// The resource `get` answers once `ready`; still running at the deadline, an error.
    async fn ready<T, F, Fut>(&self, what: &str, id: &str, get: F) -> Result<T, BackendError>
    where
        T: Resource,
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, BackendError>>,
    {
        let waited = self.await_ready(what, id, get).await?;
        self.finished(what, waited)
    }

    /// The resource `get` answers, once Scaleway has finished its work on it: a write to
    /// a resource in a transient status is refused (`transient_state`).
    async fn when_settled<T, F, Fut>(&self, what: &str, id: &str, get: F) -> Result<T, BackendError>
    where
        T: Resource,
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, BackendError>>,
    {
        let current = get().await?;
        if !matches!(current.status(), "pending" | "creating") {
            return Ok(current);
        }
        self.ready(what, id, get).await
    }

    /// Deletes the resource at `rest` and awaits its end with `get`. A resource Scaleway
    /// is deleting already (a namespace's deletion takes its containers along) refuses
    /// the delete (`transient_state`); it is awaited like one this call deletes.
    async fn delete_and_await<T, F, Fut>(
        &self,
        what: &str,
        rest: &str,
        not_found: &[&str],
        get: F,
    ) -> Result<(), BackendError>
    where
        T: Resource,
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, BackendError>>,
    {
        let call = crate::api::Call::delete(what, self.path(rest)).not_found(not_found);
        match self.clients.api().act(call, None::<&()>).await {
            Ok(()) => {}
            Err(refused) if refused.code.as_deref() == Some("transient_state") => {
                match get().await {
                    Ok(current) if current.status() == "deleting" => {}
                    Err(e) if e.kind == ErrorKind::NotFound => return Ok(()),
                    _ => return Err(refused),
                }
            }
            Err(e) => return Err(e),
        }
        self.gone(what, get).await
    }

    /// The outcome of a create whose resource may not be settled: `waited` settled is
    /// the resource; still running at the deadline, it is settled by name and marker.
    async fn after_wait<T, F>(
        &self,
        waited: Waited<T>,
        what: &str,
        marker: &Marker,
        find: F,
    ) -> Result<T, BackendError>
    where
        F: Future<Output = Result<Option<(RawTags, T)>, BackendError>>,
    {
        match waited {
            Waited::Done(done) => Ok(done),
            Waited::StillRunning => {
                let err = poll::still_running(what, self.clients.polling());
                poll::settle_uncertain(err, marker, what, find).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use infra_core::kinds::ContainerNamespaceSettled;
    use infra_core::prelude::Partial;
    use serde_json::{Value, json};

    use super::container::{container_fields, container_reading};
    use super::namespace::{namespace_changes, namespace_reading};
    use super::*;
    use crate::serverless::{NamespaceWire, duration, seconds_of};

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
            access: infra_core::kinds::Access::Private,
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
