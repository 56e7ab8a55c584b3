//! What every stand-in service shares: requests as parsed, answers in Google's shapes,
//! long-running operations that take several polls.

use std::collections::BTreeMap;

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

/// A long-running operation (`google.longrunning.Operation`) in flight.
#[derive(Debug, Clone)]
struct Operation {
    polls_left: u32,
    response: Value,
}

/// The long-running operations of the services that use `google.longrunning`
/// (Artifact Registry, Cloud Run): each answers `done: false` for a number of polls,
/// then its response.
#[derive(Debug, Default)]
pub(crate) struct Operations {
    next: u64,
    polls: u32,
    ops: BTreeMap<String, Operation>,
}

impl Operations {
    /// Operations done after `polls` polls.
    pub(crate) fn new(polls: u32) -> Self {
        Operations {
            next: 0,
            polls,
            ops: BTreeMap::new(),
        }
    }

    /// Sets how many polls the operations started from now take.
    pub(crate) fn set_polls(&mut self, polls: u32) {
        self.polls = polls;
    }

    /// Starts an operation under `parent` (`projects/p/locations/l`) that ends with
    /// `response` (which carries its `@type`); answers the operation as first seen.
    pub(crate) fn start(&mut self, parent: &str, response: Value) -> Value {
        self.next += 1;
        let name = format!("{parent}/operations/op-{:06}", self.next);
        let op = Operation {
            polls_left: self.polls,
            response,
        };
        let first = render(&name, &op);
        self.ops.insert(name, op);
        first
    }

    /// A poll of the operation `name`: one poll nearer its end.
    pub(crate) fn poll(&mut self, name: &str) -> Option<Value> {
        let op = self.ops.get_mut(name)?;
        op.polls_left = op.polls_left.saturating_sub(1);
        Some(render(name, op))
    }
}

fn render(name: &str, op: &Operation) -> Value {
    if op.polls_left > 0 {
        return json!({ "name": name, "done": false });
    }
    json!({ "name": name, "done": true, "response": op.response })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operation_takes_its_polls_then_answers() {
        let mut ops = Operations::new(2);
        let first = ops.start("projects/p/locations/l", json!({"@type": "t", "name": "r"}));
        assert_eq!(first["done"], false);
        let name = first["name"].as_str().unwrap().to_owned();
        assert_eq!(ops.poll(&name).unwrap()["done"], false);
        let done = ops.poll(&name).unwrap();
        assert_eq!(done["done"], true);
        assert_eq!(done["response"]["name"], "r");
        assert!(ops.poll("projects/p/locations/l/operations/none").is_none());
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
