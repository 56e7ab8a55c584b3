//! The two records: the ledger (what this fleet manages) and the observation cache
//! (what was last seen), behind a small storage trait.
//!
//! The **ledger** holds one row per managed resource: provider, kind, name and region —
//! enough to delete a resource whose declaration is gone, and nothing more (not its
//! references: that would be a second copy of the declaration). The **cache** holds the
//! last observed state per resource, one file per provider and kind; a pair that became
//! empty deletes its file. Neither ever holds a secret value: observed types have no
//! value field, and a secret's value never reaches one.
//!
//! [`FileStore`] keeps them as JSON under a state directory (`.infra/<fleet>/ledger.json`
//! and `.infra/<fleet>/cache/<provider>/<kind>.json`). Writes are atomic (a temporary
//! file in the same directory, then a rename). Files carry a schema version; a malformed
//! file, or one written by a newer version, is refused with its path and line and never
//! overwritten. A file of an earlier version is read, and migrated on its first write,
//! the file as it was kept beside it as `<file>.v<N>.bak`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

mod file;
mod lock;
mod memory;
mod moving;
#[cfg(feature = "postgres")]
mod postgres;
mod redact;

pub use file::FileStore;
pub use lock::{Lease, LockError, LockGuard, LockHolder, host_name, lock_fleet, parse_duration};
pub use memory::MemoryStore;
pub use moving::{Moved, move_rows};
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
pub use redact::redact_url;

/// The schema version of the ledger file this crate writes (it reads every earlier
/// one): 2 marks the rows `discover` adopted on the ownership marker alone, and the rows
/// written before a create whose outcome is not known; 3 marks the rows whose delete may
/// have been sent.
pub const LEDGER_VERSION: u32 = 3;
/// The schema version of a cache file this crate writes (it reads every earlier one):
/// 2 keeps, per resource, what the fleet last wrote of fields the cloud does not report.
pub const CACHE_VERSION: u32 = 2;
/// The schema version of the file store's manifest (`<fleet>/manifest.json`, the cache
/// files it wrote) this crate writes and reads.
pub const MANIFEST_VERSION: u32 = 1;

/// One managed resource.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LedgerRow {
    /// The provider's id.
    pub provider: String,
    /// The kind's id.
    pub kind: String,
    /// The resource's name.
    pub name: String,
    /// The region it is in: needed to delete it once its declaration is gone.
    pub region: String,
}

impl fmt::Display for LedgerRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{} ({})",
            self.provider, self.kind, self.name, self.region
        )
    }
}

/// The resources a fleet manages.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    /// One row per managed resource.
    pub rows: BTreeSet<LedgerRow>,
    /// The rows `discover` added because the resource carries this fleet's marker,
    /// which neither this fleet's records nor its declaration named: a marker can be
    /// copied, so deleting such a resource needs the user's confirmation by name. Always
    /// a subset of `rows`.
    pub discovered: BTreeSet<LedgerRow>,
    /// The rows written before a create whose outcome is not known yet (the run was
    /// interrupted, or the answer was lost): the resource may or may not exist. Such a
    /// row reading as absent is not a managed resource gone missing. Always a subset of
    /// `rows`.
    pub intents: BTreeSet<LedgerRow>,
    /// The rows marked before their resource's delete was sent, whose delete is not
    /// confirmed yet (the run was interrupted, or the answer was lost): the resource
    /// may be gone. Such a row reading as absent is a delete confirmed, not a managed
    /// resource gone missing. Always a subset of `rows`.
    pub deleting: BTreeSet<LedgerRow>,
}

impl Ledger {
    /// Removes a row (and its marks).
    pub fn remove(&mut self, row: &LedgerRow) -> bool {
        self.discovered.remove(row);
        self.intents.remove(row);
        self.deleting.remove(row);
        self.rows.remove(row)
    }

    /// Whether `row` was marked before a delete of its resource that is not confirmed.
    pub fn is_deleting(&self, row: &LedgerRow) -> bool {
        self.deleting.contains(row)
    }

    /// Applies what a run wrote while its calls were under way: marks (of rows still
    /// in the ledger) and drops.
    pub fn apply(&mut self, progress: &LedgerProgress) {
        for row in &progress.deleting {
            if self.rows.contains(row) {
                self.deleting.insert(row.clone());
            }
        }
        for row in &progress.dropped {
            self.remove(row);
        }
    }

    /// Whether `row` was written before a create whose outcome is not known.
    pub fn is_intent(&self, row: &LedgerRow) -> bool {
        self.intents.contains(row)
    }

    /// Whether `row` was adopted by `discover` on the marker alone and not confirmed
    /// since.
    pub fn is_discovered(&self, row: &LedgerRow) -> bool {
        self.discovered.contains(row)
    }

    /// How many resources are managed.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether nothing is managed.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows of `these` that this ledger holds, each with its marks, as a ledger of
    /// their own.
    pub fn only(&self, these: &BTreeSet<LedgerRow>) -> Ledger {
        // Every set of marks is named here: a mark added to the ledger must be carried
        // (or deliberately dropped) wherever rows move between ledgers.
        let Ledger {
            rows,
            discovered,
            intents,
            deleting,
        } = self;
        let keep = |set: &BTreeSet<LedgerRow>| set.intersection(these).cloned().collect();
        Ledger {
            rows: keep(rows),
            discovered: keep(discovered),
            intents: keep(intents),
            deleting: keep(deleting),
        }
    }

    /// Adds the rows of `other` with their marks; a row this ledger holds already keeps
    /// its own marks.
    pub fn absorb(&mut self, other: Ledger) {
        let Ledger {
            rows,
            discovered,
            intents,
            deleting,
        } = other;
        let new: BTreeSet<LedgerRow> = rows.difference(&self.rows).cloned().collect();
        self.discovered
            .extend(discovered.intersection(&new).cloned());
        self.intents.extend(intents.intersection(&new).cloned());
        self.deleting.extend(deleting.intersection(&new).cloned());
        self.rows.extend(new);
    }

    /// The rows of one provider.
    pub fn of_provider<'a>(
        &'a self,
        provider: &'a str,
    ) -> impl Iterator<Item = &'a LedgerRow> + 'a {
        self.rows.iter().filter(move |r| r.provider == provider)
    }
}

/// What a run writes to the ledger while its calls are under way, a few rows at a
/// time rather than the whole ledger: rows marked before their delete is sent, and rows
/// dropped once their delete is confirmed. A store writes each batch durably before
/// answering ([`RecordStore::record_progress`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LedgerProgress {
    /// Rows whose delete is about to be sent.
    pub deleting: Vec<LedgerRow>,
    /// Rows whose delete was confirmed (the resource is gone).
    pub dropped: Vec<LedgerRow>,
}

impl LedgerProgress {
    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.deleting.is_empty() && self.dropped.is_empty()
    }
}

/// Every record of a fleet, as read and checked together.
///
/// Shared, not copied: a store that holds its records in memory hands them over as
/// they are, and a run that only reads them never copies them.
#[derive(Clone, Debug, Default)]
pub struct Records {
    /// The ledger.
    pub ledger: Arc<Ledger>,
    /// The cached observations, by provider and kind.
    pub caches: BTreeMap<(String, String), Arc<Vec<CacheEntry>>>,
}

/// What was last observed of one resource.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheEntry {
    /// The resource's name.
    pub name: String,
    /// The region it is in.
    pub region: String,
    /// Its handle.
    pub handle: String,
    /// Its observed state, as the kind's `Observed` type serialises.
    pub observed: serde_json::Value,
    /// What this fleet last wrote of the fields the cloud does not report (a database's
    /// password secret, by handle), so that a declared change to one is seen. Never a
    /// sensitive field: no secret value, nor anything derived from one.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub written: serde_json::Map<String, serde_json::Value>,
}

/// A record could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The file is not what this version writes: refused, and left as it is.
    #[error("{path}:{line}:{column}: {message}; the file was left untouched — fix or move it")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// The file was written by a newer version of this library.
    #[error(
        "{path}: schema version {found} is newer than this build understands ({supported}); \
         the file was left untouched — upgrade infra to read it"
    )]
    NewerVersion {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// A record of an earlier schema version was to be migrated, but the backup it is
    /// kept as already exists and holds something else: neither file was touched.
    #[error(
        "{path}: migrating this record from schema version {found} to {current} keeps it as \
         {backup} first, which already exists with other content; both files were left \
         untouched — move {backup} away (or delete it) and run again"
    )]
    BackupDiffers {
        /// The record.
        path: PathBuf,
        /// Its backup, which holds something else.
        backup: PathBuf,
        /// The version in the record.
        found: u32,
        /// The version this build writes.
        current: u32,
    },
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A ledger that belongs to another fleet.
    #[error(
        "{path}: this ledger is fleet `{found}`'s, not `{expected}`'s; the file was left \
         untouched — point --state-dir elsewhere or move it"
    )]
    OtherFleet {
        /// The file.
        path: PathBuf,
        /// The fleet the file names.
        found: String,
        /// The fleet of this run.
        expected: String,
    },
    /// A record's path is a symbolic link to nothing.
    #[error(
        "{path}: a symbolic link to {target}, which does not exist; refused rather than read as empty"
    )]
    Dangling {
        /// The link.
        path: PathBuf,
        /// Where it points.
        target: PathBuf,
    },
    /// A record store other than files failed (a database): where, and what it said.
    #[error("{place}: {message}")]
    Store {
        /// The store, without any password (`postgres://infra@db.internal/infra`).
        place: String,
        /// What went wrong.
        message: String,
    },
    /// A name that cannot be part of a path (a separator, a control character).
    #[error("{what} {name:?} cannot name a record: {why}")]
    BadName {
        /// Which part (fleet, provider, kind).
        what: &'static str,
        /// The name.
        name: String,
        /// Why not.
        why: &'static str,
    },
}

/// One write of [`RecordStore::save_together`].
#[derive(Clone, Debug, PartialEq)]
pub enum RecordWrite {
    /// Replaces a fleet's ledger.
    Ledger {
        /// The fleet.
        fleet: String,
        /// Its new ledger.
        ledger: Ledger,
    },
    /// Replaces a fleet's cached observations of one provider and kind (an empty list
    /// removes them).
    Cache {
        /// The fleet.
        fleet: String,
        /// The provider's id.
        provider: String,
        /// The kind's id.
        kind: String,
        /// The new entries.
        entries: Vec<CacheEntry>,
    },
}

/// Where the records are kept.
pub trait RecordStore: Send + Sync {
    /// The fleet's ledger; empty when there is none yet.
    fn load_ledger(&self, fleet: &str) -> Result<Ledger, RecordError>;
    /// Replaces the fleet's ledger.
    fn save_ledger(&self, fleet: &str, ledger: &Ledger) -> Result<(), RecordError>;
    /// Writes a run's progress to the fleet's ledger, durably, before answering: what a
    /// later [`RecordStore::load_ledger`] reads includes it. A store should make this
    /// cost the size of `progress`, not of the ledger (a run writes one batch per
    /// delete it starts); the default reads and replaces the whole ledger.
    fn record_progress(&self, fleet: &str, progress: &LedgerProgress) -> Result<(), RecordError> {
        let mut ledger = self.load_ledger(fleet)?;
        ledger.apply(progress);
        self.save_ledger(fleet, &ledger)
    }
    /// The cached observations of one provider and kind; empty when there are none.
    fn load_cache(
        &self,
        fleet: &str,
        provider: &str,
        kind: &str,
    ) -> Result<Vec<CacheEntry>, RecordError>;
    /// Replaces the cached observations of one provider and kind; an empty list removes
    /// the record.
    fn save_cache(
        &self,
        fleet: &str,
        provider: &str,
        kind: &str,
        entries: &[CacheEntry],
    ) -> Result<(), RecordError>;
    /// Makes `writes` — of one fleet or of several — in the order given. A store that
    /// can make them in one transaction does so, and then they are made all or none
    /// (PostgreSQL). The default makes each in turn, each atomic on its own: a run killed
    /// between two leaves the earlier ones made and the later ones not, so a caller
    /// orders them so that every such prefix reads as sound records
    /// ([`move_rows`] says how it does).
    fn save_together(&self, writes: &[RecordWrite]) -> Result<(), RecordError> {
        for write in writes {
            match write {
                RecordWrite::Ledger { fleet, ledger } => self.save_ledger(fleet, ledger)?,
                RecordWrite::Cache {
                    fleet,
                    provider,
                    kind,
                    entries,
                } => self.save_cache(fleet, provider, kind, entries)?,
            }
        }
        Ok(())
    }
    /// The (provider, kind) pairs that have cached observations.
    fn cached_pairs(&self, fleet: &str) -> Result<Vec<(String, String)>, RecordError>;
    /// Takes the fleet's lock for `holder` now, or answers [`LockError::Held`] at once.
    /// The lock is released when the guard is dropped, and when the process holding it
    /// dies. A store shared between processes must lock between processes.
    fn try_lock(&self, fleet: &str, holder: &LockHolder) -> Result<LockGuard, LockError>;
    /// Removes the fleet's lock whose id is `id`, whoever holds it, and says who did.
    fn force_unlock(&self, fleet: &str, id: &str) -> Result<LockHolder, LockError>;
    /// Reads and checks every record of the fleet, so that a malformed one is refused
    /// before anything else happens (before the first cloud call of a run).
    fn verify(&self, fleet: &str) -> Result<(), RecordError> {
        self.load_records(fleet).map(drop)
    }
    /// Reads and checks every record of the fleet, as [`RecordStore::verify`] does,
    /// and gives back what it read: a run reads each record once.
    fn load_records(&self, fleet: &str) -> Result<Records, RecordError> {
        let ledger = Arc::new(self.load_ledger(fleet)?);
        let mut caches = BTreeMap::new();
        for (provider, kind) in self.cached_pairs(fleet)? {
            let entries = self.load_cache(fleet, &provider, &kind)?;
            caches.insert((provider, kind), Arc::new(entries));
        }
        Ok(Records { ledger, caches })
    }
    /// Where the records are, in a few words, for messages (never a password).
    fn describe(&self) -> String {
        "records in memory".to_owned()
    }
}
