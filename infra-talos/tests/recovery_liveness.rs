//! Recovery mode always ends (§7.3, §7.6): a property over generated histories.
//!
//! Each history runs one machine, a simulated Talos node over real gRPC and a fresh
//! store (SQLite, or a fresh PostgreSQL schema): plans applied by controller
//! instances that stop for good at any interruption point, the node answering each
//! apply as generated (accepted, lost after landing, invalid, unavailable), time
//! passing, a takeover at a controller start, the node's configuration changed behind
//! the store, and a backup of the database taken at any point. Then every instance
//! stops; the database is restored to the backup (or not, as when only the key
//! provider or credential store was restored), and recovery-admin enters recovery
//! mode. Operations are thereby left in every state, with and without recorded
//! attempts, answered or not.
//!
//! From the entry on, only documented acts run, in rounds: the restarted
//! controller's recovery pass and its start, recovery-admin's step 1 decision, marks,
//! releases and leaving (§7.3 steps 1 and 4 to 8). The property:
//!
//! - recovery mode is left within a bounded number of rounds (a history that cannot
//!   leave it fails, and proptest prints its shrunk sequence);
//! - every operation open at the entry ends terminal, moved there exactly once, and
//!   never rejected nor retried (§7.3 step 5);
//! - the node receives no apply request from the entry until recovery mode is left,
//!   and afterwards a new plan completes with exactly one.
//!
//! Sends are counted at the simulated node. The PostgreSQL run reads
//! `INFRA_TEST_DATABASE_URL`; without it, it prints a skip line and fails when
//! `CI=true`. Each run prints `recovery liveness histories: N`.

mod controller_common;
mod pg_support;

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use controller_common::*;
use infra_core::engine::Clock;
use infra_talos::NodeAddress;
use infra_talos::config_digest;
use infra_talos::contract::operation::{ControllerId, OperationState};
use infra_talos::contract::recovery::ScopeState;
use infra_talos::contract::{Revision, SpanMs};
use infra_talos::controller::{
    Executor, ExecutorSettings, Interruption, InterruptionHook, MachineRoute, TalosconfigConnector,
};
use infra_talos::keys::{KeyProvider, LocalKeyring};
use infra_talos::store::postgres::PgStore;
use infra_talos::store::sqlite::SqliteStore;
use infra_talos::store::{
    ContributionKind, DEFAULT_MAX_TRANSPORT_DEADLINE, IdentityKey, MachineSpec, ManualClock,
    PlanSpec, ScopeAccounting, SealedReleaseSpec, Settings, Store, StoreError,
};
use infra_testkit::talos::{ApplyFault, TalosSim};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::sync::Notify;

/// Histories per backend.
const SQLITE_CASES: u32 = 1700;
const POSTGRES_CASES: u32 = 300;
/// Rounds of documented acts allowed to leave recovery mode. A history needs at most
/// four (decision, classification, restoration read and mark, release and leave);
/// the rest is margin, so a dead end shows as a failure, not a slow test.
const ROUNDS: usize = 8;
/// The controller instance recovery-mode entry names (the recovery start).
const RECOVERY_START: u128 = 0xe0;
/// The controller instance of the normal restart after the entry.
const RESTART: u128 = 0xf1;

// ---------------------------------------------------------------------------------
// Histories.

/// What the node does with the next apply it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// Lands it and answers.
    Accept,
    /// Lands it and drops the connection before answering.
    LoseAfterLanding,
    /// Refuses it as invalid, changing nothing.
    Invalid,
    /// Answers unavailable, changing nothing.
    Unavailable,
}

/// One act of the history before the restore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// A new release is published, a plan for it approved, and a fresh controller
    /// instance runs it, stopping for good at `stop` (or running to its end).
    Run {
        stop: Option<Interruption>,
        answer: Answer,
    },
    /// A fresh controller instance starts: it takes over every open operation and
    /// resumes it (and may send).
    Start { answer: Answer },
    /// Time passes: past the transport deadline and a settle floor.
    Wait,
    /// Someone changes the node's configuration behind the store.
    Drift,
    /// The database backup is taken (the first one counts).
    Backup,
}

/// A generated history.
#[derive(Debug, Clone)]
struct History {
    steps: Vec<Step>,
    /// Whether the database is restored to the backup before the entry.
    restore: bool,
}

fn answer() -> impl Strategy<Value = Answer> {
    prop_oneof![
        3 => Just(Answer::Accept),
        1 => Just(Answer::LoseAfterLanding),
        1 => Just(Answer::Invalid),
        1 => Just(Answer::Unavailable),
    ]
}

fn stop() -> impl Strategy<Value = Option<Interruption>> {
    prop_oneof![
        1 => Just(None),
        5 => proptest::sample::select(Interruption::ALL.to_vec()).prop_map(Some),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (stop(), answer()).prop_map(|(stop, answer)| Step::Run { stop, answer }),
        2 => answer().prop_map(|answer| Step::Start { answer }),
        2 => Just(Step::Wait),
        1 => Just(Step::Drift),
        2 => Just(Step::Backup),
    ]
}

fn history() -> impl Strategy<Value = History> {
    (proptest::collection::vec(step(), 1..6), any::<bool>())
        .prop_map(|(steps, restore)| History { steps, restore })
}

// ---------------------------------------------------------------------------------
// The site: one node, a keyring and a connector shared by every history of a run,
// and a fresh database per history.

/// Where the histories' database lives: one per run, brought back to a template (the
/// machine imported and adopted) before each history, with the history's backup.
enum Database {
    Sqlite {
        dir: tempfile::TempDir,
        /// The store last opened, closed before its file is copied.
        open: Mutex<Option<Arc<SqliteStore>>>,
    },
    Postgres {
        url: String,
        options: Box<PgConnectOptions>,
        schema: pg_support::Schema,
        /// The store last opened, closed before its tables are copied.
        open: Mutex<Option<Arc<PgStore>>>,
        /// Whether the template was saved.
        templated: AtomicBool,
    },
}

impl Database {
    async fn open(&self, clock: &ManualClock) -> Arc<dyn Store> {
        let settings = Settings {
            clock: Some(clock.clone()),
            ..Settings::default()
        };
        match self {
            Self::Sqlite { dir, open } => {
                let store = Arc::new(
                    SqliteStore::open_for_tests(Some(&dir.path().join("store.db")), settings)
                        .await
                        .expect("sqlite store"),
                );
                *open.lock().expect("lock") = Some(store.clone());
                store
            }
            Self::Postgres { options, open, .. } => {
                let store = Arc::new(
                    PgStore::connect_for_tests((**options).clone(), 2, settings)
                        .await
                        .expect("postgres store"),
                );
                *open.lock().expect("lock") = Some(store.clone());
                store
            }
        }
    }

    /// Closes the store last opened, so that its database holds every write and no
    /// connection of it is left.
    async fn close(&self) {
        match self {
            Self::Sqlite { open, .. } => {
                let store = open.lock().expect("lock").take();
                if let Some(store) = store {
                    store.pool().close().await;
                }
            }
            Self::Postgres { open, .. } => {
                let store = open.lock().expect("lock").take();
                if let Some(store) = store {
                    store.pool().close().await;
                }
            }
        }
    }

    /// Copies the database to `copy` (`template` or `backup`); the store is closed
    /// for the copy and opened again.
    async fn save(&self, store: Arc<dyn Store>, copy: &str, clock: &ManualClock) -> Arc<dyn Store> {
        drop(store);
        self.close().await;
        match self {
            Self::Sqlite { dir, .. } => copy_sqlite(
                &dir.path().join("store.db"),
                &dir.path().join(format!("{copy}.db")),
            ),
            Self::Postgres {
                url,
                schema,
                templated,
                ..
            } => {
                pg_copy(url, schema.name(), copy, PgCopy::Take).await;
                if copy == "template" {
                    templated.store(true, Ordering::Relaxed);
                }
            }
        }
        self.open(clock).await
    }

    /// Brings the database back to `copy`; returns the store opened on it.
    async fn bring_back(
        &self,
        store: Option<Arc<dyn Store>>,
        copy: &str,
        clock: &ManualClock,
    ) -> Arc<dyn Store> {
        drop(store);
        self.close().await;
        match self {
            Self::Sqlite { dir, .. } => copy_sqlite(
                &dir.path().join(format!("{copy}.db")),
                &dir.path().join("store.db"),
            ),
            Self::Postgres { url, schema, .. } => {
                pg_copy(url, schema.name(), copy, PgCopy::Restore).await;
            }
        }
        self.open(clock).await
    }

    /// Whether a template was saved.
    fn has_template(&self) -> bool {
        match self {
            Self::Sqlite { dir, .. } => dir.path().join("template.db").exists(),
            Self::Postgres { templated, .. } => templated.load(Ordering::Relaxed),
        }
    }
}

/// Copies a closed SQLite database file, dropping the target's journal files.
fn copy_sqlite(from: &std::path::Path, to: &std::path::Path) {
    for suffix in ["-wal", "-shm"] {
        let mut journal = to.as_os_str().to_owned();
        journal.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(journal));
    }
    std::fs::copy(from, to).expect("copy the database file");
}

#[derive(Clone, Copy)]
enum PgCopy {
    Take,
    Restore,
}

/// A copy of every table of `schema` into schema `<schema>_<name>`, or its restore
/// (with triggers and foreign keys off while the rows go back).
async fn pg_copy(url: &str, schema: &str, name: &str, copy: PgCopy) {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .expect("admin connection");
    let backup = format!("{schema}_{name}");
    let tables: Vec<(String,)> = sqlx::query_as(
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_schema = $1 AND table_type = 'BASE TABLE'",
    )
    .bind(schema)
    .fetch_all(&pool)
    .await
    .expect("tables");
    let mut conn = pool.acquire().await.expect("connection");
    let run = |sql: String| sqlx::AssertSqlSafe(sql);
    match copy {
        PgCopy::Take => {
            sqlx::query(run(format!("DROP SCHEMA IF EXISTS {backup} CASCADE")))
                .execute(&mut *conn)
                .await
                .expect("drop old backup");
            sqlx::query(run(format!("CREATE SCHEMA {backup}")))
                .execute(&mut *conn)
                .await
                .expect("backup schema");
            for (t,) in &tables {
                sqlx::query(run(format!(
                    "CREATE TABLE {backup}.{t} AS TABLE {schema}.{t}"
                )))
                .execute(&mut *conn)
                .await
                .expect("copy a table");
            }
        }
        PgCopy::Restore => {
            sqlx::query("SET session_replication_role = replica")
                .execute(&mut *conn)
                .await
                .expect("replica role");
            for (t,) in &tables {
                sqlx::query(run(format!("DELETE FROM {schema}.{t}")))
                    .execute(&mut *conn)
                    .await
                    .expect("empty a table");
                sqlx::query(run(format!(
                    "INSERT INTO {schema}.{t} SELECT * FROM {backup}.{t}"
                )))
                .execute(&mut *conn)
                .await
                .expect("restore a table");
            }
        }
    }
    drop(conn);
    pool.close().await;
}

/// Drops the template and backup schemas of `schema`.
async fn pg_drop_copies(url: &str, schema: &str) {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .expect("admin connection");
    for copy in ["template", "backup"] {
        let sql = sqlx::AssertSqlSafe(format!("DROP SCHEMA IF EXISTS {schema}_{copy} CASCADE"));
        sqlx::query(sql).execute(&pool).await.expect("drop a copy");
    }
    pool.close().await;
}

/// What the histories of a run left open at their entries, counted so the run
/// shows it reached each case.
#[derive(Default)]
struct Seen {
    restored_from_backup: AtomicUsize,
    with_attempt: AtomicUsize,
    without_attempt: AtomicUsize,
    none_open: AtomicUsize,
}

impl Seen {
    fn note(&self, from_backup: bool, open: &[infra_talos::store::OperationView]) {
        if from_backup {
            self.restored_from_backup.fetch_add(1, Ordering::Relaxed);
        }
        let counter = match open.iter().map(|o| o.attempts).max() {
            None => &self.none_open,
            Some(0) => &self.without_attempt,
            Some(_) => &self.with_attempt,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

impl std::fmt::Display for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = |c: &AtomicUsize| c.load(Ordering::Relaxed);
        write!(
            f,
            "{} restored from a backup; at the entry an open operation with an attempt in {}, \
             one with none in {}, nothing open in {}",
            n(&self.restored_from_backup),
            n(&self.with_attempt),
            n(&self.without_attempt),
            n(&self.none_open),
        )
    }
}

/// What every history of one run shares.
struct Site {
    seen: Seen,
    clock: ManualClock,
    sim: Arc<TalosSim>,
    keyring: Arc<LocalKeyring>,
    connector: Arc<TalosconfigConnector>,
    releases: AtomicUsize,
    _dir: tempfile::TempDir,
}

impl Site {
    async fn new() -> Site {
        let clock = ManualClock::starting_at(T0);
        let sim = TalosSim::builder()
            .facts(node_facts())
            .clock(Arc::new(LinkedClock(clock.clone())) as Arc<dyn Clock>)
            .start()
            .await
            .expect("simulator");
        let dir = tempfile::tempdir().expect("dir");
        let keyring = Arc::new(LocalKeyring::open(dir.path().join("keys")).expect("keyring"));
        keyring.create_key("artifacts").expect("key");
        let path = sim
            .write_talosconfig(dir.path(), &sim.pki().admin_client().expect("client"))
            .expect("talosconfig");
        let connector = TalosconfigConnector::load(&path, connect_options()).expect("talosconfig");
        connector.add_machine(
            MACHINE,
            MachineRoute {
                endpoint: NodeAddress::parse(&sim.node_address()).expect("address"),
            },
        );
        Site {
            seen: Seen::default(),
            clock,
            sim: Arc::new(sim),
            keyring,
            connector: Arc::new(connector),
            releases: AtomicUsize::new(0),
            _dir: dir,
        }
    }

    fn executor(&self, store: &Arc<dyn Store>, id: u128) -> Executor {
        Executor::new(
            ControllerId(id),
            store.clone(),
            self.connector.clone(),
            self.keyring.clone() as Arc<dyn KeyProvider>,
            Arc::new(LinkedClock(self.clock.clone())),
            ExecutorSettings {
                settle_floor: FLOOR,
                max_transport_deadline: DEFAULT_MAX_TRANSPORT_DEADLINE,
            },
        )
        .expect("executor")
    }

    fn applies(&self) -> usize {
        self.sim.apply_requests().len()
    }

    /// The node as before any history, and a fresh store that imported and adopted it.
    async fn fresh(&self, db: &Database) -> Arc<dyn Store> {
        self.sim.clear_faults();
        self.sim.release_held();
        self.sim.set_facts(node_facts());
        if db.has_template() {
            return db.bring_back(None, "template", &self.clock).await;
        }
        let store = db.open(&self.clock).await;
        register_people(store.as_ref()).await;
        let facts = self.sim.facts();
        store
            .create_machine(
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
        self.publish(store.as_ref()).await;
        let expires = self.clock.now().plus(SpanMs::from_secs(3600));
        hand_over_with(
            store.as_ref(),
            &self.executor(&store, HANDOVER),
            MACHINE,
            expires,
        )
        .await;
        db.save(store, "template", &self.clock).await
    }

    /// Publishes a new release for the machine; returns its name.
    async fn publish(&self, store: &dyn Store) -> String {
        let release = format!("rel-{}", self.releases.fetch_add(1, Ordering::Relaxed));
        let sealed = self
            .keyring
            .seal("artifacts", &artifact(&release))
            .await
            .expect("seal");
        store
            .publish_sealed_release(
                &publisher(),
                SealedReleaseSpec {
                    id: release.clone(),
                    artifacts: vec![(MACHINE.into(), sealed)],
                    contributions: vec![("ann".into(), ContributionKind::Authored)],
                },
            )
            .await
            .expect("publish");
        release
    }

    /// A new release and an approved plan for it, a revert while a drift record is
    /// open (§6.4); `None` when the store refused the plan or its approval (an open
    /// operation holds the scope, say).
    async fn approved_plan(&self, store: &dyn Store) -> Option<String> {
        let revert = store.machine(MACHINE).await.ok()?.open_drift.is_some();
        let release = self.publish(store).await;
        let plan = format!("p-{release}");
        store
            .create_plan(
                &publisher(),
                PlanSpec {
                    id: plan.clone(),
                    machine: MACHINE.into(),
                    release,
                    expires_at: self.clock.now().plus(SpanMs::from_secs(3600)),
                    max_evidence_age: SpanMs::from_secs(60),
                    transport_deadline: TRANSPORT,
                    verification_deadline: SpanMs::from_secs(60),
                    max_attempts: 3,
                    revert,
                },
            )
            .await
            .ok()?;
        store.approve(&approver(), &plan).await.ok()?;
        Some(plan)
    }

    fn arm(&self, answer: Answer) {
        self.sim.clear_faults();
        match answer {
            Answer::Accept => {}
            Answer::LoseAfterLanding => self.sim.fail_next_apply(ApplyFault::LoseResponse),
            Answer::Invalid => self
                .sim
                .fail_next_apply(ApplyFault::InvalidArgument("invalid config".into())),
            Answer::Unavailable => self.sim.fail_next_apply(ApplyFault::Unavailable),
        }
    }
}

/// A hook that stops the controller for good at `at`, telling `reached`.
fn stop_at(at: Interruption, reached: Arc<Notify>) -> InterruptionHook {
    Arc::new(move |point| {
        let reached = reached.clone();
        Box::pin(async move {
            if point == at {
                reached.notify_one();
                std::future::pending::<()>().await;
            }
        })
    })
}

// ---------------------------------------------------------------------------------
// One history.

/// Plays the steps before the restore; returns the store and whether a backup was
/// taken.
async fn play(
    site: &Site,
    db: &Database,
    mut store: Arc<dyn Store>,
    steps: &[Step],
) -> (Arc<dyn Store>, bool) {
    let mut backed_up = false;
    let mut next_id: u128 = 0x100;
    let mut running = Vec::new();
    for step in steps {
        next_id += 1;
        match *step {
            Step::Run { stop, answer } => {
                let Some(plan) = site.approved_plan(store.as_ref()).await else {
                    continue;
                };
                site.arm(answer);
                let mut executor = site.executor(&store, next_id);
                let reached = Arc::new(Notify::new());
                if let Some(at) = stop {
                    executor = executor.with_interruptions(stop_at(at, reached.clone()));
                }
                let mut task = tokio::spawn(async move { executor.run_plan(&plan).await });
                // The run ends, or stops for good at its interruption point.
                tokio::select! {
                    _ = &mut task => {}
                    () = reached.notified() => running.push(task),
                }
            }
            Step::Start { answer } => {
                site.arm(answer);
                // A refusal or unreachable node ends the start; nothing to keep.
                let _ = site.executor(&store, next_id).start().await;
            }
            Step::Wait => site.clock.advance(SpanMs(TRANSPORT.0 + FLOOR.0 + 1000)),
            Step::Drift => site.sim.drift_config(format!(
                "{}# changed by hand {next_id}\n",
                String::from_utf8_lossy(&base_config())
            )),
            Step::Backup if !backed_up => {
                for task in running.drain(..) {
                    task.abort();
                }
                store = db.save(store, "backup", &site.clock).await;
                backed_up = true;
            }
            Step::Backup => {}
        }
    }
    // Every instance stops before the restore (§7.2).
    for task in running {
        task.abort();
    }
    site.sim.clear_faults();
    (store, backed_up)
}

/// The documented acts, in rounds, until recovery mode is left. Returns the rounds
/// taken, or the failure with what each round saw.
async fn recover(site: &Site, store: &Arc<dyn Store>) -> Result<usize, String> {
    let restart = site.executor(store, RESTART);
    let mut seen = Vec::new();
    for round in 0..ROUNDS {
        let scope = store
            .machine(MACHINE)
            .await
            .map_err(|e| e.to_string())?
            .scope;
        if scope == ScopeState::Normal {
            return Ok(round);
        }
        site.clock
            .advance(SpanMs(DEFAULT_MAX_TRANSPORT_DEADLINE.0 + FLOOR.0 + 1000));
        let pass = restart.recovery_pass().await.map_err(|e| e.to_string())?;
        let mut line = format!(
            "round {round}: scope {scope}; pass {:?}",
            pass.steps.iter().map(|s| &s.action).collect::<Vec<_>>()
        );
        if scope == ScopeState::PreRestoreUnaccounted {
            let decided = store
                .account_scopes(
                    &admin(),
                    ScopeAccounting {
                        machines: vec![MACHINE.into()],
                        settle_floor: FLOOR,
                        explanation: None,
                    },
                )
                .await;
            line += &format!("; decision {}", refusal(decided)?);
        }
        let started = restart.start().await.map_err(|e| e.to_string())?;
        line += &format!(
            "; start {:?}",
            started
                .iter()
                .map(|o| (o.operation.clone(), o.state))
                .collect::<Vec<_>>()
        );
        if store
            .machine(MACHINE)
            .await
            .map_err(|e| e.to_string())?
            .scope
            != ScopeState::PreRestoreUnaccounted
        {
            let marked = store.mark_scope(&admin(), MACHINE, None).await;
            line += &format!("; mark {}", refusal(marked.map(|s| s.to_string()))?);
            let released = store.release_scope(&admin(), MACHINE).await;
            line += &format!("; release {}", refusal(released)?);
            let left = store.leave_recovery(&admin()).await;
            line += &format!("; leave {}", refusal(left)?);
        }
        seen.push(line);
    }
    let scope = store
        .machine(MACHINE)
        .await
        .map_err(|e| e.to_string())?
        .scope;
    if scope == ScopeState::Normal {
        return Ok(ROUNDS);
    }
    let open: Vec<String> = store
        .operations_of(MACHINE)
        .await
        .map_err(|e| e.to_string())?
        .iter()
        .map(|o| format!("{} {} ({} attempts)", o.id, o.state, o.attempts))
        .collect();
    Err(format!(
        "recovery mode never ended after {ROUNDS} rounds (scope {scope}; operations {open:?}):\n{}",
        seen.join("\n")
    ))
}

/// A store refusal as text for the round's line; any other error ends the history.
fn refusal<T: std::fmt::Debug>(r: Result<T, StoreError>) -> Result<String, String> {
    match r {
        Ok(v) => Ok(format!("ok {v:?}")),
        Err(e @ (StoreError::Refused { .. } | StoreError::AccountingRefused { .. })) => {
            Ok(format!("refused ({e})"))
        }
        Err(e) => Err(format!("a store failure, not a refusal: {e}")),
    }
}

/// How each operation open at the entry ended: exactly one move to a terminal state
/// after the entry, never rejected, never a retry.
async fn check_restored(
    store: &Arc<dyn Store>,
    restored: &[String],
    entry: Revision,
) -> Result<(), String> {
    let timeline = store.timeline(MACHINE).await.map_err(|e| e.to_string())?;
    for op in restored {
        let view = store.operation(op).await.map_err(|e| e.to_string())?;
        if !view.state.is_terminal() || view.state == OperationState::Rejected {
            return Err(format!("restored operation {op} ended {}", view.state));
        }
        let mine: Vec<_> = timeline
            .iter()
            .filter(|e| e.revision > entry && e.operation.as_deref() == Some(op))
            .collect();
        let terminal = mine
            .iter()
            .filter(|e| {
                (e.kind == "state_changed" && {
                    let to = e.detail.rsplit(' ').next().unwrap_or_default();
                    ["completed", "failed", "cancelled", "rejected"].contains(&to)
                }) || e.kind == "cancelled"
            })
            .count();
        if terminal != 1 {
            return Err(format!(
                "restored operation {op} moved to a terminal state {terminal} times: {mine:?}"
            ));
        }
        if let Some(e) = mine
            .iter()
            .find(|e| e.kind == "classification" && e.detail.starts_with("safe to retry"))
        {
            return Err(format!(
                "restored operation {op} was found safe to retry: {e:?}"
            ));
        }
        if mine.iter().any(|e| e.kind == "attempt") {
            return Err(format!(
                "restored operation {op} made an attempt after the entry"
            ));
        }
    }
    Ok(())
}

/// One history, end to end.
async fn run_history(site: &Site, db: &Database, h: &History) -> Result<(), String> {
    let store = site.fresh(db).await;
    let (store, backed_up) = play(site, db, store, &h.steps).await;
    let store = if h.restore && backed_up {
        db.bring_back(Some(store), "backup", &site.clock).await
    } else {
        store
    };
    store
        .enter_recovery(
            &admin(),
            entry_now(store.as_ref(), ControllerId(RECOVERY_START)).await,
        )
        .await
        .map_err(|e| format!("entry: {e}"))?;
    let entry = store
        .timeline(MACHINE)
        .await
        .map_err(|e| e.to_string())?
        .iter()
        .rev()
        .find(|e| e.kind == "recovery_entry")
        .map(|e| e.revision)
        .ok_or("no entry on the timeline")?;
    let open = store.open_operations().await.map_err(|e| e.to_string())?;
    site.seen.note(h.restore && backed_up, &open);
    let restored: Vec<String> = open.into_iter().map(|o| o.id).collect();
    let sent_at_entry = site.applies();
    recover(site, &store).await?;
    if site.applies() != sent_at_entry {
        return Err(format!(
            "{} apply request(s) reached the node during recovery mode",
            site.applies() - sent_at_entry
        ));
    }
    check_restored(&store, &restored, entry).await?;
    // Left for good: a new plan completes with exactly one request.
    let plan = site
        .approved_plan(store.as_ref())
        .await
        .ok_or("no plan could be made and approved after leaving recovery mode")?;
    let outcome = site
        .executor(&store, RESTART)
        .run_plan(&plan)
        .await
        .map_err(|e| format!("the plan after recovery: {e}"))?;
    if outcome.state != OperationState::Completed || site.applies() != sent_at_entry + 1 {
        return Err(format!(
            "the plan after recovery ended {} with {} request(s)",
            outcome.state,
            site.applies() - sent_at_entry
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// The runs.

/// A directory for a history's SQLite files: in memory-backed `/dev/shm` where there
/// is one (the property writes thousands of small databases), else the temporary
/// directory.
fn scratch_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = tempfile::tempdir_in(shm)
    {
        return dir;
    }
    tempfile::tempdir().expect("dir")
}

/// The histories of one run: `PROPTEST_CASES` when set, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        max_shrink_iters: 200,
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel(
            "proptest-regressions",
        ))),
        ..Config::default()
    })
}

fn run_property(name: &str, cases: u32, make: impl FnOnce(&tokio::runtime::Runtime) -> Database) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let site = rt.block_on(Site::new());
    let db = make(&rt);
    let count = AtomicUsize::new(0);
    let result = runner(self::cases(cases)).run(&history(), |h| {
        count.fetch_add(1, Ordering::Relaxed);
        rt.block_on(run_history(&site, &db, &h))
            .map_err(TestCaseError::fail)
    });
    // Written past the test harness's capture, so that CI's log shows the count.
    let _ = writeln!(
        std::io::stderr(),
        "recovery liveness histories: {} ({name}; {})",
        count.load(Ordering::Relaxed),
        site.seen
    );
    rt.block_on(db.close());
    if let Database::Postgres { url, schema, .. } = &db {
        rt.block_on(pg_drop_copies(url, schema.name()));
    }
    drop(db);
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    if let Ok(sim) = Arc::try_unwrap(site.sim) {
        rt.block_on(sim.shutdown()).expect("simulator stops");
    }
}

#[test]
fn recovery_mode_always_ends_on_sqlite() {
    run_property("sqlite", SQLITE_CASES, |_| Database::Sqlite {
        dir: scratch_dir(),
        open: Mutex::new(None),
    });
}

#[test]
fn recovery_mode_always_ends_on_postgres() {
    let Some(url) = pg_support::database_url("recovery liveness property") else {
        return;
    };
    run_property("postgres", POSTGRES_CASES, |rt| {
        let (schema, options) = rt.block_on(pg_support::schema(&url, "liveness"));
        Database::Postgres {
            url: url.clone(),
            options: Box::new(options),
            schema,
            open: Mutex::new(None),
            templated: AtomicBool::new(false),
        }
    });
}
