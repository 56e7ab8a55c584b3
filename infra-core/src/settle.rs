//! Settling: from an authoring spec to the provider spec a backend receives.
//!
//! An authoring spec holds [`Partial`](crate::Partial) fields, [`Expr`](crate::Expr)
//! values and [`Key`](crate::Key)s. Settling evaluates every expression and replaces
//! every key by the [`Handle`](crate::Handle) the cloud assigned. When something it needs
//! does not exist yet, it answers [`NotYet`] with the list of what is missing: a
//! scheduling fact (create those first), not an error.

use std::collections::HashMap;
use std::fmt;

use crate::env::{Env, NotYet, ObservedValue};
use crate::key::KeyId;
use crate::{Field, SecretString};

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

/// Settles a spec in an environment.
pub fn settle<F: Field>(spec: &F, env: &dyn Env) -> Result<F::Settled, NotYet> {
    spec.settle(env)
}
