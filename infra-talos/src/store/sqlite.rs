//! The embedded store on SQLite.
//!
//! One connection, and every transaction opened with `BEGIN IMMEDIATE`: transactions
//! run one at a time, which gives the ordering the PostgreSQL store gets from its row
//! locks. The same partial unique indexes and append-only triggers apply.

use std::path::Path;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

use super::engine::{OnEngine, SqlStore};
use super::migrate::migrate;
use super::migrations::SQLITE as MIGRATIONS;
use super::sql::Pool;
use super::sqlite_file;
use super::{OpenProblem, Settings, StoreError, StoreResult};

/// The schema version this build migrates to.
pub const SCHEMA_VERSION: i64 = 10;

/// The embedded controller store on SQLite. Its acts are the shared engine's
/// ([`Store`](super::Store)).
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: sqlx::SqlitePool,
    engine: SqlStore,
}

impl OnEngine for SqliteStore {
    fn engine(&self) -> &SqlStore {
        &self.engine
    }
}

/// Whether opening a store may create its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IfMissing {
    Refuse,
    Create,
}

impl SqliteStore {
    /// Open the existing store file at `path` and apply pending migrations. A
    /// missing file is refused ([`SqliteStore::open_or_create`] makes one).
    ///
    /// Before anything is written the file is read without changing it, and it is
    /// refused, left as it was, when it holds another application's tables, is at a
    /// schema version newer than this build's, or records a migration whose checksum
    /// is not this build's ([`super::OpenProblem`]).
    ///
    /// # Errors
    ///
    /// [`super::StoreError::Open`], naming the path, for each refusal above and when
    /// the file cannot be read, opened or migrated.
    pub async fn open(path: &Path) -> StoreResult<Self> {
        Self::open_file(path, IfMissing::Refuse, Settings::default(), SCHEMA_VERSION).await
    }

    /// Like [`SqliteStore::open`], but a missing file is created as a new store.
    ///
    /// # Errors
    ///
    /// As [`SqliteStore::open`], except for a missing file.
    pub async fn open_or_create(path: &Path) -> StoreResult<Self> {
        Self::open_file(path, IfMissing::Create, Settings::default(), SCHEMA_VERSION).await
    }

    /// A store in memory, gone when dropped.
    ///
    /// # Errors
    ///
    /// As [`SqliteStore::open`].
    pub async fn in_memory() -> StoreResult<Self> {
        Self::build(
            MEMORY,
            memory_options(),
            Settings::default(),
            SCHEMA_VERSION,
        )
        .await
    }

    /// A store with test settings (guards, clock, hooks); in memory without a path,
    /// the file created if missing.
    ///
    /// # Errors
    ///
    /// As [`SqliteStore::open`].
    #[cfg(feature = "controls")]
    #[doc(hidden)]
    pub async fn open_for_tests(path: Option<&Path>, settings: Settings) -> StoreResult<Self> {
        Self::open_at_version_for_tests(path, settings, SCHEMA_VERSION).await
    }

    /// Like [`SqliteStore::open_for_tests`], with the schema migrated only up to
    /// `version`, for tests of the migrations themselves.
    ///
    /// # Errors
    ///
    /// As [`SqliteStore::open`].
    #[cfg(feature = "controls")]
    #[doc(hidden)]
    pub async fn open_at_version_for_tests(
        path: Option<&Path>,
        settings: Settings,
        version: i64,
    ) -> StoreResult<Self> {
        match path {
            Some(path) => Self::open_file(path, IfMissing::Create, settings, version).await,
            None => Self::build(MEMORY, memory_options(), settings, version).await,
        }
    }

    /// Checks what the file holds (`super::sqlite_file`), then opens it.
    async fn open_file(
        path: &Path,
        if_missing: IfMissing,
        settings: Settings,
        upto: i64,
    ) -> StoreResult<Self> {
        let store = sqlite_file::display(path);
        if names_no_file(path) {
            return Err(StoreError::open(&store, OpenProblem::NotAFile));
        }
        let contents = sqlite_file::inspect(path).await?;
        sqlite_file::refusal(&contents, if_missing == IfMissing::Create, MIGRATIONS)
            .map_err(|p| StoreError::open(&store, p))?;
        let create = contents == sqlite_file::FileContents::Missing;
        Self::build(&store, file_options(path, create), settings, upto).await
    }

    async fn build(
        store: &str,
        options: SqliteConnectOptions,
        settings: Settings,
        upto: i64,
    ) -> StoreResult<Self> {
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options)
            .await
            .map_err(|e| StoreError::open_failed(store, "cannot be opened", e))?;
        migrate_without_enforcement(&pool, upto, store).await?;
        let engine = SqlStore::new(Pool::Sqlite(pool.clone()), settings, store).await?;
        Ok(Self { pool, engine })
    }

    /// The connection pool (one connection).
    #[must_use]
    pub fn pool(&self) -> &sqlx::SqlitePool {
        &self.pool
    }
}

/// How errors name a store in memory.
const MEMORY: &str = "sqlite::memory:";

/// An empty path, or SQLite's `:memory:`: no file.
fn names_no_file(path: &Path) -> bool {
    path.as_os_str().is_empty() || path.as_os_str() == ":memory:"
}

/// Migrates with foreign-key enforcement off, as SQLite asks for a migration that
/// rebuilds a table others refer to; `check_references` verifies every reference
/// before the migration commits. The pool's one connection carries the setting, so
/// it is set back before the store is used.
async fn migrate_without_enforcement(
    pool: &sqlx::SqlitePool,
    upto: i64,
    store: &str,
) -> StoreResult<()> {
    let enforcement = |on: bool| {
        let sql = if on {
            "PRAGMA foreign_keys = ON"
        } else {
            "PRAGMA foreign_keys = OFF"
        };
        async move {
            sqlx::query(sql)
                .execute(pool)
                .await
                .map(|_| ())
                .map_err(|e| {
                    StoreError::open_failed(store, "cannot set foreign-key enforcement", e)
                })
        }
    };
    enforcement(false).await?;
    let migrated = migrate(&Pool::Sqlite(pool.clone()), upto, store).await;
    enforcement(true).await?;
    migrated
}

/// The file's options, in rollback-journal mode; `create` only when the file was
/// found missing and making it was asked for.
fn file_options(path: &Path, create: bool) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(sqlite_file::as_given_to_sqlite(path))
        .create_if_missing(create)
        .journal_mode(SqliteJournalMode::Delete)
        .foreign_keys(true)
}

fn memory_options() -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .in_memory(true)
        .foreign_keys(true)
}
