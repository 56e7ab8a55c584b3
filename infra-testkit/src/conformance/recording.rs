//! A `Backend` that records every call it passes on, so that checks can assert on what
//! the backend under test was asked to do, not only on what the engine reported.

use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use infra_core::{
    Backend, BackendError, Capabilities, ErrorKind, Listed, Marker, RawTags, SecretString,
    SettledSpec, Sighting,
};

/// An operation of the `Backend` trait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallOp {
    /// `account`.
    Account,
    /// `list`.
    List,
    /// `read`.
    Read,
    /// `create`.
    Create,
    /// `update`.
    Update,
    /// `delete`.
    Delete,
    /// `ownership`.
    Ownership,
    /// `secret_value`.
    SecretValue,
    /// `mark`.
    Mark,
}

/// One call the recorded backend received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedCall {
    /// The operation.
    pub op: CallOp,
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

/// Wraps a backend and records every call made through it.
pub struct RecordingBackend {
    inner: Arc<dyn Backend>,
    calls: Mutex<Vec<RecordedCall>>,
    probe: Mutex<Option<Probe>>,
    probed: Mutex<Vec<ProbeResult>>,
}

impl std::fmt::Debug for RecordingBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingBackend")
            .field("provider", &self.inner.provider())
            .field("calls", &self.lock_calls().len())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl RecordingBackend {
    /// Records the calls made to `inner`.
    pub fn new(inner: Arc<dyn Backend>) -> Self {
        RecordingBackend {
            inner,
            calls: Mutex::new(Vec::new()),
            probe: Mutex::new(None),
            probed: Mutex::new(Vec::new()),
        }
    }

    fn lock_calls(&self) -> MutexGuard<'_, Vec<RecordedCall>> {
        lock(&self.calls)
    }

    /// Every call recorded so far, in order.
    pub fn calls(&self) -> Vec<RecordedCall> {
        self.lock_calls().clone()
    }

    /// Every call recorded so far, forgetting them.
    pub fn take(&self) -> Vec<RecordedCall> {
        std::mem::take(&mut *self.lock_calls())
    }

    pub(crate) fn set_probe(&self, probe: Option<Probe>) {
        *lock(&self.probe) = probe;
    }

    pub(crate) fn take_probed(&self) -> Vec<ProbeResult> {
        std::mem::take(&mut *lock(&self.probed))
    }

    fn record(
        &self,
        op: CallOp,
        kind: Option<&'static str>,
        region: Option<&str>,
        name: Option<&str>,
        handle: Option<&str>,
        error: Option<ErrorKind>,
    ) {
        self.lock_calls().push(RecordedCall {
            op,
            kind,
            region: region.map(str::to_owned),
            name: name.map(str::to_owned),
            handle: handle.map(str::to_owned),
            error,
        });
    }
}

fn error_of<T>(result: &Result<T, BackendError>) -> Option<ErrorKind> {
    result.as_ref().err().map(|e| e.kind)
}

#[async_trait]
impl Backend for RecordingBackend {
    fn provider(&self) -> &'static str {
        self.inner.provider()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn unreachable(&self) -> Option<String> {
        self.inner.unreachable()
    }

    async fn account(&self) -> Result<String, BackendError> {
        let result = self.inner.account().await;
        self.record(CallOp::Account, None, None, None, None, error_of(&result));
        result
    }

    async fn list(&self, kind: &'static str, region: &str) -> Result<Vec<Listed>, BackendError> {
        let result = self.inner.list(kind, region).await;
        let error = error_of(&result);
        self.record(CallOp::List, Some(kind), Some(region), None, None, error);
        result
    }

    async fn read(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<Sighting, BackendError> {
        let result = self.inner.read(kind, region, handle).await;
        let error = error_of(&result);
        self.record(
            CallOp::Read,
            Some(kind),
            Some(region),
            None,
            Some(handle),
            error,
        );
        result
    }

    async fn create(
        &self,
        kind: &'static str,
        region: &str,
        name: &str,
        spec: SettledSpec<'_>,
        marker: &Marker,
    ) -> Result<Sighting, BackendError> {
        let result = self.inner.create(kind, region, name, spec, marker).await;
        let handle = result.as_ref().ok().map(|s| s.handle.clone());
        let error = error_of(&result);
        self.record(
            CallOp::Create,
            Some(kind),
            Some(region),
            Some(name),
            handle.as_deref(),
            error,
        );
        let probe = lock(&self.probe).clone();
        if let (Some(Probe::CreateTwice { kind: k, name: n }), Ok(_)) = (probe, &result)
            && k == kind
            && n == name
        {
            let again = self.inner.create(kind, region, name, spec, marker).await;
            let error = error_of(&again);
            let handle = again.as_ref().ok().map(|s| s.handle.clone());
            self.record(
                CallOp::Create,
                Some(kind),
                Some(region),
                Some(name),
                handle.as_deref(),
                error,
            );
            lock(&self.probed).push(ProbeResult::SecondCreate(again.map(|s| s.handle)));
        }
        result
    }

    async fn update(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
        spec: SettledSpec<'_>,
    ) -> Result<Sighting, BackendError> {
        let result = self.inner.update(kind, region, handle, spec).await;
        let error = error_of(&result);
        self.record(
            CallOp::Update,
            Some(kind),
            Some(region),
            None,
            Some(handle),
            error,
        );
        let probe = lock(&self.probe).clone();
        if let (Some(Probe::UpdateTwice { kind: k }), Ok(first)) = (probe, &result)
            && k == kind
        {
            let again = self.inner.update(kind, region, handle, spec).await;
            let error = error_of(&again);
            self.record(
                CallOp::Update,
                Some(kind),
                Some(region),
                None,
                Some(handle),
                error,
            );
            lock(&self.probed).push(ProbeResult::TwoUpdates {
                first: first.reported().clone(),
                second: again.map(|s| s.reported().clone()),
            });
        }
        result
    }

    async fn delete(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<(), BackendError> {
        let result = self.inner.delete(kind, region, handle).await;
        let error = error_of(&result);
        self.record(
            CallOp::Delete,
            Some(kind),
            Some(region),
            None,
            Some(handle),
            error,
        );
        result
    }

    async fn ownership(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<RawTags, BackendError> {
        let result = self.inner.ownership(kind, region, handle).await;
        let error = error_of(&result);
        self.record(
            CallOp::Ownership,
            Some(kind),
            Some(region),
            None,
            Some(handle),
            error,
        );
        result
    }

    async fn mark(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
        marker: &Marker,
    ) -> Result<(), BackendError> {
        let result = self.inner.mark(kind, region, handle, marker).await;
        let error = error_of(&result);
        self.record(
            CallOp::Mark,
            Some(kind),
            Some(region),
            None,
            Some(handle),
            error,
        );
        result
    }

    async fn secret_value(&self, region: &str, handle: &str) -> Result<SecretString, BackendError> {
        let result = self.inner.secret_value(region, handle).await;
        let error = error_of(&result);
        self.record(
            CallOp::SecretValue,
            Some("secrets"),
            Some(region),
            None,
            Some(handle),
            error,
        );
        result
    }
}
