#![doc = include_str!("../README.md")]

// The derive macros name this crate as `::infra_core`, including from inside it.
extern crate self as infra_core;

pub mod apply_result;
pub mod backend;
#[cfg(feature = "cli")]
pub mod cli;
pub mod clock;
pub mod diverge;
pub mod engine;
pub mod env;
pub mod error;
pub mod expr;
pub mod field;
pub mod fleet;
pub mod graph;
pub mod key;
pub mod kind;
pub mod kinds;
pub mod merge;
pub mod partial;
pub mod plan;
pub mod prelude;
pub mod provider;
pub mod records;
pub mod refine;
pub mod sdk;
pub mod secret;
pub mod settle;
pub mod status;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use apply_result::{
    Applied, ApplyResult, Change, Failed, NotAttempted, NotAttemptedReason, Pruned, Step, Subject,
};
pub use backend::{
    Backend, Backends, Capabilities, LEGACY_MARKER_VALUE, Listed, MARKER_KEY, Marker, Ownership,
    RawTags, RetryPolicy, SettledSpec, Sighting, Unreachable, with_retries,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use diverge::{Divergence, Repair, divergence, repair_of};
pub use engine::{
    ApplyError, Engine, Observed, Options, Outcome, PlanReport, PlannedChange, Progress,
};
pub use env::{Dep, Env, NotYet, Nothing, ObservedValue};
pub use error::{BackendError, ErrorKind};
pub use expr::{Expr, Value};
pub use field::{Field, FieldInfo, Mutability};
pub use fleet::{CheckReport, Fleet, FleetBuilder, KindMeta, Problem, Released, ResourceView};
pub use infra_derive::Spec;
pub use key::{Handle, Key, KeyId, ResourceRef};
pub use kind::{Kind, Spec, default_name_rule};
pub use merge::{Conflict, Merge, Side, WriterConflict, merge_writers};
pub use partial::Partial;
pub use plan::{ForeignKey, Plan, PlanConflict};
pub use provider::{
    Aws, AwsRegion, Gcp, GcpRegion, Provider, Region, Scaleway, ScalewayRegion, Supports,
};
pub use records::{
    CacheEntry, FileStore, Ledger, LedgerRow, LockError, LockGuard, LockHolder, MemoryStore,
    RecordError, RecordStore, lock_fleet,
};
pub use refine::Refines;
pub use secret::SecretString;
pub use settle::{MapEnv, settle};
pub use status::Status;

/// What the derive macros of `infra-derive` name in the code they write: stable paths
/// that do not depend on which face re-exports an item.
#[doc(hidden)]
pub mod __private {
    pub use crate::env::{Dep, Env, NotYet};
    pub use crate::field::{Field, FieldInfo, Mutability};
    pub use crate::key::Handle;
    pub use crate::kind::{Kind, Spec};
    pub use crate::merge::{Conflict, Merge};
    pub use crate::partial::Partial;
    pub use crate::refine::Refines;
    pub use serde;
}

#[cfg(test)]
mod tests;
