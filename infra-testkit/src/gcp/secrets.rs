//! The Secret Manager stand-in: secrets and their versions under
//! `/v1/projects/{project}/secrets`, as `google-cloud-secretmanager-v1` calls them.
//!
//! Served:
//!
//! | call | request |
//! |---|---|
//! | CreateSecret | `POST /v1/projects/{p}/secrets?secretId={id}` |
//! | GetSecret | `GET /v1/projects/{p}/secrets/{id}` |
//! | UpdateSecret | `PATCH /v1/projects/{p}/secrets/{id}?updateMask=…` |
//! | DeleteSecret | `DELETE /v1/projects/{p}/secrets/{id}[?etag=…]` |
//! | ListSecrets | `GET /v1/projects/{p}/secrets[?pageSize&pageToken]` |
//! | AddSecretVersion | `POST /v1/projects/{p}/secrets/{id}:addVersion` |
//! | GetSecretVersion | `GET /v1/projects/{p}/secrets/{id}/versions/{n or latest}` |
//! | AccessSecretVersion | `GET /v1/projects/{p}/secrets/{id}/versions/{n or latest}:access` |
//! | ListSecretVersions | `GET /v1/projects/{p}/secrets/{id}/versions[?pageSize&pageToken]` (newest first) |
//!
//! Rules enforced, as Secret Manager does:
//! - a secret id is 1 to 255 letters, digits, `-` and `_` (400 otherwise); a taken id is
//!   409 `ALREADY_EXISTS`; a missing secret or version is 404 `NOT_FOUND`;
//! - a secret needs a replication, exactly one of `automatic` and `userManaged`, the
//!   latter with at least one replica, each naming a location, none twice (400); the
//!   replication is kept and cannot be updated;
//! - labels: at most 64; keys 1 to 63 lowercase letters, digits, `_` and `-`, starting
//!   with a letter; values up to 63 of the same (400 otherwise);
//! - annotations: keys 1 to 63 characters, letters, digits, `-`, `_` and `.`, starting
//!   and ending with a letter or a digit; keys and values together under 16 KiB (400);
//! - an update needs an `updateMask` naming only fields that can change (`labels`,
//!   `annotations`, `topics`, `rotation`, `versionAliases`, `expireTime`, `ttl`,
//!   `versionDestroyTtl`); an etag given with an update or a delete must be the
//!   secret's (400 `FAILED_PRECONDITION` otherwise), and every change gives the secret a
//!   new etag;
//! - a version's payload is base64 of at most 64 KiB; a `dataCrc32c` given must match
//!   (400). Versions are numbered from 1, increasing, and are `ENABLED`; `latest` is the
//!   newest version.
//!
//! Payloads are stored, but answered by `:access` alone: never by any other call, nor
//! by this module's `Debug` output (the request log redacts them too). What the stand-in
//! does not model: regional secrets (`/locations/`), the project number in names (the
//! real service answers `projects/{number}/secrets/{id}`; this one answers the project
//! id of the request), filters on lists (a `filter` is refused with 400), disabling and
//! destroying versions, rotation and topics (stored as sent, never acted on), IAM.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Map, Value, json};

use super::State;
use super::wire::{Enums, Reply, Req, int64};

/// The enumerations of Secret Manager's messages (`SecretVersion.State`).
pub(crate) const ENUMS: Enums = Enums(&[(
    "state",
    &[
        ("STATE_UNSPECIFIED", 0),
        ("ENABLED", 1),
        ("DISABLED", 2),
        ("DESTROYED", 3),
    ],
)]);

/// A version's largest payload.
const PAYLOAD_MAX: usize = 64 * 1024;

/// The bound on a secret's annotations, keys and values together (they must total
/// less).
const ANNOTATIONS_MAX: usize = 16 * 1024;

/// Fields an update mask may name.
const UPDATABLE: &[&str] = &[
    "labels",
    "annotations",
    "topics",
    "rotation",
    "versionAliases",
    "expireTime",
    "ttl",
    "versionDestroyTtl",
];

/// What the stand-in holds of Secret Manager.
#[derive(Debug, Default)]
pub(crate) struct Secrets {
    /// Secrets by id.
    secrets: BTreeMap<String, Secret>,
    /// The last etag handed out.
    etags: u64,
}

/// One secret: its resource as answered, and its versions, oldest first.
#[derive(Debug)]
struct Secret {
    body: Value,
    versions: Vec<Version>,
}

/// One version. Its payload never shows in `Debug` output.
struct Version {
    number: u64,
    data: String,
    crc32c: u32,
    create_time: String,
    etag: String,
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Version")
            .field("number", &self.number)
            .field("create_time", &self.create_time)
            .finish_non_exhaustive()
    }
}

impl Secrets {
    fn etag(&mut self) -> String {
        self.etags += 1;
        format!("\"{:013x}\"", 0x1_6000_0000_0000_u64 + self.etags)
    }
}

/// Serves a request of Secret Manager, or `None` when the path is not one of its own.
pub(crate) fn route(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let segments = req.under("/v1/projects")?;
    let (&project, rest) = segments.split_first()?;
    if !rest.first()?.starts_with("secrets") {
        return None;
    }
    if !state.is_project(project) {
        return Some(State::foreign_project(project));
    }
    let project = project.to_owned();
    let reply = match (req.method, rest) {
        ("GET", ["secrets"]) => list(state, req),
        ("POST", ["secrets"]) => create(state, &project, req),
        ("POST", ["secrets", call]) => match call.split_once(':') {
            Some((id, "addVersion")) => add_version(state, &project, id, req),
            _ => return None,
        },
        ("GET", ["secrets", id]) if !id.contains(':') => get(state, &project, id),
        ("PATCH", ["secrets", id]) if !id.contains(':') => patch(state, &project, id, req),
        ("DELETE", ["secrets", id]) if !id.contains(':') => delete(state, &project, id, req),
        ("GET", ["secrets", id, "versions"]) => list_versions(state, &project, id, req),
        ("GET", ["secrets", id, "versions", version]) => match version.split_once(':') {
            None => get_version(state, &project, id, version),
            Some((version, "access")) => access(state, &project, id, version),
            Some(_) => return None,
        },
        _ => return None,
    };
    Some(reply)
}

fn secret_name(project: &str, id: &str) -> String {
    format!("projects/{project}/secrets/{id}")
}

fn valid_id(id: &str) -> bool {
    (1..=255).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// What is wrong with a resource's labels, as Google Cloud checks them.
pub(crate) fn label_problem(labels: Option<&Value>) -> Option<String> {
    let labels = match labels {
        None | Some(Value::Null) => return None,
        Some(Value::Object(map)) => map,
        Some(_) => return Some("labels must be a map of strings".to_owned()),
    };
    if labels.len() > 64 {
        return Some(format!(
            "{} labels given; at most 64 are allowed",
            labels.len()
        ));
    }
    let word = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-';
    for (key, value) in labels {
        let Some(value) = value.as_str() else {
            return Some(format!("the value of label {key:?} is not a string"));
        };
        if !(1..=63).contains(&key.len())
            || !key.starts_with(|c: char| c.is_ascii_lowercase())
            || !key.chars().all(word)
        {
            return Some(format!(
                "label key {key:?} violates format constraints: 1 to 63 lowercase letters, \
                 digits, underscores and dashes, starting with a lowercase letter"
            ));
        }
        if value.len() > 63 || !value.chars().all(word) {
            return Some(format!(
                "label value {value:?} violates format constraints: up to 63 lowercase \
                 letters, digits, underscores and dashes"
            ));
        }
    }
    None
}

fn annotation_problem(annotations: Option<&Value>) -> Option<String> {
    let annotations = match annotations {
        None | Some(Value::Null) => return None,
        Some(Value::Object(map)) => map,
        Some(_) => return Some("annotations must be a map of strings".to_owned()),
    };
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let mut size = 0;
    for (key, value) in annotations {
        let Some(value) = value.as_str() else {
            return Some(format!("the value of annotation {key:?} is not a string"));
        };
        let ok = (1..=63).contains(&key.len())
            && key.starts_with(alnum)
            && key.ends_with(alnum)
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !ok {
            return Some(format!(
                "annotation key {key:?} violates format constraints: 1 to 63 characters, \
                 letters, digits, dashes, underscores and dots, beginning and ending with a \
                 letter or a digit"
            ));
        }
        size += key.len() + value.len();
    }
    (size >= ANNOTATIONS_MAX).then(|| {
        format!("the total size of annotation keys and values must be less than 16KiB ({size} bytes given)")
    })
}

/// The replication of a create, checked and normalised.
fn replication(body: &Value) -> Result<Value, String> {
    let Some(replication) = body.get("replication").and_then(Value::as_object) else {
        return Err("Secret.replication is required".to_owned());
    };
    match (replication.get("automatic"), replication.get("userManaged")) {
        (Some(automatic), None) => {
            let mut out = Map::new();
            out.insert("automatic".to_owned(), automatic.clone());
            Ok(Value::Object(out))
        }
        (None, Some(user)) => {
            let replicas = user
                .get("replicas")
                .and_then(Value::as_array)
                .filter(|r| !r.is_empty())
                .ok_or("Secret.replication.userManaged.replicas must name at least one replica")?;
            let mut seen = Vec::new();
            for replica in replicas {
                let location = replica
                    .get("location")
                    .and_then(Value::as_str)
                    .filter(|l| !l.is_empty())
                    .ok_or("every replica of Secret.replication.userManaged needs a location")?;
                if seen.contains(&location) {
                    return Err(format!("replica location {location} is given twice"));
                }
                seen.push(location);
            }
            Ok(json!({ "userManaged": user }))
        }
        _ => Err(
            "Secret.replication must be exactly one of `automatic` and `userManaged`".to_owned(),
        ),
    }
}

/// The replication status a version answers: the secret's locations.
fn replication_status(secret: &Value) -> Value {
    match secret.pointer("/replication/userManaged/replicas") {
        Some(Value::Array(replicas)) => {
            let replicas: Vec<Value> = replicas
                .iter()
                .map(|r| json!({ "location": r.get("location").cloned().unwrap_or(Value::Null) }))
                .collect();
            json!({ "userManaged": { "replicas": replicas } })
        }
        _ => json!({ "automatic": {} }),
    }
}

fn create(state: &mut State, project: &str, req: &Req<'_>) -> Reply {
    let Some(id) = req.param("secretId") else {
        return Reply::invalid("secret_id is required");
    };
    if !valid_id(id) {
        return Reply::invalid(format!(
            "Invalid secret_id {id:?}: it must be 1 to 255 characters of letters, digits, \
             underscores and hyphens"
        ));
    }
    let name = secret_name(project, id);
    if state.secrets.secrets.contains_key(id) {
        return Reply::exists(format!("Secret [{name}]"));
    }
    let replication = match replication(req.body) {
        Ok(r) => r,
        Err(why) => return Reply::invalid(why),
    };
    if let Some(why) = label_problem(req.body.get("labels")) {
        return Reply::invalid(why);
    }
    if let Some(why) = annotation_problem(req.body.get("annotations")) {
        return Reply::invalid(why);
    }
    let mut body = Map::new();
    body.insert("name".to_owned(), json!(name));
    body.insert("replication".to_owned(), replication);
    body.insert("createTime".to_owned(), json!(state.timestamp()));
    for key in [
        "labels",
        "annotations",
        "topics",
        "rotation",
        "versionAliases",
    ] {
        if let Some(v) = req.body.get(key).filter(|v| !v.is_null()) {
            body.insert(key.to_owned(), v.clone());
        }
    }
    body.insert("etag".to_owned(), json!(state.secrets.etag()));
    let body = Value::Object(body);
    state.secrets.secrets.insert(
        id.to_owned(),
        Secret {
            body: body.clone(),
            versions: Vec::new(),
        },
    );
    state.created(&format!("/v1/{name}"));
    Reply::ok(body)
}

fn missing(project: &str, id: &str) -> Reply {
    Reply::not_found(format!("Secret [{}]", secret_name(project, id)))
}

fn get(state: &mut State, project: &str, id: &str) -> Reply {
    match state.secrets.secrets.get(id) {
        Some(secret) => Reply::ok(secret.body.clone()),
        None => missing(project, id),
    }
}

fn patch(state: &mut State, project: &str, id: &str, req: &Req<'_>) -> Reply {
    let Some(mask) = req.param("updateMask") else {
        return Reply::invalid("update_mask is required");
    };
    let paths: Vec<String> = mask
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(super::wire::camel)
        .collect();
    if paths.is_empty() {
        return Reply::invalid("update_mask is required");
    }
    if let Some(bad) = paths.iter().find(|p| !UPDATABLE.contains(&p.as_str())) {
        return Reply::invalid(format!(
            "Invalid update_mask: the field {bad} cannot be updated"
        ));
    }
    let Some(current) = state.secrets.secrets.get(id).map(|s| s.body.clone()) else {
        return missing(project, id);
    };
    let etag = req.body.get("etag").and_then(Value::as_str).unwrap_or("");
    if !etag.is_empty() && Some(etag) != current.get("etag").and_then(Value::as_str) {
        return Reply::error(
            400,
            "FAILED_PRECONDITION",
            format!("The etag {etag} does not match the current etag of the secret"),
        );
    }
    let mut updated = current;
    super::wire::apply_mask(&mut updated, req.body, Some(&paths.join(",")));
    if let Some(why) = label_problem(updated.get("labels")) {
        return Reply::invalid(why);
    }
    if let Some(why) = annotation_problem(updated.get("annotations")) {
        return Reply::invalid(why);
    }
    let etag = state.secrets.etag();
    if let Some(map) = updated.as_object_mut() {
        map.insert("etag".to_owned(), json!(etag));
    }
    if let Some(secret) = state.secrets.secrets.get_mut(id) {
        secret.body = updated.clone();
    }
    Reply::ok(updated)
}

fn delete(state: &mut State, project: &str, id: &str, req: &Req<'_>) -> Reply {
    let Some(secret) = state.secrets.secrets.get(id) else {
        return missing(project, id);
    };
    if let Some(etag) = req.param("etag")
        && Some(etag) != secret.body.get("etag").and_then(Value::as_str)
    {
        return Reply::error(
            400,
            "FAILED_PRECONDITION",
            format!("The etag {etag} does not match the current etag of the secret"),
        );
    }
    state.secrets.secrets.remove(id);
    Reply::empty()
}

/// The page size asked for: 0 lets the server choose; negative is refused.
fn page_size(req: &Req<'_>, default: usize, most: usize) -> Result<usize, Reply> {
    match req.param("pageSize").map(str::parse::<i64>) {
        None | Some(Ok(0)) => Ok(default),
        Some(Ok(n)) if n > 0 => Ok(usize::try_from(n).unwrap_or(most).min(most)),
        _ => Err(Reply::invalid("page_size must be a positive number")),
    }
}

/// A page token: where the next page starts, opaque to the client.
pub(crate) fn page_token(next: &str) -> String {
    URL_SAFE_NO_PAD.encode(next)
}

/// The key a page token names, or a 400.
pub(crate) fn page_start(req: &Req<'_>) -> Result<Option<String>, Reply> {
    match req.param("pageToken") {
        None => Ok(None),
        Some(token) => URL_SAFE_NO_PAD
            .decode(token)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .map(Some)
            .ok_or_else(|| Reply::invalid(format!("Invalid page token {token:?}"))),
    }
}

fn list(state: &mut State, req: &Req<'_>) -> Reply {
    if req.param("filter").is_some() {
        return Reply::invalid("this stand-in does not serve list filters");
    }
    let size = match page_size(req, 25, 25_000) {
        Ok(n) => n,
        Err(reply) => return reply,
    };
    let start = match page_start(req) {
        Ok(s) => s.unwrap_or_default(),
        Err(reply) => return reply,
    };
    let secrets = &state.secrets.secrets;
    let mut page: Vec<Value> = Vec::new();
    let mut next = None;
    for (id, secret) in secrets.range(start..) {
        if page.len() == size {
            next = Some(page_token(id));
            break;
        }
        page.push(secret.body.clone());
    }
    let mut out = json!({ "secrets": page, "totalSize": secrets.len() });
    if let Some(next) = next {
        out["nextPageToken"] = json!(next);
    }
    Reply::ok(out)
}

fn version_body(project: &str, id: &str, secret: &Value, version: &Version) -> Value {
    json!({
        "name": format!("{}/versions/{}", secret_name(project, id), version.number),
        "createTime": version.create_time,
        "state": "ENABLED",
        "etag": version.etag,
        "replicationStatus": replication_status(secret),
        "clientSpecifiedPayloadChecksum": false,
    })
}

fn add_version(state: &mut State, project: &str, id: &str, req: &Req<'_>) -> Reply {
    if !state.secrets.secrets.contains_key(id) {
        return missing(project, id);
    }
    let Some(data) = req.body.pointer("/payload/data").and_then(Value::as_str) else {
        return Reply::invalid("SecretPayload.data is required");
    };
    let Ok(bytes) = STANDARD.decode(data) else {
        return Reply::invalid(
            "Invalid value at 'payload.data' (TYPE_BYTES): the value is not base64",
        );
    };
    if bytes.len() > PAYLOAD_MAX {
        return Reply::invalid("Secret Payload cannot be larger than 64KiB.");
    }
    let crc = crc32c(&bytes);
    let checksum = req.body.pointer("/payload/dataCrc32c");
    if let Some(given) = checksum.filter(|v| !v.is_null())
        && int64(Some(given)) != Some(i64::from(crc))
    {
        return Reply::invalid("The data_crc32c of the payload does not match its data");
    }
    let create_time = state.timestamp();
    let etag = state.secrets.etag();
    let Some(secret) = state.secrets.secrets.get_mut(id) else {
        return missing(project, id);
    };
    let number = secret.versions.last().map_or(1, |v| v.number + 1);
    let version = Version {
        number,
        data: data.to_owned(),
        crc32c: crc,
        create_time,
        etag,
    };
    let mut body = version_body(project, id, &secret.body, &version);
    body["clientSpecifiedPayloadChecksum"] = json!(checksum.is_some_and(|v| !v.is_null()));
    secret.versions.push(version);
    Reply::ok(body)
}

/// The version `version` (a number or `latest`) of the secret, or the reply saying why
/// there is none.
fn version_of<'s>(
    secret: Option<&'s Secret>,
    project: &str,
    id: &str,
    version: &str,
) -> Result<(&'s Secret, &'s Version), Reply> {
    let Some(secret) = secret else {
        return Err(missing(project, id));
    };
    let found = if version == "latest" {
        secret.versions.last()
    } else {
        let Ok(n) = version.parse::<u64>() else {
            return Err(Reply::invalid(format!(
                "Invalid secret version {version:?}: a version is a number or `latest`"
            )));
        };
        secret.versions.iter().find(|v| v.number == n)
    };
    found.map(|v| (secret, v)).ok_or_else(|| {
        Reply::not_found(format!(
            "Secret Version [{}/versions/{version}]",
            secret_name(project, id)
        ))
    })
}

fn get_version(state: &mut State, project: &str, id: &str, version: &str) -> Reply {
    match version_of(state.secrets.secrets.get(id), project, id, version) {
        Ok((secret, v)) => Reply::ok(version_body(project, id, &secret.body, v)),
        Err(reply) => reply,
    }
}

fn access(state: &mut State, project: &str, id: &str, version: &str) -> Reply {
    match version_of(state.secrets.secrets.get(id), project, id, version) {
        Ok((_, v)) => Reply::ok(json!({
            "name": format!("{}/versions/{}", secret_name(project, id), v.number),
            "payload": { "data": v.data, "dataCrc32c": v.crc32c.to_string() },
        })),
        Err(reply) => reply,
    }
}

fn list_versions(state: &mut State, project: &str, id: &str, req: &Req<'_>) -> Reply {
    if req.param("filter").is_some() {
        return Reply::invalid("this stand-in does not serve list filters");
    }
    let size = match page_size(req, 25, 25_000) {
        Ok(n) => n,
        Err(reply) => return reply,
    };
    let start = match page_start(req) {
        Ok(s) => s.and_then(|s| s.parse::<u64>().ok()),
        Err(reply) => return reply,
    };
    let Some(secret) = state.secrets.secrets.get(id) else {
        return missing(project, id);
    };
    let mut page = Vec::new();
    let mut next = None;
    for v in secret.versions.iter().rev() {
        if start.is_some_and(|s| v.number > s) {
            continue;
        }
        if page.len() == size {
            next = Some(page_token(&v.number.to_string()));
            break;
        }
        page.push(version_body(project, id, &secret.body, v));
    }
    let mut out = json!({ "versions": page, "totalSize": secret.versions.len() });
    if let Some(next) = next {
        out["nextPageToken"] = json!(next);
    }
    Reply::ok(out)
}

/// CRC32C (Castagnoli), as Secret Manager checks payloads.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0x82F6_3B78 & mask);
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_is_castagnolis() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn labels_and_annotations_are_checked_as_google_does() {
        assert!(label_problem(Some(&json!({"managed-by-infra": "shop", "a_1": ""}))).is_none());
        assert!(label_problem(Some(&json!({"Team": "web"}))).is_some());
        assert!(label_problem(Some(&json!({"team": "Web"}))).is_some());
        assert!(label_problem(Some(&json!({"1team": "web"}))).is_some());
        assert!(annotation_problem(Some(&json!({"description": "Any text, at all."}))).is_none());
        assert!(annotation_problem(Some(&json!({"-x": "y"}))).is_some());
        let big = "x".repeat(ANNOTATIONS_MAX);
        assert!(annotation_problem(Some(&json!({ "d": big }))).is_some());
    }

    #[test]
    fn replication_is_one_of_two_kinds() {
        assert!(replication(&json!({})).is_err());
        assert!(replication(&json!({"replication": {}})).is_err());
        assert!(replication(&json!({"replication": {"automatic": {}}})).is_ok());
        assert!(replication(&json!({"replication": {"userManaged": {"replicas": []}}})).is_err());
        let twice = json!({"replication": {"userManaged": {"replicas": [
            {"location": "europe-west1"}, {"location": "europe-west1"}]}}});
        assert!(replication(&twice).is_err());
        let one = json!({"replication": {"userManaged": {"replicas": [{"location": "us-east1"}]}}});
        assert_eq!(
            replication_status(&json!({ "replication": replication(&one).unwrap() })),
            json!({"userManaged": {"replicas": [{"location": "us-east1"}]}})
        );
    }

    #[test]
    fn a_version_never_shows_its_payload_in_debug_output() {
        let v = Version {
            number: 1,
            data: STANDARD.encode("s3cret-value"),
            crc32c: 0,
            create_time: "t".to_owned(),
            etag: "e".to_owned(),
        };
        let shown = format!("{v:?}");
        assert!(!shown.contains(&v.data), "{shown}");
    }
}
