//! The command-set bench the `run` and service tests share: a simulated Talos node
//! reached over real gRPC with mutual TLS, and a directory holding the store, the
//! keyring, the talosconfig, the installation's authority and the artifact files;
//! every step goes through the command set.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use infra_talos::cli::{Io, run};
use infra_talos::config_digest;
use infra_testkit::talos::{NodeFacts, RecordedCall, TalosSim};
use serde_json::Value;

use super::{acting, bootstrap_and_register};

/// The machine.
pub const MACHINE: &str = "m1";
/// The release published for it.
pub const RELEASE: &str = "rel-1";
/// The release the machine's handover adopts.
pub const HANDOVER_RELEASE: &str = "rel-0";
/// The handover's adopt plan.
pub const HANDOVER: &str = "handover";

pub const ANN: Option<(&str, &str)> = Some(("ann", "author"));
pub const ALICE: Option<(&str, &str)> = Some(("alice", "publisher"));
pub const BOB: Option<(&str, &str)> = Some(("bob", "approver"));
pub const ROOT: Option<(&str, &str)> = Some(("root", "recovery-admin"));

/// The configuration the node runs before any plan.
pub fn base_config() -> Vec<u8> {
    b"version: v1alpha1\nmachine:\n  type: worker\n  install:\n    disk: /dev/sda\n".to_vec()
}

/// The configuration file published as the machine's artifact for `release`.
pub fn artifact(release: &str) -> Vec<u8> {
    format!(
        "version: v1alpha1\nmachine:\n  type: worker\n  install:\n    disk: /dev/sda\n# {release}\n"
    )
    .into_bytes()
}

/// One command's exit code and what it wrote.
pub struct Ran {
    pub code: ExitCode,
    pub out: String,
    pub err: String,
}

/// A simulated node, and a directory holding the store, the keyring, the
/// talosconfig and the artifact files.
pub struct Bench {
    pub sim: TalosSim,
    pub dir: tempfile::TempDir,
    pub talosconfig: PathBuf,
}

impl Bench {
    /// [`Bench::imported`], with the machine handed over ([`Bench::hand_over`]).
    pub async fn new() -> Bench {
        let bench = Bench::imported().await;
        let out = bench.hand_over().await;
        assert!(out.ends_with("nothing was sent\n"), "{out}");
        bench
    }

    /// Starts the simulator, writes a talosconfig for its admin client, and registers
    /// the principals and the machine, imported at the digest of the configuration it
    /// runs, through the command set.
    pub async fn imported() -> Bench {
        Bench::imported_under(false).await
    }

    /// [`Bench::imported`] in an installation whose approvals need a second person
    /// (`init --approvals-need-second-person yes`) when `second_person`.
    pub async fn imported_under(second_person: bool) -> Bench {
        let sim = TalosSim::builder()
            .facts(NodeFacts {
                config: base_config(),
                ..NodeFacts::default()
            })
            .start()
            .await
            .expect("simulator");
        let dir = tempfile::tempdir().expect("dir");
        let talosconfig = sim
            .write_talosconfig(dir.path(), &sim.pki().admin_client().expect("client"))
            .expect("talosconfig");
        let bench = Bench {
            sim,
            dir,
            talosconfig,
        };
        let people: [(&str, &[&str]); 3] = [
            ("ann", &["author"]),
            ("alice", &["publisher"]),
            ("bob", &["approver"]),
        ];
        // `--create` makes the store file on the first command; later ones find it.
        for (n, line) in bootstrap_and_register(bench.dir.path(), &people)
            .iter()
            .enumerate()
        {
            let mut args: Vec<&str> = line.iter().map(String::as_str).collect();
            if n == 0 && second_person {
                args.extend(["--approvals-need-second-person", "yes"]);
            }
            bench.ok(if n == 0 { None } else { ROOT }, &args).await;
        }
        let facts = bench.sim.facts();
        let endpoint = bench.sim.node_address();
        let baseline = config_digest(&facts.config).to_hex();
        bench
            .ok(
                ANN,
                &[
                    "inventory",
                    "add",
                    MACHINE,
                    "--endpoint",
                    &endpoint,
                    "--smbios-uuid",
                    &facts.smbios_uuid,
                    "--cluster-id",
                    &facts.cluster_id,
                    "--talos-minor",
                    "1.10",
                    "--import-digest",
                    &baseline,
                ],
            )
            .await;
        bench
    }

    /// Runs one command line as `actor` (`(id, role)`), with the store, the keyring
    /// and the talosconfig given through the environment.
    pub async fn cli(&self, actor: Option<(&str, &str)>, args: &[&str]) -> Ran {
        self.cli_keyring(actor, args, true).await
    }

    /// As [`Bench::cli`], with or without a keyring in the environment.
    pub async fn cli_keyring(
        &self,
        actor: Option<(&str, &str)>,
        args: &[&str],
        keyring: bool,
    ) -> Ran {
        self.cli_env(actor, args, keyring, &[]).await
    }

    /// The bench's denied-subject list: `denied-subjects` in its directory, given to
    /// the commands (`INFRA_TALOS_DENIED_SUBJECTS`) and the service whenever the file
    /// exists.
    pub fn denied_list(&self) -> PathBuf {
        self.dir.path().join("denied-subjects")
    }

    /// As [`Bench::cli_keyring`], with `extra` variables in the environment (set
    /// last, so they win).
    pub async fn cli_env(
        &self,
        actor: Option<(&str, &str)>,
        args: &[&str],
        keyring: bool,
        extra: &[(&str, &str)],
    ) -> Ran {
        let mut env = BTreeMap::new();
        if self.denied_list().exists() {
            env.insert(
                "INFRA_TALOS_DENIED_SUBJECTS".to_owned(),
                self.denied_list().display().to_string(),
            );
        }
        env.insert(
            "INFRA_TALOS_DATABASE".to_owned(),
            format!("sqlite:{}", self.dir.path().join("store.db").display()),
        );
        if keyring {
            env.insert(
                "INFRA_TALOS_KEYRING".to_owned(),
                self.dir.path().join("keys").display().to_string(),
            );
        }
        env.insert(
            "INFRA_TALOS_TALOSCONFIG".to_owned(),
            self.talosconfig.display().to_string(),
        );
        for (name, value) in extra {
            env.insert((*name).to_owned(), (*value).to_owned());
        }
        let acting = acting(self.dir.path(), actor);
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut io = Io {
            out: &mut out,
            err: &mut err,
            input: None,
            env,
        };
        // Boxed: the command line's future is deep, and every test awaiting it through
        // these helpers would otherwise need a higher recursion limit to be built with
        // optimisations.
        let code = Box::pin(run(
            std::iter::once("infra-talos")
                .chain(acting.iter().map(String::as_str))
                .chain(args.iter().copied()),
            &mut io,
        ))
        .await;
        Ran {
            code,
            out: String::from_utf8(out).expect("stdout is UTF-8"),
            err: String::from_utf8(err).expect("stderr is UTF-8"),
        }
    }

    /// Runs a command that must exit 0; returns its standard output.
    pub async fn ok(&self, actor: Option<(&str, &str)>, args: &[&str]) -> String {
        let ran = self.cli(actor, args).await;
        assert_eq!(
            ran.code,
            ExitCode::SUCCESS,
            "{args:?}: {}{}",
            ran.out,
            ran.err
        );
        ran.out
    }

    /// Publishes `release` for the machine, making it Desired.
    pub async fn publish(&self, release: &str) {
        let pair = self.artifact_pair(release);
        self.ok(
            ALICE,
            &[
                "publish",
                release,
                "--artifact",
                &pair,
                "--authored-by",
                "ann",
            ],
        )
        .await;
    }

    /// Publishes `release` for the machine sealed under the keyring's key `key`,
    /// making it Desired; returns what `publish` printed.
    pub async fn publish_under(&self, release: &str, key: &str) -> String {
        let pair = self.artifact_pair(release);
        self.ok(
            ALICE,
            &[
                "publish",
                release,
                "--artifact",
                &pair,
                "--authored-by",
                "ann",
                "--key",
                key,
            ],
        )
        .await
    }

    /// Writes the machine's artifact file for `release`; returns `publish`'s
    /// `--artifact` value for it.
    fn artifact_pair(&self, release: &str) -> String {
        let file = self.dir.path().join(format!("{MACHINE}-{release}.yaml"));
        std::fs::write(&file, artifact(release)).expect("artifact file");
        format!("{MACHINE}={}", file.display())
    }

    /// Hands the imported machine over through the command set (§6.3): publishes
    /// [`HANDOVER_RELEASE`], has alice make adopt plan [`HANDOVER`] and bob approve
    /// it, and runs it; returns what `plan` and `run` printed.
    pub async fn hand_over(&self) -> String {
        self.publish(HANDOVER_RELEASE).await;
        let planned = self
            .ok(ALICE, &["plan", MACHINE, "--adopt", "--id", HANDOVER])
            .await;
        self.ok(BOB, &["approve", HANDOVER]).await;
        let ran = self.ok(None, &["run", HANDOVER]).await;
        format!("{planned}{ran}")
    }

    /// Publishes [`RELEASE`] for the machine and creates plan `plan` for it, leaving
    /// the plan proposed.
    pub async fn proposed_plan(&self, plan: &str) {
        self.publish(RELEASE).await;
        let out = self
            .ok(
                ALICE,
                &["plan", MACHINE, "--id", plan, "--transport-deadline", "1"],
            )
            .await;
        assert!(out.ends_with("state proposed\n"), "{out}");
    }

    /// Publishes [`RELEASE`], creates plan `plan` and has bob approve it.
    pub async fn approved_plan(&self, plan: &str) {
        self.proposed_plan(plan).await;
        self.ok(BOB, &["approve", plan]).await;
    }

    /// The `ApplyConfiguration` requests the node has received.
    pub fn applies(&self) -> Vec<RecordedCall> {
        self.sim
            .apply_requests()
            .into_iter()
            .map(|r| r.call)
            .collect()
    }

    /// The machine's timeline as the `timeline --json` command prints it.
    pub async fn timeline(&self) -> Value {
        let text = self.ok(None, &["timeline", MACHINE, "--json"]).await;
        serde_json::from_str(&text).expect("timeline JSON")
    }

    /// Stops the simulator.
    pub async fn stop(self) {
        self.sim.shutdown().await.expect("simulator stops");
    }
}

impl Bench {
    /// Issues the service its certificate and starts it on a free loopback port over
    /// this bench's store; with `controller`, an executor reaching the simulated node
    /// runs approved plans every 100 ms. Returns it and its base URL.
    pub async fn serve(&self, controller: bool) -> (infra_talos::serve::Running, String) {
        self.serve_every(controller, std::time::Duration::from_millis(100))
            .await
    }

    /// As [`Bench::serve`], with the controller looking for approved plans every
    /// `every` (its first pass at start).
    pub async fn serve_every(
        &self,
        controller: bool,
        every: std::time::Duration,
    ) -> (infra_talos::serve::Running, String) {
        let passes = infra_talos::serve::PassSettings {
            every,
            drift_every: std::time::Duration::from_secs(3600),
        };
        self.serve_with(controller, passes, 60, false).await
    }

    /// As [`Bench::serve`], with the controller's timers `passes` and its executor's
    /// maximum transport deadline in seconds (the wait before the first recovery
    /// read after an entry); with `recovery_start`, the recovery start (§7.2). The
    /// bench's denied-subject list is the service's when the file exists.
    pub async fn serve_with(
        &self,
        controller: bool,
        passes: infra_talos::serve::PassSettings,
        max_transport_deadline_secs: u64,
        recovery_start: bool,
    ) -> (infra_talos::serve::Running, String) {
        let deadline = infra_talos::contract::SpanMs::from_secs(max_transport_deadline_secs);
        self.serve_clocked(
            controller,
            passes,
            deadline,
            recovery_start,
            None,
            self.bench_denied_list(),
        )
        .await
        .expect("service")
    }

    /// The bench's denied-subject list, when its file exists.
    fn bench_denied_list(&self) -> Option<infra_talos::identity::DeniedList> {
        self.denied_list()
            .exists()
            .then(|| infra_talos::identity::DeniedList::new(self.denied_list()))
    }

    /// Starts the service (see [`Bench::serve_every`]) with the denied-subject list
    /// `denied`; the service's own refusal to start, if it refuses.
    pub async fn start_service(
        &self,
        controller: bool,
        every: std::time::Duration,
        denied: Option<infra_talos::identity::DeniedList>,
    ) -> Result<(infra_talos::serve::Running, String), infra_talos::serve::ServeError> {
        let passes = infra_talos::serve::PassSettings {
            every,
            drift_every: std::time::Duration::from_secs(3600),
        };
        let deadline = infra_talos::contract::SpanMs::from_secs(60);
        self.serve_clocked(controller, passes, deadline, false, None, denied)
            .await
    }

    /// As [`Bench::serve`] with the controller's timers `passes`, over a store whose
    /// time is `clock`, moved by hand: the store's times and its executor's pacing
    /// follow it (its maximum transport deadline the store's default, as one
    /// deployment setting is both), while the controller's intervals stay real.
    pub async fn serve_on_clock(
        &self,
        passes: infra_talos::serve::PassSettings,
        clock: &infra_talos::store::ManualClock,
    ) -> (infra_talos::serve::Running, String) {
        let deadline = infra_talos::store::DEFAULT_MAX_TRANSPORT_DEADLINE;
        self.serve_clocked(
            true,
            passes,
            deadline,
            false,
            Some(clock),
            self.bench_denied_list(),
        )
        .await
        .expect("service")
    }

    /// A fresh controller instance over `store` reaching the simulated node, on
    /// `clock`, with a 30 s settle floor.
    pub fn executor(
        &self,
        store: std::sync::Arc<dyn infra_talos::store::Store>,
        keyring: std::sync::Arc<dyn infra_talos::keys::KeyProvider>,
        clock: std::sync::Arc<dyn infra_core::engine::Clock>,
        max_transport_deadline: infra_talos::contract::SpanMs,
    ) -> infra_talos::controller::Executor {
        use infra_talos::controller::{
            Executor, ExecutorSettings, MachineRoute, TalosconfigConnector, fresh_controller_id,
        };

        let connector =
            TalosconfigConnector::load(&self.talosconfig, infra_talos::ConnectOptions::default())
                .expect("talosconfig");
        connector.add_machine(
            MACHINE,
            MachineRoute {
                endpoint: infra_talos::NodeAddress::parse(&self.sim.node_address())
                    .expect("endpoint"),
            },
        );
        Executor::new(
            fresh_controller_id().expect("id"),
            store,
            std::sync::Arc::new(connector),
            keyring,
            clock,
            ExecutorSettings {
                settle_floor: infra_talos::contract::SpanMs::from_secs(30),
                max_transport_deadline,
            },
        )
        .expect("executor")
    }

    async fn serve_clocked(
        &self,
        controller: bool,
        passes: infra_talos::serve::PassSettings,
        max_transport_deadline: infra_talos::contract::SpanMs,
        recovery_start: bool,
        clock: Option<&infra_talos::store::ManualClock>,
        denied: Option<infra_talos::identity::DeniedList>,
    ) -> Result<(infra_talos::serve::Running, String), infra_talos::serve::ServeError> {
        use std::sync::Arc;

        use infra_core::engine::SystemClock;
        use infra_talos::keys::LocalKeyring;
        use infra_talos::serve::ServeSettings;
        use infra_talos::store::Store;
        use infra_talos::store::sqlite::SqliteStore;

        let pki = self.dir.path().join(super::PKI);
        if !pki.join("server.crt").exists() {
            let pki_arg = pki.display().to_string();
            self.ok(
                None,
                &[
                    "server-certificate",
                    "--pki",
                    &pki_arg,
                    "--name",
                    "127.0.0.1",
                ],
            )
            .await;
        }
        let path = self.dir.path().join("store.db");
        let opened = Arc::new(match clock {
            None => SqliteStore::open(&path).await.expect("store"),
            Some(clock) => SqliteStore::open_for_tests(
                Some(&path),
                infra_talos::store::Settings {
                    clock: Some(clock.clone()),
                    ..infra_talos::store::Settings::default()
                },
            )
            .await
            .expect("store"),
        });
        let executor_clock: Arc<dyn infra_core::engine::Clock> = match clock {
            None => Arc::new(SystemClock::new()),
            Some(clock) => Arc::new(HandClock(clock.clone())),
        };
        let store: Arc<dyn Store> = opened.clone();
        let read = |name: &str| std::fs::read_to_string(pki.join(name)).expect("pki file");
        let keyring: Arc<dyn infra_talos::keys::KeyProvider> =
            Arc::new(LocalKeyring::open(self.dir.path().join("keys")).expect("keyring"));
        let settings = ServeSettings {
            keys: Some(Arc::clone(&keyring)),
            ca_certificate_pem: read("ca.crt"),
            server_certificate_pem: read("server.crt"),
            server_key_pem: read("server.key"),
            passes,
            denied,
        };
        let executor = controller.then(|| {
            self.executor(
                Arc::clone(&store),
                Arc::clone(&keyring),
                executor_clock,
                max_transport_deadline,
            )
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("listener");
        let stores = infra_talos::serve::Stores {
            store,
            inventory: opened,
        };
        let running = if recovery_start {
            infra_talos::serve::start_for_recovery(stores, executor, settings, listener).await
        } else {
            infra_talos::serve::start(stores, executor, settings, listener).await
        }?;
        let base = format!("https://127.0.0.1:{}", running.addr.port());
        Ok((running, base))
    }
}

/// An executor's clock reading a store's hand-moved clock; its sleeps move it.
struct HandClock(infra_talos::store::ManualClock);

#[async_trait::async_trait]
impl infra_core::engine::Clock for HandClock {
    fn now(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.0.now().0)
    }

    async fn sleep(&self, duration: std::time::Duration) {
        self.0.advance(infra_talos::contract::SpanMs(
            u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
        ));
        tokio::task::yield_now().await;
    }
}
