//! `watch`: a plan every interval, its drift printed, until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::console::Io;
use super::render::error;
use crate::watch::{Counters, WatchOptions};
use crate::{Engine, Fleet, SystemClock};

pub(super) async fn watch(
    io: &mut Io<'_>,
    engine: &Engine,
    fleet: &Fleet,
    options: &WatchOptions,
    metrics_addr: Option<SocketAddr>,
) -> u8 {
    let counters = Arc::new(Counters::default());
    let clock = SystemClock::new();
    let wall_at_origin = wall_now();
    let server = match metrics_addr {
        None => None,
        Some(addr) => match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => {
                let at = listener.local_addr().map_or(addr, |a| a);
                io.err(&format!("serving Prometheus counts at http://{at}/metrics"));
                let counters = Arc::clone(&counters);
                let fleet = fleet.name().to_owned();
                Some(tokio::spawn(serve(
                    listener,
                    counters,
                    fleet,
                    wall_at_origin,
                )))
            }
            Err(e) => return error(io, &format!("--metrics-addr {addr}: {e}")),
        },
    };
    let last = crate::watch::watch(
        engine,
        fleet,
        options,
        &clock,
        &counters,
        stop_signal(),
        |round| {
            for line in &round.lines {
                io.out(&format!("{line}\n"));
            }
            io.err(&format!(
                "round {}: {} drifted, {} not looked at{}",
                round.number,
                round.drifted,
                round.unreachable,
                match round.applied {
                    None => "",
                    Some(true) => ", applied",
                    Some(false) => ", applied: not everything converged",
                }
            ));
        },
    )
    .await;
    if let Some(server) = server {
        server.abort();
    }
    // Like a plan: a last round that could not look at everything, or whose apply did
    // not converge, is not a success.
    match last {
        Err(e) => error(io, &e),
        Ok(round) if round.unreachable > 0 || round.applied == Some(false) => 1,
        Ok(_) => 0,
    }
}

/// A future that resolves on SIGINT or (on Unix) SIGTERM. The handlers are installed
/// here, before the first round, so that a signal during a round is held for the next
/// look between rounds instead of killing the process halfway.
fn stop_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt()).ok();
        let mut terminate = signal(SignalKind::terminate()).ok();
        async move {
            let interrupted = async {
                match interrupt.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let terminated = async {
                match terminate.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = interrupted => {}
                () = terminated => {}
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The wall-clock time now, in seconds since the Unix epoch: the watch clock's origin,
/// for the timestamps the metrics carry.
#[allow(
    clippy::disallowed_methods,
    reason = "Prometheus timestamps are wall-clock times; the rounds run on the injected clock"
)]
fn wall_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Answers `GET /metrics` (and `HEAD`) with the counts; any other path is 404 and any
/// other method 405, so that a scraper pointed at the wrong place is told so.
async fn serve(
    listener: tokio::net::TcpListener,
    counters: Arc<Counters>,
    fleet: String,
    wall_at_origin: f64,
) {
    while let Ok((mut stream, _)) = listener.accept().await {
        let mut request = [0u8; 1024];
        let read = stream.read(&mut request).await.unwrap_or(0);
        let response = respond(&request[..read], || counters.render(&fleet, wall_at_origin));
        let _ = stream.write_all(response.as_bytes()).await;
    }
}

/// The response to a request whose first bytes are `request`.
fn respond(request: &[u8], body: impl FnOnce() -> String) -> String {
    let line = request
        .split(|&b| b == b'\r' || b == b'\n')
        .next()
        .unwrap_or(&[]);
    let mut words = line.split(|&b| b == b' ');
    let method = words.next().unwrap_or(&[]);
    let target = words.next().unwrap_or(&[]);
    // The path, without a query string.
    let path = target.split(|&b| b == b'?').next().unwrap_or(&[]);
    let (status, body, head) = match (method, path) {
        (b"GET", b"/metrics") => ("200 OK", body(), false),
        (b"HEAD", b"/metrics") => ("200 OK", body(), true),
        (b"GET" | b"HEAD", _) => (
            "404 Not Found",
            "only /metrics is served here\n".to_owned(),
            method == b"HEAD",
        ),
        _ => (
            "405 Method Not Allowed",
            "only GET /metrics is answered\n".to_owned(),
            false,
        ),
    };
    let content_type = if status.starts_with("200") {
        "text/plain; version=0.0.4"
    } else {
        "text/plain"
    };
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
        body.len(),
        if head { "" } else { body.as_str() }
    )
}

#[cfg(test)]
mod tests {
    use super::respond;

    fn status(request: &str) -> String {
        let response = respond(request.as_bytes(), || "counts\n".to_owned());
        response.lines().next().unwrap().to_owned()
    }

    #[test]
    fn only_get_of_the_metrics_path_is_answered_with_the_counts() {
        let ok = respond(b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n", || {
            "counts\n".to_owned()
        });
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.ends_with("\r\n\r\ncounts\n"), "{ok}");
        assert_eq!(status("GET /metrics?x=1 HTTP/1.1\r\n"), "HTTP/1.1 200 OK");
        let head = respond(b"HEAD /metrics HTTP/1.1\r\n", || "counts\n".to_owned());
        assert!(
            head.contains("content-length: 7\r\n") && head.ends_with("\r\n\r\n"),
            "{head}"
        );
        assert_eq!(status("GET / HTTP/1.1\r\n"), "HTTP/1.1 404 Not Found");
        assert_eq!(
            status("GET /metricsx HTTP/1.1\r\n"),
            "HTTP/1.1 404 Not Found"
        );
        assert_eq!(
            status("POST /metrics HTTP/1.1\r\n"),
            "HTTP/1.1 405 Method Not Allowed"
        );
        assert_eq!(status(""), "HTTP/1.1 405 Method Not Allowed");
    }
}
