//! Observation evidence: what was read from a machine, value by value, and why a
//! value could not be read.
//!
//! A value that could not be read is *missing evidence* — never a mismatch, never
//! absent, never a default. A permission error in particular is
//! [`MissingReason::PermissionDenied`], not "not there".

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;

/// One value of an observation: read, or missing with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Read<T> {
    /// The value as read.
    Ok(T),
    /// The value could not be read.
    Missing {
        /// Why.
        reason: MissingReason,
    },
}

impl<T> Read<T> {
    /// A missing value.
    pub fn missing(reason: MissingReason) -> Self {
        Read::Missing { reason }
    }

    /// The value, if read.
    pub fn value(&self) -> Option<&T> {
        match self {
            Read::Ok(value) => Some(value),
            Read::Missing { .. } => None,
        }
    }

    /// Why the value is missing, if it is.
    pub fn reason(&self) -> Option<&MissingReason> {
        match self {
            Read::Ok(_) => None,
            Read::Missing { reason } => Some(reason),
        }
    }

    /// Whether the value was read.
    pub fn is_read(&self) -> bool {
        matches!(self, Read::Ok(_))
    }

    /// Maps a read value.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Read<U> {
        match self {
            Read::Ok(value) => Read::Ok(f(value)),
            Read::Missing { reason } => Read::Missing { reason },
        }
    }

    /// Maps a read value to another read, which may be missing.
    pub fn and_then<U>(self, f: impl FnOnce(T) -> Read<U>) -> Read<U> {
        match self {
            Read::Ok(value) => f(value),
            Read::Missing { reason } => Read::Missing { reason },
        }
    }

    /// Borrows the value.
    pub fn as_ref(&self) -> Read<&T> {
        match self {
            Read::Ok(value) => Read::Ok(value),
            Read::Missing { reason } => Read::Missing {
                reason: reason.clone(),
            },
        }
    }

    /// The value, or why it is missing.
    pub fn into_result(self) -> Result<T, MissingReason> {
        match self {
            Read::Ok(value) => Ok(value),
            Read::Missing { reason } => Err(reason),
        }
    }
}

/// Why a value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissingReason {
    /// The node could not be reached, or the connection broke.
    Unreachable,
    /// The read's deadline passed.
    DeadlineExceeded,
    /// The node refused the read to these credentials. Not evidence of absence.
    PermissionDenied,
    /// The node says the resource does not exist.
    NotFound,
    /// The node answered with something that is not the value (detail says how).
    Malformed(String),
    /// The node answered with another gRPC status code.
    Other {
        /// The gRPC status code.
        code: i32,
    },
}

impl fmt::Display for MissingReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MissingReason::Unreachable => f.write_str("the node could not be reached"),
            MissingReason::DeadlineExceeded => f.write_str("the read's deadline passed"),
            MissingReason::PermissionDenied => f.write_str("permission denied"),
            MissingReason::NotFound => f.write_str("not found"),
            MissingReason::Malformed(detail) => write!(f, "malformed answer: {detail}"),
            MissingReason::Other { code } => {
                write!(f, "gRPC status {} ({code})", grpc_code_name(*code))
            }
        }
    }
}

/// The name of a gRPC status code.
pub(crate) fn grpc_code_name(code: i32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "unrecognised",
    }
}

/// Who the machine says it is.
///
/// Each value is read (and may be missing) on its own: a machine recorded by SMBIOS
/// UUID needs only that one, a machine recorded by Talos node ID only the other.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineIdentity {
    /// The SMBIOS UUID (`SystemInformations.hardware.talos.dev`, `uuid`).
    pub smbios_uuid: Read<String>,
    /// The Talos node ID (`Identities.cluster.talos.dev`, `nodeId`).
    pub node_id: Read<String>,
}

/// The running machine configuration, as far as observation needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineConfigState {
    /// The configuration digest of the document read back.
    pub digest: Digest,
    /// The `MachineConfigs.config.talos.dev` resource version.
    pub version: String,
}

/// The cluster the machine belongs to (`Infos.cluster.talos.dev`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterInfo {
    /// The Talos cluster ID.
    pub cluster_id: String,
    /// The cluster name.
    pub cluster_name: String,
}

/// The SMBIOS system information (`SystemInformations.hardware.talos.dev`), as
/// reported; a value the firmware does not provide is empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemInformation {
    /// The SMBIOS UUID.
    pub uuid: String,
    /// The manufacturer.
    pub manufacturer: String,
    /// The product name.
    pub product_name: String,
    /// The serial number.
    pub serial_number: String,
}

/// A resource's id and version, as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceVersion {
    /// The resource id.
    pub id: String,
    /// The resource version.
    pub version: String,
}

/// Everything one observation of a machine read, value by value, and when the read
/// ran (readings of the clock the observer was given).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    /// The machine's identity.
    pub identity: MachineIdentity,
    /// The Talos cluster ID.
    pub cluster_id: Read<String>,
    /// The running Talos version (its tag, e.g. `v1.10.4`).
    pub talos_version: Read<String>,
    /// The configuration digest of the running machine configuration.
    pub config_digest: Read<Digest>,
    /// The machine-config resource version (COSI `metadata.version`), read together
    /// with the digest.
    pub config_version: Read<String>,
    /// The clock's reading before the first read was sent.
    pub started: Duration,
    /// The clock's reading after the last answer arrived.
    pub ended: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_combinators() {
        let read: Read<u8> = Read::Ok(2);
        assert_eq!(read.clone().map(|v| v * 2), Read::Ok(4));
        assert_eq!(read.value(), Some(&2));
        assert!(read.is_read());
        let missing: Read<u8> = Read::missing(MissingReason::PermissionDenied);
        assert_eq!(missing.reason(), Some(&MissingReason::PermissionDenied));
        assert_eq!(
            missing.clone().and_then(|v| Read::Ok(v + 1)),
            Read::missing(MissingReason::PermissionDenied)
        );
        assert_eq!(missing.into_result(), Err(MissingReason::PermissionDenied));
    }

    #[test]
    fn reasons_display() {
        assert_eq!(
            MissingReason::Other { code: 13 }.to_string(),
            "gRPC status INTERNAL (13)"
        );
        assert_eq!(
            MissingReason::Malformed("no metadata".into()).to_string(),
            "malformed answer: no metadata"
        );
    }

    #[test]
    fn missing_serialises_with_its_reason() {
        let read: Read<String> = Read::missing(MissingReason::PermissionDenied);
        let json = serde_json::to_string(&read).expect("serialise");
        assert_eq!(json, r#"{"missing":{"reason":"permission_denied"}}"#);
    }
}
