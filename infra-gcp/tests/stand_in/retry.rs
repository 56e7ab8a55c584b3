//! The one retry policy, as the clients apply it: request timeouts on every client and
//! call, a timed-out call counted as "may have been sent" (an idempotent read tried
//! again, a create never), through gax's hooks (Secret Manager) and through the
//! `Retrier` of the hand-written Cloud Storage calls alike.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use infra_core::kinds::{
    ObjectStore, ObjectStoreSettled, SecretSourceSettled, Secrets, SecretsSettled,
};
use infra_core::prelude::Partial;
use infra_core::sdk::{
    Backend, BackendError, ErrorKind, Marker, RetryPolicy, Router, SettledSpec, SystemClock,
};
use infra_gcp::{GcpBackend, GcpConfig};
use tokio::io::AsyncReadExt as _;
use tokio::net::TcpListener;

use super::PROJECT;

/// The first lines of the requests a [`black_hole`] received.
type Seen = Arc<Mutex<Vec<String>>>;

/// A server on loopback that takes every connection and reads every request, and
/// never answers; it keeps the first line of each request (`POST /v1/…`).
async fn black_hole() -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let address = format!("http://{}", listener.local_addr().expect("an address"));
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0_u8; 8192];
                let mut counted = false;
                loop {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                    if !counted && buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf);
                        let line = head.lines().next().unwrap_or("").to_owned();
                        log.lock().unwrap().push(line);
                        counted = true;
                    }
                }
            });
        }
    });
    (address, seen)
}

/// How many of the requests `seen` began with `start` (`"POST /storage/v1/b"`).
fn count(seen: &Seen, start: &str) -> usize {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with(start))
        .count()
}

/// A backend on `endpoint` whose attempts wait 300 ms for an answer, retried for
/// `budget`, in real time (a budget on a manual clock would count only the waits, never
/// the attempts that time out).
fn impatient(endpoint: &str, budget: Duration) -> Router {
    GcpBackend::new(
        GcpConfig::stand_in(PROJECT, endpoint)
            .expect("loopback")
            .clock(Arc::new(SystemClock::new()))
            .retry_policy(
                RetryPolicy::default()
                    .with_budget(budget)
                    .with_backoff(Duration::from_millis(1), Duration::from_millis(5))
                    .with_request_timeout(Duration::from_millis(300)),
            ),
    )
}

/// The call, failing the test rather than hanging when nothing times it out.
async fn bounded<T>(
    call: impl Future<Output = Result<T, BackendError>>,
) -> Result<T, BackendError> {
    tokio::time::timeout(Duration::from_secs(20), call)
        .await
        .expect("the call ended by itself: the request timeout applies")
}

fn assert_timed_out(err: &BackendError) {
    assert_eq!(err.kind, ErrorKind::Unavailable, "{err}");
    assert!(
        err.may_have_been_sent,
        "a timeout may have been sent: {err}"
    );
    assert!(
        err.message.contains("timed out") || err.message.contains("timeout"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_read_times_out_may_have_been_sent_and_is_tried_again() {
    let (endpoint, requests) = black_hole().await;
    let backend = impatient(&endpoint, Duration::from_secs(1));
    let handle = format!("projects/{PROJECT}/secrets/quiet");
    let err = bounded(backend.read("secrets", "europe-west1", &handle))
        .await
        .unwrap_err();
    assert_timed_out(&err);
    let reads = count(&requests, &format!("GET /v1/{handle}"));
    assert!(
        reads >= 2,
        "a read may be repeated after a timeout: {reads} attempt(s)"
    );
    // The same through the Cloud Storage calls and their retrier.
    let err = bounded(backend.read("objectStore", "europe-west1", "quiet-bucket"))
        .await
        .unwrap_err();
    assert_timed_out(&err);
    let reads = count(&requests, "GET /storage/v1/b/quiet-bucket");
    assert!(reads >= 2, "{reads} attempt(s)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_create_times_out_and_is_never_sent_again() {
    let (endpoint, requests) = black_hole().await;
    let backend = impatient(&endpoint, Duration::from_secs(1));
    let marker = Marker::new("shop");
    let secret = SecretsSettled {
        value_from: SecretSourceSettled::Generated { length: 16 },
        description: Partial::Unknown,
        tags: Partial::Unknown,
    };
    let err = bounded(backend.create(
        "secrets",
        "europe-west1",
        "quiet",
        SettledSpec::new::<Secrets>(&secret),
        &marker,
    ))
    .await
    .unwrap_err();
    assert!(err.may_have_been_sent, "{err}");
    // One create, then the look by name that settles an unknown outcome (which gets
    // no answer either, and is tried again); never a second create.
    assert_eq!(
        count(&requests, &format!("POST /v1/projects/{PROJECT}/secrets?")),
        1
    );
    assert!(
        count(
            &requests,
            &format!("GET /v1/projects/{PROJECT}/secrets/quiet")
        ) >= 1
    );
    let bucket = ObjectStoreSettled {
        versioning: Partial::Known(false),
        expire_after_days: Partial::Unknown,
        tags: Partial::Unknown,
    };
    let err = bounded(backend.create(
        "objectStore",
        "europe-west1",
        "quiet-bucket",
        SettledSpec::new::<ObjectStore>(&bucket),
        &marker,
    ))
    .await
    .unwrap_err();
    assert!(err.may_have_been_sent, "{err}");
    assert_eq!(count(&requests, "POST /storage/v1/b?"), 1, "one insert");
}
