//! A machine's timeline for people and as JSON: every entry in revision order, then
//! each operation with the entries that lead to it and follow from it, by revision.

use std::fmt::Write as _;

use super::when::iso;
use crate::store::{MachineView, OperationView, TimelineEntry};

/// The entries that concern `op`: its plan's (plan, approval, evidence) and its own
/// (commitment, attempts, responses, accounting, observations, outcome).
fn linked<'a>(op: &OperationView, entries: &'a [TimelineEntry]) -> Vec<&'a TimelineEntry> {
    entries
        .iter()
        .filter(|e| {
            e.operation.as_deref() == Some(op.id.as_str())
                || (e.operation.is_none() && e.plan.as_deref() == Some(op.plan.as_str()))
        })
        .collect()
}

fn header(view: &MachineView) -> String {
    format!(
        "machine {}: Desired {}, Applied {}{}, baseline r{}, assignment {}{}{}",
        view.id,
        view.desired_release.as_deref().unwrap_or("-"),
        view.applied_release
            .as_deref()
            .unwrap_or(if view.applied_digest.is_some() {
                "handed-over baseline"
            } else {
                "-"
            }),
        view.applied_digest
            .map(|d| format!(" (digest {})", &d.to_hex()[..12]))
            .unwrap_or_default(),
        view.baseline_revision.0,
        view.assignment_revision,
        if view.frozen { ", frozen" } else { "" },
        view.open_drift
            .map(|r| format!(", drift record open since r{}", r.0))
            .unwrap_or_default(),
    )
}

/// The timeline as text.
pub(super) fn text(
    view: &MachineView,
    entries: &[TimelineEntry],
    operations: &[OperationView],
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", header(view));
    let kind_width = entries.iter().map(|e| e.kind.len()).max().unwrap_or(0);
    for e in entries {
        let _ = write!(
            out,
            "  r{:<4} {}  {:<kind_width$}  {} ({})",
            e.revision.0,
            iso(e.at.0),
            e.kind,
            e.actor,
            e.actor_role
        );
        if let Some(who) = &e.requested_by {
            let _ = write!(out, " at the request of {who}");
        }
        if let Some(p) = &e.plan {
            let _ = write!(out, "  plan {p}");
        }
        if let Some(o) = &e.operation {
            let _ = write!(out, "  operation {o}");
        }
        if let Some(c) = e.comparison {
            let _ = write!(out, "  comparison {c}");
        }
        if !e.detail.is_empty() {
            let _ = write!(out, "  — {}", e.detail);
        }
        out.push('\n');
    }
    for op in operations {
        let _ = writeln!(
            out,
            "operation {} (plan {}): {}, {} attempt(s)",
            op.id, op.plan, op.state, op.attempts
        );
        let chain: Vec<String> = linked(op, entries)
            .iter()
            .map(|e| format!("r{} {}", e.revision.0, e.kind))
            .collect();
        let _ = writeln!(out, "  {}", chain.join(" → "));
    }
    out
}

/// The timeline as JSON.
pub(super) fn json(
    view: &MachineView,
    entries: &[TimelineEntry],
    operations: &[OperationView],
) -> serde_json::Value {
    let entry = |e: &TimelineEntry| {
        serde_json::json!({
            "revision": e.revision.0,
            "kind": e.kind,
            "at": iso(e.at.0),
            "actor": e.actor,
            "actorRole": e.actor_role,
            "requestedBy": e.requested_by,
            "plan": e.plan,
            "operation": e.operation,
            "comparison": e.comparison,
            "detail": e.detail,
        })
    };
    serde_json::json!({
        "timeline": "v1",
        "machine": {
            "id": view.id,
            "desiredRelease": view.desired_release,
            "appliedRelease": view.applied_release,
            "appliedDigest": view.applied_digest,
            "baselineRevision": view.baseline_revision.0,
            "assignmentRevision": view.assignment_revision,
            "frozen": view.frozen,
            "openDrift": view.open_drift.map(|r| r.0),
            "revision": view.revision.0,
        },
        "entries": entries.iter().map(entry).collect::<Vec<_>>(),
        "operations": operations.iter().map(|op| serde_json::json!({
            "id": op.id,
            "plan": op.plan,
            "state": op.state.to_string(),
            "attempts": op.attempts,
            "revisions": linked(op, entries)
                .iter()
                .map(|e| serde_json::json!({"revision": e.revision.0, "kind": e.kind}))
                .collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
