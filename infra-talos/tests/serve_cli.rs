//! The command line through the service (`--server`): every act reaches the store
//! only through the service's API, proven by a client certificate or a token, and
//! prints what the same act prints on the database, with the same exit code.
//!
//! Each command here is given a database that does not exist: had it been opened,
//! the command would have failed.

mod cli_support;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use cli_support::bench::{
    ALICE, BOB, Bench, HANDOVER, HANDOVER_RELEASE, MACHINE, RELEASE, ROOT, Ran, artifact,
};
use cli_support::{PKI, acting};
use infra_talos::cli::{Io, run};

/// How the command line reaches the service.
enum Proof<'a> {
    /// The principal's client certificate, acting in a role.
    Certificate(Option<(&'a str, &'a str)>),
    /// A token file, acting in a role.
    Token(&'a std::path::Path, &'a str),
    /// Nothing.
    None,
}

async fn remote(bench: &Bench, base: &str, proof: Proof<'_>, args: &[&str]) -> Ran {
    let dir = bench.dir.path();
    let mut env = BTreeMap::new();
    // A store that does not exist: through the service, it is never opened.
    env.insert(
        "INFRA_TALOS_DATABASE".to_owned(),
        format!("sqlite:{}", dir.join("absent").join("none.db").display()),
    );
    let mut line: Vec<String> = vec![
        "infra-talos".into(),
        "--server".into(),
        base.into(),
        "--server-ca".into(),
        dir.join(PKI).join("ca.crt").display().to_string(),
    ];
    match proof {
        Proof::Certificate(actor) => line.extend(acting(dir, actor)),
        Proof::Token(file, role) => line.extend([
            "--token-file".into(),
            file.display().to_string(),
            "--as".into(),
            role.into(),
        ]),
        Proof::None => {}
    }
    line.extend(args.iter().map(|a| (*a).to_owned()));
    let mut out = Vec::new();
    let mut err = Vec::new();
    let mut io = Io {
        out: &mut out,
        err: &mut err,
        input: None,
        env,
    };
    let code = run(line, &mut io).await;
    Ran {
        code,
        out: String::from_utf8(out).expect("stdout is UTF-8"),
        err: String::from_utf8(err).expect("stderr is UTF-8"),
    }
}

async fn remote_ok(
    bench: &Bench,
    base: &str,
    actor: Option<(&str, &str)>,
    args: &[&str],
) -> String {
    let ran = remote(bench, base, Proof::Certificate(actor), args).await;
    assert_eq!(
        ran.code,
        ExitCode::SUCCESS,
        "{args:?}: {}{}",
        ran.out,
        ran.err
    );
    ran.out
}

/// The same command by both roads: the same exit code, output and error.
async fn same_by_both_roads(
    bench: &Bench,
    base: &str,
    actor: Option<(&str, &str)>,
    args: &[&str],
) -> Ran {
    let direct = bench.cli(actor, args).await;
    let through = remote(bench, base, Proof::Certificate(actor), args).await;
    assert_eq!(
        (direct.code, &direct.out, &direct.err),
        (through.code, &through.out, &through.err),
        "{args:?} differs between the database and the service"
    );
    through
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_acts_through_the_service() {
    let bench = Bench::imported().await;
    // The first release through the database makes the keyring's key, which the
    // service then seals with (a service makes no keys).
    bench.publish(HANDOVER_RELEASE).await;
    let (service, base) = bench.serve_every(true, Duration::from_secs(3600)).await;

    // The handover: planned, refused to a publisher, approved, and run, all through
    // the service.
    let planned = remote_ok(
        &bench,
        &base,
        ALICE,
        &["plan", MACHINE, "--adopt", "--id", HANDOVER],
    )
    .await;
    assert!(
        planned.starts_with("plan handover created by alice (publisher) for machine m1: adopt"),
        "{planned}"
    );
    let refused = same_by_both_roads(&bench, &base, ALICE, &["approve", HANDOVER]).await;
    assert_eq!(refused.code, ExitCode::from(1), "{}", refused.err);
    assert!(refused.err.starts_with("refused: "), "{}", refused.err);
    remote_ok(&bench, &base, BOB, &["approve", HANDOVER]).await;
    let ran = remote_ok(&bench, &base, BOB, &["run", HANDOVER]).await;
    assert!(ran.ends_with("nothing was sent\n"), "{ran}");

    // A release uploaded to the service and sealed there; a plan, its approval and
    // its run.
    let file = bench.dir.path().join("m1-rel-1.yaml");
    std::fs::write(&file, artifact(RELEASE)).expect("artifact file");
    let pair = format!("{MACHINE}={}", file.display());
    let published = remote_ok(
        &bench,
        &base,
        ALICE,
        &[
            "publish",
            RELEASE,
            "--artifact",
            &pair,
            "--authored-by",
            "ann",
        ],
    )
    .await;
    assert!(
        published.starts_with("release rel-1 published by alice (publisher), sealed with key artifacts:\n  m1  digest "),
        "{published}"
    );
    let planned = remote_ok(
        &bench,
        &base,
        ALICE,
        &["plan", MACHINE, "--id", "p1", "--transport-deadline", "1"],
    )
    .await;
    assert!(planned.ends_with("state proposed\n"), "{planned}");
    remote_ok(&bench, &base, BOB, &["approve", "p1"]).await;
    assert!(bench.applies().is_empty(), "nothing is sent before the run");
    let ran = remote_ok(&bench, &base, ALICE, &["run", "p1"]).await;
    assert!(ran.contains("is completed after 1 send(s)"), "{ran}");
    assert_eq!(bench.applies().len(), 1);

    // Reads print the same by either road, a typo's suggestion included.
    for args in [
        &["timeline", MACHINE, "--json"][..],
        &["timeline", MACHINE],
        &["inventory", "list"],
        &["inventory", "list", "--json"],
        &["blanket", "list"],
        &["principal", "journal"],
        &["recovery", "status", "--json"],
        &["timeline", "m2"],
    ] {
        same_by_both_roads(&bench, &base, BOB, args).await;
    }
    let typo = remote(&bench, &base, Proof::Certificate(BOB), &["timeline", "m2"]).await;
    assert!(typo.err.contains("did you mean 'm1'?"), "{}", typo.err);

    // Drift through the service's controller: the machine is as applied.
    let drift = remote_ok(&bench, &base, BOB, &["drift"]).await;
    assert!(
        drift.contains("1 machine(s) observed: 0 with an open drift record, 0 not read"),
        "{drift}"
    );

    // Acts on principals through the service, by the administrator only.
    let refused = same_by_both_roads(
        &bench,
        &base,
        BOB,
        &["principal", "add", "eve", "--role", "approver"],
    )
    .await;
    assert_eq!(refused.code, ExitCode::from(1), "{}", refused.err);
    let added = remote_ok(
        &bench,
        &base,
        ROOT,
        &["principal", "add", "carol", "--role", "approver"],
    )
    .await;
    assert_eq!(
        added,
        "principal carol registered by root (recovery-admin): approver\n"
    );

    // A token the service issued proves bob without his certificate.
    let token = remote_ok(&bench, &base, BOB, &["token", "--lifetime", "10m"]).await;
    let token_file = bench.dir.path().join("bob.token");
    std::fs::write(&token_file, &token).expect("token file");
    let granted = remote(
        &bench,
        &base,
        Proof::Token(&token_file, "approver"),
        &[
            "blanket",
            "grant",
            "--cluster",
            &bench.sim.facts().cluster_id,
            "--reason",
            "rollout",
            "--for",
            "1h",
        ],
    )
    .await;
    assert_eq!(granted.code, ExitCode::SUCCESS, "{}", granted.err);
    assert!(
        granted.out.contains("granted for cluster"),
        "{}",
        granted.out
    );
    assert!(granted.out.contains("by bob (approver)"), "{}", granted.out);

    // Refused on every path: no proof, a made-up token, a token asking for a
    // token, and the act made on the store only.
    let none = remote(&bench, &base, Proof::None, &["inventory", "list"]).await;
    assert_eq!(none.code, ExitCode::from(2), "{}", none.err);
    assert!(none.err.contains("no proof of identity"), "{}", none.err);
    let forged = bench.dir.path().join("forged.token");
    std::fs::write(&forged, "v1.bob.9999999999999.AAAA").expect("forged token");
    let forged = remote(
        &bench,
        &base,
        Proof::Token(&forged, "approver"),
        &["inventory", "list"],
    )
    .await;
    assert_eq!(forged.code, ExitCode::from(2), "{}", forged.err);
    assert!(forged.err.contains("no proven principal"), "{}", forged.err);
    let again = remote(
        &bench,
        &base,
        Proof::Token(&token_file, "approver"),
        &["token"],
    )
    .await;
    assert_eq!(again.code, ExitCode::from(1), "{}", again.err);
    assert!(
        again
            .err
            .contains("only to a principal proven by its client certificate"),
        "{}",
        again.err
    );
    // `init` is made on the store only (`recovery enter` is an act through the
    // service: see `recovery_is_entered_through_the_service`).
    let args = ["init", "--admin", "mallory", "--pki", "elsewhere"];
    let ran = remote(&bench, &base, Proof::Certificate(ROOT), &args).await;
    assert_eq!(ran.code, ExitCode::from(2), "{args:?}: {}", ran.err);
    assert!(
        ran.err.contains("is made on the store (--database)"),
        "{}",
        ran.err
    );
    // The store the commands were given was never made.
    assert!(!bench.dir.path().join("absent").exists());

    service.shutdown().await;
    bench.stop().await;
}

/// A drift record is settled from the command line as from the page: `adopt` and
/// `revert` make the plans the page's drift forms make, by either road, with the
/// same refusals word for word (a role that does not make plans, a revert with no
/// open record, an identifier taken).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_and_revert_settle_a_drift_record_by_either_road() {
    let bench = Bench::new().await;
    bench.publish(RELEASE).await;
    let (service, base) = bench.serve_every(true, Duration::from_secs(3600)).await;

    // No open drift record: a revert has nothing to overwrite.
    let none = same_by_both_roads(&bench, &base, ALICE, &["revert", MACHINE]).await;
    assert_eq!(none.code, ExitCode::from(1), "{}", none.err);
    assert!(none.err.starts_with("refused: "), "{}", none.err);

    bench
        .sim
        .drift_config(b"version: v1alpha1\nmachine:\n  type: controlplane\n".to_vec());
    let pass = bench.ok(None, &["drift"]).await;
    assert!(pass.contains("DRIFTED: drift record r"), "{pass}");

    // An approver makes no plans, by either road, in the same words.
    for act in ["adopt", "revert"] {
        let refused = same_by_both_roads(&bench, &base, BOB, &[act, MACHINE]).await;
        assert_eq!(refused.code, ExitCode::from(1), "{act}: {}", refused.err);
        assert!(refused.err.starts_with("refused: "), "{}", refused.err);
    }

    // The publisher plans the adoption through the service (the page's default
    // identifier) and the revert on the database.
    let adopt = remote_ok(&bench, &base, ALICE, &["adopt", MACHINE]).await;
    let (adopt_id, rest) = adopt
        .strip_prefix("plan ")
        .and_then(|a| a.split_once(' '))
        .expect("a plan line");
    assert!(
        adopt_id.starts_with("m1-rel-1-b") && adopt_id.ends_with("-adopt"),
        "{adopt}"
    );
    assert!(
        rest.starts_with(
            "created by alice (publisher) for machine m1: adopt the configuration of drift record "
        ),
        "{adopt}"
    );
    let revert = bench
        .ok(ALICE, &["revert", MACHINE, "--id", "p-revert"])
        .await;
    assert!(
        revert.starts_with(
            "plan p-revert created by alice (publisher) for machine m1: release rel-1"
        ),
        "{revert}"
    );
    let taken = same_by_both_roads(
        &bench,
        &base,
        ALICE,
        &["revert", MACHINE, "--id", "p-revert"],
    )
    .await;
    assert_eq!(taken.code, ExitCode::from(1), "{}", taken.err);

    // What the store holds: an adopt plan and a revert, each binding the record.
    let plans = bench.ok(None, &["timeline", MACHINE, "--json"]).await;
    let plans: serde_json::Value = serde_json::from_str(&plans).expect("timeline JSON");
    let text = plans.to_string();
    assert!(
        text.contains(adopt_id) && text.contains("p-revert"),
        "{text}"
    );

    // The revert, approved, overwrites what no reviewer saw, and says so.
    let approved = remote_ok(&bench, &base, BOB, &["approve", "p-revert"]).await;
    assert!(approved.contains("unseenOverwrite"), "{approved}");

    service.shutdown().await;
    bench.stop().await;
}

/// In an installation whose approvals need a second person, a principal approving a
/// plan it made is refused by either road in the same words, and nothing is
/// recorded; another approver approves it. A configuration no node would take is
/// refused by the service's API itself, naming the machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_person_approves_by_either_road() {
    let bench = Bench::imported_under(true).await;
    let out = bench.hand_over().await;
    assert!(out.ends_with("nothing was sent\n"), "{out}");
    let pki = bench.dir.path().join(PKI).display().to_string();
    bench
        .ok(
            ROOT,
            &[
                "principal",
                "add",
                "pat",
                "--role",
                "publisher",
                "--role",
                "approver",
                "--pki",
                &pki,
            ],
        )
        .await;
    bench.publish(RELEASE).await;
    bench
        .ok(
            Some(("pat", "publisher")),
            &["plan", MACHINE, "--id", "p-pat"],
        )
        .await;
    let (service, base) = bench.serve_every(false, Duration::from_secs(3600)).await;

    let pat = Some(("pat", "approver"));
    let before = bench.ok(None, &["timeline", MACHINE, "--json"]).await;
    let refused = same_by_both_roads(&bench, &base, pat, &["approve", "p-pat"]).await;
    assert_eq!(refused.code, ExitCode::from(1), "{}", refused.err);
    assert_eq!(
        refused.err,
        "refused: approving: this installation's approvals need a second person, and pat may \
         not approve plan p-pat: self-approval: the approver created the plan\n"
    );
    let after = bench.ok(None, &["timeline", MACHINE, "--json"]).await;
    assert_eq!(before, after, "a refused approval records nothing");
    let approved = remote_ok(&bench, &base, BOB, &["approve", "p-pat"]).await;
    assert!(
        approved.starts_with("plan p-pat approved by bob (approver): not self-approval"),
        "{approved}"
    );

    // The API refuses an empty configuration itself (the command line checks first).
    let alice = cli_support::https(bench.dir.path(), Some("alice"));
    let answer = alice
        .post(format!("{base}/api/v1/releases"))
        .json(&serde_json::json!({
            "as": "publisher",
            "release": {
                "release": "rel-empty",
                "key": "artifacts",
                "authors": [],
                "artifacts": [{ "machine": MACHINE, "configuration": "" }],
            },
        }))
        .send()
        .await
        .expect("answer");
    assert_eq!(answer.status(), reqwest::StatusCode::FORBIDDEN);
    let body: serde_json::Value = answer.json().await.expect("JSON");
    assert_eq!(
        body["error"],
        "refused: publishing release rel-empty: the configuration for machine m1 is not a \
         Talos machine configuration: it is empty",
        "{body}"
    );
    let listed = bench.ok(None, &["inventory", "list"]).await;
    assert!(listed.contains("desired rel-1"), "{listed}");

    service.shutdown().await;
    bench.stop().await;
}

fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// `recovery enter` through the service, like every other act: the same usage
/// errors and refusals as on the database, word for word, and nothing entered by
/// them; recovery-admin's entry then holds, and `recovery status` says so by either
/// road.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_is_entered_through_the_service() {
    let bench = Bench::new().await;
    let (service, base) = bench.serve_every(false, Duration::from_secs(3600)).await;
    let now = infra_talos::backend::WallTime::system(std::sync::Arc::new(
        infra_core::engine::SystemClock::new(),
    ))
    .now()
    .0;
    let stopped = infra_talos::cli::iso(now - 60_000);
    let backup = format!(
        "database=store-0412.dump@{}",
        infra_talos::cli::iso(now - 3_600_000)
    );
    let enter = |backups: &[&str]| {
        let mut args = vec!["recovery", "enter", "--stopped-at", &stopped];
        for b in backups {
            args.extend(["--backup", b]);
        }
        args.iter()
            .map(|a| (*a).to_owned())
            .collect::<Vec<String>>()
    };
    let once = enter(&[&backup]);
    let twice = enter(&[&backup, &backup]);
    let refused = same_by_both_roads(&bench, &base, ALICE, &as_strs(&once)).await;
    assert_eq!(refused.code, ExitCode::from(1), "{}", refused.err);
    assert!(
        refused.err.starts_with("refused: entering recovery mode: ")
            && refused.err.contains("the role publisher may not do this"),
        "{}",
        refused.err
    );
    let refused = same_by_both_roads(&bench, &base, ROOT, &as_strs(&twice)).await;
    assert_eq!(refused.code, ExitCode::from(1), "{}", refused.err);
    assert_eq!(
        refused.err,
        "refused: entering recovery mode: the backup family database is named twice\n"
    );
    let unusable = same_by_both_roads(
        &bench,
        &base,
        ROOT,
        &[
            "recovery",
            "enter",
            "--stopped-at",
            "yesterday",
            "--backup",
            &backup,
        ],
    )
    .await;
    assert_eq!(unusable.code, ExitCode::from(2), "{}", unusable.err);
    let status = same_by_both_roads(&bench, &base, ROOT, &["recovery", "status"]).await;
    assert!(
        status.out.starts_with("recovery mode not in effect"),
        "{}",
        status.out
    );

    let entered = remote_ok(&bench, &base, ROOT, &as_strs(&once)).await;
    assert!(
        entered.starts_with("recovery mode entered by root (recovery-admin): epoch "),
        "{entered}"
    );
    assert!(
        entered.ends_with(
            "; 1 scope(s) pre-restore unaccounted; nothing is sent to a machine until its \
             scope is released\n"
        ),
        "{entered}"
    );
    let status = same_by_both_roads(&bench, &base, ROOT, &["recovery", "status"]).await;
    assert!(
        status.out.starts_with("recovery mode in effect"),
        "{}",
        status.out
    );
    assert!(
        status.out.contains("m1: pre-restore unaccounted"),
        "{}",
        status.out
    );
    service.shutdown().await;
    bench.stop().await;
}
