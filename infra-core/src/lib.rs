#![doc = include_str!("../README.md")]

// The derive macros name this crate as `::infra_core`, including from inside it.
extern crate self as infra_core;

mod apply_result;
mod backend;
#[cfg(feature = "cli")]
pub mod cli;
mod clock;
mod diverge;
pub mod engine;
mod env;
mod error;
mod expr;
mod field;
mod fleet;
mod graph;
mod key;
mod kind;
pub mod kinds;
mod merge;
pub mod names;
pub mod output;
mod partial;
mod plan;
pub mod prelude;
mod provider;
pub mod records;
mod refine;
pub mod sdk;
mod secret;
mod settle;
mod status;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod watch;

// The names the crate is known by, at its root: the model's laws (`Refines`, `Merge`),
// what a plan assigns (`Status`, `Plan`), the settling step (`Settle`), what an apply
// answers (`ApplyResult`) and what a provider implements (`Backend`). The faces
// (`prelude`, `sdk`, `engine`) re-export them too.
pub use apply_result::ApplyResult;
pub use backend::Backend;
pub use merge::Merge;
pub use plan::Plan;
pub use refine::Refines;
pub use settle::Settle;
pub use status::Status;

// Crate-internal shorthands (`crate::Fleet`, …); the runner (feature `cli`) uses some
// of them alone, so without it they may go unused.
#[cfg_attr(not(feature = "cli"), allow(unused_imports))]
pub(crate) use apply_result::{Change, NotAttemptedReason, Step, Subject};
#[cfg_attr(not(feature = "cli"), allow(unused_imports))]
pub(crate) use backend::{Backends, Listed, Marker, Ownership, Unreachable};
#[cfg_attr(not(feature = "cli"), allow(unused_imports))]
pub(crate) use clock::{Clock, SystemClock};
#[cfg_attr(not(feature = "cli"), allow(unused_imports))]
pub(crate) use diverge::{Divergence, Repair, repair_of};
#[cfg_attr(not(feature = "cli"), allow(unused_imports))]
pub(crate) use engine::{ApplyError, Engine, Options, Outcome, PlanReport, PlannedChange};
#[cfg_attr(not(feature = "cli"), allow(unused_imports))]
pub(crate) use env::{Dep, Env, NotYet};
#[cfg_attr(not(feature = "cli"), allow(unused_imports))]
pub(crate) use error::{BackendError, ErrorKind};
#[cfg_attr(not(feature = "cli"), allow(unused_imports))]
pub(crate) use expr::{Expr, Value};
#[cfg_attr(not(feature = "cli"), allow(unused_imports))]
pub(crate) use field::{Field, FieldInfo, Mutability};
#[cfg_attr(not(feature = "cli"), allow(unused_imports))]
pub(crate) use fleet::{CheckReport, Fleet, KindMeta, Problem};
#[cfg_attr(not(feature = "cli"), allow(unused_imports))]
pub(crate) use key::{Handle, Key, ResourceRef};
#[cfg_attr(not(feature = "cli"), allow(unused_imports))]
pub(crate) use kind::{Kind, Spec, default_name_rule};
#[cfg_attr(not(feature = "cli"), allow(unused_imports))]
pub(crate) use merge::Conflict;
#[cfg_attr(not(feature = "cli"), allow(unused_imports))]
pub(crate) use partial::Partial;
#[cfg_attr(not(feature = "cli"), allow(unused_imports))]
pub(crate) use provider::{
    Aws, AwsRegion, Gcp, GcpRegion, Provider, Region, Scaleway, ScalewayRegion, Supports,
};
#[cfg_attr(not(feature = "cli"), allow(unused_imports))]
pub(crate) use records::{
    CacheEntry, FileStore, Ledger, LedgerRow, LockError, LockGuard, RecordError, RecordStore,
    lock_fleet,
};
#[cfg_attr(not(feature = "cli"), allow(unused_imports))]
pub(crate) use secret::SecretString;

/// What the derive macros of `infra-derive` name in the code they write: stable paths
/// that do not depend on which face re-exports an item.
#[doc(hidden)]
pub mod __private {
    pub use crate::env::{Dep, Env, NotYet};
    pub use crate::expr::{__compose_secret, __interp, Hole, PlainHole, SecretHole};
    pub use crate::field::{Field, FieldInfo, Mutability};
    pub use crate::key::Handle;
    pub use crate::kind::{Kind, Spec};
    pub use crate::merge::{Conflict, Merge};
    pub use crate::partial::Partial;
    pub use crate::refine::Refines;
    pub use crate::settle::Settle;
    pub use serde;
}

#[cfg(test)]
mod tests;
