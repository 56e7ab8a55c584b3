//! The binary through the runner against moto's server, as `.ci/run` does: `check`,
//! `plan`, `apply --yes`, `plan --detailed-exitcode` (no changes), `destroy --yes`, with
//! names of its own and records in a state directory of its own.
//!
//! The server is found through `AWS_ENDPOINT_URL` (`.ci/run` starts one). Without it the
//! test prints a loud skip, and fails when `CI=true`.

mod support;

use support::{Run, binary, run};

/// Tears the fleet down if the test stops half-way, so that a failure leaves nothing
/// behind in the server.
struct Teardown<'a> {
    vars: &'a [(&'a str, &'a str)],
    home: &'a std::path::Path,
    state: &'a str,
    armed: bool,
}

impl Drop for Teardown<'_> {
    fn drop(&mut self) {
        if self.armed {
            let left = run(
                binary(self.home, self.vars),
                &["--state-dir", self.state, "destroy", "--yes"],
            );
            eprintln!("teardown after a failure:\n{left}");
        }
    }
}

#[test]
fn check_plan_apply_plan_destroy_against_moto() {
    let Some(endpoint) = std::env::var("AWS_ENDPOINT_URL")
        .ok()
        .filter(|e| !e.is_empty())
    else {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        eprintln!(
            "!!! SKIPPED: aws-fleet against moto — AWS_ENDPOINT_URL is not set; start moto's \
             server (see .ci/run) and set it to run this test !!!"
        );
        assert!(
            !ci,
            "CI=true and AWS_ENDPOINT_URL is not set: the aws-fleet run against moto did not run"
        );
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let state = state.path().to_str().unwrap();
    // Names of this run's own: moto's server is shared by every test of the workspace,
    // and bucket names are global.
    let suffix = {
        use std::hash::{BuildHasher as _, Hasher as _};
        // Randomly keyed in every process.
        let mut hasher = std::hash::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        format!("t{:010x}", hasher.finish() & 0xff_ffff_ffff)
    };
    // moto takes any keys; these are never a real account's.
    let vars = [
        ("AWS_ENDPOINT_URL", endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_FLEET_SUFFIX", suffix.as_str()),
    ];
    let step = |args: &[&str]| -> Run {
        let mut argv = vec!["--state-dir", state];
        argv.extend_from_slice(args);
        run(binary(home.path(), &vars), &argv)
    };

    let check = step(&["check"]);
    assert_eq!(check.code, 0, "check\n{check}");
    assert!(
        check.out.contains(&format!("aws-fleet-{suffix}")),
        "{check}"
    );

    let mut teardown = Teardown {
        vars: &vars,
        home: home.path(),
        state,
        armed: true,
    };

    let plan = step(&["plan"]);
    assert_eq!(plan.code, 0, "plan\n{plan}");
    assert!(plan.out.contains("5 to create"), "{plan}");

    let apply = step(&["apply", "--yes"]);
    assert_eq!(apply.code, 0, "apply --yes\n{apply}");
    assert!(apply.out.contains("5 created"), "{apply}");

    let again = step(&["plan", "--detailed-exitcode"]);
    assert_eq!(
        again.code, 0,
        "plan --detailed-exitcode after apply\n{again}"
    );
    assert!(again.out.contains("No changes"), "{again}");

    let destroy = step(&["destroy", "--yes"]);
    assert_eq!(destroy.code, 0, "destroy --yes\n{destroy}");
    assert!(destroy.out.contains("5 pruned"), "{destroy}");
    teardown.armed = false;

    // Everything is gone: a plan now has all five to create again.
    let after = step(&["plan", "--detailed-exitcode"]);
    assert_eq!(
        after.code, 2,
        "plan --detailed-exitcode after destroy\n{after}"
    );
    assert!(after.out.contains("5 to create"), "{after}");
}
