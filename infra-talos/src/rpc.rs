//! The one way this crate calls a node: a gRPC channel bound to an allowlist of
//! methods, fixed when the client is made.
//!
//! The observation client's channel is bound to [`OBSERVATION_METHODS`] (reads only)
//! and the dispatch client's to [`DISPATCH_METHODS`]. A call outside the allowlist is
//! refused before anything is sent. No generated gRPC client exists in this crate, so
//! there is no other path to a remote method.

use std::time::Duration;

use tonic::client::Grpc;
use tonic::codec::Streaming;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

use crate::api::methods;

/// The methods the observation client may call: reads only.
pub(crate) const OBSERVATION_METHODS: &[&str] =
    &[methods::VERSION, methods::STATE_GET, methods::STATE_LIST];

/// The methods the dispatch client may call.
pub(crate) const DISPATCH_METHODS: &[&str] = &[methods::APPLY_CONFIGURATION];

/// How a call ended without an answer, or with a status.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The caller's deadline passed first.
    Deadline,
    /// The call ended with this status (from the node, or from the transport).
    Status(Status),
}

/// A gRPC channel that calls only the methods of its allowlist.
#[derive(Clone)]
pub(crate) struct GuardedChannel {
    grpc: Grpc<Channel>,
    allowlist: &'static [&'static str],
}

impl GuardedChannel {
    pub(crate) fn new(channel: Channel, allowlist: &'static [&'static str]) -> Self {
        GuardedChannel {
            grpc: Grpc::new(channel),
            allowlist,
        }
    }

    /// Whether `path` is on this channel's allowlist.
    pub(crate) fn permits(&self, path: &str) -> bool {
        self.allowlist.contains(&path)
    }

    fn path(&self, path: &'static str) -> Result<PathAndQuery, CallError> {
        if self.permits(path) {
            Ok(PathAndQuery::from_static(path))
        } else {
            Err(CallError::Status(Status::internal(format!(
                "{path} is not a method this client may call"
            ))))
        }
    }

    /// A unary call, given up at `deadline` (the stream is reset then).
    pub(crate) async fn unary<Req, Resp>(
        &self,
        path: &'static str,
        message: Req,
        deadline: Duration,
    ) -> Result<Resp, CallError>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let path = self.path(path)?;
        let mut grpc = self.grpc.clone();
        let call = async move {
            grpc.ready()
                .await
                .map_err(|error| Status::from_error(Box::new(error)))?;
            grpc.unary(Request::new(message), path, ProstCodec::default())
                .await
                .map(Response::into_inner)
        };
        match tokio::time::timeout(deadline, call).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(status)) => Err(CallError::Status(status)),
            Err(_) => Err(CallError::Deadline),
        }
    }

    /// A server-streaming call read to its end, given up at `deadline`.
    pub(crate) async fn collect<Req, Resp>(
        &self,
        path: &'static str,
        message: Req,
        deadline: Duration,
    ) -> Result<Vec<Resp>, CallError>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let path = self.path(path)?;
        let mut grpc = self.grpc.clone();
        let call = async move {
            grpc.ready()
                .await
                .map_err(|error| Status::from_error(Box::new(error)))?;
            let mut stream: Streaming<Resp> = grpc
                .server_streaming(Request::new(message), path, ProstCodec::default())
                .await?
                .into_inner();
            let mut items = Vec::new();
            while let Some(item) = stream.message().await? {
                items.push(item);
            }
            Ok::<_, Status>(items)
        };
        match tokio::time::timeout(deadline, call).await {
            Ok(Ok(items)) => Ok(items),
            Ok(Err(status)) => Err(CallError::Status(status)),
            Err(_) => Err(CallError::Deadline),
        }
    }
}

/// Whether a status came from the transport (a connection that failed or broke)
/// rather than from the node's answer.
pub(crate) fn from_transport(status: &Status) -> bool {
    std::error::Error::source(status).is_some()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use prost::Message as _;
    use prost_types::FileDescriptorSet;

    use super::*;
    use crate::api::FILE_DESCRIPTOR_SET;

    /// Every method the compiled protocol declares, as gRPC paths.
    fn declared_methods() -> BTreeSet<String> {
        let set = FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).expect("descriptor set");
        let mut paths = BTreeSet::new();
        for file in &set.file {
            let package = file.package();
            for service in &file.service {
                for method in &service.method {
                    paths.insert(format!("/{package}.{}/{}", service.name(), method.name()));
                }
            }
        }
        paths
    }

    fn lazy_channel() -> Channel {
        tonic::transport::Endpoint::from_static("http://127.0.0.1:9").connect_lazy()
    }

    #[test]
    fn the_allowlists_name_declared_methods() {
        let declared = declared_methods();
        for path in OBSERVATION_METHODS.iter().chain(DISPATCH_METHODS) {
            assert!(declared.contains(*path), "{path} is not declared");
        }
        assert!(declared.contains(methods::APPLY_CONFIGURATION));
    }

    #[tokio::test]
    async fn the_observation_client_reaches_exactly_the_reads() {
        let observation = GuardedChannel::new(lazy_channel(), OBSERVATION_METHODS);
        let reachable: BTreeSet<String> = declared_methods()
            .into_iter()
            .filter(|path| observation.permits(path))
            .collect();
        let expected: BTreeSet<String> = [
            "/machine.MachineService/Version",
            "/cosi.resource.State/Get",
            "/cosi.resource.State/List",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        assert_eq!(reachable, expected);
        for path in declared_methods() {
            if !expected.contains(&path) {
                assert!(!observation.permits(&path), "{path} must be out of reach");
            }
        }
        // A call outside the allowlist is refused before anything is sent.
        let refused = observation
            .unary::<_, crate::api::machine::ApplyConfigurationResponse>(
                methods::APPLY_CONFIGURATION,
                crate::api::machine::ApplyConfigurationRequest::default(),
                Duration::from_secs(1),
            )
            .await;
        assert!(matches!(
            refused,
            Err(CallError::Status(status)) if status.code() == tonic::Code::Internal
        ));
    }

    #[tokio::test]
    async fn the_dispatch_client_reaches_only_apply() {
        let dispatch = GuardedChannel::new(lazy_channel(), DISPATCH_METHODS);
        let reachable: Vec<String> = declared_methods()
            .into_iter()
            .filter(|path| dispatch.permits(path))
            .collect();
        assert_eq!(reachable, [methods::APPLY_CONFIGURATION]);
    }

    #[test]
    fn the_observation_module_names_no_apply_path() {
        let source = include_str!("observe.rs");
        assert!(!source.contains("APPLY_CONFIGURATION"));
        assert!(!source.contains("DISPATCH_METHODS"));
        assert!(!source.contains("ApplyConfiguration"));
    }
}
