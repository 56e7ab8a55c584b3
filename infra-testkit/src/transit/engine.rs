//! The stand-in's in-memory Transit engine: keys, tokens, the seal, and how one
//! request is answered.

use std::collections::{BTreeMap, HashMap, HashSet};

use aes_gcm::Aes256Gcm;
use aes_gcm::aead::{Aead as _, KeyInit as _, Payload};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

/// One Transit operation, as a token's policy allows or denies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransitOperation {
    /// `GET /v1/{mount}/keys/{name}`.
    ReadKey,
    /// `POST /v1/{mount}/keys/{name}`, and the upsert of a missing key on encrypt.
    CreateKey,
    /// `POST /v1/{mount}/keys/{name}/rotate`.
    RotateKey,
    /// `POST /v1/{mount}/keys/{name}/config`.
    ConfigureKey,
    /// `DELETE /v1/{mount}/keys/{name}`.
    DeleteKey,
    /// `POST /v1/{mount}/encrypt/{name}`.
    Encrypt,
    /// `POST /v1/{mount}/decrypt/{name}`.
    Decrypt,
}

impl TransitOperation {
    /// Every operation.
    pub const ALL: [TransitOperation; 7] = [
        Self::ReadKey,
        Self::CreateKey,
        Self::RotateKey,
        Self::ConfigureKey,
        Self::DeleteKey,
        Self::Encrypt,
        Self::Decrypt,
    ];
}

/// What a token may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    allowed: HashSet<TransitOperation>,
}

impl Policy {
    /// Everything (the root token's policy).
    #[must_use]
    pub fn all() -> Self {
        Policy {
            allowed: TransitOperation::ALL.into_iter().collect(),
        }
    }

    /// Nothing.
    #[must_use]
    pub fn none() -> Self {
        Policy {
            allowed: HashSet::new(),
        }
    }

    /// An executor's policy: read keys, encrypt and decrypt; never create, rotate,
    /// configure or delete.
    #[must_use]
    pub fn executor() -> Self {
        Self::none()
            .allow(TransitOperation::ReadKey)
            .allow(TransitOperation::Encrypt)
            .allow(TransitOperation::Decrypt)
    }

    /// This policy with `operation` allowed.
    #[must_use]
    pub fn allow(mut self, operation: TransitOperation) -> Self {
        self.allowed.insert(operation);
        self
    }

    /// This policy with `operation` denied.
    #[must_use]
    pub fn deny(mut self, operation: TransitOperation) -> Self {
        self.allowed.remove(&operation);
        self
    }

    /// Whether `operation` is allowed.
    #[must_use]
    pub fn allows(&self, operation: TransitOperation) -> bool {
        self.allowed.contains(&operation)
    }
}

/// One request as the stand-in recorded it: never its body or headers' values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// The HTTP method.
    pub method: String,
    /// The request path.
    pub path: String,
    /// The status answered.
    pub status: u16,
    /// The `X-Vault-Namespace` header, if sent.
    pub namespace: Option<String>,
}

/// One key version's material. No `Debug`.
struct Version {
    material: [u8; 32],
    created: u64,
}

/// One key. No `Debug`.
struct Key {
    versions: BTreeMap<u32, Version>,
    min_decryption_version: u32,
    min_encryption_version: u32,
    deletion_allowed: bool,
}

impl Key {
    fn latest(&self) -> u32 {
        self.versions.keys().next_back().copied().unwrap_or(0)
    }

    fn describe(&self, name: &str) -> Value {
        let keys: serde_json::Map<String, Value> = self
            .versions
            .iter()
            .map(|(version, entry)| (version.to_string(), json!(entry.created)))
            .collect();
        json!({
            "name": name,
            "type": "aes256-gcm96",
            "latest_version": self.latest(),
            "min_decryption_version": self.min_decryption_version,
            "min_encryption_version": self.min_encryption_version,
            "min_available_version": 0,
            "keys": keys,
            "deletion_allowed": self.deletion_allowed,
            "derived": false,
            "exportable": false,
            "allow_plaintext_backup": false,
            "convergent_encryption": false,
            "supports_encryption": true,
            "supports_decryption": true,
            "supports_derivation": true,
            "supports_signing": false,
            "imported_key": false,
            "auto_rotate_period": 0,
        })
    }
}

/// An answer: status and JSON body (`None`: no body, 204).
pub(crate) type Answer = (u16, Option<Value>);

/// The engine's state.
pub(crate) struct Engine {
    pub(crate) mount: String,
    pub(crate) namespace: Option<String>,
    pub(crate) sealed: bool,
    pub(crate) tokens: HashMap<String, Policy>,
    keys: HashMap<String, Key>,
    next_creation_time: u64,
    pub(crate) requests: Vec<RequestRecord>,
}

fn errors(status: u16, messages: &[&str]) -> Answer {
    (status, Some(json!({ "errors": messages })))
}

fn data(value: Value) -> Answer {
    (
        200,
        Some(json!({
            "request_id": "00000000-0000-0000-0000-000000000000",
            "lease_id": "",
            "renewable": false,
            "lease_duration": 0,
            "data": value,
            "wrap_info": null,
            "warnings": null,
            "auth": null,
        })),
    )
}

fn random(buf: &mut [u8]) {
    // A test server: a failing system random source is a broken machine.
    getrandom::fill(buf).expect("the system random source failed");
}

impl Engine {
    pub(crate) fn new(
        mount: String,
        namespace: Option<String>,
        root_token: String,
        first_creation_time: u64,
    ) -> Self {
        Engine {
            mount,
            namespace,
            sealed: false,
            tokens: HashMap::from([(root_token, Policy::all())]),
            keys: HashMap::new(),
            next_creation_time: first_creation_time,
            requests: Vec::new(),
        }
    }

    /// Creates `name` with version 1 and a creation time later than any before.
    pub(crate) fn create_key(&mut self, name: &str) -> bool {
        if self.keys.contains_key(name) {
            return false;
        }
        let version = self.new_version();
        self.keys.insert(
            name.to_owned(),
            Key {
                versions: BTreeMap::from([(1, version)]),
                min_decryption_version: 1,
                min_encryption_version: 0,
                deletion_allowed: false,
            },
        );
        true
    }

    fn new_version(&mut self) -> Version {
        let mut material = [0u8; 32];
        random(&mut material);
        let created = self.next_creation_time;
        self.next_creation_time += 1;
        Version { material, created }
    }

    pub(crate) fn rotate_key(&mut self, name: &str) -> Option<u32> {
        let version = self.new_version();
        let key = self.keys.get_mut(name)?;
        let next = key.latest() + 1;
        key.versions.insert(next, version);
        Some(next)
    }

    pub(crate) fn set_min_decryption_version(&mut self, name: &str, version: u32) -> bool {
        match self.keys.get_mut(name) {
            Some(key) if version >= 1 && version <= key.latest() => {
                key.min_decryption_version = version;
                true
            }
            _ => false,
        }
    }

    pub(crate) fn delete_key(&mut self, name: &str) -> bool {
        self.keys.remove(name).is_some()
    }

    pub(crate) fn latest_version(&self, name: &str) -> Option<u32> {
        self.keys.get(name).map(Key::latest)
    }

    pub(crate) fn creation_time(&self, name: &str) -> Option<u64> {
        self.keys
            .get(name)
            .and_then(|key| key.versions.get(&1))
            .map(|version| version.created)
    }

    /// Answers one request.
    pub(crate) fn answer(
        &mut self,
        method: &str,
        path: &str,
        token: Option<&str>,
        namespace: Option<&str>,
        body: &[u8],
    ) -> Answer {
        if self.sealed {
            return errors(503, &["Vault is sealed"]);
        }
        let no_route = || {
            let route = path.trim_start_matches("/v1/");
            (
                404,
                Some(json!({
                    "errors": [format!("no handler for route \"{route}\". route entry not found.")]
                })),
            )
        };
        let Some(rest) = path
            .strip_prefix("/v1/")
            .and_then(|rest| rest.strip_prefix(self.mount.as_str()))
            .and_then(|rest| rest.strip_prefix('/'))
        else {
            return no_route();
        };
        let segments: Vec<&str> = rest.split('/').collect();
        let (operation, name) = match (method, segments.as_slice()) {
            ("GET", ["keys", name]) => (TransitOperation::ReadKey, *name),
            ("POST" | "PUT", ["keys", name]) => (TransitOperation::CreateKey, *name),
            ("DELETE", ["keys", name]) => (TransitOperation::DeleteKey, *name),
            ("POST" | "PUT", ["keys", name, "rotate"]) => (TransitOperation::RotateKey, *name),
            ("POST" | "PUT", ["keys", name, "config"]) => (TransitOperation::ConfigureKey, *name),
            ("POST" | "PUT", ["encrypt", name]) => (TransitOperation::Encrypt, *name),
            ("POST" | "PUT", ["decrypt", name]) => (TransitOperation::Decrypt, *name),
            (_, ["keys" | "encrypt" | "decrypt", ..]) => {
                return errors(405, &["unsupported operation"]);
            }
            _ => return no_route(),
        };
        if name.is_empty() {
            return no_route();
        }
        // A token is valid only in its own namespace.
        let policy = match token.and_then(|token| self.tokens.get(token)) {
            Some(policy) if namespace == self.namespace.as_deref() => policy.clone(),
            _ => return errors(403, &["permission denied"]),
        };
        // Encrypting under a missing key creates it, which needs create.
        let needs_create = operation == TransitOperation::Encrypt && !self.keys.contains_key(name);
        if !policy.allows(operation)
            || (needs_create && !policy.allows(TransitOperation::CreateKey))
        {
            return errors(403, &["permission denied"]);
        }
        let body: Value = if body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            match serde_json::from_slice(body) {
                Ok(value @ Value::Object(_)) => value,
                _ => return errors(400, &["failed to parse JSON input"]),
            }
        };
        match operation {
            TransitOperation::ReadKey => match self.keys.get(name) {
                Some(key) => data(key.describe(name)),
                None => (404, Some(json!({ "errors": [] }))),
            },
            TransitOperation::CreateKey => {
                let key_type = body
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("aes256-gcm96");
                if key_type != "aes256-gcm96" {
                    return errors(400, &["unsupported key type for this server"]);
                }
                self.create_key(name);
                self.keys
                    .get(name)
                    .map_or((204, None), |key| data(key.describe(name)))
            }
            TransitOperation::DeleteKey => match self.keys.get(name) {
                Some(key) if !key.deletion_allowed => {
                    errors(400, &["deletion is not allowed for this key"])
                }
                Some(_) => {
                    self.keys.remove(name);
                    (204, None)
                }
                None => (204, None),
            },
            TransitOperation::RotateKey => match self.rotate_key(name) {
                Some(_) => self
                    .keys
                    .get(name)
                    .map_or((204, None), |key| data(key.describe(name))),
                None => errors(400, &["encryption key not found"]),
            },
            TransitOperation::ConfigureKey => self.configure(name, &body),
            TransitOperation::Encrypt => {
                if needs_create {
                    self.create_key(name);
                }
                self.encrypt(name, &body)
            }
            TransitOperation::Decrypt => self.decrypt(name, &body),
        }
    }

    fn configure(&mut self, name: &str, body: &Value) -> Answer {
        let Some(key) = self.keys.get_mut(name) else {
            return errors(400, &["encryption key not found"]);
        };
        let latest = key.latest();
        let number = |field: &str| body.get(field).and_then(Value::as_u64);
        if let Some(min) = number("min_decryption_version").filter(|min| *min > 0) {
            match u32::try_from(min) {
                Ok(min) if min <= latest => key.min_decryption_version = min,
                _ => {
                    return errors(
                        400,
                        &[
                            "cannot set min decryption version to a value greater than the latest version",
                        ],
                    );
                }
            }
        }
        if let Some(min) = number("min_encryption_version") {
            match u32::try_from(min) {
                Ok(min) if min <= latest => key.min_encryption_version = min,
                _ => {
                    return errors(
                        400,
                        &[
                            "cannot set min encryption version to a value greater than the latest version",
                        ],
                    );
                }
            }
        }
        if let Some(allowed) = body.get("deletion_allowed").and_then(Value::as_bool) {
            key.deletion_allowed = allowed;
        }
        data(key.describe(name))
    }

    fn encrypt(&mut self, name: &str, body: &Value) -> Answer {
        let Some(key) = self.keys.get(name) else {
            return errors(400, &["encryption key not found"]);
        };
        let Some(Ok(plaintext)) = body
            .get("plaintext")
            .and_then(Value::as_str)
            .map(|text| BASE64.decode(text))
        else {
            return errors(400, &["failed to base64-decode plaintext"]);
        };
        let Ok(aad) = associated_data(body) else {
            return errors(400, &["failed to base64-decode associated_data"]);
        };
        let latest = key.latest();
        let version = match body.get("key_version").and_then(Value::as_u64) {
            None | Some(0) => latest,
            Some(version) => match u32::try_from(version) {
                Ok(version) if version <= latest => version,
                _ => return errors(400, &["invalid key version"]),
            },
        };
        if version < key.min_encryption_version {
            return errors(
                400,
                &[
                    "requested version for encryption is less than the minimum encryption key version",
                ],
            );
        }
        let Some(entry) = key.versions.get(&version) else {
            return errors(400, &["invalid key version"]);
        };
        let mut nonce = [0u8; 12];
        random(&mut nonce);
        let cipher = Aes256Gcm::new(&entry.material.into());
        let Ok(sealed) = cipher.encrypt(
            &nonce.into(),
            Payload {
                msg: &plaintext,
                aad: &aad,
            },
        ) else {
            return errors(400, &["failed to encrypt"]);
        };
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        data(json!({
            "ciphertext": format!("vault:v{version}:{}", BASE64.encode(out)),
            "key_version": version,
        }))
    }

    fn decrypt(&mut self, name: &str, body: &Value) -> Answer {
        let Some(key) = self.keys.get(name) else {
            return errors(400, &["encryption key not found"]);
        };
        let Some(ciphertext) = body.get("ciphertext").and_then(Value::as_str) else {
            return errors(400, &["missing ciphertext to decrypt"]);
        };
        let Ok(aad) = associated_data(body) else {
            return errors(400, &["failed to base64-decode associated_data"]);
        };
        let Some(rest) = ciphertext.strip_prefix("vault:") else {
            return errors(400, &["invalid ciphertext: no prefix"]);
        };
        let Some((version, encoded)) = rest.strip_prefix('v').and_then(|rest| rest.split_once(':'))
        else {
            return errors(400, &["invalid ciphertext: wrong number of fields"]);
        };
        let Ok(version) = version.parse::<u32>() else {
            return errors(
                400,
                &["invalid ciphertext: version number could not be decoded"],
            );
        };
        if version < key.min_decryption_version {
            return errors(
                400,
                &["ciphertext or signature version is disallowed by policy (too old)"],
            );
        }
        let Some(entry) = key.versions.get(&version) else {
            return errors(400, &["invalid key version"]);
        };
        let Ok(raw) = BASE64.decode(encoded) else {
            return errors(400, &["invalid ciphertext: could not decode base64"]);
        };
        if raw.len() < 12 + 16 {
            return errors(400, &["invalid ciphertext: data too short"]);
        }
        let (nonce, sealed) = raw.split_at(12);
        let Ok(nonce) = <[u8; 12]>::try_from(nonce) else {
            return errors(400, &["invalid ciphertext: data too short"]);
        };
        let cipher = Aes256Gcm::new(&entry.material.into());
        match cipher.decrypt(
            &nonce.into(),
            Payload {
                msg: sealed,
                aad: &aad,
            },
        ) {
            Ok(plaintext) => data(json!({ "plaintext": BASE64.encode(plaintext) })),
            Err(_) => errors(400, &["cipher: message authentication failed"]),
        }
    }
}

fn associated_data(body: &Value) -> Result<Vec<u8>, base64::DecodeError> {
    match body.get("associated_data").and_then(Value::as_str) {
        Some(text) => BASE64.decode(text),
        None => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> Engine {
        let mut engine = Engine::new("transit".to_owned(), None, "root".to_owned(), 100);
        assert!(engine.create_key("k"));
        engine
    }

    fn post(engine: &mut Engine, path: &str, body: &Value) -> Answer {
        engine.answer(
            "POST",
            path,
            Some("root"),
            None,
            body.to_string().as_bytes(),
        )
    }

    fn field(answer: &Answer, name: &str) -> String {
        answer.1.as_ref().expect("body")["data"][name]
            .as_str()
            .expect("field")
            .to_owned()
    }

    #[test]
    fn encrypt_then_decrypt_with_associated_data() {
        let mut engine = engine();
        let aad = BASE64.encode(b"bound");
        let sealed = post(
            &mut engine,
            "/v1/transit/encrypt/k",
            &json!({"plaintext": BASE64.encode(b"hello"), "associated_data": aad}),
        );
        assert_eq!(sealed.0, 200);
        let ciphertext = field(&sealed, "ciphertext");
        assert!(ciphertext.starts_with("vault:v1:"), "{ciphertext}");
        let opened = post(
            &mut engine,
            "/v1/transit/decrypt/k",
            &json!({"ciphertext": ciphertext, "associated_data": aad}),
        );
        assert_eq!(field(&opened, "plaintext"), BASE64.encode(b"hello"));
        let other = post(
            &mut engine,
            "/v1/transit/decrypt/k",
            &json!({"ciphertext": ciphertext, "associated_data": BASE64.encode(b"other")}),
        );
        assert_eq!(
            other,
            errors(400, &["cipher: message authentication failed"])
        );
        engine.rotate_key("k");
        engine.set_min_decryption_version("k", 2);
        let too_old = post(
            &mut engine,
            "/v1/transit/decrypt/k",
            &json!({"ciphertext": ciphertext, "associated_data": aad}),
        );
        assert_eq!(
            too_old,
            errors(
                400,
                &["ciphertext or signature version is disallowed by policy (too old)"]
            )
        );
    }

    #[test]
    fn tokens_seal_and_recreation() {
        let mut engine = engine();
        let read = |engine: &mut Engine, token| {
            engine.answer("GET", "/v1/transit/keys/k", Some(token), None, b"")
        };
        assert_eq!(read(&mut engine, "root").0, 200);
        assert_eq!(
            read(&mut engine, "nobody"),
            errors(403, &["permission denied"])
        );
        engine.tokens.insert(
            "reader".to_owned(),
            Policy::none().allow(TransitOperation::ReadKey),
        );
        assert_eq!(read(&mut engine, "reader").0, 200);
        let upsert = engine.answer(
            "POST",
            "/v1/transit/encrypt/new",
            Some("reader"),
            None,
            br#"{"plaintext": ""}"#,
        );
        assert_eq!(upsert.0, 403);
        assert_eq!(engine.latest_version("new"), None);
        engine.sealed = true;
        assert_eq!(read(&mut engine, "root"), errors(503, &["Vault is sealed"]));
        engine.sealed = false;
        let first = engine.creation_time("k");
        assert!(engine.delete_key("k"));
        assert_eq!(read(&mut engine, "root").0, 404);
        assert!(engine.create_key("k"));
        assert!(engine.creation_time("k") > first);
    }
}
