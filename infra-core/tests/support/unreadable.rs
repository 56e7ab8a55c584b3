//! A backend whose tags of one kind cannot be read: it realises the kind, but cannot
//! tell whose its resources are (as Scaleway cannot for queues).

use std::sync::Arc;

use async_trait::async_trait;
use infra_core::{
    Backend, BackendError, Capabilities, Listed, Marker, RawTags, SecretString, SettledSpec,
    Sighting,
};

/// Forwards every call to `inner`, and declares the tags of `kind` unreadable.
pub struct TagsUnreadable {
    pub inner: Arc<dyn Backend>,
    pub kind: &'static str,
}

#[async_trait]
impl Backend for TagsUnreadable {
    fn provider(&self) -> &'static str {
        self.inner.provider()
    }
    fn capabilities(&self) -> Capabilities {
        let mut caps = self.inner.capabilities();
        caps.ownership.remove(self.kind);
        caps
    }
    async fn account(&self) -> Result<String, BackendError> {
        self.inner.account().await
    }
    async fn list(&self, kind: &'static str, region: &str) -> Result<Vec<Listed>, BackendError> {
        self.inner.list(kind, region).await
    }
    async fn read(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<Sighting, BackendError> {
        self.inner.read(kind, region, handle).await
    }
    async fn create(
        &self,
        kind: &'static str,
        region: &str,
        name: &str,
        spec: SettledSpec<'_>,
        marker: &Marker,
    ) -> Result<Sighting, BackendError> {
        self.inner.create(kind, region, name, spec, marker).await
    }
    async fn update(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
        spec: SettledSpec<'_>,
    ) -> Result<Sighting, BackendError> {
        self.inner.update(kind, region, handle, spec).await
    }
    async fn delete(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<(), BackendError> {
        self.inner.delete(kind, region, handle).await
    }
    async fn ownership(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<RawTags, BackendError> {
        if kind == self.kind {
            return Err(BackendError::invalid(format!(
                "the tags of a {kind} cannot be read"
            )));
        }
        self.inner.ownership(kind, region, handle).await
    }
    async fn secret_value(&self, region: &str, handle: &str) -> Result<SecretString, BackendError> {
        self.inner.secret_value(region, handle).await
    }
}
