//! A simulated cloud: AWS, GCP and Scaleway in one process, behind the `Backend` trait.
//!
//! A [`SimCloud`] holds one world shared by the three providers; [`SimCloud::backend`]
//! gives each provider's [`Backend`]. Each is built with the provider SDK as a real
//! provider is: a [`Router`] of the provider's kinds, each served by a [`SimProvider`]
//! through the typed [`KindBackend`] trait (the world inside stays JSON, keyed by kind
//! id, on purpose). The simulator behaves like a cloud rather than echoing what it is
//! given:
//!
//! - **Regions.** Resources live per (provider, kind, region), and `list` answers one
//!   region. Names are unique per (provider, kind, region), except `awsInstance`; bucket
//!   names, and names of kinds whose handle does not hold the region (AWS IAM roles; GCP
//!   service accounts, topics, secrets and Cloud SQL instances), are unique across the
//!   provider's regions. On AWS, `objectStore` and `s3Bucket` share one bucket namespace.
//! - **Each cloud's own rules** ([`clouds`]). What `read` reports and what an update may
//!   change come from the simulator's own table of what each real cloud does with each
//!   field, written from the providers' API documentation and not from the kinds'
//!   divergence tables, so that a wrong divergence table fails offline. `read` leaves
//!   out what the cloud does not report (a Pub/Sub topic's visibility timeout, where a
//!   Lambda's code came from, a database's password): absent, never a sentinel. An
//!   update that changes what the cloud fixes at creation (SQS's FIFO flag, RDS's master
//!   user name, a security group's description) or makes a change it refuses (a
//!   database moving between the classic and the serverless shape, a shrinking volume)
//!   is refused whole with the provider's `Invalid` error and code: nothing applied,
//!   nothing saved, the call logged as failed.
//! - **Server-side values.** `create` assigns a handle in the provider's format
//!   (`sg-…`, `i-…`, `arn:aws:s3:::…`, an SQS queue URL, `projects/…/secrets/…`, UUIDs on
//!   Scaleway), fills the kind's observed state (endpoints, ports, ids, addresses),
//!   fills in what the cloud decides when the spec is silent and then reports (a
//!   security group's VPC and default egress rule, an instance's subnet, a bucket's
//!   versioning, an SQS queue's retention, …) and resolves an image of `latest` to the
//!   region's newest AMI. Lambda reports a digest of its code (`codeSha256`): the
//!   declared one, or else one derived from the artifact's location, on create and on
//!   every update.
//! - **Markers.** The ownership marker is written into the raw tags by `create` itself.
//!   `read` reports the tags with the marker (a map, or `managed-by-infra=<fleet>` in a
//!   Scaleway string list); `ownership` returns the raw tags.
//! - **Secrets.** A secret's value is resolved at create and update and kept in the
//!   world; a secret the provider generates is drawn (from the seed) on create and kept
//!   by later updates. `read` never reports the value (`valueFrom` is left out);
//!   `secret_value` returns it.
//! - **References.** A resource whose configuration holds another resource's handle
//!   depends on it: deleting the referenced one is `DependencyViolation`, naming the
//!   dependant, and changes nothing. Handles are matched across the whole world, so a
//!   Scaleway function holding an AWS bucket's handle also protects the bucket.
//! - **Errors.** A missing handle is `NotFound` with the provider's code
//!   (`InvalidGroup.NotFound`, `NOT_FOUND`, `not_found`, …); a denied scope
//!   ([`SimCloud::deny`]) is `Denied`, for `list` too.
//! - **Lists by the page.** A `list` is as many calls as the real API's pages (each
//!   kind's page size is the real API's largest or default: 1,000 for EC2, 100 for
//!   RDS, Secrets Manager and Scaleway, …); each page waits its latency, is metered and
//!   faulted, and a page that fails fails the list. Where the real list answers whole
//!   objects with their tags (EC2 instances and security groups, RDS, Secrets
//!   Manager's `ListSecrets`, every GCP kind, Scaleway's REST kinds), each item hands
//!   over the very read `read` answers (and the raw tags, when that read carries
//!   none), and the kind says its lists are complete; S3, SQS, IAM roles, Lambda, ECR
//!   and Scaleway's S3 and SQS APIs list names only. [`SimCloud::set_bare_lists`] makes
//!   every list bare, as a client without complete lists sees them.
//! - **Time.** Every call first sleeps its latency on the injected [`Clock`] (zero unless
//!   configured); with a [`ManualClock`] nothing waits for real.
//! - **Throttling by rate** ([`SimCloud::set_rate_limit`]): each API — a (provider,
//!   kind, region) — admits so many calls a second, from a token bucket on the cloud's
//!   clock; a call beyond it is throttled in the provider's words
//!   (`RequestLimitExceeded`, `SlowDown`, `ThrottlingException`, `RESOURCE_EXHAUSTED`,
//!   429), not applied, with the wait its bucket needs as `retry_after`.
//! - **Retries.** [`SimCloud::backend`] retries as a real provider's client does, under
//!   the one [`RetryPolicy`] ([`SimCloud::set_retry_policy`]), on the same clock: a
//!   throttled call is waited out, a create that may have been sent is not repeated. The
//!   engine retries nothing itself. [`SimCloud::router`] is the backend without them.
//! - **Faults** ([`SimCloud::fail_nth`], [`SimCloud::lose_response_nth`],
//!   [`SimCloud::throttle_next`], [`SimCloud::crash_after`], [`FaultPlan`]), eventual
//!   consistency ([`SimCloud::set_list_lag`]) and a call log ([`SimCloud::calls`]).
//!
//! Everything random comes from the seed: two worlds built from the same seed and given
//! the same calls assign the same handles, generate the same secrets and answer the same
//! way.
//!
//! ## Persistence
//!
//! [`SimCloud::open`] keeps the world in a JSON file (its own schema, versioned), so that
//! separate processes can apply, plan and destroy against the same simulated estate.
//! **The file plays the cloud's own storage: it holds secret values in plaintext**, as a
//! secret manager would. Keep it out of version control. The file is kept as a cloud
//! keeps its storage (the mechanics are in `world_file.rs`):
//!
//! - **A write is made only once it is saved.** Every `create`, `update` and `delete`
//!   is saved before it answers. When the world cannot be saved (a directory that does
//!   not exist, a full disk, a directory that refuses writes), the call fails with an
//!   `Other` error naming the file and the system's reason, and the change is undone:
//!   the world in memory goes back to what the file holds, so the call was *not* made,
//!   and `may_have_been_sent` is false. That is the truth, not a guess — the file never
//!   saw the change — and every later call, from this process or another, sees the same
//!   world. Opening creates nothing; a missing directory is reported by the first write.
//! - **Written atomically, and private.** A temporary file beside the world file
//!   (`.<name>.infra-tmp-<pid>-<n>`, mode 0600 from its creation), flushed, then renamed
//!   over it; on failure it is removed, and one left by a killed process is removed by
//!   the next open.
//! - **Shared by its clients.** Every write holds an exclusive OS file lock on
//!   `<name>.lock` beside the world file while it reads the file, applies the call and
//!   saves. Every call, reads included, first reads the file again and takes the world
//!   it holds when another process, or a person, changed it since: two runs against one
//!   world never undo each other's changes.
//! - **A seed of its own.** A new world file gets a random seed, saved in the file with
//!   the world, so the same world keeps its behaviour and two worlds generate different
//!   secrets; [`SimCloud::new`] takes the seed, for tests that need determinism.
//!
//! Faults, denials, latency, the rate limit, bare lists, eventual-consistency lag and
//! the call log belong to the test run and are not saved; a runner's
//! [`SimCloud::backends_at`] takes latency, rate and bare lists from the environment
//! ([`LATENCY_VAR`], [`RATE_VAR`], [`BARE_LISTS_VAR`]). A direct edit of the world (`insert_foreign`,
//! `set_field`, …) that cannot be saved is undone and panics, and so does a look at the
//! world (`resources`, `find`, …) whose file cannot be read: it is test set-up, and a
//! test should not carry on with a world its file does not hold.
//!
//! ```
//! use infra_core::{sdk::Backend, sdk::ErrorKind};
//! use infra_testkit::sim::SimCloud;
//! # let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! # runtime.block_on(async {
//! let cloud = SimCloud::new(7);
//! let aws = cloud.backend("aws");
//! assert_eq!(aws.account().await.unwrap(), "sim-aws-000000000000");
//! assert!(aws.list("securityGroup", "eu-west-3").await.unwrap().is_empty());
//! let err = aws.read("securityGroup", "eu-west-3", "sg-0123").await.unwrap_err();
//! assert_eq!(err.kind, ErrorKind::NotFound);
//! assert_eq!(err.code.as_deref(), Some("InvalidGroup.NotFound"));
//! assert_eq!(cloud.calls().len(), 3);
//! # });
//! ```

pub mod clouds;
mod env;
mod faults;
mod kinds;
mod rate;
pub mod readme_tables;
mod rng;
mod world;
mod world_file;
mod world_flush;
mod world_journal;

use std::any::Any;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use infra_core::kinds::Secrets;
use infra_core::sdk::layer::{Layered, Retry};
use infra_core::sdk::{
    Account, CreateArgs, DeleteArgs, Jitter, KindBackend, ListArgs, MarkArgs, OwnershipArgs,
    ReadArgs, Reading, Retrier, RetryPolicy, Router, SecretArgs, SecretValues, Settle, UpdateArgs,
    Written,
};
use infra_core::{
    engine::{Clock, ManualClock},
    prelude::{Backends, Kind, SecretString},
    sdk::{Backend, BackendError, ErrorKind, Listed, RawTags},
};
use serde_json::{Map, Value};

pub use env::{BARE_LISTS_VAR, LATENCY_VAR, RATE_VAR};
pub use faults::{CallFilter, CallRecord, Fault, FaultPlan, FaultRule, Op, Outcome};
pub use world_file::WorldFileError;

use world::{Prepared, SecretInput, Stored, World};

/// One resource of the simulated world, as a test sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct SimResource {
    /// The provider (`aws`).
    pub provider: String,
    /// The kind's id (`securityGroup`).
    pub kind: String,
    /// The region's code.
    pub region: String,
    /// The name it was created with.
    pub name: String,
    /// The handle the cloud assigned.
    pub handle: String,
    /// The raw tags, marker included.
    pub raw_tags: RawTags,
    /// The configuration in force (camelCase; tags and secret values left out).
    pub config: Map<String, Value>,
    /// The observed state, as the kind's `Observed` type serialises.
    pub observed: Value,
}

impl SimResource {
    fn of(stored: &Stored) -> Self {
        SimResource {
            provider: stored.provider.clone(),
            kind: stored.kind.clone(),
            region: stored.region.clone(),
            name: stored.name.clone(),
            handle: stored.handle.clone(),
            raw_tags: stored.tags.clone(),
            config: stored.config.clone(),
            observed: stored.observed.clone(),
        }
    }
}

struct Inner {
    world: Mutex<World>,
    clock: Arc<dyn Clock>,
    retry: Mutex<RetryPolicy>,
    flusher: world_flush::Flusher,
}

/// Where a binary on the simulated cloud keeps its world: the file `INFRA_SIM_WORLD`
/// names, or `.infra/simulated-cloud.json` (the directory is made if it is missing;
/// should that fail, the world's first write says why).
pub fn world_file() -> PathBuf {
    if let Some(path) = std::env::var_os("INFRA_SIM_WORLD") {
        return PathBuf::from(path);
    }
    let _ = std::fs::create_dir_all(".infra");
    PathBuf::from(".infra/simulated-cloud.json")
}

/// A handle on one simulated world, shared by its three providers. Cloning it is
/// cheap, and every clone sees the same world.
#[derive(Clone)]
pub struct SimCloud {
    inner: Arc<Inner>,
}

impl fmt::Debug for SimCloud {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SimCloud").field(&*self.world()).finish()
    }
}

impl SimCloud {
    /// An empty world, its randomness fixed by `seed`, on a [`ManualClock`].
    pub fn new(seed: u64) -> Self {
        Self::with_clock(seed, Arc::new(ManualClock::new()))
    }

    /// An empty world on the given clock (latency is slept on it).
    pub fn with_clock(seed: u64, clock: Arc<dyn Clock>) -> Self {
        Self::from_world(World::new(seed), clock)
    }

    fn from_world(world: World, clock: Arc<dyn Clock>) -> Self {
        SimCloud {
            inner: Arc::new(Inner {
                world: Mutex::new(world),
                clock,
                retry: Mutex::new(RetryPolicy::default()),
                flusher: world_flush::Flusher::default(),
            }),
        }
    }

    /// The world kept in the JSON file at `path`, or an empty one with a random seed
    /// if there is no such file (the seed is saved with the world at its first write, so
    /// that the world keeps its behaviour). A file that is not a world is refused with
    /// its path, line and column, and left untouched; an empty path, or one that names
    /// no file, is refused as [`WorldFileError::BadPath`]. Nothing is created by
    /// opening: a directory that does not exist is reported by the first write.
    ///
    /// The file is the world: every call reads it again when another process (or a
    /// person) changed it, and a write counts as made only once it is saved — under an
    /// exclusive lock, atomically, mode 0600. A write that cannot be saved fails, not
    /// made, and is undone (see "Persistence" in the module documentation).
    ///
    /// The file holds secret values in plaintext (see the module documentation).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, WorldFileError> {
        Self::open_with_clock(path, Arc::new(ManualClock::new()))
    }

    /// [`SimCloud::open`], on the given clock.
    pub fn open_with_clock(
        path: impl AsRef<Path>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, WorldFileError> {
        Ok(Self::from_world(World::open(path.as_ref())?, clock))
    }

    /// Saves the world whole to its file now, as the files hold it: every write is on
    /// disk already (in the file or its journal); this folds the journal into the file
    /// and creates the file of a world not written yet. Does nothing for a world
    /// without a file.
    pub fn save(&self) -> Result<(), WorldFileError> {
        self.world().compact()
    }

    /// The file the world is saved in, if any.
    pub fn path(&self) -> Option<PathBuf> {
        self.world().path().map(Path::to_path_buf)
    }

    /// The seed the world was built from.
    pub fn seed(&self) -> u64 {
        self.current().seed
    }

    /// The clock latency is slept on.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.inner.clock)
    }

    fn world(&self) -> MutexGuard<'_, World> {
        self.inner
            .world
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The world as its file holds it now.
    ///
    /// # Panics
    /// When the file cannot be read: this serves a test's look at the world, and a test
    /// should not carry on with a world its file does not hold.
    fn current(&self) -> MutexGuard<'_, World> {
        let mut world = self.world();
        if let Err(e) = world.refresh(false) {
            panic!("the simulated cloud could not read its world: {e}");
        }
        world
    }

    /// Runs `f` on the world as its file holds it now, then saves it if `f` changed
    /// something.
    ///
    /// # Panics
    /// When the world cannot be saved (the change is undone first): direct edits are
    /// test set-up, and a failure to save them is the test's to see.
    fn mutate<T>(&self, f: impl FnOnce(&mut World) -> (T, bool)) -> T {
        self.world()
            .transact(true, f)
            .unwrap_or_else(|e| panic!("the simulated cloud could not save its world: {e}"))
    }

    /// The backend of `provider` (`aws`, `gcp` or `scaleway`), as a client of it
    /// behaves: its [`Router`] with the retry policy's loop around it
    /// ([`SimCloud::set_retry_policy`]), waiting on the cloud's clock, its jitter drawn
    /// from the seed.
    ///
    /// # Panics
    /// For any other provider.
    pub fn backend(&self, provider: &str) -> Arc<dyn Backend> {
        let policy = *self
            .inner
            .retry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let salt = provider
            .bytes()
            .fold(0u64, |h, b| h.rotate_left(8) ^ u64::from(b));
        let retrier =
            Retrier::new(policy, self.clock()).with_jitter(Jitter::seeded(self.seed() ^ salt));
        Layered::wrap(Arc::new(self.router(provider)), Retry::new(retrier))
    }

    /// How the backends made from now on retry (by default [`RetryPolicy::default`]:
    /// a throttled or unsent call is retried for up to two minutes of the cloud's clock,
    /// a read also when it may have been sent, a create not then).
    pub fn set_retry_policy(&self, policy: RetryPolicy) {
        *self
            .inner
            .retry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = policy;
    }

    /// The [`Router`] of `provider`: each kind the provider has, served by its
    /// [`SimProvider`], which also answers the account and secrets' values. Unlike
    /// [`SimCloud::backend`], it retries nothing: each call is one call to the world.
    ///
    /// # Panics
    /// For a provider other than `aws`, `gcp` and `scaleway`.
    pub fn router(&self, provider: &str) -> Router {
        let sim = self.sim_provider(provider);
        let router = Router::new(sim.provider, sim.clone()).secrets(sim.clone());
        kinds::kinds_of(sim.provider)
            .iter()
            .fold(router, |router, kind| kinds::register(router, kind, &sim))
    }

    /// The provider `provider` of this world, as the provider SDK takes it.
    ///
    /// # Panics
    /// For a provider other than `aws`, `gcp` and `scaleway`.
    pub fn sim_provider(&self, provider: &str) -> SimProvider {
        let provider = kinds::provider_id(provider).unwrap_or_else(|| {
            panic!(
                "the simulated cloud has no provider {provider:?} (it has aws, gcp and scaleway)"
            )
        });
        SimProvider {
            provider,
            cloud: self.clone(),
        }
    }

    /// The backends of the simulated cloud whose world is kept in the file `world`, for
    /// a binary's runner: when the world cannot be opened (a corrupt file, a newer
    /// schema, no permission), a backend for each provider that is unreachable and says
    /// why, so that nothing is planned or applied against a world that was not read.
    ///
    /// The environment sets the cloud up: [`LATENCY_VAR`] (`INFRA_SIM_LATENCY_MS=50`,
    /// every call's latency), [`RATE_VAR`] (`INFRA_SIM_RATE=50`, calls admitted per
    /// second per API) and [`BARE_LISTS_VAR`] (`INFRA_SIM_BARE_LISTS=1`, no complete
    /// lists). With a latency or a rate, the cloud keeps real time (the system's clock):
    /// its calls wait for real, and so do its client's retries. Its client retries as a
    /// real provider's does, by [`RetryPolicy::from_env`]. A value that does not parse
    /// makes every backend unreachable, naming the variable.
    pub fn backends_at(world: impl AsRef<Path>) -> Backends {
        let world = world.as_ref();
        let unreachable = |why: String| {
            kinds::PROVIDERS.iter().fold(Backends::new(), |b, p| {
                b.with(Arc::new(infra_core::sdk::Unreachable::new(p, why.clone())))
            })
        };
        let settings = match env::Settings::from_vars(|name| std::env::var(name).ok()) {
            Ok(settings) => settings,
            Err(e) => return unreachable(format!("the simulated cloud's setting {e}")),
        };
        let policy = match RetryPolicy::from_env() {
            Ok(policy) => policy,
            Err(e) => return unreachable(format!("the simulated cloud's retry policy: {e}")),
        };
        let clock: Arc<dyn Clock> = if settings.real_time() {
            Arc::new(infra_core::engine::SystemClock::new())
        } else {
            Arc::new(ManualClock::new())
        };
        match SimCloud::open_with_clock(world, clock) {
            Ok(cloud) => {
                if let Some(latency) = settings.latency {
                    cloud.set_latency(latency);
                }
                cloud.set_rate_limit(settings.rate);
                cloud.set_bare_lists(settings.bare_lists);
                cloud.set_retry_policy(policy);
                cloud.backends()
            }
            Err(e) => unreachable(format!(
                "the simulated cloud could not open its world {}: {e}",
                world.display()
            )),
        }
    }

    /// The backends of all three providers.
    pub fn backends(&self) -> Backends {
        kinds::PROVIDERS
            .iter()
            .fold(Backends::new(), |b, p| b.with(self.backend(p)))
    }

    // ---- accounts and behaviour ----

    /// The account id `provider`'s backend answers.
    pub fn account(&self, provider: &str) -> String {
        self.current().account(provider)
    }

    /// Sets the account id `provider`'s backend answers (handles already assigned keep
    /// the account they were made in).
    pub fn set_account(&self, provider: &str, account: impl Into<String>) {
        let account = account.into();
        self.mutate(|w| {
            w.accounts.insert(provider.to_string(), account);
            ((), true)
        });
    }

    /// Eventual consistency: a resource created from now on is missing from the next
    /// `calls` `list` calls of its provider, kind and region. Zero (the default) lists
    /// it at once.
    pub fn set_list_lag(&self, calls: u32) {
        self.world().list_lag = calls;
    }

    /// Every call sleeps this long on the clock before it reaches the world.
    pub fn set_latency(&self, latency: Duration) {
        let mut world = self.world();
        world.latency = latency;
        world.latency_by_op.clear();
    }

    /// Calls of `op` sleep this long (overriding [`SimCloud::set_latency`] for them).
    pub fn set_latency_for(&self, op: Op, latency: Duration) {
        self.world().latency_by_op.insert(op, latency);
    }

    /// Throttling by rate: from now on each API — a (provider, kind, region), and each
    /// provider's `account` — admits at most `per_second` calls a second, in bursts of
    /// at most one second's worth (a token bucket, full to begin with, on the cloud's
    /// clock). A call beyond it is throttled and not applied (a throttled create creates
    /// nothing), its `retry_after` the wait until its bucket holds a call again. `None`
    /// (the default) admits every call.
    pub fn set_rate_limit(&self, per_second: Option<u32>) {
        self.world().rates.set(per_second);
    }

    /// The rate limit in force, in calls per second per API.
    pub fn rate_limit(&self) -> Option<u32> {
        self.world().rates.per_second()
    }

    /// With `true`, every list answers names and handles only, as if no kind's list
    /// were complete (the backends say so in their capabilities): observation then
    /// reads each resource, as a client without complete lists does. `false` (the
    /// default) lists as each cloud does.
    pub fn set_bare_lists(&self, bare: bool) {
        self.world().bare_lists = bare;
    }

    // ---- faults ----

    /// The `n`th call from now (1-based, any provider, any operation) fails with an
    /// error of `kind`, not applied.
    pub fn fail_nth(&self, n: u64, kind: ErrorKind, may_have_been_sent: bool) {
        self.fail_nth_matching(CallFilter::any(), n, kind, may_have_been_sent);
    }

    /// The `n`th call from now that matches `filter` fails with an error of `kind`, not
    /// applied.
    pub fn fail_nth_matching(
        &self,
        filter: CallFilter,
        n: u64,
        kind: ErrorKind,
        may_have_been_sent: bool,
    ) {
        self.inject(FaultRule {
            nth: n,
            filter,
            fault: Fault::Fail {
                kind,
                may_have_been_sent,
            },
        });
    }

    /// The `n`th call from now is applied, then its response is lost: the caller sees
    /// `Unavailable` with `may_have_been_sent`.
    pub fn lose_response_nth(&self, n: u64) {
        self.lose_response_nth_matching(CallFilter::any(), n);
    }

    /// The `n`th call from now that matches `filter` is applied, and its response lost.
    pub fn lose_response_nth_matching(&self, filter: CallFilter, n: u64) {
        self.inject(FaultRule {
            nth: n,
            filter,
            fault: Fault::LoseResponse,
        });
    }

    /// Installs one fault rule.
    pub fn inject(&self, rule: FaultRule) {
        self.world().faults.arm(rule);
    }

    /// Installs a whole fault plan.
    pub fn install(&self, plan: &FaultPlan) {
        self.world().faults.install(plan);
    }

    /// The next `calls` calls are throttled, not applied.
    pub fn throttle_next(&self, calls: u64) {
        self.world().faults.throttle_next(calls);
    }

    /// Each call is throttled with probability `rate` (0 to 1), drawn from the seed.
    pub fn set_throttle_rate(&self, rate: f64) {
        self.world().faults.set_throttle_rate(rate);
    }

    /// Removes every fault not yet fired, throttling and any pending crash point. A
    /// world that has crashed stays crashed: see [`SimCloud::revive`].
    pub fn clear_faults(&self) {
        self.world().faults.clear();
    }

    /// A crash point: the next `calls` calls are served, and every call after them is
    /// refused with an `Other` error saying the process crashed (not applied), as if
    /// the applying process had been killed. Zero crashes at once.
    pub fn crash_after(&self, calls: u64) {
        self.world().faults.crash_after(calls);
    }

    /// Crashes now: every call is refused until [`SimCloud::revive`].
    pub fn crash_now(&self) {
        self.world().faults.crash_now();
    }

    /// Accepts calls again after a crash (the next run), and drops any pending crash
    /// point.
    pub fn revive(&self) {
        self.world().faults.revive();
    }

    /// Whether the world has crashed.
    pub fn is_crashed(&self) -> bool {
        self.world().faults.is_crashed()
    }

    /// Calls to `provider` naming `kind` (any when `None`) in `region` (any when
    /// `None`) fail with `Denied`, never `NotFound`. With both `None`, `account` is
    /// denied too.
    pub fn deny(&self, provider: &str, kind: Option<&str>, region: Option<&str>) {
        self.world().deny(provider, kind, region);
    }

    /// Lifts one denial, given exactly as it was made.
    pub fn allow(&self, provider: &str, kind: Option<&str>, region: Option<&str>) {
        self.world().allow(provider, kind, region);
    }

    /// Lifts every denial.
    pub fn allow_all(&self) {
        self.world().allow_all();
    }

    // ---- the call log ----

    /// Every call received since the last [`SimCloud::clear_calls`], in order.
    pub fn calls(&self) -> Vec<CallRecord> {
        self.world().calls().to_vec()
    }

    /// The `create`, `update` and `delete` calls that reached the world and changed it
    /// (lost responses included: they were applied).
    pub fn writes(&self) -> Vec<CallRecord> {
        self.world()
            .calls()
            .iter()
            .filter(|c| c.is_write() && c.applied)
            .cloned()
            .collect()
    }

    /// Every `create`, `update` and `delete` call received, whatever became of it.
    pub fn write_attempts(&self) -> Vec<CallRecord> {
        self.world()
            .calls()
            .iter()
            .filter(|c| c.is_write())
            .cloned()
            .collect()
    }

    /// Forgets the calls logged so far.
    pub fn clear_calls(&self) {
        self.world().clear_calls();
    }

    // ---- the world, directly ----

    /// Puts a resource into the world as if someone else had made it, with the given
    /// raw tags (no marker unless they hold one) and only what the cloud fills in as
    /// its configuration. Returns its handle.
    pub fn insert_foreign(
        &self,
        provider: &str,
        kind: &str,
        region: &str,
        name: &str,
        raw_tags: RawTags,
    ) -> Result<String, BackendError> {
        self.insert_foreign_with(provider, kind, region, name, Map::new(), raw_tags)
    }

    /// [`SimCloud::insert_foreign`] with a configuration (camelCase fields, as a settled
    /// spec serialises; a `tags` field is ignored in favour of `raw_tags`).
    pub fn insert_foreign_with(
        &self,
        provider: &str,
        kind: &str,
        region: &str,
        name: &str,
        config: Map<String, Value>,
        raw_tags: RawTags,
    ) -> Result<String, BackendError> {
        self.mutate(|w| {
            let prepared = Prepared {
                config,
                secret: None,
            };
            let result = w.insert(provider, kind, region, name, prepared, raw_tags);
            let changed = result.is_ok();
            (result, changed)
        })
    }

    /// Every resource, in creation order.
    pub fn resources(&self) -> Vec<SimResource> {
        self.current().resources().map(SimResource::of).collect()
    }

    /// The resource with this handle.
    pub fn resource(&self, handle: &str) -> Option<SimResource> {
        self.current().by_handle(handle).map(SimResource::of)
    }

    /// The resources of a provider's kind with this name, in any region.
    pub fn find(&self, provider: &str, kind: &str, name: &str) -> Vec<SimResource> {
        self.current()
            .resources()
            .filter(|s| s.provider == provider && s.kind == kind && s.name == name)
            .map(SimResource::of)
            .collect()
    }

    /// How many resources the world holds.
    pub fn len(&self) -> usize {
        self.current().resources().count()
    }

    /// Whether the world holds no resource.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many resources of a provider's kind the world holds, in every region.
    pub fn count(&self, provider: &str, kind: &str) -> usize {
        self.current()
            .resources()
            .filter(|s| s.provider == provider && s.kind == kind)
            .count()
    }

    /// Deletes a resource behind the engine's back, ignoring what depends on it.
    /// Returns whether it existed.
    pub fn remove(&self, handle: &str) -> bool {
        self.mutate(|w| {
            let removed = w.remove(handle).is_some();
            (removed, removed)
        })
    }

    /// Drift: sets one field of a resource's stored configuration (camelCase; `tags`
    /// is [`SimCloud::set_raw_tags`]). Returns whether the resource exists.
    pub fn set_field(&self, handle: &str, field: &str, value: Value) -> bool {
        self.mutate(|w| {
            let Some(stored) = w.by_handle_mut(handle) else {
                return (false, false);
            };
            stored.config.insert(field.to_string(), value);
            w.relink(handle);
            (true, true)
        })
    }

    /// Drift: removes one field from a resource's stored configuration, so that `read`
    /// no longer reports it. Returns whether the resource exists.
    pub fn remove_field(&self, handle: &str, field: &str) -> bool {
        self.mutate(|w| {
            let Some(stored) = w.by_handle_mut(handle) else {
                return (false, false);
            };
            stored.config.remove(field);
            w.relink(handle);
            (true, true)
        })
    }

    /// Replaces a resource's raw tags (a marker removed or forged, a label added).
    /// Returns whether the resource exists.
    pub fn set_raw_tags(&self, handle: &str, tags: RawTags) -> bool {
        self.mutate(|w| match w.by_handle_mut(handle) {
            Some(stored) => {
                stored.tags = tags;
                (true, true)
            }
            None => (false, false),
        })
    }

    /// The value a secret holds, as the cloud stores it.
    pub fn stored_secret(&self, handle: &str) -> Option<SecretString> {
        self.current()
            .by_handle(handle)
            .and_then(|s| s.secret.clone())
            .map(SecretString::new)
    }

    /// The AMI an AWS image of `latest` resolves to in `region`.
    pub fn latest_ami(&self, region: &str) -> String {
        kinds::latest_ami(self.seed(), region)
    }

    /// The id of the default VPC of an AWS region.
    pub fn default_vpc(&self, region: &str) -> String {
        kinds::default_vpc(self.seed(), region)
    }

    /// The id of the default subnet of an AWS region.
    pub fn default_subnet(&self, region: &str) -> String {
        kinds::default_subnet(self.seed(), region)
    }

    // ---- serving ----

    async fn serve<T>(
        &self,
        call: CallRecord,
        act: impl FnOnce(&mut World, &mut CallRecord) -> Result<T, BackendError> + Send,
    ) -> Result<T, BackendError> {
        let latency = self.world().latency(call.op);
        if !latency.is_zero() {
            self.inner.clock.sleep(latency).await;
        }
        let now = self.inner.clock.now();
        let (result, unflushed) = {
            let mut world = self.world();
            let result = world.serve(call, now, act);
            (result, world.unflushed.take())
        };
        // The change is answered once its journal line is on disk.
        match unflushed {
            Some((unflushed, _)) => match self.inner.flusher.flush(unflushed).await {
                Ok(()) => result,
                Err(e) => Err(unflushed_failure(&e)),
            },
            None => result,
        }
    }
}

/// A change made and written to the journal whose flush to disk failed: the world
/// holds it, but it may not outlive the machine, so the caller is told it may have
/// been applied.
fn unflushed_failure(message: &str) -> BackendError {
    let mut e = BackendError::new(
        infra_core::sdk::ErrorKind::Other,
        format!(
            "the simulated cloud made the change but could not flush its world to disk              ({message}); the change may be lost"
        ),
    );
    e.may_have_been_sent = true;
    e
}

/// Turns a settled spec of kind `K` into what the world stores, before the call waits:
/// its JSON (camelCase, unsaid fields left out, handles as strings, secret values
/// redacted), and a secret's value, resolved here and nowhere else (or, for a secret the
/// provider generates, how long a value to draw).
fn prepare<K: Kind>(spec: &K::Settled) -> Result<Prepared, BackendError> {
    let mut config = match serde_json::to_value(spec) {
        Ok(Value::Object(map)) => map,
        Ok(other) => {
            return Err(BackendError::invalid(format!(
                "a {} spec did not serialise to an object (got {other})",
                K::ID
            )));
        }
        Err(e) => {
            return Err(BackendError::invalid(format!(
                "a {} spec did not serialise: {e}",
                K::ID
            )));
        }
    };
    let spec: &dyn Any = spec;
    let secret = match spec.downcast_ref::<<Secrets as Settle>::Settled>() {
        Some(secret) => {
            config.remove("valueFrom");
            let source = &secret.value_from;
            match source.generated_length() {
                // The cloud draws the value itself, on create.
                Some(length) => Some(SecretInput::Generate(usize::from(length).min(4096))),
                None => Some(SecretInput::Value(source.resolve()?.expose().to_string())),
            }
        }
        None => None,
    };
    Ok(Prepared { config, secret })
}

/// What `read` answers for a resource: its reading, with its raw tags where the cloud's
/// read carries them. A complete list hands over this very reading.
fn reading_of<K: Kind>(stored: &world::Stored) -> Result<Reading<K>, BackendError> {
    let reading = stored.reading()?;
    Ok(if kinds::read_carries_tags(&stored.provider, K::ID) {
        reading.with_raw_tags(stored.tags.clone())
    } else {
        reading
    })
}

/// One item of a list: the name and handle; for a complete list, the read `read` would
/// answer and, when that read carries no tags and the kind's tags are readable, the raw
/// tags the listed object carries.
fn listed_of<K: Kind>(stored: &world::Stored, complete: bool) -> Result<Listed, BackendError> {
    let listed = Listed::new(stored.name.clone(), stored.handle.clone());
    if !complete {
        return Ok(listed);
    }
    let reading = reading_of::<K>(stored)?;
    let tags = (reading.raw_tags().is_none() && kinds::tags_readable(&stored.provider, K::ID))
        .then(|| stored.tags.clone());
    let listed = listed.with_reading(reading);
    Ok(match tags {
        Some(tags) => listed.with_raw_tags(tags),
        None => listed,
    })
}

/// One provider of a [`SimCloud`], as the provider SDK takes it: every kind the provider
/// has ([`KindBackend`], one implementation generic over the kind), its account
/// ([`Account`]) and its secrets' values ([`SecretValues`]).
///
/// [`SimCloud::router`] assembles it into the provider's [`Router`]; a test that needs a
/// provider with fewer kinds, or one kind served by something else, can assemble its own
/// router from it.
///
/// Every call goes through the world: it sleeps its latency, is counted and judged by
/// the faults and denials, and is logged ([`SimCloud::calls`]). `mark` is a tag write,
/// logged (and faulted) as an `update`.
#[derive(Clone, Debug)]
pub struct SimProvider {
    provider: &'static str,
    cloud: SimCloud,
}

impl SimProvider {
    /// Whether lists of `kind` hand over complete reads: where the cloud's list answers
    /// whole objects, unless the world was told to answer bare lists.
    fn complete_lists(&self, kind: &str) -> bool {
        kinds::lists_complete(self.provider, kind) && !self.cloud.world().bare_lists
    }

    /// The provider's id (`aws`).
    pub fn provider(&self) -> &'static str {
        self.provider
    }

    /// The world it serves.
    pub fn cloud(&self) -> &SimCloud {
        &self.cloud
    }

    /// The log entry of a call, before the world serves it.
    fn record(
        &self,
        op: Op,
        kind: Option<&'static str>,
        region: Option<&str>,
        name: Option<&str>,
        handle: Option<&str>,
    ) -> CallRecord {
        CallRecord {
            seq: 0,
            provider: self.provider,
            op,
            kind,
            region: region.map(str::to_string),
            name: name.map(str::to_string),
            handle: handle.map(str::to_string),
            outcome: Outcome::Ok,
            applied: false,
        }
    }
}

#[async_trait]
impl Account for SimProvider {
    async fn account(&self) -> Result<String, BackendError> {
        let call = self.record(Op::Account, None, None, None, None);
        let provider = self.provider;
        self.cloud
            .serve(call, move |w, _| Ok(w.account(provider)))
            .await
    }
}

#[async_trait]
impl SecretValues for SimProvider {
    async fn secret_value(&self, args: SecretArgs<'_>) -> Result<SecretString, BackendError> {
        let SecretArgs { region, handle, .. } = args;
        let call = self.record(
            Op::SecretValue,
            Some(Secrets::ID),
            Some(region),
            None,
            Some(handle),
        );
        self.cloud
            .serve(call, move |w, c| w.secret_value(c, region, handle))
            .await
    }
}

#[async_trait]
impl<K: Kind> KindBackend<K> for SimProvider {
    /// The world's own rule: names repeat where it keeps no namespace for them
    /// (`awsInstance`).
    fn duplicate_names(&self) -> bool {
        kinds::name_scope(self.provider, K::ID).is_none()
    }

    /// Scaleway Queues take no tags, and a Scaleway registry namespace's can be written
    /// by anyone: their ownership cannot be read.
    fn tags_readable(&self) -> bool {
        kinds::tags_readable(self.provider, K::ID)
    }

    /// Where the cloud's list answers whole objects ([`SimCloud::set_bare_lists`]
    /// aside).
    fn lists_complete(&self) -> bool {
        self.complete_lists(K::ID)
    }

    /// Page by page, as the cloud's API answers it: each page is one call (it waits its
    /// latency, is metered, counted by the faults and logged), and a page that fails
    /// fails the list. Where the kind's list is complete, each item carries the
    /// resource's read (the very one `read` answers) and, when that read carries no
    /// tags, the raw tags.
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let provider = self.provider;
        let complete = self.complete_lists(K::ID);
        let size = kinds::page_size(provider, K::ID);
        let mut listed = Vec::new();
        let mut token = None;
        loop {
            let call = self.record(Op::List, Some(K::ID), Some(region), None, None);
            let (page, next) = self
                .cloud
                .serve(call, move |w, _| {
                    w.list_page((provider, K::ID, region), token, size, |stored| {
                        listed_of::<K>(stored, complete)
                    })
                })
                .await?;
            listed.extend(page);
            match next {
                Some(after) => token = Some(after),
                None => return Ok(listed),
            }
        }
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<K>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let call = self.record(Op::Read, Some(K::ID), Some(region), None, Some(handle));
        self.cloud
            .serve(call, move |w, c| {
                reading_of::<K>(w.read(c, K::ID, region, handle)?)
            })
            .await
    }

    async fn create(&self, args: CreateArgs<'_, K>) -> Result<Written<Reading<K>>, BackendError> {
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = args;
        let call = self.record(Op::Create, Some(K::ID), Some(region), Some(name), None);
        let prepared = prepare::<K>(spec);
        self.cloud
            .serve(call, move |w, c| {
                w.create(c, K::ID, region, name, prepared, marker)?
                    .reading()
            })
            .await
            .map(Written::Done)
    }

    async fn update(&self, args: UpdateArgs<'_, K>) -> Result<Written<Reading<K>>, BackendError> {
        let UpdateArgs {
            region,
            handle,
            spec,
            ..
        } = args;
        let call = self.record(Op::Update, Some(K::ID), Some(region), None, Some(handle));
        let prepared = prepare::<K>(spec);
        self.cloud
            .serve(call, move |w, c| {
                w.update(c, K::ID, region, handle, prepared)?.reading()
            })
            .await
            .map(Written::Done)
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        let call = self.record(Op::Delete, Some(K::ID), Some(region), None, Some(handle));
        self.cloud
            .serve(call, move |w, c| w.delete(c, K::ID, region, handle))
            .await
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let call = self.record(Op::Ownership, Some(K::ID), Some(region), None, Some(handle));
        self.cloud
            .serve(call, move |w, c| w.ownership(c, K::ID, region, handle))
            .await
    }

    /// A tag write, logged (and faulted) as an `update` and saved with the world.
    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let kind = K::ID;
        let call = self.record(Op::Update, Some(kind), Some(region), None, Some(handle));
        let provider = self.provider;
        let (key, value) = (marker.key().to_string(), marker.value().to_string());
        let replaces = marker.replaces().map(str::to_owned);
        self.cloud
            .serve(call, move |w, c| {
                kinds::check_scope(provider, kind, region)?;
                let stored = w
                    .by_handle_mut(handle)
                    .filter(|s| s.provider == provider && s.kind == kind && s.region == region)
                    .ok_or_else(|| kinds::not_found(provider, kind, handle))?;
                c.name = Some(stored.name.clone());
                if !kinds::tags_readable(provider, kind) {
                    return Err(kinds::unprovable(provider, kind));
                }
                match stored.tags.get(&key).map(String::as_str) {
                    // Already this fleet's (or the legacy value every fleet reads as its
                    // own): nothing to write.
                    Some(v) if v == value || v == infra_core::sdk::LEGACY_MARKER_VALUE => Ok(()),
                    // Handed over from that very fleet (`records move`): replaced.
                    Some(other) if replaces.as_deref() == Some(other) => {
                        stored.tags.insert(key, value);
                        Ok(())
                    }
                    Some(other) => Err(BackendError::new(
                        ErrorKind::Conflict,
                        format!("{handle} carries the marker of fleet `{other}`; left as it is"),
                    )),
                    None => {
                        stored.tags.insert(key, value);
                        Ok(())
                    }
                }
            })
            .await
    }
}
