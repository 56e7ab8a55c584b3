//! The backend and the stand-in held against traffic recorded on Scaleway's live API
//! (`tests/recorded/`, see the README there): what the backend sends must have the
//! recorded method, path shape and body fields ([`client`]), and what the stand-in
//! answers the recorded fields and status sequences ([`stand_in`]). Every difference is
//! either mended or named, with its reason, in one allow-list: the backend's in
//! [`client::CLIENT_DIFFERENCES`], the stand-in's in
//! `infra_testkit::scaleway::DIFFERENCES` (the table of the stand-in's module docs).

mod client;
mod stand_in;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// The acts this crate makes, per recorded product: `(product, act, method, path)`,
/// the path's segments after the API's prefix with `*` for one segment of any value.
pub(crate) const ACTS: &[(&str, &str, &str, &str)] = &[
    ("account", "project-get", "GET", "/account/v3/projects/*"),
    (
        "secret",
        "secret-create",
        "POST",
        "/secret-manager/v1beta1/regions/*/secrets",
    ),
    (
        "secret",
        "secret-list",
        "GET",
        "/secret-manager/v1beta1/regions/*/secrets",
    ),
    (
        "secret",
        "secret-get",
        "GET",
        "/secret-manager/v1beta1/regions/*/secrets/*",
    ),
    (
        "secret",
        "secret-update",
        "PATCH",
        "/secret-manager/v1beta1/regions/*/secrets/*",
    ),
    (
        "secret",
        "secret-delete",
        "DELETE",
        "/secret-manager/v1beta1/regions/*/secrets/*",
    ),
    (
        "secret",
        "version-create",
        "POST",
        "/secret-manager/v1beta1/regions/*/secrets/*/versions",
    ),
    (
        "secret",
        "version-get",
        "GET",
        "/secret-manager/v1beta1/regions/*/secrets/*/versions/*",
    ),
    (
        "secret",
        "version-access",
        "GET",
        "/secret-manager/v1beta1/regions/*/secrets/*/versions/*/access",
    ),
    (
        "registry",
        "namespace-create",
        "POST",
        "/registry/v1/regions/*/namespaces",
    ),
    (
        "registry",
        "namespace-list",
        "GET",
        "/registry/v1/regions/*/namespaces",
    ),
    (
        "registry",
        "namespace-get",
        "GET",
        "/registry/v1/regions/*/namespaces/*",
    ),
    (
        "registry",
        "namespace-update",
        "PATCH",
        "/registry/v1/regions/*/namespaces/*",
    ),
    (
        "registry",
        "namespace-delete",
        "DELETE",
        "/registry/v1/regions/*/namespaces/*",
    ),
    (
        "rdb",
        "instance-create",
        "POST",
        "/rdb/v1/regions/*/instances",
    ),
    ("rdb", "instance-list", "GET", "/rdb/v1/regions/*/instances"),
    (
        "rdb",
        "instance-get",
        "GET",
        "/rdb/v1/regions/*/instances/*",
    ),
    (
        "rdb",
        "instance-update",
        "PATCH",
        "/rdb/v1/regions/*/instances/*",
    ),
    (
        "rdb",
        "instance-delete",
        "DELETE",
        "/rdb/v1/regions/*/instances/*",
    ),
    (
        "rdb",
        "instance-upgrade",
        "POST",
        "/rdb/v1/regions/*/instances/*/upgrade",
    ),
    (
        "rdb",
        "engine-list",
        "GET",
        "/rdb/v1/regions/*/database-engines",
    ),
    (
        "rdb",
        "user-list",
        "GET",
        "/rdb/v1/regions/*/instances/*/users",
    ),
    (
        "rdb",
        "user-create",
        "POST",
        "/rdb/v1/regions/*/instances/*/users",
    ),
    (
        "rdb",
        "user-update",
        "PATCH",
        "/rdb/v1/regions/*/instances/*/users/*",
    ),
    (
        "iam",
        "application-create",
        "POST",
        "/iam/v1alpha1/applications",
    ),
    (
        "iam",
        "application-list",
        "GET",
        "/iam/v1alpha1/applications",
    ),
    (
        "iam",
        "application-get",
        "GET",
        "/iam/v1alpha1/applications/*",
    ),
    (
        "iam",
        "application-update",
        "PATCH",
        "/iam/v1alpha1/applications/*",
    ),
    (
        "iam",
        "application-delete",
        "DELETE",
        "/iam/v1alpha1/applications/*",
    ),
    ("iam", "policy-create", "POST", "/iam/v1alpha1/policies"),
    ("iam", "policy-list", "GET", "/iam/v1alpha1/policies"),
    ("iam", "policy-get", "GET", "/iam/v1alpha1/policies/*"),
    ("iam", "policy-delete", "DELETE", "/iam/v1alpha1/policies/*"),
    ("iam", "rule-list", "GET", "/iam/v1alpha1/rules"),
    (
        "iam",
        "permission-set-list",
        "GET",
        "/iam/v1alpha1/permission-sets",
    ),
    (
        "function",
        "namespace-create",
        "POST",
        "/functions/v1beta1/regions/*/namespaces",
    ),
    (
        "function",
        "namespace-list",
        "GET",
        "/functions/v1beta1/regions/*/namespaces",
    ),
    (
        "function",
        "namespace-get",
        "GET",
        "/functions/v1beta1/regions/*/namespaces/*",
    ),
    (
        "function",
        "namespace-update",
        "PATCH",
        "/functions/v1beta1/regions/*/namespaces/*",
    ),
    (
        "function",
        "namespace-delete",
        "DELETE",
        "/functions/v1beta1/regions/*/namespaces/*",
    ),
    (
        "function",
        "function-create",
        "POST",
        "/functions/v1beta1/regions/*/functions",
    ),
    (
        "function",
        "function-list",
        "GET",
        "/functions/v1beta1/regions/*/functions",
    ),
    (
        "function",
        "function-get",
        "GET",
        "/functions/v1beta1/regions/*/functions/*",
    ),
    (
        "function",
        "function-update",
        "PATCH",
        "/functions/v1beta1/regions/*/functions/*",
    ),
    (
        "function",
        "function-delete",
        "DELETE",
        "/functions/v1beta1/regions/*/functions/*",
    ),
    (
        "function",
        "function-upload-url",
        "GET",
        "/functions/v1beta1/regions/*/functions/*/upload-url",
    ),
    (
        "function",
        "function-deploy",
        "POST",
        "/functions/v1beta1/regions/*/functions/*/deploy",
    ),
    (
        "container",
        "namespace-create",
        "POST",
        "/containers/v1beta1/regions/*/namespaces",
    ),
    (
        "container",
        "namespace-list",
        "GET",
        "/containers/v1beta1/regions/*/namespaces",
    ),
    (
        "container",
        "namespace-get",
        "GET",
        "/containers/v1beta1/regions/*/namespaces/*",
    ),
    (
        "container",
        "namespace-update",
        "PATCH",
        "/containers/v1beta1/regions/*/namespaces/*",
    ),
    (
        "container",
        "namespace-delete",
        "DELETE",
        "/containers/v1beta1/regions/*/namespaces/*",
    ),
    (
        "container",
        "container-create",
        "POST",
        "/containers/v1beta1/regions/*/containers",
    ),
    (
        "container",
        "container-list",
        "GET",
        "/containers/v1beta1/regions/*/containers",
    ),
    (
        "container",
        "container-get",
        "GET",
        "/containers/v1beta1/regions/*/containers/*",
    ),
    (
        "container",
        "container-update",
        "PATCH",
        "/containers/v1beta1/regions/*/containers/*",
    ),
    (
        "container",
        "container-delete",
        "DELETE",
        "/containers/v1beta1/regions/*/containers/*",
    ),
    (
        "container",
        "container-deploy",
        "POST",
        "/containers/v1beta1/regions/*/containers/*/deploy",
    ),
];

/// The (product, act) of a request, or `None` for a path no recorded act covers.
pub(crate) fn act_of(method: &str, path: &str) -> Option<(&'static str, &'static str)> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    ACTS.iter()
        .find(|(_, _, m, pattern)| {
            let want: Vec<&str> = pattern.trim_matches('/').split('/').collect();
            *m == method
                && want.len() == segments.len()
                && want.iter().zip(&segments).all(|(w, s)| *w == "*" || w == s)
        })
        .map(|(product, act, ..)| (*product, *act))
}

/// The engine's kind an act of a product is about, for the evidence counted.
pub(crate) fn kind_of(product: &str, act: &str) -> &'static str {
    match (product, act.split('-').next().unwrap_or_default()) {
        ("account", _) => "account",
        ("secret", _) => "secrets",
        ("registry", _) => "imageRegistry",
        ("rdb", _) => "postgres",
        ("iam", _) => "iam",
        ("function", "namespace") => "functionNamespace",
        ("function", _) => "function",
        ("container", "namespace") => "containerNamespace",
        ("container", _) => "container",
        _ => "unknown",
    }
}

/// One recorded exchange, as the tests compare it.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) source: String,
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: BTreeMap<String, String>,
    pub(crate) request: Value,
    pub(crate) status: u16,
    pub(crate) response: Value,
}

/// The recorded fixture of `product`.
pub(crate) fn fixture(product: &str) -> Value {
    let path = format!(
        "{}/tests/recorded/{product}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The recorded exchanges of `act` of `product` (none when the act was never recorded).
pub(crate) fn recorded(product: &str, act: &str) -> Vec<Recorded> {
    fixture(product)["exchanges"][act]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| Recorded {
            source: format!(
                "{product} {act} ({} #{})",
                e["cassette"].as_str().unwrap_or("?"),
                e["interaction"]
            ),
            method: e["method"].as_str().unwrap_or_default().to_owned(),
            path: e["path"].as_str().unwrap_or_default().to_owned(),
            query: serde_json::from_value(e["query"].clone()).unwrap_or_default(),
            request: e["request"].clone(),
            status: e["status"]
                .as_u64()
                .and_then(|s| u16::try_from(s).ok())
                .unwrap_or(0),
            response: e["response"].clone(),
        })
        .collect()
}

/// A path with its ids, names and region replaced by placeholders: `{region}` for the
/// segment after `regions`, `{id}` for every segment after a collection's name.
pub(crate) fn shape(path: &str) -> String {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let mut out = Vec::new();
    for (i, segment) in segments.iter().enumerate() {
        let after = i.checked_sub(1).map(|p| segments[p]);
        let placeholder = match after {
            Some("regions") => Some("{region}"),
            Some(
                "secrets" | "versions" | "namespaces" | "instances" | "users" | "applications"
                | "policies" | "projects" | "functions" | "containers",
            ) => Some("{id}"),
            _ => None,
        };
        out.push(placeholder.unwrap_or(segment).to_owned());
    }
    format!("/{}", out.join("/"))
}

/// Fields whose object is a map of the user's keys (variable names), not a schema.
const MAPS: &[&str] = &["environment_variables"];

/// The JSON type of `value`, as compared (`null` is of any type).
pub(crate) fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The fields of `value`, flattened (`volume.size`, `rules[].permission_set_names`),
/// each with its JSON type; maps of the user's keys are not descended into.
pub(crate) fn fields(value: &Value) -> BTreeMap<String, &'static str> {
    let mut out = BTreeMap::new();
    flatten("", value, &mut out);
    out
}

fn flatten(prefix: &str, value: &Value, out: &mut BTreeMap<String, &'static str>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                merge(out, &name, type_of(v));
                if !MAPS.contains(&k.as_str()) {
                    flatten(&name, v, out);
                }
            }
        }
        Value::Array(items) => {
            for item in items.iter().filter(|i| i.is_object()) {
                flatten(&format!("{prefix}[]"), item, out);
            }
        }
        _ => {}
    }
}

/// Notes `name` of type `kind`; a `null` seen is overridden by a real type.
fn merge(out: &mut BTreeMap<String, &'static str>, name: &str, kind: &'static str) {
    let slot = out.entry(name.to_owned()).or_insert(kind);
    if *slot == "null" {
        *slot = kind;
    }
}

/// The fields of every value in `values`: each field with its type, and those present
/// in all of them.
pub(crate) fn union_and_common<'a>(
    values: impl IntoIterator<Item = &'a Value>,
) -> (BTreeMap<String, &'static str>, BTreeSet<String>) {
    let mut union = BTreeMap::new();
    let mut common: Option<BTreeSet<String>> = None;
    for value in values {
        let f = fields(value);
        for (name, kind) in &f {
            merge(&mut union, name, kind);
        }
        let names: BTreeSet<String> = f.into_keys().collect();
        common = Some(match common {
            None => names,
            Some(c) => c.intersection(&names).cloned().collect(),
        });
    }
    (union, common.unwrap_or_default())
}

/// Whether two JSON types agree (`null` agrees with any).
pub(crate) fn types_agree(a: &str, b: &str) -> bool {
    a == b || a == "null" || b == "null"
}

#[test]
fn paths_are_shaped_and_acts_found() {
    assert_eq!(
        shape("/secret-manager/v1beta1/regions/fr-par/secrets/98ba/versions/1/access"),
        "/secret-manager/v1beta1/regions/{region}/secrets/{id}/versions/{id}/access"
    );
    assert_eq!(
        act_of("GET", "/rdb/v1/regions/nl-ams/instances/x/users"),
        Some(("rdb", "user-list"))
    );
    assert_eq!(act_of("PUT", "/rdb/v1/regions/nl-ams/instances/x"), None);
    let f = fields(&serde_json::json!({
        "rules": [{"permission_set_names": ["A"], "condition": null}],
        "environment_variables": {"FOO": "1"}, "volume": {"size": 1}
    }));
    assert_eq!(f.get("rules[].permission_set_names"), Some(&"array"));
    assert_eq!(f.get("volume.size"), Some(&"number"));
    assert!(!f.contains_key("environment_variables.FOO"));
}
