//! The Resource Groups Tagging API as a tag index, for the kinds whose own lists carry
//! no tags (S3 buckets, Lambda functions, ECR repositories).
//!
//! A list of such a kind asks `GetResources` once per (kind, region), filtered on the
//! ownership marker's key and on the kind's resource type, every page read: the answer
//! is each resource carrying the key, with its whole tag set. Each listed resource
//! found there is handed over with those tags ([`Listed::with_raw_tags`]), so that
//! observation judges its owner without an `ownership` call: ⌈N/100⌉ calls a region
//! instead of one per resource.
//!
//! A listed resource the answer does not name is handed over without tags, and costs
//! the usual `ownership` call when observation needs its owner. The index is eventually
//! consistent (a resource tagged a moment ago may be missing from it) and not every
//! stand-in serves every resource type (moto answers no ECR repository): reading absence
//! from it as "carries no marker" would call a resource of this fleet unowned.
//!
//! Where the API is refused (`tag:GetResources` denied) or fails, the kind falls back to
//! those per-resource calls, and the backend says so once per run (a warning naming
//! the API and the cost). A refusal is remembered: the API is not asked again by the
//! same backend.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use aws_sdk_resourcegroupstagging::types::TagFilter;
use infra_core::sdk::{BackendError, ErrorKind, Listed, MARKER_KEY, RawTags};

use crate::clients::{Clients, RegionClients};
use crate::error::classify;

/// A kind whose ownership the tag index tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Indexed {
    /// S3 buckets (`arn:aws:s3:::name`).
    #[cfg_attr(not(feature = "s3"), allow(dead_code))]
    Bucket,
    /// Lambda functions (`arn:aws:lambda:region:account:function:name`).
    #[cfg_attr(not(feature = "lambda"), allow(dead_code))]
    Function,
    /// ECR repositories (`arn:aws:ecr:region:account:repository/name`).
    #[cfg_attr(not(feature = "ecr"), allow(dead_code))]
    Repository,
}

impl Indexed {
    /// The `ResourceTypeFilters` entry: the service and resource type as the ARN spells
    /// them (an S3 bucket's ARN names no resource type).
    fn filter(self) -> &'static str {
        match self {
            Indexed::Bucket => "s3",
            Indexed::Function => "lambda:function",
            Indexed::Repository => "ecr:repository",
        }
    }

    /// The name an ARN of this kind names (the name the kind lists by), or `None` for
    /// an ARN of another shape (an object, a function's version, another service).
    fn name_of(self, arn: &str) -> Option<&str> {
        let mut parts = arn.splitn(6, ':');
        let (Some("arn"), Some(_partition), Some(service), Some(_region), Some(_account)) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return None;
        };
        let resource = parts.next()?;
        let name = match (self, service) {
            (Indexed::Bucket, "s3") => resource,
            (Indexed::Function, "lambda") => resource.strip_prefix("function:")?,
            (Indexed::Repository, "ecr") => resource.strip_prefix("repository/")?,
            _ => return None,
        };
        let shaped = match self {
            Indexed::Bucket => !name.contains(['/', ':']),
            Indexed::Function => !name.contains(':'),
            Indexed::Repository => true,
        };
        (shaped && !name.is_empty()).then_some(name)
    }
}

/// Whether the backend has fallen back from the tag index, and said so.
#[derive(Debug, Default)]
pub(crate) struct Fallback {
    said: AtomicBool,
    denied: AtomicBool,
}

impl Fallback {
    /// Falls back after `e`: says so the first time, and remembers a refusal.
    fn fall_back(&self, e: &BackendError) {
        if e.kind == ErrorKind::Denied {
            self.denied.store(true, Ordering::Relaxed);
        }
        if !self.said.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                api = "tag:GetResources",
                "the Resource Groups Tagging API could not be used ({e}): the ownership of \
                 S3 buckets, Lambda functions and ECR repositories is read with one call per \
                 resource in this run, instead of one call per page of a region"
            );
        }
    }

    fn refused(&self) -> bool {
        self.denied.load(Ordering::Relaxed)
    }
}

/// The raw tags of every resource of `kind` in the region that carries the marker key,
/// by the name the kind lists it under. `None` when the index cannot be used (said
/// once; see the module's documentation).
async fn marked(
    clients: &Clients,
    c: &RegionClients,
    kind: Indexed,
) -> Option<HashMap<String, RawTags>> {
    if clients.tag_index.refused() {
        return None;
    }
    match pages(c, kind).await {
        Ok(found) => Some(found),
        Err(e) => {
            clients.tag_index.fall_back(&e);
            None
        }
    }
}

async fn pages(c: &RegionClients, kind: Indexed) -> Result<HashMap<String, RawTags>, BackendError> {
    let mut pages = c
        .tagging()
        .get_resources()
        .tag_filters(TagFilter::builder().key(MARKER_KEY).build())
        .resource_type_filters(kind.filter())
        .into_paginator()
        .send();
    let mut found = HashMap::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| classify("tag:GetResources", e, &[]))?;
        for mapping in page.resource_tag_mapping_list() {
            let Some(name) = mapping.resource_arn().and_then(|arn| kind.name_of(arn)) else {
                continue;
            };
            let tags: RawTags = mapping
                .tags()
                .iter()
                .map(|t| (t.key().to_owned(), t.value().to_owned()))
                .collect();
            found.insert(name.to_owned(), tags);
        }
    }
    Ok(found)
}

/// `listed`, each resource the tag index names handed over with its tags. Asks the
/// index only when the list found something.
pub(crate) async fn with_tags(
    clients: &Clients,
    c: &RegionClients,
    kind: Indexed,
    listed: Vec<Listed>,
) -> Vec<Listed> {
    if listed.is_empty() {
        return listed;
    }
    let Some(mut index) = marked(clients, c, kind).await else {
        return listed;
    };
    listed
        .into_iter()
        .map(|l| match index.remove(&l.name) {
            Some(tags) => l.with_raw_tags(tags),
            None => l,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_arns_of_the_kind_alone() {
        let cases = [
            (Indexed::Bucket, "arn:aws:s3:::logs", Some("logs")),
            (Indexed::Bucket, "arn:aws:s3:::logs/a/key", None),
            (Indexed::Bucket, "arn:aws:sqs:eu-west-3:1:logs", None),
            (
                Indexed::Function,
                "arn:aws:lambda:eu-west-3:123456789012:function:api",
                Some("api"),
            ),
            (
                Indexed::Function,
                "arn:aws:lambda:eu-west-3:123456789012:function:api:3",
                None,
            ),
            (
                Indexed::Repository,
                "arn:aws:ecr:eu-west-3:123456789012:repository/team/app",
                Some("team/app"),
            ),
            (Indexed::Repository, "arn:aws:ecr:eu-west-3:1:other/x", None),
            (Indexed::Repository, "not an arn", None),
        ];
        for (kind, arn, name) in cases {
            assert_eq!(kind.name_of(arn), name, "{kind:?} {arn}");
        }
    }
}
