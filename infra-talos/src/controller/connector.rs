//! How the executor reaches a machine: a read-only observation client, the dispatch
//! client, and the facts about its access that evidence records.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use crate::connect::{ConnectOptions, NodeAddress, NodeChannel};
use crate::dispatch::DispatchClient;
use crate::observe::ObservationClient;
use crate::store::MachineView;
use crate::talosconfig::{Credentials, TalosConfig};

use super::ExecutorError;

/// Where the Talos access configuration used for a machine lives, and which version
/// of it was read (§3.1 item 2). Never the value itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessVersion {
    /// Where the access configuration is kept.
    pub path: String,
    /// The version read.
    pub version: String,
}

/// The two clients for one machine, and the access version they were made from.
#[derive(Debug, Clone)]
pub struct MachineClients {
    /// The read-only client.
    pub observer: ObservationClient,
    /// The only client that sends `ApplyConfiguration`, and only under a committed
    /// attempt.
    pub dispatcher: DispatchClient,
    /// The access configuration the clients were built from.
    pub access: AccessVersion,
}

/// Reaches machines. A trait so tests can point the executor at simulated nodes.
#[async_trait::async_trait]
pub trait Connector: Send + Sync {
    /// Clients for `machine`, reaching it at its own endpoint as the store records
    /// it.
    async fn connect(&self, machine: &MachineView) -> Result<MachineClients, ExecutorError>;
}

/// What a connector knows of one machine beyond the store: where to reach its own
/// endpoint from here. (No assignment: the Talos API carries none, so the store's
/// assignment head is what comparison 2 compares, never an observed value.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineRoute {
    /// The address to reach the machine's own Talos endpoint (§3.5) at, where it
    /// differs from the endpoint the store records (a forwarded port, say).
    pub endpoint: NodeAddress,
}

/// A [`Connector`] built from a talosconfig file: every machine is reached at its
/// own endpoint (the store's record, unless a route was added for it) with the
/// context's `os:admin` credentials. The access version is a
/// digest of the file, so a changed file shows as a new version.
pub struct TalosconfigConnector {
    path: PathBuf,
    credentials: Credentials,
    version: String,
    options: ConnectOptions,
    routes: RwLock<BTreeMap<String, MachineRoute>>,
}

impl std::fmt::Debug for TalosconfigConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TalosconfigConnector")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl TalosconfigConnector {
    /// Loads the talosconfig at `path` and uses its current context.
    ///
    /// # Errors
    ///
    /// [`ExecutorError::Access`] when the file cannot be read or holds no usable
    /// `os:admin` context.
    pub fn load(path: &Path, options: ConnectOptions) -> Result<Self, ExecutorError> {
        let text = std::fs::read(path)
            .map_err(|e| ExecutorError::Access(format!("cannot read the talosconfig: {e}")))?;
        let version = format!("sha256:{}", &crate::config_digest(&text).to_hex()[..16]);
        drop(text);
        let config = TalosConfig::load(path).map_err(|e| ExecutorError::Access(e.to_string()))?;
        let credentials = config
            .context(None)
            .and_then(|context| context.admin_credentials())
            .map_err(|e| ExecutorError::Access(e.to_string()))?;
        Ok(Self {
            path: path.to_owned(),
            credentials,
            version,
            options,
            routes: RwLock::new(BTreeMap::new()),
        })
    }

    /// Reaches `machine` at `route` and reads its assignment revision from it.
    pub fn add_machine(&self, machine: impl Into<String>, route: MachineRoute) {
        self.routes
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(machine.into(), route);
    }

    fn route(&self, machine: &str) -> Option<MachineRoute> {
        self.routes
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(machine)
            .cloned()
    }
}

#[async_trait::async_trait]
impl Connector for TalosconfigConnector {
    async fn connect(&self, machine: &MachineView) -> Result<MachineClients, ExecutorError> {
        let endpoint = match self.route(&machine.id) {
            Some(route) => route.endpoint,
            None => NodeAddress::parse(&machine.endpoint).map_err(|e| {
                ExecutorError::Access(format!("the endpoint of machine {}: {e}", machine.id))
            })?,
        };
        let channel = NodeChannel::open(&self.credentials, &endpoint, &self.options)
            .await
            .map_err(|e| ExecutorError::Access(e.to_string()))?;
        Ok(MachineClients {
            observer: ObservationClient::new(&channel),
            dispatcher: DispatchClient::new(&channel),
            access: AccessVersion {
                path: self.path.display().to_string(),
                version: self.version.clone(),
            },
        })
    }
}

/// Shared connectors are connectors.
#[async_trait::async_trait]
impl<C: Connector + ?Sized> Connector for Arc<C> {
    async fn connect(&self, machine: &MachineView) -> Result<MachineClients, ExecutorError> {
        (**self).connect(machine).await
    }
}

/// A [`Connector`] that reaches each machine through the connector registered for it:
/// for machines whose access differs, such as one talosconfig per cluster. A machine
/// with none registered cannot be reached ([`ExecutorError::Access`]).
#[derive(Default)]
pub struct ConnectorMap {
    routes: RwLock<BTreeMap<String, Arc<dyn Connector>>>,
}

impl std::fmt::Debug for ConnectorMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let machines: Vec<String> = self
            .routes
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .keys()
            .cloned()
            .collect();
        f.debug_struct("ConnectorMap")
            .field("machines", &machines)
            .finish()
    }
}

impl ConnectorMap {
    /// A map with no machine in it.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Reaches `machine` through `connector` from now on.
    pub fn insert(&self, machine: impl Into<String>, connector: Arc<dyn Connector>) {
        self.routes
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(machine.into(), connector);
    }

    fn get(&self, machine: &str) -> Option<Arc<dyn Connector>> {
        self.routes
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(machine)
            .cloned()
    }
}

#[async_trait::async_trait]
impl Connector for ConnectorMap {
    async fn connect(&self, machine: &MachineView) -> Result<MachineClients, ExecutorError> {
        match self.get(&machine.id) {
            Some(connector) => connector.connect(machine).await,
            None => Err(ExecutorError::Access(format!(
                "no access configuration is registered for machine {}",
                machine.id
            ))),
        }
    }
}
