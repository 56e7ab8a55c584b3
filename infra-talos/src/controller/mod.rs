//! The executor: the controller loop that drives approved plans to a named state
//! under the execution contract (`docs/contract.md` §3, §4, §5, §5.2, §5.3).
//!
//! For one plan, [`Executor::run_plan`] runs, in this order and never otherwise:
//!
//! 1. §3.1's quick pre-check (the store's `preflight`): approved, unrevoked,
//!    unexpired, gate open. Nothing is decrypted and no mutating client is used
//!    before it passes.
//! 2. Evidence: the use-time dependency check (the bound artifact decrypts under the
//!    bound key version; the result is recorded, never the value) and a fresh
//!    *evidence* observation through the read-only client, whose basis is the
//!    "observation started" entry written before the read.
//! 3. The commitment transaction (§3.2).
//! 4. The attempt transaction (§3.3), which alone yields the [`CommittedAttempt`]
//!    the dispatch client's send consumes: no request leaves without one.
//! 5. The send, and the record of its response class. A transport outcome accounts
//!    for nothing (§5.1).
//! 6. Once every attempt is accounted for, a *completion* observation and the
//!    store's classification (§5), which moves Applied on completed. A
//!    safe-to-retry classification leads to fresh evidence and a new attempt
//!    transaction bound to that classification's revision.
//!
//! The plan's sealed artifact, the machines, their operations, attempts and
//! observations, and the store's time are all read from the store; the connector only
//! says how to reach a machine. [`Executor::start`] takes over every non-terminal
//! operation the store holds that another instance owns (§3.4; no timer or lease ever
//! does) and resumes each. An attempt that nobody has
//! accounted for keeps its operation unresolved: the owner takes *recovery*
//! observations paced by the settle floor ([`Executor::recovery_observation`]), which
//! settle nothing by themselves; recovery-admin records the §5.2 decision in the
//! store, and [`Executor::after_accounting`] then takes the completion observation and
//! classifies.
//!
//! Besides operations, the controller reads machines for two duties that send
//! nothing: the drift pass ([`Executor::drift_pass`], [`Executor::watch_drift`],
//! §6.1), and in recovery mode the recovery pass ([`Executor::recovery_pass`], §7.3
//! steps 1 and 4). In recovery mode [`Executor::start`] resumes operations only on
//! scopes released in the current epoch.
//!
//! [`CommittedAttempt`]: crate::CommittedAttempt

mod connector;
mod drift;
mod executor;
mod recovery;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use connector::{
    AccessVersion, Connector, ConnectorMap, MachineClients, MachineRoute, TalosconfigConnector,
};
pub use drift::{DriftFinding, DriftPass, DriftReading};
pub use executor::{Executor, ExecutorSettings, Outcome, RecoveryRead};
pub use recovery::{RecoveryAction, RecoveryPass, RecoveryStep};

use crate::keys::KeyError;
use crate::store::StoreError;

/// Why the executor stopped short. Messages name plans, operations and comparisons,
/// never configuration or secret values.
#[derive(Debug, thiserror::Error)]
pub enum ExecutorError {
    /// A setting outside what the contract allows.
    #[error("invalid executor setting: {0}")]
    Settings(String),
    /// The store refused or failed; a refusal is on the machine's timeline.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The key provider failed (the use-time check or the decryption before a send).
    #[error(transparent)]
    Keys(#[from] KeyError),
    /// The machine's access configuration or connection could not be set up.
    #[error("cannot reach the machine: {0}")]
    Access(String),
    /// The sealed artifact found is not the one the plan binds.
    #[error("the sealed artifact found for plan {plan} is not the bound one")]
    ArtifactMismatch {
        /// The plan.
        plan: String,
    },
    /// The dispatch client refused to send (nothing was sent).
    #[error("nothing was sent: {0}")]
    Dispatch(String),
    /// The adoption record decided nothing (§6.3): it wrote nothing and a later run
    /// may record it.
    #[error("the adoption record waits: {0}")]
    AdoptionHeld(crate::contract::adoption::Hold),
    /// The operation is not owned by this instance.
    #[error("operation {operation} is owned by another controller instance")]
    NotOwner {
        /// The operation.
        operation: String,
    },
}

/// A named point of the executor's path, where a process may be interrupted (§5.3).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Interruption {
    /// Evidence is recorded; the commitment transaction has not run.
    BeforeCommitment,
    /// The commitment committed; no attempt transaction has run.
    Committed,
    /// The attempt transaction committed; nothing has been sent.
    AttemptRecorded,
    /// The node answered; the response is not recorded.
    ResponseReceived,
    /// A completion observation is recorded; the classification has not run.
    CompletionObserved,
}

impl Interruption {
    /// Every point, in path order.
    pub const ALL: [Self; 5] = [
        Self::BeforeCommitment,
        Self::Committed,
        Self::AttemptRecorded,
        Self::ResponseReceived,
        Self::CompletionObserved,
    ];

    /// The point's name, as the interruption binary takes it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::BeforeCommitment => "before-commitment",
            Self::Committed => "committed",
            Self::AttemptRecorded => "attempt-recorded",
            Self::ResponseReceived => "response-received",
            Self::CompletionObserved => "completion-observed",
        }
    }

    /// The point called `name`.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// Awaited at each [`Interruption`] point; tests and the interruption binary use it
/// to pause or end the process there.
#[doc(hidden)]
pub type InterruptionHook =
    Arc<dyn Fn(Interruption) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// A fresh controller instance identifier from the operating system's secure
/// random source.
///
/// # Errors
///
/// [`ExecutorError::Settings`] when no secure random source is available.
pub fn fresh_controller_id() -> Result<crate::contract::operation::ControllerId, ExecutorError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| ExecutorError::Settings(format!("no secure random source: {e}")))?;
    Ok(crate::contract::operation::ControllerId(
        u128::from_be_bytes(bytes),
    ))
}
