//! Settling: from an authoring spec to the provider spec a backend receives.
//!
//! An authoring spec holds [`Partial`](crate::Partial) fields, [`Expr`](crate::Expr)
//! values and [`Key`](crate::Key)s. Settling evaluates every expression and replaces
//! every key by the [`Handle`](crate::Handle) the cloud assigned. When something it needs
//! does not exist yet, it answers [`NotYet`] with the list of what is missing: a
//! scheduling fact (create those first), not an error.
//!
//! [`Settle`] names the step. Every field of a spec settles (a
//! [`Field`](crate::sdk::Field) is a `Settle`), and so does every spec, since a spec is
//! a field whose own fields settle one by one.

use std::collections::HashMap;
use std::fmt;

use serde::Serialize;

use crate::SecretString;
use crate::env::{Env, NotYet, ObservedValue};
use crate::key::KeyId;

/// The settling step: from what an author wrote (expressions, references, fields left
/// unsaid) to the value a backend receives.
///
/// # Behavior
/// - Every expression is evaluated and every reference replaced by the handle the
///   cloud assigned; an unsaid field stays unsaid.
/// - When something it reads does not exist yet, the answer is [`NotYet`] listing
///   *every* missing dependency, not only the first: a scheduling fact, never an error.
/// - A secret's value is read only where the environment holds it (on the apply path);
///   a plan settles without secret values.
///
/// `#[derive(Spec)]` implements it for a spec; the built-in field types (`Expr<T>`,
/// `Partial<F>`, `Option<F>`, `Key<K>`, `Vec<F>`, `BTreeMap<String, F>`) implement it
/// for their own values.
pub trait Settle {
    /// What it settles into.
    type Settled: Clone + fmt::Debug + PartialEq + Serialize + Send + Sync + 'static;

    /// Settles in `env`, or lists what it still waits for.
    fn settle(&self, env: &dyn Env) -> Result<Self::Settled, NotYet>;
}

/// An environment held in maps, filled as resources come to exist.
#[derive(Default)]
pub struct MapEnv {
    handles: HashMap<KeyId, String>,
    observed: HashMap<KeyId, Box<ObservedValue>>,
    secrets: HashMap<KeyId, SecretString>,
}

impl fmt::Debug for MapEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MapEnv")
            .field("handles", &self.handles)
            .field("observed", &self.observed.len())
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

impl MapEnv {
    /// An empty environment.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a resource's handle.
    pub fn set_handle(&mut self, key: KeyId, handle: impl Into<String>) {
        self.handles.insert(key, handle.into());
    }

    /// Records a resource's observed state.
    pub fn set_observed<O: Send + Sync + 'static>(&mut self, key: KeyId, observed: O) {
        self.observed.insert(key, Box::new(observed));
    }

    /// Records a secret's value (apply path only).
    pub fn set_secret(&mut self, key: KeyId, value: SecretString) {
        self.secrets.insert(key, value);
    }
}

impl Env for MapEnv {
    fn handle(&self, key: KeyId) -> Option<String> {
        self.handles.get(&key).cloned()
    }
    fn observed(&self, key: KeyId) -> Option<&ObservedValue> {
        self.observed.get(&key).map(|b| &**b)
    }
    fn secret(&self, key: KeyId) -> Option<SecretString> {
        self.secrets.get(&key).cloned()
    }
}

/// Settles a spec in an environment: [`Settle::settle`], as a function.
pub fn settle<F: Settle>(spec: &F, env: &dyn Env) -> Result<F::Settled, NotYet> {
    spec.settle(env)
}
