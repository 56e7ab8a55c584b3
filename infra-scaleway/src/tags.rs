//! Tags and the ownership marker: what every kind's create, update and mark write.
//!
//! Scaleway tags are plain strings. A portable kind's tags (a map) are written as
//! `key=value` strings and read back by splitting at the first `=`; a Scaleway kind's
//! tags (a set of strings) are written as they are. The marker is the string
//! `managed-by-infra=<fleet>`, sent **in the creating call**, never patched on
//! afterwards, so that no crash leaves an unmarked resource of ours. An update keeps
//! the marker the resource carries and ignores a declared attempt to set one.
//!
//! Two products take no tags: Queues (the SQS API's tag calls are not supported) and
//! Container Registry namespaces. Their modules say where ownership lives instead.

use std::collections::BTreeSet;

use infra_core::sdk::{BackendError, ErrorKind, MARKER_KEY, Marker, Ownership, RawTags};

/// Whether `tag` is a marker string (this fleet's or another's).
pub(crate) fn is_marker(tag: &str) -> bool {
    tag == MARKER_KEY || tag.starts_with(&format!("{MARKER_KEY}="))
}

/// A map of tags as Scaleway's strings (`key=value`), in key order.
pub(crate) fn from_map(tags: &RawTags) -> Vec<String> {
    tags.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// Scaleway's strings as a map: split at the first `=`; a string without one is a key
/// with an empty value.
pub(crate) fn to_map(tags: &[String]) -> RawTags {
    tags.iter()
        .map(|t| match t.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (t.clone(), String::new()),
        })
        .collect()
}

/// A set of tags as Scaleway's strings.
pub(crate) fn from_set(tags: &BTreeSet<String>) -> Vec<String> {
    tags.iter().cloned().collect()
}

/// The strings a create sends: the declared ones, less any declared marker, with this
/// fleet's marker.
pub(crate) fn for_create(declared: Vec<String>, marker: &Marker) -> Vec<String> {
    let mut all: Vec<String> = declared.into_iter().filter(|t| !is_marker(t)).collect();
    all.push(marker.as_string_tag());
    all.sort();
    all.dedup();
    all
}

/// The strings an update sends: the declared ones, less any declared marker, with the
/// marker `current` carries kept (never lost, never gained).
pub(crate) fn for_update(declared: Vec<String>, current: &[String]) -> Vec<String> {
    let mut all: Vec<String> = declared.into_iter().filter(|t| !is_marker(t)).collect();
    all.extend(current.iter().filter(|t| is_marker(t)).cloned());
    all.sort();
    all.dedup();
    all
}

/// What `mark` writes on a resource carrying `current`: its tags with the marker
/// added, or `None` when there is nothing to write (already this fleet's, or carrying
/// the legacy value every fleet reads as its own). A resource carrying another fleet's
/// marker is refused with `Conflict`, and nothing is written. `what` names it.
pub(crate) fn marking(
    current: &[String],
    marker: &Marker,
    what: &str,
) -> Result<Option<Vec<String>>, BackendError> {
    match marker.verdict(&to_map(current)) {
        Ownership::Ours => Ok(None),
        Ownership::Unmarked => {
            let mut all = current.to_vec();
            all.push(marker.as_string_tag());
            Ok(Some(all))
        }
        Ownership::OtherFleet { fleet } => Err(BackendError::new(
            ErrorKind::Conflict,
            format!(
                "{what} carries the ownership marker of fleet `{fleet}` ({MARKER_KEY}={fleet}), \
                 not this fleet's (`{}`): it was left as it was",
                marker.value()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(tags: &[&str]) -> Vec<String> {
        tags.iter().map(|t| (*t).to_owned()).collect()
    }

    #[test]
    fn maps_round_trip_through_strings() {
        let map = to_map(&strings(&["team=web", "bare", "url=a=b"]));
        assert_eq!(map["team"], "web");
        assert_eq!(map["bare"], "");
        assert_eq!(map["url"], "a=b");
        assert_eq!(
            from_map(&to_map(&strings(&["a=1", "b=2"]))),
            strings(&["a=1", "b=2"])
        );
    }

    #[test]
    fn create_sends_this_fleets_marker_and_update_keeps_the_one_there() {
        let marker = Marker::new("shop");
        let sent = for_create(strings(&["team=web", "managed-by-infra=blog"]), &marker);
        assert_eq!(sent, strings(&["managed-by-infra=shop", "team=web"]));
        let current = strings(&["managed-by-infra=shop", "old=1"]);
        let update = for_update(strings(&["new=2", "managed-by-infra=other"]), &current);
        assert_eq!(update, strings(&["managed-by-infra=shop", "new=2"]));
        // An unmarked resource stays unmarked through an update.
        assert_eq!(
            for_update(strings(&["a=1"]), &strings(&["b=2"])),
            strings(&["a=1"])
        );
    }

    #[test]
    fn marking_adds_the_marker_once_and_never_over_another_fleets() {
        let marker = Marker::new("shop");
        assert_eq!(
            marking(&strings(&["team=web"]), &marker, "it").unwrap(),
            Some(strings(&["team=web", "managed-by-infra=shop"]))
        );
        assert_eq!(
            marking(&strings(&["managed-by-infra=shop"]), &marker, "it").unwrap(),
            None
        );
        let refused = marking(&strings(&["managed-by-infra=blog"]), &marker, "it").unwrap_err();
        assert_eq!(refused.kind, ErrorKind::Conflict);
    }
}
