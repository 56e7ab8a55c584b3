//! The proof of a durably recorded attempt, and the configuration artifact it sends.
//!
//! Nothing is sent to a machine without a durably recorded commitment and attempt:
//! the dispatch client's send takes a [`CommittedAttempt`] by value, and only the
//! store's attempt transaction (in this crate) can construct one. Outside code can
//! read a proof but not make one:
//!
//! ```
//! use infra_talos::CommittedAttempt;
//!
//! fn describe(attempt: &CommittedAttempt) -> String {
//!     format!(
//!         "operation {} attempt {} on {} for {} within {:?}",
//!         attempt.operation_id(),
//!         attempt.attempt(),
//!         attempt.machine(),
//!         attempt.artifact_digest(),
//!         attempt.transport_deadline(),
//!     )
//! }
//! ```
//!
//! ```compile_fail,E0624
//! use std::time::Duration;
//! use infra_talos::{CommittedAttempt, config_digest};
//!
//! // The constructor belongs to the store's attempt transaction.
//! let forged = CommittedAttempt::new(
//!     "op-1".to_owned(),
//!     1,
//!     "machine-a".to_owned(),
//!     config_digest(b"version: v1alpha1\n"),
//!     Duration::from_secs(5),
//! );
//! ```
//!
//! ```compile_fail,E0451
//! use std::time::Duration;
//! use infra_talos::{CommittedAttempt, config_digest};
//!
//! // Nor can its fields be filled in from outside.
//! let forged = CommittedAttempt {
//!     operation_id: "op-1".to_owned(),
//!     attempt: 1,
//!     machine: "machine-a".to_owned(),
//!     artifact_digest: config_digest(b"version: v1alpha1\n"),
//!     transport_deadline: Duration::from_secs(5),
//! };
//! ```

use std::fmt;
use std::time::Duration;

use crate::digest::{Digest, config_digest};

/// The proof that an attempt to apply an artifact to a machine was committed and
/// recorded durably. Consumed by the one send it authorises; not `Clone`.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a committed attempt authorises exactly one send"]
pub struct CommittedAttempt {
    operation_id: String,
    attempt: u32,
    machine: String,
    artifact_digest: Digest,
    transport_deadline: Duration,
}

impl CommittedAttempt {
    /// Records the proof. Only the store's attempt transaction calls this, after the
    /// attempt is durable.
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "constructed by the store's attempt transaction, which lives in this crate"
        )
    )]
    pub(crate) fn new(
        operation_id: String,
        attempt: u32,
        machine: String,
        artifact_digest: Digest,
        transport_deadline: Duration,
    ) -> Self {
        CommittedAttempt {
            operation_id,
            attempt,
            machine,
            artifact_digest,
            transport_deadline,
        }
    }

    /// The operation the attempt belongs to.
    #[must_use]
    pub fn operation_id(&self) -> &str {
        &self.operation_id
    }

    /// The attempt's number within its operation.
    #[must_use]
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The planned target machine.
    #[must_use]
    pub fn machine(&self) -> &str {
        &self.machine
    }

    /// The digest of the artifact the attempt is for.
    #[must_use]
    pub fn artifact_digest(&self) -> Digest {
        self.artifact_digest
    }

    /// How long the send may wait for the node's answer.
    #[must_use]
    pub fn transport_deadline(&self) -> Duration {
        self.transport_deadline
    }
}

/// A machine configuration to apply: its plaintext bytes and their
/// [`config_digest`]. The bytes may hold secrets: `Debug` shows only the length and
/// digest.
#[derive(Clone, PartialEq, Eq)]
pub struct ConfigArtifact {
    bytes: Vec<u8>,
    digest: Digest,
}

impl ConfigArtifact {
    /// An artifact with these plaintext bytes.
    #[must_use]
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        let bytes = bytes.into();
        let digest = config_digest(&bytes);
        ConfigArtifact { bytes, digest }
    }

    /// The configuration digest of the bytes.
    #[must_use]
    pub fn digest(&self) -> Digest {
        self.digest
    }

    /// The plaintext bytes.
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The length of the plaintext in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the plaintext is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

impl fmt::Debug for ConfigArtifact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigArtifact")
            .field("len", &self.bytes.len())
            .field("digest", &self.digest)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_debug_shows_no_bytes() {
        let artifact = ConfigArtifact::new(b"machine:\n  token: s3cr3t-t0ken\n".to_vec());
        let shown = format!("{artifact:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains(&artifact.digest().to_hex()));
    }

    #[test]
    fn proof_accessors() {
        let digest = config_digest(b"a: 1\n");
        let attempt = CommittedAttempt::new(
            "op-7".to_owned(),
            3,
            "machine-a".to_owned(),
            digest,
            Duration::from_millis(250),
        );
        assert_eq!(attempt.operation_id(), "op-7");
        assert_eq!(attempt.attempt(), 3);
        assert_eq!(attempt.machine(), "machine-a");
        assert_eq!(attempt.artifact_digest(), digest);
        assert_eq!(attempt.transport_deadline(), Duration::from_millis(250));
    }
}
