//! Traffic recorded against Scaleway's live API (`tests/recorded/`, from the acceptance
//! tests of Scaleway's Terraform provider: see the README there), read by the unit tests
//! that hold this crate's wire models against it.
//!
//! The wire models are private to their product modules, so each product's tests are a
//! child module of that product (`secrets.rs` here is `crate::secrets::recorded`); this
//! module holds what they share: the fixtures, read from the crate's directory, and the
//! count of the (kind, act) pairs they checked.

use std::collections::BTreeMap;

use infra_core::sdk::{BackendError, ErrorKind};
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
