//! Object Storage, through its S3 API: the portable `objectStore` kind, and the mapping
//! of the S3 and SQS SDKs' errors that this module and `crate::queues` share.
//!
//! An `objectStore` is a bucket of Object Storage, reached at
//! `https://s3.{region}.scw.cloud` (path-style) in the resource's region. The handle and
//! the observed `id` are the bucket's name; the observed `endpoint` is
//! `https://{name}.s3.{region}.scw.cloud`.
//!
//! **Regions.** Bucket names are global to Object Storage, but each bucket lives in one
//! region: its `LocationConstraint`, set by `CreateBucket` to the region asked about and
//! answered by `GetBucketLocation`. `list` in a region is `ListBuckets` (following
//! continuation tokens when Object Storage gives any) and then the location of each
//! bucket, keeping the region's own; a bucket gone between the two calls is left out.
//! Every other call asks the location first: a bucket of another region is `NotFound`
//! in this one, and is never read, changed or deleted from here. A location answered
//! empty cannot be placed in any region, and is an error, never a guess.
//!
//! **The marker.** Object Storage does not document tags inside `CreateBucket`, so the
//! marker is written by a `PutBucketTagging` right after it, inside the same `create`.
//! Should that tagging fail, the bucket just made (empty, and unmarked) is deleted again
//! and the tagging's error is answered; should that delete fail too, the error says
//! that the bucket exists unmarked and must be deleted or marked by hand. A create
//! whose `CreateBucket` answer was lost looks the bucket up by name and marker
//! (`settle_uncertain`). A name taken by someone else (`BucketAlreadyExists`) is
//! `Conflict`; so is a bucket of the name already in this project
//! (`BucketAlreadyOwnedByYou`), whose marker the error names: `create` never answers a
//! bucket it did not make. S3 tags are key/value pairs, so this module keeps them as a
//! map; an update keeps the marker the bucket carries and ignores a declared one, and
//! `mark` adds the marker to the tag set it read (`PutBucketTagging` replaces the whole
//! set), refusing a bucket carrying another fleet's marker (`crate::tags::marking`).
//!
//! **Expiry.** `expireAfterDays` is the lifecycle rule with id `infra-expire`
//! (expiration after that many days, every object, enabled). Rules of other tools are
//! kept: the configuration is read, our rule replaced or removed, and the rest written
//! back (`DeleteBucketLifecycle` when nothing is left).
//!
//! An update reads the bucket first and writes only what differs: the tags, the
//! versioning status, the lifecycle. A delete is `DeleteBucket`: a bucket holding
//! objects is `DependencyViolation` (Object Storage refuses it) and is left as it was.
//!
//! What read reports when Object Storage does not say:
//! - `versioning`: a bucket never versioned answers no status, the truth `false`;
//!   `Suspended` is `false` too. An answer the SDK cannot read is `Unknown`.
//! - `expireAfterDays`: no lifecycle configuration, or none with our rule (or our rule
//!   disabled), is the truth `None`.
//! - `tags`: `NoSuchTagSet` is the truth, an empty map. The marker is included (the
//!   engine strips it), and the read carries the raw tags for the ownership check.

use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, BucketLocationConstraint, BucketVersioningStatus,
    CreateBucketConfiguration, ExpirationStatus, LifecycleExpiration, LifecycleRule,
    LifecycleRuleFilter, Tag, Tagging, VersioningConfiguration,
};
use infra_core::kinds::{ObjectStore, ObjectStoreObserved, ObjectStoreReported};
use infra_core::prelude::Partial;
use infra_core::sdk::poll::settle_uncertain;
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, ErrorKind, KindBackend, ListArgs, Listed, MARKER_KEY,
    MarkArgs, Marker, Ownership, OwnershipArgs, RawTags, ReadArgs, Reading, Router, UpdateArgs,
    Written,
};

use crate::aws_error::sdk_error;
use crate::clients::Clients;
use crate::tags;

/// Codes that mean "this bucket does not exist", for every call naming a bucket.
const NO_BUCKET: &[&str] = &["NoSuchBucket"];
/// The id of the lifecycle rule `expireAfterDays` manages.
const EXPIRE_RULE: &str = "infra-expire";

/// Adds this product's kind to `router`.
pub(crate) fn register(mut router: Router, clients: &Arc<Clients>) -> Router {
    router.add::<ObjectStore>(ObjectStores::new(Arc::clone(clients)));
    router
}

/// The bucket `name` of the region whose client `s3` is.
struct Bucket<'a> {
    s3: Client,
    region: &'a str,
    name: &'a str,
}

/// What a read of a bucket finds.
struct BucketState {
    versioning: Partial<bool>,
    rules: Vec<LifecycleRule>,
    tags: RawTags,
}

/// The region Object Storage says `bucket` lives in.
async fn location(s3: &Client, bucket: &str) -> Result<String, BackendError> {
    let out = s3
        .get_bucket_location()
        .bucket(bucket)
        .send()
        .await
        .map_err(|e| sdk_error("s3:GetBucketLocation", e, NO_BUCKET, false))?;
    match out
        .location_constraint()
        .map(BucketLocationConstraint::as_str)
    {
        Some(region) if !region.is_empty() => Ok(region.to_owned()),
        _ => Err(BackendError::new(
            ErrorKind::Other,
            format!(
                "s3:GetBucketLocation answered no region for bucket {bucket}: it cannot be \
                 placed in any region"
            ),
        )),
    }
}

/// Every bucket of `region`: `ListBuckets`, then each bucket's location.
async fn list_region(s3: &Client, region: &str) -> Result<Vec<Listed>, BackendError> {
    let mut listed = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let out = s3
            .list_buckets()
            .set_continuation_token(token.take())
            .send()
            .await
            .map_err(|e| sdk_error("s3:ListBuckets", e, &[], false))?;
        for bucket in out.buckets() {
            let Some(name) = bucket.name() else { continue };
            let at = match bucket.bucket_region() {
                Some(r) if !r.is_empty() => r.to_owned(),
                _ => match location(s3, name).await {
                    Ok(r) => r,
                    // Deleted between the list and now: in no region.
                    Err(e) if e.kind == ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                },
            };
            if at == region {
                listed.push(Listed::new(name.to_owned(), name.to_owned()));
            }
        }
        match out.continuation_token() {
            Some(next) if !next.is_empty() => token = Some(next.to_owned()),
            _ => return Ok(listed),
        }
    }
}

/// The tags `wanted` of a bucket whose marker is what `current` carries: the declared
/// tags, less any declared marker, with the marker of `current` (if any).
fn with_marker_of(declared: &RawTags, current: &RawTags) -> RawTags {
    let mut want: RawTags = declared
        .iter()
        .filter(|(k, _)| k.as_str() != MARKER_KEY)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(v) = current.get(MARKER_KEY) {
        want.insert(MARKER_KEY.to_owned(), v.clone());
    }
    want
}

/// The lifecycle rule that expires every object after `days`.
fn expire_rule(days: u32) -> Result<LifecycleRule, BackendError> {
    LifecycleRule::builder()
        .id(EXPIRE_RULE)
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix("").build())
        .expiration(
            LifecycleExpiration::builder()
                .days(i32::try_from(days).unwrap_or(i32::MAX))
                .build(),
        )
        .build()
        .map_err(|e| BackendError::invalid(format!("the lifecycle rule {EXPIRE_RULE}: {e}")))
}

/// `expireAfterDays` as the rules say it: our rule's days when it is enabled.
fn expiry(rules: &[LifecycleRule]) -> Option<u32> {
    rules
        .iter()
        .find(|r| r.id() == Some(EXPIRE_RULE))
        .filter(|r| r.status() == &ExpirationStatus::Enabled)
        .and_then(LifecycleRule::expiration)
        .and_then(LifecycleExpiration::days)
        .and_then(|d| u32::try_from(d).ok())
}

/// The rules to write for `days`: those of other tools as they are, and ours.
fn rules_with(
    rules: &[LifecycleRule],
    days: Option<u32>,
) -> Result<Vec<LifecycleRule>, BackendError> {
    let mut out: Vec<LifecycleRule> = rules
        .iter()
        .filter(|r| r.id() != Some(EXPIRE_RULE))
        .cloned()
        .collect();
    if let Some(days) = days {
        out.push(expire_rule(days)?);
    }
    Ok(out)
}

impl Bucket<'_> {
    /// Fails with `NotFound` unless the bucket lives in this region.
    async fn located(&self) -> Result<(), BackendError> {
        let at = location(&self.s3, self.name).await?;
        if at != self.region {
            return Err(BackendError::not_found(format!(
                "bucket {} is in {at}, not in {}",
                self.name, self.region
            ))
            .with_code("NoSuchBucket"));
        }
        Ok(())
    }

    async fn tags(&self) -> Result<RawTags, BackendError> {
        match self.s3.get_bucket_tagging().bucket(self.name).send().await {
            Ok(out) => Ok(out
                .tag_set()
                .iter()
                .map(|t| (t.key().to_owned(), t.value().to_owned()))
                .collect()),
            Err(e) => {
                let e = sdk_error("s3:GetBucketTagging", e, NO_BUCKET, false);
                if e.code.as_deref() == Some("NoSuchTagSet") {
                    Ok(RawTags::new())
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Writes the whole tag set (`DeleteBucketTagging` for none).
    async fn put_tags(&self, tags: &RawTags) -> Result<(), BackendError> {
        if tags.is_empty() {
            self.s3
                .delete_bucket_tagging()
                .bucket(self.name)
                .send()
                .await
                .map_err(|e| sdk_error("s3:DeleteBucketTagging", e, NO_BUCKET, true))?;
            return Ok(());
        }
        let set = tags
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| BackendError::invalid(format!("a tag of bucket {}: {e}", self.name)))?;
        let tagging = Tagging::builder()
            .set_tag_set(Some(set))
            .build()
            .map_err(|e| BackendError::invalid(format!("the tags of bucket {}: {e}", self.name)))?;
        self.s3
            .put_bucket_tagging()
            .bucket(self.name)
            .tagging(tagging)
            .send()
            .await
            .map_err(|e| sdk_error("s3:PutBucketTagging", e, NO_BUCKET, true))?;
        Ok(())
    }

    async fn versioning(&self) -> Result<Partial<bool>, BackendError> {
        match self
            .s3
            .get_bucket_versioning()
            .bucket(self.name)
            .send()
            .await
        {
            Ok(out) => Ok(Partial::Known(
                out.status() == Some(&BucketVersioningStatus::Enabled),
            )),
            // A success the SDK could not read (moto's answer for a bucket never
            // versioned): not said, never guessed.
            Err(SdkError::ServiceError(s)) if s.raw().status().is_success() => Ok(Partial::Unknown),
            Err(e) => Err(sdk_error("s3:GetBucketVersioning", e, NO_BUCKET, false)),
        }
    }

    async fn set_versioning(&self, on: bool) -> Result<(), BackendError> {
        let status = if on {
            BucketVersioningStatus::Enabled
        } else {
            BucketVersioningStatus::Suspended
        };
        self.s3
            .put_bucket_versioning()
            .bucket(self.name)
            .versioning_configuration(VersioningConfiguration::builder().status(status).build())
            .send()
            .await
            .map_err(|e| sdk_error("s3:PutBucketVersioning", e, NO_BUCKET, true))?;
        Ok(())
    }

    async fn rules(&self) -> Result<Vec<LifecycleRule>, BackendError> {
        let got = self
            .s3
            .get_bucket_lifecycle_configuration()
            .bucket(self.name)
            .send()
            .await;
        match got {
            Ok(out) => Ok(out.rules().to_vec()),
            Err(e) => {
                let e = sdk_error("s3:GetBucketLifecycleConfiguration", e, NO_BUCKET, false);
                if e.code.as_deref() == Some("NoSuchLifecycleConfiguration") {
                    Ok(Vec::new())
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Writes `rules` as the whole lifecycle (`DeleteBucketLifecycle` for none).
    async fn put_rules(&self, rules: Vec<LifecycleRule>) -> Result<(), BackendError> {
        if rules.is_empty() {
            self.s3
                .delete_bucket_lifecycle()
                .bucket(self.name)
                .send()
                .await
                .map_err(|e| sdk_error("s3:DeleteBucketLifecycle", e, NO_BUCKET, true))?;
            return Ok(());
        }
        let config = BucketLifecycleConfiguration::builder()
            .set_rules(Some(rules))
            .build()
            .map_err(|e| BackendError::invalid(format!("the lifecycle configuration: {e}")))?;
        self.s3
            .put_bucket_lifecycle_configuration()
            .bucket(self.name)
            .lifecycle_configuration(config)
            .send()
            .await
            .map_err(|e| sdk_error("s3:PutBucketLifecycleConfiguration", e, NO_BUCKET, true))?;
        Ok(())
    }

    async fn state(&self) -> Result<BucketState, BackendError> {
        self.located().await?;
        Ok(BucketState {
            versioning: self.versioning().await?,
            rules: self.rules().await?,
            tags: self.tags().await?,
        })
    }

    fn reading(&self, state: BucketState) -> Reading<ObjectStore> {
        Reading::new(
            self.name,
            ObjectStoreObserved {
                id: self.name.to_owned(),
                endpoint: Partial::Known(format!(
                    "https://{}.s3.{}.scw.cloud",
                    self.name, self.region
                )),
            },
            ObjectStoreReported {
                versioning: state.versioning,
                expire_after_days: Partial::Known(expiry(&state.rules)),
                tags: Partial::Known(state.tags.clone()),
            },
        )
        .with_raw_tags(state.tags)
    }

    async fn read(&self) -> Result<Reading<ObjectStore>, BackendError> {
        Ok(self.reading(self.state().await?))
    }

    /// `CreateBucket` in this region: `true` when it made the bucket, `false` when its
    /// answer was lost and the bucket found carries this fleet's marker. A bucket of the
    /// name already in this project is `Conflict`.
    async fn create(&self, marker: &Marker) -> Result<bool, BackendError> {
        let configuration = CreateBucketConfiguration::builder()
            .location_constraint(BucketLocationConstraint::from(self.region))
            .build();
        let sent = self
            .s3
            .create_bucket()
            .bucket(self.name)
            .create_bucket_configuration(configuration)
            .send()
            .await;
        let Err(e) = sent else { return Ok(true) };
        let err = sdk_error("s3:CreateBucket", e, &[], true);
        if err.code.as_deref() == Some("BucketAlreadyOwnedByYou") {
            return Err(self.already_here(err, marker).await);
        }
        let what = format!("s3:CreateBucket of {}", self.name);
        settle_uncertain(err, marker, &what, async {
            match self.located().await {
                Ok(()) => Ok(Some((self.tags().await?, false))),
                Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            }
        })
        .await
    }

    /// The `Conflict` of a create meeting a bucket of the name in this project, saying
    /// whose marker it carries (as far as it can be read).
    async fn already_here(&self, err: BackendError, marker: &Marker) -> BackendError {
        let whose = match self.tags().await {
            Ok(tags) => match marker.verdict(&tags) {
                Ownership::Ours => "it carries this fleet's marker".to_owned(),
                Ownership::OtherFleet { fleet } => format!("it carries fleet `{fleet}`'s marker"),
                Ownership::Unmarked => "it carries no marker; `mark` takes it over".to_owned(),
            },
            Err(e) => format!("its tags could not be read: {e}"),
        };
        BackendError {
            message: format!(
                "{}: bucket {} already exists in this project; {whose}",
                err.message, self.name
            ),
            ..err
        }
    }

    /// Writes the tags of a bucket just made; on failure, deletes it again (it is empty
    /// and unmarked) and answers the error, saying what is left.
    async fn mark_new(&self, tags: &RawTags) -> Result<(), BackendError> {
        let Err(err) = self.put_tags(tags).await else {
            return Ok(());
        };
        match self.delete().await {
            // Nothing is left: the outcome is certain.
            Ok(()) => Err(BackendError {
                message: format!(
                    "{}; bucket {} was created but could not be marked, and was deleted again",
                    err.message, self.name
                ),
                may_have_been_sent: false,
                ..err
            }),
            Err(gone) => Err(BackendError {
                message: format!(
                    "{}; bucket {} was created but could not be marked, and deleting it \
                     failed too ({}): it exists unmarked, and must be deleted or marked by \
                     hand",
                    err.message, self.name, gone.message
                ),
                ..err
            }
            .maybe_sent()),
        }
    }

    async fn delete(&self) -> Result<(), BackendError> {
        self.s3
            .delete_bucket()
            .bucket(self.name)
            .send()
            .await
            .map_err(|e| sdk_error("s3:DeleteBucket", e, NO_BUCKET, true))?;
        Ok(())
    }

    /// Brings the bucket from `now` to the `versioning` and `expire` (expiry days) said,
    /// writing only what differs.
    async fn converge(
        &self,
        now: &BucketState,
        versioning: Option<bool>,
        expire: Option<Option<u32>>,
    ) -> Result<(), BackendError> {
        if let Some(on) = versioning
            && now.versioning.known() != Some(&on)
        {
            self.set_versioning(on).await?;
        }
        if let Some(days) = expire
            && expiry(&now.rules) != days
        {
            self.put_rules(rules_with(&now.rules, days)?).await?;
        }
        Ok(())
    }
}

/// `objectStore`: a bucket of Object Storage, in whichever region a call names.
pub(crate) struct ObjectStores {
    clients: Arc<Clients>,
}

impl ObjectStores {
    /// The kind, reaching Object Storage through `clients` (one S3 client per region).
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        ObjectStores { clients }
    }

    fn bucket<'a>(&self, region: &'a str, name: &'a str) -> Bucket<'a> {
        Bucket {
            s3: self.clients.s3(region),
            region,
            name,
        }
    }
}

#[async_trait]
impl KindBackend<ObjectStore> for ObjectStores {
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        list_region(&self.clients.s3(region), region).await
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<ObjectStore>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        self.bucket(region, handle).read().await
    }

    async fn create(
        &self,
        args: CreateArgs<'_, ObjectStore>,
    ) -> Result<Written<Reading<ObjectStore>>, BackendError> {
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = args;
        let bucket = self.bucket(region, name);
        let ours = RawTags::from([(marker.key().to_owned(), marker.value().to_owned())]);
        let tags = with_marker_of(spec.tags.known().unwrap_or(&RawTags::new()), &ours);
        let now = if bucket.create(marker).await? {
            bucket.mark_new(&tags).await?;
            // Just made: never versioned, no lifecycle.
            BucketState {
                versioning: Partial::Known(false),
                rules: Vec::new(),
                tags,
            }
        } else {
            // Made by a create whose answer was lost, and marked since: read as it is.
            let now = bucket.state().await?;
            if now.tags != tags {
                bucket.put_tags(&tags).await?;
            }
            now
        };
        bucket
            .converge(
                &now,
                spec.versioning.known().copied(),
                spec.expire_after_days.known().copied(),
            )
            .await?;
        Ok(Written::Done(bucket.read().await?))
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
        let bucket = self.bucket(region, handle);
        let now = bucket.state().await?;
        if let Some(declared) = spec.tags.known() {
            let want = with_marker_of(declared, &now.tags);
            if want != now.tags {
                bucket.put_tags(&want).await?;
            }
        }
        bucket
            .converge(
                &now,
                spec.versioning.known().copied(),
                spec.expire_after_days.known().copied(),
            )
            .await?;
        Ok(Written::Done(bucket.read().await?))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        let bucket = self.bucket(region, handle);
        bucket.located().await?;
        bucket.delete().await
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let bucket = self.bucket(region, handle);
        bucket.located().await?;
        bucket.tags().await
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let bucket = self.bucket(region, handle);
        bucket.located().await?;
        let mut all = bucket.tags().await?;
        let what = format!("bucket {handle}");
        if tags::marking(&tags::from_map(&all), marker, &what)?.is_some() {
            // Every tag read is written back with the marker: the set is replaced whole.
            all.insert(marker.key().to_owned(), marker.value().to_owned());
            bucket.put_tags(&all).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> RawTags {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_marker_is_the_one_the_bucket_carries_never_a_declared_one() {
        let declared = map(&[("team", "web"), (MARKER_KEY, "other")]);
        let marked = map(&[(MARKER_KEY, "shop"), ("old", "1")]);
        assert_eq!(
            with_marker_of(&declared, &marked),
            map(&[("team", "web"), (MARKER_KEY, "shop")])
        );
        assert_eq!(
            with_marker_of(&declared, &map(&[("old", "1")])),
            map(&[("team", "web")])
        );
        // A key holding `=` survives (S3 allows it; Scaleway's string tags would not).
        assert_eq!(
            with_marker_of(&map(&[("a=b", "c")]), &RawTags::new()),
            map(&[("a=b", "c")])
        );
    }

    #[test]
    fn our_lifecycle_rule_is_replaced_or_removed_and_the_others_kept() {
        let theirs = LifecycleRule::builder()
            .id("their-rule")
            .status(ExpirationStatus::Enabled)
            .filter(LifecycleRuleFilter::builder().prefix("logs/").build())
            .expiration(LifecycleExpiration::builder().days(7).build())
            .build()
            .unwrap();
        let rules = vec![theirs.clone(), expire_rule(30).unwrap()];
        assert_eq!(expiry(&rules), Some(30));
        assert_eq!(expiry(std::slice::from_ref(&theirs)), None);
        let changed = rules_with(&rules, Some(10)).unwrap();
        assert_eq!(changed.len(), 2);
        assert_eq!(changed[0], theirs);
        assert_eq!(expiry(&changed), Some(10));
        assert_eq!(rules_with(&rules, None).unwrap(), vec![theirs]);
        let disabled = LifecycleRule::builder()
            .id(EXPIRE_RULE)
            .status(ExpirationStatus::Disabled)
            .expiration(LifecycleExpiration::builder().days(3).build())
            .build()
            .unwrap();
        assert_eq!(expiry(&[disabled]), None);
    }
}
