//! The service's controller loop: at start, the takeovers of §3.4 (never on a
//! timer); then, every interval, each approved plan is run once, and on its own
//! interval — never at start — the drift pass observes every machine with an
//! Applied release. In recovery mode neither runs: every interval the restored
//! operations whose scopes recovery-admin has accounted are classified (§7.3 step
//! 5), then the recovery pass takes the recovery and restoration reads that have
//! fallen due (§11.20), both sending nothing. A plan refused is not run again until
//! its machine's timeline moves, so a standing refusal is recorded once, not once
//! per interval.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::App;
use crate::contract::plan::PlanState;
use crate::controller::{Executor, ExecutorError, RecoveryAction};
use crate::store::StoreError;

/// The controller's timers.
#[derive(Debug, Clone)]
pub struct PassSettings {
    /// How often approved plans are looked for and run (in recovery mode: how often
    /// the recovery pass looks for the reads that have fallen due).
    pub every: Duration,
    /// How often the drift pass observes the machines; the first pass comes one
    /// interval after start, never at start.
    pub drift_every: Duration,
}

/// Runs the loop until `stopped` turns `true`, between plans.
pub(crate) async fn run(
    app: Arc<App>,
    executor: Arc<Executor>,
    settings: PassSettings,
    mut stopped: watch::Receiver<bool>,
) {
    // A recovery start takes nothing over (§7.2); nor does a start in recovery mode.
    if matches!(app.awaiting_entry().await, Ok(false))
        && matches!(app.in_recovery().await, Ok(false))
        && let Err(e) = executor.start().await
    {
        tracing::warn!(error = %e, "takeover at start failed");
    }
    let mut refused: BTreeMap<String, usize> = BTreeMap::new();
    // The drift pass runs on its timer only, never at start (§11.19).
    let mut next_drift = app.clock.now() + settings.drift_every;
    loop {
        let ok = match gates(&app).await {
            Ok(Gates::Shut) => true,
            Ok(Gates::Recovery) => {
                // The classification first, so that the restoration read the mark
                // needs can follow in the same interval.
                let classified = classify(&executor).await;
                recovery(&executor).await && classified
            }
            Ok(Gates::Normal) => {
                let plans_ok = plans(&app, &executor, &mut refused, &stopped).await;
                let drift_ok = if app.clock.now() >= next_drift && !*stopped.borrow() {
                    next_drift = app.clock.now() + settings.drift_every;
                    drift(&app, &executor).await
                } else {
                    true
                };
                plans_ok && drift_ok
            }
            Err(e) => {
                tracing::warn!(error = %e, "controller pass: the store could not be read");
                false
            }
        };
        {
            let mut stats = app.stats.lock().await;
            stats.controller_passes_total += 1;
            if !ok {
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

/// What the loop may do this interval.
enum Gates {
    /// Nothing: a recovery start whose entry has not committed (§7.2).
    Shut,
    /// The recovery pass only: recovery mode is in effect.
    Recovery,
    /// The approved plans, and the drift pass when due.
    Normal,
}

async fn gates(app: &App) -> crate::store::StoreResult<Gates> {
    Ok(if app.awaiting_entry().await? {
        Gates::Shut
    } else if app.in_recovery().await? {
        Gates::Recovery
    } else {
        Gates::Normal
    })
}

/// One pass over the approved plans; whether it went through.
async fn plans(
    app: &App,
    executor: &Executor,
    refused: &mut BTreeMap<String, usize>,
    stopped: &watch::Receiver<bool>,
) -> bool {
    match pass(app, executor, refused, stopped).await {
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
    }
}

/// The classification of restored operations (§7.3 step 5): each one with an
/// attempt whose scope recovery-admin's step 1 decision has accounted is classified
/// from a completion observation, sending nothing; whether it went through.
async fn classify(executor: &Executor) -> bool {
    match executor.classify_restored_operations().await {
        Ok(outcomes) => {
            for outcome in &outcomes {
                if outcome.classification.is_some() {
                    tracing::info!(
                        operation = %outcome.operation,
                        plan = %outcome.plan,
                        state = %outcome.state,
                        "restored operation classified"
                    );
                } else {
                    tracing::warn!(
                        operation = %outcome.operation,
                        plan = %outcome.plan,
                        "restored operation not classified: its machine was not reached"
                    );
                }
            }
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "classifying restored operations failed");
            false
        }
    }
}

/// The recovery pass (§11.20): the recovery and restoration reads that are due,
/// sending nothing and deciding nothing; whether it went through.
async fn recovery(executor: &Executor) -> bool {
    match executor.recovery_pass().await {
        Ok(pass) => {
            for step in &pass.steps {
                match &step.action {
                    RecoveryAction::RecoveryObserved { basis }
                    | RecoveryAction::RestorationObserved { basis } => {
                        tracing::info!(machine = %step.machine, scope = %step.scope, basis = basis.0, "recovery read recorded");
                    }
                    RecoveryAction::Unreachable { reason } => {
                        tracing::warn!(machine = %step.machine, scope = %step.scope, %reason, "recovery read: machine not read");
                    }
                    RecoveryAction::NotDue { .. } | RecoveryAction::Waits => {}
                }
            }
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "recovery pass failed");
            false
        }
    }
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
