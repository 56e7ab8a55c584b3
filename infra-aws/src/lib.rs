#![doc = include_str!("../README.md")]

mod account;
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
#[cfg(feature = "rds")]
mod rds;
#[cfg(feature = "s3")]
mod s3;
#[cfg(feature = "secretsmanager")]
mod secrets;
#[cfg(feature = "sqs")]
mod sqs;
#[cfg(feature = "tagging")]
mod tag_index;
mod tags;

use std::fmt;
use std::sync::Arc;

use aws_types::SdkConfig;
use infra_aws_compat::ClientSetup;
use infra_core::sdk::Router;
use infra_core::sdk::{Backend, Clock, RetryPolicy, SystemClock, Unreachable};

use account::CallerAccount;
use clients::Clients;

/// The AWS provider's constructors. The backend itself is an
/// [`infra_core::sdk::Router`] holding one typed implementation per kind this build's
/// features enable (each an [`infra_core::sdk::KindBackend`] of its kind), the account
/// check (STS `GetCallerIdentity`) and, with the `secretsmanager` feature, the reader of
/// secret values (`GetSecretValue`). `AwsBackend` is never a value: it only names the
/// ways to build that router.
#[derive(Debug)]
pub enum AwsBackend {}

impl AwsBackend {
    /// A backend on an SDK configuration (credentials, endpoint), retrying by
    /// [`RetryPolicy::from_env`] on the system clock (see [`AwsBackend::builder`]).
    /// The region of each call is the resource's own; the configuration's is only a
    /// default (and the region the account is asked in).
    ///
    /// Every kind realised carries tags, so every one can be marked: the marker is added
    /// with the kind's own tagging call and nothing else is written (an IAM role made
    /// elsewhere also gets its `infra-region` tag; see the `iam` kind). A resource
    /// carrying another fleet's marker is refused with `Conflict` and left as it was.
    #[allow(
        clippy::new_ret_no_self,
        reason = "`AwsBackend` names the constructors; the backend is the router"
    )]
    pub fn new(config: SdkConfig) -> Router {
        Self::builder(config).build()
    }

    /// A backend on an SDK configuration, with its retry policy and clock to set.
    ///
    /// Every SDK client the backend makes retries by the one policy, through the SDK's
    /// own retry machinery (`infra-aws-compat`): the configuration's retry settings,
    /// timeouts, sleep and time source are replaced.
    pub fn builder(config: SdkConfig) -> AwsBackendBuilder {
        AwsBackendBuilder {
            config,
            policy: None,
            clock: Arc::new(SystemClock::new()),
        }
    }

    /// A backend from the standard sources: `aws-config`'s default chain
    /// (`AWS_PROFILE`, `AWS_REGION`, `AWS_ENDPOINT_URL`, the environment's keys, SSO,
    /// instance roles), and the retry policy of `INFRA_RETRY_BUDGET` and
    /// `INFRA_REQUEST_TIMEOUT`. When no credentials can be found, or a variable of the
    /// policy is not a duration, the backend returned is [`Unreachable`] and says why,
    /// so that the engine refuses to act on AWS rather than read its silence as
    /// agreement: its reason names every source that was looked at, what was seen there
    /// (never a secret) and what to do.
    pub async fn from_env() -> Arc<dyn Backend> {
        let policy = match RetryPolicy::from_env() {
            Ok(policy) => policy,
            Err(why) => return Arc::new(Unreachable::new("aws", why)),
        };
        match credentials::load().await {
            Ok(config) => Arc::new(AwsBackend::builder(config).retry_policy(policy).build()),
            Err(why) => Arc::new(Unreachable::new("aws", why)),
        }
    }
}

/// An AWS backend being set up: [`AwsBackend::builder`].
pub struct AwsBackendBuilder {
    config: SdkConfig,
    policy: Option<RetryPolicy>,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for AwsBackendBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsBackendBuilder")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl AwsBackendBuilder {
    /// Calls retried by `policy` (by default [`RetryPolicy::from_env`], or the default
    /// policy, with a warning, when its variables are not durations).
    #[must_use]
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Retries waited out, and calls timed, on `clock` (a `ManualClock` in tests; the
    /// system clock by default). The SDK's timeouts run on real time whatever it is.
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The backend.
    pub fn build(self) -> Router {
        let policy = self.policy.unwrap_or_else(|| {
            RetryPolicy::from_env().unwrap_or_else(|why| {
                tracing::warn!("{why}; the default retry policy applies");
                RetryPolicy::default()
            })
        });
        let config = self.config;
        let setup = ClientSetup::new(policy, self.clock, clients::operations());
        let clients = Arc::new(Clients::new(config, setup));
        #[allow(unused_mut)] // with no service feature on, nothing is added
        let mut router = Router::new("aws", CallerAccount::new(Arc::clone(&clients)));
        #[cfg(feature = "s3")]
        {
            use infra_core::kinds::{ObjectStore, S3Bucket};
            router.add::<S3Bucket>(s3::S3Buckets::new(Arc::clone(&clients)));
            router.add::<ObjectStore>(s3::S3ObjectStores::new(Arc::clone(&clients)));
        }
        #[cfg(feature = "ec2")]
        {
            use infra_core::kinds::{AwsInstance, SecurityGroup};
            router.add::<SecurityGroup>(ec2::Ec2SecurityGroups::new(Arc::clone(&clients)));
            router.add::<AwsInstance>(ec2::Ec2Instances::new(Arc::clone(&clients)));
        }
        #[cfg(feature = "iam")]
        router.add::<infra_core::kinds::Iam>(iam::IamRoles::new(Arc::clone(&clients)));
        #[cfg(feature = "sqs")]
        router.add::<infra_core::kinds::Queues>(sqs::SqsQueues::new(Arc::clone(&clients)));
        #[cfg(feature = "secretsmanager")]
        {
            use secrets::SecretsManagerSecrets;
            router.add::<infra_core::kinds::Secrets>(SecretsManagerSecrets::new(Arc::clone(
                &clients,
            )));
            router = router.secrets(SecretsManagerSecrets::new(Arc::clone(&clients)));
        }
        #[cfg(feature = "ecr")]
        router.add::<infra_core::kinds::ImageRegistry>(ecr::EcrRepositories::new(Arc::clone(
            &clients,
        )));
        #[cfg(feature = "rds")]
        router.add::<infra_core::kinds::Postgres>(rds::RdsDatabases::new(Arc::clone(&clients)));
        #[cfg(feature = "lambda")]
        router
            .add::<infra_core::kinds::Compute>(lambda::LambdaFunctions::new(Arc::clone(&clients)));
        router
    }
}
