//! Secret Manager: the `secrets` kind.
//!
//! The handle is the secret's resource name, `projects/{project}/secrets/{id}`; the id is
//! the declared name. Secret Manager ids are 1 to 255 letters, digits, `-` and `_`: the
//! portable name rule also allows `/` and `.`, and a name holding either is refused as
//! `Invalid` before any call.
//!
//! **Regions.** Secret Manager is global, but a secret's replication is a real regional
//! property: every secret is created with user-managed replication and exactly one
//! replica, in the declared region. `list` answers the secrets whose user-managed
//! replication names the region (every page of `ListSecrets`); a secret replicated
//! elsewhere is `NotFound` in this region, and a secret with automatic replication
//! belongs to no region and is never listed. No bookkeeping label is written.
//!
//! **The marker** is part of `CreateSecret` itself (its labels), never patched on after.
//!
//! **The description.** Secret Manager secrets have no description field. The
//! description is kept in the secret's annotation `description` (annotations are free
//! text, unlike labels), written by `CreateSecret` and by `UpdateSecret` with the mask
//! `annotations`; other annotations are left as they are. Secret Manager holds less than
//! 16 KiB of annotations (keys and values) per secret: a longer description is refused
//! before any call.
//!
//! **The value.** A value read from the environment, or composed, is resolved
//! (`SecretSourceSettled::resolve`) in the create or update that writes it. A generated
//! value is drawn here, since Secret Manager has no generator: `length` characters taken
//! uniformly (by rejection sampling from the operating system's random source,
//! `getrandom`) from the 66 characters `A`–`Z`, `a`–`z`, `0`–`9`, `-`, `_`, `.` and `~`,
//! which need no quoting in a URL, a connection string or a shell. A value is sent once,
//! as the payload of `AddSecretVersion`, held in a [`SecretString`] for that one call,
//! and never recorded, logged, labelled or put in an error message (an error that quotes
//! it has it replaced by `<redacted>`).
//!
//! A create is `CreateSecret`, then `AddSecretVersion` with the value. Should the second
//! call fail, the error says that the secret exists without a value. An update writes a
//! new version only for a value read from the environment or composed: a generated
//! secret is never rewritten. (An update of a generated secret that has no version at
//! all, left so by a failed create, writes its first value.) Labels and the description
//! change with `UpdateSecret` and an update mask naming only what changes, carrying the
//! etag read just before, so that a concurrent change is refused rather than overwritten.
//!
//! What read reports when Secret Manager does not say:
//! - `valueFrom`: never read. `read` calls `GetSecret` and `GetSecretVersion`, which hold
//!   no value, so the field is always `Unknown` (and so never drift). The value is read by
//!   `secret_value` alone (`AccessSecretVersion` of the latest version), for the one
//!   create or update that needs it.
//! - `description`: the annotation `description`; a secret without it has no
//!   description, the truth `""` (an empty description is written as no annotation).
//! - `tags`: the labels; "no labels" is the truth, an empty map. The marker is included;
//!   the engine strips it.
//! - The observed `version` is the number of the latest version (`versions/latest`),
//!   `Unknown` for a secret that has no version.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use google_cloud_gax::paginator::ItemPaginator as _;
use google_cloud_secretmanager_v1::model::replication::UserManaged;
use google_cloud_secretmanager_v1::model::replication::user_managed::Replica;
use google_cloud_secretmanager_v1::model::{Replication, Secret, SecretPayload};
use google_cloud_wkt::FieldMask;
use infra_core::kinds::{Secrets, SecretsObserved, SecretsReported};
use infra_core::prelude::{Partial, SecretString};
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, ErrorKind, KindBackend, ListArgs, Listed, MarkArgs,
    OwnershipArgs, RawTags, ReadArgs, Reading, SecretArgs, SecretValues, UpdateArgs, Written,
    generate_secret, scrub_secret,
};

use crate::clients::Clients;
use crate::error::{NOT_FOUND, classify};
use crate::labels;
use crate::poll::settle_uncertain;
use crate::secret_value::latest_value;

/// The annotation that holds the description.
const DESCRIPTION: &str = "description";

/// Secret Manager's bound on a secret's annotations, keys and values together: the
/// total must be less than this many bytes.
const ANNOTATIONS_MAX: usize = 16 * 1024;

/// Secret Manager's bound on a version's payload.
const PAYLOAD_MAX: usize = 64 * 1024;

const GET: &str = "secretmanager:GetSecret";
const CREATE: &str = "secretmanager:CreateSecret";
const UPDATE: &str = "secretmanager:UpdateSecret";
const ADD_VERSION: &str = "secretmanager:AddSecretVersion";

/// Refuses a name Secret Manager would refuse as a secret id.
fn check_id(name: &str) -> Result<(), BackendError> {
    let ok = (1..=255).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(BackendError::invalid(format!(
            "secret name {name:?}: a Secret Manager secret id is 1 to 255 letters, digits, `-` \
             and `_` (no `/` nor `.`)"
        )))
    }
}

/// The id of a secret's resource name, `projects/{project}/secrets/{id}`.
fn id_of(handle: &str) -> Result<&str, BackendError> {
    match handle.split('/').collect::<Vec<_>>().as_slice() {
        ["projects", project, "secrets", id] if !project.is_empty() && !id.is_empty() => Ok(id),
        _ => Err(BackendError::invalid(format!(
            "{handle:?} is not a Secret Manager secret's name (projects/{{project}}/secrets/{{id}})"
        ))),
    }
}

/// The locations of a secret's user-managed replicas (none for automatic replication).
fn replica_locations(secret: &Secret) -> Vec<&str> {
    secret
        .replication
        .as_ref()
        .and_then(|r| r.user_managed())
        .map(|u| u.replicas.iter().map(|r| r.location.as_str()).collect())
        .unwrap_or_default()
}

/// Whether the secret's replication names `region`.
fn lives_in(secret: &Secret, region: &str) -> bool {
    replica_locations(secret).contains(&region)
}

/// User-managed replication with one replica, in `region`.
fn replication_in(region: &str) -> Replication {
    Replication::new()
        .set_user_managed(UserManaged::new().set_replicas([Replica::new().set_location(region)]))
}

/// The annotations with the description set (an empty one removed), refused when Secret
/// Manager would refuse their size.
fn annotations_with(
    description: &str,
    current: &HashMap<String, String>,
) -> Result<HashMap<String, String>, BackendError> {
    let mut all = current.clone();
    if description.is_empty() {
        all.remove(DESCRIPTION);
    } else {
        all.insert(DESCRIPTION.to_owned(), description.to_owned());
    }
    let size: usize = all.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size >= ANNOTATIONS_MAX {
        return Err(BackendError::invalid(format!(
            "a Secret Manager secret has no description field: the description is kept in its \
             annotation `description`, and a secret's annotations must total less than 16 KiB \
             (these would take {size} bytes)"
        )));
    }
    Ok(all)
}

/// The description a secret carries: its annotation, or none.
fn description_of(secret: &Secret) -> String {
    secret
        .annotations
        .get(DESCRIPTION)
        .cloned()
        .unwrap_or_default()
}

/// A version's number, from its name (`…/versions/3`).
fn version_number(name: &str) -> Partial<String> {
    match name.rsplit_once("/versions/") {
        Some((_, n)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => {
            Partial::Known(n.to_owned())
        }
        _ => Partial::Unknown,
    }
}

fn reading(handle: &str, secret: &Secret, version: Partial<String>) -> Reading<Secrets> {
    let raw = labels::from_map(&secret.labels);
    Reading::new(
        handle,
        SecretsObserved {
            id: handle.to_owned(),
            version,
        },
        SecretsReported {
            value_from: Partial::Unknown,
            description: Partial::Known(description_of(secret)),
            tags: Partial::Known(labels::reported(&raw)),
        },
    )
    .with_raw_tags(raw)
}

/// Refuses a value Secret Manager would refuse (its size), without quoting it.
fn check_value(value: &SecretString) -> Result<(), BackendError> {
    let size = value.expose().len();
    if size > PAYLOAD_MAX {
        return Err(BackendError::invalid(format!(
            "a Secret Manager version holds at most 64 KiB; this value has {size} bytes"
        )));
    }
    Ok(())
}

/// `secrets`, realised as a Secret Manager secret.
pub(crate) struct SecretManagerSecrets {
    clients: Arc<Clients>,
}

impl SecretManagerSecrets {
    /// The kind, reaching Google Cloud through `clients`.
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        SecretManagerSecrets { clients }
    }

    fn handle(&self, id: &str) -> String {
        format!("projects/{}/secrets/{id}", self.clients.project())
    }

    /// The secret, or `NotFound` when it does not exist or is replicated elsewhere.
    async fn get(&self, region: &str, handle: &str) -> Result<Secret, BackendError> {
        id_of(handle)?;
        let secret = self
            .clients
            .secret_manager()
            .await?
            .get_secret()
            .set_name(handle)
            .send()
            .await
            .map_err(|e| classify(GET, e, NOT_FOUND))?;
        if !lives_in(&secret, region) {
            let locations = replica_locations(&secret);
            let where_ = if locations.is_empty() {
                "it has automatic replication, which belongs to no region".to_owned()
            } else {
                format!("it is replicated in {}", locations.join(", "))
            };
            return Err(BackendError::not_found(format!(
                "{GET}: secret {handle} is not one of {region}: {where_}"
            ))
            .with_code("NOT_FOUND"));
        }
        Ok(secret)
    }

    /// The secret as `settle_uncertain` wants it: `None` when absent.
    async fn find(
        &self,
        region: &str,
        handle: &str,
    ) -> Result<Option<(RawTags, Secret)>, BackendError> {
        match self.get(region, handle).await {
            Ok(secret) => Ok(Some((labels::from_map(&secret.labels), secret))),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The number of the secret's latest version, `Unknown` when it has none.
    async fn latest_version(&self, handle: &str) -> Result<Partial<String>, BackendError> {
        let sent = self
            .clients
            .secret_manager()
            .await?
            .get_secret_version()
            .set_name(format!("{handle}/versions/latest"))
            .send()
            .await;
        match sent {
            Ok(version) => Ok(version_number(&version.name)),
            Err(e) => {
                let e = classify("secretmanager:GetSecretVersion", e, NOT_FOUND);
                if e.kind == ErrorKind::NotFound {
                    Ok(Partial::Unknown)
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Writes `value` as the secret's new version; answers the version's number.
    async fn add_version(
        &self,
        handle: &str,
        value: &SecretString,
    ) -> Result<Partial<String>, BackendError> {
        let version = self
            .clients
            .secret_manager()
            .await?
            .add_secret_version()
            .set_parent(handle)
            .set_payload(SecretPayload::new().set_data(value.expose().as_bytes().to_vec()))
            .send()
            .await
            .map_err(|e| scrub_secret(classify(ADD_VERSION, e, &[]), value))?;
        Ok(version_number(&version.name))
    }

    /// Writes the first value of a secret just created. A write whose answer was lost is
    /// looked for (the secret then has a version); a failure says the secret is left
    /// without a value.
    async fn first_value(
        &self,
        handle: &str,
        value: &SecretString,
    ) -> Result<Partial<String>, BackendError> {
        let e = match self.add_version(handle, value).await {
            Ok(version) => return Ok(version),
            Err(e) => e,
        };
        if e.may_have_been_sent
            && let Ok(Partial::Known(version)) = self.latest_version(handle).await
        {
            return Ok(Partial::Known(version));
        }
        Err(BackendError {
            message: format!(
                "secret {handle} was created, but its value could not be written: the secret \
                 exists without a value ({})",
                e.message
            ),
            ..e
        })
    }

    /// Sets the secret's labels and annotations to `patch`'s, for the fields `paths`
    /// names, if the secret's etag is still `etag`.
    async fn patch(
        &self,
        handle: &str,
        etag: &str,
        patch: Secret,
        paths: Vec<&str>,
    ) -> Result<(), BackendError> {
        self.clients
            .secret_manager()
            .await?
            .update_secret()
            .set_secret(patch.set_name(handle).set_etag(etag))
            .set_update_mask(FieldMask::default().set_paths(paths))
            .send()
            .await
            .map_err(|e| classify(UPDATE, e, NOT_FOUND))?;
        Ok(())
    }

    async fn read_in(&self, region: &str, handle: &str) -> Result<Reading<Secrets>, BackendError> {
        let secret = self.get(region, handle).await?;
        let version = self.latest_version(handle).await?;
        Ok(reading(handle, &secret, version))
    }
}

/// The current value of a secret: `AccessSecretVersion` of its latest version.
#[async_trait]
impl SecretValues for SecretManagerSecrets {
    async fn secret_value(&self, args: SecretArgs<'_>) -> Result<SecretString, BackendError> {
        let SecretArgs { handle, .. } = args;
        id_of(handle)?;
        latest_value(&self.clients, handle).await
    }
}

#[async_trait]
impl KindBackend<Secrets> for SecretManagerSecrets {
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let parent = format!("projects/{}", self.clients.project());
        let mut secrets = self
            .clients
            .secret_manager()
            .await?
            .list_secrets()
            .set_parent(&parent)
            .by_item();
        let mut listed = Vec::new();
        while let Some(secret) = secrets.next().await {
            let secret = secret.map_err(|e| classify("secretmanager:ListSecrets", e, &[]))?;
            if !lives_in(&secret, region) {
                continue;
            }
            // The service names secrets by project number; the handle is always the
            // project id's form, the one a create answers.
            if let Ok(id) = id_of(&secret.name) {
                listed.push(Listed::new(id.to_owned(), self.handle(id)));
            }
        }
        Ok(listed)
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<Secrets>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        self.read_in(region, handle).await
    }

    async fn create(
        &self,
        args: CreateArgs<'_, Secrets>,
    ) -> Result<Written<Reading<Secrets>>, BackendError> {
        let CreateArgs {
            region,
            name,
            spec,
            marker,
            ..
        } = args;
        check_id(name)?;
        let labels = labels::for_create(spec.tags.known(), marker, &[])?;
        let annotations = match spec.description.known() {
            Some(description) => annotations_with(description, &HashMap::new())?,
            None => HashMap::new(),
        };
        // The value is had before anything is created: a variable that is not set
        // leaves nothing behind.
        let value = match spec.value_from.generated_length() {
            Some(length) => generate_secret(length)?,
            None => spec.value_from.resolve()?,
        };
        check_value(&value)?;
        let handle = self.handle(name);
        let sent = self
            .clients
            .secret_manager()
            .await?
            .create_secret()
            .set_parent(format!("projects/{}", self.clients.project()))
            .set_secret_id(name)
            .set_secret(
                Secret::new()
                    .set_replication(replication_in(region))
                    .set_labels(labels)
                    .set_annotations(annotations),
            )
            .send()
            .await;
        let (created, settled) = match sent {
            Ok(created) => (created, false),
            Err(e) => {
                let e = classify(CREATE, e, &[]);
                let found = settle_uncertain(e, marker, CREATE, self.find(region, &handle)).await?;
                (found, true)
            }
        };
        // A create settled after a lost answer may be an earlier attempt's, which may
        // hold its value already: a value is never written over.
        let existing = if settled {
            self.latest_version(&handle).await?
        } else {
            Partial::Unknown
        };
        let version = match existing {
            Partial::Known(version) => Partial::Known(version),
            Partial::Unknown => self.first_value(&handle, &value).await?,
        };
        drop(value);
        match self.read_in(region, &handle).await {
            Ok(read) => Ok(Written::Done(read)),
            // Not visible yet: the answer of the create stands for the read.
            Err(e) if e.kind == ErrorKind::NotFound => {
                Ok(Written::Done(reading(&handle, &created, version)))
            }
            Err(e) => Err(e),
        }
    }

    async fn update(
        &self,
        args: UpdateArgs<'_, Secrets>,
    ) -> Result<Written<Reading<Secrets>>, BackendError> {
        let UpdateArgs {
            region,
            handle,
            spec,
            ..
        } = args;
        let current = self.get(region, handle).await?;
        // The value is had before anything is written.
        let value = match spec.value_from.generated_length() {
            // A generated secret is never rewritten; one left without any value by a
            // failed create is given its first.
            Some(length) => match self.latest_version(handle).await? {
                Partial::Known(_) => None,
                Partial::Unknown => Some(generate_secret(length)?),
            },
            None => Some(spec.value_from.resolve()?),
        };
        if let Some(value) = &value {
            check_value(value)?;
        }
        let mut patch = Secret::new();
        let mut paths = Vec::new();
        if let Some(declared) = spec.tags.known() {
            let wanted = labels::for_update(declared, &labels::from_map(&current.labels))?;
            if wanted != labels::from_map(&current.labels) {
                patch = patch.set_labels(wanted);
                paths.push("labels");
            }
        }
        if let Some(description) = spec.description.known() {
            let wanted = annotations_with(description, &current.annotations)?;
            if wanted != current.annotations {
                patch = patch.set_annotations(wanted);
                paths.push("annotations");
            }
        }
        if !paths.is_empty() {
            self.patch(handle, &current.etag, patch, paths).await?;
        }
        if let Some(value) = value {
            self.add_version(handle, &value).await?;
        }
        Ok(Written::Done(self.read_in(region, handle).await?))
    }

    /// Deletes the secret and every version of it at once (Secret Manager has no
    /// recovery window). The secret is read first, so that one of another region is
    /// `NotFound` here. A delete whose answer was lost is done when the secret is gone.
    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        self.get(region, handle).await?;
        let sent = self
            .clients
            .secret_manager()
            .await?
            .delete_secret()
            .set_name(handle)
            .send()
            .await;
        match sent {
            Ok(_) => Ok(()),
            Err(e) => {
                let e = classify("secretmanager:DeleteSecret", e, NOT_FOUND);
                if e.may_have_been_sent && matches!(self.find(region, handle).await, Ok(None)) {
                    return Ok(());
                }
                Err(e)
            }
        }
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let secret = self.get(region, handle).await?;
        Ok(labels::from_map(&secret.labels))
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let secret = self.get(region, handle).await?;
        let current = labels::from_map(&secret.labels);
        if let Some(all) = labels::marking(&current, marker, &format!("secret {handle}"))? {
            self.patch(
                handle,
                &secret.etag,
                Secret::new().set_labels(all),
                vec!["labels"],
            )
            .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_refused_where_secret_manager_would_refuse_them() {
        assert!(check_id("db-password_2").is_ok());
        assert!(check_id(&"a".repeat(255)).is_ok());
        for bad in ["", "app/db", "db.password", "naïve", "a b"] {
            let e = check_id(bad).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Invalid, "{bad}");
        }
        assert_eq!(id_of("projects/p/secrets/db").unwrap(), "db");
        assert!(id_of("projects/p/secrets/db/versions/1").is_err());
        assert!(id_of("db").is_err());
    }

    #[test]
    fn replication_is_one_replica_in_the_region() {
        let secret = Secret::new().set_replication(replication_in("europe-west1"));
        assert!(lives_in(&secret, "europe-west1"));
        assert!(!lives_in(&secret, "us-central1"));
        let automatic = Secret::new()
            .set_replication(Replication::new().set_automatic(
                google_cloud_secretmanager_v1::model::replication::Automatic::new(),
            ));
        assert!(replica_locations(&automatic).is_empty());
        let wire = serde_json::to_value(&secret).unwrap();
        assert_eq!(
            wire["replication"],
            serde_json::json!({"userManaged": {"replicas": [{"location": "europe-west1"}]}})
        );
    }

    #[test]
    fn the_description_lives_in_an_annotation() {
        let others = HashMap::from([("team".to_owned(), "web".to_owned())]);
        let with = annotations_with("the database password", &others).unwrap();
        assert_eq!(with["description"], "the database password");
        assert_eq!(with["team"], "web");
        let secret = Secret::new().set_annotations(with.clone());
        assert_eq!(description_of(&secret), "the database password");
        let without = annotations_with("", &with).unwrap();
        assert!(!without.contains_key("description"));
        assert_eq!(description_of(&Secret::new()), "");
        let long = "x".repeat(ANNOTATIONS_MAX);
        let e = annotations_with(&long, &HashMap::new()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Invalid);
        assert!(e.message.contains("16 KiB"), "{}", e.message);
    }

    #[test]
    fn a_version_is_its_number() {
        assert_eq!(
            version_number("projects/p/secrets/db/versions/12"),
            Partial::Known("12".to_owned())
        );
        assert_eq!(version_number("projects/p/secrets/db"), Partial::Unknown);
        assert_eq!(
            version_number("projects/p/secrets/db/versions/latest"),
            Partial::Unknown
        );
    }

    #[test]
    fn errors_never_quote_the_value() {
        let big = SecretString::new("x".repeat(PAYLOAD_MAX + 1));
        let e = check_value(&big).unwrap_err();
        assert!(!e.message.contains("xxxx"));
    }
}
