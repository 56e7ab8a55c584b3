//! Serverless Functions' wire models held against Scaleway's recorded answers.

use infra_core::sdk::ErrorKind;
use serde_json::Value;

use super::{FunctionWire, NO_FUNCTION, NO_NAMESPACE, UploadUrl, ready};
use crate::recorded::{assert_classified, evidence, exchanges, sequences};
use crate::serverless::{NamespaceWire, Resource};

const PRODUCT: &str = "function";

/// What the backend makes of a settled `status`: `Ok` for a good one, the error kind
/// of a failure.
fn outcome(resource: &impl Resource, kind: &str, good: &[&str]) -> Result<(), ErrorKind> {
    ready("read", kind, resource, good).map_err(|e| e.kind)
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
        resource.tags().len(),
        raw["tags"].as_array().map_or(0, Vec::len),
        "{source}"
    );
    assert_eq!(
        resource.secret_keys().len(),
        raw["secret_environment_variables"]
            .as_array()
            .map_or(0, Vec::len),
        "{source}: secret variables are answered as `{{key, hashed_value}}`"
    );
}

fn namespace_reads_back(ns: &NamespaceWire, raw: &Value, source: &str) {
    common(ns, raw, source);
    let expected = match ns.status.as_str() {
        "ready" => Ok(()),
        "deleting" => Err(ErrorKind::Conflict),
        "error" => Err(ErrorKind::Other),
        // `pending`: still being made; the backend waits, never reports it.
        _ => return,
    };
    assert_eq!(outcome(ns, "namespace", &["ready"]), expected, "{source}");
}

fn function_reads_back(f: &FunctionWire, raw: &Value, source: &str) {
    common(f, raw, source);
    assert_eq!(f.namespace_id, raw["namespace_id"], "{source}");
    assert_eq!(f.runtime.as_deref(), raw["runtime"].as_str(), "{source}");
    assert_eq!(f.timeout.as_deref(), raw["timeout"].as_str(), "{source}");
    assert_eq!(
        f.memory_limit.map(u64::from),
        raw["memory_limit"].as_u64(),
        "{source}"
    );
    let expected = match f.status.as_str() {
        "ready" | "created" => Ok(()),
        "deleting" => Err(ErrorKind::Conflict),
        "error" => Err(ErrorKind::Other),
        _ => return,
    };
    assert_eq!(
        outcome(f, "function", &["ready", "created"]),
        expected,
        "{source}"
    );
    if f.status == "error" {
        let message = raw["error_message"].as_str().unwrap_or_default();
        let err = ready("deploy", "function", f, &["ready"]).unwrap_err();
        assert!(err.message.contains(message), "{source}: {err}");
    }
}

#[test]
fn recorded_function_answers_decode_and_read_as_the_kinds_expect() {
    let mut evidence = evidence("functions");
    for (act, kind_act) in [
        ("namespace-create", "create"),
        ("namespace-get", "read"),
        ("namespace-update", "update"),
        ("namespace-delete", "delete"),
    ] {
        for ex in exchanges(PRODUCT, act) {
            if ex.ok() {
                namespace_reads_back(&ex.decode(), &ex.response, &ex.source);
            } else {
                // Functions answer a missing resource with a bare message.
                assert_classified(&ex, NO_NAMESPACE, ErrorKind::NotFound);
                assert_classified(&ex, NO_FUNCTION, ErrorKind::Invalid);
            }
        }
        evidence.checked("functionNamespace", kind_act);
    }
    for (act, kind_act) in [
        ("function-create", "create"),
        ("function-get", "read"),
        ("function-update", "update"),
        ("function-delete", "delete"),
        ("function-deploy", "deploy"),
    ] {
        for ex in exchanges(PRODUCT, act) {
            if ex.ok() {
                function_reads_back(&ex.decode(), &ex.response, &ex.source);
            } else {
                assert_classified(&ex, NO_FUNCTION, ErrorKind::NotFound);
            }
        }
        evidence.checked("function", kind_act);
    }
    for ex in exchanges(PRODUCT, "namespace-list") {
        for (ns, raw) in ex.items::<NamespaceWire>("namespaces") {
            namespace_reads_back(&ns, &raw, &ex.source);
        }
    }
    evidence.checked("functionNamespace", "list");
    for ex in exchanges(PRODUCT, "function-list") {
        for (f, raw) in ex.items::<FunctionWire>("functions") {
            function_reads_back(&f, &raw, &ex.source);
        }
    }
    evidence.checked("function", "list");
    for ex in exchanges(PRODUCT, "function-upload-url") {
        let url: UploadUrl = ex.decode();
        assert_eq!(url.url, ex.str("url"));
        assert!(ex.query.contains_key("content_length"), "{}", ex.source);
    }
    evidence.checked("function", "upload-url");
    evidence.publish();
}

#[test]
fn recorded_status_sequences_are_ones_the_backend_waits_through() {
    let mut evidence = evidence("functions-statuses");
    for (resource, known) in [
        ("namespace", &["pending", "ready", "deleting", "error"][..]),
        (
            "function",
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
    evidence.checked("functionNamespace", "await-ready");
    evidence.checked("function", "await-ready");
    evidence.publish();
}

/// `ListNamespaces` and `ListFunctions` answer each item whole: a listed namespace or
/// function carries every field the recorded `GET`s answer, and where the same function
/// was fetched too, the list's readings of it (as `function` and as `compute`) are the
/// reads of its `GET`.
#[test]
fn recorded_listings_are_complete_and_read_as_get_does() {
    use super::{compute, function, namespace};
    use crate::recorded::{assert_same_reading, listed_items_carry_what_get_answers};
    use infra_core::sdk::Sighting;
    let (namespaces, _) = listed_items_carry_what_get_answers(
        PRODUCT,
        "namespace-list",
        "namespaces",
        "namespace-get",
    );
    for (item, source) in &namespaces {
        let ns: NamespaceWire = serde_json::from_value(item.clone()).expect("decodes");
        let read = namespace::reading(&ns);
        assert_eq!(read.handle(), ns.id, "{source}");
        assert!(read.raw_tags().is_some(), "{source}: the tags are listed");
    }
    let (functions, gets) =
        listed_items_carry_what_get_answers(PRODUCT, "function-list", "functions", "function-get");
    let mut compared = 0;
    for (item, source) in &functions {
        let listed: FunctionWire = serde_json::from_value(item.clone()).expect("decodes");
        for get in gets.iter().filter(|g| g.response["id"] == item["id"]) {
            let fetched: FunctionWire = get.decode();
            assert_same_reading(
                &Sighting::from(function::reading(&listed)),
                &Sighting::from(function::reading(&fetched)),
                source,
            );
            let handle = compute::handle_of(&listed.namespace_id, &listed.id);
            assert_same_reading(
                &Sighting::from(compute::reading(&handle, &listed)),
                &Sighting::from(compute::reading(&handle, &fetched)),
                source,
            );
            compared += 1;
        }
    }
    assert!(compared > 0, "no recorded GET of a listed function");
}

/// The same namespace and function, listed and fetched in the same state, read alike
/// (a function as `function` and as `compute`).
#[test]
fn a_listed_namespace_or_function_reads_as_its_get_does() {
    use super::{compute, function, namespace};
    use crate::recorded::{assert_same_reading, listed_and_fetched};
    use infra_core::sdk::Sighting;
    fn decode<T: serde::de::DeserializeOwned>(v: &Value) -> T {
        serde_json::from_value(v.clone()).expect("decodes")
    }
    for (listed, fetched, source) in listed_and_fetched(PRODUCT, "namespace") {
        let (listed, fetched): (NamespaceWire, NamespaceWire) = (decode(&listed), decode(&fetched));
        assert_same_reading(
            &Sighting::from(namespace::reading(&listed)),
            &Sighting::from(namespace::reading(&fetched)),
            &source,
        );
    }
    for (listed, fetched, source) in listed_and_fetched(PRODUCT, "function") {
        let (listed, fetched): (FunctionWire, FunctionWire) = (decode(&listed), decode(&fetched));
        assert_same_reading(
            &Sighting::from(function::reading(&listed)),
            &Sighting::from(function::reading(&fetched)),
            &source,
        );
        let handle = compute::handle_of(&listed.namespace_id, &listed.id);
        assert_same_reading(
            &Sighting::from(compute::reading(&handle, &listed)),
            &Sighting::from(compute::reading(&handle, &fetched)),
            &source,
        );
    }
}
