//! moto behind a recording relay (`infra_testkit::relay`), which keeps every request
//! and refuses, drops or loses the ones a test's rule picks. The Object Storage and
//! Queues tests reach moto through it, and look at moto directly with the AWS SDKs, as
//! another tool would.

use std::sync::Arc;

use aws_credential_types::Credentials;
use infra_core::sdk::{ManualClock, Router};
use infra_testkit::conformance::fresh_prefix;
use infra_testkit::relay::{Exchange, Fault, Refusal, Relay};
use infra_testkit::scaleway::ScalewayServer;

use super::support::stand_in;
use super::{backend, moto};

// ---- faults, as the services answer them ----

/// Refuses `x` as the service does when it denies it: `403 AccessDenied`.
pub(crate) fn deny(x: &Exchange) -> Fault {
    Fault::Refuse(Refusal::denied(x))
}

/// Refuses `x` as the service does when it throttles it: SQS's `400
/// ThrottlingException`, S3's `503 SlowDown`.
pub(crate) fn slow_down(x: &Exchange) -> Fault {
    let said = "refused by the relay: slow down";
    Fault::Refuse(match x.header("x-amz-target") {
        Some(_) => Refusal::aws(x, 400, "ThrottlingException", said),
        None => Refusal::aws(x, 503, "SlowDown", said),
    })
}

/// Whether `x` is an S3 request that changes something.
pub(crate) fn writes(x: &Exchange) -> bool {
    x.header("x-amz-target").is_none() && !matches!(x.method.as_str(), "GET" | "HEAD")
}

// ---- the setup ----

/// The stand-in (for the backend's other endpoints), a relay in front of moto, moto's own
/// address (for a look as another tool) and a backend reaching moto through the relay;
/// or `None` after moto's loud skip. A test keeps the relay bound (as `_relay` when it
/// never looks at it) until its end: a relay dropped relays nothing more.
pub(crate) async fn on_moto() -> Option<(ScalewayServer, Relay, String, Arc<Router>)> {
    let moto = moto()?;
    let server = stand_in().await;
    let relay = Relay::start(&moto).await.expect("the relay starts");
    let backend = backend(&server, Some(&relay.address()));
    Some((server, relay, moto, backend))
}

/// A name no earlier run used (moto keeps what it holds while it runs): a fresh run
/// prefix of the suite's, then `what`. Bucket and queue names alike.
pub(crate) fn fresh(what: &str) -> String {
    format!("{}{what}", fresh_prefix(&ManualClock::new()))
}

/// The credentials of another tool looking at moto directly.
pub(crate) fn another_tool() -> Credentials {
    Credentials::new("SCWOTHERTOOL", "other", None, None, "test")
}

/// The HTTP client of another tool looking at moto directly (the SDK brings none here:
/// this crate builds it without its default HTTPS client).
pub(crate) fn another_tools_http() -> aws_smithy_runtime_api::client::http::SharedHttpClient {
    aws_smithy_http_client::Builder::new()
        .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
            aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
        ))
        .build_https()
}
