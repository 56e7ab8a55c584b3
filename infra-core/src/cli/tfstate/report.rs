//! What `import-tfstate` prints: the list before anything is done, the outcome after,
//! the declarations to paste, and the same as JSON (`"importTfstate": "v1"`).

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::{Entry, Fate, ImportVerb, declare};
use crate::Fleet;

/// The version of the JSON `import-tfstate --json` prints.
const IMPORT_JSON: &str = "v1";

pub(super) fn render_list(verb: &ImportVerb, version: Option<&str>, entries: &[Entry]) -> String {
    let mut out = String::new();
    let ready = entries
        .iter()
        .filter(|e| matches!(e.fate, Fate::Ready(_)))
        .count();
    let _ = writeln!(
        out,
        "Terraform state {}{}: {} resource instance{}, {ready} can be taken over",
        verb.file.display(),
        version
            .map(|v| format!(" (Terraform {v})"))
            .unwrap_or_default(),
        entries.len(),
        if entries.len() == 1 { "" } else { "s" },
    );
    let width = entries.iter().map(|e| e.terraform.len()).max().unwrap_or(0);
    for e in entries {
        let (mark, what) = match (&e.fate, &e.row) {
            (Fate::Ready(r), Some(row)) if r.marked => {
                ('+', format!("{row} (carries this fleet's marker already)"))
            }
            (Fate::Ready(_), Some(row)) => ('+', row.to_string()),
            (Fate::Blind(why), _) => ('!', format!("could not be looked at: {why}")),
            (Fate::Not(why), _) => ('·', format!("not imported: {why}")),
            _ => continue,
        };
        let _ = writeln!(out, "  {mark} {:<width$}  {what}", e.terraform);
    }
    out
}

pub(super) fn render_outcome(fleet: &Fleet, entries: &[Entry]) -> String {
    let mut out = String::new();
    let imported: Vec<&Entry> = entries
        .iter()
        .filter(|e| matches!(e.fate, Fate::Imported { .. }))
        .collect();
    let _ = writeln!(out, "\nTaken over: {}.", imported.len());
    let width = entries
        .iter()
        .filter_map(|e| e.row.as_ref().map(|r| r.to_string().len()))
        .max()
        .unwrap_or(0);
    for e in entries {
        let Some(row) = &e.row else { continue };
        let what = match &e.fate {
            Fate::Imported { marked_now: true } => {
                format!("marked managed-by-infra={} and recorded", fleet.name())
            }
            Fate::Imported { marked_now: false } => "recorded".to_owned(),
            Fate::Declined => "declined at the prompt; left alone".to_owned(),
            Fate::Failed(why) => format!("not imported: {why}"),
            _ => continue,
        };
        let _ = writeln!(
            out,
            "  {} {:<width$}  {what}",
            mark_of(&e.fate),
            row.to_string()
        );
    }
    let undeclared: Vec<String> = imported
        .iter()
        .filter_map(|e| {
            let row = e.row.as_ref()?;
            super::super::state::declared(fleet, row)
                .is_none()
                .then(|| declare::declaration(row, &e.attributes))
        })
        .collect();
    if !undeclared.is_empty() {
        let _ = writeln!(
            out,
            "\nDeclare them in the fleet. Until one is declared, an apply deletes it only when \
             that delete is confirmed by name (--allow-delete):\n"
        );
        for d in undeclared {
            let _ = writeln!(out, "{d}");
        }
    }
    out
}

fn mark_of(fate: &Fate) -> char {
    match fate {
        Fate::Imported { .. } => '+',
        Fate::Failed(_) | Fate::Blind(_) => '!',
        _ => '·',
    }
}

pub(super) fn outcome_json(verb: &ImportVerb, fleet: &Fleet, entries: &[Entry]) -> Value {
    let resources: Vec<Value> = entries
        .iter()
        .map(|e| {
            let (status, reason) = match &e.fate {
                Fate::Imported { .. } => ("imported", None),
                Fate::Declined => ("declined", None),
                Fate::Not(why) => ("not-imported", Some(why.as_str())),
                Fate::Blind(why) => ("not-looked-at", Some(why.as_str())),
                Fate::Failed(why) => ("failed", Some(why.as_str())),
                Fate::Ready(_) => ("ready", None),
            };
            let declaration = match (&e.fate, &e.row) {
                (Fate::Imported { .. }, Some(row))
                    if super::super::state::declared(fleet, row).is_none() =>
                {
                    Some(declare::declaration(row, &e.attributes))
                }
                _ => None,
            };
            json!({
                "terraform": e.terraform,
                "resource": e.row.as_ref().map(ToString::to_string),
                "status": status,
                "markedNow": matches!(e.fate, Fate::Imported { marked_now: true }),
                "reason": reason,
                "declaration": declaration,
            })
        })
        .collect();
    json!({
        "importTfstate": IMPORT_JSON,
        "fleet": fleet.name(),
        "file": verb.file.display().to_string(),
        "resources": resources,
    })
}
