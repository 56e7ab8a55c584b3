//! The drift pass (§6.1, choice §10.36): every configured drift interval, the
//! controller reads each managed machine through its read-only client and records a
//! drift observation. The store applies the drift rules to it in the same transaction
//! that records it (`contract::drift`): a record opens with the digest-mismatch alert
//! as its opening entry (choice §10.35), extends with the latest differing digest, or
//! closes as returned. The pass itself decides nothing; it reports what the store
//! recorded.
//!
//! A machine that could not be reached is reported as unreachable, and one whose
//! digest could not be read as unread: neither is ever reported as in step or as
//! drifted. Drift never triggers an apply and never freezes a scope (choice §10.12).

use std::future::Future;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Executor, ExecutorError};
use crate::contract::evidence::ObservationPurpose;
use crate::contract::{Revision, SpanMs};
use crate::store::MachineView;

/// What one drift observation of a machine found, as the store recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "found")]
pub enum DriftFinding {
    /// The machine could not be reached; nothing was recorded.
    Unreachable {
        /// Why, without configuration values.
        reason: String,
    },
    /// The read recorded no configuration digest; it decides nothing.
    Unread,
    /// The digest read is Applied's and no record is open.
    InStep,
    /// A drift record opened with this observation.
    Opened {
        /// The record (its opening revision).
        record: Revision,
    },
    /// The open record stays open (extended when the digest differs again).
    StillOpen {
        /// The record.
        record: Revision,
    },
    /// The open record closed with this observation (returned to Applied).
    Closed {
        /// The record.
        record: Revision,
    },
    /// The digest differs from Applied, yet the drift rules opened no record: an
    /// operation held the scope since the read began, or a newer read decides
    /// (§6.1). The next pass looks again.
    DiffersUnrecorded,
}

/// One machine's line of a drift pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftReading {
    /// The machine.
    pub machine: String,
    /// The observation's basis, when one was recorded.
    pub basis: Option<Revision>,
    /// What it found.
    #[serde(flatten)]
    pub finding: DriftFinding,
}

/// Every machine's line of one drift pass, in machine order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftPass {
    /// The machines observed (those with an Applied release).
    pub readings: Vec<DriftReading>,
}

impl DriftPass {
    /// The machines with an open drift record after the pass.
    #[must_use]
    pub fn drifted(&self) -> Vec<&str> {
        self.readings
            .iter()
            .filter(|r| {
                matches!(
                    r.finding,
                    DriftFinding::Opened { .. } | DriftFinding::StillOpen { .. }
                )
            })
            .map(|r| r.machine.as_str())
            .collect()
    }
}

impl Executor {
    /// One drift pass over every machine with an Applied release (§6.1).
    ///
    /// # Errors
    ///
    /// A store failure; an unreachable machine is a [`DriftFinding`], not an error.
    pub async fn drift_pass(&self) -> Result<DriftPass, ExecutorError> {
        let mut pass = DriftPass::default();
        for machine in self.store.machines().await? {
            if machine.applied_digest.is_none() {
                continue;
            }
            pass.readings.push(self.drift_observation(&machine).await?);
        }
        Ok(pass)
    }

    /// Drift passes every `interval` until `stop` completes; each pass is handed to
    /// `report` as it ends. Returns how many passes ran. A pass in progress when
    /// `stop` completes is finished first: an observation is never cut between its
    /// start entry and its result.
    ///
    /// # Errors
    ///
    /// [`ExecutorError::Settings`] for a zero interval; a store failure ends the
    /// watch.
    pub async fn watch_drift<S, R>(
        &self,
        interval: SpanMs,
        stop: S,
        mut report: R,
    ) -> Result<usize, ExecutorError>
    where
        S: Future<Output = ()>,
        R: FnMut(&DriftPass),
    {
        if interval == SpanMs(0) {
            return Err(ExecutorError::Settings(
                "the drift interval must be positive (choice §10.36)".to_owned(),
            ));
        }
        let mut stop = std::pin::pin!(stop);
        let mut passes = 0;
        loop {
            let pass = self.drift_pass().await?;
            passes += 1;
            report(&pass);
            tokio::select! {
                () = self.clock.sleep(Duration::from_millis(interval.0)) => {}
                () = &mut stop => return Ok(passes),
            }
        }
    }

    async fn drift_observation(
        &self,
        machine: &MachineView,
    ) -> Result<DriftReading, ExecutorError> {
        let before = machine.open_drift;
        let (basis, facts) = match self
            .observe_unplanned(&machine.id, ObservationPurpose::Drift)
            .await?
        {
            Ok(read) => read,
            Err(reason) => {
                return Ok(DriftReading {
                    machine: machine.id.clone(),
                    basis: None,
                    finding: DriftFinding::Unreachable { reason },
                });
            }
        };
        let digest = facts.digest;
        let read_nothing = facts.digest.is_none()
            && facts.smbios_uuid.is_none()
            && facts.node_id.is_none()
            && facts.talos_version.is_none();
        let after = self.store.machine(&machine.id).await?;
        let finding = match (before, after.open_drift, digest) {
            (_, _, None) if read_nothing => DriftFinding::Unreachable {
                reason: "the read returned no value".to_owned(),
            },
            (_, _, None) => DriftFinding::Unread,
            (None, Some(record), _) => DriftFinding::Opened { record },
            (Some(_), Some(record), _) => DriftFinding::StillOpen { record },
            (Some(record), None, _) => DriftFinding::Closed { record },
            (None, None, Some(d)) if Some(d) == after.applied_digest => DriftFinding::InStep,
            (None, None, Some(_)) => DriftFinding::DiffersUnrecorded,
        };
        Ok(DriftReading {
            machine: machine.id.clone(),
            basis: Some(basis),
            finding,
        })
    }
}
