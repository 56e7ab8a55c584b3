//! The recording layer: every call, in order, and how it ended.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use super::{Answer, Call, Layer, Next, Op};
use crate::{BackendError, ErrorKind};

/// How a recorded call ended.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It answered.
    Ok,
    /// A create or update answered that it deferred the write.
    Deferred,
    /// It failed, this way.
    Failed(ErrorKind),
}

/// One call a [`Recorder`] saw.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The provider of the backend called.
    pub provider: &'static str,
    /// Which method.
    pub op: Op,
    /// The kind (none for `account`).
    pub kind: Option<&'static str>,
    /// The region (none for `account`).
    pub region: Option<String>,
    /// The name a create was given, or the handle another call named.
    pub target: Option<String>,
    /// How it ended.
    pub ended: Ended,
}

/// Records every call that passes through it, in the order they end. Clones share one
/// log, so one recorder put around several backends keeps their calls in one sequence.
/// Never records a spec or a secret's value.
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    log: Arc<Mutex<Vec<Recorded>>>,
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Recorded> {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The calls so far that change something (create, update, delete, mark).
    pub fn writes(&self) -> Vec<Recorded> {
        self.calls().into_iter().filter(|c| c.op.writes()).collect()
    }

    /// How many calls of `op` so far.
    pub fn count(&self, op: Op) -> usize {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|c| c.op == op)
            .count()
    }

    /// Forgets every call so far.
    pub fn clear(&self) {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

#[async_trait]
impl Layer for Recorder {
    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        let answer = next.run(call).await;
        let ended = match &answer {
            Ok(Answer::Written(w)) if w.deferral().is_some() => Ended::Deferred,
            Ok(_) => Ended::Ok,
            Err(e) => Ended::Failed(e.kind),
        };
        let record = Recorded {
            provider: next.backend().provider(),
            op: call.op(),
            kind: call.kind(),
            region: call.region().map(str::to_owned),
            target: call.target().map(str::to_owned),
            ended,
        };
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(record);
        answer
    }
}
