//! The recovery start (§7.2, `serve --recovery-start`): the service started on a
//! restored store before recovery mode is entered. Until recovery-admin's entry
//! commits, the store's epoch is still the restored one, so an approval, a takeover
//! or a revocation the restore rewound would still count: the service therefore
//! keeps every dispatch gate shut — its controller takes nothing over, runs no plan
//! and no pass — and answers liveness (`/healthz`, `/readyz`), `whoami` (which the
//! command line asks before any act) and the entry itself
//! (`POST /api/v1/recovery/enter`), nothing else.
//!
//! The entry is seen by the epoch moving away from the one the service started in,
//! whichever road made it (this service's API, or `recovery enter` on the database).
//! From then on the service behaves as any start in recovery mode: the recovery
//! status and acts, the acts §7.5 always allows, and the recovery pass on its timer.
//! Nothing in the service enters recovery mode by itself: the option only keeps the
//! gates shut.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::App;
use super::api::Problem;
use crate::contract::epoch::Epoch;
use crate::store::StoreResult;

/// The paths answered before the entry commits.
const ANSWERED: [&str; 4] = [
    "/healthz",
    "/readyz",
    "/api/v1/whoami",
    "/api/v1/recovery/enter",
];

/// A service started for recovery, until the entry commits.
pub(crate) struct AwaitingEntry {
    /// The restored store's epoch, at the service's start.
    restored: Epoch,
    /// Set once the epoch has been seen to move: the entry committed.
    entered: AtomicBool,
}

impl AwaitingEntry {
    /// Waiting for an entry out of the store's `restored` epoch.
    pub(crate) fn new(restored: Epoch) -> AwaitingEntry {
        AwaitingEntry {
            restored,
            entered: AtomicBool::new(false),
        }
    }
}

impl App {
    /// Whether this service was started for recovery and recovery-admin's entry has
    /// not committed yet.
    pub(crate) async fn awaiting_entry(&self) -> StoreResult<bool> {
        let Some(awaiting) = &self.awaiting_entry else {
            return Ok(false);
        };
        if awaiting.entered.load(Ordering::SeqCst) {
            return Ok(false);
        }
        let epoch = self.timed(self.store.current_epoch()).await?;
        if epoch == awaiting.restored {
            return Ok(true);
        }
        awaiting.entered.store(true, Ordering::SeqCst);
        tracing::info!(epoch = %epoch, "recovery mode entered: the recovery start now serves the recovery acts");
        Ok(false)
    }
}

/// Refuses every request but liveness, `whoami` and the entry while the recovery
/// start awaits the entry.
pub(crate) async fn gate(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    if ANSWERED.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    match app.awaiting_entry().await {
        Ok(false) => next.run(request).await,
        Ok(true) => Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "this service was started for recovery (--recovery-start): until recovery-admin \
             enters recovery mode (POST /api/v1/recovery/enter, or `infra-talos recovery \
             enter`) it answers liveness and the entry only",
        )
        .into_response(),
        Err(e) => Problem::from(e).into_response(),
    }
}
