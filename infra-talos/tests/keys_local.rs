//! The local keyring as a key provider: sealing, opening, the use-time check, and
//! every refusal the contract asks for (§2, §3.1).

use std::fs;
use std::path::Path;

use infra_talos::config_digest;
use infra_talos::keys::{KeyError, KeyProvider, LocalKeyring, SealedArtifact, VersionUnavailable};
use proptest::prelude::*;

const CONFIG: &[u8] = b"version: v1alpha1\nmachine:\n  token: marker-3f9a-secret\n";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
}

fn keyring(dir: &Path) -> LocalKeyring {
    let keyring = LocalKeyring::open(dir).expect("open keyring");
    keyring.create_key("artifacts").expect("create key");
    keyring
}

fn assert_no_marker(error: &KeyError, marker: &str) {
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains(marker), "{shown}");
}

#[tokio::test]
async fn seal_then_open_round_trips_and_records_the_digest() {
    let dir = tempfile::tempdir().expect("temp dir");
    let keyring = keyring(dir.path());
    let sealed = keyring.seal("artifacts", CONFIG).await.expect("seal");
    assert_eq!(sealed.digest, config_digest(CONFIG));
    assert_eq!(sealed.binding.provider, "local");
    assert_eq!(sealed.binding.key_name, "artifacts");
    assert_eq!(sealed.binding.version, 1);
    assert_eq!(
        sealed.binding.key_identity,
        keyring.key_info("artifacts").expect("info").identity
    );
    assert!(
        !sealed
            .ciphertext
            .windows(b"marker-3f9a".len())
            .any(|w| w == b"marker-3f9a")
    );
    let opened = keyring.open(&sealed).await.expect("open");
    assert_eq!(opened.bytes(), CONFIG);
    assert_eq!(opened.digest(), sealed.digest);
    assert!(!format!("{opened:?} {sealed:?}").contains("marker-3f9a"));

    // The binding and the sealed artifact survive serialisation.
    let json = serde_json::to_string(&sealed).expect("serialise");
    let back: SealedArtifact = serde_json::from_str(&json).expect("deserialise");
    assert_eq!(back, sealed);

    // Two seals of the same plaintext never share a ciphertext (random nonces).
    let again = keyring.seal("artifacts", CONFIG).await.expect("seal");
    assert_ne!(again.ciphertext, sealed.ciphertext);
}

#[tokio::test]
async fn the_use_time_check_reports_the_bound_version_and_never_the_value() {
    let dir = tempfile::tempdir().expect("temp dir");
    let keyring = keyring(dir.path());
    let sealed = keyring.seal("artifacts", CONFIG).await.expect("seal");
    keyring.rotate("artifacts").await.expect("rotate");
    let check = keyring.check(&sealed.binding).await.expect("check");
    assert_eq!(check.version, 1);
    assert_eq!(check.latest_version, 2);
    assert_eq!(check.artifact_digest, None);
    let check = keyring
        .check_artifact(&sealed)
        .await
        .expect("check artifact");
    assert_eq!(check.version, 1);
    assert_eq!(check.artifact_digest, Some(config_digest(CONFIG)));
    let recorded = serde_json::to_string(&check).expect("serialise");
    assert!(!recorded.contains("marker-3f9a"), "{recorded}");
}

#[tokio::test]
async fn a_rotated_key_still_opens_under_the_bound_older_version() {
    let dir = tempfile::tempdir().expect("temp dir");
    let keyring = keyring(dir.path());
    let old = keyring.seal("artifacts", CONFIG).await.expect("seal");
    assert_eq!(keyring.rotate("artifacts").await.expect("rotate"), 2);
    let new = keyring
        .seal("artifacts", b"other: 2\n")
        .await
        .expect("seal");
    assert_eq!((old.binding.version, new.binding.version), (1, 2));
    assert_eq!(old.binding.key_identity, new.binding.key_identity);
    assert_eq!(keyring.open(&old).await.expect("open old").bytes(), CONFIG);
    assert_eq!(
        keyring.open(&new).await.expect("open new").bytes(),
        b"other: 2\n"
    );
}

#[tokio::test]
async fn a_minimum_decryption_version_above_the_binding_makes_it_unavailable() {
    let dir = tempfile::tempdir().expect("temp dir");
    let keyring = keyring(dir.path());
    let sealed = keyring.seal("artifacts", CONFIG).await.expect("seal");
    keyring.rotate("artifacts").await.expect("rotate");
    keyring
        .set_min_decryption_version("artifacts", 2)
        .expect("min version");
    for result in [
        keyring.open(&sealed).await.map(|_| ()),
        keyring.check(&sealed.binding).await.map(|_| ()),
        keyring.check_artifact(&sealed).await.map(|_| ()),
    ] {
        let error = result.expect_err("refused");
        assert_eq!(
            error,
            KeyError::VersionUnavailable {
                key_name: "artifacts".to_owned(),
                version: 1,
                reason: VersionUnavailable::BelowMinimum {
                    min_decryption_version: 2
                },
            }
        );
        assert!(
            error.to_string().contains("version 1 of key artifacts"),
            "{error}"
        );
    }
}

#[tokio::test]
async fn a_key_recreated_under_the_same_name_is_not_the_bound_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let keyring = keyring(dir.path());
    let sealed = keyring.seal("artifacts", CONFIG).await.expect("seal");
    keyring.delete_key("artifacts").expect("delete");
    assert!(matches!(
        keyring.open(&sealed).await,
        Err(KeyError::KeyNotFound { .. })
    ));
    let recreated = keyring.create_key("artifacts").expect("recreate");
    assert_ne!(recreated.identity, sealed.binding.key_identity);
    for result in [
        keyring.open(&sealed).await.map(|_| ()),
        keyring.check(&sealed.binding).await.map(|_| ()),
    ] {
        match result {
            Err(KeyError::IdentityMismatch {
                key_name,
                version,
                bound,
                found,
            }) => {
                assert_eq!((key_name.as_str(), version), ("artifacts", 1));
                assert_eq!(bound, sealed.binding.key_identity);
                assert_eq!(found, recreated.identity);
            }
            other => panic!("expected an identity mismatch, got {other:?}"),
        }
    }
    // Even with the new identity written into the binding, the old ciphertext does
    // not open under the new key's material.
    let mut forged = sealed.clone();
    forged.binding.key_identity = recreated.identity;
    assert!(matches!(
        keyring.open(&forged).await,
        Err(KeyError::AuthenticationFailed { .. })
    ));
}

#[tokio::test]
async fn a_tampered_ciphertext_fails_authentication() {
    let dir = tempfile::tempdir().expect("temp dir");
    let keyring = keyring(dir.path());
    let sealed = keyring.seal("artifacts", CONFIG).await.expect("seal");
    for at in [4, 4 + 24, sealed.ciphertext.len() - 1] {
        let mut tampered = sealed.clone();
        tampered.ciphertext[at] ^= 0x01;
        assert_eq!(
            keyring.open(&tampered).await.expect_err("tampered"),
            KeyError::AuthenticationFailed {
                key_name: "artifacts".to_owned(),
                version: 1,
            }
        );
    }
    let mut cut = sealed.clone();
    cut.ciphertext.truncate(20);
    assert!(matches!(
        keyring.open(&cut).await,
        Err(KeyError::Malformed { .. })
    ));
}

#[tokio::test]
async fn a_ciphertext_moved_to_another_binding_or_record_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let keyring = keyring(dir.path());
    keyring.create_key("other").expect("create");
    let a = keyring.seal("artifacts", CONFIG).await.expect("seal a");
    let b = keyring.seal("artifacts", b"b: 1\n").await.expect("seal b");
    let c = keyring.seal("other", b"c: 1\n").await.expect("seal c");

    // A's ciphertext under B's record (another artifact digest).
    let moved = SealedArtifact {
        ciphertext: a.ciphertext.clone(),
        ..b.clone()
    };
    assert!(matches!(
        keyring.open(&moved).await,
        Err(KeyError::AuthenticationFailed { .. })
    ));
    // A's ciphertext under another key's binding.
    let moved = SealedArtifact {
        ciphertext: a.ciphertext.clone(),
        ..c.clone()
    };
    assert!(matches!(
        keyring.open(&moved).await,
        Err(KeyError::AuthenticationFailed { .. })
    ));
    // A's binding moved to another version once one exists.
    keyring.rotate("artifacts").await.expect("rotate");
    let mut moved = a.clone();
    moved.binding.version = 2;
    assert!(matches!(
        keyring.open(&moved).await,
        Err(KeyError::AuthenticationFailed { .. })
    ));
    // A digest rewritten in the record.
    let mut moved = a.clone();
    moved.digest = config_digest(b"something else\n");
    assert!(matches!(
        keyring.open(&moved).await,
        Err(KeyError::AuthenticationFailed { .. })
    ));
    // A binding claimed for another provider.
    let mut moved = a.clone();
    moved.binding.provider = "transit".to_owned();
    assert!(matches!(
        keyring.open(&moved).await,
        Err(KeyError::WrongProvider { .. })
    ));
}

#[tokio::test]
async fn missing_keys_and_versions_are_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let keyring = keyring(dir.path());
    let error = keyring.seal("absent", CONFIG).await.expect_err("missing");
    assert_eq!(
        error,
        KeyError::KeyNotFound {
            provider: "local".to_owned(),
            key_name: "absent".to_owned(),
        }
    );
    let sealed = keyring.seal("artifacts", CONFIG).await.expect("seal");
    let mut future = sealed.clone();
    future.binding.version = 7;
    assert!(matches!(
        keyring.check(&future.binding).await,
        Err(KeyError::VersionUnavailable {
            version: 7,
            reason: VersionUnavailable::Missing { latest_version: 1 },
            ..
        })
    ));
}

#[cfg(unix)]
#[test]
fn the_keyring_file_is_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().expect("temp dir");
    let keys = dir.path().join("keys");
    let keyring = keyring(&keys);
    keyring.rotate_key("artifacts").expect("rotate");
    let mode = |path: &Path| fs::metadata(path).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode(keyring.path()), 0o600);
    assert_eq!(mode(&keys), 0o700);

    // A keyring others can read is refused and left alone.
    fs::set_permissions(keyring.path(), fs::Permissions::from_mode(0o644)).expect("chmod");
    let before = fs::read(keyring.path()).expect("read");
    let error = LocalKeyring::open(&keys).expect_err("open to others");
    let shown = error.to_string();
    assert!(
        shown.contains(&keyring.path().display().to_string()),
        "{shown}"
    );
    assert!(shown.contains("0644"), "{shown}");
    assert_eq!(fs::read(keyring.path()).expect("read"), before);
}

#[test]
fn a_malformed_keyring_file_is_refused_with_its_path_and_left_unchanged() {
    let dir = tempfile::tempdir().expect("temp dir");
    let keyring = keyring(dir.path());
    let path = keyring.path().to_path_buf();
    let samples: [&[u8]; 4] = [
        b"{ not json",
        b"{\"format\": \"infra-talos-keyring/1\", \"keys\": {\"k\": {\"identity\": \"secret-ish-value\"}}}",
        b"{\"format\": \"infra-talos-keyring/1\", \"keys\": {\"k\": {\"identity\": \"00000000000000000000000000000000\", \"min_decryption_version\": 1, \"versions\": {\"1\": \"zz-not-hex-material\"}}}}",
        b"{\"format\": \"something-else\", \"keys\": {}}",
    ];
    for sample in samples {
        fs::write(&path, sample).expect("write");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).expect("chmod");
        }
        let errors = [
            LocalKeyring::open(dir.path()).expect_err("open refuses"),
            keyring.create_key("new").expect_err("create refuses"),
            keyring.rotate_key("artifacts").expect_err("rotate refuses"),
        ];
        for error in errors {
            let KeyError::Keyring { path: named, .. } = &error else {
                panic!("expected a keyring error, got {error:?}");
            };
            assert_eq!(named, &path);
            let shown = format!("{error} {error:?}");
            assert!(shown.contains(&path.display().to_string()), "{shown}");
            assert!(!shown.contains("secret-ish"), "{shown}");
            assert!(!shown.contains("zz-not-hex"), "{shown}");
        }
        assert_eq!(
            fs::read(&path).expect("read"),
            sample,
            "file left unchanged"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Whatever the plaintext, no error's `Display` or `Debug`, nor the sealed
    /// artifact's or plaintext's `Debug`, shows it.
    #[test]
    fn no_error_shows_the_plaintext(
        prefix in prop::collection::vec(any::<u8>(), 0..64),
        marker in "[A-Za-z0-9]{12,24}",
        suffix in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let marker = format!("PLAINTEXT-{marker}");
        let plaintext = [prefix.as_slice(), marker.as_bytes(), suffix.as_slice()].concat();
        let dir = tempfile::tempdir().expect("temp dir");
        let keyring = keyring(dir.path());
        runtime().block_on(async {
            let sealed = keyring.seal("artifacts", &plaintext).await.expect("seal");
            let opened = keyring.open(&sealed).await.expect("open");
            prop_assert_eq!(opened.bytes(), plaintext.as_slice());
            let shown = format!("{:?} {:?}", opened, sealed);
            prop_assert!(!shown.contains(&marker));

            let mut errors = Vec::new();
            let mut tampered = sealed.clone();
            let last = tampered.ciphertext.len() - 1;
            tampered.ciphertext[last] ^= 0x80;
            errors.push(keyring.open(&tampered).await.expect_err("tampered"));
            let mut moved = sealed.clone();
            // The digest of another configuration: never the plaintext's own (which may
            // be the marker alone, when prefix and suffix are both empty).
            moved.digest = config_digest([marker.as_bytes(), b"-moved"].concat().as_slice());
            errors.push(keyring.open(&moved).await.expect_err("moved"));
            keyring.rotate_key("artifacts").expect("rotate");
            keyring.set_min_decryption_version("artifacts", 2).expect("min");
            errors.push(keyring.open(&sealed).await.expect_err("too old"));
            errors.push(keyring.check_artifact(&sealed).await.expect_err("too old"));
            keyring.delete_key("artifacts").expect("delete");
            errors.push(keyring.open(&sealed).await.expect_err("deleted"));
            keyring.create_key("artifacts").expect("recreate");
            errors.push(keyring.open(&sealed).await.expect_err("recreated"));
            for error in &errors {
                assert_no_marker(error, &marker);
            }
            Ok(())
        })?;
    }
}
