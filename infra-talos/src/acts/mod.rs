//! The command set's acts, by either road: [`Direct`] makes them on the store (the
//! command line with `--database`, and the service behind its API), and the command
//! line's remote client makes them through the service's JSON API (`--server`).
//!
//! One trait, [`Acts`], so that an act means the same thing by either road: the
//! same checks, the same answer (plain data, rendered by the command line) and the
//! same refusal, word for word. The service's routes are thin: they prove the
//! caller, make a [`Direct`] acting as that principal, and answer what it answers.
//!
//! **Routes** (all under `/api/v1`, JSON bodies; an act's body names its role as
//! `"as"`):
//!
//! | act | route |
//! |---|---|
//! | [`Acts::machines`], [`Acts::add_machine`] | `GET`, `POST /machines` |
//! | [`Acts::inventory`] | `GET /inventory` |
//! | [`Acts::publish`] | `POST /releases` |
//! | [`Acts::plans`], [`Acts::create_plan`] | `GET`, `POST /plans` |
//! | [`Acts::approve`], [`Acts::revoke_approval`], [`Acts::cancel`] | `POST /plans/{id}/approve`, `…/revoke`, `…/cancel` |
//! | [`Acts::run`] | `POST /plans/{id}/run`, `POST /resume` |
//! | [`Acts::blankets`], [`Acts::grant_blanket`], [`Acts::revoke_blanket`] | `GET`, `POST /blankets`, `POST /blankets/{id}/revoke` |
//! | [`Acts::freeze`], [`Acts::unfreeze`], [`Acts::history`] | `POST /machines/{id}/freeze`, `…/unfreeze`, `GET …/timeline` |
//! | [`Acts::drift`] | `POST /drift` |
//! | [`Acts::account`] | `POST /accounting` |
//! | [`Acts::enter_recovery`] | `POST /recovery/enter` |
//! | [`Acts::recovery_status`], [`Acts::observe_recovery`], [`Acts::account_scopes`], [`Acts::mark_scope`], [`Acts::release_scope`], [`Acts::leave_recovery`] | `GET /recovery`, `POST /recovery/observe`, `…/account`, `…/{machine}/mark`, `…/{machine}/release`, `…/leave` |
//! | [`Acts::principals`], [`Acts::register_principal`], [`Acts::change_roles`], [`Acts::revoke_identity`], [`Acts::identity_journal`] | `GET`, `POST /principals`, `POST /principals/{id}/roles`, `…/revoke`, `GET /identity-journal` |
//! | [`Acts::bind_certificate`] | `POST /principals/{id}/certificates` |
//!
//! Bootstrapping the installation is made on the store only: it comes before any
//! service can prove anyone. Entering recovery mode is an act like the others
//! (recovery-admin's, §7.2), by either road: the entry names a fresh controller
//! instance as the taker of every open operation, so whichever road made it, the
//! next controller start takes them over in the new epoch. A service on a store
//! just restored is started with the recovery start
//! ([`crate::serve::start_for_recovery`]), which takes nothing over and answers
//! nothing but liveness and the entry until the entry commits.

mod direct;
mod wire;

pub use direct::{Controller, Direct, Grounds, Keys, NoKeys};
pub use wire::{
    Approval, ArtifactUpload, CreatedPlan, Deadlines, Entered, EntryRequest, InventoryRow,
    MachineHistory, Marked, PlanRequest, PublishRequest, Published, RecoveryStatus, RunOutcome,
    RunReport, ScopeLine, WatchedRead,
};

use crate::contract::comparison::Comparison;
use crate::contract::recovery::ScopeState;
use crate::contract::{Role, SpanMs};
use crate::controller::{DriftPass, RecoveryPass};
use crate::store::{
    AccountingRequest, Actor, BlanketApproval, CertificateOrigin, IdentityEvent, MachineSpec,
    MachineView, PlanView, PrincipalSpec, PrincipalView, ScopeAccounting, StoreError,
};

/// Why an act was not made. The service sends it as it is, so the command line
/// says the same thing whichever road the act took.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum ActError {
    /// A usage or configuration error: nothing was asked of the store.
    #[error("{0}")]
    Usage(String),
    /// The contract or the store refused; the text names the comparison or rule.
    #[error("{0}")]
    Refused(String),
    /// A named machine is not in the inventory.
    #[error("{text}")]
    MissingMachine {
        /// The name given.
        machine: String,
        /// The refusal.
        text: String,
    },
    /// No proven principal (the service's answer without a certificate or token).
    #[error("{0}")]
    Unauthenticated(String),
    /// The store, the service or the controller could not be reached or used.
    #[error("{0}")]
    Unavailable(String),
}

impl From<StoreError> for ActError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Database(_) => ActError::Unavailable(e.to_string()),
            StoreError::NotFound {
                what: "machine",
                ref id,
            } => ActError::MissingMachine {
                machine: id.clone(),
                text: refusal_text(&e),
            },
            other => ActError::Refused(refusal_text(&other)),
        }
    }
}

/// What a comparison checks (§3.2, §3.3, §11.1).
#[must_use]
pub fn comparison_name(c: Comparison) -> &'static str {
    match c {
        Comparison::PlanHasNoOperation => "plan has no operation",
        Comparison::Authority => "authority",
        Comparison::Bindings => "bindings",
        Comparison::Evidence => "evidence",
        Comparison::MachineScope => "machine scope",
        Comparison::RolloutSlot => "rollout slot",
        Comparison::Gate => "scope gate",
        Comparison::Ownership => "ownership",
        Comparison::TimelineUnchanged => "nothing newer",
        Comparison::AttemptsLeft => "budget",
    }
}

/// A store refusal as a user reads it, naming the comparison or rule and why.
#[must_use]
pub fn refusal_text(e: &StoreError) -> String {
    match e {
        StoreError::CommitmentRefused { comparison, reason } => format!(
            "refused: commitment, comparison {comparison} ({}): {reason}",
            comparison_name(*comparison)
        ),
        StoreError::AttemptRefused { comparison, reason } => format!(
            "refused: attempt, comparison {comparison} ({}): {reason}",
            comparison_name(*comparison)
        ),
        StoreError::AccountingRefused {
            condition: Some(c),
            reason,
        } => format!("refused: accounting decision, §5.2 condition {c}: {reason}"),
        StoreError::AccountingRefused {
            condition: None,
            reason,
        } => format!("refused: accounting decision: {reason}"),
        StoreError::Refused { act, reason } => format!("refused: {act}: {reason}"),
        other => format!("refused: {other}"),
    }
}

/// The result of an act.
pub type ActResult<T> = Result<T, ActError>;

/// Every act of the command set but bootstrap and certificate issuance (which need
/// the authority's key).
#[async_trait::async_trait]
pub trait Acts: Send + Sync {
    /// Who acts: the proven principal in the role asked for.
    ///
    /// # Errors
    ///
    /// No proven principal, or no role asked for.
    fn actor(&self) -> ActResult<Actor>;

    /// Every machine's state.
    async fn machines(&self) -> ActResult<Vec<MachineView>>;
    /// Registers a machine.
    async fn add_machine(&self, spec: MachineSpec) -> ActResult<()>;
    /// Every inventoried machine with its record and state.
    async fn inventory(&self) -> ActResult<Vec<InventoryRow>>;
    /// Seals each configuration with the named key and publishes the release.
    async fn publish(&self, request: PublishRequest) -> ActResult<Published>;
    /// Every plan.
    async fn plans(&self) -> ActResult<Vec<PlanView>>;
    /// Creates a plan.
    async fn create_plan(&self, request: PlanRequest) -> ActResult<CreatedPlan>;
    /// Approves a plan, or (`blanket`) approves it under its cluster's grant.
    async fn approve(&self, plan: &str, blanket: bool) -> ActResult<Approval>;
    /// Revokes a plan's approval.
    async fn revoke_approval(&self, plan: &str) -> ActResult<()>;
    /// Cancels a plan.
    async fn cancel(&self, plan: &str) -> ActResult<()>;
    /// Runs an approved plan (`Some`), or takes over every unfinished operation
    /// (`None`, `run --resume`).
    async fn run(&self, plan: Option<&str>, deadlines: Deadlines) -> ActResult<RunReport>;
    /// Every blanket approval.
    async fn blankets(&self) -> ActResult<Vec<BlanketApproval>>;
    /// Grants one.
    async fn grant_blanket(
        &self,
        cluster: &str,
        reason: &str,
        lasting: SpanMs,
    ) -> ActResult<BlanketApproval>;
    /// Revokes one, with every approval made under it.
    async fn revoke_blanket(&self, id: &str) -> ActResult<()>;
    /// Freezes a machine's scope.
    async fn freeze(&self, machine: &str, reason: &str) -> ActResult<()>;
    /// Lifts a freeze.
    async fn unfreeze(&self, machine: &str, reason: &str) -> ActResult<()>;
    /// A machine's state, timeline and operations.
    async fn history(&self, machine: &str) -> ActResult<MachineHistory>;
    /// One drift pass over every machine with an Applied release.
    async fn drift(&self) -> ActResult<DriftPass>;
    /// Records recovery-admin's accounting decision for an attempt (§5.2).
    async fn account(&self, request: AccountingRequest) -> ActResult<()>;
    /// Enters recovery mode after a restore (recovery-admin, §7.2): a new epoch,
    /// every scope pre-restore unaccounted, every open operation taken over into it
    /// by a fresh controller instance, and the entry's record.
    async fn enter_recovery(&self, request: EntryRequest) -> ActResult<Entered>;
    /// Where recovery mode and each scope stand.
    async fn recovery_status(&self) -> ActResult<RecoveryStatus>;
    /// The controller's recovery pass.
    async fn observe_recovery(&self, deadlines: Deadlines) -> ActResult<RecoveryPass>;
    /// The step 1 accounting decision over pre-restore unaccounted scopes; each
    /// machine's scope after it.
    async fn account_scopes(&self, request: ScopeAccounting) -> ActResult<Vec<ScopeLine>>;
    /// Marks a scope from its restoration read and a dependency check made now.
    async fn mark_scope(&self, machine: &str) -> ActResult<Marked>;
    /// Releases a ready scope.
    async fn release_scope(&self, machine: &str) -> ActResult<()>;
    /// Leaves recovery mode.
    async fn leave_recovery(&self) -> ActResult<()>;
    /// Every principal.
    async fn principals(&self) -> ActResult<Vec<PrincipalView>>;
    /// Registers a principal.
    async fn register_principal(&self, spec: PrincipalSpec) -> ActResult<()>;
    /// Replaces a principal's roles.
    async fn change_roles(&self, principal: &str, roles: Vec<Role>) -> ActResult<()>;
    /// Revokes an identity: its certificate bindings end, and (on the store's road,
    /// the service's included) it is appended to the configured denied-subject list.
    async fn revoke_identity(&self, principal: &str) -> ActResult<()>;
    /// Binds a client certificate (PEM; it must chain to the installation's
    /// authority and name `principal`) to `principal`, journaled (recovery-admin);
    /// returns its fingerprint, `sha256:<hex>`.
    async fn bind_certificate(
        &self,
        principal: &str,
        certificate_pem: &str,
        origin: CertificateOrigin,
    ) -> ActResult<String>;
    /// The identity journal.
    async fn identity_journal(&self) -> ActResult<Vec<IdentityEvent>>;
}

/// Whether every scope is normal, from the machines' states.
#[must_use]
pub fn in_recovery(machines: &[MachineView]) -> bool {
    machines.iter().any(|m| m.scope != ScopeState::Normal)
}
