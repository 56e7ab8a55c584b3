//! The portable `compute` kind, as a Serverless Function in a namespace of its own.
//!
//! Each compute is two resources on Scaleway, made and deleted together: a namespace
//! named as the compute, and in it a function of the same name. Both carry the marker,
//! and both carry the tag `infra-kind=compute`, which keeps them out of the
//! `functionNamespace` and `function` listings. The namespace's name is the compute's
//! own, so a `functionNamespace` declared with the same name in the same region
//! collides with it: the second create is a `Conflict` (Scaleway's names are unique per
//! project and region).
//!
//! The handle is `{namespace id}/{function id}`. `create` makes the namespace (awaited
//! until `ready`), then the function with the declaration, then uploads and deploys
//! `code` (see the [module above](super)) and awaits the function `ready`. A namespace
//! of this fleet, tagged for a compute and holding no function, is left by an
//! interrupted create: the next create of that name takes it up rather than fail. Any
//! failure after the namespace exists deletes it again (with whatever it holds). Lost
//! answers are settled by name and marker. `delete` deletes the namespace, which
//! deletes the function with it, and awaits it gone.
//!
//! The declaration on the wire:
//! - `runtime` is written the portable way and mapped to Scaleway's runtime ids:
//!   `python3.12` is `python312`, `nodejs22.x` is `node22`, `go1.22` is `go122`,
//!   `rust1.85` is `rust185`, `php8.3` is `php83`. A runtime with no Scaleway
//!   counterpart, or written Scaleway's way, is refused as `Invalid`.
//! - `handler` is the function's `handler` as it is (`app.handler`).
//! - `code` is a zip archive on the machine that applies; `codeSha256` is never sent nor
//!   compared (Scaleway reports no digest of deployed code), so every update uploads and
//!   deploys the archive again.
//! - `memoryMb` is `memory_limit` (128 to 4096 MB, Scaleway's tiers only: the kind allows
//!   more than Scaleway has); `timeoutSeconds` is `timeout` (1 to 900 s).
//! - `environment` and `secretEnvironment` are the function's variables; secret ones are
//!   sent as the secrets' values.
//! - `role`: Scaleway runs a function as no identity; there is nothing to carry a role
//!   to, so a declared role is refused as `Invalid` rather than silently ignored (give
//!   the function an API key of the IAM application through `secretEnvironment`).
//! - `tags` are the function's tags as `key=value` strings, with the marker and
//!   `infra-kind=compute`; a declared `infra-kind` is refused. The namespace carries the
//!   marker and `infra-kind=compute` only.
//!
//! What read reports when Scaleway does not say:
//! - `runtime`: the portable name of the function's runtime; a runtime with none (an old
//!   `golang`) as Scaleway names it; `Unknown` when absent.
//! - `handler`, `memoryMb`: as answered; `Unknown` when absent.
//! - `timeoutSeconds`: whole seconds of `timeout`; `Unknown` when absent or fractional.
//! - `environment`: the function's variables; none is the truth, an empty map.
//! - `code`, `codeSha256`, `secretEnvironment`, `role`: `Unknown`, always.
//! - `tags`: the function's tags, marker included, without `infra-kind`.
//!
//! Observed: `id` is the function's id, `url` is `https://` and its `domain_name`
//! (`Unknown` while empty), `version` is `Unknown` (Scaleway does not version
//! functions).

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use infra_core::kinds::{Compute, ComputeObserved, ComputeReported, ComputeSettled};
use infra_core::prelude::Partial;
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, ErrorKind, KindBackend, ListArgs, Listed, MarkArgs,
    Marker, Ownership, OwnershipArgs, RawTags, ReadArgs, Reading, UpdateArgs, Written,
};
use serde_json::{Map, Value, json};

use super::{
    COMPUTE_TAG, COMPUTE_TAG_KEY, Config, FunctionWire, NamespaceWire, RUNTIMES, Region, access_of,
    check_env, check_memory, check_tags, check_timeout, invalid, known, or_undo, read_archive,
    seconds_of, tag_update,
};
use crate::clients::Clients;
use crate::serverless::Resource;
use crate::tags;

/// `compute` on Scaleway: a Serverless Function in a namespace of its own.
pub(crate) struct Computes {
    clients: Arc<Clients>,
}

impl Computes {
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        Computes { clients }
    }

    fn region<'a>(&'a self, region: &'a str) -> Region<'a> {
        Region::new(&self.clients, region)
    }
}

// ---- Runtimes -------------------------------------------------------------------------

/// Scaleway's runtime id for a portable runtime name, if Scaleway has it.
fn native_runtime(portable: &str) -> Option<String> {
    let (language, version) = match portable.strip_prefix("nodejs") {
        Some(version) => ("node", version.strip_suffix(".x")?),
        None => {
            let at = portable.find(|c: char| c.is_ascii_digit())?;
            let (language, version) = portable.split_at(at);
            let (major, minor) = version.split_once('.')?;
            if major.is_empty() || minor.is_empty() {
                return None;
            }
            (language, version)
        }
    };
    if version.is_empty() || !version.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let native = format!("{language}{}", version.replace('.', ""));
    let portable_again = portable_runtime(&native)?;
    (portable_again == portable && RUNTIMES.contains(&native.as_str())).then_some(native)
}

/// The portable name of Scaleway's runtime id `native`, if it has one.
fn portable_runtime(native: &str) -> Option<String> {
    let at = native.find(|c: char| c.is_ascii_digit())?;
    let (language, digits) = native.split_at(at);
    if digits.len() < 2 && language != "node" {
        return None;
    }
    let (major, minor) = digits.split_at(1);
    Some(match language {
        "node" => format!("nodejs{digits}.x"),
        "python" | "go" | "rust" | "php" => format!("{language}{major}.{minor}"),
        _ => return None,
    })
}

fn check_runtime(runtime: &str) -> Result<String, BackendError> {
    native_runtime(runtime).ok_or_else(|| {
        let known: Vec<String> = RUNTIMES
            .iter()
            .filter_map(|r| portable_runtime(r))
            .collect();
        invalid(format!(
            "`runtime` is {runtime:?}, which Scaleway Functions does not run; a `compute` \
             names its runtime the portable way, one of {}",
            known.join(", ")
        ))
    })
}

// ---- Reads and writes -----------------------------------------------------------------

/// The handle of the function `function` in the namespace `namespace`.
pub(super) fn handle_of(namespace: &str, function: &str) -> String {
    format!("{namespace}/{function}")
}

/// The namespace and function ids a handle names.
fn parts(handle: &str) -> Result<(&str, &str), BackendError> {
    match handle.split_once('/') {
        Some((ns, f)) if !ns.is_empty() && !f.is_empty() && !f.contains('/') => Ok((ns, f)),
        _ => Err(invalid(format!(
            "{handle:?} is not the handle of a compute on Scaleway \
             (`{{namespace id}}/{{function id}}`)"
        ))),
    }
}

/// `f`, when it is in the namespace `namespace`: a function elsewhere is not the
/// compute a handle names (`NotFound`).
fn in_namespace(f: FunctionWire, namespace: &str) -> Result<FunctionWire, BackendError> {
    if f.namespace_id == namespace {
        return Ok(f);
    }
    Err(BackendError::new(
        ErrorKind::NotFound,
        format!(
            "functions:GetFunction: the function {} is not in the namespace {namespace}",
            f.id
        ),
    )
    .with_code("not_found"))
}

/// What read reports of `f`, known by `handle`.
pub(super) fn reading(handle: &str, f: &FunctionWire) -> Reading<Compute> {
    let raw = f.tags();
    let mut declared = tags::to_map(&raw);
    declared.remove(COMPUTE_TAG_KEY);
    Reading::new(
        handle,
        ComputeObserved {
            id: f.id.clone(),
            url: f.domain().map(|d| format!("https://{d}")),
            version: Partial::Unknown,
        },
        ComputeReported {
            runtime: known(f.runtime.clone().map(|r| portable_runtime(&r).unwrap_or(r))),
            handler: known(f.handler.clone()),
            code: Partial::Unknown,
            code_sha256: Partial::Unknown,
            memory_mb: known(f.memory_limit),
            timeout_seconds: known(f.timeout.as_deref().and_then(seconds_of)),
            environment: Partial::Known(f.environment_variables.clone().unwrap_or_default()),
            secret_environment: Partial::Unknown,
            role: Partial::Unknown,
            tags: Partial::Known(declared),
            access: access_of(f.privacy.as_deref()),
        },
    )
    .with_raw_tags(tags::to_map(&raw))
}

/// Refuses what Scaleway would refuse, before any call; answers the runtime id.
fn check(spec: &ComputeSettled) -> Result<String, BackendError> {
    if let Some(role) = &spec.role {
        return Err(invalid(format!(
            "`role` is {role}; Scaleway runs a function as no identity, so a role cannot be \
             given to it: leave `role` unsaid, and give the function an API key of the IAM \
             application through `secretEnvironment` if it must call Scaleway"
        )));
    }
    let runtime = check_runtime(&spec.runtime)?;
    if let Some(&mb) = spec.memory_mb.known() {
        check_memory("memoryMb", mb)?;
    }
    if let Some(&seconds) = spec.timeout_seconds.known() {
        check_timeout(seconds)?;
    }
    check_env(spec.environment.known(), spec.secret_environment.known())?;
    check_tags(spec.tags.known().into_iter().flat_map(|t| t.keys()))?;
    Ok(runtime)
}

/// The declared tags as Scaleway's strings, with `infra-kind=compute`.
fn declared_tags(spec: &ComputeSettled) -> Option<Vec<String>> {
    spec.tags.known().map(|t| {
        let mut all = tags::from_map(t);
        all.push(COMPUTE_TAG.to_owned());
        all
    })
}

/// What `spec` says of the function's configuration, its runtime being `runtime`.
fn config<'a>(spec: &'a ComputeSettled, runtime: &'a str) -> Config<'a> {
    Config {
        runtime,
        handler: &spec.handler,
        memory_mb: spec.memory_mb.known().copied(),
        min_scale: None,
        max_scale: None,
        timeout_seconds: spec.timeout_seconds.known().copied(),
        environment: spec.environment.known(),
        access: spec.access,
    }
}

/// Whether `tags` carry this fleet's marker.
fn ours(marker: &Marker, tags: &[String]) -> bool {
    matches!(marker.verdict(&tags::to_map(tags)), Ownership::Ours)
}

impl Computes {
    /// The namespace the compute `name` goes in: this fleet's, left empty by an
    /// interrupted create, or a new one (its lost answer settled by name and marker).
    async fn namespace_for(
        &self,
        args: &CreateArgs<'_, Compute>,
    ) -> Result<NamespaceWire, BackendError> {
        const WHAT: &str = "functions:CreateNamespace";
        let CreateArgs {
            region,
            name,
            marker,
            ..
        } = *args;
        let scope = self.region(region);
        if let Some(ns) = scope.namespace_named(name).await? {
            let empty = scope.in_namespace(&ns.id, None).await?.is_empty();
            if ns.is_compute() && ours(marker, &ns.tags()) && empty {
                return Ok(ns);
            }
            return Err(BackendError::new(
                ErrorKind::Conflict,
                format!(
                    "{WHAT}: a function namespace named {name} exists in {region} already \
                     (a compute's namespace bears the compute's name)"
                ),
            )
            .with_code("already_exists"));
        }
        let body = Map::from_iter([
            ("name".to_owned(), json!(name)),
            ("project_id".to_owned(), json!(self.clients.project_id())),
            (
                "description".to_owned(),
                json!(format!("the namespace of the compute {name}")),
            ),
            (
                "tags".to_owned(),
                json!(tags::for_create(vec![COMPUTE_TAG.to_owned()], marker)),
            ),
        ]);
        scope.create_namespace(WHAT, name, body, marker).await
    }

    /// `CreateFunction` in the namespace `namespace`, its lost answer settled by name
    /// and marker.
    async fn post_function(
        &self,
        args: &CreateArgs<'_, Compute>,
        runtime: &str,
        namespace: &str,
    ) -> Result<FunctionWire, BackendError> {
        const WHAT: &str = "functions:CreateFunction";
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = *args;
        let scope = self.region(region);
        scope.ready_namespace(WHAT, namespace).await?;
        let mut body = config(spec, runtime).changes(None);
        body.insert("name".into(), json!(name));
        body.insert("namespace_id".into(), json!(namespace));
        let declared = declared_tags(spec).unwrap_or_else(|| vec![COMPUTE_TAG.to_owned()]);
        body.insert("tags".into(), json!(tags::for_create(declared, marker)));
        if let Some(secrets) = spec.secret_environment.known() {
            let vars = scope.secret_vars(secrets, &BTreeSet::new()).await?;
            body.insert("secret_environment_variables".into(), Value::Array(vars));
        }
        scope.create_in(WHAT, namespace, name, body, marker).await
    }

    /// Uploads and deploys `archive` to the function `id`, and awaits it `ready`.
    async fn deploy(
        &self,
        what: &str,
        region: &str,
        id: &str,
        archive: Vec<u8>,
    ) -> Result<FunctionWire, BackendError> {
        let scope = self.region(region);
        scope.settled(what, || scope.resource(id)).await?;
        scope.deploy(id, archive).await?;
        scope.ready_function(what, id).await
    }

    /// The function a handle names, once out of a transient status; one that is not in
    /// the handle's namespace is `NotFound`.
    async fn current(&self, region: &str, handle: &str) -> Result<FunctionWire, BackendError> {
        let (namespace, id) = parts(handle)?;
        let scope = self.region(region);
        let f = scope
            .settled("functions:GetFunction", || scope.resource(id))
            .await?;
        in_namespace(f, namespace)
    }

    /// The `PATCH` body bringing `current` to `spec`: configuration, tags and secret
    /// variables; `redeploy: false` since the code is deployed after it.
    async fn changes(
        &self,
        region: &str,
        spec: &ComputeSettled,
        runtime: &str,
        current: &FunctionWire,
    ) -> Result<Map<String, Value>, BackendError> {
        let mut body = config(spec, runtime).changes(Some(current));
        if let Some(wanted) = declared_tags(spec).and_then(|d| tag_update(d, &current.tags())) {
            body.insert("tags".into(), json!(wanted));
        }
        if let Some(secrets) = spec.secret_environment.known() {
            let vars = self
                .region(region)
                .secret_vars(secrets, &current.secret_keys())
                .await?;
            if !vars.is_empty() {
                body.insert("secret_environment_variables".into(), Value::Array(vars));
            }
        }
        if !body.is_empty() {
            body.insert("redeploy".into(), json!(false));
        }
        Ok(body)
    }
}

#[async_trait]
impl KindBackend<Compute> for Computes {
    /// `ListFunctions` answers each function whole, tags included, as `GetFunction`.
    fn lists_complete(&self) -> bool {
        true
    }

    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let scope = self.region(region);
        let mut listed = Vec::new();
        for ns in scope
            .namespaces(None)
            .await?
            .iter()
            .filter(|ns| ns.is_compute())
        {
            for f in scope.in_namespace(&ns.id, None).await? {
                let handle = handle_of(&ns.id, &f.id);
                let read = reading(&handle, &f);
                listed.push(Listed::new(f.name, handle).with_reading(read));
            }
        }
        Ok(listed)
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<Compute>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let (namespace, id) = parts(handle)?;
        let f = in_namespace(self.region(region).resource(id).await?, namespace)?;
        Ok(reading(handle, &f))
    }

    async fn create(
        &self,
        args: CreateArgs<'_, Compute>,
    ) -> Result<Written<Reading<Compute>>, BackendError> {
        const WHAT: &str = "functions:CreateFunction";
        let runtime = check(args.spec)?;
        let archive = read_archive(&args.spec.code).await?;
        let ns = self.namespace_for(&args).await?;
        let work = async {
            let made = self.post_function(&args, &runtime, &ns.id).await?;
            self.deploy(WHAT, args.region, &made.id, archive).await
        };
        let f = or_undo(
            WHAT,
            work,
            self.region(args.region).delete_namespace(&ns.id),
        )
        .await?;
        Ok(Written::Done(reading(&handle_of(&ns.id, &f.id), &f)))
    }

    async fn update(
        &self,
        args: UpdateArgs<'_, Compute>,
    ) -> Result<Written<Reading<Compute>>, BackendError> {
        const WHAT: &str = "functions:UpdateFunction";
        let UpdateArgs {
            region,
            handle,
            spec,
            ..
        } = args;
        let runtime = check(spec)?;
        let archive = read_archive(&spec.code).await?;
        let current = self.current(region, handle).await?;
        let body = self.changes(region, spec, &runtime, &current).await?;
        let scope = self.region(region);
        if !body.is_empty() {
            scope.patch_function(&current.id, &body).await?;
        }
        let f = self.deploy(WHAT, region, &current.id, archive).await?;
        Ok(Written::Done(reading(handle, &f)))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        let (namespace, id) = parts(handle)?;
        let ns = self.region(region).namespace(namespace).await?;
        if !ns.is_compute() {
            return Err(invalid(format!(
                "the namespace {} of the function {id} was not made for a compute: it is left as \
                 it is",
                ns.name
            )));
        }
        self.region(region).delete_namespace(namespace).await
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let (namespace, id) = parts(handle)?;
        let f = in_namespace(self.region(region).resource(id).await?, namespace)?;
        Ok(f.raw_tags())
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let scope = self.region(region);
        let f = self.current(region, handle).await?;
        let ns = scope
            .settled("functions:GetNamespace", || {
                scope.namespace(&f.namespace_id)
            })
            .await?;
        let for_function = tags::marking(&f.tags(), marker, &format!("the function {}", f.name))?;
        let for_namespace =
            tags::marking(&ns.tags(), marker, &format!("the namespace {}", ns.name))?;
        if let Some(all) = for_function {
            let body = Map::from_iter([
                ("tags".to_owned(), json!(all)),
                ("redeploy".to_owned(), json!(false)),
            ]);
            scope.patch_function(&f.id, &body).await?;
        }
        if let Some(all) = for_namespace {
            let body = Map::from_iter([("tags".to_owned(), json!(all))]);
            scope.patch_namespace(&ns.id, &body).await?;
            scope
                .ready_namespace("functions:UpdateNamespace", &ns.id)
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use infra_core::kinds::EnvVars;
    use infra_core::prelude::Handle;

    use super::*;

    fn spec() -> ComputeSettled {
        ComputeSettled {
            runtime: "python3.12".into(),
            handler: "app.handler".into(),
            code: "dist/app.zip".into(),
            code_sha256: Partial::Unknown,
            memory_mb: Partial::Known(256),
            timeout_seconds: Partial::Known(30),
            environment: Partial::Known(EnvVars::from([("MODE".into(), "test".into())])),
            secret_environment: Partial::Unknown,
            role: None,
            tags: Partial::Known(BTreeMap::from([("team".into(), "web".into())])),
            access: infra_core::kinds::Access::Private,
        }
    }

    fn wire() -> FunctionWire {
        FunctionWire {
            id: "f1".into(),
            name: "api".into(),
            namespace_id: "n1".into(),
            status: "ready".into(),
            runtime: Some("python312".into()),
            handler: Some("app.handler".into()),
            memory_limit: Some(256),
            min_scale: Some(0),
            max_scale: Some(20),
            timeout: Some("30s".into()),
            environment_variables: Some(EnvVars::from([("MODE".into(), "test".into())])),
            secret_environment_variables: None,
            domain_name: Some("api-api.functions.fnc.fr-par.scw.cloud".into()),
            error_message: None,
            tags: Some(vec![
                COMPUTE_TAG.to_owned(),
                "managed-by-infra=shop".into(),
                "team=web".into(),
            ]),
            privacy: Some("private".into()),
        }
    }

    #[test]
    fn runtimes_map_both_ways_for_every_scaleway_runtime_with_a_portable_name() {
        for (portable, native) in [
            ("python3.12", "python312"),
            ("python3.7", "python37"),
            ("python3.10", "python310"),
            ("nodejs22.x", "node22"),
            ("nodejs8.x", "node8"),
            ("go1.24", "go124"),
            ("rust1.85", "rust185"),
            ("php8.3", "php83"),
        ] {
            assert_eq!(
                native_runtime(portable).as_deref(),
                Some(native),
                "{portable}"
            );
            assert_eq!(
                portable_runtime(native).as_deref(),
                Some(portable),
                "{native}"
            );
        }
        for native in RUNTIMES {
            if let Some(portable) = portable_runtime(native) {
                assert_eq!(native_runtime(&portable).as_deref(), Some(*native));
            }
        }
        for refused in [
            "python312",
            "python3.99",
            "nodejs22",
            "java21",
            "go1.x",
            "",
            "python3.1.2",
        ] {
            assert!(check_runtime(refused).is_err(), "{refused}");
        }
        assert_eq!(portable_runtime("golang"), None);
    }

    #[test]
    fn a_handle_names_the_namespace_and_the_function() {
        assert_eq!(parts("n1/f1").unwrap(), ("n1", "f1"));
        for bad in ["f1", "n1/", "/f1", "n1/f1/x"] {
            assert_eq!(parts(bad).unwrap_err().kind, ErrorKind::Invalid, "{bad}");
        }
        assert_eq!(handle_of("n1", "f1"), "n1/f1");
    }

    #[test]
    fn a_read_reports_the_portable_runtime_and_the_declared_tags() {
        let read = reading("n1/f1", &wire());
        let reported = read.reported();
        assert_eq!(reported["runtime"], "python3.12");
        assert_eq!(reported["timeoutSeconds"], 30);
        assert_eq!(
            reported["tags"],
            json!({ "managed-by-infra": "shop", "team": "web" })
        );
        for never in ["code", "codeSha256", "secretEnvironment", "role"] {
            assert!(!reported.contains_key(never), "{never}");
        }
        assert_eq!(
            read.observed().url,
            Partial::Known("https://api-api.functions.fnc.fr-par.scw.cloud".into())
        );
        assert_eq!(
            config(&spec(), "python312").changes(Some(&wire())),
            Map::new()
        );
    }

    #[test]
    fn a_role_or_an_own_tag_is_refused() {
        let mut role = spec();
        role.role = Some(Handle::new("runner"));
        assert!(check(&role).unwrap_err().message.contains("no identity"));
        let mut tagged = spec();
        tagged.tags = Partial::Known(BTreeMap::from([("infra-kind".into(), "x".into())]));
        assert!(check(&tagged).is_err());
        let mut memory = spec();
        memory.memory_mb = Partial::Known(10240);
        assert!(check(&memory).is_err());
        assert_eq!(check(&spec()).unwrap(), "python312");
    }
}
