//! The `talos` provider, its regions (clusters) and the `talosMachine` kind.

use std::fmt;
use std::sync::{Mutex, OnceLock, PoisonError};

use infra_core::prelude::{Expr, Partial, Provider, Region, Spec, Supports};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::store::IdentityKey;

/// The Talos provider: machines whose configuration the controller in this crate
/// governs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Talos;

impl Provider for Talos {
    const ID: &'static str = "talos";
    type Region = TalosCluster;
}

/// A region of the `talos` provider: one Talos cluster, by the name a fleet gives it.
///
/// Clusters are not a fixed list: [`TalosCluster::named`] makes one from a name known
/// at run time. Because a region's code lives for the whole process, each distinct
/// name is kept once for the process's lifetime, and [`Region::all`] answers every
/// cluster named so far in this process (a handful of short strings). The code is the
/// cluster's name; the backend maps it to the Talos cluster ID its machines carry
/// (see [`crate::backend::TalosBackend::cluster`]).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TalosCluster(&'static str);

struct Registry {
    names: Vec<TalosCluster>,
    all: &'static [TalosCluster],
}

fn registry() -> &'static Mutex<Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        Mutex::new(Registry {
            names: Vec::new(),
            all: &[],
        })
    })
}

impl TalosCluster {
    /// The cluster called `name`: 1 to 63 lowercase letters, digits and `-`, starting
    /// with a letter.
    ///
    /// # Errors
    ///
    /// A sentence saying what is wrong with the name.
    pub fn named(name: &str) -> Result<Self, String> {
        infra_core::sdk::default_name_rule(name)
            .map_err(|why| format!("cluster name {name:?} {why}"))?;
        let mut reg = registry().lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = reg.names.iter().find(|c| c.0 == name) {
            return Ok(*found);
        }
        let cluster = TalosCluster(Box::leak(name.to_owned().into_boxed_str()));
        reg.names.push(cluster);
        reg.names.sort();
        reg.all = Box::leak(reg.names.clone().into_boxed_slice());
        Ok(cluster)
    }

    /// The cluster's name.
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.0
    }
}

impl Region for TalosCluster {
    type Provider = Talos;

    fn code(&self) -> &'static str {
        self.0
    }

    fn all() -> &'static [Self] {
        registry()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .all
    }
}

impl fmt::Debug for TalosCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TalosCluster({})", self.0)
    }
}

impl fmt::Display for TalosCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl Serialize for TalosCluster {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for TalosCluster {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        TalosCluster::named(&name).map_err(serde::de::Error::custom)
    }
}

/// The identity key a machine is expected to present (choice §10.26).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MachineKey {
    /// The SMBIOS UUID.
    SmbiosUuid(String),
    /// The Talos node ID.
    NodeId(String),
}

impl From<&IdentityKey> for MachineKey {
    fn from(key: &IdentityKey) -> Self {
        match key {
            IdentityKey::SmbiosUuid(v) => MachineKey::SmbiosUuid(v.clone()),
            IdentityKey::NodeId(v) => MachineKey::NodeId(v.clone()),
        }
    }
}

impl fmt::Display for MachineKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MachineKey::SmbiosUuid(v) => write!(f, "SMBIOS UUID {v}"),
            MachineKey::NodeId(v) => write!(f, "node ID {v}"),
        }
    }
}

/// A Talos worker whose configuration the controller governs.
///
/// The resource's name is the machine's identifier in the controller's inventory, and
/// its region is the cluster it belongs to. The engine never adds, removes or
/// configures a machine directly: an apply turns a difference into a controller plan
/// that waits for an approver (see [`crate::backend`]).
///
/// The fields are compared with the machine's three values (`docs/contract.md` §1), so
/// that a plan line says which difference it is:
///
/// - `release` differs: **pending convergence** — the declared release (which must be
///   the machine's Desired) is not the Applied one. A plan and an approval cure it.
/// - `drift` differs: **drift** — the configuration read from the node is not Applied's
///   and no operation holds the machine. A revert or an adoption cures it.
/// - `identity` differs: the node presents another identity than the one declared;
///   nothing the engine may do cures that.
///
/// A value the node did not give (unreachable, permission denied) is unknown, and an
/// unknown value is never a difference.
///
/// ```
/// use infra_talos::backend::TalosMachine;
/// let worker = TalosMachine::new("rel-2").with_smbios_uuid("4c4c4544-0042");
/// assert_eq!(worker.release.as_lit().map(String::as_str), Some("rel-2"));
/// ```
#[derive(Clone, Debug, PartialEq, Spec)]
#[spec(kind = "talosMachine", observed = TalosMachineObserved)]
pub struct TalosMachine {
    /// The release the machine should run: a published release id, which must be the
    /// machine's Desired release. Compared with the Applied release.
    pub release: Expr<String>,
    /// The identity the machine is expected to present, when declared. Compared with
    /// the identity the node reports (of the kind the inventory records it by).
    pub identity: Partial<Expr<MachineKey>>,
    /// Whether the node's configuration may differ from Applied's: always `false`
    /// ([`TalosMachine::new`] says so). Reported `true` while the node drifts.
    pub drift: Expr<bool>,
}

impl TalosMachine {
    /// A machine that should run `release`, without drift, its identity unsaid.
    pub fn new(release: impl Into<String>) -> Self {
        TalosMachine {
            release: Expr::lit(release.into()),
            identity: Partial::Unknown,
            drift: Expr::lit(false),
        }
    }

    /// The same machine, expected to present this SMBIOS UUID.
    #[must_use]
    pub fn with_smbios_uuid(mut self, uuid: impl Into<String>) -> Self {
        self.identity = Partial::Known(Expr::lit(MachineKey::SmbiosUuid(uuid.into())));
        self
    }

    /// The same machine, expected to present this Talos node ID.
    #[must_use]
    pub fn with_node_id(mut self, node_id: impl Into<String>) -> Self {
        self.identity = Partial::Known(Expr::lit(MachineKey::NodeId(node_id.into())));
        self
    }
}

impl Supports<TalosMachine> for Talos {}

/// What the controller's records and the node say about a machine. Cached between
/// runs; holds digests and identifiers, never configuration or secret values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TalosMachineObserved {
    /// The machine's identifier in the inventory.
    pub machine: String,
    /// The Talos cluster ID it is inventoried under.
    pub cluster_id: String,
    /// Its own Talos endpoint.
    pub endpoint: String,
    /// The identity key it is inventoried under.
    pub identity: MachineKey,
    /// Desired: the release selected for it.
    pub desired_release: Option<String>,
    /// Applied: the release last known to be on the node (`None` for a handed-over
    /// baseline or no baseline at all).
    pub applied_release: Option<String>,
    /// Applied's configuration digest, hex.
    pub applied_digest: Option<String>,
    /// Observed: the configuration digest read from the node, hex (`None`: not read).
    pub observed_digest: Option<String>,
    /// Observed: the running Talos version (`None`: not read).
    pub talos_version: Option<String>,
    /// Desired differs from Applied.
    pub pending_convergence: bool,
    /// Observed differs from Applied with no operation holding the machine (`None`:
    /// it could not be told).
    pub drift: Option<bool>,
    /// The operation holding the machine, if any.
    pub holding_operation: Option<String>,
    /// The open drift record's opening revision, if any.
    pub open_drift: Option<u64>,
}
