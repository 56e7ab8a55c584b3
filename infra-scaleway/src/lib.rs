#![doc = include_str!("../README.md")]
// A build with some products left out leaves helpers only those products use unused.
#![cfg_attr(
    not(all(
        feature = "s3",
        feature = "sqs",
        feature = "secrets",
        feature = "registry",
        feature = "rdb",
        feature = "iam",
        feature = "functions",
        feature = "containers"
    )),
    allow(dead_code)
)]

mod api;
#[cfg(any(feature = "s3", feature = "sqs"))]
mod aws_error;
#[cfg(any(feature = "s3", feature = "sqs"))]
mod aws_sdk;
mod clients;
mod config;
mod error;
#[cfg(feature = "sqs")]
mod mnq;
mod project;
#[cfg(test)]
mod recorded;
#[cfg(feature = "secrets")]
mod secret_value;
#[cfg(any(feature = "functions", feature = "containers"))]
mod serverless;
mod tags;

#[cfg(all(
    test,
    feature = "sqs",
    feature = "rdb",
    feature = "iam",
    feature = "registry",
    feature = "functions",
    feature = "containers"
))]
mod every_call;

#[cfg(feature = "containers")]
mod containers;
#[cfg(feature = "functions")]
mod functions;
#[cfg(feature = "iam")]
mod iam;
#[cfg(feature = "s3")]
mod object_storage;
#[cfg(feature = "sqs")]
mod queues;
#[cfg(feature = "rdb")]
mod rdb;
#[cfg(feature = "registry")]
mod registry;
#[cfg(feature = "secrets")]
mod secrets;

use std::sync::{Arc, Once};

use infra_core::sdk::{Backend, Router, Unreachable};

pub use config::{DEFAULT_API_URL, QueuesKey, ScalewayConfig};
pub use infra_core::sdk::Polling;

use clients::Clients;
use project::ProjectAccount;

/// The Scaleway provider's constructors. The backend itself is an
/// [`infra_core::sdk::Router`] holding one typed implementation per kind this build's
/// features enable, the project check (`GET /account/v3/projects/{id}`) and, with the
/// `secrets` feature, the reader of secret values. `ScalewayBackend` is never a value:
/// it only names the two ways to build that router.
#[derive(Debug)]
pub enum ScalewayBackend {}

impl ScalewayBackend {
    /// A backend on a configuration built by hand ([`ScalewayConfig::stand_in`] for
    /// stand-ins on loopback). The region of each call is the resource's own.
    #[allow(
        clippy::new_ret_no_self,
        reason = "`ScalewayBackend` names the constructors; the backend is the router"
    )]
    pub fn new(config: ScalewayConfig) -> Router {
        install_crypto();
        router(&Clients::new(config))
    }

    /// A backend from the sources Scaleway's own tools read ([`ScalewayConfig::from_env`]:
    /// `SCW_ACCESS_KEY`, `SCW_SECRET_KEY`, `SCW_DEFAULT_PROJECT_ID`,
    /// `SCW_DEFAULT_ORGANIZATION_ID`, `SCW_API_URL`, `SCW_PROFILE`, the CLI's
    /// configuration file). When no key or no project can be found, the backend returned
    /// is [`Unreachable`] and says why, so that the engine refuses to act on Scaleway
    /// rather than read its silence as agreement.
    pub async fn from_env() -> Arc<dyn Backend> {
        match ScalewayConfig::from_env() {
            Ok(config) => Arc::new(ScalewayBackend::new(config)),
            Err(why) => Arc::new(Unreachable::new("scaleway", why)),
        }
    }
}

/// The router of every kind this build's features enable, on `clients`.
fn router(clients: &Arc<Clients>) -> Router {
    #[allow(unused_mut)] // with no product feature on, nothing is added
    let mut router = Router::new("scaleway", ProjectAccount::new(Arc::clone(clients)));
    #[cfg(feature = "s3")]
    {
        router = object_storage::register(router, clients);
    }
    #[cfg(feature = "sqs")]
    {
        router = queues::register(router, clients);
    }
    #[cfg(feature = "secrets")]
    {
        router = secrets::register(router, clients);
    }
    #[cfg(feature = "registry")]
    {
        router = registry::register(router, clients);
    }
    #[cfg(feature = "rdb")]
    {
        router = rdb::register(router, clients);
    }
    #[cfg(feature = "iam")]
    {
        router = iam::register(router, clients);
    }
    #[cfg(feature = "functions")]
    {
        router = functions::register(router, clients);
    }
    #[cfg(feature = "containers")]
    {
        router = containers::register(router, clients);
    }
    router
}

/// Installs `ring` as the process's TLS provider, once; a provider installed before
/// (by the application) is kept.
fn install_crypto() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
