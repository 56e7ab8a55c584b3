//! How the controller's store is opened, as a user sees it: the `infra-talos`
//! command's exit code and message, and what is on disk afterwards. A missing
//! `sqlite:` file is made only with `--create`; a store in memory is refused; a file
//! holding another application's tables, or no SQLite database at all, is refused
//! and left byte for byte as it was; every error names the file, or the PostgreSQL
//! URL without its password.
#![cfg(feature = "cli")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use infra_talos::cli::{Io, run};
use infra_talos::store::sqlite::SqliteStore;
use infra_talos::store::{OpenProblem, StoreError};
use sha2::{Digest as _, Sha256};
use sqlx::Connection as _;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteJournalMode};

struct Ran {
    code: ExitCode,
    out: String,
    err: String,
}

/// Runs `infra-talos <args>` in-process with an empty environment.
async fn cli(args: &[&str]) -> Ran {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let mut io = Io {
        out: &mut out,
        err: &mut err,
        input: None,
        env: BTreeMap::new(),
    };
    let code = run(
        std::iter::once("infra-talos").chain(args.iter().copied()),
        &mut io,
    )
    .await;
    Ran {
        code,
        out: String::from_utf8(out).unwrap(),
        err: String::from_utf8(err).unwrap(),
    }
}

/// `inventory list` against `database`, with `--create` when asked.
async fn list(database: &str, create: bool) -> Ran {
    let mut args = vec!["--database", database];
    if create {
        args.push("--create");
    }
    args.extend(["inventory", "list"]);
    cli(&args).await
}

fn sqlite_url(path: &Path) -> String {
    format!("sqlite:{}", path.display())
}

/// A file's bytes (as their SHA-256) and modification time, and its directory's
/// listing.
#[derive(Debug, PartialEq, Eq)]
struct OnDisk {
    sha256: String,
    modified: SystemTime,
    listing: Vec<PathBuf>,
}

fn on_disk(path: &Path) -> OnDisk {
    let mut listing: Vec<PathBuf> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    listing.sort();
    let bytes = std::fs::read(path).unwrap();
    OnDisk {
        sha256: Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
        modified: std::fs::metadata(path).unwrap().modified().unwrap(),
        listing,
    }
}

/// Another application's SQLite file: one table with one row, in `journal` mode.
async fn foreign_file(path: &Path, journal: SqliteJournalMode) {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(journal);
    let mut conn = SqliteConnection::connect_with(&options).await.unwrap();
    for sql in [
        "CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT NOT NULL)",
        "CREATE TABLE machines (name TEXT)",
        "INSERT INTO accounts (owner) VALUES ('someone else')",
    ] {
        sqlx::query(sql).execute(&mut conn).await.unwrap();
    }
    conn.close().await.unwrap();
    // Past the file system's timestamp resolution, so a write would show.
    std::thread::sleep(std::time::Duration::from_millis(20));
}

/// The temporary directory replaced by `[dir]`, for snapshots.
fn redact(text: &str, dir: &Path) -> String {
    text.replace(&dir.display().to_string(), "[dir]")
}

/// Without `--create` a missing store file is refused, naming the path and the flag,
/// and nothing is created; with it the store is made, and later commands find it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_file_is_made_only_with_create() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let url = sqlite_url(&path);
    let refused = list(&url, false).await;
    assert_eq!(refused.code, ExitCode::from(2), "{}", refused.err);
    assert!(refused.err.contains(&path.display().to_string()));
    assert!(refused.err.contains("--create"), "{}", refused.err);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    let made = list(&url, true).await;
    assert_eq!(made.code, ExitCode::SUCCESS, "{}", made.err);
    assert_eq!(made.out, "no machines\n");
    assert!(path.is_file());
    let again = list(&url, false).await;
    assert_eq!(again.code, ExitCode::SUCCESS, "{}", again.err);

    // The library makes the same choice explicit.
    let other = dir.path().join("other.db");
    let err = SqliteStore::open(&other).await.unwrap_err();
    assert_eq!(err.open_problem(), Some(&OpenProblem::Missing));
    assert!(!other.exists());
    SqliteStore::open_or_create(&other).await.unwrap();
    assert!(other.is_file());
}

/// `sqlite:` with no path and `sqlite::memory:` are refused by the command: the
/// records would vanish on exit. No file is made for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_in_memory_is_refused_by_the_command() {
    for url in ["sqlite:", "sqlite::memory:"] {
        for create in [false, true] {
            let ran = list(url, create).await;
            assert_eq!(ran.code, ExitCode::from(2), "{url}: {}", ran.err);
            assert!(ran.err.contains("would vanish"), "{}", ran.err);
        }
    }
    assert!(!Path::new(":memory:").exists());
    // The library keeps a store in memory for tests, and refuses the name as a file.
    SqliteStore::in_memory().await.unwrap();
    let err = SqliteStore::open_or_create(Path::new(":memory:"))
        .await
        .unwrap_err();
    assert_eq!(err.open_problem(), Some(&OpenProblem::NotAFile));
}

/// A file with another application's tables (one shares a name with a store table)
/// is refused, with or without `--create`, and left as it was: its bytes, its
/// modification time, its directory (no journal or lock file), its journal mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_applications_file_is_refused_and_left_untouched() {
    for journal in [SqliteJournalMode::Delete, SqliteJournalMode::Wal] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.db");
        foreign_file(&path, journal).await;
        let before = on_disk(&path);
        for create in [false, true] {
            let ran = list(&sqlite_url(&path), create).await;
            assert_eq!(ran.code, ExitCode::from(2), "{}", ran.err);
            assert!(ran.err.contains(&path.display().to_string()));
            assert!(
                ran.err
                    .contains("another application's tables (accounts, machines)")
            );
        }
        let err = SqliteStore::open_or_create(&path).await.unwrap_err();
        assert_eq!(
            err.open_problem(),
            Some(&OpenProblem::Foreign {
                tables: vec!["accounts".into(), "machines".into()]
            })
        );
        assert_eq!(on_disk(&path), before, "{journal:?}");
        let mut conn = SqliteConnection::connect_with(&SqliteConnectOptions::new().filename(&path))
            .await
            .unwrap();
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(mode, format!("{journal:?}").to_lowercase());
        conn.close().await.unwrap();
    }
}

/// A file that exists but holds no table (an empty file) becomes the store without
/// `--create`: there is nothing in it to harm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_empty_file_becomes_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    std::fs::write(&path, b"").unwrap();
    let ran = list(&sqlite_url(&path), false).await;
    assert_eq!(ran.code, ExitCode::SUCCESS, "{}", ran.err);
    assert!(std::fs::metadata(&path).unwrap().len() > 0);
}

/// The messages a person reads when the store does not open, each naming the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusal_messages_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("app.db");
    foreign_file(&foreign, SqliteJournalMode::Delete).await;
    let text = dir.path().join("notes.txt");
    std::fs::write(
        &text,
        "not a database, long enough to have a header of sorts\n",
    )
    .unwrap();
    let text_before = on_disk(&text);
    let cases = [
        (sqlite_url(&dir.path().join("store.db")), false),
        ("sqlite::memory:".to_owned(), false),
        (sqlite_url(&foreign), true),
        (sqlite_url(&text), false),
        (
            sqlite_url(&dir.path().join("absent").join("store.db")),
            true,
        ),
    ];
    let mut transcript = String::new();
    for (url, create) in &cases {
        let ran = list(url, *create).await;
        assert_eq!(ran.code, ExitCode::from(2), "{url}: {}", ran.err);
        transcript += &redact(&ran.err, dir.path());
    }
    insta::assert_snapshot!("refusals", transcript);
    assert_eq!(on_disk(&text).sha256, text_before.sha256);
    assert_eq!(on_disk(&text).modified, text_before.modified);
    assert!(!dir.path().join("absent").exists());
}

/// A PostgreSQL store that cannot be reached, or whose URL does not parse, is named
/// by its URL without the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_errors_name_the_url_without_its_password() {
    const PASSWORD: &str = "s3cret-pw";
    let unreachable = format!("postgres://alice:{PASSWORD}@127.0.0.1:1/infra?sslmode=disable");
    let ran = list(&unreachable, false).await;
    assert_eq!(ran.code, ExitCode::from(2), "{}", ran.err);
    assert!(
        ran.err
            .starts_with("error: store postgres://alice@127.0.0.1:1/infra?sslmode=disable: cannot be connected to: "),
        "{}",
        ran.err
    );
    assert!(!ran.err.contains(PASSWORD), "{}", ran.err);

    let malformed =
        format!("postgres://alice:{PASSWORD}@db.example:port/infra?password={PASSWORD}");
    let err = infra_talos::store::postgres::PgStore::connect(&malformed)
        .await
        .unwrap_err();
    let StoreError::Open { store, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(store, "postgres://alice@db.example:port/infra");
    assert!(!err.to_string().contains(PASSWORD), "{err}");
}
