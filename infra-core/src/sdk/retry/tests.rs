use std::sync::Mutex;
use std::sync::atomic::AtomicU32;

use proptest::prelude::*;

use super::*;
use crate::clock::ManualClock;

fn failure() -> impl Strategy<Value = Failure> {
    let after = proptest::option::of((0u64..200_000).prop_map(Duration::from_millis));
    prop_oneof![
        after
            .clone()
            .prop_map(|retry_after| Failure::Throttled { retry_after }),
        Just(Failure::NotSent),
        after.prop_map(|retry_after| Failure::MaybeSent { retry_after }),
        Just(Failure::Final),
    ]
}

fn idempotence() -> impl Strategy<Value = Idempotence> {
    prop_oneof![
        Just(Idempotence::Idempotent),
        Just(Idempotence::NotIdempotent)
    ]
}

fn policy() -> impl Strategy<Value = RetryPolicy> {
    (0u64..600_000, 1u64..5_000, 1u64..60_000).prop_map(|(budget, first, longest)| {
        RetryPolicy::default()
            .with_budget(Duration::from_millis(budget))
            .with_backoff(Duration::from_millis(first), Duration::from_millis(longest))
    })
}

proptest! {
    /// The table of the module's docs, as a law over every failure, call and moment.
    #[test]
    fn decisions_follow_the_table(
        policy in policy(),
        failure in failure(),
        idempotence in idempotence(),
        retries in 0u32..64,
        elapsed in (0u64..700_000).prop_map(Duration::from_millis),
        draw in 0.0f64..1.0,
    ) {
        let decision = policy.decide(failure, idempotence, retries, elapsed, draw);
        let asked = match failure {
            Failure::Throttled { retry_after } | Failure::MaybeSent { retry_after } => retry_after,
            _ => None,
        };
        match decision {
            Decision::Retry(wait) => {
                // Only what did nothing, or what may be repeated, is retried.
                prop_assert!(failure != Failure::Final);
                let maybe_sent = matches!(failure, Failure::MaybeSent { .. });
                prop_assert!(!maybe_sent || idempotence == Idempotence::Idempotent);
                // Never a wait that ends past the budget.
                prop_assert!(elapsed + wait < policy.budget());
                // Never shorter than the service asked; never longer than the larger of
                // the ceiling and what it asked.
                let ceiling = policy.backoff_ceiling(retries);
                prop_assert!(wait >= asked.unwrap_or_default());
                prop_assert!(wait <= ceiling.max(asked.unwrap_or_default()));
            }
            Decision::GiveUp(GiveUp::Final) => prop_assert_eq!(failure, Failure::Final),
            Decision::GiveUp(GiveUp::MayHaveBeenSent) => {
                let maybe_sent = matches!(failure, Failure::MaybeSent { .. });
                prop_assert!(maybe_sent);
                prop_assert_eq!(idempotence, Idempotence::NotIdempotent);
            }
            Decision::GiveUp(GiveUp::BudgetSpent) => {
                prop_assert!(failure != Failure::Final);
                // Only when even the shortest wait this draw allows would overrun.
                let ceiling = policy.backoff_ceiling(retries);
                let shortest = ceiling.mul_f64(draw).max(asked.unwrap_or_default());
                prop_assert!(elapsed + shortest >= policy.budget());
            }
        }
    }

    /// Throttling is retried whatever the call, creates included, while the budget lasts.
    #[test]
    fn throttling_is_retried_for_creates_too(
        retries in 0u32..10,
        draw in 0.0f64..1.0,
    ) {
        let policy = RetryPolicy::default();
        let decision = policy.decide(
            Failure::Throttled { retry_after: None },
            Idempotence::NotIdempotent,
            retries,
            Duration::ZERO,
            draw,
        );
        prop_assert!(matches!(decision, Decision::Retry(_)));
    }

    /// Draws are in [0, 1), and the same seed draws the same numbers.
    #[test]
    fn jitter_is_a_fraction_and_repeats_from_its_seed(seed in any::<u64>()) {
        let (a, b) = (Jitter::seeded(seed), Jitter::seeded(seed));
        for _ in 0..64 {
            let x = a.draw();
            prop_assert!((0.0..1.0).contains(&x));
            prop_assert_eq!(x.to_bits(), b.draw().to_bits());
        }
    }
}

#[test]
fn ceilings_double_from_the_first_wait_up_to_the_longest() {
    let policy = RetryPolicy::default()
        .with_backoff(Duration::from_millis(100), Duration::from_millis(1_000));
    let ceilings: Vec<_> = (0..6)
        .map(|n| policy.backoff_ceiling(n).as_millis())
        .collect();
    assert_eq!(ceilings, [100, 200, 400, 800, 1_000, 1_000]);
    assert_eq!(
        policy.backoff_ceiling(u32::MAX),
        Duration::from_millis(1_000)
    );
}

#[test]
fn jitter_spreads_waits_over_the_whole_range() {
    let jitter = Jitter::seeded(7);
    let draws: Vec<f64> = (0..10_000).map(|_| jitter.draw()).collect();
    let mean = draws.iter().sum::<f64>() / draws.len() as f64;
    assert!((0.48..0.52).contains(&mean), "mean {mean}");
    let low = draws.iter().filter(|&&d| d < 0.1).count();
    let high = draws.iter().filter(|&&d| d >= 0.9).count();
    assert!(
        low > 800 && high > 800,
        "{low} draws under 0.1, {high} over 0.9"
    );
}

#[test]
fn the_policy_is_read_from_the_environment_and_a_bad_value_is_named() {
    let vars = |budget: &'static str, timeout: &'static str| {
        move |name: &str| match name {
            RETRY_BUDGET_VAR => Some(budget.to_owned()),
            REQUEST_TIMEOUT_VAR => Some(timeout.to_owned()),
            _ => None,
        }
    };
    let policy = RetryPolicy::from_vars(vars("5m", "30s")).unwrap();
    assert_eq!(policy.budget(), Duration::from_secs(300));
    assert_eq!(policy.request_timeout(), Duration::from_secs(30));
    assert_eq!(
        RetryPolicy::from_vars(vars("", " ")).unwrap(),
        RetryPolicy::default()
    );
    let bad = RetryPolicy::from_vars(vars("soon", "30s")).unwrap_err();
    assert!(bad.starts_with("INFRA_RETRY_BUDGET=soon"), "{bad}");
    let zero = RetryPolicy::from_vars(vars("5m", "0")).unwrap_err();
    assert!(zero.contains("INFRA_REQUEST_TIMEOUT=0"), "{zero}");
}

/// A call failing with the errors of `script`, then succeeding; the attempts' times on
/// the clock are kept.
struct Scripted {
    script: Vec<BackendError>,
    clock: Arc<ManualClock>,
    calls: AtomicU32,
    times: Mutex<Vec<Duration>>,
}

impl Scripted {
    fn new(script: Vec<BackendError>) -> (Self, Retrier) {
        let clock = Arc::new(ManualClock::new());
        let retrier =
            Retrier::new(RetryPolicy::default(), clock.clone()).with_jitter(Jitter::seeded(1));
        let scripted = Scripted {
            script,
            clock,
            calls: AtomicU32::new(0),
            times: Mutex::new(Vec::new()),
        };
        (scripted, retrier)
    }

    async fn call(&self) -> Result<u32, BackendError> {
        self.times.lock().unwrap().push(self.clock.now());
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        match self.script.get(n as usize) {
            Some(e) => Err(e.clone()),
            None => Ok(n),
        }
    }

    fn times(&self) -> Vec<Duration> {
        self.times.lock().unwrap().clone()
    }
}

fn throttled(after: Option<u64>) -> BackendError {
    let e = BackendError::new(ErrorKind::Throttled, "slow down");
    match after {
        Some(s) => e.with_retry_after(Duration::from_secs(s)),
        None => e,
    }
}

#[tokio::test]
async fn a_throttled_create_is_retried_and_retry_after_is_waited_out() {
    let (call, retrier) = Scripted::new(vec![throttled(Some(3)), throttled(Some(7))]);
    let answer = retrier
        .run(Idempotence::NotIdempotent, || call.call())
        .await;
    assert_eq!(answer.unwrap(), 2);
    let times = call.times();
    assert_eq!(times.len(), 3);
    assert!(times[1] - times[0] >= Duration::from_secs(3), "{times:?}");
    assert!(times[2] - times[1] >= Duration::from_secs(7), "{times:?}");
}

#[tokio::test]
async fn a_create_that_may_have_been_sent_is_not_repeated() {
    let lost = BackendError::new(ErrorKind::Unavailable, "no answer").maybe_sent();
    let (call, retrier) = Scripted::new(vec![lost.clone()]);
    let answer = retrier
        .run(Idempotence::NotIdempotent, || call.call())
        .await;
    assert_eq!(answer.unwrap_err(), lost);
    assert_eq!(call.times().len(), 1);
    // The same failure of a read is retried.
    let (call, retrier) = Scripted::new(vec![lost]);
    let answer = retrier.run(Idempotence::Idempotent, || call.call()).await;
    assert_eq!(answer.unwrap(), 1);
}

#[tokio::test]
async fn a_create_that_never_left_is_retried() {
    let refused = BackendError::new(ErrorKind::Unavailable, "connection refused");
    let (call, retrier) = Scripted::new(vec![refused.clone(), refused]);
    let answer = retrier
        .run(Idempotence::NotIdempotent, || call.call())
        .await;
    assert_eq!(answer.unwrap(), 2);
}

#[tokio::test]
async fn a_final_failure_is_tried_once() {
    for kind in [
        ErrorKind::Denied,
        ErrorKind::NotFound,
        ErrorKind::Invalid,
        ErrorKind::Conflict,
        ErrorKind::DependencyViolation,
        ErrorKind::Other,
    ] {
        let (call, retrier) = Scripted::new(vec![BackendError::new(kind, "no")]);
        let answer = retrier.run(Idempotence::Idempotent, || call.call()).await;
        assert_eq!(answer.unwrap_err().kind, kind);
        assert_eq!(call.times().len(), 1, "{kind} was retried");
    }
}

#[tokio::test]
async fn a_storm_is_waited_out_until_the_budget_and_no_longer() {
    // Throttled for ever: retried until the next wait would end past two minutes.
    let storm = vec![throttled(None); 10_000];
    let (call, retrier) = Scripted::new(storm);
    let error = retrier
        .run(Idempotence::Idempotent, || call.call())
        .await
        .unwrap_err();
    let times = call.times();
    let last = *times.last().unwrap();
    assert!(last <= RetryPolicy::default().budget(), "{last:?}");
    assert!(times.len() > 5, "only {} attempts", times.len());
    assert_eq!(error.kind, ErrorKind::Throttled);
    assert!(
        error.message.contains("the retry budget is spent"),
        "{}",
        error.message
    );
    // A storm shorter than the budget ends in success.
    let (call, retrier) = Scripted::new(vec![throttled(Some(5)); 6]);
    assert_eq!(
        retrier
            .run(Idempotence::NotIdempotent, || call.call())
            .await
            .unwrap(),
        6
    );
}

#[tokio::test]
async fn a_retry_after_beyond_the_budget_is_not_waited_for() {
    let (call, retrier) = Scripted::new(vec![throttled(Some(3_600))]);
    let error = retrier
        .run(Idempotence::Idempotent, || call.call())
        .await
        .unwrap_err();
    assert_eq!(call.times(), [Duration::ZERO]);
    // No retry was made, so the message is the service's own.
    assert_eq!(error.message, "slow down");
}

#[tokio::test]
async fn no_policy_means_one_attempt() {
    let clock = Arc::new(ManualClock::new());
    let retrier = Retrier::new(RetryPolicy::none(), clock.clone());
    let calls = AtomicU32::new(0);
    let answer: Result<(), _> = retrier
        .run(Idempotence::Idempotent, || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(throttled(None)) }
        })
        .await;
    assert!(answer.is_err());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(clock.now(), Duration::ZERO);
}
