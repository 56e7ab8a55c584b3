//! The `container` kind: a serverless container in a namespace of the
//! `containerNamespace` kind (see the [module above](super) for what Scaleway answers
//! and what read reports).

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use infra_core::kinds::{Container, ContainerReported, ContainerSettled, ServerlessObserved};
use infra_core::prelude::{Handle, Partial};
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, Idempotence, KindBackend, ListArgs, Listed, MarkArgs,
    Marker, OwnershipArgs, RawTags, ReadArgs, Reading, UpdateArgs, Written,
};
use serde_json::{Map, Value, json};

use super::{ContainerWire, NO_CONTAINER, Region, check_container, check_name};
use crate::api::Call;
use crate::clients::Clients;
use crate::serverless::{
    Resource, access_of, duration, invalid, known, non_empty, privacy, seconds_of,
};
use crate::tags;

/// `container` on Scaleway: serverless containers.
pub(crate) struct Containers {
    clients: Arc<Clients>,
}

/// What read reports of `c`.
pub(super) fn container_reading(c: &ContainerWire) -> Reading<Container> {
    let raw = c.raw_tags();
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
            access: access_of(c.privacy.as_deref()),
        },
    )
    .with_raw_tags(raw)
}

/// The fields of a `CreateContainer` or `UpdateContainer` body that bring `current`
/// (none for a create) to `spec`, without the secret variables: for an update, only
/// what differs.
pub(super) fn container_fields(
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
    // Always said: Scaleway makes a container a create says nothing of public.
    put(
        "privacy",
        Some(json!(privacy(spec.access))),
        current.and_then(|c| c.privacy.as_ref()).map(|p| json!(p)),
    );
    body
}

impl Containers {
    pub(super) fn new(clients: Arc<Clients>) -> Self {
        Containers { clients }
    }

    fn region<'a>(&'a self, region: &'a str) -> Region<'a> {
        Region::new(&self.clients, region)
    }
}

impl Region<'_> {
    /// Sends `body` to `PATCH` the container `id`.
    async fn patch_container(
        &self,
        id: &str,
        body: &Map<String, Value>,
    ) -> Result<ContainerWire, BackendError> {
        let call = Call::patch(
            "containers:UpdateContainer",
            self.path(&format!("containers/{id}")),
        );
        self.clients
            .api()
            .send(call.not_found(NO_CONTAINER), Some(body))
            .await
    }

    async fn deploy(&self, id: &str) -> Result<(), BackendError> {
        let path = self.path(&format!("containers/{id}/deploy"));
        // Repeated freely: a repeat deploys the container's image once more, and it ends
        // running the same image (the cost is a second rollout).
        let call = Call::action("containers:DeployContainer", path, Idempotence::Idempotent);
        self.clients
            .api()
            .act(call.not_found(NO_CONTAINER), Some(&json!({})))
            .await
    }

    /// Sends `CreateContainer` with the marker; a lost answer is settled by name.
    async fn send_create(
        &self,
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
            let vars = self.secret_vars(secrets, &BTreeSet::new()).await?;
            body.insert("secret_environment_variables".into(), Value::Array(vars));
        }
        self.create_in(WHAT, namespace, name, body, marker).await
    }
}

#[async_trait]
impl KindBackend<Container> for Containers {
    /// `ListContainers` answers each container whole, tags included, as `GetContainer`.
    fn lists_complete(&self) -> bool {
        true
    }

    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let scope = self.region(region);
        let mut listed = Vec::new();
        for ns in scope.namespaces(None).await? {
            for c in scope.in_namespace(&ns.id, None).await? {
                let read = container_reading(&c);
                listed.push(Listed::new(c.name, c.id).with_reading(read));
            }
        }
        Ok(listed)
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<Container>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        Ok(container_reading(
            &self.region(region).resource(handle).await?,
        ))
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
        let scope = self.region(region);
        // A namespace still being made (a run stopped before it was ready) refuses new
        // containers with `transient_state`: wait for it first.
        let ns = spec.namespace.as_str();
        scope.when_settled(WHAT, ns, || scope.namespace(ns)).await?;
        let created = scope.send_create(name, spec, marker).await?;
        if created.status == "created" {
            scope.deploy(&created.id).await?;
        }
        let get = || scope.resource(&created.id);
        let waited = scope.await_ready(WHAT, &created.id, get).await?;
        let find = scope.named_in(ns, name);
        let ready = scope.after_wait(waited, WHAT, marker, find).await?;
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
        let scope = self.region(region);
        let get = || scope.resource(handle);
        let current = scope.when_settled(WHAT, handle, get).await?;
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
            let vars = scope.secret_vars(secrets, &current.secret_keys()).await?;
            if !vars.is_empty() {
                body.insert("secret_environment_variables".into(), Value::Array(vars));
            }
        }
        let mut status = current.status.clone();
        if !body.is_empty() {
            body.insert("redeploy".into(), json!(true));
            let patched = scope.patch_container(handle, &body).await;
            drop(body);
            status = patched?.status;
        } else if status == "ready" {
            return Ok(Written::Done(container_reading(&current)));
        }
        if status == "created" {
            scope.deploy(handle).await?;
        }
        let c = scope.ready(WHAT, handle, get).await?;
        Ok(Written::Done(container_reading(&c)))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        const WHAT: &str = "containers:DeleteContainer";
        let DeleteArgs { region, handle, .. } = args;
        let scope = self.region(region);
        let rest = format!("containers/{handle}");
        let get = || scope.resource(handle);
        scope.delete_and_await(WHAT, &rest, NO_CONTAINER, get).await
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        Ok(self.region(region).resource(handle).await?.raw_tags())
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let scope = self.region(region);
        let c = scope.resource(handle).await?;
        let what = format!("container {handle}");
        if let Some(all) = tags::marking(&c.tags(), marker, &what)? {
            let body = Map::from_iter([
                ("tags".to_owned(), json!(all)),
                ("redeploy".to_owned(), json!(false)),
            ]);
            scope.patch_container(handle, &body).await?;
        }
        Ok(())
    }
}
