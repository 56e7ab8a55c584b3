//! Proving a presented identity: the certificate chains to the installation's
//! authority for client authentication now, and the presenter holds its key.

use std::time::SystemTime;

use rcgen::{KeyPair, PublicKeyData};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, UnixTime};
use webpki::{EndEntityCert, KeyUsage, anchor_from_trusted_cert};
use x509_parser::prelude::{FromDer, X509Certificate};

use super::{IdentityError, valid_identifier};

fn der_of(what: &'static str, pem: &str) -> Result<CertificateDer<'static>, IdentityError> {
    CertificateDer::from_pem_slice(pem.as_bytes()).map_err(|e| IdentityError::NotACertificate {
        what,
        reason: e.to_string(),
    })
}

/// The principal `certificate_pem` names, once its chain to the authority
/// `ca_certificate_pem` verifies for client authentication at `now` and
/// `key_pem` is its private key.
pub fn authenticate(
    ca_certificate_pem: &str,
    certificate_pem: &str,
    key_pem: &str,
    now: SystemTime,
) -> Result<String, IdentityError> {
    let cert = der_of("the client certificate", certificate_pem)?;
    let principal = principal_of_verified(ca_certificate_pem, &cert, now)?;
    let key = KeyPair::from_pem(key_pem).map_err(|e| IdentityError::NotAKey(e.to_string()))?;
    let (_, parsed) = X509Certificate::from_der(cert.as_ref())
        .map_err(|e| IdentityError::NoPrincipal(e.to_string()))?;
    if parsed.tbs_certificate.subject_pki.raw != key.subject_public_key_info().as_slice() {
        return Err(IdentityError::KeyMismatch);
    }
    Ok(principal)
}

/// Checks `ca_certificate_pem` can serve as the installation's authority: one
/// well-formed certificate a chain can be verified against.
pub fn check_authority(ca_certificate_pem: &str) -> Result<(), IdentityError> {
    let ca = der_of("the certificate authority", ca_certificate_pem)?;
    anchor_from_trusted_cert(&ca).map_err(|e| IdentityError::NotACertificate {
        what: "the certificate authority",
        reason: format!("{e:?}"),
    })?;
    Ok(())
}

/// The principal a certificate (DER) names, once its chain to the authority
/// `ca_certificate_pem` verifies for client authentication at `now`. Possession of
/// its key is the caller's to establish (a TLS handshake does).
pub fn principal_of_verified(
    ca_certificate_pem: &str,
    cert: &CertificateDer<'_>,
    now: SystemTime,
) -> Result<String, IdentityError> {
    let ca = der_of("the installation's authority", ca_certificate_pem)?;
    let anchor =
        anchor_from_trusted_cert(&ca).map_err(|e| IdentityError::NotTrusted(e.to_string()))?;
    let end =
        EndEntityCert::try_from(cert).map_err(|e| IdentityError::NotTrusted(e.to_string()))?;
    let since = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_err(|e| IdentityError::NotTrusted(e.to_string()))?;
    let algorithms = rustls::crypto::ring::default_provider()
        .signature_verification_algorithms
        .all;
    end.verify_for_usage(
        algorithms,
        &[anchor],
        &[],
        UnixTime::since_unix_epoch(since),
        KeyUsage::client_auth(),
        None,
        None,
    )
    .map_err(|e| IdentityError::NotTrusted(format!("{e:?}")))?;
    let (_, parsed) = X509Certificate::from_der(cert.as_ref())
        .map_err(|e| IdentityError::NoPrincipal(e.to_string()))?;
    let mut names = parsed.subject().iter_common_name();
    let name = names
        .next()
        .ok_or_else(|| IdentityError::NoPrincipal("no common name".into()))?
        .as_str()
        .map_err(|e| IdentityError::NoPrincipal(e.to_string()))?
        .to_owned();
    if names.next().is_some() {
        return Err(IdentityError::NoPrincipal(
            "more than one common name".into(),
        ));
    }
    if !valid_identifier(&name) {
        return Err(IdentityError::BadIdentifier(name));
    }
    Ok(name)
}
