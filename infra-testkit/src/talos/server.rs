//! The simulated node's gRPC services, their router, and the running server.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use infra_core::engine::{Clock, SystemClock};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};
use tonic::body::Body;
use tonic::codegen::{BoxFuture, Service, http};
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status};

use super::SimError;
use super::api::common;
use super::api::cosi::resource as cosi;
use super::api::machine;
use super::api::machine::apply_configuration_request::Mode;
use super::conn::{Connections, CuttableStream};
use super::pki::{ClientCert, TestPki};
use super::state::{
    ApplyFault, ApplyMode, HeldApply, Landing, NodeFacts, NodeState, ReadFault, RecordedCall,
    RecordedRequest, SimResource, config_digest_hex,
};

/// How long a graceful shutdown waits for connections to close before cutting them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// State shared by the services and the handle.
struct Shared {
    state: Mutex<NodeState>,
    clock: Arc<dyn Clock>,
    connections: Arc<Connections>,
    stopping: watch::Sender<bool>,
    tasks: Mutex<JoinSet<()>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, NodeState> {
        self.state.lock().expect("simulated node state lock")
    }

    fn record(&self, call: RecordedCall) {
        let at = self.clock.now();
        self.lock().requests.push(RecordedRequest { at, call });
    }

    fn read_fault(&self, resource: SimResource) -> Option<ReadFault> {
        self.lock().read_faults.get(&resource).copied()
    }

    /// Lands the held applies `which` selects (all of them for `None`); returns how
    /// many landed.
    fn land_held(&self, which: Option<u64>) -> usize {
        let landed: Vec<HeldApply> = {
            let mut state = self.lock();
            let (landing, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut state.held)
                .into_iter()
                .partition(|held| which.is_none_or(|id| held.id == id));
            state.held = keep;
            for held in &landing {
                if let Some(config) = &held.config {
                    state.land(config.clone());
                }
            }
            landing
        };
        let count = landed.len();
        for held in landed {
            // The handler may be gone (its client gave up): nobody to tell then.
            let _ = held.landed.send(());
        }
        count
    }

    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut stopping = self.stopping.subscribe();
        self.tasks
            .lock()
            .expect("simulator task lock")
            .spawn(async move {
                tokio::select! {
                    () = task => {}
                    _ = stopping.wait_for(|stopping| *stopping) => {}
                }
            });
    }

    /// Resolves when the simulator is stopping.
    async fn stopped(&self) {
        let mut stopping = self.stopping.subscribe();
        let _ = stopping.wait_for(|stopping| *stopping).await;
    }
}

/// The services of one simulated node.
#[derive(Clone)]
struct Node {
    shared: Arc<Shared>,
}

fn metadata(hostname: &str) -> Option<common::Metadata> {
    Some(common::Metadata {
        hostname: hostname.to_owned(),
        error: String::new(),
    })
}

fn read_fault_status(fault: ReadFault) -> Option<Status> {
    match fault {
        ReadFault::PermissionDenied => Some(Status::permission_denied(
            "authorization error: the role may not read this resource",
        )),
        ReadFault::NotFound => Some(Status::not_found("resource doesn't exist")),
        ReadFault::Unavailable => Some(Status::unavailable("node is not available")),
        // Cut by the handler before it reads; a read that gets here anyway fails.
        ReadFault::ConnectionLost => Some(Status::unavailable("connection lost")),
        ReadFault::Malformed => None,
    }
}

impl Node {
    /// With [`ReadFault::ConnectionLost`] set on `resource`: cut the connection of
    /// `peer` and answer nobody (the handler waits until the node stops).
    async fn cut_read(
        &self,
        resource: SimResource,
        peer: Option<SocketAddr>,
    ) -> Result<(), Status> {
        if self.shared.read_fault(resource) != Some(ReadFault::ConnectionLost) {
            return Ok(());
        }
        if let Some(peer) = peer {
            self.shared.connections.cut(peer);
        }
        self.shared.stopped().await;
        Err(Status::unavailable("node is shutting down"))
    }

    fn apply_response(&self, dry_run: bool) -> Response<machine::ApplyConfigurationResponse> {
        let hostname = self.shared.lock().facts.hostname.clone();
        let mode_details = if dry_run {
            "Dry run summary: the configuration would be applied without a reboot".to_owned()
        } else {
            "Applied configuration without a reboot".to_owned()
        };
        Response::new(machine::ApplyConfigurationResponse {
            messages: vec![machine::ApplyConfiguration {
                metadata: metadata(&hostname),
                warnings: Vec::new(),
                mode: Mode::NoReboot as i32,
                mode_details,
            }],
        })
    }

    fn resource(&self, resource: SimResource, id: &str) -> Result<Option<cosi::Resource>, Status> {
        if let Some(fault) = self.shared.read_fault(resource) {
            if let Some(status) = read_fault_status(fault) {
                return Err(status);
            }
            if resource == SimResource::MachineConfig {
                return Ok(None);
            }
            let (version, _) = self.shared.lock().resource(resource);
            let garbled = "{ unclosed: [".to_owned();
            return Ok(Some(build_resource(resource, id, version, garbled)));
        }
        let (version, yaml) = self.shared.lock().resource(resource);
        Ok(Some(build_resource(resource, id, version, yaml)))
    }
}

fn build_resource(
    resource: SimResource,
    id: &str,
    version: u64,
    yaml_spec: String,
) -> cosi::Resource {
    let (namespace, resource_type) = SimResource::RESOURCES
        .iter()
        .find(|(r, ..)| *r == resource)
        .map(|(_, ns, ty, _)| (*ns, *ty))
        .unwrap_or_default();
    cosi::Resource {
        metadata: Some(cosi::Metadata {
            namespace: namespace.to_owned(),
            r#type: resource_type.to_owned(),
            id: id.to_owned(),
            version: version.to_string(),
            owner: "talos-simulator".to_owned(),
            phase: "running".to_owned(),
            ..cosi::Metadata::default()
        }),
        spec: Some(cosi::Spec {
            proto_spec: Vec::new(),
            yaml_spec,
        }),
    }
}

#[tonic::async_trait]
impl machine::machine_service_server::MachineService for Node {
    async fn apply_configuration(
        &self,
        request: Request<machine::ApplyConfigurationRequest>,
    ) -> Result<Response<machine::ApplyConfigurationResponse>, Status> {
        let peer = request.remote_addr();
        let request = request.into_inner();
        let dry_run = request.dry_run;
        self.shared.record(RecordedCall::ApplyConfiguration {
            mode: ApplyMode::from_wire(request.mode),
            dry_run,
            data_digest: config_digest_hex(&request.data),
        });

        if request.mode != Mode::NoReboot as i32 {
            return Err(Status::unimplemented(
                "the simulated node applies configuration in NO_REBOOT mode only",
            ));
        }
        if request.data.is_empty() {
            return Err(Status::invalid_argument("the configuration is empty"));
        }
        if std::str::from_utf8(&request.data).is_err() {
            return Err(Status::invalid_argument(
                "the configuration is not valid UTF-8 text",
            ));
        }
        let config = (!dry_run).then_some(request.data);

        let fault = self.shared.lock().take_apply_fault();
        match fault {
            None => {
                if let Some(config) = config {
                    self.shared.lock().land(config);
                }
                Ok(self.apply_response(dry_run))
            }
            Some(ApplyFault::InvalidArgument(message)) => Err(Status::invalid_argument(message)),
            Some(ApplyFault::Unavailable) => Err(Status::unavailable("node is not available")),
            Some(ApplyFault::Status(code, message)) => Err(Status::new(code, message)),
            Some(ApplyFault::LoseResponse) => {
                if let Some(config) = config {
                    self.shared.lock().land(config);
                }
                if let Some(peer) = peer {
                    self.shared.connections.cut(peer);
                }
                // The connection is gone; this answer reaches nobody.
                self.shared.stopped().await;
                Err(Status::unavailable("node is shutting down"))
            }
            Some(ApplyFault::Hold(landing)) => {
                let (landed, on_landed) = oneshot::channel();
                let id = {
                    let mut state = self.shared.lock();
                    state.next_held_id += 1;
                    let id = state.next_held_id;
                    state.held.push(HeldApply { id, config, landed });
                    id
                };
                if let Landing::After(delay) = landing {
                    let shared = self.shared.clone();
                    self.shared.spawn(async move {
                        tokio::time::sleep(delay).await;
                        shared.land_held(Some(id));
                    });
                }
                tokio::select! {
                    _ = on_landed => Ok(self.apply_response(dry_run)),
                    () = self.shared.stopped() => Err(Status::unavailable("node is shutting down")),
                }
            }
        }
    }

    async fn version(
        &self,
        request: Request<()>,
    ) -> Result<Response<machine::VersionResponse>, Status> {
        self.shared.record(RecordedCall::Version);
        self.cut_read(SimResource::Version, request.remote_addr())
            .await?;
        let fault = self.shared.read_fault(SimResource::Version);
        if let Some(status) = fault.and_then(read_fault_status) {
            return Err(status);
        }
        if fault == Some(ReadFault::Malformed) {
            return Ok(Response::new(machine::VersionResponse {
                messages: Vec::new(),
            }));
        }
        let (hostname, tag) = {
            let state = self.shared.lock();
            (
                state.facts.hostname.clone(),
                state.facts.talos_version.clone(),
            )
        };
        Ok(Response::new(machine::VersionResponse {
            messages: vec![machine::Version {
                metadata: metadata(&hostname),
                version: Some(machine::VersionInfo {
                    tag,
                    sha: "0000000".to_owned(),
                    built: String::new(),
                    go_version: String::new(),
                    os: "linux".to_owned(),
                    arch: "amd64".to_owned(),
                }),
            }],
        }))
    }
}

#[tonic::async_trait]
impl cosi::state_server::State for Node {
    async fn get(
        &self,
        request: Request<cosi::GetRequest>,
    ) -> Result<Response<cosi::GetResponse>, Status> {
        let peer = request.remote_addr();
        let request = request.into_inner();
        self.shared.record(RecordedCall::Get {
            namespace: request.namespace.clone(),
            resource_type: request.r#type.clone(),
            id: request.id.clone(),
        });
        match SimResource::find(&request.namespace, &request.r#type) {
            Some((resource, id)) if id == request.id => {
                self.cut_read(resource, peer).await?;
                Ok(Response::new(cosi::GetResponse {
                    resource: self.resource(resource, id)?,
                }))
            }
            _ => Err(Status::not_found("resource doesn't exist")),
        }
    }

    type ListStream = futures::stream::Iter<std::vec::IntoIter<Result<cosi::ListResponse, Status>>>;

    async fn list(
        &self,
        request: Request<cosi::ListRequest>,
    ) -> Result<Response<Self::ListStream>, Status> {
        let peer = request.remote_addr();
        let request = request.into_inner();
        self.shared.record(RecordedCall::List {
            namespace: request.namespace.clone(),
            resource_type: request.r#type.clone(),
        });
        let Some((resource, id)) = SimResource::find(&request.namespace, &request.r#type) else {
            return Err(Status::not_found("resource type is not registered"));
        };
        self.cut_read(resource, peer).await?;
        let items: Vec<_> = self
            .resource(resource, id)?
            .into_iter()
            .map(|resource| {
                Ok(cosi::ListResponse {
                    resource: Some(resource),
                })
            })
            .collect();
        Ok(Response::new(futures::stream::iter(items)))
    }
}

/// Routes requests to the machine service or the COSI state service by path.
#[derive(Clone)]
struct Router {
    machine: machine::machine_service_server::MachineServiceServer<Node>,
    state: cosi::state_server::StateServer<Node>,
}

impl Service<http::Request<Body>> for Router {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        if request.uri().path().starts_with("/cosi.resource.State/") {
            self.state.call(request)
        } else {
            // Unknown paths get the generated service's `Unimplemented` answer.
            self.machine.call(request)
        }
    }
}

/// Sets up a [`TalosSim`].
pub struct TalosSimBuilder {
    facts: NodeFacts,
    clock: Option<Arc<dyn Clock>>,
}

impl std::fmt::Debug for TalosSimBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TalosSimBuilder")
            .field("facts", &self.facts)
            .finish_non_exhaustive()
    }
}

impl TalosSimBuilder {
    /// All the node's facts at once.
    pub fn facts(mut self, facts: NodeFacts) -> Self {
        self.facts = facts;
        self
    }

    /// The SMBIOS UUID.
    pub fn smbios_uuid(mut self, uuid: impl Into<String>) -> Self {
        self.facts.smbios_uuid = uuid.into();
        self
    }

    /// The Talos node ID.
    pub fn node_id(mut self, node_id: impl Into<String>) -> Self {
        self.facts.node_id = node_id.into();
        self
    }

    /// The Talos cluster ID.
    pub fn cluster_id(mut self, cluster_id: impl Into<String>) -> Self {
        self.facts.cluster_id = cluster_id.into();
        self
    }

    /// The running Talos version tag.
    pub fn talos_version(mut self, version: impl Into<String>) -> Self {
        self.facts.talos_version = version.into();
        self
    }

    /// The machine configuration the node starts with.
    pub fn config(mut self, config: impl Into<Vec<u8>>) -> Self {
        self.facts.config = config.into();
        self
    }

    /// The clock request records are stamped with (the system clock by default).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Generates the test PKI, binds `127.0.0.1:0` and starts serving.
    pub async fn start(self) -> Result<TalosSim, SimError> {
        let pki = TestPki::generate()?;
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (stopping, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            state: Mutex::new(NodeState::new(self.facts)),
            clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock::new())),
            connections: Arc::new(Connections::default()),
            stopping,
            tasks: Mutex::new(JoinSet::new()),
        });

        let tls = ServerTlsConfig::new()
            .identity(Identity::from_pem(
                pki.server_cert_pem(),
                pki.server_key_pem(),
            ))
            .client_ca_root(Certificate::from_pem(pki.ca_pem()))
            .timeout(Duration::from_secs(5));
        let node = Node {
            shared: shared.clone(),
        };
        let router = Router {
            machine: machine::machine_service_server::MachineServiceServer::new(node.clone()),
            state: cosi::state_server::StateServer::new(node),
        };
        let connections = shared.connections.clone();
        let incoming = futures::stream::unfold(
            (listener, connections),
            |(listener, connections)| async move {
                let next = listener.accept().await.map(|(stream, peer)| {
                    let _ = stream.set_nodelay(true);
                    CuttableStream::new(stream, peer, connections.clone())
                });
                Some((next, (listener, connections)))
            },
        );
        let (shutdown, on_shutdown) = oneshot::channel::<()>();
        // tonic's server takes rustls's process-wide provider. A build that links
        // both ring and aws-lc-rs (the AWS SDK brings the second) has no automatic
        // one, so the simulator names ring — the provider its client side uses —
        // unless the process already chose one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let server = Server::builder().tls_config(tls)?;
        let server = tokio::spawn(async move {
            server
                .serve_with_incoming_shutdown(router, incoming, async {
                    let _ = on_shutdown.await;
                })
                .await
        });
        Ok(TalosSim {
            addr,
            pki,
            shared,
            shutdown: Some(shutdown),
            server: Some(server),
        })
    }
}

/// A simulated Talos node: a tonic gRPC server on `127.0.0.1` behind mutual TLS
/// with a per-test CA, serving `MachineService/Version`,
/// `MachineService/ApplyConfiguration` and COSI `State/Get` and `State/List` for
/// the machine configuration, node identity, cluster info and system information.
///
/// Applies: `NO_REBOOT` changes the configuration at once and bumps the
/// machine-config resource version (every apply bumps it, even one that sends the
/// same bytes); a dry run changes nothing; other modes are refused with
/// `Unimplemented`, so that a send in a rebooting mode shows up in tests; an empty or
/// non-UTF-8 configuration is refused with `InvalidArgument`.
///
/// Dropping the handle stops the server at once (connections are cut);
/// [`TalosSim::shutdown`] stops it gracefully.
pub struct TalosSim {
    addr: SocketAddr,
    pki: TestPki,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<Result<(), tonic::transport::Error>>>,
}

impl std::fmt::Debug for TalosSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TalosSim")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl TalosSim {
    /// A builder with [`NodeFacts::default`].
    pub fn builder() -> TalosSimBuilder {
        TalosSimBuilder {
            facts: NodeFacts::default(),
            clock: None,
        }
    }

    /// Starts a node with [`NodeFacts::default`].
    pub async fn start() -> Result<TalosSim, SimError> {
        TalosSim::builder().start().await
    }

    /// The bound address (`127.0.0.1:<port>`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The node's address as `host:port`.
    pub fn node_address(&self) -> String {
        self.addr.to_string()
    }

    /// The node's endpoint URI, `https://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The test PKI: the CA the node trusts and its certificates.
    pub fn pki(&self) -> &TestPki {
        &self.pki
    }

    /// Writes a talosconfig (context `sim`, the node as endpoint and node, the CA,
    /// and `client`'s certificate and key) to `dir/talosconfig`, readable by the
    /// owner only, and returns its path.
    pub fn write_talosconfig(&self, dir: &Path, client: &ClientCert) -> io::Result<PathBuf> {
        let address = self.node_address();
        let text = format!(
            "context: sim\ncontexts:\n  sim:\n    endpoints:\n      - {address}\n    nodes:\n      - {address}\n    ca: {ca}\n    crt: {crt}\n    key: {key}\n",
            ca = BASE64.encode(self.pki.ca_pem()),
            crt = BASE64.encode(client.cert_pem()),
            key = BASE64.encode(client.key_pem()),
        );
        let path = dir.join("talosconfig");
        write_private(&path, text.as_bytes())?;
        Ok(path)
    }

    /// The node's current facts.
    pub fn facts(&self) -> NodeFacts {
        self.shared.lock().facts.clone()
    }

    /// The current machine configuration.
    pub fn config(&self) -> Vec<u8> {
        self.shared.lock().facts.config.clone()
    }

    /// The machine-config resource version.
    pub fn config_version(&self) -> u64 {
        self.shared.lock().config_version
    }

    /// Replaces the node's facts; each resource whose spec changes gets a new
    /// version.
    pub fn set_facts(&self, facts: NodeFacts) {
        self.shared.lock().set_facts(facts);
    }

    /// Reports another identity from now on.
    pub fn set_identity(&self, smbios_uuid: impl Into<String>, node_id: impl Into<String>) {
        let mut facts = self.facts();
        facts.smbios_uuid = smbios_uuid.into();
        facts.node_id = node_id.into();
        self.set_facts(facts);
    }

    /// Reports another cluster ID from now on.
    pub fn set_cluster_id(&self, cluster_id: impl Into<String>) {
        let mut facts = self.facts();
        facts.cluster_id = cluster_id.into();
        self.set_facts(facts);
    }

    /// Reports another Talos version from now on.
    pub fn set_talos_version(&self, version: impl Into<String>) {
        let mut facts = self.facts();
        facts.talos_version = version.into();
        self.set_facts(facts);
    }

    /// Changes the configuration out of band (not through the API, as an operator
    /// on the node would): the configuration is replaced and its version bumped.
    pub fn drift_config(&self, config: impl Into<Vec<u8>>) {
        self.shared.lock().land(config.into());
    }

    /// The next `ApplyConfiguration` (after any already queued) meets `fault`.
    pub fn fail_next_apply(&self, fault: ApplyFault) {
        self.shared.lock().next_apply_faults.push_back(fault);
    }

    /// Every `ApplyConfiguration` meets `fault` (once the queued one-shot faults are
    /// used up), until [`TalosSim::clear_faults`].
    pub fn fail_every_apply(&self, fault: ApplyFault) {
        self.shared.lock().every_apply_fault = Some(fault);
    }

    /// Every read of `resource` meets `fault`, until [`TalosSim::clear_faults`].
    pub fn fail_reads(&self, resource: SimResource, fault: ReadFault) {
        self.shared.lock().read_faults.insert(resource, fault);
    }

    /// Clears every apply and read fault (held applies stay held).
    pub fn clear_faults(&self) {
        let mut state = self.shared.lock();
        state.next_apply_faults.clear();
        state.every_apply_fault = None;
        state.read_faults.clear();
    }

    /// How many applies are held.
    pub fn held_count(&self) -> usize {
        self.shared.lock().held.len()
    }

    /// Lands every held apply now; returns how many landed.
    pub fn release_held(&self) -> usize {
        self.shared.land_held(None)
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// The `ApplyConfiguration` requests received so far.
    pub fn apply_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|request| request.call.is_apply())
            .collect()
    }

    /// Stops accepting, answers held requests with `Unavailable`, lets open
    /// connections finish (cutting them after a grace period) and waits for the
    /// server task.
    pub async fn shutdown(mut self) -> Result<(), SimError> {
        self.begin_stop();
        let Some(mut server) = self.server.take() else {
            return Ok(());
        };
        let joined = match tokio::time::timeout(SHUTDOWN_GRACE, &mut server).await {
            Ok(joined) => joined,
            Err(_) => {
                self.shared.connections.cut_all();
                server.await
            }
        };
        match joined {
            Ok(result) => result.map_err(SimError::from),
            Err(join) => Err(SimError::Task(join.to_string())),
        }
    }

    fn begin_stop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        self.shared.stopping.send_replace(true);
        self.shared
            .tasks
            .lock()
            .expect("simulator task lock")
            .abort_all();
    }
}

impl Drop for TalosSim {
    fn drop(&mut self) {
        self.begin_stop();
        self.shared.connections.cut_all();
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}

fn write_private(path: &Path, contents: &[u8]) -> io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(contents)?;
    file.sync_all()
}
