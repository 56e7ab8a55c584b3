//! How the backend reaches Google Cloud: the project, the credentials, the endpoints,
//! the retry policy, the clock and the polling of long-running operations.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use google_cloud_auth::credentials::Credentials;
use infra_core::sdk::{Clock, RetryPolicy, SystemClock};

use crate::credentials::{self, Sources};

/// A Google Cloud API this crate calls. Each can be sent to an endpoint of its own
/// ([`GcpConfig::endpoint`]); by default each goes to Google's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Service {
    /// Cloud Storage's JSON API (`storage.googleapis.com`).
    Storage,
    /// Pub/Sub (`pubsub.googleapis.com`).
    PubSub,
    /// Secret Manager (`secretmanager.googleapis.com`).
    SecretManager,
    /// Artifact Registry (`artifactregistry.googleapis.com`).
    ArtifactRegistry,
    /// Cloud Run Admin API v2 (`run.googleapis.com`).
    Run,
    /// Cloud SQL Admin API (`sqladmin.googleapis.com`).
    Sql,
    /// IAM (`iam.googleapis.com`): service accounts.
    Iam,
    /// Resource Manager (`cloudresourcemanager.googleapis.com`): the project, and its
    /// IAM policy.
    ResourceManager,
}

impl Service {
    /// Every service, in a fixed order.
    pub const ALL: [Service; 8] = [
        Service::Storage,
        Service::PubSub,
        Service::SecretManager,
        Service::ArtifactRegistry,
        Service::Run,
        Service::Sql,
        Service::Iam,
        Service::ResourceManager,
    ];

    /// Google's own endpoint of the service.
    pub fn default_endpoint(self) -> &'static str {
        match self {
            Service::Storage => "https://storage.googleapis.com",
            Service::PubSub => "https://pubsub.googleapis.com",
            Service::SecretManager => "https://secretmanager.googleapis.com",
            Service::ArtifactRegistry => "https://artifactregistry.googleapis.com",
            Service::Run => "https://run.googleapis.com",
            Service::Sql => "https://sqladmin.googleapis.com",
            Service::Iam => "https://iam.googleapis.com",
            Service::ResourceManager => "https://cloudresourcemanager.googleapis.com",
        }
    }
}

/// How long-running operations (an Artifact Registry create, a Cloud Run deploy, a
/// Cloud SQL instance) are awaited.
pub use infra_core::sdk::Polling;

/// The configuration of a [`GcpBackend`](crate::GcpBackend).
#[derive(Clone)]
pub struct GcpConfig {
    pub(crate) project: String,
    pub(crate) credentials: Credentials,
    pub(crate) endpoints: BTreeMap<Service, String>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) polling: Polling,
    pub(crate) retry: RetryPolicy,
}

impl fmt::Debug for GcpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GcpConfig")
            .field("project", &self.project)
            .field("endpoints", &self.endpoints)
            .field("polling", &self.polling)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl GcpConfig {
    /// The project every resource lives in, reached with `credentials` (from
    /// `google_cloud_auth::credentials::Builder`: application default credentials, a
    /// service-account key, the metadata server). Calls are retried by
    /// [`RetryPolicy::from_env`] (`INFRA_RETRY_BUDGET`, `INFRA_REQUEST_TIMEOUT`); a
    /// variable that is not a duration is reported in the log and the default policy
    /// applies (`GcpBackend::from_env` refuses it instead).
    pub fn new(project: impl Into<String>, credentials: Credentials) -> Self {
        let retry = RetryPolicy::from_env().unwrap_or_else(|why| {
            tracing::warn!("the default retry policy applies: {why}");
            RetryPolicy::default()
        });
        GcpConfig {
            project: project.into(),
            credentials,
            endpoints: BTreeMap::new(),
            clock: Arc::new(SystemClock::new()),
            polling: Polling::default(),
            retry,
        }
    }

    /// A configuration for stand-ins on this machine: every service at `endpoint`,
    /// with anonymous credentials (no token is sent). Refused for an endpoint that is
    /// not on the loopback interface, so that anonymous credentials never reach a
    /// real cloud.
    ///
    /// # Errors
    /// When `endpoint` is not `http://127.0.0.1:…`, `http://localhost:…` or
    /// `http://[::1]:…`.
    pub fn stand_in(project: impl Into<String>, endpoint: &str) -> Result<Self, String> {
        let mut config = GcpConfig::new(
            project,
            google_cloud_auth::credentials::anonymous::Builder::new().build(),
        );
        for service in Service::ALL {
            config = config.stand_in_endpoint(service, endpoint)?;
        }
        Ok(config)
    }

    /// Sends `service` to a stand-in at `endpoint` (loopback only, as for
    /// [`GcpConfig::stand_in`]).
    ///
    /// # Errors
    /// When `endpoint` is not on the loopback interface.
    pub fn stand_in_endpoint(self, service: Service, endpoint: &str) -> Result<Self, String> {
        if !is_loopback(endpoint) {
            return Err(format!(
                "{endpoint} is not a loopback address: anonymous credentials are only for \
                 stand-ins on this machine"
            ));
        }
        Ok(self.endpoint(service, endpoint))
    }

    /// Sends `service` to `endpoint` instead of Google's (a private endpoint, a
    /// regional one, an emulator).
    #[must_use]
    pub fn endpoint(mut self, service: Service, endpoint: impl Into<String>) -> Self {
        self.endpoints
            .insert(service, endpoint.into().trim_end_matches('/').to_owned());
        self
    }

    /// The clock of the waits this crate makes itself: between polls of Cloud SQL's
    /// operations, between reads after a write, between retries of the Cloud Storage
    /// calls (a `ManualClock` in tests). The official clients wait on tokio's clock
    /// (gax takes no clock): their retries and the polls of their long-running
    /// operations follow a paused tokio clock in tests, not this one.
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How long-running operations are awaited.
    #[must_use]
    pub fn polling(mut self, polling: Polling) -> Self {
        self.polling = polling;
        self
    }

    /// How every call is retried, and how long each attempt waits for its answer
    /// ([`RetryPolicy::request_timeout`]). The official clients apply it through their
    /// own retry hooks, the Cloud Storage calls through
    /// [`Retrier`](infra_core::sdk::Retrier); nothing retries on top of it.
    #[must_use]
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The retry policy.
    pub fn retry(&self) -> RetryPolicy {
        self.retry
    }

    /// The project.
    pub fn project(&self) -> &str {
        &self.project
    }

    /// Where `service` is reached.
    pub fn endpoint_of(&self, service: Service) -> &str {
        self.endpoints
            .get(&service)
            .map_or(service.default_endpoint(), String::as_str)
    }

    /// The endpoint set for `service`, if it is not Google's own.
    pub(crate) fn endpoint_override(&self, service: Service) -> Option<&str> {
        self.endpoints.get(&service).map(String::as_str)
    }
}

/// The configuration [`GcpBackend::from_env`](crate::GcpBackend::from_env) reads, or
/// why there is none (never a secret).
pub(crate) async fn from_env() -> Result<GcpConfig, String> {
    from_sources(&Sources::process()).await
}

/// The configuration `sources` give: endpoints, the project and the credentials in the
/// order `credentials.rs` documents, and the retry policy.
pub(crate) async fn from_sources(sources: &Sources) -> Result<GcpConfig, String> {
    let mut endpoints = BTreeMap::new();
    if let Some(all) = sources.var("INFRA_GCP_ENDPOINT") {
        for service in Service::ALL {
            endpoints.insert(service, all.trim_end_matches('/').to_owned());
        }
    }
    if let Some(host) = sources.var("PUBSUB_EMULATOR_HOST") {
        let host = host.trim_end_matches('/');
        let url = if host.contains("://") {
            host.to_owned()
        } else {
            format!("http://{host}")
        };
        endpoints.insert(Service::PubSub, url);
    }
    if let Some(url) = sources.var("STORAGE_EMULATOR_HOST") {
        endpoints.insert(Service::Storage, url.trim_end_matches('/').to_owned());
    }
    let retry = RetryPolicy::from_vars(|name| sources.var(name))?;
    let all_local = Service::ALL
        .iter()
        .all(|s| endpoints.get(s).is_some_and(|e| is_loopback(e)));
    let (project, project_from) = credentials::project(sources).await?;
    let (creds, creds_from) = credentials::credentials(sources, all_local)?;
    tracing::info!(
        "Google Cloud project {project} (from {project_from}), credentials from {creds_from}"
    );
    let mut config = GcpConfig::new(project, creds).retry_policy(retry);
    config.endpoints = endpoints;
    Ok(config)
}

/// Whether `endpoint` is a plain-HTTP address on the loopback interface.
pub(crate) fn is_loopback(endpoint: &str) -> bool {
    let Some(rest) = endpoint.strip_prefix("http://") else {
        return false;
    };
    let host = rest.split('/').next().unwrap_or("");
    let host = if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host.split(':').next().unwrap_or("")
    };
    matches!(host, "127.0.0.1" | "localhost" | "::1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_credentials_are_only_for_loopback_stand_ins() {
        assert!(is_loopback("http://127.0.0.1:8085"));
        assert!(is_loopback("http://localhost:4443/"));
        assert!(is_loopback("http://[::1]:9000"));
        assert!(!is_loopback("https://127.0.0.1:8085"));
        assert!(!is_loopback("http://pubsub.googleapis.com"));
        assert!(!is_loopback("http://127.0.0.1.example.com:80"));
        let refused = GcpConfig::stand_in("p", "http://10.0.0.1:8080").unwrap_err();
        assert!(refused.contains("not a loopback address"), "{refused}");
        let config = GcpConfig::stand_in("p", "http://127.0.0.1:9/").unwrap();
        assert_eq!(config.endpoint_of(Service::Sql), "http://127.0.0.1:9");
    }
}
