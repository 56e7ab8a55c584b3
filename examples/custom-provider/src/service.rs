//! `DnsService`: the API the backend talks to, in memory (optionally kept in a JSON
//! file).
//!
//! It plays a small managed-DNS API and behaves like one rather than echoing what it is
//! sent:
//!
//! - it assigns record ids (`rr-0000002a`) and computes each record's FQDN;
//! - it stores what it is given in its own canonical form: names and zones in lowercase
//!   without a trailing dot, addresses as their canonical text, and CNAME targets as
//!   absolute names **with** a trailing dot (`assets.example.net.`);
//! - it gives a record created without a TTL the default of 300 seconds, and reports it;
//! - it writes the tags it is given at create, in the same call (that is where the
//!   backend puts the ownership marker), and replaces them wholesale on update;
//! - it refuses a second record of the same name in one zone and region (`NameTaken`),
//!   answers `NoSuchRecord` for an id it does not hold (or holds in another region), and
//!   `UnknownRegion` for a region it does not run;
//! - it can be told to deny access, everywhere or in one region ([`Access`]), to fail
//!   the next reads with an internal error ([`DnsService::fail_reads`]), to lose the
//!   response of the next write after carrying it out
//!   ([`DnsService::lose_next_response`]), and to leave fresh records out of listings
//!   for a while ([`DnsService::set_list_lag`]), on its clock;
//! - it logs every call ([`DnsService::calls`]).
//!
//! ```
//! use custom_provider::{DnsService, NewRecord, RecordType, ServiceError};
//!
//! let service = DnsService::new();
//! let www = service
//!     .create_record("eu", NewRecord::new("www", "Example.com.", RecordType::Cname, "Web.Example.net"))
//!     .unwrap();
//! assert_eq!(www.fqdn, "www.example.com");
//! assert_eq!(www.value, "web.example.net.");
//! assert_eq!(www.ttl, 300);
//! let twin = service.create_record("eu", NewRecord::new("www", "example.com", RecordType::A, "192.0.2.1"));
//! assert!(matches!(twin, Err(ServiceError::NameTaken { .. })));
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use infra_core::{
    engine::{Clock, ManualClock},
    prelude::Region,
};
use serde::{Deserialize, Serialize};

use crate::DnsRegion;
use crate::record::{DEFAULT_TTL, RecordType, TTL_RANGE, TXT_MAX_LEN, check_zone, dns_label};

/// The account every credential of this service acts in.
pub const ACCOUNT_ID: &str = "dns-acct-4417";

/// The most tags a record may carry.
pub const MAX_TAGS: usize = 50;

const FILE_VERSION: u32 = 1;

/// One record as the service holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredRecord {
    /// The id the service assigned.
    pub id: String,
    /// The region's code.
    pub region: String,
    /// The zone, lowercase, without a trailing dot.
    pub zone: String,
    /// The record's name within the zone (one label).
    pub name: String,
    /// `name.zone`.
    pub fqdn: String,
    /// The record's type.
    pub record_type: RecordType,
    /// The value in the service's canonical form (a CNAME target ends with `.`).
    pub value: String,
    /// Seconds resolvers may cache the answer.
    pub ttl: u32,
    /// The tags, as written, marker included.
    pub tags: BTreeMap<String, String>,
    /// When it was created, on the service's clock. Not kept in the file: a clock's
    /// origin is one process's.
    #[serde(skip)]
    created_at: Duration,
}

/// A record to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRecord {
    /// The record's name within the zone.
    pub name: String,
    /// The zone.
    pub zone: String,
    /// The record's type.
    pub record_type: RecordType,
    /// The value.
    pub value: String,
    /// Seconds resolvers may cache the answer; `None` takes the service's default.
    pub ttl: Option<u32>,
    /// Tags to write with the record.
    pub tags: BTreeMap<String, String>,
}

impl NewRecord {
    /// A record with the default TTL and no tags.
    pub fn new(
        name: impl Into<String>,
        zone: impl Into<String>,
        record_type: RecordType,
        value: impl Into<String>,
    ) -> Self {
        NewRecord {
            name: name.into(),
            zone: zone.into(),
            record_type,
            value: value.into(),
            ttl: None,
            tags: BTreeMap::new(),
        }
    }
}

/// A change to a record's mutable parts; each part given replaces the stored one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordPatch {
    /// A new value (checked against the record's type).
    pub value: Option<String>,
    /// A new TTL.
    pub ttl: Option<u32>,
    /// New tags, replacing every stored tag.
    pub tags: Option<BTreeMap<String, String>>,
}

/// What callers may do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Access {
    /// Everything.
    #[default]
    Full,
    /// List records and the account, nothing else.
    ListOnly,
    /// Nothing at all.
    Denied,
}

/// An operation of the service's API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServiceOp {
    /// Which account the credentials act in.
    Account,
    /// List a region's records.
    List,
    /// Get one record.
    Get,
    /// Create a record.
    Create,
    /// Change a record.
    Update,
    /// Delete a record.
    Delete,
}

impl ServiceOp {
    /// Whether the operation changes records.
    pub fn is_write(self) -> bool {
        matches!(
            self,
            ServiceOp::Create | ServiceOp::Update | ServiceOp::Delete
        )
    }
}

/// One call the service received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceCall {
    /// The operation.
    pub op: ServiceOp,
    /// The region named (empty for `Account`).
    pub region: String,
    /// The record's name (create) or id (get, update, delete), if any.
    pub target: Option<String>,
    /// Whether the service carried it out (a write changed the records, a read was
    /// answered), even if the response was then lost.
    pub applied: bool,
}

/// The service's errors, each with its own code.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    /// No record has this id in this region.
    #[error("no record {id} in region {region}")]
    NoSuchRecord {
        /// The id asked for.
        id: String,
        /// The region asked in.
        region: String,
    },
    /// The name is already used in the zone.
    #[error("the name {name} is already taken in zone {zone}")]
    NameTaken {
        /// The name.
        name: String,
        /// The zone.
        zone: String,
    },
    /// The credentials may not do this.
    #[error("access denied for {0:?}")]
    AccessDenied(ServiceOp),
    /// The request is malformed.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The service does not run this region.
    #[error("unknown region {0:?} (the service runs global, eu and us)")]
    UnknownRegion(String),
    /// No response came back in time. The request may have been carried out.
    #[error("the request timed out; it may have been carried out")]
    Timeout,
    /// The service failed on its side; nothing changed.
    #[error("internal error: {0}")]
    Internal(String),
    /// The service could not store the change; nothing changed.
    #[error("storage failure: {0}")]
    Storage(String),
}

impl ServiceError {
    /// The service's own code for the error (`NoSuchRecord`).
    pub fn code(&self) -> &'static str {
        match self {
            ServiceError::NoSuchRecord { .. } => "NoSuchRecord",
            ServiceError::NameTaken { .. } => "NameTaken",
            ServiceError::AccessDenied(_) => "AccessDenied",
            ServiceError::InvalidRequest(_) => "InvalidRequest",
            ServiceError::UnknownRegion(_) => "UnknownRegion",
            ServiceError::Timeout => "RequestTimeout",
            ServiceError::Internal(_) => "InternalError",
            ServiceError::Storage(_) => "StorageFailure",
        }
    }
}

/// A file that could not be opened as the service's records.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {why}")]
pub struct ServiceFileError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub why: String,
}

/// What the file holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Records {
    version: u32,
    next_id: u64,
    records: BTreeMap<String, StoredRecord>,
}

#[derive(Debug, Default)]
struct State {
    records: Records,
    path: Option<PathBuf>,
    access: Access,
    region_access: BTreeMap<String, Access>,
    failing_reads: u32,
    lose_next_response: bool,
    list_lag: Duration,
    calls: Vec<ServiceCall>,
}

struct Inner {
    state: Mutex<State>,
    clock: Arc<dyn Clock>,
}

/// The DNS service. Cloning it is cheap, and every clone sees the same records.
#[derive(Clone)]
pub struct DnsService {
    inner: Arc<Inner>,
}

impl fmt::Debug for DnsService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state();
        f.debug_struct("DnsService")
            .field("records", &state.records.records.len())
            .field("path", &state.path)
            .field("access", &state.access)
            .finish()
    }
}

impl Default for DnsService {
    fn default() -> Self {
        Self::new()
    }
}

impl DnsService {
    /// An empty service in memory, on a [`ManualClock`].
    pub fn new() -> Self {
        Self::with_clock(Arc::new(ManualClock::new()))
    }

    /// An empty service in memory, on the given clock.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        Self::from_state(State::default(), clock)
    }

    /// The records kept in the JSON file at `path` (none if there is no such file),
    /// saved there after every write. A file that does not hold records is refused and
    /// left untouched.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, ServiceFileError> {
        Self::open_with_clock(path, Arc::new(ManualClock::new()))
    }

    /// [`DnsService::open`], on the given clock.
    pub fn open_with_clock(
        path: impl AsRef<Path>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, ServiceFileError> {
        let path = path.as_ref();
        let fail = |why: String| ServiceFileError {
            path: path.to_path_buf(),
            why,
        };
        let records = match std::fs::read_to_string(path) {
            Ok(text) => {
                let records: Records = serde_json::from_str(&text)
                    .map_err(|e| fail(format!("not the DNS service's records: {e}")))?;
                if records.version != FILE_VERSION {
                    return Err(fail(format!(
                        "records of version {}, this service reads version {FILE_VERSION}",
                        records.version
                    )));
                }
                records
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Records {
                version: FILE_VERSION,
                ..Records::default()
            },
            Err(e) => return Err(fail(e.to_string())),
        };
        let state = State {
            records,
            path: Some(path.to_path_buf()),
            ..State::default()
        };
        Ok(Self::from_state(state, clock))
    }

    fn from_state(mut state: State, clock: Arc<dyn Clock>) -> Self {
        state.records.version = FILE_VERSION;
        DnsService {
            inner: Arc::new(Inner {
                state: Mutex::new(state),
                clock,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The service's clock.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.inner.clock)
    }

    /// The file the records are kept in, if any.
    pub fn path(&self) -> Option<PathBuf> {
        self.state().path.clone()
    }

    // ---- behaviour, for tests ----

    /// Sets what callers may do from now on, in every region (a region's own setting,
    /// when stricter, still applies).
    pub fn set_access(&self, access: Access) {
        self.state().access = access;
    }

    /// Sets what callers may do in one region from now on (the setting for every
    /// region, when stricter, still applies).
    pub fn set_access_in(&self, region: &str, access: Access) {
        self.state().region_access.insert(region.to_owned(), access);
    }

    /// Lifts every denial, everywhere.
    pub fn allow_all(&self) {
        let mut state = self.state();
        state.access = Access::Full;
        state.region_access.clear();
    }

    /// The next `count` reads of a record fail with [`ServiceError::Internal`].
    pub fn fail_reads(&self, count: u32) {
        self.state().failing_reads = count;
    }

    /// The next write is carried out, and its response lost: the caller sees
    /// [`ServiceError::Timeout`].
    pub fn lose_next_response(&self) {
        self.state().lose_next_response = true;
    }

    /// A record created less than `lag` ago (on the service's clock) is left out of
    /// listings. Zero, the default, lists it at once.
    pub fn set_list_lag(&self, lag: Duration) {
        self.state().list_lag = lag;
    }

    /// Every call received, oldest first.
    pub fn calls(&self) -> Vec<ServiceCall> {
        self.state().calls.clone()
    }

    /// The writes the service carried out.
    pub fn writes(&self) -> Vec<ServiceCall> {
        self.state()
            .calls
            .iter()
            .filter(|c| c.op.is_write() && c.applied)
            .cloned()
            .collect()
    }

    /// Forgets the call log.
    pub fn clear_calls(&self) {
        self.state().calls.clear();
    }

    /// Every record, in every region, by id.
    pub fn records(&self) -> Vec<StoredRecord> {
        self.state().records.records.values().cloned().collect()
    }

    /// The records named `name`, in any zone and region.
    pub fn find(&self, name: &str) -> Vec<StoredRecord> {
        self.state()
            .records
            .records
            .values()
            .filter(|r| r.name == name)
            .cloned()
            .collect()
    }

    // ---- the API ----

    /// The account the credentials act in.
    pub fn account(&self) -> Result<String, ServiceError> {
        let mut state = self.state();
        let allowed = state.access != Access::Denied;
        log(&mut state, ServiceOp::Account, "", None, allowed);
        if !allowed {
            return Err(ServiceError::AccessDenied(ServiceOp::Account));
        }
        Ok(ACCOUNT_ID.to_owned())
    }

    /// The records of one region, in every zone, by name.
    pub fn list_records(&self, region: &str) -> Result<Vec<StoredRecord>, ServiceError> {
        let now = self.inner.clock.now();
        let mut state = self.state();
        let answer = admit(&state, ServiceOp::List, region).map(|()| {
            let lag = state.list_lag;
            let mut found: Vec<StoredRecord> = state
                .records
                .records
                .values()
                .filter(|r| r.region == region && r.created_at + lag <= now)
                .cloned()
                .collect();
            found.sort_by(|a, b| (&a.name, &a.zone, &a.id).cmp(&(&b.name, &b.zone, &b.id)));
            found
        });
        log(&mut state, ServiceOp::List, region, None, answer.is_ok());
        answer
    }

    /// One record.
    pub fn get_record(&self, region: &str, id: &str) -> Result<StoredRecord, ServiceError> {
        let mut state = self.state();
        let answer = admit(&state, ServiceOp::Get, region).and_then(|()| {
            if state.failing_reads > 0 {
                return Err(ServiceError::Internal(
                    "the record store did not answer".into(),
                ));
            }
            find(&state, region, id).cloned()
        });
        if matches!(answer, Err(ServiceError::Internal(_))) {
            state.failing_reads -= 1;
        }
        log(&mut state, ServiceOp::Get, region, Some(id), answer.is_ok());
        answer
    }

    /// Creates a record, with its tags, in one call.
    pub fn create_record(
        &self,
        region: &str,
        new: NewRecord,
    ) -> Result<StoredRecord, ServiceError> {
        let now = self.inner.clock.now();
        let name = new.name.clone();
        self.write(ServiceOp::Create, region, &name, move |records| {
            let zone = canonical_zone(&new.zone)?;
            let name = new.name.to_ascii_lowercase();
            dns_label(&name)
                .map_err(|why| ServiceError::InvalidRequest(format!("name {name:?} {why}")))?;
            let value = canonical_value(new.record_type, &new.value)?;
            let ttl = checked_ttl(new.ttl.unwrap_or(DEFAULT_TTL))?;
            let tags = checked_tags(new.tags)?;
            if records
                .records
                .values()
                .any(|r| r.region == region && r.zone == zone && r.name == name)
            {
                return Err(ServiceError::NameTaken { name, zone });
            }
            records.next_id += 1;
            let record = StoredRecord {
                id: format!("rr-{:08x}", records.next_id),
                region: region.to_owned(),
                fqdn: format!("{name}.{zone}"),
                zone,
                name,
                record_type: new.record_type,
                value,
                ttl,
                tags,
                created_at: now,
            };
            records.records.insert(record.id.clone(), record.clone());
            Ok(record)
        })
    }

    /// Changes a record's value, TTL or tags; its name, zone and type never change.
    pub fn update_record(
        &self,
        region: &str,
        id: &str,
        patch: RecordPatch,
    ) -> Result<StoredRecord, ServiceError> {
        self.write(ServiceOp::Update, region, id, move |records| {
            let mut record = find_in(records, region, id)?.clone();
            if let Some(value) = patch.value {
                record.value = canonical_value(record.record_type, &value)?;
            }
            if let Some(ttl) = patch.ttl {
                record.ttl = checked_ttl(ttl)?;
            }
            if let Some(tags) = patch.tags {
                record.tags = checked_tags(tags)?;
            }
            records.records.insert(record.id.clone(), record.clone());
            Ok(record)
        })
    }

    /// Deletes a record.
    pub fn delete_record(&self, region: &str, id: &str) -> Result<(), ServiceError> {
        self.write(ServiceOp::Delete, region, id, move |records| {
            find_in(records, region, id)?;
            records.records.remove(id);
            Ok(())
        })
    }

    /// Runs one write: admitted, carried out on a copy, saved, then made visible, so
    /// that a failure to save changes nothing. A lost response is lost after all that.
    fn write<T>(
        &self,
        op: ServiceOp,
        region: &str,
        target: &str,
        change: impl FnOnce(&mut Records) -> Result<T, ServiceError>,
    ) -> Result<T, ServiceError> {
        let mut state = self.state();
        let outcome = admit(&state, op, region).and_then(|()| {
            let mut records = state.records.clone();
            let value = change(&mut records)?;
            if let Some(path) = &state.path {
                save(path, &records).map_err(ServiceError::Storage)?;
            }
            state.records = records;
            Ok(value)
        });
        log(&mut state, op, region, Some(target), outcome.is_ok());
        match outcome {
            Ok(_) if std::mem::take(&mut state.lose_next_response) => Err(ServiceError::Timeout),
            other => other,
        }
    }
}

/// Whether the caller may run `op` in `region`.
fn admit(state: &State, op: ServiceOp, region: &str) -> Result<(), ServiceError> {
    let permits = |access: Access| match access {
        Access::Full => true,
        Access::ListOnly => matches!(op, ServiceOp::List | ServiceOp::Account),
        Access::Denied => false,
    };
    let in_region = state.region_access.get(region).copied().unwrap_or_default();
    if !permits(state.access) || !permits(in_region) {
        return Err(ServiceError::AccessDenied(op));
    }
    if DnsRegion::parse(region).is_none() {
        return Err(ServiceError::UnknownRegion(region.to_owned()));
    }
    Ok(())
}

fn find<'s>(state: &'s State, region: &str, id: &str) -> Result<&'s StoredRecord, ServiceError> {
    find_in(&state.records, region, id)
}

fn find_in<'r>(
    records: &'r Records,
    region: &str,
    id: &str,
) -> Result<&'r StoredRecord, ServiceError> {
    records
        .records
        .get(id)
        .filter(|r| r.region == region)
        .ok_or_else(|| ServiceError::NoSuchRecord {
            id: id.to_owned(),
            region: region.to_owned(),
        })
}

fn log(state: &mut State, op: ServiceOp, region: &str, target: Option<&str>, applied: bool) {
    state.calls.push(ServiceCall {
        op,
        region: region.to_owned(),
        target: target.map(str::to_owned),
        applied,
    });
}

fn save(path: &Path, records: &Records) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(records).map_err(|e| e.to_string())?;
    let staging = path.with_extension("json.partial");
    std::fs::write(&staging, text + "\n").map_err(|e| format!("{}: {e}", staging.display()))?;
    std::fs::rename(&staging, path).map_err(|e| format!("{}: {e}", path.display()))
}

fn canonical_zone(zone: &str) -> Result<String, ServiceError> {
    let zone = zone.trim_end_matches('.').to_ascii_lowercase();
    check_zone(&zone)
        .map_err(|why| ServiceError::InvalidRequest(format!("zone {zone:?} {why}")))?;
    Ok(zone)
}

/// The value as the service stores it.
fn canonical_value(record_type: RecordType, value: &str) -> Result<String, ServiceError> {
    let invalid =
        |why: &str| ServiceError::InvalidRequest(format!("{record_type} value {value:?} {why}"));
    match record_type {
        RecordType::A => value
            .parse::<Ipv4Addr>()
            .map(|a| a.to_string())
            .map_err(|_| invalid("is not an IPv4 address")),
        RecordType::Aaaa => value
            .parse::<Ipv6Addr>()
            .map(|a| a.to_string())
            .map_err(|_| invalid("is not an IPv6 address")),
        RecordType::Cname => {
            let host = value.trim_end_matches('.').to_ascii_lowercase();
            check_zone(&host).map_err(|why| invalid(&why))?;
            Ok(format!("{host}."))
        }
        RecordType::Txt => {
            if value.is_empty() || value.len() > TXT_MAX_LEN {
                Err(invalid(&format!("must be 1 to {TXT_MAX_LEN} bytes long")))
            } else {
                Ok(value.to_owned())
            }
        }
    }
}

fn checked_ttl(ttl: u32) -> Result<u32, ServiceError> {
    if TTL_RANGE.contains(&ttl) {
        Ok(ttl)
    } else {
        Err(ServiceError::InvalidRequest(format!(
            "ttl {ttl} is outside {}..={}",
            TTL_RANGE.start(),
            TTL_RANGE.end()
        )))
    }
}

fn checked_tags(tags: BTreeMap<String, String>) -> Result<BTreeMap<String, String>, ServiceError> {
    if tags.len() > MAX_TAGS {
        return Err(ServiceError::InvalidRequest(format!(
            "{} tags, at most {MAX_TAGS}",
            tags.len()
        )));
    }
    if tags.keys().any(String::is_empty) {
        return Err(ServiceError::InvalidRequest("a tag key is empty".into()));
    }
    Ok(tags)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cname(name: &str, target: &str) -> NewRecord {
        NewRecord::new(name, "example.com", RecordType::Cname, target)
    }

    #[test]
    fn create_assigns_an_id_computes_the_fqdn_and_defaults_the_ttl() {
        let service = DnsService::new();
        let a = service
            .create_record("eu", cname("www", "web.example.net"))
            .unwrap();
        let b = service
            .create_record(
                "eu",
                NewRecord {
                    ttl: Some(60),
                    ..NewRecord::new("api", "example.com", RecordType::A, "192.0.2.7")
                },
            )
            .unwrap();
        assert_ne!(a.id, b.id);
        assert!(a.id.starts_with("rr-"));
        assert_eq!(a.fqdn, "www.example.com");
        assert_eq!((a.ttl, b.ttl), (DEFAULT_TTL, 60));
        assert_eq!(service.get_record("eu", &a.id).unwrap(), a);
    }

    #[test]
    fn values_are_stored_in_the_services_own_form() {
        let service = DnsService::new();
        let c = service
            .create_record("eu", cname("www", "Web.Example.NET"))
            .unwrap();
        assert_eq!(c.value, "web.example.net.");
        let v6 = service
            .create_record(
                "eu",
                NewRecord::new("v6", "EXAMPLE.com.", RecordType::Aaaa, "2001:0DB8:0:0::1"),
            )
            .unwrap();
        assert_eq!(
            (v6.value.as_str(), v6.zone.as_str()),
            ("2001:db8::1", "example.com")
        );
        let bad = service.create_record(
            "eu",
            NewRecord::new("x", "example.com", RecordType::A, "::1"),
        );
        assert_eq!(bad.unwrap_err().code(), "InvalidRequest");
    }

    #[test]
    fn create_writes_the_tags_it_is_given() {
        let service = DnsService::new();
        let tags = BTreeMap::from([("managed-by-infra".to_owned(), "demo".to_owned())]);
        let r = service
            .create_record(
                "us",
                NewRecord {
                    tags: tags.clone(),
                    ..cname("www", "web.example.net")
                },
            )
            .unwrap();
        assert_eq!(service.get_record("us", &r.id).unwrap().tags, tags);
    }

    #[test]
    fn a_name_is_unique_within_a_zone_and_region_only() {
        let service = DnsService::new();
        service
            .create_record("eu", cname("www", "a.example.net"))
            .unwrap();
        let twin = service
            .create_record("eu", cname("www", "b.example.net"))
            .unwrap_err();
        assert_eq!(twin.code(), "NameTaken");
        service
            .create_record(
                "eu",
                NewRecord::new("www", "example.org", RecordType::A, "192.0.2.1"),
            )
            .unwrap();
        service
            .create_record("us", cname("www", "a.example.net"))
            .unwrap();
        assert_eq!(service.records().len(), 3);
    }

    #[test]
    fn a_missing_id_is_not_found_and_so_is_one_of_another_region() {
        let service = DnsService::new();
        let r = service
            .create_record("eu", cname("www", "a.example.net"))
            .unwrap();
        for (region, id) in [("eu", "rr-ffffffff"), ("us", r.id.as_str())] {
            assert_eq!(
                service.get_record(region, id).unwrap_err().code(),
                "NoSuchRecord"
            );
            assert_eq!(
                service.delete_record(region, id).unwrap_err().code(),
                "NoSuchRecord"
            );
            assert_eq!(
                service
                    .update_record(region, id, RecordPatch::default())
                    .unwrap_err()
                    .code(),
                "NoSuchRecord"
            );
        }
        assert_eq!(
            service.list_records("mars").unwrap_err().code(),
            "UnknownRegion"
        );
        assert!(service.list_records("global").unwrap().is_empty());
    }

    #[test]
    fn update_changes_value_ttl_and_tags_and_nothing_else() {
        let service = DnsService::new();
        let r = service
            .create_record("eu", cname("www", "a.example.net"))
            .unwrap();
        let patch = RecordPatch {
            value: Some("b.example.net".into()),
            ttl: Some(3600),
            tags: Some(BTreeMap::from([("team".to_owned(), "web".to_owned())])),
        };
        let u = service.update_record("eu", &r.id, patch.clone()).unwrap();
        assert_eq!(
            (u.value.as_str(), u.ttl, u.tags.len()),
            ("b.example.net.", 3600, 1)
        );
        assert_eq!(
            (&u.id, &u.fqdn, u.record_type),
            (&r.id, &r.fqdn, r.record_type)
        );
        assert_eq!(service.update_record("eu", &r.id, patch).unwrap(), u);
        let out_of_range = RecordPatch {
            ttl: Some(5),
            ..RecordPatch::default()
        };
        assert!(service.update_record("eu", &r.id, out_of_range).is_err());
        assert_eq!(service.get_record("eu", &r.id).unwrap().ttl, 3600);
    }

    #[test]
    fn a_denial_is_a_denial_for_every_call_it_covers() {
        let service = DnsService::new();
        let r = service
            .create_record("eu", cname("www", "a.example.net"))
            .unwrap();
        service.set_access(Access::ListOnly);
        assert_eq!(service.list_records("eu").unwrap().len(), 1);
        assert_eq!(
            service.get_record("eu", &r.id).unwrap_err().code(),
            "AccessDenied"
        );
        service.set_access(Access::Denied);
        assert_eq!(
            service.list_records("eu").unwrap_err().code(),
            "AccessDenied"
        );
        assert_eq!(service.account().unwrap_err().code(), "AccessDenied");
        assert_eq!(
            service.delete_record("eu", &r.id).unwrap_err().code(),
            "AccessDenied"
        );
        service.set_access(Access::Full);
        assert_eq!(service.records().len(), 1);
        assert!(service.writes().iter().all(|w| w.op == ServiceOp::Create));

        service.set_access_in("eu", Access::Denied);
        assert_eq!(
            service.list_records("eu").unwrap_err().code(),
            "AccessDenied"
        );
        assert!(service.list_records("us").unwrap().is_empty());
        service.allow_all();
        assert_eq!(service.list_records("eu").unwrap().len(), 1);
    }

    #[test]
    fn failed_reads_fail_as_many_times_as_asked() {
        let service = DnsService::new();
        let r = service
            .create_record("eu", cname("www", "a.example.net"))
            .unwrap();
        service.fail_reads(2);
        for _ in 0..2 {
            assert_eq!(
                service.get_record("eu", &r.id).unwrap_err().code(),
                "InternalError"
            );
        }
        assert!(service.get_record("eu", &r.id).is_ok());
    }

    #[test]
    fn a_lost_response_still_carries_the_write_out() {
        let service = DnsService::new();
        service.lose_next_response();
        let err = service
            .create_record("eu", cname("www", "a.example.net"))
            .unwrap_err();
        assert_eq!(err, ServiceError::Timeout);
        assert_eq!(service.find("www").len(), 1);
        assert_eq!(service.writes().len(), 1);
        // Only the next write loses its response.
        service
            .create_record("eu", cname("api", "a.example.net"))
            .unwrap();
    }

    #[tokio::test]
    async fn a_fresh_record_is_listed_once_the_lag_has_passed() {
        let clock = Arc::new(ManualClock::new());
        let service = DnsService::with_clock(clock.clone());
        service.set_list_lag(Duration::from_secs(2));
        service
            .create_record("eu", cname("www", "a.example.net"))
            .unwrap();
        assert!(service.list_records("eu").unwrap().is_empty());
        clock.advance(Duration::from_secs(2));
        assert_eq!(service.list_records("eu").unwrap().len(), 1);
    }

    #[test]
    fn records_survive_in_their_file_and_a_foreign_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("dns-service.json");
        let first = DnsService::open(&path).unwrap();
        let r = first
            .create_record("eu", cname("www", "a.example.net"))
            .unwrap();
        let second = DnsService::open(&path).unwrap();
        assert_eq!(second.get_record("eu", &r.id).unwrap(), r);
        let next = second
            .create_record("eu", cname("api", "a.example.net"))
            .unwrap();
        assert_ne!(next.id, r.id, "ids are not reused across processes");

        let foreign = dir.path().join("foreign.json");
        std::fs::write(&foreign, "[1, 2, 3]").unwrap();
        let err = DnsService::open(&foreign).unwrap_err();
        assert!(err.to_string().contains("foreign.json"), "{err}");
        assert_eq!(std::fs::read_to_string(&foreign).unwrap(), "[1, 2, 3]");
    }

    #[test]
    fn a_write_that_cannot_be_saved_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should be: every save fails.
        let path = dir.path().join("records.json");
        let service = DnsService::open(&path).unwrap();
        std::fs::create_dir_all(path.with_extension("json.partial")).unwrap();
        let err = service
            .create_record("eu", cname("www", "a.example.net"))
            .unwrap_err();
        assert_eq!(err.code(), "StorageFailure");
        assert!(service.records().is_empty());
    }
}
