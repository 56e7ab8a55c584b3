//! The `objectStore` kind: Cloud Storage buckets, through the Cloud Storage JSON API
//! (`/storage/v1/b…`) with plain HTTP calls. (The official storage crate manages
//! buckets over gRPC only.)
//!
//! - **Handle**: the bucket's name (bucket names are global: a name another project
//!   holds answers 409, which is `Conflict`). The observed `endpoint` is `gs://<name>`,
//!   the address `gcloud storage`, Cloud Run and every client library take.
//! - **Region**: the bucket's own `location`, which Cloud Storage answers upper-case
//!   (`EUROPE-WEST1`) and is compared without regard to case. `list` keeps the
//!   project's buckets whose location is the region asked about; a bucket in another
//!   location (another region, or a multi-region such as `EU`, which no region of this
//!   crate names) is `NotFound` in this one. No bookkeeping label is written.
//! - **Marker**: the label `managed-by-infra=<fleet>`, in the labels of
//!   `buckets.insert` itself. `update` keeps it (`labels::for_update`); `mark` adds it
//!   alone with a `buckets.patch` of that one label (a patch merges labels key by key).
//! - **Fields**: `versioning` is `versioning.enabled`. `expireAfterDays` is one lifecycle
//!   rule of exactly the form `{"action": {"type": "Delete"}, "condition": {"age": N}}`;
//!   `None` is "no such rule". Every other lifecycle rule (another action, or a `Delete`
//!   with more conditions than `age`) is not this field's: it is kept as it was, in
//!   its place, when the field is written. `tags` are the labels.
//! - **Updates** are one `buckets.patch` of the declared parts only, and only of those
//!   that differ (nothing differs: no call): labels as the changes to make (a new value
//!   per key, `null` for a key to remove), `versioning`, and `lifecycle` as the whole
//!   rule list (our rule replaced, the others kept). The patch carries
//!   `ifMetagenerationMatch` of the bucket as read, so that a change made meanwhile by
//!   someone else is never overwritten: Cloud Storage then answers 412, and the update
//!   reads again and retries, up to three times in all (then `Conflict`).
//! - **Refused before any call** (`Invalid`): names Cloud Storage refuses beyond the
//!   kind's own rule (starting with `goog`, holding `google` or `g00gle`, or shaped like
//!   an IPv4 address), labels Google refuses, and an `expireAfterDays` beyond the 32-bit
//!   integer the `age` condition is. A dotted name needs its domain verified by the
//!   caller; Cloud Storage refuses it (403, `Denied`) otherwise, and that is left to it.
//! - **Delete** of a bucket that still holds objects answers 409 on Cloud Storage: it
//!   is `DependencyViolation`, and the bucket is left as it was.
//! - **Retries**: there is no official client to retry these calls, so each goes
//!   through the configuration's [`Retrier`](infra_core::sdk::Retrier): a throttled
//!   answer (429) is retried for every call, after at least its `Retry-After`; a
//!   failure that may have reached Cloud Storage (a 5xx, a timeout, an answer lost) is
//!   retried for every call but `buckets.insert`, whose outcome is then settled by
//!   looking the bucket up by name. Each attempt waits at most the policy's request
//!   timeout.
//!
//! What read reports when Cloud Storage does not say:
//! - `versioning`: a bucket never versioned has no `versioning` (and Google leaves a
//!   `false` out): both are the truth `false`.
//! - `expireAfterDays`: no `lifecycle`, or none of its rules of our form, is the truth
//!   `None`. Several rules of our form (written by hand): the smallest age, which is
//!   the one that deletes first; an update writes them back as one.
//! - `tags`: no `labels` is the truth, an empty map. The marker is included; the engine
//!   strips it.
//! - `endpoint` (observed): always known, `gs://<name>`.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use infra_core::kinds::{
    ObjectStore, ObjectStoreObserved, ObjectStoreReported, ObjectStoreSettled,
};
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, ErrorKind, Idempotence, KindBackend, ListArgs, Listed,
    MarkArgs, Marker, OwnershipArgs, Partial, RawTags, ReadArgs, Reading, UpdateArgs, Written,
};
use reqwest::{Method, StatusCode, Url};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

use crate::clients::Clients;
use crate::config::Service;
use crate::error::{NOT_FOUND, from_answer, from_body, transport};
use crate::labels;
use crate::poll::settle_uncertain;

/// How many times an update or a mark is tried when the bucket changes under it.
const ATTEMPTS: u32 = 3;

// ---------------------------------------------------------------------------------
// The JSON API's shapes: exactly the fields used.

/// A bucket as Cloud Storage answers it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Bucket {
    #[serde(default)]
    name: String,
    #[serde(default)]
    location: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    versioning: Option<Versioning>,
    #[serde(default)]
    lifecycle: Option<Lifecycle>,
    /// A 64-bit integer, which Google's JSON carries as a string.
    #[serde(default, deserialize_with = "int64")]
    metageneration: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
struct Versioning {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    enabled: Option<bool>,
}

/// A lifecycle configuration. Rules are kept as JSON, so that the rules this crate
/// does not manage are written back exactly as read.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
struct Lifecycle {
    #[serde(default)]
    rule: Vec<Value>,
}

/// One page of `buckets.list`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BucketPage {
    #[serde(default)]
    items: Vec<Bucket>,
    #[serde(default)]
    next_page_token: Option<String>,
}

/// What `buckets.insert` sends.
#[derive(Debug, Serialize)]
struct NewBucket<'a> {
    name: &'a str,
    location: &'a str,
    labels: &'a RawTags,
    #[serde(skip_serializing_if = "Option::is_none")]
    versioning: Option<Versioning>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lifecycle: Option<Lifecycle>,
}

/// What `buckets.patch` sends: only the parts to change. A label mapped to `None` is
/// sent as `null`, which removes it.
#[derive(Debug, Default, PartialEq, Serialize)]
struct BucketPatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    labels: Option<BTreeMap<String, Option<String>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    versioning: Option<Versioning>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lifecycle: Option<Lifecycle>,
}

impl BucketPatch {
    fn is_empty(&self) -> bool {
        self.labels.is_none() && self.versioning.is_none() && self.lifecycle.is_none()
    }
}

/// A 64-bit integer given as a string (or a number).
fn int64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Int {
        Text(String),
        Number(i64),
    }
    Ok(match Option::<Int>::deserialize(d)? {
        None => None,
        Some(Int::Number(n)) => Some(n),
        Some(Int::Text(s)) => s.parse().ok(),
    })
}

// ---------------------------------------------------------------------------------
// Pure translations between the kind and the wire.

/// The lifecycle rule `expireAfterDays` stands for.
fn expiry_rule(days: u32) -> Value {
    json!({ "action": { "type": "Delete" }, "condition": { "age": days } })
}

/// The age of `rule` when it is of exactly our form; `None` for any other rule.
fn expiry_of(rule: &Value) -> Option<u32> {
    let action = rule.get("action")?.as_object()?;
    if action.len() != 1 || action.get("type")?.as_str()? != "Delete" {
        return None;
    }
    let condition = rule.get("condition")?.as_object()?;
    if condition.len() != 1 {
        return None;
    }
    let age = condition.get("age")?;
    // An int32 may come as a number or, from some writers, as a string.
    let age = age
        .as_u64()
        .or_else(|| age.as_str().and_then(|s| s.parse().ok()))?;
    u32::try_from(age).ok()
}

/// What the lifecycle says of `expireAfterDays`: the smallest age among our rules.
fn expire_after_days(lifecycle: Option<&Lifecycle>) -> Option<u32> {
    lifecycle?.rule.iter().filter_map(expiry_of).min()
}

/// The rule list with our rule set to `days`: every other rule kept in its place, ours
/// (all of them) replaced by one at the end, or none.
fn rules_with(current: Option<&Lifecycle>, days: Option<u32>) -> Vec<Value> {
    let mut rules: Vec<Value> = current
        .map(|l| {
            l.rule
                .iter()
                .filter(|r| expiry_of(r).is_none())
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    rules.extend(days.map(expiry_rule));
    rules
}

/// The label changes that bring `current` to `want`: each new or changed value, and
/// `None` (sent as `null`) for each key to remove. Empty when nothing changes.
fn label_changes(want: &RawTags, current: &RawTags) -> BTreeMap<String, Option<String>> {
    let mut changes: BTreeMap<String, Option<String>> = want
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    for key in current.keys().filter(|k| !want.contains_key(*k)) {
        changes.insert(key.clone(), None);
    }
    changes
}

/// Whether `bucket` lives in `region`.
fn in_region(bucket: &Bucket, region: &str) -> bool {
    bucket
        .location
        .as_deref()
        .is_some_and(|l| l.eq_ignore_ascii_case(region))
}

/// The bucket's labels, as stored.
fn labels_of(bucket: &Bucket) -> RawTags {
    bucket.labels.clone().unwrap_or_default()
}

/// The `age` an `expireAfterDays` is sent as, refused when it cannot be one.
fn checked_days(days: Option<u32>) -> Result<Option<u32>, BackendError> {
    match days {
        Some(d) if i32::try_from(d).is_err() => Err(BackendError::invalid(format!(
            "expireAfterDays {d} is out of range: Cloud Storage's lifecycle `age` condition \
             is a 32-bit integer (at most {})",
            i32::MAX
        ))),
        other => Ok(other),
    }
}

/// Refuses a name Cloud Storage refuses beyond the kind's own rule.
fn check_name(name: &str) -> Result<(), BackendError> {
    infra_core::kinds::bucket_name(name)
        .map_err(|why| BackendError::invalid(format!("bucket name {name:?} {why}")))?;
    let refuse = |why: &str| {
        Err(BackendError::invalid(format!(
            "bucket name {name:?} is refused by Cloud Storage: {why}"
        )))
    };
    if name.starts_with("goog") {
        return refuse("a name may not start with `goog`");
    }
    if name.contains("google") || name.contains("g00gle") {
        return refuse("a name may not contain `google` or a close misspelling of it");
    }
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() == 4
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 3 && p.chars().all(|c| c.is_ascii_digit()))
    {
        return refuse("a name may not be an IP address in dotted-decimal notation");
    }
    Ok(())
}

/// What `buckets.insert` sends for `name` in `region`, `labels` holding the marker.
fn insert_body<'a>(
    name: &'a str,
    region: &'a str,
    spec: &ObjectStoreSettled,
    labels: &'a RawTags,
) -> Result<NewBucket<'a>, BackendError> {
    let days = checked_days(spec.expire_after_days.known().copied().flatten())?;
    Ok(NewBucket {
        name,
        location: region,
        labels,
        versioning: spec
            .versioning
            .known()
            .map(|&on| Versioning { enabled: Some(on) }),
        lifecycle: days.map(|d| Lifecycle {
            rule: vec![expiry_rule(d)],
        }),
    })
}

/// What `buckets.patch` sends to bring `current` to `spec`: the declared parts that
/// differ, nothing else.
fn patch_body(spec: &ObjectStoreSettled, current: &Bucket) -> Result<BucketPatch, BackendError> {
    let mut patch = BucketPatch::default();
    if let Some(declared) = spec.tags.known() {
        let have = labels_of(current);
        let want = labels::for_update(declared, &have)?;
        let changes = label_changes(&want, &have);
        if !changes.is_empty() {
            patch.labels = Some(changes);
        }
    }
    if let Some(&on) = spec.versioning.known() {
        let now = current
            .versioning
            .as_ref()
            .and_then(|v| v.enabled)
            .unwrap_or(false);
        if now != on {
            patch.versioning = Some(Versioning { enabled: Some(on) });
        }
    }
    if let Some(&days) = spec.expire_after_days.known() {
        let days = checked_days(days)?;
        let rules = rules_with(current.lifecycle.as_ref(), days);
        let now = current
            .lifecycle
            .as_ref()
            .map(|l| l.rule.as_slice())
            .unwrap_or_default();
        if rules != now {
            patch.lifecycle = Some(Lifecycle { rule: rules });
        }
    }
    Ok(patch)
}

/// A read of `bucket`, its labels attached.
fn reading_of(bucket: &Bucket) -> Reading<ObjectStore> {
    let labels = labels_of(bucket);
    let versioning = bucket
        .versioning
        .as_ref()
        .and_then(|v| v.enabled)
        .unwrap_or(false);
    Reading::new(
        bucket.name.clone(),
        ObjectStoreObserved {
            id: bucket.name.clone(),
            endpoint: Partial::Known(format!("gs://{}", bucket.name)),
        },
        ObjectStoreReported {
            versioning: Partial::Known(versioning),
            expire_after_days: Partial::Known(expire_after_days(bucket.lifecycle.as_ref())),
            tags: Partial::Known(labels::reported(&labels)),
        },
    )
    .with_raw_tags(labels)
}

/// The refusal of a bucket that lives in another location than `region`.
fn elsewhere(bucket: &Bucket, region: &str) -> BackendError {
    BackendError::not_found(format!(
        "bucket {} is in {}, not in {region}",
        bucket.name,
        bucket
            .location
            .as_deref()
            .unwrap_or("no location Cloud Storage names")
    ))
    .with_code("NOT_FOUND")
}

/// An answer that could not be read.
fn unreadable(what: &str, err: &serde_json::Error) -> BackendError {
    BackendError::new(
        ErrorKind::Other,
        format!("{what}: the answer could not be read: {err}"),
    )
    .maybe_sent()
}

/// A `buckets.delete` refusal: a 409 is a bucket that still holds objects.
fn delete_refusal(err: BackendError, http: u16) -> BackendError {
    if http == 409 {
        BackendError {
            kind: ErrorKind::DependencyViolation,
            ..err
        }
    } else {
        err
    }
}

// ---------------------------------------------------------------------------------
// The calls.

/// An HTTP answer: its status and body.
struct Answer {
    status: StatusCode,
    bytes: Vec<u8>,
}

/// `ObjectStore` on Google Cloud: Cloud Storage buckets.
pub(crate) struct Buckets {
    clients: Arc<Clients>,
}

impl Buckets {
    /// The kind, reaching Google Cloud through `clients`.
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        Buckets { clients }
    }

    /// `{endpoint}/storage/v1/b`, then `/{bucket}` when given.
    fn url(&self, bucket: Option<&str>) -> Result<Url, BackendError> {
        let base = self.clients.endpoint(Service::Storage);
        let mut url = Url::parse(&format!("{base}/storage/v1/b")).map_err(|e| {
            BackendError::invalid(format!(
                "the Cloud Storage endpoint {base:?} is not a URL: {e}"
            ))
        })?;
        if let Some(bucket) = bucket {
            url.path_segments_mut()
                .map_err(|()| {
                    BackendError::invalid(format!(
                        "the Cloud Storage endpoint {base:?} cannot take a path"
                    ))
                })?
                .push(bucket);
        }
        Ok(url)
    }

    /// One call, retried by the configuration's policy (`buckets.insert` is the one
    /// call that is not idempotent: it is repeated only when it certainly did nothing).
    /// A transport failure, a throttled answer (429) and a failure on Google's side
    /// (5xx) that stand after the retries are errors; any other answer is the caller's
    /// to read.
    async fn call<B: Serialize + ?Sized>(
        &self,
        what: &str,
        method: Method,
        url: Url,
        body: Option<&B>,
    ) -> Result<Answer, BackendError> {
        let idempotence = if method == Method::POST {
            Idempotence::NotIdempotent
        } else {
            Idempotence::Idempotent
        };
        self.clients
            .retrier()
            .run(idempotence, || {
                self.attempt(what, method.clone(), url.clone(), body)
            })
            .await
    }

    /// One attempt of [`Buckets::call`], waiting at most the request timeout.
    async fn attempt<B: Serialize + ?Sized>(
        &self,
        what: &str,
        method: Method,
        url: Url,
        body: Option<&B>,
    ) -> Result<Answer, BackendError> {
        let (http, headers) = self.clients.http().await?;
        let mut request = http
            .request(method, url)
            .headers(headers)
            .timeout(self.clients.retry_policy().request_timeout());
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| transport(what, &e))?;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.map_err(|e| transport(what, &e))?;
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            return Err(from_answer(
                what,
                status.as_u16(),
                Some(&headers),
                &bytes,
                &[],
            ));
        }
        Ok(Answer {
            status,
            bytes: bytes.to_vec(),
        })
    }

    /// One call whose success answers a bucket.
    async fn bucket_call<B: Serialize + ?Sized>(
        &self,
        what: &str,
        method: Method,
        url: Url,
        body: Option<&B>,
        not_found: &[&str],
    ) -> Result<Bucket, BackendError> {
        let answer = self.call(what, method, url, body).await?;
        if !answer.status.is_success() {
            return Err(from_body(
                what,
                answer.status.as_u16(),
                &answer.bytes,
                not_found,
            ));
        }
        serde_json::from_slice(&answer.bytes).map_err(|e| unreadable(what, &e))
    }

    /// `buckets.get`, wherever the bucket lives.
    async fn get(&self, bucket: &str) -> Result<Bucket, BackendError> {
        let url = self.url(Some(bucket))?;
        self.bucket_call::<()>("storage:buckets.get", Method::GET, url, None, NOT_FOUND)
            .await
    }

    /// `buckets.get` of a bucket that must live in `region` (`NotFound` otherwise).
    async fn get_in(&self, region: &str, bucket: &str) -> Result<Bucket, BackendError> {
        let found = self.get(bucket).await?;
        if in_region(&found, region) {
            Ok(found)
        } else {
            Err(elsewhere(&found, region))
        }
    }

    /// `buckets.patch` of `bucket` with `patch`, on condition that it is still at
    /// `metageneration`. `Ok(None)` when it is not (412): read it again.
    async fn patch(
        &self,
        bucket: &str,
        metageneration: Option<i64>,
        patch: &BucketPatch,
    ) -> Result<Option<Bucket>, BackendError> {
        const WHAT: &str = "storage:buckets.patch";
        let mut url = self.url(Some(bucket))?;
        if let Some(m) = metageneration {
            url.query_pairs_mut()
                .append_pair("ifMetagenerationMatch", &m.to_string());
        }
        let answer = self.call(WHAT, Method::PATCH, url, Some(patch)).await?;
        if answer.status == StatusCode::PRECONDITION_FAILED {
            return Ok(None);
        }
        if !answer.status.is_success() {
            return Err(from_body(
                WHAT,
                answer.status.as_u16(),
                &answer.bytes,
                NOT_FOUND,
            ));
        }
        serde_json::from_slice(&answer.bytes)
            .map(Some)
            .map_err(|e| unreadable(WHAT, &e))
    }

    /// The refusal after the bucket changed under every attempt.
    fn kept_changing(bucket: &str) -> BackendError {
        BackendError::new(
            ErrorKind::Conflict,
            format!(
                "storage:buckets.patch: bucket {bucket} changed while it was being written \
                 ({ATTEMPTS} attempts, each answered 412 conditionNotMet); nothing was \
                 overwritten"
            ),
        )
        .with_code("conditionNotMet")
    }

    /// `buckets.insert`, and what it answered.
    async fn insert(&self, body: &NewBucket<'_>) -> Result<Bucket, BackendError> {
        let mut url = self.url(None)?;
        url.query_pairs_mut()
            .append_pair("project", self.clients.project());
        self.bucket_call("storage:buckets.insert", Method::POST, url, Some(body), &[])
            .await
    }
}

#[async_trait]
impl KindBackend<ObjectStore> for Buckets {
    /// `buckets.list` answers whole `Bucket` resources, as `buckets.get` does (the same
    /// schema in Google's discovery document, with the same default projection): each
    /// listed bucket is handed over with its read.
    fn lists_complete(&self) -> bool {
        true
    }

    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        const WHAT: &str = "storage:buckets.list";
        let ListArgs { region, .. } = args;
        let mut listed = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut url = self.url(None)?;
            {
                let mut query = url.query_pairs_mut();
                query.append_pair("project", self.clients.project());
                if let Some(token) = &token {
                    query.append_pair("pageToken", token);
                }
            }
            let answer = self.call::<()>(WHAT, Method::GET, url, None).await?;
            if !answer.status.is_success() {
                return Err(from_body(WHAT, answer.status.as_u16(), &answer.bytes, &[]));
            }
            let page: BucketPage =
                serde_json::from_slice(&answer.bytes).map_err(|e| unreadable(WHAT, &e))?;
            listed.extend(
                page.items
                    .into_iter()
                    .filter(|b| in_region(b, region))
                    .map(|b| {
                        Listed::new(b.name.clone(), b.name.clone()).with_reading(reading_of(&b))
                    }),
            );
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(next) if token.as_deref() != Some(next.as_str()) => token = Some(next),
                _ => break,
            }
        }
        Ok(listed)
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<ObjectStore>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        Ok(reading_of(&self.get_in(region, handle).await?))
    }

    async fn create(
        &self,
        args: CreateArgs<'_, ObjectStore>,
    ) -> Result<Written<Reading<ObjectStore>>, BackendError> {
        const WHAT: &str = "storage:buckets.insert";
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = args;
        check_name(name)?;
        let labels = labels::for_create(spec.tags.known(), marker, &[])?;
        let body = insert_body(name, region, spec, &labels)?;
        let created = match self.insert(&body).await {
            Ok(created) => created,
            Err(err) => {
                let found = settle_uncertain(err, marker, WHAT, async {
                    match self.get(name).await {
                        Ok(b) => Ok(Some((labels_of(&b), b))),
                        Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
                        Err(e) => Err(e),
                    }
                })
                .await?;
                if !in_region(&found, region) {
                    return Err(BackendError::new(
                        ErrorKind::Conflict,
                        format!(
                            "{WHAT}: the outcome of the create was unknown, and bucket {name} \
                             carries this fleet's marker but is in {}, not in {region}",
                            found.location.as_deref().unwrap_or("no location")
                        ),
                    ));
                }
                found
            }
        };
        // The read after the write; the insert's own answer (the bucket as stored) when
        // the read cannot see it yet.
        let read = match self.get_in(region, name).await {
            Ok(bucket) => bucket,
            Err(e) => {
                tracing::debug!("{WHAT}: bucket {name} created; the read after it failed: {e}");
                created
            }
        };
        Ok(Written::Done(reading_of(&read)))
    }

    async fn update(
        &self,
        args: UpdateArgs<'_, ObjectStore>,
    ) -> Result<Written<Reading<ObjectStore>>, BackendError> {
        let UpdateArgs {
            region,
            handle,
            spec,
            ..
        } = args;
        for _ in 0..ATTEMPTS {
            let current = self.get_in(region, handle).await?;
            let patch = patch_body(spec, &current)?;
            if patch.is_empty() {
                return Ok(Written::Done(reading_of(&current)));
            }
            if self
                .patch(handle, current.metageneration, &patch)
                .await?
                .is_some()
            {
                let read = self.read(ReadArgs::new(region, handle)).await?;
                return Ok(Written::Done(read));
            }
        }
        Err(Self::kept_changing(handle))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        const WHAT: &str = "storage:buckets.delete";
        let DeleteArgs { region, handle, .. } = args;
        self.get_in(region, handle).await?;
        let url = self.url(Some(handle))?;
        let answer = self.call::<()>(WHAT, Method::DELETE, url, None).await?;
        if answer.status.is_success() {
            return Ok(());
        }
        let code = answer.status.as_u16();
        Err(delete_refusal(
            from_body(WHAT, code, &answer.bytes, NOT_FOUND),
            code,
        ))
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        Ok(labels_of(&self.get_in(region, handle).await?))
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        for _ in 0..ATTEMPTS {
            let current = self.get_in(region, handle).await?;
            let Some(_) =
                labels::marking(&labels_of(&current), marker, &format!("bucket {handle}"))?
            else {
                return Ok(());
            };
            let patch = marker_patch(marker);
            if self
                .patch(handle, current.metageneration, &patch)
                .await?
                .is_some()
            {
                return Ok(());
            }
        }
        Err(Self::kept_changing(handle))
    }
}

/// The patch that adds the marker alone: labels are merged key by key.
fn marker_patch(marker: &Marker) -> BucketPatch {
    BucketPatch {
        labels: Some(BTreeMap::from([(
            marker.key().to_owned(),
            Some(marker.value().to_owned()),
        )])),
        ..BucketPatch::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> RawTags {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn spec(
        versioning: Partial<bool>,
        expire: Partial<Option<u32>>,
        declared: Partial<RawTags>,
    ) -> ObjectStoreSettled {
        ObjectStoreSettled {
            versioning,
            expire_after_days: expire,
            tags: declared,
        }
    }

    fn bucket(value: Value) -> Bucket {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_bucket_reads_as_the_kind_with_its_location_case_ignored() {
        let b = bucket(json!({
            "kind": "storage#bucket", "id": "assets", "name": "assets",
            "location": "EUROPE-WEST1", "metageneration": "4",
            "labels": {"managed-by-infra": "shop", "team": "web"},
            "versioning": {"enabled": true},
            "lifecycle": {"rule": [
                {"action": {"type": "SetStorageClass", "storageClass": "NEARLINE"},
                 "condition": {"age": 10}},
                {"action": {"type": "Delete"}, "condition": {"age": 30}}
            ]}
        }));
        assert!(in_region(&b, "europe-west1"));
        assert!(!in_region(&b, "us-central1"));
        assert_eq!(b.metageneration, Some(4));
        let r = reading_of(&b);
        assert_eq!(r.handle(), "assets");
        assert_eq!(
            r.observed().endpoint,
            Partial::Known("gs://assets".to_owned())
        );
        let reported = r.reported();
        assert_eq!(reported["versioning"], json!(true));
        assert_eq!(reported["expireAfterDays"], json!(30));
        assert_eq!(
            reported["tags"],
            json!({"managed-by-infra": "shop", "team": "web"})
        );
    }

    #[test]
    fn what_google_leaves_out_is_the_truth_off_none_and_empty() {
        let r = reading_of(&bucket(json!({"name": "b1", "location": "US-CENTRAL1"})));
        let reported = r.reported();
        assert_eq!(reported["versioning"], json!(false));
        assert_eq!(reported["expireAfterDays"], Value::Null);
        assert!(reported.contains_key("expireAfterDays"));
        assert_eq!(reported["tags"], json!({}));
        let off = reading_of(&bucket(json!({"name": "b1", "versioning": {}})));
        assert_eq!(off.reported()["versioning"], json!(false));
        // A bucket with no location is in no region.
        assert!(!in_region(&bucket(json!({"name": "b1"})), "us-central1"));
    }

    #[test]
    fn only_a_bare_delete_by_age_is_our_rule() {
        assert_eq!(expiry_of(&expiry_rule(7)), Some(7));
        assert_eq!(
            expiry_of(&json!({"action": {"type": "Delete"}, "condition": {"age": "9"}})),
            Some(9)
        );
        for other in [
            json!({"action": {"type": "Delete"}, "condition": {"age": 7, "isLive": false}}),
            json!({"action": {"type": "SetStorageClass", "storageClass": "COLDLINE"}, "condition": {"age": 7}}),
            json!({"action": {"type": "Delete"}, "condition": {"numNewerVersions": 3}}),
            json!({"action": {"type": "AbortIncompleteMultipartUpload"}, "condition": {"age": 1}}),
        ] {
            assert_eq!(expiry_of(&other), None, "{other}");
        }
        let several = Lifecycle {
            rule: vec![expiry_rule(40), expiry_rule(12)],
        };
        assert_eq!(expire_after_days(Some(&several)), Some(12));
    }

    #[test]
    fn writing_the_expiry_keeps_every_other_rule_in_its_place() {
        let keep = json!({"action": {"type": "Delete"}, "condition": {"numNewerVersions": 3}});
        let current = Lifecycle {
            rule: vec![expiry_rule(5), keep.clone(), expiry_rule(9)],
        };
        assert_eq!(
            rules_with(Some(&current), Some(30)),
            vec![keep.clone(), expiry_rule(30)]
        );
        assert_eq!(rules_with(Some(&current), None), vec![keep]);
        assert_eq!(rules_with(None, None), Vec::<Value>::new());
    }

    #[test]
    fn an_insert_carries_the_marker_and_says_only_what_is_declared() {
        let marker = Marker::new("shop");
        let s = spec(
            Partial::Known(true),
            Partial::Known(Some(30)),
            Partial::Known(tags(&[("team", "web")])),
        );
        let labels = labels::for_create(s.tags.known(), &marker, &[]).unwrap();
        let body = insert_body("assets", "europe-west1", &s, &labels).unwrap();
        assert_eq!(
            serde_json::to_value(&body).unwrap(),
            json!({
                "name": "assets", "location": "europe-west1",
                "labels": {"managed-by-infra": "shop", "team": "web"},
                "versioning": {"enabled": true},
                "lifecycle": {"rule": [{"action": {"type": "Delete"}, "condition": {"age": 30}}]}
            })
        );
        let bare = spec(Partial::Unknown, Partial::Known(None), Partial::Unknown);
        let labels = labels::for_create(None, &marker, &[]).unwrap();
        assert_eq!(
            serde_json::to_value(insert_body("assets", "us-central1", &bare, &labels).unwrap())
                .unwrap(),
            json!({"name": "assets", "location": "us-central1", "labels": {"managed-by-infra": "shop"}})
        );
    }

    #[test]
    fn a_patch_sends_only_what_is_declared_and_differs() {
        let current = bucket(json!({
            "name": "assets", "location": "EUROPE-WEST1",
            "labels": {"managed-by-infra": "shop", "team": "web", "old": "x"},
            "versioning": {"enabled": true},
            "lifecycle": {"rule": [
                {"action": {"type": "Delete"}, "condition": {"numNewerVersions": 3}},
                {"action": {"type": "Delete"}, "condition": {"age": 30}}
            ]}
        }));
        // Nothing declared: nothing sent.
        let none = spec(Partial::Unknown, Partial::Unknown, Partial::Unknown);
        assert!(patch_body(&none, &current).unwrap().is_empty());
        // Declared as it is: nothing sent either.
        let same = spec(
            Partial::Known(true),
            Partial::Known(Some(30)),
            Partial::Known(tags(&[("team", "web"), ("old", "x")])),
        );
        assert!(patch_body(&same, &current).unwrap().is_empty());
        // Changed: labels as changes (the marker kept, `old` removed with null), the
        // versioning, the rule list with the other rule kept.
        let changed = spec(
            Partial::Known(false),
            Partial::Known(Some(7)),
            Partial::Known(tags(&[("team", "ops"), ("managed-by-infra", "blog")])),
        );
        assert_eq!(
            serde_json::to_value(patch_body(&changed, &current).unwrap()).unwrap(),
            json!({
                "labels": {"old": null, "team": "ops"},
                "versioning": {"enabled": false},
                "lifecycle": {"rule": [
                    {"action": {"type": "Delete"}, "condition": {"numNewerVersions": 3}},
                    {"action": {"type": "Delete"}, "condition": {"age": 7}}
                ]}
            })
        );
        // No expiry: our rule goes, the other stays.
        let unexpired = spec(Partial::Unknown, Partial::Known(None), Partial::Unknown);
        assert_eq!(
            serde_json::to_value(patch_body(&unexpired, &current).unwrap()).unwrap(),
            json!({"lifecycle": {"rule": [
                {"action": {"type": "Delete"}, "condition": {"numNewerVersions": 3}}
            ]}})
        );
        // A bucket never versioned, declared unversioned: nothing to send.
        let plain = bucket(json!({"name": "assets", "location": "EU"}));
        let off = spec(
            Partial::Known(false),
            Partial::Known(None),
            Partial::Unknown,
        );
        assert!(patch_body(&off, &plain).unwrap().is_empty());
    }

    #[test]
    fn marking_patches_the_marker_label_alone() {
        assert_eq!(
            serde_json::to_value(marker_patch(&Marker::new("shop"))).unwrap(),
            json!({"labels": {"managed-by-infra": "shop"}})
        );
    }

    #[test]
    fn what_cloud_storage_refuses_is_refused_before_calling() {
        for bad in [
            "goog-assets",
            "my-google-files",
            "g00gle-x",
            "192.168.5.4",
            "Upper",
            "ab",
        ] {
            let err = check_name(bad).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Invalid, "{bad}");
        }
        for good in ["assets", "a.b.c", "1.2.3.4.5", "shop-assets-2"] {
            check_name(good).unwrap();
        }
        let far = spec(
            Partial::Unknown,
            Partial::Known(Some(u32::MAX)),
            Partial::Unknown,
        );
        let labels = RawTags::new();
        let err = insert_body("assets", "us-central1", &far, &labels).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid);
        assert!(err.message.contains("32-bit"), "{}", err.message);
    }

    #[test]
    fn a_bucket_elsewhere_is_not_found_and_a_full_bucket_a_dependency() {
        let b = bucket(json!({"name": "assets", "location": "US-CENTRAL1"}));
        let err = elsewhere(&b, "europe-west1");
        assert_eq!(err.kind, ErrorKind::NotFound);
        assert!(err.message.contains("US-CENTRAL1"), "{}", err.message);
        let body = br#"{"error":{"code":409,"message":"The bucket you tried to delete is not empty.","errors":[{"domain":"global","reason":"conflict"}]}}"#;
        let refused = delete_refusal(
            from_body("storage:buckets.delete", 409, body, NOT_FOUND),
            409,
        );
        assert_eq!(refused.kind, ErrorKind::DependencyViolation);
        assert!(refused.message.contains("not empty"));
        let gone = delete_refusal(
            from_body("storage:buckets.delete", 404, b"{}", NOT_FOUND),
            404,
        );
        assert_eq!(gone.kind, ErrorKind::NotFound);
    }

    #[test]
    fn label_changes_set_what_differs_and_null_what_goes() {
        let current = tags(&[("a", "1"), ("b", "2")]);
        let want = tags(&[("a", "1"), ("b", "3"), ("c", "4")]);
        assert_eq!(
            label_changes(&want, &current),
            BTreeMap::from([
                ("b".to_owned(), Some("3".to_owned())),
                ("c".to_owned(), Some("4".to_owned())),
            ])
        );
        assert_eq!(
            label_changes(&tags(&[]), &current),
            BTreeMap::from([("a".to_owned(), None), ("b".to_owned(), None)])
        );
        assert!(label_changes(&current, &current).is_empty());
    }
}
