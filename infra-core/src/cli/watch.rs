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
    let server = match metrics_addr {
        None => None,
        Some(addr) => match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => {
                let at = listener.local_addr().map_or(addr, |a| a);
                io.err(&format!("serving Prometheus counts at http://{at}/metrics"));
                let counters = Arc::clone(&counters);
                let fleet = fleet.name().to_owned();
                Some(tokio::spawn(serve(listener, counters, fleet)))
            }
            Err(e) => return error(io, &format!("--metrics-addr {addr}: {e}")),
        },
    };
    let clock = SystemClock::new();
    crate::watch::watch(
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
    0
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

/// Answers every connection with the counts, whatever it asked.
async fn serve(listener: tokio::net::TcpListener, counters: Arc<Counters>, fleet: String) {
    while let Ok((mut stream, _)) = listener.accept().await {
        let mut request = [0u8; 1024];
        let _ = stream.read(&mut request).await;
        let body = counters.render(&fleet);
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
    }
}
