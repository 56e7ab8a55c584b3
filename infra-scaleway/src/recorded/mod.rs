//! Traffic recorded against Scaleway's live API (`tests/recorded/`, from the acceptance
//! tests of Scaleway's Terraform provider: see the README there), read by the unit tests
//! that hold this crate's wire models against it.
//!
//! The wire models are private to their product modules, so each product's tests are a
//! child module of that product (`secrets.rs` here is `crate::secrets::recorded`); this
//! module holds what they share: the fixtures, read from the crate's directory, and the
//! count of the (kind, act) pairs they checked.

use std::collections::{BTreeMap, BTreeSet};

use infra_core::sdk::{BackendError, ErrorKind, Sighting};
use infra_testkit::evidence::{Evidence, Record};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::classify;

/// One recorded exchange.
#[derive(Debug, Clone)]
pub(crate) struct Exchange {
    /// The cassette it comes from, and its place there (for messages).
    pub(crate) source: String,
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: BTreeMap<String, String>,
    pub(crate) status: u16,
    pub(crate) response: Value,
}

impl Exchange {
    /// Whether Scaleway answered with success.
    pub(crate) fn ok(&self) -> bool {
        self.status < 300
    }

    /// The answer decoded as `T`, the wire model under test; a failure names the source.
    pub(crate) fn decode<T: DeserializeOwned>(&self) -> T {
        serde_json::from_value(self.response.clone()).unwrap_or_else(|e| {
            panic!(
                "{}: the recorded answer does not decode: {e}\n{}",
                self.source, self.response
            )
        })
    }

    /// The items of a listing's `field`, each decoded as `T`, with the raw items beside.
    pub(crate) fn items<T: DeserializeOwned>(&self, field: &str) -> Vec<(T, Value)> {
        let items = self.response[field]
            .as_array()
            .unwrap_or_else(|| panic!("{}: no `{field}` list in {}", self.source, self.response));
        assert!(
            self.response["total_count"].is_u64(),
            "{}: a listing answers its total_count",
            self.source
        );
        items
            .iter()
            .map(|item| {
                let decoded = serde_json::from_value(item.clone()).unwrap_or_else(|e| {
                    panic!(
                        "{}: a listed item does not decode: {e}\n{item}",
                        self.source
                    )
                });
                (decoded, item.clone())
            })
            .collect()
    }

    /// The error this crate makes of the recorded failure, for a call whose not-found
    /// list is `not_found` (writes when the method is not `GET`).
    pub(crate) fn error(&self, not_found: &[&str]) -> BackendError {
        assert!(!self.ok(), "{}: not a failure", self.source);
        classify(
            &format!("{} {}", self.method, self.path),
            self.status,
            &self.response.to_string(),
            not_found,
            self.method != "GET",
        )
    }

    /// The string field `name` of the recorded answer.
    pub(crate) fn str(&self, name: &str) -> &str {
        self.response[name]
            .as_str()
            .unwrap_or_else(|| panic!("{}: no string `{name}` in {}", self.source, self.response))
    }
}

/// The recorded fixture of `product` (`secret`, `rdb`, …).
pub(crate) fn fixture(product: &str) -> Value {
    let path = format!(
        "{}/tests/recorded/{product}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every recorded exchange of `act` (`secret-create`) of `product`; at least one.
pub(crate) fn exchanges(product: &str, act: &str) -> Vec<Exchange> {
    let fixture = fixture(product);
    let all = fixture["exchanges"][act]
        .as_array()
        .unwrap_or_else(|| panic!("{product}: no recorded `{act}`"));
    assert!(!all.is_empty(), "{product}: no recorded `{act}`");
    all.iter()
        .map(|e| Exchange {
            source: format!(
                "{product} {act} ({} #{})",
                e["cassette"].as_str().unwrap_or("?"),
                e["interaction"]
            ),
            method: e["method"].as_str().unwrap_or_default().to_owned(),
            path: e["path"].as_str().unwrap_or_default().to_owned(),
            query: serde_json::from_value(e["query"].clone()).unwrap_or_default(),
            status: e["status"]
                .as_u64()
                .and_then(|s| u16::try_from(s).ok())
                .unwrap_or(0),
            response: e["response"].clone(),
        })
        .collect()
}

/// One step of a resource's life: the act, the status code, the resource's status.
pub(crate) type Step = (String, u16, Option<String>);

/// The recorded status sequences of `resource` (`namespace`, `instance`) of `product`:
/// each the steps `(act, status code, resource status)` of one resource, in order.
pub(crate) fn sequences(product: &str, resource: &str) -> Vec<Vec<Step>> {
    let fixture = fixture(product);
    fixture["sequences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["resource"] == resource)
        .map(|s| {
            s["steps"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|step| {
                    (
                        step[0].as_str().unwrap_or_default().to_owned(),
                        step[1]
                            .as_u64()
                            .and_then(|c| u16::try_from(c).ok())
                            .unwrap_or(0),
                        step[2].as_str().map(str::to_owned),
                    )
                })
                .collect()
        })
        .collect()
}

/// The pairs a product's wire-model tests checked, published when they passed.
pub(crate) fn evidence(suite: &str) -> Evidence {
    Evidence::new(
        "scaleway",
        Record::RecordedTraffic,
        &format!("wire-models-{suite}"),
    )
}

/// Asserts that the recorded failure `exchange` is classified as `kind`.
pub(crate) fn assert_classified(exchange: &Exchange, not_found: &[&str], kind: ErrorKind) {
    let err = exchange.error(not_found);
    assert_eq!(err.kind, kind, "{}: {err}", exchange.source);
}

/// Every field of `value` a reader can name, nested objects spelled `a.b` (arrays are
/// not entered: their items are other objects).
pub(crate) fn field_paths(value: &Value) -> BTreeSet<String> {
    fn walk(value: &Value, prefix: &str, into: &mut BTreeSet<String>) {
        if let Value::Object(map) = value {
            for (key, inner) in map {
                let path = format!("{prefix}{key}");
                walk(inner, &format!("{path}."), into);
                into.insert(path);
            }
        }
    }
    let mut paths = BTreeSet::new();
    walk(value, "", &mut paths);
    paths
}

/// Holds a kind's list to being complete, on the recordings: every item of every
/// recorded `list_act` answer (the array `field`) carries every field that every
/// recorded successful `get_act` answer carries. Answers the listed items with their
/// sources, and the successful `get_act` exchanges, for the tests to convert.
pub(crate) fn listed_items_carry_what_get_answers(
    product: &str,
    list_act: &str,
    field: &str,
    get_act: &str,
) -> (Vec<(Value, String)>, Vec<Exchange>) {
    let gets: Vec<Exchange> = exchanges(product, get_act)
        .into_iter()
        .filter(Exchange::ok)
        .collect();
    assert!(!gets.is_empty(), "{product}: no successful `{get_act}`");
    let mut items = Vec::new();
    for list in exchanges(product, list_act)
        .into_iter()
        .filter(Exchange::ok)
    {
        let listed = list.response[field]
            .as_array()
            .unwrap_or_else(|| panic!("{}: no `{field}` list", list.source));
        for item in listed {
            let carried = field_paths(item);
            for get in &gets {
                let missing: Vec<String> = field_paths(&get.response)
                    .difference(&carried)
                    .cloned()
                    .collect();
                assert!(
                    missing.is_empty(),
                    "{}: a listed item lacks {missing:?}, which {} answers: the list is not \
                     complete",
                    list.source,
                    get.source
                );
            }
            items.push((item.clone(), list.source.clone()));
        }
    }
    assert!(
        !items.is_empty(),
        "{product}: no item recorded in `{list_act}`"
    );
    (items, gets)
}

/// Asserts that the reading a list makes of an item is the one `read` makes of the
/// recorded `GET` answer of the same resource: observed, reported and raw tags.
pub(crate) fn assert_same_reading(listed: &Sighting, read: &Sighting, source: &str) {
    assert_eq!(listed.handle, read.handle, "{source}: the handle");
    assert_eq!(
        listed.observed_json(),
        read.observed_json(),
        "{source}: the observed state"
    );
    assert_eq!(
        listed.reported(),
        read.reported(),
        "{source}: the reported configuration"
    );
    assert_eq!(listed.raw_tags(), read.raw_tags(), "{source}: the raw tags");
}

/// The pairs of `listed-and-fetched.json` of `product` (`container`) and `resource`
/// (`namespace`): one resource as a recorded listing answered it and as a recorded
/// `GET` of it answered it in the same state (the same `updated_at` and `status`), with
/// the source of each pair. At least one; every field the `GET` answered is in the
/// listed item.
pub(crate) fn listed_and_fetched(product: &str, resource: &str) -> Vec<(Value, Value, String)> {
    let path = format!(
        "{}/tests/recorded/listed-and-fetched.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let all: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let pairs = all["products"][product]["pairs"][resource]
        .as_array()
        .unwrap_or_else(|| panic!("{path}: no {product} {resource} pairs"));
    assert!(!pairs.is_empty(), "{path}: no {product} {resource} pairs");
    pairs
        .iter()
        .map(|pair| {
            let source = format!(
                "{product} {resource} ({} #{} and #{})",
                pair["cassette"].as_str().unwrap_or("?"),
                pair["list_interaction"],
                pair["get_interaction"]
            );
            let (listed, fetched) = (pair["listed"].clone(), pair["fetched"].clone());
            let missing: Vec<String> = field_paths(&fetched)
                .difference(&field_paths(&listed))
                .cloned()
                .collect();
            assert!(
                missing.is_empty(),
                "{source}: the listed item lacks {missing:?}"
            );
            (listed, fetched, source)
        })
        .collect()
}
