//! IAM, from memory.

use super::State;
use super::wire::{Reply, Req};

/// The product's resources.
#[derive(Debug, Default)]
pub(crate) struct Iam {}

/// Serves a request of the product, or `None` when the path is not one of its.
pub(crate) fn route(_state: &mut State, _req: &Req<'_>) -> Option<Reply> {
    None
}
