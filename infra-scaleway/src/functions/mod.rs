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

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use infra_core::kinds::{Access, Compute, EnvVars, Function, FunctionNamespace, Secrets};
use infra_core::prelude::{Handle, Partial};
use infra_core::sdk::{BackendError, ErrorKind, Idempotence, Router};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::api::Call;
use crate::clients::Clients;
use crate::serverless::{self, HashedVar, NO_NAMESPACE, Product, Resource, Scope, impl_resource};
use crate::serverless::{
    NamespaceWire, access_of, check_scale, check_timeout, duration, invalid, known, non_empty,
    privacy, seconds_of, tag_update,
};

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
    #[serde(default)]
    privacy: Option<String>,
}

/// What `GetFunctionUploadURL` answers (its headers are the size and type sent anyway).
#[derive(Debug, Deserialize)]
struct UploadUrl {
    url: String,
}

impl_resource!(FunctionWire);

impl NamespaceWire {
    /// Whether this namespace was made for a `compute`.
    fn is_compute(&self) -> bool {
        self.tags.iter().flatten().any(|t| t == COMPUTE_TAG)
    }
}

impl FunctionWire {
    /// What Scaleway's answer says that read reports alike for `function` and `compute`.
    fn domain(&self) -> Partial<String> {
        known(non_empty(self.domain_name.as_ref()))
    }
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

/// Refuses environment variables Scaleway refuses; either map may be unsaid.
fn check_env(
    plain: Option<&EnvVars>,
    secret: Option<&BTreeMap<String, Handle<Secrets>>>,
) -> Result<(), BackendError> {
    serverless::check_env(plain, secret, FunctionsApi::RESERVED_ENV)
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
    access: Access,
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
        put(
            "privacy",
            Some(json!(privacy(self.access))),
            now(|c| c.privacy.clone().map(Value::from)),
        );
        body
    }
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

// ---- One region's API ---------------------------------------------------------------

/// Serverless Functions, as one of the two serverless APIs.
enum FunctionsApi {}

impl Product for FunctionsApi {
    const API: &'static str = "/functions/v1beta1";
    const GET_NAMESPACE: &'static str = "functions:GetNamespace";
    const LIST_NAMESPACES: &'static str = "functions:ListNamespaces";
    const UPDATE_NAMESPACE: &'static str = "functions:UpdateNamespace";
    const RESOURCES: &'static str = "functions";
    const GET_RESOURCE: &'static str = "functions:GetFunction";
    const LIST_RESOURCES: &'static str = "functions:ListFunctions";
    const NO_RESOURCE: &'static [&'static str] = NO_FUNCTION;
    const RESERVED_ENV: &'static [&'static str] = &[];
    type Wire = FunctionWire;
}

/// The Serverless Functions API of one region.
type Region<'a> = Scope<'a, FunctionsApi>;

impl Region<'_> {
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
        // Repeated freely: a repeat deploys the archive just uploaded once more, and
        // the function ends running the same code (the cost is a second build).
        let call = Call::action(
            "functions:DeployFunction",
            self.path(&format!("functions/{id}/deploy")),
            Idempotence::Idempotent,
        );
        api.act(call.not_found(NO_FUNCTION), Some(&json!({}))).await
    }

    /// Deletes the namespace `id` (Scaleway deletes its functions with it) unless it is
    /// being deleted already, and awaits it gone.
    async fn delete_namespace(&self, id: &str) -> Result<(), BackendError> {
        let rest = format!("namespaces/{id}");
        let get = || self.namespace(id);
        self.delete_settled("functions:DeleteNamespace", &rest, NO_NAMESPACE, get)
            .await
    }

    /// Deletes the function `id` unless it is being deleted already, and awaits it gone.
    async fn delete_function(&self, id: &str) -> Result<(), BackendError> {
        let rest = format!("functions/{id}");
        let get = || self.resource(id);
        self.delete_settled("functions:DeleteFunction", &rest, NO_FUNCTION, get)
            .await
    }

    /// Deletes the resource at `rest`, which `get` reads, once settled and unless it is
    /// being deleted already, and awaits it gone.
    async fn delete_settled<T, F, Fut>(
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
        let current = self.settled(what, &get).await?;
        if current.status() != "deleting" {
            let call = Call::delete(what, self.path(rest)).not_found(not_found);
            self.clients.api().act(call, None::<&()>).await?;
        }
        self.gone(what, get).await
    }

    /// Polls `get` while the resource is in a transient status (`creating`, `pending`),
    /// answering it settled, whatever its status then.
    async fn settled<T, F, Fut>(&self, what: &str, get: F) -> Result<T, BackendError>
    where
        T: Resource,
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, BackendError>>,
    {
        let transient = |r: &T| Ok(!matches!(r.status(), "creating" | "pending"));
        let polled = self.poll_until(what, get, transient).await?;
        self.finished(what, polled)
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
        let f = self.settled(what, || self.resource(id)).await?;
        ready(what, "function", &f, &["ready", "created"])?;
        Ok(f)
    }
}

// ---- Statuses -----------------------------------------------------------------------

/// Refuses a settled `resource` whose status is not one of `good`: `error` carries
/// Scaleway's message, `locked` is `Denied`, `deleting` a `Conflict`.
fn ready(
    what: &str,
    kind: &str,
    resource: &impl Resource,
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
            privacy: None,
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

#[cfg(test)]
#[path = "../recorded/functions.rs"]
mod recorded;
