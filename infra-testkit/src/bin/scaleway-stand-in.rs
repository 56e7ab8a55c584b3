//! The Scaleway stand-ins of `infra_testkit::scaleway` as a process, for running a
//! fleet's binary against them (as `.ci/run` does) or poking at them with `curl`.
//!
//! ```sh
//! cargo run -p infra-testkit --features scaleway --bin scaleway-stand-in -- \
//!     --project 11111111-1111-4111-8111-111111111111 --port 8490
//! ```
//!
//! It prints `listening on http://127.0.0.1:PORT` once it serves, and stops on SIGINT
//! or SIGTERM. Point a fleet at it with `SCW_API_URL=http://127.0.0.1:PORT`,
//! `SCW_SECRET_KEY=stand-in`, any `SCW_ACCESS_KEY`, and `SCW_DEFAULT_PROJECT_ID=<the
//! project>` (Object Storage and the queues themselves are not served: use moto's
//! server and `INFRA_SCALEWAY_S3_ENDPOINT`; Queues' activation and credentials are
//! served, and `--sqs-endpoint URL` is the `sqs_endpoint_url` they answer, moto's
//! server for instance).

use std::process::ExitCode;

use infra_testkit::scaleway::ScalewayServer;

fn usage() -> ExitCode {
    eprintln!(
        "usage: scaleway-stand-in [--project ID] [--organization ID] [--port PORT] [--settle-reads N] [--sqs-endpoint URL]"
    );
    ExitCode::from(2)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut project = "11111111-1111-4111-8111-111111111111".to_owned();
    let mut organization = "22222222-2222-4222-8222-222222222222".to_owned();
    let mut port = 0u16;
    let mut settle = 2u32;
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
            ("--sqs-endpoint", Some(v)) if !v.is_empty() => sqs_endpoint = Some(v),
            ("--settle-reads", Some(v)) => match v.parse() {
                Ok(n) => settle = n,
                Err(_) => return usage(),
            },
            _ => return usage(),
        }
    }
    let server = match ScalewayServer::start_on(&project, &organization, port).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("scaleway-stand-in: cannot listen on 127.0.0.1:{port}: {e}");
            return ExitCode::FAILURE;
        }
    };
    server.settle_after(settle);
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
