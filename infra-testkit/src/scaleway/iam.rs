//! IAM (`/iam/v1alpha1`), from memory: applications, policies and their rules, and a
//! short list of real permission sets.
//!
//! As Scaleway documents it: IAM is global (no region in the paths); every listing and
//! every create names the organization (`organization_id`), and an organization that is
//! not the stand-in's answers 403 `permissions_denied`. Names are 1 to 64 characters of
//! `[a-zA-Z0-9()._- ]`, descriptions at most 200 characters, tags strings of
//! `[a-zA-Z0-9._-/=+@ ]`; names may repeat. A policy has at most one principal (an
//! application here, or `no_principal`; users and groups are not served, and naming one
//! answers `not_found`); an unknown application is 404 `not_found` of resource
//! `application`. A rule names permission sets IAM knows, all of one scope type, and is
//! scoped to projects (the stand-in's only) for `projects` sets or to the organization
//! for `organization` sets; anything else is `invalid_arguments`. `PUT /rules` replaces
//! a policy's rules. Deleting an application deletes neither its policies nor their
//! rules: they stay, without a principal (`no_principal`). Listings are paged (at most
//! 100 a page); `DELETE` answers 204.

use serde_json::{Value, json};

use super::State;
use super::wire::{Reply, Req};

/// The permission sets the stand-in knows: real names, with their scope.
const PERMISSION_SETS: &[(&str, &str)] = &[
    ("AllProductsFullAccess", "projects"),
    ("ContainerRegistryFullAccess", "projects"),
    ("ContainerRegistryReadOnly", "projects"),
    ("ContainersFullAccess", "projects"),
    ("FunctionsFullAccess", "projects"),
    ("IAMManager", "organization"),
    ("IAMReadOnly", "organization"),
    ("ObjectStorageFullAccess", "projects"),
    ("ObjectStorageReadOnly", "projects"),
    ("ProjectManager", "organization"),
    ("RelationalDatabasesFullAccess", "projects"),
    ("SecretManagerFullAccess", "projects"),
    ("SecretManagerReadOnly", "projects"),
];

/// The most characters of a name.
const MAX_NAME: usize = 64;
/// The most characters of a description.
const MAX_DESCRIPTION: usize = 200;
/// The most characters of a rule's condition.
const MAX_CONDITION: usize = 2048;
/// The largest page.
const MAX_PAGE_SIZE: usize = 100;

/// The product's resources.
#[derive(Debug, Default)]
pub(crate) struct Iam {
    applications: Vec<Application>,
    policies: Vec<Policy>,
}

#[derive(Debug, Clone)]
struct Application {
    id: String,
    name: String,
    description: String,
    tags: Vec<String>,
    created_at: String,
    updated_at: String,
}

#[derive(Debug, Clone)]
struct Policy {
    id: String,
    name: String,
    description: String,
    tags: Vec<String>,
    /// The application it is attached to; `None`: no principal.
    application_id: Option<String>,
    rules: Vec<Rule>,
    created_at: String,
    updated_at: String,
}

#[derive(Debug, Clone)]
struct Rule {
    id: String,
    permission_set_names: Vec<String>,
    scope_type: &'static str,
    /// The projects it is scoped to; empty: the organization.
    project_ids: Vec<String>,
    organization_id: Option<String>,
    condition: String,
}

/// Serves a request of the product, or `None` when the path is not one of its.
pub(crate) fn route(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let rest = req.under("/iam/v1alpha1")?;
    let reply = match (req.method, rest.as_slice()) {
        ("GET", ["applications"]) => list_applications(state, req),
        ("POST", ["applications"]) => create_application(state, req),
        ("GET", ["applications", id]) => application(state, id).map(|a| Reply::ok(a.json(state))),
        ("PATCH", ["applications", id]) => update_application(state, req, id),
        ("DELETE", ["applications", id]) => delete_application(state, id),
        ("GET", ["policies"]) => list_policies(state, req),
        ("POST", ["policies"]) => create_policy(state, req),
        ("GET", ["policies", id]) => policy(state, id).map(|p| Reply::ok(p.json(state))),
        ("PATCH", ["policies", id]) => update_policy(state, req, id),
        ("DELETE", ["policies", id]) => delete_policy(state, id),
        ("GET", ["rules"]) => list_rules(state, req),
        ("PUT", ["rules"]) => set_rules(state, req),
        ("GET", ["permission-sets"]) => list_permission_sets(state, req),
        _ => return None,
    };
    Some(reply.unwrap_or_else(|refusal| refusal))
}

impl Application {
    fn json(&self, state: &State) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "organization_id": state.organization,
            "editable": true,
            "deletable": true,
            "managed": false,
            "nb_api_keys": 0,
            "tags": self.tags,
        })
    }
}

impl Policy {
    fn json(&self, state: &State) -> Value {
        let sets: std::collections::BTreeSet<&String> = self
            .rules
            .iter()
            .flat_map(|r| &r.permission_set_names)
            .collect();
        let scopes: usize = self.rules.iter().map(|r| r.project_ids.len().max(1)).sum();
        let mut body = json!({
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "organization_id": state.organization,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "editable": true,
            "deletable": true,
            "managed": false,
            "nb_rules": self.rules.len(),
            "nb_scopes": scopes,
            "nb_permission_sets": sets.len(),
            "tags": self.tags,
        });
        match &self.application_id {
            Some(app) => body["application_id"] = json!(app),
            None => body["no_principal"] = json!(true),
        }
        body
    }
}

impl Rule {
    fn json(&self) -> Value {
        let mut body = json!({
            "id": self.id,
            "permission_set_names": self.permission_set_names,
            "permission_sets_scope_type": self.scope_type,
            "condition": self.condition,
        });
        match &self.organization_id {
            Some(org) => body["organization_id"] = json!(org),
            None => body["project_ids"] = json!(self.project_ids),
        }
        body
    }
}

/// Whether `id` has a UUID's shape (Scaleway refuses anything else before looking).
fn uuid_like(id: &str) -> bool {
    id.len() == 36
        && id.char_indices().all(|(i, c)| {
            matches!(i, 8 | 13 | 18 | 23) == (c == '-') && (c == '-' || c.is_ascii_hexdigit())
        })
}

fn check_id(argument: &str, id: &str) -> Result<(), Reply> {
    if uuid_like(id) {
        Ok(())
    } else {
        Err(Reply::invalid(argument, "must be a UUID"))
    }
}

fn application<'s>(state: &'s State, id: &str) -> Result<&'s Application, Reply> {
    check_id("application_id", id)?;
    state
        .iam
        .applications
        .iter()
        .find(|a| a.id == id)
        .ok_or_else(|| Reply::not_found("application", id))
}

fn policy<'s>(state: &'s State, id: &str) -> Result<&'s Policy, Reply> {
    check_id("policy_id", id)?;
    state
        .iam
        .policies
        .iter()
        .find(|p| p.id == id)
        .ok_or_else(|| Reply::not_found("policy", id))
}

/// The refusal of an organization that is missing or not the stand-in's.
fn check_organization(state: &State, given: Option<&str>) -> Result<(), Reply> {
    match given {
        None => Err(Reply::invalid("organization_id", "is required")),
        Some(org) if org != state.organization => Err(Reply::denied(format!(
            "the organization {org} cannot be reached with this key"
        ))),
        Some(_) => Ok(()),
    }
}

fn check_name(name: Option<&str>) -> Result<String, Reply> {
    let name = name.ok_or_else(|| Reply::invalid("name", "is required"))?;
    let fits = (1..=MAX_NAME).contains(&name.chars().count())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "()._- ".contains(c));
    if fits {
        Ok(name.to_owned())
    } else {
        Err(Reply::invalid(
            "name",
            "value does not match regex pattern ^[a-zA-Z0-9\\(\\)\\._\\- ]+$ or is not 1 to 64 characters",
        ))
    }
}

fn check_description(description: Option<&Value>) -> Result<Option<String>, Reply> {
    match description {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(d)) if d.chars().count() <= MAX_DESCRIPTION => Ok(Some(d.clone())),
        Some(_) => Err(Reply::invalid(
            "description",
            "must be a string of at most 200 characters",
        )),
    }
}

fn check_tags(tags: Option<&Value>) -> Result<Option<Vec<String>>, Reply> {
    let Some(tags) = tags.filter(|t| !t.is_null()) else {
        return Ok(None);
    };
    let strings: Option<Vec<String>> = tags
        .as_array()
        .and_then(|all| all.iter().map(|t| t.as_str().map(str::to_owned)).collect());
    let strings = strings.ok_or_else(|| Reply::invalid("tags", "must be a list of strings"))?;
    for (i, tag) in strings.iter().enumerate() {
        let fits = !tag.is_empty()
            && tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-/=+@ ".contains(c));
        if !fits {
            return Err(Reply::invalid(
                &format!("tags[{i}]"),
                "value does not match regex pattern ^[a-zA-Z0-9._\\-/=+@ ]+$",
            ));
        }
    }
    Ok(Some(strings))
}

/// A listing page, refusing a page Scaleway would refuse.
fn paged(req: &Req<'_>, field: &str, items: Vec<Value>) -> Result<Reply, Reply> {
    let (page, size) = req.page();
    if size > MAX_PAGE_SIZE {
        return Err(Reply::invalid("page_size", "must be at most 100"));
    }
    if page > 10_000 {
        return Err(Reply::invalid("page", "must be at most 10000"));
    }
    Ok(Reply::page(req, field, items))
}

fn list_applications(state: &mut State, req: &Req<'_>) -> Result<Reply, Reply> {
    check_organization(state, req.param("organization_id"))?;
    // A query's `+` is a space (IAM names hold no `+`).
    let name = req.param("name").map(|n| n.replace('+', " "));
    let items = state
        .iam
        .applications
        .iter()
        .filter(|a| name.as_ref().is_none_or(|n| a.name.contains(n.as_str())))
        .filter(|a| {
            req.param("application_ids")
                .is_none_or(|ids| ids.split(',').any(|id| id == a.id))
        })
        .filter(|a| {
            req.param("tag")
                .is_none_or(|t| a.tags.iter().any(|x| x == t))
        })
        .map(|a| a.json(state))
        .collect();
    paged(req, "applications", items)
}

fn create_application(state: &mut State, req: &Req<'_>) -> Result<Reply, Reply> {
    check_organization(state, req.str("organization_id"))?;
    let name = check_name(req.str("name"))?;
    let description = check_description(req.body.get("description"))?.unwrap_or_default();
    let tags = check_tags(req.body.get("tags"))?.unwrap_or_default();
    let now = state.timestamp();
    let app = Application {
        id: state.new_id(),
        name,
        description,
        tags,
        created_at: now.clone(),
        updated_at: now,
    };
    let body = app.json(state);
    state.iam.applications.push(app);
    Ok(Reply::ok(body))
}

fn update_application(state: &mut State, req: &Req<'_>, id: &str) -> Result<Reply, Reply> {
    application(state, id)?;
    let name = match req.body.get("name").filter(|v| !v.is_null()) {
        Some(v) => Some(check_name(v.as_str())?),
        None => None,
    };
    let description = check_description(req.body.get("description"))?;
    let tags = check_tags(req.body.get("tags"))?;
    let now = state.timestamp();
    let app = state
        .iam
        .applications
        .iter_mut()
        .find(|a| a.id == id)
        .ok_or_else(|| Reply::not_found("application", id))?;
    if let Some(name) = name {
        app.name = name;
    }
    if let Some(description) = description {
        app.description = description;
    }
    if let Some(tags) = tags {
        app.tags = tags;
    }
    app.updated_at = now;
    let app = app.clone();
    Ok(Reply::ok(app.json(state)))
}

fn delete_application(state: &mut State, id: &str) -> Result<Reply, Reply> {
    application(state, id)?;
    state.iam.applications.retain(|a| a.id != id);
    // Its policies stay, without a principal.
    for policy in &mut state.iam.policies {
        if policy.application_id.as_deref() == Some(id) {
            policy.application_id = None;
        }
    }
    Ok(Reply::no_content())
}

/// The application a policy request names (its principal), refusing more than one
/// principal, none, or one the stand-in does not have.
fn principal(state: &State, body: &Value) -> Result<Option<String>, Reply> {
    let given: Vec<&str> = ["user_id", "group_id", "application_id", "no_principal"]
        .into_iter()
        .filter(|k| body.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    match given.as_slice() {
        [] => Err(Reply::invalid(
            "principal",
            "one of user_id, group_id, application_id or no_principal is required",
        )),
        ["application_id"] => {
            let id = body["application_id"].as_str().unwrap_or("");
            application(state, id).map(|a| Some(a.id.clone()))
        }
        ["no_principal"] => Ok(None),
        ["user_id"] => Err(Reply::not_found(
            "user",
            body["user_id"].as_str().unwrap_or(""),
        )),
        ["group_id"] => Err(Reply::not_found(
            "group",
            body["group_id"].as_str().unwrap_or(""),
        )),
        _ => Err(Reply::invalid(
            "principal",
            "at most one of user_id, group_id, application_id, no_principal may be given",
        )),
    }
}

/// The rules of a request, checked as IAM checks them.
fn rules(state: &mut State, value: Option<&Value>) -> Result<Vec<Rule>, Reply> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let specs = value
        .as_array()
        .ok_or_else(|| Reply::invalid("rules", "must be a list"))?;
    let mut out = Vec::new();
    for spec in specs {
        let rule = one_rule(state, spec)?;
        out.push(rule);
    }
    Ok(out)
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The one scope type of a rule's permission sets, refusing unknown sets and mixed
/// scope types.
fn scope_of(names: &[String]) -> Result<&'static str, Reply> {
    let mut scope = None;
    for name in names {
        let Some((_, theirs)) = PERMISSION_SETS.iter().find(|(n, _)| n == name) else {
            return Err(Reply::invalid(
                "rules.permission_set_names",
                format!("unknown permission set {name}"),
            ));
        };
        if scope.is_some_and(|s| s != *theirs) {
            return Err(Reply::invalid(
                "rules.permission_set_names",
                "permission sets must be of the same scope type",
            ));
        }
        scope = Some(*theirs);
    }
    scope.ok_or_else(|| {
        Reply::invalid(
            "rules.permission_set_names",
            "at least one permission set is required",
        )
    })
}

/// A rule's scope (its projects, or its organization), checked against the scope type
/// of its permission sets and against what exists.
fn rule_scope(
    state: &State,
    spec: &Value,
    scope: &str,
) -> Result<(Vec<String>, Option<String>), Reply> {
    let projects = spec.get("project_ids").filter(|v| !v.is_null());
    let org = spec.get("organization_id").and_then(Value::as_str);
    match (projects, org, scope) {
        (Some(p), None, "projects") => {
            let ids = strings(Some(p));
            if ids.is_empty() {
                return Err(Reply::invalid("rules.project_ids", "at least one project"));
            }
            if let Some(refusal) = ids.iter().find_map(|id| state.foreign_project(Some(id))) {
                return Err(refusal);
            }
            Ok((ids, None))
        }
        (None, Some(o), "organization") => {
            check_organization(state, Some(o))?;
            Ok((Vec::new(), Some(o.to_owned())))
        }
        (Some(_), Some(_), _) | (None, None, _) => Err(Reply::invalid(
            "rules.scope",
            "exactly one of project_ids or organization_id is required",
        )),
        _ => Err(Reply::invalid(
            "rules.scope",
            format!("permission sets of scope type {scope} cannot be given this scope"),
        )),
    }
}

fn one_rule(state: &mut State, spec: &Value) -> Result<Rule, Reply> {
    let names = strings(spec.get("permission_set_names"));
    let scope = scope_of(&names)?;
    let condition = spec.get("condition").and_then(Value::as_str).unwrap_or("");
    if condition.chars().count() > MAX_CONDITION {
        return Err(Reply::invalid("rules.condition", "at most 2048 characters"));
    }
    let (project_ids, organization_id) = rule_scope(state, spec, scope)?;
    Ok(Rule {
        id: state.new_id(),
        permission_set_names: names,
        scope_type: scope,
        project_ids,
        organization_id,
        condition: condition.to_owned(),
    })
}

fn list_policies(state: &mut State, req: &Req<'_>) -> Result<Reply, Reply> {
    check_organization(state, req.param("organization_id"))?;
    let no_principal = req.param("no_principal").map(|v| v == "true");
    let items = state
        .iam
        .policies
        .iter()
        .filter(|p| {
            req.param("application_ids").is_none_or(|ids| {
                ids.split(',')
                    .any(|id| p.application_id.as_deref() == Some(id))
            })
        })
        .filter(|p| {
            req.param("policy_ids")
                .is_none_or(|ids| ids.split(',').any(|id| id == p.id))
        })
        .filter(|p| req.param("policy_name").is_none_or(|n| p.name.contains(n)))
        .filter(|p| {
            req.param("tag")
                .is_none_or(|t| p.tags.iter().any(|x| x == t))
        })
        .filter(|p| no_principal.is_none_or(|n| n == p.application_id.is_none()))
        .map(|p| p.json(state))
        .collect();
    paged(req, "policies", items)
}

fn create_policy(state: &mut State, req: &Req<'_>) -> Result<Reply, Reply> {
    check_organization(state, req.str("organization_id"))?;
    let name = check_name(req.str("name"))?;
    let description = check_description(req.body.get("description"))?.unwrap_or_default();
    let tags = check_tags(req.body.get("tags"))?.unwrap_or_default();
    let application_id = principal(state, req.body)?;
    let rules = rules(state, req.body.get("rules"))?;
    let now = state.timestamp();
    let policy = Policy {
        id: state.new_id(),
        name,
        description,
        tags,
        application_id,
        rules,
        created_at: now.clone(),
        updated_at: now,
    };
    let body = policy.json(state);
    state.iam.policies.push(policy);
    Ok(Reply::ok(body))
}

fn update_policy(state: &mut State, req: &Req<'_>, id: &str) -> Result<Reply, Reply> {
    policy(state, id)?;
    let name = match req.body.get("name").filter(|v| !v.is_null()) {
        Some(v) => Some(check_name(v.as_str())?),
        None => None,
    };
    let description = check_description(req.body.get("description"))?;
    let tags = check_tags(req.body.get("tags"))?;
    let names_principal = ["user_id", "group_id", "application_id", "no_principal"]
        .iter()
        .any(|k| req.body.get(*k).is_some_and(|v| !v.is_null()));
    let attach = if names_principal {
        Some(principal(state, req.body)?)
    } else {
        None
    };
    let now = state.timestamp();
    let policy = state
        .iam
        .policies
        .iter_mut()
        .find(|p| p.id == id)
        .ok_or_else(|| Reply::not_found("policy", id))?;
    if let Some(name) = name {
        policy.name = name;
    }
    if let Some(description) = description {
        policy.description = description;
    }
    if let Some(tags) = tags {
        policy.tags = tags;
    }
    if let Some(attach) = attach {
        policy.application_id = attach;
    }
    policy.updated_at = now;
    let policy = policy.clone();
    Ok(Reply::ok(policy.json(state)))
}

fn delete_policy(state: &mut State, id: &str) -> Result<Reply, Reply> {
    policy(state, id)?;
    state.iam.policies.retain(|p| p.id != id);
    Ok(Reply::no_content())
}

fn list_rules(state: &mut State, req: &Req<'_>) -> Result<Reply, Reply> {
    let id = req
        .param("policy_id")
        .ok_or_else(|| Reply::invalid("policy_id", "is required"))?;
    let items = policy(state, id)?.rules.iter().map(Rule::json).collect();
    paged(req, "rules", items)
}

fn set_rules(state: &mut State, req: &Req<'_>) -> Result<Reply, Reply> {
    let id = req
        .str("policy_id")
        .ok_or_else(|| Reply::invalid("policy_id", "is required"))?
        .to_owned();
    policy(state, &id)?;
    if req.body.get("rules").is_none_or(Value::is_null) {
        return Err(Reply::invalid("rules", "is required"));
    }
    let rules = rules(state, req.body.get("rules"))?;
    let now = state.timestamp();
    let policy = state
        .iam
        .policies
        .iter_mut()
        .find(|p| p.id == id)
        .ok_or_else(|| Reply::not_found("policy", &id))?;
    policy.rules = rules;
    policy.updated_at = now;
    let answered: Vec<Value> = policy.rules.iter().map(Rule::json).collect();
    Ok(Reply::ok(json!({ "rules": answered })))
}

fn list_permission_sets(state: &mut State, req: &Req<'_>) -> Result<Reply, Reply> {
    check_organization(state, req.param("organization_id"))?;
    let items = PERMISSION_SETS
        .iter()
        .enumerate()
        .map(|(i, (name, scope))| {
            json!({
                "id": format!("{:08x}-0000-4000-8000-000000005e70", i + 1),
                "name": name,
                "scope_type": scope,
                "description": format!("{name}, as Scaleway names it"),
                "categories": [],
            })
        })
        .collect();
    paged(req, "permission_sets", items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_uuids_and_names_tags_follow_the_documented_patterns() {
        assert!(uuid_like("0000002a-5ca1-4e00-8000-000000000007"));
        assert!(!uuid_like("0000002a5ca14e008000000000000007"));
        assert!(!uuid_like("../policies"));
        assert!(check_name(Some("My app (v2)")).is_ok());
        assert!(check_name(Some("a/b")).is_err());
        assert!(check_name(None).is_err());
        assert!(check_tags(Some(&json!(["managed-by-infra=shop", "a@b+c/d"]))).is_ok());
        assert!(check_tags(Some(&json!(["env:prod"]))).is_err());
        assert!(check_description(Some(&json!("d".repeat(201)))).is_err());
    }
}
