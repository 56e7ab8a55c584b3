//! A state-machine test of the engine: a reference model beside the real engine on the
//! simulated cloud, random transitions (edits of the declaration, applies under faults
//! and crashes, drift, deletions behind the engine's back), and invariants checked after
//! every step.

use std::collections::BTreeSet;
use std::sync::Arc;

use infra_core::engine::{ManualClock, MemoryStore, Options, RecordStore};
use infra_testkit::check::{CrashStore, marked, total_and_disjoint};
use infra_testkit::sim::{FaultPlan, SimCloud};
use infra_testkit::strategy::{FleetShape, Mutation, fleet_shape, mutation};
use proptest::prelude::*;

/// One step of the machine.
#[derive(Clone, Debug)]
enum Transition {
    /// Edit the declaration.
    Edit(Mutation),
    /// Apply, perhaps under faults, perhaps dying after some calls.
    Apply {
        faults: Option<(u64, u8)>,
        crash_after: Option<u64>,
    },
    /// Someone changes a field of a declared resource by hand.
    Drift { at: u16 },
    /// Someone deletes a declared resource by hand.
    DeleteBehindTheBack { at: u16 },
}

fn transition() -> impl Strategy<Value = Transition> {
    prop_oneof![
        3 => mutation().prop_map(Transition::Edit),
        4 => (prop::option::weighted(0.5, (any::<u64>(), 1u8..30)), prop::option::weighted(0.3, 1u64..80))
            .prop_map(|(faults, crash_after)| Transition::Apply { faults, crash_after }),
        1 => any::<u16>().prop_map(|at| Transition::Drift { at }),
        1 => any::<u16>().prop_map(|at| Transition::DeleteBehindTheBack { at }),
    ]
}

/// What the world must look like after a clean apply.
struct Model {
    shape: FleetShape,
    released: BTreeSet<String>,
}

impl Model {
    fn declared(&self) -> BTreeSet<String> {
        self.shape
            .resources
            .iter()
            .map(|r| r.name.clone())
            .collect()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn the_engine_follows_its_model(
        shape in fleet_shape(1..8),
        transitions in prop::collection::vec(transition(), 1..10),
        seed in any::<u64>(),
    ) {
        runtime().block_on(async {
            let cloud = SimCloud::with_clock(seed, Arc::new(ManualClock::new()));
            let store = Arc::new(CrashStore::new(&cloud));
            let mut model = Model { shape, released: BTreeSet::new() };
            let foreign = cloud
                .insert_foreign("aws", "queues", "eu-west-3", "not-ours", Default::default())
                .unwrap();
            let forced = Options::default().force(true);
            let fleet_name = model.shape.fleet.clone();

            for (step, t) in transitions.iter().chain([&Transition::Apply { faults: None, crash_after: None }]).enumerate() {
                let engine = infra_core::engine::Engine::new(cloud.backends(), store.clone()).with_clock(cloud.clock());
                match t {
                    Transition::Edit(m) => {
                        model.shape.mutate(m);
                        model.released.extend(model.shape.forgets.iter().map(|(_, n)| n.clone()));
                    }
                    Transition::Drift { at } | Transition::DeleteBehindTheBack { at } => {
                        let ours: Vec<_> = cloud.resources().into_iter()
                            .filter(|r| model.declared().contains(&r.name))
                            .collect();
                        if !ours.is_empty() {
                            let r = &ours[usize::from(*at) % ours.len()];
                            if matches!(t, Transition::Drift { .. }) {
                                cloud.set_field(&r.handle, "description", serde_json::json!("changed by hand"));
                            } else {
                                cloud.remove(&r.handle);
                            }
                        }
                    }
                    Transition::Apply { faults, crash_after } => {
                        let fleet = model.shape.build().unwrap();
                        if let Some((fseed, rate)) = faults {
                            cloud.install(&FaultPlan::random(*fseed, 300, f64::from(*rate) / 100.0));
                        }
                        if let Some(n) = crash_after {
                            cloud.crash_after(*n);
                        }
                        let clean = faults.is_none() && crash_after.is_none();
                        let handed = infra_testkit::check::handed_in(
                            &fleet,
                            &store.load_ledger(&fleet_name).unwrap(),
                        );
                        let result = engine.apply(&fleet.plan(), &forced).await;
                        let crashed = cloud.is_crashed();
                        cloud.clear_faults();
                        cloud.revive();
                        match result {
                            Ok(outcome) => {
                                if !crashed {
                                    total_and_disjoint(&outcome.result, &handed)
                                        .map_err(|e| TestCaseError::fail(format!("step {step}: {e}")))?;
                                }
                                if clean {
                                    prop_assert!(outcome.result.is_success(), "step {}: {:#?}", step, outcome.result);
                                    // The world is the model: every declared resource once,
                                    // nothing else of ours but what was released.
                                    let ours = marked(&cloud, &fleet_name);
                                    let names: BTreeSet<String> = ours.keys().map(|(_, _, n)| n.clone()).collect();
                                    for name in model.declared() {
                                        prop_assert!(names.contains(&name), "step {}: {} is missing", step, name);
                                    }
                                    for name in &names {
                                        prop_assert!(model.declared().contains(name) || model.released.contains(name),
                                            "step {}: {} is not in the model", step, name);
                                    }
                                    let ledger = store.load_ledger(&fleet_name).unwrap();
                                    let rows: BTreeSet<String> = ledger.rows.iter().map(|r| r.name.clone()).collect();
                                    prop_assert_eq!(rows, model.declared(), "step {}: the ledger is the declaration", step);
                                    let again = engine.plan(&fleet.plan(), &Options::default()).await.unwrap();
                                    prop_assert!(!again.has_changes(), "step {}: {}", step, again.render());
                                }
                            }
                            Err(e) => prop_assert!(!clean, "step {}: a clean apply failed: {}", step, e),
                        }
                    }
                }
                // After every step, whatever happened: no twin, and the foreign resource stands.
                for (key, n) in marked(&cloud, &fleet_name) {
                    prop_assert_eq!(n, 1, "step {}: {:?} has a twin", step, key);
                }
                prop_assert!(cloud.resource(&foreign).is_some(), "step {}: a foreign resource was deleted", step);
            }
            let _ = MemoryStore::new();
            Ok(())
        })?;
    }
}
