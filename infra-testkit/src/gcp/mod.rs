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
//! enums as integers (names are accepted too), 64-bit integers as strings, bytes as
//! base64. Errors are Google's `{"error": {"code", "message", "status"}}`. Long-running
//! operations answer `done: false` for [`GcpServer::operation_polls`] polls before their
//! outcome. Only the configured project exists: any other answers 403
//! `PERMISSION_DENIED`, as Google does for a project the caller cannot see.
//!
//! Faults, on cue: [`deny`](GcpServer::deny) a service (403), [`fail_reads`](GcpServer::fail_reads)
//! of one resource (500), [`throttle`](GcpServer::throttle) the next calls (429
//! `RESOURCE_EXHAUSTED`), [`lag`](GcpServer::lag) reads after a create (404 for a while:
//! eventual consistency), [`lose_answers`](GcpServer::lose_answers): the next
//! writes are carried out but answered 504, so that the client cannot tell,
//! [`deny_policy_writes`](GcpServer::deny_policy_writes) of resources' IAM policies,
//! and a throttling [`storm`](GcpServer::storm) on a clock the test gives.
//!
//! The server records every request (method, path, query, body) with secret payloads
//! replaced by `"<redacted>"`, never a token. Dropping the server stops it.

mod artifacts;
mod iam;
mod policies;
mod pubsub;
mod run;
mod secrets;
mod sql;
mod storage;
mod storm;
mod wire;

pub use storm::{Storm, StormCall};

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use serde_json::{Value, json};

use crate::conformance::ConformanceHooks;
pub use crate::http::RecordedRequest;
use crate::http::{Running, decode, parse_query};
use wire::{Operations, Reply, Req};

/// The largest request body served (8 MiB).
const MAX_BODY: usize = 8 << 20;

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
    storm: Option<storm::Armed>,
    tick: u64,
    faults: Faults,
    requests: Vec<RecordedRequest>,
}

impl State {
    fn new(project: &str, polls: u32) -> Self {
        State {
            project: project.to_owned(),
            ops: Operations::new(polls),
            storage: storage::Storage::default(),
            secrets: secrets::Secrets::default(),
            artifacts: artifacts::Artifacts::default(),
            run: run::Run::default(),
            sql: sql::Sql::default(),
            iam: iam::Iam::default(),
            pubsub: pubsub::PubSub::default(),
            policies: policies::Policies::default(),
            storm: None,
            tick: 0,
            faults: Faults::default(),
            requests: Vec::new(),
        }
    }

    /// A timestamp (RFC 3339) later than every one answered before.
    pub(crate) fn timestamp(&mut self) -> String {
        self.tick += 1;
        let (m, s) = (self.tick / 60 % 60, self.tick % 60);
        let h = self.tick / 3600 % 24;
        let d = 1 + self.tick / 86_400 % 28;
        format!("2026-12-{d:02}T{h:02}:{m:02}:{s:02}.000000Z")
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
        if let Some(refused) = self.storm.as_mut().and_then(|s| s.refuse(req)) {
            return refused;
        }
        let service = GcpService::of_path(req.path);
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
        match service {
            Some(service) if req.method != "GET" && reply.status < 300 => self.lose(service, reply),
            _ => reply,
        }
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
            "projectId": self.project,
            "state": 1,
            "displayName": self.project,
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
            let failing = faults.failing_reads.iter().any(|(s, id)| {
                *s == service && (last == id || req.path.contains(&format!("/{id}/")))
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
pub struct GcpServer {
    running: Running<State>,
}

impl std::fmt::Debug for GcpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GcpServer")
            .field("address", &self.running.socket_addr())
            .finish_non_exhaustive()
    }
}

impl GcpServer {
    /// Starts a stand-in for `project` on a free port of `127.0.0.1`, its operations
    /// taking three polls.
    ///
    /// # Errors
    /// When no port can be bound.
    pub async fn start(project: &str) -> io::Result<Self> {
        Self::start_on(project, 0).await
    }

    /// Starts a stand-in for `project` on `port` of `127.0.0.1` (0: a free one).
    ///
    /// # Errors
    /// When the port cannot be bound.
    pub async fn start_on(project: &str, port: u16) -> io::Result<Self> {
        let running = Running::start(
            port,
            |_| State::new(project, 3),
            |state, request| async move { answer(&state, request).await },
        )
        .await?;
        Ok(GcpServer { running })
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

    /// Sets how many polls the long-running operations started from now take (at
    /// least one: the first answer is never done).
    pub fn operation_polls(&self, polls: u32) {
        let mut state = self.state();
        state.ops.set_polls(polls.max(1));
        state.sql.set_polls(polls.max(1));
    }

    /// Every call to `service` answers 403 `PERMISSION_DENIED` until restored.
    pub fn deny(&self, service: GcpService) {
        self.state().faults.denied.insert(service);
    }

    /// Reads (GETs) of the resource whose last name segment is `id` answer 500
    /// `INTERNAL` until restored.
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
        state.storm = None;
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
        self.state().storm = Some(storm::Armed::new(storm));
    }

    /// The calls received since the storm was armed (during it and after it), oldest
    /// first, with their times on its clock; empty when none was armed.
    #[must_use]
    pub fn storm_calls(&self) -> Vec<StormCall> {
        self.state()
            .storm
            .as_ref()
            .map(|s| s.log.clone())
            .unwrap_or_default()
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
/// `fail_reads` fails the reads of the one resource. Kinds the stand-in does not serve
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
            match body {
                Ok(body) => {
                    let req = Req {
                        method: &method,
                        path: &path,
                        query: &query,
                        body: &body,
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
