#![doc = include_str!("../README.md")]

/// Law checkers for `Refines` and `Merge`, and the small-domain strategies they draw
/// from.
pub mod laws {
    pub use infra_core::testing::{
        Sample, check_merge_laws, check_refines_laws, merge_laws, refines_laws,
    };
}

pub mod check;
pub mod conformance;
pub mod evidence;
#[cfg(feature = "gcp")]
pub mod gcp;
#[cfg(any(
    feature = "gcp",
    feature = "scaleway",
    feature = "relay",
    feature = "transit"
))]
mod http;
#[cfg(feature = "relay")]
pub mod relay;
#[cfg(feature = "scaleway")]
pub mod scaleway;
pub mod sim;
pub mod storm;
pub mod strategy;
#[cfg(feature = "talos")]
pub mod talos;
#[cfg(feature = "transit")]
pub mod transit;

pub use check::{FleetCheck, check_fleet};
