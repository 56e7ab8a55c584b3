//! What the clouds say of each resource to take over: whether it exists under its name,
//! and whose marker it carries.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::super::reach::{backend_for, check_account};
use crate::{Backend, Backends, Fleet, LedgerRow, Marker, Ownership};

/// What can be done with one located resource.
pub(super) enum Verdict {
    /// It exists and is nobody else's: it can be taken over.
    Ready(Ready),
    /// It is not taken over, for a reason that is no failure (it does not exist, it is
    /// another fleet's, it is in the records already).
    Not(String),
    /// It could not be looked at: the run cannot say what it is.
    Blind(String),
}

/// A resource that can be taken over.
pub(super) struct Ready {
    pub(super) backend: Arc<dyn Backend>,
    pub(super) kind: &'static str,
    pub(super) handle: String,
    /// Whether it carries this fleet's marker already.
    pub(super) marked: bool,
}

/// A provider, a kind and a region: what one `list` covers.
type Scope = (String, &'static str, String);

/// Looks at resources, one provider's backend and account checked once, one list per
/// provider, kind and region.
pub(super) struct Assessor<'a> {
    fleet: &'a Fleet,
    backends: &'a Backends,
    accounts: BTreeMap<String, Result<(), String>>,
    lists: BTreeMap<Scope, Result<Vec<(String, String)>, String>>,
}

impl<'a> Assessor<'a> {
    pub(super) fn new(fleet: &'a Fleet, backends: &'a Backends) -> Self {
        Assessor {
            fleet,
            backends,
            accounts: BTreeMap::new(),
            lists: BTreeMap::new(),
        }
    }

    /// What the cloud says of the resource `row` names.
    pub(super) async fn assess(&mut self, row: &LedgerRow) -> Verdict {
        let (backend, kind) = match backend_for(self.backends, &row.provider, &row.kind) {
            Ok(found) => found,
            Err(why) => return Verdict::Blind(why),
        };
        if let Err(why) = self.account(&*backend).await {
            return Verdict::Blind(why);
        }
        let handles = match self.named(&*backend, kind, row).await {
            Ok(handles) => handles,
            Err(why) => return Verdict::Blind(why),
        };
        let handle = match handles.as_slice() {
            [] => {
                return Verdict::Not(format!(
                    "it does not exist: the {} backend lists no {kind} named `{}` in {}",
                    row.provider, row.name, row.region
                ));
            }
            [one] => one.clone(),
            many => {
                return Verdict::Not(format!(
                    "{} resources are named `{}` in {}: which one Terraform manages cannot be told",
                    many.len(),
                    row.name,
                    row.region
                ));
            }
        };
        let tags = match backend.ownership(kind, &row.region, &handle).await {
            Ok(tags) => tags,
            Err(e) => return Verdict::Blind(format!("its tags could not be read: {e}")),
        };
        let marked = match Marker::new(self.fleet.name()).verdict(&tags) {
            Ownership::Ours => true,
            Ownership::Unmarked => false,
            Ownership::OtherFleet { fleet } => {
                return Verdict::Not(format!("it carries fleet `{fleet}`'s ownership marker"));
            }
        };
        Verdict::Ready(Ready {
            backend,
            kind,
            handle,
            marked,
        })
    }

    async fn account(&mut self, backend: &dyn Backend) -> Result<(), String> {
        let provider = backend.provider().to_owned();
        if !self.accounts.contains_key(&provider) {
            let checked = check_account(self.fleet, backend).await;
            self.accounts.insert(provider.clone(), checked);
        }
        self.accounts[&provider].clone()
    }

    /// The handles listed under the row's name (one list per scope).
    async fn named(
        &mut self,
        backend: &dyn Backend,
        kind: &'static str,
        row: &LedgerRow,
    ) -> Result<Vec<String>, String> {
        let scope = (row.provider.clone(), kind, row.region.clone());
        if !self.lists.contains_key(&scope) {
            let listed = backend
                .list(kind, &row.region)
                .await
                .map(|l| l.into_iter().map(|l| (l.name, l.handle)).collect())
                .map_err(|e| {
                    format!(
                        "{} {kind} in {} could not be listed: {e}",
                        row.provider, row.region
                    )
                });
            self.lists.insert(scope.clone(), listed);
        }
        let listed = self.lists[&scope].clone()?;
        Ok(listed
            .into_iter()
            .filter(|(name, _)| *name == row.name)
            .map(|(_, handle)| handle)
            .collect())
    }
}
