//! What the official clients' pollers do not do: Cloud SQL's own operations
//! (`sql#operation`, which are not `google.longrunning` operations and have no poller)
//! awaited on the configuration's clock with `infra_core::sdk::poll`, and what a create
//! does when it cannot tell whether it happened (`settle_uncertain`), for every kind.
//!
//! Artifact Registry's and Cloud Run's operations are awaited by the clients' own
//! pollers (`google-cloud-lro`), on the polling policies of `retry.rs`.

use std::future::Future;

use infra_core::sdk::BackendError;

#[allow(
    unused_imports,
    reason = "a build with some services left out uses only part of them"
)]
pub(crate) use infra_core::sdk::poll::{Waited, settle_uncertain, still_running};

use crate::clients::Clients;

/// Polls `poll` until it answers `Some`, on the clients' clock and polling policy.
/// `what` names the operation in logs.
pub(crate) async fn until_done<T, F, Fut>(
    clients: &Clients,
    what: &str,
    poll: F,
) -> Result<Waited<T>, BackendError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, BackendError>>,
{
    infra_core::sdk::poll::until_done(clients.clock(), clients.polling(), what, poll).await
}
