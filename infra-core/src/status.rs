//! `Status<V>`: what a plan says about one key.

use serde::Serialize;

use crate::{Conflict, Merge, Refines};

/// The target for one key of a fleet.
///
/// `Unmanaged` is the bottom: "not my business, anything goes". `Absent` means the
/// resource must not exist (a delete); `Present(v)` that it must exist, refining `v`
/// (a create or an update). There is no top: an inconsistent target is not a value one
/// can hold, it only appears as a [`Conflict`] when two writers' statuses are merged.
///
/// ```
/// use infra_core::prelude::Status;
/// let _ = [Status::<u32>::Unmanaged, Status::Absent, Status::Present(3)];
/// ```
///
/// ```compile_fail
/// use infra_core::prelude::Status;
/// // There is no "conflicting" status to write down.
/// let _ = Status::<u32>::Conflicting;
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", content = "spec", rename_all = "lowercase")]
pub enum Status<V> {
    /// Not managed by this plan; any state of the world satisfies it.
    Unmanaged,
    /// Must not exist.
    Absent,
    /// Must exist and refine the value.
    Present(V),
}

impl<V> Status<V> {
    /// The spec of a present key.
    pub fn present(&self) -> Option<&V> {
        match self {
            Status::Present(v) => Some(v),
            _ => None,
        }
    }

    /// Applies `f` to a present spec.
    pub fn map<W>(self, f: impl FnOnce(V) -> W) -> Status<W> {
        match self {
            Status::Unmanaged => Status::Unmanaged,
            Status::Absent => Status::Absent,
            Status::Present(v) => Status::Present(f(v)),
        }
    }

    /// Borrows the spec.
    pub fn as_ref(&self) -> Status<&V> {
        match self {
            Status::Unmanaged => Status::Unmanaged,
            Status::Absent => Status::Absent,
            Status::Present(v) => Status::Present(v),
        }
    }

    /// A short lowercase name: `unmanaged`, `absent` or `present`.
    pub fn name(&self) -> &'static str {
        match self {
            Status::Unmanaged => "unmanaged",
            Status::Absent => "absent",
            Status::Present(_) => "present",
        }
    }
}

impl<V: Refines> Refines for Status<V> {
    fn refines(&self, other: &Self) -> bool {
        match (self, other) {
            (Status::Unmanaged, _) => true,
            (Status::Absent, Status::Absent) => true,
            (Status::Present(a), Status::Present(b)) => a.refines(b),
            _ => false,
        }
    }
}

impl<V: Merge + Clone> Merge for Status<V> {
    fn merge(&self, other: &Self) -> Result<Self, Conflict> {
        match (self, other) {
            (Status::Unmanaged, x) | (x, Status::Unmanaged) => Ok(x.clone()),
            (Status::Absent, Status::Absent) => Ok(Status::Absent),
            (Status::Present(a), Status::Present(b)) => a.merge(b).map(Status::Present),
            (Status::Absent, Status::Present(_)) => Err(Conflict::rendered(
                "\"absent\"".into(),
                "\"present\"".into(),
            )),
            (Status::Present(_), Status::Absent) => Err(Conflict::rendered(
                "\"present\"".into(),
                "\"absent\"".into(),
            )),
        }
    }
}
