//! The service's TLS: its own server certificate, and client certificates verified
//! against the installation's authority (the one the store's bootstrap recorded).
//! A client certificate is optional at the handshake, so a browser signed in with a
//! token and a liveness probe can connect; an act without a proven principal is
//! refused by the routes, never guessed.

use std::sync::Arc;
use std::time::SystemTime;

use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use crate::identity::{Fingerprint, principal_of_verified};

/// Why the TLS configuration could not be made.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TlsError(String);

/// The acceptor for the service's listener.
pub(crate) fn acceptor(
    ca_certificate_pem: &str,
    server_certificate_pem: &str,
    server_key_pem: &str,
) -> Result<TlsAcceptor, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    let ca = CertificateDer::from_pem_slice(ca_certificate_pem.as_bytes())
        .map_err(|e| TlsError(format!("the installation's authority: {e}")))?;
    roots
        .add(ca)
        .map_err(|e| TlsError(format!("the installation's authority: {e}")))?;
    let verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
            .allow_unauthenticated()
            .build()
            .map_err(|e| TlsError(format!("the client verifier: {e}")))?;
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(server_certificate_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| TlsError(format!("the server certificate: {e}")))?;
    if chain.is_empty() {
        return Err(TlsError(
            "the server certificate file holds no certificate".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(server_key_pem.as_bytes())
        .map_err(|e| TlsError(format!("the server key: {e}")))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| TlsError(format!("the server certificate and key: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A connection's verified client certificate: the principal it names and its
/// fingerprint, which the routes look up among the store's bindings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PeerCertificate {
    /// The principal its subject names.
    pub(crate) id: String,
    /// Its fingerprint.
    pub(crate) fingerprint: Fingerprint,
}

/// The principal the verified client certificate of a connection names, and the
/// certificate's fingerprint, if it presented one.
pub(crate) fn peer_principal(
    ca_certificate_pem: &str,
    peer: Option<&[CertificateDer<'static>]>,
    now: SystemTime,
) -> Option<PeerCertificate> {
    let cert = peer?.first()?;
    let id = principal_of_verified(ca_certificate_pem, cert, now).ok()?;
    Some(PeerCertificate {
        id,
        fingerprint: Fingerprint::of_der(cert.as_ref()),
    })
}
