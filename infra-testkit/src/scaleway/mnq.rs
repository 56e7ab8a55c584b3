//! Queues' control plane (Messaging and Queuing, `mnq/v1beta1`), from memory: the
//! activation of Queues' SQS API for a project, and Queues credentials, under
//! `/mnq/v1beta1/regions/{region}`. The queues themselves are SQS, served elsewhere
//! (moto's server in tests): this stand-in answers, as `sqs_endpoint_url`, the address
//! it is configured with ([`ScalewayServer::queues_endpoint`](super::ScalewayServer::queues_endpoint)).
//!
//! Served, in the shapes Scaleway's Terraform provider recorded against the live API
//! (its `internal/services/mnq/testdata/sqs-*.cassette.yaml`):
//!
//! | call | request | answer |
//! |---|---|---|
//! | ActivateSqs | `POST …/activate-sqs` `{project_id}` | 200, the project's SQS info `enabled`; 409 `already_exists` of `MnqSQSNamespace` when it is already |
//! | DeactivateSqs | `POST …/deactivate-sqs` `{project_id}` | 200, `disabled` with null dates (its credentials go with it); 404 `not_found` of `MnqSQSNamespace` when not activated |
//! | GetSqsInfo | `GET …/sqs-info?project_id=` | 200, `enabled`, or `disabled` with null dates when never activated |
//! | CreateSqsCredentials | `POST …/sqs-credentials` `{project_id, name, permissions}` | 200 with `access_key` and `secret_key` (the only answer that holds it) |
//! | GetSqsCredentials | `GET …/sqs-credentials/{id}` | 200 without the secret key (`""`); 404 `not_found` of `credentials` |
//! | ListSqsCredentials | `GET …/sqs-credentials?project_id&page&page_size` | `{sqs_credentials, total_count}`, without secret keys |
//! | UpdateSqsCredentials | `PATCH …/sqs-credentials/{id}` `{name, permissions}` (a `null` permission is kept) | 200 |
//! | DeleteSqsCredentials | `DELETE …/sqs-credentials/{id}` | 204; 404 `not_found` of `credentials` |
//!
//! A project other than the stand-in's is 403 `permissions_denied`; so is every call
//! while the product is denied ([`ScalewayServer::deny`](super::ScalewayServer::deny)
//! with [`ScalewayProduct::Queues`](super::ScalewayProduct::Queues)), in the recorded
//! shape (`insufficient permissions`). Credentials asked for in a region where Queues
//! is not activated are 412 `precondition_failed` (what Scaleway answers there is not
//! recorded). Missing permissions in a create are `false`.
//!
//! What the stand-in does not model: the delays the recordings show (credentials not
//! readable for a few seconds after they are made, `sqs-info` denied for a moment after a
//! project is made), the queues a deactivation deletes (they live in the SQS stand-in),
//! and the secret keys' checksum algorithm (an opaque digest here).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::State;
use super::wire::{Reply, Req, unknown_region};

/// The product's state: where Queues is activated, and the credentials made.
#[derive(Debug, Default)]
pub(crate) struct Mnq {
    /// The regions where Queues is activated for the project, with the time it was.
    activated: BTreeMap<String, String>,
    /// Credentials by id.
    credentials: BTreeMap<String, Credentials>,
    /// The `sqs_endpoint_url` answered; `None`: Scaleway's own for the region.
    pub(crate) endpoint: Option<String>,
    made: u64,
}

/// One set of credentials (its secret key is not kept: only its creation answers it).
#[derive(Debug, Clone)]
struct Credentials {
    id: String,
    name: String,
    region: String,
    project_id: String,
    access_key: String,
    secret_checksum: String,
    permissions: [bool; 3],
    created_at: String,
    updated_at: String,
}

const PERMISSIONS: [&str; 3] = ["can_publish", "can_receive", "can_manage"];

impl Credentials {
    fn to_json(&self, secret_key: &str) -> Value {
        let permissions: serde_json::Map<String, Value> = PERMISSIONS
            .iter()
            .zip(self.permissions)
            .map(|(name, on)| ((*name).to_owned(), json!(on)))
            .collect();
        json!({
            "id": self.id,
            "name": self.name,
            "project_id": self.project_id,
            "region": self.region,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "access_key": self.access_key,
            "secret_key": secret_key,
            "secret_checksum": self.secret_checksum,
            "permissions": permissions,
        })
    }
}

impl Mnq {
    /// Credentials made by another tool at `created_at` (RFC 3339), for tests of what a
    /// backend does with credentials it finds; their id.
    pub(crate) fn add(
        &mut self,
        id: String,
        region: &str,
        project: &str,
        name: &str,
        created_at: &str,
    ) -> String {
        self.made += 1;
        let credentials = Credentials {
            id: id.clone(),
            name: name.to_owned(),
            region: region.to_owned(),
            project_id: project.to_owned(),
            access_key: format!("SCWQ{:016X}", self.made * 7_919),
            secret_checksum: format!("{:040x}", u128::from(self.made) * 0x9E37_79B9_7F4A_7C15),
            permissions: [false, false, true],
            created_at: created_at.to_owned(),
            updated_at: created_at.to_owned(),
        };
        self.credentials.insert(id.clone(), credentials);
        id
    }

    /// The credentials that exist in `region`.
    pub(crate) fn listed(&self, region: &str) -> Vec<super::QueuesCredentials> {
        self.credentials
            .values()
            .filter(|c| c.region == region)
            .map(|c| super::QueuesCredentials {
                id: c.id.clone(),
                name: c.name.clone(),
                access_key: c.access_key.clone(),
            })
            .collect()
    }
}

/// Serves `req` if it is a Messaging and Queuing call.
pub(crate) fn route(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let rest = req.under("/mnq/v1beta1/regions")?;
    let (region, rest) = rest.split_first()?;
    if let Some(reply) = unknown_region(region) {
        return Some(reply);
    }
    Some(match (req.method, rest) {
        ("POST", ["activate-sqs"]) => activate(state, req, region),
        ("POST", ["deactivate-sqs"]) => deactivate(state, req, region),
        ("GET", ["sqs-info"]) => info(state, req, region),
        ("POST", ["sqs-credentials"]) => create(state, req, region),
        ("GET", ["sqs-credentials"]) => list(state, req, region),
        ("GET", ["sqs-credentials", id]) => get(state, region, id),
        ("PATCH", ["sqs-credentials", id]) => update(state, req, region, id),
        ("DELETE", ["sqs-credentials", id]) => delete(state, region, id),
        _ => return None,
    })
}

/// The project a request names (the body's `project_id`, else the query's), refused
/// when it is another than the stand-in's; the stand-in's when none is named.
fn project(state: &State, req: &Req<'_>) -> Result<String, Reply> {
    let named = req.str("project_id").or_else(|| req.param("project_id"));
    if let Some(refusal) = state.foreign_project(named) {
        return Err(refusal);
    }
    Ok(state.project.clone())
}

/// The SQS info of the project in `region`.
fn info_of(state: &State, region: &str, project: &str) -> Value {
    let endpoint = state
        .mnq
        .endpoint
        .clone()
        .unwrap_or_else(|| format!("https://sqs.mnq.{region}.scaleway.com"));
    let (status, at) = match state.mnq.activated.get(region) {
        Some(at) => ("enabled", json!(at)),
        None => ("disabled", Value::Null),
    };
    json!({
        "project_id": project,
        "region": region,
        "created_at": at,
        "updated_at": at,
        "status": status,
        "sqs_endpoint_url": endpoint,
    })
}

fn activate(state: &mut State, req: &Req<'_>, region: &str) -> Reply {
    let project = match project(state, req) {
        Ok(p) => p,
        Err(reply) => return reply,
    };
    if state.mnq.activated.contains_key(region) {
        return Reply::error(
            409,
            "already_exists",
            "resource already exists",
            json!({
                "help_message": "SQS is already enabled on this project",
                "resource": "MnqSQSNamespace",
                "resource_id": project,
            }),
        );
    }
    let now = state.timestamp();
    state.mnq.activated.insert(region.to_owned(), now);
    Reply::ok(info_of(state, region, &project))
}

fn deactivate(state: &mut State, req: &Req<'_>, region: &str) -> Reply {
    let project = match project(state, req) {
        Ok(p) => p,
        Err(reply) => return reply,
    };
    if state.mnq.activated.remove(region).is_none() {
        return Reply::not_found("MnqSQSNamespace", &project);
    }
    state.mnq.credentials.retain(|_, c| c.region != region);
    Reply::ok(info_of(state, region, &project))
}

fn info(state: &mut State, req: &Req<'_>, region: &str) -> Reply {
    match project(state, req) {
        Ok(project) => Reply::ok(info_of(state, region, &project)),
        Err(reply) => reply,
    }
}

/// The permissions a body gives, over `current`: a `null` or missing one is kept.
fn permissions_of(req: &Req<'_>, current: [bool; 3]) -> Result<[bool; 3], Reply> {
    let mut out = current;
    let Some(given) = req.body.get("permissions").filter(|p| !p.is_null()) else {
        return Ok(out);
    };
    for (slot, name) in out.iter_mut().zip(PERMISSIONS) {
        match given.get(name) {
            None | Some(Value::Null) => {}
            Some(Value::Bool(on)) => *slot = *on,
            Some(_) => return Err(Reply::invalid(name, "must be a boolean")),
        }
    }
    Ok(out)
}

fn create(state: &mut State, req: &Req<'_>, region: &str) -> Reply {
    let project = match project(state, req) {
        Ok(p) => p,
        Err(reply) => return reply,
    };
    if !state.mnq.activated.contains_key(region) {
        return Reply::precondition(
            "sqs_not_activated",
            "activate Queues' SQS API for the project first",
        );
    }
    let name = req.str("name").unwrap_or_default().to_owned();
    if name.is_empty() || name.len() > 100 {
        return Reply::invalid("name", "must be 1 to 100 characters");
    }
    let permissions = match permissions_of(req, [false; 3]) {
        Ok(p) => p,
        Err(reply) => return reply,
    };
    let (id, secret, now) = (state.new_id(), state.new_id(), state.timestamp());
    let id = state.mnq.add(id, region, &project, &name, &now);
    let made = state.mnq.credentials.get_mut(&id).expect("just added");
    made.permissions = permissions;
    Reply::ok(made.to_json(&secret))
}

fn list(state: &mut State, req: &Req<'_>, region: &str) -> Reply {
    let project = match project(state, req) {
        Ok(p) => p,
        Err(reply) => return reply,
    };
    let items = state
        .mnq
        .credentials
        .values()
        .filter(|c| c.region == region && c.project_id == project)
        .map(|c| c.to_json(""))
        .collect();
    Reply::page(req, "sqs_credentials", items)
}

fn get(state: &mut State, region: &str, id: &str) -> Reply {
    match state.mnq.credentials.get(id).filter(|c| c.region == region) {
        Some(c) => Reply::ok(c.to_json("")),
        None => Reply::not_found("credentials", id),
    }
}

fn update(state: &mut State, req: &Req<'_>, region: &str, id: &str) -> Reply {
    let now = state.timestamp();
    let Some(c) = state
        .mnq
        .credentials
        .get_mut(id)
        .filter(|c| c.region == region)
    else {
        return Reply::not_found("credentials", id);
    };
    match permissions_of(req, c.permissions) {
        Ok(p) => c.permissions = p,
        Err(reply) => return reply,
    }
    if let Some(name) = req.str("name").filter(|n| !n.is_empty()) {
        c.name = name.to_owned();
    }
    c.updated_at = now;
    Reply::ok(c.to_json(""))
}

fn delete(state: &mut State, region: &str, id: &str) -> Reply {
    let known = state
        .mnq
        .credentials
        .get(id)
        .is_some_and(|c| c.region == region);
    if !known {
        return Reply::not_found("credentials", id);
    }
    state.mnq.credentials.remove(id);
    Reply::no_content()
}
