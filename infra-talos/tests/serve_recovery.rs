//! `infra-talos serve` and recovery mode (§7), over HTTPS against the command set's
//! bench: recovery-admin enters recovery mode through the API and the page, with the
//! store's checks and refusals; in recovery mode the service refuses every act but
//! the recovery acts and those §7.5 always allows (revoking, cancelling, freezing),
//! and the page shows the scopes with those forms only; its controller takes the
//! recovery reads on its timer, sending nothing; the drift pass never runs at
//! start, only on its interval; the recovery start (`serve --recovery-start`)
//! answers liveness and the entry only until the entry commits; and a scope blocked
//! on a missing dependency is cleared by a new release and a new mark (§7.4).
#![cfg(feature = "cli")]

mod cli_support;

use std::time::Duration;

use cli_support::bench::*;
use cli_support::{https, https_with};
use infra_talos::contract::evidence::ObservationPurpose;
use infra_talos::serve::PassSettings;
use infra_talos::store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn status_and_body(response: reqwest::Response) -> (StatusCode, String) {
    let status = response.status();
    (status, response.text().await.expect("body"))
}

/// Now, in milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    infra_talos::backend::WallTime::system(std::sync::Arc::new(
        infra_core::engine::SystemClock::new(),
    ))
    .now()
    .0
}

/// An entry's body: every instance stopped a minute ago, the store's backup an hour
/// old, as `"as"` acting.
fn entry(role: &str, stopped_at: u64, families: &[&str]) -> Value {
    let backups: Vec<Value> = families
        .iter()
        .map(
            |f| json!({"family": f, "backup": "store-0412.dump", "taken_at": now_ms() - 3_600_000}),
        )
        .collect();
    json!({"as": role, "entry": {"stopped_at": stopped_at, "backups": backups}})
}

async fn recovery_mode(client: &reqwest::Client, base: &str) -> Value {
    client
        .get(format!("{base}/api/v1/recovery"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The store the service works on, opened beside it.
async fn store(bench: &Bench) -> infra_talos::store::sqlite::SqliteStore {
    infra_talos::store::sqlite::SqliteStore::open(&bench.dir.path().join("store.db"))
        .await
        .expect("store")
}

/// The machine's observations of `purpose` that were recorded.
async fn recorded(bench: &Bench, purpose: ObservationPurpose) -> usize {
    store(bench)
        .await
        .observations(MACHINE)
        .await
        .expect("observations")
        .iter()
        .filter(|o| o.purpose == purpose && o.recorded_at.is_some())
        .count()
}

fn csrf_of(html: &str) -> String {
    let at = html
        .find("name=\"csrf\" value=\"")
        .expect("a form with a CSRF value")
        + 19;
    html[at..at + html[at..].find('"').unwrap()].to_owned()
}

/// Entering recovery mode is recovery-admin's act through the API, with the store's
/// checks: another role, a stop after now, no backup or a family named twice is
/// refused in the store's words and changes nothing; recovery-admin's entry answers
/// the new epoch and every scope is then pre-restore unaccounted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_admin_enters_recovery_mode_through_the_api() {
    let bench = Bench::new().await;
    let (service, base) = bench.serve(false).await;
    let dir = bench.dir.path();
    let (bob, root) = (https(dir, Some("bob")), https(dir, Some("root")));
    let enter = format!("{base}/api/v1/recovery/enter");
    let stopped = now_ms() - 60_000;
    for (client, body, says) in [
        (
            &bob,
            entry("approver", stopped, &["database"]),
            "refused: entering recovery mode: the role approver may not do this",
        ),
        (
            &bob,
            entry("recovery-admin", stopped, &["database"]),
            "bob does not hold the role recovery-admin",
        ),
        (
            &root,
            entry("recovery-admin", now_ms() + 3_600_000, &["database"]),
            "refused: entering recovery mode: the stop",
        ),
        (
            &root,
            entry("recovery-admin", stopped, &[]),
            "refused: entering recovery mode: name at least one restored backup",
        ),
        (
            &root,
            entry("recovery-admin", stopped, &["database", "database"]),
            "refused: entering recovery mode: the backup family database is named twice",
        ),
    ] {
        let (status, text) =
            status_and_body(client.post(&enter).json(&body).send().await.unwrap()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{text}");
        assert!(text.contains(says), "{says:?} not in {text}");
        assert_eq!(recovery_mode(&root, &base).await["recoveryMode"], false);
    }
    let (status, text) = status_and_body(
        root.post(&enter)
            .json(&entry("recovery-admin", stopped, &["database", "keys"]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let entered: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(entered["scopes"], 1, "{entered}");
    let status = recovery_mode(&root, &base).await;
    assert_eq!(status["recoveryMode"], true, "{status}");
    assert_eq!(status["epoch"], entered["epoch"], "{status}");
    assert_eq!(
        status["scopes"][0]["scope"], "pre_restore_unaccounted",
        "{status}"
    );
    let timeline = bench.timeline().await.to_string();
    assert!(
        timeline.contains("database from store-0412.dump") && timeline.contains("keys from"),
        "{timeline}"
    );
    service.shutdown().await;
    bench.stop().await;
}

/// The page offers recovery-admin, and only recovery-admin, the entry form; posted
/// without the session's CSRF value or with a time that is not one it enters
/// nothing; posted whole, the installation is in recovery mode and the page then
/// shows the scopes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_admin_enters_recovery_mode_on_the_page() {
    let bench = Bench::new().await;
    let (service, base) = bench.serve(false).await;
    let dir = bench.dir.path();
    let bob = https_with(dir, Some("bob"), false);
    let root = https_with(dir, Some("root"), false);
    let page = root.get(format!("{base}/")).send().await.unwrap();
    let html = page.text().await.unwrap();
    assert!(html.contains("action=\"/recovery/enter\""), "{html}");
    let bobs = bob
        .get(format!("{base}/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!bobs.contains("/recovery/enter"), "{bobs}");
    let csrf = csrf_of(&html);
    let stopped = infra_talos::cli::iso(now_ms() - 60_000);
    let backup = format!(
        "database=store-0412.dump@{}",
        infra_talos::cli::iso(now_ms() - 3_600_000)
    );
    let post = |csrf: &str, stopped: &str| {
        root.post(format!("{base}/recovery/enter"))
            .form(&[
                ("csrf", csrf),
                ("as", "recovery-admin"),
                ("stopped_at", stopped),
                ("backups", &backup),
            ])
            .send()
    };
    let (status, text) = status_and_body(post("forged", &stopped).await.unwrap()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{text}");
    let (status, text) = status_and_body(post(&csrf, "yesterday").await.unwrap()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("is not a UTC time"), "{text}");
    assert_eq!(recovery_mode(&root, &base).await["recoveryMode"], false);
    // bob's own session cannot enter it either: the store refuses his role.
    let bobs_csrf = csrf_of(&bobs);
    let (status, text) = status_and_body(
        bob.post(format!("{base}/recovery/enter"))
            .form(&[
                ("csrf", bobs_csrf.as_str()),
                ("as", "recovery-admin"),
                ("stopped_at", stopped.as_str()),
                ("backups", backup.as_str()),
            ])
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{text}");
    assert!(
        text.contains("bob does not hold the role recovery-admin"),
        "{text}"
    );
    assert_eq!(recovery_mode(&root, &base).await["recoveryMode"], false);
    let entered = post(&csrf, &stopped).await.unwrap();
    assert_eq!(entered.status(), StatusCode::SEE_OTHER);
    assert_eq!(recovery_mode(&root, &base).await["recoveryMode"], true);
    let html = root
        .get(format!("{base}/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("Recovery mode is in effect"), "{html}");
    assert!(html.contains("pre-restore unaccounted"), "{html}");
    service.shutdown().await;
    bench.stop().await;
}

/// In recovery mode the service refuses approving, publishing, planning, running and
/// the reads of normal operation, saying why; it still revokes approvals, blanket
/// grants and identities, cancels plans and freezes machines (§7.5), through the API
/// and the page, and answers the recovery status and acts. The page shows the
/// scopes and only those forms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_recovery_mode_only_the_always_allowed_acts_are_made() {
    let bench = Bench::new().await;
    bench.approved_plan("p1").await;
    bench.ok(ALICE, &["plan", MACHINE, "--id", "p2"]).await;
    bench.ok(ALICE, &["plan", MACHINE, "--id", "p3"]).await;
    let (service, base) = bench.serve(false).await;
    let dir = bench.dir.path();
    let (alice, bob, root) = (
        https(dir, Some("alice")),
        https(dir, Some("bob")),
        https(dir, Some("root")),
    );
    let page_bob = https_with(dir, Some("bob"), false);
    let cluster = bench.sim.facts().cluster_id;
    let granted: Value = bob
        .post(format!("{base}/api/v1/blankets"))
        .json(
            &json!({"as": "approver", "cluster": cluster, "reason": "night", "lasting_secs": 3600}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let blanket = granted["id"].as_str().expect("blanket id").to_owned();
    let (status, text) = status_and_body(
        root.post(format!("{base}/api/v1/recovery/enter"))
            .json(&entry("recovery-admin", now_ms() - 60_000, &["database"]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");

    // Refused, saying recovery mode is in effect; nothing is recorded.
    let publish = json!({"as": "publisher", "release": {"release": "rel-2", "key": "k",
        "authors": [], "artifacts": [{"machine": MACHINE, "configuration": "dmVyc2lvbjogdjFhbHBoYTEK"}]}});
    for (client, path, body) in [
        (&bob, "/plans/p2/approve", json!({"as": "approver"})),
        (&alice, "/releases", publish),
        (
            &alice,
            "/plans",
            json!({"as": "publisher", "plan": {"machine": MACHINE}}),
        ),
        (&bob, "/plans/p1/run", json!({})),
        (&bob, "/resume", json!({})),
        (&bob, "/drift", json!({})),
        (
            &bob,
            "/machines/m1/unfreeze",
            json!({"as": "approver", "reason": "x"}),
        ),
    ] {
        let (status, text) = status_and_body(
            client
                .post(format!("{base}/api/v1{path}"))
                .json(&body)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{path}: {text}");
        assert!(
            text.contains("recovery mode is in effect"),
            "{path}: {text}"
        );
    }
    for path in ["/plans", "/machines", "/blankets", "/principals"] {
        let (status, text) = status_and_body(
            bob.get(format!("{base}/api/v1{path}"))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{path}: {text}");
    }
    assert!(bench.applies().is_empty());

    // The page: the scopes, and only the forms recovery never stops.
    let html = page_bob
        .get(format!("{base}/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("Recovery mode is in effect"), "{html}");
    assert!(html.contains("pre-restore unaccounted"), "{html}");
    for form in [
        "action=\"/plans/p1/revoke\"",
        "action=\"/plans/p2/cancel\"",
        "action=\"/machines/m1/freeze\"",
    ] {
        assert!(html.contains(form), "{form} missing from {html}");
    }
    for absent in ["/approve\"", "/unfreeze\"", "/adopt\"", "/revert\""] {
        assert!(!html.contains(absent), "{absent} offered in {html}");
    }
    let (status, _) = status_and_body(
        page_bob
            .get(format!("{base}/plans/p2"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let csrf = csrf_of(&html);
    let approve = page_bob
        .post(format!("{base}/plans/p2/approve"))
        .form(&[("csrf", csrf.as_str()), ("as", "approver")])
        .send()
        .await
        .unwrap();
    assert_eq!(approve.status(), StatusCode::SERVICE_UNAVAILABLE);
    // On the page: revoking p1's approval and freezing the machine.
    let revoked = page_bob
        .post(format!("{base}/plans/p1/revoke"))
        .form(&[("csrf", csrf.as_str()), ("as", "approver")])
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), StatusCode::SEE_OTHER);
    let frozen = page_bob
        .post(format!("{base}/machines/m1/freeze"))
        .form(&[
            ("csrf", csrf.as_str()),
            ("as", "approver"),
            ("reason", "restore"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(frozen.status(), StatusCode::SEE_OTHER);

    // Through the API: cancelling, a blanket grant's and an identity's revocation.
    for (client, path, body) in [
        (
            &alice,
            "/plans/p2/cancel".to_owned(),
            json!({"as": "publisher"}),
        ),
        (
            &bob,
            format!("/blankets/{blanket}/revoke"),
            json!({"as": "approver"}),
        ),
        (
            &root,
            "/principals/ann/revoke".to_owned(),
            json!({"as": "recovery-admin"}),
        ),
    ] {
        let (status, text) = status_and_body(
            client
                .post(format!("{base}/api/v1{path}"))
                .json(&body)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{path}: {text}");
    }
    // The API's freeze, on a machine already frozen, reaches the store's own rule.
    let (status, text) = status_and_body(
        root.post(format!("{base}/api/v1/machines/m1/freeze"))
            .json(&json!({"as": "recovery-admin", "reason": "again"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_ne!(status, StatusCode::SERVICE_UNAVAILABLE, "{text}");
    assert!(!text.contains("recovery mode is in effect"), "{text}");

    // The store holds each act.
    let timeline = bench.timeline().await.to_string();
    for said in ["p1", "p2"] {
        assert!(timeline.contains(said), "{said}: {timeline}");
    }
    let store = store(&bench).await;
    assert_eq!(store.plan("p1").await.unwrap().state.to_string(), "revoked");
    assert_eq!(
        store.plan("p2").await.unwrap().state.to_string(),
        "cancelled"
    );
    assert_eq!(
        store.plan("p3").await.unwrap().state.to_string(),
        "proposed"
    );
    assert!(store.machine(MACHINE).await.unwrap().frozen);
    assert!(
        store
            .blanket_approvals()
            .await
            .unwrap()
            .iter()
            .all(|b| b.revoked.is_some())
    );
    assert!(
        store
            .principals()
            .await
            .unwrap()
            .iter()
            .any(|p| p.id == "ann" && p.revoked)
    );

    // The recovery status and acts still answer, with the store's own refusals.
    assert_eq!(recovery_mode(&bob, &base).await["recoveryMode"], true);
    let (status, text) = status_and_body(
        root.post(format!("{base}/api/v1/recovery/account"))
            .json(&json!({"as": "recovery-admin", "request": {"machines": [MACHINE], "settle_floor": 30000, "explanation": null}}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{text}");
    assert!(text.contains("refused: accounting"), "{text}");
    assert!(bench.applies().is_empty());
    service.shutdown().await;
    bench.stop().await;
}

/// Started in recovery mode, the service's controller takes the recovery reads on
/// its timer — none before the entry plus the maximum transport deadline, then as
/// they fall due — without anyone running `recovery observe`, and sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_recovery_mode_the_controller_takes_the_recovery_reads_on_its_timer() {
    let bench = Bench::new().await;
    bench.approved_plan("p1").await;
    let stopped = infra_talos::cli::iso(now_ms() - 60_000);
    let backup = format!(
        "database=store-0412.dump@{}",
        infra_talos::cli::iso(now_ms() - 3_600_000)
    );
    bench
        .ok(
            ROOT,
            &[
                "recovery",
                "enter",
                "--stopped-at",
                &stopped,
                "--backup",
                &backup,
            ],
        )
        .await;
    assert_eq!(recorded(&bench, ObservationPurpose::Recovery).await, 0);
    let passes = PassSettings {
        every: Duration::from_millis(100),
        drift_every: Duration::from_millis(100),
    };
    let (service, _) = bench.serve_with(true, passes, 1, false).await;
    // Up to 30 s, in 100 ms steps.
    let mut tries = 300;
    while recorded(&bench, ObservationPurpose::Recovery).await == 0 {
        tries -= 1;
        assert!(tries > 0, "no recovery read was taken on the timer");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    service.shutdown().await;
    // It read and sent nothing; no drift pass ran in recovery mode.
    assert!(bench.applies().is_empty(), "a request reached the node");
    assert_eq!(recorded(&bench, ObservationPurpose::Drift).await, 0);
    let status = bench.ok(None, &["recovery", "status"]).await;
    assert!(status.contains("pre-restore unaccounted"), "{status}");
    bench.stop().await;
}

/// The drift pass runs on its interval, never at the service's start: with an hour's
/// interval, passes go by and no drift read is taken; with a short one, it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drift_pass_never_runs_at_start() {
    let bench = Bench::new().await;
    let hourly = PassSettings {
        every: Duration::from_millis(50),
        drift_every: Duration::from_secs(3600),
    };
    let (service, base) = bench.serve_with(true, hourly, 60, false).await;
    let anonymous = https(bench.dir.path(), None);
    // Up to 30 s, until the controller has made several passes.
    let mut tries = 300;
    loop {
        let metrics = anonymous
            .get(format!("{base}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let passes: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix("infra_talos_controller_passes_total "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        if passes >= 3 {
            break;
        }
        tries -= 1;
        assert!(tries > 0, "the controller made no passes: {metrics}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    service.shutdown().await;
    assert_eq!(
        recorded(&bench, ObservationPurpose::Drift).await,
        0,
        "a drift pass ran at start"
    );
    let short = PassSettings {
        every: Duration::from_millis(50),
        drift_every: Duration::from_millis(300),
    };
    let (service, _) = bench.serve_with(true, short, 60, false).await;
    let mut tries = 300;
    while recorded(&bench, ObservationPurpose::Drift).await == 0 {
        tries -= 1;
        assert!(tries > 0, "no drift pass ran on its interval");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    service.shutdown().await;
    bench.stop().await;
}

/// The recovery start (§7.2) on a restored store: until recovery-admin's entry
/// commits it takes nothing over, runs no plan and no pass, and answers liveness,
/// `whoami` and the entry only — not even the acts recovery mode always allows,
/// since the restored epoch still stands. Once entered, it serves as a start in
/// recovery mode: the recovery status, the recovery reads on its timer, and still
/// nothing sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovery_start_answers_liveness_and_the_entry_only_until_entry() {
    let bench = Bench::new().await;
    bench.approved_plan("p1").await;
    let passes = PassSettings {
        every: Duration::from_millis(100),
        drift_every: Duration::from_millis(100),
    };
    let (service, base) = bench.serve_with(true, passes, 1, true).await;
    let dir = bench.dir.path();
    let (anonymous, bob, root) = (
        https(dir, None),
        https(dir, Some("bob")),
        https(dir, Some("root")),
    );
    let (status, text) = status_and_body(
        anonymous
            .get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, text.as_str()), (StatusCode::OK, "ok\n"));
    let (status, text) = status_and_body(
        anonymous
            .get(format!("{base}/readyz"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, text.as_str()),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "awaiting recovery-mode entry\n"
        )
    );
    let (status, text) = status_and_body(
        bob.get(format!("{base}/api/v1/whoami"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    for (method, path) in [
        ("GET", "/metrics"),
        ("GET", "/"),
        ("GET", "/login"),
        ("GET", "/api/v1/recovery"),
        ("GET", "/api/v1/plans"),
        ("POST", "/api/v1/plans/p1/revoke"),
        ("POST", "/api/v1/machines/m1/freeze"),
        ("POST", "/api/v1/recovery/observe"),
        ("POST", "/api/v1/tokens"),
    ] {
        let request = match method {
            "GET" => bob.get(format!("{base}{path}")),
            _ => bob
                .post(format!("{base}{path}"))
                .json(&json!({"as": "approver", "reason": "x"})),
        };
        let (status, text) = status_and_body(request.send().await.unwrap()).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{path}: {text}");
        assert!(text.contains("started for recovery"), "{path}: {text}");
    }
    // Several controller intervals go by: the approved plan is not run, nothing is
    // read.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(bench.applies().is_empty(), "a request reached the node");
    assert_eq!(recorded(&bench, ObservationPurpose::Drift).await, 0);
    let store = store(&bench).await;
    assert_eq!(
        store.plan("p1").await.unwrap().state.to_string(),
        "approved"
    );

    let enter = format!("{base}/api/v1/recovery/enter");
    let (status, text) = status_and_body(
        bob.post(&enter)
            .json(&entry("approver", now_ms() - 60_000, &["database"]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{text}");
    let (status, text) = status_and_body(
        root.post(&enter)
            .json(&entry("recovery-admin", now_ms() - 60_000, &["database"]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(recovery_mode(&bob, &base).await["recoveryMode"], true);
    let (status, text) = status_and_body(
        anonymous
            .get(format!("{base}/readyz"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, text.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "recovery mode\n")
    );
    let mut tries = 300;
    while recorded(&bench, ObservationPurpose::Recovery).await == 0 {
        tries -= 1;
        assert!(tries > 0, "no recovery read was taken after the entry");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    service.shutdown().await;
    assert!(bench.applies().is_empty(), "a request reached the node");
    bench.stop().await;
}

/// A controller instance over the bench's store ran plan `p1` until the node
/// answered its request, and stopped there for good: the store holds the operation
/// with its attempt recorded and no response, as a backup taken then would. Returns
/// the operation.
async fn operation_with_an_attempt(bench: &Bench) -> String {
    use std::sync::Arc;

    use infra_talos::controller::{Interruption, InterruptionHook};

    bench.approved_plan("p1").await;
    let store: Arc<dyn Store> = Arc::new(store(bench).await);
    let keyring = Arc::new(
        infra_talos::keys::LocalKeyring::open(bench.dir.path().join("keys")).expect("keyring"),
    );
    let hook: InterruptionHook = Arc::new(|point| {
        Box::pin(async move {
            if point == Interruption::ResponseReceived {
                std::future::pending::<()>().await;
            }
        })
    });
    let executor = bench
        .executor(
            Arc::clone(&store),
            keyring,
            Arc::new(infra_core::engine::SystemClock::new()),
            infra_talos::contract::SpanMs::from_secs(60),
        )
        .with_interruptions(hook);
    let running = tokio::spawn(async move { executor.run_plan("p1").await });
    // Up to 30 s, until the node holds the request.
    let mut tries = 3000;
    while bench.applies().is_empty() {
        tries -= 1;
        assert!(tries > 0, "the plan's request never reached the node");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    running.abort();
    assert!(running.await.is_err_and(|e| e.is_cancelled()));
    let op = store
        .plan("p1")
        .await
        .unwrap()
        .operation
        .expect("an operation");
    let view = store.operation(&op).await.unwrap();
    assert_eq!(
        (view.state.to_string(), view.attempts),
        ("sending".into(), 1)
    );
    op
}

/// Polls `probe` every 100 ms for up to 30 s until it answers `true`.
async fn until<F: std::future::Future<Output = bool>>(what: &str, mut probe: impl FnMut() -> F) {
    let mut tries = 300;
    while !probe().await {
        tries -= 1;
        assert!(tries > 0, "{what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// recovery-admin's act at `path` under `/api/v1/recovery` with `body`: its status
/// and body.
async fn recovery_act(
    root: &reqwest::Client,
    base: &str,
    path: &str,
    body: Value,
) -> (StatusCode, String) {
    status_and_body(
        root.post(format!("{base}/api/v1/recovery{path}"))
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// recovery-admin enters recovery mode through the API (the instances stopped at
/// `stopped`), and accounts the machine's scope (§7.3 step 1) once the service's
/// recovery reads span the settle floor, `clock` (the store's) moved by hand: the
/// first read falls due after the maximum transport deadline, the next ones a
/// settle floor apart.
async fn enter_and_account(
    bench: &Bench,
    clock: &infra_talos::store::ManualClock,
    root: &reqwest::Client,
    base: &str,
    stopped: u64,
) {
    use infra_talos::contract::SpanMs;
    use infra_talos::store::DEFAULT_MAX_TRANSPORT_DEADLINE;

    let (status, text) = recovery_act(
        root,
        base,
        "/enter",
        entry("recovery-admin", stopped, &["database"]),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let floor = SpanMs::from_secs(30);
    // Each count is read before the clock moves, so that no read is missed.
    let mut reads = recorded(bench, ObservationPurpose::Recovery).await;
    clock.advance(SpanMs(DEFAULT_MAX_TRANSPORT_DEADLINE.0 + 1000));
    for _ in 0..4 {
        until("no recovery read was taken on the timer", || async {
            recorded(bench, ObservationPurpose::Recovery).await > reads
        })
        .await;
        reads = recorded(bench, ObservationPurpose::Recovery).await;
        let account = json!({"as": "recovery-admin", "request":
            {"machines": [MACHINE], "settle_floor": floor.0, "explanation": null}});
        if recovery_act(root, base, "/account", account).await.0 == StatusCode::OK {
            return;
        }
        clock.advance(floor);
    }
    panic!("the step 1 decision never passed");
}

/// §8.7's walk-through through the service alone (§7.3 step 5): a store restored
/// with an operation whose request was sent; the service started in recovery mode on
/// a store clock moved by hand; recovery-admin enters and, once the controller's
/// recovery reads span the settle floor, accounts the scope through the API. The
/// service's own loop then classifies the operation from a completion observation —
/// completed when the node runs the plan's configuration, failed when it does not —
/// takes the restoration read, and recovery-admin marks, releases and leaves
/// recovery mode through the API. The node receives no request after the restore.
async fn the_service_classifies_a_restored_operation(node_runs_the_plan: bool) {
    use infra_talos::contract::InstantMs;
    use infra_talos::store::ManualClock;

    let bench = Bench::new().await;
    let op = operation_with_an_attempt(&bench).await;
    if !node_runs_the_plan {
        // The configuration did not take: the node runs what it ran before.
        bench.sim.drift_config(base_config());
    }
    let stopped = now_ms();
    let clock = ManualClock::starting_at(InstantMs(stopped + 1000));
    let passes = PassSettings {
        every: Duration::from_millis(100),
        drift_every: Duration::from_secs(3600),
    };
    let (service, base) = bench.serve_on_clock(passes, &clock).await;
    let root = https(bench.dir.path(), Some("root"));
    let post = |path: &str, body: Value| {
        root.post(format!("{base}/api/v1/recovery{path}"))
            .json(&body)
            .send()
    };
    enter_and_account(&bench, &clock, &root, &base, stopped).await;
    let status = recovery_mode(&root, &base).await;
    assert_eq!(status["scopes"][0]["scope"], "unresolved", "{status}");

    // The service's loop classifies the operation, sending nothing.
    let expected = if node_runs_the_plan {
        "completed"
    } else {
        "failed"
    };
    until(
        "the service never classified the restored operation",
        || async {
            !matches!(
                store(&bench)
                    .await
                    .operation(&op)
                    .await
                    .unwrap()
                    .state
                    .to_string()
                    .as_str(),
                "sending" | "verifying" | "unresolved"
            )
        },
    )
    .await;
    let store = store(&bench).await;
    let state = store.operation(&op).await.unwrap().state.to_string();
    assert_eq!(state, expected);
    let applied = store.machine(MACHINE).await.unwrap().applied_release;
    let applied_expected = if node_runs_the_plan {
        RELEASE
    } else {
        HANDOVER_RELEASE
    };
    assert_eq!(applied.as_deref(), Some(applied_expected));

    // The recovery pass takes the restoration read the mark rests on.
    until("no restoration read was taken", || async {
        recorded(&bench, ObservationPurpose::Restoration).await > 0
    })
    .await;
    let (status, text) = status_and_body(
        post(&format!("/{MACHINE}/mark"), json!({"as": "recovery-admin"}))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(text.contains("ready"), "{text}");
    for path in [format!("/{MACHINE}/release"), "/leave".to_owned()] {
        let (status, text) =
            status_and_body(post(&path, json!({"as": "recovery-admin"})).await.unwrap()).await;
        assert_eq!(status, StatusCode::OK, "{path}: {text}");
    }
    let status = recovery_mode(&root, &base).await;
    assert_eq!(status["recoveryMode"], false, "{status}");
    service.shutdown().await;
    assert_eq!(
        bench.applies().len(),
        1,
        "the node received a request after the restore"
    );
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_classifies_a_restored_operation_completed_and_recovery_ends() {
    the_service_classifies_a_restored_operation(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_classifies_a_restored_operation_failed_and_recovery_ends() {
    the_service_classifies_a_restored_operation(false).await;
}

/// Recovery-admin's mark through the API: its status and the answer's JSON.
async fn mark(root: &reqwest::Client, base: &str) -> (StatusCode, Value) {
    let (status, text) = recovery_act(
        root,
        base,
        &format!("/{MACHINE}/mark"),
        json!({"as": "recovery-admin"}),
    )
    .await;
    (status, serde_json::from_str(&text).expect("JSON"))
}

/// §7.4 and choice §10.20 through the service alone: a handed-over machine whose
/// Desired release was sealed under a key version the keyring no longer opens.
/// Recovery-admin enters and accounts through the API; the mark answers blocked on
/// the missing key version, and the release is refused. A new release, published on
/// the database (reading §11.29) under the key's current version, moves Desired
/// without unblocking anything by itself: the release is still refused. The next
/// mark answers ready, and the release and leaving succeed. The node receives no
/// request throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_scope_is_cleared_by_a_new_release_through_the_service() {
    use infra_talos::contract::InstantMs;
    use infra_talos::keys::LocalKeyring;
    use infra_talos::store::ManualClock;

    let bench = Bench::new().await;
    // Desired is rel-1, sealed under version 1 of key `retired`; the keyring then
    // takes version 2 and stops decrypting below it, so rel-1's artifact is lost.
    bench.publish_under(RELEASE, "retired").await;
    let keyring = LocalKeyring::open(bench.dir.path().join("keys")).expect("keyring");
    assert_eq!(keyring.rotate_key("retired").expect("rotated"), 2);
    keyring
        .set_min_decryption_version("retired", 2)
        .expect("floor moved");

    let stopped = now_ms();
    let clock = ManualClock::starting_at(InstantMs(stopped + 1000));
    let passes = PassSettings {
        every: Duration::from_millis(100),
        drift_every: Duration::from_secs(3600),
    };
    let (service, base) = bench.serve_on_clock(passes, &clock).await;
    let root = https(bench.dir.path(), Some("root"));
    enter_and_account(&bench, &clock, &root, &base, stopped).await;
    until("no restoration read was taken", || async {
        recorded(&bench, ObservationPurpose::Restoration).await > 0
    })
    .await;

    // The mark: blocked, the key version missing; the release is refused.
    let missing = json!({"blocked": {"missing_dependency": "key_version"}});
    let (status, marked) = mark(&root, &base).await;
    assert_eq!(status, StatusCode::OK, "{marked}");
    assert_eq!(marked["scope"], missing, "{marked}");
    assert_eq!(marked["missing"], "key_version", "{marked}");
    let release = format!("/{MACHINE}/release");
    let refused_release = |says: &'static str| {
        let (root, base, release) = (&root, &base, &release);
        async move {
            let (status, text) =
                recovery_act(root, base, release, json!({"as": "recovery-admin"})).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{text}");
            assert!(text.contains("refused: releasing a scope"), "{text}");
            assert!(text.contains(says), "{says:?} not in {text}");
        }
    };
    refused_release(
        "only a ready scope is released; this one is blocked (missing artifact key version)",
    )
    .await;

    // A new release under the key's current version, published on the database:
    // Desired moves, the scope stays blocked until it is marked again.
    let published = bench.publish_under("rel-2", "retired").await;
    assert!(
        published.contains("release rel-2 published by alice (publisher), sealed with key retired"),
        "{published}"
    );
    let status = recovery_mode(&root, &base).await;
    assert_eq!(status["recoveryMode"], true, "{status}");
    assert_eq!(status["scopes"][0]["scope"], missing, "{status}");
    refused_release(
        "only a ready scope is released; this one is blocked (missing artifact key version)",
    )
    .await;

    // The mark on the new Desired, whose dependencies all exist: ready.
    let (status, marked) = mark(&root, &base).await;
    assert_eq!(status, StatusCode::OK, "{marked}");
    assert_eq!(marked["scope"], "ready", "{marked}");
    assert_eq!(marked["missing"], Value::Null, "{marked}");
    // The timeline holds both marks, each on the Desired it checked.
    let timeline = bench.timeline().await;
    let marks: Vec<&str> = timeline["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["kind"] == "scope_marked")
        .map(|e| e["detail"].as_str().expect("detail"))
        .collect();
    assert_eq!(marks.len(), 2, "{marks:?}");
    assert!(
        marks[0].starts_with("marked blocked (missing artifact key version)")
            && marks[0].ends_with("Desired rel-1"),
        "{marks:?}"
    );
    assert!(
        marks[1].starts_with("marked ready") && marks[1].ends_with("Desired rel-2"),
        "{marks:?}"
    );
    let (status, text) =
        recovery_act(&root, &base, &release, json!({"as": "recovery-admin"})).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let released: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(released["machine"], MACHINE, "{released}");
    let (status, text) =
        recovery_act(&root, &base, "/leave", json!({"as": "recovery-admin"})).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let status = recovery_mode(&root, &base).await;
    assert_eq!(status["recoveryMode"], false, "{status}");
    assert_eq!(status["scopes"][0]["scope"], "normal", "{status}");
    service.shutdown().await;
    assert!(bench.applies().is_empty(), "a request reached the node");
    let machine = store(&bench).await.machine(MACHINE).await.unwrap();
    assert_eq!(
        (
            machine.desired_release.as_deref(),
            machine.applied_release.as_deref()
        ),
        (Some("rel-2"), Some(HANDOVER_RELEASE))
    );
    bench.stop().await;
}
