//! The IAM stand-in: service accounts (`/v1/projects/{p}/serviceAccounts…`, with their
//! own IAM policies) and the project's IAM policy (`/v3/projects/{p}:getIamPolicy` and
//! `:setIamPolicy`), as the official `google-cloud-iam-admin-v1` and
//! `google-cloud-resourcemanager-v3` clients call them.
//!
//! Served:
//! - `POST /v1/projects/{p}/serviceAccounts` `{accountId, serviceAccount: {displayName,
//!   description}}`: the email is `{accountId}@{p}.iam.gserviceaccount.com`; `name`,
//!   `projectId`, `uniqueId` (21 digits), `email`, `etag` and `oauth2ClientId` (the
//!   unique id, as IAM answers) are filled in.
//! - `GET /v1/projects/{p}/serviceAccounts?pageSize&pageToken`: ordered by email, 20 a
//!   page by default, at most 100; `nextPageToken` while more remain.
//! - `GET`, `PATCH` (`{serviceAccount, updateMask}`) and `DELETE` of
//!   `/v1/projects/{p|-}/serviceAccounts/{email|uniqueId}`.
//! - `POST …/serviceAccounts/{id}:getIamPolicy` and `:setIamPolicy`: the account's own
//!   policy.
//! - `POST /v3/projects/{p}:getIamPolicy` and `:setIamPolicy`: the project's policy,
//!   which starts with one binding (`roles/owner` to `user:owner@example.com`), as a
//!   project has an owner.
//!
//! The rules enforced, as IAM and Resource Manager do:
//! - An account id is 6 to 30 characters matching `[a-z]([-a-z0-9]*[a-z0-9])` (400); a
//!   display name at most 100 bytes, a description at most 256 (400); an id taken is
//!   409 `ALREADY_EXISTS`; a missing account is 404 `NOT_FOUND` ("Unknown service
//!   account"), for every call naming it (its policy's included).
//! - `PATCH` needs an `updateMask` naming only `displayName` and `description` (400).
//! - Any project but the configured one (or `-` where an account is named) is 403
//!   `PERMISSION_DENIED`.
//! - A policy has a real etag (bytes, so base64 in JSON) that changes on every
//!   successful `setIamPolicy`. A `setIamPolicy` carrying an etag that is not the
//!   current one is refused with 409 `ABORTED` (someone changed the policy meanwhile);
//!   one without an etag overwrites.
//! - A binding's role is `roles/…`, `projects/{p}/roles/…` or
//!   `organizations/{o}/roles/…` (400); on the project policy, a custom role of
//!   another project is not in the resource's hierarchy (400). A member is `user:`,
//!   `group:` or `serviceAccount:` and an email, `domain:`, `principal://…`,
//!   `principalSet://…`, `deleted:…` (as policies answer them, so that a read policy
//!   can be written back), or `allUsers`/`allAuthenticatedUsers` (refused on the
//!   project policy); anything else is 400. A `serviceAccount:` member of this
//!   project's domain (`…@{p}.iam.gserviceaccount.com`) that does not exist is refused
//!   (400 "Service account … does not exist."), as IAM does.
//! - A condition needs policy version 3 (400). Bindings without members are dropped;
//!   unconditional bindings of one role are merged; a member is listed once.
//! - Deleting an account leaves its bindings where they were, the member rewritten
//!   `deleted:serviceAccount:{email}?uid={uniqueId}` (in the project's policy and in
//!   every account's), as IAM does; the project policy's etag changes then.
//!
//! Not modelled: which predefined roles exist (any well-formed `roles/…` is accepted),
//! which roles a service account's own policy accepts, whether a `user:` or `group:`
//! member is a real Google account, policy versions below 3 hiding conditions,
//! undeleting an account, keys, and the eventual consistency of IAM (the shared `lag`
//! fault stands in for it).

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value, json};

use super::State;
use super::wire::{Enums, Reply, Req, int64};

/// The enumerations of IAM policies (`AuditLogConfig.LogType`).
pub(crate) const ENUMS: Enums = Enums(&[(
    "logType",
    &[
        ("LOG_TYPE_UNSPECIFIED", 0),
        ("ADMIN_READ", 1),
        ("DATA_WRITE", 2),
        ("DATA_READ", 3),
    ],
)]);

/// The deprecated `etag` every account carries, as IAM answers it.
const ACCOUNT_ETAG: &str = "MDEwMjE5MjA=";

/// An IAM policy as stored.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    version: i64,
    bindings: Vec<Value>,
    audit_configs: Option<Value>,
    etag: String,
}

impl Policy {
    /// A policy with no bindings, and a fresh etag from `iam`.
    pub(crate) fn empty(iam: &mut Iam) -> Policy {
        Policy {
            version: 1,
            bindings: Vec::new(),
            audit_configs: None,
            etag: iam.etag(),
        }
    }

    /// The bindings, as `(role, members)` of each.
    pub(crate) fn bindings(&self) -> Vec<(String, Vec<String>)> {
        self.bindings
            .iter()
            .map(|b| {
                let role = b.get("role").and_then(Value::as_str).unwrap_or("");
                let members = b
                    .get("members")
                    .and_then(Value::as_array)
                    .map(|m| {
                        m.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                (role.to_owned(), members)
            })
            .collect()
    }

    /// The policy as answered.
    pub(crate) fn json(&self) -> Value {
        let mut out = json!({ "version": self.version, "etag": self.etag });
        if !self.bindings.is_empty() {
            out["bindings"] = Value::Array(self.bindings.clone());
        }
        if let Some(audit) = &self.audit_configs {
            out["auditConfigs"] = audit.clone();
        }
        out
    }

    /// Rewrites `from` as `to` in every binding; answers whether anything changed.
    fn rename_member(&mut self, from: &str, to: &str) -> bool {
        let mut changed = false;
        for binding in &mut self.bindings {
            if let Some(members) = binding.get_mut("members").and_then(Value::as_array_mut) {
                for m in members.iter_mut() {
                    if m.as_str() == Some(from) {
                        *m = Value::String(to.to_owned());
                        changed = true;
                    }
                }
            }
        }
        changed
    }
}

/// A service account and its own policy.
#[derive(Debug)]
struct Account {
    body: Value,
    policy: Policy,
}

/// What the stand-in holds of this service.
#[derive(Debug)]
pub(crate) struct Iam {
    accounts: BTreeMap<String, Account>,
    unique_ids: u64,
    etags: u64,
    project_policy: Policy,
}

impl Default for Iam {
    fn default() -> Self {
        let mut iam = Iam {
            accounts: BTreeMap::new(),
            unique_ids: 0,
            etags: 0,
            project_policy: Policy {
                version: 1,
                bindings: vec![json!({
                    "role": "roles/owner",
                    "members": ["user:owner@example.com"],
                })],
                audit_configs: None,
                etag: String::new(),
            },
        };
        iam.project_policy.etag = iam.etag();
        iam
    }
}

impl Iam {
    /// A fresh etag: eight bytes, never answered before, as base64.
    fn etag(&mut self) -> String {
        self.etags += 1;
        let bytes = (0x0705_u64 << 48 | self.etags).to_be_bytes();
        BASE64.encode(bytes)
    }

    /// The email of the account `id` (an email or a unique id), if it exists.
    fn find(&self, id: &str) -> Option<String> {
        if self.accounts.contains_key(id) {
            return Some(id.to_owned());
        }
        self.accounts
            .iter()
            .find(|(_, a)| a.body["uniqueId"].as_str() == Some(id))
            .map(|(email, _)| email.clone())
    }
}

fn valid_account_id(id: &str) -> bool {
    (6..=30).contains(&id.len())
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && !id.ends_with('-')
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

fn unknown_account() -> Reply {
    Reply::error(404, "NOT_FOUND", "Unknown service account")
}

/// Refuses a display name or description IAM would not keep.
fn check_fields(account: &Value) -> Result<(), Reply> {
    let len = |key: &str| account.get(key).and_then(Value::as_str).map_or(0, str::len);
    if len("displayName") > 100 {
        return Err(Reply::invalid(
            "ServiceAccount.display_name must be at most 100 bytes",
        ));
    }
    if len("description") > 256 {
        return Err(Reply::invalid(
            "ServiceAccount.description must be at most 256 bytes",
        ));
    }
    Ok(())
}

/// Serves a request of this service, or `None` when the path is not one of its own.
pub(crate) fn route(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let rest = req.under("/v1/projects")?;
    if rest.len() < 2 || rest[1] != "serviceAccounts" || rest.len() > 3 {
        return None;
    }
    let project = rest[0];
    let wildcard = project == "-" && rest.len() == 3;
    if !wildcard && !state.is_project(project) {
        return Some(State::foreign_project(project));
    }
    if rest.len() == 2 {
        return match req.method {
            "POST" => Some(create(state, req)),
            "GET" => Some(list(state, req)),
            _ => None,
        };
    }
    let (id, verb) = match rest[2].split_once(':') {
        Some((id, verb)) => (id, Some(verb)),
        None => (rest[2], None),
    };
    let Some(email) = state.iam.find(id) else {
        return match (req.method, verb) {
            ("GET" | "PATCH" | "DELETE", None)
            | ("POST", Some("getIamPolicy" | "setIamPolicy")) => Some(unknown_account()),
            _ => None,
        };
    };
    match (req.method, verb) {
        ("GET", None) => Some(Reply::ok(state.iam.accounts[&email].body.clone())),
        ("PATCH", None) => Some(patch(state, &email, req)),
        ("DELETE", None) => Some(delete(state, &email)),
        ("POST", Some("getIamPolicy")) => Some(Reply::ok(state.iam.accounts[&email].policy.json())),
        ("POST", Some("setIamPolicy")) => {
            let current = state.iam.accounts[&email].policy.clone();
            Some(match set_policy(state, &current, req.body, false) {
                Ok(policy) => {
                    let answer = policy.json();
                    if let Some(account) = state.iam.accounts.get_mut(&email) {
                        account.policy = policy;
                    }
                    Reply::ok(answer)
                }
                Err(refusal) => refusal,
            })
        }
        _ => None,
    }
}

fn create(state: &mut State, req: &Req<'_>) -> Reply {
    let project = state.project.clone();
    let Some(id) = req.body.get("accountId").and_then(Value::as_str) else {
        return Reply::invalid("CreateServiceAccountRequest.account_id is required");
    };
    if !valid_account_id(id) {
        return Reply::invalid(format!(
            "Invalid account id {id:?}: it must be 6 to 30 characters and match the regular \
             expression [a-z]([-a-z0-9]*[a-z0-9])"
        ));
    }
    let given = req
        .body
        .get("serviceAccount")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if let Err(refusal) = check_fields(&given) {
        return refusal;
    }
    let email = format!("{id}@{project}.iam.gserviceaccount.com");
    if state.iam.accounts.contains_key(&email) {
        return Reply::error(
            409,
            "ALREADY_EXISTS",
            format!("Service account {id} already exists within project projects/{project}."),
        );
    }
    state.iam.unique_ids += 1;
    let unique_id = format!("1{:020}", state.iam.unique_ids);
    let mut body = json!({
        "name": format!("projects/{project}/serviceAccounts/{email}"),
        "projectId": project,
        "uniqueId": unique_id,
        "email": email,
        "etag": ACCOUNT_ETAG,
        "oauth2ClientId": unique_id,
    });
    for key in ["displayName", "description"] {
        if let Some(v) = given
            .get(key)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
        {
            body[key] = Value::String(v.to_owned());
        }
    }
    let etag = state.iam.etag();
    let policy = Policy {
        version: 1,
        bindings: Vec::new(),
        audit_configs: None,
        etag,
    };
    state.iam.accounts.insert(
        email.clone(),
        Account {
            body: body.clone(),
            policy,
        },
    );
    state.created(&format!("/v1/projects/{project}/serviceAccounts/{email}"));
    Reply::ok(body)
}

fn list(state: &State, req: &Req<'_>) -> Reply {
    let size = match req.param("pageSize") {
        None => 20,
        Some(s) => match s.parse::<usize>() {
            Ok(0) => 20,
            Ok(n) => n.min(100),
            Err(_) => return Reply::invalid(format!("Invalid pageSize {s:?}")),
        },
    };
    let after = req.param("pageToken");
    let mut accounts = state
        .iam
        .accounts
        .iter()
        .filter(|(email, _)| after.is_none_or(|token| email.as_str() > token));
    let page: Vec<(&String, &Account)> = accounts.by_ref().take(size).collect();
    let mut out = json!({});
    if !page.is_empty() {
        out["accounts"] = Value::Array(page.iter().map(|(_, a)| a.body.clone()).collect());
    }
    if accounts.next().is_some()
        && let Some((last, _)) = page.last()
    {
        out["nextPageToken"] = Value::String((*last).clone());
    }
    Reply::ok(out)
}

fn patch(state: &mut State, email: &str, req: &Req<'_>) -> Reply {
    let given = req
        .body
        .get("serviceAccount")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let Some(mask) = req
        .body
        .get("updateMask")
        .and_then(Value::as_str)
        .or_else(|| req.param("updateMask"))
        .filter(|m| !m.is_empty())
    else {
        return Reply::invalid("PatchServiceAccountRequest.update_mask is required");
    };
    let mut fields = Vec::new();
    for path in mask.split(',').map(str::trim) {
        match path {
            "displayName" | "display_name" => fields.push("displayName"),
            "description" => fields.push("description"),
            other => {
                return Reply::invalid(format!(
                    "Invalid update mask path {other:?}: only displayName and description \
                     can be patched"
                ));
            }
        }
    }
    if let Err(refusal) = check_fields(&given) {
        return refusal;
    }
    let Some(account) = state.iam.accounts.get_mut(email) else {
        return unknown_account();
    };
    let Some(body) = account.body.as_object_mut() else {
        return unknown_account();
    };
    for key in fields {
        match given
            .get(key)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
        {
            Some(v) => {
                body.insert(key.to_owned(), Value::String(v.to_owned()));
            }
            None => {
                body.remove(key);
            }
        }
    }
    Reply::ok(account.body.clone())
}

fn delete(state: &mut State, email: &str) -> Reply {
    let Some(gone) = state.iam.accounts.remove(email) else {
        return unknown_account();
    };
    let uid = gone.body["uniqueId"].as_str().unwrap_or_default();
    let from = format!("serviceAccount:{email}");
    let to = format!("deleted:serviceAccount:{email}?uid={uid}");
    if state.iam.project_policy.rename_member(&from, &to) {
        state.iam.project_policy.etag = state.iam.etag();
    }
    let mut renamed = Vec::new();
    for (other, account) in &mut state.iam.accounts {
        if account.policy.rename_member(&from, &to) {
            renamed.push(other.clone());
        }
    }
    for other in renamed {
        let etag = state.iam.etag();
        if let Some(account) = state.iam.accounts.get_mut(&other) {
            account.policy.etag = etag;
        }
    }
    Reply::empty()
}

/// `POST /v3/projects/{p}:getIamPolicy` and `:setIamPolicy`.
pub(crate) fn route_project_policy(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let rest = req.under("/v3/projects")?;
    let [one] = rest.as_slice() else {
        return None;
    };
    let (project, verb) = one.split_once(':')?;
    if req.method != "POST" || !matches!(verb, "getIamPolicy" | "setIamPolicy") {
        return None;
    }
    if !state.is_project(project) {
        return Some(State::foreign_project(project));
    }
    if verb == "getIamPolicy" {
        return Some(Reply::ok(state.iam.project_policy.json()));
    }
    let current = state.iam.project_policy.clone();
    Some(match set_policy(state, &current, req.body, true) {
        Ok(policy) => {
            let answer = policy.json();
            state.iam.project_policy = policy;
            Reply::ok(answer)
        }
        Err(refusal) => refusal,
    })
}

/// Whether `role` is well formed; on the project policy (`project` given), a custom
/// role of another project is refused.
fn check_role(role: &str, project: Option<&str>) -> Result<(), Reply> {
    let id_ok = |id: &str| {
        !id.is_empty()
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    };
    let parts: Vec<&str> = role.split('/').collect();
    let ok = match parts.as_slice() {
        ["roles", id] => id_ok(id),
        ["projects", p, "roles", id] => {
            if project.is_some_and(|own| own != *p) {
                return Err(Reply::invalid(format!(
                    "Role ({role}) does not exist in the resource's hierarchy."
                )));
            }
            !p.is_empty() && id_ok(id)
        }
        ["organizations", o, "roles", id] => {
            !o.is_empty() && o.chars().all(|c| c.is_ascii_digit()) && id_ok(id)
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(Reply::invalid(format!("Role {role} is not supported.")))
    }
}

/// Whether `member` is a principal a binding may hold, and names nothing missing.
fn check_member(state: &State, member: &str, on_project: bool) -> Result<(), Reply> {
    let malformed = || {
        Reply::invalid(format!(
            "Invalid argument: member {member:?} is of an unknown type or malformed"
        ))
    };
    let email = |rest: &str| {
        rest.split_once('@')
            .is_some_and(|(local, domain)| !local.is_empty() && domain.contains('.'))
    };
    if member.chars().any(char::is_whitespace) {
        return Err(malformed());
    }
    if let Some(account) = member.strip_prefix("serviceAccount:") {
        if !email(account) {
            return Err(malformed());
        }
        let own_domain = format!("@{}.iam.gserviceaccount.com", state.project);
        if account.ends_with(&own_domain) && !state.iam.accounts.contains_key(account) {
            return Err(Reply::invalid(format!(
                "Service account {account} does not exist."
            )));
        }
        return Ok(());
    }
    let ok = if let Some(rest) = member
        .strip_prefix("user:")
        .or_else(|| member.strip_prefix("group:"))
    {
        email(rest)
    } else if let Some(domain) = member.strip_prefix("domain:") {
        domain.contains('.') && !domain.contains('@')
    } else if let Some(rest) = member
        .strip_prefix("principal://")
        .or_else(|| member.strip_prefix("principalSet://"))
        .or_else(|| member.strip_prefix("deleted:"))
    {
        !rest.is_empty()
    } else if matches!(member, "allUsers" | "allAuthenticatedUsers") {
        if on_project {
            return Err(Reply::invalid(format!(
                "{member} cannot be granted roles on a project"
            )));
        }
        true
    } else {
        false
    };
    if ok { Ok(()) } else { Err(malformed()) }
}

/// The policy a `setIamPolicy` body asks for, checked against `current`, with a new
/// etag; or the refusal.
pub(crate) fn set_policy(
    state: &mut State,
    current: &Policy,
    body: &Value,
    on_project: bool,
) -> Result<Policy, Reply> {
    let Some(given) = body.get("policy").and_then(Value::as_object) else {
        return Err(Reply::invalid("SetIamPolicyRequest.policy is required"));
    };
    if let Some(etag) = given
        .get("etag")
        .and_then(Value::as_str)
        .filter(|e| !e.is_empty())
        && etag != current.etag
    {
        return Err(Reply::error(
            409,
            "ABORTED",
            "There were concurrent policy changes. Please retry the whole \
             read-modify-write with exponential backoff.",
        ));
    }
    let version = match given.get("version") {
        None | Some(Value::Null) => 1,
        v => match int64(v) {
            Some(0) => 1,
            Some(v @ 1..=3) => v,
            _ => return Err(Reply::invalid("Invalid policy version")),
        },
    };
    let project = state.project.clone();
    let mut merged: Vec<Map<String, Value>> = Vec::new();
    let no_bindings = Vec::new();
    let bindings = match given.get("bindings") {
        None | Some(Value::Null) => &no_bindings,
        Some(Value::Array(items)) => items,
        Some(_) => return Err(Reply::invalid("Policy.bindings must be a list")),
    };
    for binding in bindings {
        let Some(role) = binding.get("role").and_then(Value::as_str) else {
            return Err(Reply::invalid("Binding.role is required"));
        };
        check_role(role, on_project.then_some(project.as_str()))?;
        let condition = binding.get("condition").filter(|c| !c.is_null()).cloned();
        if condition.is_some() && version < 3 {
            return Err(Reply::invalid(format!(
                "Policy version {version} cannot contain conditions; use version 3"
            )));
        }
        let members: Vec<&str> = match binding.get("members") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => {
                let mut out = Vec::new();
                for item in items {
                    let Some(m) = item.as_str() else {
                        return Err(Reply::invalid("Binding.members must be strings"));
                    };
                    out.push(m);
                }
                out
            }
            Some(_) => return Err(Reply::invalid("Binding.members must be a list")),
        };
        for m in &members {
            check_member(state, m, on_project)?;
        }
        let target = merged.iter_mut().find(|b| {
            b.get("role").and_then(Value::as_str) == Some(role)
                && b.get("condition").cloned() == condition
        });
        let target = match target {
            Some(t) => t,
            None => {
                let mut fresh = Map::new();
                fresh.insert("role".into(), Value::String(role.to_owned()));
                fresh.insert("members".into(), Value::Array(Vec::new()));
                if let Some(c) = condition {
                    fresh.insert("condition".into(), c);
                }
                merged.push(fresh);
                merged.last_mut().expect("just pushed")
            }
        };
        if let Some(list) = target.get_mut("members").and_then(Value::as_array_mut) {
            for m in members {
                if !list.iter().any(|x| x.as_str() == Some(m)) {
                    list.push(Value::String(m.to_owned()));
                }
            }
        }
    }
    let bindings = merged
        .into_iter()
        .filter(|b| {
            b.get("members")
                .and_then(Value::as_array)
                .is_some_and(|m| !m.is_empty())
        })
        .map(Value::Object)
        .collect();
    let audit_configs = match given.get("auditConfigs") {
        None | Some(Value::Null) => current.audit_configs.clone(),
        Some(Value::Array(a)) if a.is_empty() => None,
        Some(a) => Some(a.clone()),
    };
    Ok(Policy {
        version,
        bindings,
        audit_configs,
        etag: state.iam.etag(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(
        method: &'a str,
        path: &'a str,
        query: &'a BTreeMap<String, String>,
        body: &'a Value,
    ) -> Req<'a> {
        Req {
            method,
            path,
            query,
            body,
        }
    }

    fn call(state: &mut State, method: &str, path: &str, body: Value) -> Reply {
        let query = BTreeMap::new();
        let r = req(method, path, &query, &body);
        route(state, &r)
            .or_else(|| route_project_policy(state, &r))
            .unwrap_or_else(|| Reply::error(404, "NOT_FOUND", "not served"))
    }

    fn new_state() -> State {
        State::for_tests("p1")
    }

    #[test]
    fn an_account_is_created_once_and_read_by_email_or_unique_id() {
        let mut s = new_state();
        let made = call(
            &mut s,
            "POST",
            "/v1/projects/p1/serviceAccounts",
            json!({"accountId": "runner", "serviceAccount": {"displayName": "runner", "description": "d"}}),
        );
        assert_eq!(made.status, 200, "{}", made.body);
        assert_eq!(made.body["email"], "runner@p1.iam.gserviceaccount.com");
        assert_eq!(made.body["uniqueId"].as_str().unwrap().len(), 21);
        assert_eq!(made.body["oauth2ClientId"], made.body["uniqueId"]);
        let again = call(
            &mut s,
            "POST",
            "/v1/projects/p1/serviceAccounts",
            json!({"accountId": "runner"}),
        );
        assert_eq!(
            (again.status, again.body["error"]["status"].as_str()),
            (409, Some("ALREADY_EXISTS"))
        );
        for bad in ["abc", "Runner", "runner-"] {
            let refused = call(
                &mut s,
                "POST",
                "/v1/projects/p1/serviceAccounts",
                json!({"accountId": bad}),
            );
            assert_eq!(refused.status, 400, "{bad}");
        }
        let uid = made.body["uniqueId"].as_str().unwrap().to_owned();
        let by_uid = call(
            &mut s,
            "GET",
            &format!("/v1/projects/-/serviceAccounts/{uid}"),
            Value::Null,
        );
        assert_eq!(by_uid.body["email"], made.body["email"]);
        let missing = call(
            &mut s,
            "GET",
            "/v1/projects/p1/serviceAccounts/nobody@p1.iam.gserviceaccount.com",
            Value::Null,
        );
        assert_eq!(missing.status, 404);
        let foreign = call(
            &mut s,
            "GET",
            "/v1/projects/p2/serviceAccounts",
            Value::Null,
        );
        assert_eq!(foreign.status, 403);
    }

    #[test]
    fn a_patch_needs_its_mask_and_changes_only_what_it_names() {
        let mut s = new_state();
        call(
            &mut s,
            "POST",
            "/v1/projects/p1/serviceAccounts",
            json!({"accountId": "runner", "serviceAccount": {"displayName": "runner", "description": "old"}}),
        );
        let path = "/v1/projects/p1/serviceAccounts/runner@p1.iam.gserviceaccount.com";
        let no_mask = call(
            &mut s,
            "PATCH",
            path,
            json!({"serviceAccount": {"description": "new"}}),
        );
        assert_eq!(no_mask.status, 400);
        let too_long = call(
            &mut s,
            "PATCH",
            path,
            json!({"serviceAccount": {"description": "x".repeat(257)}, "updateMask": "description"}),
        );
        assert_eq!(too_long.status, 400);
        let ok = call(
            &mut s,
            "PATCH",
            path,
            json!({"serviceAccount": {"description": "new", "displayName": "ignored"}, "updateMask": "description"}),
        );
        assert_eq!(ok.status, 200);
        assert_eq!(
            (
                ok.body["description"].as_str(),
                ok.body["displayName"].as_str()
            ),
            (Some("new"), Some("runner"))
        );
    }

    #[test]
    fn lists_come_in_pages() {
        let mut s = new_state();
        for i in 0..5 {
            call(
                &mut s,
                "POST",
                "/v1/projects/p1/serviceAccounts",
                json!({"accountId": format!("account-{i}")}),
            );
        }
        let mut query = BTreeMap::from([("pageSize".to_owned(), "2".to_owned())]);
        let mut seen = Vec::new();
        loop {
            let r = req(
                "GET",
                "/v1/projects/p1/serviceAccounts",
                &query,
                &Value::Null,
            );
            let page = route(&mut s, &r).unwrap();
            for a in page.body["accounts"].as_array().unwrap() {
                seen.push(a["email"].as_str().unwrap().to_owned());
            }
            match page.body.get("nextPageToken").and_then(Value::as_str) {
                Some(t) => {
                    query.insert("pageToken".to_owned(), t.to_owned());
                }
                None => break,
            }
        }
        assert_eq!(seen.len(), 5);
    }

    #[test]
    fn a_stale_etag_is_aborted_and_a_missing_account_member_refused() {
        let mut s = new_state();
        let first = call(&mut s, "POST", "/v3/projects/p1:getIamPolicy", json!({}));
        let etag = first.body["etag"].as_str().unwrap().to_owned();
        assert_eq!(BASE64.decode(&etag).unwrap().len(), 8);
        let missing = call(
            &mut s,
            "POST",
            "/v3/projects/p1:setIamPolicy",
            json!({"policy": {"etag": etag, "bindings": [
                {"role": "roles/viewer", "members": ["serviceAccount:ghost@p1.iam.gserviceaccount.com"]}
            ]}}),
        );
        assert_eq!(missing.status, 400, "{}", missing.body);
        let set = call(
            &mut s,
            "POST",
            "/v3/projects/p1:setIamPolicy",
            json!({"policy": {"etag": etag, "bindings": [
                {"role": "roles/viewer", "members": ["user:a@example.com"]},
                {"role": "roles/viewer", "members": ["user:b@example.com", "user:a@example.com"]},
                {"role": "roles/editor", "members": []}
            ]}}),
        );
        assert_eq!(set.status, 200, "{}", set.body);
        assert_ne!(set.body["etag"].as_str(), Some(etag.as_str()));
        assert_eq!(
            set.body["bindings"],
            json!([{"role": "roles/viewer", "members": ["user:a@example.com", "user:b@example.com"]}])
        );
        let stale = call(
            &mut s,
            "POST",
            "/v3/projects/p1:setIamPolicy",
            json!({"policy": {"etag": etag, "bindings": []}}),
        );
        assert_eq!(
            (stale.status, stale.body["error"]["status"].as_str()),
            (409, Some("ABORTED"))
        );
        for (role, member) in [
            ("viewer", "user:a@example.com"),
            ("roles/viewer", "someone"),
            ("projects/other/roles/x", "user:a@example.com"),
        ] {
            let bad = call(
                &mut s,
                "POST",
                "/v3/projects/p1:setIamPolicy",
                json!({"policy": {"bindings": [{"role": role, "members": [member]}]}}),
            );
            assert_eq!(bad.status, 400, "{role} {member}");
        }
    }

    #[test]
    fn a_deleted_accounts_bindings_stay_as_deleted_members() {
        let mut s = new_state();
        let made = call(
            &mut s,
            "POST",
            "/v1/projects/p1/serviceAccounts",
            json!({"accountId": "runner"}),
        );
        let uid = made.body["uniqueId"].as_str().unwrap().to_owned();
        let member = "serviceAccount:runner@p1.iam.gserviceaccount.com";
        let set = call(
            &mut s,
            "POST",
            "/v3/projects/p1:setIamPolicy",
            json!({"policy": {"bindings": [{"role": "roles/viewer", "members": [member]}]}}),
        );
        assert_eq!(set.status, 200, "{}", set.body);
        let gone = call(
            &mut s,
            "DELETE",
            "/v1/projects/p1/serviceAccounts/runner@p1.iam.gserviceaccount.com",
            Value::Null,
        );
        assert_eq!(gone.status, 200);
        let after = call(&mut s, "POST", "/v3/projects/p1:getIamPolicy", json!({}));
        assert_eq!(
            after.body["bindings"][0]["members"][0],
            format!("deleted:serviceAccount:runner@p1.iam.gserviceaccount.com?uid={uid}")
        );
        assert_ne!(after.body["etag"], set.body["etag"]);
        // A policy read back, deleted members and all, can be written again.
        let again = call(
            &mut s,
            "POST",
            "/v3/projects/p1:setIamPolicy",
            json!({"policy": after.body}),
        );
        assert_eq!(again.status, 200, "{}", again.body);
        let twice = call(
            &mut s,
            "DELETE",
            "/v1/projects/p1/serviceAccounts/runner@p1.iam.gserviceaccount.com",
            Value::Null,
        );
        assert_eq!(twice.status, 404);
    }
}
