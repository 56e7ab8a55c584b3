//! A simulated Talos node for tests: the Talos machine API (`Version`,
//! `ApplyConfiguration`) and COSI resource state (`Get`, `List`) over real gRPC with
//! mutual TLS, on `127.0.0.1`, with state and faults set by the test.
//!
//! ```no_run
//! # async fn demo() -> Result<(), infra_testkit::talos::SimError> {
//! use infra_testkit::talos::{ApplyFault, Landing, TalosSim};
//!
//! let sim = TalosSim::builder().node_id("node-a").start().await?;
//! let admin = sim.pki().admin_client()?;
//! let dir = std::env::temp_dir();
//! let talosconfig = sim.write_talosconfig(&dir, &admin)?;
//! sim.fail_next_apply(ApplyFault::Hold(Landing::OnRelease));
//! // ... drive a client against `sim.node_address()` with `talosconfig` ...
//! sim.release_held();
//! sim.shutdown().await?;
//! # let _ = talosconfig;
//! # Ok(())
//! # }
//! ```
//!
//! The protocol code is generated from the `.proto` subset kept in the
//! `infra-talos` crate (`infra-talos/proto`); this crate does not depend on
//! `infra-talos`.

use std::fmt;

mod conn;
mod pki;
mod server;
mod state;

pub use pki::{ADMIN_ROLE, ClientCert, TestPki};
pub use server::{TalosSim, TalosSimBuilder};
pub use state::{
    ApplyFault, ApplyMode, Landing, NodeFacts, ReadFault, RecordedCall, RecordedRequest,
    SimResource, config_digest_hex,
};

/// The protocol messages and services, generated at build time.
#[allow(
    missing_docs,
    unreachable_pub,
    dead_code,
    clippy::all,
    clippy::pedantic,
    reason = "generated code"
)]
pub(crate) mod api {
    pub(crate) mod common {
        include!(concat!(env!("OUT_DIR"), "/common.rs"));
    }
    pub(crate) mod machine {
        include!(concat!(env!("OUT_DIR"), "/machine.rs"));
    }
    pub(crate) mod cosi {
        pub(crate) mod resource {
            include!(concat!(env!("OUT_DIR"), "/cosi.resource.rs"));
        }
    }
}

/// Why the simulator could not start or stop.
#[derive(Debug)]
pub enum SimError {
    /// Generating a certificate failed.
    Certificate(rcgen::Error),
    /// Binding or accepting failed.
    Io(std::io::Error),
    /// The gRPC server failed.
    Transport(tonic::transport::Error),
    /// The server task panicked or was cancelled.
    Task(String),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Certificate(error) => {
                write!(f, "test certificate generation failed: {error}")
            }
            SimError::Io(error) => write!(f, "simulated node I/O failed: {error}"),
            SimError::Transport(error) => write!(f, "simulated node server failed: {error}"),
            SimError::Task(error) => write!(f, "simulated node server task failed: {error}"),
        }
    }
}

impl std::error::Error for SimError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SimError::Certificate(error) => Some(error),
            SimError::Io(error) => Some(error),
            SimError::Transport(error) => Some(error),
            SimError::Task(_) => None,
        }
    }
}

impl From<rcgen::Error> for SimError {
    fn from(error: rcgen::Error) -> Self {
        SimError::Certificate(error)
    }
}

impl From<std::io::Error> for SimError {
    fn from(error: std::io::Error) -> Self {
        SimError::Io(error)
    }
}

impl From<tonic::transport::Error> for SimError {
    fn from(error: tonic::transport::Error) -> Self {
        SimError::Transport(error)
    }
}

#[cfg(test)]
mod tests;
