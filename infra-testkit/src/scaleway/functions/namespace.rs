//! Function namespaces: `…/namespaces` and `…/namespaces/{id}`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{
    GONE, apply_secrets, compact, description_of, env_of, missing, name_of, secrets_json,
    secrets_of, settling, tags_of,
};
use crate::scaleway::State;
use crate::scaleway::wire::{Reply, Req, Settling};

/// One namespace.
#[derive(Debug)]
pub(super) struct Namespace {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) region: String,
    description: String,
    env: BTreeMap<String, String>,
    secrets: BTreeMap<String, String>,
    tags: Vec<String>,
    pub(super) status: Settling,
    /// Its registry namespace, made once the namespace is first `ready`.
    registry: Settling,
    registry_id: String,
    created_at: String,
    updated_at: String,
}

impl Namespace {
    /// The namespace as answered, the status being the one the request sees.
    fn json(&self, state: &State, status: &str) -> Value {
        let registry = self.registry.status() == "ready";
        let endpoint = if registry {
            format!(
                "rg.{}.scw.cloud/funcscw{}{}",
                self.region,
                compact(&self.name),
                &self.id[..8]
            )
        } else {
            String::new()
        };
        json!({
            "id": self.id,
            "name": self.name,
            "organization_id": state.organization,
            "project_id": state.project,
            "region": self.region,
            "status": status,
            "description": self.description,
            "environment_variables": self.env,
            "secret_environment_variables": secrets_json(&self.secrets),
            "registry_endpoint": endpoint,
            "registry_namespace_id": if registry { self.registry_id.as_str() } else { "" },
            "tags": self.tags,
            "error_message": null,
            "vpc_integration_activated": false,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        })
    }
}

/// Serves `…/namespaces…` in `region`; `rest` is the path after `namespaces`.
pub(super) fn route(
    state: &mut State,
    req: &Req<'_>,
    region: &str,
    rest: &[&str],
) -> Option<Reply> {
    Some(match (req.method, rest) {
        ("GET", []) => list(state, req, region),
        ("POST", []) => create(state, req, region),
        ("GET", [id]) => get(state, region, id),
        ("PATCH", [id]) => update(state, req, region, id),
        ("DELETE", [id]) => delete(state, region, id),
        _ => return None,
    })
}

fn list(state: &mut State, req: &Req<'_>, region: &str) -> Reply {
    if let Some(refusal) = state.foreign_project(req.param("project_id")) {
        return refusal;
    }
    if req
        .param("organization_id")
        .is_some_and(|o| o != state.organization)
    {
        return Reply::denied("the organization cannot be reached with this key");
    }
    let name = req.param("name");
    let items: Vec<Value> = state
        .functions
        .namespaces
        .values()
        .filter(|n| n.region == region && name.is_none_or(|want| n.name.contains(want)))
        .map(|n| n.json(state, n.status.status()))
        .collect();
    Reply::page(req, "namespaces", items)
}

fn create(state: &mut State, req: &Req<'_>, region: &str) -> Reply {
    let project = req.str("project_id");
    if project.is_none() {
        return Reply::invalid("project_id", "is required");
    }
    if let Some(refusal) = state.foreign_project(project) {
        return refusal;
    }
    let parsed = (|| {
        Ok::<_, Reply>((
            name_of(req)?,
            description_of(req)?,
            env_of(req)?,
            secrets_of(req, false)?,
            tags_of(req)?,
        ))
    })();
    let (name, description, env, secrets, tags) = match parsed {
        Ok(p) => p,
        Err(refusal) => return refusal,
    };
    let taken = state
        .functions
        .namespaces
        .values()
        .any(|n| n.region == region && n.name == name);
    if taken {
        return Reply::exists("namespace", &name);
    }
    let id = state.new_id();
    let now = state.timestamp();
    let mut stored = BTreeMap::new();
    apply_secrets(
        &mut state.functions,
        &mut stored,
        secrets.unwrap_or_default(),
    );
    let namespace = Namespace {
        id: id.clone(),
        name,
        region: region.to_owned(),
        description: description.unwrap_or_default(),
        env: env.unwrap_or_default(),
        secrets: stored,
        tags: tags.unwrap_or_default(),
        status: settling(state, "pending", "ready"),
        registry: settling(state, "pending", "ready"),
        registry_id: state.new_id(),
        created_at: now.clone(),
        updated_at: now,
    };
    let body = namespace.json(state, namespace.status.status());
    state.functions.namespaces.insert(id, namespace);
    Reply::ok(body)
}

/// A read of namespace `id` in `region`; a deleted one is removed (with its functions)
/// once its deletion has settled.
fn get(state: &mut State, region: &str, id: &str) -> Reply {
    let functions = &mut state.functions;
    let Some(namespace) = functions
        .namespaces
        .get_mut(id)
        .filter(|n| n.region == region)
    else {
        return missing("namespace", id);
    };
    let seen = namespace.status.status();
    if seen == GONE {
        functions.namespaces.remove(id);
        functions.functions.retain(|_, f| f.namespace_id != id);
        return missing("namespace", id);
    }
    let body = state.functions.namespaces[id].json(state, seen);
    Reply::ok(body)
}

/// The namespace `id` of `region`, if it is there and not busy.
fn writable<'s>(state: &'s mut State, region: &str, id: &str) -> Result<&'s mut Namespace, Reply> {
    let namespace = state
        .functions
        .namespaces
        .get_mut(id)
        .filter(|n| n.region == region)
        .ok_or_else(|| missing("namespace", id))?;
    if namespace.status.busy() {
        return Err(Reply::transient("namespace", id, namespace.status.status()));
    }
    Ok(namespace)
}

fn update(state: &mut State, req: &Req<'_>, region: &str, id: &str) -> Reply {
    if let Err(refusal) = writable(state, region, id) {
        return refusal;
    }
    let parsed = (|| {
        Ok::<_, Reply>((
            description_of(req)?,
            env_of(req)?,
            secrets_of(req, true)?,
            tags_of(req)?,
        ))
    })();
    let (description, env, secrets, tags) = match parsed {
        Ok(p) => p,
        Err(refusal) => return refusal,
    };
    let now = state.timestamp();
    let status = settling(state, "pending", "ready");
    let mut stored = match state.functions.namespaces.get_mut(id) {
        Some(namespace) => std::mem::take(&mut namespace.secrets),
        None => return missing("namespace", id),
    };
    apply_secrets(
        &mut state.functions,
        &mut stored,
        secrets.unwrap_or_default(),
    );
    let Some(namespace) = state.functions.namespaces.get_mut(id) else {
        return missing("namespace", id);
    };
    namespace.secrets = stored;
    if let Some(d) = description {
        namespace.description = d;
    }
    if let Some(e) = env {
        namespace.env = e;
    }
    if let Some(t) = tags {
        namespace.tags = t;
    }
    namespace.updated_at = now;
    namespace.status = status;
    let namespace = &state.functions.namespaces[id];
    let body = namespace.json(state, namespace.status.status());
    Reply::ok(body)
}

/// `DELETE`: the namespace and its functions are `deleting`, and gone once the
/// stand-in's settling time has passed.
fn delete(state: &mut State, region: &str, id: &str) -> Reply {
    if let Err(refusal) = writable(state, region, id) {
        return refusal;
    }
    let settle = state.settle();
    let now = state.timestamp();
    for function in state
        .functions
        .functions
        .values_mut()
        .filter(|f| f.namespace_id == id)
    {
        function.status = settle.after("deleting", GONE);
    }
    let Some(namespace) = state.functions.namespaces.get_mut(id) else {
        return missing("namespace", id);
    };
    namespace.status = settle.after("deleting", GONE);
    namespace.updated_at = now;
    let namespace = &state.functions.namespaces[id];
    let body = namespace.json(state, "deleting");
    Reply::ok(body)
}
