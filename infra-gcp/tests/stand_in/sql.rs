//! Targeted tests of the `sql` module (the `postgres` kind on Cloud SQL) against its
//! stand-in: what the conformance suite does not reach.
//!
//! The administrator's password comes from a Secret Manager secret, made here with the
//! official client against the same stand-in.

use infra_core::kinds::{Acu, Capacity, PostgresSettled};
use infra_core::prelude::{Handle, Partial};
use infra_core::sdk::{Backend, BackendError, ErrorKind, Marker, RawTags, SettledSpec, Sighting};
use infra_testkit::gcp::{GcpServer, GcpService};
use serde_json::Value;
use std::time::Duration;

use super::{PROJECT, backend};
use crate::stand_in;

const REGION: &str = "europe-west1";
const FLEET: &str = "sqlfleet";
const PASSWORD: &str = "Pw-4f9c2e7a1b-never-shown";

/// A secret holding `value`, made with the official client; its handle.
async fn secret(server: &GcpServer, id: &str, value: &str) -> String {
    use google_cloud_secretmanager_v1::client::SecretManagerService;
    use google_cloud_secretmanager_v1::model::{Replication, Secret, SecretPayload, replication};
    let client = SecretManagerService::builder()
        .with_endpoint(server.address())
        .with_credentials(google_cloud_auth::credentials::anonymous::Builder::new().build())
        .build()
        .await
        .expect("the Secret Manager client builds");
    let parent = format!("projects/{PROJECT}");
    let name = format!("{parent}/secrets/{id}");
    if client.get_secret().set_name(&name).send().await.is_err() {
        client
            .create_secret()
            .set_parent(&parent)
            .set_secret_id(id)
            .set_secret(
                Secret::new().set_replication(
                    Replication::new().set_automatic(replication::Automatic::new()),
                ),
            )
            .send()
            .await
            .expect("the secret is made");
    }
    client
        .add_secret_version()
        .set_parent(&name)
        .set_payload(SecretPayload::new().set_data(value.as_bytes().to_vec()))
        .send()
        .await
        .expect("the secret's value is written");
    name
}

fn spec(password: &str, user: &str) -> PostgresSettled {
    PostgresSettled {
        engine_version: "16".to_owned(),
        capacity: Capacity::Classic {
            instance_class: "db-f1-micro".to_owned(),
        },
        storage_gb: Partial::Known(20),
        master_username: user.to_owned(),
        master_password: Handle::new(password.to_owned()),
        backup_retention_days: Partial::Known(7),
        tags: Partial::Known(RawTags::from([("team".to_owned(), "web".to_owned())])),
    }
}

async fn create(
    backend: &dyn Backend,
    name: &str,
    spec: &PostgresSettled,
) -> Result<Sighting, BackendError> {
    let marker = Marker::new(FLEET);
    match backend
        .create(
            "postgres",
            REGION,
            name,
            SettledSpec::new::<infra_core::kinds::Postgres>(spec),
            &marker,
        )
        .await?
    {
        infra_core::sdk::Written::Done(read) => Ok(read),
        other => panic!("a Cloud SQL create is never deferred: {other:?}"),
    }
}

async fn update(
    backend: &dyn Backend,
    name: &str,
    spec: &PostgresSettled,
) -> Result<Sighting, BackendError> {
    match backend
        .update(
            "postgres",
            REGION,
            name,
            SettledSpec::new::<infra_core::kinds::Postgres>(spec),
        )
        .await?
    {
        infra_core::sdk::Written::Done(read) => Ok(read),
        other => panic!("a Cloud SQL update is never deferred: {other:?}"),
    }
}

/// The recorded requests to `path` with `method`.
fn calls(server: &GcpServer, method: &str, path: &str) -> Vec<infra_testkit::gcp::RecordedRequest> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.method == method && r.path == path)
        .collect()
}

fn instances_path() -> String {
    format!("/v1/projects/{PROJECT}/instances")
}

fn reported(read: &Sighting) -> Value {
    Value::Object(read.reported().clone())
}

#[tokio::test]
async fn sql_the_insert_carries_the_marker_and_the_administrator_is_made() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let password = secret(&server, "pg-marker", PASSWORD).await;
    let read = create(&*backend, "pg-marker", &spec(&password, "app"))
        .await
        .expect("the create succeeds");

    let inserts = calls(&server, "POST", &instances_path());
    assert_eq!(inserts.len(), 1, "one insert");
    let body = &inserts[0].body;
    assert_eq!(body["settings"]["userLabels"]["managed-by-infra"], FLEET);
    assert_eq!(body["settings"]["userLabels"]["team"], "web");
    assert_eq!(body["databaseVersion"], 272, "POSTGRES_16, as an integer");
    assert_eq!(body["settings"]["dataDiskSizeGb"], "20");
    assert!(
        body.get("rootPassword").is_none(),
        "the root user is not the administrator"
    );
    // No write touched the labels after the insert.
    assert!(calls(&server, "PATCH", &format!("{}/pg-marker", instances_path())).is_empty());
    let users = calls(
        &server,
        "POST",
        &format!("{}/pg-marker/users", instances_path()),
    );
    assert_eq!(users.len(), 1, "the administrator is made once");
    assert_eq!(users[0].body["name"], "app");

    let shown = reported(&read);
    assert_eq!(shown["masterUsername"], "app");
    assert_eq!(shown["engineVersion"], "16");
    assert_eq!(shown["storageGb"], 20);
    assert_eq!(shown["backupRetentionDays"], 7);
    assert_eq!(shown["capacity"]["instanceClass"], "db-f1-micro");
    assert!(shown.get("masterPassword").is_none());
    let observed = read.observed_json();
    assert_eq!(observed["id"], "pg-marker");
    assert_eq!(observed["port"], 5432);
    assert!(
        observed["endpoint"]
            .as_str()
            .is_some_and(|e| e.parse::<std::net::Ipv4Addr>().is_ok()),
        "the endpoint is the primary address: {observed}"
    );
    let listed = backend.list("postgres", REGION).await.expect("list");
    assert!(listed.iter().any(|l| l.handle == "pg-marker"));
    let elsewhere = backend.list("postgres", "us-central1").await.expect("list");
    assert!(
        elsewhere.is_empty(),
        "another region lists nothing: {elsewhere:?}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn sql_a_long_operation_is_awaited_to_its_end() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let password = secret(&server, "pg-long", PASSWORD).await;
    server.settling(Duration::from_secs(5));
    let started = server.clock().now();
    let read = create(&*backend, "pg-long", &spec(&password, "postgres"))
        .await
        .expect("the create waits for its operation");
    assert_eq!(reported(&read)["masterUsername"], "postgres");
    let polls: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| {
            r.method == "GET"
                && r.path
                    .starts_with(&format!("/v1/projects/{PROJECT}/operations/"))
        })
        .collect();
    assert!(
        polls.len() >= 2,
        "the operation was polled until done: {} polls",
        polls.len()
    );
    assert!(
        server.clock().now() - started >= Duration::from_secs(5),
        "the create waited for the operation's time to come"
    );
    let instance = backend
        .read("postgres", REGION, "pg-long")
        .await
        .expect("read");
    assert_eq!(reported(&instance)["engineVersion"], "16");
    server.shutdown().await;
}

#[tokio::test]
async fn sql_a_lost_insert_answer_is_found_by_name_and_finished() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let password = secret(&server, "pg-lost", PASSWORD).await;
    server.lose_answers(GcpService::Sql, 1);
    let read = create(&*backend, "pg-lost", &spec(&password, "app"))
        .await
        .expect("the instance the lost insert made is found by name");
    let inserts = calls(&server, "POST", &instances_path());
    assert_eq!(inserts.len(), 1, "the insert was not sent again");
    assert_eq!(inserts[0].status, 504, "its answer was lost");
    // The administrator was still made, once the instance was ready.
    assert_eq!(reported(&read)["masterUsername"], "app");

    server.shutdown().await;
}

#[tokio::test]
async fn sql_the_password_is_never_recorded_reported_nor_put_in_an_error() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let password = secret(&server, "pg-pass", PASSWORD).await;
    let root = create(&*backend, "pg-root", &spec(&password, "postgres"))
        .await
        .expect("a create with the root user");
    let user = create(&*backend, "pg-user", &spec(&password, "app"))
        .await
        .expect("a create with a user of its own");
    let inserts = calls(&server, "POST", &instances_path());
    assert_eq!(
        inserts[0].body["rootPassword"], "<redacted>",
        "the root password was sent"
    );
    let users = calls(
        &server,
        "POST",
        &format!("{}/pg-user/users", instances_path()),
    );
    assert_eq!(
        users[0].body["password"], "<redacted>",
        "the user's password was sent"
    );

    // An update sets the password again, from the secret's value now.
    secret(&server, "pg-pass", "Pw-rotated-5b8d").await;
    server.clear_requests();
    let updated = update(&*backend, "pg-user", &spec(&password, "app"))
        .await
        .expect("the update succeeds");
    let set = calls(
        &server,
        "PUT",
        &format!("{}/pg-user/users", instances_path()),
    );
    assert_eq!(set.len(), 1, "the administrator's password is set again");
    assert_eq!(set[0].query.get("name").map(String::as_str), Some("app"));
    assert!(
        calls(&server, "PATCH", &format!("{}/pg-user", instances_path())).is_empty(),
        "nothing else changed, so the instance is not patched"
    );

    // A refused create, after the password was read, does not show it either.
    let taken = create(&*backend, "pg-user", &spec(&password, "app"))
        .await
        .unwrap_err();
    assert_eq!(taken.kind, ErrorKind::Conflict, "{taken}");

    let everything = format!(
        "{:?} {} {} {} {} {} {} {taken} {taken:?}",
        server.requests(),
        reported(&root),
        root.observed_json(),
        reported(&user),
        user.observed_json(),
        reported(&updated),
        updated.observed_json(),
    );
    for value in [PASSWORD, "Pw-rotated-5b8d"] {
        assert!(
            !everything.contains(value),
            "a password was shown: {everything}"
        );
    }
    server.shutdown().await;
}

#[tokio::test]
async fn sql_a_serverless_capacity_is_refused_before_any_call() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let mut serverless = spec("projects/p/secrets/none", "app");
    serverless.capacity = Capacity::Serverless {
        min_capacity: Acu::whole(1),
        max_capacity: Acu::whole(4),
    };
    let err = create(&*backend, "pg-serverless", &serverless)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid);
    assert!(err.message.contains("serverless"), "{err}");
    let mut bad_name = spec("projects/p/secrets/none", "app");
    bad_name.capacity = Capacity::Classic {
        instance_class: "db-f1-micro".to_owned(),
    };
    let err = create(&*backend, "Pg_Upper", &bad_name).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    let mut old = bad_name.clone();
    old.engine_version = "8".to_owned();
    let err = create(&*backend, "pg-eight", &old).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    assert!(
        server.requests().is_empty(),
        "nothing was sent: {:?}",
        server.requests()
    );
    server.shutdown().await;
}

#[tokio::test]
async fn sql_lag_throttling_and_label_removal() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let password = secret(&server, "pg-misc", PASSWORD).await;
    // Eventual consistency: the new instance is not visible for two reads.
    server.lag(2);
    create(&*backend, "pg-lag", &spec(&password, "postgres"))
        .await
        .expect("a lagging read does not fail the create");
    server.lag(0);

    server.clear_requests();
    server.throttle(GcpService::Sql, 1);
    backend
        .read("postgres", REGION, "pg-lag")
        .await
        .expect("the throttled read is retried");
    let first = server.requests();
    assert_eq!(first.first().map(|r| r.status), Some(429), "{first:#?}");
    assert!(first[1..].iter().all(|r| r.status == 200), "{first:#?}");

    // Removing a label: `instances.patch` merges labels, so the settings are sent whole.
    let mut fewer = spec(&password, "postgres");
    fewer.tags = Partial::Known(RawTags::new());
    fewer.backup_retention_days = Partial::Known(14);
    server.clear_requests();
    let read = update(&*backend, "pg-lag", &fewer).await.expect("update");
    let puts = calls(&server, "PUT", &format!("{}/pg-lag", instances_path()));
    assert_eq!(puts.len(), 1, "one instances.update");
    assert!(puts[0].body["settings"]["settingsVersion"].is_string());
    let tags = &reported(&read)["tags"];
    assert_eq!(tags.get("team"), None, "the label is gone: {tags}");
    assert_eq!(tags["managed-by-infra"], FLEET, "the marker stays: {tags}");
    assert_eq!(reported(&read)["backupRetentionDays"], 14);

    // Deleting waits for its operation; a second delete is NotFound.
    backend
        .delete("postgres", REGION, "pg-lag")
        .await
        .expect("delete");
    let again = backend
        .delete("postgres", REGION, "pg-lag")
        .await
        .unwrap_err();
    assert_eq!(again.kind, ErrorKind::NotFound, "{again}");
    server.shutdown().await;
}

#[tokio::test]
async fn sql_the_stand_in_refuses_a_shrink_a_downgrade_and_an_unknown_tier() {
    use google_cloud_sql_v1::client::SqlInstancesService;
    use google_cloud_sql_v1::model::{DatabaseInstance, Settings, SqlDatabaseVersion};
    let server = stand_in().await;
    let backend = backend(&server, None);
    let password = secret(&server, "pg-rules", PASSWORD).await;
    create(&*backend, "pg-rules", &spec(&password, "postgres"))
        .await
        .expect("create");
    let client = SqlInstancesService::builder()
        .with_endpoint(server.address())
        .with_credentials(google_cloud_auth::credentials::anonymous::Builder::new().build())
        .build()
        .await
        .expect("the Cloud SQL client builds");
    let patch = |body: DatabaseInstance| {
        client
            .patch()
            .set_project(PROJECT)
            .set_instance("pg-rules")
            .set_body(body)
            .send()
    };
    let shrink =
        patch(DatabaseInstance::new().set_settings(Settings::new().set_data_disk_size_gb(10)))
            .await
            .unwrap_err();
    assert_eq!(shrink.http_status_code(), Some(400), "{shrink}");
    let downgrade =
        patch(DatabaseInstance::new().set_database_version(SqlDatabaseVersion::Postgres15))
            .await
            .unwrap_err();
    assert_eq!(downgrade.http_status_code(), Some(400), "{downgrade}");
    let tier =
        patch(DatabaseInstance::new().set_settings(Settings::new().set_tier("db-n1-standard-1")))
            .await
            .unwrap_err();
    assert_eq!(tier.http_status_code(), Some(400), "{tier}");
    // Growing the disk and upgrading the major version are accepted.
    patch(
        DatabaseInstance::new()
            .set_database_version(SqlDatabaseVersion::Postgres17)
            .set_settings(Settings::new().set_data_disk_size_gb(40)),
    )
    .await
    .expect("a grown disk and a major-version upgrade");
    // The upgrade's operation runs: the instance is busy until it is done.
    let busy =
        patch(DatabaseInstance::new().set_settings(Settings::new().set_data_disk_size_gb(50)))
            .await
            .unwrap_err();
    assert_eq!(busy.http_status_code(), Some(409), "{busy}");
    let read = backend
        .read("postgres", REGION, "pg-rules")
        .await
        .expect("read");
    assert_eq!(reported(&read)["engineVersion"], "17");
    assert_eq!(reported(&read)["storageGb"], 40);
    server.shutdown().await;
}
