//! The command-line runner, driven as a person (or a pipeline) would, against the
//! simulated cloud: what it prints, how it exits, what it asks. Its human output is
//! snapshot-tested.

mod support;

use std::sync::Arc;

use infra_core::cli::{Console, ProgressStyle, run_with};
use infra_core::kinds::{Acu, ObjectStore, Postgres, PostgresServerless, Secrets};
use infra_core::{
    prelude::{AwsRegion, Backends, Fleet},
    sdk::Unreachable,
};
use support::console::{answering, json};

fn fleet() -> Result<Fleet, infra_core::prelude::CheckReport> {
    let mut f = Fleet::builder("cli");
    let here = AwsRegion::EuWest3;
    let pw = f.declare(here, "db-password", Secrets::generated(24));
    f.declare(
        here,
        "db",
        Postgres::serverless(PostgresServerless {
            engine_version: "16",
            min_capacity: Acu::halves(1),
            max_capacity: Acu::whole(2),
            master_username: "app",
            master_password: pw,
        }),
    );
    f.declare(here, "cli-assets", ObjectStore::new());
    f.build()
}

#[tokio::test]
async fn check_needs_no_backend() {
    let mut s = answering(false, false);
    let state = s.state.path().to_str().unwrap().to_owned();
    let code = run_with(
        ["cli-test", "--state-dir", &state, "check"],
        fleet(),
        |_| -> Backends { panic!("check must not build backends") },
        &mut s.console,
    )
    .await;
    assert_eq!(code, 0);
    insta::assert_snapshot!(s.out.take());
}

#[tokio::test]
async fn check_reports_every_problem_and_fails() {
    let mut s = answering(false, false);
    let mut f = Fleet::builder("cli");
    f.declare(AwsRegion::EuWest3, "x", ObjectStore::new());
    let code = run_with(
        ["cli-test", "check"],
        f.build(),
        |_| Backends::new(),
        &mut s.console,
    )
    .await;
    assert_eq!(code, 1);
    insta::assert_snapshot!(s.err.take());
}

#[tokio::test]
async fn plan_apply_and_destroy_read_well_and_exit_as_documented() {
    let cloud = support::cloud(5);
    let mut s = answering(false, true);

    let (code, out, _) = s
        .run(fleet(), &cloud, &["plan", "--detailed-exitcode"])
        .await;
    assert_eq!(code, 2, "changes present");
    insta::assert_snapshot!("plan_before_apply", out);

    // Without a terminal and without --yes, apply refuses and changes nothing, and
    // says so for every resource.
    let (code, out, err) = s.run(fleet(), &cloud, &["apply", "--json"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("run again with --yes"), "{err}");
    assert!(cloud.writes().is_empty());
    let result = json(&out);
    assert_eq!(result["notAttempted"].as_array().unwrap().len(), 3);
    assert_eq!(result["notAttempted"][0]["reason"], "refused");

    let (code, out, _) = s.run(fleet(), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0);
    insta::assert_snapshot!("apply", out);

    let (code, out, _) = s
        .run(fleet(), &cloud, &["plan", "--detailed-exitcode"])
        .await;
    assert_eq!(code, 0, "no changes after an apply: {out}");
    assert!(out.contains("No changes"), "{out}");

    let (code, out, _) = s.run(fleet(), &cloud, &["plan", "--json"]).await;
    assert_eq!(code, 0);
    let plan = json(&out);
    assert_eq!(plan["planReport"], "v3");
    assert_eq!(plan["complete"], true);

    // An apply with nothing to do still prints the whole result.
    let (code, out, _) = s.run(fleet(), &cloud, &["apply", "--yes", "--json"]).await;
    assert_eq!(code, 0);
    let result = json(&out);
    assert_eq!(result["applied"].as_array().unwrap().len(), 3);
    assert_eq!(result["applied"][0]["change"], "unchanged");

    let (code, out, _) = s
        .run(fleet(), &cloud, &["destroy", "--yes", "--json"])
        .await;
    assert_eq!(code, 0);
    let result = json(&out);
    assert_eq!(result["apply"], "v4");
    assert_eq!(result["pruned"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn a_person_who_answers_no_changes_nothing() {
    let cloud = support::cloud(6);
    let mut s = answering(true, false);
    let (code, out, err) = s.run(fleet(), &cloud, &["apply"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("declined"), "{err}");
    assert!(
        out.contains("not attempted: refused (refused: declined at the prompt)"),
        "{out}"
    );
    assert!(cloud.writes().is_empty());
}

#[tokio::test]
async fn an_unreachable_provider_with_records_is_refused_by_name() {
    let cloud = support::cloud(8);
    let mut s = answering(false, true);
    let (code, _, _) = s.run(fleet(), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0);
    let blind = Backends::new().with(Arc::new(Unreachable::new(
        "aws",
        "no AWS credentials were found",
    )));
    let (code, _, err) = s.run_on(fleet(), blind, &["plan"]).await;
    assert_eq!(code, 1);
    insta::assert_snapshot!(err);
}

#[tokio::test]
async fn usage_errors_exit_1_never_2() {
    let cloud = support::cloud(9);
    let mut s = answering(false, true);
    for args in [
        &["plan", "--bogus"][..],
        &["plan", "--target"],
        &["apply", "--parallelism", "0"],
        &["no-such-verb"],
        &["plan", "--detailed-exitcode", "--detailed-exitcode"],
    ] {
        let (code, out, err) = s.run(fleet(), &cloud, args).await;
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(!err.is_empty(), "{args:?}");
    }
    // Help is not an error, and it documents the exit codes.
    let (code, out, _) = s.run(fleet(), &cloud, &["--help"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("Exit codes:"), "{out}");
    assert!(out.contains("2  plan --detailed-exitcode only"), "{out}");
    assert!(cloud.calls().is_empty(), "a usage error reaches no cloud");
}

/// A stream that refuses every write, as a full disk or a closed pipe does.
struct Refusing;

impl std::io::Write for Refusing {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
    }
}

#[tokio::test]
async fn a_failed_write_of_the_output_exits_non_zero() {
    let cloud = support::cloud(10);
    let err = support::console::Buffer::default();
    let mut console = Console {
        out: Box::new(Refusing),
        err: Box::new(err.clone()),
        interactive: false,
        colour: false,
        progress: ProgressStyle::Off,
        confirm: Box::new(|_| true),
    };
    let state = tempfile::tempdir().unwrap();
    let state = state.path().to_str().unwrap().to_owned();
    let backends = cloud.backends();
    // `check` would exit 0, and so would `apply --yes`: both print, and neither can.
    let code = run_with(
        ["t", "--state-dir", &state, "check"],
        fleet(),
        |_| backends,
        &mut console,
    )
    .await;
    assert_eq!(code, 1);
    assert!(err.take().contains("the output could not be written"));
    let backends = cloud.backends();
    let code = run_with(
        ["t", "--state-dir", &state, "apply", "--yes"],
        fleet(),
        |_| backends,
        &mut console,
    )
    .await;
    assert_eq!(code, 1);
    // The apply itself happened: only its report was lost.
    assert_eq!(cloud.len(), 3);
}
