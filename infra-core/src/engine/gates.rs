//! The gates: the refusals that come before anything is listed (an unsound plan, a
//! provider with records but no way to reach it, credentials in the wrong account), and
//! the brake, which comes after observation and before any change.

use std::collections::{BTreeMap, BTreeSet};

use super::model::{Decision, Observation};
use super::{ApplyError, Engine, Options};
use crate::{Ledger, Plan, Status, with_retries};

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
            let found = with_retries(&*self.clock, self.retry, true, || backend.account())
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

    /// Refuses to delete more than half of the ledger while still declaring something.
    pub(super) fn brake(
        &self,
        plan: &Plan,
        observation: &Observation,
        options: &Options,
    ) -> Result<(), ApplyError> {
        if options.force {
            return Ok(());
        }
        let declares = plan.targets.iter().any(|t| matches!(t, Status::Present(_)));
        let deletes = observation
            .slots
            .iter()
            .filter(|s| matches!(s.decision, Decision::Delete | Decision::Prune))
            .count();
        let managed = observation.ledger.len();
        if declares && managed > 0 && deletes * 2 > managed {
            return Err(ApplyError::Brake { deletes, managed });
        }
        Ok(())
    }
}
