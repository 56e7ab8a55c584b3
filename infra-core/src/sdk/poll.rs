//! Waiting for asynchronous work on a cloud, and what a create does when it cannot tell
//! whether it happened: what every provider that polls (long-running operations,
//! resources that move from `creating` to `ready`) shares.
//!
//! Work is polled with a wait that doubles from [`Polling::first`] up to
//! [`Polling::longest`], until it is done or [`Polling::deadline`] has passed on the
//! injected [`Clock`]. A poll that fails transiently (throttled, unavailable) is
//! repeated within the deadline; any other failure ends the wait with that error.
//!
//! A create whose outcome is unknown (the request may have been sent and no answer
//! came back, or its work was still running at the deadline) is never reported failed
//! outright: [`settle_uncertain`] looks for the resource by name first. Found and
//! carrying this fleet's marker, it is the resource the create made; found without it,
//! the name is taken (`Conflict`); not found, the error stands, still marked "may have
//! been sent", so that the engine records the outcome as uncertain.

use std::future::Future;
use std::time::Duration;

use crate::backend::{Marker, Ownership, RawTags};
use crate::clock::Clock;
use crate::error::{BackendError, ErrorKind};

/// How asynchronous work is awaited: polled on the backend's clock, the wait doubling
/// from `first` up to `longest`, until `deadline` has passed. Work still running at the
/// deadline leaves its outcome unknown: the backend then looks for the resource by name
/// and marker before it reports anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Polling {
    /// The first wait.
    pub first: Duration,
    /// The longest wait between two polls.
    pub longest: Duration,
    /// How long the work is awaited in all.
    pub deadline: Duration,
}

impl Default for Polling {
    /// One second, doubling up to fifteen, for at most forty-five minutes (a managed
    /// database takes several minutes to create).
    fn default() -> Self {
        Polling {
            first: Duration::from_secs(1),
            longest: Duration::from_secs(15),
            deadline: Duration::from_secs(45 * 60),
        }
    }
}

/// What waiting for an operation came to.
#[derive(Debug)]
pub enum Waited<T> {
    /// The operation finished with this answer.
    Done(T),
    /// The deadline passed with the operation still running.
    StillRunning,
}

/// Polls `poll` until it answers `Some`, on `clock` and `polling`. `what` names the
/// work in logs.
///
/// # Errors
/// The first poll that fails other than transiently.
pub async fn until_done<T, F, Fut>(
    clock: &dyn Clock,
    polling: Polling,
    what: &str,
    mut poll: F,
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
pub fn still_running(what: &str, polling: Polling) -> BackendError {
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
pub async fn settle_uncertain<T, Fut>(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
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
        let poll = || async {
            let n = polls.fetch_add(1, Ordering::SeqCst) + 1;
            Ok::<_, BackendError>((n == 4).then_some(n))
        };
        let out = until_done(&clock, polling(), "op", poll).await.unwrap();
        assert!(matches!(out, Waited::Done(4)));
        // Three waits before the fourth poll: 1 + 2 + 4 seconds.
        assert_eq!(clock.now(), Duration::from_secs(7));
    }

    #[tokio::test]
    async fn polling_stops_at_the_deadline_and_repeats_transient_failures() {
        let clock = ManualClock::new();
        let polls = AtomicU32::new(0);
        let poll = || async {
            if polls.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err(BackendError::new(ErrorKind::Throttled, "slow down"));
            }
            Ok::<Option<()>, _>(None)
        };
        let out = until_done(&clock, polling(), "op", poll).await.unwrap();
        assert!(matches!(out, Waited::StillRunning));
        assert_eq!(clock.now(), Duration::from_secs(20));
        let refused = || async { Err::<Option<()>, _>(BackendError::new(ErrorKind::Denied, "no")) };
        let err = until_done(&clock, polling(), "op", refused)
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
