//! The world file's journal, `<name>.journal` beside it: one line per saved change, so
//! that a call's write costs what it changed, not the size of the world.
//!
//! - **A line is a change, whole.** Each holds the generator's state, the next
//!   identifier and the accounts after the change, every resource the change made or
//!   altered (`put`, whole) and every one it removed (`drop`). A line is appended and
//!   flushed to disk before the call that made the change returns; a change is made
//!   only once its line is on disk.
//! - **A last line without its newline was never acknowledged.** A process killed in
//!   the middle of an append leaves part of a line; it is not part of the world, and
//!   the next writer cuts it off. Any other line that is not a change is refused with
//!   its line and column, and the files are left as they are.
//! - **Replaying is idempotent.** Each line states resources whole, so replaying the
//!   journal over a snapshot that already holds it gives the same world: a process
//!   killed between writing a compacted snapshot and removing the journal loses
//!   nothing and doubles nothing.
//! - **Compacted.** The world file is rewritten whole and the journal removed when the
//!   journal outgrows the file, when the world is saved ([`SimCloud::save`]) and when
//!   the last handle on it is dropped, so a run leaves one file, the world whole, and
//!   a run's writes cost in total a constant times what they changed.
//!
//! [`SimCloud::save`]: super::SimCloud::save

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::rng::Rng;
use super::world::Stored;
use super::world_file::WorldFileError;

/// A change as it is written.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ChangeOut<'a> {
    pub(super) rng: &'a Rng,
    pub(super) next_id: u64,
    pub(super) accounts: &'a BTreeMap<String, String>,
    pub(super) put: Vec<&'a Stored>,
    pub(super) drop: Vec<u64>,
}

/// A change as it is read.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ChangeIn {
    pub(super) rng: Rng,
    pub(super) next_id: u64,
    pub(super) accounts: BTreeMap<String, String>,
    pub(super) put: Vec<Stored>,
    pub(super) drop: Vec<u64>,
}

impl ChangeOut<'_> {
    /// The change as one journal line, newline included.
    pub(super) fn line(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec(self).expect("a change serialises");
        bytes.push(b'\n');
        bytes
    }
}

/// The changes a journal's bytes hold, and how many of its bytes they take: a last
/// line without its newline (an append cut short) is not among them.
pub(super) fn read(path: &Path, bytes: &[u8]) -> Result<(Vec<ChangeIn>, usize), WorldFileError> {
    let mut changes = Vec::new();
    let mut complete = 0;
    for (n, line) in bytes.split_inclusive(|b| *b == b'\n').enumerate() {
        let Some(body) = line.strip_suffix(b"\n") else {
            break;
        };
        let change = serde_json::from_slice(body).map_err(|e| WorldFileError::Malformed {
            path: path.to_path_buf(),
            line: n + 1,
            column: e.column(),
            message: e.to_string(),
        })?;
        changes.push(change);
        complete += line.len();
    }
    Ok((changes, complete))
}

/// The resources after `changes`, applied in order to `resources`.
pub(super) fn replay(resources: Vec<Stored>, changes: &mut [ChangeIn]) -> Vec<Stored> {
    let mut by_id: BTreeMap<u64, Stored> = resources.into_iter().map(|s| (s.id, s)).collect();
    for change in changes {
        for stored in std::mem::take(&mut change.put) {
            by_id.insert(stored.id, stored);
        }
        for id in &change.drop {
            by_id.remove(id);
        }
    }
    by_id.into_values().collect()
}
