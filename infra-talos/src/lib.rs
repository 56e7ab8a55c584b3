#![doc = include_str!("../README.md")]

#[cfg(feature = "serve")]
pub mod acts;
pub mod contract;

pub mod attempt;
mod civil;
pub mod digest;
#[cfg(feature = "identity")]
pub mod identity;
pub mod keys;
pub mod observation;
#[cfg(feature = "grpc")]
mod redact;
#[cfg(feature = "serve")]
pub mod serve;
pub mod store;

#[cfg(feature = "grpc")]
mod api;
#[cfg(feature = "grpc")]
pub mod backend;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "grpc")]
pub mod connect;
#[cfg(feature = "grpc")]
pub mod controller;
#[cfg(feature = "grpc")]
pub mod dispatch;
#[cfg(feature = "grpc")]
pub mod machine_config;
#[cfg(feature = "grpc")]
pub mod observe;
#[cfg(feature = "grpc")]
mod rpc;
#[cfg(feature = "grpc")]
pub mod talosconfig;

#[cfg(all(test, feature = "grpc"))]
mod tests;

pub use attempt::{CommittedAttempt, ConfigArtifact};
pub use digest::{Digest, config_digest};
pub use observation::{
    ClusterInfo, MachineConfigState, MachineIdentity, MissingReason, Observation, Read,
    ResourceVersion, SystemInformation,
};

#[cfg(feature = "grpc")]
pub use connect::{ConnectOptions, NodeAddress, NodeChannel};
#[cfg(feature = "grpc")]
pub use dispatch::{ApplyResponse, Delivery, DispatchClient, Dispatched, TransportOutcome};
#[cfg(feature = "grpc")]
pub use observe::ObservationClient;
#[cfg(feature = "grpc")]
pub use talosconfig::{Credentials, TalosConfig, TalosContext};
