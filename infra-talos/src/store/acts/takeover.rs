//! Takeover (§3.4): an operation taken over by another controller instance, in one
//! update conditioned on the generation, so that of two takeovers of one generation
//! only one wins and the previous owner's next attempt fails comparison 7; a takeover
//! may be requested by recovery-admin, who is recorded.

use crate::contract::Role;
use crate::contract::operation::{self, ControllerId, OwnerToken};
use crate::store::common::*;
use crate::store::engine::SqlStore;
use crate::store::lookups::{installation, lock_machine, read_op, require_role};
use crate::store::sql::query;
use crate::store::transaction::{Entry, append};
use crate::store::{Actor, StoreResult};

impl SqlStore {
    /// [`Store::takeover`](crate::store::Store::takeover): take an operation over (§3.4): one
    /// update conditioned on the generation.
    pub(in crate::store) async fn takeover(
        &self,
        op_id: &str,
        expected_generation: u64,
        controller: ControllerId,
    ) -> StoreResult<OwnerToken> {
        self.takeover_requested(op_id, expected_generation, controller, None)
            .await
    }

    /// [`Store::takeover_requested`](crate::store::Store::takeover_requested): take an
    /// operation over at a principal's request (recovery-admin), recording who asked; with
    /// `None`, as `Store::takeover`.
    pub(in crate::store) async fn takeover_requested(
        &self,
        op_id: &str,
        expected_generation: u64,
        controller: ControllerId,
        requested_by: Option<&Actor>,
    ) -> StoreResult<OwnerToken> {
        const ACT: &str = "taking over";
        self.transaction(|tx| {
            Box::pin(async move {
                let machine_id = read_op(tx, op_id).await?.machine_id;
                lock_machine(tx, &machine_id).await?;
                if let Some(actor) = requested_by {
                    require_role(tx, actor, &[Role::RecoveryAdmin], "requesting a takeover")
                        .await?;
                }
                let inst = installation(tx, true).await?;
                let op = read_op(tx, op_id).await?;
                let generation = expected_generation;
                let taken =
                    operation::takeover(op.state, op.owner, generation, controller, inst.epoch)
                        .map_err(|e| refused(ACT, e.to_string()))?;
                let now = self.store_time(tx).await?;
                let mut entry = Entry::token(&taken.owner, "takeover")
                    .op(op_id)
                    .detail(format!("from {} ({})", token_text(&op.owner), op.state));
                if let Some(actor) = requested_by {
                    let by = format!("; requested by {} as {}", actor.id, role_name(actor.role));
                    entry.detail.push_str(&by);
                    entry.requested_by = Some(actor.id.clone());
                }
                let rev = append(tx, &machine_id, now, entry).await?;
                // The fence: one conditional update on the generation.
                let row = query(
                    "UPDATE operations SET owner_controller = $3, \
                     owner_generation = owner_generation + 1, \
                     owner_epoch = $4, last_fact_revision = $5, \
                     state = CASE WHEN state IN ('committed', 'sending', 'verifying') \
                     THEN 'unresolved' ELSE state END \
                     WHERE id = $1 AND owner_generation = $2 \
                     AND state IN ('committed', 'sending', 'verifying', 'unresolved') \
                     RETURNING owner_generation",
                )
                .bind(op_id)
                .bind(i(expected_generation))
                .bind(controller_bytes(controller))
                .bind(inst.epoch.to_bytes().to_vec())
                .bind(rev)
                .fetch_optional(tx)
                .await?
                .ok_or_else(|| refused(ACT, "another takeover won this generation"))?;
                let generation: i64 = row.try_get(0)?;
                Ok(OwnerToken {
                    controller,
                    generation: u(generation),
                    epoch: inst.epoch,
                })
            })
        })
        .await
    }
}
