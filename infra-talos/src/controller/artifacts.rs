//! Where the executor finds the sealed artifact a plan binds.

use std::collections::HashMap;
use std::sync::RwLock;

use crate::digest::Digest;
use crate::keys::SealedArtifact;
use crate::store::PlanView;

use super::ExecutorError;

/// Finds the sealed artifact a plan binds. The executor opens it only after checking
/// that its recorded digest is the plan's artifact digest; the key provider then
/// verifies the plaintext against that digest.
#[async_trait::async_trait]
pub trait ArtifactSource: Send + Sync {
    /// The sealed artifact bound by `plan`.
    async fn sealed_artifact(&self, plan: &PlanView) -> Result<SealedArtifact, ExecutorError>;
}

/// Sealed artifacts held in memory, found by machine and artifact digest.
#[derive(Debug, Default)]
pub struct ArtifactShelf {
    items: RwLock<HashMap<(String, Digest), SealedArtifact>>,
}

impl ArtifactShelf {
    /// An empty shelf.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps `sealed` as `machine`'s artifact with its recorded digest.
    pub fn put(&self, machine: impl Into<String>, sealed: SealedArtifact) {
        self.items
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert((machine.into(), sealed.digest), sealed);
    }
}

#[async_trait::async_trait]
impl ArtifactSource for ArtifactShelf {
    async fn sealed_artifact(&self, plan: &PlanView) -> Result<SealedArtifact, ExecutorError> {
        self.items
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(plan.machine.clone(), plan.artifact_digest))
            .cloned()
            .ok_or_else(|| ExecutorError::ArtifactMissing {
                plan: plan.id.clone(),
            })
    }
}
