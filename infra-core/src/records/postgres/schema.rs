//! The tables, and the migrations that make them: versioned, checksummed, applied in
//! one transaction under an advisory lock.

use sha2::{Digest as _, Sha256};
use sqlx::postgres::PgConnection;
use sqlx::{Connection as _, Postgres, Transaction};

use super::key;
use super::worker::{Failure, db};

/// One step of the schema.
struct Migration {
    version: i64,
    name: &'static str,
    sql: &'static str,
}

/// The migrations, in order; a migration once released is never edited (its checksum
/// is recorded), only followed by another.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "records",
        sql: include_str!("migrations/0001_records.sql"),
    },
    Migration {
        version: 2,
        name: "deleting",
        sql: include_str!("migrations/0002_deleting.sql"),
    },
];

/// The schema version this build migrates to, and the newest it uses.
pub(super) const SCHEMA_VERSION: i64 = 2;

/// The table recording the migrations applied; made before the first one.
const VERSIONS_TABLE: &str = "CREATE TABLE infra_schema_versions (
    version    BIGINT      PRIMARY KEY,
    name       TEXT        NOT NULL,
    checksum   TEXT        NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)";

/// The lock concurrent first connections take turns on.
const MIGRATION_LOCK: &str = "infra records migration";

/// The SHA-256 of a migration's SQL, in hex.
pub(super) fn checksum(sql: &str) -> String {
    Sha256::digest(sql.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A recorded migration: version, name, checksum.
type Applied = (i64, String, String);

/// Brings the schema to [`SCHEMA_VERSION`], or refuses a database it must not touch: one
/// at a newer version, or whose recorded migrations are not this build's. Everything
/// happens in one transaction; a refusal rolls it back, so the database is left as it
/// was.
pub(super) async fn migrate(mut conn: PgConnection) -> Result<(), Failure> {
    migrate_on(&mut conn).await?;
    conn.close().await.map_err(db)
}

async fn migrate_on(conn: &mut PgConnection) -> Result<(), Failure> {
    let mut tx = conn.begin().await.map_err(db)?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(key(MIGRATION_LOCK))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    let exists: bool =
        sqlx::query_scalar("SELECT to_regclass('infra_schema_versions') IS NOT NULL")
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
    if !exists {
        sqlx::raw_sql(VERSIONS_TABLE)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
    }
    let applied: Vec<Applied> = sqlx::query_as(
        "SELECT version, name, checksum FROM infra_schema_versions ORDER BY version",
    )
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    check(&applied)?;
    for m in MIGRATIONS
        .iter()
        .filter(|m| !applied.iter().any(|a| a.0 == m.version))
    {
        apply(&mut tx, m).await?;
    }
    tx.commit().await.map_err(db)
}

/// Refuses a newer schema, and a recorded migration that is not this build's.
fn check(applied: &[Applied]) -> Result<(), Failure> {
    if let Some(newest) = applied.iter().map(|a| a.0).max()
        && newest > SCHEMA_VERSION
    {
        return Err(format!(
            "the records' schema is at version {newest}, newer than this build understands \
             ({SCHEMA_VERSION}); the database was left untouched — upgrade infra to use it"
        ));
    }
    for (version, name, found) in applied {
        let ours = MIGRATIONS.iter().find(|m| m.version == *version);
        let expected = ours.map(|m| checksum(m.sql));
        if expected.as_deref() != Some(found.as_str()) {
            return Err(format!(
                "schema migration {version} (`{name}`) was recorded with checksum {found}, \
                 but this build's is {}; refused, and the database was left untouched — \
                 its schema was changed outside this build",
                expected
                    .as_deref()
                    .unwrap_or("(none: this build has no such migration)")
            ));
        }
    }
    Ok(())
}

async fn apply(tx: &mut Transaction<'_, Postgres>, m: &Migration) -> Result<(), Failure> {
    sqlx::raw_sql(m.sql)
        .execute(&mut **tx)
        .await
        .map_err(|e| format!("schema migration {} (`{}`): {}", m.version, m.name, db(e)))?;
    sqlx::query("INSERT INTO infra_schema_versions (version, name, checksum) VALUES ($1, $2, $3)")
        .bind(m.version)
        .bind(m.name)
        .bind(checksum(m.sql))
        .execute(&mut **tx)
        .await
        .map_err(db)?;
    tracing::info!(
        version = m.version,
        name = m.name,
        "applied a records schema migration"
    );
    Ok(())
}
