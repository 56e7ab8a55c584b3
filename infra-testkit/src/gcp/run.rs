//! The Cloud Run stand-in (Admin API v2): services, and the long-running operations
//! their writes start.
//!
//! Served, as `google-cloud-run-v2`'s `Services` client calls them:
//!
//! | call | request |
//! |---|---|
//! | CreateService | `POST /v2/projects/{p}/locations/{l}/services?serviceId=` |
//! | GetService | `GET /v2/projects/{p}/locations/{l}/services/{id}` |
//! | ListServices | `GET /v2/projects/{p}/locations/{l}/services?pageSize=&pageToken=` |
//! | UpdateService | `PATCH /v2/projects/{p}/locations/{l}/services/{id}` (`updateMask`, `allowMissing`) |
//! | DeleteService | `DELETE /v2/projects/{p}/locations/{l}/services/{id}?etag=` |
//! | GetOperation | `GET /v2/projects/{p}/locations/{l}/operations/{op}` |
//!
//! Create, update and delete answer an operation whose metadata is the service as it
//! rolls out and whose response, once done, is the service rolled out (`@type`
//! `type.googleapis.com/google.cloud.run.v2.Service`). The change is recorded at once,
//! and rolls out over the stand-in's settling time: until then the service is
//! `reconciling`, its `terminalCondition` and `conditions` `CONDITION_RECONCILING`, its
//! `latestReadyRevision`, `observedGeneration` and `trafficStatuses` those of before
//! (none for a new service); then it is ready, whether or not anyone looked. A
//! deleted service is gone at once. `validateOnly=true` checks and answers without
//! changing anything. Enums are answered as names, or as numbers when the request asks
//! for `$alt=json;enum-encoding=int`.
//!
//! Filled in by the server, whatever the request says: `name`, `uid`, `generation`
//! (an int64 string, one more on every write), `createTime`, `updateTime`,
//! `observedGeneration`, `terminalCondition`, `conditions`,
//! `latestReadyRevision` and `latestCreatedRevision` (`{id}-{nnnnn}-{abc}`, a new one
//! whenever the template changes, labels and other service-level fields do not make
//! one), `traffic` (all to the latest revision) when empty, `trafficStatuses`, `uri`
//! (`https://{id}-{hash}-{region code}.a.run.app`), `urls`, `reconciling` and
//! `etag` (new on every write). Defaults as Cloud Run fills them: `ingress` all
//! traffic, `launchStage` `GA`, `template.timeout` `300s`, `template.serviceAccount`
//! the project's default compute account (`123456789012-compute@developer.gserviceaccount.com`),
//! `template.maxInstanceRequestConcurrency` 80, and each container's
//! `resources.limits` `cpu: 1000m`, `memory: 512Mi` where unset.
//!
//! A build: a service with `buildConfig.sourceLocation` is built when created, and
//! again when an update changes its build (source, function target, base image, image
//! URI, build variables) or the first container's image. The build names itself in
//! `buildConfig.name` and replaces that image with
//! `{imageUri or {l}-docker.pkg.dev/{p}/cloud-run-source-deploy/{id}}@sha256:{digest}`.
//! The archive is not fetched: a source location that names no object is not noticed.
//!
//! Refused as Cloud Run refuses them (400 `INVALID_ARGUMENT` unless said):
//! - a `serviceId` missing, or not 1 to 49 lowercase letters, digits and hyphens
//!   starting with a letter and not ending with a hyphen; a location that is not a
//!   region's name;
//! - a taken name (409 `ALREADY_EXISTS`); a service that does not exist on get, update
//!   (without `allowMissing`) or delete (404 `NOT_FOUND`); an `etag` that is not the
//!   service's (409 `ABORTED`); a project other than the stand-in's (403);
//! - no `template`; no container, or more than 10; a container without `image`;
//! - `resources.limits.memory` that is not a quantity (`512Mi`, `1Gi`, `1G`, bytes), or
//!   outside 128 MiB to 32 GiB; with the second generation execution environment, less
//!   than 512 MiB;
//! - `resources.limits.cpu` that is not a quantity (`1`, `2`, `1000m`, `0.5`), below
//!   0.08 or above 8, or a whole number of CPUs other than 1, 2, 4, 6 or 8; memory and
//!   CPU that do not fit each other: above 512 MiB needs 1 CPU, above 4 GiB 2, above
//!   8 GiB 4, above 16 GiB 6, above 24 GiB 8; 4 CPUs need 2 GiB, 6 and 8 CPUs 4 GiB;
//! - an environment variable with no name, a name with `=`, a name given twice, or one
//!   of `PORT`, `K_SERVICE`, `K_REVISION`, `K_CONFIGURATION`; a secret reference with
//!   no secret;
//! - `template.timeout` not a duration (`30s`) or outside 1 to 3600 seconds;
//!   `maxInstanceRequestConcurrency` above 1000;
//! - `template.serviceAccount` that is not an email;
//! - labels (service or template) that are not Google labels (keys 1 to 63 lowercase
//!   letters, digits, `_`, `-`, starting with a letter; values up to 63 of the same;
//!   at most 64);
//! - `buildConfig.sourceLocation` that is not `gs://bucket/object`;
//! - `template.revision` not starting with `{id}-`, or naming a revision the service
//!   already had (409 `ALREADY_EXISTS`);
//! - a page token the stand-in did not give.
//!
//! The services' IAM policies (`:getIamPolicy`, `:setIamPolicy`) are `policies.rs`'s.
//!
//! Not modelled: traffic splits (all traffic goes to the latest revision), revisions as
//! resources of their own, the soft delete `showDeleted` lists, and whether a service
//! account or a referenced secret exists.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use super::State;
use super::wire::{Enums, Reply, Req, apply_mask, int64, labels_at};

/// The enumerations of Cloud Run's messages, as `google-cloud-run-v2` numbers them.
/// (`type` is a traffic target's allocation type; a condition's `type` is free text,
/// which no name here matches.)
pub(crate) const ENUMS: Enums = Enums(&[
    (
        "ingress",
        &[
            ("INGRESS_TRAFFIC_UNSPECIFIED", 0),
            ("INGRESS_TRAFFIC_ALL", 1),
            ("INGRESS_TRAFFIC_INTERNAL_ONLY", 2),
            ("INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER", 3),
            ("INGRESS_TRAFFIC_NONE", 4),
        ],
    ),
    (
        "launchStage",
        &[
            ("LAUNCH_STAGE_UNSPECIFIED", 0),
            ("UNIMPLEMENTED", 6),
            ("PRELAUNCH", 7),
            ("EARLY_ACCESS", 1),
            ("ALPHA", 2),
            ("BETA", 3),
            ("GA", 4),
            ("DEPRECATED", 5),
        ],
    ),
    (
        "executionEnvironment",
        &[
            ("EXECUTION_ENVIRONMENT_UNSPECIFIED", 0),
            ("EXECUTION_ENVIRONMENT_GEN1", 1),
            ("EXECUTION_ENVIRONMENT_GEN2", 2),
        ],
    ),
    (
        "type",
        &[
            ("TRAFFIC_TARGET_ALLOCATION_TYPE_UNSPECIFIED", 0),
            ("TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST", 1),
            ("TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION", 2),
        ],
    ),
    (
        "state",
        &[
            ("STATE_UNSPECIFIED", 0),
            ("CONDITION_PENDING", 1),
            ("CONDITION_RECONCILING", 2),
            ("CONDITION_FAILED", 3),
            ("CONDITION_SUCCEEDED", 4),
        ],
    ),
    (
        "severity",
        &[
            ("SEVERITY_UNSPECIFIED", 0),
            ("ERROR", 1),
            ("WARNING", 2),
            ("INFO", 3),
        ],
    ),
    (
        "encryptionKeyRevocationAction",
        &[
            ("ENCRYPTION_KEY_REVOCATION_ACTION_UNSPECIFIED", 0),
            ("PREVENT_NEW", 1),
            ("SHUTDOWN", 2),
        ],
    ),
    (
        "egress",
        &[
            ("VPC_EGRESS_UNSPECIFIED", 0),
            ("ALL_TRAFFIC", 1),
            ("PRIVATE_RANGES_ONLY", 2),
        ],
    ),
    (
        "scalingMode",
        &[
            ("SCALING_MODE_UNSPECIFIED", 0),
            ("AUTOMATIC", 1),
            ("MANUAL", 2),
        ],
    ),
    ("medium", &[("MEDIUM_UNSPECIFIED", 0), ("MEMORY", 1)]),
]);

const SERVICE_TYPE: &str = "type.googleapis.com/google.cloud.run.v2.Service";
/// The project number the stand-in's project has (Resource Manager answers the same).
const PROJECT_NUMBER: &str = "123456789012";
const DEFAULT_PAGE: usize = 50;
const MAX_PAGE: usize = 1000;
const RESERVED_ENV: &[&str] = &["PORT", "K_SERVICE", "K_REVISION", "K_CONFIGURATION"];
/// Fields only the server writes: whatever a request says of them is dropped.
const OUTPUT_ONLY: &[&str] = &[
    "uid",
    "generation",
    "createTime",
    "updateTime",
    "deleteTime",
    "expireTime",
    "creator",
    "lastModifier",
    "observedGeneration",
    "terminalCondition",
    "conditions",
    "latestReadyRevision",
    "latestCreatedRevision",
    "trafficStatuses",
    "uri",
    "urls",
    "reconciling",
    "satisfiesPzs",
    "threatDetectionEnabled",
    "etag",
];

/// What the stand-in holds of Cloud Run.
#[derive(Debug, Default)]
pub(crate) struct Run {
    /// Services by resource name.
    services: BTreeMap<String, Stored>,
    /// Counts creations, builds and writes: the source of uids, digests and etags.
    serial: u64,
}

impl Run {
    /// The identity of the service `name` (its creation), if it exists: its `uid`.
    pub(crate) fn identity(&self, name: &str) -> Option<String> {
        self.services.get(name).map(|s| {
            s.body
                .get("uid")
                .and_then(Value::as_str)
                .map_or_else(|| format!("run-{}", s.seq), str::to_owned)
        })
    }
}

/// One service and the history the server keeps of it.
#[derive(Debug, Clone)]
struct Stored {
    /// The service as answered now.
    body: Value,
    /// Creation order, for listing newest first and for page tokens.
    seq: u64,
    /// The revisions made, oldest first.
    revisions: Vec<String>,
    /// The rollout in progress: when it is done, and the service then.
    rolling: Option<(Duration, Value)>,
}

impl Run {
    /// Ends every rollout whose time has come by `now`: the service is then ready,
    /// its conditions changed at the rollout's end.
    pub(crate) fn settle(&mut self, now: Duration) {
        for stored in self.services.values_mut() {
            let Some((due, _)) = &stored.rolling else {
                continue;
            };
            if *due > now {
                continue;
            }
            if let Some((due, mut ready)) = stored.rolling.take() {
                let at = json!(super::rfc3339(due.as_micros()));
                ready["terminalCondition"]["lastTransitionTime"] = at.clone();
                if let Some(conditions) = ready["conditions"].as_array_mut() {
                    for c in conditions {
                        c["lastTransitionTime"] = at.clone();
                    }
                }
                stored.body = ready;
            }
        }
    }
}

/// Serves a request of Cloud Run, or `None` when the path is not one of its own.
pub(crate) fn route(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let parts = req.under("/v2/projects")?;
    let (project, location, rest) = match parts.as_slice() {
        [project, "locations", location, rest @ ..] => (*project, *location, rest),
        _ => return None,
    };
    let reply = match (req.method, rest) {
        ("GET", ["operations", op]) => {
            let name = format!("projects/{project}/locations/{location}/operations/{op}");
            return Some(guard(state, project, location).unwrap_or_else(|| {
                state
                    .ops
                    .get(&name, state.now())
                    .map_or_else(|| Reply::not_found(format!("Operation {name}")), Reply::ok)
            }));
        }
        ("POST", ["services"]) => Call::Create,
        ("GET", ["services"]) => Call::List,
        ("GET", ["services", id]) => Call::Get(id),
        ("PATCH", ["services", id]) => Call::Update(id),
        ("DELETE", ["services", id]) => Call::Delete(id),
        _ => return None,
    };
    if let Some(refused) = guard(state, project, location) {
        return Some(refused);
    }
    let parent = format!("projects/{project}/locations/{location}");
    Some(match reply {
        Call::Create => create(state, &parent, location, req),
        Call::List => list(state, &parent, req),
        Call::Get(id) => match state.run.services.get(&format!("{parent}/services/{id}")) {
            Some(stored) => Reply::ok(stored.body.clone()),
            None => missing(id),
        },
        Call::Update(id) => update(state, &parent, location, id, req),
        Call::Delete(id) => delete(state, &parent, id, req),
    })
}

enum Call<'a> {
    Create,
    List,
    Get(&'a str),
    Update(&'a str),
    Delete(&'a str),
}

/// The refusal of a request naming another project or a location that is no region.
fn guard(state: &State, project: &str, location: &str) -> Option<Reply> {
    if !state.is_project(project) {
        return Some(State::foreign_project(project));
    }
    let region = location.contains('-')
        && location.starts_with(|c: char| c.is_ascii_lowercase())
        && location.ends_with(|c: char| c.is_ascii_digit())
        && location
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    (!region).then(|| Reply::invalid(format!("Location '{location}' is not a valid location.")))
}

fn missing(id: &str) -> Reply {
    Reply::not_found(format!("Resource '{id}' of kind 'SERVICE'"))
}

fn check_id(id: &str) -> Result<(), String> {
    let ok = (1..=49).contains(&id.len())
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && !id.ends_with('-')
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "service_id: Invalid value '{id}': it must begin with a letter, contain only \
             lowercase letters, digits and hyphens, not end with a hyphen, and have fewer \
             than 50 characters"
        ))
    }
}

fn create(state: &mut State, parent: &str, location: &str, req: &Req<'_>) -> Reply {
    let Some(id) = req.param("serviceId") else {
        return Reply::invalid("service_id: must be specified");
    };
    if let Err(message) = check_id(id) {
        return Reply::invalid(message);
    }
    let name = format!("{parent}/services/{id}");
    if state.run.services.contains_key(&name) {
        return Reply::exists(format!("Resource '{id}'"));
    }
    if let Err(message) = check(req.body) {
        return Reply::invalid(message);
    }
    let stored = match deploy(state, &name, location, id, req.body, None) {
        Ok(stored) => stored,
        Err(reply) => return reply,
    };
    roll_out(state, parent, &name, stored, None, req)
}

/// Records `stored` (the service as it will be once rolled out: reconciling until
/// then) unless the request only validates, and answers the operation that follows
/// the rollout.
fn roll_out(
    state: &mut State,
    parent: &str,
    name: &str,
    mut stored: Stored,
    prev: Option<&Value>,
    req: &Req<'_>,
) -> Reply {
    let (now, due) = (state.now(), state.due());
    let stamp = state.timestamp();
    let ready = stored.body.clone();
    let running = if due > now {
        let running = reconciling(&ready, prev, &stamp);
        stored.body = running.clone();
        stored.rolling = Some((due, ready.clone()));
        running
    } else {
        ready.clone()
    };
    if req.param("validateOnly") != Some("true") {
        let new = !state.run.services.contains_key(name);
        state.run.services.insert(name.to_owned(), stored);
        if new {
            state.created(&format!("/v2/{name}"));
        }
    }
    Reply::ok(
        state
            .ops
            .start(parent, now, due, typed(&running), typed(&ready)),
    )
}

/// The service while its rollout runs: reconciling, its ready revision, observed
/// generation and traffic those of before (none for a new service).
fn reconciling(ready: &Value, prev: Option<&Value>, now: &str) -> Value {
    let mut body = ready.clone();
    body["reconciling"] = json!(true);
    let pending = |kind: &str| json!({ "type": kind, "state": "CONDITION_RECONCILING", "lastTransitionTime": now });
    body["terminalCondition"] = pending("Ready");
    body["conditions"] = json!([pending("RoutesReady"), pending("ConfigurationsReady")]);
    if let Some(map) = body.as_object_mut() {
        for key in [
            "latestReadyRevision",
            "observedGeneration",
            "trafficStatuses",
        ] {
            match prev.and_then(|p| p.get(key)) {
                Some(v) => {
                    map.insert(key.to_owned(), v.clone());
                }
                None => {
                    map.remove(key);
                }
            }
        }
    }
    body
}

fn update(state: &mut State, parent: &str, location: &str, id: &str, req: &Req<'_>) -> Reply {
    let name = format!("{parent}/services/{id}");
    let Some(prev) = state.run.services.get(&name).cloned() else {
        if req.param("allowMissing") == Some("true") {
            if let Err(message) = check_id(id) {
                return Reply::invalid(message);
            }
            if let Err(message) = check(req.body) {
                return Reply::invalid(message);
            }
            let stored = match deploy(state, &name, location, id, req.body, None) {
                Ok(stored) => stored,
                Err(reply) => return reply,
            };
            return roll_out(state, parent, &name, stored, None, req);
        }
        return missing(id);
    };
    if let Some(named) = req.body.get("name").and_then(Value::as_str)
        && !named.is_empty()
        && named != name
    {
        return Reply::invalid(format!(
            "service.name: '{named}' does not match the request's path"
        ));
    }
    if let Some(etag) = req.body.get("etag").and_then(Value::as_str)
        && !etag.is_empty()
        && Some(etag) != prev.body.get("etag").and_then(Value::as_str)
    {
        return Reply::error(
            409,
            "ABORTED",
            format!("The etag '{etag}' does not match the service's current etag."),
        );
    }
    let wanted = match req.param("updateMask") {
        Some(mask) => {
            let mut merged = prev.body.clone();
            apply_mask(&mut merged, req.body, Some(mask));
            merged
        }
        None => req.body.clone(),
    };
    if let Err(message) = check(&wanted) {
        return Reply::invalid(message);
    }
    let stored = match deploy(state, &name, location, id, &wanted, Some(&prev)) {
        Ok(stored) => stored,
        Err(reply) => return reply,
    };
    roll_out(state, parent, &name, stored, Some(&prev.body), req)
}

fn delete(state: &mut State, parent: &str, id: &str, req: &Req<'_>) -> Reply {
    let name = format!("{parent}/services/{id}");
    let Some(stored) = state.run.services.get(&name) else {
        return missing(id);
    };
    if let Some(etag) = req.param("etag")
        && Some(etag) != stored.body.get("etag").and_then(Value::as_str)
    {
        return Reply::error(
            409,
            "ABORTED",
            format!("The etag '{etag}' does not match the service's current etag."),
        );
    }
    let mut body = stored.body.clone();
    let now = state.timestamp();
    body["deleteTime"] = json!(now);
    body["expireTime"] = json!(now);
    if req.param("validateOnly") != Some("true") {
        state.run.services.remove(&name);
    }
    let (now, due) = (state.now(), state.due());
    let response = typed(&body);
    Reply::ok(
        state
            .ops
            .start(parent, now, due, response.clone(), response),
    )
}

fn list(state: &mut State, parent: &str, req: &Req<'_>) -> Reply {
    let size = match int64(req.query.get("pageSize").map(|s| json!(s)).as_ref()) {
        None | Some(0) => DEFAULT_PAGE,
        Some(n) if n < 0 => return Reply::invalid("page_size: must not be negative"),
        Some(n) => usize::try_from(n).unwrap_or(MAX_PAGE).min(MAX_PAGE),
    };
    let prefix = format!("{parent}/services/");
    // Newest first, as Cloud Run sorts them.
    let mut services: Vec<&Stored> = state
        .run
        .services
        .iter()
        .filter(|(name, _)| name.starts_with(&prefix))
        .map(|(_, stored)| stored)
        .collect();
    services.sort_by_key(|s| std::cmp::Reverse(s.seq));
    let start = match req.param("pageToken") {
        None => 0,
        Some(token) => match token
            .strip_prefix("seq-")
            .and_then(|s| s.parse::<u64>().ok())
        {
            Some(seq) => services.iter().take_while(|s| s.seq > seq).count(),
            None => return Reply::invalid(format!("page_token: '{token}' is not valid")),
        },
    };
    let page: Vec<Value> = services
        .iter()
        .skip(start)
        .take(size)
        .map(|s| s.body.clone())
        .collect();
    let mut answer = json!({ "services": page });
    if let Some(next) = services.get(start + size) {
        answer["nextPageToken"] = json!(format!("seq-{}", next.seq));
    }
    Reply::ok(answer)
}

/// The service as an operation's response.
fn typed(body: &Value) -> Value {
    let mut response = body.clone();
    if let Some(map) = response.as_object_mut() {
        map.insert("@type".to_owned(), json!(SERVICE_TYPE));
    }
    response
}

fn digest(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A memory quantity in bytes.
fn quantity_bytes(text: &str) -> Option<f64> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let factor = match unit {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0_f64.powi(2),
        "Gi" => 1024.0_f64.powi(3),
        "Ti" => 1024.0_f64.powi(4),
        _ => return None,
    };
    if number.is_empty() {
        return None;
    }
    number.parse::<f64>().ok().map(|n| n * factor)
}

/// A CPU quantity in thousandths of a CPU.
fn cpu_millis(text: &str) -> Option<f64> {
    match text.strip_suffix('m') {
        Some(m) => m.parse::<f64>().ok(),
        None => text.parse::<f64>().ok().map(|c| c * 1000.0),
    }
}

/// A duration (`30s`, `1.5s`) in seconds.
fn duration_seconds(value: &Value) -> Option<f64> {
    value.as_str()?.strip_suffix('s')?.parse::<f64>().ok()
}

fn is_gen2(template: &Value) -> bool {
    matches!(
        template.get("executionEnvironment"),
        Some(v) if v == "EXECUTION_ENVIRONMENT_GEN2"
    )
}

fn check_labels(where_: &str, labels: &BTreeMap<String, String>) -> Result<(), String> {
    let key_ok = |k: &str| {
        (1..=63).contains(&k.len())
            && k.starts_with(|c: char| c.is_ascii_lowercase())
            && k.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    };
    let value_ok = |v: &str| {
        v.len() <= 63
            && v.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    };
    if labels.len() > 64 {
        return Err(format!("{where_}: at most 64 labels are allowed"));
    }
    for (k, v) in labels {
        if !key_ok(k) || !value_ok(v) {
            return Err(format!("{where_}: the label '{k}: {v}' is not valid"));
        }
    }
    Ok(())
}

/// What Cloud Run refuses in a service as requested.
fn check(service: &Value) -> Result<(), String> {
    if !service.is_object() {
        return Err("service: must be specified".to_owned());
    }
    check_labels("service.labels", &labels_at(service, "labels"))?;
    let Some(template) = service.get("template").filter(|t| t.is_object()) else {
        return Err("service.template: must be specified".to_owned());
    };
    check_labels("service.template.labels", &labels_at(template, "labels"))?;
    if let Some(timeout) = template.get("timeout") {
        match duration_seconds(timeout) {
            Some(s) if (1.0..=3600.0).contains(&s) => {}
            Some(_) => {
                return Err(
                    "service.template.timeout: must be between 1 second and 3600 seconds"
                        .to_owned(),
                );
            }
            None => return Err(format!("service.template.timeout: Invalid value {timeout}")),
        }
    }
    if let Some(n) = template
        .get("maxInstanceRequestConcurrency")
        .and_then(Value::as_i64)
        && !(0..=1000).contains(&n)
    {
        return Err(
            "service.template.max_instance_request_concurrency: must be at most 1000".to_owned(),
        );
    }
    if let Some(account) = template
        .get("serviceAccount")
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty())
        && (!account.contains('@') || account.contains('/'))
    {
        return Err(format!(
            "service.template.service_account: '{account}' is not a service account email"
        ));
    }
    let containers = template
        .get("containers")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if containers.is_empty() {
        return Err("service.template.containers: at least one container is required".to_owned());
    }
    if containers.len() > 10 {
        return Err("service.template.containers: at most 10 containers are allowed".to_owned());
    }
    for (i, container) in containers.iter().enumerate() {
        check_container(i, container, is_gen2(template))?;
    }
    if let Some(build) = service.get("buildConfig")
        && let Some(location) = build
            .get("sourceLocation")
            .and_then(Value::as_str)
            .filter(|l| !l.is_empty())
    {
        let ok = location
            .strip_prefix("gs://")
            .and_then(|rest| rest.split_once('/'))
            .is_some_and(|(bucket, object)| !bucket.is_empty() && !object.is_empty());
        if !ok {
            return Err(format!(
                "service.build_config.source_location: '{location}' is not a Cloud Storage \
                 object (gs://bucket/object)"
            ));
        }
    }
    Ok(())
}

fn check_container(i: usize, container: &Value, gen2: bool) -> Result<(), String> {
    let at = format!("service.template.containers[{i}]");
    if container
        .get("image")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err(format!("{at}.image: Container image must be specified"));
    }
    let limits = container.pointer("/resources/limits");
    let memory = match limits.and_then(|l| l.get("memory")) {
        None => 512.0 * 1024.0 * 1024.0,
        Some(m) => m
            .as_str()
            .and_then(quantity_bytes)
            .ok_or_else(|| format!("{at}.resources.limits.memory: Invalid value {m}"))?,
    };
    let mib = memory / (1024.0 * 1024.0);
    if !(128.0..=32768.0).contains(&mib) {
        return Err(format!(
            "{at}.resources.limits.memory: must be between 128Mi and 32Gi"
        ));
    }
    if gen2 && mib < 512.0 {
        return Err(format!(
            "{at}.resources.limits.memory: the second generation execution environment \
             needs at least 512Mi"
        ));
    }
    let cpu = match limits.and_then(|l| l.get("cpu")) {
        None => 1000.0,
        Some(c) => c
            .as_str()
            .and_then(cpu_millis)
            .ok_or_else(|| format!("{at}.resources.limits.cpu: Invalid value {c}"))?,
    };
    let whole = [1000.0, 2000.0, 4000.0, 6000.0, 8000.0];
    if !(80.0..=8000.0).contains(&cpu) || (cpu > 1000.0 && !whole.contains(&cpu)) {
        return Err(format!(
            "{at}.resources.limits.cpu: must be between 0.08 and 1, or 1, 2, 4, 6 or 8"
        ));
    }
    let least_cpu = match mib {
        m if m <= 512.0 => 0.0,
        m if m <= 4096.0 => 1000.0,
        m if m <= 8192.0 => 2000.0,
        m if m <= 16384.0 => 4000.0,
        m if m <= 24576.0 => 6000.0,
        _ => 8000.0,
    };
    let least_memory = match cpu {
        c if c >= 6000.0 => 4096.0,
        c if c >= 4000.0 => 2048.0,
        _ => 0.0,
    };
    if cpu < least_cpu || mib < least_memory {
        return Err(format!(
            "{at}.resources: Invalid value specified for cpu and memory: {} CPU does not \
             fit {mib} MiB",
            cpu / 1000.0
        ));
    }
    let mut names = std::collections::BTreeSet::new();
    for var in container
        .get("env")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
    {
        let name = var.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() || name.contains('=') {
            return Err(format!(
                "{at}.env: Invalid environment variable name '{name}'"
            ));
        }
        if RESERVED_ENV.contains(&name) {
            return Err(format!(
                "{at}.env: The following reserved env names were provided: {name}. These \
                 values are automatically set by the system."
            ));
        }
        if !names.insert(name) {
            return Err(format!("{at}.env: duplicate environment variable '{name}'"));
        }
        if let Some(source) = var.get("valueSource") {
            let secret = source
                .pointer("/secretKeyRef/secret")
                .and_then(Value::as_str)
                .unwrap_or("");
            if secret.is_empty() {
                return Err(format!(
                    "{at}.env[{name}].value_source.secret_key_ref.secret: must be specified"
                ));
            }
        }
    }
    Ok(())
}

fn without(value: &Value, key: &str) -> Value {
    let mut value = value.clone();
    if let Some(map) = value.as_object_mut() {
        map.remove(key);
    }
    value
}

/// A short code of a region, as Cloud Run's URLs carry it (`europe-west1` → `ew`).
fn region_code(region: &str) -> String {
    region
        .split('-')
        .filter_map(|part| part.chars().next())
        .collect()
}

/// The service as it will be once deployed: the request, less what only the server
/// writes, with the server's fields and defaults filled in, built and given a new
/// revision when due.
fn deploy(
    state: &mut State,
    name: &str,
    location: &str,
    id: &str,
    input: &Value,
    prev: Option<&Stored>,
) -> Result<Stored, Reply> {
    state.run.serial += 1;
    let serial = state.run.serial;
    let project = state.project.clone();
    let now = state.timestamp();
    let mut body = input.clone();
    let map = body.as_object_mut().map(std::mem::take).unwrap_or_default();
    let mut svc: Map<String, Value> = map
        .into_iter()
        .filter(|(k, _)| !OUTPUT_ONLY.contains(&k.as_str()) && k != "name")
        .collect();
    svc.insert("name".to_owned(), json!(name));
    if svc
        .get("ingress")
        .is_none_or(|i| i == "INGRESS_TRAFFIC_UNSPECIFIED")
    {
        svc.insert("ingress".to_owned(), json!("INGRESS_TRAFFIC_ALL"));
    }
    if svc
        .get("launchStage")
        .is_none_or(|l| l == "LAUNCH_STAGE_UNSPECIFIED")
    {
        svc.insert("launchStage".to_owned(), json!("GA"));
    }
    let mut template = svc.remove("template").unwrap_or_else(|| json!({}));
    fill_template(&mut template);
    let prev_body = prev.map(|p| &p.body);

    // The build, when one is due.
    if let Some(build) = svc.get_mut("buildConfig").filter(|b| {
        b.get("sourceLocation")
            .and_then(Value::as_str)
            .is_some_and(|l| !l.is_empty())
    }) {
        let inputs = without(build, "name");
        let prev_inputs = prev_body
            .and_then(|p| p.get("buildConfig"))
            .map(|b| without(b, "name"));
        let image = template.pointer("/containers/0/image").cloned();
        let prev_image = prev_body.and_then(|p| p.pointer("/template/containers/0/image").cloned());
        let rebuild = prev_inputs.as_ref() != Some(&inputs) || prev_image != image;
        if rebuild {
            let target = build
                .get("imageUri")
                .and_then(Value::as_str)
                .filter(|u| !u.is_empty())
                .map_or_else(
                    || format!("{location}-docker.pkg.dev/{project}/cloud-run-source-deploy/{id}"),
                    str::to_owned,
                );
            let hash = digest(&format!("{name} {serial} {inputs}"));
            build["name"] = json!(format!(
                "projects/{PROJECT_NUMBER}/locations/{location}/builds/{}",
                uuid(&hash)
            ));
            template["containers"][0]["image"] = json!(format!("{target}@sha256:{hash}"));
        } else if let Some(prev_name) = prev_body.and_then(|p| p.pointer("/buildConfig/name")) {
            build["name"] = prev_name.clone();
        }
    }

    // The revision: a new one when the template changed.
    let mut revisions = prev.map(|p| p.revisions.clone()).unwrap_or_default();
    let changed = prev_body
        .and_then(|p| p.get("template"))
        .map(|t| without(t, "revision"))
        != Some(without(&template, "revision"));
    let revision = if changed || revisions.is_empty() {
        let named = template
            .get("revision")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
            .map(str::to_owned);
        let revision = match named {
            Some(named) => {
                if !named.starts_with(&format!("{id}-")) {
                    return Err(Reply::invalid(format!(
                        "service.template.revision: '{named}' must start with '{id}-'"
                    )));
                }
                if revisions.contains(&named) {
                    return Err(Reply::error(
                        409,
                        "ALREADY_EXISTS",
                        format!(
                            "Revision named '{named}' with different configuration already exists."
                        ),
                    ));
                }
                named
            }
            None => {
                let suffix: String = digest(&format!("{name} {serial}"))
                    .chars()
                    .filter(char::is_ascii_lowercase)
                    .take(3)
                    .collect();
                format!("{id}-{:05}-{suffix}", revisions.len() + 1)
            }
        };
        revisions.push(revision.clone());
        revision
    } else {
        revisions.last().cloned().unwrap_or_default()
    };
    svc.insert("template".to_owned(), template);

    if svc
        .get("traffic")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        svc.insert(
            "traffic".to_owned(),
            json!([{ "type": "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST", "percent": 100 }]),
        );
    }
    let generation = prev_body
        .and_then(|p| int64(p.get("generation")))
        .unwrap_or(0)
        + 1;
    let uid = prev_body
        .and_then(|p| p.get("uid").cloned())
        .unwrap_or_else(|| json!(uuid(&digest(&format!("{name} uid {serial}")))));
    let created = prev_body
        .and_then(|p| p.get("createTime").cloned())
        .unwrap_or_else(|| json!(now));
    let hash: String = digest(&format!("{project} url")).chars().take(10).collect();
    let uri = format!("https://{id}-{hash}-{}.a.run.app", region_code(location));
    let ready = json!({
        "type": "Ready",
        "state": "CONDITION_SUCCEEDED",
        "lastTransitionTime": now,
    });
    let server = json!({
        "uid": uid,
        "generation": generation.to_string(),
        "createTime": created,
        "updateTime": now,
        "creator": "stand-in@example.com",
        "lastModifier": "stand-in@example.com",
        "observedGeneration": generation.to_string(),
        "terminalCondition": ready,
        "conditions": [
            { "type": "RoutesReady", "state": "CONDITION_SUCCEEDED", "lastTransitionTime": now },
            { "type": "ConfigurationsReady", "state": "CONDITION_SUCCEEDED", "lastTransitionTime": now },
        ],
        "latestReadyRevision": revision,
        "latestCreatedRevision": revision,
        "trafficStatuses": [{ "type": "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST", "percent": 100 }],
        "uri": uri,
        "urls": [uri, format!("https://{id}-{PROJECT_NUMBER}.{location}.run.app")],
        "reconciling": false,
        "etag": format!("\"{}\"", &digest(&format!("{name} etag {serial}"))[..16]),
    });
    if let Value::Object(server) = server {
        svc.extend(server);
    }
    Ok(Stored {
        body: Value::Object(svc),
        seq: prev.map_or(serial, |p| p.seq),
        revisions,
        rolling: None,
    })
}

/// Cloud Run's defaults, where the template leaves them unset.
fn fill_template(template: &mut Value) {
    let Some(t) = template.as_object_mut() else {
        return;
    };
    t.entry("timeout").or_insert_with(|| json!("300s"));
    if t.get("serviceAccount")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        t.insert(
            "serviceAccount".to_owned(),
            json!(format!(
                "{PROJECT_NUMBER}-compute@developer.gserviceaccount.com"
            )),
        );
    }
    if t.get("maxInstanceRequestConcurrency")
        .is_none_or(|c| c == 0)
    {
        t.insert("maxInstanceRequestConcurrency".to_owned(), json!(80));
    }
    if let Some(containers) = t.get_mut("containers").and_then(Value::as_array_mut) {
        for container in containers {
            let Some(c) = container.as_object_mut() else {
                continue;
            };
            let resources = c.entry("resources").or_insert_with(|| json!({}));
            if let Some(r) = resources.as_object_mut() {
                let limits = r.entry("limits").or_insert_with(|| json!({}));
                if let Some(l) = limits.as_object_mut() {
                    l.entry("cpu").or_insert_with(|| json!("1000m"));
                    l.entry("memory").or_insert_with(|| json!("512Mi"));
                }
            }
        }
    }
}

/// A UUID-shaped id from a hex digest.
fn uuid(hex: &str) -> String {
    format!(
        "{}-{}-4{}-8{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(memory: &str) -> Value {
        json!({
            "labels": { "managed-by-infra": "shop" },
            "template": {
                "containers": [{
                    "image": "us-docker.pkg.dev/cloudrun/container/hello",
                    "resources": { "limits": { "memory": memory } },
                }],
            },
        })
    }

    #[test]
    fn what_cloud_run_refuses_is_refused() {
        assert!(check(&service("256Mi")).is_ok());
        assert!(check(&service("1Gi")).is_ok());
        assert!(check(&service("64Mi")).is_err());
        assert!(check(&service("lots")).is_err());
        assert!(check(&service("8Gi")).is_err(), "8 GiB needs 2 CPUs");
        assert!(check(&json!({ "template": { "containers": [] } })).is_err());
        let mut reserved = service("256Mi");
        reserved["template"]["containers"][0]["env"] = json!([{ "name": "PORT", "value": "1" }]);
        assert!(check(&reserved).is_err());
        let mut slow = service("256Mi");
        slow["template"]["timeout"] = json!("3601s");
        assert!(check(&slow).is_err());
        let mut built = service("256Mi");
        built["buildConfig"] = json!({ "sourceLocation": "gs://bucket" });
        assert!(check(&built).is_err());
        assert!(check_id("app-1").is_ok());
        assert!(check_id("app-").is_err() && check_id("1app").is_err());
    }

    #[test]
    fn quantities_and_codes_read_as_cloud_run_writes_them() {
        assert_eq!(quantity_bytes("1Gi"), Some(1024.0 * 1024.0 * 1024.0));
        assert_eq!(quantity_bytes("Mi"), None);
        assert_eq!(cpu_millis("1000m"), Some(1000.0));
        assert_eq!(cpu_millis("2"), Some(2000.0));
        assert_eq!(region_code("europe-west1"), "ew");
        assert_eq!(uuid(&digest("x")).len(), 36);
    }
}
