//! Scaleway stand-ins for tests: one HTTP server on `127.0.0.1` serving, from memory,
//! Scaleway's REST APIs for the products that have no emulator, as Scaleway documents
//! them (Object Storage and Queues speak S3 and SQS: moto's server stands in for them).
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use infra_testkit::scaleway::{ScalewayProduct, ScalewayServer};
//!
//! let server = ScalewayServer::start("project-id", "organization-id").await?;
//! // point the backend at server.address() with the token server.token() …
//! server.throttle(ScalewayProduct::SecretManager, 2); // the next two calls answer 429
//! server.deny(ScalewayProduct::Rdb);                  // every RDB call answers 403
//! server.restore();
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! Served:
//!
//! | product | paths |
//! |---|---|
//! | Account | `/account/v3/projects/{id}` |
//! | Secret Manager | `/secret-manager/v1beta1/regions/{region}/secrets…` |
//! | Container Registry | `/registry/v1/regions/{region}/namespaces…` |
//! | Managed Database for PostgreSQL | `/rdb/v1/regions/{region}/instances…` |
//! | IAM | `/iam/v1alpha1/applications…`, `/iam/v1alpha1/policies…` |
//! | Serverless Functions | `/functions/v1beta1/regions/{region}/namespaces…`, `…/functions…` |
//! | Serverless Containers | `/containers/v1beta1/regions/{region}/namespaces…`, `…/containers…` |
//! | Messaging and Queuing (Queues' activation and credentials) | `/mnq/v1beta1/regions/{region}/activate-sqs`, `…/sqs-info`, `…/sqs-credentials…` |
//!
//! Every call must carry a secret key in `X-Auth-Token`: any well-formed one (a UUID),
//! or only the one of the key pair the server was given ([`ScalewayOptions::key`]); a
//! missing or malformed token answers 401 `denied_authentication` with the reason
//! `invalid_argument`, a well-formed one that is not the server's the reason
//! `not_found`, as Scaleway answers. Errors are Scaleway's `{"type", "message", …}`
//! bodies. Only the configured project exists: a request naming another answers 403
//! `permissions_denied`.
//!
//! Statuses move with time on the server's clock ([`ScalewayOptions::clock`]; tests
//! share their `ManualClock` with the backend, whose polling sleeps move it; the
//! `scaleway-stand-in` binary uses the real clock): a change — a create, an update that
//! redeploys, a delete — leaves its resource in its transient status (`creating`,
//! `pending`, `provisioning`, `configuring`, `deleting`) until the settling time
//! ([`ScalewayOptions::settling`], [`ScalewayServer::settle_for`]) has passed since it,
//! whether the resource is read, listed, or never looked at in between. A write to a
//! busy resource answers 409 `transient_state`.
//!
//! Faults, on cue: [`deny`](ScalewayServer::deny) a product (403),
//! [`fail_reads`](ScalewayServer::fail_reads) of one resource (500),
//! [`throttle`](ScalewayServer::throttle) the next calls (429), and
//! [`lose_answers`](ScalewayServer::lose_answers): the next writes are carried out but
//! answered 504, so that the client cannot tell; and a throttling
//! [`storm`](ScalewayServer::storm) on a clock of the test's, which answers a share of
//! every call 429 `too_many_requests` for a length of that clock's time, recording when
//! each call came ([`storm_calls`](ScalewayServer::storm_calls)).
//!
//! A rate limit per API, off by default ([`ScalewayOptions::rate_per_second`], the
//! binary's `--rate-per-second N`): a token bucket per product, answering 429
//! `too_many_requests` with a `Retry-After` when empty.
//!
//! The server records every request (method, path, query, body) with secret values
//! (`password`, a version's `data`, secret environment variables) replaced by
//! `"<redacted>"`, never the token. Dropping the server stops it.
//!
//! # Where it differs from Scaleway, on purpose
//!
//! `infra-scaleway`'s tests replay traffic recorded against Scaleway's live API (by the
//! acceptance tests of Scaleway's Terraform provider) against the stand-in, and compare
//! each answer's status, fields and JSON types, and each resource's status sequence, with
//! the recording. These are the differences that remain, each for its reason; the tests
//! read them from [`DIFFERENCES`], which holds the same rows. `field` is flattened
//! (`volume.size`, `rules[].condition`); `status` is the answer's code, `sequence` a
//! resource's statuses.
//!
//! | product | act | field | why |
//! |---|---|---|---|
//! | account | project-get | `status` | Scaleway's SDK 2.12 types a project with it (required); the recording predates it |
//! | rdb | instance-create | `high_availability_mode` | Scaleway's SDK 2.12 types an instance with it (required); the recordings predate it |
//! | rdb | instance-get | `high_availability_mode` | as for instance-create |
//! | rdb | instance-update | `high_availability_mode` | as for instance-create |
//! | rdb | instance-delete | `high_availability_mode` | as for instance-create |
//! | rdb | instance-upgrade | `high_availability_mode` | as for instance-create |
//!
//! What it cannot model at all is said in each product's module documentation; across
//! products: how long Scaleway takes (one settling time serves every change, where
//! Scaleway's take from seconds to many minutes, and vary), statuses Scaleway reaches on
//! its own (`error` after an image that cannot be pulled, `locked`, `disk_full`),
//! Queues' activation (`mnq`), Object Storage and Queues themselves (moto serves those),
//! and anything of another organization.

mod auth;
mod containers;
mod fleet;
mod functions;
mod iam;
mod mnq;
mod rate;
mod rdb;
mod registry;
mod secrets;
mod wire;

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use infra_core::sdk::{Clock, ManualClock};
use serde_json::{Value, json};

pub use auth::{ApiKey, STAND_IN_ACCESS_KEY, STAND_IN_SECRET_KEY, is_access_key, is_secret_key};

use crate::conformance::ConformanceHooks;
pub use crate::http::RecordedRequest;
use crate::http::{Running, decode, parse_query, storm_call};
use crate::storm::{Storm, StormCall, StormState};
pub use fleet::complete_list_fleet;
use wire::{Reply, Req};

/// The largest request body served (64 MiB: function archives are uploaded elsewhere,
/// but secret versions and configurations come here).
const MAX_BODY: usize = 64 << 20;

/// Where presigned upload URLs (a function's code archive) point: served without a
/// token, as Object Storage serves a presigned URL.
pub(crate) const UPLOADS: &str = "/uploads/";

/// A product the stand-in serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ScalewayProduct {
    /// The Account API (projects).
    Account,
    /// Secret Manager.
    SecretManager,
    /// Container Registry.
    Registry,
    /// Managed Database for PostgreSQL.
    Rdb,
    /// IAM.
    Iam,
    /// Serverless Functions.
    Functions,
    /// Serverless Containers.
    Containers,
    /// Messaging and Queuing: Queues' activation and credentials (the queues
    /// themselves are SQS, served elsewhere).
    Queues,
}

impl ScalewayProduct {
    /// The product a request path belongs to.
    pub fn of_path(path: &str) -> Option<ScalewayProduct> {
        let first = path.trim_start_matches('/').split('/').next()?;
        Some(match first {
            "account" => ScalewayProduct::Account,
            "secret-manager" => ScalewayProduct::SecretManager,
            "registry" => ScalewayProduct::Registry,
            "rdb" => ScalewayProduct::Rdb,
            "iam" => ScalewayProduct::Iam,
            "functions" => ScalewayProduct::Functions,
            "containers" => ScalewayProduct::Containers,
            "mnq" => ScalewayProduct::Queues,
            _ => return None,
        })
    }

    /// The product that realises a kind, for the conformance hooks.
    pub fn of_kind(kind: &str) -> Option<ScalewayProduct> {
        Some(match kind {
            "secrets" => ScalewayProduct::SecretManager,
            "imageRegistry" => ScalewayProduct::Registry,
            "postgres" => ScalewayProduct::Rdb,
            "iam" => ScalewayProduct::Iam,
            "functionNamespace" | "function" | "compute" => ScalewayProduct::Functions,
            "containerNamespace" | "container" => ScalewayProduct::Containers,
            _ => return None,
        })
    }
}

/// Faults armed on the stand-in.
#[derive(Debug, Default)]
struct Faults {
    denied: BTreeSet<ScalewayProduct>,
    failing_reads: Vec<(ScalewayProduct, String)>,
    throttled: BTreeMap<ScalewayProduct, u32>,
    lost: BTreeMap<ScalewayProduct, u32>,
}

/// Queues credentials the stand-in holds (their secret key is not kept: only the answer
/// of their creation holds it).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueuesCredentials {
    /// Their id.
    pub id: String,
    /// Their name.
    pub name: String,
    /// Their access key, which signs SQS calls.
    pub access_key: String,
}

/// The stand-in's state: every product's resources, behind one lock.
#[derive(Debug)]
pub(crate) struct State {
    /// The server's base address (`http://127.0.0.1:PORT`), for URLs it hands out.
    pub(crate) address: String,
    pub(crate) project: String,
    pub(crate) organization: String,
    /// The API key the stand-in accepts: any well-formed one, or the one it was given.
    keys: auth::Keys,
    /// The clock statuses settle on, and how long a change takes on it.
    settle: wire::Settle,
    pub(crate) secrets: secrets::Secrets,
    pub(crate) registry: registry::Registry,
    pub(crate) rdb: rdb::Rdb,
    pub(crate) iam: iam::Iam,
    pub(crate) functions: functions::Functions,
    pub(crate) containers: containers::Containers,
    pub(crate) mnq: mnq::Mnq,
    tick: u64,
    ids: u64,
    faults: Faults,
    storm: StormState,
    rate: rate::Rate,
    requests: Vec<RecordedRequest>,
}

impl State {
    fn new(address: &str, project: &str, organization: &str, options: &ScalewayOptions) -> Self {
        State {
            address: address.to_owned(),
            project: project.to_owned(),
            organization: organization.to_owned(),
            keys: options.keys.clone(),
            settle: wire::Settle::new(Arc::clone(&options.clock), options.settling),
            secrets: secrets::Secrets::default(),
            registry: registry::Registry::default(),
            rdb: rdb::Rdb::default(),
            iam: iam::Iam::default(),
            functions: functions::Functions::default(),
            containers: containers::Containers::default(),
            mnq: mnq::Mnq::default(),
            tick: 0,
            ids: 0,
            faults: Faults::default(),
            storm: StormState::default(),
            rate: rate::Rate::new(options.rate_per_second),
            requests: Vec::new(),
        }
    }

    /// How a change made now settles: on the stand-in's clock, after its settling time.
    pub(crate) fn settle(&self) -> wire::Settle {
        self.settle.clone()
    }

    /// A timestamp (RFC 3339) later than every one answered before.
    pub(crate) fn timestamp(&mut self) -> String {
        self.tick += 1;
        let (m, s) = (self.tick / 60 % 60, self.tick % 60);
        let h = self.tick / 3600 % 24;
        let d = 1 + self.tick / 86_400 % 28;
        format!("2026-12-{d:02}T{h:02}:{m:02}:{s:02}.000000Z")
    }

    /// A fresh id in Scaleway's shape (a UUID).
    pub(crate) fn new_id(&mut self) -> String {
        self.ids += 1;
        format!("{:08x}-5ca1-4e00-8000-{:012x}", self.ids, self.ids * 7919)
    }

    /// The refusal of a request naming a project that is not the stand-in's, or `None`.
    pub(crate) fn foreign_project(&self, project: Option<&str>) -> Option<Reply> {
        match project {
            Some(p) if p != self.project => Some(Reply::denied(format!(
                "the project {p} does not exist or cannot be reached with this key"
            ))),
            _ => None,
        }
    }

    /// Serves one request.
    fn answer(&mut self, req: &Req<'_>, token: Option<&str>) -> Reply {
        if let Some(refused) = self.keys.refusal(token) {
            return refused;
        }
        let product = ScalewayProduct::of_path(req.path);
        if let Some(product) = product
            && let Some(reply) = self.fault(product, req)
        {
            return reply;
        }
        let reply = match product {
            Some(ScalewayProduct::Account) => self.project_get(req),
            Some(ScalewayProduct::SecretManager) => secrets::route(self, req),
            Some(ScalewayProduct::Registry) => registry::route(self, req),
            Some(ScalewayProduct::Rdb) => rdb::route(self, req),
            Some(ScalewayProduct::Iam) => iam::route(self, req),
            Some(ScalewayProduct::Functions) => functions::route(self, req),
            Some(ScalewayProduct::Containers) => containers::route(self, req),
            Some(ScalewayProduct::Queues) => mnq::route(self, req),
            None => None,
        };
        let reply = reply.unwrap_or_else(|| {
            // What Scaleway's gateway answers for a path no API serves.
            Reply::error(
                404,
                "unknown_resource",
                format!("{} {} is not served by this stand-in", req.method, req.path),
                json!({}),
            )
        });
        match product {
            Some(product) if req.method != "GET" && reply.status < 300 => self.lose(product, reply),
            _ => reply,
        }
    }

    /// `GET /account/v3/projects/{id}`.
    fn project_get(&mut self, req: &Req<'_>) -> Option<Reply> {
        let rest = req.under("/account/v3/projects")?;
        if req.method != "GET" || rest.len() != 1 {
            return None;
        }
        if rest[0] != self.project {
            // What Scaleway was recorded answering for a project that is not there.
            return Some(Reply::error(
                404,
                "not_found",
                "resource is not found",
                json!({ "resource": "project_id", "resource_id": rest[0] }),
            ));
        }
        Some(Reply::ok(json!({
            "id": self.project,
            "name": "default",
            "organization_id": self.organization,
            "description": "",
            "status": "active",
            "created_at": "2026-01-01T00:00:00.000000Z",
            "updated_at": "2026-01-01T00:00:00.000000Z",
            "qualification": { "architecture_type": "unknown_architecture_type" },
        })))
    }

    /// The fault armed for this request, if any.
    fn fault(&mut self, product: ScalewayProduct, req: &Req<'_>) -> Option<Reply> {
        let faults = &mut self.faults;
        if faults.denied.contains(&product) {
            return Some(Reply::denied(format!(
                "{product:?} (a fault armed on the stand-in)"
            )));
        }
        if let Some(left) = faults.throttled.get_mut(&product).filter(|n| **n > 0) {
            *left -= 1;
            return Some(Reply::error(
                429,
                "too_many_requests",
                "too many requests (a fault armed on the stand-in)",
                json!({}),
            ));
        }
        if req.method == "GET" {
            let failing = faults
                .failing_reads
                .iter()
                .any(|(p, id)| *p == product && req.path.split('/').any(|segment| segment == id));
            if failing {
                return Some(Reply::error(
                    500,
                    "internal",
                    "internal error (a fault armed on the stand-in)",
                    json!({}),
                ));
            }
        }
        None
    }

    /// Serves one request, unless a storm armed refuses it: the answer, and the wait a
    /// refusal asks for.
    fn answer_in_storm(&mut self, req: &Req<'_>, token: Option<&str>) -> (Reply, Option<Duration>) {
        let refused = if self.storm.is_armed() {
            let (what, call) = storm_call(req.method, req.path, req.query, req.body);
            self.storm.receive(req.method, &what, &call)
        } else {
            None
        };
        let Some(refused) = refused else {
            if let Some(wait) = self.over_rate(req) {
                let message = format!(
                    "too many requests, retry after {} s (the stand-in's rate limit)",
                    wait.as_secs()
                );
                let reply = Reply::error(429, "too_many_requests", message, json!({}));
                return (reply, Some(wait));
            }
            return (self.answer(req, token), None);
        };
        let asked = refused
            .retry_after
            .map(|wait| format!(", retry after {} s", wait.as_secs()))
            .unwrap_or_default();
        let message = format!("too many requests{asked} (a storm armed on the stand-in)");
        (
            Reply::error(429, "too_many_requests", message, json!({})),
            refused.retry_after,
        )
    }

    /// The wait the rate limit asks of `req`, when its product's bucket is empty.
    fn over_rate(&mut self, req: &Req<'_>) -> Option<Duration> {
        let product = ScalewayProduct::of_path(req.path)?;
        let now = self.settle.clock().now();
        self.rate.take(product, now)
    }

    /// Lifts every fault and the storm.
    fn restore(&mut self) {
        self.faults = Faults::default();
        self.storm.lift();
    }

    /// A write carried out, whose answer is lost when armed.
    fn lose(&mut self, product: ScalewayProduct, reply: Reply) -> Reply {
        match self.faults.lost.get_mut(&product).filter(|n| **n > 0) {
            Some(left) => {
                *left -= 1;
                Reply {
                    status: 504,
                    body: Value::String(
                        "<html><body><h1>504 Gateway Time-out</h1></body></html>".to_owned(),
                    ),
                }
            }
            None => reply,
        }
    }
}

/// A deliberate difference between the stand-in's answers and Scaleway's recorded ones
/// (one row of the table of the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Difference {
    /// The product, as the recordings name it (`secret`, `rdb`, `function`, …).
    pub product: &'static str,
    /// The act (`namespace-create`), or `sequence` for a resource's statuses.
    pub act: &'static str,
    /// The field, flattened; `status` for the answer's code; the resource for a
    /// sequence.
    pub field: &'static str,
    /// Why the stand-in differs.
    pub why: &'static str,
}

const fn differs(
    product: &'static str,
    act: &'static str,
    field: &'static str,
    why: &'static str,
) -> Difference {
    Difference {
        product,
        act,
        field,
        why,
    }
}

/// Every deliberate difference between the stand-in's answers and Scaleway's recorded
/// ones: the table of the module documentation.
pub const DIFFERENCES: &[Difference] = &[
    differs(
        "account",
        "project-get",
        "status",
        "Scaleway's SDK 2.12 types a project with it (required); the recording predates it",
    ),
    differs(
        "rdb",
        "instance-create",
        "high_availability_mode",
        "Scaleway's SDK 2.12 types an instance with it (required); the recordings predate it",
    ),
    differs(
        "rdb",
        "instance-get",
        "high_availability_mode",
        "as for instance-create",
    ),
    differs(
        "rdb",
        "instance-update",
        "high_availability_mode",
        "as for instance-create",
    ),
    differs(
        "rdb",
        "instance-delete",
        "high_availability_mode",
        "as for instance-create",
    ),
    differs(
        "rdb",
        "instance-upgrade",
        "high_availability_mode",
        "as for instance-create",
    ),
];

/// How a [`ScalewayServer`] is started: its port, the clock its statuses settle on and
/// how long a change takes on it, and the API key it accepts.
#[derive(Clone)]
pub struct ScalewayOptions {
    port: u16,
    clock: Arc<dyn Clock>,
    settling: Duration,
    keys: auth::Keys,
    rate_per_second: Option<u32>,
}

impl std::fmt::Debug for ScalewayOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScalewayOptions")
            .field("port", &self.port)
            .field("settling", &self.settling)
            .field("keys", &self.keys)
            .field("rate_per_second", &self.rate_per_second)
            .finish_non_exhaustive()
    }
}

impl Default for ScalewayOptions {
    fn default() -> Self {
        ScalewayOptions {
            port: 0,
            clock: Arc::new(ManualClock::new()),
            settling: DEFAULT_SETTLING,
            keys: auth::Keys::AnyWellFormed,
            rate_per_second: None,
        }
    }
}

/// How long a change takes on a stand-in not told otherwise.
pub const DEFAULT_SETTLING: Duration = Duration::from_millis(300);

impl ScalewayOptions {
    /// A free port of `127.0.0.1`, a [`ManualClock`] of its own (time moves only when a
    /// client sleeps on it, so a stand-in nobody shares a clock with settles nothing
    /// until told: share the test's clock with [`ScalewayOptions::clock`]), changes that
    /// take [`DEFAULT_SETTLING`], and any well-formed API key.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves on `port` of `127.0.0.1` (0: a free one).
    #[must_use]
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Statuses settle on `clock`: the backend's own (a test's [`ManualClock`], whose
    /// polling sleeps move it), or the real clock for a stand-in run as a process.
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// A change (a create, an update that redeploys, a delete) takes `settling` on the
    /// clock before its resource leaves its transient status.
    #[must_use]
    pub fn settling(mut self, settling: Duration) -> Self {
        self.settling = settling;
        self
    }

    /// Only `key`'s secret key is accepted (any other well-formed one answers 401
    /// `denied_authentication`, reason `not_found`).
    #[must_use]
    pub fn key(mut self, key: ApiKey) -> Self {
        self.keys = auth::Keys::Only(key);
        self
    }

    /// Admits at most `calls` calls a second to each product (its API), as a token
    /// bucket holding one second's worth, refilled on the stand-in's clock: a call
    /// finding the bucket empty does nothing and answers 429 `too_many_requests` with a
    /// `Retry-After` in whole seconds. Off by default (0 is off too).
    #[must_use]
    pub fn rate_per_second(mut self, calls: u32) -> Self {
        self.rate_per_second = Some(calls).filter(|n| *n > 0);
        self
    }
}

/// A running stand-in (see the module documentation).
#[derive(Debug)]
pub struct ScalewayServer {
    running: Running<State>,
}

impl ScalewayServer {
    /// Starts a stand-in for `project` of `organization` on a free port of `127.0.0.1`.
    ///
    /// # Errors
    /// When no port can be bound.
    pub async fn start(project: &str, organization: &str) -> io::Result<Self> {
        Self::start_with(project, organization, ScalewayOptions::new()).await
    }

    /// Starts a stand-in for `project` of `organization` as `options` say.
    ///
    /// # Errors
    /// When the port cannot be bound.
    pub async fn start_with(
        project: &str,
        organization: &str,
        options: ScalewayOptions,
    ) -> io::Result<Self> {
        let running = Running::start(
            options.port,
            |address| State::new(address, project, organization, &options),
            |state, request| async move { answer(&state, request).await },
        )
        .await?;
        Ok(ScalewayServer { running })
    }

    /// The base address, `http://127.0.0.1:PORT`.
    #[must_use]
    pub fn address(&self) -> String {
        self.running.address()
    }

    /// A secret key the stand-in accepts in `X-Auth-Token`: the one it was given, or
    /// [`STAND_IN_SECRET_KEY`] when it takes any well-formed key.
    #[must_use]
    pub fn token(&self) -> String {
        self.state().keys.accepted()
    }

    /// The clock statuses settle on.
    #[must_use]
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.state().settle.clock()
    }

    /// The project that exists.
    #[must_use]
    pub fn project(&self) -> String {
        self.state().project.clone()
    }

    /// Sets how long, on the stand-in's clock, a change made from now on takes: its
    /// resource stays in its transient status (`creating`, `pending`, `deleting`, …)
    /// until that much time has passed, whether it is read, listed or not looked at.
    pub fn settle_for(&self, settling: Duration) {
        let clock = self.state().settle.clock();
        self.state().settle = wire::Settle::new(clock, settling);
    }

    /// Every call to `product` answers 403 `permissions_denied` until restored.
    pub fn deny(&self, product: ScalewayProduct) {
        self.state().faults.denied.insert(product);
    }

    /// Reads (GETs) whose path holds the segment `id` answer 500 until restored.
    pub fn fail_reads(&self, product: ScalewayProduct, id: &str) {
        self.state()
            .faults
            .failing_reads
            .push((product, id.to_owned()));
    }

    /// The next `calls` calls to `product` answer 429 `too_many_requests`.
    pub fn throttle(&self, product: ScalewayProduct, calls: u32) {
        *self.state().faults.throttled.entry(product).or_default() += calls;
    }

    /// The next `writes` successful writes to `product` are carried out and answered
    /// 504, as a gateway that timed out does.
    pub fn lose_answers(&self, product: ScalewayProduct, writes: u32) {
        *self.state().faults.lost.entry(product).or_default() += writes;
    }

    /// Arms `storm` from now, in place of the one before: for its length on its clock
    /// (the one the client under test waits on, a `ManualClock`, so that the storm
    /// lasts as long for it as it says), its share of the calls is answered 429
    /// `too_many_requests`, doing nothing, some with a `Retry-After`. From now on every
    /// call is logged with its time on that clock ([`ScalewayServer::storm_calls`]),
    /// the storm's end and beyond included, until [`ScalewayServer::restore`].
    pub fn storm(&self, storm: Storm) {
        self.state().storm.arm(storm);
    }

    /// The calls served since the last [`ScalewayServer::storm`], oldest first; empty
    /// when none was armed.
    #[must_use]
    pub fn storm_calls(&self) -> Vec<StormCall> {
        self.state().storm.calls()
    }

    /// Queues' SQS API answers at `url` (`sqs_endpoint_url` of `sqs-info` and
    /// `activate-sqs`), instead of `https://sqs.mnq.{region}.scaleway.com`: moto's
    /// server, or a relay in front of it.
    pub fn queues_endpoint(&self, url: &str) {
        self.state().mnq.endpoint = Some(url.trim_end_matches('/').to_owned());
    }

    /// Queues credentials named `name` in `region`, made by another tool at
    /// `created_at` (RFC 3339); their id.
    pub fn add_queues_credentials(&self, region: &str, name: &str, created_at: &str) -> String {
        let mut state = self.state();
        let (id, project) = (state.new_id(), state.project.clone());
        state.mnq.add(id, region, &project, name, created_at)
    }

    /// The Queues credentials that exist in `region`.
    #[must_use]
    pub fn queues_credentials(&self, region: &str) -> Vec<QueuesCredentials> {
        self.state().mnq.listed(region)
    }

    /// Lifts every fault, the storm included.
    pub fn restore(&self) {
        self.state().restore();
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

/// [`ConformanceHooks`] over a [`ScalewayServer`]: `deny` denies the kind's whole
/// product, `fail_reads` fails the reads of the one resource. Kinds served by moto
/// (`objectStore`, `queues`) answer `false`, and their checks are skipped.
#[derive(Debug, Clone)]
pub struct ScalewayHooks {
    state: Arc<Mutex<State>>,
}

impl ScalewayHooks {
    /// Hooks on `server`.
    #[must_use]
    pub fn new(server: &ScalewayServer) -> Self {
        ScalewayHooks {
            state: server.running.shared(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ConformanceHooks for ScalewayHooks {
    fn deny(&self, provider: &str, kind: &'static str, _region: &str) -> bool {
        match ScalewayProduct::of_kind(kind).filter(|_| provider == "scaleway") {
            Some(product) => {
                self.state().faults.denied.insert(product);
                true
            }
            None => false,
        }
    }

    fn fail_reads(&self, provider: &str, kind: &'static str, _region: &str, handle: &str) -> bool {
        match ScalewayProduct::of_kind(kind).filter(|_| provider == "scaleway") {
            Some(product) => {
                let id = handle.rsplit('/').next().unwrap_or(handle);
                self.state()
                    .faults
                    .failing_reads
                    .push((product, id.to_owned()));
                true
            }
            None => false,
        }
    }

    fn restore(&self) {
        self.state().restore();
    }
}

/// The body as recorded: secret values replaced.
fn redacted(body: &Value) -> Value {
    let mut body = body.clone();
    for key in ["password", "data"] {
        if let Some(v) = body.get_mut(key) {
            *v = Value::String("<redacted>".to_owned());
        }
    }
    if let Some(Value::Array(vars)) = body.get_mut("secret_environment_variables") {
        for var in vars {
            if let Some(v) = var.get_mut("value") {
                *v = Value::String("<redacted>".to_owned());
            }
        }
    }
    body
}

async fn answer(state: &Mutex<State>, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let method = parts.method.as_str().to_owned();
    let path = decode(parts.uri.path());
    let query = parse_query(parts.uri.query());
    let token = parts
        .headers
        .get("x-auth-token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut retry_after = None;
    let reply = match Limited::new(body, MAX_BODY).collect().await {
        // A presigned upload URL the stand-in handed out: raw bytes, no token.
        Ok(collected) if path.starts_with(UPLOADS) => {
            let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
            let reply = functions::upload(&mut state, &method, &path, &collected.to_bytes());
            state.requests.push(RecordedRequest {
                method: method.clone(),
                path: path.clone(),
                query: query.clone(),
                body: Value::Null,
                status: reply.status,
            });
            reply
        }
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
                    let (reply, wait) = state.answer_in_storm(&req, token.as_deref());
                    retry_after = wait;
                    state.requests.push(RecordedRequest {
                        method: method.clone(),
                        path: path.clone(),
                        query: query.clone(),
                        body: redacted(&body),
                        status: reply.status,
                    });
                    reply
                }
                Err(e) => Reply::invalid("body", format!("the body is not JSON: {e}")),
            }
        }
        Err(_) => Reply::error(
            413,
            "invalid_request_error",
            "request body too large",
            json!({}),
        ),
    };
    let (content_type, text) = match &reply.body {
        Value::Null => ("application/json", String::new()),
        Value::String(html) if reply.status == 504 => ("text/html", html.clone()),
        body => ("application/json", body.to_string()),
    };
    let mut response = Response::builder()
        .status(reply.status)
        .header("content-type", content_type);
    if let Some(wait) = retry_after {
        response = response.header("retry-after", wait.as_secs().to_string());
    }
    response
        .body(Full::new(Bytes::from(text)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_their_product() {
        use ScalewayProduct as P;
        assert_eq!(P::of_path("/account/v3/projects/p"), Some(P::Account));
        assert_eq!(
            P::of_path("/secret-manager/v1beta1/regions/fr-par/secrets"),
            Some(P::SecretManager)
        );
        assert_eq!(P::of_path("/rdb/v1/regions/fr-par/instances"), Some(P::Rdb));
        assert_eq!(P::of_path("/iam/v1alpha1/applications"), Some(P::Iam));
        assert_eq!(P::of_path("/elsewhere"), None);
    }

    #[test]
    fn the_documented_table_of_differences_is_the_one_the_tests_read() {
        let docs = include_str!("mod.rs");
        let rows: Vec<&str> = docs
            .lines()
            .filter_map(|l| l.strip_prefix("//! | "))
            .filter(|l| !l.starts_with("product |") && !l.starts_with("---"))
            .filter(|l| l.split(" | ").count() == 4)
            .collect();
        for d in DIFFERENCES {
            let row = format!("{} | {} | `{}` | {} |", d.product, d.act, d.field, d.why);
            assert!(
                rows.contains(&row.as_str()),
                "not in the module docs' table: {row}"
            );
        }
        assert_eq!(rows.len(), DIFFERENCES.len(), "rows in the docs: {rows:#?}");
    }

    #[test]
    fn secret_values_are_redacted_in_the_record() {
        let body = json!({
            "password": "p", "data": "c2VjcmV0",
            "secret_environment_variables": [{ "key": "K", "value": "v" }],
            "name": "kept"
        });
        let r = redacted(&body);
        assert_eq!(r["password"], "<redacted>");
        assert_eq!(r["data"], "<redacted>");
        assert_eq!(r["secret_environment_variables"][0]["value"], "<redacted>");
        assert_eq!(r["name"], "kept");
    }
}
