//! The IAM policies of single resources: Cloud Run services
//! (`/v2/projects/{p}/locations/{l}/services/{s}:getIamPolicy`, `:setIamPolicy`) and
//! Pub/Sub topics and subscriptions (`/v1/projects/{p}/topics/{t}:getIamPolicy`, …),
//! as `google-cloud-run-v2`'s `Services` and `google-cloud-pubsub`'s `SchemaService`
//! call them (`GET …:getIamPolicy?options.requestedPolicyVersion=3`, `POST
//! …:setIamPolicy` with `{"policy"}`).
//!
//! A policy behaves as the project's does (`iam.rs`): a real etag, new on every write,
//! and a write carrying another etag refused with 409 `ABORTED`; bindings merged by
//! role and condition; members checked (`allUsers` and `allAuthenticatedUsers` may hold
//! roles on a resource). A resource with no policy written answers an empty one. A
//! resource that does not exist answers 404; a resource deleted and made again under
//! the same name starts with an empty policy, as a new resource does.
//!
//! Fault: [`GcpServer::deny_policy_writes`](super::GcpServer::deny_policy_writes)
//! answers every `setIamPolicy` of a resource 403, as Google does to a caller without
//! `…setIamPolicy`.

use std::collections::BTreeMap;

use super::State;
use super::iam::{Policy, set_policy};
use super::wire::{Reply, Req};

/// The policies written, by resource name.
#[derive(Debug, Default)]
pub(crate) struct Policies {
    /// Each resource's policy, with the identity of the resource it was written on.
    by_resource: BTreeMap<String, (String, Policy)>,
    /// Whether every `setIamPolicy` is refused.
    pub(crate) deny_writes: bool,
}

/// The resource and the verb of a policy call, when `req` is one.
fn policy_call<'r>(req: &'r Req<'_>) -> Option<(String, &'r str)> {
    let path = req.path;
    let (resource, verb) = path.rsplit_once(':')?;
    if !matches!(verb, "getIamPolicy" | "setIamPolicy") {
        return None;
    }
    let resource = resource
        .strip_prefix("/v2/")
        .filter(|r| r.contains("/services/"))
        .or_else(|| {
            resource
                .strip_prefix("/v1/")
                .filter(|r| r.contains("/topics/") || r.contains("/subscriptions/"))
        })?;
    Some((resource.to_owned(), verb))
}

/// The identity of the resource `name` (its creation), if it exists.
fn identity(state: &State, name: &str) -> Option<String> {
    if name.contains("/services/") {
        state.run.identity(name)
    } else {
        state.pubsub.identity(name)
    }
}

/// Serves a resource policy call, or `None` when `req` is not one.
pub(crate) fn route(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let (resource, verb) = policy_call(req)?;
    let project = resource.split('/').nth(1).unwrap_or("");
    if !state.is_project(project) {
        return Some(State::foreign_project(project));
    }
    let Some(id) = identity(state, &resource) else {
        return Some(Reply::not_found(format!("Resource {resource}")));
    };
    let current = match state.policies.by_resource.get(&resource) {
        Some((of, policy)) if *of == id => policy.clone(),
        _ => Policy::empty(&mut state.iam),
    };
    Some(match (req.method, verb) {
        ("GET", "getIamPolicy") => {
            state
                .policies
                .by_resource
                .insert(resource, (id, current.clone()));
            Reply::ok(current.json())
        }
        ("POST", "setIamPolicy") if state.policies.deny_writes => Reply::denied(format!(
            "Permission denied on resource {resource} (or it may not exist): the caller may not \
             set its IAM policy (a fault armed on the stand-in)"
        )),
        ("POST", "setIamPolicy") => match set_policy(state, &current, req.body, false) {
            Ok(policy) => {
                let answer = policy.json();
                state.policies.by_resource.insert(resource, (id, policy));
                Reply::ok(answer)
            }
            Err(refused) => refused,
        },
        _ => return None,
    })
}

/// The bindings of `resource`'s policy, `(role, members)`; empty when none was written.
pub(crate) fn bindings_of(state: &State, resource: &str) -> Vec<(String, Vec<String>)> {
    match (
        state.policies.by_resource.get(resource),
        identity(state, resource),
    ) {
        (Some((of, policy)), Some(id)) if *of == id => policy.bindings(),
        _ => Vec::new(),
    }
}
