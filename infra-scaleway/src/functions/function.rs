//! The `function` kind: a Serverless Function in a namespace of the `functionNamespace`
//! kind.
//!
//! The handle is the function's id (a UUID). `CreateFunction` sends `name`,
//! `namespace_id`, `runtime` (Scaleway's own names: `python311`, `node22`, `go122`),
//! `handler`, `memory_limit`, `min_scale`, `max_scale`, `timeout` (a duration string,
//! `"60s"`), `environment_variables`, and `tags`: the kind declares none, so the function
//! carries the marker alone. A new function is `created`; when `code` is said, its
//! archive is uploaded and deployed (see the [module above](super)) and the function
//! awaited until `ready`; a create whose upload or deployment fails deletes the function
//! again. A create whose answer was lost is settled by looking the function up by name
//! in its namespace, and marker.
//!
//! `UpdateFunction` is a `PATCH` of what differs; Scaleway redeploys a function with
//! code to apply it, and that is awaited. When `code` is said, the `PATCH` says
//! `redeploy: false` and the archive is uploaded and deployed after it. Tags are never
//! part of an update (the kind declares none); `mark` writes them with the marker added
//! and `redeploy: false`. A function cannot move to another namespace: `UpdateFunction`
//! takes no `namespace_id`, and the kind makes a new namespace a replace. Deleting
//! answers `deleting` and is awaited until the function is gone.
//!
//! `sourceBucket` names an S3 bucket on AWS, which Scaleway Functions cannot fetch code
//! from: a declared bucket is refused as `Invalid` (say `None`, or leave it unsaid, and
//! give the archive in `code`).
//!
//! What read reports when Scaleway does not say:
//! - `namespace`: the function's `namespace_id`, the namespace kind's handle.
//! - `runtime`, `handler`, `memoryMb`, `minScale`, `maxScale`: as answered; `Unknown`
//!   when absent.
//! - `timeoutSeconds`: the `timeout` duration in whole seconds; `Unknown` when absent or
//!   fractional.
//! - `environment`: the function's own variables (not its namespace's); none is the
//!   truth, an empty map.
//! - `sourceBucket`, `code`: `Unknown`, always (Scaleway keeps no trace of where code
//!   came from).
//!
//! Observed: `id`, and `domain_name`, `Unknown` while empty. Raw tags are attached.

use std::sync::Arc;

use async_trait::async_trait;
use infra_core::kinds::{Function, FunctionReported, FunctionSettled, ServerlessObserved};
use infra_core::prelude::{Handle, Partial};
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, KindBackend, ListArgs, Listed, MarkArgs, OwnershipArgs,
    RawTags, ReadArgs, Reading, UpdateArgs, Written,
};
use serde_json::{Map, json};

use super::{
    Config, FunctionWire, Region, access_of, check_env, check_memory, check_runtime, check_scale,
    check_timeout, invalid, known, or_undo, read_archive, seconds_of,
};
use crate::clients::Clients;
use crate::serverless::Resource;
use crate::tags;

/// `function` on Scaleway: Serverless Functions.
pub(crate) struct Functions {
    clients: Arc<Clients>,
}

impl Functions {
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        Functions { clients }
    }

    fn region<'a>(&'a self, region: &'a str) -> Region<'a> {
        Region::new(&self.clients, region)
    }
}

/// What read reports of `f`.
pub(super) fn reading(f: &FunctionWire) -> Reading<Function> {
    let raw = f.tags();
    Reading::new(
        f.id.clone(),
        ServerlessObserved {
            id: f.id.clone(),
            domain_name: f.domain(),
        },
        FunctionReported {
            namespace: Partial::Known(Handle::new(f.namespace_id.clone())),
            runtime: known(f.runtime.clone()),
            handler: known(f.handler.clone()),
            memory_mb: known(f.memory_limit),
            min_scale: known(f.min_scale),
            max_scale: known(f.max_scale),
            timeout_seconds: known(f.timeout.as_deref().and_then(seconds_of)),
            source_bucket: Partial::Unknown,
            code: Partial::Unknown,
            environment: Partial::Known(f.environment_variables.clone().unwrap_or_default()),
            access: access_of(f.privacy.as_deref()),
        },
    )
    .with_raw_tags(tags::to_map(&raw))
}

/// Refuses a spec Scaleway would refuse; `current` fills in the scaling it leaves unsaid.
fn check(spec: &FunctionSettled, current: Option<&FunctionWire>) -> Result<(), BackendError> {
    if let Some(Some(bucket)) = spec.source_bucket.known() {
        return Err(invalid(format!(
            "`sourceBucket` names the S3 bucket {bucket}; Scaleway Functions cannot fetch code \
             from a bucket: give the zip archive in `code` (it is uploaded to the function), \
             and leave `sourceBucket` unsaid or `None`"
        )));
    }
    check_runtime(&spec.runtime)?;
    if let Some(&mb) = spec.memory_mb.known() {
        check_memory("memoryMb", mb)?;
    }
    if let Some(&seconds) = spec.timeout_seconds.known() {
        check_timeout(seconds)?;
    }
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
    check_env(spec.environment.known(), None)
}

/// The archive `code` names, when said, read before any call.
async fn archive_of(spec: &FunctionSettled) -> Result<Option<Vec<u8>>, BackendError> {
    match spec.code.known() {
        Some(code) => read_archive(code).await.map(Some),
        None => Ok(None),
    }
}

/// What `spec` says of the function's configuration.
fn config(spec: &FunctionSettled) -> Config<'_> {
    Config {
        runtime: &spec.runtime,
        handler: &spec.handler,
        memory_mb: spec.memory_mb.known().copied(),
        min_scale: spec.min_scale.known().copied(),
        max_scale: spec.max_scale.known().copied(),
        timeout_seconds: spec.timeout_seconds.known().copied(),
        environment: spec.environment.known(),
        access: spec.access,
    }
}

impl Functions {
    /// `CreateFunction`, its lost answer settled by name (in the namespace) and marker.
    async fn post(&self, args: &CreateArgs<'_, Function>) -> Result<FunctionWire, BackendError> {
        const WHAT: &str = "functions:CreateFunction";
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = *args;
        let namespace = spec.namespace.as_str();
        let mut body = config(spec).changes(None);
        body.insert("name".into(), json!(name));
        body.insert("namespace_id".into(), json!(namespace));
        body.insert("tags".into(), json!(tags::for_create(Vec::new(), marker)));
        self.region(region)
            .create_in(WHAT, namespace, name, body, marker)
            .await
    }

    /// The function `id`, once out of a transient status.
    async fn current(&self, region: &str, id: &str) -> Result<FunctionWire, BackendError> {
        let scope = self.region(region);
        scope
            .settled("functions:GetFunction", || scope.resource(id))
            .await
    }

    /// Deploys `archive` (when there is one) to the function `id` and awaits it.
    async fn finish(
        &self,
        what: &str,
        region: &str,
        id: &str,
        archive: Option<Vec<u8>>,
    ) -> Result<FunctionWire, BackendError> {
        let scope = self.region(region);
        if let Some(archive) = archive {
            scope.settled(what, || scope.resource(id)).await?;
            scope.deploy(id, archive).await?;
        }
        scope.ready_function(what, id).await
    }
}

#[async_trait]
impl KindBackend<Function> for Functions {
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
            .filter(|ns| !ns.is_compute())
        {
            for f in scope.in_namespace(&ns.id, None).await? {
                let read = reading(&f);
                listed.push(Listed::new(f.name, f.id).with_reading(read));
            }
        }
        Ok(listed)
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<Function>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        Ok(reading(&self.region(region).resource(handle).await?))
    }

    async fn create(
        &self,
        args: CreateArgs<'_, Function>,
    ) -> Result<Written<Reading<Function>>, BackendError> {
        const WHAT: &str = "functions:CreateFunction";
        check(args.spec, None)?;
        let archive = archive_of(args.spec).await?;
        // A namespace still being made (a run stopped before it was ready) refuses new
        // functions with `transient_state`: wait for it first.
        self.region(args.region)
            .ready_namespace(WHAT, args.spec.namespace.as_str())
            .await?;
        let made = self.post(&args).await?;
        let finished = self.finish(WHAT, args.region, &made.id, archive);
        let f = or_undo(
            WHAT,
            finished,
            self.region(args.region).delete_function(&made.id),
        )
        .await?;
        Ok(Written::Done(reading(&f)))
    }

    async fn update(
        &self,
        args: UpdateArgs<'_, Function>,
    ) -> Result<Written<Reading<Function>>, BackendError> {
        const WHAT: &str = "functions:UpdateFunction";
        let UpdateArgs {
            region,
            handle,
            spec,
            ..
        } = args;
        let current = self.current(region, handle).await?;
        check(spec, Some(&current))?;
        if spec.namespace.as_str() != current.namespace_id {
            return Err(invalid(format!(
                "{WHAT}: the function {} is in the namespace {}; a function cannot move to \
                 another namespace ({}): that is a replace",
                current.name, current.namespace_id, spec.namespace
            )));
        }
        let archive = archive_of(spec).await?;
        let mut body = config(spec).changes(Some(&current));
        if body.is_empty() && archive.is_none() {
            return Ok(Written::Done(reading(&current)));
        }
        if !body.is_empty() {
            if archive.is_some() {
                body.insert("redeploy".into(), json!(false));
            }
            self.region(region).patch_function(handle, &body).await?;
        }
        let f = self.finish(WHAT, region, handle, archive).await?;
        Ok(Written::Done(reading(&f)))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        self.region(region).delete_function(handle).await
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let f = self.region(region).resource(handle).await?;
        Ok(f.raw_tags())
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let current = self.current(region, handle).await?;
        let what = format!("the function {}", current.name);
        if let Some(all) = tags::marking(&current.tags(), marker, &what)? {
            let body = Map::from_iter([
                ("tags".to_owned(), json!(all)),
                ("redeploy".to_owned(), json!(false)),
            ]);
            self.region(region).patch_function(handle, &body).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use infra_core::kinds::EnvVars;

    use super::*;

    pub(super) fn spec() -> FunctionSettled {
        FunctionSettled {
            namespace: Handle::new("n1"),
            runtime: "python311".into(),
            handler: "handler.handle".into(),
            memory_mb: Partial::Known(256),
            min_scale: Partial::Known(0),
            max_scale: Partial::Known(2),
            timeout_seconds: Partial::Known(60),
            source_bucket: Partial::Known(None),
            code: Partial::Unknown,
            environment: Partial::Known(EnvVars::from([("MODE".into(), "test".into())])),
            access: infra_core::kinds::Access::Private,
        }
    }

    fn wire() -> FunctionWire {
        FunctionWire {
            id: "f1".into(),
            name: "api".into(),
            namespace_id: "n1".into(),
            status: "ready".into(),
            runtime: Some("python311".into()),
            handler: Some("handler.handle".into()),
            memory_limit: Some(256),
            min_scale: Some(0),
            max_scale: Some(2),
            timeout: Some("60s".into()),
            environment_variables: Some(EnvVars::from([("MODE".into(), "test".into())])),
            secret_environment_variables: None,
            domain_name: Some("ns1-api.functions.fnc.fr-par.scw.cloud".into()),
            error_message: None,
            tags: Some(vec!["managed-by-infra=shop".into()]),
            privacy: Some("private".into()),
        }
    }

    #[test]
    fn a_spec_reads_back_as_declared_and_an_update_sends_only_what_differs() {
        assert!(config(&spec()).changes(Some(&wire())).is_empty());
        let created = config(&spec()).changes(None);
        assert_eq!(created["timeout"], "60s");
        assert_eq!(created["memory_limit"], 256);
        let mut bigger = spec();
        bigger.memory_mb = Partial::Known(512);
        let body = config(&bigger).changes(Some(&wire()));
        assert_eq!(body.keys().collect::<Vec<_>>(), ["memory_limit"]);
        let read = reading(&wire());
        let reported = read.reported();
        assert_eq!(reported["namespace"], "n1");
        assert_eq!(reported["timeoutSeconds"], 60);
        assert!(!reported.contains_key("code") && !reported.contains_key("sourceBucket"));
        assert_eq!(
            read.observed().domain_name,
            Partial::Known("ns1-api.functions.fnc.fr-par.scw.cloud".into())
        );
    }

    #[test]
    fn a_bucket_an_unknown_runtime_or_a_memory_off_the_tiers_is_refused() {
        let mut bucket = spec();
        bucket.source_bucket = Partial::Known(Some(Handle::new("code-bucket")));
        assert!(
            check(&bucket, None)
                .unwrap_err()
                .message
                .contains("sourceBucket")
        );
        let mut runtime = spec();
        runtime.runtime = "python3.11".into();
        assert!(check(&runtime, None).is_err());
        let mut memory = spec();
        memory.memory_mb = Partial::Known(300);
        assert!(check(&memory, None).is_err());
        // The scaling the spec leaves unsaid is the function's own.
        let mut min = spec();
        min.min_scale = Partial::Known(5);
        min.max_scale = Partial::Unknown;
        assert!(check(&min, Some(&wire())).is_err());
        assert!(check(&spec(), None).is_ok());
    }
}
