//! Layers: a backend wrapped by something that sees every call on its way in and its
//! answer on its way out, and may change either — without forwarding ten methods by
//! hand.
//!
//! A [`Layer`] implements one method, [`Layer::call`], over a [`Call`] (which method,
//! with its arguments) and a [`Next`] (the backend underneath); [`Layered`] turns the
//! pair into a [`Backend`] again. Layers stack: a layered backend is a backend.
//!
//! The layers kept here are the ones tests and users keep writing: [`Recorder`] (every
//! call and how it ended), [`Faults`] (scripted failures, a lost answer included),
//! [`Latency`] (a wait before each call, on an injected clock), [`Retry`] (the one retry
//! policy, for a backend whose client has no retry machinery), [`Traced`] (a
//! `tracing` span per call) and [`BareLists`] (lists trusted for names and handles
//! only: every resource read).
//!
//! ```
//! use std::sync::Arc;
//! use infra_core::sdk::layer::{Layered, Op, Recorder};
//! use infra_core::sdk::{Backend, Unreachable};
//!
//! let recorder = Recorder::new();
//! let backend: Arc<dyn Backend> =
//!     Layered::wrap(Arc::new(Unreachable::new("aws", "no credentials")), recorder.clone());
//! # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! # rt.block_on(async {
//! let _ = backend.list("queues", "eu-west-3").await;
//! # });
//! assert_eq!(recorder.calls()[0].op, Op::List);
//! ```

mod bare_lists;
mod faults;
mod latency;
mod record;
mod retry;
mod trace;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

pub use bare_lists::BareLists;
pub use faults::{Fault, Faults};
pub use latency::Latency;
pub use record::{Ended, Recorded, Recorder};
pub use retry::{Retry, idempotence_of};
pub use trace::Traced;

use super::Written;
use crate::backend::{
    Backend, Capabilities, Listed, Marker, Prerequisite, RawTags, SettledSpec, Sighting,
};
use crate::{BackendError, ErrorKind, SecretString};

/// Which method of [`Backend`] a call is.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// [`Backend::account`].
    Account,
    /// [`Backend::list`].
    List,
    /// [`Backend::read`].
    Read,
    /// [`Backend::create`].
    Create,
    /// [`Backend::update`].
    Update,
    /// [`Backend::delete`].
    Delete,
    /// [`Backend::ownership`].
    Ownership,
    /// [`Backend::secret_value`].
    SecretValue,
    /// [`Backend::mark`].
    Mark,
    /// [`Backend::prerequisites`].
    Prerequisites,
}

impl Op {
    /// The method's name (`create`).
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Account => "account",
            Op::List => "list",
            Op::Read => "read",
            Op::Create => "create",
            Op::Update => "update",
            Op::Delete => "delete",
            Op::Ownership => "ownership",
            Op::SecretValue => "secret_value",
            Op::Mark => "mark",
            Op::Prerequisites => "prerequisites",
        }
    }

    /// Whether the call changes something in the cloud (create, update, delete, mark).
    pub fn writes(self) -> bool {
        matches!(self, Op::Create | Op::Update | Op::Delete | Op::Mark)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One call to a backend, with its arguments.
#[non_exhaustive]
#[derive(Clone, Copy, Debug)]
pub enum Call<'a> {
    /// [`Backend::account`].
    Account,
    /// [`Backend::list`].
    List {
        /// The kind's id.
        kind: &'static str,
        /// The region's code.
        region: &'a str,
    },
    /// [`Backend::read`].
    Read {
        /// The kind's id.
        kind: &'static str,
        /// The region's code.
        region: &'a str,
        /// The resource's handle.
        handle: &'a str,
    },
    /// [`Backend::create`].
    Create {
        /// The kind's id.
        kind: &'static str,
        /// The region's code.
        region: &'a str,
        /// The declared name.
        name: &'a str,
        /// The settled spec.
        spec: SettledSpec<'a>,
        /// The fleet's marker.
        marker: &'a Marker,
    },
    /// [`Backend::update`].
    Update {
        /// The kind's id.
        kind: &'static str,
        /// The region's code.
        region: &'a str,
        /// The resource's handle.
        handle: &'a str,
        /// The settled spec.
        spec: SettledSpec<'a>,
    },
    /// [`Backend::delete`].
    Delete {
        /// The kind's id.
        kind: &'static str,
        /// The region's code.
        region: &'a str,
        /// The resource's handle.
        handle: &'a str,
    },
    /// [`Backend::ownership`].
    Ownership {
        /// The kind's id.
        kind: &'static str,
        /// The region's code.
        region: &'a str,
        /// The resource's handle.
        handle: &'a str,
    },
    /// [`Backend::secret_value`].
    SecretValue {
        /// The region's code.
        region: &'a str,
        /// The secret's handle.
        handle: &'a str,
    },
    /// [`Backend::mark`].
    Mark {
        /// The kind's id.
        kind: &'static str,
        /// The region's code.
        region: &'a str,
        /// The resource's handle.
        handle: &'a str,
        /// The fleet's marker.
        marker: &'a Marker,
    },
    /// [`Backend::prerequisites`].
    Prerequisites {
        /// The kind's id.
        kind: &'static str,
        /// The region's code.
        region: &'a str,
    },
}

impl Call<'_> {
    /// Which method.
    pub fn op(&self) -> Op {
        match self {
            Call::Account => Op::Account,
            Call::List { .. } => Op::List,
            Call::Read { .. } => Op::Read,
            Call::Create { .. } => Op::Create,
            Call::Update { .. } => Op::Update,
            Call::Delete { .. } => Op::Delete,
            Call::Ownership { .. } => Op::Ownership,
            Call::SecretValue { .. } => Op::SecretValue,
            Call::Mark { .. } => Op::Mark,
            Call::Prerequisites { .. } => Op::Prerequisites,
        }
    }

    /// The kind the call is about (a secret's value is of `secrets`; `account` of none).
    pub fn kind(&self) -> Option<&'static str> {
        match *self {
            Call::Account => None,
            Call::SecretValue { .. } => Some("secrets"),
            Call::List { kind, .. }
            | Call::Read { kind, .. }
            | Call::Create { kind, .. }
            | Call::Update { kind, .. }
            | Call::Delete { kind, .. }
            | Call::Ownership { kind, .. }
            | Call::Mark { kind, .. }
            | Call::Prerequisites { kind, .. } => Some(kind),
        }
    }

    /// The region the call is in.
    pub fn region(&self) -> Option<&str> {
        match *self {
            Call::Account => None,
            Call::List { region, .. }
            | Call::Read { region, .. }
            | Call::Create { region, .. }
            | Call::Update { region, .. }
            | Call::Delete { region, .. }
            | Call::Ownership { region, .. }
            | Call::SecretValue { region, .. }
            | Call::Mark { region, .. }
            | Call::Prerequisites { region, .. } => Some(region),
        }
    }

    /// The name a create is given, or the handle any other call names.
    pub fn target(&self) -> Option<&str> {
        match *self {
            Call::Account | Call::List { .. } | Call::Prerequisites { .. } => None,
            Call::Create { name, .. } => Some(name),
            Call::Read { handle, .. }
            | Call::Update { handle, .. }
            | Call::Delete { handle, .. }
            | Call::Ownership { handle, .. }
            | Call::SecretValue { handle, .. }
            | Call::Mark { handle, .. } => Some(handle),
        }
    }
}

/// What a call answered.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub enum Answer {
    /// To [`Call::Account`].
    Account(String),
    /// To [`Call::List`].
    List(Vec<Listed>),
    /// To [`Call::Read`].
    Read(Sighting),
    /// To [`Call::Create`] and [`Call::Update`].
    Written(Written),
    /// To [`Call::Delete`].
    Deleted,
    /// To [`Call::Ownership`].
    Ownership(RawTags),
    /// To [`Call::SecretValue`].
    SecretValue(SecretString),
    /// To [`Call::Mark`].
    Marked,
    /// To [`Call::Prerequisites`].
    Prerequisites(Vec<Prerequisite>),
}

/// The backend underneath a layer.
#[derive(Clone, Copy)]
pub struct Next<'a> {
    inner: &'a dyn Backend,
}

impl fmt::Debug for Next<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Next")
            .field("provider", &self.inner.provider())
            .finish()
    }
}

impl<'a> Next<'a> {
    /// The backend underneath itself, to make other calls on (a layer checking what a
    /// create left behind, say).
    pub fn backend(&self) -> &'a dyn Backend {
        self.inner
    }

    /// Passes `call` on to the backend underneath.
    pub async fn run(&self, call: Call<'_>) -> Result<Answer, BackendError> {
        let b = self.inner;
        Ok(match call {
            Call::Account => Answer::Account(b.account().await?),
            Call::List { kind, region } => Answer::List(b.list(kind, region).await?),
            Call::Read {
                kind,
                region,
                handle,
            } => Answer::Read(b.read(kind, region, handle).await?),
            Call::Create {
                kind,
                region,
                name,
                spec,
                marker,
            } => Answer::Written(b.create(kind, region, name, spec, marker).await?),
            Call::Update {
                kind,
                region,
                handle,
                spec,
            } => Answer::Written(b.update(kind, region, handle, spec).await?),
            Call::Delete {
                kind,
                region,
                handle,
            } => {
                b.delete(kind, region, handle).await?;
                Answer::Deleted
            }
            Call::Ownership {
                kind,
                region,
                handle,
            } => Answer::Ownership(b.ownership(kind, region, handle).await?),
            Call::SecretValue { region, handle } => {
                Answer::SecretValue(b.secret_value(region, handle).await?)
            }
            Call::Mark {
                kind,
                region,
                handle,
                marker,
            } => {
                b.mark(kind, region, handle, marker).await?;
                Answer::Marked
            }
            Call::Prerequisites { kind, region } => {
                Answer::Prerequisites(b.prerequisites(kind, region).await?)
            }
        })
    }
}

/// Something that sees every call to a backend and its answer.
///
/// The defaults pass everything through unchanged: a layer overrides what it is for.
#[async_trait]
pub trait Layer: Send + Sync + 'static {
    /// The capabilities the layered backend declares, from those of the backend
    /// underneath.
    fn capabilities(&self, inner: Capabilities) -> Capabilities {
        inner
    }

    /// Whether the layered backend can reach its cloud, from the answer underneath.
    fn unreachable(&self, inner: Option<String>) -> Option<String> {
        inner
    }

    /// Handles one call: usually by passing it on with `next.run(call)`, looking at or
    /// changing the call before and the answer after.
    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        next.run(call).await
    }
}

/// A backend with a layer around it.
pub struct Layered<L> {
    inner: Arc<dyn Backend>,
    layer: L,
}

impl<L> fmt::Debug for Layered<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Layered")
            .field("provider", &self.inner.provider())
            .field("layer", &std::any::type_name::<L>())
            .finish()
    }
}

impl<L: Layer> Layered<L> {
    /// `inner`, with `layer` around it.
    pub fn new(inner: Arc<dyn Backend>, layer: L) -> Self {
        Layered { inner, layer }
    }

    /// `inner` with `layer` around it, shared, as the engine takes backends.
    pub fn wrap(inner: Arc<dyn Backend>, layer: L) -> Arc<Self> {
        Arc::new(Self::new(inner, layer))
    }

    /// The layer.
    pub fn layer(&self) -> &L {
        &self.layer
    }

    /// The backend underneath.
    pub fn inner(&self) -> &Arc<dyn Backend> {
        &self.inner
    }

    async fn dispatch(&self, call: Call<'_>) -> Result<Answer, BackendError> {
        let next = Next {
            inner: &*self.inner,
        };
        self.layer.call(call, next).await
    }
}

/// A layer that answered a call with an answer of another call's shape: a bug in the
/// layer, reported as such rather than guessed around.
fn mismatch(op: Op, answer: &Answer) -> BackendError {
    BackendError::new(
        ErrorKind::Other,
        format!("a layer answered a {op} call with {answer:?}"),
    )
}

#[async_trait]
impl<L: Layer> Backend for Layered<L> {
    fn provider(&self) -> &'static str {
        self.inner.provider()
    }

    fn capabilities(&self) -> Capabilities {
        self.layer.capabilities(self.inner.capabilities())
    }

    fn unreachable(&self) -> Option<String> {
        self.layer.unreachable(self.inner.unreachable())
    }

    async fn account(&self) -> Result<String, BackendError> {
        match self.dispatch(Call::Account).await? {
            Answer::Account(a) => Ok(a),
            other => Err(mismatch(Op::Account, &other)),
        }
    }

    async fn list(&self, kind: &'static str, region: &str) -> Result<Vec<Listed>, BackendError> {
        match self.dispatch(Call::List { kind, region }).await? {
            Answer::List(l) => Ok(l),
            other => Err(mismatch(Op::List, &other)),
        }
    }

    async fn read(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<Sighting, BackendError> {
        let call = Call::Read {
            kind,
            region,
            handle,
        };
        match self.dispatch(call).await? {
            Answer::Read(s) => Ok(s),
            other => Err(mismatch(Op::Read, &other)),
        }
    }

    async fn create(
        &self,
        kind: &'static str,
        region: &str,
        name: &str,
        spec: SettledSpec<'_>,
        marker: &Marker,
    ) -> Result<Written, BackendError> {
        let call = Call::Create {
            kind,
            region,
            name,
            spec,
            marker,
        };
        match self.dispatch(call).await? {
            Answer::Written(w) => Ok(w),
            other => Err(mismatch(Op::Create, &other)),
        }
    }

    async fn update(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
        spec: SettledSpec<'_>,
    ) -> Result<Written, BackendError> {
        let call = Call::Update {
            kind,
            region,
            handle,
            spec,
        };
        match self.dispatch(call).await? {
            Answer::Written(w) => Ok(w),
            other => Err(mismatch(Op::Update, &other)),
        }
    }

    async fn delete(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<(), BackendError> {
        let call = Call::Delete {
            kind,
            region,
            handle,
        };
        match self.dispatch(call).await? {
            Answer::Deleted => Ok(()),
            other => Err(mismatch(Op::Delete, &other)),
        }
    }

    async fn ownership(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
    ) -> Result<RawTags, BackendError> {
        let call = Call::Ownership {
            kind,
            region,
            handle,
        };
        match self.dispatch(call).await? {
            Answer::Ownership(t) => Ok(t),
            other => Err(mismatch(Op::Ownership, &other)),
        }
    }

    async fn secret_value(&self, region: &str, handle: &str) -> Result<SecretString, BackendError> {
        match self.dispatch(Call::SecretValue { region, handle }).await? {
            Answer::SecretValue(v) => Ok(v),
            other => Err(mismatch(Op::SecretValue, &other)),
        }
    }

    async fn mark(
        &self,
        kind: &'static str,
        region: &str,
        handle: &str,
        marker: &Marker,
    ) -> Result<(), BackendError> {
        let call = Call::Mark {
            kind,
            region,
            handle,
            marker,
        };
        match self.dispatch(call).await? {
            Answer::Marked => Ok(()),
            other => Err(mismatch(Op::Mark, &other)),
        }
    }

    async fn prerequisites(
        &self,
        kind: &'static str,
        region: &str,
    ) -> Result<Vec<Prerequisite>, BackendError> {
        match self.dispatch(Call::Prerequisites { kind, region }).await? {
            Answer::Prerequisites(p) => Ok(p),
            other => Err(mismatch(Op::Prerequisites, &other)),
        }
    }
}

#[cfg(test)]
mod tests;
