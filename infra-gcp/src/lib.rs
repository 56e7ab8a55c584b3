#![doc = include_str!("../README.md")]
// A build with some services left out leaves helpers only those services use unused.
#![cfg_attr(
    not(all(
        feature = "storage",
        feature = "pubsub",
        feature = "secretmanager",
        feature = "artifactregistry",
        feature = "run",
        feature = "sql",
        feature = "iam"
    )),
    allow(dead_code)
)]

mod clients;
mod config;
mod credentials;
mod error;
mod labels;
#[cfg(any(feature = "iam", feature = "run", feature = "pubsub"))]
mod policy;
mod poll;
mod project;
mod retry;
#[cfg(feature = "secretmanager")]
mod secret_value;

#[cfg(feature = "artifactregistry")]
mod artifacts;
#[cfg(feature = "iam")]
mod iam;
#[cfg(feature = "pubsub")]
mod pubsub;
#[cfg(feature = "run")]
mod run;
#[cfg(feature = "secretmanager")]
mod secrets;
#[cfg(feature = "sql")]
mod sql;
#[cfg(feature = "storage")]
mod storage;

use std::sync::{Arc, Once};

use infra_core::sdk::{Backend, Router, Unreachable};

pub use config::{GcpConfig, Polling, Service};

use clients::Clients;
use project::ProjectAccount;

/// The Google Cloud provider's constructors. The backend itself is an
/// [`infra_core::sdk::Router`] holding one typed implementation per kind this build's
/// features enable, the project check (Resource Manager `projects.get`) and, with the
/// `secretmanager` feature, the reader of secret values (`AccessSecretVersion`).
/// `GcpBackend` is never a value: it only names the two ways to build that router.
#[derive(Debug)]
pub enum GcpBackend {}

impl GcpBackend {
    /// A backend on a configuration built by hand (a project, credentials, endpoints;
    /// [`GcpConfig::stand_in`] for stand-ins on loopback). The region of each call is
    /// the resource's own.
    #[allow(
        clippy::new_ret_no_self,
        reason = "`GcpBackend` names the constructors; the backend is the router"
    )]
    pub fn new(config: GcpConfig) -> Router {
        install_crypto();
        let clients = Clients::new(config);
        #[allow(unused_mut)] // with no service feature on, nothing is added
        let mut router = Router::new("gcp", ProjectAccount::new(Arc::clone(&clients)));
        #[cfg(feature = "storage")]
        router.add::<infra_core::kinds::ObjectStore>(storage::Buckets::new(Arc::clone(&clients)));
        #[cfg(feature = "pubsub")]
        router.add::<infra_core::kinds::Queues>(pubsub::Topics::new(Arc::clone(&clients)));
        #[cfg(feature = "secretmanager")]
        {
            router.add::<infra_core::kinds::Secrets>(secrets::SecretManagerSecrets::new(
                Arc::clone(&clients),
            ));
            router = router.secrets(secrets::SecretManagerSecrets::new(Arc::clone(&clients)));
        }
        #[cfg(feature = "artifactregistry")]
        router.add::<infra_core::kinds::ImageRegistry>(artifacts::DockerRepositories::new(
            Arc::clone(&clients),
        ));
        #[cfg(feature = "run")]
        router.add::<infra_core::kinds::Compute>(run::RunServices::new(Arc::clone(&clients)));
        #[cfg(feature = "sql")]
        router.add::<infra_core::kinds::Postgres>(sql::SqlInstances::new(Arc::clone(&clients)));
        #[cfg(feature = "iam")]
        router.add::<infra_core::kinds::Iam>(iam::ServiceAccounts::new(Arc::clone(&clients)));
        router
    }

    /// A backend from the sources `gcloud` and Terraform's google provider read, in
    /// the order the crate's documentation tables: the project from
    /// `GOOGLE_CLOUD_PROJECT`, `GOOGLE_PROJECT`, `GCLOUD_PROJECT`,
    /// `CLOUDSDK_CORE_PROJECT`, gcloud's active configuration or the metadata server;
    /// the credentials from `GOOGLE_OAUTH_ACCESS_TOKEN`, `GOOGLE_CREDENTIALS`,
    /// `GOOGLE_APPLICATION_CREDENTIALS`, gcloud's application default credentials or
    /// the metadata server; endpoints from `INFRA_GCP_ENDPOINT` (every service),
    /// `PUBSUB_EMULATOR_HOST` and `STORAGE_EMULATOR_HOST`; the retry policy from
    /// `INFRA_RETRY_BUDGET` and `INFRA_REQUEST_TIMEOUT`. When every service is sent to a
    /// stand-in on loopback and no credentials are configured, the credentials are
    /// anonymous. When no project or no usable credentials can be found, the backend
    /// returned is [`Unreachable`] and says why (never quoting a key), so that the
    /// engine refuses to act on Google Cloud rather than read its silence as agreement.
    pub async fn from_env() -> Arc<dyn Backend> {
        match config::from_env().await {
            Ok(config) => Arc::new(GcpBackend::new(config)),
            Err(why) => Arc::new(Unreachable::new("gcp", why)),
        }
    }
}

/// Installs `ring` as the process's TLS provider, once; a provider installed before
/// (by the application) is kept.
pub(crate) fn install_crypto() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
