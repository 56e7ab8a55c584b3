//! Serverless Containers' wire models held against Scaleway's recorded answers
//! (`containers/v1beta1`, recorded before the Terraform provider moved to `v1`).

use infra_core::sdk::ErrorKind;
use serde_json::Value;

use super::{ContainerWire, NO_CONTAINER, settled};
use crate::recorded::{assert_classified, evidence, exchanges, sequences};
use crate::serverless::{NO_NAMESPACE, NamespaceWire, Resource};

const PRODUCT: &str = "container";

/// What the backend's wait makes of a status: settled, still at work, or a failure.
fn outcome(resource: &impl Resource) -> Result<bool, ErrorKind> {
    settled("read", resource.id(), resource).map_err(|e| e.kind)
}

fn common(resource: &impl Resource, raw: &Value, source: &str) {
    assert_eq!(
        resource.id(),
        raw["id"].as_str().unwrap_or_default(),
        "{source}"
    );
    assert_eq!(resource.name(), raw["name"], "{source}");
    assert_eq!(resource.status(), raw["status"], "{source}");
    assert_eq!(
        resource.secret_keys().len(),
        raw["secret_environment_variables"]
            .as_array()
            .map_or(0, Vec::len),
        "{source}"
    );
    let expected = match resource.status() {
        "ready" => Ok(true),
        "error" => Err(ErrorKind::Other),
        "deleting" => Err(ErrorKind::Conflict),
        // `pending`, `created`: Scaleway is still at work.
        _ => Ok(false),
    };
    assert_eq!(outcome(resource), expected, "{source}");
}

fn container_reads_back(c: &ContainerWire, raw: &Value, source: &str) {
    common(c, raw, source);
    assert_eq!(c.namespace_id, raw["namespace_id"], "{source}");
    assert_eq!(
        c.registry_image.as_deref(),
        raw["registry_image"].as_str(),
        "{source}"
    );
    assert_eq!(c.port.map(u64::from), raw["port"].as_u64(), "{source}");
    assert_eq!(
        c.cpu_limit.map(u64::from),
        raw["cpu_limit"].as_u64(),
        "{source}"
    );
    assert_eq!(
        c.memory_limit.map(u64::from),
        raw["memory_limit"].as_u64(),
        "{source}"
    );
    assert_eq!(c.timeout.as_deref(), raw["timeout"].as_str(), "{source}");
    if c.status == "error" {
        let message = raw["error_message"].as_str().unwrap_or_default();
        let err = settled("deploy", &c.id, c).unwrap_err();
        assert!(err.message.contains(message), "{source}: {err}");
    }
}

#[test]
fn recorded_container_answers_decode_and_read_as_the_kinds_expect() {
    let mut evidence = evidence("containers");
    for (act, kind_act) in [
        ("namespace-create", "create"),
        ("namespace-get", "read"),
        ("namespace-update", "update"),
        ("namespace-delete", "delete"),
    ] {
        for ex in exchanges(PRODUCT, act) {
            if ex.ok() {
                common(&ex.decode::<NamespaceWire>(), &ex.response, &ex.source);
            } else {
                assert_classified(&ex, NO_NAMESPACE, ErrorKind::NotFound);
                assert_classified(&ex, NO_CONTAINER, ErrorKind::Invalid);
            }
        }
        evidence.checked("containerNamespace", kind_act);
    }
    for (act, kind_act) in [
        ("container-create", "create"),
        ("container-get", "read"),
        ("container-update", "update"),
        ("container-delete", "delete"),
    ] {
        for ex in exchanges(PRODUCT, act) {
            if ex.ok() {
                container_reads_back(&ex.decode(), &ex.response, &ex.source);
            } else {
                assert_classified(&ex, NO_CONTAINER, ErrorKind::NotFound);
            }
        }
        evidence.checked("container", kind_act);
    }
    for ex in exchanges(PRODUCT, "namespace-list") {
        for (ns, raw) in ex.items::<NamespaceWire>("namespaces") {
            common(&ns, &raw, &ex.source);
        }
    }
    evidence.checked("containerNamespace", "list");
    for ex in exchanges(PRODUCT, "container-list") {
        for (c, raw) in ex.items::<ContainerWire>("containers") {
            container_reads_back(&c, &raw, &ex.source);
        }
    }
    evidence.checked("container", "list");
    evidence.publish();
}

#[test]
fn recorded_status_sequences_are_ones_the_backend_waits_through() {
    let mut evidence = evidence("containers-statuses");
    for (resource, known) in [
        ("namespace", &["pending", "ready", "deleting", "error"][..]),
        (
            "container",
            &["created", "pending", "ready", "deleting", "error"][..],
        ),
    ] {
        let all = sequences(PRODUCT, resource);
        assert!(!all.is_empty(), "{resource}");
        for steps in all {
            for (act, code, status) in &steps {
                match status {
                    Some(s) => assert!(known.contains(&s.as_str()), "{act}: `{s}`: {steps:?}"),
                    None => assert_eq!(*code, 404, "{act}: {steps:?}"),
                }
            }
        }
    }
    evidence.checked("containerNamespace", "await-ready");
    evidence.checked("container", "await-ready");
    evidence.publish();
}

/// `ListNamespaces` and `ListContainers` answer each item whole: a listed namespace or
/// container carries every field the recorded `GET`s answer (the recordings hold no
/// `GET` of a listed one, so the readings are compared on the fields alone), and its
/// reading is made by the function `read` uses.
#[test]
fn recorded_listings_are_complete() {
    use super::container::container_reading;
    use super::namespace::namespace_reading;
    use crate::recorded::listed_items_carry_what_get_answers;
    let (namespaces, _) = listed_items_carry_what_get_answers(
        PRODUCT,
        "namespace-list",
        "namespaces",
        "namespace-get",
    );
    for (item, source) in &namespaces {
        let ns: NamespaceWire = serde_json::from_value(item.clone()).expect("decodes");
        let read = namespace_reading(&ns);
        assert_eq!(read.handle(), ns.id, "{source}");
        assert!(read.raw_tags().is_some(), "{source}: the tags are listed");
    }
    let (containers, _) = listed_items_carry_what_get_answers(
        PRODUCT,
        "container-list",
        "containers",
        "container-get",
    );
    for (item, source) in &containers {
        let c: ContainerWire = serde_json::from_value(item.clone()).expect("decodes");
        let read = container_reading(&c);
        assert_eq!(read.handle(), c.id, "{source}");
        assert!(read.raw_tags().is_some(), "{source}: the tags are listed");
    }
}

/// The same namespace and container, listed and fetched in the same state, read alike.
#[test]
fn a_listed_namespace_or_container_reads_as_its_get_does() {
    use super::container::container_reading;
    use super::namespace::namespace_reading;
    use crate::recorded::{assert_same_reading, listed_and_fetched};
    use infra_core::sdk::Sighting;
    fn decode<T: serde::de::DeserializeOwned>(v: &Value) -> T {
        serde_json::from_value(v.clone()).expect("decodes")
    }
    for (listed, fetched, source) in listed_and_fetched(PRODUCT, "namespace") {
        let (listed, fetched): (NamespaceWire, NamespaceWire) = (decode(&listed), decode(&fetched));
        assert_same_reading(
            &Sighting::from(namespace_reading(&listed)),
            &Sighting::from(namespace_reading(&fetched)),
            &source,
        );
    }
    for (listed, fetched, source) in listed_and_fetched(PRODUCT, "container") {
        let (listed, fetched): (ContainerWire, ContainerWire) = (decode(&listed), decode(&fetched));
        assert_same_reading(
            &Sighting::from(container_reading(&listed)),
            &Sighting::from(container_reading(&fetched)),
            &source,
        );
    }
}
