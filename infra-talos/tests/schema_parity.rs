//! The PostgreSQL and SQLite migrations make the same schema: after migrating both
//! stores, each database is read back through its own catalogue
//! (`information_schema` and `pg_catalog`; `sqlite_master` and the `pragma_*` table
//! functions) and compared: tables, columns and whether each takes NULL, primary
//! keys, indexes (columns, uniqueness, partial or not), foreign keys, and which tables
//! refuse `UPDATE` and `DELETE`.
//!
//! The differences the engines impose are stated here rather than hidden:
//!
//! - **Column types** are not compared: `BIGINT`/`INTEGER`, `BYTEA`/`BLOB`,
//!   `SMALLINT`/`INTEGER` are each engine's spelling of the same values.
//! - **Names of the indexes behind a primary key or a `UNIQUE` constraint** are made
//!   by each engine (`<table>_pkey`, `<table>_<column>_key`;
//!   `sqlite_autoindex_<table>_<n>`): those indexes are compared by their columns.
//! - **`installation.id`** is `INTEGER PRIMARY KEY`, which SQLite keeps as the row id
//!   (no separate index, and never NULL although the catalogue does not say NOT NULL).
//! - **`TRUNCATE`** exists on PostgreSQL only; the timeline's trigger refusing it has
//!   no SQLite counterpart. Triggers are compared for `UPDATE` and `DELETE`.
//!
//! Needs `INFRA_TEST_DATABASE_URL` (a loud skip without it, a failure when `CI=true`).

mod pg_support;

use std::collections::{BTreeMap, BTreeSet};

use infra_talos::store::Settings;
use infra_talos::store::postgres::PgStore;
use infra_talos::store::sqlite::SqliteStore;
use sqlx::Row as _;

/// One database's schema, as compared.
#[derive(Debug, Default, PartialEq, Eq)]
struct Schema {
    tables: BTreeMap<String, Table>,
    /// `(table, "UPDATE" | "DELETE")` for each event a trigger refuses.
    guarded: BTreeSet<(String, String)>,
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Table {
    /// Column name → whether it takes NULL.
    columns: BTreeMap<String, bool>,
    primary_key: Vec<String>,
    indexes: BTreeSet<Index>,
    foreign_keys: BTreeSet<ForeignKey>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Index {
    /// `None` for the index behind a `UNIQUE` constraint (its name is the engine's).
    name: Option<String>,
    columns: Vec<String>,
    unique: bool,
    partial: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ForeignKey {
    columns: Vec<String>,
    references: String,
    referenced_columns: Vec<String>,
}

// ---- PostgreSQL ----

async fn postgres_schema(pool: &sqlx::PgPool) -> Schema {
    let mut schema = Schema::default();
    let columns = sqlx::query(
        "SELECT table_name::text, column_name::text, is_nullable = 'YES' AS nullable \
         FROM information_schema.columns WHERE table_schema = current_schema()",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for row in columns {
        schema
            .tables
            .entry(row.get("table_name"))
            .or_default()
            .columns
            .insert(row.get("column_name"), row.get("nullable"));
    }
    postgres_indexes(pool, &mut schema).await;
    postgres_foreign_keys(pool, &mut schema).await;
    let triggers = sqlx::query(
        "SELECT DISTINCT event_object_table::text AS t, event_manipulation::text AS e \
         FROM information_schema.triggers WHERE trigger_schema = current_schema()",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    schema.guarded = triggers
        .iter()
        .map(|r| (r.get("t"), r.get("e")))
        .filter(|(_, e): &(String, String)| e == "UPDATE" || e == "DELETE")
        .collect();
    schema
}

/// Indexes from `pg_index`: the primary key's columns, the `UNIQUE` constraints'
/// indexes by columns, every other index by name.
async fn postgres_indexes(pool: &sqlx::PgPool, schema: &mut Schema) {
    let rows = sqlx::query(
        "SELECT t.relname::text AS table_name, i.relname::text AS index_name, \
                x.indisprimary AS is_primary, x.indisunique AS is_unique, \
                x.indpred IS NOT NULL AS partial, \
                EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid) AS by_constraint, \
                ARRAY(SELECT a.attname::text FROM unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, n) \
                      JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum ORDER BY k.n) AS columns \
         FROM pg_index x \
         JOIN pg_class i ON i.oid = x.indexrelid \
         JOIN pg_class t ON t.oid = x.indrelid \
         JOIN pg_namespace n ON n.oid = t.relnamespace \
         WHERE n.nspname = current_schema()",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for row in rows {
        let table = schema.tables.entry(row.get("table_name")).or_default();
        let columns: Vec<String> = row.get("columns");
        if row.get("is_primary") {
            table.primary_key = columns;
            continue;
        }
        let by_constraint: bool = row.get("by_constraint");
        table.indexes.insert(Index {
            name: (!by_constraint).then(|| row.get("index_name")),
            columns,
            unique: row.get("is_unique"),
            partial: row.get("partial"),
        });
    }
}

async fn postgres_foreign_keys(pool: &sqlx::PgPool, schema: &mut Schema) {
    let rows = sqlx::query(
        "SELECT t.relname::text AS table_name, r.relname::text AS referenced, \
                ARRAY(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, n) \
                      JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum ORDER BY k.n) AS columns, \
                ARRAY(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY AS k(attnum, n) \
                      JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum ORDER BY k.n) AS referenced_columns \
         FROM pg_constraint c \
         JOIN pg_class t ON t.oid = c.conrelid \
         JOIN pg_class r ON r.oid = c.confrelid \
         JOIN pg_namespace n ON n.oid = t.relnamespace \
         WHERE c.contype = 'f' AND n.nspname = current_schema()",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for row in rows {
        schema
            .tables
            .entry(row.get("table_name"))
            .or_default()
            .foreign_keys
            .insert(ForeignKey {
                columns: row.get("columns"),
                references: row.get("referenced"),
                referenced_columns: row.get("referenced_columns"),
            });
    }
}

// ---- SQLite ----

async fn sqlite_schema(pool: &sqlx::SqlitePool) -> Schema {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut schema = Schema::default();
    for name in names {
        let table = sqlite_table(pool, &name).await;
        schema.tables.insert(name, table);
    }
    let triggers = sqlx::query("SELECT tbl_name, sql FROM sqlite_master WHERE type = 'trigger'")
        .fetch_all(pool)
        .await
        .unwrap();
    for row in triggers {
        let sql: String = row.get("sql");
        for event in ["UPDATE", "DELETE"] {
            if sql.to_uppercase().contains(&format!("BEFORE {event} ON")) {
                schema
                    .guarded
                    .insert((row.get("tbl_name"), event.to_owned()));
            }
        }
    }
    schema
}

async fn sqlite_table(pool: &sqlx::SqlitePool, name: &str) -> Table {
    let columns = sqlx::query(
        "SELECT name, \"notnull\" AS not_null, pk, type FROM pragma_table_info(?) ORDER BY pk",
    )
    .bind(name)
    .fetch_all(pool)
    .await
    .unwrap();
    let keyed = columns.iter().filter(|c| c.get::<i64, _>("pk") > 0).count();
    let mut table = Table::default();
    for c in &columns {
        let pk: i64 = c.get("pk");
        // `INTEGER PRIMARY KEY` alone is the row id: never NULL.
        let row_id = pk > 0 && keyed == 1 && c.get::<String, _>("type") == "INTEGER";
        let nullable = c.get::<i64, _>("not_null") == 0 && !row_id;
        table.columns.insert(c.get("name"), nullable);
        if pk > 0 {
            table.primary_key.push(c.get("name"));
        }
    }
    table.indexes = sqlite_indexes(pool, name).await;
    table.foreign_keys = sqlite_foreign_keys(pool, name).await;
    table
}

/// Indexes from `pragma_index_list`: the primary key's is left out (compared as the
/// primary key), a `UNIQUE` constraint's is kept by its columns, every other by name.
async fn sqlite_indexes(pool: &sqlx::SqlitePool, table: &str) -> BTreeSet<Index> {
    let list = sqlx::query(
        "SELECT name, \"unique\" AS is_unique, origin, partial FROM pragma_index_list(?)",
    )
    .bind(table)
    .fetch_all(pool)
    .await
    .unwrap();
    let mut indexes = BTreeSet::new();
    for row in list {
        let origin: String = row.get("origin");
        if origin == "pk" {
            continue;
        }
        let name: String = row.get("name");
        let columns = sqlx::query_scalar("SELECT name FROM pragma_index_info(?) ORDER BY seqno")
            .bind(&name)
            .fetch_all(pool)
            .await
            .unwrap();
        indexes.insert(Index {
            name: (origin == "c").then_some(name),
            columns,
            unique: row.get::<i64, _>("is_unique") == 1,
            partial: row.get::<i64, _>("partial") == 1,
        });
    }
    indexes
}

async fn sqlite_foreign_keys(pool: &sqlx::SqlitePool, table: &str) -> BTreeSet<ForeignKey> {
    let rows = sqlx::query(
        "SELECT id, \"table\" AS referenced, \"from\" AS col, \"to\" AS referenced_col \
         FROM pragma_foreign_key_list(?) ORDER BY id, seq",
    )
    .bind(table)
    .fetch_all(pool)
    .await
    .unwrap();
    let mut by_id: BTreeMap<i64, ForeignKey> = BTreeMap::new();
    for row in rows {
        let key = by_id.entry(row.get("id")).or_insert_with(|| ForeignKey {
            columns: Vec::new(),
            references: row.get("referenced"),
            referenced_columns: Vec::new(),
        });
        key.columns.push(row.get("col"));
        key.referenced_columns.push(row.get("referenced_col"));
    }
    by_id.into_values().collect()
}

// ---- The comparison ----

/// Each difference between the two, one line each.
fn differences(pg: &Schema, lite: &Schema) -> Vec<String> {
    let mut out = Vec::new();
    let names: BTreeSet<&String> = pg.tables.keys().chain(lite.tables.keys()).collect();
    for name in names {
        match (pg.tables.get(name), lite.tables.get(name)) {
            (Some(p), Some(l)) => table_differences(name, p, l, &mut out),
            (Some(_), None) => out.push(format!("table {name}: only on PostgreSQL")),
            (None, _) => out.push(format!("table {name}: only on SQLite")),
        }
    }
    for g in pg.guarded.symmetric_difference(&lite.guarded) {
        out.push(format!(
            "trigger refusing {} on {}: on one store only",
            g.1, g.0
        ));
    }
    out
}

fn table_differences(name: &str, pg: &Table, lite: &Table, out: &mut Vec<String>) {
    let columns: BTreeSet<&String> = pg.columns.keys().chain(lite.columns.keys()).collect();
    for c in columns {
        let (p, l) = (pg.columns.get(c), lite.columns.get(c));
        if p != l {
            out.push(format!(
                "{name}.{c}: nullable on PostgreSQL {p:?}, on SQLite {l:?}"
            ));
        }
    }
    if pg.primary_key != lite.primary_key {
        out.push(format!(
            "{name}: primary key {:?} on PostgreSQL, {:?} on SQLite",
            pg.primary_key, lite.primary_key
        ));
    }
    for i in pg.indexes.symmetric_difference(&lite.indexes) {
        out.push(format!("{name}: index {i:?} on one store only"));
    }
    for k in pg.foreign_keys.symmetric_difference(&lite.foreign_keys) {
        out.push(format!("{name}: foreign key {k:?} on one store only"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_and_sqlite_migrations_make_the_same_schema() {
    let Some(url) = pg_support::database_url("schema comparison") else {
        return;
    };
    let (_schema, options) = pg_support::schema(&url, "parity").await;
    let pg = PgStore::connect_for_tests(options, 1, Settings::default())
        .await
        .unwrap();
    let lite = SqliteStore::in_memory().await.unwrap();
    let pg_schema = postgres_schema(pg.pool()).await;
    let lite_schema = sqlite_schema(lite.pool()).await;
    // Both read something: a catalogue query that silently returned nothing would
    // make the comparison pass.
    assert!(pg_schema.tables.len() >= 17, "{pg_schema:#?}");
    assert!(
        lite_schema.tables["operations"].indexes.len() == 3,
        "{lite_schema:#?}"
    );
    assert!(!lite_schema.guarded.is_empty());
    assert!(!lite_schema.tables["observations"].foreign_keys.is_empty());
    let found = differences(&pg_schema, &lite_schema);
    assert!(
        found.is_empty(),
        "the migrations differ:\n{}",
        found.join("\n")
    );
    pg.pool().close().await;
}

/// The comparison finds what migration 4 fixed: at schema version 3 the six
/// identifiers declared `TEXT PRIMARY KEY` take NULL on SQLite only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_version_3_the_sqlite_identifiers_took_null() {
    let Some(url) = pg_support::database_url("schema comparison") else {
        return;
    };
    let (_schema, options) = pg_support::schema(&url, "parity3").await;
    let pg = PgStore::connect_at_version_for_tests(options, 1, Settings::default(), 3)
        .await
        .unwrap();
    let lite = SqliteStore::open_at_version_for_tests(None, Settings::default(), 3)
        .await
        .unwrap();
    let found = differences(
        &postgres_schema(pg.pool()).await,
        &sqlite_schema(lite.pool()).await,
    );
    let expected: Vec<String> = [
        "blanket_approvals",
        "machines",
        "operations",
        "plans",
        "principals",
        "releases",
    ]
    .iter()
    .map(|t| format!("{t}.id: nullable on PostgreSQL Some(false), on SQLite Some(true)"))
    .collect();
    assert_eq!(found, expected);
    pg.pool().close().await;
}

/// The comparison sees a difference when there is one: a column that takes NULL on
/// one store only, and an index on one store only.
#[test]
fn the_comparison_reports_what_differs() {
    let mut pg = Schema::default();
    let mut lite = Schema::default();
    let table = |nullable: bool, index: bool| Table {
        columns: BTreeMap::from([("id".to_owned(), nullable)]),
        primary_key: vec!["id".into()],
        indexes: if index {
            BTreeSet::from([Index {
                name: Some("by_id".into()),
                columns: vec!["id".into()],
                unique: false,
                partial: false,
            }])
        } else {
            BTreeSet::new()
        },
        foreign_keys: BTreeSet::new(),
    };
    pg.tables.insert("t".into(), table(false, true));
    lite.tables.insert("t".into(), table(true, false));
    let found = differences(&pg, &lite);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].starts_with("t.id: nullable"));
}
