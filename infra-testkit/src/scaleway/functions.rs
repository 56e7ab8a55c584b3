//! Serverless Functions, from memory.

use super::State;
use super::wire::{Reply, Req};

/// The product's resources.
#[derive(Debug, Default)]
pub(crate) struct Functions {}

/// Serves a request of the product, or `None` when the path is not one of its.
pub(crate) fn route(_state: &mut State, _req: &Req<'_>) -> Option<Reply> {
    None
}

/// Serves a `PUT` of an archive to an upload URL handed out (under
/// [`UPLOADS`](super::UPLOADS)).
pub(crate) fn upload(_state: &mut State, _method: &str, path: &str, _bytes: &[u8]) -> Reply {
    Reply::not_found("upload", path)
}
