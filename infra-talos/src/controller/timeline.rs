//! What the executor reads back from a machine's timeline: its attempts, their
//! accounting, and the recovery observations taken. The store's trait offers the
//! timeline entries; the details are read here.

use crate::contract::evidence::{ObservationPurpose, ResponseClass, TransportOutcome};
use crate::contract::{InstantMs, Revision};
use crate::store::TimelineEntry;

/// One attempt of an operation as the timeline holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct AttemptEntry {
    pub(super) number: u32,
    pub(super) revision: Revision,
    pub(super) at: InstantMs,
    pub(super) response: Option<ResponseClass>,
    pub(super) decided: bool,
}

impl AttemptEntry {
    /// A response from the node or a §5.2 decision is on record.
    pub(super) fn accounted(&self) -> bool {
        self.decided || self.response.is_some_and(ResponseClass::from_target)
    }
}

/// A recorded observation: its basis entry and its record entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ObservationEntry {
    pub(super) purpose: ObservationPurpose,
    pub(super) basis: Revision,
    pub(super) started_at: InstantMs,
    pub(super) recorded_at: InstantMs,
    pub(super) digest: Option<String>,
    pub(super) config_version: Option<u64>,
}

fn attempt_number(detail: &str) -> Option<u32> {
    let rest = detail.strip_prefix("attempt ")?;
    let end = rest.find(|c: char| !c.is_ascii_digit())?;
    rest[..end].parse().ok()
}

fn response_class(name: &str) -> Option<ResponseClass> {
    Some(match name {
        "accepted" => ResponseClass::Accepted,
        "validation_rejection" => ResponseClass::ValidationRejection,
        "other_refusal" => ResponseClass::OtherRefusal,
        "deadline_exceeded" => ResponseClass::Transport(TransportOutcome::DeadlineExceeded),
        "connection_lost" => ResponseClass::Transport(TransportOutcome::ConnectionLost),
        "unavailable" => ResponseClass::Transport(TransportOutcome::Unavailable),
        _ => return None,
    })
}

fn purpose(name: &str) -> Option<ObservationPurpose> {
    Some(match name {
        "evidence" => ObservationPurpose::Evidence,
        "completion" => ObservationPurpose::Completion,
        "recovery" => ObservationPurpose::Recovery,
        "drift" => ObservationPurpose::Drift,
        "restoration" => ObservationPurpose::Restoration,
        "publication" => ObservationPurpose::Publication,
        _ => return None,
    })
}

/// The operation's attempts, oldest first, with their accounting.
pub(super) fn attempts(timeline: &[TimelineEntry], operation: &str) -> Vec<AttemptEntry> {
    let mine = |e: &&TimelineEntry| e.operation.as_deref() == Some(operation);
    let mut out: Vec<AttemptEntry> = timeline
        .iter()
        .filter(mine)
        .filter(|e| e.kind == "attempt")
        .zip(1u32..)
        .map(|(e, number)| AttemptEntry {
            number,
            revision: e.revision,
            at: e.at,
            response: None,
            decided: false,
        })
        .collect();
    for e in timeline.iter().filter(mine) {
        let Some(n) = attempt_number(&e.detail) else {
            continue;
        };
        let Some(a) = out.iter_mut().find(|a| a.number == n) else {
            continue;
        };
        match e.kind.as_str() {
            "response" => {
                let class = e
                    .detail
                    .split_once(": ")
                    .and_then(|(_, c)| response_class(c));
                if class.is_some() {
                    a.response = class;
                }
            }
            "accounting" => a.decided = true,
            _ => {}
        }
    }
    out
}

/// The machine's recorded observations, by basis.
pub(super) fn observations(timeline: &[TimelineEntry]) -> Vec<ObservationEntry> {
    let mut out = Vec::new();
    for e in timeline.iter().filter(|e| e.kind == "observation") {
        let mut fields = e.detail.split(", ");
        let Some(p) = fields
            .next()
            .and_then(|f| f.strip_prefix("purpose "))
            .and_then(purpose)
        else {
            continue;
        };
        let mut basis = None;
        let mut digest = None;
        let mut config_version = None;
        for f in fields {
            if let Some(b) = f.strip_prefix("basis r") {
                basis = b.parse().ok().map(Revision);
            } else if let Some(d) = f.strip_prefix("digest ") {
                digest = (d != "unread").then(|| d.to_owned());
            } else if let Some(v) = f.strip_prefix("config version ") {
                config_version = v.parse().ok();
            }
        }
        let Some(basis) = basis else { continue };
        let Some(start) = timeline.iter().find(|s| s.revision == basis) else {
            continue;
        };
        out.push(ObservationEntry {
            purpose: p,
            basis,
            started_at: start.at,
            recorded_at: e.at,
            digest,
            config_version,
        });
    }
    out.sort_by_key(|o| o.basis);
    out
}

/// The store time of the latest entry: no earlier than any time the store has
/// written, and no later than the store's present.
pub(super) fn latest_time(timeline: &[TimelineEntry]) -> InstantMs {
    timeline.iter().map(|e| e.at).max().unwrap_or(InstantMs(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(revision: u64, kind: &str, op: Option<&str>, detail: &str) -> TimelineEntry {
        TimelineEntry {
            revision: Revision(revision),
            kind: kind.to_owned(),
            at: InstantMs(revision * 10),
            actor: "controller".to_owned(),
            actor_role: "controller".to_owned(),
            plan: None,
            operation: op.map(str::to_owned),
            comparison: None,
            detail: detail.to_owned(),
        }
    }

    #[test]
    fn reads_attempts_and_their_accounting() {
        let t = vec![
            entry(1, "attempt", Some("o"), ""),
            entry(2, "response", Some("o"), "attempt 1: connection_lost"),
            entry(3, "attempt", Some("x"), ""),
            entry(
                4,
                "accounting",
                Some("o"),
                "attempt 1 accounted by decision (…)",
            ),
            entry(5, "attempt", Some("o"), ""),
            entry(6, "response", Some("o"), "attempt 2: accepted"),
        ];
        let a = attempts(&t, "o");
        assert_eq!(a.len(), 2);
        assert!(a[0].decided && a[0].accounted());
        assert_eq!(
            a[0].response,
            Some(ResponseClass::Transport(TransportOutcome::ConnectionLost))
        );
        assert_eq!(a[1].response, Some(ResponseClass::Accepted));
        assert_eq!(a[1].revision, Revision(5));
    }

    #[test]
    fn reads_observations() {
        let t = vec![
            entry(7, "observation_started", None, "purpose recovery"),
            entry(
                8,
                "observation",
                None,
                "purpose recovery, basis r7, digest abcd, config version 4",
            ),
            entry(9, "observation_started", None, "purpose completion"),
            entry(
                10,
                "observation",
                None,
                "purpose completion, basis r9, digest unread, config version unread",
            ),
        ];
        let o = observations(&t);
        assert_eq!(o.len(), 2);
        assert_eq!(o[0].purpose, ObservationPurpose::Recovery);
        assert_eq!(o[0].started_at, InstantMs(70));
        assert_eq!(o[0].recorded_at, InstantMs(80));
        assert_eq!(o[0].digest.as_deref(), Some("abcd"));
        assert_eq!(o[0].config_version, Some(4));
        assert_eq!(o[1].digest, None);
        assert_eq!(o[1].config_version, None);
    }
}
