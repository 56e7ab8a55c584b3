//! The policy through the SDK's real orchestrator: an operation built with smithy's
//! `Operation` builder and the pieces [`ClientSetup`] gives a client, against a
//! scripted connector that answers each attempt and notes when, on a manual clock, it
//! came. What the SDK does is compared with what [`RetryPolicy::decide`] says, decision
//! by decision, in a model written apart from the code under test.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_smithy_runtime::client::orchestrator::operation::Operation;
use aws_smithy_runtime_api::client::http::{
    HttpConnector, HttpConnectorFuture, SharedHttpConnector, http_client_fn,
};
use aws_smithy_runtime_api::client::interceptors::context::InterceptorContext;
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse, OrchestratorError};
use aws_smithy_runtime_api::client::result::{ConnectorError, SdkError};
use aws_smithy_runtime_api::client::retries::classifiers::{
    ClassifyRetry, RetryAction, RetryClassifierPriority,
};
use aws_smithy_runtime_api::client::runtime_plugin::{RuntimePlugin, StaticRuntimePlugin};
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::{FrozenLayer, Layer};
use aws_smithy_types::error::ErrorMetadata;
use aws_smithy_types::retry::ErrorKind as SdkErrorKind;
use infra_core::sdk::retry::{Decision, GiveUp};
use infra_core::sdk::{Clock, Failure, Idempotence, Jitter, ManualClock, RetryPolicy};
use proptest::prelude::*;

use super::*;
use crate::ClientSetup;

/// One scripted answer to an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// The service answers `status`, naming `code` (or none), asking for a wait.
    Answer {
        status: u16,
        code: Option<&'static str>,
        retry_after: Option<u64>,
    },
    /// An error the operation models, which its own classifier calls throttling.
    ModeledThrottle,
    /// No connection could be made.
    Refused,
    /// No answer in time.
    TimedOut,
    /// Success.
    Ok,
}

fn answer(status: u16, code: Option<&'static str>, retry_after: Option<u64>) -> Step {
    Step::Answer {
        status,
        code,
        retry_after,
    }
}

/// The connector: answers attempts from a script (then success), noting the time of
/// each on the clock.
struct Scripted {
    clock: Arc<ManualClock>,
    steps: Mutex<VecDeque<Step>>,
    times: Mutex<Vec<Duration>>,
}

impl fmt::Debug for Scripted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Scripted")
    }
}

#[derive(Clone, Debug)]
struct Connector(Arc<Scripted>);

impl HttpConnector for Connector {
    fn call(&self, _request: HttpRequest) -> HttpConnectorFuture {
        let script = &self.0;
        script.times.lock().unwrap().push(script.clock.now());
        let step = script.steps.lock().unwrap().pop_front().unwrap_or(Step::Ok);
        let response = |status: u16| {
            HttpResponse::new(StatusCode::try_from(status).unwrap(), SdkBody::empty())
        };
        let result = match step {
            Step::Answer {
                status,
                code,
                retry_after,
            } => {
                let mut r = response(status);
                if let Some(code) = code {
                    r.headers_mut().insert("x-test-code", code);
                }
                if let Some(s) = retry_after {
                    r.headers_mut().insert("Retry-After", s.to_string());
                }
                Ok(r)
            }
            Step::ModeledThrottle => {
                let mut r = response(400);
                r.headers_mut().insert("x-test-modeled", "throttle");
                Ok(r)
            }
            Step::Ok => Ok(response(200)),
            Step::Refused => Err(ConnectorError::io(Box::new(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "connection refused",
            )))),
            Step::TimedOut => Err(ConnectorError::timeout("no answer in time".into())),
        };
        HttpConnectorFuture::ready(result)
    }
}

/// The operation's errors, as the SDK shapes them: an unmodeled one carries its
/// metadata as its source, a modeled one does not.
#[derive(Debug)]
enum TestError {
    Unhandled(ErrorMetadata),
    Modeled,
}

impl fmt::Display for TestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TestError::Unhandled(meta) => write!(f, "unhandled error ({:?})", meta.code()),
            TestError::Modeled => f.write_str("RequestThrottled"),
        }
    }
}

impl std::error::Error for TestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TestError::Unhandled(meta) => Some(meta),
            TestError::Modeled => None,
        }
    }
}

fn deserialize(response: &HttpResponse) -> Result<String, OrchestratorError<TestError>> {
    if response.status().is_success() {
        return Ok("done".to_owned());
    }
    if response.headers().get("x-test-modeled").is_some() {
        return Err(OrchestratorError::operation(TestError::Modeled));
    }
    let mut meta = ErrorMetadata::builder();
    if let Some(code) = response.headers().get("x-test-code") {
        meta = meta.code(code);
    }
    Err(OrchestratorError::operation(TestError::Unhandled(
        meta.build(),
    )))
}

/// The operation's own classifier, as the SDK registers one per operation with its
/// error type: it knows the modeled error is throttling, and says nothing of the rest.
#[derive(Debug)]
struct OperationsOwnClassifier;

impl ClassifyRetry for OperationsOwnClassifier {
    fn classify_retry(&self, ctx: &InterceptorContext) -> RetryAction {
        let modeled = ctx
            .output_or_error()
            .and_then(Result::err)
            .and_then(OrchestratorError::as_operation_error)
            .and_then(|e| e.downcast_ref::<TestError>())
            .is_some_and(|e| matches!(e, TestError::Modeled));
        if modeled {
            RetryAction::retryable_error(SdkErrorKind::ThrottlingError)
        } else {
            RetryAction::NoActionIndicated
        }
    }

    fn name(&self) -> &'static str {
        "the operation's own"
    }

    fn priority(&self) -> RetryClassifierPriority {
        RetryClassifierPriority::modeled_as_retryable_classifier()
    }
}

/// An operation of the service `TEST`, for the table.
#[derive(Debug)]
struct Named(&'static str);

impl RuntimePlugin for Named {
    fn config(&self) -> Option<FrozenLayer> {
        let mut layer = Layer::new(self.0);
        layer.store_put(Metadata::new(self.0, "TEST"));
        Some(layer.freeze())
    }
}

const CREATE: &str = "CreateThing";
const READ: &str = "GetThing";

/// Calls of the service `TEST` through the SDK, on one [`ClientSetup`] (one clock, one
/// jitter, one retry partition), against the scripted connector.
struct Harness {
    clock: Arc<ManualClock>,
    script: Arc<Scripted>,
    setup: ClientSetup,
}

impl Harness {
    /// Calls under `policy`, the jitter seeded with `seed`.
    fn new(policy: RetryPolicy, seed: u64) -> Self {
        let clock = Arc::new(ManualClock::new());
        let script = Arc::new(Scripted {
            clock: clock.clone(),
            steps: Mutex::new(VecDeque::new()),
            times: Mutex::new(Vec::new()),
        });
        let setup = ClientSetup::new(
            policy,
            clock.clone(),
            Operations::new().not_idempotent(&Named(CREATE)),
        )
        .with_jitter(Jitter::seeded(seed));
        Harness {
            clock,
            script,
            setup,
        }
    }

    /// A call of `operation`, the connector answering `steps`: whether it succeeded,
    /// and the time of each attempt.
    async fn call(&self, operation: &'static str, steps: &[Step]) -> (bool, Vec<Duration>) {
        *self.script.steps.lock().unwrap() = steps.iter().copied().collect();
        self.script.times.lock().unwrap().clear();
        let setup = &self.setup;
        let connector = SharedHttpConnector::new(Connector(self.script.clone()));
        let mut partition = Layer::new("partition");
        partition.store_put(setup.retry_partition());
        let call = Operation::builder()
            .service_name("TEST")
            .operation_name(operation)
            .http_client(http_client_fn(move |_, _| connector.clone()))
            .endpoint_url("http://127.0.0.1:9")
            .no_auth()
            .standard_retry(&setup.retry_config())
            .retry_classifier(OperationsOwnClassifier)
            .retry_classifier(setup.classifier())
            .interceptor(setup.interceptor())
            .sleep_impl(setup.sleep())
            .time_source(setup.time_source())
            .timeout_config(setup.timeout_config())
            .stalled_stream_protection(setup.stalled_stream_protection())
            .runtime_plugin(StaticRuntimePlugin::new().with_config(partition.freeze()))
            .serializer(|input: String| Ok(HttpRequest::new(SdkBody::from(input))))
            .deserializer(deserialize)
            .build();
        let result: Result<String, SdkError<TestError, HttpResponse>> =
            call.invoke("request".to_owned()).await;
        let times = self.script.times.lock().unwrap().clone();
        (result.is_ok(), times)
    }
}

/// One call, on a harness of its own.
async fn run(
    policy: RetryPolicy,
    seed: u64,
    operation: &'static str,
    steps: &[Step],
) -> (bool, Vec<Duration>) {
    Harness::new(policy, seed).call(operation, steps).await
}

/// What an attempt answered `step` tells, written apart from the code under test.
fn told(step: Step) -> Option<Failure> {
    Some(match step {
        Step::Ok => return None,
        Step::Answer {
            status,
            code,
            retry_after,
        } => {
            let retry_after = retry_after.map(Duration::from_secs);
            match (status, code) {
                (429, _) | (_, Some("SlowDown" | "Throttling")) => {
                    Failure::Throttled { retry_after }
                }
                (400, Some("RequestTimeout")) => Failure::NotSent,
                (500.., Some("InternalError") | None) => Failure::MaybeSent { retry_after },
                _ => Failure::Final,
            }
        }
        Step::ModeledThrottle => Failure::Throttled { retry_after: None },
        Step::Refused => Failure::NotSent,
        Step::TimedOut => Failure::MaybeSent { retry_after: None },
    })
}

/// The model: the policy's decisions, one per failed attempt, with the same jitter.
fn model(
    policy: RetryPolicy,
    seed: u64,
    operation: &str,
    steps: &[Step],
) -> (bool, Vec<Duration>, Vec<Decision>) {
    let idempotence = if operation == CREATE {
        Idempotence::NotIdempotent
    } else {
        Idempotence::Idempotent
    };
    let jitter = Jitter::seeded(seed);
    let (mut now, mut times, mut decisions) = (Duration::ZERO, vec![Duration::ZERO], vec![]);
    for retries in 0u32.. {
        let step = steps.get(retries as usize).copied().unwrap_or(Step::Ok);
        let Some(failure) = told(step) else {
            return (true, times, decisions);
        };
        let decision = policy.decide(failure, idempotence, retries, now, jitter.draw());
        decisions.push(decision);
        match decision {
            Decision::Retry(wait) => {
                now += wait;
                times.push(now);
            }
            Decision::GiveUp(_) => return (false, times, decisions),
        }
    }
    unreachable!()
}

#[tokio::test]
async fn a_throttled_create_is_retried_after_the_wait_asked_until_it_succeeds() {
    let steps = [
        answer(429, None, Some(3)),
        answer(503, Some("SlowDown"), None),
        answer(400, Some("Throttling"), Some(1)),
        Step::Ok,
    ];
    let policy = RetryPolicy::default();
    let (ok, times) = run(policy, 7, CREATE, &steps).await;
    let (expected_ok, expected_times, decisions) = model(policy, 7, CREATE, &steps);
    assert!(ok && expected_ok);
    assert_eq!(times, expected_times, "{decisions:?}");
    assert_eq!(times.len(), 4);
    assert!(
        times[1] >= Duration::from_secs(3),
        "Retry-After: 3 was cut short: {times:?}"
    );
    assert!(times[3] - times[2] >= Duration::from_secs(1));
}

#[tokio::test]
async fn a_create_that_may_have_been_acted_on_is_not_repeated_and_a_read_is() {
    for step in [
        answer(500, Some("InternalError"), None),
        answer(503, None, None),
        Step::TimedOut,
    ] {
        let (ok, times) = run(RetryPolicy::default(), 1, CREATE, &[step]).await;
        assert!(!ok, "{step:?}");
        assert_eq!(times.len(), 1, "{step:?}: a create was repeated");
        let (ok, times) = run(RetryPolicy::default(), 1, READ, &[step]).await;
        assert!(ok, "{step:?}");
        assert_eq!(times.len(), 2, "{step:?}: a read was not repeated");
    }
}

#[tokio::test]
async fn what_never_reached_the_service_or_was_throttled_by_its_model_is_retried_for_a_create() {
    for step in [
        Step::Refused,
        answer(400, Some("RequestTimeout"), None),
        Step::ModeledThrottle,
    ] {
        let (ok, times) = run(RetryPolicy::default(), 2, CREATE, &[step]).await;
        assert!(ok, "{step:?}");
        assert_eq!(times.len(), 2, "{step:?}");
    }
}

#[tokio::test]
async fn a_refusal_is_final_for_every_call() {
    for step in [
        answer(403, Some("AccessDenied"), None),
        answer(403, None, None),
        answer(400, Some("InvalidParameterValue"), None),
        answer(409, Some("BucketAlreadyOwnedByYou"), None),
        answer(404, Some("NoSuchBucket"), None),
    ] {
        let (ok, times) = run(RetryPolicy::default(), 3, READ, &[step]).await;
        assert!(!ok, "{step:?}");
        assert_eq!(times.len(), 1, "{step:?} was retried");
    }
}

#[tokio::test]
async fn the_budget_ends_retries_and_no_quota_or_count_of_attempts_does() {
    // A storm that outlasts the budget: thirty seconds of throttling.
    let storm = vec![answer(429, None, None); 1000];
    let policy = RetryPolicy::default().with_budget(Duration::from_secs(30));
    let (ok, times) = run(policy, 4, READ, &storm).await;
    let (_, expected_times, decisions) = model(policy, 4, READ, &storm);
    assert!(!ok);
    assert_eq!(times, expected_times);
    assert_eq!(
        decisions.last(),
        Some(&Decision::GiveUp(GiveUp::BudgetSpent))
    );
    // Far more than the SDK's three attempts, and nothing waited past the budget.
    assert!(times.len() > 5, "{} attempts", times.len());
    assert!(*times.last().unwrap() < Duration::from_secs(30));

    // Many calls of one client (one partition): the SDK's bucket (500 tokens, 5 per
    // retry) would have refused retries after a hundred; this one never does, and every
    // call goes on until its own budget is spent.
    let client = Harness::new(policy, 5);
    let mut retries = 0;
    for _ in 0..20 {
        let started = client.clock.now();
        let (ok, times) = client.call(READ, &storm).await;
        assert!(!ok);
        let last = *times.last().unwrap() - started;
        assert!(last >= Duration::from_secs(10), "gave up after {last:?}");
        retries += times.len() - 1;
    }
    assert!(retries > 100, "{retries} retries in all");
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        Just(Step::Ok),
        (proptest::option::of(0u64..8)).prop_map(|r| answer(429, None, r)),
        Just(answer(503, Some("SlowDown"), None)),
        (proptest::option::of(0u64..8)).prop_map(|r| answer(500, Some("InternalError"), r)),
        Just(answer(502, None, None)),
        Just(answer(400, Some("RequestTimeout"), None)),
        Just(answer(400, Some("InvalidParameterValue"), None)),
        Just(answer(403, Some("AccessDenied"), None)),
        Just(Step::ModeledThrottle),
        Just(Step::Refused),
        Just(Step::TimedOut),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The SDK does exactly what the policy decides: the same attempts, at the same
    /// times, with the same end, for any script of failures, any budget, a create or a
    /// read.
    #[test]
    fn the_sdk_makes_exactly_the_attempts_the_policy_decides(
        steps in proptest::collection::vec(step(), 0..12),
        budget in 1u64..90,
        seed in any::<u64>(),
        create in any::<bool>(),
    ) {
        let policy = RetryPolicy::default().with_budget(Duration::from_secs(budget));
        let operation = if create { CREATE } else { READ };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (ok, times) = runtime.block_on(run(policy, seed, operation, &steps));
        let (expected_ok, expected_times, decisions) = model(policy, seed, operation, &steps);
        prop_assert_eq!(ok, expected_ok, "{:?}", decisions);
        prop_assert_eq!(times, expected_times, "{:?}", decisions);
    }
}

#[test]
fn the_table_names_operations_as_the_sdk_does_and_lists_only_those_given() {
    let operations = Operations::new().not_idempotent(&Named(CREATE));
    assert_eq!(
        operations.idempotence("TEST", CREATE),
        Idempotence::NotIdempotent
    );
    assert_eq!(
        operations.idempotence("TEST", READ),
        Idempotence::Idempotent
    );
    assert_eq!(
        operations.idempotence("OTHER", CREATE),
        Idempotence::Idempotent
    );
    assert_eq!(operations.listed().collect::<Vec<_>>(), [("TEST", CREATE)]);
}
