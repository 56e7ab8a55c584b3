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
//!   same gates as `apply` (the brake, `prevent_destroy`, the account check). The
//!   fleet's records lock is taken for that apply alone, and the plan is made again
//!   under it, so that no other run's change since the round's look is overwritten;
//!   between applies the lock is free for other runs. A lock held by another run
//!   skips the round's apply (it is said), and the next round tries again.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::engine::lock_fleet;
use crate::{ApplyError, Clock, Engine, Fleet, NotAttemptedReason, Options, PlanReport};

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
    /// How long an apply waits for the fleet's records lock when another run holds
    /// it before the round's apply is skipped (zero: not at all).
    pub lock_timeout: Duration,
}

impl WatchOptions {
    /// Rounds `every` apart, never applying, until stopped.
    pub fn every(every: Duration) -> Self {
        WatchOptions {
            every,
            apply: false,
            rounds: None,
            lock_timeout: Duration::ZERO,
        }
    }

    /// How long an apply waits for the fleet's records lock.
    #[must_use]
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
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
    /// How many of the fleet's resources were in each state when the round looked:
    /// `in_sync`, `drifted`, `not_observable` (not looked at, or failing) and
    /// `skipped` (left out on purpose: `--target`, the exclusion list). Empty when the
    /// round could not look at all.
    pub states: BTreeMap<&'static str, u64>,
}

impl Round {
    /// Whether the round looked at every resource it was to look at.
    pub fn observed_everything(&self) -> bool {
        self.unreachable == 0 && !self.states.is_empty()
    }
}

/// Counts over every round so far, and the last round's gauges, as Prometheus exposes
/// them.
#[derive(Debug, Default)]
pub struct Counters {
    rounds: AtomicU64,
    drifted: AtomicU64,
    unreachable: AtomicU64,
    applies: AtomicU64,
    failed_rounds: AtomicU64,
    last: Mutex<Last>,
    /// The engine's concurrency windows, exposed with the counts when given.
    concurrency: Option<std::sync::Arc<crate::sdk::adaptive::Concurrency>>,
}

/// What the last rounds left for the gauges.
#[derive(Debug, Default)]
struct Last {
    states: BTreeMap<&'static str, u64>,
    /// The clock's reading when a round last looked at every resource.
    observed_everything_at: Option<Duration>,
}

/// The states a round counts resources in, each always exposed.
#[cfg(feature = "metrics")]
const STATES: [&str; 4] = ["in_sync", "drifted", "not_observable", "skipped"];

impl Counters {
    /// The same counts, exposing beside them each window of `concurrency` (the
    /// engine's, [`Engine::concurrency`](crate::Engine::concurrency)): the calls in
    /// flight it allows now, and the throttles it has seen.
    #[must_use]
    pub fn with_concurrency(
        mut self,
        concurrency: std::sync::Arc<crate::sdk::adaptive::Concurrency>,
    ) -> Self {
        self.concurrency = Some(concurrency);
        self
    }

    fn add(&self, round: &Round, at: Duration) {
        {
            let mut last = self
                .last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            last.states = round.states.clone();
            if round.observed_everything() {
                last.observed_everything_at = Some(at);
            }
        }
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

    /// The counts in Prometheus's text format (version 0.0.4), as
    /// [`prometheus_client`] encodes them, each sample labelled with the fleet.
    /// `wall_at_origin` is the wall-clock time (seconds since the Unix epoch) at the
    /// watch clock's origin, to turn its readings into timestamps. Feature `metrics`.
    ///
    /// The names are kept from release to release (dashboards and alerts name them):
    /// the counters `infra_watch_rounds_total`, `infra_watch_drifted_resources_total`,
    /// `infra_watch_unreachable_resources_total`, `infra_watch_applies_total`,
    /// `infra_watch_failed_applies_total`; the gauges `infra_watch_resources` (by
    /// `state`) and `infra_watch_last_successful_observation_timestamp_seconds`; and,
    /// with [`Counters::with_concurrency`], by `provider`, `region` and `api`, the gauge
    /// `infra_concurrency_limit` (calls in flight allowed now) and the counter
    /// `infra_throttled_calls_total`.
    #[cfg(feature = "metrics")]
    pub fn render(&self, fleet: &str, wall_at_origin: f64) -> String {
        exposition::render(self.snapshot(wall_at_origin), fleet)
    }

    /// The values to expose, read once.
    #[cfg(feature = "metrics")]
    fn snapshot(&self, wall_at_origin: f64) -> exposition::Snapshot {
        let last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        exposition::Snapshot {
            rounds: self.rounds.load(Ordering::Relaxed),
            drifted: self.drifted.load(Ordering::Relaxed),
            unreachable: self.unreachable.load(Ordering::Relaxed),
            applies: self.applies.load(Ordering::Relaxed),
            failed_applies: self.failed_rounds.load(Ordering::Relaxed),
            states: STATES.map(|state| (state, last.states.get(state).copied().unwrap_or(0))),
            observed_everything_at: last
                .observed_everything_at
                .map_or(0.0, |at| wall_at_origin + at.as_secs_f64()),
            windows: self
                .concurrency
                .as_ref()
                .map(|c| c.windows())
                .unwrap_or_default(),
        }
    }
}

/// The counts as Prometheus exposes them, encoded by `prometheus-client`.
#[cfg(feature = "metrics")]
mod exposition {
    use std::borrow::Cow;

    use prometheus_client::collector::Collector;
    use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
    use prometheus_client::metrics::counter::ConstCounter;
    use prometheus_client::metrics::gauge::ConstGauge;
    use prometheus_client::registry::Registry;

    use super::STATES;

    /// The values of one scrape.
    #[derive(Debug)]
    pub(super) struct Snapshot {
        pub(super) rounds: u64,
        pub(super) drifted: u64,
        pub(super) unreachable: u64,
        pub(super) applies: u64,
        pub(super) failed_applies: u64,
        pub(super) states: [(&'static str, u64); STATES.len()],
        /// Seconds since the Unix epoch (0: not yet).
        pub(super) observed_everything_at: f64,
        /// The engine's concurrency windows.
        pub(super) windows: Vec<crate::sdk::adaptive::WindowState>,
    }

    /// The counters, by the name they are registered under: the encoder adds `_total`.
    const COUNTERS: [(&str, &str); 5] = [
        ("infra_watch_rounds", "Rounds planned."),
        (
            "infra_watch_drifted_resources",
            "Drifted resources seen, summed over rounds.",
        ),
        (
            "infra_watch_unreachable_resources",
            "Resources that could not be looked at, summed over rounds.",
        ),
        ("infra_watch_applies", "Rounds that applied."),
        (
            "infra_watch_failed_applies",
            "Rounds whose apply did not converge.",
        ),
    ];

    impl Collector for Snapshot {
        fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            let counts = [
                self.rounds,
                self.drifted,
                self.unreachable,
                self.applies,
                self.failed_applies,
            ];
            for ((name, help), value) in COUNTERS.into_iter().zip(counts) {
                let counter = ConstCounter::new(value);
                counter.encode(encoder.encode_descriptor(
                    name,
                    help,
                    None,
                    counter.metric_type(),
                )?)?;
            }
            let by_state = ConstGauge::new(0u64).metric_type();
            let mut family = encoder.encode_descriptor(
                "infra_watch_resources",
                "Resources by state, as the last round saw them.",
                None,
                by_state,
            )?;
            for (state, n) in self.states {
                let labels = [("state", state)];
                ConstGauge::new(n).encode(family.encode_family(&labels)?)?;
            }
            let at = ConstGauge::new(self.observed_everything_at);
            at.encode(encoder.encode_descriptor(
                "infra_watch_last_successful_observation_timestamp_seconds",
                "When a round last looked at every resource (0: not yet).",
                None,
                at.metric_type(),
            )?)?;
            self.encode_windows(encoder)
        }
    }

    impl Snapshot {
        /// Each concurrency window: the calls in flight it allows, the throttles seen.
        fn encode_windows(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            if self.windows.is_empty() {
                return Ok(());
            }
            let labels = |w: &crate::sdk::adaptive::WindowState| {
                [
                    ("provider", w.key.provider.to_owned()),
                    ("region", w.key.region.clone()),
                    ("api", w.key.api.to_owned()),
                ]
            };
            let mut family = encoder.encode_descriptor(
                "infra_concurrency_limit",
                "Calls in flight allowed now, per provider, region and API (halved on a throttle, grown back by answers, at most --parallelism).",
                None,
                ConstGauge::new(0u64).metric_type(),
            )?;
            for w in &self.windows {
                ConstGauge::new(w.limit as u64).encode(family.encode_family(&labels(w))?)?;
            }
            let mut family = encoder.encode_descriptor(
                "infra_throttled_calls",
                "Calls answered with a throttle (or retried after one), per provider, region and API.",
                None,
                ConstCounter::new(0u64).metric_type(),
            )?;
            for w in &self.windows {
                ConstCounter::new(w.throttled).encode(family.encode_family(&labels(w))?)?;
            }
            Ok(())
        }
    }

    /// `snapshot` in Prometheus's text format, every sample labelled `fleet`.
    pub(super) fn render(snapshot: Snapshot, fleet: &str) -> String {
        let mut registry = Registry::with_labels(
            [(Cow::Borrowed("fleet"), Cow::Owned(fleet.to_owned()))].into_iter(),
        );
        registry.register_collector(Box::new(snapshot));
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)
            .expect("writing to a String cannot fail");
        out
    }
}

/// Runs rounds `options.every` apart on `clock` until `stop` fires (looked at between
/// rounds only) or `options.rounds` have run, handing each to `on_round`, and answers
/// the last round. A fleet whose own records cannot be read (a malformed file, a
/// database that refuses) ends the watch with that error: no later round would see
/// more, and it is not a cloud being out of reach.
pub async fn watch(
    engine: &Engine,
    fleet: &Fleet,
    options: &WatchOptions,
    clock: &dyn Clock,
    counters: &Counters,
    stop: impl Future<Output = ()>,
    mut on_round: impl FnMut(&Round),
) -> Result<Round, ApplyError> {
    let mut stop = std::pin::pin!(stop);
    let mut number = 0;
    loop {
        number += 1;
        let started = clock.now();
        let round = round(engine, fleet, options, number).await?;
        counters.add(&round, clock.now());
        on_round(&round);
        if options.rounds.is_some_and(|n| number >= n) {
            return Ok(round);
        }
        let rest = options.every.saturating_sub(clock.now() - started);
        tokio::select! {
            biased;
            () = &mut stop => return Ok(round),
            () = clock.sleep(rest) => {}
        }
    }
}

/// One round: a plan, its drift, and an apply when asked and warranted.
async fn round(
    engine: &Engine,
    fleet: &Fleet,
    options: &WatchOptions,
    number: u64,
) -> Result<Round, ApplyError> {
    let mut round = Round {
        number,
        lines: Vec::new(),
        drifted: 0,
        unreachable: 0,
        applied: None,
        states: BTreeMap::new(),
    };
    let proposal = match engine.propose(&fleet.plan(), &Options::default()).await {
        Ok(p) => p,
        Err(e @ ApplyError::Records(_)) => return Err(e),
        Err(e) => {
            // A refusal before anything is looked at (records of an unreachable
            // provider, the wrong account): nothing is known of any resource.
            round.unreachable = fleet.len() as u64;
            round.lines.push(format!("unreachable: {e}"));
            return Ok(round);
        }
    };
    describe(proposal.report(), &mut round);
    let report = proposal.report();
    if options.apply && report.is_complete() && report.has_changes() {
        round.applied = apply_locked(engine, fleet, options, &mut round.lines).await;
    }
    Ok(round)
}

/// The round's apply: under the fleet's records lock, held for it alone, of a plan made
/// again under that lock. `None` when nothing was applied after all (the lock was
/// another run's, or the fresh plan has nothing to change); otherwise whether
/// everything converged.
async fn apply_locked(
    engine: &Engine,
    fleet: &Fleet,
    options: &WatchOptions,
    lines: &mut Vec<String>,
) -> Option<bool> {
    let _lock = match lock_fleet(
        &**engine.store(),
        fleet.name(),
        "watch --apply",
        options.lock_timeout,
    )
    .await
    {
        Ok(guard) => guard,
        Err(e) => {
            lines.push(format!("apply skipped this round: {e}"));
            return None;
        }
    };
    let proposal = match engine.propose(&fleet.plan(), &Options::default()).await {
        Ok(p) => p,
        Err(e) => {
            lines.push(format!("apply refused: {e}"));
            return Some(false);
        }
    };
    let report = proposal.report();
    if !report.is_complete() {
        lines.push(
            "apply skipped this round: the plan made under the lock could not look at everything"
                .to_owned(),
        );
        return Some(false);
    }
    if !report.has_changes() {
        lines.push("apply skipped this round: nothing is left to change".to_owned());
        return None;
    }
    Some(match engine.carry_out(&proposal).await {
        Ok(outcome) => {
            let r = &outcome.result;
            let count = |change| r.applied.iter().filter(|a| a.change == change).count();
            lines.push(format!(
                "applied: {} created, {} updated, {} replaced, {} pruned, {} not attempted, {} failed",
                count(crate::Change::Created),
                count(crate::Change::Updated),
                count(crate::Change::Replaced),
                r.pruned.len(),
                r.not_attempted.len(),
                r.failed.len(),
            ));
            outcome.is_success()
        }
        Err(e) => {
            lines.push(format!("apply refused: {e}"));
            false
        }
    })
}

/// The lines of one plan: drift per field, unreachable and failing resources.
fn describe(report: &PlanReport, round: &mut Round) {
    for c in &report.changes {
        let state = match c.action {
            "unchanged" => "in_sync",
            "not-attempted" if c.reason.is_some_and(NotAttemptedReason::is_deliberate) => "skipped",
            _ if c.is_blind() => "not_observable",
            _ => "drifted",
        };
        *round.states.entry(state).or_default() += 1;
        let r = &c.resource;
        match (state, c.action) {
            ("drifted", "update" | "replace") => {
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
            ("drifted", "create") => round.lines.push(format!("drift: {r}: missing")),
            ("drifted", _) => round
                .lines
                .push(format!("drift: {r}: present, but no longer declared")),
            ("not_observable", "failed") => {
                let why = c.detail.as_deref().unwrap_or("failed");
                round.lines.push(format!("failed: {r}: {why}"));
            }
            ("not_observable", _) => {
                let why = c.detail.as_deref().unwrap_or("not looked at");
                round.lines.push(format!("unreachable: {r}: {why}"));
            }
            _ => {}
        }
    }
    let count = |state| round.states.get(state).copied().unwrap_or(0);
    round.drifted = count("drifted");
    round.unreachable = count("not_observable");
}
