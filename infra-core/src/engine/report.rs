//! The plan report: what an apply would do, resource by resource, for people (text) and
//! for programs (JSON, `"planReport": "v3"`).
//!
//! Besides the line of each resource, a report says what the apply writes to the
//! records alone (resources found in place and adopted, rows forgotten or dropped), which
//! resources could not be looked at and why, and, when the records are empty, which
//! resources in the clouds carry this fleet's marker without being declared (lost
//! records). A report that could not look at everything never says "no changes".

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::Engine;
use super::model::{Decision, Observation, Owner, Seen, Slot, Target, row_of};
use crate::{Divergence, NotAttemptedReason, Ownership, Plan, Repair, Step, Subject};

/// One line of a plan: a resource and what the apply would do with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedChange {
    /// The resource.
    pub resource: Subject,
    /// `create`, `update`, `replace`, `delete`, `prune`, `unchanged`, `not-attempted` or
    /// `failed`.
    pub action: &'static str,
    /// The fields that differ, with their values, for an update or a replace.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<Divergence>,
    /// For `not-attempted`: why, from a closed set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<NotAttemptedReason>,
    /// For `failed`: what the run would have been doing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<Step>,
    /// What explains the line: the backend's own words for a resource that could not
    /// be looked at, the error of a failure, the cause of a cascaded replace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// For a delete: it needs the user's confirmation by name (`--allow-delete`), since
    /// the resource was adopted by `discover` on its marker alone.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub needs_confirmation: bool,
}

impl PlannedChange {
    /// Whether the run could not look at this resource (or not decide it): not
    /// attempted for a reason other than the user's own choice (`--target`/`--exclude`,
    /// the declaration's exclusion list), or failed.
    pub fn is_blind(&self) -> bool {
        self.action == "failed"
            || (self.action == "not-attempted" && !self.reason.is_some_and(|r| r.is_deliberate()))
    }
}

/// A change an apply makes to the records alone, touching no cloud.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordChange {
    /// The resource whose row changes.
    pub resource: Subject,
    /// `adopt` (found in place and this fleet's: recorded, so that deleting its line
    /// later deletes it), `confirm` (a row `discover` adopted on the marker alone, now
    /// named by the declaration), `forget` (released with `forget`) or `drop` (a
    /// resource declared absent and already gone).
    pub change: &'static str,
}

/// What an apply would do, resource by resource, in the order it would do it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanReport {
    /// The fleet.
    pub fleet: String,
    /// One line per resource.
    pub changes: Vec<PlannedChange>,
    /// Changes to the records alone.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<RecordChange>,
    /// Resources that carry this fleet's marker but are neither declared nor recorded,
    /// looked for when the records are empty: the sign of lost records. `discover`
    /// takes them back.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub strays: Vec<Subject>,
    /// Entries of the declaration's exclusion list that matched no declared resource
    /// found without the fleet's marker: each one a warning, so that the list does not
    /// rot. An entry whose resource could not be looked at is not listed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unmatched_exclusions: Vec<UnmatchedExclusion>,
    /// What providers will do before the creates (a product activated, credentials
    /// made): shown, so that nothing is done silently.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prerequisites: Vec<super::PlannedPrerequisite>,
}

/// An entry of the exclusion list that matched nothing, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnmatchedExclusion {
    /// The resource the entry names.
    pub resource: Subject,
    /// The entry's own reason.
    pub reason: String,
    /// Why it matched nothing.
    pub why: String,
}

impl PlanReport {
    /// Whether the apply would change anything in a cloud or in the records.
    pub fn has_changes(&self) -> bool {
        !self.records.is_empty()
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

    /// The resources the run could not look at (or not decide): see
    /// [`PlannedChange::is_blind`].
    pub fn blind(&self) -> impl Iterator<Item = &PlannedChange> {
        self.changes.iter().filter(|c| c.is_blind())
    }

    /// Whether every resource in scope was looked at and can be decided: a report that
    /// is not complete never means "no changes".
    pub fn is_complete(&self) -> bool {
        self.blind().next().is_none()
    }

    /// The deletes that need the user's confirmation by name.
    pub fn unconfirmed_deletes(&self) -> impl Iterator<Item = &Subject> {
        self.changes
            .iter()
            .filter(|c| c.needs_confirmation)
            .map(|c| &c.resource)
    }

    /// How many resources would see each action.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for c in &self.changes {
            *counts.entry(c.action).or_default() += 1;
        }
        counts
    }

    /// The plan as JSON: `{"planReport": "v2", …, "complete": …}`.
    ///
    /// Versions: `v1` listed the names of the fields that differ and kept forgotten
    /// rows apart; `v2` gives each differing field with its values (`before`, `after`,
    /// or `sensitive`), a closed `reason` and a `step` beside the `detail`, the record
    /// changes, the strays, and whether the plan is complete; `v3` adds the reason
    /// `excluded` and the `unmatchedExclusions` (each with its `resource`, `reason` and
    /// `why`). Within `v3`, `prerequisites` (what providers do before the first
    /// create: each with its `provider`, `kind`, `region` and `what`, and `unchecked`
    /// when the provider could not be asked) is listed when there are any.
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = serde_json::json!({ "planReport": "v3" });
        if let (Some(map), Ok(serde_json::Value::Object(body))) =
            (value.as_object_mut(), serde_json::to_value(self))
        {
            map.extend(body);
            map.insert("complete".into(), self.is_complete().into());
        }
        value
    }

    /// The plan as text for people, one line per resource (and one per changed field),
    /// without colour.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_summary(&mut out);
        let width = self
            .changes
            .iter()
            .map(|c| &c.resource)
            .chain(self.records.iter().map(|r| &r.resource))
            .map(|s| s.to_string().len())
            .max()
            .unwrap_or(0);
        for c in &self.changes {
            render_change(&mut out, c, width);
        }
        for r in &self.records {
            let what = match r.change {
                "adopt" => "adopt: found in place and this fleet's; recorded",
                "confirm" => "confirm: adopted by discover, now named by the declaration",
                "forget" => "forget: the record only; the cloud is untouched",
                _ => "drop: declared absent and already gone; the record is dropped",
            };
            let _ = writeln!(out, "  ~ {:<width$}  {what}", r.resource.to_string());
        }
        self.render_prerequisites(&mut out);
        self.render_verdict(&mut out);
        out
    }

    fn render_summary(&self, out: &mut String) {
        let counts = self.counts();
        let n = |a: &str| counts.get(a).copied().unwrap_or(0);
        let _ = write!(
            out,
            "fleet `{}`: {} to create, {} to update, {} to replace, {} to delete, {} unchanged",
            self.fleet,
            n("create"),
            n("update"),
            n("replace"),
            n("delete") + n("prune"),
            n("unchanged"),
        );
        let excluded = self
            .changes
            .iter()
            .filter(|c| c.reason == Some(NotAttemptedReason::Excluded))
            .count();
        if excluded > 0 {
            let _ = write!(out, ", {excluded} excluded");
        }
        let blind = self.blind().count();
        if blind > 0 {
            let _ = write!(out, ", {blind} not looked at or failing");
        }
        out.push('\n');
    }

    fn render_prerequisites(&self, out: &mut String) {
        if self.prerequisites.is_empty() {
            return;
        }
        out.push_str("Before the first create, the providers will:\n");
        for p in &self.prerequisites {
            let scope = format!("{}/{} in {}", p.provider, p.kind, p.region);
            if p.unchecked {
                let _ = writeln!(
                    out,
                    "  ! {scope}: could not be checked ({}); the apply will find out",
                    p.what
                );
            } else {
                let _ = writeln!(out, "  + {scope}: {}", p.what);
            }
        }
    }

    fn render_verdict(&self, out: &mut String) {
        if !self.strays.is_empty() {
            let one = self.strays.len() == 1;
            let _ = writeln!(
                out,
                "{} resource{} {} this fleet's marker but {} neither declared nor in the \
                 records (lost records?). Run `discover` to take {} back:",
                self.strays.len(),
                plural(self.strays.len()),
                if one { "carries" } else { "carry" },
                if one { "is" } else { "are" },
                if one { "it" } else { "them" },
            );
            for s in &self.strays {
                let _ = writeln!(out, "  ? {s}");
            }
        }
        for u in &self.unmatched_exclusions {
            let _ = writeln!(
                out,
                "warning: the exclusion of {} ({}) matches nothing: {}. Remove it from the \
                 declaration",
                u.resource, u.reason, u.why
            );
        }
        let blind = self.blind().count();
        if blind > 0 {
            let _ = writeln!(
                out,
                "Incomplete: {blind} of {} resource{} could not be looked at or cannot be \
                 brought to their target (see above); nothing is concluded about them.",
                self.changes.len(),
                plural(self.changes.len()),
            );
        } else if !self.has_changes() {
            out.push_str("No changes: the world matches the declaration.\n");
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// One resource's line, and one more per field that differs.
fn render_change(out: &mut String, c: &PlannedChange, width: usize) {
    let _ = write!(
        out,
        "  {} {:<width$}  ",
        symbol(c.action),
        c.resource.to_string(),
    );
    // An excluded resource is no shortfall: its line says so in one word.
    match c.reason {
        Some(NotAttemptedReason::Excluded) => out.push_str("excluded"),
        Some(reason) => {
            let _ = write!(out, "{} ({reason})", c.action);
        }
        None => out.push_str(c.action),
    }
    if let Some(d) = &c.detail {
        let _ = write!(out, " — {d}");
    }
    if c.needs_confirmation {
        let _ = write!(
            out,
            " — adopted by `discover` on its marker alone: not deleted unless confirmed \
             (--allow-delete '{}')",
            c.resource
        );
    }
    out.push('\n');
    for f in &c.fields {
        let forces = if f.mutability == crate::Mutability::ForcesReplace {
            "  (forces replace)"
        } else {
            ""
        };
        if f.sensitive {
            let _ = writeln!(out, "      {}: (sensitive){forces}", f.field);
        } else {
            let _ = writeln!(
                out,
                "      {}: {} → {}{forces}",
                f.field,
                shown(&f.before),
                shown(&f.after)
            );
        }
    }
}

/// A value as a plan shows it: compact JSON.
fn shown(value: &serde_json::Value) -> String {
    value.to_string()
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

/// A report line's action, reason, step and detail, from its slot's decision.
struct Line {
    action: &'static str,
    fields: Vec<Divergence>,
    reason: Option<NotAttemptedReason>,
    step: Option<Step>,
    detail: Option<String>,
}

impl Line {
    fn of(slot: &Slot) -> Line {
        let line = |action, detail: Option<&str>| Line {
            action,
            fields: Vec::new(),
            reason: None,
            step: None,
            detail: detail.map(str::to_owned),
        };
        match &slot.decision {
            Decision::Create => line("create", None),
            Decision::Existing {
                repair,
                fields,
                pending,
                because,
                requested,
                ..
            } => {
                let note = match because {
                    _ if *requested => Some("replace requested with --replace".to_owned()),
                    Some(x) => Some(format!("replaced with {x}, which it cannot outlive")),
                    None => {
                        pending.then(|| "may change once what it depends on is applied".to_owned())
                    }
                };
                Line {
                    action: match repair {
                        Repair::Nothing => "unchanged",
                        Repair::Update => "update",
                        _ => "replace",
                    },
                    fields: fields.clone(),
                    reason: None,
                    step: None,
                    detail: note,
                }
            }
            Decision::Delete => line("delete", None),
            Decision::Prune => line("prune", Some("no longer declared")),
            Decision::AlreadyAbsent => match slot.target {
                Target::Orphan => line("prune", Some("already gone; the record is dropped")),
                _ => line("unchanged", Some("absent, as declared")),
            },
            Decision::Skip(reason, why) => Line {
                reason: Some(*reason),
                ..line("not-attempted", why.as_deref())
            },
            Decision::Fail(step, e) => Line {
                step: Some(*step),
                ..line("failed", Some(&e.to_string()))
            },
        }
    }
}

impl Engine {
    /// The plan report, in execution order: builds in dependency order, then deletes in
    /// reverse, then orphans.
    pub(super) fn report(&self, plan: &Plan, observation: &Observation) -> PlanReport {
        let (order, mut report) = Self::report_parts(plan, observation);
        report.changes = order
            .into_iter()
            .map(|(s, needs_confirmation)| {
                let slot = &observation.slots[s];
                change(slot.subject.clone(), Line::of(slot), needs_confirmation)
            })
            .collect();
        report
    }

    /// [`Engine::report`] of an observation no longer needed: each line takes its
    /// resource and its fields from the slot instead of a copy, so that a plan of a
    /// large fleet holds them once.
    pub(super) fn report_owned(&self, plan: &Plan, mut observation: Observation) -> PlanReport {
        let (order, mut report) = Self::report_parts(plan, &observation);
        report.changes = order
            .into_iter()
            .map(|(s, needs_confirmation)| {
                let slot = &mut observation.slots[s];
                let fields = match &mut slot.decision {
                    Decision::Existing { fields, .. } => std::mem::take(fields),
                    _ => Vec::new(),
                };
                let line = Line {
                    fields,
                    ..Line::of(slot)
                };
                let subject = std::mem::replace(&mut slot.subject, empty_subject());
                change(subject, line, needs_confirmation)
            })
            .collect();
        report
    }

    /// The order of a report's lines (builds in dependency order, then deletes in
    /// reverse, then orphans), each slot with whether its delete needs a confirmation,
    /// and the report without its lines.
    fn report_parts(plan: &Plan, observation: &Observation) -> (Vec<(usize, bool)>, PlanReport) {
        let slots = &observation.slots;
        // Each declared resource's place in the build order (its index when the order
        // is unknown). The lines are put in order before any is made: a plan of a large
        // fleet holds each line once, not a copy of each on the way.
        // (Each working vector is dropped as soon as it is done with: a plan of a large
        // fleet peaks here.)
        let fits = |p: usize| u32::try_from(p).expect("fewer than 2^32 resources");
        let mut position: Vec<u32> = (0..plan.len()).map(fits).collect();
        if let Ok(order) = plan.build_order() {
            for (p, i) in order.into_iter().enumerate() {
                position[i] = fits(p);
            }
        }
        // Builds in the build order, then deletes in its reverse, then orphans: each
        // slot's group and place in it as one number (the group in the top bits),
        // worked out once, not at every comparison.
        const GROUP: u32 = 62;
        let place = |i: usize| u64::from(position[i]);
        let keys: Vec<u64> = slots
            .iter()
            .map(|slot| match (slot.index, &slot.target) {
                (Some(i), Target::Absent) => (1 << GROUP) | ((1 << GROUP) - 1 - place(i)),
                (Some(i), _) => place(i),
                (None, _) => 2 << GROUP,
            })
            .collect();
        drop(position);
        // Ties go to the slots' own order, so that an unstable sort gives what a stable
        // one would.
        let mut order: Vec<usize> = (0..slots.len()).collect();
        order.sort_unstable_by(|&a, &b| {
            keys[a]
                .cmp(&keys[b])
                .then_with(|| match (slots[a].index, slots[b].index) {
                    (None, None) => slots[a].subject.cmp(&slots[b].subject),
                    _ => std::cmp::Ordering::Equal,
                })
                .then(a.cmp(&b))
        });
        drop(keys);
        let order = order
            .into_iter()
            .map(|s| {
                let slot = &slots[s];
                let needs_confirmation =
                    matches!(slot.decision, Decision::Delete | Decision::Prune)
                        && observation.needs_confirmation(&slot.subject);
                (s, needs_confirmation)
            })
            .collect();
        let report = PlanReport {
            fleet: plan.fleet().name().to_owned(),
            changes: Vec::new(),
            records: record_changes(observation),
            strays: observation.strays.clone(),
            unmatched_exclusions: unmatched_exclusions(plan, observation),
            prerequisites: observation.prerequisites.clone(),
        };
        (order, report)
    }
}

/// A subject that names nothing, left in a slot whose own went to a report line.
fn empty_subject() -> Subject {
    Subject {
        provider: String::new(),
        kind: String::new(),
        name: String::new(),
        region: String::new(),
    }
}

/// A report line of `resource`.
fn change(resource: Subject, line: Line, needs_confirmation: bool) -> PlannedChange {
    let Line {
        action,
        fields,
        reason,
        step,
        detail,
    } = line;
    PlannedChange {
        resource,
        action,
        fields,
        reason,
        step,
        detail,
        needs_confirmation,
    }
}

/// The exclusions that matched nothing, each with why; those whose resource was not
/// looked at (filtered, unreachable, failing to read) are left out: nothing is known.
fn unmatched_exclusions(plan: &Plan, observation: &Observation) -> Vec<UnmatchedExclusion> {
    let fleet = plan.fleet();
    let mut unmatched = Vec::new();
    for e in fleet.exclusions() {
        let subject = super::model::subject(e.provider, e.kind, &e.name, e.region);
        let slot = observation
            .slots
            .iter()
            .find(|s| s.index.is_some() && s.subject == subject);
        let why = match slot {
            None if fleet.resources().any(|r| {
                r.reference().provider == e.provider
                    && r.reference().kind == e.kind
                    && r.reference().name == e.name
                    && r.region() == e.region
            }) =>
            {
                continue;
            }
            None => "no resource of this provider, kind, name and region is declared".to_owned(),
            Some(slot) => match (&slot.decision, &slot.seen) {
                (Decision::Skip(NotAttemptedReason::Excluded, _), _) | (_, Seen::Unobserved(_)) => {
                    continue;
                }
                (_, Seen::Absent) => "the resource does not exist".to_owned(),
                (_, Seen::Present { owner, .. }) => match owner {
                    Owner::Ours | Owner::Unreadable { in_ledger: true } => {
                        "the resource carries this fleet's marker: the fleet manages it".to_owned()
                    }
                    Owner::Not(Ownership::OtherFleet { fleet }) => format!(
                        "the resource carries the marker of fleet `{fleet}`, which an exclusion \
                         does not cover"
                    ),
                    Owner::Unreadable { .. } => {
                        "its tags cannot be read to tell it carries no marker".to_owned()
                    }
                    // Unmarked: it was decided excluded, above.
                    Owner::Not(_) => continue,
                },
            },
        };
        unmatched.push(UnmatchedExclusion {
            resource: subject,
            reason: e.reason.clone(),
            why,
        });
    }
    unmatched
}

/// The changes an apply makes to the ledger alone.
fn record_changes(observation: &Observation) -> Vec<RecordChange> {
    let ledger = &observation.ledger;
    let mut changes = Vec::new();
    let discovered = |slot: &Slot| {
        !ledger.discovered.is_empty() && ledger.discovered.contains(&row_of(&slot.subject))
    };
    for slot in &observation.slots {
        let change = match (&slot.decision, &slot.target) {
            (Decision::Existing { .. }, _) if !slot.recorded => "adopt",
            (Decision::Existing { .. }, Target::Present(_)) if discovered(slot) => "confirm",
            (Decision::AlreadyAbsent, Target::Absent) if slot.recorded => "drop",
            _ => continue,
        };
        changes.push(RecordChange {
            resource: slot.subject.clone(),
            change,
        });
    }
    for row in &observation.forgotten {
        changes.push(RecordChange {
            resource: Subject {
                provider: row.provider.clone(),
                kind: row.kind.clone(),
                name: row.name.clone(),
                region: row.region.clone(),
            },
            change: "forget",
        });
    }
    changes
}
