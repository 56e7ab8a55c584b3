//! What the HTTP stand-ins share: the accept loop on loopback, and the decoding of
//! paths and queries.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

/// Accepts connections on `listener` until `stopped` fires, answering each request with
/// `answer` (given the shared `state`); connections still open are then closed.
pub(crate) async fn serve<S, F, Fut>(
    listener: TcpListener,
    state: Arc<S>,
    mut stopped: oneshot::Receiver<()>,
    answer: F,
) where
    S: Send + Sync + 'static,
    F: Fn(Arc<S>, Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
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
                        async move { Ok::<_, Infallible>(reply.await) }
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

/// A query string's parameters, decoded.
pub(crate) fn parse_query(query: Option<&str>) -> BTreeMap<String, String> {
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

#[cfg(test)]
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
