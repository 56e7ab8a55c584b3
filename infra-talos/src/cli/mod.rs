//! The `talos` command set: inventory, publication, plans, approvals, revocations,
//! the controller, accounting decisions and the machine timeline, over the
//! controller's store.
//!
//! A consumer binary embeds [`TalosArgs`] as a subcommand and calls [`execute`]; the
//! `infra-talos` binary (feature `cli`) is [`run`] on the process's arguments.
//!
//! **Configuration.** The acting identity (`actor`, `role`), the store (`database`:
//! `sqlite:<path>` or a `postgres://` URL), the local keyring's directory (`keyring`)
//! and the talosconfig used to reach nodes (`talosconfig`) come from a JSON file
//! (`--config`, or `INFRA_TALOS_CONFIG`) and from the environment
//! (`INFRA_TALOS_ACTOR`, `INFRA_TALOS_ROLE`, `INFRA_TALOS_DATABASE`,
//! `INFRA_TALOS_KEYRING`, `INFRA_TALOS_TALOSCONFIG`), the environment winning;
//! `--database` wins over both. The acting identity is passed to every store act.
//!
//! **The store** (`database`). A `sqlite:<path>` file must exist unless `--create` is
//! given; a store in memory (`sqlite:`, `sqlite::memory:`) is refused. A file holding
//! another application's tables, a database at a schema version newer than this
//! build's, and one whose applied migrations differ from this build's (checksums) are
//! refused and left untouched. Every such error names the file, or the PostgreSQL URL
//! without its password, and exits 2.
//!
//! **Exit codes.** 0: done. 1: the contract refused the act (the message names the
//! comparison or the rule, and why). 2: a usage or configuration error. 3: `run` left
//! an operation unfinished — its outcome is not known yet (a lost response, a request
//! held past its deadline) and waits for recovery observations, recovery-admin's
//! accounting (`account`) and `run --resume`; or `drift` could not read a machine.
//!
//! No output, record or error ever holds a configuration's plaintext or a secret.

mod database;
mod drift;
mod identity;
mod plan;
mod recovery;
mod serve;
mod timeline;
mod when;

pub use identity::{InitArgs, PrincipalCommand};
pub use recovery::RecoveryCommand;
pub use serve::{ServeArgs, ServerCertificateArgs};
pub use when::{iso, parse_iso};

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use infra_core::engine::SystemClock;
use serde::Deserialize;

use crate::contract::comparison::Comparison;
use crate::contract::{Role, SpanMs};
use crate::controller::ExecutorSettings;
use crate::keys::{KeyProvider, LocalKeyring};
use database::{Db, open_store};

use crate::store::{
    AccountingRequest, Actor, ContributionKind, IdentityKey, MachineSpec, SealedReleaseSpec,
    StoreError,
};

/// The `talos` command set, for embedding as a subcommand of a consumer binary.
#[derive(Debug, Args)]
pub struct TalosArgs {
    /// The store: `sqlite:<path>` (an existing file, or with `--create` a new one) or a
    /// `postgres://` URL (overrides the configuration).
    #[arg(long, global = true)]
    pub database: Option<String>,
    /// A JSON configuration file (`certificate`, `private_key`, `role`, `database`,
    /// `keyring`, `talosconfig`).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// The acting principal's client certificate (PEM), issued by the installation's
    /// authority; its common name is the principal (overrides the configuration).
    #[arg(long, global = true, value_name = "FILE")]
    pub certificate: Option<PathBuf>,
    /// That certificate's private key (PEM).
    #[arg(long, global = true, value_name = "FILE")]
    pub private_key: Option<PathBuf>,
    /// The role to act in; the store checks the principal holds it.
    #[arg(long = "as", global = true, value_name = "ROLE")]
    pub acting_as: Option<String>,
    /// Make a new store file if the `sqlite:` path names none (without it a missing
    /// file is refused, so a mistyped path never starts an empty store).
    #[arg(long, global = true)]
    pub create: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The `infra-talos` binary's arguments.
#[derive(Debug, Parser)]
#[command(
    name = "infra-talos",
    about = "Talos machine configuration under the execution contract"
)]
pub struct Cli {
    /// The command set.
    #[command(flatten)]
    pub talos: TalosArgs,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Bootstrap the installation's identities, once: its certificate authority and
    /// first administrator.
    Init(InitArgs),
    /// Run the controller as a service: approved plans and drift passes on a timer,
    /// the JSON API and the approval page over TLS, health and metrics; until SIGINT
    /// or SIGTERM.
    Serve(ServeArgs),
    /// Issue the service a server certificate from the installation's authority.
    ServerCertificate(ServerCertificateArgs),
    /// Register identities, change their roles, issue their certificates, and read
    /// the identity journal.
    #[command(subcommand)]
    Principal(PrincipalCommand),
    /// Register and list machines.
    #[command(subcommand)]
    Inventory(InventoryCommand),
    /// Publish a release: seal each machine's configuration file and record it.
    Publish(PublishArgs),
    /// Create a plan for a machine from its Desired release.
    Plan(PlanArgs),
    /// Approve a plan: as an approver, or (`--blanket`, a publisher or automation)
    /// under the blanket approval in force for its machine's cluster.
    Approve {
        /// The plan.
        plan: String,
        /// Approve under the cluster's blanket approval.
        #[arg(long)]
        blanket: bool,
    },
    /// Blanket approvals: an approver's standing decision that plans for one
    /// cluster's machines are approved as they are made (direct mode).
    #[command(subcommand)]
    Blanket(BlanketCommand),
    /// Revoke a plan's approval, or (`--identity`, recovery-admin) an identity.
    Revoke(RevokeArgs),
    /// Cancel a plan.
    Cancel {
        /// The plan.
        plan: String,
    },
    /// Freeze a machine's scope (§6.2): no commitment or attempt passes until an
    /// approver unfreezes it.
    Freeze {
        /// The machine.
        machine: String,
        /// Why (1 to 1024 bytes, not blank); recorded on the timeline.
        #[arg(long)]
        reason: String,
    },
    /// Lift a freeze (approver only).
    Unfreeze {
        /// The machine.
        machine: String,
        /// Why (1 to 1024 bytes, not blank); recorded on the timeline.
        #[arg(long)]
        reason: String,
    },
    /// Run the controller on an approved plan.
    Run(RunArgs),
    /// Take one drift observation of every machine with an Applied release (§6.1)
    /// and print what the store recorded: in step, a drift record opened, still open
    /// or closed, or not read (exit 3).
    Drift {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Recovery mode after the store was restored from a backup (§7): enter, observe,
    /// account, mark, release, leave, status.
    #[command(subcommand)]
    Recovery(RecoveryCommand),
    /// Record recovery-admin's accounting decision for an attempt (§5.2).
    Account(AccountArgs),
    /// A machine's timeline.
    Timeline {
        /// The machine.
        machine: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `blanket` subcommands.
#[derive(Debug, Subcommand)]
pub enum BlanketCommand {
    /// Grant one for a cluster (an approver).
    Grant {
        /// The Talos cluster ID it covers.
        #[arg(long)]
        cluster: String,
        /// Why, for the record.
        #[arg(long)]
        reason: String,
        /// How long it stands: `90m`, `12h`, `7d` (at most 90 days). Approvals are
        /// made under it until then, never after.
        #[arg(long = "for", value_parser = when::parse_span, value_name = "SPAN")]
        lasting: SpanMs,
    },
    /// Revoke one, and every approval made under it (an approver or recovery-admin):
    /// a committed operation without an attempt is then refused at its attempt.
    Revoke {
        /// Its identifier.
        id: String,
    },
    /// List every blanket approval.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `inventory` subcommands.
#[derive(Debug, Subcommand)]
pub enum InventoryCommand {
    /// Register a machine.
    Add(InventoryAdd),
    /// List inventoried machines.
    List {
        /// Only this Talos cluster ID.
        #[arg(long)]
        cluster_id: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `inventory add`.
#[derive(Debug, Args)]
pub struct InventoryAdd {
    /// The machine's name.
    pub name: String,
    /// Its own Talos endpoint, `host:port`.
    #[arg(long)]
    pub endpoint: String,
    /// Its SMBIOS UUID.
    #[arg(long, conflicts_with = "node_id", required_unless_present = "node_id")]
    pub smbios_uuid: Option<String>,
    /// Its Talos node ID (for a machine without a usable SMBIOS UUID).
    #[arg(long)]
    pub node_id: Option<String>,
    /// The Talos cluster ID it belongs to.
    #[arg(long)]
    pub cluster_id: String,
    /// Its rollout scope (default: its name).
    #[arg(long)]
    pub rollout_scope: Option<String>,
    /// The Talos minor its artifacts are built for, e.g. `1.10`.
    #[arg(long)]
    pub talos_minor: String,
    /// The configuration digest (hex) read from the machine when it is imported from
    /// an existing cluster. It is recorded, not accepted: `plan --adopt` then hands the
    /// machine over once approved and observed (§6.3). Without it, and without Applied,
    /// no plan can be made for the machine.
    #[arg(long)]
    pub import_digest: Option<String>,
}

/// `publish`.
#[derive(Debug, Args)]
pub struct PublishArgs {
    /// The release's identifier.
    pub release: String,
    /// `<machine>=<file>`: the configuration file made for a machine (repeat).
    #[arg(long = "artifact", required = true, value_parser = parse_pair)]
    pub artifacts: Vec<(String, PathBuf)>,
    /// The key to seal with (created in the keyring if missing).
    #[arg(long, default_value = "artifacts")]
    pub key: String,
    /// Someone who authored content in the release (repeat).
    #[arg(long = "authored-by")]
    pub authors: Vec<String>,
}

/// `plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The machine.
    pub machine: String,
    /// The plan's identifier (default: `<machine>-<release>-b<baseline>`).
    #[arg(long)]
    pub id: Option<String>,
    /// A revert of the machine's open drift record.
    #[arg(long, conflicts_with = "adopt")]
    pub revert: bool,
    /// An adopt plan (§6.3): accept the open drift record's configuration, or for an
    /// imported machine with no Applied the configuration its import read, as
    /// Applied, naming the Desired release. Nothing is sent; `run PLAN` records the
    /// adoption against a fresh observation.
    #[arg(long)]
    pub adopt: bool,
    /// Seconds until the plan expires.
    #[arg(long, default_value_t = 86_400)]
    pub expires_in: u64,
    /// How old dispatch evidence may be, in seconds.
    #[arg(long, default_value_t = 60)]
    pub max_evidence_age: u64,
    /// Transport deadline of each request, in seconds.
    #[arg(long, default_value_t = 30)]
    pub transport_deadline: u64,
    /// Verification deadline, in seconds.
    #[arg(long, default_value_t = 120)]
    pub verification_deadline: u64,
    /// The attempt budget.
    #[arg(long, default_value_t = 3)]
    pub max_attempts: u32,
}

/// `revoke`.
#[derive(Debug, Args)]
pub struct RevokeArgs {
    /// The plan whose approval to revoke.
    #[arg(required_unless_present = "identity", conflicts_with = "identity")]
    pub plan: Option<String>,
    /// Revoke this identity instead (recovery-admin).
    #[arg(long)]
    pub identity: Option<String>,
}

/// `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The approved plan.
    #[arg(required_unless_present = "resume", conflicts_with = "resume")]
    pub plan: Option<String>,
    /// Instead of a plan: take over every operation not in a final state (whoever
    /// owns it), carry each as far as the contract allows, and take one recovery
    /// observation (paced by the settle floor) for each that still waits for its
    /// outcome to be accounted for.
    #[arg(long)]
    pub resume: bool,
    /// The settle floor in seconds (at least 30).
    #[arg(long, default_value_t = 30)]
    pub settle_floor: u64,
    /// The deployment's maximum transport deadline in seconds.
    #[arg(long, default_value_t = crate::store::DEFAULT_MAX_TRANSPORT_DEADLINE.0 / 1000)]
    pub max_transport_deadline: u64,
}

/// `account`.
#[derive(Debug, Args)]
pub struct AccountArgs {
    /// The operation.
    pub operation: String,
    /// The attempt number.
    #[arg(long)]
    pub attempt: u32,
    /// The deployment's settle floor in seconds (at least 30).
    #[arg(long, default_value_t = 30)]
    pub settle_floor: u64,
    /// Why the resource version moved during the settle, if it did.
    #[arg(long)]
    pub explanation: Option<String>,
}

fn parse_role(text: &str) -> Result<Role, String> {
    text.parse()
}

fn parse_pair(text: &str) -> Result<(String, PathBuf), String> {
    let (machine, file) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not <machine>=<file>"))?;
    if machine.is_empty() || file.is_empty() {
        return Err(format!("{text:?} is not <machine>=<file>"));
    }
    Ok((machine.to_owned(), PathBuf::from(file)))
}

/// Where a command writes, and the environment it reads its configuration from.
pub struct Io<'a> {
    /// Standard output.
    pub out: &'a mut dyn Write,
    /// Standard error.
    pub err: &'a mut dyn Write,
    /// The environment variables.
    pub env: BTreeMap<String, String>,
}

impl std::fmt::Debug for Io<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io").finish_non_exhaustive()
    }
}

/// Why a command did not complete.
#[derive(Debug)]
enum Failure {
    /// A usage or configuration error: exit 2.
    Usage(String),
    /// The contract refused: exit 1.
    Refused(String),
    /// An operation is left unfinished (the report is on standard output): exit 3.
    Unfinished(String),
    /// A named machine does not exist: exit 1, with the nearest names when the
    /// store can list them.
    MissingMachine {
        /// The name given.
        machine: String,
        /// The refusal.
        text: String,
    },
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Database(_) => Failure::Usage(e.to_string()),
            StoreError::NotFound {
                what: "machine",
                ref id,
            } => Failure::MissingMachine {
                machine: id.clone(),
                text: refusal_text(&e),
            },
            other => Failure::Refused(refusal_text(&other)),
        }
    }
}

/// A [`Failure::MissingMachine`] as the user reads it: the refusal, with the
/// inventoried names nearest to the one given ("did you mean …?"), so that a typo is
/// told as one.
async fn suggesting(text: String, machine: &str, store: &dyn crate::store::Store) -> Failure {
    let near = match store.machines().await {
        Ok(known) => infra_core::names::nearest(machine, known.iter().map(|m| m.id.as_str())),
        Err(_) => Vec::new(),
    };
    if near.is_empty() {
        return Failure::Refused(text);
    }
    let names: Vec<String> = near.iter().map(|n| format!("'{n}'")).collect();
    Failure::Refused(format!("{text}; did you mean {}?", names.join(", ")))
}

/// What a comparison checks (§3.2, §3.3, §11.1).
fn comparison_name(c: Comparison) -> &'static str {
    match c {
        Comparison::PlanHasNoOperation => "plan has no operation",
        Comparison::Authority => "authority",
        Comparison::Bindings => "bindings",
        Comparison::Evidence => "evidence",
        Comparison::MachineScope => "machine scope",
        Comparison::RolloutSlot => "rollout slot",
        Comparison::Gate => "scope gate",
        Comparison::Ownership => "ownership",
        Comparison::TimelineUnchanged => "nothing newer",
        Comparison::AttemptsLeft => "budget",
    }
}

/// A refusal, naming the comparison or rule that refused and why.
fn refusal_text(e: &StoreError) -> String {
    match e {
        StoreError::CommitmentRefused { comparison, reason } => format!(
            "refused: commitment, comparison {comparison} ({}): {reason}",
            comparison_name(*comparison)
        ),
        StoreError::AttemptRefused { comparison, reason } => format!(
            "refused: attempt, comparison {comparison} ({}): {reason}",
            comparison_name(*comparison)
        ),
        StoreError::AccountingRefused {
            condition: Some(c),
            reason,
        } => format!("refused: accounting decision, §5.2 condition {c}: {reason}"),
        StoreError::AccountingRefused {
            condition: None,
            reason,
        } => format!("refused: accounting decision: {reason}"),
        StoreError::Refused { act, reason } => format!("refused: {act}: {reason}"),
        other => format!("refused: {other}"),
    }
}

/// The configuration file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    /// Refused when present: an identity is proven by a certificate, not named.
    actor: Option<serde_json::Value>,
    certificate: Option<PathBuf>,
    private_key: Option<PathBuf>,
    role: Option<String>,
    database: Option<String>,
    keyring: Option<PathBuf>,
    talosconfig: Option<PathBuf>,
}

/// The resolved configuration.
#[derive(Debug)]
struct Config {
    certificate: Option<PathBuf>,
    private_key: Option<PathBuf>,
    role: Option<String>,
    /// Who the certificate proves is acting, once the store is open.
    acting: Option<Result<Actor, String>>,
    database: Option<String>,
    /// `--create`: a missing SQLite store file may be made.
    create: bool,
    keyring: Option<PathBuf>,
    talosconfig: Option<PathBuf>,
}

impl Config {
    fn load(args: &TalosArgs, env: &BTreeMap<String, String>) -> Result<Config, Failure> {
        let path = args
            .config
            .clone()
            .or_else(|| env.get("INFRA_TALOS_CONFIG").map(PathBuf::from));
        let file = match &path {
            None => FileConfig::default(),
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| {
                    Failure::Usage(format!(
                        "cannot read the configuration {}: {e}",
                        p.display()
                    ))
                })?;
                serde_json::from_str(&text).map_err(|e| {
                    Failure::Usage(format!(
                        "the configuration {} is not valid: {e}",
                        p.display()
                    ))
                })?
            }
        };
        let var = |name: &str| env.get(name).cloned();
        if let Some(name) = ["INFRA_TALOS_ACTOR", "INFRA_TALOS_ROLE"]
            .into_iter()
            .find(|n| env.contains_key(*n))
        {
            return Err(Failure::Usage(format!(
                "{name} is set, and no environment variable chooses who acts: the acting \
                 identity is the client certificate's (--certificate, --private-key) and the \
                 role is --as; unset {name}"
            )));
        }
        if file.actor.is_some() {
            return Err(Failure::Usage(format!(
                "the configuration {} names an `actor`: an identity is proven by a client \
                 certificate (`certificate`, `private_key`), never named",
                path.as_ref()
                    .map_or(String::new(), |p| p.display().to_string())
            )));
        }
        Ok(Config {
            certificate: args.certificate.clone().or(file.certificate),
            private_key: args.private_key.clone().or(file.private_key),
            role: args.acting_as.clone().or(file.role),
            acting: None,
            database: args
                .database
                .clone()
                .or_else(|| var("INFRA_TALOS_DATABASE"))
                .or(file.database),
            create: args.create,
            keyring: var("INFRA_TALOS_KEYRING")
                .map(PathBuf::from)
                .or(file.keyring),
            talosconfig: var("INFRA_TALOS_TALOSCONFIG")
                .map(PathBuf::from)
                .or(file.talosconfig),
        })
    }

    /// The authenticated acting principal (see [`identity`]).
    fn actor(&self) -> Result<Actor, Failure> {
        match &self.acting {
            Some(Ok(actor)) => Ok(actor.clone()),
            Some(Err(why)) => Err(Failure::Usage(why.clone())),
            None => Err(Failure::Usage("no acting identity".into())),
        }
    }

    fn keyring(&self) -> Result<LocalKeyring, Failure> {
        let dir = self.keyring.as_ref().ok_or_else(|| {
            Failure::Usage(
                "no keyring directory: set `keyring` in the configuration, or INFRA_TALOS_KEYRING"
                    .into(),
            )
        })?;
        LocalKeyring::open(dir).map_err(|e| Failure::Usage(e.to_string()))
    }
}

/// Runs the `infra-talos` command line `args` (the program name first).
pub async fn run<I, T>(args: I, io: &mut Io<'_>) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match Cli::try_parse_from(args) {
        Ok(cli) => execute(cli.talos, io).await,
        Err(e) => {
            let text = e.render().to_string();
            if e.use_stderr() {
                let _ = write!(io.err, "{text}");
                ExitCode::from(2)
            } else {
                let _ = write!(io.out, "{text}");
                ExitCode::SUCCESS
            }
        }
    }
}

/// Runs one parsed `talos` command.
pub async fn execute(args: TalosArgs, io: &mut Io<'_>) -> ExitCode {
    let result = match Config::load(&args, &io.env) {
        Ok(config) => dispatch(args.command, config).await,
        Err(f) => Err(f),
    };
    match result {
        Ok(text) => {
            let _ = write!(io.out, "{text}");
            ExitCode::SUCCESS
        }
        Err(Failure::Refused(text) | Failure::MissingMachine { text, .. }) => {
            let _ = writeln!(io.err, "{text}");
            ExitCode::from(1)
        }
        Err(Failure::Usage(text)) => {
            let _ = writeln!(io.err, "error: {text}");
            ExitCode::from(2)
        }
        Err(Failure::Unfinished(text)) => {
            let _ = write!(io.out, "{text}");
            ExitCode::from(3)
        }
    }
}

async fn dispatch(command: Command, mut config: Config) -> Result<String, Failure> {
    // Issuing the service's certificate is the authority's, offline: no store.
    if let Command::ServerCertificate(args) = &command {
        return serve::server_certificate(args);
    }
    let db = open_store(config.database.as_deref(), config.create).await?;
    config.acting = Some(identity::acting(&config, db.store.as_ref()).await);
    match act(command, &config, &db).await {
        Err(Failure::MissingMachine { machine, text }) => {
            Err(suggesting(text, &machine, db.store.as_ref()).await)
        }
        done => done,
    }
}

/// Carries out one command on the opened store.
async fn act(command: Command, config: &Config, db: &Db) -> Result<String, Failure> {
    let store = &db.store;
    let mut out = String::new();
    match command {
        Command::Init(args) => {
            out = identity::init(db, args).await?;
        }
        Command::Principal(command) => {
            out = identity::principal(db, config, command).await?;
        }
        Command::Serve(args) => {
            out = serve::serve(db, config, args).await?;
        }
        Command::ServerCertificate(args) => {
            out = serve::server_certificate(&args)?;
        }
        Command::Inventory(InventoryCommand::Add(add)) => {
            let actor = config.actor()?;
            let identity = match (add.smbios_uuid, add.node_id) {
                (Some(u), _) => IdentityKey::SmbiosUuid(u),
                (None, Some(n)) => IdentityKey::NodeId(n),
                (None, None) => {
                    return Err(Failure::Usage("give --smbios-uuid or --node-id".into()));
                }
            };
            let imported = add
                .import_digest
                .as_deref()
                .map(str::parse)
                .transpose()
                .map_err(|_| Failure::Usage("--import-digest is not 64 hex digits".into()))?;
            store
                .create_machine(
                    &actor,
                    MachineSpec {
                        id: add.name.clone(),
                        identity,
                        cluster_id: add.cluster_id,
                        endpoint: add.endpoint,
                        rollout_scope: add.rollout_scope.unwrap_or_else(|| add.name.clone()),
                        talos_minor: add.talos_minor,
                        import_digest: imported,
                    },
                )
                .await?;
            let _ = writeln!(
                out,
                "machine {} added to the inventory by {}",
                add.name,
                who(&actor)
            );
        }
        Command::Inventory(InventoryCommand::List { cluster_id, json }) => {
            let machines: Vec<_> = db
                .inventory
                .machines()
                .await?
                .into_iter()
                .filter(|m| cluster_id.as_ref().is_none_or(|c| &m.cluster_id == c))
                .collect();
            let mut rows = Vec::new();
            for m in machines {
                let view = store.machine(&m.id).await?;
                rows.push((m, view));
            }
            if json {
                let value: Vec<serde_json::Value> = rows
                    .iter()
                    .map(|(m, v)| {
                        serde_json::json!({
                            "name": m.id,
                            "endpoint": m.endpoint,
                            "identity": m.identity,
                            "clusterId": m.cluster_id,
                            "rolloutScope": m.rollout_scope,
                            "talosMinor": m.talos_minor,
                            "desiredRelease": v.desired_release,
                            "appliedRelease": v.applied_release,
                            "appliedDigest": v.applied_digest,
                        })
                    })
                    .collect();
                let _ = writeln!(out, "{}", pretty(&value));
            } else if rows.is_empty() {
                out.push_str("no machines\n");
            } else {
                for (m, v) in rows {
                    let key = match &m.identity {
                        IdentityKey::SmbiosUuid(u) => format!("smbios {u}"),
                        IdentityKey::NodeId(n) => format!("node-id {n}"),
                    };
                    let _ = writeln!(
                        out,
                        "{}  endpoint {}  {key}  cluster {}  desired {}  applied {}",
                        m.id,
                        m.endpoint,
                        m.cluster_id,
                        v.desired_release.as_deref().unwrap_or("-"),
                        applied_text(&v),
                    );
                }
            }
        }
        Command::Publish(args) => {
            let actor = config.actor()?;
            let keyring = config.keyring()?;
            if keyring.key_info(&args.key).is_err() {
                keyring
                    .create_key(&args.key)
                    .map_err(|e| Failure::Usage(e.to_string()))?;
            }
            let mut artifacts = Vec::new();
            for (machine, file) in &args.artifacts {
                let sealed = {
                    let plaintext = zeroize::Zeroizing::new(std::fs::read(file).map_err(|e| {
                        Failure::Usage(format!("cannot read {}: {e}", file.display()))
                    })?);
                    keyring
                        .seal(&args.key, &plaintext)
                        .await
                        .map_err(|e| Failure::Usage(e.to_string()))?
                };
                artifacts.push((machine.clone(), sealed));
            }
            let mut contributions: Vec<(String, ContributionKind)> = args
                .authors
                .iter()
                .map(|a| (a.clone(), ContributionKind::Authored))
                .collect();
            contributions.push((actor.id.clone(), ContributionKind::Published));
            let digests: Vec<(String, String)> = artifacts
                .iter()
                .map(|(m, a)| (m.clone(), a.digest.to_hex()))
                .collect();
            store
                .publish_sealed_release(
                    &actor,
                    SealedReleaseSpec {
                        id: args.release.clone(),
                        artifacts,
                        contributions,
                    },
                )
                .await?;
            let _ = writeln!(
                out,
                "release {} published by {}, sealed with key {}:",
                args.release,
                who(&actor),
                args.key
            );
            for (m, d) in digests {
                let _ = writeln!(out, "  {m}  digest {d}  (now its Desired)");
            }
        }
        Command::Plan(args) => {
            let actor = config.actor()?;
            out.push_str(&plan::create(store.as_ref(), &actor, args).await?);
        }
        Command::Approve { plan, blanket } => {
            let actor = config.actor()?;
            if blanket {
                let mark = store.approve_under_blanket(&actor, &plan).await?;
                let _ = writeln!(
                    out,
                    "plan {plan} approved under its cluster's blanket approval at the request of {}: {mark}",
                    who(&actor)
                );
            } else {
                let mark = store.approve(&actor, &plan).await?;
                let _ = writeln!(out, "plan {plan} approved by {}: {mark}", who(&actor));
            }
            let view = store.plan(&plan).await?;
            if let Some(record) = view.bound_drift.filter(|_| view.unseen_overwrite()) {
                let _ = writeln!(
                    out,
                    "unseenOverwrite: this revert overwrites the drifted configuration of \
                     record {record}, which no reviewer has seen"
                );
            }
        }
        Command::Blanket(BlanketCommand::Grant {
            cluster,
            reason,
            lasting,
        }) => {
            let actor = config.actor()?;
            let granted = store
                .grant_blanket_approval(&actor, &cluster, &reason, lasting)
                .await?;
            let _ = writeln!(
                out,
                "blanket approval {} granted for cluster {cluster} by {}, standing until {}",
                granted.id,
                who(&actor),
                when::iso(granted.expires_at.0)
            );
        }
        Command::Blanket(BlanketCommand::Revoke { id }) => {
            let actor = config.actor()?;
            store.revoke_blanket_approval(&actor, &id).await?;
            let _ = writeln!(out, "blanket approval {id} revoked by {}", who(&actor));
        }
        Command::Blanket(BlanketCommand::List { json }) => {
            let all = store.blanket_approvals().await?;
            if json {
                let _ = writeln!(out, "{}", pretty(&all));
            } else if all.is_empty() {
                let _ = writeln!(out, "no blanket approvals");
            } else {
                for b in &all {
                    let state = match (&b.revoked, b.current_epoch, b.expired) {
                        (Some((by, at)), ..) => {
                            format!("revoked by {by} at {}", when::iso(at.0))
                        }
                        (None, false, _) => {
                            "granted in an earlier epoch: holds no longer".to_owned()
                        }
                        (None, true, true) => {
                            format!("lapsed at {}", when::iso(b.expires_at.0))
                        }
                        (None, true, false) => {
                            format!("in force until {}", when::iso(b.expires_at.0))
                        }
                    };
                    let _ = writeln!(
                        out,
                        "{}  cluster {}  granted by {} at {}  {state}  reason: {}",
                        b.id,
                        b.cluster_id,
                        b.approver,
                        when::iso(b.granted_at.0),
                        b.reason
                    );
                }
            }
        }
        Command::Revoke(args) => {
            let actor = config.actor()?;
            if let Some(principal) = args.identity {
                store.revoke_identity(&actor, &principal).await?;
                let _ = writeln!(out, "identity {principal} revoked by {}", who(&actor));
            } else if let Some(plan) = args.plan {
                store.revoke_approval(&actor, &plan).await?;
                let _ = writeln!(out, "approval of plan {plan} revoked by {}", who(&actor));
            }
        }
        Command::Cancel { plan } => {
            let actor = config.actor()?;
            store.cancel_plan(&actor, &plan).await?;
            let _ = writeln!(out, "plan {plan} cancelled by {}", who(&actor));
        }
        Command::Freeze { machine, reason } => {
            let actor = config.actor()?;
            store.freeze(&actor, &machine, &reason).await?;
            let _ = writeln!(out, "machine {machine} frozen by {}", who(&actor));
        }
        Command::Unfreeze { machine, reason } => {
            let actor = config.actor()?;
            store.unfreeze(&actor, &machine, &reason).await?;
            let _ = writeln!(out, "machine {machine} unfrozen by {}", who(&actor));
        }
        Command::Run(args) => {
            out = run_controller(db, config, args).await?;
        }
        Command::Drift { json } => {
            // The drift pass sends nothing: the settings only satisfy the executor.
            let settings = ExecutorSettings {
                settle_floor: SpanMs::from_secs(30),
                max_transport_deadline: crate::store::DEFAULT_MAX_TRANSPORT_DEADLINE,
            };
            let executor = executor(db, config, Arc::new(drift::NoKeys), settings).await?;
            let pass = executor.drift_pass().await.map_err(executor_failure)?;
            out = if json {
                format!("{}\n", pretty(&drift::json(&pass)))
            } else {
                drift::text(&pass)
            };
            if drift::unread(&pass) > 0 {
                return Err(Failure::Unfinished(out));
            }
        }
        Command::Recovery(command) => {
            out = recovery::execute(db, config, command).await?;
        }
        Command::Account(args) => {
            let actor = config.actor()?;
            store
                .record_accounting_decision(
                    &actor,
                    AccountingRequest {
                        operation: args.operation.clone(),
                        attempt: args.attempt,
                        settle_floor: SpanMs::from_secs(args.settle_floor),
                        explanation: args.explanation,
                    },
                )
                .await?;
            let _ = writeln!(
                out,
                "attempt {} of operation {} accounted for by {}",
                args.attempt,
                args.operation,
                who(&actor)
            );
        }
        Command::Timeline { machine, json } => {
            let view = store.machine(&machine).await?;
            let entries = store.timeline(&machine).await?;
            let operations = store.operations_of(&machine).await?;
            out = if json {
                let value = timeline::json(&view, &entries, &operations);
                format!("{}\n", pretty(&value))
            } else {
                timeline::text(&view, &entries, &operations)
            };
        }
    }
    Ok(out)
}

fn pretty(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

fn who(actor: &Actor) -> String {
    format!("{} ({})", actor.id, actor.role)
}

fn applied_text(view: &crate::store::MachineView) -> String {
    match (&view.applied_release, &view.applied_digest) {
        (Some(r), _) => r.clone(),
        (None, Some(d)) => format!("handed-over baseline {}", &d.to_hex()[..12]),
        (None, None) => "-".into(),
    }
}

/// `run`: the executor on one approved plan.
fn executor_failure(e: crate::controller::ExecutorError) -> Failure {
    match e {
        crate::controller::ExecutorError::Store(s) => Failure::from(s),
        crate::controller::ExecutorError::Settings(text) => Failure::Usage(text),
        other => Failure::Refused(format!("refused: {other}")),
    }
}

/// A controller instance on the store, reaching every inventoried machine at its own
/// endpoint through the configured talosconfig.
async fn executor(
    db: &Db,
    config: &Config,
    keys: Arc<dyn KeyProvider>,
    settings: ExecutorSettings,
) -> Result<crate::controller::Executor, Failure> {
    use crate::controller::{Executor, MachineRoute, TalosconfigConnector};
    let talosconfig = config.talosconfig.as_ref().ok_or_else(|| {
        Failure::Usage(
            "no talosconfig: set `talosconfig` in the configuration, or INFRA_TALOS_TALOSCONFIG"
                .into(),
        )
    })?;
    let store = &db.store;
    let connector = TalosconfigConnector::load(talosconfig, crate::ConnectOptions::default())
        .map_err(|e| Failure::Usage(e.to_string()))?;
    for view in store.machines().await? {
        let Some(record) = db.inventory.machine_record(&view.id).await? else {
            continue;
        };
        let endpoint = crate::NodeAddress::parse(&record.endpoint)
            .map_err(|e| Failure::Usage(format!("machine {}: {e}", record.id)))?;
        connector.add_machine(record.id.clone(), MachineRoute { endpoint });
    }
    let id = crate::controller::fresh_controller_id().map_err(|e| Failure::Usage(e.to_string()))?;
    Executor::new(
        id,
        Arc::clone(store),
        Arc::new(connector),
        keys,
        Arc::new(SystemClock::new()),
        settings,
    )
    .map_err(|e| Failure::Usage(e.to_string()))
}

async fn run_controller(db: &Db, config: &Config, args: RunArgs) -> Result<String, Failure> {
    let store = &db.store;
    let executor = executor(
        db,
        config,
        Arc::new(config.keyring()?),
        ExecutorSettings {
            settle_floor: SpanMs::from_secs(args.settle_floor),
            max_transport_deadline: SpanMs::from_secs(args.max_transport_deadline),
        },
    )
    .await?;
    let outcomes = match &args.plan {
        Some(plan) => {
            let plan = store.plan(plan).await?;
            if db.inventory.machine_record(&plan.machine).await?.is_none() {
                return Err(Failure::Refused(format!(
                    "refused: machine {} is not inventoried",
                    plan.machine
                )));
            }
            let outcome = executor
                .run_plan(&plan.id)
                .await
                .map_err(executor_failure)?;
            if plan.kind == crate::contract::operation::OperationKind::Adopt {
                let view = store.machine(&plan.machine).await?;
                return Ok(format!(
                    "plan {}: adoption recorded as operation {}; Applied is release {} at the \
                     observed digest {}; nothing was sent\n",
                    plan.id,
                    outcome.operation,
                    view.applied_release.unwrap_or_default(),
                    view.applied_digest.map(|d| d.to_hex()).unwrap_or_default(),
                ));
            }
            vec![outcome]
        }
        None => executor.start().await.map_err(executor_failure)?,
    };
    let mut out = String::new();
    if outcomes.is_empty() {
        out.push_str("no operation to resume\n");
    }
    let mut unfinished = false;
    let mut refusals = Vec::new();
    for outcome in &outcomes {
        let _ = write!(
            out,
            "plan {}: operation {} is {} after {} send(s)",
            outcome.plan, outcome.operation, outcome.state, outcome.sends
        );
        if let Some(c) = &outcome.classification {
            let _ = write!(out, "; classified {c}");
        }
        out.push('\n');
        if let Some(refusal) = &outcome.refusal {
            refusals.push(refusal_text(refusal));
        }
        if outcome.state.is_terminal() {
            continue;
        }
        unfinished = true;
        if args.resume && outcome.awaits_accounting() {
            // The reads §5.2 asks for: one begun after the transport deadline, and
            // one begun after the settle floor that follows it (and the takeover).
            let reads = executor
                .watch_unaccounted(&outcome.operation, 2)
                .await
                .map_err(executor_failure)?;
            for read in &reads {
                let _ = writeln!(
                    out,
                    "  recovery observation r{}: digest {}, config version {}",
                    read.basis.0,
                    read.digest.as_deref().unwrap_or("not read"),
                    read.config_version
                        .map_or_else(|| "not read".to_owned(), |v| v.to_string()),
                );
            }
            let _ = writeln!(
                out,
                "  recovery-admin may now account for each attempt (`account {} --attempt N`), then `run --resume` carries the operation on",
                outcome.operation
            );
        }
    }
    if !refusals.is_empty() {
        return Err(Failure::Refused(format!("{out}{}", refusals.join("\n"))));
    }
    if unfinished {
        return Err(Failure::Unfinished(out));
    }
    Ok(out)
}
