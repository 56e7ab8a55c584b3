//! What each verb does, on a console.

use std::path::{Path, PathBuf};

use super::args::{RunFlags, Scope};
use super::console::{Io, ProgressStyle};
use super::render::{colour_lines, error, paint, render_discovery, render_result_titled};
use crate::engine::{PlanFile, Proposal, Refusal, with_refusal};
use crate::{
    ApplyError, ApplyResult, Engine, Fleet, NotAttemptedReason, Options, Outcome, Plan, PlanReport,
};

/// The options of a run from its flags.
pub(super) fn options(scope: Scope, parallelism: u32, force: bool) -> Options {
    Options {
        force,
        parallelism: parallelism as usize,
        adaptive: true,
        targets: scope.targets,
        excludes: scope.excludes,
        allow_delete: scope.allow_delete,
        replace: Vec::new(),
    }
}

/// The engine, reporting each finished resource of an apply on standard error as the
/// console allows.
pub(super) fn with_progress(engine: Engine, style: ProgressStyle) -> Engine {
    match style {
        ProgressStyle::Off => engine,
        ProgressStyle::Lines => engine.with_progress(|p| {
            eprintln!("[{}/{}] {} {}", p.done, p.total, p.what, p.resource);
        }),
        ProgressStyle::InPlace => engine.with_progress(|p| {
            eprint!(
                "\r\x1b[2K[{}/{}] {} {}",
                p.done, p.total, p.what, p.resource
            );
            if p.done == p.total {
                eprintln!();
            }
        }),
    }
}

pub(super) fn check(io: &mut Io<'_>, fleet: &Fleet) -> u8 {
    io.out(&format!(
        "fleet `{}`: {} resources, every check passed (names, references, cycles, secrets, ranges)\n",
        fleet.name(),
        fleet.len()
    ));
    io.out(&fleet.plan().render());
    0
}

pub(super) async fn refresh(io: &mut Io<'_>, engine: &Engine, fleet: &Fleet, records: &str) -> u8 {
    match engine.refresh(&fleet.plan()).await {
        Ok(report) => {
            io.out(&colour_lines(io.colour(), &report.render()));
            io.err(&format!("observations recorded in {records}"));
            if report.is_complete() { 0 } else { 1 }
        }
        Err(e) => error(io, &e),
    }
}

/// The flags of `plan` besides its scope.
pub(super) struct PlanVerb {
    pub(super) destroy: bool,
    pub(super) json: bool,
    pub(super) detailed_exitcode: bool,
    pub(super) out: Option<PathBuf>,
    pub(super) replace: Vec<String>,
}

pub(super) async fn plan(
    io: &mut Io<'_>,
    engine: &Engine,
    fleet: &Fleet,
    verb: PlanVerb,
    scope: Scope,
) -> u8 {
    let plan = if verb.destroy {
        Plan::absent(fleet)
    } else {
        fleet.plan()
    };
    // A teardown is forced (it is the verb for deleting everything); its plan says so.
    let options = options(scope, 16, verb.destroy).replacing(verb.replace);
    let proposal = match engine.propose(&plan, &options).await {
        Ok(p) => p,
        Err(e) => return error(io, &e),
    };
    let report = proposal.report();
    let refusal = engine.refusal(&proposal);
    print_plan(io, report, refusal.as_ref(), verb.json);
    match &refusal {
        // A plan no apply may carry out is an error, not a warning: no flag lifts it.
        Some(r) if !r.can_be_forced() => return error(io, &r.message()),
        Some(r) => io.err(&format!(
            "warning: applying this plan would be refused: {}",
            r.message()
        )),
        None => {}
    }
    if let Some(path) = &verb.out
        && let Err(e) = write_plan_file(path, &proposal)
    {
        return error(io, &e);
    }
    // Under --detailed-exitcode, 2 says "apply this"; a plan the brake would refuse
    // cannot be applied as it is.
    let code = if !report.is_complete() || (verb.detailed_exitcode && refusal.is_some()) {
        1
    } else if verb.detailed_exitcode && report.has_changes() {
        2
    } else {
        0
    };
    let_go((proposal, plan));
    code
}

/// Frees a large value on a thread of its own. Freeing the plan and the observation of
/// a large fleet took a sixth of a no-change plan's time, and nothing waits for it:
/// the answer is printed already, and the process may end before the thread does. Only
/// for values whose drop does nothing but free memory (no files, no locks).
pub(super) fn let_go<T: Send + 'static>(value: T) {
    // Should no thread start, the value is dropped here, as it would have been.
    let _ = std::thread::Builder::new()
        .name("let-go".into())
        .spawn(move || drop(value));
}

/// Prints a plan: as text, or as JSON with the refusal it would meet (`refused`,
/// absent when it would not be refused).
fn print_plan(io: &mut Io<'_>, report: &PlanReport, refusal: Option<&Refusal>, json: bool) {
    if json {
        let plan = with_refusal(report.to_json(), refusal);
        io.out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&plan).expect("JSON")
        ));
    } else {
        io.out(&colour_lines(io.colour(), &report.render()));
    }
}

/// Writes a plan file whole or not at all: a temporary file beside it, then a rename.
fn write_plan_file(path: &Path, proposal: &Proposal) -> std::io::Result<()> {
    let mut text = serde_json::to_vec_pretty(&proposal.to_file()).expect("a plan file serialises");
    text.push(b'\n');
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "plan.json".into());
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::write(&temp, &text).and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written.map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// `apply` and `destroy`: propose, show, ask, look again, carry out.
pub(super) async fn apply(
    io: &mut Io<'_>,
    engine: &Engine,
    plan: &Plan,
    options: Options,
    run: &RunFlags,
    verb: &str,
) -> u8 {
    let mut proposal = match engine.propose(plan, &options).await {
        Ok(p) => p,
        Err(e) => return refused(io, engine, plan, &e, run.json, verb),
    };
    show_plan(io, proposal.report(), run.json);
    // Refused before the question rather than after it.
    if let Err(e) = engine
        .check_protected(&proposal)
        .and_then(|()| engine.check_brake(&proposal))
    {
        return refused(io, engine, plan, &e, run.json, verb);
    }
    if !run.yes && proposal.report().has_changes() {
        if let Err((summary, why)) = ask(io, &mut proposal, verb) {
            io.err(&paint(io.colour(), &format!("error: {why}")));
            let result = engine.stopped(plan, NotAttemptedReason::Refused, summary);
            return finish(io, &result, None, run.json, verb);
        }
        // What was shown is what runs: look again before changing anything.
        if let Err(e) = engine.recheck(&proposal).await {
            return refused(io, engine, plan, &e, run.json, verb);
        }
    }
    carry_out(io, engine, &proposal, run, verb).await
}

/// Asks a person to confirm the plan shown (and, separately, any delete that needs a
/// confirmation by name). `Err` says, in a few words and in full, why nothing will run.
fn ask(io: &mut Io<'_>, proposal: &mut Proposal, verb: &str) -> Result<(), (&'static str, String)> {
    if !io.interactive() {
        return Err((
            "refused: nobody could be asked (no terminal, no --yes)",
            format!(
                "`{verb}` changes real resources and asks first, but there is no terminal to \
                 ask on. Review the plan above, then run again with --yes (or apply a plan file)"
            ),
        ));
    }
    let question = format!(
        "Do you want to {verb} these changes to fleet `{}`?",
        proposal.report().fleet
    );
    if !io.confirm(&question) {
        return Err((
            "refused: declined at the prompt",
            format!("{verb} declined at the prompt; nothing was changed"),
        ));
    }
    let unconfirmed: Vec<String> = proposal
        .report()
        .unconfirmed_deletes()
        .map(|s| format!("  - {s}"))
        .collect();
    if !unconfirmed.is_empty() {
        io.err(&format!(
            "These resources were adopted by `discover` on their ownership marker alone (a \
             marker can be copied), and the plan deletes them:\n{}",
            unconfirmed.join("\n")
        ));
        if io.confirm("Delete each of them?") {
            proposal.confirm_deletes();
        }
    }
    Ok(())
}

/// `apply FILE`: the plan in the file, carried out exactly, or refused as stale.
pub(super) async fn apply_file(
    io: &mut Io<'_>,
    engine: &Engine,
    fleet: &Fleet,
    path: &Path,
    run: &RunFlags,
) -> u8 {
    let file = match read_plan_file(path, fleet.name()) {
        Ok(f) => f,
        Err(why) => return error(io, &why),
    };
    let plan = if file.teardown {
        Plan::absent(fleet)
    } else {
        fleet.plan()
    };
    let verb = if file.teardown { "destroy" } else { "apply" };
    let options = file
        .options(run.parallelism as usize)
        .adaptive(!run.fixed_parallelism);
    let proposal = match engine.propose(&plan, &options).await {
        Ok(p) => p,
        Err(e) => return refused(io, engine, &plan, &e, run.json, verb),
    };
    let stale = engine
        .recheck_against(&proposal, &file.fingerprint)
        .err()
        .or_else(|| {
            (proposal.report().to_json() != file.report).then(|| ApplyError::Stale {
                changes: vec!["the plan made now differs from the one in the file".into()],
            })
        });
    if let Some(e) = stale {
        return refused(io, engine, &plan, &e, run.json, verb);
    }
    show_plan(io, proposal.report(), run.json);
    carry_out(io, engine, &proposal, run, verb).await
}

fn read_plan_file(path: &Path, fleet: &str) -> Result<PlanFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    check_plan_file_version(path, &text)?;
    let file: PlanFile = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{}:{}:{}: not a plan file of this version ({e})",
            path.display(),
            e.line(),
            e.column()
        )
    })?;
    if file.fleet != fleet {
        return Err(format!(
            "{}: this plan is for fleet `{}`, not `{fleet}`",
            path.display(),
            file.fleet
        ));
    }
    Ok(file)
}

/// Refuses a plan file another version of the format wrote before its fields are read,
/// so that the message names the versions rather than a field this build does not know.
/// A file without a readable version is left to the full read, which says where it is
/// malformed.
fn check_plan_file_version(path: &Path, text: &str) -> Result<(), String> {
    #[derive(serde::Deserialize)]
    struct Versioned {
        #[serde(rename = "planFile")]
        plan_file: Option<String>,
    }
    let ours = crate::engine::PLAN_FILE_VERSION;
    let Some(found) = serde_json::from_str::<Versioned>(text)
        .ok()
        .and_then(|v| v.plan_file)
    else {
        return Ok(());
    };
    if found == ours {
        return Ok(());
    }
    let number = |v: &str| v.strip_prefix('v').and_then(|n| n.parse::<u32>().ok());
    let newer = matches!((number(&found), number(ours)), (Some(f), Some(o)) if f > o);
    Err(if newer {
        format!(
            "{}: plan file version {found:?} was written by a newer version of infra than \
             this build ({ours:?}); the file was left untouched — apply it with the build that \
             made it, or make the plan again with this one",
            path.display()
        )
    } else {
        format!(
            "{}: plan file version {found:?} is not the one this build reads ({ours:?}); the \
             file was left untouched — make the plan again with this build",
            path.display()
        )
    })
}

fn show_plan(io: &mut Io<'_>, report: &PlanReport, json: bool) {
    if json {
        // Standard output holds the result's JSON alone.
        io.err(report.render().trim_end());
    } else {
        io.out(&colour_lines(io.colour(), &report.render()));
    }
}

async fn carry_out(
    io: &mut Io<'_>,
    engine: &Engine,
    proposal: &Proposal,
    run: &RunFlags,
    verb: &str,
) -> u8 {
    match engine.carry_out(proposal).await {
        Ok(Outcome {
            result, unsaved, ..
        }) => {
            if !run.json {
                io.out("\n");
            }
            finish(io, &result, unsaved.as_deref(), run.json, verb)
        }
        Err(e) => refused(io, engine, proposal.plan(), &e, run.json, verb),
    }
}

/// A run refused as a whole: the error, and a result in which every resource it
/// covers is not attempted (`refused`).
pub(super) fn refused(
    io: &mut Io<'_>,
    engine: &Engine,
    plan: &Plan,
    e: &ApplyError,
    json: bool,
    verb: &str,
) -> u8 {
    error(io, e);
    let result = engine.stopped(plan, NotAttemptedReason::Refused, &e.summary());
    finish(io, &result, None, json, verb)
}

/// Prints a result and says how the run exits: 0 only when everything converged (or
/// was left out by the caller) and the records were saved.
fn finish(
    io: &mut Io<'_>,
    result: &ApplyResult,
    unsaved: Option<&str>,
    json: bool,
    verb: &str,
) -> u8 {
    if json {
        io.out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&result.to_envelope()).expect("JSON")
        ));
    } else {
        let title = if verb == "destroy" {
            "Destroy"
        } else {
            "Apply"
        };
        io.out(&colour_lines(
            io.colour(),
            &render_result_titled(result, title),
        ));
    }
    if let Some(why) = unsaved {
        error(
            io,
            &format!("the records could not be saved after the calls above: {why}"),
        );
        return 1;
    }
    if result.is_success() { 0 } else { 1 }
}

pub(super) async fn discover(
    io: &mut Io<'_>,
    engine: &Engine,
    fleet: &Fleet,
    emit_rust: bool,
) -> u8 {
    match engine.discover(&fleet.plan()).await {
        Ok(d) => {
            io.out(&colour_lines(
                io.colour(),
                &render_discovery(fleet.name(), &d),
            ));
            if emit_rust {
                let emitted = super::emit::discovered::discovered(engine, fleet, &d.added).await;
                if !emitted.declarations.is_empty() {
                    io.out(&format!(
                        "\nDeclare them in the fleet as their clouds have them (declaring exactly \
                         this makes the next plan of each say \"No changes\"):\n{}{}",
                        emitted.preamble(),
                        emitted.code()
                    ));
                }
            }
            if d.is_complete() { 0 } else { 1 }
        }
        Err(e) => error(io, &e),
    }
}
