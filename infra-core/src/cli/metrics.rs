//! The endpoint of `watch --metrics-addr`: the watch's counts at `GET /metrics`, in
//! Prometheus's text format, served over HTTP/1 by hyper.
//!
//! Each connection is served on a task of its own, so a client that connects and says
//! nothing (or says it slowly) delays no other scrape; one that has not sent a whole
//! request head within [`HEADER_TIMEOUT`] of connecting (or of its last response, on a
//! kept-alive connection) is dropped. The connections end with the server.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{ALLOW, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::encoding::prometheus_text::CONTENT_TYPE as PROMETHEUS_TEXT;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// How long a client has to send a request's head before its connection is dropped.
pub(super) const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// What a scrape answers: the counts, rendered afresh for each request.
pub(super) type Exposition = Arc<dyn Fn() -> String + Send + Sync>;

/// Serves `exposition` on `listener` until the returned future is dropped (with every
/// connection it opened), dropping a client whose request head has not arrived within
/// `header_timeout`.
pub(super) async fn serve(listener: TcpListener, exposition: Exposition, header_timeout: Duration) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let exposition = Arc::clone(&exposition);
                connections.spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let exposition = Arc::clone(&exposition);
                        async move {
                            Ok::<_, Infallible>(respond(request.method(), request.uri().path(), || exposition()))
                        }
                    });
                    // A client that goes away or is too slow ends its connection only.
                    let _ = http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(header_timeout)
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            // Finished connections are reaped, so that the set holds only live ones.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// The answer to `method` on `path`: the counts at `/metrics` (GET, and HEAD, whose
/// body hyper leaves out), 404 elsewhere, 405 for any other method, so that a scraper
/// pointed at the wrong place is told so.
fn respond(method: &Method, path: &str, body: impl FnOnce() -> String) -> Response<Full<Bytes>> {
    let (status, content_type, text) = match (method, path) {
        (&Method::GET | &Method::HEAD, "/metrics") => (StatusCode::OK, PROMETHEUS_TEXT, body()),
        (&Method::GET | &Method::HEAD, _) => (
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "only /metrics is served here\n".to_owned(),
        ),
        _ => (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            "only GET /metrics is answered\n".to_owned(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(text)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    if status == StatusCode::METHOD_NOT_ALLOWED {
        headers.insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
    }
    response
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;

    /// A server on a free loopback port, rendering `counts`.
    async fn started(header_timeout: Duration) -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let exposition: Exposition = Arc::new(|| "counts\n".to_owned());
        let server = tokio::spawn(serve(listener, exposition, header_timeout));
        (addr, server)
    }

    /// Sends `request` on a fresh connection and reads until the server closes it.
    async fn exchange(addr: SocketAddr, request: &str) -> String {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
    }

    fn get(path: &str, method: &str) -> String {
        format!("{method} {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
    }

    /// A guard against a hang, not a measurement: far longer than any answer takes.
    const GUARD: Duration = Duration::from_secs(60);

    #[tokio::test]
    async fn only_get_and_head_of_the_metrics_path_are_answered_with_the_counts() {
        let (addr, server) = started(HEADER_TIMEOUT).await;
        let ok = exchange(addr, &get("/metrics", "GET")).await;
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.contains("content-type: text/plain; version=0.0.4; charset=utf-8\r\n"),
            "{ok}"
        );
        assert!(ok.ends_with("\r\n\r\ncounts\n"), "{ok}");
        let query = exchange(addr, &get("/metrics?x=1", "GET")).await;
        assert!(query.starts_with("HTTP/1.1 200 OK\r\n"), "{query}");
        let head = exchange(addr, &get("/metrics", "HEAD")).await;
        assert!(
            head.starts_with("HTTP/1.1 200 OK\r\n")
                && head.contains("content-length: 7\r\n")
                && head.ends_with("\r\n\r\n"),
            "{head}"
        );
        for path in ["/", "/metricsx"] {
            let elsewhere = exchange(addr, &get(path, "GET")).await;
            assert!(
                elsewhere.starts_with("HTTP/1.1 404 Not Found\r\n"),
                "{elsewhere}"
            );
        }
        let post = exchange(addr, &get("/metrics", "POST")).await;
        assert!(
            post.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
            "{post}"
        );
        assert!(post.contains("allow: GET, HEAD\r\n"), "{post}");
        server.abort();
    }

    #[tokio::test]
    async fn a_silent_client_delays_no_scrape() {
        let (addr, server) = started(HEADER_TIMEOUT).await;
        // Connected, and never a byte sent.
        let silent = TcpStream::connect(addr).await.unwrap();
        let half = TcpStream::connect(addr).await.unwrap();
        let mut half = half;
        half.write_all(b"GET /metr").await.unwrap();
        let scraped = tokio::time::timeout(GUARD, exchange(addr, &get("/metrics", "GET")))
            .await
            .expect("a scrape is answered while other clients say nothing");
        assert!(scraped.starts_with("HTTP/1.1 200 OK\r\n"), "{scraped}");
        drop((silent, half));
        server.abort();
    }

    #[tokio::test]
    async fn a_client_that_does_not_finish_its_request_head_is_dropped() {
        let (addr, server) = started(Duration::from_millis(200)).await;
        let mut slow = TcpStream::connect(addr).await.unwrap();
        slow.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\n")
            .await
            .unwrap();
        // The server ends the connection, with no answer: the request never arrived.
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(GUARD, slow.read_to_end(&mut rest))
            .await
            .expect("the server drops the slow client");
        assert!(
            !rest.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&rest)
        );
        // A silent one too.
        let mut silent = TcpStream::connect(addr).await.unwrap();
        let mut nothing = Vec::new();
        let _ = tokio::time::timeout(GUARD, silent.read_to_end(&mut nothing))
            .await
            .expect("the server drops the silent client");
        assert!(
            !nothing.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&nothing)
        );
        // And the server still answers.
        let scraped = exchange(addr, &get("/metrics", "GET")).await;
        assert!(scraped.starts_with("HTTP/1.1 200 OK\r\n"), "{scraped}");
        server.abort();
    }

    #[tokio::test]
    async fn stopping_the_server_ends_its_connections() {
        let (addr, server) = started(HEADER_TIMEOUT).await;
        let mut open = TcpStream::connect(addr).await.unwrap();
        // The connection is being served (a first exchange on it went through).
        open.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut first = [0u8; 15];
        open.read_exact(&mut first).await.unwrap();
        assert_eq!(&first, b"HTTP/1.1 200 OK");
        server.abort();
        let _ = server.await;
        // Whether it ends with a close or a reset, it ends.
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(GUARD, open.read_to_end(&mut rest))
            .await
            .expect("the kept-alive connection ends with the server");
    }
}
