//! What a person who has not configured Google Cloud sees: every verb that reaches the
//! cloud exits 1 and says what is missing, and `check` needs nothing.

use std::process::Command;

fn binary(home: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gcp-fleet"));
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("GOOGLE_")
            || name.starts_with("CLOUDSDK_")
            || name.starts_with("INFRA_")
            || name.ends_with("_EMULATOR_HOST")
            || name.starts_with("GCP_")
        {
            command.env_remove(&*name);
        }
    }
    command
        .env("HOME", home)
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE");
    command
}

#[test]
fn without_a_project_nothing_is_looked_at_and_the_run_says_why() {
    let home = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let state = state.path().to_str().unwrap();
    let plan = binary(home.path())
        .args(["--state-dir", state, "plan"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&plan.stdout);
    let err = String::from_utf8_lossy(&plan.stderr);
    assert_eq!(plan.status.code(), Some(1), "{out}\n{err}");
    assert!(
        err.contains("no Google Cloud project is configured")
            || out.contains("no Google Cloud project is configured"),
        "{out}\n{err}"
    );
    assert!(out.contains("Incomplete: 9 of 9 resources"), "{out}\n{err}");
    assert!(!out.contains("No changes"), "{out}");

    let check = binary(home.path())
        .args(["--state-dir", state, "check"])
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0), "{check:?}");
    // Nothing was written for a run that could not look.
    assert!(
        !std::path::Path::new(state)
            .join("gcp-fleet")
            .join("ledger.json")
            .exists()
    );
}
