//! Why a run is refused as a whole, before any change.

use crate::{BackendError, LockError, Problem, RecordError};

/// Why an apply (or a plan) was refused as a whole.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// A record could not be read or written.
    #[error(transparent)]
    Records(#[from] RecordError),
    /// Another run holds the fleet's lock (or the lock could not be taken).
    #[error(transparent)]
    Locked(Box<LockError>),
    /// The ledger holds rows for a provider whose backend cannot reach its cloud.
    #[error(
        "the ledger records {rows} {provider} resource{s}, but {provider} is unreachable ({why}). \
         Refusing: this run would report them gone without touching them. Load {provider}'s \
         credentials, or point the records elsewhere with --state-dir",
        s = if *rows == 1 { "" } else { "s" }
    )]
    Unreachable {
        /// The provider.
        provider: String,
        /// How many ledger rows it has.
        rows: usize,
        /// What the backend said.
        why: String,
    },
    /// The ledger holds rows for a provider no backend was given for.
    #[error(
        "the ledger records {rows} {provider} resource{s}, but no {provider} backend was given. \
         Refusing: this run could neither keep nor delete them. Add a {provider} backend, or \
         `forget` the rows",
        s = if *rows == 1 { "" } else { "s" }
    )]
    NoBinding {
        /// The provider.
        provider: String,
        /// How many ledger rows it has.
        rows: usize,
    },
    /// A backend is authenticated in an account the fleet does not name.
    #[error(
        "{provider} credentials act in account {found}, but fleet `{fleet}` may only touch {allowed}. \
         Refusing before anything is listed: switch credentials, or name the account with `account`"
    )]
    WrongAccount {
        /// The fleet.
        fleet: String,
        /// The provider.
        provider: String,
        /// The account the backend is in.
        found: String,
        /// The accounts the fleet names.
        allowed: String,
    },
    /// The account of a backend could not be read, so it could not be checked.
    #[error("could not tell which {provider} account the credentials act in: {error}")]
    AccountUnknown {
        /// The provider.
        provider: String,
        /// The backend's error.
        error: BackendError,
    },
    /// The apply would remove most of what the fleet manages from the records (by
    /// deleting it, or because it reads as absent) while still declaring something.
    #[error(
        "refusing: this run would remove {} of the {managed} resources this fleet manages \
         from its records ({deletes} to delete, {absent} found absent) while the fleet still \
         declares resources. This looks like a mistake: credentials for the wrong account, \
         a filter, a lost declaration. Use `destroy` to tear the fleet down, or `--force` if \
         this is intended",
        deletes + absent
    )]
    Brake {
        /// Recorded resources the apply would delete (deletes and prunes).
        deletes: usize,
        /// Recorded resources that read as absent (their rows would be dropped, or the
        /// resources created again).
        absent: usize,
        /// How many the ledger holds.
        managed: usize,
    },
    /// The run would delete or replace resources the declaration protects with
    /// `prevent_destroy`. `--force` does not lift it.
    #[error(
        "refusing: this run would {}, which the declaration protects with \
         `prevent_destroy`. Nothing was changed, and --force does not lift it: remove \
         `prevent_destroy` from the declaration first if this is intended",
        resources.iter().map(|(r, a)| format!("{} {r}", if *a == "replace" { "replace" } else { "delete" })).collect::<Vec<_>>().join(" and ")
    )]
    PreventDestroy {
        /// Each protected resource and what the run would do to it (`delete`,
        /// `prune`, `replace`).
        resources: Vec<(String, &'static str)>,
    },
    /// A `--target`, `--exclude`, `--allow-delete` or `--replace` address names nothing
    /// in play.
    #[error(
        "{flag} {address:?} names no resource of this fleet or its records{}",
        if nearest.is_empty() {
            String::new()
        } else {
            format!("; did you mean {}?", nearest.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", "))
        }
    )]
    UnknownAddress {
        /// The flag.
        flag: &'static str,
        /// The address as given.
        address: String,
        /// The nearest names that exist.
        nearest: Vec<String>,
    },
    /// The plan to carry out no longer matches the world, the records or the
    /// declaration it was made from.
    #[error(
        "the plan is stale, so nothing was changed: {}. Make a new plan and review it",
        changes.join("; ")
    )]
    Stale {
        /// What changed since the plan was made, one sentence each.
        changes: Vec<String>,
    },
    /// The fleet's lock was lost before the run's first call (its database session
    /// ended): nothing was changed.
    #[error("the fleet's lock was lost before any change, so nothing was changed: {why}")]
    LockLost {
        /// Why the lock could not be confirmed.
        why: String,
    },
    /// The plan is not sound (a cycle, an invalid spec set with `Plan::set`).
    #[error("the plan is not sound:{}", problems.iter().map(|p| format!("\n  - {p}")).collect::<String>())]
    Unsound {
        /// What is wrong.
        problems: Vec<Problem>,
    },
}

impl From<LockError> for ApplyError {
    fn from(e: LockError) -> Self {
        ApplyError::Locked(Box::new(e))
    }
}

impl ApplyError {
    /// The refusal in a few words, for the detail of each resource a refused run did
    /// not attempt (the whole sentence is the error itself).
    pub fn summary(&self) -> String {
        match self {
            ApplyError::Records(_) => "refused: the records could not be read or written".into(),
            ApplyError::Locked(e) if matches!(**e, LockError::Held { .. }) => {
                "refused: another run holds the fleet's lock".into()
            }
            ApplyError::Locked(_) => "refused: the fleet's lock could not be taken".into(),
            ApplyError::Unreachable { provider, .. } => {
                format!("refused: {provider} has records but is unreachable")
            }
            ApplyError::NoBinding { provider, .. } => {
                format!("refused: {provider} has records but no backend")
            }
            ApplyError::WrongAccount { provider, .. } => {
                format!("refused: {provider} credentials act in an account the fleet does not name")
            }
            ApplyError::AccountUnknown { provider, .. } => {
                format!("refused: the {provider} account could not be checked")
            }
            ApplyError::Brake { .. } => {
                "refused by the brake: it would remove most of what the fleet manages".into()
            }
            ApplyError::PreventDestroy { .. } => {
                "refused: it would delete or replace a resource declared with prevent_destroy"
                    .into()
            }
            ApplyError::UnknownAddress { flag, address, .. } => {
                format!("refused: {flag} {address:?} names nothing")
            }
            ApplyError::Stale { .. } => "refused: the plan is stale".into(),
            ApplyError::LockLost { .. } => "refused: the fleet's lock was lost".into(),
            ApplyError::Unsound { .. } => "refused: the plan is not sound".into(),
        }
    }
}
