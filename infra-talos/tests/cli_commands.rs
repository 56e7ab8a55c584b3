//! The `talos` command set run in-process against an SQLite store in a temporary
//! directory: human output and `--json` shapes are snapshots; exit codes are 0 (done),
//! 1 (refused by the contract) and 2 (usage or configuration).
#![cfg(feature = "cli")]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

mod cli_support;

use cli_support::redact;
use infra_talos::cli::{Io, run};
use infra_talos::config_digest;

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
        let mut env = BTreeMap::new();
        env.insert("INFRA_TALOS_DATABASE".to_owned(), self.database());
        env.insert(
            "INFRA_TALOS_KEYRING".to_owned(),
            self.dir.path().join("keys").display().to_string(),
        );
        if let Some((id, role)) = actor {
            env.insert("INFRA_TALOS_ACTOR".to_owned(), id.to_owned());
            env.insert("INFRA_TALOS_ROLE".to_owned(), role.to_owned());
        }
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut io = Io {
            out: &mut out,
            err: &mut err,
            env,
        };
        let code = run(
            std::iter::once("infra-talos").chain(args.iter().copied()),
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
    for args in [
        // The first command makes the store file.
        &["--create", "principal", "add", "ann", "--role", "author"][..],
        &["principal", "add", "alice", "--role", "publisher"],
        &["principal", "add", "bob", "--role", "approver"],
        &["principal", "add", "root", "--role", "recovery-admin"],
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
        ],
    ] {
        out += &cli.ok(None, args).await;
    }
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
        (ALICE, &["run", "w1-rel-1-b2"]),
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
