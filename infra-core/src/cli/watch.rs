//! `watch`: a plan every interval, its drift printed, until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::sync::Arc;

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
    let counters = Arc::new(Counters::default().with_concurrency(Arc::clone(engine.concurrency())));
    let clock = SystemClock::new();
    let wall_at_origin = wall_now();
    let server = match metrics_addr {
        None => None,
        Some(addr) => match serve_metrics(addr, &counters, fleet.name(), wall_at_origin).await {
            Ok((at, server)) => {
                io.err(&format!("serving Prometheus counts at http://{at}/metrics"));
                Some(server)
            }
            Err(why) => return error(io, &format!("--metrics-addr {addr}: {why}")),
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

/// Starts serving the counts at `addr` (see [`super::metrics`]): the address taken and
/// the server's task, which ends, with its connections, when aborted.
#[cfg(feature = "metrics")]
async fn serve_metrics(
    addr: SocketAddr,
    counters: &Arc<Counters>,
    fleet: &str,
    wall_at_origin: f64,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| e.to_string())?;
    let at = listener.local_addr().map_or(addr, |a| a);
    let counters = Arc::clone(counters);
    let fleet = fleet.to_owned();
    let exposition: super::metrics::Exposition =
        Arc::new(move || counters.render(&fleet, wall_at_origin));
    let server = tokio::spawn(super::metrics::serve(
        listener,
        exposition,
        super::metrics::HEADER_TIMEOUT,
    ));
    Ok((at, server))
}

/// Without the feature `metrics` there is no server: said before the first round.
#[cfg(not(feature = "metrics"))]
async fn serve_metrics(
    _addr: SocketAddr,
    _counters: &Arc<Counters>,
    _fleet: &str,
    _wall_at_origin: f64,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), String> {
    Err(
        "this binary was built without infra-core's feature `metrics`, which serves the \
         counts; add it to infra-core's features in Cargo.toml"
            .to_owned(),
    )
}
