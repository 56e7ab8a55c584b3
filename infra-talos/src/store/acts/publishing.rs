//! Publishing releases and reading sealed artifacts (§4.1, §8 invariant 7): the
//! store takes an artifact only as ciphertext with its key coordinates and
//! configuration digest, selects the release as each machine's Desired, and gives
//! back no more than it took.

use crate::contract::Role;
use crate::keys::{KeyBinding, SealedArtifact as BoundArtifact};
use crate::store::common::*;
use crate::store::engine::SqlStore;
use crate::store::lookups::{lock_machine, read_plan, require_role};
use crate::store::sql::{Tx, query};
use crate::store::transaction::{Entry, R, append};
use crate::store::{
    Actor, ContributionKind, ReleaseSpec, SealedReleaseSpec, StoreError, StoreResult,
};

impl SqlStore {
    /// [`Store::publish_release`](crate::store::Store::publish_release): publish a release:
    /// store its sealed artifacts and select it as each machine's Desired.
    pub(in crate::store) async fn publish_release(
        &self,
        actor: &Actor,
        spec: ReleaseSpec,
    ) -> StoreResult<()> {
        let artifacts = spec
            .artifacts
            .iter()
            .map(|(m, a)| {
                (
                    m.as_str(),
                    ArtifactInsert {
                        key_provider: &a.key_provider,
                        key_id: &a.key_id,
                        key_name: None,
                        key_identity: None,
                        key_version: i(a.key_version),
                        ciphertext: &a.ciphertext,
                        digest: a.digest,
                    },
                )
            })
            .collect();
        self.publish(actor, &spec.id, &spec.contributions, artifacts)
            .await
    }

    /// [`Store::publish_sealed_release`](crate::store::Store::publish_sealed_release): publish
    /// a release whose artifacts carry their full key binding; otherwise as
    /// `Store::publish_release`.
    pub(in crate::store) async fn publish_sealed_release(
        &self,
        actor: &Actor,
        spec: SealedReleaseSpec,
    ) -> StoreResult<()> {
        let artifacts = spec
            .artifacts
            .iter()
            .map(|(m, a)| {
                (
                    m.as_str(),
                    ArtifactInsert {
                        key_provider: &a.binding.provider,
                        key_id: &a.binding.key_identity,
                        key_name: Some(&a.binding.key_name),
                        key_identity: Some(&a.binding.key_identity),
                        key_version: i64::from(a.binding.version),
                        ciphertext: &a.ciphertext,
                        digest: a.digest,
                    },
                )
            })
            .collect();
        self.publish(actor, &spec.id, &spec.contributions, artifacts)
            .await
    }

    /// Publishing, for both forms of artifact: the release with its contributions,
    /// then each machine's artifact, selected as the machine's Desired.
    async fn publish(
        &self,
        actor: &Actor,
        release: &str,
        contributions: &[(String, ContributionKind)],
        mut artifacts: Vec<(&str, ArtifactInsert<'_>)>,
    ) -> StoreResult<()> {
        artifacts.sort_by(|a, b| a.0.cmp(b.0));
        let artifacts = &artifacts;
        self.transaction(|tx| {
            Box::pin(async move {
                // Machine rows first, in a fixed order, then the principal: the order
                // every transaction here takes them in.
                for (machine, _) in artifacts {
                    lock_machine(tx, machine).await?;
                }
                require_role(tx, actor, &[Role::Publisher], "publishing").await?;
                let now = self.store_time(tx).await?;
                insert_release(tx, actor, release, contributions, now).await?;
                for (machine, a) in artifacts {
                    insert_artifact(tx, release, machine, a).await?;
                    query("UPDATE machines SET desired_release = $2 WHERE id = $1")
                        .bind(*machine)
                        .bind(release)
                        .execute(tx)
                        .await?;
                    let detail = format!(
                        "release {} selected; artifact digest {}, key {}/{} v{}",
                        release,
                        a.digest,
                        a.key_provider,
                        a.key_name.unwrap_or(a.key_id),
                        a.key_version
                    );
                    let entry = Entry::by(actor, "desired_changed").detail(detail);
                    append(tx, machine, now, entry).await?;
                }
                Ok(())
            })
        })
        .await
    }
}

/// The release's row and who contributed to it; a release that exists is refused.
async fn insert_release(
    tx: &mut Tx,
    actor: &Actor,
    release: &str,
    contributions: &[(String, ContributionKind)],
    now: i64,
) -> R<()> {
    let exists = query("SELECT id FROM releases WHERE id = $1")
        .bind(release)
        .fetch_optional(tx)
        .await?;
    if exists.is_some() {
        return Err(StoreError::Exists {
            what: "release",
            id: release.to_owned(),
        }
        .into());
    }
    query("INSERT INTO releases (id, published_by, published_at) VALUES ($1, $2, $3)")
        .bind(release)
        .bind(&actor.id)
        .bind(now)
        .execute(tx)
        .await?;
    for (principal, kind) in contributions {
        query(
            "INSERT INTO release_contributions (release_id, principal_id, contribution) \
             VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        )
        .bind(release)
        .bind(principal)
        .bind(match kind {
            ContributionKind::Authored => "authored",
            ContributionKind::Published => "published",
        })
        .execute(tx)
        .await?;
    }
    Ok(())
}

/// The artifact row of `release` for `machine`: with the key's name and identity
/// when the publisher gave the full binding, otherwise without those columns.
async fn insert_artifact(
    tx: &mut Tx,
    release: &str,
    machine: &str,
    a: &ArtifactInsert<'_>,
) -> R<()> {
    match (a.key_name, a.key_identity) {
        (Some(name), Some(identity)) => {
            query(
                "INSERT INTO artifacts (release_id, machine_id, key_provider, key_id, \
                 key_version, ciphertext, digest, key_name, key_identity) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            )
            .bind(release)
            .bind(machine)
            .bind(a.key_provider)
            .bind(a.key_id)
            .bind(a.key_version)
            .bind(a.ciphertext)
            .bind(a.digest.to_hex())
            .bind(name)
            .bind(identity)
            .execute(tx)
            .await?;
        }
        _ => {
            query(
                "INSERT INTO artifacts (release_id, machine_id, key_provider, key_id, \
                 key_version, ciphertext, digest) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(release)
            .bind(machine)
            .bind(a.key_provider)
            .bind(a.key_id)
            .bind(a.key_version)
            .bind(a.ciphertext)
            .bind(a.digest.to_hex())
            .execute(tx)
            .await?;
        }
    }
    Ok(())
}

/// An artifact row to insert: the binding's name and identity are `None` when the
/// publisher gave only the key's identifier.
struct ArtifactInsert<'a> {
    key_provider: &'a str,
    key_id: &'a str,
    key_name: Option<&'a str>,
    key_identity: Option<&'a str>,
    key_version: i64,
    ciphertext: &'a [u8],
    digest: crate::digest::Digest,
}

impl SqlStore {
    /// [`Store::sealed_artifact`](crate::store::Store::sealed_artifact): the sealed artifact a
    /// plan binds: ciphertext, key binding and digest, never plaintext.
    pub(in crate::store) async fn sealed_artifact(
        &self,
        plan_id: &str,
    ) -> StoreResult<BoundArtifact> {
        const ACT: &str = "reading a sealed artifact";
        self.transaction(|tx| {
            Box::pin(async move {
                let plan = read_plan(tx, plan_id).await?;
                let artifact = stored_sealed(tx, &plan.release_id, &plan.machine_id, ACT)
                    .await?
                    .ok_or_else(|| {
                        let id = format!("{}/{}", plan.release_id, plan.machine_id);
                        not_found("artifact", &id)
                    })?;
                let version = i64::from(artifact.binding.version);
                if artifact.digest.to_hex() != plan.artifact_digest || version != plan.key_version {
                    return Err(
                        refused(ACT, "the stored artifact differs from the bound one").into(),
                    );
                }
                Ok(artifact)
            })
        })
        .await
    }

    /// [`Store::keyed_artifact`](crate::store::Store::keyed_artifact): a release's
    /// sealed artifact for one machine with its key binding, if it has one.
    pub(in crate::store) async fn keyed_artifact(
        &self,
        release: &str,
        machine: &str,
    ) -> StoreResult<Option<BoundArtifact>> {
        self.transaction(|tx| {
            Box::pin(async move {
                stored_sealed(tx, release, machine, "reading a release's artifact").await
            })
        })
        .await
    }
}

/// The sealed artifact `release` holds for `machine`, with its key binding; refused
/// (`act`) for one published without its key name.
async fn stored_sealed(
    tx: &mut Tx,
    release: &str,
    machine: &str,
    act: &'static str,
) -> R<Option<BoundArtifact>> {
    let Some(row) = query(
        "SELECT key_provider, key_name, COALESCE(key_identity, key_id) \
         AS key_identity, key_version, ciphertext, digest FROM \
         artifacts WHERE release_id = $1 AND machine_id = $2",
    )
    .bind(release)
    .bind(machine)
    .fetch_optional(tx)
    .await?
    else {
        return Ok(None);
    };
    let digest: String = row.try_get("digest")?;
    let version: i64 = row.try_get("key_version")?;
    let key_name: Option<String> = row.try_get("key_name")?;
    let key_name =
        key_name.ok_or_else(|| refused(act, "the artifact was published without its key name"))?;
    Ok(Some(BoundArtifact {
        binding: KeyBinding {
            provider: row.try_get("key_provider")?,
            key_name,
            key_identity: row.try_get("key_identity")?,
            version: u32::try_from(version)
                .map_err(|_| db_err("a stored key version exceeds 32 bits"))?,
        },
        ciphertext: row.try_get("ciphertext")?,
        digest: digest_of(&digest)?,
    }))
}
