//! Discover: the ledger rebuilt from the ownership markers found in the clouds.

use std::collections::{BTreeMap, BTreeSet};

use super::{ApplyError, Engine};
use crate::{Ledger, LedgerRow, Marker, Ownership, Plan, with_retries};

impl Engine {
    /// Rebuilds the ledger from ownership markers: every resource in the regions the
    /// fleet uses (and the ledger names) that carries this fleet's marker gets a row.
    pub async fn discover(&self, plan: &Plan) -> Result<Ledger, ApplyError> {
        let fleet = plan.fleet();
        let old = self.store.load_ledger(fleet.name())?;
        self.gates(plan, &old).await?;
        let marker = Marker::new(fleet.name());
        let mut regions: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for r in fleet.resources() {
            regions
                .entry(r.reference().provider)
                .or_default()
                .insert(r.region().to_owned());
        }
        for row in &old.rows {
            if let Some(p) = self.backends.providers().find(|p| *p == row.provider) {
                regions.entry(p).or_default().insert(row.region.clone());
            }
        }
        let mut ledger = Ledger::default();
        for (provider, regions) in regions {
            let Some(backend) = self.backends.get(provider) else {
                continue;
            };
            if backend.unreachable().is_some() {
                continue;
            }
            let caps = backend.capabilities();
            for kind in caps.ownership.iter().copied() {
                for region in &regions {
                    let listed = with_retries(&*self.clock, self.retry, true, || {
                        backend.list(kind, region)
                    })
                    .await
                    .map_err(|error| ApplyError::AccountUnknown {
                        provider: provider.to_owned(),
                        error,
                    })?;
                    for l in listed {
                        let tags = with_retries(&*self.clock, self.retry, true, || {
                            backend.ownership(kind, region, &l.handle)
                        })
                        .await;
                        if let Ok(tags) = tags
                            && marker.verdict(&tags) == Ownership::Ours
                        {
                            ledger.rows.insert(LedgerRow {
                                provider: provider.to_owned(),
                                kind: kind.to_owned(),
                                name: l.name,
                                region: region.clone(),
                            });
                        }
                    }
                }
            }
        }
        self.store.save_ledger(fleet.name(), &ledger)?;
        Ok(ledger)
    }
}
