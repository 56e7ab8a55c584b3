//! Serverless Functions (API `functions/v1beta1`): the `functionNamespace` kind
//! ([`namespace`]), the `function` kind ([`function`]) and the portable `compute`
//! ([`compute`]), and what the three share: Scaleway's shapes, the checks Scaleway would
//! make, waiting for statuses, secret variables, and deploying a code archive.
//!
//! Every resource is regional: each call goes to `/functions/v1beta1/regions/{region}/…`,
//! so a handle of another region is `NotFound` in this one. Namespaces are listed in the
//! configured project (`project_id`); functions are listed per namespace, as the API
//! wants a `namespace_id`.
//!
//! Statuses: a new or changed namespace is `pending` until `ready`; a new function is
//! `created` until code is deployed, then `pending` until `ready`. Writes await the end
//! of the transient statuses (`creating`, `pending`) on the configuration's clock;
//! `error` is a failure carrying Scaleway's `error_message`, `locked` is `Denied`.
//! Deletes answer `deleting` and are awaited until the resource is gone.
//!
//! Code: `code` names a zip archive on the machine that applies (a path, relative to the
//! working directory; a `scheme://` URL is refused as `Invalid`). It is read before any
//! call (a file that cannot be read changes nothing); its size is sent to
//! `GET …/functions/{id}/upload-url?content_length=N`, its bytes `PUT` to the presigned
//! URL answered (no token goes there), and `POST …/deploy` builds it; the deployment is
//! awaited until `ready`. Nothing Scaleway answers identifies deployed
//! code (no digest, no location), so `code` and `codeSha256` are never read back: the
//! engine compares `code` with the location it last deployed, and every update of a
//! resource whose `code` is said uploads and deploys the archive again (a new archive
//! behind an unchanged path is deployed by the next update for any reason). A create
//! whose upload or deployment fails deletes what it made before reporting the failure,
//! so that the next apply creates it again with its code rather than finding a function
//! without code and nothing to compare.
//!
//! Secret environment variables: Scaleway takes their values, keeps them hashed and
//! answers only `{key, hashed_value}`. Each referenced secret's latest value is read from
//! Secret Manager for the one write that sends it, and never logged, kept or put in an
//! error. Since the hashes cannot be compared, a write that touches a resource sends
//! every declared secret variable again and removes the ones no longer declared (a
//! `{key}` without a value). They are never reported (`Unknown`).
//!
//! Checks made before any call, as Scaleway refuses them (`Invalid`): a runtime that is
//! not one of Scaleway's; memory other than 128, 256, 512, 1024, 2048, 3072 or 4096 MB
//! (Scaleway pairs each with a CPU share and takes no other); a timeout outside 1 to
//! 900 s; scaling outside 0 to 50 (at least 1 for the maximum) or a minimum above the
//! maximum; an environment variable with no name, a `=` in it, a name starting with
//! `SCW_` (reserved), a name in both maps, a value over 1000 characters, more than 100
//! variables; an archive that cannot be read, is empty, or is over Scaleway's 100 MiB.
//! A secret value over 65536 bytes is refused once read, before it is sent.
//!
//! A namespace made for a `compute` carries the tag [`COMPUTE_TAG`] beside the marker:
//! such namespaces, and the functions in them, belong to `compute` and are left out of
//! the `functionNamespace` and `function` listings (so that the engine never takes one
//! for an orphan of those kinds); a declared tag of that name is refused.

mod compute;
mod function;
mod namespace;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;

use infra_core::kinds::{Compute, EnvVars, Function, FunctionNamespace, Secrets};
use infra_core::prelude::{Handle, Partial};
use infra_core::sdk::poll::{self, Waited};
use infra_core::sdk::{BackendError, ErrorKind, Router};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::api::Call;
use crate::clients::Clients;
use crate::secret_value::latest_value as secret_value;
use crate::tags;

/// The `not_found` resource types that mean "this namespace does not exist".
const NO_NAMESPACE: &[&str] = &["namespace"];
/// The `not_found` resource types that mean "this function does not exist".
const NO_FUNCTION: &[&str] = &["function"];
/// The tag a namespace made for a `compute` carries (and its function), beside the
/// marker.
const COMPUTE_TAG: &str = "infra-kind=compute";
/// The key of [`COMPUTE_TAG`] as a `key=value` tag.
const COMPUTE_TAG_KEY: &str = "infra-kind";
/// Scaleway's runtimes (`FunctionRuntime`).
const RUNTIMES: &[&str] = &[
    "golang",
    "python",
    "python3",
    "node8",
    "node10",
    "node14",
    "node16",
    "node17",
    "python37",
    "python38",
    "python39",
    "python310",
    "go113",
    "go117",
    "go118",
    "node18",
    "rust165",
    "go119",
    "python311",
    "php82",
    "node19",
    "go120",
    "node20",
    "go121",
    "node22",
    "python312",
    "php83",
    "go122",
    "rust179",
    "go123",
    "go124",
    "python313",
    "rust185",
    "php84",
];
/// The memory sizes (MB) a function may have.
const MEMORY_TIERS: &[u32] = &[128, 256, 512, 1024, 2048, 3072, 4096];
/// The largest archive Scaleway takes (100 MiB).
const MAX_ARCHIVE: usize = 100 << 20;

/// Adds the Serverless Functions kinds to `router`.
pub(crate) fn register(mut router: Router, clients: &Arc<Clients>) -> Router {
    router.add::<FunctionNamespace>(namespace::FunctionNamespaces::new(Arc::clone(clients)));
    router.add::<Function>(function::Functions::new(Arc::clone(clients)));
    router.add::<Compute>(compute::Computes::new(Arc::clone(clients)));
    router
}

// ---- Scaleway's shapes -------------------------------------------------------------

/// A secret variable as Scaleway answers it (its hash is not read).
#[derive(Debug, Clone, Deserialize)]
struct HashedVar {
    key: String,
}

/// A namespace as Scaleway answers it (the fields read here).
#[derive(Debug, Clone, Deserialize)]
struct NamespaceWire {
    id: String,
    name: String,
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

/// A function as Scaleway answers it (the fields read here).
#[derive(Debug, Clone, Deserialize)]
struct FunctionWire {
    id: String,
    name: String,
    #[serde(default)]
    namespace_id: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    runtime: Option<String>,
    #[serde(default)]
    handler: Option<String>,
    #[serde(default)]
    memory_limit: Option<u32>,
    #[serde(default)]
    min_scale: Option<u32>,
    #[serde(default)]
    max_scale: Option<u32>,
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default)]
    environment_variables: Option<EnvVars>,
    #[serde(default)]
    secret_environment_variables: Option<Vec<HashedVar>>,
    #[serde(default)]
    domain_name: Option<String>,
    #[serde(default)]
    error_message: Option<String>,
    #[serde(default)]
    tags: Option<Vec<String>>,
}

/// What `GetFunctionUploadURL` answers (its headers are the size and type sent anyway).
#[derive(Debug, Deserialize)]
struct UploadUrl {
    url: String,
}

impl NamespaceWire {
    fn tags(&self) -> Vec<String> {
        self.tags.clone().unwrap_or_default()
    }

    /// Whether this namespace was made for a `compute`.
    fn is_compute(&self) -> bool {
        self.tags.iter().flatten().any(|t| t == COMPUTE_TAG)
    }

    fn secret_keys(&self) -> BTreeSet<String> {
        secret_keys(self.secret_environment_variables.as_ref())
    }
}

impl FunctionWire {
    fn tags(&self) -> Vec<String> {
        self.tags.clone().unwrap_or_default()
    }

    fn secret_keys(&self) -> BTreeSet<String> {
        secret_keys(self.secret_environment_variables.as_ref())
    }

    /// What Scaleway's answer says that read reports alike for `function` and `compute`.
    fn domain(&self) -> Partial<String> {
        known(non_empty(self.domain_name.as_ref()))
    }
}

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

/// Refuses a runtime Scaleway does not have.
fn check_runtime(runtime: &str) -> Result<(), BackendError> {
    if RUNTIMES.contains(&runtime) {
        return Ok(());
    }
    Err(invalid(format!(
        "`runtime` is {runtime:?}, which is not a Scaleway Functions runtime (one of {})",
        RUNTIMES.join(", ")
    )))
}

fn check_memory(field: &str, mb: u32) -> Result<(), BackendError> {
    if MEMORY_TIERS.contains(&mb) {
        return Ok(());
    }
    Err(invalid(format!(
        "`{field}` is {mb}; a Scaleway function takes 128, 256, 512, 1024, 2048, 3072 or \
         4096 MB (each with its own CPU share)"
    )))
}

fn check_timeout(seconds: u32) -> Result<(), BackendError> {
    if (1..=900).contains(&seconds) {
        return Ok(());
    }
    Err(invalid(format!(
        "`timeoutSeconds` is {seconds}; Scaleway takes 1 to 900"
    )))
}

/// Refuses scaling Scaleway refuses; `min` and `max` are what the function will have.
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
    match (min, max) {
        (Some(min), Some(max)) if min > max => Err(invalid(format!(
            "`minScale` ({min}) exceeds `maxScale` ({max})"
        ))),
        _ => Ok(()),
    }
}

/// Refuses environment variables Scaleway refuses; either map may be unsaid.
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
        if name.starts_with("SCW_") {
            return Err(invalid(format!(
                "the environment variable {name} is reserved by Scaleway (SCW_*)"
            )));
        }
        if !seen.insert(name) {
            return Err(invalid(format!(
                "the environment variable {name} is declared twice (in both `environment` \
                 and `secretEnvironment`?)"
            )));
        }
    }
    match plain
        .into_iter()
        .flatten()
        .find(|(_, v)| v.chars().count() > 1000)
    {
        Some((name, _)) => Err(invalid(format!(
            "the value of the environment variable {name} is longer than the 1000 characters \
             Scaleway takes"
        ))),
        None => Ok(()),
    }
}

/// Refuses declared tags that would hide a resource among `compute`'s own.
fn check_tags<'t>(tags: impl IntoIterator<Item = &'t String>) -> Result<(), BackendError> {
    match tags
        .into_iter()
        .find(|t| t.as_str() == COMPUTE_TAG_KEY || t.starts_with(&format!("{COMPUTE_TAG_KEY}=")))
    {
        Some(tag) => Err(invalid(format!(
            "the tag {tag:?} is this backend's own (`{COMPUTE_TAG}` marks the namespaces made \
             for `compute`) and cannot be declared"
        ))),
        None => Ok(()),
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

// ---- Writes ---------------------------------------------------------------------------

/// What a declaration says of a function's configuration, in Scaleway's terms (`None`:
/// unsaid).
struct Config<'a> {
    runtime: &'a str,
    handler: &'a str,
    memory_mb: Option<u32>,
    min_scale: Option<u32>,
    max_scale: Option<u32>,
    timeout_seconds: Option<u32>,
    environment: Option<&'a EnvVars>,
}

impl Config<'_> {
    /// The fields of `CreateFunction` (`current` is `None`) or `UpdateFunction` that
    /// bring `current` to this configuration: only what differs.
    fn changes(&self, current: Option<&FunctionWire>) -> Map<String, Value> {
        let mut body = Map::new();
        let mut put = |field: &str, wanted: Option<Value>, now: Option<Value>| {
            if let Some(wanted) = wanted.filter(|w| now.as_ref() != Some(w)) {
                body.insert(field.to_owned(), wanted);
            }
        };
        let now = |read: fn(&FunctionWire) -> Option<Value>| current.and_then(read);
        put(
            "runtime",
            Some(json!(self.runtime)),
            now(|c| c.runtime.clone().map(Value::from)),
        );
        put(
            "handler",
            Some(json!(self.handler)),
            now(|c| c.handler.clone().map(Value::from)),
        );
        put(
            "memory_limit",
            self.memory_mb.map(Value::from),
            now(|c| c.memory_limit.map(Value::from)),
        );
        put(
            "min_scale",
            self.min_scale.map(Value::from),
            now(|c| c.min_scale.map(Value::from)),
        );
        put(
            "max_scale",
            self.max_scale.map(Value::from),
            now(|c| c.max_scale.map(Value::from)),
        );
        put(
            "timeout",
            self.timeout_seconds.map(|s| json!(duration(s))),
            now(|c| {
                c.timeout
                    .as_deref()
                    .and_then(seconds_of)
                    .map(|s| json!(duration(s)))
            }),
        );
        put(
            "environment_variables",
            self.environment.map(|e| json!(e)),
            now(|c| Some(json!(c.environment_variables.clone().unwrap_or_default()))),
        );
        body
    }
}

/// The tags an update writes to keep `now` and bring in `declared` (the marker kept),
/// or `None` when they are the same set.
fn tag_update(declared: Vec<String>, now: &[String]) -> Option<Vec<String>> {
    let wanted = tags::for_update(declared, now);
    let same = wanted.iter().collect::<BTreeSet<_>>() == now.iter().collect::<BTreeSet<_>>();
    (!same).then_some(wanted)
}

// ---- Code ---------------------------------------------------------------------------

/// The bytes of the archive `code` names, refused as `Invalid` when they cannot be sent.
/// Read before any call, so that a create or an update it refuses changes nothing.
async fn read_archive(code: &str) -> Result<Vec<u8>, BackendError> {
    if code.contains("://") {
        return Err(invalid(format!(
            "`code` is {code:?}; Scaleway Functions takes a zip archive on the machine that \
             applies, named by its path (`dist/api.zip`), and uploads it: a URL cannot be \
             deployed"
        )));
    }
    let bytes = tokio::fs::read(code).await.map_err(|e| {
        invalid(format!(
            "`code` names {code}, which cannot be read on this machine: {e}"
        ))
    })?;
    if bytes.is_empty() || bytes.len() > MAX_ARCHIVE {
        return Err(invalid(format!(
            "the archive {code} has {} bytes; Scaleway takes 1 byte to 100 MiB",
            bytes.len()
        )));
    }
    Ok(bytes)
}

// ---- Secret variables ---------------------------------------------------------------

// ---- One region's API ---------------------------------------------------------------

/// The Serverless Functions API of one region.
#[derive(Clone, Copy)]
struct Region<'a> {
    clients: &'a Clients,
    region: &'a str,
}

impl<'a> Region<'a> {
    fn new(clients: &'a Clients, region: &'a str) -> Self {
        Region { clients, region }
    }

    fn path(&self, rest: &str) -> String {
        format!("/functions/v1beta1/regions/{}/{rest}", self.region)
    }

    async fn namespace(&self, id: &str) -> Result<NamespaceWire, BackendError> {
        let call = Call::get(
            "functions:GetNamespace",
            self.path(&format!("namespaces/{id}")),
        );
        self.clients.api().call(call.not_found(NO_NAMESPACE)).await
    }

    async fn function(&self, id: &str) -> Result<FunctionWire, BackendError> {
        let call = Call::get(
            "functions:GetFunction",
            self.path(&format!("functions/{id}")),
        );
        self.clients.api().call(call.not_found(NO_FUNCTION)).await
    }

    /// The project's namespaces in the region (every page), `name` filtering them.
    async fn namespaces(&self, name: Option<&str>) -> Result<Vec<NamespaceWire>, BackendError> {
        let mut call = Call::get("functions:ListNamespaces", self.path("namespaces"))
            .query("project_id", self.clients.project_id());
        if let Some(name) = name {
            call = call.query("name", name);
        }
        let all: Vec<NamespaceWire> = self.clients.api().list_all(call, "namespaces").await?;
        Ok(all
            .into_iter()
            .filter(|n| name.is_none_or(|want| n.name == want))
            .collect())
    }

    /// The namespace named `name`, if there is one.
    async fn namespace_named(&self, name: &str) -> Result<Option<NamespaceWire>, BackendError> {
        Ok(self.namespaces(Some(name)).await?.into_iter().next())
    }

    /// The functions of namespace `id` (every page), `name` filtering them; none when the
    /// namespace is gone.
    async fn functions_in(
        &self,
        id: &str,
        name: Option<&str>,
    ) -> Result<Vec<FunctionWire>, BackendError> {
        let mut call = Call::get("functions:ListFunctions", self.path("functions"))
            .query("namespace_id", id)
            .query("project_id", self.clients.project_id())
            .not_found(NO_NAMESPACE);
        if let Some(name) = name {
            call = call.query("name", name);
        }
        match self
            .clients
            .api()
            .list_all::<FunctionWire>(call, "functions")
            .await
        {
            Ok(all) => Ok(all
                .into_iter()
                .filter(|f| name.is_none_or(|want| f.name == want))
                .collect()),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// Sends `body` to `PATCH` the namespace `id`.
    async fn patch_namespace(
        &self,
        id: &str,
        body: &Map<String, Value>,
    ) -> Result<(), BackendError> {
        let call = Call::patch(
            "functions:UpdateNamespace",
            self.path(&format!("namespaces/{id}")),
        );
        self.clients
            .api()
            .act(call.not_found(NO_NAMESPACE), Some(body))
            .await
    }

    /// Sends `body` to `PATCH` the function `id`.
    async fn patch_function(
        &self,
        id: &str,
        body: &Map<String, Value>,
    ) -> Result<(), BackendError> {
        let call = Call::patch(
            "functions:UpdateFunction",
            self.path(&format!("functions/{id}")),
        );
        self.clients
            .api()
            .act(call.not_found(NO_FUNCTION), Some(body))
            .await
    }

    /// Uploads `bytes` (read with [`read_archive`]) to the function `id` and deploys
    /// it (the deployment is awaited by the caller).
    async fn deploy(&self, id: &str, bytes: Vec<u8>) -> Result<(), BackendError> {
        let api = self.clients.api();
        let call = Call::get(
            "functions:GetFunctionUploadURL",
            self.path(&format!("functions/{id}/upload-url")),
        )
        .query("content_length", bytes.len().to_string())
        .not_found(NO_FUNCTION);
        let target: UploadUrl = api.call(call).await?;
        api.upload(
            "functions: the upload of the code archive",
            &target.url,
            bytes,
        )
        .await?;
        let call = Call::post(
            "functions:DeployFunction",
            self.path(&format!("functions/{id}/deploy")),
        );
        api.act(call.not_found(NO_FUNCTION), Some(&json!({}))).await
    }

    /// `secret_environment_variables` to send: each declared variable with its secret's
    /// latest value, and each variable `current` holds that is no longer declared as a
    /// key without a value (which removes it).
    async fn secret_vars(
        &self,
        declared: &BTreeMap<String, Handle<Secrets>>,
        current: &BTreeSet<String>,
    ) -> Result<Vec<Value>, BackendError> {
        let mut vars = Vec::new();
        for (key, handle) in declared {
            let value = secret_value(self.clients, self.region, handle.as_str()).await?;
            if value.expose().len() > 65_536 {
                return Err(invalid(format!(
                    "the secret {handle} of the variable {key} is larger than the 65536 bytes \
                     Scaleway takes"
                )));
            }
            vars.push(json!({ "key": key, "value": value.expose() }));
        }
        for key in current.iter().filter(|k| !declared.contains_key(*k)) {
            vars.push(json!({ "key": key }));
        }
        Ok(vars)
    }

    /// Deletes the namespace `id` (Scaleway deletes its functions with it) unless it is
    /// being deleted already, and awaits it gone.
    async fn delete_namespace(&self, id: &str) -> Result<(), BackendError> {
        const WHAT: &str = "functions:DeleteNamespace";
        let ns = self.settled(WHAT, || self.namespace(id)).await?;
        if ns.status != "deleting" {
            let call = Call::delete(WHAT, self.path(&format!("namespaces/{id}")));
            let api = self.clients.api();
            api.act(call.not_found(NO_NAMESPACE), None::<&()>).await?;
        }
        self.gone(WHAT, || self.namespace(id)).await
    }

    /// Deletes the function `id` unless it is being deleted already, and awaits it gone.
    async fn delete_function(&self, id: &str) -> Result<(), BackendError> {
        const WHAT: &str = "functions:DeleteFunction";
        let f = self.settled(WHAT, || self.function(id)).await?;
        if f.status != "deleting" {
            let call = Call::delete(WHAT, self.path(&format!("functions/{id}")));
            let api = self.clients.api();
            api.act(call.not_found(NO_FUNCTION), None::<&()>).await?;
        }
        self.gone(WHAT, || self.function(id)).await
    }

    /// Polls `get` while the resource is in a transient status (`creating`, `pending`),
    /// answering it settled, whatever its status then.
    async fn settled<T, F, Fut>(&self, what: &str, get: F) -> Result<T, BackendError>
    where
        T: Status,
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, BackendError>>,
    {
        let polled = poll::until_done(
            self.clients.clock(),
            self.clients.polling(),
            what,
            || async {
                let resource = get().await?;
                Ok((!matches!(resource.status(), "creating" | "pending")).then_some(resource))
            },
        )
        .await?;
        match polled {
            Waited::Done(resource) => Ok(resource),
            Waited::StillRunning => Err(poll::still_running(what, self.clients.polling())),
        }
    }

    /// Polls `get` until it answers `NotFound`.
    async fn gone<T, F, Fut>(&self, what: &str, get: F) -> Result<(), BackendError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, BackendError>>,
    {
        let polled = poll::until_done(
            self.clients.clock(),
            self.clients.polling(),
            what,
            || async {
                match get().await {
                    Err(e) if e.kind == ErrorKind::NotFound => Ok(Some(())),
                    Err(e) => Err(e),
                    Ok(_) => Ok(None),
                }
            },
        )
        .await?;
        match polled {
            Waited::Done(()) => Ok(()),
            Waited::StillRunning => Err(poll::still_running(what, self.clients.polling())),
        }
    }

    /// The namespace `id` once settled, which must be `ready`.
    async fn ready_namespace(&self, what: &str, id: &str) -> Result<NamespaceWire, BackendError> {
        let ns = self.settled(what, || self.namespace(id)).await?;
        ready(what, "namespace", &ns, &["ready"])?;
        Ok(ns)
    }

    /// The function `id` once settled, which must be `ready` (or `created`, before any
    /// code is deployed).
    async fn ready_function(&self, what: &str, id: &str) -> Result<FunctionWire, BackendError> {
        let f = self.settled(what, || self.function(id)).await?;
        ready(what, "function", &f, &["ready", "created"])?;
        Ok(f)
    }
}

// ---- Statuses -----------------------------------------------------------------------

/// A resource whose status Scaleway moves on its own.
trait Status {
    fn id(&self) -> &str;
    fn status(&self) -> &str;
    fn error_message(&self) -> Option<&String>;
}

impl Status for NamespaceWire {
    fn id(&self) -> &str {
        &self.id
    }
    fn status(&self) -> &str {
        &self.status
    }
    fn error_message(&self) -> Option<&String> {
        self.error_message.as_ref()
    }
}

impl Status for FunctionWire {
    fn id(&self) -> &str {
        &self.id
    }
    fn status(&self) -> &str {
        &self.status
    }
    fn error_message(&self) -> Option<&String> {
        self.error_message.as_ref()
    }
}

/// Refuses a settled `resource` whose status is not one of `good`: `error` carries
/// Scaleway's message, `locked` is `Denied`, `deleting` a `Conflict`.
fn ready(
    what: &str,
    kind: &str,
    resource: &impl Status,
    good: &[&str],
) -> Result<(), BackendError> {
    let status = resource.status();
    if good.contains(&status) {
        return Ok(());
    }
    let (error_kind, why) = match status {
        "error" => (
            ErrorKind::Other,
            resource
                .error_message()
                .map_or("Scaleway gave no reason", String::as_str),
        ),
        "locked" => (ErrorKind::Denied, "Scaleway has locked it"),
        "deleting" => (ErrorKind::Conflict, "it is being deleted"),
        _ => (ErrorKind::Other, "an unexpected status"),
    };
    Err(BackendError::new(
        error_kind,
        format!("{what}: the {kind} {} is `{status}`: {why}", resource.id()),
    )
    .with_code(status.to_owned()))
}

/// The outcome of `work` on a resource `made` moments ago by this create: on failure the
/// resource is deleted with `undo` (best effort) before the failure is answered.
async fn or_undo<T, U>(
    what: &str,
    work: impl Future<Output = Result<T, BackendError>>,
    undo: impl Future<Output = Result<U, BackendError>>,
) -> Result<T, BackendError> {
    match work.await {
        Ok(done) => Ok(done),
        Err(err) => {
            let undone = match undo.await {
                Ok(_) => "it was deleted again, and the next apply creates it anew".to_owned(),
                Err(e) => format!("deleting it again failed too ({e}): the next apply finds it"),
            };
            Err(BackendError {
                message: format!("{}; {what}: {undone}", err.message),
                ..err
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_whole_seconds() {
        assert_eq!(duration(300), "300s");
        assert_eq!(seconds_of("300s"), Some(300));
        assert_eq!(seconds_of("60.000s"), Some(60));
        assert_eq!(seconds_of("1.5s"), None);
        assert_eq!(seconds_of("5m"), None);
        assert_eq!(seconds_of("s"), None);
    }

    #[test]
    fn refusals_name_what_scaleway_would_refuse() {
        assert!(check_runtime("python311").is_ok());
        assert_eq!(
            check_runtime("python3.11").unwrap_err().kind,
            ErrorKind::Invalid
        );
        assert!(check_memory("memoryMb", 1024).is_ok());
        assert!(check_memory("memoryMb", 1000).is_err());
        assert!(check_timeout(900).is_ok() && check_timeout(901).is_err());
        assert!(check_scale(Some(0), Some(50)).is_ok());
        assert!(check_scale(Some(3), Some(2)).is_err());
        assert!(check_scale(None, Some(0)).is_err());
        let env = |k: &str| EnvVars::from([(k.to_owned(), "v".to_owned())]);
        assert!(check_env(Some(&env("MODE")), None).is_ok());
        assert!(check_env(Some(&env("SCW_TOKEN")), None).is_err());
        let secret = BTreeMap::from([("MODE".to_owned(), Handle::new("s1"))]);
        assert!(check_env(Some(&env("MODE")), Some(&secret)).is_err());
        let long = EnvVars::from([("A".to_owned(), "x".repeat(1001))]);
        assert!(check_env(Some(&long), None).is_err());
        assert!(check_tags(&["team=web".to_owned()]).is_ok());
        assert!(check_tags(&[COMPUTE_TAG.to_owned()]).is_err());
        assert!(check_tags(&["infra-kind=other".to_owned()]).is_err());
    }

    #[tokio::test]
    async fn an_archive_is_a_readable_file_never_a_url() {
        let url = read_archive("https://example.invalid/app.zip")
            .await
            .unwrap_err();
        assert!(
            url.message.contains("a URL cannot be deployed"),
            "{}",
            url.message
        );
        let missing = read_archive("/nonexistent/app.zip").await.unwrap_err();
        assert_eq!(missing.kind, ErrorKind::Invalid);
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.zip");
        std::fs::write(&empty, b"").unwrap();
        assert!(read_archive(empty.to_str().unwrap()).await.is_err());
        let zip = dir.path().join("app.zip");
        std::fs::write(&zip, b"PK\x05\x06").unwrap();
        assert_eq!(read_archive(zip.to_str().unwrap()).await.unwrap().len(), 4);
    }

    #[test]
    fn a_failed_status_says_why() {
        let f = FunctionWire {
            id: "f1".into(),
            name: "api".into(),
            namespace_id: "n1".into(),
            status: "error".into(),
            runtime: None,
            handler: None,
            memory_limit: None,
            min_scale: None,
            max_scale: None,
            timeout: None,
            environment_variables: None,
            secret_environment_variables: None,
            domain_name: None,
            error_message: Some("the build failed".into()),
            tags: None,
        };
        let err = ready("deploy", "function", &f, &["ready"]).unwrap_err();
        assert!(err.message.contains("the build failed"), "{}", err.message);
        let locked = FunctionWire {
            status: "locked".into(),
            ..f.clone()
        };
        assert_eq!(
            ready("deploy", "function", &locked, &["ready"])
                .unwrap_err()
                .kind,
            ErrorKind::Denied
        );
        assert!(
            ready(
                "deploy",
                "function",
                &FunctionWire {
                    status: "created".into(),
                    ..f
                },
                &["ready", "created"]
            )
            .is_ok()
        );
    }
}
