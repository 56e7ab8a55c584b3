//! Secret Manager (v1beta1), from memory: secrets and their versions under
//! `/secret-manager/v1beta1/regions/{region}/secrets`.
//!
//! Served:
//!
//! | call | request |
//! |---|---|
//! | CreateSecret | `POST …/secrets` |
//! | GetSecret | `GET …/secrets/{id}` |
//! | UpdateSecret | `PATCH …/secrets/{id}` |
//! | DeleteSecret | `DELETE …/secrets/{id}` (204) |
//! | ListSecrets | `GET …/secrets?project_id&organization_id&name&path&scheduled_for_deletion&page&page_size` |
//! | CreateSecretVersion | `POST …/secrets/{id}/versions` |
//! | GetSecretVersion | `GET …/secrets/{id}/versions/{revision}` |
//! | ListSecretVersions | `GET …/secrets/{id}/versions?status&page&page_size` |
//! | AccessSecretVersion | `GET …/secrets/{id}/versions/{revision}/access` |
//!
//! A `{revision}` is a number, `latest` or `latest_enabled`.
//!
//! Rules enforced, as Scaleway documents them:
//! - the region is one of Scaleway's; a project other than the stand-in's is 403;
//!   a listing names a `project_id` or an `organization_id` (400 otherwise);
//! - a secret's name, and each part of its `path` (`/` when not given, starting with
//!   `/`), is 1 to 255 letters, digits, `.`, `_` and `-`; its `type` one of Scaleway's
//!   secret types (`opaque` when not given); tags are strings. A name is unique under
//!   its path in a project and region: a second is 409 `already_exists` (a secret
//!   scheduled for deletion no longer holds its name);
//! - an unknown secret is 404 `not_found` of resource `secret`; an unknown revision, or
//!   `latest_enabled` with no enabled version, of resource `secret_version`;
//! - a version's `data` is base64 of at most 64 KiB (400); a secret holds at most 20
//!   versions (403 `quotas_exceeded`); `disable_previous` disables the version that was
//!   the latest; a disabled version cannot be accessed (412);
//! - `DELETE` schedules the secret and its versions for deletion (`deletion_requested_at`
//!   set, versions `scheduled_for_deletion`): listings leave it out unless
//!   `scheduled_for_deletion=true`, `GET` still answers it, and it can no longer be
//!   changed, deleted again, nor accessed (412); a protected secret cannot be deleted
//!   (412).
//!
//! Payloads are kept, but answered by `…/access` alone: never by any other call, nor by
//! this module's `Debug` output (the request log redacts `data` too). What the stand-in
//! does not model: the end of the seven days (a scheduled secret stays scheduled),
//! `restore`, ephemeral policies, Key Manager keys, `browse`, `protect`/`unprotect`,
//! `data_crc32` checks, tag filters on listings, the organization-wide secrets quota.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::State;
use super::wire::{Reply, Req, unknown_region};

/// A version's largest payload.
const PAYLOAD_MAX: usize = 64 * 1024;

/// The most versions a secret holds.
const VERSIONS_MAX: usize = 20;

/// The types of secret Scaleway knows.
const TYPES: &[&str] = &[
    "opaque",
    "certificate",
    "key_value",
    "basic_credentials",
    "database_credentials",
    "ssh_key",
];

/// The product's resources: secrets by id.
#[derive(Debug, Default)]
pub(crate) struct Secrets {
    secrets: BTreeMap<String, Secret>,
}

/// One secret.
#[derive(Debug)]
struct Secret {
    id: String,
    region: String,
    project_id: String,
    name: String,
    path: String,
    kind: String,
    tags: Vec<String>,
    description: Option<String>,
    protected: bool,
    created_at: String,
    updated_at: String,
    deletion_requested_at: Option<String>,
    versions: Vec<Version>,
}

/// One version. Its payload never shows in `Debug` output.
struct Version {
    revision: u64,
    status: &'static str,
    data: String,
    description: Option<String>,
    created_at: String,
    updated_at: String,
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Version")
            .field("revision", &self.revision)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl Secret {
    fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "project_id": self.project_id,
            "name": self.name,
            "status": "ready",
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "tags": self.tags,
            "version_count": self.versions.len(),
            "description": self.description,
            "managed": false,
            "protected": self.protected,
            "type": self.kind,
            "path": self.path,
            "used_by": [],
            "ephemeral_policy": null,
            "deletion_requested_at": self.deletion_requested_at,
            "key_id": null,
            "region": self.region,
        })
    }

    fn version_json(&self, version: &Version) -> Value {
        let latest = self.versions.last().map(|v| v.revision) == Some(version.revision);
        json!({
            "revision": version.revision,
            "secret_id": self.id,
            "status": version.status,
            "created_at": version.created_at,
            "updated_at": version.updated_at,
            "description": version.description,
            "latest": latest,
            "ephemeral_properties": null,
            "deleted_at": null,
            "deletion_requested_at": self.deletion_requested_at,
            "region": self.region,
        })
    }

    /// The version `revision` names (a number, `latest`, `latest_enabled`).
    fn version(&self, revision: &str) -> Option<&Version> {
        match revision {
            "latest" => self.versions.last(),
            "latest_enabled" => self.versions.iter().rev().find(|v| v.status == "enabled"),
            n => {
                let n: u64 = n.parse().ok()?;
                self.versions.iter().find(|v| v.revision == n)
            }
        }
    }

    /// The refusal of a change to a secret scheduled for deletion, if it is.
    fn scheduled(&self) -> Option<Reply> {
        self.deletion_requested_at.as_ref().map(|_| {
            Reply::precondition(
                "secret_scheduled_for_deletion",
                format!("secret {} is scheduled for deletion", self.id),
            )
        })
    }
}

/// Serves a request of the product, or `None` when the path is not one of its.
pub(crate) fn route(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let rest = req.under("/secret-manager/v1beta1/regions")?;
    let (&region, rest) = rest.split_first()?;
    if rest.first() != Some(&"secrets") {
        return None;
    }
    if let Some(refused) = unknown_region(region) {
        return Some(refused);
    }
    let reply = match (req.method, &rest[1..]) {
        ("GET", []) => list(state, region, req),
        ("POST", []) => create(state, region, req),
        ("GET", [id]) => with_secret(state, region, id, |_, s| Reply::ok(s.to_json())),
        ("PATCH", [id]) => update(state, region, id, req),
        ("DELETE", [id]) => delete(state, region, id),
        ("POST", [id, "versions"]) => add_version(state, region, id, req),
        ("GET", [id, "versions"]) => list_versions(state, region, id, req),
        ("GET", [id, "versions", revision]) => {
            with_secret(state, region, id, |_, s| match s.version(revision) {
                Some(v) => Reply::ok(s.version_json(v)),
                None => Reply::not_found("secret_version", revision),
            })
        }
        ("GET", [id, "versions", revision, "access"]) => access(state, region, id, revision),
        _ => return None,
    };
    Some(reply)
}

/// Answers `f` of the secret `id` of `region`, or 404.
fn with_secret(
    state: &mut State,
    region: &str,
    id: &str,
    f: impl FnOnce(&mut State, &mut Secret) -> Reply,
) -> Reply {
    let Some(mut secret) = state.secrets.secrets.remove(id) else {
        return Reply::not_found("secret", id);
    };
    let reply = if secret.region == region {
        f(state, &mut secret)
    } else {
        Reply::not_found("secret", id)
    };
    state.secrets.secrets.insert(id.to_owned(), secret);
    reply
}

/// Whether `part` is a valid secret name or path part.
fn valid_part(part: &str) -> bool {
    (1..=255).contains(&part.len())
        && part != "."
        && part != ".."
        && part
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn valid_path(path: &str) -> bool {
    path == "/"
        || path
            .strip_prefix('/')
            .is_some_and(|rest| rest.split('/').all(valid_part))
}

/// The tags of a body, when they are a list of strings.
fn tags_of(value: Option<&Value>) -> Result<Option<Vec<String>>, Reply> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|t| t.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| Reply::invalid("tags", "tags must be strings")),
        Some(_) => Err(Reply::invalid("tags", "tags must be a list of strings")),
    }
}

/// An optional string field of the body, refused when it is not one.
fn opt_str(req: &Req<'_>, field: &str) -> Result<Option<String>, Reply> {
    match req.body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Reply::invalid(field, format!("{field} must be a string"))),
    }
}

/// Whether a live secret named `name` under `path` exists in the project and region,
/// other than `except`.
fn taken(state: &State, region: &str, path: &str, name: &str, except: Option<&str>) -> bool {
    state.secrets.secrets.values().any(|s| {
        s.region == region
            && s.project_id == state.project
            && s.path == path
            && s.name == name
            && s.deletion_requested_at.is_none()
            && Some(s.id.as_str()) != except
    })
}

fn create(state: &mut State, region: &str, req: &Req<'_>) -> Reply {
    let Some(project) = req.str("project_id") else {
        return Reply::invalid("project_id", "project_id is required");
    };
    if let Some(refused) = state.foreign_project(Some(project)) {
        return refused;
    }
    let name = req.str("name").unwrap_or_default();
    if !valid_part(name) {
        return Reply::invalid(
            "name",
            "a name is 1 to 255 letters, digits, `.`, `_` and `-`",
        );
    }
    let path = req.str("path").unwrap_or("/");
    if !valid_path(path) {
        return Reply::invalid(
            "path",
            "a path starts with `/`; each part is 1 to 255 letters, digits, `.`, `_` and `-`",
        );
    }
    let kind = req.str("type").unwrap_or("opaque");
    if !TYPES.contains(&kind) {
        return Reply::invalid("type", format!("unknown secret type {kind:?}"));
    }
    let (tags, description) = match (tags_of(req.body.get("tags")), opt_str(req, "description")) {
        (Ok(tags), Ok(description)) => (tags.unwrap_or_default(), description),
        (Err(refused), _) | (_, Err(refused)) => return refused,
    };
    let protected = req.body.get("protected").and_then(Value::as_bool) == Some(true);
    if taken(state, region, path, name, None) {
        return Reply::exists("secret", name);
    }
    let id = state.new_id();
    let now = state.timestamp();
    let secret = Secret {
        id: id.clone(),
        region: region.to_owned(),
        project_id: project.to_owned(),
        name: name.to_owned(),
        path: path.to_owned(),
        kind: kind.to_owned(),
        tags,
        description,
        protected,
        created_at: now.clone(),
        updated_at: now,
        deletion_requested_at: None,
        versions: Vec::new(),
    };
    let body = secret.to_json();
    state.secrets.secrets.insert(id, secret);
    Reply::ok(body)
}

fn update(state: &mut State, region: &str, id: &str, req: &Req<'_>) -> Reply {
    let fields = (
        opt_str(req, "name"),
        opt_str(req, "path"),
        opt_str(req, "description"),
        tags_of(req.body.get("tags")),
    );
    let (name, path, description, tags) = match fields {
        (Ok(n), Ok(p), Ok(d), Ok(t)) => (n, p, d, t),
        (Err(r), ..) | (_, Err(r), ..) | (_, _, Err(r), _) | (.., Err(r)) => return r,
    };
    if name.as_deref().is_some_and(|n| !valid_part(n)) {
        return Reply::invalid(
            "name",
            "a name is 1 to 255 letters, digits, `.`, `_` and `-`",
        );
    }
    if path.as_deref().is_some_and(|p| !valid_path(p)) {
        return Reply::invalid(
            "path",
            "a path starts with `/`; each part is 1 to 255 letters, digits, `.`, `_` and `-`",
        );
    }
    with_secret(state, region, id, |state, secret| {
        if let Some(refused) = secret.scheduled() {
            return refused;
        }
        let (new_name, new_path) = (
            name.unwrap_or_else(|| secret.name.clone()),
            path.unwrap_or_else(|| secret.path.clone()),
        );
        if taken(state, region, &new_path, &new_name, Some(id)) {
            return Reply::exists("secret", &new_name);
        }
        (secret.name, secret.path) = (new_name, new_path);
        if let Some(description) = description {
            secret.description = Some(description);
        }
        if let Some(tags) = tags {
            secret.tags = tags;
        }
        secret.updated_at = state.timestamp();
        Reply::ok(secret.to_json())
    })
}

fn delete(state: &mut State, region: &str, id: &str) -> Reply {
    with_secret(state, region, id, |state, secret| {
        if let Some(refused) = secret.scheduled() {
            return refused;
        }
        if secret.protected {
            return Reply::precondition(
                "secret_protected",
                format!("secret {} is protected and cannot be deleted", secret.id),
            );
        }
        secret.deletion_requested_at = Some(state.timestamp());
        for version in &mut secret.versions {
            version.status = "scheduled_for_deletion";
        }
        Reply::no_content()
    })
}

fn list(state: &mut State, region: &str, req: &Req<'_>) -> Reply {
    let project = req.param("project_id");
    let organization = req.param("organization_id");
    if project.is_none() && organization.is_none() {
        return Reply::invalid(
            "project_id",
            "one of project_id and organization_id is required",
        );
    }
    if let Some(refused) = state.foreign_project(project) {
        return refused;
    }
    if organization.is_some_and(|o| o != state.organization) {
        return Reply::denied(format!(
            "the organization {} cannot be reached with this key",
            organization.unwrap_or_default()
        ));
    }
    let scheduled = req.param("scheduled_for_deletion") == Some("true");
    let items = state
        .secrets
        .secrets
        .values()
        .filter(|s| s.region == region && s.project_id == state.project)
        .filter(|s| s.deletion_requested_at.is_some() == scheduled)
        .filter(|s| req.param("name").is_none_or(|n| n == s.name))
        .filter(|s| req.param("path").is_none_or(|p| p == s.path))
        .map(Secret::to_json)
        .collect();
    Reply::page(req, "secrets", items)
}

fn add_version(state: &mut State, region: &str, id: &str, req: &Req<'_>) -> Reply {
    let Some(data) = req.str("data") else {
        return Reply::invalid("data", "data is required (the base64 of the payload)");
    };
    match STANDARD.decode(data) {
        Ok(bytes) if bytes.len() <= PAYLOAD_MAX => {}
        Ok(_) => return Reply::invalid("data", "a version holds at most 64 KiB"),
        Err(_) => return Reply::invalid("data", "data must be base64"),
    }
    let description = match opt_str(req, "description") {
        Ok(d) => d,
        Err(refused) => return refused,
    };
    let disable_previous = req.body.get("disable_previous").and_then(Value::as_bool) == Some(true);
    with_secret(state, region, id, |state, secret| {
        if let Some(refused) = secret.scheduled() {
            return refused;
        }
        if secret.versions.len() >= VERSIONS_MAX {
            return Reply::quota("secret_versions", VERSIONS_MAX as u64);
        }
        if disable_previous
            && let Some(previous) = secret.versions.last_mut()
            && previous.status == "enabled"
        {
            previous.status = "disabled";
        }
        let now = state.timestamp();
        let version = Version {
            revision: secret.versions.last().map_or(1, |v| v.revision + 1),
            status: "enabled",
            data: data.to_owned(),
            description,
            created_at: now.clone(),
            updated_at: now.clone(),
        };
        secret.versions.push(version);
        secret.updated_at = now;
        let body = secret.versions.last().map(|v| secret.version_json(v));
        Reply::ok(body.unwrap_or_default())
    })
}

fn list_versions(state: &mut State, region: &str, id: &str, req: &Req<'_>) -> Reply {
    let status = req.param("status").map(str::to_owned);
    with_secret(state, region, id, |_, secret| {
        let items = secret
            .versions
            .iter()
            .filter(|v| status.as_deref().is_none_or(|s| s == v.status))
            .map(|v| secret.version_json(v))
            .collect();
        Reply::page(req, "versions", items)
    })
}

/// The CRC-32 (IEEE 802.3, the `crc32` of zlib) of `bytes`, which Scaleway answers with a
/// version's payload.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for byte in bytes {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn access(state: &mut State, region: &str, id: &str, revision: &str) -> Reply {
    with_secret(state, region, id, |_, secret| {
        if let Some(refused) = secret.scheduled() {
            return refused;
        }
        let Some(version) = secret.version(revision) else {
            return Reply::not_found("secret_version", revision);
        };
        if version.status != "enabled" {
            return Reply::precondition(
                "secret_version_disabled",
                format!("version {} is {}", version.revision, version.status),
            );
        }
        let crc = STANDARD
            .decode(&version.data)
            .map(|bytes| crc32(&bytes))
            .unwrap_or_default();
        Reply::ok(json!({
            "secret_id": secret.id,
            "revision": version.revision,
            "data": version.data,
            "data_crc32": crc,
            "type": secret.kind,
        }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_checksum_is_zlib_s_crc32() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn names_and_paths_follow_scaleways_rule() {
        for good in ["db", "db.password", "a_b-c", &"a".repeat(255)] {
            assert!(valid_part(good), "{good}");
        }
        for bad in ["", ".", "..", "a/b", "a b", "é", &"a".repeat(256)] {
            assert!(!valid_part(bad), "{bad}");
        }
        assert!(valid_path("/") && valid_path("/app/prod"));
        for bad in ["", "app", "/app/", "//", "/a b"] {
            assert!(!valid_path(bad), "{bad}");
        }
    }

    #[test]
    fn a_versions_payload_never_shows_in_debug() {
        let version = Version {
            revision: 1,
            status: "enabled",
            data: "aHVudGVyMg==".to_owned(),
            description: None,
            created_at: String::new(),
            updated_at: String::new(),
        };
        assert!(!format!("{version:?}").contains("aHVudGVyMg"));
    }
}
