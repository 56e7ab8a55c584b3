//! How the backend reaches Google Cloud: the project, the credentials, the endpoints,
//! the clock long-running operations are awaited on.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use google_cloud_auth::credentials::Credentials;
use infra_core::sdk::{Clock, SystemClock};

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
}

impl fmt::Debug for GcpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GcpConfig")
            .field("project", &self.project)
            .field("endpoints", &self.endpoints)
            .field("polling", &self.polling)
            .finish_non_exhaustive()
    }
}

impl GcpConfig {
    /// The project every resource lives in, reached with `credentials` (from
    /// `google_cloud_auth::credentials::Builder`: application default credentials, a
    /// service-account key, the metadata server).
    pub fn new(project: impl Into<String>, credentials: Credentials) -> Self {
        GcpConfig {
            project: project.into(),
            credentials,
            endpoints: BTreeMap::new(),
            clock: Arc::new(SystemClock::new()),
            polling: Polling::default(),
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

    /// The clock long-running operations are awaited on (a `ManualClock` in tests).
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
pub(crate) fn from_env() -> Result<GcpConfig, String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let project = var("GOOGLE_CLOUD_PROJECT")
        .or_else(|| var("CLOUDSDK_CORE_PROJECT"))
        .ok_or_else(|| {
            "no Google Cloud project is configured: GOOGLE_CLOUD_PROJECT and \
             CLOUDSDK_CORE_PROJECT are both unset"
                .to_owned()
        })?;
    let mut endpoints = BTreeMap::new();
    if let Some(all) = var("INFRA_GCP_ENDPOINT") {
        for service in Service::ALL {
            endpoints.insert(service, all.trim_end_matches('/').to_owned());
        }
    }
    if let Some(host) = var("PUBSUB_EMULATOR_HOST") {
        let host = host.trim_end_matches('/');
        let url = if host.contains("://") {
            host.to_owned()
        } else {
            format!("http://{host}")
        };
        endpoints.insert(Service::PubSub, url);
    }
    if let Some(url) = var("STORAGE_EMULATOR_HOST") {
        endpoints.insert(Service::Storage, url.trim_end_matches('/').to_owned());
    }
    let all_local = Service::ALL
        .iter()
        .all(|s| endpoints.get(s).is_some_and(|e| is_loopback(e)));
    let credentials = if all_local && var("GOOGLE_APPLICATION_CREDENTIALS").is_none() {
        google_cloud_auth::credentials::anonymous::Builder::new().build()
    } else {
        google_cloud_auth::credentials::Builder::default()
            .build()
            .map_err(|e| {
                format!(
                    "no Google Cloud credentials could be loaded (application default \
                     credentials: GOOGLE_APPLICATION_CREDENTIALS, `gcloud auth \
                     application-default login`, the metadata server): {e}"
                )
            })?
    };
    let mut config = GcpConfig::new(project, credentials);
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
