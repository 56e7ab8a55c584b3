//! The one retry policy of `infra_core::sdk::retry`, applied through the official
//! clients' own hooks, and the polling policies of long-running operations.
//!
//! Every official client (`clients.rs`) is built with [`GaxRetry`] as its retry
//! policy, its backoff policy and its retry throttler, and with the policy's request
//! timeout as its attempt timeout. Each decision is [`RetryPolicy::decide`]: throttled
//! (429, `RESOURCE_EXHAUSTED`) and never-sent failures are retried for every call,
//! creates included; a failure that may have been sent (a timeout, a 5xx) only for a
//! call gax marks idempotent (`GET`, `PUT`, `DELETE`, and the calls this crate marks so
//! itself); the time budget; full jitter; the service's `Retry-After` or `RetryInfo`.
//! Nothing else retries these calls: the engine does not, and no layer of this crate
//! does (the hand-written Cloud Storage calls go through [`infra_core::sdk::Retrier`]
//! with the same policy instead, since they have no client of their own).
//!
//! **How the wait reaches gax.** gax asks two questions after a failed attempt, in this
//! order and on the same thread, with nothing awaited in between (`retry_loop` in
//! `google-cloud-gax`): the retry policy's `on_error(state, error)` (retry or not), then
//! the backoff policy's `on_failure(state)` (how long to wait). Only the first sees the
//! error, and so the `Retry-After` it carries. [`GaxRetry`] therefore decides the wait
//! in `on_error`, with the whole policy, and leaves it in a thread-local slot that
//! `on_failure` takes at once. No other call can come between the two on that thread,
//! so the wait is always the one decided for this attempt; should a later gax ask for a
//! wait without a decision before it, the slot is empty and the wait is a fresh draw of
//! the policy's own jittered backoff (never a stale value: the slot is emptied on every
//! read). The polling policies pass the `Retry-After` of a failed poll the same way.
//!
//! Time: gax sleeps on tokio's clock and stamps the start of each call's retry loop
//! with it; the budget is measured on that same clock, so that a test on a paused
//! tokio clock sees budgets, waits and timeouts move together.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use google_cloud_gax::backoff_policy::BackoffPolicy;
use google_cloud_gax::error::Error;
use google_cloud_gax::polling_backoff_policy::PollingBackoffPolicy;
use google_cloud_gax::polling_error_policy::PollingErrorPolicy;
use google_cloud_gax::polling_state::PollingState;
use google_cloud_gax::retry_policy::RetryPolicy as GaxRetryPolicy;
use google_cloud_gax::retry_result::RetryResult;
use google_cloud_gax::retry_state::RetryState;
use google_cloud_gax::retry_throttler::RetryThrottler;
use google_cloud_gax::throttle_result::ThrottleResult;
use infra_core::sdk::retry::{Decision, GiveUp};
use infra_core::sdk::{Failure, Idempotence, Jitter, Polling, RetryPolicy};

use crate::error::failure_of;

thread_local! {
    /// The wait `on_error` decided, for the `on_failure` that follows it.
    static DECIDED_WAIT: Cell<Option<Duration>> = const { Cell::new(None) };
    /// The wait a failed poll's answer asked for, for the `wait_period` that follows.
    static POLL_ASKED: Cell<Option<Duration>> = const { Cell::new(None) };
}

/// Now, on tokio's clock, as the `std` instant gax stamps its loops with.
#[allow(
    clippy::disallowed_methods,
    reason = "gax stamps its retry loop with tokio's clock and sleeps on it: the budget \
              must be measured on the same clock"
)]
fn tokio_now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// How long since `start` (an instant gax stamped), on tokio's clock.
fn since(start: Instant) -> Duration {
    tokio_now().saturating_duration_since(start)
}

/// The crate's [`RetryPolicy`] as gax's retry policy, backoff policy and throttler.
#[derive(Clone)]
pub(crate) struct GaxRetry {
    policy: RetryPolicy,
    jitter: Arc<Jitter>,
}

impl std::fmt::Debug for GaxRetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GaxRetry")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl GaxRetry {
    /// `policy`, with jitter from the operating system's random source.
    pub(crate) fn new(policy: RetryPolicy) -> Self {
        GaxRetry {
            policy,
            jitter: Arc::new(Jitter::new()),
        }
    }

    /// What to do after attempt number `attempts` (1 for the first) failed with
    /// `failure`, `elapsed` into the call.
    fn decide(
        &self,
        failure: Failure,
        idempotent: bool,
        attempts: u32,
        elapsed: Duration,
    ) -> Decision {
        let idempotence = if idempotent {
            Idempotence::Idempotent
        } else {
            Idempotence::NotIdempotent
        };
        self.policy.decide(
            failure,
            idempotence,
            attempts.saturating_sub(1),
            elapsed,
            self.jitter.draw(),
        )
    }

    /// gax's answer for `decision`, the wait left for `on_failure` to take.
    fn flow(decision: Decision, error: Error) -> RetryResult {
        match decision {
            Decision::Retry(wait) => {
                DECIDED_WAIT.set(Some(wait));
                RetryResult::Continue(error)
            }
            Decision::GiveUp(GiveUp::BudgetSpent) => {
                DECIDED_WAIT.set(None);
                RetryResult::Exhausted(error)
            }
            Decision::GiveUp(GiveUp::Final | GiveUp::MayHaveBeenSent) => {
                DECIDED_WAIT.set(None);
                RetryResult::Permanent(error)
            }
        }
    }
}

impl GaxRetryPolicy for GaxRetry {
    fn on_error(&self, state: &RetryState, error: Error) -> RetryResult {
        let decision = self.decide(
            failure_of(&error),
            state.idempotent,
            state.attempt_count,
            since(state.start),
        );
        Self::flow(decision, error)
    }

    /// Not reached: [`GaxRetry`] as a throttler never holds an attempt back. Answered
    /// by the policy all the same, as a failure that was never sent.
    fn on_throttle(&self, state: &RetryState, error: Error) -> ThrottleResult {
        let decision = self.decide(
            Failure::NotSent,
            state.idempotent,
            state.attempt_count,
            since(state.start),
        );
        match Self::flow(decision, error) {
            RetryResult::Continue(e) => ThrottleResult::Continue(e),
            RetryResult::Exhausted(e) | RetryResult::Permanent(e) => ThrottleResult::Exhausted(e),
        }
    }

    /// No limit of gax's own: the budget is applied in `on_error`, where the wait is
    /// known. (A limit here would also shorten the attempt timeout of the last tries.)
    fn remaining_time(&self, _state: &RetryState) -> Option<Duration> {
        None
    }
}

impl BackoffPolicy for GaxRetry {
    fn on_failure(&self, state: &RetryState) -> Duration {
        DECIDED_WAIT.take().unwrap_or_else(|| {
            self.policy
                .backoff_ceiling(state.attempt_count.saturating_sub(1))
                .mul_f64(self.jitter.draw())
        })
    }
}

/// The throttler: never holds a retry back. Waits are the policy's alone (its jitter,
/// its `Retry-After`, its budget); a client-side throttle would add waits nobody
/// decided, and one shared by every call of a client would let a storm on one call
/// starve the others.
impl RetryThrottler for GaxRetry {
    fn throttle_retry_attempt(&self) -> bool {
        false
    }

    fn on_retry_failure(&mut self, _flow: &RetryResult) {}

    fn on_success(&mut self) {}
}

/// The error a poller ends with when its operation is still running at the deadline.
#[derive(Debug)]
pub(crate) struct StillRunning {
    /// How long it was awaited.
    pub(crate) deadline: Duration,
}

impl std::fmt::Display for StillRunning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the operation was still running after {}s",
            self.deadline.as_secs_f64()
        )
    }
}

impl std::error::Error for StillRunning {}

/// The polling policies of long-running operations, from the configuration's
/// [`Polling`]: polls `first` apart, doubling up to `longest`, for at most `deadline`
/// from the moment the operation started; a poll that failed transiently (throttled,
/// unavailable, timed out) is repeated, after at least the wait its answer asked for.
///
/// Each operation gets policies of its own ([`OperationPolling::starting_now`], through
/// `Clients::operation_polling`), whose deadline counts on tokio's clock, the clock the
/// poller sleeps on, from the moment the operation is started. The clients' default
/// ([`OperationPolling::new`], for a poller made without them) counts from the start
/// gax stamps on the poller, on the system clock.
#[derive(Clone, Debug)]
pub(crate) struct OperationPolling {
    polling: Polling,
    started: Option<Instant>,
}

impl OperationPolling {
    /// The clients' default: the deadline counts from the poller's own stamp.
    pub(crate) fn new(polling: Polling) -> Self {
        OperationPolling {
            polling,
            started: None,
        }
    }

    /// The policies of an operation started now.
    pub(crate) fn starting_now(polling: Polling) -> Self {
        OperationPolling {
            polling,
            started: Some(tokio_now()),
        }
    }

    /// How long the operation has been awaited.
    fn awaited(&self, state: &PollingState) -> Duration {
        match self.started {
            Some(started) => since(started),
            None => system_since(state.start),
        }
    }

    fn past_deadline(&self, state: &PollingState) -> bool {
        self.awaited(state) >= self.polling.deadline
    }
}

/// How long since `start`, a system-clock instant gax stamped on a poller.
#[allow(
    clippy::disallowed_methods,
    reason = "gax stamps a poller's start on the system clock: its age is read on that clock"
)]
fn system_since(start: Instant) -> Duration {
    Instant::now().saturating_duration_since(start)
}

impl PollingErrorPolicy for OperationPolling {
    fn on_error(&self, state: &PollingState, error: Error) -> RetryResult {
        let asked = match failure_of(&error) {
            Failure::Final => return RetryResult::Permanent(error),
            Failure::NotSent => None,
            Failure::Throttled { retry_after } | Failure::MaybeSent { retry_after } => retry_after,
        };
        if self.past_deadline(state) {
            return RetryResult::Exhausted(error);
        }
        POLL_ASKED.set(asked);
        RetryResult::Continue(error)
    }

    fn on_in_progress(&self, state: &PollingState, operation_name: &str) -> Result<(), Error> {
        if self.past_deadline(state) {
            tracing::debug!("{operation_name}: still running at the deadline");
            return Err(Error::exhausted(StillRunning {
                deadline: self.polling.deadline,
            }));
        }
        Ok(())
    }
}

impl PollingBackoffPolicy for OperationPolling {
    fn wait_period(&self, state: &PollingState) -> Duration {
        let longest = self.polling.longest.max(Duration::from_millis(1));
        let doubled = self
            .polling
            .first
            .saturating_mul(2u32.saturating_pow(state.attempt_count.saturating_sub(1).min(31)))
            .min(longest);
        let left = self.polling.deadline.saturating_sub(self.awaited(state));
        let wait = doubled.min(left.max(Duration::from_millis(1)));
        match POLL_ASKED.take() {
            Some(asked) => wait.max(asked),
            None => wait,
        }
    }
}

#[cfg(test)]
mod tests;
