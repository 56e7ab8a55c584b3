//! Watching for drift: a plan at each interval, a line per resource and field that
//! drifted from the declaration, and, only when asked, an apply that repairs it.
//!
//! [`watch`] runs rounds on an injected [`Clock`] until its stop signal fires; the
//! signal is looked at between rounds only, so a round is never cut in half. A backend
//! that cannot be reached is reported as unreachable, never as drift: a plan that could
//! not look at a resource concludes nothing about it.
//!
//! # Guarantees
//! - Without [`WatchOptions::apply`], a round makes no backend write and changes no
//!   record.
//! - With it, a round applies only a plan that is complete and has changes, through the
//!   same gates as `apply` (the brake, `prevent_destroy`).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::{Clock, Engine, Fleet, NotAttemptedReason, Options, PlanReport};

/// How a watch runs.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WatchOptions {
    /// Time between the start of one round and the next.
    pub every: Duration,
    /// Repair drift by applying each complete plan that has changes.
    pub apply: bool,
    /// Stop after this many rounds (`None`: until stopped).
    pub rounds: Option<u64>,
}

impl WatchOptions {
    /// Rounds `every` apart, never applying, until stopped.
    pub fn every(every: Duration) -> Self {
        WatchOptions {
            every,
            apply: false,
            rounds: None,
        }
    }

    /// Whether to apply each complete plan that has changes.
    #[must_use]
    pub fn apply(mut self, apply: bool) -> Self {
        self.apply = apply;
        self
    }

    /// Stop after `rounds` rounds.
    #[must_use]
    pub fn rounds(mut self, rounds: Option<u64>) -> Self {
        self.rounds = rounds;
        self
    }
}

/// What one round saw and did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Round {
    /// Its number, from 1.
    pub number: u64,
    /// One line per drifted resource and field, per unreachable resource, per failure;
    /// and, when the round applied, one for the outcome.
    pub lines: Vec<String>,
    /// Resources that drifted.
    pub drifted: u64,
    /// Resources that could not be looked at.
    pub unreachable: u64,
    /// Whether the round applied (and, if so, whether everything converged).
    pub applied: Option<bool>,
}

/// Counts over every round so far, as Prometheus exposes them.
#[derive(Debug, Default)]
pub struct Counters {
    rounds: AtomicU64,
    drifted: AtomicU64,
    unreachable: AtomicU64,
    applies: AtomicU64,
    failed_rounds: AtomicU64,
}

impl Counters {
    fn add(&self, round: &Round) {
        self.rounds.fetch_add(1, Ordering::Relaxed);
        self.drifted.fetch_add(round.drifted, Ordering::Relaxed);
        self.unreachable
            .fetch_add(round.unreachable, Ordering::Relaxed);
        if round.applied.is_some() {
            self.applies.fetch_add(1, Ordering::Relaxed);
        }
        if round.applied == Some(false) {
            self.failed_rounds.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The counts in Prometheus's text format.
    pub fn render(&self, fleet: &str) -> String {
        let mut out = String::new();
        for (name, help, value) in [
            ("infra_watch_rounds_total", "Rounds planned.", &self.rounds),
            (
                "infra_watch_drifted_resources_total",
                "Drifted resources seen, summed over rounds.",
                &self.drifted,
            ),
            (
                "infra_watch_unreachable_resources_total",
                "Resources that could not be looked at, summed over rounds.",
                &self.unreachable,
            ),
            (
                "infra_watch_applies_total",
                "Rounds that applied.",
                &self.applies,
            ),
            (
                "infra_watch_failed_applies_total",
                "Rounds whose apply did not converge.",
                &self.failed_rounds,
            ),
        ] {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} counter\n{name}{{fleet=\"{fleet}\"}} {}\n",
                value.load(Ordering::Relaxed)
            ));
        }
        out
    }
}

/// Runs rounds `options.every` apart on `clock` until `stop` fires (looked at between
/// rounds only) or `options.rounds` have run, handing each to `on_round`.
pub async fn watch(
    engine: &Engine,
    fleet: &Fleet,
    options: &WatchOptions,
    clock: &dyn Clock,
    counters: &Counters,
    stop: impl Future<Output = ()>,
    mut on_round: impl FnMut(&Round),
) {
    let mut stop = std::pin::pin!(stop);
    let mut number = 0;
    loop {
        number += 1;
        let started = clock.now();
        let round = round(engine, fleet, options.apply, number).await;
        counters.add(&round);
        on_round(&round);
        if options.rounds.is_some_and(|n| number >= n) {
            return;
        }
        let rest = options.every.saturating_sub(clock.now() - started);
        tokio::select! {
            biased;
            () = &mut stop => return,
            () = clock.sleep(rest) => {}
        }
    }
}

/// One round: a plan, its drift, and an apply when asked and warranted.
async fn round(engine: &Engine, fleet: &Fleet, apply: bool, number: u64) -> Round {
    let mut round = Round {
        number,
        lines: Vec::new(),
        drifted: 0,
        unreachable: 0,
        applied: None,
    };
    let proposal = match engine.propose(&fleet.plan(), &Options::default()).await {
        Ok(p) => p,
        Err(e) => {
            // A refusal before anything is looked at (records of an unreachable
            // provider, the wrong account): nothing is known of any resource.
            round.unreachable = fleet.len() as u64;
            round.lines.push(format!("unreachable: {e}"));
            return round;
        }
    };
    describe(proposal.report(), &mut round);
    let report = proposal.report();
    if apply && report.is_complete() && report.has_changes() {
        let converged = match engine.carry_out(&proposal).await {
            Ok(outcome) => {
                let r = &outcome.result;
                round.lines.push(format!(
                    "applied: {} created, {} updated, {} replaced, {} pruned, {} not attempted, {} failed",
                    r.applied.iter().filter(|a| a.change == crate::Change::Created).count(),
                    r.applied.iter().filter(|a| a.change == crate::Change::Updated).count(),
                    r.applied.iter().filter(|a| a.change == crate::Change::Replaced).count(),
                    r.pruned.len(),
                    r.not_attempted.len(),
                    r.failed.len(),
                ));
                outcome.is_success()
            }
            Err(e) => {
                round.lines.push(format!("apply refused: {e}"));
                false
            }
        };
        round.applied = Some(converged);
    }
    round
}

/// The lines of one plan: drift per field, unreachable and failing resources.
fn describe(report: &PlanReport, round: &mut Round) {
    for c in &report.changes {
        let r = &c.resource;
        match c.action {
            "update" | "replace" => {
                round.drifted += 1;
                for f in &c.fields {
                    if f.sensitive {
                        round
                            .lines
                            .push(format!("drift: {r} {}: (sensitive)", f.field));
                    } else {
                        round.lines.push(format!(
                            "drift: {r} {}: {} → {}",
                            f.field, f.before, f.after
                        ));
                    }
                }
                if c.fields.is_empty() {
                    let why = c.detail.as_deref().unwrap_or("it must be replaced");
                    round.lines.push(format!("drift: {r}: {why}"));
                }
            }
            "create" => {
                round.drifted += 1;
                round.lines.push(format!("drift: {r}: missing"));
            }
            "delete" | "prune" => {
                round.drifted += 1;
                round
                    .lines
                    .push(format!("drift: {r}: present, but no longer declared"));
            }
            "not-attempted" if !c.reason.is_some_and(NotAttemptedReason::is_deliberate) => {
                round.unreachable += 1;
                let why = c.detail.as_deref().unwrap_or("not looked at");
                round.lines.push(format!("unreachable: {r}: {why}"));
            }
            "failed" => {
                round.unreachable += 1;
                let why = c.detail.as_deref().unwrap_or("failed");
                round.lines.push(format!("failed: {r}: {why}"));
            }
            _ => {}
        }
    }
}
