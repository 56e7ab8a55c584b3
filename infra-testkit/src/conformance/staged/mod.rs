//! The staged scenario: one fleet taken through five stages against a real backend (or
//! a stand-in), as a fleet's life takes it, then a sweep that nothing is left.
//!
//! 1. **full** — every kind the backend realises, with references between them: all
//!    created;
//! 2. **ramp-up** — fields changed in place and resources added: updates and creates,
//!    nothing deleted;
//! 3. **ramp-down** — the additions removed: deletes only;
//! 4. **trimmed** — only the simplest resources kept: deletes only;
//! 5. **empty** — the trimmed fleet torn down, as `destroy` does: everything left is
//!    deleted (a resource whose ownership cannot be read, such as a Scaleway queue or registry namespace, is
//!    deleted only this way, never as an orphan).
//!
//! After every stage a second plan must have no changes and the records must list
//! exactly the declaration. [`run_stages`] drives any provider's fleet;
//! [`gcp_fleet`] is the Google Cloud one and [`scaleway_fleet`] the Scaleway one (each
//! provider's live harness and its tests against stand-ins use them).

mod gcp;
mod scaleway;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use infra_core::engine::{Change, Clock, Engine, MemoryStore, Options, RecordStore};
use infra_core::prelude::{Backends, Expr, Fleet, Partial};
use infra_core::sdk::Backend;

pub use gcp::gcp_fleet;
pub use scaleway::{EMPTY_ZIP, scaleway_fleet};

/// A stage of the scenario, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// Everything, created.
    Full,
    /// Changed in place, with additions.
    RampUp,
    /// The additions removed.
    RampDown,
    /// The simplest resources only.
    Trimmed,
    /// Nothing.
    Empty,
}

impl Stage {
    /// Every stage, in order.
    pub const ALL: [Stage; 5] = [
        Stage::Full,
        Stage::RampUp,
        Stage::RampDown,
        Stage::Trimmed,
        Stage::Empty,
    ];

    /// The stage's name, as the scenario's description gives it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Full => "full",
            Stage::RampUp => "ramp-up",
            Stage::RampDown => "ramp-down",
            Stage::Trimmed => "trimmed",
            Stage::Empty => "empty",
        }
    }
}

/// What one stage's apply did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StageCounts {
    /// Resources created.
    pub created: usize,
    /// Resources updated in place.
    pub updated: usize,
    /// Resources replaced.
    pub replaced: usize,
    /// Resources deleted.
    pub deleted: usize,
}

/// Applies `fleet(stage)` for every stage through an engine on `backend`, checking
/// after each what the stage must have done, that a second plan is empty and that the
/// records list exactly the declaration. Answers each stage's counts, or the first
/// failure, described.
pub async fn run_stages(
    backend: Arc<dyn Backend>,
    clock: Arc<dyn Clock>,
    fleet: impl Fn(Stage) -> Fleet,
) -> Result<Vec<(Stage, StageCounts)>, String> {
    let store = Arc::new(MemoryStore::new());
    let engine = Engine::new(Backends::new().with(backend), store.clone()).with_clock(clock);
    let mut out = Vec::new();
    let mut previous: Option<Fleet> = None;
    for stage in Stage::ALL {
        let fleet = fleet(stage);
        let name = stage.name();
        // The last stage tears the previous fleet down, as `destroy` does: a resource
        // whose ownership cannot be read (a Scaleway queue) is deleted only as a
        // declared resource the ledger lists, never as an orphan.
        let plan = match (stage, &previous) {
            (Stage::Empty, Some(last)) => last.teardown(),
            _ => fleet.plan(),
        };
        let outcome = engine
            .apply(&plan, &Options::default().force(true))
            .await
            .map_err(|e| format!("stage {name}: the apply could not run: {e}"))?;
        if !outcome.result.is_success() {
            return Err(format!("stage {name}: {:#?}", outcome.result));
        }
        let count = |change: Change| {
            outcome
                .result
                .applied
                .iter()
                .filter(|a| a.change == change)
                .count()
        };
        let counts = StageCounts {
            created: count(Change::Created),
            updated: count(Change::Updated),
            replaced: count(Change::Replaced),
            deleted: outcome.result.pruned.len(),
        };
        let expected = match stage {
            Stage::Full => counts.created == fleet.len() && counts.deleted == 0,
            Stage::RampUp => counts.created >= 1 && counts.updated >= 1 && counts.deleted == 0,
            Stage::RampDown | Stage::Trimmed => {
                counts.deleted >= 1 && counts.created == 0 && counts.replaced == 0
            }
            Stage::Empty => {
                counts.created + counts.updated + counts.replaced == 0 && counts.deleted >= 1
            }
        };
        if !expected {
            return Err(format!(
                "stage {name} did not do what the stage does ({counts:?}): {:#?}",
                outcome.result
            ));
        }
        let again = engine
            .plan(&fleet.plan(), &Options::default())
            .await
            .map_err(|e| format!("stage {name}: the second plan could not run: {e}"))?;
        if again.has_changes() {
            return Err(format!(
                "stage {name}: a second plan is not empty:\n{}",
                again.render()
            ));
        }
        let recorded = store
            .load_ledger(fleet.name())
            .map_err(|e| format!("stage {name}: the records cannot be read: {e}"))?
            .len();
        if recorded != fleet.len() {
            return Err(format!(
                "stage {name}: the records list {recorded} resources, the declaration {}",
                fleet.len()
            ));
        }
        out.push((stage, counts));
        previous = Some(fleet);
    }
    Ok(out)
}

/// Every resource of `kinds`, in `regions`, whose name starts with `prefix`, as
/// `kind region name` lines. A listing that fails is an error, never "nothing left".
pub async fn sweep(
    backend: &dyn Backend,
    kinds: &BTreeSet<&'static str>,
    regions: &[&str],
    prefix: &str,
) -> Result<Vec<String>, String> {
    let mut left = Vec::new();
    for kind in kinds.iter().copied() {
        for region in regions {
            let listed = backend
                .list(kind, region)
                .await
                .map_err(|e| format!("the sweep could not list {kind} in {region}: {e}"))?;
            left.extend(
                listed
                    .into_iter()
                    .filter(|l| l.name.starts_with(prefix))
                    .map(|l| format!("{kind} {region} {}", l.name)),
            );
        }
    }
    Ok(left)
}

/// The whole scenario on `backend` as a live harness runs it: a fresh prefix from
/// `clock`, [`run_stages`] on `fleet(prefix, stage)`, then a [`sweep`] of `kinds` in
/// `regions` — which runs even when a stage failed, so that what was left behind is
/// named. Each stage is announced on standard output. Answers the prefix and the
/// counts, or every failure, described.
pub async fn live(
    backend: Arc<dyn Backend>,
    clock: Arc<dyn Clock>,
    kinds: &BTreeSet<&'static str>,
    regions: &[&str],
    fleet: impl Fn(&str, Stage) -> Fleet,
) -> Result<(String, Vec<(Stage, StageCounts)>), String> {
    let prefix = crate::conformance::fresh_prefix(&*clock);
    println!("kinds: {kinds:?}; prefix: {prefix}");
    let outcome = run_stages(backend.clone(), clock, |stage| {
        println!("stage {}", stage.name());
        fleet(&prefix, stage)
    })
    .await;
    let left = sweep(&*backend, kinds, regions, &prefix).await;
    match (outcome, left) {
        (Ok(counts), Ok(left)) if left.is_empty() => Ok((prefix, counts)),
        (outcome, left) => {
            let mut why = Vec::new();
            if let Err(e) = outcome {
                why.push(format!("the stages failed: {e}"));
            }
            match left {
                Ok(left) if !left.is_empty() => why.push(format!("left behind: {left:#?}")),
                Err(e) => why.push(e),
                Ok(_) => {}
            }
            Err(why.join("\n"))
        }
    }
}

fn known<T: infra_core::prelude::Value>(value: T) -> Partial<Expr<T>> {
    Partial::Known(Expr::lit(value))
}

/// The tags every staged resource carries.
fn staged_tags() -> Partial<Expr<infra_core::kinds::Tags>> {
    known(BTreeMap::from([(
        "scenario".to_owned(),
        "staged".to_owned(),
    )]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimCloud;
    use infra_core::engine::ManualClock;

    #[tokio::test]
    async fn the_gcp_stages_run_on_the_simulated_cloud_and_leave_nothing() {
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::new());
        let cloud = SimCloud::with_clock(3, clock.clone());
        let backend = cloud.backend("gcp");
        let kinds: BTreeSet<&'static str> = backend.capabilities().kinds.into_iter().collect();
        assert_eq!(kinds.len(), 7, "{kinds:?}");
        let counts = run_stages(backend.clone(), clock, |stage| {
            gcp_fleet("st-", &kinds, stage)
        })
        .await
        .unwrap();
        assert_eq!(counts.len(), 5);
        assert_eq!(
            counts[0].1.created,
            gcp_fleet("st-", &kinds, Stage::Full).len()
        );
        let left = sweep(&*backend, &kinds, &["europe-west1"], "st-")
            .await
            .unwrap();
        assert!(left.is_empty(), "{left:?}");
    }

    #[tokio::test]
    async fn the_scaleway_stages_run_on_the_simulated_cloud_and_leave_nothing() {
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::new());
        let cloud = SimCloud::with_clock(5, clock.clone());
        let backend = cloud.backend("scaleway");
        let kinds: BTreeSet<&'static str> = backend.capabilities().kinds.into_iter().collect();
        assert_eq!(kinds.len(), 11, "{kinds:?}");
        let fleet = |stage| scaleway_fleet("st-", &kinds, stage, "/nowhere/api.zip");
        let counts = run_stages(backend.clone(), clock, fleet).await.unwrap();
        assert_eq!(counts.len(), 5);
        assert_eq!(counts[0].1.created, fleet(Stage::Full).len());
        let left = sweep(&*backend, &kinds, &["fr-par"], "st-").await.unwrap();
        assert!(left.is_empty(), "{left:?}");
    }
}
