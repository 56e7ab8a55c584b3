//! What an attempt ended with, judged once: the [`BackendError`] a call answers, and
//! the [`Failure`] the retry policy decides on, both read off the same [`Outcome`]
//! through the table of [`crate::codes`].
//!
//! May the request have been acted on?
//! - a request that could not be built, or an answer the service gave (throttled,
//!   denied, refused, absent), was **not** acted on, except for an outage answered with
//!   a 5xx status and an answer that said success but could not be read;
//! - a request that timed out, whose connection failed after it was made, or whose
//!   answer was lost or could not be read, **may have been** acted on;
//! - a connection refused never carried the request: nothing was sent.

use std::error::Error as StdError;
use std::time::Duration;

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::{ConnectorError, SdkError};
use aws_smithy_runtime_api::http::Headers;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use infra_core::sdk::{BackendError, ErrorKind};

use crate::codes::kind_of;

/// How one attempt of a call failed, as far as the table needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The request could not be built (or the SDK refused it before sending): nothing
    /// was sent.
    NotBuilt(String),
    /// No answer came within the request timeout: it may have been acted on.
    TimedOut,
    /// No connection could be made: nothing was sent.
    Refused(String),
    /// The connection failed once made: it may have been acted on.
    Dropped(String),
    /// An answer came that could not be read: it may have been acted on.
    Unreadable(String),
    /// The service answered with an error.
    Answered(Answer),
}

/// An error the service answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The error code the answer named; empty when it named none (a `HEAD`'s answer
    /// has no body).
    pub code: String,
    /// The answer's own words, when it had some.
    pub message: Option<String>,
    /// How long the service asked to wait before trying again.
    pub retry_after: Option<Duration>,
}

impl Answer {
    /// The answer with HTTP `status`, error `code` and `message`, the wait taken from
    /// its `headers` (`Retry-After`, `x-amz-retry-after`).
    pub fn new(status: u16, code: Option<&str>, message: Option<&str>, headers: &Headers) -> Self {
        let code = code.unwrap_or_default();
        // An answer without a body (a `HEAD`) names no code: its 404 is "not found",
        // as the SDKs read it.
        let code = if code.is_empty() && status == 404 {
            "NotFound"
        } else {
            code
        };
        Answer {
            status,
            code: code.to_owned(),
            message: message.map(str::to_owned),
            retry_after: retry_after(headers),
        }
    }
}

/// The wait a service asked for: `Retry-After` in whole seconds (an HTTP date is not
/// read), else AWS's `x-amz-retry-after` in milliseconds.
pub fn retry_after(headers: &Headers) -> Option<Duration> {
    let seconds = headers
        .get("retry-after")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    seconds.or_else(|| {
        headers
            .get("x-amz-retry-after")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_millis)
    })
}

impl Outcome {
    /// The outcome a failed call's error tells.
    pub fn of<E>(err: &SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
    {
        match err {
            SdkError::ConstructionFailure(_) => Outcome::NotBuilt(chain(err)),
            SdkError::TimeoutError(_) => Outcome::TimedOut,
            SdkError::DispatchFailure(d) => match d.as_connector_error() {
                Some(c) => Outcome::of_connector(c),
                None => Outcome::Dropped(chain(err)),
            },
            SdkError::ResponseError(_) => Outcome::Unreadable(chain(err)),
            SdkError::ServiceError(service) => {
                let e = service.err();
                let raw = service.raw();
                Outcome::Answered(Answer::new(
                    raw.status().as_u16(),
                    e.code(),
                    e.message(),
                    raw.headers(),
                ))
            }
            _ => Outcome::Dropped(chain(err)),
        }
    }

    /// The outcome a connection's failure tells.
    pub fn of_connector(err: &ConnectorError) -> Self {
        if err.is_timeout() {
            Outcome::TimedOut
        } else if err.is_user() {
            Outcome::NotBuilt(chain(err))
        } else if refused(err) {
            Outcome::Refused(chain(err))
        } else {
            Outcome::Dropped(chain(err))
        }
    }

    /// The portable kind, for a call whose curated not-found codes are `not_found`.
    pub fn kind(&self, not_found: &[&str]) -> ErrorKind {
        match self {
            Outcome::NotBuilt(_) => ErrorKind::Invalid,
            Outcome::TimedOut | Outcome::Refused(_) | Outcome::Dropped(_) => ErrorKind::Unavailable,
            Outcome::Unreadable(_) => ErrorKind::Other,
            Outcome::Answered(a) => kind_of(&a.code, a.status, not_found),
        }
    }

    /// Whether the request may have been acted on (see the module documentation).
    pub fn may_have_been_sent(&self, kind: ErrorKind) -> bool {
        match self {
            Outcome::NotBuilt(_) | Outcome::Refused(_) => false,
            Outcome::TimedOut | Outcome::Dropped(_) | Outcome::Unreadable(_) => true,
            Outcome::Answered(a) => {
                (kind == ErrorKind::Unavailable && a.status >= 500)
                    || (200..300).contains(&a.status)
            }
        }
    }

    /// The error a call answers: `what` names the call (it starts the message),
    /// `cloud` the service reached (`no answer from Scaleway`), `not_found` the call's
    /// curated codes of absence.
    pub fn error(&self, cloud: &str, what: &str, not_found: &[&str]) -> BackendError {
        let kind = self.kind(not_found);
        let message = match self {
            Outcome::NotBuilt(why) => format!("{what}: the request could not be built: {why}"),
            Outcome::TimedOut => format!("{what}: no answer from {cloud} (timed out)"),
            Outcome::Refused(why) | Outcome::Dropped(why) => {
                format!("{what}: no answer from {cloud}: {why}")
            }
            Outcome::Unreadable(why) => format!("{what}: the answer could not be read: {why}"),
            Outcome::Answered(a) => {
                let said = a.message.as_deref().unwrap_or("no message");
                if a.code.is_empty() {
                    format!("{what}: {said} (HTTP {})", a.status)
                } else {
                    format!("{what}: {said} ({}, HTTP {})", a.code, a.status)
                }
            }
        };
        let mut out = BackendError::new(kind, message);
        if let Outcome::Answered(a) = self {
            if !a.code.is_empty() {
                out = out.with_code(a.code.clone());
            }
            if let Some(wait) = a.retry_after {
                out = out.with_retry_after(wait);
            }
        }
        if self.may_have_been_sent(kind) {
            out = out.maybe_sent();
        }
        out
    }
}

/// An SDK error as a [`BackendError`]: `cloud` names the service reached (it is part
/// of the message when no answer came), `what` the call that failed (it starts the
/// message), `not_found` the call's curated list of codes that mean the resource it
/// names does not exist.
///
/// ```
/// # use aws_smithy_runtime_api::client::result::SdkError;
/// # use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
/// # use aws_smithy_types::error::ErrorMetadata;
/// use infra_aws_compat::classify;
/// use infra_core::sdk::ErrorKind;
///
/// let timed_out: SdkError<ErrorMetadata, HttpResponse> = SdkError::timeout_error("no answer");
/// let e = classify("AWS", "s3:CreateBucket", timed_out, &[]);
/// assert_eq!(e.kind, ErrorKind::Unavailable);
/// assert!(e.may_have_been_sent);
/// ```
pub fn classify<E>(
    cloud: &str,
    what: &str,
    err: SdkError<E, HttpResponse>,
    not_found: &[&str],
) -> BackendError
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    Outcome::of(&err).error(cloud, what, not_found)
}

/// Whether a connection's failure is a refusal to connect: nothing was sent.
fn refused(err: &ConnectorError) -> bool {
    let mut source: Option<&(dyn StdError + 'static)> = err.source();
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        source = s.source();
    }
    false
}

/// An error and its sources, as one line.
pub(crate) fn chain(err: &dyn StdError) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let next = s.to_string();
        // Wrappers often repeat their source's words: say them once.
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests;
