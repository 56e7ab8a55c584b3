//! `DnsBackend`: the [`Backend`] of the `dns` provider, over a [`DnsService`].
//!
//! Each method follows the `# Behavior` section of the trait method it implements; the
//! comments below say which sentence a piece of code is there for.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use infra_core::{
    Backend, BackendError, Capabilities, Clock, ErrorKind, Kind, LEGACY_MARKER_VALUE, Listed,
    MARKER_KEY, Marker, Partial, Provider, RawTags, SecretString, SettledSpec, Sighting,
};

use infra_core::sdk::Written;

use crate::Dns;
use crate::record::{DnsRecord, DnsRecordObserved, DnsRecordReported, RecordType};
use crate::service::{DnsService, NewRecord, RecordPatch, ServiceError, StoredRecord};

/// The backend of the `dns` provider.
///
/// Cheap to clone and to share as `Arc<dyn Backend>`; safe to call concurrently (the
/// service serialises its own state). Every call first waits the configured latency on
/// the backend's clock, which is the service's clock unless
/// [`DnsBackend::with_clock`] gives another.
///
/// ```
/// use std::sync::Arc;
/// use custom_provider::{DnsBackend, DnsService};
/// use infra_core::{Backend, Backends, ManualClock};
///
/// let service = DnsService::new();
/// let backend: Arc<dyn Backend> = Arc::new(
///     DnsBackend::new(service.clone()).with_clock(Arc::new(ManualClock::new())),
/// );
/// let backends = Backends::new().with(backend);
/// assert_eq!(backends.providers().collect::<Vec<_>>(), ["dns"]);
/// ```
#[derive(Clone)]
pub struct DnsBackend {
    service: DnsService,
    clock: Arc<dyn Clock>,
    latency: Duration,
}

impl std::fmt::Debug for DnsBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DnsBackend")
            .field("service", &self.service)
            .field("latency", &self.latency)
            .finish()
    }
}

impl DnsBackend {
    /// A backend over `service`, on the service's clock, with no latency.
    pub fn new(service: DnsService) -> Self {
        DnsBackend {
            clock: service.clock(),
            service,
            latency: Duration::ZERO,
        }
    }

    /// The same backend, waiting on `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The same backend, each call taking `latency` on its clock before it reaches the
    /// service.
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// The service it talks to.
    pub fn service(&self) -> &DnsService {
        &self.service
    }

    async fn wait(&self) {
        if !self.latency.is_zero() {
            self.clock.sleep(self.latency).await;
        }
    }
}

/// Maps a service error onto the portable vocabulary.
///
/// Narrowly: only `NoSuchRecord` means "absent". A denial is `Denied`, an unknown region
/// is `Invalid` (the caller named something the service does not run, which says
/// nothing about the record), and a timeout is `Unavailable` **and may have been sent**:
/// the service may have carried the request out.
pub fn map_error(error: ServiceError) -> BackendError {
    let code = error.code();
    let message = error.to_string();
    let mapped = match error {
        ServiceError::NoSuchRecord { .. } => BackendError::new(ErrorKind::NotFound, message),
        ServiceError::AccessDenied(_) => BackendError::new(ErrorKind::Denied, message),
        ServiceError::NameTaken { .. } => BackendError::new(ErrorKind::Conflict, message),
        ServiceError::InvalidRequest(_) | ServiceError::UnknownRegion(_) => {
            BackendError::new(ErrorKind::Invalid, message)
        }
        ServiceError::Timeout => BackendError::new(ErrorKind::Unavailable, message).maybe_sent(),
        ServiceError::Internal(_) | ServiceError::Storage(_) => {
            BackendError::new(ErrorKind::Unavailable, message)
        }
    };
    mapped.with_code(code)
}

/// Refuses a call for a kind this backend does not serve.
fn only_records(kind: &str) -> Result<(), BackendError> {
    if kind == DnsRecord::ID {
        Ok(())
    } else {
        Err(BackendError::invalid(format!(
            "the {} backend serves {} only, not {kind}",
            Dns::ID,
            DnsRecord::ID
        )))
    }
}

/// The value in the kind's form: a CNAME target without the trailing dot the service
/// adds. Reversing the service's rewrite here is what keeps a second apply empty.
fn value_of(record: &StoredRecord) -> String {
    match record.record_type {
        RecordType::Cname => record.value.trim_end_matches('.').to_owned(),
        _ => record.value.clone(),
    }
}

/// A read of a stored record. The service reports every field of the spec, so every
/// field is `Known`; had it left one out, the field would stay `Unknown`, never a
/// stand-in such as `""` or `0`. The tags are reported with the marker; the engine
/// strips it.
pub fn sighting_of(record: &StoredRecord) -> Sighting {
    let observed = DnsRecordObserved {
        id: record.id.clone(),
        fqdn: record.fqdn.clone(),
    };
    let reported = DnsRecordReported {
        record_type: Partial::Known(record.record_type),
        zone: Partial::Known(record.zone.clone()),
        value: Partial::Known(value_of(record)),
        ttl: Partial::Known(record.ttl),
        tags: Partial::Known(record.tags.clone()),
    };
    Sighting::of::<DnsRecord>(record.id.clone(), observed, reported)
}

#[async_trait]
impl Backend for DnsBackend {
    fn provider(&self) -> &'static str {
        Dns::ID
    }

    fn capabilities(&self) -> Capabilities {
        // Tags are readable, so ownership can be checked; names are unique per zone, so
        // a replace deletes before it creates (no `duplicate_names`).
        Capabilities::with_kinds([DnsRecord::ID])
    }

    async fn account(&self) -> Result<String, BackendError> {
        self.wait().await;
        self.service.account().map_err(map_error)
    }

    async fn list(&self, kind: &'static str, region: &str) -> Result<Vec<Listed>, BackendError> {
        only_records(kind)?;
        self.wait().await;
        // Whatever the owner; an empty region is an empty list; a denial is `Denied`.
        let records = self.service.list_records(region).map_err(map_error)?;
        Ok(records
            .into_iter()
            .map(|r| Listed {
                name: r.name,
                handle: r.id,
            })
            .collect())
    }

    async fn read(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<Sighting, BackendError> {
        only_records(kind)?;
        self.wait().await;
        let record = self.service.get_record(region, handle).map_err(map_error)?;
        Ok(sighting_of(&record))
    }

    async fn create(
        &self,
        kind: &'static str,
        region: &str,
        name: &str,
        spec: SettledSpec<'_>,
        marker: &Marker,
    ) -> Result<Written, BackendError> {
        only_records(kind)?;
        let spec = spec.get::<DnsRecord>()?;
        // The marker goes into the creating call itself: no crash can leave an unmarked
        // record behind. A declared tag never overrides it.
        let mut tags: BTreeMap<String, String> = spec.tags.known().cloned().unwrap_or_default();
        tags.insert(marker.key().to_owned(), marker.value().to_owned());
        let new = NewRecord {
            name: name.to_owned(),
            zone: spec.zone.clone(),
            record_type: spec.record_type,
            value: spec.value.clone(),
            // Unsaid: the service applies its default, and `read` reports it.
            ttl: spec.ttl.known().copied(),
            tags,
        };
        self.wait().await;
        // Tried once: a create is not idempotent. A lost response maps to an error that
        // may have been sent, and the next observation finds the marked record.
        let record = self.service.create_record(region, new).map_err(map_error)?;
        Ok(Written::Done(sighting_of(&record)))
    }

    async fn update(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
        spec: SettledSpec<'_>,
    ) -> Result<Written, BackendError> {
        only_records(kind)?;
        let spec = spec.get::<DnsRecord>()?;
        self.wait().await;
        let current = self.service.get_record(region, handle).map_err(map_error)?;
        // Only mutable fields change in place. A differing type or zone is the engine's
        // to replace; doing anything here would be a silent partial update.
        if current.record_type != spec.record_type || current.zone != spec.zone {
            return Err(BackendError::invalid(format!(
                "record {handle} is a {} record in zone {}; the spec asks for a {} record in zone {}, which only a replace can give",
                current.record_type, current.zone, spec.record_type, spec.zone
            )));
        }
        let tags = spec.tags.known().map(|declared| {
            // Keep the marker exactly as stored: an update never writes a marker of its
            // own, it only keeps the one the create wrote.
            let mut tags = declared.clone();
            tags.remove(MARKER_KEY);
            if let Some(marker) = current.tags.get(MARKER_KEY) {
                tags.insert(MARKER_KEY.to_owned(), marker.clone());
            }
            tags
        });
        let patch = RecordPatch {
            value: Some(spec.value.clone()),
            // An unsaid TTL or unsaid tags are left as they are.
            ttl: spec.ttl.known().copied(),
            tags,
        };
        let record = self
            .service
            .update_record(region, handle, patch)
            .map_err(map_error)?;
        Ok(Written::Done(sighting_of(&record)))
    }

    async fn delete(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<(), BackendError> {
        only_records(kind)?;
        self.wait().await;
        // Nothing depends on a record inside the service, so no `DependencyViolation`.
        self.service
            .delete_record(region, handle)
            .map_err(map_error)
    }

    async fn ownership(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<RawTags, BackendError> {
        only_records(kind)?;
        self.wait().await;
        // The tags as stored: nothing stripped.
        let record = self.service.get_record(region, handle).map_err(map_error)?;
        Ok(record.tags)
    }

    async fn mark(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
        marker: &Marker,
    ) -> Result<(), BackendError> {
        only_records(kind)?;
        self.wait().await;
        let current = self.service.get_record(region, handle).map_err(map_error)?;
        match current.tags.get(MARKER_KEY).map(String::as_str) {
            // Already this fleet's (or every fleet's, the legacy value): nothing to write.
            Some(v) if v == marker.value() || v == LEGACY_MARKER_VALUE => return Ok(()),
            Some(other) => {
                return Err(BackendError::new(
                    ErrorKind::Conflict,
                    format!("record {handle} carries the marker of fleet `{other}`"),
                ));
            }
            None => {}
        }
        // The service replaces the whole tag set: write back what is there, plus the
        // marker.
        let mut tags = current.tags;
        tags.insert(marker.key().to_owned(), marker.value().to_owned());
        let patch = RecordPatch {
            tags: Some(tags),
            ..RecordPatch::default()
        };
        self.service
            .update_record(region, handle, patch)
            .map(drop)
            .map_err(map_error)
    }

    async fn secret_value(&self, region: &str, handle: &str) -> Result<SecretString, BackendError> {
        Err(BackendError::invalid(format!(
            "the {} provider has no secrets (asked for {handle} in {region})",
            Dns::ID
        )))
    }
}
