//! The policy's decision after a failed attempt, handed from the interceptor that makes
//! it to the SDK's classifier and sleep, on the thread that decided.
//!
//! The orchestrator runs, with nothing awaited in between: the attempt's end (where
//! [`PolicyInterceptor`](crate::PolicyInterceptor) decides), then the retry strategy
//! (which asks the classifiers, where [`PolicyClassifier`](crate::PolicyClassifier)
//! answers the decision and its wait), then the creation of the sleep for that wait
//! (where [`ClockSleep`](crate::ClockSleep) takes it, to run it on the backend's
//! clock). So the decision travels by a slot of the thread, and is used up by the
//! sleep; a call forgets any decision left over before its first attempt.

use std::cell::Cell;
use std::time::Duration;

use infra_core::sdk::retry::Decision;

thread_local! {
    /// The decision made last on this thread, until its wait is slept.
    static DECIDED: Cell<Option<Decision>> = const { Cell::new(None) };
}

/// Hands `decision` to the classifier and the sleep that follow on this thread.
pub(crate) fn hand_over(decision: Decision) {
    DECIDED.with(|d| d.set(Some(decision)));
}

/// The decision handed over on this thread, if any (it stays).
pub(crate) fn decided() -> Option<Decision> {
    DECIDED.with(Cell::get)
}

/// Whether a sleep of `duration` is the retry's wait handed over on this thread; if so,
/// the decision is used up.
pub(crate) fn take_wait(duration: Duration) -> bool {
    DECIDED.with(|d| {
        if d.get() == Some(Decision::Retry(duration)) {
            d.set(None);
            true
        } else {
            false
        }
    })
}

/// Forgets a decision left over on this thread (one whose retry the SDK did not make).
pub(crate) fn forget() {
    DECIDED.with(|d| d.set(None));
}
