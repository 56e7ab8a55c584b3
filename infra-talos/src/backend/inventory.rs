//! Read-only lookups the [`Store`](crate::store::Store) trait does not offer: the
//! inventory of machines with their endpoints and identity keys, a machine's plans
//! with the release each binds, and a release's sealed artifact for a machine.
//!
//! The store answers every lookup with a plain `SELECT` on its own tables, outside
//! any transaction (`crate::store`'s inventory reads); nothing here writes.

use crate::contract::plan::PlanState;
use crate::contract::{InstantMs, Revision};
#[cfg(any(feature = "postgres", feature = "sqlite"))]
use crate::store::OnEngine;
use crate::store::{IdentityKey, SealedArtifact, StoreResult};

/// A machine as the inventory records it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InventoryRecord {
    /// The machine's identifier.
    pub id: String,
    /// Its identity key.
    pub identity: IdentityKey,
    /// The Talos cluster ID.
    pub cluster_id: String,
    /// Its own Talos endpoint.
    pub endpoint: String,
    /// Its rollout scope.
    pub rollout_scope: String,
    /// The Talos minor its artifacts are built for.
    pub talos_minor: String,
}

/// A plan as far as finding the plan of a binding needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanRecord {
    /// The plan's identifier.
    pub id: String,
    /// The release it applies.
    pub release: String,
    /// Its state as recorded.
    pub state: PlanState,
    /// The bound baseline revision.
    pub baseline_revision: Revision,
    /// The bound assignment revision.
    pub assignment_revision: u64,
    /// The drift record it binds (a revert).
    pub bound_drift: Option<Revision>,
    /// When it expires.
    pub expires_at: InstantMs,
}

/// Read-only inventory lookups on a store's database.
#[async_trait::async_trait]
pub trait Inventory: Send + Sync {
    /// Every inventoried machine, by identifier.
    async fn machines(&self) -> StoreResult<Vec<InventoryRecord>>;
    /// One machine, `None` when it is not inventoried.
    async fn machine_record(&self, id: &str) -> StoreResult<Option<InventoryRecord>> {
        Ok(self.machines().await?.into_iter().find(|m| m.id == id))
    }
    /// Every plan made for `machine`, oldest first.
    async fn plans_of(&self, machine: &str) -> StoreResult<Vec<PlanRecord>>;
    /// The sealed artifact `release` holds for `machine`.
    async fn artifact(&self, release: &str, machine: &str) -> StoreResult<Option<SealedArtifact>>;
}

/// Every store built on the shared engine answers the lookups from its own tables
/// (`crate::store`).
#[cfg(any(feature = "postgres", feature = "sqlite"))]
#[async_trait::async_trait]
impl<S: OnEngine> Inventory for S {
    async fn machines(&self) -> StoreResult<Vec<InventoryRecord>> {
        self.engine().inventory().await
    }

    async fn plans_of(&self, machine: &str) -> StoreResult<Vec<PlanRecord>> {
        self.engine().plan_records(machine).await
    }

    async fn artifact(&self, release: &str, machine: &str) -> StoreResult<Option<SealedArtifact>> {
        self.engine().release_artifact(release, machine).await
    }
}
