//! `plan`: an apply-config plan for the machine's Desired release, a revert of its
//! open drift record (§6.4), or (`--adopt`) an adopt plan (§6.3) that accepts the
//! drifted configuration, or an imported machine's, as Applied.

use std::fmt::Write as _;

use super::who;
use crate::store::{Actor, PlanView};

/// What a plan made binds, as a user reads it.
pub(super) fn described(plan: &PlanView, actor: &Actor, release: &str) -> String {
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
