//! The fault layer: scripted failures, before a call or after it (a lost answer).

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use super::{Answer, Call, Layer, Next, Op};
use crate::{BackendError, ErrorKind};

/// One scripted failure: which calls it hits, how they fail, and how many times.
///
/// ```
/// use infra_core::sdk::layer::{Fault, Op};
/// use infra_core::sdk::ErrorKind;
///
/// // The first two lists of queues are throttled.
/// let throttled = Fault::on(Op::List).kind("queues").fails(ErrorKind::Throttled).times(2);
/// // A create of `orders` reaches the cloud, and its answer is lost.
/// let lost = Fault::on(Op::Create).target("orders").answer_lost();
/// # let _ = (throttled, lost);
/// ```
#[derive(Clone, Debug)]
pub struct Fault {
    op: Op,
    kind: Option<&'static str>,
    target: Option<String>,
    error: ErrorKind,
    lost: bool,
    remaining: Option<u32>,
}

impl Fault {
    /// A fault on every call of `op`: `Unavailable`, every time, until narrowed.
    pub fn on(op: Op) -> Self {
        Fault {
            op,
            kind: None,
            target: None,
            error: ErrorKind::Unavailable,
            lost: false,
            remaining: None,
        }
    }

    /// Only calls about `kind`.
    pub fn kind(mut self, kind: &'static str) -> Self {
        self.kind = Some(kind);
        self
    }

    /// Only calls naming `target` (a create's name, another call's handle).
    pub fn target(mut self, target: impl Into<String>) -> Self {
        self.target = Some(target.into());
        self
    }

    /// Failing with `kind` (the call is not made).
    pub fn fails(mut self, kind: ErrorKind) -> Self {
        self.error = kind;
        self.lost = false;
        self
    }

    /// The call is made, and its answer is lost: `Unavailable`, marked as possibly
    /// sent, whatever the call did.
    pub fn answer_lost(mut self) -> Self {
        self.error = ErrorKind::Unavailable;
        self.lost = true;
        self
    }

    /// Only the next `n` matching calls (every one, without this).
    pub fn times(mut self, n: u32) -> Self {
        self.remaining = Some(n);
        self
    }

    fn matches(&self, call: &Call<'_>) -> bool {
        self.op == call.op()
            && self.kind.is_none_or(|k| call.kind() == Some(k))
            && self
                .target
                .as_deref()
                .is_none_or(|t| call.target() == Some(t))
            && self.remaining != Some(0)
    }

    fn error(&self, call: &Call<'_>) -> BackendError {
        let what = format!(
            "injected fault: {} of {} {}",
            call.op(),
            call.kind().unwrap_or("the account"),
            call.target().unwrap_or_default()
        );
        let e =
            BackendError::new(self.error, what.trim_end().to_owned()).with_code("InjectedFault");
        if self.lost { e.maybe_sent() } else { e }
    }
}

/// Fails the calls its faults describe and passes every other call on. Clones share
/// one script, so a test can add faults to a backend the engine already holds.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    script: Arc<Mutex<Vec<Fault>>>,
    hits: Arc<Mutex<u64>>,
}

impl Faults {
    /// No faults yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a fault (earlier faults are tried first).
    pub fn add(&self, fault: Fault) -> &Self {
        self.script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(fault);
        self
    }

    /// Removes every fault.
    pub fn clear(&self) {
        self.script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// How many calls a fault has hit so far.
    pub fn hits(&self) -> u64 {
        *self.hits.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The fault that hits `call`, counted down.
    fn take(&self, call: &Call<'_>) -> Option<Fault> {
        let mut script = self.script.lock().unwrap_or_else(PoisonError::into_inner);
        let fault = script.iter_mut().find(|f| f.matches(call))?;
        if let Some(n) = &mut fault.remaining {
            *n -= 1;
        }
        *self.hits.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        Some(fault.clone())
    }
}

#[async_trait]
impl Layer for Faults {
    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        match self.take(&call) {
            None => next.run(call).await,
            Some(fault) if fault.lost => {
                let _ = next.run(call).await;
                Err(fault.error(&call))
            }
            Some(fault) => Err(fault.error(&call)),
        }
    }
}
