//! The OpenBao / HashiCorp Vault Transit key provider (feature `transit`).
//!
//! Speaks the Transit secrets engine's documented HTTP API, which OpenBao and Vault
//! share: `GET /v1/{mount}/keys/{name}`, `POST /v1/{mount}/encrypt/{name}`,
//! `POST /v1/{mount}/decrypt/{name}`, `POST /v1/{mount}/keys/{name}/rotate` and
//! `POST /v1/{mount}/keys/{name}`, authenticated by the `X-Vault-Token` header and, for
//! a namespace, `X-Vault-Namespace`.
//!
//! **Identity.** A Transit key has no identifier of its own besides its name, so the
//! binding's key identity is the name together with the creation time of version 1
//! (`keys["1"]` in the key's description): `name@creation-time`. A key deleted and
//! recreated under the same name has another creation time and so another identity.
//! Two limits follow from what the server reports: for symmetric keys the creation
//! time has one-second resolution, and a key trimmed past version 1 has no readable
//! identity, so it can neither seal nor open.
//!
//! **Sealing** reads the key first and encrypts under its latest version, named
//! explicitly, with the binding and the artifact digest as associated data; only AEAD
//! key types that are not derived are accepted (`aes128-gcm96`, `aes256-gcm96`,
//! `chacha20-poly1305`, `xchacha20-poly1305`). The client never creates a key on
//! encrypt: it refuses a key that does not exist before sending anything. Transit's
//! encrypt endpoint would upsert a missing key for a token that holds `create` on
//! `{mount}/encrypt/{name}`, so the executor's and publisher's identities must not hold
//! `create` there (nor on `{mount}/keys/*`).
//!
//! **Opening** checks that the ciphertext's `vault:vN:` prefix names the bound version,
//! that the key's identity is the bound one and that the bound version lies between
//! the key's minimum decryption version and its latest version, then decrypts and
//! verifies the digest. The executor's identity needs `read` on `{mount}/keys/{name}`
//! and `update` on `{mount}/decrypt/{name}`, nothing more.
//!
//! Answers map to [`KeyError`]: 403 is [`KeyError::PermissionDenied`], never "not
//! found"; 503 (sealed or standby) and any failure to reach the server are
//! [`KeyError::Unavailable`]; 404 on a key is [`KeyError::KeyNotFound`]. No response
//! body, token, plaintext or ciphertext is ever put in an error.
//!
//! **Transport.** An `http://` address is spoken in plain HTTP (a server on loopback
//! or behind a local TLS-terminating proxy); an `https://` address needs the
//! certificate authority its server certificate is verified against
//! ([`TransitConfig::with_ca_certificate_pem`]): no other root is trusted.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};
use zeroize::Zeroizing;

use super::error::check_key_name;
use super::{
    KeyBinding, KeyError, KeyOperation, KeyProvider, Plaintext, SealedArtifact, UseCheck,
    VersionUnavailable, associated_data, check_provider, check_version, verified,
};
use crate::digest::config_digest;

/// The provider name Transit bindings carry.
const PROVIDER: &str = "transit";
/// Key types whose encrypt and decrypt endpoints take associated data.
const AEAD_TYPES: &[&str] = &[
    "aes128-gcm96",
    "aes256-gcm96",
    "chacha20-poly1305",
    "xchacha20-poly1305",
];

/// A Vault/OpenBao token. `Debug` never shows it; the memory is wiped on drop.
#[derive(Clone)]
pub struct TransitToken(Zeroizing<String>);

impl TransitToken {
    /// Wraps a token.
    #[must_use]
    pub fn new(token: impl Into<String>) -> Self {
        TransitToken(Zeroizing::new(token.into()))
    }

    fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for TransitToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TransitToken(<redacted>)")
    }
}

/// Where and how to reach the Transit engine.
#[derive(Debug, Clone)]
pub struct TransitConfig {
    /// The server's base address, such as `http://127.0.0.1:8200`.
    pub address: String,
    /// The token sent as `X-Vault-Token`.
    pub token: TransitToken,
    /// The namespace sent as `X-Vault-Namespace`, if any.
    pub namespace: Option<String>,
    /// The engine's mount path (default `transit`).
    pub mount: String,
    /// The time limit of each request (default 10 s).
    pub timeout: Duration,
    /// The certificate authority (PEM) an `https://` server's certificate is verified
    /// against; required for `https://`, refused for `http://`.
    pub ca_certificate_pem: Option<String>,
}

impl TransitConfig {
    /// A configuration for the engine mounted at `transit` on `address`.
    #[must_use]
    pub fn new(address: impl Into<String>, token: TransitToken) -> Self {
        TransitConfig {
            address: address.into(),
            token,
            namespace: None,
            mount: "transit".to_owned(),
            timeout: Duration::from_secs(10),
            ca_certificate_pem: None,
        }
    }

    /// With the server's certificate verified against this authority (PEM), for an
    /// `https://` address.
    #[must_use]
    pub fn with_ca_certificate_pem(mut self, pem: impl Into<String>) -> Self {
        self.ca_certificate_pem = Some(pem.into());
        self
    }

    /// With this namespace.
    #[must_use]
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// With the engine mounted at `mount`.
    #[must_use]
    pub fn with_mount(mut self, mount: impl Into<String>) -> Self {
        self.mount = mount.into();
        self
    }

    /// With this time limit per request.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// A Transit key as `GET /v1/{mount}/keys/{name}` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransitKeyInfo {
    /// The key's name.
    pub name: String,
    /// The key type, such as `aes256-gcm96`.
    pub key_type: String,
    /// The version new encryptions use.
    pub latest_version: u32,
    /// The oldest version that may still decrypt.
    pub min_decryption_version: u32,
    /// The oldest version that may encrypt (0: any).
    pub min_encryption_version: u32,
    /// Whether the key derives per-context keys (not usable here).
    pub derived: bool,
    /// Whether the key may be deleted.
    pub deletion_allowed: bool,
    /// The key's identity, `name@creation-time-of-version-1`, when version 1 is still
    /// listed.
    pub identity: Option<String>,
}

/// An HTTP client for the Transit engine (see the module documentation).
pub struct TransitClient {
    http: reqwest::Client,
    base: String,
    config: TransitConfig,
}

impl fmt::Debug for TransitClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransitClient")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// How a request failed, before it is turned into a [`KeyError`].
enum Failure {
    /// No usable answer: the server could not be reached or the body not read.
    Transport(String),
    /// An answer with an error status and the server's error strings (matched, never
    /// shown).
    Status(StatusCode, Vec<String>),
    /// A success status with a body this client does not understand.
    Body(String),
}

impl TransitClient {
    /// A client for `config`.
    ///
    /// # Errors
    ///
    /// [`KeyError::Unsupported`] when the address is neither `http://` nor `https://`,
    /// when an `https://` address comes without a usable authority certificate (or an
    /// `http://` one with one), or when the mount path is not made of path segments
    /// like key names.
    pub fn new(config: TransitConfig) -> Result<Self, KeyError> {
        let unsupported = |reason: &str| KeyError::Unsupported {
            provider: PROVIDER.to_owned(),
            key_name: "-".to_owned(),
            operation: KeyOperation::Read,
            reason: reason.to_owned(),
        };
        let address = config.address.trim_end_matches('/');
        let tls = if address.starts_with("https://") {
            let pem = config.ca_certificate_pem.as_deref().ok_or_else(|| {
                unsupported(
                    "an https:// address needs the authority its certificate is verified \
                     against (the Transit CA certificate)",
                )
            })?;
            Some(tls_config(pem).map_err(|reason| unsupported(&reason))?)
        } else if address.starts_with("http://") {
            if config.ca_certificate_pem.is_some() {
                return Err(unsupported(
                    "a CA certificate is given for an http:// address: use https://, or \
                     give no CA certificate",
                ));
            }
            None
        } else {
            return Err(unsupported("the address must be http:// or https://"));
        };
        let mount = config.mount.trim_matches('/');
        if mount.is_empty()
            || mount
                .split('/')
                .any(|segment| check_key_name(segment).is_err())
        {
            return Err(unsupported("the mount path is not valid"));
        }
        // reqwest may be built without a TLS provider of its own (another crate of the
        // build can ask for that); ring is then installed for the process, once. One the
        // application installed first is kept.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .no_proxy();
        if let Some(tls) = tls {
            builder = builder.tls_backend_preconfigured(tls);
        }
        let http = builder
            .build()
            .map_err(|_| unsupported("the HTTP client cannot be built"))?;
        Ok(TransitClient {
            http,
            base: format!("{address}/v1/{mount}"),
            config,
        })
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &TransitConfig {
        &self.config
    }

    /// Describes the key `name` (`GET /v1/{mount}/keys/{name}`).
    ///
    /// # Errors
    ///
    /// [`KeyError::KeyNotFound`], [`KeyError::PermissionDenied`],
    /// [`KeyError::Unavailable`] or [`KeyError::Protocol`].
    pub async fn read_key(&self, name: &str) -> Result<TransitKeyInfo, KeyError> {
        check_key_name(name)?;
        let data = self
            .call(Method::GET, &format!("keys/{name}"), None)
            .await
            .map_err(|failure| self.error(failure, KeyOperation::Read, name, None))?;
        parse_key(name, data)
    }

    /// Creates the key `name` of type `aes256-gcm96`, for an administrative identity
    /// (the executor's must not be able to). Creating a key that exists changes
    /// nothing on the server; this returns the key as it is then.
    ///
    /// # Errors
    ///
    /// As [`TransitClient::read_key`].
    pub async fn create_key(&self, name: &str) -> Result<TransitKeyInfo, KeyError> {
        check_key_name(name)?;
        self.call(
            Method::POST,
            &format!("keys/{name}"),
            Some(json!({"type": "aes256-gcm96"})),
        )
        .await
        .map_err(|failure| self.error(failure, KeyOperation::Create, name, None))?;
        self.read_key(name).await
    }

    /// Reads the key and checks it can seal and open here.
    async fn usable_key(&self, name: &str, operation: KeyOperation) -> Result<UsableKey, KeyError> {
        let info = self.read_key(name).await?;
        let unsupported = |reason: String| KeyError::Unsupported {
            provider: PROVIDER.to_owned(),
            key_name: name.to_owned(),
            operation,
            reason,
        };
        if !AEAD_TYPES.contains(&info.key_type.as_str()) {
            return Err(unsupported(format!(
                "key type {} takes no associated data",
                info.key_type
            )));
        }
        if info.derived {
            return Err(unsupported("derived keys are not supported".to_owned()));
        }
        let identity = info
            .identity
            .clone()
            .ok_or_else(|| KeyError::IdentityUnreadable {
                provider: PROVIDER.to_owned(),
                key_name: name.to_owned(),
                reason: "version 1 is no longer listed (the key was trimmed)".to_owned(),
            })?;
        Ok(UsableKey { info, identity })
    }

    /// Checks the binding against the key as the server describes it now.
    async fn check_binding(&self, binding: &KeyBinding) -> Result<UsableKey, KeyError> {
        check_provider(PROVIDER, binding)?;
        let key = self
            .usable_key(&binding.key_name, KeyOperation::Decrypt)
            .await?;
        if key.identity != binding.key_identity {
            return Err(KeyError::IdentityMismatch {
                key_name: binding.key_name.clone(),
                version: binding.version,
                bound: binding.key_identity.clone(),
                found: key.identity,
            });
        }
        check_version(
            binding,
            key.info.min_decryption_version,
            key.info.latest_version,
        )?;
        Ok(key)
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Failure> {
        let mut request = self
            .http
            .request(method, format!("{}/{path}", self.base))
            .header("X-Vault-Token", self.config.token.expose())
            .header("X-Vault-Request", "true");
        if let Some(namespace) = &self.config.namespace {
            request = request.header("X-Vault-Namespace", namespace);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.map_err(|err| {
            Failure::Transport(if err.is_timeout() {
                "the request timed out".to_owned()
            } else if err.is_connect() {
                "the server cannot be reached".to_owned()
            } else {
                "the request failed in transport".to_owned()
            })
        })?;
        let status = response.status();
        let bytes = Zeroizing::new(
            response
                .bytes()
                .await
                .map_err(|_| Failure::Transport("the answer was cut short".to_owned()))?
                .to_vec(),
        );
        if status.is_success() {
            if bytes.iter().all(u8::is_ascii_whitespace) {
                return Ok(Value::Null);
            }
            let mut value: Value = serde_json::from_slice(&bytes)
                .map_err(|_| Failure::Body("the answer is not JSON".to_owned()))?;
            return Ok(value
                .get_mut("data")
                .map(Value::take)
                .unwrap_or(Value::Null));
        }
        #[derive(Deserialize)]
        struct Errors {
            #[serde(default)]
            errors: Vec<String>,
        }
        let errors = serde_json::from_slice::<Errors>(&bytes)
            .map(|errors| errors.errors)
            .unwrap_or_default();
        Err(Failure::Status(status, errors))
    }

    /// Turns a failed request into a [`KeyError`]. `context` is the bound version and
    /// the key as read just before, for decryption refusals.
    fn error(
        &self,
        failure: Failure,
        operation: KeyOperation,
        key_name: &str,
        context: Option<(u32, &TransitKeyInfo)>,
    ) -> KeyError {
        let provider = PROVIDER.to_owned();
        let key_name = key_name.to_owned();
        let (status, errors) = match failure {
            Failure::Transport(reason) => {
                return KeyError::Unavailable {
                    provider,
                    key_name,
                    reason,
                };
            }
            Failure::Body(reason) => {
                return KeyError::Protocol {
                    provider,
                    key_name,
                    operation,
                    reason,
                };
            }
            Failure::Status(status, errors) => (status, errors),
        };
        let says = |needle: &str| {
            errors
                .iter()
                .any(|error| error.to_ascii_lowercase().contains(needle))
        };
        match status.as_u16() {
            403 => KeyError::PermissionDenied {
                provider,
                key_name,
                operation,
            },
            404 if says("no handler for route") => KeyError::Unavailable {
                provider,
                key_name,
                reason: format!("no Transit engine is mounted at {}", self.config.mount),
            },
            404 => KeyError::KeyNotFound { provider, key_name },
            503 => KeyError::Unavailable {
                provider,
                key_name,
                reason: if says("sealed") {
                    "the server is sealed".to_owned()
                } else {
                    "the server is unavailable (HTTP 503)".to_owned()
                },
            },
            400 if says("authentication failed") => KeyError::AuthenticationFailed {
                key_name,
                version: context.map_or(0, |(version, _)| version),
            },
            400 if says("too old") || says("disallowed by policy") => {
                KeyError::VersionUnavailable {
                    key_name,
                    version: context.map_or(0, |(version, _)| version),
                    reason: VersionUnavailable::BelowMinimum {
                        min_decryption_version: context
                            .map_or(0, |(_, info)| info.min_decryption_version),
                    },
                }
            }
            400 if says("invalid key version") || says("requested version") => {
                KeyError::VersionUnavailable {
                    key_name,
                    version: context.map_or(0, |(version, _)| version),
                    reason: VersionUnavailable::Missing {
                        latest_version: context.map_or(0, |(_, info)| info.latest_version),
                    },
                }
            }
            400 if says("not found") => KeyError::KeyNotFound { provider, key_name },
            400 => KeyError::Refused {
                provider,
                key_name,
                operation,
                reason: "the server refused the request as invalid (HTTP 400)".to_owned(),
            },
            429 | 500..=599 => KeyError::Unavailable {
                provider,
                key_name,
                reason: format!("the server failed (HTTP {})", status.as_u16()),
            },
            other => KeyError::Protocol {
                provider,
                key_name,
                operation,
                reason: format!("unexpected HTTP status {other}"),
            },
        }
    }
}

/// A key that can seal and open here, with its identity.
struct UsableKey {
    info: TransitKeyInfo,
    identity: String,
}

#[async_trait::async_trait]
impl KeyProvider for TransitClient {
    fn provider(&self) -> &str {
        PROVIDER
    }

    async fn seal(&self, key_name: &str, plaintext: &[u8]) -> Result<SealedArtifact, KeyError> {
        let key = self.usable_key(key_name, KeyOperation::Encrypt).await?;
        let version = key.info.latest_version;
        if version == 0 || version < key.info.min_encryption_version {
            return Err(KeyError::VersionUnavailable {
                key_name: key_name.to_owned(),
                version,
                reason: VersionUnavailable::Missing {
                    latest_version: version,
                },
            });
        }
        let binding = KeyBinding {
            provider: PROVIDER.to_owned(),
            key_name: key_name.to_owned(),
            key_identity: key.identity,
            version,
        };
        let digest = config_digest(plaintext);
        let aad = associated_data(&binding, &digest);
        let body = json!({
            "plaintext": BASE64.encode(plaintext),
            "key_version": version,
            "associated_data": BASE64.encode(&aad),
        });
        let data = self
            .call(Method::POST, &format!("encrypt/{key_name}"), Some(body))
            .await
            .map_err(|failure| {
                self.error(
                    failure,
                    KeyOperation::Encrypt,
                    key_name,
                    Some((version, &key.info)),
                )
            })?;
        let protocol = |reason: &str| KeyError::Protocol {
            provider: PROVIDER.to_owned(),
            key_name: key_name.to_owned(),
            operation: KeyOperation::Encrypt,
            reason: reason.to_owned(),
        };
        let ciphertext = data
            .get("ciphertext")
            .and_then(Value::as_str)
            .ok_or_else(|| protocol("the answer has no ciphertext"))?;
        if ciphertext_version(ciphertext) != Some(version) {
            return Err(protocol(
                "the ciphertext is not under the requested version",
            ));
        }
        if let Some(answered) = data.get("key_version").and_then(Value::as_u64)
            && answered != u64::from(version)
        {
            return Err(protocol("the answer names another key version"));
        }
        Ok(SealedArtifact {
            binding,
            ciphertext: ciphertext.as_bytes().to_vec(),
            digest,
        })
    }

    async fn open(&self, sealed: &SealedArtifact) -> Result<Plaintext, KeyError> {
        let binding = &sealed.binding;
        check_provider(PROVIDER, binding)?;
        let malformed = |reason: &str| KeyError::Malformed {
            key_name: binding.key_name.clone(),
            version: binding.version,
            reason: reason.to_owned(),
        };
        let ciphertext = std::str::from_utf8(&sealed.ciphertext)
            .map_err(|_| malformed("not a Transit ciphertext"))?;
        match ciphertext_version(ciphertext) {
            None => return Err(malformed("not a Transit ciphertext")),
            Some(version) if version != binding.version => {
                return Err(malformed(
                    "the ciphertext's version marker differs from the bound version",
                ));
            }
            Some(_) => {}
        }
        let key = self.check_binding(binding).await?;
        let aad = associated_data(binding, &sealed.digest);
        let body = json!({
            "ciphertext": ciphertext,
            "associated_data": BASE64.encode(&aad),
        });
        let mut data = self
            .call(
                Method::POST,
                &format!("decrypt/{}", binding.key_name),
                Some(body),
            )
            .await
            .map_err(|failure| {
                self.error(
                    failure,
                    KeyOperation::Decrypt,
                    &binding.key_name,
                    Some((binding.version, &key.info)),
                )
            })?;
        let encoded = match data.get_mut("plaintext").map(Value::take) {
            Some(Value::String(text)) => Zeroizing::new(text),
            _ => {
                return Err(KeyError::Protocol {
                    provider: PROVIDER.to_owned(),
                    key_name: binding.key_name.clone(),
                    operation: KeyOperation::Decrypt,
                    reason: "the answer has no plaintext".to_owned(),
                });
            }
        };
        let bytes = BASE64
            .decode(encoded.as_bytes())
            .map_err(|_| KeyError::Protocol {
                provider: PROVIDER.to_owned(),
                key_name: binding.key_name.clone(),
                operation: KeyOperation::Decrypt,
                reason: "the plaintext in the answer is not base64".to_owned(),
            })?;
        verified(sealed, bytes)
    }

    async fn check(&self, binding: &KeyBinding) -> Result<UseCheck, KeyError> {
        let key = self.check_binding(binding).await?;
        Ok(UseCheck {
            binding: binding.clone(),
            version: binding.version,
            min_decryption_version: key.info.min_decryption_version,
            latest_version: key.info.latest_version,
            artifact_digest: None,
        })
    }

    async fn rotate(&self, key_name: &str) -> Result<u32, KeyError> {
        check_key_name(key_name)?;
        self.call(Method::POST, &format!("keys/{key_name}/rotate"), None)
            .await
            .map_err(|failure| self.error(failure, KeyOperation::Rotate, key_name, None))?;
        Ok(self.read_key(key_name).await?.latest_version)
    }
}

/// A TLS client configuration trusting only the authority in `pem`.
fn tls_config(pem: &str) -> Result<rustls::ClientConfig, String> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    let mut found = 0usize;
    for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        let cert = cert.map_err(|_| "the Transit CA certificate is not valid PEM".to_owned())?;
        roots
            .add(cert)
            .map_err(|_| "the Transit CA certificate cannot be used as a root".to_owned())?;
        found += 1;
    }
    if found == 0 {
        return Err("the Transit CA certificate file holds no certificate".to_owned());
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|_| "no TLS protocol version is available".to_owned())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// The version in a `vault:vN:` ciphertext prefix.
fn ciphertext_version(ciphertext: &str) -> Option<u32> {
    let rest = ciphertext.strip_prefix("vault:v")?;
    let (version, body) = rest.split_once(':')?;
    if body.is_empty() || version.is_empty() || !version.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    version.parse().ok().filter(|version| *version > 0)
}

/// Parses the `data` of `GET /v1/{mount}/keys/{name}`.
fn parse_key(name: &str, data: Value) -> Result<TransitKeyInfo, KeyError> {
    #[derive(Deserialize)]
    struct KeyData {
        #[serde(rename = "type")]
        key_type: String,
        latest_version: u32,
        min_decryption_version: u32,
        #[serde(default)]
        min_encryption_version: u32,
        #[serde(default)]
        derived: bool,
        #[serde(default)]
        deletion_allowed: bool,
        #[serde(default)]
        keys: BTreeMap<String, Value>,
    }
    let data: KeyData = serde_json::from_value(data).map_err(|_| KeyError::Protocol {
        provider: PROVIDER.to_owned(),
        key_name: name.to_owned(),
        operation: KeyOperation::Read,
        reason: "the key description is not in the expected form".to_owned(),
    })?;
    let created = match data.keys.get("1") {
        Some(Value::Number(seconds)) => Some(seconds.to_string()),
        Some(Value::String(time)) if !time.is_empty() => Some(time.clone()),
        Some(Value::Object(entry)) => entry
            .get("creation_time")
            .and_then(Value::as_str)
            .filter(|time| !time.is_empty())
            .map(str::to_owned),
        _ => None,
    };
    Ok(TransitKeyInfo {
        name: name.to_owned(),
        key_type: data.key_type,
        latest_version: data.latest_version,
        min_decryption_version: data.min_decryption_version,
        min_encryption_version: data.min_encryption_version,
        derived: data.derived,
        deletion_allowed: data.deletion_allowed,
        identity: created.map(|created| format!("{name}@{created}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ciphertext_prefix() {
        assert_eq!(ciphertext_version("vault:v1:abc"), Some(1));
        assert_eq!(ciphertext_version("vault:v12:abc"), Some(12));
        assert_eq!(ciphertext_version("vault:v0:abc"), None);
        assert_eq!(ciphertext_version("vault:v1:"), None);
        assert_eq!(ciphertext_version("vault:vx:abc"), None);
        assert_eq!(ciphertext_version("vault:v+1:abc"), None);
        assert_eq!(ciphertext_version("ikr1..."), None);
    }

    #[test]
    fn identity_from_each_creation_time_form() {
        let key = |created: Value| {
            json!({
                "name": "k", "type": "aes256-gcm96", "latest_version": 2,
                "min_decryption_version": 1, "keys": {"1": created, "2": 5},
            })
        };
        let identity = |created| parse_key("k", key(created)).expect("parse").identity;
        assert_eq!(
            identity(json!(1_700_000_000)),
            Some("k@1700000000".to_owned())
        );
        assert_eq!(
            identity(json!("2025-01-02T03:04:05.123456789Z")),
            Some("k@2025-01-02T03:04:05.123456789Z".to_owned())
        );
        assert_eq!(
            identity(json!({"creation_time": "2025-01-02T03:04:05Z", "public_key": "x"})),
            Some("k@2025-01-02T03:04:05Z".to_owned())
        );
        let trimmed = json!({
            "type": "aes256-gcm96", "latest_version": 2, "min_decryption_version": 2,
            "keys": {"2": 5},
        });
        assert_eq!(parse_key("k", trimmed).expect("parse").identity, None);
        assert!(matches!(
            parse_key("k", json!({"type": 3})),
            Err(KeyError::Protocol { .. })
        ));
    }

    #[test]
    fn config_debug_hides_the_token() {
        let config = TransitConfig::new(
            "http://127.0.0.1:8200",
            TransitToken::new("s.secret-token-marker"),
        )
        .with_namespace("team")
        .with_mount("transit-a");
        let shown = format!("{config:?}");
        assert!(!shown.contains("secret-token-marker"), "{shown}");
        let client = TransitClient::new(config).expect("client");
        let shown = format!("{client:?}");
        assert!(!shown.contains("secret-token-marker"), "{shown}");
    }

    #[test]
    fn refuses_addresses_and_mounts_it_cannot_use() {
        let token = TransitToken::new("t");
        let reason = |config: TransitConfig| match TransitClient::new(config) {
            Err(KeyError::Unsupported { reason, .. }) => reason,
            other => panic!("expected an unsupported configuration, got {other:?}"),
        };
        assert_eq!(
            reason(TransitConfig::new("ftp://vault", token.clone())),
            "the address must be http:// or https://"
        );
        assert!(
            reason(TransitConfig::new("https://vault", token.clone()))
                .starts_with("an https:// address needs the authority")
        );
        assert_eq!(
            reason(
                TransitConfig::new("https://vault", token.clone())
                    .with_ca_certificate_pem("not a certificate")
            ),
            "the Transit CA certificate file holds no certificate"
        );
        assert!(
            reason(
                TransitConfig::new("http://127.0.0.1:1", token.clone())
                    .with_ca_certificate_pem("x")
            )
            .starts_with("a CA certificate is given for an http:// address")
        );
        assert_eq!(
            reason(TransitConfig::new("http://127.0.0.1:1", token.clone()).with_mount("a/../b")),
            "the mount path is not valid"
        );
        assert!(
            TransitClient::new(TransitConfig::new("http://127.0.0.1:1", token).with_mount("a/b"))
                .is_ok()
        );
    }
}
