//! Observation: list, match, read.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use futures::StreamExt;

use super::model::{
    Decision, Observation, Owner, Seen, Slot, Target, Unobserved, static_kind, subject,
};
use super::{ApplyError, Engine, Options};
use crate::backend::{Capabilities, Sighting};
use crate::{
    Backend, BackendError, ErrorKind, Marker, NotAttemptedReason, Ownership, Plan, Status,
};

/// The waits before a scope is listed again because a resource the ledger holds, and
/// whose handle the cache does not, was missing from its list (lists lag creates). A
/// resource whose handle the cache holds is not waited for: missing from its list, it
/// is read by that handle, which answers for it whatever the list lags.
const RELIST_WAITS: [std::time::Duration; 3] = [
    std::time::Duration::from_millis(200),
    std::time::Duration::from_millis(400),
    std::time::Duration::from_millis(800),
];

/// A provider, a kind and a region: what one `list` covers.
type Scope = (&'static str, &'static str, String);

/// What one `list` of a provider's kind in a region answered.
pub(super) struct Listing {
    pub(super) provider: &'static str,
    pub(super) kind: &'static str,
    pub(super) region: String,
    pub(super) listed: Vec<crate::Listed>,
}

/// What a list handed over of one resource besides its name and handle.
#[derive(Default)]
struct Handed {
    reading: Option<Sighting>,
    raw_tags: Option<crate::backend::RawTags>,
}

/// One read to make, with everything it needs owned but the resource's names, which
/// are read from its slot (no read changes a slot: the answers are written once every
/// read is done).
struct Read {
    slot: usize,
    backend: Arc<dyn Backend>,
    kind: &'static str,
    /// Every handle listed under the resource's name (more than one where a kind lets
    /// names repeat).
    handles: Vec<String>,
    /// What its list handed over: the complete read (no `read` is made) and the raw
    /// tags (no `ownership` call is made).
    listed: Handed,
    readable: bool,
    in_ledger: bool,
}

/// What a read borrows from its run: the resource's name and region, and the fleet's
/// marker.
struct Names<'a> {
    name: &'a str,
    region: &'a str,
    marker: &'a Marker,
}

impl Engine {
    /// Gates, then observation.
    pub(super) async fn gather(
        &self,
        plan: &Plan,
        options: &Options,
    ) -> Result<Observation, ApplyError> {
        let fleet = plan.fleet();
        // Every record is read and checked before the first cloud call, once.
        let crate::records::Records { ledger, caches } = self.store.load_records(fleet.name())?;
        self.gates(plan, &ledger).await?;

        // Looked up by borrowed names: a large fleet's plan spent much of its time
        // copying names into keys it looked up once.
        // Hashed with foldhash: the fleet and its records choose these keys, not a cloud.
        let forgotten_refs: foldhash::HashSet<(&str, &str, &str)> = fleet
            .forgets()
            .iter()
            .map(|r| {
                (
                    r.resource.provider,
                    r.resource.kind,
                    r.resource.name.as_str(),
                )
            })
            .collect();
        let recorded: foldhash::HashSet<(&str, &str, &str, &str)> = ledger
            .rows
            .iter()
            .map(|r| {
                (
                    r.provider.as_str(),
                    r.kind.as_str(),
                    r.name.as_str(),
                    r.region.as_str(),
                )
            })
            .collect();
        // A row is an orphan unless a declaration names the same resource *in the same
        // region*: a resource moved to another region leaves its old one behind, which
        // is deleted (before the new one is created, since names may be unique).
        let declared_refs: foldhash::HashSet<(&str, &str, &str, &str)> = fleet
            .resources()
            .map(|r| {
                let rf = r.reference();
                (rf.provider, rf.kind, rf.name.as_str(), r.region())
            })
            .collect();

        let mut slots = Vec::with_capacity(fleet.len() + ledger.rows.len());
        for (index, r) in fleet.resources().enumerate() {
            let target = match &plan.targets[index] {
                Status::Unmanaged => continue,
                Status::Absent => Target::Absent,
                Status::Present(spec) => Target::Present(spec.clone()),
            };
            let rf = r.reference();
            let region = r.region();
            let recorded = recorded.contains(&(rf.provider, rf.kind, rf.name.as_str(), region));
            let subject = subject(rf.provider, rf.kind, &rf.name, region);
            slots.push(Slot {
                recorded,
                subject,
                provider: rf.provider,
                kind: rf.kind,
                index: Some(index),
                target,
                seen: Seen::Absent,
                secret_differs: None,
                decision: Decision::AlreadyAbsent,
            });
        }
        let mut forgotten = Vec::new();
        for row in &ledger.rows {
            let (provider, kind, name) = (row.provider.as_str(), row.kind.as_str(), &row.name);
            if declared_refs.contains(&(provider, kind, name.as_str(), row.region.as_str())) {
                continue;
            }
            if forgotten_refs.contains(&(provider, kind, name.as_str())) {
                forgotten.push(row.clone());
                continue;
            }
            let provider = self
                .backends
                .providers()
                .find(|p| *p == row.provider)
                .expect("gates refuse rows of a provider without a backend");
            let backend = self.backends.get(provider).expect("found above");
            slots.push(Slot {
                subject: subject(&row.provider, &row.kind, &row.name, &row.region),
                provider,
                kind: static_kind(&row.kind, &**backend),
                index: None,
                recorded: true,
                target: Target::Orphan,
                seen: Seen::Absent,
                secret_differs: None,
                decision: Decision::AlreadyAbsent,
            });
        }

        let included = self.filter(plan, &slots, options)?;
        let confirmed = self.confirmed_deletes(&slots, options)?;
        let replacing = self.requested_replaces(&slots, options)?;
        // With no records, what carries the fleet's marker and is not declared is
        // looked for among what observation lists anyway: lost records.
        let cached = Self::cached_handles(&caches, &slots);
        self.concurrency.set_adaptive(options.adaptive);
        self.concurrency.set_ceiling(options.parallelism);
        let listings = self
            .observe(
                fleet.name(),
                &mut slots,
                (&included, &cached),
                options.parallelism,
                ledger.is_empty(),
            )
            .await;
        Self::recall(&caches, &mut slots);
        self.compare_composed_secrets(plan, &mut slots).await;
        let strays = self.strays(fleet.name(), &slots, listings).await;

        Ok(Observation {
            slots,
            ledger,
            forgotten,
            strays,
            confirmed,
            replacing,
            prerequisites: Vec::new(),
        })
    }

    /// Lists each (provider, kind, region) in play once, matches names, and reads every
    /// match (and its ownership), with reads in flight bounded. A match its list handed
    /// over whole ([`Listed::with_reading`](crate::Listed::with_reading)) is not read
    /// again. A recorded resource its list does not show is read by the handle `cached`
    /// holds for it (by slot) before it is called absent: a list may be incomplete.
    /// Returns what each list answered when `keep_listings` asks for it (to look for
    /// strays among them), and nothing otherwise.
    pub(super) async fn observe(
        &self,
        fleet: &str,
        slots: &mut [Slot],
        (included, cached): (&[bool], &[Option<&str>]),
        parallelism: usize,
        keep_listings: bool,
    ) -> Vec<Listing> {
        let parallelism = parallelism.max(1);
        let marker = Marker::new(fleet);
        let capabilities = self.capabilities();
        // Which slots each (provider, kind, region) must answer for.
        let mut scopes: BTreeMap<(&'static str, &'static str, String), Vec<usize>> =
            BTreeMap::new();
        for (i, slot) in slots.iter_mut().enumerate() {
            if let Some((reason, why)) = self.cannot_look(slot, included[i], &capabilities) {
                slot.seen = Seen::Unobserved(Unobserved::Reason(reason, why));
                continue;
            }
            scopes
                .entry((slot.provider, slot.kind, slot.subject.region.clone()))
                .or_default()
                .push(i);
        }

        // List every scope, in flight together.
        // Inputs first: the futures below must not borrow through closures, so that the
        // whole apply stays `Send` for callers who spawn it. The names each list is
        // expected to show are borrowed from the slots, which no list changes.
        let view: &[Slot] = slots;
        let jobs: Vec<(Scope, Arc<dyn Backend>, Vec<&str>)> = scopes
            .iter()
            .map(|(scope, members)| {
                let backend = Arc::clone(self.backends.get(scope.0).expect("checked above"));
                let expected: Vec<&str> = members
                    .iter()
                    .filter(|&&i| view[i].recorded && cached[i].is_none())
                    .map(|&i| view[i].subject.name.as_str())
                    .collect();
                (scope.clone(), backend, expected)
            })
            .collect();
        let lists: Vec<_> = jobs
            .into_iter()
            .map(|(scope, backend, expected)| self.list_scope(scope, backend, expected))
            .collect();
        let lists = futures::stream::iter(lists)
            .buffer_unordered(parallelism)
            .collect::<Vec<_>>()
            .await;

        let mut reads = Vec::new();
        let mut listings = Vec::new();
        for (scope, result) in lists {
            let members = &scopes[&scope];
            match result {
                Err(e) => {
                    for &i in members {
                        slots[i].seen = Seen::Unobserved(Unobserved::Error(Box::new(e.clone())));
                    }
                }
                Ok(mut listed) => {
                    // Where each name is listed: its first place, and after each place
                    // the next of the same name (names repeat only where a kind lets
                    // them), so that matching copies no name.
                    let mut first: HashMap<&str, usize> = HashMap::with_capacity(listed.len());
                    let mut next: Vec<Option<usize>> = vec![None; listed.len()];
                    for (at, l) in listed.iter().enumerate().rev() {
                        next[at] = first.insert(l.name.as_str(), at);
                    }
                    let found: Vec<(usize, Vec<usize>)> = members
                        .iter()
                        .map(|&i| {
                            let start = first.get(slots[i].subject.name.as_str()).copied();
                            (i, std::iter::successors(start, |&a| next[a]).collect())
                        })
                        .collect();
                    drop(first);
                    for (i, at) in found {
                        let slot = &slots[i];
                        match at.as_slice() {
                            // Missing from a list that may be incomplete: a recorded
                            // resource whose handle is known is read before it is
                            // called absent.
                            [] => match (&cached[i], slot.recorded) {
                                (Some(handle), true) => {
                                    reads.push((i, vec![(*handle).to_owned()], Handed::default()))
                                }
                                _ => slots[i].seen = Seen::Absent,
                            },
                            [one] => {
                                // What the list handed over goes to this resource's read
                                // (strays are looked for by name and handle alone).
                                let l = &mut listed[*one];
                                let handed = Handed {
                                    reading: l.take_reading(),
                                    raw_tags: l.take_raw_tags(),
                                };
                                reads.push((i, vec![l.handle.clone()], handed));
                            }
                            many => {
                                let handles = many.iter().map(|&a| listed[a].handle.clone());
                                reads.push((i, handles.collect(), Handed::default()));
                            }
                        }
                    }
                    if keep_listings {
                        // Strays are looked for by name, handle and the tags a list
                        // handed over (with a reading or alone).
                        for l in &mut listed {
                            if let Some(tags) = l.listed_tags() {
                                l.set_raw_tags(tags);
                            }
                        }
                        listings.push(Listing {
                            provider: scope.0,
                            kind: scope.1,
                            region: scope.2.clone(),
                            listed,
                        });
                    }
                }
            }
        }

        let ownership_kinds: HashMap<&'static str, BTreeSet<&'static str>> = capabilities
            .into_iter()
            .map(|(p, c)| (p, c.ownership))
            .collect();
        let reads: Vec<Read> = reads
            .into_iter()
            .map(|(i, handles, listed)| {
                let slot = &slots[i];
                Read {
                    slot: i,
                    listed,
                    backend: Arc::clone(self.backends.get(slot.provider).expect("checked above")),
                    kind: slot.kind,
                    handles,
                    readable: ownership_kinds
                        .get(slot.provider)
                        .is_some_and(|k| k.contains(slot.kind)),
                    in_ledger: slot.recorded,
                }
            })
            .collect();
        // Each read's future is made when it starts, not all of them up front: a
        // future per resource held at once is what a large fleet's plan spent most of
        // its time allocating and copying.
        // The closure borrows the slots and the marker, and takes nothing borrowed: a
        // borrowed argument would keep the run's future from being `Send`.
        let view: &[Slot] = slots;
        let marker = &marker;
        let start = |read: Read| {
            let subject = &view[read.slot].subject;
            let names = Names {
                name: &subject.name,
                region: &subject.region,
                marker,
            };
            self.read_scope(read, names)
        };
        let observed = futures::stream::iter(reads.into_iter().map(start))
            .buffer_unordered(parallelism)
            .collect::<Vec<_>>()
            .await;
        for (i, seen) in observed {
            slots[i].seen = seen;
        }
        listings
    }

    /// Why a slot cannot be looked at, if it cannot: left out by the caller, no
    /// backend for its provider, a backend that cannot reach its cloud (with the
    /// backend's own words), or a kind the backend lacks.
    fn cannot_look(
        &self,
        slot: &Slot,
        included: bool,
        capabilities: &HashMap<&'static str, Capabilities>,
    ) -> Option<(NotAttemptedReason, String)> {
        let provider = slot.provider;
        if !included {
            return Some((
                NotAttemptedReason::Filtered,
                "left out by --target/--exclude".to_owned(),
            ));
        }
        let Some(backend) = self.backends.get(provider) else {
            return Some((
                NotAttemptedReason::NoBinding,
                format!("no {provider} backend was given to the runner"),
            ));
        };
        if let Some(why) = backend.unreachable() {
            return Some((
                NotAttemptedReason::NoCredentials,
                format!("{provider} is unreachable: {why}"),
            ));
        }
        if !capabilities
            .get(provider)
            .is_some_and(|c| c.kinds.contains(slot.kind))
        {
            return Some((
                NotAttemptedReason::UnsupportedKind,
                format!(
                    "the {provider} backend does not realise kind {}",
                    slot.subject.kind
                ),
            ));
        }
        None
    }

    async fn list_scope(
        &self,
        scope: Scope,
        backend: Arc<dyn Backend>,
        expected: Vec<&str>,
    ) -> (Scope, Result<Vec<crate::Listed>, BackendError>) {
        let result = self
            .list_settled(&*backend, scope.1, &scope.2, &expected)
            .await;
        (scope, result)
    }

    async fn read_scope(&self, read: Read, names: Names<'_>) -> (usize, Seen) {
        let handle = match read.handles.as_slice() {
            [one] => one.clone(),
            many => match self.ours_among(&read, &names, many).await {
                Ok(handle) => handle,
                Err(e) => return (read.slot, Seen::Unobserved(Unobserved::Error(Box::new(e)))),
            },
        };
        let seen = self
            .read_one(
                &*read.backend,
                (read.kind, names.region, &handle),
                read.listed,
                read.readable,
                read.in_ledger,
                names.marker,
            )
            .await;
        (read.slot, seen)
    }

    /// Several resources share the declared name: the one carrying this fleet's marker
    /// is the declared one. None of them ours: the first (which the claim then refuses).
    /// More than one ours, or no way to tell: a conflict for a person to resolve.
    async fn ours_among(
        &self,
        read: &Read,
        names: &Names<'_>,
        handles: &[String],
    ) -> Result<String, BackendError> {
        let conflict = |why: String| {
            BackendError::new(
                ErrorKind::Conflict,
                format!(
                    "{} resources are named {:?} in {} ({}): {why}; delete or rename the extra ones",
                    handles.len(),
                    names.name,
                    names.region,
                    handles.join(", ")
                ),
            )
        };
        if !read.readable {
            return Err(conflict(
                "their tags cannot be read to tell which is this fleet's".into(),
            ));
        }
        let mut ours = Vec::new();
        for handle in handles {
            let tags = read
                .backend
                .ownership(read.kind, names.region, handle)
                .await?;
            if names.marker.verdict(&tags) == Ownership::Ours {
                ours.push(handle.clone());
            }
        }
        match ours.as_slice() {
            [] => Ok(handles[0].clone()),
            [one] => Ok(one.clone()),
            _ => Err(conflict(format!(
                "{} of them carry this fleet's marker",
                ours.len()
            ))),
        }
    }

    /// Lists one scope. While a name of `expected` (what the ledger says exists and no
    /// cached handle can read) is not shown, the scope is listed again after each of
    /// [`RELIST_WAITS`] before it is believed gone: a list may lag a create.
    async fn list_settled(
        &self,
        backend: &dyn Backend,
        kind: &'static str,
        region: &str,
        expected: &[&str],
    ) -> Result<Vec<crate::Listed>, BackendError> {
        // Each expected name's number, worked out once for every list (hashed with
        // foldhash: the records choose these names; a list's names are only looked up).
        let mut wanted: foldhash::HashMap<&str, usize> = foldhash::HashMap::default();
        for &name in expected {
            let next = wanted.len();
            wanted.entry(name).or_insert(next);
        }
        let mut listed = backend.list(kind, region).await?;
        for wait in RELIST_WAITS {
            if shows_all(&listed, &wanted) {
                break;
            }
            self.clock.sleep(wait).await;
            listed = backend.list(kind, region).await?;
        }
        Ok(listed)
    }

    /// One resource's sighting and owner: the complete read its list handed over
    /// (`listed`), or a `read`; ownership from the tags that came with it, or an
    /// `ownership` call.
    async fn read_one(
        &self,
        backend: &dyn Backend,
        (kind, region, handle): (&'static str, &str, &str),
        listed: Handed,
        readable: bool,
        in_ledger: bool,
        marker: &Marker,
    ) -> Seen {
        let read = match listed.reading {
            Some(whole) => Ok(whole),
            None => backend.read(kind, region, handle).await,
        };
        let sighting = match (read, listed.raw_tags) {
            (Ok(s), Some(tags)) if s.raw_tags().is_none() => s.with_raw_tags(tags),
            (Ok(s), _) => s,
            (Err(e), _) if e.kind == ErrorKind::NotFound => return Seen::Absent,
            (Err(e), _) => return Seen::Unobserved(Unobserved::Error(Box::new(e))),
        }
        .without_marker();
        let owner = if let (true, Some(tags)) = (readable, sighting.raw_tags()) {
            // The read brought the tags: no second call.
            match marker.verdict(tags) {
                Ownership::Ours => Owner::Ours,
                other => Owner::Not(other),
            }
        } else if readable {
            match backend.ownership(kind, region, handle).await {
                Ok(tags) => match marker.verdict(&tags) {
                    Ownership::Ours => Owner::Ours,
                    other => Owner::Not(other),
                },
                Err(e) if e.kind == ErrorKind::NotFound => return Seen::Absent,
                Err(e) => return Seen::Unobserved(Unobserved::Error(Box::new(e))),
            }
        } else {
            Owner::Unreadable { in_ledger }
        };
        Seen::Present { sighting, owner }
    }
}

/// Whether `listed` shows every name of `wanted` (each numbered from 0).
fn shows_all(listed: &[crate::Listed], wanted: &foldhash::HashMap<&str, usize>) -> bool {
    let mut seen = vec![false; wanted.len()];
    let mut found = 0;
    for l in listed {
        if let Some(&k) = wanted.get(l.name.as_str())
            && !std::mem::replace(&mut seen[k], true)
        {
            found += 1;
        }
    }
    found == wanted.len()
}
