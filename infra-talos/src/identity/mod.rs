//! Authenticated identities: who performs an act is proven, never typed in.
//!
//! An installation has one certificate authority, recorded in the store by its
//! bootstrap ([`Store::bootstrap`](crate::store::Store::bootstrap)). A principal is
//! authenticated by a client certificate that authority issued: the certificate's
//! subject common name is the principal's identifier, the chain must verify against
//! the recorded authority for client authentication at the present time, and the
//! presenter must hold the certificate's private key. Which of its roles a principal
//! acts in is chosen per act; the store checks the principal holds it and is not
//! revoked, so revoking an identity in the store disables its certificates too.
//!
//! [`Authority`] and [`issue_client`] make an authority and issue client certificates (the
//! installation's own CA); an existing authority works as well, its certificate given
//! to the bootstrap. [`authenticate`] checks a presented certificate and key.
//!
//! **The trust root is the store's journal, not the authority's key alone.** Every
//! certificate issued is bound to its principal by its [`Fingerprint`] in the same
//! journaled act, and [`admit`] accepts a proven certificate only when that binding
//! stands: a certificate minted with the authority's key but never journaled is
//! refused. Every revocation is also appended to the [`denied`] list, a file kept
//! outside the database, so a database restore cannot make a revoked subject
//! trusted again.

mod admission;
mod authority;
pub mod denied;
mod fingerprint;
mod verify;

pub use admission::{Refusal, admit};
pub use authority::{Authority, ClientCertificate, issue_client, issue_server};
pub use denied::{Denied, DeniedList, DeniedListError};
pub use fingerprint::{Fingerprint, IssuedCertificate, issued_certificate};
pub use verify::{authenticate, check_authority, principal_of_verified};

/// Why an identity could not be made or proven.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// A PEM text held no certificate, or not a well-formed one.
    #[error("{what} is not a PEM certificate: {reason}")]
    NotACertificate {
        /// Which certificate.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// A private key could not be read.
    #[error("the private key is not a PEM private key: {0}")]
    NotAKey(String),
    /// The private key is not the certificate's.
    #[error("the private key does not belong to the certificate")]
    KeyMismatch,
    /// The chain did not verify against the installation's authority.
    #[error("the certificate is not accepted by the installation's authority: {0}")]
    NotTrusted(String),
    /// The certificate names no usable principal.
    #[error("the certificate's subject names no principal: {0}")]
    NoPrincipal(String),
    /// The principal identifier cannot be used.
    #[error("{0:?} is not a principal identifier (1 to 128 of A-Z a-z 0-9 . _ @ -)")]
    BadIdentifier(String),
    /// Generating or signing failed.
    #[error("cannot make the certificate: {0}")]
    Generation(String),
}

/// Whether `id` can name a principal (and so be a certificate's common name).
#[must_use]
pub fn valid_identifier(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-'))
}

#[cfg(test)]
mod tests;
