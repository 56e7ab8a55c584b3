//! A real PostgreSQL for the tests of the `postgres` feature: the server named by
//! `INFRA_TEST_DATABASE_URL` (a role that may create databases), and a database of its
//! own per test, dropped with its sessions when the test ends, so that tests run in
//! parallel. Without the variable a test prints a loud skip line, and fails when
//! `CI=true`: the PostgreSQL tests must run in CI.

use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::Connection as _;
use sqlx::postgres::PgConnection;

/// The variable naming the server.
pub const URL_VAR: &str = "INFRA_TEST_DATABASE_URL";

/// The server to test against. Without one, a loud skip line for `what` (or a failure
/// when `CI=true`).
pub fn database_url(what: &str) -> Option<String> {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{URL_VAR} is not set and CI=true: the PostgreSQL test `{what}` must run in CI"
            );
            // Written past the test harness's capture so the skip is always seen.
            let _ = writeln!(
                std::io::stderr(),
                "!!! SKIPPED: PostgreSQL test `{what}` — set {URL_VAR} to run it against a database !!!"
            );
            None
        }
    }
}

/// Runs a future to its end on a thread and runtime of its own, whatever runtime (or
/// none) the caller is in.
pub fn block<F: Future + Send>(f: F) -> F::Output
where
    F::Output: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(f)
        })
        .join()
        .expect("no panic")
    })
}

/// `url` pointing at database `name` instead.
pub fn with_database(url: &str, name: &str) -> String {
    let (head, query) = url
        .split_once('?')
        .map_or((url, None), |(h, q)| (h, Some(q)));
    let start = head.find("://").map_or(0, |i| i + 3);
    let end = head[start..].find('/').map_or(head.len(), |i| start + i);
    let mut out = format!("{}/{name}", &head[..end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// A name no other test (or run) uses.
#[allow(
    clippy::disallowed_methods,
    reason = "a name unique across runs, not a time the engine reads"
)]
pub fn unique(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}_{}_{nanos:x}_{n}", std::process::id())
}

/// Runs the statements `sql` at `url`, panicking with them on an error.
pub fn sql(url: &str, sql: &str) {
    try_sql(url, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Runs the statements `sql` at `url`.
pub fn try_sql(url: &str, sql: &str) -> Result<(), sqlx::Error> {
    let sql = sqlx::AssertSqlSafe(sql.to_owned());
    block(async {
        let mut conn = PgConnection::connect(url).await?;
        sqlx::raw_sql(sql).execute(&mut conn).await?;
        conn.close().await
    })
}

/// A fresh database for one test, dropped (with its sessions) when the test ends.
pub struct Db {
    admin: String,
    /// The database's name.
    pub name: String,
    /// A URL of the server's, pointing at this database.
    pub url: String,
}

impl Db {
    /// A database named after `test` (and unique), on the server `admin` reaches.
    pub fn new(admin: &str, test: &str) -> Db {
        let name = unique(&format!("infra_pg_{}", test.replace('-', "_")));
        sql(admin, &format!("CREATE DATABASE {name}"));
        Db {
            admin: admin.to_owned(),
            url: with_database(admin, &name),
            name,
        }
    }

    /// Runs the statements `sql` in this database.
    pub fn sql(&self, sql: &str) {
        self::sql(&self.url, sql);
    }

    /// The first column of the first row of `query`, as text.
    pub fn text(&self, query: &str) -> String {
        let query = sqlx::AssertSqlSafe(format!("SELECT ({query})::text"));
        block(async {
            let mut conn = PgConnection::connect(&self.url).await.expect("connect");
            sqlx::query_scalar::<_, String>(query)
                .fetch_one(&mut conn)
                .await
                .expect("query")
        })
    }

    /// A count the database answers to `query`.
    pub fn count(&self, query: &str) -> i64 {
        self.text(query).parse().expect("a count")
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        if let Err(e) = try_sql(&self.admin, &sql) {
            eprintln!("could not drop test database {}: {e}", self.name);
        }
    }
}
