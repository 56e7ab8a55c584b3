#![doc = include_str!("../README.md")]

mod clients;
mod credentials;
#[cfg(feature = "ec2")]
mod ec2;
#[cfg(feature = "ecr")]
mod ecr;
mod error;
#[cfg(feature = "iam")]
mod iam;
#[cfg(feature = "lambda")]
mod lambda;
mod ops;
#[cfg(feature = "rds")]
mod rds;
#[cfg(feature = "s3")]
mod s3;
#[cfg(feature = "secretsmanager")]
mod secrets;
#[cfg(feature = "sqs")]
mod sqs;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use aws_types::SdkConfig;
use infra_core::{
    Backend, BackendError, Capabilities, ErrorKind, Listed, Marker, RawTags, SecretString,
    SettledSpec, Sighting, Unreachable,
};

use clients::Clients;
use infra_core::sdk::Written;
use ops::KindOps;

/// The AWS backend: every kind this build's features enable, in any region.
pub struct AwsBackend {
    clients: Clients,
    kinds: BTreeMap<&'static str, Box<dyn KindOps>>,
}

impl std::fmt::Debug for AwsBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsBackend")
            .field("kinds", &self.kinds.keys().collect::<Vec<_>>())
            .field("endpoint", &self.clients.base().endpoint_url())
            .finish()
    }
}

impl AwsBackend {
    /// A backend on an SDK configuration (credentials, endpoint, retry settings). The
    /// region of each call is the resource's own; the configuration's is only a default.
    pub fn new(config: SdkConfig) -> Self {
        let mut kinds: BTreeMap<&'static str, Box<dyn KindOps>> = BTreeMap::new();
        let mut add = |ops: Box<dyn KindOps>| {
            kinds.insert(ops.kind(), ops);
        };
        #[cfg(feature = "s3")]
        {
            add(Box::new(s3::S3BucketOps));
            add(Box::new(s3::ObjectStoreOps));
        }
        #[cfg(feature = "ec2")]
        ec2::register(&mut add);
        #[cfg(feature = "iam")]
        iam::register(&mut add);
        #[cfg(feature = "sqs")]
        sqs::register(&mut add);
        #[cfg(feature = "secretsmanager")]
        secrets::register(&mut add);
        #[cfg(feature = "ecr")]
        ecr::register(&mut add);
        #[cfg(feature = "rds")]
        rds::register(&mut add);
        #[cfg(feature = "lambda")]
        lambda::register(&mut add);
        let _ = &mut add;
        AwsBackend {
            clients: Clients::new(config),
            kinds,
        }
    }

    /// A backend from the standard sources: `aws-config`'s default chain
    /// (`AWS_PROFILE`, `AWS_REGION`, `AWS_ENDPOINT_URL`, the environment's keys, SSO,
    /// instance roles). When no credentials can be found, the backend returned is
    /// [`Unreachable`] and says why, so that the engine refuses to act on AWS rather than
    /// read its silence as agreement: its reason names every source that was looked at,
    /// what was seen there (never a secret) and what to do.
    pub async fn from_env() -> Arc<dyn Backend> {
        match credentials::load().await {
            Ok(config) => Arc::new(AwsBackend::new(config)),
            Err(why) => Arc::new(Unreachable::new("aws", why)),
        }
    }

    fn ops(&self, kind: &str) -> Result<&dyn KindOps, BackendError> {
        self.kinds.get(kind).map(|k| &**k).ok_or_else(|| {
            BackendError::new(
                ErrorKind::Invalid,
                format!("this build of infra-aws does not realise kind {kind}; enable its feature"),
            )
        })
    }
}

#[async_trait]
impl Backend for AwsBackend {
    fn provider(&self) -> &'static str {
        "aws"
    }

    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::with_kinds(self.kinds.keys().copied());
        caps.duplicate_names = self
            .kinds
            .values()
            .filter(|k| k.duplicate_names())
            .map(|k| k.kind())
            .collect();
        caps
    }

    async fn account(&self) -> Result<String, BackendError> {
        let region = self
            .clients
            .base()
            .region()
            .map(|r| r.to_string())
            .unwrap_or_else(|| "us-east-1".to_owned());
        let clients = self.clients.region(&region);
        let identity = clients
            .sts()
            .get_caller_identity()
            .send()
            .await
            .map_err(|e| error::classify("sts:GetCallerIdentity", e, &[]))?;
        identity.account().map(str::to_owned).ok_or_else(|| {
            BackendError::new(ErrorKind::Other, "sts:GetCallerIdentity named no account")
        })
    }

    async fn list(&self, kind: &'static str, region: &str) -> Result<Vec<Listed>, BackendError> {
        self.ops(kind)?.list(&self.clients.region(region)).await
    }

    async fn read(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<Sighting, BackendError> {
        self.ops(kind)?
            .read(&self.clients.region(region), handle)
            .await
    }

    async fn create(
        &self,
        kind: &'static str,
        region: &str,
        name: &str,
        spec: SettledSpec<'_>,
        marker: &Marker,
    ) -> Result<Written, BackendError> {
        self.ops(kind)?
            .create(&self.clients.region(region), name, spec, marker)
            .await
            .map(Written::Done)
    }

    async fn update(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
        spec: SettledSpec<'_>,
    ) -> Result<Written, BackendError> {
        self.ops(kind)?
            .update(&self.clients.region(region), handle, spec)
            .await
            .map(Written::Done)
    }

    async fn delete(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<(), BackendError> {
        self.ops(kind)?
            .delete(&self.clients.region(region), handle)
            .await
    }

    async fn ownership(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<RawTags, BackendError> {
        self.ops(kind)?
            .ownership(&self.clients.region(region), handle)
            .await
    }

    /// Every kind this crate realises carries tags, so every one can be marked: the
    /// marker is added with the kind's own tagging call and nothing else is written
    /// (an IAM role made elsewhere also gets its `infra-region` tag; see the `iam`
    /// kind). A resource carrying another fleet's marker is refused with `Conflict`
    /// and left as it was.
    async fn mark(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
        marker: &Marker,
    ) -> Result<(), BackendError> {
        self.ops(kind)?
            .mark(&self.clients.region(region), handle, marker)
            .await
    }

    async fn secret_value(&self, region: &str, handle: &str) -> Result<SecretString, BackendError> {
        #[cfg(feature = "secretsmanager")]
        if self.kinds.contains_key("secrets") {
            return secrets::secret_value(&self.clients.region(region), handle).await;
        }
        let _ = (region, handle);
        Err(BackendError::new(
            ErrorKind::Invalid,
            "this build of infra-aws does not realise kind secrets; enable the secretsmanager feature",
        ))
    }
}
