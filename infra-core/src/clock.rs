//! Time, injected: the engine never reads the system clock or sleeps on its own.

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

/// A source of time and a way to wait.
#[async_trait]
pub trait Clock: Send + Sync {
    /// Time elapsed since an arbitrary fixed origin.
    fn now(&self) -> Duration;
    /// Waits `duration`.
    async fn sleep(&self, duration: Duration);
}

/// The real clock: the process's monotonic time, and tokio's timer.
#[derive(Debug)]
pub struct SystemClock {
    origin: tokio::time::Instant,
}

impl SystemClock {
    /// A clock whose origin is now.
    #[allow(
        clippy::disallowed_methods,
        reason = "the one place the real time is read"
    )]
    pub fn new() -> Self {
        SystemClock {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}

/// A clock that only moves when someone sleeps on it: each sleep advances it and
/// returns at once. Tests and simulations never wait on real time with it.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: Mutex<Duration>,
}

impl ManualClock {
    /// A clock at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        *self.now.lock().expect("clock lock") += by;
    }
}

#[async_trait]
impl Clock for ManualClock {
    fn now(&self) -> Duration {
        *self.now.lock().expect("clock lock")
    }

    async fn sleep(&self, duration: Duration) {
        self.advance(duration);
        // Let other tasks run, as a real sleep would.
        tokio::task::yield_now().await;
    }
}
