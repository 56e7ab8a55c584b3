//! Secret Manager's wire models held against Scaleway's recorded answers.

use infra_core::prelude::Partial;
use infra_core::sdk::ErrorKind;
use serde_json::Value;

use super::{NO_SECRET, Secret, Version, reading};
use crate::recorded::{assert_classified, evidence, exchanges};

const PRODUCT: &str = "secret";

/// A recorded secret read through the model, as a read reports it.
fn reads_back(secret: &Secret, raw: &Value, source: &str) {
    assert_eq!(
        secret.id,
        raw["id"].as_str().unwrap_or_default(),
        "{source}"
    );
    assert_eq!(secret.name, raw["name"], "{source}");
    let tags: Vec<&str> = raw["tags"]
        .as_array()
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(secret.tags, tags, "{source}");
    assert_eq!(
        secret.deletion_requested_at.is_some(),
        !raw["deletion_requested_at"].is_null(),
        "{source}"
    );
    let read = reading(secret, Partial::Unknown);
    assert_eq!(
        read.reported()["description"],
        raw["description"].as_str().unwrap_or_default(),
        "{source}: a secret without description reads as \"\""
    );
    assert_eq!(read.handle(), secret.id);
}

#[test]
fn recorded_secret_answers_decode_and_read_as_the_kind_expects() {
    let mut evidence = evidence("secrets");
    for (act, kind_act) in [
        ("secret-create", "create"),
        ("secret-get", "read"),
        ("secret-update", "update"),
    ] {
        for ex in exchanges(PRODUCT, act) {
            if !ex.ok() {
                // A secret that is not there (or no longer) is absent for its own calls.
                assert_classified(&ex, NO_SECRET, ErrorKind::NotFound);
                continue;
            }
            let secret: Secret = ex.decode();
            reads_back(&secret, &ex.response, &ex.source);
            assert!(
                secret.full_name().ends_with(&secret.name),
                "{}: {}",
                ex.source,
                secret.full_name()
            );
        }
        evidence.checked("secrets", kind_act);
    }
    for ex in exchanges(PRODUCT, "secret-list") {
        for (secret, raw) in ex.items::<Secret>("secrets") {
            reads_back(&secret, &raw, &ex.source);
        }
    }
    evidence.checked("secrets", "list");
    for ex in exchanges(PRODUCT, "secret-delete") {
        if ex.ok() {
            assert!(ex.response.is_null(), "{}: 204, no body", ex.source);
        } else {
            // A protected secret refuses deletion: the declaration is at fault.
            assert_eq!(ex.status, 412);
            assert_classified(&ex, NO_SECRET, ErrorKind::Invalid);
        }
    }
    evidence.checked("secrets", "delete");
    for act in ["version-create", "version-get"] {
        for ex in exchanges(PRODUCT, act) {
            if ex.ok() {
                let version: Version = ex.decode();
                assert_eq!(Some(version.revision), ex.response["revision"].as_u64());
            } else {
                // A payload Scaleway refuses names the argument.
                let err = ex.error(NO_SECRET);
                assert_eq!(err.kind, ErrorKind::Invalid, "{}: {err}", ex.source);
                assert!(err.message.contains("`data`"), "{err}");
            }
        }
    }
    evidence.checked("secrets", "add-version");
    evidence.checked("secrets", "read-version");
    evidence.publish();
}
