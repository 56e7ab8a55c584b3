//! `plan`: an apply-config plan for the machine's Desired release, a revert of its
//! open drift record (§6.4), or (`--adopt`) an adopt plan (§6.3) that accepts the
//! drifted configuration, or an imported machine's, as Applied.

use std::fmt::Write as _;
use std::sync::Arc;

use infra_core::engine::SystemClock;

use super::{Failure, PlanArgs, who};
use crate::backend::WallTime;
use crate::contract::SpanMs;
use crate::store::{Actor, AdoptPlanSpec, PlanSpec, PlanView, Store};

/// Create the plan `args` describe and say what it binds.
pub(super) async fn create(
    store: &dyn Store,
    actor: &Actor,
    args: PlanArgs,
) -> Result<String, Failure> {
    let view = store.machine(&args.machine).await?;
    let release = view.desired_release.clone().ok_or_else(|| {
        Failure::Refused(format!(
            "refused: creating a plan: machine {} has no Desired release; publish one first",
            args.machine
        ))
    })?;
    let suffix = match (args.revert, args.adopt) {
        (true, _) => "-revert",
        (false, true) => "-adopt",
        (false, false) => "",
    };
    let id = args.id.clone().unwrap_or_else(|| {
        format!(
            "{}-{release}-b{}{suffix}",
            args.machine, view.baseline_revision.0
        )
    });
    let now = WallTime::system(Arc::new(SystemClock::new())).now();
    let expires_at = now.plus(SpanMs::from_secs(args.expires_in));
    let max_evidence_age = SpanMs::from_secs(args.max_evidence_age);
    let plan = if args.adopt {
        let spec = AdoptPlanSpec {
            id,
            machine: args.machine.clone(),
            release: release.clone(),
            expires_at,
            max_evidence_age,
        };
        store.create_adopt_plan(actor, spec).await?
    } else {
        let spec = PlanSpec {
            id,
            machine: args.machine.clone(),
            release: release.clone(),
            expires_at,
            max_evidence_age,
            transport_deadline: SpanMs::from_secs(args.transport_deadline),
            verification_deadline: SpanMs::from_secs(args.verification_deadline),
            max_attempts: args.max_attempts,
            revert: args.revert,
        };
        store.create_plan(actor, spec).await?
    };
    Ok(described(&plan, actor, &release))
}

fn described(plan: &PlanView, actor: &Actor, release: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "plan {} created by {} for machine {}: ",
        plan.id,
        who(actor),
        plan.machine
    );
    if plan.kind == crate::contract::operation::OperationKind::Adopt {
        let what = plan.bound_drift.map_or_else(
            || "the configuration its import read (handover)".to_owned(),
            |r| format!("the configuration of drift record {r}"),
        );
        let _ = writeln!(
            out,
            "adopt {what} as Applied, naming release {release}; nothing will be sent; state {}",
            plan.state
        );
    } else {
        let _ = writeln!(
            out,
            "release {release}, baseline {}, artifact digest {}; state {}",
            plan.baseline_revision,
            plan.artifact_digest.to_hex(),
            plan.state
        );
    }
    out
}
