//! One retry and throttling policy, for every provider.
//!
//! A provider never retries twice over: its calls are retried once, by the machinery of
//! the client library it reaches its cloud with, and the engine does not retry on top.
//! What that machinery decides is decided here, in [`RetryPolicy::decide`], so that every
//! provider answers the same failure the same way:
//!
//! | what the attempt tells | a create | any other call |
//! |---|---|---|
//! | throttled (429, `Throttling…`, `SlowDown`, `RESOURCE_EXHAUSTED`): nothing was done | retried | retried |
//! | never sent (connection refused, no route): nothing was done | retried | retried |
//! | may have been sent (a timeout, a 5xx, an answer lost) | **given up**: repeating it could make a twin; the engine looks for what it made by the ownership marker | retried |
//! | refused for what it asks, or not recognised | given up | given up |
//!
//! Waits grow with **full jitter** (a draw between zero and a ceiling that doubles from
//! [`RetryPolicy::first_backoff`] to [`RetryPolicy::longest_backoff`]), and never fall
//! short of the `Retry-After` the service asked for. A call is retried for as long as its
//! **budget**, a length of time, allows — not a number of tries: a throttling storm that
//! lasts thirty seconds is waited out, and a wait that would end past the budget is not
//! begun. Every attempt waits for its answer at most [`RetryPolicy::request_timeout`]; a
//! timed-out attempt may have been sent.
//!
//! The numbers can be set per run without a rebuild: [`RetryPolicy::from_env`] reads
//! `INFRA_RETRY_BUDGET` and `INFRA_REQUEST_TIMEOUT` (`90s`, `5m`).
//!
//! Where a client library has retry hooks (the AWS SDK's retry strategy, gax's retry and
//! backoff policies), the provider implements them by calling [`RetryPolicy::decide`].
//! Where it has none (a hand-written REST client, the simulated cloud, a provider of
//! your own), [`Retrier::run`] is the loop, on an injected [`Clock`], and
//! [`layer::Retry`](crate::sdk::layer::Retry) puts it around a whole backend.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::records::parse_duration;
use crate::{BackendError, Clock, ErrorKind};

/// The variable [`RetryPolicy::from_env`] reads the budget from.
pub const RETRY_BUDGET_VAR: &str = "INFRA_RETRY_BUDGET";
/// The variable [`RetryPolicy::from_env`] reads the request timeout from.
pub const REQUEST_TIMEOUT_VAR: &str = "INFRA_REQUEST_TIMEOUT";

/// How long calls are retried, how long each attempt may take, and how waits grow.
///
/// ```
/// use std::time::Duration;
/// use infra_core::sdk::RetryPolicy;
///
/// let policy = RetryPolicy::default()
///     .with_budget(Duration::from_secs(300))
///     .with_request_timeout(Duration::from_secs(30));
/// assert_eq!(policy.budget(), Duration::from_secs(300));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    budget: Duration,
    first_backoff: Duration,
    longest_backoff: Duration,
    request_timeout: Duration,
}

impl Default for RetryPolicy {
    /// Two minutes of retries, waits from a quarter of a second up to twenty seconds,
    /// a minute for each attempt's answer.
    fn default() -> Self {
        RetryPolicy {
            budget: Duration::from_secs(120),
            first_backoff: Duration::from_millis(250),
            longest_backoff: Duration::from_secs(20),
            request_timeout: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retry at all: every call is tried once (the request timeout stays).
    pub fn none() -> Self {
        RetryPolicy {
            budget: Duration::ZERO,
            ..Self::default()
        }
    }

    /// The default policy, with the budget and the request timeout taken from
    /// `INFRA_RETRY_BUDGET` and `INFRA_REQUEST_TIMEOUT` when they are set.
    ///
    /// # Errors
    ///
    /// A value that is not a duration (`90s`, `5m`, `500ms`), naming the variable; a
    /// request timeout of zero.
    pub fn from_env() -> Result<Self, String> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// As [`RetryPolicy::from_env`], with the variables read through `var`.
    ///
    /// # Errors
    ///
    /// As [`RetryPolicy::from_env`].
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let read = |name: &str| -> Result<Option<Duration>, String> {
            var(name)
                .filter(|v| !v.trim().is_empty())
                .map(|v| parse_duration(v.trim()).map_err(|e| format!("{name}={v}: {e}")))
                .transpose()
        };
        let mut policy = Self::default();
        if let Some(budget) = read(RETRY_BUDGET_VAR)? {
            policy.budget = budget;
        }
        if let Some(timeout) = read(REQUEST_TIMEOUT_VAR)? {
            if timeout.is_zero() {
                return Err(format!(
                    "{REQUEST_TIMEOUT_VAR}=0: a request must be given some time to answer"
                ));
            }
            policy.request_timeout = timeout;
        }
        Ok(policy)
    }

    /// The same policy with another budget: how long, from its first attempt, a call
    /// may go on being retried.
    #[must_use]
    pub fn with_budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    /// The same policy with other waits: the ceiling of the first, and the ceiling
    /// they double up to.
    #[must_use]
    pub fn with_backoff(mut self, first: Duration, longest: Duration) -> Self {
        self.first_backoff = first;
        self.longest_backoff = longest.max(first);
        self
    }

    /// The same policy with another request timeout: how long one attempt waits for
    /// its answer.
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How long a call may go on being retried, from its first attempt.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// The ceiling of the first wait.
    pub fn first_backoff(&self) -> Duration {
        self.first_backoff
    }

    /// The ceiling the waits double up to.
    pub fn longest_backoff(&self) -> Duration {
        self.longest_backoff
    }

    /// How long one attempt waits for its answer.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The ceiling of the wait before retry number `retry` (0 for the first retry):
    /// `first_backoff` doubled `retry` times, at most `longest_backoff`.
    pub fn backoff_ceiling(&self, retry: u32) -> Duration {
        self.first_backoff
            .saturating_mul(2u32.saturating_pow(retry.min(31)))
            .min(self.longest_backoff)
    }

    /// What to do after an attempt failed: `failure` is what it tells, `idempotence`
    /// whether the call may be repeated after it may have been acted on, `retries` how
    /// many retries were made already, `elapsed` the time since the first attempt began,
    /// and `draw` a number in `[0, 1)` drawn at random (the jitter; [`Jitter::draw`]).
    pub fn decide(
        &self,
        failure: Failure,
        idempotence: Idempotence,
        retries: u32,
        elapsed: Duration,
        draw: f64,
    ) -> Decision {
        if let Failure::Throttled { .. } = failure {
            // The window of the call in flight, if any, yields to it.
            super::adaptive::note_throttled();
        }
        let asked = match failure {
            Failure::Final => return Decision::GiveUp(GiveUp::Final),
            Failure::MaybeSent { .. } if idempotence == Idempotence::NotIdempotent => {
                return Decision::GiveUp(GiveUp::MayHaveBeenSent);
            }
            Failure::Throttled { retry_after } | Failure::MaybeSent { retry_after } => retry_after,
            Failure::NotSent => None,
        };
        let draw = if draw.is_finite() {
            draw.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let jittered = self.backoff_ceiling(retries).mul_f64(draw);
        let wait = asked.map_or(jittered, |asked| asked.max(jittered));
        if elapsed.saturating_add(wait) >= self.budget {
            return Decision::GiveUp(GiveUp::BudgetSpent);
        }
        Decision::Retry(wait)
    }
}

/// What one failed attempt tells about repeating it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Refused for its rate (429, `Throttling`, `SlowDown`, `RESOURCE_EXHAUSTED`):
    /// nothing was done, whatever the call.
    Throttled {
        /// The wait the service asked for (`Retry-After`), if it said.
        retry_after: Option<Duration>,
    },
    /// It never reached the service (no connection could be made): nothing was done.
    NotSent,
    /// It may have been acted on: a timeout, a failure on the service's side, an
    /// answer lost or unreadable.
    MaybeSent {
        /// The wait the service asked for (`Retry-After` on a 503), if it said.
        retry_after: Option<Duration>,
    },
    /// Refused for what it asks, denied, absent, or not recognised: repeating it
    /// changes nothing.
    Final,
}

impl Failure {
    /// What a [`BackendError`] tells: its kind, whether it may have been sent, and the
    /// wait the service asked for.
    pub fn of(error: &BackendError) -> Self {
        let retry_after = error.retry_after;
        match error.kind {
            ErrorKind::Throttled if error.may_have_been_sent => Failure::MaybeSent { retry_after },
            ErrorKind::Throttled => Failure::Throttled { retry_after },
            ErrorKind::Unavailable if error.may_have_been_sent => {
                Failure::MaybeSent { retry_after }
            }
            ErrorKind::Unavailable => Failure::NotSent,
            _ => Failure::Final,
        }
    }
}

/// Whether a call may be repeated after it may have been acted on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idempotence {
    /// Repeating it leaves the cloud as one call would (a read, an update to a state, a
    /// delete).
    Idempotent,
    /// Repeating it may act twice (a create: a second resource of the name, where names
    /// may repeat, or a `Conflict` with the first that hides that it succeeded).
    NotIdempotent,
}

/// What [`RetryPolicy::decide`] answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Wait this long, then try again.
    Retry(Duration),
    /// Stop: the failure stands.
    GiveUp(GiveUp),
}

/// Why a failure stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GiveUp {
    /// Repeating it changes nothing.
    Final,
    /// It may have been acted on, and it may not be repeated.
    MayHaveBeenSent,
    /// The next wait would end past the budget.
    BudgetSpent,
}

/// A source of jitter: numbers in `[0, 1)`, drawn from a seed (splitmix64). Shared by the
/// calls of a client; lock-free.
pub struct Jitter {
    state: AtomicU64,
}

impl fmt::Debug for Jitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Jitter")
    }
}

impl Default for Jitter {
    fn default() -> Self {
        Self::new()
    }
}

impl Jitter {
    /// Jitter seeded from the operating system's random source.
    pub fn new() -> Self {
        let mut seed = [0u8; 8];
        // Without a random source the waits are still spread by the clock-free seed
        // below; jitter is for spreading load, not for secrecy.
        let _ = getrandom::fill(&mut seed);
        Self::seeded(u64::from_le_bytes(seed) ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    /// Jitter from `seed`: the same draws every time (tests).
    pub fn seeded(seed: u64) -> Self {
        Jitter {
            state: AtomicU64::new(seed),
        }
    }

    /// The next number in `[0, 1)`.
    pub fn draw(&self) -> f64 {
        let mut z = self
            .state
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // The top 53 bits, as a fraction.
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The retry loop, for clients without retry machinery of their own: a policy, the
/// clock it waits on, and its jitter.
#[derive(Clone)]
pub struct Retrier {
    policy: RetryPolicy,
    clock: Arc<dyn Clock>,
    jitter: Arc<Jitter>,
}

impl fmt::Debug for Retrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retrier")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Retrier {
    /// A loop applying `policy`, waiting on `clock`.
    pub fn new(policy: RetryPolicy, clock: Arc<dyn Clock>) -> Self {
        Retrier {
            policy,
            clock,
            jitter: Arc::new(Jitter::new()),
        }
    }

    /// The same loop with its jitter drawn from `jitter` (a seeded one, in tests).
    #[must_use]
    pub fn with_jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = Arc::new(jitter);
        self
    }

    /// The policy applied.
    pub fn policy(&self) -> RetryPolicy {
        self.policy
    }

    /// The clock waited on.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Runs `call` until it succeeds or the policy gives up, waiting between attempts
    /// on the clock. A failure that stands is answered as the last attempt failed; when
    /// the budget ran out after retries, the message says how long they went on.
    ///
    /// # Errors
    ///
    /// The last attempt's error.
    pub async fn run<T, F, Fut>(
        &self,
        idempotence: Idempotence,
        mut call: F,
    ) -> Result<T, BackendError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, BackendError>>,
    {
        let started = self.clock.now();
        let mut retries = 0u32;
        loop {
            let error = match call().await {
                Ok(answer) => return Ok(answer),
                Err(error) => error,
            };
            let elapsed = self.clock.now().saturating_sub(started);
            let decision = self.policy.decide(
                Failure::of(&error),
                idempotence,
                retries,
                elapsed,
                self.jitter.draw(),
            );
            match decision {
                Decision::Retry(wait) => {
                    tracing::debug!(error = %error, retries, ?wait, "retrying");
                    self.clock.sleep(wait).await;
                    retries += 1;
                }
                Decision::GiveUp(GiveUp::BudgetSpent) if retries > 0 => {
                    return Err(spent(error, retries, elapsed));
                }
                Decision::GiveUp(_) => return Err(error),
            }
        }
    }
}

/// `error`, saying that it stands after `retries` retries over `elapsed`.
fn spent(mut error: BackendError, retries: u32, elapsed: Duration) -> BackendError {
    let tries = if retries == 1 { "retry" } else { "retries" };
    error.message = format!(
        "{} (still failing after {retries} {tries} over {:.1} s: the retry budget is spent)",
        error.message,
        elapsed.as_secs_f64()
    );
    error
}

#[cfg(test)]
mod tests;
