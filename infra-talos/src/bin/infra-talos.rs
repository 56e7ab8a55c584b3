//! The `infra-talos` command: the `talos` command set on its own. See
//! `infra_talos::cli` for the commands, the configuration and the exit codes.

use std::io::IsTerminal;
use std::process::ExitCode;

/// Logs go to standard error: JSON lines when it is not a terminal (a service under
/// systemd or in a container), readable text when it is; `RUST_LOG` filters them
/// (default `info`). Command output stays on standard output.
fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if std::io::stderr().is_terminal() {
        builder.try_init()
    } else {
        builder.json().try_init()
    };
}

fn main() -> ExitCode {
    init_logs();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let mut stdout = std::io::stdout();
    let mut stderr = std::io::stderr();
    // Questions are asked only of a person at a terminal.
    let stdin = std::io::stdin();
    let mut terminal = std::io::IsTerminal::is_terminal(&stdin).then(|| stdin.lock());
    let mut io = infra_talos::cli::Io {
        out: &mut stdout,
        err: &mut stderr,
        input: terminal.as_mut().map(|t| t as &mut dyn std::io::BufRead),
        env: std::env::vars().collect(),
    };
    runtime.block_on(infra_talos::cli::run(std::env::args_os(), &mut io))
}
