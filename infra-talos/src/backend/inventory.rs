//! Read-only lookups the [`Store`](crate::store::Store) trait does not offer: the
//! inventory of machines with their endpoints and identity keys, a machine's plans
//! with the release each binds, and a release's sealed artifact for a machine.
//!
//! Every lookup is a plain `SELECT` on the store's own tables, in its own
//! transaction-free read; nothing here writes.

use crate::contract::plan::PlanState;
use crate::contract::{InstantMs, Revision};
use crate::digest::Digest;
use crate::store::{IdentityKey, SealedArtifact, StoreError, StoreResult};

/// A machine as the inventory records it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
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

fn db(e: impl std::fmt::Display) -> StoreError {
    StoreError::Database(e.to_string())
}

fn identity(kind: &str, value: String) -> StoreResult<IdentityKey> {
    match kind {
        "smbios_uuid" => Ok(IdentityKey::SmbiosUuid(value)),
        "node_id" => Ok(IdentityKey::NodeId(value)),
        other => Err(db(format!("unknown identity kind {other:?}"))),
    }
}

fn plan_state(name: &str) -> StoreResult<PlanState> {
    PlanState::ALL
        .into_iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| db(format!("unknown plan state {name:?}")))
}

fn unsigned(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

macro_rules! inventory_for {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl Inventory for $store {
            async fn machines(&self) -> StoreResult<Vec<InventoryRecord>> {
                use sqlx::Row as _;
                let rows = sqlx::query(
                    "SELECT id, identity_kind, identity_value, cluster_id, endpoint, \
                     rollout_scope, talos_minor FROM machines ORDER BY id",
                )
                .fetch_all(self.pool())
                .await
                .map_err(db)?;
                rows.iter()
                    .map(|r| -> StoreResult<InventoryRecord> {
                        let kind: String = r.try_get("identity_kind").map_err(db)?;
                        Ok(InventoryRecord {
                            id: r.try_get("id").map_err(db)?,
                            identity: identity(&kind, r.try_get("identity_value").map_err(db)?)?,
                            cluster_id: r.try_get("cluster_id").map_err(db)?,
                            endpoint: r.try_get("endpoint").map_err(db)?,
                            rollout_scope: r.try_get("rollout_scope").map_err(db)?,
                            talos_minor: r.try_get("talos_minor").map_err(db)?,
                        })
                    })
                    .collect()
            }

            async fn plans_of(&self, machine: &str) -> StoreResult<Vec<PlanRecord>> {
                use sqlx::Row as _;
                let rows = sqlx::query(
                    "SELECT id, release_id, state, baseline_revision, assignment_revision, \
                     bound_drift, expires_at_ms FROM plans WHERE machine_id = $1 \
                     ORDER BY baseline_revision, id",
                )
                .bind(machine)
                .fetch_all(self.pool())
                .await
                .map_err(db)?;
                rows.iter()
                    .map(|r| -> StoreResult<PlanRecord> {
                        let state: String = r.try_get("state").map_err(db)?;
                        let drift: Option<i64> = r.try_get("bound_drift").map_err(db)?;
                        Ok(PlanRecord {
                            id: r.try_get("id").map_err(db)?,
                            release: r.try_get("release_id").map_err(db)?,
                            state: plan_state(&state)?,
                            baseline_revision: Revision(unsigned(
                                r.try_get("baseline_revision").map_err(db)?,
                            )),
                            assignment_revision: unsigned(
                                r.try_get("assignment_revision").map_err(db)?,
                            ),
                            bound_drift: drift.map(|d| Revision(unsigned(d))),
                            expires_at: InstantMs(unsigned(
                                r.try_get("expires_at_ms").map_err(db)?,
                            )),
                        })
                    })
                    .collect()
            }

            async fn artifact(
                &self,
                release: &str,
                machine: &str,
            ) -> StoreResult<Option<SealedArtifact>> {
                use sqlx::Row as _;
                let row = sqlx::query(
                    "SELECT key_provider, key_id, key_version, ciphertext, digest \
                     FROM artifacts WHERE release_id = $1 AND machine_id = $2",
                )
                .bind(release)
                .bind(machine)
                .fetch_optional(self.pool())
                .await
                .map_err(db)?;
                row.map(|r| -> StoreResult<SealedArtifact> {
                    let digest: String = r.try_get("digest").map_err(db)?;
                    Ok(SealedArtifact {
                        key_provider: r.try_get("key_provider").map_err(db)?,
                        key_id: r.try_get("key_id").map_err(db)?,
                        key_version: unsigned(r.try_get("key_version").map_err(db)?),
                        ciphertext: r.try_get("ciphertext").map_err(db)?,
                        digest: digest
                            .parse::<Digest>()
                            .map_err(|_| db("a stored digest is not 64 hex digits"))?,
                    })
                })
                .transpose()
            }
        }
    };
}

#[cfg(feature = "sqlite")]
inventory_for!(crate::store::sqlite::SqliteStore);
#[cfg(feature = "postgres")]
inventory_for!(crate::store::postgres::PgStore);
