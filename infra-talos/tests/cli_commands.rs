//! The `talos` command set run in-process against an SQLite store in a temporary
//! directory: human output and `--json` shapes are snapshots; exit codes are 0 (done),
//! 1 (refused by the contract) and 2 (usage or configuration).
#![cfg(feature = "cli")]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

mod cli_support;

use cli_support::{PKI, acting, bootstrap_and_register, redact, redact_dir};
use infra_talos::cli::{Io, run};
use infra_talos::config_digest;
use infra_talos::identity::{Authority, issue_client};

const SECRET: &str = "bootstrap-token-9c2e-never-stored";

struct Cli {
    dir: tempfile::TempDir,
}

struct Ran {
    code: ExitCode,
    out: String,
    err: String,
}

impl Cli {
    fn new() -> Cli {
        Cli {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn database(&self) -> String {
        format!("sqlite:{}", self.dir.path().join("store.db").display())
    }

    async fn as_(&self, actor: Option<(&str, &str)>, args: &[&str]) -> Ran {
        self.as_with(actor, args, &[]).await
    }

    /// As [`Cli::as_`], with `extra` set in the environment too.
    async fn as_with(
        &self,
        actor: Option<(&str, &str)>,
        args: &[&str],
        extra: &[(&str, &str)],
    ) -> Ran {
        let mut env: BTreeMap<String, String> = extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        env.insert("INFRA_TALOS_DATABASE".to_owned(), self.database());
        env.insert(
            "INFRA_TALOS_KEYRING".to_owned(),
            self.dir.path().join("keys").display().to_string(),
        );
        let acting = acting(self.dir.path(), actor);
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut io = Io {
            out: &mut out,
            err: &mut err,
            input: None,
            env,
        };
        let code = run(
            std::iter::once("infra-talos")
                .chain(acting.iter().map(String::as_str))
                .chain(args.iter().copied()),
            &mut io,
        )
        .await;
        Ran {
            code,
            out: String::from_utf8(out).unwrap(),
            err: String::from_utf8(err).unwrap(),
        }
    }

    async fn ok(&self, actor: Option<(&str, &str)>, args: &[&str]) -> String {
        let ran = self.as_(actor, args).await;
        assert_eq!(ran.code, ExitCode::SUCCESS, "{args:?}: {}", ran.err);
        ran.out
    }

    async fn refused(&self, actor: Option<(&str, &str)>, args: &[&str]) -> String {
        let ran = self.as_(actor, args).await;
        assert_eq!(
            ran.code,
            ExitCode::from(1),
            "{args:?}: {} {}",
            ran.out,
            ran.err
        );
        ran.err
    }

    fn config_file(&self, machine: &str, release: &str) -> String {
        let path = self.dir.path().join(format!("{machine}-{release}.yaml"));
        std::fs::write(&path, config(machine, release)).unwrap();
        format!("{machine}={}", path.display())
    }
}

fn config(machine: &str, release: &str) -> String {
    format!(
        "version: v1alpha1\nmachine:\n  type: worker\n  token: {SECRET}\n# {machine} {release}\n"
    )
}

const ANN: Option<(&str, &str)> = Some(("ann", "author"));
const ALICE: Option<(&str, &str)> = Some(("alice", "publisher"));
const BOB: Option<(&str, &str)> = Some(("bob", "approver"));
const ROOT: Option<(&str, &str)> = Some(("root", "recovery-admin"));

fn baseline(machine: &str) -> String {
    config_digest(format!("machine: {machine}\nversion: base\n").as_bytes()).to_hex()
}

async fn world(cli: &Cli) -> String {
    let mut out = String::new();
    let people: [(&str, &[&str]); 3] = [
        ("ann", &["author"]),
        ("alice", &["publisher"]),
        ("bob", &["approver"]),
    ];
    // The first command makes the store file.
    for (n, line) in bootstrap_and_register(cli.dir.path(), &people)
        .iter()
        .enumerate()
    {
        let args: Vec<&str> = line.iter().map(String::as_str).collect();
        let actor = if n == 0 { None } else { ROOT };
        out += &cli.ok(actor, &args).await;
    }
    let pki = cli.dir.path().join(PKI).display().to_string();
    out += &cli
        .ok(
            ROOT,
            &[
                "principal",
                "add",
                "bot",
                "--role",
                "automation",
                "--role",
                "publisher",
                "--token",
                "--responsible",
                "alice",
                "--pki",
                &pki,
            ],
        )
        .await;
    out = redact_dir(&out, cli.dir.path());
    let b1 = baseline("w1");
    let b2 = baseline("w2");
    out += &cli
        .ok(
            ANN,
            &[
                "inventory",
                "add",
                "w1",
                "--endpoint",
                "127.0.0.1:50001",
                "--smbios-uuid",
                "uuid-w1",
                "--cluster-id",
                "cluster-a",
                "--talos-minor",
                "1.10",
                "--import-digest",
                &b1,
            ],
        )
        .await;
    out += &cli
        .ok(
            ANN,
            &[
                "inventory",
                "add",
                "w2",
                "--endpoint",
                "127.0.0.1:50002",
                "--node-id",
                "node-w2",
                "--cluster-id",
                "cluster-a",
                "--talos-minor",
                "1.10",
                "--import-digest",
                &b2,
            ],
        )
        .await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inventory_publish_plan_approve_revoke_cancel_and_the_timeline() {
    let cli = Cli::new();
    let mut transcript = world(&cli).await;
    transcript += &cli.ok(None, &["inventory", "list"]).await;
    insta::assert_snapshot!(
        "inventory_json",
        cli.ok(None, &["inventory", "list", "--json"]).await
    );

    let (a1, a2) = (
        cli.config_file("w1", "rel-1"),
        cli.config_file("w2", "rel-1"),
    );
    transcript += &cli
        .ok(
            ALICE,
            &[
                "publish",
                "rel-1",
                "--artifact",
                &a1,
                "--artifact",
                &a2,
                "--authored-by",
                "ann",
            ],
        )
        .await;
    // An imported machine has no Applied: nothing can be applied to it until an
    // approved adopt plan hands it over (§6.3); that plan sends nothing.
    transcript += &cli.refused(ALICE, &["plan", "w1"]).await;
    transcript += &cli.ok(ALICE, &["plan", "w1", "--adopt"]).await;
    transcript += &cli.refused(ALICE, &["approve", "w1-rel-1-b0-adopt"]).await;
    transcript += &cli
        .refused(Some(("bot", "approver")), &["approve", "w1-rel-1-b0-adopt"])
        .await;
    transcript += &cli
        .refused(
            Some(("bot", "automation")),
            &["approve", "--blanket", "w1-rel-1-b0-adopt"],
        )
        .await;
    transcript += &cli.ok(BOB, &["approve", "w1-rel-1-b0-adopt"]).await;
    transcript += &cli.ok(BOB, &["revoke", "w1-rel-1-b0-adopt"]).await;
    transcript += &cli
        .ok(ALICE, &["plan", "w2", "--adopt", "--id", "p-w2"])
        .await;
    transcript += &cli.ok(ALICE, &["cancel", "p-w2"]).await;
    transcript += &cli.refused(BOB, &["approve", "p-w2"]).await;
    // Freeze and unfreeze (§6.2): a reason each, a no-op refused, only an approver
    // lifts a freeze.
    // A mistyped machine is named with the nearest ones; a name near none, without.
    transcript += &cli
        .refused(ANN, &["freeze", "w22", "--reason", "disk swap"])
        .await;
    transcript += &cli
        .refused(
            ANN,
            &["freeze", "database-primary", "--reason", "disk swap"],
        )
        .await;
    transcript += &cli
        .ok(ANN, &["freeze", "w2", "--reason", "disk swap"])
        .await;
    transcript += &cli
        .refused(ANN, &["freeze", "w2", "--reason", "again"])
        .await;
    transcript += &cli
        .refused(ALICE, &["unfreeze", "w2", "--reason", "done"])
        .await;
    transcript += &cli.refused(BOB, &["unfreeze", "w2", "--reason", " "]).await;
    transcript += &cli
        .ok(BOB, &["unfreeze", "w2", "--reason", "swap done"])
        .await;
    transcript += &cli.refused(BOB, &["revoke", "--identity", "alice"]).await;
    transcript += &cli.ok(ROOT, &["revoke", "--identity", "bob"]).await;
    transcript += &cli
        .refused(ROOT, &["account", "op-missing", "--attempt", "1"])
        .await;
    insta::assert_snapshot!("transcript", redact(&transcript));

    let text = cli.ok(None, &["timeline", "w1"]).await;
    insta::assert_snapshot!("timeline_text", redact(&text));
    let json = cli.ok(None, &["timeline", "w1", "--json"]).await;
    insta::assert_snapshot!("timeline_json", redact(&json));

    // The store file never holds the plaintext.
    let bytes = std::fs::read(cli.dir.path().join("store.db")).unwrap();
    assert!(!bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_and_configuration_errors_exit_2() {
    let cli = Cli::new();
    world(&cli).await;
    let mut transcript = String::new();
    for (actor, args) in [
        (None, &["plan", "w1"][..]),
        (Some(("alice", "chief")), &["plan", "w1"]),
        (ALICE, &["frobnicate"]),
        (ALICE, &["publish", "rel-1", "--artifact", "w1"]),
        (ALICE, &["--database", "mysql://nowhere", "plan", "w1"]),
        (ALICE, &["drift"]),
    ] {
        let ran = cli.as_(actor, args).await;
        assert_eq!(ran.code, ExitCode::from(2), "{args:?}: {}", ran.err);
        let first = ran.err.lines().next().unwrap_or_default().to_owned();
        transcript += &format!("{}\n", first);
    }
    let missing = cli.dir.path().join("absent.json");
    let ran = cli
        .as_(
            ALICE,
            &["--config", missing.to_str().unwrap(), "plan", "w1"],
        )
        .await;
    assert_eq!(ran.code, ExitCode::from(2));
    // A machine without a Desired release: the contract refuses (1).
    transcript += &cli.refused(ALICE, &["plan", "w1"]).await;
    insta::assert_snapshot!("usage_errors", transcript);
    assert!(!Path::new(&missing).exists());
}

/// A configuration no Talos node would take is refused before anything is recorded
/// (exit 1, naming the file and why), and a command about a plan speaks of the plan
/// before anything else: no talosconfig is configured here, and `run` never gets as
/// far as needing one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_name_the_file_and_the_plan_first() {
    let cli = Cli::new();
    world(&cli).await;
    let dir = cli.dir.path();
    let good = cli.config_file("w2", "rel-2");
    let not_yaml = dir.join("not-yaml.yaml");
    std::fs::write(&not_yaml, format!("machine: [{SECRET}\n")).unwrap();
    let untyped = dir.join("untyped.yaml");
    std::fs::write(&untyped, format!("machine:\n  token: {SECRET}\n")).unwrap();
    let list = dir.join("list.yaml");
    std::fs::write(&list, "- a\n- b\n").unwrap();
    let mut transcript = String::new();
    for file in [Path::new("/dev/null"), &not_yaml, &untyped, &list] {
        let pair = format!("w1={}", file.display());
        let ran = cli
            .as_(
                ALICE,
                &["publish", "rel-2", "--artifact", &good, "--artifact", &pair],
            )
            .await;
        assert_eq!(
            ran.code,
            ExitCode::from(1),
            "{pair}: {}{}",
            ran.out,
            ran.err
        );
        assert!(ran.out.is_empty(), "{}", ran.out);
        assert!(
            ran.err.contains(&file.display().to_string()),
            "the refusal names the file: {}",
            ran.err
        );
        assert!(!ran.err.contains(SECRET), "{}", ran.err);
        transcript += &ran.err;
    }
    // Nothing was recorded: neither machine has a Desired release, and the
    // release's identifier is still free.
    let listed: serde_json::Value =
        serde_json::from_str(&cli.ok(None, &["inventory", "list", "--json"]).await).unwrap();
    for machine in listed.as_array().unwrap() {
        assert!(machine["desiredRelease"].is_null(), "{listed}");
    }
    cli.ok(ALICE, &["publish", "rel-2", "--artifact", &good])
        .await;

    // A plan that does not exist is said not to exist, by every command about a plan.
    for args in [
        &["run", "no-such-plan"][..],
        &["approve", "no-such-plan"],
        &["revoke", "no-such-plan"],
        &["cancel", "no-such-plan"],
    ] {
        let actor = if args[0] == "cancel" { ALICE } else { BOB };
        transcript += &cli.refused(actor, args).await;
    }
    // A plan in a state `run` does not apply to is refused for that, not for the
    // missing talosconfig: a proposed apply-config plan, and an adopt plan not
    // approved yet.
    cli.ok(ALICE, &["plan", "w2", "--adopt", "--id", "p-adopt"])
        .await;
    transcript += &cli.refused(BOB, &["run", "p-adopt"]).await;
    cli.ok(BOB, &["approve", "p-adopt"]).await;
    cli.ok(ALICE, &["cancel", "p-adopt"]).await;
    transcript += &cli.refused(BOB, &["run", "p-adopt"]).await;
    // An approved one gets as far as the talosconfig.
    cli.ok(ALICE, &["plan", "w2", "--adopt", "--id", "p-adopt-2"])
        .await;
    cli.ok(BOB, &["approve", "p-adopt-2"]).await;
    let ran = cli.as_(BOB, &["run", "p-adopt-2"]).await;
    assert_eq!(ran.code, ExitCode::from(2), "{}", ran.err);
    transcript += &ran.err;
    insta::assert_snapshot!("refusals_first", redact_dir(&transcript, dir));
}

/// `init` records whether approvals need a second person (`--approvals-need-second-person`,
/// asked at a terminal; the contract's `no` otherwise), says which, and journals it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_records_whether_approvals_need_a_second_person() {
    let cli = Cli::new();
    let pki = cli.dir.path().join(PKI).display().to_string();
    let init = ["--create", "init", "--admin", "root", "--pki", &pki];
    let flag = "--approvals-need-second-person";
    let bad = cli.as_(None, &[&init[..], &[flag, "maybe"]].concat()).await;
    assert_eq!(bad.code, ExitCode::from(2), "{}", bad.err);
    assert!(bad.err.contains("is neither yes nor no"), "{}", bad.err);
    let out = cli.ok(None, &[&init[..], &[flag, "yes"]].concat()).await;
    assert!(
        out.contains("\napprovals need a second person: yes (a self-approval is refused)\n"),
        "{out}"
    );
    let journal = cli.ok(None, &["principal", "journal"]).await;
    assert!(
        journal.contains("approvals need a second person: yes"),
        "{journal}"
    );
    // Without the flag and without a terminal: the contract's reading.
    let other = Cli::new();
    let pki = other.dir.path().join(PKI).display().to_string();
    let out = other
        .ok(
            None,
            &["--create", "init", "--admin", "root", "--pki", &pki],
        )
        .await;
    assert!(
        out.contains(
            "\napprovals need a second person: no (a self-approval is recorded with its mark)\n"
        ),
        "{out}"
    );
    // At a terminal, without the flag, the question is asked and the answer kept.
    let asked = Cli::new();
    let pki = asked.dir.path().join(PKI).display().to_string();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut typed: &[u8] = b"perhaps\nyes\n";
    let mut io = Io {
        out: &mut out,
        err: &mut err,
        input: Some(&mut typed),
        env: BTreeMap::from([("INFRA_TALOS_DATABASE".to_owned(), asked.database())]),
    };
    let code = run(
        [
            "infra-talos",
            "--create",
            "init",
            "--admin",
            "root",
            "--pki",
            &pki,
        ],
        &mut io,
    )
    .await;
    let (out, err) = (
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    );
    assert_eq!(code, ExitCode::SUCCESS, "{err}");
    assert_eq!(
        err.matches("Do approvals need a second person?").count(),
        2,
        "{err}"
    );
    assert!(
        out.contains("\napprovals need a second person: yes (a self-approval is refused)\n"),
        "{out}"
    );
}

/// Who acts is proven by a certificate from the installation's authority, never
/// named: an identity in the environment or the configuration is refused; a
/// certificate from another authority, or presented with another key, proves no
/// one; a principal acts only in a role it holds and not once revoked; only an
/// administrator registers, changes or issues, never for itself; the bootstrap is
/// made once and never overwrites a file. Every act is in the identity journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identities_are_proven_not_named() {
    let cli = Cli::new();
    world(&cli).await;
    let dir = cli.dir.path();
    let pki = dir.join(PKI);
    let mut transcript = String::new();
    fn exit(transcript: &mut String, code: u8, ran: Ran) {
        assert_eq!(ran.code, ExitCode::from(code), "{}{}", ran.out, ran.err);
        *transcript += &format!("[{code}] {}", ran.err);
    }
    // Named identities are refused, not used.
    exit(
        &mut transcript,
        2,
        cli.as_with(
            None,
            &["revoke", "--identity", "bob"],
            &[("INFRA_TALOS_ACTOR", "root")],
        )
        .await,
    );
    exit(
        &mut transcript,
        2,
        cli.as_with(
            ALICE,
            &["principal", "journal"],
            &[("INFRA_TALOS_ROLE", "approver")],
        )
        .await,
    );
    let named = dir.join("named.json");
    std::fs::write(&named, r#"{"actor": "root", "role": "recovery-admin"}"#).unwrap();
    exit(
        &mut transcript,
        2,
        cli.as_(
            None,
            &[
                "--config",
                named.to_str().unwrap(),
                "revoke",
                "--identity",
                "bob",
            ],
        )
        .await,
    );
    // Another authority's certificate naming root proves no one.
    let now = cli_support::wall_now();
    let other = Authority::generate("elsewhere", now).unwrap();
    let forged = issue_client(
        &other.certificate_pem,
        &other.key_pem,
        "root",
        now,
        std::time::Duration::from_secs(3600),
    )
    .unwrap();
    let forged_dir = dir.join("forged");
    std::fs::create_dir(&forged_dir).unwrap();
    std::fs::write(forged_dir.join("root.crt"), &forged.certificate_pem).unwrap();
    std::fs::write(forged_dir.join("root.key"), forged.key_pem.as_str()).unwrap();
    let as_forged = |args: &[&str]| -> Vec<String> {
        [
            "--certificate",
            forged_dir.join("root.crt").to_str().unwrap(),
            "--private-key",
            forged_dir.join("root.key").to_str().unwrap(),
            "--as",
            "recovery-admin",
        ]
        .iter()
        .chain(args)
        .map(|a| (*a).to_owned())
        .collect()
    };
    let line = as_forged(&["revoke", "--identity", "bob"]);
    let line: Vec<&str> = line.iter().map(String::as_str).collect();
    exit(&mut transcript, 2, cli.as_(None, &line).await);
    // Root's certificate with bob's key proves no one either.
    let (root_crt, bob_key) = (pki.join("root.crt"), pki.join("bob.key"));
    let crossed = [
        "--certificate",
        root_crt.to_str().unwrap(),
        "--private-key",
        bob_key.to_str().unwrap(),
        "--as",
        "recovery-admin",
        "revoke",
        "--identity",
        "bob",
    ];
    exit(&mut transcript, 2, cli.as_(None, &crossed).await);
    // A role not held, a role that may not register, one's own roles.
    exit(
        &mut transcript,
        1,
        cli.as_(
            Some(("bob", "recovery-admin")),
            &["principal", "add", "eve", "--role", "approver"],
        )
        .await,
    );
    exit(
        &mut transcript,
        1,
        cli.as_(ALICE, &["principal", "add", "eve", "--role", "approver"])
            .await,
    );
    exit(
        &mut transcript,
        1,
        cli.as_(ROOT, &["principal", "roles", "root", "--role", "approver"])
            .await,
    );
    transcript += &cli
        .ok(
            ROOT,
            &[
                "principal",
                "roles",
                "ann",
                "--role",
                "author",
                "--role",
                "publisher",
            ],
        )
        .await;
    // The bootstrap is made once; a refused one leaves no file behind, and no file is
    // ever overwritten.
    let second = dir.join("second");
    exit(
        &mut transcript,
        1,
        cli.as_(
            None,
            &[
                "init",
                "--admin",
                "mallory",
                "--pki",
                second.to_str().unwrap(),
            ],
        )
        .await,
    );
    assert_eq!(std::fs::read_dir(&second).unwrap().count(), 0);
    let ca_before = std::fs::read(pki.join("ca.key")).unwrap();
    exit(
        &mut transcript,
        2,
        cli.as_(
            ROOT,
            &[
                "principal",
                "certificate",
                "bob",
                "--pki",
                pki.to_str().unwrap(),
            ],
        )
        .await,
    );
    assert_eq!(std::fs::read(pki.join("ca.key")).unwrap(), ca_before);
    // A revoked identity's certificate no longer proves it (its binding ended), and
    // none is issued for it.
    transcript += &cli.ok(ROOT, &["revoke", "--identity", "bob"]).await;
    exit(
        &mut transcript,
        2,
        cli.as_(BOB, &["freeze", "w1", "--reason", "late"]).await,
    );
    let reissue = dir.join("reissue");
    std::fs::create_dir(&reissue).unwrap();
    std::fs::copy(pki.join("ca.crt"), reissue.join("ca.crt")).unwrap();
    std::fs::copy(pki.join("ca.key"), reissue.join("ca.key")).unwrap();
    exit(
        &mut transcript,
        1,
        cli.as_(
            ROOT,
            &[
                "principal",
                "certificate",
                "bob",
                "--pki",
                reissue.to_str().unwrap(),
            ],
        )
        .await,
    );
    transcript += &cli
        .ok(
            ROOT,
            &[
                "principal",
                "certificate",
                "ann",
                "--pki",
                reissue.to_str().unwrap(),
            ],
        )
        .await;
    transcript += &cli.ok(None, &["principal", "journal"]).await;
    let journal: serde_json::Value =
        serde_json::from_str(&cli.ok(None, &["principal", "journal", "--json"]).await).unwrap();
    assert_eq!(journal.as_array().unwrap().len(), 13, "{journal}");
    insta::assert_snapshot!("identities", redact_dir(&redact(&transcript), dir));
}
