//! Issuing and proving identities: only a certificate the installation's authority
//! issued for client authentication, presented with its own key, within its
//! validity, names a principal.

use std::time::{Duration, SystemTime};

use super::*;

const DAY: Duration = Duration::from_secs(86_400);

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn authority() -> Authority {
    Authority::generate("test installation", now()).unwrap()
}

fn issue(ca: &Authority, principal: &str) -> ClientCertificate {
    issue_client(&ca.certificate_pem, &ca.key_pem, principal, now(), 30 * DAY).unwrap()
}

#[test]
fn an_issued_certificate_names_its_principal() {
    let ca = authority();
    let bob = issue(&ca, "bob");
    let who = authenticate(
        &ca.certificate_pem,
        &bob.certificate_pem,
        &bob.key_pem,
        now(),
    );
    assert_eq!(who.unwrap(), "bob");
}

#[test]
fn another_authoritys_certificate_is_not_trusted() {
    let ca = authority();
    let other = authority();
    let eve = issue(&other, "bob");
    let err = authenticate(
        &ca.certificate_pem,
        &eve.certificate_pem,
        &eve.key_pem,
        now(),
    )
    .unwrap_err();
    assert!(matches!(err, IdentityError::NotTrusted(_)), "{err}");
}

#[test]
fn a_certificate_with_another_key_is_refused() {
    let ca = authority();
    let bob = issue(&ca, "bob");
    let eve = issue(&ca, "eve");
    let err = authenticate(
        &ca.certificate_pem,
        &bob.certificate_pem,
        &eve.key_pem,
        now(),
    )
    .unwrap_err();
    assert!(matches!(err, IdentityError::KeyMismatch), "{err}");
}

#[test]
fn a_certificate_outside_its_validity_is_refused() {
    let ca = authority();
    let bob = issue(&ca, "bob");
    for at in [now() - DAY, now() + 31 * DAY] {
        let err =
            authenticate(&ca.certificate_pem, &bob.certificate_pem, &bob.key_pem, at).unwrap_err();
        assert!(matches!(err, IdentityError::NotTrusted(_)), "{err}");
    }
}

#[test]
fn the_authoritys_own_certificate_names_no_one() {
    let ca = authority();
    let err =
        authenticate(&ca.certificate_pem, &ca.certificate_pem, &ca.key_pem, now()).unwrap_err();
    assert!(matches!(err, IdentityError::NotTrusted(_)), "{err}");
}

#[test]
fn unusable_identifiers_are_not_issued() {
    let ca = authority();
    for id in ["", "bob smith", "bob\n", "a/b", &"x".repeat(129)] {
        let err = issue_client(&ca.certificate_pem, &ca.key_pem, id, now(), DAY).unwrap_err();
        assert!(
            matches!(err, IdentityError::BadIdentifier(_)),
            "{id:?}: {err}"
        );
    }
}

#[test]
fn garbage_is_refused_not_misread() {
    let ca = authority();
    let bob = issue(&ca, "bob");
    let err = authenticate(&ca.certificate_pem, "bob", &bob.key_pem, now()).unwrap_err();
    assert!(
        matches!(err, IdentityError::NotACertificate { .. }),
        "{err}"
    );
    let err = authenticate(&ca.certificate_pem, &bob.certificate_pem, "key", now()).unwrap_err();
    assert!(matches!(err, IdentityError::NotAKey(_)), "{err}");
    let err = authenticate("ca", &bob.certificate_pem, &bob.key_pem, now()).unwrap_err();
    assert!(
        matches!(err, IdentityError::NotACertificate { .. }),
        "{err}"
    );
}

#[test]
fn keys_never_print() {
    let ca = authority();
    let bob = issue(&ca, "bob");
    for shown in [format!("{ca:?}"), format!("{bob:?}")] {
        assert!(!shown.contains("PRIVATE KEY"), "{shown}");
    }
}

#[test]
fn a_binding_reads_the_principal_and_fingerprint_of_the_authoritys_certificate() {
    let ca = authority();
    let bob = issue(&ca, "bob");
    let read = issued_certificate(&ca.certificate_pem, &bob.certificate_pem).unwrap();
    assert_eq!(read.principal, "bob");
    assert_eq!(
        read.fingerprint,
        Fingerprint::of_pem(&bob.certificate_pem).unwrap()
    );
    let shown = read.fingerprint.to_string();
    assert!(
        shown.starts_with("sha256:") && shown.len() == 7 + 64,
        "{shown}"
    );
    assert_eq!(Fingerprint::parse(&shown), Some(read.fingerprint));
    assert_eq!(
        Fingerprint::parse(&read.fingerprint.hex()),
        Some(read.fingerprint)
    );
    assert_eq!(Fingerprint::parse("sha256:12"), None);
    // Another authority's certificate is not bound to anyone here.
    let other = authority();
    let eve = issue(&other, "bob");
    assert!(matches!(
        issued_certificate(&ca.certificate_pem, &eve.certificate_pem),
        Err(IdentityError::NotTrusted(_))
    ));
    assert_ne!(
        Fingerprint::of_pem(&eve.certificate_pem).unwrap(),
        read.fingerprint
    );
}

#[test]
fn only_a_standing_binding_of_the_presented_certificate_admits() {
    use crate::contract::InstantMs;
    use crate::store::CertificateBinding;
    let ca = authority();
    let bob = Fingerprint::of_pem(&issue(&ca, "bob").certificate_pem).unwrap();
    let binding = |ended: Option<u64>| CertificateBinding {
        fingerprint: bob.hex(),
        principal: "bob".into(),
        bound_at: InstantMs(1),
        bound_by: "root".into(),
        ended_at: ended.map(InstantMs),
    };
    assert_eq!(admit("bob", &bob, &[binding(None)], None), Ok(()));
    assert!(matches!(
        admit("bob", &bob, &[], None),
        Err(Refusal::Unbound { .. })
    ));
    assert!(matches!(
        admit("alice", &bob, &[binding(None)], None),
        Err(Refusal::Unbound { .. })
    ));
    assert!(matches!(
        admit("bob", &bob, &[binding(Some(2))], None),
        Err(Refusal::Ended { .. })
    ));
}
