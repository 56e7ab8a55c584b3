//! The Pub/Sub stand-in: topics and subscriptions (the admin API, not messages), as
//! `google-cloud-pubsub`'s `TopicAdmin` and `SubscriptionAdmin` call them, for the tests
//! that need what Google's Pub/Sub emulator does not serve (IAM policies, faults on
//! cue). Google's emulator stays the reference for everything else: the shapes answered
//! here are the emulator's (`pushConfig: {}`, `ackDeadlineSeconds: 10`,
//! `messageRetentionDuration: "604800s"` filled in on a subscription).
//!
//! | call | request |
//! |---|---|
//! | CreateTopic | `PUT /v1/projects/{p}/topics/{t}` |
//! | GetTopic | `GET /v1/projects/{p}/topics/{t}` |
//! | UpdateTopic | `PATCH /v1/projects/{p}/topics/{t}` (`{"topic", "updateMask"}`) |
//! | DeleteTopic | `DELETE /v1/projects/{p}/topics/{t}` |
//! | ListTopics | `GET /v1/projects/{p}/topics?pageSize=&pageToken=` |
//! | CreateSubscription | `PUT /v1/projects/{p}/subscriptions/{s}` |
//! | GetSubscription | `GET /v1/projects/{p}/subscriptions/{s}` |
//! | UpdateSubscription | `PATCH /v1/projects/{p}/subscriptions/{s}` (`{"subscription", "updateMask"}`) |
//! | DeleteSubscription | `DELETE /v1/projects/{p}/subscriptions/{s}` |
//!
//! The IAM policies of topics and subscriptions (`:getIamPolicy`, `:setIamPolicy`) are
//! `policies.rs`'s.
//!
//! Refused as Pub/Sub refuses them: a name of under 3 or over 255 characters, not
//! starting with a letter, of other characters than letters, digits and `-_.~+%`, or
//! starting with `goog` (400); a taken name (409 `ALREADY_EXISTS`); a missing topic or
//! subscription (404), and a subscription's topic or dead-letter topic that does not
//! exist (404); a topic retention outside 10 minutes to 31 days; an ack deadline
//! outside 10 to 600 s; delivery attempts outside 5 to 100; an update without a mask,
//! or naming `enableMessageOrdering` or `topic` (400); a project other than the
//! stand-in's (403). Deleting a topic detaches its subscriptions (their `topic` becomes
//! `_deleted-topic_`), as Pub/Sub does.
//!
//! Not modelled: messages, schemas, snapshots, push delivery, filters, exactly-once
//! delivery, expiration of idle subscriptions.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::State;
use super::wire::{Reply, Req, apply_mask, int64};

/// A topic's retention, in seconds.
const TOPIC_RETENTION: std::ops::RangeInclusive<i64> = 600..=2_678_400;
/// A subscription's ack deadline, in seconds.
const ACK_DEADLINE: std::ops::RangeInclusive<i64> = 10..=600;
/// A dead-letter policy's delivery attempts.
const DELIVERY_ATTEMPTS: std::ops::RangeInclusive<i64> = 5..=100;
/// What a deleted topic's subscriptions name as their topic.
const DELETED_TOPIC: &str = "_deleted-topic_";

/// What the stand-in holds of Pub/Sub.
#[derive(Debug, Default)]
pub(crate) struct PubSub {
    topics: BTreeMap<String, Stored>,
    subscriptions: BTreeMap<String, Stored>,
    serial: u64,
}

/// A topic or a subscription, and the serial of its creation (a name made again is
/// another resource).
#[derive(Debug, Clone)]
struct Stored {
    body: Value,
    serial: u64,
}

impl PubSub {
    /// The identity of the topic or subscription `name` (its creation), if it exists.
    pub(crate) fn identity(&self, name: &str) -> Option<String> {
        self.topics
            .get(name)
            .or_else(|| self.subscriptions.get(name))
            .map(|s| format!("pubsub-{}", s.serial))
    }

    /// The names of the topics that exist.
    pub(crate) fn topic_names(&self) -> Vec<String> {
        self.topics.keys().cloned().collect()
    }

    /// The names of the subscriptions that exist.
    pub(crate) fn subscription_names(&self) -> Vec<String> {
        self.subscriptions.keys().cloned().collect()
    }
}

/// Serves a Pub/Sub request, or `None` when it is not one.
pub(crate) fn route(state: &mut State, req: &Req<'_>) -> Option<Reply> {
    let parts = req.under("/v1/projects")?;
    let (project, collection, id) = match parts.as_slice() {
        [project, collection] => (*project, *collection, None),
        [project, collection, id] if !id.contains(':') => (*project, *collection, Some(*id)),
        _ => return None,
    };
    if !matches!(collection, "topics" | "subscriptions") {
        return None;
    }
    if !state.is_project(project) {
        return Some(State::foreign_project(project));
    }
    let name = id.map(|id| format!("projects/{project}/{collection}/{id}"));
    Some(match (req.method, collection, name) {
        ("GET", "topics", None) => list(&state.pubsub.topics, project, "topics", req),
        ("GET", "subscriptions", None) => {
            list(&state.pubsub.subscriptions, project, "subscriptions", req)
        }
        ("PUT", "topics", Some(name)) => create_topic(state, &name, req),
        ("GET", "topics", Some(name)) => get(&state.pubsub.topics, &name, "Topic"),
        ("PATCH", "topics", Some(name)) => update_topic(state, &name, req),
        ("DELETE", "topics", Some(name)) => delete_topic(state, &name),
        ("PUT", "subscriptions", Some(name)) => create_subscription(state, &name, req),
        ("GET", "subscriptions", Some(name)) => {
            get(&state.pubsub.subscriptions, &name, "Subscription")
        }
        ("PATCH", "subscriptions", Some(name)) => update_subscription(state, &name, req),
        ("DELETE", "subscriptions", Some(name)) => match state.pubsub.subscriptions.remove(&name) {
            Some(_) => Reply::empty(),
            None => Reply::not_found(format!("Subscription {name}")),
        },
        _ => return None,
    })
}

/// Refuses a topic or subscription id Pub/Sub refuses.
fn check_id(id: &str) -> Result<(), Reply> {
    let ok = (3..=255).contains(&id.len())
        && id.starts_with(|c: char| c.is_ascii_alphabetic())
        && !id.starts_with("goog")
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.~+%".contains(c));
    if ok {
        Ok(())
    } else {
        Err(Reply::invalid(format!(
            "Invalid resource name given (name={id}). Refer to \
             https://cloud.google.com/pubsub/docs/pubsub-basics#resource_names for more information."
        )))
    }
}

fn last_segment(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// A duration (`"600s"`, `"1.5s"`) in whole seconds, or `None`.
fn seconds(value: Option<&Value>) -> Option<i64> {
    let text = value?.as_str()?;
    let number = text.strip_suffix('s')?;
    let seconds: f64 = number.parse().ok()?;
    (seconds.fract() == 0.0 && seconds >= 0.0).then_some(seconds as i64)
}

fn get(stored: &BTreeMap<String, Stored>, name: &str, what: &str) -> Reply {
    match stored.get(name) {
        Some(s) => Reply::ok(s.body.clone()),
        None => Reply::not_found(format!("{what} {name}")),
    }
}

/// The topic fields a create or an update may carry, checked.
fn check_topic(body: &Map<String, Value>) -> Result<(), Reply> {
    if let Some(v) = body
        .get("messageRetentionDuration")
        .filter(|v| !v.is_null())
    {
        match seconds(Some(v)) {
            Some(s) if TOPIC_RETENTION.contains(&s) => {}
            _ => {
                return Err(Reply::invalid(
                    "message_retention_duration must be between 10 minutes and 31 days",
                ));
            }
        }
    }
    Ok(())
}

fn create_topic(state: &mut State, name: &str, req: &Req<'_>) -> Reply {
    if let Err(refused) = check_id(last_segment(name)) {
        return refused;
    }
    let body = req.body.as_object().cloned().unwrap_or_default();
    if let Err(refused) = check_topic(&body) {
        return refused;
    }
    if state.pubsub.topics.contains_key(name) {
        return Reply::exists(format!("Topic {name}"));
    }
    let mut topic = Map::new();
    topic.insert("name".into(), json!(name));
    for key in ["labels", "messageRetentionDuration", "kmsKeyName"] {
        if let Some(v) = body.get(key).filter(|v| !v.is_null()) {
            topic.insert(key.into(), v.clone());
        }
    }
    state.pubsub.serial += 1;
    let stored = Stored {
        body: Value::Object(topic),
        serial: state.pubsub.serial,
    };
    state.pubsub.topics.insert(name.to_owned(), stored.clone());
    Reply::ok(stored.body)
}

/// The mask of an update body, or the refusal of one without.
fn mask_of<'a>(req: &'a Req<'_>) -> Result<&'a str, Reply> {
    req.body
        .get("updateMask")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| Reply::invalid("The update_mask in the Update request must be set."))
}

fn update_topic(state: &mut State, name: &str, req: &Req<'_>) -> Reply {
    let mask = match mask_of(req) {
        Ok(m) => m,
        Err(refused) => return refused,
    };
    let patch = req.body.get("topic").cloned().unwrap_or(Value::Null);
    if let Err(refused) = check_topic(patch.as_object().unwrap_or(&Map::new())) {
        return refused;
    }
    let Some(stored) = state.pubsub.topics.get_mut(name) else {
        return Reply::not_found(format!("Topic {name}"));
    };
    apply_mask(&mut stored.body, &patch, Some(mask));
    Reply::ok(stored.body.clone())
}

fn delete_topic(state: &mut State, name: &str) -> Reply {
    if state.pubsub.topics.remove(name).is_none() {
        return Reply::not_found(format!("Topic {name}"));
    }
    for sub in state.pubsub.subscriptions.values_mut() {
        if sub.body.get("topic").and_then(Value::as_str) == Some(name) {
            sub.body["topic"] = json!(DELETED_TOPIC);
        }
    }
    Reply::empty()
}

/// `topics.list` or `subscriptions.list` (`collection`) of `project`: whole resources,
/// as a get answers them (the discovery document's list items are the get's schema).
fn list(
    stored: &BTreeMap<String, Stored>,
    project: &str,
    collection: &str,
    req: &Req<'_>,
) -> Reply {
    let size = req
        .param("pageSize")
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(100)
        .min(1000);
    let prefix = format!("projects/{project}/{collection}/");
    let start = req.param("pageToken").unwrap_or("");
    if !start.is_empty() && !start.starts_with(&prefix) {
        return Reply::invalid("The page token is not valid.");
    }
    let mut page = Vec::new();
    let mut next = None;
    for (name, item) in stored.range(start.to_owned()..) {
        if !name.starts_with(&prefix) {
            continue;
        }
        if page.len() == size {
            next = Some(name.clone());
            break;
        }
        page.push(item.body.clone());
    }
    let mut out = Value::Object(Map::from_iter([(
        collection.to_owned(),
        Value::Array(page),
    )]));
    if let Some(next) = next {
        out["nextPageToken"] = json!(next);
    }
    Reply::ok(out)
}

/// The subscription fields a create or an update may carry, checked; the topics it
/// names must exist.
fn check_subscription(state: &State, body: &Map<String, Value>) -> Result<(), Reply> {
    if let Some(v) = body.get("ackDeadlineSeconds").filter(|v| !v.is_null()) {
        match int64(Some(v)) {
            Some(0) => {}
            Some(s) if ACK_DEADLINE.contains(&s) => {}
            _ => {
                return Err(Reply::invalid(
                    "Invalid ack deadline given: it must be between 10 and 600 seconds.",
                ));
            }
        }
    }
    if let Some(policy) = body.get("deadLetterPolicy").filter(|v| !v.is_null()) {
        let topic = policy
            .get("deadLetterTopic")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !topic.is_empty() && !state.pubsub.topics.contains_key(topic) {
            return Err(Reply::not_found(format!("Dead letter topic {topic}")));
        }
        match int64(policy.get("maxDeliveryAttempts")) {
            None | Some(0) => {}
            Some(n) if DELIVERY_ATTEMPTS.contains(&n) => {}
            Some(_) => {
                return Err(Reply::invalid(
                    "max_delivery_attempts must be between 5 and 100.",
                ));
            }
        }
    }
    Ok(())
}

fn create_subscription(state: &mut State, name: &str, req: &Req<'_>) -> Reply {
    if let Err(refused) = check_id(last_segment(name)) {
        return refused;
    }
    let body = req.body.as_object().cloned().unwrap_or_default();
    let topic = body.get("topic").and_then(Value::as_str).unwrap_or("");
    if topic.is_empty() {
        return Reply::invalid("Subscription.topic is required.");
    }
    if !state.pubsub.topics.contains_key(topic) {
        return Reply::not_found(format!("Topic {topic}"));
    }
    if let Err(refused) = check_subscription(state, &body) {
        return refused;
    }
    if state.pubsub.subscriptions.contains_key(name) {
        return Reply::exists(format!("Subscription {name}"));
    }
    let mut sub = body;
    sub.insert("name".into(), json!(name));
    sub.entry("pushConfig").or_insert_with(|| json!({}));
    if matches!(int64(sub.get("ackDeadlineSeconds")), None | Some(0)) {
        sub.insert("ackDeadlineSeconds".into(), json!(10));
    }
    sub.entry("messageRetentionDuration")
        .or_insert_with(|| json!("604800s"));
    if let Some(policy) = sub
        .get_mut("deadLetterPolicy")
        .and_then(Value::as_object_mut)
        && matches!(int64(policy.get("maxDeliveryAttempts")), None | Some(0))
    {
        policy.insert("maxDeliveryAttempts".into(), json!(5));
    }
    if sub.get("enableMessageOrdering") == Some(&json!(false)) {
        sub.remove("enableMessageOrdering");
    }
    state.pubsub.serial += 1;
    let stored = Stored {
        body: Value::Object(sub),
        serial: state.pubsub.serial,
    };
    state
        .pubsub
        .subscriptions
        .insert(name.to_owned(), stored.clone());
    Reply::ok(stored.body)
}

fn update_subscription(state: &mut State, name: &str, req: &Req<'_>) -> Reply {
    let mask = match mask_of(req) {
        Ok(m) => m,
        Err(refused) => return refused,
    };
    let fixed = mask.split(',').map(str::trim).any(|p| {
        matches!(
            p,
            "enable_message_ordering" | "enableMessageOrdering" | "topic" | "name"
        )
    });
    if fixed {
        return Reply::invalid(format!(
            "Invalid update_mask provided in the UpdateSubscriptionRequest: {mask} names a \
             field that cannot be updated"
        ));
    }
    let patch = req.body.get("subscription").cloned().unwrap_or(Value::Null);
    if let Err(refused) = check_subscription(state, patch.as_object().unwrap_or(&Map::new())) {
        return refused;
    }
    let Some(stored) = state.pubsub.subscriptions.get_mut(name) else {
        return Reply::not_found(format!("Subscription {name}"));
    };
    apply_mask(&mut stored.body, &patch, Some(mask));
    if matches!(int64(stored.body.get("ackDeadlineSeconds")), None | Some(0)) {
        stored.body["ackDeadlineSeconds"] = json!(10);
    }
    Reply::ok(stored.body.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_durations_are_read_as_pubsub_reads_them() {
        assert!(check_id("orders").is_ok());
        for bad in ["ab", "1abc", "goog-x", "a b c", &"a".repeat(256)] {
            assert!(check_id(bad).is_err(), "{bad}");
        }
        assert_eq!(seconds(Some(&json!("600s"))), Some(600));
        assert_eq!(seconds(Some(&json!("1.5s"))), None);
        assert_eq!(seconds(Some(&json!(600))), None);
    }
}
