//! A clock whose sleeps last what they say, to well under a millisecond.
//!
//! tokio's timer works in whole milliseconds and rounds every deadline up, so a 20 ms
//! call made with `tokio::time::sleep` lasts 20 to 21 ms. Over a chain of sixty calls
//! that rounding alone is several percent of an apply's wall time — a property of the
//! timer, not of the engine being measured. The benchmark cloud's latency therefore
//! runs on this clock: one thread holds every pending deadline and wakes each sleeper
//! when its own deadline passes (a condition variable's timed wait until just before
//! it, then a spin of at most a quarter of a millisecond to the deadline itself).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use infra_core::engine::Clock;
use tokio::sync::oneshot;

struct Pending {
    at: Instant,
    seq: u64,
    wake: oneshot::Sender<()>,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

#[derive(Default)]
struct Queue {
    pending: BinaryHeap<Reverse<Pending>>,
    seq: u64,
    closed: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    changed: Condvar,
}

/// A real-time clock with sub-millisecond sleeps; its timer thread ends when the
/// clock is dropped.
pub struct PreciseClock {
    origin: Instant,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for PreciseClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreciseClock").finish_non_exhaustive()
    }
}

#[allow(
    clippy::disallowed_methods,
    reason = "a benchmark's latency is real time"
)]
fn instant_now() -> Instant {
    Instant::now()
}

impl PreciseClock {
    /// A clock whose origin is now, with its timer thread started.
    pub fn new() -> Self {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            changed: Condvar::new(),
        });
        let timer = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("precise-clock".into())
            .spawn(move || run(&timer))
            .expect("the timer thread starts");
        PreciseClock {
            origin: instant_now(),
            shared,
            thread: Some(thread),
        }
    }
}

impl Default for PreciseClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for PreciseClock {
    fn drop(&mut self) {
        self.shared.queue.lock().expect("clock lock").closed = true;
        self.shared.changed.notify_one();
        if let Some(t) = self.thread.take() {
            t.join().expect("the timer thread ends cleanly");
        }
    }
}

/// How long before a deadline the timer thread stops waiting on the condition variable
/// and spins instead: a timed wait can return a few hundred microseconds late on a busy
/// machine, a spin of this length costs a fraction of one core a few dozen times a
/// second.
const SPIN: Duration = Duration::from_micros(250);

fn run(shared: &Shared) {
    let mut queue = shared.queue.lock().expect("clock lock");
    loop {
        if queue.closed {
            // Waking the rest lets no sleeper hang on a clock that is gone.
            for Reverse(p) in queue.pending.drain() {
                let _ = p.wake.send(());
            }
            return;
        }
        let now = instant_now();
        while queue.pending.peek().is_some_and(|Reverse(p)| p.at <= now) {
            if let Some(Reverse(p)) = queue.pending.pop() {
                // A sleeper that stopped waiting has dropped its receiver: nothing to do.
                let _ = p.wake.send(());
            }
        }
        queue = match queue.pending.peek().map(|Reverse(p)| p.at) {
            Some(at) if at.saturating_duration_since(now) <= SPIN => {
                // Near enough: spin without the lock, so sleepers can still queue.
                drop(queue);
                while instant_now() < at {
                    std::hint::spin_loop();
                }
                shared.queue.lock().expect("clock lock")
            }
            Some(at) => {
                shared
                    .changed
                    .wait_timeout(queue, at.saturating_duration_since(now) - SPIN)
                    .expect("clock lock")
                    .0
            }
            None => shared.changed.wait(queue).expect("clock lock"),
        };
    }
}

#[async_trait]
impl Clock for PreciseClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    async fn sleep(&self, duration: Duration) {
        if duration.is_zero() {
            return;
        }
        let (wake, woken) = oneshot::channel();
        {
            let mut queue = self.shared.queue.lock().expect("clock lock");
            let seq = queue.seq;
            queue.seq += 1;
            let at = instant_now() + duration;
            let earliest = queue.pending.peek().is_none_or(|Reverse(p)| at < p.at);
            queue.pending.push(Reverse(Pending { at, seq, wake }));
            if earliest {
                self.shared.changed.notify_one();
            }
        }
        let _ = woken.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleep_lasts_at_least_its_duration_and_sleepers_wake_in_deadline_order() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let clock = Arc::new(PreciseClock::new());
        let order = Arc::new(Mutex::new(Vec::new()));
        rt.block_on(async {
            let mut tasks = Vec::new();
            for (i, ms) in [(0u8, 9u64), (1, 3), (2, 6)] {
                let clock = Arc::clone(&clock);
                let order = Arc::clone(&order);
                tasks.push(tokio::spawn(async move {
                    let before = clock.now();
                    clock.sleep(Duration::from_millis(ms)).await;
                    assert!(clock.now() - before >= Duration::from_millis(ms));
                    order.lock().expect("lock").push(i);
                }));
            }
            for t in tasks {
                t.await.expect("the sleeper finishes");
            }
        });
        assert_eq!(*order.lock().expect("lock"), vec![1, 2, 0]);
    }

    #[test]
    fn dropping_the_clock_ends_its_thread_and_wakes_whoever_still_sleeps() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let clock = PreciseClock::new();
        let shared = Arc::clone(&clock.shared);
        rt.block_on(async {
            let (wake, woken) = oneshot::channel();
            shared
                .queue
                .lock()
                .expect("lock")
                .pending
                .push(Reverse(Pending {
                    at: instant_now() + Duration::from_secs(3600),
                    seq: 0,
                    wake,
                }));
            drop(clock);
            woken.await.expect("woken when the clock goes");
        });
    }
}
