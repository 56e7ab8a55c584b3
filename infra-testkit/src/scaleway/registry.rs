//! Container Registry (v1), from memory: namespaces under
//! `/registry/v1/regions/{region}/namespaces`.
//!
//! Served:
//!
//! | call | request |
//! |---|---|
//! | CreateNamespace | `POST …/namespaces` |
//! | GetNamespace | `GET …/namespaces/{id}` |
//! | UpdateNamespace | `PATCH …/namespaces/{id}` (`description`, `is_public`) |
//! | DeleteNamespace | `DELETE …/namespaces/{id}` (answers the namespace, `deleting`) |
//! | ListNamespaces | `GET …/namespaces?project_id&organization_id&name&page&page_size` |
//!
//! Rules enforced, as Scaleway documents them:
//! - the region is one of Scaleway's; a create names at most one of `project_id` and
//!   `organization_id` (the stand-in's project when neither), and one other than the
//!   stand-in's is 403; a listing filters on the ones given;
//! - a name is 1 to 63 lowercase letters, digits and `-`, neither starting nor ending
//!   with `-` (400); names are unique in a region across every organization, a namespace
//!   being deleted included: a second is 409 `already_exists` of resource `namespace`;
//! - a namespace is `ready` as soon as it is created, and its `endpoint` is
//!   `rg.{region}.scw.cloud/{name}`;
//! - a delete is asynchronous: the namespace answers `deleting` until the stand-in's
//!   settling time has passed on its clock, then is gone (404 with the bare message
//!   `{"message": "Namespace was not found"}` Scaleway answers, as for any unknown id,
//!   or an id of another region); a namespace being deleted refuses changes and a second delete with 409
//!   `transient_state`.
//!
//! What the stand-in does not model: images and tags (a namespace is always empty, its
//! `size` and `image_count` 0), the `locked` and `error` statuses, limits on the
//! description (Scaleway documents none), namespaces of other organizations holding a
//! name.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::State;
use super::wire::{Reply, Req, Settling, unknown_region};

/// The product's resources: namespaces by id.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    namespaces: BTreeMap<String, Namespace>,
}

/// One namespace.
#[derive(Debug)]
struct Namespace {
    id: String,
    region: String,
    name: String,
    description: String,
    project_id: String,
    organization_id: String,
    is_public: bool,
    created_at: String,
    updated_at: String,
    /// `ready`, or `deleting` until it is gone.
    status: Settling,
}

/// The settled status of a deleted namespace: gone.
const GONE: &str = "gone";

impl Namespace {
    fn to_json(&self, status: &str) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "organization_id": self.organization_id,
            "project_id": self.project_id,
            "status": status,
            "status_message": "",
            "endpoint": format!("rg.{}.scw.cloud/{}", self.region, self.name),
            "is_public": self.is_public,
            "size": 0,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "image_count": 0,
            "region": self.region,
        })
    }
}

/// Serves a request of the product, or `None` when the path is not one of its.
pub(crate) fn route(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let rest = req.under("/registry/v1/regions")?;
    let (&region, rest) = rest.split_first()?;
    if rest.first() != Some(&"namespaces") {
        return None;
    }
    if let Some(refused) = unknown_region(region) {
        return Some(refused);
    }
    let reply = match (req.method, &rest[1..]) {
        ("GET", []) => list(state, region, req),
        ("POST", []) => create(state, region, req),
        ("GET", [id]) => get(state, region, id),
        ("PATCH", [id]) => update(state, region, id, req),
        ("DELETE", [id]) => delete(state, region, id),
        _ => return None,
    };
    Some(reply)
}

/// Whether `name` is one Scaleway accepts.
fn valid_name(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Forgets the namespaces whose delete has completed.
fn sweep(state: &mut State) {
    state
        .registry
        .namespaces
        .retain(|_, n| n.status.status() != GONE);
}

/// The status of namespace `id` of `region` as a read sees it, or 404.
fn read(state: &mut State, region: &str, id: &str) -> Result<String, Reply> {
    let Some(namespace) = state
        .registry
        .namespaces
        .get_mut(id)
        .filter(|n| n.region == region)
    else {
        return Err(Reply::missing("namespace"));
    };
    let status = namespace.status.status();
    if status == GONE {
        sweep(state);
        return Err(Reply::missing("namespace"));
    }
    Ok(status.to_owned())
}

fn get(state: &mut State, region: &str, id: &str) -> Reply {
    match read(state, region, id) {
        Ok(status) => Reply::ok(state.registry.namespaces[id].to_json(&status)),
        Err(refused) => refused,
    }
}

/// `description` and `is_public` of a body, refused when of the wrong type.
fn settings(req: &Req<'_>) -> Result<(Option<String>, Option<bool>), Reply> {
    let description = match req.body.get("description") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) => Some(d.clone()),
        Some(_) => {
            return Err(Reply::invalid(
                "description",
                "description must be a string",
            ));
        }
    };
    let is_public = match req.body.get("is_public") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => return Err(Reply::invalid("is_public", "is_public must be a boolean")),
    };
    Ok((description, is_public))
}

fn create(state: &mut State, region: &str, req: &Req<'_>) -> Reply {
    let (project, organization) = (req.str("project_id"), req.str("organization_id"));
    if project.is_some() && organization.is_some() {
        return Reply::invalid(
            "project_id",
            "at most one of project_id and organization_id may be given",
        );
    }
    if let Some(refused) = state.foreign_project(project) {
        return refused;
    }
    if organization.is_some_and(|o| o != state.organization) {
        return Reply::denied("the organization cannot be reached with this key");
    }
    let name = req.str("name").unwrap_or_default();
    if !valid_name(name) {
        return Reply::invalid(
            "name",
            "a namespace name is 1 to 63 lowercase letters, digits and `-`, neither starting \
             nor ending with `-`",
        );
    }
    let (description, is_public) = match settings(req) {
        Ok(s) => s,
        Err(refused) => return refused,
    };
    sweep(state);
    let taken = state
        .registry
        .namespaces
        .values()
        .any(|n| n.region == region && n.name == name);
    if taken {
        return Reply::exists("namespace", name);
    }
    let id = state.new_id();
    let now = state.timestamp();
    let namespace = Namespace {
        id: id.clone(),
        region: region.to_owned(),
        name: name.to_owned(),
        description: description.unwrap_or_default(),
        project_id: state.project.clone(),
        organization_id: state.organization.clone(),
        is_public: is_public.unwrap_or(false),
        created_at: now.clone(),
        updated_at: now,
        status: Settling::settled("ready"),
    };
    let body = namespace.to_json("ready");
    state.registry.namespaces.insert(id, namespace);
    Reply::ok(body)
}

fn update(state: &mut State, region: &str, id: &str, req: &Req<'_>) -> Reply {
    let (description, is_public) = match settings(req) {
        Ok(s) => s,
        Err(refused) => return refused,
    };
    let status = match read(state, region, id) {
        Ok(status) => status,
        Err(refused) => return refused,
    };
    if status == "deleting" {
        return Reply::transient("namespace", id, "deleting");
    }
    let now = state.timestamp();
    let Some(namespace) = state.registry.namespaces.get_mut(id) else {
        return Reply::missing("namespace");
    };
    if let Some(description) = description {
        namespace.description = description;
    }
    if let Some(is_public) = is_public {
        namespace.is_public = is_public;
    }
    namespace.updated_at = now;
    Reply::ok(namespace.to_json(&status))
}

fn delete(state: &mut State, region: &str, id: &str) -> Reply {
    let status = match read(state, region, id) {
        Ok(status) => status,
        Err(refused) => return refused,
    };
    if status == "deleting" {
        return Reply::transient("namespace", id, "deleting");
    }
    let settle = state.settle();
    let Some(namespace) = state.registry.namespaces.get_mut(id) else {
        return Reply::missing("namespace");
    };
    namespace.status = settle.after("deleting", GONE);
    Reply::ok(namespace.to_json("deleting"))
}

fn list(state: &mut State, region: &str, req: &Req<'_>) -> Reply {
    let (project, organization) = (req.param("project_id"), req.param("organization_id"));
    if let Some(refused) = state.foreign_project(project) {
        return refused;
    }
    if organization.is_some_and(|o| o != state.organization) {
        return Reply::denied("the organization cannot be reached with this key");
    }
    sweep(state);
    let items = state
        .registry
        .namespaces
        .values()
        .filter(|n| n.region == region)
        .filter(|n| req.param("name").is_none_or(|name| name == n.name))
        .map(|n| n.to_json(n.status.status()))
        .collect();
    Reply::page(req, "namespaces", items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_registrys_rule() {
        for good in ["app", "web-images-2", "1app"] {
            assert!(valid_name(good), "{good}");
        }
        for bad in [
            "",
            "App",
            "app_images",
            "app.images",
            "-app",
            "app-",
            &"a".repeat(64),
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
