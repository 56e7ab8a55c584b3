//! IAM's wire models held against Scaleway's recorded answers.

use infra_core::sdk::ErrorKind;
use serde_json::Value;

use super::{Application, NO_APPLICATION, NO_POLICY, Policy, Rule, project_grants, reported_tags};
use crate::recorded::{assert_classified, evidence, exchanges};

const PRODUCT: &str = "iam";

fn application_reads_back(app: &Application, raw: &Value, source: &str) {
    assert_eq!(app.id, raw["id"].as_str().unwrap_or_default(), "{source}");
    assert_eq!(app.name, raw["name"], "{source}");
    assert_eq!(app.description, raw["description"], "{source}");
    assert_eq!(
        app.tags.len(),
        raw["tags"].as_array().map_or(0, Vec::len),
        "{source}"
    );
    // Tags written by another tool (`terraform`) are reported as keys without values.
    let reported = reported_tags(&app.tags);
    assert!(reported.len() <= app.tags.len(), "{source}");
}

fn policy_reads_back(policy: &Policy, raw: &Value, source: &str) {
    assert_eq!(
        policy.id,
        raw["id"].as_str().unwrap_or_default(),
        "{source}"
    );
    assert_eq!(policy.name, raw["name"], "{source}");
    assert_eq!(
        policy.application_id.as_deref(),
        raw["application_id"].as_str(),
        "{source}"
    );
}

#[test]
fn recorded_iam_answers_decode_and_read_as_the_kind_expects() {
    let mut evidence = evidence("iam");
    for (act, kind_act) in [
        ("application-create", "create"),
        ("application-get", "read"),
        ("application-update", "update"),
    ] {
        for ex in exchanges(PRODUCT, act) {
            if ex.ok() {
                application_reads_back(&ex.decode(), &ex.response, &ex.source);
            } else {
                assert_classified(&ex, NO_APPLICATION, ErrorKind::NotFound);
                // The same answer is not absence for a call about another resource.
                assert_classified(&ex, NO_POLICY, ErrorKind::Invalid);
            }
        }
        evidence.checked("iam", kind_act);
    }
    for ex in exchanges(PRODUCT, "application-list") {
        for (app, raw) in ex.items::<Application>("applications") {
            application_reads_back(&app, &raw, &ex.source);
        }
    }
    evidence.checked("iam", "list");
    for act in ["application-delete", "policy-delete"] {
        for ex in exchanges(PRODUCT, act) {
            assert_eq!(
                (ex.status, &ex.response),
                (204, &Value::Null),
                "{}",
                ex.source
            );
        }
    }
    evidence.checked("iam", "delete");
    for act in ["policy-create", "policy-get"] {
        for ex in exchanges(PRODUCT, act) {
            if ex.ok() {
                policy_reads_back(&ex.decode(), &ex.response, &ex.source);
            } else {
                assert_classified(&ex, NO_POLICY, ErrorKind::NotFound);
            }
        }
    }
    evidence.checked("iam", "create-policy");
    for ex in exchanges(PRODUCT, "policy-list") {
        for (policy, raw) in ex.items::<Policy>("policies") {
            policy_reads_back(&policy, &raw, &ex.source);
        }
    }
    evidence.checked("iam", "list-policies");
    for ex in exchanges(PRODUCT, "rule-list") {
        let rules = ex.items::<Rule>("rules");
        for (rule, raw) in &rules {
            assert_eq!(
                rule.permission_set_names.as_ref().map(Vec::len),
                raw["permission_set_names"].as_array().map(Vec::len),
                "{}",
                ex.source
            );
        }
        // What the rules grant on a project they scope is read back.
        let rules: Vec<Rule> = rules.into_iter().map(|(r, _)| r).collect();
        for rule in &rules {
            for project in rule.project_ids.iter().flatten() {
                let granted = project_grants(&rules, project);
                if rule.condition.as_deref().unwrap_or("").is_empty() {
                    for set in rule.permission_set_names.iter().flatten() {
                        assert!(granted.contains(set), "{}: {set}", ex.source);
                    }
                }
            }
        }
    }
    evidence.checked("iam", "list-rules");
    evidence.publish();
}
