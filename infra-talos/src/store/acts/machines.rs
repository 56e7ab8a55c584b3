//! Machines in the inventory (§6.2, §7.4, §8 invariant 9): adding one with its
//! identity key and import digest, changing its assignment (refused while the
//! scope is held), and freezing or unfreezing its scope.

use crate::contract::Role;
use crate::contract::gate::{self, FreezeAct, FreezeState};
use crate::contract::recovery::{self};
use crate::store::common::*;
use crate::store::engine::SqlStore;
use crate::store::lookups::{holder, installation, lock_machine, require_role, unreleased};
use crate::store::sql::query;
use crate::store::transaction::{Entry, append};
use crate::store::{Actor, IdentityKey, MachineSpec, StoreError, StoreResult};

impl SqlStore {
    /// [`Store::create_machine`](crate::store::Store::create_machine): add a machine with its
    /// identity key (and the digest its import read).
    pub(in crate::store) async fn create_machine(
        &self,
        actor: &Actor,
        spec: MachineSpec,
    ) -> StoreResult<()> {
        let spec = &spec;
        self.transaction(|tx| {
            Box::pin(async move {
                require_role(
                    tx,
                    actor,
                    &[Role::Author, Role::Publisher],
                    "adding a machine",
                )
                .await?;
                let exists = query("SELECT id FROM machines WHERE id = $1")
                    .bind(&spec.id)
                    .fetch_optional(tx)
                    .await?;
                if exists.is_some() {
                    return Err(StoreError::Exists {
                        what: "machine",
                        id: spec.id.clone(),
                    }
                    .into());
                }
                let (kind, value) = match &spec.identity {
                    IdentityKey::SmbiosUuid(v) => ("smbios_uuid", v),
                    IdentityKey::NodeId(v) => ("node_id", v),
                };
                query(
                    "INSERT INTO machines (id, identity_kind, identity_value, \
                     cluster_id, endpoint, rollout_scope, talos_minor) VALUES ($1, \
                     $2, $3, $4, $5, $6, $7)",
                )
                .bind(&spec.id)
                .bind(kind)
                .bind(value)
                .bind(&spec.cluster_id)
                .bind(&spec.endpoint)
                .bind(&spec.rollout_scope)
                .bind(&spec.talos_minor)
                .execute(tx)
                .await?;
                let now = self.store_time(tx).await?;
                append(
                    tx,
                    &spec.id,
                    now,
                    Entry::by(actor, "machine_created")
                        .detail(format!("identity key {kind}, cluster {}", spec.cluster_id)),
                )
                .await?;
                // §7.4: a machine inventoried during recovery starts pre-restore
                // unaccounted, like every scope at entry.
                let inst = installation(tx, true).await?;
                if inst.recovery_mode {
                    query("UPDATE machines SET scope_state = $2 WHERE id = $1")
                        .bind(&spec.id)
                        .bind(scope_text(recovery::inventoried(true)))
                        .execute(tx)
                        .await?;
                }
                if let Some(d) = &spec.import_digest {
                    query("UPDATE machines SET import_digest = $2 WHERE id = $1")
                        .bind(&spec.id)
                        .bind(d.to_hex())
                        .execute(tx)
                        .await?;
                    let detail = format!(
                        "import read digest {d}; an approved adopt plan hands the machine over"
                    );
                    append(
                        tx,
                        &spec.id,
                        now,
                        Entry::by(actor, "machine_imported").detail(detail),
                    )
                    .await?;
                }
                Ok(())
            })
        })
        .await
    }

    /// [`Store::change_assignment`](crate::store::Store::change_assignment): change a machine's
    /// assignment; refused while the scope is held (§8 invariant 9).
    pub(in crate::store) async fn change_assignment(
        &self,
        actor: &Actor,
        machine_id: &str,
    ) -> StoreResult<u64> {
        const ACT: &str = "changing the assignment";
        self.transaction(|tx| {
            Box::pin(async move {
                let machine = lock_machine(tx, machine_id).await?;
                require_role(tx, actor, &[Role::Author, Role::Publisher], ACT).await?;
                let inst = installation(tx, true).await?;
                if let Some(op) = holder(tx, true, machine_id).await? {
                    return Err(refused(
                        ACT,
                        format!("operation {op} holds the machine scope (§8 invariant 9)"),
                    )
                    .into());
                }
                if unreleased(&machine, &inst)? {
                    return Err(refused(ACT, "recovery mode: the scope is not released").into());
                }
                let now = self.store_time(tx).await?;
                let next = machine.assignment_revision + 1;
                append(
                    tx,
                    machine_id,
                    now,
                    Entry::by(actor, "assignment_changed").detail(format!(
                        "assignment revision {} -> {next}",
                        machine.assignment_revision
                    )),
                )
                .await?;
                query("UPDATE machines SET assignment_revision = $2 WHERE id = $1")
                    .bind(machine_id)
                    .bind(next)
                    .execute(tx)
                    .await?;
                Ok(u(next))
            })
        })
        .await
    }

    /// [`Store::freeze`](crate::store::Store::freeze): freeze a machine scope (§6.2).
    pub(in crate::store) async fn freeze(
        &self,
        actor: &Actor,
        machine_id: &str,
        reason: &str,
    ) -> StoreResult<()> {
        self.freeze_act(actor, machine_id, reason, FreezeAct::Freeze)
            .await
    }

    /// [`Store::unfreeze`](crate::store::Store::unfreeze): lift a freeze (§6.2).
    pub(in crate::store) async fn unfreeze(
        &self,
        actor: &Actor,
        machine_id: &str,
        reason: &str,
    ) -> StoreResult<()> {
        self.freeze_act(actor, machine_id, reason, FreezeAct::Unfreeze)
            .await
    }

    /// Freezing and unfreezing (§6.2): the freeze transition the contract allows the
    /// actor's role, refused on a scope still pre-restore unaccounted when lifting
    /// (§7.5).
    async fn freeze_act(
        &self,
        actor: &Actor,
        machine_id: &str,
        reason: &str,
        act: FreezeAct,
    ) -> StoreResult<()> {
        let name = match act {
            FreezeAct::Freeze => "freezing",
            FreezeAct::Unfreeze => "unfreezing",
        };
        self.transaction(|tx| {
            Box::pin(async move {
                let machine = lock_machine(tx, machine_id).await?;
                let allowed = [
                    Role::Author,
                    Role::Publisher,
                    Role::Approver,
                    Role::RecoveryAdmin,
                    Role::Automation,
                ];
                require_role(tx, actor, &allowed, name).await?;
                let state = if machine.frozen {
                    FreezeState::Frozen
                } else {
                    FreezeState::Unfrozen
                };
                let next = gate::freeze_transition(state, act, actor.role, reason)
                    .map_err(|e| refused(name, e.to_string()))?;
                // §7.5: unfreezing is refused on a scope still pre-restore unaccounted;
                // freezing removes authority and is always allowed.
                let inst = installation(tx, true).await?;
                if act == FreezeAct::Unfreeze {
                    let scope = scope_of(&machine.scope_state)?;
                    recovery::permits(scope, recovery::Act::Unfreeze)
                        .map_err(|e| refused(name, e.to_string()))?;
                }
                let now = self.store_time(tx).await?;
                let kind = match act {
                    FreezeAct::Freeze => "frozen",
                    FreezeAct::Unfreeze => "unfrozen",
                };
                let entry =
                    Entry::by(actor, kind).detail(format!("{reason} (epoch {})", inst.epoch));
                append(tx, machine_id, now, entry).await?;
                query("UPDATE machines SET frozen = $2 WHERE id = $1")
                    .bind(machine_id)
                    .bind(next == FreezeState::Frozen)
                    .execute(tx)
                    .await?;
                Ok(())
            })
        })
        .await
    }
}
