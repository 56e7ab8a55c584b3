//! Key custody through the `infra-talos` binary: releases published and plans run
//! under OpenBao/Vault Transit (the in-process Transit stand-in, also behind a TLS
//! front verified against the configured authority), the service started on Transit
//! showing a plan's configuration to its approver, the refusals when Transit is
//! unreachable, sealed or the token is wrong, and the warnings given at start about
//! where a keyring file sits.
//!
//! Every command here is the binary in a process of its own, configured as an
//! operator configures it (a configuration file or the environment); the bench's
//! in-process command set does the bootstrap, which needs no keys.
#![cfg(feature = "cli")]

mod cli_support;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cli_support::bench::{
    ALICE, BOB, Bench, HANDOVER, HANDOVER_RELEASE, MACHINE, RELEASE, artifact,
};
use cli_support::{PKI, acting, https_with};
use infra_talos::config_digest;
use infra_testkit::talos::{ApplyMode, RecordedCall};
use infra_testkit::transit::{Policy, TransitServer};
use serde_json::Value;

const BINARY: &str = env!("CARGO_BIN_EXE_infra-talos");
/// The executor's Transit token: it must never appear in any output.
const TOKEN: &str = "s.custody-token-5e2b91";
/// A secret in the published configuration: it must never appear in any output.
const SECRET: &str = "custody-secret-4b1d";
/// What the page says instead of the configuration to a viewer who may not see it.
const WITHHELD: &str = "The configuration is shown only to a principal who may approve this plan";

/// The configuration published as the machine's [`RELEASE`]: another install disk
/// than the one it runs (a value the review shows) and a secret (one it withholds).
fn release_artifact() -> Vec<u8> {
    format!(
        "version: v1alpha1\nmachine:\n  type: worker\n  token: {SECRET}\n  install:\n    disk: /dev/sdb\n"
    )
    .into_bytes()
}

/// One run of the binary.
struct Ran {
    code: i32,
    out: String,
    err: String,
}

impl Ran {
    fn all(&self) -> String {
        format!("{}{}", self.out, self.err)
    }

    /// Nothing secret in what it wrote.
    fn assert_clean(&self) {
        let all = self.all();
        assert!(!all.contains(TOKEN), "the token leaked: {all}");
        assert!(!all.contains(SECRET), "the configuration leaked: {all}");
    }
}

/// How the binary is told where its keys are.
#[derive(Clone)]
enum Keys {
    /// A configuration file with a `transit` object.
    TransitFile(PathBuf),
    /// `INFRA_TALOS_TRANSIT_*` variables: address and token file.
    TransitEnv(String, PathBuf),
    /// `INFRA_TALOS_KEYRING`, and `INFRA_TALOS_BACKUPS_DIR` when given.
    Keyring(PathBuf, Option<PathBuf>),
}

/// The binary with the bench's store and talosconfig, these keys, acting as `actor`.
fn command(bench: &Bench, keys: &Keys, actor: Option<(&str, &str)>, args: &[&str]) -> Command {
    let dir = bench.dir.path();
    let mut command = Command::new(BINARY);
    command
        .env_clear()
        .env(
            "INFRA_TALOS_DATABASE",
            format!("sqlite:{}", dir.join("store.db").display()),
        )
        .env("INFRA_TALOS_TALOSCONFIG", &bench.talosconfig)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null());
    match keys {
        Keys::TransitFile(config) => {
            command.arg("--config").arg(config);
        }
        Keys::TransitEnv(address, token_file) => {
            command
                .env("INFRA_TALOS_TRANSIT_ADDR", address)
                .env("INFRA_TALOS_TRANSIT_TOKEN_FILE", token_file);
        }
        Keys::Keyring(keyring, backups) => {
            command.env("INFRA_TALOS_KEYRING", keyring);
            if let Some(backups) = backups {
                command.env("INFRA_TALOS_BACKUPS_DIR", backups);
            }
        }
    }
    command.args(acting(dir, actor)).args(args);
    command
}

/// Runs the binary to its end.
async fn binary(bench: &Bench, keys: &Keys, actor: Option<(&str, &str)>, args: &[&str]) -> Ran {
    let mut command = command(bench, keys, actor, args);
    let output = tokio::task::spawn_blocking(move || command.output().expect("the binary runs"))
        .await
        .expect("joined");
    Ran {
        code: output.status.code().unwrap_or(-1),
        out: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        err: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// Runs the binary, which must exit 0 and leak nothing; its standard output.
async fn binary_ok(
    bench: &Bench,
    keys: &Keys,
    actor: Option<(&str, &str)>,
    args: &[&str],
) -> String {
    let ran = binary(bench, keys, actor, args).await;
    assert_eq!(ran.code, 0, "{args:?}: {}", ran.all());
    ran.assert_clean();
    ran.out
}

/// Writes `text` to `path` with `mode`.
fn write_with_mode(path: &Path, text: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A Transit stand-in holding the key `artifacts` and the executor's token, and a
/// configuration file naming it (the token in a file of its own, mode 0600).
async fn transit(bench: &Bench) -> (TransitServer, Keys) {
    let server = TransitServer::start().await.expect("the Transit stand-in");
    assert!(server.create_key("artifacts"));
    server.add_token(TOKEN, Policy::executor());
    let keys = transit_config(bench, &server.address(), TOKEN);
    (server, keys)
}

/// A configuration file naming Transit at `address` with `token` in its token file.
fn transit_config(bench: &Bench, address: &str, token: &str) -> Keys {
    let dir = bench.dir.path();
    let n = std::fs::read_dir(dir).expect("dir").count();
    let token_file = dir.join(format!("transit-token-{n}"));
    write_with_mode(&token_file, &format!("{token}\n"), 0o600);
    let config = dir.join(format!("transit-{n}.json"));
    let text = serde_json::json!({
        "transit": {
            "address": address,
            "token_file": token_file,
            "mount": "transit",
            "key": "artifacts",
        }
    });
    std::fs::write(&config, text.to_string()).expect("config");
    Keys::TransitFile(config)
}

/// Publishes `release` with `bytes` as the machine's configuration, through the binary.
async fn publish(bench: &Bench, keys: &Keys, release: &str, bytes: &[u8]) -> Ran {
    let file = bench.dir.path().join(format!("{MACHINE}-{release}.yaml"));
    std::fs::write(&file, bytes).expect("artifact file");
    let pair = format!("{MACHINE}={}", file.display());
    binary(
        bench,
        keys,
        ALICE,
        &[
            "publish",
            release,
            "--artifact",
            &pair,
            "--authored-by",
            "ann",
        ],
    )
    .await
}

/// The machine handed over and plan `p1` of [`release_artifact`] proposed, every key
/// use through the binary under `keys`.
async fn proposed_under(bench: &Bench, keys: &Keys) {
    let published = publish(bench, keys, HANDOVER_RELEASE, &artifact(HANDOVER_RELEASE)).await;
    assert_eq!(published.code, 0, "{}", published.all());
    bench
        .ok(ALICE, &["plan", MACHINE, "--adopt", "--id", HANDOVER])
        .await;
    bench.ok(BOB, &["approve", HANDOVER]).await;
    let ran = binary_ok(bench, keys, None, &["run", HANDOVER]).await;
    assert!(ran.ends_with("nothing was sent\n"), "{ran}");
    let published = publish(bench, keys, RELEASE, &release_artifact()).await;
    assert_eq!(published.code, 0, "{}", published.all());
    published.assert_clean();
    assert!(
        published.out.contains("sealed with key artifacts"),
        "{}",
        published.out
    );
    bench
        .ok(
            ALICE,
            &["plan", MACHINE, "--id", "p1", "--transport-deadline", "1"],
        )
        .await;
}

/// The machine's Desired release, as `inventory list --json` prints it.
async fn desired(bench: &Bench) -> Value {
    let text = bench.ok(None, &["inventory", "list", "--json"]).await;
    let rows: Value = serde_json::from_str(&text).expect("inventory JSON");
    rows[0]["desiredRelease"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_are_sealed_and_plans_run_under_transit() {
    let bench = Bench::imported().await;
    let (server, keys) = transit(&bench).await;
    proposed_under(&bench, &keys).await;
    bench.ok(BOB, &["approve", "p1"]).await;
    let ran = binary_ok(&bench, &keys, None, &["run", "p1"]).await;
    assert!(ran.contains("is completed after 1 send(s)"), "{ran}");

    // The node received exactly the published configuration, opened from Transit.
    assert_eq!(
        bench.applies(),
        vec![RecordedCall::ApplyConfiguration {
            mode: ApplyMode::NoReboot,
            dry_run: false,
            data_digest: config_digest(&release_artifact()).to_hex(),
        }]
    );
    let paths: Vec<String> = server
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(
        paths.contains(&"POST /v1/transit/encrypt/artifacts".to_owned()),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"POST /v1/transit/decrypt/artifacts".to_owned()),
        "{paths:?}"
    );
    // No key was made in a keyring.
    assert!(!bench.dir.path().join("keys").join("keyring.json").exists());
    server.shutdown().await;
    bench.stop().await;
}

/// The Transit variables configure the same custody as the configuration file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transit_is_configured_from_the_environment_too() {
    let bench = Bench::imported().await;
    let (server, file_keys) = transit(&bench).await;
    let Keys::TransitFile(config) = &file_keys else {
        unreachable!()
    };
    let config: Value = serde_json::from_str(&std::fs::read_to_string(config).unwrap()).unwrap();
    let token_file = PathBuf::from(config["transit"]["token_file"].as_str().unwrap());
    let keys = Keys::TransitEnv(server.address(), token_file);
    let published = publish(&bench, &keys, HANDOVER_RELEASE, &artifact(HANDOVER_RELEASE)).await;
    assert_eq!(published.code, 0, "{}", published.all());
    assert_eq!(desired(&bench).await, HANDOVER_RELEASE);
    server.shutdown().await;
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transit_refusals_are_clear_and_leak_nothing() {
    let bench = Bench::imported().await;
    let (server, good) = transit(&bench).await;

    // A wrong token: refused as a permission, not a missing key; nothing recorded.
    let wrong = transit_config(&bench, &server.address(), "s.not-a-known-token");
    let ran = publish(
        &bench,
        &wrong,
        HANDOVER_RELEASE,
        &artifact(HANDOVER_RELEASE),
    )
    .await;
    assert_eq!(ran.code, 2, "{}", ran.all());
    assert!(
        ran.err
            .contains("key provider transit denied permission to read key artifacts"),
        "{}",
        ran.err
    );
    assert!(!ran.all().contains("s.not-a-known-token"), "{}", ran.all());
    assert_eq!(desired(&bench).await, Value::Null);

    // Transit unreachable: a port nothing listens on.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let unreachable = transit_config(&bench, &format!("http://127.0.0.1:{closed}"), TOKEN);
    let ran = publish(
        &bench,
        &unreachable,
        HANDOVER_RELEASE,
        &artifact(HANDOVER_RELEASE),
    )
    .await;
    assert_eq!(ran.code, 2, "{}", ran.all());
    assert!(
        ran.err.contains(
            "key provider transit is unavailable (the server cannot be reached); key artifacts \
             was not used"
        ),
        "{}",
        ran.err
    );
    ran.assert_clean();
    assert_eq!(desired(&bench).await, Value::Null);

    // The service refuses to start on either, before it listens.
    for (keys, says) in [
        (&wrong, "denied permission to read key artifacts"),
        (&unreachable, "the server cannot be reached"),
    ] {
        let ran = serve_refused(&bench, keys).await;
        assert_eq!(ran.code, 2, "{}", ran.all());
        assert!(
            ran.err
                .contains("the Transit key custody at http://127.0.0.1:"),
            "{}",
            ran.err
        );
        assert!(ran.err.contains(says), "{}", ran.err);
        assert!(!ran.all().contains("s.not-a-known-token"), "{}", ran.all());
        ran.assert_clean();
    }

    // A plan approved under a good token, then Transit sealed: the run is refused,
    // nothing is sent, and the operator is told why.
    proposed_under(&bench, &good).await;
    bench.ok(BOB, &["approve", "p1"]).await;
    server.seal();
    let ran = binary(&bench, &good, None, &["run", "p1"]).await;
    assert_eq!(ran.code, 1, "{}", ran.all());
    assert!(
        ran.err.contains(
            "refused: key provider transit is unavailable (the server is sealed); key \
             artifacts was not used"
        ),
        "{}",
        ran.err
    );
    ran.assert_clean();
    assert!(bench.applies().is_empty(), "{:?}", bench.applies());
    server.shutdown().await;
    bench.stop().await;
}

/// A service started by the binary, ended (SIGTERM, then SIGKILL) when dropped.
struct Service {
    child: Child,
    base: String,
    stderr: PathBuf,
}

impl Service {
    /// Starts `infra-talos serve` on a free loopback port (no controller) and waits
    /// until it answers.
    async fn start(bench: &Bench, keys: &Keys) -> Service {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let mut service = spawn_serve(bench, keys, port);
        let client = https_with(bench.dir.path(), None, false);
        for _ in 0..300 {
            if let Some(status) = service.child.try_wait().expect("status") {
                panic!("the service exited ({status}): {}", service.stderr_text());
            }
            if client
                .get(format!("{}/healthz", service.base))
                .send()
                .await
                .is_ok()
            {
                return service;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the service did not answer: {}", service.stderr_text());
    }

    fn stderr_text(&self) -> String {
        let mut text = String::new();
        std::fs::File::open(&self.stderr)
            .and_then(|mut f| f.read_to_string(&mut text))
            .expect("stderr");
        text
    }

    /// Stops it with SIGTERM and waits; what it wrote on standard error.
    async fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        for _ in 0..200 {
            if self.child.try_wait().expect("status").is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.stderr_text()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_args(bench: &Bench, port: u16) -> Vec<String> {
    let pki = bench.dir.path().join(PKI);
    vec![
        "serve".into(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--server-certificate".into(),
        pki.join("server.crt").display().to_string(),
        "--server-key".into(),
        pki.join("server.key").display().to_string(),
        "--no-controller".into(),
    ]
}

fn spawn_serve(bench: &Bench, keys: &Keys, port: u16) -> Service {
    server_certificate(bench);
    let args = serve_args(bench, port);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let stderr = bench.dir.path().join(format!("serve-{port}.stderr"));
    let child = command(bench, keys, None, &args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).expect("stderr file"))
        .spawn()
        .expect("the service starts");
    Service {
        child,
        base: format!("https://127.0.0.1:{port}"),
        stderr,
    }
}

/// `serve` that must end by itself (a refusal at start).
async fn serve_refused(bench: &Bench, keys: &Keys) -> Ran {
    server_certificate(bench);
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let args = serve_args(bench, port);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    binary(bench, keys, None, &args).await
}

/// The service's certificate, issued once.
fn server_certificate(bench: &Bench) {
    let pki = bench.dir.path().join(PKI);
    if pki.join("server.crt").exists() {
        return;
    }
    let status = Command::new(BINARY)
        .env_clear()
        .args(["server-certificate", "--pki"])
        .arg(&pki)
        .args(["--name", "127.0.0.1"])
        .stdout(Stdio::null())
        .status()
        .expect("server-certificate");
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_on_transit_shows_a_plan_to_its_approver_only() {
    let bench = Bench::imported().await;
    let (server, keys) = transit(&bench).await;
    proposed_under(&bench, &keys).await;
    let service = Service::start(&bench, &keys).await;
    let dir = bench.dir.path();
    let page = |who: &'static str| {
        let url = format!("{}/plans/p1", service.base);
        async move {
            let r = https_with(dir, Some(who), false)
                .get(url)
                .send()
                .await
                .expect("page");
            assert_eq!(r.status(), reqwest::StatusCode::OK, "{who}");
            r.text().await.expect("text")
        }
    };
    // The approver reads the diff opened from Transit: the new install disk shown,
    // the secret withheld.
    let approver = page("bob").await;
    assert!(approver.contains("/dev/sdb"), "{approver}");
    assert!(!approver.contains(WITHHELD), "{approver}");
    assert!(!approver.contains(SECRET), "{approver}");
    // The publisher who made it sees its digest only.
    let publisher = page("alice").await;
    assert!(publisher.contains(WITHHELD), "{publisher}");
    assert!(
        publisher.contains(&config_digest(&release_artifact()).to_hex()),
        "{publisher}"
    );
    assert!(!publisher.contains("/dev/sdb"), "{publisher}");
    let stderr = service.stop().await;
    assert!(!stderr.contains(TOKEN), "{stderr}");
    assert!(!stderr.contains(SECRET), "{stderr}");
    // Transit is the recommended custody: no development warning.
    assert!(!stderr.contains("meant for development"), "{stderr}");
    server.shutdown().await;
    bench.stop().await;
}

/// The `warn` log lines the binary wrote.
fn warnings(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["level"] == "WARN")
        .map(|line| line["fields"]["message"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyring_beside_the_stores_backups_is_warned_about_at_start() {
    use std::os::unix::fs::PermissionsExt as _;
    let bench = Bench::imported().await;
    let dir = bench.dir.path();
    let elsewhere = tempfile::tempdir().expect("dir");

    // The bench's keyring sits in the SQLite store's own directory.
    let inside = Keys::Keyring(dir.join("keys"), None);
    let ran = publish(
        &bench,
        &inside,
        HANDOVER_RELEASE,
        &artifact(HANDOVER_RELEASE),
    )
    .await;
    assert_eq!(ran.code, 0, "{}", ran.all());
    let told = warnings(&ran.err);
    assert_eq!(told.len(), 1, "{}", ran.err);
    assert!(
        told[0].starts_with(&format!(
            "the keyring {} sits inside the directory of the SQLite store {}",
            dir.join("keys").join("keyring.json").display(),
            dir.join("store.db").display()
        )),
        "{told:?}"
    );

    // A keyring apart from the store: no warning.
    let apart = Keys::Keyring(elsewhere.path().join("keys"), None);
    let ran = binary(&bench, &apart, None, &["run", "--resume"]).await;
    assert_eq!(ran.code, 0, "{}", ran.all());
    assert_eq!(warnings(&ran.err), Vec::<String>::new(), "{}", ran.err);

    // Beside the configured backups directory.
    let backups = elsewhere.path().join("backups");
    let beside = Keys::Keyring(elsewhere.path().join("keys"), Some(backups.clone()));
    let ran = binary(&bench, &beside, None, &["run", "--resume"]).await;
    let told = warnings(&ran.err);
    assert_eq!(told.len(), 1, "{}", ran.err);
    assert!(
        told[0].contains(&format!(
            "sits beside the backups directory {}",
            backups.display()
        )),
        "{told:?}"
    );

    // A keyring directory others may write.
    let open = elsewhere.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let ran = binary(
        &bench,
        &Keys::Keyring(open.clone(), None),
        None,
        &["run", "--resume"],
    )
    .await;
    assert!(
        warnings(&ran.err).contains(&format!(
            "the keyring directory {} may be written by group or others (mode 0777): they \
             can replace the keyring; restrict it to 0700",
            open.display()
        )),
        "{}",
        ran.err
    );

    // A keyring file others may read is refused outright, naming it.
    let keyring_file = dir.join("keys").join("keyring.json");
    std::fs::set_permissions(&keyring_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let ran = publish(&bench, &inside, RELEASE, &artifact(RELEASE)).await;
    assert_eq!(ran.code, 2, "{}", ran.all());
    assert!(
        ran.err.contains(&format!(
            "keyring file {}: is open to group or others (mode 0644); restrict it to 0600",
            keyring_file.display()
        )),
        "{}",
        ran.err
    );
    std::fs::set_permissions(&keyring_file, std::fs::Permissions::from_mode(0o600)).unwrap();

    // The service warns at its start too, and says the keyring is for development.
    let service = Service::start(&bench, &inside).await;
    let stderr = service.stop().await;
    let told = warnings(&stderr);
    assert!(
        told.iter()
            .any(|w| w.contains("sits inside the directory of the SQLite store")),
        "{stderr}"
    );
    assert!(
        told.iter().any(|w| w.contains("meant for development")),
        "{stderr}"
    );
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transit_token_file_others_may_read_is_warned_about() {
    let bench = Bench::imported().await;
    let (server, keys) = transit(&bench).await;
    let Keys::TransitFile(config) = &keys else {
        unreachable!()
    };
    let config: Value = serde_json::from_str(&std::fs::read_to_string(config).unwrap()).unwrap();
    let token_file = PathBuf::from(config["transit"]["token_file"].as_str().unwrap());
    write_with_mode(&token_file, TOKEN, 0o644);
    let ran = publish(&bench, &keys, HANDOVER_RELEASE, &artifact(HANDOVER_RELEASE)).await;
    assert_eq!(ran.code, 0, "{}", ran.all());
    ran.assert_clean();
    assert_eq!(
        warnings(&ran.err),
        vec![format!(
            "the Transit token file {} may be read by group or others (mode 0644): restrict \
             it to 0600",
            token_file.display()
        )],
        "{}",
        ran.err
    );
    server.shutdown().await;
    bench.stop().await;
}

/// A TLS front for the Transit stand-in on a free loopback port, serving `cert_pem`
/// (its key `key_pem`) and passing each request on to `upstream` in plain HTTP; its
/// address. Its threads end with the test process.
fn tls_front(upstream: std::net::SocketAddr, cert_pem: &str, key_pem: &str) -> String {
    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .expect("certificate");
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).expect("key");
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = std::sync::Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("server config"),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let port = listener.local_addr().expect("address").port();
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let config = std::sync::Arc::clone(&config);
            std::thread::spawn(move || {
                let _ = relay(tcp, config, upstream);
            });
        }
    });
    format!("https://127.0.0.1:{port}")
}

/// Passes the requests of one TLS connection on, each over a connection of its own
/// that the stand-in closes after answering.
fn relay(
    tcp: std::net::TcpStream,
    config: std::sync::Arc<rustls::ServerConfig>,
    upstream: std::net::SocketAddr,
) -> std::io::Result<()> {
    use std::io::Write as _;
    let connection = rustls::ServerConnection::new(config).map_err(std::io::Error::other)?;
    let mut tls = rustls::StreamOwned::new(connection, tcp);
    loop {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if tls.read(&mut byte)? == 0 {
                return Ok(());
            }
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        let length = head
            .lines()
            .filter_map(|line| line.split_once(':'))
            .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, value)| value.trim().parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        tls.read_exact(&mut body)?;
        let mut plain = std::net::TcpStream::connect(upstream)?;
        plain.write_all(
            head.replacen("\r\n", "\r\nConnection: close\r\n", 1)
                .as_bytes(),
        )?;
        plain.write_all(&body)?;
        let mut answer = Vec::new();
        plain.read_to_end(&mut answer)?;
        tls.write_all(&answer)?;
        tls.flush()?;
    }
}

/// Transit over HTTPS: the engine's certificate is verified against the configured
/// `ca_certificate`, and against no other root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transit_over_https_trusts_the_configured_authority_only() {
    let bench = Bench::imported().await;
    let (server, _) = transit(&bench).await;
    server_certificate(&bench);
    let pki = bench.dir.path().join(PKI);
    let read = |name: &str| std::fs::read_to_string(pki.join(name)).expect("pki file");
    let address = tls_front(
        server.socket_addr(),
        &read("server.crt"),
        &read("server.key"),
    );
    let with_ca = |ca: &Path| {
        let Keys::TransitFile(config) = transit_config(&bench, &address, TOKEN) else {
            unreachable!()
        };
        let mut value: Value =
            serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
        value["transit"]["ca_certificate"] = ca.display().to_string().into();
        std::fs::write(&config, value.to_string()).unwrap();
        Keys::TransitFile(config)
    };

    // Another authority: the engine's certificate is refused, nothing is sealed.
    let stranger = bench.dir.path().join("stranger-ca.crt");
    let authority =
        infra_talos::identity::Authority::generate("stranger", cli_support::wall_now()).unwrap();
    std::fs::write(&stranger, &authority.certificate_pem).unwrap();
    let ran = publish(
        &bench,
        &with_ca(&stranger),
        HANDOVER_RELEASE,
        &artifact(HANDOVER_RELEASE),
    )
    .await;
    assert_eq!(ran.code, 2, "{}", ran.all());
    assert!(
        ran.err.contains("key provider transit is unavailable"),
        "{}",
        ran.err
    );
    ran.assert_clean();
    assert_eq!(desired(&bench).await, Value::Null);

    // The installation's authority, which issued it: sealed over HTTPS.
    let ran = publish(
        &bench,
        &with_ca(&pki.join("ca.crt")),
        HANDOVER_RELEASE,
        &artifact(HANDOVER_RELEASE),
    )
    .await;
    assert_eq!(ran.code, 0, "{}", ran.all());
    assert_eq!(desired(&bench).await, HANDOVER_RELEASE);
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.path == "/v1/transit/encrypt/artifacts"),
        "{:?}",
        server.requests()
    );
    server.shutdown().await;
    bench.stop().await;
}
