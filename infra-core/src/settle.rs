//! Settling: from an authoring spec to the provider spec a backend receives.
//!
//! An authoring spec holds [`Partial`](crate::Partial) fields, [`Expr`](crate::Expr)
//! values and [`Key`](crate::Key)s. Settling evaluates every expression and replaces
//! every key by the [`Handle`](crate::Handle) the cloud assigned. When something it needs
//! does not exist yet, it answers [`NotYet`] with the list of what is missing: a
//! scheduling fact (create those first), not an error.

use std::collections::HashMap;
use std::fmt;

use crate::expr::ObservedValue;
use crate::key::{KeyId, render_key};
use crate::{Dep, Field, SecretString};

/// What settling can read: handles, observed states and secret values of the fleet's
/// resources, by key.
///
/// The planning path uses an environment that holds no secret values at all; only the
/// apply path fills them in, one create or update at a time.
pub trait Env {
    /// The handle the cloud assigned to the resource, if it exists.
    fn handle(&self, key: KeyId) -> Option<String>;
    /// The resource's observed state, if it exists and was observed.
    fn observed(&self, key: KeyId) -> Option<&ObservedValue>;
    /// A secret's value, on the apply path only.
    fn secret(&self, key: KeyId) -> Option<SecretString>;
}

/// An environment in which nothing exists yet.
#[derive(Clone, Copy, Debug, Default)]
pub struct Nothing;

impl Env for Nothing {
    fn handle(&self, _: KeyId) -> Option<String> {
        None
    }
    fn observed(&self, _: KeyId) -> Option<&ObservedValue> {
        None
    }
    fn secret(&self, _: KeyId) -> Option<SecretString> {
        None
    }
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

/// Settling could not finish: these dependencies do not exist (or were not read) yet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NotYet {
    /// What is missing, in order of appearance, without repeats.
    pub missing: Vec<Dep>,
}

impl NotYet {
    /// One missing dependency.
    pub fn one(dep: Dep) -> Self {
        NotYet { missing: vec![dep] }
    }

    /// Keeps a settled value, or records what it was missing and returns `None`.
    pub fn take<T>(&mut self, result: Result<T, NotYet>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                for dep in e.missing {
                    if !self.missing.contains(&dep) {
                        self.missing.push(dep);
                    }
                }
                None
            }
        }
    }

    /// Whether nothing is missing.
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty()
    }
}

impl fmt::Display for NotYet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("waiting for ")?;
        for (i, dep) in self.missing.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            let what = match dep {
                Dep::Handle(_) => "handle",
                Dep::Observed(_) => "observed state",
                Dep::Secret(_) => "secret value",
            };
            write!(f, "the {what} of {}", render_key(dep.key()))?;
        }
        Ok(())
    }
}

/// Settles a spec in an environment.
pub fn settle<F: Field>(spec: &F, env: &dyn Env) -> Result<F::Settled, NotYet> {
    spec.settle(env)
}
