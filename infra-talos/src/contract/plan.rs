//! Plan states, approval authority and self-approval marks (§2, §3.2 comparison 1,
//! choices §10.3, §10.4 and §10.6).
//!
//! Before commitment no operation exists and the plan itself stands for the change
//! (choice §10.3). [`transition`] moves a plan through the §2 plan-state table and
//! refuses every other move. [`check_authority`] is §3.2 comparison 1, which both the
//! commitment and every attempt transaction make. [`mark_self_approval`] is the §2
//! self-approval rule.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::InstantMs;
use super::epoch::{self, Epoch, EpochBearer, ForeignEpoch};
use super::evidence::Withdrawal;

/// The state of a plan (§2 plan states).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanState {
    /// The immutable plan exists and is not authorized.
    Proposed,
    /// An approval matches the whole binding.
    Approved,
    /// Terminal for the plan: its one operation exists and carries the outcome.
    Committed,
    /// Terminal: the approval or the approving identity was revoked before commitment.
    Revoked,
    /// Terminal: the plan was cancelled before commitment.
    Cancelled,
    /// Terminal: the plan expired before commitment.
    Expired,
}

impl PlanState {
    /// Every plan state, in the order of the §2 table.
    pub const ALL: [Self; 6] = [
        Self::Proposed,
        Self::Approved,
        Self::Committed,
        Self::Revoked,
        Self::Cancelled,
        Self::Expired,
    ];

    /// Whether nothing moves the plan any more (§2).
    #[must_use]
    pub const fn is_terminal(self) -> bool {
        !matches!(self, Self::Proposed | Self::Approved)
    }

    /// The state's name, as the document and the store spell it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Proposed => "proposed",
            Self::Approved => "approved",
            Self::Committed => "committed",
            Self::Revoked => "revoked",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
        }
    }
}

impl fmt::Display for PlanState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What may happen to a plan (§2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanEvent {
    /// An approver's approval of a proposed plan, recorded in the current epoch.
    Approve,
    /// A fresh approval of an approved plan whose standing approval was recorded in
    /// another epoch and so authorizes nothing (§2, §7.1).
    Reapprove {
        /// The epoch of the approval that stands.
        standing: Epoch,
        /// The current recovery epoch, in which the new approval is recorded.
        current: Epoch,
    },
    /// A revocation of the plan's approval.
    RevokeApproval,
    /// An identity revocation of the approving identity.
    RevokeApproverIdentity,
    /// A cancellation by the plan's creator, an approver or recovery-admin.
    Cancel,
    /// The plan's bound expiry passed.
    Expire,
    /// The §3.2 commitment transaction succeeded and created the plan's operation.
    Commit,
}

impl fmt::Display for PlanEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Approve => "an approval",
            Self::Reapprove { .. } => "a re-approval in the current epoch",
            Self::RevokeApproval => "a revocation of the approval",
            Self::RevokeApproverIdentity => "an identity revocation of the approver",
            Self::Cancel => "a cancellation",
            Self::Expire => "the expiry",
            Self::Commit => "the commitment",
        })
    }
}

/// Why a plan did not move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PlanRefusal {
    /// The plan is in a terminal state other than committed.
    #[error("the plan is {state}, a terminal state; {event} does not move it (§2 plan states)")]
    Terminal {
        /// The plan's state.
        state: PlanState,
        /// What was refused.
        event: PlanEvent,
    },
    /// The plan is committed; revocation, cancellation and expiry now reach its
    /// operation instead (§2, §3.3).
    #[error(
        "the plan is committed, so {event} leaves its state alone: it is recorded against \
         the plan and reaches the operation through the attempt transaction (§2, §3.3)"
    )]
    AfterCommitment {
        /// What was recorded against the committed plan.
        event: PlanEvent,
    },
    /// The event has no row for this state.
    #[error("{event} does not apply to a {state} plan (§2 plan states)")]
    NotApplicable {
        /// The plan's state.
        state: PlanState,
        /// What was refused.
        event: PlanEvent,
    },
    /// A re-approval while the standing approval still authorizes.
    #[error(
        "the standing approval belongs to the present epoch and still authorizes; \
         a re-approval is only recorded for an approval from another epoch (§2, §7.1)"
    )]
    ApprovalStillCurrent,
}

/// Move a plan by one event, as the §2 plan-state table allows; anything else is
/// refused.
///
/// # Errors
///
/// [`PlanRefusal`] for every (state, event) pair the table does not list.
pub fn transition(state: PlanState, event: PlanEvent) -> Result<PlanState, PlanRefusal> {
    use PlanEvent as E;
    use PlanState as S;
    match (state, event) {
        (S::Proposed, E::Approve) => Ok(S::Approved),
        (S::Proposed | S::Approved, E::Cancel) => Ok(S::Cancelled),
        (S::Proposed | S::Approved, E::Expire) => Ok(S::Expired),
        (S::Approved, E::Commit) => Ok(S::Committed),
        (S::Approved, E::RevokeApproval | E::RevokeApproverIdentity) => Ok(S::Revoked),
        (S::Approved, E::Reapprove { standing, current }) => {
            if epoch::authorizes(standing, current) {
                Err(PlanRefusal::ApprovalStillCurrent)
            } else {
                Ok(S::Approved)
            }
        }
        (S::Committed, E::RevokeApproval | E::RevokeApproverIdentity | E::Cancel | E::Expire) => {
            Err(PlanRefusal::AfterCommitment { event })
        }
        (S::Committed | S::Revoked | S::Cancelled | S::Expired, _) => {
            Err(PlanRefusal::Terminal { state, event })
        }
        (
            S::Proposed,
            E::Reapprove { .. } | E::RevokeApproval | E::RevokeApproverIdentity | E::Commit,
        )
        | (S::Approved, E::Approve) => Err(PlanRefusal::NotApplicable { state, event }),
    }
}

/// The recorded approval, as comparison 1 reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    /// The epoch the approval was recorded in.
    pub epoch: Epoch,
    /// Whether the approval was revoked.
    pub revoked: bool,
    /// Whether the approving identity has an identity revocation.
    pub identity_revoked: bool,
}

/// What comparison 1 reads about a plan (§3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorityFacts {
    /// The plan's state.
    pub plan_state: PlanState,
    /// The plan's bound expiry.
    pub expires_at: InstantMs,
    /// Whether a cancellation of the plan is recorded.
    pub cancelled: bool,
    /// The standing approval, if any.
    pub approval: Option<ApprovalRecord>,
}

/// Which transaction makes comparison 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The §3.2 commitment transaction: the plan must be approved.
    Commitment,
    /// A §3.3 attempt transaction: the plan must be committed to this operation.
    Attempt,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Commitment => "the commitment transaction",
            Self::Attempt => "an attempt transaction",
        })
    }
}

/// Why comparison 1 failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthorityRefusal {
    /// The plan is not in the state the transaction needs.
    #[error("comparison 1: the plan is {state}; {stage} needs it {}", needed_state(*.stage))]
    PlanState {
        /// Which transaction asked.
        stage: Stage,
        /// The plan's state.
        state: PlanState,
    },
    /// The plan's expiry has passed.
    #[error("comparison 1: the plan expired at {expires_at} (now {now})")]
    Expired {
        /// The bound expiry.
        expires_at: InstantMs,
        /// The time the transaction read.
        now: InstantMs,
    },
    /// A cancellation is recorded.
    #[error("comparison 1: the plan has a recorded cancellation")]
    Cancelled,
    /// No approval stands.
    #[error("comparison 1: the plan has no approval")]
    NoApproval,
    /// The approval was revoked.
    #[error("comparison 1: the approval was revoked")]
    ApprovalRevoked,
    /// The approving identity was revoked (choice §10.6: retries included).
    #[error(
        "comparison 1: the approving identity was revoked, which refuses every later attempt, retries included (choice §10.6)"
    )]
    IdentityRevoked,
    /// The approval carries another epoch.
    #[error("comparison 1: {0}")]
    ForeignEpoch(ForeignEpoch),
}

const fn needed_state(stage: Stage) -> &'static str {
    match stage {
        Stage::Commitment => "approved",
        Stage::Attempt => "committed",
    }
}

impl AuthorityRefusal {
    /// What this refusal means for an operation after commitment (§3.3, §4): the
    /// withdrawal it records, or `None` when it is no withdrawal (the plan was simply
    /// in the wrong state).
    #[must_use]
    pub const fn withdrawal(&self) -> Option<Withdrawal> {
        match self {
            Self::PlanState { .. } | Self::NoApproval => None,
            Self::Expired { .. } => Some(Withdrawal::PlanExpired),
            Self::Cancelled => Some(Withdrawal::PlanCancelled),
            Self::ApprovalRevoked => Some(Withdrawal::ApprovalRevoked),
            Self::IdentityRevoked => Some(Withdrawal::IdentityRevoked),
            Self::ForeignEpoch(_) => Some(Withdrawal::ForeignEpoch),
        }
    }
}

/// §3.2 comparison 1: the plan is approved (or, for an attempt, committed),
/// unexpired and uncancelled; its approval is unrevoked, its approving identity
/// unrevoked, and the approval belongs to the present epoch.
///
/// A plan counts as expired from its expiry instant on.
///
/// # Errors
///
/// The first [`AuthorityRefusal`] in that order.
pub fn check_authority(
    stage: Stage,
    facts: &AuthorityFacts,
    now: InstantMs,
    current_epoch: Epoch,
) -> Result<(), AuthorityRefusal> {
    let needed = match stage {
        Stage::Commitment => PlanState::Approved,
        Stage::Attempt => PlanState::Committed,
    };
    if facts.plan_state != needed {
        return Err(AuthorityRefusal::PlanState {
            stage,
            state: facts.plan_state,
        });
    }
    if now >= facts.expires_at {
        return Err(AuthorityRefusal::Expired {
            expires_at: facts.expires_at,
            now,
        });
    }
    if facts.cancelled {
        return Err(AuthorityRefusal::Cancelled);
    }
    let Some(approval) = facts.approval else {
        return Err(AuthorityRefusal::NoApproval);
    };
    if approval.revoked {
        return Err(AuthorityRefusal::ApprovalRevoked);
    }
    if approval.identity_revoked {
        return Err(AuthorityRefusal::IdentityRevoked);
    }
    epoch::check_epoch(EpochBearer::Approval, approval.epoch, current_epoch)
        .map_err(AuthorityRefusal::ForeignEpoch)
}

/// A principal's stable identifier (a human or an automation token).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PrincipalId(pub String);

/// Who did something that the self-approval rule looks at.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Actor {
    /// A human principal.
    Human(PrincipalId),
    /// An automation token.
    Token {
        /// The token's principal.
        token: PrincipalId,
        /// The human the token's issuing record names as responsible; `None` when no
        /// such record can be found.
        responsible: Option<PrincipalId>,
    },
}

/// How an actor contributed to the release a plan binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Contribution {
    /// Wrote a revision included in the release (fragment, profile, assignment or
    /// import base); its age, and whether this release touched it, do not matter.
    Authored,
    /// Published content in the release.
    Published,
}

/// One actor's contribution to the bound release.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ReleaseContribution {
    /// Who.
    pub actor: Actor,
    /// What they did.
    pub contribution: Contribution,
}

/// What the self-approval rule reads (§2, choice §10.4).
#[derive(Debug, Clone, Copy)]
pub struct SelfApprovalInput<'a> {
    /// The approving identity (a human: automation never holds approver).
    pub approver: &'a PrincipalId,
    /// Who created the plan.
    pub plan_creator: &'a Actor,
    /// Everyone who authored or published content in the bound release.
    pub release: &'a [ReleaseContribution],
}

/// Why an approval is marked self-approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SelfApprovalBasis {
    /// The approver created the plan.
    CreatedPlan,
    /// The approver authored a revision the release contains.
    AuthoredContent,
    /// The approver is the responsible human of a token that created the plan or
    /// authored or published content in the release.
    ResponsibleForToken,
}

/// The self-approval mark recorded with an approval (§2, choice §10.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SelfApproval {
    /// No rule applies and every token involved has a responsibility record.
    NotSelfApproval,
    /// A rule applies.
    SelfApproval(SelfApprovalBasis),
    /// No rule applies, but a token involved has no responsibility record: recorded
    /// as undetermined, never as not self-approval.
    #[serde(rename = "self_approval_undetermined")]
    Undetermined,
}

impl fmt::Display for SelfApproval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotSelfApproval => f.write_str("not self-approval"),
            Self::SelfApproval(SelfApprovalBasis::CreatedPlan) => {
                f.write_str("self-approval: the approver created the plan")
            }
            Self::SelfApproval(SelfApprovalBasis::AuthoredContent) => {
                f.write_str("self-approval: the approver authored content in the release")
            }
            Self::SelfApproval(SelfApprovalBasis::ResponsibleForToken) => f.write_str(
                "self-approval: the approver is responsible for a token that created the plan or \
                 contributed to the release",
            ),
            Self::Undetermined => f.write_str(
                "self-approval undetermined: a contributing token has no responsibility record",
            ),
        }
    }
}

/// Mark an approval under the §2 self-approval rule (choice §10.4).
///
/// Definite marks win over "undetermined": an approver who created the plan is
/// marked so even when some token record is missing.
#[must_use]
pub fn mark_self_approval(input: SelfApprovalInput<'_>) -> SelfApproval {
    let approver = input.approver;
    if matches!(input.plan_creator, Actor::Human(h) if h == approver) {
        return SelfApproval::SelfApproval(SelfApprovalBasis::CreatedPlan);
    }
    let authored = input.release.iter().any(|c| {
        c.contribution == Contribution::Authored
            && matches!(&c.actor, Actor::Human(h) if h == approver)
    });
    if authored {
        return SelfApproval::SelfApproval(SelfApprovalBasis::AuthoredContent);
    }
    let tokens = std::iter::once(input.plan_creator)
        .chain(input.release.iter().map(|c| &c.actor))
        .filter_map(|a| match a {
            Actor::Token { responsible, .. } => Some(responsible.as_ref()),
            Actor::Human(_) => None,
        });
    let mut undetermined = false;
    for responsible in tokens {
        match responsible {
            Some(h) if h == approver => {
                return SelfApproval::SelfApproval(SelfApprovalBasis::ResponsibleForToken);
            }
            Some(_) => {}
            None => undetermined = true,
        }
    }
    if undetermined {
        SelfApproval::Undetermined
    } else {
        SelfApproval::NotSelfApproval
    }
}
