//! The installation's own certificate authority: made once, at the bootstrap, and
//! used offline by whoever holds its key to issue principals' client certificates.

use std::fmt;
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use zeroize::Zeroizing;

use super::{IdentityError, valid_identifier};

fn generation(e: rcgen::Error) -> IdentityError {
    IdentityError::Generation(e.to_string())
}

/// A new certificate authority: its certificate and its private key, PEM. The key
/// is wiped from memory when dropped and never printed.
pub struct Authority {
    /// The authority's certificate, PEM: what the store records.
    pub certificate_pem: String,
    /// Its private key, PEM.
    pub key_pem: Zeroizing<String>,
}

impl fmt::Debug for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

impl Authority {
    /// A self-signed authority named `name`, valid for ten years from `now`.
    pub fn generate(name: &str, now: SystemTime) -> Result<Authority, IdentityError> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(generation)?;
        params.distinguished_name.push(DnType::CommonName, name);
        params
            .distinguished_name
            .push(DnType::OrganizationName, "infra-talos");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.not_before = now.into();
        params.not_after = (now + Duration::from_secs(10 * 365 * 86_400)).into();
        let key = KeyPair::generate().map_err(generation)?;
        let cert = params.self_signed(&key).map_err(generation)?;
        Ok(Authority {
            certificate_pem: cert.pem(),
            key_pem: Zeroizing::new(key.serialize_pem()),
        })
    }
}

/// An issued certificate (a principal's client certificate, or the service's
/// server certificate) and its private key, PEM.
pub struct ClientCertificate {
    /// The certificate, PEM.
    pub certificate_pem: String,
    /// Its private key, PEM; wiped when dropped.
    pub key_pem: Zeroizing<String>,
}

impl fmt::Debug for ClientCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCertificate").finish_non_exhaustive()
    }
}

/// Issues `principal` a client certificate from the authority `ca_certificate_pem`
/// (whose key is `ca_key_pem`), valid for `valid_for` from `now`: the subject's
/// common name is the principal, its only extended key usage client authentication.
pub fn issue_client(
    ca_certificate_pem: &str,
    ca_key_pem: &str,
    principal: &str,
    now: SystemTime,
    valid_for: Duration,
) -> Result<ClientCertificate, IdentityError> {
    if !valid_identifier(principal) {
        return Err(IdentityError::BadIdentifier(principal.to_owned()));
    }
    let ca_key =
        KeyPair::from_pem(ca_key_pem).map_err(|e| IdentityError::NotAKey(e.to_string()))?;
    let issuer = Issuer::from_ca_cert_pem(ca_certificate_pem, ca_key).map_err(|e| {
        IdentityError::NotACertificate {
            what: "the authority's certificate",
            reason: e.to_string(),
        }
    })?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(generation)?;
    params
        .distinguished_name
        .push(DnType::CommonName, principal);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.not_before = now.into();
    params.not_after = (now + valid_for).into();
    let key = KeyPair::generate().map_err(generation)?;
    let cert = params.signed_by(&key, &issuer).map_err(generation)?;
    Ok(ClientCertificate {
        certificate_pem: cert.pem(),
        key_pem: Zeroizing::new(key.serialize_pem()),
    })
}

/// Issues the service a server certificate from the authority, for `names` (DNS
/// names or IP addresses, the first its common name), valid for `valid_for` from
/// `now`; its only extended key usage is server authentication.
pub fn issue_server(
    ca_certificate_pem: &str,
    ca_key_pem: &str,
    names: &[String],
    now: SystemTime,
    valid_for: Duration,
) -> Result<ClientCertificate, IdentityError> {
    let first = names
        .first()
        .ok_or_else(|| IdentityError::Generation("a server certificate names a host".into()))?;
    let ca_key =
        KeyPair::from_pem(ca_key_pem).map_err(|e| IdentityError::NotAKey(e.to_string()))?;
    let issuer = Issuer::from_ca_cert_pem(ca_certificate_pem, ca_key).map_err(|e| {
        IdentityError::NotACertificate {
            what: "the authority's certificate",
            reason: e.to_string(),
        }
    })?;
    let mut params = CertificateParams::new(names.to_vec()).map_err(generation)?;
    params
        .distinguished_name
        .push(DnType::CommonName, first.as_str());
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.not_before = now.into();
    params.not_after = (now + valid_for).into();
    let key = KeyPair::generate().map_err(generation)?;
    let cert = params.signed_by(&key, &issuer).map_err(generation)?;
    Ok(ClientCertificate {
        certificate_pem: cert.pem(),
        key_pem: Zeroizing::new(key.serialize_pem()),
    })
}
