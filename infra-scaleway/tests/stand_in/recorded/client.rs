//! What the backend sends, held against what Scaleway's Terraform provider sent for the
//! same acts: the same method, the same path shape (ids and names as placeholders), and
//! the same body fields and query parameters with the same JSON types. A field one side
//! sends and the other never does is a finding: mended in the backend, or named in
//! [`CLIENT_DIFFERENCES`] with the reason it is right.
//!
//! The backend's traffic is what the conformance suite makes it send to the stand-in
//! (every kind the stand-in serves: create, read, list, update, delete, ownership, mark,
//! under faults), as the stand-in recorded it.

use std::collections::{BTreeMap, BTreeSet};

use infra_core::sdk::Backend;
use infra_testkit::conformance::samples;
use infra_testkit::evidence::{Evidence, Record};
use infra_testkit::scaleway::RecordedRequest;

use super::{act_of, kind_of, recorded, shape, types_agree, union_and_common};
use crate::support::{passes_conformance, stand_in};
use crate::{ON_MOTO, backend};

/// Where the backend's requests differ from the recorded ones on purpose: `(product,
/// act, field, why)`, the act `*` for every act of the product. A body field is named as
/// flattened (`rules[].condition`), a query parameter with a leading `?`. None of these
/// is a field of another name or type: the backend and Terraform's provider choose
/// different optional settings of the same calls.
pub(crate) const CLIENT_DIFFERENCES: &[(&str, &str, &str, &str)] = &[
    ("container", "*", "?name", NAME_FILTER),
    ("container", "*", "?order_by", ORDER),
    ("container", "*", "?page", PAGED),
    ("container", "*", "?page_size", PAGED),
    ("container", "*", "?project_id", PROJECT_FILTER),
    (
        "container",
        "namespace-create",
        "activate_vpc_integration",
        KNOB,
    ),
    ("container", "*", "args", KNOB),
    ("container", "*", "command", KNOB),
    ("container", "container-update", "cpu_limit", NOT_CHANGED),
    ("container", "namespace-update", "description", NOT_CHANGED),
    ("container", "*", "http_option", KNOB),
    ("container", "*", "local_storage_limit", KNOB),
    ("container", "container-update", "max_concurrency", KNOB),
    ("container", "container-update", "max_scale", NOT_CHANGED),
    ("container", "*", "min_scale", DECLARED),
    ("container", "container-update", "port", NOT_CHANGED),
    ("container", "*", "privacy", KNOB),
    ("container", "*", "protocol", KNOB),
    ("container", "container-update", "redeploy", REDEPLOY),
    ("container", "container-create", "registry_image", DECLARED),
    ("container", "*", "sandbox", KNOB),
    (
        "container",
        "*",
        "secret_environment_variables",
        NO_SECRET_VARS,
    ),
    (
        "container",
        "*",
        "secret_environment_variables[].key",
        NO_SECRET_VARS,
    ),
    (
        "container",
        "*",
        "secret_environment_variables[].value",
        NO_SECRET_VARS,
    ),
    ("container", "*", "tags", NOT_CHANGED),
    ("function", "*", "?name", NAME_FILTER),
    ("function", "*", "?order_by", ORDER),
    ("function", "*", "?page", PAGED),
    ("function", "*", "?page_size", PAGED),
    ("function", "*", "?project_id", PROJECT_FILTER),
    ("function", "*", "description", DECLARED),
    (
        "function",
        "function-update",
        "environment_variables",
        NOT_CHANGED,
    ),
    ("function", "*", "http_option", KNOB),
    ("function", "function-update", "memory_limit", DECLARED),
    ("function", "*", "privacy", KNOB),
    ("function", "*", "private_network_id", KNOB),
    ("function", "function-update", "redeploy", REDEPLOY),
    ("function", "function-update", "runtime", NOT_CHANGED),
    ("function", "*", "sandbox", KNOB),
    (
        "function",
        "*",
        "secret_environment_variables",
        NO_SECRET_VARS,
    ),
    (
        "function",
        "*",
        "secret_environment_variables[].key",
        NO_SECRET_VARS,
    ),
    (
        "function",
        "*",
        "secret_environment_variables[].value",
        NO_SECRET_VARS,
    ),
    ("function", "namespace-update", "tags", NOT_CHANGED),
    ("function", "function-create", "timeout", DECLARED),
    ("iam", "policy-list", "?application_ids", APP_POLICIES),
    ("iam", "*", "?order_by", ORDER),
    ("iam", "rule-list", "?page", PAGED),
    ("iam", "*", "?page_size", PAGED),
    ("iam", "policy-list", "?policy_name", NAME_FILTER),
    ("iam", "*", "?tag", TAG_FILTER),
    ("iam", "application-update", "description", NOT_CHANGED),
    ("iam", "application-update", "name", NOT_CHANGED),
    ("iam", "policy-create", "no_principal", NO_PRINCIPAL),
    ("iam", "policy-create", "rules[].condition", KNOB),
    (
        "iam",
        "policy-create",
        "rules[].organization_id",
        PROJECT_RULES,
    ),
    ("rdb", "engine-list", "?name", ENGINE_FILTER),
    ("rdb", "*", "?order_by", ORDER),
    ("rdb", "engine-list", "?page", PAGED),
    ("rdb", "*", "?page_size", PAGED),
    ("rdb", "instance-update", "backup_same_region", KNOB),
    (
        "rdb",
        "instance-update",
        "backup_schedule_retention",
        DECLARED,
    ),
    ("rdb", "instance-create", "encryption", KNOB),
    ("rdb", "instance-create", "encryption.enabled", KNOB),
    ("rdb", "instance-create", "init_endpoints", KNOB),
    ("rdb", "instance-create", "init_settings", KNOB),
    ("rdb", "instance-update", "tags", NOT_CHANGED),
    ("registry", "namespace-list", "?name", NAME_FILTER),
    ("registry", "namespace-list", "?order_by", ORDER),
    ("registry", "namespace-list", "?page_size", PAGED),
    ("registry", "namespace-list", "?project_id", PROJECT_FILTER),
    ("registry", "namespace-update", "is_public", NOT_CHANGED),
    ("secret", "secret-list", "?name", NAME_FILTER),
    ("secret", "secret-list", "?order_by", ORDER),
    ("secret", "secret-list", "?page_size", PAGED),
    (
        "secret",
        "secret-list",
        "?scheduled_for_deletion",
        SCHEDULED,
    ),
    ("secret", "secret-list", "?type", KNOB),
    ("secret", "version-create", "description", KNOB),
    (
        "secret",
        "version-create",
        "disable_previous",
        DISABLE_PREVIOUS,
    ),
    ("secret", "secret-update", "ephemeral_policy", KNOB),
    ("secret", "secret-update", "ephemeral_policy.action", KNOB),
    (
        "secret",
        "secret-update",
        "ephemeral_policy.expires_once_accessed",
        KNOB,
    ),
    (
        "secret",
        "secret-update",
        "ephemeral_policy.time_to_live",
        KNOB,
    ),
    ("secret", "secret-update", "name", NOT_CHANGED),
];

/// A setting Scaleway's Terraform provider always sends (often its zero value,
/// `unknown_…`), which no kind of this crate declares: Scaleway's default stands.
const KNOB: &str = "a setting Terraform always sends and no kind declares: the backend leaves Scaleway's default, which it reads back";
/// The conformance samples declare no secret variables; `stand_in/functions.rs` and
/// `stand_in/containers.rs` send them, with the recorded `{key, value}` shape.
const NO_SECRET_VARS: &str = "the conformance samples declare no secret variables (the targeted tests send them as `{key, value}`, as recorded)";
/// Listings.
const PAGED: &str = "the backend reads every page itself, 100 at a time (`page`, `page_size`)";
const ORDER: &str = "the backend reads every page and does not depend on the order";
const PROJECT_FILTER: &str =
    "the backend lists only its project (`project_id`); Terraform filtered by name";
const NAME_FILTER: &str = "a name filter matches substrings on Scaleway: the backend matches names itself, or the suite's flow made no lookup by name";
const TAG_FILTER: &str =
    "the backend finds its resources by its marker, read from each resource, not by a tag filter";
/// Fields of this crate's kinds that Terraform's recorded runs did not set.
const DECLARED: &str = "a field a kind declares and the backend sends; Terraform's recorded runs did not set it, and Scaleway's SDK (types.py) documents it for this call";
/// Fields Terraform changes that the kinds keep as they were made.
const NOT_CHANGED: &str =
    "the kinds never change it after creation (or the suite's update changes something else)";
const REDEPLOY: &str = "the backend says whether an update redeploys (`true` for a change, `false` for `mark`); Scaleway's SDK documents `redeploy` on this call";
const APP_POLICIES: &str = "the backend asks for the policies of its application (`application_ids`, documented by Scaleway's SDK) instead of listing every policy";
const NO_PRINCIPAL: &str = "the backend's policies always name their application as principal";
const PROJECT_RULES: &str =
    "the backend's rules are scoped to its project (`project_ids`), never to the organization";
const ENGINE_FILTER: &str =
    "the backend asks only for PostgreSQL's engines (`name`, documented by Scaleway's SDK)";
const SCHEDULED: &str = "the backend lists every secret and reads `deletion_requested_at` itself";
const DISABLE_PREVIOUS: &str =
    "a new value disables the previous version (`disable_previous`, documented by Scaleway's SDK)";

/// One difference found between the backend's requests and the recorded ones.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Finding {
    product: &'static str,
    act: &'static str,
    field: String,
    what: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_sends_what_scaleway_s_own_tools_were_recorded_sending() {
    let server = stand_in().await;
    let backend = backend(&server, None);
    let kinds = backend.capabilities().kinds;
    let mut samples = samples::builtin_for("scaleway");
    samples.retain(|s| kinds.contains(s.kind) && !ON_MOTO.contains(&s.kind));
    passes_conformance(&server, backend, samples).await;
    let sent = server.requests();
    server.shutdown().await;

    let mut ours: BTreeMap<(&str, &str), Vec<RecordedRequest>> = BTreeMap::new();
    for request in sent {
        if let Some(act) = act_of(&request.method, &request.path) {
            ours.entry(act).or_default().push(request);
        }
    }
    let mut evidence = Evidence::new("scaleway", Record::RecordedTraffic, "client-requests");
    let mut findings = BTreeSet::new();
    let mut unrecorded = Vec::new();
    for (&(product, act), requests) in &ours {
        let recorded = recorded(product, act);
        if recorded.is_empty() {
            unrecorded.push(format!("{product} {act}"));
            continue;
        }
        compare(product, act, requests, &recorded, &mut findings);
        evidence.checked(kind_of(product, act), act);
    }
    eprintln!("acts the backend made that no recording covers: {unrecorded:?}");
    let explains = |(p, a, f, _): &&(&str, &str, &str, &str), finding: &Finding| {
        *p == finding.product && (*a == "*" || *a == finding.act) && *f == finding.field
    };
    let unexplained: Vec<&Finding> = findings
        .iter()
        .filter(|f| !CLIENT_DIFFERENCES.iter().any(|d| explains(&d, f)))
        .collect();
    assert!(
        unexplained.is_empty(),
        "the backend's requests differ from the recorded ones:\n{}",
        unexplained
            .iter()
            .map(|f| format!(
                "  (\"{}\", \"{}\", \"{}\", \"{}\"),",
                f.product, f.act, f.field, f.what
            ))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let stale: Vec<_> = CLIENT_DIFFERENCES
        .iter()
        .filter(|d| !findings.iter().any(|f| explains(d, f)))
        .collect();
    assert!(
        stale.is_empty(),
        "allowed differences that no longer occur (remove them): {stale:?}"
    );
    evidence.publish();
}

/// Compares the backend's `requests` of one act with the `recorded` ones.
fn compare(
    product: &'static str,
    act: &'static str,
    requests: &[RecordedRequest],
    recorded: &[super::Recorded],
    findings: &mut BTreeSet<Finding>,
) {
    let mut note = |field: String, what: String| {
        findings.insert(Finding {
            product,
            act,
            field,
            what,
        });
    };
    let shapes: BTreeSet<String> = recorded.iter().map(|r| shape(&r.path)).collect();
    for request in requests {
        let ours = shape(&request.path);
        if !shapes.contains(&ours) {
            note(format!("path {ours}"), format!("recorded: {shapes:?}"));
        }
        for r in recorded {
            assert_eq!(r.method, request.method, "{}: the method", r.source);
        }
    }
    let (theirs, _) = union_and_common(recorded.iter().map(|r| &r.request));
    let (mine, _) = union_and_common(requests.iter().map(|r| &r.body));
    for (field, kind) in &mine {
        match theirs.get(field) {
            None => note(
                field.clone(),
                format!("sent as {kind}, never in the recording"),
            ),
            Some(t) if !types_agree(t, kind) => {
                note(field.clone(), format!("sent as {kind}, recorded as {t}"));
            }
            Some(_) => {}
        }
    }
    for (field, kind) in &theirs {
        if !mine.contains_key(field) {
            note(field.clone(), format!("recorded ({kind}), never sent"));
        }
    }
    let their_query: BTreeSet<&String> = recorded.iter().flat_map(|r| r.query.keys()).collect();
    let my_query: BTreeSet<&String> = requests.iter().flat_map(|r| r.query.keys()).collect();
    for name in my_query.difference(&their_query) {
        note(
            format!("?{name}"),
            "sent, never in the recording".to_owned(),
        );
    }
    for name in their_query.difference(&my_query) {
        note(format!("?{name}"), "recorded, never sent".to_owned());
    }
}
