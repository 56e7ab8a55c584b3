//! What can go wrong sealing, opening or checking an artifact.
//!
//! Every message names the provider, key and version involved and never any data: no
//! plaintext, no ciphertext, no key material, no token and no response body.

use std::fmt;
use std::path::PathBuf;

use crate::digest::Digest;

/// The operation a provider was asked to perform, as errors name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyOperation {
    /// Reading a key's metadata (identity, versions).
    Read,
    /// Encrypting (sealing) under a key.
    Encrypt,
    /// Decrypting (opening) under a key.
    Decrypt,
    /// Creating a key.
    Create,
    /// Rotating a key to a new version.
    Rotate,
    /// Changing a key's settings, such as its minimum decryption version.
    Configure,
    /// Deleting a key.
    Delete,
}

impl fmt::Display for KeyOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Read => "read",
            Self::Encrypt => "encrypt",
            Self::Decrypt => "decrypt",
            Self::Create => "create",
            Self::Rotate => "rotate",
            Self::Configure => "configure",
            Self::Delete => "delete",
        })
    }
}

/// Why a bound key version cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VersionUnavailable {
    /// The key's minimum decryption version is above the bound version.
    BelowMinimum {
        /// The key's minimum decryption version.
        min_decryption_version: u32,
    },
    /// The key has no such version (it is above the latest, or the version was
    /// removed).
    Missing {
        /// The key's latest version.
        latest_version: u32,
    },
}

impl fmt::Display for VersionUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BelowMinimum {
                min_decryption_version,
            } => write!(
                f,
                "below the key's minimum decryption version {min_decryption_version}"
            ),
            Self::Missing { latest_version } => write!(
                f,
                "the key has no such version (latest version {latest_version})"
            ),
        }
    }
}

/// An error from a [`super::KeyProvider`] or a keyring.
///
/// The variants keep apart what the contract needs apart: an unavailable or sealed
/// provider, a refused permission and a missing key are three different answers, and
/// a permission refusal is never reported as a missing key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The provider cannot be used now: sealed, unreachable, timed out or failing.
    #[error("key provider {provider} is unavailable ({reason}); key {key_name} was not used")]
    Unavailable {
        /// The provider.
        provider: String,
        /// The key the request was for.
        key_name: String,
        /// What made it unavailable.
        reason: String,
    },
    /// The provider refused the caller the operation.
    #[error("key provider {provider} denied permission to {operation} key {key_name}")]
    PermissionDenied {
        /// The provider.
        provider: String,
        /// The key.
        key_name: String,
        /// The refused operation.
        operation: KeyOperation,
    },
    /// No key has this name.
    #[error("key {key_name} was not found in key provider {provider}")]
    KeyNotFound {
        /// The provider.
        provider: String,
        /// The key.
        key_name: String,
    },
    /// A key by this name already exists (on creation).
    #[error("key {key_name} already exists in key provider {provider}")]
    KeyExists {
        /// The provider.
        provider: String,
        /// The key.
        key_name: String,
    },
    /// The key now under the bound name is not the bound key: it was deleted and
    /// recreated, or the binding is for another installation.
    #[error(
        "key {key_name} (version {version}) is not the bound key: bound identity {bound}, \
         found {found}; a key recreated under the same name is never accepted"
    )]
    IdentityMismatch {
        /// The key's name.
        key_name: String,
        /// The bound version.
        version: u32,
        /// The identity in the binding.
        bound: String,
        /// The identity the provider reports now.
        found: String,
    },
    /// The key's identity cannot be read, so no binding to it can be made or checked.
    #[error("key {key_name} in key provider {provider} has no readable identity: {reason}")]
    IdentityUnreadable {
        /// The provider.
        provider: String,
        /// The key.
        key_name: String,
        /// Why.
        reason: String,
    },
    /// The bound version of the key cannot be used for decryption.
    #[error("version {version} of key {key_name} is unavailable: {reason}")]
    VersionUnavailable {
        /// The key.
        key_name: String,
        /// The bound version.
        version: u32,
        /// Why.
        reason: VersionUnavailable,
    },
    /// The ciphertext did not authenticate under the binding: it was altered, or it
    /// belongs to another binding or artifact.
    #[error(
        "ciphertext under key {key_name} version {version} failed authentication \
         (altered, or sealed for another binding)"
    )]
    AuthenticationFailed {
        /// The key.
        key_name: String,
        /// The bound version.
        version: u32,
    },
    /// The decrypted artifact's configuration digest differs from the one recorded at
    /// sealing.
    #[error(
        "artifact opened under key {key_name} version {version} has digest {computed}, \
         but {recorded} was recorded when it was sealed"
    )]
    DigestMismatch {
        /// The key.
        key_name: String,
        /// The bound version.
        version: u32,
        /// The digest recorded at sealing.
        recorded: Digest,
        /// The digest of what decrypted.
        computed: Digest,
    },
    /// The ciphertext is not in the provider's format, or its own version marker
    /// disagrees with the binding.
    #[error("ciphertext under key {key_name} version {version} is malformed: {reason}")]
    Malformed {
        /// The key.
        key_name: String,
        /// The bound version.
        version: u32,
        /// What is wrong with it.
        reason: String,
    },
    /// The binding names another provider.
    #[error("key {key_name} is bound to provider {bound}, not to {provider}")]
    WrongProvider {
        /// This provider.
        provider: String,
        /// The provider in the binding.
        bound: String,
        /// The key.
        key_name: String,
    },
    /// The provider cannot do this.
    #[error("key provider {provider} cannot {operation} key {key_name}: {reason}")]
    Unsupported {
        /// The provider.
        provider: String,
        /// The key.
        key_name: String,
        /// The operation.
        operation: KeyOperation,
        /// Why.
        reason: String,
    },
    /// A request the provider refused as invalid, for a reason none of the other
    /// variants covers.
    #[error("key provider {provider} refused to {operation} key {key_name}: {reason}")]
    Refused {
        /// The provider.
        provider: String,
        /// The key.
        key_name: String,
        /// The operation.
        operation: KeyOperation,
        /// Why.
        reason: String,
    },
    /// The provider answered in a way this client does not understand.
    #[error(
        "key provider {provider} gave an unexpected answer to {operation} key {key_name}: {reason}"
    )]
    Protocol {
        /// The provider.
        provider: String,
        /// The key.
        key_name: String,
        /// The operation.
        operation: KeyOperation,
        /// What was unexpected.
        reason: String,
    },
    /// The keyring file cannot be used; it is left as it is.
    #[error("keyring file {}: {reason}", path.display())]
    Keyring {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A key name the provider does not accept.
    #[error(
        "invalid key name {key_name:?}: use 1 to 128 characters from A-Z, a-z, 0-9, '.', '_' and '-'"
    )]
    InvalidKeyName {
        /// The name given.
        key_name: String,
    },
}

/// Whether `name` is a key name every provider here accepts and that is safe in a
/// URL path segment.
pub(crate) fn check_key_name(name: &str) -> Result<(), KeyError> {
    let valid = !name.is_empty()
        && name.len() <= 128
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(KeyError::InvalidKeyName {
            key_name: name.chars().take(160).collect(),
        })
    }
}
