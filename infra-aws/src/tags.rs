//! Tags and the ownership marker: what every kind's create, update and mark write.
//!
//! Every kind this crate realises carries tags, so every one implements
//! [`KindBackend::mark`](infra_core::sdk::KindBackend::mark) (none keeps the default
//! that answers `Invalid`). Each reads the resource's tags first and asks [`marking`]
//! what to write, so that a resource of another fleet is refused (`Conflict`) and one
//! already marked is left untouched; the marker is then added with the kind's own
//! tagging call and nothing else is written.

use infra_core::sdk::{BackendError, ErrorKind, Marker, Ownership, RawTags};

/// What `mark` writes on a resource carrying `current`: the marker pair alone, or
/// `None` when there is nothing to write.
///
/// - Unmarked: the marker.
/// - Carrying this fleet's marker: nothing (marking twice leaves the same tags).
/// - Carrying the legacy value (`true`), which every fleet reads as its own: nothing
///   either. Rewriting it with this fleet's name would make it foreign to every other
///   fleet that holds it from before fleets had names.
/// - Carrying another fleet's marker: `Conflict` ("the request conflicts with the
///   resource's state"), and nothing is written. Taking a resource from another fleet
///   is never a side effect of marking; the caller (`import-tfstate`) checks ownership
///   first and leaves such resources alone, and this refusal holds even for a caller
///   that did not. The check and the write are two calls: a marker another writer puts
///   on the resource between them is not seen.
///
/// `what` names the resource in the refusal (`queue https://…`).
pub(crate) fn marking(
    current: &RawTags,
    marker: &Marker,
    what: &str,
) -> Result<Option<RawTags>, BackendError> {
    match marker.verdict(current) {
        Ownership::Unmarked => Ok(Some(with_marker(None, marker))),
        Ownership::Ours => Ok(None),
        Ownership::OtherFleet { fleet } => Err(BackendError::new(
            ErrorKind::Conflict,
            format!(
                "{what} carries the ownership marker of fleet `{fleet}` ({}={fleet}), not \
                 this fleet's (`{}`): it was left as it was",
                marker.key(),
                marker.value()
            ),
        )),
    }
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
    if let Some(v) = current.get(infra_core::sdk::MARKER_KEY) {
        all.insert(infra_core::sdk::MARKER_KEY.to_owned(), v.clone());
    }
    all
}

/// What bringing a resource's tags from `current` to `wanted` takes: the keys to remove
/// (never one of `keep`) and the pairs to write (those that differ).
#[cfg(any(
    feature = "ec2",
    feature = "ecr",
    feature = "lambda",
    feature = "rds",
    feature = "secretsmanager"
))]
pub(crate) struct TagChanges {
    /// Keys no longer wanted.
    pub(crate) remove: Vec<String>,
    /// Pairs missing or different.
    pub(crate) write: RawTags,
}

#[cfg(any(
    feature = "ec2",
    feature = "ecr",
    feature = "lambda",
    feature = "rds",
    feature = "secretsmanager"
))]
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
#[cfg(any(feature = "s3", feature = "ecr", feature = "secretsmanager"))]
pub(crate) fn wanted_tags(declared: &RawTags, current: &RawTags) -> RawTags {
    let declared: RawTags = declared
        .iter()
        .filter(|(k, _)| k.as_str() != infra_core::sdk::MARKER_KEY)
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
    #[cfg(all(
        any(feature = "s3", feature = "ecr"),
        any(feature = "ec2", feature = "ecr", feature = "lambda", feature = "rds")
    ))]
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

    #[test]
    fn marking_writes_the_marker_alone_once_and_never_over_another_fleets() {
        let marker = Marker::new("shop");
        let unmarked = tags(&[("team", "web")]);
        assert_eq!(
            marking(&unmarked, &marker, "it").unwrap(),
            Some(tags(&[("managed-by-infra", "shop")]))
        );
        let ours = tags(&[("team", "web"), ("managed-by-infra", "shop")]);
        assert_eq!(marking(&ours, &marker, "it").unwrap(), None);
        let legacy = tags(&[("managed-by-infra", "true")]);
        assert_eq!(marking(&legacy, &marker, "it").unwrap(), None);
        let theirs = tags(&[("managed-by-infra", "blog")]);
        let refused = marking(&theirs, &marker, "queue q").unwrap_err();
        assert_eq!(refused.kind, ErrorKind::Conflict);
        assert!(refused.message.contains("`blog`"), "{}", refused.message);
    }
}
