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

use super::engine::{OnEngine, SqlStore};
use super::migrate::migrate;
use super::sql::Pool;
use super::{Settings, StoreError, StoreResult, postgres_url_without_password};

/// The schema version this build migrates to.
pub const SCHEMA_VERSION: i64 = 10;

/// The controller's store on PostgreSQL. Its acts are the shared engine's
/// ([`Store`](super::Store)).
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: sqlx::PgPool,
    engine: SqlStore,
}

impl OnEngine for PgStore {
    fn engine(&self) -> &SqlStore {
        &self.engine
    }
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
        let engine_pool = Pool::Postgres(pool.clone());
        migrate(&engine_pool, upto, store).await?;
        let engine = SqlStore::new(engine_pool, settings, store).await?;
        Ok(Self { pool, engine })
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
