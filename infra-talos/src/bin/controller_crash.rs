//! Runs one plan with the executor against an SQLite store file and stops dead at a
//! named point of the path, so tests can kill it there and check what the crash
//! leaves behind (contract §5.3).
//!
//! Configuration comes from the environment:
//!
//! | variable | meaning |
//! |---|---|
//! | `CRASH_DB` | the SQLite store file |
//! | `CRASH_TALOSCONFIG` | the talosconfig to reach the node with |
//! | `CRASH_NODE` | the node's address, `host:port` |
//! | `CRASH_KEYS` | the local keyring directory |
//! | `CRASH_PLAN`, `CRASH_MACHINE` | the plan and its machine |
//! | `CRASH_CONTROLLER` | this instance's identifier, hexadecimal |
//! | `CRASH_POINT` | where to end: `before-commitment`, `committed`, `attempt-recorded`, `response-received`, `completion-observed` |
//!
//! At the point the process writes `reached <point>` on its standard output and then
//! waits forever, holding whatever it holds (a store connection, a request's bytes):
//! the test kills it with `SIGKILL`, so nothing of the process runs after the point —
//! no destructor, no flush, no rollback of its own. It exits 0 when the plan ran to an
//! end without reaching the point, and 1 on any error.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use infra_core::engine::SystemClock;
use infra_talos::contract::SpanMs;
use infra_talos::contract::operation::ControllerId;
use infra_talos::controller::{
    Executor, ExecutorSettings, Interruption, InterruptionHook, MachineRoute, TalosconfigConnector,
};
use infra_talos::keys::LocalKeyring;
use infra_talos::store::sqlite::SqliteStore;
use infra_talos::{ConnectOptions, NodeAddress};

fn var(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set"))
}

async fn run() -> Result<(), String> {
    let point = Interruption::from_name(&var("CRASH_POINT")?)
        .ok_or_else(|| "CRASH_POINT names no interruption point".to_owned())?;
    let controller = u128::from_str_radix(&var("CRASH_CONTROLLER")?, 16)
        .map_err(|e| format!("CRASH_CONTROLLER: {e}"))?;
    let machine = var("CRASH_MACHINE")?;
    let store = SqliteStore::open(&PathBuf::from(var("CRASH_DB")?))
        .await
        .map_err(|e| e.to_string())?;
    let connector = TalosconfigConnector::load(
        &PathBuf::from(var("CRASH_TALOSCONFIG")?),
        ConnectOptions {
            connect_timeout: Duration::from_secs(2),
            call_deadline: Duration::from_secs(2),
            tls_server_name: None,
        },
    )
    .map_err(|e| e.to_string())?;
    connector.add_machine(
        machine,
        MachineRoute {
            endpoint: NodeAddress::parse(&var("CRASH_NODE")?).map_err(|e| e.to_string())?,
        },
    );
    let keys = LocalKeyring::open(var("CRASH_KEYS")?).map_err(|e| e.to_string())?;
    let hook: InterruptionHook = Arc::new(move |reached| {
        let stop = reached == point;
        if stop {
            use std::io::Write as _;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "reached {}", reached.name());
            let _ = out.flush();
        }
        Box::pin(async move {
            if stop {
                // Stopped here until killed.
                std::future::pending::<()>().await;
            }
        })
    });
    let executor = Executor::new(
        ControllerId(controller),
        Arc::new(store),
        Arc::new(connector),
        Arc::new(keys),
        Arc::new(SystemClock::new()),
        ExecutorSettings {
            settle_floor: SpanMs::from_secs(30),
            max_transport_deadline: SpanMs::from_secs(10),
        },
    )
    .map_err(|e| e.to_string())?
    .with_interruptions(hook);
    executor
        .run_plan(&var("CRASH_PLAN")?)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("controller_crash: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("controller_crash: {e}");
            ExitCode::FAILURE
        }
    }
}
