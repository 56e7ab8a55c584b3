//! How a move reads: the plan before the question, the outcome after, and the JSON
//! envelope (`"move": "v1"`).

use serde_json::{Value, json};

use super::Outcome;
use super::survey::{Item, MarkerNow};
use crate::Fleet;
use crate::cli::state::declared;

/// `n thing` or `n things`.
pub(super) fn count(n: usize, thing: &str) -> String {
    format!("{n} {thing}{}", if n == 1 { "" } else { "s" })
}

/// What the marker of `item` becomes, in words.
fn marker_words(item: &Item, from: &str, to: &str) -> String {
    match item.marker {
        MarkerNow::Source => format!("marker managed-by-infra={from} → {to}"),
        MarkerNow::Destination => {
            format!("marker is fleet `{to}`'s already (an earlier move was interrupted)")
        }
        MarkerNow::Legacy => {
            "marker managed-by-infra=true (every fleet's) left as it is".to_owned()
        }
    }
}

/// What of the records of `item` moves, in words.
fn records_words(item: &Item) -> String {
    let mut parts = Vec::new();
    if item.in_source {
        if item.marks.is_empty() {
            parts.push("row".to_owned());
        } else {
            parts.push(format!("row ({})", item.marks.join(", ")));
        }
    } else {
        parts.push("row in the destination's records already".to_owned());
    }
    if item.cached {
        parts.push("cached observation".to_owned());
    }
    parts.join(", ")
}

/// The plan shown before the question.
pub(super) fn plan(from: &str, to: &str, store: &str, items: &[Item]) -> String {
    let mut text = format!("records move: from fleet `{from}` to fleet `{to}`, in {store}\n\n");
    for item in items {
        text.push_str(&format!(
            "  ~ {}\n      {}; {}\n",
            item.row,
            marker_words(item, from, to),
            records_words(item)
        ));
    }
    let rewrites = items
        .iter()
        .filter(|i| i.marker == MarkerNow::Source)
        .count();
    text.push_str(&format!(
        "\n{} move{}; {} rewritten in the cloud, nothing created or deleted.\n",
        count(items.len(), "resource"),
        if items.len() == 1 { "s" } else { "" },
        count(rewrites, "marker"),
    ));
    text
}

/// The outcome, for a person.
pub(super) fn outcome(fleet: &Fleet, to: &str, items: &[Item]) -> String {
    let mut text = "\n".to_owned();
    let mut moved = 0;
    for item in items {
        match &item.outcome {
            Outcome::Moved => {
                moved += 1;
                text.push_str(&format!("moved {} to fleet `{to}`\n", item.row));
            }
            Outcome::Failed(why) => {
                text.push_str(&format!("failed {}: {why}\n", item.row));
            }
            Outcome::NotAttempted => {
                text.push_str(&format!("not attempted {}\n", item.row));
            }
        }
    }
    text.push_str(&format!(
        "\nMoved {} of {} to fleet `{to}`. Declare {} in fleet `{to}` before its next apply \
         (which would otherwise delete {}), and no longer in fleet `{}`.\n",
        moved,
        count(items.len(), "resource"),
        if moved == 1 { "it" } else { "them" },
        if moved == 1 { "it" } else { "them" },
        fleet.name()
    ));
    for item in items.iter().filter(|i| i.outcome == Outcome::Moved) {
        if declared(fleet, &item.row).is_some() {
            text.push_str(&format!(
                "note: fleet `{}` still declares {}: its plans report it as fleet `{to}`'s \
                 (and leave it alone) until the declaration moves too.\n",
                fleet.name(),
                item.row
            ));
        }
    }
    text
}

/// The outcome as JSON: every resource with what became of it, and every refusal.
pub(super) fn outcome_json(
    from: &str,
    to: &str,
    items: &[Item],
    refused: &[(String, String)],
) -> String {
    let resources: Vec<Value> = items
        .iter()
        .map(|item| {
            let marker = match item.marker {
                MarkerNow::Source => "rewritten",
                MarkerNow::Destination => "already",
                MarkerNow::Legacy => "legacy",
            };
            let (outcome, error) = match &item.outcome {
                Outcome::Moved => ("moved", None),
                Outcome::Failed(why) => ("failed", Some(why.clone())),
                Outcome::NotAttempted => ("not attempted", None),
            };
            json!({
                "address": item.row.to_string(),
                "marker": marker,
                "marks": item.marks,
                "cached": item.cached,
                "outcome": outcome,
                "error": error,
            })
        })
        .collect();
    let refused: Vec<Value> = refused
        .iter()
        .map(|(address, why)| json!({"address": address, "why": why}))
        .collect();
    let document = json!({
        "move": "v1",
        "from": from,
        "to": to,
        "resources": resources,
        "refused": refused,
    });
    format!(
        "{}\n",
        serde_json::to_string_pretty(&document).expect("JSON")
    )
}
