//! The example fleet through the engine, against the simulated cloud (the bucket) and
//! the DNS service (the records): create, converge, change, drift, tear down.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use custom_provider::{
    DEFAULT_TTL, DnsRecord, DnsRegion, FLEET_NAME, RecordPatch, RecordType, ZONE, bucket_host,
    example_fleet,
};
use infra_core::sdk::layer::Op;
use infra_core::{
    engine::{Change, Options, Plan},
    prelude::{Fleet, Problem},
    sdk::MARKER_KEY,
};

fn changes_of(outcome: &infra_core::engine::Outcome) -> BTreeMap<String, Change> {
    outcome
        .result
        .applied
        .iter()
        .map(|a| (a.resource.name.clone(), a.change))
        .collect()
}

#[tokio::test]
async fn the_fleet_applies_across_both_providers_and_then_plans_nothing() {
    let w = support::world(1);
    let fleet = example_fleet().unwrap();
    let outcome = w
        .engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert!(outcome.result.is_success(), "{:#?}", outcome.result);
    outcome.result.check_disjoint().unwrap();
    assert_eq!(
        changes_of(&outcome),
        BTreeMap::from([
            ("assets".to_owned(), Change::Created),
            ("dns-demo-assets".to_owned(), Change::Created),
            ("www".to_owned(), Change::Created),
        ])
    );

    // The bucket was created before the record that reads it.
    let creates: Vec<String> = w.writes().into_iter().filter_map(|c| c.target).collect();
    let at = |name: &str| creates.iter().position(|n| n == name).unwrap();
    assert!(at("dns-demo-assets") < at("assets"), "{creates:?}");

    // A second plan, and a second apply, find nothing to do and write nothing.
    let report = w
        .engine
        .plan(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert!(!report.has_changes(), "{}", report.render());
    w.clear();
    let again = w
        .engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert!(changes_of(&again).values().all(|c| *c == Change::Unchanged));
    assert!(w.writes().is_empty(), "{:#?}", w.writes());
    assert!(w.dns.writes().is_empty());
}

#[tokio::test]
async fn the_record_answers_the_buckets_observed_host_and_carries_the_marker() {
    let w = support::world(2);
    let fleet = example_fleet().unwrap();
    w.engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();

    let observed = w.bucket_observed("dns-demo-assets");
    let host = bucket_host(&observed);
    assert!(observed.endpoint.known().is_some_and(|e| e.contains(&host)));
    let assets = w.dns.find("assets").remove(0);
    assert_eq!(assets.record_type, RecordType::Cname);
    // The service keeps the target absolute; the record says the bucket's host.
    assert_eq!(assets.value, format!("{host}."));
    assert_eq!(assets.fqdn, format!("assets.{ZONE}"));
    assert_eq!(assets.ttl, 600);
    assert_eq!(
        assets.tags,
        BTreeMap::from([
            (MARKER_KEY.to_owned(), FLEET_NAME.to_owned()),
            ("team".to_owned(), "web".to_owned()),
        ])
    );

    // Left unsaid, the TTL is the service's default: reported, and not drift.
    let www = w.dns.find("www").remove(0);
    assert_eq!((www.ttl, www.region.as_str()), (DEFAULT_TTL, "global"));
}

#[tokio::test]
async fn a_ttl_change_is_an_update_and_a_record_type_change_is_a_replace() {
    let w = support::world(3);
    let base = support::fleet(600, RecordType::A, "192.0.2.10");
    w.engine
        .apply(&base.plan(), &Options::default())
        .await
        .unwrap();
    let assets_id = w.dns.find("assets")[0].id.clone();
    let www_id = w.dns.find("www")[0].id.clone();

    // A mutable field: an update in place, same record.
    let longer = support::fleet(900, RecordType::A, "192.0.2.10");
    let report = w
        .engine
        .plan(&longer.plan(), &Options::default())
        .await
        .unwrap();
    let change = report
        .changes
        .iter()
        .find(|c| c.resource.name == "assets")
        .unwrap();
    let fields: Vec<&str> = change.fields.iter().map(|f| f.field).collect();
    assert_eq!((change.action, fields.as_slice()), ("update", &["ttl"][..]));
    assert_eq!(
        (&change.fields[0].before, &change.fields[0].after),
        (&serde_json::json!(600), &serde_json::json!(900)),
        "the plan shows the old and the new value"
    );
    let outcome = w
        .engine
        .apply(&longer.plan(), &Options::default())
        .await
        .unwrap();
    assert_eq!(changes_of(&outcome)["assets"], Change::Updated);
    let assets = w.dns.find("assets").remove(0);
    assert_eq!((assets.id.as_str(), assets.ttl), (assets_id.as_str(), 900));
    assert_eq!(
        assets.tags.get(MARKER_KEY).map(String::as_str),
        Some(FLEET_NAME)
    );

    // A forces-replace field: the record is deleted and created again.
    let v6 = support::fleet(900, RecordType::Aaaa, "2001:db8::10");
    let report = w
        .engine
        .plan(&v6.plan(), &Options::default())
        .await
        .unwrap();
    let change = report
        .changes
        .iter()
        .find(|c| c.resource.name == "www")
        .unwrap();
    assert_eq!(change.action, "replace");
    assert!(
        change.fields.iter().any(|f| f.field == "recordType"),
        "{:?}",
        change.fields
    );
    let outcome = w
        .engine
        .apply(&v6.plan(), &Options::default())
        .await
        .unwrap();
    assert!(outcome.result.is_success(), "{:#?}", outcome.result);
    assert_eq!(changes_of(&outcome)["www"], Change::Replaced);
    let www = w.dns.find("www");
    assert_eq!(www.len(), 1, "the old record is gone");
    assert_ne!(www[0].id, www_id);
    assert_eq!(
        (www[0].record_type, www[0].value.as_str()),
        (RecordType::Aaaa, "2001:db8::10")
    );

    assert!(
        !w.engine
            .plan(&v6.plan(), &Options::default())
            .await
            .unwrap()
            .has_changes()
    );
}

#[tokio::test]
async fn a_value_changed_behind_the_fleets_back_is_put_back_in_place() {
    let w = support::world(4);
    let fleet = example_fleet().unwrap();
    w.engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    let assets = w.dns.find("assets").remove(0);
    w.dns
        .update_record(
            "eu",
            &assets.id,
            RecordPatch {
                value: Some("elsewhere.example.net".into()),
                ..RecordPatch::default()
            },
        )
        .unwrap();

    let report = w
        .engine
        .plan(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    let change = report
        .changes
        .iter()
        .find(|c| c.resource.name == "assets")
        .unwrap();
    let fields: Vec<&str> = change.fields.iter().map(|f| f.field).collect();
    assert_eq!(
        (change.action, fields.as_slice()),
        ("update", &["value"][..])
    );
    w.engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    let host = bucket_host(&w.bucket_observed("dns-demo-assets"));
    assert_eq!(w.dns.find("assets")[0].value, format!("{host}."));
}

#[tokio::test]
async fn a_teardown_deletes_the_record_before_the_bucket() {
    let w = support::world(5);
    let fleet = example_fleet().unwrap();
    w.engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    let assets_id = w.dns.find("assets")[0].id.clone();
    let bucket_handle = w.cloud.find("aws", "objectStore", "dns-demo-assets")[0]
        .handle
        .clone();
    w.clear();

    let outcome = w
        .engine
        .apply(&Plan::absent(&fleet), &Options::default())
        .await
        .unwrap();
    assert!(outcome.result.is_success(), "{:#?}", outcome.result);
    let deletes: Vec<String> = w
        .writes()
        .into_iter()
        .filter(|c| c.op == Op::Delete)
        .filter_map(|c| c.target)
        .collect();
    let at = |handle: &str| deletes.iter().position(|h| h == handle).unwrap();
    assert!(at(&assets_id) < at(&bucket_handle), "{deletes:?}");
    assert!(w.dns.records().is_empty());
    assert_eq!(w.cloud.count("aws", "objectStore"), 0);
}

#[tokio::test]
async fn a_lost_create_response_is_found_by_its_marker_and_not_made_again() {
    let w = support::world(6);
    let fleet = example_fleet().unwrap();
    w.dns.lose_next_response();
    let outcome = w
        .engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    // The record was made, with the marker, in the call whose answer was lost: the
    // engine looks before calling the create failed, finds it and claims it.
    assert!(outcome.result.is_success(), "{:#?}", outcome.result);
    let creates = w
        .dns
        .writes()
        .into_iter()
        .filter(|c| c.op == custom_provider::ServiceOp::Create)
        .count();
    assert_eq!(creates, 2, "each record created once");
    assert_eq!(w.dns.records().len(), 2);
    assert_eq!(w.dns.find("www").len(), 1);
    assert_eq!(w.dns.find("assets").len(), 1);
    let again = w
        .engine
        .plan(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert!(!again.has_changes(), "{}", again.render());
}

#[tokio::test]
async fn a_listing_that_lags_a_create_makes_no_twin() {
    let w = support::world(7);
    let fleet = example_fleet().unwrap();
    w.dns.set_list_lag(Duration::from_millis(500));
    w.engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    let outcome = w
        .engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .unwrap();
    assert!(outcome.result.is_success(), "{:#?}", outcome.result);
    assert_eq!(w.dns.find("www").len(), 1);
    assert_eq!(w.dns.find("assets").len(), 1);
}

#[test]
fn the_declaration_is_checked_before_any_call() {
    let mut f = Fleet::builder(FLEET_NAME);
    f.declare(
        DnsRegion::Eu,
        "Www",
        DnsRecord::new(RecordType::A, ZONE, "192.0.2.1"),
    );
    f.declare(
        DnsRegion::Eu,
        "api",
        DnsRecord::new(RecordType::A, ZONE, "192.0.2.300").with_ttl(10),
    );
    let report = f.build().unwrap_err();
    let problems = &report.problems;
    assert!(
        problems
            .iter()
            .any(|p| matches!(p, Problem::BadName { resource, .. } if resource.name == "Www")),
        "{report}"
    );
    let invalid: Vec<&String> = problems
        .iter()
        .filter_map(|p| match p {
            Problem::Invalid { detail, .. } => Some(detail),
            _ => None,
        })
        .collect();
    assert_eq!(invalid.len(), 2, "{report}");
}
