//! The `secrets` kind: Secret Manager secrets. (Being written.)

use std::sync::Arc;

use async_trait::async_trait;
use infra_core::kinds::Secrets;
use infra_core::prelude::SecretString;
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, KindBackend, ListArgs, Listed, OwnershipArgs, RawTags,
    ReadArgs, Reading, SecretArgs, SecretValues, UpdateArgs, Written,
};

use crate::clients::Clients;

/// `Secrets` on Google Cloud.
pub(crate) struct SecretManagerSecrets {
    clients: Arc<Clients>,
}

impl SecretManagerSecrets {
    /// The kind, reaching Google Cloud through `clients`.
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        SecretManagerSecrets { clients }
    }

    fn unwritten(&self) -> BackendError {
        let _ = &self.clients;
        BackendError::invalid("not written yet")
    }
}

#[async_trait]
impl KindBackend<Secrets> for SecretManagerSecrets {
    async fn list(&self, _args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        Err(self.unwritten())
    }
    async fn read(&self, _args: ReadArgs<'_>) -> Result<Reading<Secrets>, BackendError> {
        Err(self.unwritten())
    }
    async fn create(
        &self,
        _args: CreateArgs<'_, Secrets>,
    ) -> Result<Written<Reading<Secrets>>, BackendError> {
        Err(self.unwritten())
    }
    async fn update(
        &self,
        _args: UpdateArgs<'_, Secrets>,
    ) -> Result<Written<Reading<Secrets>>, BackendError> {
        Err(self.unwritten())
    }
    async fn delete(&self, _args: DeleteArgs<'_>) -> Result<(), BackendError> {
        Err(self.unwritten())
    }
    async fn ownership(&self, _args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        Err(self.unwritten())
    }
}

#[async_trait]
impl SecretValues for SecretManagerSecrets {
    async fn secret_value(&self, args: SecretArgs<'_>) -> Result<SecretString, BackendError> {
        let _ = (&self.clients, args);
        Err(BackendError::invalid("not written yet"))
    }
}
