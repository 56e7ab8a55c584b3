//! A refusal foreseen: what a plan says when carrying it out would be refused as a
//! whole, by the brake or by `prevent_destroy`, so that the person (or the pipeline)
//! reading the plan learns it before anyone applies it.
//!
//! In a plan's JSON (`plan --json`) it is the member `refused`, present only when the
//! plan would be refused:
//!
//! ```json
//! "refused": {"by": "brake", "message": "refusing: …", "deletes": 0, "absent": 3, "managed": 4}
//! "refused": {"by": "prevent_destroy", "message": "refusing: …",
//!             "resources": [{"resource": "aws/securityGroup/web (eu-west-3)", "action": "delete"}]}
//! ```

use serde::Serialize;

use super::{ApplyError, Engine, Proposal};

/// Why carrying out a plan would be refused, with what the refusal names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "by", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Refusal {
    /// The brake: the run would remove most of what the fleet manages from its
    /// records while the fleet still declares something. `--force` lifts it.
    Brake {
        /// The whole sentence, as the refused apply says it.
        message: String,
        /// Recorded resources the run would delete (deletes and prunes).
        deletes: usize,
        /// Recorded resources that read as absent.
        absent: usize,
        /// How many resources the records hold.
        managed: usize,
    },
    /// `prevent_destroy`: the run would delete or replace a protected resource. No
    /// flag lifts it.
    PreventDestroy {
        /// The whole sentence, as the refused apply says it.
        message: String,
        /// Each protected resource the run would destroy, and how.
        resources: Vec<ProtectedResource>,
    },
}

/// A resource protected with `prevent_destroy` that a plan would destroy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProtectedResource {
    /// The resource's address, as the plan prints it.
    pub resource: String,
    /// What the run would do to it: `delete`, `prune` or `replace`.
    pub action: &'static str,
}

impl Refusal {
    /// The refusal an apply's error stands for, if it is one a plan foresees (the brake
    /// or `prevent_destroy`).
    pub fn of(error: &ApplyError) -> Option<Refusal> {
        let message = error.to_string();
        match error {
            ApplyError::Brake {
                deletes,
                absent,
                managed,
            } => Some(Refusal::Brake {
                message,
                deletes: *deletes,
                absent: *absent,
                managed: *managed,
            }),
            ApplyError::PreventDestroy { resources } => Some(Refusal::PreventDestroy {
                message,
                resources: resources
                    .iter()
                    .map(|(resource, action)| ProtectedResource {
                        resource: resource.clone(),
                        action,
                    })
                    .collect(),
            }),
            _ => None,
        }
    }

    /// Which gate refuses: `brake` or `prevent_destroy`, as the JSON names it.
    pub fn by(&self) -> &'static str {
        match self {
            Refusal::Brake { .. } => "brake",
            Refusal::PreventDestroy { .. } => "prevent_destroy",
        }
    }

    /// The whole sentence, as the refused apply says it.
    pub fn message(&self) -> &str {
        match self {
            Refusal::Brake { message, .. } | Refusal::PreventDestroy { message, .. } => message,
        }
    }

    /// Whether a flag lifts it (`--force` lifts the brake; nothing lifts
    /// `prevent_destroy`).
    pub fn can_be_forced(&self) -> bool {
        matches!(self, Refusal::Brake { .. })
    }
}

impl Engine {
    /// The refusal carrying out `proposal` would meet, in the order
    /// [`carry_out`](Engine::carry_out) checks: `prevent_destroy` first, then the
    /// brake. `None`: it would not be refused as a whole.
    pub fn refusal(&self, proposal: &Proposal) -> Option<Refusal> {
        self.check_protected(proposal)
            .and_then(|()| self.check_brake(proposal))
            .err()
            .and_then(|e| Refusal::of(&e))
    }
}

/// A plan's JSON (`PlanReport::to_json`) with the refusal it would meet, if any, as its
/// member `refused`.
pub fn with_refusal(mut plan: serde_json::Value, refusal: Option<&Refusal>) -> serde_json::Value {
    if let (Some(map), Some(refusal)) = (plan.as_object_mut(), refusal) {
        map.insert(
            "refused".into(),
            serde_json::to_value(refusal).expect("a refusal serialises"),
        );
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_brake_and_prevent_destroy_are_refusals_and_nothing_else_is() {
        let brake = Refusal::of(&ApplyError::Brake {
            deletes: 1,
            absent: 2,
            managed: 4,
        })
        .expect("the brake is foreseen");
        let json = serde_json::to_value(&brake).unwrap();
        assert_eq!(json["by"], "brake");
        assert_eq!(
            (&json["deletes"], &json["absent"], &json["managed"]),
            (&1.into(), &2.into(), &4.into())
        );
        assert!(
            json["message"]
                .as_str()
                .unwrap()
                .contains("remove 3 of the 4 resources"),
            "{json}"
        );
        assert!(brake.can_be_forced());

        let protected = Refusal::of(&ApplyError::PreventDestroy {
            resources: vec![("aws/securityGroup/web (eu-west-3)".into(), "prune")],
        })
        .expect("prevent_destroy is foreseen");
        let json = serde_json::to_value(&protected).unwrap();
        assert_eq!(json["by"], "prevent_destroy");
        assert_eq!(
            json["resources"],
            serde_json::json!([{"resource": "aws/securityGroup/web (eu-west-3)", "action": "prune"}])
        );
        assert!(!protected.can_be_forced());

        assert_eq!(
            Refusal::of(&ApplyError::Stale {
                changes: vec!["x".into()]
            }),
            None
        );
    }

    #[test]
    fn a_plan_that_would_not_be_refused_has_no_refused_member() {
        let plan = serde_json::json!({"planReport": "v3"});
        assert_eq!(with_refusal(plan.clone(), None), plan);
        let refusal = Refusal::Brake {
            message: "m".into(),
            deletes: 0,
            absent: 3,
            managed: 4,
        };
        assert_eq!(with_refusal(plan, Some(&refusal))["refused"]["by"], "brake");
    }
}
