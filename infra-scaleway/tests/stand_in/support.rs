//! What the stand-in tests share: the stand-in started, writes through a backend (a
//! Scaleway write is done when answered), fixtures, and the stand-in's records and
//! calls to it as another tool would make them.

use std::collections::BTreeMap;
use std::sync::Arc;

use infra_core::kinds::{
    Compute, ComputeSettled, Container, ContainerNamespace, ContainerNamespaceSettled,
    ContainerSettled, Function, FunctionNamespace, FunctionNamespaceSettled, FunctionSettled, Iam,
    IamSettled, ImageRegistry, ImageRegistrySettled, ObjectStore, ObjectStoreSettled, Postgres,
    PostgresSettled, Queues, QueuesSettled, SecretSourceSettled, Secrets, SecretsSettled,
};
use infra_core::prelude::{Kind, Partial, SecretString};
use infra_core::sdk::{
    Backend, BackendError, Clock, ManualClock, Marker, Polling, RetryPolicy, Router, SettledSpec,
    Sighting,
};
use infra_scaleway::ScalewayBackend;
use infra_testkit::conformance::{Conformance, KindSample, Report};
use infra_testkit::scaleway::{RecordedRequest, ScalewayHooks, ScalewayOptions, ScalewayServer};
use serde_json::Value;

use super::{ORGANIZATION, PROJECT, backend, config};

// ---- the stand-in and backends on it ----

/// The stand-in, started on loopback, its statuses settling on a manual clock of its own
/// (which the backends made by [`backend`](super::backend) share).
pub(crate) async fn stand_in() -> ScalewayServer {
    stand_in_on(&Arc::new(ManualClock::new())).await
}

/// The stand-in, its statuses settling on `clock`, the test's.
pub(crate) async fn stand_in_on(clock: &Arc<ManualClock>) -> ScalewayServer {
    let clock: Arc<dyn Clock> = clock.clone();
    ScalewayServer::start_with(PROJECT, ORGANIZATION, ScalewayOptions::new().clock(clock))
        .await
        .expect("the stand-in starts")
}

/// The stand-in, and a backend on it.
pub(crate) async fn stand_in_and_backend() -> (ScalewayServer, Arc<Router>) {
    let server = stand_in().await;
    let backend = backend(&server, None);
    (server, backend)
}

/// A backend on `server` that tries every call once (no retry policy): for the tests
/// of what a single answer is mapped to.
pub(crate) fn untried(server: &ScalewayServer) -> Arc<Router> {
    let config = config(server, None).retry_policy(RetryPolicy::none());
    Arc::new(ScalewayBackend::new(config))
}

/// A backend on `server` waiting on `clock` (the server's own: see [`stand_in_on`]),
/// polling with `polling` when given.
pub(crate) fn backend_on(
    server: &ScalewayServer,
    clock: &Arc<ManualClock>,
    polling: Option<Polling>,
) -> Arc<Router> {
    let clock: Arc<dyn Clock> = clock.clone();
    let config = config(server, None).clock(clock);
    let config = match polling {
        Some(polling) => config.polling(polling),
        None => config,
    };
    Arc::new(ScalewayBackend::new(config))
}

/// Runs the conformance suite on `samples` through `backend`, in fr-par with nl-ams for
/// the other region, and fails unless it passed.
pub(crate) async fn passes_conformance(
    server: &ScalewayServer,
    backend: Arc<Router>,
    samples: Vec<KindSample>,
) -> Report {
    let report = Conformance::new(backend as Arc<dyn Backend>, samples)
        .regions("fr-par", Some("nl-ams"))
        .hooks(Arc::new(ScalewayHooks::new(server)))
        .run()
        .await;
    eprintln!("{report}");
    report.assert_passed_with(true);
    report
}

// ---- writes ----

/// A settled spec, and the kind it is of.
pub(crate) trait Settled: Sized + 'static {
    type Of: Kind<Settled = Self>;
}

macro_rules! settled {
    ($($settled:ty => $kind:ty),* $(,)?) => {
        $(impl Settled for $settled {
            type Of = $kind;
        })*
    };
}

settled!(
    ObjectStoreSettled => ObjectStore,
    QueuesSettled => Queues,
    SecretsSettled => Secrets,
    ImageRegistrySettled => ImageRegistry,
    PostgresSettled => Postgres,
    IamSettled => Iam,
    FunctionNamespaceSettled => FunctionNamespace,
    FunctionSettled => Function,
    ComputeSettled => Compute,
    ContainerNamespaceSettled => ContainerNamespace,
    ContainerSettled => Container,
);

/// Creates `name` in `region` as `spec` says, with `fleet`'s marker.
pub(crate) async fn create<S: Settled>(
    backend: &dyn Backend,
    region: &str,
    name: &str,
    spec: &S,
    fleet: &str,
) -> Result<Sighting, BackendError> {
    backend
        .create(
            <S::Of as Kind>::ID,
            region,
            name,
            SettledSpec::new::<S::Of>(spec),
            &Marker::new(fleet),
        )
        .await
        .map(|w| w.expect_done("Scaleway never defers"))
}

/// Updates `handle` in `region` to what `spec` says.
pub(crate) async fn update<S: Settled>(
    backend: &dyn Backend,
    region: &str,
    handle: &str,
    spec: &S,
) -> Result<Sighting, BackendError> {
    backend
        .update(
            <S::Of as Kind>::ID,
            region,
            handle,
            SettledSpec::new::<S::Of>(spec),
        )
        .await
        .map(|w| w.expect_done("Scaleway never defers"))
}

/// Deletes every one of `handles`, each of which must succeed.
pub(crate) async fn delete_all(
    backend: &dyn Backend,
    kind: &'static str,
    region: &str,
    handles: &[&str],
) {
    for handle in handles {
        backend
            .delete(kind, region, handle)
            .await
            .expect("the delete succeeds");
    }
}

// ---- fixtures ----

/// Tags, environment variables or raw tags from `pairs`.
pub(crate) fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A secret holding `value`, without description or tags.
pub(crate) fn composed(value: &str) -> SecretsSettled {
    SecretsSettled {
        value_from: SecretSourceSettled::Composed(SecretString::new(value)),
        description: Partial::Unknown,
        tags: Partial::Unknown,
    }
}

/// A secret of `fleet` holding `value`, made through the backend; its handle.
pub(crate) async fn secret(
    backend: &dyn Backend,
    region: &str,
    name: &str,
    value: &str,
    fleet: &str,
) -> String {
    create(backend, region, name, &composed(value), fleet)
        .await
        .expect("the secret is made")
        .handle
}

// ---- the stand-in's records, and calls to it ----

/// The recorded requests that write (all but `GET`).
pub(crate) fn writes(server: &ScalewayServer) -> Vec<RecordedRequest> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .collect()
}

/// The recorded requests with `method` to `path`.
pub(crate) fn calls(server: &ScalewayServer, method: &str, path: &str) -> Vec<RecordedRequest> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.method == method && r.path == path)
        .collect()
}

/// `requests` as `METHOD path` lines.
pub(crate) fn lines(requests: &[RecordedRequest]) -> Vec<String> {
    requests
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

/// A call to the stand-in as another tool would make it: the status, and the body
/// answered (null when it is not JSON).
pub(crate) async fn raw(
    server: &ScalewayServer,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let client = reqwest::Client::new();
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
    let mut request = client
        .request(method, format!("{}{path}", server.address()))
        .header("X-Auth-Token", server.token());
    if let Some(body) = body {
        request = request.json(&body);
    }
    let answer = request.send().await.expect("the stand-in answers");
    let status = answer.status().as_u16();
    let text = answer.text().await.expect("a body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}
