//! The Transit key provider against the in-process Transit stand-in: sealing,
//! opening, the use-time check, and every refusal the contract asks for (§2, §3.1).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use infra_talos::config_digest;
use infra_talos::keys::{
    KeyError, KeyOperation, KeyProvider, SealedArtifact, TransitClient, TransitConfig,
    TransitToken, VersionUnavailable,
};
use infra_testkit::transit::{Policy, TransitOperation, TransitOptions, TransitServer};

const CONFIG: &[u8] = b"version: v1alpha1\nmachine:\n  token: marker-7c1e-secret\n";
const MARKER: &str = "marker-7c1e";

async fn server() -> TransitServer {
    let server = TransitServer::start().await.expect("start stand-in");
    assert!(server.create_key("artifacts"));
    server
}

fn client(server: &TransitServer, token: &str) -> TransitClient {
    TransitClient::new(TransitConfig::new(
        server.address(),
        TransitToken::new(token),
    ))
    .expect("client")
}

fn assert_clean(error: &KeyError, token: &str) {
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains(MARKER), "{shown}");
    assert!(!shown.contains(token), "{shown}");
}

/// The ciphertext with one byte of its decoded payload flipped.
fn tampered(sealed: &SealedArtifact, at: usize) -> SealedArtifact {
    let text = std::str::from_utf8(&sealed.ciphertext).expect("utf-8");
    let (prefix, encoded) = text.rsplit_once(':').expect("prefix");
    let mut raw = BASE64.decode(encoded).expect("base64");
    let at = at.min(raw.len() - 1);
    raw[at] ^= 0x01;
    let mut out = sealed.clone();
    out.ciphertext = format!("{prefix}:{}", BASE64.encode(raw)).into_bytes();
    out
}

#[tokio::test]
async fn seal_then_open_round_trips_and_records_the_digest() {
    let server = server().await;
    let root = server.root_token().to_owned();
    let transit = client(&server, &root);
    let sealed = transit.seal("artifacts", CONFIG).await.expect("seal");
    assert_eq!(sealed.digest, config_digest(CONFIG));
    assert_eq!(sealed.binding.provider, "transit");
    assert_eq!(sealed.binding.version, 1);
    let created = server.creation_time("artifacts").expect("created");
    assert_eq!(sealed.binding.key_identity, format!("artifacts@{created}"));
    assert!(sealed.ciphertext.starts_with(b"vault:v1:"));
    let opened = transit.open(&sealed).await.expect("open");
    assert_eq!(opened.bytes(), CONFIG);
    assert!(!format!("{opened:?} {sealed:?} {transit:?}").contains(MARKER));
    assert!(!format!("{transit:?}").contains(&root));

    // The stand-in's record has paths and statuses, never a body or token.
    let requests = server.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.method == "POST" && r.path == "/v1/transit/encrypt/artifacts")
    );
    assert!(
        requests
            .iter()
            .any(|r| r.method == "POST" && r.path == "/v1/transit/decrypt/artifacts")
    );
    let shown = format!("{requests:?}");
    assert!(!shown.contains(MARKER) && !shown.contains(&root), "{shown}");
    server.shutdown().await;
}

#[tokio::test]
async fn the_use_time_check_decrypts_and_reports_the_bound_version() {
    let server = server().await;
    let root = server.root_token().to_owned();
    let sealed = client(&server, &root)
        .seal("artifacts", CONFIG)
        .await
        .expect("seal");
    server.rotate_key("artifacts").expect("rotate");
    server.add_token("executor", Policy::executor());
    let executor = client(&server, "executor");
    let check = executor.check(&sealed.binding).await.expect("check");
    assert_eq!((check.version, check.latest_version), (1, 2));
    assert_eq!(check.artifact_digest, None);
    let check = executor
        .check_artifact(&sealed)
        .await
        .expect("check artifact");
    assert_eq!(check.version, 1);
    assert_eq!(check.artifact_digest, Some(config_digest(CONFIG)));

    // A token that may read the key but not decrypt passes the key check but not the
    // dependency check, and the refusal is a permission error.
    server.add_token(
        "no-decrypt",
        Policy::executor().deny(TransitOperation::Decrypt),
    );
    let limited = client(&server, "no-decrypt");
    limited.check(&sealed.binding).await.expect("key check");
    let error = limited
        .check_artifact(&sealed)
        .await
        .expect_err("no decrypt");
    assert_eq!(
        error,
        KeyError::PermissionDenied {
            provider: "transit".to_owned(),
            key_name: "artifacts".to_owned(),
            operation: KeyOperation::Decrypt,
        }
    );
    assert_clean(&error, "no-decrypt");
    server.shutdown().await;
}

#[tokio::test]
async fn a_rotated_key_still_opens_under_the_bound_older_version() {
    let server = server().await;
    let transit = client(&server, server.root_token());
    let old = transit.seal("artifacts", CONFIG).await.expect("seal");
    assert_eq!(transit.rotate("artifacts").await.expect("rotate"), 2);
    let new = transit
        .seal("artifacts", b"other: 2\n")
        .await
        .expect("seal");
    assert_eq!((old.binding.version, new.binding.version), (1, 2));
    assert!(new.ciphertext.starts_with(b"vault:v2:"));
    assert_eq!(old.binding.key_identity, new.binding.key_identity);
    assert_eq!(transit.open(&old).await.expect("open old").bytes(), CONFIG);
    assert_eq!(
        transit.open(&new).await.expect("open new").bytes(),
        b"other: 2\n"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_minimum_decryption_version_above_the_binding_makes_it_unavailable() {
    let server = server().await;
    let transit = client(&server, server.root_token());
    let sealed = transit.seal("artifacts", CONFIG).await.expect("seal");
    server.rotate_key("artifacts").expect("rotate");
    assert!(server.set_min_decryption_version("artifacts", 2));
    server.clear_requests();
    for result in [
        transit.open(&sealed).await.map(|_| ()),
        transit.check(&sealed.binding).await.map(|_| ()),
        transit.check_artifact(&sealed).await.map(|_| ()),
    ] {
        assert_eq!(
            result.expect_err("too old"),
            KeyError::VersionUnavailable {
                key_name: "artifacts".to_owned(),
                version: 1,
                reason: VersionUnavailable::BelowMinimum {
                    min_decryption_version: 2
                },
            }
        );
    }
    // Refused from the key's description, before any decryption was asked for.
    assert!(
        server
            .requests()
            .iter()
            .all(|r| !r.path.contains("decrypt"))
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_key_recreated_under_the_same_name_is_not_the_bound_key() {
    let server = server().await;
    let transit = client(&server, server.root_token());
    let sealed = transit.seal("artifacts", CONFIG).await.expect("seal");
    assert!(server.delete_key("artifacts"));
    assert!(matches!(
        transit.open(&sealed).await,
        Err(KeyError::KeyNotFound { .. })
    ));
    assert!(server.create_key("artifacts"));
    let found = format!(
        "artifacts@{}",
        server.creation_time("artifacts").expect("created")
    );
    assert_ne!(found, sealed.binding.key_identity);
    server.clear_requests();
    for result in [
        transit.open(&sealed).await.map(|_| ()),
        transit.check(&sealed.binding).await.map(|_| ()),
        transit.check_artifact(&sealed).await.map(|_| ()),
    ] {
        assert_eq!(
            result.expect_err("recreated"),
            KeyError::IdentityMismatch {
                key_name: "artifacts".to_owned(),
                version: 1,
                bound: sealed.binding.key_identity.clone(),
                found: found.clone(),
            }
        );
    }
    assert!(
        server
            .requests()
            .iter()
            .all(|r| !r.path.contains("decrypt"))
    );
    // With the new identity forged into the binding, the old ciphertext still does
    // not open: the new key's material does not authenticate it.
    let mut forged = sealed.clone();
    forged.binding.key_identity = found;
    assert!(matches!(
        transit.open(&forged).await,
        Err(KeyError::AuthenticationFailed { version: 1, .. })
    ));
    server.shutdown().await;
}

#[tokio::test]
async fn a_tampered_ciphertext_fails_authentication() {
    let server = server().await;
    let root = server.root_token().to_owned();
    let transit = client(&server, &root);
    let sealed = transit.seal("artifacts", CONFIG).await.expect("seal");
    for at in [0, 12, usize::MAX] {
        let error = transit
            .open(&tampered(&sealed, at))
            .await
            .expect_err("tampered");
        assert_eq!(
            error,
            KeyError::AuthenticationFailed {
                key_name: "artifacts".to_owned(),
                version: 1,
            }
        );
        assert_clean(&error, &root);
    }
    let mut garbage = sealed.clone();
    garbage.ciphertext = b"not a ciphertext".to_vec();
    assert!(matches!(
        transit.open(&garbage).await,
        Err(KeyError::Malformed { .. })
    ));
    server.shutdown().await;
}

#[tokio::test]
async fn a_ciphertext_moved_to_another_binding_or_record_is_refused() {
    let server = server().await;
    assert!(server.create_key("other"));
    let transit = client(&server, server.root_token());
    let a = transit.seal("artifacts", CONFIG).await.expect("seal a");
    let b = transit.seal("artifacts", b"b: 1\n").await.expect("seal b");

    // A's ciphertext under B's record: same key and version, another digest.
    let moved = SealedArtifact {
        ciphertext: a.ciphertext.clone(),
        ..b.clone()
    };
    assert!(matches!(
        transit.open(&moved).await,
        Err(KeyError::AuthenticationFailed { .. })
    ));
    // A's ciphertext claimed for another version of the same key.
    server.rotate_key("artifacts").expect("rotate");
    let mut moved = a.clone();
    moved.binding.version = 2;
    assert!(matches!(
        transit.open(&moved).await,
        Err(KeyError::Malformed { version: 2, .. })
    ));
    // A's record rebound to another key (its identity taken from a real seal).
    let c = transit.seal("other", b"c: 1\n").await.expect("seal c");
    let moved = SealedArtifact {
        binding: c.binding.clone(),
        ..a.clone()
    };
    assert!(matches!(
        transit.open(&moved).await,
        Err(KeyError::AuthenticationFailed { .. })
    ));
    // A's record with a rewritten digest.
    let mut moved = a.clone();
    moved.digest = config_digest(b"something else\n");
    assert!(matches!(
        transit.open(&moved).await,
        Err(KeyError::AuthenticationFailed { .. })
    ));
    // A local binding.
    let mut moved = a.clone();
    moved.binding.provider = "local".to_owned();
    assert!(matches!(
        transit.open(&moved).await,
        Err(KeyError::WrongProvider { .. })
    ));
    server.shutdown().await;
}

#[tokio::test]
async fn a_sealed_server_is_unavailable_not_missing() {
    let server = server().await;
    let root = server.root_token().to_owned();
    let transit = client(&server, &root);
    let sealed = transit.seal("artifacts", CONFIG).await.expect("seal");
    server.seal();
    let errors = [
        transit.seal("artifacts", CONFIG).await.map(|_| ()),
        transit.open(&sealed).await.map(|_| ()),
        transit.check(&sealed.binding).await.map(|_| ()),
        transit.check_artifact(&sealed).await.map(|_| ()),
        transit.rotate("artifacts").await.map(|_| ()),
        transit.seal("absent", CONFIG).await.map(|_| ()),
    ];
    for result in errors {
        let error = result.expect_err("sealed");
        match &error {
            KeyError::Unavailable { reason, .. } => {
                assert_eq!(reason, "the server is sealed");
            }
            other => panic!("expected unavailable, got {other:?}"),
        }
        assert_clean(&error, &root);
    }
    assert!(server.requests().iter().any(|r| r.status == 503));
    server.unseal();
    transit.check_artifact(&sealed).await.expect("unsealed");
    server.shutdown().await;
}

#[tokio::test]
async fn a_wrong_token_is_denied_not_missing() {
    let server = server().await;
    let transit = client(&server, server.root_token());
    let sealed = transit.seal("artifacts", CONFIG).await.expect("seal");
    let stranger = client(&server, "wrong-token-value");
    let results = [
        (
            KeyOperation::Read,
            stranger.seal("artifacts", CONFIG).await.map(|_| ()),
        ),
        (
            KeyOperation::Read,
            stranger.seal("absent", CONFIG).await.map(|_| ()),
        ),
        (KeyOperation::Read, stranger.open(&sealed).await.map(|_| ())),
        (
            KeyOperation::Read,
            stranger.check(&sealed.binding).await.map(|_| ()),
        ),
        (
            KeyOperation::Rotate,
            stranger.rotate("artifacts").await.map(|_| ()),
        ),
    ];
    for (operation, result) in results {
        let error = result.expect_err("denied");
        assert!(
            matches!(&error, KeyError::PermissionDenied { operation: op, .. } if *op == operation),
            "{error:?}"
        );
        assert_clean(&error, "wrong-token-value");
    }
    // An executor token cannot rotate or create.
    server.add_token("executor", Policy::executor());
    let executor = client(&server, "executor");
    assert!(matches!(
        executor.rotate("artifacts").await,
        Err(KeyError::PermissionDenied {
            operation: KeyOperation::Rotate,
            ..
        })
    ));
    assert!(matches!(
        executor.create_key("new").await,
        Err(KeyError::PermissionDenied {
            operation: KeyOperation::Create,
            ..
        })
    ));
    server.shutdown().await;
}

#[tokio::test]
async fn sealing_never_creates_a_key() {
    let server = server().await;
    // The root token could create a key through encrypt's upsert; the client never
    // asks.
    let transit = client(&server, server.root_token());
    server.clear_requests();
    assert_eq!(
        transit.seal("absent", CONFIG).await.expect_err("missing"),
        KeyError::KeyNotFound {
            provider: "transit".to_owned(),
            key_name: "absent".to_owned(),
        }
    );
    assert_eq!(server.latest_version("absent"), None);
    assert!(
        server
            .requests()
            .iter()
            .all(|r| !r.path.contains("encrypt"))
    );
    // Creating is a separate, administrative call.
    let info = transit.create_key("absent").await.expect("create");
    assert_eq!(
        (info.key_type.as_str(), info.latest_version),
        ("aes256-gcm96", 1)
    );
    transit.seal("absent", CONFIG).await.expect("seal");
    server.shutdown().await;
}

#[tokio::test]
async fn namespaces_and_mounts_are_sent() {
    let server = TransitServer::start_with(TransitOptions {
        mount: "team-transit".to_owned(),
        namespace: Some("team-a".to_owned()),
        root_token: Some("root-token".to_owned()),
        ..TransitOptions::default()
    })
    .await
    .expect("start");
    assert!(server.create_key("artifacts"));
    let config = TransitConfig::new(server.address(), TransitToken::new("root-token"))
        .with_mount("team-transit");
    let scoped = TransitClient::new(config.clone().with_namespace("team-a")).expect("client");
    let sealed = scoped.seal("artifacts", CONFIG).await.expect("seal");
    assert_eq!(scoped.open(&sealed).await.expect("open").bytes(), CONFIG);
    assert!(server.requests().iter().all(
        |r| r.namespace.as_deref() == Some("team-a") && r.path.starts_with("/v1/team-transit/")
    ));
    // Without the namespace the token is not valid.
    let unscoped = TransitClient::new(config.clone()).expect("client");
    assert!(matches!(
        unscoped.open(&sealed).await,
        Err(KeyError::PermissionDenied { .. })
    ));
    // Another mount has no engine.
    let elsewhere =
        TransitClient::new(config.with_mount("transit").with_namespace("team-a")).expect("client");
    assert!(matches!(
        elsewhere.check(&sealed.binding).await,
        Err(KeyError::Unavailable { .. })
    ));
    server.shutdown().await;
}

#[tokio::test]
async fn a_stopped_server_is_unavailable() {
    let server = server().await;
    let transit = client(&server, server.root_token());
    let sealed = transit.seal("artifacts", CONFIG).await.expect("seal");
    server.shutdown().await;
    let error = transit.check_artifact(&sealed).await.expect_err("stopped");
    assert!(matches!(error, KeyError::Unavailable { .. }), "{error:?}");
}
