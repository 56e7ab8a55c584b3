//! `serve`: the controller as a long-running service (see [`crate::serve`]), and
//! `server-certificate`, which issues it a certificate from the installation's own
//! authority.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::identity::write_all_new;
use super::{Config, Failure};
use crate::cli::database::Db;
use crate::contract::SpanMs;
use crate::controller::ExecutorSettings;
use crate::identity::issue_server;
use crate::serve::{PassSettings, ServeSettings};

/// `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:8443")]
    pub listen: SocketAddr,
    /// The service's certificate chain (PEM), e.g. from `server-certificate`.
    #[arg(long, value_name = "FILE")]
    pub server_certificate: PathBuf,
    /// Its private key (PEM).
    #[arg(long, value_name = "FILE")]
    pub server_key: PathBuf,
    /// How often approved plans are looked for and run: `30s`, `1m`. In recovery
    /// mode, how often the recovery pass takes the reads that have fallen due.
    #[arg(long, default_value = "10s", value_parser = parse_period)]
    pub every: Duration,
    /// How often the drift pass observes every machine with an Applied release (the
    /// first pass one interval after start, never at start).
    #[arg(long, default_value = "5m", value_parser = parse_period)]
    pub drift_every: Duration,
    /// Answer the API and the page only: run no plan and no drift pass (a replica
    /// beside the controller instance).
    #[arg(long)]
    pub no_controller: bool,
    /// The recovery start, on a store just restored (§7.2): until recovery-admin
    /// enters recovery mode (`recovery enter`, through this service or on the
    /// database) take nothing over, run nothing, and answer liveness and the entry
    /// only. Then serve as any start in recovery mode.
    #[arg(long)]
    pub recovery_start: bool,
    /// The deployment's settle floor for accounting (§5.2), in seconds.
    #[arg(long, default_value_t = 30)]
    pub settle_floor: u64,
    /// The deployment's maximum transport deadline, in seconds.
    #[arg(long, default_value_t = 60)]
    pub max_transport_deadline: u64,
}

/// `server-certificate`.
#[derive(Debug, Args)]
pub struct ServerCertificateArgs {
    /// The directory holding the installation's authority (`ca.crt`, `ca.key`); the
    /// certificate is written there as `server.crt` and `server.key`.
    #[arg(long)]
    pub pki: PathBuf,
    /// A DNS name or IP address clients reach the service at (repeat).
    #[arg(long = "name", required = true)]
    pub names: Vec<String>,
    /// How long it is valid, in days.
    #[arg(long, default_value_t = 365)]
    pub days: u64,
}

/// A timer's period: a span above zero (`30s`, `5m`, `1h`).
fn parse_period(text: &str) -> Result<Duration, String> {
    let span = super::when::parse_span(text)?;
    if span.0 == 0 {
        return Err("a period above zero".into());
    }
    Ok(Duration::from_millis(span.0))
}

/// `server-certificate`.
pub(super) fn server_certificate(args: &ServerCertificateArgs) -> Result<String, Failure> {
    let read = |name: &str| {
        std::fs::read_to_string(args.pki.join(name)).map_err(|e| {
            Failure::Usage(format!(
                "cannot read {}: {e}",
                args.pki.join(name).display()
            ))
        })
    };
    let ca_cert = read("ca.crt")?;
    let ca_key = zeroize::Zeroizing::new(read("ca.key")?);
    let issued = issue_server(
        &ca_cert,
        &ca_key,
        &args.names,
        super::when::wall_now(),
        Duration::from_secs(args.days.saturating_mul(86_400)),
    )
    .map_err(|e| Failure::Usage(e.to_string()))?;
    let (cert, key) = (args.pki.join("server.crt"), args.pki.join("server.key"));
    write_all_new(
        &args.pki,
        &[
            (cert.clone(), issued.certificate_pem.as_str(), false),
            (key.clone(), issued.key_pem.as_str(), true),
        ],
    )?;
    Ok(format!(
        "server certificate for {}: {} and {} (valid {} days)\n",
        args.names.join(", "),
        cert.display(),
        key.display(),
        args.days
    ))
}

/// `serve`: runs until SIGINT or SIGTERM.
pub(super) async fn serve(db: &Db, config: &Config, args: ServeArgs) -> Result<String, Failure> {
    let identity = db.store.installation_identity().await?.ok_or_else(|| {
        Failure::Usage(
            "the store has no identity root yet: bootstrap it with `infra-talos init`".into(),
        )
    })?;
    let read = |path: &PathBuf| {
        std::fs::read_to_string(path)
            .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))
    };
    let keys = config.custody.provider().map_err(Failure::Usage)?;
    config
        .custody
        .check_at_start()
        .await
        .map_err(Failure::Usage)?;
    if config.custody.is_keyring() {
        tracing::warn!(
            "artifacts are sealed with the local keyring file, which is meant for \
             development: Transit (`transit` in the configuration) is the recommended custody"
        );
    }
    let settings = ServeSettings {
        keys: Some(Arc::clone(&keys)),
        ca_certificate_pem: identity.ca_certificate,
        server_certificate_pem: read(&args.server_certificate)?,
        server_key_pem: read(&args.server_key)?,
        passes: PassSettings {
            every: args.every,
            drift_every: args.drift_every,
        },
        denied: config.denied_list(),
    };
    if settings.denied.is_none() {
        tracing::warn!(
            "no denied-subject list is configured (`denied_subjects`, \
             INFRA_TALOS_DENIED_SUBJECTS): a database restore could make a revoked \
             identity trusted again"
        );
    }
    let controller = if args.no_controller {
        None
    } else {
        let settings = ExecutorSettings {
            settle_floor: SpanMs::from_secs(args.settle_floor),
            max_transport_deadline: SpanMs::from_secs(args.max_transport_deadline),
        };
        Some(config.grounds(db).executor(keys, settings).await?)
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| Failure::Usage(format!("cannot listen on {}: {e}", args.listen)))?;
    let stores = crate::serve::Stores {
        store: Arc::clone(&db.store),
        inventory: Arc::clone(&db.inventory),
    };
    let running = if args.recovery_start {
        crate::serve::start_for_recovery(stores, controller, settings, listener).await
    } else {
        crate::serve::start(stores, controller, settings, listener).await
    }
    .map_err(|e| Failure::Usage(e.to_string()))?;
    tracing::info!(addr = %running.addr, "serving");
    let stop = running.stop_handle();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("stopping: finishing the plan in flight");
        let _ = stop.send(true);
    });
    running.wait().await;
    Ok("stopped\n".into())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            let _ = tokio::signal::ctrl_c().await;
            return;
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
