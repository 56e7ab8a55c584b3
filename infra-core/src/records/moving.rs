//! Rows moved from one fleet's records to another's (`records move`), with their marks
//! and their cached observations, in an order that a run killed between two writes
//! cannot make unsafe.
//!
//! # The order of writes
//!
//! A move of resources from fleet A to fleet B is, in full:
//!
//! 1. each resource's ownership marker rewritten from A's to B's (in the cloud, by the
//!    runner, before anything here is written; a resource whose marker could not be
//!    rewritten is not moved);
//! 2. B's cache: the moved observations added, one (provider, kind) pair at a time;
//! 3. B's ledger: the moved rows added, with their marks;
//! 4. A's ledger: the moved rows removed;
//! 5. A's cache: the moved observations removed, one pair at a time.
//!
//! Each write is atomic on its own. On PostgreSQL, 2 to 5 are one transaction
//! ([`RecordStore::save_together`]): both fleets' records change together or not at
//! all. In files, a run killed between two writes leaves a prefix, and each prefix is
//! safe for the next run of either fleet, because of two rules every run keeps: a
//! delete needs a row *and* the fleet's own marker on the resource (an orphan is deleted
//! only after its marker is read again), and a declared resource carrying another
//! fleet's marker is never changed or deleted. So:
//!
//! - Before 1, nothing changed. Killed in the middle of 1, some markers are B's: A
//!   cannot delete or change those any more (they are B's by their marker), and B has
//!   no row for them, so B cannot delete them either; a declaration of them in B finds
//!   them and adopts them, since they carry B's marker. Nothing is created: every
//!   resource still exists, and a declared resource that exists is never created.
//! - After 2 or 3, B holds the rows of resources carrying its marker: B manages them,
//!   which is the end state. A's rows of them are stale, and harmless: A's run reads
//!   B's marker and leaves the resource alone.
//! - After 4 and 5 the move is complete. A cache entry without a row (after 2, or
//!   before 5) is never a reason to create or delete anything: membership is the
//!   ledger.
//!
//! The marker goes first, because it is the one fact every run checks again before a
//! delete: from the moment it changes, the source fleet can no longer touch the
//! resource, whatever its records say, and the destination can delete it only once it
//! holds the row — that is, once it manages it. A rerun of the same move completes an
//! interrupted one: a resource already carrying B's marker has its records moved with
//! no cloud call, a row already in B's ledger keeps its marks there, and a cached
//! observation left in A goes to B.

use std::collections::BTreeSet;

use super::{CacheEntry, LedgerRow, RecordError, RecordStore, RecordWrite};

/// What [`move_rows`] moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Moved {
    /// Ledger rows taken from the source (with their marks).
    pub rows: usize,
    /// Cached observations taken from the source.
    pub cached: usize,
}

/// Moves `rows` (with their marks) and their cached observations from fleet `from`'s
/// records to fleet `to`'s, in the order the module documents. A row `to` holds
/// already keeps its own marks; a row `from` does not hold is skipped (its cached
/// observation, if `from` still has one, moves all the same: an earlier move was
/// interrupted after its ledger write).
///
/// Takes no lock: the caller holds both fleets' locks.
///
/// # Errors
///
/// The store's, from the first write that failed; the writes before it were made.
pub fn move_rows(
    store: &dyn RecordStore,
    from: &str,
    to: &str,
    rows: &BTreeSet<LedgerRow>,
) -> Result<Moved, RecordError> {
    let (writes, moved) = writes(store, from, to, rows)?;
    if !writes.is_empty() {
        store.save_together(&writes)?;
    }
    Ok(moved)
}

/// The writes of a move, in order, and what they move.
fn writes(
    store: &dyn RecordStore,
    from: &str,
    to: &str,
    rows: &BTreeSet<LedgerRow>,
) -> Result<(Vec<RecordWrite>, Moved), RecordError> {
    let mut source = store.load_ledger(from)?;
    let mut destination = store.load_ledger(to)?;
    let moving = source.only(rows);
    let mut moved = Moved {
        rows: moving.len(),
        cached: 0,
    };
    let (mut to_caches, mut from_caches) = (Vec::new(), Vec::new());
    let pairs: BTreeSet<(&str, &str)> = rows
        .iter()
        .map(|r| (r.provider.as_str(), r.kind.as_str()))
        .collect();
    for (provider, kind) in pairs {
        let (taken, kept): (Vec<CacheEntry>, Vec<CacheEntry>) = store
            .load_cache(from, provider, kind)?
            .into_iter()
            .partition(|e| rows.iter().any(|r| names(r, provider, kind, e)));
        if taken.is_empty() {
            continue;
        }
        moved.cached += taken.len();
        let mut theirs = store.load_cache(to, provider, kind)?;
        theirs.retain(|e| {
            !taken
                .iter()
                .any(|t| t.name == e.name && t.region == e.region)
        });
        theirs.extend(taken);
        theirs.sort_by(|a, b| (&a.name, &a.region).cmp(&(&b.name, &b.region)));
        let cache = |fleet: &str, entries| RecordWrite::Cache {
            fleet: fleet.to_owned(),
            provider: provider.to_owned(),
            kind: kind.to_owned(),
            entries,
        };
        to_caches.push(cache(to, theirs));
        from_caches.push(cache(from, kept));
    }
    let mut writes = to_caches;
    if !moving.is_empty() {
        for row in &moving.rows {
            source.remove(row);
        }
        destination.absorb(moving);
        writes.push(RecordWrite::Ledger {
            fleet: to.to_owned(),
            ledger: destination,
        });
        writes.push(RecordWrite::Ledger {
            fleet: from.to_owned(),
            ledger: source,
        });
    }
    writes.extend(from_caches);
    Ok((writes, moved))
}

/// Whether `entry`, cached under (`provider`, `kind`), is the observation of `row`.
fn names(row: &LedgerRow, provider: &str, kind: &str, entry: &CacheEntry) -> bool {
    row.provider == provider
        && row.kind == kind
        && row.name == entry.name
        && row.region == entry.region
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{Ledger, MemoryStore};

    fn row(name: &str) -> LedgerRow {
        LedgerRow {
            provider: "aws".into(),
            kind: "objectStore".into(),
            name: name.into(),
            region: "eu-west-3".into(),
        }
    }

    fn entry(name: &str) -> CacheEntry {
        CacheEntry {
            name: name.into(),
            region: "eu-west-3".into(),
            handle: format!("arn:aws:s3:::{name}"),
            observed: serde_json::json!({"arn": format!("arn:aws:s3:::{name}")}),
            written: serde_json::Map::new(),
        }
    }

    fn filled() -> MemoryStore {
        let store = MemoryStore::new();
        let ledger = Ledger {
            rows: [row("logs"), row("assets"), row("stays")].into(),
            discovered: [row("logs")].into(),
            intents: [row("assets")].into(),
            deleting: [row("logs")].into(),
        };
        store.save_ledger("a", &ledger).unwrap();
        let entries = [entry("assets"), entry("logs"), entry("stays")];
        store
            .save_cache("a", "aws", "objectStore", &entries)
            .unwrap();
        store
    }

    #[test]
    fn rows_move_with_their_marks_and_observations_and_the_rest_stays() {
        let store = filled();
        let moving: BTreeSet<_> = [row("logs"), row("assets")].into();
        let moved = move_rows(&store, "a", "b", &moving).unwrap();
        assert_eq!(moved, Moved { rows: 2, cached: 2 });
        let a = store.load_ledger("a").unwrap();
        let b = store.load_ledger("b").unwrap();
        assert_eq!(a.rows, [row("stays")].into());
        assert!(a.discovered.is_empty() && a.intents.is_empty() && a.deleting.is_empty());
        assert_eq!(b.rows, moving);
        assert_eq!(b.discovered, [row("logs")].into());
        assert_eq!(b.intents, [row("assets")].into());
        assert_eq!(b.deleting, [row("logs")].into());
        let names = |fleet| -> Vec<String> {
            store
                .load_cache(fleet, "aws", "objectStore")
                .unwrap()
                .into_iter()
                .map(|e| e.name)
                .collect()
        };
        assert_eq!(names("a"), ["stays"]);
        assert_eq!(names("b"), ["assets", "logs"]);
        // Again: nothing left to move, nothing written.
        assert_eq!(
            move_rows(&store, "a", "b", &moving).unwrap(),
            Moved::default()
        );
    }

    #[test]
    fn the_destination_is_written_before_the_source_and_ledgers_inside_caches() {
        let store = filled();
        let moving: BTreeSet<_> = [row("logs")].into();
        let (writes, _) = writes(&store, "a", "b", &moving).unwrap();
        let order: Vec<(&str, &str)> = writes
            .iter()
            .map(|w| match w {
                RecordWrite::Ledger { fleet, .. } => (fleet.as_str(), "ledger"),
                RecordWrite::Cache { fleet, .. } => (fleet.as_str(), "cache"),
            })
            .collect();
        assert_eq!(
            order,
            [
                ("b", "cache"),
                ("b", "ledger"),
                ("a", "ledger"),
                ("a", "cache")
            ]
        );
    }

    #[test]
    fn a_move_interrupted_after_the_ledgers_is_completed_by_a_rerun() {
        let store = filled();
        let moving: BTreeSet<_> = [row("logs")].into();
        let (writes, _) = writes(&store, "a", "b", &moving).unwrap();
        // Killed before the source's cache was written.
        store.save_together(&writes[..3]).unwrap();
        let moved = move_rows(&store, "a", "b", &moving).unwrap();
        assert_eq!(moved, Moved { rows: 0, cached: 1 });
        let a = store.load_cache("a", "aws", "objectStore").unwrap();
        assert!(a.iter().all(|e| e.name != "logs"));
        let b = store.load_cache("b", "aws", "objectStore").unwrap();
        assert_eq!(b, [entry("logs")]);
        assert!(store.load_ledger("b").unwrap().is_discovered(&row("logs")));
    }
}
