//! Records as JSON files under a state directory.
//!
//! A fleet's records are in its own directory, and the store reads, rewrites and
//! deletes only the files it made there:
//!
//! ```text
//! <state-dir>/<fleet>/ledger.json                    the ledger
//! <state-dir>/<fleet>/ledger.journal                 marks and drops since its last save
//! <state-dir>/<fleet>/manifest.json                  the cache files this store wrote
//! <state-dir>/<fleet>/cache/<provider>/<kind>.json   the cache of one provider and kind
//! <state-dir>/<fleet>/lock.json                      the lock, while a run holds it
//! ```
//!
//! Any other file or directory (a backup copy, notes) is never parsed, rewritten or
//! deleted. A cache file counts only once the manifest names it: the manifest is written
//! before a new cache file, and a pair leaves it only after its file is gone, so that a
//! run killed in between leaves at most a name whose file is missing (read as empty).
//! Temporary files are named `.infra-tmp-<pid>-<n>`; the run that next takes the lock
//! removes those a killed run left.
//!
//! A record of an earlier schema version is read as it is and migrated on its first
//! write (or removal): the file as it was is kept beside it as `<file>.v<N>.bak`
//! (`ledger.json.v1.bak`, `cache/aws/objectStore.json.v1.bak`), and a backup already
//! there with other content makes the write fail, naming both files. The cache files of
//! the layout before the manifest are moved under `cache/` byte for byte, then migrated
//! like any other. A record of a newer version is refused and never written over.

mod io;
mod journal;
mod lock;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::{
    CACHE_VERSION, CacheEntry, LEDGER_VERSION, Ledger, LedgerProgress, LedgerRow, LockError,
    LockGuard, LockHolder, MANIFEST_VERSION, RecordError, RecordStore,
};

/// Records as JSON files under a state directory.
#[derive(Clone, Debug)]
pub struct FileStore {
    root: PathBuf,
    /// The fleets whose journal this store started since it last saved their ledger:
    /// their progress is appended, not started again.
    journals: Arc<Mutex<BTreeSet<String>>>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LedgerFile {
    ledger: u32,
    fleet: String,
    /// How many times the ledger was saved (version 3): no two saves write the same
    /// bytes, so the journal names the very save it follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    serial: Option<u64>,
    rows: Vec<RowFile>,
}

/// A ledger row as the file holds it.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RowFile {
    provider: String,
    kind: String,
    name: String,
    region: String,
    /// Adopted by `discover` on the marker alone (version 2).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    discovered: bool,
    /// Written before a create whose outcome is not known (version 2).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    intent: bool,
    /// Marked before a delete that is not confirmed (version 3).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    deleting: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CacheFile {
    cache: u32,
    provider: String,
    kind: String,
    entries: Vec<CacheEntry>,
}

/// The cache files this store wrote for a fleet.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    manifest: u32,
    fleet: String,
    cache: Vec<PairFile>,
}

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PairFile {
    provider: String,
    kind: String,
}

fn check_component(what: &'static str, name: &str) -> Result<(), RecordError> {
    let bad = |why| {
        Err(RecordError::BadName {
            what,
            name: name.to_owned(),
            why,
        })
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name == "." || name == ".." {
        return bad("it is a relative path");
    }
    if name.chars().any(|c| c == '/' || c == '\\') {
        return bad("it holds a path separator");
    }
    if name.chars().any(char::is_control) {
        return bad("it holds a control character");
    }
    Ok(())
}

impl FileStore {
    /// Records under `root` (conventionally `.infra`).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FileStore {
            root: root.into(),
            journals: Arc::default(),
        }
    }

    /// The state directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn fleet_dir(&self, fleet: &str) -> Result<PathBuf, RecordError> {
        check_component("fleet", fleet)?;
        Ok(self.root.join(fleet))
    }

    /// The ledger file of a fleet.
    pub fn ledger_path(&self, fleet: &str) -> Result<PathBuf, RecordError> {
        Ok(self.fleet_dir(fleet)?.join("ledger.json"))
    }

    /// The cache file of one provider and kind.
    pub fn cache_path(
        &self,
        fleet: &str,
        provider: &str,
        kind: &str,
    ) -> Result<PathBuf, RecordError> {
        check_component("provider", provider)?;
        check_component("kind", kind)?;
        Ok(self
            .fleet_dir(fleet)?
            .join("cache")
            .join(provider)
            .join(format!("{kind}.json")))
    }

    fn journal_path(&self, fleet: &str) -> Result<PathBuf, RecordError> {
        Ok(self.fleet_dir(fleet)?.join("ledger.journal"))
    }

    fn manifest_path(&self, fleet: &str) -> Result<PathBuf, RecordError> {
        Ok(self.fleet_dir(fleet)?.join("manifest.json"))
    }

    /// The cache pairs the manifest names.
    fn manifest(&self, fleet: &str) -> Result<Vec<PairFile>, RecordError> {
        let path = self.manifest_path(fleet)?;
        let Some(text) = io::read(&path)? else {
            return Ok(Vec::new());
        };
        let file: ManifestFile = io::parse(&path, &text, MANIFEST_VERSION)?;
        if file.fleet != fleet {
            return Err(RecordError::OtherFleet {
                path,
                found: file.fleet,
                expected: fleet.to_owned(),
            });
        }
        Ok(file.cache)
    }

    fn save_manifest(&self, fleet: &str, mut cache: Vec<PairFile>) -> Result<(), RecordError> {
        cache.sort();
        cache.dedup();
        io::write_record(
            &self.manifest_path(fleet)?,
            &ManifestFile {
                manifest: MANIFEST_VERSION,
                fleet: fleet.to_owned(),
                cache,
            },
            MANIFEST_VERSION,
        )
    }
}

impl FileStore {
    /// The ledger file, read and checked: this fleet's, of a version this build reads.
    fn ledger_file(&self, fleet: &str) -> Result<Option<LedgerFile>, RecordError> {
        Ok(self.ledger_file_and_digest(fleet)?.0)
    }

    /// The ledger file, read and checked, and the digest of its text (which the journal
    /// names).
    fn ledger_file_and_digest(
        &self,
        fleet: &str,
    ) -> Result<(Option<LedgerFile>, String), RecordError> {
        let path = self.ledger_path(fleet)?;
        let Some(text) = io::read(&path)? else {
            return Ok((None, journal::digest(None)));
        };
        let file: LedgerFile = io::parse(&path, &text, LEDGER_VERSION)?;
        if file.fleet != fleet {
            return Err(RecordError::OtherFleet {
                path,
                found: file.fleet,
                expected: fleet.to_owned(),
            });
        }
        Ok((Some(file), journal::digest(Some(&text))))
    }

    fn journaled(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.journals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The cache file of a pair the manifest names, read and checked.
    fn cache_file(&self, path: &Path) -> Result<Option<CacheFile>, RecordError> {
        match io::read(path)? {
            Some(text) => io::parse(path, &text, CACHE_VERSION).map(Some),
            None => Ok(None),
        }
    }
}

impl FileStore {
    /// Moves the cache files an earlier version wrote (`<fleet>/<provider>/<kind>.json`,
    /// before the manifest) under `cache/` and into the manifest — only at the paths of
    /// pairs the ledger names, and only files that read as that pair's cache. Each file is
    /// moved byte for byte, its schema version as it was (its first write migrates it).
    /// Anything else there is left alone. Runs once, holding the lock, when there is no
    /// manifest.
    fn adopt_earlier_cache(&self, fleet: &str) -> Result<(), RecordError> {
        if io::read(&self.manifest_path(fleet)?)?.is_some() {
            return Ok(());
        }
        let Some(ledger) = self.ledger_file(fleet)? else {
            return Ok(());
        };
        let mut pairs: Vec<PairFile> = ledger
            .rows
            .iter()
            .map(|r| PairFile {
                provider: r.provider.clone(),
                kind: r.kind.clone(),
            })
            .collect();
        pairs.sort();
        pairs.dedup();
        let dir = self.fleet_dir(fleet)?;
        let mut adopted = Vec::new();
        for pair in pairs {
            if check_component("provider", &pair.provider).is_err()
                || check_component("kind", &pair.kind).is_err()
            {
                continue;
            }
            let old = dir.join(&pair.provider).join(format!("{}.json", pair.kind));
            let Ok(Some(text)) = io::read(&old) else {
                continue;
            };
            let Ok(file) = io::parse::<CacheFile>(&old, &text, CACHE_VERSION) else {
                continue;
            };
            if file.provider != pair.provider || file.kind != pair.kind {
                continue;
            }
            let new = self.cache_path(fleet, &pair.provider, &pair.kind)?;
            io::write_bytes_atomically(&new, text.as_bytes())?;
            adopted.push((pair, old));
        }
        if adopted.is_empty() {
            return Ok(());
        }
        self.save_manifest(fleet, adopted.iter().map(|(p, _)| p.clone()).collect())?;
        for (_, old) in adopted {
            io::remove(&old)?;
        }
        Ok(())
    }
}

impl FileStore {
    /// Refuses, before a run that writes does anything, a record whose migration would
    /// be refused at its first write: one of an earlier version whose backup exists with
    /// other content. A run so refused has made no cloud call and written nothing.
    fn check_migrations(&self, fleet: &str) -> Result<(), RecordError> {
        io::check_migration(&self.ledger_path(fleet)?, LEDGER_VERSION)?;
        io::check_migration(&self.manifest_path(fleet)?, MANIFEST_VERSION)?;
        for pair in self.manifest(fleet)? {
            let path = self.cache_path(fleet, &pair.provider, &pair.kind)?;
            io::check_migration(&path, CACHE_VERSION)?;
        }
        Ok(())
    }
}

impl RecordStore for FileStore {
    fn load_ledger(&self, fleet: &str) -> Result<Ledger, RecordError> {
        let mut ledger = Ledger::default();
        let (file, digest) = self.ledger_file_and_digest(fleet)?;
        let progress = journal::read(&self.journal_path(fleet)?, fleet, &digest)?;
        let Some(file) = file else {
            return Ok(ledger);
        };
        for r in file.rows {
            let row = LedgerRow {
                provider: r.provider,
                kind: r.kind,
                name: r.name,
                region: r.region,
            };
            if r.discovered {
                ledger.discovered.insert(row.clone());
            }
            if r.intent {
                ledger.intents.insert(row.clone());
            }
            if r.deleting {
                ledger.deleting.insert(row.clone());
            }
            ledger.rows.insert(row);
        }
        if let Some(progress) = progress {
            ledger.apply(&progress);
        }
        Ok(ledger)
    }

    fn save_ledger(&self, fleet: &str, ledger: &Ledger) -> Result<(), RecordError> {
        // Never overwrite a file this build cannot read, or another fleet's.
        let (before, digest) = self.ledger_file_and_digest(fleet)?;
        let journal = self.journal_path(fleet)?;
        journal::read(&journal, fleet, &digest)?;
        let serial = before.and_then(|f| f.serial).unwrap_or(0) + 1;
        io::write_record(
            &self.ledger_path(fleet)?,
            &LedgerFile {
                ledger: LEDGER_VERSION,
                fleet: fleet.to_owned(),
                serial: Some(serial),
                rows: ledger
                    .rows
                    .iter()
                    .map(|r| RowFile {
                        provider: r.provider.clone(),
                        kind: r.kind.clone(),
                        name: r.name.clone(),
                        region: r.region.clone(),
                        discovered: ledger.discovered.contains(r),
                        intent: ledger.intents.contains(r),
                        deleting: ledger.deleting.contains(r),
                    })
                    .collect(),
            },
            LEDGER_VERSION,
        )?;
        // The journal is folded in: gone (a journal left by a kill here follows the
        // ledger before, and is never read).
        io::remove(&journal)?;
        self.journaled().remove(fleet);
        Ok(())
    }

    fn record_progress(&self, fleet: &str, progress: &LedgerProgress) -> Result<(), RecordError> {
        if progress.is_empty() {
            return Ok(());
        }
        let journal = self.journal_path(fleet)?;
        if self.journaled().contains(fleet) {
            return journal::append(&journal, progress);
        }
        // This store's first batch since its last save: a journal that follows the
        // ledger as it is now, written whole (and a stale one replaced).
        let (file, digest) = self.ledger_file_and_digest(fleet)?;
        let mut carried = journal::read(&journal, fleet, &digest)?.unwrap_or_default();
        if file.is_none() {
            return Ok(()); // no ledger, so no row to mark or drop
        }
        carried.deleting.extend(progress.deleting.iter().cloned());
        carried.dropped.extend(progress.dropped.iter().cloned());
        journal::start(&journal, fleet, digest, &carried)?;
        self.journaled().insert(fleet.to_owned());
        Ok(())
    }

    fn load_cache(
        &self,
        fleet: &str,
        provider: &str,
        kind: &str,
    ) -> Result<Vec<CacheEntry>, RecordError> {
        let path = self.cache_path(fleet, provider, kind)?;
        let pair = PairFile {
            provider: provider.to_owned(),
            kind: kind.to_owned(),
        };
        // A file the manifest does not name is not ours: never read.
        if !self.manifest(fleet)?.contains(&pair) {
            return Ok(Vec::new());
        }
        Ok(self
            .cache_file(&path)?
            .map(|f| f.entries)
            .unwrap_or_default())
    }

    fn save_cache(
        &self,
        fleet: &str,
        provider: &str,
        kind: &str,
        entries: &[CacheEntry],
    ) -> Result<(), RecordError> {
        let path = self.cache_path(fleet, provider, kind)?;
        let pair = PairFile {
            provider: provider.to_owned(),
            kind: kind.to_owned(),
        };
        let mut manifest = self.manifest(fleet)?;
        let listed = manifest.contains(&pair);
        if listed {
            // Never overwrite a file this build cannot read.
            self.cache_file(&path)?;
        }
        if entries.is_empty() {
            if listed {
                io::remove_record(&path, CACHE_VERSION)?;
                let _ = std::fs::remove_dir(self.fleet_dir(fleet)?.join("cache"));
                manifest.retain(|p| p != &pair);
                self.save_manifest(fleet, manifest)?;
            }
            return Ok(());
        }
        if !listed {
            manifest.push(pair);
            self.save_manifest(fleet, manifest)?;
        }
        let mut entries = entries.to_vec();
        entries.sort_by(|a, b| (&a.name, &a.region).cmp(&(&b.name, &b.region)));
        io::write_record(
            &path,
            &CacheFile {
                cache: CACHE_VERSION,
                provider: provider.to_owned(),
                kind: kind.to_owned(),
                entries,
            },
            CACHE_VERSION,
        )
    }

    fn cached_pairs(&self, fleet: &str) -> Result<Vec<(String, String)>, RecordError> {
        Ok(self
            .manifest(fleet)?
            .into_iter()
            .map(|p| (p.provider, p.kind))
            .collect())
    }

    fn try_lock(&self, fleet: &str, holder: &LockHolder) -> Result<LockGuard, LockError> {
        let guard = lock::try_lock(&self.fleet_dir(fleet)?, fleet, holder)?;
        // Checked before the cache of the earlier layout is moved, and again after, for
        // the files moved.
        self.check_migrations(fleet)?;
        self.adopt_earlier_cache(fleet)?;
        self.check_migrations(fleet)?;
        Ok(guard)
    }

    fn force_unlock(&self, fleet: &str, id: &str) -> Result<LockHolder, LockError> {
        lock::force_unlock(&self.fleet_dir(fleet)?, fleet, id)
    }

    fn describe(&self) -> String {
        format!("the state directory {}", self.root.display())
    }
}
