//! The retry layer: the policy's loop around every call of a backend whose client has
//! no retry machinery of its own.

use async_trait::async_trait;

use super::{Answer, Call, Layer, Next, Op};
use crate::BackendError;
use crate::sdk::retry::{Idempotence, Retrier};

/// Retries each call by the [`RetryPolicy`](crate::sdk::RetryPolicy) of its
/// [`Retrier`], on the retrier's clock: a create only when it certainly did nothing
/// (throttled, or never sent), every other call also when it may have been sent.
///
/// Put it around a backend whose client does not retry (the simulated cloud, a provider
/// on a plain HTTP client); never around one whose client does, which would retry twice
/// over. Layers inside it (scripted faults, latency) are retried with the call.
#[derive(Clone, Debug)]
pub struct Retry {
    retrier: Retrier,
    writes: bool,
}

impl Retry {
    /// The layer of `retrier`.
    pub fn new(retrier: Retrier) -> Self {
        Retry {
            retrier,
            writes: true,
        }
    }

    /// The layer of `retrier` for the calls that change nothing (list, read, ownership,
    /// account, a secret's value); every write is tried once. For a provider whose
    /// writes answer to a contract of their own, which decides whether one may be made
    /// again (Talos's attempts).
    pub fn observing_only(retrier: Retrier) -> Self {
        Retry {
            retrier,
            writes: false,
        }
    }

    /// The loop it applies.
    pub fn retrier(&self) -> &Retrier {
        &self.retrier
    }
}

/// Whether a call of `op` may be repeated after it may have been acted on.
pub fn idempotence_of(op: Op) -> Idempotence {
    match op {
        Op::Create => Idempotence::NotIdempotent,
        _ => Idempotence::Idempotent,
    }
}

#[async_trait]
impl Layer for Retry {
    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        if call.op().writes() && !self.writes {
            return next.run(call).await;
        }
        self.retrier
            .run(idempotence_of(call.op()), || next.run(call))
            .await
    }
}
