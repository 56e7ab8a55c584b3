//! The `talos` command set: inventory, publication, plans, approvals, revocations,
//! the controller, accounting decisions and the machine timeline, over the
//! controller's store.
//!
//! A consumer binary embeds [`TalosArgs`] as a subcommand and calls [`execute`]; the
//! `infra-talos` binary (feature `cli`) is [`run`] on the process's arguments.
//!
//! **Configuration.** The acting principal's proof (`certificate`, `private_key`) and
//! role (`role`), the store (`database`: `sqlite:<path>` or a `postgres://` URL), the
//! key custody artifacts are sealed and opened under (`transit`, recommended, or for
//! development the local keyring's directory, `keyring`; see the `custody` module), where the
//! store's backups are taken from (`backups_dir`), the talosconfig used to reach nodes
//! (`talosconfig`) and the service to act through instead of the store (`server`,
//! `server_ca`, `token_file`) and the denied-subject list (`denied_subjects`, see
//! [`crate::identity::denied`]) come from a JSON file (`--config`, or
//! `INFRA_TALOS_CONFIG`) and from the environment (`INFRA_TALOS_DATABASE`,
//! `INFRA_TALOS_TRANSIT_*`, `INFRA_TALOS_KEYRING`, `INFRA_TALOS_BACKUPS_DIR`,
//! `INFRA_TALOS_TALOSCONFIG`, `INFRA_TALOS_SERVER`, `INFRA_TALOS_DENIED_SUBJECTS`), the
//! environment winning; the flags win over both. No environment variable names who
//! acts: `INFRA_TALOS_ACTOR` and `INFRA_TALOS_ROLE` are refused.
//!
//! **Through the service.** With `--server`, every act but `init` and `serve` is made
//! through the service's JSON API (see [`crate::acts`]), proven by the client
//! certificate or a token; its output and exit code are the same as on the store.
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

mod command;
mod custody;
mod database;
mod drift;
mod identity;
mod plan;
mod recovery;
mod remote;
mod serve;
mod timeline;
mod when;

pub use identity::{InitArgs, PrincipalCommand};
pub use recovery::RecoveryCommand;
pub use serve::{ServeArgs, ServerCertificateArgs};
pub use when::{iso, parse_iso};

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use serde::Deserialize;

use crate::acts::{ActError, Acts, Controller, Grounds, PlanRequest};
use crate::contract::{Role, SpanMs};
use custody::Custody;
use database::{Db, open_store};

use crate::store::{Actor, StoreError};

/// The `talos` command set, for embedding as a subcommand of a consumer binary.
#[derive(Debug, Args)]
pub struct TalosArgs {
    /// The store: `sqlite:<path>` (an existing file, or with `--create` a new one) or a
    /// `postgres://` URL (overrides the configuration).
    #[arg(long, global = true)]
    pub database: Option<String>,
    /// A JSON configuration file (`certificate`, `private_key`, `role`, `database`,
    /// `transit`, `keyring`, `backups_dir`, `talosconfig`, `server`, `server_ca`,
    /// `token_file`, `denied_subjects`).
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
    /// Make the acts through the service at this URL (`https://HOST:PORT`) instead of
    /// on the database: proven by the client certificate, or by `--token-file`.
    #[arg(long, global = true, value_name = "URL")]
    pub server: Option<String>,
    /// The installation's authority certificate (PEM) the service's certificate is
    /// verified against (with `--server`).
    #[arg(long, global = true, value_name = "FILE")]
    pub server_ca: Option<PathBuf>,
    /// A file holding a token the service issued (`infra-talos token`), to be proven
    /// by instead of a client certificate (with `--server`).
    #[arg(long, global = true, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
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
    /// Plan the adoption of a machine's open drift record (§6.3): accept the
    /// configuration it runs as Applied, naming its Desired release (a publisher;
    /// an approver approves it, and `run PLAN` records it; nothing is sent). For an
    /// imported machine with no Applied, the handover of what its import read.
    Adopt(SettleArgs),
    /// Plan the revert of a machine's open drift record (§6.4): apply its Desired
    /// release over the drifted configuration (a publisher; its approval is marked
    /// as overwriting what no reviewer has seen).
    Revert(SettleArgs),
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
    /// Ask the service (`--server`) for a short-lived token naming the principal the
    /// client certificate proves; printed on standard output. Keep it as a secret.
    Token {
        /// How long it lasts: `15m`, `1h`, at most `12h`.
        #[arg(long, value_parser = when::parse_span, value_name = "SPAN", default_value = "15m")]
        lifetime: SpanMs,
    },
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
    /// The key to seal with (default: the configuration's `transit.key`, else
    /// `artifacts`). A Transit key must exist; a keyring key is made if missing.
    #[arg(long)]
    pub key: Option<String>,
    /// Someone who authored content in the release (repeat).
    #[arg(long = "authored-by")]
    pub authors: Vec<String>,
}

/// `plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The machine.
    pub machine: String,
    /// A revert of the machine's open drift record (the same as `revert MACHINE`).
    #[arg(long, conflicts_with = "adopt")]
    pub revert: bool,
    /// An adopt plan (§6.3): accept the open drift record's configuration, or for an
    /// imported machine with no Applied the configuration its import read, as
    /// Applied, naming the Desired release. Nothing is sent; `run PLAN` records the
    /// adoption against a fresh observation (the same as `adopt MACHINE`).
    #[arg(long)]
    pub adopt: bool,
    /// What the plan binds besides its machine.
    #[command(flatten)]
    pub options: PlanOptions,
}

/// `adopt` and `revert`: the plan that settles a machine's open drift record.
#[derive(Debug, Args)]
pub struct SettleArgs {
    /// The machine.
    pub machine: String,
    /// What the plan binds besides its machine.
    #[command(flatten)]
    pub options: PlanOptions,
}

/// A plan's identifier, expiry, evidence age, deadlines and budget.
#[derive(Debug, Args)]
pub struct PlanOptions {
    /// The plan's identifier (default: `<machine>-<release>-b<baseline>`, with
    /// `-adopt` or `-revert` after it for those plans).
    #[arg(long)]
    pub id: Option<String>,
    /// Seconds until the plan expires.
    #[arg(long, default_value_t = PlanRequest::EXPIRES_IN_SECS)]
    pub expires_in: u64,
    /// How old dispatch evidence may be, in seconds.
    #[arg(long, default_value_t = PlanRequest::MAX_EVIDENCE_AGE_SECS)]
    pub max_evidence_age: u64,
    /// Transport deadline of each request, in seconds.
    #[arg(long, default_value_t = PlanRequest::TRANSPORT_DEADLINE_SECS)]
    pub transport_deadline: u64,
    /// Verification deadline, in seconds.
    #[arg(long, default_value_t = PlanRequest::VERIFICATION_DEADLINE_SECS)]
    pub verification_deadline: u64,
    /// The attempt budget.
    #[arg(long, default_value_t = PlanRequest::MAX_ATTEMPTS)]
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
    /// Standard input when a person answers at a terminal: the questions a command
    /// asks (`init`'s) are asked on standard error and read here. `None`: nothing is
    /// asked, and each question keeps its stated default.
    pub input: Option<&'a mut dyn std::io::BufRead>,
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
        ActError::from(e).into()
    }
}

impl From<ActError> for Failure {
    fn from(e: ActError) -> Self {
        match e {
            ActError::Refused(text) => Failure::Refused(text),
            ActError::MissingMachine { machine, text } => Failure::MissingMachine { machine, text },
            ActError::Usage(text)
            | ActError::Unauthenticated(text)
            | ActError::Unavailable(text) => Failure::Usage(text),
        }
    }
}

/// A [`Failure::MissingMachine`] as the user reads it: the refusal, with the
/// inventoried names nearest to the one given ("did you mean …?"), so that a typo is
/// told as one.
async fn suggesting(text: String, machine: &str, acts: &dyn Acts) -> Failure {
    let near = match acts.machines().await {
        Ok(known) => infra_core::names::nearest(machine, known.iter().map(|m| m.id.as_str())),
        Err(_) => Vec::new(),
    };
    if near.is_empty() {
        return Failure::Refused(text);
    }
    let names: Vec<String> = near.iter().map(|n| format!("'{n}'")).collect();
    Failure::Refused(format!("{text}; did you mean {}?", names.join(", ")))
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
    /// The Transit key custody (see [`custody`]).
    transit: Option<custody::TransitFile>,
    keyring: Option<PathBuf>,
    backups_dir: Option<PathBuf>,
    talosconfig: Option<PathBuf>,
    server: Option<String>,
    server_ca: Option<PathBuf>,
    token_file: Option<PathBuf>,
    denied_subjects: Option<PathBuf>,
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
    /// What artifacts are sealed and opened with.
    custody: Custody,
    /// Where the store's backups are taken from, when configured.
    backups_dir: Option<PathBuf>,
    talosconfig: Option<PathBuf>,
    /// `--server`: the service to act through.
    server: Option<String>,
    server_ca: Option<PathBuf>,
    token_file: Option<PathBuf>,
    /// The denied-subject list, kept outside the database.
    denied_subjects: Option<PathBuf>,
    /// On an installation where no certificate is bound yet: the administrator the
    /// presented, unbound certificate would prove, and that certificate, for the
    /// first `principal bind-certificate`.
    first_binding: Option<(Actor, crate::identity::Fingerprint)>,
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
            custody: Custody::resolve(
                file.transit,
                var("INFRA_TALOS_KEYRING")
                    .map(PathBuf::from)
                    .or(file.keyring),
                env,
            )?,
            backups_dir: var("INFRA_TALOS_BACKUPS_DIR")
                .map(PathBuf::from)
                .or(file.backups_dir),
            talosconfig: var("INFRA_TALOS_TALOSCONFIG")
                .map(PathBuf::from)
                .or(file.talosconfig),
            server: args
                .server
                .clone()
                .or_else(|| var("INFRA_TALOS_SERVER"))
                .or(file.server),
            server_ca: args.server_ca.clone().or(file.server_ca),
            token_file: args.token_file.clone().or(file.token_file),
            // Set and empty: no list (as unset).
            denied_subjects: var("INFRA_TALOS_DENIED_SUBJECTS")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or(file.denied_subjects),
            first_binding: None,
        })
    }

    /// What acts are made on when made on the store: the key custody and
    /// talosconfig configured, each refused with why when an act needs it and it is
    /// missing.
    fn grounds(&self, db: &Db) -> Grounds {
        Grounds {
            store: Arc::clone(&db.store),
            inventory: Arc::clone(&db.inventory),
            keys: self.custody.keys(),
            controller: Controller::Talosconfig(self.talosconfig.clone()),
            denied: self.denied_list(),
        }
    }

    /// Logs the key custody's start warnings (see [`custody`]).
    fn warn_about_custody(&self) {
        for warning in self
            .custody
            .warnings(self.database.as_deref(), self.backups_dir.as_deref())
        {
            tracing::warn!("{warning}");
        }
    }

    /// The configured denied-subject list.
    fn denied_list(&self) -> Option<crate::identity::DeniedList> {
        self.denied_subjects
            .as_ref()
            .map(crate::identity::DeniedList::new)
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
pub async fn execute(mut args: TalosArgs, io: &mut Io<'_>) -> ExitCode {
    let asked = match (&mut args.command, io.input.as_mut()) {
        (Command::Init(init), Some(input)) => identity::ask_unanswered(init, &mut **input, io.err),
        _ => Ok(()),
    };
    let result = match asked.and_then(|()| Config::load(&args, &io.env)) {
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
    if let Some(server) = config.server.clone() {
        let remote = remote::Remote::connect(&config, &server).await?;
        return match command {
            Command::Token { lifetime } => {
                let answer = remote.token(lifetime).await?;
                Ok(format!(
                    "{}\n",
                    answer["token"].as_str().unwrap_or_default()
                ))
            }
            command => match store_only(&command) {
                Some(what) => Err(Failure::Usage(format!(
                    "{what} is made on the store (--database), not through a service"
                ))),
                None => command::on_acts(command, &config, &remote).await,
            },
        };
    }
    let db = open_store(config.database.as_deref(), config.create).await?;
    config.acting = Some(match identity::acting(&config, db.store.as_ref()).await {
        Ok(identity::Proven::Admitted(actor)) => Ok(actor),
        Ok(identity::Proven::FirstBinding {
            actor,
            fingerprint,
            refusal,
        }) => {
            config.first_binding = Some((actor, fingerprint));
            Err(refusal)
        }
        Err(why) => Err(why),
    });
    if uses_keys(&command) {
        config.warn_about_custody();
    }
    match command {
        Command::Init(args) => identity::init(&db, args, config.denied_list().as_ref()).await,
        Command::Principal(PrincipalCommand::BindCertificate { id, file })
            if config.first_binding.is_some() =>
        {
            let (actor, presented) = config.first_binding.clone().expect("checked");
            let acts = config.grounds(&db).acting(Ok(actor));
            identity::bind_first(&acts, &presented, &id, &file).await
        }
        Command::Serve(args) => serve::serve(&db, &config, args).await,
        Command::Token { .. } => Err(Failure::Usage(
            "a token is issued by the service: give --server URL".into(),
        )),
        command => {
            let acts = config.grounds(&db).acting(
                config
                    .acting
                    .clone()
                    .unwrap_or_else(|| Err("no acting identity".into())),
            );
            command::on_acts(command, &config, &acts).await
        }
    }
}

/// The commands that seal or open artifacts (or check that they open), and so give
/// the key custody's start warnings.
fn uses_keys(command: &Command) -> bool {
    matches!(
        command,
        Command::Serve(_) | Command::Publish(_) | Command::Run(_) | Command::Recovery(_)
    )
}

/// The commands made on the store only, and why, as a user reads it.
fn store_only(command: &Command) -> Option<&'static str> {
    match command {
        Command::Init(_) => Some("bootstrapping the installation (`init`)"),
        Command::Serve(_) => Some("`serve`"),
        _ => None,
    }
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
