//! Kinds: the nominal axis. Which sort of thing a resource is.
//!
//! The set of kinds is open: a kind is any type implementing [`Kind`], usually by
//! `#[derive(Spec)]` with `#[spec(kind = "…", observed = …)]`, and a provider declares
//! which kinds it realises with [`Supports`](crate::Supports). A custom provider crate
//! adds kinds without touching this crate:
//!
//! ```
//! use infra_core::{prelude::Expr, prelude::Fleet, prelude::Partial, prelude::Provider, prelude::Region, prelude::Spec, prelude::Supports};
//!
//! // A provider of its own, with its own regions...
//! #[derive(Clone, Copy, Debug, Default)]
//! pub struct Acme;
//! #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
//! pub enum AcmeRegion { Moon }
//! impl Provider for Acme { const ID: &'static str = "acme"; type Region = AcmeRegion; }
//! impl Region for AcmeRegion {
//!     type Provider = Acme;
//!     fn code(&self) -> &'static str { "moon-1" }
//!     fn all() -> &'static [Self] { &[AcmeRegion::Moon] }
//! }
//!
//! // ...and a kind of its own.
//! #[derive(Clone, Debug, PartialEq, Spec)]
//! #[spec(kind = "rocket", observed = RocketObserved)]
//! pub struct Rocket {
//!     #[spec(replace)]
//!     pub stages: Expr<u32>,
//!     pub payload: Partial<Expr<String>>,
//! }
//! #[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
//! pub struct RocketObserved { pub serial: String }
//! impl Supports<Rocket> for Acme {}
//!
//! let mut fleet = Fleet::builder("space");
//! fleet.declare(AcmeRegion::Moon, "saturn", Rocket { stages: 3.into(), payload: Partial::Unknown });
//! assert_eq!(fleet.build().unwrap().keys().len(), 1);
//! ```
//!
//! A kind is a spec: every behaviour a kind needs (refinement, merge, dependencies,
//! settling, its divergence table) must exist, or the kind does not compile.
//!
//! ```compile_fail
//! use infra_core::prelude::Kind;
//! #[derive(Clone, Debug)]
//! struct Rocket;
//! impl Kind for Rocket {
//!     const ID: &'static str = "rocket";
//!     type Observed = String;
//! }
//! ```

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Env, Field, FieldInfo, Value};

/// A struct of spec fields, with its divergence table.
pub trait Spec: Field {
    /// Every field, in declaration order, with how a difference in it is repaired.
    const FIELDS: &'static [FieldInfo];

    /// The configuration a cloud reports: the settled fields, each `Unknown` unless
    /// said. A backend's `read` fills it in; the differ compares it with the target.
    type Reported: Clone + fmt::Debug + Default + PartialEq + Serialize + Send + Sync + 'static;

    /// Settles what can be settled now, leaving `Unknown` every field that waits for
    /// something (a handle not assigned yet, a secret only the apply path reads). The
    /// differ compares this against what the cloud reports: an unknown target field is
    /// not compared.
    fn settle_lenient(&self, env: &dyn Env) -> Self::Reported;
}

/// A kind of resource. The type is the kind's authoring spec.
pub trait Kind: Spec {
    /// The kind's id, camelCase, unique among the kinds in use (`objectStore`).
    const ID: &'static str;

    /// What the cloud computes and reports about a resource of this kind (an ARN, an
    /// endpoint). It is cached between runs, so it must never hold a secret value.
    type Observed: Value + DeserializeOwned;

    /// Checks what the type cannot hold, before any network call. Each problem is a
    /// sentence naming the field and what to do.
    fn check(&self, problems: &mut Vec<String>) {
        let _ = problems;
    }

    /// Whether `name` is acceptable for a resource of this kind.
    fn check_name(name: &str) -> Result<(), String> {
        default_name_rule(name)
    }
}

/// The name rule shared by most kinds: 1 to 63 characters of lowercase ASCII letters,
/// digits and `-`, starting with a letter and not ending with `-`.
pub fn default_name_rule(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 63 {
        return Err(format!(
            "must be 1 to 63 characters long (it has {})",
            name.len()
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err("must start with a lowercase letter".into());
    }
    if name.ends_with('-') {
        return Err("must not end with `-`".into());
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "may hold only lowercase letters, digits and `-` (found {bad:?})"
        ));
    }
    Ok(())
}
