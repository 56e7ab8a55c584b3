//! Serverless Functions (`/functions/v1beta1/regions/{region}/…`), from memory, as
//! Scaleway's API reference and SDK describe them: namespaces, functions, and a
//! function's code archive, uploaded through a presigned URL and then deployed.
//!
//! What it holds to:
//! - A namespace is `pending` when created or changed and `ready` once the stand-in's
//!   settling time has passed on its clock; its `registry_endpoint` is empty until it is
//!   first ready. Names are unique
//!   in a project and region (`already_exists`).
//! - A function is `created` until code is deployed: `GET …/upload-url?content_length=N`
//!   hands out `{address}/uploads/functions/{id}?…`, a `PUT` of exactly N bytes there
//!   stores the archive (another size is refused, as a presigned URL signed for a
//!   content length refuses it), and `POST …/deploy` moves the function `pending` then
//!   `ready` (`error` when the archive is not a zip). An update of a function whose code
//!   was deployed redeploys it (`pending`, then `ready`) unless it says `redeploy: false`.
//!   Function names are unique in their namespace.
//! - Runtimes are the `FunctionRuntime` values of the SDK; memory is one of the documented
//!   tiers (128 to 4096 MB); scaling 0 to 50; a timeout is a duration string of 1 to 900
//!   seconds; `SCW_`-prefixed variables are reserved. A refusal is `invalid_arguments`
//!   naming the argument.
//! - A write to a `pending` or `deleting` resource is `transient_state`, and so is a
//!   function created in a namespace that is not ready.
//! - `DELETE` answers the resource `deleting`; it is gone once the settling time has
//!   passed.
//!   Deleting a namespace deletes its functions with it, as Scaleway documents.
//! - Secret environment variables are kept as hashes unrelated to their values, and
//!   answered as `{key, hashed_value}`; an update naming a key without a value removes it.
//! - Listing functions needs a `namespace_id`, as the API's request type does; a `name`
//!   filter matches names containing it; listings are paged.
//! - An unknown id is 404 with Scaleway's bare message (`{"message": "Namespace was not
//!   found"}`, `Function was not found`), no `type` nor `resource`, as recorded.

mod function;
mod namespace;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::State;
use super::wire::{Reply, Req, Settling, unknown_region};

/// The status a deleted resource settles to: it is then gone.
const GONE: &str = "gone";

/// The product's resources.
#[derive(Debug, Default)]
pub(crate) struct Functions {
    namespaces: BTreeMap<String, namespace::Namespace>,
    functions: BTreeMap<String, function::Function>,
    /// The size each upload URL handed out was signed for, by function id.
    uploads: BTreeMap<String, usize>,
    /// Hashes handed out for secret values (a counter: no hash says anything of a value).
    hashes: u64,
}

impl Functions {
    /// The archive last uploaded for the function `id`, if any.
    #[cfg(test)]
    pub(crate) fn archive(&self, id: &str) -> Option<&function::Archive> {
        self.functions.get(id).and_then(|f| f.archive.as_ref())
    }

    /// The archive the function `id` was last deployed from, if any.
    #[cfg(test)]
    pub(crate) fn deployed(&self, id: &str) -> Option<&function::Archive> {
        self.functions.get(id).and_then(|f| f.deployed.as_ref())
    }

    /// Forgets what has finished being deleted: namespaces and functions whose deletion
    /// has settled, and the functions of a namespace gone.
    fn sweep(&mut self) {
        self.namespaces.retain(|_, n| n.status.status() != GONE);
        let namespaces = &self.namespaces;
        self.functions
            .retain(|_, f| f.status.status() != GONE && namespaces.contains_key(&f.namespace_id));
    }

    /// A stand-in for the hash Scaleway keeps of a secret value.
    fn hashed(&mut self) -> String {
        self.hashes += 1;
        format!(
            "$argon2id$v=19$m=65536,t=1,p=2$c3RhbmQtaW4$stand-in-{:012}",
            self.hashes
        )
    }
}

/// Serves a request of the product, or `None` when the path is not one of its.
pub(crate) fn route(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let rest = req.under("/functions/v1beta1/regions")?;
    let (region, rest) = rest.split_first()?;
    if let Some(refusal) = unknown_region(region) {
        return Some(refusal);
    }
    state.functions.sweep();
    match rest.split_first() {
        Some((&"namespaces", rest)) => namespace::route(state, req, region, rest),
        Some((&"functions", rest)) => function::route(state, req, region, rest),
        _ => None,
    }
}

/// Serves a `PUT` of an archive to an upload URL handed out (under
/// [`UPLOADS`](super::UPLOADS)).
pub(crate) fn upload(state: &mut State, method: &str, path: &str, bytes: &[u8]) -> Reply {
    function::upload(state, method, path, bytes)
}

/// Whether `name` is one Scaleway takes for a namespace or a function: lowercase
/// letters, digits and dashes, not starting or ending with a dash, 1 to 63 of them.
fn name_ok(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// The `name` of a create, checked.
fn name_of(req: &Req<'_>) -> Result<String, Reply> {
    match req.str("name") {
        Some(name) if name_ok(name) => Ok(name.to_owned()),
        Some(_) => Err(Reply::invalid(
            "name",
            "must be 1 to 63 lowercase letters, digits and dashes, not starting or ending \
             with a dash",
        )),
        None => Err(Reply::invalid("name", "is required")),
    }
}

/// The `environment_variables` of a body, checked; `None` when not given.
fn env_of(req: &Req<'_>) -> Result<Option<BTreeMap<String, String>>, Reply> {
    const ARG: &str = "environment_variables";
    let Some(value) = req.body.get(ARG).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let Some(map) = value.as_object() else {
        return Err(Reply::invalid(ARG, "must be a map of strings"));
    };
    if map.len() > 100 {
        return Err(Reply::invalid(ARG, "at most 100 variables"));
    }
    let mut env = BTreeMap::new();
    for (key, value) in map {
        let Some(value) = value.as_str() else {
            return Err(Reply::invalid(
                ARG,
                format!("the value of {key} is not a string"),
            ));
        };
        check_env_key(ARG, key)?;
        if value.len() > 1000 {
            return Err(Reply::invalid(
                ARG,
                format!("{key}: at most 1000 characters"),
            ));
        }
        env.insert(key.clone(), value.to_owned());
    }
    Ok(Some(env))
}

fn check_env_key(arg: &str, key: &str) -> Result<(), Reply> {
    if key.is_empty() || key.len() > 100 {
        return Err(Reply::invalid(arg, format!("{key:?}: 1 to 100 characters")));
    }
    if key.starts_with("SCW_") {
        return Err(Reply::invalid(
            arg,
            format!("{key}: variables starting with SCW_ are reserved"),
        ));
    }
    Ok(())
}

/// One entry of `secret_environment_variables`: a key, and a value unless it is removed.
struct SecretEntry {
    key: String,
    value: Option<String>,
}

/// The `secret_environment_variables` of a body, checked; `None` when not given. A
/// create (`removals` false) needs a value for every key.
fn secrets_of(req: &Req<'_>, removals: bool) -> Result<Option<Vec<SecretEntry>>, Reply> {
    const ARG: &str = "secret_environment_variables";
    let Some(value) = req.body.get(ARG).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let Some(items) = value.as_array() else {
        return Err(Reply::invalid(ARG, "must be a list of {key, value}"));
    };
    let mut out = Vec::new();
    for item in items {
        let Some(key) = item.get("key").and_then(Value::as_str) else {
            return Err(Reply::invalid(ARG, "every entry needs a key"));
        };
        check_env_key(ARG, key)?;
        let value = item.get("value").and_then(Value::as_str).map(str::to_owned);
        if value.is_none() && !removals {
            return Err(Reply::invalid(ARG, format!("{key}: a value is required")));
        }
        if value.as_ref().is_some_and(|v| v.len() > 65_536) {
            return Err(Reply::invalid(ARG, format!("{key}: at most 65536 bytes")));
        }
        out.push(SecretEntry {
            key: key.to_owned(),
            value,
        });
    }
    Ok(Some(out))
}

/// Applies `entries` to the stored hashes `into`.
fn apply_secrets(
    functions: &mut Functions,
    into: &mut BTreeMap<String, String>,
    entries: Vec<SecretEntry>,
) {
    for entry in entries {
        match entry.value {
            Some(_) => {
                let hash = functions.hashed();
                into.insert(entry.key, hash);
            }
            None => {
                into.remove(&entry.key);
            }
        }
    }
}

/// The stored hashes as Scaleway answers them.
fn secrets_json(secrets: &BTreeMap<String, String>) -> Value {
    Value::Array(
        secrets
            .iter()
            .map(|(key, hash)| json!({ "key": key, "hashed_value": hash }))
            .collect(),
    )
}

/// The `tags` of a body, checked; `None` when not given.
fn tags_of(req: &Req<'_>) -> Result<Option<Vec<String>>, Reply> {
    let Some(value) = req.body.get("tags").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let tags: Option<Vec<String>> = value.as_array().and_then(|items| {
        items
            .iter()
            .map(|t| t.as_str().map(str::to_owned))
            .collect()
    });
    tags.map(Some)
        .ok_or_else(|| Reply::invalid("tags", "must be a list of strings"))
}

/// The `description` of a body, checked; `None` when not given.
fn description_of(req: &Req<'_>) -> Result<Option<String>, Reply> {
    match req.body.get("description") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(d)) if d.len() <= 255 => Ok(Some(d.clone())),
        Some(_) => Err(Reply::invalid(
            "description",
            "must be a string of at most 255 characters",
        )),
    }
}

/// `transient` until the stand-in's settling time has passed, then `settled`.
fn settling(state: &State, transient: &'static str, settled: &'static str) -> Settling {
    state.settle().after(transient, settled)
}

/// Letters and digits of `name`, for the endpoints Scaleway derives from it.
fn compact(name: &str) -> String {
    name.chars().filter(char::is_ascii_alphanumeric).collect()
}

/// The answer for a missing `resource` (`namespace`, `function`): Scaleway's bare
/// message (`{"message": "Function was not found"}`); `_id` is not in it.
fn missing(resource: &str, _id: &str) -> Reply {
    Reply::missing(resource)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "/functions/v1beta1/regions/fr-par";

    thread_local! {
        /// The clock of this test's stand-in.
        static CLOCK: std::sync::Arc<infra_core::sdk::ManualClock> = std::sync::Arc::default();
    }

    /// A stand-in whose changes take `polls` polls of a client that reads, then waits a
    /// tenth of a second ([`get`] does both).
    fn state(polls: u32) -> State {
        let clock = CLOCK.with(std::sync::Arc::clone);
        let options = crate::scaleway::ScalewayOptions::new()
            .clock(clock)
            .settling(std::time::Duration::from_millis(100) * polls);
        State::new("http://127.0.0.1:9", "p1", "o1", &options)
    }

    fn call(
        state: &mut State,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        body: Value,
    ) -> Reply {
        let query: BTreeMap<String, String> = query
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let path = format!("{BASE}{path}");
        let req = Req {
            method,
            path: &path,
            query: &query,
            body: &body,
        };
        route(state, &req).expect("a path of the product")
    }

    /// A read, then a tenth of a second of waiting, as a client polling does.
    fn get(state: &mut State, path: &str) -> Reply {
        let reply = call(state, "GET", path, &[], Value::Null);
        CLOCK.with(|clock| clock.advance(std::time::Duration::from_millis(100)));
        reply
    }

    fn namespace(state: &mut State, name: &str) -> String {
        let reply = call(
            state,
            "POST",
            "/namespaces",
            &[],
            json!({ "name": name, "project_id": "p1" }),
        );
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.body["id"].as_str().unwrap().to_owned()
    }

    fn function(state: &mut State, namespace: &str, name: &str) -> Reply {
        let body = json!({
            "name": name, "namespace_id": namespace, "runtime": "python311",
            "handler": "handler.handle", "memory_limit": 256, "timeout": "60s",
        });
        call(state, "POST", "/functions", &[], body)
    }

    #[test]
    fn a_namespace_is_pending_until_read_enough_and_names_are_unique() {
        let mut state = state(2);
        let created = call(
            &mut state,
            "POST",
            "/namespaces",
            &[],
            json!({ "name": "ns", "project_id": "p1" }),
        );
        assert_eq!(created.body["status"], "pending");
        assert_eq!(created.body["registry_endpoint"], "");
        let id = created.body["id"].as_str().unwrap().to_owned();
        let statuses: Vec<Value> = (0..3)
            .map(|_| get(&mut state, &format!("/namespaces/{id}")).body)
            .collect();
        assert_eq!(statuses[0]["status"], "pending");
        assert_eq!(statuses[1]["status"], "pending");
        assert_eq!(statuses[2]["status"], "ready");
        assert!(
            statuses[2]["registry_endpoint"]
                .as_str()
                .unwrap()
                .starts_with("rg.fr-par.scw.cloud/")
        );
        let again = call(
            &mut state,
            "POST",
            "/namespaces",
            &[],
            json!({ "name": "ns", "project_id": "p1" }),
        );
        assert_eq!(
            (again.status, again.body["type"].as_str()),
            (409, Some("already_exists"))
        );
        let foreign = call(
            &mut state,
            "POST",
            "/namespaces",
            &[],
            json!({ "name": "other", "project_id": "p2" }),
        );
        assert_eq!(foreign.status, 403);
        let reserved = call(
            &mut state,
            "POST",
            "/namespaces",
            &[],
            json!({ "name": "env", "project_id": "p1", "environment_variables": { "SCW_X": "1" } }),
        );
        assert_eq!(
            reserved.body["details"][0]["argument_name"],
            "environment_variables"
        );
    }

    #[test]
    fn code_is_uploaded_at_the_signed_size_then_deployed() {
        let mut state = state(1);
        let ns = namespace(&mut state, "ns");
        let early = function(&mut state, &ns, "early");
        assert_eq!(
            early.body["type"], "transient_state",
            "the namespace is not ready yet"
        );
        get(&mut state, &format!("/namespaces/{ns}"));
        let created = function(&mut state, &ns, "api");
        assert_eq!(created.body["status"], "created");
        assert_eq!(created.body["timeout"], "60s");
        let id = created.body["id"].as_str().unwrap().to_owned();
        let url = call(
            &mut state,
            "GET",
            &format!("/functions/{id}/upload-url"),
            &[("content_length", "6")],
            Value::Null,
        );
        let target = url.body["url"].as_str().unwrap();
        assert!(
            target.starts_with("http://127.0.0.1:9/uploads/functions/"),
            "{target}"
        );
        let path = format!("/uploads/functions/{id}");
        assert_eq!(
            upload(&mut state, "PUT", &path, b"PK12345").status,
            403,
            "another size"
        );
        assert_eq!(upload(&mut state, "PUT", &path, b"PK1234").status, 200);
        assert_eq!(state.functions.archive(&id).unwrap().size, 6);
        let deployed = call(
            &mut state,
            "POST",
            &format!("/functions/{id}/deploy"),
            &[],
            json!({}),
        );
        assert_eq!(deployed.body["status"], "pending");
        let busy = call(
            &mut state,
            "PATCH",
            &format!("/functions/{id}"),
            &[],
            json!({ "memory_limit": 512 }),
        );
        assert_eq!(busy.body["type"], "transient_state");
        get(&mut state, &format!("/functions/{id}"));
        let ready = get(&mut state, &format!("/functions/{id}"));
        assert_eq!(ready.body["status"], "ready");
        assert_eq!(state.functions.deployed(&id), state.functions.archive(&id));
        // An update redeploys a function that has code.
        let updated = call(
            &mut state,
            "PATCH",
            &format!("/functions/{id}"),
            &[],
            json!({ "memory_limit": 512 }),
        );
        assert_eq!(
            (
                updated.body["status"].as_str(),
                updated.body["cpu_limit"].as_u64()
            ),
            (Some("pending"), Some(280))
        );
    }

    #[test]
    fn what_is_not_a_zip_fails_to_deploy_and_bad_values_are_refused() {
        let mut state = state(0);
        let ns = namespace(&mut state, "ns");
        let id = function(&mut state, &ns, "api").body["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let nothing = call(
            &mut state,
            "POST",
            &format!("/functions/{id}/deploy"),
            &[],
            json!({}),
        );
        assert_eq!(nothing.status, 412);
        call(
            &mut state,
            "GET",
            &format!("/functions/{id}/upload-url"),
            &[("content_length", "4")],
            Value::Null,
        );
        assert_eq!(
            upload(
                &mut state,
                "PUT",
                &format!("/uploads/functions/{id}"),
                b"text"
            )
            .status,
            200
        );
        let failed = call(
            &mut state,
            "POST",
            &format!("/functions/{id}/deploy"),
            &[],
            json!({}),
        );
        assert_eq!(failed.body["status"], "error");
        assert!(failed.body["error_message"].as_str().is_some());
        for (arg, body) in [
            ("runtime", json!({ "runtime": "python3.11" })),
            ("memory_limit", json!({ "memory_limit": 300 })),
            ("timeout", json!({ "timeout": "901s" })),
            ("max_scale", json!({ "max_scale": 51 })),
            ("min_scale", json!({ "min_scale": 5, "max_scale": 2 })),
        ] {
            let refused = call(&mut state, "PATCH", &format!("/functions/{id}"), &[], body);
            assert_eq!(
                refused.body["details"][0]["argument_name"], arg,
                "{}",
                refused.body
            );
        }
    }

    #[test]
    fn deleting_a_namespace_takes_its_functions_and_listings_are_paged() {
        let mut state = state(1);
        let ns = namespace(&mut state, "ns");
        get(&mut state, &format!("/namespaces/{ns}"));
        let ids: Vec<String> = ["a", "b", "c"]
            .iter()
            .map(|n| {
                function(&mut state, &ns, n).body["id"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        let unscoped = get(&mut state, "/functions");
        assert_eq!(unscoped.body["details"][0]["argument_name"], "namespace_id");
        let page = call(
            &mut state,
            "GET",
            "/functions",
            &[("namespace_id", &ns), ("page_size", "2"), ("page", "2")],
            Value::Null,
        );
        assert_eq!(
            (
                page.body["functions"].as_array().unwrap().len(),
                page.body["total_count"].as_u64()
            ),
            (1, Some(3))
        );
        let deleting = call(
            &mut state,
            "DELETE",
            &format!("/namespaces/{ns}"),
            &[],
            Value::Null,
        );
        assert_eq!(deleting.body["status"], "deleting");
        // Read at once, the function is being deleted with its namespace; once the
        // settling time has passed (one poll), both are gone.
        let function = get(&mut state, &format!("/functions/{}", ids[0]));
        assert_eq!(function.body["status"], "deleting");
        let gone = get(&mut state, &format!("/namespaces/{ns}"));
        assert_eq!(
            (gone.status, gone.body["message"].as_str()),
            (404, Some("Namespace was not found"))
        );
        let gone = get(&mut state, &format!("/functions/{}", ids[2]));
        assert_eq!(
            (gone.status, gone.body["message"].as_str()),
            (404, Some("Function was not found"))
        );
    }

    #[test]
    fn secret_values_are_kept_as_unrelated_hashes_and_removed_by_key() {
        let mut state = state(0);
        let body = json!({
            "name": "ns", "project_id": "p1",
            "secret_environment_variables": [{ "key": "TOKEN", "value": "hunter2" }],
        });
        let created = call(&mut state, "POST", "/namespaces", &[], body);
        let hashed = created.body["secret_environment_variables"][0].clone();
        assert_eq!(hashed["key"], "TOKEN");
        assert!(!created.body.to_string().contains("hunter2"));
        let id = created.body["id"].as_str().unwrap().to_owned();
        let removed = call(
            &mut state,
            "PATCH",
            &format!("/namespaces/{id}"),
            &[],
            json!({ "secret_environment_variables": [{ "key": "TOKEN" }] }),
        );
        assert_eq!(removed.body["secret_environment_variables"], json!([]));
    }

    #[test]
    fn names_follow_the_documented_rule() {
        for good in ["a", "api-1", "0abc", &"a".repeat(63)] {
            assert!(name_ok(good), "{good}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64)] {
            assert!(!name_ok(bad), "{bad}");
        }
    }

    #[test]
    fn a_missing_resource_is_worded_as_scaleway_was_recorded_answering() {
        let reply = missing("namespace", "x");
        assert_eq!(reply.status, 404);
        assert_eq!(reply.body, json!({ "message": "Namespace was not found" }));
    }
}
