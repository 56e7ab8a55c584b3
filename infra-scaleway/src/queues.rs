//! Queues, through its SQS API: the portable `queues` kind.
//!
//! A `queues` resource is a queue of Scaleway Queues, reached at
//! `https://sqs.mnq.{region}.scaleway.com` in the resource's region (the SQS client of
//! that region: a queue's region is its endpoint's). The handle and the observed `id`
//! are the queue's URL; the observed `arn` is its `QueueArn` attribute when Queues
//! answers one. A URL whose host names another region
//! (`sqs.mnq.{other}.scaleway.com`) is `NotFound` here before any call; any other URL is
//! asked of this region's endpoint, which does not know another region's queues.
//!
//! **Activation and credentials.** Queues' SQS API signs with Queues credentials, not
//! the API key, and exists only once activated for the project: [`crate::mnq`] answers
//! both. A region where Queues is not activated holds no queue: `list` answers none and
//! a read `NotFound`, with no SQS call and nothing activated. The first write there
//! (a create) activates it, as the plan's prerequisites said it would.
//!
//! **No tags, so no marker.** Scaleway Queues take no tags: `CreateQueue`'s tags and
//! `TagQueue`, `UntagQueue` and `ListQueueTags` are not supported. Nothing here ever
//! sends a tag. So:
//! - the kind's tags cannot be read (`tags_readable` is `false`): the engine never
//!   deletes an owned orphan queue (it reports it not prunable: delete it by hand, or
//!   `forget` it), and tells a queue of this fleet from another by its ledger alone;
//! - declared tags other than none are refused as `Invalid` before any call;
//! - `ownership` answers `Invalid` for a queue that exists (its tags cannot be read)
//!   and `NotFound` for one that does not; `mark` answers `Invalid` the same way,
//!   changing nothing: a queue cannot be taken over by marking it.
//!
//! **Names.** A FIFO queue's name ends in `.fifo` on the wire, and declared names cannot
//! hold a `.`: a queue declared `orders` with `fifo` is created as `orders.fifo`, and
//! `list` strips the suffix again, so that the name it answers is the declared one. The
//! wire name, suffix included, is at most 80 characters: a longer one is refused before
//! any call.
//!
//! **Create.** `CreateQueue` answers an existing queue of the same name and attributes
//! as if it had made it, and no marker can tell it from ours: create asks `GetQueueUrl`
//! first, and a taken name is `Conflict`. A queue made by someone else between the two
//! calls, with the same attributes, would be answered as this create's. A `CreateQueue`
//! whose answer was lost is answered as the error it is, "may have been sent": without a
//! marker, a queue of that name found afterwards cannot be told to be this create's
//! (the engine keeps the queue in its ledger and finds it on the next run). A
//! `deadLetter` needs a `maxReceiveCount` (SQS has no default): one without the other is
//! `Invalid`. A dead-letter queue that does not exist is `Invalid` (the declaration is
//! at fault), never this queue's absence. `ListQueues` is one call: Queues supports
//! neither `MaxResults` nor `NextToken`, and none is sent.
//!
//! An update reads the queue's attributes and sets only those that differ
//! (`VisibilityTimeout`, `MessageRetentionPeriod`, `RedrivePolicy`, an empty policy
//! removing the dead letter); `FifoQueue` cannot change (a change is a replace).
//!
//! What read reports when Queues does not say:
//! - `fifo`: the `FifoQueue` attribute; when it is left out, the name says (only FIFO
//!   queues end in `.fifo`).
//! - `visibilityTimeoutSeconds`, `retentionSeconds`: always answered, the defaults
//!   Queues applied included; an answer that is not a number is `Unknown`.
//! - `deadLetter`: no redrive policy is the truth `None`; a policy is reported as the
//!   URL of its dead-letter queue (found with `GetQueueUrl` from the name in its ARN);
//!   a policy naming a queue that is gone, or that cannot be parsed, is `Unknown`.
//! - `maxReceiveCount`: the redrive policy's count; without a policy, `Unknown`.
//! - `tags`: a queue of Queues has none, the truth an empty map (and so no marker).

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::QueueAttributeName;
use infra_core::kinds::{Queues, QueuesObserved, QueuesReported, QueuesSettled};
use infra_core::prelude::{Handle, Partial};
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, ErrorKind, KindBackend, ListArgs, Listed, MarkArgs,
    OwnershipArgs, Prerequisite, PrerequisiteArgs, RawTags, ReadArgs, Reading, Router, UpdateArgs,
    Written,
};
use serde_json::{Value, json};

use crate::aws_error::sdk_error;
use crate::clients::Clients;
use crate::mnq::{QueuesAccess, Signing};

/// Codes that mean the queue does not exist.
const NO_QUEUE: &[&str] = &[
    "AWS.SimpleQueueService.NonExistentQueue",
    "QueueDoesNotExist",
];
/// Codes that mean a queue of the name was deleted moments ago (retried later).
const DELETED_RECENTLY: &[&str] = &[
    "AWS.SimpleQueueService.QueueDeletedRecently",
    "QueueDeletedRecently",
];
/// The suffix of a FIFO queue's name.
const FIFO_SUFFIX: &str = ".fifo";
/// The longest queue name on the wire, the suffix included.
const NAME_MAX: usize = 80;

/// Adds this product's kind to `router`.
pub(crate) fn register(mut router: Router, clients: &Arc<Clients>) -> Router {
    router.add::<Queues>(QueuesOfScaleway::new(Arc::clone(clients)));
    router
}

/// `NotFound` for a queue of a project where Queues is not activated: there is none.
fn not_activated(region: &str, url: &str) -> BackendError {
    BackendError::not_found(format!(
        "queue {url}: Queues is not activated for the project in {region}, so it holds no queue"
    ))
    .with_code(NO_QUEUE[0])
}

/// Refuses declared tags: Scaleway Queues take none.
fn refuse_tags(spec: &QueuesSettled) -> Result<(), BackendError> {
    match spec.tags.known() {
        Some(tags) if !tags.is_empty() => Err(BackendError::invalid(format!(
            "Scaleway Queues take no tags (CreateQueue's tags and TagQueue are not \
             supported): declare this queue without tags (it declares {})",
            tags.keys().cloned().collect::<Vec<_>>().join(", ")
        ))),
        _ => Ok(()),
    }
}

/// The queue's name on the wire: the declared one, with `.fifo` for a FIFO queue.
fn wire_name(name: &str, fifo: bool) -> Result<String, BackendError> {
    let wire = if fifo {
        format!("{name}{FIFO_SUFFIX}")
    } else {
        name.to_owned()
    };
    if wire.len() > NAME_MAX {
        return Err(BackendError::invalid(format!(
            "the queue name {wire} is {} characters long; Scaleway Queues take at most \
             {NAME_MAX}, `{FIFO_SUFFIX}` of a FIFO queue included",
            wire.len()
        )));
    }
    Ok(wire)
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

/// The region a Scaleway queue URL names in its host (`sqs.mnq.{region}.scaleway.com`),
/// if it is such a URL.
fn url_region(url: &str) -> Option<&str> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let host = rest.split(['/', ':']).next()?;
    host.strip_prefix("sqs.mnq.")?
        .strip_suffix(".scaleway.com")
        .filter(|r| !r.is_empty() && !r.contains('.'))
}

/// `NotFound` for a queue URL of another region.
fn in_region(region: &str, url: &str) -> Result<(), BackendError> {
    match url_region(url) {
        Some(other) if other != region => Err(BackendError::not_found(format!(
            "queue {url} is in {other}, not in {region}"
        ))
        .with_code(NO_QUEUE[0])),
        _ => Ok(()),
    }
}

/// A redrive policy: where messages go, after how many receives.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Redrive {
    target_arn: String,
    max_receive_count: Option<u32>,
}

/// The redrive policy an attribute holds: `Ok(None)` for none, `Err(())` for one that
/// cannot be parsed.
fn parse_redrive(policy: Option<&str>) -> Result<Option<Redrive>, ()> {
    let Some(policy) = policy
        .map(str::trim)
        .filter(|p| !p.is_empty() && *p != "{}")
    else {
        return Ok(None);
    };
    let doc: Value = serde_json::from_str(policy).map_err(drop)?;
    let target_arn = doc
        .get("deadLetterTargetArn")
        .and_then(Value::as_str)
        .ok_or(())?
        .to_owned();
    let max_receive_count = match doc.get("maxReceiveCount") {
        Some(Value::Number(n)) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    };
    Ok(Some(Redrive {
        target_arn,
        max_receive_count,
    }))
}

/// The queue's name in an ARN (its last `:`-separated part).
fn arn_name(arn: &str) -> Option<&str> {
    arn.rsplit(':')
        .next()
        .filter(|n| !n.is_empty() && *n != arn)
}

fn number(attrs: &HashMap<QueueAttributeName, String>, name: &QueueAttributeName) -> Partial<u32> {
    attrs
        .get(name)
        .and_then(|v| v.trim().parse().ok())
        .map_or(Partial::Unknown, Partial::Known)
}

/// The attributes that differ between `want` and `now`, numbers compared as numbers
/// and redrive policies as policies.
fn changed(
    want: HashMap<QueueAttributeName, String>,
    now: &HashMap<QueueAttributeName, String>,
) -> HashMap<QueueAttributeName, String> {
    want.into_iter()
        .filter(|(k, v)| {
            let current = now.get(k).map(String::as_str);
            if k == &QueueAttributeName::RedrivePolicy {
                parse_redrive(Some(v.as_str())) != parse_redrive(current)
            } else {
                current.map(str::trim) != Some(v.as_str())
                    && current.and_then(|c| c.trim().parse::<u64>().ok()) != v.parse().ok()
            }
        })
        .collect()
}

/// One region's queues.
struct Region<'a> {
    sqs: Client,
    region: &'a str,
}

impl Region<'_> {
    /// Every attribute of the queue at `url`.
    async fn attributes(
        &self,
        url: &str,
    ) -> Result<HashMap<QueueAttributeName, String>, BackendError> {
        in_region(self.region, url)?;
        let out = self
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::All)
            .send()
            .await
            .map_err(|e| sdk_error("sqs:GetQueueAttributes", e, NO_QUEUE, false))?;
        Ok(out.attributes().cloned().unwrap_or_default())
    }

    /// The URL of the queue named `name` on the wire, or `None` if there is none.
    async fn queue_url(&self, name: &str) -> Result<Option<String>, BackendError> {
        match self.sqs.get_queue_url().queue_name(name).send().await {
            Ok(out) => Ok(out.queue_url().map(str::to_owned)),
            Err(e) => match sdk_error("sqs:GetQueueUrl", e, NO_QUEUE, false) {
                e if e.kind == ErrorKind::NotFound => Ok(None),
                e => Err(e),
            },
        }
    }

    /// The redrive policy `spec` asks for: `Some("")` for none (how SQS removes one),
    /// `None` when the declaration says nothing.
    async fn redrive_policy(&self, spec: &QueuesSettled) -> Result<Option<String>, BackendError> {
        let target = match spec.dead_letter.known() {
            None => return Ok(None),
            Some(None) => return Ok(Some(String::new())),
            Some(Some(target)) => target.as_str(),
        };
        let count = *spec.max_receive_count.known().ok_or_else(|| {
            BackendError::invalid(
                "a queue's deadLetter needs a maxReceiveCount (Scaleway Queues have no default)",
            )
        })?;
        // The dead-letter queue missing is the declaration's fault, not this queue's
        // absence: never NotFound here.
        let attrs = match self.attributes(target).await {
            Ok(attrs) => attrs,
            Err(e) if e.kind == ErrorKind::NotFound => {
                return Err(BackendError::invalid(format!(
                    "the dead-letter queue {target} does not exist: {}",
                    e.message
                )));
            }
            Err(e) => return Err(e),
        };
        let arn = attrs.get(&QueueAttributeName::QueueArn).ok_or_else(|| {
            BackendError::new(
                ErrorKind::Other,
                format!(
                    "sqs:GetQueueAttributes of the dead-letter queue {target} answered no QueueArn"
                ),
            )
        })?;
        Ok(Some(
            json!({ "deadLetterTargetArn": arn, "maxReceiveCount": count }).to_string(),
        ))
    }

    /// The attributes `spec` sets (all but `FifoQueue`, which only a create sets).
    async fn wanted(
        &self,
        spec: &QueuesSettled,
    ) -> Result<HashMap<QueueAttributeName, String>, BackendError> {
        let mut attrs = HashMap::new();
        if let Some(v) = spec.visibility_timeout_seconds.known() {
            attrs.insert(QueueAttributeName::VisibilityTimeout, v.to_string());
        }
        if let Some(v) = spec.retention_seconds.known() {
            attrs.insert(QueueAttributeName::MessageRetentionPeriod, v.to_string());
        }
        if let Some(policy) = self.redrive_policy(spec).await? {
            attrs.insert(QueueAttributeName::RedrivePolicy, policy);
        }
        Ok(attrs)
    }

    /// `deadLetter` and `maxReceiveCount` as the redrive policy says them.
    async fn redrive(
        &self,
        policy: Option<&str>,
    ) -> Result<(Partial<Option<Handle<Queues>>>, Partial<u32>), BackendError> {
        let Ok(policy) = parse_redrive(policy) else {
            return Ok((Partial::Unknown, Partial::Unknown));
        };
        let Some(policy) = policy else {
            return Ok((Partial::Known(None), Partial::Unknown));
        };
        let count = policy
            .max_receive_count
            .map_or(Partial::Unknown, Partial::Known);
        let Some(name) = arn_name(&policy.target_arn) else {
            return Ok((Partial::Unknown, count));
        };
        let target = match self.queue_url(name).await? {
            Some(url) => Partial::Known(Some(Handle::new(url))),
            // The policy names a queue that is gone: there is no handle to report.
            None => Partial::Unknown,
        };
        Ok((target, count))
    }

    async fn read(&self, url: &str) -> Result<Reading<Queues>, BackendError> {
        let attrs = self.attributes(url).await?;
        let fifo = match attrs
            .get(&QueueAttributeName::FifoQueue)
            .map(|v| v.trim().to_ascii_lowercase())
            .as_deref()
        {
            Some("true") => true,
            Some("false") => false,
            _ => url_name(url).ends_with(FIFO_SUFFIX),
        };
        let policy = attrs.get(&QueueAttributeName::RedrivePolicy);
        let (dead_letter, max_receive_count) = self.redrive(policy.map(String::as_str)).await?;
        Ok(Reading::new(
            url,
            QueuesObserved {
                id: url.to_owned(),
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
                tags: Partial::Known(RawTags::new()),
            },
        ))
    }

    /// `CreateQueue`, without tags, after making sure the name is free.
    async fn create(&self, wire: &str, spec: &QueuesSettled) -> Result<String, BackendError> {
        let mut attrs = self.wanted(spec).await?;
        if spec.fifo {
            attrs.insert(QueueAttributeName::FifoQueue, "true".to_owned());
        }
        // An empty policy means "remove"; a new queue has none to remove.
        attrs.retain(|k, v| !(k == &QueueAttributeName::RedrivePolicy && v.is_empty()));
        if let Some(url) = self.queue_url(wire).await? {
            return Err(BackendError::new(
                ErrorKind::Conflict,
                format!("queue {wire} already exists in {} ({url})", self.region),
            )
            .with_code("QueueAlreadyExists"));
        }
        let out = self
            .sqs
            .create_queue()
            .queue_name(wire)
            .set_attributes(Some(attrs).filter(|a| !a.is_empty()))
            .send()
            .await
            .map_err(|e| match sdk_error("sqs:CreateQueue", e, &[], true) {
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
        out.queue_url().map(str::to_owned).ok_or_else(|| {
            BackendError::new(
                ErrorKind::Other,
                format!("sqs:CreateQueue of {wire} answered no queue URL"),
            )
            .maybe_sent()
        })
    }

    async fn update(&self, url: &str, spec: &QueuesSettled) -> Result<(), BackendError> {
        let now = self.attributes(url).await?;
        let fifo = now.get(&QueueAttributeName::FifoQueue).map_or_else(
            || url_name(url).ends_with(FIFO_SUFFIX),
            |v| v.trim() == "true",
        );
        if fifo != spec.fifo {
            return Err(BackendError::invalid(format!(
                "queue {url}: FifoQueue is set when a queue is created and cannot change \
                 (a change of `fifo` is a replace)"
            )));
        }
        let changes = changed(self.wanted(spec).await?, &now);
        if changes.is_empty() {
            return Ok(());
        }
        self.sqs
            .set_queue_attributes()
            .queue_url(url)
            .set_attributes(Some(changes))
            .send()
            .await
            .map_err(|e| sdk_error("sqs:SetQueueAttributes", e, NO_QUEUE, true))?;
        Ok(())
    }

    /// The answer of `ownership` and `mark` for a queue: `NotFound` when it does not
    /// exist, else `Invalid`, since a queue carries no tags.
    async fn untaggable(&self, url: &str, asked: &str) -> BackendError {
        match self.attributes(url).await {
            Err(e) => e,
            Ok(_) => BackendError::invalid(format!(
                "queue {url}: Scaleway Queues carry no tags, so {asked}"
            )),
        }
    }
}

/// `queues`: a queue of Scaleway Queues, in whichever region a call names.
pub(crate) struct QueuesOfScaleway {
    clients: Arc<Clients>,
    access: QueuesAccess,
}

impl QueuesOfScaleway {
    /// The kind, reaching Queues through `clients` (one SQS client per region, signed
    /// with Queues credentials: see [`crate::mnq`]).
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        QueuesOfScaleway {
            access: QueuesAccess::new(Arc::clone(&clients)),
            clients,
        }
    }

    fn at<'a>(&self, region: &'a str, signing: &Signing) -> Region<'a> {
        Region {
            sqs: self.clients.sqs(region, &signing.endpoint, &signing.key),
            region,
        }
    }

    /// The queues of `region` for a read, or `None` when Queues is not activated
    /// there (the project then holds no queue).
    async fn reading<'a>(&self, region: &'a str) -> Result<Option<Region<'a>>, BackendError> {
        let signing = self.access.for_reading(region).await?;
        Ok(signing.map(|s| self.at(region, &s)))
    }

    /// The queues of `region` for a read of the queue at `url`, `NotFound` when Queues
    /// is not activated there.
    async fn holding<'a>(&self, region: &'a str, url: &str) -> Result<Region<'a>, BackendError> {
        self.reading(region)
            .await?
            .ok_or_else(|| not_activated(region, url))
    }

    /// The queues of `region` for a write: Queues activated first when it is not.
    async fn writing<'a>(&self, region: &'a str) -> Result<Region<'a>, BackendError> {
        let signing = self.access.for_writing(region).await?;
        Ok(self.at(region, &signing))
    }
}

#[async_trait]
impl KindBackend<Queues> for QueuesOfScaleway {
    /// Queues take no tags: whose a queue is cannot be read.
    fn tags_readable(&self) -> bool {
        false
    }

    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let Some(queues) = self.reading(region).await? else {
            return Ok(Vec::new());
        };
        let out = queues
            .sqs
            .list_queues()
            .send()
            .await
            .map_err(|e| sdk_error("sqs:ListQueues", e, &[], false))?;
        Ok(out
            .queue_urls()
            .iter()
            .map(|url| Listed::new(declared_name(url).to_owned(), url.clone()))
            .collect())
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<Queues>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        in_region(region, handle)?;
        self.holding(region, handle).await?.read(handle).await
    }

    async fn create(
        &self,
        args: CreateArgs<'_, Queues>,
    ) -> Result<Written<Reading<Queues>>, BackendError> {
        // The marker cannot be written: Queues take no tags.
        let CreateArgs {
            region, name, spec, ..
        } = args;
        refuse_tags(spec)?;
        let wire = wire_name(name, spec.fifo)?;
        let queues = self.writing(region).await?;
        let url = queues.create(&wire, spec).await?;
        Ok(Written::Done(queues.read(&url).await?))
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
        refuse_tags(spec)?;
        in_region(region, handle)?;
        let queues = self.holding(region, handle).await?;
        queues.update(handle, spec).await?;
        Ok(Written::Done(queues.read(handle).await?))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        in_region(region, handle)?;
        self.holding(region, handle)
            .await?
            .sqs
            .delete_queue()
            .queue_url(handle)
            .send()
            .await
            .map_err(|e| sdk_error("sqs:DeleteQueue", e, NO_QUEUE, true))?;
        Ok(())
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let why = "its ownership cannot be read";
        in_region(region, handle)?;
        Err(self
            .holding(region, handle)
            .await?
            .untaggable(handle, why)
            .await)
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs { region, handle, .. } = args;
        let why = "it cannot be given an ownership marker; nothing was changed";
        in_region(region, handle)?;
        Err(self
            .holding(region, handle)
            .await?
            .untaggable(handle, why)
            .await)
    }

    /// Queues activated for the project in the region, and this run's credentials made,
    /// when they are not yet (see [`crate::mnq`]).
    async fn prerequisites(
        &self,
        args: PrerequisiteArgs<'_>,
    ) -> Result<Vec<Prerequisite>, BackendError> {
        self.access.prerequisites(args.region).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infra_core::kinds::Tags;

    fn spec(tags: Partial<Tags>) -> QueuesSettled {
        QueuesSettled {
            fifo: false,
            visibility_timeout_seconds: Partial::Unknown,
            retention_seconds: Partial::Unknown,
            dead_letter: Partial::Unknown,
            max_receive_count: Partial::Unknown,
            tags,
        }
    }

    #[test]
    fn fifo_names_carry_the_suffix_on_the_wire_within_eighty_characters() {
        assert_eq!(wire_name("orders", true).unwrap(), "orders.fifo");
        assert_eq!(wire_name("orders", false).unwrap(), "orders");
        let long = "q".repeat(76);
        assert_eq!(wire_name(&long, false).unwrap(), long);
        assert_eq!(wire_name(&long, true).unwrap_err().kind, ErrorKind::Invalid);
        let url = "https://sqs.mnq.fr-par.scaleway.com/project-1/orders.fifo";
        assert_eq!(
            (url_name(url), declared_name(url)),
            ("orders.fifo", "orders")
        );
        assert_eq!(declared_name("http://127.0.0.1:5000/123456789012/a"), "a");
    }

    #[test]
    fn a_url_of_another_region_is_not_found_before_any_call() {
        let url = "https://sqs.mnq.nl-ams.scaleway.com/project-1/orders";
        assert_eq!(url_region(url), Some("nl-ams"));
        assert!(in_region("nl-ams", url).is_ok());
        assert_eq!(
            in_region("fr-par", url).unwrap_err().kind,
            ErrorKind::NotFound
        );
        // A stand-in's URL says no region: the endpoint decides.
        assert_eq!(
            url_region("http://127.0.0.1:5000/123456789012/orders"),
            None
        );
        assert!(in_region("fr-par", "http://127.0.0.1:5000/123456789012/orders").is_ok());
    }

    #[test]
    fn declared_tags_are_refused_and_none_are_accepted() {
        let some = Tags::from([("team".to_owned(), "web".to_owned())]);
        let refused = refuse_tags(&spec(Partial::Known(some))).unwrap_err();
        assert_eq!(refused.kind, ErrorKind::Invalid);
        assert!(
            refused.message.contains("take no tags"),
            "{}",
            refused.message
        );
        assert!(refuse_tags(&spec(Partial::Known(Tags::new()))).is_ok());
        assert!(refuse_tags(&spec(Partial::Unknown)).is_ok());
    }

    #[test]
    fn redrive_policies_compare_as_policies() {
        let arn = "arn:scw:sqs:fr-par:project-1:dlq";
        let a = format!(r#"{{"deadLetterTargetArn":"{arn}","maxReceiveCount":5}}"#);
        let b = format!(r#"{{"maxReceiveCount":"5","deadLetterTargetArn":"{arn}"}}"#);
        assert_eq!(parse_redrive(Some(&a)), parse_redrive(Some(&b)));
        assert_eq!(parse_redrive(Some("")), Ok(None));
        assert_eq!(parse_redrive(None), Ok(None));
        assert_eq!(parse_redrive(Some("not json")), Err(()));
        assert_eq!(arn_name(arn), Some("dlq"));
        let now = HashMap::from([
            (QueueAttributeName::VisibilityTimeout, "30".to_owned()),
            (QueueAttributeName::RedrivePolicy, b),
        ]);
        let want = HashMap::from([
            (QueueAttributeName::VisibilityTimeout, "30".to_owned()),
            (QueueAttributeName::MessageRetentionPeriod, "60".to_owned()),
            (QueueAttributeName::RedrivePolicy, a),
        ]);
        assert_eq!(
            changed(want, &now),
            HashMap::from([(QueueAttributeName::MessageRetentionPeriod, "60".to_owned())])
        );
        let removal = HashMap::from([(QueueAttributeName::RedrivePolicy, String::new())]);
        assert!(changed(removal.clone(), &HashMap::new()).is_empty());
        assert_eq!(changed(removal.clone(), &now), removal);
    }
}
