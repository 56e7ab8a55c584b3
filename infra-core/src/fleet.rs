//! Fleets: the finite set of resources a declaration names, each placed in a region.
//!
//! A fleet is declared through [`FleetBuilder`]: one mention per resource (its region,
//! its name and its spec), and the typed [`Key`] it returns is how other resources refer
//! to it. [`FleetBuilder::build`] runs every check that needs no network call and is the
//! only way to obtain a [`Fleet`], so a fleet value has unique names, no cycles, and
//! only references into itself.
//!
//! ```
//! use infra_core::{prelude::AwsRegion, prelude::Expr, prelude::Fleet, prelude::Partial, kinds::*};
//!
//! let mut fleet = Fleet::builder("shop");
//! let paris = AwsRegion::EuWest3;
//! let web = fleet.declare(paris, "web", SecurityGroup {
//!     description: "web servers".into(),
//!     vpc_id: Partial::Unknown,
//!     ingress: Expr::lit([Rule::tcp(443, "0.0.0.0/0")].into()),
//!     egress: Partial::Unknown,
//!     tags: Partial::Unknown,
//! });
//! fleet.declare(paris, "app", AwsInstance::new(
//!     Image::Latest,
//!     InstanceType::T3(BurstableSize::Micro),
//!     web,
//! ));
//! let fleet = fleet.build().expect("a sound fleet");
//! assert_eq!(fleet.len(), 2);
//! ```

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use crate::key::{FleetId, KeyId, Names, with_names};
use crate::kinds::{SecretSource, SecretSourceSettled, Secrets, SecretsSettled};
use crate::{
    Conflict, Dep, Env, FieldInfo, Key, Kind, Merge, NotYet, Provider, Refines, Region,
    ResourceRef, SecretString, Status, Supports, default_name_rule,
};

/// A spec with its kind erased, as the fleet and the plan hold it.
pub(crate) trait ErasedSpec: Any + Send + Sync {
    fn deps(&self) -> Vec<Dep>;
    /// Settles fully (the apply path), or says what is missing.
    fn settle_dyn(&self, env: &dyn Env) -> Result<Box<dyn Any + Send + Sync>, NotYet>;
    /// Serialises a value produced by `settle_dyn`.
    fn settled_json_fn(&self) -> fn(&(dyn Any + Send + Sync)) -> serde_json::Value;
    /// Settles what can be settled now, as the JSON of the kind's `Reported` type.
    fn lenient_json(&self, env: &dyn Env) -> serde_json::Map<String, serde_json::Value>;
    fn to_json(&self) -> serde_json::Value;
    fn check(&self, problems: &mut Vec<String>);
    fn as_any(&self) -> &dyn Any;
    fn refines_dyn(&self, other: &dyn ErasedSpec) -> bool;
    fn merge_dyn(&self, other: &dyn ErasedSpec) -> Result<Arc<dyn ErasedSpec>, Conflict>;
    /// Whether this is a secret whose value is composed from other values of the
    /// fleet: its value is compared with the one the cloud holds to see whether to write
    /// it again.
    fn composes_secret(&self) -> bool;
    /// The composed value of a spec settled by `settle_dyn`, for a composed secret.
    fn composed_secret(&self, settled: &(dyn Any + Send + Sync)) -> Option<SecretString>;
}

impl<K: Kind> ErasedSpec for K {
    fn settle_dyn(&self, env: &dyn Env) -> Result<Box<dyn Any + Send + Sync>, NotYet> {
        crate::Settle::settle(self, env).map(|s| Box::new(s) as Box<dyn Any + Send + Sync>)
    }

    fn settled_json_fn(&self) -> fn(&(dyn Any + Send + Sync)) -> serde_json::Value {
        crate::backend::settled_json::<K>
    }

    fn lenient_json(&self, env: &dyn Env) -> serde_json::Map<String, serde_json::Value> {
        match serde_json::to_value(crate::Spec::settle_lenient(self, env)) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        }
    }

    fn deps(&self) -> Vec<Dep> {
        let mut out = Vec::new();
        crate::Field::deps(self, &mut out);
        out
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    fn check(&self, problems: &mut Vec<String>) {
        Kind::check(self, problems);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn refines_dyn(&self, other: &dyn ErasedSpec) -> bool {
        other
            .as_any()
            .downcast_ref::<K>()
            .is_some_and(|o| self.refines(o))
    }

    fn composes_secret(&self) -> bool {
        (self as &dyn Any)
            .downcast_ref::<Secrets>()
            .is_some_and(|s| matches!(s.value_from, SecretSource::Composed(_)))
    }

    fn composed_secret(&self, settled: &(dyn Any + Send + Sync)) -> Option<SecretString> {
        match &settled.downcast_ref::<SecretsSettled>()?.value_from {
            SecretSourceSettled::Composed(value) => Some(value.clone()),
            _ => None,
        }
    }

    fn merge_dyn(&self, other: &dyn ErasedSpec) -> Result<Arc<dyn ErasedSpec>, Conflict> {
        match other.as_any().downcast_ref::<K>() {
            Some(o) => Ok(Arc::new(self.merge(o)?)),
            None => Err(Conflict::rendered(
                format!("a spec of kind {}", K::ID),
                "a spec of another kind".into(),
            )),
        }
    }
}

/// A spec of any kind, shared. Refines and merges as the kind's own spec does.
#[derive(Clone)]
pub(crate) struct DynSpec(pub(crate) Arc<dyn ErasedSpec>);

impl Refines for DynSpec {
    fn refines(&self, other: &Self) -> bool {
        self.0.refines_dyn(&*other.0)
    }
}

impl Merge for DynSpec {
    fn merge(&self, other: &Self) -> Result<Self, Conflict> {
        self.0.merge_dyn(&*other.0).map(DynSpec)
    }
}

impl Serialize for DynSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.to_json().serialize(s)
    }
}

/// What the engine needs to know about a kind without its type.
#[derive(Clone, Copy)]
pub struct KindMeta {
    /// The kind's id.
    pub id: &'static str,
    /// The kind's divergence table.
    pub fields: &'static [FieldInfo],
    check_name: fn(&str) -> Result<(), String>,
    /// Reads a cached observed state back into the kind's `Observed` type.
    pub(crate) decode_observed:
        fn(serde_json::Value) -> Result<Box<crate::env::ObservedValue>, serde_json::Error>,
}

impl KindMeta {
    /// The metadata of kind `K`.
    pub fn of<K: Kind>() -> KindMeta {
        MetaOf::<K>::META
    }
}

/// The metadata of kind `K`, made once: each declaration refers to it rather than
/// holding a copy.
struct MetaOf<K>(std::marker::PhantomData<K>);

impl<K: Kind> MetaOf<K> {
    const META: KindMeta = KindMeta {
        id: K::ID,
        fields: K::FIELDS,
        check_name: K::check_name,
        decode_observed: decode_observed::<K>,
    };
}

/// Reads a cached observed state of a `K` back into its type.
fn decode_observed<K: Kind>(
    v: serde_json::Value,
) -> Result<Box<crate::env::ObservedValue>, serde_json::Error> {
    serde_json::from_value::<K::Observed>(v).map(|o| Box::new(o) as Box<crate::env::ObservedValue>)
}

impl fmt::Debug for KindMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id)
    }
}

pub(crate) struct Declared {
    pub(crate) reference: ResourceRef,
    pub(crate) region: &'static str,
    pub(crate) kind: &'static KindMeta,
    pub(crate) target: Status<DynSpec>,
}

/// A resource released from the fleet's records without touching the cloud.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Released {
    /// The provider, kind and name of the released resource.
    pub resource: ResourceRef,
}

/// A resource the declaration leaves alone on purpose: declared, found in the cloud
/// without this fleet's ownership marker, and never adopted, changed or deleted. A run
/// reports it as excluded (not as a failure), and reports an exclusion that matches
/// nothing, so that the list cannot rot. See [`FleetBuilder::exclude`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Exclusion {
    /// The provider's id (`aws`).
    pub provider: &'static str,
    /// The kind's id (`securityGroup`).
    pub kind: &'static str,
    /// The resource's name.
    pub name: String,
    /// The region's code.
    pub region: &'static str,
    /// Why it is left alone, in the author's words.
    pub reason: String,
}

impl fmt::Display for Exclusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{} ({})",
            self.provider, self.kind, self.name, self.region
        )
    }
}

pub(crate) struct FleetInner {
    pub(crate) id: FleetId,
    pub(crate) name: String,
    pub(crate) resources: Vec<Declared>,
    pub(crate) forgets: Vec<Released>,
    /// Resources no run may delete or replace (`prevent_destroy`).
    pub(crate) protected: BTreeSet<ResourceRef>,
    /// The boundary's exclusion list.
    pub(crate) exclusions: Vec<Exclusion>,
    /// The outputs, in declaration order.
    pub(crate) outputs: Vec<crate::output::Declared>,
    pub(crate) accounts: BTreeMap<&'static str, BTreeSet<String>>,
    /// Dependencies of each resource, by index, without repeats.
    pub(crate) deps: Vec<Vec<usize>>,
    /// A build order: every resource after what it depends on.
    pub(crate) order: Vec<usize>,
}

/// A checked declaration: every resource, its placement and its target.
#[derive(Clone)]
pub struct Fleet {
    pub(crate) inner: Arc<FleetInner>,
}

impl fmt::Debug for Fleet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fleet")
            .field("name", &self.inner.name)
            .field(
                "resources",
                &self
                    .inner
                    .resources
                    .iter()
                    .map(|d| &d.reference)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

static NEXT_FLEET: AtomicU64 = AtomicU64::new(1);

impl Fleet {
    /// Starts declaring a fleet. The name identifies the fleet in ownership markers and
    /// records: lowercase letters, digits and `-`.
    pub fn builder(name: impl Into<String>) -> FleetBuilder {
        FleetBuilder {
            id: NEXT_FLEET.fetch_add(1, Ordering::Relaxed),
            name: name.into(),
            slots: Vec::new(),
            forgets: Vec::new(),
            protected: BTreeSet::new(),
            exclusions: Vec::new(),
            outputs: Vec::new(),
            limits: Vec::new(),
            accounts: BTreeMap::new(),
            misuse: Vec::new(),
        }
    }

    /// The fleet's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// How many resources the fleet declares.
    pub fn len(&self) -> usize {
        self.inner.resources.len()
    }

    /// Whether the fleet declares nothing.
    pub fn is_empty(&self) -> bool {
        self.inner.resources.is_empty()
    }

    /// The declared resources, in declaration order.
    pub fn resources(&self) -> impl ExactSizeIterator<Item = ResourceView<'_>> {
        self.inner
            .resources
            .iter()
            .enumerate()
            .map(|(index, d)| ResourceView {
                index,
                declared: d,
                deps: &self.inner.deps[index],
            })
    }

    /// The resource a key names, if the key belongs to this fleet.
    pub fn resource<K>(&self, key: Key<K>) -> Option<ResourceView<'_>> {
        self.index_of(key.id())
            .and_then(|index| self.resources().nth(index))
    }

    /// The names of each (provider, kind) pair's keys: the finite key sets of the fleet.
    pub fn keys(&self) -> BTreeMap<(&'static str, &'static str), Vec<&str>> {
        let mut out: BTreeMap<_, Vec<&str>> = BTreeMap::new();
        for d in &self.inner.resources {
            out.entry((d.reference.provider, d.reference.kind))
                .or_default()
                .push(d.reference.name.as_str());
        }
        out
    }

    /// Every region the fleet places something in, per provider.
    pub fn regions(&self) -> BTreeMap<&'static str, Vec<&'static str>> {
        let mut out: BTreeMap<_, Vec<&'static str>> = BTreeMap::new();
        for d in &self.inner.resources {
            let regions = out.entry(d.reference.provider).or_default();
            if !regions.contains(&d.region) {
                regions.push(d.region);
            }
        }
        for regions in out.values_mut() {
            regions.sort_unstable();
        }
        out
    }

    /// The accounts the fleet may touch, per provider (empty: not restricted).
    pub fn accounts(&self) -> &BTreeMap<&'static str, BTreeSet<String>> {
        &self.inner.accounts
    }

    /// The providers the fleet declares resources on.
    pub fn providers(&self) -> BTreeSet<&'static str> {
        self.inner
            .resources
            .iter()
            .map(|d| d.reference.provider)
            .collect()
    }

    /// The resources released by `forget`.
    pub fn forgets(&self) -> &[Released] {
        &self.inner.forgets
    }

    /// The resources declared with `prevent_destroy`: no run deletes or replaces them.
    pub fn protected(&self) -> &BTreeSet<ResourceRef> {
        &self.inner.protected
    }

    /// The names of the fleet's outputs, in declaration order.
    pub fn outputs(&self) -> impl Iterator<Item = &str> {
        self.inner.outputs.iter().map(|o| o.name.as_str())
    }

    /// The exclusion list: declared resources found without this fleet's marker that
    /// are left alone on purpose.
    pub fn exclusions(&self) -> &[Exclusion] {
        &self.inner.exclusions
    }

    /// The exclusion naming the resource of this provider, kind, name and region.
    pub fn exclusion(
        &self,
        provider: &str,
        kind: &str,
        name: &str,
        region: &str,
    ) -> Option<&Exclusion> {
        self.inner.exclusions.iter().find(|e| {
            e.provider == provider && e.kind == kind && e.name == name && e.region == region
        })
    }

    /// Whether `prevent_destroy` protects the resource of this provider, kind and name.
    pub fn is_protected(&self, provider: &str, kind: &str, name: &str) -> bool {
        self.inner
            .protected
            .iter()
            .any(|r| r.provider == provider && r.kind == kind && r.name == name)
    }

    /// A build order of resource indices: each after everything it depends on.
    /// Tearing down runs it backwards.
    pub fn build_order(&self) -> &[usize] {
        &self.inner.order
    }

    pub(crate) fn index_of(&self, key: KeyId) -> Option<usize> {
        (key.fleet == self.inner.id && key.index() < self.inner.resources.len())
            .then_some(key.index())
    }

    /// Runs `f` with this fleet's names in scope, so that keys serialise by name.
    pub(crate) fn with_names<R>(&self, f: impl FnOnce() -> R) -> R {
        with_names(self.inner.id, Names::Fleet(Arc::clone(&self.inner)), f)
    }

    /// The fleet's declared target for every key.
    pub fn plan(&self) -> crate::Plan {
        crate::Plan::declared(self)
    }

    /// Every resource absent: the teardown of the whole fleet, what `destroy` applies.
    /// Its order comes from the declaration's references, read backwards.
    pub fn teardown(&self) -> crate::Plan {
        crate::Plan::absent(self)
    }
}

/// One declared resource, seen through its fleet.
#[derive(Clone, Copy)]
pub struct ResourceView<'a> {
    index: usize,
    declared: &'a Declared,
    deps: &'a [usize],
}

impl<'a> ResourceView<'a> {
    /// The resource's position in the declaration.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Provider, kind and name.
    pub fn reference(&self) -> &'a ResourceRef {
        &self.declared.reference
    }

    /// The region code it is placed in.
    pub fn region(&self) -> &'static str {
        self.declared.region
    }

    /// Its kind's metadata.
    pub fn kind(&self) -> KindMeta {
        *self.declared.kind
    }

    /// Its declared status: `present`, `absent` or `unmanaged`.
    pub fn status(&self) -> &'static str {
        self.declared.target.name()
    }

    /// The indices of the resources it depends on.
    pub fn deps(&self) -> &'a [usize] {
        self.deps
    }

    /// Its declared spec, if present and of kind `K`.
    pub fn spec<K: Kind>(&self) -> Option<&'a K> {
        self.declared
            .target
            .present()
            .and_then(|s| s.0.as_any().downcast_ref::<K>())
    }

    /// Its declared spec as it serialises (camelCase, unsaid fields left out; keys as
    /// `provider/kind/name` inside [`Fleet::with_names`]), if present.
    #[cfg(feature = "cli")]
    pub(crate) fn spec_json(&self) -> Option<serde_json::Value> {
        self.declared.target.present().map(|s| s.0.to_json())
    }
}

enum Slot {
    Reserved,
    Defined(Status<DynSpec>),
}

struct PendingResource {
    reference: ResourceRef,
    region: &'static str,
    kind: &'static KindMeta,
    slot: Slot,
}

/// Declares a fleet, one resource at a time. See [`Fleet`] for what a fleet checks and holds.
pub struct FleetBuilder {
    id: FleetId,
    name: String,
    slots: Vec<PendingResource>,
    forgets: Vec<Released>,
    protected: BTreeSet<ResourceRef>,
    exclusions: Vec<Exclusion>,
    outputs: Vec<crate::output::Declared>,
    limits: Vec<(&'static str, &'static str, usize)>,
    accounts: BTreeMap<&'static str, BTreeSet<String>>,
    misuse: Vec<Problem>,
}

impl fmt::Debug for FleetBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetBuilder")
            .field("name", &self.name)
            .field("resources", &self.slots.len())
            .finish()
    }
}

impl FleetBuilder {
    fn push<R: Region, K: Kind>(&mut self, region: R, name: String, slot: Slot) -> Key<K> {
        let index = u32::try_from(self.slots.len()).expect("fewer than 2^32 resources");
        self.slots.push(PendingResource {
            reference: ResourceRef {
                provider: <R::Provider as Provider>::ID,
                kind: K::ID,
                name,
            },
            region: region.code(),
            kind: &MetaOf::<K>::META,
            slot,
        });
        Key::new(KeyId {
            fleet: self.id,
            index,
        })
    }

    /// Declares a resource that must exist, refining `spec`, placed in `region`. The
    /// region's type names the provider, which must realise the kind.
    ///
    /// Every call mints a new key, at a new position of the fleet: two declarations are
    /// two keys, even under one name (equal names are a separate question, which
    /// [`build`](Self::build) refuses).
    ///
    /// ```
    /// use infra_core::{prelude::{AwsRegion, Fleet}, kinds::ObjectStore};
    /// let mut fleet = Fleet::builder("shop");
    /// let one = fleet.declare(AwsRegion::EuWest3, "shop-assets", ObjectStore::new());
    /// let two = fleet.declare(AwsRegion::EuWest3, "shop-assets", ObjectStore::new());
    /// assert!(one != two && one.id() != two.id());
    /// assert!(fleet.build().is_err(), "equal names are checked, not structural");
    /// ```
    ///
    /// Nothing else mints a key: a second key at the position of one already declared
    /// cannot be made, so no position can hold two resources.
    ///
    /// ```compile_fail,E0624
    /// use infra_core::{prelude::{AwsRegion, Fleet, Key}, kinds::ObjectStore};
    /// let mut fleet = Fleet::builder("shop");
    /// let one = fleet.declare(AwsRegion::EuWest3, "shop-assets", ObjectStore::new());
    /// let _: Key<ObjectStore> = Key::new(one.id());
    /// ```
    pub fn declare<R, K>(&mut self, region: R, name: impl Into<String>, spec: K) -> Key<K>
    where
        R: Region,
        K: Kind,
        R::Provider: Supports<K>,
    {
        let slot = Slot::Defined(Status::Present(DynSpec(Arc::new(spec))));
        self.push(region, name.into(), slot)
    }

    /// Declares a resource that must not exist: the apply deletes it if it is there and
    /// carries this fleet's ownership marker.
    pub fn declare_absent<R, K>(&mut self, region: R, name: impl Into<String>) -> Key<K>
    where
        R: Region,
        K: Kind,
        R::Provider: Supports<K>,
    {
        self.push(region, name.into(), Slot::Defined(Status::Absent))
    }

    /// Declares a resource whose spec is given later with [`define`](Self::define), so
    /// that a resource declared earlier can refer to it.
    pub fn reserve<R, K>(&mut self, region: R, name: impl Into<String>) -> Key<K>
    where
        R: Region,
        K: Kind,
        R::Provider: Supports<K>,
    {
        self.push(region, name.into(), Slot::Reserved)
    }

    /// Gives the spec of a reserved resource.
    pub fn define<K: Kind>(&mut self, key: Key<K>, spec: K) {
        let id = key.id();
        match self
            .slots
            .get_mut(id.index())
            .filter(|_| id.fleet == self.id)
        {
            None => self.misuse.push(Problem::ForeignKey {
                resource: None,
                detail: "`define` was given a key of another fleet".into(),
            }),
            Some(pending) => match pending.slot {
                Slot::Reserved => {
                    pending.slot = Slot::Defined(Status::Present(DynSpec(Arc::new(spec))))
                }
                Slot::Defined(_) => self.misuse.push(Problem::DefinedTwice {
                    resource: pending.reference.clone(),
                }),
            },
        }
    }

    /// Releases a resource from the fleet's records without touching the cloud: its
    /// ledger row is dropped, and it is no longer deleted as an orphan.
    pub fn forget<P, K>(&mut self, name: impl Into<String>)
    where
        P: Provider + Supports<K>,
        K: Kind,
    {
        self.forgets.push(Released {
            resource: ResourceRef {
                provider: P::ID,
                kind: K::ID,
                name: name.into(),
            },
        });
    }

    /// Protects a declared resource with `prevent_destroy`: any run that would delete
    /// or replace it — `destroy`, a declaration made absent, a change to a field that
    /// cannot change in place, `--replace` — is refused before its first change, even
    /// with `--force`. Updates in place still run.
    pub fn prevent_destroy<K: Kind>(&mut self, key: Key<K>) {
        let id = key.id();
        match self.slots.get(id.index()).filter(|_| id.fleet == self.id) {
            None => self.misuse.push(Problem::ForeignKey {
                resource: None,
                detail: "`prevent_destroy` was given a key of another fleet".into(),
            }),
            Some(pending) => {
                self.protected.insert(pending.reference.clone());
            }
        }
    }

    /// Protects a resource by provider, kind and name, declared or not: the form that
    /// outlives its declaration, so that removing the resource's line does not prune it
    /// (the apply is refused instead) until this line goes too.
    ///
    /// ```
    /// use infra_core::kinds::*;
    /// use infra_core::prelude::*;
    ///
    /// let mut f = Fleet::builder("shop");
    /// let paris = AwsRegion::EuWest3;
    /// let password = f.declare(paris, "app-db-password", Secrets::generated(32));
    /// let db = f.declare(paris, "app-db", Postgres::classic(PostgresClassic {
    ///     engine_version: "16",
    ///     instance_class: "db.t4g.micro",
    ///     master_username: "app",
    ///     master_password: password,
    /// }));
    /// f.prevent_destroy(db);
    /// f.prevent_destroy_of::<Aws, ObjectStore>("an-old-bucket");
    /// let fleet = f.build().unwrap();
    /// assert!(fleet.is_protected("aws", "postgres", "app-db"));
    /// assert!(fleet.is_protected("aws", "objectStore", "an-old-bucket"));
    /// assert!(!fleet.is_protected("aws", "secrets", "app-db-password"));
    /// ```
    pub fn prevent_destroy_of<P, K>(&mut self, name: impl Into<String>)
    where
        P: Provider + Supports<K>,
        K: Kind,
    {
        self.protected.insert(ResourceRef {
            provider: P::ID,
            kind: K::ID,
            name: name.into(),
        });
    }

    /// Declares an output: a named value computed from what was observed of the fleet's
    /// resources, printed by the `output` verb from the last observation the records
    /// keep. It may read observed states (`Expr::observed`), never a secret: a secret
    /// is an output only as a secret, with [`secret_output`](Self::secret_output).
    ///
    /// ```
    /// use infra_core::kinds::*;
    /// use infra_core::prelude::*;
    ///
    /// let mut f = Fleet::builder("shop");
    /// let assets = f.declare(AwsRegion::EuWest3, "shop-assets", ObjectStore::new());
    /// f.output("assets-id", Expr::observed(assets).map(|o: &ObjectStoreObserved| o.id.clone()));
    /// let fleet = f.build().unwrap();
    /// assert_eq!(fleet.outputs().collect::<Vec<_>>(), ["assets-id"]);
    /// ```
    pub fn output<T: crate::Value>(&mut self, name: impl Into<String>, value: crate::Expr<T>) {
        self.outputs.push(crate::output::Declared {
            name: name.into(),
            source: crate::output::Source::Plain(Arc::new(value)),
        });
    }

    /// Declares a secret output: the value of one of the fleet's secrets. It is never
    /// shown, recorded or logged, except by `output --show-secret NAME`, which reads
    /// that one value from its cloud.
    ///
    /// ```
    /// use infra_core::kinds::*;
    /// use infra_core::prelude::*;
    ///
    /// let mut f = Fleet::builder("quickstart");
    /// let paris = AwsRegion::EuWest3;
    /// let password = f.declare(paris, "app-db-password", Secrets::generated(32));
    /// let db = f.declare(paris, "app-db", Postgres::classic(PostgresClassic {
    ///     engine_version: "16",
    ///     instance_class: "db.t4g.micro",
    ///     master_username: "app",
    ///     master_password: password,
    /// }));
    /// let endpoint = Expr::observed(db).map(|o: &PostgresObserved| o.endpoint.clone());
    /// f.output("db-endpoint", endpoint);
    /// f.secret_output("db-password", password);
    /// let fleet = f.build().unwrap();
    /// assert_eq!(fleet.outputs().collect::<Vec<_>>(), ["db-endpoint", "db-password"]);
    /// ```
    pub fn secret_output(&mut self, name: impl Into<String>, secret: Key<Secrets>) {
        let id = secret.id();
        if id.fleet != self.id || id.index() >= self.slots.len() {
            self.misuse.push(Problem::ForeignKey {
                resource: None,
                detail: "`secret_output` was given a key of another fleet".into(),
            });
            return;
        }
        self.outputs.push(crate::output::Declared {
            name: name.into(),
            source: crate::output::Source::Secret(id.index()),
        });
    }

    /// Puts a resource on the boundary's exclusion list: when the resource declared with
    /// this kind, name and region exists without this fleet's ownership marker, it is
    /// reported as excluded — never adopted, changed or deleted, and no failure — with
    /// `reason`. Without an entry such a resource is a failure of every run. An entry
    /// that matches nothing (no such declaration, the resource absent or carrying a
    /// marker) is reported as a warning by every plan. There is no way to adopt such a
    /// resource by writing the marker onto it: delete it and let the fleet create it,
    /// or exclude it.
    ///
    /// ```
    /// use infra_core::kinds::*;
    /// use infra_core::prelude::*;
    ///
    /// let mut f = Fleet::builder("shop");
    /// f.declare(AwsRegion::EuWest3, "shop-assets", ObjectStore::new());
    /// f.exclude::<_, ObjectStore>(
    ///     AwsRegion::EuWest3,
    ///     "shop-assets",
    ///     "made by hand before this fleet; the data team owns it",
    /// );
    /// let fleet = f.build().unwrap();
    /// assert!(fleet.exclusion("aws", "objectStore", "shop-assets", "eu-west-3").is_some());
    /// ```
    pub fn exclude<R, K>(&mut self, region: R, name: impl Into<String>, reason: impl Into<String>)
    where
        R: Region,
        K: Kind,
        R::Provider: Supports<K>,
    {
        self.exclusions.push(Exclusion {
            provider: <R::Provider as Provider>::ID,
            kind: K::ID,
            name: name.into(),
            region: region.code(),
            reason: reason.into(),
        });
    }

    /// Names an account (project, organisation) of provider `P` this fleet may touch.
    /// Once a provider has one, a backend authenticated in any other account is refused
    /// before anything is listed.
    pub fn account<P: Provider>(&mut self, id: impl Into<String>) {
        self.accounts.entry(P::ID).or_default().insert(id.into());
    }

    /// Caps how many resources of kind `K` the fleet may declare on provider `P` (a
    /// quota of the account, or a budget of the team). Exceeding it is a problem found
    /// by [`build`](Self::build).
    pub fn limit<P, K>(&mut self, most: usize)
    where
        P: Provider + Supports<K>,
        K: Kind,
    {
        self.limits.push((P::ID, K::ID, most));
    }

    /// Checks the declaration and returns the fleet, or every problem found.
    ///
    /// Nothing here touches a network. The checks: the fleet's and each resource's name;
    /// names unique per provider and kind; every reserved resource defined; every
    /// reference into this fleet; no cycle of references; each kind's own checks (a
    /// composed secret that reads nothing, a capacity range upside down, …); and no
    /// `forget` of a resource that is still declared; and the limits set with
    /// [`limit`](Self::limit).
    pub fn build(self) -> Result<Fleet, CheckReport> {
        let mut problems = self.misuse;
        if let Err(why) = default_name_rule(&self.name) {
            problems.push(Problem::FleetName {
                name: self.name.clone(),
                why,
            });
        }

        let mut seen: HashMap<ResourceRef, &'static str> = HashMap::new();
        for p in &self.slots {
            if let Err(why) = (p.kind.check_name)(&p.reference.name) {
                problems.push(Problem::BadName {
                    resource: p.reference.clone(),
                    why,
                });
            }
            if let Some(first) = seen.insert(p.reference.clone(), p.region) {
                problems.push(Problem::DuplicateName {
                    resource: p.reference.clone(),
                    regions: [first, p.region],
                });
            }
        }

        let mut resources = Vec::with_capacity(self.slots.len());
        for p in self.slots {
            let target = match p.slot {
                Slot::Defined(target) => target,
                Slot::Reserved => {
                    problems.push(Problem::NeverDefined {
                        resource: p.reference.clone(),
                    });
                    Status::Unmanaged
                }
            };
            resources.push(Declared {
                reference: p.reference,
                region: p.region,
                kind: p.kind,
                target,
            });
        }

        let names: Arc<[ResourceRef]> = resources.iter().map(|d| d.reference.clone()).collect();
        let deps = resolve_deps(self.id, &resources, &mut problems);

        for d in &resources {
            if let Status::Present(spec) = &d.target {
                let mut found = Vec::new();
                with_names(self.id, Names::Building(Arc::clone(&names)), || {
                    spec.0.check(&mut found)
                });
                problems.extend(found.into_iter().map(|detail| Problem::Invalid {
                    resource: d.reference.clone(),
                    detail,
                }));
            }
        }

        let order = match crate::graph::topological_order(&deps) {
            Ok(order) => order,
            Err(cycle) => {
                problems.push(Problem::Cycle {
                    path: cycle.iter().map(|&i| names[i].clone()).collect(),
                });
                Vec::new()
            }
        };

        for &(provider, kind, most) in &self.limits {
            let count = resources
                .iter()
                .filter(|d| d.reference.provider == provider && d.reference.kind == kind)
                .count();
            if count > most {
                problems.push(Problem::OverLimit {
                    provider,
                    kind,
                    count,
                    most,
                });
            }
        }

        for released in &self.forgets {
            if seen.contains_key(&released.resource) {
                problems.push(Problem::ForgetStillDeclared {
                    resource: released.resource.clone(),
                });
            }
        }

        check_outputs(self.id, resources.len(), &self.outputs, &mut problems);
        for e in &self.exclusions {
            if e.reason.trim().is_empty() {
                problems.push(Problem::Invalid {
                    resource: ResourceRef {
                        provider: e.provider,
                        kind: e.kind,
                        name: e.name.clone(),
                    },
                    detail: format!(
                        "excluded in {} without a reason: say why it is left alone",
                        e.region
                    ),
                });
            }
        }

        if !problems.is_empty() {
            return Err(CheckReport {
                fleet: self.name,
                problems,
            });
        }
        let mut forgets = self.forgets;
        forgets.sort();
        forgets.dedup();
        Ok(Fleet {
            inner: Arc::new(FleetInner {
                id: self.id,
                name: self.name,
                resources,
                forgets,
                protected: self.protected,
                exclusions: {
                    let mut e = self.exclusions;
                    e.sort();
                    e.dedup();
                    e
                },
                outputs: self.outputs,
                accounts: self.accounts,
                deps,
                order,
            }),
        })
    }
}

/// The outputs' own problems: a name given twice or not a name, a read of another
/// fleet's resource, a secret read by a plain output.
fn check_outputs(
    fleet: FleetId,
    resources: usize,
    outputs: &[crate::output::Declared],
    problems: &mut Vec<Problem>,
) {
    let mut seen = BTreeSet::new();
    for o in outputs {
        let mut problem = |detail: &str| {
            problems.push(Problem::Output {
                name: o.name.clone(),
                detail: detail.to_owned(),
            })
        };
        if !seen.insert(o.name.as_str()) {
            problem("declared twice; give each output a name of its own");
        }
        if o.name.is_empty()
            || !o
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            problem("an output's name is letters, digits, `-` and `_`");
        }
        if let crate::output::Source::Plain(expr) = &o.source {
            for dep in expr.deps() {
                let key = dep.key();
                if key.fleet != fleet || key.index() >= resources {
                    problem("it reads a resource of another fleet");
                } else if matches!(dep, crate::env::Dep::Secret(_)) {
                    problem(
                        "it reads a secret's value, which an output may hold only as a \
                         secret: declare it with `secret_output`",
                    );
                }
            }
        }
    }
}

/// Each resource's dependencies as indices; references to another fleet are problems.
fn resolve_deps(
    fleet: FleetId,
    resources: &[Declared],
    problems: &mut Vec<Problem>,
) -> Vec<Vec<usize>> {
    resources
        .iter()
        .map(|d| match &d.target {
            Status::Present(spec) => {
                let mut out: Vec<usize> = Vec::new();
                for dep in spec.0.deps() {
                    let key = dep.key();
                    if key.fleet != fleet || key.index() >= resources.len() {
                        problems.push(Problem::ForeignKey {
                            resource: Some(d.reference.clone()),
                            detail: "it refers to a resource of another fleet".into(),
                        });
                    } else if !out.contains(&key.index()) {
                        out.push(key.index());
                    }
                }
                out
            }
            _ => Vec::new(),
        })
        .collect()
}

/// Something the checks before any network call refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "problem")]
#[non_exhaustive]
pub enum Problem {
    /// An output is not acceptable.
    Output {
        /// The output's name.
        name: String,
        /// What is wrong.
        detail: String,
    },
    /// The fleet's own name is not acceptable.
    FleetName {
        /// The name given.
        name: String,
        /// Why not.
        why: String,
    },
    /// A resource's name is not acceptable for its kind.
    BadName {
        /// The resource.
        resource: ResourceRef,
        /// Why not.
        why: String,
    },
    /// Two resources of one provider and kind share a name.
    DuplicateName {
        /// The name, with its provider and kind.
        resource: ResourceRef,
        /// Where the first and the second are placed.
        regions: [&'static str; 2],
    },
    /// A resource was reserved and never defined.
    NeverDefined {
        /// The resource.
        resource: ResourceRef,
    },
    /// A reserved resource was defined twice.
    DefinedTwice {
        /// The resource.
        resource: ResourceRef,
    },
    /// A key of another fleet was used.
    ForeignKey {
        /// The resource whose spec holds it, when there is one.
        resource: Option<ResourceRef>,
        /// What happened.
        detail: String,
    },
    /// References form a cycle: no order can create them.
    Cycle {
        /// The resources around the cycle; each depends on the next, and the last on
        /// the first.
        path: Vec<ResourceRef>,
    },
    /// A kind's own check refused a spec.
    Invalid {
        /// The resource.
        resource: ResourceRef,
        /// What is wrong, naming the field, and what to do.
        detail: String,
    },
    /// More resources of one provider and kind than the fleet's limit allows.
    OverLimit {
        /// The provider.
        provider: &'static str,
        /// The kind.
        kind: &'static str,
        /// How many are declared.
        count: usize,
        /// The limit.
        most: usize,
    },
    /// A resource is both declared and released with `forget`.
    ForgetStillDeclared {
        /// The resource.
        resource: ResourceRef,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::FleetName { name, why } => {
                write!(f, "fleet name {name:?} {why}")
            }
            Problem::Output { name, detail } => write!(f, "output `{name}`: {detail}"),
            Problem::BadName { resource, why } => {
                write!(f, "{resource}: the name {why}")
            }
            Problem::DuplicateName { resource, regions } => write!(
                f,
                "{resource}: declared twice (in {} and in {}); names are unique per provider \
                 and kind, so rename one",
                regions[0], regions[1]
            ),
            Problem::NeverDefined { resource } => write!(
                f,
                "{resource}: reserved but never defined; give its spec with `define`"
            ),
            Problem::DefinedTwice { resource } => {
                write!(f, "{resource}: defined twice; keep one `define`")
            }
            Problem::ForeignKey {
                resource: Some(r),
                detail,
            } => write!(
                f,
                "{r}: {detail}; use the keys this fleet's builder returned"
            ),
            Problem::ForeignKey {
                resource: None,
                detail,
            } => write!(f, "{detail}; use the keys this fleet's builder returned"),
            Problem::Cycle { path } => {
                write!(f, "references form a cycle: ")?;
                for r in path {
                    write!(f, "{r} → ")?;
                }
                match path.first() {
                    Some(first) => write!(f, "{first}")?,
                    None => f.write_str("(empty)")?,
                }
                f.write_str("; break it by removing one reference")
            }
            Problem::Invalid { resource, detail } => write!(f, "{resource}: {detail}"),
            Problem::OverLimit {
                provider,
                kind,
                count,
                most,
            } => write!(
                f,
                "{provider}/{kind}: {count} declared, over the fleet's limit of {most}; \
                 declare fewer or raise the limit"
            ),
            Problem::ForgetStillDeclared { resource } => write!(
                f,
                "{resource}: released with `forget` but still declared; remove one of the two"
            ),
        }
    }
}

/// Every problem the checks found in one fleet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// The fleet's name.
    pub fleet: String,
    /// The problems, in the order the checks ran.
    pub problems: Vec<Problem>,
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        write!(
            f,
            "fleet `{}` has {n} problem{}:",
            self.fleet,
            if n == 1 { "" } else { "s" }
        )?;
        for p in &self.problems {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CheckReport {}
