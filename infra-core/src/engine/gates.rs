//! The gates: the refusals that come before anything is listed (an unsound plan, a
//! provider with records but no way to reach it, credentials in the wrong account), and
//! the brake, which comes after observation and before any change.

use std::collections::{BTreeMap, BTreeSet};

use super::model::{Decision, Observation, Seen, Slot, row_of};
use super::{ApplyError, Engine, Options};
use crate::{Ledger, LedgerRow, Plan, Repair};

impl Engine {
    /// The refusals that come before anything is listed.
    pub(super) async fn gates(&self, plan: &Plan, ledger: &Ledger) -> Result<(), ApplyError> {
        let fleet = plan.fleet();
        let problems = plan.check();
        if !problems.is_empty() {
            return Err(ApplyError::Unsound { problems });
        }
        let mut rows_by_provider: BTreeMap<&str, usize> = BTreeMap::new();
        for row in &ledger.rows {
            *rows_by_provider.entry(row.provider.as_str()).or_default() += 1;
        }
        for (&provider, &rows) in &rows_by_provider {
            match self.backends.get(provider) {
                None => {
                    return Err(ApplyError::NoBinding {
                        provider: provider.to_owned(),
                        rows,
                    });
                }
                Some(b) => {
                    if let Some(why) = b.unreachable() {
                        return Err(ApplyError::Unreachable {
                            provider: provider.to_owned(),
                            rows,
                            why,
                        });
                    }
                }
            }
        }
        let in_play: BTreeSet<&str> = fleet
            .providers()
            .into_iter()
            .chain(rows_by_provider.keys().copied())
            .collect();
        for provider in in_play {
            let Some(allowed) = fleet.accounts().get(provider) else {
                continue;
            };
            let Some(backend) = self.backends.get(provider) else {
                continue;
            };
            if backend.unreachable().is_some() {
                continue;
            }
            let found = backend
                .account()
                .await
                .map_err(|error| ApplyError::AccountUnknown {
                    provider: provider.to_owned(),
                    error,
                })?;
            if !allowed.contains(&found) {
                return Err(ApplyError::WrongAccount {
                    fleet: fleet.name().to_owned(),
                    provider: provider.to_owned(),
                    found,
                    allowed: allowed.iter().cloned().collect::<Vec<_>>().join(", "),
                });
            }
        }
        Ok(())
    }

    /// Refuses a run that would remove more than half of what the fleet manages from
    /// its records while the fleet still declares something: resources it deletes or
    /// prunes, and recorded resources that read as absent (their rows dropped, or the
    /// resources created again) — the sign of credentials for the wrong account. Exactly
    /// half passes; a resource moved to another region is not counted.
    ///
    /// What the fleet manages is the rows of resources that exist: a row written before
    /// a create (an intent) or marked before a delete counts only when its resource was
    /// seen, since a create that was never made, or a delete that went through, leaves
    /// nothing to manage. Such a row reading as absent is no managed resource gone
    /// missing either: the create never happened, or the delete is confirmed.
    pub(super) fn brake(
        &self,
        plan: &Plan,
        observation: &Observation,
        options: &Options,
    ) -> Result<(), ApplyError> {
        if options.force {
            return Ok(());
        }
        let declares = plan.declares_something();
        let managed = managed(observation);
        if !declares || managed == 0 {
            return Ok(());
        }
        // An orphan whose provider, kind and name are declared in another region is a
        // move, not a loss: the fleet still manages the resource.
        let declared: BTreeSet<(&str, &str, &str)> = observation
            .slots
            .iter()
            .filter(|s| s.index.is_some())
            .map(|s| {
                let r = &s.subject;
                (r.provider.as_str(), r.kind.as_str(), r.name.as_str())
            })
            .collect();
        let moved = |slot: &Slot| {
            let r = &slot.subject;
            slot.index.is_none()
                && declared.contains(&(r.provider.as_str(), r.kind.as_str(), r.name.as_str()))
        };
        let mut deletes = 0;
        let mut absent = 0;
        for slot in &observation.slots {
            if moved(slot) {
                continue;
            }
            // A row written before a create whose outcome is not known, or marked before
            // a delete, is no managed resource gone missing.
            let recorded = || slot.recorded && !provisional(&observation.ledger, slot);
            match slot.decision {
                Decision::Delete | Decision::Prune => deletes += 1,
                Decision::AlreadyAbsent | Decision::Create if recorded() => absent += 1,
                _ => {}
            }
        }
        if (deletes + absent) * 2 > managed {
            return Err(ApplyError::Brake {
                deletes,
                absent,
                managed,
            });
        }
        Ok(())
    }

    /// Refuses a run that would delete or replace a resource protected with
    /// `prevent_destroy`, whatever the reason (a teardown, a line made absent, an
    /// orphan, a field that cannot change in place, `--replace`, a replace cascaded
    /// from another), naming each one. Not lifted by `--force`.
    pub(super) fn protect(&self, plan: &Plan, observation: &Observation) -> Result<(), ApplyError> {
        let fleet = plan.fleet();
        if fleet.protected().is_empty() {
            return Ok(());
        }
        let resources: Vec<(String, &'static str)> = observation
            .slots
            .iter()
            .filter(|s| fleet.is_protected(&s.subject.provider, &s.subject.kind, &s.subject.name))
            .filter_map(|s| destroys(&s.decision).map(|what| (s.subject.to_string(), what)))
            .collect();
        if resources.is_empty() {
            Ok(())
        } else {
            Err(ApplyError::PreventDestroy { resources })
        }
    }
}

/// Whether the slot's row is provisional: an intent, or marked before a delete.
fn provisional(ledger: &Ledger, slot: &Slot) -> bool {
    if ledger.intents.is_empty() && ledger.deleting.is_empty() {
        return false;
    }
    let row = row_of(&slot.subject);
    ledger.is_intent(&row) || ledger.is_deleting(&row)
}

/// How many resources the fleet manages, for the brake: the ledger's rows, less the
/// provisional ones (intents, rows marked before a delete) whose resource was not seen.
fn managed(observation: &Observation) -> usize {
    let ledger = &observation.ledger;
    if ledger.intents.is_empty() && ledger.deleting.is_empty() {
        return ledger.len();
    }
    let seen: BTreeSet<LedgerRow> = observation
        .slots
        .iter()
        .filter(|s| s.recorded && matches!(s.seen, Seen::Present { .. }))
        .map(|s| row_of(&s.subject))
        .collect();
    ledger
        .rows
        .iter()
        .filter(|r| !(ledger.is_intent(r) || ledger.is_deleting(r)) || seen.contains(*r))
        .count()
}

/// What a decision destroys of its resource: `delete`, `prune`, `replace`, or nothing.
pub(super) fn destroys(decision: &Decision) -> Option<&'static str> {
    match decision {
        Decision::Delete => Some("delete"),
        Decision::Prune => Some("prune"),
        Decision::Existing {
            repair: Repair::Replace,
            ..
        } => Some("replace"),
        _ => None,
    }
}
