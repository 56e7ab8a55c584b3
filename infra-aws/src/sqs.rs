//! SQS: the `queues` kind.
//!
//! The handle is the queue's URL; the observed id is the URL too, with the queue's ARN.
//!
//! **FIFO names.** SQS requires a FIFO queue's name to end in `.fifo`, and declared
//! names cannot hold a `.`: a queue declared `orders` with `fifo` is created as
//! `orders.fifo`, and `list` strips the suffix again, so that the name it answers is
//! the declared one. A standard `orders` and a FIFO `orders.fifo` would therefore both
//! be listed as `orders`; this module never creates the second while the first exists
//! under the same wire name, but nothing stops one being made outside it.
//!
//! What read reports when SQS does not say:
//! - `fifo`: the `FifoQueue` attribute when SQS answers it; a standard queue may leave
//!   it out, and then the truth comes from the name (only FIFO queues end in `.fifo`).
//! - `visibilityTimeoutSeconds`, `retentionSeconds`: SQS always answers both, and their
//!   values are the truth even when the declaration left them unsaid (the defaults SQS
//!   applied). An answer that is not a number is `Unknown`.
//! - `deadLetter`: no redrive policy is the truth `None`. A policy is reported as the
//!   URL of its dead-letter queue (the handle the settled spec holds), found from the
//!   policy's ARN with `GetQueueUrl`; a policy naming a queue that no longer exists, or
//!   that cannot be parsed, is `Unknown`.
//! - `maxReceiveCount`: the redrive policy's count; without a redrive policy there is
//!   no count, which is `Unknown` (never `0`).
//! - `tags`: "no tags" is the truth, an empty map. The marker is included; the engine
//!   strips it.
//!
//! The marker is written by `CreateQueue` itself (its `tags`). `CreateQueue` answers
//! the existing queue when one of the same name and attributes exists, so create first
//! asks `GetQueueUrl` and answers `Conflict` for a taken name, and checks the marker of
//! what it got afterwards (a queue created meanwhile by another fleet is `Conflict`
//! too). A `deadLetter` needs a `maxReceiveCount`: SQS has no default for it, so a
//! declaration giving one without the other is `Invalid`.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_sqs::types::QueueAttributeName;
use infra_core::kinds::{Queues, QueuesObserved, QueuesReported, QueuesSettled};
use infra_core::sdk::{
    CreateArgs, DeleteArgs, KindBackend, ListArgs, MarkArgs, OwnershipArgs, ReadArgs, Reading,
    UpdateArgs, Written,
};
use infra_core::{
    prelude::{Handle, Partial},
    sdk::{BackendError, ErrorKind, Listed, RawTags},
};
use serde_json::{Value, json};

use crate::clients::{Clients, RegionClients};
use crate::error::classify;
use crate::tags::{keep_marker, marking, with_marker};

/// Codes that mean the queue does not exist.
const NO_QUEUE: &[&str] = &[
    "AWS.SimpleQueueService.NonExistentQueue",
    "QueueDoesNotExist",
];
/// Codes that mean a queue of the name was deleted less than a minute ago.
const DELETED_RECENTLY: &[&str] = &[
    "AWS.SimpleQueueService.QueueDeletedRecently",
    "QueueDeletedRecently",
];
/// The suffix SQS requires of a FIFO queue's name.
const FIFO_SUFFIX: &str = ".fifo";

/// The queue's name on the wire: the declared one, with `.fifo` for a FIFO queue.
fn wire_name(name: &str, fifo: bool) -> String {
    if fifo {
        format!("{name}{FIFO_SUFFIX}")
    } else {
        name.to_owned()
    }
}

/// The queue's name on the wire, from its URL (the last path segment).
fn url_name(url: &str) -> &str {
    url.trim_end_matches('/').rsplit('/').next().unwrap_or(url)
}

/// The declared name of a queue, from its URL: the wire name without `.fifo`.
fn declared_name(url: &str) -> &str {
    let name = url_name(url);
    name.strip_suffix(FIFO_SUFFIX).unwrap_or(name)
}

fn invalid_dead_letter() -> BackendError {
    BackendError::invalid(
        "a queue's deadLetter needs a maxReceiveCount (SQS has no default for it)",
    )
}

/// The ARN of a queue, from its URL.
async fn queue_arn(c: &RegionClients, url: &str) -> Result<Option<String>, BackendError> {
    let out = c
        .sqs()
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| classify("sqs:GetQueueAttributes", e, NO_QUEUE))?;
    Ok(out
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn))
        .cloned())
}

/// The redrive policy a `deadLetter` of `spec` asks for: `Some("")` for none (SQS's
/// way to remove one), `None` when the declaration says nothing.
async fn redrive_policy(
    c: &RegionClients,
    spec: &QueuesSettled,
) -> Result<Option<String>, BackendError> {
    match spec.dead_letter.known() {
        None => Ok(None),
        Some(None) => Ok(Some(String::new())),
        Some(Some(target)) => {
            let count = *spec
                .max_receive_count
                .known()
                .ok_or_else(invalid_dead_letter)?;
            let url = target.as_str();
            // The dead-letter queue missing is a fault of the declaration's order, not
            // the absence of this queue: never NotFound here.
            let arn = match queue_arn(c, url).await {
                Ok(Some(arn)) => arn,
                Ok(None) => {
                    return Err(BackendError::new(
                        ErrorKind::Other,
                        format!(
                            "sqs:GetQueueAttributes of dead-letter queue {url} answered no QueueArn"
                        ),
                    ));
                }
                Err(e) if e.kind == ErrorKind::NotFound => {
                    return Err(BackendError::invalid(format!(
                        "the dead-letter queue {url} does not exist: {}",
                        e.message
                    )));
                }
                Err(e) => return Err(e),
            };
            Ok(Some(
                json!({ "deadLetterTargetArn": arn, "maxReceiveCount": count }).to_string(),
            ))
        }
    }
}

/// The attributes a settled spec sets (all but `FifoQueue`, which only create sets).
async fn attributes(
    c: &RegionClients,
    spec: &QueuesSettled,
) -> Result<HashMap<QueueAttributeName, String>, BackendError> {
    let mut attrs = HashMap::new();
    if let Some(v) = spec.visibility_timeout_seconds.known() {
        attrs.insert(QueueAttributeName::VisibilityTimeout, v.to_string());
    }
    if let Some(v) = spec.retention_seconds.known() {
        attrs.insert(QueueAttributeName::MessageRetentionPeriod, v.to_string());
    }
    if let Some(policy) = redrive_policy(c, spec).await? {
        attrs.insert(QueueAttributeName::RedrivePolicy, policy);
    }
    Ok(attrs)
}

async fn tags(c: &RegionClients, url: &str) -> Result<RawTags, BackendError> {
    let out = c
        .sqs()
        .list_queue_tags()
        .queue_url(url)
        .send()
        .await
        .map_err(|e| classify("sqs:ListQueueTags", e, NO_QUEUE))?;
    Ok(out
        .tags()
        .map(|t| t.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default())
}

/// The URL of the queue named `name` on the wire, or `None` if there is none.
async fn queue_url(
    c: &RegionClients,
    name: &str,
    owner: Option<&str>,
) -> Result<Option<String>, BackendError> {
    match c
        .sqs()
        .get_queue_url()
        .queue_name(name)
        .set_queue_owner_aws_account_id(owner.map(str::to_owned))
        .send()
        .await
    {
        Ok(out) => Ok(out.queue_url().map(str::to_owned)),
        Err(e) => match classify("sqs:GetQueueUrl", e, NO_QUEUE) {
            e if e.kind == ErrorKind::NotFound => Ok(None),
            e => Err(e),
        },
    }
}

fn number(attrs: &HashMap<QueueAttributeName, String>, name: &QueueAttributeName) -> Partial<u32> {
    match attrs.get(name).and_then(|v| v.trim().parse().ok()) {
        Some(n) => Partial::Known(n),
        None => Partial::Unknown,
    }
}

/// `deadLetter` and `maxReceiveCount` as the redrive policy says them.
async fn redrive(
    c: &RegionClients,
    policy: Option<&str>,
) -> Result<(Partial<Option<Handle<Queues>>>, Partial<u32>), BackendError> {
    let policy = policy
        .map(str::trim)
        .filter(|p| !p.is_empty() && *p != "{}");
    let Some(policy) = policy else {
        return Ok((Partial::Known(None), Partial::Unknown));
    };
    let Ok(doc) = serde_json::from_str::<Value>(policy) else {
        return Ok((Partial::Unknown, Partial::Unknown));
    };
    let count = match doc.get("maxReceiveCount") {
        Some(Value::Number(n)) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    };
    let count = count.map_or(Partial::Unknown, Partial::Known);
    // arn:<partition>:sqs:<region>:<account>:<name>
    let target = doc
        .get("deadLetterTargetArn")
        .and_then(Value::as_str)
        .and_then(|arn| {
            let parts: Vec<&str> = arn.splitn(6, ':').collect();
            match parts.as_slice() {
                ["arn", _, "sqs", _, account, name] if !name.is_empty() => Some((*account, *name)),
                _ => None,
            }
        });
    let Some((account, name)) = target else {
        return Ok((Partial::Unknown, count));
    };
    let owner = Some(account).filter(|a| !a.is_empty());
    let dead_letter = match queue_url(c, name, owner).await? {
        Some(url) => Partial::Known(Some(Handle::new(url))),
        // The policy names a queue that is gone: there is no handle to report.
        None => Partial::Unknown,
    };
    Ok((dead_letter, count))
}

/// `queues`: an SQS queue, in whichever region a call names.
pub(crate) struct SqsQueues {
    clients: Arc<Clients>,
}

impl SqsQueues {
    /// The kind, reaching AWS through `clients` (one set per region, made on first use).
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        SqsQueues { clients }
    }
}

#[async_trait]
impl KindBackend<Queues> for SqsQueues {
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let c = &self.clients.region(region);
        let urls: Vec<String> = c
            .sqs()
            .list_queues()
            .max_results(1000)
            .into_paginator()
            .items()
            .send()
            .collect::<Result<_, _>>()
            .await
            .map_err(|e| classify("sqs:ListQueues", e, &[]))?;
        Ok(urls
            .into_iter()
            .map(|url| Listed::new(declared_name(&url).to_owned(), url))
            .collect())
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<Queues>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        let out = c
            .sqs()
            .get_queue_attributes()
            .queue_url(handle)
            .attribute_names(QueueAttributeName::All)
            .send()
            .await
            .map_err(|e| classify("sqs:GetQueueAttributes", e, NO_QUEUE))?;
        let attrs = out.attributes().cloned().unwrap_or_default();
        let fifo = match attrs
            .get(&QueueAttributeName::FifoQueue)
            .map(|v| v.trim().to_ascii_lowercase())
        {
            Some(v) if v == "true" => true,
            Some(v) if v == "false" => false,
            _ => url_name(handle).ends_with(FIFO_SUFFIX),
        };
        let (dead_letter, max_receive_count) = redrive(
            c,
            attrs
                .get(&QueueAttributeName::RedrivePolicy)
                .map(String::as_str),
        )
        .await?;
        let tags = tags(c, handle).await?;
        // ListQueueTags is part of the read: its answer tells ownership too.
        let raw = tags.clone();
        Ok(Reading::new(
            handle,
            QueuesObserved {
                id: handle.to_owned(),
                arn: attrs
                    .get(&QueueAttributeName::QueueArn)
                    .cloned()
                    .map_or(Partial::Unknown, Partial::Known),
            },
            QueuesReported {
                fifo: Partial::Known(fifo),
                visibility_timeout_seconds: number(&attrs, &QueueAttributeName::VisibilityTimeout),
                retention_seconds: number(&attrs, &QueueAttributeName::MessageRetentionPeriod),
                dead_letter,
                max_receive_count,
                tags: Partial::Known(tags),
            },
        )
        .with_raw_tags(raw))
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
        let c = &self.clients.region(region);
        let wire = wire_name(name, spec.fifo);
        let mut attrs = attributes(c, spec).await?;
        if spec.fifo {
            attrs.insert(QueueAttributeName::FifoQueue, "true".to_owned());
        }
        // An empty policy means "remove"; a new queue has none to remove.
        attrs.retain(|k, v| !(k == &QueueAttributeName::RedrivePolicy && v.is_empty()));
        // CreateQueue answers an existing queue of the same name and attributes as if it
        // had made it: a taken name must be found first.
        if let Some(url) = queue_url(c, &wire, None).await? {
            return Err(BackendError::new(
                ErrorKind::Conflict,
                format!("queue {wire} already exists ({url})"),
            )
            .with_code("QueueAlreadyExists"));
        }
        let marked = with_marker(spec.tags.known(), marker);
        let out = c
            .sqs()
            .create_queue()
            .queue_name(&wire)
            .set_attributes(Some(attrs).filter(|a| !a.is_empty()))
            .set_tags(Some(marked.into_iter().collect()))
            .send()
            .await
            .map_err(|e| match classify("sqs:CreateQueue", e, &[]) {
                e if e
                    .code
                    .as_deref()
                    .is_some_and(|c| DELETED_RECENTLY.contains(&c)) =>
                {
                    BackendError {
                        kind: ErrorKind::Unavailable,
                        ..e
                    }
                }
                e => e,
            })?;
        let url = out.queue_url().map(str::to_owned).ok_or_else(|| {
            BackendError::new(
                ErrorKind::Other,
                format!("sqs:CreateQueue of {wire} answered no queue URL"),
            )
            .maybe_sent()
        })?;
        // Made meanwhile by someone else, and answered to us as if we had made it: the
        // read of what was made carries its tags, which must hold our marker.
        let read = self.read(ReadArgs::new(region, &url)).await?;
        let carried = read.raw_tags().cloned().unwrap_or_default();
        if carried.get(marker.key()).map(String::as_str) != Some(marker.value()) {
            return Err(BackendError::new(
                ErrorKind::Conflict,
                format!("queue {wire} was created meanwhile by someone else ({url})"),
            )
            .with_code("QueueAlreadyExists"));
        }
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
        let c = &self.clients.region(region);
        let sqs = c.sqs();
        let attrs = attributes(c, spec).await?;
        if !attrs.is_empty() {
            sqs.set_queue_attributes()
                .queue_url(handle)
                .set_attributes(Some(attrs))
                .send()
                .await
                .map_err(|e| classify("sqs:SetQueueAttributes", e, NO_QUEUE))?;
        }
        if let Some(declared) = spec.tags.known() {
            let current = tags(c, handle).await?;
            let want = keep_marker(Some(declared), &current);
            let stale: Vec<String> = current
                .keys()
                .filter(|k| !want.contains_key(*k))
                .cloned()
                .collect();
            if !stale.is_empty() {
                sqs.untag_queue()
                    .queue_url(handle)
                    .set_tag_keys(Some(stale))
                    .send()
                    .await
                    .map_err(|e| classify("sqs:UntagQueue", e, NO_QUEUE))?;
            }
            let changed: HashMap<String, String> = want
                .into_iter()
                .filter(|(k, v)| current.get(k) != Some(v))
                .collect();
            if !changed.is_empty() {
                sqs.tag_queue()
                    .queue_url(handle)
                    .set_tags(Some(changed))
                    .send()
                    .await
                    .map_err(|e| classify("sqs:TagQueue", e, NO_QUEUE))?;
            }
        }
        let read = self.read(ReadArgs::new(region, handle)).await?;
        Ok(Written::Done(read))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        c.sqs()
            .delete_queue()
            .queue_url(handle)
            .send()
            .await
            .map_err(|e| classify("sqs:DeleteQueue", e, NO_QUEUE))?;
        Ok(())
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        tags(c, handle).await
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let c = &self.clients.region(region);
        let current = tags(c, handle).await?;
        if let Some(pair) = marking(&current, marker, &format!("queue {handle}"))? {
            // TagQueue adds to the queue's tags; the others stay as they are.
            c.sqs()
                .tag_queue()
                .queue_url(handle)
                .set_tags(Some(pair.into_iter().collect()))
                .send()
                .await
                .map_err(|e| classify("sqs:TagQueue", e, NO_QUEUE))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_names_carry_the_suffix_on_the_wire_and_lose_it_in_lists() {
        assert_eq!(wire_name("orders", true), "orders.fifo");
        assert_eq!(wire_name("orders", false), "orders");
        assert_eq!(
            declared_name("https://sqs.eu-west-3.amazonaws.com/123456789012/orders.fifo"),
            "orders"
        );
        assert_eq!(
            declared_name("https://sqs.eu-west-3.amazonaws.com/123456789012/orders"),
            "orders"
        );
        assert_eq!(
            url_name("http://localhost:5055/123456789012/a.fifo"),
            "a.fifo"
        );
    }
}
