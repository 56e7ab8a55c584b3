//! Google Cloud stand-ins for tests: one HTTP server on `127.0.0.1` serving, from
//! memory, the REST APIs of the services that have no emulator, as the official Rust
//! clients call them.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use infra_testkit::gcp::{GcpServer, GcpService};
//!
//! let server = GcpServer::start("test-project").await?;
//! // point every client at server.address(), with anonymous credentials …
//! server.throttle(GcpService::SecretManager, 2); // the next two calls answer 429
//! server.deny(GcpService::Run);                  // every Cloud Run call answers 403
//! server.restore();
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! Served:
//!
//! | service | paths |
//! |---|---|
//! | Cloud Storage (JSON API) | `/storage/v1/b`, `/storage/v1/b/{bucket}` |
//! | Secret Manager | `/v1/projects/{p}/secrets…` |
//! | Artifact Registry | `/v1/projects/{p}/locations/{l}/repositories…`, its operations |
//! | Cloud Run | `/v2/projects/{p}/locations/{l}/services…`, its operations |
//! | Cloud SQL | `/v1/projects/{p}/instances…`, `/v1/projects/{p}/operations/{op}` |
//! | IAM | `/v1/projects/{p}/serviceAccounts…` |
//! | Resource Manager | `/v3/projects/{p}`, `:getIamPolicy`, `:setIamPolicy` |
//! | Pub/Sub (admin) | `/v1/projects/{p}/topics…`, `/v1/projects/{p}/subscriptions…` |
//! | IAM policies of resources | Cloud Run services', Pub/Sub topics' and subscriptions' `:getIamPolicy`, `:setIamPolicy` |
//!
//! What the clients send is what is accepted: the `$alt=json;enum-encoding=int` query,
//! enums as names or as integers, 64-bit integers as strings, bytes as base64. Enums
//! are answered as names, as Google does, unless the request asked for
//! `$alt=json;enum-encoding=int` (the official Rust clients do; Google's Python client
//! does not): then as integers. Errors are Google's
//! `{"error": {"code", "message", "status"}}` (Cloud Storage's own shape for its JSON
//! API). Only the configured project exists: any other answers 403
//! `PERMISSION_DENIED`, as Google does for a project the caller cannot see.
//!
//! Time: the stand-in keeps time on a [`Clock`] ([`GcpServer::clock`]: a
//! [`ManualClock`] of its own unless [`GcpServer::start_with`] is given one; the
//! `gcp-stand-in` binary keeps the real time). Long-running work is done
//! [`GcpServer::settling`] after it started ([`DEFAULT_SETTLING`] unless set), whether
//! anyone reads it, lists it or never looks at it: a long-running operation
//! (`google.longrunning.Operation`, with its `metadata`, or Cloud SQL's
//! `sql#operation`) answers `done: false` (or `RUNNING`) until then; a Cloud SQL
//! instance is `PENDING_CREATE` (or `PENDING_DELETE`) until then; a Cloud Run service
//! is `reconciling`, its conditions `CONDITION_RECONCILING`, its ready revision and
//! traffic those of before, until then. A client that shares the stand-in's
//! [`ManualClock`] and sleeps on it between polls moves time on.
//!
//! Held against evidence this project did not write: Google's discovery documents
//! ([`discovery`], with the traffic `infra_testkit::relay` records), Google's Python client
//! (`infra-gcp/tests/official_client/`), and, for buckets, fake-gcs-server. What it
//! still does not model, and so what no test run on it can show:
//!
//! | service | not modelled |
//! |---|---|
//! | all | authentication and authorisation (any caller may do anything in the project; denials only on cue); quotas (throttling only on cue, or by a rate armed per API); request validation beyond what each service's docs list (an unknown field in a request body is ignored, not refused); `fields`, `prettyPrint` and other system parameters (ignored); project numbers in names (the id given is answered back); operations that end in an error |
//! | Cloud Storage | objects; IAM policies, ACLs, CORS, retention, encryption, autoclass, logging, website and the other bucket settings (not stored: a new bucket answers the defaults); `buckets.update` (PUT) |
//! | Secret Manager | regional secrets (`/locations/`); disabling and destroying versions; rotation and topics acted on; list filters (refused); IAM |
//! | Artifact Registry | images and packages; remote and virtual repositories; cleanup policies acted on; KMS keys; IAM; list filters and ordering (refused); operations are done by time, never cancelled |
//! | Cloud Run | revisions as resources; traffic splits (all traffic to the latest revision); a rollout that fails (an image that does not exist, a container that does not start); the soft delete of services (`showDeleted`); IAM on services; whether a service account or a secret referred to exists; a write to a service mid-rollout is accepted and supersedes it |
//! | Cloud SQL | MySQL and SQL Server; replicas; the week a deleted instance's name stays taken; restarts, maintenance, private networking, storage growth |
//! | IAM and Resource Manager | which predefined roles exist; whether a `user:` or `group:` member is a real account; conditions evaluated; service account keys; undeleting an account; IAM's eventual consistency (the shared `lag` fault stands in) |
//!
//! Faults, on cue: [`deny`](GcpServer::deny) a service (403), [`fail_reads`](GcpServer::fail_reads)
//! of one resource (500, and its service's lists with it, since they answer it whole), [`throttle`](GcpServer::throttle) the next calls (429
//! `RESOURCE_EXHAUSTED`), [`lag`](GcpServer::lag) reads after a create (404 for a while:
//! eventual consistency), [`lose_answers`](GcpServer::lose_answers): the next
//! writes are carried out but answered 504, so that the client cannot tell,
//! [`deny_policy_writes`](GcpServer::deny_policy_writes) of resources' IAM policies,
//! and a throttling [`storm`](GcpServer::storm) on a clock the test gives, refusing with
//! 429 `RESOURCE_EXHAUSTED`. Throttling by rate, when armed ([`GcpServer::limit_rate`],
//! off by default): a token bucket per API, the calls beyond it answered 429
//! `RESOURCE_EXHAUSTED` with a `Retry-After`.
//!
//! The server records every request (method, path, query, body) with secret payloads
//! replaced by `"<redacted>"`, never a token. Dropping the server stops it.

mod artifacts;
pub mod discovery;
mod iam;
mod policies;
mod pubsub;
mod rate;
mod run;
mod secrets;
mod sql;
mod storage;
mod wire;

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use serde_json::{Value, json};

use infra_core::sdk::{Clock, ManualClock};

use crate::conformance::ConformanceHooks;
pub use crate::http::RecordedRequest;
use crate::http::{Running, decode, parse_query, storm_call};
use crate::storm::{Storm, StormCall, StormState};
pub use rate::RateLimit;
use wire::{Enums, Operations, Reply, Req};

/// The largest request body served (8 MiB).
const MAX_BODY: usize = 8 << 20;

/// How long a long-running operation takes when nothing else was said.
pub const DEFAULT_SETTLING: Duration = Duration::from_secs(3);

/// Resource Manager's `Project.State`.
const PROJECT_ENUMS: Enums = Enums(&[(
    "state",
    &[
        ("STATE_UNSPECIFIED", 0),
        ("ACTIVE", 1),
        ("DELETE_REQUESTED", 2),
    ],
)]);

/// A service the stand-in serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum GcpService {
    /// Cloud Storage's JSON API.
    Storage,
    /// Secret Manager.
    SecretManager,
    /// Artifact Registry.
    ArtifactRegistry,
    /// Cloud Run.
    Run,
    /// Cloud SQL.
    Sql,
    /// IAM service accounts.
    Iam,
    /// Resource Manager.
    ResourceManager,
    /// Pub/Sub's admin API (topics, subscriptions).
    PubSub,
}

impl GcpService {
    /// The service a request path belongs to.
    pub fn of_path(path: &str) -> Option<GcpService> {
        if path.starts_with("/storage/v1/") {
            return Some(GcpService::Storage);
        }
        if path.starts_with("/v3/projects") {
            return Some(GcpService::ResourceManager);
        }
        if path.starts_with("/v2/projects/") {
            return Some(GcpService::Run);
        }
        let rest = path.strip_prefix("/v1/projects/")?;
        let mut parts = rest.split('/');
        let _project = parts.next();
        match parts.next()? {
            s if s.starts_with("secrets") => Some(GcpService::SecretManager),
            s if s.starts_with("serviceAccounts") => Some(GcpService::Iam),
            s if s.starts_with("topics") || s.starts_with("subscriptions") => {
                Some(GcpService::PubSub)
            }
            "instances" | "operations" => Some(GcpService::Sql),
            "locations" => Some(GcpService::ArtifactRegistry),
            _ => None,
        }
    }

    /// The enumerations of the service's messages, by field name (Cloud SQL and Cloud
    /// Storage write their own: none here).
    fn enums(self) -> Enums {
        match self {
            GcpService::SecretManager => secrets::ENUMS,
            GcpService::ArtifactRegistry => artifacts::ENUMS,
            GcpService::Run => run::ENUMS,
            GcpService::ResourceManager => PROJECT_ENUMS,
            GcpService::Iam => iam::ENUMS,
            GcpService::Storage | GcpService::Sql | GcpService::PubSub => Enums::NONE,
        }
    }

    /// The service that realises a portable kind, for the conformance hooks.
    pub fn of_kind(kind: &str) -> Option<GcpService> {
        match kind {
            "objectStore" => Some(GcpService::Storage),
            "secrets" => Some(GcpService::SecretManager),
            "imageRegistry" => Some(GcpService::ArtifactRegistry),
            "compute" => Some(GcpService::Run),
            "postgres" => Some(GcpService::Sql),
            "iam" => Some(GcpService::Iam),
            _ => None,
        }
    }
}

/// The last path segment of every list the stand-in serves.
const LISTED_COLLECTIONS: &[&str] = &[
    "b",
    "secrets",
    "repositories",
    "services",
    "instances",
    "serviceAccounts",
    "topics",
    "subscriptions",
];

/// Faults armed on the stand-in.
#[derive(Debug, Default)]
struct Faults {
    denied: BTreeSet<GcpService>,
    failing_reads: Vec<(GcpService, String)>,
    throttled: BTreeMap<GcpService, u32>,
    lost: BTreeMap<GcpService, u32>,
    lag: u32,
    lagging: BTreeMap<String, u32>,
}

/// The clock the stand-in keeps time on.
struct TimeSource(Arc<dyn Clock>);

impl std::fmt::Debug for TimeSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TimeSource({:?})", self.0.now())
    }
}

/// The stand-in's state: every service's resources, behind one lock.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) project: String,
    pub(crate) ops: Operations,
    pub(crate) storage: storage::Storage,
    pub(crate) secrets: secrets::Secrets,
    pub(crate) artifacts: artifacts::Artifacts,
    pub(crate) run: run::Run,
    pub(crate) sql: sql::Sql,
    pub(crate) iam: iam::Iam,
    pub(crate) pubsub: pubsub::PubSub,
    pub(crate) policies: policies::Policies,
    storm: StormState,
    /// The rate each API admits, when one is armed.
    rates: rate::Rates,
    /// How many calls the rate refused.
    refused_by_rate: u64,
    /// The time: long-running work is done when its time has come on this clock.
    clock: TimeSource,
    /// How long the long-running work started from now takes.
    settling: Duration,
    /// The last timestamp answered, in microseconds after the clock's origin.
    last_stamp: u128,
    faults: Faults,
    requests: Vec<RecordedRequest>,
}

impl State {
    fn new(project: &str, clock: Arc<dyn Clock>) -> Self {
        State {
            project: project.to_owned(),
            ops: Operations::default(),
            storage: storage::Storage::default(),
            secrets: secrets::Secrets::default(),
            artifacts: artifacts::Artifacts::default(),
            run: run::Run::default(),
            sql: sql::Sql::default(),
            iam: iam::Iam::default(),
            pubsub: pubsub::PubSub::default(),
            policies: policies::Policies::default(),
            storm: StormState::default(),
            rates: rate::Rates::default(),
            refused_by_rate: 0,
            clock: TimeSource(clock),
            settling: DEFAULT_SETTLING,
            last_stamp: 0,
            faults: Faults::default(),
            requests: Vec::new(),
        }
    }

    /// A state on a clock of its own, for the services' unit tests.
    #[cfg(test)]
    fn for_tests(project: &str) -> Self {
        State::new(project, Arc::new(ManualClock::new()))
    }

    /// The time now, on the stand-in's clock.
    pub(crate) fn now(&self) -> Duration {
        self.clock.0.now()
    }

    /// When long-running work started now is done.
    pub(crate) fn due(&self) -> Duration {
        self.now() + self.settling
    }

    /// Carries out whatever long-running work is due by now, whether or not anyone
    /// looks at it: it is called before every request is served.
    fn settle(&mut self) {
        let now = self.now();
        let stamp = rfc3339(now.as_micros());
        self.sql.settle(now, &stamp);
        self.run.settle(now);
    }

    /// A timestamp (RFC 3339, microseconds) of the clock's time, counted from
    /// 2026-12-01T00:00:00Z, and later than every one answered before.
    pub(crate) fn timestamp(&mut self) -> String {
        let now = self.now().as_micros();
        self.last_stamp = now.max(self.last_stamp + 1);
        rfc3339(self.last_stamp)
    }

    /// Says a resource was just created at `path` (its GET path): with a lag armed,
    /// its next reads answer 404 for a while.
    pub(crate) fn created(&mut self, path: &str) {
        if self.faults.lag > 0 {
            self.faults.lagging.insert(path.to_owned(), self.faults.lag);
        }
    }

    /// Whether `project` is the one project that exists.
    pub(crate) fn is_project(&self, project: &str) -> bool {
        project == self.project
    }

    /// The refusal of a request naming a project that is not the stand-in's.
    pub(crate) fn foreign_project(project: &str) -> Reply {
        Reply::denied(format!(
            "the caller does not have permission on project {project}, or it does not exist"
        ))
    }

    /// Serves one request.
    fn answer(&mut self, req: &Req<'_>) -> Reply {
        self.settle();
        if let Some(refused) = self.stormed(req) {
            return refused;
        }
        let service = GcpService::of_path(req.path);
        if let Some(service) = service
            && let Err(wait) = self.rates.take(service, self.now())
        {
            self.refused_by_rate += 1;
            return Reply::error(
                429,
                "RESOURCE_EXHAUSTED",
                format!(
                    "Quota exceeded for quota metric 'Requests' and limit 'Requests per \
                     second' of service {service:?} (a rate armed on the stand-in)"
                ),
            )
            .with_retry_after(rate::retry_after(wait));
        }
        if let Some(service) = service
            && let Some(reply) = self.fault(service, req)
        {
            return reply;
        }
        let reply = match service {
            Some(GcpService::Storage) => storage::route(self, req),
            Some(GcpService::SecretManager) => secrets::route(self, req),
            Some(GcpService::ArtifactRegistry) => artifacts::route(self, req),
            Some(GcpService::Run) => policies::route(self, req).or_else(|| run::route(self, req)),
            Some(GcpService::PubSub) => {
                policies::route(self, req).or_else(|| pubsub::route(self, req))
            }
            Some(GcpService::Sql) => sql::route(self, req),
            Some(GcpService::Iam) => iam::route(self, req),
            Some(GcpService::ResourceManager) => self
                .project_get(req)
                .or_else(|| iam::route_project_policy(self, req)),
            None => None,
        };
        let reply = reply.unwrap_or_else(|| {
            Reply::error(
                404,
                "NOT_FOUND",
                format!("{} {} is not served by this stand-in", req.method, req.path),
            )
        });
        let mut reply = match service {
            Some(service) if req.method != "GET" && reply.status < 300 => self.lose(service, reply),
            _ => reply,
        };
        if let Some(service) = service
            && wire::int_enums(req.query)
            && reply.status < 300
        {
            service.enums().write_as_numbers(&mut reply.body);
        }
        reply
    }

    /// The refusal of `req`, when a storm armed refuses it.
    fn stormed(&mut self, req: &Req<'_>) -> Option<Reply> {
        if !self.storm.is_armed() {
            return None;
        }
        let (what, call) = storm_call(req.method, req.path, req.query, req.body);
        let refused = self.storm.receive(req.method, &what, &call)?;
        let reply = Reply::error(
            429,
            "RESOURCE_EXHAUSTED",
            "Quota exceeded for quota metric 'Requests' and limit 'Requests per minute' \
             (a throttling storm armed on the stand-in)",
        );
        Some(match refused.retry_after {
            Some(wait) => reply.with_retry_after(wait),
            None => reply,
        })
    }

    /// `GET /v3/projects/{id}`.
    fn project_get(&mut self, req: &Req<'_>) -> Option<Reply> {
        let rest = req.under("/v3/projects")?;
        if req.method != "GET" || rest.len() != 1 || rest[0].contains(':') {
            return None;
        }
        if !self.is_project(rest[0]) {
            return Some(State::foreign_project(rest[0]));
        }
        Some(Reply::ok(json!({
            "name": "projects/123456789012",
            "parent": "organizations/210987654321",
            "projectId": self.project,
            "state": "ACTIVE",
            "displayName": self.project,
            "createTime": "2026-01-05T09:00:00.000000Z",
            "updateTime": "2026-01-05T09:00:00.000000Z",
            "etag": "W/\"5bd4d1a1c6c3a7e2\"",
        })))
    }

    /// The fault armed for this request, if any.
    fn fault(&mut self, service: GcpService, req: &Req<'_>) -> Option<Reply> {
        let faults = &mut self.faults;
        if faults.denied.contains(&service) {
            return Some(Reply::denied(format!(
                "permission denied on {service:?} (a fault armed on the stand-in)"
            )));
        }
        if let Some(left) = faults.throttled.get_mut(&service).filter(|n| **n > 0) {
            *left -= 1;
            return Some(Reply::error(
                429,
                "RESOURCE_EXHAUSTED",
                "Quota exceeded for quota metric 'Requests' (a fault armed on the stand-in)",
            ));
        }
        if req.method == "GET" {
            let last = req.path.rsplit('/').next().unwrap_or("");
            // A list answers its resources whole, as their reads do: while one
            // resource's reads fail, so do the lists of its service.
            let listing = LISTED_COLLECTIONS.contains(&last);
            let failing = faults.failing_reads.iter().any(|(s, id)| {
                *s == service && (listing || last == id || req.path.contains(&format!("/{id}/")))
            });
            if failing {
                return Some(Reply::error(
                    500,
                    "INTERNAL",
                    "Internal error encountered (a fault armed on the stand-in)",
                ));
            }
            if let Some(left) = faults.lagging.get_mut(req.path) {
                *left -= 1;
                if *left == 0 {
                    faults.lagging.remove(req.path);
                }
                return Some(Reply::not_found(format!(
                    "{} (not yet visible: a fault armed on the stand-in)",
                    req.path
                )));
            }
        }
        None
    }

    /// A write carried out, whose answer is lost when armed.
    fn lose(&mut self, service: GcpService, reply: Reply) -> Reply {
        match self.faults.lost.get_mut(&service).filter(|n| **n > 0) {
            Some(left) => {
                *left -= 1;
                Reply::error(
                    504,
                    "DEADLINE_EXCEEDED",
                    "the request was carried out but its answer was lost (a fault armed on the stand-in)",
                )
            }
            None => reply,
        }
    }
}

/// A running stand-in (see the module documentation).
#[derive(Debug)]
pub struct GcpServer {
    running: Running<State>,
}

impl GcpServer {
    /// Starts a stand-in for `project` on a free port of `127.0.0.1`, on a
    /// [`ManualClock`] of its own ([`GcpServer::clock`]: give it to the clients, whose
    /// waits then move it on), its long-running work taking [`DEFAULT_SETTLING`].
    ///
    /// # Errors
    /// When no port can be bound.
    pub async fn start(project: &str) -> io::Result<Self> {
        Self::start_with(project, 0, Arc::new(ManualClock::new())).await
    }

    /// Starts a stand-in for `project` on `port` of `127.0.0.1` (0: a free one), on
    /// a [`ManualClock`] of its own.
    ///
    /// # Errors
    /// When the port cannot be bound.
    pub async fn start_on(project: &str, port: u16) -> io::Result<Self> {
        Self::start_with(project, port, Arc::new(ManualClock::new())).await
    }

    /// Starts a stand-in for `project` on `port` of `127.0.0.1` (0: a free one), on
    /// `clock` (a test's [`ManualClock`], or the real clock for a process).
    ///
    /// # Errors
    /// When the port cannot be bound.
    pub async fn start_with(project: &str, port: u16, clock: Arc<dyn Clock>) -> io::Result<Self> {
        let running = Running::start(
            port,
            |_| State::new(project, clock),
            |state, request| async move { answer(&state, request).await },
        )
        .await?;
        Ok(GcpServer { running })
    }

    /// The clock the stand-in keeps time on.
    #[must_use]
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.state().clock.0)
    }

    /// The base address, `http://127.0.0.1:PORT`.
    #[must_use]
    pub fn address(&self) -> String {
        self.running.address()
    }

    /// The project that exists.
    #[must_use]
    pub fn project(&self) -> String {
        self.state().project.clone()
    }

    /// Sets how long the long-running work started from now takes on the stand-in's
    /// clock: operations, Cloud SQL instances leaving `PENDING_CREATE`, Cloud Run
    /// services reconciling. Zero: done at once.
    pub fn settling(&self, settling: Duration) {
        self.state().settling = settling;
    }

    /// Every call to `service` answers 403 `PERMISSION_DENIED` until restored.
    pub fn deny(&self, service: GcpService) {
        self.state().faults.denied.insert(service);
    }

    /// Reads (GETs) of the resource whose last name segment is `id` answer 500
    /// `INTERNAL` until restored, and so do the lists of `service` (a list answers
    /// each resource whole: it is a read of it too).
    pub fn fail_reads(&self, service: GcpService, id: &str) {
        self.state()
            .faults
            .failing_reads
            .push((service, id.to_owned()));
    }

    /// The next `calls` calls to `service` answer 429 `RESOURCE_EXHAUSTED`.
    pub fn throttle(&self, service: GcpService, calls: u32) {
        *self.state().faults.throttled.entry(service).or_default() += calls;
    }

    /// Throttles by rate from now on: each API (each [`GcpService`]) admits calls as
    /// a token bucket of `limit` does, and answers the calls beyond it 429
    /// `RESOURCE_EXHAUSTED` with a `Retry-After` of the whole seconds until its next
    /// token (at least one), as a quota per minute and API does on Google Cloud, on the
    /// stand-in's clock. `None` lifts it (the default: no rate). [`restore`](Self::restore)
    /// leaves it armed.
    pub fn limit_rate(&self, limit: Option<RateLimit>) {
        self.state().rates.set(limit);
    }

    /// How many calls the rate armed by [`limit_rate`](Self::limit_rate) refused so far.
    #[must_use]
    pub fn refused_by_rate(&self) -> u64 {
        self.state().refused_by_rate
    }

    /// From now on, each resource created answers its next `reads` GETs with 404, as
    /// an eventually consistent service does; 0 turns it off.
    pub fn lag(&self, reads: u32) {
        self.state().faults.lag = reads;
    }

    /// The next `writes` successful writes to `service` are carried out and answered
    /// 504 `DEADLINE_EXCEEDED`.
    pub fn lose_answers(&self, service: GcpService, writes: u32) {
        *self.state().faults.lost.entry(service).or_default() += writes;
    }

    /// Lifts every fault, the storm and the refusal of policy writes included.
    pub fn restore(&self) {
        let mut state = self.state();
        state.faults = Faults::default();
        state.policies.deny_writes = false;
        state.storm.lift();
    }

    /// Every `setIamPolicy` of a resource (a Cloud Run service, a Pub/Sub topic or
    /// subscription) answers 403 `PERMISSION_DENIED` until restored.
    pub fn deny_policy_writes(&self) {
        self.state().policies.deny_writes = true;
    }

    /// Arms `storm` from now: for its length, on its clock, a share of every call is
    /// refused with 429 `RESOURCE_EXHAUSTED`. Arming another replaces it; the calls of
    /// the one before are forgotten.
    pub fn storm(&self, storm: Storm) {
        self.state().storm.arm(storm);
    }

    /// The calls received since the storm was armed (during it and after it, until
    /// restored), oldest first, with their times on its clock; empty when none was
    /// armed.
    #[must_use]
    pub fn storm_calls(&self) -> Vec<StormCall> {
        self.state().storm.calls()
    }

    /// The bindings of the IAM policy of `resource` (a Cloud Run service, a Pub/Sub
    /// topic or subscription), `(role, members)` each; empty when none was written.
    #[must_use]
    pub fn policy_bindings(&self, resource: &str) -> Vec<(String, Vec<String>)> {
        policies::bindings_of(&self.state(), resource)
    }

    /// The Pub/Sub topics and subscriptions that exist, by resource name.
    #[must_use]
    pub fn pubsub_names(&self) -> (Vec<String>, Vec<String>) {
        let state = self.state();
        (
            state.pubsub.topic_names(),
            state.pubsub.subscription_names(),
        )
    }

    /// The requests served so far, oldest first.
    #[must_use]
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state().requests.clone()
    }

    /// Forgets the requests recorded so far.
    pub fn clear_requests(&self) {
        self.state().requests.clear();
    }

    /// Stops the server and waits until it has stopped.
    pub async fn shutdown(self) {
        self.running.shutdown().await;
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.running.state()
    }
}

/// [`ConformanceHooks`] over a [`GcpServer`]: `deny` denies the kind's whole service,
/// `fail_reads` fails the reads of the one resource (and its service's lists, which
/// answer it whole; the hooks may fail every read of the kind). Kinds the stand-in does not serve
/// (`queues`, on the Pub/Sub emulator) answer `false`, and their checks are skipped.
#[derive(Debug, Clone)]
pub struct GcpHooks {
    state: Arc<Mutex<State>>,
}

impl GcpHooks {
    /// Hooks on `server`.
    #[must_use]
    pub fn new(server: &GcpServer) -> Self {
        GcpHooks {
            state: server.running.shared(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ConformanceHooks for GcpHooks {
    fn deny(&self, provider: &str, kind: &'static str, _region: &str) -> bool {
        match GcpService::of_kind(kind).filter(|_| provider == "gcp") {
            Some(service) => {
                let mut state = self.state();
                state.faults.denied.insert(service);
                if service == GcpService::Iam {
                    state.faults.denied.insert(GcpService::ResourceManager);
                }
                true
            }
            None => false,
        }
    }

    fn fail_reads(&self, provider: &str, kind: &'static str, _region: &str, handle: &str) -> bool {
        match GcpService::of_kind(kind).filter(|_| provider == "gcp") {
            Some(service) => {
                let id = handle
                    .trim_end_matches('/')
                    .rsplit('/')
                    .next()
                    .unwrap_or(handle);
                self.state()
                    .faults
                    .failing_reads
                    .push((service, id.to_owned()));
                true
            }
            None => false,
        }
    }

    fn restore(&self) {
        self.state().faults = Faults::default();
    }
}

/// The body as recorded: secret payloads (`payload.data`) replaced.
fn redacted(body: &Value) -> Value {
    let mut body = body.clone();
    if let Some(data) = body.pointer_mut("/payload/data") {
        *data = Value::String("<redacted>".to_owned());
    }
    for key in ["rootPassword", "password"] {
        if let Some(v) = body.get_mut(key) {
            *v = Value::String("<redacted>".to_owned());
        }
    }
    body
}

/// `micros` after 2026-12-01T00:00:00Z, in RFC 3339.
fn rfc3339(micros: u128) -> String {
    // Days from 1970-01-01 to 2026-12-01.
    const ORIGIN_DAYS: i64 = 20_788;
    let seconds = i64::try_from(micros / 1_000_000).unwrap_or(i64::MAX / 2);
    let fraction = micros % 1_000_000;
    let days = ORIGIN_DAYS + seconds.div_euclid(86_400);
    let second_of_day = seconds.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{fraction:06}Z",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60
    )
}

async fn answer(state: &Mutex<State>, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let method = parts.method.as_str().to_owned();
    let path = decode(parts.uri.path());
    let query = parse_query(parts.uri.query());
    let reply = match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => {
            let bytes = collected.to_bytes();
            let body: Result<Value, _> = if bytes.iter().all(u8::is_ascii_whitespace) {
                Ok(Value::Null)
            } else {
                serde_json::from_slice(&bytes)
            };
            // The services read enums as names; the log keeps the body as sent.
            let service = GcpService::of_path(&path);
            let body = body.map_err(|e| e.to_string()).and_then(|sent| {
                let mut read = sent.clone();
                match service {
                    Some(service) => service
                        .enums()
                        .read_as_names(&mut read)
                        .map(|()| (sent, read)),
                    None => Ok((sent, read)),
                }
            });
            match body {
                Ok((body, read)) => {
                    let req = Req {
                        method: &method,
                        path: &path,
                        query: &query,
                        body: &read,
                    };
                    let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
                    let reply = state.answer(&req);
                    let mut recorded_query = query.clone();
                    recorded_query.remove("$alt");
                    state.requests.push(RecordedRequest {
                        method: method.clone(),
                        path: path.clone(),
                        query: recorded_query,
                        body: redacted(&body),
                        status: reply.status,
                    });
                    reply
                }
                Err(e) => Reply::invalid(format!("Invalid JSON payload received. {e}")),
            }
        }
        Err(_) => Reply::error(
            413,
            "INVALID_ARGUMENT",
            "request body too large or cut short",
        ),
    };
    let mut response = Response::builder()
        .status(reply.status)
        .header("content-type", "application/json; charset=UTF-8");
    if let Some(wait) = reply.retry_after {
        response = response.header("retry-after", wait.as_secs().to_string());
    }
    response
        .body(Full::new(Bytes::from(reply.body.to_string())))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state on a manual clock the test moves, its work taking ten seconds.
    fn timed() -> (State, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new());
        let mut state = State::new("p1", Arc::clone(&clock) as Arc<dyn Clock>);
        state.settling = Duration::from_secs(10);
        (state, clock)
    }

    /// Serves `method path?query` with `body` as the server does (enums read as names
    /// first).
    fn call(
        state: &mut State,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        body: Value,
    ) -> Reply {
        let query: BTreeMap<String, String> = query
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let mut body = body;
        if let Some(service) = GcpService::of_path(path) {
            service
                .enums()
                .read_as_names(&mut body)
                .expect("known enums");
        }
        state.answer(&Req {
            method,
            path,
            query: &query,
            body: &body,
        })
    }

    #[test]
    fn long_running_work_settles_with_time_whether_or_not_anyone_looks() {
        let (mut s, clock) = timed();
        let op = call(
            &mut s,
            "POST",
            "/v1/projects/p1/instances",
            &[],
            json!({"name": "pg", "databaseVersion": "POSTGRES_15", "settings": {"tier": "db-f1-micro"}}),
        );
        assert_eq!(op.status, 200, "{}", op.body);
        let name = op.body["name"].as_str().unwrap().to_owned();
        let run = call(
            &mut s,
            "POST",
            "/v2/projects/p1/locations/europe-west1/services",
            &[("serviceId", "web")],
            json!({"template": {"containers": [{"image": "us-docker.pkg.dev/x/y"}]}}),
        );
        assert_eq!(run.body["done"], false);
        assert_eq!(run.body["metadata"]["reconciling"], true);
        let listed = call(&mut s, "GET", "/v1/projects/p1/instances", &[], Value::Null);
        assert_eq!(listed.body["items"][0]["state"], "PENDING_CREATE");
        let services = call(
            &mut s,
            "GET",
            "/v2/projects/p1/locations/europe-west1/services",
            &[],
            Value::Null,
        );
        let web = &services.body["services"][0];
        assert_eq!(web["reconciling"], true);
        assert_eq!(web["terminalCondition"]["state"], "CONDITION_RECONCILING");
        assert!(web.get("latestReadyRevision").is_none());
        // Time passes; nobody looks.
        clock.advance(Duration::from_secs(10));
        let listed = call(&mut s, "GET", "/v1/projects/p1/instances", &[], Value::Null);
        assert_eq!(
            listed.body["items"][0]["state"], "RUNNABLE",
            "settled without a read"
        );
        let op = call(
            &mut s,
            "GET",
            &format!("/v1/projects/p1/operations/{name}"),
            &[],
            Value::Null,
        );
        assert_eq!(op.body["status"], "DONE", "done at its first look");
        let services = call(
            &mut s,
            "GET",
            "/v2/projects/p1/locations/europe-west1/services",
            &[],
            Value::Null,
        );
        let web = &services.body["services"][0];
        assert_eq!(web["reconciling"], false);
        assert_eq!(web["terminalCondition"]["state"], "CONDITION_SUCCEEDED");
        assert_eq!(web["latestReadyRevision"], web["latestCreatedRevision"]);
        assert_eq!(
            web["terminalCondition"]["lastTransitionTime"],
            "2026-12-01T00:00:10.000000Z"
        );
        let op_name = run.body["name"].as_str().unwrap();
        let done = call(&mut s, "GET", &format!("/v2/{op_name}"), &[], Value::Null);
        assert_eq!(done.body["done"], true);
        assert_eq!(done.body["response"]["reconciling"], false);
    }

    #[test]
    fn enums_are_names_unless_the_request_asks_for_numbers() {
        let (mut s, clock) = timed();
        let repos = "/v1/projects/p1/locations/europe-west1/repositories";
        let int = [("$alt", "json;enum-encoding=int")];
        // Sent as a number (as the Rust clients do), answered as asked.
        let op = call(
            &mut s,
            "POST",
            repos,
            &[("repositoryId", "a"), int[0]],
            json!({"format": 1}),
        );
        assert_eq!(op.status, 200, "{}", op.body);
        assert_eq!(
            op.body["metadata"]["@type"],
            "type.googleapis.com/google.devtools.artifactregistry.v1.OperationMetadata"
        );
        clock.advance(Duration::from_secs(10));
        let path = format!("{repos}/a");
        let names = call(&mut s, "GET", &path, &[], Value::Null);
        assert_eq!(names.body["format"], "DOCKER");
        assert_eq!(names.body["mode"], "STANDARD_REPOSITORY");
        assert_eq!(
            names.body["vulnerabilityScanningConfig"]["enablementState"],
            "SCANNING_ACTIVE"
        );
        let numbers = call(&mut s, "GET", &path, &int, Value::Null);
        assert_eq!(numbers.body["format"], 1);
        assert_eq!(
            numbers.body["vulnerabilityScanningConfig"]["enablementState"],
            3
        );
        let project = call(&mut s, "GET", "/v3/projects/p1", &[], Value::Null);
        assert_eq!(project.body["state"], "ACTIVE");
        let project = call(&mut s, "GET", "/v3/projects/p1", &int, Value::Null);
        assert_eq!(project.body["state"], 1);
        let secret = "/v1/projects/p1/secrets";
        call(
            &mut s,
            "POST",
            secret,
            &[("secretId", "x")],
            json!({"replication": {"automatic": {}}}),
        );
        let version = call(
            &mut s,
            "POST",
            &format!("{secret}/x:addVersion"),
            &[],
            json!({"payload": {"data": "eA=="}}),
        );
        assert_eq!(version.body["state"], "ENABLED");
        // A number no enum holds is refused before any service sees it.
        let mut bad = json!({"format": 4});
        assert!(
            GcpService::ArtifactRegistry
                .enums()
                .read_as_names(&mut bad)
                .is_err()
        );
    }

    /// Google's discovery documents give each list method's items the schema its get
    /// answers (`Buckets.items` is `Bucket`, `ListTopicsResponse.topics` is `Topic`, and
    /// so on): every list item the stand-in answers is what a get of it answers.
    #[test]
    fn every_list_item_is_what_a_get_of_it_answers() {
        let (mut s, clock) = timed();
        let created = [
            (
                "POST",
                "/storage/v1/b",
                vec![("project", "p1")],
                json!({"name": "b-1", "labels": {"a": "b"}, "versioning": {"enabled": true}}),
            ),
            (
                "POST",
                "/v1/projects/p1/locations/europe-west1/repositories",
                vec![("repositoryId", "r-1")],
                json!({"format": "DOCKER", "labels": {"a": "b"}}),
            ),
            (
                "PUT",
                "/v1/projects/p1/topics/t-1",
                vec![],
                json!({"labels": {"a": "b"}, "messageRetentionDuration": "86400s"}),
            ),
            (
                "PUT",
                "/v1/projects/p1/subscriptions/t-1",
                vec![],
                json!({"topic": "projects/p1/topics/t-1", "ackDeadlineSeconds": 30, "labels": {"a": "b"}}),
            ),
            (
                "POST",
                "/v1/projects/p1/secrets",
                vec![("secretId", "s-1")],
                json!({"replication": {"automatic": {}}, "labels": {"a": "b"}}),
            ),
            (
                "POST",
                "/v2/projects/p1/locations/europe-west1/services",
                vec![("serviceId", "web")],
                json!({"labels": {"a": "b"}, "template": {"containers": [{"image": "us-docker.pkg.dev/x/y"}]}}),
            ),
            (
                "POST",
                "/v1/projects/p1/instances",
                vec![],
                json!({"name": "pg", "region": "europe-west1", "databaseVersion": "POSTGRES_15", "settings": {"tier": "db-f1-micro", "userLabels": {"a": "b"}}}),
            ),
            (
                "POST",
                "/v1/projects/p1/serviceAccounts",
                vec![],
                json!({"accountId": "sa-one", "serviceAccount": {"description": "d"}}),
            ),
        ];
        for (method, path, query, body) in created {
            let reply = call(&mut s, method, path, &query, body);
            assert_eq!(reply.status, 200, "{method} {path}: {}", reply.body);
        }
        clock.advance(Duration::from_secs(10));
        let lists = [
            ("/storage/v1/b", vec![("project", "p1")], "items"),
            (
                "/v1/projects/p1/locations/europe-west1/repositories",
                vec![],
                "repositories",
            ),
            ("/v1/projects/p1/topics", vec![], "topics"),
            ("/v1/projects/p1/subscriptions", vec![], "subscriptions"),
            ("/v1/projects/p1/secrets", vec![], "secrets"),
            (
                "/v2/projects/p1/locations/europe-west1/services",
                vec![],
                "services",
            ),
            ("/v1/projects/p1/instances", vec![], "items"),
            ("/v1/projects/p1/serviceAccounts", vec![], "accounts"),
        ];
        for (path, query, field) in lists {
            let listed = call(&mut s, "GET", path, &query, Value::Null);
            assert_eq!(listed.status, 200, "{path}: {}", listed.body);
            let items = listed.body[field].as_array().cloned().unwrap_or_default();
            assert_eq!(items.len(), 1, "{path}: {}", listed.body);
            for item in items {
                let name = item["name"].as_str().expect("a name");
                let get_path = match path {
                    "/storage/v1/b" => format!("/storage/v1/b/{name}"),
                    "/v1/projects/p1/instances" => format!("{path}/{name}"),
                    _ if path.starts_with("/v2/") => format!("/v2/{name}"),
                    _ => format!("/v1/{name}"),
                };
                let got = call(&mut s, "GET", &get_path, &[], Value::Null);
                assert_eq!(got.status, 200, "{get_path}: {}", got.body);
                assert_eq!(item, got.body, "the list item of {get_path} is its get");
            }
        }
    }

    #[test]
    fn a_rate_armed_refuses_the_calls_beyond_it_with_a_retry_after() {
        let (mut s, clock) = timed();
        s.rates.set(Some(RateLimit::per_second(2)));
        let list = |s: &mut State| call(s, "GET", "/v1/projects/p1/topics", &[], Value::Null);
        assert_eq!(list(&mut s).status, 200);
        assert_eq!(list(&mut s).status, 200);
        let refused = list(&mut s);
        assert_eq!(refused.status, 429);
        assert_eq!(refused.body["error"]["status"], "RESOURCE_EXHAUSTED");
        assert_eq!(refused.retry_after, Some(Duration::from_secs(1)));
        // Another API is not throttled by this one's calls.
        let secrets = call(&mut s, "GET", "/v1/projects/p1/secrets", &[], Value::Null);
        assert_eq!(secrets.status, 200);
        clock.advance(Duration::from_secs(1));
        assert_eq!(list(&mut s).status, 200);
        assert_eq!(s.refused_by_rate, 1);
    }

    #[test]
    fn timestamps_follow_the_clock_and_never_repeat() {
        assert_eq!(rfc3339(0), "2026-12-01T00:00:00.000000Z");
        assert_eq!(
            rfc3339(31 * 86_400 * 1_000_000 + 1),
            "2027-01-01T00:00:00.000001Z"
        );
        assert_eq!(
            rfc3339(90 * 86_400 * 1_000_000),
            "2027-03-01T00:00:00.000000Z"
        );
        let (mut s, clock) = timed();
        let first = s.timestamp();
        assert!(s.timestamp() > first, "later than every one before");
        clock.advance(Duration::from_secs(3661));
        assert_eq!(s.timestamp(), "2026-12-01T01:01:01.000000Z");
    }

    #[test]
    fn paths_name_their_service() {
        use GcpService as S;
        assert_eq!(S::of_path("/storage/v1/b"), Some(S::Storage));
        assert_eq!(
            S::of_path("/v1/projects/p/secrets/x:addVersion"),
            Some(S::SecretManager)
        );
        assert_eq!(S::of_path("/v1/projects/p/secrets"), Some(S::SecretManager));
        assert_eq!(
            S::of_path("/v1/projects/p/locations/l/repositories"),
            Some(S::ArtifactRegistry)
        );
        assert_eq!(
            S::of_path("/v2/projects/p/locations/l/services"),
            Some(S::Run)
        );
        assert_eq!(S::of_path("/v1/projects/p/instances/db"), Some(S::Sql));
        assert_eq!(S::of_path("/v1/projects/p/operations/op"), Some(S::Sql));
        assert_eq!(S::of_path("/v1/projects/p/serviceAccounts"), Some(S::Iam));
        assert_eq!(
            S::of_path("/v3/projects/p:getIamPolicy"),
            Some(S::ResourceManager)
        );
        assert_eq!(S::of_path("/v9/else"), None);
        assert_eq!(decode("a%3Bb%3Dc"), "a;b=c");
        assert_eq!(
            parse_query(Some("secretId=db&%24alt=json%3Benum-encoding%3Dint"))["$alt"],
            "json;enum-encoding=int"
        );
    }
}
