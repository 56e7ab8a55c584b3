//! The backend's [`Clock`] as the SDK's sleep and time source.
//!
//! The SDK sleeps for two reasons: to wait before a retry, and to bound an attempt (its
//! connect and attempt timeouts, the credentials' load). The first is the policy's
//! decision and runs on the backend's clock, so that a test on a manual clock never
//! waits for it; the second bounds real input and output and runs on real time, since
//! a simulated clock cannot race a socket (a manual clock would end every timeout at
//! once). [`ClockSleep`] tells them apart by the wait the policy handed over (see
//! `handoff`): the orchestrator makes the sleep for a retry right after asking the
//! strategy, on the thread that decided, and every other sleep is a bound.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use aws_smithy_async::rt::sleep::{AsyncSleep, Sleep, TokioSleep};
use aws_smithy_async::time::TimeSource;
use infra_core::sdk::Clock;

use crate::handoff::take_wait;

/// The SDK's sleep: a retry's wait on the backend's clock, every other sleep (a
/// timeout) on real time. See the module documentation.
#[derive(Clone)]
pub struct ClockSleep {
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for ClockSleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClockSleep")
    }
}

impl ClockSleep {
    /// Retries waiting on `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        ClockSleep { clock }
    }
}

impl AsyncSleep for ClockSleep {
    fn sleep(&self, duration: Duration) -> Sleep {
        if take_wait(duration) {
            let clock = Arc::clone(&self.clock);
            Sleep::new(Shareable(Mutex::new(Box::pin(async move {
                clock.sleep(duration).await;
            }))))
        } else {
            TokioSleep::new().sleep(duration)
        }
    }
}

/// A future the SDK may share between threads: the clock's sleep, which is only ever
/// polled through `&mut` (so the lock is never contended).
struct Shareable(Mutex<Pin<Box<dyn Future<Output = ()> + Send>>>);

impl Future for Shareable {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.get_mut()
            .0
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
            .poll(cx)
    }
}

/// The SDK's time source: the wall-clock time when it was made, moved forward as the
/// backend's clock moves (requests are signed with it, and the SDK's caches age on
/// it). On the system clock it is the wall clock.
#[derive(Clone)]
pub struct ClockTime {
    clock: Arc<dyn Clock>,
    wall_at_start: SystemTime,
    clock_at_start: Duration,
}

impl fmt::Debug for ClockTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClockTime")
            .field("now", &self.now())
            .finish()
    }
}

impl ClockTime {
    /// The wall clock, moving as `clock` does.
    #[allow(
        clippy::disallowed_methods,
        reason = "the one reading of the wall clock: requests are signed with the date, \
                  which the backend's clock (time from an arbitrary origin) cannot give"
    )]
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        let clock_at_start = clock.now();
        ClockTime {
            clock,
            wall_at_start: SystemTime::now(),
            clock_at_start,
        }
    }
}

impl TimeSource for ClockTime {
    fn now(&self) -> SystemTime {
        self.wall_at_start + self.clock.now().saturating_sub(self.clock_at_start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infra_core::sdk::ManualClock;

    #[tokio::test]
    async fn a_wait_handed_over_runs_on_the_clock_once_and_any_other_sleep_on_real_time() {
        use std::task::Waker;

        let clock = Arc::new(ManualClock::new());
        let sleep = ClockSleep::new(clock.clone());
        crate::handoff::hand_over(infra_core::sdk::retry::Decision::Retry(
            Duration::from_secs(30),
        ));
        // Another duration is not the wait handed over: real time (a millisecond here).
        sleep.sleep(Duration::from_millis(1)).await;
        assert_eq!(clock.now(), Duration::ZERO);
        sleep.sleep(Duration::from_secs(30)).await;
        assert_eq!(
            clock.now(),
            Duration::from_secs(30),
            "the wait ran on the clock"
        );
        // Used up: a second sleep of that length is a timeout, on real time. Polled, it
        // is pending and the clock does not move (on the clock, it would have).
        let mut timeout = sleep.sleep(Duration::from_secs(30));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(matches!(
            Pin::new(&mut timeout).poll(&mut cx),
            Poll::Pending
        ));
        assert_eq!(clock.now(), Duration::from_secs(30));
    }

    #[test]
    fn the_time_source_moves_with_the_clock() {
        let clock = Arc::new(ManualClock::new());
        let time = ClockTime::new(clock.clone());
        let before = time.now();
        clock.advance(Duration::from_secs(90));
        assert_eq!(
            time.now().duration_since(before).unwrap(),
            Duration::from_secs(90)
        );
    }
}
