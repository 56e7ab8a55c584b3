//! Errors a backend reports, in a portable vocabulary.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What went wrong, in terms every provider maps its own errors onto.
///
/// `NotFound` is the only kind the engine reads as "absent", and a provider maps to it
/// only from a curated, narrow list of its own codes. A permission error is `Denied`,
/// never `NotFound`; an error a provider does not recognise is `Other`, which the engine
/// treats as a failure, never as absence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The resource does not exist.
    NotFound,
    /// The credentials may not do this.
    Denied,
    /// Too many requests; try again later.
    Throttled,
    /// The request conflicts with the resource's state (a name taken, an operation in
    /// progress).
    Conflict,
    /// Something else still depends on the resource (a group still attached).
    DependencyViolation,
    /// The request is malformed or asks for something the provider refuses.
    Invalid,
    /// The provider could not be reached or failed on its side; the call may be retried.
    Unavailable,
    /// Anything else.
    Other,
}

impl ErrorKind {
    /// Whether a call that failed this way is worth retrying (if it is idempotent).
    pub fn is_transient(self) -> bool {
        matches!(self, ErrorKind::Throttled | ErrorKind::Unavailable)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::NotFound => "not found",
            ErrorKind::Denied => "denied",
            ErrorKind::Throttled => "throttled",
            ErrorKind::Conflict => "conflict",
            ErrorKind::DependencyViolation => "dependency violation",
            ErrorKind::Invalid => "invalid",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Other => "error",
        })
    }
}

/// An error from a backend call.
///
/// `may_have_been_sent` says whether the request may have reached the provider (a
/// timeout, a lost response): such a failure is not a "no", and the engine records it
/// as uncertain rather than as nothing having happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "camelCase")]
pub struct BackendError {
    /// The portable kind.
    pub kind: ErrorKind,
    /// The provider's own words. Never holds a secret value.
    pub message: String,
    /// The provider's own error code, when it has one (`NoSuchBucket`).
    pub code: Option<String>,
    /// Whether the request may have reached the provider.
    pub may_have_been_sent: bool,
    /// How long the provider asked to wait before trying again (`Retry-After`), when
    /// it said. Read by the retry policy; not part of a report.
    #[serde(skip)]
    pub retry_after: Option<Duration>,
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)?;
        if let Some(code) = &self.code {
            write!(f, " ({code})")?;
        }
        write!(f, ": {}", self.message)?;
        if self.may_have_been_sent {
            f.write_str(" [the request may have been sent]")?;
        }
        Ok(())
    }
}

impl BackendError {
    /// An error of `kind` that certainly was not acted on.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        BackendError {
            kind,
            message: message.into(),
            code: None,
            may_have_been_sent: false,
            retry_after: None,
        }
    }

    /// The same error with the provider's code.
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }

    /// The same error, marked as possibly sent (a timeout, a dispatch failure, a lost
    /// response).
    pub fn maybe_sent(mut self) -> Self {
        self.may_have_been_sent = true;
        self
    }

    /// The same error, with the wait the provider asked for before a retry.
    pub fn with_retry_after(mut self, wait: Duration) -> Self {
        self.retry_after = Some(wait);
        self
    }

    /// `NotFound`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// `Invalid`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, message)
    }
}
