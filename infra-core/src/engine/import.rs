//! What the next plan of a declared resource would show once a resource made elsewhere
//! is taken in as it (`import ADDRESS CLOUD_ID`).
//!
//! The resource is observed as every plan observes it, with what it depends on (so
//! that references settle), and then seen as the run will see it once it carries this
//! fleet's marker and has its row: the resource read by its id, this fleet's. The
//! decision and the report are the plan's own, so the divergence shown is the one the
//! next plan shows.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::model::{Owner, Seen, Target, World, key_id};
use super::{ApplyError, Engine, Options, PlanReport, PlannedChange};
use crate::backend::Sighting;
use crate::{Plan, Subject};

/// What taking a resource in as a declared one would make the next plan say.
#[derive(Clone, Debug)]
pub(crate) struct ImportPreview {
    /// The plan of the resource and of what it depends on.
    pub(crate) report: PlanReport,
    /// The resource's own line: unchanged, update or replace, with the fields that
    /// differ.
    pub(crate) change: PlannedChange,
    /// The declaration settled as far as it can be now (references as handles).
    pub(crate) settled: Map<String, Value>,
    /// The handle of each declared resource the observation found, the one taken in
    /// included.
    pub(crate) handles: BTreeMap<String, Subject>,
}

impl Engine {
    /// Plans the declared resource `subject` as if `sighting` (a read of the resource to
    /// take in) were this fleet's and recorded. Makes no backend write and changes no
    /// record. `None` when `plan` declares no such resource.
    pub(crate) async fn preview_import(
        &self,
        plan: &Plan,
        subject: &Subject,
        sighting: Sighting,
    ) -> Result<Option<ImportPreview>, ApplyError> {
        let options = Options::default().targets([subject.to_string()]);
        let mut observation = self.gather(plan, &options).await?;
        let Some(slot) = observation
            .slots
            .iter_mut()
            .find(|s| s.index.is_some() && s.subject == *subject)
        else {
            return Ok(None);
        };
        slot.seen = Seen::Present {
            sighting: sighting.without_marker(),
            owner: Owner::Ours,
        };
        slot.recorded = true;
        self.decide(plan, &mut observation);
        let world = World::of_observation(plan, &observation);
        let settled = observation
            .slots
            .iter()
            .find(|s| s.index.is_some() && s.subject == *subject)
            .and_then(|s| match &s.target {
                Target::Present(spec) => Some(spec.0.lenient_json(&world)),
                _ => None,
            })
            .unwrap_or_default();
        let fleet = plan.fleet();
        let mut handles = BTreeMap::new();
        for (index, r) in fleet.resources().enumerate() {
            if let Some(handle) = world.handles.get(&key_id(plan, index)) {
                let rf = r.reference();
                handles.insert(
                    handle.clone(),
                    super::model::subject(rf.provider, rf.kind, &rf.name, r.region()),
                );
            }
        }
        let report = self.report(plan, &observation);
        let Some(change) = report
            .changes
            .iter()
            .find(|c| c.resource == *subject)
            .cloned()
        else {
            return Ok(None);
        };
        Ok(Some(ImportPreview {
            report,
            change,
            settled,
            handles,
        }))
    }
}
