//! Recovery after a real restore of the store on PostgreSQL (§7): a backup is taken
//! with `pg_dump` while an operation is committed and not yet attempted; the world
//! moves on (that operation's request and a later plan's both land on the nodes);
//! the schema is dropped and brought back with `pg_restore`. Then:
//!
//! - the old controller instance, holding its pre-restore owner token, is refused
//!   at its attempt once recovery mode is entered (a new epoch);
//! - the new epoch's controller reads each scope (recovery observations paced from
//!   the entry), recovery-admin accounts for every scope in one decision, the
//!   restoration observations find both nodes changed behind the restored state,
//!   and the marks open the drift records;
//! - nothing reaches either node from the entry until its scope is released, and a
//!   revert plan runs only after the release.
//!
//! With the command line (feature `cli`), the trust root across the same kind of
//! restore: a revoked subject stays refused by the command line and the service,
//! through the denied-subject list the restore does not touch.
//!
//! Set `INFRA_TEST_DATABASE_URL` to run it; without it it prints a skip line, and
//! fails when `CI=true`. `pg_dump` and `pg_restore` are the newest installed
//! PostgreSQL's, else those on `PATH`.

#[cfg(feature = "cli")]
mod cli_support;
mod controller_common;
mod pg_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use controller_common::*;
use infra_core::engine::Clock;
use infra_talos::contract::SpanMs;
use infra_talos::contract::evidence::ObservationPurpose;
use infra_talos::contract::operation::{ControllerId, OperationState, OwnerToken};
use infra_talos::contract::recovery::{BlockedOn, ScopeState};
use infra_talos::controller::{
    ConnectorMap, Executor, ExecutorSettings, Interruption, InterruptionHook, MachineRoute,
    RecoveryAction, TalosconfigConnector,
};
use infra_talos::keys::{KeyProvider, LocalKeyring};
use infra_talos::store::postgres::PgStore;
use infra_talos::store::{
    ContributionKind, DEFAULT_MAX_TRANSPORT_DEADLINE, IdentityKey, MachineSpec, PlanSpec,
    ScopeAccounting, SealedReleaseSpec, Settings, Store, StoreError,
};
use infra_talos::{NodeAddress, config_digest};
use infra_testkit::talos::TalosSim;
use sqlx::postgres::PgConnectOptions;

const M2: &str = "m2";

/// A program of the PostgreSQL client tools: from the newest
/// `/usr/lib/postgresql/*/bin` (the server's own, so never older than it), else
/// from `PATH`.
fn pg_tool(name: &str) -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    versions.sort_by_key(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(0)
    });
    if let Some(path) = versions.last().map(|v| v.join("bin").join(name))
        && path.is_file()
    {
        return path;
    }
    std::env::var("PATH")
        .ok()
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|candidate| candidate.is_file())
        })
        .unwrap_or_else(|| panic!("{name} is neither under /usr/lib/postgresql/*/bin nor on PATH"))
}

fn run_tool(name: &str, args: &[&str]) {
    let out = Command::new(pg_tool(name))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{name} did not start: {e}"));
    assert!(
        out.status.success(),
        "{name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The two nodes, the keyring and the talosconfigs, which outlive any store.
struct Site {
    sims: [Arc<TalosSim>; 2],
    keyring: Arc<LocalKeyring>,
    connector: Arc<ConnectorMap>,
    clock: infra_talos::store::ManualClock,
    dir: tempfile::TempDir,
}

impl Site {
    async fn new() -> Site {
        let clock = infra_talos::store::ManualClock::starting_at(T0);
        let dir = tempfile::tempdir().expect("dir");
        let keyring = Arc::new(LocalKeyring::open(dir.path().join("keys")).expect("keyring"));
        keyring.create_key("artifacts").expect("key");
        let connector = Arc::new(ConnectorMap::default());
        let mut sims = Vec::new();
        for (i, machine) in [MACHINE, M2].into_iter().enumerate() {
            let mut facts = node_facts();
            facts.smbios_uuid = format!("{}-{i}", facts.smbios_uuid);
            let sim = TalosSim::builder()
                .facts(facts)
                .clock(Arc::new(LinkedClock(clock.clone())) as Arc<dyn Clock>)
                .start()
                .await
                .expect("simulator");
            let folder = dir.path().join(machine);
            std::fs::create_dir_all(&folder).expect("folder");
            let path = sim
                .write_talosconfig(&folder, &sim.pki().admin_client().expect("client"))
                .expect("talosconfig");
            let one = TalosconfigConnector::load(&path, connect_options()).expect("talosconfig");
            one.add_machine(
                machine,
                MachineRoute {
                    endpoint: NodeAddress::parse(&sim.node_address()).expect("address"),
                },
            );
            connector.insert(machine, Arc::new(one));
            sims.push(Arc::new(sim));
        }
        let [first, second] = <[Arc<TalosSim>; 2]>::try_from(sims).expect("two nodes");
        Site {
            sims: [first, second],
            keyring,
            connector,
            clock,
            dir,
        }
    }

    async fn store(&self, options: &PgConnectOptions) -> Arc<PgStore> {
        let settings = Settings {
            clock: Some(self.clock.clone()),
            ..Settings::default()
        };
        Arc::new(
            PgStore::connect_for_tests(options.clone(), 4, settings)
                .await
                .expect("store"),
        )
    }

    fn executor(&self, store: &Arc<PgStore>, id: u128) -> Executor {
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

    fn applies(&self) -> [usize; 2] {
        [
            self.sims[0].apply_requests().len(),
            self.sims[1].apply_requests().len(),
        ]
    }

    async fn inventory(&self, s: &Arc<PgStore>) {
        register_people(s.as_ref()).await;
        for (machine, sim) in [MACHINE, M2].into_iter().zip(&self.sims) {
            let facts = sim.facts();
            s.create_machine(
                &author(),
                MachineSpec {
                    id: machine.into(),
                    identity: IdentityKey::SmbiosUuid(facts.smbios_uuid.clone()),
                    cluster_id: facts.cluster_id.clone(),
                    endpoint: sim.node_address(),
                    rollout_scope: format!("{machine}-slot"),
                    talos_minor: "1.13".into(),
                    import_digest: Some(config_digest(&facts.config)),
                },
            )
            .await
            .expect("machine");
        }
        self.publish(s, "rel-0", &[MACHINE, M2]).await;
        let handover = self.executor(s, HANDOVER);
        for machine in [MACHINE, M2] {
            let expires = self.clock.now().plus(SpanMs::from_secs(3600));
            hand_over_with(s.as_ref(), &handover, machine, expires).await;
        }
    }

    async fn publish(&self, s: &PgStore, release: &str, machines: &[&str]) {
        let mut artifacts = Vec::new();
        for m in machines {
            let sealed = self
                .keyring
                .seal("artifacts", &artifact(release))
                .await
                .expect("seal");
            artifacts.push(((*m).to_owned(), sealed));
        }
        s.publish_sealed_release(
            &publisher(),
            SealedReleaseSpec {
                id: release.into(),
                artifacts,
                contributions: vec![("ann".into(), ContributionKind::Authored)],
            },
        )
        .await
        .expect("publish");
    }

    async fn approved(&self, s: &PgStore, plan: &str, machine: &str, release: &str, revert: bool) {
        s.create_plan(
            &publisher(),
            PlanSpec {
                id: plan.into(),
                machine: machine.into(),
                release: release.into(),
                expires_at: self.clock.now().plus(SpanMs::from_secs(3600)),
                max_evidence_age: SpanMs::from_secs(60),
                transport_deadline: TRANSPORT,
                verification_deadline: SpanMs::from_secs(60),
                max_attempts: 3,
                revert,
            },
        )
        .await
        .expect("plan");
        s.approve(&approver(), plan).await.expect("approve");
    }
}

/// Runs `plan` until its commitment, then stops the controller for good; returns
/// the operation and the owner token the stopped instance held.
async fn committed_then_stopped(
    site: &Site,
    store: &Arc<PgStore>,
    id: u128,
    plan: &str,
) -> (String, OwnerToken) {
    let hook: InterruptionHook = Arc::new(|point| {
        Box::pin(async move {
            if point == Interruption::Committed {
                std::future::pending::<()>().await;
            }
        })
    });
    let executor = site.executor(store, id).with_interruptions(hook);
    let name = plan.to_owned();
    let running = tokio::spawn(async move { executor.run_plan(&name).await });
    let operation = loop {
        if let Some(op) = store.plan(plan).await.expect("plan").operation {
            break op;
        }
        tokio::task::yield_now().await;
    };
    running.abort();
    let owner = store.operation(&operation).await.expect("operation").owner;
    (operation, owner)
}

fn dump(url: &str, schema: &str, file: &Path) {
    let file = file.to_str().expect("path");
    run_tool(
        "pg_dump",
        &[
            "--format=custom",
            "--no-owner",
            "--schema",
            schema,
            "--file",
            file,
            "--dbname",
            url,
        ],
    );
}

async fn restore(url: &str, schema: &str, file: &Path) {
    let admin = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .expect("admin connection");
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&admin)
        .await
        .expect("drop the damaged schema");
    admin.close().await;
    let file = file.to_str().expect("path");
    run_tool(
        "pg_restore",
        &["--no-owner", "--exit-on-error", "--dbname", url, file],
    );
}

async fn kinds(s: &PgStore, machine: &str) -> Vec<String> {
    s.timeline(machine)
        .await
        .expect("timeline")
        .into_iter()
        .map(|e| e.kind)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_store_accounts_every_scope_before_anything_is_sent() {
    let Some(url) = pg_support::database_url("restore test") else {
        return;
    };
    let (schema, options) = pg_support::schema(&url, "restore").await;
    let site = Site::new().await;
    let store = site.store(&options).await;
    site.inventory(&store).await;

    // Before the backup: m1 runs rel-1; m2's plan is committed and its controller
    // stops before the attempt.
    site.publish(&store, "rel-1", &[MACHINE, M2]).await;
    site.approved(&store, "p1", MACHINE, "rel-1", false).await;
    site.approved(&store, "p2", M2, "rel-1", false).await;
    let old = site.executor(&store, A);
    let done = old.run_plan("p1").await.expect("p1");
    assert_eq!(done.state, OperationState::Completed);
    let (op2, old_token) = committed_then_stopped(&site, &store, A, "p2").await;
    assert_eq!(site.applies(), [1, 0]);

    let backup = site.dir.path().join("store.dump");
    dump(&url, schema.name(), &backup);

    // The world moves on: m2's operation is resumed and lands, and a later release
    // lands on m1. The backup holds neither.
    let resumed = old.resume(&op2).await.expect("resume p2");
    assert_eq!(resumed.state, OperationState::Completed);
    site.publish(&store, "rel-2", &[MACHINE]).await;
    site.approved(&store, "p3", MACHINE, "rel-2", false).await;
    assert_eq!(
        old.run_plan("p3").await.expect("p3").state,
        OperationState::Completed
    );
    assert_eq!(site.applies(), [2, 1]);
    assert_eq!(site.sims[0].config(), artifact("rel-2"));
    assert_eq!(site.sims[1].config(), artifact("rel-1"));
    store.pool().close().await;
    drop(old);

    // The store is lost and restored from the backup, which took a while.
    restore(&url, schema.name(), &backup).await;
    site.clock.advance(SpanMs::from_secs(600));
    let store = site.store(&options).await;
    assert_eq!(
        store.operation(&op2).await.expect("restored op").state,
        OperationState::Committed,
        "the restored store holds the operation as it was at the backup"
    );
    assert_eq!(
        store
            .plan("p3")
            .await
            .expect_err("p3 is after the backup")
            .to_string(),
        StoreError::NotFound {
            what: "plan",
            id: "p3".into()
        }
        .to_string()
    );

    // recovery-admin enters recovery mode; the new controller instance is R.
    const R: u128 = 0xc3;
    let old_epoch = store.current_epoch().await.expect("epoch");
    store
        .enter_recovery(&admin(), entry_now(store.as_ref(), ControllerId(R)).await)
        .await
        .expect("entry");
    assert_ne!(store.current_epoch().await.expect("epoch"), old_epoch);
    for m in [MACHINE, M2] {
        assert_eq!(
            store.machine(m).await.expect("machine").scope,
            ScopeState::PreRestoreUnaccounted
        );
    }

    // The old instance, reconnected with the token it held before the restore, is
    // refused at its attempt and sends nothing.
    let stale = site.store(&options).await;
    let refused = stale
        .attempt(&op2, old_token)
        .await
        .expect_err("an attempt under the old epoch");
    // Comparison 1 comes first: the approval belongs to the epoch the entry ended.
    let text = refused.to_string();
    assert!(
        text.starts_with("attempt refused by comparison 1: ")
            && text.contains("not in the current recovery epoch"),
        "{text}"
    );
    let old_again = site.executor(&stale, A);
    assert!(
        old_again.start().await.expect("start").is_empty(),
        "the old instance resumes nothing on an unreleased scope"
    );

    // The new epoch's controller reads each scope as §7.3 step 1 paces it.
    let fresh = site.executor(&store, R);
    let pass = fresh.recovery_pass().await.expect("pass");
    assert!(
        pass.steps
            .iter()
            .all(|s| matches!(s.action, RecoveryAction::NotDue { .. })),
        "{pass:?}"
    );
    site.clock
        .advance(SpanMs(DEFAULT_MAX_TRANSPORT_DEADLINE.0 + 1000));
    fresh.recovery_pass().await.expect("pass");
    site.clock.advance(FLOOR);
    let pass = fresh.recovery_pass().await.expect("pass");
    assert!(
        pass.steps
            .iter()
            .all(|s| matches!(s.action, RecoveryAction::RecoveryObserved { .. })),
        "{pass:?}"
    );
    // One decision accounts for every scope; the restored operation with no attempt
    // ends cancelled.
    store
        .account_scopes(
            &admin(),
            ScopeAccounting {
                machines: vec![MACHINE.into(), M2.into()],
                settle_floor: FLOOR,
                explanation: Some("the nodes applied releases after the backup".into()),
            },
        )
        .await
        .expect("the step 1 decision");
    assert_eq!(
        store.operation(&op2).await.expect("op2").state,
        OperationState::Cancelled
    );
    for m in [MACHINE, M2] {
        assert_eq!(
            store.machine(m).await.expect("machine").scope,
            ScopeState::Blocked(BlockedOn::AwaitingMark)
        );
    }

    // Nothing is sent before a release: a new plan for m1 is not even made.
    let refused = store
        .create_plan(
            &publisher(),
            PlanSpec {
                id: "p4".into(),
                machine: MACHINE.into(),
                release: "rel-1".into(),
                expires_at: site.clock.now().plus(SpanMs::from_secs(3600)),
                max_evidence_age: SpanMs::from_secs(60),
                transport_deadline: TRANSPORT,
                verification_deadline: SpanMs::from_secs(60),
                max_attempts: 3,
                revert: false,
            },
        )
        .await
        .expect_err("no plan on an unreleased scope");
    assert!(
        matches!(&refused, StoreError::Refused { reason, .. } if reason.contains("not released")),
        "{refused}"
    );

    // The restoration observations find both nodes changed behind the restored
    // state; the marks open the drift records.
    let pass = fresh.recovery_pass().await.expect("pass");
    assert!(
        pass.steps
            .iter()
            .all(|s| matches!(s.action, RecoveryAction::RestorationObserved { .. })),
        "{pass:?}"
    );
    for m in [MACHINE, M2] {
        assert_eq!(
            store.mark_scope(&admin(), m, None).await.expect("mark"),
            ScopeState::Ready
        );
        let machine = store.machine(m).await.expect("machine");
        assert!(machine.open_drift.is_some(), "{m}: {machine:?}");
    }
    assert_eq!(site.applies(), [2, 1], "nothing sent before a release");

    store
        .release_scope(&admin(), MACHINE)
        .await
        .expect("release m1");
    store.release_scope(&admin(), M2).await.expect("release m2");
    store.leave_recovery(&admin()).await.expect("leave");

    // After the release, a revert of m1's drift to its Desired release runs.
    site.approved(&store, "p5", MACHINE, "rel-1", true).await;
    let reverted = fresh.run_plan("p5").await.expect("revert");
    assert_eq!(reverted.state, OperationState::Completed);
    assert_eq!(site.applies(), [3, 1]);
    assert_eq!(site.sims[0].config(), artifact("rel-1"));
    assert_eq!(store.machine(MACHINE).await.expect("m1").open_drift, None);

    let reads = store.observations(MACHINE).await.expect("observations");
    assert!(
        reads
            .iter()
            .any(|o| o.purpose == ObservationPurpose::Restoration)
    );
    for m in [MACHINE, M2] {
        println!("{m}: {}", kinds(&store, m).await.join(" → "));
    }
    store.pool().close().await;
    stale.pool().close().await;
    drop(schema);
}

/// Runs the command line `args` with the environment `env`; exit code, stdout and
/// stderr.
#[cfg(feature = "cli")]
async fn cli(env: &[(&str, &str)], args: &[&str]) -> (std::process::ExitCode, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut io = infra_talos::cli::Io {
        out: &mut out,
        err: &mut err,
        input: None,
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    };
    let code = infra_talos::cli::run(
        std::iter::once("infra-talos").chain(args.iter().copied()),
        &mut io,
    )
    .await;
    (
        code,
        String::from_utf8(out).expect("stdout"),
        String::from_utf8(err).expect("stderr"),
    )
}

/// The trust root survives a real restore on PostgreSQL: bob (an approver and
/// recovery-admin) is revoked on the command line, which writes the denied-subject
/// list; the schema is restored with `pg_restore` from a `pg_dump` taken before the
/// revocation. The restored database trusts bob again (without the list, bob acts:
/// the control), yet with the list bob is refused, naming it, and nothing is
/// recorded. A certificate minted with the authority's key and never journaled is
/// refused on the restored database too. The service, started on the restored
/// schema with the list, refuses bob and serves root.
#[cfg(feature = "cli")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_subject_stays_refused_after_a_postgres_restore() {
    use std::process::ExitCode;
    let Some(url) = pg_support::database_url("restore test") else {
        return;
    };
    let (schema, options) = pg_support::schema(&url, "deny").await;
    let dir = tempfile::tempdir().expect("dir");
    let separator = if url.contains('?') { '&' } else { '?' };
    let database = format!("{url}{separator}options[search_path]={}", schema.name());
    let pki = dir.path().join("pki");
    let pki_arg = pki.display().to_string();
    let list = dir.path().join("denied-subjects");
    let list_arg = list.display().to_string();
    let with_list = [
        ("INFRA_TALOS_DATABASE", database.as_str()),
        ("INFRA_TALOS_DENIED_SUBJECTS", list_arg.as_str()),
    ];
    let without_list = [("INFRA_TALOS_DATABASE", database.as_str())];
    let as_ = |who: &str, role: &str| -> Vec<String> {
        vec![
            "--certificate".into(),
            pki.join(format!("{who}.crt")).display().to_string(),
            "--private-key".into(),
            pki.join(format!("{who}.key")).display().to_string(),
            "--as".into(),
            role.into(),
        ]
    };
    let line = |actor: &[String], args: &[&str]| -> Vec<String> {
        actor
            .iter()
            .cloned()
            .chain(args.iter().map(|a| (*a).to_owned()))
            .collect()
    };
    let ok = |(code, out, err): (ExitCode, String, String)| {
        assert_eq!(code, ExitCode::SUCCESS, "{out}{err}");
        out
    };

    let out = ok(cli(&with_list, &["init", "--admin", "root", "--pki", &pki_arg]).await);
    assert!(out.contains("denied-subject list: "), "{out}");
    let root = as_("root", "recovery-admin");
    let add_bob = line(
        &root,
        &[
            "principal",
            "add",
            "bob",
            "--role",
            "approver",
            "--role",
            "recovery-admin",
            "--pki",
            &pki_arg,
        ],
    );
    let add_bob: Vec<&str> = add_bob.iter().map(String::as_str).collect();
    ok(cli(&with_list, &add_bob).await);
    let backup = dir.path().join("before-revocation.dump");
    dump(&url, schema.name(), &backup);

    let revoke = line(&root, &["revoke", "--identity", "bob"]);
    let revoke: Vec<&str> = revoke.iter().map(String::as_str).collect();
    ok(cli(&with_list, &revoke).await);
    let text = std::fs::read_to_string(&list).expect("list");
    assert!(text.contains("\ndeny bob sha256:"), "{text}");

    restore(&url, schema.name(), &backup).await;
    let journal = ok(cli(&without_list, &["principal", "journal"]).await);
    assert!(
        !journal.contains("revoked"),
        "the dump predates the revocation: {journal}"
    );

    let bob = as_("bob", "recovery-admin");
    let add = |id: &str| line(&bob, &["principal", "add", id, "--role", "author"]);
    let refused = add("carol");
    let refused: Vec<&str> = refused.iter().map(String::as_str).collect();
    let (code, out, err) = cli(&with_list, &refused).await;
    assert_eq!(code, ExitCode::from(2), "{out}{err}");
    assert!(err.contains("bob is on the denied-subject list"), "{err}");
    let journal = ok(cli(&without_list, &["principal", "journal"]).await);
    assert!(!journal.contains("carol"), "{journal}");
    // The control: the restored database alone trusts bob.
    let control = add("dave");
    let control: Vec<&str> = control.iter().map(String::as_str).collect();
    ok(cli(&without_list, &control).await);

    // A certificate minted offline with the authority's key proves no one.
    let ca_cert = std::fs::read_to_string(pki.join("ca.crt")).expect("ca");
    let ca_key = std::fs::read_to_string(pki.join("ca.key")).expect("ca key");
    let minted = infra_talos::identity::issue_client(
        &ca_cert,
        &ca_key,
        "root",
        infra_talos::backend::WallTime::system(Arc::new(infra_core::engine::SystemClock::new()))
            .system_time(),
        std::time::Duration::from_secs(3600),
    )
    .expect("minted");
    let minted_dir = dir.path().join("minted");
    std::fs::create_dir(&minted_dir).expect("dir");
    std::fs::write(minted_dir.join("root.crt"), &minted.certificate_pem).expect("crt");
    std::fs::write(minted_dir.join("root.key"), minted.key_pem.as_str()).expect("key");
    let crt = minted_dir.join("root.crt").display().to_string();
    let key = minted_dir.join("root.key").display().to_string();
    let (code, out, err) = cli(
        &with_list,
        &[
            "--certificate",
            &crt,
            "--private-key",
            &key,
            "--as",
            "recovery-admin",
            "principal",
            "add",
            "mallory",
            "--role",
            "approver",
        ],
    )
    .await;
    assert_eq!(code, ExitCode::from(2), "{out}{err}");
    assert!(err.contains("was never journaled"), "{err}");

    // The service on the restored schema refuses bob too, and still serves root.
    ok(cli(
        &[],
        &[
            "server-certificate",
            "--pki",
            &pki_arg,
            "--name",
            "127.0.0.1",
        ],
    )
    .await);
    let (running, base) = serve_on_restored(&options, &pki, &list).await;
    for (who, status, says) in [
        ("bob", 401, "bob is on the denied-subject list"),
        ("root", 200, "\"root\""),
    ] {
        let answer = cli_support::https(dir.path(), Some(who))
            .get(format!("{base}/api/v1/whoami"))
            .send()
            .await
            .expect("answer");
        let code = answer.status().as_u16();
        let body = answer.text().await.expect("body");
        assert_eq!(code, status, "{who}: {body}");
        assert!(body.contains(says), "{who}: {body}");
    }
    running.shutdown().await;
    drop(schema);
}

/// `serve` on the schema, with the installation's authority and server certificate
/// in `pki` and the denied-subject list `list`; the service and its base URL.
#[cfg(feature = "cli")]
async fn serve_on_restored(
    options: &PgConnectOptions,
    pki: &Path,
    list: &Path,
) -> (infra_talos::serve::Running, String) {
    use infra_talos::serve::{PassSettings, ServeSettings, Stores};
    let store = Arc::new(
        PgStore::connect_for_tests(options.clone(), 2, Settings::default())
            .await
            .expect("store"),
    );
    let read = |name: &str| std::fs::read_to_string(pki.join(name)).expect("pki file");
    let settings = ServeSettings {
        ca_certificate_pem: read("ca.crt"),
        server_certificate_pem: read("server.crt"),
        server_key_pem: read("server.key"),
        passes: PassSettings {
            every: std::time::Duration::from_secs(3600),
            drift_every: std::time::Duration::from_secs(3600),
        },
        keys: None,
        denied: Some(infra_talos::identity::DeniedList::new(list)),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listener");
    let stores = Stores {
        store: store.clone(),
        inventory: store,
    };
    let running = infra_talos::serve::start(stores, None, settings, listener)
        .await
        .expect("service");
    let base = format!("https://127.0.0.1:{}", running.addr.port());
    (running, base)
}
