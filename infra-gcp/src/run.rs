//! The `compute` kind: Cloud Run services. (Being written.)

use std::sync::Arc;

use async_trait::async_trait;
use infra_core::kinds::Compute;
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, KindBackend, ListArgs, Listed, OwnershipArgs, RawTags,
    ReadArgs, Reading, UpdateArgs, Written,
};

use crate::clients::Clients;

/// `Compute` on Google Cloud.
pub(crate) struct RunServices {
    clients: Arc<Clients>,
}

impl RunServices {
    /// The kind, reaching Google Cloud through `clients`.
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        RunServices { clients }
    }

    fn unwritten(&self) -> BackendError {
        let _ = &self.clients;
        BackendError::invalid("not written yet")
    }
}

#[async_trait]
impl KindBackend<Compute> for RunServices {
    async fn list(&self, _args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        Err(self.unwritten())
    }
    async fn read(&self, _args: ReadArgs<'_>) -> Result<Reading<Compute>, BackendError> {
        Err(self.unwritten())
    }
    async fn create(
        &self,
        _args: CreateArgs<'_, Compute>,
    ) -> Result<Written<Reading<Compute>>, BackendError> {
        Err(self.unwritten())
    }
    async fn update(
        &self,
        _args: UpdateArgs<'_, Compute>,
    ) -> Result<Written<Reading<Compute>>, BackendError> {
        Err(self.unwritten())
    }
    async fn delete(&self, _args: DeleteArgs<'_>) -> Result<(), BackendError> {
        Err(self.unwritten())
    }
    async fn ownership(&self, _args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        Err(self.unwritten())
    }
}
