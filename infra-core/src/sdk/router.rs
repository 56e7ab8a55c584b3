//! The router: typed kind implementations in, the engine's string-routed `Backend` out.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;

use super::{
    CreateArgs, DeleteArgs, KindBackend, ListArgs, MarkArgs, OwnershipArgs, PrerequisiteArgs,
    ReadArgs, UpdateArgs, Written,
};
use crate::backend::{
    Backend, Capabilities, Listed, Marker, Prerequisite, RawTags, SettledSpec, Sighting,
};
use crate::{BackendError, ErrorKind, Kind, SecretString};

/// Where a provider's credentials act: asked once per run, before anything is listed,
/// and compared with what the fleet expects.
#[async_trait]
pub trait Account: Send + Sync + 'static {
    /// The account (project, organisation) id.
    async fn account(&self) -> Result<String, BackendError>;
}

/// A fixed account id: for a provider whose scope is configured rather than asked.
#[async_trait]
impl Account for String {
    async fn account(&self) -> Result<String, BackendError> {
        Ok(self.clone())
    }
}

/// The arguments of [`SecretValues::secret_value`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug)]
pub struct SecretArgs<'a> {
    /// The region's code.
    pub region: &'a str,
    /// The secret's handle.
    pub handle: &'a str,
}

impl<'a> SecretArgs<'a> {
    /// Arguments for reading the value of `handle` in `region`.
    pub fn new(region: &'a str, handle: &'a str) -> Self {
        SecretArgs { region, handle }
    }
}

/// Reads the current value of a `secrets` resource: the only way plaintext enters the
/// engine. Used for one create or update and never stored.
#[async_trait]
pub trait SecretValues: Send + Sync + 'static {
    /// The value of the secret `args.handle`.
    async fn secret_value(&self, args: SecretArgs<'_>) -> Result<SecretString, BackendError>;
}

/// A provider's backend made of typed kind implementations: the engine's
/// [`Backend`], with the routing by kind written once, here.
///
/// ```
/// use infra_core::sdk::{KindBackend, Router};
/// # use infra_core::sdk::*;
/// # use infra_core::kinds::Queues;
/// # struct MyQueues;
/// # #[async_trait::async_trait]
/// # impl KindBackend<Queues> for MyQueues {
/// #     async fn list(&self, _: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> { Ok(vec![]) }
/// #     async fn read(&self, a: ReadArgs<'_>) -> Result<Reading<Queues>, BackendError> { Err(BackendError::not_found(a.handle)) }
/// #     async fn create(&self, a: CreateArgs<'_, Queues>) -> Result<Written<Reading<Queues>>, BackendError> { Err(BackendError::invalid(a.name)) }
/// #     async fn update(&self, a: UpdateArgs<'_, Queues>) -> Result<Written<Reading<Queues>>, BackendError> { Err(BackendError::not_found(a.handle)) }
/// #     async fn delete(&self, a: DeleteArgs<'_>) -> Result<(), BackendError> { Err(BackendError::not_found(a.handle)) }
/// #     async fn ownership(&self, a: OwnershipArgs<'_>) -> Result<RawTags, BackendError> { Err(BackendError::not_found(a.handle)) }
/// # }
/// let backend = Router::new("acme", "acct-1".to_owned()).kind::<Queues>(MyQueues);
/// assert!(backend.capabilities().kinds.contains("queues"));
/// ```
pub struct Router {
    provider: &'static str,
    account: Box<dyn Account>,
    kinds: BTreeMap<&'static str, Box<dyn ErasedKind>>,
    secrets: Option<Box<dyn SecretValues>>,
}

impl fmt::Debug for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Router")
            .field("provider", &self.provider)
            .field("kinds", &self.kinds.keys().collect::<Vec<_>>())
            .field("secrets", &self.secrets.is_some())
            .finish()
    }
}

impl Router {
    /// A backend for `provider` (`"aws"`) with no kinds yet, whose credentials act in
    /// the account `account` answers.
    pub fn new(provider: &'static str, account: impl Account) -> Self {
        Router {
            provider,
            account: Box::new(account),
            kinds: BTreeMap::new(),
            secrets: None,
        }
    }

    /// Realises kind `K` with `backend` (replacing an earlier one for `K`).
    #[must_use = "the router is returned with the kind added"]
    pub fn kind<K: Kind>(mut self, backend: impl KindBackend<K>) -> Self {
        self.add::<K>(backend);
        self
    }

    /// Realises kind `K` with `backend` (replacing an earlier one for `K`).
    pub fn add<K: Kind>(&mut self, backend: impl KindBackend<K>) {
        self.kinds.insert(
            K::ID,
            Box::new(Typed {
                backend,
                kind: PhantomData::<fn() -> K>,
            }),
        );
    }

    /// Reads secret values with `secrets` (a provider without it answers `Invalid` to
    /// every request for a secret's value).
    #[must_use = "the router is returned with the secret reader added"]
    pub fn secrets(mut self, secrets: impl SecretValues) -> Self {
        self.secrets = Some(Box::new(secrets));
        self
    }

    /// The ids of the kinds realised.
    pub fn kinds(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.kinds.keys().copied()
    }

    fn route(&self, kind: &str) -> Result<&dyn ErasedKind, BackendError> {
        self.kinds.get(kind).map(|k| &**k).ok_or_else(|| {
            BackendError::new(
                ErrorKind::Invalid,
                format!(
                    "the {} provider does not realise kind {kind} (it realises: {})",
                    self.provider,
                    self.kinds.keys().copied().collect::<Vec<_>>().join(", ")
                ),
            )
        })
    }
}

#[async_trait]
impl Backend for Router {
    fn provider(&self) -> &'static str {
        self.provider
    }

    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::default();
        for (id, kind) in &self.kinds {
            caps.kinds.insert(id);
            if kind.tags_readable() {
                caps.ownership.insert(id);
            }
            if kind.duplicate_names() {
                caps.duplicate_names.insert(id);
            }
            if kind.lists_complete() {
                caps.complete_lists.insert(id);
            }
        }
        caps
    }

    async fn account(&self) -> Result<String, BackendError> {
        self.account.account().await
    }

    async fn list(&self, kind: &'static str, region: &str) -> Result<Vec<Listed>, BackendError> {
        self.route(kind)?.list(region).await
    }

    async fn read(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<Sighting, BackendError> {
        self.route(kind)?.read(region, handle).await
    }

    async fn create(
        &self,
        kind: &'static str,
        region: &str,
        name: &str,
        spec: SettledSpec<'_>,
        marker: &Marker,
    ) -> Result<Written, BackendError> {
        self.route(kind)?.create(region, name, spec, marker).await
    }

    async fn update(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
        spec: SettledSpec<'_>,
    ) -> Result<Written, BackendError> {
        self.route(kind)?.update(region, handle, spec).await
    }

    async fn delete(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<(), BackendError> {
        self.route(kind)?.delete(region, handle).await
    }

    async fn ownership(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<RawTags, BackendError> {
        self.route(kind)?.ownership(region, handle).await
    }

    async fn secret_value(&self, region: &str, handle: &str) -> Result<SecretString, BackendError> {
        match &self.secrets {
            Some(secrets) => secrets.secret_value(SecretArgs::new(region, handle)).await,
            None => Err(BackendError::invalid(format!(
                "the {} provider holds no secret values (asked for {handle} in {region})",
                self.provider
            ))),
        }
    }

    async fn mark(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
        marker: &Marker,
    ) -> Result<(), BackendError> {
        self.route(kind)?.mark(region, handle, marker).await
    }

    async fn prerequisites(
        &self,
        kind: &'static str,
        region: &str,
    ) -> Result<Vec<Prerequisite>, BackendError> {
        self.route(kind)?.prerequisites(region).await
    }
}

/// A typed kind implementation behind the router's string dispatch.
#[async_trait]
trait ErasedKind: Send + Sync {
    fn duplicate_names(&self) -> bool;
    fn tags_readable(&self) -> bool;
    fn lists_complete(&self) -> bool;
    async fn list(&self, region: &str) -> Result<Vec<Listed>, BackendError>;
    async fn read(&self, region: &str, handle: &str) -> Result<Sighting, BackendError>;
    async fn create(
        &self,
        region: &str,
        name: &str,
        spec: SettledSpec<'_>,
        marker: &Marker,
    ) -> Result<Written, BackendError>;
    async fn update(
        &self,
        region: &str,
        handle: &str,
        spec: SettledSpec<'_>,
    ) -> Result<Written, BackendError>;
    async fn delete(&self, region: &str, handle: &str) -> Result<(), BackendError>;
    async fn ownership(&self, region: &str, handle: &str) -> Result<RawTags, BackendError>;
    async fn mark(&self, region: &str, handle: &str, marker: &Marker) -> Result<(), BackendError>;
    async fn prerequisites(&self, region: &str) -> Result<Vec<Prerequisite>, BackendError>;
}

struct Typed<K, B> {
    backend: B,
    kind: PhantomData<fn() -> K>,
}

#[async_trait]
impl<K: Kind, B: KindBackend<K>> ErasedKind for Typed<K, B> {
    fn duplicate_names(&self) -> bool {
        self.backend.duplicate_names()
    }
    fn tags_readable(&self) -> bool {
        self.backend.tags_readable()
    }
    fn lists_complete(&self) -> bool {
        self.backend.lists_complete()
    }
    async fn list(&self, region: &str) -> Result<Vec<Listed>, BackendError> {
        self.backend.list(ListArgs::new(region)).await
    }
    async fn read(&self, region: &str, handle: &str) -> Result<Sighting, BackendError> {
        let reading = self.backend.read(ReadArgs::new(region, handle)).await?;
        Ok(reading.into_sighting())
    }
    async fn create(
        &self,
        region: &str,
        name: &str,
        spec: SettledSpec<'_>,
        marker: &Marker,
    ) -> Result<Written, BackendError> {
        let spec = spec.get::<K>()?;
        let args = CreateArgs::new(region, name, spec, marker);
        Ok(self.backend.create(args).await?.map(Sighting::from))
    }
    async fn update(
        &self,
        region: &str,
        handle: &str,
        spec: SettledSpec<'_>,
    ) -> Result<Written, BackendError> {
        let spec = spec.get::<K>()?;
        let args = UpdateArgs::new(region, handle, spec);
        Ok(self.backend.update(args).await?.map(Sighting::from))
    }
    async fn delete(&self, region: &str, handle: &str) -> Result<(), BackendError> {
        self.backend.delete(DeleteArgs::new(region, handle)).await
    }
    async fn ownership(&self, region: &str, handle: &str) -> Result<RawTags, BackendError> {
        self.backend
            .ownership(OwnershipArgs::new(region, handle))
            .await
    }
    async fn mark(&self, region: &str, handle: &str, marker: &Marker) -> Result<(), BackendError> {
        self.backend
            .mark(MarkArgs::new(region, handle, marker))
            .await
    }
    async fn prerequisites(&self, region: &str) -> Result<Vec<Prerequisite>, BackendError> {
        self.backend
            .prerequisites(PrerequisiteArgs::new(region))
            .await
    }
}

/// A shared implementation serves as well as an owned one.
#[async_trait]
impl<K: Kind, B: KindBackend<K>> KindBackend<K> for Arc<B> {
    fn duplicate_names(&self) -> bool {
        (**self).duplicate_names()
    }
    fn tags_readable(&self) -> bool {
        (**self).tags_readable()
    }
    fn lists_complete(&self) -> bool {
        (**self).lists_complete()
    }
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        (**self).list(args).await
    }
    async fn read(&self, args: ReadArgs<'_>) -> Result<super::Reading<K>, BackendError> {
        (**self).read(args).await
    }
    async fn create(
        &self,
        args: CreateArgs<'_, K>,
    ) -> Result<Written<super::Reading<K>>, BackendError> {
        (**self).create(args).await
    }
    async fn update(
        &self,
        args: UpdateArgs<'_, K>,
    ) -> Result<Written<super::Reading<K>>, BackendError> {
        (**self).update(args).await
    }
    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        (**self).delete(args).await
    }
    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        (**self).ownership(args).await
    }
    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        (**self).mark(args).await
    }
    async fn prerequisites(
        &self,
        args: PrerequisiteArgs<'_>,
    ) -> Result<Vec<Prerequisite>, BackendError> {
        (**self).prerequisites(args).await
    }
}
