//! The plan report: what an apply would do, resource by resource, for people (text) and
//! for programs (JSON).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde::Serialize;

use super::Engine;
use super::model::{Decision, Observation, Target};
use crate::{Plan, Repair, Subject};

/// One line of a plan: a resource and what the apply would do with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedChange {
    /// The resource.
    pub resource: Subject,
    /// `create`, `update`, `replace`, `delete`, `prune`, `unchanged`, `not-attempted` or
    /// `failed`.
    pub action: &'static str,
    /// The fields that differ, for an update or a replace.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<&'static str>,
    /// Why, for a resource that will not be attempted or cannot be.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What an apply would do, resource by resource, in the order it would do it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanReport {
    /// The fleet.
    pub fleet: String,
    /// One line per resource.
    pub changes: Vec<PlannedChange>,
    /// Ledger rows released with `forget` (records only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub forgotten: Vec<String>,
}

impl PlanReport {
    /// Whether the apply would change anything in a cloud or in the records.
    pub fn has_changes(&self) -> bool {
        !self.forgotten.is_empty()
            || self.changes.iter().any(|c| {
                matches!(
                    c.action,
                    "create" | "update" | "replace" | "delete" | "prune"
                )
            })
    }

    /// Whether some resource cannot be brought to its target.
    pub fn has_failures(&self) -> bool {
        self.changes.iter().any(|c| c.action == "failed")
    }

    /// How many resources would see each action.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for c in &self.changes {
            *counts.entry(c.action).or_default() += 1;
        }
        counts
    }

    /// The plan as JSON: `{"planReport": "v1", …}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = serde_json::json!({ "planReport": "v1" });
        if let (Some(map), Ok(serde_json::Value::Object(body))) =
            (value.as_object_mut(), serde_json::to_value(self))
        {
            map.extend(body);
        }
        value
    }

    /// The plan as text for people, one line per resource, without colour.
    pub fn render(&self) -> String {
        let counts = self.counts();
        let n = |a: &str| counts.get(a).copied().unwrap_or(0);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "fleet `{}`: {} to create, {} to update, {} to replace, {} to delete, {} unchanged",
            self.fleet,
            n("create"),
            n("update"),
            n("replace"),
            n("delete") + n("prune"),
            n("unchanged"),
        );
        let width = self
            .changes
            .iter()
            .map(|c| c.resource.to_string().len())
            .max()
            .unwrap_or(0);
        for c in &self.changes {
            let _ = write!(
                out,
                "  {} {:<width$}  {}",
                symbol(c.action),
                c.resource.to_string(),
                c.action
            );
            if !c.fields.is_empty() {
                let _ = write!(out, ": {}", c.fields.join(", "));
            }
            if let Some(d) = &c.detail {
                let _ = write!(out, " — {d}");
            }
            out.push('\n');
        }
        for f in &self.forgotten {
            let _ = writeln!(
                out,
                "  ~ {f}  forget (the record only; the cloud is untouched)"
            );
        }
        if !self.has_changes() && !self.has_failures() {
            out.push_str("No changes: the world matches the declaration.\n");
        }
        out
    }
}

/// The one-character mark of an action in a rendered plan.
pub fn symbol(action: &str) -> char {
    match action {
        "create" => '+',
        "update" => '~',
        "replace" => '±',
        "delete" | "prune" => '-',
        "failed" => '!',
        "not-attempted" => '·',
        _ => ' ',
    }
}

impl Engine {
    /// The plan report, in execution order: builds in dependency order, then deletes in
    /// reverse, then orphans.
    pub(super) fn report(&self, plan: &Plan, observation: &Observation) -> PlanReport {
        let order = plan
            .build_order()
            .unwrap_or_else(|_| (0..plan.len()).collect());
        let position: HashMap<usize, usize> =
            order.iter().enumerate().map(|(p, &i)| (i, p)).collect();
        let mut builds = Vec::new();
        let mut kills = Vec::new();
        let mut orphans = Vec::new();
        for slot in &observation.slots {
            let (action, fields, detail): (&'static str, Vec<&'static str>, Option<String>) =
                match &slot.decision {
                    Decision::Create => ("create", vec![], None),
                    Decision::Existing {
                        repair,
                        fields,
                        pending,
                        because,
                        ..
                    } => {
                        let names = fields.iter().map(|d| d.field).collect();
                        let note = match because {
                            Some(x) => Some(format!("replaced with {x}, which it cannot outlive")),
                            None => pending.then(|| {
                                "may change once what it depends on is applied".to_owned()
                            }),
                        };
                        match repair {
                            Repair::Nothing => ("unchanged", names, note),
                            Repair::Update => ("update", names, note),
                            _ => ("replace", names, note),
                        }
                    }
                    Decision::Delete => ("delete", vec![], None),
                    Decision::Prune => ("prune", vec![], Some("no longer declared".to_owned())),
                    Decision::AlreadyAbsent => match slot.target {
                        Target::Orphan => (
                            "prune",
                            vec![],
                            Some("already gone; the record is dropped".to_owned()),
                        ),
                        _ => ("unchanged", vec![], Some("absent, as declared".to_owned())),
                    },
                    Decision::Skip(reason, why) => (
                        "not-attempted",
                        vec![],
                        Some(match why {
                            Some(why) => format!("{reason}: {why}"),
                            None => reason.to_string(),
                        }),
                    ),
                    Decision::Fail(_, e) => ("failed", vec![], Some(e.to_string())),
                };
            let change = PlannedChange {
                resource: slot.subject.clone(),
                action,
                fields,
                detail,
            };
            match (slot.index, &slot.target) {
                (None, _) => orphans.push(change),
                (Some(i), Target::Absent) => {
                    kills.push((position.get(&i).copied().unwrap_or(i), change))
                }
                (Some(i), _) => builds.push((position.get(&i).copied().unwrap_or(i), change)),
            }
        }
        builds.sort_by_key(|(p, _)| *p);
        kills.sort_by_key(|(p, _)| std::cmp::Reverse(*p));
        orphans.sort_by(|a, b| a.resource.cmp(&b.resource));
        PlanReport {
            fleet: plan.fleet().name().to_owned(),
            changes: builds
                .into_iter()
                .map(|(_, c)| c)
                .chain(kills.into_iter().map(|(_, c)| c))
                .chain(orphans)
                .collect(),
            forgotten: observation
                .forgotten
                .iter()
                .map(|r| r.to_string())
                .collect(),
        }
    }
}
