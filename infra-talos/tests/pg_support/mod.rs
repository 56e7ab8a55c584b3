//! What every PostgreSQL test binary shares: finding the database, and a fresh schema
//! per test that is dropped when the test ends.

use std::io::Write as _;
use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

const URL_VAR: &str = "INFRA_TEST_DATABASE_URL";

/// The database to test against. Without one, a loud skip line for `what` (or a
/// failure when `CI=true`: the PostgreSQL tests must run in CI).
pub(crate) fn database_url(what: &str) -> Option<String> {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{URL_VAR} is not set and CI=true: the PostgreSQL {what} must run in CI"
            );
            // Written past the test harness's capture so the skip is always seen.
            let _ = writeln!(
                std::io::stderr(),
                "!!! SKIPPED: PostgreSQL {what} — set {URL_VAR} to run it against a database !!!"
            );
            None
        }
    }
}

/// A fresh schema for one test, dropped when the test ends.
pub(crate) struct Schema {
    url: String,
    name: String,
}

impl Schema {
    /// The schema's name.
    #[allow(dead_code, reason = "only the restore test dumps a schema by name")]
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let (url, name) = (self.url.clone(), self.name.clone());
        // Drop runs inside the test's runtime; use a thread with its own runtime.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                if let Ok(pool) = PgPoolOptions::new().max_connections(1).connect(&url).await {
                    let sql = sqlx::AssertSqlSafe(format!("DROP SCHEMA IF EXISTS {name} CASCADE"));
                    let _ = sqlx::query(sql).execute(&pool).await;
                    pool.close().await;
                }
            });
        })
        .join();
    }
}

/// Creates a schema named `<prefix>_<random>` and the options that connect into it.
pub(crate) async fn schema(url: &str, prefix: &str) -> (Schema, PgConnectOptions) {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).unwrap();
    let name = format!(
        "{prefix}_{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    );
    let admin = PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let options = PgConnectOptions::from_str(url)
        .unwrap()
        .application_name(&name)
        .options([("search_path", name.as_str())]);
    (
        Schema {
            url: url.to_owned(),
            name,
        },
        options,
    )
}
