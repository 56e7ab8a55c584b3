//! What the HTTP stand-ins and the relay share: a server running on loopback (its
//! address, its state, and the means to stop it), the accept loop, and the decoding of
//! paths and queries.

#[cfg(any(feature = "gcp", feature = "scaleway"))]
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

/// A stand-in serving on `127.0.0.1`: its state behind a lock, and its accept loop,
/// stopped by [`Running::shutdown`] or, abruptly, when dropped.
pub(crate) struct Running<S> {
    address: SocketAddr,
    state: Arc<Mutex<S>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

/// No answer: the connection is closed instead (a request a relay drops, or whose
/// answer it loses).
#[derive(Debug)]
#[cfg_attr(
    not(feature = "relay"),
    allow(dead_code, reason = "only the relay hangs up")
)]
pub(crate) struct Hangup;

impl std::fmt::Display for Hangup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the connection is closed without an answer")
    }
}

impl std::error::Error for Hangup {}

/// What a server's answer to a request is: a response, or, where it may hang up
/// instead, either.
pub(crate) trait Answer: Send + 'static {
    /// The response, or [`Hangup`].
    fn answer(self) -> Result<Response<Full<Bytes>>, Hangup>;
}

impl Answer for Response<Full<Bytes>> {
    fn answer(self) -> Result<Response<Full<Bytes>>, Hangup> {
        Ok(self)
    }
}

impl Answer for Result<Response<Full<Bytes>>, Hangup> {
    fn answer(self) -> Result<Response<Full<Bytes>>, Hangup> {
        self
    }
}

impl<S> std::fmt::Debug for Running<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl<S: Send + 'static> Running<S> {
    /// Binds `port` of `127.0.0.1` (0: a free one), makes the state from the address
    /// bound (`http://127.0.0.1:PORT`), and serves each request with `answer`.
    pub(crate) async fn start<F, Fut>(
        port: u16,
        state: impl FnOnce(&str) -> S,
        answer: F,
    ) -> io::Result<Self>
    where
        F: Fn(Arc<Mutex<S>>, Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: Answer,
    {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let address = listener.local_addr()?;
        let state = Arc::new(Mutex::new(state(&format!("http://{address}"))));
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(serve(listener, Arc::clone(&state), stopped, answer));
        Ok(Running {
            address,
            state,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The socket address served.
    #[cfg(feature = "transit")]
    pub(crate) fn socket_addr(&self) -> SocketAddr {
        self.address
    }

    /// The base address, `http://127.0.0.1:PORT`.
    pub(crate) fn address(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The state, locked (a poisoned lock is taken over: a test that panicked must not
    /// hide the state from the next).
    pub(crate) fn state(&self) -> MutexGuard<'_, S> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The state, shared (for hooks that act on it).
    #[cfg(any(feature = "gcp", feature = "scaleway"))]
    pub(crate) fn shared(&self) -> Arc<Mutex<S>> {
        Arc::clone(&self.state)
    }

    /// Stops the server and waits until it has stopped; open connections are closed.
    pub(crate) async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl<S> Drop for Running<S> {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// One request a stand-in served, as recorded for tests to read.
#[cfg(any(feature = "gcp", feature = "scaleway"))]
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RecordedRequest {
    /// The method.
    pub method: String,
    /// The path, decoded.
    pub path: String,
    /// The query parameters, decoded.
    pub query: BTreeMap<String, String>,
    /// The body (`Null` when empty), secret values replaced by `"<redacted>"`.
    pub body: serde_json::Value,
    /// The status answered.
    pub status: u16,
}

/// Accepts connections on `listener` until `stopped` fires, answering each request with
/// `answer` (given the shared `state`), or closing its connection when `answer` hangs
/// up; connections still open are then closed.
async fn serve<S, F, Fut>(
    listener: TcpListener,
    state: Arc<S>,
    mut stopped: oneshot::Receiver<()>,
    answer: F,
) where
    S: Send + Sync + 'static,
    F: Fn(Arc<S>, Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: Answer,
{
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let state = Arc::clone(&state);
                let answer = answer.clone();
                connections.spawn(async move {
                    let service = service_fn(move |request| {
                        let reply = answer(Arc::clone(&state), request);
                        async move { reply.await.answer() }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.shutdown().await;
}

/// `%XX` escapes decoded (and `+` kept: the clients send `%20` for spaces).
#[cfg(any(feature = "gcp", feature = "scaleway", feature = "relay"))]
pub(crate) fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A stand-in's request as a storm logs it: its method, path and query, for people,
/// and what identifies the call ([`call_of`](crate::storm::call_of)). Google's `$alt`
/// (how the answer is to be encoded) is left out.
#[cfg(any(feature = "gcp", feature = "scaleway"))]
pub(crate) fn storm_call(
    method: &str,
    path: &str,
    query: &BTreeMap<String, String>,
    body: &serde_json::Value,
) -> (String, String) {
    let query: Vec<String> = query
        .iter()
        .filter(|(k, _)| k.as_str() != "$alt")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let query = query.join("&");
    let call = crate::storm::call_of(method, path, &query, &body.to_string());
    (format!("{method} {path}?{query}"), call)
}

/// A query string's parameters, decoded, in the order sent (a name may repeat).
#[cfg(any(feature = "gcp", feature = "scaleway", feature = "relay"))]
pub(crate) fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
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

/// A query string's parameters, decoded, by name.
#[cfg(any(feature = "gcp", feature = "scaleway"))]
pub(crate) fn parse_query(query: Option<&str>) -> BTreeMap<String, String> {
    query_pairs(query).into_iter().collect()
}

#[cfg(all(test, any(feature = "gcp", feature = "scaleway")))]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_queries_decode() {
        assert_eq!(decode("a%3Bb%3Dc"), "a;b=c");
        assert_eq!(decode("100%"), "100%");
        let q = parse_query(Some("secretId=db&%24alt=json%3Benum-encoding%3Dint&flag"));
        assert_eq!(q["$alt"], "json;enum-encoding=int");
        assert_eq!(q["flag"], "");
    }
}
