//! The `imageRegistry` kind: Artifact Registry Docker repositories. (Being written.)

use std::sync::Arc;

use async_trait::async_trait;
use infra_core::kinds::ImageRegistry;
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, KindBackend, ListArgs, Listed, OwnershipArgs, RawTags,
    ReadArgs, Reading, UpdateArgs, Written,
};

use crate::clients::Clients;

/// `ImageRegistry` on Google Cloud.
pub(crate) struct DockerRepositories {
    clients: Arc<Clients>,
}

impl DockerRepositories {
    /// The kind, reaching Google Cloud through `clients`.
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        DockerRepositories { clients }
    }

    fn unwritten(&self) -> BackendError {
        let _ = &self.clients;
        BackendError::invalid("not written yet")
    }
}

#[async_trait]
impl KindBackend<ImageRegistry> for DockerRepositories {
    async fn list(&self, _args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        Err(self.unwritten())
    }
    async fn read(&self, _args: ReadArgs<'_>) -> Result<Reading<ImageRegistry>, BackendError> {
        Err(self.unwritten())
    }
    async fn create(
        &self,
        _args: CreateArgs<'_, ImageRegistry>,
    ) -> Result<Written<Reading<ImageRegistry>>, BackendError> {
        Err(self.unwritten())
    }
    async fn update(
        &self,
        _args: UpdateArgs<'_, ImageRegistry>,
    ) -> Result<Written<Reading<ImageRegistry>>, BackendError> {
        Err(self.unwritten())
    }
    async fn delete(&self, _args: DeleteArgs<'_>) -> Result<(), BackendError> {
        Err(self.unwritten())
    }
    async fn ownership(&self, _args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        Err(self.unwritten())
    }
}
