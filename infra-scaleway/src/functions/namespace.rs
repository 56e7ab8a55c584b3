//! The `functionNamespace` kind: a Serverless Functions namespace.
//!
//! The handle is the namespace's id (a UUID). `CreateNamespace` sends `name`,
//! `project_id`, `description`, `environment_variables`, `secret_environment_variables`
//! (the secrets' values) and `tags`, the marker `managed-by-infra=<fleet>` among them; a
//! new namespace is `pending` until Scaleway has made its registry, then `ready`, which
//! is awaited. A create whose answer was lost is settled by looking the namespace up by
//! name and marker. `UpdateNamespace` is a `PATCH` of what differs (secret variables:
//! see the [module above](super)), keeping the marker; the namespace is `pending` again
//! until `ready`. `mark` writes the tags with the marker added.
//!
//! Deleting a namespace deletes its functions with it on Scaleway. `delete` refuses a
//! namespace that still holds functions (`DependencyViolation`, nothing deleted), so
//! that no function is deleted as a side effect; an empty one is deleted and awaited
//! until gone. Namespaces made for a `compute` (tagged `infra-kind=compute`) are not
//! listed: they belong to that kind.
//!
//! What read reports when Scaleway does not say:
//! - `description`: Scaleway answers an empty description as `""` (or leaves it out):
//!   none is the truth `""`.
//! - `environment`: the namespace's variables; `Unknown` only when the answer has none
//!   at all (Scaleway always answers a map, empty when there are none).
//! - `secretEnvironment`: `Unknown`, always (Scaleway answers hashes of the values).
//! - `tags`: the tags, marker included; none is the truth, an empty set.
//!
//! Observed: `id`, and `registry_endpoint`, `Unknown` while Scaleway has made none.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use infra_core::kinds::{
    EnvVars, FunctionNamespace, FunctionNamespaceReported, FunctionNamespaceSettled,
};
use infra_core::prelude::Partial;
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, ErrorKind, KindBackend, ListArgs, Listed, MarkArgs,
    OwnershipArgs, RawTags, ReadArgs, Reading, UpdateArgs, Written,
};
use serde_json::{Map, json};

use super::{NamespaceWire, Region, check_env, check_tags};
use crate::clients::Clients;
use crate::serverless::{NamespaceKind, NamespaceSpec, Resource, namespace_reading};
use crate::tags;

/// `functionNamespace` on Scaleway: Serverless Functions namespaces.
pub(crate) struct FunctionNamespaces {
    clients: Arc<Clients>,
}

impl FunctionNamespaces {
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        FunctionNamespaces { clients }
    }

    fn region<'a>(&'a self, region: &'a str) -> Region<'a> {
        Region::new(&self.clients, region)
    }
}

impl NamespaceKind for FunctionNamespace {
    fn declared(spec: &FunctionNamespaceSettled) -> NamespaceSpec<'_> {
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
    ) -> FunctionNamespaceReported {
        FunctionNamespaceReported {
            description: Partial::Known(description),
            environment,
            secret_environment: Partial::Unknown,
            tags: Partial::Known(tags),
        }
    }
}

/// What read reports of `ns`.
pub(super) fn reading(ns: &NamespaceWire) -> Reading<FunctionNamespace> {
    namespace_reading(ns)
}

fn check(spec: &FunctionNamespaceSettled) -> Result<(), BackendError> {
    check_env(spec.environment.known(), spec.secret_environment.known())?;
    check_tags(spec.tags.known().into_iter().flatten())
}

/// The `PATCH` body bringing `current` to `spec`, secret variables aside: only what
/// differs.
#[cfg(test)]
fn changes(
    spec: &FunctionNamespaceSettled,
    current: &NamespaceWire,
) -> Map<String, serde_json::Value> {
    crate::serverless::namespace_changes(&FunctionNamespace::declared(spec), current)
}

impl FunctionNamespaces {
    /// `CreateNamespace`, its lost answer settled by name and marker.
    async fn post(
        &self,
        args: &CreateArgs<'_, FunctionNamespace>,
    ) -> Result<NamespaceWire, BackendError> {
        const WHAT: &str = "functions:CreateNamespace";
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = *args;
        let scope = self.region(region);
        let declared = FunctionNamespace::declared(spec);
        let body = scope.namespace_body(name, &declared, marker).await?;
        scope.create_namespace(WHAT, name, body, marker).await
    }

    /// The namespace `id`, once out of a transient status.
    async fn current(&self, region: &str, id: &str) -> Result<NamespaceWire, BackendError> {
        let scope = self.region(region);
        scope
            .settled("functions:GetNamespace", || scope.namespace(id))
            .await
    }
}

#[async_trait]
impl KindBackend<FunctionNamespace> for FunctionNamespaces {
    /// `ListNamespaces` answers each namespace whole, tags included, as `GetNamespace`.
    fn lists_complete(&self) -> bool {
        true
    }

    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let all = self.region(region).namespaces(None).await?;
        Ok(all
            .into_iter()
            .filter(|ns| !ns.is_compute())
            .map(|ns| {
                let read = reading(&ns);
                Listed::new(ns.name, ns.id).with_reading(read)
            })
            .collect())
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<FunctionNamespace>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        Ok(reading(&self.region(region).namespace(handle).await?))
    }

    async fn create(
        &self,
        args: CreateArgs<'_, FunctionNamespace>,
    ) -> Result<Written<Reading<FunctionNamespace>>, BackendError> {
        check(args.spec)?;
        let made = self.post(&args).await?;
        let ns = self
            .region(args.region)
            .ready_namespace("functions:CreateNamespace", &made.id)
            .await?;
        Ok(Written::Done(reading(&ns)))
    }

    async fn update(
        &self,
        args: UpdateArgs<'_, FunctionNamespace>,
    ) -> Result<Written<Reading<FunctionNamespace>>, BackendError> {
        const WHAT: &str = "functions:UpdateNamespace";
        let UpdateArgs {
            region,
            handle,
            spec,
            ..
        } = args;
        check(spec)?;
        let scope = self.region(region);
        let current = self.current(region, handle).await?;
        let body = scope
            .namespace_update(&FunctionNamespace::declared(spec), &current)
            .await?;
        if body.is_empty() {
            return Ok(Written::Done(reading(&current)));
        }
        scope.patch_namespace(handle, &body).await?;
        let ns = scope.ready_namespace(WHAT, handle).await?;
        Ok(Written::Done(reading(&ns)))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        const WHAT: &str = "functions:DeleteNamespace";
        let DeleteArgs { region, handle, .. } = args;
        let scope = self.region(region);
        let current = self.current(region, handle).await?;
        let held = scope.in_namespace(handle, None).await?;
        if !held.is_empty() {
            let names: Vec<&str> = held.iter().map(|f| f.name.as_str()).collect();
            return Err(BackendError::new(
                ErrorKind::DependencyViolation,
                format!(
                    "{WHAT}: the namespace {} still holds functions ({}); Scaleway would delete \
                     them with it, so it is left as it is",
                    current.name,
                    names.join(", ")
                ),
            ));
        }
        scope.delete_namespace(handle).await
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let ns = self.region(region).namespace(handle).await?;
        Ok(ns.raw_tags())
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let scope = self.region(region);
        let current = self.current(region, handle).await?;
        let what = format!("the function namespace {}", current.name);
        if let Some(all) = tags::marking(&current.tags(), marker, &what)? {
            let body = Map::from_iter([("tags".to_owned(), json!(all))]);
            scope.patch_namespace(handle, &body).await?;
            scope
                .ready_namespace("functions:UpdateNamespace", handle)
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn wire() -> NamespaceWire {
        NamespaceWire {
            id: "n1".into(),
            name: "ns".into(),
            project_id: String::new(),
            status: "ready".into(),
            description: None,
            environment_variables: Some(EnvVars::from([("MODE".into(), "test".into())])),
            secret_environment_variables: None,
            registry_endpoint: Some(String::new()),
            error_message: None,
            tags: Some(vec!["managed-by-infra=shop".into(), "team=web".into()]),
        }
    }

    fn spec() -> FunctionNamespaceSettled {
        FunctionNamespaceSettled {
            description: Partial::Known(String::new()),
            environment: Partial::Known(EnvVars::from([("MODE".into(), "test".into())])),
            secret_environment: Partial::Unknown,
            tags: Partial::Known(BTreeSet::from(["team=web".to_owned()])),
        }
    }

    #[test]
    fn a_read_says_what_scaleway_says_and_no_more() {
        let read = reading(&wire());
        let reported = read.reported();
        assert_eq!(reported["description"], "");
        assert_eq!(reported["environment"]["MODE"], "test");
        assert!(!reported.contains_key("secretEnvironment"));
        assert_eq!(reported["tags"].as_array().unwrap().len(), 2);
        assert_eq!(read.observed().registry_endpoint, Partial::Unknown);
    }

    #[test]
    fn an_update_sends_only_what_differs_and_keeps_the_marker() {
        assert!(changes(&spec(), &wire()).is_empty());
        let mut changed = spec();
        changed.environment = Partial::Known(EnvVars::from([("MODE".into(), "prod".into())]));
        changed.tags = Partial::Known(BTreeSet::from(["team=api".to_owned()]));
        let body = changes(&changed, &wire());
        assert_eq!(body["environment_variables"]["MODE"], "prod");
        assert_eq!(body["tags"], json!(["managed-by-infra=shop", "team=api"]));
        assert!(!body.contains_key("description"));
        let quiet = FunctionNamespaceSettled {
            description: Partial::Unknown,
            environment: Partial::Unknown,
            secret_environment: Partial::Known(BTreeMap::new()),
            tags: Partial::Unknown,
        };
        assert!(changes(&quiet, &wire()).is_empty());
    }
}
