//! Drift record states (§6.1, §6.5, choices §10.12 and §10.35).
//!
//! No machine ever has two open drift records. [`transition`] moves one record by
//! one event as the §6.5 table allows. A closed record is final; the next drift opens
//! a new record, which starts from [`DriftState::None`]. Detection never freezes the
//! scope and never triggers an apply (choice §10.12).

use std::fmt;

use serde::{Deserialize, Serialize};

/// How an open record closed (§6.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Closure {
    /// An adoption record accepted the drifted configuration (§6.3).
    Adopted,
    /// A revert operation reached completed (§6.4).
    Reverted,
    /// The machine came back to Applied without any act of ours.
    Returned,
}

/// The state of a drift record (§6.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftState {
    /// No record yet.
    None,
    /// Open: comparison 6 turns away any plan not bound to this record.
    Open,
    /// The record is closed, and how.
    Closed(Closure),
}

impl DriftState {
    /// Every state.
    pub const ALL: [Self; 5] = [
        Self::None,
        Self::Open,
        Self::Closed(Closure::Adopted),
        Self::Closed(Closure::Reverted),
        Self::Closed(Closure::Returned),
    ];
}

impl fmt::Display for DriftState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::None => "none",
            Self::Open => "open",
            Self::Closed(Closure::Adopted) => "closed (adopted)",
            Self::Closed(Closure::Reverted) => "closed (reverted)",
            Self::Closed(Closure::Returned) => "closed (returned)",
        })
    }
}

/// Which observation is compared with Applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftSource {
    /// A periodic drift observation (choice §10.36).
    Drift,
    /// A restoration observation (§7.3 step 4), at the scope's marking.
    Restoration,
    /// The evidence behind a commitment that comparison 3 refused over the digest
    /// (§3.2).
    RefusedCommitmentEvidence,
    /// The completion observation behind a failed outcome, recorded as the scope is
    /// freed (§4).
    FailedCompletion,
    /// Any other observation: drift rules do not apply to it.
    Other,
}

impl DriftSource {
    /// Every source.
    pub const ALL: [Self; 5] = [
        Self::Drift,
        Self::Restoration,
        Self::RefusedCommitmentEvidence,
        Self::FailedCompletion,
        Self::Other,
    ];
}

/// An observation, with the §6.1 facts about its basis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DriftObservation {
    /// Which observation.
    pub source: DriftSource,
    /// Its digest differs from the Applied that held at its basis.
    pub differs_from_applied: bool,
    /// The machine's baseline revision changed after its basis.
    pub baseline_changed_since_basis: bool,
    /// A later-based recorded observation also read the digest.
    pub higher_basis_digest_read: bool,
    /// An operation held or took the scope at or after its basis (for a restoration
    /// observation: some restored operation there has not been settled).
    pub scope_held_since_basis: bool,
}

/// What may happen to a drift record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftEvent {
    /// An observation is compared with Applied.
    Observed(DriftObservation),
    /// The scope is frozen.
    Freeze,
    /// The freeze is lifted.
    Unfreeze,
    /// An adoption record binding this record committed.
    AdoptionRecorded,
    /// A revert binding this record reached completed.
    RevertCompleted,
}

impl fmt::Display for DriftEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Observed(_) => "an observation",
            Self::Freeze => "a freeze",
            Self::Unfreeze => "an unfreeze",
            Self::AdoptionRecorded => "an adoption record",
            Self::RevertCompleted => "a completed revert",
        })
    }
}

/// Why a drift record did not move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DriftRefusal {
    /// Drift rules do not apply to this observation.
    #[error("drift rules do not apply to this observation; it opens and closes nothing (§6.1)")]
    NoDriftRules,
    /// The baseline moved after the basis.
    #[error(
        "the baseline revision changed after the observation's basis; a later observation decides (§6.1)"
    )]
    BaselineChanged,
    /// A higher-basis read decides instead.
    #[error("a recorded observation with a later basis also read the digest; it decides (§6.1)")]
    HigherBasisRead,
    /// An operation held the scope.
    #[error(
        "an operation held or took the scope at or after the observation's basis; the mismatch \
         is evidence for that operation, not drift (§6.1)"
    )]
    ScopeHeld,
    /// No record and the digest matches Applied.
    #[error("the observation matches Applied and no record is open; nothing changes")]
    MatchesApplied,
    /// A failed operation's observation at Applied closes nothing.
    #[error(
        "the completion observation of a failed operation matches Applied; a failed revert \
         leaves the record open and a later observation decides (§6.5)"
    )]
    FailedCompletionClosesNothing,
    /// The event needs an open record.
    #[error("no drift record is open; {event} changes none (§6.5)")]
    NothingOpen {
        /// The event.
        event: DriftEvent,
    },
    /// The record is closed.
    #[error("the record is {}; a new drift opens a new record (§6.5)", DriftState::Closed(*.closure))]
    Closed {
        /// How it closed.
        closure: Closure,
        /// The event.
        event: DriftEvent,
    },
}

fn qualifies(o: &DriftObservation) -> Result<(), DriftRefusal> {
    if o.source == DriftSource::Other {
        return Err(DriftRefusal::NoDriftRules);
    }
    if o.baseline_changed_since_basis {
        return Err(DriftRefusal::BaselineChanged);
    }
    if o.source == DriftSource::FailedCompletion {
        return Ok(());
    }
    if o.scope_held_since_basis {
        return Err(DriftRefusal::ScopeHeld);
    }
    if o.higher_basis_digest_read {
        return Err(DriftRefusal::HigherBasisRead);
    }
    Ok(())
}

/// Move a drift record by one event (§6.5); everything the table does not list is
/// refused.
///
/// The failed operation's completion observation is exempt from the scope and
/// higher-basis rules (§6.1): it is recorded while the operation still holds the
/// scope, in the transaction that releases it.
///
/// # Errors
///
/// [`DriftRefusal`] naming the rule that stops the move.
pub fn transition(state: DriftState, event: DriftEvent) -> Result<DriftState, DriftRefusal> {
    match (state, event) {
        (DriftState::Closed(closure), _) => Err(DriftRefusal::Closed { closure, event }),
        (DriftState::None, DriftEvent::Observed(o)) => {
            qualifies(&o)?;
            if o.differs_from_applied {
                Ok(DriftState::Open)
            } else {
                Err(DriftRefusal::MatchesApplied)
            }
        }
        (DriftState::None, _) => Err(DriftRefusal::NothingOpen { event }),
        (DriftState::Open, DriftEvent::Observed(o)) => {
            qualifies(&o)?;
            if o.differs_from_applied {
                Ok(DriftState::Open)
            } else if o.source == DriftSource::FailedCompletion {
                Err(DriftRefusal::FailedCompletionClosesNothing)
            } else {
                Ok(DriftState::Closed(Closure::Returned))
            }
        }
        (DriftState::Open, DriftEvent::Freeze | DriftEvent::Unfreeze) => Ok(DriftState::Open),
        (DriftState::Open, DriftEvent::AdoptionRecorded) => {
            Ok(DriftState::Closed(Closure::Adopted))
        }
        (DriftState::Open, DriftEvent::RevertCompleted) => {
            Ok(DriftState::Closed(Closure::Reverted))
        }
    }
}
