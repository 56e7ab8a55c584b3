//! What every kind reaches Scaleway with: the REST client, Object Storage's and Queues'
//! SDK clients (one per region, made on first use, retrying by the one policy: see
//! `crate::aws_sdk`), the configuration's clock and polling, and the project's
//! organization.

#[cfg(any(feature = "s3", feature = "sqs"))]
use std::collections::BTreeMap;
use std::sync::Arc;
#[cfg(any(feature = "s3", feature = "sqs"))]
use std::sync::{Mutex, PoisonError};

use infra_core::sdk::{BackendError, Clock, Polling, Retrier};
use serde::Deserialize;

use crate::api::{Api, Call};
#[cfg(any(feature = "s3", feature = "sqs"))]
use crate::aws_sdk;
use crate::config::ScalewayConfig;

/// The clients of one backend, shared by its kinds.
#[derive(Debug)]
pub(crate) struct Clients {
    config: ScalewayConfig,
    api: Api,
    organization: tokio::sync::OnceCell<String>,
    /// The policy, clock and operations every SDK client is given.
    #[cfg(any(feature = "s3", feature = "sqs"))]
    setup: infra_aws_compat::ClientSetup,
    /// The HTTPS client (rustls on ring) the SDK clients share.
    #[cfg(any(feature = "s3", feature = "sqs"))]
    https: aws_smithy_runtime_api::client::http::SharedHttpClient,
    #[cfg(feature = "s3")]
    s3: Mutex<BTreeMap<String, aws_sdk_s3::Client>>,
    #[cfg(feature = "sqs")]
    sqs: Mutex<BTreeMap<String, aws_sdk_sqs::Client>>,
}

/// What `GET /account/v3/projects/{id}` answers that is read here.
#[derive(Debug, Deserialize)]
pub(crate) struct Project {
    pub(crate) id: String,
    #[serde(default)]
    pub(crate) organization_id: String,
}

impl Clients {
    pub(crate) fn new(config: ScalewayConfig) -> Arc<Self> {
        // Each attempt waits for its answer at most the policy's request timeout; the
        // retrier waits between attempts on the configuration's clock.
        let http = reqwest::Client::builder()
            .user_agent(concat!("infra-scaleway/", env!("CARGO_PKG_VERSION")))
            .timeout(config.retry.request_timeout())
            .build()
            .unwrap_or_default();
        let retrier = Retrier::new(config.retry, Arc::clone(&config.clock));
        let api = Api::new(http, &config.api_url, config.secret_key.clone(), retrier);
        let organization = tokio::sync::OnceCell::new();
        if let Some(org) = &config.organization_id {
            let _ = organization.set(org.clone());
        }
        Arc::new(Clients {
            #[cfg(any(feature = "s3", feature = "sqs"))]
            setup: infra_aws_compat::ClientSetup::new(
                config.retry,
                Arc::clone(&config.clock),
                aws_sdk::operations(),
            ),
            #[cfg(any(feature = "s3", feature = "sqs"))]
            https: aws_sdk::https_client(),
            config,
            api,
            organization,
            #[cfg(feature = "s3")]
            s3: Mutex::new(BTreeMap::new()),
            #[cfg(feature = "sqs")]
            sqs: Mutex::new(BTreeMap::new()),
        })
    }

    /// The REST API.
    pub(crate) fn api(&self) -> &Api {
        &self.api
    }

    /// The configuration the backend was made with.
    pub(crate) fn config(&self) -> &ScalewayConfig {
        &self.config
    }

    /// The project every resource lives in.
    pub(crate) fn project_id(&self) -> &str {
        &self.config.project_id
    }

    /// The clock asynchronous work is awaited on.
    pub(crate) fn clock(&self) -> &dyn Clock {
        self.config.clock.as_ref()
    }

    /// How asynchronous work is awaited.
    pub(crate) fn polling(&self) -> Polling {
        self.config.polling
    }

    /// The project, as Scaleway's Account API answers it.
    pub(crate) async fn project(&self) -> Result<Project, BackendError> {
        let path = format!("/account/v3/projects/{}", self.config.project_id);
        self.api
            .call(Call::get(
                "the project check (GET /account/v3/projects)",
                path,
            ))
            .await
    }

    /// The organization the project belongs to: the configured one, else the project's.
    pub(crate) async fn organization_id(&self) -> Result<String, BackendError> {
        self.organization
            .get_or_try_init(|| async { self.project().await.map(|p| p.organization_id) })
            .await
            .cloned()
    }

    /// The S3 client of Object Storage in `region`: path-style, signed with the API key
    /// written `ACCESS_KEY@PROJECT_ID` (what it makes lands in the configured project).
    #[cfg(feature = "s3")]
    pub(crate) fn s3(&self, region: &str) -> aws_sdk_s3::Client {
        let mut all = self.s3.lock().unwrap_or_else(PoisonError::into_inner);
        all.entry(region.to_owned())
            .or_insert_with(|| {
                let credentials = aws_sdk::project_credentials(
                    &self.config.access_key,
                    self.config.secret_key.expose(),
                    &self.config.project_id,
                );
                aws_sdk::s3(
                    region,
                    &self.config.s3_endpoint_of(region),
                    credentials,
                    &self.setup,
                    &self.https,
                )
            })
            .clone()
    }

    /// The SQS client of Queues in `region` at `endpoint`, signing with `key` (Queues
    /// credentials: Queues does not take the API key), under the policy.
    #[cfg(feature = "sqs")]
    pub(crate) fn sqs(
        &self,
        region: &str,
        endpoint: &str,
        key: &crate::config::QueuesKey,
    ) -> aws_sdk_sqs::Client {
        let mut all = self.sqs.lock().unwrap_or_else(PoisonError::into_inner);
        let id = format!("{region} {endpoint} {}", key.access_key);
        all.entry(id)
            .or_insert_with(|| {
                let credentials = aws_credential_types::Credentials::new(
                    key.access_key.clone(),
                    key.secret_key.expose().to_owned(),
                    None,
                    None,
                    "scaleway-queues",
                );
                self.sqs_client(region, endpoint, credentials)
            })
            .clone()
    }

    /// An SQS client of Queues in `region`, at `endpoint` (what `sqs-info` answers for
    /// the project), signing with `credentials` (Queues' own), under the policy and on
    /// the shared HTTPS client.
    #[cfg(feature = "sqs")]
    pub(crate) fn sqs_client(
        &self,
        region: &str,
        endpoint: &str,
        credentials: aws_credential_types::Credentials,
    ) -> aws_sdk_sqs::Client {
        aws_sdk::sqs(region, endpoint, credentials, &self.setup, &self.https)
    }
}
