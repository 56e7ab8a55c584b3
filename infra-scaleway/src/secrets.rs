//! Secret Manager (v1beta1): the `secrets` kind, and the reader of secret values.
//!
//! A `secrets` resource is a Secret Manager secret of type `opaque` in the resource's
//! region and the configured project, never protected. The handle is the secret's id
//! (a UUID); a handle of another region is `NotFound` there (Scaleway answers 404).
//!
//! **Names.** Scaleway keeps a secret's name and its folder (`path`) apart. A declared
//! name without `/` is a secret of that name under `/`; a declared name with `/` puts
//! the secret in a folder: `app/db` is the secret `db` under `/app`. Each part is 1 to
//! 255 letters, digits, `.`, `_` and `-` (Scaleway's rule for path parts; `.` and `..`
//! alone are refused), no part empty: another name is refused as `Invalid` before any
//! call. `list` answers a secret under `/` by its name and one in a folder as
//! `folder/name`, so that a name means the same secret both ways. Two secrets may share
//! a name only under different folders: a name taken is `Conflict`.
//!
//! **The marker** is one of the tags of `POST …/secrets`, the creating call (tags are
//! plain strings: the portable tags are written `key=value`, see `crate::tags`).
//!
//! **The value.** A value from the environment, or composed, is resolved
//! (`SecretSourceSettled::resolve`) in the create or update that writes it. A generated
//! value is drawn here with `infra_core::sdk::generate_secret`, since Secret Manager has
//! no generator, and drawn again until it holds a digit, an uppercase and a lowercase
//! letter and a special character (from 8 characters on), so that any generated secret
//! can be a Managed Database password. Either is held in a [`SecretString`] and sent once, base64-encoded, as
//! the `data` of `POST …/secrets/{id}/versions`; it is never recorded, logged, tagged or
//! put in an error (an error of that call has the value, plain or encoded, replaced by
//! `<redacted>`). A value over 64 KiB is refused before any call, without quoting it.
//!
//! A create is `POST …/secrets` (the marker in its tags), then the first version. Should
//! the second call fail, the error says that the secret exists without a value. A create
//! whose answer was lost is settled by looking the secret up by name and folder: found
//! with this fleet's marker, it is the one the create made (and a value it already holds
//! is not written over).
//!
//! An update writes a new version only for a value from the environment or composed,
//! and only when it differs from the value the secret holds (read through its latest
//! enabled version, compared in memory); the new version disables the previous one, so
//! that the latest enabled version is always the current value. A generated secret is
//! never rewritten (one left without any version by a failed create is given its
//! first). Tags and the description change with `PATCH …/secrets/{id}`, naming only
//! what differs; the marker the secret carries is kept. Scaleway keeps at most 20
//! versions of a secret: a secret whose value changed more often is refused by Scaleway
//! (`quotas_exceeded`, `Invalid`).
//!
//! A delete is `DELETE …/secrets/{id}`: Scaleway schedules the secret and its versions
//! for deletion, seven days later. A secret scheduled for deletion can no longer be
//! changed nor read: `read`, `ownership` and `delete` answer `NotFound` for it, and
//! `list` (as Scaleway's listing) leaves it out.
//!
//! What read reports when Secret Manager does not say:
//! - `valueFrom`: never read. `read` calls `GET …/secrets/{id}` and
//!   `GET …/versions/latest_enabled`, which hold no value, so the field is always
//!   `Unknown` (never drift). The value is read by `secret_value` alone.
//! - `description`: `description`; a secret without one has the truth `""`.
//! - `tags`: the tags, split at the first `=`; "no tags" is the truth, an empty map.
//!   The marker is included; the engine strips it.
//! - The observed `version` is the revision of the latest enabled version, `Unknown`
//!   for a secret that has none.

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use infra_core::kinds::SecretsSettled;
use infra_core::kinds::{Secrets, SecretsObserved, SecretsReported};
use infra_core::prelude::Partial;
use infra_core::sdk::poll::settle_uncertain;
use infra_core::sdk::{
    BackendError, CreateArgs, DeleteArgs, ErrorKind, KindBackend, ListArgs, Listed, MarkArgs,
    Marker, OwnershipArgs, RawTags, ReadArgs, Reading, Router, SecretArgs, SecretString,
    SecretValues, UpdateArgs, Written, generate_secret, scrub_secret,
};
use serde::{Deserialize, Serialize};

use crate::api::Call;
use crate::clients::Clients;
use crate::secret_value::{check_handle, latest_value};
use crate::tags;

/// The `not_found` resource types meaning "this secret does not exist".
const NO_SECRET: &[&str] = &["secret"];

/// Scaleway's bound on a version's payload.
const PAYLOAD_MAX: usize = 64 * 1024;

/// Scaleway's bound on each part of a secret's folder and on its name.
const PART_MAX: usize = 255;

const GET: &str = "secret-manager:GetSecret";
const CREATE: &str = "secret-manager:CreateSecret";
const UPDATE: &str = "secret-manager:UpdateSecret";
const DELETE: &str = "secret-manager:DeleteSecret";
const ADD_VERSION: &str = "secret-manager:CreateSecretVersion";

/// Adds this product's kind, and the reader of secret values, to `router`.
pub(crate) fn register(mut router: Router, clients: &Arc<Clients>) -> Router {
    router.add::<Secrets>(SecretManagerSecrets::new(Arc::clone(clients)));
    router.secrets(SecretManagerSecrets::new(Arc::clone(clients)))
}

/// A secret as Scaleway answers it (the fields read here).
#[derive(Debug, Clone, Deserialize)]
struct Secret {
    id: String,
    name: String,
    #[serde(default)]
    path: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    version_count: u64,
    #[serde(default)]
    deletion_requested_at: Option<String>,
}

impl Secret {
    /// The name the fleet knows it by: `name` under `/`, `folder/name` elsewhere.
    fn full_name(&self) -> String {
        match self.path.trim_matches('/') {
            "" => self.name.clone(),
            folder => format!("{folder}/{}", self.name),
        }
    }
}

/// A version as Scaleway answers it (its revision).
#[derive(Debug, Deserialize)]
struct Version {
    revision: u64,
}

/// The body of `POST …/secrets`.
#[derive(Debug, Serialize)]
struct NewSecret<'a> {
    name: &'a str,
    project_id: &'a str,
    tags: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    #[serde(rename = "type")]
    kind: &'static str,
    path: &'a str,
    protected: bool,
}

/// The body of `PATCH …/secrets/{id}`: only what changes.
#[derive(Debug, Default, Serialize, PartialEq)]
struct SecretPatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    tags: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
}

/// The body of `POST …/secrets/{id}/versions`. Its `Debug` never shows `data`.
#[derive(Serialize)]
struct NewVersion<'a> {
    data: &'a str,
    disable_previous: bool,
}

/// The folder (`/`, `/app`) and the name of a declared name; refused as `Invalid` when
/// Scaleway would refuse either.
fn split_name(declared: &str) -> Result<(String, &str), BackendError> {
    let parts: Vec<&str> = declared.split('/').collect();
    let bad = parts.iter().find(|part| {
        part.is_empty()
            || part.len() > PART_MAX
            || **part == "."
            || **part == ".."
            || !part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    });
    if let Some(part) = bad {
        return Err(BackendError::invalid(format!(
            "secret name {declared:?}: each part of a Secret Manager secret's name and folder is \
             1 to 255 letters, digits, `.`, `_` and `-` (not {part:?})"
        )));
    }
    let (folders, name) = parts.split_at(parts.len() - 1);
    Ok((format!("/{}", folders.join("/")), name[0]))
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

/// The error of a call that carried `value`, with the value (plain or base64) removed.
fn scrubbed(e: BackendError, value: &SecretString, encoded: &SecretString) -> BackendError {
    scrub_secret(scrub_secret(e, value), encoded)
}

fn reading(secret: &Secret, version: Partial<String>) -> Reading<Secrets> {
    let raw = tags::to_map(&secret.tags);
    Reading::new(
        &secret.id,
        SecretsObserved {
            id: secret.id.clone(),
            version,
        },
        SecretsReported {
            value_from: Partial::Unknown,
            description: Partial::Known(secret.description.clone().unwrap_or_default()),
            tags: Partial::Known(raw.clone()),
        },
    )
    .with_raw_tags(raw)
}

/// The patch bringing `current` to the declared tags and description; `None` when
/// nothing differs.
fn patch_for(
    declared_tags: Option<&RawTags>,
    declared_description: Option<&String>,
    current: &Secret,
) -> Option<SecretPatch> {
    let mut patch = SecretPatch::default();
    if let Some(declared) = declared_tags {
        let wanted = tags::for_update(tags::from_map(declared), &current.tags);
        let mut now = current.tags.clone();
        now.sort();
        if wanted != now {
            patch.tags = Some(wanted);
        }
    }
    if let Some(description) = declared_description
        && current.description.as_deref().unwrap_or_default() != description
    {
        patch.description = Some(description.clone());
    }
    (patch != SecretPatch::default()).then_some(patch)
}

/// `secrets`, realised as a Secret Manager secret; also the backend's reader of values.
pub(crate) struct SecretManagerSecrets {
    clients: Arc<Clients>,
}

impl SecretManagerSecrets {
    /// The kind, reaching Scaleway through `clients`.
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        SecretManagerSecrets { clients }
    }

    fn base(region: &str) -> String {
        format!("/secret-manager/v1beta1/regions/{region}/secrets")
    }

    /// The secret, or `NotFound` when it does not exist (in this region) or is scheduled
    /// for deletion.
    async fn get(&self, region: &str, handle: &str) -> Result<Secret, BackendError> {
        check_handle(handle)?;
        let path = format!("{}/{handle}", Self::base(region));
        let secret: Secret = self
            .clients
            .api()
            .call(Call::get(GET, path).not_found(NO_SECRET))
            .await?;
        if secret.deletion_requested_at.is_some() {
            return Err(BackendError::not_found(format!(
                "{GET}: secret {handle} is scheduled for deletion"
            ))
            .with_code("not_found"));
        }
        Ok(secret)
    }

    /// The secret named `declared` (by name and folder), for `settle_uncertain`.
    async fn find(
        &self,
        region: &str,
        declared: &str,
    ) -> Result<Option<(RawTags, Secret)>, BackendError> {
        let (folder, name) = split_name(declared)?;
        let call = Call::get("secret-manager:ListSecrets", Self::base(region))
            .query("project_id", self.clients.project_id())
            .query("name", name)
            .query("path", folder.clone());
        let all: Vec<Secret> = self.clients.api().list_all(call, "secrets").await?;
        Ok(all
            .into_iter()
            .find(|s| s.name == name && s.path == folder && s.deletion_requested_at.is_none())
            .map(|s| (tags::to_map(&s.tags), s)))
    }

    /// The revision of the secret's latest enabled version, `Unknown` when it has none.
    async fn latest_revision(
        &self,
        region: &str,
        secret: &Secret,
    ) -> Result<Partial<String>, BackendError> {
        if secret.version_count == 0 {
            return Ok(Partial::Unknown);
        }
        let path = format!(
            "{}/{}/versions/latest_enabled",
            Self::base(region),
            secret.id
        );
        let call =
            Call::get("secret-manager:GetSecretVersion", path).not_found(&["secret_version"]);
        match self.clients.api().call::<Version>(call).await {
            Ok(version) => Ok(Partial::Known(version.revision.to_string())),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(Partial::Unknown),
            Err(e) => Err(e),
        }
    }

    /// Writes `value` as the secret's new version, disabling the previous one.
    async fn add_version(
        &self,
        region: &str,
        handle: &str,
        value: &SecretString,
    ) -> Result<(), BackendError> {
        let encoded = SecretString::new(STANDARD.encode(value.expose()));
        let body = NewVersion {
            data: encoded.expose(),
            disable_previous: true,
        };
        let path = format!("{}/{handle}/versions", Self::base(region));
        self.clients
            .api()
            .act(
                Call::create(ADD_VERSION, path).not_found(NO_SECRET),
                Some(&body),
            )
            .await
            .map_err(|e| scrubbed(e, value, &encoded))
    }

    /// Writes the first value of a secret just created. A write whose answer was lost is
    /// looked for (the secret then has a version); a failure says the secret is left
    /// without a value.
    async fn first_value(
        &self,
        region: &str,
        handle: &str,
        value: &SecretString,
    ) -> Result<(), BackendError> {
        let e = match self.add_version(region, handle, value).await {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if e.may_have_been_sent
            && let Ok(secret) = self.get(region, handle).await
            && secret.version_count > 0
        {
            return Ok(());
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

    /// The value an update must write, if any (see the module documentation).
    async fn value_to_write(
        &self,
        region: &str,
        current: &Secret,
        spec: &SecretsSettled,
    ) -> Result<Option<SecretString>, BackendError> {
        if let Some(length) = spec.value_from.generated_length() {
            if current.version_count > 0 {
                return Ok(None);
            }
            return generated(length).map(Some);
        }
        let wanted = spec.value_from.resolve()?;
        check_value(&wanted)?;
        if current.version_count == 0 {
            return Ok(Some(wanted));
        }
        match latest_value(&self.clients, region, &current.id).await {
            Ok(now) if now.expose() == wanted.expose() => Ok(None),
            Ok(_) => Ok(Some(wanted)),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(Some(wanted)),
            Err(e) => Err(e),
        }
    }

    async fn patch(
        &self,
        region: &str,
        handle: &str,
        patch: &SecretPatch,
    ) -> Result<(), BackendError> {
        let path = format!("{}/{handle}", Self::base(region));
        self.clients
            .api()
            .act(Call::patch(UPDATE, path).not_found(NO_SECRET), Some(patch))
            .await
    }

    async fn read_in(&self, region: &str, handle: &str) -> Result<Reading<Secrets>, BackendError> {
        let secret = self.get(region, handle).await?;
        let version = self.latest_revision(region, &secret).await?;
        Ok(reading(&secret, version))
    }

    /// `POST …/secrets`, settled by name and marker when its answer was lost. Answers
    /// the secret and whether it was found rather than answered.
    async fn create_secret(
        &self,
        region: &str,
        declared: &str,
        body: &NewSecret<'_>,
        marker: &Marker,
    ) -> Result<(Secret, bool), BackendError> {
        let call = Call::create(CREATE, Self::base(region));
        match self.clients.api().send::<Secret>(call, Some(body)).await {
            Ok(secret) => Ok((secret, false)),
            Err(e) => settle_uncertain(e, marker, CREATE, self.find(region, declared))
                .await
                .map(|secret| (secret, true)),
        }
    }
}

/// The current value of a secret: its latest enabled version.
#[async_trait]
impl SecretValues for SecretManagerSecrets {
    async fn secret_value(&self, args: SecretArgs<'_>) -> Result<SecretString, BackendError> {
        let SecretArgs { region, handle, .. } = args;
        latest_value(&self.clients, region, handle).await
    }
}

#[async_trait]
impl KindBackend<Secrets> for SecretManagerSecrets {
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let call = Call::get("secret-manager:ListSecrets", Self::base(region))
            .query("project_id", self.clients.project_id());
        let all: Vec<Secret> = self.clients.api().list_all(call, "secrets").await?;
        Ok(all
            .into_iter()
            .filter(|s| s.deletion_requested_at.is_none())
            .map(|s| Listed::new(s.full_name(), s.id))
            .collect())
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
        let (folder, leaf) = split_name(name)?;
        // The value is had before anything is created: a variable that is not set
        // leaves nothing behind.
        let value = match spec.value_from.generated_length() {
            Some(length) => generated(length)?,
            None => spec.value_from.resolve()?,
        };
        check_value(&value)?;
        let declared = spec.tags.known().map(tags::from_map).unwrap_or_default();
        let body = NewSecret {
            name: leaf,
            project_id: self.clients.project_id(),
            tags: tags::for_create(declared, marker),
            description: spec.description.known().map(String::as_str),
            kind: "opaque",
            path: &folder,
            protected: false,
        };
        let (created, settled) = self.create_secret(region, name, &body, marker).await?;
        // A create settled after a lost answer may be an earlier attempt's, which may
        // hold its value already: a value is never written over.
        if !(settled && created.version_count > 0) {
            self.first_value(region, &created.id, &value).await?;
        }
        drop(value);
        match self.read_in(region, &created.id).await {
            Ok(read) => Ok(Written::Done(read)),
            // Not visible yet: the answer of the create stands for the read.
            Err(e) if e.kind == ErrorKind::NotFound => {
                Ok(Written::Done(reading(&created, Partial::Unknown)))
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
        let value = self.value_to_write(region, &current, spec).await?;
        if let Some(patch) = patch_for(spec.tags.known(), spec.description.known(), &current) {
            self.patch(region, handle, &patch).await?;
        }
        if let Some(value) = value {
            self.add_version(region, handle, &value).await?;
        }
        Ok(Written::Done(self.read_in(region, handle).await?))
    }

    /// Schedules the secret for deletion (see the module documentation). It is read
    /// first, so that one already scheduled is `NotFound`. A delete whose answer was
    /// lost is done when the secret is gone or scheduled.
    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        self.get(region, handle).await?;
        let path = format!("{}/{handle}", Self::base(region));
        let sent = self
            .clients
            .api()
            .act(Call::delete(DELETE, path).not_found(NO_SECRET), None::<&()>)
            .await;
        match sent {
            Ok(()) => Ok(()),
            Err(e) if e.may_have_been_sent => match self.get(region, handle).await {
                Err(gone) if gone.kind == ErrorKind::NotFound => Ok(()),
                _ => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let secret = self.get(region, handle).await?;
        Ok(tags::to_map(&secret.tags))
    }

    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let secret = self.get(region, handle).await?;
        if let Some(all) = tags::marking(&secret.tags, marker, &format!("secret {handle}"))? {
            let patch = SecretPatch {
                tags: Some(all),
                description: None,
            };
            self.patch(region, handle, &patch).await?;
        }
        Ok(())
    }
}

/// A generated value of `length` characters that any Scaleway product accepts as a
/// password: Managed Database wants a digit, an uppercase and a lowercase letter and a
/// special character in 8 characters or more. Values are drawn again until they have
/// all four (about 1.3 draws for 24 characters), so that each value kept is still
/// uniform among the valid ones; shorter values cannot be passwords and are kept as
/// drawn.
fn generated(length: u16) -> Result<SecretString, BackendError> {
    loop {
        let value = generate_secret(length)?;
        if length < 8 || every_class(value.expose()) {
            return Ok(value);
        }
    }
}

/// Whether `value` holds a digit, an uppercase letter, a lowercase letter and something
/// else.
fn every_class(value: &str) -> bool {
    let has = |class: fn(&u8) -> bool| value.as_bytes().iter().any(class);
    has(u8::is_ascii_digit)
        && has(u8::is_ascii_uppercase)
        && has(u8::is_ascii_lowercase)
        && has(|b| !b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_values_have_every_class_a_database_password_needs() {
        for _ in 0..200 {
            let value = generated(12).unwrap();
            assert_eq!(value.expose().len(), 12);
            assert!(
                every_class(value.expose()),
                "a generated value lacks a class"
            );
        }
        assert!(!every_class("abcDEF123456"));
        assert!(every_class("abcDEF12345-"));
        assert_eq!(generated(4).unwrap().expose().len(), 4);
    }
    use serde_json::{Value, json};

    fn secret(tags: &[&str], description: Option<&str>) -> Secret {
        Secret {
            id: "00000001-5ca1-4e00-8000-000000001eef".to_owned(),
            name: "db".to_owned(),
            path: "/".to_owned(),
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            description: description.map(str::to_owned),
            version_count: 1,
            deletion_requested_at: None,
        }
    }

    #[test]
    fn names_become_a_folder_and_a_name() {
        assert_eq!(split_name("db").unwrap(), ("/".to_owned(), "db"));
        assert_eq!(
            split_name("app/prod/db.password").unwrap(),
            ("/app/prod".to_owned(), "db.password")
        );
        for bad in ["", "/db", "db/", "a//b", "a/../b", ".", "naïve", "a b"] {
            assert_eq!(
                split_name(bad).unwrap_err().kind,
                ErrorKind::Invalid,
                "{bad}"
            );
        }
        let mut s = secret(&[], None);
        assert_eq!(s.full_name(), "db");
        s.path = "/app/prod".to_owned();
        assert_eq!(s.full_name(), "app/prod/db");
    }

    #[test]
    fn a_create_carries_the_marker_type_and_folder() {
        let marker = Marker::new("shop");
        let declared = RawTags::from([("team".to_owned(), "web".to_owned())]);
        let body = NewSecret {
            name: "db",
            project_id: "p",
            tags: tags::for_create(tags::from_map(&declared), &marker),
            description: None,
            kind: "opaque",
            path: "/",
            protected: false,
        };
        let wire = serde_json::to_value(&body).unwrap();
        assert_eq!(wire["tags"], json!(["managed-by-infra=shop", "team=web"]));
        assert_eq!(wire["type"], "opaque");
        assert_eq!(wire["protected"], false);
        assert!(wire.get("description").is_none());
    }

    #[test]
    fn reads_report_tags_description_and_never_a_value() {
        let read = reading(
            &secret(&["managed-by-infra=shop", "team=web"], None),
            Partial::Known("3".to_owned()),
        );
        assert_eq!(read.reported()["description"], json!(""));
        assert_eq!(
            read.reported()["tags"],
            json!({"managed-by-infra": "shop", "team": "web"})
        );
        assert_eq!(read.observed().version, Partial::Known("3".to_owned()));
        assert!(read.reported().get("valueFrom").is_none_or(Value::is_null));
    }

    #[test]
    fn an_update_patches_only_what_differs_and_keeps_the_marker() {
        let current = secret(&["team=web", "managed-by-infra=shop"], Some("old"));
        let same = RawTags::from([("team".to_owned(), "web".to_owned())]);
        assert_eq!(
            patch_for(Some(&same), Some(&"old".to_owned()), &current),
            None
        );
        assert_eq!(patch_for(None, None, &current), None);
        let other = RawTags::from([("team".to_owned(), "ops".to_owned())]);
        let patch = patch_for(Some(&other), Some(&"new".to_owned()), &current).unwrap();
        assert_eq!(
            patch.tags.unwrap(),
            vec!["managed-by-infra=shop".to_owned(), "team=ops".to_owned()]
        );
        assert_eq!(patch.description.as_deref(), Some("new"));
        let only_description = patch_for(Some(&same), Some(&String::new()), &current).unwrap();
        assert_eq!(
            serde_json::to_value(&only_description).unwrap(),
            json!({"description": ""})
        );
    }

    #[test]
    fn errors_never_quote_the_value() {
        let big = SecretString::new("x".repeat(PAYLOAD_MAX + 1));
        assert!(!check_value(&big).unwrap_err().message.contains("xxxx"));
        let value = SecretString::new("hunter2-hunter2");
        let encoded = SecretString::new(STANDARD.encode(value.expose()));
        let quoted = BackendError::invalid(format!(
            "refused {} and {}",
            value.expose(),
            encoded.expose()
        ));
        let e = scrubbed(quoted, &value, &encoded);
        assert!(!e.message.contains("hunter2") && !e.message.contains(encoded.expose()));
    }
}

#[cfg(test)]
#[path = "recorded/secrets.rs"]
mod recorded;
