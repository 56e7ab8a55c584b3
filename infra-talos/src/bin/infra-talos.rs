//! The `infra-talos` command: the `talos` command set on its own. See
//! `infra_talos::cli` for the commands, the configuration and the exit codes.

use std::process::ExitCode;

fn main() -> ExitCode {
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
    let mut io = infra_talos::cli::Io {
        out: &mut stdout,
        err: &mut stderr,
        env: std::env::vars().collect(),
    };
    runtime.block_on(infra_talos::cli::run(std::env::args_os(), &mut io))
}
