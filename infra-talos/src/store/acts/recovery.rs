//! Recovery mode (§7): entering it (a new epoch, every open operation taken over,
//! every scope's gate shut, §7.2), recovery-admin's step 1 accounting decision over
//! restored scopes (§7.3 step 1 and step 5), marking a scope (step 6), releasing it
//! (step 7), and leaving recovery mode once every scope is released (§7.6). Scope
//! states follow §7.4.

use crate::contract::accounting::{self, DecisionFacts, ExecutorStop, TransportDeadline};
use crate::contract::epoch::Epoch;
use crate::contract::operation::{OperationState, OwnerToken};
use crate::contract::recovery::{self, Dependency, ScopeEvent, ScopeState};
use crate::contract::{InstantMs, Role};
use crate::store::common::*;
use crate::store::engine::SqlStore;
use crate::store::lookups::{
    holder, installation, latest_restoration, lock_all_machines, lock_machine, read_attempts,
    recorded_reads, require_role, set_op_state,
};
use crate::store::sql::{Tx, query};
use crate::store::transaction::{Entry, R, append};
use crate::store::{Actor, RecoveryEntry, ScopeAccounting, StoreError, StoreResult};

/// The longest backup family or identity an entry records.
const MAX_BACKUP_TEXT: usize = 256;

/// The entry's own shape: at least one backup, each family once, no blank or
/// overlong text.
fn check_entry(entry: &RecoveryEntry) -> Result<(), String> {
    if entry.backups.is_empty() {
        return Err("name at least one restored backup (family, identity, when taken)".into());
    }
    let mut families = std::collections::BTreeSet::new();
    for b in &entry.backups {
        for (what, text) in [("family", &b.family), ("backup", &b.backup)] {
            if text.trim().is_empty() || text.len() > MAX_BACKUP_TEXT {
                return Err(format!(
                    "a restored backup's {what} must be 1 to {MAX_BACKUP_TEXT} bytes, not blank"
                ));
            }
        }
        if !families.insert(b.family.as_str()) {
            return Err(format!("the backup family {} is named twice", b.family));
        }
    }
    Ok(())
}

/// Writes the entry's record; `Err` with the reason when a time lies after the
/// entry. Returns the record as the timeline entry states it.
async fn record_entry(
    tx: &mut Tx,
    actor: &Actor,
    entry: &RecoveryEntry,
    epoch: Epoch,
    now: i64,
) -> R<Result<String, String>> {
    let stopped = i(entry.stopped_at.0);
    if stopped > now {
        return Ok(Err(format!(
            "the stop ({stopped}ms) is after the entry ({now}ms): every instance is stopped first"
        )));
    }
    query(
        "INSERT INTO recovery_entries (epoch, entered_at_ms, stopped_at_ms, actor_id, \
         controller) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(epoch.to_bytes().to_vec())
    .bind(now)
    .bind(stopped)
    .bind(&actor.id)
    .bind(controller_bytes(entry.controller))
    .execute(tx)
    .await?;
    let mut restored = Vec::new();
    for b in &entry.backups {
        let taken = i(b.taken_at.0);
        if taken > now {
            return Ok(Err(format!(
                "backup {} of family {} is dated after the entry",
                b.backup, b.family
            )));
        }
        query(
            "INSERT INTO restored_backups (epoch, family, backup, taken_at_ms, age_ms) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(epoch.to_bytes().to_vec())
        .bind(&b.family)
        .bind(&b.backup)
        .bind(taken)
        .bind(now - taken)
        .execute(tx)
        .await?;
        restored.push(format!(
            "{} from {} (age {}s)",
            b.family,
            b.backup,
            (now - taken) / 1000
        ));
    }
    Ok(Ok(format!(
        "restored {}; every pre-restore instance stopped at {stopped}ms",
        restored.join(", ")
    )))
}

impl SqlStore {
    /// [`Store::enter_recovery`](crate::store::Store::enter_recovery): enter recovery mode
    /// (recovery-admin): a new random epoch, every non-terminal operation taken over by
    /// `controller` into it, every scope's gate shut, and the entry's record (§7.2).
    pub(in crate::store) async fn enter_recovery(
        &self,
        actor: &Actor,
        entry: RecoveryEntry,
    ) -> StoreResult<Epoch> {
        const ACT: &str = "entering recovery mode";
        check_entry(&entry).map_err(|reason| refused(ACT, reason))?;
        let controller = entry.controller;
        let entry = &entry;
        let epoch = Epoch::from_bytes(crate::store::random_128()?);
        self.transaction(|tx| {
            Box::pin(async move {
                let machines: Vec<String> = lock_all_machines(tx)
                    .await?
                    .into_iter()
                    .map(|m| m.id)
                    .collect();
                let inst = installation(tx, false).await?;
                require_role(tx, actor, &[Role::RecoveryAdmin], ACT).await?;
                let now = self.store_time(tx).await?;
                let restored = record_entry(tx, actor, entry, epoch, now)
                    .await?
                    .map_err(|reason| refused(ACT, reason))?;
                query(
                    "UPDATE installation SET epoch = $1, recovery_mode = TRUE, \
                     recovery_entered_at_ms = $2, recovery_stopped_at_ms = $3 WHERE id = 1",
                )
                .bind(epoch.to_bytes().to_vec())
                .bind(now)
                .bind(i(entry.stopped_at.0))
                .execute(tx)
                .await?;
                // §7.2 item 4: every scope pre-restore unaccounted (choice §10.19).
                let entered = recovery::transition(ScopeState::Normal, ScopeEvent::Entry)
                    .map_err(|e| refused(ACT, e.to_string()))?;
                query(
                    "UPDATE machines SET released_epoch = NULL, scope_state = $1, \
                     scope_mark_desired = NULL, scope_decision_revision = NULL",
                )
                .bind(scope_text(entered))
                .execute(tx)
                .await?;
                for m in &machines {
                    let detail = format!(
                        "epoch {} replaced by a new epoch; gate shut; {restored}",
                        inst.epoch
                    );
                    append(
                        tx,
                        m,
                        now,
                        Entry::by(actor, "recovery_entry").detail(detail),
                    )
                    .await?;
                    let token = OwnerToken {
                        controller,
                        generation: 0,
                        epoch,
                    };
                    take_over_at_entry(tx, m, token, now).await?;
                }
                Ok(epoch)
            })
        })
        .await
    }

    /// [`Store::release_scope`](crate::store::Store::release_scope): release a scope in the
    /// present epoch (recovery-admin, §7.3 step 7).
    pub(in crate::store) async fn release_scope(
        &self,
        actor: &Actor,
        machine_id: &str,
    ) -> StoreResult<()> {
        const ACT: &str = "releasing a scope";
        self.transaction(|tx| {
            Box::pin(async move {
                let machine = lock_machine(tx, machine_id).await?;
                let inst = installation(tx, true).await?;
                require_role(tx, actor, &[Role::RecoveryAdmin], ACT).await?;
                if !inst.recovery_mode {
                    return Err(refused(ACT, "recovery mode is not in force").into());
                }
                if let Some(op) = holder(tx, true, machine_id).await? {
                    return Err(
                        refused(ACT, format!("operation {op} still holds the scope")).into(),
                    );
                }
                // §7.4: only a ready scope is released, and only while Desired is the
                // release its mark checked (§7.3 step 7, invariant 13).
                let state = scope_of(&machine.scope_state)?;
                let desired_matches_mark = machine.desired_release == machine.scope_mark_desired;
                let next = recovery::transition(
                    state,
                    ScopeEvent::Release {
                        desired_matches_mark,
                    },
                )
                .map_err(|e| refused(ACT, e.to_string()))?;
                let now = self.store_time(tx).await?;
                append(
                    tx,
                    machine_id,
                    now,
                    Entry::by(actor, "scope_released")
                        .detail(format!("released in epoch {}", inst.epoch)),
                )
                .await?;
                query("UPDATE machines SET released_epoch = $2, scope_state = $3 WHERE id = $1")
                    .bind(machine_id)
                    .bind(inst.epoch.to_bytes().to_vec())
                    .bind(scope_text(next))
                    .execute(tx)
                    .await?;
                Ok(())
            })
        })
        .await
    }

    /// [`Store::leave_recovery`](crate::store::Store::leave_recovery): leave recovery mode once
    /// every scope is released (§7.6).
    pub(in crate::store) async fn leave_recovery(&self, actor: &Actor) -> StoreResult<()> {
        const ACT: &str = "leaving recovery mode";
        self.transaction(|tx| {
            Box::pin(async move {
                let machines = lock_all_machines(tx).await?;
                let inst = installation(tx, false).await?;
                require_role(tx, actor, &[Role::RecoveryAdmin], ACT).await?;
                if !inst.recovery_mode {
                    return Err(refused(ACT, "recovery mode is not in force").into());
                }
                for m in &machines {
                    let state = scope_of(&m.scope_state)?;
                    recovery::transition(
                        state,
                        ScopeEvent::Exit {
                            every_scope_released: true,
                        },
                    )
                    .map_err(|e| refused(ACT, format!("scope {}: {e}", m.id)))?;
                }
                let now = self.store_time(tx).await?;
                query("UPDATE installation SET recovery_mode = FALSE WHERE id = 1")
                    .execute(tx)
                    .await?;
                query("UPDATE machines SET scope_state = $1")
                    .bind(scope_text(ScopeState::Normal))
                    .execute(tx)
                    .await?;
                for m in &machines {
                    let detail = "scope state: released → normal";
                    let entry = Entry::by(actor, "recovery_left").detail(detail);
                    append(tx, &m.id, now, entry).await?;
                }
                Ok(())
            })
        })
        .await
    }

    /// [`Store::account_scopes`](crate::store::Store::account_scopes): recovery-admin's §7.3
    /// step 1 decision over pre-restore unaccounted scopes: the §5.2 conditions per scope, with
    /// the recorded entry standing for every pre-restore instance's stop and the deployment's
    /// maximum transport deadline for an erased attempt's; all pass or nothing is recorded.
    pub(in crate::store) async fn account_scopes(
        &self,
        actor: &Actor,
        request: ScopeAccounting,
    ) -> StoreResult<()> {
        const ACT: &str = "accounting restored scopes";
        let mut ids = request.machines.clone();
        ids.sort();
        ids.dedup();
        if ids.is_empty() {
            return Err(refused(ACT, "name at least one machine scope"));
        }
        let (ids, request) = (&ids, &request);
        self.transaction(|tx| {
            Box::pin(async move {
                let mut machines = Vec::new();
                for id in ids {
                    machines.push(lock_machine(tx, id).await?);
                }
                let inst = installation(tx, true).await?;
                require_role(tx, actor, &[Role::RecoveryAdmin], ACT).await?;
                // The recorded stop of the pre-restore instances (§7.3 step 1); an
                // entry made before stops were recorded counts from its own time.
                let entered = match (
                    inst.recovery_mode,
                    inst.recovery_stopped_at_ms.or(inst.recovery_entered_at_ms),
                ) {
                    (true, Some(at)) => at,
                    _ => return Err(refused(ACT, "recovery mode is not in force").into()),
                };
                for m in &machines {
                    // Only a pre-restore unaccounted scope takes the decision (§7.4).
                    let decision = ScopeEvent::AccountingDecision {
                        restored_operation_holds_scope: false,
                    };
                    recovery::transition(scope_of(&m.scope_state)?, decision)
                        .map_err(|e| refused(ACT, format!("scope {}: {e}", m.id)))?;
                }
                let now = self.store_time(tx).await?;
                let mut reads = Vec::new();
                for m in &machines {
                    reads.push(recorded_reads(tx, &m.id).await?);
                }
                let facts: Vec<DecisionFacts<'_>> = reads
                    .iter()
                    .map(|r| DecisionFacts {
                        decider: actor.role,
                        stop: ExecutorStop::StoppedForRestore {
                            at: InstantMs(u(entered)),
                        },
                        deadline: TransportDeadline::ErasedByRestore {
                            max_transport_deadline: self.settings.max_transport_deadline,
                        },
                        settle_floor: request.settle_floor,
                        reads: r,
                        now: InstantMs(u(now)),
                        version_change_explanation: request.explanation.as_deref(),
                    })
                    .collect();
                let decisions = accounting::check_joint_decision(&facts).map_err(|e| {
                    let scope = ids.get(e.index).map_or("?", String::as_str);
                    StoreError::AccountingRefused {
                        condition: e.refusal.condition(),
                        reason: format!("scope {scope}: {}", e.refusal),
                    }
                })?;
                for (m, decision) in machines.iter().zip(&decisions) {
                    self.account_scope(tx, actor, m, decision, request, now)
                        .await?;
                }
                Ok(())
            })
        })
        .await
    }

    /// One scope of a §7.3 step 1 decision that passed: the entry, every restored
    /// attempt with no answer from the node accounted by it, every restored
    /// operation with no attempt cancelled (§7.3 step 5: the decision covers any
    /// attempt the restore erased), and the scope moved on (§7.4).
    async fn account_scope(
        &self,
        tx: &mut Tx,
        actor: &Actor,
        machine: &MachineRow,
        decision: &accounting::Decision,
        request: &ScopeAccounting,
        now: i64,
    ) -> R<()> {
        let detail = format!(
            "the scope's step 1 decision after the restore (a judgement, not proof): \
             {decision}; settle floor {}; explanation: {}",
            request.settle_floor,
            request.explanation.as_deref().unwrap_or("none"),
        );
        let entry = Entry::by(actor, "accounting").detail(detail);
        let rev = append(tx, &machine.id, now, entry).await?;
        let restored = query(
            "SELECT id FROM operations WHERE machine_id = $1 AND restored \
             AND state IN ('committed', 'sending', 'verifying', 'unresolved') ORDER BY id",
        )
        .bind(&machine.id)
        .fetch_all(tx)
        .await?;
        for row in &restored {
            let op: String = row.try_get("id")?;
            let attempts = read_attempts(tx, &op).await?;
            if attempts.is_empty() {
                append(
                    tx,
                    &machine.id,
                    now,
                    Entry::by(actor, "cancelled").op(&op).detail(
                        "restored with no attempt: ends cancelled once its scope is accounted \
                         (§7.3 step 5); nothing was sent by this controller",
                    ),
                )
                .await?;
                set_op_state(tx, &op, OperationState::Cancelled).await?;
                continue;
            }
            for a in attempts
                .iter()
                .filter(|a| !a.response.from_target() && !a.accounted_by_decision)
            {
                query(
                    "UPDATE attempts SET accounted_by_decision = TRUE, decision_revision = $3 \
                     WHERE operation_id = $1 AND attempt_no = $2",
                )
                .bind(&op)
                .bind(a.attempt_no)
                .bind(rev)
                .execute(tx)
                .await?;
            }
        }
        let holds = holder(tx, true, &machine.id).await?.is_some();
        let next = recovery::transition(
            scope_of(&machine.scope_state)?,
            ScopeEvent::AccountingDecision {
                restored_operation_holds_scope: holds,
            },
        )
        .map_err(|e| refused("accounting restored scopes", e.to_string()))?;
        query("UPDATE machines SET scope_state = $2, scope_decision_revision = $3 WHERE id = $1")
            .bind(&machine.id)
            .bind(scope_text(next))
            .bind(rev)
            .execute(tx)
            .await?;
        Ok(())
    }

    /// [`Store::mark_scope`](crate::store::Store::mark_scope): recovery-admin's mark (§7.3 step
    /// 6) from the scope's latest restoration observation and the caller's step 3 dependency
    /// check (`missing`, the first dependency it found missing); returns the state the evidence
    /// supports.
    pub(in crate::store) async fn mark_scope(
        &self,
        actor: &Actor,
        machine_id: &str,
        missing: Option<Dependency>,
    ) -> StoreResult<ScopeState> {
        const ACT: &str = "marking a scope";
        self.transaction(|tx| {
            Box::pin(async move {
                let machine = lock_machine(tx, machine_id).await?;
                let inst = installation(tx, true).await?;
                require_role(tx, actor, &[Role::RecoveryAdmin], ACT).await?;
                if !inst.recovery_mode {
                    return Err(refused(ACT, "recovery mode is not in force").into());
                }
                let latest = latest_restoration(tx, machine_id).await?;
                let facts = recovery::MarkFacts {
                    operation_holds_scope: holder(tx, true, machine_id).await?.is_some(),
                    reading: restoration_reading(
                        &machine,
                        latest.as_ref(),
                        machine.scope_decision_revision,
                    ),
                    missing,
                };
                let next =
                    recovery::transition(scope_of(&machine.scope_state)?, ScopeEvent::Mark(facts))
                        .map_err(|e| refused(ACT, e.to_string()))?;
                let now = self.store_time(tx).await?;
                append(
                    tx,
                    machine_id,
                    now,
                    Entry::by(actor, "scope_marked").detail(format!(
                        "marked {next} on restoration observation {}, Desired {}",
                        latest
                            .as_ref()
                            .map_or_else(|| "none".to_owned(), |o| format!("r{}", o.basis)),
                        machine.desired_release.as_deref().unwrap_or("none"),
                    )),
                )
                .await?;
                query(
                    "UPDATE machines SET scope_state = $2, scope_mark_desired = $3 WHERE id = $1",
                )
                .bind(machine_id)
                .bind(scope_text(next))
                .bind(&machine.desired_release)
                .execute(tx)
                .await?;
                Ok(next)
            })
        })
        .await
    }
}

/// Every operation of `machine` holding its scope, taken over at recovery-mode entry
/// (§7.2) by `token`'s controller into its epoch: unresolved, marked restored.
async fn take_over_at_entry(tx: &mut Tx, machine: &str, token: OwnerToken, now: i64) -> R<()> {
    let ops = query(
        "SELECT id, owner_generation, state FROM operations WHERE machine_id = $1 \
         AND state IN ('committed', 'sending', 'verifying', 'unresolved')",
    )
    .bind(machine)
    .fetch_all(tx)
    .await?;
    for o in &ops {
        let id: String = o.try_get("id")?;
        let entry = Entry::token(&token, "takeover")
            .op(&id)
            .detail("taken over at recovery-mode entry");
        let rev = append(tx, machine, now, entry).await?;
        query(
            "UPDATE operations SET owner_controller = $2, \
             owner_generation = owner_generation + 1, owner_epoch = $3, \
             state = 'unresolved', restored = TRUE, last_fact_revision = $4 \
             WHERE id = $1",
        )
        .bind(&id)
        .bind(controller_bytes(token.controller))
        .bind(token.epoch.to_bytes().to_vec())
        .bind(rev)
        .execute(tx)
        .await?;
    }
    Ok(())
}
