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
/// act, field, why)`. A body field is named as flattened (`rules[].condition`), a query
/// parameter with a leading `?`.
pub(crate) const CLIENT_DIFFERENCES: &[(&str, &str, &str, &str)] = &[];

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
    let allowed: BTreeSet<(&str, &str, &str)> = CLIENT_DIFFERENCES
        .iter()
        .map(|(p, a, f, _)| (*p, *a, *f))
        .collect();
    let unexplained: Vec<&Finding> = findings
        .iter()
        .filter(|f| !allowed.contains(&(f.product, f.act, f.field.as_str())))
        .collect();
    assert!(
        unexplained.is_empty(),
        "the backend's requests differ from the recorded ones:\n{}",
        unexplained
            .iter()
            .map(|f| format!("  (\"{}\", \"{}\", \"{}\", \"{}\"),", f.product, f.act, f.field, f.what))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let found: BTreeSet<(&str, &str, &str)> = findings
        .iter()
        .map(|f| (f.product, f.act, f.field.as_str()))
        .collect();
    let stale: Vec<_> = allowed.difference(&found).collect();
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
            note(
                format!("path {ours}"),
                format!("recorded: {shapes:?}"),
            );
        }
        assert!(
            recorded.iter().all(|r| r.method == request.method),
            "{product} {act}: the method"
        );
    }
    let (theirs, _) = union_and_common(recorded.iter().map(|r| &r.request));
    let (mine, _) = union_and_common(requests.iter().map(|r| &r.body));
    for (field, kind) in &mine {
        match theirs.get(field) {
            None => note(field.clone(), format!("sent as {kind}, never in the recording")),
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
        note(format!("?{name}"), "sent, never in the recording".to_owned());
    }
    for name in their_query.difference(&my_query) {
        note(format!("?{name}"), "recorded, never sent".to_owned());
    }
}
