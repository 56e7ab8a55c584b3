//! Divergence: which fields of a resource differ from its target, and how to repair.
//!
//! The comparison runs field by field over the kind's table ([`Spec::FIELDS`]), between
//! the target settled as far as it can be and the configuration the cloud reports:
//!
//! - a field the target does not say (or cannot settle yet) is not compared;
//! - a field the cloud does not report is unknown, and unknown is not drift;
//! - a field marked "compare if set" whose target is empty is "I did not choose", not
//!   "there must be none" (a subnet the cloud filled in);
//! - a target equal to the field's instruction (`latest`) matches what it resolved to;
//! - sets are compared as sets: they serialise sorted, so equal sets are equal values;
//! - the ownership marker never reaches the comparison: it is stripped on read.
//!
//! [`Spec::FIELDS`]: crate::Spec::FIELDS

use serde::Serialize;
use serde_json::{Map, Value};

use crate::{FieldInfo, Mutability};

/// One field that differs, and how it is repaired.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Divergence {
    /// The field's name.
    pub field: &'static str,
    /// In place, or only by a replace.
    pub mutability: Mutability,
}

/// What a resource needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Repair {
    /// Nothing: it is already right.
    Nothing,
    /// An update in place.
    Update,
    /// A replace: some field cannot change in place.
    Replace,
    /// It does not exist: a create.
    Create,
    /// It must not exist and does: a delete.
    Delete,
}

/// The fields where `reported` diverges from `target`, following `fields`.
pub fn divergence(
    fields: &[FieldInfo],
    target: &Map<String, Value>,
    reported: &Map<String, Value>,
) -> Vec<Divergence> {
    fields
        .iter()
        .filter(|f| {
            let (Some(want), Some(have)) = (target.get(f.name), reported.get(f.name)) else {
                return false;
            };
            if f.compare_if_set && is_empty(want) {
                return false;
            }
            if f.instruction.is_some_and(|i| want.as_str() == Some(i)) {
                return false;
            }
            want != have
        })
        .map(|f| Divergence {
            field: f.name,
            mutability: f.mutability,
        })
        .collect()
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// The repair for an existing resource that must exist, from its divergence.
pub fn repair_of(divergence: &[Divergence]) -> Repair {
    if divergence.is_empty() {
        Repair::Nothing
    } else if divergence
        .iter()
        .any(|d| d.mutability == Mutability::ForcesReplace)
    {
        Repair::Replace
    } else {
        Repair::Update
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Spec;
    use crate::kinds::{AwsInstance, SecurityGroup};
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn an_unknown_report_is_not_drift() {
        let target = map(json!({"description": "web", "ingress": []}));
        let reported = map(json!({}));
        assert!(divergence(SecurityGroup::FIELDS, &target, &reported).is_empty());
    }

    #[test]
    fn an_unsaid_target_is_not_compared() {
        let target = map(json!({"description": "web"}));
        let reported = map(json!({"description": "web", "egress": [{"protocol": "all"}]}));
        assert!(divergence(SecurityGroup::FIELDS, &target, &reported).is_empty());
    }

    #[test]
    fn latest_matches_what_it_resolved_to_and_a_pinned_image_still_drifts() {
        let reported = map(json!({"image": "ami-0abc", "instanceType": "t3.micro"}));
        let latest = map(json!({"image": "latest", "instanceType": "t3.micro"}));
        assert!(divergence(AwsInstance::FIELDS, &latest, &reported).is_empty());
        let pinned = map(json!({"image": "ami-0def", "instanceType": "t3.micro"}));
        let d = divergence(AwsInstance::FIELDS, &pinned, &reported);
        assert_eq!(
            d,
            vec![Divergence {
                field: "image",
                mutability: Mutability::ForcesReplace
            }]
        );
        assert_eq!(repair_of(&d), Repair::Replace);
    }

    #[test]
    fn an_empty_launch_field_is_not_compared_but_a_set_one_is() {
        let reported = map(json!({"subnetId": "subnet-0123"}));
        assert!(
            divergence(
                AwsInstance::FIELDS,
                &map(json!({"subnetId": ""})),
                &reported
            )
            .is_empty()
        );
        let d = divergence(
            AwsInstance::FIELDS,
            &map(json!({"subnetId": "subnet-9"})),
            &reported,
        );
        assert_eq!(repair_of(&d), Repair::Replace);
    }

    #[test]
    fn mutable_fields_update() {
        let target = map(json!({"tags": {"team": "web"}}));
        let reported = map(json!({"tags": {"team": "ops"}}));
        let d = divergence(SecurityGroup::FIELDS, &target, &reported);
        assert_eq!(repair_of(&d), Repair::Update);
    }
}
