//! The official clients, one per service, made on first use and shared by the kinds.
//!
//! Every client is built with the configuration's credentials and endpoint, and with
//! retries switched off: the engine retries throttled and unavailable calls itself,
//! on its own clock, and only where a call may safely be repeated.

use std::sync::Arc;

use google_cloud_gax::retry_policy::NeverRetry;
use infra_core::sdk::{BackendError, Clock, ErrorKind};
use tokio::sync::OnceCell;

use crate::config::{GcpConfig, Polling, Service};

/// A client that could not be built, as a [`BackendError`]: nothing was sent.
fn unbuilt(service: &str, err: &google_cloud_gax::client_builder::Error) -> BackendError {
    BackendError::new(
        ErrorKind::Unavailable,
        format!("the {service} client could not be built: {err}"),
    )
}

/// Defines a lazily built client accessor.
macro_rules! client {
    ($(#[$doc:meta])* $cfg:meta, $name:ident: $ty:ty = $service:expr) => {
        $(#[$doc])*
        #[$cfg]
        pub(crate) async fn $name(&self) -> Result<&$ty, BackendError> {
            self.$name
                .get_or_try_init(|| async {
                    let builder = <$ty>::builder()
                        .with_credentials(self.config.credentials.clone())
                        .with_retry_policy(NeverRetry);
                    let builder = match self.config.endpoint_override($service) {
                        Some(endpoint) => builder.with_endpoint(endpoint),
                        None => builder,
                    };
                    builder
                        .build()
                        .await
                        .map_err(|e| unbuilt(stringify!($name), &e))
                })
                .await
        }
    };
}

/// The clients of one configuration.
pub(crate) struct Clients {
    config: GcpConfig,
    #[cfg(feature = "storage")]
    http: reqwest::Client,
    #[cfg(feature = "pubsub")]
    topics: OnceCell<google_cloud_pubsub::client::TopicAdmin>,
    #[cfg(feature = "pubsub")]
    subscriptions: OnceCell<google_cloud_pubsub::client::SubscriptionAdmin>,
    #[cfg(feature = "secretmanager")]
    secret_manager: OnceCell<google_cloud_secretmanager_v1::client::SecretManagerService>,
    #[cfg(feature = "artifactregistry")]
    artifact_registry: OnceCell<google_cloud_artifactregistry_v1::client::ArtifactRegistry>,
    #[cfg(feature = "run")]
    run_services: OnceCell<google_cloud_run_v2::client::Services>,
    #[cfg(feature = "sql")]
    sql_instances: OnceCell<google_cloud_sql_v1::client::SqlInstancesService>,
    #[cfg(feature = "sql")]
    sql_operations: OnceCell<google_cloud_sql_v1::client::SqlOperationsService>,
    #[cfg(feature = "sql")]
    sql_users: OnceCell<google_cloud_sql_v1::client::SqlUsersService>,
    #[cfg(feature = "iam")]
    iam: OnceCell<google_cloud_iam_admin_v1::client::Iam>,
    projects: OnceCell<google_cloud_resourcemanager_v3::client::Projects>,
}

impl Clients {
    /// Clients for `config`; none is built until first used.
    pub(crate) fn new(config: GcpConfig) -> Arc<Self> {
        Arc::new(Clients {
            config,
            #[cfg(feature = "storage")]
            http: reqwest::Client::builder()
                .user_agent(concat!("infra-gcp/", env!("CARGO_PKG_VERSION")))
                .build()
                .unwrap_or_default(),
            #[cfg(feature = "pubsub")]
            topics: OnceCell::new(),
            #[cfg(feature = "pubsub")]
            subscriptions: OnceCell::new(),
            #[cfg(feature = "secretmanager")]
            secret_manager: OnceCell::new(),
            #[cfg(feature = "artifactregistry")]
            artifact_registry: OnceCell::new(),
            #[cfg(feature = "run")]
            run_services: OnceCell::new(),
            #[cfg(feature = "sql")]
            sql_instances: OnceCell::new(),
            #[cfg(feature = "sql")]
            sql_operations: OnceCell::new(),
            #[cfg(feature = "sql")]
            sql_users: OnceCell::new(),
            #[cfg(feature = "iam")]
            iam: OnceCell::new(),
            projects: OnceCell::new(),
        })
    }

    /// The project every resource lives in.
    pub(crate) fn project(&self) -> &str {
        &self.config.project
    }

    /// The clock operations are awaited on.
    pub(crate) fn clock(&self) -> &dyn Clock {
        self.config.clock.as_ref()
    }

    /// How operations are awaited.
    pub(crate) fn polling(&self) -> Polling {
        self.config.polling
    }

    /// Where `service` is reached.
    #[cfg_attr(not(feature = "storage"), allow(dead_code))]
    pub(crate) fn endpoint(&self, service: Service) -> &str {
        self.config.endpoint_of(service)
    }

    /// A plain HTTP client and the headers that authenticate a call (none with
    /// anonymous credentials): for the Cloud Storage JSON API.
    #[cfg(feature = "storage")]
    pub(crate) async fn http(&self) -> Result<(&reqwest::Client, http::HeaderMap), BackendError> {
        use google_cloud_auth::credentials::CacheableResource;
        let headers = self
            .config
            .credentials
            .headers(http::Extensions::new())
            .await
            .map_err(|e| {
                BackendError::new(
                    if e.is_transient() {
                        ErrorKind::Unavailable
                    } else {
                        ErrorKind::Denied
                    },
                    format!("no credentials could be had for Cloud Storage: {e}"),
                )
                .with_code("UNAUTHENTICATED")
            })?;
        let headers = match headers {
            CacheableResource::New { data, .. } => data,
            CacheableResource::NotModified => http::HeaderMap::new(),
        };
        Ok((&self.http, headers))
    }

    client!(
        /// Pub/Sub topics.
        cfg(feature = "pubsub"), topics: google_cloud_pubsub::client::TopicAdmin = Service::PubSub
    );
    client!(
        /// Pub/Sub subscriptions.
        cfg(feature = "pubsub"), subscriptions: google_cloud_pubsub::client::SubscriptionAdmin = Service::PubSub
    );
    client!(
        /// Secret Manager.
        cfg(feature = "secretmanager"), secret_manager: google_cloud_secretmanager_v1::client::SecretManagerService = Service::SecretManager
    );
    client!(
        /// Artifact Registry.
        cfg(feature = "artifactregistry"), artifact_registry: google_cloud_artifactregistry_v1::client::ArtifactRegistry = Service::ArtifactRegistry
    );
    client!(
        /// Cloud Run services.
        cfg(feature = "run"), run_services: google_cloud_run_v2::client::Services = Service::Run
    );
    client!(
        /// Cloud SQL instances.
        cfg(feature = "sql"), sql_instances: google_cloud_sql_v1::client::SqlInstancesService = Service::Sql
    );
    client!(
        /// Cloud SQL operations.
        cfg(feature = "sql"), sql_operations: google_cloud_sql_v1::client::SqlOperationsService = Service::Sql
    );
    client!(
        /// Cloud SQL users.
        cfg(feature = "sql"), sql_users: google_cloud_sql_v1::client::SqlUsersService = Service::Sql
    );
    client!(
        /// IAM service accounts.
        cfg(feature = "iam"), iam: google_cloud_iam_admin_v1::client::Iam = Service::Iam
    );
    client!(
        /// Resource Manager projects (the project check; the project's IAM policy).
        cfg(all()), projects: google_cloud_resourcemanager_v3::client::Projects = Service::ResourceManager
    );
}
