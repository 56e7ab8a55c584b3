//! The controller as a service (`infra-talos serve`): the executor and the drift pass
//! on a timer, a JSON API for the acts of the command set, an approval page, health
//! and Prometheus metrics, over TLS where every act is made by an authenticated
//! principal.
//!
//! **Who acts.** A request is made by the principal its verified client certificate
//! names (mutual TLS against the installation's authority), or by one a short-lived
//! token names: `POST /api/v1/tokens` issues one to a certificate-authenticated
//! principal, used as `Authorization: Bearer` or as the approval page's session.
//! Nothing else names anyone; reads and acts without a proven, registered and
//! unrevoked principal are refused (401), and the store refuses an act in a role the
//! principal does not hold (403).
//!
//! **Which certificates.** A client certificate is accepted only when the store binds
//! its fingerprint to the principal it names (every certificate issued is bound in a
//! journaled act) and the binding has not ended; a certificate the authority's key
//! signed but no act journaled is refused (401), saying so. A principal the
//! denied-subject list names is refused by every proof, whatever the database says;
//! while a configured list cannot be read, no one is authenticated (503).
//!
//! **The page's protections.** Every answer carries the headers of the `headers` module (a
//! content security policy with `frame-ancestors 'none'`, `X-Frame-Options: DENY`);
//! the page's cookies, its per-visitor sign-in CSRF value and who sees a plan's
//! configuration are described in the `pages` module.
//!
//! **Recovery mode.** recovery-admin enters recovery mode through the API
//! (`POST /api/v1/recovery/enter`) or the page, as on the store (§7.2). While the
//! installation is in recovery mode the service runs no plan and no drift pass; its
//! controller takes the recovery pass on its timer instead (the reads that fall due,
//! sending nothing). It answers liveness, metrics, the recovery status and acts, and
//! the acts §7.5 always allows — revoking an approval, a blanket grant or an
//! identity, cancelling a plan, freezing a machine — through the API and the page;
//! every other route says why it waits.
//!
//! **Shutdown.** On SIGINT or SIGTERM the service stops accepting connections, lets
//! the controller pass in flight finish the plan it is on (an attempt is never cut
//! inside a store transaction; an operation left sending is taken over by the next
//! controller, §3.4), and exits.

mod api;
mod auth;
mod controller;
mod headers;
mod metrics;
mod page;
mod pages;
mod recovery_start;
mod review;
mod tls;

pub use controller::PassSettings;
pub(crate) use page::segment;
pub use tls::TlsError;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Mutex, watch};

use crate::acts::{Controller, Grounds, Keys};
use crate::backend::Inventory;
use crate::contract::recovery::ScopeState;
use crate::controller::Executor;
use crate::identity::{DeniedList, DeniedListError};
use crate::keys::KeyProvider;
use crate::store::{Store, StoreResult};
use auth::Signer;

/// What the service needs beyond the store and the controller.
#[derive(Clone)]
pub struct ServeSettings {
    /// The installation's authority (PEM), as the store's bootstrap recorded it.
    pub ca_certificate_pem: String,
    /// The service's own certificate chain (PEM).
    pub server_certificate_pem: String,
    /// Its private key (PEM).
    pub server_key_pem: String,
    /// The controller's timers.
    pub passes: PassSettings,
    /// Opens artifacts for the approval page's diffs: the controller's key custody
    /// (Transit, or the development keyring).
    pub keys: Option<Arc<dyn KeyProvider>>,
    /// The denied-subject list kept outside the database: read at start (the
    /// service does not start if it is missing, unreadable or corrupt) and at every
    /// authentication, and appended to on every revocation made through the service.
    /// `None`: none configured (a restore of the database can then undo a
    /// revocation).
    pub denied: Option<DeniedList>,
}

impl std::fmt::Debug for ServeSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeSettings")
            .field("passes", &self.passes)
            .field("keys", &self.keys.is_some())
            .finish_non_exhaustive()
    }
}

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The TLS configuration.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The listener.
    #[error("cannot listen: {0}")]
    Listen(std::io::Error),
    /// No randomness for the service's signing key.
    #[error("no randomness for the signing key: {0}")]
    Random(String),
    /// The store could not be read at start.
    #[error("the store could not be read: {0}")]
    Store(String),
    /// The configured denied-subject list cannot be used.
    #[error("cannot start: {0}")]
    DeniedList(#[from] DeniedListError),
}

/// The store the service works on, with its inventory lookups.
#[derive(Clone)]
pub struct Stores {
    /// The contract's store.
    pub store: Arc<dyn Store>,
    /// Its inventory.
    pub inventory: Arc<dyn Inventory>,
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores").finish_non_exhaustive()
    }
}

/// Shared by every request and the controller loop.
pub(crate) struct App {
    pub(crate) store: Arc<dyn Store>,
    /// What the API's acts are made on (see [`crate::acts`]).
    pub(crate) grounds: Grounds,
    /// The process's clock, and wall time read from it.
    pub(crate) clock: Arc<dyn infra_core::engine::Clock>,
    pub(crate) wall: crate::backend::WallTime,
    /// Opens artifacts for the page's diffs; `None` shows no diff.
    pub(crate) keys: Option<Arc<dyn KeyProvider>>,
    pub(crate) ca_pem: String,
    /// The denied-subject list, read at every authentication.
    pub(crate) denied: Option<DeniedList>,
    pub(crate) signer: Signer,
    pub(crate) stats: Mutex<metrics::Snapshot>,
    pub(crate) stopping: AtomicBool,
    /// Started for recovery (§7.2): the restored epoch the entry must move from.
    pub(crate) awaiting_entry: Option<recovery_start::AwaitingEntry>,
}

impl App {
    /// Runs a store read, timing it for the store-latency metric.
    pub(crate) async fn timed<T>(
        &self,
        read: impl std::future::Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        let started = self.clock.now();
        let out = read.await;
        let took = self.clock.now().saturating_sub(started);
        self.stats
            .lock()
            .await
            .store_latency
            .observe(took.as_secs_f64());
        out
    }

    /// Whether the installation is in recovery mode (some scope not normal).
    pub(crate) async fn in_recovery(&self) -> StoreResult<bool> {
        let machines = self.timed(self.store.machines()).await?;
        Ok(machines.iter().any(|m| m.scope != ScopeState::Normal))
    }
}

/// A running service: its address, and how to stop it.
#[derive(Debug)]
pub struct Running {
    /// The address it listens on.
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
    done: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops accepting, lets the controller pass finish its plan, and waits.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.done.await;
    }

    /// Waits until the service stops (after [`Running::stop_handle`] fires).
    pub async fn wait(self) {
        let _ = self.done.await;
    }

    /// A handle that stops the service when sent `true`.
    #[must_use]
    pub fn stop_handle(&self) -> watch::Sender<bool> {
        self.stop.clone()
    }
}

/// How the service starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StartMode {
    /// As any start: takeovers, then the controller's timers.
    Normal,
    /// The recovery start (§7.2): gates shut, liveness and the entry only, until
    /// recovery-admin's entry commits.
    Recovery,
}

/// Starts the service on `listener`, with `executor` as its controller (`None`
/// serves without running plans, for a replica that only answers).
///
/// # Errors
///
/// A TLS configuration that cannot be used, or no randomness for its signing key.
pub async fn start(
    stores: Stores,
    executor: Option<Executor>,
    settings: ServeSettings,
    listener: TcpListener,
) -> Result<Running, ServeError> {
    start_as(StartMode::Normal, stores, executor, settings, listener).await
}

/// The recovery start (§7.2, `serve --recovery-start`), on a store just restored:
/// as [`start`], but until recovery-admin's entry commits (the store's epoch moves)
/// the controller takes nothing over and runs nothing, and the service answers
/// liveness, `whoami` and `POST /api/v1/recovery/enter` only. It never enters
/// recovery mode by itself.
///
/// # Errors
///
/// As [`start`], and a store whose epoch cannot be read.
pub async fn start_for_recovery(
    stores: Stores,
    executor: Option<Executor>,
    settings: ServeSettings,
    listener: TcpListener,
) -> Result<Running, ServeError> {
    start_as(StartMode::Recovery, stores, executor, settings, listener).await
}

async fn start_as(
    mode: StartMode,
    stores: Stores,
    executor: Option<Executor>,
    settings: ServeSettings,
    listener: TcpListener,
) -> Result<Running, ServeError> {
    if let Some(list) = &settings.denied {
        list.read()?;
    }
    let awaiting_entry = match mode {
        StartMode::Normal => None,
        StartMode::Recovery => Some(recovery_start::AwaitingEntry::new(
            stores
                .store
                .current_epoch()
                .await
                .map_err(|e| ServeError::Store(e.to_string()))?,
        )),
    };
    let acceptor = tls::acceptor(
        &settings.ca_certificate_pem,
        &settings.server_certificate_pem,
        &settings.server_key_pem,
    )?;
    let addr = listener.local_addr().map_err(ServeError::Listen)?;
    let clock: Arc<dyn infra_core::engine::Clock> =
        Arc::new(infra_core::engine::SystemClock::new());
    let executor = executor.map(Arc::new);
    let grounds = Grounds {
        store: Arc::clone(&stores.store),
        inventory: stores.inventory,
        keys: settings.keys.clone().map_or_else(
            || Keys::Missing("this service holds no keys".into()),
            Keys::Provider,
        ),
        controller: executor.as_ref().map_or_else(
            || {
                Controller::Absent(
                    "this service runs no controller (started with --no-controller)".into(),
                )
            },
            |e| Controller::Running(Arc::clone(e)),
        ),
        denied: settings.denied.clone(),
    };
    let app = Arc::new(App {
        store: stores.store,
        grounds,
        wall: crate::backend::WallTime::system(Arc::clone(&clock)),
        clock,
        keys: settings.keys.clone(),
        ca_pem: settings.ca_certificate_pem.clone(),
        denied: settings.denied.clone(),
        signer: Signer::generate().map_err(|e| ServeError::Random(e.to_string()))?,
        stats: Mutex::new(metrics::Snapshot::default()),
        stopping: AtomicBool::new(false),
        awaiting_entry,
    });
    let (stop, stopped) = watch::channel(false);
    let router = api::router(Arc::clone(&app));
    let passes = executor.map(|executor| {
        tokio::spawn(controller::run(
            Arc::clone(&app),
            executor,
            settings.passes.clone(),
            stopped.clone(),
        ))
    });
    let accept_app = Arc::clone(&app);
    let done = tokio::spawn(async move {
        accept_loop(accept_app, listener, acceptor, router, stopped).await;
        if let Some(passes) = passes {
            let _ = passes.await;
        }
    });
    Ok(Running { addr, stop, done })
}

/// Resolves once the stop flag turns `true` (or its sender is gone).
pub(crate) async fn until_stopped(stopped: &mut watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

async fn accept_loop(
    app: Arc<App>,
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    router: Router,
    mut stopped: watch::Receiver<bool>,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = until_stopped(&mut stopped) => break,
        };
        let Ok((tcp, _)) = accepted else { continue };
        let acceptor = acceptor.clone();
        let router = router.clone();
        let app = Arc::clone(&app);
        let mut conn_stopped = stopped.clone();
        connections.spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let peer = tls::peer_principal(
                &app.ca_pem,
                tls.get_ref().1.peer_certificates(),
                app.wall.system_time(),
            );
            let service = TowerToHyperService::new(router.layer(axum::Extension(api::Peer(peer))));
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tls), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                () = until_stopped(&mut conn_stopped) => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), conn).await;
                }
            }
        });
        while connections.try_join_next().is_some() {}
    }
    app.stopping.store(true, Ordering::SeqCst);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while connections.join_next().await.is_some() {}
    })
    .await;
}

/// `GET /metrics`: the Prometheus text exposition, from the store's present state and
/// the service's own counters. It holds no secret and needs no principal.
async fn metrics_route(
    axum::extract::State(app): axum::extract::State<Arc<App>>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match metrics_snapshot(&app).await {
        Ok(snapshot) => (
            [(
                axum::http::header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            metrics::render(&snapshot),
        )
            .into_response(),
        Err(e) => (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            format!("the store could not be read: {e}\n"),
        )
            .into_response(),
    }
}

async fn metrics_snapshot(app: &App) -> StoreResult<metrics::Snapshot> {
    let machines = app.timed(app.store.machines()).await?;
    let plans = app.timed(app.store.plans()).await?;
    let mut snapshot = app.stats.lock().await.clone();
    snapshot.operations_by_state.clear();
    snapshot.plans_by_state.clear();
    snapshot.recovery_scopes_by_state.clear();
    for m in &machines {
        for op in app.timed(app.store.operations_of(&m.id)).await? {
            *snapshot
                .operations_by_state
                .entry(op.state.to_string())
                .or_default() += 1;
        }
        *snapshot
            .recovery_scopes_by_state
            .entry(m.scope.to_string())
            .or_default() += 1;
    }
    for p in &plans {
        *snapshot
            .plans_by_state
            .entry(p.state.to_string())
            .or_default() += 1;
    }
    snapshot.drift_records_open = machines.iter().filter(|m| m.open_drift.is_some()).count() as u64;
    snapshot.frozen_machines = machines.iter().filter(|m| m.frozen).count() as u64;
    snapshot.recovery_mode = machines.iter().any(|m| m.scope != ScopeState::Normal);
    Ok(snapshot)
}

/// Counts every answer by status, for `infra_talos_http_requests_total`.
async fn count_status(
    axum::extract::State(app): axum::extract::State<Arc<App>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let response = next.run(request).await;
    *app.stats
        .lock()
        .await
        .http_requests_by_status
        .entry(response.status().as_u16())
        .or_default() += 1;
    response
}
