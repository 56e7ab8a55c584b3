//! A per-test certificate authority, the simulated node's server certificate and
//! client certificates, all generated in memory.

use std::fmt;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use super::SimError;

/// The Talos role a client certificate carries as its organisation to administer a
/// node.
pub const ADMIN_ROLE: &str = "os:admin";

/// A certificate authority made for one test, with the simulated node's server
/// certificate (for `127.0.0.1` and `localhost`) issued by it.
pub struct TestPki {
    ca: CertifiedIssuer<'static, KeyPair>,
    server_cert_pem: String,
    server_key_pem: String,
}

impl fmt::Debug for TestPki {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestPki").finish_non_exhaustive()
    }
}

impl TestPki {
    /// A fresh CA and a server certificate issued by it.
    pub fn generate() -> Result<Self, SimError> {
        let ca = new_ca("talos simulator test CA")?;
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])?;
        params
            .distinguished_name
            .push(DnType::CommonName, "talos simulator node");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &ca)?;
        Ok(TestPki {
            ca,
            server_cert_pem: cert.pem(),
            server_key_pem: key.serialize_pem(),
        })
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// The node's server certificate, PEM.
    pub fn server_cert_pem(&self) -> &str {
        &self.server_cert_pem
    }

    pub(crate) fn server_key_pem(&self) -> &str {
        &self.server_key_pem
    }

    /// A client certificate issued by this CA for the `os:admin` role.
    pub fn admin_client(&self) -> Result<ClientCert, SimError> {
        self.client(ADMIN_ROLE)
    }

    /// A client certificate issued by this CA whose subject carries `organisation`
    /// (for example `os:reader`, to test that a non-admin role is refused).
    pub fn client(&self, organisation: &str) -> Result<ClientCert, SimError> {
        issue_client(&self.ca, organisation)
    }

    /// A client certificate for `organisation` issued by another CA, one the
    /// simulated node does not trust: its handshake must be refused.
    pub fn untrusted_client(organisation: &str) -> Result<ClientCert, SimError> {
        let stranger = new_ca("untrusted test CA")?;
        issue_client(&stranger, organisation)
    }
}

/// A client certificate and its private key, PEM. `Debug` leaves the key out.
#[derive(Clone)]
pub struct ClientCert {
    organisation: String,
    cert_pem: String,
    key_pem: String,
}

impl ClientCert {
    /// The organisation (Talos role) in the certificate's subject.
    pub fn organisation(&self) -> &str {
        &self.organisation
    }

    /// The certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The private key, PEM.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }
}

impl fmt::Debug for ClientCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCert")
            .field("organisation", &self.organisation)
            .finish_non_exhaustive()
    }
}

fn new_ca(name: &str) -> Result<CertifiedIssuer<'static, KeyPair>, SimError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, name);
    params
        .distinguished_name
        .push(DnType::OrganizationName, "talos");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(CertifiedIssuer::self_signed(params, KeyPair::generate()?)?)
}

fn issue_client(
    ca: &CertifiedIssuer<'static, KeyPair>,
    organisation: &str,
) -> Result<ClientCert, SimError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::OrganizationName, organisation);
    params
        .distinguished_name
        .push(DnType::CommonName, "test client");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, ca)?;
    Ok(ClientCert {
        organisation: organisation.to_owned(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}
