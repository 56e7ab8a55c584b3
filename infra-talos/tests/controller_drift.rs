//! The controller's drift pass against the SQLite store and a simulated node over
//! real gRPC with mutual TLS (§6.1, §6.5, choices §10.35, §10.36): out-of-band
//! changes are made on the node, the pass records drift observations, and the
//! store's drift rules open, extend and close the record.

mod controller_common;

use std::sync::{Arc, Mutex};

use controller_common::*;
use infra_talos::contract::evidence::ObservationPurpose;
use infra_talos::contract::{Revision, SpanMs};
use infra_talos::controller::{DriftFinding, DriftPass, ExecutorError};
use infra_talos::store::Store;

fn finding(pass: &DriftPass) -> DriftFinding {
    assert_eq!(pass.readings.len(), 1, "one managed machine: {pass:?}");
    assert_eq!(pass.readings[0].machine, MACHINE);
    pass.readings[0].finding.clone()
}

fn edited(config: &[u8], marker: &str) -> Vec<u8> {
    let mut out = config.to_vec();
    out.extend_from_slice(format!("\n# {marker}\n").as_bytes());
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_opens_extends_and_closes_the_record_as_the_node_changes() {
    let w = World::new().await;
    let executor = w.executor(A);
    let applied = w.sim.config();

    assert_eq!(
        finding(&executor.drift_pass().await.expect("pass")),
        DriftFinding::InStep
    );
    assert_eq!(
        w.store.machine(MACHINE).await.expect("machine").open_drift,
        None
    );

    w.sim.drift_config(edited(&applied, "first edit"));
    let DriftFinding::Opened { record } = finding(&executor.drift_pass().await.expect("pass"))
    else {
        panic!("a changed node must open a drift record");
    };
    let machine = w.store.machine(MACHINE).await.expect("machine");
    assert_eq!(machine.open_drift, Some(record));
    let opening = w
        .timeline()
        .await
        .into_iter()
        .find(|e| e.revision == record)
        .expect("the opening entry");
    assert_eq!(opening.kind, "drift_opened");
    assert!(
        opening.detail.contains("digest mismatch"),
        "the opening entry is the alert: {opening:?}"
    );

    w.sim.drift_config(edited(&applied, "second edit"));
    assert_eq!(
        finding(&executor.drift_pass().await.expect("pass")),
        DriftFinding::StillOpen { record }
    );
    let kinds: Vec<String> = w.timeline().await.into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds.iter().filter(|k| *k == "drift_extended").count(), 1);

    w.sim.drift_config(applied.clone());
    assert_eq!(
        finding(&executor.drift_pass().await.expect("pass")),
        DriftFinding::Closed { record }
    );
    let closing = w.timeline().await.pop().expect("an entry");
    assert_eq!(closing.kind, "drift_closed");
    assert!(closing.detail.contains("returned"), "{closing:?}");
    assert_eq!(
        w.store.machine(MACHINE).await.expect("machine").open_drift,
        None
    );

    let drift_reads = w
        .store
        .observations(MACHINE)
        .await
        .expect("observations")
        .into_iter()
        .filter(|o| o.purpose == ObservationPurpose::Drift)
        .count();
    assert_eq!(drift_reads, 4, "each pass records one drift observation");
    assert_eq!(
        w.applies(),
        0,
        "drift never triggers an apply (choice §10.12)"
    );
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_node_is_reported_as_such_never_as_in_step() {
    let w = World::new().await;
    let executor = w.executor(A);
    let World {
        sim, store, dir, ..
    } = w;
    let Ok(sim) = Arc::try_unwrap(sim) else {
        panic!("the simulator is shared elsewhere");
    };
    sim.shutdown().await.expect("simulator stops");
    let pass = executor.drift_pass().await.expect("pass");
    assert!(
        matches!(finding(&pass), DriftFinding::Unreachable { .. }),
        "{pass:?}"
    );
    assert_eq!(
        store.machine(MACHINE).await.expect("machine").open_drift,
        None
    );
    drop(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_runs_a_pass_per_interval_until_stopped() {
    let w = World::new().await;
    let executor = w.executor(A);
    let applied = w.sim.config();
    let seen: Arc<Mutex<Vec<DriftFinding>>> = Arc::default();
    let record = Arc::clone(&seen);
    let sim = Arc::clone(&w.sim);
    let start = w.clock.now();
    let interval = SpanMs::from_secs(300);
    let stop_clock = w.clock.clone();
    // The watch's sleeps move the shared manual clock; the stop fires once three
    // intervals have passed, and the node is edited after the first pass.
    let stop = async move {
        while stop_clock.now().0 < start.0 + 3 * interval.0 {
            tokio::task::yield_now().await;
        }
    };
    let passes = executor
        .watch_drift(interval, stop, |pass| {
            let mut seen = record.lock().expect("lock");
            seen.push(finding(pass));
            if seen.len() == 1 {
                sim.drift_config(edited(&applied, "edit between intervals"));
            }
        })
        .await
        .expect("watch");
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(passes, seen.len());
    assert!(passes >= 3, "one pass per interval: {seen:?}");
    assert_eq!(seen[0], DriftFinding::InStep);
    assert!(matches!(seen[1], DriftFinding::Opened { .. }), "{seen:?}");
    assert!(
        seen[2..]
            .iter()
            .all(|f| matches!(f, DriftFinding::StillOpen { .. })),
        "{seen:?}"
    );
    let open = w.store.machine(MACHINE).await.expect("machine").open_drift;
    assert!(matches!(open, Some(Revision(_))));
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_interval_is_refused() {
    let w = World::new().await;
    let executor = w.executor(A);
    let refused = executor
        .watch_drift(SpanMs(0), async {}, |_| {})
        .await
        .expect_err("a zero interval");
    assert!(
        matches!(&refused, ExecutorError::Settings(m) if m.contains("drift interval")),
        "{refused}"
    );
    w.stop().await;
}

/// §6.1, §5.2: a request held past its deadline is accounted by decision and the
/// operation fails; when the request lands afterwards, the drift it causes is linked
/// to that operation as a possible late landing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_landing_is_linked_to_the_operation_accounted_by_decision() {
    use infra_talos::contract::operation::OperationState;
    use infra_testkit::talos::{ApplyFault, Landing};

    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 1).await;
    w.sim.fail_next_apply(ApplyFault::Hold(Landing::OnRelease));
    let out = w.executor(A).run_plan("p1").await.expect("run");
    let op = out.operation.clone();
    let b = w.executor(B);
    b.take_over(&op).await.expect("takeover");
    observe_until_decided(&w, &b, &op).await;
    let failed = b.after_accounting(&op).await.expect("classified");
    assert_eq!(failed.state, OperationState::Failed);
    let links = |timeline: &[infra_talos::store::TimelineEntry]| {
        timeline
            .iter()
            .filter(|e| e.kind == "late_landing_linked")
            .map(|e| e.operation.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        finding(&b.drift_pass().await.expect("pass")),
        DriftFinding::InStep
    );
    assert!(links(&w.timeline().await).is_empty());

    // The held request lands now: the node runs rel-1 behind a failed operation.
    w.sim.release_held();
    while w.sim.config() != artifact("rel-1") {
        tokio::task::yield_now().await;
    }
    let DriftFinding::Opened { record } = finding(&b.drift_pass().await.expect("pass")) else {
        panic!("the landing must open a drift record");
    };
    let timeline = w.timeline().await;
    assert_eq!(links(&timeline), vec![Some(op.clone())]);
    let link = timeline
        .iter()
        .find(|e| e.kind == "late_landing_linked")
        .expect("the link");
    assert!(
        link.detail.contains(&format!("record r{}", record.0)),
        "{link:?}"
    );
    // A further pass extends nothing new and links the operation no second time.
    assert_eq!(
        finding(&b.drift_pass().await.expect("pass")),
        DriftFinding::StillOpen { record }
    );
    assert_eq!(links(&w.timeline().await), vec![Some(op)]);
    w.stop().await;
}

/// §4, §6.1, §6.5 through the executor: a request held without an answer is
/// accounted by decision while the node is changed by hand, and the completion
/// observation the executor then takes shows neither the artifact nor the
/// pre-dispatch digest. The operation fails, Applied stays, and the transaction that
/// records failed opens a drift record resting on that observation, with nothing
/// sent again. Control: the same run with the node left alone fails on the
/// pre-dispatch digest and opens no record
/// (`a_late_landing_is_linked_to_the_operation_accounted_by_decision`, before the
/// landing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_operation_opens_a_drift_record() {
    use infra_talos::contract::operation::OperationState;
    use infra_testkit::talos::{ApplyFault, Landing};

    let w = World::new().await;
    let before = w.store.machine(MACHINE).await.expect("machine");
    w.approved_plan("p1", "rel-1", 1).await;
    w.sim.fail_next_apply(ApplyFault::Hold(Landing::OnRelease));
    let out = w.executor(A).run_plan("p1").await.expect("run");
    let op = out.operation.clone();
    let by_hand = edited(&w.sim.config(), "changed by hand while the request waits");
    w.sim.drift_config(by_hand.clone());
    let b = w.executor(B);
    b.take_over(&op).await.expect("takeover");
    observe_until_decided(&w, &b, &op).await;
    let failed = b.after_accounting(&op).await.expect("classified");
    assert_eq!(failed.state, OperationState::Failed);
    let after = w.store.machine(MACHINE).await.expect("machine");
    assert_eq!(
        (after.applied_release, after.applied_digest),
        (before.applied_release, before.applied_digest),
        "failed moved Applied"
    );
    let record = after
        .open_drift
        .expect("the failure opened no drift record");
    let timeline = w.timeline().await;
    let opened = timeline
        .iter()
        .find(|e| e.revision == record)
        .expect("the record's opening entry");
    assert_eq!(opened.kind, "drift_opened");
    assert_eq!(opened.operation.as_deref(), Some(op.as_str()), "{opened:?}");
    let shown = infra_talos::config_digest(&by_hand);
    assert!(
        opened.detail.contains(&format!("shows digest {shown}")),
        "{opened:?}"
    );
    let completion = w
        .store
        .observations(MACHINE)
        .await
        .expect("observations")
        .into_iter()
        .rfind(|o| o.purpose == ObservationPurpose::Completion)
        .expect("the completion observation");
    assert!(
        opened.detail.starts_with(&format!(
            "digest mismatch: observation basis r{} ",
            completion.basis.0
        )),
        "{opened:?}"
    );
    assert_eq!(w.sim.apply_requests().len(), 1, "sent again");
    w.stop().await;
}
