//! A recording relay: an HTTP server on `127.0.0.1` that forwards every request to a
//! server of this machine (a stand-in, an emulator) and keeps each exchange as it went
//! over the wire, query, bodies and status, for a test to hold against a schema.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use infra_testkit::gcp::{GcpServer, relay::Relay};
//!
//! let server = GcpServer::start("test-project").await?;
//! let relay = Relay::start(&server.address()).await?;
//! // point the clients at relay.address() …
//! for exchange in relay.take() {
//!     println!("{} {} → {}", exchange.method, exchange.path, exchange.status);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The exchanges live in the test's memory only: nothing is logged, and their `Debug`
//! output shows no body (a secret's payload passes through here).

use std::io;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};

use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;

use crate::http::{Running, decode};

/// A body as it went over the wire.
#[derive(Clone, PartialEq)]
pub enum Body {
    /// No body at all (or only white space).
    Empty,
    /// A JSON document.
    Json(Value),
    /// Bytes that are not JSON (their count).
    Other(usize),
}

impl Body {
    fn of(bytes: &[u8]) -> Body {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Body::Empty;
        }
        match serde_json::from_slice(bytes) {
            Ok(v) => Body::Json(v),
            Err(_) => Body::Other(bytes.len()),
        }
    }

    /// The JSON document, if the body is one.
    pub fn json(&self) -> Option<&Value> {
        match self {
            Body::Json(v) => Some(v),
            _ => None,
        }
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Body::Empty => f.write_str("Empty"),
            Body::Json(_) => f.write_str("Json(..)"),
            Body::Other(n) => write!(f, "Other({n} bytes)"),
        }
    }
}

/// One request forwarded, and its answer.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Exchange {
    /// The method.
    pub method: String,
    /// The path, percent-decoded.
    pub path: String,
    /// The query parameters, decoded, in the order sent (a name may repeat).
    pub query: Vec<(String, String)>,
    /// The request's body.
    pub request: Body,
    /// The status answered (502 when the target could not be reached).
    pub status: u16,
    /// The answer's body.
    pub response: Body,
}

#[derive(Debug)]
struct RelayState {
    target: SocketAddr,
    exchanges: Vec<Exchange>,
}

/// A running relay (see the module documentation). Dropping it stops it.
pub struct Relay {
    running: Running<RelayState>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("address", &self.running.socket_addr())
            .finish_non_exhaustive()
    }
}

impl Relay {
    /// Starts a relay on a free port of `127.0.0.1`, forwarding to `target`
    /// (`http://127.0.0.1:PORT`, or `127.0.0.1:PORT`).
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
                format!("{target}: a relay forwards to this machine only"),
            ));
        }
        let running = Running::start(
            0,
            |_| RelayState {
                target,
                exchanges: Vec::new(),
            },
            |state, request| async move { forward(&state, request).await },
        )
        .await?;
        Ok(Relay { running })
    }

    /// The base address to send requests to, `http://127.0.0.1:PORT`.
    #[must_use]
    pub fn address(&self) -> String {
        self.running.address()
    }

    /// The exchanges since the last call, oldest first.
    pub fn take(&self) -> Vec<Exchange> {
        std::mem::take(&mut self.running.state().exchanges)
    }

    /// Stops the relay and waits until it has stopped.
    pub async fn shutdown(self) {
        self.running.shutdown().await;
    }
}

/// The query's pairs, decoded, in order.
fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(pair), String::new()),
        })
        .collect()
}

async fn forward(state: &Mutex<RelayState>, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let target = state.lock().unwrap_or_else(PoisonError::into_inner).target;
    let (parts, body) = request.into_parts();
    let sent = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut exchange = Exchange {
        method: parts.method.as_str().to_owned(),
        path: decode(parts.uri.path()),
        query: query_pairs(parts.uri.query()),
        request: Body::of(&sent),
        status: 502,
        response: Body::Empty,
    };
    let answer = match send(target, parts, sent).await {
        Ok((head, bytes)) => {
            exchange.status = head.status.as_u16();
            exchange.response = Body::of(&bytes);
            Response::from_parts(head, Full::new(bytes))
        }
        Err(e) => {
            let bytes = Bytes::from(format!("the relay could not reach {target}: {e}"));
            exchange.response = Body::Other(bytes.len());
            let mut response = Response::new(Full::new(bytes));
            *response.status_mut() = hyper::StatusCode::BAD_GATEWAY;
            response
        }
    };
    state
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .exchanges
        .push(exchange);
    answer
}

/// Sends the request to `target` on a connection of its own; the answer's head and
/// body.
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
        if name != hyper::header::HOST && name != hyper::header::CONNECTION {
            request = request.header(name, value);
        }
    }
    let request = request
        .header(hyper::header::HOST, target.to_string())
        .body(Full::new(body))?;
    let response = sender.send_request(request).await?;
    let (mut head, body) = response.into_parts();
    let bytes = body.collect().await?.to_bytes();
    head.headers.remove(hyper::header::TRANSFER_ENCODING);
    Ok((head, bytes))
}
