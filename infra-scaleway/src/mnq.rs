//! Queues' control plane, the Messaging and Queuing API
//! (`/mnq/v1beta1/regions/{region}`): whether Queues' SQS API is activated for the
//! project, its activation, and the credentials every SQS call is signed with. Queues
//! does not take the API key: its SQS calls need Queues credentials, which only this
//! API makes.
//!
//! **Activation.** `GET …/sqs-info?project_id=` says whether the product is `enabled`
//! for the project, and where its SQS API answers (`sqs_endpoint_url`). A project where
//! it is not has no queue at all: reads answer that (an empty listing, a queue not
//! found) without activating anything. [`QueuesAccess::prerequisites`] answers the
//! activation as a prerequisite, for a plan to show; the first queue write carries it
//! out (`POST …/activate-sqs`), idempotently (an activation that someone else made
//! first answers 409 `already_exists`, taken as done), and logs it.
//!
//! **Credentials.** Unless the configuration gives Queues credentials of its own
//! ([`ScalewayConfig::queues_key`](crate::ScalewayConfig::queues_key), used as they are
//! in every region, with nothing activated or made), the backend makes, once per region
//! and only when a queue must be reached there (a plan's listing included, where Queues
//! is activated), credentials with the least rights a
//! fleet needs: `can_manage` alone (queues created, changed, listed, deleted; no message
//! published or received). Their secret key is a [`SecretString`] from the moment it is
//! read: it goes into the SQS client's signer and nowhere else (no record, log or error).
//!
//! They never pile up:
//! - they are deleted when the backend is dropped (the end of a run): on a
//!   multi-threaded runtime the drop waits for the deletes; elsewhere it starts them
//!   and does not wait;
//! - a drop that could not delete (the process killed, the runtime gone, Scaleway out
//!   of reach) leaves them named [`RUN_PREFIX`]`…`; the next run that makes credentials
//!   in the region deletes those made more than [`STALE_AFTER`] before its own, by
//!   Scaleway's `created_at` (no clock of this machine is read). A day is far longer
//!   than any run, so a run going on elsewhere never loses its credentials, and the
//!   pile is bounded by one day's runs.
//!
//! **Refusals.** A key without the rights to read the product's status, activate it or
//! make credentials is refused with `Denied`, naming Scaleway's permission set for them
//! ([`PERMISSION_SET`]), before any SQS call.
//!
//! Calls, each with its idempotence:
//!
//! | call | idempotence |
//! |---|---|
//! | `GET …/sqs-info` | a read |
//! | `POST …/activate-sqs` | idempotent: activating an active product changes nothing (answered `already_exists`, taken as done) |
//! | `POST …/sqs-credentials` | a create: a repeat would make a second set |
//! | `GET …/sqs-credentials` | a read |
//! | `DELETE …/sqs-credentials/{id}` | idempotent |

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use infra_core::sdk::{BackendError, ErrorKind, Idempotence, Jitter, Prerequisite, SecretString};
use serde::{Deserialize, Deserializer, Serialize};
use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::OnceCell;

use crate::api::{Api, Call};
use crate::clients::Clients;
use crate::config::{QUEUES_ACCESS_KEY_VAR, QUEUES_SECRET_KEY_VAR, QueuesKey};

/// Scaleway's IAM permission set that lets a key activate Queues and manage its
/// credentials.
pub(crate) const PERMISSION_SET: &str = "MessagingAndQueuingFullAccess";

/// The name every set of credentials this backend makes starts with.
pub(crate) const RUN_PREFIX: &str = "infra-scaleway-run-";

/// How much older than the credentials a run makes other runs' credentials must be
/// before that run deletes them.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(24 * 3600);

/// How long the deletes of a run's credentials are retried when the backend is dropped.
const CLEANUP_BUDGET: Duration = Duration::from_secs(15);

const INFO: &str = "mnq:GetSqsInfo";
const ACTIVATE: &str = "mnq:ActivateSqs";
const CREATE: &str = "mnq:CreateSqsCredentials";
const LIST: &str = "mnq:ListSqsCredentials";
const DELETE: &str = "mnq:DeleteSqsCredentials";

/// The `not_found` resource types that mean "these credentials do not exist".
const NO_CREDENTIALS: &[&str] = &["credentials"];

/// What the SQS calls of one region are signed with, and where they go.
#[derive(Clone, Debug)]
pub(crate) struct Signing {
    /// Queues' SQS endpoint in the region.
    pub(crate) endpoint: String,
    /// The credentials.
    pub(crate) key: QueuesKey,
}

/// What `GET …/sqs-info` (and `POST …/activate-sqs`) answers.
#[derive(Debug, Deserialize)]
struct SqsInfo {
    #[serde(default)]
    status: String,
    #[serde(default)]
    sqs_endpoint_url: String,
}

impl SqsInfo {
    fn enabled(&self) -> bool {
        self.status == "enabled"
    }
}

/// Credentials as Scaleway answers them; the secret key only in the answer of their
/// creation.
#[derive(Deserialize)]
struct Credentials {
    id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    access_key: String,
    #[serde(default, deserialize_with = "secret")]
    secret_key: Option<SecretString>,
    #[serde(default)]
    created_at: Option<String>,
}

/// A secret key, wrapped the moment it is read; an empty one is none.
fn secret<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SecretString>, D::Error> {
    let text: Option<String> = Option::deserialize(d)?;
    Ok(text.filter(|t| !t.is_empty()).map(SecretString::new))
}

/// The body of `POST …/sqs-credentials`.
#[derive(Serialize)]
struct NewCredentials<'a> {
    project_id: &'a str,
    name: &'a str,
    permissions: Permissions,
}

/// What credentials may do.
#[derive(Serialize)]
struct Permissions {
    can_publish: bool,
    can_receive: bool,
    can_manage: bool,
}

/// The least a fleet needs: to create, change, list and delete queues.
const MANAGE_ONLY: Permissions = Permissions {
    can_publish: false,
    can_receive: false,
    can_manage: true,
};

/// Queues' activation and credentials, for one backend.
pub(crate) struct QueuesAccess {
    clients: Arc<Clients>,
    /// Per region, what its SQS calls are signed with, once known.
    regions: Mutex<BTreeMap<String, Arc<OnceCell<Signing>>>>,
    made: RunCredentials,
}

impl std::fmt::Debug for QueuesAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuesAccess").finish_non_exhaustive()
    }
}

impl QueuesAccess {
    pub(crate) fn new(clients: Arc<Clients>) -> Self {
        // The deletes at the end of a run wait a little for Scaleway, not the whole
        // budget: what they miss, the next run's sweep deletes.
        let policy = clients.config().retry.with_budget(CLEANUP_BUDGET);
        let made = RunCredentials {
            api: clients.api().retrying(policy),
            made: Mutex::default(),
        };
        QueuesAccess {
            clients,
            regions: Mutex::default(),
            made,
        }
    }

    fn project(&self) -> &str {
        self.clients.project_id()
    }

    fn base(region: &str) -> String {
        format!("/mnq/v1beta1/regions/{region}")
    }

    fn cell(&self, region: &str) -> Arc<OnceCell<Signing>> {
        let mut all = self.regions.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(all.entry(region.to_owned()).or_default())
    }

    /// The endpoint of `region`: the configured one (stand-ins), else the one Scaleway
    /// answered, else the one it documents.
    fn endpoint(&self, region: &str, answered: &str) -> String {
        let config = self.clients.config();
        if config.sqs_endpoint.is_some() || answered.is_empty() {
            config.sqs_endpoint_of(region)
        } else {
            answered.trim_end_matches('/').to_owned()
        }
    }

    /// What the SQS calls of `region` are signed with for a read, or `None` when
    /// Queues is not activated for the project there (it then holds no queue).
    pub(crate) async fn for_reading(&self, region: &str) -> Result<Option<Signing>, BackendError> {
        let cell = self.cell(region);
        if let Some(signing) = cell.get() {
            return Ok(Some(signing.clone()));
        }
        if self.clients.config().queues_key.is_none() && !self.info(region).await?.enabled() {
            return Ok(None);
        }
        self.signing(region, &cell).await.map(Some)
    }

    /// What the SQS calls of `region` are signed with for a write: Queues activated
    /// first when it is not (see the module documentation).
    pub(crate) async fn for_writing(&self, region: &str) -> Result<Signing, BackendError> {
        let cell = self.cell(region);
        self.signing(region, &cell).await
    }

    async fn signing(
        &self,
        region: &str,
        cell: &OnceCell<Signing>,
    ) -> Result<Signing, BackendError> {
        let made = cell
            .get_or_try_init(|| async {
                if let Some(key) = &self.clients.config().queues_key {
                    return Ok(Signing {
                        endpoint: self.clients.config().sqs_endpoint_of(region),
                        key: key.clone(),
                    });
                }
                let info = self.info(region).await?;
                let answered = if info.enabled() {
                    info.sqs_endpoint_url
                } else {
                    self.activate(region).await?
                };
                let key = self.make_credentials(region).await?;
                Ok(Signing {
                    endpoint: self.endpoint(region, &answered),
                    key,
                })
            })
            .await?;
        Ok(made.clone())
    }

    /// What must be done before a queue can be written in `region`.
    pub(crate) async fn prerequisites(
        &self,
        region: &str,
    ) -> Result<Vec<Prerequisite>, BackendError> {
        if self.cell(region).get().is_some() || self.clients.config().queues_key.is_some() {
            return Ok(Vec::new());
        }
        let mut needed = Vec::new();
        if !self.info(region).await?.enabled() {
            needed.push(Prerequisite::new(format!(
                "Queues' SQS API will be activated for project {} in {region}",
                self.project()
            )));
        }
        needed.push(Prerequisite::new(format!(
            "Queues credentials (manage only: no publish, no receive) will be made in \
             {region} for this run, and deleted when it ends"
        )));
        Ok(needed)
    }

    /// `GET …/sqs-info` of the project.
    async fn info(&self, region: &str) -> Result<SqsInfo, BackendError> {
        let call = Call::get(INFO, format!("{}/sqs-info", Self::base(region)))
            .query("project_id", self.project());
        self.clients
            .api()
            .call(call)
            .await
            .map_err(|e| self.refused(e, region, "read whether Queues is activated"))
    }

    /// `POST …/activate-sqs`, idempotently; the SQS endpoint answered.
    async fn activate(&self, region: &str) -> Result<String, BackendError> {
        tracing::info!(
            "activating Queues' SQS API for project {} in {region}",
            self.project()
        );
        // Activating what is active changes nothing: Scaleway answers `already_exists`,
        // and a repeat after a lost answer is harmless.
        let call = Call::action(
            ACTIVATE,
            format!("{}/activate-sqs", Self::base(region)),
            Idempotence::Idempotent,
        );
        let body = serde_json::json!({ "project_id": self.project() });
        match self.clients.api().send::<SqsInfo>(call, Some(&body)).await {
            Ok(info) => Ok(info.sqs_endpoint_url),
            Err(e) if e.kind == ErrorKind::Conflict => {
                Ok(self.info(region).await?.sqs_endpoint_url)
            }
            Err(e) => Err(self.refused(e, region, "activate Queues")),
        }
    }

    /// Makes this run's credentials in `region` (manage only), then deletes the stale
    /// ones of earlier runs.
    async fn make_credentials(&self, region: &str) -> Result<QueuesKey, BackendError> {
        let name = format!(
            "{RUN_PREFIX}{:08x}",
            (Jitter::new().draw() * f64::from(u32::MAX)) as u32
        );
        let body = NewCredentials {
            project_id: self.project(),
            name: &name,
            permissions: MANAGE_ONLY,
        };
        let call = Call::create(CREATE, format!("{}/sqs-credentials", Self::base(region)));
        let made: Credentials = self
            .clients
            .api()
            .send(call, Some(&body))
            .await
            .map_err(|e| self.refused(e, region, "make Queues credentials"))?;
        self.made.note(region, &made.id);
        let Some(secret) = made.secret_key else {
            return Err(BackendError::new(
                ErrorKind::Other,
                format!(
                    "{CREATE}: Scaleway answered the credentials {} without their secret key",
                    made.id
                ),
            ));
        };
        if let Some(made_at) = made.created_at.as_deref().and_then(epoch_seconds) {
            self.sweep(region, &made.id, made_at).await;
        }
        Ok(QueuesKey::new(made.access_key, secret))
    }

    /// Deletes the credentials of earlier runs in `region` made more than
    /// [`STALE_AFTER`] before `now` (Scaleway's time of this run's own, `own`). A
    /// failure is logged, never fatal: the next run tries again.
    async fn sweep(&self, region: &str, own: &str, now: i64) {
        let call = Call::get(LIST, format!("{}/sqs-credentials", Self::base(region)))
            .query("project_id", self.project());
        let all: Vec<Credentials> = match self.clients.api().list_all(call, "sqs_credentials").await
        {
            Ok(all) => all,
            Err(e) => {
                tracing::warn!("{LIST}: earlier runs' Queues credentials not looked for: {e}");
                return;
            }
        };
        let stale = STALE_AFTER.as_secs() as i64;
        for old in all.iter().filter(|c| {
            c.id != own
                && c.name.starts_with(RUN_PREFIX)
                && c.created_at
                    .as_deref()
                    .and_then(epoch_seconds)
                    .is_some_and(|at| now - at > stale)
        }) {
            if let Err(e) = delete(self.clients.api(), region, &old.id).await {
                tracing::warn!("{DELETE}: stale Queues credentials {} left: {e}", old.id);
            }
        }
    }

    /// `e`, said as the refusal it is when the key was denied `doing`.
    fn refused(&self, e: BackendError, region: &str, doing: &str) -> BackendError {
        if e.kind != ErrorKind::Denied {
            return e;
        }
        let code = e.code.clone();
        let refusal = BackendError::new(
            ErrorKind::Denied,
            format!(
                "Queues in {region}: the API key may not {doing} for project {} ({}); it needs \
                 the IAM permission set {PERMISSION_SET} on the project, or give Queues \
                 credentials of your own ({QUEUES_ACCESS_KEY_VAR}, {QUEUES_SECRET_KEY_VAR}); no \
                 queue was called",
                self.project(),
                e.message
            ),
        );
        match code {
            Some(code) => refusal.with_code(code),
            None => refusal,
        }
    }
}

/// `DELETE …/sqs-credentials/{id}`; credentials already gone are deleted.
async fn delete(api: &Api, region: &str, id: &str) -> Result<(), BackendError> {
    let path = format!("{}/sqs-credentials/{id}", QueuesAccess::base(region));
    match api
        .act(
            Call::delete(DELETE, path).not_found(NO_CREDENTIALS),
            None::<&()>,
        )
        .await
    {
        Err(e) if e.kind != ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The credentials a backend made, deleted when it is dropped.
struct RunCredentials {
    api: Api,
    made: Mutex<Vec<(String, String)>>,
}

impl RunCredentials {
    fn note(&self, region: &str, id: &str) {
        self.made
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((region.to_owned(), id.to_owned()));
    }
}

impl Drop for RunCredentials {
    fn drop(&mut self) {
        let made = std::mem::take(&mut *self.made.lock().unwrap_or_else(PoisonError::into_inner));
        if made.is_empty() {
            return;
        }
        let api = self.api.clone();
        let work = async move {
            for (region, id) in &made {
                if let Err(e) = delete(&api, region, id).await {
                    tracing::warn!(
                        "{DELETE}: this run's Queues credentials {id} in {region} are left \
                         (the next run deletes them after a day): {e}"
                    );
                }
            }
        };
        match Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| handle.block_on(work));
            }
            Ok(handle) => drop(handle.spawn(work)),
            Err(_) => tracing::warn!(
                "this run's Queues credentials are left (no runtime to delete them on); the \
                 next run deletes them after a day"
            ),
        }
    }
}

/// The seconds since 1970 of an RFC 3339 timestamp (`2026-04-10T11:02:44.784472Z`,
/// `…+02:00`), or `None`.
pub(crate) fn epoch_seconds(stamp: &str) -> Option<i64> {
    let (date, time) = stamp.split_once(['T', 't', ' '])?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    if d.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let split = time.find(['Z', 'z', '+', '-'])?;
    let (clock, zone) = time.split_at(split);
    let mut c = clock.split(':');
    let (h, min) = (
        c.next()?.parse::<i64>().ok()?,
        c.next()?.parse::<i64>().ok()?,
    );
    let sec = c.next()?.split('.').next()?.parse::<i64>().ok()?;
    let offset = match zone {
        "Z" | "z" => 0,
        _ => {
            let sign = if zone.starts_with('-') { -1 } else { 1 };
            let (oh, om) = zone[1..].split_once(':')?;
            sign * (oh.parse::<i64>().ok()? * 3600 + om.parse::<i64>().ok()? * 60)
        }
    };
    // Days from 1970-01-01 to the date (Howard Hinnant's days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + min * 60 + sec - offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_read_as_seconds_whatever_their_zone() {
        assert_eq!(epoch_seconds("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            epoch_seconds("2026-04-10T11:02:44.784472612Z"),
            Some(1_775_818_964)
        );
        assert_eq!(
            epoch_seconds("2026-04-10T13:02:44+02:00"),
            epoch_seconds("2026-04-10T11:02:44Z")
        );
        assert_eq!(epoch_seconds("2000-03-01T00:00:00Z"), Some(951_868_800));
        for bad in [
            "",
            "2026-04-10",
            "2026-13-01T00:00:00Z",
            "yesterday",
            "2026-04-10T11:02Z",
        ] {
            assert_eq!(epoch_seconds(bad), None, "{bad}");
        }
    }

    #[test]
    fn credentials_are_asked_for_managing_alone_and_their_secret_is_wrapped() {
        let body = serde_json::to_value(NewCredentials {
            project_id: "p",
            name: "n",
            permissions: MANAGE_ONLY,
        })
        .unwrap();
        assert_eq!(
            body["permissions"],
            serde_json::json!({"can_publish": false, "can_receive": false, "can_manage": true})
        );
        let answered: Credentials = serde_json::from_str(
            r#"{"id":"i","name":"n","access_key":"AK","secret_key":"very-secret","created_at":"2026-04-10T11:02:44Z"}"#,
        )
        .unwrap();
        assert_eq!(
            answered.secret_key.as_ref().map(SecretString::expose),
            Some("very-secret")
        );
        let listed: Credentials =
            serde_json::from_str(r#"{"id":"i","access_key":"AK","secret_key":""}"#).unwrap();
        assert!(listed.secret_key.is_none());
    }
}
