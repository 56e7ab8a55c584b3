//! The command-line runner for a consumer's own binary (feature `cli`, on by default).
//!
//! ```no_run
//! use infra_core::{prelude::AwsRegion, prelude::Backends, prelude::Fleet, kinds::ObjectStore};
//!
//! fn main() -> std::process::ExitCode {
//!     let mut fleet = Fleet::builder("shop");
//!     fleet.declare(AwsRegion::EuWest3, "shop-assets", ObjectStore::new());
//!     infra_core::cli::run(fleet.build(), |_fleet| Backends::new())
//! }
//! ```
//!
//! # Backends that load asynchronously
//!
//! A real cloud's backend loads its credentials asynchronously, so [`run_async`] takes an
//! async factory; like [`run`]'s, it is called (and awaited) only for the verbs that
//! need backends, never for `check`, `force-unlock` or `records migrate`:
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use infra_core::{prelude::AwsRegion, sdk::Backend, prelude::Backends, prelude::Fleet, sdk::Unreachable, kinds::ObjectStore};
//!
//! /// Stands in for `infra_aws::AwsBackend::from_env`, which loads AWS's credentials.
//! async fn from_env() -> Arc<dyn Backend> {
//!     Arc::new(Unreachable::new("aws", "a stand-in for the AWS backend"))
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     let mut fleet = Fleet::builder("shop");
//!     fleet.declare(AwsRegion::EuWest3, "shop-assets", ObjectStore::new());
//!     infra_core::cli::run_async(fleet.build(), async |_fleet| {
//!         Backends::new().with(from_env().await)
//!     })
//! }
//! ```
//!
//! With the `infra-aws` crate the factory is
//! `async |_fleet| Backends::new().with(infra_aws::AwsBackend::from_env().await)`
//! (`examples/aws-fleet` in the repository is such a binary). [`run_with_async`] is the
//! in-process twin of [`run_with`], for tests and embedding.
//!
//! Verbs: `check` (offline), `refresh`, `plan`, `apply`, `destroy`, `discover`,
//! `output` (the fleet's outputs, from the records), `watch` (drift, every interval),
//! `force-unlock`, `records migrate`, `records move`. Reports
//! and JSON go to standard output; logs (`-v`, `-vv`), progress, questions and errors to
//! standard error (with `--json`, the plan an apply shows goes there too, so that
//! standard output holds one JSON document). Colour and cursor control only on a
//! terminal that takes them: never with `NO_COLOR` set or `TERM=dumb`. A backend that
//! is unreachable for a reason of several lines (what was looked for and what to do, as
//! `infra_aws::AwsBackend::from_env` gives without credentials) has it said once, in
//! full, on standard error by every verb that reaches the clouds; beside each resource
//! the report carries its first line.
//!
//! The records by hand: `state list` and `state show ADDRESS` (read them), `state mv OLD
//! NEW`, `forget ADDRESS` (touches no cloud), `import ADDRESS CLOUD_ID` (takes in one
//! resource made by hand as a declared one), `import-tfstate FILE` (takes over what a
//! Terraform state lists); and `graph` (the dependency graph as DOT, offline; `graph
//! --plan` reads the clouds).
//!
//! A plan that applying would refuse says so: `plan` prints the refusal on standard
//! error (an error for `prevent_destroy`, which no flag lifts; a warning for the brake,
//! which `--force` lifts), and `plan --json` carries it as `refused`
//! ([`Refusal`](crate::engine::Refusal): `{"by": "brake", "message", "deletes",
//! "absent", "managed"}` or `{"by": "prevent_destroy", "message", "resources": [{"resource",
//! "action"}]}`), a member absent when the plan would not be refused.
//!
//! # Taking in a resource made by hand
//!
//! `import ADDRESS CLOUD_ID` reads the resource whose id is `CLOUD_ID` in the kind and
//! region the fleet declares `ADDRESS` in, shows what the next plan of it would say once
//! it is taken in (the plan's own lines: unchanged, or the fields an apply would change)
//! and the declaration, as Rust, that would make that plan say "No changes" instead;
//! then, confirmed at the prompt or by `--yes` (without a terminal and without `--yes`
//! it is refused, as `apply` is), puts the fleet's ownership marker on it and writes its
//! row and its cached observation. `CLOUD_ID` is the handle the provider reads the
//! resource by, as `state show` prints it:
//!
//! | provider | kinds whose id is their name | the others |
//! |---|---|---|
//! | AWS | buckets (`objectStore`, `s3Bucket`), functions, databases, roles, registries | a secret's ARN, an instance's `i-…`, a security group's `sg-…`, a queue's URL |
//! | Google Cloud | buckets, Cloud SQL instances | a service account's email, a topic's, a secret's, a service's or a repository's resource name (`projects/…`) |
//! | Scaleway | buckets | a queue's URL, the id (a UUID) of anything else (a function is `namespace-id/function-id`) |
//!
//! It is refused, changing nothing, for an address the fleet does not declare (present),
//! an address already in the records, an id that names nothing (an id found as another
//! kind of the provider or in another region the fleet uses is named as such), a
//! resource carrying another fleet's marker, a kind that cannot carry the marker, and a
//! resource the cloud lists under another name than the declared one (a plan finds a
//! resource by its name, so the next one would not find it). A read that fails is an
//! error, never "absent". `--json` prints one document (`"import": "v1"`: `status`
//! `imported`, `declined`, `refused` with a closed `refusal`, or `failed`; the `plan`
//! line; the `declaration` with the variables it uses). `discover --emit-rust` prints
//! the same kind of declaration for each resource it adds that the fleet does not
//! declare. Printed declarations assume `use infra_core::{kinds::*, prelude::*};`, name
//! a reference by a variable named after its resource, and list the variables they use
//! without defining them; a field the cloud does not report and the fleet does not
//! declare is given a stand-in the code says is one (a plan does not compare it).
//!
//! # Reviewing before a change
//!
//! `apply` and `destroy` show what they will do and ask before doing it; `--yes`
//! answers for you, and without a terminal they refuse unless `--yes` is given. What was
//! shown is what runs: after a person answers, everything the plan was made from is
//! looked at again, and the run is refused, naming what changed, if anything did.
//! `plan --out FILE` keeps a plan for `apply FILE`, which carries it out exactly or
//! refuses it as stale. Every `apply` and `destroy` accounts for every declared resource
//! and every row of the records in its result (`--json`: the `apply` envelope), even
//! when it is refused before any call.
//!
//! # Records and the fleet's lock
//!
//! Records are kept in the state directory (`--state-dir`, `.infra` by default), or in
//! the store `--records URL` (or `INFRA_RECORDS_URL`) names: `postgres://…` for a
//! team's shared records (feature `postgres`), `file:DIR`. Every record is read and
//! checked before the first cloud call. A run that may write records (`apply`,
//! `destroy`, `discover`, `refresh`, `records migrate`) holds the fleet's lock for its
//! whole duration: a second such run is refused at once, naming the holder (host,
//! process, verb, since when, lock id), or waits up to `--lock-timeout DURATION`. A lock
//! whose run died is released with it (the operating system's file lock, the database
//! session) and reported by the run that takes it over; `force-unlock LOCK_ID` removes a
//! lock deliberately. `plan` and `check` take no lock.
//!
//! # Exit codes
//!
//! | verb | 0 | 1 | 2 |
//! |---|---|---|---|
//! | `check` | every check passed | a check failed, or a usage error | — |
//! | `refresh` | every resource looked at, cache written | something could not be looked at, an error | — |
//! | `plan` | complete (and, with `--detailed-exitcode`, no changes) | something could not be looked at or cannot be decided, a plan `prevent_destroy` would refuse, a plan the brake would refuse (`--detailed-exitcode` only; without it, a warning), an error, a failed write of the output or the plan file | complete, with changes, and not refused (`--detailed-exitcode` only) |
//! | `apply`, `destroy` | every resource converged or pruned, or left out by `--target`/`--exclude`; records saved | anything failed or not attempted for another reason, a refusal (gate, brake, stale plan, declined question), records not saved, an error | — |
//! | `discover` | every place in scope looked at | something could not be looked at, an error | — |
//! | `force-unlock` | the lock was removed | no lock has that id, an error | — |
//! | `records migrate` | the records were copied and read back equal | the destination holds other records, an error | — |
//! | `records move` | every resource named carries FLEET's marker and its records are FLEET's | a refusal (nothing changed), a declined question or no terminal and no `--yes`, a marker that could not be rewritten (that resource stays), records not moved (run it again), a lock held by another run | — |
//! | `state list`, `state show` | the records were read (and the address names one row) | an address that names no row (the nearest are named) or several, records that cannot be read | — |
//! | `state mv` | the row and its cached observation moved | a refusal (the cloud does not show that very resource under the new address, another region or provider, a row there already), the lock held by another run, an error | — |
//! | `forget` | the row and its cached observation removed; the cloud untouched | a resource still declared, an unknown address, the lock held by another run, an error | — |
//! | `graph` | the graph printed (with `--plan`: and the plan complete) | with `--plan`: something could not be looked at (coloured unknown), an error | — |
//! | `import` | the resource was marked, recorded and cached | a refusal (see above: nothing was changed), a no at the prompt, no terminal and no `--yes`, a read or a mark that failed, records not saved, the lock held by another run | — |
//! | `discover --emit-rust` | as `discover` | as `discover` | — |
//! | `import-tfstate` | every resource confirmed was marked and recorded (those that cannot be taken over are listed, and left alone) | a file that is not a version 4 state (named with its line), a refusal (no terminal and no --yes), something that could not be looked at or marked, records not saved, the lock held by another run | — |
//!
//! A run turned away by the lock exits 1 (`apply` and `destroy` with every resource
//! `not attempted: refused`).
//!
//! # Moving resources between fleets
//!
//! `records move ADDRESS... --to FLEET` splits a fleet or merges two, creating and
//! deleting nothing: each resource's ownership marker is rewritten to FLEET's (the only
//! cloud calls), then its row (with its marks) and its cached observation go to FLEET's
//! records, in the same store. It holds both fleets' locks, taken in the order of the
//! fleets' names so that two opposite moves cannot each wait for the other; shows what
//! moves and which markers change; and asks as `apply` does (`--yes`; no terminal and no
//! `--yes` refuses). `--json` prints the outcome (`"move": "v1"`) with the plan on
//! standard error. Refused, changing nothing: an address this fleet's records do not
//! hold, one FLEET's records hold while the resource carries this fleet's marker, a
//! resource carrying another fleet's marker or none, one that does not exist or whose
//! tags cannot be read, and FLEET's records in another store (`--to-records URL` names
//! where they are).
//!
//! The marker is written first, then FLEET's records, then this fleet's (in one
//! transaction on PostgreSQL; the order and why each step is safe are in
//! [`crate::records::move_rows`]). A run killed anywhere leaves records from which
//! neither fleet's next run creates or deletes anything, and the same move run again
//! completes it. The way to split: declare the resources in FLEET, run the move from
//! this fleet's program, then take the declarations out of this fleet; each fleet's next
//! plan says "No changes". (A resource this fleet stops declaring *before* its marker is
//! rewritten is an orphan of this fleet, and its next apply deletes it: move first.)
//!
//! `state mv`, `forget`, `import` and `import-tfstate` hold the fleet's lock from their first read
//! of the records to their last write (another run holding it refuses them at once).
//! `forget` is the command-line twin of the declaration's `FleetBuilder::forget`: the
//! resource stays in the cloud with its ownership marker, so `discover` would take it
//! back. `state mv` renames a row only when the cloud already shows that very resource
//! (the same handle) under the new address: a resource is found by the name it is
//! declared under, and no provider here renames one, so renaming a declaration alone
//! is refused rather than recorded.
//!
//! A usage error (an unknown flag, a missing value) exits 1, never 2: under
//! `--detailed-exitcode`, 2 means "changes present" and nothing else. A failed write of
//! standard output (a full disk, a closed pipe) exits 1 whatever the verb.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;

mod args;
mod console;
mod emit;
mod graph;
mod import;
#[cfg(feature = "metrics")]
mod metrics;
mod moving;
mod output;
mod reach;
mod render;
mod state;
mod store;
mod tfstate;
mod verbs;
mod watch;

pub use crate::engine::Progress;
pub use console::{Console, ProgressStyle};
pub use render::render_result;

use crate::{ApplyError, Backends, CheckReport, Engine, Fleet, LockGuard, Plan, Unreachable};
use args::{Args, RecordsVerb, Verb};
use console::Io;

/// The exit codes, as `--help` shows them.
const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  success: checks passed; the plan is complete (with --detailed-exitcode: and has no
     changes); every resource converged, was pruned or was left out by --target/--exclude
  1  an error, a usage error, a refusal, something that could not be looked at, a
     resource failed or not attempted, records or output that could not be written;
     plan --detailed-exitcode: a plan that applying would refuse (brake, prevent_destroy)
  2  plan --detailed-exitcode only: the plan is complete, has changes, and would not be
     refused";

/// Runs the command line of the process: parses the arguments, builds the backends
/// only for the verbs that need them, and returns the exit code.
pub fn run<F>(fleet: Result<Fleet, CheckReport>, backends: F) -> ExitCode
where
    F: FnOnce(&Fleet) -> Backends,
{
    run_async(fleet, async move |fleet: &Fleet| backends(fleet))
}

/// [`run`] with a factory that awaits: the form for real clouds, whose backends load
/// their credentials asynchronously (`infra_aws::AwsBackend::from_env().await`). The
/// factory is awaited only for the verbs that need backends, inside the runner's own
/// runtime (so it may use Tokio).
pub fn run_async<F>(fleet: Result<Fleet, CheckReport>, backends: F) -> ExitCode
where
    F: AsyncFnOnce(&Fleet) -> Backends,
{
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) => return usage(&e),
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

/// A parse error: help and version are printed on standard output and exit 0; a real
/// usage error on standard error, exiting 1.
fn usage(e: &clap::Error) -> ExitCode {
    let _ = e.print();
    if e.use_stderr() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Runs one command line: a parse error is printed to the console's error stream and
/// answers 1 (help and version go to its output and answer 0). For tests and for
/// embedding.
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
    run_with_async(
        argv,
        fleet,
        async move |fleet: &Fleet| backends(fleet),
        console,
    )
    .await
}

/// [`run_with`] with a factory that awaits, as [`run_async`] takes: it is awaited only
/// for the verbs that need backends.
pub async fn run_with_async<I, T, F>(
    argv: I,
    fleet: Result<Fleet, CheckReport>,
    backends: F,
    console: &mut Console,
) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
    F: AsyncFnOnce(&Fleet) -> Backends,
{
    match Args::try_parse_from(argv) {
        Ok(args) => execute(args, fleet, backends, console).await,
        Err(e) => {
            let text = e.render().to_string();
            let mut io = Io::new(console);
            if e.use_stderr() {
                io.err(text.trim_end());
                let _ = io.finish();
                1
            } else {
                io.out(&text);
                if io.finish() { 0 } else { 1 }
            }
        }
    }
}

fn init_logging(verbose: u8) {
    use std::io::IsTerminal as _;
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
        .with_ansi(std::io::stderr().is_terminal() && console::decorations_allowed())
        .try_init();
}

async fn execute<F>(
    args: Args,
    fleet: Result<Fleet, CheckReport>,
    backends: F,
    console: &mut Console,
) -> u8
where
    F: AsyncFnOnce(&Fleet) -> Backends,
{
    let mut io = Io::new(console);
    let code = match fleet {
        Err(report) => {
            let text = render::paint(io.colour(), &format!("error: {report}"));
            io.err(&text);
            1
        }
        Ok(fleet) => {
            let code = dispatch(args, &fleet, backends, &mut io).await;
            verbs::let_go(fleet);
            code
        }
    };
    if io.finish() { code } else { code.max(1) }
}

async fn dispatch<F>(args: Args, fleet: &Fleet, backends: F, io: &mut Io<'_>) -> u8
where
    F: AsyncFnOnce(&Fleet) -> Backends,
{
    if let Verb::Check = args.verb {
        return verbs::check(io, fleet);
    }
    let location = store::location(args.records.as_deref(), &args.state_dir);
    let records = match store::open(&location) {
        Ok(s) => s,
        Err(e) => return render::error(io, &e),
    };
    if let Some(code) = about_the_store(&args, fleet, &*records, io).await {
        return code;
    }
    let mut backends = backends(fleet).await;
    if reaches_clouds(&args.verb) {
        say_why_unreachable(io, &mut backends);
    }
    let mut engine = Engine::new(backends, records.clone());
    engine = verbs::with_progress(engine, io.progress());
    // A move takes both fleets' locks itself, in the order of their names.
    if let Verb::Records(RecordsVerb::Move(verb)) = args.verb {
        return moving::records_move(io, &engine, fleet, verb, args.lock_timeout).await;
    }
    // One writer per fleet: the lock is held from the first read of the records to
    // the last write.
    let lock: Option<LockGuard> = if args.verb.writes_records() {
        let name = args.verb.name();
        match store::lock(io, &*records, fleet.name(), name, args.lock_timeout).await {
            Ok(guard) => Some(guard),
            Err(e) => return refused_before_start(io, Some(&engine), fleet, &args.verb, e.into()),
        }
    } else {
        None
    };
    // Calls start only while the lock is known held.
    if let Some(guard) = &lock {
        engine = engine.with_lease(guard.lease());
    }
    let code = run_verb(args.verb, args.lock_timeout, fleet, &engine, io).await;
    drop(lock);
    code
}

/// Whether the verb calls the clouds (`state list`, `state show`, `forget` and `graph`
/// without `--plan` read only the records and the declaration).
fn reaches_clouds(verb: &Verb) -> bool {
    use args::StateCommand;
    match verb {
        Verb::Refresh
        | Verb::Plan { .. }
        | Verb::Apply { .. }
        | Verb::Destroy { .. }
        | Verb::Discover { .. }
        | Verb::Import(_)
        | Verb::State {
            command: StateCommand::Mv { .. },
        }
        | Verb::Graph { plan: true }
        | Verb::ImportTfstate { .. }
        | Verb::Records(RecordsVerb::Move(_))
        | Verb::Watch { .. } => true,
        Verb::Output {
            refresh,
            show_secret,
            ..
        } => *refresh || show_secret.is_some(),
        Verb::Check
        | Verb::ForceUnlock { .. }
        | Verb::Records(_)
        | Verb::State { .. }
        | Verb::Forget { .. }
        | Verb::Graph { plan: false } => false,
    }
}

/// An unreachable backend whose reason runs to several lines (what was looked for, what
/// to do) has it said once, in full, on standard error; the report of each resource
/// then carries only its first line, and points there.
fn say_why_unreachable(io: &mut Io<'_>, backends: &mut Backends) {
    let providers: Vec<&'static str> = backends.providers().collect();
    for provider in providers {
        let Some(why) = backends.get(provider).and_then(|b| b.unreachable()) else {
            continue;
        };
        let Some((summary, _)) = why.split_once('\n') else {
            continue;
        };
        let text = render::paint(
            io.colour(),
            &format!("error: {provider} is unreachable: {why}"),
        );
        io.err(&text);
        let summary = format!("{} (see standard error)", summary.trim_end());
        backends.insert(Arc::new(Unreachable::new(provider, summary)));
    }
}

/// The verbs about the store itself, which need no backend: `force-unlock` and
/// `records migrate`. `None` for every other verb.
async fn about_the_store(
    args: &Args,
    fleet: &Fleet,
    records: &dyn crate::RecordStore,
    io: &mut Io<'_>,
) -> Option<u8> {
    match &args.verb {
        Verb::ForceUnlock { id } => Some(store::force_unlock(io, records, fleet.name(), id)),
        Verb::Records(RecordsVerb::Migrate { to }) => {
            let name = args.verb.name();
            let lock = store::lock(io, records, fleet.name(), name, args.lock_timeout).await;
            let _guard = match lock {
                Ok(guard) => guard,
                Err(e) => return Some(refused_before_start(io, None, fleet, &args.verb, e.into())),
            };
            Some(store::migrate(io, records, fleet.name(), to, args.lock_timeout).await)
        }
        _ => None,
    }
}

/// One verb that works on the fleet, with its engine (and, if it writes records, the
/// fleet's lock held by the caller).
async fn run_verb(
    verb: Verb,
    lock_timeout: std::time::Duration,
    fleet: &Fleet,
    engine: &Engine,
    io: &mut Io<'_>,
) -> u8 {
    match verb {
        Verb::Check => unreachable!("handled above"),
        Verb::Refresh => verbs::refresh(io, engine, fleet, &engine.store().describe()).await,
        Verb::Plan {
            destroy,
            json,
            detailed_exitcode,
            out,
            replace,
            scope,
        } => {
            let plan = verbs::PlanVerb {
                destroy,
                json,
                detailed_exitcode,
                out,
                replace,
            };
            verbs::plan(io, engine, fleet, plan, scope).await
        }
        Verb::Apply {
            plan_file: Some(file),
            force,
            replace,
            run,
            scope,
        } => {
            if force || !scope.is_empty() || !replace.is_empty() {
                io.err(&render::paint(
                    io.colour(),
                    "error: a plan file carries its own scope and options: give `apply FILE` \
                     no --target, --exclude, --allow-delete, --replace or --force (make a new plan with them)",
                ));
                return 1;
            }
            verbs::apply_file(io, engine, fleet, &file, &run).await
        }
        Verb::Apply {
            plan_file: None,
            force,
            replace,
            run,
            scope,
        } => {
            let options = verbs::options(scope, run.parallelism, force)
                .replacing(replace)
                .adaptive(!run.fixed_parallelism);
            verbs::apply(io, engine, &fleet.plan(), options, &run, "apply").await
        }
        Verb::Destroy { run, scope } => {
            let options =
                verbs::options(scope, run.parallelism, true).adaptive(!run.fixed_parallelism);
            verbs::apply(
                io,
                engine,
                &crate::Plan::absent(fleet),
                options,
                &run,
                "destroy",
            )
            .await
        }
        Verb::Discover { emit_rust } => verbs::discover(io, engine, fleet, emit_rust).await,
        Verb::Import(a) => {
            let verb = import::ImportVerb {
                address: a.address,
                id: a.id,
                yes: a.yes,
                json: a.json,
            };
            import::import(io, engine, fleet, verb).await
        }
        Verb::Output {
            name,
            json,
            refresh,
            show_secret,
        } => {
            let verb = output::OutputVerb {
                name,
                json,
                refresh,
                show_secret,
            };
            output::output(io, engine, fleet, verb).await
        }
        Verb::Watch {
            every,
            apply,
            rounds,
            metrics_addr,
        } => {
            let options = crate::watch::WatchOptions::every(every)
                .apply(apply)
                .rounds(rounds)
                .lock_timeout(lock_timeout);
            watch::watch(io, engine, fleet, &options, metrics_addr).await
        }
        Verb::State { command } => state_command(io, engine, fleet, command).await,
        Verb::Forget { address } => state::forget(io, fleet, &**engine.store(), &address).await,
        Verb::Graph { plan: false } => graph::graph(io, fleet),
        Verb::Graph { plan: true } => graph::graph_plan(io, engine, fleet).await,
        Verb::ImportTfstate { file, yes, json } => {
            let verb = tfstate::ImportVerb { file, yes, json };
            tfstate::import(io, engine, fleet, verb).await
        }
        Verb::ForceUnlock { .. } | Verb::Records(_) => unreachable!("handled above"),
    }
}

/// A run turned away before it began (the lock is another run's): `apply` and
/// `destroy` still account for every resource, as refused.
fn refused_before_start(
    io: &mut Io<'_>,
    engine: Option<&Engine>,
    fleet: &Fleet,
    verb: &Verb,
    e: ApplyError,
) -> u8 {
    match (verb, engine) {
        (Verb::Apply { run, .. }, Some(engine)) => {
            verbs::refused(io, engine, &fleet.plan(), &e, run.json, "apply")
        }
        (Verb::Destroy { run, .. }, Some(engine)) => {
            verbs::refused(io, engine, &Plan::absent(fleet), &e, run.json, "destroy")
        }
        _ => render::error(io, &e),
    }
}

async fn state_command(
    io: &mut Io<'_>,
    engine: &Engine,
    fleet: &Fleet,
    command: args::StateCommand,
) -> u8 {
    use args::StateCommand;
    match command {
        StateCommand::List { json } => state::list(io, fleet, &**engine.store(), json),
        StateCommand::Show { address, json } => {
            state::show(io, fleet, &**engine.store(), &address, json)
        }
        StateCommand::Mv { old, new } => state::mv(io, engine, fleet, &old, &new).await,
    }
}
