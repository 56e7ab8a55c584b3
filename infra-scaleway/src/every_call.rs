//! Every REST call this crate makes, and whether the retry policy may repeat it once it
//! may have been acted on: the table below is the decision, written down call by call;
//! the test makes every call on the stand-in (the staged scenario on every REST kind,
//! then Queues' activation and credentials) and holds each to it, and each entry of the
//! table to a call made.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use infra_core::kinds::{
    Capacity, ImageRegistry, ImageRegistrySettled, Postgres, PostgresSettled, SecretSourceSettled,
    Secrets, SecretsSettled,
};
use infra_core::prelude::{Handle, Kind, Partial, SecretString};
use infra_core::sdk::{
    Backend, Clock, Idempotence, ManualClock, Marker, Polling, RawTags, SettledSpec,
};
use infra_testkit::conformance::staged::{EMPTY_ZIP, Stage, run_stages, scaleway_fleet};
use infra_testkit::scaleway::ScalewayServer;
use reqwest::Method;

use crate::clients::Clients;
use crate::config::ScalewayConfig;
use crate::mnq::QueuesAccess;

const PROJECT: &str = "11111111-1111-4111-8111-111111111111";
const ORGANIZATION: &str = "22222222-2222-4222-8222-222222222222";

use Idempotence::{Idempotent as REPEATS, NotIdempotent as ONCE};

/// Every call, by the name it is made under: its method, and whether it may be repeated.
/// Creates are made once (a repeat would make a twin, or a `Conflict` hiding that the
/// first landed); reads, `PATCH`es, `PUT`s and deletes may be repeated; each action says
/// why.
fn table() -> BTreeMap<&'static str, (Method, Idempotence)> {
    let get = |name| (name, (Method::GET, REPEATS));
    let create = |name| (name, (Method::POST, ONCE));
    let patch = |name| (name, (Method::PATCH, REPEATS));
    let delete = |name| (name, (Method::DELETE, REPEATS));
    BTreeMap::from([
        get("the project check (GET /account/v3/projects)"),
        // Secret Manager. A new version is a create: two would be two versions.
        get("secret-manager:GetSecret"),
        get("secret-manager:ListSecrets"),
        get("secret-manager:AccessSecretVersion"),
        get("secret-manager:GetSecretVersion"),
        create("secret-manager:CreateSecret"),
        create("secret-manager:CreateSecretVersion"),
        patch("secret-manager:UpdateSecret"),
        delete("secret-manager:DeleteSecret"),
        // Container Registry.
        get("registry:GetNamespace"),
        get("registry:ListNamespaces"),
        create("registry:CreateNamespace"),
        patch("registry:UpdateNamespace"),
        delete("registry:DeleteNamespace"),
        // Managed Database for PostgreSQL.
        get("rdb: GetInstance"),
        get("rdb: ListInstances"),
        get("rdb: ListDatabaseEngines"),
        get("rdb: ListUsers"),
        create("rdb: CreateInstance"),
        create("rdb: CreateUser"),
        patch("rdb: UpdateInstance"),
        patch("rdb: UpdateUser"),
        // A landed upgrade keeps the instance busy for minutes, and a repeat of it is
        // refused or found done, never done twice: it is not repeated once it may have
        // landed.
        ("rdb: UpgradeInstance", (Method::POST, ONCE)),
        delete("rdb: DeleteInstance"),
        // IAM. `PUT /rules` sets a policy's whole list of rules.
        get("iam: GET /iam/v1alpha1/applications"),
        get("iam: GET /iam/v1alpha1/applications/{id}"),
        get("iam: GET /iam/v1alpha1/permission-sets"),
        get("iam: GET /iam/v1alpha1/policies"),
        get("iam: GET /iam/v1alpha1/rules"),
        create("iam: POST /iam/v1alpha1/applications"),
        create("iam: POST /iam/v1alpha1/policies"),
        patch("iam: PATCH /iam/v1alpha1/applications/{id}"),
        ("iam: PUT /iam/v1alpha1/rules", (Method::PUT, REPEATS)),
        delete("iam: DELETE /iam/v1alpha1/applications/{id}"),
        delete("iam: DELETE /iam/v1alpha1/policies/{id}"),
        // Serverless Functions. A deploy repeated deploys the same code again; the
        // archive put twice at its upload URL is one object.
        get("functions:GetNamespace"),
        get("functions:ListNamespaces"),
        get("functions:GetFunction"),
        get("functions:ListFunctions"),
        get("functions:GetFunctionUploadURL"),
        create("functions:CreateNamespace"),
        create("functions:CreateFunction"),
        patch("functions:UpdateNamespace"),
        patch("functions:UpdateFunction"),
        ("functions:DeployFunction", (Method::POST, REPEATS)),
        (
            "functions: the upload of the code archive",
            (Method::PUT, REPEATS),
        ),
        delete("functions:DeleteNamespace"),
        delete("functions:DeleteFunction"),
        // Serverless Containers. A deploy repeated rolls the same image out again.
        get("containers:GetNamespace"),
        get("containers:ListNamespaces"),
        get("containers:GetContainer"),
        get("containers:ListContainers"),
        create("containers:CreateNamespace"),
        create("containers:CreateContainer"),
        patch("containers:UpdateNamespace"),
        patch("containers:UpdateContainer"),
        ("containers:DeployContainer", (Method::POST, REPEATS)),
        delete("containers:DeleteNamespace"),
        delete("containers:DeleteContainer"),
        // Queues' control plane. Activating an active product changes nothing.
        get("mnq:GetSqsInfo"),
        get("mnq:ListSqsCredentials"),
        ("mnq:ActivateSqs", (Method::POST, REPEATS)),
        create("mnq:CreateSqsCredentials"),
        delete("mnq:DeleteSqsCredentials"),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_is_made_with_the_idempotence_written_down_for_it() {
    // One manual clock for the stand-in's statuses and the backend's waits.
    let clock = Arc::new(ManualClock::new());
    let server_clock: Arc<dyn Clock> = clock.clone();
    let server = ScalewayServer::start_with(
        PROJECT,
        ORGANIZATION,
        infra_testkit::scaleway::ScalewayOptions::new().clock(server_clock),
    )
    .await
    .expect("the stand-in starts");
    let api = server.address();
    let config = ScalewayConfig::stand_in(PROJECT, ORGANIZATION, &api, &api)
        .expect("on loopback")
        .clock(clock.clone())
        .polling(Polling {
            first: Duration::from_millis(100),
            longest: Duration::from_secs(1),
            deadline: Duration::from_secs(60),
        });
    crate::install_crypto();
    let clients = Clients::new(config);
    let backend: Arc<dyn Backend> = Arc::new(crate::router(&clients));

    // Every REST kind through the staged scenario.
    let mut kinds: std::collections::BTreeSet<&'static str> =
        backend.capabilities().kinds.into_iter().collect();
    kinds.retain(|k| !["objectStore", "queues"].contains(k));
    let dir = tempfile::tempdir().expect("a scratch directory");
    let archive = dir.path().join("api.zip");
    std::fs::write(&archive, EMPTY_ZIP).expect("the archive is written");
    let archive = archive.to_string_lossy().into_owned();
    let scenario_clock: Arc<dyn Clock> = clock.clone();
    let prefix = infra_testkit::conformance::fresh_prefix(&*scenario_clock);
    let stages = run_stages(backend.clone(), scenario_clock, |stage| {
        scaleway_fleet(&prefix, &kinds, stage, &archive)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stages.len(), Stage::ALL.len());

    // What the scenario leaves out: the project check, a registry's tags changed, a
    // database's volume grown, and its administrator made again.
    backend.account().await.expect("the project is seen");
    drive_the_rest(&server, backend.as_ref()).await;

    // Queues' activation and credentials, made and deleted (no queue is called).
    let access = QueuesAccess::new(Arc::clone(&clients));
    access.prerequisites("fr-par").await.expect("asked");
    access.for_writing("fr-par").await.expect("activated");
    drop(access);
    assert!(server.queues_credentials("fr-par").is_empty());

    let made = clients
        .api()
        .made
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let table = table();
    let mut wrong = Vec::new();
    for (name, made) in &made {
        match table.get(name.as_str()) {
            Some(said) if said == made => {}
            Some(said) => wrong.push(format!("{name}: made as {made:?}, written {said:?}")),
            None => wrong.push(format!("{name}: made as {made:?}, not in the table")),
        }
    }
    for name in table.keys() {
        if !made.contains_key(*name) {
            wrong.push(format!("{name}: in the table, never made"));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
    server.shutdown().await;
}

/// Creates `name` as `spec` says; its handle.
async fn create<K: Kind>(backend: &dyn Backend, name: &str, spec: &K::Settled) -> String {
    backend
        .create(
            K::ID,
            "fr-par",
            name,
            SettledSpec::new::<K>(spec),
            &Marker::new("every"),
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .expect_done("Scaleway never defers")
        .handle
}

/// Updates `handle` to `spec`.
async fn update<K: Kind>(backend: &dyn Backend, handle: &str, spec: &K::Settled) {
    backend
        .update(K::ID, "fr-par", handle, SettledSpec::new::<K>(spec))
        .await
        .unwrap_or_else(|e| panic!("{handle}: {e}"))
        .expect_done("Scaleway never defers");
}

/// A registry's tags changed; a database's volume grown, then its administrator,
/// deleted by another tool, made again.
async fn drive_the_rest(server: &ScalewayServer, backend: &dyn Backend) {
    let registry = |team: &str| ImageRegistrySettled {
        scan_on_push: Partial::Known(false),
        immutable_tags: Partial::Unknown,
        tags: Partial::Known(RawTags::from([("team".to_owned(), team.to_owned())])),
    };
    let images = create::<ImageRegistry>(backend, "every-images", &registry("web")).await;
    update::<ImageRegistry>(backend, &images, &registry("ops")).await;

    let password = SecretsSettled {
        value_from: SecretSourceSettled::Composed(SecretString::new("Every-Call-42!")),
        description: Partial::Unknown,
        tags: Partial::Unknown,
    };
    let password = create::<Secrets>(backend, "every-db-password", &password).await;
    let mut database = PostgresSettled {
        engine_version: "16".to_owned(),
        capacity: Capacity::Classic {
            instance_class: "DB-DEV-S".to_owned(),
        },
        storage_gb: Partial::Known(20),
        master_username: "app".to_owned(),
        master_password: Handle::new(password),
        backup_retention_days: Partial::Unknown,
        tags: Partial::Unknown,
    };
    let db = create::<Postgres>(backend, "every-db", &database).await;
    database.storage_gb = Partial::Known(30);
    update::<Postgres>(backend, &db, &database).await;
    let user = format!(
        "{}/rdb/v1/regions/fr-par/instances/{db}/users/app",
        server.address()
    );
    let deleted = reqwest::Client::new()
        .delete(user)
        .header("X-Auth-Token", server.token())
        .send()
        .await
        .expect("the stand-in answers");
    assert_eq!(deleted.status().as_u16(), 204);
    update::<Postgres>(backend, &db, &database).await;
}
