//! Everything an SDK client needs to follow the policy, in one value, and the macro
//! that gives it to a client's configuration.

use std::fmt;
use std::sync::Arc;

use aws_smithy_runtime::client::retries::RetryPartition;
use aws_smithy_runtime::client::retries::TokenBucket;
use aws_smithy_runtime_api::client::stalled_stream_protection::StalledStreamProtectionConfig;
use aws_smithy_types::retry::RetryConfig;
use aws_smithy_types::timeout::TimeoutConfig;
use infra_core::sdk::{Clock, Jitter, RetryPolicy};

use crate::clock::{ClockSleep, ClockTime};
use crate::retry::{Operations, PolicyClassifier, PolicyInterceptor};

/// The policy, the clock and the operations' idempotence of one backend, as the parts
/// an SDK client's configuration takes. Build one per backend and give it to every
/// client with [`configure!`](crate::configure): they share the clock, the jitter
/// and a retry partition without quota.
#[derive(Clone)]
pub struct ClientSetup {
    policy: RetryPolicy,
    clock: Arc<dyn Clock>,
    jitter: Arc<Jitter>,
    operations: Arc<Operations>,
    partition: RetryPartition,
    sleep: ClockSleep,
    time: ClockTime,
}

impl fmt::Debug for ClientSetup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientSetup")
            .field("policy", &self.policy)
            .field("operations", &self.operations)
            .finish_non_exhaustive()
    }
}

impl ClientSetup {
    /// Clients applying `policy`, waiting and timing on `clock`, repeating after a
    /// possible success only the operations `operations` does not list.
    pub fn new(policy: RetryPolicy, clock: Arc<dyn Clock>, operations: Operations) -> Self {
        ClientSetup {
            policy,
            sleep: ClockSleep::new(Arc::clone(&clock)),
            time: ClockTime::new(Arc::clone(&clock)),
            clock,
            jitter: Arc::new(Jitter::new()),
            operations: Arc::new(operations),
            // A partition of the backend's own, with a bucket that never runs dry: the
            // budget bounds retries, never a quota that refuses them unsaid.
            partition: RetryPartition::custom("infra")
                .token_bucket(TokenBucket::unlimited())
                .build(),
        }
    }

    /// The same setup, its jitter drawn from `jitter` (a seeded one, in tests).
    #[must_use]
    pub fn with_jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = Arc::new(jitter);
        self
    }

    /// The policy applied.
    pub fn policy(&self) -> RetryPolicy {
        self.policy
    }

    /// The operations that are not repeated once they may have been acted on.
    pub fn operations(&self) -> &Operations {
        &self.operations
    }

    /// What the SDK's standard strategy does when the policy said nothing: no retry.
    /// (After every failed attempt the policy says what to do.)
    pub fn retry_config(&self) -> RetryConfig {
        RetryConfig::disabled()
    }

    /// The retry partition, whose token bucket has no limit.
    pub fn retry_partition(&self) -> RetryPartition {
        self.partition.clone()
    }

    /// The classifier that lets the policy's decision stand.
    pub fn classifier(&self) -> PolicyClassifier {
        PolicyClassifier
    }

    /// The interceptor that decides.
    pub fn interceptor(&self) -> PolicyInterceptor {
        PolicyInterceptor::new(
            self.policy,
            Arc::clone(&self.clock),
            Arc::clone(&self.jitter),
            Arc::clone(&self.operations),
        )
    }

    /// The SDK's sleep: retries on the clock, timeouts on real time.
    pub fn sleep(&self) -> ClockSleep {
        self.sleep.clone()
    }

    /// The SDK's time source, moving with the clock.
    pub fn time_source(&self) -> ClockTime {
        self.time.clone()
    }

    /// The request timeout as the SDK's: each attempt, and each connection, within
    /// [`RetryPolicy::request_timeout`] (a timed-out attempt may have been acted on).
    pub fn timeout_config(&self) -> TimeoutConfig {
        let timeout = self.policy.request_timeout();
        TimeoutConfig::builder()
            .connect_timeout(timeout)
            .operation_attempt_timeout(timeout)
            .build()
    }

    /// Off: the request timeout bounds every attempt, and the protection's own timer
    /// would read the backend's clock, which a test moves by hand.
    pub fn stalled_stream_protection(&self) -> StalledStreamProtectionConfig {
        StalledStreamProtectionConfig::disabled()
    }
}

/// Gives a [`ClientSetup`] to the configuration builder of an AWS SDK service client
/// (`aws_sdk_s3::config::Builder`, …): the retry configuration, partition, classifier
/// and interceptor, the sleep and time source, the timeouts. The builder's retry
/// settings are replaced, so that the client retries by the policy alone. It answers
/// the builder, for more settings: `configure!(aws_sdk_s3::config::Builder::from(&sdk),
/// &setup).force_path_style(true).build()`.
#[macro_export]
macro_rules! configure {
    ($builder:expr, $setup:expr) => {{
        let setup: &$crate::ClientSetup = $setup;
        $builder
            .retry_config(setup.retry_config())
            .retry_partition(setup.retry_partition())
            .retry_classifier(setup.classifier())
            .interceptor(setup.interceptor())
            .sleep_impl(setup.sleep())
            .time_source(setup.time_source())
            .timeout_config(setup.timeout_config())
            .stalled_stream_protection(setup.stalled_stream_protection())
    }};
}
