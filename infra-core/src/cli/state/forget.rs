//! `forget ADDRESS`: stop managing a resource without deleting it.
//!
//! As the declaration's `FleetBuilder::forget` does, it drops the resource's ledger row
//! (and here its cached observation too) and touches no cloud: the resource stays as it
//! is, its ownership marker included. The next apply neither changes nor deletes it;
//! `discover` would take it back on that marker, and a plan run with empty records lists
//! it among the resources that carry the marker (remove the marker in the cloud to hand
//! the resource over for good). A resource the fleet still declares is refused, as
//! `FleetBuilder::forget` refuses one: the next apply would adopt it again.

use super::super::console::Io;
use super::error;
use super::rows::{declared, pick, take_cached};
use crate::{Fleet, RecordStore};

/// `forget ADDRESS`.
pub(in crate::cli) async fn forget(
    io: &mut Io<'_>,
    fleet: &Fleet,
    store: &dyn RecordStore,
    address: &str,
) -> u8 {
    let mut ledger = match store.load_ledger(fleet.name()) {
        Ok(l) => l,
        Err(e) => return error(io, &e),
    };
    let row = match pick(&ledger, fleet.name(), address) {
        Ok(row) => row,
        Err(why) => return error(io, &why),
    };
    if let Some(status) = declared(fleet, &row) {
        return error(
            io,
            &format!(
                "{row} is still declared ({status}): the next apply would take it back. \
                 Remove its declaration first, then forget it; nothing was changed"
            ),
        );
    }
    ledger.remove(&row);
    if let Err(e) = store.save_ledger(fleet.name(), &ledger) {
        return error(io, &e);
    }
    if let Err(e) = take_cached(store, fleet.name(), &row) {
        return error(
            io,
            &format!("{row} was forgotten, but its cached observation could not be removed: {e}"),
        );
    }
    io.out(&format!(
        "forgot {row}\nIts row and its cached observation are removed from the records. \
         The resource is left in the cloud as it is, with its ownership marker \
         (managed-by-infra={}): no apply changes or deletes it, and `discover` would take \
         it back.\n",
        fleet.name()
    ));
    0
}
