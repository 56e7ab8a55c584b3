//! The dialect layer: the one place where the store's PostgreSQL and SQLite backends
//! differ, so that every transaction above it is written, and compiled, once.
//!
//! - [`Dialect`] holds the differences as data: the store-time query, which errors
//!   are retried, which unique index stands for which comparison (§3.2 comparisons 0,
//!   4 and 5), the migrations and their hooks (lock, checksum column, reference
//!   check).
//! - [`Pool`], [`Tx`] and [`Conn`] are a pool, a transaction and a connection of
//!   either backend. A transaction on SQLite begins with `BEGIN IMMEDIATE`, so
//!   transactions run one at a time, which gives the ordering PostgreSQL gets from
//!   its row locks.
//! - [`Statement`] is a statement with its arguments ([`Arg`]), bound to the concrete
//!   driver's query only when it runs; [`Row`] is a row of either backend, read with
//!   [`Row::try_get`].
//!
//! **Lock clauses.** Statement texts are written as PostgreSQL runs them, a row lock
//! (`FOR UPDATE`, `FOR SHARE`, or several naming their tables, `FOR UPDATE OF m FOR
//! SHARE OF i`) always as the text's last words. SQLite has no row locks and would
//! reject the clauses; its dialect runs the text without them ([`Dialect::text`]),
//! which is a slice of the same static text, so nothing is built or cached per
//! statement. Every other word runs as written on both, but for the few texts
//! [`Dialect::pick`] chooses between (the clock's expression differs).

#[cfg(feature = "controls")]
use sqlx::Column as _;
use sqlx::Row as _;
#[cfg(feature = "postgres")]
use sqlx::postgres::{PgArguments, PgPool, PgRow, Postgres};
use sqlx::query::Query;
#[cfg(feature = "sqlite")]
use sqlx::sqlite::{Sqlite, SqliteArguments, SqlitePool, SqliteRow};
use sqlx::{ColumnIndex, Decode, Type};

use super::migrations::{self, Migration};
use crate::contract::comparison::Comparison;

/// PostgreSQL's clock in milliseconds since the epoch, as an expression.
macro_rules! pg_now {
    () => {
        "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT"
    };
}
pub(super) use pg_now;

/// SQLite's clock in milliseconds since the epoch, as an expression.
macro_rules! sqlite_now {
    () => {
        "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"
    };
}
pub(super) use sqlite_now;

/// The row-lock clauses a statement may end with (see the module documentation),
/// each perhaps followed by `OF` and the tables it locks.
#[cfg(feature = "sqlite")]
const LOCK_CLAUSES: [&str; 2] = [" FOR UPDATE", " FOR SHARE"];

/// `sql` without the lock clauses it closes with: one or more of [`LOCK_CLAUSES`],
/// each perhaps naming its tables (`FOR UPDATE OF m FOR SHARE OF i`).
#[cfg(feature = "sqlite")]
fn without_lock_clauses(sql: &'static str) -> &'static str {
    let mut cut = sql.len();
    while let Some((at, len)) = LOCK_CLAUSES
        .iter()
        .filter_map(|clause| sql[..cut].rfind(clause).map(|at| (at, clause.len())))
        .max()
    {
        if !names_tables_or_nothing(&sql[at + len..cut]) {
            break;
        }
        cut = at;
    }
    &sql[..cut]
}

/// Whether what follows a lock clause's words is nothing, or `OF` and table names.
#[cfg(feature = "sqlite")]
fn names_tables_or_nothing(rest: &str) -> bool {
    let rest = rest.trim_end();
    if rest.is_empty() {
        return true;
    }
    rest.strip_prefix(" OF ").is_some_and(|names| {
        names.split(',').all(|name| {
            let name = name.trim();
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    })
}

/// Which database a store runs on, and what differs between the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    /// PostgreSQL: read committed, row locks, retries on serialization failures.
    #[cfg(feature = "postgres")]
    Postgres,
    /// SQLite: one connection, `BEGIN IMMEDIATE`, no row locks and no retries.
    #[cfg(feature = "sqlite")]
    Sqlite,
}

impl Dialect {
    /// `sql` as this dialect runs it: on SQLite without a closing lock clause.
    pub(super) fn text(self, sql: &'static str) -> &'static str {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres => sql,
            #[cfg(feature = "sqlite")]
            Self::Sqlite => without_lock_clauses(sql),
        }
    }

    /// The query that reads the database's clock, in milliseconds since the epoch.
    pub(super) fn now_sql(self) -> &'static str {
        self.pick(
            concat!("SELECT ", pg_now!()),
            concat!("SELECT ", sqlite_now!()),
        )
    }

    /// `postgres` on PostgreSQL, `sqlite` on SQLite: the two texts of a statement
    /// whose words differ between the databases (the clock's expression, say).
    #[cfg_attr(
        not(all(feature = "postgres", feature = "sqlite")),
        allow(unused_variables, reason = "one of the two is not built")
    )]
    pub(super) fn pick(self, postgres: &'static str, sqlite: &'static str) -> &'static str {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres => postgres,
            #[cfg(feature = "sqlite")]
            Self::Sqlite => sqlite,
        }
    }

    /// Whether a statement may carry data-modifying `WITH` clauses (PostgreSQL), so
    /// that an act's writes go to the database as one statement; SQLite has none and
    /// runs them one after another, which costs it no round trip.
    pub(super) fn writes_in_one_statement(self) -> bool {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres => true,
            #[cfg(feature = "sqlite")]
            Self::Sqlite => false,
        }
    }

    /// Whether the database takes row locks (`FOR UPDATE`, `FOR SHARE`): PostgreSQL
    /// does; SQLite has none, its one writer at a time orders the transactions.
    pub(super) fn locks_rows(self) -> bool {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres => true,
            #[cfg(feature = "sqlite")]
            Self::Sqlite => false,
        }
    }

    /// Whether the database aborted a transaction for a retry: its error code is one
    /// of [`Dialect::retry_codes`].
    pub(super) fn retryable(self, e: &sqlx::Error) -> bool {
        e.as_database_error()
            .and_then(|d| d.code())
            .is_some_and(|code| self.retry_codes().contains(&code.as_ref()))
    }

    /// The error codes of the aborts the database asks to retry: on PostgreSQL a
    /// serialization failure (`40001`) or a deadlock (`40P01`); with SQLite's one
    /// connection and immediate transactions nothing is aborted for a retry.
    fn retry_codes(self) -> &'static [&'static str] {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres => &["40001", "40P01"],
            #[cfg(feature = "sqlite")]
            Self::Sqlite => &[],
        }
    }

    /// The comparison a unique-index violation stands for (§3.2: 0 the plan's one
    /// operation, 4 the machine scope, 5 the rollout slot). PostgreSQL names the
    /// index; SQLite names the columns.
    pub(super) fn unique_comparison(self, e: &sqlx::Error) -> Option<Comparison> {
        let db = e.as_database_error()?;
        if !db.is_unique_violation() {
            return None;
        }
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres => match db.constraint()? {
                "operations_plan_id_key" => Some(Comparison::PlanHasNoOperation),
                "operations_machine_scope" => Some(Comparison::MachineScope),
                "operations_rollout_slot" => Some(Comparison::RolloutSlot),
                _ => None,
            },
            #[cfg(feature = "sqlite")]
            Self::Sqlite => {
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
        }
    }

    /// This build's migrations for the dialect (`migrations/postgres/`,
    /// `migrations/sqlite/`).
    pub(super) fn migrations(self) -> &'static [Migration] {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres => migrations::POSTGRES,
            #[cfg(feature = "sqlite")]
            Self::Sqlite => migrations::SQLITE,
        }
    }

    /// The statement that serialises migrating stores: PostgreSQL's transaction-scoped
    /// advisory lock; SQLite's immediate transaction already runs alone.
    pub(super) fn migration_lock(self) -> Option<&'static str> {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres => Some("SELECT pg_advisory_xact_lock(7243110042)"),
            #[cfg(feature = "sqlite")]
            Self::Sqlite => None,
        }
    }

    /// How the checksum column is added to a bookkeeping table made before
    /// checksums were recorded.
    pub(super) fn checksum_column(self) -> ChecksumColumn {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres => ChecksumColumn {
                present: None,
                add: "ALTER TABLE store_migrations ADD COLUMN IF NOT EXISTS checksum TEXT",
            },
            #[cfg(feature = "sqlite")]
            Self::Sqlite => ChecksumColumn {
                present: Some(
                    "SELECT COUNT(*) FROM pragma_table_info('store_migrations') \
                     WHERE name = 'checksum'",
                ),
                add: "ALTER TABLE store_migrations ADD COLUMN checksum TEXT",
            },
        }
    }

    /// The query listing rows whose references do not resolve, run after migrating:
    /// SQLite migrates with enforcement off (`super::sqlite`); PostgreSQL enforces
    /// foreign keys statement by statement, so there is nothing to check.
    pub(super) fn reference_check(self) -> Option<&'static str> {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres => None,
            #[cfg(feature = "sqlite")]
            Self::Sqlite => Some("PRAGMA foreign_key_check"),
        }
    }
}

/// How a dialect makes sure the bookkeeping table has its checksum column.
#[derive(Debug, Clone, Copy)]
pub(super) struct ChecksumColumn {
    /// A query counting the column, run first where `add` would fail on a table that
    /// has it (SQLite has no `ADD COLUMN IF NOT EXISTS`).
    pub(super) present: Option<&'static str>,
    /// The statement adding the column.
    pub(super) add: &'static str,
}

/// A connection pool of either backend.
#[derive(Debug, Clone)]
pub(super) enum Pool {
    /// PostgreSQL's.
    #[cfg(feature = "postgres")]
    Postgres(PgPool),
    /// SQLite's (one connection).
    #[cfg(feature = "sqlite")]
    Sqlite(SqlitePool),
}

impl Pool {
    /// The pool's dialect.
    pub(super) fn dialect(&self) -> Dialect {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(_) => Dialect::Postgres,
            #[cfg(feature = "sqlite")]
            Self::Sqlite(_) => Dialect::Sqlite,
        }
    }

    /// Begins a transaction: at PostgreSQL's default isolation (read committed), or
    /// with SQLite's `BEGIN IMMEDIATE`.
    pub(super) async fn begin(&self) -> Result<Tx, sqlx::Error> {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(pool) => Ok(Tx::Postgres(pool.begin().await?)),
            #[cfg(feature = "sqlite")]
            Self::Sqlite(pool) => Ok(Tx::Sqlite(pool.begin_with("BEGIN IMMEDIATE").await?)),
        }
    }

    /// One connection of the pool, outside any transaction.
    #[cfg(feature = "controls")]
    pub(super) async fn acquire(&self) -> Result<Conn, sqlx::Error> {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(pool) => Ok(Conn::Postgres(pool.acquire().await?)),
            #[cfg(feature = "sqlite")]
            Self::Sqlite(pool) => Ok(Conn::Sqlite(pool.acquire().await?)),
        }
    }

    /// Runs `statement` outside any transaction; the rows it returns (the inventory
    /// lookups, which exist with the backend).
    #[cfg(feature = "grpc")]
    pub(super) async fn fetch_all(&self, statement: Statement) -> Result<Vec<Row>, sqlx::Error> {
        statement.run_fetch_all(On::Pool(self)).await
    }

    /// Runs `statement` outside any transaction; the row it returns, if any (the
    /// inventory lookups).
    #[cfg(feature = "grpc")]
    pub(super) async fn fetch_optional(
        &self,
        statement: Statement,
    ) -> Result<Option<Row>, sqlx::Error> {
        statement.run_fetch_optional(On::Pool(self)).await
    }

    /// Runs `statement` outside any transaction; the one row it returns.
    pub(super) async fn fetch_one(&self, statement: Statement) -> Result<Row, sqlx::Error> {
        statement.run_fetch_one(On::Pool(self)).await
    }

    /// Runs `statement` outside any transaction; the number of rows it changed.
    pub(super) async fn execute(&self, statement: Statement) -> Result<u64, sqlx::Error> {
        statement.run_execute(On::Pool(self)).await
    }
}

/// A transaction of either backend; dropped without [`Tx::commit`], it rolls back.
#[derive(Debug)]
pub(super) enum Tx {
    /// On PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres(sqlx::Transaction<'static, Postgres>),
    /// On SQLite.
    #[cfg(feature = "sqlite")]
    Sqlite(sqlx::Transaction<'static, Sqlite>),
}

impl Tx {
    /// The transaction's dialect.
    pub(super) fn dialect(&self) -> Dialect {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(_) => Dialect::Postgres,
            #[cfg(feature = "sqlite")]
            Self::Sqlite(_) => Dialect::Sqlite,
        }
    }

    /// Commits.
    pub(super) async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(tx) => tx.commit().await,
            #[cfg(feature = "sqlite")]
            Self::Sqlite(tx) => tx.commit().await,
        }
    }

    /// Rolls back.
    pub(super) async fn rollback(self) -> Result<(), sqlx::Error> {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(tx) => tx.rollback().await,
            #[cfg(feature = "sqlite")]
            Self::Sqlite(tx) => tx.rollback().await,
        }
    }

    /// Runs a script of several statements without arguments, as written (a
    /// migration).
    pub(super) async fn execute_script(&mut self, sql: &'static str) -> Result<(), sqlx::Error> {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(tx) => sqlx::raw_sql(sql).execute(&mut **tx).await.map(|_| ()),
            #[cfg(feature = "sqlite")]
            Self::Sqlite(tx) => sqlx::raw_sql(sql).execute(&mut **tx).await.map(|_| ()),
        }
    }
}

/// A connection of either backend taken from its pool, outside any transaction.
#[cfg(feature = "controls")]
#[derive(Debug)]
pub(super) enum Conn {
    /// On PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres(sqlx::pool::PoolConnection<Postgres>),
    /// On SQLite.
    #[cfg(feature = "sqlite")]
    Sqlite(sqlx::pool::PoolConnection<Sqlite>),
}

#[cfg(feature = "controls")]
impl Conn {
    /// Runs `statement` on this connection; the rows it returns.
    pub(super) async fn fetch_all(
        &mut self,
        statement: Statement,
    ) -> Result<Vec<Row>, sqlx::Error> {
        statement.run_fetch_all(On::Conn(self)).await
    }
}

/// Where a statement runs.
enum On<'c> {
    Tx(&'c mut Tx),
    Pool(&'c Pool),
    #[cfg(feature = "controls")]
    Conn(&'c mut Conn),
}

/// A value bound to a statement parameter. `None` binds SQL `NULL` of the same type
/// as `Some` would, as sqlx binds an `Option`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Arg {
    /// `BOOLEAN`.
    Bool(bool),
    /// `SMALLINT` (the timeline's comparison number).
    I16(Option<i16>),
    /// `BIGINT`.
    I64(Option<i64>),
    /// `TEXT`.
    Text(Option<String>),
    /// `BYTEA` / `BLOB`.
    Bytes(Option<Vec<u8>>),
}

impl From<bool> for Arg {
    fn from(v: bool) -> Self {
        Self::Bool(v)
    }
}

impl From<Option<i16>> for Arg {
    fn from(v: Option<i16>) -> Self {
        Self::I16(v)
    }
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Self::I64(Some(v))
    }
}

impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Self {
        Self::I64(v)
    }
}

impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Self::Text(Some(v.to_owned()))
    }
}

impl From<String> for Arg {
    fn from(v: String) -> Self {
        Self::Text(Some(v))
    }
}

impl From<&String> for Arg {
    fn from(v: &String) -> Self {
        Self::Text(Some(v.clone()))
    }
}

impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Self::Text(v.map(str::to_owned))
    }
}

impl From<Option<String>> for Arg {
    fn from(v: Option<String>) -> Self {
        Self::Text(v)
    }
}

impl From<&Option<String>> for Arg {
    fn from(v: &Option<String>) -> Self {
        Self::Text(v.clone())
    }
}

impl From<Vec<u8>> for Arg {
    fn from(v: Vec<u8>) -> Self {
        Self::Bytes(Some(v))
    }
}

impl From<&[u8]> for Arg {
    fn from(v: &[u8]) -> Self {
        Self::Bytes(Some(v.to_vec()))
    }
}

/// A statement and its arguments, in order (`$1`, `$2`, …), bound to the driver's
/// query when it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a statement does nothing until it runs"]
pub(super) struct Statement {
    sql: &'static str,
    args: Vec<Arg>,
}

/// The statement `sql`, as PostgreSQL runs it (see the module documentation for lock
/// clauses).
pub(super) fn query(sql: &'static str) -> Statement {
    Statement {
        sql,
        args: Vec::new(),
    }
}

impl Statement {
    /// Binds the next parameter.
    pub(super) fn bind(mut self, value: impl Into<Arg>) -> Self {
        self.args.push(value.into());
        self
    }

    /// Runs in `tx`; the rows returned.
    pub(super) async fn fetch_all(self, tx: &mut Tx) -> Result<Vec<Row>, sqlx::Error> {
        self.run_fetch_all(On::Tx(tx)).await
    }

    /// Runs in `tx`; the row returned, if any.
    pub(super) async fn fetch_optional(self, tx: &mut Tx) -> Result<Option<Row>, sqlx::Error> {
        self.run_fetch_optional(On::Tx(tx)).await
    }

    /// Runs in `tx`; the one row returned (an error if there is none).
    pub(super) async fn fetch_one(self, tx: &mut Tx) -> Result<Row, sqlx::Error> {
        self.run_fetch_one(On::Tx(tx)).await
    }

    /// Runs in `tx`; the number of rows changed.
    pub(super) async fn execute(self, tx: &mut Tx) -> Result<u64, sqlx::Error> {
        self.run_execute(On::Tx(tx)).await
    }

    #[cfg(feature = "postgres")]
    fn postgres(self) -> Query<'static, Postgres, PgArguments> {
        let query = sqlx::query(Dialect::Postgres.text(self.sql));
        self.args.into_iter().fold(query, |q, arg| match arg {
            Arg::Bool(v) => q.bind(v),
            Arg::I16(v) => q.bind(v),
            Arg::I64(v) => q.bind(v),
            Arg::Text(v) => q.bind(v),
            Arg::Bytes(v) => q.bind(v),
        })
    }

    #[cfg(feature = "sqlite")]
    fn sqlite(self) -> Query<'static, Sqlite, SqliteArguments> {
        let query = sqlx::query(Dialect::Sqlite.text(self.sql));
        self.args.into_iter().fold(query, |q, arg| match arg {
            Arg::Bool(v) => q.bind(v),
            Arg::I16(v) => q.bind(v),
            Arg::I64(v) => q.bind(v),
            Arg::Text(v) => q.bind(v),
            Arg::Bytes(v) => q.bind(v),
        })
    }

    async fn run_fetch_all(self, on: On<'_>) -> Result<Vec<Row>, sqlx::Error> {
        fn rows<R>(rows: Vec<R>, wrap: fn(R) -> Row) -> Vec<Row> {
            rows.into_iter().map(wrap).collect()
        }
        match on {
            #[cfg(feature = "postgres")]
            On::Tx(Tx::Postgres(tx)) => Ok(rows(
                self.postgres().fetch_all(&mut **tx).await?,
                Row::Postgres,
            )),
            #[cfg(feature = "sqlite")]
            On::Tx(Tx::Sqlite(tx)) => {
                Ok(rows(self.sqlite().fetch_all(&mut **tx).await?, Row::Sqlite))
            }
            #[cfg(feature = "postgres")]
            On::Pool(Pool::Postgres(pool)) => {
                Ok(rows(self.postgres().fetch_all(pool).await?, Row::Postgres))
            }
            #[cfg(feature = "sqlite")]
            On::Pool(Pool::Sqlite(pool)) => {
                Ok(rows(self.sqlite().fetch_all(pool).await?, Row::Sqlite))
            }
            #[cfg(all(feature = "controls", feature = "postgres"))]
            On::Conn(Conn::Postgres(conn)) => Ok(rows(
                self.postgres().fetch_all(&mut **conn).await?,
                Row::Postgres,
            )),
            #[cfg(all(feature = "controls", feature = "sqlite"))]
            On::Conn(Conn::Sqlite(conn)) => Ok(rows(
                self.sqlite().fetch_all(&mut **conn).await?,
                Row::Sqlite,
            )),
        }
    }

    async fn run_fetch_optional(self, on: On<'_>) -> Result<Option<Row>, sqlx::Error> {
        match on {
            #[cfg(feature = "postgres")]
            On::Tx(Tx::Postgres(tx)) => Ok(self
                .postgres()
                .fetch_optional(&mut **tx)
                .await?
                .map(Row::Postgres)),
            #[cfg(feature = "sqlite")]
            On::Tx(Tx::Sqlite(tx)) => Ok(self
                .sqlite()
                .fetch_optional(&mut **tx)
                .await?
                .map(Row::Sqlite)),
            #[cfg(feature = "postgres")]
            On::Pool(Pool::Postgres(pool)) => Ok(self
                .postgres()
                .fetch_optional(pool)
                .await?
                .map(Row::Postgres)),
            #[cfg(feature = "sqlite")]
            On::Pool(Pool::Sqlite(pool)) => {
                Ok(self.sqlite().fetch_optional(pool).await?.map(Row::Sqlite))
            }
            #[cfg(all(feature = "controls", feature = "postgres"))]
            On::Conn(Conn::Postgres(conn)) => Ok(self
                .postgres()
                .fetch_optional(&mut **conn)
                .await?
                .map(Row::Postgres)),
            #[cfg(all(feature = "controls", feature = "sqlite"))]
            On::Conn(Conn::Sqlite(conn)) => Ok(self
                .sqlite()
                .fetch_optional(&mut **conn)
                .await?
                .map(Row::Sqlite)),
        }
    }

    async fn run_fetch_one(self, on: On<'_>) -> Result<Row, sqlx::Error> {
        match on {
            #[cfg(feature = "postgres")]
            On::Tx(Tx::Postgres(tx)) => {
                Ok(Row::Postgres(self.postgres().fetch_one(&mut **tx).await?))
            }
            #[cfg(feature = "sqlite")]
            On::Tx(Tx::Sqlite(tx)) => Ok(Row::Sqlite(self.sqlite().fetch_one(&mut **tx).await?)),
            #[cfg(feature = "postgres")]
            On::Pool(Pool::Postgres(pool)) => {
                Ok(Row::Postgres(self.postgres().fetch_one(pool).await?))
            }
            #[cfg(feature = "sqlite")]
            On::Pool(Pool::Sqlite(pool)) => Ok(Row::Sqlite(self.sqlite().fetch_one(pool).await?)),
            #[cfg(all(feature = "controls", feature = "postgres"))]
            On::Conn(Conn::Postgres(conn)) => {
                Ok(Row::Postgres(self.postgres().fetch_one(&mut **conn).await?))
            }
            #[cfg(all(feature = "controls", feature = "sqlite"))]
            On::Conn(Conn::Sqlite(conn)) => {
                Ok(Row::Sqlite(self.sqlite().fetch_one(&mut **conn).await?))
            }
        }
    }

    async fn run_execute(self, on: On<'_>) -> Result<u64, sqlx::Error> {
        match on {
            #[cfg(feature = "postgres")]
            On::Tx(Tx::Postgres(tx)) => {
                Ok(self.postgres().execute(&mut **tx).await?.rows_affected())
            }
            #[cfg(feature = "sqlite")]
            On::Tx(Tx::Sqlite(tx)) => Ok(self.sqlite().execute(&mut **tx).await?.rows_affected()),
            #[cfg(feature = "postgres")]
            On::Pool(Pool::Postgres(pool)) => {
                Ok(self.postgres().execute(pool).await?.rows_affected())
            }
            #[cfg(feature = "sqlite")]
            On::Pool(Pool::Sqlite(pool)) => Ok(self.sqlite().execute(pool).await?.rows_affected()),
            #[cfg(all(feature = "controls", feature = "postgres"))]
            On::Conn(Conn::Postgres(conn)) => {
                Ok(self.postgres().execute(&mut **conn).await?.rows_affected())
            }
            #[cfg(all(feature = "controls", feature = "sqlite"))]
            On::Conn(Conn::Sqlite(conn)) => {
                Ok(self.sqlite().execute(&mut **conn).await?.rows_affected())
            }
        }
    }
}

/// A row of either backend.
#[derive(Debug)]
pub(super) enum Row {
    /// From PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres(PgRow),
    /// From SQLite.
    #[cfg(feature = "sqlite")]
    Sqlite(SqliteRow),
}

impl Row {
    /// The value of a column, by name or position, as `T` — any type both drivers
    /// decode ([`Value`]). A column the row does not have is
    /// [`sqlx::Error::ColumnNotFound`].
    pub(super) fn try_get<'r, T: Value<'r>, I: Index>(
        &'r self,
        index: I,
    ) -> Result<T, sqlx::Error> {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(row) => row.try_get(index),
            #[cfg(feature = "sqlite")]
            Self::Sqlite(row) => row.try_get(index),
        }
    }

    /// The names of the row's columns, in order.
    #[cfg(feature = "controls")]
    pub(super) fn column_names(&self) -> Vec<&str> {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(row) => row.columns().iter().map(|c| c.name()).collect(),
            #[cfg(feature = "sqlite")]
            Self::Sqlite(row) => row.columns().iter().map(|c| c.name()).collect(),
        }
    }
}

/// A type every enabled driver decodes a column into.
#[cfg(all(feature = "postgres", feature = "sqlite"))]
pub(super) trait Value<'r>:
    Decode<'r, Postgres> + Type<Postgres> + Decode<'r, Sqlite> + Type<Sqlite>
{
}
#[cfg(all(feature = "postgres", feature = "sqlite"))]
impl<'r, T> Value<'r> for T where
    T: Decode<'r, Postgres> + Type<Postgres> + Decode<'r, Sqlite> + Type<Sqlite>
{
}

/// A type every enabled driver decodes a column into.
#[cfg(all(feature = "postgres", not(feature = "sqlite")))]
pub(super) trait Value<'r>: Decode<'r, Postgres> + Type<Postgres> {}
#[cfg(all(feature = "postgres", not(feature = "sqlite")))]
impl<'r, T> Value<'r> for T where T: Decode<'r, Postgres> + Type<Postgres> {}

/// A type every enabled driver decodes a column into.
#[cfg(all(feature = "sqlite", not(feature = "postgres")))]
pub(super) trait Value<'r>: Decode<'r, Sqlite> + Type<Sqlite> {}
#[cfg(all(feature = "sqlite", not(feature = "postgres")))]
impl<'r, T> Value<'r> for T where T: Decode<'r, Sqlite> + Type<Sqlite> {}

/// A column index every enabled driver's row takes: a name (`&str`) or a position
/// (`usize`).
#[cfg(all(feature = "postgres", feature = "sqlite"))]
pub(super) trait Index: ColumnIndex<PgRow> + ColumnIndex<SqliteRow> {}
#[cfg(all(feature = "postgres", feature = "sqlite"))]
impl<I> Index for I where I: ColumnIndex<PgRow> + ColumnIndex<SqliteRow> {}

/// A column index every enabled driver's row takes: a name (`&str`) or a position
/// (`usize`).
#[cfg(all(feature = "postgres", not(feature = "sqlite")))]
pub(super) trait Index: ColumnIndex<PgRow> {}
#[cfg(all(feature = "postgres", not(feature = "sqlite")))]
impl<I> Index for I where I: ColumnIndex<PgRow> {}

/// A column index every enabled driver's row takes: a name (`&str`) or a position
/// (`usize`).
#[cfg(all(feature = "sqlite", not(feature = "postgres")))]
pub(super) trait Index: ColumnIndex<SqliteRow> {}
#[cfg(all(feature = "sqlite", not(feature = "postgres")))]
impl<I> Index for I where I: ColumnIndex<SqliteRow> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "sqlite")]
    #[test]
    fn sqlite_runs_a_statement_without_its_closing_lock_clause() {
        let d = Dialect::Sqlite;
        assert_eq!(
            d.text("SELECT * FROM m WHERE id = $1 FOR UPDATE"),
            "SELECT * FROM m WHERE id = $1"
        );
        assert_eq!(
            d.text("SELECT * FROM i WHERE id = 1 FOR SHARE"),
            "SELECT * FROM i WHERE id = 1"
        );
        assert_eq!(d.text("SELECT 1"), "SELECT 1");
        assert_eq!(
            d.text("SELECT m.*, i.epoch FROM m, i WHERE m.id = $1 FOR UPDATE OF m FOR SHARE OF i"),
            "SELECT m.*, i.epoch FROM m, i WHERE m.id = $1"
        );
        assert_eq!(
            d.text("SELECT * FROM m, i FOR SHARE OF m, i"),
            "SELECT * FROM m, i"
        );
        // Words after a lock clause that name no tables end no lock clause.
        assert_eq!(
            d.text("SELECT x FROM m FOR UPDATE OR y"),
            "SELECT x FROM m FOR UPDATE OR y"
        );
        // Only the closing clause is a lock clause.
        assert_eq!(
            d.text("SELECT 'FOR UPDATE' AS x"),
            "SELECT 'FOR UPDATE' AS x"
        );
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn postgres_runs_a_statement_as_written() {
        let sql = "SELECT * FROM m WHERE id = $1 FOR UPDATE";
        assert_eq!(Dialect::Postgres.text(sql), sql);
    }

    #[test]
    fn arguments_keep_their_order_and_nulls() {
        let s = query("INSERT INTO t VALUES ($1, $2, $3)")
            .bind("a")
            .bind(None::<String>)
            .bind(7_i64);
        assert_eq!(
            s.args,
            vec![
                Arg::Text(Some("a".into())),
                Arg::Text(None),
                Arg::I64(Some(7))
            ]
        );
    }
}
