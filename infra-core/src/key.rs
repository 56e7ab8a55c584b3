//! Keys (references into a fleet) and handles (what a cloud assigned).

use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::{Serialize, Serializer};

use crate::{Conflict, Kind, Merge, Refines};

/// Which fleet a key belongs to. Every builder draws a fresh one.
pub(crate) type FleetId = u64;

/// A kind-erased key: which fleet, and which of its resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId {
    pub(crate) fleet: FleetId,
    pub(crate) index: u32,
}

impl KeyId {
    /// The position of the resource in its fleet's declaration.
    pub fn index(&self) -> usize {
        self.index as usize
    }

    /// A key id for tests and strategies that need one without a fleet.
    #[cfg(any(test, feature = "testing"))]
    pub fn raw(fleet: u64, index: u32) -> KeyId {
        KeyId { fleet, index }
    }
}

/// A typed reference to a resource of kind `K` declared in the same fleet.
///
/// A key is minted by the fleet builder when a resource is declared, and there is no
/// other way to obtain one: a reference is an index into the fleet, never a string, so
/// it cannot dangle, and its kind is part of its type, so it cannot point at a resource
/// of another kind.
///
/// ```
/// use infra_core::{prelude::Key, kinds::{AwsInstance, SecurityGroup}};
/// fn needs_group(_: Key<SecurityGroup>) {}
/// fn typed(group: Key<SecurityGroup>) {
///     needs_group(group);
/// }
/// ```
///
/// ```compile_fail
/// use infra_core::{prelude::Key, kinds::{AwsInstance, SecurityGroup}};
/// fn needs_group(_: Key<SecurityGroup>) {}
/// fn mistyped(instance: Key<AwsInstance>) {
///     needs_group(instance); // a key of another kind is another type
/// }
/// ```
///
/// A name is not a reference, and a key cannot be made up: there is no conversion from
/// a string and no public constructor.
///
/// ```compile_fail
/// use infra_core::{prelude::Key, kinds::SecurityGroup};
/// let _: Key<SecurityGroup> = "web".into();
/// ```
///
/// ```compile_fail
/// use infra_core::{prelude::Key, engine::KeyId, kinds::SecurityGroup};
/// let _: Key<SecurityGroup> = Key::new(KeyId { fleet: 1, index: 0 });
/// ```
///
/// A reference field holds a key, never an expression: a reference cannot be computed
/// from a value known only after apply.
///
/// ```
/// use infra_core::{prelude::Key, kinds::*};
/// fn instance(group: Key<SecurityGroup>) -> AwsInstance {
///     AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Micro), group)
/// }
/// ```
///
/// ```compile_fail
/// use infra_core::{prelude::Expr, kinds::*};
/// let group_id: Expr<String> = Expr::lit("sg-0123".to_owned());
/// let _ = AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Micro), group_id);
/// ```
pub struct Key<K> {
    pub(crate) id: KeyId,
    _kind: PhantomData<fn() -> K>,
}

impl<K> Key<K> {
    pub(crate) fn new(id: KeyId) -> Self {
        Key {
            id,
            _kind: PhantomData,
        }
    }

    /// The kind-erased id of this key.
    pub fn id(&self) -> KeyId {
        self.id
    }

    /// A key for tests and strategies, outside any fleet.
    #[cfg(any(test, feature = "testing"))]
    pub fn raw(fleet: u64, index: u32) -> Self {
        Key::new(KeyId { fleet, index })
    }
}

impl<K> Clone for Key<K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K> Copy for Key<K> {}
impl<K> PartialEq for Key<K> {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl<K> Eq for Key<K> {}
impl<K> std::hash::Hash for Key<K> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}
impl<K: Kind> fmt::Debug for Key<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key<{}>({})", K::ID, render_key(self.id))
    }
}

impl<K> Refines for Key<K> {
    fn refines(&self, other: &Self) -> bool {
        self == other
    }
}

impl<K: Kind> Merge for Key<K> {
    fn merge(&self, other: &Self) -> Result<Self, Conflict> {
        if self == other {
            Ok(*self)
        } else {
            Err(Conflict::between(self, other))
        }
    }
}

impl<K> Serialize for Key<K> {
    /// A key serialises as the `provider/kind/name` of the resource it names, when the
    /// fleet's names are in scope (as they are while a plan serialises), and as `#index`
    /// otherwise.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&render_key(self.id))
    }
}

/// What identifies a declared resource: provider, kind and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ResourceRef {
    /// The provider's id, e.g. `aws`.
    pub provider: &'static str,
    /// The kind's id, e.g. `securityGroup`.
    pub kind: &'static str,
    /// The resource's name, unique within its provider and kind.
    pub name: String,
}

impl fmt::Display for ResourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.provider, self.kind, self.name)
    }
}

/// Where the names in scope come from: a fleet being built, or a built fleet (whose
/// declarations hold them: a fleet keeps one copy of each name).
#[derive(Clone)]
pub(crate) enum Names {
    /// The names of a fleet being built.
    Building(Arc<[ResourceRef]>),
    /// A built fleet's.
    Fleet(Arc<crate::fleet::FleetInner>),
}

impl Names {
    fn get(&self, index: usize) -> Option<&ResourceRef> {
        match self {
            Names::Building(names) => names.get(index),
            Names::Fleet(inner) => inner.resources.get(index).map(|d| &d.reference),
        }
    }
}

thread_local! {
    static NAMES: RefCell<Option<(FleetId, Names)>> = const { RefCell::new(None) };
}

/// Runs `f` with a fleet's resource names in scope, so that keys serialise by name.
pub(crate) fn with_names<R>(fleet: FleetId, names: Names, f: impl FnOnce() -> R) -> R {
    let previous = NAMES.with(|n| n.replace(Some((fleet, names))));
    let out = f();
    NAMES.with(|n| *n.borrow_mut() = previous);
    out
}

pub(crate) fn render_key(id: KeyId) -> String {
    NAMES.with(|n| match &*n.borrow() {
        Some((fleet, names)) if *fleet == id.fleet => names
            .get(id.index())
            .map(|r| r.to_string())
            .unwrap_or_else(|| format!("#{}", id.index)),
        _ => format!("#{}", id.index),
    })
}

/// The identifier a cloud assigned to a resource of kind `K` (an ARN, an id, a name).
///
/// Settling replaces each [`Key`] in a spec by the handle of the resource it names.
#[derive(Serialize)]
#[serde(transparent)]
pub struct Handle<K> {
    value: String,
    #[serde(skip)]
    _kind: PhantomData<fn() -> K>,
}

impl<K> Handle<K> {
    /// Wraps an identifier the cloud returned.
    pub fn new(value: impl Into<String>) -> Self {
        Handle {
            value: value.into(),
            _kind: PhantomData,
        }
    }

    /// The identifier.
    pub fn as_str(&self) -> &str {
        &self.value
    }
}

impl<K> Clone for Handle<K> {
    fn clone(&self) -> Self {
        Handle::new(self.value.clone())
    }
}
impl<K> PartialEq for Handle<K> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}
impl<K> Eq for Handle<K> {}
impl<K> fmt::Debug for Handle<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Handle({:?})", self.value)
    }
}
impl<K> fmt::Display for Handle<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.value)
    }
}
