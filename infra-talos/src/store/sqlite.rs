//! The embedded store on SQLite.
//!
//! One connection, and every transaction opened with `BEGIN IMMEDIATE`: transactions
//! run one at a time, which gives the ordering the PostgreSQL store gets from its row
//! locks. The same partial unique indexes and append-only triggers apply.

use std::path::Path;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

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

/// The versioned migrations, applied in order on start.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "contract_store",
        include_str!("../../migrations/sqlite/0001_contract_store.sql"),
    ),
    (
        2,
        "sealed_bindings_and_records",
        include_str!("../../migrations/sqlite/0002_sealed_bindings_and_records.sql"),
    ),
    (
        3,
        "blanket_approvals",
        include_str!("../../migrations/sqlite/0003_blanket_approvals.sql"),
    ),
];

/// The schema version this build migrates to.
pub const SCHEMA_VERSION: i64 = 3;

/// The embedded controller store on SQLite.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: sqlx::SqlitePool,
    settings: Settings,
}

impl SqliteStore {
    /// Open (creating if needed) the database file at `path` and apply pending
    /// migrations.
    ///
    /// # Errors
    ///
    /// [`super::StoreError::Database`] when the file cannot be opened or migrated.
    pub async fn open(path: &Path) -> StoreResult<Self> {
        Self::build(file_options(path), Settings::default(), SCHEMA_VERSION).await
    }

    /// A store in memory, gone when dropped.
    ///
    /// # Errors
    ///
    /// As [`SqliteStore::open`].
    pub async fn in_memory() -> StoreResult<Self> {
        Self::build(memory_options(), Settings::default(), SCHEMA_VERSION).await
    }

    /// A store with test settings (guards, clock, hooks); in memory without a path.
    ///
    /// # Errors
    ///
    /// As [`SqliteStore::open`].
    #[cfg(feature = "controls")]
    #[doc(hidden)]
    pub async fn open_for_tests(path: Option<&Path>, settings: Settings) -> StoreResult<Self> {
        let options = path.map_or_else(memory_options, file_options);
        Self::build(options, settings, SCHEMA_VERSION).await
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
        let options = path.map_or_else(memory_options, file_options);
        Self::build(options, settings, version).await
    }

    async fn build(
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
            .map_err(db_err)?;
        migrate(&pool, upto).await?;
        if !settings.guards.scope_index {
            for sql in [
                "DROP INDEX operations_machine_scope",
                "DROP INDEX operations_rollout_slot",
            ] {
                sqlx::query(sql).execute(&pool).await.map_err(db_err)?;
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

fn file_options(path: &Path) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
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

/// With one connection and immediate transactions nothing is aborted for a retry.
fn retryable(_e: &sqlx::Error) -> bool {
    false
}

/// The comparison a unique-index violation stands for (SQLite names the columns).
fn unique_comparison(e: &sqlx::Error) -> Option<u8> {
    let db = e.as_database_error()?;
    if !db.is_unique_violation() {
        return None;
    }
    let message = db.message();
    if message.contains("operations.plan_id") {
        Some(0)
    } else if message.contains("operations.machine_id") {
        Some(4)
    } else if message.contains("operations.rollout_scope") {
        Some(5)
    } else {
        None
    }
}

include!("body.rs");
