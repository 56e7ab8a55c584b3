//! What a move would do to each resource, or why it may not: its row in either fleet's
//! records, its handle, and the ownership marker it carries now.

use std::sync::Arc;

use super::Outcome;
use crate::backend::{LEGACY_MARKER_VALUE, MARKER_KEY};
use crate::cli::reach::{backend_for, check_account, handles_named};
use crate::cli::state::{cached_entry, pick_row};
use crate::{Backend, Engine, ErrorKind, Fleet, Ledger, LedgerRow};

/// The marker a resource carries now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MarkerNow {
    /// This fleet's: the move rewrites it.
    Source,
    /// FLEET's already: an earlier move was interrupted after rewriting it.
    Destination,
    /// The legacy value every fleet reads as its own: left as it is.
    Legacy,
}

/// One resource a move takes.
pub(super) struct Item {
    pub(super) row: LedgerRow,
    pub(super) backend: Arc<dyn Backend>,
    pub(super) kind: &'static str,
    pub(super) handle: String,
    pub(super) marker: MarkerNow,
    /// Whether this fleet's ledger holds its row (else FLEET's alone does: moved
    /// already).
    pub(super) in_source: bool,
    /// Its marks in this fleet's ledger (`discovered`, `intent`).
    pub(super) marks: Vec<&'static str>,
    /// Whether an observation of it is cached (in either fleet's records).
    pub(super) cached: bool,
    pub(super) outcome: Outcome,
}

/// Every resource surveyed: those that can move, and those refused (address, why).
pub(super) struct Survey {
    pub(super) items: Vec<Item>,
    pub(super) refused: Vec<(String, String)>,
}

/// Surveys each address; an error only when the records cannot be read.
pub(super) async fn survey(
    engine: &Engine,
    fleet: &Fleet,
    to: &str,
    addresses: &[String],
) -> Result<Survey, String> {
    let store = &**engine.store();
    for name in [fleet.name(), to] {
        store.verify(name).map_err(|e| e.to_string())?;
    }
    let ours = store.load_ledger(fleet.name()).map_err(|e| e.to_string())?;
    let theirs = store.load_ledger(to).map_err(|e| e.to_string())?;
    let mut survey = Survey {
        items: Vec::new(),
        refused: Vec::new(),
    };
    for address in addresses {
        let ledgers = Ledgers {
            ours: &ours,
            theirs: &theirs,
            to,
        };
        match one(engine, fleet, &ledgers, address).await {
            Ok(item) if survey.items.iter().any(|i| i.row == item.row) => {}
            Ok(item) => survey.items.push(item),
            Err(why) => survey.refused.push((address.clone(), why)),
        }
    }
    Ok(survey)
}

/// Both fleets' ledgers, and the destination's name.
struct Ledgers<'a> {
    ours: &'a Ledger,
    theirs: &'a Ledger,
    to: &'a str,
}

/// One address surveyed, or why it may not move.
async fn one(
    engine: &Engine,
    fleet: &Fleet,
    ledgers: &Ledgers<'_>,
    address: &str,
) -> Result<Item, String> {
    let (from, to) = (fleet.name(), ledgers.to);
    let (row, in_source) = match pick_row(ledgers.ours, from, address) {
        Ok(row) => (row, true),
        Err(why) => match pick_row(ledgers.theirs, to, address) {
            Ok(row) => (row, false),
            Err(_) => return Err(why),
        },
    };
    let in_destination = ledgers.theirs.rows.contains(&row);
    let (backend, kind) = backend_for(engine.backends(), &row.provider, &row.kind)?;
    check_account(fleet, &*backend).await?;
    let store = &**engine.store();
    let entry = match cached_entry(store, from, &row).map_err(|e| e.to_string())? {
        Some(entry) => Some(entry),
        None => cached_entry(store, to, &row).map_err(|e| e.to_string())?,
    };
    let cached = entry.is_some();
    let handle = match entry {
        Some(entry) => entry.handle,
        None => only_handle(&*backend, kind, &row).await?,
    };
    let tags = backend
        .ownership(kind, &row.region, &handle)
        .await
        .map_err(|e| match e.kind {
            ErrorKind::NotFound => format!(
                "{row} does not exist in the cloud (handle {handle}): there is nothing to hand \
                 over. `apply` recreates it, or `forget` drops its row"
            ),
            _ => format!("its ownership marker could not be read: {e}"),
        })?;
    let marker = marker_now(tags.get(MARKER_KEY).map(String::as_str), from, to)?;
    standing(in_source, in_destination, marker, to, &row)?;
    Ok(Item {
        marks: marks(ledgers.ours, &row),
        row,
        backend,
        kind,
        handle,
        marker,
        in_source,
        cached,
        outcome: Outcome::NotAttempted,
    })
}

/// What the marker a resource carries means for the move; another fleet's, or none,
/// refuses it.
fn marker_now(value: Option<&str>, from: &str, to: &str) -> Result<MarkerNow, String> {
    match value {
        Some(v) if v == from => Ok(MarkerNow::Source),
        Some(v) if v == to => Ok(MarkerNow::Destination),
        Some(LEGACY_MARKER_VALUE) => Ok(MarkerNow::Legacy),
        Some(other) => Err(format!(
            "it carries fleet `{other}`'s ownership marker ({MARKER_KEY}={other}), not this \
             fleet's: it is not this fleet's to hand over"
        )),
        None => Err(format!(
            "it carries no ownership marker ({MARKER_KEY}), so nothing says it is this \
             fleet's to hand over"
        )),
    }
}

/// Whether the rows the two fleets hold of a resource let it move, given its marker:
/// a row in this fleet's records alone; or a resource carrying FLEET's marker already
/// (an interrupted move), wherever its rows are.
fn standing(
    in_source: bool,
    in_destination: bool,
    marker: MarkerNow,
    to: &str,
    row: &LedgerRow,
) -> Result<(), String> {
    match (in_source, in_destination, marker) {
        (_, _, MarkerNow::Destination) | (true, false, _) => Ok(()),
        (false, _, _) => Err(format!(
            "it is not managed by this fleet: fleet `{to}`'s records hold it already"
        )),
        (true, true, _) => Err(format!(
            "fleet `{to}` already manages {row} (its records hold that address) while the \
             resource carries this fleet's marker: settle which fleet it belongs to first"
        )),
    }
}

/// The handle of the one resource the cloud lists under the row's name.
async fn only_handle(
    backend: &dyn Backend,
    kind: &'static str,
    row: &LedgerRow,
) -> Result<String, String> {
    let found = handles_named(backend, kind, &row.region, &row.name)
        .await
        .map_err(|e| format!("it could not be looked for in the cloud: {e}"))?;
    match <[String; 1]>::try_from(found) {
        Ok([one]) => Ok(one),
        Err(found) if found.is_empty() => Err(format!(
            "{row} does not exist in the cloud: there is nothing to hand over. `apply` \
             recreates it, or `forget` drops its row"
        )),
        Err(found) => Err(format!(
            "the cloud lists {} resources named `{}` and no observation of it is cached to \
             tell which is this fleet's (`refresh` records one)",
            found.len(),
            row.name
        )),
    }
}

/// The marks a row carries in `ledger`.
fn marks(ledger: &Ledger, row: &LedgerRow) -> Vec<&'static str> {
    let mut marks = Vec::new();
    if ledger.is_discovered(row) {
        marks.push("discovered");
    }
    if ledger.is_intent(row) {
        marks.push("intent");
    }
    marks
}
