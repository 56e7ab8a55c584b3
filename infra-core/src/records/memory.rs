//! Records in memory.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::{
    CacheEntry, Ledger, LedgerProgress, LockError, LockGuard, LockHolder, RecordError, RecordStore,
    Records,
};

/// A list of cached observations' fleet, provider and kind.
type CacheKey = (String, String, String);

/// Records in memory, for tests and for runs that keep nothing.
///
/// Each ledger and each list of cached observations is kept shared: a run reading its
/// records ([`RecordStore::load_records`]) shares them instead of copying them, and a
/// write replaces them (or copies them first while a run still holds them).
#[derive(Debug, Default)]
pub struct MemoryStore {
    ledgers: Mutex<BTreeMap<String, Arc<Ledger>>>,
    caches: Mutex<BTreeMap<CacheKey, Arc<Vec<CacheEntry>>>>,
    locks: Arc<Mutex<BTreeMap<String, LockHolder>>>,
}

/// Releases a memory store's lock when dropped.
struct Release {
    locks: Arc<Mutex<BTreeMap<String, LockHolder>>>,
    fleet: String,
    id: String,
}

impl Drop for Release {
    fn drop(&mut self) {
        let mut locks = self.locks.lock().expect("store lock");
        if locks.get(&self.fleet).is_some_and(|h| h.id == self.id) {
            locks.remove(&self.fleet);
        }
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl RecordStore for MemoryStore {
    fn load_ledger(&self, fleet: &str) -> Result<Ledger, RecordError> {
        Ok(self
            .ledgers
            .lock()
            .expect("store lock")
            .get(fleet)
            .map(|l| Ledger::clone(l))
            .unwrap_or_default())
    }

    fn save_ledger(&self, fleet: &str, ledger: &Ledger) -> Result<(), RecordError> {
        self.ledgers
            .lock()
            .expect("store lock")
            .insert(fleet.to_owned(), Arc::new(ledger.clone()));
        Ok(())
    }

    fn record_progress(&self, fleet: &str, progress: &LedgerProgress) -> Result<(), RecordError> {
        let mut ledgers = self.ledgers.lock().expect("store lock");
        Arc::make_mut(ledgers.entry(fleet.to_owned()).or_default()).apply(progress);
        Ok(())
    }

    fn load_cache(
        &self,
        fleet: &str,
        provider: &str,
        kind: &str,
    ) -> Result<Vec<CacheEntry>, RecordError> {
        Ok(self
            .caches
            .lock()
            .expect("store lock")
            .get(&(fleet.to_owned(), provider.to_owned(), kind.to_owned()))
            .map(|entries| entries.to_vec())
            .unwrap_or_default())
    }

    fn save_cache(
        &self,
        fleet: &str,
        provider: &str,
        kind: &str,
        entries: &[CacheEntry],
    ) -> Result<(), RecordError> {
        let key = (fleet.to_owned(), provider.to_owned(), kind.to_owned());
        let mut caches = self.caches.lock().expect("store lock");
        if entries.is_empty() {
            caches.remove(&key);
        } else {
            caches.insert(key, Arc::new(entries.to_vec()));
        }
        Ok(())
    }

    fn cached_pairs(&self, fleet: &str) -> Result<Vec<(String, String)>, RecordError> {
        Ok(self
            .caches
            .lock()
            .expect("store lock")
            .keys()
            .filter(|(f, _, _)| f == fleet)
            .map(|(_, p, k)| (p.clone(), k.clone()))
            .collect())
    }

    /// The ledger and the cached observations as they are kept, shared (not copied).
    fn load_records(&self, fleet: &str) -> Result<Records, RecordError> {
        let ledger = self
            .ledgers
            .lock()
            .expect("store lock")
            .get(fleet)
            .map(Arc::clone)
            .unwrap_or_default();
        let caches = self
            .caches
            .lock()
            .expect("store lock")
            .iter()
            .filter(|((f, _, _), _)| f == fleet)
            .map(|((_, p, k), entries)| ((p.clone(), k.clone()), Arc::clone(entries)))
            .collect();
        Ok(Records { ledger, caches })
    }

    fn try_lock(&self, fleet: &str, holder: &LockHolder) -> Result<LockGuard, LockError> {
        let mut locks = self.locks.lock().expect("store lock");
        if let Some(current) = locks.get(fleet) {
            return Err(LockError::Held {
                fleet: fleet.to_owned(),
                holder: Some(Box::new(current.clone())),
                waited: std::time::Duration::ZERO,
            });
        }
        locks.insert(fleet.to_owned(), holder.clone());
        let release = Release {
            locks: Arc::clone(&self.locks),
            fleet: fleet.to_owned(),
            id: holder.id.clone(),
        };
        Ok(LockGuard::new(holder.clone(), None, release))
    }

    fn force_unlock(&self, fleet: &str, id: &str) -> Result<LockHolder, LockError> {
        let mut locks = self.locks.lock().expect("store lock");
        match locks.get(fleet) {
            Some(h) if h.id == id => Ok(locks.remove(fleet).expect("present")),
            current => Err(LockError::NoSuchLock {
                fleet: fleet.to_owned(),
                id: id.to_owned(),
                current: current.cloned().map(Box::new),
            }),
        }
    }
}
