//! What each kind implements, and the helpers they share.

use async_trait::async_trait;
use infra_core::{BackendError, Listed, Marker, RawTags, SettledSpec, Sighting};

use crate::clients::RegionClients;

/// The operations of one kind on AWS. Each method's behaviour is the `Backend`
/// trait's, for this kind, in the region the clients are for.
#[async_trait]
pub(crate) trait KindOps: Send + Sync {
    /// The kind's id.
    fn kind(&self) -> &'static str;
    /// Whether two resources of this kind may share a name in one region.
    fn duplicate_names(&self) -> bool {
        false
    }
    async fn list(&self, c: &RegionClients) -> Result<Vec<Listed>, BackendError>;
    async fn read(&self, c: &RegionClients, handle: &str) -> Result<Sighting, BackendError>;
    async fn create(
        &self,
        c: &RegionClients,
        name: &str,
        spec: SettledSpec<'_>,
        marker: &Marker,
    ) -> Result<Sighting, BackendError>;
    async fn update(
        &self,
        c: &RegionClients,
        handle: &str,
        spec: SettledSpec<'_>,
    ) -> Result<Sighting, BackendError>;
    async fn delete(&self, c: &RegionClients, handle: &str) -> Result<(), BackendError>;
    async fn ownership(&self, c: &RegionClients, handle: &str) -> Result<RawTags, BackendError>;
}

/// Declared tags with the marker added: what a create writes.
pub(crate) fn with_marker(tags: Option<&RawTags>, marker: &Marker) -> RawTags {
    let mut all = tags.cloned().unwrap_or_default();
    all.insert(marker.key().to_owned(), marker.value().to_owned());
    all
}

/// Declared tags with the marker kept from what the resource carries: what an update
/// writes, so that it never loses (nor gains) a marker.
pub(crate) fn keep_marker(tags: Option<&RawTags>, current: &RawTags) -> RawTags {
    let mut all = tags.cloned().unwrap_or_default();
    if let Some(v) = current.get(infra_core::MARKER_KEY) {
        all.insert(infra_core::MARKER_KEY.to_owned(), v.clone());
    }
    all
}
