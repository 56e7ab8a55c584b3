//! The caller's scope: which resources `--target` and `--exclude` keep in a run, and
//! which deletes `--allow-delete` confirms.
//!
//! An address may be written in any form a plan prints it: `aws/postgres/app-db
//! (eu-west-3)`, `aws/postgres/app-db`, or the bare name `app-db`. An address that
//! names nothing in play is an error naming it, with the nearest names that exist: a
//! typo never quietly narrows a run to nothing.

use crate::names::distance;
use std::collections::{BTreeSet, HashSet};

use super::model::{Slot, row_of};
use super::{ApplyError, Engine, Options};
use crate::{LedgerRow, Plan, Subject};

/// A resource address, as written by the user.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Address {
    text: String,
    region: Option<String>,
    /// The part before the region: a bare name or `provider/kind/name`.
    path: String,
}

impl Address {
    fn parse(text: &str) -> Address {
        let text = text.trim();
        if let Some(open) = text.rfind(" (")
            && let Some(region) = text[open + 2..].strip_suffix(')')
        {
            return Address {
                text: text.to_owned(),
                region: Some(region.trim().to_owned()),
                path: text[..open].trim().to_owned(),
            };
        }
        Address {
            text: text.to_owned(),
            region: None,
            path: text.to_owned(),
        }
    }

    /// Whether the address names `s`: its name (names may hold `/`), or its
    /// `provider/kind/name`, in its region when the address gives one.
    fn names(&self, s: &Subject) -> bool {
        if self.region.as_deref().is_some_and(|r| r != s.region) {
            return false;
        }
        if self.path == s.name {
            return true;
        }
        let mut parts = self.path.splitn(3, '/');
        matches!(
            (parts.next(), parts.next(), parts.next()),
            (Some(p), Some(k), Some(n)) if p == s.provider && k == s.kind && n == s.name
        )
    }
}

/// The addresses of one flag, and the slots each names.
struct Named {
    addresses: Vec<Address>,
    /// For each slot, whether some address names it.
    hits: Vec<bool>,
}

impl Named {
    fn resolve<S: std::borrow::Borrow<Slot>>(
        flag: &'static str,
        patterns: &[String],
        slots: &[S],
    ) -> Result<Named, ApplyError> {
        let addresses: Vec<Address> = patterns.iter().map(|p| Address::parse(p)).collect();
        // Bare names are looked up, not scanned: a script naming thousands of
        // resources costs one lookup per resource, not one per pair.
        let bare: HashSet<&str> = addresses
            .iter()
            .filter(|a| a.region.is_none() && !a.path.contains('/'))
            .map(|a| a.path.as_str())
            .collect();
        let others: Vec<&Address> = addresses
            .iter()
            .filter(|a| a.region.is_some() || a.path.contains('/'))
            .collect();
        let mut used: HashSet<&str> = HashSet::new();
        let hits = slots
            .iter()
            .map(|slot| {
                let s = &slot.borrow().subject;
                let mut hit = false;
                if bare.contains(s.name.as_str()) {
                    used.insert(s.name.as_str());
                    hit = true;
                }
                for a in &others {
                    if a.names(s) {
                        used.insert(a.text.as_str());
                        hit = true;
                    }
                }
                hit
            })
            .collect();
        if let Some(unknown) = addresses
            .iter()
            .find(|a| !used.contains(a.text.as_str()) && !used.contains(a.path.as_str()))
        {
            return Err(ApplyError::UnknownAddress {
                flag,
                address: unknown.text.clone(),
                nearest: nearest(&unknown.path, slots),
            });
        }
        Ok(Named { addresses, hits })
    }
}

/// The names in play closest to `wanted` (by edit distance), at most three, for an
/// address that names nothing.
fn nearest<S: std::borrow::Borrow<Slot>>(wanted: &str, slots: &[S]) -> Vec<String> {
    nearest_among(wanted, slots.iter().map(|s| &s.borrow().subject))
}

/// [`nearest`] among any subjects.
fn nearest_among<'s>(wanted: &str, subjects: impl Iterator<Item = &'s Subject>) -> Vec<String> {
    let wanted_name = wanted.rsplit('/').next().unwrap_or(wanted);
    let mut scored: Vec<(usize, String)> = subjects
        .map(|s| (distance(wanted_name, &s.name), s.to_string()))
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    let limit = (wanted_name.chars().count() / 2).max(3);
    scored
        .into_iter()
        .filter(|(d, _)| *d <= limit)
        .take(3)
        .map(|(_, s)| s)
        .collect()
}

/// Which of `subjects` one address names (in any form a plan prints), or, when it names
/// none of them, the nearest names among them: for the commands that take one address
/// of the records (`state show`, `state mv`, `forget`).
#[cfg(feature = "cli")]
pub(crate) fn resolve_address(text: &str, subjects: &[Subject]) -> Result<Vec<usize>, Vec<String>> {
    let address = Address::parse(text);
    let hits: Vec<usize> = (0..subjects.len())
        .filter(|&i| address.names(&subjects[i]))
        .collect();
    if hits.is_empty() {
        Err(nearest_among(&address.path, subjects.iter()))
    } else {
        Ok(hits)
    }
}

impl Engine {
    /// Which slots the caller's `--target`/`--exclude` keep. Building, a target takes
    /// what it depends on along and an exclusion leaves out what depends on it; tearing
    /// down, the other way round: destroying a resource destroys what depends on it
    /// first, and keeping one keeps what it depends on.
    pub(super) fn filter(
        &self,
        plan: &Plan,
        slots: &[Slot],
        options: &Options,
    ) -> Result<Vec<bool>, ApplyError> {
        if options.targets.is_empty() && options.excludes.is_empty() {
            return Ok(vec![true; slots.len()]);
        }
        let targets = Named::resolve("--target", &options.targets, slots)?;
        let excludes = Named::resolve("--exclude", &options.excludes, slots)?;
        if targets.addresses.is_empty() && excludes.addresses.is_empty() {
            return Ok(vec![true; slots.len()]);
        }
        let deps = plan.deps();
        let n = plan.len();
        let mut dependants = vec![Vec::new(); n];
        for (i, ds) in deps.iter().enumerate() {
            for &d in ds {
                dependants[d].push(i);
            }
        }
        let closure = |start: Vec<usize>, edges: &[Vec<usize>]| {
            let mut seen = vec![false; n];
            let mut stack = start;
            while let Some(i) = stack.pop() {
                if !std::mem::replace(&mut seen[i], true) {
                    stack.extend(edges[i].iter().copied());
                }
            }
            seen
        };
        let declared_hits = |named: &Named| -> Vec<usize> {
            slots
                .iter()
                .zip(&named.hits)
                .filter_map(|(s, &hit)| s.index.filter(|_| hit))
                .collect()
        };
        let teardown = !plan.declares_something();
        let (along, behind) = if teardown {
            (dependants.as_slice(), deps)
        } else {
            (deps, dependants.as_slice())
        };
        let targeted =
            (!targets.addresses.is_empty()).then(|| closure(declared_hits(&targets), along));
        let excluded = closure(declared_hits(&excludes), behind);
        Ok(slots
            .iter()
            .enumerate()
            .map(|(k, s)| match s.index {
                Some(i) => targeted.as_ref().is_none_or(|t| t[i]) && !excluded[i],
                None => (targets.addresses.is_empty() || targets.hits[k]) && !excludes.hits[k],
            })
            .collect())
    }

    /// The rows whose delete the caller confirmed with `--allow-delete`.
    pub(super) fn confirmed_deletes(
        &self,
        slots: &[Slot],
        options: &Options,
    ) -> Result<BTreeSet<LedgerRow>, ApplyError> {
        if options.allow_delete.is_empty() {
            return Ok(BTreeSet::new());
        }
        let named = Named::resolve("--allow-delete", &options.allow_delete, slots)?;
        Ok(slots
            .iter()
            .zip(named.hits)
            .filter(|(_, hit)| *hit)
            .map(|(s, _)| row_of(&s.subject))
            .collect())
    }
}

impl Engine {
    /// The declared resources the caller asked to replace with `--replace`. An address
    /// that names nothing in play is an error, with the nearest names; one naming only
    /// an orphan of the records is too, since an orphan is deleted, never replaced.
    pub(super) fn requested_replaces(
        &self,
        slots: &[Slot],
        options: &Options,
    ) -> Result<BTreeSet<LedgerRow>, ApplyError> {
        if options.replace.is_empty() {
            return Ok(BTreeSet::new());
        }
        let declared: Vec<&Slot> = slots.iter().filter(|s| s.index.is_some()).collect();
        let named = Named::resolve("--replace", &options.replace, &declared)?;
        Ok(declared
            .iter()
            .zip(named.hits)
            .filter(|(_, hit)| *hit)
            .map(|(s, _)| row_of(&s.subject))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::{Address, distance};
    use crate::Subject;

    fn subject(name: &str) -> Subject {
        Subject {
            provider: "aws".into(),
            kind: "postgres".into(),
            name: name.into(),
            region: "eu-west-3".into(),
        }
    }

    #[test]
    fn every_form_a_plan_prints_names_the_resource() {
        let s = subject("app-db");
        for text in [
            "aws/postgres/app-db (eu-west-3)",
            "aws/postgres/app-db",
            "app-db",
            "  app-db ",
            &s.to_string(),
        ] {
            assert!(Address::parse(text).names(&s), "{text:?}");
        }
        for text in [
            "aws/postgres/app-db (us-east-1)",
            "gcp/postgres/app-db",
            "aws/queues/app-db",
            "app",
            "postgres/app-db",
        ] {
            assert!(!Address::parse(text).names(&s), "{text:?}");
        }
    }

    #[test]
    fn a_name_holding_slashes_is_named_bare_and_in_full() {
        let s = Subject {
            kind: "secrets".into(),
            ..subject("app/db-password")
        };
        assert!(Address::parse("app/db-password").names(&s));
        assert!(Address::parse("aws/secrets/app/db-password").names(&s));
        assert!(Address::parse("aws/secrets/app/db-password (eu-west-3)").names(&s));
    }

    #[test]
    fn distances() {
        assert_eq!(distance("app-db", "app-db"), 0);
        assert_eq!(distance("app-bd", "app-db"), 2);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
