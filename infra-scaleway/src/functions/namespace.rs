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
    FunctionNamespace, FunctionNamespaceReported, FunctionNamespaceSettled, NamespaceObserved,
};
use infra_core::prelude::Partial;
use infra_core::sdk::poll;
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, ErrorKind, KindBackend, ListArgs, Listed, MarkArgs,
    OwnershipArgs, RawTags, ReadArgs, Reading, UpdateArgs, Written,
};
use serde_json::{Map, Value, json};

use super::{NamespaceWire, Region, check_env, check_tags, known, non_empty, tag_update};
use crate::api::Call;
use crate::clients::Clients;
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

/// What read reports of `ns`.
fn reading(ns: &NamespaceWire) -> Reading<FunctionNamespace> {
    let raw = ns.tags();
    Reading::new(
        ns.id.clone(),
        NamespaceObserved {
            id: ns.id.clone(),
            registry_endpoint: known(non_empty(ns.registry_endpoint.as_ref())),
        },
        FunctionNamespaceReported {
            description: Partial::Known(ns.description.clone().unwrap_or_default()),
            environment: known(ns.environment_variables.clone()),
            secret_environment: Partial::Unknown,
            tags: Partial::Known(raw.iter().cloned().collect()),
        },
    )
    .with_raw_tags(tags::to_map(&raw))
}

fn check(spec: &FunctionNamespaceSettled) -> Result<(), BackendError> {
    check_env(spec.environment.known(), spec.secret_environment.known())?;
    check_tags(spec.tags.known().into_iter().flatten())
}

/// The `PATCH` body bringing `current` to `spec`, secret variables aside: only what
/// differs.
fn changes(spec: &FunctionNamespaceSettled, current: &NamespaceWire) -> Map<String, Value> {
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
    let declared = spec.tags.known().map(tags::from_set);
    if let Some(wanted) = declared.and_then(|d| tag_update(d, &current.tags())) {
        body.insert("tags".into(), json!(wanted));
    }
    body
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
        let mut body = Map::new();
        body.insert("name".into(), json!(name));
        body.insert("project_id".into(), json!(self.clients.project_id()));
        let declared = spec.tags.known().map(tags::from_set).unwrap_or_default();
        body.insert("tags".into(), json!(tags::for_create(declared, marker)));
        if let Some(description) = spec.description.known() {
            body.insert("description".into(), json!(description));
        }
        if let Some(env) = spec.environment.known() {
            body.insert("environment_variables".into(), json!(env));
        }
        if let Some(secrets) = spec.secret_environment.known() {
            let vars = scope.secret_vars(secrets, &BTreeSet::new()).await?;
            body.insert("secret_environment_variables".into(), Value::Array(vars));
        }
        let call = Call::post(WHAT, scope.path("namespaces"));
        match self
            .clients
            .api()
            .send::<NamespaceWire>(call, Some(&body))
            .await
        {
            Ok(ns) => Ok(ns),
            Err(err) => {
                let find = async {
                    let found = scope.namespace_named(name).await?;
                    Ok(found.map(|ns| (tags::to_map(&ns.tags()), ns)))
                };
                poll::settle_uncertain(err, marker, WHAT, find).await
            }
        }
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
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let all = self.region(region).namespaces(None).await?;
        Ok(all
            .into_iter()
            .filter(|ns| !ns.is_compute())
            .map(|ns| Listed {
                name: ns.name,
                handle: ns.id,
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
        let mut body = changes(spec, &current);
        if let Some(secrets) = spec.secret_environment.known() {
            let vars = scope.secret_vars(secrets, &current.secret_keys()).await?;
            if !vars.is_empty() {
                body.insert("secret_environment_variables".into(), Value::Array(vars));
            }
        }
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
        let held = scope.functions_in(handle, None).await?;
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
        Ok(tags::to_map(&ns.tags()))
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

    use infra_core::kinds::EnvVars;

    use super::*;

    fn wire() -> NamespaceWire {
        NamespaceWire {
            id: "n1".into(),
            name: "ns".into(),
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
