//! The Artifact Registry stand-in: repositories under
//! `/v1/projects/{project}/locations/{location}/repositories`, and the long-running
//! operations of their creates and deletes, as `google-cloud-artifactregistry-v1` calls
//! them.
//!
//! Served:
//!
//! | call | request |
//! |---|---|
//! | CreateRepository | `POST /v1/projects/{p}/locations/{l}/repositories?repositoryId={id}` → an operation |
//! | GetRepository | `GET /v1/projects/{p}/locations/{l}/repositories/{id}` |
//! | UpdateRepository | `PATCH /v1/projects/{p}/locations/{l}/repositories/{id}[?updateMask=…]` |
//! | DeleteRepository | `DELETE /v1/projects/{p}/locations/{l}/repositories/{id}` → an operation |
//! | ListRepositories | `GET /v1/projects/{p}/locations/{l}/repositories[?pageSize&pageToken]` |
//! | GetOperation | `GET /v1/projects/{p}/locations/{l}/operations/{op}` |
//!
//! A create or a delete answers an operation that carries an `OperationMetadata` and
//! is `done: false` until the stand-in's settling time has passed on its clock, then
//! carries the repository (`@type`
//! `type.googleapis.com/google.devtools.artifactregistry.v1.Repository`) or
//! `google.protobuf.Empty`. The repository itself is made, or removed, when the call is
//! answered.
//!
//! Rules enforced, as Artifact Registry does:
//! - a repository id is 1 to 63 lowercase letters, digits and `-`, starting with a
//!   letter and ending with a letter or a digit (400 otherwise); a taken id is 409
//!   `ALREADY_EXISTS`, answered at once (not through the operation); a missing
//!   repository or operation is 404 `NOT_FOUND`;
//! - a repository needs a `format` (400 without); `dockerConfig` is for `DOCKER`
//!   repositories only (400);
//! - labels as Google Cloud checks them (see the Secret Manager stand-in; 400);
//! - an update may change `labels`, `description`, `dockerConfig`,
//!   `vulnerabilityScanningConfig`, `cleanupPolicies` and `cleanupPolicyDryRun`; a mask
//!   naming another field is 400 `INVALID_ARGUMENT` ("… cannot be updated"). Without a
//!   mask, every updatable field the body holds is written. Nested mask paths
//!   (`dockerConfig.immutableTags`) write just that field.
//!
//! Server-assigned fields are filled in: `createTime`, `updateTime` (renewed by each
//! update), `mode` (`STANDARD_REPOSITORY`), `registryUri`
//! (`{l}-docker.pkg.dev/{p}/{id}` for Docker), `sizeBytes`, and the output half of
//! `vulnerabilityScanningConfig`: `enablementState` `SCANNING_ACTIVE` for a Docker
//! repository whose scanning is inherited (the stand-in's project has the scanning API
//! on), `SCANNING_DISABLED` when disabled, `SCANNING_UNSUPPORTED` for other formats.
//! Enums are answered as names, or as numbers when the request asks for
//! `$alt=json;enum-encoding=int` (as the official Rust clients do); requests may
//! carry either.
//!
//! Not modelled: images, remote and virtual repositories, cleanup policies acted on,
//! KMS keys, IAM, filters and ordering on lists (refused with 400).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::State;
use super::secrets::{label_problem, page_start, page_token};
use super::wire::{EnumValues, Enums, Reply, Req, camel};

/// Fields an update may change.
const UPDATABLE: &[&str] = &[
    "labels",
    "description",
    "dockerConfig",
    "vulnerabilityScanningConfig",
    "cleanupPolicies",
    "cleanupPolicyDryRun",
];

const REPOSITORY_TYPE: &str = "type.googleapis.com/google.devtools.artifactregistry.v1.Repository";
const EMPTY_TYPE: &str = "type.googleapis.com/google.protobuf.Empty";

const METADATA_TYPE: &str =
    "type.googleapis.com/google.devtools.artifactregistry.v1.OperationMetadata";

/// `Repository.Format`.
const FORMATS: EnumValues = &[
    ("FORMAT_UNSPECIFIED", 0),
    ("DOCKER", 1),
    ("MAVEN", 2),
    ("NPM", 3),
    ("APT", 5),
    ("YUM", 6),
    ("PYTHON", 8),
    ("KFP", 9),
    ("GO", 10),
    ("GENERIC", 11),
    ("RUBY", 12),
];

/// `VulnerabilityScanningConfig.EnablementConfig`.
const ENABLEMENT: EnumValues = &[
    ("ENABLEMENT_CONFIG_UNSPECIFIED", 0),
    ("INHERITED", 1),
    ("DISABLED", 2),
];

/// The enumerations of Artifact Registry's messages, as `google-cloud-artifactregistry-v1`
/// numbers them.
pub(crate) const ENUMS: Enums = Enums(&[
    ("format", FORMATS),
    (
        "mode",
        &[
            ("MODE_UNSPECIFIED", 0),
            ("STANDARD_REPOSITORY", 1),
            ("VIRTUAL_REPOSITORY", 2),
            ("REMOTE_REPOSITORY", 3),
        ],
    ),
    ("enablementConfig", ENABLEMENT),
    (
        "enablementState",
        &[
            ("ENABLEMENT_STATE_UNSPECIFIED", 0),
            ("SCANNING_UNSUPPORTED", 1),
            ("SCANNING_DISABLED", 2),
            ("SCANNING_ACTIVE", 3),
        ],
    ),
    (
        "versionPolicy",
        &[
            ("VERSION_POLICY_UNSPECIFIED", 0),
            ("RELEASE", 1),
            ("SNAPSHOT", 2),
        ],
    ),
    (
        "action",
        &[("ACTION_UNSPECIFIED", 0), ("DELETE", 1), ("KEEP", 2)],
    ),
    (
        "tagState",
        &[
            ("TAG_STATE_UNSPECIFIED", 0),
            ("TAGGED", 1),
            ("UNTAGGED", 2),
            ("ANY", 3),
        ],
    ),
]);

/// What the stand-in holds of Artifact Registry.
#[derive(Debug, Default)]
pub(crate) struct Artifacts {
    /// Repositories by resource name.
    repositories: BTreeMap<String, Value>,
}

/// Serves a request of Artifact Registry, or `None` when the path is not one of its own.
pub(crate) fn route(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let segments = req.under("/v1/projects")?;
    let [project, "locations", location, rest @ ..] = segments.as_slice() else {
        return None;
    };
    if !state.is_project(project) {
        return Some(State::foreign_project(project));
    }
    let parent = format!("projects/{project}/locations/{location}");
    let reply = match (req.method, rest) {
        ("GET", ["operations", op]) => {
            let name = format!("{parent}/operations/{op}");
            match state.ops.get(&name, state.now()) {
                Some(op) => Reply::ok(op),
                None => Reply::not_found(format!("Operation {name}")),
            }
        }
        ("GET", ["repositories"]) => list(state, &parent, req),
        ("POST", ["repositories"]) => create(state, project, location, &parent, req),
        ("GET", ["repositories", id]) => get(state, &format!("{parent}/repositories/{id}")),
        ("PATCH", ["repositories", id]) => {
            patch(state, &format!("{parent}/repositories/{id}"), req)
        }
        ("DELETE", ["repositories", id]) => {
            delete(state, &parent, &format!("{parent}/repositories/{id}"))
        }
        _ => return None,
    };
    Some(reply)
}

fn valid_id(id: &str) -> bool {
    (1..=63).contains(&id.len())
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && id.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// An enumeration's value, as read (a name: numbers were read as names on intake);
/// `None` when not given or unspecified.
fn enum_name(value: Option<&Value>, names: EnumValues) -> Result<Option<&'static str>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => match names.iter().find(|(name, _)| name == s) {
            Some((_, 0)) => Ok(None),
            Some((name, _)) => Ok(Some(*name)),
            None => Err(format!("unknown enum value {s:?}")),
        },
        Some(other) => Err(format!("an enum must be a name or a number, not {other}")),
    }
}

/// Fills in the output-only parts of a repository and checks what depends on its
/// format; answers why it cannot be, when it cannot.
fn normalise(repo: &mut Value) -> Result<(), String> {
    let docker = repo.get("format").and_then(Value::as_str) == Some("DOCKER");
    if !docker && repo.get("dockerConfig").is_some_and(|v| !v.is_null()) {
        return Err("dockerConfig is only for DOCKER repositories".to_owned());
    }
    if let Some(docker) = repo.get("dockerConfig") {
        match docker.get("immutableTags") {
            None | Some(Value::Bool(_)) | Some(Value::Null) => {}
            Some(other) => {
                return Err(format!(
                    "dockerConfig.immutableTags must be a bool, not {other}"
                ));
            }
        }
    }
    let config = enum_name(
        repo.pointer("/vulnerabilityScanningConfig/enablementConfig"),
        ENABLEMENT,
    )
    .map_err(|e| format!("vulnerabilityScanningConfig.enablementConfig: {e}"))?;
    let (state, reason) = match (docker, config) {
        (false, _) => (
            "SCANNING_UNSUPPORTED",
            "Vulnerability scanning is supported for Docker repositories only",
        ),
        (true, Some("DISABLED")) => (
            "SCANNING_DISABLED",
            "Vulnerability scanning is disabled in the repository's config",
        ),
        (true, _) => (
            "SCANNING_ACTIVE",
            "Vulnerability scanning is active: the repository inherits it from the project",
        ),
    };
    let mut scanning = Map::new();
    if let Some(config) = config {
        scanning.insert("enablementConfig".to_owned(), json!(config));
    }
    scanning.insert("enablementState".to_owned(), json!(state));
    scanning.insert("enablementStateReason".to_owned(), json!(reason));
    repo["vulnerabilityScanningConfig"] = Value::Object(scanning);
    if let Some(why) = label_problem(repo.get("labels")) {
        return Err(why);
    }
    Ok(())
}

fn create(state: &mut State, project: &str, location: &str, parent: &str, req: &Req<'_>) -> Reply {
    let Some(id) = req.param("repositoryId") else {
        return Reply::invalid("repository_id is required");
    };
    if !valid_id(id) {
        return Reply::invalid(format!(
            "Invalid repository ID {id:?}: it must be 1 to 63 characters of lowercase letters, \
             digits and hyphens, start with a letter and end with a letter or a number"
        ));
    }
    let name = format!("{parent}/repositories/{id}");
    if state.artifacts.repositories.contains_key(&name) {
        return Reply::exists(format!("the repository {name}"));
    }
    let format = match enum_name(req.body.get("format"), FORMATS) {
        Ok(None) => return Reply::invalid("Repository.format is required"),
        Ok(Some(f)) => f,
        Err(why) => return Reply::invalid(format!("Repository.format: {why}")),
    };
    let created = state.timestamp();
    let mut repo = Map::new();
    repo.insert("name".to_owned(), json!(name));
    repo.insert("format".to_owned(), json!(format));
    repo.insert("mode".to_owned(), json!("STANDARD_REPOSITORY"));
    for key in UPDATABLE {
        if let Some(v) = req.body.get(*key).filter(|v| !v.is_null()) {
            repo.insert((*key).to_owned(), v.clone());
        }
    }
    repo.insert("createTime".to_owned(), json!(created));
    repo.insert("updateTime".to_owned(), json!(created));
    repo.insert("sizeBytes".to_owned(), json!("0"));
    if format == "DOCKER" {
        repo.insert(
            "registryUri".to_owned(),
            json!(format!("{location}-docker.pkg.dev/{project}/{id}")),
        );
    }
    let mut repo = Value::Object(repo);
    if let Err(why) = normalise(&mut repo) {
        return Reply::invalid(why);
    }
    state
        .artifacts
        .repositories
        .insert(name.clone(), repo.clone());
    state.created(&format!("/v1/{name}"));
    repo["@type"] = json!(REPOSITORY_TYPE);
    let (now, due) = (state.now(), state.due());
    Reply::ok(state.ops.start(parent, now, due, metadata(), repo))
}

/// What an operation of this service carries while it runs (an
/// `OperationMetadata`, which has no field).
fn metadata() -> Value {
    json!({ "@type": METADATA_TYPE })
}

fn get(state: &mut State, name: &str) -> Reply {
    match state.artifacts.repositories.get(name) {
        Some(repo) => Reply::ok(repo.clone()),
        None => Reply::not_found(format!("Requested entity was not found: {name}")),
    }
}

/// Writes the field at `path` (dotted, camelCase) of `patch` into `target`, removing it
/// when `patch` does not hold it.
fn set_path(target: &mut Value, patch: &Value, path: &[&str]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let Some(target) = target.as_object_mut() else {
        return;
    };
    let from = patch.get(*first);
    if rest.is_empty() {
        match from {
            Some(v) => {
                target.insert((*first).to_owned(), v.clone());
            }
            None => {
                target.remove(*first);
            }
        }
        return;
    }
    let slot = target
        .entry((*first).to_owned())
        .or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    set_path(slot, from.unwrap_or(&Value::Null), rest);
}

fn patch(state: &mut State, name: &str, req: &Req<'_>) -> Reply {
    let paths: Vec<String> = match req.param("updateMask") {
        Some(mask) => mask
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| p.split('.').map(camel).collect::<Vec<_>>().join("."))
            .collect(),
        None => UPDATABLE
            .iter()
            .filter(|k| req.body.get(**k).is_some())
            .map(|k| (*k).to_owned())
            .collect(),
    };
    if let Some(bad) = paths
        .iter()
        .find(|p| !UPDATABLE.contains(&p.split('.').next().unwrap_or("")))
    {
        return Reply::invalid(format!(
            "Invalid update_mask: the field {bad} cannot be updated"
        ));
    }
    let Some(mut repo) = state.artifacts.repositories.get(name).cloned() else {
        return Reply::not_found(format!("Requested entity was not found: {name}"));
    };
    for path in &paths {
        let parts: Vec<&str> = path.split('.').collect();
        set_path(&mut repo, req.body, &parts);
    }
    if let Err(why) = normalise(&mut repo) {
        return Reply::invalid(why);
    }
    repo["updateTime"] = json!(state.timestamp());
    state
        .artifacts
        .repositories
        .insert(name.to_owned(), repo.clone());
    Reply::ok(repo)
}

fn delete(state: &mut State, parent: &str, name: &str) -> Reply {
    if state.artifacts.repositories.remove(name).is_none() {
        return Reply::not_found(format!("Requested entity was not found: {name}"));
    }
    let (now, due) = (state.now(), state.due());
    Reply::ok(
        state
            .ops
            .start(parent, now, due, metadata(), json!({ "@type": EMPTY_TYPE })),
    )
}

fn list(state: &mut State, parent: &str, req: &Req<'_>) -> Reply {
    if req.param("filter").is_some() || req.param("orderBy").is_some() {
        return Reply::invalid("this stand-in does not serve list filters nor ordering");
    }
    let size = match req.param("pageSize").map(str::parse::<i64>) {
        None | Some(Ok(0)) => 100,
        Some(Ok(n)) if n > 0 => usize::try_from(n.min(1000)).unwrap_or(1000),
        _ => return Reply::invalid("page_size must be a positive number"),
    };
    let prefix = format!("{parent}/repositories/");
    let start = match page_start(req) {
        Ok(Some(start)) if start.starts_with(&prefix) => start,
        Ok(Some(start)) => {
            return Reply::invalid(format!("Invalid page token for {parent}: {start:?}"));
        }
        Ok(None) => prefix.clone(),
        Err(reply) => return reply,
    };
    let mut page = Vec::new();
    let mut next = None;
    for (name, repo) in state.artifacts.repositories.range(start..) {
        if !name.starts_with(&prefix) {
            break;
        }
        if page.len() == size {
            next = Some(page_token(name));
            break;
        }
        page.push(repo.clone());
    }
    let mut out = json!({ "repositories": page });
    if let Some(next) = next {
        out["nextPageToken"] = json!(next);
    }
    Reply::ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_artifact_registrys_rule() {
        assert!(valid_id("app-images-2"));
        for bad in ["", "App", "2app", "app-", "app_images", &"a".repeat(64)] {
            assert!(!valid_id(bad), "{bad}");
        }
    }

    #[test]
    fn enums_are_read_as_names() {
        assert_eq!(
            enum_name(Some(&json!("DOCKER")), FORMATS),
            Ok(Some("DOCKER"))
        );
        assert_eq!(enum_name(None, FORMATS), Ok(None));
        assert_eq!(
            enum_name(Some(&json!("FORMAT_UNSPECIFIED")), FORMATS),
            Ok(None)
        );
        assert!(enum_name(Some(&json!("TARBALL")), FORMATS).is_err());
        assert_eq!(
            enum_name(Some(&json!("DISABLED")), ENABLEMENT),
            Ok(Some("DISABLED"))
        );
        let mut sent = json!({"format": 1, "vulnerabilityScanningConfig": {"enablementConfig": 2}});
        ENUMS.read_as_names(&mut sent).unwrap();
        assert_eq!(
            sent,
            json!({"format": "DOCKER", "vulnerabilityScanningConfig": {"enablementConfig": "DISABLED"}})
        );
        assert!(ENUMS.read_as_names(&mut json!({"format": 4})).is_err());
    }

    #[test]
    fn scanning_state_follows_the_config_and_the_format() {
        let mut docker = json!({"format": "DOCKER", "vulnerabilityScanningConfig": {"enablementConfig": "DISABLED"}});
        normalise(&mut docker).unwrap();
        assert_eq!(
            docker["vulnerabilityScanningConfig"],
            json!({"enablementConfig": "DISABLED", "enablementState": "SCANNING_DISABLED",
                   "enablementStateReason": "Vulnerability scanning is disabled in the repository's config"})
        );
        let mut inherited = json!({"format": "DOCKER"});
        normalise(&mut inherited).unwrap();
        assert_eq!(
            inherited["vulnerabilityScanningConfig"]["enablementState"],
            "SCANNING_ACTIVE"
        );
        assert!(
            inherited["vulnerabilityScanningConfig"]
                .get("enablementConfig")
                .is_none()
        );
        let mut maven = json!({"format": "MAVEN", "dockerConfig": {"immutableTags": true}});
        assert!(normalise(&mut maven).is_err());
    }

    #[test]
    fn a_nested_mask_path_writes_just_that_field() {
        let mut repo =
            json!({"dockerConfig": {"immutableTags": false, "other": 1}, "labels": {"a": "1"}});
        set_path(
            &mut repo,
            &json!({"dockerConfig": {"immutableTags": true}}),
            &["dockerConfig", "immutableTags"],
        );
        assert_eq!(
            repo["dockerConfig"],
            json!({"immutableTags": true, "other": 1})
        );
        set_path(&mut repo, &json!({}), &["labels"]);
        assert!(repo.get("labels").is_none());
    }
}
