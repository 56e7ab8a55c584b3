//! Ownership and the safety gates, for the custom provider: a record that is not ours
//! is never touched, and a denial is never read as absence.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use custom_provider::{Access, NewRecord, RecordType, ZONE, example_fleet};
use infra_core::{
    engine::{Change, Options, Plan, RecordStore, Step},
    sdk::{ErrorKind, MARKER_KEY},
};

#[tokio::test]
async fn a_foreign_record_with_a_declared_name_is_reported_and_left_alone() {
    let w = support::world(11);
    // Made by someone else, straight through the service: no marker.
    let foreign = w
        .dns
        .create_record(
            "global",
            NewRecord::new("www", ZONE, RecordType::A, "198.51.100.7"),
        )
        .unwrap();
    // Made by another fleet: its marker, not ours.
    let other = w
        .dns
        .create_record(
            "eu",
            NewRecord {
                tags: BTreeMap::from([(MARKER_KEY.to_owned(), "blog".to_owned())]),
                ..NewRecord::new("assets", ZONE, RecordType::Cname, "blog.example.net")
            },
        )
        .unwrap();
    w.dns.clear_calls();

    let fleet = example_fleet().unwrap();
    let outcome = w
        .engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    outcome.result.check_disjoint().unwrap();
    let mut failed: Vec<_> = outcome.result.failed.iter().collect();
    failed.sort_by(|a, b| a.resource.name.cmp(&b.resource.name));
    assert_eq!(failed.len(), 2, "{:#?}", outcome.result);
    assert!(failed.iter().all(|f| f.step == Step::Claim));
    assert!(
        failed[1]
            .error
            .message
            .contains("does not carry the `managed-by-infra` marker")
    );
    assert_eq!(failed[0].resource.name, "assets");
    assert!(
        failed[0].error.message.contains("blog"),
        "{}",
        failed[0].error
    );
    assert!(w.dns.writes().is_empty(), "{:#?}", w.dns.writes());
    let names: Vec<String> = w
        .store
        .load_ledger(fleet.name())
        .unwrap()
        .rows
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["dns-demo-assets"], "never adopted by name");

    // A teardown leaves both standing, as they were.
    w.engine
        .apply(&Plan::absent(&fleet), &Options::default())
        .await
        .unwrap();
    assert_eq!(w.dns.get_record("global", &foreign.id).unwrap(), foreign);
    assert_eq!(w.dns.get_record("eu", &other.id).unwrap(), other);
}

#[tokio::test]
async fn a_denied_service_is_never_read_as_absent() {
    let w = support::world(12);
    let fleet = example_fleet().unwrap();
    w.engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();

    for access in [Access::Denied, Access::ListOnly] {
        w.dns.set_access(access);
        w.clear();
        for plan in [fleet.plan(), Plan::absent(&fleet)] {
            let outcome = w.engine.apply(&plan, &Options::default()).await.unwrap();
            outcome.result.check_disjoint().unwrap();
            let failed: Vec<_> = outcome
                .result
                .failed
                .iter()
                .filter(|f| f.resource.provider == "dns")
                .collect();
            assert_eq!(failed.len(), 2, "{access:?}: {:#?}", outcome.result);
            for f in failed {
                assert_eq!(
                    (f.step, f.error.kind),
                    (Step::Observe, ErrorKind::Denied),
                    "{access:?}"
                );
                assert_eq!(f.error.code.as_deref(), Some("AccessDenied"));
            }
            assert!(
                w.writes().iter().all(|c| c.provider != "dns"),
                "{access:?}: a denial led to a write: {:#?}",
                w.writes()
            );
        }
        let dns_rows: BTreeSet<String> = w
            .store
            .load_ledger(fleet.name())
            .unwrap()
            .rows
            .into_iter()
            .filter(|r| r.provider == "dns")
            .map(|r| r.name)
            .collect();
        assert_eq!(dns_rows, ["assets".to_owned(), "www".to_owned()].into());
        // Put back anything the teardown could delete, for the next round.
        w.dns.set_access(Access::Full);
        w.engine
            .apply(&fleet.plan(), &Options::default())
            .await
            .unwrap();
    }

    assert_eq!(
        w.dns.records().len(),
        2,
        "nothing was created twice or deleted"
    );
    let outcome = w
        .engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert!(
        outcome
            .result
            .applied
            .iter()
            .all(|a| a.change == Change::Unchanged)
    );
}

#[tokio::test]
async fn a_failing_read_is_a_failure_not_an_absence() {
    let w = support::world(13);
    let fleet = example_fleet().unwrap();
    w.engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    // More failures than the engine's retries.
    w.dns.fail_reads(100);
    w.clear();
    let outcome = w
        .engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert_eq!(outcome.result.failed.len(), 2, "{:#?}", outcome.result);
    assert!(
        outcome
            .result
            .failed
            .iter()
            .all(|f| f.step == Step::Observe && f.error.kind == ErrorKind::Unavailable)
    );
    assert!(w.dns.writes().is_empty());
}
