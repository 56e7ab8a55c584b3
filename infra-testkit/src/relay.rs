//! A recording relay: an HTTP server on `127.0.0.1` in front of a server of this
//! machine (a stand-in, an emulator, moto's server) that passes every request on and
//! keeps each exchange as it went over the wire: method, target, headers, both bodies
//! (JSON read when they are JSON) and the status answered, for a test to hold against a
//! schema or a recording.
//!
//! A rule ([`Relay::rule`]) can refuse, drop, or lose the answer of the requests it
//! picks ([`Fault`]); a throttling [`Storm`] ([`Relay::storm`]) refuses a share of
//! them with 429 ([`Refusal::throttled`], in the protocol of the AWS API they were made
//! in), telling the attempts of one call by the AWS SDK's invocation id
//! ([`Exchange::call`]), and logs each with its time on the storm's clock
//! ([`Relay::storm_calls`]).
//!
//! ```no_run
//! # async fn demo(clock: std::sync::Arc<infra_core::sdk::ManualClock>) -> std::io::Result<()> {
//! use std::time::Duration;
//! use infra_testkit::relay::{Fault, Refusal, Relay};
//! use infra_testkit::storm::{Storm, StormFigures};
//!
//! let relay = Relay::start("http://127.0.0.1:5000").await?;
//! // point the client at relay.address() …
//! relay.rule(|x| (x.action() == "CreateQueue").then_some(Fault::Lose));
//! relay.rule(|x| (x.method == "DELETE").then(|| Fault::Refuse(Refusal::denied(x))));
//! let storm = Storm::new(clock, Duration::from_secs(30))
//!     .retry_after_between(5, Duration::from_secs(1), Duration::from_secs(3));
//! relay.storm(storm.clone());
//! // … run the client, then:
//! relay.restore();
//! StormFigures::of(&storm, &relay.storm_calls()).assert_outlasted();
//! for exchange in relay.take() {
//!     println!("{} {} → {:?}", exchange.method, exchange.path, exchange.status);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The exchanges live in the test's memory only: nothing is logged, and their `Debug`
//! output shows no body (a secret's payload passes through here) and no credential.

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderName};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;

use crate::http::{Hangup, Running, decode, query_pairs};
use crate::storm::{Storm, StormCall, StormState, call_of};

/// The header the AWS SDKs send, the same on every attempt of one call.
pub const INVOCATION_ID: &str = "amz-sdk-invocation-id";

/// Headers whose values `Debug` does not show.
const CREDENTIALS: [&str; 4] = [
    "authorization",
    "x-auth-token",
    "x-amz-security-token",
    "cookie",
];

/// A body as it went over the wire: its bytes, and the JSON document they are, if
/// they are one.
#[derive(Clone, PartialEq)]
pub struct Body {
    bytes: Bytes,
    json: Option<Value>,
}

impl Body {
    fn of(bytes: Bytes) -> Body {
        let json = serde_json::from_slice(&bytes).ok();
        Body { bytes, json }
    }

    /// The bytes.
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes as text (anything not UTF-8 replaced).
    #[must_use]
    pub fn text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.bytes)
    }

    /// The JSON document, if the body is one.
    #[must_use]
    pub fn json(&self) -> Option<&Value> {
        self.json.as_ref()
    }

    /// Whether there is no body at all (or only white space).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.bytes.iter().all(u8::is_ascii_whitespace)
    }

    /// Whether there is a body, and it is not JSON.
    #[must_use]
    pub fn is_other(&self) -> bool {
        !self.is_empty() && self.json.is_none()
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.json, self.is_empty()) {
            (_, true) => f.write_str("Empty"),
            (Some(_), _) => write!(f, "Json({} bytes)", self.bytes.len()),
            (None, _) => write!(f, "Other({} bytes)", self.bytes.len()),
        }
    }
}

/// What the relay does to a request a rule picks, instead of passing it on and its
/// answer back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Answers it in the service's stead; it is not passed on.
    Refuse(Refusal),
    /// Closes the connection without an answer; it is not passed on.
    Drop,
    /// Passes it on, then closes the connection without passing the answer back, so
    /// that the client cannot tell whether it was carried out.
    Lose,
}

/// The relay's own answer to a request.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refusal {
    /// The HTTP status.
    pub status: u16,
    /// The `Retry-After` sent (whole seconds), if any.
    pub retry_after: Option<Duration>,
    /// The `Content-Type` of the body.
    pub content_type: &'static str,
    /// The body.
    pub body: String,
}

impl Refusal {
    /// An AWS error answer, `status` with `code` and `message`, in the protocol
    /// `request` was made in: AWS's JSON protocols (`X-Amz-Target`), the query
    /// protocols (a form body), or S3's REST one.
    #[must_use]
    pub fn aws(request: &Exchange, status: u16, code: &str, message: &str) -> Refusal {
        let (content_type, body) = match aws_protocol(request) {
            AwsProtocol::Json { sqs } => (
                if sqs {
                    "application/x-amz-json-1.0"
                } else {
                    "application/x-amz-json-1.1"
                },
                format!(r#"{{"__type":"{code}","message":"{message}"}}"#),
            ),
            AwsProtocol::Query => (
                "text/xml",
                format!(
                    "<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code>\
                     <Message>{message}</Message></Error><RequestId>relay</RequestId></ErrorResponse>"
                ),
            ),
            AwsProtocol::Rest => (
                "application/xml",
                format!(
                    r#"<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>{message}</Message><RequestId>relay</RequestId></Error>"#
                ),
            ),
        };
        Refusal {
            status,
            retry_after: None,
            content_type,
            body,
        }
    }

    /// `429 Too Many Requests` in the protocol `request` was made in (its code
    /// `ThrottlingException`, `Throttling` or S3's `SlowDown`), with `retry_after`.
    #[must_use]
    pub fn throttled(request: &Exchange, retry_after: Option<Duration>) -> Refusal {
        let code = match aws_protocol(request) {
            AwsProtocol::Json { .. } => "ThrottlingException",
            AwsProtocol::Query => "Throttling",
            AwsProtocol::Rest => "SlowDown",
        };
        Refusal {
            retry_after: retry_after.map(|w| Duration::from_secs(w.as_secs())),
            ..Refusal::aws(request, 429, code, "too many requests; slow down")
        }
    }

    /// `403 AccessDenied` in the protocol `request` was made in.
    #[must_use]
    pub fn denied(request: &Exchange) -> Refusal {
        Refusal::aws(request, 403, "AccessDenied", "access denied by the relay")
    }

    fn response(&self) -> Response<Full<Bytes>> {
        let mut response = Response::builder()
            .status(self.status)
            .header(header::CONTENT_TYPE, self.content_type);
        if let Some(wait) = self.retry_after {
            response = response.header(header::RETRY_AFTER, wait.as_secs().to_string());
        }
        response
            .body(Full::new(Bytes::from(self.body.clone())))
            .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
    }
}

/// The AWS protocol a request was made in.
enum AwsProtocol {
    Json { sqs: bool },
    Query,
    Rest,
}

fn aws_protocol(request: &Exchange) -> AwsProtocol {
    if let Some(target) = request.header("x-amz-target") {
        return AwsProtocol::Json {
            sqs: target.starts_with("AmazonSQS."),
        };
    }
    let form = request
        .header("content-type")
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if form {
        AwsProtocol::Query
    } else {
        AwsProtocol::Rest
    }
}

/// One request through the relay, and its answer.
#[derive(Clone)]
#[non_exhaustive]
pub struct Exchange {
    /// The method.
    pub method: String,
    /// The path and query, as sent.
    pub target: String,
    /// The path, percent-decoded.
    pub path: String,
    /// The query parameters, decoded, in the order sent (a name may repeat).
    pub query: Vec<(String, String)>,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The request's body.
    pub request: Body,
    /// What a rule or the storm did to it; `None` when it was passed on and its answer
    /// passed back.
    pub fault: Option<Fault>,
    /// The status of its answer, the service's or the relay's (502 when the service
    /// could not be reached); `None` when a dropped request had none.
    pub status: Option<u16>,
    /// The answer's body.
    pub response: Body,
}

impl Exchange {
    fn of(parts: &hyper::http::request::Parts, body: Bytes) -> Exchange {
        Exchange {
            method: parts.method.as_str().to_owned(),
            target: parts
                .uri
                .path_and_query()
                .map_or_else(|| "/".to_owned(), ToString::to_string),
            path: decode(parts.uri.path()),
            query: query_pairs(parts.uri.query()),
            headers: parts
                .headers
                .iter()
                .map(|(k, v)| {
                    let value = String::from_utf8_lossy(v.as_bytes()).into_owned();
                    (k.as_str().to_owned(), value)
                })
                .collect(),
            request: Body::of(body),
            fault: None,
            status: None,
            response: Body::of(Bytes::new()),
        }
    }

    /// The value of header `name` (any case), if sent.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The AWS SDK's invocation id, the same on every attempt of one call.
    #[must_use]
    pub fn invocation(&self) -> Option<&str> {
        self.header(INVOCATION_ID)
    }

    /// What identifies the call this request is an attempt of: the AWS SDK's
    /// invocation id, or, for other clients, its method, target and body
    /// ([`call_of`]).
    #[must_use]
    pub fn call(&self) -> String {
        match self.invocation() {
            Some(id) => id.to_owned(),
            None => {
                let (path, query) = self.target.split_once('?').unwrap_or((&self.target, ""));
                call_of(&self.method, path, query, &self.request.text())
            }
        }
    }

    /// The access key that signed it (`Credential=<key>/…` of its `Authorization`),
    /// for AWS's Signature Version 4.
    #[must_use]
    pub fn access_key(&self) -> Option<&str> {
        self.header("authorization")?
            .split("Credential=")
            .nth(1)?
            .split('/')
            .next()
    }

    /// The AWS action the request names, whatever the protocol: `X-Amz-Target`'s
    /// operation (`AmazonSQS.CreateQueue` → `CreateQueue`), a query's `Action`, or, for
    /// S3's REST protocol, the method and the subresource (`PUT ?tagging`, `PUT bucket`
    /// for a bucket's creation).
    #[must_use]
    pub fn action(&self) -> String {
        if let Some(target) = self.header("x-amz-target") {
            return target.rsplit('.').next().unwrap_or(target).to_owned();
        }
        let body = self.request.text();
        if let Some(action) = body
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

impl fmt::Debug for Exchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(k, v)| {
                let shown = if CREDENTIALS.contains(&k.as_str()) {
                    "<redacted>"
                } else {
                    v.as_str()
                };
                (k.as_str(), shown)
            })
            .collect();
        f.debug_struct("Exchange")
            .field("method", &self.method)
            .field("target", &self.target)
            .field("headers", &headers)
            .field("request", &self.request)
            .field("fault", &self.fault)
            .field("status", &self.status)
            .field("response", &self.response)
            .finish_non_exhaustive()
    }
}

/// What the relay does with a request: `Some` fault, or `None` to pass it on.
pub type Rule = Arc<dyn Fn(&Exchange) -> Option<Fault> + Send + Sync>;

struct State {
    target: SocketAddr,
    exchanges: Vec<Exchange>,
    rule: Option<Rule>,
    storm: StormState,
}

/// A running relay (see the module documentation). Dropping it stops it.
#[derive(Debug)]
pub struct Relay {
    running: Running<State>,
}

impl Relay {
    /// Starts a relay on a free port of `127.0.0.1`, passing requests on to `target`
    /// (`http://127.0.0.1:PORT`, `http://localhost:PORT`, or `127.0.0.1:PORT`).
    ///
    /// # Errors
    /// When `target` is not an address of the loopback interface, or no port can be
    /// bound.
    pub async fn start(target: &str) -> io::Result<Self> {
        let host = target
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .replace("localhost", "127.0.0.1");
        let target: SocketAddr = host.parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{target}: not an address and port"),
            )
        })?;
        if !target.ip().is_loopback() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{target}: a relay passes requests on to this machine only"),
            ));
        }
        let running = Running::start(
            0,
            |_| State {
                target,
                exchanges: Vec::new(),
                rule: None,
                storm: StormState::default(),
            },
            |state, request| async move { relay(&state, request).await },
        )
        .await?;
        Ok(Relay { running })
    }

    /// The base address to send requests to, `http://127.0.0.1:PORT`.
    #[must_use]
    pub fn address(&self) -> String {
        self.running.address()
    }

    /// Applies `rule` to every request from now on, in place of the one before.
    pub fn rule(&self, rule: impl Fn(&Exchange) -> Option<Fault> + Send + Sync + 'static) {
        self.state().rule = Some(Arc::new(rule));
    }

    /// Arms `storm` from now, in place of the one before: while it lasts, a share of the
    /// requests is answered [`Refusal::throttled`], before any rule is asked.
    pub fn storm(&self, storm: Storm) {
        self.state().storm.arm(storm);
    }

    /// Lifts the rule and the storm: every request is passed on from now on. The
    /// storm's log is kept.
    pub fn restore(&self) {
        let mut state = self.state();
        state.rule = None;
        state.storm.lift();
    }

    /// The exchanges since the last [`Relay::take`], oldest first.
    #[must_use]
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.state().exchanges.clone()
    }

    /// The exchanges since the last call, oldest first.
    pub fn take(&self) -> Vec<Exchange> {
        std::mem::take(&mut self.state().exchanges)
    }

    /// The requests received since the last storm was armed, with their times on its
    /// clock; empty when none was.
    #[must_use]
    pub fn storm_calls(&self) -> Vec<StormCall> {
        self.state().storm.calls()
    }

    /// Stops the relay and waits until it has stopped.
    pub async fn shutdown(self) {
        self.running.shutdown().await;
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.running.state()
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Relays one request: records it, asks the storm and the rule, and answers as they
/// say.
async fn relay(
    state: &Mutex<State>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Hangup> {
    let (parts, body) = request.into_parts();
    let sent = body.collect().await.map_err(|_| Hangup)?.to_bytes();
    let mut exchange = Exchange::of(&parts, sent.clone());
    let (target, stormed, rule) = {
        let mut state = lock(state);
        let stormed = if state.storm.is_armed() {
            let (what, call) = (exchange.action(), exchange.call());
            state.storm.receive(&exchange.method, &what, &call)
        } else {
            None
        };
        (state.target, stormed, state.rule.clone())
    };
    exchange.fault = match stormed {
        Some(refused) => Some(Fault::Refuse(Refusal::throttled(
            &exchange,
            refused.retry_after,
        ))),
        None => rule.and_then(|rule| rule(&exchange)),
    };
    let answer = match exchange.fault.clone() {
        Some(Fault::Refuse(refusal)) => {
            exchange.status = Some(refusal.status);
            exchange.response = Body::of(Bytes::from(refusal.body.clone()));
            Ok(refusal.response())
        }
        Some(Fault::Drop) => Err(Hangup),
        fault @ (Some(Fault::Lose) | None) => {
            let (head, bytes) = match send(target, parts, sent).await {
                Ok(answer) => answer,
                Err(e) => bad_gateway(target, &*e),
            };
            exchange.status = Some(head.status.as_u16());
            exchange.response = Body::of(bytes.clone());
            match fault {
                Some(_) => Err(Hangup),
                None => Ok(Response::from_parts(head, Full::new(bytes))),
            }
        }
    };
    lock(state).exchanges.push(exchange);
    answer
}

/// Whether header `name` concerns one connection only, and is not passed on either way
/// (the relay sends whole bodies, and opens a connection of its own for each request).
fn hop_by_hop(name: &HeaderName) -> bool {
    name == header::CONNECTION
        || name == header::EXPECT
        || name == header::TRANSFER_ENCODING
        || name.as_str() == "keep-alive"
}

/// Sends the request to `target` on a connection of its own, its headers as sent
/// (`Host` too); the answer's head and body.
async fn send(
    target: SocketAddr,
    parts: hyper::http::request::Parts,
    body: Bytes,
) -> Result<(hyper::http::response::Parts, Bytes), Box<dyn std::error::Error + Send + Sync>> {
    let stream = TcpStream::connect(target).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let uri = parts
        .uri
        .path_and_query()
        .map_or_else(|| "/".to_owned(), ToString::to_string);
    let mut request = Request::builder().method(parts.method).uri(uri);
    for (name, value) in &parts.headers {
        if !hop_by_hop(name) {
            request = request.header(name, value);
        }
    }
    if !parts.headers.contains_key(header::HOST) {
        request = request.header(header::HOST, target.to_string());
    }
    let response = sender.send_request(request.body(Full::new(body))?).await?;
    let (mut head, body) = response.into_parts();
    let bytes = body.collect().await?.to_bytes();
    let dropped: Vec<HeaderName> = head
        .headers
        .keys()
        .filter(|n| hop_by_hop(n))
        .cloned()
        .collect();
    for name in dropped {
        head.headers.remove(name);
    }
    Ok((head, bytes))
}

/// The relay's `502 Bad Gateway` when `target` could not be reached.
fn bad_gateway(
    target: SocketAddr,
    error: &(dyn std::error::Error + Send + Sync),
) -> (hyper::http::response::Parts, Bytes) {
    let bytes = Bytes::from(format!("the relay could not reach {target}: {error}"));
    let mut response = Response::new(());
    *response.status_mut() = StatusCode::BAD_GATEWAY;
    (response.into_parts().0, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(headers: &[(&str, &str)], target: &str, body: &str) -> Exchange {
        Exchange {
            method: "POST".into(),
            target: target.into(),
            path: target.split('?').next().unwrap_or("").into(),
            query: Vec::new(),
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            request: Body::of(Bytes::from(body.to_owned())),
            fault: None,
            status: None,
            response: Body::of(Bytes::new()),
        }
    }

    #[test]
    fn the_action_is_read_in_every_protocol() {
        let mut r = exchange(&[("x-amz-target", "AmazonSQS.CreateQueue")], "/", "{}");
        assert_eq!(r.action(), "CreateQueue");
        r.headers.clear();
        r.request = Body::of(Bytes::from("Action=CreateRole&Version=2010-05-08"));
        assert_eq!(r.action(), "CreateRole");
        r.request = Body::of(Bytes::new());
        r.method = "PUT".into();
        r.target = "/shop-assets".into();
        assert_eq!(r.action(), "PUT bucket");
        r.target = "/shop-assets?tagging".into();
        assert_eq!(r.action(), "PUT ?tagging");
        r.method = "GET".into();
        r.target = "/".into();
        assert_eq!(r.action(), "GET service");
    }

    #[test]
    fn refusals_speak_the_protocol_of_the_request() {
        let sqs = exchange(&[("x-amz-target", "AmazonSQS.ListQueues")], "/", "{}");
        let refusal = Refusal::throttled(&sqs, Some(Duration::from_millis(2500)));
        assert_eq!(refusal.status, 429);
        assert_eq!(refusal.content_type, "application/x-amz-json-1.0");
        assert_eq!(refusal.retry_after, Some(Duration::from_secs(2)));
        let json: Value = serde_json::from_str(&refusal.body).expect("JSON");
        assert_eq!(json["__type"], "ThrottlingException");
        let iam = exchange(
            &[("content-type", "application/x-www-form-urlencoded")],
            "/",
            "Action=CreateRole",
        );
        assert!(
            Refusal::throttled(&iam, None)
                .body
                .contains("<Code>Throttling</Code>")
        );
        let s3 = exchange(&[], "/bucket?tagging", "");
        let denied = Refusal::denied(&s3);
        assert_eq!(
            (denied.status, denied.content_type),
            (403, "application/xml")
        );
        assert!(denied.body.contains("<Code>AccessDenied</Code>"));
    }

    #[test]
    fn a_call_is_its_invocation_or_its_request_and_credentials_are_not_shown() {
        let signed = exchange(
            &[
                (INVOCATION_ID, "inv-1"),
                (
                    "authorization",
                    "AWS4-HMAC-SHA256 Credential=SCWKEY@p/20261207/fr-par/s3/aws4_request, Signature=abc",
                ),
            ],
            "/b",
            "",
        );
        assert_eq!(signed.call(), "inv-1");
        assert_eq!(signed.access_key(), Some("SCWKEY@p"));
        let shown = format!("{signed:?}");
        assert!(!shown.contains("Signature=abc"), "{shown}");
        let rest = exchange(&[], "/v1/x?a=b", r#"{"name":"n"}"#);
        assert_eq!(
            rest.call(),
            call_of("POST", "/v1/x", "a=b", r#"{"name":"n"}"#)
        );
        assert_eq!(
            rest.request.json().map(|j| j["name"].clone()),
            Some(Value::from("n"))
        );
        assert!(!format!("{:?}", rest.request).contains("name"));
        assert!(Body::of(Bytes::from("<xml/>")).is_other());
        assert!(Body::of(Bytes::from(" \n")).is_empty());
    }
}
