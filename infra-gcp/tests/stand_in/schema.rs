//! Google's discovery documents as the schema of the traffic: the parts the tests need
//! (`tests/discovery/`, extracted from `google-api-python-client`; see its README),
//! held against every request the backend sends to the stand-ins and the Pub/Sub
//! emulator and every answer they give, as a recording relay saw them.
//!
//! Each exchange is mapped to its discovery method by HTTP method and path template,
//! then checked: its query, its body, its answer (or Google's error envelope). A pair
//! (kind, act) is counted for the method's kind and act once every exchange of the run
//! agreed with the documents.

use std::collections::{BTreeMap, BTreeSet};

use infra_testkit::evidence::{Evidence, Record};
use infra_testkit::gcp::discovery::{Catalogue, Discovery};
use infra_testkit::relay::Exchange;

/// The extracts, by API.
const EXTRACTS: [(&str, &str); 8] = [
    ("storage.v1", include_str!("../discovery/storage.v1.json")),
    (
        "secretmanager.v1",
        include_str!("../discovery/secretmanager.v1.json"),
    ),
    (
        "artifactregistry.v1",
        include_str!("../discovery/artifactregistry.v1.json"),
    ),
    ("run.v2", include_str!("../discovery/run.v2.json")),
    ("sqladmin.v1", include_str!("../discovery/sqladmin.v1.json")),
    ("iam.v1", include_str!("../discovery/iam.v1.json")),
    (
        "cloudresourcemanager.v3",
        include_str!("../discovery/cloudresourcemanager.v3.json"),
    ),
    ("pubsub.v1", include_str!("../discovery/pubsub.v1.json")),
];

/// The committed extracts, by API, as JSON.
pub(crate) fn extracts() -> Vec<(&'static str, serde_json::Value)> {
    EXTRACTS
        .iter()
        .map(|(api, text)| {
            let doc = serde_json::from_str(text).unwrap_or_else(|e| panic!("{api}: {e}"));
            (*api, doc)
        })
        .collect()
}

/// The catalogue of the extracts, with the types long-running operations carry.
pub(crate) fn catalogue() -> Catalogue {
    let apis = extracts()
        .into_iter()
        .map(|(api, doc)| Discovery::from_json(&doc).unwrap_or_else(|e| panic!("{api}: {e}")))
        .collect();
    Catalogue::new(apis)
        .any_type(
            "type.googleapis.com/google.cloud.run.v2.Service",
            "run.v2",
            "GoogleCloudRunV2Service",
        )
        .any_type(
            "type.googleapis.com/google.devtools.artifactregistry.v1.Repository",
            "artifactregistry.v1",
            "Repository",
        )
        .any_type(
            "type.googleapis.com/google.devtools.artifactregistry.v1.OperationMetadata",
            "artifactregistry.v1",
            "OperationMetadata",
        )
        .any_type(
            "type.googleapis.com/google.protobuf.Empty",
            "artifactregistry.v1",
            "Empty",
        )
}

/// The (kind, act) a discovery method serves, for the evidence.
pub(crate) fn pair_of(method: &str) -> (&'static str, String) {
    let kind = match method.split('.').take(3).collect::<Vec<_>>().as_slice() {
        ["storage", ..] => "objectStore",
        ["secretmanager", ..] => "secrets",
        ["artifactregistry", ..] => "imageRegistry",
        ["run", ..] => "compute",
        ["sql", ..] => "postgres",
        ["iam", ..] => "iam",
        [
            "cloudresourcemanager",
            "projects",
            "getIamPolicy" | "setIamPolicy",
        ] => "iam",
        ["cloudresourcemanager", ..] => "project",
        ["pubsub", ..] => "queues",
        _ => "unknown",
    };
    let parts: Vec<&str> = method.split('.').collect();
    let verb = parts.last().copied().unwrap_or("");
    let of = parts
        .get(parts.len().saturating_sub(2))
        .copied()
        .unwrap_or("");
    let act = match (of, verb) {
        ("operations", "get") => "await".to_owned(),
        ("versions", "get") => "read-version".to_owned(),
        ("versions", "access") => "access".to_owned(),
        ("versions", "list") => "list-versions".to_owned(),
        ("users", v) => format!("{}-user", act_of(v)),
        ("projects", "getIamPolicy") => "read-project-policy".to_owned(),
        ("projects", "setIamPolicy") => "write-project-policy".to_owned(),
        (_, v) => act_of(v).to_owned(),
    };
    (kind, act)
}

fn act_of(verb: &str) -> &str {
    match verb {
        "insert" | "create" => "create",
        "get" => "read",
        "patch" | "update" => "update",
        "addVersion" => "add-version",
        "getIamPolicy" => "read-policy",
        "setIamPolicy" => "write-policy",
        other => other,
    }
}

/// Whether `x` is the Pub/Sub emulator refusing an IAM policy method of a topic or a
/// subscription: the emulator answers them 501 `UNIMPLEMENTED` with no error envelope
/// of Google's shape (the backend then has no grant to make; the stand-in implements
/// them, and its answers are checked). Real Pub/Sub implements every one.
fn emulator_unimplemented(x: &Exchange) -> bool {
    x.status == Some(501)
        && x.path.starts_with("/v1/projects/")
        && (x.path.contains("/topics/") || x.path.contains("/subscriptions/"))
        && [":getIamPolicy", ":setIamPolicy", ":testIamPermissions"]
            .iter()
            .any(|m| x.path.ends_with(m))
}

/// What the exchanges of one run came to.
#[derive(Debug, Default)]
pub(crate) struct Held {
    /// Exchanges checked, and the pairs they served (an error answer counts as the
    /// act `error` of its kind).
    pub(crate) exchanges: usize,
    /// Exchanges left unchecked: the Pub/Sub emulator's answers to the IAM policy
    /// methods it does not implement (see [`emulator_unimplemented`]).
    pub(crate) unimplemented: usize,
    pub(crate) pairs: BTreeSet<(&'static str, String)>,
    /// What disagreed, by method: `METHOD PATH → problem`.
    pub(crate) problems: BTreeMap<String, Vec<String>>,
}

impl Held {
    /// Holds `exchanges` against `catalogue`.
    pub(crate) fn check(catalogue: &Catalogue, exchanges: &[Exchange]) -> Held {
        let mut held = Held::default();
        for x in exchanges {
            held.exchanges += 1;
            if emulator_unimplemented(x) {
                held.unimplemented += 1;
                continue;
            }
            let Some(status) = x.status else {
                held.problems
                    .entry(format!("{} {}", x.method, x.path))
                    .or_default()
                    .push("no answer".to_owned());
                continue;
            };
            let checked = catalogue.check(
                &x.method,
                &x.path,
                &x.query,
                x.request.json(),
                status,
                x.response.json(),
            );
            if x.request.is_other() || x.response.is_other() {
                held.problems
                    .entry(format!("{} {}", x.method, x.path))
                    .or_default()
                    .push("a body that is not JSON".to_owned());
            }
            let Some(method) = checked.method else {
                held.problems
                    .entry(format!("{} {}", x.method, x.path))
                    .or_default()
                    .extend(checked.problems.iter().map(ToString::to_string));
                continue;
            };
            if !checked.problems.is_empty() {
                held.problems
                    .entry(format!("{method} ({} {} → {status})", x.method, x.path))
                    .or_default()
                    .extend(checked.problems.iter().map(ToString::to_string));
                continue;
            }
            let (kind, act) = pair_of(&method);
            if status >= 400 {
                held.pairs.insert((kind, "error".to_owned()));
            } else {
                held.pairs.insert((kind, act));
            }
        }
        held
    }

    /// Panics with every disagreement, if any.
    pub(crate) fn assert_agreed(&self) {
        if self.problems.is_empty() {
            return;
        }
        let mut text = String::new();
        for (at, problems) in &self.problems {
            text.push_str(&format!("\n{at}:"));
            let mut seen = BTreeSet::new();
            for p in problems {
                if seen.insert(p) {
                    text.push_str(&format!("\n    {p}"));
                }
            }
        }
        panic!(
            "{} of {} exchanges disagree with Google's discovery documents:{text}",
            self.problems.len(),
            self.exchanges
        );
    }

    /// Asserts that every kind of `kinds` was checked in each of `acts`.
    pub(crate) fn assert_covers(&self, kinds: &[&str], acts: &[&str]) {
        let mut missing = Vec::new();
        for kind in kinds {
            for act in acts {
                if !self.pairs.contains(&(*kind, (*act).to_owned())) {
                    missing.push(format!("{kind} {act}"));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "no exchange checked against the schema for: {}",
            missing.join(", ")
        );
    }

    /// The pairs as evidence of `suite`, published.
    pub(crate) fn publish(&self, suite: &str) {
        let mut evidence = Evidence::new("gcp", Record::DiscoverySchema, suite);
        for (kind, act) in &self.pairs {
            evidence.checked(kind, act);
        }
        evidence.publish();
    }
}

#[test]
fn every_method_maps_to_a_kind_and_an_act() {
    let catalogue = catalogue();
    for api in catalogue.apis() {
        for method in api.method_ids() {
            let (kind, act) = pair_of(method);
            assert_ne!(kind, "unknown", "{method}");
            assert!(!act.is_empty(), "{method}");
        }
    }
    assert_eq!(
        pair_of("sql.users.update"),
        ("postgres", "update-user".to_owned())
    );
    assert_eq!(
        pair_of("cloudresourcemanager.projects.setIamPolicy"),
        ("iam", "write-project-policy".to_owned())
    );
    // A queue is a topic and, when asked, a subscription: either's create is the
    // queue's.
    assert_eq!(
        pair_of("pubsub.projects.subscriptions.create"),
        ("queues", "create".to_owned())
    );
}
