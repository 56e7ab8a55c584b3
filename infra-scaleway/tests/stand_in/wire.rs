//! moto behind a [`Wire`]: a relay on loopback that records every request and refuses,
//! drops or loses the ones a test picks. The Object Storage and Queues tests reach moto
//! through it, and look at moto directly with the AWS SDKs, as another tool would.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use aws_credential_types::Credentials;
use infra_core::sdk::{ManualClock, Router};
use infra_testkit::conformance::fresh_prefix;
use infra_testkit::scaleway::ScalewayServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::support::stand_in;
use super::{backend, moto};

/// One request as it went through the [`Wire`].
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    /// `GET`, `PUT`, `POST`, `DELETE`.
    pub(crate) method: String,
    /// The path and query.
    pub(crate) target: String,
    /// The SQS action (`X-Amz-Target`, `AmazonSQS.CreateQueue`); empty for S3.
    pub(crate) action: String,
    /// The body, as text.
    pub(crate) body: String,
    /// The access key that signed it (`Credential=<key>/…` of its `Authorization`).
    pub(crate) access_key: String,
}

impl Seen {
    /// Whether this is the SQS action `name`.
    pub(crate) fn is(&self, name: &str) -> bool {
        self.action == format!("AmazonSQS.{name}")
    }

    /// Whether this S3 request changes something.
    pub(crate) fn writes(&self) -> bool {
        self.action.is_empty() && !matches!(self.method.as_str(), "GET" | "HEAD")
    }
}

/// What the wire does to a request a test picks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Answers `AccessDenied` (HTTP 403) without sending it on.
    Deny,
    /// Answers a throttling error (S3 `SlowDown`, SQS `ThrottlingException`).
    Throttle,
    /// Closes the connection without sending it on.
    Drop,
    /// Sends it on, then closes the connection without passing the answer back.
    Lose,
}

type Rule = Arc<dyn Fn(&Seen) -> Option<Fault> + Send + Sync>;

#[derive(Default)]
struct Shared {
    seen: Vec<Seen>,
    rule: Option<Rule>,
}

/// A relay on loopback in front of moto: records every request, and applies the fault
/// a test's rule picks. One request per connection (every answer closes it).
pub(crate) struct Wire {
    url: String,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Wire {
    /// A relay to `upstream` (`http://127.0.0.1:port`).
    pub(crate) async fn start(upstream: &str) -> Wire {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let relayed = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(relay(client, upstream.clone(), Arc::clone(&relayed)));
            }
        });
        Wire { url, shared, task }
    }

    /// The relay's address, for the backend's configuration.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The requests seen since the last take.
    pub(crate) fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut lock(&self.shared).seen)
    }

    /// Applies `rule` to every request from now on.
    pub(crate) fn fault(&self, rule: impl Fn(&Seen) -> Option<Fault> + Send + Sync + 'static) {
        lock(&self.shared).rule = Some(Arc::new(rule));
    }

    /// No more faults.
    pub(crate) fn heal(&self) {
        lock(&self.shared).rule = None;
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(mut client: TcpStream, upstream: String, shared: Arc<Mutex<Shared>>) {
    let Some((head, body)) = read_request(&mut client).await else {
        return;
    };
    let seen = seen_of(&head, &body);
    let fault = {
        let mut s = lock(&shared);
        s.seen.push(seen.clone());
        s.rule.as_ref().and_then(|rule| rule(&seen))
    };
    match fault {
        Some(Fault::Drop) => {}
        Some(fault @ (Fault::Deny | Fault::Throttle)) => {
            let _ = client.write_all(&refusal(fault, &seen)).await;
        }
        Some(Fault::Lose) | None => {
            let Ok(answer) = forward(&upstream, &head, &body).await else {
                return;
            };
            if fault.is_none() {
                let _ = client.write_all(&answer).await;
            }
        }
    }
    let _ = client.shutdown().await;
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|line| {
        let (k, v) = line.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then_some(v.trim())
    })
}

/// The lines of a message head, less `Connection` and `Expect`, with `Connection:
/// close`, ending with the blank line.
fn closing(head: &str) -> String {
    let mut out: String = head
        .lines()
        .filter(|l| !l.is_empty())
        .filter(|l| {
            let name = l.split(':').next().unwrap_or_default().trim();
            !name.eq_ignore_ascii_case("connection") && !name.eq_ignore_ascii_case("expect")
        })
        .map(|l| format!("{l}\r\n"))
        .collect();
    out.push_str("Connection: close\r\n\r\n");
    out
}

async fn read_request(client: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        let n = client.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let length: usize = header(&head, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if header(&head, "expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
        client
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .ok()?;
    }
    let mut body = buf[end..].to_vec();
    while body.len() < length {
        let n = client.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((head, body))
}

fn seen_of(head: &str, body: &[u8]) -> Seen {
    let mut first = head.lines().next().unwrap_or_default().split(' ');
    Seen {
        method: first.next().unwrap_or_default().to_owned(),
        target: first.next().unwrap_or_default().to_owned(),
        action: header(head, "x-amz-target").unwrap_or_default().to_owned(),
        body: String::from_utf8_lossy(body).into_owned(),
        access_key: header(head, "authorization")
            .and_then(|a| a.split("Credential=").nth(1))
            .and_then(|c| c.split('/').next())
            .unwrap_or_default()
            .to_owned(),
    }
}

/// Sends the request to `upstream` and answers what came back, made to close.
async fn forward(upstream: &str, head: &str, body: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut up = TcpStream::connect(upstream).await?;
    up.write_all(closing(head).as_bytes()).await?;
    up.write_all(body).await?;
    let mut answer = Vec::new();
    up.read_to_end(&mut answer).await?;
    let Some(end) = find(&answer, b"\r\n\r\n") else {
        return Ok(answer);
    };
    let mut out = closing(&String::from_utf8_lossy(&answer[..end])).into_bytes();
    out.extend_from_slice(&answer[end + 4..]);
    Ok(out)
}

/// The answer of a refused request, in the protocol it was asked in.
fn refusal(fault: Fault, seen: &Seen) -> Vec<u8> {
    let sqs = !seen.action.is_empty();
    let (status, code) = match (fault, sqs) {
        (Fault::Deny, _) => (403, "AccessDenied"),
        (_, true) => (400, "ThrottlingException"),
        (_, false) => (503, "SlowDown"),
    };
    let (kind, body) = if sqs {
        (
            "application/x-amz-json-1.0",
            format!(r#"{{"__type":"com.amazonaws.sqs#{code}","message":"refused by the wire"}}"#),
        )
    } else {
        (
            "application/xml",
            format!(
                r#"<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>refused by the wire</Message></Error>"#
            ),
        )
    };
    format!(
        "HTTP/1.1 {status} Refused\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

// ---- the setup ----

/// The stand-in (for the backend's other endpoints), a wire in front of moto, moto's own
/// address (for a look as another tool) and a backend reaching moto through the wire;
/// or `None` after moto's loud skip. A test keeps the wire bound (as `_wire` when it
/// never looks at it) until its end: a wire dropped relays nothing more.
pub(crate) async fn on_moto() -> Option<(ScalewayServer, Wire, String, Arc<Router>)> {
    let moto = moto()?;
    let server = stand_in().await;
    let wire = Wire::start(&moto).await;
    let backend = backend(&server, Some(wire.url()));
    Some((server, wire, moto, backend))
}

/// A name no earlier run used (moto keeps what it holds while it runs): a fresh run
/// prefix of the suite's, then `what`. Bucket and queue names alike.
pub(crate) fn fresh(what: &str) -> String {
    format!("{}{what}", fresh_prefix(&ManualClock::new()))
}

/// The credentials of another tool looking at moto directly.
pub(crate) fn another_tool() -> Credentials {
    Credentials::new("SCWOTHERTOOL", "other", None, None, "test")
}

/// The HTTP client of another tool looking at moto directly (the SDK brings none here:
/// this crate builds it without its default HTTPS client).
pub(crate) fn another_tools_http() -> aws_smithy_runtime_api::client::http::SharedHttpClient {
    aws_smithy_http_client::Builder::new()
        .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
            aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
        ))
        .build_https()
}
