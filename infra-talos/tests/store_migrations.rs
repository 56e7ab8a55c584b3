//! Migration bookkeeping on both stores: each applied migration is recorded with its
//! version and the SHA-256 of its SQL; a database whose recorded checksum differs
//! from this build's migration, or that is at a newer schema version than this build
//! knows, is refused, named, and left as it was; a database from a build before
//! checksums gets them recorded.
//!
//! The PostgreSQL half needs `INFRA_TEST_DATABASE_URL` (a loud skip without it, a
//! failure when `CI=true`); each test works in its own schema.
#![cfg(feature = "cli")]

mod pg_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use infra_talos::cli::{Io, run};
use infra_talos::store::postgres::PgStore;
use infra_talos::store::sqlite::SqliteStore;
use infra_talos::store::{OpenProblem, Settings, StoreError};
use sha2::{Digest as _, Sha256};
use sqlx::Connection as _;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};

/// This build's migrations, by version, on each backend.
const SQLITE: [(&str, &str); 10] = [
    (
        "contract_store",
        include_str!("../migrations/sqlite/0001_contract_store.sql"),
    ),
    (
        "sealed_bindings_and_records",
        include_str!("../migrations/sqlite/0002_sealed_bindings_and_records.sql"),
    ),
    (
        "blanket_approvals",
        include_str!("../migrations/sqlite/0003_blanket_approvals.sql"),
    ),
    (
        "not_null_identifiers",
        include_str!("../migrations/sqlite/0004_not_null_identifiers.sql"),
    ),
    (
        "recovery_scopes",
        include_str!("../migrations/sqlite/0005_recovery_scopes.sql"),
    ),
    (
        "recovery_entries",
        include_str!("../migrations/sqlite/0006_recovery_entries.sql"),
    ),
    (
        "machine_imports",
        include_str!("../migrations/sqlite/0007_machine_imports.sql"),
    ),
    (
        "authenticated_identities",
        include_str!("../migrations/sqlite/0008_authenticated_identities.sql"),
    ),
    (
        "installation_approval_policy",
        include_str!("../migrations/sqlite/0009_installation_approval_policy.sql"),
    ),
    (
        "certificate_bindings",
        include_str!("../migrations/sqlite/0010_certificate_bindings.sql"),
    ),
];
const POSTGRES: [(&str, &str); 10] = [
    (
        "contract_store",
        include_str!("../migrations/postgres/0001_contract_store.sql"),
    ),
    (
        "sealed_bindings_and_records",
        include_str!("../migrations/postgres/0002_sealed_bindings_and_records.sql"),
    ),
    (
        "blanket_approvals",
        include_str!("../migrations/postgres/0003_blanket_approvals.sql"),
    ),
    (
        "not_null_identifiers",
        include_str!("../migrations/postgres/0004_not_null_identifiers.sql"),
    ),
    (
        "recovery_scopes",
        include_str!("../migrations/postgres/0005_recovery_scopes.sql"),
    ),
    (
        "recovery_entries",
        include_str!("../migrations/postgres/0006_recovery_entries.sql"),
    ),
    (
        "machine_imports",
        include_str!("../migrations/postgres/0007_machine_imports.sql"),
    ),
    (
        "authenticated_identities",
        include_str!("../migrations/postgres/0008_authenticated_identities.sql"),
    ),
    (
        "installation_approval_policy",
        include_str!("../migrations/postgres/0009_installation_approval_policy.sql"),
    ),
    (
        "certificate_bindings",
        include_str!("../migrations/postgres/0010_certificate_bindings.sql"),
    ),
];

/// A checksum no migration has.
const FORGED: &str = "0000000000000000000000000000000000000000000000000000000000000bad";

fn sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The bookkeeping rows a fully migrated database holds.
fn expected_rows(migrations: &[(&str, &str)]) -> Vec<(i64, String, Option<String>)> {
    (1..)
        .zip(migrations)
        .map(|(v, (name, sql))| (v, (*name).to_owned(), Some(sha256(sql))))
        .collect()
}

const ROWS_SQL: &str = "SELECT version, name, checksum FROM store_migrations ORDER BY version";

/// Runs `infra-talos --database <url> inventory list`; returns exit code and stderr.
async fn cli_list(database: &str) -> (ExitCode, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let mut io = Io {
        out: &mut out,
        err: &mut err,
        input: None,
        env: BTreeMap::new(),
    };
    let args = ["infra-talos", "--database", database, "inventory", "list"];
    let code = run(args, &mut io).await;
    (code, String::from_utf8(err).unwrap())
}

// ---- SQLite ----

/// A store file migrated to this build's version, closed.
async fn sqlite_store(dir: &Path) -> PathBuf {
    let path = dir.join("store.db");
    let store = SqliteStore::open_or_create(&path).await.unwrap();
    store.pool().close().await;
    path
}

/// Runs statements on the file as another program would.
async fn sqlite_exec(path: &Path, statements: &[&str]) {
    let options = SqliteConnectOptions::new().filename(path);
    let mut conn = SqliteConnection::connect_with(&options).await.unwrap();
    for sql in statements {
        sqlx::query(sqlx::AssertSqlSafe(*sql))
            .execute(&mut conn)
            .await
            .unwrap();
    }
    conn.close().await.unwrap();
    // Past the file system's timestamp resolution, so a later write would show.
    std::thread::sleep(std::time::Duration::from_millis(20));
}

async fn sqlite_rows(path: &Path) -> Vec<(i64, String, Option<String>)> {
    let options = SqliteConnectOptions::new().filename(path).read_only(true);
    let mut conn = SqliteConnection::connect_with(&options).await.unwrap();
    let rows = sqlx::query_as(ROWS_SQL).fetch_all(&mut conn).await.unwrap();
    conn.close().await.unwrap();
    rows
}

fn bytes_and_mtime(path: &Path) -> (Vec<u8>, SystemTime) {
    (
        std::fs::read(path).unwrap(),
        std::fs::metadata(path).unwrap().modified().unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_records_each_migration_with_its_checksum() {
    let dir = tempfile::tempdir().unwrap();
    let path = sqlite_store(dir.path()).await;
    assert_eq!(sqlite_rows(&path).await, expected_rows(&SQLITE));
}

/// A store file a newer build migrated (version 11, and a table this build does not
/// know) is refused by the library and the command, naming the file and both
/// versions, and its bytes and modification time do not change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_newer_schema_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = sqlite_store(dir.path()).await;
    let insert = format!(
        "INSERT INTO store_migrations (version, name, checksum) VALUES (11, 'from_a_newer_build', '{FORGED}')"
    );
    sqlite_exec(&path, &[&insert, "CREATE TABLE future_things (x TEXT)"]).await;
    let before = bytes_and_mtime(&path);
    let err = SqliteStore::open(&path).await.unwrap_err();
    assert_eq!(
        err.open_problem(),
        Some(&OpenProblem::NewerSchema {
            found: 11,
            known: 10
        })
    );
    let (code, message) = cli_list(&format!("sqlite:{}", path.display())).await;
    assert_eq!(code, ExitCode::from(2), "{message}");
    insta::assert_snapshot!(
        "sqlite_newer_schema",
        message.replace(&dir.path().display().to_string(), "[dir]")
    );
    assert_eq!(bytes_and_mtime(&path), before);
}

/// A store file whose recorded checksum of migration 2 is not this build's is
/// refused, naming the version and both digests, and left untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_changed_migration_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = sqlite_store(dir.path()).await;
    let forge = format!("UPDATE store_migrations SET checksum = '{FORGED}' WHERE version = 2");
    sqlite_exec(&path, &[&forge]).await;
    let before = bytes_and_mtime(&path);
    let err = SqliteStore::open(&path).await.unwrap_err();
    assert_eq!(
        err.open_problem(),
        Some(&OpenProblem::ChecksumMismatch {
            version: 2,
            name: "sealed_bindings_and_records".into(),
            recorded: FORGED.into(),
            built_in: sha256(SQLITE[1].1),
        })
    );
    let (code, message) = cli_list(&format!("sqlite:{}", path.display())).await;
    assert_eq!(code, ExitCode::from(2), "{message}");
    insta::assert_snapshot!(
        "sqlite_changed_migration",
        message.replace(&dir.path().display().to_string(), "[dir]")
    );
    assert_eq!(bytes_and_mtime(&path), before);
}

/// A store file whose bookkeeping table has no checksum column (a build from before
/// checksums) opens, and this build's checksums are recorded for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store_from_before_checksums_gets_them_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let path = sqlite_store(dir.path()).await;
    sqlite_exec(
        &path,
        &["ALTER TABLE store_migrations DROP COLUMN checksum"],
    )
    .await;
    let store = SqliteStore::open(&path).await.unwrap();
    store.pool().close().await;
    assert_eq!(sqlite_rows(&path).await, expected_rows(&SQLITE));
}

// ---- PostgreSQL ----

fn database_url() -> Option<String> {
    pg_support::database_url("migration test")
}

/// A store migrated to this build's version in a fresh schema; its schema's name.
async fn pg_store(url: &str) -> (pg_support::Schema, sqlx::postgres::PgConnectOptions, String) {
    let (schema, options) = pg_support::schema(url, "mig").await;
    let store = PgStore::connect_for_tests(options.clone(), 1, Settings::default())
        .await
        .unwrap();
    let name: String = sqlx::query_scalar("SELECT current_schema()")
        .fetch_one(store.pool())
        .await
        .unwrap();
    store.pool().close().await;
    (schema, options, name)
}

async fn pg_exec(options: &sqlx::postgres::PgConnectOptions, statements: &[&str]) {
    let mut conn = sqlx::PgConnection::connect_with(options).await.unwrap();
    for sql in statements {
        sqlx::query(sqlx::AssertSqlSafe(*sql))
            .execute(&mut conn)
            .await
            .unwrap();
    }
    conn.close().await.unwrap();
}

/// The schema's tables and its bookkeeping rows: what a refusal must leave as it was.
async fn pg_state(
    options: &sqlx::postgres::PgConnectOptions,
) -> (Vec<String>, Vec<(i64, String, Option<String>)>) {
    let mut conn = sqlx::PgConnection::connect_with(options).await.unwrap();
    let tables = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_schema = current_schema() ORDER BY 1",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let rows = sqlx::query_as(ROWS_SQL).fetch_all(&mut conn).await.unwrap();
    conn.close().await.unwrap();
    (tables, rows)
}

async fn pg_open(options: &sqlx::postgres::PgConnectOptions) -> Result<PgStore, StoreError> {
    PgStore::connect_for_tests(options.clone(), 1, Settings::default()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_records_each_migration_with_its_checksum() {
    let Some(url) = database_url() else { return };
    let (_schema, options, _) = pg_store(&url).await;
    assert_eq!(pg_state(&options).await.1, expected_rows(&POSTGRES));
}

/// A schema a newer build migrated is refused by the library and by the command
/// (given the URL), naming the URL and both versions; nothing in it changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_newer_schema_is_refused_and_left_untouched() {
    let Some(url) = database_url() else { return };
    let (_schema, options, name) = pg_store(&url).await;
    let insert = format!(
        "INSERT INTO store_migrations (version, name, checksum) VALUES (11, 'from_a_newer_build', '{FORGED}')"
    );
    pg_exec(&options, &[&insert, "CREATE TABLE future_things (x TEXT)"]).await;
    let before = pg_state(&options).await;
    let err = pg_open(&options).await.unwrap_err();
    assert_eq!(
        err.open_problem(),
        Some(&OpenProblem::NewerSchema {
            found: 11,
            known: 10
        })
    );
    let separator = if url.contains('?') { '&' } else { '?' };
    let in_schema = format!("{url}{separator}options[search_path]={name}");
    let (code, message) = cli_list(&in_schema).await;
    assert_eq!(code, ExitCode::from(2), "{message}");
    let expected = format!(
        "error: store {}: the database is at schema version 11, newer than this build knows (up to 10)",
        infra_talos::store::postgres_url_without_password(&in_schema)
    );
    assert!(message.starts_with(&expected), "{message}");
    assert_eq!(pg_state(&options).await, before);
}

/// A schema whose recorded checksum of migration 3 is not this build's is refused,
/// naming the version and both digests; nothing in it changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_changed_migration_is_refused_and_left_untouched() {
    let Some(url) = database_url() else { return };
    let (_schema, options, _) = pg_store(&url).await;
    let forge = format!("UPDATE store_migrations SET checksum = '{FORGED}' WHERE version = 3");
    pg_exec(&options, &[&forge]).await;
    let before = pg_state(&options).await;
    let err = pg_open(&options).await.unwrap_err();
    assert_eq!(
        err.open_problem(),
        Some(&OpenProblem::ChecksumMismatch {
            version: 3,
            name: "blanket_approvals".into(),
            recorded: FORGED.into(),
            built_in: sha256(POSTGRES[2].1),
        })
    );
    let text = err.to_string();
    assert!(
        text.contains("changed outside this tool or by another build"),
        "{text}"
    );
    assert_eq!(pg_state(&options).await, before);
}

/// A schema whose bookkeeping table has no checksum column opens, and this build's
/// checksums are recorded for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_from_before_checksums_gets_them_recorded() {
    let Some(url) = database_url() else { return };
    let (_schema, options, _) = pg_store(&url).await;
    pg_exec(
        &options,
        &["ALTER TABLE store_migrations DROP COLUMN checksum"],
    )
    .await;
    let store = pg_open(&options).await.unwrap();
    store.pool().close().await;
    assert_eq!(pg_state(&options).await.1, expected_rows(&POSTGRES));
}
