//! S3: the `s3Bucket` and `objectStore` kinds.
//!
//! What read reports when S3 does not say:
//! - `versioning`: S3 always answers; a bucket never versioned has no status, which is
//!   the truth `false`. An answer the SDK cannot read (a stand-in's quirk) is `Unknown`.
//! - `objectLock`: "no configuration" is the truth `false`.
//! - `blockPublicAccess`: "no configuration" is the truth `false`; `true` only when all
//!   four switches are on.
//! - `expireAfterDays`: "no lifecycle" is the truth `None`; a lifecycle without our rule
//!   is `None` too (our rule is the one the field manages).
//! - `tags`: "no tag set" is the truth, an empty map. The marker is included; the engine
//!   strips it.
//!
//! The marker is part of `CreateBucket` itself (its configuration carries tags), and
//! written again at once with `PutBucketTagging` for stand-ins that drop tags on create.
//! `mark` puts it on a bucket made elsewhere by writing back the tag set it read with the
//! marker added (`PutBucketTagging` replaces the whole set).

use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, BucketLocationConstraint, BucketVersioningStatus,
    CreateBucketConfiguration, ExpirationStatus, LifecycleExpiration, LifecycleRule,
    LifecycleRuleFilter, ObjectLockEnabled, PublicAccessBlockConfiguration, Tag, Tagging,
    VersioningConfiguration,
};
use infra_core::kinds::{
    ObjectStore, ObjectStoreObserved, ObjectStoreReported, ObjectStoreSettled, S3Bucket,
    S3BucketObserved, S3BucketReported, S3BucketSettled,
};
use infra_core::sdk::{
    CreateArgs, DeleteArgs, KindBackend, ListArgs, MarkArgs, OwnershipArgs, ReadArgs, Reading,
    UpdateArgs, Written,
};
use infra_core::{
    prelude::Partial,
    sdk::{BackendError, Listed, Marker, RawTags},
};

use crate::clients::{Clients, RegionClients};
use crate::error::classify;
use crate::tag_index::{self, Indexed};
use crate::tags::{marking, wanted_tags, with_marker};

/// Codes that mean the bucket does not exist.
const NO_BUCKET: &[&str] = &["NoSuchBucket", "NotFound"];
/// The id of the lifecycle rule `expireAfterDays` manages.
const EXPIRE_RULE: &str = "infra-expire";

fn region_of(constraint: Option<&BucketLocationConstraint>) -> String {
    match constraint.map(|c| c.as_str()) {
        None | Some("") => "us-east-1".to_owned(),
        Some("EU") => "eu-west-1".to_owned(),
        Some(other) => other.to_owned(),
    }
}

/// Buckets are global: listing a region asks each bucket where it lives (S3 answers it
/// in the list; a stand-in that does not is asked per bucket). Each bucket carrying the
/// marker key is handed over with its tags, from the tag index.
async fn list_region(clients: &Clients, c: &RegionClients) -> Result<Vec<Listed>, BackendError> {
    let s3 = c.s3();
    let buckets = s3
        .list_buckets()
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| classify("s3:ListBuckets", e, &[]))?;
    let mut listed = Vec::new();
    for bucket in &buckets {
        let Some(name) = bucket.name() else { continue };
        let region = match bucket.bucket_region() {
            Some(r) => r.to_owned(),
            None => match s3.get_bucket_location().bucket(name).send().await {
                Ok(loc) => region_of(loc.location_constraint()),
                // Deleted between the list and now: not in any region.
                Err(e) => match classify("s3:GetBucketLocation", e, NO_BUCKET) {
                    e if e.kind == infra_core::sdk::ErrorKind::NotFound => continue,
                    e => return Err(e),
                },
            },
        };
        if region == c.region {
            listed.push(Listed::new(name.to_owned(), name.to_owned()));
        }
    }
    Ok(tag_index::with_tags(clients, c, Indexed::Bucket, listed).await)
}

async fn tags(c: &RegionClients, bucket: &str) -> Result<RawTags, BackendError> {
    match c.s3().get_bucket_tagging().bucket(bucket).send().await {
        Ok(out) => Ok(out
            .tag_set()
            .iter()
            .map(|t| (t.key().to_owned(), t.value().to_owned()))
            .collect()),
        Err(e) => {
            let e = classify("s3:GetBucketTagging", e, NO_BUCKET);
            if e.code.as_deref() == Some("NoSuchTagSet") {
                Ok(RawTags::new())
            } else {
                Err(e)
            }
        }
    }
}

async fn put_tags(c: &RegionClients, bucket: &str, tags: &RawTags) -> Result<(), BackendError> {
    let set: Vec<Tag> = tags
        .iter()
        .map(|(k, v)| {
            Tag::builder()
                .key(k)
                .value(v)
                .build()
                .expect("key and value are set")
        })
        .collect();
    let tagging = Tagging::builder()
        .set_tag_set(Some(set))
        .build()
        .expect("the tag set is set");
    c.s3()
        .put_bucket_tagging()
        .bucket(bucket)
        .tagging(tagging)
        .send()
        .await
        .map_err(|e| classify("s3:PutBucketTagging", e, NO_BUCKET))?;
    Ok(())
}

/// Brings a bucket's tags to the declared ones (when declared), keeping its marker.
async fn retag(
    c: &RegionClients,
    bucket: &str,
    declared: Option<&RawTags>,
) -> Result<(), BackendError> {
    if let Some(declared) = declared {
        let current = tags(c, bucket).await?;
        put_tags(c, bucket, &wanted_tags(declared, &current)).await?;
    }
    Ok(())
}

/// What every bucket reports, whichever kind declares it.
struct BucketState {
    region: String,
    versioning: Partial<bool>,
    object_lock: bool,
    block_public_access: bool,
    expire_after_days: Option<u32>,
    tags: RawTags,
}

/// The bucket's region, which must be the clients' own: a bucket of another region is
/// `NotFound` here, as for any resource of another region.
async fn located(c: &RegionClients, bucket: &str) -> Result<String, BackendError> {
    let loc = c
        .s3()
        .get_bucket_location()
        .bucket(bucket)
        .send()
        .await
        .map_err(|e| classify("s3:GetBucketLocation", e, NO_BUCKET))?;
    let region = region_of(loc.location_constraint());
    if region != c.region {
        return Err(BackendError::not_found(format!(
            "bucket {bucket} is in {region}, not in {}",
            c.region
        ))
        .with_code("NoSuchBucket"));
    }
    Ok(region)
}

/// Puts the marker on a bucket made elsewhere. `PutBucketTagging` replaces the whole
/// set, so what it writes is the set just read (none when S3 answers `NoSuchTagSet`)
/// with the marker added: every other tag is written back as it was. A tag written by
/// someone else between the read and the write would be lost; S3 has no conditional
/// tagging call to prevent it.
async fn mark_bucket(c: &RegionClients, bucket: &str, marker: &Marker) -> Result<(), BackendError> {
    located(c, bucket).await?;
    let mut all = tags(c, bucket).await?;
    if let Some(pair) = marking(&all, marker, &format!("bucket {bucket}"))? {
        all.extend(pair);
        put_tags(c, bucket, &all).await?;
    }
    Ok(())
}

async fn state(c: &RegionClients, bucket: &str) -> Result<BucketState, BackendError> {
    let s3 = c.s3();
    let region = located(c, bucket).await?;
    // A bucket never versioned answers with no status: the truth `false`. Some stand-ins
    // answer that case with a document the SDK cannot read; then the field is unknown
    // (and so not compared), never a guess.
    let versioning = match s3.get_bucket_versioning().bucket(bucket).send().await {
        Ok(out) => Partial::Known(out.status() == Some(&BucketVersioningStatus::Enabled)),
        // A success the SDK could not read: not said, never guessed.
        Err(aws_sdk_s3::error::SdkError::ServiceError(s)) if s.raw().status().is_success() => {
            Partial::Unknown
        }
        Err(e) => return Err(classify("s3:GetBucketVersioning", e, NO_BUCKET)),
    };
    let object_lock = match s3
        .get_object_lock_configuration()
        .bucket(bucket)
        .send()
        .await
    {
        Ok(out) => {
            out.object_lock_configuration()
                .and_then(|c| c.object_lock_enabled())
                == Some(&ObjectLockEnabled::Enabled)
        }
        Err(e) => {
            let e = classify("s3:GetObjectLockConfiguration", e, NO_BUCKET);
            if e.code.as_deref() == Some("ObjectLockConfigurationNotFoundError") {
                false
            } else {
                return Err(e);
            }
        }
    };
    let block_public_access = match s3.get_public_access_block().bucket(bucket).send().await {
        Ok(out) => out.public_access_block_configuration().is_some_and(|c| {
            c.block_public_acls() == Some(true)
                && c.ignore_public_acls() == Some(true)
                && c.block_public_policy() == Some(true)
                && c.restrict_public_buckets() == Some(true)
        }),
        Err(e) => {
            let e = classify("s3:GetPublicAccessBlock", e, NO_BUCKET);
            if e.code.as_deref() == Some("NoSuchPublicAccessBlockConfiguration") {
                false
            } else {
                return Err(e);
            }
        }
    };
    let expire_after_days = match s3
        .get_bucket_lifecycle_configuration()
        .bucket(bucket)
        .send()
        .await
    {
        Ok(out) => out
            .rules()
            .iter()
            .find(|r| r.id() == Some(EXPIRE_RULE))
            .and_then(|r| r.expiration())
            .and_then(|e| e.days())
            .and_then(|d| u32::try_from(d).ok()),
        Err(e) => {
            let e = classify("s3:GetBucketLifecycleConfiguration", e, NO_BUCKET);
            if e.code.as_deref() == Some("NoSuchLifecycleConfiguration") {
                None
            } else {
                return Err(e);
            }
        }
    };
    Ok(BucketState {
        region,
        versioning,
        object_lock,
        block_public_access,
        expire_after_days,
        tags: tags(c, bucket).await?,
    })
}

async fn create_bucket(
    c: &RegionClients,
    name: &str,
    object_lock: bool,
    tags: &RawTags,
) -> Result<(), BackendError> {
    let tag_list: Vec<Tag> = tags
        .iter()
        .map(|(k, v)| {
            Tag::builder()
                .key(k)
                .value(v)
                .build()
                .expect("key and value are set")
        })
        .collect();
    let mut configuration = CreateBucketConfiguration::builder().set_tags(Some(tag_list));
    if c.region != "us-east-1" {
        configuration =
            configuration.location_constraint(BucketLocationConstraint::from(c.region.as_str()));
    }
    c.s3()
        .create_bucket()
        .bucket(name)
        .create_bucket_configuration(configuration.build())
        .object_lock_enabled_for_bucket(object_lock)
        .send()
        .await
        .map_err(|e| classify("s3:CreateBucket", e, &[]))?;
    // Again, for stand-ins that drop tags given at creation; the same set, so idempotent.
    put_tags(c, name, tags).await
}

async fn set_versioning(c: &RegionClients, bucket: &str, on: bool) -> Result<(), BackendError> {
    let status = if on {
        BucketVersioningStatus::Enabled
    } else {
        BucketVersioningStatus::Suspended
    };
    c.s3()
        .put_bucket_versioning()
        .bucket(bucket)
        .versioning_configuration(VersioningConfiguration::builder().status(status).build())
        .send()
        .await
        .map_err(|e| classify("s3:PutBucketVersioning", e, NO_BUCKET))?;
    Ok(())
}

async fn set_public_access_block(
    c: &RegionClients,
    bucket: &str,
    on: bool,
) -> Result<(), BackendError> {
    c.s3()
        .put_public_access_block()
        .bucket(bucket)
        .public_access_block_configuration(
            PublicAccessBlockConfiguration::builder()
                .block_public_acls(on)
                .ignore_public_acls(on)
                .block_public_policy(on)
                .restrict_public_buckets(on)
                .build(),
        )
        .send()
        .await
        .map_err(|e| classify("s3:PutPublicAccessBlock", e, NO_BUCKET))?;
    Ok(())
}

async fn set_expiry(
    c: &RegionClients,
    bucket: &str,
    days: Option<u32>,
) -> Result<(), BackendError> {
    let s3 = c.s3();
    match days {
        None => {
            s3.delete_bucket_lifecycle()
                .bucket(bucket)
                .send()
                .await
                .map_err(|e| classify("s3:DeleteBucketLifecycle", e, NO_BUCKET))?;
        }
        Some(days) => {
            let rule = LifecycleRule::builder()
                .id(EXPIRE_RULE)
                .status(ExpirationStatus::Enabled)
                .filter(LifecycleRuleFilter::builder().prefix("").build())
                .expiration(
                    LifecycleExpiration::builder()
                        .days(i32::try_from(days).unwrap_or(i32::MAX))
                        .build(),
                )
                .build()
                .map_err(|e| BackendError::invalid(format!("lifecycle rule: {e}")))?;
            let config = BucketLifecycleConfiguration::builder()
                .rules(rule)
                .build()
                .map_err(|e| BackendError::invalid(format!("lifecycle configuration: {e}")))?;
            s3.put_bucket_lifecycle_configuration()
                .bucket(bucket)
                .lifecycle_configuration(config)
                .send()
                .await
                .map_err(|e| classify("s3:PutBucketLifecycleConfiguration", e, NO_BUCKET))?;
        }
    }
    Ok(())
}

async fn delete_bucket(c: &RegionClients, bucket: &str) -> Result<(), BackendError> {
    c.s3()
        .delete_bucket()
        .bucket(bucket)
        .send()
        .await
        .map_err(|e| classify("s3:DeleteBucket", e, NO_BUCKET))?;
    Ok(())
}

/// `s3Bucket`: an S3 bucket, in whichever region a call names.
pub(crate) struct S3Buckets {
    clients: Arc<Clients>,
}

impl S3Buckets {
    /// The kind, reaching AWS through `clients` (one set per region, made on first use).
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        S3Buckets { clients }
    }
}

fn bucket_reading(bucket: &str, s: BucketState) -> Reading<S3Bucket> {
    Reading::new(
        bucket,
        S3BucketObserved {
            arn: format!("arn:aws:s3:::{bucket}"),
            region: s.region,
        },
        S3BucketReported {
            versioning: s.versioning,
            object_lock: Partial::Known(s.object_lock),
            block_public_access: Partial::Known(s.block_public_access),
            tags: Partial::Known(s.tags),
        },
    )
}

#[async_trait]
impl KindBackend<S3Bucket> for S3Buckets {
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let c = &self.clients.region(region);
        list_region(&self.clients, c).await
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<S3Bucket>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        Ok(bucket_reading(handle, state(c, handle).await?))
    }

    async fn create(
        &self,
        args: CreateArgs<'_, S3Bucket>,
    ) -> Result<Written<Reading<S3Bucket>>, BackendError> {
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = args;
        let c = &self.clients.region(region);
        let tags = with_marker(spec.tags.known(), marker);
        create_bucket(c, name, spec.object_lock.known() == Some(&true), &tags).await?;
        apply_s3(c, name, spec).await?;
        let read = self.read(ReadArgs::new(region, name)).await?;
        Ok(Written::Done(read))
    }

    async fn update(
        &self,
        args: UpdateArgs<'_, S3Bucket>,
    ) -> Result<Written<Reading<S3Bucket>>, BackendError> {
        let UpdateArgs {
            region,
            handle,
            spec,
            ..
        } = args;
        let c = &self.clients.region(region);
        retag(c, handle, spec.tags.known()).await?;
        apply_s3(c, handle, spec).await?;
        let read = self.read(ReadArgs::new(region, handle)).await?;
        Ok(Written::Done(read))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        delete_bucket(c, handle).await
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
        mark_bucket(c, handle, marker).await
    }
}

/// The settings of an `s3Bucket` that change in place (tags aside).
async fn apply_s3(
    c: &RegionClients,
    bucket: &str,
    spec: &S3BucketSettled,
) -> Result<(), BackendError> {
    if let Some(&on) = spec.versioning.known() {
        set_versioning(c, bucket, on).await?;
    }
    if let Some(&on) = spec.block_public_access.known() {
        set_public_access_block(c, bucket, on).await?;
    }
    Ok(())
}

/// `objectStore`, realised as an S3 bucket, in whichever region a call names.
pub(crate) struct S3ObjectStores {
    clients: Arc<Clients>,
}

impl S3ObjectStores {
    /// The kind, reaching AWS through `clients` (one set per region, made on first use).
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        S3ObjectStores { clients }
    }
}

fn store_reading(bucket: &str, s: BucketState) -> Reading<ObjectStore> {
    let endpoint = format!("https://{bucket}.s3.{}.amazonaws.com", s.region);
    Reading::new(
        bucket,
        ObjectStoreObserved {
            id: bucket.to_owned(),
            endpoint: Partial::Known(endpoint),
        },
        ObjectStoreReported {
            versioning: s.versioning,
            expire_after_days: Partial::Known(s.expire_after_days),
            tags: Partial::Known(s.tags),
        },
    )
}

#[async_trait]
impl KindBackend<ObjectStore> for S3ObjectStores {
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let c = &self.clients.region(region);
        list_region(&self.clients, c).await
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<ObjectStore>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        Ok(store_reading(handle, state(c, handle).await?))
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
        let c = &self.clients.region(region);
        let tags = with_marker(spec.tags.known(), marker);
        create_bucket(c, name, false, &tags).await?;
        apply_store(c, name, spec).await?;
        let read = self.read(ReadArgs::new(region, name)).await?;
        Ok(Written::Done(read))
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
        let c = &self.clients.region(region);
        retag(c, handle, spec.tags.known()).await?;
        apply_store(c, handle, spec).await?;
        let read = self.read(ReadArgs::new(region, handle)).await?;
        Ok(Written::Done(read))
    }

    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        delete_bucket(c, handle).await
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
        mark_bucket(c, handle, marker).await
    }
}

async fn apply_store(
    c: &RegionClients,
    bucket: &str,
    spec: &ObjectStoreSettled,
) -> Result<(), BackendError> {
    if let Some(&on) = spec.versioning.known() {
        set_versioning(c, bucket, on).await?;
    }
    if let Some(&days) = spec.expire_after_days.known() {
        set_expiry(c, bucket, days).await?;
    }
    Ok(())
}
