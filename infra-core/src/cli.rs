//! The command-line runner for a consumer's own binary (feature `cli`, on by default).
//!
//! ```no_run
//! use infra_core::{AwsRegion, Backends, Fleet, kinds::ObjectStore};
//!
//! fn main() -> std::process::ExitCode {
//!     let mut fleet = Fleet::builder("shop");
//!     fleet.declare(AwsRegion::EuWest3, "shop-assets", ObjectStore::new());
//!     infra_core::cli::run(fleet.build(), |_fleet| Backends::new())
//! }
//! ```
//!
//! Verbs: `check` (offline), `refresh`, `plan`, `apply`, `destroy`, `discover`. Reports
//! and JSON go to standard output; logs (`-v`, `-vv`), progress and questions to
//! standard error. Colour only on a terminal, and never with `NO_COLOR` set. `apply` and
//! `destroy` show what they will do and ask before doing it; `--yes` answers for you,
//! and without a terminal they refuse unless `--yes` is given.
//!
//! Exit codes: 0 for success (or no changes), 1 for an error or a refusal, 2 for "changes
//! present" with `plan --detailed-exitcode`.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};

pub use crate::engine::Progress;
use crate::{
    ApplyResult, Backends, CheckReport, Engine, FileStore, Fleet, Options, Plan, PlanReport,
};

/// The verbs and their options.
#[derive(Debug, Parser)]
#[command(about = "Plan and apply this fleet.", version)]
struct Args {
    /// Where the ledger and the observation cache are kept.
    #[arg(long, global = true, default_value = ".infra", value_name = "DIR")]
    state_dir: PathBuf,
    /// More logging on standard error (-v: info, -vv: debug).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Debug, Subcommand)]
enum Verb {
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
        /// Exit 2 when the plan has changes (0: none, 1: error).
        #[arg(long)]
        detailed_exitcode: bool,
        #[command(flatten)]
        scope: Scope,
    },
    /// Brings the clouds to the declaration.
    Apply {
        /// Delete more than half of what the fleet manages while still declaring something.
        #[arg(long)]
        force: bool,
        /// Answer yes to the question.
        #[arg(long, short = 'y')]
        yes: bool,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        /// Provider calls in flight at once.
        #[arg(long, default_value_t = 16, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
        parallelism: u32,
        #[command(flatten)]
        scope: Scope,
    },
    /// Deletes every resource of the fleet, dependants first.
    Destroy {
        /// Answer yes to the question.
        #[arg(long, short = 'y')]
        yes: bool,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        /// Provider calls in flight at once.
        #[arg(long, default_value_t = 16, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
        parallelism: u32,
    },
    /// Rebuilds the ledger from the ownership markers found in the clouds.
    Discover,
}

#[derive(Debug, clap::Args)]
struct Scope {
    /// Only this resource (name or provider/kind/name) and what it depends on.
    #[arg(long = "target", value_name = "NAME")]
    targets: Vec<String>,
    /// Not this resource, nor anything that depends on it.
    #[arg(long = "exclude", value_name = "NAME")]
    excludes: Vec<String>,
}

/// Where the runner writes and how it asks.
pub struct Console {
    /// Standard output: reports and JSON.
    pub out: Box<dyn Write + Send>,
    /// Standard error: logs, progress, questions, errors.
    pub err: Box<dyn Write + Send>,
    /// Whether a person can answer a question.
    pub interactive: bool,
    /// Whether to colour the output.
    pub colour: bool,
    /// Asks a yes/no question; `true` for yes.
    pub confirm: Box<dyn FnMut(&str) -> bool + Send>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("interactive", &self.interactive)
            .field("colour", &self.colour)
            .finish()
    }
}

impl Console {
    /// The process's own terminal (or pipes).
    pub fn stdio() -> Self {
        let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
        let colour = std::io::stdout().is_terminal()
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        Console {
            out: Box::new(std::io::stdout()),
            err: Box::new(std::io::stderr()),
            interactive,
            colour,
            confirm: Box::new(|question| {
                eprint!("{question} [y/N] ");
                let _ = std::io::stderr().flush();
                let mut answer = String::new();
                std::io::stdin().lock().read_line(&mut answer).is_ok()
                    && matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes")
            }),
        }
    }
}

/// Runs the command line of the process: parses the arguments, builds the backends
/// only for the verbs that need them, and returns the exit code.
pub fn run<F>(fleet: Result<Fleet, CheckReport>, backends: F) -> ExitCode
where
    F: FnOnce(&Fleet) -> Backends,
{
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) => e.exit(),
    };
    init_logging(args.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: could not start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let mut console = Console::stdio();
    let code = runtime.block_on(execute(args, fleet, backends, &mut console));
    ExitCode::from(code)
}

/// Runs one command line (without the program name's handling of `--help` errors: a
/// parse error is printed to the console's error stream and answers 1). For tests and
/// for embedding.
pub async fn run_with<I, T, F>(
    argv: I,
    fleet: Result<Fleet, CheckReport>,
    backends: F,
    console: &mut Console,
) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
    F: FnOnce(&Fleet) -> Backends,
{
    match Args::try_parse_from(argv) {
        Ok(args) => execute(args, fleet, backends, console).await,
        Err(e) => {
            let _ = write!(console.err, "{e}");
            if e.use_stderr() { 1 } else { 0 }
        }
    }
}

fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("INFRA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .try_init();
}

async fn execute<F>(
    args: Args,
    fleet: Result<Fleet, CheckReport>,
    backends: F,
    console: &mut Console,
) -> u8
where
    F: FnOnce(&Fleet) -> Backends,
{
    let fleet = match fleet {
        Ok(fleet) => fleet,
        Err(report) => {
            let _ = writeln!(
                console.err,
                "{}",
                paint(console.colour, RED, &format!("error: {report}"))
            );
            return 1;
        }
    };
    if let Verb::Check = args.verb {
        let _ = writeln!(
            console.out,
            "fleet `{}`: {} resources, every check passed (names, references, cycles, secrets, ranges)",
            fleet.name(),
            fleet.len()
        );
        let _ = write!(console.out, "{}", fleet.plan().render());
        return 0;
    }
    let store = Arc::new(FileStore::new(&args.state_dir));
    let mut engine = Engine::new(backends(&fleet), store);
    if console.interactive {
        // A progress line on standard error, rewritten in place.
        engine = engine.with_progress(|p| {
            eprint!(
                "\r\x1b[2K[{}/{}] {} {}",
                p.done, p.total, p.what, p.resource
            );
            if p.done == p.total {
                eprintln!();
            }
        });
    }
    match args.verb {
        Verb::Check => unreachable!("handled above"),
        Verb::Refresh => match engine.refresh(&fleet.plan()).await {
            Ok(report) => {
                let _ = write!(
                    console.out,
                    "{}",
                    colour_plan(console.colour, &report.render())
                );
                let _ = writeln!(
                    console.err,
                    "observations recorded under {}",
                    args.state_dir.join(fleet.name()).display()
                );
                0
            }
            Err(e) => refuse(console, &e),
        },
        Verb::Plan {
            destroy,
            json,
            detailed_exitcode,
            scope,
        } => {
            let plan = if destroy {
                Plan::absent(&fleet)
            } else {
                fleet.plan()
            };
            let options = Options {
                targets: scope.targets,
                excludes: scope.excludes,
                ..Options::default()
            };
            match engine.plan(&plan, &options).await {
                Ok(report) => {
                    print_plan(console, &report, json);
                    if report.has_failures() {
                        1
                    } else if detailed_exitcode && report.has_changes() {
                        2
                    } else {
                        0
                    }
                }
                Err(e) => refuse(console, &e),
            }
        }
        Verb::Apply {
            force,
            yes,
            json,
            parallelism,
            scope,
        } => {
            let options = Options {
                force,
                parallelism: parallelism as usize,
                targets: scope.targets,
                excludes: scope.excludes,
            };
            apply(
                console,
                &engine,
                &fleet.plan(),
                &options,
                yes,
                json,
                "apply",
            )
            .await
        }
        Verb::Destroy {
            yes,
            json,
            parallelism,
        } => {
            let options = Options {
                force: true,
                parallelism: parallelism as usize,
                ..Options::default()
            };
            apply(
                console,
                &engine,
                &Plan::absent(&fleet),
                &options,
                yes,
                json,
                "destroy",
            )
            .await
        }
        Verb::Discover => match engine.discover(&fleet.plan()).await {
            Ok(ledger) => {
                let _ = writeln!(
                    console.out,
                    "the ledger of fleet `{}` now lists {} resource{} carrying its marker:",
                    fleet.name(),
                    ledger.len(),
                    if ledger.len() == 1 { "" } else { "s" }
                );
                for row in &ledger.rows {
                    let _ = writeln!(console.out, "  {row}");
                }
                0
            }
            Err(e) => refuse(console, &e),
        },
    }
}

#[allow(clippy::too_many_arguments)]
async fn apply(
    console: &mut Console,
    engine: &Engine,
    plan: &Plan,
    options: &Options,
    yes: bool,
    json: bool,
    verb: &str,
) -> u8 {
    let report = match engine.plan(plan, options).await {
        Ok(report) => report,
        Err(e) => return refuse(console, &e),
    };
    if !json {
        let _ = write!(
            console.out,
            "{}",
            colour_plan(console.colour, &report.render())
        );
    }
    if !report.has_changes() {
        if json {
            print_result(console, &ApplyResult::default(), true, verb);
        }
        return if report.has_failures() { 1 } else { 0 };
    }
    if !yes {
        if !console.interactive {
            let _ = writeln!(
                console.err,
                "error: `{verb}` changes real resources and asks first, but there is no terminal to \
                 ask on. Review the plan above, then run again with --yes"
            );
            return 1;
        }
        let question = format!(
            "Do you want to {verb} these changes to fleet `{}`?",
            report.fleet
        );
        if !(console.confirm)(&question) {
            let _ = writeln!(console.err, "{verb} cancelled; nothing was changed");
            return 1;
        }
    }
    match engine.apply(plan, options).await {
        Ok(outcome) => {
            if !json {
                let _ = writeln!(console.out);
            }
            print_result(console, &outcome.result, json, verb);
            if outcome.result.is_success() { 0 } else { 1 }
        }
        Err(e) => refuse(console, &e),
    }
}

fn print_plan(console: &mut Console, report: &PlanReport, json: bool) {
    if json {
        let _ = writeln!(
            console.out,
            "{}",
            serde_json::to_string_pretty(&report.to_json()).expect("JSON")
        );
    } else {
        let _ = write!(
            console.out,
            "{}",
            colour_plan(console.colour, &report.render())
        );
    }
}

/// The result as text for people.
pub fn render_result(result: &ApplyResult) -> String {
    render_result_titled(result, "Apply")
}

fn render_result_titled(result: &ApplyResult, verb: &str) -> String {
    use std::fmt::Write as _;
    let width = result
        .subjects()
        .map(|(s, _)| s.to_string().len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    let mut line = |mark: char, subject: &crate::Subject, what: String| {
        let _ = writeln!(out, "  {mark} {:<width$}  {what}", subject.to_string());
    };
    for a in &result.applied {
        let mark = match a.change {
            crate::Change::Created => '+',
            crate::Change::Updated => '~',
            crate::Change::Replaced => '±',
            crate::Change::Unchanged => ' ',
        };
        line(mark, &a.resource, format!("{:?}", a.change).to_lowercase());
    }
    for p in &result.pruned {
        let how = if p.already_absent {
            "pruned (already gone)"
        } else {
            "pruned"
        };
        line('-', &p.resource, how.to_owned());
    }
    for n in &result.not_attempted {
        let detail = n
            .detail
            .as_deref()
            .map(|d| format!(" ({d})"))
            .unwrap_or_default();
        line(
            '·',
            &n.resource,
            format!("not attempted: {}{detail}", n.reason),
        );
    }
    for f in &result.failed {
        let step = format!("{:?}", f.step).to_lowercase();
        line('!', &f.resource, format!("failed to {step}: {}", f.error));
    }
    let count = |c: crate::Change| result.applied.iter().filter(|a| a.change == c).count();
    let _ = writeln!(
        out,
        "{} {}: {} created, {} updated, {} replaced, {} unchanged, {} pruned, {} not attempted, {} failed.",
        verb,
        if result.is_success() {
            "complete"
        } else {
            "incomplete"
        },
        count(crate::Change::Created),
        count(crate::Change::Updated),
        count(crate::Change::Replaced),
        count(crate::Change::Unchanged),
        result.pruned.len(),
        result.not_attempted.len(),
        result.failed.len(),
    );
    out
}

fn print_result(console: &mut Console, result: &ApplyResult, json: bool, verb: &str) {
    if json {
        let _ = writeln!(
            console.out,
            "{}",
            serde_json::to_string_pretty(&result.to_envelope()).expect("JSON")
        );
    } else {
        let title = if verb == "destroy" {
            "Destroy"
        } else {
            "Apply"
        };
        let _ = write!(
            console.out,
            "{}",
            colour_plan(console.colour, &render_result_titled(result, title))
        );
    }
}

fn refuse(console: &mut Console, error: &dyn std::fmt::Display) -> u8 {
    let _ = writeln!(
        console.err,
        "{}",
        paint(console.colour, RED, &format!("error: {error}"))
    );
    1
}

const RED: &str = "31";
const GREEN: &str = "32";
const YELLOW: &str = "33";
const MAGENTA: &str = "35";

fn paint(colour: bool, code: &str, text: &str) -> String {
    if colour {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

/// Colours each line of a rendered plan or result by its leading mark.
fn colour_plan(colour: bool, text: &str) -> String {
    if !colour {
        return text.to_owned();
    }
    text.lines()
        .map(|line| {
            let code = match line.trim_start().chars().next() {
                Some('+') => Some(GREEN),
                Some('~') => Some(YELLOW),
                Some('±') => Some(MAGENTA),
                Some('-') | Some('!') => Some(RED),
                _ => None,
            };
            match code {
                Some(code) => paint(true, code, line),
                None => line.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + if text.ends_with('\n') { "\n" } else { "" }
}
