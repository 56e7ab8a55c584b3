//! Labels and the ownership marker: what every kind's create, update and mark write.
//!
//! Google Cloud labels are key–value pairs with rules of their own: a key is 1 to 63
//! characters of lowercase letters, digits, `_` and `-`, starting with a letter; a
//! value is 0 to 63 of the same characters. The marker is the label
//! `managed-by-infra=<fleet>`, so a fleet whose name is not a valid label value cannot
//! own GCP resources: its creates are refused as `Invalid` before any call.
//!
//! The marker is sent **in the creating call** (the labels of `buckets.insert`,
//! `CreateTopic`, `CreateSecret`, …), never patched on afterwards, so that no crash
//! leaves an unmarked resource of ours. An update keeps the marker the resource carries
//! and ignores a declared attempt to set it. Bookkeeping labels of this crate
//! ([`REGION_LABEL`]) are kept the same way and left out of the reported tags.

use infra_core::sdk::{BackendError, ErrorKind, MARKER_KEY, Marker, Ownership, RawTags};

/// The label that records the region a resource of a global service (a Pub/Sub topic,
/// a secret) was declared in, so that `list` answers each region its own.
pub(crate) const REGION_LABEL: &str = "infra-region";

/// The label that records, on a Cloud SQL instance, whether its administrator is the
/// root user (`root`) or a user of its own made after the instance (`user`).
pub(crate) const ADMIN_LABEL: &str = "infra-administrator";

/// Labels of this crate's own, never declared and never reported.
pub(crate) const BOOKKEEPING: &[&str] = &[REGION_LABEL, ADMIN_LABEL];

/// Whether `key` is a valid label key.
pub(crate) fn valid_key(key: &str) -> bool {
    (1..=63).contains(&key.len())
        && key.starts_with(|c: char| c.is_ascii_lowercase())
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// Whether `value` is a valid label value.
pub(crate) fn valid_value(value: &str) -> bool {
    value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// Refuses labels Google Cloud would refuse, naming each bad one, before any call.
pub(crate) fn check(labels: &RawTags) -> Result<(), BackendError> {
    let mut bad = Vec::new();
    for (k, v) in labels {
        if !valid_key(k) {
            bad.push(format!("key {k:?}"));
        } else if !valid_value(v) {
            bad.push(format!("value {v:?} of {k}"));
        }
    }
    if labels.len() > 64 {
        bad.push(format!("{} labels (at most 64)", labels.len()));
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(BackendError::invalid(format!(
            "Google Cloud labels are lowercase letters, digits, `_` and `-` (keys 1 to 63 \
             characters starting with a letter, values up to 63): refused {}",
            bad.join(", ")
        )))
    }
}

/// Declared labels with the marker (and `extra` bookkeeping) added: what a create
/// sends. A declared marker is replaced by this fleet's.
pub(crate) fn for_create(
    declared: Option<&RawTags>,
    marker: &Marker,
    extra: &[(&str, &str)],
) -> Result<RawTags, BackendError> {
    let mut all = declared.cloned().unwrap_or_default();
    for key in BOOKKEEPING {
        all.remove(*key);
    }
    all.insert(marker.key().to_owned(), marker.value().to_owned());
    for (k, v) in extra {
        all.insert((*k).to_owned(), (*v).to_owned());
    }
    check(&all)?;
    Ok(all)
}

/// The labels an update sends: the declared ones (less any attempt to declare the
/// marker or bookkeeping) with the marker and bookkeeping kept from what the resource
/// carries, so that an update never loses (nor gains) a marker.
pub(crate) fn for_update(declared: &RawTags, current: &RawTags) -> Result<RawTags, BackendError> {
    let mut all: RawTags = declared
        .iter()
        .filter(|(k, _)| k.as_str() != MARKER_KEY && !BOOKKEEPING.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for key in std::iter::once(MARKER_KEY).chain(BOOKKEEPING.iter().copied()) {
        if let Some(v) = current.get(key) {
            all.insert(key.to_owned(), v.clone());
        }
    }
    check(&all)?;
    Ok(all)
}

/// The labels a read reports as `tags`: everything but bookkeeping (the marker stays;
/// the engine strips it).
pub(crate) fn reported(labels: &RawTags) -> RawTags {
    labels
        .iter()
        .filter(|(k, _)| !BOOKKEEPING.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// What `mark` writes on a resource carrying `current`: its labels with the marker
/// added, or `None` when there is nothing to write (already this fleet's, or carrying
/// the legacy value every fleet reads as its own). A resource carrying another fleet's
/// marker is refused with `Conflict`, and nothing is written. `what` names it.
pub(crate) fn marking(
    current: &RawTags,
    marker: &Marker,
    what: &str,
) -> Result<Option<RawTags>, BackendError> {
    match marker.verdict(current) {
        Ownership::Ours => Ok(None),
        Ownership::Unmarked => {
            let mut all = current.clone();
            all.insert(marker.key().to_owned(), marker.value().to_owned());
            check(&all)?;
            Ok(Some(all))
        }
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

/// Labels as the clients carry them (`HashMap<String, String>`), as raw tags.
pub(crate) fn from_map<'a>(labels: impl IntoIterator<Item = (&'a String, &'a String)>) -> RawTags {
    labels
        .into_iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> RawTags {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn create_sends_the_marker_and_refuses_what_google_would() {
        let marker = Marker::new("shop");
        let declared = labels(&[("team", "web"), ("managed-by-infra", "blog")]);
        let sent = for_create(Some(&declared), &marker, &[(REGION_LABEL, "europe-west1")]).unwrap();
        assert_eq!(
            sent,
            labels(&[
                ("managed-by-infra", "shop"),
                ("team", "web"),
                ("infra-region", "europe-west1")
            ])
        );
        let upper = labels(&[("Team", "web")]);
        let refused = for_create(Some(&upper), &marker, &[]).unwrap_err();
        assert_eq!(refused.kind, ErrorKind::Invalid);
        assert!(refused.message.contains("\"Team\""), "{}", refused.message);
        let fleet = Marker::new("Shop");
        assert_eq!(
            for_create(None, &fleet, &[]).unwrap_err().kind,
            ErrorKind::Invalid
        );
    }

    #[test]
    fn an_update_keeps_the_marker_and_bookkeeping_and_reads_leave_bookkeeping_out() {
        let current = labels(&[
            ("managed-by-infra", "shop"),
            ("infra-region", "europe-west1"),
            ("old", "x"),
        ]);
        let declared = labels(&[("team", "ops"), ("managed-by-infra", "other")]);
        assert_eq!(
            for_update(&declared, &current).unwrap(),
            labels(&[
                ("managed-by-infra", "shop"),
                ("infra-region", "europe-west1"),
                ("team", "ops")
            ])
        );
        assert_eq!(
            reported(&current),
            labels(&[("managed-by-infra", "shop"), ("old", "x")])
        );
    }

    #[test]
    fn marking_adds_the_marker_once_and_never_over_another_fleets() {
        let marker = Marker::new("shop");
        let unmarked = labels(&[("team", "web")]);
        assert_eq!(
            marking(&unmarked, &marker, "it").unwrap(),
            Some(labels(&[("team", "web"), ("managed-by-infra", "shop")]))
        );
        let ours = labels(&[("managed-by-infra", "shop")]);
        assert_eq!(marking(&ours, &marker, "it").unwrap(), None);
        let refused = marking(
            &labels(&[("managed-by-infra", "blog")]),
            &marker,
            "bucket b",
        )
        .unwrap_err();
        assert_eq!(refused.kind, ErrorKind::Conflict);
    }
}
