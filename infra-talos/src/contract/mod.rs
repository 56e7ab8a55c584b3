//! The execution and recovery contract's state machines, as pure functions.
//!
//! `infra-talos/docs/contract.md` states the contract; section marks in this module
//! tree (§2, §4, §5.1, §10.10 …) point into that document. Every function here is
//! pure: it performs no I/O and reads no clock. Times, revisions, epochs and the
//! recorded evidence come in as arguments, so the store and the controller can feed
//! the same functions from a database transaction or from a test.
//!
//! | module | contract | what it decides |
//! |---|---|---|
//! | [`plan`] | §2, §3.2 comparison 1 | plan states, approval authority, self-approval marks |
//! | [`operation`] | §3.3, §3.4, §4 | operation states, the §4 transition table, takeover, comparisons 7–9 |
//! | [`evidence`] | §4.1, §5.1 | attempt responses, accounting, observations |
//! | [`comparison`] | §3.2, §3.3 | the numbered comparisons a refusal names |
//! | [`classify`] | §5, §5.1, §10.10 | the outcome of an interrupted operation |
//! | [`accounting`] | §5.2 | whether a lost response may be accounted |
//! | [`adoption`] | §6.3 | whether an adopt plan's record may be written |
//! | [`gate`] | §3.2 comparison 6, §6.2 | the scope gate and freezes |
//! | [`drift`] | §6.1, §6.5 | drift record states |
//! | [`recovery`] | §7.4, §7.5, §7.6 | scope states during recovery mode |
//! | [`epoch`] | §7.1 | recovery epochs, compared for equality only |
//! | [`registry`] | §3.2 comparisons 0, 4, 5 | a model of which operation holds which scope |

use serde::{Deserialize, Serialize};

pub mod accounting;
pub mod adoption;
pub mod classify;
pub mod comparison;
pub mod drift;
pub mod epoch;
pub mod evidence;
pub mod gate;
pub mod operation;
pub mod plan;
pub mod recovery;
pub mod registry;

#[cfg(test)]
mod accounting_tests;
#[cfg(test)]
mod adoption_tests;
#[cfg(test)]
mod classify_tests;
#[cfg(test)]
mod drift_tests;
#[cfg(test)]
mod invariant_tests;
#[cfg(test)]
mod operation_tests;
#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod recovery_tests;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod text_tests;

/// A point in time, in milliseconds on the store's clock.
///
/// The contract never reads a clock itself (§9); whoever calls it passes the time it
/// read, typically the database clock inside the transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct InstantMs(pub u64);

/// A length of time in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SpanMs(pub u64);

impl InstantMs {
    /// This instant moved `span` later, saturating at the end of representable time.
    #[must_use]
    pub const fn plus(self, span: SpanMs) -> Self {
        Self(self.0.saturating_add(span.0))
    }
}

impl SpanMs {
    /// A span of whole seconds.
    #[must_use]
    pub const fn from_secs(secs: u64) -> Self {
        Self(secs.saturating_mul(1000))
    }
}

impl std::fmt::Display for InstantMs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "t={}ms", self.0)
    }
}

impl std::fmt::Display for SpanMs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

/// A revision on a machine's timeline (§4.1): one counter per machine, so that a
/// higher revision means "after" in commit order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Revision(pub u64);

impl std::fmt::Display for Revision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "r{}", self.0)
    }
}

/// The roles the contract names (§2, §6.2, §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Writes drafts and ingests configuration.
    Author,
    /// Publishes releases and creates plans.
    Publisher,
    /// Approves plans; the only role that may lift a freeze.
    Approver,
    /// Records recovery acts, accounting decisions and resolutions.
    RecoveryAdmin,
    /// An automation token; it never holds approver.
    Automation,
}

impl std::str::FromStr for Role {
    type Err = String;

    /// A role by the name [`Role`]'s `Display` gives it.
    fn from_str(text: &str) -> Result<Role, String> {
        Ok(match text {
            "author" => Role::Author,
            "publisher" => Role::Publisher,
            "approver" => Role::Approver,
            "recovery-admin" => Role::RecoveryAdmin,
            "automation" => Role::Automation,
            other => {
                return Err(format!(
                    "unknown role {other:?}: one of author, publisher, approver, \
                     recovery-admin, automation"
                ));
            }
        })
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Author => "author",
            Self::Publisher => "publisher",
            Self::Approver => "approver",
            Self::RecoveryAdmin => "recovery-admin",
            Self::Automation => "automation",
        })
    }
}
