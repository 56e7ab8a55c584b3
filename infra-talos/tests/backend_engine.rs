//! The `talosMachine` kind through `infra_core::engine::Engine`, on an embedded store and
//! simulated nodes: what a plan shows for a small fleet, and what an apply leaves in
//! the store and at the nodes.
//!
//! The conformance suite of `infra-testkit` is not run for this kind: it creates and
//! deletes resources, and the engine neither creates nor deletes Talos machines.
#![cfg(feature = "grpc")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use infra_core::sdk::{KindBackend, UpdateArgs};
use infra_core::{
    engine::{Engine, MemoryStore, Options, Plan, SystemClock},
    prelude::{Backends, Fleet},
    sdk::ErrorKind,
};
use infra_talos::backend::{
    InventoryRecord, NodeReader, TalosBackend, TalosCluster, TalosMachine, TalosconfigReader,
};
use infra_talos::config_digest;
use infra_talos::contract::comparison::Comparison;
use infra_talos::contract::evidence::{ObservationPurpose, ResponseClass};
use infra_talos::contract::operation::{ControllerId, OperationState};
use infra_talos::contract::plan::PlanState;
use infra_talos::contract::{InstantMs, Role, SpanMs};
use infra_talos::controller::{
    Connector, ConnectorMap, Executor, ExecutorError, ExecutorSettings, MachineRoute,
    TalosconfigConnector,
};
use infra_talos::digest::Digest;
use infra_talos::keys::{KeyProvider, LocalKeyring};
use infra_talos::store::sqlite::SqliteStore;
use infra_talos::store::{
    Actor, AdoptPlanSpec, BootstrapSpec, ContributionKind, DependencyCheck, IdentityKey,
    MachineSpec, MachineView, ObservationRequest, ObservedFacts, PlanSpec, PrincipalKind,
    PrincipalSpec, SealedReleaseSpec, Store,
};
use infra_talos::{ConnectOptions, NodeAddress, Observation};
use infra_testkit::talos::{ApplyFault, NodeFacts, ReadFault, SimResource, TalosSim};
use tempfile::TempDir;

/// The certificate authority the installation is bootstrapped with.
/// How long a blanket approval granted here stands.
const WEEK: infra_talos::contract::SpanMs = infra_talos::contract::SpanMs(7 * 86_400_000);

const TEST_CA: &str = "-----BEGIN CERTIFICATE-----\nTUlJQg==\n-----END CERTIFICATE-----\n";
/// The installation's first administrator, who registers everyone else.
const ADMIN: &str = "admin";

fn admin() -> Actor {
    Actor::new(ADMIN, Role::RecoveryAdmin)
}

const CONTROLLER: ControllerId = ControllerId(0xc0);
const SECRET: &str = "token-4e1f-never-shown";

fn alice() -> Actor {
    Actor::new("alice", Role::Publisher)
}
fn bob() -> Actor {
    Actor::new("bob", Role::Approver)
}
fn ann() -> Actor {
    Actor::new("ann", Role::Author)
}

fn plaintext(machine: &str, release: &str) -> Vec<u8> {
    format!(
        "version: v1alpha1\nmachine:\n  type: worker\n  token: {SECRET}\n# {machine} {release}\n"
    )
    .into_bytes()
}

/// Reads each simulated node with its own talosconfig (each node has its own CA).
struct SimReaders(BTreeMap<String, TalosconfigReader>);

#[async_trait::async_trait]
impl NodeReader for SimReaders {
    async fn observe(
        &self,
        machine: &InventoryRecord,
    ) -> Result<Observation, infra_core::sdk::BackendError> {
        self.0[&machine.endpoint].observe(machine).await
    }
}

/// Simulated nodes, an embedded store with an inventory, and a keyring.
struct World {
    store: Arc<SqliteStore>,
    sims: BTreeMap<String, TalosSim>,
    readers: Arc<SimReaders>,
    keyring: LocalKeyring,
    cluster_id: String,
    /// Each machine's talosconfig (each simulated node has its own CA).
    talosconfigs: BTreeMap<String, std::path::PathBuf>,
    dir: TempDir,
}

const MACHINES: [&str; 3] = ["w-conv", "w-pend", "w-drift"];

fn options() -> ConnectOptions {
    ConnectOptions {
        connect_timeout: Duration::from_secs(2),
        call_deadline: Duration::from_secs(2),
        tls_server_name: None,
    }
}

impl World {
    /// Each machine in a rollout scope of its own.
    async fn start() -> World {
        Self::start_with_scopes(|machine| machine.to_owned()).await
    }

    /// Each machine in the rollout scope `scope` names for it.
    async fn start_with_scopes(scope: fn(&str) -> String) -> World {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::in_memory().await.unwrap());
        store
            .bootstrap(BootstrapSpec {
                ca_certificate: TEST_CA.into(),
                administrator: PrincipalSpec {
                    id: ADMIN.into(),
                    kind: PrincipalKind::Human,
                    roles: vec![Role::RecoveryAdmin],
                },
                approval_policy: infra_talos::store::ApprovalPolicy::default(),
                administrator_certificate: None,
            })
            .await
            .unwrap();
        for (id, role) in [
            ("alice", Role::Publisher),
            ("bob", Role::Approver),
            ("ann", Role::Author),
        ] {
            store
                .register_principal(
                    &admin(),
                    PrincipalSpec {
                        id: id.into(),
                        kind: PrincipalKind::Human,
                        roles: vec![role],
                    },
                )
                .await
                .unwrap();
        }
        let mut sims = BTreeMap::new();
        let mut readers = BTreeMap::new();
        let mut cluster_id = String::new();
        let mut talosconfigs = BTreeMap::new();
        for (n, machine) in MACHINES.iter().enumerate() {
            let facts = NodeFacts {
                hostname: (*machine).to_owned(),
                smbios_uuid: format!("4c4c4544-0000-0000-0000-00000000000{n}"),
                node_id: format!("node-{machine}"),
                ..NodeFacts::default()
            };
            let sim = TalosSim::builder()
                .facts(facts.clone())
                .start()
                .await
                .unwrap();
            let sub = dir.path().join(machine);
            std::fs::create_dir(&sub).unwrap();
            let path = sim
                .write_talosconfig(&sub, &sim.pki().admin_client().unwrap())
                .unwrap();
            readers.insert(
                sim.node_address(),
                TalosconfigReader::load(&path, options(), Arc::new(SystemClock::new())).unwrap(),
            );
            store
                .create_machine(
                    &ann(),
                    MachineSpec {
                        id: (*machine).to_owned(),
                        identity: IdentityKey::SmbiosUuid(facts.smbios_uuid.clone()),
                        cluster_id: facts.cluster_id.clone(),
                        endpoint: sim.node_address(),
                        rollout_scope: scope(machine),
                        talos_minor: "1.10".into(),
                        import_digest: Some(config_digest(&facts.config)),
                    },
                )
                .await
                .unwrap();
            cluster_id = facts.cluster_id.clone();
            talosconfigs.insert((*machine).to_owned(), path);
            sims.insert((*machine).to_owned(), sim);
        }
        let keyring = LocalKeyring::open(dir.path().join("keys")).unwrap();
        keyring.create_key("artifacts").unwrap();
        let world = World {
            store,
            sims,
            readers: Arc::new(SimReaders(readers)),
            keyring,
            cluster_id,
            talosconfigs,
            dir,
        };
        world.hand_over().await;
        world.publish("rel-1").await;
        world
    }

    /// Hands every imported machine over (§6.3): release `rel-0` published, then for
    /// each an adopt plan approved by bob and its adoption recorded by this process's
    /// executor against a fresh read of the node.
    async fn hand_over(&self) {
        self.publish("rel-0").await;
        let executor = self.executor();
        for machine in MACHINES {
            let plan = format!("handover-{machine}");
            let spec = AdoptPlanSpec {
                id: plan.clone(),
                machine: machine.into(),
                release: "rel-0".into(),
                expires_at: InstantMs(u64::MAX / 2),
                max_evidence_age: SpanMs::from_secs(60),
            };
            self.store.create_adopt_plan(&alice(), spec).await.unwrap();
            self.store.approve(&bob(), &plan).await.unwrap();
            let outcome = executor.run_plan(&plan).await.unwrap();
            assert_eq!(outcome.state, OperationState::Completed, "{machine}");
            assert_eq!(outcome.sends, 0, "an adoption sends nothing");
        }
    }

    async fn publish(&self, release: &str) {
        let mut artifacts = Vec::new();
        for machine in MACHINES {
            let sealed = self
                .keyring
                .seal("artifacts", &plaintext(machine, release))
                .await
                .unwrap();
            artifacts.push((machine.to_owned(), sealed));
        }
        self.store
            .publish_sealed_release(
                &alice(),
                SealedReleaseSpec {
                    id: release.into(),
                    artifacts,
                    contributions: vec![
                        ("ann".into(), ContributionKind::Authored),
                        ("alice".into(), ContributionKind::Published),
                    ],
                },
            )
            .await
            .unwrap();
    }

    fn facts(&self, machine: &str, digest: Digest) -> ObservedFacts {
        let sim = self.sims[machine].facts();
        ObservedFacts {
            smbios_uuid: Some(sim.smbios_uuid),
            node_id: Some(sim.node_id),
            cluster_id: Some(sim.cluster_id),
            talos_version: Some(sim.talos_version),
            digest: Some(digest),
            config_version: Some(1),
            access_version: Some("access-v1".into()),
        }
    }

    async fn observe(
        &self,
        machine: &str,
        purpose: ObservationPurpose,
        plan: Option<&str>,
        facts: ObservedFacts,
    ) {
        let ticket = self
            .store
            .begin_observation(ObservationRequest {
                machine: machine.into(),
                purpose,
                plan: plan.map(str::to_owned),
                controller: CONTROLLER,
            })
            .await
            .unwrap();
        self.store.record_observation(&ticket, facts).await.unwrap();
    }

    /// Brings `machine` to `release` the way the controller does, through the store's
    /// transactions, standing in for the node's answer: the simulated node receives
    /// the configuration out of band, never through the backend.
    async fn converge(&self, machine: &str, release: &str) {
        let plan = format!("setup-{machine}-{release}");
        self.store
            .create_plan(
                &alice(),
                PlanSpec {
                    id: plan.clone(),
                    machine: machine.into(),
                    release: release.into(),
                    expires_at: InstantMs(u64::MAX / 2),
                    max_evidence_age: SpanMs::from_secs(600),
                    transport_deadline: SpanMs::from_secs(5),
                    verification_deadline: SpanMs::from_secs(30),
                    max_attempts: 1,
                    revert: false,
                },
            )
            .await
            .unwrap();
        self.store.approve(&bob(), &plan).await.unwrap();
        let before = self
            .store
            .machine(machine)
            .await
            .unwrap()
            .applied_digest
            .unwrap();
        self.observe(
            machine,
            ObservationPurpose::Evidence,
            Some(&plan),
            self.facts(machine, before),
        )
        .await;
        self.store
            .record_dependency_check(DependencyCheck {
                plan: plan.clone(),
                controller: CONTROLLER,
                access_path: "talosconfig".into(),
                access_version: "access-v1".into(),
                artifact_decrypts: true,
            })
            .await
            .unwrap();
        let committed = self.store.commit(&plan, CONTROLLER).await.unwrap();
        let _proof = self
            .store
            .attempt(&committed.operation, committed.owner)
            .await
            .unwrap();
        self.sims[machine].drift_config(plaintext(machine, release));
        self.store
            .record_response(
                &committed.operation,
                1,
                committed.owner,
                ResponseClass::Accepted,
            )
            .await
            .unwrap();
        let digest = config_digest(&plaintext(machine, release));
        self.observe(
            machine,
            ObservationPurpose::Completion,
            None,
            self.facts(machine, digest),
        )
        .await;
        self.store
            .classify(&committed.operation, committed.owner)
            .await
            .unwrap();
        assert_eq!(
            self.store
                .machine(machine)
                .await
                .unwrap()
                .applied_release
                .as_deref(),
            Some(release)
        );
    }

    fn backend(&self) -> TalosBackend {
        TalosBackend::governed(
            Arc::clone(&self.store),
            self.readers.clone(),
            alice(),
            "lab",
            Arc::new(SystemClock::new()),
        )
        .cluster("lab", self.cluster_id.clone())
    }

    fn engine(&self, backend: TalosBackend) -> Engine {
        Engine::new(
            Backends::new().with(backend.into_backend()),
            Arc::new(MemoryStore::new()),
        )
    }

    fn apply_requests(&self) -> usize {
        self.sims.values().map(|s| s.apply_requests().len()).sum()
    }

    async fn stop(self) {
        for sim in self.sims.into_values() {
            sim.shutdown().await.unwrap();
        }
    }
}

fn fleet(machines: &[&str]) -> Plan {
    let lab = TalosCluster::named("lab").unwrap();
    let mut f = Fleet::builder("lab");
    for m in machines {
        f.declare(lab, *m, TalosMachine::new("rel-1"));
    }
    Plan::declared(&f.build().unwrap())
}

/// A converged machine, one pending convergence, one drifted: the plan tells them
/// apart by field.
async fn fleet_in_three_states() -> World {
    let world = World::start().await;
    world.converge("w-conv", "rel-1").await;
    world.converge("w-drift", "rel-1").await;
    world.sims["w-drift"].drift_config(
        b"version: v1alpha1\nmachine:\n  type: worker\n# edited on the node\n".to_vec(),
    );
    world
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_shows_pending_convergence_and_drift() {
    let world = fleet_in_three_states().await;
    let engine = world.engine(world.backend());
    let report = engine
        .plan(&fleet(&MACHINES), &Options::default())
        .await
        .unwrap();
    insta::assert_snapshot!("plan_three_states", report.render());
    assert_eq!(world.apply_requests(), 0);
    world.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_the_node_does_not_give_is_unknown_never_a_difference() {
    let world = fleet_in_three_states().await;
    for sim in world.sims.values() {
        sim.fail_reads(SimResource::MachineConfig, ReadFault::PermissionDenied);
        sim.fail_reads(SimResource::SystemInformation, ReadFault::PermissionDenied);
    }
    let engine = world.engine(world.backend());
    let report = engine
        .plan(&fleet(&["w-conv", "w-drift"]), &Options::default())
        .await
        .unwrap();
    insta::assert_snapshot!("plan_reads_denied", report.render());
    world.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_records_a_plan_awaiting_approval_and_sends_nothing() {
    let world = fleet_in_three_states().await;
    let engine = world.engine(world.backend());
    let plan = fleet(&MACHINES);
    let outcome = engine.apply(&plan, &Options::default()).await.unwrap();
    insta::assert_snapshot!("apply_three_states", result_text(&outcome.result));
    assert_eq!(outcome.result.not_attempted.len(), 1);
    assert!(
        outcome
            .result
            .failed
            .iter()
            .all(|f| f.resource.name == "w-drift")
    );

    let plans = world.store.plans_of_machine("w-pend").await;
    assert_eq!(plans, ["w-pend-rel-1-b9"]);
    let view = world.store.plan("w-pend-rel-1-b9").await.unwrap();
    assert_eq!(view.state, PlanState::Proposed);
    assert_eq!(
        view.artifact_digest,
        config_digest(&plaintext("w-pend", "rel-1"))
    );
    assert_eq!(
        world.apply_requests(),
        0,
        "an apply sent something to a node"
    );

    // A second apply names the same plan: no duplicate for the same binding.
    let again = engine.apply(&plan, &Options::default()).await.unwrap();
    let reasons = |r: &infra_core::engine::ApplyResult| {
        r.not_attempted
            .iter()
            .map(|n| (n.resource.clone(), n.reason))
            .collect::<Vec<_>>()
    };
    assert_eq!(reasons(&again.result), reasons(&outcome.result));
    assert_eq!(
        again.result.not_attempted[0].detail.as_deref(),
        Some(
            "plan w-pend-rel-1-b9 for machine w-pend (release rel-1) is already recorded and waiting for an approver; nothing new was made"
        )
    );
    assert_eq!(
        world.store.plans_of_machine("w-pend").await,
        ["w-pend-rel-1-b9"]
    );
    let direct = world
        .backend()
        .update(UpdateArgs::new("lab", "w-pend", &settled("rel-1")))
        .await
        .unwrap();
    let deferral = direct.deferral().expect("the update is deferred, not made");
    assert_eq!(
        deferral.reason,
        infra_core::sdk::DeferralReason::AwaitingApproval
    );
    insta::assert_snapshot!("second_apply_message", deferral.detail);

    // Once cancelled, the next apply makes a fresh plan for the same binding.
    world
        .store
        .cancel_plan(&alice(), "w-pend-rel-1-b9")
        .await
        .unwrap();
    engine.apply(&plan, &Options::default()).await.unwrap();
    assert_eq!(
        world.store.plans_of_machine("w-pend").await,
        ["w-pend-rel-1-b9", "w-pend-rel-1-b9-2"]
    );
    assert_eq!(world.apply_requests(), 0);
    let dump = world.store.dump_all_rows().await.unwrap();
    assert!(!dump.contains(SECRET), "plaintext reached the store");
    world.stop().await;
}

fn settled(release: &str) -> infra_talos::backend::TalosMachineSettled {
    infra_talos::backend::TalosMachineSettled {
        release: release.to_owned(),
        identity: infra_core::prelude::Partial::Unknown,
        drift: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_drift_gets_a_revert_plan() {
    let world = fleet_in_three_states().await;
    // The drift record opens the way the store records drift today: evidence for a
    // plan that reads the drifted digest is refused by comparison 3 and opens it.
    let drifted = config_digest(&world.sims["w-drift"].config());
    world
        .store
        .create_plan(
            &alice(),
            PlanSpec {
                id: "probe".into(),
                machine: "w-drift".into(),
                release: "rel-1".into(),
                expires_at: InstantMs(u64::MAX / 2),
                max_evidence_age: SpanMs::from_secs(600),
                transport_deadline: SpanMs::from_secs(5),
                verification_deadline: SpanMs::from_secs(30),
                max_attempts: 1,
                revert: false,
            },
        )
        .await
        .unwrap();
    world.store.approve(&bob(), "probe").await.unwrap();
    world
        .observe(
            "w-drift",
            ObservationPurpose::Evidence,
            Some("probe"),
            world.facts("w-drift", drifted),
        )
        .await;
    let refused = world.store.commit("probe", CONTROLLER).await.unwrap_err();
    assert_eq!(
        refused.comparison(),
        Some(Comparison::Evidence),
        "{refused}"
    );
    assert!(
        world
            .store
            .machine("w-drift")
            .await
            .unwrap()
            .open_drift
            .is_some()
    );
    let engine = world.engine(world.backend());
    let outcome = engine
        .apply(&fleet(&["w-drift"]), &Options::default())
        .await
        .unwrap();
    insta::assert_snapshot!("apply_recorded_drift", result_text(&outcome.result));
    let plans = world.store.plans_of_machine("w-drift").await;
    assert_eq!(plans.len(), 3, "{plans:?}");
    assert!(plans.iter().any(|p| p.ends_with("-revert")), "{plans:?}");
    assert_eq!(world.apply_requests(), 0);
    world.stop().await;
}

const DEPLOYER: &str = "deployer";

impl World {
    /// This process's executor, reaching each machine's simulator through its own
    /// talosconfig.
    fn executor(&self) -> Executor {
        let connectors = ConnectorMap::new();
        for (machine, path) in &self.talosconfigs {
            let connector = TalosconfigConnector::load(path, options()).unwrap();
            connector.add_machine(
                machine.clone(),
                MachineRoute {
                    endpoint: NodeAddress::parse(&self.sims[machine].node_address()).unwrap(),
                },
            );
            connectors.insert(machine.clone(), Arc::new(connector));
        }
        let keys: Arc<dyn KeyProvider> =
            Arc::new(LocalKeyring::open(self.dir.path().join("keys")).unwrap());
        Executor::new(
            CONTROLLER,
            Arc::clone(&self.store) as Arc<dyn Store>,
            Arc::new(connectors),
            keys,
            Arc::new(SystemClock::new()),
            ExecutorSettings {
                settle_floor: SpanMs::from_secs(30),
                max_transport_deadline: SpanMs::from_secs(30),
            },
        )
        .unwrap()
    }

    /// A backend in direct mode whose plans are made by the `deployer` token and run
    /// by an executor of this process.
    async fn direct_backend(&self) -> TalosBackend {
        self.store
            .register_principal(
                &admin(),
                PrincipalSpec {
                    id: DEPLOYER.into(),
                    kind: PrincipalKind::Token {
                        responsible: Some("alice".into()),
                    },
                    roles: vec![Role::Publisher],
                },
            )
            .await
            .unwrap();
        let executor = self.executor();
        TalosBackend::direct(
            Arc::clone(&self.store),
            self.readers.clone(),
            Actor::new(DEPLOYER, Role::Publisher),
            Arc::new(executor),
            "lab",
            Arc::new(SystemClock::new()),
        )
        .cluster("lab", self.cluster_id.clone())
    }

    async fn grant_blanket(&self) -> String {
        self.store
            .grant_blanket_approval(
                &bob(),
                &self.cluster_id,
                "lab cluster, applied as declared",
                WEEK,
            )
            .await
            .unwrap()
            .id
    }
}

/// Direct mode without a blanket approval: the plan is made and waits for an
/// approver, exactly as in governed mode; nothing reaches the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_mode_without_a_blanket_approval_waits_for_an_approver() {
    let world = World::start().await;
    let backend = world.direct_backend().await;
    let outcome = world
        .engine(backend)
        .apply(&fleet(&["w-pend"]), &Options::default())
        .await
        .unwrap();
    assert_eq!(
        outcome.result.not_attempted.len(),
        1,
        "{:?}",
        outcome.result
    );
    assert_eq!(
        outcome.result.not_attempted[0].reason,
        infra_core::engine::NotAttemptedReason::AwaitingApproval
    );
    let plans = world.store.plans_of_machine("w-pend").await;
    assert_eq!(plans.len(), 1);
    assert_eq!(
        world.store.plan(&plans[0]).await.unwrap().state,
        PlanState::Proposed
    );
    assert_eq!(world.apply_requests(), 0);
    world.stop().await;
}

/// Direct mode under a blanket approval: one apply converges the machine through
/// the controller's transactions (one request at the node, after the attempt is
/// recorded), and the next plan has nothing to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_mode_applies_under_a_blanket_approval() {
    let world = World::start().await;
    let blanket = world.grant_blanket().await;
    let backend = world.direct_backend().await;
    let engine = world.engine(backend);
    let outcome = engine
        .apply(&fleet(&["w-pend"]), &Options::default())
        .await
        .unwrap();
    assert_eq!(outcome.result.applied.len(), 1, "{:?}", outcome.result);
    assert!(outcome.result.failed.is_empty() && outcome.result.not_attempted.is_empty());
    assert_eq!(world.sims["w-pend"].apply_requests().len(), 1);
    assert_eq!(world.apply_requests(), 1);
    let machine = world.store.machine("w-pend").await.unwrap();
    assert_eq!(machine.applied_release.as_deref(), Some("rel-1"));
    assert_eq!(
        world.sims["w-pend"].facts().config,
        plaintext("w-pend", "rel-1")
    );
    let timeline = world.store.timeline("w-pend").await.unwrap();
    let position = |what: &str| {
        timeline
            .iter()
            .rposition(|e| e.kind == what || format!("{} {}", e.kind, e.detail) == what)
            .unwrap_or_else(|| panic!("no {what} entry: {timeline:?}"))
    };
    assert!(
        timeline[position("approval_under_grant")]
            .detail
            .contains(&format!(
                "under the standing grant of bob (blanket approval {blanket})"
            ))
    );
    assert!(position("approval_under_grant") < position("commitment"));
    assert!(position("commitment") < position("attempt"));
    assert!(position("attempt") < position("response attempt 1: accepted"));
    assert!(position("response attempt 1: accepted") < position("classification completed"));
    // Converged: a second apply makes no plan and sends nothing.
    let again = engine
        .apply(&fleet(&["w-pend"]), &Options::default())
        .await
        .unwrap();
    assert!(
        again
            .result
            .applied
            .iter()
            .all(|a| a.change == infra_core::engine::Change::Unchanged),
        "{:?}",
        again.result
    );
    assert!(again.result.failed.is_empty() && again.result.not_attempted.is_empty());
    assert_eq!(world.store.plans_of_machine("w-pend").await.len(), 1);
    assert_eq!(world.apply_requests(), 1);
    world.stop().await;
}

/// Direct mode's failures keep their meaning: a validation rejection is `Invalid`
/// and changed nothing; a lost response is a failure that may have been sent, and
/// the machine stays held until it is accounted for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_mode_reports_rejections_and_unknown_outcomes() {
    let world = World::start().await;
    world.grant_blanket().await;
    let engine = world.engine(world.direct_backend().await);
    world.sims["w-pend"].fail_next_apply(ApplyFault::InvalidArgument(
        "machine.install: unknown field".into(),
    ));
    world.sims["w-conv"].fail_next_apply(ApplyFault::LoseResponse);
    let before = world.sims["w-pend"].facts().config;
    let outcome = engine
        .apply(&fleet(&["w-pend", "w-conv"]), &Options::default())
        .await
        .unwrap();
    assert_eq!(outcome.result.failed.len(), 2, "{:?}", outcome.result);
    let failed = |name: &str| {
        outcome
            .result
            .failed
            .iter()
            .find(|f| f.resource.to_string().contains(name))
            .unwrap_or_else(|| panic!("{name} did not fail: {:?}", outcome.result))
    };
    let rejected = failed("w-pend");
    assert_eq!(
        rejected.error.kind,
        ErrorKind::Invalid,
        "{}",
        rejected.error
    );
    assert!(!rejected.error.may_have_been_sent);
    assert!(
        rejected.error.message.contains("rejected"),
        "{}",
        rejected.error
    );
    assert_eq!(world.sims["w-pend"].facts().config, before);
    let lost = failed("w-conv");
    assert!(lost.error.may_have_been_sent, "{}", lost.error);
    assert!(
        lost.error.message.contains("not known yet"),
        "{}",
        lost.error
    );
    // The lost response landed at the node, but the store holds the machine until
    // the outcome is accounted for: Applied has not moved.
    assert_eq!(
        world.sims["w-conv"].facts().config,
        plaintext("w-conv", "rel-1")
    );
    let held = world.store.operations_of("w-conv").await.unwrap();
    assert!(held.iter().any(|o| !o.state.is_terminal()), "{held:?}");
    assert_eq!(
        world.store.machine("w-conv").await.unwrap().applied_release,
        Some("rel-0".to_owned())
    );
    // A second apply sends nothing to the held machine; the rejected one gets a
    // fresh plan, and the node (its fault spent) takes it.
    let again = engine
        .apply(&fleet(&["w-pend", "w-conv"]), &Options::default())
        .await
        .unwrap();
    assert_eq!(again.result.failed.len(), 1, "{:?}", again.result);
    assert!(
        again.result.failed[0].error.message.contains("holds it"),
        "{}",
        again.result.failed[0].error
    );
    assert_eq!(again.result.applied.len(), 1, "{:?}", again.result);
    assert_eq!(world.sims["w-conv"].apply_requests().len(), 1);
    assert_eq!(world.sims["w-pend"].apply_requests().len(), 2);
    assert_eq!(world.store.plans_of_machine("w-pend").await.len(), 2);
    world.stop().await;
}

/// Direct mode on machines that share one rollout scope: the engine applies them in
/// parallel, the backend runs them one at a time, and every one converges (the
/// store's rollout slot would refuse a second commitment while the first is in
/// flight). The timeline shows each operation complete before the next commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_mode_runs_one_machine_of_a_rollout_scope_at_a_time() {
    let world = World::start_with_scopes(|_| "workers".to_owned()).await;
    world.grant_blanket().await;
    let engine = world.engine(world.direct_backend().await);
    let outcome = engine
        .apply(&fleet(&MACHINES), &Options::default())
        .await
        .unwrap();
    assert_eq!(outcome.result.applied.len(), 3, "{:?}", outcome.result);
    assert!(outcome.result.failed.is_empty(), "{:?}", outcome.result);
    assert_eq!(world.apply_requests(), 3);
    // Commitment and completion times, by store time across machines.
    let mut spans = Vec::new();
    for machine in MACHINES {
        assert_eq!(
            world
                .store
                .machine(machine)
                .await
                .unwrap()
                .applied_release
                .as_deref(),
            Some("rel-1")
        );
        let timeline = world.store.timeline(machine).await.unwrap();
        let at = |kind: &str, detail: &str| {
            timeline
                .iter()
                .find(|e| e.kind == kind && e.detail.contains(detail))
                .unwrap_or_else(|| panic!("{machine}: no {kind}: {timeline:?}"))
                .at
        };
        spans.push((at("commitment", ""), at("applied_changed", "release rel-1")));
    }
    spans.sort();
    for pair in spans.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "operations overlapped: {spans:?}");
    }
    world.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_and_create_are_refused() {
    let world = World::start().await;
    let backend = world.backend().into_backend();
    let err = backend
        .delete("talosMachine", "lab", "w-pend")
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid);
    let err = backend
        .create(
            "talosMachine",
            "lab",
            "w-new",
            infra_core::sdk::SettledSpec::new::<TalosMachine>(&settled("rel-1")),
            &infra_core::sdk::Marker::new("lab"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid);
    insta::assert_snapshot!(
        "refusals",
        format!(
            "{}\n{}",
            err,
            backend
                .delete("talosMachine", "lab", "w-pend")
                .await
                .unwrap_err()
        )
    );
    // Listing an unknown cluster is an empty list; reading a machine of another
    // cluster is absent.
    assert!(
        backend
            .list("talosMachine", "elsewhere")
            .await
            .unwrap()
            .is_empty()
    );
    let err = backend
        .read("talosMachine", "elsewhere", "w-pend")
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);
    // The router serves `talosMachine` only.
    let err = backend.list("objectStore", "lab").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid);
    assert_eq!(world.apply_requests(), 0);
    world.stop().await;
}

/// Plan identifiers of a machine, oldest first.
trait PlansOf {
    async fn plans_of_machine(&self, machine: &str) -> Vec<String>;
}

impl PlansOf for SqliteStore {
    async fn plans_of_machine(&self, machine: &str) -> Vec<String> {
        use infra_talos::backend::Inventory as _;
        self.plans_of(machine)
            .await
            .unwrap()
            .into_iter()
            .map(|p| p.id)
            .filter(|id| !id.starts_with("handover-"))
            .collect()
    }
}

/// The apply result, one line per resource.
fn result_text(result: &infra_core::engine::ApplyResult) -> String {
    let mut out = String::new();
    for a in &result.applied {
        out.push_str(&format!("  {}  {:?}\n", a.resource, a.change));
    }
    for n in &result.not_attempted {
        out.push_str(&format!(
            "  {}  not attempted: {} ({})\n",
            n.resource,
            n.reason,
            n.detail.as_deref().unwrap_or("no detail")
        ));
    }
    for f in &result.failed {
        out.push_str(&format!(
            "  {}  failed to {:?}: {}\n",
            f.resource, f.step, f.error
        ));
    }
    out
}

/// A connector map reaches a machine only through the connector registered for it:
/// without one the machine cannot be reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connector_map_reaches_only_the_machines_registered() {
    let world = World::start().await;
    let map = ConnectorMap::new();
    let path = &world.talosconfigs["w-pend"];
    let connector = TalosconfigConnector::load(path, options()).unwrap();
    connector.add_machine(
        "w-pend",
        MachineRoute {
            endpoint: NodeAddress::parse(&world.sims["w-pend"].node_address()).unwrap(),
        },
    );
    map.insert("w-pend", Arc::new(connector));
    let view: MachineView = world.store.machine("w-pend").await.unwrap();
    let clients = map.connect(&view).await.unwrap();
    assert_eq!(clients.access.path, path.display().to_string());
    let other = world.store.machine("w-conv").await.unwrap();
    let Err(err) = map.connect(&other).await else {
        panic!("an unregistered machine was reached");
    };
    assert!(
        matches!(&err, ExecutorError::Access(why) if why.contains("w-conv")),
        "{err}"
    );
    world.stop().await;
}
