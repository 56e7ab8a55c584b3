//! Key providers: sealing configuration artifacts at publication and opening them at
//! use (contract §2, §3.1).
//!
//! An artifact is the configuration a user rendered for one machine; it holds secrets
//! and is only ever stored sealed. Sealing encrypts it under the latest version of a
//! named key and returns a [`SealedArtifact`]: the ciphertext, the configuration digest
//! of the plaintext recorded at sealing, and a [`KeyBinding`].
//!
//! A binding names the key by an identity the provider never reissues, plus the
//! version used — never by name and version alone. A key deleted and recreated under
//! the same name has another identity, so an artifact bound to the lost key is refused
//! ([`KeyError::IdentityMismatch`]) rather than opened under a stranger.
//!
//! Opening decrypts under exactly the bound version, refuses a version below the key's
//! minimum decryption version or no longer present, and checks the digest of the
//! result against the recorded one. The binding and the digest are authenticated
//! together with the ciphertext as associated data, so a ciphertext moved under another
//! binding or artifact record does not open.
//!
//! [`KeyProvider::check_artifact`] is the use-time dependency check of §3.1: it
//! decrypts under the executor's identity and reports *that* it succeeded and the key
//! version it used ([`UseCheck`]); the plaintext is dropped, never returned or
//! recorded. A sealed or unreachable provider fails the check
//! ([`KeyError::Unavailable`]), so nothing is dispatched.
//!
//! Providers:
//!
//! - `TransitClient` (feature `transit`, which the `cli` feature enables): an
//!   OpenBao or HashiCorp Vault Transit secrets engine over HTTP or HTTPS. The
//!   recommended custody: the key never leaves the engine, so no backup of the store
//!   holds it.
//! - [`LocalKeyring`]: keys in a file under a directory the caller gives,
//!   XChaCha20-Poly1305; for development. The file is the key: it is never backed up
//!   with the store.
//!
//! Plaintext, key material and tokens never appear in an error, a log line or a
//! `Debug` output: [`Plaintext`] shows its length and digest only.

use std::fmt;

use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::attempt::ConfigArtifact;
use crate::digest::{Digest, config_digest};

mod error;
mod local;
#[cfg(feature = "transit")]
pub mod transit;

pub use error::{KeyError, KeyOperation, VersionUnavailable};
pub use local::{KeyInfo, LocalKeyring};
#[cfg(feature = "transit")]
pub use transit::{TransitClient, TransitConfig, TransitKeyInfo, TransitToken};

/// Which key, by which identity and version, an artifact was sealed under. A plan
/// binds this (§2).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeyBinding {
    /// The provider that holds the key (`local`, `transit`).
    pub provider: String,
    /// The key's name.
    pub key_name: String,
    /// An identity of the key that the provider never gives another key, a key
    /// recreated under the same name included.
    pub key_identity: String,
    /// The key version the artifact is sealed under.
    pub version: u32,
}

impl fmt::Display for KeyBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{} version {} (identity {})",
            self.provider, self.key_name, self.version, self.key_identity
        )
    }
}

/// An artifact as it is stored: its ciphertext, the key binding it opens under, and
/// the configuration digest of its plaintext recorded when it was sealed.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedArtifact {
    /// The key it was sealed under.
    pub binding: KeyBinding,
    /// The provider's ciphertext.
    pub ciphertext: Vec<u8>,
    /// [`config_digest`] of the plaintext, recorded at sealing (publication).
    pub digest: Digest,
}

impl fmt::Debug for SealedArtifact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealedArtifact")
            .field("binding", &self.binding)
            .field("ciphertext_len", &self.ciphertext.len())
            .field("digest", &self.digest)
            .finish()
    }
}

/// Decrypted artifact bytes. Wiped from memory when dropped; `Debug` shows only the
/// length and the configuration digest.
#[derive(Clone, PartialEq, Eq)]
pub struct Plaintext {
    bytes: Zeroizing<Vec<u8>>,
    digest: Digest,
}

impl Plaintext {
    /// Wraps these bytes.
    #[must_use]
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        let bytes = Zeroizing::new(bytes.into());
        let digest = config_digest(&bytes);
        Plaintext { bytes, digest }
    }

    /// The bytes.
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// [`config_digest`] of the bytes.
    #[must_use]
    pub fn digest(&self) -> Digest {
        self.digest
    }

    /// The length in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether there are no bytes.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes as a configuration artifact to apply (a copy; this buffer is wiped
    /// when dropped).
    #[must_use]
    pub fn to_artifact(&self) -> ConfigArtifact {
        ConfigArtifact::new(self.bytes.to_vec())
    }
}

impl fmt::Debug for Plaintext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plaintext")
            .field("len", &self.bytes.len())
            .field("digest", &self.digest)
            .finish()
    }
}

/// The result of a successful use-time dependency check (§3.1): what was checked and
/// the key version used. It never holds the plaintext.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UseCheck {
    /// The binding checked.
    pub binding: KeyBinding,
    /// The key version the check used (the bound one).
    pub version: u32,
    /// The key's minimum decryption version at the time of the check.
    pub min_decryption_version: u32,
    /// The key's latest version at the time of the check.
    pub latest_version: u32,
    /// When an artifact was decrypted: its digest, verified equal to the recorded
    /// one. `None` when only the key was checked.
    pub artifact_digest: Option<Digest>,
}

/// A key provider: seals artifacts at publication and opens them at use.
///
/// Object safe: executors hold a `Box<dyn KeyProvider>` or `Arc<dyn KeyProvider>`.
#[async_trait::async_trait]
pub trait KeyProvider: Send + Sync {
    /// The provider's name as bindings record it.
    fn provider(&self) -> &str;

    /// Encrypts `plaintext` under the latest version of the existing key `key_name`
    /// and returns the sealed artifact with its binding and digest. Never creates the
    /// key.
    async fn seal(&self, key_name: &str, plaintext: &[u8]) -> Result<SealedArtifact, KeyError>;

    /// Decrypts under exactly the bound key identity and version and verifies the
    /// result's digest against the recorded one.
    async fn open(&self, sealed: &SealedArtifact) -> Result<Plaintext, KeyError>;

    /// Checks that the bound key exists with the bound identity and that the bound
    /// version can decrypt now, without decrypting anything.
    async fn check(&self, binding: &KeyBinding) -> Result<UseCheck, KeyError>;

    /// The use-time dependency check of §3.1: checks the key, then decrypts the
    /// artifact under the bound version and verifies its digest. The plaintext is
    /// dropped; only the fact and the version are returned.
    async fn check_artifact(&self, sealed: &SealedArtifact) -> Result<UseCheck, KeyError> {
        let mut checked = self.check(&sealed.binding).await?;
        let plaintext = self.open(sealed).await?;
        drop(plaintext);
        checked.artifact_digest = Some(sealed.digest);
        Ok(checked)
    }

    /// Rotates the key to a new latest version and returns that version. Artifacts
    /// already sealed keep their bound version.
    async fn rotate(&self, key_name: &str) -> Result<u32, KeyError> {
        Err(KeyError::Unsupported {
            provider: self.provider().to_owned(),
            key_name: key_name.to_owned(),
            operation: KeyOperation::Rotate,
            reason: "rotation is not offered by this provider".to_owned(),
        })
    }
}

/// The associated data authenticated with every ciphertext: the binding and the
/// artifact digest, each field length-prefixed so no two bindings encode alike.
pub(crate) fn associated_data(binding: &KeyBinding, digest: &Digest) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + binding.key_name.len() + binding.key_identity.len());
    out.extend_from_slice(b"infra-talos sealed artifact v1");
    for field in [
        binding.provider.as_bytes(),
        binding.key_name.as_bytes(),
        binding.key_identity.as_bytes(),
    ] {
        out.extend_from_slice(&u32::try_from(field.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(field);
    }
    out.extend_from_slice(&binding.version.to_be_bytes());
    out.extend_from_slice(digest.as_bytes());
    out
}

/// Refuses a binding made by another provider.
pub(crate) fn check_provider(provider: &str, binding: &KeyBinding) -> Result<(), KeyError> {
    if binding.provider == provider {
        Ok(())
    } else {
        Err(KeyError::WrongProvider {
            provider: provider.to_owned(),
            bound: binding.provider.clone(),
            key_name: binding.key_name.clone(),
        })
    }
}

/// Checks the bound version against the key's minimum decryption version and latest
/// version.
pub(crate) fn check_version(
    binding: &KeyBinding,
    min_decryption_version: u32,
    latest_version: u32,
) -> Result<(), KeyError> {
    let reason = if binding.version < min_decryption_version {
        VersionUnavailable::BelowMinimum {
            min_decryption_version,
        }
    } else if binding.version == 0 || binding.version > latest_version {
        VersionUnavailable::Missing { latest_version }
    } else {
        return Ok(());
    };
    Err(KeyError::VersionUnavailable {
        key_name: binding.key_name.clone(),
        version: binding.version,
        reason,
    })
}

/// Verifies the digest of what decrypted against the recorded one.
pub(crate) fn verified(sealed: &SealedArtifact, bytes: Vec<u8>) -> Result<Plaintext, KeyError> {
    let plaintext = Plaintext::new(bytes);
    if plaintext.digest() == sealed.digest {
        Ok(plaintext)
    } else {
        Err(KeyError::DigestMismatch {
            key_name: sealed.binding.key_name.clone(),
            version: sealed.binding.version,
            recorded: sealed.digest,
            computed: plaintext.digest(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding() -> KeyBinding {
        KeyBinding {
            provider: "local".to_owned(),
            key_name: "k".to_owned(),
            key_identity: "id".to_owned(),
            version: 2,
        }
    }

    #[test]
    fn plaintext_debug_shows_length_and_digest_only() {
        let plaintext = Plaintext::new(b"token: s3cr3t-marker\n".to_vec());
        let shown = format!("{plaintext:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains(&plaintext.digest().to_hex()), "{shown}");
        assert_eq!(plaintext.to_artifact().digest(), plaintext.digest());
    }

    #[test]
    fn sealed_debug_hides_ciphertext() {
        let sealed = SealedArtifact {
            binding: binding(),
            ciphertext: b"vault:v2:c2VjcmV0".to_vec(),
            digest: config_digest(b"x"),
        };
        let shown = format!("{sealed:?}");
        assert!(!shown.contains("c2VjcmV0"), "{shown}");
        assert!(shown.contains("ciphertext_len: 17"), "{shown}");
    }

    #[test]
    fn associated_data_separates_fields() {
        let digest = config_digest(b"x");
        let a = binding();
        let mut b = binding();
        b.key_name = "ki".to_owned();
        b.key_identity = "d".to_owned();
        assert_ne!(associated_data(&a, &digest), associated_data(&b, &digest));
        let mut c = binding();
        c.version = 3;
        assert_ne!(associated_data(&a, &digest), associated_data(&c, &digest));
        assert_ne!(
            associated_data(&a, &digest),
            associated_data(&a, &config_digest(b"y"))
        );
    }

    #[test]
    fn versions_are_checked_against_the_key() {
        let b = binding();
        assert_eq!(check_version(&b, 1, 2), Ok(()));
        assert!(matches!(
            check_version(&b, 3, 3),
            Err(KeyError::VersionUnavailable {
                reason: VersionUnavailable::BelowMinimum {
                    min_decryption_version: 3
                },
                ..
            })
        ));
        assert!(matches!(
            check_version(&b, 1, 1),
            Err(KeyError::VersionUnavailable {
                reason: VersionUnavailable::Missing { latest_version: 1 },
                ..
            })
        ));
    }
}
