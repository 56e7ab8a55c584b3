//! Required-verification cases of `contract.md` §9.2 through `infra-talos serve`:
//! the act is the service's run of a plan, against the command set's bench (a store,
//! the installation's authority, a simulated Talos node); plans and approvals are
//! made with the command set, and what the store holds afterwards is read back
//! through the API. The same cases through the store alone, on SQLite and
//! PostgreSQL, are `store_suite::evidence`.
#![cfg(feature = "cli")]

mod cli_support;

use std::time::Duration;

use cli_support::bench::*;
use cli_support::https;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A configuration changed out of band.
fn edited(note: &str) -> Vec<u8> {
    format!("version: v1alpha1\nmachine:\n  type: worker\n# {note}\n").into_bytes()
}

/// The machine as the API shows it.
async fn machine(api: &reqwest::Client, base: &str) -> Value {
    let machines: Value = api
        .get(format!("{base}/api/v1/machines"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    machines[0].clone()
}

/// Asks the service to run `plan`; its status and body.
async fn run(api: &reqwest::Client, base: &str, plan: &str) -> (StatusCode, String) {
    let r = api
        .post(format!("{base}/api/v1/plans/{plan}/run"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    (r.status(), r.text().await.unwrap())
}

/// The timeline's entries of `kind`, as `timeline --json` prints them.
async fn entries(bench: &Bench, kind: &str) -> Vec<Value> {
    let timeline = bench.timeline().await;
    timeline
        .as_array()
        .or_else(|| timeline["entries"].as_array())
        .expect("timeline entries")
        .iter()
        .filter(|e| e["kind"] == kind)
        .cloned()
        .collect()
}

/// §3.2, §6.5 through the service: a drift record is open and its revert approved;
/// the node is put back to Applied by hand. The service's run of the revert finds
/// Applied's digest where the revert expects the drifted one: the commitment is
/// refused by comparison 3, nothing is sent, and the refusal closes the record as
/// returned. Control: the record was open, as the API showed, up to that run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revert_run_after_a_manual_return_is_refused_and_closes_the_record() {
    let bench = Bench::new().await;
    bench.publish(RELEASE).await;
    let (service, base) = bench.serve_every(true, Duration::from_secs(3600)).await;
    let api = https(bench.dir.path(), Some("bob"));
    bench.sim.drift_config(edited("changed by hand"));
    let pass = api
        .post(format!("{base}/api/v1/drift"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(pass.status(), StatusCode::OK);
    let record = machine(&api, &base).await["open_drift"].clone();
    assert!(!record.is_null(), "no record opened");
    bench
        .ok(ALICE, &["revert", MACHINE, "--id", "p-revert"])
        .await;
    bench.ok(BOB, &["approve", "p-revert"]).await;
    // Back by hand to what Applied names.
    bench.sim.drift_config(base_config());
    let sent = bench.applies().len();
    let (status, body) = run(&api, &base, "p-revert").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body.contains("refused: commitment, comparison 3 (evidence)"),
        "the run was not refused by comparison 3: {body}"
    );
    assert_eq!(bench.applies().len(), sent, "the revert sent something");
    assert!(
        machine(&api, &base).await["open_drift"].is_null(),
        "the record is still open"
    );
    let closed = entries(&bench, "drift_closed").await;
    assert_eq!(closed.len(), 1, "{closed:?}");
    let detail = closed[0]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("returned"), "{closed:?}");
    let refused = entries(&bench, "commitment_refused").await;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["plan"], "p-revert", "{refused:?}");
    service.shutdown().await;
    bench.stop().await;
}

/// §6.3 through the service: an adopt plan for a drift record, approved, and the
/// node changed again before the service runs it. The adoption record is refused
/// by requirement 4, once: Applied stays, the record stays open, nothing is sent,
/// and a second run refuses nothing more. Another machine answering at the
/// endpoint is refused by requirement 4 as well. Control: after a drift pass moves the
/// record to the new digest, a new adopt plan run by the service is recorded and
/// Applied names what the node runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adoption_run_on_a_machine_changed_again_is_refused_once() {
    let bench = Bench::new().await;
    let (service, base) = bench.serve_every(true, Duration::from_secs(3600)).await;
    let api = https(bench.dir.path(), Some("bob"));
    let drift = || async {
        let r = api
            .post(format!("{base}/api/v1/drift"))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    };
    bench.sim.drift_config(edited("first change"));
    drift().await;
    let applied = machine(&api, &base).await["applied_digest"].clone();
    bench
        .ok(ALICE, &["plan", MACHINE, "--adopt", "--id", "a-first"])
        .await;
    bench.ok(BOB, &["approve", "a-first"]).await;
    let again = edited("second change");
    bench.sim.drift_config(again.clone());
    let sent = bench.applies().len();
    let (status, body) = run(&api, &base, "a-first").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body.contains("adoption record refused by requirement 4")
            && body.contains("the configuration digest read is not the baseline's"),
        "the adoption was not refused by requirement 4: {body}"
    );
    let (status, body) = run(&api, &base, "a-first").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body.contains("the plan's adoption record was refused"),
        "{body}"
    );
    assert_eq!(entries(&bench, "adoption_refused").await.len(), 1);
    let shown = machine(&api, &base).await;
    assert_eq!(shown["applied_digest"], applied, "{shown}");
    assert!(!shown["open_drift"].is_null(), "{shown}");

    // Another machine answers at the endpoint: refused by requirement 4 too.
    let own = bench.sim.facts();
    bench
        .sim
        .set_identity("uuid-of-another-machine", own.node_id.clone());
    bench
        .ok(ALICE, &["plan", MACHINE, "--adopt", "--id", "a-other"])
        .await;
    bench.ok(BOB, &["approve", "a-other"]).await;
    let (status, body) = run(&api, &base, "a-other").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body.contains("adoption record refused by requirement 4")
            && body.contains("the SMBIOS UUID read is not the bound one"),
        "{body}"
    );
    assert_eq!(entries(&bench, "adoption_refused").await.len(), 2);
    bench.sim.set_identity(own.smbios_uuid, own.node_id);

    // Control: the record moves to the new digest, and a new plan adopts it.
    drift().await;
    bench
        .ok(ALICE, &["plan", MACHINE, "--adopt", "--id", "a-second"])
        .await;
    bench.ok(BOB, &["approve", "a-second"]).await;
    let (status, body) = run(&api, &base, "a-second").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let shown = machine(&api, &base).await;
    assert_eq!(
        shown["applied_digest"],
        infra_talos::config_digest(&again).to_hex(),
        "{shown}"
    );
    assert!(shown["open_drift"].is_null(), "{shown}");
    assert_eq!(bench.applies().len(), sent, "an adoption sent something");
    service.shutdown().await;
    bench.stop().await;
}
