//! The conformance suite's recording layer: every call the engine makes on the backend
//! under test, so that checks can assert on what the backend was asked to do, not only
//! on what the engine reported; and probes that repeat a call with the settled spec the
//! engine holds only during it.

use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use infra_core::sdk::layer::{Answer, Call, Layer, Layered, Next, Op};
use infra_core::sdk::{BackendError, ErrorKind, Written};

/// One call the recorded backend received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedCall {
    /// The operation.
    pub op: Op,
    /// The kind named, if any.
    pub kind: Option<&'static str>,
    /// The region named, if any.
    pub region: Option<String>,
    /// The name given to `create`.
    pub name: Option<String>,
    /// The handle given, or the handle a successful `create` returned.
    pub handle: Option<String>,
    /// How it failed, if it did.
    pub error: Option<ErrorKind>,
}

/// Extra calls the recorder makes on the side of the engine's, to check a behaviour
/// that needs the settled spec the engine holds only during a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// After a successful `create` of `name` (of `kind`), create it again with the same
    /// spec: the answer is kept in the probe log.
    CreateTwice { kind: &'static str, name: String },
    /// Every `update` of `kind` is sent twice; both answers are kept.
    UpdateTwice { kind: &'static str },
}

/// What a probe saw.
#[derive(Clone, Debug)]
pub(crate) enum ProbeResult {
    /// The second create's answer.
    SecondCreate(Result<String, BackendError>),
    /// The reported configurations of the two updates (or the second's error).
    TwoUpdates {
        first: serde_json::Map<String, serde_json::Value>,
        second: Result<serde_json::Map<String, serde_json::Value>, BackendError>,
    },
}

/// The recording layer. Clones share one log.
#[derive(Clone, Debug, Default)]
pub struct CallLog {
    calls: Arc<Mutex<Vec<RecordedCall>>>,
    probe: Arc<Mutex<Option<Probe>>>,
    probed: Arc<Mutex<Vec<ProbeResult>>>,
}

/// A backend with its calls recorded.
pub type RecordingBackend = Layered<CallLog>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl CallLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every call recorded so far, in order.
    pub fn calls(&self) -> Vec<RecordedCall> {
        lock(&self.calls).clone()
    }

    /// Every call recorded so far, forgetting them.
    pub fn take(&self) -> Vec<RecordedCall> {
        std::mem::take(&mut *lock(&self.calls))
    }

    pub(crate) fn set_probe(&self, probe: Option<Probe>) {
        *lock(&self.probe) = probe;
    }

    pub(crate) fn take_probed(&self) -> Vec<ProbeResult> {
        std::mem::take(&mut *lock(&self.probed))
    }

    /// Records `call` as answered by `answer`.
    fn record(&self, call: &Call<'_>, answer: &Result<Answer, BackendError>) {
        let created = match (call, answer) {
            (Call::Create { .. }, Ok(Answer::Written(Written::Done(s)))) => Some(s.handle.clone()),
            _ => None,
        };
        let (name, handle) = match call {
            Call::Create { name, .. } => (Some((*name).to_owned()), created),
            other => (None, other.target().map(str::to_owned)),
        };
        lock(&self.calls).push(RecordedCall {
            op: call.op(),
            kind: match call {
                Call::SecretValue { .. } => Some("secrets"),
                other => other.kind(),
            },
            region: call.region().map(str::to_owned),
            name,
            handle,
            error: answer.as_ref().err().map(|e| e.kind),
        });
    }

    /// Passes `call` on and records it.
    async fn pass(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        let answer = next.run(call).await;
        self.record(&call, &answer);
        answer
    }
}

fn written_handle(answer: Result<Answer, BackendError>) -> Result<String, BackendError> {
    match answer? {
        Answer::Written(Written::Done(s)) => Ok(s.handle),
        other => Err(BackendError::new(
            ErrorKind::Other,
            format!("a create answered {other:?}"),
        )),
    }
}

fn written_reported(
    answer: Result<Answer, BackendError>,
) -> Result<serde_json::Map<String, serde_json::Value>, BackendError> {
    match answer? {
        Answer::Written(Written::Done(s)) => Ok(s.reported().clone()),
        other => Err(BackendError::new(
            ErrorKind::Other,
            format!("an update answered {other:?}"),
        )),
    }
}

#[async_trait]
impl Layer for CallLog {
    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        let answer = self.pass(call, next).await;
        let probe = lock(&self.probe).clone();
        match (probe, &call, &answer) {
            (
                Some(Probe::CreateTwice { kind: k, name: n }),
                Call::Create { kind, name, .. },
                Ok(Answer::Written(Written::Done(_))),
            ) if k == *kind && n == *name => {
                let again = self.pass(call, next).await;
                lock(&self.probed).push(ProbeResult::SecondCreate(written_handle(again)));
            }
            (
                Some(Probe::UpdateTwice { kind: k }),
                Call::Update { kind, .. },
                Ok(Answer::Written(Written::Done(first))),
            ) if k == *kind => {
                let first = first.reported().clone();
                let again = self.pass(call, next).await;
                lock(&self.probed).push(ProbeResult::TwoUpdates {
                    first,
                    second: written_reported(again),
                });
            }
            _ => {}
        }
        answer
    }
}
