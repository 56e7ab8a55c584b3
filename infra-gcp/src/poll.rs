//! Long-running operations, awaited on the configuration's clock, and what a create
//! does when it cannot tell whether it happened.
//!
//! An operation is polled with a wait that doubles from [`Polling::first`] up to
//! [`Polling::longest`], until it is done or [`Polling::deadline`] has passed on the
//! clock. A poll that fails transiently (throttled, unavailable) is repeated within the
//! deadline; any other failure ends the wait with that error.
//!
//! A create whose outcome is unknown (the request may have been sent and no answer
//! came back, or its operation was still running at the deadline) is never reported
//! failed outright: [`settle_uncertain`] looks for the resource by name first. Found
//! and carrying this fleet's marker, it is the resource the create made; found without
//! it, the name is taken (`Conflict`); not found, the error stands, still marked
//! "may have been sent", so that the engine records the outcome as uncertain.

use std::future::Future;
use std::time::Duration;

use infra_core::sdk::{BackendError, ErrorKind, Marker, Ownership, RawTags};

use crate::clients::Clients;
use crate::config::Polling;

/// What waiting for an operation came to.
#[derive(Debug)]
pub(crate) enum Waited<T> {
    /// The operation finished with this answer.
    Done(T),
    /// The deadline passed with the operation still running.
    StillRunning,
}

/// Polls `poll` until it answers `Some`, on the clients' clock and polling policy.
/// `what` names the operation in errors.
pub(crate) async fn until_done<T, F, Fut>(
    clients: &Clients,
    what: &str,
    mut poll: F,
) -> Result<Waited<T>, BackendError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, BackendError>>,
{
    until_done_with(clients.clock(), clients.polling(), what, &mut poll).await
}

async fn until_done_with<T, F, Fut>(
    clock: &dyn infra_core::sdk::Clock,
    polling: Polling,
    what: &str,
    poll: &mut F,
) -> Result<Waited<T>, BackendError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, BackendError>>,
{
    let start = clock.now();
    let mut wait = polling.first;
    loop {
        match poll().await {
            Ok(Some(done)) => return Ok(Waited::Done(done)),
            Ok(None) => {}
            Err(e) if matches!(e.kind, ErrorKind::Throttled | ErrorKind::Unavailable) => {
                tracing::debug!("{what}: a poll failed and is repeated: {e}");
            }
            Err(e) => return Err(e),
        }
        let spent = clock.now().saturating_sub(start);
        if spent >= polling.deadline {
            return Ok(Waited::StillRunning);
        }
        clock.sleep(wait.min(polling.deadline - spent)).await;
        wait = (wait * 2).min(polling.longest.max(Duration::from_millis(1)));
    }
}

/// The error of an operation still running at the deadline: its outcome is unknown.
pub(crate) fn still_running(what: &str, polling: Polling) -> BackendError {
    BackendError::new(
        ErrorKind::Unavailable,
        format!(
            "{what}: the operation was still running after {}s; its outcome is unknown",
            polling.deadline.as_secs()
        ),
    )
    .maybe_sent()
}

/// What a create does after an uncertain outcome (`err` may have been sent): looks the
/// resource up by name with `find`, which answers its labels (or marker-carrying
/// equivalent) and whatever the caller needs to answer the create.
///
/// - Found with this fleet's marker: the create happened; `Ok(found)`.
/// - Found without it, or with another fleet's: the name is someone else's; `Conflict`.
/// - Not found: `err`, unchanged (still "may have been sent").
/// - The lookup failing: `err`, with the lookup's failure added to its message.
pub(crate) async fn settle_uncertain<T, Fut>(
    err: BackendError,
    marker: &Marker,
    what: &str,
    find: Fut,
) -> Result<T, BackendError>
where
    Fut: Future<Output = Result<Option<(RawTags, T)>, BackendError>>,
{
    if !err.may_have_been_sent {
        return Err(err);
    }
    match find.await {
        Ok(Some((labels, found))) => match marker.verdict(&labels) {
            Ownership::Ours => Ok(found),
            Ownership::Unmarked | Ownership::OtherFleet { .. } => Err(BackendError::new(
                ErrorKind::Conflict,
                format!(
                    "{what}: the outcome of the create was unknown ({}), and what now holds \
                     the name does not carry this fleet's marker",
                    err.message
                ),
            )),
        },
        Ok(None) => Err(err),
        Err(lookup) => Err(BackendError {
            message: format!(
                "{}; looking for it by name failed too: {}",
                err.message, lookup.message
            ),
            ..err
        }),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use infra_core::sdk::{Clock, ManualClock};
    use std::sync::atomic::{AtomicU32, Ordering};

    fn polling() -> Polling {
        Polling {
            first: Duration::from_secs(1),
            longest: Duration::from_secs(4),
            deadline: Duration::from_secs(20),
        }
    }

    #[tokio::test]
    async fn an_operation_is_polled_until_done_and_waits_double_up_to_the_longest() {
        let clock = ManualClock::new();
        let polls = AtomicU32::new(0);
        let mut poll = || async {
            let n = polls.fetch_add(1, Ordering::SeqCst) + 1;
            Ok::<_, BackendError>((n == 4).then_some(n))
        };
        let out = until_done_with(&clock, polling(), "op", &mut poll)
            .await
            .unwrap();
        assert!(matches!(out, Waited::Done(4)));
        // Three waits before the fourth poll: 1 + 2 + 4 seconds.
        assert_eq!(clock.now(), Duration::from_secs(7));
    }

    #[tokio::test]
    async fn polling_stops_at_the_deadline_and_repeats_transient_failures() {
        let clock = ManualClock::new();
        let polls = AtomicU32::new(0);
        let mut poll = || async {
            if polls.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err(BackendError::new(ErrorKind::Throttled, "slow down"));
            }
            Ok::<Option<()>, _>(None)
        };
        let out = until_done_with(&clock, polling(), "op", &mut poll)
            .await
            .unwrap();
        assert!(matches!(out, Waited::StillRunning));
        assert_eq!(clock.now(), Duration::from_secs(20));
        let mut refused =
            || async { Err::<Option<()>, _>(BackendError::new(ErrorKind::Denied, "no")) };
        let err = until_done_with(&clock, polling(), "op", &mut refused)
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Denied);
    }

    #[tokio::test]
    async fn an_uncertain_create_is_looked_for_by_name_and_marker() {
        let marker = Marker::new("shop");
        let lost = || BackendError::new(ErrorKind::Unavailable, "connection reset").maybe_sent();
        let ours = RawTags::from([("managed-by-infra".to_owned(), "shop".to_owned())]);
        let found = settle_uncertain(lost(), &marker, "create", async {
            Ok(Some((ours.clone(), 7)))
        })
        .await;
        assert_eq!(found.unwrap(), 7);
        let taken = settle_uncertain(lost(), &marker, "create", async {
            Ok(Some((RawTags::new(), 7)))
        })
        .await;
        assert_eq!(taken.unwrap_err().kind, ErrorKind::Conflict);
        let missing =
            settle_uncertain::<u8, _>(lost(), &marker, "create", async { Ok(None) }).await;
        let missing = missing.unwrap_err();
        assert!(missing.may_have_been_sent && missing.kind == ErrorKind::Unavailable);
        // A refusal that was certainly not acted on is not looked up.
        let refused = BackendError::new(ErrorKind::Invalid, "bad");
        let out = settle_uncertain::<u8, _>(refused, &marker, "create", async {
            panic!("not looked up")
        })
        .await;
        assert_eq!(out.unwrap_err().kind, ErrorKind::Invalid);
    }
}
