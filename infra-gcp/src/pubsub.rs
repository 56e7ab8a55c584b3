//! The `queues` kind: a Pub/Sub topic, and a subscription of the same name where the
//! declaration asks for delivery.
//!
//! **What a queue is.** A queue declared `orders` is the topic `orders` and, **where
//! the declaration asks for one**, the subscription `orders` attached to it. It asks
//! for one when it says any delivery setting: `fifo: true`, `visibilityTimeoutSeconds`,
//! `deadLetter: Some(..)` or `maxReceiveCount`. A queue declaring none of them is a
//! topic alone, and **a topic without a subscription delivers nothing to anyone**:
//! messages published to it are dropped until some subscription exists (subscriptions
//! made outside this tool are left alone). An update that newly says a delivery setting
//! creates the subscription; one that stops saying them leaves it as it is.
//!
//! **Handle.** The topic's resource name, `projects/{project}/topics/{name}`; the
//! observed `arn` is the same name. The subscription is
//! `projects/{project}/subscriptions/{name}`. A subscription of that name attached to
//! another topic (or detached, its topic deleted) is not this queue's: reads ignore it,
//! and creating this queue's own is then `Conflict`.
//!
//! **Marker and regions.** Topics are global. The region a queue is declared in is
//! recorded in its `infra-region` label, written with the ownership marker and the
//! declared labels by `CreateTopic` itself; `CreateSubscription` carries the same
//! labels. `list` answers the topics (every page) labelled with the region asked about;
//! a topic labelled with another region is `NotFound` in this one (read, update,
//! delete, ownership, mark). A topic with no `infra-region` label (made outside this
//! tool) is in no region's list, and is read by its handle wherever asked; `mark`
//! writes the region asked about with the marker, so that it is listed from then on.
//! Topic names are global all the same: one name in two regions is `Conflict`.
//!
//! **Fields.**
//! - `retentionSeconds` → the topic's `messageRetentionDuration`. Pub/Sub keeps a
//!   topic's messages 600 s to 31 days: below 600 is refused as `Invalid` before any
//!   call (the portable range starts at 60).
//! - `fifo` → the subscription's `enableMessageOrdering`, set at creation only (a
//!   change is a replace).
//! - `visibilityTimeoutSeconds` → the subscription's `ackDeadlineSeconds`, 10..=600;
//!   anything else is refused before calling.
//! - `deadLetter` → `deadLetterPolicy.deadLetterTopic`: the handle of the other queue
//!   (a topic name). It must exist: it is looked up first, and a missing one is
//!   `Invalid` (never `NotFound` of this queue). `deadLetter: None` removes the policy.
//! - `maxReceiveCount` → `deadLetterPolicy.maxDeliveryAttempts`, 5..=100; anything else
//!   is refused before calling. A `deadLetter` without a `maxReceiveCount` is `Invalid`
//!   (as on SQS); a `maxReceiveCount` without a `deadLetter` makes the subscription but
//!   has nothing to apply to, and changes an existing policy's count only.
//! - `tags` → the labels of the topic and of the subscription.
//!
//! **Dead letters that work.** Dead-lettering on Google Cloud also needs the project's
//! Pub/Sub service agent to hold `roles/pubsub.publisher` on the dead-letter topic and
//! `roles/pubsub.subscriber` on this subscription (`dead_letter.rs`). Whenever a
//! write declares a dead letter, both are granted (idempotently): the topic's before
//! anything is created or written, so that a queue whose grants cannot be made is
//! refused with the reason and nothing made; the subscription's as soon as it exists
//! (before its policy changes, on an update). A create whose subscription grant fails
//! deletes what it made, as for a refused subscription.
//!
//! **Writes.** An update reads the topic and the subscription, refuses what it must
//! (ranges, a missing dead-letter topic, a changed `enableMessageOrdering`) before
//! writing anything, then sends only what differs from what Pub/Sub holds, each with
//! its update mask: the topic's retention, the subscription's deadline and policy (one
//! call), or the new subscription; labels last (the subscription's, then the topic's),
//! and only when they change. A create whose subscription is refused
//! deletes the topic it has just made, so that a failed create leaves nothing behind.
//! Delete removes the subscription (if it is this queue's) and then the topic: the
//! other way round would leave the subscription detached and alive.
//!
//! What read reports when Pub/Sub does not say:
//! - `retentionSeconds`: the topic's `messageRetentionDuration`; a topic without one
//!   (Pub/Sub then keeps no messages on the topic), or with one that is not a whole
//!   number of seconds, is `Unknown`.
//! - `fifo`: the subscription's `enableMessageOrdering` (absent on the wire is the
//!   truth `false`); no subscription of this queue is `Unknown`.
//! - `visibilityTimeoutSeconds`: the subscription's `ackDeadlineSeconds`; no
//!   subscription, or a deadline of 0, is `Unknown`.
//! - `deadLetter`: no subscription is `Unknown`; a subscription without a dead-letter
//!   policy (or with one naming no topic) is the truth `None`; a policy is reported as
//!   the topic name it names, even when that topic has since been deleted (the handle a
//!   re-created topic of that name gets is the same).
//! - `maxReceiveCount`: the policy's `maxDeliveryAttempts`; no subscription, no policy,
//!   or an attempt count of 0, is `Unknown` (never `0`).
//! - `tags`: the topic's labels, the truth even when empty, less `infra-region`
//!   (bookkeeping); the marker is included and the engine strips it. The
//!   subscription's labels are not reported.

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::sync::Arc;

use async_trait::async_trait;
use google_cloud_gax::options::RequestOptionsBuilder as _;
use google_cloud_gax::paginator::Paginator as _;
use google_cloud_pubsub::model::{DeadLetterPolicy, Subscription, Topic};
use google_cloud_wkt::{Duration as WireDuration, FieldMask};
use infra_core::kinds::{Queues, QueuesObserved, QueuesReported, QueuesSettled};
use infra_core::prelude::{Handle, Partial};
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, ErrorKind, KindBackend, ListArgs, Listed, MarkArgs,
    OwnershipArgs, RawTags, ReadArgs, Reading, UpdateArgs, Written,
};

use crate::clients::Clients;
use crate::error::{NOT_FOUND, classify};
use crate::labels::{self, REGION_LABEL};
use crate::poll::settle_uncertain;

mod dead_letter;

/// Topics asked for per page of `ListTopics` (every page is read).
const LIST_PAGE: i32 = 100;
/// The seconds a topic may keep messages: 10 minutes to 31 days.
const TOPIC_RETENTION: RangeInclusive<u32> = 600..=2_678_400;
/// A subscription's acknowledgement deadline, in seconds.
const ACK_DEADLINE: RangeInclusive<u32> = 10..=600;
/// A dead-letter policy's delivery attempts.
const DELIVERY_ATTEMPTS: RangeInclusive<u32> = 5..=100;

/// The resource name of the topic `name` of `project`: a queue's handle.
fn topic_name(project: &str, name: &str) -> String {
    format!("projects/{project}/topics/{name}")
}

/// The project and the short name of a topic's resource name, or `None` when it is not
/// of the form `projects/{project}/topics/{name}`.
fn topic_parts(handle: &str) -> Option<(&str, &str)> {
    let rest = handle.strip_prefix("projects/")?;
    let (project, name) = rest.split_once("/topics/")?;
    if project.is_empty() || project.contains('/') || name.is_empty() || name.contains('/') {
        return None;
    }
    Some((project, name))
}

/// The short name a topic's resource name ends with.
fn short_name(topic: &str) -> &str {
    topic.rsplit('/').next().unwrap_or(topic)
}

/// The subscription of the queue whose handle is `handle`.
fn subscription_of(handle: &str) -> Result<String, BackendError> {
    match topic_parts(handle) {
        Some((project, name)) => Ok(format!("projects/{project}/subscriptions/{name}")),
        None => Err(BackendError::invalid(format!(
            "`{handle}` is not a Pub/Sub topic name (projects/{{project}}/topics/{{name}})"
        ))),
    }
}

/// Refuses a queue name Pub/Sub would refuse for a topic or subscription: the
/// portable rule allows 1 to 80 letters, digits, `-` and `_`; Pub/Sub wants at least
/// 3 characters, a letter first, and no `goog` prefix.
fn check_name(name: &str) -> Result<(), BackendError> {
    let problem = if name.len() < 3 {
        Some("is shorter than 3 characters")
    } else if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        Some("does not start with a letter")
    } else if name.starts_with("goog") {
        Some("starts with `goog`, which Google reserves")
    } else {
        None
    };
    match problem {
        Some(problem) => Err(BackendError::invalid(format!(
            "queue name `{name}` {problem}: a Pub/Sub topic name is 3 to 255 characters, \
             starting with a letter and not with `goog`"
        ))),
        None => Ok(()),
    }
}

fn out_of(field: &str, value: u32, wire: &str, range: &RangeInclusive<u32>) -> BackendError {
    BackendError::invalid(format!(
        "{field} {value} is outside what Pub/Sub accepts for {wire} ({}..={})",
        range.start(),
        range.end()
    ))
}

/// Refuses what Pub/Sub would refuse of a settled spec, before any call.
fn check_spec(spec: &QueuesSettled) -> Result<(), BackendError> {
    if let Some(&v) = spec.retention_seconds.known()
        && !TOPIC_RETENTION.contains(&v)
    {
        return Err(out_of(
            "retentionSeconds",
            v,
            "a topic's messageRetentionDuration",
            &TOPIC_RETENTION,
        ));
    }
    if let Some(&v) = spec.visibility_timeout_seconds.known()
        && !ACK_DEADLINE.contains(&v)
    {
        return Err(out_of(
            "visibilityTimeoutSeconds",
            v,
            "a subscription's ackDeadlineSeconds",
            &ACK_DEADLINE,
        ));
    }
    if let Some(&v) = spec.max_receive_count.known()
        && !DELIVERY_ATTEMPTS.contains(&v)
    {
        return Err(out_of(
            "maxReceiveCount",
            v,
            "deadLetterPolicy.maxDeliveryAttempts",
            &DELIVERY_ATTEMPTS,
        ));
    }
    if let Some(Some(target)) = spec.dead_letter.known() {
        if spec.max_receive_count.is_unknown() {
            return Err(BackendError::invalid(
                "a queue's deadLetter needs a maxReceiveCount (the portable kind has no \
                 default for it)",
            ));
        }
        if topic_parts(target.as_str()).is_none() {
            return Err(BackendError::invalid(format!(
                "deadLetter `{}` is not a Pub/Sub topic name (projects/{{project}}/topics/{{name}})",
                target.as_str()
            )));
        }
    }
    Ok(())
}

/// Whether a spec says a delivery setting, and so asks for a subscription.
/// The dead-letter topic the declaration names, if it names one.
fn declared_dead_letter(spec: &QueuesSettled) -> Option<&str> {
    spec.dead_letter
        .known()
        .and_then(Option::as_ref)
        .map(Handle::as_str)
}

fn wants_subscription(spec: &QueuesSettled) -> bool {
    spec.fifo
        || !spec.visibility_timeout_seconds.is_unknown()
        || matches!(spec.dead_letter.known(), Some(Some(_)))
        || !spec.max_receive_count.is_unknown()
}

/// The dead-letter policy a new subscription gets.
fn new_policy(spec: &QueuesSettled) -> Option<DeadLetterPolicy> {
    match (spec.dead_letter.known(), spec.max_receive_count.known()) {
        (Some(Some(target)), Some(&count)) => Some(policy(target.as_str(), count)),
        _ => None,
    }
}

fn policy(topic: &str, count: u32) -> DeadLetterPolicy {
    DeadLetterPolicy::new()
        .set_dead_letter_topic(topic)
        .set_max_delivery_attempts(i32::try_from(count).unwrap_or(i32::MAX))
}

/// What an update writes of the dead-letter policy, given the one in force: `None` to
/// leave it, `Some(None)` to remove it, `Some(Some(p))` to write `p`.
fn policy_change(
    spec: &QueuesSettled,
    current: Option<&DeadLetterPolicy>,
) -> Option<Option<DeadLetterPolicy>> {
    let current = current.filter(|p| !p.dead_letter_topic.is_empty());
    let want = match spec.dead_letter.known() {
        None => match (current, spec.max_receive_count.known()) {
            // Only the count is said: it applies to the policy in force.
            (Some(cur), Some(&count)) => Some(policy(&cur.dead_letter_topic, count)),
            _ => return None,
        },
        Some(None) => None,
        Some(Some(target)) => Some(policy(
            target.as_str(),
            spec.max_receive_count.known().copied().unwrap_or(0),
        )),
    };
    let same = match (&want, current) {
        (None, None) => true,
        (Some(w), Some(c)) => {
            w.dead_letter_topic == c.dead_letter_topic
                && w.max_delivery_attempts == c.max_delivery_attempts
        }
        _ => false,
    };
    (!same).then_some(want)
}

/// A retention of `seconds`, on the wire.
fn retention(seconds: u32) -> WireDuration {
    WireDuration::clamp(i64::from(seconds), 0)
}

/// Whole seconds of a duration Pub/Sub answered; anything else is `Unknown`.
fn seconds_of(d: Option<&WireDuration>) -> Partial<u32> {
    match d {
        Some(d) if d.nanos() == 0 => {
            u32::try_from(d.seconds()).map_or(Partial::Unknown, Partial::Known)
        }
        _ => Partial::Unknown,
    }
}

/// Whether a topic belongs to `region`: its `infra-region` label names it, or it has
/// none (made outside this tool, it is read wherever asked).
fn in_region(labels: &HashMap<String, String>, region: &str) -> bool {
    labels.get(REGION_LABEL).is_none_or(|r| r == region)
}

/// What Pub/Sub says of a queue, as the kind's reported configuration.
fn reported(topic: &Topic, sub: Option<&Subscription>) -> QueuesReported {
    let tags = Partial::Known(labels::reported(&labels::from_map(&topic.labels)));
    let retention_seconds = seconds_of(topic.message_retention_duration.as_ref());
    let Some(sub) = sub else {
        return QueuesReported {
            fifo: Partial::Unknown,
            visibility_timeout_seconds: Partial::Unknown,
            retention_seconds,
            dead_letter: Partial::Unknown,
            max_receive_count: Partial::Unknown,
            tags,
        };
    };
    let visibility_timeout_seconds = match u32::try_from(sub.ack_deadline_seconds) {
        Ok(s) if s > 0 => Partial::Known(s),
        _ => Partial::Unknown,
    };
    let (dead_letter, max_receive_count) = match sub
        .dead_letter_policy
        .as_ref()
        .filter(|p| !p.dead_letter_topic.is_empty())
    {
        None => (Partial::Known(None), Partial::Unknown),
        Some(p) => (
            Partial::Known(Some(Handle::new(p.dead_letter_topic.clone()))),
            match u32::try_from(p.max_delivery_attempts) {
                Ok(n) if n > 0 => Partial::Known(n),
                _ => Partial::Unknown,
            },
        ),
    };
    QueuesReported {
        fifo: Partial::Known(sub.enable_message_ordering),
        visibility_timeout_seconds,
        retention_seconds,
        dead_letter,
        max_receive_count,
        tags,
    }
}

/// A read of the queue `handle` from its topic and subscription.
fn reading(handle: &str, topic: &Topic, sub: Option<&Subscription>) -> Reading<Queues> {
    let arn = if topic.name.is_empty() {
        handle.to_owned()
    } else {
        topic.name.clone()
    };
    Reading::new(
        handle,
        QueuesObserved {
            id: handle.to_owned(),
            arn: Partial::Known(arn),
        },
        reported(topic, sub),
    )
    .with_raw_tags(labels::from_map(&topic.labels))
}

/// `sub`, when it is the subscription of the queue `handle`: attached to its topic. One
/// of another topic, or detached (`_deleted-topic_`), is not this queue's.
fn own_subscription(handle: &str, sub: Subscription) -> Option<Subscription> {
    (sub.topic == handle).then_some(sub)
}

/// The subscription a create (or an update that newly asks for one) makes.
fn new_subscription(handle: &str, spec: &QueuesSettled, labels: &RawTags) -> Subscription {
    let name = subscription_of(handle).unwrap_or_default();
    let mut sub = Subscription::new()
        .set_name(name)
        .set_topic(handle)
        .set_labels(labels.clone())
        .set_enable_message_ordering(spec.fifo)
        .set_or_clear_dead_letter_policy(new_policy(spec));
    if let Some(&v) = spec.visibility_timeout_seconds.known() {
        sub = sub.set_ack_deadline_seconds(i32::try_from(v).unwrap_or(i32::MAX));
    }
    sub
}

/// What an update writes to a queue's existing subscription.
#[derive(Debug)]
struct SubscriptionChanges {
    /// The fields to write, named by `paths`.
    patch: Subscription,
    /// The update mask of `patch` (empty: nothing to write).
    paths: Vec<&'static str>,
    /// The labels to write, when they change.
    labels: Option<RawTags>,
    /// The dead-letter topic a policy written names, to be checked first.
    dead_letter: Option<String>,
}

/// What bringing the subscription `sub` to `spec` writes; `Invalid` when the spec
/// changes what Pub/Sub sets at creation only.
fn subscription_changes(
    spec: &QueuesSettled,
    sub: &Subscription,
) -> Result<SubscriptionChanges, BackendError> {
    if sub.enable_message_ordering != spec.fifo {
        return Err(BackendError::invalid(format!(
            "subscription {} has enableMessageOrdering {}, which Pub/Sub sets at creation \
             only: changing fifo is a replace",
            sub.name, sub.enable_message_ordering
        )));
    }
    let mut patch = Subscription::new().set_name(sub.name.clone());
    let mut paths = Vec::new();
    let mut dead_letter = None;
    if let Some(&v) = spec.visibility_timeout_seconds.known()
        && i64::from(sub.ack_deadline_seconds) != i64::from(v)
    {
        patch = patch.set_ack_deadline_seconds(i32::try_from(v).unwrap_or(i32::MAX));
        paths.push("ack_deadline_seconds");
    }
    if let Some(change) = policy_change(spec, sub.dead_letter_policy.as_ref()) {
        dead_letter = change.as_ref().map(|p| p.dead_letter_topic.clone());
        patch = patch.set_or_clear_dead_letter_policy(change);
        paths.push("dead_letter_policy");
    }
    let labels = match spec.tags.known() {
        Some(declared) => {
            let current = labels::from_map(&sub.labels);
            Some(labels::for_update(declared, &current)?).filter(|want| *want != current)
        }
        None => None,
    };
    Ok(SubscriptionChanges {
        patch,
        paths,
        labels,
        dead_letter,
    })
}

fn mask<const N: usize>(paths: [&str; N]) -> FieldMask {
    FieldMask::default().set_paths(paths)
}

fn as_not_found(e: BackendError) -> Result<(), BackendError> {
    if e.kind == ErrorKind::NotFound {
        Ok(())
    } else {
        Err(e)
    }
}

/// `Queues` on Google Cloud: a Pub/Sub topic, with a subscription of the same name
/// where the declaration asks for delivery.
pub(crate) struct Topics {
    clients: Arc<Clients>,
}

impl Topics {
    /// The kind, reaching Google Cloud through `clients`.
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        Topics { clients }
    }

    /// The topic `handle`, whatever its region.
    async fn get_topic(&self, handle: &str) -> Result<Topic, BackendError> {
        if topic_parts(handle).is_none() {
            return Err(BackendError::invalid(format!(
                "`{handle}` is not a Pub/Sub topic name (projects/{{project}}/topics/{{name}})"
            )));
        }
        self.clients
            .topics()
            .await?
            .get_topic()
            .set_topic(handle)
            .send()
            .await
            .map_err(|e| classify("pubsub:GetTopic", e, NOT_FOUND))
    }

    /// The topic `handle` of `region`: one recorded in another region is `NotFound`.
    async fn topic(&self, region: &str, handle: &str) -> Result<Topic, BackendError> {
        let topic = self.get_topic(handle).await?;
        if !in_region(&topic.labels, region) {
            let recorded = topic.labels.get(REGION_LABEL).cloned().unwrap_or_default();
            return Err(BackendError::new(
                ErrorKind::NotFound,
                format!(
                    "pubsub topic {handle} belongs to region {recorded} (its {REGION_LABEL} \
                     label), not {region}"
                ),
            )
            .with_code("NOT_FOUND"));
        }
        Ok(topic)
    }

    /// The subscription of the queue `handle`, if there is one attached to its topic.
    async fn subscription(&self, handle: &str) -> Result<Option<Subscription>, BackendError> {
        let name = subscription_of(handle)?;
        match self
            .clients
            .subscriptions()
            .await?
            .get_subscription()
            .set_subscription(&name)
            .send()
            .await
        {
            Ok(sub) => Ok(own_subscription(handle, sub)),
            Err(e) => match classify("pubsub:GetSubscription", e, NOT_FOUND) {
                e if e.kind == ErrorKind::NotFound => Ok(None),
                e => Err(e),
            },
        }
    }

    /// Refuses a dead-letter topic that does not exist, as `Invalid`.
    async fn check_dead_letter(&self, target: &str) -> Result<(), BackendError> {
        match self.get_topic(target).await {
            Ok(_) => Ok(()),
            Err(e) if e.kind == ErrorKind::NotFound => Err(BackendError::invalid(format!(
                "the dead-letter topic {target} does not exist: {}",
                e.message
            ))),
            Err(e) => Err(e),
        }
    }

    /// Creates `sub`. An outcome that is unknown is settled by looking for it by name:
    /// found attached to this queue's topic with the labels sent, the create happened;
    /// found otherwise, the name is someone else's (`Conflict`); not found, the error
    /// stands, still "may have been sent".
    async fn create_subscription(&self, sub: Subscription) -> Result<Subscription, BackendError> {
        let name = sub.name.clone();
        let handle = sub.topic.clone();
        let sent = labels::from_map(&sub.labels);
        let err = match self
            .clients
            .subscriptions()
            .await?
            .create_subscription()
            .with_request(sub)
            // A `PUT`, not idempotent all the same (see `CreateTopic`).
            .with_idempotency(false)
            .send()
            .await
        {
            Ok(sub) => return Ok(sub),
            // A 404 here is the topic or the dead-letter topic missing: Invalid.
            Err(e) => classify("pubsub:CreateSubscription", e, &[]),
        };
        if !err.may_have_been_sent {
            return Err(err);
        }
        match self.subscription(&handle).await {
            Ok(Some(found)) if labels::from_map(&found.labels) == sent => Ok(found),
            Ok(Some(_)) => Err(BackendError::new(
                ErrorKind::Conflict,
                format!(
                    "pubsub:CreateSubscription of {name}: the outcome was unknown ({}), and the \
                     subscription now there does not carry the labels sent",
                    err.message
                ),
            )),
            Ok(None) => Err(err),
            Err(lookup) => Err(BackendError {
                message: format!(
                    "{}; looking for it by name failed too: {}",
                    err.message, lookup.message
                ),
                ..err
            }),
        }
    }

    async fn update_topic(&self, topic: Topic, paths: FieldMask) -> Result<(), BackendError> {
        self.clients
            .topics()
            .await?
            .update_topic()
            .set_topic(topic)
            .set_update_mask(paths)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| classify("pubsub:UpdateTopic", e, NOT_FOUND))
    }

    async fn update_subscription(
        &self,
        sub: Subscription,
        paths: FieldMask,
    ) -> Result<(), BackendError> {
        // The subscription is not the queue's handle: its 404 is never the queue gone
        // (a dead-letter topic missing answers 404 too), so it is not `NotFound`.
        self.clients
            .subscriptions()
            .await?
            .update_subscription()
            .set_subscription(sub)
            .set_update_mask(paths)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| classify("pubsub:UpdateSubscription", e, &[]))
    }

    /// Deletes the subscription `name`; gone already is what was wanted.
    async fn delete_subscription(&self, name: &str) -> Result<(), BackendError> {
        self.clients
            .subscriptions()
            .await?
            .delete_subscription()
            .set_subscription(name)
            .send()
            .await
            .map_err(|e| classify("pubsub:DeleteSubscription", e, NOT_FOUND))
            .or_else(as_not_found)
    }

    /// Grants the Pub/Sub service agent `roles/pubsub.subscriber` on the subscription
    /// `name`, for its dead letter.
    async fn grant_subscriber(&self, name: &str) -> Result<(), BackendError> {
        dead_letter::grant(&self.clients, name, dead_letter::SUBSCRIBER)
            .await
            .map(drop)
    }

    async fn delete_topic(&self, handle: &str) -> Result<(), BackendError> {
        self.clients
            .topics()
            .await?
            .delete_topic()
            .set_topic(handle)
            .send()
            .await
            .map_err(|e| classify("pubsub:DeleteTopic", e, NOT_FOUND))
    }

    /// Writes `changes` to the subscription `name`: deadline and dead-letter policy in
    /// one update, then its labels.
    async fn write_subscription(
        &self,
        name: &str,
        changes: SubscriptionChanges,
    ) -> Result<(), BackendError> {
        if !changes.paths.is_empty() {
            self.update_subscription(changes.patch, FieldMask::default().set_paths(changes.paths))
                .await?;
        }
        if let Some(all) = changes.labels {
            let patch = Subscription::new().set_name(name).set_labels(all);
            self.update_subscription(patch, mask(["labels"])).await?;
        }
        Ok(())
    }
}

/// Pub/Sub's listings, each read page by page.
impl Topics {
    /// Every topic of the project (`ListTopics`).
    async fn all_topics(&self) -> Result<Vec<Topic>, BackendError> {
        let mut pages = self
            .clients
            .topics()
            .await?
            .list_topics()
            .set_project(format!("projects/{}", self.clients.project()))
            .set_page_size(LIST_PAGE)
            .by_page();
        let mut topics = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| classify("pubsub:ListTopics", e, &[]))?;
            topics.extend(page.topics);
        }
        Ok(topics)
    }

    /// Every subscription of the project (`ListSubscriptions`), by resource name.
    async fn all_subscriptions(&self) -> Result<HashMap<String, Subscription>, BackendError> {
        let mut pages = self
            .clients
            .subscriptions()
            .await?
            .list_subscriptions()
            .set_project(format!("projects/{}", self.clients.project()))
            .set_page_size(LIST_PAGE)
            .by_page();
        let mut subscriptions = HashMap::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| classify("pubsub:ListSubscriptions", e, &[]))?;
            for sub in page.subscriptions {
                subscriptions.insert(sub.name.clone(), sub);
            }
        }
        Ok(subscriptions)
    }
}

#[async_trait]
impl KindBackend<Queues> for Topics {
    /// A queue's read is its topic and the subscription of the same name, and
    /// `ListTopics` and `ListSubscriptions` answer whole `Topic` and `Subscription`
    /// resources, as `GetTopic` and `GetSubscription` do (the same schemas in Google's
    /// discovery document): the two listings, joined as a read joins the two gets,
    /// hand each queue over with its read, for two listings in all instead of two
    /// gets a queue.
    fn lists_complete(&self) -> bool {
        true
    }

    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let topics: Vec<Topic> = self
            .all_topics()
            .await?
            .into_iter()
            // Listed only where its label says: one without it (made outside this
            // tool) is read wherever asked, but listed nowhere.
            .filter(|t| t.labels.get(REGION_LABEL).map(String::as_str) == Some(region))
            .collect();
        if topics.is_empty() {
            return Ok(Vec::new());
        }
        let mut subscriptions = self.all_subscriptions().await?;
        let mut listed = Vec::with_capacity(topics.len());
        for topic in topics {
            let sub = subscription_of(&topic.name)
                .ok()
                .and_then(|name| subscriptions.remove(&name))
                .and_then(|sub| own_subscription(&topic.name, sub));
            let read = reading(&topic.name, &topic, sub.as_ref());
            listed.push(
                Listed::new(short_name(&topic.name).to_owned(), topic.name.clone())
                    .with_reading(read),
            );
        }
        Ok(listed)
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<Queues>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let topic = self.topic(region, handle).await?;
        let sub = self.subscription(handle).await?;
        Ok(reading(handle, &topic, sub.as_ref()))
    }

    async fn create(
        &self,
        args: CreateArgs<'_, Queues>,
    ) -> Result<Written<Reading<Queues>>, BackendError> {
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = args;
        check_name(name)?;
        check_spec(spec)?;
        let labels = labels::for_create(spec.tags.known(), marker, &[(REGION_LABEL, region)])?;
        let handle = topic_name(self.clients.project(), name);
        let dead_letter_topic = declared_dead_letter(spec);
        if let Some(target) = dead_letter_topic {
            self.check_dead_letter(target).await?;
            dead_letter::grant(&self.clients, target, dead_letter::PUBLISHER).await?;
        }
        let topics = self.clients.topics().await?;
        // `CreateTopic` is a `PUT`, which gax takes for idempotent: it is not (a second
        // one answers `ALREADY_EXISTS` and hides that the first succeeded), so it is
        // repeated only when it certainly did nothing.
        let topic = match topics
            .create_topic()
            .with_idempotency(false)
            .set_name(&handle)
            .set_labels(labels.clone())
            .set_or_clear_message_retention_duration(
                spec.retention_seconds.known().map(|s| retention(*s)),
            )
            .send()
            .await
        {
            Ok(topic) => topic,
            Err(e) => {
                let err = classify("pubsub:CreateTopic", e, &[]);
                settle_uncertain(
                    err,
                    marker,
                    &format!("pubsub:CreateTopic of {handle}"),
                    async {
                        match self.get_topic(&handle).await {
                            Ok(t) => Ok(Some((labels::from_map(&t.labels), t))),
                            Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
                            Err(e) => Err(e),
                        }
                    },
                )
                .await?
            }
        };
        let sub = if wants_subscription(spec) {
            let created = match self
                .create_subscription(new_subscription(&handle, spec, &labels))
                .await
            {
                Ok(sub) if dead_letter_topic.is_some() => self
                    .grant_subscriber(&sub.name)
                    .await
                    .map(|()| sub)
                    .map_err(|e| (e, true)),
                Ok(sub) => Ok(sub),
                Err(e) => Err((e, false)),
            };
            match created {
                Ok(sub) => Some(sub),
                // The subscription's outcome is unknown: it is looked for on the next
                // apply, by name.
                Err((e, false)) if e.may_have_been_sent => return Err(e),
                // Refused, or made without the grant its dead letter needs: what was made
                // a moment ago goes again, so that a failed create leaves nothing behind.
                Err((e, made)) => {
                    let undone = if made {
                        self.delete_subscription(&subscription_of(&handle)?).await
                    } else {
                        Ok(())
                    };
                    let undone = match undone {
                        Ok(()) => self.delete_topic(&handle).await,
                        Err(e) => Err(e),
                    };
                    return Err(match undone {
                        Ok(()) => e,
                        Err(rollback) => BackendError {
                            message: format!(
                                "{}; what was created just before under {handle} could not be \
                                 deleted again: {}",
                                e.message, rollback.message
                            ),
                            ..e
                        },
                    });
                }
            }
        } else {
            None
        };
        let read = match self.read(ReadArgs::new(region, &handle)).await {
            Ok(read) => read,
            // Not visible yet: answer from what the creates returned.
            Err(e) if e.kind == ErrorKind::NotFound => reading(&handle, &topic, sub.as_ref()),
            Err(e) => return Err(e),
        };
        Ok(Written::Done(read))
    }

    async fn update(
        &self,
        args: UpdateArgs<'_, Queues>,
    ) -> Result<Written<Reading<Queues>>, BackendError> {
        let UpdateArgs {
            region,
            handle,
            spec,
            ..
        } = args;
        check_spec(spec)?;
        let topic = self.topic(region, handle).await?;
        let current = labels::from_map(&topic.labels);
        let want = match spec.tags.known() {
            Some(declared) => labels::for_update(declared, &current)?,
            None => current.clone(),
        };
        let sub = self.subscription(handle).await?;
        // Whatever is refused is refused before anything is written.
        let (changes, dead_letter) = match &sub {
            Some(sub) => {
                let changes = subscription_changes(spec, sub)?;
                let target = changes.dead_letter.clone();
                (Some(changes), target)
            }
            None if wants_subscription(spec) => {
                (None, new_policy(spec).map(|p| p.dead_letter_topic))
            }
            None => (None, None),
        };
        if let Some(target) = &dead_letter {
            self.check_dead_letter(target).await?;
        }
        let declared = declared_dead_letter(spec);
        if let Some(target) = declared {
            dead_letter::grant(&self.clients, target, dead_letter::PUBLISHER).await?;
            if let Some(sub) = &sub {
                self.grant_subscriber(&sub.name).await?;
            }
        }
        if let Some(&secs) = spec.retention_seconds.known()
            && seconds_of(topic.message_retention_duration.as_ref()) != Partial::Known(secs)
        {
            let patch = Topic::new()
                .set_name(handle)
                .set_message_retention_duration(retention(secs));
            self.update_topic(patch, mask(["message_retention_duration"]))
                .await?;
        }
        match (sub, changes) {
            (Some(sub), Some(changes)) => self.write_subscription(&sub.name, changes).await?,
            (None, _) if wants_subscription(spec) => {
                let sub = self
                    .create_subscription(new_subscription(handle, spec, &want))
                    .await?;
                if declared.is_some()
                    && let Err(e) = self.grant_subscriber(&sub.name).await
                {
                    self.delete_subscription(&sub.name).await?;
                    return Err(e);
                }
            }
            _ => {}
        }
        if want != current {
            let patch = Topic::new().set_name(handle).set_labels(want);
            self.update_topic(patch, mask(["labels"])).await?;
        }
        let read = self.read(ReadArgs::new(region, handle)).await?;
        Ok(Written::Done(read))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        self.topic(region, handle).await?;
        if let Some(sub) = self.subscription(handle).await? {
            self.delete_subscription(&sub.name).await?;
        }
        self.delete_topic(handle).await
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let topic = self.topic(region, handle).await?;
        Ok(labels::from_map(&topic.labels))
    }

    /// Writes the marker on the topic (with the region asked about when it records
    /// none, so that it is listed there) and on the queue's subscription, each with an
    /// update of its labels alone. Both are checked before anything is written: either
    /// carrying another fleet's marker is `Conflict`, and nothing changes. The topic is
    /// written last, so that `ownership` shows the marker only once both carry it.
    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let topic = self.topic(region, handle).await?;
        let current = labels::from_map(&topic.labels);
        let topic_labels = labels::marking(&current, marker, &format!("pubsub topic {handle}"))?
            .map(|mut all| {
                if !all.contains_key(REGION_LABEL) {
                    all.insert(REGION_LABEL.to_owned(), region.to_owned());
                }
                all
            });
        let sub = self.subscription(handle).await?;
        let sub_labels = match &sub {
            Some(s) => labels::marking(
                &labels::from_map(&s.labels),
                marker,
                &format!("pubsub subscription {}", s.name),
            )?,
            None => None,
        };
        if let (Some(s), Some(all)) = (&sub, sub_labels) {
            let patch = Subscription::new().set_name(s.name.clone()).set_labels(all);
            self.update_subscription(patch, mask(["labels"])).await?;
        }
        if let Some(all) = topic_labels {
            let patch = Topic::new().set_name(handle).set_labels(all);
            self.update_topic(patch, mask(["labels"])).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> QueuesSettled {
        QueuesSettled {
            fifo: false,
            visibility_timeout_seconds: Partial::Unknown,
            retention_seconds: Partial::Unknown,
            dead_letter: Partial::Unknown,
            max_receive_count: Partial::Unknown,
            tags: Partial::Unknown,
        }
    }

    const DLQ: &str = "projects/p1/topics/orders-dlq";

    #[test]
    fn handles_are_topic_names_and_name_their_subscription() {
        assert_eq!(topic_name("p1", "orders"), "projects/p1/topics/orders");
        assert_eq!(
            topic_parts("projects/p1/topics/orders"),
            Some(("p1", "orders"))
        );
        assert_eq!(
            subscription_of("projects/p1/topics/orders").unwrap(),
            "projects/p1/subscriptions/orders"
        );
        assert_eq!(short_name("projects/p1/topics/orders"), "orders");
        for bad in [
            "orders",
            "projects/p1/subscriptions/orders",
            "projects//topics/orders",
            "projects/p1/topics/",
            "projects/p1/topics/a/b",
        ] {
            assert!(topic_parts(bad).is_none(), "{bad}");
            assert_eq!(subscription_of(bad).unwrap_err().kind, ErrorKind::Invalid);
        }
    }

    #[test]
    fn names_pubsub_refuses_are_refused() {
        assert!(check_name("orders").is_ok());
        assert!(check_name("a_b-c").is_ok());
        for bad in ["ab", "1orders", "_orders", "goog-orders", "googly"] {
            assert_eq!(
                check_name(bad).unwrap_err().kind,
                ErrorKind::Invalid,
                "{bad}"
            );
        }
    }

    #[test]
    fn ranges_pubsub_refuses_are_refused() {
        let ok = QueuesSettled {
            visibility_timeout_seconds: Partial::Known(600),
            retention_seconds: Partial::Known(600),
            max_receive_count: Partial::Known(100),
            dead_letter: Partial::Known(Some(Handle::new(DLQ))),
            ..spec()
        };
        assert!(check_spec(&ok).is_ok());
        let cases = [
            QueuesSettled {
                retention_seconds: Partial::Known(599),
                ..spec()
            },
            QueuesSettled {
                visibility_timeout_seconds: Partial::Known(9),
                ..spec()
            },
            QueuesSettled {
                visibility_timeout_seconds: Partial::Known(601),
                ..spec()
            },
            QueuesSettled {
                max_receive_count: Partial::Known(4),
                ..spec()
            },
            QueuesSettled {
                max_receive_count: Partial::Known(101),
                ..spec()
            },
            // A dead letter needs a count.
            QueuesSettled {
                dead_letter: Partial::Known(Some(Handle::new(DLQ))),
                ..spec()
            },
            // A dead letter is a topic name.
            QueuesSettled {
                dead_letter: Partial::Known(Some(Handle::new("orders-dlq"))),
                max_receive_count: Partial::Known(5),
                ..spec()
            },
        ];
        for case in cases {
            let err = check_spec(&case).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Invalid, "{case:?}");
        }
        let err = check_spec(&QueuesSettled {
            visibility_timeout_seconds: Partial::Known(0),
            ..spec()
        })
        .unwrap_err();
        assert!(err.message.contains("10..=600"), "{}", err.message);
    }

    #[test]
    fn a_subscription_is_made_only_for_a_delivery_setting() {
        assert!(!wants_subscription(&spec()));
        assert!(!wants_subscription(&QueuesSettled {
            dead_letter: Partial::Known(None),
            retention_seconds: Partial::Known(3600),
            tags: Partial::Known(RawTags::new()),
            ..spec()
        }));
        assert!(wants_subscription(&QueuesSettled {
            fifo: true,
            ..spec()
        }));
        assert!(wants_subscription(&QueuesSettled {
            visibility_timeout_seconds: Partial::Known(30),
            ..spec()
        }));
        assert!(wants_subscription(&QueuesSettled {
            dead_letter: Partial::Known(Some(Handle::new(DLQ))),
            ..spec()
        }));
        assert!(wants_subscription(&QueuesSettled {
            max_receive_count: Partial::Known(5),
            ..spec()
        }));
    }

    #[test]
    fn a_new_subscription_carries_the_spec_and_the_labels() {
        let labels = RawTags::from([("managed-by-infra".to_owned(), "shop".to_owned())]);
        let s = QueuesSettled {
            fifo: true,
            visibility_timeout_seconds: Partial::Known(45),
            dead_letter: Partial::Known(Some(Handle::new(DLQ))),
            max_receive_count: Partial::Known(7),
            ..spec()
        };
        let sub = new_subscription("projects/p1/topics/orders", &s, &labels);
        assert_eq!(sub.name, "projects/p1/subscriptions/orders");
        assert_eq!(sub.topic, "projects/p1/topics/orders");
        assert!(sub.enable_message_ordering);
        assert_eq!(sub.ack_deadline_seconds, 45);
        assert_eq!(
            sub.labels.get("managed-by-infra").map(String::as_str),
            Some("shop")
        );
        let p = sub.dead_letter_policy.unwrap();
        assert_eq!(
            (p.dead_letter_topic.as_str(), p.max_delivery_attempts),
            (DLQ, 7)
        );
        // Unsaid: Pub/Sub's default deadline, no policy.
        let bare = new_subscription("projects/p1/topics/orders", &spec(), &labels);
        assert_eq!(bare.ack_deadline_seconds, 0);
        assert!(bare.dead_letter_policy.is_none());
    }

    #[test]
    fn an_update_writes_the_policy_only_when_it_changes() {
        let current = policy(DLQ, 5);
        let same = QueuesSettled {
            dead_letter: Partial::Known(Some(Handle::new(DLQ))),
            max_receive_count: Partial::Known(5),
            ..spec()
        };
        assert_eq!(policy_change(&same, Some(&current)), None);
        let more = QueuesSettled {
            max_receive_count: Partial::Known(9),
            ..same.clone()
        };
        assert_eq!(
            policy_change(&more, Some(&current)),
            Some(Some(policy(DLQ, 9)))
        );
        assert_eq!(policy_change(&more, None), Some(Some(policy(DLQ, 9))));
        let none = QueuesSettled {
            dead_letter: Partial::Known(None),
            ..spec()
        };
        assert_eq!(policy_change(&none, Some(&current)), Some(None));
        assert_eq!(policy_change(&none, None), None);
        // Unsaid: left alone; a count alone changes the policy in force, if any.
        assert_eq!(policy_change(&spec(), Some(&current)), None);
        let count = QueuesSettled {
            max_receive_count: Partial::Known(6),
            ..spec()
        };
        assert_eq!(
            policy_change(&count, Some(&current)),
            Some(Some(policy(DLQ, 6)))
        );
        assert_eq!(policy_change(&count, None), None);
    }

    #[test]
    fn an_update_of_a_subscription_writes_only_what_differs() {
        let sub = Subscription::new()
            .set_name("projects/p1/subscriptions/orders")
            .set_topic("projects/p1/topics/orders")
            .set_ack_deadline_seconds(30)
            .set_labels([("managed-by-infra", "shop"), ("team", "web")])
            .set_dead_letter_policy(policy(DLQ, 5));
        let same = QueuesSettled {
            visibility_timeout_seconds: Partial::Known(30),
            dead_letter: Partial::Known(Some(Handle::new(DLQ))),
            max_receive_count: Partial::Known(5),
            tags: Partial::Known(RawTags::from([("team".to_owned(), "web".to_owned())])),
            ..spec()
        };
        let none = subscription_changes(&same, &sub).unwrap();
        assert!(none.paths.is_empty() && none.labels.is_none() && none.dead_letter.is_none());
        let changed = QueuesSettled {
            visibility_timeout_seconds: Partial::Known(60),
            max_receive_count: Partial::Known(7),
            tags: Partial::Known(RawTags::from([("team".to_owned(), "ops".to_owned())])),
            ..same.clone()
        };
        let c = subscription_changes(&changed, &sub).unwrap();
        assert_eq!(c.paths, ["ack_deadline_seconds", "dead_letter_policy"]);
        assert_eq!(c.patch.ack_deadline_seconds, 60);
        assert_eq!(c.patch.dead_letter_policy, Some(policy(DLQ, 7)));
        assert_eq!(c.dead_letter.as_deref(), Some(DLQ));
        // The marker is kept from what the subscription carries.
        assert_eq!(
            c.labels,
            Some(RawTags::from([
                ("managed-by-infra".to_owned(), "shop".to_owned()),
                ("team".to_owned(), "ops".to_owned()),
            ]))
        );
        // Removing the policy names no topic to check.
        let cleared = QueuesSettled {
            dead_letter: Partial::Known(None),
            ..same.clone()
        };
        let c = subscription_changes(&cleared, &sub).unwrap();
        assert_eq!(c.paths, ["dead_letter_policy"]);
        assert_eq!(c.patch.dead_letter_policy, None);
        assert_eq!(c.dead_letter, None);
        // Ordering is set at creation only.
        let fifo = QueuesSettled { fifo: true, ..same };
        assert_eq!(
            subscription_changes(&fifo, &sub).unwrap_err().kind,
            ErrorKind::Invalid
        );
    }

    #[test]
    fn retention_is_whole_seconds_both_ways() {
        let d = retention(345_600);
        assert_eq!((d.seconds(), d.nanos()), (345_600, 0));
        assert_eq!(seconds_of(Some(&d)), Partial::Known(345_600));
        assert_eq!(seconds_of(None), Partial::Unknown);
        let odd = WireDuration::clamp(600, 500);
        assert_eq!(seconds_of(Some(&odd)), Partial::Unknown);
    }

    #[test]
    fn a_topic_belongs_to_its_recorded_region_or_to_every_region_without_one() {
        let labelled = HashMap::from([(REGION_LABEL.to_owned(), "europe-west1".to_owned())]);
        assert!(in_region(&labelled, "europe-west1"));
        assert!(!in_region(&labelled, "us-central1"));
        assert!(in_region(&HashMap::new(), "us-central1"));
    }

    fn topic() -> Topic {
        Topic::new()
            .set_name("projects/p1/topics/orders")
            .set_labels([
                ("managed-by-infra", "shop"),
                ("infra-region", "europe-west1"),
                ("team", "web"),
            ])
    }

    #[test]
    fn read_of_a_topic_alone_leaves_delivery_unknown() {
        let r = reported(&topic(), None);
        assert_eq!(r.fifo, Partial::Unknown);
        assert_eq!(r.visibility_timeout_seconds, Partial::Unknown);
        assert_eq!(r.dead_letter, Partial::Unknown);
        assert_eq!(r.max_receive_count, Partial::Unknown);
        assert_eq!(r.retention_seconds, Partial::Unknown);
        assert_eq!(
            r.tags,
            Partial::Known(RawTags::from([
                ("managed-by-infra".to_owned(), "shop".to_owned()),
                ("team".to_owned(), "web".to_owned()),
            ]))
        );
        let kept = topic().set_message_retention_duration(retention(86_400));
        assert_eq!(
            reported(&kept, None).retention_seconds,
            Partial::Known(86_400)
        );
    }

    #[test]
    fn read_of_a_subscription_says_what_pubsub_says() {
        let sub = Subscription::new()
            .set_name("projects/p1/subscriptions/orders")
            .set_topic("projects/p1/topics/orders")
            .set_ack_deadline_seconds(30);
        let r = reported(&topic(), Some(&sub));
        assert_eq!(r.fifo, Partial::Known(false));
        assert_eq!(r.visibility_timeout_seconds, Partial::Known(30));
        assert_eq!(r.dead_letter, Partial::Known(None));
        assert_eq!(r.max_receive_count, Partial::Unknown);
        let with = sub
            .clone()
            .set_enable_message_ordering(true)
            .set_dead_letter_policy(policy(DLQ, 8));
        let r = reported(&topic(), Some(&with));
        assert_eq!(r.fifo, Partial::Known(true));
        assert_eq!(r.dead_letter, Partial::Known(Some(Handle::new(DLQ))));
        assert_eq!(r.max_receive_count, Partial::Known(8));
        // Never a sentinel: a deadline or count of 0 is not said.
        let zero = sub
            .set_ack_deadline_seconds(0)
            .set_dead_letter_policy(policy(DLQ, 0));
        let r = reported(&topic(), Some(&zero));
        assert_eq!(r.visibility_timeout_seconds, Partial::Unknown);
        assert_eq!(r.max_receive_count, Partial::Unknown);
        assert_eq!(r.dead_letter, Partial::Known(Some(Handle::new(DLQ))));
    }

    #[test]
    fn a_reading_carries_the_raw_labels_and_the_resource_name() {
        let read = reading("projects/p1/topics/orders", &topic(), None);
        assert_eq!(read.handle(), "projects/p1/topics/orders");
        assert_eq!(
            read.observed().arn,
            Partial::Known("projects/p1/topics/orders".to_owned())
        );
        assert_eq!(read.reported()["tags"]["managed-by-infra"], "shop");
        assert!(read.reported()["tags"].get("infra-region").is_none());
    }
}
