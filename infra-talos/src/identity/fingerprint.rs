//! A certificate's fingerprint: the SHA-256 of its DER encoding. The store binds
//! each certificate it journaled to its principal by this value, and the service and
//! the command line accept a certificate only if its fingerprint is bound.

use std::fmt;
use std::time::{Duration, SystemTime};

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use sha2::{Digest as _, Sha256};
use x509_parser::prelude::{FromDer, X509Certificate};

use super::{IdentityError, principal_of_verified};

/// The SHA-256 of a certificate's DER encoding; shown as `sha256:` and 64 lowercase
/// hex digits, stored as the hex digits alone.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of a certificate's DER encoding.
    #[must_use]
    pub fn of_der(der: &[u8]) -> Fingerprint {
        Fingerprint(Sha256::digest(der).into())
    }

    /// The fingerprint of the first certificate in a PEM text.
    ///
    /// # Errors
    ///
    /// The text holds no PEM certificate.
    pub fn of_pem(pem: &str) -> Result<Fingerprint, IdentityError> {
        let der = CertificateDer::from_pem_slice(pem.as_bytes()).map_err(|e| {
            IdentityError::NotACertificate {
                what: "the certificate",
                reason: e.to_string(),
            }
        })?;
        Ok(Fingerprint::of_der(der.as_ref()))
    }

    /// The 64 lowercase hex digits, as the store keeps them.
    #[must_use]
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// A fingerprint from its hex digits, with or without the `sha256:` prefix.
    #[must_use]
    pub fn parse(text: &str) -> Option<Fingerprint> {
        let hex = text.strip_prefix("sha256:").unwrap_or(text);
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Fingerprint(out))
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A client certificate the installation's authority issued, as a binding act
/// reads it: the principal it names and its fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedCertificate {
    /// The principal its subject's common name names.
    pub principal: String,
    /// Its fingerprint.
    pub fingerprint: Fingerprint,
}

/// Reads `certificate_pem` as a client certificate `ca_certificate_pem` issued: its
/// chain verifies for client authentication at the start of its own validity (so
/// binding does not depend on any clock; authentication checks the present time),
/// and its subject names a principal.
///
/// # Errors
///
/// Not a certificate, not the authority's, not for client authentication, or
/// naming no usable principal.
pub fn issued_certificate(
    ca_certificate_pem: &str,
    certificate_pem: &str,
) -> Result<IssuedCertificate, IdentityError> {
    let der = CertificateDer::from_pem_slice(certificate_pem.as_bytes()).map_err(|e| {
        IdentityError::NotACertificate {
            what: "the certificate",
            reason: e.to_string(),
        }
    })?;
    let (_, parsed) =
        X509Certificate::from_der(der.as_ref()).map_err(|e| IdentityError::NotACertificate {
            what: "the certificate",
            reason: e.to_string(),
        })?;
    let not_before = parsed.validity().not_before.timestamp();
    let since =
        SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(not_before).unwrap_or(0));
    let principal = principal_of_verified(ca_certificate_pem, &der, since)?;
    Ok(IssuedCertificate {
        principal,
        fingerprint: Fingerprint::of_der(der.as_ref()),
    })
}
