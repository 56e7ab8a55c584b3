//! Accounting a lost response (§5.2, §7.3 step 1, choice §10.11).
//!
//! Nothing bounds when an abandoned request can still land, so an attempt without a
//! response from the node can only be settled by recovery-admin, and only once three
//! recorded conditions all hold. [`check_decision`] checks them over the
//! recorded facts and returns what the decision entry must name; it refuses with the
//! condition that fails. A decision is a judgement, not proof that nothing can land.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::evidence::ObservationPurpose;
use super::{InstantMs, Role, SpanMs};

/// The smallest settle floor a deployment may set (choice §10.11): 30 s.
pub const MIN_SETTLE_FLOOR: SpanMs = SpanMs::from_secs(30);

/// Condition 1: what stopped the attempt's executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorStop {
    /// No takeover and no recorded stop: the executor may still record attempts. An
    /// executor that merely exited is this case.
    NotStopped,
    /// The operation was taken over (§3.4) at this time.
    TakenOver {
        /// When the takeover committed.
        at: InstantMs,
    },
    /// Every pre-restore controller instance was stopped at this time, as the
    /// recovery entry records it (§7.3 step 1).
    StoppedForRestore {
        /// The recorded stop.
        at: InstantMs,
    },
}

/// The attempt's transport deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportDeadline {
    /// The absolute deadline the attempt entry recorded.
    Known(InstantMs),
    /// The restore erased the attempt: the latest it could have been is the
    /// recorded stop plus the deployment's maximum transport deadline (§7.3 step 1).
    ErasedByRestore {
        /// The deployment's maximum transport deadline, a high-water mark kept
        /// outside the application database.
        max_transport_deadline: SpanMs,
    },
}

/// A recorded read of the machine, as the decision may rely on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RecordedRead {
    /// Why it was taken.
    pub purpose: ObservationPurpose,
    /// When its remote read began.
    pub started_at: InstantMs,
    /// When its result was recorded.
    pub recorded_at: InstantMs,
    /// The machine-configuration resource version it read; `None` when the read
    /// failed or could not read it.
    pub config_version: Option<u64>,
}

/// What a §5.2 decision reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecisionFacts<'a> {
    /// The deciding identity's role.
    pub decider: Role,
    /// Condition 1.
    pub stop: ExecutorStop,
    /// The attempt's transport deadline.
    pub deadline: TransportDeadline,
    /// The deployment's settle floor, kept outside the application database.
    pub settle_floor: SpanMs,
    /// Every read of the machine the timeline holds; reads whose result is not yet
    /// recorded at `now` are ignored.
    pub reads: &'a [RecordedRead],
    /// The decision's time.
    pub now: InstantMs,
    /// How the decision explains a change of the resource version during the
    /// settle; needed only when it changed.
    pub version_change_explanation: Option<&'a str>,
}

/// What a decision that passes names and records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Decision {
    /// The start observation: the first successful read after the deadline.
    pub start: RecordedRead,
    /// The end observation: a recovery observation begun after the floor.
    pub end: RecordedRead,
    /// The latest of the deadline, the stop and the start observation.
    pub settle_from: InstantMs,
    /// `settle_from` plus the settle floor.
    pub floor_ends: InstantMs,
    /// The resource version changed during the settle (the decision explains it).
    pub version_changed: bool,
}

/// Why a §5.2 decision may not be recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AccountingRefusal {
    /// Only recovery-admin accounts (§4, §8 invariant 11).
    #[error("an accounting decision is recovery-admin's, not {role}'s (§4, §8 invariant 11)")]
    NotRecoveryAdmin {
        /// The role that tried.
        role: Role,
    },
    /// The deployment's floor is below the minimum.
    #[error(
        "the settle floor {floor} is below the minimum of {} (choice §10.11)",
        MIN_SETTLE_FLOOR
    )]
    FloorBelowMinimum {
        /// The configured floor.
        floor: SpanMs,
    },
    /// Condition 1.
    #[error(
        "condition 1: the executor is neither taken over nor recorded as stopped; an exit is not \
         a stop (§5.2)"
    )]
    ExecutorNotStopped,
    /// Condition 2: no successful read after the deadline.
    #[error(
        "condition 2: no successful read of the machine began after the transport deadline {deadline}"
    )]
    NoReadAfterDeadline {
        /// The transport deadline.
        deadline: InstantMs,
    },
    /// Condition 2: the floor has not elapsed.
    #[error("condition 2: the settle floor ends at {floor_ends}; it is {now}")]
    FloorNotElapsed {
        /// When the floor ends.
        floor_ends: InstantMs,
        /// The decision's time.
        now: InstantMs,
    },
    /// Condition 3.
    #[error(
        "condition 3: no recorded recovery observation that read the resource version began at \
         or after {floor_ends}"
    )]
    NoRecoveryReadAfterFloor {
        /// When the floor ends.
        floor_ends: InstantMs,
    },
    /// Condition 3: a version change with no explanation.
    #[error(
        "condition 3: the machine-configuration version moved from {start} to {end} during the \
         settle and the decision does not explain it"
    )]
    UnexplainedVersionChange {
        /// The version at the start observation.
        start: u64,
        /// The version at the end observation.
        end: u64,
    },
}

impl AccountingRefusal {
    /// The §5.2 condition that failed, or `None` for a role or setting refusal.
    #[must_use]
    pub const fn condition(&self) -> Option<u8> {
        match self {
            Self::NotRecoveryAdmin { .. } | Self::FloorBelowMinimum { .. } => None,
            Self::ExecutorNotStopped => Some(1),
            Self::NoReadAfterDeadline { .. } | Self::FloorNotElapsed { .. } => Some(2),
            Self::NoRecoveryReadAfterFloor { .. } | Self::UnexplainedVersionChange { .. } => {
                Some(3)
            }
        }
    }
}

fn usable(read: &RecordedRead, now: InstantMs) -> Option<u64> {
    if read.recorded_at < read.started_at || read.recorded_at > now {
        return None;
    }
    read.config_version
}

/// Check the three §5.2 conditions over recorded facts.
///
/// Times are compared conservatively: the start observation must have begun strictly
/// after the deadline, it counts from when it was recorded for the settle's start,
/// and the end observation must have begun at or after the floor's end.
///
/// # Errors
///
/// The first [`AccountingRefusal`]: role, floor setting, then conditions 1, 2, 3.
pub fn check_decision(facts: &DecisionFacts<'_>) -> Result<Decision, AccountingRefusal> {
    if facts.decider != Role::RecoveryAdmin {
        return Err(AccountingRefusal::NotRecoveryAdmin {
            role: facts.decider,
        });
    }
    if facts.settle_floor < MIN_SETTLE_FLOOR {
        return Err(AccountingRefusal::FloorBelowMinimum {
            floor: facts.settle_floor,
        });
    }
    let stopped_at = match facts.stop {
        ExecutorStop::NotStopped => return Err(AccountingRefusal::ExecutorNotStopped),
        ExecutorStop::TakenOver { at } | ExecutorStop::StoppedForRestore { at } => at,
    };
    let deadline = match facts.deadline {
        TransportDeadline::Known(at) => at,
        TransportDeadline::ErasedByRestore {
            max_transport_deadline,
        } => stopped_at.plus(max_transport_deadline),
    };
    let start = facts
        .reads
        .iter()
        .filter(|r| r.started_at > deadline && usable(r, facts.now).is_some())
        .min_by_key(|r| (r.started_at, r.recorded_at))
        .copied()
        .ok_or(AccountingRefusal::NoReadAfterDeadline { deadline })?;
    let settle_from = deadline.max(stopped_at).max(start.recorded_at);
    let floor_ends = settle_from.plus(facts.settle_floor);
    if facts.now < floor_ends {
        return Err(AccountingRefusal::FloorNotElapsed {
            floor_ends,
            now: facts.now,
        });
    }
    let end = facts
        .reads
        .iter()
        .filter(|r| {
            r.purpose == ObservationPurpose::Recovery
                && r.started_at >= floor_ends
                && usable(r, facts.now).is_some()
        })
        .max_by_key(|r| (r.started_at, r.recorded_at))
        .copied()
        .ok_or(AccountingRefusal::NoRecoveryReadAfterFloor { floor_ends })?;
    let (Some(start_version), Some(end_version)) = (start.config_version, end.config_version)
    else {
        return Err(AccountingRefusal::NoRecoveryReadAfterFloor { floor_ends });
    };
    let version_changed = start_version != end_version;
    let explained = facts
        .version_change_explanation
        .is_some_and(|e| !e.trim().is_empty());
    if version_changed && !explained {
        return Err(AccountingRefusal::UnexplainedVersionChange {
            start: start_version,
            end: end_version,
        });
    }
    Ok(Decision {
        start,
        end,
        settle_from,
        floor_ends,
        version_changed,
    })
}

/// One scope of a decision that covers several, and why it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "scope #{index} of the decision (counting from 0) fails, so the decision covers none of them: {refusal}"
)]
pub struct JointRefusal {
    /// The position of the failing scope in the request.
    pub index: usize,
    /// Why it fails.
    pub refusal: AccountingRefusal,
}

/// A decision covering several scopes, each with its own observations (§7.3 step 1):
/// all pass or none is recorded.
///
/// # Errors
///
/// [`JointRefusal`] naming the first scope that fails.
pub fn check_joint_decision(scopes: &[DecisionFacts<'_>]) -> Result<Vec<Decision>, JointRefusal> {
    scopes
        .iter()
        .enumerate()
        .map(|(index, facts)| {
            check_decision(facts).map_err(|refusal| JointRefusal { index, refusal })
        })
        .collect()
}

/// The last recovery observation the owner took, for pacing (§5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LastRecoveryRead {
    /// None yet.
    None,
    /// One is still being read; it began then.
    InProgress {
        /// When it began.
        began: InstantMs,
    },
    /// The latest was recorded then.
    Recorded {
        /// When it was recorded.
        at: InstantMs,
    },
}

/// When the next recovery observation of an unaccounted attempt's machine is due
/// (§5.2): the first at the latest transport deadline, each later one a settle
/// floor after the previous one's recording (or its start, if it is still running).
#[must_use]
pub fn next_recovery_read(
    latest_deadline: InstantMs,
    settle_floor: SpanMs,
    last: LastRecoveryRead,
) -> InstantMs {
    match last {
        LastRecoveryRead::None => latest_deadline,
        LastRecoveryRead::InProgress { began: at } | LastRecoveryRead::Recorded { at } => {
            latest_deadline.max(at.plus(settle_floor))
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "settle from {} to {}; start read at {}, end read at {}; version {}",
            self.settle_from,
            self.floor_ends,
            self.start.started_at,
            self.end.started_at,
            if self.version_changed {
                "changed (explained)"
            } else {
                "unchanged"
            }
        )
    }
}
