#![doc = include_str!("../README.md")]

pub mod backend;
pub mod fleet;
pub mod provider;
pub mod record;
pub mod service;

pub use backend::{DnsBackend, map_error, reading_of};
pub use fleet::{FLEET_NAME, ZONE, bucket_host, example_fleet};
pub use provider::{Dns, DnsRegion};
pub use record::{
    DEFAULT_TTL, DnsRecord, DnsRecordObserved, DnsRecordReported, DnsRecordSettled, RecordType,
    TTL_RANGE, check_value, check_zone, dns_label,
};
pub use service::{
    ACCOUNT_ID, Access, DnsService, NewRecord, RecordPatch, ServiceCall, ServiceError,
    ServiceFileError, ServiceOp, StoredRecord,
};

use infra_core::prelude::Supports;

/// The DNS service realises `dnsRecord`, so a `DnsRecord` can be declared in a
/// [`DnsRegion`]; no other kind can.
impl Supports<DnsRecord> for Dns {}
