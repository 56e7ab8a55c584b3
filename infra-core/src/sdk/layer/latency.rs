//! The latency layer: a wait before each call, on an injected clock.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::{Answer, Call, Layer, Next, Op};
use crate::{BackendError, Clock};

/// Waits before passing each call on: `per_call`, or the wait set for its method. On a
/// `ManualClock` a test advances time itself; on the system clock the waits are real
/// (to make runs overlap, or to measure a scheduler against a known bound).
#[derive(Clone)]
pub struct Latency {
    clock: Arc<dyn Clock>,
    per_call: Duration,
    per_op: BTreeMap<Op, Duration>,
}

impl std::fmt::Debug for Latency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Latency")
            .field("per_call", &self.per_call)
            .field("per_op", &self.per_op)
            .finish_non_exhaustive()
    }
}

impl Latency {
    /// A wait of `per_call` before every call, on `clock`.
    pub fn new(clock: Arc<dyn Clock>, per_call: Duration) -> Self {
        Latency {
            clock,
            per_call,
            per_op: BTreeMap::new(),
        }
    }

    /// A wait of `wait` before every call of `op` instead.
    pub fn for_op(mut self, op: Op, wait: Duration) -> Self {
        self.per_op.insert(op, wait);
        self
    }

    /// The wait before a call of `op`.
    pub fn wait(&self, op: Op) -> Duration {
        self.per_op.get(&op).copied().unwrap_or(self.per_call)
    }
}

#[async_trait]
impl Layer for Latency {
    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        let wait = self.wait(call.op());
        if !wait.is_zero() {
            self.clock.sleep(wait).await;
        }
        next.run(call).await
    }
}
