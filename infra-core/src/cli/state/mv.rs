//! `state mv OLD NEW`: a row renamed to follow its resource.
//!
//! A resource is found by the name it is declared under: each run lists its provider's
//! kind in its region and matches that name. So a row may take a new address only when
//! the cloud already shows that very resource — the same handle — under it: after a
//! rename made in the cloud (an instance's `Name` tag), or between two kinds that list
//! the same resources. Then the row (with its marks) and its cached observation become
//! NEW's, and a declaration of NEW finds the resource in place: no create, no delete.
//!
//! A plain rename of the declaration is refused: the cloud still knows the resource by
//! its old name, no provider here can rename one, and a declaration of NEW would not
//! find it (the next apply would create NEW and delete OLD). Moving records cannot move
//! a resource to another region or provider either. A refusal changes nothing.

use super::super::console::Io;
use super::super::reach::{backend_for, check_account, handles_named};
use super::error;
use super::rows::{cached, declared, pick, put_cached, take_cached};
use crate::{Backend, Engine, Fleet, LedgerRow};

/// `state mv OLD NEW`.
pub(in crate::cli) async fn mv(
    io: &mut Io<'_>,
    engine: &Engine,
    fleet: &Fleet,
    old: &str,
    new: &str,
) -> u8 {
    let (from, to, handle) = match settle(engine, fleet, old, new).await {
        Ok(found) => found,
        Err(why) => return error(io, &format!("{why}. The records were not changed")),
    };
    if let Err(e) = rename(engine, fleet, &from, &to) {
        return error(io, &e);
    }
    io.out(&format!(
        "moved {from} → {to}\nThe cloud shows that very resource (handle {handle}) as `{}`: \
         its row, with its marks, and its cached observation carry the new address.\n",
        to.name
    ));
    if declared(fleet, &from).is_some() {
        io.out(&format!(
            "note: the fleet still declares {from}: until it declares {to} instead, the \
             next apply looks for `{}` and creates it.\n",
            from.name
        ));
    }
    if declared(fleet, &to).is_none() {
        io.out(&format!(
            "note: the fleet does not declare {to}: declare it before the next apply, which \
             would otherwise delete it.\n"
        ));
    }
    0
}

/// The row to move, where to, and the handle of the resource both name; or why the
/// move would not be true.
async fn settle(
    engine: &Engine,
    fleet: &Fleet,
    old: &str,
    new: &str,
) -> Result<(LedgerRow, LedgerRow, String), String> {
    let store = &**engine.store();
    let ledger = store.load_ledger(fleet.name()).map_err(|e| e.to_string())?;
    let from = pick(&ledger, fleet.name(), old)?;
    let mut providers: Vec<&str> = engine.backends().providers().collect();
    providers.extend(fleet.providers());
    providers.push(&from.provider);
    let to = destination(&from, new, &providers);
    if to == from {
        return Err(format!("{from} and {new:?} are the same address"));
    }
    if to.provider != from.provider || to.region != from.region {
        return Err(format!(
            "{from} cannot become {to}: a resource stays with its provider and in its \
             region, whatever the records say. To move it, declare it there (the apply \
             creates it there, then deletes the old one)"
        ));
    }
    if ledger.rows.contains(&to) {
        return Err(format!("{to} is already in the records"));
    }
    let handle = same_resource(engine, fleet, &from, &to).await?;
    Ok((from, to, handle))
}

/// NEW, read against OLD: `provider/kind/name (region)`, `provider/kind/name` (in
/// OLD's region), or a bare name (OLD's provider, kind and region). The full form is
/// recognised by its first part naming one of `providers`.
fn destination(from: &LedgerRow, text: &str, providers: &[&str]) -> LedgerRow {
    let text = text.trim();
    let (path, region) = match text.rfind(" (") {
        Some(open) if text.ends_with(')') => (
            text[..open].trim(),
            Some(text[open + 2..text.len() - 1].trim()),
        ),
        _ => (text, None),
    };
    let region = region.unwrap_or(&from.region).to_owned();
    let parts: Vec<&str> = path.splitn(3, '/').collect();
    match parts.as_slice() {
        [provider, kind, name] if providers.contains(provider) => LedgerRow {
            provider: (*provider).to_owned(),
            kind: (*kind).to_owned(),
            name: (*name).to_owned(),
            region,
        },
        _ => LedgerRow {
            name: path.to_owned(),
            region,
            ..from.clone()
        },
    }
}

/// The handle of the resource `from` stands for, when the cloud shows it as `to`.
async fn same_resource(
    engine: &Engine,
    fleet: &Fleet,
    from: &LedgerRow,
    to: &LedgerRow,
) -> Result<String, String> {
    let cannot_look =
        |why: String| format!("cannot tell whether {to} is the resource {from} stands for: {why}");
    let (old_backend, old_kind) =
        backend_for(engine.backends(), &from.provider, &from.kind).map_err(cannot_look)?;
    let (new_backend, new_kind) =
        backend_for(engine.backends(), &to.provider, &to.kind).map_err(cannot_look)?;
    check_account(fleet, &*new_backend)
        .await
        .map_err(cannot_look)?;
    let old_handle = old_handle(engine, fleet, &*old_backend, old_kind, from)
        .await
        .map_err(|e| e.unwrap_or_else(&cannot_look))?;
    let new_handles = handles_named(&*new_backend, new_kind, &to.region, &to.name)
        .await
        .map_err(|e| cannot_look(e.to_string()))?;
    if new_handles.contains(&old_handle) {
        return Ok(old_handle);
    }
    Err(refusal(from, to, &old_handle, &new_handles))
}

/// The handle of the resource `from` stands for: the one last observed, else the one
/// the cloud lists under its name. `Err(Ok(why))` when it cannot be told which;
/// `Err(Err(why))` when the cloud or the records could not be read.
async fn old_handle(
    engine: &Engine,
    fleet: &Fleet,
    backend: &dyn Backend,
    kind: &'static str,
    from: &LedgerRow,
) -> Result<String, Result<String, String>> {
    let entry = cached(&**engine.store(), fleet.name(), from).map_err(|e| Err(e.to_string()))?;
    if let Some(entry) = entry {
        return Ok(entry.handle);
    }
    let found = handles_named(backend, kind, &from.region, &from.name)
        .await
        .map_err(|e| Err(e.to_string()))?;
    match found.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(Ok(format!(
            "cannot tell which resource {from} stands for: no observation of it is cached \
             (`refresh` records one) and the cloud lists {} named `{}`",
            if found.is_empty() {
                "none".to_owned()
            } else {
                found.len().to_string()
            },
            from.name
        ))),
    }
}

/// Why the cloud does not show the resource `from` stands for as `to`.
fn refusal(from: &LedgerRow, to: &LedgerRow, old_handle: &str, new_handles: &[String]) -> String {
    if let Some(other) = new_handles.first() {
        return format!(
            "the cloud shows another resource as {to} (handle {other}), not the one {from} \
             stands for (handle {old_handle})"
        );
    }
    if to.kind == from.kind {
        return format!(
            "{from} cannot become {to} in the records alone: the cloud knows this resource as \
             `{}` (handle {old_handle}) and shows nothing named `{}`. A resource is found by \
             the name it is declared under, and no {} resource can be renamed by this tool, so \
             a declaration of `{}` would not find it: the next apply would create a new one \
             and delete this one. Keep the name `{}` in the declaration (the variable holding \
             its key can be called anything)",
            from.name, to.name, from.provider, to.name, from.name
        );
    }
    format!(
        "a declaration of {to} would not find the resource {from} stands for (handle \
         {old_handle}): the {} backend lists no {} named `{}` in {}",
        to.provider, to.kind, to.name, to.region
    )
}

/// Moves the row (with its discovered, intent and deleting marks) and the cached observation.
fn rename(engine: &Engine, fleet: &Fleet, from: &LedgerRow, to: &LedgerRow) -> Result<(), String> {
    let store = &**engine.store();
    let mut ledger = store.load_ledger(fleet.name()).map_err(|e| e.to_string())?;
    let discovered = ledger.is_discovered(from);
    let intent = ledger.is_intent(from);
    let deleting = ledger.is_deleting(from);
    ledger.remove(from);
    ledger.rows.insert(to.clone());
    if discovered {
        ledger.discovered.insert(to.clone());
    }
    if intent {
        ledger.intents.insert(to.clone());
    }
    if deleting {
        ledger.deleting.insert(to.clone());
    }
    store
        .save_ledger(fleet.name(), &ledger)
        .map_err(|e| e.to_string())?;
    let entry = take_cached(store, fleet.name(), from).map_err(|e| {
        format!(
            "{from} was moved to {to} in the ledger, but its cached observation could not be: {e}"
        )
    })?;
    if let Some(entry) = entry {
        put_cached(store, fleet.name(), to, entry).map_err(|e| {
            format!(
                "{from} was moved to {to} in the ledger, but its cached observation was lost: {e}"
            )
        })?;
    }
    Ok(())
}
