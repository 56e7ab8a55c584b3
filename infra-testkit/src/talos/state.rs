//! The simulated node's in-memory state, its faults, and the record of requests.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::time::Duration;

use sha2::{Digest as _, Sha256};
use tokio::sync::oneshot;

/// What a simulated node reports about itself. `Debug` shows the configuration's
/// length and digest, never its bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct NodeFacts {
    /// The node's hostname, reported in response metadata.
    pub hostname: String,
    /// The SMBIOS UUID (`SystemInformations.hardware.talos.dev`).
    pub smbios_uuid: String,
    /// The Talos node ID (`Identities.cluster.talos.dev`).
    pub node_id: String,
    /// The Talos cluster ID (`Infos.cluster.talos.dev`).
    pub cluster_id: String,
    /// The cluster name (`Infos.cluster.talos.dev`).
    pub cluster_name: String,
    /// The running Talos version tag.
    pub talos_version: String,
    /// The SMBIOS manufacturer.
    pub manufacturer: String,
    /// The SMBIOS product name.
    pub product_name: String,
    /// The SMBIOS serial number.
    pub serial_number: String,
    /// The machine configuration document.
    pub config: Vec<u8>,
}

impl Default for NodeFacts {
    fn default() -> Self {
        NodeFacts {
            hostname: "talos-sim-1".to_owned(),
            smbios_uuid: "4c4c4544-0042-3510-8052-b4c04f4e4d31".to_owned(),
            node_id: "8yNqFhX6Yv0n2GgJzLrU5pW3cQk1sTb7dE9aM4oHiRf".to_owned(),
            cluster_id: "Sx1mDq0d4F3n8rYzK2pVbW6cLgHtJ9eQuA5oN7iTkUs=".to_owned(),
            cluster_name: "sim".to_owned(),
            talos_version: "v1.10.4".to_owned(),
            manufacturer: "Simulated".to_owned(),
            product_name: "Talos node simulator".to_owned(),
            serial_number: "SIM-0001".to_owned(),
            config: b"version: v1alpha1\nmachine:\n  type: worker\n".to_vec(),
        }
    }
}

impl fmt::Debug for NodeFacts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeFacts")
            .field("hostname", &self.hostname)
            .field("smbios_uuid", &self.smbios_uuid)
            .field("node_id", &self.node_id)
            .field("cluster_id", &self.cluster_id)
            .field("cluster_name", &self.cluster_name)
            .field("talos_version", &self.talos_version)
            .field("config_len", &self.config.len())
            .field("config_digest", &config_digest_hex(&self.config))
            .finish_non_exhaustive()
    }
}

/// A fault the next (or every) `ApplyConfiguration` meets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyFault {
    /// The node keeps the request without answering and lands it later, as told by
    /// the [`Landing`]. Once landed, the configuration changes and the version is
    /// bumped; the (late) answer goes to a client that has usually given up.
    Hold(Landing),
    /// The node lands the apply, then drops the connection without answering: the
    /// client sees a transport error while the configuration did change.
    LoseResponse,
    /// The node refuses with `InvalidArgument` carrying this message, before any
    /// change.
    InvalidArgument(String),
    /// The node answers `Unavailable`, before any change.
    Unavailable,
    /// The node answers with this status code and message, before any change.
    Status(tonic::Code, String),
}

/// When a held apply lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Landing {
    /// When the test calls [`TalosSim::release_held`](super::TalosSim::release_held).
    OnRelease,
    /// After this delay from the request's arrival (real time).
    After(Duration),
}

/// A fault a read of one resource meets, until cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFault {
    /// Answer `PermissionDenied`.
    PermissionDenied,
    /// Answer `NotFound`.
    NotFound,
    /// Answer `Unavailable`.
    Unavailable,
    /// Answer with something that is not the value: a spec that does not parse for
    /// the identity, cluster info and system information, no resource at all for
    /// the machine configuration, no message for the version.
    Malformed,
    /// Cut the client's connection instead of answering: the client sees a
    /// transport error, and its next call needs a new connection.
    ConnectionLost,
}

/// What a read fault can be set on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SimResource {
    /// `MachineService/Version`.
    Version,
    /// `config` / `MachineConfigs.config.talos.dev` / `v1alpha1`.
    MachineConfig,
    /// `cluster` / `Identities.cluster.talos.dev` / `local`.
    Identity,
    /// `cluster` / `Infos.cluster.talos.dev` / `current`.
    ClusterInfo,
    /// `hardware` / `SystemInformations.hardware.talos.dev` / `systeminformation`.
    SystemInformation,
}

impl SimResource {
    /// The COSI resources the simulator serves, with their coordinates
    /// (namespace, type, id).
    pub const RESOURCES: [(SimResource, &'static str, &'static str, &'static str); 4] = [
        (
            SimResource::MachineConfig,
            "config",
            "MachineConfigs.config.talos.dev",
            "v1alpha1",
        ),
        (
            SimResource::Identity,
            "cluster",
            "Identities.cluster.talos.dev",
            "local",
        ),
        (
            SimResource::ClusterInfo,
            "cluster",
            "Infos.cluster.talos.dev",
            "current",
        ),
        (
            SimResource::SystemInformation,
            "hardware",
            "SystemInformations.hardware.talos.dev",
            "systeminformation",
        ),
    ];

    pub(crate) fn find(
        namespace: &str,
        resource_type: &str,
    ) -> Option<(SimResource, &'static str)> {
        SimResource::RESOURCES
            .iter()
            .find(|(_, ns, ty, _)| *ns == namespace && *ty == resource_type)
            .map(|(resource, _, _, id)| (*resource, *id))
    }
}

/// The apply mode of a recorded request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyMode {
    /// `REBOOT`.
    Reboot,
    /// `AUTO`.
    Auto,
    /// `NO_REBOOT`.
    NoReboot,
    /// `STAGED`.
    Staged,
    /// `TRY`.
    Try,
    /// A value outside the enumeration.
    Unrecognised(i32),
}

impl ApplyMode {
    pub(crate) fn from_wire(value: i32) -> Self {
        match value {
            0 => ApplyMode::Reboot,
            1 => ApplyMode::Auto,
            2 => ApplyMode::NoReboot,
            3 => ApplyMode::Staged,
            4 => ApplyMode::Try,
            other => ApplyMode::Unrecognised(other),
        }
    }
}

/// One call the simulated node received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordedCall {
    /// `MachineService/Version`.
    Version,
    /// `MachineService/ApplyConfiguration`. The configuration itself is not kept:
    /// only its digest (SHA-256 of the bytes with trailing line breaks normalised to
    /// one `\n`, lowercase hex — the same as `infra_talos::digest::config_digest`).
    ApplyConfiguration {
        /// The requested mode.
        mode: ApplyMode,
        /// Whether the request was a dry run.
        dry_run: bool,
        /// The digest of the configuration sent.
        data_digest: String,
    },
    /// `State/Get`.
    Get {
        /// The namespace asked for.
        namespace: String,
        /// The resource type asked for.
        resource_type: String,
        /// The resource id asked for.
        id: String,
    },
    /// `State/List`.
    List {
        /// The namespace asked for.
        namespace: String,
        /// The resource type asked for.
        resource_type: String,
    },
}

impl RecordedCall {
    /// The gRPC method path of the call, e.g. `/machine.MachineService/Version`.
    pub fn method(&self) -> &'static str {
        match self {
            RecordedCall::Version => "/machine.MachineService/Version",
            RecordedCall::ApplyConfiguration { .. } => "/machine.MachineService/ApplyConfiguration",
            RecordedCall::Get { .. } => "/cosi.resource.State/Get",
            RecordedCall::List { .. } => "/cosi.resource.State/List",
        }
    }

    /// Whether the call was an `ApplyConfiguration`.
    pub fn is_apply(&self) -> bool {
        matches!(self, RecordedCall::ApplyConfiguration { .. })
    }
}

/// A received call and when it arrived (on the simulator's clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// The simulator clock's reading when the call arrived.
    pub at: Duration,
    /// The call.
    pub call: RecordedCall,
}

/// SHA-256 over `bytes` with every trailing line break (`\n` or `\r\n`) replaced by
/// one `\n`, lowercase hex.
pub fn config_digest_hex(bytes: &[u8]) -> String {
    let mut end = bytes.len();
    while end > 0 && bytes[end - 1] == b'\n' {
        end -= 1;
        if end > 0 && bytes[end - 1] == b'\r' {
            end -= 1;
        }
    }
    let mut hasher = Sha256::new();
    hasher.update(&bytes[..end]);
    hasher.update(b"\n");
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// An apply that is being held.
pub(crate) struct HeldApply {
    pub(crate) id: u64,
    /// The configuration to land; `None` for a dry run, which lands nothing.
    pub(crate) config: Option<Vec<u8>>,
    /// Told when the apply has landed.
    pub(crate) landed: oneshot::Sender<()>,
}

/// The node's mutable state, behind the simulator's lock.
pub(crate) struct NodeState {
    pub(crate) facts: NodeFacts,
    pub(crate) config_version: u64,
    pub(crate) identity_version: u64,
    pub(crate) info_version: u64,
    pub(crate) system_version: u64,
    pub(crate) next_apply_faults: VecDeque<ApplyFault>,
    pub(crate) every_apply_fault: Option<ApplyFault>,
    pub(crate) read_faults: HashMap<SimResource, ReadFault>,
    pub(crate) held: Vec<HeldApply>,
    pub(crate) next_held_id: u64,
    pub(crate) requests: Vec<RecordedRequest>,
}

impl NodeState {
    pub(crate) fn new(facts: NodeFacts) -> Self {
        NodeState {
            facts,
            config_version: 1,
            identity_version: 1,
            info_version: 1,
            system_version: 1,
            next_apply_faults: VecDeque::new(),
            every_apply_fault: None,
            read_faults: HashMap::new(),
            held: Vec::new(),
            next_held_id: 0,
            requests: Vec::new(),
        }
    }

    /// The fault the current apply meets: a queued one-shot fault first, then the
    /// persistent one.
    pub(crate) fn take_apply_fault(&mut self) -> Option<ApplyFault> {
        self.next_apply_faults
            .pop_front()
            .or_else(|| self.every_apply_fault.clone())
    }

    /// Replaces the configuration and bumps its resource version.
    pub(crate) fn land(&mut self, config: Vec<u8>) {
        self.facts.config = config;
        self.config_version += 1;
    }

    pub(crate) fn set_facts(&mut self, facts: NodeFacts) {
        let old = std::mem::replace(&mut self.facts, facts);
        if old.config != self.facts.config {
            self.config_version += 1;
        }
        if old.node_id != self.facts.node_id {
            self.identity_version += 1;
        }
        if old.cluster_id != self.facts.cluster_id || old.cluster_name != self.facts.cluster_name {
            self.info_version += 1;
        }
        if old.smbios_uuid != self.facts.smbios_uuid
            || old.manufacturer != self.facts.manufacturer
            || old.product_name != self.facts.product_name
            || old.serial_number != self.facts.serial_number
        {
            self.system_version += 1;
        }
    }

    /// The resource's version and YAML spec.
    pub(crate) fn resource(&self, resource: SimResource) -> (u64, String) {
        let facts = &self.facts;
        match resource {
            SimResource::MachineConfig => (
                self.config_version,
                String::from_utf8_lossy(&facts.config).into_owned(),
            ),
            SimResource::Identity => (
                self.identity_version,
                format!("nodeId: {}\n", yaml_scalar(&facts.node_id)),
            ),
            SimResource::ClusterInfo => (
                self.info_version,
                format!(
                    "clusterId: {}\nclusterName: {}\n",
                    yaml_scalar(&facts.cluster_id),
                    yaml_scalar(&facts.cluster_name)
                ),
            ),
            SimResource::SystemInformation => (
                self.system_version,
                format!(
                    "manufacturer: {}\nproductName: {}\nserialnumber: {}\nuuid: {}\n",
                    yaml_scalar(&facts.manufacturer),
                    yaml_scalar(&facts.product_name),
                    yaml_scalar(&facts.serial_number),
                    yaml_scalar(&facts.smbios_uuid)
                ),
            ),
            SimResource::Version => (0, String::new()),
        }
    }
}

/// A YAML double-quoted scalar.
fn yaml_scalar(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_ignores_trailing_line_breaks_only() {
        let base = config_digest_hex(b"a: 1");
        assert_eq!(base, config_digest_hex(b"a: 1\n"));
        assert_eq!(base, config_digest_hex(b"a: 1\n\n\r\n"));
        assert_ne!(base, config_digest_hex(b"a: 2\n"));
        assert_ne!(base, config_digest_hex(b"a: 1 \n"));
        // SHA-256 of "a: 1\n".
        assert_eq!(base.len(), 64);
    }

    #[test]
    fn faults_queue_before_the_persistent_one() {
        let mut state = NodeState::new(NodeFacts::default());
        state.every_apply_fault = Some(ApplyFault::Unavailable);
        state
            .next_apply_faults
            .push_back(ApplyFault::InvalidArgument("bad".into()));
        assert_eq!(
            state.take_apply_fault(),
            Some(ApplyFault::InvalidArgument("bad".into()))
        );
        assert_eq!(state.take_apply_fault(), Some(ApplyFault::Unavailable));
    }

    #[test]
    fn debug_never_shows_config_bytes() {
        let facts = NodeFacts {
            config: b"secret: hunter2\n".to_vec(),
            ..NodeFacts::default()
        };
        let shown = format!("{facts:?}");
        assert!(!shown.contains("hunter2"));
    }
}
