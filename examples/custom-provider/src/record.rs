//! The `dnsRecord` kind: one named record in a zone.
//!
//! Declared with `#[derive(Spec)]` exactly as any crate outside `infra-core` would: the
//! derive writes the settled form ([`DnsRecordSettled`], what the backend receives), the
//! reported form ([`DnsRecordReported`], what `read` fills in), and the divergence table
//! (`<DnsRecord as Spec>::FIELDS`): `recordType` and `zone` force a replace, the rest
//! update in place.
//!
//! Values are written in the form the service reports them back, so that a second apply
//! compares equal values: an IPv4 or IPv6 address as Rust prints it (`2001:db8::1`, not
//! `2001:DB8:0::1`), a CNAME target in lowercase without the trailing dot. The check
//! refuses a literal in any other form, before any network call.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::RangeInclusive;

use infra_core::{
    prelude::{Expr, Partial, Spec},
    sdk::MARKER_KEY,
};
use serde::{Deserialize, Serialize};

/// The TTLs the service accepts, in seconds.
pub const TTL_RANGE: RangeInclusive<u32> = 30..=86_400;

/// The TTL the service gives a record created without one, in seconds.
pub const DEFAULT_TTL: u32 = 300;

/// The longest TXT value the service stores, in bytes.
pub const TXT_MAX_LEN: usize = 255;

/// The type of a DNS record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(test, derive(infra_core::testing::Sample))]
pub enum RecordType {
    /// An IPv4 address.
    #[serde(rename = "A")]
    A,
    /// An IPv6 address.
    #[serde(rename = "AAAA")]
    Aaaa,
    /// An alias: another host name.
    #[serde(rename = "CNAME")]
    Cname,
    /// Free text.
    #[serde(rename = "TXT")]
    Txt,
}

impl RecordType {
    /// The type's name in zone files (`AAAA`).
    pub fn as_str(&self) -> &'static str {
        match self {
            RecordType::A => "A",
            RecordType::Aaaa => "AAAA",
            RecordType::Cname => "CNAME",
            RecordType::Txt => "TXT",
        }
    }
}

impl fmt::Display for RecordType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A DNS record: a name (the resource's name in the fleet) in a zone, answering a value
/// of one type.
///
/// ```
/// use custom_provider::{DnsRecord, RecordType};
/// use infra_core::prelude::Kind;
///
/// let www = DnsRecord::new(RecordType::A, "example.com", "192.0.2.10").with_ttl(600);
/// let mut problems = Vec::new();
/// www.check(&mut problems);
/// assert!(problems.is_empty(), "{problems:?}");
///
/// let bad = DnsRecord::new(RecordType::Aaaa, "Example.com.", "2001:DB8::1").with_ttl(5);
/// let mut problems = Vec::new();
/// bad.check(&mut problems);
/// assert_eq!(problems.len(), 3, "{problems:?}");
/// ```
#[derive(Clone, Debug, PartialEq, Spec)]
#[cfg_attr(test, derive(infra_core::testing::Sample))]
#[spec(
    kind = "dnsRecord",
    observed = DnsRecordObserved,
    check = DnsRecord::check_fields,
    name_rule = dns_label
)]
pub struct DnsRecord {
    /// The record's type. The service cannot change it in place: a replace.
    #[spec(replace)]
    pub record_type: Expr<RecordType>,
    /// The zone the record belongs to (`example.com`: lowercase, no trailing dot). A
    /// record cannot move between zones: a replace.
    #[spec(replace)]
    pub zone: Expr<String>,
    /// What the record answers: an address for `A` and `AAAA`, a host name for `CNAME`,
    /// text for `TXT`. Often another resource's observed value. Changed in place.
    pub value: Expr<String>,
    /// Seconds resolvers may cache the answer (30 to 86400). Unsaid, the service
    /// applies its default of 300 and reports it; that report is not drift.
    pub ttl: Partial<Expr<u32>>,
    /// Labels, compared as a set of pairs. The ownership marker is the backend's to
    /// write: a declared tag may not use its key.
    pub tags: Partial<Expr<BTreeMap<String, String>>>,
}

impl DnsRecord {
    /// A record with the TTL and the tags left to the service.
    pub fn new(
        record_type: impl Into<Expr<RecordType>>,
        zone: impl Into<Expr<String>>,
        value: impl Into<Expr<String>>,
    ) -> Self {
        DnsRecord {
            record_type: record_type.into(),
            zone: zone.into(),
            value: value.into(),
            ttl: Partial::Unknown,
            tags: Partial::Unknown,
        }
    }

    /// The same record with its TTL said.
    pub fn with_ttl(mut self, seconds: u32) -> Self {
        self.ttl = Partial::Known(Expr::lit(seconds));
        self
    }

    /// The same record with its tags said.
    pub fn with_tags<K, V>(mut self, tags: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        let tags = tags
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        self.tags = Partial::Known(Expr::lit(tags));
        self
    }

    /// What the type cannot hold, for every field known before apply.
    fn check_fields(&self, problems: &mut Vec<String>) {
        if let Some(zone) = self.zone.as_lit()
            && let Err(why) = check_zone(zone)
        {
            problems.push(format!("`zone` {zone:?} {why}"));
        }
        if let (Some(record_type), Some(value)) = (self.record_type.as_lit(), self.value.as_lit())
            && let Err(why) = check_value(*record_type, value)
        {
            problems.push(format!("`value` {value:?} of a {record_type} record {why}"));
        }
        if let Some(ttl) = self.ttl.known().and_then(Expr::as_lit)
            && !TTL_RANGE.contains(ttl)
        {
            problems.push(format!(
                "`ttl` is {ttl}, outside {}..={}: give a TTL in that range, or leave it unsaid for the service's default of {DEFAULT_TTL}",
                TTL_RANGE.start(),
                TTL_RANGE.end()
            ));
        }
        if let Some(tags) = self.tags.known().and_then(Expr::as_lit)
            && tags.contains_key(MARKER_KEY)
        {
            problems.push(format!(
                "`tags` declares `{MARKER_KEY}`, the ownership marker's key: remove it, the backend writes the marker itself"
            ));
        }
    }
}

/// What the service computes about a [`DnsRecord`]. Cached between runs; holds no
/// secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsRecordObserved {
    /// The id the service assigned (`rr-0000002a`): the handle.
    pub id: String,
    /// The fully qualified name the record answers for (`www.example.com`).
    pub fqdn: String,
}

/// The name rule of records: one DNS label (RFC 1123), in lowercase. 1 to 63
/// characters of letters, digits and `-`, neither starting nor ending with `-`.
///
/// ```
/// use custom_provider::dns_label;
/// assert!(dns_label("www").is_ok());
/// assert!(dns_label("1st-edition").is_ok());
/// assert!(dns_label("-www").is_err());
/// assert!(dns_label("WWW").is_err());
/// assert!(dns_label("a.b").is_err());
/// ```
pub fn dns_label(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 63 {
        return Err(format!(
            "must be 1 to 63 characters long (it has {})",
            name.len()
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "may hold only lowercase letters, digits and `-` (found {bad:?})"
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err("must neither start nor end with `-`".into());
    }
    Ok(())
}

/// A zone or host name in the form the service reports: dot-separated labels, each
/// following [`dns_label`], 253 characters at most, no trailing dot.
pub fn check_zone(zone: &str) -> Result<(), String> {
    if zone.ends_with('.') {
        return Err("ends with `.`: write the name without the trailing dot".into());
    }
    if zone.len() > 253 {
        return Err(format!(
            "is {} characters long; a DNS name has at most 253",
            zone.len()
        ));
    }
    for label in zone.split('.') {
        dns_label(label).map_err(|why| format!("has a label {label:?} that {why}"))?;
    }
    Ok(())
}

/// Whether `value` is a value of `record_type` in the form the service reports back,
/// so that it compares equal with the next read.
pub fn check_value(record_type: RecordType, value: &str) -> Result<(), String> {
    match record_type {
        RecordType::A => match value.parse::<Ipv4Addr>() {
            Err(_) => Err("is not an IPv4 address".into()),
            Ok(addr) if addr.to_string() != value => {
                Err(format!("is reported back as {addr:?}: write it that way"))
            }
            Ok(_) => Ok(()),
        },
        RecordType::Aaaa => match value.parse::<Ipv6Addr>() {
            Err(_) => Err("is not an IPv6 address".into()),
            Ok(addr) if addr.to_string() != value => Err(format!(
                "is reported back as {:?}: write it that way",
                addr.to_string()
            )),
            Ok(_) => Ok(()),
        },
        RecordType::Cname => check_zone(value),
        RecordType::Txt => {
            if value.is_empty() || value.len() > TXT_MAX_LEN {
                Err(format!(
                    "must be 1 to {TXT_MAX_LEN} bytes long (it has {})",
                    value.len()
                ))
            } else if value.chars().any(|c| !(' '..='~').contains(&c)) {
                Err("may hold only printable ASCII characters".into())
            } else {
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infra_core::testing::{check_merge_laws, check_refines_laws};
    use infra_core::{prelude::Kind, sdk::Mutability};

    #[test]
    fn the_divergence_table_replaces_on_type_and_zone_only() {
        let table: Vec<(&str, Mutability)> = DnsRecord::FIELDS
            .iter()
            .map(|f| (f.name, f.mutability))
            .collect();
        assert_eq!(
            table,
            [
                ("recordType", Mutability::ForcesReplace),
                ("zone", Mutability::ForcesReplace),
                ("value", Mutability::Mutable),
                ("ttl", Mutability::Mutable),
                ("tags", Mutability::Mutable),
            ]
        );
        assert_eq!(DnsRecord::ID, "dnsRecord");
    }

    #[test]
    fn values_must_be_written_as_the_service_reports_them() {
        assert!(check_value(RecordType::A, "192.0.2.1").is_ok());
        assert!(check_value(RecordType::A, "192.0.2.256").is_err());
        assert!(check_value(RecordType::Aaaa, "2001:db8::1").is_ok());
        assert!(check_value(RecordType::Aaaa, "2001:0db8:0::1").is_err());
        assert!(check_value(RecordType::Cname, "assets.s3.eu-west-3.amazonaws.com").is_ok());
        assert!(check_value(RecordType::Cname, "assets.example.com.").is_err());
        assert!(check_value(RecordType::Cname, "Assets.example.com").is_err());
        assert!(check_value(RecordType::Txt, "v=spf1 -all").is_ok());
        assert!(check_value(RecordType::Txt, "").is_err());
        assert!(check_value(RecordType::Txt, &"x".repeat(256)).is_err());
    }

    #[test]
    fn the_check_names_each_field_and_leaves_computed_values_alone() {
        let mut problems = Vec::new();
        DnsRecord::new(RecordType::Cname, "example.com.", "a.example.com")
            .with_ttl(100_000)
            .with_tags([(MARKER_KEY, "mine")])
            .check(&mut problems);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].starts_with("`zone`"));
        assert!(problems[1].starts_with("`ttl`"));
        assert!(problems[2].starts_with("`tags`"));

        // A value computed from another resource is only known at apply: not checked.
        let mut fleet = infra_core::prelude::Fleet::builder("checks");
        let bucket = fleet.declare(
            infra_core::prelude::AwsRegion::EuWest3,
            "checks-bucket",
            infra_core::kinds::ObjectStore::new(),
        );
        let computed =
            Expr::observed(bucket).map(|o: &infra_core::kinds::ObjectStoreObserved| o.id.clone());
        let mut problems = Vec::new();
        DnsRecord::new(RecordType::A, "example.com", computed).check(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn refinement_and_merge_obey_their_laws() {
        check_refines_laws::<DnsRecord>(256);
        check_merge_laws::<DnsRecord>(256);
    }
}
