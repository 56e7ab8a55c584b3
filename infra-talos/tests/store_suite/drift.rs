//! Drift records through the store (§6.1, §6.5): what a drift observation opens,
//! extends and closes, and the basis rules that keep a stale read from deciding.
//! Run by both stores through `drift_suite!`.

use infra_talos::contract::adoption::Hold;
use infra_talos::store::{Guards, MachineView, ObservationRequest, Store};

use super::*;

fn drift_entries(timeline: &[infra_talos::store::TimelineEntry]) -> Vec<(String, String)> {
    timeline
        .iter()
        .filter(|e| e.kind.starts_with("drift_"))
        .map(|e| (e.kind.clone(), e.detail.clone()))
        .collect()
}

async fn machine<S: Store>(s: &S, id: &str) -> MachineView {
    s.machine(id).await.unwrap()
}

async fn drift_read<S: Store>(s: &S, id: &str, digest: Digest) -> u64 {
    observe(s, id, ObservationPurpose::Drift, None, A, facts(id, digest)).await
}

/// A drift observation that differs from Applied opens a record, its opening entry
/// the digest-mismatch alert; one that shows Applied again closes it as returned,
/// and the machine can be planned and committed again (§6.1, §6.5).
pub async fn drift_opens_and_returns<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    let edited = config_digest(b"edited by hand\n");
    let basis = drift_read(s, "m1", edited).await;
    let opened = machine(s, "m1").await.open_drift.expect("no record opened");
    let entries = drift_entries(&s.timeline("m1").await.unwrap());
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].0, "drift_opened");
    assert!(
        entries[0].1.contains("digest mismatch") && entries[0].1.contains(&format!("r{basis}")),
        "{entries:?}"
    );
    // While it is open, a plain plan is refused by the gate.
    ready(&env, "p-blocked", "m1", A).await;
    refused_by(s, "p-blocked", "m1", A, Comparison::Gate).await;
    // The node goes back to Applied by hand.
    drift_read(s, "m1", base_digest("m1")).await;
    assert_eq!(machine(s, "m1").await.open_drift, None);
    let entries = drift_entries(&s.timeline("m1").await.unwrap());
    assert_eq!(entries.last().unwrap().0, "drift_closed", "{entries:?}");
    assert!(
        entries.last().unwrap().1.contains("returned")
            && entries
                .last()
                .unwrap()
                .1
                .contains(&format!("r{}", opened.0)),
        "{entries:?}"
    );
    // The machine is plannable again; a plain plan's approval carries no mark.
    ready(&env, "p-after", "m1", A).await;
    assert!(!s.plan("p-after").await.unwrap().unseen_overwrite());
    let plain = s
        .timeline("m1")
        .await
        .unwrap()
        .into_iter()
        .rfind(|e| e.kind == "approval")
        .unwrap();
    assert!(!plain.detail.contains("unseenOverwrite"), "{plain:?}");
    s.commit("p-after", A).await.unwrap();
}

/// A record opened by a refused commitment's evidence (§3.2) also closes as
/// returned when the machine comes back by hand.
pub async fn refused_commitment_drift_returns<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    approved(&env, "p1", "m2", "rel-1").await;
    evidence(s, "p1", "m2", A, facts("m2", config_digest(b"hand edit\n"))).await;
    refused_by(s, "p1", "m2", A, Comparison::Evidence).await;
    assert!(machine(s, "m2").await.open_drift.is_some());
    drift_read(s, "m2", base_digest("m2")).await;
    assert_eq!(machine(s, "m2").await.open_drift, None);
    ready(&env, "p2", "m2", A).await;
    s.commit("p2", A).await.unwrap();
}

/// A second out-of-band change extends the open record with the latest digest: a
/// revert planned after it expects that digest and commits, one planned before it
/// is refused by comparison 3 (§6.4), and the completed revert closes the record.
pub async fn second_change_moves_the_revert<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    let first = config_digest(b"first edit\n");
    let second = config_digest(b"second edit\n");
    drift_read(s, "m1", first).await;
    let opened = machine(s, "m1").await.open_drift.unwrap();
    let mut early = spec("p-early", "m1", "rel-1", env.clock.now());
    early.revert = true;
    s.create_plan(&alice(), early).await.unwrap();
    s.approve(&bob(), "p-early").await.unwrap();
    drift_read(s, "m1", second).await;
    assert_eq!(
        machine(s, "m1").await.open_drift,
        Some(opened),
        "a further differing read extends the same record"
    );
    let entries = drift_entries(&s.timeline("m1").await.unwrap());
    assert_eq!(
        entries.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(),
        ["drift_opened", "drift_extended"]
    );
    evidence(s, "p-early", "m1", A, facts("m1", second)).await;
    refused_by(s, "p-early", "m1", A, Comparison::Evidence).await;
    let mut late = spec("p-late", "m1", "rel-1", env.clock.now());
    late.revert = true;
    s.create_plan(&alice(), late).await.unwrap();
    s.approve(&bob(), "p-late").await.unwrap();
    // §6.4: a revert's approval is marked as overwriting what nobody saw; a plain
    // plan's is not.
    assert!(s.plan("p-late").await.unwrap().unseen_overwrite());
    let approvals: Vec<_> = s
        .timeline("m1")
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "approval")
        .collect();
    let late = approvals
        .iter()
        .find(|e| e.plan.as_deref() == Some("p-late"))
        .unwrap();
    assert!(
        late.detail.contains(&format!(
            "unseenOverwrite: overwrites the configuration of drift record r{}",
            opened.0
        )),
        "{late:?}"
    );
    evidence(s, "p-late", "m1", A, facts("m1", second)).await;
    let c = s.commit("p-late", A).await.unwrap();
    sent_and_completed(s, &c, "m1", artifact_digest("m1", "rel-1")).await;
    assert_eq!(machine(s, "m1").await.open_drift, None);
    let entries = drift_entries(&s.timeline("m1").await.unwrap());
    let closed = entries.last().unwrap();
    assert_eq!(closed.0, "drift_closed");
    assert!(closed.1.contains("reverted"), "{closed:?}");
}

/// §6.1's basis rules through the store: a read begun before an operation applied a
/// new release opens nothing, nor does a read that a recorded higher-basis read
/// superseded; a purpose other than drift or restoration never opens a record.
pub async fn stale_reads_decide_nothing<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    let edited = config_digest(b"edited\n");
    // Superseded: t1 begins, t2 begins and records Applied, then t1 records an edit.
    let t1 = begin(s, "m2").await;
    let t2 = begin(s, "m2").await;
    s.record_observation(&t2, facts("m2", base_digest("m2")))
        .await
        .unwrap();
    s.record_observation(&t1, facts("m2", edited))
        .await
        .unwrap();
    assert_eq!(machine(s, "m2").await.open_drift, None);
    // Control: the same edit read afresh opens a record.
    drift_read(s, "m2", edited).await;
    assert!(machine(s, "m2").await.open_drift.is_some());
    // Begun before an applied change: the old digest is not drift against the new
    // Applied.
    let stale = begin(s, "m1").await;
    ready(&env, "p1", "m1", A).await;
    let c = s.commit("p1", A).await.unwrap();
    sent_and_completed(s, &c, "m1", artifact_digest("m1", "rel-1")).await;
    s.record_observation(&stale, facts("m1", base_digest("m1")))
        .await
        .unwrap();
    assert_eq!(machine(s, "m1").await.open_drift, None);
    // A publication read never opens a record.
    observe(
        s,
        "m1",
        ObservationPurpose::Publication,
        None,
        A,
        facts("m1", edited),
    )
    .await;
    assert_eq!(machine(s, "m1").await.open_drift, None);
    // Control: a drift read of the same edit does.
    drift_read(s, "m1", edited).await;
    assert!(machine(s, "m1").await.open_drift.is_some());
}

/// §6.3 for a machine that drifted: the adopt plan binds the open record and its
/// latest digest; its approval carries no unseenOverwrite mark; the adoption record
/// relies on the newest observation and refuses a stale one (held, nothing
/// written), then records Applied as the adopted release at the drifted digest and
/// closes the record as adopted. A second plan for the same machine whose Desired
/// moved is refused by requirement 3, once, and never tried again.
pub async fn adoption_closes_the_record<S: Store>(env: Env<S>) {
    let s = &env.store;
    world(s).await;
    let edited = config_digest(b"edited by hand\n");
    drift_read(s, "m1", edited).await;
    let opened = machine(s, "m1").await.open_drift.expect("no record opened");
    // Applied is m1's handover; nothing is adoptable without a drift record on m2.
    let err = s
        .create_adopt_plan(&alice(), adopt_spec("a-m2", "m2", "rel-1", env.clock.now()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("nothing to adopt"), "{err}");
    publish(s, "rel-2").await;
    let plan = s
        .create_adopt_plan(&alice(), adopt_spec("a-m1", "m1", "rel-2", env.clock.now()))
        .await
        .unwrap();
    assert_eq!(plan.bound_drift, Some(opened));
    assert!(!plan.unseen_overwrite());
    // A commitment is not the way to record it.
    assert!(matches!(
        s.commit("a-m1", A).await,
        Err(StoreError::Refused { .. })
    ));
    s.approve(&bob(), "a-m1").await.unwrap();
    let approval = s
        .timeline("m1")
        .await
        .unwrap()
        .into_iter()
        .rfind(|e| e.kind == "approval");
    assert!(!approval.unwrap().detail.contains("unseenOverwrite"));
    // The newest observation began before the approval: held, nothing written.
    let before = s.timeline("m1").await.unwrap().len();
    let held = s.record_adoption("a-m1", A).await.unwrap();
    assert!(
        matches!(held, AdoptionOutcome::Held(Hold::MissingEvidence { .. })),
        "{held:?}"
    );
    assert_eq!(s.timeline("m1").await.unwrap().len(), before);
    drift_read(s, "m1", edited).await;
    let recorded = s.record_adoption("a-m1", A).await.unwrap();
    let AdoptionOutcome::Recorded { operation } = recorded else {
        panic!("not recorded: {recorded:?}");
    };
    let view = machine(s, "m1").await;
    assert_eq!(view.applied_release.as_deref(), Some("rel-2"));
    assert_eq!(view.applied_digest, Some(edited));
    assert_eq!(view.open_drift, None);
    let op = s.operation(&operation).await.unwrap();
    assert_eq!(op.state, OperationState::Completed);
    assert_eq!(op.attempts, 0);
    let entries = drift_entries(&s.timeline("m1").await.unwrap());
    let closed = entries.last().unwrap();
    assert_eq!(closed.0, "drift_closed");
    assert!(closed.1.contains("(adopted)"), "{closed:?}");
    assert_eq!(
        s.record_adoption("a-m1", A).await.unwrap(),
        AdoptionOutcome::Held(Hold::AlreadyAdopted)
    );
    // m2 drifts too; its adopt plan is approved, then its Desired moves.
    drift_read(s, "m2", edited).await;
    s.create_adopt_plan(&alice(), adopt_spec("a-m2", "m2", "rel-2", env.clock.now()))
        .await
        .unwrap();
    s.approve(&bob(), "a-m2").await.unwrap();
    drift_read(s, "m2", edited).await;
    publish(s, "rel-3").await;
    let err = s.record_adoption("a-m2", A).await.unwrap_err();
    assert!(
        matches!(err, StoreError::AdoptionRefused { requirement: 3, .. }),
        "{err}"
    );
    assert_eq!(
        s.record_adoption("a-m2", A).await.unwrap(),
        AdoptionOutcome::Held(Hold::AlreadyRefused)
    );
    let refusals = s
        .timeline("m2")
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "adoption_refused")
        .count();
    assert_eq!(refusals, 1);
    assert_eq!(
        machine(s, "m2").await.applied_release.as_deref(),
        Some("rel-0")
    );
}

fn adopt_spec(id: &str, machine: &str, release: &str, now: InstantMs) -> AdoptPlanSpec {
    AdoptPlanSpec {
        id: id.into(),
        machine: machine.into(),
        release: release.into(),
        expires_at: now.plus(SpanMs::from_secs(3600)),
        max_evidence_age: SpanMs::from_secs(60),
    }
}

async fn begin<S: Store>(s: &S, id: &str) -> infra_talos::store::ObservationTicket {
    s.begin_observation(ObservationRequest {
        machine: id.into(),
        purpose: ObservationPurpose::Drift,
        plan: None,
        controller: A,
    })
    .await
    .unwrap()
}

/// Run the named drift case on a fresh store.
pub async fn run<S, F, Fut>(name: &str, make: F)
where
    S: Store,
    F: Fn(Guards) -> Fut,
    Fut: Future<Output = Env<S>>,
{
    let env = make(Guards::default()).await;
    match name {
        "drift_opens_and_returns" => drift_opens_and_returns(env).await,
        "refused_commitment_drift_returns" => refused_commitment_drift_returns(env).await,
        "second_change_moves_the_revert" => second_change_moves_the_revert(env).await,
        "stale_reads_decide_nothing" => stale_reads_decide_nothing(env).await,
        "adoption_closes_the_record" => adoption_closes_the_record(env).await,
        other => panic!("no drift case {other}"),
    }
}

/// Declare, in a module `drift`, one `#[tokio::test]` per case above, each calling
/// the runner's `$make`.
#[macro_export]
macro_rules! drift_suite {
    ($make:ident) => {
        mod drift {
            $crate::drift_suite!(@each $make;
                drift_opens_and_returns, refused_commitment_drift_returns,
                second_change_moves_the_revert, stale_reads_decide_nothing,
                adoption_closes_the_record);
        }
    };
    (@each $make:ident; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                if let Some(make) = $crate::$make() {
                    $crate::store_suite::drift::run(stringify!($name), make).await;
                }
            }
        )*
    };
}
