//! Everything a fleet author needs, in one import.
//!
//! ```
//! use infra_core::prelude::*;
//! use infra_core::kinds::{ObjectStore, Secrets};
//!
//! let mut fleet = Fleet::builder("shop");
//! let paris = AwsRegion::EuWest3;
//! fleet.declare(paris, "shop-assets", ObjectStore::new());
//! fleet.declare(paris, "api-key", Secrets::generated(32));
//! let fleet = fleet.build().expect("every offline check passes");
//! assert_eq!(fleet.name(), "shop");
//! ```
//!
//! The kinds are in [`kinds`](crate::kinds), the runner for a binary in
//! [`cli`](crate::cli) (feature `cli`). A provider author wants [`sdk`](crate::sdk); an
//! embedder driving the engine directly wants [`engine`](crate::engine).

pub use crate::backend::Backends;
pub use crate::expr::{Expr, Value};
pub use crate::fleet::{
    CheckReport, Exclusion, Fleet, FleetBuilder, Problem, Released, ResourceView,
};
pub use crate::key::{Handle, Key, ResourceRef};
pub use crate::kind::{Kind, Spec};
pub use crate::merge::Merge;
pub use crate::partial::Partial;
pub use crate::provider::{
    Aws, AwsRegion, Gcp, GcpRegion, Provider, Region, Scaleway, ScalewayRegion, Supports,
};
pub use crate::refine::Refines;
pub use crate::secret::SecretString;
pub use crate::status::Status;
pub use crate::{compose_secret, interp};
pub use infra_derive::Spec;
