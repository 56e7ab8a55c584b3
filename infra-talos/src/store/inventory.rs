//! The inventory lookups the backend reads through
//! [`Inventory`](crate::backend::Inventory), which the [`Store`](super::Store) trait
//! does not offer: every machine with its endpoint and identity key, a machine's plans
//! with the release each binds, and a release's sealed artifact for a machine.
//!
//! Each is one plain `SELECT` on the store's own tables, outside any transaction;
//! nothing here writes. The record types are the backend's.

use crate::backend::{InventoryRecord, PlanRecord};
use crate::contract::{InstantMs, Revision};
use crate::store::common::{db_err, digest_of, identity_key, plan_state_of, u};
use crate::store::engine::SqlStore;
use crate::store::sql::query;
use crate::store::{SealedArtifact, StoreResult};

impl SqlStore {
    /// Every inventoried machine, by identifier.
    pub(crate) async fn inventory(&self) -> StoreResult<Vec<InventoryRecord>> {
        let rows = self
            .pool
            .fetch_all(query(
                "SELECT id, identity_kind, identity_value, cluster_id, endpoint, \
                 rollout_scope, talos_minor FROM machines ORDER BY id",
            ))
            .await
            .map_err(db_err)?;
        rows.iter()
            .map(|r| -> StoreResult<InventoryRecord> {
                let kind: String = r.try_get("identity_kind").map_err(db_err)?;
                Ok(InventoryRecord {
                    id: r.try_get("id").map_err(db_err)?,
                    identity: identity_key(&kind, r.try_get("identity_value").map_err(db_err)?)?,
                    cluster_id: r.try_get("cluster_id").map_err(db_err)?,
                    endpoint: r.try_get("endpoint").map_err(db_err)?,
                    rollout_scope: r.try_get("rollout_scope").map_err(db_err)?,
                    talos_minor: r.try_get("talos_minor").map_err(db_err)?,
                })
            })
            .collect()
    }

    /// Every plan made for `machine`, oldest first (by baseline revision, then
    /// identifier).
    pub(crate) async fn plan_records(&self, machine: &str) -> StoreResult<Vec<PlanRecord>> {
        let rows = self
            .pool
            .fetch_all(
                query(
                    "SELECT id, release_id, state, baseline_revision, assignment_revision, \
                     bound_drift, expires_at_ms FROM plans WHERE machine_id = $1 \
                     ORDER BY baseline_revision, id",
                )
                .bind(machine),
            )
            .await
            .map_err(db_err)?;
        rows.iter()
            .map(|r| -> StoreResult<PlanRecord> {
                let state: String = r.try_get("state").map_err(db_err)?;
                let drift: Option<i64> = r.try_get("bound_drift").map_err(db_err)?;
                Ok(PlanRecord {
                    id: r.try_get("id").map_err(db_err)?,
                    release: r.try_get("release_id").map_err(db_err)?,
                    state: plan_state_of(&state)?,
                    baseline_revision: Revision(u(r
                        .try_get("baseline_revision")
                        .map_err(db_err)?)),
                    assignment_revision: u(r.try_get("assignment_revision").map_err(db_err)?),
                    bound_drift: drift.map(|d| Revision(u(d))),
                    expires_at: InstantMs(u(r.try_get("expires_at_ms").map_err(db_err)?)),
                })
            })
            .collect()
    }

    /// The sealed artifact `release` holds for `machine`, as it was published.
    pub(crate) async fn release_artifact(
        &self,
        release: &str,
        machine: &str,
    ) -> StoreResult<Option<SealedArtifact>> {
        let row = self
            .pool
            .fetch_optional(
                query(
                    "SELECT key_provider, key_id, key_version, ciphertext, digest \
                     FROM artifacts WHERE release_id = $1 AND machine_id = $2",
                )
                .bind(release)
                .bind(machine),
            )
            .await
            .map_err(db_err)?;
        row.map(|r| -> StoreResult<SealedArtifact> {
            let digest: String = r.try_get("digest").map_err(db_err)?;
            Ok(SealedArtifact {
                key_provider: r.try_get("key_provider").map_err(db_err)?,
                key_id: r.try_get("key_id").map_err(db_err)?,
                key_version: u(r.try_get("key_version").map_err(db_err)?),
                ciphertext: r.try_get("ciphertext").map_err(db_err)?,
                digest: digest_of(&digest)?,
            })
        })
        .transpose()
    }
}
