//! `discover --emit-rust`: the declarations of the resources `discover` added that the
//! fleet does not declare, from what their clouds report. Each resource added is
//! listed under its name (discover itself keeps no handle), and each undeclared one
//! read once more (discover reads only markers); a reference to a resource the records
//! observed, or to one just added, is written with that resource's variable.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::super::reach::{backend_for, handles_named};
use super::super::state::declared;
use super::reported::{Emitted, Taken, emit};
use crate::{Engine, Fleet, LedgerRow, Marker, Ownership, Subject};

/// The declarations of what `added` holds that the fleet does not declare; those that
/// could not be read are named as comments, with why.
pub(in crate::cli) async fn discovered(
    engine: &Engine,
    fleet: &Fleet,
    added: &[LedgerRow],
) -> Emitted {
    let mut handles = known_handles(engine, fleet);
    let mut read: Vec<(LedgerRow, Map<String, Value>)> = Vec::new();
    let mut unread = Vec::new();
    for row in added {
        let undeclared = declared(fleet, row).is_none();
        match reported(engine, fleet, row, undeclared).await {
            Ok((handle, reported)) => {
                handles.insert(handle, subject(row));
                if let Some(reported) = reported {
                    read.push((row.clone(), reported));
                }
            }
            // A declared one is only referred to: its declaration is the fleet's.
            Err(_) if !undeclared => {}
            Err(why) => unread.push((row.clone(), format!("// {row}: not written: {why}"))),
        }
    }
    let taken: Vec<Taken<'_>> = read
        .iter()
        .map(|(row, reported)| Taken {
            row,
            reported,
            settled: None,
            declared: None,
        })
        .collect();
    let mut emitted = emit(fleet, &taken, &handles);
    emitted.declarations.extend(unread);
    emitted
}

fn subject(row: &LedgerRow) -> Subject {
    Subject {
        provider: row.provider.clone(),
        kind: row.kind.clone(),
        name: row.name.clone(),
        region: row.region.clone(),
    }
}

/// The handles the records last observed, by handle.
fn known_handles(engine: &Engine, fleet: &Fleet) -> BTreeMap<String, Subject> {
    let store = &**engine.store();
    let mut handles = BTreeMap::new();
    for (provider, kind) in store.cached_pairs(fleet.name()).unwrap_or_default() {
        for e in store
            .load_cache(fleet.name(), &provider, &kind)
            .unwrap_or_default()
        {
            let row = LedgerRow {
                provider: provider.clone(),
                kind: kind.clone(),
                name: e.name,
                region: e.region,
            };
            handles.insert(e.handle, subject(&row));
        }
    }
    handles
}

/// The handle of the resource `row` names that carries this fleet's marker, and (when
/// `read`) what its cloud reports of it.
async fn reported(
    engine: &Engine,
    fleet: &Fleet,
    row: &LedgerRow,
    read: bool,
) -> Result<(String, Option<Map<String, Value>>), String> {
    let (backend, kind) = backend_for(engine.backends(), &row.provider, &row.kind)?;
    let named = handles_named(&*backend, kind, &row.region, &row.name)
        .await
        .map_err(|e| format!("it could not be listed: {e}"))?;
    let marker = Marker::new(fleet.name());
    let mut ours = None;
    for handle in named {
        let tags = backend
            .ownership(kind, &row.region, &handle)
            .await
            .map_err(|e| format!("its tags could not be read: {e}"))?;
        if marker.verdict(&tags) == Ownership::Ours {
            ours = Some(handle);
            break;
        }
    }
    let handle = ours.ok_or("it is no longer listed with this fleet's marker")?;
    if !read {
        return Ok((handle, None));
    }
    let sighting = backend
        .read(kind, &row.region, &handle)
        .await
        .map_err(|e| format!("it could not be read: {e}"))?;
    let mut reported = sighting.reported().clone();
    crate::backend::strip_marker(&mut reported);
    Ok((handle, Some(reported)))
}
