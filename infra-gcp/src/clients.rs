//! The official clients, one per service, made on first use and shared by the kinds.
//!
//! Every client is built here, in one place, with the configuration's credentials and
//! endpoint, and with the configuration's [`RetryPolicy`] through gax's own hooks
//! ([`GaxRetry`]: retry policy, backoff policy, throttler), its request timeout as each
//! attempt's timeout, and the polling policies of long-running operations
//! ([`OperationPolling`]). The hand-written Cloud Storage calls get the same policy
//! through [`Retrier`] and the same timeout on their HTTP client. Nothing retries on
//! top: the engine retries no call.

use std::sync::Arc;

use infra_core::sdk::{BackendError, Clock, ErrorKind, Retrier, RetryPolicy};
use tokio::sync::OnceCell;

use crate::config::{GcpConfig, Polling, Service};
use crate::retry::{GaxRetry, OperationPolling};

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
                    let retry = GaxRetry::new(self.config.retry);
                    let polling = OperationPolling::new(self.config.polling);
                    let builder = <$ty>::builder()
                        .with_credentials(self.config.credentials.clone())
                        .with_retry_policy(retry.clone())
                        .with_backoff_policy(retry.clone())
                        .with_retry_throttler(retry)
                        .with_attempt_timeout(self.config.retry.request_timeout())
                        .with_polling_error_policy(polling.clone())
                        .with_polling_backoff_policy(polling);
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
    /// The retry loop of the calls made without an official client (Cloud Storage).
    retrier: Retrier,
    #[cfg(feature = "storage")]
    http: reqwest::Client,
    #[cfg(feature = "pubsub")]
    topics: OnceCell<google_cloud_pubsub::client::TopicAdmin>,
    #[cfg(feature = "pubsub")]
    subscriptions: OnceCell<google_cloud_pubsub::client::SubscriptionAdmin>,
    #[cfg(feature = "pubsub")]
    pubsub_policies: OnceCell<google_cloud_pubsub::client::SchemaService>,
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
    project_number: OnceCell<String>,
}

impl Clients {
    /// Clients for `config`; none is built until first used.
    pub(crate) fn new(config: GcpConfig) -> Arc<Self> {
        let retrier = Retrier::new(config.retry, Arc::clone(&config.clock));
        Arc::new(Clients {
            #[cfg(feature = "storage")]
            http: reqwest::Client::builder()
                .user_agent(concat!("infra-gcp/", env!("CARGO_PKG_VERSION")))
                .timeout(config.retry.request_timeout())
                .build()
                .unwrap_or_default(),
            config,
            retrier,
            #[cfg(feature = "pubsub")]
            topics: OnceCell::new(),
            #[cfg(feature = "pubsub")]
            subscriptions: OnceCell::new(),
            #[cfg(feature = "pubsub")]
            pubsub_policies: OnceCell::new(),
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
            project_number: OnceCell::new(),
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

    /// `request` (a call that starts a long-running operation), with the polling
    /// policies of an operation started now: its deadline counts from now, on the clock
    /// the poller sleeps on.
    #[cfg(any(feature = "artifactregistry", feature = "run"))]
    pub(crate) fn polled<R>(&self, request: R) -> R
    where
        R: google_cloud_gax::options::RequestOptionsBuilder,
    {
        let polling = OperationPolling::starting_now(self.config.polling);
        request
            .with_polling_error_policy(polling.clone())
            .with_polling_backoff_policy(polling)
    }

    /// The retry policy every call is retried by.
    pub(crate) fn retry_policy(&self) -> RetryPolicy {
        self.config.retry
    }

    /// The policy's loop, for the calls made without an official client.
    pub(crate) fn retrier(&self) -> &Retrier {
        &self.retrier
    }

    /// Where `service` is reached.
    #[cfg_attr(not(feature = "storage"), allow(dead_code))]
    pub(crate) fn endpoint(&self, service: Service) -> &str {
        self.config.endpoint_of(service)
    }

    /// Whether `service` is sent to a stand-in or an emulator on this machine.
    pub(crate) fn is_local(&self, service: Service) -> bool {
        crate::config::is_loopback(self.config.endpoint_of(service))
    }

    /// The project's number, asked of Resource Manager (`projects.get`) once.
    pub(crate) async fn project_number(&self) -> Result<&str, BackendError> {
        self.project_number
            .get_or_try_init(|| crate::project::number(self))
            .await
            .map(String::as_str)
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
        /// Pub/Sub's IAM policies of topics and subscriptions (the generated client
        /// serves them on `SchemaService`).
        cfg(feature = "pubsub"), pubsub_policies: google_cloud_pubsub::client::SchemaService = Service::PubSub
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
