//! What the backend sends to Object Storage and Queues, compared with what Scaleway's
//! own tools sent to the live API (`recorded/terraform-wire.json`, from the Terraform
//! provider's recordings; see `recorded/README.md`).
//!
//! The backend reaches moto through a recording relay (`infra_testkit::relay`), which
//! keeps every header; each act of the backend is one span of requests, and an act
//! counts as evidence when every call it made is one the recordings hold, answered with
//! success, sent the same way.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use infra_core::kinds::{ObjectStoreSettled, QueuesSettled, Tags};
use infra_core::prelude::Partial;
use infra_core::sdk::Backend;
use infra_testkit::evidence::{Evidence, Record};
use infra_testkit::relay::{Exchange, Relay};
use serde_json::Value;

use super::support::{create, stand_in, tags, update};
use super::wire::fresh;
use super::{PROJECT, backend, moto};

const REGION: &str = "fr-par";
const FLEET: &str = "shop";
/// The stand-ins' access key (`ScalewayConfig::stand_in`).
const ACCESS_KEY: &str = "SCWSTANDIN0000000000";

/// The recorded rows.
fn recorded() -> Value {
    serde_json::from_str(include_str!("recorded/terraform-wire.json"))
        .expect("the recorded summary is JSON")
}

/// The bucket-level S3 call `r` is, by the names the recordings use; `None` for the
/// calls that only read.
fn s3_call(r: &Exchange) -> Option<&'static str> {
    let (path, query) = r.target.split_once('?').unwrap_or((&r.target, ""));
    let sub = query.split(['=', '&']).next().unwrap_or("");
    let bucket_level = path.trim_matches('/').split('/').count() == 1;
    if !bucket_level {
        return None;
    }
    Some(match (r.method.as_str(), sub) {
        ("PUT", "") => "CreateBucket",
        ("PUT", "tagging") => "PutBucketTagging",
        ("PUT", "versioning") => "PutBucketVersioning",
        ("PUT", "lifecycle") => "PutBucketLifecycleConfiguration",
        ("DELETE", "") => "DeleteBucket",
        ("DELETE", "tagging") => "DeleteBucketTagging",
        ("DELETE", "lifecycle") => "DeleteBucketLifecycle",
        _ => return None,
    })
}

/// The integrity headers of `r`: checksums, `Content-MD5`, and the SDK's headers that
/// announce a checksum.
fn integrity(r: &Exchange) -> BTreeSet<String> {
    r.headers
        .iter()
        .map(|(k, _)| k.clone())
        .filter(|k| {
            k.starts_with("x-amz-checksum-")
                || k == "content-md5"
                || k == "x-amz-sdk-checksum-algorithm"
                || k == "x-amz-trailer"
        })
        .collect()
}

/// For each S3 call the recordings hold answered with success, the integrity header
/// sets it was sent with.
fn recorded_s3() -> BTreeMap<String, BTreeSet<BTreeSet<String>>> {
    let mut out: BTreeMap<String, BTreeSet<BTreeSet<String>>> = BTreeMap::new();
    for row in recorded()["object_storage"].as_array().expect("rows") {
        let status = row["status"].as_u64().expect("a status");
        if !(200..300).contains(&status) {
            continue;
        }
        let headers = row["integrity_headers"]
            .as_array()
            .expect("headers")
            .iter()
            .map(|h| h.as_str().expect("a name").to_owned())
            .collect();
        out.entry(row["call"].as_str().expect("a call").to_owned())
            .or_default()
            .insert(headers);
    }
    out
}

/// The CRC-32 (ISO-HDLC) of `data`, as S3's `x-amz-checksum-crc32` carries it.
fn crc32_header(data: &[u8]) -> String {
    let mut crc = 0xFFFF_FFFFu32;
    for byte in data {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    base64::engine::general_purpose::STANDARD.encode((!crc).to_be_bytes())
}

/// The requests of each act, in order: the relay's record cut where each act began.
fn acts<'a>(
    requests: &'a [Exchange],
    starts: &[(&'static str, usize)],
) -> Vec<(&'static str, &'a [Exchange])> {
    starts
        .iter()
        .enumerate()
        .map(|(i, (act, from))| {
            let to = starts.get(i + 1).map_or(requests.len(), |(_, to)| *to);
            (*act, &requests[*from..to])
        })
        .collect()
}

#[tokio::test]
async fn object_storage_is_signed_for_the_project_with_checksums_only_where_s3_requires_one() {
    let Some(moto) = moto() else { return };
    let server = stand_in().await;
    let relay = Relay::start(&moto).await.expect("the relay starts");
    let backend = backend(&server, Some(&relay.address()));
    let name = fresh("wire");
    let spec = |versioning: bool, team: &str| ObjectStoreSettled {
        versioning: Partial::Known(versioning),
        expire_after_days: Partial::Known(Some(30)),
        tags: Partial::Known(tags(&[("team", team)])),
    };

    let mut starts = vec![("create", 0)];
    create(backend.as_ref(), REGION, &name, &spec(true, "web"), FLEET)
        .await
        .expect("the create succeeds");
    starts.push(("update", relay.exchanges().len()));
    update(backend.as_ref(), REGION, &name, &spec(false, "data"))
        .await
        .expect("the update succeeds");
    starts.push(("delete", relay.exchanges().len()));
    backend
        .delete("objectStore", REGION, &name)
        .await
        .expect("the delete succeeds");
    let requests = relay.exchanges();

    // Every request is signed with the key written ACCESS_KEY@PROJECT_ID.
    for r in &requests {
        assert_eq!(
            r.access_key(),
            Some(format!("{ACCESS_KEY}@{PROJECT}").as_str()),
            "{} {}",
            r.method,
            r.target
        );
    }

    // S3 requires an integrity check of PutBucketTagging, PutBucketVersioning and
    // PutBucketLifecycleConfiguration (its model's `httpChecksumRequired`): asked for
    // checksums only when required, the SDK sends the body's CRC-32 on exactly those,
    // in `x-amz-checksum-crc32` alone — as the Terraform provider sent them, and Object
    // Storage accepted (and that checksum is the body's). Every other call carries none.
    let accepted = recorded_s3();
    let required = [
        "PutBucketTagging",
        "PutBucketVersioning",
        "PutBucketLifecycleConfiguration",
    ];
    let mut seen = BTreeSet::new();
    for r in &requests {
        let sent = integrity(r);
        match s3_call(r) {
            Some(call) if required.contains(&call) => {
                seen.insert(call);
                assert_eq!(
                    sent,
                    BTreeSet::from(["x-amz-checksum-crc32".to_owned()]),
                    "{call}"
                );
                assert!(
                    accepted.get(call).is_some_and(|sets| sets.contains(&sent)),
                    "{call} was never recorded sent with {sent:?}: {accepted:?}"
                );
                assert_eq!(
                    r.header("x-amz-checksum-crc32"),
                    Some(crc32_header(r.request.bytes()).as_str()),
                    "{call}: the checksum is not the body's"
                );
            }
            call => assert!(
                sent.is_empty(),
                "{call:?} {} {} sent {sent:?}",
                r.method,
                r.target
            ),
        }
    }
    assert_eq!(seen, BTreeSet::from(required), "calls not exercised");

    // Evidence: an act whose every write is a call recorded accepted, sent the same way.
    let mut evidence = Evidence::new("scaleway", Record::RecordedTraffic, "object-storage-wire");
    for (act, span) in acts(&requests, &starts) {
        let writes: Vec<_> = span
            .iter()
            .filter_map(|r| s3_call(r).map(|c| (c, r)))
            .collect();
        let all_recorded = !writes.is_empty()
            && writes.iter().all(|(call, r)| {
                accepted
                    .get(*call)
                    .is_some_and(|sets| sets.contains(&integrity(r)))
            });
        if all_recorded {
            evidence.checked("objectStore", act);
        }
    }
    assert_eq!(
        evidence.len(),
        3,
        "{:?}",
        evidence.pairs().collect::<Vec<_>>()
    );
    evidence.publish();
    server.shutdown().await;
}

/// The SQS calls the recordings hold answered with success: (content type, target).
fn recorded_sqs() -> BTreeSet<(String, String)> {
    recorded()["queues"]
        .as_array()
        .expect("rows")
        .iter()
        .filter(|row| {
            row["status"]
                .as_u64()
                .is_some_and(|s| (200..300).contains(&s))
        })
        .map(|row| {
            (
                row["content_type"].as_str().expect("a type").to_owned(),
                row["target"].as_str().expect("a target").to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn queues_speak_sqs_json_protocol_as_scaleway_answered_it() {
    let Some(moto) = moto() else { return };
    let server = stand_in().await;
    let relay = Relay::start(&moto).await.expect("the relay starts");
    let backend = backend(&server, Some(&relay.address()));
    let queue = |visibility: u32| QueuesSettled {
        fifo: false,
        visibility_timeout_seconds: Partial::Known(visibility),
        retention_seconds: Partial::Known(345_600),
        dead_letter: Partial::Known(None),
        max_receive_count: Partial::Unknown,
        tags: Partial::Known(Tags::new()),
    };
    let mut starts = vec![("create", 0)];
    let url = create(backend.as_ref(), REGION, &fresh("wire"), &queue(30), FLEET)
        .await
        .expect("the create succeeds")
        .handle;
    starts.push(("read", relay.exchanges().len()));
    backend
        .read("queues", REGION, &url)
        .await
        .expect("the read");
    starts.push(("list", relay.exchanges().len()));
    backend.list("queues", REGION).await.expect("the list");
    starts.push(("update", relay.exchanges().len()));
    update(backend.as_ref(), REGION, &url, &queue(60))
        .await
        .expect("the update succeeds");
    starts.push(("delete", relay.exchanges().len()));
    backend
        .delete("queues", REGION, &url)
        .await
        .expect("the delete succeeds");
    let requests = relay.exchanges();
    // The Queues credentials the backend made for the run (still alive: they are
    // deleted when the backend is dropped).
    let queues_keys: Vec<String> = server
        .queues_credentials(REGION)
        .into_iter()
        .map(|c| c.access_key)
        .collect();
    assert!(!queues_keys.is_empty(), "no Queues credentials were made");

    // Every call is SQS's JSON protocol: POST / with AmazonSQS.<Action> and
    // application/x-amz-json-1.0, a JSON body, signed with the run's Queues credentials,
    // never the API key (Queues does not take it; no `@project` here either).
    for r in &requests {
        let target = r.header("x-amz-target").unwrap_or_default();
        assert_eq!(
            (r.method.as_str(), r.target.as_str()),
            ("POST", "/"),
            "{target}"
        );
        assert!(target.starts_with("AmazonSQS."), "{target}");
        assert_eq!(
            r.header("content-type"),
            Some("application/x-amz-json-1.0"),
            "{target}"
        );
        let body = r.request.text();
        assert!(body.starts_with('{'), "{target}: {body}");
        let signer = r.access_key().unwrap_or_default().to_owned();
        assert_ne!(signer, ACCESS_KEY, "{target}: signed with the API key");
        assert!(queues_keys.contains(&signer), "{target}: {signer}");
    }

    let accepted = recorded_sqs();
    let sent_as = |r: &Exchange| {
        (
            r.header("content-type").unwrap_or_default().to_owned(),
            r.header("x-amz-target").unwrap_or_default().to_owned(),
        )
    };
    let mut evidence = Evidence::new("scaleway", Record::RecordedTraffic, "queues-wire");
    for (act, span) in acts(&requests, &starts) {
        if !span.is_empty() && span.iter().all(|r| accepted.contains(&sent_as(r))) {
            evidence.checked("queues", act);
        }
    }
    // ListQueues is the one call the recordings do not hold: `list` is not counted.
    let pairs: Vec<_> = evidence.pairs().map(|(_, a)| a.to_owned()).collect();
    assert_eq!(pairs, ["create", "delete", "read", "update"]);
    evidence.publish();
    server.shutdown().await;
}
