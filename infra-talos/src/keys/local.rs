//! The local keyring: the embedded default key provider.
//!
//! Keys live in one JSON file, `keyring.json`, under a directory the caller gives.
//! Each key has a random 128-bit identity, drawn at creation and never reused, so a
//! key deleted and recreated under the same name is another key. Each version holds
//! 256 bits of random key material; the key records its minimum decryption version.
//!
//! Artifacts are sealed with XChaCha20-Poly1305 under the key's latest version, with a
//! random 192-bit nonce per seal and the binding (provider, name, identity, version)
//! and the artifact digest as associated data. The ciphertext is
//! `"ikr1" || nonce || ciphertext-and-tag`.
//!
//! The file is written atomically (a temporary file in the same directory, synced, then
//! renamed over the old one) with mode 0600 on unix. A file that does not parse, or
//! that group or others may read or write, is refused with its path and left exactly
//! as it is. Writers in one process are serialised; the keyring is not meant to be
//! written by several processes at once.
//!
//! The file is small and read on every operation, so changes made by another
//! [`LocalKeyring`] on the same directory are seen at once; the provider methods do
//! this short file work on the calling task.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use chacha20poly1305::aead::{Aead as _, KeyInit as _, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use zeroize::Zeroizing;

use super::error::check_key_name;
use super::{
    KeyBinding, KeyError, KeyOperation, KeyProvider, Plaintext, SealedArtifact, UseCheck,
    associated_data, check_provider, check_version, verified,
};
use crate::digest::config_digest;

/// The provider name local bindings carry.
const PROVIDER: &str = "local";
/// The keyring file's name inside the directory.
const FILE_NAME: &str = "keyring.json";
/// The format marker at the top of the file.
const FORMAT: &str = "infra-talos-keyring/1";
/// The first bytes of every local ciphertext.
const MAGIC: &[u8; 4] = b"ikr1";
/// XChaCha20-Poly1305 nonce length.
const NONCE_LEN: usize = 24;
/// Poly1305 tag length.
const TAG_LEN: usize = 16;

/// A key as the keyring describes it: never its material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyInfo {
    /// The key's name.
    pub name: String,
    /// The key's identity (32 hex digits), never given to another key.
    pub identity: String,
    /// The version new seals use.
    pub latest_version: u32,
    /// The oldest version that may still decrypt.
    pub min_decryption_version: u32,
}

/// The local keyring (see the module documentation).
pub struct LocalKeyring {
    path: PathBuf,
    writer: Mutex<()>,
}

impl fmt::Debug for LocalKeyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalKeyring")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl LocalKeyring {
    /// Opens the keyring kept in `dir`, creating the directory (mode 0700 on unix) if
    /// it is missing. An existing keyring file is read and validated now; a missing
    /// one is an empty keyring, written on the first change.
    ///
    /// # Errors
    ///
    /// [`KeyError::Keyring`] when the directory cannot be created or the file cannot
    /// be read, does not parse, or is open to group or others.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, KeyError> {
        let dir = dir.as_ref();
        if !dir.exists() {
            let mut builder = fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            builder.create(dir).map_err(|err| KeyError::Keyring {
                path: dir.to_path_buf(),
                reason: format!("the keyring directory cannot be created: {err}"),
            })?;
        }
        let keyring = LocalKeyring {
            path: dir.join(FILE_NAME),
            writer: Mutex::new(()),
        };
        keyring.load()?;
        Ok(keyring)
    }

    /// The keyring file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates the key `name` with a fresh identity and version 1.
    ///
    /// # Errors
    ///
    /// [`KeyError::KeyExists`] when the name is taken, [`KeyError::InvalidKeyName`],
    /// or a keyring error.
    pub fn create_key(&self, name: &str) -> Result<KeyInfo, KeyError> {
        check_key_name(name)?;
        self.update(|file| {
            if file.keys.contains_key(name) {
                return Err(KeyError::KeyExists {
                    provider: PROVIDER.to_owned(),
                    key_name: name.to_owned(),
                });
            }
            let mut identity = [0u8; 16];
            random(&mut identity, name)?;
            let entry = KeyEntry {
                identity: hex(&identity),
                min_decryption_version: 1,
                versions: BTreeMap::from([(1, Material::random(name)?)]),
            };
            let info = entry.info(name);
            file.keys.insert(name.to_owned(), entry);
            Ok(info)
        })
    }

    /// Adds a new latest version to the key `name` and returns its number.
    ///
    /// # Errors
    ///
    /// [`KeyError::KeyNotFound`] or a keyring error.
    pub fn rotate_key(&self, name: &str) -> Result<u32, KeyError> {
        check_key_name(name)?;
        self.update(|file| {
            let entry = file.key_mut(name)?;
            let next = entry
                .latest()
                .checked_add(1)
                .ok_or_else(|| KeyError::Refused {
                    provider: PROVIDER.to_owned(),
                    key_name: name.to_owned(),
                    operation: KeyOperation::Rotate,
                    reason: "the key has no version numbers left".to_owned(),
                })?;
            entry.versions.insert(next, Material::random(name)?);
            Ok(next)
        })
    }

    /// Sets the oldest version of `name` that may still decrypt (1 to the latest
    /// version). Artifacts bound to older versions no longer open.
    ///
    /// # Errors
    ///
    /// [`KeyError::KeyNotFound`], [`KeyError::Refused`] for a version out of range, or
    /// a keyring error.
    pub fn set_min_decryption_version(&self, name: &str, version: u32) -> Result<(), KeyError> {
        check_key_name(name)?;
        self.update(|file| {
            let entry = file.key_mut(name)?;
            if version == 0 || version > entry.latest() {
                return Err(KeyError::Refused {
                    provider: PROVIDER.to_owned(),
                    key_name: name.to_owned(),
                    operation: KeyOperation::Configure,
                    reason: format!(
                        "minimum decryption version {version} is outside 1..={}",
                        entry.latest()
                    ),
                });
            }
            entry.min_decryption_version = version;
            Ok(())
        })
    }

    /// Deletes the key `name` and all its versions. Artifacts sealed under it never
    /// open again, even under a key later created with the same name.
    ///
    /// # Errors
    ///
    /// [`KeyError::KeyNotFound`] or a keyring error.
    pub fn delete_key(&self, name: &str) -> Result<(), KeyError> {
        check_key_name(name)?;
        self.update(|file| {
            file.key_mut(name)?;
            file.keys.remove(name);
            Ok(())
        })
    }

    /// Describes the key `name`.
    ///
    /// # Errors
    ///
    /// [`KeyError::KeyNotFound`] or a keyring error.
    pub fn key_info(&self, name: &str) -> Result<KeyInfo, KeyError> {
        check_key_name(name)?;
        let file = self.load()?;
        Ok(file.key(name)?.info(name))
    }

    /// The names of all keys, in order.
    ///
    /// # Errors
    ///
    /// A keyring error.
    pub fn key_names(&self) -> Result<Vec<String>, KeyError> {
        Ok(self.load()?.keys.keys().cloned().collect())
    }

    fn seal_now(&self, key_name: &str, plaintext: &[u8]) -> Result<SealedArtifact, KeyError> {
        check_key_name(key_name)?;
        let file = self.load()?;
        let entry = file.key(key_name)?;
        let version = entry.latest();
        let material = entry.material(key_name, version)?;
        let binding = KeyBinding {
            provider: PROVIDER.to_owned(),
            key_name: key_name.to_owned(),
            key_identity: entry.identity.clone(),
            version,
        };
        let digest = config_digest(plaintext);
        let aad = associated_data(&binding, &digest);
        let mut nonce = [0u8; NONCE_LEN];
        random(&mut nonce, key_name)?;
        let sealed = cipher(material)
            .encrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: plaintext,
                    aad: &aad,
                },
            )
            .map_err(|_| KeyError::Refused {
                provider: PROVIDER.to_owned(),
                key_name: key_name.to_owned(),
                operation: KeyOperation::Encrypt,
                reason: "the artifact is too large to seal".to_owned(),
            })?;
        let mut ciphertext = Vec::with_capacity(MAGIC.len() + NONCE_LEN + sealed.len());
        ciphertext.extend_from_slice(MAGIC);
        ciphertext.extend_from_slice(&nonce);
        ciphertext.extend_from_slice(&sealed);
        Ok(SealedArtifact {
            binding,
            ciphertext,
            digest,
        })
    }

    fn open_now(&self, sealed: &SealedArtifact) -> Result<Plaintext, KeyError> {
        let (file, _) = self.check_now(&sealed.binding)?;
        let binding = &sealed.binding;
        let entry = file.key(&binding.key_name)?;
        let material = entry.material(&binding.key_name, binding.version)?;
        let body = sealed
            .ciphertext
            .strip_prefix(MAGIC.as_slice())
            .filter(|rest| rest.len() >= NONCE_LEN + TAG_LEN)
            .ok_or_else(|| KeyError::Malformed {
                key_name: binding.key_name.clone(),
                version: binding.version,
                reason: "not a local keyring ciphertext".to_owned(),
            })?;
        let (nonce, body) = body.split_at(NONCE_LEN);
        let nonce: [u8; NONCE_LEN] = nonce.try_into().map_err(|_| KeyError::Malformed {
            key_name: binding.key_name.clone(),
            version: binding.version,
            reason: "the nonce is cut short".to_owned(),
        })?;
        let aad = associated_data(binding, &sealed.digest);
        let bytes = cipher(material)
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: body,
                    aad: &aad,
                },
            )
            .map_err(|_| KeyError::AuthenticationFailed {
                key_name: binding.key_name.clone(),
                version: binding.version,
            })?;
        verified(sealed, bytes)
    }

    fn check_now(&self, binding: &KeyBinding) -> Result<(KeyringFile, UseCheck), KeyError> {
        check_provider(PROVIDER, binding)?;
        check_key_name(&binding.key_name)?;
        let file = self.load()?;
        let entry = file.key(&binding.key_name)?;
        if entry.identity != binding.key_identity {
            return Err(KeyError::IdentityMismatch {
                key_name: binding.key_name.clone(),
                version: binding.version,
                bound: binding.key_identity.clone(),
                found: entry.identity.clone(),
            });
        }
        check_version(binding, entry.min_decryption_version, entry.latest())?;
        entry.material(&binding.key_name, binding.version)?;
        let check = UseCheck {
            binding: binding.clone(),
            version: binding.version,
            min_decryption_version: entry.min_decryption_version,
            latest_version: entry.latest(),
            artifact_digest: None,
        };
        Ok((file, check))
    }

    fn load(&self) -> Result<KeyringFile, KeyError> {
        let bytes = match fs::read(&self.path) {
            Ok(bytes) => Zeroizing::new(bytes),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                return Ok(KeyringFile::empty());
            }
            Err(err) => return Err(self.error(format!("cannot be read: {err}"))),
        };
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = fs::metadata(&self.path)
                .map_err(|err| self.error(format!("cannot be read: {err}")))?
                .permissions()
                .mode();
            if mode & 0o077 != 0 {
                return Err(self.error(format!(
                    "is open to group or others (mode {:04o}); restrict it to 0600",
                    mode & 0o7777
                )));
            }
        }
        let file: KeyringFile = serde_json::from_slice(&bytes).map_err(|err| {
            // Only the kind and position: serde's own text may quote the file.
            let kind = match err.classify() {
                serde_json::error::Category::Io => "cannot be read",
                serde_json::error::Category::Syntax => "is not valid JSON",
                serde_json::error::Category::Data => "is not a keyring in the expected form",
                serde_json::error::Category::Eof => "ends before the keyring is complete",
            };
            self.error(format!(
                "{kind} (line {}, column {}); the file is left unchanged",
                err.line(),
                err.column()
            ))
        })?;
        file.validate()
            .map_err(|reason| self.error(format!("{reason}; the file is left unchanged")))?;
        Ok(file)
    }

    /// Loads, changes and atomically rewrites the file, one writer at a time. Nothing
    /// is written when loading or the change fails.
    fn update<T>(
        &self,
        change: impl FnOnce(&mut KeyringFile) -> Result<T, KeyError>,
    ) -> Result<T, KeyError> {
        let _writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let mut file = self.load()?;
        let out = change(&mut file)?;
        self.store(&file)?;
        Ok(out)
    }

    fn store(&self, file: &KeyringFile) -> Result<(), KeyError> {
        let json = Zeroizing::new(
            serde_json::to_vec_pretty(file)
                .map_err(|_| self.error("cannot be encoded".to_owned()))?,
        );
        let dir = self.path.parent().unwrap_or_else(|| Path::new("."));
        let mut suffix = [0u8; 8];
        random(&mut suffix, "(keyring file)")?;
        let temp = dir.join(format!(".{FILE_NAME}.{}.tmp", hex(&suffix)));
        let written = (|| -> io::Result<()> {
            let mut options = OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut out = options.open(&temp)?;
            out.write_all(&json)?;
            out.write_all(b"\n")?;
            out.sync_all()?;
            drop(out);
            fs::rename(&temp, &self.path)?;
            #[cfg(unix)]
            fs::File::open(dir)?.sync_all()?;
            Ok(())
        })();
        written.map_err(|err| {
            let _ = fs::remove_file(&temp);
            self.error(format!("cannot be written: {err}"))
        })
    }

    fn error(&self, reason: String) -> KeyError {
        KeyError::Keyring {
            path: self.path.clone(),
            reason,
        }
    }
}

#[async_trait::async_trait]
impl KeyProvider for LocalKeyring {
    fn provider(&self) -> &str {
        PROVIDER
    }

    async fn seal(&self, key_name: &str, plaintext: &[u8]) -> Result<SealedArtifact, KeyError> {
        self.seal_now(key_name, plaintext)
    }

    async fn open(&self, sealed: &SealedArtifact) -> Result<Plaintext, KeyError> {
        self.open_now(sealed)
    }

    async fn check(&self, binding: &KeyBinding) -> Result<UseCheck, KeyError> {
        self.check_now(binding).map(|(_, check)| check)
    }

    async fn rotate(&self, key_name: &str) -> Result<u32, KeyError> {
        self.rotate_key(key_name)
    }
}

/// The keyring file's contents. No `Debug`: it holds key material.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyringFile {
    format: String,
    keys: BTreeMap<String, KeyEntry>,
}

impl KeyringFile {
    fn empty() -> Self {
        KeyringFile {
            format: FORMAT.to_owned(),
            keys: BTreeMap::new(),
        }
    }

    fn validate(&self) -> Result<(), String> {
        if self.format != FORMAT {
            return Err(format!("is not in the keyring format {FORMAT}"));
        }
        for (name, entry) in &self.keys {
            if check_key_name(name).is_err() {
                return Err("holds a key with an invalid name".to_owned());
            }
            if entry.identity.len() != 32
                || !entry
                    .identity
                    .bytes()
                    .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            {
                return Err(format!(
                    "key {name} has an identity that is not 32 hex digits"
                ));
            }
            if entry.versions.is_empty() || entry.versions.contains_key(&0) {
                return Err(format!("key {name} has no versions, or a version 0"));
            }
            if entry.min_decryption_version == 0 || entry.min_decryption_version > entry.latest() {
                return Err(format!(
                    "key {name} has a minimum decryption version outside its versions"
                ));
            }
        }
        Ok(())
    }

    fn key(&self, name: &str) -> Result<&KeyEntry, KeyError> {
        self.keys.get(name).ok_or_else(|| not_found(name))
    }

    fn key_mut(&mut self, name: &str) -> Result<&mut KeyEntry, KeyError> {
        self.keys.get_mut(name).ok_or_else(|| not_found(name))
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyEntry {
    identity: String,
    min_decryption_version: u32,
    versions: BTreeMap<u32, Material>,
}

impl KeyEntry {
    fn latest(&self) -> u32 {
        self.versions.keys().next_back().copied().unwrap_or(0)
    }

    fn material(&self, name: &str, version: u32) -> Result<&Material, KeyError> {
        self.versions
            .get(&version)
            .ok_or_else(|| KeyError::VersionUnavailable {
                key_name: name.to_owned(),
                version,
                reason: super::VersionUnavailable::Missing {
                    latest_version: self.latest(),
                },
            })
    }

    fn info(&self, name: &str) -> KeyInfo {
        KeyInfo {
            name: name.to_owned(),
            identity: self.identity.clone(),
            latest_version: self.latest(),
            min_decryption_version: self.min_decryption_version,
        }
    }
}

/// 256 bits of key material, wiped on drop, stored as 64 hex digits.
struct Material(Zeroizing<[u8; 32]>);

impl Material {
    fn random(key_name: &str) -> Result<Self, KeyError> {
        let mut bytes = Zeroizing::new([0u8; 32]);
        random(bytes.as_mut_slice(), key_name)?;
        Ok(Material(bytes))
    }
}

impl Serialize for Material {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = Zeroizing::new(hex(self.0.as_slice()));
        serializer.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for Material {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Zeroizing::new(String::deserialize(deserializer)?);
        let mut bytes = Zeroizing::new([0u8; 32]);
        if text.len() != 64 || !unhex(text.as_bytes(), bytes.as_mut_slice()) {
            return Err(serde::de::Error::custom(
                "key material is not 64 hex digits",
            ));
        }
        Ok(Material(bytes))
    }
}

fn cipher(material: &Material) -> XChaCha20Poly1305 {
    XChaCha20Poly1305::new(&chacha20poly1305::Key::from(*material.0))
}

fn not_found(name: &str) -> KeyError {
    KeyError::KeyNotFound {
        provider: PROVIDER.to_owned(),
        key_name: name.to_owned(),
    }
}

fn random(buf: &mut [u8], key_name: &str) -> Result<(), KeyError> {
    getrandom::fill(buf).map_err(|_| KeyError::Unavailable {
        provider: PROVIDER.to_owned(),
        key_name: key_name.to_owned(),
        reason: "the system random source failed".to_owned(),
    })
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

fn unhex(text: &[u8], out: &mut [u8]) -> bool {
    fn value(digit: u8) -> Option<u8> {
        match digit {
            b'0'..=b'9' => Some(digit - b'0'),
            b'a'..=b'f' => Some(digit - b'a' + 10),
            _ => None,
        }
    }
    if text.len() != out.len() * 2 {
        return false;
    }
    for (byte, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
        match (value(pair[0]), value(pair[1])) {
            (Some(high), Some(low)) => *byte = (high << 4) | low,
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip() {
        let bytes = [0u8, 1, 0xab, 0xff];
        let text = hex(&bytes);
        assert_eq!(text, "0001abff");
        let mut back = [0u8; 4];
        assert!(unhex(text.as_bytes(), &mut back));
        assert_eq!(back, bytes);
        assert!(!unhex(b"zz", &mut [0u8; 1]));
        assert!(!unhex(b"AB", &mut [0u8; 1]));
    }

    #[test]
    fn keyring_lifecycle() {
        let dir = tempfile::tempdir().expect("temp dir");
        let keyring = LocalKeyring::open(dir.path().join("keys")).expect("open");
        assert!(keyring.key_names().expect("names").is_empty());
        let info = keyring.create_key("artifacts").expect("create");
        assert_eq!(info.latest_version, 1);
        assert_eq!(info.identity.len(), 32);
        assert!(matches!(
            keyring.create_key("artifacts"),
            Err(KeyError::KeyExists { .. })
        ));
        assert_eq!(keyring.rotate_key("artifacts").expect("rotate"), 2);
        keyring
            .set_min_decryption_version("artifacts", 2)
            .expect("min version");
        assert!(matches!(
            keyring.set_min_decryption_version("artifacts", 3),
            Err(KeyError::Refused { .. })
        ));
        let info = keyring.key_info("artifacts").expect("info");
        assert_eq!((info.latest_version, info.min_decryption_version), (2, 2));
        // Reopening reads the same keyring.
        let again = LocalKeyring::open(dir.path().join("keys")).expect("reopen");
        assert_eq!(again.key_info("artifacts").expect("info"), info);
        keyring.delete_key("artifacts").expect("delete");
        assert!(matches!(
            keyring.key_info("artifacts"),
            Err(KeyError::KeyNotFound { .. })
        ));
        assert!(matches!(
            keyring.create_key("../x"),
            Err(KeyError::InvalidKeyName { .. })
        ));
        // No temporary files are left behind.
        let leftovers: Vec<_> = fs::read_dir(dir.path().join("keys"))
            .expect("list")
            .map(|entry| entry.expect("entry").file_name())
            .filter(|name| name != FILE_NAME)
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn material_is_not_in_debug_output() {
        let dir = tempfile::tempdir().expect("temp dir");
        let keyring = LocalKeyring::open(dir.path()).expect("open");
        keyring.create_key("k").expect("create");
        let text = fs::read_to_string(keyring.path()).expect("read");
        let file: serde_json::Value = serde_json::from_str(&text).expect("json");
        let material = file["keys"]["k"]["versions"]["1"]
            .as_str()
            .expect("material")
            .to_owned();
        assert_eq!(material.len(), 64);
        let shown = format!("{keyring:?} {:?}", keyring.key_info("k"));
        assert!(!shown.contains(&material), "{shown}");
    }
}
