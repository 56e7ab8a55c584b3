//! Queues against moto: what the conformance suite does not reach (no tag ever sent,
//! declared tags refused before any call, the dead-letter redrive, FIFO names, regions,
//! denials and lost answers). The suite itself runs on the Scaleway samples (which
//! declare no queue tags) from `main.rs`, when moto is at hand.
//!
//! moto accepts tags on queues where Scaleway Queues take none, so a backend relying on
//! them would pass against moto: every request goes through the recording [`Wire`], and
//! the tests assert that no tag ever left the backend, and that moto holds none.

use aws_sdk_sqs::config::{BehaviorVersion, Region};
use aws_sdk_sqs::types::QueueAttributeName;
use infra_core::kinds::{QueuesSettled, Tags};
use infra_core::prelude::{Handle, Partial};
use infra_core::sdk::{Backend, ErrorKind, Marker};
use serde_json::{Value, json};

use super::support::{create, delete_all, update};
use infra_testkit::relay::{Exchange, Fault};

use super::wire::{another_tool, another_tools_http, deny, fresh, on_moto, slow_down};

const REGION: &str = "fr-par";
const OTHER: &str = "nl-ams";
const KIND: &str = "queues";
const FLEET: &str = "shop";

/// An SQS client of moto, as another tool would use it.
fn sqs(moto: &str, region: &str) -> aws_sdk_sqs::Client {
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region.to_owned()))
        .endpoint_url(moto)
        .credentials_provider(another_tool())
        .http_client(another_tools_http())
        .build();
    aws_sdk_sqs::Client::from_conf(config)
}

fn queue(visibility: u32) -> QueuesSettled {
    QueuesSettled {
        fifo: false,
        visibility_timeout_seconds: Partial::Known(visibility),
        retention_seconds: Partial::Known(345_600),
        dead_letter: Partial::Known(None),
        max_receive_count: Partial::Unknown,
        tags: Partial::Known(Tags::new()),
    }
}

/// What moto holds as the queue's tags.
async fn moto_tags(direct: &aws_sdk_sqs::Client, url: &str) -> usize {
    let out = direct
        .list_queue_tags()
        .queue_url(url)
        .send()
        .await
        .unwrap();
    out.tags().map_or(0, |t| t.len())
}

/// Fails when a request carried a tag or called a tagging action.
fn assert_no_tags(seen: &[Exchange]) {
    for s in seen {
        assert!(
            !["TagQueue", "UntagQueue", "ListQueueTags"].contains(&s.action().as_str()),
            "the backend called {}",
            s.action()
        );
        let body = s.request.text();
        assert!(
            !body.to_ascii_lowercase().contains("\"tags\""),
            "the backend sent tags: {} {body}",
            s.action()
        );
    }
}

#[tokio::test]
async fn a_queue_is_never_sent_a_tag_by_create_update_or_mark() {
    let Some((server, relay, moto, backend)) = on_moto().await else {
        return;
    };
    let direct = sqs(&moto, REGION);
    assert!(
        !backend.capabilities().ownership.contains(KIND),
        "the tags of a queue cannot be read"
    );
    let name = fresh("notags");
    let read = create(backend.as_ref(), REGION, &name, &queue(30), FLEET)
        .await
        .expect("the create succeeds");
    let url = read.handle.clone();
    let seen = relay.take();
    // The bodies are JSON with members by name: a `tags` member would show.
    assert!(
        seen.iter().any(|s| s.action() == "CreateQueue"
            && s.request
                .text()
                .contains(&format!(r#""QueueName":"{name}""#))),
        "{seen:?}"
    );
    assert_no_tags(&seen);
    assert_eq!(moto_tags(&direct, &url).await, 0);
    assert_eq!(read.reported()["tags"], json!({}));
    assert!(read.raw_tags().is_none());

    update(backend.as_ref(), REGION, &url, &queue(60))
        .await
        .expect("the update succeeds");
    let seen = relay.take();
    assert!(
        seen.iter().any(|s| s.action() == "SetQueueAttributes"),
        "{seen:?}"
    );
    assert_no_tags(&seen);

    let e = backend
        .mark(KIND, REGION, &url, &Marker::new("shop"))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    let e = backend.ownership(KIND, REGION, &url).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    assert!(e.message.contains("no tags"), "{e}");
    let seen = relay.take();
    assert!(
        seen.iter().all(|s| s.action() == "GetQueueAttributes"),
        "{seen:?}"
    );
    assert_eq!(moto_tags(&direct, &url).await, 0);

    delete_all(backend.as_ref(), KIND, REGION, &[&url]).await;
    for e in [
        backend.ownership(KIND, REGION, &url).await.unwrap_err(),
        backend
            .mark(KIND, REGION, &url, &Marker::new("shop"))
            .await
            .unwrap_err(),
    ] {
        assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn declared_tags_are_refused_as_invalid_before_any_call() {
    let Some((server, relay, _moto, backend)) = on_moto().await else {
        return;
    };
    let tagged = QueuesSettled {
        tags: Partial::Known(Tags::from([("team".to_owned(), "web".to_owned())])),
        ..queue(30)
    };
    let e = create(backend.as_ref(), REGION, &fresh("tagged"), &tagged, FLEET)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    assert!(e.message.contains("Scaleway Queues take no tags"), "{e}");
    let url = "https://sqs.mnq.fr-par.scaleway.com/project-1/some-queue";
    let e = update(backend.as_ref(), REGION, url, &tagged)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    assert!(
        relay.take().is_empty(),
        "a refused declaration reached Queues"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_dead_letter_redrive_round_trips() {
    let Some((server, _relay, moto, backend)) = on_moto().await else {
        return;
    };
    let direct = sqs(&moto, REGION);
    let dlq = create(backend.as_ref(), REGION, &fresh("dlq"), &queue(30), FLEET)
        .await
        .expect("the dead-letter queue is made")
        .handle;
    let redriven = |count: Option<u32>| QueuesSettled {
        dead_letter: Partial::Known(Some(Handle::new(dlq.clone()))),
        max_receive_count: count.map_or(Partial::Unknown, Partial::Known),
        ..queue(30)
    };
    let read = create(
        backend.as_ref(),
        REGION,
        &fresh("src"),
        &redriven(Some(5)),
        FLEET,
    )
    .await
    .expect("the create succeeds");
    let url = read.handle.clone();
    assert_eq!(read.reported()["deadLetter"], json!(dlq));
    assert_eq!(read.reported()["maxReceiveCount"], json!(5));
    let attrs = direct
        .get_queue_attributes()
        .queue_url(&dlq)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap();
    let arn = attrs.attributes().unwrap()[&QueueAttributeName::QueueArn].clone();
    let policy = direct
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::RedrivePolicy)
        .send()
        .await
        .unwrap();
    let policy: Value =
        serde_json::from_str(&policy.attributes().unwrap()[&QueueAttributeName::RedrivePolicy])
            .unwrap();
    assert_eq!(policy["deadLetterTargetArn"], json!(arn));

    let read = update(backend.as_ref(), REGION, &url, &redriven(Some(7)))
        .await
        .expect("the update succeeds");
    assert_eq!(read.reported()["maxReceiveCount"], json!(7));
    let read = update(backend.as_ref(), REGION, &url, &queue(30))
        .await
        .expect("the update succeeds");
    assert_eq!(read.reported()["deadLetter"], Value::Null);
    assert!(
        !read.reported().contains_key("maxReceiveCount"),
        "no count without a policy"
    );

    // A dead letter without a count, or to a queue that is not there, is the
    // declaration's fault.
    let e = update(backend.as_ref(), REGION, &url, &redriven(None))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    delete_all(backend.as_ref(), KIND, REGION, &[&dlq]).await;
    let e = update(backend.as_ref(), REGION, &url, &redriven(Some(5)))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    assert!(e.message.contains("does not exist"), "{e}");
    delete_all(backend.as_ref(), KIND, REGION, &[&url]).await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_fifo_queue_carries_its_suffix_on_the_wire_and_its_declared_name_in_lists() {
    let Some((server, _relay, moto, backend)) = on_moto().await else {
        return;
    };
    let direct = sqs(&moto, REGION);
    let name = fresh("fifo");
    let fifo = QueuesSettled {
        fifo: true,
        ..queue(30)
    };
    let read = create(backend.as_ref(), REGION, &name, &fifo, FLEET)
        .await
        .expect("the create succeeds");
    let url = read.handle.clone();
    assert!(url.ends_with(&format!("/{name}.fifo")), "{url}");
    assert_eq!(read.reported()["fifo"], json!(true));
    let attrs = direct
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::FifoQueue)
        .send()
        .await
        .unwrap();
    assert_eq!(
        attrs.attributes().unwrap()[&QueueAttributeName::FifoQueue],
        "true"
    );
    let listed = backend
        .list(KIND, REGION)
        .await
        .expect("the listing succeeds");
    assert!(
        listed.iter().any(|l| l.name == name && l.handle == url),
        "{listed:?}"
    );
    let e = update(backend.as_ref(), REGION, &url, &queue(30))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    let long = "q".repeat(76);
    let e = create(backend.as_ref(), REGION, &long, &fifo, FLEET)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    delete_all(backend.as_ref(), KIND, REGION, &[&url]).await;
    server.shutdown().await;
}

#[tokio::test]
async fn listings_answer_their_region_and_a_taken_name_is_conflict() {
    let Some((server, relay, _moto, backend)) = on_moto().await else {
        return;
    };
    let here = fresh("par");
    let there = fresh("ams");
    let a = create(backend.as_ref(), REGION, &here, &queue(30), FLEET)
        .await
        .expect("the create in fr-par succeeds")
        .handle;
    let b = create(backend.as_ref(), OTHER, &there, &queue(30), FLEET)
        .await
        .expect("the create in nl-ams succeeds")
        .handle;
    let par = backend.list(KIND, REGION).await.unwrap();
    let ams = backend.list(KIND, OTHER).await.unwrap();
    assert!(par.iter().any(|l| l.name == here) && !par.iter().any(|l| l.name == there));
    assert!(ams.iter().any(|l| l.name == there) && !ams.iter().any(|l| l.name == here));
    let e = backend.read(KIND, OTHER, &a).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    let e = backend.delete(KIND, REGION, &b).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    // A Scaleway URL of another region is absent here before any call.
    relay.take();
    let elsewhere = "https://sqs.mnq.nl-ams.scaleway.com/project-1/orders";
    let e = backend.read(KIND, REGION, elsewhere).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    assert!(relay.take().is_empty());

    let e = create(backend.as_ref(), REGION, &here, &queue(60), FLEET)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    delete_all(backend.as_ref(), KIND, REGION, &[&a]).await;
    delete_all(backend.as_ref(), KIND, OTHER, &[&b]).await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_denied_call_is_denied_and_a_lost_create_stays_uncertain() {
    let Some((server, relay, moto, backend)) = on_moto().await else {
        return;
    };
    let direct = sqs(&moto, REGION);
    let url = create(backend.as_ref(), REGION, &fresh("deny"), &queue(30), FLEET)
        .await
        .expect("the create succeeds")
        .handle;
    relay.rule(|s| Some(deny(s)));
    for e in [
        backend.list(KIND, REGION).await.unwrap_err(),
        backend.read(KIND, REGION, &url).await.unwrap_err(),
        backend.delete(KIND, REGION, &url).await.unwrap_err(),
    ] {
        assert_eq!(e.kind, ErrorKind::Denied, "{e}");
    }
    relay.rule(|s| (s.action() == "ListQueues").then(|| slow_down(s)));
    let e = backend.list(KIND, REGION).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Throttled, "{e}");

    // A create whose answer is lost: it may have made the queue, and without a marker
    // nothing can tell; the error says so, and stays uncertain.
    let lost = fresh("lost");
    relay.rule(|s| (s.action() == "CreateQueue").then_some(Fault::Lose));
    let e = create(backend.as_ref(), REGION, &lost, &queue(30), FLEET)
        .await
        .unwrap_err();
    assert!(e.may_have_been_sent, "{e:?}");
    relay.restore();
    let made = direct
        .get_queue_url()
        .queue_name(&lost)
        .send()
        .await
        .unwrap();
    let made = made.queue_url().unwrap().to_owned();
    delete_all(backend.as_ref(), KIND, REGION, &[&url, &made]).await;
    server.shutdown().await;
}
