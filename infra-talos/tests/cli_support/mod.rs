//! What the command-set tests share: redaction of the values that differ from run
//! to run (store times, recovery epochs, blanket approval identifiers) before a
//! transcript is compared with its snapshot.
#![allow(
    dead_code,
    unreachable_pub,
    reason = "a module shared by test binaries, each using the parts it needs"
)]

use std::path::Path;

#[cfg(feature = "cli")]
pub mod bench;

/// The directory, under a test's own, of the installation's authority and every
/// principal's certificate.
pub const PKI: &str = "pki";

/// The arguments that make `actor` (`(id, role)`) the acting principal: its
/// certificate and key from the test's authority, and the role. None for `None`.
pub fn acting(dir: &Path, actor: Option<(&str, &str)>) -> Vec<String> {
    let Some((id, role)) = actor else {
        return Vec::new();
    };
    let pki = dir.join(PKI);
    vec![
        "--certificate".into(),
        pki.join(format!("{id}.crt")).display().to_string(),
        "--private-key".into(),
        pki.join(format!("{id}.key")).display().to_string(),
        "--as".into(),
        role.into(),
    ]
}

/// The command lines that bootstrap a new store (root its first administrator,
/// the authority made in the test's `pki`) and register `people` (`(id, roles)`),
/// each issued a certificate; run the first as nobody and the rest as root.
pub fn bootstrap_and_register(dir: &Path, people: &[(&str, &[&str])]) -> Vec<Vec<String>> {
    let pki = dir.join(PKI).display().to_string();
    let mut lines = vec![
        ["--create", "init", "--admin", "root", "--pki", &pki]
            .map(String::from)
            .to_vec(),
    ];
    for (id, roles) in people {
        let mut line: Vec<String> = ["principal", "add", id].map(String::from).to_vec();
        for role in *roles {
            line.extend(["--role".to_owned(), (*role).to_owned()]);
        }
        line.extend(["--pki".to_owned(), pki.clone()]);
        lines.push(line);
    }
    lines
}

/// The wall clock now, through the injected clock.
pub fn wall_now() -> std::time::SystemTime {
    infra_talos::backend::WallTime::system(std::sync::Arc::new(
        infra_core::engine::SystemClock::new(),
    ))
    .system_time()
}

/// Replaces the test's directory with `[dir]`.
pub fn redact_dir(text: &str, dir: &Path) -> String {
    text.replace(&dir.display().to_string(), "[dir]")
}

/// Replaces store times (`YYYY-MM-DDTHH:MM:SS.mmmZ`) with `[time]`.
pub fn redact(text: &str) -> String {
    const SHAPE: &[u8] = b"dddd-dd-ddTdd:dd:dd.dddZ";
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < bytes.len() {
        let fits = bytes.len() - i >= SHAPE.len()
            && SHAPE.iter().zip(&bytes[i..]).all(|(shape, b)| match shape {
                b'd' => b.is_ascii_digit(),
                other => other == b,
            });
        if fits {
            out.push_str("[time]");
            i += SHAPE.len();
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    // Recovery epochs are random: `epoch <32 hex>` becomes `epoch [epoch]`.
    let mut rest = out.as_str();
    let mut done = String::new();
    while let Some(at) = rest.find("epoch ") {
        let tail = &rest[at + 6..];
        let hex = tail.len() >= 32 && tail[..32].bytes().all(|b| b.is_ascii_hexdigit());
        done.push_str(&rest[..at + 6]);
        if hex {
            done.push_str("[epoch]");
            rest = &tail[32..];
        } else {
            rest = tail;
        }
    }
    done.push_str(rest);
    fingerprints(&store_instants(&done))
}

/// Certificate fingerprints (`sha256:<64 hex>`, of keys made afresh each run)
/// become `sha256:[fingerprint]`.
pub fn fingerprints(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("sha256:") {
        let tail = &rest[at + 7..];
        out.push_str(&rest[..at + 7]);
        if tail.len() >= 64 && tail[..64].bytes().all(|b| b.is_ascii_hexdigit()) {
            out.push_str("[fingerprint]");
            rest = &tail[64..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// Store instants in refusals (`t=<ms>ms`) become `t=[ms]`.
fn store_instants(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("t=") {
        let tail = &rest[at + 2..];
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        out.push_str(&rest[..at + 2]);
        if digits > 0 && tail[digits..].starts_with("ms") {
            out.push_str("[ms]");
            rest = &tail[digits + 2..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// Replaces blanket approval identifiers (`blanket-<32 hex>`) with `blanket-[id]`.
pub fn redact_blankets(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("blanket-") {
        let tail = &rest[at + 8..];
        out.push_str(&rest[..at + 8]);
        if tail.len() >= 32 && tail[..32].bytes().all(|b| b.is_ascii_hexdigit()) {
            out.push_str("[id]");
            rest = &tail[32..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// An HTTPS client that trusts the test's authority and, for `Some(id)`, presents
/// that principal's client certificate.
pub fn https(dir: &Path, who: Option<&str>) -> reqwest::Client {
    https_with(dir, who, true)
}

/// As [`https`]; redirects are followed only with `follow`.
pub fn https_with(dir: &Path, who: Option<&str>, follow: bool) -> reqwest::Client {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let pki = dir.join(PKI);
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(pki.join("ca.crt")).unwrap())
        .unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match who {
        None => builder.with_no_client_auth(),
        Some(id) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_file(pki.join(format!("{id}.crt"))).unwrap()],
                PrivateKeyDer::from_pem_file(pki.join(format!("{id}.key"))).unwrap(),
            )
            .unwrap(),
    };
    let redirects = if follow {
        reqwest::redirect::Policy::default()
    } else {
        reqwest::redirect::Policy::none()
    };
    reqwest::Client::builder()
        .use_preconfigured_tls(config)
        .redirect(redirects)
        .no_proxy()
        .build()
        .unwrap()
}
