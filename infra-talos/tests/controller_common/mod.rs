//! What the executor tests share: a SQLite store on a hand-moved clock, a local
//! keyring, a simulated worker reached over real gRPC with mutual TLS, and a plan
//! approved for it.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "a module shared by test binaries, each using the parts it needs"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use infra_core::engine::Clock;
use infra_talos::contract::operation::{ControllerId, OperationState};
use infra_talos::contract::{InstantMs, Role, SpanMs};
use infra_talos::controller::{Executor, ExecutorSettings, MachineRoute, TalosconfigConnector};
use infra_talos::keys::{self, KeyProvider, LocalKeyring};
use infra_talos::store::sqlite::SqliteStore;
use infra_talos::store::{
    AccountingRequest, Actor, AdoptPlanSpec, BootstrapSpec, ContributionKind, IdentityKey,
    MachineSpec, ManualClock, PlanSpec, PrincipalKind, PrincipalSpec, RecoveryEntry,
    RestoredBackup, SealedReleaseSpec, Settings, Store, StoreError, TimelineEntry,
};
use infra_talos::{ConnectOptions, NodeAddress, config_digest};
use infra_testkit::talos::{NodeFacts, TalosSim};
use tempfile::TempDir;

/// Where the hand-moved clock starts.
pub const T0: InstantMs = InstantMs(1_800_000_000_000);
/// Part of every artifact's plaintext; it must never reach the store.
pub const MARKER: &str = "SECRET-VALUE-5d1e8b";
/// The machine.
pub const MACHINE: &str = "m1";
/// The transport deadline plans bind.
pub const TRANSPORT: SpanMs = SpanMs(1500);
/// The controller instance that records the handover's adoption.
pub const HANDOVER: u128 = 0xad0;

/// The settle floor.
pub const FLOOR: SpanMs = SpanMs::from_secs(30);

pub fn publisher() -> Actor {
    Actor::new("alice", Role::Publisher)
}
pub fn approver() -> Actor {
    Actor::new("bob", Role::Approver)
}
pub fn admin() -> Actor {
    Actor::new("root", Role::RecoveryAdmin)
}
pub fn author() -> Actor {
    Actor::new("ann", Role::Author)
}

/// The executor's clock and the store's are one: time read in store milliseconds,
/// and a sleep moves the store's clock.
#[derive(Debug, Clone)]
pub struct LinkedClock(pub ManualClock);

#[async_trait::async_trait]
impl Clock for LinkedClock {
    fn now(&self) -> Duration {
        Duration::from_millis(self.0.now().0)
    }

    async fn sleep(&self, duration: Duration) {
        self.0.advance(SpanMs(
            u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
        ));
        tokio::task::yield_now().await;
    }
}

/// The configuration the node runs before any plan.
pub fn base_config() -> Vec<u8> {
    b"version: v1alpha1\nmachine:\n  type: worker\n  install:\n    disk: /dev/sda\n".to_vec()
}

/// The artifact of `release`.
pub fn artifact(release: &str) -> Vec<u8> {
    format!(
        "version: v1alpha1\nmachine:\n  type: worker\n  token: {MARKER}\n  install:\n    disk: /dev/sda\n# {release}\n"
    )
    .into_bytes()
}

/// The simulated worker's facts.
pub fn node_facts() -> NodeFacts {
    NodeFacts {
        talos_version: "v1.13.2".to_owned(),
        config: base_config(),
        ..NodeFacts::default()
    }
}

/// Everything a test needs.
pub struct World {
    pub store: Arc<SqliteStore>,
    pub clock: ManualClock,
    pub sim: Arc<TalosSim>,
    pub keyring: Arc<LocalKeyring>,
    pub connector: Arc<TalosconfigConnector>,
    pub talosconfig: PathBuf,
    pub db: PathBuf,
    pub dir: TempDir,
}

pub fn connect_options() -> ConnectOptions {
    ConnectOptions {
        connect_timeout: Duration::from_secs(2),
        call_deadline: Duration::from_secs(2),
        tls_server_name: None,
    }
}

/// A connector to `sim` from the talosconfig at `path`, managing [`MACHINE`].
pub fn connector(sim: &TalosSim, path: &Path) -> Arc<TalosconfigConnector> {
    let connector = TalosconfigConnector::load(path, connect_options()).expect("talosconfig");
    connector.add_machine(
        MACHINE,
        MachineRoute {
            endpoint: NodeAddress::parse(&sim.node_address()).expect("address"),
        },
    );
    Arc::new(connector)
}

/// Opens the store file at `path` on a hand-moved clock starting at `start`.
pub async fn open_store(path: &Path, start: InstantMs) -> (Arc<SqliteStore>, ManualClock) {
    let clock = ManualClock::starting_at(start);
    (open_store_on(path, &clock).await, clock)
}

/// Opens the store file at `path` on `clock`.
pub async fn open_store_on(path: &Path, clock: &ManualClock) -> Arc<SqliteStore> {
    open_store_guarded(path, clock, infra_talos::store::Guards::default()).await
}

/// Opens the store file at `path` on `clock`, with `guards`.
pub async fn open_store_guarded(
    path: &Path,
    clock: &ManualClock,
    guards: infra_talos::store::Guards,
) -> Arc<SqliteStore> {
    let store = SqliteStore::open_for_tests(
        Some(path),
        Settings {
            guards,
            clock: Some(clock.clone()),
            ..Settings::default()
        },
    )
    .await
    .expect("store");
    Arc::new(store)
}

impl World {
    /// A world with a plan `plan` approved for release `rel-1`.
    pub async fn new() -> World {
        Self::with_sim(TalosSim::builder().facts(node_facts())).await
    }

    pub async fn with_sim(builder: infra_testkit::talos::TalosSimBuilder) -> World {
        Self::build(builder, infra_talos::store::Guards::default(), |clock| {
            Arc::new(LinkedClock(clock.clone()))
        })
        .await
    }

    async fn inventory(&self) {
        let s = &self.store;
        register_people(s.as_ref()).await;
        let facts = self.sim.facts();
        s.create_machine(
            &author(),
            MachineSpec {
                id: MACHINE.into(),
                identity: IdentityKey::SmbiosUuid(facts.smbios_uuid.clone()),
                cluster_id: facts.cluster_id.clone(),
                endpoint: self.sim.node_address(),
                rollout_scope: "workers".into(),
                talos_minor: "1.13".into(),
                import_digest: Some(config_digest(&facts.config)),
            },
        )
        .await
        .expect("machine");
        self.hand_over().await;
    }

    /// Hands the imported machine over (§6.3): release `rel-0` published, then
    /// [`hand_over_with`] by controller instance [`HANDOVER`].
    async fn hand_over(&self) {
        self.publish("rel-0").await;
        let expires = self.clock.now().plus(SpanMs::from_secs(3600));
        hand_over_with(
            self.store.as_ref(),
            &self.executor(HANDOVER),
            MACHINE,
            expires,
        )
        .await;
    }

    /// Seals and publishes `release` for the machine.
    pub async fn publish(&self, release: &str) {
        let sealed = self
            .keyring
            .seal("artifacts", &artifact(release))
            .await
            .expect("seal");
        self.store
            .publish_sealed_release(
                &publisher(),
                SealedReleaseSpec {
                    id: release.into(),
                    artifacts: vec![(MACHINE.into(), sealed)],
                    contributions: vec![("ann".into(), ContributionKind::Authored)],
                },
            )
            .await
            .expect("publish");
    }

    /// Publishes `release` and makes and approves plan `plan` for it.
    pub async fn approved_plan(&self, plan: &str, release: &str, max_attempts: u32) {
        self.publish(release).await;
        self.store
            .create_plan(
                &publisher(),
                PlanSpec {
                    id: plan.into(),
                    machine: MACHINE.into(),
                    release: release.into(),
                    expires_at: self.clock.now().plus(SpanMs::from_secs(3600)),
                    max_evidence_age: SpanMs::from_secs(60),
                    transport_deadline: TRANSPORT,
                    verification_deadline: SpanMs::from_secs(60),
                    max_attempts,
                    revert: false,
                },
            )
            .await
            .expect("plan");
        self.store
            .approve(&approver(), plan)
            .await
            .expect("approve");
    }

    /// An executor for controller instance `id`.
    pub fn executor(&self, id: u128) -> Executor {
        self.executor_on(id, self.store.clone(), &self.clock)
    }

    /// An executor for controller instance `id` on `store` and `clock`.
    pub fn executor_on(&self, id: u128, store: Arc<SqliteStore>, clock: &ManualClock) -> Executor {
        Executor::new(
            ControllerId(id),
            store,
            self.connector.clone(),
            self.keyring.clone() as Arc<dyn KeyProvider>,
            Arc::new(LinkedClock(clock.clone())),
            ExecutorSettings {
                settle_floor: FLOOR,
                max_transport_deadline: SpanMs::from_secs(10),
            },
        )
        .expect("executor")
    }

    /// The sealed artifact plan `p1` binds, as the store holds it.
    pub async fn plan_artifact(&self) -> keys::SealedArtifact {
        self.store.sealed_artifact("p1").await.expect("sealed")
    }

    pub async fn timeline(&self) -> Vec<TimelineEntry> {
        self.store.timeline(MACHINE).await.expect("timeline")
    }

    pub fn applies(&self) -> usize {
        self.sim.apply_requests().len()
    }

    /// The store's bytes hold no plaintext marker.
    pub async fn no_plaintext_stored(&self) {
        let rows = self.store.dump_all_rows().await.expect("rows");
        assert!(!rows.contains(MARKER), "plaintext reached the store");
    }

    /// Stops the simulator.
    pub async fn stop(self) {
        let World { sim, store, .. } = self;
        store.pool().close().await;
        if let Ok(sim) = Arc::try_unwrap(sim) {
            sim.shutdown().await.expect("simulator stops");
        }
    }
}

impl World {
    /// A world like [`World::with_sim`], with its store built with `guards` and its
    /// simulator stamping each request it receives with the clock `sim_clock` makes
    /// from the world's hand-moved clock (instead of reading that clock directly).
    pub async fn build(
        builder: infra_testkit::talos::TalosSimBuilder,
        guards: infra_talos::store::Guards,
        sim_clock: impl FnOnce(&ManualClock) -> Arc<dyn Clock>,
    ) -> World {
        Self::build_from(T0, builder, guards, sim_clock).await
    }

    /// A world like [`World::new`] whose hand-moved clock starts at `start`: for a
    /// test that lets a controller process write on the database's own clock after
    /// the set-up, `start` must precede it.
    pub async fn new_at(start: InstantMs) -> World {
        Self::build_from(
            start,
            TalosSim::builder().facts(node_facts()),
            infra_talos::store::Guards::default(),
            |clock| Arc::new(LinkedClock(clock.clone())),
        )
        .await
    }

    async fn build_from(
        start: InstantMs,
        builder: infra_testkit::talos::TalosSimBuilder,
        guards: infra_talos::store::Guards,
        sim_clock: impl FnOnce(&ManualClock) -> Arc<dyn Clock>,
    ) -> World {
        let clock = ManualClock::starting_at(start);
        let sim = builder
            .clock(sim_clock(&clock))
            .start()
            .await
            .expect("simulator");
        let sim = Arc::new(sim);
        let dir = tempfile::tempdir().expect("dir");
        let db = dir.path().join("controller.db");
        let store = open_store_guarded(&db, &clock, guards).await;
        let keyring = Arc::new(LocalKeyring::open(dir.path().join("keys")).expect("keyring"));
        keyring.create_key("artifacts").expect("key");
        let talosconfig = sim
            .write_talosconfig(dir.path(), &sim.pki().admin_client().expect("client"))
            .expect("talosconfig");
        let connector = connector(&sim, &talosconfig);
        let world = World {
            store,
            clock,
            sim,
            keyring,
            connector,
            talosconfig,
            db,
            dir,
        };
        world.inventory().await;
        world
    }
}

/// Hands imported `machine` over (§6.3): an adopt plan `handover-<machine>` naming
/// its Desired release, approved by bob, and its adoption recorded by `executor`
/// against a fresh read of the node; nothing is sent.
pub async fn hand_over_with<S: Store + ?Sized>(
    store: &S,
    executor: &Executor,
    machine: &str,
    expires_at: InstantMs,
) {
    let plan = format!("handover-{machine}");
    let release = store
        .machine(machine)
        .await
        .expect("machine")
        .desired_release
        .expect("a Desired release to adopt");
    store
        .create_adopt_plan(
            &publisher(),
            AdoptPlanSpec {
                id: plan.clone(),
                machine: machine.into(),
                release,
                expires_at,
                max_evidence_age: SpanMs::from_secs(60),
            },
        )
        .await
        .expect("adopt plan");
    store
        .approve(&approver(), &plan)
        .await
        .expect("approve the handover");
    let outcome = executor.run_plan(&plan).await.expect("adoption");
    assert_eq!(outcome.state, OperationState::Completed);
    assert_eq!(outcome.sends, 0, "an adoption sends nothing");
}

/// Bootstraps the installation with root (recovery-admin) as its first
/// administrator, who registers the people every test acts as: alice (publisher),
/// bob (approver) and ann (author).
pub async fn register_people<S: Store + ?Sized>(s: &S) {
    s.bootstrap(BootstrapSpec {
        ca_certificate: TEST_CA.into(),
        administrator: PrincipalSpec {
            id: "root".into(),
            kind: PrincipalKind::Human,
            roles: vec![Role::RecoveryAdmin],
        },
        approval_policy: infra_talos::store::ApprovalPolicy::default(),
        administrator_certificate: None,
    })
    .await
    .expect("bootstrap");
    let people: [(&str, Role); 3] = [
        ("alice", Role::Publisher),
        ("bob", Role::Approver),
        ("ann", Role::Author),
    ];
    for (id, role) in people {
        s.register_principal(
            &Actor::new("root", Role::RecoveryAdmin),
            PrincipalSpec {
                id: id.into(),
                kind: PrincipalKind::Human,
                roles: vec![role],
            },
        )
        .await
        .expect("principal");
    }
}

/// The certificate authority these tests' installations are bootstrapped with.
pub const TEST_CA: &str = "-----BEGIN CERTIFICATE-----\nTUlJQg==\n-----END CERTIFICATE-----\n";

/// What a recovery-mode entry records in these tests: the instances stopped at the
/// store's present time, and the database restored from a backup taken an hour
/// before (or at time zero).
pub async fn entry_now<S: Store + ?Sized>(s: &S, controller: ControllerId) -> RecoveryEntry {
    let now = s.now().await.expect("store time");
    RecoveryEntry {
        controller,
        stopped_at: now,
        backups: vec![RestoredBackup {
            family: "database".into(),
            backup: "store.dump".into(),
            taken_at: InstantMs(now.0.saturating_sub(3_600_000)),
        }],
    }
}

/// The controller instances the executor tests run.
pub const A: u128 = 0xa1;
/// The second instance: the one that takes over.
pub const B: u128 = 0xb2;

/// Recovery-admin's §5.2 decision on attempt 1 of `operation`, at the floor.
pub async fn decide(w: &World, operation: &str) -> Result<(), StoreError> {
    w.store
        .record_accounting_decision(
            &admin(),
            AccountingRequest {
                operation: operation.into(),
                attempt: 1,
                settle_floor: FLOOR,
                explanation: None,
            },
        )
        .await
}

/// Recovery observations by `executor` until recovery-admin's decision on attempt 1
/// is accepted.
pub async fn observe_until_decided(w: &World, executor: &Executor, operation: &str) {
    for _ in 0..6 {
        executor
            .recovery_observation(operation)
            .await
            .expect("recovery observation");
        if decide(w, operation).await.is_ok() {
            return;
        }
    }
    panic!("the accounting decision never became possible");
}
