//! Nothing leaks out of the records: adoptions are recorded even when nothing else
//! changes, `discover` only ever adds, a resource adopted on its marker alone is deleted
//! only when the user names it, lost records are said out loud, and the brake counts
//! every row a run would remove — those that read as absent included.

mod support;

use infra_core::kinds::*;
use infra_core::{
    engine::{FileStore, LedgerRow, RecordStore},
    prelude::{AwsRegion, Backends, Expr, Fleet, Partial},
    sdk::RawTags,
};
use infra_testkit::sim::{CallFilter, Op, SimCloud};
use support::altered::{Alteration, Altered};
use support::console::{Session, answering, json, session};

fn buckets(names: &[&str]) -> Result<Fleet, infra_core::prelude::CheckReport> {
    let mut f = Fleet::builder("shop");
    for name in names {
        f.declare(AwsRegion::EuWest3, *name, ObjectStore::new());
    }
    f.build()
}

fn ours() -> RawTags {
    [("managed-by-infra".to_owned(), "shop".to_owned())].into()
}

fn ledger(s: &Session) -> infra_core::engine::Ledger {
    FileStore::new(s.state.path()).load_ledger("shop").unwrap()
}

fn row(kind: &str, name: &str) -> LedgerRow {
    LedgerRow {
        provider: "aws".into(),
        kind: kind.into(),
        name: name.into(),
        region: "eu-west-3".into(),
    }
}

#[tokio::test]
async fn a_resource_found_in_place_is_recorded_even_when_nothing_else_changes() {
    let cloud = support::cloud(31);
    cloud
        .insert_foreign("aws", "objectStore", "eu-west-3", "shop-assets", ours())
        .unwrap();
    let mut s = answering(false, true);
    let (code, out, _) = s
        .run(
            buckets(&["shop-assets"]),
            &cloud,
            &["plan", "--detailed-exitcode"],
        )
        .await;
    assert_eq!(code, 2, "recording it is a change: {out}");
    assert!(
        out.contains("~ aws/objectStore/shop-assets (eu-west-3)  adopt"),
        "{out}"
    );
    assert!(!out.contains("No changes"), "{out}");

    let (code, _, _) = s
        .run(buckets(&["shop-assets"]), &cloud, &["apply", "--yes"])
        .await;
    assert_eq!(code, 0);
    assert!(cloud.writes().is_empty(), "adopting touches no cloud");
    assert!(ledger(&s).rows.contains(&row("objectStore", "shop-assets")));

    // So deleting its line deletes it.
    let (code, _, _) = s.run(buckets(&[]), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0);
    assert!(cloud.find("aws", "objectStore", "shop-assets").is_empty());
}

/// Two buckets and a queue applied; the queue's tags then cannot be read.
async fn discovered_setup() -> (SimCloud, Session) {
    let cloud = support::cloud(32);
    let mut s = answering(false, true);
    let fleet = || {
        let mut f = Fleet::builder("shop");
        f.declare(AwsRegion::EuWest3, "shop-assets", ObjectStore::new());
        f.declare(AwsRegion::UsEast1, "shop-logs", ObjectStore::new());
        f.declare(
            AwsRegion::EuWest3,
            "jobs",
            Queues {
                fifo: Expr::lit(false),
                visibility_timeout_seconds: Partial::Unknown,
                retention_seconds: Partial::Unknown,
                dead_letter: Partial::Unknown,
                max_receive_count: Partial::Unknown,
                tags: Partial::Unknown,
            },
        );
        f.build()
    };
    let (code, _, _) = s.run(fleet(), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0);
    (cloud, s)
}

#[tokio::test]
async fn discover_adds_and_never_drops_a_row_and_says_what_it_could_not_look_at() {
    let (cloud, mut s) = discovered_setup().await;
    let before = ledger(&s);
    assert_eq!(before.len(), 3);
    // A stranger's bucket carrying this fleet's marker, whose tags will fail to read.
    cloud
        .insert_foreign("aws", "objectStore", "eu-west-3", "shop-copy", ours())
        .unwrap();
    cloud.fail_nth_matching(
        CallFilter::op(Op::Ownership).kind("objectStore"),
        1,
        infra_core::sdk::ErrorKind::Denied,
        false,
    );
    // The declaration no longer names the us-east-1 region; the queue's tags cannot be
    // read.
    let backends = Backends::new().with(Altered::new(
        cloud.backend("aws"),
        "queues",
        Alteration::TagsUnreadable,
    ));
    let (code, out, _) = s
        .run_on(buckets(&["shop-assets"]), backends, &["discover"])
        .await;
    assert_eq!(code, 1, "it could not look everywhere: {out}");
    insta::assert_snapshot!(out);
    // Every row kept: the undeclared region's, the unreadable kind's.
    assert_eq!(ledger(&s), before);

    // Looked at again with the failure gone, the copy is adopted, marked as found on
    // its marker alone.
    let (code, out, _) = s
        .run(buckets(&["shop-assets"]), &cloud, &["discover"])
        .await;
    assert_eq!(code, 0, "{out}");
    let after = ledger(&s);
    assert!(after.rows.is_superset(&before.rows));
    assert!(after.is_discovered(&row("objectStore", "shop-copy")));
    assert_eq!(
        after.discovered.len(),
        1,
        "declared resources are not marked"
    );
    assert!(out.contains("shop-copy"), "{out}");
    assert!(out.contains("adopted on its marker alone"), "{out}");
}

/// A stranger's bucket with a copied marker, adopted by `discover`.
async fn adopted_copy(seed: u64) -> (SimCloud, Session) {
    let cloud = support::cloud(seed);
    let mut s = answering(false, true);
    s.run(buckets(&["shop-assets"]), &cloud, &["apply", "--yes"])
        .await;
    cloud
        .insert_foreign("aws", "objectStore", "eu-west-3", "team-b-data", ours())
        .unwrap();
    let (code, _, _) = s
        .run(buckets(&["shop-assets"]), &cloud, &["discover"])
        .await;
    assert_eq!(code, 0);
    cloud.clear_calls();
    (cloud, s)
}

#[tokio::test]
async fn a_resource_adopted_on_its_marker_alone_is_deleted_only_when_named() {
    let (cloud, mut s) = adopted_copy(33).await;

    let (code, out, _) = s.run(buckets(&["shop-assets"]), &cloud, &["plan"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("adopted by `discover` on its marker alone: not deleted unless confirmed"),
        "{out}"
    );
    let (_, out, _) = s
        .run(buckets(&["shop-assets"]), &cloud, &["plan", "--json"])
        .await;
    let plan = json(&out);
    let copy = plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["resource"]["name"] == "team-b-data")
        .unwrap();
    assert_eq!(copy["action"], "prune");
    assert_eq!(copy["needsConfirmation"], true);

    // --yes is not a confirmation by name.
    let (code, out, _) = s
        .run(
            buckets(&["shop-assets"]),
            &cloud,
            &["apply", "--yes", "--json"],
        )
        .await;
    assert_eq!(code, 1);
    let result = json(&out);
    assert_eq!(result["notAttempted"][0]["resource"]["name"], "team-b-data");
    assert_eq!(result["notAttempted"][0]["reason"], "unconfirmed");
    assert_eq!(cloud.find("aws", "objectStore", "team-b-data").len(), 1);
    assert!(cloud.writes().is_empty());

    // Named, it goes.
    let (code, out, _) = s
        .run(
            buckets(&["shop-assets"]),
            &cloud,
            &[
                "apply",
                "--yes",
                "--allow-delete",
                "aws/objectStore/team-b-data (eu-west-3)",
            ],
        )
        .await;
    assert_eq!(code, 0, "{out}");
    assert!(cloud.find("aws", "objectStore", "team-b-data").is_empty());
    assert!(!ledger(&s).rows.contains(&row("objectStore", "team-b-data")));
}

#[tokio::test]
async fn the_prompt_names_each_marker_only_delete_and_asks_for_it_apart() {
    for confirm in [false, true] {
        let (cloud, s) = adopted_copy(34 + u64::from(confirm)).await;
        let mut person = session(
            true,
            Box::new(move |q| !q.starts_with("Delete each") || confirm),
        );
        person.state = s.state;
        let (code, _, err) = person
            .run(buckets(&["shop-assets"]), &cloud, &["apply"])
            .await;
        assert!(
            err.contains("  - aws/objectStore/team-b-data (eu-west-3)"),
            "{err}"
        );
        let questions = person.questions.lock().unwrap().clone();
        assert_eq!(questions.len(), 2, "{questions:?}");
        assert_eq!(code, if confirm { 0 } else { 1 });
        assert_eq!(
            cloud.find("aws", "objectStore", "team-b-data").is_empty(),
            confirm
        );
    }
}

#[tokio::test]
async fn lost_records_are_said_out_loud_with_the_way_back() {
    let cloud = support::cloud(36);
    let mut s = answering(false, true);
    s.run(
        buckets(&["shop-assets", "shop-logs", "shop-media"]),
        &cloud,
        &["apply", "--yes"],
    )
    .await;
    // The records are lost, and the declaration lost two lines.
    std::fs::remove_dir_all(s.state.path().join("shop")).unwrap();
    let (code, out, _) = s
        .run(
            buckets(&["shop-assets"]),
            &cloud,
            &["plan", "--detailed-exitcode"],
        )
        .await;
    assert_eq!(code, 2, "{out}");
    insta::assert_snapshot!(out);
    let (_, out, _) = s
        .run(buckets(&["shop-assets"]), &cloud, &["plan", "--json"])
        .await;
    assert_eq!(json(&out)["strays"].as_array().unwrap().len(), 2);
    // An apply says so too, and deletes nothing it cannot name.
    let (code, out, _) = s
        .run(buckets(&["shop-assets"]), &cloud, &["apply", "--yes"])
        .await;
    assert_eq!(code, 0);
    assert!(out.contains("Run `discover` to take them back"), "{out}");
    assert_eq!(cloud.len(), 3);
}

/// Four buckets applied; `gone` of them then deleted behind the engine's back.
async fn with_absent(seed: u64, gone: usize) -> (SimCloud, Session) {
    let names = ["shop-a", "shop-b", "shop-c", "shop-d"];
    let cloud = support::cloud(seed);
    let mut s = answering(false, true);
    s.run(buckets(&names), &cloud, &["apply", "--yes"]).await;
    for name in &names[..gone] {
        let handle = cloud.find("aws", "objectStore", name)[0].handle.clone();
        assert!(cloud.remove(&handle));
    }
    cloud.clear_calls();
    (cloud, s)
}

#[tokio::test]
async fn the_brake_passes_exactly_half_read_as_absent() {
    let (cloud, mut s) = with_absent(37, 2).await;
    let names = ["shop-a", "shop-b", "shop-c", "shop-d"];
    let (code, out, _) = s.run(buckets(&names), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0, "{out}");
    assert_eq!(cloud.len(), 4, "the two were created again");
}

#[tokio::test]
async fn the_brake_refuses_one_above_half_read_as_absent_unless_forced() {
    let (cloud, mut s) = with_absent(38, 3).await;
    let names = ["shop-a", "shop-b", "shop-c", "shop-d"];
    let (code, out, err) = s
        .run(buckets(&names), &cloud, &["apply", "--yes", "--json"])
        .await;
    assert_eq!(code, 1);
    assert!(
        err.contains("remove 3 of the 4 resources this fleet manages from its records (0 to delete, 3 found absent)"),
        "{err}"
    );
    let result = json(&out);
    assert_eq!(result["notAttempted"].as_array().unwrap().len(), 4);
    assert!(cloud.writes().is_empty());
    // The plan warns before anyone applies.
    let (_, _, err) = s.run(buckets(&names), &cloud, &["plan"]).await;
    assert!(err.contains("applying this plan would be refused"), "{err}");
    let (code, _, _) = s
        .run(buckets(&names), &cloud, &["apply", "--yes", "--force"])
        .await;
    assert_eq!(code, 0);
    assert_eq!(cloud.len(), 4);
}

#[tokio::test]
async fn the_brake_adds_deletes_to_rows_read_as_absent() {
    // One read as absent and two lines deleted: three of four.
    let (cloud, mut s) = with_absent(39, 1).await;
    let (code, _, err) = s
        .run(buckets(&["shop-d"]), &cloud, &["apply", "--yes"])
        .await;
    assert_eq!(code, 1);
    assert!(err.contains("(2 to delete, 1 found absent)"), "{err}");
    assert!(cloud.writes().is_empty());
    // One read as absent and one line deleted: exactly half.
    let (code, out, _) = s
        .run(
            buckets(&["shop-c", "shop-d", "shop-a"]),
            &cloud,
            &["apply", "--yes"],
        )
        .await;
    assert_eq!(code, 0, "{out}");
}

/// Buckets `buckets`, and with `queues` a dead-letter queue and three queues that use
/// it.
fn buckets_and_queues(
    buckets: &[&str],
    queues: bool,
) -> Result<Fleet, infra_core::prelude::CheckReport> {
    let mut f = Fleet::builder("shop");
    let here = AwsRegion::EuWest3;
    for name in buckets {
        f.declare(here, *name, ObjectStore::new());
    }
    if queues {
        let queue = |dead_letter| Queues {
            fifo: Expr::lit(false),
            visibility_timeout_seconds: Partial::Unknown,
            retention_seconds: Partial::Unknown,
            dead_letter: Partial::Known(dead_letter),
            max_receive_count: Partial::Unknown,
            tags: Partial::Unknown,
        };
        let dlq = f.declare(here, "jobs-dlq", queue(None));
        for name in ["jobs-a", "jobs-b", "jobs-c"] {
            f.declare(here, name, queue(Some(dlq)));
        }
    }
    f.build()
}

#[tokio::test]
async fn the_brake_counts_only_rows_of_resources_that_existed() {
    let cloud = support::cloud(40);
    let mut s = answering(false, true);
    // The dead-letter queue's create is refused (certainly not made): the three
    // queues that use it are not attempted, and their rows stay as intents.
    cloud.fail_nth_matching(
        CallFilter::op(Op::Create).kind("queues"),
        1,
        infra_core::sdk::ErrorKind::Invalid,
        false,
    );
    let both = || buckets_and_queues(&["shop-a", "shop-b"], true);
    let (code, out, _) = s.run(both(), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 1, "{out}");
    let records = ledger(&s);
    assert_eq!(records.len(), 5, "{records:?}");
    assert_eq!(records.intents.len(), 3, "{records:?}");
    assert_eq!(cloud.len(), 2, "only the buckets exist");
    cloud.clear_calls();
    // The declaration loses both buckets: the only two resources the fleet manages.
    // Three rows of creates never attempted must not make that look like two of five.
    let queues_only = || buckets_and_queues(&[], true);
    let (code, out, err) = s.run(queues_only(), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("remove 2 of the 2 resources this fleet manages from its records (2 to delete, 0 found absent)"),
        "{err}"
    );
    assert!(cloud.writes().is_empty(), "{:?}", cloud.writes());
    assert_eq!(cloud.len(), 2);
    // With the buckets declared, the intents are just creates to make.
    let (code, out, _) = s.run(both(), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0, "{out}");
    assert_eq!(cloud.len(), 6);
    assert!(ledger(&s).intents.is_empty());
}
