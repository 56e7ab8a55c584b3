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

pub(super) use forget::forget;
pub(super) use mv::mv;
pub(super) use rows::{cached as cached_entry, declared, pick as pick_row, put_cached};
pub(super) use view::{list, show};

pub(super) use super::render::error;
