//! Managed Database's wire models held against Scaleway's recorded answers.

use infra_core::prelude::Partial;
use infra_core::sdk::ErrorKind;
use serde_json::Value;

use super::{
    ENGINE_PREFIX, Engine, Instance, NO_INSTANCE, TRANSIENT, User, administrator, backup_days,
    bytes_of, reading_of,
};
use crate::recorded::{assert_classified, evidence, exchanges, sequences};

const PRODUCT: &str = "rdb";

/// A recorded instance through the model: its fields, and what a read makes of it.
fn reads_back(instance: &Instance, raw: &Value, source: &str) {
    assert_eq!(
        instance.id,
        raw["id"].as_str().unwrap_or_default(),
        "{source}"
    );
    assert_eq!(instance.status, raw["status"], "{source}");
    assert_eq!(instance.engine, raw["engine"], "{source}");
    assert_eq!(instance.node_type, raw["node_type"], "{source}");
    assert_eq!(
        instance.volume.as_ref().and_then(|v| bytes_of(&v.size)),
        raw["volume"]["size"].as_u64(),
        "{source}: the volume's size in bytes"
    );
    let schedule = &raw["backup_schedule"];
    let retention = schedule["retention"]
        .as_u64()
        .and_then(|r| u32::try_from(r).ok());
    let expected = match schedule["disabled"].as_bool() {
        Some(true) => Partial::Known(0),
        Some(false) => retention.map_or(Partial::Unknown, Partial::Known),
        None => Partial::Unknown,
    };
    assert_eq!(
        backup_days(instance),
        expected,
        "{source}: the backup retention"
    );
    // Every status Scaleway answered is one the backend knows: `ready`, or one it waits
    // through.
    assert!(
        instance.status == "ready" || TRANSIENT.contains(&instance.status.as_str()),
        "{source}: unknown status `{}`",
        instance.status
    );
    match reading_of(instance, Partial::Unknown) {
        Ok(read) => {
            assert_eq!(read.observed().id, instance.id, "{source}");
            let tags = raw["tags"].as_array().map_or(0, Vec::len);
            assert_eq!(read.raw_tags().map(|t| t.len()), Some(tags), "{source}");
        }
        // An instance still being made has no endpoint yet: that is not a reading.
        Err(e) => {
            assert_eq!(e.kind, ErrorKind::Unavailable, "{source}: {e}");
            assert!(
                raw["endpoints"].as_array().is_none_or(Vec::is_empty),
                "{source}"
            );
        }
    }
}

#[test]
fn recorded_instances_decode_and_read_as_the_kind_expects() {
    let mut evidence = evidence("rdb");
    for (act, kind_act) in [
        ("instance-create", "create"),
        ("instance-get", "read"),
        ("instance-update", "update"),
        ("instance-upgrade", "upgrade"),
        ("instance-delete", "delete"),
    ] {
        for ex in exchanges(PRODUCT, act) {
            if ex.ok() {
                reads_back(&ex.decode(), &ex.response, &ex.source);
            } else {
                assert_classified(&ex, NO_INSTANCE, ErrorKind::NotFound);
            }
        }
        evidence.checked("postgres", kind_act);
    }
    for ex in exchanges(PRODUCT, "instance-list") {
        for (instance, raw) in ex.items::<Instance>("instances") {
            reads_back(&instance, &raw, &ex.source);
        }
    }
    evidence.checked("postgres", "list");
    for ex in exchanges(PRODUCT, "instance-delete") {
        let deleted: Instance = ex.decode();
        assert_eq!(deleted.status, "deleting", "{}", ex.source);
    }
    evidence.publish();
}

#[test]
fn recorded_status_sequences_are_ones_the_backend_waits_through() {
    let mut evidence = evidence("rdb-statuses");
    let sequences = sequences(PRODUCT, "instance");
    assert!(!sequences.is_empty());
    for steps in sequences {
        for (act, code, status) in &steps {
            match status {
                Some(status) => assert!(
                    status == "ready" || TRANSIENT.contains(&status.as_str()),
                    "{act} answered `{status}`: {steps:?}"
                ),
                None => assert_eq!(*code, 404, "{act}: {steps:?}"),
            }
        }
        // A delete ends in a 404 after `deleting`.
        if let Some(at) = steps.iter().position(|(act, ..)| act == "instance-delete") {
            let after: Vec<_> = steps[at..]
                .iter()
                .map(|(_, c, s)| (*c, s.clone()))
                .collect();
            assert_eq!(
                after.first().map(|s| s.1.as_deref()),
                Some(Some("deleting"))
            );
            assert_eq!(after.last().map(|s| s.0), Some(404), "{steps:?}");
        }
    }
    evidence.checked("postgres", "await-ready");
    evidence.checked("postgres", "await-gone");
    evidence.publish();
}

#[test]
fn recorded_engines_and_users_decode() {
    let mut evidence = evidence("rdb-engines-users");
    for ex in exchanges(PRODUCT, "engine-list") {
        let engines = ex.items::<Engine>("engines");
        for (engine, raw) in &engines {
            let versions = raw["versions"].as_array().map_or(0, Vec::len);
            assert_eq!(engine.versions.len(), versions, "{}", ex.source);
        }
        let postgres = engines
            .iter()
            .find(|(_, raw)| raw["name"] == "PostgreSQL")
            .expect("the engines listed hold PostgreSQL");
        // Version names are whole engine names (`PostgreSQL-16`), as the backend
        // compares them with the engine it creates.
        assert!(!postgres.0.versions.is_empty(), "{}", ex.source);
        for version in &postgres.0.versions {
            assert!(version.name.starts_with(ENGINE_PREFIX), "{}", ex.source);
            assert!(!version.disabled, "{}", ex.source);
        }
    }
    evidence.checked("postgres", "list-engines");
    for ex in exchanges(PRODUCT, "user-list") {
        let users: Vec<User> = ex.items::<User>("users").into_iter().map(|u| u.0).collect();
        let admins = users.iter().filter(|u| u.is_admin).count();
        let expected = match (admins, users.iter().find(|u| u.is_admin)) {
            (1, Some(admin)) => Partial::Known(admin.name.clone()),
            _ => Partial::Unknown,
        };
        assert_eq!(administrator(&users), expected, "{}", ex.source);
    }
    evidence.checked("postgres", "list-users");
    for act in ["user-create", "user-update"] {
        for ex in exchanges(PRODUCT, act) {
            let user: User = ex.decode();
            assert_eq!(user.name, ex.str("name"));
        }
    }
    evidence.checked("postgres", "create-user");
    evidence.checked("postgres", "update-user");
    evidence.publish();
}
