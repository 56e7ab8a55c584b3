//! The adoption record (§6.3): what an adopt plan's commitment requires, and what
//! happens when a requirement fails (choices §10.13–§10.15, §10.27, §10.38).
//!
//! An adopt plan sends nothing. Its commitment is the adoption record transaction,
//! which takes the machine row's lock and, when [`judge`] says
//! [`Verdict::Record`], creates the plan's adopt operation directly in completed,
//! sets Applied to the adopted release with the baseline's digest, advances the
//! baseline revision and closes the bound drift record as adopted.
//!
//! The requirements fall in three groups, and the store treats each differently:
//!
//! - [`Hold`]: nothing is decided yet, so the transaction rolls back and writes
//!   nothing — the plan already has its adoption (requirement 1: a racing instance
//!   recorded it) or a refusal (the record is never attempted again), the evidence is
//!   missing (requirement 4: none, begun before the approval, older than the plan
//!   allows, identity or configuration unread), or the scope does not admit the
//!   record now (requirement 5: an operation holds it, or recovery mode has not
//!   released it). The controller observes again and retries later.
//! - [`Refusal`]: the approval fails comparison 1 (requirement 2: the plan revoked,
//!   cancelled or expired, which a plan still proposed is not; an approval or
//!   identity revoked; another epoch), a bound value moved (requirement 3), or the
//!   evidence shows another value (requirement 4). The refusal is recorded once, in
//!   its own transaction, and ends the plan's attempts: a new plan is the retry
//!   (choice §10.27).
//! - [`Verdict::Record`]: every requirement holds.
//!
//! The observed digest is compared with the baseline's digest — the bytes read from
//! the node — never with the adopted release's artifact (choice §10.15). The
//! assignment is compared as the machine row holds it under the lock (requirement
//! 3): the Talos API carries no assignment of its own, so an observation has none to
//! compare (`docs/contract.md` §11.16).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::gate::{self, GateFacts, GateRefusal, Mutation};
use super::plan::{AuthorityRefusal, PlanState};
use super::{InstantMs, Revision, SpanMs};
use crate::digest::Digest;

/// The values an adopt plan binds that the machine row must still hold
/// (requirement 3), or that the machine row holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding<'a> {
    /// The assignment revision.
    pub assignment_revision: u64,
    /// The baseline revision: `None` for a handover (the machine has no Applied).
    pub baseline_revision: Option<Revision>,
    /// The Desired release, if one is selected.
    pub desired: Option<&'a str>,
    /// The open drift record: `None` for a handover, which binds none.
    pub drift: Option<Revision>,
}

/// How the machine is identified (choice §10.26).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity<'a> {
    /// By the SMBIOS UUID the node reports.
    SmbiosUuid(&'a str),
    /// By the Talos node ID, for a machine that reports no SMBIOS UUID.
    NodeId(&'a str),
}

/// The recorded observation of the machine with the highest basis, of any purpose
/// (requirement 4); a read that started and recorded nothing is not one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evidence<'a> {
    /// Its basis: the revision of its "observation started" entry.
    pub basis: Revision,
    /// When its read started (store time).
    pub started_at: InstantMs,
    /// The SMBIOS UUID read.
    pub smbios_uuid: Option<&'a str>,
    /// The node ID read.
    pub node_id: Option<&'a str>,
    /// The Talos cluster ID read.
    pub cluster_id: Option<&'a str>,
    /// The configuration digest read.
    pub digest: Option<&'a Digest>,
}

/// Everything the adoption record transaction reads under the machine row's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts<'a> {
    /// Requirement 1: the plan already has its (adopt) operation.
    pub adopted: bool,
    /// A refusal of this plan's record is already on the timeline.
    pub refused: bool,
    /// Requirement 2: comparison 1 as the commitment stage makes it.
    pub authority: Result<(), AuthorityRefusal>,
    /// The revision of the standing approval's entry.
    pub approved_at: Option<Revision>,
    /// What the plan binds.
    pub bound: Binding<'a>,
    /// What the machine row holds now.
    pub current: Binding<'a>,
    /// The identity the plan binds.
    pub identity: Identity<'a>,
    /// The cluster the plan binds.
    pub cluster_id: &'a str,
    /// The baseline's configuration digest, recorded at ingestion or import.
    pub baseline_digest: &'a Digest,
    /// How old the evidence may be, counted from when its read started.
    pub max_age: SpanMs,
    /// Requirement 4: the highest-basis recorded observation, if any.
    pub evidence: Option<Evidence<'a>>,
    /// Requirement 5: the operation holding the machine scope, if any.
    pub scope_holder: Option<&'a str>,
    /// Requirement 5: the scope gate as comparison 6 reads it.
    pub gate: GateFacts,
    /// The store's time.
    pub now: InstantMs,
}

/// What the adoption record transaction does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every requirement holds: record the adoption.
    Record,
    /// Nothing is decided: roll back, write nothing, try again later (or never,
    /// for a plan already adopted or refused).
    Hold(Hold),
    /// Refuse, once, with an entry naming the requirement; the plan's attempts end.
    Refuse(Refusal),
}

/// Why the record waits and writes nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "hold")]
pub enum Hold {
    /// The plan's adoption is already recorded (requirement 1).
    AlreadyAdopted,
    /// A refusal of the plan's record is already recorded.
    AlreadyRefused,
    /// The plan is not approved yet.
    NotApproved,
    /// Requirement 4's evidence is missing (choice §10.28).
    MissingEvidence {
        /// What is missing.
        reason: String,
    },
    /// Requirement 5: an operation holds the machine scope.
    ScopeHeld {
        /// The holding operation.
        holder: String,
    },
    /// Requirement 5: recovery mode has not released the scope in this epoch.
    RecoveryGate {
        /// The gate's refusal, in words.
        reason: String,
    },
}

/// Why the record is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "requirement")]
pub enum Refusal {
    /// Requirement 2: comparison 1.
    Authority {
        /// The refusal, in words.
        reason: String,
    },
    /// Requirement 3: a bound value is not the machine's any more.
    Binding {
        /// Which value moved.
        reason: String,
    },
    /// Requirement 4: the evidence shows another value.
    Evidence {
        /// The observation relied on.
        basis: Revision,
        /// What it showed.
        reason: String,
    },
}

impl Refusal {
    /// The number of the §6.3 requirement that failed.
    #[must_use]
    pub const fn requirement(&self) -> u8 {
        match self {
            Self::Authority { .. } => 2,
            Self::Binding { .. } => 3,
            Self::Evidence { .. } => 4,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Authority { reason } | Self::Binding { reason } => {
                write!(f, "requirement {}: {reason}", self.requirement())
            }
            Self::Evidence { basis, reason } => {
                write!(f, "requirement 4: observation r{}: {reason}", basis.0)
            }
        }
    }
}

impl fmt::Display for Hold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AlreadyAdopted => f.write_str("the plan's adoption is already recorded"),
            Self::AlreadyRefused => f.write_str("the plan's adoption record was refused"),
            Self::NotApproved => f.write_str("the plan is not approved"),
            Self::MissingEvidence { reason } => write!(f, "evidence missing: {reason}"),
            Self::ScopeHeld { holder } => {
                write!(f, "operation {holder} holds the machine scope")
            }
            Self::RecoveryGate { reason } => f.write_str(reason),
        }
    }
}

/// §6.3 requirements 1–5, in the order the transaction checks them.
#[must_use]
pub fn judge(facts: &Facts<'_>) -> Verdict {
    if facts.adopted {
        return Verdict::Hold(Hold::AlreadyAdopted);
    }
    if facts.refused {
        return Verdict::Hold(Hold::AlreadyRefused);
    }
    if let Err(refusal) = facts.authority {
        return match refusal {
            AuthorityRefusal::PlanState {
                state: PlanState::Proposed,
                ..
            }
            | AuthorityRefusal::NoApproval => Verdict::Hold(Hold::NotApproved),
            other => Verdict::Refuse(Refusal::Authority {
                reason: other.to_string(),
            }),
        };
    }
    if let Some(reason) = moved(&facts.bound, &facts.current) {
        return Verdict::Refuse(Refusal::Binding { reason });
    }
    if let Some(verdict) = scope(facts) {
        return verdict;
    }
    evidence(facts)
}

/// Requirement 3: the first bound value the machine row no longer holds.
fn moved(bound: &Binding<'_>, current: &Binding<'_>) -> Option<String> {
    if bound.assignment_revision != current.assignment_revision {
        return Some(format!(
            "the assignment revision is {}, the plan binds {}",
            current.assignment_revision, bound.assignment_revision
        ));
    }
    if bound.baseline_revision != current.baseline_revision {
        return Some(match (bound.baseline_revision, current.baseline_revision) {
            (None, Some(_)) => {
                "the machine has an Applied release now; a handover binds none".to_owned()
            }
            (_, now) => format!(
                "the baseline revision is {}, the plan binds {}",
                revision_text(now),
                revision_text(bound.baseline_revision)
            ),
        });
    }
    if bound.desired != current.desired {
        return Some(format!(
            "the Desired release is {}, the plan binds {}; a new adopt plan sees the newer selection",
            current.desired.unwrap_or("none"),
            bound.desired.unwrap_or("none")
        ));
    }
    if bound.drift.is_some() && bound.drift != current.drift {
        return Some(format!(
            "the bound drift record (opened at {}) is no longer open",
            revision_text(bound.drift)
        ));
    }
    None
}

fn revision_text(r: Option<Revision>) -> String {
    r.map_or_else(|| "none".to_owned(), |r| format!("r{}", r.0))
}

/// Requirement 5: no operation holds the scope, and the gate is open apart from a
/// freeze, which an adoption ignores (it changes nothing on the machine).
fn scope(facts: &Facts<'_>) -> Option<Verdict> {
    if let Some(holder) = facts.scope_holder {
        return Some(Verdict::Hold(Hold::ScopeHeld {
            holder: holder.to_owned(),
        }));
    }
    match gate::check_gate(Mutation::AdoptionRecord, &facts.gate) {
        Ok(()) => None,
        Err(refusal @ (GateRefusal::NotReleased | GateRefusal::ReleaseFromAnotherEpoch(_))) => {
            Some(Verdict::Hold(Hold::RecoveryGate {
                reason: refusal.to_string(),
            }))
        }
        Err(refusal) => Some(Verdict::Refuse(Refusal::Binding {
            reason: refusal.to_string(),
        })),
    }
}

/// Requirement 4 on the highest-basis recorded observation.
fn evidence(facts: &Facts<'_>) -> Verdict {
    let missing = |reason: String| Verdict::Hold(Hold::MissingEvidence { reason });
    let Some(ev) = facts.evidence else {
        return missing("no recorded observation of the machine".to_owned());
    };
    if let Some(approved) = facts.approved_at
        && ev.basis <= approved
    {
        return missing(format!(
            "the newest observation (basis r{}) began before the approval (r{})",
            ev.basis.0, approved.0
        ));
    }
    let age = facts.now.0.saturating_sub(ev.started_at.0);
    if age > facts.max_age.0 {
        return missing(format!(
            "the newest observation is {age}ms old; the plan allows {}ms",
            facts.max_age.0
        ));
    }
    if ev.smbios_uuid.is_none() && ev.node_id.is_none() {
        return missing("the newest observation did not read the machine's identity".to_owned());
    }
    if ev.cluster_id.is_none() {
        return missing("the newest observation did not read the cluster ID".to_owned());
    }
    let Some(digest) = ev.digest else {
        return missing("the newest observation did not read the configuration".to_owned());
    };
    let refuse = |reason: &str| {
        Verdict::Refuse(Refusal::Evidence {
            basis: ev.basis,
            reason: reason.to_owned(),
        })
    };
    if let Err(reason) = identity_read(facts.identity, &ev) {
        return refuse(reason);
    }
    if ev.cluster_id != Some(facts.cluster_id) {
        return refuse("the cluster ID read is not the bound one");
    }
    if digest != facts.baseline_digest {
        return refuse("the configuration digest read is not the baseline's");
    }
    Verdict::Record
}

/// Whether the observation read the bound identity (choice §10.26).
fn identity_read(identity: Identity<'_>, ev: &Evidence<'_>) -> Result<(), &'static str> {
    match identity {
        Identity::SmbiosUuid(uuid) if ev.smbios_uuid != Some(uuid) => {
            Err("the SMBIOS UUID read is not the bound one")
        }
        Identity::NodeId(id) if ev.node_id != Some(id) => {
            Err("the node ID read is not the bound one")
        }
        Identity::NodeId(_) if ev.smbios_uuid.is_some() => {
            Err("the machine is recorded by node ID, yet the node reported an SMBIOS UUID")
        }
        _ => Ok(()),
    }
}
