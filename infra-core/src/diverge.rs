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
//! - sets are compared as sets: a field marked as one ([`FieldInfo::set`]) compares its
//!   elements whatever order the cloud answered them in;
//! - a change that the field's own test says cannot be made in place
//!   ([`FieldInfo::replace_when`]) is a replace even in a field that otherwise updates;
//! - the ownership marker never reaches the comparison: it is stripped on read.
//!
//! [`Spec::FIELDS`]: crate::Spec::FIELDS

use serde::Serialize;
use serde_json::{Map, Value};

use crate::{FieldInfo, Mutability};

/// One field that differs, and how it is repaired.
///
/// It holds the reported value and the target. Neither ever holds a secret's plaintext
/// (a plan settles without secret values, and a secret serialises as a placeholder);
/// a field marked sensitive is still shown as `(sensitive)`, and its JSON leaves both
/// values out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The field's name.
    pub field: &'static str,
    /// In place, or only by a replace.
    pub mutability: Mutability,
    /// What the cloud reports.
    pub before: Value,
    /// What the declaration asks for.
    pub after: Value,
    /// Whether the values are, or derive from, a secret.
    pub sensitive: bool,
}

impl Divergence {
    /// A difference in a field, with nothing known of its values (a secret's value,
    /// compared where it lives and never shown).
    pub fn hidden(field: &'static str, mutability: Mutability) -> Self {
        Divergence {
            field,
            mutability,
            before: Value::Null,
            after: Value::Null,
            sensitive: true,
        }
    }
}

impl Serialize for Divergence {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("field", self.field)?;
        map.serialize_entry("repair", &self.mutability)?;
        if self.sensitive {
            map.serialize_entry("sensitive", &true)?;
        } else {
            map.serialize_entry("before", &self.before)?;
            map.serialize_entry("after", &self.after)?;
        }
        map.end()
    }
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
    divergence_of(fields, target, |name| reported.get(name))
}

/// [`divergence`], with each reported field looked up by `reported` (so that a
/// comparison reading two maps need not merge them first).
pub(crate) fn divergence_of<'r>(
    fields: &[FieldInfo],
    target: &Map<String, Value>,
    reported: impl Fn(&str) -> Option<&'r Value>,
) -> Vec<Divergence> {
    fields
        .iter()
        .filter_map(|f| {
            let (Some(want), Some(have)) = (target.get(f.name), reported(f.name)) else {
                return None;
            };
            if f.compare_if_set && is_empty(want) {
                return None;
            }
            if f.instruction.is_some_and(|i| want.as_str() == Some(i)) {
                return None;
            }
            let differs = if f.set {
                as_set(want) != as_set(have)
            } else {
                want != have
            };
            differs.then(|| Divergence {
                field: f.name,
                mutability: f.repair_of_change(have, want),
                before: have.clone(),
                after: want.clone(),
                sensitive: f.sensitive,
            })
        })
        .collect()
}

/// A list as a set: its elements in one canonical order, without repeats. Anything but
/// a list is itself.
fn as_set(value: &Value) -> Value {
    match value {
        Value::Array(items) => {
            let mut keyed: Vec<(String, &Value)> =
                items.iter().map(|v| (v.to_string(), v)).collect();
            keyed.sort_by(|a, b| a.0.cmp(&b.0));
            keyed.dedup_by(|a, b| a.0 == b.0);
            Value::Array(keyed.into_iter().map(|(_, v)| v.clone()).collect())
        }
        other => other.clone(),
    }
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
    use crate::kinds::{AwsInstance, FunctionNamespace, Iam, Postgres, SecurityGroup};
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
                mutability: Mutability::ForcesReplace,
                before: json!("ami-0abc"),
                after: json!("ami-0def"),
                sensitive: false,
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
    fn a_set_answered_in_another_order_is_the_same_set() {
        let target = map(json!({"policies": ["a", "b", "c"], "assumedBy": ["x"]}));
        let reported = map(json!({"policies": ["c", "a", "b", "a"], "assumedBy": ["x"]}));
        assert!(divergence(Iam::FIELDS, &target, &reported).is_empty());
        let fewer = map(json!({"policies": ["c", "a"], "assumedBy": ["x"]}));
        assert_eq!(divergence(Iam::FIELDS, &target, &fewer).len(), 1);
    }

    #[test]
    fn tag_lists_of_key_value_strings_compare_as_sets() {
        let target = map(json!({"tags": ["team=web", "env=prod"]}));
        let reported = map(json!({"tags": ["env=prod", "team=web"]}));
        assert!(divergence(FunctionNamespace::FIELDS, &target, &reported).is_empty());
    }

    #[test]
    fn rules_compare_as_a_set_whatever_order_the_cloud_answers() {
        let a = json!({"protocol": "tcp", "fromPort": 443, "toPort": 443, "cidr": "0.0.0.0/0"});
        let b = json!({"protocol": "tcp", "fromPort": 80, "toPort": 80, "cidr": "0.0.0.0/0"});
        let target = map(json!({"ingress": [a.clone(), b.clone()]}));
        let reported = map(json!({"ingress": [b, a]}));
        assert!(divergence(SecurityGroup::FIELDS, &target, &reported).is_empty());
    }

    #[test]
    fn an_ordered_list_is_compared_in_order() {
        let fields = [FieldInfo {
            name: "args",
            mutability: Mutability::Mutable,
            compare_if_set: false,
            instruction: None,
            set: false,
            sensitive: false,
            replace_when: None,
        }];
        let target = map(json!({"args": ["--a", "--b"]}));
        let reported = map(json!({"args": ["--b", "--a"]}));
        assert_eq!(divergence(&fields, &target, &reported).len(), 1);
    }

    #[test]
    fn a_database_moving_between_shapes_is_replaced_and_resized_in_place() {
        let classic = json!({"shape": "classic", "instanceClass": "db.t4g.micro"});
        let bigger = json!({"shape": "classic", "instanceClass": "db.t4g.large"});
        let serverless = json!({"shape": "serverless", "minCapacity": 0.5, "maxCapacity": 4.0});
        let repair = |from: &Value, to: &Value| {
            repair_of(&divergence(
                Postgres::FIELDS,
                &map(json!({ "capacity": to })),
                &map(json!({ "capacity": from })),
            ))
        };
        assert_eq!(repair(&classic, &bigger), Repair::Update);
        assert_eq!(repair(&classic, &serverless), Repair::Replace);
        assert_eq!(repair(&serverless, &classic), Repair::Replace);
    }

    #[test]
    fn a_sensitive_difference_shows_no_value() {
        let d = Divergence::hidden("valueFrom", Mutability::Mutable);
        assert_eq!(
            serde_json::to_value(&d).unwrap(),
            json!({"field": "valueFrom", "repair": "mutable", "sensitive": true})
        );
    }

    #[test]
    fn mutable_fields_update() {
        let target = map(json!({"tags": {"team": "web"}}));
        let reported = map(json!({"tags": {"team": "ops"}}));
        let d = divergence(SecurityGroup::FIELDS, &target, &reported);
        assert_eq!(repair_of(&d), Repair::Update);
    }
}
