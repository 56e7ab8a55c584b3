//! Prerequisites: what a provider must do before the writes a run decided — a product
//! activated for the project, credentials made for it — asked of each backend for the
//! scopes where something will be created, so that the plan shows them and nothing is
//! done silently.

use std::collections::BTreeSet;

use serde::Serialize;

use super::Engine;
use super::model::{Decision, Observation, Slot};
use crate::Repair;

/// One prerequisite of a plan: which provider does it, for which kind and region, and
/// what it is; or why it could not be checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedPrerequisite {
    /// The provider that does it.
    pub provider: String,
    /// The kind whose writes need it.
    pub kind: String,
    /// The region.
    pub region: String,
    /// What will be done, in the provider's words; or, when [`Self::unchecked`] is set,
    /// what kept the provider from saying.
    pub what: String,
    /// Whether the provider could not be asked (its answer is then in `what`): the
    /// apply finds out for itself, and may fail there.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unchecked: bool,
}

/// Whether a slot's decision creates something (a create, or a replace's new half).
fn creates(slot: &Slot) -> bool {
    match &slot.decision {
        Decision::Create => true,
        Decision::Existing { repair, .. } => *repair == Repair::Replace,
        _ => false,
    }
}

impl Engine {
    /// The prerequisites of the creates `observation` decided: one question per
    /// (provider, kind, region) that will create something, to its backend.
    pub(super) async fn prerequisites(
        &self,
        observation: &Observation,
    ) -> Vec<PlannedPrerequisite> {
        let scopes: BTreeSet<(&'static str, &'static str, &str)> = observation
            .slots
            .iter()
            .filter(|s| creates(s))
            .map(|s| (s.provider, s.kind, s.subject.region.as_str()))
            .collect();
        let mut all = Vec::new();
        for (provider, kind, region) in scopes {
            let Some(backend) = self.backends.get(provider) else {
                continue;
            };
            let at = |what: String, unchecked: bool| PlannedPrerequisite {
                provider: provider.to_owned(),
                kind: kind.to_owned(),
                region: region.to_owned(),
                what,
                unchecked,
            };
            match backend.prerequisites(kind, region).await {
                Ok(found) => all.extend(found.into_iter().map(|p| at(p.what, false))),
                Err(e) => all.push(at(e.to_string(), true)),
            }
        }
        all
    }
}
