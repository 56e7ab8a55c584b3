//! The `containerNamespace` kind: a Serverless Containers namespace (see the
//! [module above](super) for what Scaleway answers and what read reports).

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use infra_core::kinds::{
    ContainerNamespace, ContainerNamespaceReported, ContainerNamespaceSettled, EnvVars,
};
use infra_core::prelude::Partial;
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, KindBackend, ListArgs, Listed, MarkArgs, OwnershipArgs,
    RawTags, ReadArgs, Reading, UpdateArgs, Written,
};
use serde_json::{Map, json};

use super::{Region, check_env, check_name};
use crate::clients::Clients;
use crate::serverless::{
    self, NO_NAMESPACE, NamespaceKind, NamespaceSpec, NamespaceWire, Resource,
};
use crate::tags;

/// `containerNamespace` on Scaleway: Serverless Containers namespaces.
pub(crate) struct ContainerNamespaces {
    clients: Arc<Clients>,
}

impl NamespaceKind for ContainerNamespace {
    fn declared(spec: &ContainerNamespaceSettled) -> NamespaceSpec<'_> {
        NamespaceSpec {
            description: spec.description.known(),
            environment: spec.environment.known(),
            secret_environment: spec.secret_environment.known(),
            tags: spec.tags.known(),
        }
    }

    fn reported(
        description: String,
        environment: Partial<EnvVars>,
        tags: BTreeSet<String>,
    ) -> ContainerNamespaceReported {
        ContainerNamespaceReported {
            description: Partial::Known(description),
            environment,
            secret_environment: Partial::Unknown,
            tags: Partial::Known(tags),
        }
    }
}

/// What read reports of `ns`.
pub(super) fn namespace_reading(ns: &NamespaceWire) -> Reading<ContainerNamespace> {
    serverless::namespace_reading(ns)
}

/// The `PATCH` body bringing `current` to `spec`, without the secret variables: only
/// what differs.
#[cfg(test)]
pub(super) fn namespace_changes(
    spec: &ContainerNamespaceSettled,
    current: &NamespaceWire,
) -> Map<String, serde_json::Value> {
    serverless::namespace_changes(&ContainerNamespace::declared(spec), current)
}

impl ContainerNamespaces {
    pub(super) fn new(clients: Arc<Clients>) -> Self {
        ContainerNamespaces { clients }
    }

    fn region<'a>(&'a self, region: &'a str) -> Region<'a> {
        Region::new(&self.clients, region)
    }

    /// The namespace of this project named `name` in `region`, with its raw tags.
    async fn find(
        &self,
        region: &str,
        name: &str,
    ) -> Result<Option<(RawTags, NamespaceWire)>, BackendError> {
        let found = self.region(region).namespace_named(name).await?;
        Ok(found.map(|ns| (ns.raw_tags(), ns)))
    }
}

#[async_trait]
impl KindBackend<ContainerNamespace> for ContainerNamespaces {
    /// `ListNamespaces` answers each namespace whole, tags included, as `GetNamespace`.
    fn lists_complete(&self) -> bool {
        true
    }

    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let all = self.region(region).namespaces(None).await?;
        Ok(all
            .into_iter()
            .filter(|ns| ns.project_id.is_empty() || ns.project_id == self.clients.project_id())
            .map(|ns| {
                let read = namespace_reading(&ns);
                Listed::new(ns.name, ns.id).with_reading(read)
            })
            .collect())
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<ContainerNamespace>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        Ok(namespace_reading(
            &self.region(region).namespace(handle).await?,
        ))
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
        let scope = self.region(region);
        let declared = ContainerNamespace::declared(spec);
        let body = scope.namespace_body(name, &declared, marker).await?;
        let created = scope.create_namespace(WHAT, name, body, marker).await?;
        let get = || scope.namespace(&created.id);
        let waited = scope.await_ready(WHAT, &created.id, get).await?;
        let find = self.find(region, name);
        let ready = scope.after_wait(waited, WHAT, marker, find).await?;
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
        let scope = self.region(region);
        let get = || scope.namespace(handle);
        let current = scope.when_settled(WHAT, handle, get).await?;
        let declared = ContainerNamespace::declared(spec);
        let body = scope.namespace_update(&declared, &current).await?;
        if body.is_empty() {
            return Ok(Written::Done(namespace_reading(&current)));
        }
        let patched = scope.patch_namespace(handle, &body).await;
        drop(body);
        patched?;
        let ns = scope.ready(WHAT, handle, get).await?;
        Ok(Written::Done(namespace_reading(&ns)))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        const WHAT: &str = "containers:DeleteNamespace";
        let DeleteArgs { region, handle, .. } = args;
        let scope = self.region(region);
        let rest = format!("namespaces/{handle}");
        let get = || scope.namespace(handle);
        scope.delete_and_await(WHAT, &rest, NO_NAMESPACE, get).await
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        Ok(self.region(region).namespace(handle).await?.raw_tags())
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let scope = self.region(region);
        let ns = scope.namespace(handle).await?;
        let what = format!("containers namespace {handle}");
        if let Some(all) = tags::marking(&ns.tags(), marker, &what)? {
            let body = Map::from_iter([("tags".to_owned(), json!(all))]);
            scope.patch_namespace(handle, &body).await?;
        }
        Ok(())
    }
}
