//! `records move ADDRESS... --to FLEET`: resources handed from this fleet to another
//! fleet of the same store, creating and deleting nothing.
//!
//! The move takes both fleets' locks, in the order of their names (two opposite moves
//! cannot each hold one and wait for the other), reads both fleets' records, and looks
//! at each resource's ownership marker. It is refused, changing nothing, when an address
//! names no row of this fleet, when FLEET's records already hold that address for a
//! resource still carrying this fleet's marker, when a resource carries neither fleet's
//! marker (or none), when it cannot be found or its tags cannot be read, and when
//! FLEET's records are in another store (`--to-records`). Otherwise it shows what moves
//! and which markers change, and asks (`--yes` answers; without a terminal it refuses).
//!
//! Then each marker is rewritten to FLEET's (the only cloud calls), and the rows and
//! cached observations of the resources now carrying it move in the order
//! [`crate::records::move_rows`] documents, in one transaction on PostgreSQL. A run
//! killed anywhere leaves records that neither fleet's next run creates or deletes
//! anything from, and the same move run again completes it: a resource already carrying
//! FLEET's marker has its records moved with no cloud call.

mod render;
mod survey;

use std::collections::BTreeSet;
use std::time::Duration;

use super::console::Io;
use super::render::error;
use super::store;
use crate::records::move_rows;
use crate::{Engine, Fleet, LedgerRow, LockGuard, Marker};
use survey::{Item, MarkerNow, Survey};

/// The arguments of `records move`.
#[derive(Debug, clap::Args)]
pub(super) struct MoveArgs {
    /// The resources to move, in any form a plan prints: `aws/postgres/db (eu-west-3)`,
    /// `aws/postgres/db` or `db`.
    #[arg(value_name = "ADDRESS", required = true)]
    pub(super) addresses: Vec<String>,
    /// The fleet taking them over: its name, as its own program declares it.
    #[arg(long, value_name = "FLEET")]
    pub(super) to: String,
    /// Where FLEET's records are, when named apart (a `postgres://` URL or `file:DIR`):
    /// the move is refused unless that is this run's store.
    #[arg(long, value_name = "URL")]
    pub(super) to_records: Option<String>,
    /// Answer yes to the question.
    #[arg(long, short = 'y')]
    pub(super) yes: bool,
    /// Print the outcome as JSON (the plan goes to standard error).
    #[arg(long)]
    pub(super) json: bool,
}

/// What became of one resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Not attempted (the question was declined).
    NotAttempted,
    /// Its marker and its records are FLEET's.
    Moved,
    /// Its marker could not be rewritten; its records were left in this fleet.
    Failed(String),
}

/// `records move ADDRESS... --to FLEET`.
pub(super) async fn records_move(
    io: &mut Io<'_>,
    engine: &Engine,
    fleet: &Fleet,
    verb: MoveArgs,
    lock_timeout: Duration,
) -> u8 {
    let from = fleet.name();
    if let Err(why) = check_destination(engine, from, &verb) {
        return error(io, &format!("{why}; nothing was changed"));
    }
    let _locks = match lock_both(io, engine, from, &verb.to, lock_timeout).await {
        Ok(guards) => guards,
        Err(e) => return error(io, &e),
    };
    let survey = match survey::survey(engine, fleet, &verb.to, &verb.addresses).await {
        Ok(survey) => survey,
        Err(why) => return error(io, &why),
    };
    if !survey.refused.is_empty() {
        return refused(io, &verb, from, &survey);
    }
    let mut items = survey.items;
    let plan = render::plan(from, &verb.to, &engine.store().describe(), &items);
    if verb.json {
        io.err(plan.trim_end());
    } else {
        io.out(&plan);
    }
    if let Err(why) = confirm(io, &verb, &items) {
        if verb.json {
            io.out(&render::outcome_json(from, &verb.to, &items, &[]));
        }
        return error(io, &why);
    }
    let code = carry_out(io, engine, from, &verb.to, &mut items).await;
    if verb.json {
        io.out(&render::outcome_json(from, &verb.to, &items, &[]));
    } else {
        io.out(&render::outcome(fleet, &verb.to, &items));
    }
    code
}

/// Refuses a destination that cannot be: a bad name, this very fleet, or records kept
/// in another store.
fn check_destination(engine: &Engine, from: &str, verb: &MoveArgs) -> Result<(), String> {
    if let Err(why) = crate::default_name_rule(&verb.to) {
        return Err(format!("{:?} cannot be a fleet's name: it {why}", verb.to));
    }
    if verb.to == from {
        return Err(format!(
            "the resources are fleet `{from}`'s already: give another fleet to --to"
        ));
    }
    let Some(location) = verb.to_records.as_deref() else {
        return Ok(());
    };
    let theirs = store::open(location)?;
    let ours = engine.store().describe();
    if theirs.describe() != ours {
        return Err(format!(
            "fleet `{}`'s records are in {}, this fleet's in {ours}: a move changes both \
             fleets' records together, in one store. Bring them into one store first \
             (`records migrate --to URL`, run by the fleet whose records move)",
            verb.to,
            theirs.describe()
        ));
    }
    Ok(())
}

/// Both fleets' locks, taken in the order of the fleets' names.
async fn lock_both(
    io: &mut Io<'_>,
    engine: &Engine,
    from: &str,
    to: &str,
    timeout: Duration,
) -> Result<[LockGuard; 2], crate::LockError> {
    let (first, second) = if from < to { (from, to) } else { (to, from) };
    let records = &**engine.store();
    let one = store::lock(io, records, first, "records move", timeout).await?;
    let two = store::lock(io, records, second, "records move", timeout).await?;
    Ok([one, two])
}

/// Every refusal at once, and nothing changed.
fn refused(io: &mut Io<'_>, verb: &MoveArgs, from: &str, survey: &Survey) -> u8 {
    if verb.json {
        io.out(&render::outcome_json(
            from,
            &verb.to,
            &survey.items,
            &survey.refused,
        ));
    }
    let lines: Vec<String> = survey
        .refused
        .iter()
        .map(|(address, why)| format!("  {address}: {why}"))
        .collect();
    error(
        io,
        &format!(
            "the move to fleet `{}` is refused:\n{}\nnothing was changed, in the cloud or in \
             the records",
            verb.to,
            lines.join("\n")
        ),
    )
}

/// Asks (unless `--yes`); refused without a terminal to ask on, or when declined.
fn confirm(io: &mut Io<'_>, verb: &MoveArgs, items: &[Item]) -> Result<(), String> {
    if verb.yes {
        return Ok(());
    }
    if !io.interactive() {
        return Err(
            "`records move` rewrites ownership markers in the cloud and asks first, but there \
             is no terminal to ask on. Review the plan above, then run again with --yes; \
             nothing was changed"
                .into(),
        );
    }
    let question = format!(
        "Move {} to fleet `{}`?",
        render::count(items.len(), "resource"),
        verb.to
    );
    if io.confirm(&question) {
        Ok(())
    } else {
        Err("declined; nothing was changed".into())
    }
}

/// Rewrites each marker, then moves the records of every resource now carrying
/// FLEET's marker (or the legacy one). 0 when everything moved.
async fn carry_out(
    io: &mut Io<'_>,
    engine: &Engine,
    from: &str,
    to: &str,
    items: &mut [Item],
) -> u8 {
    let marker = Marker::new(to).handed_over_from(from);
    for item in items.iter_mut() {
        if item.marker != MarkerNow::Source {
            continue;
        }
        let written = item
            .backend
            .mark(item.kind, &item.row.region, &item.handle, &marker)
            .await;
        if let Err(e) = written {
            item.outcome = Outcome::Failed(format!("its marker could not be rewritten: {e}"));
        }
    }
    let rows: BTreeSet<LedgerRow> = items
        .iter()
        .filter(|i| i.outcome == Outcome::NotAttempted)
        .map(|i| i.row.clone())
        .collect();
    let unmoved = move_rows(&**engine.store(), from, to, &rows).err();
    for item in items.iter_mut() {
        if item.outcome != Outcome::NotAttempted {
            continue;
        }
        item.outcome = match &unmoved {
            None => Outcome::Moved,
            Some(e) => Outcome::Failed(format!(
                "it carries fleet `{to}`'s marker, but its records could not be moved ({e})"
            )),
        };
    }
    if unmoved.is_some() {
        return error(
            io,
            &"the records were not moved: run the same move again to complete it \
              (meanwhile neither fleet creates or deletes these resources)",
        );
    }
    u8::from(items.iter().any(|i| i.outcome != Outcome::Moved))
}
