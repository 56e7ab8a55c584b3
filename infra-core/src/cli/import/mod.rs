//! `import ADDRESS CLOUD_ID`: take in a resource made by hand as one the fleet declares.
//!
//! The resource is read by its id (`CLOUD_ID`: the handle the provider reads it by, as
//! `state show` prints it — for most of AWS's kinds its name; see the README) in the
//! kind and region the declaration gives ([`find`]). Then the run shows what the next
//! plan of the resource would say once it is taken in — the plan's own decision and
//! lines, made by the engine (`Engine::preview_import`) — and the declaration that
//! would make that plan say "No changes" (`cli::emit`). Confirmed (at the prompt, or
//! with `--yes`; without a terminal and without `--yes` it is refused, as `apply`
//! refuses), the fleet's ownership marker is put on the resource, then its row is
//! written to the ledger and its observation to the cache.
//!
//! Refused, changing nothing ([`Refusal`]): an address the fleet does not declare, a
//! resource already in the records, an id that names nothing, an id of another kind or
//! region, a resource carrying another fleet's marker, one the cloud lists under
//! another name (the next plan would not find it). A call that fails is a failure,
//! never "absent".

mod find;
mod report;

use super::console::Io;
use super::emit::reported::{Emitted, Taken, emit};
use super::render::error;
use crate::engine::ImportPreview;
use crate::{CacheEntry, Engine, Fleet, LedgerRow, Marker, Subject};
use find::{Found, Stop};

/// The arguments of `import`.
pub(super) struct ImportVerb {
    pub(super) address: String,
    pub(super) id: String,
    pub(super) yes: bool,
    pub(super) json: bool,
}

/// Why a resource is not taken in, from a closed set (`--json`'s `refusal`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
enum Refusal {
    /// The fleet does not declare the address.
    NotDeclared,
    /// The address has a row in the records already.
    AlreadyManaged,
    /// The id names nothing.
    Absent,
    /// The id names a resource of another kind, or in another region.
    Elsewhere,
    /// The resource carries another fleet's marker.
    OtherFleet,
    /// The kind cannot carry the marker.
    Unmarkable,
    /// The cloud lists the resource under another name than the declared one.
    OtherName,
    /// The cloud's list does not show the resource (yet).
    Unlisted,
    /// No terminal to ask on, and no `--yes`.
    NoTerminal,
}

/// How a run of `import` ended.
enum Outcome {
    /// Taken in: marked (unless it carried the marker), recorded and cached.
    Imported {
        marked_now: bool,
    },
    /// Declined at the prompt; nothing changed.
    Declined,
    Refused(Refusal, String),
    /// Something failed; the sentence says what was and was not changed.
    Failed(String),
}

/// Everything the run learnt of the resource before asking.
struct Seen {
    subject: Subject,
    found: Found,
    preview: ImportPreview,
    emitted: Emitted,
}

/// `import ADDRESS CLOUD_ID`.
pub(super) async fn import(
    io: &mut Io<'_>,
    engine: &Engine,
    fleet: &Fleet,
    verb: ImportVerb,
) -> u8 {
    let (outcome, seen) = match look(engine, fleet, &verb).await {
        Ok(seen) => {
            report::show(io, fleet, &verb, &seen);
            let outcome = match confirm(io, fleet, &verb, &seen) {
                Ok(true) => take_in(engine, fleet, &seen).await,
                Ok(false) => Outcome::Declined,
                Err(why) => Outcome::Refused(Refusal::NoTerminal, why),
            };
            (outcome, Some(seen))
        }
        Err(Stop::Refused(refusal, why)) => (Outcome::Refused(refusal, why), None),
        Err(Stop::Failed(why)) => (Outcome::Failed(why), None),
    };
    report::outcome(io, fleet, &verb, seen.as_ref(), &outcome);
    match outcome {
        Outcome::Imported { .. } => 0,
        Outcome::Declined => 1,
        Outcome::Refused(_, why) => error(io, &format!("{why}. Nothing was changed")),
        Outcome::Failed(why) => error(io, &why),
    }
}

/// The declared resource the address names, the resource the id names, and what the
/// next plan would say of it once taken in.
async fn look(engine: &Engine, fleet: &Fleet, verb: &ImportVerb) -> Result<Seen, Stop> {
    let subject = declared(fleet, &verb.address)?;
    let row = row_of(&subject);
    let ledger = engine
        .store()
        .load_ledger(fleet.name())
        .map_err(|e| Stop::Failed(e.to_string()))?;
    if ledger.rows.contains(&row) {
        return Err(Stop::Refused(
            Refusal::AlreadyManaged,
            format!(
                "{subject} is already in the records of fleet `{}` (`state show` says what they \
                 hold): it is managed already",
                fleet.name()
            ),
        ));
    }
    let found = find::find(fleet, engine.backends(), &ledger, &row, &verb.id).await?;
    let preview = engine
        .preview_import(&fleet.plan(), &subject, found.sighting.clone())
        .await
        .map_err(|e| Stop::Failed(e.to_string()))?
        .ok_or_else(|| Stop::Failed(format!("the plan has no line for {subject}")))?;
    if let Some(blind) = preview.report.blind().next() {
        return Err(Stop::Failed(format!(
            "what the next plan of {subject} would say cannot be told: {} could not be looked \
             at or decided ({})",
            blind.resource,
            blind.detail.as_deref().unwrap_or(blind.action)
        )));
    }
    let emitted = declaration(fleet, &subject, &found, &preview);
    Ok(Seen {
        subject,
        found,
        preview,
        emitted,
    })
}

/// The one declared resource `address` names (in any form a plan prints).
fn declared(fleet: &Fleet, address: &str) -> Result<Subject, Stop> {
    let subjects: Vec<Subject> = fleet
        .resources()
        .map(|r| {
            let rf = r.reference();
            Subject {
                provider: rf.provider.to_owned(),
                kind: rf.kind.to_owned(),
                name: rf.name.clone(),
                region: r.region().to_owned(),
            }
        })
        .collect();
    let not_declared = |more: String| {
        Stop::Refused(
            Refusal::NotDeclared,
            format!(
                "{address:?} names no resource fleet `{}` declares{more}: declare it first, then \
                 import it",
                fleet.name()
            ),
        )
    };
    match crate::engine::resolve_address(address, &subjects) {
        Ok(hits) if hits.len() == 1 => {
            let subject = subjects[hits[0]].clone();
            let status = fleet.resources().nth(hits[0]).map(|r| r.status());
            if status != Some("present") {
                return Err(not_declared(format!(
                    " present (it is declared {})",
                    status.unwrap_or("unknown")
                )));
            }
            Ok(subject)
        }
        Ok(hits) => Err(Stop::Refused(
            Refusal::NotDeclared,
            format!(
                "{address:?} names {} declared resources: {}; give the whole address",
                hits.len(),
                hits.iter()
                    .map(|&i| format!("'{}'", subjects[i]))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
        Err(nearest) if nearest.is_empty() => Err(not_declared(String::new())),
        Err(nearest) => Err(not_declared(format!(
            " (did you mean {}?)",
            nearest
                .iter()
                .map(|n| format!("'{n}'"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

fn row_of(s: &Subject) -> LedgerRow {
    LedgerRow {
        provider: s.provider.clone(),
        kind: s.kind.clone(),
        name: s.name.clone(),
        region: s.region.clone(),
    }
}

/// The declaration that makes the next plan of the resource say "No changes": what
/// the cloud reports, and for the rest, what the fleet declares now.
fn declaration(
    fleet: &Fleet,
    subject: &Subject,
    found: &Found,
    preview: &ImportPreview,
) -> Emitted {
    let row = row_of(subject);
    let mut reported = found.sighting.reported().clone();
    crate::backend::strip_marker(&mut reported);
    let declared = fleet
        .resources()
        .find(|r| {
            let rf = r.reference();
            rf.provider == subject.provider && rf.kind == subject.kind && rf.name == subject.name
        })
        .and_then(|r| fleet.with_names(|| r.spec_json()))
        .and_then(|v| v.as_object().cloned());
    emit(
        fleet,
        &[Taken {
            row: &row,
            reported: &reported,
            settled: Some(&preview.settled),
            declared: declared.as_ref(),
        }],
        &preview.handles,
    )
}

/// Whether to go on: `--yes`, or a yes at the prompt; refused without a terminal.
fn confirm(io: &mut Io<'_>, fleet: &Fleet, verb: &ImportVerb, seen: &Seen) -> Result<bool, String> {
    if verb.yes {
        return Ok(true);
    }
    if !io.interactive() {
        return Err(
            "`import` puts this fleet's ownership marker on a real resource and asks first, but \
             there is no terminal to ask on. Review what is shown above, then run again with --yes"
                .into(),
        );
    }
    let marker = if seen.found.marked {
        String::new()
    } else {
        format!(", putting managed-by-infra={} on it", fleet.name())
    };
    Ok(io.confirm(&format!("Import {} as {}{marker}?", verb.id, seen.subject)))
}

/// Marks the resource (unless it carries the marker), then records it and caches what
/// was read of it.
async fn take_in(engine: &Engine, fleet: &Fleet, seen: &Seen) -> Outcome {
    let row = row_of(&seen.subject);
    let found = &seen.found;
    if !found.marked {
        let marker = Marker::new(fleet.name());
        if let Err(e) = found
            .backend
            .mark(found.kind, &row.region, &found.sighting.handle, &marker)
            .await
        {
            return Outcome::Failed(format!(
                "{} could not be marked ({e}); the records were not changed",
                found.sighting.handle
            ));
        }
    }
    let store = &**engine.store();
    let recorded = store.load_ledger(fleet.name()).and_then(|mut ledger| {
        ledger.rows.insert(row.clone());
        store.save_ledger(fleet.name(), &ledger)
    });
    if let Err(e) = recorded {
        return Outcome::Failed(format!(
            "{} carries this fleet's marker now, but its row could not be saved ({e}); \
             `discover` takes it into the records",
            found.sighting.handle
        ));
    }
    let entry = CacheEntry {
        name: row.name.clone(),
        region: row.region.clone(),
        handle: found.sighting.handle.clone(),
        observed: found.sighting.observed_json().clone(),
        written: serde_json::Map::new(),
    };
    if let Err(e) = super::state::put_cached(store, fleet.name(), &row, entry) {
        return Outcome::Failed(format!(
            "{} is marked and recorded, but its observation could not be cached ({e}); the \
             next `refresh` or `apply` writes it",
            seen.subject
        ));
    }
    Outcome::Imported {
        marked_now: !found.marked,
    }
}
