//! The read-only observation client.
//!
//! It reads the running Talos version (`MachineService/Version`) and four COSI
//! resources (`State/Get`, and `State/List` for listings); its channel is bound to
//! those three methods and nothing else, so it cannot change a machine.

use std::time::Duration;

use infra_core::engine::Clock;
use serde::Deserialize;
use tonic::Code;

use crate::api::cosi::resource as cosi;
use crate::api::machine;
use crate::api::methods;
use crate::connect::NodeChannel;
use crate::digest::config_digest;
use crate::observation::{
    ClusterInfo, MachineConfigState, MachineIdentity, MissingReason, Observation, Read,
    ResourceVersion, SystemInformation,
};
use crate::rpc::{CallError, GuardedChannel, OBSERVATION_METHODS, from_transport};

/// A COSI resource's coordinates.
#[derive(Debug, Clone, Copy)]
struct Coordinates {
    namespace: &'static str,
    resource_type: &'static str,
    id: &'static str,
}

/// The running machine configuration.
const MACHINE_CONFIG: Coordinates = Coordinates {
    namespace: "config",
    resource_type: "MachineConfigs.config.talos.dev",
    id: "v1alpha1",
};

/// The node's identity in the cluster.
const IDENTITY: Coordinates = Coordinates {
    namespace: "cluster",
    resource_type: "Identities.cluster.talos.dev",
    id: "local",
};

/// The cluster the node belongs to.
const CLUSTER_INFO: Coordinates = Coordinates {
    namespace: "cluster",
    resource_type: "Infos.cluster.talos.dev",
    id: "current",
};

/// The SMBIOS system information.
const SYSTEM_INFORMATION: Coordinates = Coordinates {
    namespace: "hardware",
    resource_type: "SystemInformations.hardware.talos.dev",
    id: "systeminformation",
};

#[derive(Deserialize)]
struct IdentitySpec {
    #[serde(rename = "nodeId")]
    node_id: String,
}

#[derive(Deserialize)]
struct InfoSpec {
    #[serde(rename = "clusterId")]
    cluster_id: String,
    #[serde(rename = "clusterName", default)]
    cluster_name: String,
}

#[derive(Deserialize)]
struct SystemInformationSpec {
    #[serde(default)]
    uuid: String,
    #[serde(default)]
    manufacturer: String,
    #[serde(rename = "productName", default)]
    product_name: String,
    #[serde(rename = "serialnumber", alias = "serialNumber", default)]
    serial_number: String,
}

/// Why a read failed, as observation evidence.
fn missing(error: CallError) -> MissingReason {
    let status = match error {
        CallError::Deadline => return MissingReason::DeadlineExceeded,
        CallError::Status(status) => status,
    };
    match status.code() {
        Code::DeadlineExceeded => MissingReason::DeadlineExceeded,
        Code::PermissionDenied => MissingReason::PermissionDenied,
        Code::NotFound => MissingReason::NotFound,
        Code::Unavailable => MissingReason::Unreachable,
        _ if from_transport(&status) => MissingReason::Unreachable,
        code => MissingReason::Other {
            code: i32::from(code),
        },
    }
}

fn malformed(detail: impl Into<String>) -> MissingReason {
    MissingReason::Malformed(detail.into())
}

/// A value that must not be empty: an empty one is malformed, never a default.
fn non_empty(value: String, what: &str) -> Read<String> {
    if value.trim().is_empty() {
        Read::missing(malformed(format!("the {what} is empty")))
    } else {
        Read::Ok(value)
    }
}

/// Reads a machine without changing it. Cheap to clone; clones share the channel.
#[derive(Clone)]
pub struct ObservationClient {
    channel: GuardedChannel,
    deadline: Duration,
}

impl std::fmt::Debug for ObservationClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObservationClient")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl ObservationClient {
    /// A client reading through `channel`, each read bounded by the channel's call
    /// deadline.
    #[must_use]
    pub fn new(channel: &NodeChannel) -> Self {
        ObservationClient {
            channel: GuardedChannel::new(channel.channel.clone(), OBSERVATION_METHODS),
            deadline: channel.call_deadline,
        }
    }

    /// The running Talos version's tag.
    pub async fn version(&self) -> Read<String> {
        let answer: Result<machine::VersionResponse, _> = self
            .channel
            .unary(methods::VERSION, (), self.deadline)
            .await;
        let answer = match answer {
            Ok(answer) => answer,
            Err(error) => return Read::missing(missing(error)),
        };
        let Some(message) = answer.messages.into_iter().next() else {
            return Read::missing(malformed("the version answer carries no message"));
        };
        if let Some(error) = message.metadata.as_ref().map(|m| &m.error)
            && !error.is_empty()
        {
            return Read::missing(malformed(format!(
                "the node reported an error: {}",
                crate::redact::redact(error)
            )));
        }
        match message.version {
            Some(version) => non_empty(version.tag, "version tag"),
            None => Read::missing(malformed("the version answer carries no version")),
        }
    }

    async fn get(&self, at: Coordinates) -> Read<cosi::Resource> {
        let request = cosi::GetRequest {
            namespace: at.namespace.to_owned(),
            r#type: at.resource_type.to_owned(),
            id: at.id.to_owned(),
            options: None,
        };
        let answer: Result<cosi::GetResponse, _> = self
            .channel
            .unary(methods::STATE_GET, request, self.deadline)
            .await;
        match answer {
            Ok(cosi::GetResponse {
                resource: Some(resource),
            }) => Read::Ok(resource),
            Ok(_) => Read::missing(malformed(format!(
                "the answer for {} carries no resource",
                at.resource_type
            ))),
            Err(error) => Read::missing(missing(error)),
        }
    }

    /// A resource's YAML spec parsed as `T`.
    async fn spec<T: for<'de> Deserialize<'de>>(&self, at: Coordinates) -> Read<T> {
        self.get(at).await.and_then(|resource| {
            let Some(spec) = resource.spec else {
                return Read::missing(malformed(format!("{} has no spec", at.resource_type)));
            };
            match serde_norway::from_str(&spec.yaml_spec) {
                Ok(parsed) => Read::Ok(parsed),
                Err(error) => Read::missing(malformed(format!(
                    "the {} spec does not parse: {error}",
                    at.resource_type
                ))),
            }
        })
    }

    /// The running machine configuration's digest and resource version, from one
    /// read. The configuration itself is not kept.
    pub async fn machine_config(&self) -> Read<MachineConfigState> {
        self.get(MACHINE_CONFIG).await.and_then(|resource| {
            let version = match resource.metadata {
                Some(metadata) if !metadata.version.is_empty() => metadata.version,
                _ => {
                    return Read::missing(malformed(
                        "the machine configuration has no resource version",
                    ));
                }
            };
            match resource.spec {
                Some(spec) if !spec.yaml_spec.is_empty() => Read::Ok(MachineConfigState {
                    digest: config_digest(spec.yaml_spec.as_bytes()),
                    version,
                }),
                _ => Read::missing(malformed("the machine configuration has an empty spec")),
            }
        })
    }

    /// The Talos node ID.
    pub async fn identity(&self) -> Read<String> {
        self.spec::<IdentitySpec>(IDENTITY)
            .await
            .and_then(|spec| non_empty(spec.node_id, "node ID"))
    }

    /// The cluster ID and name.
    pub async fn cluster_info(&self) -> Read<ClusterInfo> {
        self.spec::<InfoSpec>(CLUSTER_INFO).await.and_then(|spec| {
            non_empty(spec.cluster_id, "cluster ID").map(|cluster_id| ClusterInfo {
                cluster_id,
                cluster_name: spec.cluster_name,
            })
        })
    }

    /// The SMBIOS system information, as reported (values may be empty).
    pub async fn system_information(&self) -> Read<SystemInformation> {
        self.spec::<SystemInformationSpec>(SYSTEM_INFORMATION)
            .await
            .map(|spec| SystemInformation {
                uuid: spec.uuid,
                manufacturer: spec.manufacturer,
                product_name: spec.product_name,
                serial_number: spec.serial_number,
            })
    }

    /// The ids and versions of the resources of a type in a namespace (specs are
    /// not kept).
    pub async fn list(&self, namespace: &str, resource_type: &str) -> Read<Vec<ResourceVersion>> {
        let request = cosi::ListRequest {
            namespace: namespace.to_owned(),
            r#type: resource_type.to_owned(),
            options: None,
        };
        let answer: Result<Vec<cosi::ListResponse>, _> = self
            .channel
            .collect(methods::STATE_LIST, request, self.deadline)
            .await;
        let items = match answer {
            Ok(items) => items,
            Err(error) => return Read::missing(missing(error)),
        };
        let mut listed = Vec::with_capacity(items.len());
        for item in items {
            match item.resource.and_then(|resource| resource.metadata) {
                Some(metadata) => listed.push(ResourceVersion {
                    id: metadata.id,
                    version: metadata.version,
                }),
                None => {
                    return Read::missing(malformed("a listed resource has no metadata"));
                }
            }
        }
        Read::Ok(listed)
    }

    /// Reads everything observation needs, concurrently, and notes on `clock` when
    /// the reads started and ended. Never fails: a value that could not be read is
    /// missing, with the reason.
    pub async fn observe(&self, clock: &dyn Clock) -> Observation {
        let started = clock.now();
        let (version, config, node_id, cluster, system) = tokio::join!(
            self.version(),
            self.machine_config(),
            self.identity(),
            self.cluster_info(),
            self.system_information(),
        );
        let ended = clock.now();
        let (config_digest, config_version) = match config {
            Read::Ok(state) => (Read::Ok(state.digest), Read::Ok(state.version)),
            Read::Missing { reason } => (Read::missing(reason.clone()), Read::missing(reason)),
        };
        Observation {
            identity: MachineIdentity {
                smbios_uuid: system.and_then(|system| non_empty(system.uuid, "SMBIOS UUID")),
                node_id,
            },
            cluster_id: cluster.map(|cluster| cluster.cluster_id),
            talos_version: version,
            config_digest,
            config_version,
            started,
            ended,
        }
    }
}

#[cfg(test)]
mod tests {
    use tonic::Status;

    use super::*;

    #[test]
    fn statuses_map_to_reasons() {
        let reason = |status: Status| missing(CallError::Status(status));
        assert_eq!(
            reason(Status::permission_denied("no")),
            MissingReason::PermissionDenied
        );
        assert_eq!(reason(Status::not_found("no")), MissingReason::NotFound);
        assert_eq!(
            reason(Status::unavailable("no")),
            MissingReason::Unreachable
        );
        assert_eq!(
            reason(Status::deadline_exceeded("no")),
            MissingReason::DeadlineExceeded
        );
        assert_eq!(
            reason(Status::internal("no")),
            MissingReason::Other { code: 13 }
        );
        assert_eq!(
            missing(CallError::Deadline),
            MissingReason::DeadlineExceeded
        );
        let broken = Status::from_error(Box::new(std::io::Error::other("connection reset")));
        assert_eq!(reason(broken), MissingReason::Unreachable);
    }

    #[test]
    fn empty_values_are_malformed_not_defaults() {
        assert!(matches!(
            non_empty(String::new(), "node ID"),
            Read::Missing {
                reason: MissingReason::Malformed(_)
            }
        ));
    }
}
