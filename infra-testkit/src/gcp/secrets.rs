//! The Secrets stand-in. (Being written.)

use super::State;
use super::wire::{Reply, Req};

/// What the stand-in holds of this service.
#[derive(Debug, Default)]
pub(crate) struct Secrets {}

/// Serves a request of this service, or `None` when the path is not one of its own.
pub(crate) fn route(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let _ = (state, req);
    None
}
