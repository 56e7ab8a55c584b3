//! The `Backend` SDK: what a provider implements so the engine can reach its cloud.
//!
//! A backend serves one provider, in any of its regions: every call names the kind and
//! the region. The engine calls `list` and `read` to observe, `ownership` before it
//! claims or deletes anything, and `create`, `update` and `delete` to act. Specs reach a
//! backend settled and typed ([`SettledSpec::get`]); what it reads comes back typed too
//! ([`Sighting::of`]). Types are erased only between the two.
//!
//! Every method's documentation has a **Behavior** section: those sentences are what the
//! conformance suite of `infra-testkit` checks a backend against.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use crate::sdk::Written;
use crate::{BackendError, ErrorKind, Kind, SecretString};

/// Raw tags (labels) of a resource, as the cloud holds them.
pub type RawTags = BTreeMap<String, String>;

/// The key of the ownership marker tag written on every resource the engine creates.
pub const MARKER_KEY: &str = "managed-by-infra";

/// The marker value written before fleets had names. It matches every fleet, for ever:
/// the alternative would turn a whole estate foreign the day its fleet is named.
pub const LEGACY_MARKER_VALUE: &str = "true";

/// The ownership marker of one fleet: `managed-by-infra = <fleet name>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marker {
    fleet: String,
    /// The fleet whose marker this one replaces, when records move between fleets.
    replaces: Option<String>,
}

/// What a resource's tags say about who owns it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase", tag = "owner")]
pub enum Ownership {
    /// It carries this fleet's marker (or the legacy value).
    Ours,
    /// It carries the marker of another fleet.
    OtherFleet {
        /// The other fleet's name.
        fleet: String,
    },
    /// It carries no marker: nothing says this tool created it.
    Unmarked,
}

impl Marker {
    /// The marker of the fleet named `fleet`.
    pub fn new(fleet: impl Into<String>) -> Self {
        Marker {
            fleet: fleet.into(),
            replaces: None,
        }
    }

    /// The same marker, handed over from fleet `from` (`records move`): a
    /// [`Backend::mark`] with it replaces `from`'s marker on a resource, where it would
    /// otherwise refuse a resource of another fleet.
    pub fn handed_over_from(mut self, from: impl Into<String>) -> Self {
        self.replaces = Some(from.into());
        self
    }

    /// The fleet whose marker this one replaces, if it is handed over
    /// ([`Marker::handed_over_from`]).
    pub fn replaces(&self) -> Option<&str> {
        self.replaces.as_deref()
    }

    /// The tag key (`managed-by-infra`).
    pub fn key(&self) -> &'static str {
        MARKER_KEY
    }

    /// The tag value: the fleet's name.
    pub fn value(&self) -> &str {
        &self.fleet
    }

    /// The marker as a single `key=value` string, for clouds whose tags are plain
    /// strings.
    pub fn as_string_tag(&self) -> String {
        format!("{MARKER_KEY}={}", self.fleet)
    }

    /// Who owns a resource carrying `tags`.
    pub fn verdict(&self, tags: &RawTags) -> Ownership {
        match tags.get(MARKER_KEY) {
            None => Ownership::Unmarked,
            Some(v) if v == &self.fleet || v == LEGACY_MARKER_VALUE => Ownership::Ours,
            Some(other) => Ownership::OtherFleet {
                fleet: other.clone(),
            },
        }
    }
}

/// Removes the ownership marker from a reported configuration, so that bookkeeping
/// never reaches the comparison with a declaration: from a `tags` map, and from a `tags`
/// list of `key=value` strings.
pub fn strip_marker(reported: &mut serde_json::Map<String, serde_json::Value>) {
    use serde_json::Value;
    match reported.get_mut("tags") {
        Some(Value::Object(tags)) => {
            tags.remove(MARKER_KEY);
        }
        Some(Value::Array(tags)) => tags.retain(|t| {
            !t.as_str().is_some_and(|s| {
                s == MARKER_KEY
                    || s.starts_with(&format!("{MARKER_KEY}="))
                    || s.starts_with(&format!("{MARKER_KEY}:"))
            })
        }),
        _ => {}
    }
}

/// One resource a `list` found.
///
/// A list whose API answers whole objects may hand over the resource's complete read
/// with it ([`Listed::with_reading`]): the engine then makes no `read` for it. Two
/// `Listed` are equal when their name and handle are; the reading is not compared.
#[derive(Clone, Debug)]
pub struct Listed {
    /// The name it is known by (the name a fleet declares).
    pub name: String,
    /// The handle to read, update and delete it by.
    pub handle: String,
    /// The resource's complete read, when the list answered it whole.
    reading: Option<Box<Sighting>>,
    /// The resource's raw tags, when the list (or a tag index beside it) answered them.
    raw_tags: Option<RawTags>,
}

impl Listed {
    /// A resource a list found under `name`, to be read by `handle`.
    pub fn new(name: impl Into<String>, handle: impl Into<String>) -> Self {
        Listed {
            name: name.into(),
            handle: handle.into(),
            reading: None,
            raw_tags: None,
        }
    }

    /// The same resource with its complete read, taken from the list's own answer.
    ///
    /// Hand one over only when the listed object carries everything a `read` of the
    /// resource would answer: the observed state, every reported field and, for a kind
    /// whose tags are readable, the raw tags ([`Sighting::with_raw_tags`]) — a reading
    /// without them costs an `ownership` call instead. The conformance suite compares
    /// each such reading with a `read` of the same resource.
    pub fn with_reading(mut self, reading: impl Into<Sighting>) -> Self {
        self.reading = Some(Box::new(reading.into()));
        self
    }

    /// The same resource with its raw tags (marker included), for a list that learns
    /// them without a call per resource (a tag index queried once per region): a read
    /// that carries no tags of its own is then judged on these, and no `ownership` call
    /// is made. Hand over the resource's *whole* tag set, or an empty one for a
    /// resource known to carry no tag the index was asked for — never a guess.
    pub fn with_raw_tags(mut self, tags: RawTags) -> Self {
        self.raw_tags = Some(tags);
        self
    }

    /// The raw tags the list handed over, if any.
    pub fn raw_tags(&self) -> Option<&RawTags> {
        self.raw_tags.as_ref()
    }

    /// The complete read the list handed over, if any.
    pub fn reading(&self) -> Option<&Sighting> {
        self.reading.as_deref()
    }

    /// Takes the complete read out, leaving the name and handle.
    pub fn take_reading(&mut self) -> Option<Sighting> {
        self.reading.take().map(|b| *b)
    }

    /// Takes the raw tags out.
    pub(crate) fn take_raw_tags(&mut self) -> Option<RawTags> {
        self.raw_tags.take()
    }

    pub(crate) fn set_raw_tags(&mut self, tags: RawTags) {
        self.raw_tags = Some(tags);
    }

    /// Takes out what the list handed over, keeping the raw tags it told (alone, or
    /// with a reading): all that telling whose the resource is needs.
    pub(crate) fn listed_tags(&mut self) -> Option<RawTags> {
        let reading = self.reading.take();
        self.raw_tags
            .take()
            .or_else(|| reading.and_then(|r| r.raw_tags().cloned()))
    }
}

impl PartialEq for Listed {
    fn eq(&self, other: &Self) -> bool {
        (&self.name, &self.handle) == (&other.name, &other.handle)
    }
}

impl Eq for Listed {}

impl PartialOrd for Listed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Listed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (&self.name, &self.handle).cmp(&(&other.name, &other.handle))
    }
}

/// One read of one resource: its handle, what the cloud computed (the kind's
/// `Observed`), and the configuration in force (the kind's `Reported`).
///
/// Cheap to clone: what was read is shared, not copied, and the observed state is
/// turned into JSON only when something asks for it (the cache, a plan file).
#[derive(Clone)]
pub struct Sighting {
    /// The resource's handle.
    pub handle: String,
    read: Arc<Read>,
}

/// What a sighting shares between its clones.
#[derive(Clone)]
struct Read {
    observed: Arc<dyn Any + Send + Sync>,
    /// The observed state as JSON, made from `observed` on first use.
    observed_json: std::sync::OnceLock<serde_json::Value>,
    to_json: fn(&(dyn Any + Send + Sync)) -> serde_json::Value,
    reported: serde_json::Map<String, serde_json::Value>,
    raw_tags: Option<RawTags>,
    /// What this fleet last wrote of fields the cloud does not report (kept in the
    /// cache): compared in their place, since a declared change to such a field is
    /// otherwise invisible.
    recalled: Option<Recalled>,
}

/// What a sighting recalls of the fields its cloud does not report.
#[derive(Clone)]
enum Recalled {
    /// Its own copy (boxed: most sightings recall nothing).
    Own(Box<serde_json::Map<String, serde_json::Value>>),
    /// The `written` of the cache entry at this place, none of whose fields the cloud
    /// reports: shared with the records the run read, not copied.
    Entry(Arc<Vec<crate::CacheEntry>>, usize),
}

impl Recalled {
    fn map(&self) -> &serde_json::Map<String, serde_json::Value> {
        match self {
            Recalled::Own(map) => map,
            Recalled::Entry(entries, at) => &entries[*at].written,
        }
    }
}

/// The observed state of a `K` as JSON (`null` if it is not one, or does not
/// serialise).
fn observed_json<K: Kind>(value: &(dyn Any + Send + Sync)) -> serde_json::Value {
    value
        .downcast_ref::<K::Observed>()
        .and_then(|v| serde_json::to_value(v).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// What a sighting that recalls nothing recalls.
static NOTHING_RECALLED: std::sync::LazyLock<serde_json::Map<String, serde_json::Value>> =
    std::sync::LazyLock::new(serde_json::Map::new);

impl fmt::Debug for Sighting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sighting")
            .field("handle", &self.handle)
            .field("observed", self.observed_json())
            .field("reported", &self.read.reported)
            .finish()
    }
}

impl Sighting {
    /// A sighting of a resource of kind `K`.
    pub fn of<K: Kind>(
        handle: impl Into<String>,
        observed: K::Observed,
        reported: K::Reported,
    ) -> Self {
        let reported = match serde_json::to_value(&reported) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        Sighting {
            handle: handle.into(),
            read: Arc::new(Read {
                observed: Arc::new(observed),
                observed_json: std::sync::OnceLock::new(),
                to_json: observed_json::<K>,
                reported,
                raw_tags: None,
                recalled: None,
            }),
        }
    }

    /// The same sighting carrying the resource's raw tags (marker included), for a
    /// backend whose read returns them anyway: the engine then decides ownership from
    /// them instead of calling `ownership` (the marker is still read again right
    /// before any delete).
    pub fn with_raw_tags(mut self, tags: RawTags) -> Self {
        Arc::make_mut(&mut self.read).raw_tags = Some(tags);
        self
    }

    /// The raw tags, if the backend gave them with the read.
    pub fn raw_tags(&self) -> Option<&RawTags> {
        self.read.raw_tags.as_ref()
    }

    /// A sighting of a resource of kind `K` from JSON: the observed state as the kind's
    /// `Observed` type serialises, and the reported configuration as a map of camelCase
    /// field names to values (a field left out was not reported). For backends that
    /// hold their state as JSON.
    pub fn from_json<K: Kind>(
        handle: impl Into<String>,
        observed: serde_json::Value,
        reported: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self, BackendError> {
        let typed: K::Observed = serde_json::from_value(observed.clone()).map_err(|e| {
            BackendError::invalid(format!(
                "observed state of a {} does not fit its type: {e}",
                K::ID
            ))
        })?;
        Ok(Sighting {
            handle: handle.into(),
            read: Arc::new(Read {
                observed: Arc::new(typed),
                observed_json: std::sync::OnceLock::from(observed),
                to_json: observed_json::<K>,
                reported,
                raw_tags: None,
                recalled: None,
            }),
        })
    }

    /// The observed state, if the sighting is of kind `K`.
    pub fn observed<K: Kind>(&self) -> Option<&K::Observed> {
        self.read.observed.downcast_ref()
    }

    pub(crate) fn observed_arc(&self) -> Arc<dyn Any + Send + Sync> {
        Arc::clone(&self.read.observed)
    }

    /// The observed state, type-erased (for settling other resources' expressions).
    pub fn observed_any(&self) -> &(dyn Any + Send + Sync) {
        &*self.read.observed
    }

    /// The observed state as JSON (what the cache records).
    pub fn observed_json(&self) -> &serde_json::Value {
        let read = &*self.read;
        read.observed_json
            .get_or_init(|| (read.to_json)(&*read.observed))
    }

    /// The reported configuration as JSON: only the fields the cloud said, camelCase.
    pub fn reported(&self) -> &serde_json::Map<String, serde_json::Value> {
        &self.read.reported
    }

    /// What this fleet last wrote of the fields the cloud does not report.
    pub fn recalled(&self) -> &serde_json::Map<String, serde_json::Value> {
        self.read
            .recalled
            .as_ref()
            .map_or(&NOTHING_RECALLED, Recalled::map)
    }

    /// The same sighting, remembering `written` for the fields the cloud did not
    /// report (a field it reports is left to the cloud).
    pub(crate) fn recalling(
        mut self,
        written: &serde_json::Map<String, serde_json::Value>,
    ) -> Self {
        self.recall(written);
        self
    }

    /// Remembers `written` for the fields the cloud did not report, in place.
    pub(crate) fn recall(&mut self, written: &serde_json::Map<String, serde_json::Value>) {
        let recalled: serde_json::Map<String, serde_json::Value> = written
            .iter()
            .filter(|(k, _)| !self.read.reported.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if recalled.is_empty() && self.read.recalled.is_none() {
            return;
        }
        Arc::make_mut(&mut self.read).recalled =
            (!recalled.is_empty()).then(|| Recalled::Own(Box::new(recalled)));
    }

    /// [`Sighting::recall`] of what the cache entry at `at` of `entries` says was
    /// written, sharing it when the cloud reports none of its fields (what a
    /// recall would copy is then all of it).
    pub(crate) fn recall_entry(&mut self, entries: &Arc<Vec<crate::CacheEntry>>, at: usize) {
        let written = &entries[at].written;
        if written.is_empty() || written.keys().any(|k| self.read.reported.contains_key(k)) {
            self.recall(written);
            return;
        }
        Arc::make_mut(&mut self.read).recalled = Some(Recalled::Entry(Arc::clone(entries), at));
    }

    /// What the comparison with a declaration reads of one field: what the cloud
    /// reports, and for a field it does not report, what this fleet last wrote there.
    /// Looked up in both maps in turn, not merged into a copy.
    pub(crate) fn compared(&self, field: &str) -> Option<&serde_json::Value> {
        let read = &*self.read;
        read.reported
            .get(field)
            .or_else(|| read.recalled.as_ref().and_then(|r| r.map().get(field)))
    }

    /// The same sighting with the ownership marker stripped from its reported tags.
    pub(crate) fn without_marker(mut self) -> Self {
        let carries = match self.read.reported.get("tags") {
            Some(serde_json::Value::Object(tags)) => tags.contains_key(MARKER_KEY),
            Some(serde_json::Value::Array(_)) => true,
            _ => false,
        };
        if carries {
            strip_marker(&mut Arc::make_mut(&mut self.read).reported);
        }
        self
    }
}

/// A settled spec handed to `create` or `update`, of the kind the call names.
#[derive(Clone, Copy)]
pub struct SettledSpec<'a> {
    kind: &'static str,
    value: &'a (dyn Any + Send + Sync),
    to_json: fn(&(dyn Any + Send + Sync)) -> serde_json::Value,
}

pub(crate) fn settled_json<K: Kind>(value: &(dyn Any + Send + Sync)) -> serde_json::Value {
    value
        .downcast_ref::<K::Settled>()
        .and_then(|v| serde_json::to_value(v).ok())
        .unwrap_or(serde_json::Value::Null)
}

impl fmt::Debug for SettledSpec<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SettledSpec({})", self.kind)
    }
}

impl<'a> SettledSpec<'a> {
    /// Wraps a settled spec of kind `K`.
    pub fn new<K: Kind>(settled: &'a K::Settled) -> Self {
        SettledSpec {
            kind: K::ID,
            value: settled,
            to_json: settled_json::<K>,
        }
    }

    /// The settled spec as JSON (camelCase, unsaid fields left out, handles as
    /// strings, secret values redacted).
    pub fn to_json(&self) -> serde_json::Value {
        (self.to_json)(self.value)
    }

    /// A settled spec whose kind was erased by the engine.
    pub(crate) fn erased(
        kind: &'static str,
        value: &'a (dyn Any + Send + Sync),
        to_json: fn(&(dyn Any + Send + Sync)) -> serde_json::Value,
    ) -> Self {
        SettledSpec {
            kind,
            value,
            to_json,
        }
    }

    /// The kind's id.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The typed settled spec; `Invalid` if the spec is of another kind.
    pub fn get<K: Kind>(&self) -> Result<&'a K::Settled, BackendError> {
        self.value.downcast_ref().ok_or_else(|| {
            BackendError::invalid(format!(
                "a {} spec was handed to a call for kind {}",
                self.kind,
                K::ID
            ))
        })
    }
}

/// What a backend can do, per kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// Kinds the backend realises. Any other kind ends `NotAttempted(UnsupportedKind)`.
    pub kinds: BTreeSet<&'static str>,
    /// Kinds whose tags the backend can read, so that ownership can be checked. An
    /// owned orphan of another kind cannot be safely deleted (`NotPrunable`).
    pub ownership: BTreeSet<&'static str>,
    /// Kinds whose names need not be unique in a region, so that a replace may create
    /// the new resource before deleting the old one.
    pub duplicate_names: BTreeSet<&'static str>,
    /// Kinds whose `list` answers each resource with its complete read
    /// ([`Listed::with_reading`]), so that observing them costs a list per page and no
    /// read per resource.
    pub complete_lists: BTreeSet<&'static str>,
}

impl Capabilities {
    /// Capabilities covering `kinds`, with ownership readable for all of them and no
    /// duplicate names.
    pub fn with_kinds(kinds: impl IntoIterator<Item = &'static str>) -> Self {
        let kinds: BTreeSet<_> = kinds.into_iter().collect();
        Capabilities {
            ownership: kinds.clone(),
            kinds,
            duplicate_names: BTreeSet::new(),
            complete_lists: BTreeSet::new(),
        }
    }
}

/// A provider's access to its cloud.
///
/// Implementations must be cheap to share (`Arc<dyn Backend>`) and safe to call
/// concurrently: the engine keeps several calls in flight.
#[async_trait]
pub trait Backend: Send + Sync {
    /// The provider this backend serves (`aws`).
    fn provider(&self) -> &'static str;

    /// What the backend can do.
    fn capabilities(&self) -> Capabilities;

    /// `Some(why)` when the backend cannot reach its cloud at all (no credentials were
    /// loaded): the engine then refuses an apply that would have to touch it.
    ///
    /// # Behavior
    /// - A backend that can make calls answers `None`, including a test double.
    /// - A backend standing in for missing credentials answers `Some`, with a sentence
    ///   naming what is missing.
    fn unreachable(&self) -> Option<String> {
        None
    }

    /// The account (project, organisation) the credentials act in.
    ///
    /// # Behavior
    /// - Answers the same id on every call.
    async fn account(&self) -> Result<String, BackendError>;

    /// Everything of `kind` in `region`.
    ///
    /// # Behavior
    /// - Lists resources whatever their owner; ownership is a separate question.
    /// - An empty region answers an empty list, not `NotFound`.
    /// - A denied listing is `Denied`, never an empty list.
    /// - May miss a resource created moments ago (eventual consistency).
    async fn list(&self, kind: &'static str, region: &str) -> Result<Vec<Listed>, BackendError>;

    /// One resource's observed state and reported configuration.
    ///
    /// # Behavior
    /// - A resource that does not exist is `NotFound`, recognised from a curated list
    ///   of the provider's codes; a permission error is `Denied`, never `NotFound`.
    /// - A field the cloud does not report is `Unknown` in the reported configuration,
    ///   never a sentinel (`""`, `0`, a blank handle).
    /// - The reported tags include the ownership marker; the engine strips it.
    /// - Raw tags carried with the read ([`Sighting::with_raw_tags`]) are what
    ///   `ownership` would answer.
    /// - A secret's value is never read here.
    async fn read(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<Sighting, BackendError>;

    /// Creates a resource named `name` and returns a read of it, or a deferral
    /// ([`Written::Deferred`]: the change was recorded, for a person to approve, say,
    /// and nothing was created yet).
    ///
    /// # Behavior
    /// - Writes the ownership marker as part of the creating call itself where the API
    ///   allows, so that no crash can leave an unmarked resource behind.
    /// - Fills in what the cloud assigns (ids, endpoints) and resolves instructions
    ///   (an image of `latest`).
    /// - A name already taken is `Conflict`.
    /// - A timeout or lost response is an error with `may_have_been_sent`.
    async fn create(
        &self,
        kind: &'static str,
        region: &str,
        name: &str,
        spec: SettledSpec<'_>,
        marker: &Marker,
    ) -> Result<Written, BackendError>;

    /// Brings a resource's configuration to `spec` in place and returns a read of it, or
    /// a deferral ([`Written::Deferred`]).
    ///
    /// # Behavior
    /// - Keeps the ownership marker.
    /// - A resource that does not exist is `NotFound`.
    /// - Idempotent: the same update twice leaves the same state.
    async fn update(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
        spec: SettledSpec<'_>,
    ) -> Result<Written, BackendError>;

    /// Deletes a resource.
    ///
    /// # Behavior
    /// - A resource something else still depends on is `DependencyViolation`, and is
    ///   left as it was.
    /// - A resource that does not exist is `NotFound`.
    async fn delete(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<(), BackendError>;

    /// A resource's raw tags, marker included, for the ownership check.
    ///
    /// # Behavior
    /// - Returns the tags as stored, without stripping anything.
    /// - A resource that does not exist is `NotFound`.
    async fn ownership(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<RawTags, BackendError>;

    /// The value of a secret of this fleet: the only way plaintext enters the engine.
    /// It is used for one create or update and never stored.
    ///
    /// # Behavior
    /// - Reads the current version's value of a `secrets` resource.
    async fn secret_value(&self, region: &str, handle: &str) -> Result<SecretString, BackendError>;

    /// Puts this fleet's ownership marker on a resource that exists already (one made
    /// by another tool, taken over by `import-tfstate`), changing nothing else.
    ///
    /// # Behavior
    /// - Writes the marker tag and leaves every other tag, and the configuration, as
    ///   they were; the next `ownership` returns the marker.
    /// - Idempotent: marking a resource twice leaves the same tags; a resource that
    ///   already carries this fleet's marker (or the legacy value) is left as it is.
    /// - A resource carrying another fleet's marker is `Conflict`, its tags unchanged:
    ///   taking a resource from another fleet is never a side effect. The one exception
    ///   is a marker handed over from that very fleet ([`Marker::handed_over_from`], as
    ///   `records move` writes it): its marker is replaced with this one, and nothing
    ///   else changes. A provider that does not replace markers answers `Conflict` to
    ///   a hand-over too, which refuses the move of that resource and changes nothing.
    /// - A resource that does not exist is `NotFound`.
    /// - A provider that cannot write tags on the kind answers `Invalid`, changing
    ///   nothing. The default does so for every kind: a provider that does not implement
    ///   this method cannot have resources taken over.
    async fn mark(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
        marker: &Marker,
    ) -> Result<(), BackendError> {
        let _ = (region, handle, marker);
        Err(BackendError::new(
            ErrorKind::Invalid,
            format!(
                "the {} provider cannot put an ownership marker on an existing {kind}",
                self.provider()
            ),
        ))
    }

    /// What the provider must do before it can write `kind` in `region` — a product
    /// switched on for the account, credentials made for it — for a plan to show.
    ///
    /// # Behavior
    /// - Changes nothing: it only looks.
    /// - Answers nothing once what it names is done; the default answers nothing.
    /// - A write that needs a prerequisite does it itself, idempotently, and never
    ///   silently: whatever it will do was answered here first, so a plan shows it.
    async fn prerequisites(
        &self,
        kind: &'static str,
        region: &str,
    ) -> Result<Vec<Prerequisite>, BackendError> {
        let _ = (kind, region);
        Ok(Vec::new())
    }
}

/// Something a provider does before its first write of a kind in a region (a product
/// activated for the project, credentials made for it), as a plan shows it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Prerequisite {
    /// What will be done, in one sentence (`Queues' SQS API will be activated for
    /// project 1a2b…`).
    pub what: String,
}

impl Prerequisite {
    /// A prerequisite described by `what`.
    pub fn new(what: impl Into<String>) -> Self {
        Prerequisite { what: what.into() }
    }
}

/// The backends of a fleet's providers, by provider id.
#[derive(Clone, Default)]
pub struct Backends {
    by_provider: BTreeMap<&'static str, Arc<dyn Backend>>,
}

impl fmt::Debug for Backends {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.by_provider.keys()).finish()
    }
}

impl Backends {
    /// No backends.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a backend for its provider (replacing any earlier one).
    pub fn with(mut self, backend: Arc<dyn Backend>) -> Self {
        self.by_provider.insert(backend.provider(), backend);
        self
    }

    /// Adds a backend for its provider (replacing any earlier one).
    pub fn insert(&mut self, backend: Arc<dyn Backend>) {
        self.by_provider.insert(backend.provider(), backend);
    }

    /// The backend of a provider: for a declared resource (routed by its placement's
    /// region) and for an orphan (routed by the region its ledger row recorded) alike,
    /// since every call names its region.
    pub fn get(&self, provider: &str) -> Option<&Arc<dyn Backend>> {
        self.by_provider.get(provider)
    }

    /// The providers with a backend.
    pub fn providers(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.by_provider.keys().copied()
    }
}

/// A backend for a provider whose credentials were not loaded: every call fails, and
/// [`Backend::unreachable`] says why, so that the engine refuses to act on the
/// provider rather than read its silence as agreement.
#[derive(Clone, Debug)]
pub struct Unreachable {
    provider: &'static str,
    why: String,
}

impl Unreachable {
    /// A stand-in for `provider`, unreachable for the reason given.
    pub fn new(provider: &'static str, why: impl Into<String>) -> Self {
        Unreachable {
            provider,
            why: why.into(),
        }
    }

    fn refuse(&self) -> BackendError {
        BackendError::new(
            ErrorKind::Denied,
            format!("{} is unreachable: {}", self.provider, self.why),
        )
    }
}

#[async_trait]
impl Backend for Unreachable {
    fn provider(&self) -> &'static str {
        self.provider
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }
    fn unreachable(&self) -> Option<String> {
        Some(self.why.clone())
    }
    async fn account(&self) -> Result<String, BackendError> {
        Err(self.refuse())
    }
    async fn list(&self, _: &'static str, _: &str) -> Result<Vec<Listed>, BackendError> {
        Err(self.refuse())
    }
    async fn read(&self, _: &'static str, _: &str, _: &str) -> Result<Sighting, BackendError> {
        Err(self.refuse())
    }
    async fn create(
        &self,
        _: &'static str,
        _: &str,
        _: &str,
        _: SettledSpec<'_>,
        _: &Marker,
    ) -> Result<Written, BackendError> {
        Err(self.refuse())
    }
    async fn update(
        &self,
        _: &'static str,
        _: &str,
        _: &str,
        _: SettledSpec<'_>,
    ) -> Result<Written, BackendError> {
        Err(self.refuse())
    }
    async fn delete(&self, _: &'static str, _: &str, _: &str) -> Result<(), BackendError> {
        Err(self.refuse())
    }
    async fn ownership(&self, _: &'static str, _: &str, _: &str) -> Result<RawTags, BackendError> {
        Err(self.refuse())
    }
    async fn secret_value(&self, _: &str, _: &str) -> Result<SecretString, BackendError> {
        Err(self.refuse())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_names_the_fleet_and_the_legacy_value_matches_any() {
        let marker = Marker::new("shop");
        let tags = |v: &str| RawTags::from([(MARKER_KEY.to_owned(), v.to_owned())]);
        assert_eq!(marker.verdict(&tags("shop")), Ownership::Ours);
        assert_eq!(marker.verdict(&tags(LEGACY_MARKER_VALUE)), Ownership::Ours);
        assert_eq!(
            marker.verdict(&tags("blog")),
            Ownership::OtherFleet {
                fleet: "blog".into()
            }
        );
        assert_eq!(marker.verdict(&RawTags::new()), Ownership::Unmarked);
    }

    #[test]
    fn the_marker_is_stripped_from_reported_tags_as_a_map_or_a_list() {
        let mut map = serde_json::json!({"tags": {"managed-by-infra": "shop", "team": "web"}});
        strip_marker(map.as_object_mut().unwrap());
        assert_eq!(map, serde_json::json!({"tags": {"team": "web"}}));
        let mut list = serde_json::json!({"tags": ["managed-by-infra=shop", "team"]});
        strip_marker(list.as_object_mut().unwrap());
        assert_eq!(list, serde_json::json!({"tags": ["team"]}));
    }
}
