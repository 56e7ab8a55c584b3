use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use proptest::prelude::*;

use super::{Concurrency, WindowKey};
use crate::sdk::retry::{Failure, Idempotence, RetryPolicy};
use crate::{BackendError, ErrorKind};

fn key() -> WindowKey {
    WindowKey {
        provider: "aws",
        region: "eu-west-3".to_owned(),
        api: "queues",
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
}

fn throttled() -> Result<(), BackendError> {
    Err(BackendError::new(ErrorKind::Throttled, "slow down"))
}

fn limit(windows: &Concurrency) -> usize {
    windows.windows()[0].limit
}

#[test]
fn a_throttle_halves_the_window_and_answers_without_one_grow_it_back_to_the_ceiling() {
    runtime().block_on(async {
        let windows = Concurrency::new(16);
        let _ = windows.within(key(), async { throttled() }).await;
        assert_eq!(limit(&windows), 8);
        let _ = windows.within(key(), async { throttled() }).await;
        assert_eq!(limit(&windows), 4);
        // One more call allowed for about every window's worth answered.
        for _ in 0..4 {
            windows.within(key(), async { Ok(()) }).await.unwrap();
        }
        assert_eq!(
            limit(&windows),
            4,
            "4 answers grow a window of 4 by less than one"
        );
        windows.within(key(), async { Ok(()) }).await.unwrap();
        assert_eq!(limit(&windows), 5);
        for _ in 0..500 {
            windows.within(key(), async { Ok(()) }).await.unwrap();
        }
        assert_eq!(
            limit(&windows),
            16,
            "grown back to the ceiling, and not past it"
        );
        let state = &windows.windows()[0];
        assert_eq!((state.throttled, state.cuts, state.in_flight), (2, 2, 0));
    });
}

#[test]
fn throttles_of_calls_sent_before_a_cut_do_not_cut_again() {
    runtime().block_on(async {
        let windows = Concurrency::new(16);
        // Eight calls in flight together, all throttled: one cut, not eight.
        let calls = (0..8).map(|_| {
            windows.within(key(), async {
                tokio::task::yield_now().await;
                throttled()
            })
        });
        futures::future::join_all(calls).await;
        let state = &windows.windows()[0];
        assert_eq!((state.limit, state.throttled, state.cuts), (8, 8, 1));
    });
}

#[test]
fn a_throttle_the_client_retried_on_its_own_still_cuts_the_window() {
    runtime().block_on(async {
        let windows = Concurrency::new(8);
        windows
            .within(key(), async {
                // What a client's retry hook does with a throttled attempt, before the
                // retry that succeeds.
                let _ = RetryPolicy::default().decide(
                    Failure::Throttled { retry_after: None },
                    Idempotence::Idempotent,
                    0,
                    Duration::ZERO,
                    0.5,
                );
                Ok::<_, BackendError>(())
            })
            .await
            .unwrap();
        assert_eq!(limit(&windows), 4);
        // A failure of another kind is no throttle.
        let _ = windows
            .within(key(), async {
                Err::<(), _>(BackendError::new(ErrorKind::Unavailable, "down"))
            })
            .await;
        assert_eq!(windows.windows()[0].cuts, 1);
    });
}

#[test]
fn a_lower_ceiling_brings_every_window_down_at_once() {
    runtime().block_on(async {
        let windows = Concurrency::new(16);
        windows.within(key(), async { Ok(()) }).await.unwrap();
        windows.set_ceiling(3);
        assert_eq!(limit(&windows), 3);
        for _ in 0..50 {
            windows.within(key(), async { Ok(()) }).await.unwrap();
        }
        assert_eq!(limit(&windows), 3);
    });
}

#[test]
fn with_adaptation_off_a_window_holds_the_ceiling_and_still_counts_throttles() {
    runtime().block_on(async {
        let windows = Concurrency::new(16);
        windows.set_adaptive(false);
        for _ in 0..3 {
            let _ = windows.within(key(), async { throttled() }).await;
        }
        let state = &windows.windows()[0];
        assert_eq!((state.limit, state.throttled, state.cuts), (16, 3, 0));
        windows.set_ceiling(4);
        assert_eq!(limit(&windows), 4);
        windows.set_ceiling(8);
        assert_eq!(
            limit(&windows),
            8,
            "a fixed window follows the ceiling up too"
        );
        windows.set_adaptive(true);
        let _ = windows.within(key(), async { throttled() }).await;
        assert_eq!(limit(&windows), 4);
    });
}

proptest! {
    /// Whatever the cloud answers, and however many calls are asked for at once, no
    /// more calls are in flight in a window than the ceiling (the run's
    /// `--parallelism`), and every call is let through in the end.
    #[test]
    fn a_window_never_holds_more_calls_than_the_ceiling(
        ceiling in 1usize..12,
        answers in prop::collection::vec((any::<bool>(), 0u8..4), 1..120),
        lowered in prop::option::of(1usize..12),
    ) {
        let (count, half) = (answers.len(), answers.len() / 2);
        let (most, done) = runtime().block_on(async {
            let windows = Arc::new(Concurrency::new(ceiling));
            let now = Arc::new(AtomicUsize::new(0));
            let most = Arc::new(AtomicUsize::new(0));
            let done = Arc::new(AtomicUsize::new(0));
            let calls = answers.iter().enumerate().map(|(i, &(throttle, yields))| {
                let (windows, now, most, done) =
                    (Arc::clone(&windows), Arc::clone(&now), Arc::clone(&most), Arc::clone(&done));
                async move {
                    if i == half && let Some(lower) = lowered {
                        windows.set_ceiling(lower.min(ceiling));
                    }
                    let _ = windows
                        .within(key(), async {
                            let in_flight = now.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(in_flight, Ordering::SeqCst);
                            for _ in 0..yields {
                                tokio::task::yield_now().await;
                            }
                            now.fetch_sub(1, Ordering::SeqCst);
                            if throttle { throttled() } else { Ok(()) }
                        })
                        .await;
                    done.fetch_add(1, Ordering::SeqCst);
                }
            });
            futures::future::join_all(calls).await;
            (most.load(Ordering::SeqCst), done.load(Ordering::SeqCst))
        });
        prop_assert!(most <= ceiling, "{most} calls in flight under a ceiling of {ceiling}");
        prop_assert_eq!(done, count);
    }
}
