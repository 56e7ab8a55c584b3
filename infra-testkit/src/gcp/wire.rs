//! What every stand-in service shares: requests as parsed, answers in Google's shapes,
//! enumerations by name or by number, long-running operations done when their time
//! has come.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

/// A request as the services see it.
#[derive(Debug)]
pub(crate) struct Req<'a> {
    /// `GET`, `POST`, `PATCH`, `PUT`, `DELETE`.
    pub(crate) method: &'a str,
    /// The path, percent-decoded (`/v1/projects/p1/secrets/db`).
    pub(crate) path: &'a str,
    /// The query parameters, decoded (`$alt` included).
    pub(crate) query: &'a BTreeMap<String, String>,
    /// The body as JSON (`Null` when empty).
    pub(crate) body: &'a Value,
}

impl Req<'_> {
    /// The query parameter `name`, if given and not empty.
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.query
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The path's segments after `prefix` (which must match whole segments), or `None`.
    pub(crate) fn under<'p>(&'p self, prefix: &str) -> Option<Vec<&'p str>> {
        let rest = self.path.strip_prefix(prefix)?;
        if !(rest.is_empty() || rest.starts_with('/') || rest.starts_with(':')) {
            return None;
        }
        Some(
            rest.trim_start_matches('/')
                .split('/')
                .filter(|s| !s.is_empty())
                .collect(),
        )
    }
}

/// An answer: a status, a JSON body, and the wait it asks for.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    /// The HTTP status.
    pub(crate) status: u16,
    /// The body.
    pub(crate) body: Value,
    /// The `Retry-After` header, in whole seconds.
    pub(crate) retry_after: Option<std::time::Duration>,
}

impl Reply {
    /// 200 with `body`.
    pub(crate) fn ok(body: Value) -> Reply {
        Reply {
            status: 200,
            body,
            retry_after: None,
        }
    }

    /// The same answer, asking the caller to wait `wait` (`Retry-After`, whole seconds).
    pub(crate) fn with_retry_after(mut self, wait: std::time::Duration) -> Reply {
        self.retry_after = Some(wait);
        self
    }

    /// 200 with `{}` (an empty message).
    pub(crate) fn empty() -> Reply {
        Reply::ok(json!({}))
    }

    /// An error in Google's shape: `{"error": {"code", "message", "status"}}`.
    pub(crate) fn error(code: u16, status: &str, message: impl Into<String>) -> Reply {
        Reply {
            status: code,
            body: json!({ "error": { "code": code, "message": message.into(), "status": status } }),
            retry_after: None,
        }
    }

    /// 404 `NOT_FOUND`.
    pub(crate) fn not_found(what: impl std::fmt::Display) -> Reply {
        Reply::error(404, "NOT_FOUND", format!("{what} not found"))
    }

    /// 409 `ALREADY_EXISTS`.
    pub(crate) fn exists(what: impl std::fmt::Display) -> Reply {
        Reply::error(409, "ALREADY_EXISTS", format!("{what} already exists"))
    }

    /// 400 `INVALID_ARGUMENT`.
    pub(crate) fn invalid(message: impl Into<String>) -> Reply {
        Reply::error(400, "INVALID_ARGUMENT", message)
    }

    /// 403 `PERMISSION_DENIED`.
    pub(crate) fn denied(message: impl Into<String>) -> Reply {
        Reply::error(403, "PERMISSION_DENIED", message)
    }
}

/// A 64-bit integer as Google's JSON carries it: a string. Accepts a number too.
pub(crate) fn int64(value: Option<&Value>) -> Option<i64> {
    match value? {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

/// The labels of a resource body (`labels`, or another key), as a sorted map.
pub(crate) fn labels_at(body: &Value, key: &str) -> BTreeMap<String, String> {
    body.get(key)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// Applies an update mask: copies each named top-level field (camelCase, or the
/// snake_case the mask names) from `patch` into `target`, removing it when `patch`
/// lacks it. With no mask, every field `patch` holds is copied.
pub(crate) fn apply_mask(target: &mut Value, patch: &Value, mask: Option<&str>) {
    let (Some(target), Some(patch)) = (target.as_object_mut(), patch.as_object()) else {
        return;
    };
    match mask {
        None => {
            for (k, v) in patch {
                target.insert(k.clone(), v.clone());
            }
        }
        Some(mask) => {
            for path in mask.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let first = path.split('.').next().unwrap_or(path);
                let key = camel(first);
                match patch.get(&key) {
                    Some(v) => {
                        target.insert(key, v.clone());
                    }
                    None => {
                        target.remove(&key);
                    }
                }
            }
        }
    }
}

/// `snake_case` as `camelCase`.
pub(crate) fn camel(name: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// An enumeration: each value's name, and its number.
pub(crate) type EnumValues = &'static [(&'static str, i64)];

/// The enumerations of one service's messages, by field name: within a service, a
/// field name names one enumeration wherever it appears. Answers carry names, or
/// numbers when the request asked for `$alt=json;enum-encoding=int`; requests may
/// carry either, and are read as names.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Enums(pub(crate) &'static [(&'static str, EnumValues)]);

/// Fields whose values are free text chosen by the user, never enumerations.
const FREE_FORM: &[&str] = &[
    "labels",
    "annotations",
    "userLabels",
    "versionAliases",
    "tags",
];

impl Enums {
    /// No enumeration.
    pub(crate) const NONE: Enums = Enums(&[]);

    fn values(&self, field: &str) -> Option<EnumValues> {
        self.0.iter().find(|(f, _)| *f == field).map(|(_, v)| *v)
    }

    /// Rewrites every enumeration `body` gives as a number into its name; a number the
    /// enumeration does not hold is refused, naming the field.
    pub(crate) fn read_as_names(&self, body: &mut Value) -> Result<(), String> {
        self.walk(body, "", &mut |field, at, value| {
            if let Some(n) = value.as_i64() {
                match field.iter().find(|(_, v)| *v == n) {
                    Some((name, _)) => *value = json!(name),
                    None => return Err(format!("Invalid value at '{at}', {n}")),
                }
            }
            Ok(())
        })
    }

    /// Rewrites every enumeration of `body` given as a name into its number.
    pub(crate) fn write_as_numbers(&self, body: &mut Value) {
        let _ = self.walk(body, "", &mut |field, _, value| {
            if let Some(n) = value
                .as_str()
                .and_then(|s| field.iter().find(|(name, _)| *name == s))
                .map(|(_, n)| *n)
            {
                *value = json!(n);
            }
            Ok(())
        });
    }

    fn walk(
        &self,
        body: &mut Value,
        at: &str,
        each: &mut impl FnMut(EnumValues, &str, &mut Value) -> Result<(), String>,
    ) -> Result<(), String> {
        match body {
            Value::Object(map) => {
                for (key, value) in map.iter_mut() {
                    if FREE_FORM.contains(&key.as_str()) {
                        continue;
                    }
                    let here = if at.is_empty() {
                        key.clone()
                    } else {
                        format!("{at}.{key}")
                    };
                    match self.values(key) {
                        Some(field) if value.is_number() || value.is_string() => {
                            each(field, &here, value)?;
                        }
                        _ => self.walk(value, &here, each)?,
                    }
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    self.walk(item, &format!("{at}[{i}]"), each)?;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// Whether the request asked for enumerations as numbers.
pub(crate) fn int_enums(query: &BTreeMap<String, String>) -> bool {
    query
        .get("$alt")
        .is_some_and(|a| a.contains("enum-encoding=int"))
}

/// A long-running operation (`google.longrunning.Operation`) in flight.
#[derive(Debug, Clone)]
struct Operation {
    /// When it is done, on the stand-in's clock.
    due: Duration,
    metadata: Value,
    response: Value,
}

/// The long-running operations of the services that use `google.longrunning`
/// (Artifact Registry, Cloud Run): each is `done: false`, with its metadata, until
/// its time has come, then carries its response too.
#[derive(Debug, Default)]
pub(crate) struct Operations {
    next: u64,
    ops: BTreeMap<String, Operation>,
}

impl Operations {
    /// Starts an operation under `parent` (`projects/p/locations/l`), done at `due`,
    /// that carries `metadata` and ends with `response` (both with their `@type`);
    /// answers the operation as seen at `now`.
    pub(crate) fn start(
        &mut self,
        parent: &str,
        now: Duration,
        due: Duration,
        metadata: Value,
        response: Value,
    ) -> Value {
        self.next += 1;
        let name = format!("{parent}/operations/op-{:06}", self.next);
        let op = Operation {
            due,
            metadata,
            response,
        };
        let first = render(&name, &op, now);
        self.ops.insert(name, op);
        first
    }

    /// The operation `name` as seen at `now`.
    pub(crate) fn get(&self, name: &str, now: Duration) -> Option<Value> {
        self.ops.get(name).map(|op| render(name, op, now))
    }
}

fn render(name: &str, op: &Operation, now: Duration) -> Value {
    if now < op.due {
        return json!({ "name": name, "metadata": op.metadata, "done": false });
    }
    json!({ "name": name, "metadata": op.metadata, "done": true, "response": op.response })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operation_is_done_when_its_time_has_come() {
        let mut ops = Operations::default();
        let second = Duration::from_secs(1);
        let first = ops.start(
            "projects/p/locations/l",
            Duration::ZERO,
            2 * second,
            json!({"@type": "m"}),
            json!({"@type": "t", "name": "r"}),
        );
        assert_eq!(first["done"], false);
        assert_eq!(first["metadata"]["@type"], "m");
        let name = first["name"].as_str().unwrap().to_owned();
        assert_eq!(ops.get(&name, second).unwrap()["done"], false);
        let done = ops.get(&name, 2 * second).unwrap();
        assert_eq!(done["done"], true);
        assert_eq!(done["response"]["name"], "r");
        assert!(
            ops.get("projects/p/locations/l/operations/none", second)
                .is_none()
        );
    }

    #[test]
    fn enumerations_are_read_as_names_and_answered_as_asked() {
        const STATE: EnumValues = &[("ACTIVE", 1), ("GONE", 2)];
        let enums = Enums(&[("state", STATE)]);
        let mut body = json!({"state": 1, "items": [{"state": "GONE"}], "labels": {"state": "x"}});
        enums.read_as_names(&mut body).unwrap();
        assert_eq!(
            body,
            json!({"state": "ACTIVE", "items": [{"state": "GONE"}], "labels": {"state": "x"}})
        );
        enums.write_as_numbers(&mut body);
        assert_eq!(
            body,
            json!({"state": 1, "items": [{"state": 2}], "labels": {"state": "x"}})
        );
        let e = enums
            .read_as_names(&mut json!({"items": [{"state": 7}]}))
            .unwrap_err();
        assert!(e.contains("items[0].state"), "{e}");
    }

    #[test]
    fn a_mask_copies_and_clears_the_fields_it_names() {
        let mut target = json!({"labels": {"a": "1"}, "description": "x", "keep": 1});
        apply_mask(
            &mut target,
            &json!({"labels": {"b": "2"}}),
            Some("labels,description"),
        );
        assert_eq!(target, json!({"labels": {"b": "2"}, "keep": 1}));
        assert_eq!(camel("docker_config"), "dockerConfig");
    }
}
