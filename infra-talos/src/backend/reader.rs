//! How the backend reads a machine: the read-only observation client only.

use std::path::Path;
use std::sync::Arc;

use infra_core::{
    engine::Clock,
    sdk::{BackendError, ErrorKind},
};

use crate::connect::{ConnectOptions, NodeAddress, NodeChannel};
use crate::observation::Observation;
use crate::observe::ObservationClient;
use crate::talosconfig::{Credentials, TalosConfig};

use super::inventory::InventoryRecord;

/// Reads a machine at its own endpoint. Implementations only ever read.
#[async_trait::async_trait]
pub trait NodeReader: Send + Sync {
    /// One observation of `machine`. A value the node does not give is missing in the
    /// observation; an error means nothing could be read at all.
    async fn observe(&self, machine: &InventoryRecord) -> Result<Observation, BackendError>;
}

/// A [`NodeReader`] using the `os:admin` credentials of a talosconfig's context, and
/// only the read-only [`ObservationClient`].
pub struct TalosconfigReader {
    credentials: Credentials,
    options: ConnectOptions,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for TalosconfigReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TalosconfigReader")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl TalosconfigReader {
    /// Loads the talosconfig at `path` and uses its current context.
    ///
    /// # Errors
    ///
    /// `Invalid` when the file cannot be read or holds no usable `os:admin` context.
    pub fn load(
        path: &Path,
        options: ConnectOptions,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, BackendError> {
        let credentials = TalosConfig::load(path)
            .and_then(|config| config.context(None))
            .and_then(|context| context.admin_credentials())
            .map_err(|e| BackendError::invalid(e.to_string()))?;
        Ok(Self {
            credentials,
            options,
            clock,
        })
    }
}

#[async_trait::async_trait]
impl NodeReader for TalosconfigReader {
    async fn observe(&self, machine: &InventoryRecord) -> Result<Observation, BackendError> {
        let address = NodeAddress::parse(&machine.endpoint).map_err(|e| {
            BackendError::invalid(format!(
                "machine {} has an endpoint that is not an address: {e}",
                machine.id
            ))
        })?;
        let channel = NodeChannel::open(&self.credentials, &address, &self.options)
            .await
            .map_err(|e| BackendError::new(ErrorKind::Unavailable, e.to_string()))?;
        Ok(ObservationClient::new(&channel).observe(&*self.clock).await)
    }
}
