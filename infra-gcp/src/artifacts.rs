//! Artifact Registry: the `imageRegistry` kind, one Docker repository per registry.
//!
//! The handle is the repository's resource name,
//! `projects/{project}/locations/{region}/repositories/{id}`; the id is the declared
//! name. Artifact Registry ids are 1 to 63 lowercase letters, digits and `-`, starting
//! with a letter and ending with a letter or a digit: another name is refused as
//! `Invalid` before any call. Images are pushed to `{region}-docker.pkg.dev/{project}/{id}`,
//! the observed `uri`.
//!
//! Repositories are regional: `list` answers the `DOCKER` repositories of the region's
//! location (every page of `ListRepositories`; repositories of other formats are not
//! image registries and are left out; the client's paginator reads the pages), and a handle naming another location is
//! `NotFound` in this region, without a call.
//!
//! The marker is part of `CreateRepository` itself (its labels).
//!
//! `CreateRepository` and `DeleteRepository` are long-running operations: each is
//! awaited with the client's own poller (`google-cloud-lro`), on the configuration's
//! polling policy, up to its deadline.
//! A create whose answer was lost, or whose operation is still running at the deadline,
//! is settled by looking the repository up by name: found with this fleet's marker, it
//! is the one the create made. A delete whose answer was lost, or still running at the
//! deadline, is done when the repository is gone. `UpdateRepository` is a plain `PATCH`
//! whose update mask names only the declared fields that differ from the repository's.
//!
//! Field mapping: `immutableTags` is `dockerConfig.immutableTags`; `scanOnPush` is
//! `vulnerabilityScanningConfig.enablementConfig`, `INHERITED` for `true` (scanning
//! on, as long as the project's Container Scanning API is enabled: Artifact Registry
//! scans pushed images then) and `DISABLED` for `false`.
//!
//! What read reports when Artifact Registry does not say:
//! - `scanOnPush`: a repository without a scanning setting (no
//!   `vulnerabilityScanningConfig`, or `ENABLEMENT_CONFIG_UNSPECIFIED`) is treated by
//!   Artifact Registry as `INHERITED` for a Docker repository: the truth `true`. A value
//!   this client does not know is `Unknown`.
//! - `immutableTags`: a repository without `dockerConfig`, or whose `immutableTags` is
//!   left out, has mutable tags (the proto's default): the truth `false`.
//! - `tags`: the labels; "no labels" is the truth, an empty map. The marker is included;
//!   the engine strips it.

use std::sync::Arc;

use async_trait::async_trait;
use google_cloud_artifactregistry_v1::model::Repository;
use google_cloud_artifactregistry_v1::model::repository::vulnerability_scanning_config::EnablementConfig;
use google_cloud_artifactregistry_v1::model::repository::{
    DockerRepositoryConfig, Format, VulnerabilityScanningConfig,
};
use google_cloud_gax::paginator::ItemPaginator as _;
use google_cloud_lro::Poller as _;
use google_cloud_wkt::FieldMask;
use infra_core::kinds::{ImageRegistry, ImageRegistryObserved, ImageRegistryReported};
use infra_core::prelude::Partial;
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, ErrorKind, KindBackend, ListArgs, Listed, MarkArgs,
    OwnershipArgs, RawTags, ReadArgs, Reading, UpdateArgs, Written,
};

use crate::clients::Clients;
use crate::error::{NOT_FOUND, classify};
use crate::labels;
use crate::poll::settle_uncertain;

const GET: &str = "artifactregistry:GetRepository";
const CREATE: &str = "artifactregistry:CreateRepository";
const DELETE: &str = "artifactregistry:DeleteRepository";

/// Refuses a name Artifact Registry would refuse as a repository id.
fn check_id(name: &str) -> Result<(), BackendError> {
    let ok = (1..=63).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(BackendError::invalid(format!(
            "registry name {name:?}: an Artifact Registry repository id is 1 to 63 lowercase \
             letters, digits and `-`, starting with a letter and ending with a letter or a digit"
        )))
    }
}

/// The handle's parts: project, location, id.
fn parts(handle: &str) -> Result<(&str, &str, &str), BackendError> {
    match handle.split('/').collect::<Vec<_>>().as_slice() {
        [
            "projects",
            project,
            "locations",
            location,
            "repositories",
            id,
        ] if !project.is_empty() && !location.is_empty() && !id.is_empty() => {
            Ok((project, location, id))
        }
        _ => Err(BackendError::invalid(format!(
            "{handle:?} is not an Artifact Registry repository's name \
             (projects/{{project}}/locations/{{region}}/repositories/{{id}})"
        ))),
    }
}

/// The handle's id, or `NotFound` when it lives in another region than `region`.
fn in_region<'h>(handle: &'h str, region: &str) -> Result<&'h str, BackendError> {
    let (_, location, id) = parts(handle)?;
    if location != region {
        return Err(BackendError::not_found(format!(
            "{GET}: repository {handle} is in {location}, not {region}"
        ))
        .with_code("NOT_FOUND"));
    }
    Ok(id)
}

/// Where images of the repository are pushed.
fn uri(project: &str, region: &str, id: &str) -> String {
    format!("{region}-docker.pkg.dev/{project}/{id}")
}

fn enablement(scan_on_push: bool) -> EnablementConfig {
    if scan_on_push {
        EnablementConfig::Inherited
    } else {
        EnablementConfig::Disabled
    }
}

fn scanning(scan_on_push: bool) -> VulnerabilityScanningConfig {
    VulnerabilityScanningConfig::new().set_enablement_config(enablement(scan_on_push))
}

fn docker(immutable_tags: bool) -> DockerRepositoryConfig {
    DockerRepositoryConfig::new().set_immutable_tags(immutable_tags)
}

/// `scanOnPush` as the repository says it (see the module documentation).
fn scan_on_push(repo: &Repository) -> Partial<bool> {
    let config = repo
        .vulnerability_scanning_config
        .as_ref()
        .map(|c| &c.enablement_config);
    match config {
        None | Some(EnablementConfig::Unspecified | EnablementConfig::Inherited) => {
            Partial::Known(true)
        }
        Some(EnablementConfig::Disabled) => Partial::Known(false),
        Some(_) => Partial::Unknown,
    }
}

fn immutable_tags(repo: &Repository) -> bool {
    repo.docker_config().is_some_and(|d| d.immutable_tags)
}

fn reading(handle: &str, repo: &Repository) -> Result<Reading<ImageRegistry>, BackendError> {
    let (project, location, id) = parts(handle)?;
    if repo.format != Format::Docker {
        return Err(BackendError::invalid(format!(
            "repository {handle} is a {} repository, not a Docker one",
            repo.format.name().unwrap_or("non-Docker")
        )));
    }
    let raw = labels::from_map(&repo.labels);
    Ok(Reading::new(
        handle,
        ImageRegistryObserved {
            id: handle.to_owned(),
            uri: uri(project, location, id),
        },
        ImageRegistryReported {
            scan_on_push: scan_on_push(repo),
            immutable_tags: Partial::Known(immutable_tags(repo)),
            tags: Partial::Known(labels::reported(&raw)),
        },
    )
    .with_raw_tags(raw))
}

/// The repository a create sends.
fn to_create(spec: &infra_core::kinds::ImageRegistrySettled, labels: RawTags) -> Repository {
    let mut repo = Repository::new()
        .set_format(Format::Docker)
        .set_labels(labels);
    if let Some(&on) = spec.immutable_tags.known() {
        repo = repo.set_docker_config(docker(on));
    }
    if let Some(&on) = spec.scan_on_push.known() {
        repo = repo.set_vulnerability_scanning_config(scanning(on));
    }
    repo
}

/// The patch an update sends and its mask: only the declared fields that differ from
/// `current`. `None` when nothing differs.
fn to_update(
    spec: &infra_core::kinds::ImageRegistrySettled,
    current: &Repository,
) -> Result<Option<(Repository, Vec<&'static str>)>, BackendError> {
    let mut patch = Repository::new().set_name(current.name.clone());
    let mut paths = Vec::new();
    if let Some(declared) = spec.tags.known() {
        let now = labels::from_map(&current.labels);
        let wanted = labels::for_update(declared, &now)?;
        if wanted != now {
            patch = patch.set_labels(wanted);
            paths.push("labels");
        }
    }
    if let Some(&on) = spec.immutable_tags.known()
        && on != immutable_tags(current)
    {
        patch = patch.set_docker_config(docker(on));
        paths.push("docker_config.immutable_tags");
    }
    if let Some(&on) = spec.scan_on_push.known()
        && scan_on_push(current) != Partial::Known(on)
    {
        patch = patch.set_vulnerability_scanning_config(scanning(on));
        paths.push("vulnerability_scanning_config.enablement_config");
    }
    Ok((!paths.is_empty()).then_some((patch, paths)))
}

/// `imageRegistry`, realised as an Artifact Registry Docker repository.
pub(crate) struct DockerRepositories {
    clients: Arc<Clients>,
}

impl DockerRepositories {
    /// The kind, reaching Google Cloud through `clients`.
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        DockerRepositories { clients }
    }

    /// The repository, or `NotFound` when it does not exist or lives in another region.
    async fn get(&self, region: &str, handle: &str) -> Result<Repository, BackendError> {
        in_region(handle, region)?;
        self.clients
            .artifact_registry()
            .await?
            .get_repository()
            .set_name(handle)
            .send()
            .await
            .map_err(|e| classify(GET, e, NOT_FOUND))
    }

    /// The repository as `settle_uncertain` wants it: `None` when absent.
    async fn find(
        &self,
        region: &str,
        handle: &str,
    ) -> Result<Option<(RawTags, Repository)>, BackendError> {
        match self.get(region, handle).await {
            Ok(repo) => Ok(Some((labels::from_map(&repo.labels), repo))),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether the repository is gone: after a delete whose outcome is unknown.
    async fn gone(&self, region: &str, handle: &str) -> bool {
        matches!(
            self.get(region, handle).await,
            Err(e) if e.kind == ErrorKind::NotFound
        )
    }
}

#[async_trait]
impl KindBackend<ImageRegistry> for DockerRepositories {
    /// `ListRepositories` answers whole `Repository` resources, as `GetRepository`
    /// does (the same schema in Google's discovery document): each listed repository is
    /// handed over with its read.
    fn lists_complete(&self) -> bool {
        true
    }

    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let parent = format!("projects/{}/locations/{region}", self.clients.project());
        let mut repositories = self
            .clients
            .artifact_registry()
            .await?
            .list_repositories()
            .set_parent(&parent)
            .by_item();
        let mut listed = Vec::new();
        while let Some(repo) = repositories.next().await {
            let repo = repo.map_err(|e| classify("artifactregistry:ListRepositories", e, &[]))?;
            if repo.format != Format::Docker {
                continue;
            }
            if let Ok((_, location, id)) = parts(&repo.name)
                && location == region
            {
                let handle = format!("{parent}/repositories/{id}");
                let found = Listed::new(id.to_owned(), handle.clone());
                // A repository whose read would be refused is left to `read`, which
                // refuses it the same way.
                listed.push(match reading(&handle, &repo) {
                    Ok(read) => found.with_reading(read),
                    Err(_) => found,
                });
            }
        }
        Ok(listed)
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<ImageRegistry>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let repo = self.get(region, handle).await?;
        reading(handle, &repo)
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
        check_id(name)?;
        let labels = labels::for_create(spec.tags.known(), marker, &[])?;
        let parent = format!("projects/{}/locations/{region}", self.clients.project());
        let handle = format!("{parent}/repositories/{name}");
        let request = self
            .clients
            .artifact_registry()
            .await?
            .create_repository()
            .set_parent(&parent)
            .set_repository_id(name)
            .set_repository(to_create(spec, labels));
        let outcome = self
            .clients
            .polled(request)
            .poller()
            .until_done()
            .await
            .map_err(|e| classify(CREATE, e, &[]));
        let created = match outcome {
            Ok(repo) => repo,
            Err(e) => settle_uncertain(e, marker, CREATE, self.find(region, &handle)).await?,
        };
        match self.get(region, &handle).await {
            Ok(repo) => Ok(Written::Done(reading(&handle, &repo)?)),
            // Not visible yet: the operation's answer stands for the read.
            Err(e) if e.kind == ErrorKind::NotFound => {
                Ok(Written::Done(reading(&handle, &created)?))
            }
            Err(e) => Err(e),
        }
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
        let current = self.get(region, handle).await?;
        reading(handle, &current)?;
        let Some((patch, paths)) = to_update(spec, &current)? else {
            return Ok(Written::Done(reading(handle, &current)?));
        };
        let updated = self
            .clients
            .artifact_registry()
            .await?
            .update_repository()
            .set_repository(patch)
            .set_update_mask(FieldMask::default().set_paths(paths))
            .send()
            .await
            .map_err(|e| classify("artifactregistry:UpdateRepository", e, NOT_FOUND))?;
        match self.get(region, handle).await {
            Ok(repo) => Ok(Written::Done(reading(handle, &repo)?)),
            Err(e) if e.kind == ErrorKind::NotFound => {
                Ok(Written::Done(reading(handle, &updated)?))
            }
            Err(e) => Err(e),
        }
    }

    /// Deletes the repository and every image in it, awaiting the operation (bounded by
    /// the polling deadline). A delete whose answer was lost, or whose operation still
    /// runs at the deadline, is done when the repository is gone.
    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        in_region(handle, region)?;
        let request = self
            .clients
            .artifact_registry()
            .await?
            .delete_repository()
            .set_name(handle);
        let done = self.clients.polled(request).poller().until_done().await;
        let err = match done {
            Ok(()) => return Ok(()),
            Err(e) => classify(DELETE, e, NOT_FOUND),
        };
        if err.may_have_been_sent && self.gone(region, handle).await {
            return Ok(());
        }
        Err(err)
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let repo = self.get(region, handle).await?;
        Ok(labels::from_map(&repo.labels))
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let repo = self.get(region, handle).await?;
        let current = labels::from_map(&repo.labels);
        if let Some(all) = labels::marking(&current, marker, &format!("repository {handle}"))? {
            self.clients
                .artifact_registry()
                .await?
                .update_repository()
                .set_repository(Repository::new().set_name(handle).set_labels(all))
                .set_update_mask(FieldMask::default().set_paths(["labels"]))
                .send()
                .await
                .map_err(|e| classify("artifactregistry:UpdateRepository", e, NOT_FOUND))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infra_core::kinds::ImageRegistrySettled;
    use infra_core::sdk::Marker;
    use serde_json::json;

    fn spec(scan: Partial<bool>, immutable: Partial<bool>) -> ImageRegistrySettled {
        ImageRegistrySettled {
            scan_on_push: scan,
            immutable_tags: immutable,
            tags: Partial::Known(RawTags::from([("team".to_owned(), "web".to_owned())])),
        }
    }

    #[test]
    fn ids_are_refused_where_artifact_registry_would_refuse_them() {
        for good in ["app", "a1", "web-images-2", &"a".repeat(63)] {
            assert!(check_id(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "App",
            "1app",
            "app-",
            "app_images",
            "app.images",
            &"a".repeat(64),
        ] {
            assert_eq!(check_id(bad).unwrap_err().kind, ErrorKind::Invalid, "{bad}");
        }
    }

    #[test]
    fn a_handle_names_its_region() {
        let handle = "projects/p/locations/europe-west1/repositories/app";
        assert_eq!(parts(handle).unwrap(), ("p", "europe-west1", "app"));
        assert_eq!(in_region(handle, "europe-west1").unwrap(), "app");
        assert_eq!(
            in_region(handle, "us-central1").unwrap_err().kind,
            ErrorKind::NotFound
        );
        assert_eq!(
            parts("projects/p/repositories/app").unwrap_err().kind,
            ErrorKind::Invalid
        );
        assert_eq!(
            uri("p", "europe-west1", "app"),
            "europe-west1-docker.pkg.dev/p/app"
        );
    }

    #[test]
    fn a_create_carries_the_format_the_settings_and_the_marker() {
        let marker = Marker::new("shop");
        let s = spec(Partial::Known(true), Partial::Known(false));
        let labels = labels::for_create(s.tags.known(), &marker, &[]).unwrap();
        let wire = serde_json::to_value(to_create(&s, labels)).unwrap();
        assert_eq!(wire["format"], json!(1));
        assert_eq!(wire["labels"]["managed-by-infra"], "shop");
        assert_eq!(wire["labels"]["team"], "web");
        assert_eq!(
            wire["vulnerabilityScanningConfig"]["enablementConfig"],
            json!(1)
        );
        let off = spec(Partial::Known(false), Partial::Known(true));
        let wire = serde_json::to_value(to_create(&off, RawTags::new())).unwrap();
        assert_eq!(
            wire["vulnerabilityScanningConfig"]["enablementConfig"],
            json!(2)
        );
        assert_eq!(wire["dockerConfig"]["immutableTags"], json!(true));
        let unsaid = spec(Partial::Unknown, Partial::Unknown);
        let wire = serde_json::to_value(to_create(&unsaid, RawTags::new())).unwrap();
        assert!(wire.get("vulnerabilityScanningConfig").is_none());
        assert!(wire.get("dockerConfig").is_none());
    }

    #[test]
    fn reads_report_the_settings_and_their_defaults() {
        let handle = "projects/p/locations/europe-west1/repositories/app";
        let repo = Repository::new()
            .set_name(handle)
            .set_format(Format::Docker)
            .set_docker_config(docker(true))
            .set_vulnerability_scanning_config(scanning(false))
            .set_labels([("managed-by-infra", "shop"), ("infra-region", "x")]);
        let read = reading(handle, &repo).unwrap();
        assert_eq!(read.reported()["scanOnPush"], json!(false));
        assert_eq!(read.reported()["immutableTags"], json!(true));
        assert_eq!(read.reported()["tags"], json!({"managed-by-infra": "shop"}));
        assert_eq!(read.observed().uri, "europe-west1-docker.pkg.dev/p/app");
        // No settings at all: Docker's defaults, scanning inherited and tags mutable.
        let bare = Repository::new()
            .set_name(handle)
            .set_format(Format::Docker);
        let read = reading(handle, &bare).unwrap();
        assert_eq!(read.reported()["scanOnPush"], json!(true));
        assert_eq!(read.reported()["immutableTags"], json!(false));
        let odd = Repository::new()
            .set_format(Format::Docker)
            .set_vulnerability_scanning_config(
                VulnerabilityScanningConfig::new().set_enablement_config(EnablementConfig::from(9)),
            );
        assert_eq!(scan_on_push(&odd), Partial::Unknown);
        let maven = Repository::new().set_name(handle).set_format(Format::Maven);
        assert_eq!(
            reading(handle, &maven).unwrap_err().kind,
            ErrorKind::Invalid
        );
    }

    #[test]
    fn an_update_masks_only_the_declared_fields_that_differ() {
        let current = Repository::new()
            .set_name("projects/p/locations/l/repositories/app")
            .set_format(Format::Docker)
            .set_labels([("managed-by-infra", "shop"), ("team", "web")])
            .set_vulnerability_scanning_config(scanning(true));
        let same = spec(Partial::Known(true), Partial::Known(false));
        assert!(to_update(&same, &current).unwrap().is_none());
        let changed = spec(Partial::Known(false), Partial::Known(true));
        let (patch, paths) = to_update(&changed, &current).unwrap().unwrap();
        assert_eq!(
            paths,
            vec![
                "docker_config.immutable_tags",
                "vulnerability_scanning_config.enablement_config"
            ]
        );
        assert!(immutable_tags(&patch));
        assert_eq!(scan_on_push(&patch), Partial::Known(false));
        let relabelled = ImageRegistrySettled {
            tags: Partial::Known(RawTags::from([("team".to_owned(), "ops".to_owned())])),
            ..spec(Partial::Unknown, Partial::Unknown)
        };
        let (patch, paths) = to_update(&relabelled, &current).unwrap().unwrap();
        assert_eq!(paths, vec!["labels"]);
        assert_eq!(patch.labels["managed-by-infra"], "shop");
        assert_eq!(patch.labels["team"], "ops");
        let mask = serde_json::to_value(FieldMask::default().set_paths(paths)).unwrap();
        assert_eq!(mask, json!("labels"));
    }
}
