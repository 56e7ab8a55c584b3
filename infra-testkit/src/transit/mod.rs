//! An OpenBao / Vault Transit stand-in for tests: a real HTTP server on `127.0.0.1`
//! serving the documented subset of the Transit secrets engine from memory.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use infra_testkit::transit::{Policy, TransitOperation, TransitServer};
//!
//! let server = TransitServer::start().await?;
//! server.create_key("artifacts");
//! server.add_token("executor", Policy::executor());
//! server.add_token("no-decrypt", Policy::executor().deny(TransitOperation::Decrypt));
//! // ... point a client at `server.address()` with `server.root_token()` ...
//! server.seal(); // every request now answers 503 "Vault is sealed"
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! Served (under `/v1/{mount}/`, mount `transit` unless configured):
//!
//! | request | does |
//! |---|---|
//! | `GET keys/{name}` | the key's description; 404 `{"errors":[]}` when missing |
//! | `POST keys/{name}` | creates an `aes256-gcm96` key (no change when it exists) |
//! | `DELETE keys/{name}` | deletes it, if its `deletion_allowed` is set |
//! | `POST keys/{name}/rotate` | adds a version |
//! | `POST keys/{name}/config` | `min_decryption_version`, `min_encryption_version`, `deletion_allowed` |
//! | `POST encrypt/{name}` | `plaintext`, `key_version`, `associated_data` → `vault:vN:` ciphertext; a missing key is created when the token may create keys, as Transit does |
//! | `POST decrypt/{name}` | `ciphertext`, `associated_data` → `plaintext` |
//!
//! Encryption is real AES-256-GCM per key version (a random 96-bit nonce before the
//! ciphertext and tag, base64 after the `vault:vN:` prefix). Tokens go in
//! `X-Vault-Token`: a missing or unknown token, a token sent with another namespace
//! than the server's, or an operation the token's [`Policy`] denies answers 403
//! `{"errors":["permission denied"]}`. While sealed every request answers 503
//! `{"errors":["Vault is sealed"]}`. Refusals answer 400 with Transit's messages (a
//! version below the minimum decryption version: `ciphertext or signature version is
//! disallowed by policy (too old)`; a failed tag: `cipher: message authentication
//! failed`).
//!
//! Creation times are unix seconds from a counter that advances one second per new
//! key version, so a key deleted and recreated under the same name always has a later
//! creation time for version 1, as it would on a real server after a second or more.
//!
//! The server records each request's method, path, status and namespace, never a
//! body or a token. Dropping the [`TransitServer`] stops it;
//! [`TransitServer::shutdown`] stops it and waits.

use std::io;
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard, PoisonError};

use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};

mod engine;

use crate::http::Running;
use engine::Engine;
pub use engine::{Policy, RequestRecord, TransitOperation};

/// The largest request body served (1 MiB).
const MAX_BODY: usize = 1 << 20;

/// How the stand-in starts.
#[derive(Debug, Clone)]
pub struct TransitOptions {
    /// The engine's mount path (default `transit`).
    pub mount: String,
    /// The namespace every token belongs to; requests must send it as
    /// `X-Vault-Namespace` (default none: requests must not send one).
    pub namespace: Option<String>,
    /// The root token, allowed everything (default a random one).
    pub root_token: Option<String>,
    /// The creation time, in unix seconds, of the first key version (default
    /// 1 750 000 000).
    pub first_creation_time: u64,
}

impl Default for TransitOptions {
    fn default() -> Self {
        TransitOptions {
            mount: "transit".to_owned(),
            namespace: None,
            root_token: None,
            first_creation_time: 1_750_000_000,
        }
    }
}

/// A running stand-in (see the module documentation).
pub struct TransitServer {
    root_token: String,
    mount: String,
    running: Running<Engine>,
}

impl std::fmt::Debug for TransitServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransitServer")
            .field("address", &self.running.socket_addr())
            .field("mount", &self.mount)
            .finish_non_exhaustive()
    }
}

impl TransitServer {
    /// Starts a stand-in with the default options on a free port of `127.0.0.1`.
    ///
    /// # Errors
    ///
    /// When no port can be bound.
    pub async fn start() -> io::Result<Self> {
        Self::start_with(TransitOptions::default()).await
    }

    /// Starts a stand-in with `options` on a free port of `127.0.0.1`.
    ///
    /// # Errors
    ///
    /// When no port can be bound.
    pub async fn start_with(options: TransitOptions) -> io::Result<Self> {
        let root_token = options.root_token.unwrap_or_else(|| {
            let mut bytes = [0u8; 12];
            let _ = getrandom::fill(&mut bytes);
            let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
            format!("s.{hex}")
        });
        let mount = options.mount.trim_matches('/').to_owned();
        let engine = Engine::new(
            mount.clone(),
            options.namespace,
            root_token.clone(),
            options.first_creation_time,
        );
        let running = Running::start(
            0,
            |_| engine,
            |engine, request| async move { answer(&engine, request).await },
        )
        .await?;
        Ok(TransitServer {
            root_token,
            mount,
            running,
        })
    }

    /// The base address, `http://127.0.0.1:PORT`.
    #[must_use]
    pub fn address(&self) -> String {
        self.running.address()
    }

    /// The bound socket address.
    #[must_use]
    pub fn socket_addr(&self) -> SocketAddr {
        self.running.socket_addr()
    }

    /// The root token, allowed everything.
    #[must_use]
    pub fn root_token(&self) -> &str {
        &self.root_token
    }

    /// The engine's mount path.
    #[must_use]
    pub fn mount(&self) -> &str {
        &self.mount
    }

    /// Adds (or replaces) a token with this policy.
    pub fn add_token(&self, token: &str, policy: Policy) {
        self.engine().tokens.insert(token.to_owned(), policy);
    }

    /// Seals the server: every request answers 503 until [`TransitServer::unseal`].
    pub fn seal(&self) {
        self.engine().sealed = true;
    }

    /// Unseals the server.
    pub fn unseal(&self) {
        self.engine().sealed = false;
    }

    /// Creates the key `name` (`aes256-gcm96`, version 1); false if it exists.
    pub fn create_key(&self, name: &str) -> bool {
        self.engine().create_key(name)
    }

    /// Rotates the key `name`; its new latest version, or `None` if it is missing.
    pub fn rotate_key(&self, name: &str) -> Option<u32> {
        self.engine().rotate_key(name)
    }

    /// Sets the key's minimum decryption version (1 to latest); false if the key is
    /// missing or the version out of range.
    pub fn set_min_decryption_version(&self, name: &str, version: u32) -> bool {
        self.engine().set_min_decryption_version(name, version)
    }

    /// Deletes the key `name` whatever its `deletion_allowed`; false if missing.
    pub fn delete_key(&self, name: &str) -> bool {
        self.engine().delete_key(name)
    }

    /// The key's latest version, if it exists.
    #[must_use]
    pub fn latest_version(&self, name: &str) -> Option<u32> {
        self.engine().latest_version(name)
    }

    /// The creation time (unix seconds) of the key's version 1, if it exists.
    #[must_use]
    pub fn creation_time(&self, name: &str) -> Option<u64> {
        self.engine().creation_time(name)
    }

    /// The requests served so far, oldest first.
    #[must_use]
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.engine().requests.clone()
    }

    /// Forgets the requests recorded so far.
    pub fn clear_requests(&self) {
        self.engine().requests.clear();
    }

    /// Stops the server and waits until it has stopped; open connections are closed.
    pub async fn shutdown(self) {
        self.running.shutdown().await;
    }

    fn engine(&self) -> MutexGuard<'_, Engine> {
        self.running.state()
    }
}

async fn answer(engine: &Mutex<Engine>, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let token = header("x-vault-token");
    let namespace = header("x-vault-namespace");
    let method = parts.method.as_str().to_owned();
    let path = parts.uri.path().to_owned();
    let (status, json) = match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => {
            let bytes = collected.to_bytes();
            let mut engine = engine.lock().unwrap_or_else(PoisonError::into_inner);
            engine.answer(
                &method,
                &path,
                token.as_deref(),
                namespace.as_deref(),
                &bytes,
            )
        }
        Err(_) => (
            413,
            Some(serde_json::json!({ "errors": ["request body too large or cut short"] })),
        ),
    };
    engine
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .requests
        .push(RequestRecord {
            method,
            path,
            status,
            namespace,
        });
    let mut response = Response::builder().status(status);
    let body = match json {
        Some(json) => {
            response = response.header("content-type", "application/json");
            Bytes::from(json.to_string())
        }
        None => Bytes::new(),
    };
    response
        .body(Full::new(body))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}
