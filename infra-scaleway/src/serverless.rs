//! What Serverless Functions (`functions/v1beta1`) and Serverless Containers
//! (`containers/v1beta1`) share: the two APIs differ in their path prefix, the names of
//! their operations and the word for what a namespace holds (`functions`,
//! `containers`); their namespaces are the same resource.
//!
//! Shared here: Scaleway's namespace and secret-variable shapes, the checks both APIs
//! make (environment variables, scaling, timeouts), duration strings, the namespace
//! calls of one region ([`Scope`]), what read reports of a namespace and what an
//! update of one sends, the secret variables a write sends, and polling a resource
//! until it is done with or gone. What each product makes of a status (which statuses
//! are awaited, which are failures, in which words) stays with the product.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::marker::PhantomData;

use infra_core::kinds::{Access, EnvVars, NamespaceObserved, Secrets};
use infra_core::prelude::{Handle, Kind, Partial};
use infra_core::sdk::poll::{self, Waited};
use infra_core::sdk::{BackendError, ErrorKind, Marker, RawTags, Reading};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::api::Call;
use crate::clients::Clients;
use crate::secret_value::latest_value as secret_value;
use crate::tags;

/// The `not_found` resource types that mean "this namespace does not exist".
pub(crate) const NO_NAMESPACE: &[&str] = &["namespace"];

/// One of the two serverless APIs: what tells its calls apart from the other's.
pub(crate) trait Product {
    /// The path prefix of the API (`/functions/v1beta1`).
    const API: &'static str;
    /// `GetNamespace`, as calls and errors name it (`functions:GetNamespace`).
    const GET_NAMESPACE: &'static str;
    /// `ListNamespaces`, likewise.
    const LIST_NAMESPACES: &'static str;
    /// `UpdateNamespace`, likewise.
    const UPDATE_NAMESPACE: &'static str;
    /// What a namespace holds, as a path segment and as the listing's field
    /// (`functions`).
    const RESOURCES: &'static str;
    /// The `Get…` call of what a namespace holds (`functions:GetFunction`).
    const GET_RESOURCE: &'static str;
    /// The `List…` call of what a namespace holds (`functions:ListFunctions`).
    const LIST_RESOURCES: &'static str;
    /// The `not_found` resource types that mean "this resource does not exist".
    const NO_RESOURCE: &'static [&'static str];
    /// Environment variable names Scaleway reserves besides `SCW_*`.
    const RESERVED_ENV: &'static [&'static str];
    /// What a namespace holds, as Scaleway answers it.
    type Wire: Resource + DeserializeOwned + Send;
}

// ---- Scaleway's shapes -------------------------------------------------------------

/// A secret variable as Scaleway answers it (its hash is not read).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct HashedVar {
    /// The variable's name.
    pub(crate) key: String,
}

/// A namespace as Scaleway answers it (the fields read here).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct NamespaceWire {
    pub(crate) id: String,
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) project_id: String,
    #[serde(default)]
    pub(crate) status: String,
    #[serde(default)]
    pub(crate) description: Option<String>,
    #[serde(default)]
    pub(crate) environment_variables: Option<EnvVars>,
    #[serde(default)]
    pub(crate) secret_environment_variables: Option<Vec<HashedVar>>,
    #[serde(default)]
    pub(crate) registry_endpoint: Option<String>,
    #[serde(default)]
    pub(crate) error_message: Option<String>,
    #[serde(default)]
    pub(crate) tags: Option<Vec<String>>,
}

/// A resource whose status Scaleway moves on its own, and which carries tags and
/// secret variables.
pub(crate) trait Resource {
    /// Its id.
    fn id(&self) -> &str;
    /// Its name.
    fn name(&self) -> &str;
    /// Its status (`ready`, `pending`, …).
    fn status(&self) -> &str;
    /// Why Scaleway put it in `error`, if it said.
    fn error_message(&self) -> Option<&String>;
    /// Its tags, as answered.
    fn tag_list(&self) -> Option<&Vec<String>>;
    /// Its secret variables, as answered.
    fn secret_list(&self) -> Option<&Vec<HashedVar>>;

    /// Its tags; none is an empty list.
    fn tags(&self) -> Vec<String> {
        self.tag_list().cloned().unwrap_or_default()
    }

    /// Its tags as a map.
    fn raw_tags(&self) -> RawTags {
        tags::to_map(self.tag_list().map_or(&[], Vec::as_slice))
    }

    /// The keys of the secret variables it holds.
    fn secret_keys(&self) -> BTreeSet<String> {
        secret_keys(self.secret_list())
    }
}

/// Implements [`Resource`] for a wire shape with the fields `id`, `name`, `status`,
/// `error_message`, `tags` and `secret_environment_variables`.
macro_rules! impl_resource {
    ($wire:ty) => {
        impl $crate::serverless::Resource for $wire {
            fn id(&self) -> &str {
                &self.id
            }
            fn name(&self) -> &str {
                &self.name
            }
            fn status(&self) -> &str {
                &self.status
            }
            fn error_message(&self) -> Option<&String> {
                self.error_message.as_ref()
            }
            fn tag_list(&self) -> Option<&Vec<String>> {
                self.tags.as_ref()
            }
            fn secret_list(&self) -> Option<&Vec<$crate::serverless::HashedVar>> {
                self.secret_environment_variables.as_ref()
            }
        }
    };
}
pub(crate) use impl_resource;

impl_resource!(NamespaceWire);

/// The keys of the secret variables a resource holds.
pub(crate) fn secret_keys(vars: Option<&Vec<HashedVar>>) -> BTreeSet<String> {
    vars.into_iter().flatten().map(|v| v.key.clone()).collect()
}

/// `Known` when there is a value, `Unknown` otherwise.
pub(crate) fn known<T>(value: Option<T>) -> Partial<T> {
    value.map_or(Partial::Unknown, Partial::Known)
}

/// `value`, unless it is absent or empty.
pub(crate) fn non_empty(value: Option<&String>) -> Option<String> {
    value.filter(|v| !v.is_empty()).cloned()
}

/// Scaleway's `privacy` for `access`: `private` (calls need a token or an IAM key) or
/// `public` (anyone). Always sent, on create and on update: Scaleway makes a function
/// or a container that a create says nothing of public.
pub(crate) fn privacy(access: Access) -> &'static str {
    match access {
        Access::Private => "private",
        Access::Public => "public",
    }
}

/// The `access` a `privacy` answer says; `Unknown` for none, `unknown_privacy` or a
/// value Scaleway may add later.
pub(crate) fn access_of(privacy: Option<&str>) -> Partial<Access> {
    match privacy {
        Some("private") => Partial::Known(Access::Private),
        Some("public") => Partial::Known(Access::Public),
        _ => Partial::Unknown,
    }
}

// ---- What Scaleway refuses ----------------------------------------------------------

/// A refusal made before any call.
pub(crate) fn invalid(message: impl Into<String>) -> BackendError {
    BackendError::invalid(message)
}

/// Refuses environment variables Scaleway refuses; either map may be unsaid.
/// `reserved` are the names Scaleway keeps for itself besides `SCW_*`.
pub(crate) fn check_env(
    plain: Option<&EnvVars>,
    secret: Option<&BTreeMap<String, Handle<Secrets>>>,
    reserved: &[&str],
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
        if reserved.contains(&name.as_str()) || name.starts_with("SCW_") {
            let all: Vec<&str> = reserved.iter().copied().chain(["SCW_*"]).collect();
            return Err(invalid(format!(
                "the environment variable {name} is reserved by Scaleway ({})",
                all.join(" and ")
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

/// Refuses a timeout outside 1 to 900 s.
pub(crate) fn check_timeout(seconds: u32) -> Result<(), BackendError> {
    if (1..=900).contains(&seconds) {
        return Ok(());
    }
    Err(invalid(format!(
        "`timeoutSeconds` is {seconds}; Scaleway takes 1 to 900"
    )))
}

/// Refuses scaling Scaleway refuses; `min` and `max` are what the resource will have.
pub(crate) fn check_scale(min: Option<u32>, max: Option<u32>) -> Result<(), BackendError> {
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

/// A timeout as Scaleway's duration string.
pub(crate) fn duration(seconds: u32) -> String {
    format!("{seconds}s")
}

/// Whole seconds of a duration string (`"300s"`, `"300.000s"`), or `None`.
pub(crate) fn seconds_of(duration: &str) -> Option<u32> {
    let number = duration.strip_suffix('s')?;
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() || !fraction.chars().all(|c| c == '0') {
        return None;
    }
    whole.parse().ok()
}

// ---- Namespaces ---------------------------------------------------------------------

/// What a namespace declaration says (`functionNamespace` and `containerNamespace`
/// declare the same fields); `None`: unsaid.
pub(crate) struct NamespaceSpec<'a> {
    pub(crate) description: Option<&'a String>,
    pub(crate) environment: Option<&'a EnvVars>,
    pub(crate) secret_environment: Option<&'a BTreeMap<String, Handle<Secrets>>>,
    pub(crate) tags: Option<&'a BTreeSet<String>>,
}

/// A namespace kind: what its declaration says, and how its reading is made.
pub(crate) trait NamespaceKind: Kind<Observed = NamespaceObserved> {
    /// What `spec` says.
    fn declared(spec: &Self::Settled) -> NamespaceSpec<'_>;
    /// The kind's reported configuration; the secret variables are never reported.
    fn reported(
        description: String,
        environment: Partial<EnvVars>,
        tags: BTreeSet<String>,
    ) -> Self::Reported;
}

/// What read reports of `ns`.
pub(crate) fn namespace_reading<K: NamespaceKind>(ns: &NamespaceWire) -> Reading<K> {
    let raw = ns.tags();
    Reading::new(
        ns.id.clone(),
        NamespaceObserved {
            id: ns.id.clone(),
            registry_endpoint: known(non_empty(ns.registry_endpoint.as_ref())),
        },
        K::reported(
            ns.description.clone().unwrap_or_default(),
            known(ns.environment_variables.clone()),
            raw.iter().cloned().collect(),
        ),
    )
    .with_raw_tags(tags::to_map(&raw))
}

/// The tags an update writes to keep `now` and bring in `declared` (the marker kept),
/// or `None` when they are the same set.
pub(crate) fn tag_update(declared: Vec<String>, now: &[String]) -> Option<Vec<String>> {
    let wanted = tags::for_update(declared, now);
    let same = wanted.iter().collect::<BTreeSet<_>>() == now.iter().collect::<BTreeSet<_>>();
    (!same).then_some(wanted)
}

/// The `PATCH` body bringing `current` to `spec`, secret variables aside: only what
/// differs.
pub(crate) fn namespace_changes(
    spec: &NamespaceSpec<'_>,
    current: &NamespaceWire,
) -> Map<String, Value> {
    let mut body = Map::new();
    if let Some(description) = spec.description
        && current.description.as_deref().unwrap_or_default() != description
    {
        body.insert("description".into(), json!(description));
    }
    if let Some(env) = spec.environment
        && current.environment_variables.as_ref() != Some(env)
    {
        body.insert("environment_variables".into(), json!(env));
    }
    let declared = spec.tags.map(tags::from_set);
    if let Some(wanted) = declared.and_then(|d| tag_update(d, &current.tags())) {
        body.insert("tags".into(), json!(wanted));
    }
    body
}

// ---- One region's API -----------------------------------------------------------------

/// The API `P` in one region.
pub(crate) struct Scope<'a, P> {
    /// The provider's clients.
    pub(crate) clients: &'a Clients,
    /// The region's code.
    pub(crate) region: &'a str,
    product: PhantomData<fn() -> P>,
}

impl<P> Clone for Scope<'_, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for Scope<'_, P> {}

impl<'a, P: Product> Scope<'a, P> {
    /// The API `P` in `region`.
    pub(crate) fn new(clients: &'a Clients, region: &'a str) -> Self {
        Scope {
            clients,
            region,
            product: PhantomData,
        }
    }

    /// The path of `rest` in the region (`/functions/v1beta1/regions/fr-par/{rest}`).
    pub(crate) fn path(&self, rest: &str) -> String {
        format!("{}/regions/{}/{rest}", P::API, self.region)
    }

    /// `GetNamespace`.
    pub(crate) async fn namespace(&self, id: &str) -> Result<NamespaceWire, BackendError> {
        let call = Call::get(P::GET_NAMESPACE, self.path(&format!("namespaces/{id}")));
        self.clients.api().call(call.not_found(NO_NAMESPACE)).await
    }

    /// The project's namespaces in the region (every page), `name` filtering them.
    pub(crate) async fn namespaces(
        &self,
        name: Option<&str>,
    ) -> Result<Vec<NamespaceWire>, BackendError> {
        let mut call = Call::get(P::LIST_NAMESPACES, self.path("namespaces"))
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
    pub(crate) async fn namespace_named(
        &self,
        name: &str,
    ) -> Result<Option<NamespaceWire>, BackendError> {
        Ok(self.namespaces(Some(name)).await?.into_iter().next())
    }

    /// Sends `body` to `PATCH` the namespace `id`.
    pub(crate) async fn patch_namespace(
        &self,
        id: &str,
        body: &Map<String, Value>,
    ) -> Result<(), BackendError> {
        let call = Call::patch(P::UPDATE_NAMESPACE, self.path(&format!("namespaces/{id}")));
        self.clients
            .api()
            .act(call.not_found(NO_NAMESPACE), Some(body))
            .await
    }

    /// Sends `CreateNamespace` (`what`) with `body`; a lost answer is settled by the
    /// name `name` and the marker. The body, which may hold secret values, is dropped
    /// as soon as it is sent.
    pub(crate) async fn create_namespace(
        &self,
        what: &str,
        name: &str,
        body: Map<String, Value>,
        marker: &Marker,
    ) -> Result<NamespaceWire, BackendError> {
        let call = Call::create(what, self.path("namespaces"));
        let sent = self.clients.api().send(call, Some(&body)).await;
        drop(body);
        match sent {
            Ok(ns) => Ok(ns),
            Err(err) => {
                let find = async {
                    let found = self.namespace_named(name).await?;
                    Ok(found.map(|ns| (ns.raw_tags(), ns)))
                };
                poll::settle_uncertain(err, marker, what, find).await
            }
        }
    }

    /// The body of `CreateNamespace`: `name`, the project, `spec`'s tags with the
    /// marker, and what `spec` says of the description and the variables.
    pub(crate) async fn namespace_body(
        &self,
        name: &str,
        spec: &NamespaceSpec<'_>,
        marker: &Marker,
    ) -> Result<Map<String, Value>, BackendError> {
        let mut body = Map::new();
        body.insert("name".into(), json!(name));
        body.insert("project_id".into(), json!(self.clients.project_id()));
        let declared = spec.tags.map(tags::from_set).unwrap_or_default();
        body.insert("tags".into(), json!(tags::for_create(declared, marker)));
        if let Some(description) = spec.description {
            body.insert("description".into(), json!(description));
        }
        if let Some(env) = spec.environment {
            body.insert("environment_variables".into(), json!(env));
        }
        if let Some(secrets) = spec.secret_environment {
            let vars = self.secret_vars(secrets, &BTreeSet::new()).await?;
            body.insert("secret_environment_variables".into(), Value::Array(vars));
        }
        Ok(body)
    }

    /// The `PATCH` body bringing the namespace `current` to `spec`, secret variables
    /// included; empty when nothing is to be written.
    pub(crate) async fn namespace_update(
        &self,
        spec: &NamespaceSpec<'_>,
        current: &NamespaceWire,
    ) -> Result<Map<String, Value>, BackendError> {
        let mut body = namespace_changes(spec, current);
        if let Some(secrets) = spec.secret_environment {
            let vars = self.secret_vars(secrets, &current.secret_keys()).await?;
            if !vars.is_empty() {
                body.insert("secret_environment_variables".into(), Value::Array(vars));
            }
        }
        Ok(body)
    }

    /// `Get…` of the resource `id` a namespace holds.
    pub(crate) async fn resource(&self, id: &str) -> Result<P::Wire, BackendError> {
        let call = Call::get(
            P::GET_RESOURCE,
            self.path(&format!("{}/{id}", P::RESOURCES)),
        );
        self.clients
            .api()
            .call(call.not_found(P::NO_RESOURCE))
            .await
    }

    /// The resources of the namespace `namespace` (every page), `name` filtering them;
    /// none when the namespace is gone (since it was listed).
    pub(crate) async fn in_namespace(
        &self,
        namespace: &str,
        name: Option<&str>,
    ) -> Result<Vec<P::Wire>, BackendError> {
        let mut call = Call::get(P::LIST_RESOURCES, self.path(P::RESOURCES))
            .query("namespace_id", namespace)
            .query("project_id", self.clients.project_id())
            .not_found(NO_NAMESPACE);
        if let Some(name) = name {
            call = call.query("name", name);
        }
        match self
            .clients
            .api()
            .list_all::<P::Wire>(call, P::RESOURCES)
            .await
        {
            Ok(all) => Ok(all
                .into_iter()
                .filter(|r| name.is_none_or(|want| r.name() == want))
                .collect()),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// The resource named `name` in the namespace `namespace`, with its raw tags.
    pub(crate) async fn named_in(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<(RawTags, P::Wire)>, BackendError> {
        let found = self.in_namespace(namespace, Some(name)).await?;
        Ok(found.into_iter().next().map(|r| (r.raw_tags(), r)))
    }

    /// Sends the `Create…` call `what` of a resource named `name` in the namespace
    /// `namespace`; a lost answer is settled by name and marker. The body, which may
    /// hold secret values, is dropped as soon as it is sent.
    pub(crate) async fn create_in(
        &self,
        what: &str,
        namespace: &str,
        name: &str,
        body: Map<String, Value>,
        marker: &Marker,
    ) -> Result<P::Wire, BackendError> {
        let call = Call::create(what, self.path(P::RESOURCES));
        let sent = self.clients.api().send(call, Some(&body)).await;
        drop(body);
        match sent {
            Ok(made) => Ok(made),
            Err(err) => {
                let find = self.named_in(namespace, name);
                poll::settle_uncertain(err, marker, what, find).await
            }
        }
    }

    /// `secret_environment_variables` to send: each declared variable with its secret's
    /// latest value, and each variable `current` holds that is no longer declared as a
    /// key without a value (which removes it). Empty when there is nothing to write.
    pub(crate) async fn secret_vars(
        &self,
        declared: &BTreeMap<String, Handle<Secrets>>,
        current: &BTreeSet<String>,
    ) -> Result<Vec<Value>, BackendError> {
        let mut vars = Vec::new();
        for (key, handle) in declared {
            let value = match secret_value(self.clients, self.region, handle.as_str()).await {
                // The secret is not the resource written: its absence is the
                // declaration's fault, never "this resource is absent".
                Err(e) if e.kind == ErrorKind::NotFound => {
                    return Err(invalid(format!(
                        "the secret {handle} of the variable {key} has no value to read: {}",
                        e.message
                    )));
                }
                read => read?,
            };
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

    /// Polls `get` until `done` says the resource it answers is done with (an error
    /// from `done` ends the polling).
    pub(crate) async fn poll_until<T, F, Fut>(
        &self,
        what: &str,
        get: F,
        done: impl Fn(&T) -> Result<bool, BackendError>,
    ) -> Result<Waited<T>, BackendError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, BackendError>>,
    {
        poll::until_done(
            self.clients.clock(),
            self.clients.polling(),
            what,
            || async {
                let resource = get().await?;
                Ok(done(&resource)?.then_some(resource))
            },
        )
        .await
    }

    /// What `waited` ended with; still running at the deadline, the error saying so.
    pub(crate) fn finished<T>(&self, what: &str, waited: Waited<T>) -> Result<T, BackendError> {
        match waited {
            Waited::Done(done) => Ok(done),
            Waited::StillRunning => Err(poll::still_running(what, self.clients.polling())),
        }
    }

    /// Polls `get` until it answers `NotFound`.
    pub(crate) async fn gone<T, F, Fut>(&self, what: &str, get: F) -> Result<(), BackendError>
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
        self.finished(what, polled)
    }
}
