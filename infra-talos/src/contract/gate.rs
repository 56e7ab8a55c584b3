//! The scope gate (§3.2 comparison 6, §6.3 requirement 4.5, §8 invariant 10) and
//! freezes (§6.2, choice §10.34).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::epoch::{self, Epoch, EpochBearer, ForeignEpoch};
use super::{Revision, Role};

/// A transaction that must pass the scope gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mutation {
    /// The §3.2 commitment transaction.
    Commitment,
    /// A §3.3 attempt transaction.
    Attempt,
    /// The §6.3 adoption record, an adopt plan's commitment. It writes nothing to the
    /// node, which is why a freeze lets it through.
    AdoptionRecord,
}

impl Mutation {
    /// Every gated transaction.
    pub const ALL: [Self; 3] = [Self::Commitment, Self::Attempt, Self::AdoptionRecord];
}

impl fmt::Display for Mutation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Commitment => "a commitment",
            Self::Attempt => "an attempt",
            Self::AdoptionRecord => "an adoption record",
        })
    }
}

/// A drift record, named by the revision of its opening entry (choice §10.38).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DriftRecordId(pub Revision);

/// Where recovery mode stands for the scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryGate {
    /// Recovery mode is not in effect.
    NotInEffect,
    /// Recovery mode is in effect.
    InEffect {
        /// The current recovery epoch.
        current: Epoch,
        /// The epoch of the scope's release, if it was released.
        release: Option<Epoch>,
    },
}

/// What comparison 6 reads, under the machine row's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GateFacts {
    /// The machine scope is frozen (§6.2).
    pub frozen: bool,
    /// The machine's open drift record, if any (at most one, §6.1).
    pub open_drift: Option<DriftRecordId>,
    /// The drift record the plan binds, if any (a revert or an adopt plan).
    pub bound_drift: Option<DriftRecordId>,
    /// Recovery mode.
    pub recovery: RecoveryGate,
}

/// Why the gate is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GateRefusal {
    /// The scope is frozen.
    #[error("comparison 6: the machine scope is frozen; only an approver lifts it (§6.2)")]
    Frozen,
    /// A drift record the plan does not bind is open.
    #[error("comparison 6: drift record {} is open and the plan does not bind it (§6.1)", .open.0)]
    UnboundDrift {
        /// The open record.
        open: DriftRecordId,
    },
    /// The record the plan binds has closed.
    #[error("comparison 6: the drift record {} the plan binds is no longer open; the plan is stale (§6.4)", .bound.0)]
    BoundDriftClosed {
        /// The bound record.
        bound: DriftRecordId,
    },
    /// Recovery mode is on and this scope has no release.
    #[error("comparison 6: recovery mode is in effect and the scope is not released (§7.3 step 7)")]
    NotReleased,
    /// The release is from another epoch.
    #[error("comparison 6: {0}")]
    ReleaseFromAnotherEpoch(ForeignEpoch),
}

/// §3.2 comparison 6, as a commitment, an attempt or an adoption record makes it.
///
/// The drift terms reduce to one equality: the open record, if any, must be the one
/// the plan binds, and a bound record must still be open. A freeze stops commitments
/// and attempts but not an adoption record; in recovery mode, all three need a release
/// of the scope from the present epoch (§8 invariant 10).
///
/// # Errors
///
/// The first [`GateRefusal`]: freeze, drift, recovery.
pub fn check_gate(mutation: Mutation, facts: &GateFacts) -> Result<(), GateRefusal> {
    if facts.frozen && mutation != Mutation::AdoptionRecord {
        return Err(GateRefusal::Frozen);
    }
    match (facts.open_drift, facts.bound_drift) {
        (Some(open), bound) if bound != Some(open) => {
            return Err(GateRefusal::UnboundDrift { open });
        }
        (None, Some(bound)) => return Err(GateRefusal::BoundDriftClosed { bound }),
        _ => {}
    }
    match facts.recovery {
        RecoveryGate::NotInEffect => Ok(()),
        RecoveryGate::InEffect { release: None, .. } => Err(GateRefusal::NotReleased),
        RecoveryGate::InEffect {
            current,
            release: Some(release),
        } => epoch::check_epoch(EpochBearer::ScopeRelease, release, current)
            .map_err(GateRefusal::ReleaseFromAnotherEpoch),
    }
}

/// Whether a machine scope is frozen (§6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FreezeState {
    /// Not frozen.
    Unfrozen,
    /// Frozen until an approver lifts it.
    Frozen,
}

impl fmt::Display for FreezeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Unfrozen => "unfrozen",
            Self::Frozen => "frozen",
        })
    }
}

/// A freeze or an unfreeze request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FreezeAct {
    /// Freeze the scope.
    Freeze,
    /// Lift the freeze.
    Unfreeze,
}

/// The longest reason a freeze or unfreeze takes, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;

/// Why a freeze or unfreeze was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FreezeRefusal {
    /// The role may not perform the act.
    #[error("{role} may not {}; {} (§6.2)", act_name(*.act), act_roles(*.act))]
    Role {
        /// The act.
        act: FreezeAct,
        /// The role that tried.
        role: Role,
    },
    /// The reason is blank.
    #[error("a reason is required and may not be blank (choice §10.34)")]
    BlankReason,
    /// The reason is too long.
    #[error("the reason is {len} bytes; at most {MAX_REASON_BYTES} are allowed (choice §10.34)")]
    ReasonTooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The act would change nothing: a conflict that writes nothing.
    #[error(
        "the scope is already {state}; the request conflicts and records nothing (choice §10.34)"
    )]
    NoChange {
        /// The scope's state.
        state: FreezeState,
    },
}

const fn act_name(act: FreezeAct) -> &'static str {
    match act {
        FreezeAct::Freeze => "freeze a scope",
        FreezeAct::Unfreeze => "lift a freeze",
    }
}

const fn act_roles(act: FreezeAct) -> &'static str {
    match act {
        FreezeAct::Freeze => "author, publisher, approver and recovery-admin may",
        FreezeAct::Unfreeze => "only an approver may",
    }
}

/// A freeze or unfreeze (§6.2, choice §10.34): any author, publisher, approver or
/// recovery-admin freezes; only an approver unfreezes; a reason of 1 to 1024 bytes,
/// not blank, is required; a request that would change nothing is refused.
///
/// # Errors
///
/// [`FreezeRefusal`] for the role, the reason, or a no-op, in that order.
pub fn freeze_transition(
    state: FreezeState,
    act: FreezeAct,
    role: Role,
    reason: &str,
) -> Result<FreezeState, FreezeRefusal> {
    let allowed = match act {
        FreezeAct::Freeze => matches!(
            role,
            Role::Author | Role::Publisher | Role::Approver | Role::RecoveryAdmin
        ),
        FreezeAct::Unfreeze => role == Role::Approver,
    };
    if !allowed {
        return Err(FreezeRefusal::Role { act, role });
    }
    if reason.trim().is_empty() {
        return Err(FreezeRefusal::BlankReason);
    }
    if reason.len() > MAX_REASON_BYTES {
        return Err(FreezeRefusal::ReasonTooLong { len: reason.len() });
    }
    match (state, act) {
        (FreezeState::Unfrozen, FreezeAct::Freeze) => Ok(FreezeState::Frozen),
        (FreezeState::Frozen, FreezeAct::Unfreeze) => Ok(FreezeState::Unfrozen),
        _ => Err(FreezeRefusal::NoChange { state }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLES: [Role; 5] = [
        Role::Author,
        Role::Publisher,
        Role::Approver,
        Role::RecoveryAdmin,
        Role::Automation,
    ];

    #[test]
    fn freeze_cross_product() {
        let mut cases = 0;
        for state in [FreezeState::Unfrozen, FreezeState::Frozen] {
            for act in [FreezeAct::Freeze, FreezeAct::Unfreeze] {
                for role in ROLES {
                    for reason in ["why", " ", "", &"x".repeat(1024), &"x".repeat(1025)] {
                        cases += 1;
                        let got = freeze_transition(state, act, role, reason);
                        let role_ok = match act {
                            FreezeAct::Freeze => role != Role::Automation,
                            FreezeAct::Unfreeze => role == Role::Approver,
                        };
                        let reason_ok = !reason.trim().is_empty() && reason.len() <= 1024;
                        let changes =
                            (state == FreezeState::Unfrozen) == (act == FreezeAct::Freeze);
                        let expected = (role_ok && reason_ok && changes).then_some(match act {
                            FreezeAct::Freeze => FreezeState::Frozen,
                            FreezeAct::Unfreeze => FreezeState::Unfrozen,
                        });
                        assert_eq!(
                            got.ok(),
                            expected,
                            "{state:?} {act:?} {role:?} {}",
                            reason.len()
                        );
                    }
                }
            }
        }
        assert_eq!(cases, 100);
    }

    #[test]
    fn gate_cross_product() {
        let a = Epoch::from_bytes([1; 16]);
        let b = Epoch::from_bytes([2; 16]);
        let d1 = Some(DriftRecordId(Revision(1)));
        let d2 = Some(DriftRecordId(Revision(2)));
        let recoveries = [
            RecoveryGate::NotInEffect,
            RecoveryGate::InEffect {
                current: a,
                release: None,
            },
            RecoveryGate::InEffect {
                current: a,
                release: Some(a),
            },
            RecoveryGate::InEffect {
                current: a,
                release: Some(b),
            },
        ];
        let mut cases = 0;
        for mutation in Mutation::ALL {
            for frozen in [false, true] {
                for open_drift in [None, d1, d2] {
                    for bound_drift in [None, d1] {
                        for recovery in recoveries {
                            cases += 1;
                            let facts = GateFacts {
                                frozen,
                                open_drift,
                                bound_drift,
                                recovery,
                            };
                            let freeze_ok = !frozen || mutation == Mutation::AdoptionRecord;
                            let drift_ok = open_drift == bound_drift;
                            let recovery_ok = match recovery {
                                RecoveryGate::NotInEffect => true,
                                RecoveryGate::InEffect { current, release } => {
                                    release == Some(current)
                                }
                            };
                            assert_eq!(
                                check_gate(mutation, &facts).is_ok(),
                                freeze_ok && drift_ok && recovery_ok,
                                "{mutation:?} {facts:?}"
                            );
                        }
                    }
                }
            }
        }
        assert_eq!(cases, 144);
    }
}
