//! What a create or an update answers: the resource as written, or a deferral.

use std::fmt;

use crate::NotAttemptedReason;
use crate::backend::Sighting;

/// The answer of a create or an update that did not fail: the resource as it now is,
/// or the change deferred (recorded for a person to approve, say) with nothing changed
/// yet.
///
/// A deferral is not an error: the engine reports the resource as not attempted with
/// the deferral's reason, never as failed, and nothing depending on it runs in the same
/// apply.
#[must_use = "a deferred write changed nothing, and must be reported as such"]
#[non_exhaustive]
#[derive(Clone, Debug)]
pub enum Written<T = Sighting> {
    /// The write was made; here is a read of the resource after it.
    Done(T),
    /// Nothing was written yet; the deferral says why and what happens next.
    Deferred(Deferral),
}

/// Why a write was deferred, and what the person who reads the result should know.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deferral {
    /// Why.
    pub reason: DeferralReason,
    /// What was recorded and where (a plan's id, who must approve it). Never a secret.
    pub detail: String,
}

/// The reasons a backend may defer a write.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeferralReason {
    /// The backend governs changes: it recorded this one as a plan for a person to
    /// approve and changed nothing yet. Reported as `awaiting-approval`.
    AwaitingApproval,
}

impl Deferral {
    /// The change was recorded for approval; `detail` names the plan.
    pub fn awaiting_approval(detail: impl Into<String>) -> Self {
        Deferral {
            reason: DeferralReason::AwaitingApproval,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Deferral {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason.not_attempted(), self.detail)
    }
}

impl DeferralReason {
    /// The reason the engine reports the resource not attempted with.
    pub fn not_attempted(self) -> NotAttemptedReason {
        match self {
            DeferralReason::AwaitingApproval => NotAttemptedReason::AwaitingApproval,
        }
    }
}

impl<T> Written<T> {
    /// The same answer with the written value mapped.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Written<U> {
        match self {
            Written::Done(t) => Written::Done(f(t)),
            Written::Deferred(d) => Written::Deferred(d),
        }
    }

    /// The value written, or `None` for a deferral.
    pub fn done(self) -> Option<T> {
        match self {
            Written::Done(t) => Some(t),
            Written::Deferred(_) => None,
        }
    }

    /// The value written; panics with `why` and the deferral if the write was deferred
    /// (for tests of backends that never defer).
    #[track_caller]
    pub fn expect_done(self, why: &str) -> T {
        match self {
            Written::Done(t) => t,
            Written::Deferred(d) => panic!("{why}: the write was deferred ({d})"),
        }
    }

    /// The deferral, if the write was deferred.
    pub fn deferral(&self) -> Option<&Deferral> {
        match self {
            Written::Done(_) => None,
            Written::Deferred(d) => Some(d),
        }
    }
}

impl<T> From<Deferral> for Written<T> {
    fn from(d: Deferral) -> Self {
        Written::Deferred(d)
    }
}
