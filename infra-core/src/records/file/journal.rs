//! The ledger's journal: what a run writes while its calls are under way — rows marked
//! before their delete is sent, rows dropped once it is confirmed — appended to
//! `ledger.journal` beside the ledger a batch at a time (one short write and one flush
//! per batch, whatever the ledger's size), and folded into `ledger.json` by the next
//! save of the whole ledger, which removes it.
//!
//! The first line names the ledger the journal follows, by the SHA-256 of the ledger
//! file's bytes: a journal left beside a ledger written after it (a run killed between
//! the new ledger's rename and the journal's removal) is stale, and never read. A last
//! line cut short (a write interrupted) is ignored: a batch counts once its line is
//! whole, and a delete is sent only after its batch was flushed.
//!
//! ```text
//! {"journal":1,"fleet":"shop","follows":"<sha-256 of ledger.json, hex>"}
//! {"deleting":{"provider":"aws","kind":"s3Bucket","name":"logs","region":"eu-west-3"}}
//! {"dropped":{"provider":"aws","kind":"s3Bucket","name":"logs","region":"eu-west-3"}}
//! ```

use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use super::io;
use crate::RecordError;
use crate::records::{LedgerProgress, LedgerRow};

/// The schema version of the journal this crate writes.
pub(super) const JOURNAL_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    journal: u32,
    fleet: String,
    follows: String,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
enum Entry {
    Deleting(LedgerRow),
    Dropped(LedgerRow),
}

/// The SHA-256 of a ledger file's text, in hex; empty for no file.
pub(super) fn digest(text: Option<&str>) -> String {
    text.map(|t| {
        sha2::Sha256::digest(t.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    })
    .unwrap_or_default()
}

fn malformed(path: &Path, line: usize, e: &serde_json::Error) -> RecordError {
    RecordError::Malformed {
        path: path.to_owned(),
        line,
        column: e.column().max(1),
        message: e
            .to_string()
            .split(" at line ")
            .next()
            .unwrap_or_default()
            .to_owned(),
    }
}

/// What the journal at `path` holds for the ledger whose digest is `follows`: nothing
/// when there is no journal, or when it follows another ledger (stale).
pub(super) fn read(
    path: &Path,
    fleet: &str,
    follows: &str,
) -> Result<Option<LedgerProgress>, RecordError> {
    let Some(text) = io::read(path)? else {
        return Ok(None);
    };
    // Whole lines only: a last line without its newline was cut short.
    let whole = text.rfind('\n').map_or("", |end| &text[..end]);
    let mut lines = whole.lines();
    let Some(first) = lines.next() else {
        return Ok(None);
    };
    let header: serde_json::Value =
        serde_json::from_str(first).map_err(|e| malformed(path, 1, &e))?;
    if let Some(found) = header["journal"].as_u64()
        && found > u64::from(JOURNAL_VERSION)
    {
        return Err(RecordError::NewerVersion {
            path: path.to_owned(),
            found: u32::try_from(found).unwrap_or(u32::MAX),
            supported: JOURNAL_VERSION,
        });
    }
    let header: Header = serde_json::from_value(header).map_err(|e| malformed(path, 1, &e))?;
    if header.fleet != fleet {
        return Err(RecordError::OtherFleet {
            path: path.to_owned(),
            found: header.fleet,
            expected: fleet.to_owned(),
        });
    }
    if header.follows != follows {
        return Ok(None);
    }
    let mut progress = LedgerProgress::default();
    for (i, line) in lines.enumerate() {
        match serde_json::from_str(line).map_err(|e| malformed(path, i + 2, &e))? {
            Entry::Deleting(row) => progress.deleting.push(row),
            Entry::Dropped(row) => progress.dropped.push(row),
        }
    }
    Ok(Some(progress))
}

fn lines_of(progress: &LedgerProgress) -> Vec<u8> {
    let mut text = Vec::new();
    let entries = progress
        .deleting
        .iter()
        .cloned()
        .map(Entry::Deleting)
        .chain(progress.dropped.iter().cloned().map(Entry::Dropped));
    for entry in entries {
        serde_json::to_writer(&mut text, &entry).expect("journal entries serialise");
        text.push(b'\n');
    }
    text
}

/// Starts a journal at `path` following the ledger whose digest is `follows`, holding
/// `progress`: written whole, atomically, replacing any journal there.
pub(super) fn start(
    path: &Path,
    fleet: &str,
    follows: String,
    progress: &LedgerProgress,
) -> Result<(), RecordError> {
    let header = Header {
        journal: JOURNAL_VERSION,
        fleet: fleet.to_owned(),
        follows,
    };
    let mut text = serde_json::to_vec(&header).expect("a journal header serialises");
    text.push(b'\n');
    text.extend(lines_of(progress));
    io::write_bytes_atomically(path, &text)
}

/// Appends `progress` to the journal at `path` and flushes it to disk.
pub(super) fn append(path: &Path, progress: &LedgerProgress) -> Result<(), RecordError> {
    let failed = |source| RecordError::Io {
        path: path.to_owned(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(failed)?;
    file.write_all(&lines_of(progress))
        .and_then(|()| file.sync_data())
        .map_err(failed)
}
