//! The Cloud Storage stand-in: buckets of the JSON API (`/storage/v1/b…`), as Cloud
//! Storage serves them, held in memory.
//!
//! Served: `buckets.insert` (`POST /storage/v1/b?project=`), `buckets.get`
//! (`GET /storage/v1/b/{bucket}`), `buckets.patch` (`PATCH …/{bucket}`),
//! `buckets.delete` (`DELETE …/{bucket}`, answering 204 with no body) and
//! `buckets.list` (`GET /storage/v1/b?project=`, with `prefix`, `maxResults` and
//! `pageToken`). Objects are not served.
//!
//! Kept as the real API keeps them, at insert and by patch: `location` (answered
//! upper-case, `locationType` derived), `storageClass`, `labels`, `versioning` and
//! `lifecycle`. Other fields of a request body are ignored and not stored. The server
//! fills in `kind`, `id`, `selfLink`, `projectNumber`, `timeCreated`, `updated`,
//! `metageneration` (1 at insert, one more at each patch), `etag`, and what a new
//! bucket has by default: `softDeletePolicy` (seven days), `iamConfiguration`
//! (uniform bucket-level access off, public access prevention `inherited`) and, for
//! a multi-region or a dual-region, `rpo` `DEFAULT`.
//!
//! `buckets.patch` merges as the real API does: `labels` key by key, a key set to
//! `null` removed (`"labels": null` removes them all); `versioning` and `lifecycle`
//! replaced whole (`null`, `{}` or an empty rule list remove the lifecycle);
//! `storageClass` replaced. Read-only fields in a patch are ignored.
//!
//! Refused as the real API refuses (errors in its shape: `code`, `message`,
//! `errors[].reason`, no `status`):
//! - a missing `project` on insert and list: 400 `required`; a project other than the
//!   configured one: 403 `forbidden`;
//! - a bucket name that breaks Cloud Storage's rules: 400 `invalid`. The rules: 3 to 63
//!   characters (up to 222 when it holds dots, each dot-separated part at most 63);
//!   lowercase letters, digits, `-`, `_` and `.`; starting and ending with a letter or
//!   digit; not an IPv4 address in dotted-decimal form; not starting with `goog`; not
//!   holding `google` or `g00gle`;
//! - a name taken: 409 `conflict`;
//! - a location that is not a region (`europe-west1`), a multi-region (`US`, `EU`,
//!   `ASIA`) or a predefined dual-region (`NAM4`, `EUR4`, `EUR5`, `EUR7`, `EUR8`,
//!   `ASIA1`): 400 `invalid`; a patch that changes the location or the name: 400;
//! - a storage class not among `STANDARD`, `NEARLINE`, `COLDLINE`, `ARCHIVE`,
//!   `MULTI_REGIONAL`, `REGIONAL`, `DURABLE_REDUCED_AVAILABILITY`: 400;
//! - labels Google refuses (keys 1 to 63 characters of lowercase letters, digits, `_`
//!   and `-` starting with a letter; values up to 63 of the same; at most 64): 400;
//! - `versioning.enabled` that is not a boolean: 400;
//! - a lifecycle of more than 100 rules, a rule whose action type is not `Delete`,
//!   `SetStorageClass` (which needs `storageClass`) or `AbortIncompleteMultipartUpload`,
//!   a rule without a condition, an `age` that is not a non-negative 32-bit integer: 400;
//! - a missing bucket: 404 `notFound`;
//! - `ifMetagenerationMatch` / `ifMetagenerationNotMatch` (on get, patch, delete) that
//!   do not hold: 412 `conditionNotMet`; a value that is not an integer: 400;
//! - `maxResults` that is not an integer of at least 1 (more than 1000 is served as
//!   1000), or a `pageToken` this server did not give: 400.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::State;
use super::wire::{Reply, Req};

/// The project number every bucket reports (the one Resource Manager answers).
const PROJECT_NUMBER: &str = "123456789012";

/// How long a new bucket keeps deleted objects (seven days, Cloud Storage's default).
const SOFT_DELETE_SECONDS: &str = "604800";

/// The most buckets one page of `buckets.list` holds.
const PAGE: usize = 1000;

/// What the stand-in holds of Cloud Storage: each bucket as it is answered.
#[derive(Debug, Default)]
pub(crate) struct Storage {
    buckets: BTreeMap<String, Value>,
}

/// Serves a request of this service, or `None` when the path is not one of its own.
pub(crate) fn route(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let rest = req.under("/storage/v1/b")?;
    Some(match (req.method, rest.as_slice()) {
        ("POST", []) => insert(state, req),
        ("GET", []) => list(state, req),
        ("GET", [name]) => get(state, req, name),
        ("PATCH", [name]) => patch(state, req, name),
        ("DELETE", [name]) => delete(state, req, name),
        _ => return None,
    })
}

/// An error in the JSON API's shape: `code`, `message`, `errors[]` with a `reason`.
fn gcs_error(code: u16, reason: &str, message: impl Into<String>) -> Reply {
    let message = message.into();
    Reply {
        status: code,
        body: json!({
            "error": {
                "code": code,
                "message": message,
                "errors": [{ "message": message, "domain": "global", "reason": reason }],
            }
        }),
        retry_after: None,
    }
}

fn invalid(message: impl Into<String>) -> Reply {
    gcs_error(400, "invalid", message)
}

fn missing() -> Reply {
    gcs_error(404, "notFound", "The specified bucket does not exist.")
}

/// The project of an insert or a list: required, and the configured one.
fn project_of(state: &State, req: &Req<'_>, permission: &str) -> Result<(), Reply> {
    match req.param("project") {
        None => Err(gcs_error(400, "required", "Required parameter: project")),
        Some(p) if state.is_project(p) => Ok(()),
        Some(p) => Err(gcs_error(
            403,
            "forbidden",
            format!(
                "The caller does not have {permission} access to the Google Cloud project \
                 {p}, or it does not exist."
            ),
        )),
    }
}

/// Whether `name` is a bucket name Cloud Storage accepts.
fn valid_name(name: &str) -> bool {
    let max = if name.contains('.') { 222 } else { 63 };
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let parts: Vec<&str> = name.split('.').collect();
    let ipv4 = parts.len() == 4
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 3 && p.chars().all(|c| c.is_ascii_digit()));
    (3..=max).contains(&name.len())
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name
            .chars()
            .all(|c| alnum(c) || c == '-' || c == '_' || c == '.')
        && parts.iter().all(|p| p.len() <= 63)
        && !ipv4
        && !name.starts_with("goog")
        && !name.contains("google")
        && !name.contains("g00gle")
}

/// The location as stored (upper-case) and its type, or `None` when it is none.
fn location(given: &str) -> Option<(String, &'static str)> {
    let upper = given.to_ascii_uppercase();
    if ["US", "EU", "ASIA"].contains(&upper.as_str()) {
        return Some((upper, "multi-region"));
    }
    if ["NAM4", "EUR4", "EUR5", "EUR7", "EUR8", "ASIA1"].contains(&upper.as_str()) {
        return Some((upper, "dual-region"));
    }
    // A region: `<area>-<direction><digits>`, as `europe-west1` or `us-central1`.
    let lower = given.to_ascii_lowercase();
    let (area, rest) = lower.split_once('-')?;
    let digits = rest.trim_start_matches(|c: char| c.is_ascii_lowercase());
    let letters = &rest[..rest.len() - digits.len()];
    let region = !area.is_empty()
        && area.chars().all(|c| c.is_ascii_lowercase())
        && !letters.is_empty()
        && !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit());
    region.then_some((upper, "region"))
}

const STORAGE_CLASSES: &[&str] = &[
    "STANDARD",
    "NEARLINE",
    "COLDLINE",
    "ARCHIVE",
    "MULTI_REGIONAL",
    "REGIONAL",
    "DURABLE_REDUCED_AVAILABILITY",
];

fn storage_class(value: &Value) -> Result<String, Reply> {
    match value.as_str() {
        Some(c) if STORAGE_CLASSES.contains(&c) => Ok(c.to_owned()),
        _ => Err(invalid(format!("Invalid storage class: {value}"))),
    }
}

fn label_key(key: &str) -> bool {
    (1..=63).contains(&key.len())
        && key.starts_with(|c: char| c.is_ascii_lowercase())
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

fn label_value(value: &str) -> bool {
    value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// Checks a full label set.
fn check_labels(labels: &Map<String, Value>) -> Result<(), Reply> {
    if labels.len() > 64 {
        return Err(invalid(format!(
            "A bucket may carry at most 64 labels ({} given).",
            labels.len()
        )));
    }
    for (k, v) in labels {
        if !label_key(k) {
            return Err(invalid(format!("Invalid label key: '{k}'.")));
        }
        match v.as_str() {
            Some(v) if label_value(v) => {}
            _ => return Err(invalid(format!("Invalid value for label '{k}': {v}."))),
        }
    }
    Ok(())
}

fn check_versioning(value: &Value) -> Result<Value, Reply> {
    let Some(v) = value.as_object() else {
        return Err(invalid(format!("Invalid versioning: {value}")));
    };
    match v.get("enabled") {
        None | Some(Value::Bool(_)) => Ok(value.clone()),
        Some(other) => Err(invalid(format!(
            "Invalid value for versioning.enabled: {other}"
        ))),
    }
}

/// Checks a lifecycle; answers it as stored (`None`: no rules, no lifecycle).
fn check_lifecycle(value: &Value) -> Result<Option<Value>, Reply> {
    let rules = match value {
        Value::Null => return Ok(None),
        Value::Object(l) => match l.get("rule") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Array(rules)) => rules,
            Some(other) => return Err(invalid(format!("Invalid lifecycle rules: {other}"))),
        },
        other => return Err(invalid(format!("Invalid lifecycle: {other}"))),
    };
    if rules.len() > 100 {
        return Err(invalid(format!(
            "A lifecycle configuration may hold at most 100 rules ({} given).",
            rules.len()
        )));
    }
    let mut stored = Vec::with_capacity(rules.len());
    for rule in rules {
        let action = rule.get("action").and_then(Value::as_object);
        let kind = action.and_then(|a| a.get("type")).and_then(Value::as_str);
        match kind {
            Some("Delete" | "AbortIncompleteMultipartUpload") => {}
            Some("SetStorageClass") => {
                let class = action.and_then(|a| a.get("storageClass"));
                storage_class(class.unwrap_or(&Value::Null))?;
            }
            _ => {
                return Err(invalid(format!(
                    "Invalid lifecycle rule action: {}",
                    rule.get("action").unwrap_or(&Value::Null)
                )));
            }
        }
        let mut rule = rule.clone();
        let Some(condition) = rule.get_mut("condition").and_then(Value::as_object_mut) else {
            return Err(invalid("A lifecycle rule must have a condition."));
        };
        if condition.is_empty() {
            return Err(invalid(
                "A lifecycle rule must have at least one condition.",
            ));
        }
        if let Some(age) = condition.get("age") {
            let n = age
                .as_u64()
                .or_else(|| age.as_str().and_then(|s| s.parse().ok()))
                .filter(|n| i32::try_from(*n).is_ok());
            match n {
                Some(n) => {
                    condition.insert("age".to_owned(), json!(n));
                }
                None => {
                    return Err(invalid(format!(
                        "Invalid value for lifecycle condition age: {age}"
                    )));
                }
            }
        }
        stored.push(rule);
    }
    Ok((!stored.is_empty()).then(|| json!({ "rule": stored })))
}

/// The etag of a bucket at `metageneration`, as Cloud Storage forms it (the base64 of
/// a one-field message holding the metageneration).
fn etag(metageneration: u64) -> String {
    let mut bytes = vec![0x08];
    let mut n = metageneration;
    loop {
        let low = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            bytes.push(low);
            break;
        }
        bytes.push(low | 0x80);
    }
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn metageneration_of(bucket: &Value) -> u64 {
    bucket
        .get("metageneration")
        .and_then(Value::as_str)
        .and_then(|m| m.parse().ok())
        .unwrap_or(1)
}

/// The metageneration preconditions of a request, checked against `bucket`.
fn preconditions(req: &Req<'_>, bucket: &Value) -> Result<(), Reply> {
    let have = metageneration_of(bucket);
    for (param, must_equal) in [
        ("ifMetagenerationMatch", true),
        ("ifMetagenerationNotMatch", false),
    ] {
        let Some(given) = req.param(param) else {
            continue;
        };
        let Ok(given) = given.parse::<u64>() else {
            return Err(invalid(format!("Invalid value for {param}: '{given}'")));
        };
        if (given == have) != must_equal {
            return Err(gcs_error(
                412,
                "conditionNotMet",
                "At least one of the pre-conditions you specified did not hold.",
            ));
        }
    }
    Ok(())
}

fn insert(state: &mut State, req: &Req<'_>) -> Reply {
    if let Err(reply) = project_of(state, req, "storage.buckets.create") {
        return reply;
    }
    let body = req.body;
    let Some(name) = body.get("name").and_then(Value::as_str) else {
        return gcs_error(400, "required", "Required field: name.");
    };
    if !valid_name(name) {
        return invalid(format!("Invalid bucket name: '{name}'"));
    }
    if state.storage.buckets.contains_key(name) {
        return gcs_error(
            409,
            "conflict",
            "Your previous request to create the named bucket succeeded and you already own it.",
        );
    }
    let given = body.get("location").and_then(Value::as_str).unwrap_or("US");
    let Some((location, location_type)) = location(given) else {
        return invalid(format!("Invalid location: '{given}'"));
    };
    let class = match body.get("storageClass") {
        None | Some(Value::Null) => "STANDARD".to_owned(),
        Some(c) => match storage_class(c) {
            Ok(c) => c,
            Err(reply) => return reply,
        },
    };
    let now = state.timestamp();
    let mut bucket = json!({
        "kind": "storage#bucket",
        "id": name,
        "selfLink": format!("https://www.googleapis.com/storage/v1/b/{name}"),
        "projectNumber": PROJECT_NUMBER,
        "name": name,
        "timeCreated": now,
        "updated": now,
        "metageneration": "1",
        "location": location,
        "locationType": location_type,
        "storageClass": class,
        "etag": etag(1),
        "softDeletePolicy": {
            "retentionDurationSeconds": SOFT_DELETE_SECONDS,
            "effectiveTime": now,
        },
        "iamConfiguration": {
            "bucketPolicyOnly": { "enabled": false },
            "uniformBucketLevelAccess": { "enabled": false },
            "publicAccessPrevention": "inherited",
        },
    });
    if location_type != "region" {
        bucket["rpo"] = json!("DEFAULT");
    }
    if let Some(labels) = body.get("labels").filter(|l| !l.is_null()) {
        let Some(map) = labels.as_object() else {
            return invalid(format!("Invalid labels: {labels}"));
        };
        if let Err(reply) = check_labels(map) {
            return reply;
        }
        if !map.is_empty() {
            bucket["labels"] = labels.clone();
        }
    }
    if let Some(versioning) = body.get("versioning").filter(|v| !v.is_null()) {
        match check_versioning(versioning) {
            Ok(v) => bucket["versioning"] = v,
            Err(reply) => return reply,
        }
    }
    if let Some(lifecycle) = body.get("lifecycle") {
        match check_lifecycle(lifecycle) {
            Ok(Some(l)) => bucket["lifecycle"] = l,
            Ok(None) => {}
            Err(reply) => return reply,
        }
    }
    state
        .storage
        .buckets
        .insert(name.to_owned(), bucket.clone());
    state.created(&format!("/storage/v1/b/{name}"));
    Reply::ok(bucket)
}

fn get(state: &mut State, req: &Req<'_>, name: &str) -> Reply {
    let Some(bucket) = state.storage.buckets.get(name) else {
        return missing();
    };
    match preconditions(req, bucket) {
        Ok(()) => Reply::ok(bucket.clone()),
        Err(reply) => reply,
    }
}

fn patch(state: &mut State, req: &Req<'_>, name: &str) -> Reply {
    let Some(current) = state.storage.buckets.get(name) else {
        return missing();
    };
    if let Err(reply) = preconditions(req, current) {
        return reply;
    }
    let Some(body) = req.body.as_object() else {
        return invalid("Invalid bucket metadata: a JSON object is expected.");
    };
    let mut bucket = current.clone();
    if let Some(given) = body.get("name").and_then(Value::as_str)
        && given != name
    {
        return invalid(format!(
            "The name of bucket {name} cannot be changed (to '{given}')."
        ));
    }
    if let Some(given) = body.get("location").and_then(Value::as_str) {
        let stored = bucket.get("location").and_then(Value::as_str).unwrap_or("");
        if !given.eq_ignore_ascii_case(stored) {
            return invalid(format!(
                "The location of bucket {name} cannot be changed (it is {stored})."
            ));
        }
    }
    if let Some(class) = body.get("storageClass").filter(|c| !c.is_null()) {
        match storage_class(class) {
            Ok(c) => bucket["storageClass"] = json!(c),
            Err(reply) => return reply,
        }
    }
    if let Some(changes) = body.get("labels") {
        let mut labels = match changes {
            Value::Null => Map::new(),
            Value::Object(changes) => {
                let mut labels = bucket
                    .get("labels")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                for (k, v) in changes {
                    if v.is_null() {
                        labels.remove(k);
                    } else {
                        labels.insert(k.clone(), v.clone());
                    }
                }
                labels
            }
            other => return invalid(format!("Invalid labels: {other}")),
        };
        if let Err(reply) = check_labels(&labels) {
            return reply;
        }
        let object = bucket.as_object_mut().expect("a bucket is an object");
        if labels.is_empty() {
            object.remove("labels");
        } else {
            labels.sort_keys();
            object.insert("labels".to_owned(), Value::Object(labels));
        }
    }
    if let Some(versioning) = body.get("versioning") {
        let object = bucket.as_object_mut().expect("a bucket is an object");
        if versioning.is_null() {
            object.remove("versioning");
        } else {
            match check_versioning(versioning) {
                Ok(v) => {
                    object.insert("versioning".to_owned(), v);
                }
                Err(reply) => return reply,
            }
        }
    }
    if let Some(lifecycle) = body.get("lifecycle") {
        let object = bucket.as_object_mut().expect("a bucket is an object");
        match check_lifecycle(lifecycle) {
            Ok(Some(l)) => {
                object.insert("lifecycle".to_owned(), l);
            }
            Ok(None) => {
                object.remove("lifecycle");
            }
            Err(reply) => return reply,
        }
    }
    let metageneration = metageneration_of(&bucket) + 1;
    bucket["metageneration"] = json!(metageneration.to_string());
    bucket["etag"] = json!(etag(metageneration));
    bucket["updated"] = json!(state.timestamp());
    state
        .storage
        .buckets
        .insert(name.to_owned(), bucket.clone());
    Reply::ok(bucket)
}

fn delete(state: &mut State, req: &Req<'_>, name: &str) -> Reply {
    let Some(current) = state.storage.buckets.get(name) else {
        return missing();
    };
    if let Err(reply) = preconditions(req, current) {
        return reply;
    }
    state.storage.buckets.remove(name);
    Reply {
        status: 204,
        body: Value::Null,
        retry_after: None,
    }
}

fn list(state: &mut State, req: &Req<'_>) -> Reply {
    if let Err(reply) = project_of(state, req, "storage.buckets.list") {
        return reply;
    }
    let size = match req.param("maxResults") {
        None => PAGE,
        Some(n) => match n.parse::<usize>() {
            Ok(n) if n >= 1 => n.min(PAGE),
            _ => return invalid(format!("Invalid value for maxResults: '{n}'")),
        },
    };
    let after = match req.param("pageToken") {
        None => None,
        Some(token) => match base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|t| t.strip_prefix("after:").map(str::to_owned))
        {
            Some(after) => Some(after),
            None => return invalid(format!("Invalid value for pageToken: '{token}'")),
        },
    };
    let prefix = req.param("prefix").unwrap_or("");
    let mut matching = state
        .storage
        .buckets
        .iter()
        .filter(|(name, _)| name.starts_with(prefix))
        .filter(|(name, _)| after.as_ref().is_none_or(|a| name.as_str() > a.as_str()));
    let items: Vec<Value> = matching
        .by_ref()
        .take(size)
        .map(|(_, b)| b.clone())
        .collect();
    let more = matching.next().is_some();
    let mut page = json!({ "kind": "storage#buckets" });
    if more {
        let last = items
            .last()
            .and_then(|b| b.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        page["nextPageToken"] =
            json!(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("after:{last}")));
    }
    if !items.is_empty() {
        page["items"] = Value::Array(items);
    }
    Reply::ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Call {
        method: String,
        path: String,
        query: BTreeMap<String, String>,
        body: Value,
    }

    fn call(method: &str, path: &str, query: &[(&str, &str)], body: Value) -> Call {
        Call {
            method: method.to_owned(),
            path: path.to_owned(),
            query: query
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            body,
        }
    }

    fn serve(state: &mut State, c: &Call) -> Reply {
        let req = Req {
            method: &c.method,
            path: &c.path,
            query: &c.query,
            body: &c.body,
        };
        route(state, &req).expect("a storage path")
    }

    fn create(state: &mut State, body: Value) -> Reply {
        serve(
            state,
            &call("POST", "/storage/v1/b", &[("project", "p1")], body),
        )
    }

    fn reason(reply: &Reply) -> &str {
        reply.body["error"]["errors"][0]["reason"]
            .as_str()
            .unwrap_or("")
    }

    #[test]
    fn an_insert_keeps_what_it_is_given_and_fills_in_the_servers_fields() {
        let mut state = State::for_tests("p1");
        let reply = create(
            &mut state,
            json!({
                "name": "assets", "location": "europe-west1",
                "labels": {"managed-by-infra": "shop"},
                "versioning": {"enabled": true},
                "lifecycle": {"rule": [{"action": {"type": "Delete"}, "condition": {"age": "30"}}]}
            }),
        );
        assert_eq!(reply.status, 200, "{}", reply.body);
        let b = &reply.body;
        assert_eq!(b["location"], "EUROPE-WEST1");
        assert_eq!(b["locationType"], "region");
        assert_eq!(b["labels"], json!({"managed-by-infra": "shop"}));
        assert_eq!(b["versioning"], json!({"enabled": true}));
        assert_eq!(b["lifecycle"]["rule"][0]["condition"]["age"], json!(30));
        assert_eq!(b["metageneration"], "1");
        assert_eq!(b["etag"], "CAE=");
        assert_eq!(b["storageClass"], "STANDARD");
        assert_eq!(b["id"], "assets");
        assert!(
            b["selfLink"]
                .as_str()
                .unwrap()
                .ends_with("/storage/v1/b/assets")
        );
        assert!(b["timeCreated"].is_string() && b["updated"].is_string());
        assert_eq!(b["softDeletePolicy"]["retentionDurationSeconds"], "604800");
        assert_eq!(b["softDeletePolicy"]["effectiveTime"], b["timeCreated"]);
        assert_eq!(b["iamConfiguration"]["publicAccessPrevention"], "inherited");
        assert_eq!(
            b["iamConfiguration"]["uniformBucketLevelAccess"]["enabled"],
            false
        );
        assert!(b.get("rpo").is_none(), "a region has no rpo");
        let again = serve(
            &mut state,
            &call("GET", "/storage/v1/b/assets", &[], Value::Null),
        );
        assert_eq!(again.body, reply.body);
        let taken = create(&mut state, json!({"name": "assets"}));
        assert_eq!((taken.status, reason(&taken)), (409, "conflict"));
        assert!(taken.body["error"].get("status").is_none());
        let us = create(&mut state, json!({"name": "other-assets"}));
        assert_eq!(
            (
                us.body["location"].as_str(),
                us.body["locationType"].as_str()
            ),
            (Some("US"), Some("multi-region"))
        );
        assert_eq!(us.body["rpo"], "DEFAULT");
    }

    #[test]
    fn an_insert_is_refused_as_the_real_api_refuses() {
        let mut state = State::for_tests("p1");
        for name in [
            "ab",
            "Assets",
            "-assets",
            "goog-assets",
            "my-google",
            "192.168.1.2",
            "a..b!",
        ] {
            let reply = create(&mut state, json!({ "name": name }));
            assert_eq!((reply.status, reason(&reply)), (400, "invalid"), "{name}");
        }
        assert_eq!(
            create(&mut state, json!({"name": "ok_name.with.dots"})).status,
            200
        );
        for body in [
            json!({"name": "b1", "location": "mars"}),
            json!({"name": "b1", "labels": {"Bad": "x"}}),
            json!({"name": "b1", "labels": {"k": "Bad"}}),
            json!({"name": "b1", "versioning": {"enabled": "yes"}}),
            json!({"name": "b1", "storageClass": "HOT"}),
            json!({"name": "b1", "lifecycle": {"rule": [{"action": {"type": "Delete"}, "condition": {}}]}}),
            json!({"name": "b1", "lifecycle": {"rule": [{"action": {"type": "Delete"}, "condition": {"age": -1}}]}}),
            json!({"name": "b1", "lifecycle": {"rule": [{"action": {"type": "Shred"}, "condition": {"age": 1}}]}}),
            json!({"name": "b1", "lifecycle": {"rule": [{"action": {"type": "SetStorageClass"}, "condition": {"age": 1}}]}}),
        ] {
            let reply = create(&mut state, body.clone());
            assert_eq!(reply.status, 400, "{body}");
        }
        let unnamed = create(&mut state, json!({}));
        assert_eq!((unnamed.status, reason(&unnamed)), (400, "required"));
        let foreign = serve(
            &mut state,
            &call(
                "POST",
                "/storage/v1/b",
                &[("project", "p2")],
                json!({"name": "b2"}),
            ),
        );
        assert_eq!((foreign.status, reason(&foreign)), (403, "forbidden"));
        let none = serve(
            &mut state,
            &call("POST", "/storage/v1/b", &[], json!({"name": "b2"})),
        );
        assert_eq!(none.status, 400);
        let gone = serve(
            &mut state,
            &call("GET", "/storage/v1/b/b2", &[], Value::Null),
        );
        assert_eq!((gone.status, reason(&gone)), (404, "notFound"));
    }

    #[test]
    fn a_patch_merges_labels_and_replaces_the_rest_under_its_preconditions() {
        let mut state = State::for_tests("p1");
        create(
            &mut state,
            json!({
                "name": "assets", "location": "us-central1",
                "labels": {"managed-by-infra": "shop", "team": "web", "old": "x"},
                "versioning": {"enabled": true},
                "lifecycle": {"rule": [{"action": {"type": "Delete"}, "condition": {"age": 30}}]}
            }),
        );
        let path = "/storage/v1/b/assets";
        let stale = serve(
            &mut state,
            &call(
                "PATCH",
                path,
                &[("ifMetagenerationMatch", "7")],
                json!({"labels": {"team": "ops"}}),
            ),
        );
        assert_eq!((stale.status, reason(&stale)), (412, "conditionNotMet"));
        let reply = serve(
            &mut state,
            &call(
                "PATCH",
                path,
                &[("ifMetagenerationMatch", "1")],
                json!({"labels": {"team": "ops", "old": null}, "lifecycle": {"rule": []}}),
            ),
        );
        assert_eq!(reply.status, 200, "{}", reply.body);
        let b = &reply.body;
        assert_eq!(
            b["labels"],
            json!({"managed-by-infra": "shop", "team": "ops"})
        );
        assert_eq!(b["versioning"], json!({"enabled": true}), "untouched");
        assert!(
            b.get("lifecycle").is_none(),
            "an empty rule list removes it"
        );
        assert_eq!(
            (b["metageneration"].as_str(), b["etag"].as_str()),
            (Some("2"), Some("CAI="))
        );
        let moved = serve(
            &mut state,
            &call("PATCH", path, &[], json!({"location": "EU"})),
        );
        assert_eq!(moved.status, 400);
        let same = serve(
            &mut state,
            &call(
                "PATCH",
                path,
                &[],
                json!({"location": "us-central1", "labels": null}),
            ),
        );
        assert_eq!(same.status, 200);
        assert!(same.body.get("labels").is_none());
        let bad = serve(
            &mut state,
            &call("PATCH", path, &[], json!({"labels": {"k": "Bad"}})),
        );
        assert_eq!(bad.status, 400);
        let missing = serve(
            &mut state,
            &call("PATCH", "/storage/v1/b/nothing", &[], json!({})),
        );
        assert_eq!(missing.status, 404);
    }

    #[test]
    fn delete_answers_no_content_then_not_found() {
        let mut state = State::for_tests("p1");
        create(&mut state, json!({"name": "assets"}));
        let path = "/storage/v1/b/assets";
        let held = serve(
            &mut state,
            &call(
                "DELETE",
                path,
                &[("ifMetagenerationMatch", "2")],
                Value::Null,
            ),
        );
        assert_eq!(held.status, 412);
        let gone = serve(&mut state, &call("DELETE", path, &[], Value::Null));
        assert_eq!((gone.status, &gone.body), (204, &Value::Null));
        let again = serve(&mut state, &call("DELETE", path, &[], Value::Null));
        assert_eq!((again.status, reason(&again)), (404, "notFound"));
    }

    #[test]
    fn a_list_answers_every_bucket_in_pages() {
        let mut state = State::for_tests("p1");
        let empty = serve(
            &mut state,
            &call("GET", "/storage/v1/b", &[("project", "p1")], Value::Null),
        );
        assert_eq!(empty.body, json!({"kind": "storage#buckets"}));
        for name in ["b-3", "b-1", "b-2", "c-1"] {
            create(&mut state, json!({ "name": name }));
        }
        let mut seen = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut query = vec![("project", "p1"), ("maxResults", "2"), ("prefix", "b-")];
            if let Some(t) = &token {
                query.push(("pageToken", t.as_str()));
            }
            let page = serve(
                &mut state,
                &call("GET", "/storage/v1/b", &query, Value::Null),
            );
            assert_eq!(page.status, 200, "{}", page.body);
            for item in page.body["items"].as_array().unwrap() {
                seen.push(item["name"].as_str().unwrap().to_owned());
            }
            match page.body.get("nextPageToken").and_then(Value::as_str) {
                Some(t) => token = Some(t.to_owned()),
                None => break,
            }
        }
        assert_eq!(seen, ["b-1", "b-2", "b-3"]);
        for query in [
            vec![("project", "p1"), ("maxResults", "0")],
            vec![("project", "p1"), ("pageToken", "nonsense")],
        ] {
            let reply = serve(
                &mut state,
                &call("GET", "/storage/v1/b", &query, Value::Null),
            );
            assert_eq!(reply.status, 400, "{query:?}");
        }
        let foreign = serve(
            &mut state,
            &call("GET", "/storage/v1/b", &[("project", "p2")], Value::Null),
        );
        assert_eq!(foreign.status, 403);
    }

    #[test]
    fn other_paths_are_not_this_services() {
        let mut state = State::for_tests("p1");
        let objects = call("GET", "/storage/v1/b/assets/o", &[], Value::Null);
        let req = Req {
            method: &objects.method,
            path: &objects.path,
            query: &objects.query,
            body: &objects.body,
        };
        assert!(route(&mut state, &req).is_none());
        assert_eq!(etag(300), "CKwC");
    }
}
