//! Verification cases driven through the executor against the SQLite store and
//! simulated workers over real gRPC with mutual TLS:
//!
//! - takeover at controller start with several open operations, each stopped at a
//!   different point, with the first instance fenced on every one of them (§3.4,
//!   §5.3);
//! - the order of attempt and send on the retry paths (cases 014, 019, 020): each
//!   apply request the node receives finds its attempt row already in the store
//!   (§3.3, §8 invariant 2);
//! - §5 precedence through the executor: a closed gate with an attempt on record,
//!   and an operation with an unknown attempt and a validation rejection (choice
//!   §10.10, §5.1);
//! - the consequence of case 011: without the scope index a stale send overwrites
//!   the newer configuration (§3.2 comparison 4, §8 invariant 1).

mod controller_common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use controller_common::*;
use infra_core::engine::Clock;
use infra_talos::contract::classify::{Classification, FailedReason, RetryBlocker};
use infra_talos::contract::comparison::Comparison;
use infra_talos::contract::evidence::{DigestMatch, ObservationPurpose, ResponseClass};
use infra_talos::contract::operation::{ControllerId, OperationState, OwnerToken};
use infra_talos::contract::{SpanMs, plan::PlanState};
use infra_talos::controller::{
    Connector, ConnectorMap, Executor, ExecutorError, ExecutorSettings, Interruption,
    InterruptionHook, MachineRoute, TalosconfigConnector,
};
use infra_talos::keys::KeyProvider;
use infra_talos::store::sqlite::SqliteStore;
use infra_talos::store::{
    AttemptAccounting, AttemptView, ContributionKind, DependencyCheck, Guards, IdentityKey,
    MachineSpec, ManualClock, ObservationRequest, ObservedFacts, PlanSpec, SealedReleaseSpec,
    Store, StoreError,
};
use infra_talos::{NodeAddress, config_digest};
use infra_testkit::talos::{ApplyFault, Landing, NodeFacts, TalosSim};
use tokio::sync::Notify;

/// A hook that, at `point`, tells `paused` and waits for `go`.
fn pause_at(point: Interruption) -> (InterruptionHook, Arc<Notify>, Arc<Notify>) {
    let paused = Arc::new(Notify::new());
    let go = Arc::new(Notify::new());
    let (p, g) = (paused.clone(), go.clone());
    let hook: InterruptionHook = Arc::new(move |at| {
        let (p, g) = (p.clone(), g.clone());
        Box::pin(async move {
            if at == point {
                p.notify_one();
                g.notified().await;
            }
        })
    });
    (hook, paused, go)
}

/// The operation plan `plan` committed.
async fn operation_of(w: &World, plan: &str) -> String {
    w.store
        .plan(plan)
        .await
        .unwrap()
        .operation
        .expect("the plan has its operation")
}

/// Makes plan `plan` for `machine` on its Desired release `release` (already
/// published) and has the approver approve it.
async fn approve_plan(w: &World, machine: &str, plan: &str, release: &str, max_attempts: u32) {
    w.store
        .create_plan(
            &publisher(),
            PlanSpec {
                id: plan.into(),
                machine: machine.into(),
                release: release.into(),
                expires_at: w.clock.now().plus(SpanMs::from_secs(3600)),
                max_evidence_age: SpanMs::from_secs(60),
                transport_deadline: TRANSPORT,
                verification_deadline: SpanMs::from_secs(60),
                max_attempts,
                revert: false,
            },
        )
        .await
        .expect("plan");
    w.store.approve(&approver(), plan).await.expect("approve");
}

/// Seals and publishes `release` for `machine` alone.
async fn publish_for(w: &World, machine: &str, release: &str) {
    let sealed = w
        .keyring
        .seal("artifacts", &artifact(release))
        .await
        .expect("seal");
    w.store
        .publish_sealed_release(
            &publisher(),
            SealedReleaseSpec {
                id: release.into(),
                artifacts: vec![(machine.into(), sealed)],
                contributions: vec![("ann".into(), ContributionKind::Authored)],
            },
        )
        .await
        .expect("publish");
}

// ---------------------------------------------------------------------------------
// Several machines, one simulated worker each.

/// A worker beside the world's own: its simulator, and a connector holding its own
/// talosconfig (each simulator has its own certificate authority).
struct Worker {
    id: &'static str,
    sim: TalosSim,
    connector: Arc<TalosconfigConnector>,
}

impl Worker {
    /// Starts a simulator with its own identity, adds machine `id` for it in its own
    /// rollout scope (so one machine's operation takes no other's slot), publishes
    /// `rel-<id>` for it and approves plan `p-<id>`.
    async fn add(w: &World, id: &'static str, n: u8) -> Worker {
        let facts = NodeFacts {
            hostname: format!("talos-{id}"),
            smbios_uuid: format!("4c4c4544-0000-4000-8000-0000000000{n:02x}"),
            node_id: format!("node-{id}"),
            ..node_facts()
        };
        let sim = TalosSim::builder()
            .facts(facts.clone())
            .clock(Arc::new(LinkedClock(w.clock.clone())))
            .start()
            .await
            .expect("simulator");
        let dir = w.dir.path().join(id);
        std::fs::create_dir(&dir).expect("dir");
        let talosconfig = sim
            .write_talosconfig(&dir, &sim.pki().admin_client().expect("client"))
            .expect("talosconfig");
        let connector =
            TalosconfigConnector::load(&talosconfig, connect_options()).expect("talosconfig");
        connector.add_machine(
            id,
            MachineRoute {
                endpoint: NodeAddress::parse(&sim.node_address()).expect("address"),
            },
        );
        w.store
            .create_machine(
                &author(),
                MachineSpec {
                    id: id.into(),
                    identity: IdentityKey::SmbiosUuid(facts.smbios_uuid.clone()),
                    cluster_id: facts.cluster_id.clone(),
                    endpoint: sim.node_address(),
                    rollout_scope: id.into(),
                    talos_minor: "1.13".into(),
                    import_digest: Some(config_digest(&facts.config)),
                },
            )
            .await
            .expect("machine");
        let connector = Arc::new(connector);
        publish_for(w, id, &format!("rel-0-{id}")).await;
        let handover = fleet_executor(w, &fleet_from(w, id, &connector), HANDOVER);
        let expires = w.clock.now().plus(SpanMs::from_secs(3600));
        hand_over_with(w.store.as_ref(), &handover, id, expires).await;
        let release = format!("rel-{id}");
        publish_for(w, id, &release).await;
        approve_plan(w, id, &format!("p-{id}"), &release, 3).await;
        Worker { id, sim, connector }
    }

    fn plan(&self) -> String {
        format!("p-{}", self.id)
    }

    fn applies(&self) -> usize {
        self.sim.apply_requests().len()
    }
}

/// Reaches each machine through the connector that holds its own talosconfig.
fn fleet_of(w: &World, workers: &[&Worker]) -> Arc<ConnectorMap> {
    let routes = ConnectorMap::new();
    routes.insert(MACHINE, w.connector.clone());
    for worker in workers {
        routes.insert(worker.id, worker.connector.clone());
    }
    Arc::new(routes)
}

/// The world's machine and one more, `id`, reached through `connector`.
fn fleet_from(w: &World, id: &str, connector: &Arc<TalosconfigConnector>) -> Arc<ConnectorMap> {
    let routes = ConnectorMap::new();
    routes.insert(MACHINE, w.connector.clone());
    routes.insert(id, connector.clone());
    Arc::new(routes)
}

/// An executor for controller instance `id` reaching every machine of `fleet`.
fn fleet_executor(w: &World, fleet: &Arc<ConnectorMap>, id: u128) -> Executor {
    Executor::new(
        ControllerId(id),
        w.store.clone(),
        fleet.clone(),
        w.keyring.clone() as Arc<dyn KeyProvider>,
        Arc::new(LinkedClock(w.clock.clone())),
        ExecutorSettings {
            settle_floor: FLOOR,
            max_transport_deadline: SpanMs::from_secs(10),
        },
    )
    .expect("executor")
}

/// The takeover entries for `operation` on `machine`'s timeline.
async fn takeovers(w: &World, machine: &str, operation: &str) -> usize {
    w.store
        .timeline(machine)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.kind == "takeover" && e.operation.as_deref() == Some(operation))
        .count()
}

/// Fresh dispatch evidence for `plan` on `machine`, read by controller `id` from
/// `sim` and recorded with a use-time check, as the executor records it before an
/// attempt (§3.1).
async fn record_evidence(
    w: &World,
    fleet: &ConnectorMap,
    sim: &TalosSim,
    machine: &str,
    plan: &str,
    id: u128,
) {
    let view = w.store.machine(machine).await.unwrap();
    let access = fleet.connect(&view).await.expect("clients").access;
    let facts = sim.facts();
    let ticket = w
        .store
        .begin_observation(ObservationRequest {
            machine: machine.into(),
            purpose: ObservationPurpose::Evidence,
            plan: Some(plan.into()),
            controller: ControllerId(id),
        })
        .await
        .unwrap();
    w.store
        .record_observation(
            &ticket,
            ObservedFacts {
                smbios_uuid: Some(facts.smbios_uuid),
                node_id: Some(facts.node_id),
                cluster_id: Some(facts.cluster_id),
                talos_version: Some(facts.talos_version),
                digest: Some(config_digest(&facts.config)),
                config_version: Some(sim.config_version()),
                access_version: Some(access.version.clone()),
            },
        )
        .await
        .unwrap();
    w.store
        .record_dependency_check(DependencyCheck {
            plan: plan.into(),
            controller: ControllerId(id),
            access_path: access.path,
            access_version: access.version,
            artifact_decrypts: true,
        })
        .await
        .unwrap();
}

/// Takeover at controller start with several open operations (§3.4, §5.3). Instance
/// A leaves four machines' operations at different points: m1 committed with no
/// attempt (A paused right after the commitment), m2 with its request held by the
/// node and never landing (A's run ended unresolved with the attempt unaccounted),
/// m3 verifying (A paused after its completion observation). The control, m4, is an
/// operation instance B itself committed and still owns (unresolved after an
/// `Unavailable` answer).
///
/// B's `start()` takes over exactly the three operations A owns: each one's owner
/// becomes B at generation 2 with one takeover entry, while m4 keeps generation 1
/// and gets no takeover entry. Each is resolved as §5.3 says: m1 is classified safe
/// to retry and its one request completes it; m2 stays unresolved until
/// recovery-admin's §5.2 decision, after which the completion observation at the
/// pre-dispatch digest admits the retry; m3 completes on a new completion
/// observation with no send.
///
/// Every late act of A is refused and sends nothing: on m1, A's attempt transaction
/// (run while B holds m1's recorded attempt, before B's send) is refused by
/// comparison 7; on m2, a retry attempt with fresh evidence is refused by 7 and A's
/// executor refuses to resume an operation it no longer owns; on m3, A's
/// classification is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_takes_over_every_operation_another_instance_owns() {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    let m2 = Worker::add(&w, "m2", 2).await;
    let m3 = Worker::add(&w, "m3", 3).await;
    let m4 = Worker::add(&w, "m4", 4).await;
    let fleet = fleet_of(&w, &[&m2, &m3, &m4]);

    // m2: the request is held and never lands.
    m2.sim.fail_next_apply(ApplyFault::Hold(Landing::OnRelease));
    let out2 = fleet_executor(&w, &fleet, A)
        .run_plan(&m2.plan())
        .await
        .expect("run on m2");
    assert!(out2.awaits_accounting(), "{out2:?}");
    let op2 = out2.operation.clone();

    // m1: A stops right after the commitment.
    let (hook1, paused1, go1) = pause_at(Interruption::Committed);
    let a1 = Arc::new(fleet_executor(&w, &fleet, A).with_interruptions(hook1));
    let done1 = Arc::new(Notify::new());
    let run1 = tokio::spawn({
        let (a1, done1) = (a1.clone(), done1.clone());
        async move {
            let out = a1.run_plan("p1").await;
            done1.notify_one();
            out
        }
    });
    paused1.notified().await;
    let op1 = operation_of(&w, "p1").await;

    // m3: A stops after its completion observation, before classifying.
    let (hook3, paused3, go3) = pause_at(Interruption::CompletionObserved);
    let a3 = Arc::new(fleet_executor(&w, &fleet, A).with_interruptions(hook3));
    let run3 = tokio::spawn({
        let (a3, plan3) = (a3.clone(), m3.plan());
        async move { a3.run_plan(&plan3).await }
    });
    paused3.notified().await;
    let op3 = operation_of(&w, &m3.plan()).await;

    // m4 (control): B's own operation, unresolved after an `Unavailable` answer.
    m4.sim.fail_next_apply(ApplyFault::Unavailable);
    let out4 = fleet_executor(&w, &fleet, B)
        .run_plan(&m4.plan())
        .await
        .expect("run on m4");
    assert!(out4.awaits_accounting(), "{out4:?}");
    let op4 = out4.operation.clone();

    let before: Vec<(String, OperationState, OwnerToken)> = {
        let mut v = Vec::new();
        for op in [&op1, &op2, &op3, &op4] {
            let view = w.store.operation(op).await.unwrap();
            v.push((op.clone(), view.state, view.owner));
        }
        v
    };
    let states: Vec<OperationState> = before.iter().map(|(_, s, _)| *s).collect();
    assert_eq!(
        states,
        [
            OperationState::Committed,
            OperationState::Unresolved,
            OperationState::Verifying,
            OperationState::Unresolved
        ]
    );
    for (op, _, owner) in &before[..3] {
        assert_eq!(owner.controller, ControllerId(A), "{op}");
        assert_eq!(owner.generation, 1, "{op}");
    }
    assert_eq!(before[3].2.controller, ControllerId(B));
    assert_eq!(before[3].2.generation, 1);
    let a_token2 = before[1].2;
    assert_eq!(
        (w.applies(), m2.applies(), m3.applies(), m4.applies()),
        (0, 1, 1, 1)
    );

    // B's hook: at B's first recorded attempt (m1's, before its send), A resumes
    // m1 with its old token and runs to its end.
    let once = Arc::new(AtomicBool::new(false));
    let hook_b: InterruptionHook = {
        let (once, go1, done1) = (once.clone(), go1.clone(), done1.clone());
        Arc::new(move |point| {
            let first =
                point == Interruption::AttemptRecorded && !once.swap(true, Ordering::SeqCst);
            let (go1, done1) = (go1.clone(), done1.clone());
            Box::pin(async move {
                if first {
                    go1.notify_one();
                    done1.notified().await;
                }
            })
        })
    };
    let b = fleet_executor(&w, &fleet, B).with_interruptions(hook_b);
    let outcomes = b.start().await.expect("start");
    assert_eq!(outcomes.len(), 4, "{outcomes:?}");
    assert!(once.load(Ordering::SeqCst), "B never recorded m1's attempt");
    let outcome = |op: &str| {
        outcomes
            .iter()
            .find(|o| o.operation == op)
            .unwrap_or_else(|| panic!("no outcome for {op}: {outcomes:?}"))
            .clone()
    };

    // Every operation A owned moved to B at generation 2, once.
    for (machine, op) in [(MACHINE, &op1), ("m2", &op2), ("m3", &op3)] {
        let owner = w.store.operation(op).await.unwrap().owner;
        assert_eq!(owner.controller, ControllerId(B), "{machine}");
        assert_eq!(owner.generation, 2, "{machine}");
        assert_eq!(takeovers(&w, machine, op).await, 1, "{machine}");
    }
    // Control: the operation B already owned was not taken over.
    let owner4 = w.store.operation(&op4).await.unwrap().owner;
    assert_eq!(owner4, before[3].2);
    assert_eq!(takeovers(&w, "m4", &op4).await, 0);
    assert!(outcome(&op4).awaits_accounting());
    assert_eq!(outcome(&op4).sends, 0);

    // m1: committed, no attempt → safe to retry → one request, completed.
    let late1 = run1.await.unwrap().expect("A's late run on m1");
    assert_eq!(late1.sends, 0, "{late1:?}");
    assert_eq!(
        late1.refusal.as_ref().and_then(StoreError::comparison),
        Some(Comparison::Ownership),
        "{late1:?}"
    );
    assert!(
        w.timeline()
            .await
            .iter()
            .any(|e| e.kind == "attempt_refused"
                && e.comparison == Some(Comparison::Ownership)
                && e.actor.contains(&format!("{A:032x}"))),
        "A's refusal by 7 is not on m1's timeline"
    );
    let o1 = outcome(&op1);
    assert_eq!(o1.state, OperationState::Completed, "{o1:?}");
    assert_eq!(o1.sends, 1);
    assert_eq!(w.applies(), 1, "A's late attempt sent something on m1");
    assert!(
        w.timeline()
            .await
            .iter()
            .any(|e| e.kind == "classification" && e.detail == "safe to retry")
    );
    let attempts1 = w.store.attempts(&op1).await.unwrap();
    assert_eq!(attempts1.len(), 1);
    assert_eq!(attempts1[0].owner.controller, ControllerId(B));

    // m3: verifying → a new completion observation → completed, nothing sent.
    let o3 = outcome(&op3);
    assert_eq!(o3.state, OperationState::Completed, "{o3:?}");
    assert_eq!(o3.sends, 0);
    go3.notify_one();
    let late3 = run3.await.unwrap();
    assert!(
        matches!(
            late3,
            Err(ExecutorError::Store(StoreError::Refused {
                act: "classifying",
                ..
            }))
        ),
        "{late3:?}"
    );
    assert_eq!(m3.applies(), 1);
    assert_eq!(
        w.store.machine("m3").await.unwrap().applied_digest,
        Some(config_digest(&artifact("rel-m3")))
    );

    // m2: held while unaccounted; A's late acts are refused.
    let o2 = outcome(&op2);
    assert!(o2.awaits_accounting(), "{o2:?}");
    assert_eq!(o2.sends, 0);
    let a2 = fleet_executor(&w, &fleet, A);
    assert!(matches!(
        a2.resume(&op2).await,
        Err(ExecutorError::NotOwner { .. })
    ));
    record_evidence(&w, &fleet, &m2.sim, "m2", &m2.plan(), A).await;
    let err = w.store.attempt(&op2, a_token2).await.unwrap_err();
    assert_eq!(err.comparison(), Some(Comparison::Ownership), "{err}");
    assert_eq!(w.store.attempts(&op2).await.unwrap().len(), 1);
    assert_eq!(
        w.store.operation(&op2).await.unwrap().state,
        OperationState::Unresolved
    );
    assert_eq!(m2.applies(), 1);
    // B, its owner now, gets it accounted and retries it.
    observe_until_decided(&w, &b, &op2).await;
    let done2 = b.after_accounting(&op2).await.unwrap();
    assert_eq!(done2.state, OperationState::Completed, "{done2:?}");
    assert_eq!(done2.sends, 1);
    assert_eq!(m2.applies(), 2);
    assert_eq!(m4.applies(), 1);

    drop((a1, a3, a2, b));
    for worker in [m2, m3, m4] {
        worker.sim.shutdown().await.expect("simulator stops");
    }
    w.stop().await;
}

// ---------------------------------------------------------------------------------
// Send only after the attempt transaction commits, on the retry paths.

/// The simulator's clock in the order tests. It reads the world's hand-moved
/// clock; and at each request the node receives — the simulator reads its clock
/// once per request, as the request arrives and before it acts on it — it reads,
/// through the store, every attempt row of the machine's operations. The stamp it
/// returns carries the index of that reading in its sub-millisecond nanoseconds, so
/// each request the simulator records names the store state it arrived in.
struct ArrivalClock {
    time: ManualClock,
    store: OnceLock<Arc<SqliteStore>>,
    readings: Mutex<Vec<Vec<AttemptView>>>,
}

impl ArrivalClock {
    fn new(time: ManualClock) -> Self {
        Self {
            time,
            store: OnceLock::new(),
            readings: Mutex::new(Vec::new()),
        }
    }

    /// The store's attempt rows at the moment the node received each apply request,
    /// in arrival order.
    fn at_each_apply(&self, sim: &TalosSim) -> Vec<Vec<AttemptView>> {
        let readings = self.readings.lock().unwrap();
        sim.apply_requests()
            .iter()
            .map(|r| readings[(r.at.subsec_nanos() % 1_000_000) as usize].clone())
            .collect()
    }
}

async fn attempt_rows(store: &SqliteStore) -> Vec<AttemptView> {
    let mut rows = Vec::new();
    let Ok(operations) = store.operations_of(MACHINE).await else {
        return rows;
    };
    for op in operations {
        if let Ok(attempts) = store.attempts(&op.id).await {
            rows.extend(attempts);
        }
    }
    rows
}

#[async_trait::async_trait]
impl Clock for ArrivalClock {
    fn now(&self) -> Duration {
        let at = Duration::from_millis(self.time.now().0);
        let Some(store) = self.store.get() else {
            return at;
        };
        let rows = tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(attempt_rows(store))
        });
        let mut readings = self.readings.lock().unwrap();
        let index = readings.len();
        readings.push(rows);
        at + Duration::from_nanos(index as u64)
    }

    async fn sleep(&self, duration: Duration) {
        LinkedClock(self.time.clone()).sleep(duration).await;
    }
}

/// A world whose simulator reads the store at each request's arrival.
async fn order_world() -> (World, Arc<ArrivalClock>) {
    let mut made = None;
    let w = World::build(
        TalosSim::builder().facts(node_facts()),
        Guards::default(),
        |clock| {
            let c = Arc::new(ArrivalClock::new(clock.clone()));
            made = Some(c.clone());
            c
        },
    )
    .await;
    let arrival = made.expect("the simulator's clock");
    assert!(arrival.store.set(w.store.clone()).is_ok());
    (w, arrival)
}

/// The attempt numbers of `operation` in `rows`.
fn numbers(rows: &[AttemptView], operation: &str) -> Vec<u32> {
    rows.iter()
        .filter(|a| a.operation == operation)
        .map(|a| a.number)
        .collect()
}

/// At an apply's arrival, `rows` hold attempt `number` of `operation`, made under
/// controller `controller` at `generation`, with nothing recorded for it yet (its
/// request is the one arriving), and no later attempt.
fn sent_under(
    rows: &[AttemptView],
    operation: &str,
    number: u32,
    controller: u128,
    generation: u64,
) {
    let row = rows
        .iter()
        .find(|a| a.operation == operation && a.number == number)
        .unwrap_or_else(|| {
            panic!("attempt {number} was not in the store when its request arrived: {rows:#?}")
        });
    assert_eq!(row.owner.controller, ControllerId(controller), "{row:?}");
    assert_eq!(row.owner.generation, generation, "{row:?}");
    assert_eq!(row.response, ResponseClass::Pending, "{row:?}");
    assert_eq!(row.accounting, AttemptAccounting::Unaccounted, "{row:?}");
    assert_eq!(
        numbers(rows, operation).into_iter().max(),
        Some(number),
        "a later attempt was already recorded"
    );
}

/// Every apply request carries the plan's artifact.
fn all_of_the_artifact(w: &World) {
    let digest = config_digest(&artifact("rel-1")).to_hex();
    for r in w.sim.apply_requests() {
        assert!(
            matches!(&r.call, infra_testkit::talos::RecordedCall::ApplyConfiguration { data_digest, .. } if *data_digest == digest),
            "{r:?}"
        );
    }
}

/// Case 014: the first request is held and never lands; after the takeover and
/// recovery-admin's decision the retry goes out. When the node received the first
/// request the store held attempt 1 (A, generation 1) and nothing else; when it
/// received the retry, the store held attempt 2 (B, generation 2) with attempt 1
/// already accounted by the decision. The first reading lacking attempt 2 is what
/// shows the reading is taken at arrival, not afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_request_retry_arrives_after_its_attempt_is_recorded() {
    let (w, arrival) = order_world().await;
    w.approved_plan("p1", "rel-1", 3).await;
    w.sim.fail_next_apply(ApplyFault::Hold(Landing::OnRelease));
    let out = w.executor(A).run_plan("p1").await.expect("run");
    assert!(out.awaits_accounting(), "{out:?}");
    let op = out.operation.clone();
    let b = w.executor(B);
    b.take_over(&op).await.unwrap();
    observe_until_decided(&w, &b, &op).await;
    let out = b.after_accounting(&op).await.unwrap();
    assert_eq!(out.state, OperationState::Completed, "{out:?}");
    assert_eq!(out.sends, 1);

    let seen = arrival.at_each_apply(&w.sim);
    assert_eq!(seen.len(), 2);
    assert_eq!(numbers(&seen[0], &op), [1]);
    sent_under(&seen[0], &op, 1, A, 1);
    assert_eq!(numbers(&seen[1], &op), [1, 2]);
    sent_under(&seen[1], &op, 2, B, 2);
    assert!(
        matches!(seen[1][0].accounting, AttemptAccounting::Decision(_)),
        "{:?}",
        seen[1][0]
    );
    all_of_the_artifact(&w);
    drop(b);
    w.stop().await;
}

/// Where instance A stops in the interruption tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// Case 019: committed, no attempt; A is let go once B has completed.
    Committed,
    /// Case 020: the attempt is recorded and nothing was sent; A ends there.
    AttemptRecorded,
    /// Case 020: the node accepted and the response is not recorded; A ends there.
    ResponseReceived,
}

/// Instance A is interrupted at `stop`; B's `start()` takes the operation over and
/// resolves it (after recovery-admin's decision where an attempt is unaccounted).
/// The reading at each apply's arrival names the attempt that request belongs to,
/// already in the store and still without a response:
///
/// - 019: the one request is B's attempt 1 at generation 2, sent after the "safe to
///   retry" classification (timeline); A, let go, is refused and sends nothing;
/// - 020, attempt recorded but not sent: the one request is B's retry, attempt 2 at
///   generation 2, with A's attempt 1 already accounted by the decision;
/// - 020, accepted but unrecorded: the one request is A's attempt 1, and no retry
///   follows.
async fn interrupted_then_taken_over(stop: Stop) {
    let (w, arrival) = order_world().await;
    w.approved_plan("p1", "rel-1", 3).await;
    let point = match stop {
        Stop::Committed => Interruption::Committed,
        Stop::AttemptRecorded => Interruption::AttemptRecorded,
        Stop::ResponseReceived => Interruption::ResponseReceived,
    };
    let (hook, paused, go) = pause_at(point);
    let a = Arc::new(w.executor(A).with_interruptions(hook));
    let first = tokio::spawn({
        let a = a.clone();
        async move { a.run_plan("p1").await }
    });
    paused.notified().await;
    let op = operation_of(&w, "p1").await;
    let first = if stop == Stop::Committed {
        Some(first)
    } else {
        // The process ends at the point: nothing after it runs.
        first.abort();
        assert!(first.await.unwrap_err().is_cancelled());
        None
    };

    let b = w.executor(B);
    let outcomes = b.start().await.unwrap();
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    let out = if stop == Stop::Committed {
        outcomes[0].clone()
    } else {
        assert!(outcomes[0].awaits_accounting(), "{outcomes:?}");
        assert_eq!(outcomes[0].sends, 0);
        observe_until_decided(&w, &b, &op).await;
        b.after_accounting(&op).await.unwrap()
    };
    assert_eq!(out.state, OperationState::Completed, "{out:?}");

    let seen = arrival.at_each_apply(&w.sim);
    assert_eq!(seen.len(), 1, "exactly one request reached the node");
    match stop {
        Stop::Committed => {
            assert_eq!(numbers(&seen[0], &op), [1]);
            sent_under(&seen[0], &op, 1, B, 2);
            let timeline = w.timeline().await;
            let retry = timeline
                .iter()
                .find(|e| e.kind == "classification" && e.detail == "safe to retry")
                .expect("the retry was classified");
            let attempt = timeline.iter().find(|e| e.kind == "attempt").unwrap();
            assert!(retry.revision < attempt.revision);
            go.notify_one();
            let late = first.unwrap().await.unwrap().expect("A's late run");
            assert_eq!(late.sends, 0);
            assert!(late.refusal.is_some(), "{late:?}");
            assert_eq!(w.applies(), 1, "A's late attempt sent something");
        }
        Stop::AttemptRecorded => {
            assert_eq!(numbers(&seen[0], &op), [1, 2]);
            sent_under(&seen[0], &op, 2, B, 2);
            let first_attempt = &seen[0][0];
            assert_eq!(first_attempt.owner.controller, ControllerId(A));
            assert!(
                matches!(first_attempt.accounting, AttemptAccounting::Decision(_)),
                "{first_attempt:?}"
            );
        }
        Stop::ResponseReceived => {
            assert_eq!(numbers(&seen[0], &op), [1]);
            sent_under(&seen[0], &op, 1, A, 1);
            assert_eq!(out.sends, 0);
            assert_eq!(w.store.attempts(&op).await.unwrap().len(), 1);
        }
    }
    all_of_the_artifact(&w);
    drop((a, b));
    w.stop().await;
}

/// Case 019 (committed, no attempt, interrupted, taken over).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_of_a_committed_operation_sends_after_its_attempt_is_recorded() {
    interrupted_then_taken_over(Stop::Committed).await;
}

/// Case 020 with the attempt recorded and nothing sent: the retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_an_unsent_attempt_arrives_after_its_attempt_is_recorded() {
    interrupted_then_taken_over(Stop::AttemptRecorded).await;
}

/// Case 020 with the node's acceptance unrecorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_but_unrecorded_request_arrived_after_its_attempt_was_recorded() {
    interrupted_then_taken_over(Stop::ResponseReceived).await;
}

// ---------------------------------------------------------------------------------
// §5 precedence through the executor.

/// A held request that never lands; with `freeze`, the machine is frozen once the
/// attempt transaction has committed and before the request goes out. The attempt
/// on record is sent regardless (§3.3 "once committed"). After the takeover and
/// recovery-admin's decision, the completion observation shows the pre-dispatch
/// digest, which fits both the safe-to-retry and the failed rows; with the gate
/// closed choice §10.10 makes it failed —
/// `Failed(PreDispatchNoRetry(GateClosed))` — with no second request. Without the
/// freeze (the control) the same path retries and completes.
async fn unknown_attempt_then_gate(freeze: bool) {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    w.sim.fail_next_apply(ApplyFault::Hold(Landing::OnRelease));
    let store = w.store.clone();
    let hook: InterruptionHook = Arc::new(move |point| {
        let store = store.clone();
        Box::pin(async move {
            if freeze && point == Interruption::AttemptRecorded {
                store
                    .freeze(&author(), MACHINE, "maintenance window")
                    .await
                    .expect("freeze");
            }
        })
    });
    let out = w
        .executor(A)
        .with_interruptions(hook)
        .run_plan("p1")
        .await
        .expect("run");
    assert!(out.awaits_accounting(), "{out:?}");
    assert_eq!(out.sends, 1);
    assert_eq!(w.applies(), 1);
    let op = out.operation.clone();
    assert_eq!(w.store.machine(MACHINE).await.unwrap().frozen, freeze);
    if freeze {
        let timeline = w.timeline().await;
        let rev = |k: &str| timeline.iter().find(|e| e.kind == k).unwrap().revision;
        assert!(rev("attempt") < rev("frozen") && rev("frozen") < rev("response"));
    }

    let b = w.executor(B);
    b.take_over(&op).await.unwrap();
    observe_until_decided(&w, &b, &op).await;
    let out = b.after_accounting(&op).await.unwrap();
    if freeze {
        assert_eq!(out.state, OperationState::Failed, "{out:?}");
        assert_eq!(
            out.classification,
            Some(Classification::Failed(FailedReason::PreDispatchNoRetry(
                RetryBlocker::GateClosed
            )))
        );
        assert_eq!(out.sends, 0);
        assert_eq!(w.applies(), 1, "a retry was sent through a closed gate");
        assert_eq!(w.store.operation(&op).await.unwrap().attempts, 1);
        assert_eq!(w.sim.config(), base_config());
        assert_eq!(
            w.store.machine(MACHINE).await.unwrap().applied_digest,
            Some(config_digest(&base_config()))
        );
    } else {
        assert_eq!(out.state, OperationState::Completed, "{out:?}");
        assert_eq!(out.sends, 1);
        assert_eq!(w.applies(), 2);
        assert_eq!(w.store.operation(&op).await.unwrap().attempts, 2);
    }
    drop(b);
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_gate_after_an_unknown_attempt_fails_without_a_retry() {
    unknown_attempt_then_gate(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_gate_after_an_unknown_attempt_retries() {
    unknown_attempt_then_gate(false).await;
}

/// What the node answers in the §5 mixed-operation tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answers {
    /// The first request is held and never lands; the retry meets a validation
    /// `InvalidArgument`.
    UnknownThenValidation,
    /// Control: as above, but the retry meets the `InvalidArgument` refusing a
    /// change that needs a reboot, which is no validation rejection.
    UnknownThenNoReboot,
    /// Control: the only request meets a validation `InvalidArgument`.
    ValidationOnly,
}

/// §5: "rejected" needs a validation rejection of every attempt, and once any
/// attempt was definitively rejected no retry is possible. An unknown first
/// attempt (accounted by decision) and a validation-rejected retry: the rejection
/// settles only its attempt (sending → unresolved), the operation is not rejected,
/// no third request goes out, and the completion observation at the pre-dispatch
/// digest makes it failed — `Failed(Digest(PreDispatch))`. Controls: with the retry
/// refused for needing a reboot, it is classified safe to retry again and a third
/// request completes it; a validation rejection of the only attempt is rejected.
///
/// The reverse order (a validation rejection first, then an unknown attempt) cannot
/// be reached: a validation rejection of the only attempt makes the operation
/// rejected, which is final.
async fn mixed_answers(answers: Answers) {
    let w = World::new().await;
    w.approved_plan("p1", "rel-1", 3).await;
    let validation =
        ApplyFault::InvalidArgument("1 error occurred: unknown key \"machine.bogus\"".into());
    match answers {
        Answers::UnknownThenValidation => {
            w.sim.fail_next_apply(ApplyFault::Hold(Landing::OnRelease));
            w.sim.fail_next_apply(validation);
        }
        Answers::UnknownThenNoReboot => {
            w.sim.fail_next_apply(ApplyFault::Hold(Landing::OnRelease));
            w.sim.fail_next_apply(ApplyFault::InvalidArgument(
                "this config change can't be applied in immediate mode\ndiff: + machine.install"
                    .into(),
            ));
        }
        Answers::ValidationOnly => w.sim.fail_next_apply(validation),
    }
    let out = w.executor(A).run_plan("p1").await.expect("run");
    let op = out.operation.clone();
    if answers == Answers::ValidationOnly {
        assert_eq!(out.state, OperationState::Rejected, "{out:?}");
        assert_eq!(w.applies(), 1);
        w.stop().await;
        return;
    }
    assert!(out.awaits_accounting(), "{out:?}");
    let b = w.executor(B);
    b.take_over(&op).await.unwrap();
    observe_until_decided(&w, &b, &op).await;
    let out = b.after_accounting(&op).await.unwrap();
    let attempts = w.store.attempts(&op).await.unwrap();
    assert!(
        matches!(attempts[0].accounting, AttemptAccounting::Decision(_)),
        "{:?}",
        attempts[0]
    );
    match answers {
        Answers::UnknownThenValidation => {
            assert_eq!(out.state, OperationState::Failed, "{out:?}");
            assert_eq!(
                out.classification,
                Some(Classification::Failed(FailedReason::Digest(
                    DigestMatch::PreDispatch
                )))
            );
            assert_eq!(attempts.len(), 2);
            assert_eq!(attempts[1].response, ResponseClass::ValidationRejection);
            assert_eq!(out.sends, 1);
            assert_eq!(
                w.applies(),
                2,
                "a request went out after a validation rejection"
            );
            // The rejection settles only its own attempt: sending -> unresolved.
            let timeline = w.timeline().await;
            let response = timeline
                .iter()
                .position(|e| e.kind == "response" && e.detail.starts_with("attempt 2:"))
                .expect("the retry's response is recorded");
            let moved = timeline[response..]
                .iter()
                .find(|e| e.kind == "state_changed")
                .expect("the retry's response moved the operation");
            assert_eq!(moved.detail, "sending -> unresolved", "{moved:?}");
        }
        Answers::UnknownThenNoReboot => {
            assert_eq!(out.state, OperationState::Completed, "{out:?}");
            assert_eq!(attempts.len(), 3);
            assert_eq!(attempts[1].response, ResponseClass::OtherRefusal);
            assert_eq!(out.sends, 2);
            assert_eq!(w.applies(), 3);
        }
        Answers::ValidationOnly => unreachable!("returned above"),
    }
    drop(b);
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_then_validation_rejected_is_failed_not_rejected() {
    mixed_answers(Answers::UnknownThenValidation).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_then_refused_for_a_reboot_is_retried_again() {
    mixed_answers(Answers::UnknownThenNoReboot).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_rejection_of_the_only_attempt_is_rejected() {
    mixed_answers(Answers::ValidationOnly).await;
}

// ---------------------------------------------------------------------------------
// Case 011's consequence.

/// Plan p1 (rel-1) is run by A; its request is held by the node. Then rel-2 is
/// published and plan p2 approved for the same machine, and B runs it.
///
/// With the scope index off, p2 commits beside p1's unresolved operation, is sent
/// and completes (node and Applied at rel-2); then p1's stale request lands and the
/// node ends at rel-1 while Applied still says rel-2 — the overwrite the index
/// exists to prevent, with no trace in Applied.
///
/// With the index on (the control), p2's commitment is refused by comparison 4 and
/// nothing is sent for it; p1's request lands, is accounted and completes; p2,
/// planned on the old baseline, is then refused (comparison 2) and a fresh plan p3
/// for rel-2 completes: the node ends at rel-2, equal to Applied, with no request of
/// p1 left to land.
async fn stale_send_with_scope_index(index: bool) {
    let w = World::build(
        TalosSim::builder().facts(node_facts()),
        Guards {
            scope_index: index,
            ..Guards::default()
        },
        |clock| Arc::new(LinkedClock(clock.clone())),
    )
    .await;
    let older = config_digest(&artifact("rel-1"));
    let newer = config_digest(&artifact("rel-2"));
    w.approved_plan("p1", "rel-1", 3).await;
    w.sim.fail_next_apply(ApplyFault::Hold(Landing::OnRelease));
    let out = w.executor(A).run_plan("p1").await.expect("run p1");
    assert!(out.awaits_accounting(), "{out:?}");
    let op1 = out.operation.clone();
    assert_eq!(w.sim.held_count(), 1);

    w.approved_plan("p2", "rel-2", 3).await;
    let b = w.executor(B);
    let second = b.run_plan("p2").await;
    if !index {
        let out2 = second.expect("p2 commits beside p1");
        assert_eq!(out2.state, OperationState::Completed, "{out2:?}");
        assert_eq!(config_digest(&w.sim.config()), newer);
        // p1's request lands after p2's.
        assert_eq!(w.sim.release_held(), 1);
        let digests: Vec<String> = w
            .sim
            .apply_requests()
            .into_iter()
            .filter_map(|r| match r.call {
                infra_testkit::talos::RecordedCall::ApplyConfiguration { data_digest, .. } => {
                    Some(data_digest)
                }
                _ => None,
            })
            .collect();
        assert_eq!(digests, [older.to_hex(), newer.to_hex()]);
        assert_eq!(
            config_digest(&w.sim.config()),
            older,
            "the node does not run the older configuration"
        );
        let machine = w.store.machine(MACHINE).await.unwrap();
        assert_eq!(machine.applied_digest, Some(newer));
        assert_eq!(machine.applied_release.as_deref(), Some("rel-2"));
        assert_eq!(
            w.store.operation(&op1).await.unwrap().state,
            OperationState::Unresolved
        );
    } else {
        assert!(
            matches!(
                second,
                Err(ExecutorError::Store(StoreError::CommitmentRefused {
                    comparison: Comparison::MachineScope,
                    ..
                }))
            ),
            "{second:?}"
        );
        assert_eq!(w.applies(), 1, "something was sent for p2");
        assert_eq!(w.store.plan("p2").await.unwrap().operation, None);
        assert_eq!(w.sim.release_held(), 1);
        assert_eq!(config_digest(&w.sim.config()), older);
        b.take_over(&op1).await.unwrap();
        observe_until_decided(&w, &b, &op1).await;
        let done = b.after_accounting(&op1).await.unwrap();
        assert_eq!(done.state, OperationState::Completed, "{done:?}");
        let again = b.run_plan("p2").await;
        assert!(
            matches!(
                again,
                Err(ExecutorError::Store(StoreError::CommitmentRefused {
                    comparison: Comparison::Bindings,
                    ..
                }))
            ),
            "{again:?}"
        );
        assert_eq!(w.store.plan("p2").await.unwrap().state, PlanState::Approved);
        approve_plan(&w, MACHINE, "p3", "rel-2", 3).await;
        let out3 = b.run_plan("p3").await.expect("run p3");
        assert_eq!(out3.state, OperationState::Completed, "{out3:?}");
        assert_eq!(w.applies(), 2);
        assert_eq!(w.sim.held_count(), 0);
        assert_eq!(config_digest(&w.sim.config()), newer);
        let machine = w.store.machine(MACHINE).await.unwrap();
        assert_eq!(machine.applied_digest, Some(newer));
    }
    drop(b);
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_scope_index_a_stale_send_overwrites_the_newer_configuration() {
    stale_send_with_scope_index(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_scope_index_the_newer_plan_waits_and_the_node_keeps_it() {
    stale_send_with_scope_index(true).await;
}
