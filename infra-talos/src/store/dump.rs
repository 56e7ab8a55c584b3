//! For tests (feature `controls`): every row of every table as text, which the tests
//! search for bytes that must never be stored (§8 invariant 7: no plaintext), and one
//! raw statement, for tests that try what the schema must refuse (the append-only
//! triggers, the unique indexes). Both run outside a transaction.

use crate::store::StoreResult;
use crate::store::common::db_err;
use crate::store::engine::SqlStore;
use crate::store::sql::{Row, query};

/// `(table, query)` for each table, with the query reading all its rows.
macro_rules! dumped {
    ($($table:ident),* $(,)?) => {
        [$((stringify!($table), concat!("SELECT * FROM ", stringify!($table)))),*]
    };
}

/// The tables, in the order a dump lists them, with the query that reads each.
const DUMPED: [(&str, &str); 15] = dumped!(
    installation,
    principals,
    principal_roles,
    machines,
    releases,
    release_contributions,
    artifacts,
    plans,
    approvals,
    operations,
    attempts,
    observation_starts,
    observations,
    dependency_checks,
    timeline,
);

/// Decode any column as text for a dump.
fn cell_text(row: &Row, idx: usize) -> String {
    if let Ok(v) = row.try_get::<Option<String>, _>(idx) {
        return v.unwrap_or_default();
    }
    if let Ok(v) = row.try_get::<Option<i64>, _>(idx) {
        return v.map(|v| v.to_string()).unwrap_or_default();
    }
    if let Ok(v) = row.try_get::<Option<Vec<u8>>, _>(idx) {
        return v
            .map(|b| {
                format!(
                    "{} {}",
                    String::from_utf8_lossy(&b),
                    b.iter().map(|x| format!("{x:02x}")).collect::<String>()
                )
            })
            .unwrap_or_default();
    }
    if let Ok(v) = row.try_get::<Option<bool>, _>(idx) {
        return v.map(|v| v.to_string()).unwrap_or_default();
    }
    if let Ok(v) = row.try_get::<Option<i16>, _>(idx) {
        return v.map(|v| v.to_string()).unwrap_or_default();
    }
    String::from("?")
}

impl SqlStore {
    /// [`Store::dump_all_rows`](crate::store::Store::dump_all_rows): every row of every table
    /// as text, for tests that search the stored bytes.
    pub(super) async fn dump_all_rows(&self) -> StoreResult<String> {
        let mut out = String::new();
        let mut conn = self.pool.acquire().await.map_err(db_err)?;
        for (table, sql) in DUMPED {
            let rows = conn.fetch_all(query(sql)).await.map_err(db_err)?;
            for row in &rows {
                out.push_str(table);
                for (idx, name) in row.column_names().into_iter().enumerate() {
                    out.push(' ');
                    out.push_str(name);
                    out.push('=');
                    out.push_str(&cell_text(row, idx));
                }
                out.push('\n');
            }
        }
        Ok(out)
    }

    /// [`Store::raw_execute`](crate::store::Store::raw_execute): run one raw statement, for
    /// tests that try what the schema must refuse.
    pub(super) async fn raw_execute(&self, sql: &'static str) -> StoreResult<u64> {
        self.pool.execute(query(sql)).await.map_err(db_err)
    }
}
