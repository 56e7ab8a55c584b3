//! What a SQLite file holds, read before the store opens it for writing.
//!
//! The file is opened read-only, with no journal mode set (and as immutable when it
//! is in WAL mode and closed, so that no `-wal` or `-shm` file appears beside it),
//! and only its schema and the migration bookkeeping are read, so a file the store
//! then refuses — another application's, or one at a schema this build does not
//! know — is left as it was, byte for byte.

use std::path::{Path, PathBuf};

use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{Connection as _, Row as _};

use super::StoreError;
use super::migrations::{Applied, BOOKKEEPING_TABLE, Migration, check_applied};
use super::open::OpenProblem;

/// What a SQLite path holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum FileContents {
    /// Nothing exists at the path.
    Missing,
    /// A database without tables (an empty file is one): a new store.
    Empty,
    /// This store's database, with its bookkeeping rows.
    Ours(Vec<Applied>),
    /// Tables, none of them this store's bookkeeping.
    Foreign(Vec<String>),
}

/// The path as errors name it.
pub(super) fn display(path: &Path) -> String {
    path.display().to_string()
}

/// The path as SQLite is given it: a relative one as `./<path>`, so that a name
/// such as `file:…` is never read as a URI.
pub(super) fn as_given_to_sqlite(path: &Path) -> PathBuf {
    if path.is_relative() {
        Path::new(".").join(path)
    } else {
        path.to_owned()
    }
}

/// Reads what `path` holds without changing it.
pub(super) async fn inspect(path: &Path) -> Result<FileContents, StoreError> {
    let store = display(path);
    let exists = path
        .try_exists()
        .map_err(|e| StoreError::open_failed(&store, "cannot be looked at", e))?;
    if !exists {
        return Ok(FileContents::Missing);
    }
    let options = read_options(path);
    let mut conn = SqliteConnection::connect_with(&options)
        .await
        .map_err(|e| StoreError::open_failed(&store, "cannot be opened to read", e))?;
    let contents = read_contents(&mut conn)
        .await
        .map_err(|e| StoreError::open_failed(&store, "cannot be read as a SQLite database", e));
    let closed = conn.close().await;
    let contents = contents?;
    closed.map_err(|e| StoreError::open_failed(&store, "cannot be closed after reading", e))?;
    Ok(contents)
}

/// Read-only options that leave the file and its directory as they are. A file in
/// WAL mode with no `-wal` file beside it (closed cleanly, everything in the file)
/// is read as immutable: a read-only connection would otherwise create `-wal` and
/// `-shm` files and leave them behind.
fn read_options(path: &Path) -> SqliteConnectOptions {
    let options = SqliteConnectOptions::new()
        .filename(as_given_to_sqlite(path))
        .read_only(true);
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    if in_wal_mode(path) && !Path::new(&wal).exists() {
        options.immutable(true)
    } else {
        options
    }
}

/// Whether the file's header says WAL mode (bytes 18 and 19, the read and write
/// format versions, are 2).
fn in_wal_mode(path: &Path) -> bool {
    use std::io::Read as _;
    let mut header = [0u8; 20];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .is_ok_and(|()| header.starts_with(b"SQLite format 3\0") && header[18] == 2)
}

async fn read_contents(conn: &mut SqliteConnection) -> Result<FileContents, sqlx::Error> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
         ORDER BY name",
    )
    .fetch_all(&mut *conn)
    .await?;
    if tables.is_empty() {
        return Ok(FileContents::Empty);
    }
    if !tables.iter().any(|t| t == BOOKKEEPING_TABLE) {
        return Ok(FileContents::Foreign(tables));
    }
    Ok(FileContents::Ours(applied(conn).await?))
}

/// The bookkeeping rows, with their checksums where the table has the column.
async fn applied(conn: &mut SqliteConnection) -> Result<Vec<Applied>, sqlx::Error> {
    let has_checksum: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM pragma_table_info('store_migrations') WHERE name = 'checksum'",
    )
    .fetch_one(&mut *conn)
    .await?;
    let sql = if has_checksum > 0 {
        "SELECT version, name, checksum FROM store_migrations ORDER BY version"
    } else {
        "SELECT version, name, NULL AS checksum FROM store_migrations ORDER BY version"
    };
    let rows = sqlx::query(sql).fetch_all(&mut *conn).await?;
    rows.iter()
        .map(|row| {
            Ok(Applied {
                version: row.try_get("version")?,
                name: row.try_get("name")?,
                checksum: row.try_get("checksum")?,
            })
        })
        .collect()
}

/// Refuses what the store must not open: a missing file unless `create`, another
/// application's file, and a store whose bookkeeping this build's migrations
/// (`known`) do not match.
pub(super) fn refusal(
    contents: &FileContents,
    create: bool,
    known: &[Migration],
) -> Result<(), OpenProblem> {
    match contents {
        FileContents::Missing if !create => Err(OpenProblem::Missing),
        FileContents::Missing | FileContents::Empty => Ok(()),
        FileContents::Foreign(tables) => Err(OpenProblem::Foreign {
            tables: tables.clone(),
        }),
        FileContents::Ours(applied) => check_applied(applied, known),
    }
}
