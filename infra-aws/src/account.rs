//! The account check: where the credentials act, from STS.

use std::sync::Arc;

use async_trait::async_trait;
use infra_core::sdk::Account;
use infra_core::sdk::{BackendError, ErrorKind};

use crate::clients::Clients;
use crate::error::classify;

/// The account the credentials act in, from STS `GetCallerIdentity` (in the
/// configuration's own region, or `us-east-1` when it names none).
pub(crate) struct CallerAccount {
    clients: Arc<Clients>,
}

impl CallerAccount {
    /// The check on these clients.
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        CallerAccount { clients }
    }
}

#[async_trait]
impl Account for CallerAccount {
    async fn account(&self) -> Result<String, BackendError> {
        let region = self
            .clients
            .base()
            .region()
            .map(|r| r.to_string())
            .unwrap_or_else(|| "us-east-1".to_owned());
        let clients = self.clients.region(&region);
        let identity = clients
            .sts()
            .get_caller_identity()
            .send()
            .await
            .map_err(|e| classify("sts:GetCallerIdentity", e, &[]))?;
        identity.account().map(str::to_owned).ok_or_else(|| {
            BackendError::new(ErrorKind::Other, "sts:GetCallerIdentity named no account")
        })
    }
}
