//! What a person who has not configured Scaleway sees: every verb that reaches the
//! cloud exits 1 and says what is missing, and `check` needs nothing.

use std::process::Command;

fn binary(home: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_scaleway-fleet"));
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("SCW_") || name.starts_with("INFRA_") || name == "XDG_CONFIG_HOME" {
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
fn without_a_key_nothing_is_looked_at_and_the_run_says_why() {
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
    let said = format!("{out}\n{err}");
    assert!(
        said.contains("no Scaleway access key is configured"),
        "{said}"
    );
    assert!(out.contains("Incomplete: 12 of 12 resources"), "{said}");
    assert!(!out.contains("No changes"), "{out}");

    let check = binary(home.path())
        .args(["--state-dir", state, "check"])
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0), "{check:?}");
    assert!(
        !std::path::Path::new(state)
            .join("scw-fleet")
            .join("ledger.json")
            .exists()
    );
}

#[test]
fn a_broken_configuration_file_is_named_with_its_line_and_never_quoted() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("scw.yaml");
    std::fs::write(
        &config,
        "secret_key: do-not-print-me\naccess_key: [unclosed\n",
    )
    .unwrap();
    let state = tempfile::tempdir().unwrap();
    let plan = binary(home.path())
        .env("SCW_CONFIG_PATH", &config)
        .args(["--state-dir", state.path().to_str().unwrap(), "plan"])
        .output()
        .unwrap();
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&plan.stdout),
        String::from_utf8_lossy(&plan.stderr)
    );
    assert_eq!(plan.status.code(), Some(1), "{said}");
    assert!(said.contains("scw.yaml: line "), "{said}");
    assert!(!said.contains("do-not-print-me"), "{said}");
}
