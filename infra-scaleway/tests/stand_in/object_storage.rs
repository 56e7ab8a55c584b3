//! Object Storage against moto: what the conformance suite does not reach (the marker
//! written by the call right after `CreateBucket`, a bucket that cannot be marked
//! deleted again, the lifecycle kept for other tools, versioning, regions, `mark` of a
//! bucket made elsewhere, denials, throttling and lost answers).
//!
//! The backend reaches moto through a recording relay (`infra_testkit::relay`), which the Queues
//! tests use too. Tests also look at moto directly with the S3 SDK, as another tool
//! would.

use aws_sdk_s3::config::{BehaviorVersion, Region};
use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, BucketLocationConstraint, CreateBucketConfiguration,
    ExpirationStatus, LifecycleExpiration, LifecycleRule, LifecycleRuleFilter, Tag, Tagging,
};
use infra_core::kinds::{ObjectStoreSettled, Tags};
use infra_core::prelude::Partial;
use infra_core::sdk::{Backend, ErrorKind, MARKER_KEY, Marker, Sighting};
use serde_json::{Value, json};

use super::support::{create, delete_all, tags, update};
use infra_testkit::relay::{Exchange, Fault};

use super::wire::{
    another_tool, another_tools_http, deny, fresh, on_moto, slow_down, writes as s3_writes,
};

const REGION: &str = "fr-par";
const OTHER: &str = "nl-ams";
const KIND: &str = "objectStore";
const FLEET: &str = "shop";

/// An S3 client of moto, as another tool would use it.
fn s3(moto: &str, region: &str) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region.to_owned()))
        .endpoint_url(moto)
        .force_path_style(true)
        .credentials_provider(another_tool())
        .http_client(another_tools_http())
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

fn store(versioning: bool, expire: Option<u32>, tagged: Tags) -> ObjectStoreSettled {
    ObjectStoreSettled {
        versioning: Partial::Known(versioning),
        expire_after_days: Partial::Known(expire),
        tags: Partial::Known(tagged),
    }
}

async fn bucket_tags(s3: &aws_sdk_s3::Client, bucket: &str) -> Tags {
    match s3.get_bucket_tagging().bucket(bucket).send().await {
        Ok(out) => out
            .tag_set()
            .iter()
            .map(|t| (t.key().to_owned(), t.value().to_owned()))
            .collect(),
        Err(e)
            if e.as_service_error().and_then(ProvideErrorMetadata::code)
                == Some("NoSuchTagSet") =>
        {
            Tags::new()
        }
        Err(e) => panic!("GetBucketTagging of {bucket}: {e:?}"),
    }
}

/// The versioning status of `bucket` as moto holds it. moto answers with a root element
/// the SDK refuses (`GetBucketVersioningResponse`), so the status is taken from the body.
async fn versioning_status(s3: &aws_sdk_s3::Client, bucket: &str) -> Option<String> {
    match s3.get_bucket_versioning().bucket(bucket).send().await {
        Ok(out) => out.status().map(|s| s.as_str().to_owned()),
        Err(e) => {
            let body = e
                .raw_response()
                .and_then(|r| r.body().bytes())
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            let (_, rest) = body.split_once("<Status>")?;
            rest.split_once("</Status>")
                .map(|(status, _)| status.to_owned())
        }
    }
}

/// Whether a read reports `versioning` as `on`, or leaves it unknown (moto's answer
/// cannot be read by the SDK: the field is then never guessed).
fn versioning_reported(read: &Sighting, on: bool) -> bool {
    read.reported()
        .get("versioning")
        .is_none_or(|v| v.as_bool() == Some(on))
}

async fn exists(s3: &aws_sdk_s3::Client, bucket: &str) -> bool {
    s3.get_bucket_location().bucket(bucket).send().await.is_ok()
}

/// The lifecycle rules of `bucket`, as (id, days) pairs, in order.
async fn rules(s3: &aws_sdk_s3::Client, bucket: &str) -> Vec<(String, i32)> {
    match s3
        .get_bucket_lifecycle_configuration()
        .bucket(bucket)
        .send()
        .await
    {
        Ok(out) => out
            .rules()
            .iter()
            .map(|r| {
                let days = r.expiration().and_then(|e| e.days()).unwrap_or_default();
                (r.id().unwrap_or_default().to_owned(), days)
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

async fn made_elsewhere(s3: &aws_sdk_s3::Client, bucket: &str, tagged: &[(&str, &str)]) {
    s3.create_bucket()
        .bucket(bucket)
        .create_bucket_configuration(
            CreateBucketConfiguration::builder()
                .location_constraint(BucketLocationConstraint::from(REGION))
                .build(),
        )
        .send()
        .await
        .expect("another tool makes a bucket");
    if tagged.is_empty() {
        return;
    }
    let set = tagged
        .iter()
        .map(|(k, v)| Tag::builder().key(*k).value(*v).build().unwrap())
        .collect();
    s3.put_bucket_tagging()
        .bucket(bucket)
        .tagging(Tagging::builder().set_tag_set(Some(set)).build().unwrap())
        .send()
        .await
        .expect("another tool tags its bucket");
}

/// Another tool adds a lifecycle rule of its own (`their-rule`, 7 days) next to the
/// bucket's rules.
async fn add_their_rule(direct: &aws_sdk_s3::Client, bucket: &str) {
    let current = match direct
        .get_bucket_lifecycle_configuration()
        .bucket(bucket)
        .send()
        .await
    {
        Ok(out) => out.rules().to_vec(),
        Err(_) => Vec::new(),
    };
    let theirs = LifecycleRule::builder()
        .id("their-rule")
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix("logs/").build())
        .expiration(LifecycleExpiration::builder().days(7).build())
        .build()
        .unwrap();
    let mut all = current;
    all.push(theirs);
    direct
        .put_bucket_lifecycle_configuration()
        .bucket(bucket)
        .lifecycle_configuration(
            BucketLifecycleConfiguration::builder()
                .set_rules(Some(all))
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("another tool writes its rule");
}

// ---- the tests ----

#[tokio::test]
async fn a_bucket_is_created_in_its_region_and_tagged_with_the_marker_right_after() {
    let Some((server, relay, moto, backend)) = on_moto().await else {
        return;
    };
    let direct = s3(&moto, REGION);
    let name = fresh("new");
    let read = create(
        backend.as_ref(),
        REGION,
        &name,
        &store(true, Some(30), tags(&[("team", "web")])),
        FLEET,
    )
    .await
    .expect("the create succeeds");

    // On the wire: CreateBucket in fr-par, then at once the tags with the marker.
    let seen = relay.take();
    let writes: Vec<&Exchange> = seen.iter().filter(|s| s3_writes(s)).collect();
    assert!(
        writes[0].method == "PUT" && writes[0].target.starts_with(&format!("/{name}")),
        "{writes:?}"
    );
    assert!(
        writes[0]
            .request
            .text()
            .contains("<LocationConstraint>fr-par</LocationConstraint>")
    );
    assert!(!writes[0].target.contains("tagging") && !writes[0].request.text().contains("Tag"));
    assert!(writes[1].target.contains("tagging"), "{writes:?}");
    let tagging = writes[1].request.text();
    assert!(tagging.contains(MARKER_KEY) && tagging.contains("shop"));

    // As another tool sees it.
    let location = direct
        .get_bucket_location()
        .bucket(&name)
        .send()
        .await
        .unwrap();
    assert_eq!(
        location.location_constraint().map(|l| l.as_str()),
        Some(REGION)
    );
    assert_eq!(
        bucket_tags(&direct, &name).await,
        tags(&[("team", "web"), (MARKER_KEY, "shop")])
    );
    assert_eq!(
        versioning_status(&direct, &name).await.as_deref(),
        Some("Enabled")
    );
    assert_eq!(
        rules(&direct, &name).await,
        [("infra-expire".to_owned(), 30)]
    );

    // As the backend reads it.
    assert_eq!(read.handle, name);
    let reported = Value::Object(read.reported().clone());
    assert!(versioning_reported(&read, true), "{reported}");
    assert_eq!(reported["expireAfterDays"], json!(30));
    assert_eq!(reported["tags"], json!({"team": "web", MARKER_KEY: "shop"}));
    assert_eq!(
        read.raw_tags()
            .and_then(|t| t.get(MARKER_KEY))
            .map(String::as_str),
        Some("shop")
    );
    assert_eq!(
        read.observed_json()["endpoint"],
        json!(format!("https://{name}.s3.fr-par.scw.cloud"))
    );

    delete_all(backend.as_ref(), KIND, REGION, &[&name]).await;
    assert!(!exists(&direct, &name).await);
    let again = backend.delete(KIND, REGION, &name).await.unwrap_err();
    assert_eq!(again.kind, ErrorKind::NotFound, "{again}");
    let gone = backend.read(KIND, REGION, &name).await.unwrap_err();
    assert_eq!(gone.kind, ErrorKind::NotFound, "{gone}");
    server.shutdown().await;
}

/// The names `list` answers in `region`.
async fn listed(backend: &dyn Backend, region: &str) -> Vec<String> {
    let all = backend
        .list(KIND, region)
        .await
        .expect("the listing succeeds");
    assert!(all.iter().all(|l| l.name == l.handle), "{all:?}");
    all.into_iter().map(|l| l.name).collect()
}

#[tokio::test]
async fn a_bucket_of_another_region_is_absent_in_every_call_and_every_listing() {
    let Some((server, _relay, moto, backend)) = on_moto().await else {
        return;
    };
    let direct = s3(&moto, REGION);
    let spec = store(false, None, Tags::new());
    let name = fresh("par");
    let there = fresh("ams");
    create(backend.as_ref(), REGION, &name, &spec, FLEET)
        .await
        .expect("the create in fr-par succeeds");
    create(backend.as_ref(), OTHER, &there, &spec, FLEET)
        .await
        .expect("the create in nl-ams succeeds");
    let (par, ams) = (
        listed(backend.as_ref(), REGION).await,
        listed(backend.as_ref(), OTHER).await,
    );
    assert!(par.contains(&name) && !par.contains(&there), "{par:?}");
    assert!(ams.contains(&there) && !ams.contains(&name), "{ams:?}");
    for e in [
        backend.read(KIND, OTHER, &name).await.unwrap_err(),
        backend.ownership(KIND, OTHER, &name).await.unwrap_err(),
        backend
            .mark(KIND, OTHER, &name, &Marker::new("shop"))
            .await
            .unwrap_err(),
        backend.delete(KIND, OTHER, &name).await.unwrap_err(),
    ] {
        assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    }
    assert!(
        exists(&direct, &name).await,
        "a delete in nl-ams left the fr-par bucket alone"
    );
    delete_all(backend.as_ref(), KIND, REGION, &[&name]).await;
    delete_all(backend.as_ref(), KIND, OTHER, &[&there]).await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_bucket_that_cannot_be_marked_is_deleted_again_or_the_error_says_it_is_left() {
    let Some((server, relay, moto, backend)) = on_moto().await else {
        return;
    };
    let direct = s3(&moto, REGION);
    let spec = store(false, None, Tags::new());

    relay.rule(|s| (s.method == "PUT" && s.target.contains("tagging")).then(|| deny(s)));
    let name = fresh("unmarked");
    let e = create(backend.as_ref(), REGION, &name, &spec, FLEET)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Denied, "{e}");
    assert!(e.message.contains("deleted again"), "{e}");
    assert!(
        !exists(&direct, &name).await,
        "the unmarked bucket was deleted"
    );

    relay.rule(|s| {
        let tagging = s.method == "PUT" && s.target.contains("tagging");
        (tagging || s.method == "DELETE").then(|| deny(s))
    });
    let left = fresh("left");
    let e = create(backend.as_ref(), REGION, &left, &spec, FLEET)
        .await
        .unwrap_err();
    assert!(
        e.message.contains("exists unmarked") && e.message.contains("by hand"),
        "{e}"
    );
    assert!(exists(&direct, &left).await);
    assert!(bucket_tags(&direct, &left).await.is_empty());
    relay.restore();
    direct.delete_bucket().bucket(&left).send().await.unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn lifecycle_and_versioning_round_trip_and_another_tools_rule_is_kept() {
    let Some((server, _relay, moto, backend)) = on_moto().await else {
        return;
    };
    let direct = s3(&moto, REGION);
    let name = fresh("life");
    create(
        backend.as_ref(),
        REGION,
        &name,
        &store(false, Some(30), Tags::new()),
        FLEET,
    )
    .await
    .expect("the create succeeds");

    add_their_rule(&direct, &name).await;

    let read = update(
        backend.as_ref(),
        REGION,
        &name,
        &store(true, Some(10), Tags::new()),
    )
    .await
    .expect("the update succeeds");
    let mut got = rules(&direct, &name).await;
    got.sort();
    assert_eq!(
        got,
        [
            ("infra-expire".to_owned(), 10),
            ("their-rule".to_owned(), 7)
        ]
    );
    assert_eq!(
        versioning_status(&direct, &name).await.as_deref(),
        Some("Enabled")
    );
    assert!(versioning_reported(&read, true));
    assert_eq!(read.reported()["expireAfterDays"], json!(10));

    let read = update(
        backend.as_ref(),
        REGION,
        &name,
        &store(false, None, Tags::new()),
    )
    .await
    .expect("the update succeeds");
    assert_eq!(rules(&direct, &name).await, [("their-rule".to_owned(), 7)]);
    assert_eq!(
        versioning_status(&direct, &name).await.as_deref(),
        Some("Suspended")
    );
    assert!(versioning_reported(&read, false));
    assert_eq!(read.reported()["expireAfterDays"], Value::Null);
    // The marker is kept through updates that declare no marker.
    assert_eq!(
        bucket_tags(&direct, &name).await,
        tags(&[(MARKER_KEY, "shop")])
    );

    delete_all(backend.as_ref(), KIND, REGION, &[&name]).await;
    server.shutdown().await;
}

#[tokio::test]
async fn an_update_writes_only_what_differs_and_removes_only_our_rule() {
    let Some((server, relay, moto, backend)) = on_moto().await else {
        return;
    };
    let direct = s3(&moto, REGION);
    let name = fresh("same");
    let spec = store(false, Some(3), tags(&[("team", "web")]));
    create(backend.as_ref(), REGION, &name, &spec, FLEET)
        .await
        .expect("the create succeeds");

    // The same spec again writes nothing, but the versioning status when the read
    // could not say it (moto's answer, which the SDK cannot read).
    relay.take();
    let read = update(backend.as_ref(), REGION, &name, &spec)
        .await
        .expect("the update succeeds");
    let writes: Vec<Exchange> = relay.take().into_iter().filter(s3_writes).collect();
    let unknown = !read.reported().contains_key("versioning");
    assert!(
        writes
            .iter()
            .all(|s| unknown && s.target.ends_with("?versioning")),
        "an update with nothing to change wrote {writes:?}"
    );
    assert_eq!(
        rules(&direct, &name).await,
        [("infra-expire".to_owned(), 3)]
    );

    // Only our rule: none left, so no lifecycle at all.
    update(
        backend.as_ref(),
        REGION,
        &name,
        &store(false, None, tags(&[("team", "web")])),
    )
    .await
    .expect("the update succeeds");
    assert!(rules(&direct, &name).await.is_empty());
    assert!(
        direct
            .get_bucket_lifecycle_configuration()
            .bucket(&name)
            .send()
            .await
            .is_err(),
        "an empty lifecycle is deleted, never written"
    );
    delete_all(backend.as_ref(), KIND, REGION, &[&name]).await;
    server.shutdown().await;
}

#[tokio::test]
async fn mark_takes_over_a_bucket_made_elsewhere_keeping_its_tags_and_never_another_fleets() {
    let Some((server, relay, moto, backend)) = on_moto().await else {
        return;
    };
    let direct = s3(&moto, REGION);
    let shop = Marker::new("shop");

    let tagged = fresh("tagged");
    made_elsewhere(&direct, &tagged, &[("owner", "ops")]).await;
    let before = backend.ownership(KIND, REGION, &tagged).await.unwrap();
    assert_eq!(before, tags(&[("owner", "ops")]));
    backend
        .mark(KIND, REGION, &tagged, &shop)
        .await
        .expect("the mark succeeds");
    let marked = tags(&[("owner", "ops"), (MARKER_KEY, "shop")]);
    assert_eq!(bucket_tags(&direct, &tagged).await, marked);
    relay.take();
    backend
        .mark(KIND, REGION, &tagged, &shop)
        .await
        .expect("marking again succeeds");
    assert!(
        relay.take().iter().all(|s| !s3_writes(s)),
        "marking again wrote"
    );
    let e = backend
        .mark(KIND, REGION, &tagged, &Marker::new("blog"))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    assert_eq!(bucket_tags(&direct, &tagged).await, marked);
    let e = backend.mark(KIND, OTHER, &tagged, &shop).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");

    let bare = fresh("bare");
    made_elsewhere(&direct, &bare, &[]).await;
    assert!(
        backend
            .ownership(KIND, REGION, &bare)
            .await
            .unwrap()
            .is_empty()
    );
    backend
        .mark(KIND, REGION, &bare, &shop)
        .await
        .expect("the mark succeeds");
    assert_eq!(
        bucket_tags(&direct, &bare).await,
        tags(&[(MARKER_KEY, "shop")])
    );

    delete_all(backend.as_ref(), KIND, REGION, &[&tagged, &bare]).await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_name_already_taken_is_conflict_and_says_whose_the_bucket_is() {
    let Some((server, _relay, moto, backend)) = on_moto().await else {
        return;
    };
    let direct = s3(&moto, REGION);
    let spec = store(false, None, Tags::new());

    let ours = fresh("ours");
    create(backend.as_ref(), REGION, &ours, &spec, FLEET)
        .await
        .expect("the create succeeds");
    let e = create(backend.as_ref(), REGION, &ours, &spec, FLEET)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    assert!(e.message.contains("this fleet's marker"), "{e}");

    let theirs = fresh("theirs");
    made_elsewhere(&direct, &theirs, &[]).await;
    let e = create(backend.as_ref(), REGION, &theirs, &spec, FLEET)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    assert!(e.message.contains("no marker"), "{e}");
    assert!(
        bucket_tags(&direct, &theirs).await.is_empty(),
        "the refused create tagged it"
    );

    delete_all(backend.as_ref(), KIND, REGION, &[&ours, &theirs]).await;
    server.shutdown().await;
}

#[tokio::test]
async fn denials_are_never_absence_throttling_is_transient_and_lost_creates_are_settled() {
    let Some((server, relay, moto, backend)) = on_moto().await else {
        return;
    };
    let direct = s3(&moto, REGION);
    let spec = store(false, None, Tags::new());
    let name = fresh("faults");
    create(backend.as_ref(), REGION, &name, &spec, FLEET)
        .await
        .expect("the create succeeds");

    relay.rule(|s| Some(deny(s)));
    for e in [
        backend.read(KIND, REGION, &name).await.unwrap_err(),
        backend.ownership(KIND, REGION, &name).await.unwrap_err(),
        backend.list(KIND, REGION).await.unwrap_err(),
        backend.delete(KIND, REGION, &name).await.unwrap_err(),
    ] {
        assert_eq!(e.kind, ErrorKind::Denied, "{e}");
    }
    relay.rule(|s| s.target.contains("versioning").then(|| slow_down(s)));
    let e = backend.read(KIND, REGION, &name).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Throttled, "{e}");
    assert!(e.kind.is_transient());

    // CreateBucket never reached Object Storage: uncertain, and nothing holds the name.
    let dropped = fresh("dropped");
    relay.rule(|s| (s.method == "PUT" && !s.target.contains('?')).then_some(Fault::Drop));
    let e = create(backend.as_ref(), REGION, &dropped, &spec, FLEET)
        .await
        .unwrap_err();
    assert!(
        e.may_have_been_sent && e.kind == ErrorKind::Unavailable,
        "{e:?}"
    );
    assert!(!exists(&direct, &dropped).await);

    // CreateBucket made the bucket but its answer was lost: found by name, unmarked,
    // so it cannot be told from someone else's.
    let lost = fresh("lost");
    relay.rule(|s| (s.method == "PUT" && !s.target.contains('?')).then_some(Fault::Lose));
    let e = create(backend.as_ref(), REGION, &lost, &spec, FLEET)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    assert!(e.message.contains("marker"), "{e}");
    assert!(exists(&direct, &lost).await);
    relay.restore();

    delete_all(backend.as_ref(), KIND, REGION, &[&name, &lost]).await;
    server.shutdown().await;
}
