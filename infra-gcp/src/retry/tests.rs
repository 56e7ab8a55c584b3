use std::time::Duration;

use google_cloud_gax::error::Error;
use google_cloud_gax::error::rpc::{Code, Status};
use google_cloud_gax::retry_state::RetryState;

use super::*;

fn policy() -> GaxRetry {
    GaxRetry::new(
        RetryPolicy::default()
            .with_budget(Duration::from_secs(120))
            .with_backoff(Duration::from_millis(250), Duration::from_secs(20)),
    )
}

/// The state gax hands the policy after attempt number `attempts`, begun `ago`.
fn state(idempotent: bool, attempts: u32, ago: Duration) -> RetryState {
    RetryState::new(idempotent)
        .set_attempt_count(attempts)
        .set_start(tokio_now().checked_sub(ago).expect("a start in the past"))
}

/// An error answer of HTTP `code`, as gaxi makes it from a JSON error body, with a
/// `Retry-After` header when given.
fn http(code: u16, retry_after: Option<&str>) -> Error {
    let mut headers = http::HeaderMap::new();
    if let Some(after) = retry_after {
        headers.insert(http::header::RETRY_AFTER, after.parse().unwrap());
    }
    let status = match code {
        429 => Code::ResourceExhausted,
        503 => Code::Unavailable,
        _ => Code::Unknown,
    };
    Error::service_with_http_metadata(
        Status::default().set_code(status),
        Some(code),
        Some(headers),
    )
}

fn service(code: Code) -> Error {
    Error::service(Status::default().set_code(code))
}

/// `on_error` then `on_failure`, as gax's loop calls them: the decision and its wait.
fn decide(p: &GaxRetry, s: &RetryState, e: Error) -> (RetryResult, Duration) {
    let flow = p.on_error(s, e);
    let wait = p.on_failure(s);
    (flow, wait)
}

#[tokio::test]
async fn a_throttled_create_is_retried_after_at_least_its_retry_after() {
    let p = policy();
    for _ in 0..50 {
        let (flow, wait) = decide(&p, &state(false, 1, Duration::ZERO), http(429, Some("7")));
        assert!(flow.is_continue(), "{flow:?}");
        assert!(wait >= Duration::from_secs(7), "{wait:?}");
    }
    // RetryInfo in the status, when no header says it.
    let info = google_cloud_rpc::model::RetryInfo::new()
        .set_retry_delay(google_cloud_wkt::Duration::clamp(3, 0));
    let status = Status::default()
        .set_code(Code::ResourceExhausted)
        .set_details([google_cloud_gax::error::rpc::StatusDetails::RetryInfo(info)]);
    let (flow, wait) = decide(&p, &state(false, 2, Duration::ZERO), Error::service(status));
    assert!(flow.is_continue(), "{flow:?}");
    assert!(wait >= Duration::from_secs(3), "{wait:?}");
}

#[tokio::test]
async fn a_failure_that_may_have_landed_is_retried_only_where_the_call_may_be_repeated() {
    let p = policy();
    for maybe_sent in [
        service(Code::Unavailable),
        http(503, None),
        Error::timeout("the attempt timed out"),
    ] {
        let text = maybe_sent.to_string();
        let (flow, _) = decide(&p, &state(false, 1, Duration::ZERO), maybe_sent);
        assert!(flow.is_permanent(), "a create after {text}: {flow:?}");
    }
    let (flow, wait) = decide(&p, &state(true, 1, Duration::ZERO), http(503, None));
    assert!(flow.is_continue(), "{flow:?}");
    assert!(
        wait <= Duration::from_millis(250),
        "the first wait's ceiling: {wait:?}"
    );
    // Never sent: retried for a create too.
    let refused = Error::connect("connection refused");
    let (flow, _) = decide(&p, &state(false, 1, Duration::ZERO), refused);
    assert!(flow.is_continue(), "{flow:?}");
}

#[tokio::test]
async fn what_repeating_cannot_change_is_never_retried() {
    let p = policy();
    for code in [
        Code::PermissionDenied,
        Code::NotFound,
        Code::InvalidArgument,
        Code::AlreadyExists,
        Code::FailedPrecondition,
    ] {
        let (flow, _) = decide(&p, &state(true, 1, Duration::ZERO), service(code));
        assert!(flow.is_permanent(), "{code:?}: {flow:?}");
    }
}

#[tokio::test]
async fn the_budget_ends_the_retries_and_a_wait_past_it_is_not_begun() {
    let p = policy();
    let (flow, _) = decide(
        &p,
        &state(true, 9, Duration::from_secs(121)),
        http(429, None),
    );
    assert!(flow.is_exhausted(), "{flow:?}");
    // A Retry-After that would end past the budget is not waited for.
    let (flow, _) = decide(
        &p,
        &state(true, 2, Duration::from_secs(100)),
        http(429, Some("30")),
    );
    assert!(flow.is_exhausted(), "{flow:?}");
    // None at all: tried once.
    let once = GaxRetry::new(RetryPolicy::none());
    let (flow, _) = decide(&once, &state(true, 1, Duration::ZERO), http(429, None));
    assert!(flow.is_exhausted(), "{flow:?}");
}

#[tokio::test]
async fn waits_grow_with_full_jitter_under_a_doubling_ceiling() {
    let p = policy();
    let mut seen_low = false;
    for attempts in 1..=12u32 {
        let ceiling = p.policy.backoff_ceiling(attempts - 1);
        for _ in 0..20 {
            let (flow, wait) = decide(&p, &state(true, attempts, Duration::ZERO), http(429, None));
            assert!(flow.is_continue());
            assert!(
                wait <= ceiling,
                "attempt {attempts}: {wait:?} > {ceiling:?}"
            );
            seen_low |= wait < ceiling / 2;
        }
    }
    assert!(seen_low, "full jitter draws below half the ceiling too");
    assert_eq!(p.policy.backoff_ceiling(11), Duration::from_secs(20));
}

#[tokio::test]
async fn a_wait_asked_without_a_decision_is_a_fresh_draw_never_a_stale_one() {
    let p = policy();
    let (_, first) = decide(&p, &state(false, 1, Duration::ZERO), http(429, Some("60")));
    assert!(first >= Duration::from_secs(60));
    // gax asks again with no `on_error` before it: the slot was emptied.
    let again = p.on_failure(&state(false, 1, Duration::ZERO));
    assert!(again <= Duration::from_millis(250), "{again:?}");
    // A decision to give up leaves no wait behind either.
    let _ = p.on_error(&state(true, 1, Duration::ZERO), service(Code::NotFound));
    assert!(p.on_failure(&state(true, 1, Duration::ZERO)) <= Duration::from_millis(250));
}

#[tokio::test]
async fn the_throttler_never_holds_a_retry_back() {
    let mut p = policy();
    for _ in 0..100 {
        p.on_retry_failure(&RetryResult::Continue(http(429, None)));
        assert!(!p.throttle_retry_attempt());
    }
}

#[tokio::test]
async fn polls_double_up_to_the_longest_and_stop_at_the_deadline() {
    let polling = OperationPolling::new(Polling {
        first: Duration::from_millis(100),
        longest: Duration::from_millis(800),
        deadline: Duration::from_secs(60),
    });
    let fresh_start = OperationPolling::starting_now(Polling {
        first: Duration::from_millis(100),
        longest: Duration::from_millis(800),
        deadline: Duration::from_secs(60),
    });
    assert!(
        fresh_start
            .on_in_progress(&PollingState::default(), "op")
            .is_ok()
    );
    let fresh = PollingState::default();
    let waits: Vec<Duration> = (1..=6u32)
        .map(|n| polling.wait_period(&fresh.clone().set_attempt_count(n)))
        .collect();
    let ms = |n| Duration::from_millis(n);
    assert_eq!(
        waits,
        [ms(100), ms(200), ms(400), ms(800), ms(800), ms(800)]
    );
    assert!(polling.on_in_progress(&fresh, "op").is_ok());
    #[allow(
        clippy::disallowed_methods,
        reason = "a poller's stamp, as gax makes it"
    )]
    let old = PollingState::default().set_start(
        Instant::now()
            .checked_sub(Duration::from_secs(61))
            .expect("a start in the past"),
    );
    let err = polling.on_in_progress(&old, "op").unwrap_err();
    assert!(err.is_exhausted(), "{err}");
    assert!(err.to_string().contains("still running"), "{err}");
    // A throttled poll is repeated, after what it asked for; a denied one ends the wait.
    assert!(polling.on_error(&fresh, http(429, Some("5"))).is_continue());
    assert!(polling.wait_period(&fresh.clone().set_attempt_count(1u32)) >= Duration::from_secs(5));
    assert!(
        polling
            .on_error(&fresh, service(Code::PermissionDenied))
            .is_permanent()
    );
    assert!(polling.on_error(&old, http(503, None)).is_exhausted());
}
