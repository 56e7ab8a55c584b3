//! The ledger and the cache in their tables. Each save is one transaction: the rows
//! before it, or the rows after it, never a mix.

use std::sync::Arc;

use sqlx::postgres::PgPool;
use sqlx::{Postgres, Transaction};

use super::key;
use super::worker::{Failure, Shared, db};
use crate::records::{CacheEntry, Ledger, LedgerProgress, LedgerRow, RecordWrite};

/// Writers of one fleet's records take turns on this (a run holds the fleet's lock
/// anyway; two stores writing without it must not interleave their delete and insert).
fn write_lock(fleet: &str) -> i64 {
    key(&format!("infra records write:{fleet}"))
}

async fn begin_writing(
    pool: &PgPool,
    fleet: &str,
) -> Result<Transaction<'static, Postgres>, Failure> {
    let mut tx = pool.begin().await.map_err(db)?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(write_lock(fleet))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    Ok(tx)
}

type RowColumns = (String, String, String, String, bool, bool, bool);

pub(super) async fn load_ledger(shared: Arc<Shared>, fleet: String) -> Result<Ledger, Failure> {
    let rows: Vec<RowColumns> = sqlx::query_as(
        "SELECT provider, kind, name, region, discovered, intent, deleting \
         FROM infra_ledger_rows WHERE fleet = $1",
    )
    .bind(&fleet)
    .fetch_all(&shared.pool)
    .await
    .map_err(db)?;
    let mut ledger = Ledger::default();
    for (provider, kind, name, region, discovered, intent, deleting) in rows {
        let row = LedgerRow {
            provider,
            kind,
            name,
            region,
        };
        if discovered {
            ledger.discovered.insert(row.clone());
        }
        if intent {
            ledger.intents.insert(row.clone());
        }
        if deleting {
            ledger.deleting.insert(row.clone());
        }
        ledger.rows.insert(row);
    }
    Ok(ledger)
}

/// The ledger's rows as columns, for one `INSERT … SELECT FROM UNNEST`.
#[derive(Default)]
struct LedgerColumns {
    provider: Vec<String>,
    kind: Vec<String>,
    name: Vec<String>,
    region: Vec<String>,
    discovered: Vec<bool>,
    intent: Vec<bool>,
    deleting: Vec<bool>,
}

impl LedgerColumns {
    fn of(ledger: &Ledger) -> Self {
        let mut c = LedgerColumns::default();
        for row in &ledger.rows {
            c.provider.push(row.provider.clone());
            c.kind.push(row.kind.clone());
            c.name.push(row.name.clone());
            c.region.push(row.region.clone());
            c.discovered.push(ledger.is_discovered(row));
            c.intent.push(ledger.is_intent(row));
            c.deleting.push(ledger.is_deleting(row));
        }
        c
    }

    fn of_rows<'a>(rows: impl IntoIterator<Item = &'a LedgerRow>) -> Self {
        let mut c = LedgerColumns::default();
        for row in rows {
            c.provider.push(row.provider.clone());
            c.kind.push(row.kind.clone());
            c.name.push(row.name.clone());
            c.region.push(row.region.clone());
        }
        c
    }
}

pub(super) async fn save_ledger(
    shared: Arc<Shared>,
    fleet: String,
    ledger: Ledger,
) -> Result<(), Failure> {
    let mut tx = begin_writing(&shared.pool, &fleet).await?;
    write_ledger(&mut tx, &fleet, &ledger).await?;
    tx.commit().await.map_err(db)
}

/// Several fleets' ledgers and cache pairs written in one transaction, in the order
/// given, each fleet's writers kept out (in the order of the fleets' names, so that two
/// such transactions cannot wait on each other).
pub(super) async fn save_together(
    shared: Arc<Shared>,
    writes: Vec<RecordWrite>,
) -> Result<(), Failure> {
    let fleets: std::collections::BTreeSet<&str> = writes
        .iter()
        .map(|w| match w {
            RecordWrite::Ledger { fleet, .. } | RecordWrite::Cache { fleet, .. } => fleet.as_str(),
        })
        .collect();
    let mut tx = shared.pool.begin().await.map_err(db)?;
    for fleet in fleets {
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(write_lock(fleet))
            .execute(&mut *tx)
            .await
            .map_err(db)?;
    }
    for write in writes {
        match write {
            RecordWrite::Ledger { fleet, ledger } => write_ledger(&mut tx, &fleet, &ledger).await?,
            RecordWrite::Cache {
                fleet,
                provider,
                kind,
                entries,
            } => write_cache(&mut tx, (fleet, provider, kind), &entries).await?,
        }
    }
    tx.commit().await.map_err(db)
}

/// Replaces a fleet's ledger rows inside `tx`.
async fn write_ledger(
    tx: &mut Transaction<'static, Postgres>,
    fleet: &str,
    ledger: &Ledger,
) -> Result<(), Failure> {
    let c = LedgerColumns::of(ledger);
    sqlx::query("DELETE FROM infra_ledger_rows WHERE fleet = $1")
        .bind(fleet)
        .execute(&mut **tx)
        .await
        .map_err(db)?;
    sqlx::query(
        "INSERT INTO infra_ledger_rows \
         (fleet, provider, kind, name, region, discovered, intent, deleting) \
         SELECT $1, r.* FROM UNNEST($2::text[], $3::text[], $4::text[], $5::text[], \
         $6::bool[], $7::bool[], $8::bool[]) AS r",
    )
    .bind(fleet)
    .bind(c.provider)
    .bind(c.kind)
    .bind(c.name)
    .bind(c.region)
    .bind(c.discovered)
    .bind(c.intent)
    .bind(c.deleting)
    .execute(&mut **tx)
    .await
    .map_err(db)?;
    Ok(())
}

/// Marks and drops rows in one transaction, touching only those rows.
pub(super) async fn record_progress(
    shared: Arc<Shared>,
    fleet: String,
    progress: LedgerProgress,
) -> Result<(), Failure> {
    let mut tx = begin_writing(&shared.pool, &fleet).await?;
    if !progress.deleting.is_empty() {
        let c = LedgerColumns::of_rows(&progress.deleting);
        sqlx::query(
            "UPDATE infra_ledger_rows AS l SET deleting = TRUE \
             FROM UNNEST($2::text[], $3::text[], $4::text[], $5::text[]) \
             AS r(provider, kind, name, region) \
             WHERE l.fleet = $1 AND l.provider = r.provider AND l.kind = r.kind \
             AND l.name = r.name AND l.region = r.region",
        )
        .bind(&fleet)
        .bind(c.provider)
        .bind(c.kind)
        .bind(c.name)
        .bind(c.region)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    }
    if !progress.dropped.is_empty() {
        let c = LedgerColumns::of_rows(&progress.dropped);
        sqlx::query(
            "DELETE FROM infra_ledger_rows AS l \
             USING UNNEST($2::text[], $3::text[], $4::text[], $5::text[]) \
             AS r(provider, kind, name, region) \
             WHERE l.fleet = $1 AND l.provider = r.provider AND l.kind = r.kind \
             AND l.name = r.name AND l.region = r.region",
        )
        .bind(&fleet)
        .bind(c.provider)
        .bind(c.kind)
        .bind(c.name)
        .bind(c.region)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    }
    tx.commit().await.map_err(db)
}

type EntryColumns = (String, String, String, String, String);

pub(super) async fn load_cache(
    shared: Arc<Shared>,
    fleet: String,
    provider: String,
    kind: String,
) -> Result<Vec<CacheEntry>, Failure> {
    let rows: Vec<EntryColumns> = sqlx::query_as(
        "SELECT name, region, handle, observed::text, written::text FROM infra_cache_entries \
         WHERE fleet = $1 AND provider = $2 AND kind = $3 ORDER BY position",
    )
    .bind(&fleet)
    .bind(&provider)
    .bind(&kind)
    .fetch_all(&shared.pool)
    .await
    .map_err(db)?;
    rows.into_iter()
        .map(|columns| entry(&fleet, &provider, &kind, columns))
        .collect()
}

/// A cache entry from its columns, its JSON parsed.
fn entry(
    fleet: &str,
    provider: &str,
    kind: &str,
    (name, region, handle, observed, written): EntryColumns,
) -> Result<CacheEntry, Failure> {
    let at = |what: &str, e: serde_json::Error| {
        format!("the cache entry {provider}/{kind}/{name} of fleet `{fleet}`: {what}: {e}")
    };
    Ok(CacheEntry {
        observed: serde_json::from_str(&observed).map_err(|e| at("observed", e))?,
        written: serde_json::from_str(&written).map_err(|e| at("written", e))?,
        name,
        region,
        handle,
    })
}

/// The entries as columns, JSON as text (cast to `jsonb` by the server).
#[derive(Default)]
struct CacheColumns {
    name: Vec<String>,
    region: Vec<String>,
    handle: Vec<String>,
    observed: Vec<String>,
    written: Vec<String>,
}

impl CacheColumns {
    fn of(entries: &[CacheEntry]) -> Self {
        let mut c = CacheColumns::default();
        for e in entries {
            c.name.push(e.name.clone());
            c.region.push(e.region.clone());
            c.handle.push(e.handle.clone());
            c.observed.push(e.observed.to_string());
            c.written
                .push(serde_json::Value::Object(e.written.clone()).to_string());
        }
        c
    }
}

/// One cache pair: fleet, provider, kind.
pub(super) type Pair = (String, String, String);

pub(super) async fn save_cache(
    shared: Arc<Shared>,
    pair: Pair,
    entries: Vec<CacheEntry>,
) -> Result<(), Failure> {
    let mut tx = begin_writing(&shared.pool, &pair.0).await?;
    write_cache(&mut tx, pair, &entries).await?;
    tx.commit().await.map_err(db)
}

/// Replaces one cache pair's entries inside `tx` (an empty list deletes the pair).
async fn write_cache(
    tx: &mut Transaction<'static, Postgres>,
    (fleet, provider, kind): Pair,
    entries: &[CacheEntry],
) -> Result<(), Failure> {
    let c = CacheColumns::of(entries);
    sqlx::query("DELETE FROM infra_cache_entries WHERE fleet = $1 AND provider = $2 AND kind = $3")
        .bind(&fleet)
        .bind(&provider)
        .bind(&kind)
        .execute(&mut **tx)
        .await
        .map_err(db)?;
    if !entries.is_empty() {
        sqlx::query(
            "INSERT INTO infra_cache_entries \
             (fleet, provider, kind, position, name, region, handle, observed, written) \
             SELECT $1, $2, $3, e.position, e.name, e.region, e.handle, e.observed::jsonb, \
             e.written::jsonb FROM UNNEST($4::text[], $5::text[], $6::text[], $7::text[], \
             $8::text[]) WITH ORDINALITY AS e(name, region, handle, observed, written, position)",
        )
        .bind(&fleet)
        .bind(&provider)
        .bind(&kind)
        .bind(c.name)
        .bind(c.region)
        .bind(c.handle)
        .bind(c.observed)
        .bind(c.written)
        .execute(&mut **tx)
        .await
        .map_err(db)?;
    }
    Ok(())
}

pub(super) async fn cached_pairs(
    shared: Arc<Shared>,
    fleet: String,
) -> Result<Vec<(String, String)>, Failure> {
    let mut pairs: Vec<(String, String)> =
        sqlx::query_as("SELECT DISTINCT provider, kind FROM infra_cache_entries WHERE fleet = $1")
            .bind(&fleet)
            .fetch_all(&shared.pool)
            .await
            .map_err(db)?;
    pairs.sort();
    Ok(pairs)
}

/// Every record of the fleet read and checked, in two queries (not one per cache pair):
/// the ledger, and every cache entry with its JSON parsed.
pub(super) async fn verify(shared: Arc<Shared>, fleet: String) -> Result<(), Failure> {
    load_ledger(Arc::clone(&shared), fleet.clone()).await?;
    let rows: Vec<(String, String, String, String, String, String, String)> = sqlx::query_as(
        "SELECT provider, kind, name, region, handle, observed::text, written::text \
         FROM infra_cache_entries WHERE fleet = $1",
    )
    .bind(&fleet)
    .fetch_all(&shared.pool)
    .await
    .map_err(db)?;
    for (provider, kind, name, region, handle, observed, written) in rows {
        entry(
            &fleet,
            &provider,
            &kind,
            (name, region, handle, observed, written),
        )?;
    }
    Ok(())
}
