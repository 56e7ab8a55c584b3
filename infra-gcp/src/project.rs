//! The project check: the project the configuration names, confirmed by Resource
//! Manager before anything is listed.
//!
//! The engine asks once per run and compares the answer with the accounts the fleet
//! names (`account::<Gcp>("my-project")`): a fleet of another project is refused
//! before any call reads or writes a resource. Asking Resource Manager
//! (`projects.get`) rather than echoing the configuration proves the credentials work
//! and can see the project; a project they cannot see answers `Denied` (Google answers
//! 403 for a project that does not exist, too), never an empty fleet.

use std::sync::Arc;

use async_trait::async_trait;
use infra_core::sdk::{Account, BackendError, ErrorKind};

use crate::clients::Clients;
use crate::error::{NOT_FOUND, classify};

/// The configured project, as Resource Manager knows it.
pub(crate) struct ProjectAccount {
    clients: Arc<Clients>,
}

impl ProjectAccount {
    /// The check on these clients.
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        ProjectAccount { clients }
    }
}

/// The number of the configured project: Resource Manager names a project
/// `projects/{number}`. Service agents (the Pub/Sub one) are named by it.
pub(crate) async fn number(clients: &Clients) -> Result<String, BackendError> {
    const WHAT: &str = "resourcemanager:projects.get";
    let configured = clients.project();
    let project = clients
        .projects()
        .await?
        .get_project()
        .set_name(format!("projects/{configured}"))
        .send()
        .await
        .map_err(|e| classify(WHAT, e, &[]))?;
    match project.name.strip_prefix("projects/") {
        Some(number) if !number.is_empty() && number.chars().all(|c| c.is_ascii_digit()) => {
            Ok(number.to_owned())
        }
        _ => Err(BackendError::new(
            ErrorKind::Other,
            format!(
                "{WHAT} of {configured} answered no project number (its name is {:?})",
                project.name
            ),
        )),
    }
}

#[async_trait]
impl Account for ProjectAccount {
    async fn account(&self) -> Result<String, BackendError> {
        let configured = self.clients.project();
        let project = self
            .clients
            .projects()
            .await?
            .get_project()
            .set_name(format!("projects/{configured}"))
            .send()
            .await
            .map_err(
                |e| match classify("resourcemanager:projects.get", e, NOT_FOUND) {
                    e if e.kind == ErrorKind::NotFound => BackendError::invalid(format!(
                        "the configured project {configured} does not exist: {}",
                        e.message
                    )),
                    e => e,
                },
            )?;
        if project.project_id.is_empty() {
            return Err(BackendError::new(
                ErrorKind::Other,
                format!("resourcemanager:projects.get of {configured} named no project id"),
            ));
        }
        if project.project_id != configured {
            return Err(BackendError::new(
                ErrorKind::Other,
                format!(
                    "resourcemanager:projects.get of {configured} answered project {}",
                    project.project_id
                ),
            ));
        }
        Ok(project.project_id)
    }
}
