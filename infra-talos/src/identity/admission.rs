//! Whether a proven certificate is admitted: its chain and key prove a principal
//! (see [`super::authenticate`]); it is then accepted only if the store binds its
//! fingerprint to that principal and the binding has not ended, and the
//! denied-subject list names neither the principal nor the certificate. The service
//! and the command line's road on the store both ask this.

use super::Fingerprint;
use super::denied::Denied;
use crate::store::CertificateBinding;

/// Why a certificate that chains to the installation's authority is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Its fingerprint is bound to no one: minted with the authority's key but never
    /// journaled (or issued before bindings existed).
    #[error(
        "the certificate {fingerprint} for {principal} was never journaled: only a \
         certificate bound to its principal in the store is accepted. Issue one with \
         `infra-talos principal certificate {principal} --pki DIR`; a certificate issued \
         before schema version 10 is bound by recovery-admin with `infra-talos principal \
         bind-certificate {principal} FILE`"
    )]
    Unbound {
        /// The principal its subject names.
        principal: String,
        /// Its fingerprint.
        fingerprint: Fingerprint,
    },
    /// Bound, but the binding ended when the identity was revoked.
    #[error(
        "the certificate {fingerprint} of {principal} is no longer accepted: its identity was revoked"
    )]
    Ended {
        /// The principal.
        principal: String,
        /// Its fingerprint.
        fingerprint: Fingerprint,
    },
    /// The denied-subject list names it.
    #[error("{0}")]
    Denied(String),
}

/// Admits `principal`, proven by the certificate `fingerprint`, against the store's
/// `bindings` and the denied-subject list (`None` when none is configured).
///
/// # Errors
///
/// The certificate is unbound, its binding ended, or the list denies it.
pub fn admit(
    principal: &str,
    fingerprint: &Fingerprint,
    bindings: &[CertificateBinding],
    denied: Option<&Denied>,
) -> Result<(), Refusal> {
    if let Some(why) = denied.and_then(|d| d.refusal(principal, Some(fingerprint))) {
        return Err(Refusal::Denied(why));
    }
    let hex = fingerprint.hex();
    let binding = bindings
        .iter()
        .find(|b| b.fingerprint == hex && b.principal == principal);
    match binding {
        None => Err(Refusal::Unbound {
            principal: principal.to_owned(),
            fingerprint: *fingerprint,
        }),
        Some(b) if b.ended_at.is_some() => Err(Refusal::Ended {
            principal: principal.to_owned(),
            fingerprint: *fingerprint,
        }),
        Some(_) => Ok(()),
    }
}
