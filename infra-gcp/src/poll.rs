//! Long-running operations, awaited on the configuration's clock with
//! `infra_core::sdk::poll` (the wait, and what a create does when it cannot tell
//! whether it happened), and the outcome a finished Google operation carries.

use std::future::Future;

use infra_core::sdk::BackendError;
#[cfg(any(feature = "artifactregistry", feature = "run"))]
use infra_core::sdk::ErrorKind;

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

/// The outcome a finished long-running operation carries: `Some(resource)` when it is
/// done with a response of type `T`, `None` while it runs, its error as a refusal
/// (`not_found` as for [`classify`](crate::error::classify)).
#[cfg(any(feature = "artifactregistry", feature = "run"))]
pub(crate) fn operation_outcome<T>(
    what: &str,
    op: &google_cloud_longrunning::model::Operation,
    not_found: &[&str],
) -> Result<Option<T>, BackendError>
where
    T: google_cloud_wkt::message::Message,
{
    use google_cloud_longrunning::model::operation::Result as OpResult;
    if !op.done {
        return Ok(None);
    }
    match &op.result {
        Some(OpResult::Response(any)) => any.to_msg::<T>().map(Some).map_err(|e| {
            BackendError::new(
                ErrorKind::Other,
                format!("{what}: the operation's answer could not be read: {e}"),
            )
            .maybe_sent()
        }),
        Some(OpResult::Error(status)) => {
            let code = google_cloud_gax::error::rpc::Code::from(status.code);
            Err(crate::error::refusal(
                what,
                code.name(),
                None,
                &status.message,
                not_found,
            ))
        }
        Some(_) | None => Err(BackendError::new(
            ErrorKind::Other,
            format!("{what}: the operation is done but carries no outcome"),
        )
        .maybe_sent()),
    }
}
