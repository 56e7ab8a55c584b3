//! The applier contract, through a real engine: every resource handed in is in exactly
//! one bucket, for a legal reason; nothing is dropped; prune deletes only what this
//! fleet owns; and applying the same plan twice changes nothing the second time.

use std::collections::BTreeSet;

use infra_core::{
    engine::{
        ApplyResult, Change, LedgerRow, NotAttemptedReason, PlanReport, RecordStore, Subject,
    },
    prelude::Fleet,
};

use crate::conformance::context::{describe_changes, planned};
use crate::conformance::{Context, KindSample, RecordedCall, Variant, Verdict};
use infra_core::sdk::layer::Op;

/// One apply of the scenario: what was planned, what happened, what was handed in and
/// what the backend was asked.
#[derive(Clone, Debug)]
pub struct ApplyStep {
    /// What the step applied (`create`, `update`, `prune`).
    pub label: &'static str,
    /// The plan the apply set out from.
    pub plan: PlanReport,
    /// What the apply reported.
    pub result: ApplyResult,
    /// Every resource handed to the apply: the declared ones and the orphans of the
    /// records.
    pub handed_in: BTreeSet<Subject>,
    /// The calls the backend received during the apply.
    pub calls: Vec<RecordedCall>,
}

/// The applies of [`apply_scenario`], in order.
#[derive(Clone, Debug, Default)]
pub struct ScenarioLog {
    /// One entry per apply.
    pub steps: Vec<ApplyStep>,
}

fn handed_in(fleet: &Fleet, records: &[LedgerRow]) -> BTreeSet<Subject> {
    let declared: BTreeSet<(String, String, String)> = fleet
        .resources()
        .map(|r| {
            let rf = r.reference();
            (rf.provider.to_owned(), rf.kind.to_owned(), rf.name.clone())
        })
        .collect();
    fleet
        .resources()
        .map(|r| Subject {
            provider: r.reference().provider.to_owned(),
            kind: r.reference().kind.to_owned(),
            name: r.reference().name.clone(),
            region: r.region().to_owned(),
        })
        .chain(
            records
                .iter()
                .filter(|row| {
                    !declared.contains(&(row.provider.clone(), row.kind.clone(), row.name.clone()))
                })
                .map(|row| Subject {
                    provider: row.provider.clone(),
                    kind: row.kind.clone(),
                    name: row.name.clone(),
                    region: row.region.clone(),
                }),
        )
        .collect()
}

/// Creates the sample's resource, updates it (when the sample has a `Mutable`
/// variant), then drops it from the declaration so that it is pruned, recording each
/// apply for [`apply_result_buckets_are_disjoint`],
/// [`apply_result_reasons_and_actions_are_legal`] and [`apply_result_drops_nothing`].
pub async fn apply_scenario(ctx: &Context, sample: &KindSample) -> Result<ScenarioLog, String> {
    let name = ctx.name("app", sample);
    let harness = ctx.harness();
    let mut fleets = vec![("create", ctx.fleet(sample, &name, Variant::Base)?)];
    if sample.mutable {
        fleets.push(("update", ctx.fleet(sample, &name, Variant::Mutable)?));
    }
    fleets.push(("prune", ctx.empty_fleet()?));
    let mut log = ScenarioLog::default();
    for (label, fleet) in fleets {
        let records = harness
            .store
            .load_ledger(fleet.name())
            .map_err(|e| e.to_string())?;
        let records: Vec<LedgerRow> = records.rows.into_iter().collect();
        let handed_in = handed_in(&fleet, &records);
        harness.recorder.take();
        let outcome = harness.apply(&fleet).await?;
        log.steps.push(ApplyStep {
            label,
            plan: outcome.plan,
            result: outcome.result,
            handed_in,
            calls: harness.recorder.take(),
        });
    }
    Ok(log)
}

/// No resource is in two buckets of a result, nor twice in one.
pub fn apply_result_buckets_are_disjoint(log: &ScenarioLog) -> Verdict {
    for step in &log.steps {
        if let Err(e) = step.result.check_disjoint() {
            return Verdict::fail(format!("the {} apply: {e}", step.label));
        }
    }
    Verdict::Pass
}

/// The result's resources are exactly those handed in: none dropped, none invented.
pub fn apply_result_drops_nothing(log: &ScenarioLog) -> Verdict {
    for step in &log.steps {
        let got = step.result.subject_set();
        let missing: Vec<String> = step
            .handed_in
            .difference(&got)
            .map(ToString::to_string)
            .collect();
        let extra: Vec<String> = got
            .difference(&step.handed_in)
            .map(ToString::to_string)
            .collect();
        if !missing.is_empty() || !extra.is_empty() {
            return Verdict::fail(format!(
                "the {} apply dropped [{}] and reported resources never handed in [{}]",
                step.label,
                missing.join(", "),
                extra.join(", ")
            ));
        }
    }
    Verdict::Pass
}

const ACTIONS: [&str; 8] = [
    "create",
    "update",
    "replace",
    "delete",
    "prune",
    "unchanged",
    "not-attempted",
    "failed",
];

/// Why a not-attempted reason cannot be right for a reachable backend that declares
/// the kind, with no filter given; `None` when it can be.
fn illegal_reason(
    ctx: &Context,
    kind: &str,
    reason: NotAttemptedReason,
    result: &ApplyResult,
) -> Option<String> {
    match reason {
        NotAttemptedReason::UnsupportedKind => Some(format!(
            "the backend declares kind {kind}, yet it was unsupported"
        )),
        NotAttemptedReason::NoCredentials => {
            Some("the backend is reachable, yet credentials were missing".into())
        }
        NotAttemptedReason::NoBinding => Some("a backend was given, yet none was bound".into()),
        NotAttemptedReason::Filtered => Some("no filter was given, yet it was filtered".into()),
        NotAttemptedReason::NotPrunable if ctx.caps.ownership.contains(kind) => Some(format!(
            "the backend can read the ownership of kind {kind}, yet it was not prunable"
        )),
        NotAttemptedReason::NotPrunable => None,
        // A governed backend's own answer: the convergence checks judge it.
        NotAttemptedReason::AwaitingApproval => None,
        NotAttemptedReason::DependencyFailed
            if result.failed.is_empty()
                && result
                    .not_attempted
                    .iter()
                    .all(|n| n.reason == NotAttemptedReason::DependencyFailed) =>
        {
            Some("nothing failed, yet a dependency failed".into())
        }
        NotAttemptedReason::DependencyFailed => None,
        NotAttemptedReason::Refused => {
            Some("no gate refused the run and nothing was declined, yet it was refused".into())
        }
        // Only a delete the plan said needs a confirmation by name.
        NotAttemptedReason::Unconfirmed => None,
        // Only a declared resource the fleet's exclusion list names, as planned.
        NotAttemptedReason::Excluded => None,
        // A reason this suite does not know yet: nothing to judge it by.
        other => Some(format!(
            "not attempted for `{other}`, a reason this suite cannot judge"
        )),
    }
}

fn legal_step(ctx: &Context, step: &ApplyStep) -> Result<(), String> {
    for c in &step.plan.changes {
        if !ACTIONS.contains(&c.action) {
            return Err(format!(
                "{} is planned with the unknown action `{}`",
                c.resource, c.action
            ));
        }
    }
    for (subject, bucket) in step.result.subjects() {
        let Some(p) = planned(&step.plan, subject) else {
            return Err(format!("{subject} is in the result but not in the plan"));
        };
        let pending = p
            .detail
            .as_deref()
            .is_some_and(|d| d.contains("may change"));
        let legal = match bucket {
            "applied" => {
                let change = step
                    .result
                    .applied
                    .iter()
                    .find(|a| &a.resource == subject)
                    .map(|a| a.change);
                match (p.action, change) {
                    ("create", Some(Change::Created))
                    | ("update", Some(Change::Updated))
                    | ("replace", Some(Change::Replaced))
                    | ("unchanged", Some(Change::Unchanged)) => true,
                    (
                        "unchanged" | "update" | "replace",
                        Some(Change::Updated | Change::Replaced | Change::Unchanged),
                    ) => pending,
                    _ => false,
                }
            }
            "pruned" => matches!(p.action, "prune" | "delete"),
            "notAttempted" => {
                let reason = step
                    .result
                    .not_attempted
                    .iter()
                    .find(|n| &n.resource == subject)
                    .map(|n| n.reason)
                    .ok_or_else(|| format!("{subject} is not attempted without a reason"))?;
                if let Some(why) = illegal_reason(ctx, &subject.kind, reason, &step.result) {
                    return Err(format!("{subject} was not attempted ({reason}): {why}"));
                }
                (p.action == "not-attempted" && p.reason == Some(reason))
                    || (reason == NotAttemptedReason::Unconfirmed && p.needs_confirmation)
                    || (reason == NotAttemptedReason::DependencyFailed
                        && matches!(p.action, "create" | "update" | "replace" | "unchanged"))
            }
            // A resource that needed no call cannot have failed at one.
            _ => p.action != "unchanged" || pending,
        };
        if !legal {
            return Err(format!(
                "{subject} was planned `{}` and ended {bucket}{}",
                p.action,
                match bucket {
                    "applied" => format!(
                        " ({:?})",
                        step.result
                            .applied
                            .iter()
                            .find(|a| &a.resource == subject)
                            .map(|a| a.change)
                    ),
                    _ => String::new(),
                }
            ));
        }
        if p.action == "failed" && bucket != "failed" {
            return Err(format!(
                "{subject} could not be observed (planned `failed`) yet ended {bucket}"
            ));
        }
    }
    Ok(())
}

/// Every planned action is one of the engine's, every verdict follows from what was
/// planned (a create ends created, a prune pruned, a resource needing no call never
/// fails), and every not-attempted reason is possible for this backend.
pub fn apply_result_reasons_and_actions_are_legal(ctx: &Context, log: &ScenarioLog) -> Verdict {
    for step in &log.steps {
        if let Err(why) = legal_step(ctx, step) {
            return Verdict::fail(format!("the {} apply: {why}", step.label));
        }
    }
    Verdict::Pass
}

fn deleted_handles(calls: &[RecordedCall], kind: &str) -> BTreeSet<String> {
    calls
        .iter()
        .filter(|c| c.op == Op::Delete && c.kind == Some(kind) && c.error.is_none())
        .filter_map(|c| c.handle.clone())
        .collect()
}

/// With a resource of another fleet and an owned orphan of the same kind in the same
/// region (and the other fleet's resource named in this fleet's records, as a stale
/// row would), the apply that drops the orphan deletes exactly the orphan, asserted on
/// the calls the backend received; the other fleet's resource is still there after.
/// For a kind whose ownership cannot be read, nothing is deleted: the orphan is not
/// prunable.
pub async fn prune_deletes_only_owned_orphans(ctx: &Context, sample: &KindSample) -> Verdict {
    run(ctx, sample).await.into()
}

async fn run(ctx: &Context, sample: &KindSample) -> Result<(), String> {
    let (kind, region) = (sample.kind, ctx.primary());
    let own = ctx.name("own", sample);
    let foreign = ctx.name("frn", sample);
    ctx.create_foreign(sample, &foreign).await?;
    let harness = ctx.harness();
    let outcome = harness
        .apply(&ctx.fleet(sample, &own, Variant::Base)?)
        .await?;
    if !outcome.result.is_success() {
        return Err(format!(
            "creating the orphan-to-be failed: {:?}",
            outcome.result.failed
        ));
    }
    let own_handle = ctx.handle_of(kind, region, &own).await?;
    let foreign_handle = ctx.handle_of(kind, region, &foreign).await?;

    let mut ledger = harness
        .store
        .load_ledger(&ctx.fleet)
        .map_err(|e| e.to_string())?;
    ledger.rows.insert(LedgerRow {
        provider: ctx.provider.to_owned(),
        kind: kind.to_owned(),
        name: foreign.clone(),
        region: region.to_owned(),
    });
    harness
        .store
        .save_ledger(&ctx.fleet, &ledger)
        .map_err(|e| e.to_string())?;

    harness.recorder.take();
    let outcome = harness.apply(&ctx.empty_fleet()?).await?;
    let calls = harness.recorder.take();
    let touched_foreign: Vec<String> = calls
        .iter()
        .filter(|c| matches!(c.op, Op::Delete | Op::Update))
        .filter(|c| c.handle.as_deref() == Some(foreign_handle.as_str()))
        .map(|c| format!("{:?}", c.op))
        .collect();
    if !touched_foreign.is_empty() {
        return Err(format!(
            "the apply called {} on `{foreign}` ({foreign_handle}), which carries the marker of \
             fleet `{}`: prune must delete only what this fleet owns",
            touched_foreign.join(", "),
            crate::conformance::FOREIGN_FLEET,
        ));
    }
    let deleted = deleted_handles(&calls, kind);
    let own_subject = ctx.subject(sample, &own, region);
    let foreign_subject = ctx.subject(sample, &foreign, region);
    if ctx.caps.ownership.contains(kind) {
        if deleted != BTreeSet::from([own_handle.clone()]) {
            return Err(format!(
                "expected exactly one delete of a {kind}, of the orphan {own_handle}; the backend \
                 received deletes of {deleted:?}"
            ));
        }
        if !outcome
            .result
            .pruned
            .iter()
            .any(|p| p.resource == own_subject && !p.already_absent)
        {
            return Err(format!(
                "the orphan {own_subject} is not reported pruned: {:?}",
                outcome.result
            ));
        }
    } else if !deleted.is_empty()
        || !outcome
            .result
            .not_attempted
            .iter()
            .any(|n| n.resource == own_subject && n.reason == NotAttemptedReason::NotPrunable)
    {
        return Err(format!(
            "the backend cannot read the ownership of kind {kind}, so its orphan must be \
             not-prunable and nothing deleted; deleted {deleted:?}, result {:?}",
            outcome.result
        ));
    }
    if outcome
        .result
        .pruned
        .iter()
        .any(|p| p.resource == foreign_subject)
    {
        return Err(format!(
            "the resource of fleet `{}` is reported pruned",
            crate::conformance::FOREIGN_FLEET
        ));
    }
    ctx.backend
        .read(kind, region, &foreign_handle)
        .await
        .map_err(|e| {
            format!(
                "the resource of fleet `{}` cannot be read after the apply: {e}",
                crate::conformance::FOREIGN_FLEET
            )
        })?;
    Ok(())
}

/// Applying the same plan twice: the second apply reports every resource unchanged and
/// makes no create, update or delete call; a plan after it has no changes.
pub async fn apply_is_idempotent(ctx: &Context, sample: &KindSample) -> Verdict {
    idempotent(ctx, sample).await.into()
}

async fn idempotent(ctx: &Context, sample: &KindSample) -> Result<(), String> {
    let name = ctx.name("idm", sample);
    let harness = ctx.harness();
    let fleet = ctx.fleet(sample, &name, Variant::Base)?;
    let first = harness.apply(&fleet).await?;
    if !first.result.is_success() {
        return Err(format!("the first apply failed: {:?}", first.result.failed));
    }
    harness.recorder.take();
    let second = harness.apply(&fleet).await?;
    let writes: Vec<String> = harness
        .recorder
        .take()
        .into_iter()
        .filter(|c| matches!(c.op, Op::Create | Op::Update | Op::Delete))
        .map(|c| {
            format!(
                "{:?} {} {}",
                c.op,
                c.kind.unwrap_or(""),
                c.name.or(c.handle).unwrap_or_default()
            )
        })
        .collect();
    if !writes.is_empty() {
        return Err(format!(
            "the second apply of the same plan made writes: {} (planned: {})",
            writes.join(", "),
            describe_changes(&second.plan)
        ));
    }
    let changed: Vec<String> = second
        .result
        .applied
        .iter()
        .filter(|a| a.change != Change::Unchanged)
        .map(|a| format!("{} {:?}", a.resource, a.change))
        .collect();
    if !changed.is_empty() || !second.result.is_success() {
        return Err(format!(
            "the second apply of the same plan changed [{}], failed {:?}",
            changed.join(", "),
            second.result.failed
        ));
    }
    let plan = harness.plan(&fleet).await?;
    if plan.has_changes() {
        return Err(format!(
            "after two applies a plan still wants: {}",
            describe_changes(&plan)
        ));
    }
    Ok(())
}
