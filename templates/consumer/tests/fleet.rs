//! The fleet checked before anything touches an account.

use std::path::Path;
use std::process::Command;

/// Every guarantee of the engine, on the simulated cloud, under random faults and an
/// apply killed at a random call (`INFRA_CHECK_CASES` sets how many cases run).
#[test]
fn the_fleet_holds_every_fleet_property() {
    let fleet = consumer::fleet().expect("the fleet passes its checks");
    infra_testkit::check_fleet(&fleet);
}

/// Runs the binary with its world and records in `dir`; returns its exit code.
fn run(dir: &Path, args: &[&str]) -> i32 {
    let output = Command::new(env!("CARGO_BIN_EXE_consumer"))
        .arg("--state-dir")
        .arg(dir.join("state"))
        .args(args)
        .env("INFRA_SIM_WORLD", dir.join("simulated-cloud.json"))
        .output()
        .expect("the binary runs");
    println!("$ consumer {}", args.join(" "));
    println!("{}", String::from_utf8_lossy(&output.stdout));
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    output.status.code().expect("an exit code, not a signal")
}

/// The binary applies the fleet, then finds nothing left to do, then tears it down.
#[test]
fn the_binary_applies_plans_no_changes_and_destroys() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(run(dir.path(), &["apply", "--yes"]), 0, "apply");
    assert_eq!(
        run(dir.path(), &["plan", "--detailed-exitcode"]),
        0,
        "a plan right after the apply has no changes"
    );
    assert_eq!(run(dir.path(), &["destroy", "--yes"]), 0, "destroy");
    assert_eq!(
        run(dir.path(), &["plan", "--detailed-exitcode"]),
        2,
        "after the teardown the fleet is to be created again"
    );
}
