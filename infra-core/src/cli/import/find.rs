//! The resource `CLOUD_ID` names, looked for where the declaration places it: read by
//! its id in the declared kind and region, its marker read, and the name the cloud
//! lists it under (the name a plan finds it by). Each reason it cannot be taken in is a
//! [`Refusal`]; a call that failed is a failure, never "absent".

use std::collections::BTreeSet;
use std::sync::Arc;

use super::super::reach::check_account;
use super::Refusal;
use crate::backend::Sighting;
use crate::{Backend, ErrorKind, Fleet, Ledger, LedgerRow, Marker, Ownership};

/// The resource to take in.
pub(super) struct Found {
    pub(super) backend: Arc<dyn Backend>,
    pub(super) kind: &'static str,
    pub(super) sighting: Sighting,
    /// Whether it carries this fleet's marker already.
    pub(super) marked: bool,
}

/// Why the resource is not taken in.
pub(super) enum Stop {
    /// It cannot be, for this reason (nothing failed).
    Refused(Refusal, String),
    /// A call failed or nothing could look: what it is is not known.
    Failed(String),
}

/// Reads `id` as the resource `row` declares, and checks it may be taken in as it.
pub(super) async fn find(
    fleet: &Fleet,
    backends: &crate::Backends,
    ledger: &Ledger,
    row: &LedgerRow,
    id: &str,
) -> Result<Found, Stop> {
    let (backend, kind) = backend(backends, row)?;
    check_account(fleet, &*backend)
        .await
        .map_err(Stop::Failed)?;
    let sighting = match backend.read(kind, &row.region, id).await {
        Ok(s) => s,
        Err(e) if e.kind == ErrorKind::NotFound => {
            return Err(absent(fleet, ledger, &*backend, row, kind, id).await);
        }
        Err(e) => {
            return Err(Stop::Failed(format!(
                "{id} could not be read as a {} {kind} in {} ({e}): whether it exists is not known",
                row.provider, row.region
            )));
        }
    };
    let tags = match sighting.raw_tags() {
        Some(tags) => tags.clone(),
        None => backend
            .ownership(kind, &row.region, id)
            .await
            .map_err(|e| Stop::Failed(format!("the tags of {id} could not be read: {e}")))?,
    };
    let marked = match Marker::new(fleet.name()).verdict(&tags) {
        Ownership::Ours => true,
        Ownership::Unmarked => false,
        Ownership::OtherFleet { fleet: other } => {
            return Err(Stop::Refused(
                Refusal::OtherFleet,
                format!(
                    "{id} carries the ownership marker of fleet `{other}` (managed-by-infra={other}): \
                     taking a resource from another fleet is never a side effect. Release it \
                     from `{other}` first (`forget` there)"
                ),
            ));
        }
    };
    listed_as(&*backend, row, kind, id).await?;
    Ok(Found {
        backend,
        kind,
        sighting,
        marked,
    })
}

/// The provider's backend and the kind as it spells it; a kind whose tags cannot be
/// read cannot carry the marker, and is refused.
fn backend(
    backends: &crate::Backends,
    row: &LedgerRow,
) -> Result<(Arc<dyn Backend>, &'static str), Stop> {
    let provider = &row.provider;
    let backend = backends
        .get(provider)
        .ok_or_else(|| Stop::Failed(format!("no {provider} backend was given to the runner")))?;
    if let Some(why) = backend.unreachable() {
        return Err(Stop::Failed(format!("{provider} is unreachable: {why}")));
    }
    let caps = backend.capabilities();
    let kind = caps
        .kinds
        .iter()
        .copied()
        .find(|k| *k == row.kind)
        .ok_or_else(|| {
            Stop::Failed(format!(
                "the {provider} backend does not realise kind {}",
                row.kind
            ))
        })?;
    if !caps.ownership.contains(kind) {
        return Err(Stop::Refused(
            Refusal::Unmarkable,
            format!(
                "a {provider} {kind} cannot carry the ownership marker (its tags cannot be read), \
                 so whether another fleet owns it cannot be told, and this fleet could not \
                 prove it its own"
            ),
        ));
    }
    Ok((Arc::clone(backend), kind))
}

/// Why `id` is not found as the declared kind in the declared region: it is another
/// kind of the provider or in another region the fleet uses (refused, naming what it
/// is), or nothing the provider shows there (absent). A read elsewhere that fails
/// leaves this unknown.
async fn absent(
    fleet: &Fleet,
    ledger: &Ledger,
    backend: &dyn Backend,
    row: &LedgerRow,
    kind: &'static str,
    id: &str,
) -> Stop {
    let mut regions: BTreeSet<String> = fleet
        .regions()
        .get(row.provider.as_str())
        .map(|rs| rs.iter().map(|r| (*r).to_owned()).collect())
        .unwrap_or_default();
    regions.extend(
        ledger
            .rows
            .iter()
            .filter(|r| r.provider == row.provider)
            .map(|r| r.region.clone()),
    );
    regions.insert(row.region.clone());
    let kinds = backend.capabilities().kinds;
    // Another kind in the declared region first, then the other regions.
    let mut places: Vec<(&'static str, &str)> = kinds
        .iter()
        .filter(|k| **k != kind)
        .map(|k| (*k, row.region.as_str()))
        .collect();
    for region in regions.iter().filter(|r| **r != row.region) {
        places.extend(kinds.iter().map(|k| (*k, region.as_str())));
    }
    for (other_kind, region) in places {
        match backend.read(other_kind, region, id).await {
            Ok(_) => {
                return Stop::Refused(
                    Refusal::Elsewhere,
                    format!(
                        "{id} is of kind {other_kind}, in {region}; {row} is declared of kind \
                         {kind}, in {}: the records cannot make a resource another kind, nor \
                         move it to another region",
                        row.region
                    ),
                );
            }
            Err(e) if matches!(e.kind, ErrorKind::NotFound | ErrorKind::Invalid) => {}
            Err(e) => {
                return Stop::Failed(format!(
                    "the {} backend has no {kind} {id} in {}, and whether {id} is another of its \
                     resources could not be told (reading it as a {other_kind} in {region}: {e})",
                    row.provider, row.region
                ));
            }
        }
    }
    Stop::Refused(
        Refusal::Absent,
        format!(
            "{id} names nothing: the {} backend finds no resource of kind {kind} with that id \
             in {}, nor of any other of its kinds in the regions this fleet uses ({})",
            row.provider,
            row.region,
            regions.into_iter().collect::<Vec<_>>().join(", ")
        ),
    )
}

/// Checks that the cloud lists `id` under the declared name: a plan finds a resource
/// by the name it is declared under, so one listed under another name would not be
/// found by the next plan.
async fn listed_as(
    backend: &dyn Backend,
    row: &LedgerRow,
    kind: &'static str,
    id: &str,
) -> Result<(), Stop> {
    let listed = backend.list(kind, &row.region).await.map_err(|e| {
        Stop::Failed(format!(
            "the {} {kind} in {} could not be listed: {e}",
            row.provider, row.region
        ))
    })?;
    match listed.iter().find(|l| l.handle == id) {
        Some(l) if l.name == row.name => Ok(()),
        Some(l) => Err(Stop::Refused(
            Refusal::OtherName,
            format!(
                "the cloud knows {id} as `{}`, not `{}`: a plan finds a resource by the name it \
                 is declared under, so a declaration of `{}` would not find it. Declare it as \
                 `{}` instead",
                l.name, row.name, row.name, l.name
            ),
        )),
        None => Err(Stop::Refused(
            Refusal::Unlisted,
            format!(
                "the {} {kind} list in {} does not show {id} (yet): a plan finds a resource by \
                 listing, so the next plan would not find it. Run again in a moment",
                row.provider, row.region
            ),
        )),
    }
}
