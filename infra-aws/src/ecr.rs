//! ECR: the `imageRegistry` kind, one private repository per registry.
//!
//! The handle and the name are the repository's name.
//!
//! What read reports when ECR does not say:
//! - `scanOnPush`: `DescribeRepositories` always answers the repository's scanning
//!   configuration, whether or not the declaration set it: the truth. An answer without
//!   one is `Unknown`.
//! - `immutableTags`: `IMMUTABLE` is `true` and `MUTABLE` is `false`, whether or not
//!   the declaration set it. A setting with exclusion filters (`*_WITH_EXCLUSION`, some
//!   tags one way and the rest the other) is neither, and is `Unknown`, as is a setting
//!   this SDK does not know.
//! - `tags`: `ListTagsForResource` (by the repository's ARN); "no tags" is the truth, an
//!   empty map. The marker is included; the engine strips it.
//!
//! The marker is part of `CreateRepository` itself (its `tags`).

use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_ecr::types::{ImageScanningConfiguration, ImageTagMutability, Repository, Tag};
use infra_core::kinds::{ImageRegistry, ImageRegistryObserved, ImageRegistryReported};
use infra_core::sdk::{
    CreateArgs, DeleteArgs, KindBackend, ListArgs, MarkArgs, OwnershipArgs, ReadArgs, Reading,
    UpdateArgs, Written,
};
use infra_core::{
    prelude::Partial,
    sdk::{BackendError, ErrorKind, Listed, RawTags},
};

use crate::clients::{Clients, RegionClients};
use crate::error::classify;
use crate::tag_index::{self, Indexed};
use crate::tags::{TagChanges, marking, tag_changes, wanted_tags, with_marker};

/// Codes that mean the repository does not exist.
const NO_REPOSITORY: &[&str] = &["RepositoryNotFoundException"];

/// The repository named `name`, or `NotFound`.
async fn describe(c: &RegionClients, name: &str) -> Result<Repository, BackendError> {
    let out = c
        .ecr()
        .describe_repositories()
        .repository_names(name)
        .send()
        .await
        .map_err(|e| classify("ecr:DescribeRepositories", e, NO_REPOSITORY))?;
    out.repositories()
        .iter()
        .find(|r| r.repository_name() == Some(name))
        .cloned()
        .ok_or_else(|| {
            BackendError::not_found(format!(
                "ecr:DescribeRepositories answered without repository {name}"
            ))
            .with_code("RepositoryNotFoundException")
        })
}

fn arn_of(repo: &Repository, name: &str) -> Result<String, BackendError> {
    repo.repository_arn().map(str::to_owned).ok_or_else(|| {
        BackendError::new(
            ErrorKind::Other,
            format!("ecr:DescribeRepositories named no ARN for repository {name}"),
        )
    })
}

async fn tags(c: &RegionClients, arn: &str) -> Result<RawTags, BackendError> {
    let out = c
        .ecr()
        .list_tags_for_resource()
        .resource_arn(arn)
        .send()
        .await
        .map_err(|e| classify("ecr:ListTagsForResource", e, NO_REPOSITORY))?;
    Ok(out
        .tags()
        .iter()
        .map(|t| (t.key().to_owned(), t.value().to_owned()))
        .collect())
}

fn tag_list(tags: &RawTags) -> Result<Vec<Tag>, BackendError> {
    tags.iter()
        .map(|(k, v)| {
            Tag::builder()
                .key(k)
                .value(v)
                .build()
                .map_err(|e| BackendError::invalid(format!("tag {k}: {e}")))
        })
        .collect()
}

fn immutable(mutability: Option<&ImageTagMutability>) -> Partial<bool> {
    match mutability {
        Some(ImageTagMutability::Immutable) => Partial::Known(true),
        Some(ImageTagMutability::Mutable) => Partial::Known(false),
        _ => Partial::Unknown,
    }
}

fn mutability(immutable: bool) -> ImageTagMutability {
    if immutable {
        ImageTagMutability::Immutable
    } else {
        ImageTagMutability::Mutable
    }
}

fn scanning(on: bool) -> ImageScanningConfiguration {
    ImageScanningConfiguration::builder()
        .scan_on_push(on)
        .build()
}

/// Brings the repository's tags to `declared`, keeping the marker as it is.
async fn set_tags(c: &RegionClients, arn: &str, declared: &RawTags) -> Result<(), BackendError> {
    let current = tags(c, arn).await?;
    let TagChanges {
        remove: stale,
        write: fresh,
    } = tag_changes(&current, &wanted_tags(declared, &current), &[]);
    if !stale.is_empty() {
        c.ecr()
            .untag_resource()
            .resource_arn(arn)
            .set_tag_keys(Some(stale))
            .send()
            .await
            .map_err(|e| classify("ecr:UntagResource", e, NO_REPOSITORY))?;
    }
    if !fresh.is_empty() {
        c.ecr()
            .tag_resource()
            .resource_arn(arn)
            .set_tags(Some(tag_list(&fresh)?))
            .send()
            .await
            .map_err(|e| classify("ecr:TagResource", e, NO_REPOSITORY))?;
    }
    Ok(())
}

/// `imageRegistry`, realised as an ECR repository.
pub(crate) struct EcrRepositories {
    clients: Arc<Clients>,
}

impl EcrRepositories {
    /// The kind, reaching AWS through `clients` (one set per region, made on first use).
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        EcrRepositories { clients }
    }
}

#[async_trait]
impl KindBackend<ImageRegistry> for EcrRepositories {
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let c = &self.clients.region(region);
        let mut listed = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = c
                .ecr()
                .describe_repositories()
                .set_next_token(token.take())
                .send()
                .await
                .map_err(|e| classify("ecr:DescribeRepositories", e, &[]))?;
            for repo in out.repositories() {
                if let Some(name) = repo.repository_name() {
                    listed.push(Listed::new(name.to_owned(), name.to_owned()));
                }
            }
            match out.next_token() {
                Some(next) if !next.is_empty() => token = Some(next.to_owned()),
                _ => break,
            }
        }
        // DescribeRepositories carries no tags: the marker is learnt from the tag index.
        Ok(tag_index::with_tags(&self.clients, c, Indexed::Repository, listed).await)
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<ImageRegistry>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        let repo = describe(c, handle).await?;
        let arn = arn_of(&repo, handle)?;
        let uri = repo.repository_uri().map(str::to_owned).ok_or_else(|| {
            BackendError::new(
                ErrorKind::Other,
                format!("ecr:DescribeRepositories named no URI for repository {handle}"),
            )
        })?;
        let tags = tags(c, &arn).await?;
        Ok(Reading::new(
            handle,
            ImageRegistryObserved { id: arn, uri },
            ImageRegistryReported {
                scan_on_push: repo
                    .image_scanning_configuration()
                    .map_or(Partial::Unknown, |s| Partial::Known(s.scan_on_push())),
                immutable_tags: immutable(repo.image_tag_mutability()),
                tags: Partial::Known(tags),
            },
        ))
    }

    async fn create(
        &self,
        args: CreateArgs<'_, ImageRegistry>,
    ) -> Result<Written<Reading<ImageRegistry>>, BackendError> {
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = args;
        let c = &self.clients.region(region);
        let tags = with_marker(spec.tags.known(), marker);
        c.ecr()
            .create_repository()
            .repository_name(name)
            .set_tags(Some(tag_list(&tags)?))
            .set_image_scanning_configuration(spec.scan_on_push.known().map(|&on| scanning(on)))
            .set_image_tag_mutability(spec.immutable_tags.known().map(|&on| mutability(on)))
            .send()
            .await
            .map_err(|e| classify("ecr:CreateRepository", e, &[]))?;
        let read = self.read(ReadArgs::new(region, name)).await?;
        Ok(Written::Done(read))
    }

    async fn update(
        &self,
        args: UpdateArgs<'_, ImageRegistry>,
    ) -> Result<Written<Reading<ImageRegistry>>, BackendError> {
        let UpdateArgs {
            region,
            handle,
            spec,
            ..
        } = args;
        let c = &self.clients.region(region);
        let repo = describe(c, handle).await?;
        if let Some(&on) = spec.scan_on_push.known() {
            c.ecr()
                .put_image_scanning_configuration()
                .repository_name(handle)
                .image_scanning_configuration(scanning(on))
                .send()
                .await
                .map_err(|e| classify("ecr:PutImageScanningConfiguration", e, NO_REPOSITORY))?;
        }
        if let Some(&on) = spec.immutable_tags.known() {
            c.ecr()
                .put_image_tag_mutability()
                .repository_name(handle)
                .image_tag_mutability(mutability(on))
                .send()
                .await
                .map_err(|e| classify("ecr:PutImageTagMutability", e, NO_REPOSITORY))?;
        }
        if let Some(declared) = spec.tags.known() {
            set_tags(c, &arn_of(&repo, handle)?, declared).await?;
        }
        let read = self.read(ReadArgs::new(region, handle)).await?;
        Ok(Written::Done(read))
    }

    /// Never forced: a repository that still holds images is refused
    /// (`RepositoryNotEmptyException`, a dependency violation) and left as it was.
    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        c.ecr()
            .delete_repository()
            .repository_name(handle)
            .force(false)
            .send()
            .await
            .map_err(|e| classify("ecr:DeleteRepository", e, NO_REPOSITORY))?;
        Ok(())
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        let repo = describe(c, handle).await?;
        tags(c, &arn_of(&repo, handle)?).await
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let c = &self.clients.region(region);
        let arn = arn_of(&describe(c, handle).await?, handle)?;
        let current = tags(c, &arn).await?;
        if let Some(pair) = marking(&current, marker, &format!("repository {handle}"))? {
            // TagResource adds to the repository's tags; the others stay as they are.
            c.ecr()
                .tag_resource()
                .resource_arn(&arn)
                .set_tags(Some(tag_list(&pair)?))
                .send()
                .await
                .map_err(|e| classify("ecr:TagResource", e, NO_REPOSITORY))?;
        }
        Ok(())
    }
}
