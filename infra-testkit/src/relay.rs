//! A relay on loopback in front of an HTTP service (moto's server): it notes every
//! request with the time it came on a [`Clock`], answers the ones a rule picks in the
//! service's stead, and passes the rest on. One request per connection: every answer
//! closes it, so that a refusal never leaves a half-read request behind.
//!
//! [`storm`] is a rule that throttles: for a while on the clock, half of the requests
//! are answered `429 Too Many Requests` (some with a `Retry-After`), in the protocol of
//! the AWS API they were made in. [`retry_after_violations`] reads the record back:
//! which retries came before the time their refusal asked for.
//!
//! ```no_run
//! # async fn run(clock: std::sync::Arc<infra_core::sdk::ManualClock>) {
//! use std::time::Duration;
//! use infra_testkit::relay::{Relay, storm};
//!
//! let relay = Relay::start("http://127.0.0.1:5000", clock.clone()).await.unwrap();
//! relay.rule(storm(clock, Duration::from_secs(30), 7));
//! // ... point the client at relay.url(), run, then read relay.requests().
//! # }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use infra_core::sdk::Clock;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The header the AWS SDKs send, the same on every attempt of one call.
pub const INVOCATION_ID: &str = "amz-sdk-invocation-id";

/// One request, as it came through the relay.
#[derive(Clone, Debug)]
pub struct Request {
    /// When it came, on the relay's clock.
    pub at: Duration,
    /// `GET`, `PUT`, `POST`, `DELETE`, `HEAD`.
    pub method: String,
    /// The path and query.
    pub target: String,
    /// The headers, names in lower case, in the order sent.
    pub headers: Vec<(String, String)>,
    /// The body, as text.
    pub body: String,
    /// The relay's own answer, when the rule picked the request; `None` when it was
    /// passed on.
    pub refused: Option<Refusal>,
}

impl Request {
    /// The value of header `name` (any case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The call this request is an attempt of: the SDK's invocation id.
    pub fn invocation(&self) -> Option<&str> {
        self.header(INVOCATION_ID)
    }

    /// The AWS action the request names, whatever the protocol: `X-Amz-Target`'s
    /// operation (`AmazonSQS.CreateQueue` → `CreateQueue`), a query's `Action`, or, for
    /// S3's REST protocol, the method and the subresource (`PUT ?tagging`, `PUT /`
    /// for a bucket's creation).
    pub fn action(&self) -> String {
        if let Some(target) = self.header("x-amz-target") {
            return target.rsplit('.').next().unwrap_or(target).to_owned();
        }
        if let Some(action) = self
            .body
            .split('&')
            .find_map(|pair| pair.strip_prefix("Action="))
        {
            return action.to_owned();
        }
        let (path, query) = self.target.split_once('?').unwrap_or((&self.target, ""));
        let sub = query.split('&').next().unwrap_or("");
        let sub = sub.split('=').next().unwrap_or("");
        let depth = path
            .trim_matches('/')
            .split('/')
            .filter(|s| !s.is_empty())
            .count();
        match (sub, depth) {
            ("", 0) => format!("{} service", self.method),
            ("", 1) => format!("{} bucket", self.method),
            ("", _) => format!("{} object", self.method),
            (sub, _) => format!("{} ?{sub}", self.method),
        }
    }
}

/// The relay's own answer to a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP status.
    pub status: u16,
    /// The `Retry-After` sent, in seconds, if any.
    pub retry_after: Option<u64>,
    /// The `Content-Type` of the body.
    pub content_type: &'static str,
    /// The body.
    pub body: String,
}

impl Refusal {
    fn to_bytes(&self) -> Vec<u8> {
        let retry_after = self
            .retry_after
            .map(|s| format!("Retry-After: {s}\r\n"))
            .unwrap_or_default();
        format!(
            "HTTP/1.1 {} Refused\r\nContent-Type: {}\r\nContent-Length: {}\r\n{retry_after}\
             Connection: close\r\n\r\n{}",
            self.status,
            self.content_type,
            self.body.len(),
            self.body
        )
        .into_bytes()
    }
}

/// What the relay does with a request: `Some` answers it in the service's stead.
pub type Rule = Arc<dyn Fn(&Request) -> Option<Refusal> + Send + Sync>;

#[derive(Default)]
struct Shared {
    requests: Vec<Request>,
    rule: Option<Rule>,
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A relay on `127.0.0.1` in front of one upstream address. Dropped, it stops.
pub struct Relay {
    url: String,
    shared: Arc<Mutex<Shared>>,
    task: JoinHandle<()>,
}

impl fmt::Debug for Relay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Relay").field("url", &self.url).finish()
    }
}

impl Relay {
    /// A relay to `upstream` (`http://127.0.0.1:PORT`), noting times on `clock`.
    ///
    /// # Errors
    ///
    /// When no loopback port can be bound.
    pub async fn start(upstream: &str, clock: Arc<dyn Clock>) -> io::Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
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
                tokio::spawn(relay(
                    client,
                    upstream.clone(),
                    Arc::clone(&relayed),
                    Arc::clone(&clock),
                ));
            }
        });
        Ok(Relay { url, shared, task })
    }

    /// The relay's address, for a client's endpoint.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Applies `rule` to every request from now on.
    pub fn rule(&self, rule: impl Fn(&Request) -> Option<Refusal> + Send + Sync + 'static) {
        lock(&self.shared).rule = Some(Arc::new(rule));
    }

    /// Passes every request on from now on.
    pub fn clear_rule(&self) {
        lock(&self.shared).rule = None;
    }

    /// Every request so far, in the order they came.
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.shared).requests.clone()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(
    mut client: TcpStream,
    upstream: String,
    shared: Arc<Mutex<Shared>>,
    clock: Arc<dyn Clock>,
) {
    let Some((head, body)) = read_request(&mut client).await else {
        return;
    };
    let mut request = parse(&head, &body, clock.now());
    let rule = lock(&shared).rule.clone();
    request.refused = rule.and_then(|rule| rule(&request));
    let refusal = request.refused.clone();
    lock(&shared).requests.push(request);
    let answer = match refusal {
        Some(refusal) => refusal.to_bytes(),
        None => match forward(&upstream, &head, &body).await {
            Ok(answer) => answer,
            Err(_) => return,
        },
    };
    let _ = client.write_all(&answer).await;
    let _ = client.shutdown().await;
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn header_of<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|line| {
        let (k, v) = line.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then_some(v.trim())
    })
}

/// A message head without `Connection` and `Expect`, asking to close, with the blank
/// line that ends it.
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
    let length: usize = header_of(&head, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if header_of(&head, "expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
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

fn parse(head: &str, body: &[u8], at: Duration) -> Request {
    let mut lines = head.lines();
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_owned();
    let target = first.next().unwrap_or_default().to_owned();
    let headers = lines
        .filter_map(|line| {
            let (k, v) = line.split_once(':')?;
            Some((k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        })
        .collect();
    Request {
        at,
        method,
        target,
        headers,
        body: String::from_utf8_lossy(body).into_owned(),
        refused: None,
    }
}

/// Sends the request to `upstream` and answers what came back, made to close.
async fn forward(upstream: &str, head: &str, body: &[u8]) -> io::Result<Vec<u8>> {
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

/// A `429 Too Many Requests` in the protocol `request` was made in: AWS's JSON
/// protocols (`X-Amz-Target`), the query protocols (a form body), or S3's REST one.
pub fn throttled(request: &Request, retry_after: Option<u64>) -> Refusal {
    let said = "too many requests; slow down";
    let (content_type, body) = if let Some(target) = request.header("x-amz-target") {
        let json = if target.starts_with("AmazonSQS.") {
            "application/x-amz-json-1.0"
        } else {
            "application/x-amz-json-1.1"
        };
        (
            json,
            format!(r#"{{"__type":"ThrottlingException","message":"{said}"}}"#),
        )
    } else if request
        .header("content-type")
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"))
    {
        (
            "text/xml",
            format!(
                "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code>\
                 <Message>{said}</Message></Error><RequestId>relay</RequestId></ErrorResponse>"
            ),
        )
    } else {
        (
            "application/xml",
            format!(
                r#"<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>{said}</Message><RequestId>relay</RequestId></Error>"#
            ),
        )
    };
    Refusal {
        status: 429,
        retry_after,
        content_type,
        body,
    }
}

/// The storm: while `clock` is short of `lasting`, about half of the requests (drawn
/// from `seed`) are answered [`throttled`], one refusal in five with a `Retry-After`
/// of one to three seconds; the rest, and everything after, are passed on.
///
/// On a `ManualClock`, every wait of every call moves the one clock: the storm lasts
/// for as many refusals as it takes their waits to add up to `lasting`.
pub fn storm(
    clock: Arc<dyn Clock>,
    lasting: Duration,
    seed: u64,
) -> impl Fn(&Request) -> Option<Refusal> + Send + Sync + 'static {
    let drawn = AtomicU64::new(seed);
    move |request| {
        if clock.now() >= lasting {
            return None;
        }
        let draw = splitmix(drawn.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed));
        if draw.is_multiple_of(2) {
            return None;
        }
        let retry_after = (draw >> 8).is_multiple_of(5).then(|| 1 + (draw >> 16) % 3);
        Some(throttled(request, retry_after))
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Every retry in `requests` that came before the time its refusal asked for: the
/// attempt after a refusal with `Retry-After: n` (the next request of the same call,
/// by [`INVOCATION_ID`]) must come at least `n` seconds after it, on the relay's clock.
pub fn retry_after_violations(requests: &[Request]) -> Vec<String> {
    let mut by_call: BTreeMap<&str, Vec<&Request>> = BTreeMap::new();
    for r in requests {
        if let Some(call) = r.invocation() {
            by_call.entry(call).or_default().push(r);
        }
    }
    let mut out = Vec::new();
    for (call, attempts) in by_call {
        for pair in attempts.windows(2) {
            let (refused, next) = (pair[0], pair[1]);
            let Some(asked) = refused.refused.as_ref().and_then(|r| r.retry_after) else {
                continue;
            };
            let waited = next.at.saturating_sub(refused.at);
            if waited < Duration::from_secs(asked) {
                out.push(format!(
                    "{} of call {call}: retried {waited:?} after a refusal asking {asked} s",
                    refused.action()
                ));
            }
        }
    }
    out
}

/// What a storm did, from the relay's record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StormFigures {
    /// Requests that reached the relay.
    pub calls: usize,
    /// Requests it answered `429`.
    pub refusals: usize,
    /// Of those, the ones with a `Retry-After`.
    pub with_retry_after: usize,
    /// Requests that were a retry of their call (a second attempt or later).
    pub retries: usize,
    /// The clock's time at the last request.
    pub last_at: Duration,
}

impl StormFigures {
    /// The figures of `requests`.
    pub fn of(requests: &[Request]) -> Self {
        let mut seen_calls = std::collections::BTreeSet::new();
        let mut figures = StormFigures {
            calls: requests.len(),
            ..StormFigures::default()
        };
        for r in requests {
            if let Some(refusal) = &r.refused {
                figures.refusals += 1;
                figures.with_retry_after += usize::from(refusal.retry_after.is_some());
            }
            if let Some(call) = r.invocation()
                && !seen_calls.insert(call.to_owned())
            {
                figures.retries += 1;
            }
            figures.last_at = figures.last_at.max(r.at);
        }
        figures
    }
}

impl fmt::Display for StormFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} calls, {} refused with 429 ({} with a Retry-After), {} retries, {:.1} simulated seconds",
            self.calls,
            self.refusals,
            self.with_retry_after,
            self.retries,
            self.last_at.as_secs_f64()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(at: u64, call: &str, refused: Option<u64>) -> Request {
        Request {
            at: Duration::from_secs(at),
            method: "POST".into(),
            target: "/".into(),
            headers: vec![
                (INVOCATION_ID.into(), call.into()),
                ("x-amz-target".into(), "AmazonSQS.CreateQueue".into()),
            ],
            body: String::new(),
            refused: refused.map(|s| Refusal {
                status: 429,
                retry_after: (s > 0).then_some(s),
                content_type: "application/x-amz-json-1.0",
                body: String::new(),
            }),
        }
    }

    #[test]
    fn a_retry_before_the_wait_asked_is_a_violation_and_one_after_it_is_not() {
        let early = [request(10, "a", Some(3)), request(12, "a", None)];
        let v = retry_after_violations(&early);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains("CreateQueue"), "{v:?}");
        let late = [request(10, "a", Some(3)), request(13, "a", None)];
        assert!(retry_after_violations(&late).is_empty());
        // Without a Retry-After, any wait will do; calls are told apart.
        let other = [
            request(10, "a", Some(0)),
            request(10, "b", None),
            request(10, "a", None),
        ];
        assert!(retry_after_violations(&other).is_empty());
        let figures = StormFigures::of(&other);
        assert_eq!(
            (figures.calls, figures.refusals, figures.retries),
            (3, 1, 1)
        );
    }

    #[test]
    fn the_action_is_read_in_every_protocol() {
        let mut r = request(0, "a", None);
        assert_eq!(r.action(), "CreateQueue");
        r.headers.retain(|(k, _)| k != "x-amz-target");
        r.body = "Action=CreateRole&Version=2010-05-08".into();
        assert_eq!(r.action(), "CreateRole");
        r.body.clear();
        r.method = "PUT".into();
        r.target = "/shop-assets".into();
        assert_eq!(r.action(), "PUT bucket");
        r.target = "/shop-assets?tagging".into();
        assert_eq!(r.action(), "PUT ?tagging");
        r.method = "GET".into();
        r.target = "/".into();
        assert_eq!(r.action(), "GET service");
    }
}
