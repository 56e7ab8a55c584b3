//! `DnsBackend`: how the `dns` provider realises the kind `dnsRecord`, over a
//! [`DnsService`].
//!
//! It implements [`KindBackend<DnsRecord>`], the SDK's typed trait: a create receives
//! a `&DnsRecordSettled`, a read answers a `Reading<DnsRecord>`. A [`Router`] turns it
//! into the engine's [`Backend`] ([`DnsBackend::into_backend`]); the routing by kind
//! id, the capabilities and the refusal of secrets are the router's, not written here.
//!
//! Each method follows the **Behavior** section of the `Backend` method of the same
//! name; the comments below say which sentence a piece of code is there for.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use infra_core::sdk::layer::{Layered, Retry};
use infra_core::sdk::{
    Account, Backend, BackendError, CreateArgs, DeleteArgs, ErrorKind, KindBackend,
    LEGACY_MARKER_VALUE, ListArgs, Listed, MARKER_KEY, MarkArgs, OwnershipArgs, Partial, Provider,
    RawTags, ReadArgs, Reading, Retrier, RetryPolicy, Router, UpdateArgs, Written,
};

use crate::Dns;
use crate::record::{DnsRecord, DnsRecordObserved, DnsRecordReported, RecordType};
use crate::service::{DnsService, NewRecord, RecordPatch, ServiceError, StoredRecord};

/// The `dns` provider's implementation of `dnsRecord`.
///
/// Cheap to clone; safe to call concurrently (the service serialises its own state).
/// The engine takes it as a [`Router`], shared as `Arc<dyn Backend>`:
///
/// ```
/// use std::sync::Arc;
/// use custom_provider::{DnsBackend, DnsService};
/// use infra_core::{sdk::Backend, prelude::Backends};
///
/// let backend: Arc<dyn Backend> = DnsBackend::new(DnsService::new()).into_backend();
/// assert!(backend.capabilities().kinds.contains("dnsRecord"));
/// let backends = Backends::new().with(backend);
/// assert_eq!(backends.providers().collect::<Vec<_>>(), ["dns"]);
/// ```
///
/// Whatever else a backend should do on every call — wait, record, fail on cue, trace —
/// is a layer around the router (`infra_core::sdk::layer`), not code here:
///
/// ```
/// use std::{sync::Arc, time::Duration};
/// use custom_provider::{DnsBackend, DnsService};
/// use infra_core::engine::ManualClock;
/// use infra_core::sdk::layer::{Latency, Layered};
///
/// let clock = Arc::new(ManualClock::new());
/// let slow = Layered::wrap(
///     DnsBackend::new(DnsService::new()).into_backend(),
///     Latency::new(clock, Duration::from_millis(250)),
/// );
/// # let _ = slow;
/// ```
#[derive(Clone, Debug)]
pub struct DnsBackend {
    service: DnsService,
}

impl DnsBackend {
    /// An implementation over `service`.
    pub fn new(service: DnsService) -> Self {
        DnsBackend { service }
    }

    /// The service it talks to.
    pub fn service(&self) -> &DnsService {
        &self.service
    }

    /// The provider's backend, as the engine takes it: a [`Router`] for provider `dns`
    /// that realises `dnsRecord` with this implementation and asks the service for the
    /// account. The service's client has no retry machinery of its own, so the router
    /// is wrapped in the SDK's retry layer: the one retry policy, on the service's
    /// clock (the engine retries nothing itself).
    pub fn into_backend(self) -> Arc<dyn Backend> {
        let retrier = Retrier::new(RetryPolicy::default(), self.service.clock());
        let router = Router::new(Dns::ID, self.clone()).kind::<DnsRecord>(self);
        Layered::wrap(Arc::new(router), Retry::new(retrier))
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
pub fn reading_of(record: &StoredRecord) -> Reading<DnsRecord> {
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
    Reading::new(record.id.clone(), observed, reported)
}

/// The account the service's credentials act in: the same id on every call.
#[async_trait]
impl Account for DnsBackend {
    async fn account(&self) -> Result<String, BackendError> {
        self.service.account().map_err(map_error)
    }
}

// Tags are readable, so ownership can be checked (`tags_readable`, true by default);
// names are unique per zone, so a replace deletes before it creates (`duplicate_names`,
// false by default).
#[async_trait]
impl KindBackend<DnsRecord> for DnsBackend {
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        // Whatever the owner; an empty region is an empty list; a denial is `Denied`.
        let records = self.service.list_records(args.region).map_err(map_error)?;
        Ok(records
            .into_iter()
            .map(|r| Listed::new(r.name, r.id))
            .collect())
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<DnsRecord>, BackendError> {
        let record = self
            .service
            .get_record(args.region, args.handle)
            .map_err(map_error)?;
        Ok(reading_of(&record))
    }

    async fn create(
        &self,
        args: CreateArgs<'_, DnsRecord>,
    ) -> Result<Written<Reading<DnsRecord>>, BackendError> {
        let spec = args.spec;
        // The marker goes into the creating call itself: no crash can leave an unmarked
        // record behind. A declared tag never overrides it.
        let mut tags: BTreeMap<String, String> = spec.tags.known().cloned().unwrap_or_default();
        tags.insert(args.marker.key().to_owned(), args.marker.value().to_owned());
        let new = NewRecord {
            name: args.name.to_owned(),
            zone: spec.zone.clone(),
            record_type: spec.record_type,
            value: spec.value.clone(),
            // Unsaid: the service applies its default, and `read` reports it.
            ttl: spec.ttl.known().copied(),
            tags,
        };
        // Tried once: a create is not idempotent. A lost response maps to an error that
        // may have been sent, and the next observation finds the marked record.
        let record = self
            .service
            .create_record(args.region, new)
            .map_err(map_error)?;
        // This service never holds a change back for approval, so a write is always
        // `Done`; a governed service would answer `Written::Deferred` instead.
        Ok(Written::Done(reading_of(&record)))
    }

    async fn update(
        &self,
        args: UpdateArgs<'_, DnsRecord>,
    ) -> Result<Written<Reading<DnsRecord>>, BackendError> {
        let (spec, handle) = (args.spec, args.handle);
        let current = self
            .service
            .get_record(args.region, handle)
            .map_err(map_error)?;
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
            .update_record(args.region, handle, patch)
            .map_err(map_error)?;
        Ok(Written::Done(reading_of(&record)))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        // Nothing depends on a record inside the service, so no `DependencyViolation`.
        self.service
            .delete_record(args.region, args.handle)
            .map_err(map_error)
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        // The tags as stored: nothing stripped.
        let record = self
            .service
            .get_record(args.region, args.handle)
            .map_err(map_error)?;
        Ok(record.tags)
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let (handle, marker) = (args.handle, args.marker);
        let current = self
            .service
            .get_record(args.region, handle)
            .map_err(map_error)?;
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
            .update_record(args.region, handle, patch)
            .map(drop)
            .map_err(map_error)
    }
}
