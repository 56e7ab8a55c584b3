//! A backend that forwards every call to another and alters one kind: the way a
//! provider that lacks it, governs it, or cannot read its tags behaves.

use std::sync::Arc;

use async_trait::async_trait;
use infra_core::{
    Backend, BackendError, Capabilities, Listed, Marker, RawTags, SecretString, SettledSpec,
    Sighting,
};

/// What is different about the altered kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alteration {
    /// The backend does not realise it.
    Lacks,
    /// The backend realises it, but only records changes to it for approval.
    Governs,
    /// The backend realises it, but cannot read its tags (as Scaleway cannot for
    /// queues): whose a resource is cannot be told.
    TagsUnreadable,
}

/// Forwards every call to `inner`, with `kind` altered as `how` says.
pub struct Altered {
    pub inner: Arc<dyn Backend>,
    pub kind: &'static str,
    pub how: Alteration,
}

impl Altered {
    /// `inner`, with `kind` altered as `how` says.
    pub fn new(inner: Arc<dyn Backend>, kind: &'static str, how: Alteration) -> Arc<Self> {
        Arc::new(Altered { inner, kind, how })
    }

    fn governed(&self, kind: &str) -> Result<(), BackendError> {
        if self.how == Alteration::Governs && kind == self.kind {
            return Err(BackendError::awaiting_approval(format!(
                "plan recorded for {kind}; it awaits approval"
            )));
        }
        Ok(())
    }
}

#[async_trait]
impl Backend for Altered {
    fn provider(&self) -> &'static str {
        self.inner.provider()
    }
    fn capabilities(&self) -> Capabilities {
        let mut caps = self.inner.capabilities();
        match self.how {
            Alteration::Lacks => {
                caps.kinds.remove(self.kind);
                caps.ownership.remove(self.kind);
            }
            Alteration::TagsUnreadable => {
                caps.ownership.remove(self.kind);
            }
            Alteration::Governs => {}
        }
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
        self.governed(kind)?;
        self.inner.create(kind, region, name, spec, marker).await
    }
    async fn update(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
        spec: SettledSpec<'_>,
    ) -> Result<Sighting, BackendError> {
        self.governed(kind)?;
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
        if self.how == Alteration::TagsUnreadable && kind == self.kind {
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
