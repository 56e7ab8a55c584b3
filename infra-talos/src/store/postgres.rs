//! The store on PostgreSQL.
//!
//! Transactions run at the default isolation (read committed) and rely on row locks:
//! the machine row `FOR UPDATE` orders everything on a machine and guards its
//! revision counter (§4.1); commitment and attempt transactions read the approval,
//! the approver's principal row and the installation row (epoch, recovery mode)
//! `FOR SHARE`, so a revocation or a recovery-mode entry waits for them or precedes
//! them. Partial unique indexes hold the machine scope and the rollout slot, and a
//! unique plan reference holds one operation per plan. A transaction is retried only
//! when PostgreSQL aborted it for a serialization failure or a deadlock.

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::postgres_url_without_password;

type Db = sqlx::Postgres;
type DbRow = sqlx::postgres::PgRow;
type Backend = PgStore;

macro_rules! for_update {
    () => {
        " FOR UPDATE"
    };
}

macro_rules! for_share {
    () => {
        " FOR SHARE"
    };
}

macro_rules! now_sql {
    () => {
        "SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT"
    };
}

/// The versioned migrations, applied in order on start (`super::migrations`).
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "contract_store",
        sql: include_str!("../../migrations/postgres/0001_contract_store.sql"),
    },
    Migration {
        version: 2,
        name: "sealed_bindings_and_records",
        sql: include_str!("../../migrations/postgres/0002_sealed_bindings_and_records.sql"),
    },
    Migration {
        version: 3,
        name: "blanket_approvals",
        sql: include_str!("../../migrations/postgres/0003_blanket_approvals.sql"),
    },
    Migration {
        version: 4,
        name: "not_null_identifiers",
        sql: include_str!("../../migrations/postgres/0004_not_null_identifiers.sql"),
    },
    Migration {
        version: 5,
        name: "recovery_scopes",
        sql: include_str!("../../migrations/postgres/0005_recovery_scopes.sql"),
    },
];

/// The schema version this build migrates to.
pub const SCHEMA_VERSION: i64 = 5;

/// The controller's store on PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: sqlx::PgPool,
    settings: Settings,
}

impl PgStore {
    /// Connect to `url`, apply pending migrations, and return the store.
    ///
    /// # Errors
    ///
    /// [`super::StoreError::Open`], naming the URL without its password, when the URL
    /// is not one, the database cannot be reached or migrated, or it is refused as it
    /// is (a newer schema version, a changed migration: [`super::OpenProblem`]).
    pub async fn connect(url: &str) -> StoreResult<Self> {
        let store = postgres_url_without_password(url);
        let options: PgConnectOptions = url
            .parse()
            .map_err(|e| StoreError::open_failed(&store, "is not a PostgreSQL URL", e))?;
        Self::open(&store, options, 8, Settings::default(), SCHEMA_VERSION).await
    }

    /// Like [`PgStore::connect`], with explicit connection options and pool size.
    ///
    /// # Errors
    ///
    /// As [`PgStore::connect`]; the database is named by user, host, port and
    /// database.
    pub async fn connect_with(options: PgConnectOptions, pool_size: u32) -> StoreResult<Self> {
        let store = options_display(&options);
        Self::open(
            &store,
            options,
            pool_size,
            Settings::default(),
            SCHEMA_VERSION,
        )
        .await
    }

    /// A store with test settings (guards, clock, hooks).
    ///
    /// # Errors
    ///
    /// As [`PgStore::connect`].
    #[cfg(feature = "controls")]
    #[doc(hidden)]
    pub async fn connect_for_tests(
        options: PgConnectOptions,
        pool_size: u32,
        settings: Settings,
    ) -> StoreResult<Self> {
        let store = options_display(&options);
        Self::open(&store, options, pool_size, settings, SCHEMA_VERSION).await
    }

    /// A store with test settings whose schema is migrated only up to `version`,
    /// for tests of the migrations themselves.
    ///
    /// # Errors
    ///
    /// As [`PgStore::connect`].
    #[cfg(feature = "controls")]
    #[doc(hidden)]
    pub async fn connect_at_version_for_tests(
        options: PgConnectOptions,
        pool_size: u32,
        settings: Settings,
        version: i64,
    ) -> StoreResult<Self> {
        let store = options_display(&options);
        Self::open(&store, options, pool_size, settings, version).await
    }

    async fn open(
        store: &str,
        options: PgConnectOptions,
        pool_size: u32,
        settings: Settings,
        upto: i64,
    ) -> StoreResult<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(pool_size.max(1))
            .connect_with(options)
            .await
            .map_err(|e| StoreError::open_failed(store, "cannot be connected to", e))?;
        migrate(&pool, upto, store).await?;
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

    /// The connection pool.
    #[must_use]
    pub fn pool(&self) -> &sqlx::PgPool {
        &self.pool
    }
}

/// Connection options as errors name them: user, host (or socket), port and
/// database; never the password.
fn options_display(options: &PgConnectOptions) -> String {
    let host = options.get_socket().map_or_else(
        || options.get_host().to_owned(),
        |socket| socket.display().to_string(),
    );
    format!(
        "postgres://{}@{host}:{}/{}",
        options.get_username(),
        options.get_port(),
        options.get_database().unwrap_or_default()
    )
}

async fn begin(pool: &sqlx::PgPool) -> Result<sqlx::Transaction<'static, Db>, sqlx::Error> {
    pool.begin().await
}

async fn migration_lock(tx: &mut sqlx::Transaction<'static, Db>) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_advisory_xact_lock(7243110042)")
        .execute(&mut **tx)
        .await
        .map(|_| ())
}

/// Adds the checksum column to a bookkeeping table made before checksums were
/// recorded.
async fn ensure_checksum_column(
    tx: &mut sqlx::Transaction<'static, Db>,
) -> Result<(), sqlx::Error> {
    sqlx::query("ALTER TABLE store_migrations ADD COLUMN IF NOT EXISTS checksum TEXT")
        .execute(&mut **tx)
        .await
        .map(|_| ())
}

/// Foreign keys are enforced statement by statement on PostgreSQL: nothing to check
/// after migrating.
async fn check_references(_tx: &mut sqlx::Transaction<'static, Db>) -> Result<(), sqlx::Error> {
    Ok(())
}

/// Serialization failures and deadlocks: the aborts PostgreSQL asks us to retry.
fn retryable(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|c| c == "40001" || c == "40P01")
}

/// The comparison a unique-index violation stands for.
fn unique_comparison(e: &sqlx::Error) -> Option<Comparison> {
    let db = e.as_database_error()?;
    if !db.is_unique_violation() {
        return None;
    }
    match db.constraint()? {
        "operations_plan_id_key" => Some(Comparison::PlanHasNoOperation),
        "operations_machine_scope" => Some(Comparison::MachineScope),
        "operations_rollout_slot" => Some(Comparison::RolloutSlot),
        _ => None,
    }
}

include!("body.rs");
