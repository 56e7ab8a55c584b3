//! `import-tfstate FILE`: take over the resources a Terraform state lists.
//!
//! Each resource instance of the state (format version 4) is matched to a kind of this
//! tool by its Terraform type ([`types`]), then looked for in the cloud by the name the
//! cloud knows it by ([`assess`]). The list says, for each, whether it can be taken over
//! and, if not, why: a type no kind realises, a data source, a resource that does not
//! exist, one that carries another fleet's marker, one already in the records. Nothing
//! of that kind is ever touched.
//!
//! For each resource the user confirms (at the prompt, one by one, or all with `--yes`;
//! without a terminal and without `--yes` the run is refused, as `apply` refuses), the
//! fleet's ownership marker is put on the resource (a provider that cannot mark one
//! leaves it out, saying so), then its row is written to the ledger. As with
//! `discover`, a row the declaration does not name yet is marked discovered: an apply
//! deletes it only when that delete is confirmed by name. The declarations to paste
//! into the fleet are printed last ([`declare`]).

mod assess;
mod declare;
mod file;
mod report;
mod types;

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::console::Io;
use super::state::error;
use crate::{Engine, Fleet, Ledger, LedgerRow, Marker};
use assess::{Assessor, Ready, Verdict};
use report::{outcome_json, render_list, render_outcome};

/// The flags of `import-tfstate`.
pub(super) struct ImportVerb {
    pub(super) file: PathBuf,
    pub(super) yes: bool,
    pub(super) json: bool,
}

/// What becomes of one resource instance of the state.
enum Fate {
    /// Can be taken over; not confirmed yet.
    Ready(Ready),
    /// Taken over: marked (unless it carried the marker already) and recorded.
    Imported { marked_now: bool },
    /// Left alone, for a reason that is no failure.
    Not(String),
    /// Left alone: it could not be looked at.
    Blind(String),
    /// Declined at the prompt.
    Declined,
    /// Confirmed, and could not be taken over.
    Failed(String),
}

/// One resource instance of the state.
struct Entry {
    terraform: String,
    row: Option<LedgerRow>,
    attributes: Map<String, Value>,
    fate: Fate,
}

/// `import-tfstate FILE`.
pub(super) async fn import(
    io: &mut Io<'_>,
    engine: &Engine,
    fleet: &Fleet,
    verb: ImportVerb,
) -> u8 {
    let state = match file::read(&verb.file) {
        Ok(state) => state,
        Err(why) => return error(io, &why),
    };
    let store = &**engine.store();
    let mut ledger = match store.load_ledger(fleet.name()) {
        Ok(l) => l,
        Err(e) => return error(io, &e),
    };
    let mut entries = survey(fleet, engine, &ledger, state.instances).await;
    let listing = render_list(&verb, state.terraform_version.as_deref(), &entries);
    if verb.json {
        io.err(listing.trim_end());
    } else {
        io.out(&listing);
    }
    if let Err(why) = confirm(io, &verb, fleet, &mut entries) {
        return error(io, &why);
    }
    let imported = take_over(fleet, &mut ledger, &mut entries).await;
    let mut code = u8::from(
        entries
            .iter()
            .any(|e| matches!(e.fate, Fate::Blind(_) | Fate::Failed(_))),
    );
    if imported > 0
        && let Err(e) = store.save_ledger(fleet.name(), &ledger)
    {
        code = error(
            io,
            &format!(
                "the resources above carry this fleet's marker, but the records could not be \
                 saved ({e}); `discover` takes them into the records"
            ),
        );
    }
    if verb.json {
        io.out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&outcome_json(&verb, fleet, &entries)).expect("JSON")
        ));
    } else {
        io.out(&render_outcome(fleet, &entries));
    }
    code
}

/// Each instance located and looked for in the cloud.
async fn survey(
    fleet: &Fleet,
    engine: &Engine,
    ledger: &Ledger,
    instances: Vec<file::Instance>,
) -> Vec<Entry> {
    let mut assessor = Assessor::new(fleet, engine.backends());
    let mut seen: Vec<(LedgerRow, String)> = Vec::new();
    let mut entries = Vec::new();
    for instance in instances {
        let located = types::locate(&instance, fleet);
        let fate = match &located {
            Err(why) => Fate::Not(why.clone()),
            Ok(row) if ledger.rows.contains(row) => {
                Fate::Not("it is in this fleet's records already".into())
            }
            Ok(row) => match seen.iter().find(|(r, _)| r == row) {
                Some((_, first)) => Fate::Not(format!("the same resource as {first}")),
                None => {
                    seen.push((row.clone(), instance.address.clone()));
                    match assessor.assess(row).await {
                        Verdict::Ready(ready) => Fate::Ready(ready),
                        Verdict::Not(why) => Fate::Not(why),
                        Verdict::Blind(why) => Fate::Blind(why),
                    }
                }
            },
        };
        entries.push(Entry {
            terraform: instance.address,
            row: located.ok(),
            attributes: instance.attributes,
            fate,
        });
    }
    entries
}

/// Asks about each resource that can be taken over (unless `--yes`); refused without a
/// terminal to ask on.
fn confirm(
    io: &mut Io<'_>,
    verb: &ImportVerb,
    fleet: &Fleet,
    entries: &mut [Entry],
) -> Result<(), String> {
    let ready = entries
        .iter()
        .filter(|e| matches!(e.fate, Fate::Ready(_)))
        .count();
    if verb.yes || ready == 0 {
        return Ok(());
    }
    if !io.interactive() {
        return Err(
            "`import-tfstate` puts this fleet's ownership marker on real resources and asks \
             first, but there is no terminal to ask on. Review the list above, then run again \
             with --yes; nothing was changed"
                .into(),
        );
    }
    for entry in entries.iter_mut() {
        let (Fate::Ready(ready), Some(row)) = (&entry.fate, &entry.row) else {
            continue;
        };
        let marker = if ready.marked {
            String::new()
        } else {
            format!(", putting managed-by-infra={} on it", fleet.name())
        };
        let question = format!("Take over {} as {row}{marker}?", entry.terraform);
        if !io.confirm(&question) {
            entry.fate = Fate::Declined;
        }
    }
    Ok(())
}

/// Marks each confirmed resource, then records it; answers how many were taken over.
async fn take_over(fleet: &Fleet, ledger: &mut Ledger, entries: &mut [Entry]) -> usize {
    let marker = Marker::new(fleet.name());
    let mut imported = 0;
    for entry in entries.iter_mut() {
        let (Fate::Ready(ready), Some(row)) = (&entry.fate, &entry.row) else {
            continue;
        };
        if !ready.marked {
            let marked = ready
                .backend
                .mark(ready.kind, &row.region, &ready.handle, &marker)
                .await;
            if let Err(e) = marked {
                entry.fate = Fate::Failed(format!("it could not be marked: {e}"));
                continue;
            }
        }
        ledger.rows.insert(row.clone());
        if super::state::declared(fleet, row).is_none() {
            ledger.discovered.insert(row.clone());
        }
        entry.fate = Fate::Imported {
            marked_now: !ready.marked,
        };
        imported += 1;
    }
    imported
}
