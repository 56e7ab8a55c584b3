//! Secrets Manager: the `secrets` kind.
//!
//! The handle is the secret's ARN; the name is the secret's name.
//!
//! What read reports when Secrets Manager does not say:
//! - `valueFrom`: never read. `read` calls only `DescribeSecret`, which holds no value,
//!   so the field is always `Unknown` (and so never drift). The value is read by
//!   `secret_value` alone (the [`SecretValues`] implementation), for the one create
//!   or update that needs it.
//! - `description`: Secrets Manager leaves an empty description out of its answer;
//!   that is the truth, the empty description, never a guess.
//! - `tags`: "no tags" is the truth, an empty map. The marker is included; the engine
//!   strips it.
//! - The observed `version` is the id of the version staged `AWSCURRENT`, `Unknown`
//!   when the answer names none.
//!
//! A secret scheduled for deletion (by someone else: this module deletes without a
//! recovery window) is absent: it cannot be read nor used, and `ListSecrets` leaves it
//! out. Its name stays taken until the window ends, so a create under that name is a
//! `Conflict` that says so.
//!
//! The marker is part of `CreateSecret` itself (its `Tags`).
//!
//! The value is resolved (from the apply process's environment, or the composed value)
//! or generated (by Secrets Manager's own `GetRandomPassword`) in the create or update
//! that writes it, held in a [`SecretString`] for that one call, and never stored,
//! logged or put in an error message.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_secretsmanager::operation::describe_secret::DescribeSecretOutput;
use aws_sdk_secretsmanager::types::{SecretListEntry, Tag};
use infra_core::kinds::{Secrets, SecretsObserved, SecretsReported, SecretsSettled};
use infra_core::sdk::{
    CreateArgs, DeleteArgs, KindBackend, ListArgs, MarkArgs, OwnershipArgs, ReadArgs, Reading,
    SecretArgs, SecretValues, UpdateArgs, Written,
};
use infra_core::{
    prelude::{Partial, SecretString},
    sdk::{BackendError, ErrorKind, Listed, RawTags},
};

use crate::clients::{Clients, RegionClients};
use crate::error::classify;
use crate::tags::{TagChanges, marking, tag_changes, wanted_tags, with_marker};

/// Codes that mean the secret does not exist.
const NO_SECRET: &[&str] = &["ResourceNotFoundException"];

/// The staging label of a secret's current version.
const CURRENT: &str = "AWSCURRENT";

/// Characters a generated value never holds: RDS refuses `/`, `"`, `@` and spaces in a
/// master password (the first use of a generated secret), and quotes and backslashes
/// break the connection strings a value is composed into.
const EXCLUDED: &str = "/\"@'\\` ";

/// The secret's description, or `NotFound` when it does not exist or is scheduled for
/// deletion.
async fn describe(c: &RegionClients, handle: &str) -> Result<DescribeSecretOutput, BackendError> {
    let out = c
        .secrets()
        .describe_secret()
        .secret_id(handle)
        .send()
        .await
        .map_err(|e| classify("secretsmanager:DescribeSecret", e, NO_SECRET))?;
    if out.deleted_date().is_some() {
        return Err(
            BackendError::not_found(format!("secret {handle} is scheduled for deletion"))
                .with_code("ResourceNotFoundException"),
        );
    }
    Ok(out)
}

fn tags_of(tags: &[Tag]) -> RawTags {
    tags.iter()
        .filter_map(|t| {
            Some((
                t.key()?.to_owned(),
                t.value().unwrap_or_default().to_owned(),
            ))
        })
        .collect()
}

fn tag_list(tags: &RawTags) -> Vec<Tag> {
    tags.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

/// What `DescribeSecret` and a `ListSecrets` entry both answer of a secret: its
/// ARN, description, tags and versions with their staging labels.
struct Described<'a> {
    arn: Option<&'a str>,
    description: Option<&'a str>,
    tags: &'a [Tag],
    versions: Option<&'a HashMap<String, Vec<String>>>,
}

impl<'a> From<&'a DescribeSecretOutput> for Described<'a> {
    fn from(out: &'a DescribeSecretOutput) -> Self {
        Described {
            arn: out.arn(),
            description: out.description(),
            tags: out.tags(),
            versions: out.version_ids_to_stages(),
        }
    }
}

impl<'a> From<&'a SecretListEntry> for Described<'a> {
    fn from(entry: &'a SecretListEntry) -> Self {
        Described {
            arn: entry.arn(),
            description: entry.description(),
            tags: entry.tags(),
            versions: entry.secret_versions_to_stages(),
        }
    }
}

/// The secret's read, raw tags included: the one conversion a `read` and a `list`
/// share.
fn reading(handle: &str, out: Described<'_>) -> Reading<Secrets> {
    let version = out
        .versions
        .and_then(|versions| {
            versions
                .iter()
                .find(|(_, stages)| stages.iter().any(|s| s == CURRENT))
                .map(|(id, _)| id.clone())
        })
        .map_or(Partial::Unknown, Partial::Known);
    let tags = tags_of(out.tags);
    Reading::new(
        handle,
        SecretsObserved {
            id: out.arn.unwrap_or(handle).to_owned(),
            version,
        },
        SecretsReported {
            value_from: Partial::Unknown,
            description: Partial::Known(out.description.unwrap_or_default().to_owned()),
            tags: Partial::Known(tags.clone()),
        },
    )
    .with_raw_tags(tags)
}

/// The same error without the value, should the service have quoted it.
fn scrub(mut e: BackendError, value: &SecretString) -> BackendError {
    let plain = value.expose();
    if !plain.is_empty() && e.message.contains(plain) {
        e.message = e.message.replace(plain, "<redacted>");
    }
    e
}

/// A value of `length` characters drawn by Secrets Manager.
async fn generate(c: &RegionClients, length: u16) -> Result<SecretString, BackendError> {
    let out = c
        .secrets()
        .get_random_password()
        .password_length(i64::from(length))
        .exclude_characters(EXCLUDED)
        .send()
        .await
        .map_err(|e| classify("secretsmanager:GetRandomPassword", e, &[]))?;
    out.random_password.map(SecretString::new).ok_or_else(|| {
        BackendError::new(
            ErrorKind::Other,
            "secretsmanager:GetRandomPassword answered no password",
        )
    })
}

/// The value a create or update writes: `None` for a generated secret on update (its
/// value is Secrets Manager's, drawn once, on create).
fn declared_value(spec: &SecretsSettled) -> Result<Option<SecretString>, BackendError> {
    match spec.value_from.generated_length() {
        Some(_) => Ok(None),
        None => spec.value_from.resolve().map(Some),
    }
}

/// Brings the secret's tags to `declared`, keeping the marker as it is.
async fn set_tags(
    c: &RegionClients,
    handle: &str,
    declared: &RawTags,
    current: &RawTags,
) -> Result<(), BackendError> {
    let TagChanges {
        remove: stale,
        write: fresh,
    } = tag_changes(current, &wanted_tags(declared, current), &[]);
    if !stale.is_empty() {
        c.secrets()
            .untag_resource()
            .secret_id(handle)
            .set_tag_keys(Some(stale))
            .send()
            .await
            .map_err(|e| classify("secretsmanager:UntagResource", e, NO_SECRET))?;
    }
    if !fresh.is_empty() {
        c.secrets()
            .tag_resource()
            .secret_id(handle)
            .set_tags(Some(tag_list(&fresh)))
            .send()
            .await
            .map_err(|e| classify("secretsmanager:TagResource", e, NO_SECRET))?;
    }
    Ok(())
}

/// `secrets`, realised as a Secrets Manager secret.
pub(crate) struct SecretsManagerSecrets {
    clients: Arc<Clients>,
}

impl SecretsManagerSecrets {
    /// The kind, reaching AWS through `clients` (one set per region, made on first use).
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        SecretsManagerSecrets { clients }
    }
}

/// The current value of a secret: Secrets Manager's `GetSecretValue`.
#[async_trait]
impl SecretValues for SecretsManagerSecrets {
    async fn secret_value(&self, args: SecretArgs<'_>) -> Result<SecretString, BackendError> {
        let SecretArgs { region, handle, .. } = args;
        let out = self
            .clients
            .region(region)
            .secrets()
            .get_secret_value()
            .secret_id(handle)
            .send()
            .await
            .map_err(|e| classify("secretsmanager:GetSecretValue", e, NO_SECRET))?;
        match out.secret_string {
            Some(value) => Ok(SecretString::new(value)),
            None => Err(BackendError::invalid(format!(
                "secret {handle} holds a binary value, not a string"
            ))),
        }
    }
}

#[async_trait]
impl KindBackend<Secrets> for SecretsManagerSecrets {
    /// A `ListSecrets` entry carries all a read reports: ARN, description, tags and the
    /// versions with their staging labels (`SecretVersionsToStages`).
    fn lists_complete(&self) -> bool {
        true
    }

    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        let ListArgs { region, .. } = args;
        let c = &self.clients.region(region);
        let mut listed = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = c
                .secrets()
                .list_secrets()
                .set_next_token(token.take())
                .send()
                .await
                .map_err(|e| classify("secretsmanager:ListSecrets", e, &[]))?;
            for entry in out.secret_list() {
                if let (Some(name), Some(arn)) = (entry.name(), entry.arn()) {
                    let found = Listed::new(name.to_owned(), arn.to_owned());
                    // One scheduled for deletion is absent: handed over bare, its read
                    // says so.
                    listed.push(match entry.deleted_date() {
                        None => found.with_reading(reading(arn, entry.into())),
                        Some(_) => found,
                    });
                }
            }
            match out.next_token() {
                Some(next) if !next.is_empty() => token = Some(next.to_owned()),
                _ => break,
            }
        }
        Ok(listed)
    }

    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<Secrets>, BackendError> {
        let ReadArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        Ok(reading(handle, (&describe(c, handle).await?).into()))
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
        let c = &self.clients.region(region);
        let value = match spec.value_from.generated_length() {
            Some(length) => generate(c, length).await?,
            None => spec.value_from.resolve()?,
        };
        let tags = with_marker(spec.tags.known(), marker);
        let sent = c
            .secrets()
            .create_secret()
            .name(name)
            .secret_string(value.expose())
            .set_description(spec.description.known().cloned())
            .set_tags(Some(tag_list(&tags)))
            .send()
            .await;
        let out = match sent {
            Ok(out) => out,
            Err(e) => {
                let e = scrub(classify("secretsmanager:CreateSecret", e, &[]), &value);
                // A name whose secret waits out its recovery window is taken.
                let pending = e.code.as_deref() == Some("InvalidRequestException")
                    && e.message.contains("scheduled for deletion");
                return Err(if pending {
                    BackendError {
                        kind: ErrorKind::Conflict,
                        ..e
                    }
                } else {
                    e
                });
            }
        };
        drop(value);
        let handle = out.arn().ok_or_else(|| {
            BackendError::new(
                ErrorKind::Other,
                format!("secretsmanager:CreateSecret answered no ARN for {name}"),
            )
            .maybe_sent()
        })?;
        let read = self.read(ReadArgs::new(region, handle)).await?;
        Ok(Written::Done(read))
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
        let c = &self.clients.region(region);
        let current = describe(c, handle).await?;
        let value = declared_value(spec)?;
        let description = spec.description.known().cloned();
        if description.is_some() || value.is_some() {
            c.secrets()
                .update_secret()
                .secret_id(handle)
                .set_description(description)
                .set_secret_string(value.as_ref().map(|v| v.expose().to_owned()))
                .send()
                .await
                .map_err(|e| {
                    let e = classify("secretsmanager:UpdateSecret", e, NO_SECRET);
                    match &value {
                        Some(v) => scrub(e, v),
                        None => e,
                    }
                })?;
        }
        drop(value);
        if let Some(declared) = spec.tags.known() {
            set_tags(c, handle, declared, &tags_of(current.tags())).await?;
        }
        let read = self.read(ReadArgs::new(region, handle)).await?;
        Ok(Written::Done(read))
    }

    /// Deletes without a recovery window: a name scheduled for deletion cannot be taken
    /// again for the 7 to 30 days of the window, which would make a replace (delete,
    /// then create under the same name) and a re-create after a teardown impossible.
    ///
    /// A forced delete of a secret that does not exist succeeds, so the secret is
    /// described first: an absent one is `NotFound`.
    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        let DeleteArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        describe(c, handle).await?;
        c.secrets()
            .delete_secret()
            .secret_id(handle)
            .force_delete_without_recovery(true)
            .send()
            .await
            .map_err(|e| classify("secretsmanager:DeleteSecret", e, NO_SECRET))?;
        Ok(())
    }

    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        let OwnershipArgs { region, handle, .. } = args;
        let c = &self.clients.region(region);
        Ok(tags_of(describe(c, handle).await?.tags()))
    }

    /// A secret scheduled for deletion is absent here too (`NotFound`), as for `read`.
    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        let MarkArgs {
            region,
            handle,
            marker,
            ..
        } = args;
        let c = &self.clients.region(region);
        let current = tags_of(describe(c, handle).await?.tags());
        if let Some(pair) = marking(&current, marker, &format!("secret {handle}"))? {
            // TagResource adds to the secret's tags; the others stay as they are.
            c.secrets()
                .tag_resource()
                .secret_id(handle)
                .set_tags(Some(tag_list(&pair)))
                .send()
                .await
                .map_err(|e| classify("secretsmanager:TagResource", e, NO_SECRET))?;
        }
        Ok(())
    }
}
