//! Targeted tests of the `pubsub` module against Google's Pub/Sub emulator, found
//! through `PUBSUB_EMULATOR_HOST` (a loud skip without it, failing under `CI=true`).
//!
//! The emulator refuses every label update (400 "labels is not a known Topic field"),
//! so the labels it holds can only have come from the creating calls: reading them
//! back with the plain client proves the marker was sent there. `mark` of an unmarked
//! queue is a label update, so only its refusals and its no-op on a queue already ours
//! can be seen here; that it writes the marker is not tested against the emulator.
//!
//! Every test uses names of its own (the emulator keeps its topics while it runs).

use std::sync::Arc;

use google_cloud_pubsub::client::{SubscriptionAdmin, TopicAdmin};
use infra_core::kinds::{Queues, QueuesSettled};
use infra_core::prelude::{Handle, Partial};
use infra_core::sdk::{Backend, ErrorKind, ManualClock, Marker, Router, SettledSpec, Sighting};
use infra_testkit::conformance::fresh_prefix;
use infra_testkit::evidence::{Evidence, Record};
use infra_testkit::gcp::GcpServer;
use serde_json::{Value, json};

use super::PROJECT;
use crate::stand_in;

const KIND: &str = "queues";
const REGION: &str = "europe-west1";
const OTHER: &str = "us-central1";
const FLEET: &str = "pubsub-tests";

/// A name no earlier test run used: the tag after a fresh random prefix.
fn unique(tag: &str) -> String {
    format!("{}{tag}", fresh_prefix(&ManualClock::new()))
}

fn handle(name: &str) -> String {
    format!("projects/{PROJECT}/topics/{name}")
}

fn subscription(name: &str) -> String {
    format!("projects/{PROJECT}/subscriptions/{name}")
}

/// A spec saying nothing but what each test adds.
fn bare() -> QueuesSettled {
    QueuesSettled {
        fifo: false,
        visibility_timeout_seconds: Partial::Unknown,
        retention_seconds: Partial::Unknown,
        dead_letter: Partial::Unknown,
        max_receive_count: Partial::Unknown,
        tags: Partial::Known([("team".to_owned(), "web".to_owned())].into()),
    }
}

/// The backend on the emulator, the stand-in server it also needs, and plain clients
/// of the emulator; `None` after a loud skip.
struct Rig {
    server: GcpServer,
    backend: Arc<Router>,
    topics: TopicAdmin,
    subs: SubscriptionAdmin,
}

async fn rig() -> Option<Rig> {
    let emulator = super::pubsub_emulator()?;
    let server = stand_in().await;
    // Building the backend installs the TLS provider the plain clients need too.
    let backend = super::backend(&server, Some(&emulator));
    let creds = google_cloud_auth::credentials::anonymous::Builder::new().build();
    let topics = TopicAdmin::builder()
        .with_endpoint(&emulator)
        .with_credentials(creds.clone())
        .build()
        .await
        .expect("a plain topic client");
    let subs = SubscriptionAdmin::builder()
        .with_endpoint(&emulator)
        .with_credentials(creds)
        .build()
        .await
        .expect("a plain subscription client");
    Some(Rig {
        server,
        backend,
        topics,
        subs,
    })
}

impl Rig {
    async fn create(
        &self,
        region: &str,
        name: &str,
        spec: &QueuesSettled,
    ) -> Result<Sighting, infra_core::sdk::BackendError> {
        self.backend
            .create(
                KIND,
                region,
                name,
                SettledSpec::new::<Queues>(spec),
                &Marker::new(FLEET),
            )
            .await
            .map(|w| w.expect_done("Pub/Sub never defers"))
    }

    async fn update(
        &self,
        name: &str,
        spec: &QueuesSettled,
    ) -> Result<Sighting, infra_core::sdk::BackendError> {
        self.backend
            .update(
                KIND,
                REGION,
                &handle(name),
                SettledSpec::new::<Queues>(spec),
            )
            .await
            .map(|w| w.expect_done("Pub/Sub never defers"))
    }

    /// The topic's labels as the emulator holds them, or `None` when it has no topic.
    async fn topic_labels(&self, name: &str) -> Option<Value> {
        match self.topics.get_topic().set_topic(handle(name)).send().await {
            Ok(t) => Some(json!(t.labels)),
            Err(e) if e.http_status_code() == Some(404) => None,
            Err(e) => panic!("GetTopic {name}: {e}"),
        }
    }

    async fn subscription(&self, name: &str) -> Option<google_cloud_pubsub::model::Subscription> {
        match self
            .subs
            .get_subscription()
            .set_subscription(subscription(name))
            .send()
            .await
        {
            Ok(s) => Some(s),
            Err(e) if e.http_status_code() == Some(404) => None,
            Err(e) => panic!("GetSubscription {name}: {e}"),
        }
    }

    async fn delete(&self, name: &str) {
        self.backend
            .delete(KIND, REGION, &handle(name))
            .await
            .unwrap_or_else(|e| panic!("deleting {name}: {e}"));
    }

    /// Stops the rig, and counts the acts the test held against the emulator as
    /// `emulator` evidence of `suite`.
    async fn done(self, suite: &str, acts: &[&str]) {
        self.server.shutdown().await;
        let mut evidence = Evidence::new("gcp", Record::Emulator, suite);
        for act in acts {
            evidence.checked(KIND, act);
        }
        evidence.publish();
    }
}

#[tokio::test]
async fn create_sends_the_marker_and_the_region_in_the_creating_calls() {
    let Some(rig) = rig().await else { return };
    let name = unique("mkr");
    let spec = QueuesSettled {
        visibility_timeout_seconds: Partial::Known(30),
        ..bare()
    };
    let read = rig.create(REGION, &name, &spec).await.expect("create");
    assert_eq!(read.handle, handle(&name));
    let expected = json!({"managed-by-infra": FLEET, "infra-region": REGION, "team": "web"});
    // The emulator cannot update labels: these came with CreateTopic and
    // CreateSubscription themselves.
    assert_eq!(rig.topic_labels(&name).await, Some(expected.clone()));
    let sub = rig.subscription(&name).await.expect("the subscription");
    assert_eq!(json!(sub.labels), expected);
    assert_eq!(sub.topic, handle(&name));
    let raw = rig
        .backend
        .ownership(KIND, REGION, &handle(&name))
        .await
        .expect("ownership");
    assert_eq!(raw.get("managed-by-infra").map(String::as_str), Some(FLEET));
    assert_eq!(raw.get("infra-region").map(String::as_str), Some(REGION));
    // Read reports the marker among the tags, and leaves the bookkeeping out.
    assert_eq!(
        read.reported()["tags"],
        json!({"managed-by-infra": FLEET, "team": "web"})
    );
    let taken = rig.create(REGION, &name, &spec).await.unwrap_err();
    assert_eq!(taken.kind, ErrorKind::Conflict, "{taken}");
    rig.delete(&name).await;
    assert_eq!(rig.topic_labels(&name).await, None);
    assert!(rig.subscription(&name).await.is_none());
    rig.done(
        "pubsub-create",
        &["create", "read", "ownership", "error", "delete"],
    )
    .await;
}

#[tokio::test]
async fn what_pubsub_would_refuse_is_refused_before_any_call() {
    let Some(rig) = rig().await else { return };
    let dlq = handle(&unique("nodlq"));
    let cases: Vec<(String, QueuesSettled, &str)> = vec![
        (
            unique("ret"),
            QueuesSettled {
                retention_seconds: Partial::Known(599),
                ..bare()
            },
            "retentionSeconds",
        ),
        (
            unique("vis"),
            QueuesSettled {
                visibility_timeout_seconds: Partial::Known(5),
                ..bare()
            },
            "visibilityTimeoutSeconds",
        ),
        (
            unique("vis"),
            QueuesSettled {
                visibility_timeout_seconds: Partial::Known(700),
                ..bare()
            },
            "visibilityTimeoutSeconds",
        ),
        (
            unique("cnt"),
            QueuesSettled {
                max_receive_count: Partial::Known(4),
                ..bare()
            },
            "maxReceiveCount",
        ),
        (
            unique("cnt"),
            QueuesSettled {
                max_receive_count: Partial::Known(101),
                ..bare()
            },
            "maxReceiveCount",
        ),
        (
            unique("dlc"),
            QueuesSettled {
                dead_letter: Partial::Known(Some(Handle::new(dlq.clone()))),
                ..bare()
            },
            "maxReceiveCount",
        ),
        ("ab".to_owned(), bare(), "3 characters"),
        (format!("goog-{}", unique("q")), bare(), "goog"),
        ("9lives".to_owned(), bare(), "letter"),
    ];
    for (name, spec, says) in cases {
        let err = rig.create(REGION, &name, &spec).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid, "{name}: {err}");
        assert!(err.message.contains(says), "{name}: {err}");
        // Pub/Sub refuses even to look up the names it refuses to create.
        if name.len() >= 3
            && name.starts_with(|c: char| c.is_ascii_alphabetic())
            && !name.starts_with("goog")
        {
            assert_eq!(rig.topic_labels(&name).await, None, "{name} was created");
        }
    }
    // A dead-letter topic that does not exist is the declaration's fault, and nothing
    // is left behind.
    let name = unique("dlm");
    let spec = QueuesSettled {
        dead_letter: Partial::Known(Some(Handle::new(dlq.clone()))),
        max_receive_count: Partial::Known(5),
        ..bare()
    };
    let err = rig.create(REGION, &name, &spec).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    assert!(err.message.contains(&dlq), "{err}");
    assert_eq!(rig.topic_labels(&name).await, None);
    rig.done("pubsub-refusals", &["error"]).await;
}

#[tokio::test]
async fn a_dead_letter_queue_is_named_by_the_subscription_and_changes_in_place() {
    let Some(rig) = rig().await else { return };
    let dlq = unique("dlq");
    let name = unique("dlw");
    let made = rig.create(REGION, &dlq, &bare()).await.expect("the dlq");
    // A queue with no delivery setting is a topic alone.
    assert!(rig.subscription(&dlq).await.is_none());
    assert_eq!(made.reported().get("deadLetter"), None);
    let spec = QueuesSettled {
        visibility_timeout_seconds: Partial::Known(20),
        dead_letter: Partial::Known(Some(Handle::new(handle(&dlq)))),
        max_receive_count: Partial::Known(5),
        ..bare()
    };
    let read = rig.create(REGION, &name, &spec).await.expect("create");
    assert_eq!(read.reported()["deadLetter"], json!(handle(&dlq)));
    assert_eq!(read.reported()["maxReceiveCount"], json!(5));
    assert_eq!(read.reported()["visibilityTimeoutSeconds"], json!(20));
    assert_eq!(read.reported()["fifo"], json!(false));
    let policy = rig
        .subscription(&name)
        .await
        .and_then(|s| s.dead_letter_policy)
        .expect("a dead-letter policy");
    assert_eq!(policy.dead_letter_topic, handle(&dlq));
    assert_eq!(policy.max_delivery_attempts, 5);
    // The count alone, then the deadline, change in place.
    let spec = QueuesSettled {
        visibility_timeout_seconds: Partial::Known(40),
        max_receive_count: Partial::Known(9),
        ..spec
    };
    let read = rig.update(&name, &spec).await.expect("update");
    assert_eq!(read.reported()["maxReceiveCount"], json!(9));
    assert_eq!(read.reported()["visibilityTimeoutSeconds"], json!(40));
    // Sent twice, the same update leaves the same state.
    let again = rig.update(&name, &spec).await.expect("update again");
    assert_eq!(again.reported(), read.reported());
    // `None` removes the policy; the count is then not said.
    let none = QueuesSettled {
        dead_letter: Partial::Known(None),
        max_receive_count: Partial::Unknown,
        ..spec
    };
    let read = rig.update(&name, &none).await.expect("update");
    assert_eq!(read.reported()["deadLetter"], Value::Null);
    assert_eq!(read.reported().get("maxReceiveCount"), None);
    assert!(
        rig.subscription(&name)
            .await
            .is_some_and(|s| s.dead_letter_policy.is_none())
    );
    // Pointing it at a topic that does not exist is Invalid, and nothing of the update
    // is written, not even its retention.
    let missing = QueuesSettled {
        dead_letter: Partial::Known(Some(Handle::new(handle(&unique("gone"))))),
        max_receive_count: Partial::Known(5),
        retention_seconds: Partial::Known(7200),
        ..none.clone()
    };
    let err = rig.update(&name, &missing).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    assert!(
        rig.subscription(&name)
            .await
            .is_some_and(|s| s.dead_letter_policy.is_none())
    );
    let topic = rig
        .topics
        .get_topic()
        .set_topic(handle(&name))
        .send()
        .await
        .expect("the topic");
    assert_eq!(topic.message_retention_duration, None);
    rig.delete(&name).await;
    rig.delete(&dlq).await;
    rig.done("pubsub-dead-letter", &["create", "update", "delete"])
        .await;
}

#[tokio::test]
async fn the_subscription_is_made_only_when_a_delivery_setting_is_said() {
    let Some(rig) = rig().await else { return };
    let name = unique("sub");
    let spec = QueuesSettled {
        retention_seconds: Partial::Known(3600),
        dead_letter: Partial::Known(None),
        ..bare()
    };
    let read = rig.create(REGION, &name, &spec).await.expect("create");
    assert!(rig.subscription(&name).await.is_none());
    let reported = read.reported();
    assert_eq!(reported["retentionSeconds"], json!(3600));
    for unsaid in [
        "fifo",
        "visibilityTimeoutSeconds",
        "deadLetter",
        "maxReceiveCount",
    ] {
        assert_eq!(
            reported.get(unsaid),
            None,
            "{unsaid} is reported: {reported:?}"
        );
    }
    // Newly saying a delivery setting makes the subscription, with the topic's labels.
    let asked = QueuesSettled {
        visibility_timeout_seconds: Partial::Known(25),
        ..spec.clone()
    };
    let read = rig.update(&name, &asked).await.expect("update");
    assert_eq!(read.reported()["visibilityTimeoutSeconds"], json!(25));
    assert_eq!(read.reported()["deadLetter"], Value::Null);
    let sub = rig.subscription(&name).await.expect("the subscription");
    assert_eq!(sub.ack_deadline_seconds, 25);
    assert_eq!(
        json!(sub.labels),
        json!({"managed-by-infra": FLEET, "infra-region": REGION, "team": "web"})
    );
    // Retention changes in place on the topic.
    let longer = QueuesSettled {
        retention_seconds: Partial::Known(7200),
        ..asked
    };
    let read = rig.update(&name, &longer).await.expect("update");
    assert_eq!(read.reported()["retentionSeconds"], json!(7200));
    // No longer saying any delivery setting leaves the subscription alone.
    rig.update(&name, &spec).await.expect("update");
    assert!(rig.subscription(&name).await.is_some());
    rig.delete(&name).await;
    assert!(rig.subscription(&name).await.is_none());
    let again = rig
        .backend
        .delete(KIND, REGION, &handle(&name))
        .await
        .unwrap_err();
    assert_eq!(again.kind, ErrorKind::NotFound, "{again}");
    rig.done(
        "pubsub-subscription",
        &["create", "update", "delete", "error"],
    )
    .await;
}

#[tokio::test]
async fn a_subscription_name_taken_by_another_topic_is_conflict_and_leaves_no_topic() {
    let Some(rig) = rig().await else { return };
    let name = unique("tkn");
    let elsewhere = unique("else");
    rig.topics
        .create_topic()
        .set_name(handle(&elsewhere))
        .send()
        .await
        .expect("another tool's topic");
    rig.subs
        .create_subscription()
        .set_name(subscription(&name))
        .set_topic(handle(&elsewhere))
        .send()
        .await
        .expect("another tool's subscription");
    let spec = QueuesSettled {
        fifo: true,
        ..bare()
    };
    let err = rig.create(REGION, &name, &spec).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict, "{err}");
    assert_eq!(
        rig.topic_labels(&name).await,
        None,
        "the topic was left behind"
    );
    // The other tool's subscription is untouched.
    let theirs = rig.subscription(&name).await.expect("theirs");
    assert_eq!(theirs.topic, handle(&elsewhere));
    rig.done("pubsub-taken-subscription", &["error"]).await;
}

#[tokio::test]
async fn list_answers_each_region_its_own_topics() {
    let Some(rig) = rig().await else { return };
    let here = unique("rga");
    let there = unique("rgb");
    let unlabelled = unique("rgn");
    rig.create(REGION, &here, &bare()).await.expect("create");
    rig.create(OTHER, &there, &bare()).await.expect("create");
    rig.topics
        .create_topic()
        .set_name(handle(&unlabelled))
        .send()
        .await
        .expect("another tool's topic");
    let names = |region: &'static str| {
        let backend = rig.backend.clone();
        async move {
            backend
                .list(KIND, region)
                .await
                .expect("list")
                .into_iter()
                .map(|l| (l.name, l.handle))
                .collect::<Vec<_>>()
        }
    };
    let first = names(REGION).await;
    let second = names(OTHER).await;
    assert!(first.contains(&(here.clone(), handle(&here))), "{first:?}");
    assert!(!first.iter().any(|(n, _)| n == &there || n == &unlabelled));
    assert!(
        second.contains(&(there.clone(), handle(&there))),
        "{second:?}"
    );
    assert!(!second.iter().any(|(n, _)| n == &here || n == &unlabelled));
    // Another region's topic is absent here, for every call.
    let h = handle(&there);
    let read = rig.backend.read(KIND, REGION, &h).await.unwrap_err();
    assert_eq!(read.kind, ErrorKind::NotFound, "{read}");
    let owner = rig.backend.ownership(KIND, REGION, &h).await.unwrap_err();
    assert_eq!(owner.kind, ErrorKind::NotFound, "{owner}");
    let gone = rig.backend.delete(KIND, REGION, &h).await.unwrap_err();
    assert_eq!(gone.kind, ErrorKind::NotFound, "{gone}");
    assert!(
        rig.topic_labels(&there).await.is_some(),
        "deleted from the wrong region"
    );
    // A name is global: the same name in another region is taken.
    let taken = rig.create(OTHER, &here, &bare()).await.unwrap_err();
    assert_eq!(taken.kind, ErrorKind::Conflict, "{taken}");
    // A topic that records no region is read by its handle wherever asked.
    let read = rig
        .backend
        .read(KIND, OTHER, &handle(&unlabelled))
        .await
        .expect("read");
    assert_eq!(read.reported()["tags"], json!({}));
    rig.delete(&here).await;
    rig.backend
        .delete(KIND, OTHER, &h)
        .await
        .expect("delete in its region");
    rig.delete(&unlabelled).await;
    rig.done(
        "pubsub-regions",
        &["list", "read", "ownership", "delete", "error"],
    )
    .await;
}

#[tokio::test]
async fn mark_does_what_the_emulator_allows() {
    let Some(rig) = rig().await else { return };
    let ours = unique("mko");
    let foreign = unique("mkf");
    let plain = unique("mkp");
    let marker = Marker::new(FLEET);
    rig.create(
        REGION,
        &ours,
        &QueuesSettled {
            fifo: true,
            ..bare()
        },
    )
    .await
    .expect("create");
    // Already ours (topic and subscription): nothing is written.
    rig.backend
        .mark(KIND, REGION, &handle(&ours), &marker)
        .await
        .expect("mark of a queue already ours");
    // Another fleet's: Conflict, and nothing changes.
    rig.topics
        .create_topic()
        .set_name(handle(&foreign))
        .set_labels([("managed-by-infra", "another-fleet")])
        .send()
        .await
        .expect("another fleet's topic");
    let err = rig
        .backend
        .mark(KIND, REGION, &handle(&foreign), &marker)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict, "{err}");
    assert_eq!(
        rig.topic_labels(&foreign).await,
        Some(json!({"managed-by-infra": "another-fleet"}))
    );
    // Absent: NotFound.
    let absent = rig
        .backend
        .mark(KIND, REGION, &handle(&unique("mka")), &marker)
        .await
        .unwrap_err();
    assert_eq!(absent.kind, ErrorKind::NotFound, "{absent}");
    // Unmarked: the marker is written with a label update, which the emulator refuses
    // (a real Pub/Sub accepts it). The refusal is reported, and nothing changes.
    rig.topics
        .create_topic()
        .set_name(handle(&plain))
        .set_labels([("team", "ops")])
        .send()
        .await
        .expect("another tool's topic");
    let refused = rig
        .backend
        .mark(KIND, REGION, &handle(&plain), &marker)
        .await
        .unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Invalid, "{refused}");
    assert!(refused.message.contains("pubsub:UpdateTopic"), "{refused}");
    assert_eq!(rig.topic_labels(&plain).await, Some(json!({"team": "ops"})));
    rig.delete(&ours).await;
    rig.delete(&foreign).await;
    rig.delete(&plain).await;
    rig.done("pubsub-mark", &["mark", "error"]).await;
}

#[tokio::test]
async fn list_reads_every_page() {
    let Some(rig) = rig().await else { return };
    // A region of this test's own, with more topics than one page of the backend's.
    let region = "asia-east1";
    let prefix = unique("pg");
    let names: Vec<String> = (0..105).map(|i| format!("{prefix}{i:03}")).collect();
    for name in &names {
        rig.topics
            .create_topic()
            .set_name(handle(name))
            .set_labels([("infra-region", region)])
            .send()
            .await
            .expect("a topic");
    }
    let listed = rig.backend.list(KIND, region).await.expect("list");
    let mine = listed
        .iter()
        .filter(|l| l.name.starts_with(&prefix))
        .count();
    assert_eq!(mine, names.len(), "{} listed", listed.len());
    for name in &names {
        rig.topics
            .delete_topic()
            .set_topic(handle(name))
            .send()
            .await
            .expect("delete");
    }
    rig.done("pubsub-pages", &["list"]).await;
}
