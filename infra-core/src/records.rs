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
//! and `.infra/<fleet>/<provider>/<kind>.json`). Writes are atomic (a temporary file in
//! the same directory, then a rename). Files carry a schema version; a malformed file, or
//! one written by a newer version, is refused with its path and line and never
//! overwritten.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// The schema version of the ledger file this crate writes (it reads every earlier
/// one): 2 marks the rows `discover` adopted on the ownership marker alone, and the rows
/// written before a create whose outcome is not known.
pub const LEDGER_VERSION: u32 = 2;
/// The schema version of a cache file this crate writes (it reads every earlier one):
/// 2 keeps, per resource, what the fleet last wrote of fields the cloud does not report.
pub const CACHE_VERSION: u32 = 2;

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
}

impl Ledger {
    /// Removes a row (and its discovered mark).
    pub fn remove(&mut self, row: &LedgerRow) -> bool {
        self.discovered.remove(row);
        self.intents.remove(row);
        self.rows.remove(row)
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

    /// The rows of one provider.
    pub fn of_provider<'a>(
        &'a self,
        provider: &'a str,
    ) -> impl Iterator<Item = &'a LedgerRow> + 'a {
        self.rows.iter().filter(move |r| r.provider == provider)
    }
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
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
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

/// Where the records are kept.
pub trait RecordStore: Send + Sync {
    /// The fleet's ledger; empty when there is none yet.
    fn load_ledger(&self, fleet: &str) -> Result<Ledger, RecordError>;
    /// Replaces the fleet's ledger.
    fn save_ledger(&self, fleet: &str, ledger: &Ledger) -> Result<(), RecordError>;
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
    /// The (provider, kind) pairs that have cached observations.
    fn cached_pairs(&self, fleet: &str) -> Result<Vec<(String, String)>, RecordError>;
}

/// Records in memory, for tests and for runs that keep nothing.
#[derive(Debug, Default)]
pub struct MemoryStore {
    ledgers: Mutex<BTreeMap<String, Ledger>>,
    caches: Mutex<BTreeMap<(String, String, String), Vec<CacheEntry>>>,
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
            .cloned()
            .unwrap_or_default())
    }

    fn save_ledger(&self, fleet: &str, ledger: &Ledger) -> Result<(), RecordError> {
        self.ledgers
            .lock()
            .expect("store lock")
            .insert(fleet.to_owned(), ledger.clone());
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
            .cloned()
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
            caches.insert(key, entries.to_vec());
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
}

/// Records as JSON files under a state directory.
#[derive(Clone, Debug)]
pub struct FileStore {
    root: PathBuf,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LedgerFile {
    ledger: u32,
    fleet: String,
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
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CacheFile {
    cache: u32,
    provider: String,
    kind: String,
    entries: Vec<CacheEntry>,
}

/// Only the version field of a record, read first so that a newer schema is told apart
/// from a malformed file.
#[derive(Deserialize)]
struct Versioned {
    #[serde(alias = "cache")]
    ledger: Option<u32>,
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
        FileStore { root: root.into() }
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
            .join(provider)
            .join(format!("{kind}.json")))
    }

    fn read(path: &Path) -> Result<Option<String>, RecordError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(RecordError::Io {
                path: path.to_owned(),
                source,
            }),
        }
    }

    fn parse<T: serde::de::DeserializeOwned>(
        path: &Path,
        text: &str,
        supported: u32,
    ) -> Result<T, RecordError> {
        let malformed = |e: serde_json::Error| RecordError::Malformed {
            path: path.to_owned(),
            line: e.line().max(1),
            column: e.column().max(1),
            message: e
                .to_string()
                .split(" at line ")
                .next()
                .unwrap_or_default()
                .to_owned(),
        };
        let version: Versioned = serde_json::from_str(text).map_err(malformed)?;
        match version.ledger {
            Some(found) if found > supported => {
                return Err(RecordError::NewerVersion {
                    path: path.to_owned(),
                    found,
                    supported,
                });
            }
            Some(_) => {}
            None => {
                return Err(RecordError::Malformed {
                    path: path.to_owned(),
                    line: 1,
                    column: 1,
                    message: "no schema version".into(),
                });
            }
        }
        serde_json::from_str(text).map_err(malformed)
    }

    fn write_atomically(path: &Path, value: &impl Serialize) -> Result<(), RecordError> {
        let io = |source| RecordError::Io {
            path: path.to_owned(),
            source,
        };
        let dir = path.parent().expect("a record path has a directory");
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut text = serde_json::to_vec_pretty(value).expect("records serialise");
        text.push(b'\n');
        let mut temp = tempfile_in(dir).map_err(io)?;
        temp.1.write_all(&text).map_err(io)?;
        temp.1.sync_all().map_err(io)?;
        drop(temp.1);
        std::fs::rename(&temp.0, path).map_err(|source| {
            let _ = std::fs::remove_file(&temp.0);
            io(source)
        })
    }

    fn remove(path: &Path) -> Result<(), RecordError> {
        match std::fs::remove_file(path) {
            Ok(()) => {
                // A provider's directory goes with its last file; one still holding
                // something stays.
                if let Some(dir) = path.parent() {
                    let _ = std::fs::remove_dir(dir);
                }
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(RecordError::Io {
                path: path.to_owned(),
                source,
            }),
        }
    }
}

/// A new file beside the target, named so that it cannot collide with a record.
fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(".tmp-{}-{n}", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(file) => return Ok((path, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

impl RecordStore for FileStore {
    fn load_ledger(&self, fleet: &str) -> Result<Ledger, RecordError> {
        let path = self.ledger_path(fleet)?;
        let Some(text) = Self::read(&path)? else {
            return Ok(Ledger::default());
        };
        let file: LedgerFile = Self::parse(&path, &text, LEDGER_VERSION)?;
        let mut ledger = Ledger::default();
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
            ledger.rows.insert(row);
        }
        Ok(ledger)
    }

    fn save_ledger(&self, fleet: &str, ledger: &Ledger) -> Result<(), RecordError> {
        let path = self.ledger_path(fleet)?;
        // Never overwrite a file this build cannot read.
        if let Some(text) = Self::read(&path)? {
            Self::parse::<LedgerFile>(&path, &text, LEDGER_VERSION)?;
        }
        Self::write_atomically(
            &path,
            &LedgerFile {
                ledger: LEDGER_VERSION,
                fleet: fleet.to_owned(),
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
                    })
                    .collect(),
            },
        )
    }

    fn load_cache(
        &self,
        fleet: &str,
        provider: &str,
        kind: &str,
    ) -> Result<Vec<CacheEntry>, RecordError> {
        let path = self.cache_path(fleet, provider, kind)?;
        let Some(text) = Self::read(&path)? else {
            return Ok(Vec::new());
        };
        let file: CacheFile = Self::parse(&path, &text, CACHE_VERSION)?;
        Ok(file.entries)
    }

    fn save_cache(
        &self,
        fleet: &str,
        provider: &str,
        kind: &str,
        entries: &[CacheEntry],
    ) -> Result<(), RecordError> {
        let path = self.cache_path(fleet, provider, kind)?;
        if let Some(text) = Self::read(&path)? {
            Self::parse::<CacheFile>(&path, &text, CACHE_VERSION)?;
        }
        if entries.is_empty() {
            return Self::remove(&path);
        }
        let mut entries = entries.to_vec();
        entries.sort_by(|a, b| (&a.name, &a.region).cmp(&(&b.name, &b.region)));
        Self::write_atomically(
            &path,
            &CacheFile {
                cache: CACHE_VERSION,
                provider: provider.to_owned(),
                kind: kind.to_owned(),
                entries,
            },
        )
    }

    fn cached_pairs(&self, fleet: &str) -> Result<Vec<(String, String)>, RecordError> {
        let dir = self.fleet_dir(fleet)?;
        let mut pairs = Vec::new();
        let providers = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(pairs),
            Err(source) => return Err(RecordError::Io { path: dir, source }),
        };
        for provider in providers.flatten() {
            if !provider.path().is_dir() {
                continue;
            }
            let Ok(kinds) = std::fs::read_dir(provider.path()) else {
                continue;
            };
            for kind in kinds.flatten() {
                let name = kind.file_name().to_string_lossy().into_owned();
                if let Some(kind) = name.strip_suffix(".json")
                    && !name.starts_with('.')
                {
                    pairs.push((
                        provider.file_name().to_string_lossy().into_owned(),
                        kind.to_owned(),
                    ));
                }
            }
        }
        pairs.sort();
        Ok(pairs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str) -> LedgerRow {
        LedgerRow {
            provider: "aws".into(),
            kind: "s3Bucket".into(),
            name: name.into(),
            region: "eu-west-3".into(),
        }
    }

    #[test]
    fn a_ledger_round_trips_and_its_file_is_stable() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(dir.path());
        let ledger = Ledger {
            rows: [row("b-bucket"), row("a-bucket"), row("c-bucket")].into(),
            discovered: [row("b-bucket")].into(),
            intents: [row("c-bucket")].into(),
        };
        store.save_ledger("shop", &ledger).unwrap();
        assert_eq!(store.load_ledger("shop").unwrap(), ledger);
        let text = std::fs::read_to_string(dir.path().join("shop/ledger.json")).unwrap();
        assert!(
            text.starts_with("{\n  \"ledger\": 2,\n  \"fleet\": \"shop\""),
            "{text}"
        );
        assert_eq!(text.matches("\"discovered\": true").count(), 1, "{text}");
        assert_eq!(text.matches("\"intent\": true").count(), 1, "{text}");
        // No temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(dir.path().join("shop"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["ledger.json"]);
    }

    #[test]
    fn a_version_1_ledger_is_read_and_rewritten_as_version_2() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(dir.path());
        let path = dir.path().join("shop/ledger.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            &path,
            r#"{"ledger": 1, "fleet": "shop", "rows": [{"provider": "aws", "kind": "s3Bucket", "name": "a-bucket", "region": "eu-west-3"}]}"#,
        )
        .unwrap();
        let ledger = store.load_ledger("shop").unwrap();
        assert_eq!(ledger.rows, [row("a-bucket")].into());
        assert!(ledger.discovered.is_empty());
        store.save_ledger("shop", &ledger).unwrap();
        assert_eq!(store.load_ledger("shop").unwrap(), ledger);
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .contains("\"ledger\": 2")
        );
    }

    #[test]
    fn a_missing_ledger_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            FileStore::new(dir.path())
                .load_ledger("shop")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_malformed_ledger_is_refused_with_path_and_line_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(dir.path());
        let path = dir.path().join("shop/ledger.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let broken = "{\n  \"ledger\": 1,\n  \"fleet\": \"shop\",\n  \"rows\": [\n    {\"provider\": \"aws\"}\n  ]\n}\n";
        std::fs::write(&path, broken).unwrap();
        let err = store.load_ledger("shop").unwrap_err();
        match &err {
            RecordError::Malformed { path: p, line, .. } => {
                assert_eq!(p, &path);
                assert_eq!(*line, 5);
            }
            other => panic!("expected a malformed-file error, got {other:?}"),
        }
        assert!(err.to_string().contains("ledger.json:5:"), "{err}");
        assert!(err.to_string().contains("missing field `kind`"), "{err}");
        // Saving over it is refused too, and the file is untouched.
        assert!(store.save_ledger("shop", &Ledger::default()).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), broken);
    }

    #[test]
    fn a_newer_ledger_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(dir.path());
        let path = dir.path().join("shop/ledger.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let newer = "{\"ledger\": 3, \"fleet\": \"shop\", \"rows\": [], \"owners\": {}}";
        std::fs::write(&path, newer).unwrap();
        let err = store.load_ledger("shop").unwrap_err();
        assert!(
            matches!(
                err,
                RecordError::NewerVersion {
                    found: 3,
                    supported: 2,
                    ..
                }
            ),
            "{err}"
        );
        assert!(store.save_ledger("shop", &Ledger::default()).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), newer);
    }

    #[test]
    fn an_emptied_cache_pair_deletes_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(dir.path());
        let entry = CacheEntry {
            name: "logs".into(),
            region: "eu-west-3".into(),
            handle: "arn:aws:s3:::logs".into(),
            observed: serde_json::json!({"arn": "arn:aws:s3:::logs", "region": "eu-west-3"}),
            written: serde_json::Map::new(),
        };
        store
            .save_cache("shop", "aws", "s3Bucket", std::slice::from_ref(&entry))
            .unwrap();
        assert_eq!(
            store.load_cache("shop", "aws", "s3Bucket").unwrap(),
            vec![entry]
        );
        assert_eq!(
            store.cached_pairs("shop").unwrap(),
            vec![("aws".to_owned(), "s3Bucket".to_owned())]
        );
        store.save_cache("shop", "aws", "s3Bucket", &[]).unwrap();
        assert!(!dir.path().join("shop/aws/s3Bucket.json").exists());
        assert!(
            store
                .load_cache("shop", "aws", "s3Bucket")
                .unwrap()
                .is_empty()
        );
        assert!(store.cached_pairs("shop").unwrap().is_empty());
    }

    #[test]
    fn names_that_would_escape_the_state_directory_are_refused() {
        let store = FileStore::new("/nonexistent");
        for bad in ["../etc", "a/b", "a\\b", "..", "", "tab\there"] {
            assert!(
                matches!(store.ledger_path(bad), Err(RecordError::BadName { .. })),
                "{bad:?} was accepted"
            );
        }
        assert!(store.cache_path("shop", "aws", "../../x").is_err());
    }
}
