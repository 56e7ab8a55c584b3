//! The backend conformance suite: one suite any provider author runs against their own
//! [`Backend`], gated on what the backend declares it can do.
//!
//! Every method of [`Backend`] documents its behaviour in a **Behavior** section; each
//! check here is a plain async function that pins one of those sentences (or one
//! assertion of the applier contract: disjoint buckets, legal reasons, nothing dropped,
//! owned-only prune, idempotence), named for what it pins. A run:
//!
//! - draws a fresh name prefix (`ct` and six letters or digits, then `-`) and names
//!   the fleet whose marker it writes from it, so that two runs never meet;
//! - runs the checks of the backend as a whole, then every check on every sample whose
//!   provider is the backend's, whose kind the backend declares and whose region parses
//!   for the provider;
//! - skips, **loudly**, what it cannot run: a kind with no sample, a sample without a
//!   `Mutable` or `Replace` variant, a check that needs a second region or fault hooks
//!   when none were given;
//! - cleans up at the end whatever it created, even after failures: every resource
//!   whose name carries the prefix, dependants first;
//! - returns a [`Report`]: one line per check per kind, `PASS`, `FAIL …` or
//!   `SKIP … (why)`. [`Report::assert_passed`] panics on any failure and, with `CI=true`
//!   in the environment, when every check was skipped.
//!
//! ```no_run
//! use std::sync::Arc;
//! use infra_testkit::conformance::{Conformance, samples};
//! # async fn run(backend: Arc<dyn infra_core::sdk::Backend>) {
//! let report = Conformance::new(backend, samples::builtin())
//!     .regions("eu-west-3", Some("us-east-1"))
//!     .run()
//!     .await;
//! report.assert_passed();
//! # }
//! ```
//!
//! The simulated cloud passes the whole suite; see `SimHooks` for its fault hooks.
//!
//! # Caveats
//! - The checks run one after another, each with resources of its own: against a real
//!   cloud a run is slow and creates (then deletes) several resources per kind.
//! - Two behaviours are not checked: that an `update` of a missing resource is
//!   `NotFound` (the suite holds no settled spec outside an apply), and that deleting
//!   a resource something depends on is `DependencyViolation` (what counts as a
//!   dependency is the cloud's own; the clean-up relies on it instead).

pub mod checks;
mod context;
mod hooks;
mod recording;
mod report;
mod sample;
pub mod samples;
pub mod staged;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use infra_core::{
    engine::{Clock, SystemClock},
    sdk::Backend,
};

pub use context::{Context, FOREIGN_FLEET, fresh_prefix, valid_prefix};
pub use hooks::{ConformanceHooks, SimHooks};
pub use recording::{CallLog, RecordedCall, RecordingBackend};
pub use report::{CheckOutcome, Report, Verdict};
pub use sample::{DeclareFn, KindSample, Variant};

use checks::{applier, backend, cleanup, lifecycle, listing, observation};

/// The line name of a skip that covers every check of a kind (or of the backend).
pub const EVERY_CHECK: &str = "every check";

/// A check of one kind.
type KindCheck =
    for<'a> fn(&'a Context, &'a KindSample) -> Pin<Box<dyn Future<Output = Verdict> + 'a>>;

/// The checks that run on every sample, with their names, in the order they run.
fn kind_checks() -> Vec<(&'static str, KindCheck)> {
    vec![
        ("prune_deletes_only_owned_orphans", |c, s| {
            Box::pin(applier::prune_deletes_only_owned_orphans(c, s))
        }),
        ("apply_is_idempotent", |c, s| {
            Box::pin(applier::apply_is_idempotent(c, s))
        }),
        ("observation_tells_present_from_absent", |c, s| {
            Box::pin(observation::observation_tells_present_from_absent(c, s))
        }),
        ("an_unreadable_resource_is_never_absent", |c, s| {
            Box::pin(observation::an_unreadable_resource_is_never_absent(c, s))
        }),
        ("a_denied_call_is_never_not_found", |c, s| {
            Box::pin(observation::a_denied_call_is_never_not_found(c, s))
        }),
        ("create_writes_the_marker", |c, s| {
            Box::pin(lifecycle::create_writes_the_marker(c, s))
        }),
        (
            "read_reports_the_marker_and_the_engine_strips_it",
            |c, s| {
                Box::pin(lifecycle::read_reports_the_marker_and_the_engine_strips_it(
                    c, s,
                ))
            },
        ),
        ("list_answers_only_its_region", |c, s| {
            Box::pin(lifecycle::list_answers_only_its_region(c, s))
        }),
        ("list_shows_resources_whatever_their_owner", |c, s| {
            Box::pin(lifecycle::list_shows_resources_whatever_their_owner(c, s))
        }),
        ("list_readings_equal_reads", |c, s| {
            Box::pin(listing::list_readings_equal_reads(c, s))
        }),
        ("read_after_create_eventually_sees_it", |c, s| {
            Box::pin(lifecycle::read_after_create_eventually_sees_it(c, s))
        }),
        ("delete_of_an_absent_resource_is_not_found", |c, s| {
            Box::pin(lifecycle::delete_of_an_absent_resource_is_not_found(c, s))
        }),
        ("update_changes_only_mutable_fields", |c, s| {
            Box::pin(lifecycle::update_changes_only_mutable_fields(c, s))
        }),
        ("a_forces_replace_change_is_a_replace", |c, s| {
            Box::pin(lifecycle::a_forces_replace_change_is_a_replace(c, s))
        }),
        ("reported_fields_round_trip_without_sentinels", |c, s| {
            Box::pin(lifecycle::reported_fields_round_trip_without_sentinels(
                c, s,
            ))
        }),
        ("a_taken_name_is_conflict", |c, s| {
            Box::pin(lifecycle::a_taken_name_is_conflict(c, s))
        }),
        ("mark_keeps_ours_and_refuses_anothers", |c, s| {
            Box::pin(lifecycle::mark_keeps_ours_and_refuses_anothers(c, s))
        }),
    ]
}

/// The names of the three checks judged on the shared apply scenario.
pub const SCENARIO_CHECKS: [&str; 3] = [
    "apply_result_buckets_are_disjoint",
    "apply_result_reasons_and_actions_are_legal",
    "apply_result_drops_nothing",
];

/// The name of the check that only runs on the `secrets` kind.
pub const SECRET_CHECK: &str = "a_secret_value_is_read_but_never_reported";

/// The names of every check that runs on each sample, in the order they run (the
/// secret check runs on `secrets` only).
pub fn kind_check_names() -> Vec<&'static str> {
    SCENARIO_CHECKS
        .iter()
        .copied()
        .chain(kind_checks().into_iter().map(|(name, _)| name))
        .chain([SECRET_CHECK])
        .collect()
}

/// One run of the suite against one backend: build it, then [`run`](Self::run) it.
#[derive(Clone)]
pub struct Conformance {
    backend: Arc<dyn Backend>,
    samples: Vec<KindSample>,
    region: Option<String>,
    second_region: Option<String>,
    clock: Arc<dyn Clock>,
    hooks: Option<Arc<dyn ConformanceHooks>>,
    prefix: Option<String>,
    patience: Duration,
}

impl std::fmt::Debug for Conformance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conformance")
            .field("provider", &self.backend.provider())
            .field("samples", &self.samples.len())
            .field("region", &self.region)
            .field("second_region", &self.second_region)
            .field("hooks", &self.hooks.is_some())
            .finish()
    }
}

impl Conformance {
    /// The suite for `backend`, declaring resources with `samples` (give them all:
    /// those of other providers are ignored). Nothing runs until a region is given
    /// with [`regions`](Self::regions).
    pub fn new(backend: Arc<dyn Backend>, samples: Vec<KindSample>) -> Self {
        Conformance {
            backend,
            samples,
            region: None,
            second_region: None,
            clock: Arc::new(SystemClock::new()),
            hooks: None,
            prefix: None,
            patience: Duration::from_secs(120),
        }
    }

    /// The region the checks run in (the provider's own code), and a second one for
    /// the checks that need two, if the provider has one.
    pub fn regions(mut self, region: &str, second: Option<&str>) -> Self {
        self.region = Some(region.to_owned());
        self.second_region = second.map(str::to_owned);
        self
    }

    /// The clock the suite and its engines wait on (the system clock by default; a
    /// simulator's manual clock makes a run instant).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Fault hooks, for the checks that need the cloud to refuse on cue.
    pub fn hooks(mut self, hooks: Arc<dyn ConformanceHooks>) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// A name prefix of the caller's, instead of a fresh random one.
    ///
    /// # Panics
    /// If the prefix is not 3 to 16 lowercase letters, digits and `-`, starting with a
    /// letter and ending with `-` ([`valid_prefix`]).
    pub fn prefix(mut self, prefix: &str) -> Self {
        assert!(
            valid_prefix(prefix),
            "the conformance prefix {prefix:?} must be 3 to 16 lowercase letters, digits and \
             `-`, start with a letter and end with `-`"
        );
        self.prefix = Some(prefix.to_owned());
        self
    }

    /// How long a check waits, on the clock, for the cloud to catch up (a create to be
    /// listed, a delete to be seen) before failing. Two minutes by default.
    pub fn patience(mut self, patience: Duration) -> Self {
        self.patience = patience;
        self
    }

    /// A fresh context for one run: a new prefix (unless one was given), the fleet
    /// name derived from it, and the backend's capabilities read once.
    pub fn context(&self) -> Context {
        let prefix = self
            .prefix
            .clone()
            .unwrap_or_else(|| fresh_prefix(&*self.clock));
        Context {
            backend: Arc::clone(&self.backend),
            provider: self.backend.provider(),
            caps: self.backend.capabilities(),
            clock: Arc::clone(&self.clock),
            hooks: self.hooks.clone(),
            fleet: format!("{prefix}fleet"),
            prefix,
            region: self.region.clone(),
            second_region: self.second_region.clone(),
            patience: self.patience,
            touched: Mutex::new(Default::default()),
        }
    }

    /// Runs every check, then cleans up, and reports. Never panics on a failed check:
    /// see [`Report::assert_passed`]. The checks run one after another on the calling
    /// task (the future is not `Send`: await it, do not spawn it).
    pub async fn run(&self) -> Report {
        let ctx = self.context();
        let mut report = Report {
            provider: ctx.provider.to_owned(),
            prefix: ctx.prefix.clone(),
            outcomes: Vec::new(),
        };
        let mut push = |check: &'static str, kind: Option<&'static str>, verdict: Verdict| {
            report.outcomes.push(CheckOutcome {
                check,
                kind,
                verdict,
            });
        };
        if ctx.caps.kinds.is_empty() {
            push(
                EVERY_CHECK,
                None,
                Verdict::skip(format!(
                    "the backend `{}` declares no kinds in `capabilities().kinds`: there is \
                     nothing to check",
                    ctx.provider
                )),
            );
            return report;
        }
        let Some(region) = ctx.region.clone() else {
            push(
                EVERY_CHECK,
                None,
                Verdict::skip("no region was given: call `Conformance::regions`"),
            );
            return report;
        };

        push(
            "a_backend_that_can_call_is_reachable",
            None,
            backend::a_backend_that_can_call_is_reachable(&ctx).await,
        );
        push(
            "account_answers_the_same_id",
            None,
            backend::account_answers_the_same_id(&ctx).await,
        );

        let mine: Vec<&KindSample> = self
            .samples
            .iter()
            .filter(|s| s.provider == ctx.provider)
            .collect();
        for &kind in &ctx.caps.kinds {
            if !mine.iter().any(|s| s.kind == kind) {
                push(
                    EVERY_CHECK,
                    Some(kind),
                    Verdict::skip(format!(
                        "no sample declares kind `{kind}` on `{}`: write one with \
                         `KindSample::new`",
                        ctx.provider
                    )),
                );
            }
        }
        let mut runnable: Vec<&KindSample> = Vec::new();
        for sample in mine {
            let why = if !ctx.caps.kinds.contains(sample.kind) {
                Some(format!(
                    "the backend does not declare kind `{}` in its capabilities",
                    sample.kind
                ))
            } else if !sample.region_parses(&region) {
                Some(format!("`{region}` is not a {} region", sample.provider))
            } else if runnable.iter().any(|s| s.kind == sample.kind) {
                Some("an earlier sample of the same kind ran".to_owned())
            } else {
                None
            };
            match why {
                Some(why) => push(EVERY_CHECK, Some(sample.kind), Verdict::Skip(why)),
                None => runnable.push(sample),
            }
        }

        let kinds: Vec<&'static str> = runnable.iter().map(|s| s.kind).collect();
        push(
            "listing_a_scope_without_our_resources_is_ok",
            None,
            backend::listing_a_scope_without_our_resources_is_ok(&ctx, &kinds).await,
        );

        for sample in runnable {
            let kind = Some(sample.kind);
            match applier::apply_scenario(&ctx, sample).await {
                Ok(log) => {
                    push(
                        SCENARIO_CHECKS[0],
                        kind,
                        applier::apply_result_buckets_are_disjoint(&log),
                    );
                    push(
                        SCENARIO_CHECKS[1],
                        kind,
                        applier::apply_result_reasons_and_actions_are_legal(&ctx, &log),
                    );
                    push(
                        SCENARIO_CHECKS[2],
                        kind,
                        applier::apply_result_drops_nothing(&log),
                    );
                }
                Err(e) => {
                    for check in SCENARIO_CHECKS {
                        push(
                            check,
                            kind,
                            Verdict::fail(format!("the apply scenario could not run: {e}")),
                        );
                    }
                }
            }
            for (check, run) in kind_checks() {
                let verdict = run(&ctx, sample).await;
                if let Some(hooks) = &ctx.hooks {
                    hooks.restore();
                }
                push(check, kind, verdict);
            }
            if sample.kind == "secrets" {
                push(
                    SECRET_CHECK,
                    kind,
                    lifecycle::a_secret_value_is_read_but_never_reported(&ctx, sample).await,
                );
            }
        }

        if let Some(hooks) = &ctx.hooks {
            hooks.restore();
        }
        push(
            "cleanup_leaves_nothing_behind",
            None,
            cleanup::cleanup_leaves_nothing_behind(&ctx).await,
        );
        report
    }
}
