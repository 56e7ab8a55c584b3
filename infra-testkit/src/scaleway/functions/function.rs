//! Functions: `…/functions`, `…/functions/{id}`, their upload URL and deployment, and
//! the `PUT` of an archive to an upload URL handed out.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{
    GONE, SecretEntry, apply_secrets, compact, description_of, env_of, missing, name_of,
    secrets_json, secrets_of, settling, tags_of,
};
use crate::scaleway::wire::{Reply, Req, Settling};
use crate::scaleway::{State, UPLOADS};

/// The runtimes of the SDK's `FunctionRuntime`.
const RUNTIMES: &[&str] = &[
    "golang",
    "python",
    "python3",
    "node8",
    "node10",
    "node14",
    "node16",
    "node17",
    "python37",
    "python38",
    "python39",
    "python310",
    "go113",
    "go117",
    "go118",
    "node18",
    "rust165",
    "go119",
    "python311",
    "php82",
    "node19",
    "go120",
    "node20",
    "go121",
    "node22",
    "python312",
    "php83",
    "go122",
    "rust179",
    "go123",
    "go124",
    "python313",
    "rust185",
    "php84",
    "node24",
    "node26",
    "go125",
    "go126",
    "php85",
    "python314",
    "rust196",
];
/// The memory tiers a function may have (MB), with their CPU (thousandths of a vCPU).
const TIERS: &[(u64, u64)] = &[
    (128, 70),
    (256, 140),
    (512, 280),
    (1024, 560),
    (2048, 1120),
    (3072, 1680),
    (4096, 2240),
];
/// The largest archive a function takes (100 MiB).
const MAX_ARCHIVE: usize = 100 << 20;
/// Where the upload URLs of functions point, under [`UPLOADS`].
const UPLOAD_PREFIX: &str = "functions/";

/// An archive uploaded to a function: its size and a digest of its bytes (FNV-1a, 64
/// bits, in hex: enough to tell two archives apart in a test).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Archive {
    /// Its size in bytes.
    pub(crate) size: usize,
    /// The digest of its bytes.
    pub(crate) digest: String,
    /// Whether it starts as a zip file does.
    zip: bool,
}

impl Archive {
    fn of(bytes: &[u8]) -> Self {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in bytes {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        Archive {
            size: bytes.len(),
            digest: format!("{hash:016x}"),
            zip: bytes.starts_with(b"PK"),
        }
    }
}

/// One function.
#[derive(Debug)]
pub(super) struct Function {
    id: String,
    name: String,
    pub(super) namespace_id: String,
    region: String,
    runtime: String,
    handler: String,
    memory: u64,
    min_scale: u64,
    max_scale: u64,
    timeout: u64,
    env: BTreeMap<String, String>,
    secrets: BTreeMap<String, String>,
    tags: Vec<String>,
    privacy: String,
    description: String,
    domain: String,
    pub(super) status: Settling,
    failure: Option<String>,
    pub(super) archive: Option<Archive>,
    pub(super) deployed: Option<Archive>,
    created_at: String,
    updated_at: String,
    ready_at: Option<String>,
}

impl Function {
    /// The function as answered, the status being the one the request sees.
    fn json(&self, status: &str) -> Value {
        let cpu = TIERS
            .iter()
            .find(|(mb, _)| *mb == self.memory)
            .map_or(0, |(_, cpu)| *cpu);
        json!({
            "id": self.id,
            "name": self.name,
            "namespace_id": self.namespace_id,
            "region": self.region,
            "status": status,
            "runtime": self.runtime,
            "handler": self.handler,
            "memory_limit": self.memory,
            "cpu_limit": cpu,
            "min_scale": self.min_scale,
            "max_scale": self.max_scale,
            "timeout": format!("{}s", self.timeout),
            "environment_variables": self.env,
            "secret_environment_variables": secrets_json(&self.secrets),
            "privacy": self.privacy,
            "http_option": "enabled",
            "sandbox": "v2",
            "description": self.description,
            "domain_name": self.domain,
            "tags": self.tags,
            "error_message": if status == "error" { self.failure.clone() } else { None },
            "build_message": null,
            "runtime_message": "",
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "ready_at": self.ready_at,
            "private_network_id": null,
        })
    }
}

/// Serves `…/functions…` in `region`; `rest` is the path after `functions`.
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
        ("GET", [id, "upload-url"]) => upload_url(state, req, region, id),
        ("POST", [id, "deploy"]) => deploy(state, region, id),
        _ => return None,
    })
}

fn list(state: &mut State, req: &Req<'_>, region: &str) -> Reply {
    if let Some(refusal) = state.foreign_project(req.param("project_id")) {
        return refusal;
    }
    let Some(namespace) = req.param("namespace_id") else {
        return Reply::invalid("namespace_id", "is required");
    };
    let known = state
        .functions
        .namespaces
        .get(namespace)
        .is_some_and(|n| n.region == region);
    if !known {
        return missing("namespace", namespace);
    }
    let name = req.param("name");
    let items: Vec<Value> = state
        .functions
        .functions
        .values()
        .filter(|f| f.namespace_id == namespace)
        .filter(|f| name.is_none_or(|want| f.name.contains(want)))
        .map(|f| f.json(f.status.status()))
        .collect();
    Reply::page(req, "functions", items)
}

/// What a create or an update says of a function's configuration, checked.
#[derive(Default)]
struct Changes {
    runtime: Option<String>,
    handler: Option<String>,
    memory: Option<u64>,
    min_scale: Option<u64>,
    max_scale: Option<u64>,
    timeout: Option<u64>,
    env: Option<BTreeMap<String, String>>,
    secrets: Option<Vec<SecretEntry>>,
    tags: Option<Vec<String>>,
    privacy: Option<String>,
    description: Option<String>,
}

fn number(
    req: &Req<'_>,
    arg: &str,
    range: std::ops::RangeInclusive<u64>,
) -> Result<Option<u64>, Reply> {
    match req.body.get(arg) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64().filter(|n| range.contains(n)) {
            Some(n) => Ok(Some(n)),
            None => Err(Reply::invalid(
                arg,
                format!(
                    "must be a whole number from {} to {}",
                    range.start(),
                    range.end()
                ),
            )),
        },
    }
}

/// A duration string of whole seconds (`"300s"`, `"300.000s"`), 1 to 900 of them.
fn timeout_of(req: &Req<'_>) -> Result<Option<u64>, Reply> {
    let Some(value) = req.body.get("timeout").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let seconds = value
        .as_str()
        .and_then(|t| t.strip_suffix('s'))
        .and_then(|t| t.parse::<f64>().ok())
        .filter(|s| s.fract() == 0.0 && (1.0..=900.0).contains(s));
    match seconds {
        Some(s) => Ok(Some(s as u64)),
        None => Err(Reply::invalid(
            "timeout",
            "must be a duration of 1 to 900 whole seconds, such as \"300s\"",
        )),
    }
}

fn changes_of(req: &Req<'_>, update: bool) -> Result<Changes, Reply> {
    // `unknown_runtime`, `unknown_privacy`: the enums' zero values, which Scaleway's SDKs
    // send for "not said" and Scaleway takes as such.
    let said = |name: &str| req.str(name).filter(|v| !v.starts_with("unknown_"));
    let runtime = said("runtime").map(str::to_owned);
    if let Some(r) = runtime.as_deref().filter(|r| !RUNTIMES.contains(r)) {
        return Err(Reply::invalid("runtime", format!("unknown runtime {r:?}")));
    }
    let memory = number(req, "memory_limit", 128..=4096)?;
    if memory.is_some_and(|m| !TIERS.iter().any(|(mb, _)| *mb == m)) {
        return Err(Reply::invalid(
            "memory_limit",
            "must be one of 128, 256, 512, 1024, 2048, 3072, 4096",
        ));
    }
    let privacy = said("privacy").map(str::to_owned);
    if privacy
        .as_deref()
        .is_some_and(|p| p != "public" && p != "private")
    {
        return Err(Reply::invalid("privacy", "must be public or private"));
    }
    Ok(Changes {
        runtime,
        handler: req.str("handler").map(str::to_owned),
        memory,
        min_scale: number(req, "min_scale", 0..=50)?,
        max_scale: number(req, "max_scale", 1..=50)?,
        timeout: timeout_of(req)?,
        env: env_of(req)?,
        secrets: secrets_of(req, update)?,
        tags: tags_of(req)?,
        privacy,
        description: description_of(req)?,
    })
}

/// Applies what `changes` says to `function` (secret values aside).
fn apply(function: &mut Function, changes: Changes) -> Result<(), Reply> {
    let Changes {
        runtime,
        handler,
        memory,
        min_scale,
        max_scale,
        timeout,
        env,
        tags,
        privacy,
        description,
        secrets: _,
    } = changes;
    let min = min_scale.unwrap_or(function.min_scale);
    let max = max_scale.unwrap_or(function.max_scale);
    if min > max {
        return Err(Reply::invalid("min_scale", "cannot exceed max_scale"));
    }
    (function.min_scale, function.max_scale) = (min, max);
    function.runtime = runtime.unwrap_or(std::mem::take(&mut function.runtime));
    function.handler = handler.unwrap_or(std::mem::take(&mut function.handler));
    function.memory = memory.unwrap_or(function.memory);
    function.timeout = timeout.unwrap_or(function.timeout);
    function.env = env.unwrap_or(std::mem::take(&mut function.env));
    function.tags = tags.unwrap_or(std::mem::take(&mut function.tags));
    function.privacy = privacy.unwrap_or(std::mem::take(&mut function.privacy));
    function.description = description.unwrap_or(std::mem::take(&mut function.description));
    Ok(())
}

fn create(state: &mut State, req: &Req<'_>, region: &str) -> Reply {
    match create_checked(state, req, region) {
        Ok(reply) | Err(reply) => reply,
    }
}

fn create_checked(state: &mut State, req: &Req<'_>, region: &str) -> Result<Reply, Reply> {
    let namespace_id = req
        .str("namespace_id")
        .ok_or_else(|| Reply::invalid("namespace_id", "is required"))?;
    let name = name_of(req)?;
    let mut changes = changes_of(req, false)?;
    if changes.runtime.is_none() {
        return Err(Reply::invalid("runtime", "is required"));
    }
    let namespace = state
        .functions
        .namespaces
        .get(namespace_id)
        .filter(|n| n.region == region)
        .ok_or_else(|| missing("namespace", namespace_id))?;
    if namespace.status.status() != "ready" {
        return Err(Reply::transient(
            "namespace",
            namespace_id,
            namespace.status.status(),
        ));
    }
    let domain = format!(
        "{}{}-{name}.functions.fnc.{region}.scw.cloud",
        compact(&namespace.name),
        &namespace.id[..8]
    );
    let taken = state
        .functions
        .functions
        .values()
        .any(|f| f.namespace_id == namespace_id && f.name == name);
    if taken {
        return Err(Reply::exists("function", &name));
    }
    let (id, now) = (state.new_id(), state.timestamp());
    let mut function = Function {
        id: id.clone(),
        name,
        namespace_id: namespace_id.to_owned(),
        region: region.to_owned(),
        runtime: String::new(),
        handler: String::new(),
        memory: 256,
        min_scale: 0,
        max_scale: 20,
        timeout: 300,
        env: BTreeMap::new(),
        secrets: BTreeMap::new(),
        tags: Vec::new(),
        // What a create that says nothing gets: the default Scaleway documents.
        privacy: "public".to_owned(),
        description: String::new(),
        domain,
        status: Settling::settled("created"),
        failure: None,
        archive: None,
        deployed: None,
        created_at: now.clone(),
        updated_at: now,
        ready_at: None,
    };
    let secrets = changes.secrets.take().unwrap_or_default();
    apply(&mut function, changes)?;
    apply_secrets(&mut state.functions, &mut function.secrets, secrets);
    let body = function.json(function.status.status());
    state.functions.functions.insert(id, function);
    Ok(Reply::ok(body))
}

/// A read of function `id` in `region`; a deleted one is removed once its deletion has
/// settled.
fn get(state: &mut State, region: &str, id: &str) -> Reply {
    let functions = &mut state.functions.functions;
    let Some(function) = functions.get_mut(id).filter(|f| f.region == region) else {
        return missing("function", id);
    };
    let seen = function.status.status();
    if seen == GONE {
        functions.remove(id);
        return missing("function", id);
    }
    Reply::ok(function.json(seen))
}

/// The function `id` of `region`, if it is there and not busy.
fn writable<'s>(state: &'s mut State, region: &str, id: &str) -> Result<&'s mut Function, Reply> {
    let function = state
        .functions
        .functions
        .get_mut(id)
        .filter(|f| f.region == region)
        .ok_or_else(|| missing("function", id))?;
    if function.status.busy() {
        return Err(Reply::transient("function", id, function.status.status()));
    }
    Ok(function)
}

fn update(state: &mut State, req: &Req<'_>, region: &str, id: &str) -> Reply {
    match update_checked(state, req, region, id) {
        Ok(reply) | Err(reply) => reply,
    }
}

fn update_checked(
    state: &mut State,
    req: &Req<'_>,
    region: &str,
    id: &str,
) -> Result<Reply, Reply> {
    writable(state, region, id)?;
    let mut changes = changes_of(req, true)?;
    let redeploy = req.body.get("redeploy").and_then(Value::as_bool) != Some(false);
    let (now, pending) = (state.timestamp(), settling(state, "pending", "ready"));
    let mut stored = std::mem::take(&mut writable(state, region, id)?.secrets);
    apply_secrets(
        &mut state.functions,
        &mut stored,
        changes.secrets.take().unwrap_or_default(),
    );
    let function = writable(state, region, id)?;
    function.secrets = stored;
    apply(function, changes)?;
    function.updated_at = now;
    // A function with code is redeployed to apply the change.
    if redeploy && function.deployed.is_some() {
        function.status = pending;
        function.failure = None;
    }
    Ok(Reply::ok(function.json(function.status.status())))
}

fn delete(state: &mut State, region: &str, id: &str) -> Reply {
    let (settle, now) = (state.settle(), state.timestamp());
    let function = match writable(state, region, id) {
        Ok(f) => f,
        Err(refusal) => return refusal,
    };
    function.status = settle.after("deleting", GONE);
    function.updated_at = now;
    let body = function.json("deleting");
    state.functions.uploads.remove(id);
    Reply::ok(body)
}

/// `GET …/upload-url?content_length=N`: a presigned URL for exactly N bytes.
fn upload_url(state: &mut State, req: &Req<'_>, region: &str, id: &str) -> Reply {
    let length = req
        .param("content_length")
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| (1..=MAX_ARCHIVE).contains(n));
    let Some(length) = length else {
        return Reply::invalid(
            "content_length",
            "the archive's size in bytes is required (at most 100 MiB)",
        );
    };
    if let Err(refusal) = writable(state, region, id) {
        return refusal;
    }
    state.functions.uploads.insert(id.to_owned(), length);
    let signature = state.new_id();
    Reply::ok(json!({
        "url": format!(
            "{}{UPLOADS}{UPLOAD_PREFIX}{id}?X-Amz-Expires=3600&X-Amz-SignedHeaders=content-length&X-Amz-Signature={signature}",
            state.address
        ),
        "headers": {
            "content-length": [length.to_string()],
            "content-type": ["application/octet-stream"],
        },
    }))
}

/// `POST …/deploy`: the uploaded archive is built, `pending` then `ready` (`error` when
/// it is not a zip file).
fn deploy(state: &mut State, region: &str, id: &str) -> Reply {
    let (settle, now) = (state.settle(), state.timestamp());
    let function = match writable(state, region, id) {
        Ok(f) => f,
        Err(refusal) => return refusal,
    };
    let Some(archive) = function.archive.clone() else {
        return Reply::precondition(
            "function_code_missing",
            "no archive was uploaded to the function: upload one through its upload URL first",
        );
    };
    let outcome = if archive.zip { "ready" } else { "error" };
    function.failure = (!archive.zip).then(|| "the archive is not a zip file".to_owned());
    function.status = settle.after("pending", outcome);
    function.ready_at = archive.zip.then(|| now.clone());
    function.deployed = Some(archive);
    function.updated_at = now;
    Reply::ok(function.json(function.status.status()))
}

/// A `PUT` to `{UPLOADS}functions/{id}`: stores the archive when its size is the one
/// the URL was signed for (S3 answers another with 403 `SignatureDoesNotMatch`).
pub(super) fn upload(state: &mut State, method: &str, path: &str, bytes: &[u8]) -> Reply {
    let id = path
        .strip_prefix(UPLOADS)
        .and_then(|p| p.strip_prefix(UPLOAD_PREFIX))
        .unwrap_or_default();
    if method != "PUT" {
        return Reply::error(
            405,
            "MethodNotAllowed",
            "only PUT is allowed here",
            json!({}),
        );
    }
    let Some(&signed) = state.functions.uploads.get(id) else {
        return Reply::error(
            403,
            "AccessDenied",
            "no upload URL was handed out for this path",
            json!({}),
        );
    };
    if bytes.len() != signed {
        return Reply::error(
            403,
            "SignatureDoesNotMatch",
            format!(
                "the URL was signed for {signed} bytes and {} were sent",
                bytes.len()
            ),
            json!({}),
        );
    }
    let Some(function) = state.functions.functions.get_mut(id) else {
        return Reply::error(403, "AccessDenied", "the function is gone", json!({}));
    };
    function.archive = Some(Archive::of(bytes));
    Reply::ok(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archives_are_told_apart_and_zips_recognised() {
        let a = Archive::of(b"PK\x05\x06one");
        let b = Archive::of(b"PK\x05\x06two");
        assert_eq!(a.size, 7);
        assert_ne!(a.digest, b.digest);
        assert!(a.zip);
        assert!(!Archive::of(b"plain text").zip);
        assert_eq!(Archive::of(b"").digest, "cbf29ce484222325");
    }
}
