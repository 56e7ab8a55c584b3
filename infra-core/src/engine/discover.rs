//! Discover: what in the clouds carries this fleet's ownership marker.
//!
//! [`Engine::discover`] merges what it finds into the ledger: it adds rows, and never
//! drops one — not for a region no longer declared, not for a kind whose tags cannot
//! be read, not for a read that failed. A row it adds for a resource the records and
//! the declaration did not name is marked *discovered*: a marker can be copied, so
//! deleting such a resource later needs the user's confirmation by name.
//!
//! The same survey finds the *strays* a plan reports when the records are empty:
//! resources carrying the marker that nothing declares (lost records).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;

use super::model::{Slot, subject};
use super::observe::Listing;
use super::{ApplyError, Engine};
use crate::backend::RawTags;
use crate::{
    Backend, BackendError, ErrorKind, Ledger, LedgerRow, Listed, Marker, Ownership, Plan, Subject,
};

/// What [`Engine::discover`] did to the ledger, and what it could not look at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Discovery {
    /// The ledger as it now is.
    pub ledger: Ledger,
    /// Rows added: resources carrying this fleet's marker that the ledger did not hold.
    /// Those the declaration does not name are marked discovered in the ledger.
    pub added: Vec<LedgerRow>,
    /// What could not be looked at, each with the reason: a provider without a backend
    /// or unreachable, a listing or an ownership read that failed. Rows of what could
    /// not be looked at are kept as they were.
    pub blind: Vec<String>,
    /// Kinds whose tags cannot be read, so that their resources cannot be told apart by
    /// marker: not looked for, and their rows kept as they were.
    pub unreadable: Vec<String>,
}

impl Discovery {
    /// Whether everything in scope was looked at.
    pub fn is_complete(&self) -> bool {
        self.blind.is_empty()
    }
}

/// A listed resource whose marker is to be read.
struct Candidate {
    backend: Arc<dyn Backend>,
    kind: &'static str,
    row: LedgerRow,
    handle: String,
    /// The raw tags its list handed over, if it did: no `ownership` call then.
    tags: Option<RawTags>,
    marker: Marker,
}

/// A listed resource whose owner is to be told: its backend, kind, row, handle, and
/// the raw tags its list handed over.
type Found = (
    Arc<dyn Backend>,
    &'static str,
    LedgerRow,
    String,
    Option<RawTags>,
);

/// What one survey of the clouds found.
#[derive(Default)]
pub(super) struct Survey {
    /// Resources carrying the marker, not skipped.
    pub(super) found: Vec<LedgerRow>,
    pub(super) blind: Vec<String>,
    pub(super) unreadable: Vec<String>,
}

impl Engine {
    /// Looks in every region the fleet uses (and the ledger names) for resources that
    /// carry this fleet's marker, and adds a row for each that the ledger lacks.
    pub async fn discover(&self, plan: &Plan) -> Result<Discovery, ApplyError> {
        let fleet = plan.fleet();
        // Every record is read and checked before the first cloud call.
        self.store.verify(fleet.name())?;
        let old = self.store.load_ledger(fleet.name())?;
        self.gates(plan, &old).await?;
        let mut regions: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for r in fleet.resources() {
            regions
                .entry(r.reference().provider.to_owned())
                .or_default()
                .insert(r.region().to_owned());
        }
        for row in &old.rows {
            regions
                .entry(row.provider.clone())
                .or_default()
                .insert(row.region.clone());
        }
        let declared: BTreeSet<LedgerRow> = fleet
            .resources()
            .map(|r| {
                let rf = r.reference();
                super::model::row_of(&subject(rf.provider, rf.kind, &rf.name, r.region()))
            })
            .collect();
        let survey = self
            .survey(fleet.name(), &regions, |row| old.rows.contains(row))
            .await;
        let mut ledger = old;
        let mut added = Vec::new();
        for row in survey.found {
            if !declared.contains(&row) {
                ledger.discovered.insert(row.clone());
            }
            ledger.rows.insert(row.clone());
            added.push(row);
        }
        self.store.save_ledger(fleet.name(), &ledger)?;
        Ok(Discovery {
            ledger,
            added,
            blind: survey.blind,
            unreadable: survey.unreadable,
        })
    }

    /// Resources carrying this fleet's marker in `regions` (by provider) that
    /// `skip` does not set aside, and what could not be looked at.
    pub(super) async fn survey(
        &self,
        fleet: &str,
        regions: &BTreeMap<String, BTreeSet<String>>,
        skip: impl Fn(&LedgerRow) -> bool,
    ) -> Survey {
        let mut survey = Survey::default();
        let mut candidates: Vec<Found> = Vec::new();
        for (provider, regions) in regions {
            let Some(backend) = self.backends.get(provider) else {
                survey
                    .blind
                    .push(format!("{provider}: no {provider} backend was given"));
                continue;
            };
            if let Some(why) = backend.unreachable() {
                survey
                    .blind
                    .push(format!("{provider}: unreachable ({why})"));
                continue;
            }
            let caps = backend.capabilities();
            for kind in caps.kinds.difference(&caps.ownership) {
                survey.unreadable.push(format!("{provider}/{kind}"));
            }
            for kind in caps.ownership.iter().copied() {
                for region in regions {
                    match self.list_all(&**backend, kind, region).await {
                        Err(e) => survey.blind.push(format!(
                            "{provider}/{kind} in {region}: listing failed: {e}"
                        )),
                        Ok(listed) => {
                            for mut l in listed {
                                let row =
                                    super::model::row_of(&subject(provider, kind, &l.name, region));
                                if !skip(&row) {
                                    let tags = l.listed_tags();
                                    candidates.push((
                                        Arc::clone(backend),
                                        kind,
                                        row,
                                        l.handle,
                                        tags,
                                    ));
                                }
                            }
                        }
                    }
                }
            }
        }
        let (found, blind) = self.marked_among(fleet, candidates).await;
        survey.found = found;
        survey.blind.extend(blind);
        survey
    }

    /// Which of the listed `candidates` carry this fleet's marker, and what could not
    /// be read (each with its reason). Reads are in flight together, at most 16.
    async fn marked_among(
        &self,
        fleet: &str,
        candidates: Vec<Found>,
    ) -> (Vec<LedgerRow>, Vec<String>) {
        let marker = Marker::new(fleet);
        // Owned inputs, and a method rather than a closure: the future stays `Send`.
        let reads: Vec<_> = candidates
            .into_iter()
            .map(|(backend, kind, row, handle, tags)| {
                self.ownership_of(Candidate {
                    backend,
                    kind,
                    row,
                    handle,
                    tags,
                    marker: marker.clone(),
                })
            })
            .collect();
        let verdicts = futures::stream::iter(reads)
            .buffer_unordered(16)
            .collect::<Vec<_>>()
            .await;
        let (mut found, mut blind) = (Vec::new(), Vec::new());
        for (row, verdict) in verdicts {
            match verdict {
                Ok(Ownership::Ours) => found.push(row),
                Ok(_) => {}
                // Gone between the list and the read.
                Err(e) if e.kind == ErrorKind::NotFound => {}
                Err(e) => blind.push(format!("{row}: its ownership could not be read: {e}")),
            }
        }
        found.sort();
        (found, blind)
    }

    /// Who owns one listed resource, by its marker (on the tags its list handed over,
    /// or asked).
    async fn ownership_of(&self, c: Candidate) -> (LedgerRow, Result<Ownership, BackendError>) {
        let tags = match c.tags {
            Some(tags) => Ok(tags),
            None => c.backend.ownership(c.kind, &c.row.region, &c.handle).await,
        };
        (c.row, tags.map(|t| c.marker.verdict(&t)))
    }

    /// Lists one kind in one region.
    async fn list_all(
        &self,
        backend: &dyn Backend,
        kind: &'static str,
        region: &str,
    ) -> Result<Vec<Listed>, BackendError> {
        backend.list(kind, region).await
    }

    /// Strays: among what observation listed, resources carrying this fleet's marker
    /// that no slot names. Looked for only when the records are empty (observation
    /// then keeps its listings), the one case where such resources mean lost records
    /// rather than rows to prune. Kinds or regions the declaration no longer uses are
    /// not listed by a plan; `discover` looks there too.
    pub(super) async fn strays(
        &self,
        fleet: &str,
        slots: &[Slot],
        listings: Vec<Listing>,
    ) -> Vec<Subject> {
        if listings.iter().all(|l| l.listed.is_empty()) {
            return Vec::new();
        }
        let named: BTreeSet<(&str, &str, &str, &str)> = slots
            .iter()
            .map(|s| {
                let r = &s.subject;
                (
                    r.provider.as_str(),
                    r.kind.as_str(),
                    r.name.as_str(),
                    r.region.as_str(),
                )
            })
            .collect();
        let capabilities = self.capabilities();
        let mut candidates = Vec::new();
        for listing in &listings {
            let Some(backend) = self.backends.get(listing.provider) else {
                continue;
            };
            if !capabilities
                .get(listing.provider)
                .is_some_and(|c| c.ownership.contains(listing.kind))
            {
                continue;
            }
            for l in &listing.listed {
                let key = (
                    listing.provider,
                    listing.kind,
                    l.name.as_str(),
                    listing.region.as_str(),
                );
                if named.contains(&key) {
                    continue;
                }
                let row = super::model::row_of(&subject(
                    listing.provider,
                    listing.kind,
                    &l.name,
                    &listing.region,
                ));
                candidates.push((
                    Arc::clone(backend),
                    listing.kind,
                    row,
                    l.handle.clone(),
                    l.raw_tags().cloned(),
                ));
            }
        }
        if candidates.is_empty() {
            return Vec::new();
        }
        let (found, _) = self.marked_among(fleet, candidates).await;
        found
            .iter()
            .map(|r| subject(&r.provider, &r.kind, &r.name, &r.region))
            .collect()
    }
}
