//! The tracing layer: a span per call, and how it ended.

use async_trait::async_trait;
use tracing::Instrument as _;

use super::{Answer, Call, Layer, Next};
use crate::BackendError;

/// Opens a `tracing` span `backend_call` around each call (provider, method, kind,
/// region, target) and logs how it ended at debug level (a failure at info); a
/// subscriber that records span timings has each call's duration. Specs and secret values are never logged; a failure's message is the
/// provider's, which never holds one.
#[derive(Clone, Copy, Debug, Default)]
pub struct Traced;

#[async_trait]
impl Layer for Traced {
    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        let span = tracing::info_span!(
            "backend_call",
            provider = next.backend().provider(),
            op = call.op().as_str(),
            kind = call.kind().unwrap_or(""),
            region = call.region().unwrap_or(""),
            target = call.target().unwrap_or(""),
        );
        let answer = next.run(call).instrument(span.clone()).await;
        span.in_scope(|| match &answer {
            Ok(Answer::Written(w)) if w.deferral().is_some() => {
                tracing::debug!("deferred")
            }
            Ok(_) => tracing::debug!("answered"),
            Err(e) => tracing::info!(
                kind = %e.kind,
                code = e.code.as_deref().unwrap_or(""),
                may_have_been_sent = e.may_have_been_sent,
                "failed: {}",
                e.message
            ),
        });
        answer
    }
}
