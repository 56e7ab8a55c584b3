//! The embedded store on SQLite.
//!
//! One connection, and every transaction opened with `BEGIN IMMEDIATE`: transactions
//! run one at a time, which gives the ordering the PostgreSQL store gets from its row
//! locks. The same partial unique indexes and append-only triggers apply.

use std::path::Path;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

use super::OpenProblem;
use super::sqlite_file;

type Db = sqlx::Sqlite;
type DbRow = sqlx::sqlite::SqliteRow;
type Backend = SqliteStore;

macro_rules! for_update {
    () => {
        ""
    };
}

macro_rules! for_share {
    () => {
        ""
    };
}

macro_rules! now_sql {
    () => {
        "SELECT CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"
    };
}

/// The versioned migrations, applied in order on start (`super::migrations`).
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "contract_store",
        sql: include_str!("../../migrations/sqlite/0001_contract_store.sql"),
    },
    Migration {
        version: 2,
        name: "sealed_bindings_and_records",
        sql: include_str!("../../migrations/sqlite/0002_sealed_bindings_and_records.sql"),
    },
    Migration {
        version: 3,
        name: "blanket_approvals",
        sql: include_str!("../../migrations/sqlite/0003_blanket_approvals.sql"),
    },
    Migration {
        version: 4,
        name: "not_null_identifiers",
        sql: include_str!("../../migrations/sqlite/0004_not_null_identifiers.sql"),
    },
    Migration {
        version: 5,
        name: "recovery_scopes",
        sql: include_str!("../../migrations/sqlite/0005_recovery_scopes.sql"),
    },
];

/// The schema version this build migrates to.
pub const SCHEMA_VERSION: i64 = 5;

/// The embedded controller store on SQLite.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: sqlx::SqlitePool,
    settings: Settings,
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
        if !settings.guards.scope_index {
            for sql in [
                "DROP INDEX operations_machine_scope",
                "DROP INDEX operations_rollout_slot",
            ] {
                sqlx::query(sql)
                    .execute(&pool)
                    .await
                    .map_err(|e| StoreError::open_failed(store, "cannot drop a scope index", e))?;
            }
        }
        Ok(Self { pool, settings })
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
    let migrated = migrate(pool, upto, store).await;
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

async fn begin(pool: &sqlx::SqlitePool) -> Result<sqlx::Transaction<'static, Db>, sqlx::Error> {
    pool.begin_with("BEGIN IMMEDIATE").await
}

async fn migration_lock(_tx: &mut sqlx::Transaction<'static, Db>) -> Result<(), sqlx::Error> {
    Ok(())
}

/// Adds the checksum column to a bookkeeping table made before checksums were
/// recorded.
async fn ensure_checksum_column(
    tx: &mut sqlx::Transaction<'static, Db>,
) -> Result<(), sqlx::Error> {
    let present: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM pragma_table_info('store_migrations') WHERE name = 'checksum'",
    )
    .fetch_one(&mut **tx)
    .await?;
    if present == 0 {
        sqlx::query("ALTER TABLE store_migrations ADD COLUMN checksum TEXT")
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// Every reference resolves after migrating (enforcement is off while migrating:
/// `migrate_without_enforcement`).
async fn check_references(tx: &mut sqlx::Transaction<'static, Db>) -> Result<(), sqlx::Error> {
    let broken = sqlx::query("PRAGMA foreign_key_check")
        .fetch_all(&mut **tx)
        .await?;
    if broken.is_empty() {
        Ok(())
    } else {
        Err(sqlx::Error::Protocol(format!(
            "{} row(s) refer to rows that do not exist",
            broken.len()
        )))
    }
}

/// With one connection and immediate transactions nothing is aborted for a retry.
fn retryable(_e: &sqlx::Error) -> bool {
    false
}

/// The comparison a unique-index violation stands for (SQLite names the columns).
fn unique_comparison(e: &sqlx::Error) -> Option<Comparison> {
    let db = e.as_database_error()?;
    if !db.is_unique_violation() {
        return None;
    }
    let message = db.message();
    if message.contains("operations.plan_id") {
        Some(Comparison::PlanHasNoOperation)
    } else if message.contains("operations.machine_id") {
        Some(Comparison::MachineScope)
    } else if message.contains("operations.rollout_scope") {
        Some(Comparison::RolloutSlot)
    } else {
        None
    }
}

include!("body.rs");
