//! The typed trait a provider implements once per kind, its argument structs, and the
//! typed read it answers.

use std::fmt;
use std::marker::PhantomData;

use async_trait::async_trait;

use super::Written;
use crate::backend::{Listed, Marker, Prerequisite, RawTags, Sighting};
use crate::{BackendError, ErrorKind, Kind};

/// One kind of resource on one provider, with the kind's own types: the spec a create
/// or update receives is the kind's settled spec, and a read answers the kind's
/// observed state and reported configuration.
///
/// A [`Router`](super::Router) turns a set of these into the engine's
/// [`Backend`](crate::backend::Backend); the behaviour each method owes is the one the
/// `Backend` method of the same name documents (its **Behavior** sections), for this
/// kind, and the conformance suite of `infra-testkit` checks it.
///
/// Arguments come as structs marked `#[non_exhaustive]`: a field added later breaks no
/// implementation.
#[async_trait]
pub trait KindBackend<K: Kind>: Send + Sync + 'static {
    /// Whether two resources of this kind may share a name in one region (so that a
    /// replace may create the new one before deleting the old).
    fn duplicate_names(&self) -> bool {
        false
    }

    /// Whether the tags of this kind can be read, so that ownership can be checked. An
    /// owned orphan of a kind whose tags cannot be read is never deleted.
    fn tags_readable(&self) -> bool {
        true
    }

    /// Whether this kind's `list` hands over each resource's complete read
    /// ([`Listed::with_reading`]): observation then makes no per-resource `read`. Say so
    /// only when every listed item carries the whole observation and, where tags are
    /// readable, the raw tags; the conformance suite holds a kind that says so to it.
    fn lists_complete(&self) -> bool {
        false
    }

    /// Everything of the kind in the region, whatever its owner.
    async fn list(&self, args: ListArgs<'_>) -> Result<Vec<Listed>, BackendError>;

    /// One resource's observed state and reported configuration, tags included.
    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<K>, BackendError>;

    /// Creates the resource, marker included in the creating call where the API allows.
    async fn create(&self, args: CreateArgs<'_, K>) -> Result<Written<Reading<K>>, BackendError>;

    /// Brings the resource's configuration to the spec in place, keeping its marker.
    async fn update(&self, args: UpdateArgs<'_, K>) -> Result<Written<Reading<K>>, BackendError>;

    /// Deletes the resource.
    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError>;

    /// The resource's raw tags, marker included.
    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError>;

    /// Puts the fleet's marker on a resource that exists already, changing nothing
    /// else. The default answers `Invalid`: such a kind cannot be taken over.
    async fn mark(&self, args: MarkArgs<'_>) -> Result<(), BackendError> {
        Err(BackendError::new(
            ErrorKind::Invalid,
            format!(
                "a {} in {} cannot be given an ownership marker by this provider ({})",
                K::ID,
                args.region,
                args.handle
            ),
        ))
    }

    /// What must be done before the kind can be written in the region (a product
    /// activated, credentials made), without doing it. The default: nothing.
    async fn prerequisites(
        &self,
        args: PrerequisiteArgs<'_>,
    ) -> Result<Vec<Prerequisite>, BackendError> {
        let _ = args;
        Ok(Vec::new())
    }
}

/// The arguments of [`KindBackend::prerequisites`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug)]
pub struct PrerequisiteArgs<'a> {
    /// The region's code.
    pub region: &'a str,
}

impl<'a> PrerequisiteArgs<'a> {
    /// Arguments for the prerequisites of `region`.
    pub fn new(region: &'a str) -> Self {
        PrerequisiteArgs { region }
    }
}

/// The arguments of [`KindBackend::list`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug)]
pub struct ListArgs<'a> {
    /// The region's code.
    pub region: &'a str,
}

/// The arguments of [`KindBackend::read`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug)]
pub struct ReadArgs<'a> {
    /// The region's code.
    pub region: &'a str,
    /// The resource's handle.
    pub handle: &'a str,
}

/// The arguments of [`KindBackend::create`].
#[non_exhaustive]
pub struct CreateArgs<'a, K: Kind> {
    /// The region's code.
    pub region: &'a str,
    /// The name the fleet declares.
    pub name: &'a str,
    /// The settled spec: every expression resolved, handles as strings.
    pub spec: &'a K::Settled,
    /// The fleet's ownership marker, to write with the resource.
    pub marker: &'a Marker,
}

/// The arguments of [`KindBackend::update`].
#[non_exhaustive]
pub struct UpdateArgs<'a, K: Kind> {
    /// The region's code.
    pub region: &'a str,
    /// The resource's handle.
    pub handle: &'a str,
    /// The settled spec to bring the resource to.
    pub spec: &'a K::Settled,
}

/// The arguments of [`KindBackend::delete`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug)]
pub struct DeleteArgs<'a> {
    /// The region's code.
    pub region: &'a str,
    /// The resource's handle.
    pub handle: &'a str,
}

/// The arguments of [`KindBackend::ownership`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug)]
pub struct OwnershipArgs<'a> {
    /// The region's code.
    pub region: &'a str,
    /// The resource's handle.
    pub handle: &'a str,
}

/// The arguments of [`KindBackend::mark`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug)]
pub struct MarkArgs<'a> {
    /// The region's code.
    pub region: &'a str,
    /// The resource's handle.
    pub handle: &'a str,
    /// The marker to write.
    pub marker: &'a Marker,
}

impl<'a> ListArgs<'a> {
    /// Arguments for a list of `region`.
    pub fn new(region: &'a str) -> Self {
        ListArgs { region }
    }
}

impl<'a> ReadArgs<'a> {
    /// Arguments for a read of `handle` in `region`.
    pub fn new(region: &'a str, handle: &'a str) -> Self {
        ReadArgs { region, handle }
    }
}

impl<'a> DeleteArgs<'a> {
    /// Arguments for a delete of `handle` in `region`.
    pub fn new(region: &'a str, handle: &'a str) -> Self {
        DeleteArgs { region, handle }
    }
}

impl<'a> OwnershipArgs<'a> {
    /// Arguments for reading the tags of `handle` in `region`.
    pub fn new(region: &'a str, handle: &'a str) -> Self {
        OwnershipArgs { region, handle }
    }
}

impl<'a> MarkArgs<'a> {
    /// Arguments for marking `handle` in `region` with `marker`.
    pub fn new(region: &'a str, handle: &'a str, marker: &'a Marker) -> Self {
        MarkArgs {
            region,
            handle,
            marker,
        }
    }
}

impl<'a, K: Kind> CreateArgs<'a, K> {
    /// Arguments for creating `name` in `region` from `spec`, marked with `marker`.
    pub fn new(region: &'a str, name: &'a str, spec: &'a K::Settled, marker: &'a Marker) -> Self {
        CreateArgs {
            region,
            name,
            spec,
            marker,
        }
    }
}

impl<'a, K: Kind> UpdateArgs<'a, K> {
    /// Arguments for bringing `handle` in `region` to `spec`.
    pub fn new(region: &'a str, handle: &'a str, spec: &'a K::Settled) -> Self {
        UpdateArgs {
            region,
            handle,
            spec,
        }
    }
}

impl<K: Kind> Clone for CreateArgs<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K: Kind> Copy for CreateArgs<'_, K> {}
impl<K: Kind> Clone for UpdateArgs<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K: Kind> Copy for UpdateArgs<'_, K> {}

impl<K: Kind> fmt::Debug for CreateArgs<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The spec may hold a secret value: never printed.
        f.debug_struct("CreateArgs")
            .field("kind", &K::ID)
            .field("region", &self.region)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<K: Kind> fmt::Debug for UpdateArgs<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpdateArgs")
            .field("kind", &K::ID)
            .field("region", &self.region)
            .field("handle", &self.handle)
            .finish_non_exhaustive()
    }
}

/// One read of one resource of kind `K`: its handle, what the cloud computed (the
/// kind's `Observed`) and the configuration in force (the kind's `Reported`, where a
/// field the cloud does not report is `Unknown`), and optionally its raw tags.
pub struct Reading<K: Kind> {
    sighting: Sighting,
    kind: PhantomData<fn() -> K>,
}

impl<K: Kind> Clone for Reading<K> {
    fn clone(&self) -> Self {
        Reading {
            sighting: self.sighting.clone(),
            kind: PhantomData,
        }
    }
}

impl<K: Kind> fmt::Debug for Reading<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Reading").field(&self.sighting).finish()
    }
}

impl<K: Kind> Reading<K> {
    /// A read of the resource `handle`.
    pub fn new(handle: impl Into<String>, observed: K::Observed, reported: K::Reported) -> Self {
        Reading {
            sighting: Sighting::of::<K>(handle, observed, reported),
            kind: PhantomData,
        }
    }

    /// A read from JSON, for a backend that holds its state as JSON: the observed state
    /// as the kind's `Observed` serialises, and the reported configuration as a map of
    /// camelCase field names (a field left out was not reported). `Invalid` when the
    /// observed state does not fit the kind's type.
    pub fn from_json(
        handle: impl Into<String>,
        observed: serde_json::Value,
        reported: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self, BackendError> {
        Ok(Reading {
            sighting: Sighting::from_json::<K>(handle, observed, reported)?,
            kind: PhantomData,
        })
    }

    /// The same read carrying the resource's raw tags (marker included), for a backend
    /// whose read returns them anyway: the engine then decides ownership from them
    /// without a separate `ownership` call.
    pub fn with_raw_tags(self, tags: RawTags) -> Self {
        Reading {
            sighting: self.sighting.with_raw_tags(tags),
            kind: PhantomData,
        }
    }

    /// The raw tags the read carries ([`Reading::with_raw_tags`]), if any.
    pub fn raw_tags(&self) -> Option<&RawTags> {
        self.sighting.raw_tags()
    }

    /// The resource's handle.
    pub fn handle(&self) -> &str {
        &self.sighting.handle
    }

    /// The observed state.
    pub fn observed(&self) -> &K::Observed {
        self.sighting
            .observed::<K>()
            .expect("a reading holds the observed state of its own kind")
    }

    /// The reported configuration as JSON (camelCase; a field left out was not
    /// reported).
    pub fn reported(&self) -> &serde_json::Map<String, serde_json::Value> {
        self.sighting.reported()
    }

    /// The type-erased read the engine takes.
    pub fn into_sighting(self) -> Sighting {
        self.sighting
    }
}

impl<K: Kind> From<Reading<K>> for Sighting {
    fn from(r: Reading<K>) -> Self {
        r.sighting
    }
}
