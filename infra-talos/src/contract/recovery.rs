//! Scope states during recovery mode (§7.3, §7.4), what recovery mode allows per
//! scope (§7.5, choice §10.21) and leaving it (§7.6, choice §10.22).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A dependency that applying the scope's Desired release needs (§7.4, choice
/// §10.20): the use-time set of §3.1, not what regenerating the release needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dependency {
    /// The Desired release's record.
    ReleaseRecord,
    /// The artifact's key version: present, not below the decryption floor, and
    /// usable for decryption by the executor.
    KeyVersion,
    /// The executor's operation credentials for the target.
    ExecutorCredentials,
}

impl Dependency {
    /// Every dependency.
    pub const ALL: [Self; 3] = [
        Self::ReleaseRecord,
        Self::KeyVersion,
        Self::ExecutorCredentials,
    ];
}

impl fmt::Display for Dependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ReleaseRecord => "release record",
            Self::KeyVersion => "artifact key version",
            Self::ExecutorCredentials => "executor credentials",
        })
    }
}

/// What keeps a scope blocked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockedOn {
    /// The step 1 decision accounted the scope; step 6 has not marked it yet.
    AwaitingMark,
    /// No restoration observation with a basis after the step 1 decision.
    NoRestorationObservation,
    /// The restoration observation failed.
    ObservationFailed,
    /// It showed another machine identity than the record's (choice §10.26).
    IdentityMismatch,
    /// A dependency is missing.
    MissingDependency(Dependency),
}

impl BlockedOn {
    /// Every reason.
    pub const ALL: [Self; 7] = [
        Self::AwaitingMark,
        Self::NoRestorationObservation,
        Self::ObservationFailed,
        Self::IdentityMismatch,
        Self::MissingDependency(Dependency::ReleaseRecord),
        Self::MissingDependency(Dependency::KeyVersion),
        Self::MissingDependency(Dependency::ExecutorCredentials),
    ];
}

impl fmt::Display for BlockedOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AwaitingMark => f.write_str("awaiting its mark"),
            Self::NoRestorationObservation => {
                f.write_str("no restoration observation after the accounting decision")
            }
            Self::ObservationFailed => f.write_str("the restoration observation failed"),
            Self::IdentityMismatch => f.write_str("the node shows another machine identity"),
            Self::MissingDependency(d) => write!(f, "missing {d}"),
        }
    }
}

/// A machine scope's state with respect to recovery mode (§7.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeState {
    /// Recovery mode is not in effect for the scope.
    Normal,
    /// Set at entry: something sent before the restore could still arrive.
    PreRestoreUnaccounted,
    /// Some restored operation holding the scope is still unresolved.
    Unresolved,
    /// The scope cannot be released yet.
    Blocked(BlockedOn),
    /// Accounted, no operation holds it, dependencies present, identity confirmed.
    Ready,
    /// Released in the current epoch: its gate is open.
    Released,
}

impl ScopeState {
    /// Every state.
    pub const ALL: [Self; 12] = [
        Self::Normal,
        Self::PreRestoreUnaccounted,
        Self::Unresolved,
        Self::Blocked(BlockedOn::AwaitingMark),
        Self::Blocked(BlockedOn::NoRestorationObservation),
        Self::Blocked(BlockedOn::ObservationFailed),
        Self::Blocked(BlockedOn::IdentityMismatch),
        Self::Blocked(BlockedOn::MissingDependency(Dependency::ReleaseRecord)),
        Self::Blocked(BlockedOn::MissingDependency(Dependency::KeyVersion)),
        Self::Blocked(BlockedOn::MissingDependency(
            Dependency::ExecutorCredentials,
        )),
        Self::Ready,
        Self::Released,
    ];
}

impl fmt::Display for ScopeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Normal => f.write_str("normal"),
            Self::PreRestoreUnaccounted => f.write_str("pre-restore unaccounted"),
            Self::Unresolved => f.write_str("unresolved"),
            Self::Blocked(on) => write!(f, "blocked ({on})"),
            Self::Ready => f.write_str("ready"),
            Self::Released => f.write_str("released"),
        }
    }
}

/// The scope a newly inventoried machine starts with: pre-restore unaccounted while
/// recovery mode is in effect, since a previous inventory of the same machine, and an
/// attempt sent to it, may be among what the restore wiped (§7.4).
#[must_use]
pub const fn inventoried(recovery_in_effect: bool) -> ScopeState {
    if recovery_in_effect {
        ScopeState::PreRestoreUnaccounted
    } else {
        ScopeState::Normal
    }
}

/// What the scope's restoration observation showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RestorationReading {
    /// None is recorded.
    None,
    /// The latest recorded one began before the step 1 decision.
    BeforeDecision,
    /// It failed.
    Failed,
    /// It read another identity key or cluster ID.
    IdentityMismatch,
    /// It read the machine record's identity.
    Matches,
}

impl RestorationReading {
    /// Every reading.
    pub const ALL: [Self; 5] = [
        Self::None,
        Self::BeforeDecision,
        Self::Failed,
        Self::IdentityMismatch,
        Self::Matches,
    ];
}

/// What marking a scope reads (§7.3 step 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MarkFacts {
    /// A restored operation still holds the scope (it is unresolved).
    pub operation_holds_scope: bool,
    /// The restoration observation.
    pub reading: RestorationReading,
    /// The first dependency the step 3 check found missing, if any.
    pub missing: Option<Dependency>,
}

/// The mark the evidence supports (§7.3 step 6, §7.4): unresolved as long as a
/// restored operation is holding the scope; failing that, blocked on the observation
/// first, then on a missing dependency; failing both, ready.
#[must_use]
pub const fn mark(facts: MarkFacts) -> ScopeState {
    if facts.operation_holds_scope {
        return ScopeState::Unresolved;
    }
    match (facts.reading, facts.missing) {
        (RestorationReading::None | RestorationReading::BeforeDecision, _) => {
            ScopeState::Blocked(BlockedOn::NoRestorationObservation)
        }
        (RestorationReading::Failed, _) => ScopeState::Blocked(BlockedOn::ObservationFailed),
        (RestorationReading::IdentityMismatch, _) => {
            ScopeState::Blocked(BlockedOn::IdentityMismatch)
        }
        (RestorationReading::Matches, Some(d)) => {
            ScopeState::Blocked(BlockedOn::MissingDependency(d))
        }
        (RestorationReading::Matches, None) => ScopeState::Ready,
    }
}

/// What may happen to a scope during recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeEvent {
    /// Recovery-mode entry (§7.2 item 4).
    Entry,
    /// The §7.3 step 1 accounting decision covering this scope.
    AccountingDecision {
        /// A restored operation holds the scope.
        restored_operation_holds_scope: bool,
    },
    /// A mark (§7.3 step 6).
    Mark(MarkFacts),
    /// recovery-admin's release (§7.3 step 7).
    Release {
        /// The scope's Desired release is the one the mark checked.
        desired_matches_mark: bool,
    },
    /// Leaving recovery mode (§7.6).
    Exit {
        /// Every machine scope has reached released (see [`check_exit`]).
        every_scope_released: bool,
    },
}

impl fmt::Display for ScopeEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Entry => "entry",
            Self::AccountingDecision { .. } => "the accounting decision",
            Self::Mark(_) => "a mark",
            Self::Release { .. } => "a release",
            Self::Exit { .. } => "leaving recovery mode",
        })
    }
}

/// Why a scope did not move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ScopeRefusal {
    /// The scope is not in recovery mode.
    #[error("recovery mode is not in effect; {event} applies only inside it (§7)")]
    NotInRecovery {
        /// The event.
        event: ScopeEvent,
    },
    /// Only the step 1 decision moves a pre-restore unaccounted scope.
    #[error(
        "the scope is pre-restore unaccounted; only the step 1 accounting decision moves it, \
         not {event} (§7.4)"
    )]
    AwaitingAccounting {
        /// The event.
        event: ScopeEvent,
    },
    /// The scope was already accounted.
    #[error("the scope is {state}; its step 1 accounting decision is already recorded (§7.4)")]
    AlreadyAccounted {
        /// The scope's state.
        state: ScopeState,
    },
    /// Only a ready scope is released.
    #[error("only a ready scope is released; this one is {state} (§7.4)")]
    NotReady {
        /// The scope's state.
        state: ScopeState,
    },
    /// The Desired release moved since the mark.
    #[error("the scope's Desired release changed since its mark; mark it again (§7.3 step 7)")]
    DesiredMoved,
    /// A released scope leaves only by exit or a new entry.
    #[error(
        "the scope is released; only leaving recovery mode or a new entry moves it, not {event} (§7.4)"
    )]
    Released {
        /// The event.
        event: ScopeEvent,
    },
    /// Leaving needs every scope released.
    #[error(
        "recovery mode ends only once every machine scope has reached released (choice §10.22)"
    )]
    NotAllReleased,
    /// Leaving needs this scope released.
    #[error(
        "the scope is {state}; recovery mode is left only once every scope is released (choice §10.22)"
    )]
    ExitBeforeRelease {
        /// The scope's state.
        state: ScopeState,
    },
}

/// Move a scope by one event as §7.4 allows; refuse everything else.
///
/// Entry moves any scope to pre-restore unaccounted (§7.2 item 4). A mark may be
/// repeated on an unresolved, blocked or ready scope: it records what the evidence
/// supports now (§7.3 steps 6 and 7).
///
/// # Errors
///
/// [`ScopeRefusal`] for every pair §7.4 does not list.
pub fn transition(state: ScopeState, event: ScopeEvent) -> Result<ScopeState, ScopeRefusal> {
    use ScopeEvent as E;
    use ScopeState as S;
    match (state, event) {
        (_, E::Entry) => Ok(S::PreRestoreUnaccounted),
        (S::Normal, _) => Err(ScopeRefusal::NotInRecovery { event }),
        (
            S::PreRestoreUnaccounted,
            E::AccountingDecision {
                restored_operation_holds_scope,
            },
        ) => Ok(if restored_operation_holds_scope {
            S::Unresolved
        } else {
            S::Blocked(BlockedOn::AwaitingMark)
        }),
        (S::PreRestoreUnaccounted, _) => Err(ScopeRefusal::AwaitingAccounting { event }),
        (_, E::AccountingDecision { .. }) => Err(ScopeRefusal::AlreadyAccounted { state }),
        (
            S::Released,
            E::Exit {
                every_scope_released,
            },
        ) => {
            if every_scope_released {
                Ok(S::Normal)
            } else {
                Err(ScopeRefusal::NotAllReleased)
            }
        }
        (S::Released, _) => Err(ScopeRefusal::Released { event }),
        (_, E::Exit { .. }) => Err(ScopeRefusal::ExitBeforeRelease { state }),
        (S::Unresolved | S::Blocked(_) | S::Ready, E::Mark(facts)) => Ok(mark(facts)),
        (
            S::Ready,
            E::Release {
                desired_matches_mark,
            },
        ) => {
            if desired_matches_mark {
                Ok(S::Released)
            } else {
                Err(ScopeRefusal::DesiredMoved)
            }
        }
        (S::Unresolved | S::Blocked(_), E::Release { .. }) => Err(ScopeRefusal::NotReady { state }),
    }
}

/// Why recovery mode cannot be left yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{unreleased} machine scope(s) are not released; recovery mode stays in effect (§7.6)")]
pub struct ExitRefusal {
    /// How many scopes are not released.
    pub unreleased: usize,
}

/// Whether recovery mode may end: every machine scope has reached released (§7.6, choice
/// §10.22).
///
/// # Errors
///
/// [`ExitRefusal`] counting the scopes that are not.
pub fn check_exit(scopes: &[ScopeState]) -> Result<(), ExitRefusal> {
    let unreleased = scopes
        .iter()
        .filter(|s| **s != ScopeState::Released)
        .count();
    if unreleased == 0 {
        Ok(())
    } else {
        Err(ExitRefusal { unreleased })
    }
}

/// An act §7.5 governs per scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Act {
    /// Approval or identity revocation, plan cancellation, freeze.
    RemoveAuthority,
    /// Entry, accounting decisions, resolutions, marking, release, leaving.
    RecordRecovery,
    /// Drafts, ingestion, compilation, publication.
    InstallationWide,
    /// Creating a plan for the scope.
    PlanCreation,
    /// Approving a plan for the scope.
    Approval,
    /// Lifting a freeze.
    Unfreeze,
    /// A commitment transaction.
    Commitment,
    /// An attempt transaction.
    Attempt,
    /// An adoption record.
    AdoptionRecord,
}

impl Act {
    /// Every act.
    pub const ALL: [Self; 9] = [
        Self::RemoveAuthority,
        Self::RecordRecovery,
        Self::InstallationWide,
        Self::PlanCreation,
        Self::Approval,
        Self::Unfreeze,
        Self::Commitment,
        Self::Attempt,
        Self::AdoptionRecord,
    ];

    /// Whether the act could send to a machine, authorize a send, or adopt (§8
    /// invariant 13).
    #[must_use]
    pub const fn could_send_approve_or_adopt(self) -> bool {
        matches!(
            self,
            Self::PlanCreation
                | Self::Approval
                | Self::Unfreeze
                | Self::Commitment
                | Self::Attempt
                | Self::AdoptionRecord
        )
    }
}

impl fmt::Display for Act {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::RemoveAuthority => "an act that removes authority",
            Self::RecordRecovery => "a recovery act",
            Self::InstallationWide => "an installation-wide act",
            Self::PlanCreation => "plan creation",
            Self::Approval => "approval",
            Self::Unfreeze => "an unfreeze",
            Self::Commitment => "a commitment",
            Self::Attempt => "an attempt",
            Self::AdoptionRecord => "an adoption record",
        })
    }
}

/// Why recovery mode refuses an act on a scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ActRefusal {
    /// Refused while the scope is pre-restore unaccounted.
    #[error("{act} is refused while the scope is pre-restore unaccounted (§7.5)")]
    Unaccounted {
        /// The act.
        act: Act,
    },
    /// Refused until the scope is released.
    #[error(
        "{act} is refused until the scope is released in the current epoch; it is {state} (§7.5)"
    )]
    NotReleased {
        /// The act.
        act: Act,
        /// The scope's state.
        state: ScopeState,
    },
}

/// Whether recovery mode allows `act` on a scope in `state` (§7.5, choice §10.21).
/// A normal or released scope allows everything.
///
/// # Errors
///
/// [`ActRefusal`] naming the rule.
pub fn permits(state: ScopeState, act: Act) -> Result<(), ActRefusal> {
    if matches!(state, ScopeState::Normal | ScopeState::Released) {
        return Ok(());
    }
    match act {
        Act::RemoveAuthority | Act::RecordRecovery | Act::InstallationWide => Ok(()),
        _ if state == ScopeState::PreRestoreUnaccounted => Err(ActRefusal::Unaccounted { act }),
        Act::PlanCreation | Act::Approval | Act::Unfreeze => Ok(()),
        Act::Commitment | Act::Attempt | Act::AdoptionRecord => {
            Err(ActRefusal::NotReleased { act, state })
        }
    }
}
