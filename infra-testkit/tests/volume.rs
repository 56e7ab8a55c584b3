//! The workspace's volume of generated fleet × fault cases, counted and printed.
//!
//! Each case is a generated fleet in a generated scenario (seed, fault schedule, crash
//! point, parallelism) with every fleet property checked (`infra_testkit::check`), then
//! a few generated mutations applied one after another, each checked to converge to
//! exactly what the mutated declaration says. This target has its own `main` so that
//! its count is printed even when the run passes.

use std::process::ExitCode;
use std::sync::Arc;

use infra_core::engine::{ManualClock, Options, Plan};
use infra_testkit::check::{self, Scenario, cases_run, marked, scenario};
use infra_testkit::sim::SimCloud;
use infra_testkit::strategy::{FleetShape, Mutation, fleet_shape, mutation};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// How many cases this target runs unless `INFRA_VOLUME_CASES` says otherwise.
const DEFAULT_CASES: u32 = 10_000;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
}

/// Applies each mutation in turn and checks the world is then exactly what the
/// declaration says: every declared resource once, nothing else of the fleet's except
/// what was released with `forget`, and an empty second plan.
fn mutations_converge(
    shape: &FleetShape,
    mutations: &[Mutation],
    seed: u64,
) -> Result<(), TestCaseError> {
    runtime().block_on(async {
        let cloud = SimCloud::with_clock(seed, Arc::new(ManualClock::new()));
        let store = Arc::new(infra_core::engine::MemoryStore::new());
        let engine = infra_core::engine::Engine::new(cloud.backends(), store.clone())
            .with_clock(cloud.clock());
        let forced = Options::default().force(true);
        let mut shape = shape.clone();
        let mut released: Vec<String> = Vec::new();
        let mut steps = vec![None];
        steps.extend(mutations.iter().map(Some));
        for step in steps {
            if let Some(m) = step {
                shape.mutate(m);
            }
            let fleet = shape
                .build()
                .map_err(|e| TestCaseError::fail(format!("{e}\n{shape:?}")))?;
            let outcome = engine
                .apply(&fleet.plan(), &forced)
                .await
                .map_err(|e| TestCaseError::fail(format!("after {step:?}: {e}")))?;
            prop_assert!(
                outcome.result.is_success(),
                "after {:?}: {:#?}\n{:?}",
                step,
                outcome.result,
                shape
            );
            let again = engine
                .plan(&fleet.plan(), &Options::default())
                .await
                .unwrap();
            prop_assert!(
                !again.has_changes(),
                "after {:?} the second plan is not empty:\n{}",
                step,
                again.render()
            );
            released.extend(shape.forgets.iter().map(|(_, n)| n.clone()));
            let ours = marked(&cloud, &shape.fleet);
            for ((_, _, name), n) in &ours {
                prop_assert_eq!(*n, 1, "{} exists {} times", name, n);
                prop_assert!(
                    shape.resources.iter().any(|r| &r.name == name) || released.contains(name),
                    "{} is neither declared nor released",
                    name
                );
            }
            for r in &shape.resources {
                prop_assert!(
                    ours.keys().any(|(_, _, n)| n == &r.name),
                    "{} was not created",
                    r.name
                );
            }
            let ledger =
                infra_core::engine::RecordStore::load_ledger(&*store, &shape.fleet).unwrap();
            prop_assert_eq!(
                ledger.len(),
                shape.resources.len(),
                "the ledger lists exactly the declaration"
            );
        }
        let fleet = shape.build().unwrap();
        engine.apply(&Plan::absent(&fleet), &forced).await.unwrap();
        Ok(())
    })
}

fn main() -> ExitCode {
    let cases = std::env::var("INFRA_VOLUME_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        fleet_shape(1..10),
        scenario(0.25),
        prop::collection::vec(mutation(), 0..4),
    );
    let result = runner.run(
        &strategy,
        |(shape, scenario, mutations): (FleetShape, Scenario, Vec<Mutation>)| {
            let fleet = shape
                .build()
                .map_err(|e| TestCaseError::fail(format!("{e}")))?;
            check::run_case(&fleet, &scenario, &[])
                .map_err(|failure| TestCaseError::fail(format!("{failure}  fleet:\n{shape:?}")))?;
            mutations_converge(&shape, &mutations, scenario.seed).map_err(|e| {
                TestCaseError::fail(format!(
                    "{e}\n  mutations: {mutations:?}\n  fleet:\n{shape:?}"
                ))
            })
        },
    );
    println!("generated fleet x fault cases: {}", cases_run());
    match result {
        Ok(()) => {
            println!("1 passed, 0 failed");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("{e}");
            println!("0 passed, 1 failed");
            ExitCode::FAILURE
        }
    }
}
