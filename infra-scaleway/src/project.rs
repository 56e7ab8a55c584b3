//! The account check: the configured project, confirmed by Scaleway's Account API.
//!
//! The engine asks once per run, before anything is listed, and compares the answer
//! with the accounts the fleet names (`account::<Scaleway>("<project id>")`). Asking
//! Scaleway rather than repeating the configuration proves that the key works and can
//! see the project: a key of another project is refused here, before any listing.

use std::sync::Arc;

use async_trait::async_trait;
use infra_core::sdk::{Account, BackendError, ErrorKind};

use crate::clients::Clients;

/// [`Account`]: `GET /account/v3/projects/{project_id}`.
pub(crate) struct ProjectAccount {
    clients: Arc<Clients>,
}

impl ProjectAccount {
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        ProjectAccount { clients }
    }
}

#[async_trait]
impl Account for ProjectAccount {
    async fn account(&self) -> Result<String, BackendError> {
        let project = self.clients.project().await.map_err(|e| match e.kind {
            // A project the key cannot see is not "no account": it is a refusal.
            ErrorKind::NotFound | ErrorKind::Invalid if e.code.as_deref() == Some("not_found") => {
                BackendError::new(
                    ErrorKind::Denied,
                    format!(
                        "the project {} does not exist or this key cannot see it: {}",
                        self.clients.project_id(),
                        e.message
                    ),
                )
            }
            _ => e,
        })?;
        if project.id != self.clients.project_id() {
            return Err(BackendError::new(
                ErrorKind::Other,
                format!(
                    "Scaleway answered project {} when asked for {}",
                    project.id,
                    self.clients.project_id()
                ),
            ));
        }
        Ok(project.id)
    }
}

#[cfg(test)]
#[path = "recorded/project.rs"]
mod recorded;
