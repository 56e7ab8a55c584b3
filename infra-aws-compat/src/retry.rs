//! The one retry policy, applied by the AWS SDK's own retry machinery.
//!
//! The SDK for Rust does not let a client swap its retry strategy, but it gives three
//! hooks that together decide everything: an interceptor that sees each attempt's end
//! with the call's configuration, a retry classifier that can overrule the SDK's own,
//! and the [`RetryConfig`] the SDK's standard strategy reads before each retry. So:
//!
//! - [`PolicyInterceptor`] judges each failed attempt ([`failure_of`]: the outcome
//!   through [`crate::codes`], the `Retry-After` header), knows whether the call may be
//!   repeated (the operation's idempotence, from [`Operations`]), and asks
//!   [`RetryPolicy::decide`] — every decision is that function's. It writes the
//!   answer into the call's configuration as the `RetryConfig` the standard strategy
//!   will read next (one more attempt, or none), and hands the decision over (see
//!   `handoff`) to the classifier and the sleep that follow on its thread.
//! - [`PolicyClassifier`] runs after the SDK's classifiers and answers that decision:
//!   a retry after exactly the wait decided (a delay given by a classifier is one the
//!   standard strategy takes as it is), or none (the SDK's own classifiers would
//!   otherwise refuse what the policy retries, and retry what it refuses).
//! - The SDK's token bucket is replaced by one without limit ([`crate::ClientSetup`]):
//!   no retry is ever refused silently for want of quota; the budget bounds them.
//!
//! The wait decided is taken by the [`ClockSleep`](crate::ClockSleep) the SDK sleeps
//! on, so that it runs on the backend's clock (a manual clock in tests), while the SDK's
//! timeouts run on real time.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use aws_smithy_runtime::client::retries::classifiers::run_classifiers_on_ctx;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeTransmitInterceptorContextMut, FinalizerInterceptorContextMut, InterceptorContext,
};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::retries::RequestAttempts;
use aws_smithy_runtime_api::client::retries::classifiers::{
    ClassifyRetry, RetryAction, RetryClassifierPriority, RetryReason,
};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::client::runtime_plugin::RuntimePlugin;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};
use aws_smithy_types::error::ErrorMetadata;
use aws_smithy_types::retry::{ErrorKind as SdkErrorKind, RetryConfig};
use infra_core::sdk::retry::Decision;
use infra_core::sdk::{Clock, ErrorKind, Failure, Idempotence, Jitter, RetryPolicy};

use crate::classify::{Answer, Outcome, chain};
use crate::handoff;

/// The name [`PolicyClassifier`] goes by among the SDK's classifiers.
const CLASSIFIER: &str = "infra retry policy";

/// The operations of a client that may not be repeated once they may have been acted
/// on: creates, and the calls that refuse a duplicate of what they add. Every other
/// operation is idempotent (a read, a delete, an update to a state).
///
/// Operations are named by their SDK types, never by strings typed here: the name is
/// the one the operation itself puts in the call's configuration (smithy's
/// [`Metadata`]), which is what the policy looks up on each attempt.
///
/// ```
/// use infra_aws_compat::Operations;
/// use infra_core::sdk::Idempotence;
/// # use aws_smithy_runtime_api::client::runtime_plugin::RuntimePlugin;
/// # use aws_smithy_types::config_bag::{FrozenLayer, Layer};
/// # use aws_smithy_runtime_api::client::orchestrator::Metadata;
/// # #[derive(Debug)] struct CreateBucket;
/// # impl RuntimePlugin for CreateBucket {
/// #     fn config(&self) -> Option<FrozenLayer> {
/// #         let mut layer = Layer::new("CreateBucket");
/// #         layer.store_put(Metadata::new("CreateBucket", "S3"));
/// #         Some(layer.freeze())
/// #     }
/// # }
/// // With the SDK: `aws_sdk_s3::operation::create_bucket::CreateBucket::new()`.
/// let operations = Operations::new().not_idempotent(&CreateBucket);
/// assert_eq!(operations.idempotence("S3", "CreateBucket"), Idempotence::NotIdempotent);
/// assert_eq!(operations.idempotence("S3", "PutBucketTagging"), Idempotence::Idempotent);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Operations {
    not_idempotent: BTreeSet<(String, String)>,
}

impl Operations {
    /// No operation listed: every one idempotent.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same table, with `operation` (an SDK operation, such as
    /// `aws_sdk_s3::operation::create_bucket::CreateBucket::new()`) not idempotent.
    ///
    /// # Panics
    ///
    /// When `operation` does not name itself in its configuration, as every operation
    /// of the AWS SDK does.
    #[must_use]
    pub fn not_idempotent(mut self, operation: &dyn RuntimePlugin) -> Self {
        let (service, name) = operation
            .config()
            .and_then(|layer| {
                layer
                    .load::<Metadata>()
                    .map(|m| (m.service().to_owned(), m.name().to_owned()))
            })
            .expect("an SDK operation names itself (smithy's Metadata) in its configuration");
        self.not_idempotent.insert((service, name));
        self
    }

    /// Whether operation `name` of `service` may be repeated after it may have been
    /// acted on.
    pub fn idempotence(&self, service: &str, name: &str) -> Idempotence {
        if self
            .not_idempotent
            .contains(&(service.to_owned(), name.to_owned()))
        {
            Idempotence::NotIdempotent
        } else {
            Idempotence::Idempotent
        }
    }

    /// The operations listed, as `(service, operation)`.
    pub fn listed(&self) -> impl Iterator<Item = (&str, &str)> {
        self.not_idempotent
            .iter()
            .map(|(s, n)| (s.as_str(), n.as_str()))
    }
}

/// When the first attempt of a call began, on the policy's clock.
#[derive(Clone, Copy, Debug)]
struct FirstAttempt(Duration);

impl Storable for FirstAttempt {
    type Storer = StoreReplace<Self>;
}

/// The interceptor that decides, after each failed attempt, whether and when the SDK
/// tries again (see the module documentation).
pub struct PolicyInterceptor {
    policy: RetryPolicy,
    clock: Arc<dyn Clock>,
    jitter: Arc<Jitter>,
    operations: Arc<Operations>,
}

impl fmt::Debug for PolicyInterceptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyInterceptor")
            .field("policy", &self.policy)
            .field("operations", &self.operations)
            .finish_non_exhaustive()
    }
}

impl PolicyInterceptor {
    /// The interceptor applying `policy`, timing calls on `clock`, drawing its jitter
    /// from `jitter`, and telling creates from the rest with `operations`.
    pub fn new(
        policy: RetryPolicy,
        clock: Arc<dyn Clock>,
        jitter: Arc<Jitter>,
        operations: Arc<Operations>,
    ) -> Self {
        PolicyInterceptor {
            policy,
            clock,
            jitter,
            operations,
        }
    }

    /// The idempotence of the call whose configuration is `cfg`: not idempotent when
    /// its operation is listed, or when the operation cannot be told (a call the SDK
    /// did not name).
    fn idempotence(&self, cfg: &ConfigBag) -> Idempotence {
        match cfg.load::<Metadata>() {
            Some(m) => self.operations.idempotence(m.service(), m.name()),
            None => Idempotence::NotIdempotent,
        }
    }
}

impl Intercept for PolicyInterceptor {
    fn name(&self) -> &'static str {
        "infra retry policy"
    }

    fn modify_before_retry_loop(
        &self,
        _context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        handoff::forget();
        cfg.interceptor_state()
            .store_put(FirstAttempt(self.clock.now()));
        Ok(())
    }

    fn modify_before_attempt_completion(
        &self,
        context: &mut FinalizerInterceptorContextMut<'_>,
        runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(failure) = failure_of(context.inner(), runtime_components) else {
            return Ok(());
        };
        let attempts = cfg.load::<RequestAttempts>().map_or(1, |a| a.attempts());
        let now = self.clock.now();
        let first = cfg.load::<FirstAttempt>().map_or(now, |f| f.0);
        let idempotence = self.idempotence(cfg);
        let decision = self.policy.decide(
            failure,
            idempotence,
            attempts.saturating_sub(1),
            now.saturating_sub(first),
            self.jitter.draw(),
        );
        tracing::debug!(?failure, ?idempotence, attempts, ?decision, "retry policy");
        handoff::hand_over(decision);
        let steer = match decision {
            Decision::Retry(wait) => one_more_after(attempts, wait),
            Decision::GiveUp(_) => RetryConfig::disabled(),
        };
        cfg.interceptor_state().store_put(steer);
        Ok(())
    }
}

/// The `RetryConfig` under which the SDK's standard strategy makes one more attempt
/// after `attempts`, and waits the delay the classifier gives it (held under the
/// configuration's ceiling, here the wait itself).
fn one_more_after(attempts: u32, wait: Duration) -> RetryConfig {
    RetryConfig::standard()
        .with_max_attempts(attempts.saturating_add(1))
        .with_max_backoff(wait)
}

/// What the attempt in `ctx` tells, or `None` when it succeeded. The code of an error
/// the SDK did not model is read from the error itself; the code of a modeled error is
/// known only to the operation's own error type, so for those the SDK's classifiers
/// (which the operation registers with that type) say whether it is throttling.
pub fn failure_of(ctx: &InterceptorContext, components: &RuntimeComponents) -> Option<Failure> {
    let error = match ctx.output_or_error()? {
        Ok(_) => return None,
        Err(error) => error,
    };
    let outcome = if error.is_timeout_error() {
        Outcome::TimedOut
    } else if let Some(connector) = error.as_connector_error() {
        Outcome::of_connector(connector)
    } else if error.is_response_error() {
        Outcome::Unreadable(chain(error))
    } else if let Some(operation) = error.as_operation_error() {
        let Some(response) = ctx.response() else {
            return Some(Failure::Final);
        };
        let meta = operation
            .downcast_ref::<ErrorMetadata>()
            .or_else(|| unmodeled(operation));
        Outcome::Answered(Answer::new(
            response.status().as_u16(),
            meta.and_then(ErrorMetadata::code),
            None,
            response.headers(),
        ))
    } else {
        Outcome::NotBuilt(chain(error))
    };
    let judged = outcome.error("", "", &[]);
    let failure = Failure::of(&judged);
    if failure == Failure::Final
        && judged.kind == ErrorKind::Other
        && sdk_says_throttling(ctx, components)
    {
        return Some(Failure::Throttled {
            retry_after: judged.retry_after,
        });
    }
    Some(failure)
}

/// The metadata of an error the SDK did not model: it is among the error's sources.
fn unmodeled<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a ErrorMetadata> {
    let mut source = error.source();
    while let Some(s) = source {
        if let Some(meta) = s.downcast_ref::<ErrorMetadata>() {
            return Some(meta);
        }
        source = s.source();
    }
    None
}

/// Whether the SDK's own classifiers (all but [`PolicyClassifier`]) call the failure
/// in `ctx` throttling.
fn sdk_says_throttling(ctx: &InterceptorContext, components: &RuntimeComponents) -> bool {
    let theirs = components
        .retry_classifiers()
        .filter(|c| c.name() != CLASSIFIER);
    matches!(
        run_classifiers_on_ctx(theirs, ctx),
        RetryAction::RetryIndicated(RetryReason::RetryableError {
            kind: SdkErrorKind::ThrottlingError,
            ..
        })
    )
}

/// The retry classifier that makes the [`PolicyInterceptor`]'s decision the SDK's: it
/// runs after the SDK's own classifiers and, for the failed attempt the interceptor just
/// decided on, answers a retry after exactly the wait decided (the SDK's standard
/// strategy takes a delay a classifier gives as it is) or no retry at all. Anywhere
/// else (no decision handed over) it says nothing, and leaves the SDK's verdict.
#[derive(Clone, Copy, Debug, Default)]
pub struct PolicyClassifier;

impl ClassifyRetry for PolicyClassifier {
    fn classify_retry(&self, ctx: &InterceptorContext) -> RetryAction {
        if !ctx.is_failed() {
            return RetryAction::NoActionIndicated;
        }
        match handoff::decided() {
            // "Throttling", for the standard strategy to take the delay as given (it
            // shortens others' first wait under newer retry rules).
            Some(Decision::Retry(wait)) => {
                RetryAction::RetryIndicated(RetryReason::RetryableError {
                    kind: SdkErrorKind::ThrottlingError,
                    retry_after: Some(wait),
                })
            }
            Some(Decision::GiveUp(_)) => RetryAction::RetryForbidden,
            None => RetryAction::NoActionIndicated,
        }
    }

    fn name(&self) -> &'static str {
        CLASSIFIER
    }

    fn priority(&self) -> RetryClassifierPriority {
        // Well after the SDK's classifiers and any a service adds next to them (each a
        // step or two after the transient-error classifier's).
        (0..64).fold(
            RetryClassifierPriority::transient_error_classifier(),
            |p, _| RetryClassifierPriority::run_after(p),
        )
    }
}

#[cfg(test)]
mod tests;
