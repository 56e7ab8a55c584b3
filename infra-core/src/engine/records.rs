//! What a run writes to the records: the ledger rows of what it adopts, intends,
//! deletes and forgets, and the observation cache.

use std::collections::BTreeMap;
use std::sync::Arc;

use foldhash::HashMapExt as _;

use super::Engine;
use super::model::{Decision, Observation, Seen, Slot, Target, row_of};
use crate::backend::Sighting;
use crate::{ApplyResult, CacheEntry, Ledger, LedgerRow, RecordError, Step};

/// The cached observations a run read, by provider and kind.
type Caches = BTreeMap<(String, String), Arc<Vec<CacheEntry>>>;

/// The ledger before any call: what exists and is ours is adopted (recorded even when
/// nothing has to change), a row is written before every create (so that a run killed
/// between the call and its record finds the resource next time instead of creating a
/// twin or leaking it), and forgotten rows are dropped.
pub(super) fn with_intents(observation: &Observation) -> Ledger {
    let mut ledger = Ledger::clone(&observation.ledger);
    for row in &observation.forgotten {
        ledger.remove(row);
    }
    for slot in &observation.slots {
        let row = row_of(&slot.subject);
        match slot.decision {
            Decision::Create => {
                // A row marked before a delete and found absent: the delete is
                // confirmed, and the row is now the intent of a new create.
                ledger.deleting.remove(&row);
                ledger.intents.insert(row.clone());
                ledger.rows.insert(row);
            }
            Decision::Existing { .. } => {
                // Found in place: no longer a mere intent, nor a delete that may have
                // been sent; and declared by name, so a row `discover` adopted is
                // confirmed.
                ledger.intents.remove(&row);
                ledger.deleting.remove(&row);
                if matches!(slot.target, Target::Present(_)) {
                    ledger.discovered.remove(&row);
                }
                ledger.rows.insert(row);
            }
            _ => {}
        }
    }
    ledger
}

/// The ledger after the calls: rows of what was deleted or found already gone are
/// dropped, and so are the intents of creates that certainly made nothing. A row this
/// run marked before its delete keeps the mark only while the delete may have been
/// sent and is not confirmed (`marks`).
pub(super) fn settle_ledger(
    ledger: &mut Ledger,
    observation: &Observation,
    result: &ApplyResult,
    marks: &BTreeMap<LedgerRow, bool>,
) {
    for (row, &keep) in marks {
        if keep && ledger.rows.contains(row) {
            ledger.deleting.insert(row.clone());
        } else {
            ledger.deleting.remove(row);
        }
    }
    for p in &result.pruned {
        ledger.remove(&row_of(&p.resource));
    }
    for a in &result.applied {
        // Made (or found): its row is no longer an intent, nor marked for a delete (a
        // replace's old resource is gone, and the row names the new one).
        let row = row_of(&a.resource);
        ledger.intents.remove(&row);
        ledger.deleting.remove(&row);
    }
    for f in &result.failed {
        if f.step == Step::Create && !f.error.may_have_been_sent {
            ledger.remove(&row_of(&f.resource));
        }
    }
    for row in &observation.forgotten {
        ledger.remove(row);
    }
}

impl Engine {
    /// Gives each declared resource seen present what this fleet last wrote of the
    /// fields its cloud does not report, from the cache (when the cache holds the same
    /// resource, by handle): a declared change to such a field is then seen. Without
    /// a cache, nothing is recalled, and such a change waits for another change.
    pub(super) fn recall(caches: &Caches, slots: &mut [Slot]) {
        let mut pairs: BTreeMap<(&'static str, &'static str), Vec<usize>> = BTreeMap::new();
        for (i, slot) in slots.iter().enumerate() {
            if slot.index.is_some() && matches!(slot.seen, Seen::Present { .. }) {
                pairs.entry((slot.provider, slot.kind)).or_default().push(i);
            }
        }
        for ((provider, kind), members) in pairs {
            let Some(entries) = caches.get(&(provider.to_owned(), kind.to_owned())) else {
                continue;
            };
            if entries.iter().all(|e| e.written.is_empty()) {
                continue;
            }
            // Looked up, not searched: a search per resource made a plan of a large
            // fleet cost the square of its size.
            // (Hashed with foldhash: the records choose these keys, not a cloud.)
            let mut by_resource: foldhash::HashMap<(&str, &str, &str), usize> =
                foldhash::HashMap::with_capacity(entries.len());
            for (at, e) in entries.iter().enumerate() {
                by_resource
                    .entry((e.name.as_str(), e.region.as_str(), e.handle.as_str()))
                    .or_insert(at);
            }
            for i in members {
                let slot = &mut slots[i];
                let Seen::Present { sighting, .. } = &mut slot.seen else {
                    continue;
                };
                let key = (
                    slot.subject.name.as_str(),
                    slot.subject.region.as_str(),
                    sighting.handle.as_str(),
                );
                if let Some(&at) = by_resource.get(&key) {
                    sighting.recall_entry(entries, at);
                }
            }
        }
    }

    /// The handle the cache holds for each slot's resource (by slot), for a recorded
    /// resource its list does not show: it is read by that handle before it is called
    /// absent.
    pub(super) fn cached_handles<'c>(caches: &'c Caches, slots: &[Slot]) -> Vec<Option<&'c str>> {
        // Hashed with foldhash: the records choose these keys, not a cloud.
        let mut by_resource: foldhash::HashMap<(&str, &str, &str, &str), &str> =
            foldhash::HashMap::new();
        if !slots.iter().any(|s| s.recorded) {
            return vec![None; slots.len()];
        }
        by_resource.reserve(caches.values().map(|entries| entries.len()).sum());
        for ((provider, kind), entries) in caches {
            for e in entries.iter() {
                by_resource.insert(
                    (
                        provider.as_str(),
                        kind.as_str(),
                        e.name.as_str(),
                        e.region.as_str(),
                    ),
                    e.handle.as_str(),
                );
            }
        }
        slots
            .iter()
            .map(|slot| {
                if !slot.recorded {
                    return None;
                }
                let key = (
                    slot.provider,
                    slot.kind,
                    slot.subject.name.as_str(),
                    slot.subject.region.as_str(),
                );
                by_resource.get(&key).copied()
            })
            .collect()
    }

    /// Writes the observation cache: one entry per resource that exists and is ours, by
    /// provider and kind; a resource this run did not look at (left out by the caller,
    /// or not observed) keeps the entry it had; pairs left empty (and pairs no longer in
    /// play) lose their file.
    pub(super) fn save_cache<'s>(
        &self,
        fleet: &str,
        slots: impl Iterator<Item = (&'s Slot, Option<&'s Sighting>)>,
    ) -> Result<(), RecordError> {
        let mut pairs: BTreeMap<(String, String), Vec<CacheEntry>> = BTreeMap::new();
        let mut unseen: BTreeMap<(String, String), Vec<(&str, &str)>> = BTreeMap::new();
        for (slot, sighting) in slots {
            let pair = (slot.provider.to_owned(), slot.kind.to_owned());
            let entries = pairs.entry(pair.clone()).or_default();
            if let Some(sighting) = sighting {
                entries.push(CacheEntry {
                    name: slot.subject.name.clone(),
                    region: slot.subject.region.clone(),
                    handle: sighting.handle.clone(),
                    observed: sighting.observed_json().clone(),
                    written: sighting.recalled().clone(),
                });
            } else if matches!(slot.seen, Seen::Unobserved(_)) {
                unseen
                    .entry(pair)
                    .or_default()
                    .push((slot.subject.name.as_str(), slot.subject.region.as_str()));
            }
        }
        for ((provider, kind), members) in unseen {
            let old = self.store.load_cache(fleet, &provider, &kind)?;
            let kept = old
                .into_iter()
                .filter(|e| members.contains(&(e.name.as_str(), e.region.as_str())));
            pairs.entry((provider, kind)).or_default().extend(kept);
        }
        for (provider, kind) in self.store.cached_pairs(fleet)? {
            pairs.entry((provider, kind)).or_default();
        }
        for ((provider, kind), entries) in pairs {
            self.store.save_cache(fleet, &provider, &kind, &entries)?;
        }
        Ok(())
    }
}
