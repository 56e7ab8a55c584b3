//! The records as the state commands see them: ledger rows named by an address, their
//! cached observations, and whether the fleet declares them.

use std::collections::BTreeSet;

use crate::engine::resolve_address;
use crate::{CacheEntry, Fleet, KindMeta, Ledger, LedgerRow, RecordError, RecordStore, Subject};

/// The subject a ledger row stands for.
pub(super) fn subject_of(row: &LedgerRow) -> Subject {
    Subject {
        provider: row.provider.clone(),
        kind: row.kind.clone(),
        name: row.name.clone(),
        region: row.region.clone(),
    }
}

/// The one row of `ledger` that `address` names (in any form a plan prints); an error
/// naming the nearest rows when it names none, or every row it names when it names
/// more than one.
pub(in crate::cli) fn pick(
    ledger: &Ledger,
    fleet: &str,
    address: &str,
) -> Result<LedgerRow, String> {
    let rows: Vec<&LedgerRow> = ledger.rows.iter().collect();
    let subjects: Vec<Subject> = rows.iter().map(|r| subject_of(r)).collect();
    match resolve_address(address, &subjects) {
        Ok(hits) if hits.len() == 1 => Ok(rows[hits[0]].clone()),
        Ok(hits) => Err(format!(
            "{address:?} names {} resources in the records of fleet `{fleet}`: {}; give the \
             whole address",
            hits.len(),
            hits.iter()
                .map(|&i| format!("'{}'", subjects[i]))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Err(_) if ledger.is_empty() => Err(format!(
            "{address:?} names nothing: the records of fleet `{fleet}` are empty (nothing \
             applied yet, or --state-dir points elsewhere)"
        )),
        Err(nearest) => Err(format!(
            "{address:?} names no resource in the records of fleet `{fleet}`{}",
            if nearest.is_empty() {
                String::new()
            } else {
                format!(
                    "; did you mean {}?",
                    nearest
                        .iter()
                        .map(|n| format!("'{n}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        )),
    }
}

/// How the fleet declares the resource a row stands for (`present`, `absent`,
/// `unmanaged`), if it declares it in that region.
pub(in crate::cli) fn declared(fleet: &Fleet, row: &LedgerRow) -> Option<&'static str> {
    fleet
        .resources()
        .find(|r| {
            let rf = r.reference();
            rf.provider == row.provider
                && rf.kind == row.kind
                && rf.name == row.name
                && r.region() == row.region
        })
        .map(|r| r.status())
}

/// The cached observation of a row's resource, if there is one.
pub(in crate::cli) fn cached(
    store: &dyn RecordStore,
    fleet: &str,
    row: &LedgerRow,
) -> Result<Option<CacheEntry>, RecordError> {
    Ok(store
        .load_cache(fleet, &row.provider, &row.kind)?
        .into_iter()
        .find(|e| e.name == row.name && e.region == row.region))
}

/// Removes the cached observation of a row's resource, and returns it.
pub(super) fn take_cached(
    store: &dyn RecordStore,
    fleet: &str,
    row: &LedgerRow,
) -> Result<Option<CacheEntry>, RecordError> {
    let mut entries = store.load_cache(fleet, &row.provider, &row.kind)?;
    let Some(at) = entries
        .iter()
        .position(|e| e.name == row.name && e.region == row.region)
    else {
        return Ok(None);
    };
    let entry = entries.remove(at);
    store.save_cache(fleet, &row.provider, &row.kind, &entries)?;
    Ok(Some(entry))
}

/// Files `entry` as the cached observation of `row`'s resource (replacing any).
pub(in crate::cli) fn put_cached(
    store: &dyn RecordStore,
    fleet: &str,
    row: &LedgerRow,
    mut entry: CacheEntry,
) -> Result<(), RecordError> {
    let mut entries = store.load_cache(fleet, &row.provider, &row.kind)?;
    entries.retain(|e| !(e.name == row.name && e.region == row.region));
    entry.name = row.name.clone();
    entry.region = row.region.clone();
    entries.push(entry);
    entries.sort_by(|a, b| (&a.name, &a.region).cmp(&(&b.name, &b.region)));
    store.save_cache(fleet, &row.provider, &row.kind, &entries)
}

/// The fields of `kind` whose values are, or derive from, a secret: from the fleet's
/// own declarations (custom kinds included), else from the kinds this crate declares.
pub(super) fn sensitive_fields(fleet: &Fleet, kind: &str) -> BTreeSet<&'static str> {
    let meta = fleet
        .resources()
        .map(|r| r.kind())
        .find(|m| m.id == kind)
        .or_else(|| builtin_kinds().into_iter().find(|m| m.id == kind));
    meta.map(|m| {
        m.fields
            .iter()
            .filter(|f| f.sensitive)
            .map(|f| f.name)
            .collect()
    })
    .unwrap_or_default()
}

fn builtin_kinds() -> Vec<KindMeta> {
    use crate::kinds::*;
    vec![
        KindMeta::of::<Iam>(),
        KindMeta::of::<ObjectStore>(),
        KindMeta::of::<Compute>(),
        KindMeta::of::<Queues>(),
        KindMeta::of::<Secrets>(),
        KindMeta::of::<ImageRegistry>(),
        KindMeta::of::<Postgres>(),
        KindMeta::of::<S3Bucket>(),
        KindMeta::of::<SecurityGroup>(),
        KindMeta::of::<AwsInstance>(),
        KindMeta::of::<FunctionNamespace>(),
        KindMeta::of::<Function>(),
        KindMeta::of::<ContainerNamespace>(),
        KindMeta::of::<Container>(),
    ]
}
