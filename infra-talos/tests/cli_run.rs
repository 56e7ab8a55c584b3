//! The `run` command in-process against an SQLite store in a temporary directory and
//! a simulated Talos node reached over real gRPC with mutual TLS: an approved plan
//! is applied once and moves Applied; a plan without a standing approval is refused
//! before anything is sent; a lost response leaves the operation unresolved,
//! awaiting accounting.
//!
//! Every step, including the set-up (principals, inventory, publication, plan,
//! approval), goes through the command set; the simulator's request record is the
//! witness of what reached the node.
#![cfg(feature = "cli")]

use std::process::ExitCode;

mod cli_support;

use cli_support::bench::*;
use cli_support::{redact, redact_blankets};
use infra_talos::cli::iso;
use infra_talos::config_digest;
use infra_testkit::talos::{ApplyFault, ApplyMode, RecordedCall, TalosSim};
use serde_json::Value;

/// The operations on a timeline besides the handover's adoption.
fn after_handover(timeline: &Value) -> Vec<Value> {
    timeline["operations"]
        .as_array()
        .expect("operations")
        .iter()
        .filter(|o| o["plan"] != HANDOVER)
        .cloned()
        .collect()
}

/// The operation id in a `run` report (`plan <p>: operation <id> is ...`).
fn reported_operation(out: &str) -> String {
    let rest = out
        .split_once(": operation ")
        .unwrap_or_else(|| panic!("no operation in {out:?}"))
        .1;
    rest.split_once(' ')
        .unwrap_or_else(|| panic!("no operation in {out:?}"))
        .0
        .to_owned()
}

/// The single apply the node must have received: the artifact of [`RELEASE`], in
/// no-reboot mode, not a dry run.
fn one_apply_of_the_release() -> Vec<RecordedCall> {
    vec![RecordedCall::ApplyConfiguration {
        mode: ApplyMode::NoReboot,
        dry_run: false,
        data_digest: config_digest(&artifact(RELEASE)).to_hex(),
    }]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_plan_is_applied_once_and_moves_applied() {
    let bench = Bench::new().await;
    bench.approved_plan("p1").await;
    assert!(bench.applies().is_empty(), "nothing is sent before `run`");
    let before = bench.timeline().await;
    assert_eq!(before["machine"]["appliedRelease"], HANDOVER_RELEASE);
    assert!(after_handover(&before).is_empty(), "{before}");

    let out = bench.ok(None, &["run", "p1"]).await;
    let operation = reported_operation(&out);
    assert!(
        operation.len() == 32 && operation.bytes().all(|b| b.is_ascii_hexdigit()),
        "{out}"
    );
    insta::assert_snapshot!("run_completed", out.replace(&operation, "[operation]"));

    // Exactly one apply reached the node, carrying the release's artifact, and the
    // node now runs it.
    assert_eq!(bench.applies(), one_apply_of_the_release());
    assert_eq!(bench.sim.config(), artifact(RELEASE));

    // The store agrees: Applied is the release, and the operation completed after
    // one attempt.
    let after = bench.timeline().await;
    assert_eq!(after["machine"]["appliedRelease"], RELEASE);
    assert_eq!(
        after["machine"]["appliedDigest"],
        config_digest(&artifact(RELEASE)).to_hex()
    );
    let operations = after_handover(&after);
    assert_eq!(operations.len(), 1, "{operations:?}");
    assert_eq!(operations[0]["id"], operation.as_str());
    assert_eq!(operations[0]["plan"], "p1");
    assert_eq!(operations[0]["state"], "completed");
    assert_eq!(operations[0]["attempts"], 1);
    let listed: Value =
        serde_json::from_str(&bench.ok(None, &["inventory", "list", "--json"]).await)
            .expect("inventory JSON");
    assert_eq!(listed[0]["appliedRelease"], RELEASE);

    // The plan is spent: running it again is refused and sends nothing more.
    let again = bench.cli(None, &["run", "p1"]).await;
    assert_eq!(again.code, ExitCode::from(1), "{}{}", again.out, again.err);
    assert_eq!(again.out, "");
    assert_eq!(
        again.err,
        "refused: preflight: comparison 1: the plan is committed; the commitment transaction needs it approved\n"
    );
    assert_eq!(bench.applies(), one_apply_of_the_release());
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_standing_approval_run_sends_nothing_and_says_so() {
    let bench = Bench::new().await;

    // No such plan.
    let missing = bench.cli(None, &["run", "p-absent"]).await;
    assert_eq!(missing.code, ExitCode::from(1), "{}", missing.err);
    assert_eq!(missing.out, "");

    // A plan whose approval was revoked.
    bench.approved_plan("p1").await;
    bench.ok(BOB, &["revoke", "p1"]).await;
    let revoked = bench.cli(None, &["run", "p1"]).await;
    assert_eq!(revoked.code, ExitCode::from(1), "{}", revoked.err);
    assert_eq!(revoked.out, "");

    insta::assert_snapshot!(
        "run_without_approval",
        format!("{}{}", missing.err, revoked.err)
    );
    assert!(bench.applies().is_empty(), "an apply reached the node");
    assert_eq!(bench.sim.config(), base_config());
    let timeline = bench.timeline().await;
    assert_eq!(timeline["machine"]["appliedRelease"], HANDOVER_RELEASE);
    assert!(after_handover(&timeline).is_empty(), "{timeline}");
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposed_plan_is_not_run() {
    let bench = Bench::new().await;
    bench.proposed_plan("p1").await;

    let ran = bench.cli(None, &["run", "p1"]).await;
    assert_eq!(ran.code, ExitCode::from(1), "{}{}", ran.out, ran.err);
    assert_eq!(ran.out, "");
    insta::assert_snapshot!("run_proposed", ran.err);

    assert!(bench.applies().is_empty(), "an apply reached the node");
    assert_eq!(bench.sim.config(), base_config());
    let timeline = bench.timeline().await;
    assert_eq!(timeline["machine"]["appliedRelease"], HANDOVER_RELEASE);
    assert!(after_handover(&timeline).is_empty(), "{timeline}");

    // Approved afterwards, the same plan runs.
    bench.ok(BOB, &["approve", "p1"]).await;
    let out = bench.ok(None, &["run", "p1"]).await;
    assert!(out.contains(" is completed after 1 send(s)"), "{out}");
    assert_eq!(bench.applies(), one_apply_of_the_release());
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_response_leaves_the_operation_awaiting_accounting() {
    let bench = Bench::new().await;
    bench.approved_plan("p1").await;
    bench.sim.fail_next_apply(ApplyFault::LoseResponse);

    // An operation the controller could not settle is reported on standard output
    // with its state and classification, and the command exits 3: not finished.
    let ran = bench.cli(None, &["run", "p1"]).await;
    assert_eq!(ran.code, ExitCode::from(3), "{}{}", ran.out, ran.err);
    assert_eq!(ran.err, "");
    let operation = reported_operation(&ran.out);
    insta::assert_snapshot!("run_unresolved", ran.out.replace(&operation, "[operation]"));

    // The apply was sent once and landed on the node, but without a response the
    // store moves nothing: Applied stays the handover's.
    assert_eq!(bench.applies(), one_apply_of_the_release());
    assert_eq!(bench.sim.config(), artifact(RELEASE));
    let timeline = bench.timeline().await;
    assert_eq!(timeline["machine"]["appliedRelease"], HANDOVER_RELEASE);
    assert_eq!(
        timeline["machine"]["appliedDigest"],
        config_digest(&base_config()).to_hex()
    );
    assert_eq!(after_handover(&timeline)[0]["id"], operation.as_str());
    assert_eq!(after_handover(&timeline)[0]["state"], "unresolved");
    assert_eq!(after_handover(&timeline)[0]["attempts"], 1);

    // Running the plan again neither settles the operation nor sends again.
    let again = bench.cli(None, &["run", "p1"]).await;
    assert_eq!(again.code, ExitCode::from(1), "{}{}", again.out, again.err);
    assert_eq!(
        again.err,
        "refused: preflight: comparison 1: the plan is committed; the commitment transaction needs it approved\n"
    );
    assert_eq!(bench.applies(), one_apply_of_the_release());
    let timeline = bench.timeline().await;
    assert_eq!(after_handover(&timeline)[0]["state"], "unresolved");

    // Accounting before any recovery observation is refused.
    let early = bench
        .cli(ROOT, &["account", &operation, "--attempt", "1"])
        .await;
    assert_eq!(early.code, ExitCode::from(1), "{}{}", early.out, early.err);

    // `run --resume`: a new controller instance takes the operation over, finds it
    // still waiting, and takes the two recovery observations accounting needs: one
    // after the transport deadline, one after the settle floor that follows it and
    // the takeover (the floor is real time here: 30 s).
    let resumed = bench.cli(None, &["run", "--resume"]).await;
    assert_eq!(
        resumed.code,
        ExitCode::from(3),
        "{}{}",
        resumed.out,
        resumed.err
    );
    assert!(
        resumed
            .out
            .contains(&format!("operation {operation} is unresolved")),
        "{}",
        resumed.out
    );
    assert!(
        resumed.out.contains(&format!(
            "digest {}",
            config_digest(&artifact(RELEASE)).to_hex()
        )),
        "{}",
        resumed.out
    );
    let timeline = bench.timeline().await;
    let takeovers = timeline["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "takeover" && e["operation"] == operation.as_str())
        .count();
    assert_eq!(takeovers, 1, "{timeline:#}");

    // Recovery-admin accounts for the attempt; the next resume completes the
    // operation from a completion observation, sending nothing more.
    bench
        .ok(ROOT, &["account", &operation, "--attempt", "1"])
        .await;
    let done = bench.cli(None, &["run", "--resume"]).await;
    assert_eq!(done.code, ExitCode::SUCCESS, "{}{}", done.out, done.err);
    assert!(
        done.out.contains(&format!(
            "operation {operation} is completed after 0 send(s)"
        )),
        "{}",
        done.out
    );
    assert_eq!(bench.applies(), one_apply_of_the_release());
    let timeline = bench.timeline().await;
    assert_eq!(timeline["machine"]["appliedRelease"], RELEASE);
    // Nothing left to resume.
    assert_eq!(
        bench.ok(None, &["run", "--resume"]).await,
        "no operation to resume\n"
    );
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_reports_each_machine_and_exits_3_when_it_could_not_look() {
    let bench = Bench::new().await;
    bench.approved_plan("p1").await;
    bench.ok(None, &["run", "p1"]).await;

    let in_step = bench.ok(None, &["drift"]).await;
    let basis = |out: &str| -> String {
        out.split("(observation ")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .unwrap_or_else(|| panic!("no observation in {out:?}"))
            .to_owned()
    };
    let first = basis(&in_step);
    insta::assert_snapshot!("drift_in_step", in_step.replace(&first, "[rev]"));

    // A change made on the node, outside any plan, opens a drift record.
    let mut edited = artifact(RELEASE);
    edited.extend_from_slice(b"# edited by hand\n");
    bench.sim.drift_config(edited);
    let drifted = bench.ok(None, &["drift", "--json"]).await;
    let value: Value = serde_json::from_str(&drifted).expect("drift JSON");
    assert_eq!(value["drifted"], serde_json::json!([MACHINE]), "{drifted}");
    assert_eq!(value["not_read"], 0);
    assert_eq!(value["machines"][0]["found"], "opened");
    let record = value["machines"][0]["record"].as_u64().expect("record");
    let timeline = bench.timeline().await;
    assert_eq!(timeline["machine"]["openDrift"], record, "{timeline}");
    assert!(bench.applies().len() == 1, "drift never applies anything");

    // The next pass finds the record still open; a drift pass needs no keyring.
    let no_keys = bench.cli_keyring(None, &["drift"], false).await;
    assert_eq!(
        no_keys.code,
        ExitCode::SUCCESS,
        "{}{}",
        no_keys.out,
        no_keys.err
    );
    let text = no_keys.out;
    assert!(
        text.starts_with(&format!(
            "{MACHINE}: DRIFTED: drift record r{record} is still open"
        )),
        "{text}"
    );

    // A revert through the commands: its approval says it overwrites what no
    // reviewer saw, the run sends the release again, and the record closes.
    let planned = bench
        .ok(
            ALICE,
            &[
                "plan",
                MACHINE,
                "--id",
                "p2",
                "--revert",
                "--transport-deadline",
                "1",
            ],
        )
        .await;
    assert!(planned.ends_with("state proposed\n"), "{planned}");
    let approved = bench.ok(BOB, &["approve", "p2"]).await;
    assert!(approved.contains("unseenOverwrite"), "{approved}");
    bench.ok(None, &["run", "p2"]).await;
    assert_eq!(bench.applies().len(), 2);
    assert_eq!(bench.sim.config(), artifact(RELEASE));
    let closed = bench.timeline().await;
    assert_eq!(closed["machine"]["openDrift"], Value::Null, "{closed}");
    let in_step = bench.ok(None, &["drift"]).await;
    assert!(
        in_step.starts_with(&format!("{MACHINE}: in step with Applied")),
        "{in_step}"
    );

    // A node that cannot be reached is never reported in step.
    let Bench {
        sim,
        dir,
        talosconfig,
    } = bench;
    sim.shutdown().await.expect("simulator stops");
    let bench = Bench {
        sim: TalosSim::builder()
            .start()
            .await
            .expect("another simulator"),
        dir,
        talosconfig,
    };
    let blind = bench.cli(None, &["drift"]).await;
    assert_eq!(blind.code, ExitCode::from(3), "{}{}", blind.out, blind.err);
    assert!(
        blind.out.contains(&format!("{MACHINE}: not read")),
        "{}",
        blind.out
    );
    assert!(
        blind
            .out
            .ends_with("1 machine(s) observed: 0 with an open drift record, 1 not read\n"),
        "{}",
        blind.out
    );
    bench.stop().await;
}

/// §6.3 through the command set: an imported machine has no Applied, so no plan
/// can apply anything to it; an adopt plan, once an approver approves it, is
/// recorded by `run` against a fresh read of the node, and nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_machine_is_handed_over_by_an_approved_adoption() {
    let bench = Bench::imported().await;
    bench.publish(HANDOVER_RELEASE).await;
    let mut transcript = String::new();
    let no_baseline = bench.cli(ALICE, &["plan", MACHINE]).await;
    assert_eq!(no_baseline.code, ExitCode::from(1), "{}", no_baseline.err);
    transcript += &no_baseline.err;
    transcript += &bench
        .ok(ALICE, &["plan", MACHINE, "--adopt", "--id", HANDOVER])
        .await;
    // Not approved yet: refused, and the node is not even read.
    let early = bench.cli(None, &["run", HANDOVER]).await;
    assert_eq!(early.code, ExitCode::from(1), "{}", early.err);
    transcript += &early.err;
    let approved = bench.ok(BOB, &["approve", HANDOVER]).await;
    assert!(!approved.contains("unseenOverwrite"), "{approved}");
    transcript += &approved;
    let ran = bench.ok(None, &["run", HANDOVER]).await;
    let operation = ran
        .split_once("recorded as operation ")
        .and_then(|(_, rest)| rest.split_once(';'))
        .map(|(id, _)| id.to_owned())
        .unwrap_or_else(|| panic!("no operation in {ran:?}"));
    transcript += &ran.replace(&operation, "[operation]");
    // Once recorded, the plan is spent.
    let again = bench.cli(None, &["run", HANDOVER]).await;
    assert_eq!(again.code, ExitCode::from(1), "{}", again.err);
    transcript += &again.err;
    insta::assert_snapshot!("handover", transcript);

    assert!(bench.applies().is_empty(), "an adoption sent something");
    let timeline = bench.timeline().await;
    assert_eq!(timeline["machine"]["appliedRelease"], HANDOVER_RELEASE);
    assert_eq!(
        timeline["machine"]["appliedDigest"],
        config_digest(&base_config()).to_hex()
    );
    let operations = timeline["operations"].as_array().expect("operations");
    assert_eq!(operations.len(), 1, "{operations:?}");
    assert_eq!(operations[0]["id"], operation.as_str());
    assert_eq!(operations[0]["state"], "completed");
    assert_eq!(operations[0]["attempts"], 0);
    let kinds: Vec<&str> = timeline["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    let from = kinds
        .iter()
        .position(|k| *k == "adoption")
        .expect("adoption");
    assert_eq!(kinds[from..], ["adoption", "applied_changed"], "{kinds:?}");
    // The handed-over machine takes an apply-config plan now.
    bench.approved_plan("p1").await;
    bench.ok(None, &["run", "p1"]).await;
    assert_eq!(bench.applies(), one_apply_of_the_release());
    bench.stop().await;
}

/// An adoption whose fresh read shows another configuration than the import's is
/// refused by requirement 4, once: the refusal is on the timeline, Applied stays
/// unset, and running the plan again neither reads the node nor records more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adoption_of_a_changed_node_is_refused_once() {
    let bench = Bench::imported().await;
    bench.publish(HANDOVER_RELEASE).await;
    bench
        .ok(ALICE, &["plan", MACHINE, "--adopt", "--id", HANDOVER])
        .await;
    bench.ok(BOB, &["approve", HANDOVER]).await;
    bench.sim.drift_config(artifact("by hand"));
    let refused = bench.cli(None, &["run", HANDOVER]).await;
    assert_eq!(refused.code, ExitCode::from(1), "{}", refused.err);
    assert!(
        refused
            .err
            .starts_with("refused: adoption record refused by requirement 4: "),
        "{}",
        refused.err
    );
    assert!(
        refused
            .err
            .ends_with("the configuration digest read is not the baseline's\n"),
        "{}",
        refused.err
    );
    let again = bench.cli(None, &["run", HANDOVER]).await;
    assert_eq!(again.code, ExitCode::from(1), "{}", again.err);
    assert_eq!(
        again.err,
        "refused: the adoption record waits: the plan's adoption record was refused\n"
    );
    let timeline = bench.timeline().await;
    assert_eq!(timeline["machine"]["appliedRelease"], Value::Null);
    let entries = timeline["entries"].as_array().expect("entries");
    let refusals = entries
        .iter()
        .filter(|e| e["kind"] == "adoption_refused")
        .count();
    assert_eq!(refusals, 1, "{entries:?}");
    assert!(bench.applies().is_empty());
    bench.stop().await;
}

/// The blanket commands on a handed-over machine: a grant by an approver only, an
/// approval under it at a token's request, the list (text and JSON), and a
/// revocation that takes the approval made under it with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blanket_grant_approve_list_and_revoke() {
    const BOT: Option<(&str, &str)> = Some(("bot", "automation"));
    let bench = Bench::new().await;
    let cluster = bench.sim.facts().cluster_id;
    let pki = bench
        .dir
        .path()
        .join(cli_support::PKI)
        .display()
        .to_string();
    bench
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
    bench.proposed_plan("p1").await;
    let grant = [
        "blanket",
        "grant",
        "--cluster",
        &cluster,
        "--reason",
        "lab",
        "--for",
        "7d",
    ];
    let mut transcript = String::new();
    // No blanket yet: the token's request is refused, and the token cannot grant.
    for refused in [
        bench.cli(BOT, &["approve", "--blanket", "p1"]).await,
        bench.cli(BOT, &grant).await,
    ] {
        assert_eq!(refused.code, ExitCode::from(1), "{}", refused.err);
        transcript += &refused.err;
    }
    let granted = bench.ok(BOB, &grant).await;
    let id = granted
        .split_whitespace()
        .find(|w| w.starts_with("blanket-"))
        .expect("blanket id")
        .to_owned();
    transcript += &granted;
    transcript += &bench.ok(BOT, &["approve", "--blanket", "p1"]).await;
    transcript += &bench.ok(None, &["blanket", "list"]).await;
    transcript += &bench.ok(BOB, &["blanket", "revoke", &id]).await;
    let twice = bench.cli(BOB, &["blanket", "revoke", &id]).await;
    assert_eq!(twice.code, ExitCode::from(1), "{}", twice.err);
    transcript += &twice.err;
    transcript += &bench.ok(None, &["blanket", "list"]).await;
    let transcript = redact_blankets(&transcript).replace(&cluster, "[cluster]");
    insta::assert_snapshot!("blanket_transcript", redact(&transcript));
    let json = bench.ok(None, &["blanket", "list", "--json"]).await;
    let listed: Value = serde_json::from_str(&json).expect("blanket JSON");
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["revoked"][0], "bob");
    let timeline = bench.ok(None, &["timeline", MACHINE]).await;
    assert!(timeline.contains("approval_revoked"), "{timeline}");
    // The approval is the token's act under bob's standing grant, not bob's review.
    assert!(
        timeline.contains("approval_under_grant  bot (automation)"),
        "{timeline}"
    );
    assert!(
        timeline.contains("under the standing grant of bob"),
        "{timeline}"
    );
    assert!(
        !timeline.contains("bob (approver) at the request of bot"),
        "{timeline}"
    );
    assert!(
        timeline.contains(&format!("blanket approval {id} revoked")),
        "{timeline}"
    );
    bench.stop().await;
}

/// §7 through the command set after a restore of the store: `recovery enter` with
/// the stop and the backup; nothing can be planned; `observe` paces its reads (the
/// first a maximum transport deadline after the entry, the next a settle floor
/// later) and sends nothing; the step 1 decision waits for them; the restoration
/// read, the mark (its dependency check made by the command), the release, and
/// leaving. The controller started in recovery mode keeps the gate shut: a plan
/// approved before the restore is not run, and after leaving it needs an approval
/// of the new epoch. The node receives nothing until then. Real time: about 95 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_after_a_restore_through_the_commands() {
    let bench = Bench::new().await;
    bench.approved_plan("p0").await;
    // Every controller instance is stopped from here on.
    let now = infra_talos::backend::WallTime::system(std::sync::Arc::new(
        infra_core::engine::SystemClock::new(),
    ))
    .now()
    .0;
    let stopped = iso(now);
    let backup = format!("database=store-0412.dump@{}", iso(now - 3_600_000));
    let mut transcript = String::new();
    // Usage: a time that is not one, a backup without its time.
    for (flag, value) in [("--stopped-at", "yesterday"), ("--backup", "database=dump")] {
        let mut args = vec!["recovery", "enter", "--stopped-at", &stopped];
        args.extend(["--backup", &backup]);
        let at = args.iter().position(|a| *a == flag).expect("flag") + 1;
        args[at] = value;
        let ran = bench.cli(ROOT, &args).await;
        assert_eq!(ran.code, ExitCode::from(2), "{}", ran.err);
        transcript += &ran.err;
    }
    let enter = [
        "recovery",
        "enter",
        "--stopped-at",
        &stopped,
        "--backup",
        &backup,
    ];
    let refused = bench.cli(ALICE, &enter).await;
    assert_eq!(refused.code, ExitCode::from(1), "{}", refused.err);
    transcript += &refused.err;
    transcript += &bench.ok(ROOT, &enter).await;
    transcript += &bench.ok(None, &["recovery", "status"]).await;
    // The gate is shut: no plan is made, the approved one is not run, and a
    // controller resuming finds nothing it may carry on.
    let no_plan = bench
        .cli(ALICE, &["plan", MACHINE, "--id", "p-during"])
        .await;
    assert_eq!(no_plan.code, ExitCode::from(1), "{}", no_plan.err);
    transcript += &no_plan.err;
    let not_run = bench.cli(None, &["run", "p0"]).await;
    assert_eq!(not_run.code, ExitCode::from(1), "{}", not_run.err);
    transcript += &not_run.err;
    transcript += &bench.ok(None, &["run", "--resume"]).await;
    let observe = ["recovery", "observe"];
    // Not due: the erased attempt's deadline has not passed.
    let early = bench.ok(None, &observe).await;
    assert!(early.contains("is due at"), "{early}");
    transcript += &early;
    let account = ["recovery", "account", MACHINE];
    let unread = bench.cli(ROOT, &account).await;
    assert_eq!(unread.code, ExitCode::from(1), "{}", unread.err);
    transcript += &unread.err;
    let mut first = early;
    while first.contains("is due at") {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        first = bench.ok(None, &observe).await;
    }
    transcript += &first;
    let paced = bench.ok(None, &observe).await;
    assert!(paced.contains("is due at"), "{paced}");
    let mut second = paced;
    while second.contains("is due at") {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        second = bench.ok(None, &observe).await;
    }
    transcript += &second;
    transcript += &bench.ok(ROOT, &account).await;
    transcript += &bench.ok(None, &observe).await;
    let release = ["recovery", "release", MACHINE];
    let unmarked = bench.cli(ROOT, &release).await;
    assert_eq!(unmarked.code, ExitCode::from(1), "{}", unmarked.err);
    transcript += &unmarked.err;
    transcript += &bench.ok(ROOT, &["recovery", "mark", MACHINE]).await;
    transcript += &bench.ok(ROOT, &release).await;
    transcript += &bench.ok(ROOT, &["recovery", "leave"]).await;
    transcript += &bench.ok(None, &["recovery", "status"]).await;
    let status: Value =
        serde_json::from_str(&bench.ok(None, &["recovery", "status", "--json"]).await)
            .expect("status JSON");
    assert_eq!(status["recoveryMode"], false);
    assert_eq!(status["scopes"][0]["scope"], "normal");
    insta::assert_snapshot!("recovery", redact(&transcript));
    assert!(bench.applies().is_empty(), "a request reached the node");
    // Out of recovery, the old epoch's approval authorises nothing; a new one does.
    let old_epoch = bench.cli(None, &["run", "p0"]).await;
    assert_eq!(old_epoch.code, ExitCode::from(1), "{}", old_epoch.err);
    assert!(old_epoch.err.contains("comparison 1"), "{}", old_epoch.err);
    assert!(bench.applies().is_empty(), "a request reached the node");
    bench.ok(BOB, &["approve", "p0"]).await;
    bench.ok(None, &["run", "p0"]).await;
    assert_eq!(bench.applies(), one_apply_of_the_release());
    bench.stop().await;
}
