//! The Iam stand-in. (Being written.)

use super::State;
use super::wire::{Reply, Req};

/// What the stand-in holds of this service.
#[derive(Debug, Default)]
pub(crate) struct Iam {}

/// Serves a request of this service, or `None` when the path is not one of its own.
pub(crate) fn route(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let _ = (state, req);
    None
}

/// `POST /v3/projects/{p}:getIamPolicy` and `:setIamPolicy`.
pub(crate) fn route_project_policy(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let _ = (state, req);
    None
}
