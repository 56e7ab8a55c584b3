//! The Google Cloud stand-ins of `infra_testkit::gcp` as a process, for running a
//! fleet's binary against them (as `.ci/run` does) or poking at them with `curl`.
//!
//! ```sh
//! cargo run -p infra-testkit --features gcp --bin gcp-stand-in -- --project my-project --port 8480
//! ```
//!
//! It prints `listening on http://127.0.0.1:PORT` once it serves, and stops on SIGINT
//! or SIGTERM. It keeps time on the real clock: long-running work (operations, Cloud
//! SQL instances, Cloud Run rollouts) is done `--settling-ms` milliseconds after it
//! starts (500 unless said), whether or not anyone looks. `--rate N` throttles each API
//! to N calls a second (a token bucket of N; 429 `RESOURCE_EXHAUSTED` with a
//! `Retry-After` beyond it); without it, no rate. Point a fleet at it with
//! `INFRA_GCP_ENDPOINT=http://127.0.0.1:PORT` and `GOOGLE_CLOUD_PROJECT=<the project>`.
//! Pub/Sub's topics and subscriptions are served too, with their IAM policies; Google's
//! emulator (`PUBSUB_EMULATOR_HOST`) stays the reference for Pub/Sub where a test can
//! use it.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use infra_core::sdk::SystemClock;
use infra_testkit::gcp::{GcpServer, RateLimit};

fn usage() -> ExitCode {
    eprintln!(
        "usage: gcp-stand-in [--project ID] [--port PORT] [--settling-ms MS] \
         [--rate CALLS_PER_SECOND_PER_API]"
    );
    ExitCode::from(2)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut project = "infra-test-project".to_owned();
    let mut port = 0u16;
    let mut settling = Duration::from_millis(500);
    let mut rate = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next();
        match (arg.as_str(), value) {
            ("--project", Some(v)) if !v.is_empty() => project = v,
            ("--port", Some(v)) => match v.parse() {
                Ok(p) => port = p,
                Err(_) => return usage(),
            },
            ("--settling-ms", Some(v)) => match v.parse() {
                Ok(ms) => settling = Duration::from_millis(ms),
                Err(_) => return usage(),
            },
            ("--rate", Some(v)) => match v.parse::<u32>() {
                Ok(n) if n > 0 => rate = Some(RateLimit::per_second(n)),
                _ => return usage(),
            },
            _ => return usage(),
        }
    }
    let server = match GcpServer::start_with(&project, port, Arc::new(SystemClock::new())).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("gcp-stand-in: cannot listen on 127.0.0.1:{port}: {e}");
            return ExitCode::FAILURE;
        }
    };
    server.settling(settling);
    server.limit_rate(rate);
    println!("listening on {} (project {project})", server.address());
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            eprintln!("gcp-stand-in: cannot watch SIGTERM: {e}");
            return ExitCode::FAILURE;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    server.shutdown().await;
    ExitCode::SUCCESS
}
