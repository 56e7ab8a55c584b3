//! The Talos machine-API and COSI message types, generated at build time from the
//! protobuf subset in `proto/`, and the remote methods this crate calls.
//!
//! Only messages are generated — no client or server — so every remote call in this
//! crate goes through [`crate::rpc`], which names the method from [`methods`].

#[allow(
    missing_docs,
    unreachable_pub,
    dead_code,
    clippy::all,
    clippy::pedantic,
    reason = "generated code"
)]
mod generated {
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

pub(crate) use generated::{cosi, machine};

#[cfg(test)]
pub(crate) use generated::common;

/// The compiled descriptor set of every `.proto` file (imports included), to
/// enumerate the methods the protocol declares.
#[cfg(test)]
pub(crate) const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/talos_api_descriptor.bin"));

/// The gRPC paths of the remote methods this crate calls.
pub(crate) mod methods {
    /// `machine.MachineService/Version`.
    pub(crate) const VERSION: &str = "/machine.MachineService/Version";
    /// `machine.MachineService/ApplyConfiguration`.
    pub(crate) const APPLY_CONFIGURATION: &str = "/machine.MachineService/ApplyConfiguration";
    /// `cosi.resource.State/Get`.
    pub(crate) const STATE_GET: &str = "/cosi.resource.State/Get";
    /// `cosi.resource.State/List`.
    pub(crate) const STATE_LIST: &str = "/cosi.resource.State/List";
}
