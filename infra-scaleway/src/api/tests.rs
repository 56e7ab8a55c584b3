//! The REST client's retries: how each answer is classified for the policy, the
//! `Retry-After` it reads, and what is repeated against the stand-in.

use std::sync::Arc;
use std::time::Duration;

use infra_core::sdk::retry::{Decision, GiveUp};
use infra_core::sdk::{Clock, ErrorKind, Failure, Idempotence, ManualClock, Retrier, RetryPolicy};
use infra_testkit::scaleway::{ScalewayProduct, ScalewayServer};
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};

use super::*;
use crate::error::classify;

const PROJECT: &str = "11111111-1111-4111-8111-111111111111";
const ORGANIZATION: &str = "22222222-2222-4222-8222-222222222222";

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(*name, HeaderValue::from_str(value).unwrap());
    }
    map
}

#[test]
fn retry_after_is_read_as_seconds_or_as_a_date_against_the_answers_own_date() {
    assert_eq!(
        retry_after(&headers(&[("retry-after", "7")])),
        Some(Duration::from_secs(7))
    );
    let dated = headers(&[
        ("retry-after", "Wed, 21 Oct 2026 07:28:30 GMT"),
        ("date", "Wed, 21 Oct 2026 07:28:00 GMT"),
    ]);
    assert_eq!(retry_after(&dated), Some(Duration::from_secs(30)));
    // A date with nothing to measure it from, a date past, or nonsense: no wait asked.
    for unread in [
        headers(&[("retry-after", "Wed, 21 Oct 2026 07:28:30 GMT")]),
        headers(&[
            ("retry-after", "Wed, 21 Oct 2026 07:27:00 GMT"),
            ("date", "Wed, 21 Oct 2026 07:28:00 GMT"),
        ]),
        headers(&[("retry-after", "soon")]),
        headers(&[]),
    ] {
        assert_eq!(retry_after(&unread), None, "{unread:?}");
    }
}

#[test]
fn every_constructor_states_whether_its_call_may_be_repeated() {
    let path = "/x";
    assert_eq!(Call::get("g", path).idempotence, Idempotence::Idempotent);
    assert_eq!(Call::patch("p", path).idempotence, Idempotence::Idempotent);
    assert_eq!(Call::put("u", path).idempotence, Idempotence::Idempotent);
    assert_eq!(Call::delete("d", path).idempotence, Idempotence::Idempotent);
    let create = Call::create("c", path);
    assert_eq!(
        (create.method.clone(), create.idempotence),
        (Method::POST, Idempotence::NotIdempotent)
    );
    for stated in [Idempotence::Idempotent, Idempotence::NotIdempotent] {
        let action = Call::action("a", path, stated);
        assert_eq!((action.method, action.idempotence), (Method::POST, stated));
    }
}

/// What the policy decides for the first failure of a call answered `status` and
/// `body`, of `idempotence`, with `wait` read from its `Retry-After`.
fn decided(status: u16, body: &str, idempotence: Idempotence, wait: Option<u64>) -> Decision {
    let write = idempotence == Idempotence::NotIdempotent || status != 200;
    let error = with_wait(
        classify("call", status, body, &[], write),
        wait.map(Duration::from_secs),
    );
    RetryPolicy::default().decide(Failure::of(&error), idempotence, 0, Duration::ZERO, 0.5)
}

#[test]
fn answers_are_classified_for_the_one_policy() {
    use Idempotence::{Idempotent, NotIdempotent};
    let busy = r#"{"type":"transient_state","message":"resource is in a transient state"}"#;
    let throttled = classify("create", 429, "", &[], true);
    assert_eq!(
        Failure::of(&with_wait(throttled, Some(Duration::from_secs(3)))),
        Failure::Throttled {
            retry_after: Some(Duration::from_secs(3))
        }
    );
    // Throttled and busy calls did nothing: retried, creates included, never sooner
    // than asked.
    assert_eq!(
        decided(429, "", NotIdempotent, Some(4)),
        Decision::Retry(Duration::from_secs(4))
    );
    assert!(matches!(
        decided(409, busy, NotIdempotent, None),
        Decision::Retry(_)
    ));
    assert_eq!(
        Failure::of(&classify("create", 409, busy, &[], true)),
        Failure::NotSent
    );
    // A 5xx may have been acted on: a create is not repeated, an update or a delete is.
    assert_eq!(
        decided(503, "", NotIdempotent, None),
        Decision::GiveUp(GiveUp::MayHaveBeenSent)
    );
    assert!(matches!(
        decided(503, "", Idempotent, None),
        Decision::Retry(_)
    ));
    assert!(matches!(
        decided(502, "", Idempotent, None),
        Decision::Retry(_)
    ));
    // What is refused for what it asks is never repeated.
    for (status, body) in [
        (400, r#"{"type":"invalid_arguments","message":"bad"}"#),
        (403, r#"{"type":"permissions_denied","message":"no"}"#),
        (
            404,
            r#"{"type":"not_found","message":"gone","resource":"secret"}"#,
        ),
        (409, r#"{"type":"already_exists","message":"taken"}"#),
    ] {
        assert_eq!(
            decided(status, body, Idempotent, None),
            Decision::GiveUp(GiveUp::Final),
            "{status} {body}"
        );
    }
}

/// A client of `server` retrying by `policy` on `clock`.
fn client(server: &ScalewayServer, policy: RetryPolicy, clock: &Arc<ManualClock>) -> Api {
    crate::install_crypto();
    let clock: Arc<dyn Clock> = clock.clone();
    let http = reqwest::Client::builder()
        .timeout(policy.request_timeout())
        .build()
        .unwrap();
    Api::new(
        http,
        &server.address(),
        SecretString::new(server.token()),
        Retrier::new(policy, clock).with_jitter(infra_core::sdk::Jitter::seeded(7)),
    )
}

fn secrets_path() -> String {
    "/secret-manager/v1beta1/regions/fr-par/secrets".to_owned()
}

fn new_secret(name: &str) -> Value {
    json!({ "name": name, "project_id": PROJECT, "tags": [], "type": "opaque" })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_create_is_repeated_and_lands_once() {
    let server = ScalewayServer::start(PROJECT, ORGANIZATION).await.unwrap();
    let clock = Arc::new(ManualClock::new());
    let api = client(&server, RetryPolicy::default(), &clock);
    server.throttle(ScalewayProduct::SecretManager, 3);
    let made: Value = api
        .send(
            Call::create("secret-manager:CreateSecret", secrets_path()),
            Some(&new_secret("throttled")),
        )
        .await
        .expect("the create lands after the throttling");
    assert_eq!(made["name"], "throttled");
    let posts: Vec<u16> = server
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.status)
        .collect();
    assert_eq!(posts, [429, 429, 429, 200]);
    assert!(
        clock.now() > Duration::ZERO,
        "the retries waited on the clock"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_answer_was_lost_is_not_repeated_but_an_update_is() {
    let server = ScalewayServer::start(PROJECT, ORGANIZATION).await.unwrap();
    let clock = Arc::new(ManualClock::new());
    let api = client(&server, RetryPolicy::default(), &clock);
    server.lose_answers(ScalewayProduct::SecretManager, 1);
    let lost = api
        .send::<Value>(
            Call::create("secret-manager:CreateSecret", secrets_path()),
            Some(&new_secret("lost")),
        )
        .await
        .unwrap_err();
    assert!(
        lost.kind == ErrorKind::Unavailable && lost.may_have_been_sent,
        "{lost:?}"
    );
    let posts = server
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .count();
    assert_eq!(posts, 1, "a create that may have landed is never repeated");

    let listed: Value = api
        .call(Call::get("secret-manager:ListSecrets", secrets_path()).query("project_id", PROJECT))
        .await
        .unwrap();
    let id = listed["secrets"][0]["id"].as_str().unwrap().to_owned();
    server.lose_answers(ScalewayProduct::SecretManager, 1);
    api.act(
        Call::patch(
            "secret-manager:UpdateSecret",
            format!("{}/{id}", secrets_path()),
        ),
        Some(&json!({ "description": "again" })),
    )
    .await
    .expect("an update whose answer was lost is repeated");
    let patches: Vec<u16> = server
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH")
        .map(|r| r.status)
        .collect();
    assert_eq!(patches, [504, 200]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_spent_says_so_and_no_policy_tries_once() {
    let server = ScalewayServer::start(PROJECT, ORGANIZATION).await.unwrap();
    let clock = Arc::new(ManualClock::new());
    let call =
        || Call::get("secret-manager:ListSecrets", secrets_path()).query("project_id", PROJECT);
    server.throttle(ScalewayProduct::SecretManager, 1000);
    let short = RetryPolicy::default().with_budget(Duration::from_secs(5));
    let e = client(&server, short, &clock)
        .call::<Value>(call())
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Throttled);
    assert!(e.message.contains("retry budget is spent"), "{e}");
    server.clear_requests();
    let e = client(&server, RetryPolicy::none(), &clock)
        .call::<Value>(call())
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Throttled);
    assert_eq!(server.requests().len(), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_never_reached_scaleway_is_repeated_even_when_it_creates() {
    crate::install_crypto();
    // A port nothing listens on: every attempt fails to connect.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let clock = Arc::new(ManualClock::new());
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let policy = RetryPolicy::default().with_budget(Duration::from_secs(3));
    let api = Api::new(
        reqwest::Client::new(),
        &address,
        SecretString::new("t"),
        Retrier::new(policy, dyn_clock),
    );
    let e = api
        .send::<Value>(Call::create("c", "/x"), Some(&json!({})))
        .await
        .unwrap_err();
    assert!(
        e.kind == ErrorKind::Unavailable && !e.may_have_been_sent,
        "{e:?}"
    );
    assert!(e.message.contains("retry budget is spent"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_waits_the_request_timeout_and_a_timed_out_write_may_have_been_sent() {
    crate::install_crypto();
    // A server that takes every connection and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&accepted);
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(stream);
        }
    });
    let policy = RetryPolicy::default()
        .with_budget(Duration::from_secs(2))
        .with_request_timeout(Duration::from_millis(300));
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new());
    let http = reqwest::Client::builder()
        .timeout(policy.request_timeout())
        .build()
        .unwrap();
    let api = Api::new(
        http,
        &address,
        SecretString::new("t"),
        Retrier::new(policy, clock),
    );
    let e = api
        .send::<Value>(Call::create("c", "/x"), Some(&json!({})))
        .await
        .unwrap_err();
    assert!(
        e.kind == ErrorKind::Unavailable && e.may_have_been_sent,
        "{e:?}"
    );
    let creates = accepted.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(creates, 1, "a create that may have landed is tried once");
    let e = api
        .act(Call::patch("p", "/x"), Some(&json!({})))
        .await
        .unwrap_err();
    assert!(e.may_have_been_sent, "{e:?}");
    assert!(
        accepted.load(std::sync::atomic::Ordering::SeqCst) > creates + 1,
        "an update that timed out is tried again"
    );
    silent.abort();
}
