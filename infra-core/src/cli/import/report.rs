//! What `import` prints: before asking, the resource found, what the next plan of it
//! would say once taken in, and the declaration that would make that plan say "No
//! changes"; after, what became of it. `--json` prints the outcome as one document
//! (`"import": "v1"`) on standard output, and the rest on standard error.

use serde_json::{Value, json};

use super::super::console::Io;
use super::super::render::colour_lines;
use super::{ImportVerb, Outcome, Seen};
use crate::Fleet;
use crate::engine::PlanReport;

/// The version of the JSON `import --json` prints.
const IMPORT_JSON: &str = "v1";

/// What was found, before the question.
pub(super) fn show(io: &mut Io<'_>, fleet: &Fleet, verb: &ImportVerb, seen: &Seen) {
    let mut text = format!("Import {} as {}:\n", verb.id, seen.subject);
    if seen.found.marked {
        text.push_str("  it carries this fleet's ownership marker already\n");
    } else {
        text.push_str(&format!(
            "  it carries no ownership marker: managed-by-infra={} will be put on it\n",
            fleet.name()
        ));
    }
    text.push_str("\nThe next plan of it, once imported:\n");
    let report = PlanReport {
        fleet: fleet.name().to_owned(),
        changes: vec![seen.preview.change.clone()],
        records: Vec::new(),
        strays: Vec::new(),
        unmatched_exclusions: Vec::new(),
        prerequisites: Vec::new(),
    };
    text.push_str(&report.render());
    if report.has_changes() {
        text.push_str(
            "\nTo make that plan say \"No changes\" instead, declare it as the cloud has it:\n",
        );
        text.push_str(&seen.emitted.preamble());
        text.push_str(&seen.emitted.code());
    }
    if verb.json {
        io.err(text.trim_end());
    } else {
        io.out(&colour_lines(io.colour(), &text));
        io.out("\n");
    }
}

/// What became of the resource.
pub(super) fn outcome(
    io: &mut Io<'_>,
    fleet: &Fleet,
    verb: &ImportVerb,
    seen: Option<&Seen>,
    outcome: &Outcome,
) {
    if verb.json {
        let document = outcome_json(fleet, verb, seen, outcome);
        io.out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&document).expect("JSON")
        ));
        return;
    }
    let Some(seen) = seen else { return };
    match outcome {
        Outcome::Imported { marked_now: true } => io.out(&format!(
            "Imported {} as {}: marked managed-by-infra={}, recorded in the ledger, its \
             observation cached.\n",
            verb.id,
            seen.subject,
            fleet.name()
        )),
        Outcome::Imported { marked_now: false } => io.out(&format!(
            "Imported {} as {}: recorded in the ledger, its observation cached (it carried \
             this fleet's marker already).\n",
            verb.id, seen.subject
        )),
        Outcome::Declined => io.out("Declined at the prompt: nothing was changed.\n"),
        Outcome::Refused(..) | Outcome::Failed(_) => {}
    }
}

fn outcome_json(fleet: &Fleet, verb: &ImportVerb, seen: Option<&Seen>, outcome: &Outcome) -> Value {
    let (status, refusal, reason) = match outcome {
        Outcome::Imported { .. } => ("imported", None, None),
        Outcome::Declined => ("declined", None, None),
        Outcome::Refused(r, why) => ("refused", Some(*r), Some(why.as_str())),
        Outcome::Failed(why) => ("failed", None, Some(why.as_str())),
    };
    json!({
        "import": IMPORT_JSON,
        "fleet": fleet.name(),
        "address": verb.address,
        "id": verb.id,
        "resource": seen.map(|s| s.subject.to_string()),
        "status": status,
        "refusal": refusal,
        "reason": reason,
        "markedNow": matches!(outcome, Outcome::Imported { marked_now: true }),
        "plan": seen.map(|s| &s.preview.change),
        "declaration": seen.map(|s| json!({
            "rust": s.emitted.code(),
            "needs": s.emitted.needs,
        })),
    })
}
