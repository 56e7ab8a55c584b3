//! What settling reads, and from where: the dependencies a spec has on other resources
//! of its fleet ([`Dep`]), the environment that answers them ([`Env`]), and what is
//! missing when it cannot ([`NotYet`]).
//!
//! Expressions ([`crate::expr`]) and settling ([`crate::settle()`]) both speak this
//! vocabulary; neither depends on the other for it.

use std::any::Any;
use std::fmt;

use crate::SecretString;
use crate::key::{KeyId, render_key};

/// One thing an expression or a reference reads from another resource.
///
/// Ordering treats every variant as the same edge; the distinction says *what* settling
/// will need from the dependency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dep {
    /// The handle the cloud assigned to the resource (a `Key` field).
    Handle(KeyId),
    /// The resource's observed state (an [`Expr::observed`](crate::Expr::observed)).
    Observed(KeyId),
    /// The value of one of the fleet's secrets (an [`Expr::secret`](crate::Expr::secret)).
    Secret(KeyId),
}

impl Dep {
    /// The resource depended upon.
    pub fn key(&self) -> KeyId {
        match self {
            Dep::Handle(k) | Dep::Observed(k) | Dep::Secret(k) => *k,
        }
    }
}

/// Observed values held by an environment are type-erased.
pub type ObservedValue = dyn Any + Send + Sync;

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
