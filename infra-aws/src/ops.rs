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

/// What bringing a resource's tags from `current` to `wanted` takes: the keys to remove
/// (never one of `keep`) and the pairs to write (those that differ).
pub(crate) struct TagChanges {
    /// Keys no longer wanted.
    pub(crate) remove: Vec<String>,
    /// Pairs missing or different.
    pub(crate) write: RawTags,
}

pub(crate) fn tag_changes(current: &RawTags, wanted: &RawTags, keep: &[&str]) -> TagChanges {
    TagChanges {
        remove: current
            .keys()
            .filter(|k| !wanted.contains_key(*k) && !keep.contains(&k.as_str()))
            .cloned()
            .collect(),
        write: wanted
            .iter()
            .filter(|(k, v)| current.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

/// The declared tags (less any attempt to declare the marker) with the marker kept
/// from what the resource carries.
pub(crate) fn wanted_tags(declared: &RawTags, current: &RawTags) -> RawTags {
    let declared: RawTags = declared
        .iter()
        .filter(|(k, _)| k.as_str() != infra_core::MARKER_KEY)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    keep_marker(Some(&declared), current)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> RawTags {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_marker_survives_a_tag_update_and_cannot_be_declared_away() {
        let current = tags(&[("managed-by-infra", "shop"), ("team", "web"), ("old", "x")]);
        let declared = tags(&[("team", "ops"), ("managed-by-infra", "someone-else")]);
        let wanted = wanted_tags(&declared, &current);
        assert_eq!(
            wanted,
            tags(&[("managed-by-infra", "shop"), ("team", "ops")])
        );
        let changes = tag_changes(&current, &wanted, &[]);
        assert_eq!(changes.remove, vec!["old".to_owned()]);
        assert_eq!(changes.write, tags(&[("team", "ops")]));
        assert!(tag_changes(&current, &wanted, &["old"]).remove.is_empty());
    }
}
