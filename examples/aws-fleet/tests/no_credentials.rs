//! What a person without AWS credentials sees: every verb that reaches AWS exits 1, and
//! standard error says once what was looked for and what to do, never a secret.

mod support;

use support::{binary, run};

#[test]
fn plan_and_apply_without_credentials_say_what_was_looked_for_and_exit_1() {
    let home = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let state = state.path().to_str().unwrap();

    let plan = run(binary(home.path(), &[]), &["--state-dir", state, "plan"]);
    assert_eq!(plan.code, 1, "{plan}");
    insta::assert_snapshot!("no_credentials_stderr", plan.err);
    assert!(
        plan.out
            .contains("aws is unreachable: no AWS credentials were found (see standard error)"),
        "{plan}"
    );
    assert!(plan.out.contains("Incomplete: 5 of 5 resources"), "{plan}");

    let apply = run(
        binary(home.path(), &[]),
        &["--state-dir", state, "apply", "--yes"],
    );
    assert_eq!(apply.code, 1, "{apply}");
    assert_eq!(apply.err, plan.err, "apply says the same, once");
    assert!(apply.out.contains("5 not attempted"), "{apply}");

    // `check` needs no credentials at all.
    let check = run(binary(home.path(), &[]), &["--state-dir", state, "check"]);
    assert_eq!(check.code, 0, "{check}");
    assert_eq!(check.err, "", "{check}");
}

#[test]
fn a_half_given_key_is_named_and_its_value_never_shown() {
    let home = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY";
    let token = "IQoJb3JpZ2luX2VjEXAMPLETOKENvalue0123456789";
    let run = run(
        binary(
            home.path(),
            &[
                ("AWS_SECRET_ACCESS_KEY", secret),
                ("AWS_SESSION_TOKEN", token),
                ("AWS_PROFILE", "sandbox"),
            ],
        ),
        &["--state-dir", state.path().to_str().unwrap(), "plan"],
    );
    assert_eq!(run.code, 1, "{run}");
    assert!(
        run.err
            .contains("AWS_SECRET_ACCESS_KEY is set, AWS_ACCESS_KEY_ID is not"),
        "{run}"
    );
    assert!(
        run.err.contains("the profile `sandbox` (AWS_PROFILE)"),
        "{run}"
    );
    for leaked in [secret, token] {
        assert!(
            !run.err.contains(leaked) && !run.out.contains(leaked),
            "a secret was printed:\n{run}"
        );
    }
}
