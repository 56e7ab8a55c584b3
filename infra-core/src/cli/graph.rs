//! `graph`: the fleet's dependency graph as DOT, on standard output.
//!
//! One node per declared resource, named by its address; one edge from a resource to
//! each resource it depends on, labelled with how it depends on it (`handle`: a
//! reference; `observed`: a value the cloud reports of it; `secret`: its secret value).
//! Nodes and edges are sorted by address, so the same fleet always prints the same text.
//!
//! With `--plan`, the clouds are read as `plan` reads them and each node is coloured by
//! what `apply` would do to it; the records' rows the declaration no longer names appear
//! too (they would be deleted). What could not be looked at is coloured as unknown, the
//! run says so on standard error, and exits 1.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::console::Io;
use super::state::error;
use crate::{Dep, Engine, Fleet, Options, PlanReport, Status, Subject};

/// How a resource depends on another, in the order labels list them.
const HOW: [&str; 3] = ["handle", "observed", "secret"];

/// `graph`.
pub(super) fn graph(io: &mut Io<'_>, fleet: &Fleet) -> u8 {
    io.out(&dot(fleet, None));
    0
}

/// `graph --plan`.
pub(super) async fn graph_plan(io: &mut Io<'_>, engine: &Engine, fleet: &Fleet) -> u8 {
    let report = match engine.plan(&fleet.plan(), &Options::default()).await {
        Ok(report) => report,
        Err(e) => return error(io, &e),
    };
    io.out(&dot(fleet, Some(&report)));
    let blind = report.blind().count();
    if blind == 0 {
        return 0;
    }
    io.err(&format!(
        "the plan is incomplete: {blind} resource{} could not be looked at or cannot be \
         decided, and {} coloured as unknown (`plan` says why)",
        if blind == 1 { "" } else { "s" },
        if blind == 1 { "is" } else { "are" },
    ));
    1
}

/// The address of each declared resource, by index.
fn addresses(fleet: &Fleet) -> Vec<String> {
    fleet
        .resources()
        .map(|r| {
            let rf = r.reference();
            Subject {
                provider: rf.provider.to_owned(),
                kind: rf.kind.to_owned(),
                name: rf.name.clone(),
                region: r.region().to_owned(),
            }
            .to_string()
        })
        .collect()
}

/// Every edge, as (dependant, dependency) addresses, with how the first depends on the
/// second.
fn edges(fleet: &Fleet, names: &[String]) -> BTreeMap<(String, String), BTreeSet<&'static str>> {
    let mut edges: BTreeMap<(String, String), BTreeSet<&'static str>> = BTreeMap::new();
    for (i, declared) in fleet.inner.resources.iter().enumerate() {
        let Status::Present(spec) = &declared.target else {
            continue;
        };
        for dep in spec.0.deps() {
            let Some(j) = fleet.index_of(dep.key()) else {
                continue;
            };
            let how = match dep {
                Dep::Handle(_) => HOW[0],
                Dep::Observed(_) => HOW[1],
                Dep::Secret(_) => HOW[2],
            };
            edges
                .entry((names[i].clone(), names[j].clone()))
                .or_default()
                .insert(how);
        }
    }
    edges
}

/// The graph as DOT; with a plan report, each node coloured by its planned action.
fn dot(fleet: &Fleet, report: Option<&PlanReport>) -> String {
    let names = addresses(fleet);
    let mut nodes: BTreeMap<String, String> = BTreeMap::new();
    for (r, name) in fleet.resources().zip(&names) {
        let style = match r.status() {
            "absent" => " [style=dashed]",
            "unmanaged" => " [style=dotted]",
            _ => "",
        };
        nodes.insert(name.clone(), style.to_owned());
    }
    if let Some(report) = report {
        for change in &report.changes {
            let name = change.resource.to_string();
            nodes.insert(name.clone(), painted(&name, &action_of(change)));
        }
    }
    let mut out = String::new();
    let _ = writeln!(out, "digraph {} {{", quoted(fleet.name()));
    if report.is_some() {
        let _ = writeln!(
            out,
            "  // what apply would do: green create, yellow update, violet replace, red \
             delete, white unchanged, grey unknown"
        );
    }
    let _ = writeln!(out, "  node [shape=box];");
    for (name, attributes) in &nodes {
        let _ = writeln!(out, "  {}{attributes};", quoted(name));
    }
    for ((from, to), how) in edges(fleet, &names) {
        let label = HOW
            .iter()
            .filter(|h| how.contains(*h))
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            out,
            "  {} -> {} [label={}];",
            quoted(&from),
            quoted(&to),
            quoted(&label)
        );
    }
    out.push_str("}\n");
    out
}

/// What a plan line says will happen, as the graph names it.
fn action_of(change: &crate::PlannedChange) -> String {
    match (change.action, change.reason) {
        ("prune", _) => "delete".to_owned(),
        ("not-attempted", Some(reason)) => format!("unknown ({reason})"),
        ("not-attempted" | "failed", _) => "unknown".to_owned(),
        (action, _) => action.to_owned(),
    }
}

/// A node's attributes for an action: its address and the action as its label, and its
/// colour.
fn painted(name: &str, action: &str) -> String {
    let colour = match action {
        "create" => "palegreen",
        "update" => "khaki",
        "replace" => "plum",
        "delete" => "lightpink",
        "unchanged" => "white",
        _ => "lightgrey",
    };
    format!(
        " [label={}, style=filled, fillcolor={colour}]",
        quoted(&format!("{name}\n{action}"))
    )
}

/// A DOT string: quoted, with quotes, backslashes and line breaks escaped.
fn quoted(text: &str) -> String {
    let escaped = text
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    format!("\"{escaped}\"")
}
