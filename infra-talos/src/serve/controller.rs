//! The service's controller loop: at start, the takeovers of §3.4 (never on a
//! timer); then, every interval, each approved plan is run once, and on its own
//! interval the drift pass observes every machine with an Applied release. Nothing
//! runs in recovery mode. A plan refused is not run again until its machine's
//! timeline moves, so a standing refusal is recorded once, not once per interval.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::App;
use crate::contract::plan::PlanState;
use crate::controller::{Executor, ExecutorError};
use crate::store::StoreError;

/// The controller's timers.
#[derive(Debug, Clone)]
pub struct PassSettings {
    /// How often approved plans are looked for and run.
    pub every: Duration,
    /// How often the drift pass observes the machines.
    pub drift_every: Duration,
}

/// Runs the loop until `stopped` turns `true`, between plans.
pub(crate) async fn run(
    app: Arc<App>,
    executor: Arc<Executor>,
    settings: PassSettings,
    mut stopped: watch::Receiver<bool>,
) {
    if !matches!(app.in_recovery().await, Ok(true))
        && let Err(e) = executor.start().await
    {
        tracing::warn!(error = %e, "takeover at start failed");
    }
    let mut refused: BTreeMap<String, usize> = BTreeMap::new();
    let mut next_drift = app.clock.now();
    loop {
        let ok = match pass(&app, &executor, &mut refused, &stopped).await {
            Ok(ran) => {
                if ran > 0 {
                    tracing::info!(plans = ran, "controller pass");
                }
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "controller pass failed");
                false
            }
        };
        let drift_ok = if app.clock.now() >= next_drift && !*stopped.borrow() {
            next_drift = app.clock.now() + settings.drift_every;
            drift(&app, &executor).await
        } else {
            true
        };
        {
            let mut stats = app.stats.lock().await;
            stats.controller_passes_total += 1;
            if !(ok && drift_ok) {
                stats.controller_pass_failures_total += 1;
            }
            stats.last_pass_unix_seconds = Some(app.wall.now().0 as f64 / 1000.0);
        }
        tokio::select! {
            () = app.clock.sleep(settings.every) => {}
            () = super::until_stopped(&mut stopped) => break,
        }
        if *stopped.borrow() {
            break;
        }
    }
    tracing::info!("controller stopped");
}

/// One pass over the approved plans; how many were run.
async fn pass(
    app: &App,
    executor: &Executor,
    refused: &mut BTreeMap<String, usize>,
    stopped: &watch::Receiver<bool>,
) -> Result<usize, ExecutorError> {
    if app.in_recovery().await? {
        return Ok(0);
    }
    let mut ran = 0;
    for plan in app.timed(app.store.plans()).await? {
        if *stopped.borrow() {
            break;
        }
        if plan.state != PlanState::Approved {
            continue;
        }
        let head = app.timed(app.store.timeline(&plan.machine)).await?.len();
        if refused.get(&plan.id) == Some(&head) {
            continue;
        }
        ran += 1;
        match executor.run_plan(&plan.id).await {
            Ok(outcome) => {
                let mut stats = app.stats.lock().await;
                stats.attempts_total += u64::from(outcome.sends);
                if let Some(c) = outcome.refusal.as_ref().and_then(StoreError::comparison) {
                    *stats
                        .refusals_by_comparison
                        .entry(c.to_string())
                        .or_default() += 1;
                }
                tracing::info!(
                    plan = %plan.id,
                    machine = %plan.machine,
                    state = %outcome.state,
                    sends = outcome.sends,
                    "plan run"
                );
            }
            Err(e) => {
                if let ExecutorError::Store(s) = &e
                    && let Some(c) = s.comparison()
                {
                    {
                        let mut stats = app.stats.lock().await;
                        *stats
                            .refusals_by_comparison
                            .entry(c.to_string())
                            .or_default() += 1;
                    }
                }
                let head = app.timed(app.store.timeline(&plan.machine)).await?.len();
                refused.insert(plan.id.clone(), head);
                tracing::warn!(plan = %plan.id, machine = %plan.machine, error = %e, "plan not run");
            }
        }
    }
    Ok(ran)
}

/// The drift pass; whether it ran.
async fn drift(app: &App, executor: &Executor) -> bool {
    match app.in_recovery().await {
        Ok(false) => {}
        Ok(true) => return true,
        Err(e) => {
            tracing::warn!(error = %e, "drift pass: the store could not be read");
            return false;
        }
    }
    match executor.drift_pass().await {
        Ok(pass) => {
            let drifted = pass.drifted();
            if !drifted.is_empty() {
                tracing::warn!(machines = ?drifted, "drift records open");
            }
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "drift pass failed");
            false
        }
    }
}
