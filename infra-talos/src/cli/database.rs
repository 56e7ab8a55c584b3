//! The store a command works on: what `--database` names, and opening it.
//!
//! `sqlite:<path>` is a store file, opened only if it exists unless `--create` is
//! given; `sqlite:` with no path and `sqlite::memory:` are refused, since the
//! controller's records would vanish when the command exits. `postgres://` and
//! `postgresql://` URLs name a PostgreSQL database; errors show them without their
//! password.

use std::path::Path;
use std::sync::Arc;

use super::Failure;
use crate::backend::Inventory;
use crate::store::postgres::PgStore;
use crate::store::sqlite::SqliteStore;
use crate::store::{OpenProblem, Store, StoreError};

/// An open store: the contract's transactions and the inventory lookups.
pub(super) struct Db {
    pub(super) store: Arc<dyn Store>,
    pub(super) inventory: Arc<dyn Inventory>,
}

impl Db {
    fn of<S: Store + Inventory + 'static>(s: S) -> Db {
        let s = Arc::new(s);
        Db {
            store: s.clone(),
            inventory: s,
        }
    }
}

/// What a `--database` value names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoreUrl<'a> {
    /// A SQLite store file.
    SqliteFile(&'a Path),
    /// A SQLite database in memory.
    SqliteMemory,
    /// A PostgreSQL URL.
    Postgres(&'a str),
}

impl<'a> StoreUrl<'a> {
    fn parse(url: &'a str) -> Result<Self, Failure> {
        if let Some(path) = url.strip_prefix("sqlite:") {
            Ok(if names_memory(path) {
                StoreUrl::SqliteMemory
            } else {
                StoreUrl::SqliteFile(Path::new(path))
            })
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(StoreUrl::Postgres(url))
        } else {
            Err(Failure::Usage(
                "the store must be `sqlite:<path>` or a postgres:// URL".into(),
            ))
        }
    }
}

/// Whether the text after `sqlite:` asks for a database in memory.
fn names_memory(path: &str) -> bool {
    let path = path.strip_prefix("//").unwrap_or(path);
    path.is_empty() || path == ":memory:" || path.starts_with("file::memory:")
}

/// Opens the store `url` names; `create` allows a missing SQLite file to be made.
pub(super) async fn open_store(url: Option<&str>, create: bool) -> Result<Db, Failure> {
    let url = url.ok_or_else(|| {
        Failure::Usage(
            "no store: give --database sqlite:<path> or a postgres:// URL, or set `database`"
                .into(),
        )
    })?;
    match StoreUrl::parse(url)? {
        StoreUrl::SqliteMemory => Err(Failure::Usage(format!(
            "the store {url} is in memory: the controller's records (plans, approvals, \
             attempts) would vanish when this command exits; give a file, sqlite:<path>"
        ))),
        StoreUrl::SqliteFile(path) => {
            let opened = if create {
                SqliteStore::open_or_create(path).await
            } else {
                SqliteStore::open(path).await
            };
            opened.map(Db::of).map_err(open_failure)
        }
        StoreUrl::Postgres(url) => PgStore::connect(url)
            .await
            .map(Db::of)
            .map_err(open_failure),
    }
}

/// A store that did not open, as the command line reports it (exit 2).
fn open_failure(e: StoreError) -> Failure {
    match &e {
        StoreError::Open {
            store,
            problem: OpenProblem::Missing,
        } => Failure::Usage(format!(
            "the store file {store} does not exist; pass --create to make a new store there"
        )),
        _ => Failure::Usage(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::{StoreUrl, names_memory};
    use std::path::Path;

    #[test]
    fn memory_and_file_urls() {
        for memory in [
            "sqlite:",
            "sqlite::memory:",
            "sqlite://:memory:",
            "sqlite:file::memory:?cache=shared",
        ] {
            assert!(
                matches!(StoreUrl::parse(memory), Ok(StoreUrl::SqliteMemory)),
                "{memory}"
            );
        }
        assert!(matches!(
            StoreUrl::parse("sqlite:/var/lib/talos/store.db"),
            Ok(StoreUrl::SqliteFile(p)) if p == Path::new("/var/lib/talos/store.db")
        ));
        assert!(!names_memory("store.db"));
        assert!(matches!(
            StoreUrl::parse("mysql://x"),
            Err(super::Failure::Usage(m)) if m == "the store must be `sqlite:<path>` or a postgres:// URL"
        ));
    }
}
