//! The migration runner: brings a store's database to this build's schema when it is
//! opened, in one transaction.
//!
//! What is applied and how it is checked is `super::migrations`'s: the bookkeeping
//! table records each applied migration with its checksum, a database at a newer
//! schema version or with a changed migration is refused and left as it is, and the
//! migrations not yet applied run in version order. The dialect adds its hooks
//! ([`Dialect`](super::sql::Dialect)): PostgreSQL's advisory lock around migrating,
//! the checksum column for a table made before checksums, and SQLite's reference
//! check after migrating with foreign-key enforcement off.

use super::StoreError;
use super::StoreResult;
use super::migrations::{Applied, CREATE_BOOKKEEPING, Migration, check_applied};
use super::sql::{Pool, Tx, query};

/// Apply the migrations not yet applied, in version order, up to `upto`, in one
/// transaction, after comparing what the database records with this build's
/// migrations (`super::migrations::check_applied`); `store` names the database in
/// every error. A refusal or a failure rolls everything back.
pub(super) async fn migrate(pool: &Pool, upto: i64, store: &str) -> StoreResult<()> {
    let mut tx = pool
        .begin()
        .await
        .map_err(|e| bookkeeping_failed(store, e))?;
    let known = pool.dialect().migrations();
    let applied = checked_bookkeeping(&mut tx, known, store).await?;
    apply_pending(&mut tx, known, &applied, upto, store).await?;
    let epoch = super::random_128()
        .map_err(|e| StoreError::open_failed(store, "cannot make its installation epoch", e))?;
    query("INSERT INTO installation (id, epoch) VALUES (1, $1) ON CONFLICT (id) DO NOTHING")
        .bind(epoch.to_vec())
        .execute(&mut tx)
        .await
        .map_err(|e| StoreError::open_failed(store, "cannot record its installation", e))?;
    tx.commit()
        .await
        .map_err(|e| StoreError::open_failed(store, "cannot commit its migrations", e))
}

fn bookkeeping_failed(store: &str, e: sqlx::Error) -> StoreError {
    StoreError::open_failed(store, "cannot keep its migration records", e)
}

/// The bookkeeping rows, once the table and its checksum column exist, compared with
/// this build's migrations (`known`); rows from before checksums get this build's.
async fn checked_bookkeeping(
    tx: &mut Tx,
    known: &[Migration],
    store: &str,
) -> StoreResult<Vec<Applied>> {
    let failed = |e| bookkeeping_failed(store, e);
    if let Some(lock) = tx.dialect().migration_lock() {
        query(lock).execute(tx).await.map_err(failed)?;
    }
    query(CREATE_BOOKKEEPING)
        .execute(tx)
        .await
        .map_err(failed)?;
    ensure_checksum_column(tx).await.map_err(failed)?;
    let applied = applied_migrations(tx).await.map_err(failed)?;
    check_applied(&applied, known).map_err(|p| StoreError::open(store, p))?;
    record_missing_checksums(tx, known, &applied)
        .await
        .map_err(failed)?;
    Ok(applied)
}

/// Adds the checksum column to a bookkeeping table made before checksums were
/// recorded.
async fn ensure_checksum_column(tx: &mut Tx) -> Result<(), sqlx::Error> {
    let column = tx.dialect().checksum_column();
    if let Some(present) = column.present {
        let count: i64 = query(present).fetch_one(tx).await?.try_get(0)?;
        if count > 0 {
            return Ok(());
        }
    }
    query(column.add).execute(tx).await.map(|_| ())
}

/// Runs the migrations up to `upto` that `applied` does not hold, then checks the
/// references if any ran.
async fn apply_pending(
    tx: &mut Tx,
    known: &[Migration],
    applied: &[Applied],
    upto: i64,
    store: &str,
) -> StoreResult<()> {
    let pending: Vec<&Migration> = known
        .iter()
        .filter(|m| m.version <= upto && !applied.iter().any(|a| a.version == m.version))
        .collect();
    for migration in &pending {
        apply_migration(tx, migration, store).await?;
    }
    if pending.is_empty() {
        return Ok(());
    }
    check_references(tx).await.map_err(|e| {
        let what = "has rows whose references do not resolve after migrating";
        StoreError::open_failed(store, what, e)
    })
}

/// Every reference resolves after migrating, where the dialect migrates with
/// enforcement off.
async fn check_references(tx: &mut Tx) -> Result<(), sqlx::Error> {
    let Some(check) = tx.dialect().reference_check() else {
        return Ok(());
    };
    let broken = query(check).fetch_all(tx).await?;
    if broken.is_empty() {
        Ok(())
    } else {
        Err(sqlx::Error::Protocol(format!(
            "{} row(s) refer to rows that do not exist",
            broken.len()
        )))
    }
}

/// Every row of the bookkeeping table, oldest first.
async fn applied_migrations(tx: &mut Tx) -> Result<Vec<Applied>, sqlx::Error> {
    let sql = "SELECT version, name, checksum FROM store_migrations ORDER BY version";
    let rows = query(sql).fetch_all(tx).await?;
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

/// Records this build's checksum for migrations a build from before checksums
/// applied (see `super::migrations`).
async fn record_missing_checksums(
    tx: &mut Tx,
    known: &[Migration],
    applied: &[Applied],
) -> Result<(), sqlx::Error> {
    for row in applied.iter().filter(|a| a.checksum.is_none()) {
        let Some(ours) = known.iter().find(|m| m.version == row.version) else {
            continue;
        };
        query("UPDATE store_migrations SET checksum = $2 WHERE version = $1")
            .bind(row.version)
            .bind(ours.checksum())
            .execute(tx)
            .await?;
    }
    Ok(())
}

/// Runs one migration and records it with its checksum.
async fn apply_migration(tx: &mut Tx, migration: &Migration, store: &str) -> StoreResult<()> {
    let failed = |e: sqlx::Error| {
        StoreError::open_failed(
            store,
            format!(
                "migration {} ({}) failed",
                migration.version, migration.name
            ),
            e,
        )
    };
    tx.execute_script(migration.sql).await.map_err(failed)?;
    query("INSERT INTO store_migrations (version, name, checksum) VALUES ($1, $2, $3)")
        .bind(migration.version)
        .bind(migration.name)
        .bind(migration.checksum())
        .execute(tx)
        .await
        .map_err(failed)?;
    Ok(())
}
