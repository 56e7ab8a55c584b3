//! What every check is given: the backend, the run's names and regions, the clock,
//! the hooks, and the helpers checks share (an engine over a recorded backend, name
//! lookups that wait out eventual consistency).

use std::collections::{BTreeSet, hash_map::RandomState};
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use infra_core::{
    engine::{Clock, Engine, MemoryStore, Options, Outcome, PlanReport, PlannedChange, Subject},
    prelude::{Backends, Fleet},
    sdk::{Backend, BackendError, Capabilities, ErrorKind},
};

use super::{CallLog, ConformanceHooks, KindSample, RecordingBackend, Variant};

/// The marker value of the "other fleet" whose resources the suite must never touch.
pub const FOREIGN_FLEET: &str = "someone-else";

/// The shared state of one run of the suite. Built by
/// [`Conformance::context`](super::Conformance::context); every check takes it.
pub struct Context {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) provider: &'static str,
    pub(crate) caps: Capabilities,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) hooks: Option<Arc<dyn ConformanceHooks>>,
    pub(crate) prefix: String,
    pub(crate) fleet: String,
    pub(crate) region: Option<String>,
    pub(crate) second_region: Option<String>,
    pub(crate) patience: Duration,
    /// Every (kind, region) a fleet of the run declared something in: what the clean-up
    /// lists.
    pub(crate) touched: Mutex<BTreeSet<(&'static str, &'static str)>>,
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("provider", &self.provider)
            .field("prefix", &self.prefix)
            .field("fleet", &self.fleet)
            .field("region", &self.region)
            .field("second_region", &self.second_region)
            .field("hooks", &self.hooks.is_some())
            .finish()
    }
}

static RUNS: AtomicU64 = AtomicU64::new(0);

/// A fresh run prefix: `ct` and six lowercase letters or digits, then `-`. Drawn from
/// the standard library's per-process random hashing keys, the process id, a counter
/// and the clock, so that two runs (in one process or two) do not share a prefix.
pub fn fresh_prefix(clock: &dyn Clock) -> String {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(RUNS.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    hasher.write_u128(clock.now().as_nanos());
    let mut n = hasher.finish();
    let digits: Vec<u8> = b"abcdefghijklmnopqrstuvwxyz0123456789".to_vec();
    let mut tail = String::new();
    for _ in 0..6 {
        tail.push(char::from(digits[(n % 36) as usize]));
        n /= 36;
    }
    format!("ct{tail}-")
}

/// Whether `prefix` can start the name of a resource of every built-in kind: 3 to 16
/// characters of lowercase letters, digits and `-`, starting with a letter and ending
/// with `-`.
pub fn valid_prefix(prefix: &str) -> bool {
    (3..=16).contains(&prefix.len())
        && prefix.starts_with(|c: char| c.is_ascii_lowercase())
        && prefix.ends_with('-')
        && prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// An engine over the backend under test, through a recorder, with its own records.
pub(crate) struct Harness {
    pub(crate) engine: Engine,
    pub(crate) recorder: CallLog,
    pub(crate) store: Arc<MemoryStore>,
}

impl Harness {
    pub(crate) async fn apply(&self, fleet: &Fleet) -> Result<Outcome, String> {
        self.engine
            .apply(&fleet.plan(), &Options::default())
            .await
            .map_err(|e| format!("the apply was refused: {e}"))
    }

    pub(crate) async fn plan(&self, fleet: &Fleet) -> Result<PlanReport, String> {
        self.engine
            .plan(&fleet.plan(), &Options::default())
            .await
            .map_err(|e| format!("the plan was refused: {e}"))
    }
}

/// The planned line of `subject`, if the plan has one.
pub(crate) fn planned<'a>(report: &'a PlanReport, subject: &Subject) -> Option<&'a PlannedChange> {
    report.changes.iter().find(|c| &c.resource == subject)
}

/// The changes a plan would make, for a failure message.
pub(crate) fn describe_changes(report: &PlanReport) -> String {
    let lines: Vec<String> = report
        .changes
        .iter()
        .filter(|c| c.action != "unchanged")
        .map(|c| {
            let mut line = format!("{} {}", c.action, c.resource);
            if !c.fields.is_empty() {
                let names: Vec<&str> = c.fields.iter().map(|f| f.field).collect();
                line.push_str(&format!(" (fields: {})", names.join(", ")));
            }
            if let Some(d) = &c.detail {
                line.push_str(&format!(" — {d}"));
            }
            line
        })
        .collect();
    lines.join("; ")
}

impl Context {
    /// The backend under test.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The provider of the backend under test.
    pub fn provider(&self) -> &'static str {
        self.provider
    }

    /// The backend's capabilities, read once at the start of the run.
    pub fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    /// The run's name prefix: every resource the run creates has a name starting with
    /// it.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The name of the fleet whose marker the run's resources carry.
    pub fn fleet_name(&self) -> &str {
        &self.fleet
    }

    /// The region the checks run in.
    pub fn region(&self) -> Option<&str> {
        self.region.as_deref()
    }

    /// The second region, for the checks that need two.
    pub fn second_region(&self) -> Option<&str> {
        self.second_region.as_deref()
    }

    /// The clock the run waits on.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The fault hooks, if any were given.
    pub fn hooks(&self) -> Option<&Arc<dyn ConformanceHooks>> {
        self.hooks.as_ref()
    }

    /// The primary region (the runner only runs kind checks when there is one).
    pub(crate) fn primary(&self) -> &str {
        self.region.as_deref().unwrap_or("")
    }

    /// The name of the resource under test of one check, on one sample:
    /// `{prefix}{tag}-{kind}`.
    pub fn name(&self, tag: &str, sample: &KindSample) -> String {
        let kind: String = sample
            .kind
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect();
        format!("{}{tag}-{kind}", self.prefix)
    }

    /// The subject the engine reports for the resource under test named `name`.
    pub fn subject(&self, sample: &KindSample, name: &str, region: &str) -> Subject {
        Subject {
            provider: self.provider.to_owned(),
            kind: sample.kind.to_owned(),
            name: name.to_owned(),
            region: region.to_owned(),
        }
    }

    /// A fleet named `fleet` declaring each `(sample, region, name, variant)`.
    pub(crate) fn fleet_named(
        &self,
        fleet: &str,
        declarations: &[(&KindSample, &str, &str, Variant)],
    ) -> Result<Fleet, String> {
        let mut builder = Fleet::builder(fleet);
        for (sample, region, name, variant) in declarations {
            (sample.declare)(&mut builder, region, name, *variant);
        }
        let fleet = builder
            .build()
            .map_err(|e| format!("the sample does not declare a sound fleet: {e}"))?;
        let mut touched = self
            .touched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for r in fleet.resources() {
            touched.insert((r.reference().kind, r.region()));
        }
        Ok(fleet)
    }

    /// The run's fleet declaring the sample's resource `name` in the primary region.
    pub(crate) fn fleet(
        &self,
        sample: &KindSample,
        name: &str,
        variant: Variant,
    ) -> Result<Fleet, String> {
        self.fleet_named(&self.fleet, &[(sample, self.primary(), name, variant)])
    }

    /// The run's fleet declaring nothing: what prunes everything its records hold.
    pub(crate) fn empty_fleet(&self) -> Result<Fleet, String> {
        self.fleet_named(&self.fleet, &[])
    }

    /// An engine over the backend under test, recorded, with fresh records.
    pub(crate) fn harness(&self) -> Harness {
        let recorder = CallLog::new();
        let recorded = RecordingBackend::wrap(Arc::clone(&self.backend), recorder.clone());
        let store = Arc::new(MemoryStore::new());
        let engine = Engine::new(
            Backends::new().with(recorded as Arc<dyn Backend>),
            store.clone(),
        )
        .with_clock(Arc::clone(&self.clock));
        Harness {
            engine,
            recorder,
            store,
        }
    }

    /// Creates the sample's resource `name` (Base) in the primary region as the fleet
    /// [`FOREIGN_FLEET`] would: through the backend, with that fleet's marker.
    pub(crate) async fn create_foreign(
        &self,
        sample: &KindSample,
        name: &str,
    ) -> Result<(), String> {
        let fleet = self.fleet_named(
            FOREIGN_FLEET,
            &[(sample, self.primary(), name, Variant::Base)],
        )?;
        let harness = self.harness();
        let outcome = harness.apply(&fleet).await?;
        if !outcome.result.is_success() {
            return Err(format!(
                "the resource of another fleet could not be created: {:?}",
                outcome.result.failed
            ));
        }
        Ok(())
    }

    /// Waits on the clock for `attempt` to answer `Some`, for as long as the run's
    /// patience allows. `Err` stops at once.
    pub(crate) async fn poll<T, F, Fut>(&self, what: &str, mut attempt: F) -> Result<T, String>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Option<T>, String>>,
    {
        let mut waited = Duration::ZERO;
        let mut wait = Duration::from_millis(500);
        loop {
            if let Some(found) = attempt().await? {
                return Ok(found);
            }
            if waited >= self.patience {
                return Err(format!("{what}: still not so after {waited:?}"));
            }
            self.clock.sleep(wait).await;
            waited += wait;
            wait = (wait * 2).min(Duration::from_secs(8));
        }
    }

    /// The handle `list` gives the resource `name` of `kind` in `region`, waiting for
    /// the list to show it.
    pub(crate) async fn handle_of(
        &self,
        kind: &'static str,
        region: &str,
        name: &str,
    ) -> Result<String, String> {
        self.poll(
            &format!("`list` shows {kind} `{name}` in {region}"),
            || async {
                let listed = self
                    .settle(|| self.backend.list(kind, region))
                    .await
                    .map_err(|e| format!("`list` of {kind} in {region} failed: {e}"))?;
                Ok(listed
                    .into_iter()
                    .find(|l| l.name == name)
                    .map(|l| l.handle))
            },
        )
        .await
    }

    /// Runs a backend call again while it fails for a reason that may pass (throttling,
    /// an outage, an operation still in progress), within the run's patience.
    pub(crate) async fn settle<T, F, Fut>(&self, mut call: F) -> Result<T, BackendError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, BackendError>>,
    {
        let mut waited = Duration::ZERO;
        let mut wait = Duration::from_millis(500);
        loop {
            match call().await {
                Err(e)
                    if (e.kind.is_transient() || e.kind == ErrorKind::Conflict)
                        && waited < self.patience =>
                {
                    self.clock.sleep(wait).await;
                    waited += wait;
                    wait = (wait * 2).min(Duration::from_secs(8));
                }
                other => return other,
            }
        }
    }
}
