//! The simulated world: every resource of every provider, its indexes, and serving
//! calls on them. How the world is kept in its file is in `world_file`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::Path;
use std::time::Duration;

use infra_core::sdk::Reading;
use infra_core::{
    prelude::{Kind, SecretString},
    sdk::{BackendError, ErrorKind, MARKER_KEY, Marker, RawTags},
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::clouds;
use super::faults::{CallRecord, Fault, Faults, Op, Outcome, Verdict};
use super::kinds::{self, Site, TagShape};
use super::rate::RateLimits;
use super::rng::Rng;
use super::world_file::{WorldFile, WorldFileError};
use super::world_flush::Unflushed;
use super::world_journal::{self, ChangeIn, ChangeOut};

/// The schema version of the world file.
pub(crate) const FORMAT_VERSION: u32 = 1;
const FORMAT_NAME: &str = "infra-testkit simulated world";

/// One resource as the simulated cloud stores it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Stored {
    pub(crate) id: u64,
    pub(crate) provider: String,
    pub(crate) kind: String,
    pub(crate) region: String,
    pub(crate) name: String,
    pub(crate) handle: String,
    /// The configuration in force, camelCase, without tags (see `tags`).
    pub(crate) config: Map<String, Value>,
    /// The kind's observed state, as JSON.
    pub(crate) observed: Value,
    /// The raw tags, marker included.
    pub(crate) tags: RawTags,
    /// A secret's current value: the cloud's own storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) secret: Option<String>,
    /// `list` calls of its scope that will still miss it.
    #[serde(skip)]
    pub(crate) list_lag: u32,
}

impl Stored {
    /// The configuration in force as `read` reports it: the stored fields the provider
    /// reports for this kind ([`clouds`]), plus the tags (marker included) in the kind's
    /// shape.
    pub(crate) fn reported(&self) -> Map<String, Value> {
        let mut reported: Map<String, Value> = self
            .config
            .iter()
            .filter(|(field, _)| clouds::reports(&self.provider, &self.kind, field, &self.config))
            .map(|(field, value)| (field.clone(), value.clone()))
            .collect();
        match kinds::tag_shape(&self.kind) {
            TagShape::Map => {
                let tags: Map<String, Value> = self
                    .tags
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect();
                reported.insert("tags".into(), Value::Object(tags));
            }
            TagShape::Strings => {
                let tags: Vec<Value> = self
                    .tags
                    .iter()
                    .map(|(k, v)| {
                        Value::String(if v.is_empty() {
                            k.clone()
                        } else {
                            format!("{k}={v}")
                        })
                    })
                    .collect();
                reported.insert("tags".into(), Value::Array(tags));
            }
            TagShape::Hidden => {}
        }
        reported
    }

    /// A read of the resource as a `K`, its observed state checked against the kind's
    /// type.
    pub(crate) fn reading<K: Kind>(&self) -> Result<Reading<K>, BackendError> {
        Reading::from_json(self.handle.clone(), self.observed.clone(), self.reported())
    }
}

/// A spec made ready for the world before the call waits: its JSON, and for a secret
/// where its value comes from.
pub(crate) struct Prepared {
    pub(crate) config: Map<String, Value>,
    pub(crate) secret: Option<SecretInput>,
}

/// The value a `create` or `update` gives a secret.
pub(crate) enum SecretInput {
    /// This value, resolved by the caller.
    Value(String),
    /// A value the cloud generates, this many characters long, when the secret is
    /// created (an update keeps the value generated then).
    Generate(usize),
}

/// Raw tags from a spec's `tags` value: a map, or a list of `key=value` strings.
pub(crate) fn tags_from_json(value: &Value) -> RawTags {
    match value {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                (k.clone(), v)
            })
            .collect(),
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .map(|tag| match tag.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (tag.to_string(), String::new()),
            })
            .collect(),
        _ => RawTags::new(),
    }
}

/// The raw tags after an update asks for `asked`: those tags, with the marker kept as it
/// was (an update neither writes nor removes it).
fn retagged(current: &RawTags, asked: &Value) -> RawTags {
    let mut tags = tags_from_json(asked);
    tags.remove(MARKER_KEY);
    if let Some(marker) = current.get(MARKER_KEY) {
        tags.insert(MARKER_KEY.to_string(), marker.clone());
    }
    tags
}

fn strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

type NameKey = (String, &'static str, String, String);
type ScopeKey = (String, String, String);

/// Everything the simulated cloud holds, and how it behaves.
pub(crate) struct World {
    pub(crate) seed: u64,
    rng: Rng,
    next_id: u64,
    pub(crate) accounts: BTreeMap<String, String>,
    resources: BTreeMap<u64, Stored>,
    // Indexes, rebuilt on load.
    handles: HashMap<String, u64>,
    names: HashMap<NameKey, u64>,
    scopes: HashMap<ScopeKey, BTreeSet<u64>>,
    refs: HashMap<u64, BTreeSet<u64>>,
    dependants: HashMap<u64, BTreeSet<u64>>,
    /// The resources made, altered or removed since the world was last saved or read:
    /// the next journal line's.
    pub(super) dirty: BTreeSet<u64>,
    /// The file the world is kept in, if any.
    pub(super) file: Option<WorldFile>,
    /// The last call's journal line, written and waiting for its flush (with the
    /// journal's length before it), for the call to wait on outside the world's lock.
    pub(super) unflushed: Option<(Unflushed, u64)>,
    // Behaviour, not saved.
    pub(crate) faults: Faults,
    pub(crate) list_lag: u32,
    pub(crate) latency: Duration,
    pub(crate) latency_by_op: BTreeMap<Op, Duration>,
    /// Throttling by rate: a token bucket per API.
    pub(crate) rates: RateLimits,
    /// Every list answers names and handles only, as if no kind's list were complete.
    pub(crate) bare_lists: bool,
    denials: Vec<(String, Option<String>, Option<String>)>,
    log: Vec<CallRecord>,
    seq: u64,
}

impl fmt::Debug for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("World")
            .field("seed", &self.seed)
            .field("resources", &self.resources.len())
            .field("path", &self.path())
            .field("calls", &self.log.len())
            .finish()
    }
}

/// The world file's content.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FileOut<'a> {
    format: &'static str,
    version: u32,
    seed: u64,
    rng: &'a Rng,
    next_id: u64,
    accounts: &'a BTreeMap<String, String>,
    resources: Vec<&'a Stored>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileIn {
    #[serde(default)]
    #[allow(dead_code, reason = "read so that the file documents itself")]
    format: String,
    version: u32,
    seed: u64,
    rng: Rng,
    next_id: u64,
    accounts: BTreeMap<String, String>,
    resources: Vec<Stored>,
}

/// The error of a call whose world file could not be read, or saved.
fn file_failure(write: bool, e: &WorldFileError) -> BackendError {
    let message = if write {
        format!(
            "the simulated cloud could not save its world ({e}); the change was undone: \
             nothing was applied"
        )
    } else {
        format!("the simulated cloud could not read its world ({e})")
    };
    BackendError::new(ErrorKind::Other, message)
}

impl World {
    pub(crate) fn new(seed: u64) -> Self {
        let accounts = [
            ("aws", "sim-aws-000000000000"),
            ("gcp", "sim-gcp-project"),
            ("scaleway", "sim-scaleway-project"),
        ]
        .into_iter()
        .map(|(p, a)| (p.to_string(), a.to_string()))
        .collect();
        World {
            seed,
            rng: Rng::new(seed),
            next_id: 1,
            accounts,
            resources: BTreeMap::new(),
            handles: HashMap::new(),
            names: HashMap::new(),
            scopes: HashMap::new(),
            refs: HashMap::new(),
            dependants: HashMap::new(),
            dirty: BTreeSet::new(),
            file: None,
            unflushed: None,
            faults: Faults::new(seed),
            list_lag: 0,
            latency: Duration::ZERO,
            latency_by_op: BTreeMap::new(),
            rates: RateLimits::default(),
            bare_lists: false,
            denials: Vec::new(),
            log: Vec::new(),
            seq: 0,
        }
    }

    /// The world a file's bytes hold, with its journal's `changes` applied.
    pub(super) fn decode(
        path: &Path,
        bytes: &[u8],
        changes: &mut [ChangeIn],
    ) -> Result<Self, WorldFileError> {
        let mut file: FileIn =
            serde_json::from_slice(bytes).map_err(|e| WorldFileError::Malformed {
                path: path.to_path_buf(),
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            })?;
        let unsupported = |message: String| WorldFileError::Unsupported {
            path: path.to_path_buf(),
            message,
        };
        if file.version != FORMAT_VERSION {
            return Err(unsupported(format!(
                "the world file has schema version {}, this simulator reads version {FORMAT_VERSION}",
                file.version
            )));
        }
        if let Some(last) = changes.last() {
            let mut ids = BTreeSet::new();
            if let Some(twice) = file.resources.iter().find(|s| !ids.insert(s.id)) {
                return Err(unsupported(format!(
                    "resource {} ({}) appears twice",
                    twice.id, twice.handle
                )));
            }
            file.rng = last.rng.clone();
            file.next_id = last.next_id;
            file.accounts = last.accounts.clone();
            file.resources = world_journal::replay(std::mem::take(&mut file.resources), changes);
        }
        let mut world = World::new(file.seed);
        world.rng = file.rng;
        world.accounts = file.accounts;
        for stored in file.resources {
            if !kinds::kinds_of(&stored.provider).contains(&stored.kind.as_str()) {
                return Err(unsupported(format!(
                    "resource {} is a {} {}, which the simulator does not have",
                    stored.handle, stored.provider, stored.kind
                )));
            }
            if world.resources.contains_key(&stored.id)
                || world.handles.contains_key(&stored.handle)
            {
                return Err(unsupported(format!(
                    "resource {} ({}) appears twice",
                    stored.id, stored.handle
                )));
            }
            world.next_id = world.next_id.max(stored.id + 1);
            world.index(stored);
        }
        world.next_id = world.next_id.max(file.next_id);
        let ids: Vec<u64> = world.resources.keys().copied().collect();
        for id in ids {
            world.link(id);
        }
        world.dirty.clear();
        Ok(world)
    }

    /// The world file's content.
    pub(super) fn encode(&self) -> Vec<u8> {
        let file = FileOut {
            format: FORMAT_NAME,
            version: FORMAT_VERSION,
            seed: self.seed,
            rng: &self.rng,
            next_id: self.next_id,
            accounts: &self.accounts,
            resources: self.resources.values().collect(),
        };
        let mut bytes = serde_json::to_vec_pretty(&file).expect("a world serialises");
        bytes.push(b'\n');
        bytes
    }

    /// The journal line of every change since the world was last saved or read.
    pub(super) fn change_line(&self) -> Vec<u8> {
        let (put, drop): (Vec<u64>, Vec<u64>) = self
            .dirty
            .iter()
            .partition(|id| self.resources.contains_key(id));
        ChangeOut {
            rng: &self.rng,
            next_id: self.next_id,
            accounts: &self.accounts,
            put: put.iter().filter_map(|id| self.resources.get(id)).collect(),
            drop,
        }
        .line()
    }

    /// The file the world is kept in, if any.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.file.as_ref().map(WorldFile::path)
    }

    /// Takes `fresh`'s estate (seed, generator, accounts, resources) and keeps this
    /// world's behaviour (faults, denials, latency, the call log); a resource in both
    /// keeps its list lag.
    pub(super) fn adopt(&mut self, mut fresh: World) {
        for stored in fresh.resources.values_mut() {
            if let Some(old) = self.by_handle(&stored.handle) {
                stored.list_lag = old.list_lag;
            }
        }
        use std::mem::take;
        self.seed = fresh.seed;
        self.rng = std::mem::replace(&mut fresh.rng, Rng::new(0));
        self.next_id = fresh.next_id;
        self.accounts = take(&mut fresh.accounts);
        self.resources = take(&mut fresh.resources);
        self.handles = take(&mut fresh.handles);
        self.names = take(&mut fresh.names);
        self.scopes = take(&mut fresh.scopes);
        self.refs = take(&mut fresh.refs);
        self.dependants = take(&mut fresh.dependants);
        self.dirty.clear();
    }

    // ---- indexes ----

    fn name_key(stored: &Stored) -> Option<NameKey> {
        let (namespace, global) = kinds::name_scope(&stored.provider, &stored.kind)?;
        let region = if global {
            "*".to_string()
        } else {
            stored.region.clone()
        };
        Some((
            stored.provider.clone(),
            namespace,
            region,
            stored.name.clone(),
        ))
    }

    fn scope_key(stored: &Stored) -> ScopeKey {
        (
            stored.provider.clone(),
            stored.kind.clone(),
            stored.region.clone(),
        )
    }

    /// Adds a resource to the world and its indexes (references excepted: `link`).
    fn index(&mut self, stored: Stored) {
        let id = stored.id;
        self.handles.insert(stored.handle.clone(), id);
        if let Some(key) = Self::name_key(&stored) {
            self.names.insert(key, id);
        }
        self.scopes
            .entry(Self::scope_key(&stored))
            .or_default()
            .insert(id);
        self.resources.insert(id, stored);
        self.dirty.insert(id);
    }

    /// Records which other resources a resource's configuration names by handle.
    fn link(&mut self, id: u64) {
        self.unlink(id);
        let Some(stored) = self.resources.get(&id) else {
            return;
        };
        let mut found = Vec::new();
        stored.config.values().for_each(|v| strings(v, &mut found));
        let targets: BTreeSet<u64> = found
            .into_iter()
            .filter_map(|s| self.handles.get(s).copied())
            .filter(|target| *target != id)
            .collect();
        for target in &targets {
            self.dependants.entry(*target).or_default().insert(id);
        }
        if !targets.is_empty() {
            self.refs.insert(id, targets);
        }
    }

    fn unlink(&mut self, id: u64) {
        if let Some(targets) = self.refs.remove(&id) {
            for target in targets {
                if let Some(set) = self.dependants.get_mut(&target) {
                    set.remove(&id);
                    if set.is_empty() {
                        self.dependants.remove(&target);
                    }
                }
            }
        }
    }

    fn unindex(&mut self, id: u64) -> Option<Stored> {
        let stored = self.resources.remove(&id)?;
        self.dirty.insert(id);
        self.unlink(id);
        self.handles.remove(&stored.handle);
        if let Some(key) = Self::name_key(&stored) {
            self.names.remove(&key);
        }
        let scope = Self::scope_key(&stored);
        if let Some(set) = self.scopes.get_mut(&scope) {
            set.remove(&id);
            if set.is_empty() {
                self.scopes.remove(&scope);
            }
        }
        Some(stored)
    }

    // ---- direct access ----

    pub(crate) fn resources(&self) -> impl Iterator<Item = &Stored> {
        self.resources.values()
    }

    pub(crate) fn by_handle(&self, handle: &str) -> Option<&Stored> {
        self.handles
            .get(handle)
            .and_then(|id| self.resources.get(id))
    }

    pub(crate) fn by_handle_mut(&mut self, handle: &str) -> Option<&mut Stored> {
        let id = *self.handles.get(handle)?;
        self.dirty.insert(id);
        self.resources.get_mut(&id)
    }

    pub(crate) fn relink(&mut self, handle: &str) {
        if let Some(id) = self.handles.get(handle).copied() {
            self.link(id);
        }
    }

    pub(crate) fn remove(&mut self, handle: &str) -> Option<Stored> {
        let id = *self.handles.get(handle)?;
        self.unindex(id)
    }

    pub(crate) fn deny(&mut self, provider: &str, kind: Option<&str>, region: Option<&str>) {
        let rule = (
            provider.to_string(),
            kind.map(str::to_string),
            region.map(str::to_string),
        );
        if !self.denials.contains(&rule) {
            self.denials.push(rule);
        }
    }

    pub(crate) fn allow(&mut self, provider: &str, kind: Option<&str>, region: Option<&str>) {
        self.denials
            .retain(|(p, k, r)| !(p == provider && k.as_deref() == kind && r.as_deref() == region));
    }

    pub(crate) fn allow_all(&mut self) {
        self.denials.clear();
    }

    fn is_denied(&self, call: &CallRecord) -> bool {
        self.denials.iter().any(|(p, k, r)| {
            p == call.provider
                && k.as_deref().is_none_or(|k| Some(k) == call.kind)
                && r.as_deref()
                    .is_none_or(|r| Some(r) == call.region.as_deref())
        })
    }

    pub(crate) fn calls(&self) -> &[CallRecord] {
        &self.log
    }

    pub(crate) fn clear_calls(&mut self) {
        self.log.clear();
    }

    pub(crate) fn latency(&self, op: Op) -> Duration {
        self.latency_by_op.get(&op).copied().unwrap_or(self.latency)
    }

    pub(crate) fn account(&self, provider: &str) -> String {
        self.accounts.get(provider).cloned().unwrap_or_default()
    }

    // ---- serving calls ----

    /// Serves one call arriving at `now` (on the cloud's clock): counts it, lets the
    /// rate limit, the fault stage and the denials decide, runs `act` if they let it
    /// through, saves the world after a write, and logs the call.
    pub(crate) fn serve<T>(
        &mut self,
        mut call: CallRecord,
        now: Duration,
        act: impl FnOnce(&mut World, &mut CallRecord) -> Result<T, BackendError>,
    ) -> Result<T, BackendError> {
        self.seq += 1;
        call.seq = self.seq;
        let result = self.gate(&mut call, now, act);
        call.outcome = match &result {
            Ok(_) => Outcome::Ok,
            Err(e) => Outcome::Failed(e.kind),
        };
        self.log.push(call);
        result
    }

    fn gate<T>(
        &mut self,
        call: &mut CallRecord,
        now: Duration,
        act: impl FnOnce(&mut World, &mut CallRecord) -> Result<T, BackendError>,
    ) -> Result<T, BackendError> {
        let provider = call.provider;
        let api = (provider, call.kind, call.region.clone());
        let rates = &mut self.rates;
        let lose = match self.faults.judge(call, || rates.admit(api, now)) {
            Verdict::Crashed => {
                return Err(BackendError::new(
                    ErrorKind::Other,
                    "the process crashed before this call was sent (simulated crash point); \
                     nothing was applied",
                ));
            }
            Verdict::Hit(Fault::Fail {
                kind,
                may_have_been_sent,
            }) => {
                let mut e = BackendError::new(
                    kind,
                    format!(
                        "{provider} failed the request on its side ({kind}); it was not applied"
                    ),
                )
                .with_code(kinds::fault_code(provider, kind));
                e.may_have_been_sent = may_have_been_sent;
                return Err(e);
            }
            Verdict::Hit(Fault::Throttle) => {
                return Err(BackendError::new(
                    ErrorKind::Throttled,
                    "Rate exceeded: too many requests, slow down",
                )
                .with_code(kinds::fault_code(provider, ErrorKind::Throttled)));
            }
            Verdict::OverRate(wait) => return Err(kinds::over_rate(provider, call.kind, wait)),
            Verdict::Hit(Fault::LoseResponse) => true,
            Verdict::Pass => false,
        };
        let result = if self.is_denied(call) {
            Err(kinds::denied(provider, call.kind, call.op.name()))
        } else {
            self.act_on_file(call, act)
        };
        if result.is_ok() {
            call.applied = true;
        }
        if lose {
            return Err(BackendError::new(
                ErrorKind::Unavailable,
                "the connection was reset before the response arrived",
            )
            .with_code(kinds::fault_code(provider, ErrorKind::Unavailable))
            .maybe_sent());
        }
        result
    }

    /// Runs `act` on the world as its file holds it now; a write counts as made only
    /// once it is saved. A write that cannot be saved is undone and fails as not made
    /// (`may_have_been_sent` false): the world, in memory and on disk, is as it was
    /// before the call, which is the truth, and what a later call sees.
    fn act_on_file<T>(
        &mut self,
        call: &mut CallRecord,
        act: impl FnOnce(&mut World, &mut CallRecord) -> Result<T, BackendError>,
    ) -> Result<T, BackendError> {
        let write = call.op.is_write();
        let outcome = self.transact_unflushed(write, |w| {
            let result = act(w, call);
            let changed = write && result.is_ok();
            (result, changed)
        });
        match outcome {
            Ok((result, unflushed)) => {
                self.unflushed = unflushed;
                result
            }
            Err(e) => Err(file_failure(write, &e)),
        }
    }

    /// The resource of `kind` in `region` with `handle`, or the provider's `NotFound`.
    fn find(
        &self,
        provider: &str,
        kind: &str,
        region: &str,
        handle: &str,
    ) -> Result<u64, BackendError> {
        self.handles
            .get(handle)
            .copied()
            .filter(|id| {
                self.resources
                    .get(id)
                    .is_some_and(|s| s.provider == provider && s.kind == kind && s.region == region)
            })
            .ok_or_else(|| kinds::not_found(provider, kind, handle))
    }

    /// One page of a list of `provider`'s `kind` in `region`: at most `size`
    /// resources, in the order they were created, from the one after `after` (the
    /// page token: the id of the last resource the previous page answered; `None` for
    /// the first page). Returns the page, each item made by `item`, and the next
    /// page's token when there may be more. A resource still lagging behind its create
    /// is left out (and lags one list less).
    pub(crate) fn list_page<T>(
        &mut self,
        (provider, kind, region): (&str, &str, &str),
        after: Option<u64>,
        size: usize,
        mut item: impl FnMut(&Stored) -> Result<T, BackendError>,
    ) -> Result<(Vec<T>, Option<u64>), BackendError> {
        kinds::check_scope(provider, kind, region)?;
        let scope = (provider.to_string(), kind.to_string(), region.to_string());
        let Some(ids) = self.scopes.get(&scope) else {
            return Ok((Vec::new(), None));
        };
        let from = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        let mut page = Vec::new();
        let mut last = None;
        for id in ids.range((from, std::ops::Bound::Unbounded)) {
            if page.len() == size.max(1) {
                return Ok((page, last));
            }
            let Some(stored) = self.resources.get_mut(id) else {
                continue;
            };
            last = Some(*id);
            if stored.list_lag > 0 {
                stored.list_lag -= 1;
                continue;
            }
            page.push(item(stored)?);
        }
        Ok((page, None))
    }

    pub(crate) fn read(
        &self,
        call: &mut CallRecord,
        kind: &str,
        region: &str,
        handle: &str,
    ) -> Result<&Stored, BackendError> {
        kinds::check_scope(call.provider, kind, region)?;
        let id = self.find(call.provider, kind, region, handle)?;
        let stored = &self.resources[&id];
        call.name = Some(stored.name.clone());
        Ok(stored)
    }

    pub(crate) fn ownership(
        &self,
        call: &mut CallRecord,
        kind: &str,
        region: &str,
        handle: &str,
    ) -> Result<RawTags, BackendError> {
        kinds::check_scope(call.provider, kind, region)?;
        let id = self.find(call.provider, kind, region, handle)?;
        let stored = &self.resources[&id];
        call.name = Some(stored.name.clone());
        if !kinds::tags_readable(call.provider, kind) {
            return Err(kinds::unprovable(call.provider, kind));
        }
        Ok(stored.tags.clone())
    }

    pub(crate) fn secret_value(
        &self,
        call: &mut CallRecord,
        region: &str,
        handle: &str,
    ) -> Result<SecretString, BackendError> {
        kinds::check_scope(call.provider, "secrets", region)?;
        let id = self.find(call.provider, "secrets", region, handle)?;
        let stored = &self.resources[&id];
        call.name = Some(stored.name.clone());
        match &stored.secret {
            Some(value) => Ok(SecretString::new(value.clone())),
            None => Err(BackendError::not_found(format!(
                "the secret {handle} has no current version holding a value"
            ))
            .with_code(kinds::fault_code(call.provider, ErrorKind::NotFound))),
        }
    }

    fn site<'a>(
        &'a self,
        provider: &'a str,
        kind: &'a str,
        region: &'a str,
        name: &'a str,
    ) -> Site<'a> {
        Site {
            provider,
            kind,
            region,
            name,
            account: self.accounts.get(provider).map_or("", String::as_str),
            seed: self.seed,
        }
    }

    /// Stores a new resource: checks its name, fills in what the cloud decides, assigns
    /// its handle and observed state, and records its references. Returns its handle.
    pub(crate) fn insert(
        &mut self,
        provider: &str,
        kind: &str,
        region: &str,
        name: &str,
        prepared: Prepared,
        tags: RawTags,
    ) -> Result<String, BackendError> {
        kinds::check_scope(provider, kind, region)?;
        let probe = Stored {
            id: 0,
            provider: provider.to_string(),
            kind: kind.to_string(),
            region: region.to_string(),
            name: name.to_string(),
            handle: String::new(),
            config: Map::new(),
            observed: Value::Null,
            tags: RawTags::new(),
            secret: None,
            list_lag: 0,
        };
        if let Some(key) = Self::name_key(&probe)
            && self.names.contains_key(&key)
        {
            return Err(kinds::conflict(provider, kind, name));
        }
        let Prepared { mut config, secret } = prepared;
        config.remove("tags");
        let mut rng = self.rng.clone();
        let secret = secret.map(|input| match input {
            SecretInput::Value(value) => value,
            SecretInput::Generate(length) => rng.mixed(length),
        });
        let site = self.site(provider, kind, region, name);
        kinds::fill(&site, &mut config);
        let (handle, observed) = kinds::assign(&site, &config, &mut rng);
        if self.handles.contains_key(&handle) {
            // Only names can collide (two providers' handles never share a format).
            return Err(kinds::conflict(provider, kind, name));
        }
        self.rng = rng;
        let id = self.next_id;
        self.next_id += 1;
        let stored = Stored {
            id,
            handle: handle.clone(),
            config,
            observed,
            tags,
            secret,
            list_lag: self.list_lag,
            ..probe
        };
        self.index(stored);
        self.link(id);
        Ok(handle)
    }

    pub(crate) fn create(
        &mut self,
        call: &mut CallRecord,
        kind: &str,
        region: &str,
        name: &str,
        prepared: Result<Prepared, BackendError>,
        marker: &Marker,
    ) -> Result<&Stored, BackendError> {
        kinds::check_scope(call.provider, kind, region)?;
        let prepared = prepared?;
        let mut tags = prepared
            .config
            .get("tags")
            .map(tags_from_json)
            .unwrap_or_default();
        if kinds::tags_kept(call.provider, kind) {
            tags.insert(marker.key().to_string(), marker.value().to_string());
        } else if !tags.is_empty() {
            return Err(kinds::no_tags(call.provider, kind));
        }
        let handle = self.insert(call.provider, kind, region, name, prepared, tags)?;
        call.handle = Some(handle.clone());
        Ok(&self.resources[&self.handles[&handle]])
    }

    pub(crate) fn update(
        &mut self,
        call: &mut CallRecord,
        kind: &str,
        region: &str,
        handle: &str,
        prepared: Result<Prepared, BackendError>,
    ) -> Result<&Stored, BackendError> {
        let provider = call.provider;
        kinds::check_scope(provider, kind, region)?;
        let id = self.find(provider, kind, region, handle)?;
        let Prepared {
            config: mut asked,
            secret,
        } = prepared?;
        let seed = self.seed;
        let account = self.account(provider);
        let mut rng = self.rng.clone();
        let stored = self
            .resources
            .get_mut(&id)
            .ok_or_else(|| kinds::not_found(provider, kind, handle))?;
        call.name = Some(stored.name.clone());
        let asked_tags = asked.remove("tags");
        if !kinds::tags_kept(provider, kind)
            && asked_tags
                .as_ref()
                .is_some_and(|t| t.as_object().is_some_and(|m| !m.is_empty()))
        {
            return Err(kinds::no_tags(provider, kind));
        }
        kinds::drop_instructions(provider, kind, &mut asked);
        // A change the cloud cannot make refuses the whole update: nothing is applied.
        for (field, value) in &asked {
            if let Some(refusal) =
                clouds::refusal(provider, kind, field, stored.config.get(field), value)
            {
                return Err(refusal.error(provider, handle, field));
            }
        }
        let before = (
            stored.config.clone(),
            stored.tags.clone(),
            stored.secret.clone(),
        );
        if let Some(value) = asked_tags {
            stored.tags = retagged(&stored.tags, &value);
        }
        let mut config = stored.config.clone();
        for field in kinds::rederived(provider, kind) {
            if !asked.contains_key(*field) {
                config.remove(*field);
            }
        }
        config.extend(asked);
        let site = Site {
            provider,
            kind,
            region,
            name: &stored.name,
            account: &account,
            seed,
        };
        kinds::fill(&site, &mut config);
        stored.config = config;
        match secret {
            Some(SecretInput::Value(value)) => stored.secret = Some(value),
            Some(SecretInput::Generate(length)) if stored.secret.is_none() => {
                stored.secret = Some(rng.mixed(length));
            }
            _ => {}
        }
        if before
            != (
                stored.config.clone(),
                stored.tags.clone(),
                stored.secret.clone(),
            )
        {
            kinds::bump_version(provider, kind, &mut stored.observed, &mut rng);
        }
        self.rng = rng;
        self.link(id);
        Ok(&self.resources[&id])
    }

    pub(crate) fn delete(
        &mut self,
        call: &mut CallRecord,
        kind: &str,
        region: &str,
        handle: &str,
    ) -> Result<(), BackendError> {
        kinds::check_scope(call.provider, kind, region)?;
        let id = self.find(call.provider, kind, region, handle)?;
        call.name = Some(self.resources[&id].name.clone());
        let dependant = self
            .dependants
            .get(&id)
            .into_iter()
            .flatten()
            .find_map(|d| self.resources.get(d));
        if let Some(d) = dependant {
            return Err(kinds::dependency_violation(
                call.provider,
                kind,
                handle,
                (&d.kind, &d.name, &d.handle),
            ));
        }
        self.unindex(id);
        Ok(())
    }
}
