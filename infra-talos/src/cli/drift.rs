//! `drift`: one drift pass over every managed machine (§6.1), printed per machine.
//!
//! Exit 0 when every machine was read (drifted or not: drift is a finding, reported
//! on its line, never a failure of the command); exit 3 when a machine could not be
//! read, since a pass that could not look must never read as "no drift".

use std::fmt::Write as _;

use crate::controller::{DriftFinding, DriftPass, DriftReading};

/// The pass as text: one line per machine, then a summary.
pub(super) fn text(pass: &DriftPass) -> String {
    let mut out = String::new();
    if pass.readings.is_empty() {
        out.push_str("no machine has an Applied release; nothing to observe\n");
        return out;
    }
    for reading in &pass.readings {
        let _ = writeln!(out, "{}", line(reading));
    }
    let _ = writeln!(
        out,
        "{} machine(s) observed: {} with an open drift record, {} not read",
        pass.readings.len(),
        pass.drifted().len(),
        unread(pass)
    );
    out
}

/// The pass as JSON.
pub(super) fn json(pass: &DriftPass) -> serde_json::Value {
    serde_json::json!({
        "machines": pass.readings,
        "drifted": pass.drifted(),
        "not_read": unread(pass),
    })
}

/// How many machines the pass could not read.
pub(super) fn unread(pass: &DriftPass) -> usize {
    pass.readings
        .iter()
        .filter(|r| {
            matches!(
                r.finding,
                DriftFinding::Unreachable { .. } | DriftFinding::Unread
            )
        })
        .count()
}

fn line(r: &DriftReading) -> String {
    let at = r
        .basis
        .map_or_else(String::new, |b| format!(" (observation r{})", b.0));
    let what = match &r.finding {
        DriftFinding::Unreachable { reason } => format!("not read: {reason}"),
        DriftFinding::Unread => "not read: the configuration digest could not be read".to_owned(),
        DriftFinding::InStep => "in step with Applied".to_owned(),
        DriftFinding::Opened { record } => format!(
            "DRIFTED: drift record r{} opened; freeze, adopt or revert it",
            record.0
        ),
        DriftFinding::StillOpen { record } => {
            format!("DRIFTED: drift record r{} is still open", record.0)
        }
        DriftFinding::Closed { record } => format!(
            "drift record r{} closed: the machine returned to Applied",
            record.0
        ),
        DriftFinding::DiffersUnrecorded => "differs from Applied, not recorded as drift: an operation held the scope or a newer read decides; the next pass looks again".to_owned(),
    };
    format!("{}: {what}{at}", r.machine)
}
