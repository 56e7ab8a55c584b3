//! The state commands: what the records hold (`state list`, `state show`), a row renamed
//! to follow its resource (`state mv`), and a resource let go without deleting it
//! (`forget`).
//!
//! Those that write the records hold the fleet's lock from their first read of them to
//! their last write; none of them writes to a cloud.

mod forget;
mod mv;
mod rows;
mod view;

use std::time::Duration;

pub(super) use forget::forget;
pub(super) use mv::mv;
pub(super) use rows::declared;
pub(super) use view::{list, show};

use super::console::Io;
use super::render::paint;
use crate::{LockError, LockGuard, RecordStore, lock_fleet};

/// Prints an error and answers exit code 1.
pub(super) fn error(io: &mut Io<'_>, error: &dyn std::fmt::Display) -> u8 {
    let text = paint(io.colour(), &format!("error: {error}"));
    io.err(&text);
    1
}

/// Takes the fleet's lock for `verb`, at once or not at all (no waiting yet), and says
/// on standard error when it took over a lock a run that is gone left behind.
pub(super) async fn take_lock(
    io: &mut Io<'_>,
    store: &dyn RecordStore,
    fleet: &str,
    verb: &str,
) -> Result<LockGuard, LockError> {
    let guard = lock_fleet(store, fleet, verb, Duration::ZERO).await?;
    if let Some(gone) = guard.replaced() {
        io.err(&format!(
            "note: took over the lock left by {gone}, which is no longer running"
        ));
    }
    Ok(guard)
}
