//! Container Registry's wire model held against Scaleway's recorded answers.

use infra_core::sdk::ErrorKind;
use serde_json::Value;

use super::{NO_NAMESPACE, Namespace, RegistryNamespaces, reading};
use crate::recorded::{assert_classified, evidence, exchanges};

const PRODUCT: &str = "registry";

fn reads_back(ns: &Namespace, raw: &Value, source: &str) {
    assert_eq!(ns.id, raw["id"].as_str().unwrap_or_default(), "{source}");
    assert_eq!(ns.name, raw["name"], "{source}");
    assert_eq!(ns.status, raw["status"], "{source}");
    assert_eq!(ns.endpoint, raw["endpoint"], "{source}");
    let read = reading(ns);
    assert_eq!(read.observed().uri, ns.endpoint, "{source}");
    // Nothing on a namespace proves whose it is: a read carries no ownership tags, and a
    // description written by another tool reports no tags either.
    assert!(read.raw_tags().is_none(), "{source}");
    assert_eq!(read.reported()["tags"], serde_json::json!({}), "{source}");
    // The statuses recorded (`ready`, `deleting`) are not failures.
    let healthy = RegistryNamespaces::healthy(ns.clone(), "read");
    assert!(healthy.is_ok(), "{source}: {}", ns.status);
}

#[test]
fn recorded_registry_answers_decode_and_read_as_the_kind_expects() {
    let mut evidence = evidence("registry");
    for (act, kind_act) in [
        ("namespace-create", "create"),
        ("namespace-get", "read"),
        ("namespace-update", "update"),
        ("namespace-delete", "delete"),
    ] {
        for ex in exchanges(PRODUCT, act) {
            if ex.ok() {
                reads_back(&ex.decode(), &ex.response, &ex.source);
            } else {
                // Registry answers a missing namespace with a bare message.
                assert_eq!(ex.response["type"], Value::Null, "{}", ex.source);
                assert_classified(&ex, NO_NAMESPACE, ErrorKind::NotFound);
            }
        }
        evidence.checked("imageRegistry", kind_act);
    }
    let deleted: Namespace = exchanges(PRODUCT, "namespace-delete")[0].decode();
    assert_eq!(
        deleted.status, "deleting",
        "a delete answers the namespace deleting"
    );
    for ex in exchanges(PRODUCT, "namespace-list") {
        for (ns, raw) in ex.items::<Namespace>("namespaces") {
            reads_back(&ns, &raw, &ex.source);
        }
    }
    evidence.checked("imageRegistry", "list");
    evidence.publish();
}

/// `ListNamespaces` answers each namespace whole: a listed namespace carries every field
/// `GetNamespace` answers, and the list's reading of it is the read of its `GET`.
#[test]
fn recorded_namespace_listings_are_complete_and_read_as_get_does() {
    use crate::recorded::{assert_same_reading, listed_items_carry_what_get_answers};
    use infra_core::sdk::Sighting;
    let (items, gets) = listed_items_carry_what_get_answers(
        PRODUCT,
        "namespace-list",
        "namespaces",
        "namespace-get",
    );
    let mut compared = 0;
    for (item, source) in &items {
        let listed: Namespace = serde_json::from_value(item.clone()).expect("decodes");
        for get in gets.iter().filter(|g| g.response["id"] == item["id"]) {
            let read = Sighting::from(reading(&get.decode()));
            assert_same_reading(&Sighting::from(reading(&listed)), &read, source);
            compared += 1;
        }
    }
    assert!(compared > 0, "no recorded GET of a listed namespace");
}

/// The same namespace, listed and fetched in the same state, read alike.
#[test]
fn a_listed_namespace_reads_as_its_get_does() {
    use crate::recorded::{assert_same_reading, listed_and_fetched};
    use infra_core::sdk::Sighting;
    for (listed, fetched, source) in listed_and_fetched(PRODUCT, "namespace") {
        let listed: Namespace = serde_json::from_value(listed).expect("decodes");
        let fetched: Namespace = serde_json::from_value(fetched).expect("decodes");
        assert_same_reading(
            &Sighting::from(reading(&listed)),
            &Sighting::from(reading(&fetched)),
            &source,
        );
    }
}
