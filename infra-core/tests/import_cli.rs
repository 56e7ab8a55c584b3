//! `import ADDRESS CLOUD_ID` and `discover --emit-rust`, driven as a person would
//! against the simulated cloud: each refusal with its exit code and words, and nothing
//! changed by it (no cloud write, no record); the success path in text and JSON; what
//! is on disk and in the cloud afterwards; and the next plan, which shows exactly the
//! divergence the import showed.

mod support;

use infra_core::kinds::*;
use infra_core::{
    engine::{FileStore, LedgerRow, RecordStore},
    prelude::{AwsRegion, Backends, CheckReport, Expr, Fleet, Partial},
    sdk::RawTags,
};
use infra_testkit::sim::SimCloud;
use serde_json::{Value, json};
use support::console::{Session, answering, json, session};

const HERE: AwsRegion = AwsRegion::EuWest3;

fn config(value: Value) -> serde_json::Map<String, Value> {
    value.as_object().unwrap().clone()
}

fn tags(pairs: &[(&str, &str)]) -> RawTags {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// What was made by hand: a bucket with versioning on and a tag, a queue, a secret of
/// fleet `billing`, a bucket in another region. Answers the handles by name.
fn hand_made(seed: u64) -> (SimCloud, Handles) {
    let cloud = support::cloud(seed);
    let bucket = cloud
        .insert_foreign_with(
            "aws",
            "objectStore",
            "eu-west-3",
            "hand-made",
            config(json!({"versioning": true})),
            tags(&[("team", "web")]),
        )
        .unwrap();
    let queue = cloud
        .insert_foreign_with(
            "aws",
            "queues",
            "eu-west-3",
            "hand-jobs",
            config(json!({"fifo": false})),
            RawTags::new(),
        )
        .unwrap();
    let billing = cloud
        .insert_foreign(
            "aws",
            "secrets",
            "eu-west-3",
            "billing-key",
            tags(&[("managed-by-infra", "billing")]),
        )
        .unwrap();
    let far = cloud
        .insert_foreign(
            "aws",
            "objectStore",
            "us-east-1",
            "far-away",
            RawTags::new(),
        )
        .unwrap();
    let scw_queue = cloud
        .insert_foreign_with(
            "scaleway",
            "queues",
            "fr-par",
            "scw-jobs",
            config(json!({"fifo": false})),
            RawTags::new(),
        )
        .unwrap();
    (
        cloud,
        Handles {
            bucket,
            queue,
            billing,
            far,
            scw_queue,
        },
    )
}

struct Handles {
    bucket: String,
    queue: String,
    billing: String,
    far: String,
    scw_queue: String,
}

/// The fleet that declares them: the bucket with versioning off, the rest as they are.
fn fleet() -> Result<Fleet, CheckReport> {
    let mut f = Fleet::builder("imports");
    f.declare(
        HERE,
        "hand-made",
        ObjectStore {
            versioning: Partial::Known(Expr::lit(false)),
            ..ObjectStore::new()
        },
    );
    f.declare(
        HERE,
        "hand-jobs",
        Queues {
            fifo: Expr::lit(false),
            visibility_timeout_seconds: Partial::Unknown,
            retention_seconds: Partial::Unknown,
            dead_letter: Partial::Unknown,
            max_receive_count: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    f.declare(HERE, "billing-key", Secrets::from_env("BILLING_KEY"));
    f.declare(HERE, "far-away", ObjectStore::new());
    f.declare(AwsRegion::UsEast1, "us-logs", ObjectStore::new());
    f.declare(HERE, "late-assets", ObjectStore::new());
    f.declare(
        infra_core::prelude::ScalewayRegion::FrPar,
        "scw-jobs",
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
}

fn records(s: &Session) -> FileStore {
    FileStore::new(s.state.path())
}

fn row(kind: &str, name: &str) -> LedgerRow {
    LedgerRow {
        provider: "aws".into(),
        kind: kind.into(),
        name: name.into(),
        region: "eu-west-3".into(),
    }
}

/// Nothing was written anywhere: no cloud write, no row, no cached observation.
fn assert_unchanged(cloud: &SimCloud, s: &Session) {
    assert!(cloud.writes().is_empty(), "{:?}", cloud.writes());
    let store = records(s);
    assert!(store.load_ledger("imports").unwrap().is_empty());
    assert!(store.cached_pairs("imports").unwrap().is_empty());
}

/// Runs `import` refused: exit 1, nothing on standard output in text, the JSON
/// document's refusal; answers the error.
async fn refused(s: &mut Session, cloud: &SimCloud, args: &[&str], refusal: &str) -> String {
    let mut argv = vec!["import"];
    argv.extend_from_slice(args);
    let (code, out, err) = s.run(fleet(), cloud, &argv).await;
    assert_eq!((code, out.as_str()), (1, ""), "{args:?}: {err}");
    assert!(err.contains("Nothing was changed"), "{err}");
    argv.push("--json");
    let (code, out, _) = s.run(fleet(), cloud, &argv).await;
    assert_eq!(code, 1);
    let outcome = json(&out);
    assert_eq!(outcome["import"], "v1");
    assert_eq!(outcome["status"], "refused", "{outcome:#}");
    assert_eq!(outcome["refusal"], refusal, "{outcome:#}");
    assert_unchanged(cloud, s);
    err
}

#[tokio::test]
async fn every_refusal_says_why_exits_1_and_changes_nothing() {
    let (cloud, h) = hand_made(71);
    let mut s = answering(false, true);

    let err = refused(
        &mut s,
        &cloud,
        &["nowhere", &h.bucket, "--yes"],
        "not-declared",
    )
    .await;
    insta::assert_snapshot!("import_not_declared", err);

    let err = refused(
        &mut s,
        &cloud,
        &["billing-key", &h.billing, "--yes"],
        "other-fleet",
    )
    .await;
    assert!(
        err.contains("carries the ownership marker of fleet `billing`"),
        "{err}"
    );
    assert_eq!(
        cloud.resource(&h.billing).unwrap().raw_tags["managed-by-infra"],
        "billing"
    );

    // The queue's id given for the bucket: another kind.
    let err = refused(
        &mut s,
        &cloud,
        &["hand-made", &h.queue, "--yes"],
        "elsewhere",
    )
    .await;
    insta::assert_snapshot!("import_other_kind", err);

    // The bucket in us-east-1 given for the one declared in eu-west-3: another region.
    let err = refused(&mut s, &cloud, &["far-away", &h.far, "--yes"], "elsewhere").await;
    assert!(
        err.contains("is of kind objectStore, in us-east-1; aws/objectStore/far-away (eu-west-3) is declared of kind objectStore, in eu-west-3"),
        "{err}"
    );

    // An id that names nothing is absent.
    let err = refused(
        &mut s,
        &cloud,
        &["hand-made", "arn:aws:s3:::nothing-here", "--yes"],
        "absent",
    )
    .await;
    insta::assert_snapshot!("import_absent", err);

    // The bucket's id given for the queue's address: the bucket is not a queue.
    refused(
        &mut s,
        &cloud,
        &["hand-jobs", &h.bucket, "--yes"],
        "elsewhere",
    )
    .await;

    // The other bucket's id given for `far-away`: the cloud lists it as `hand-made`,
    // so the next plan of `far-away` would not find it.
    let err = refused(
        &mut s,
        &cloud,
        &["far-away", &h.bucket, "--yes"],
        "other-name",
    )
    .await;
    assert!(
        err.contains(&format!(
            "the cloud knows {} as `hand-made`, not `far-away`",
            h.bucket
        )),
        "{err}"
    );

    // A kind whose tags cannot be read cannot carry the marker.
    let err = refused(
        &mut s,
        &cloud,
        &["scw-jobs", &h.scw_queue, "--yes"],
        "unmarkable",
    )
    .await;
    assert!(err.contains("cannot carry the ownership marker"), "{err}");

    // Made a moment ago, and not listed yet: the next plan would not find it.
    cloud.set_list_lag(2);
    let late = cloud
        .insert_foreign(
            "aws",
            "objectStore",
            "eu-west-3",
            "late-assets",
            RawTags::new(),
        )
        .unwrap();
    cloud.set_list_lag(0);
    cloud.clear_calls();
    let err = refused(&mut s, &cloud, &["late-assets", &late, "--yes"], "unlisted").await;
    assert!(err.contains("does not show"), "{err}");

    // No terminal and no --yes: shown, then refused.
    let (code, out, err) = s
        .run(fleet(), &cloud, &["import", "hand-made", &h.bucket])
        .await;
    assert_eq!(code, 1);
    assert!(out.contains("The next plan of it, once imported:"), "{out}");
    assert!(err.contains("there is no terminal to ask on"), "{err}");
    assert_unchanged(&cloud, &s);
}

#[tokio::test]
async fn a_read_that_fails_is_an_error_never_absent() {
    let (cloud, h) = hand_made(72);
    let mut s = answering(false, true);
    cloud.deny("aws", Some("objectStore"), None);
    let (code, out, err) = s
        .run(
            fleet(),
            &cloud,
            &["import", "hand-made", &h.bucket, "--yes", "--json"],
        )
        .await;
    assert_eq!(code, 1);
    let outcome = json(&out);
    assert_eq!(outcome["status"], "failed", "{outcome:#}");
    assert_eq!(outcome["refusal"], Value::Null);
    assert!(err.contains("could not be read"), "{err}");
    assert!(err.contains("whether it exists is not known"), "{err}");
    assert!(!err.contains("names nothing"), "{err}");
    assert_unchanged(&cloud, &s);
}

#[tokio::test]
async fn no_at_the_prompt_changes_nothing() {
    let (cloud, h) = hand_made(73);
    let mut s = session(true, Box::new(|_| false));
    let (code, out, _) = s
        .run(fleet(), &cloud, &["import", "hand-made", &h.bucket])
        .await;
    assert_eq!(code, 1);
    assert!(
        out.contains("Declined at the prompt: nothing was changed."),
        "{out}"
    );
    assert_eq!(
        s.questions.lock().unwrap().clone(),
        [format!(
            "Import {} as aws/objectStore/hand-made (eu-west-3), putting managed-by-infra=imports on it?",
            h.bucket
        )]
    );
    assert_unchanged(&cloud, &s);
}

#[tokio::test]
async fn an_import_marks_records_and_caches_and_the_next_plan_shows_what_it_showed() {
    let (cloud, h) = hand_made(74);
    let mut s = session(true, Box::new(|_| true));

    // Before: the plan refuses to touch a resource without the marker.
    let (code, out, _) = s.run(fleet(), &cloud, &["plan"]).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("does not carry the `managed-by-infra` marker"),
        "{out}"
    );

    let (code, out, err) = s
        .run(fleet(), &cloud, &["import", "hand-made", &h.bucket])
        .await;
    assert_eq!(code, 0, "{err}");
    insta::assert_snapshot!("import_text", out.replace(&h.bucket, "[BUCKET]"));

    // In the cloud: the marker, and nothing else written.
    let bucket = cloud.resource(&h.bucket).unwrap();
    assert_eq!(bucket.raw_tags["managed-by-infra"], "imports");
    assert_eq!(bucket.raw_tags["team"], "web");
    assert_eq!(bucket.config["versioning"], true);
    assert_eq!(cloud.writes().len(), 1, "one mark, nothing else");

    // On disk: the row (not marked discovered: it is declared), and the observation.
    let store = records(&s);
    let ledger = store.load_ledger("imports").unwrap();
    assert_eq!(
        ledger.rows,
        [row("objectStore", "hand-made")].into_iter().collect()
    );
    assert!(ledger.discovered.is_empty());
    assert!(ledger.intents.is_empty());
    let cache = store.load_cache("imports", "aws", "objectStore").unwrap();
    assert_eq!(cache.len(), 1);
    assert_eq!(
        (cache[0].name.as_str(), cache[0].handle.as_str()),
        ("hand-made", h.bucket.as_str())
    );
    assert_eq!(cache[0].observed, bucket.observed);

    // The next plan of it shows the divergence shown, and nothing else.
    let (code, out, _) = s
        .run(
            fleet(),
            &cloud,
            &["plan", "--json", "--target", "hand-made"],
        )
        .await;
    assert_eq!(code, 0, "{out}");
    let plan = json(&out);
    let (ours, others): (Vec<&Value>, Vec<&Value>) = plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .partition(|c| c["resource"]["name"] == "hand-made");
    assert!(others.iter().all(|c| c["reason"] == "filtered"), "{plan:#}");
    assert_eq!(
        *ours[0],
        json!({
            "resource": {"provider": "aws", "kind": "objectStore", "name": "hand-made", "region": "eu-west-3"},
            "action": "update",
            "fields": [{"field": "versioning", "repair": "mutable", "before": true, "after": false}],
        })
    );
    let (code, out, _) = s
        .run(fleet(), &cloud, &["plan", "--target", "hand-made"])
        .await;
    assert_eq!(code, 0);
    let line = out
        .lines()
        .position(|l| l.starts_with("  ~ aws/objectStore/hand-made (eu-west-3) "))
        .unwrap_or_else(|| panic!("{out}"));
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[line].ends_with("  update"), "{out}");
    assert_eq!(lines[line + 1], "      versioning: true → false", "{out}");

    // Imported twice: refused, the address is managed.
    cloud.clear_calls();
    let (code, out, err) = s
        .run(
            fleet(),
            &cloud,
            &["import", "hand-made", &h.bucket, "--json"],
        )
        .await;
    assert_eq!(code, 1);
    let outcome = json(&out);
    assert_eq!(outcome["refusal"], "already-managed", "{outcome:#}");
    assert!(err.contains("is already in the records"), "{err}");
    assert!(cloud.calls().is_empty(), "refused before any call");
}

#[tokio::test]
async fn import_json_is_one_document_with_the_plan_and_the_declaration() {
    let (cloud, h) = hand_made(75);
    let mut s = answering(false, true);
    let (code, out, err) = s
        .run(
            fleet(),
            &cloud,
            &["import", "hand-made", &h.bucket, "--yes", "--json"],
        )
        .await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("The next plan of it, once imported:"), "{err}");
    let outcome = json(&out);
    assert_eq!(outcome["status"], "imported");
    assert_eq!(outcome["markedNow"], true);
    assert_eq!(outcome["resource"], "aws/objectStore/hand-made (eu-west-3)");
    assert_eq!(outcome["plan"]["action"], "update");
    assert_eq!(outcome["plan"]["fields"][0]["field"], "versioning");
    assert_eq!(
        outcome["declaration"]["rust"],
        "fleet.declare(AwsRegion::EuWest3, \"hand-made\", ObjectStore {\n    versioning: Partial::Known(Expr::lit(true)),\n    expire_after_days: Partial::Known(Expr::lit(None)),\n    tags: Partial::Known(Expr::lit([(\"team\".to_owned(), \"web\".to_owned())].into())),\n});\n"
    );
    assert_eq!(outcome["declaration"]["needs"], json!([]));

    // A resource carrying this fleet's marker already (made by an earlier run whose
    // records were lost) is recorded without a second mark.
    let queue = cloud.resource(&h.queue).unwrap();
    let mut marked = queue.raw_tags.clone();
    marked.insert("managed-by-infra".into(), "imports".into());
    cloud.set_raw_tags(&h.queue, marked);
    cloud.clear_calls();
    let (code, out, _) = s
        .run(
            fleet(),
            &cloud,
            &["import", "hand-jobs", &h.queue, "--yes", "--json"],
        )
        .await;
    assert_eq!(code, 0);
    let outcome = json(&out);
    assert_eq!(outcome["markedNow"], false);
    assert_eq!(outcome["plan"]["action"], "unchanged");
    assert!(cloud.writes().is_empty());
    assert_eq!(records(&s).load_ledger("imports").unwrap().len(), 2);
}

#[tokio::test]
async fn import_takes_the_fleets_lock() {
    let (cloud, h) = hand_made(76);
    let mut s = answering(false, true);
    let store = records(&s);
    let holder = infra_core::engine::LockHolder::this_process("apply");
    let guard = store.try_lock("imports", &holder).unwrap();
    let (code, _, err) = s
        .run(
            fleet(),
            &cloud,
            &["import", "hand-made", &h.bucket, "--yes"],
        )
        .await;
    assert_eq!(code, 1);
    assert!(
        err.contains("fleet `imports` is locked by `apply`"),
        "{err}"
    );
    drop(guard);
    assert_unchanged(&cloud, &s);
    let (code, out, _) = s.run_on(fleet(), Backends::new(), &["--help"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("  import "), "{out}");
}
