//! Concurrency that yields to throttling: per (provider, region, API), as many calls in
//! flight as the cloud answers without throttling, never more than the run's ceiling
//! (`--parallelism`).
//!
//! Each window grows by one call for every window's worth of calls answered without a
//! throttle (additive increase) and halves when a call is throttled (multiplicative
//! decrease), at most once per window: the calls already in flight when it halved were
//! sent at the old rate, and their throttles say nothing new. A window never falls
//! below one call.
//!
//! A throttle is seen wherever it happens: in the answer the engine gets, and in an
//! attempt the backend's client retried on its own, since [`RetryPolicy::decide`] notes
//! every throttling answer it is shown for the call in flight. Nothing is retried here:
//! retrying is the retry policy's, and only its.
//!
//! The API of a call is its kind: the calls of one kind in one region share a window.
//!
//! [`RetryPolicy::decide`]: super::RetryPolicy::decide

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use tokio::sync::Notify;

use super::layer::{Answer, Call, Layer, Next};
use crate::{BackendError, ErrorKind};

tokio::task_local! {
    /// The throttling answers seen by the call in flight on this task.
    static THROTTLES: Arc<AtomicU32>;
}

/// Notes a throttling answer for the call in flight on this task, if a window is
/// watching it (called by the retry policy for every throttled attempt).
pub(crate) fn note_throttled() {
    let _ = THROTTLES.try_with(|seen| seen.fetch_add(1, Ordering::Relaxed));
}

/// What one window shares: a provider, a region, an API.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WindowKey {
    /// The provider (`aws`).
    pub provider: &'static str,
    /// The region's code.
    pub region: String,
    /// The API: the kind's id.
    pub api: &'static str,
}

impl std::fmt::Display for WindowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.provider, self.region, self.api)
    }
}

/// One window as it stands.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowState {
    /// Whose window.
    pub key: WindowKey,
    /// Calls allowed in flight now (whole calls: the fractional part grows).
    pub limit: usize,
    /// Calls in flight now.
    pub in_flight: usize,
    /// Calls answered with a throttle (or retried after one), since the start.
    pub throttled: u64,
    /// Times the window was halved, since the start.
    pub cuts: u64,
}

#[derive(Debug)]
struct Window {
    state: Mutex<Flow>,
    freed: Notify,
}

#[derive(Debug)]
struct Flow {
    limit: f64,
    in_flight: usize,
    /// Calls started so far: a call's number orders it against the last cut.
    started: u64,
    /// The number the next call started after the last cut gets.
    cut_at: u64,
    throttled: u64,
    cuts: u64,
}

/// The windows of a run, shared by every backend an engine reaches; the ceiling is the
/// run's `--parallelism`.
#[derive(Debug)]
pub struct Concurrency {
    ceiling: AtomicUsize,
    /// Off: every window holds the ceiling, throttled or not (throttles still counted).
    adaptive: AtomicBool,
    windows: Mutex<BTreeMap<WindowKey, Arc<Window>>>,
}

impl Default for Concurrency {
    fn default() -> Self {
        Self::new(16)
    }
}

impl Concurrency {
    /// Windows that start at, and never grow past, `ceiling` calls in flight.
    pub fn new(ceiling: usize) -> Self {
        Concurrency {
            ceiling: AtomicUsize::new(ceiling.max(1)),
            adaptive: AtomicBool::new(true),
            windows: Mutex::new(BTreeMap::new()),
        }
    }

    /// Sets the ceiling (a run's `--parallelism`): windows above it come down to it
    /// at once; windows below it keep their size and may grow to it.
    pub fn set_ceiling(&self, ceiling: usize) {
        let ceiling = ceiling.max(1);
        self.ceiling.store(ceiling, Ordering::Relaxed);
        let fixed = !self.is_adaptive();
        for window in self.lock().values() {
            let mut flow = window.flow();
            flow.limit = if fixed {
                ceiling as f64
            } else {
                flow.limit.min(ceiling as f64)
            };
        }
    }

    /// Whether windows adapt (the default). Off, every window holds the ceiling
    /// whatever the cloud answers, as a fixed parallelism does: for comparing, or for a
    /// cloud whose throttling answers mean something else. Throttles are still counted.
    pub fn set_adaptive(&self, adaptive: bool) {
        self.adaptive.store(adaptive, Ordering::Relaxed);
        if !adaptive {
            let ceiling = self.ceiling() as f64;
            for window in self.lock().values() {
                window.flow().limit = ceiling;
            }
        }
    }

    /// Whether windows adapt.
    pub fn is_adaptive(&self) -> bool {
        self.adaptive.load(Ordering::Relaxed)
    }

    /// The ceiling.
    pub fn ceiling(&self) -> usize {
        self.ceiling.load(Ordering::Relaxed)
    }

    /// Every window, as it stands.
    pub fn windows(&self) -> Vec<WindowState> {
        self.lock()
            .iter()
            .map(|(key, window)| {
                let flow = window.flow();
                WindowState {
                    key: key.clone(),
                    limit: flow.whole(),
                    in_flight: flow.in_flight,
                    throttled: flow.throttled,
                    cuts: flow.cuts,
                }
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<WindowKey, Arc<Window>>> {
        self.windows.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn window(&self, key: &WindowKey) -> Arc<Window> {
        let mut windows = self.lock();
        if let Some(window) = windows.get(key) {
            return Arc::clone(window);
        }
        let window = Arc::new(Window {
            state: Mutex::new(Flow {
                limit: self.ceiling() as f64,
                in_flight: 0,
                started: 0,
                cut_at: 0,
                throttled: 0,
                cuts: 0,
            }),
            freed: Notify::new(),
        });
        windows.insert(key.clone(), Arc::clone(&window));
        window
    }

    /// Runs `call` within its window: waits for room, then notes how it went.
    async fn within<T>(
        &self,
        key: WindowKey,
        call: impl std::future::Future<Output = Result<T, BackendError>>,
    ) -> Result<T, BackendError> {
        let window = self.window(&key);
        let number = window.enter().await;
        let seen = Arc::new(AtomicU32::new(0));
        let answer = THROTTLES.scope(Arc::clone(&seen), call).await;
        let throttled = seen.load(Ordering::Relaxed) > 0
            || matches!(&answer, Err(e) if e.kind == ErrorKind::Throttled);
        window.leave(number, throttled, self.ceiling(), self.is_adaptive(), &key);
        answer
    }
}

impl Flow {
    fn whole(&self) -> usize {
        (self.limit.floor() as usize).max(1)
    }
}

impl Window {
    fn flow(&self) -> std::sync::MutexGuard<'_, Flow> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for room, and answers the call's number.
    async fn enter(&self) -> u64 {
        loop {
            // Registered before the check, so that a call leaving in between wakes it.
            let freed = self.freed.notified();
            {
                let mut flow = self.flow();
                if flow.in_flight < flow.whole() {
                    flow.in_flight += 1;
                    flow.started += 1;
                    return flow.started;
                }
            }
            freed.await;
        }
    }

    fn leave(&self, number: u64, throttled: bool, ceiling: usize, adapt: bool, key: &WindowKey) {
        let mut flow = self.flow();
        flow.in_flight -= 1;
        if throttled {
            flow.throttled += 1;
        }
        if adapt {
            flow.adapt(number, throttled, ceiling, key);
        }
        drop(flow);
        self.freed.notify_waiters();
    }
}

impl Flow {
    /// Halves the window on a throttle of a call sent since the last cut; grows it by
    /// a fraction on an answer without one.
    fn adapt(&mut self, number: u64, throttled: bool, ceiling: usize, key: &WindowKey) {
        let before = self.whole();
        if throttled {
            if number > self.cut_at {
                self.limit = (self.limit / 2.0).max(1.0);
                self.cut_at = self.started;
                self.cuts += 1;
                tracing::info!(
                    "{key}: throttled; calls in flight allowed {before} -> {}",
                    self.whole()
                );
            }
        } else {
            self.limit = (self.limit + 1.0 / self.limit).min(ceiling as f64);
            if self.whole() > before {
                tracing::debug!(
                    "{key}: answered without throttling; calls in flight allowed {before} -> {}",
                    self.whole()
                );
            }
        }
    }
}

/// The layer that holds each call to its window ([`Concurrency`]); the engine puts it
/// around every backend it is given.
#[derive(Clone, Debug)]
pub struct Adaptive {
    provider: &'static str,
    windows: Arc<Concurrency>,
}

impl Adaptive {
    /// Holds the calls of `provider`'s backend to the windows of `windows`.
    pub fn new(provider: &'static str, windows: Arc<Concurrency>) -> Self {
        Adaptive { provider, windows }
    }
}

#[async_trait]
impl Layer for Adaptive {
    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        let (Some(api), Some(region)) = (call.kind(), call.region()) else {
            return next.run(call).await;
        };
        let key = WindowKey {
            provider: self.provider,
            region: region.to_owned(),
            api,
        };
        self.windows.within(key, next.run(call)).await
    }
}

#[cfg(test)]
mod tests;
