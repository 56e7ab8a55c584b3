//! Which record store a run uses, the fleet's lock, and the verbs about the store itself:
//! `force-unlock` and `records migrate`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::console::Io;
use super::render::error;
use crate::{FileStore, LockError, LockGuard, RecordError, RecordStore, lock_fleet};

/// Where records are: `--records`, else `INFRA_RECORDS_URL`, else the state directory.
pub(super) fn location(records: Option<&str>, state_dir: &Path) -> String {
    records
        .map(str::to_owned)
        .or_else(|| std::env::var("INFRA_RECORDS_URL").ok())
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| format!("file:{}", state_dir.display()))
}

/// Opens the store at `location`: `postgres://…` (or `postgresql://…`), or `file:DIR`.
pub(super) fn open(location: &str) -> Result<Arc<dyn RecordStore>, String> {
    if let Some(dir) = location.strip_prefix("file:") {
        let dir = dir.strip_prefix("//").unwrap_or(dir);
        if dir.is_empty() {
            return Err("`file:` names no directory (give file:DIR)".into());
        }
        return Ok(Arc::new(FileStore::new(dir)));
    }
    if location.starts_with("postgres://") || location.starts_with("postgresql://") {
        return open_postgres(location);
    }
    Err(format!(
        "{:?} is not a record store: give a postgres:// URL or file:DIR",
        crate::records::redact_url(location)
    ))
}

#[cfg(feature = "postgres")]
fn open_postgres(url: &str) -> Result<Arc<dyn RecordStore>, String> {
    crate::records::PostgresStore::connect(url)
        .map(|s| Arc::new(s) as Arc<dyn RecordStore>)
        .map_err(|e| e.to_string())
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(url: &str) -> Result<Arc<dyn RecordStore>, String> {
    Err(format!(
        "{}: this program was built without PostgreSQL records (feature `postgres` of \
         infra-core)",
        crate::records::redact_url(url)
    ))
}

/// Takes the fleet's lock for `verb`, waiting up to `timeout`; says so when it takes
/// over the lock of a run that is gone.
pub(super) async fn lock(
    io: &mut Io<'_>,
    store: &dyn RecordStore,
    fleet: &str,
    verb: &str,
    timeout: Duration,
) -> Result<LockGuard, LockError> {
    let guard = lock_fleet(store, fleet, verb, timeout).await?;
    if let Some(old) = guard.replaced() {
        io.err(&format!(
            "note: the lock of a run that ended without releasing it was taken over: {old}"
        ));
    }
    Ok(guard)
}

/// `force-unlock LOCK_ID`.
pub(super) fn force_unlock(io: &mut Io<'_>, store: &dyn RecordStore, fleet: &str, id: &str) -> u8 {
    match store.force_unlock(fleet, id) {
        Ok(holder) => {
            io.out(&format!(
                "removed the lock of fleet `{fleet}` held by {holder}\n"
            ));
            if !holder.is_gone() && holder.host == crate::records::host_name() {
                io.err(&format!(
                    "warning: process {} is still running; it will go on writing records \
                     as if it held the lock",
                    holder.pid
                ));
            }
            0
        }
        Err(e) => error(io, &e),
    }
}

/// `records migrate --to URL`: copies the fleet's ledger and cache, under both stores'
/// locks, then reads the copy back and compares.
pub(super) async fn migrate(
    io: &mut Io<'_>,
    from: &dyn RecordStore,
    fleet: &str,
    to_location: &str,
    timeout: Duration,
) -> u8 {
    let to = match open(to_location) {
        Ok(s) => s,
        Err(e) => return error(io, &e),
    };
    if from.describe() == to.describe() {
        return error(
            io,
            &"the destination is the store the records are already in",
        );
    }
    let _theirs = match lock(io, &*to, fleet, "records migrate", timeout).await {
        Ok(g) => g,
        Err(e) => return error(io, &e),
    };
    match copy(from, &*to, fleet) {
        Ok(Copied { rows, pairs }) => {
            io.out(&format!(
                "copied fleet `{fleet}`'s records ({rows} ledger row{}, {pairs} cache record{}) \
                 from {} to {}; the source was left as it was\n",
                if rows == 1 { "" } else { "s" },
                if pairs == 1 { "" } else { "s" },
                from.describe(),
                to.describe()
            ));
            0
        }
        Err(e) => error(io, &e),
    }
}

struct Copied {
    rows: usize,
    pairs: usize,
}

/// Why a copy was refused or failed.
#[derive(Debug, thiserror::Error)]
enum CopyError {
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("{0} already holds different records for this fleet; refused (nothing was written)")]
    Occupied(String),
    #[error("the copy in {0} does not read back as the source; check it before using it")]
    Mismatch(String),
}

fn copy(from: &dyn RecordStore, to: &dyn RecordStore, fleet: &str) -> Result<Copied, CopyError> {
    from.verify(fleet)?;
    to.verify(fleet)?;
    let snapshot = Snapshot::of(from, fleet)?;
    let there = Snapshot::of(to, fleet)?;
    if !there.is_empty() && there != snapshot {
        return Err(CopyError::Occupied(to.describe()));
    }
    to.save_ledger(fleet, &snapshot.ledger)?;
    for ((provider, kind), entries) in &snapshot.cache {
        to.save_cache(fleet, provider, kind, entries)?;
    }
    if Snapshot::of(to, fleet)? != snapshot {
        return Err(CopyError::Mismatch(to.describe()));
    }
    Ok(Copied {
        rows: snapshot.ledger.len(),
        pairs: snapshot.cache.len(),
    })
}

/// Everything a store holds for a fleet.
#[derive(PartialEq)]
struct Snapshot {
    ledger: crate::Ledger,
    cache: std::collections::BTreeMap<(String, String), Vec<crate::CacheEntry>>,
}

impl Snapshot {
    fn of(store: &dyn RecordStore, fleet: &str) -> Result<Self, RecordError> {
        let mut cache = std::collections::BTreeMap::new();
        for (provider, kind) in store.cached_pairs(fleet)? {
            let mut entries = store.load_cache(fleet, &provider, &kind)?;
            entries.sort_by(|a, b| (&a.name, &a.region).cmp(&(&b.name, &b.region)));
            if !entries.is_empty() {
                cache.insert((provider, kind), entries);
            }
        }
        Ok(Snapshot {
            ledger: store.load_ledger(fleet)?,
            cache,
        })
    }

    fn is_empty(&self) -> bool {
        self.ledger.is_empty() && self.cache.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::MemoryStore;
    use crate::{CacheEntry, Ledger, LedgerRow};

    fn filled() -> MemoryStore {
        let store = MemoryStore::new();
        let row = LedgerRow {
            provider: "aws".into(),
            kind: "objectStore".into(),
            name: "logs".into(),
            region: "eu-west-3".into(),
        };
        let ledger = Ledger {
            rows: [row.clone()].into(),
            discovered: [row].into(),
            ..Ledger::default()
        };
        store.save_ledger("shop", &ledger).unwrap();
        let entry = CacheEntry {
            name: "logs".into(),
            region: "eu-west-3".into(),
            handle: "arn:aws:s3:::logs".into(),
            observed: serde_json::json!({"arn": "arn:aws:s3:::logs"}),
            written: serde_json::Map::new(),
        };
        store
            .save_cache("shop", "aws", "objectStore", &[entry])
            .unwrap();
        store
    }

    #[test]
    fn records_go_to_files_and_back_without_loss() {
        let dir = tempfile::tempdir().unwrap();
        let memory = filled();
        let files = FileStore::new(dir.path());
        let copied = copy(&memory, &files, "shop").unwrap();
        assert_eq!((copied.rows, copied.pairs), (1, 1));
        let back = MemoryStore::new();
        copy(&files, &back, "shop").unwrap();
        assert!(Snapshot::of(&back, "shop").unwrap() == Snapshot::of(&memory, "shop").unwrap());
        // The same records again: nothing to refuse.
        copy(&memory, &files, "shop").unwrap();
    }

    #[test]
    fn a_destination_holding_other_records_is_refused_and_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let files = FileStore::new(dir.path());
        files
            .save_ledger(
                "shop",
                &Ledger {
                    rows: [LedgerRow {
                        provider: "aws".into(),
                        kind: "queue".into(),
                        name: "jobs".into(),
                        region: "eu-west-3".into(),
                    }]
                    .into(),
                    ..Ledger::default()
                },
            )
            .unwrap();
        let before = Snapshot::of(&files, "shop").unwrap();
        let err = copy(&filled(), &files, "shop").err().expect("refused");
        assert!(matches!(err, CopyError::Occupied(_)), "{err}");
        assert!(Snapshot::of(&files, "shop").unwrap() == before);
    }

    #[test]
    fn locations_name_their_store() {
        assert!(open("file:/tmp/somewhere").is_ok());
        assert!(open("file:").is_err());
        let err = open("mysql://user:hunter2@db/infra").err().unwrap();
        assert!(!err.contains("hunter2"), "{err}");
        assert_eq!(
            location(Some("file:x"), Path::new(".infra")),
            "file:x".to_owned()
        );
    }
}
