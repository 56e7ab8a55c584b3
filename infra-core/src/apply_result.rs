//! The result of an apply: every resource handed in, accounted for exactly once.
//!
//! Three verdicts keep their meaning — **applied** (a provider was called, or had no
//! need to be, and the resource converged), **pruned** (owned, no longer declared,
//! deleted) and **not attempted** (no provider call was made, for one reason of a closed
//! set) — and a fourth bucket, **failed**, holds every resource the apply could not
//! bring to its target, with the error that stopped it. A failure is kept out of the
//! three verdicts on purpose: folding it into "applied" would make "applied" stop
//! meaning "converged", and folding it into "not attempted" would hide that a call was
//! made, perhaps halfway. Every resource is in exactly one of the four.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{BackendError, ErrorKind};

/// What an applied resource needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum Change {
    /// It did not exist and was created.
    Created,
    /// It was changed in place.
    Updated,
    /// It was deleted and created again (a field that cannot change in place).
    Replaced,
    /// It was already right.
    Unchanged,
}

/// Why no provider call was made for a resource. A closed set: callers match on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum NotAttemptedReason {
    /// The backend does not realise this kind.
    UnsupportedKind,
    /// The provider's credentials were not loaded.
    NoCredentials,
    /// No backend was given for the provider at all.
    NoBinding,
    /// Something it depends on did not reach its target earlier in the same apply
    /// (it failed, or awaits approval).
    DependencyFailed,
    /// Left out by the caller's `--target`/`--exclude`.
    Filtered,
    /// An owned orphan of a kind whose ownership cannot be read, so it cannot be
    /// deleted safely.
    NotPrunable,
    /// Its backend governs changes: the change was recorded as a plan for a person to
    /// approve, and nothing was changed yet. Added in envelope `v2`.
    AwaitingApproval,
    /// The run as a whole was stopped before any provider call: a safety gate refused
    /// it (the brake, an unreachable provider with records, the wrong account), the plan
    /// it was to carry out was stale, or a person declined it. The detail says which.
    /// Added in envelope `v3`.
    Refused,
    /// A delete that needs the user's confirmation by name was not confirmed: the
    /// resource was adopted by `discover` on its ownership marker alone, and a marker
    /// can be copied. Confirm with `--allow-delete ADDRESS` or at the interactive
    /// prompt. Added in envelope `v3`.
    Unconfirmed,
    /// Declared, and found in the cloud without this fleet's ownership marker, but named
    /// on the declaration's exclusion list: left alone on purpose, never adopted,
    /// changed or deleted. The detail gives the reason the declaration states. Unlike
    /// the other reasons it is no shortfall: a run whose only not-attempted resources
    /// are excluded (or filtered) succeeds. Added in envelope `v4`.
    Excluded,
}

impl NotAttemptedReason {
    /// Whether the reason is a choice the user made — `filtered` (by `--target` or
    /// `--exclude`) or `excluded` (by the declaration's exclusion list) — rather than
    /// something the run fell short of.
    pub fn is_deliberate(self) -> bool {
        matches!(
            self,
            NotAttemptedReason::Filtered | NotAttemptedReason::Excluded
        )
    }
}

impl fmt::Display for NotAttemptedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NotAttemptedReason::UnsupportedKind => "unsupported-kind",
            NotAttemptedReason::NoCredentials => "no-credentials",
            NotAttemptedReason::NoBinding => "no-binding",
            NotAttemptedReason::DependencyFailed => "dependency-failed",
            NotAttemptedReason::Filtered => "filtered",
            NotAttemptedReason::NotPrunable => "not-prunable",
            NotAttemptedReason::AwaitingApproval => "awaiting-approval",
            NotAttemptedReason::Refused => "refused",
            NotAttemptedReason::Unconfirmed => "unconfirmed",
            NotAttemptedReason::Excluded => "excluded",
        })
    }
}

/// The identity of one resource in a result: provider, kind, name and region.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Subject {
    /// The provider's id.
    pub provider: String,
    /// The kind's id.
    pub kind: String,
    /// The resource's name.
    pub name: String,
    /// The region it is (or was) in.
    pub region: String,
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{} ({})",
            self.provider, self.kind, self.name, self.region
        )
    }
}

/// An applied resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// Which resource.
    pub resource: Subject,
    /// What it needed.
    pub change: Change,
}

/// A pruned resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pruned {
    /// Which resource.
    pub resource: Subject,
    /// It was already gone when the apply came to delete it: only its record was
    /// dropped.
    pub already_absent: bool,
}

/// A resource for which no provider call was made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotAttempted {
    /// Which resource.
    pub resource: Subject,
    /// Why not.
    pub reason: NotAttemptedReason,
    /// What the backend said, where it said something a person acts on: for
    /// `awaiting-approval`, the plan recorded for approval. Never a secret value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What the apply was doing to a resource when it failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum Step {
    /// Observing it (listing, reading, checking its ownership).
    Observe,
    /// Creating it.
    Create,
    /// Updating it.
    Update,
    /// Replacing it.
    Replace,
    /// Deleting it.
    Delete,
    /// Deciding whether it may be touched at all (it exists and is not this fleet's).
    Claim,
}

/// A resource the apply could not bring to its target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failed {
    /// Which resource.
    pub resource: Subject,
    /// What the apply was doing.
    pub step: Step,
    /// The provider's error, or the engine's refusal.
    pub error: BackendError,
}

/// Every resource handed to an apply, in exactly one bucket.
///
/// A bucket left out of a JSON document reads as empty: peers write results that way.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ApplyResult {
    /// Converged: created, updated, replaced or already right.
    #[serde(default)]
    pub applied: Vec<Applied>,
    /// Owned, no longer declared, deleted.
    #[serde(default)]
    pub pruned: Vec<Pruned>,
    /// No provider call made, for a closed reason.
    #[serde(default)]
    pub not_attempted: Vec<NotAttempted>,
    /// Not brought to its target, with the error that stopped it.
    #[serde(default)]
    pub failed: Vec<Failed>,
}

/// A result in which some resource appears twice.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{resource} appears more than once in the apply result")]
pub struct NotDisjoint {
    /// The resource.
    pub resource: Subject,
}

impl ApplyResult {
    /// Every resource in the result, with the bucket it is in.
    pub fn subjects(&self) -> impl Iterator<Item = (&Subject, &'static str)> {
        self.applied
            .iter()
            .map(|a| (&a.resource, "applied"))
            .chain(self.pruned.iter().map(|p| (&p.resource, "pruned")))
            .chain(
                self.not_attempted
                    .iter()
                    .map(|n| (&n.resource, "notAttempted")),
            )
            .chain(self.failed.iter().map(|f| (&f.resource, "failed")))
    }

    /// Checks that no resource is in two buckets (or twice in one).
    pub fn check_disjoint(&self) -> Result<(), NotDisjoint> {
        let mut seen = BTreeSet::new();
        for (subject, _) in self.subjects() {
            if !seen.insert(subject) {
                return Err(NotDisjoint {
                    resource: subject.clone(),
                });
            }
        }
        Ok(())
    }

    /// The resources in the result, as a set.
    pub fn subject_set(&self) -> BTreeSet<Subject> {
        self.subjects().map(|(s, _)| s.clone()).collect()
    }

    /// Whether every resource converged or was pruned (nothing failed). Resources not
    /// attempted for a reason the caller chose (`Filtered`) do not count against it;
    /// any other reason does.
    pub fn is_success(&self) -> bool {
        self.failed.is_empty() && self.not_attempted.iter().all(|n| n.reason.is_deliberate())
    }

    /// Whether the apply changed anything in any cloud.
    pub fn changed_anything(&self) -> bool {
        !self.pruned.iter().all(|p| p.already_absent)
            || self.applied.iter().any(|a| a.change != Change::Unchanged)
    }

    /// Sorts every bucket by resource, so that the result reads (and serialises) the
    /// same whatever order the calls finished in.
    pub fn sort(&mut self) {
        self.applied.sort_by(|a, b| a.resource.cmp(&b.resource));
        self.pruned.sort_by(|a, b| a.resource.cmp(&b.resource));
        self.not_attempted
            .sort_by(|a, b| a.resource.cmp(&b.resource));
        self.failed.sort_by(|a, b| a.resource.cmp(&b.resource));
    }

    /// A result in which every resource of `subjects` is not attempted, for `reason`,
    /// with the same detail: the result of a run stopped as a whole before any call.
    pub fn none_attempted(
        subjects: impl IntoIterator<Item = Subject>,
        reason: NotAttemptedReason,
        detail: &str,
    ) -> ApplyResult {
        let mut result = ApplyResult {
            not_attempted: subjects
                .into_iter()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .map(|resource| NotAttempted {
                    resource,
                    reason,
                    detail: Some(detail.to_owned()),
                })
                .collect(),
            ..ApplyResult::default()
        };
        result.sort();
        result
    }

    /// The versioned JSON envelope: `{"apply": "v4", …}`.
    ///
    /// Versions: `v1` is the four buckets; `v2` adds the not-attempted reason
    /// `awaiting-approval`; `v3` adds the reasons `refused` and `unconfirmed`; `v4` adds
    /// the reason `excluded` (a declared resource without the fleet's marker that the
    /// declaration's exclusion list names). Nothing else changed, so an older document
    /// reads as the newest.
    pub fn to_envelope(&self) -> serde_json::Value {
        let mut value = serde_json::json!({ "apply": "v4" });
        if let (Some(map), Ok(serde_json::Value::Object(body))) =
            (value.as_object_mut(), serde_json::to_value(self))
        {
            map.extend(body);
        }
        value
    }

    /// Reads the versioned envelope back.
    pub fn from_envelope(value: &serde_json::Value) -> Result<ApplyResult, String> {
        match value.get("apply").and_then(|v| v.as_str()) {
            Some("v1" | "v2" | "v3" | "v4") => {
                serde_json::from_value(value.clone()).map_err(|e| e.to_string())
            }
            Some(other) => Err(format!(
                "apply result version {other:?} is not supported (v1 to v4 are)"
            )),
            None => Err("not an apply result: no \"apply\" version".into()),
        }
    }

    /// The failures whose error is of `kind`.
    pub fn failures_of(&self, kind: ErrorKind) -> impl Iterator<Item = &Failed> {
        self.failed.iter().filter(move |f| f.error.kind == kind)
    }
}

#[cfg(test)]
mod tests {
    use super::{ApplyResult, NotAttemptedReason, Subject};

    fn subject(name: &str) -> Subject {
        Subject {
            provider: "aws".into(),
            kind: "s3Bucket".into(),
            name: name.into(),
            region: "eu-west-3".into(),
        }
    }

    #[test]
    fn a_result_that_omits_empty_buckets_reads_them_as_empty() {
        let peer = serde_json::json!({
            "apply": "v1",
            "pruned": [{"resource": subject("old"), "alreadyAbsent": false}],
        });
        let result = ApplyResult::from_envelope(&peer).unwrap();
        assert!(result.applied.is_empty());
        assert!(result.not_attempted.is_empty());
        assert!(result.failed.is_empty());
        assert_eq!(result.pruned[0].resource, subject("old"));
        let bare = ApplyResult::from_envelope(&serde_json::json!({"apply": "v3"})).unwrap();
        assert_eq!(bare, ApplyResult::default());
    }

    #[test]
    fn every_version_reads_and_an_unknown_one_is_refused() {
        let result = ApplyResult::none_attempted(
            [subject("b"), subject("a"), subject("a")],
            NotAttemptedReason::Refused,
            "refused: the plan is stale",
        );
        assert_eq!(result.not_attempted.len(), 2, "each resource once");
        let envelope = result.to_envelope();
        assert_eq!(envelope["apply"], "v4");
        assert_eq!(envelope["notAttempted"][0]["reason"], "refused");
        assert_eq!(ApplyResult::from_envelope(&envelope).unwrap(), result);
        for older in ["v1", "v2", "v3"] {
            let mut old = envelope.clone();
            old["apply"] = older.into();
            assert_eq!(ApplyResult::from_envelope(&old).unwrap(), result);
        }
        let mut future = envelope.clone();
        future["apply"] = "v5".into();
        assert!(
            ApplyResult::from_envelope(&future)
                .unwrap_err()
                .contains("v1 to v4")
        );
        assert!(!result.is_success());
    }

    #[test]
    fn excluded_and_filtered_resources_do_not_fail_a_run() {
        for reason in [NotAttemptedReason::Excluded, NotAttemptedReason::Filtered] {
            let result = ApplyResult::none_attempted([subject("a")], reason, "left alone");
            assert!(result.is_success(), "{reason}");
        }
        let excluded =
            ApplyResult::none_attempted([subject("a")], NotAttemptedReason::Excluded, "theirs");
        assert_eq!(
            excluded.to_envelope()["notAttempted"][0]["reason"],
            "excluded"
        );
    }
}
