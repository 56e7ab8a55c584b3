//! The Scaleway stand-ins of `infra_testkit::scaleway` as a process, for running a
//! fleet's binary against them (as `.ci/run` does) or poking at them with `curl`.
//!
//! ```sh
//! cargo run -p infra-testkit --features scaleway --bin scaleway-stand-in -- \
//!     --project 11111111-1111-4111-8111-111111111111 --port 8490
//! ```
//!
//! It prints `listening on http://127.0.0.1:PORT` once it serves, and stops on SIGINT
//! or SIGTERM. Point a fleet at it with `SCW_API_URL=http://127.0.0.1:PORT`, an API key
//! of Scaleway's shape (`SCW_ACCESS_KEY`: `SCW` and 17 uppercase letters or digits;
//! `SCW_SECRET_KEY`: a UUID), and `SCW_DEFAULT_PROJECT_ID=<the project>`. It takes any
//! well-formed key, or with `--access-key` and `--secret-key` only that one. Statuses
//! settle on the real clock, a change taking `--settle-ms` milliseconds (300 by default).
//! Object Storage and the queues themselves are not served: use moto's server and
//! `INFRA_SCALEWAY_S3_ENDPOINT`. Queues' activation and credentials are served, and
//! `--sqs-endpoint URL` is the `sqs_endpoint_url` they answer (moto's server, say).
//! `--rate-per-second N` admits at most N calls a second to each API, answering 429
//! with a `Retry-After` beyond (off by default).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use infra_core::sdk::SystemClock;
use infra_testkit::scaleway::{ApiKey, ScalewayOptions, ScalewayServer};

fn usage() -> ExitCode {
    eprintln!(
        "usage: scaleway-stand-in [--project ID] [--organization ID] [--port PORT] \
         [--settle-ms MS] [--rate-per-second N] [--access-key SCW… --secret-key UUID] \
         [--sqs-endpoint URL]"
    );
    ExitCode::from(2)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut project = "11111111-1111-4111-8111-111111111111".to_owned();
    let mut organization = "22222222-2222-4222-8222-222222222222".to_owned();
    let mut port = 0u16;
    let mut settle_ms = 300u64;
    let mut rate = 0u32;
    let (mut access_key, mut secret_key) = (None, None);
    let mut sqs_endpoint = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next();
        match (arg.as_str(), value) {
            ("--project", Some(v)) if !v.is_empty() => project = v,
            ("--organization", Some(v)) if !v.is_empty() => organization = v,
            ("--port", Some(v)) => match v.parse() {
                Ok(p) => port = p,
                Err(_) => return usage(),
            },
            ("--settle-ms", Some(v)) => match v.parse() {
                Ok(n) => settle_ms = n,
                Err(_) => return usage(),
            },
            ("--rate-per-second", Some(v)) => match v.parse() {
                Ok(n) => rate = n,
                Err(_) => return usage(),
            },
            ("--sqs-endpoint", Some(v)) if !v.is_empty() => sqs_endpoint = Some(v),
            ("--access-key", Some(v)) => access_key = Some(v),
            ("--secret-key", Some(v)) => secret_key = Some(v),
            _ => return usage(),
        }
    }
    let mut options = ScalewayOptions::new()
        .port(port)
        .clock(Arc::new(SystemClock::new()))
        .settling(Duration::from_millis(settle_ms))
        .rate_per_second(rate);
    match (access_key, secret_key) {
        (None, None) => {}
        (Some(access), Some(secret)) => match ApiKey::new(&access, &secret) {
            Ok(key) => options = options.key(key),
            Err(why) => {
                eprintln!("scaleway-stand-in: {why}");
                return ExitCode::from(2);
            }
        },
        _ => return usage(),
    }
    let server = match ScalewayServer::start_with(&project, &organization, options).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("scaleway-stand-in: cannot listen on 127.0.0.1:{port}: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(url) = &sqs_endpoint {
        server.queues_endpoint(url);
    }
    println!("listening on {} (project {project})", server.address());
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            eprintln!("scaleway-stand-in: cannot watch SIGTERM: {e}");
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
