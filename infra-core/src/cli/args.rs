//! The command line: verbs and their options.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// The verbs and their options.
#[derive(Debug, Parser)]
#[command(
    about = "Plan and apply this fleet.",
    version,
    after_help = super::EXIT_CODES_HELP
)]
pub(super) struct Args {
    /// Where the ledger and the observation cache are kept.
    #[arg(long, global = true, default_value = ".infra", value_name = "DIR")]
    pub(super) state_dir: PathBuf,
    /// Where the records are kept instead of the state directory: a `postgres://` URL
    /// (shared by a team, locked per fleet), or `file:DIR`. Default: `INFRA_RECORDS_URL`,
    /// else the state directory.
    #[arg(long, global = true, value_name = "URL")]
    pub(super) records: Option<String>,
    /// How long a run that writes records waits for another run of the same fleet to
    /// finish (`30s`, `5m`); by default it does not wait, and says who holds the lock.
    #[arg(long, global = true, default_value = "0", value_name = "DURATION", value_parser = crate::records::parse_duration)]
    pub(super) lock_timeout: std::time::Duration,
    /// More logging on standard error (-v: info, -vv: debug).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub(super) verbose: u8,
    #[command(subcommand)]
    pub(super) verb: Verb,
}

#[derive(Debug, Subcommand)]
pub(super) enum Verb {
    /// Checks the declaration without credentials or network: names, references,
    /// cycles, secrets, ranges.
    Check,
    /// Observes the fleet's resources and records what was seen (not what is managed).
    Refresh,
    /// Shows what `apply` would do. Makes no change anywhere.
    Plan {
        /// Plan the teardown of the whole fleet instead.
        #[arg(long)]
        destroy: bool,
        /// Print the plan as JSON.
        #[arg(long)]
        json: bool,
        /// Exit 2 when the plan is complete and has changes (0: complete, no changes;
        /// 1: an error, or something could not be looked at).
        #[arg(long)]
        detailed_exitcode: bool,
        /// Also write the plan to FILE, for `apply FILE` to carry out exactly.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Replace this resource although it would otherwise be left unchanged or updated
        /// (repeatable; any address a plan prints). What cannot outlive it is replaced
        /// with it, and the plan says so.
        #[arg(long = "replace", value_name = "ADDRESS")]
        replace: Vec<String>,
        #[command(flatten)]
        scope: Scope,
    },
    /// Brings the clouds to the declaration, or carries out a plan file.
    Apply {
        /// A plan written by `plan --out FILE`: carried out exactly, or refused when
        /// anything it was made from has changed. Its scope and options are its own.
        #[arg(value_name = "FILE")]
        plan_file: Option<PathBuf>,
        /// Remove more than half of what the fleet manages while still declaring
        /// something.
        #[arg(long)]
        force: bool,
        /// Replace this resource although it would otherwise be left unchanged or updated
        /// (repeatable; any address a plan prints). What cannot outlive it is replaced
        /// with it, and the plan says so.
        #[arg(long = "replace", value_name = "ADDRESS")]
        replace: Vec<String>,
        #[command(flatten)]
        run: RunFlags,
        #[command(flatten)]
        scope: Scope,
    },
    /// Deletes every resource of the fleet (or those targeted), dependants first.
    Destroy {
        #[command(flatten)]
        run: RunFlags,
        #[command(flatten)]
        scope: Scope,
    },
    /// Plans every DURATION and prints a line per resource and field that drifted from
    /// the declaration (and per resource that could not be looked at: never drift).
    /// Never applies unless --apply. Stops between two rounds on SIGINT or SIGTERM.
    Watch {
        /// Time between two rounds (`30s`, `5m`).
        #[arg(long, value_name = "DURATION", value_parser = interval)]
        every: std::time::Duration,
        /// Apply each complete plan that has changes (the brake and `prevent_destroy`
        /// hold as for `apply`). The fleet's lock is taken for each apply alone (waiting
        /// up to --lock-timeout), and the plan made again under it.
        #[arg(long)]
        apply: bool,
        /// Stop after N rounds.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        rounds: Option<u64>,
        /// Serve Prometheus counts (rounds, drifted and unreachable resources, applies)
        /// at http://ADDR/metrics (infra-core's feature `metrics`).
        #[arg(long, value_name = "ADDR")]
        metrics_addr: Option<std::net::SocketAddr>,
    },
    /// Prints the fleet's outputs from the last observation the records keep, reaching
    /// no cloud unless --refresh is given. A secret output is shown only when named
    /// with --show-secret.
    Output {
        /// Only this output, its value alone (a string unquoted), for scripts.
        #[arg(value_name = "NAME")]
        name: Option<String>,
        /// Print the outputs as JSON.
        #[arg(long)]
        json: bool,
        /// Observe the fleet first and record what was seen, as `refresh` does.
        #[arg(long)]
        refresh: bool,
        /// Show the value of this secret output, read from its cloud (no record ever
        /// holds a secret value).
        #[arg(long, value_name = "NAME")]
        show_secret: Option<String>,
    },
    /// Adds to the ledger every resource in the fleet's regions that carries its
    /// ownership marker. Never removes a row.
    Discover {
        /// Also print, as Rust, the declaration of each resource added that the fleet
        /// does not declare: declaring exactly that makes the next plan of it say "No
        /// changes".
        #[arg(long)]
        emit_rust: bool,
    },
    /// Removes the fleet's lock whose id is LOCK_ID (printed by the run it turned away),
    /// whoever holds it. For a run that is gone; a run still going keeps writing.
    ForceUnlock {
        /// The lock's id.
        #[arg(value_name = "LOCK_ID")]
        id: String,
    },
    /// The record store itself.
    #[command(subcommand)]
    Records(RecordsVerb),
    /// What the records hold (`state list`, `state show ADDRESS`), and a row renamed to
    /// follow its resource (`state mv OLD NEW`).
    State {
        #[command(subcommand)]
        command: StateCommand,
    },
    /// Stops managing a resource without deleting it: its row and its cached
    /// observation are removed; the resource, and its ownership marker, stay in the
    /// cloud. Refused for a resource the fleet still declares.
    Forget {
        /// The resource, in any form a plan prints: `aws/postgres/db (eu-west-3)`,
        /// `aws/postgres/db` or `db`.
        #[arg(value_name = "ADDRESS")]
        address: String,
    },
    /// Prints the fleet's dependency graph as DOT: an edge from each resource to what
    /// it depends on. Reaches no cloud unless --plan is given.
    Graph {
        /// Colour each resource by what `apply` would do to it, reading the clouds as
        /// `plan` does (an incomplete plan colours what it could not look at as unknown,
        /// and exits 1).
        #[arg(long)]
        plan: bool,
    },
    /// Takes in a resource made by hand as the declared resource ADDRESS: shows what the
    /// next plan of it would say, then (confirmed, or with --yes) puts this fleet's
    /// ownership marker on it and records it. Refused, changing nothing, for an address
    /// not declared or already recorded, an id that names nothing or names another
    /// kind or region, and a resource carrying another fleet's marker.
    Import(ImportArgs),
    /// Takes over resources a Terraform state (version 4) lists: each one confirmed
    /// gets this fleet's ownership marker, then a row in the ledger, and its declaration
    /// is printed to paste into the fleet.
    ImportTfstate {
        /// The state file (`terraform.tfstate`, or `terraform state pull > FILE`).
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Import every resource that can be, without asking.
        #[arg(long, short = 'y')]
        yes: bool,
        /// Print the outcome as JSON (the list and the questions go to standard error).
        #[arg(long)]
        json: bool,
    },
}

/// `import ADDRESS CLOUD_ID`.
#[derive(Debug, clap::Args)]
pub(super) struct ImportArgs {
    /// The declared resource, in any form a plan prints.
    #[arg(value_name = "ADDRESS")]
    pub(super) address: String,
    /// The resource's id as its provider reads it (`state show` prints it as the
    /// handle): an instance's `i-…`, a queue's URL, a secret's ARN; for most other AWS
    /// kinds, its name.
    #[arg(value_name = "CLOUD_ID")]
    pub(super) id: String,
    /// Take it in without asking.
    #[arg(long, short = 'y')]
    pub(super) yes: bool,
    /// Print the outcome as JSON (what is shown before the question goes to standard
    /// error).
    #[arg(long)]
    pub(super) json: bool,
}

/// What `records` does.
#[derive(Debug, Subcommand)]
pub(super) enum RecordsVerb {
    /// Copies this fleet's records (ledger and cache) to another store — a `postgres://`
    /// URL or `file:DIR` — checks the copy, and leaves the source as it was. Refused
    /// when the destination already holds different records for this fleet.
    Migrate {
        /// The destination.
        #[arg(long, value_name = "URL")]
        to: String,
    },
    /// Moves resources from this fleet to fleet FLEET of the same store, creating and
    /// deleting nothing: each one's ownership marker is rewritten to FLEET's (the only
    /// cloud calls), then its row (with its marks) and its cached observation go to
    /// FLEET's records. Shows what moves and asks first; both fleets' locks are held.
    Move(super::moving::MoveArgs),
}

impl Verb {
    /// The verb's name, as a lock's holder describes what it is doing.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Verb::Check => "check",
            Verb::Refresh => "refresh",
            Verb::Plan { .. } => "plan",
            Verb::Apply { .. } => "apply",
            Verb::Destroy { .. } => "destroy",
            Verb::Discover { .. } => "discover",
            Verb::Import(_) => "import",
            Verb::Output { .. } => "output",
            Verb::Watch { .. } => "watch",
            Verb::ForceUnlock { .. } => "force-unlock",
            Verb::Records(RecordsVerb::Migrate { .. }) => "records migrate",
            Verb::Records(RecordsVerb::Move(_)) => "records move",
            Verb::State {
                command: StateCommand::List { .. },
            } => "state list",
            Verb::State {
                command: StateCommand::Show { .. },
            } => "state show",
            Verb::State {
                command: StateCommand::Mv { .. },
            } => "state mv",
            Verb::Forget { .. } => "forget",
            Verb::Graph { .. } => "graph",
            Verb::ImportTfstate { .. } => "import-tfstate",
        }
    }

    /// Whether the verb may write the fleet's records, and so holds its lock.
    pub(super) fn writes_records(&self) -> bool {
        match self {
            Verb::Output { refresh, .. } => *refresh,
            // A watch takes the lock for each apply alone (`crate::watch`).
            Verb::Check
            | Verb::Plan { .. }
            | Verb::Watch { .. }
            | Verb::ForceUnlock { .. }
            | Verb::Graph { .. }
            | Verb::State {
                command: StateCommand::List { .. } | StateCommand::Show { .. },
            } => false,
            Verb::Refresh
            | Verb::Apply { .. }
            | Verb::Destroy { .. }
            | Verb::Discover { .. }
            | Verb::Import(_)
            | Verb::Records(_)
            | Verb::Forget { .. }
            | Verb::ImportTfstate { .. }
            | Verb::State {
                command: StateCommand::Mv { .. },
            } => true,
        }
    }
}

/// What `state` does.
#[derive(Debug, Subcommand)]
pub(super) enum StateCommand {
    /// Lists the ledger's rows, with the ones `discover` adopted on the marker alone and
    /// the ones written before a create whose outcome is not known.
    List {
        /// Print the list as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Shows one row and what was last observed of its resource: its handle, its
    /// observed state, what this fleet last wrote of the fields the cloud does not
    /// report. Never a secret value.
    Show {
        /// The resource, in any form a plan prints.
        #[arg(value_name = "ADDRESS")]
        address: String,
        /// Print it as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Renames a row (and its cached observation) to follow its resource, when the
    /// cloud already knows that very resource (the same handle) as NEW: after a rename
    /// made in the cloud, or between two kinds that list the same resources. Refused
    /// otherwise, since no provider here can rename a resource: a declaration named NEW
    /// would not find it.
    Mv {
        /// The row to rename, in any form a plan prints.
        #[arg(value_name = "OLD")]
        old: String,
        /// Its new address: `provider/kind/name (region)`, `provider/kind/name`, or a bare
        /// name (the rest taken from OLD).
        #[arg(value_name = "NEW")]
        new: String,
    },
}

/// How a run that changes things asks and reports.
#[derive(Debug, clap::Args)]
pub(super) struct RunFlags {
    /// Answer yes to the question.
    #[arg(long, short = 'y')]
    pub(super) yes: bool,
    /// Print the result as JSON (the plan goes to standard error).
    #[arg(long)]
    pub(super) json: bool,
    /// Provider calls in flight at once, at most: per provider, region and API, fewer
    /// while the cloud throttles (halved on a throttle, grown back one by one).
    #[arg(long, default_value_t = 16, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(super) parallelism: u32,
    /// Keep --parallelism calls in flight per API even while a cloud throttles (by
    /// default the calls in flight halve on a throttle and grow back).
    #[arg(long)]
    pub(super) fixed_parallelism: bool,
}

/// Which resources a run covers.
#[derive(Debug, Default, clap::Args)]
pub(super) struct Scope {
    /// Only this resource and, building, what it depends on (tearing down, what depends
    /// on it). Any address a plan prints: `aws/postgres/db (eu-west-3)`,
    /// `aws/postgres/db` or `db`.
    #[arg(long = "target", value_name = "ADDRESS")]
    pub(super) targets: Vec<String>,
    /// Not this resource, nor, building, anything that depends on it (tearing down,
    /// anything it depends on).
    #[arg(long = "exclude", value_name = "ADDRESS")]
    pub(super) excludes: Vec<String>,
    /// Confirms the delete of a resource `discover` adopted on its ownership marker
    /// alone (such deletes are not made otherwise, except when confirmed at the prompt).
    #[arg(long = "allow-delete", value_name = "ADDRESS")]
    pub(super) allow_delete: Vec<String>,
}

impl Scope {
    pub(super) fn is_empty(&self) -> bool {
        self.targets.is_empty() && self.excludes.is_empty() && self.allow_delete.is_empty()
    }
}

/// A watch's interval: a duration longer than zero (a zero interval would plan without
/// pause).
fn interval(text: &str) -> Result<std::time::Duration, String> {
    let every = crate::records::parse_duration(text)?;
    if every.is_zero() {
        return Err(format!("{text:?}: the interval must be longer than zero"));
    }
    Ok(every)
}
