//! Reaching one provider outside a run (`state mv`, `import-tfstate`): its backend for
//! a kind, the fleet's account check, and the handles listed under a name.

use std::sync::Arc;

use crate::{Backend, BackendError, Backends, Fleet};

/// The backend of `provider` that can look at `kind`, and the kind's id as the backend
/// spells it; or why there is none.
pub(super) fn backend_for(
    backends: &Backends,
    provider: &str,
    kind: &str,
) -> Result<(Arc<dyn Backend>, &'static str), String> {
    let backend = backends
        .get(provider)
        .ok_or_else(|| format!("no {provider} backend was given to the runner"))?;
    if let Some(why) = backend.unreachable() {
        return Err(format!("{provider} is unreachable: {why}"));
    }
    let caps = backend.capabilities();
    let kind = caps
        .kinds
        .iter()
        .copied()
        .find(|k| *k == kind)
        .ok_or_else(|| format!("the {provider} backend does not realise kind {kind}"))?;
    if !caps.ownership.contains(kind) {
        return Err(format!(
            "the {provider} backend cannot read the tags of a {kind}, so whose one is cannot be told"
        ));
    }
    Ok((Arc::clone(backend), kind))
}

/// Refuses a backend authenticated in an account the fleet does not name (when it
/// names any for the provider), as every run does before it lists anything.
pub(super) async fn check_account(fleet: &Fleet, backend: &dyn Backend) -> Result<(), String> {
    let provider = backend.provider();
    let Some(allowed) = fleet.accounts().get(provider) else {
        return Ok(());
    };
    let found = backend.account().await.map_err(|e| {
        format!("could not tell which {provider} account the credentials act in: {e}")
    })?;
    if allowed.contains(&found) {
        return Ok(());
    }
    Err(format!(
        "{provider} credentials act in account {found}, but fleet `{}` may only touch {}",
        fleet.name(),
        allowed.iter().cloned().collect::<Vec<_>>().join(", ")
    ))
}

/// The handles `list` shows under `name` in `region` (several where a kind lets names
/// repeat).
pub(super) async fn handles_named(
    backend: &dyn Backend,
    kind: &'static str,
    region: &str,
    name: &str,
) -> Result<Vec<String>, BackendError> {
    let listed = backend.list(kind, region).await?;
    Ok(listed
        .into_iter()
        .filter(|l| l.name == name)
        .map(|l| l.handle)
        .collect())
}
