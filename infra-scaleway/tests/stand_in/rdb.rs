//! Managed Database for PostgreSQL: what the conformance suite does not reach (the
//! create on the wire, statuses awaited on the manual clock, a busy instance waited out,
//! backups, the administrator after a run killed mid-create, denials and throttling, a
//! lost create answer, deletion, the password kept out of every record, answer and
//! error, refusals before any call, and the stand-in's own rules).
//!
//! The administrator's password is a Secret Manager secret made through the backend's
//! `secrets` kind against the same stand-in.

use std::sync::Arc;
use std::time::Duration;

use infra_core::kinds::{Acu, Capacity, PostgresSettled};
use infra_core::prelude::{Handle, Partial};
use infra_core::sdk::{Backend, Clock, ErrorKind, ManualClock, Marker, Polling, RawTags, Sighting};
use infra_testkit::scaleway::{DEFAULT_SETTLING, RecordedRequest, ScalewayProduct, ScalewayServer};
use serde_json::{Value, json};

use super::support::{
    backend_on, calls, composed, create, raw, secret, stand_in, stand_in_on, untried, update,
};
use super::{PROJECT, backend};

const REGION: &str = "fr-par";
const FLEET: &str = "rdbfleet";
const PASSWORD: &str = "Pw-4f9c2e7a1b-never-shown";
const ROTATED: &str = "Rotated-5b8d-Pw";

/// A new value for the secret `handle`.
async fn rotate(backend: &dyn Backend, handle: &str, value: &str) {
    update(backend, REGION, handle, &composed(value))
        .await
        .expect("the secret's value changes");
}

fn spec(password: &str, user: &str) -> PostgresSettled {
    PostgresSettled {
        engine_version: "16".to_owned(),
        capacity: Capacity::Classic {
            instance_class: "DB-DEV-S".to_owned(),
        },
        storage_gb: Partial::Known(20),
        master_username: user.to_owned(),
        master_password: Handle::new(password.to_owned()),
        backup_retention_days: Partial::Known(7),
        tags: Partial::Known(RawTags::from([("team".to_owned(), "web".to_owned())])),
    }
}

fn instances_path() -> String {
    format!("/rdb/v1/regions/{REGION}/instances")
}

/// The recorded requests to the RDB API.
fn rdb_calls(server: &ScalewayServer) -> Vec<RecordedRequest> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/rdb/"))
        .collect()
}

fn reported(read: &Sighting) -> Value {
    Value::Object(read.reported().clone())
}

#[tokio::test]
async fn postgres_the_create_carries_the_marker_the_volume_and_no_password_on_record() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let password = secret(&*backend, REGION, "pg-wire-password", PASSWORD, FLEET).await;
    let read = create(&*backend, REGION, "pg-wire", &spec(&password, "app"), FLEET)
        .await
        .expect("the create succeeds");

    let creates = calls(&server, "POST", &instances_path());
    assert_eq!(creates.len(), 1, "one create");
    let body = &creates[0].body;
    assert_eq!(body["project_id"], PROJECT);
    assert_eq!(body["name"], "pg-wire");
    assert_eq!(body["engine"], "PostgreSQL-16");
    assert_eq!(body["user_name"], "app");
    assert_eq!(
        body["password"], "<redacted>",
        "the password was sent, and not recorded"
    );
    assert_eq!(body["node_type"], "db-dev-s");
    assert_eq!(body["volume_type"], "sbs_5k");
    assert_eq!(body["volume_size"], 20_000_000_000u64, "bytes, decimal GB");
    assert_eq!(body["disable_backup"], false);
    assert_eq!(
        body["tags"],
        json!([format!("managed-by-infra={FLEET}"), "team=web"])
    );
    // The marker was in the creating call: no write touched the tags afterwards, and the
    // default retention (7 days) needed no patch either.
    let handle = read.handle.clone();
    assert!(calls(&server, "PATCH", &format!("{}/{handle}", instances_path())).is_empty());

    let shown = reported(&read);
    assert_eq!(shown["engineVersion"], "16");
    assert_eq!(
        shown["capacity"],
        json!({"shape": "classic", "instanceClass": "DB-DEV-S"})
    );
    assert_eq!(shown["storageGb"], 20);
    assert_eq!(shown["backupRetentionDays"], 7);
    assert_eq!(shown["masterUsername"], "app");
    assert_eq!(shown["tags"]["managed-by-infra"], FLEET);
    assert!(shown.get("masterPassword").is_none());
    let observed = read.observed_json();
    assert_eq!(observed["id"], handle.as_str());
    assert!(
        observed["endpoint"]
            .as_str()
            .is_some_and(|e| e.parse::<std::net::Ipv4Addr>().is_ok()),
        "the public endpoint's address: {observed}"
    );
    assert!(observed["port"].as_u64().is_some_and(|p| p > 0));

    let listed = backend.list("postgres", REGION).await.expect("list");
    assert!(
        listed
            .iter()
            .any(|l| l.handle == handle && l.name == "pg-wire")
    );
    let elsewhere = backend.list("postgres", "nl-ams").await.expect("list");
    assert!(
        elsewhere.is_empty(),
        "another region lists nothing: {elsewhere:?}"
    );
    let other_region = backend
        .read("postgres", "nl-ams", &handle)
        .await
        .unwrap_err();
    assert_eq!(other_region.kind, ErrorKind::NotFound, "{other_region}");
    let requests = format!("{:?}", server.requests());
    assert!(!requests.contains(PASSWORD), "the password is on record");
    server.shutdown().await;
}

#[tokio::test]
async fn postgres_provisioning_is_awaited_until_ready_on_the_manual_clock() {
    let clock = Arc::new(ManualClock::new());
    let server = stand_in_on(&clock).await;
    let polling = Polling {
        first: Duration::from_secs(2),
        longest: Duration::from_secs(10),
        deadline: Duration::from_secs(600),
    };
    let backend = backend_on(&server, &clock, Some(polling));
    let password = secret(&*backend, REGION, "pg-wait-password", PASSWORD, FLEET).await;
    server.settle_for(Duration::from_secs(44));
    let before = clock.now();
    let read = create(&*backend, REGION, "pg-wait", &spec(&password, "app"), FLEET)
        .await
        .expect("the create waits until the instance is ready");
    let path = format!("{}/{}", instances_path(), read.handle);
    let statuses: Vec<String> = calls(&server, "GET", &path)
        .iter()
        .map(|r| r.status.to_string())
        .collect();
    assert!(statuses.len() >= 7, "polled until ready: {statuses:?}");
    // Waits of 2, 4, 8, 10, 10 and 10 seconds between seven reads, on the manual clock.
    assert!(
        clock.now() - before >= Duration::from_secs(44),
        "the waits were made on the configured clock: {:?}",
        clock.now() - before
    );
    assert_eq!(
        reported(&read)["masterUsername"],
        "app",
        "ready: its users are listed"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn postgres_backup_retention_is_patched_once_ready_and_on_update() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let password = secret(&*backend, REGION, "pg-backup-password", PASSWORD, FLEET).await;
    let mut declared = spec(&password, "app");
    declared.backup_retention_days = Partial::Known(14);
    let read = create(&*backend, REGION, "pg-backup", &declared, FLEET)
        .await
        .expect("create");
    let handle = read.handle.clone();
    let path = format!("{}/{handle}", instances_path());
    let patches = calls(&server, "PATCH", &path);
    assert_eq!(
        patches.len(),
        1,
        "the retention is set once the instance is ready"
    );
    assert_eq!(patches[0].body, json!({"backup_schedule_retention": 14}));
    assert_eq!(reported(&read)["backupRetentionDays"], 14);

    server.clear_requests();
    declared.backup_retention_days = Partial::Known(0);
    let read = update(&*backend, REGION, &handle, &declared)
        .await
        .expect("update");
    let patches = calls(&server, "PATCH", &path);
    assert_eq!(patches.len(), 1);
    assert_eq!(
        patches[0].body,
        json!({"is_backup_schedule_disabled": true})
    );
    assert_eq!(reported(&read)["backupRetentionDays"], 0);
    assert_eq!(
        reported(&read)["tags"]["managed-by-infra"],
        FLEET,
        "the marker stays"
    );

    // The same update again changes nothing but the password.
    server.clear_requests();
    update(&*backend, REGION, &handle, &declared)
        .await
        .expect("again");
    let writes: Vec<String> = rdb_calls(&server)
        .iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        writes,
        vec![format!("PATCH {path}/users/app")],
        "{writes:?}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn postgres_an_upgrade_waits_out_a_busy_instance_one_field_at_a_time() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let password = secret(&*backend, REGION, "pg-busy-password", PASSWORD, FLEET).await;
    let mut declared = spec(&password, "app");
    let handle = create(&*backend, REGION, "pg-busy", &declared, FLEET)
        .await
        .expect("create")
        .handle;
    let path = format!("{}/{handle}", instances_path());
    // Another tool starts an upgrade: the instance is `configuring` for three reads.
    server.settle_for(Duration::from_millis(700));
    let upgrade = json!({"enable_encryption": true});
    let (status, _) = raw(&server, "POST", &format!("{path}/upgrade"), Some(upgrade)).await;
    assert_eq!(status, 200);
    server.clear_requests();
    declared.capacity = Capacity::Classic {
        instance_class: "DB-GP-XS".to_owned(),
    };
    declared.storage_gb = Partial::Known(30);
    let read = update(&*backend, REGION, &handle, &declared)
        .await
        .expect("the update waits the busy instance out");
    let upgrades = calls(&server, "POST", &format!("{path}/upgrade"));
    assert!(
        upgrades.iter().any(|r| r.status == 409),
        "the first upgrade met `transient_state`: {upgrades:?}"
    );
    let taken: Vec<&Value> = upgrades
        .iter()
        .filter(|r| r.status == 200)
        .map(|r| &r.body)
        .collect();
    assert_eq!(
        taken,
        vec![
            &json!({"node_type": "db-gp-xs"}),
            &json!({"volume_size": 30_000_000_000u64})
        ],
        "one field per upgrade, in order"
    );
    let shown = reported(&read);
    assert_eq!(shown["capacity"]["instanceClass"], "DB-GP-XS");
    assert_eq!(shown["storageGb"], 30);
    server.shutdown().await;
}

#[tokio::test]
async fn postgres_the_administrator_is_never_replaced_after_a_run_killed_mid_create() {
    let clock = Arc::new(ManualClock::new());
    let server = stand_in_on(&clock).await;
    let short = Polling {
        first: Duration::from_millis(100),
        longest: Duration::from_millis(200),
        deadline: Duration::from_secs(1),
    };
    let hasty = backend_on(&server, &clock, Some(short));
    let password = secret(&*hasty, REGION, "pg-killed-password", PASSWORD, FLEET).await;
    // The run gives up while the instance is still provisioning.
    server.settle_for(Duration::from_secs(20));
    let err = create(&*hasty, REGION, "pg-killed", &spec(&password, "app"), FLEET)
        .await
        .unwrap_err();
    assert!(err.may_have_been_sent, "the outcome is unknown: {err}");

    // The next run finds it by name, ours, and reads it: the administrator is unknown
    // (its users cannot be listed yet), never another name that would plan a replace.
    let backend = backend(&server, None);
    let listed = backend.list("postgres", REGION).await.expect("list");
    let found = listed
        .iter()
        .find(|l| l.name == "pg-killed")
        .expect("listed");
    let tags = backend
        .ownership("postgres", REGION, &found.handle)
        .await
        .expect("ownership");
    assert_eq!(
        tags.get("managed-by-infra").map(String::as_str),
        Some(FLEET)
    );
    // Still provisioning, the instance has no endpoint (as Scaleway answers): the read
    // is not possible yet, which is neither absence nor another administrator.
    let early = backend
        .read("postgres", REGION, &found.handle)
        .await
        .expect_err("a provisioning instance has no endpoint yet");
    assert_eq!(early.kind, ErrorKind::Unavailable, "{early}");

    // An update (the engine's, for the retention the create never set) waits for it.
    let mut declared = spec(&password, "app");
    declared.backup_retention_days = Partial::Known(10);
    let read = update(&*backend, REGION, &found.handle, &declared)
        .await
        .expect("the update waits until the instance is ready");
    assert_eq!(reported(&read)["masterUsername"], "app");
    assert_eq!(reported(&read)["backupRetentionDays"], 10);
    assert_eq!(
        calls(&server, "POST", &instances_path()).len(),
        1,
        "made once"
    );
    let users = format!("{}/{}/users", instances_path(), found.handle);
    assert!(
        calls(&server, "POST", &users).is_empty(),
        "the administrator was made by the create itself, never again"
    );
    assert!(rdb_calls(&server).iter().all(|r| r.method != "DELETE"));
    server.shutdown().await;
}

#[tokio::test]
async fn postgres_a_denial_is_denied_and_throttling_throttled_never_absent() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let password = secret(&*backend, REGION, "pg-deny-password", PASSWORD, FLEET).await;
    let handle = create(&*backend, REGION, "pg-deny", &spec(&password, "app"), FLEET)
        .await
        .expect("create")
        .handle;
    server.deny(ScalewayProduct::Rdb);
    let read = backend.read("postgres", REGION, &handle).await.unwrap_err();
    assert_eq!(read.kind, ErrorKind::Denied, "{read}");
    let list = backend.list("postgres", REGION).await.unwrap_err();
    assert_eq!(
        list.kind,
        ErrorKind::Denied,
        "a denied listing is never empty: {list}"
    );
    let delete = backend
        .delete("postgres", REGION, &handle)
        .await
        .unwrap_err();
    assert_eq!(delete.kind, ErrorKind::Denied, "{delete}");
    let created = create(
        &*backend,
        REGION,
        "pg-deny-2",
        &spec(&password, "app"),
        FLEET,
    )
    .await
    .unwrap_err();
    assert_eq!(created.kind, ErrorKind::Denied, "{created}");
    server.restore();

    // Tried once, the errors are what they are, never absence.
    let once = untried(&server);
    server.throttle(ScalewayProduct::Rdb, 1);
    let read = once.read("postgres", REGION, &handle).await.unwrap_err();
    assert_eq!(read.kind, ErrorKind::Throttled, "{read}");
    server.fail_reads(ScalewayProduct::Rdb, &handle);
    let read = once.read("postgres", REGION, &handle).await.unwrap_err();
    assert_eq!(read.kind, ErrorKind::Unavailable, "never absent: {read}");
    // Retried for the policy's budget, a read failing all along fails the same way.
    let read = backend.read("postgres", REGION, &handle).await.unwrap_err();
    assert_eq!(read.kind, ErrorKind::Unavailable, "never absent: {read}");
    assert!(read.message.contains("retry budget is spent"), "{read}");
    server.restore();
    backend
        .read("postgres", REGION, &handle)
        .await
        .expect("readable again");
    server.shutdown().await;
}

#[tokio::test]
async fn postgres_a_lost_create_answer_is_settled_by_name_and_marker() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let password = secret(&*backend, REGION, "pg-lost-password", PASSWORD, FLEET).await;
    server.lose_answers(ScalewayProduct::Rdb, 1);
    let read = create(&*backend, REGION, "pg-lost", &spec(&password, "app"), FLEET)
        .await
        .expect("the instance the lost create made is found by name and marker");
    let creates = calls(&server, "POST", &instances_path());
    assert_eq!(creates.len(), 1, "the create was not sent again");
    assert_eq!(creates[0].status, 504, "its answer was lost");
    assert_eq!(reported(&read)["masterUsername"], "app");
    assert_eq!(reported(&read)["tags"]["managed-by-infra"], FLEET);

    // The name is taken now: another create is a conflict, and sends nothing.
    let taken = create(&*backend, REGION, "pg-lost", &spec(&password, "app"), FLEET)
        .await
        .unwrap_err();
    assert_eq!(taken.kind, ErrorKind::Conflict, "{taken}");
    assert_eq!(calls(&server, "POST", &instances_path()).len(), 1);

    // An instance of the name made elsewhere, unmarked: the create refuses the name and
    // sends nothing.
    let (status, _) = raw(
        &server,
        "POST",
        &instances_path(),
        Some(json!({
            "project_id": PROJECT, "name": "pg-foreign", "engine": "PostgreSQL-16",
            "user_name": "owner", "password": "Other-Pw-77", "node_type": "DB-DEV-S",
            "volume_type": "sbs_5k", "volume_size": "20000000000", "tags": ["team=ops"],
        })),
    )
    .await;
    assert_eq!(status, 200);
    let refused = create(
        &*backend,
        REGION,
        "pg-foreign",
        &spec(&password, "app"),
        FLEET,
    )
    .await
    .unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Conflict, "{refused}");
    let ours: Vec<RecordedRequest> = calls(&server, "POST", &instances_path())
        .into_iter()
        .filter(|r| r.body["user_name"] == "app")
        .collect();
    assert_eq!(ours.len(), 1, "only the first create was sent");
    server.shutdown().await;
}

#[tokio::test]
async fn postgres_delete_is_awaited_and_a_second_delete_is_not_found() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let password = secret(&*backend, REGION, "pg-gone-password", PASSWORD, FLEET).await;
    let handle = create(&*backend, REGION, "pg-gone", &spec(&password, "app"), FLEET)
        .await
        .expect("create")
        .handle;
    server.settle_for(Duration::from_millis(1500));
    server.clear_requests();
    backend
        .delete("postgres", REGION, &handle)
        .await
        .expect("the delete waits until the instance is gone");
    let path = format!("{}/{handle}", instances_path());
    let deletes = calls(&server, "DELETE", &path);
    assert_eq!(deletes.len(), 1);
    let reads = calls(&server, "GET", &path);
    assert_eq!(
        reads.last().map(|r| r.status),
        Some(404),
        "polled until gone: {reads:?}"
    );
    assert!(reads.len() >= 5, "{} reads", reads.len());
    let again = backend
        .delete("postgres", REGION, &handle)
        .await
        .unwrap_err();
    assert_eq!(again.kind, ErrorKind::NotFound, "{again}");
    let read = backend.read("postgres", REGION, &handle).await.unwrap_err();
    assert_eq!(read.kind, ErrorKind::NotFound, "{read}");
    // The name is free again, for a replace.
    create(&*backend, REGION, "pg-gone", &spec(&password, "app"), FLEET)
        .await
        .expect("the name is free");
    server.shutdown().await;
}

#[tokio::test]
async fn postgres_the_password_is_set_again_on_update_and_never_shown() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let password = secret(&*backend, REGION, "pg-pass-password", PASSWORD, FLEET).await;
    let made = create(&*backend, REGION, "pg-pass", &spec(&password, "app"), FLEET)
        .await
        .expect("create");
    rotate(&*backend, &password, ROTATED).await;
    server.clear_requests();
    let updated = update(&*backend, REGION, &made.handle, &spec(&password, "app"))
        .await
        .expect("update");
    let user = format!("{}/{}/users/app", instances_path(), made.handle);
    let set = calls(&server, "PATCH", &user);
    assert_eq!(
        set.len(),
        1,
        "the rotated password reaches the database on update"
    );
    assert_eq!(set[0].body, json!({"password": "<redacted>"}));

    // A user the instance lost is made again, an administrator.
    let (status, _) = raw(&server, "DELETE", &user, None).await;
    assert_eq!(status, 204);
    server.clear_requests();
    update(&*backend, REGION, &made.handle, &spec(&password, "app"))
        .await
        .expect("update");
    let users = format!("{}/{}/users", instances_path(), made.handle);
    let made_again = calls(&server, "POST", &users);
    assert_eq!(made_again.len(), 1);
    assert_eq!(
        made_again[0].body,
        json!({"name": "app", "password": "<redacted>", "is_admin": true})
    );

    // A value Scaleway's rule refuses is refused before any call, unquoted.
    let weak = secret(&*backend, REGION, "pg-weak-password", "alllowercase", FLEET).await;
    server.clear_requests();
    let refused = create(&*backend, REGION, "pg-weak", &spec(&weak, "app"), FLEET)
        .await
        .unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Invalid, "{refused}");
    assert!(
        calls(&server, "POST", &instances_path()).is_empty(),
        "nothing was created"
    );
    let refused_update = update(&*backend, REGION, &made.handle, &spec(&weak, "app"))
        .await
        .unwrap_err();
    assert_eq!(refused_update.kind, ErrorKind::Invalid);

    let everything = format!(
        "{:?} {} {} {} {} {refused} {refused:?} {refused_update:?}",
        server.requests(),
        reported(&made),
        made.observed_json(),
        reported(&updated),
        updated.observed_json(),
    );
    for value in [PASSWORD, ROTATED, "alllowercase"] {
        assert!(
            !everything.contains(value),
            "a password was shown: {everything}"
        );
    }
    server.shutdown().await;
}

#[tokio::test]
async fn postgres_what_scaleway_cannot_do_is_refused_before_any_call() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let password = secret(&*backend, REGION, "pg-refuse-password", PASSWORD, FLEET).await;
    server.clear_requests();
    let mut serverless = spec(&password, "app");
    serverless.capacity = Capacity::Serverless {
        min_capacity: Acu::whole(1),
        max_capacity: Acu::whole(4),
    };
    let err = create(&*backend, REGION, "pg-serverless", &serverless, FLEET)
        .await
        .unwrap_err();
    assert!(
        err.kind == ErrorKind::Invalid && err.message.contains("serverless"),
        "{err}"
    );
    let mut lowercase = spec(&password, "app");
    lowercase.capacity = Capacity::Classic {
        instance_class: "db-dev-s".to_owned(),
    };
    let err = create(&*backend, REGION, "pg-lower", &lowercase, FLEET)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    let err = create(
        &*backend,
        REGION,
        "pg-user",
        &spec(&password, "pg_admin"),
        FLEET,
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    assert!(rdb_calls(&server).is_empty(), "{:?}", rdb_calls(&server));

    // A version Scaleway does not offer is refused after the engines are listed.
    let mut ancient = spec(&password, "app");
    ancient.engine_version = "12".to_owned();
    let err = create(&*backend, REGION, "pg-ancient", &ancient, FLEET)
        .await
        .unwrap_err();
    assert!(
        err.kind == ErrorKind::Invalid && err.message.contains("PostgreSQL-16"),
        "{err}"
    );
    assert!(calls(&server, "POST", &instances_path()).is_empty());

    let handle = create(
        &*backend,
        REGION,
        "pg-refuse",
        &spec(&password, "app"),
        FLEET,
    )
    .await
    .expect("create")
    .handle;
    server.clear_requests();
    let mut newer = spec(&password, "app");
    newer.engine_version = "17".to_owned();
    let err = update(&*backend, REGION, &handle, &newer)
        .await
        .unwrap_err();
    assert!(
        err.kind == ErrorKind::Invalid && err.message.contains("upgrade workflow"),
        "{err}"
    );
    let mut smaller = spec(&password, "app");
    smaller.storage_gb = Partial::Known(10);
    let err = update(&*backend, REGION, &handle, &smaller)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    assert!(
        rdb_calls(&server).iter().all(|r| r.method == "GET"),
        "nothing was written: {:?}",
        rdb_calls(&server)
    );
    server.shutdown().await;
}

#[tokio::test]
async fn postgres_mark_adds_the_marker_alone_and_never_over_another_fleets() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let (status, made) = raw(
        &server,
        "POST",
        &instances_path(),
        Some(json!({
            "project_id": PROJECT, "name": "pg-elsewhere", "engine": "PostgreSQL-15",
            "user_name": "owner", "password": "Other-Pw-77", "node_type": "db-pro2-xxs",
            "volume_type": "sbs_15k", "volume_size": 30_000_000_000u64, "tags": ["team=ops"],
        })),
    )
    .await;
    assert_eq!(status, 200);
    let id = made["id"].as_str().expect("an id").to_owned();
    let marker = Marker::new(FLEET);
    backend
        .mark("postgres", REGION, &id, &marker)
        .await
        .expect("mark waits for the instance to be ready");
    let tags = backend
        .ownership("postgres", REGION, &id)
        .await
        .expect("tags");
    assert_eq!(
        tags.get("managed-by-infra").map(String::as_str),
        Some(FLEET)
    );
    assert_eq!(tags.get("team").map(String::as_str), Some("ops"));
    let read = backend.read("postgres", REGION, &id).await.expect("read");
    assert_eq!(reported(&read)["capacity"]["instanceClass"], "DB-PRO2-XXS");
    assert_eq!(reported(&read)["storageGb"], 30);
    assert_eq!(reported(&read)["masterUsername"], "owner");
    let other = backend
        .mark("postgres", REGION, &id, &Marker::new("another"))
        .await
        .unwrap_err();
    assert_eq!(other.kind, ErrorKind::Conflict, "{other}");
    server.shutdown().await;
}

/// A `CreateInstance` body, with `extra` over a valid one.
fn raw_create(extra: Value) -> Value {
    let mut body = json!({
        "project_id": PROJECT, "name": "pg-rules", "engine": "PostgreSQL-16",
        "user_name": "owner", "password": "Other-Pw-77", "node_type": "DB-DEV-S",
        "volume_type": "sbs_5k", "volume_size": 20_000_000_000u64,
    });
    if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
        body.extend(extra);
    }
    body
}

#[tokio::test]
async fn postgres_the_stand_in_refuses_a_create_scaleway_refuses() {
    let server = stand_in().await;
    let path = instances_path();
    let argument = |answer: &Value| answer["details"][0]["argument_name"].clone();
    for (extra, field) in [
        (json!({"password": "nospecial1A"}), "password"),
        (json!({"node_type": "db-huge"}), "node_type"),
        (json!({"engine": "PostgreSQL-12"}), "engine"),
        (json!({"user_name": "pg_x"}), "user_name"),
        (json!({"volume_size": 20_000_000_001u64}), "volume_size"),
        (
            json!({"volume_type": "lssd", "node_type": "db-play2-pico"}),
            "volume_type",
        ),
    ] {
        let (status, answer) = raw(&server, "POST", &path, Some(raw_create(extra.clone()))).await;
        assert_eq!((status, argument(&answer)), (400, json!(field)), "{extra}");
    }
    let foreign = json!({"project_id": "33333333-3333-4333-8333-333333333333"});
    let (status, _) = raw(&server, "POST", &path, Some(raw_create(foreign))).await;
    assert_eq!(status, 403, "another project");
    let (status, made) = raw(&server, "POST", &path, Some(raw_create(json!({})))).await;
    assert_eq!(status, 200);
    assert_eq!(made["status"], "provisioning");
    assert_eq!(made["node_type"], "db-dev-s", "answered lowercase");
    // Names repeat, as on Scaleway; listings are paged.
    let (status, _) = raw(&server, "POST", &path, Some(raw_create(json!({})))).await;
    assert_eq!(status, 200, "a name may repeat");
    let (_, page) = raw(&server, "GET", &format!("{path}?page_size=1&page=2"), None).await;
    assert_eq!(page["total_count"], 2);
    assert_eq!(page["instances"].as_array().map(Vec::len), Some(1));
    let (status, _) = raw(&server, "GET", "/rdb/v1/regions/xx-yyy/instances", None).await;
    assert_eq!(status, 400, "an unknown region");
    server.shutdown().await;
}

#[tokio::test]
async fn postgres_the_stand_in_keeps_a_busy_instance_busy_and_upgrades_one_field() {
    let clock = Arc::new(ManualClock::new());
    let server = stand_in_on(&clock).await;
    let path = instances_path();
    let (_, made) = raw(&server, "POST", &path, Some(raw_create(json!({})))).await;
    let one = format!("{path}/{}", made["id"].as_str().expect("an id"));
    let (status, busy) = raw(&server, "PATCH", &one, Some(json!({"tags": []}))).await;
    assert_eq!(
        (status, busy["type"].clone()),
        (409, json!("transient_state"))
    );
    let (status, _) = raw(&server, "GET", &format!("{one}/users"), None).await;
    assert_eq!(status, 409, "users cannot be listed while provisioning");
    // Reads move nothing: time does.
    for _ in 0..2 {
        let (_, now) = raw(&server, "GET", &one, None).await;
        assert_eq!(now["status"], "provisioning");
        assert_eq!(
            now["endpoints"],
            json!([]),
            "no endpoint while provisioning"
        );
    }
    clock.advance(DEFAULT_SETTLING);
    let (_, now) = raw(&server, "GET", &one, None).await;
    assert_eq!(now["status"], "ready", "once the settling time has passed");
    assert_eq!(now["endpoints"].as_array().map(Vec::len), Some(1));
    let upgrade = format!("{one}/upgrade");
    for (body, why) in [
        (
            json!({"node_type": "db-gp-xs", "volume_size": 30_000_000_000u64}),
            "two fields",
        ),
        (json!({"volume_size": 10_000_000_000u64}), "a shrink"),
        (json!({"upgradable_version_id": "x"}), "a major version"),
        (json!({"enable_ha": false}), "HA off"),
    ] {
        let (status, _) = raw(&server, "POST", &upgrade, Some(body)).await;
        assert_eq!(status, 400, "{why}");
    }
    let (status, gone) = raw(
        &server,
        "PATCH",
        &format!("{one}/users/nobody"),
        Some(json!({})),
    )
    .await;
    assert_eq!((status, gone["resource"].clone()), (404, json!("user")));
    let (status, gone) = raw(&server, "GET", &format!("{path}/{}", "0".repeat(8)), None).await;
    assert_eq!((status, gone["resource"].clone()), (404, json!("instance")));
    let again = json!({"name": "owner", "password": "Other-Pw-77", "is_admin": false});
    let (status, taken) = raw(&server, "POST", &format!("{one}/users"), Some(again)).await;
    assert_eq!(
        (status, taken["type"].clone()),
        (409, json!("already_exists"))
    );
    let (status, upgraded) = raw(
        &server,
        "POST",
        &upgrade,
        Some(json!({"volume_size": "25000000000"})),
    )
    .await;
    assert_eq!(
        (status, upgraded["status"].clone()),
        (200, json!("configuring"))
    );
    assert_eq!(upgraded["volume"]["size"], 25_000_000_000u64);
    server.shutdown().await;
}
