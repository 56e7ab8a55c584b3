//! The command-line runner, driven as a person (or a pipeline) would, against the
//! simulated cloud. Its human output is snapshot-tested.

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex};

use infra_core::cli::{Console, run_with};
use infra_core::kinds::{Acu, ObjectStore, Postgres, Secrets};
use infra_core::{AwsRegion, Backends, Fleet, Unreachable};
use infra_testkit::sim::SimCloud;

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    fn take(&self) -> String {
        String::from_utf8(std::mem::take(&mut *self.0.lock().unwrap())).unwrap()
    }
}

struct Session {
    out: Buffer,
    err: Buffer,
    console: Console,
    state: tempfile::TempDir,
}

fn session(interactive: bool, answer: bool) -> Session {
    let (out, err) = (Buffer::default(), Buffer::default());
    let console = Console {
        out: Box::new(out.clone()),
        err: Box::new(err.clone()),
        interactive,
        colour: false,
        progress: infra_core::cli::ProgressStyle::Off,
        confirm: Box::new(move |_| answer),
    };
    Session {
        out,
        err,
        console,
        state: tempfile::tempdir().unwrap(),
    }
}

fn fleet() -> Result<Fleet, infra_core::CheckReport> {
    let mut f = Fleet::builder("cli");
    let here = AwsRegion::EuWest3;
    let pw = f.declare(here, "db-password", Secrets::generated(24));
    f.declare(
        here,
        "db",
        Postgres::serverless("16", Acu::halves(1), Acu::whole(2), "app", pw),
    );
    f.declare(here, "cli-assets", ObjectStore::new());
    f.build()
}

impl Session {
    async fn run(&mut self, cloud: &SimCloud, args: &[&str]) -> (u8, String, String) {
        let state = self.state.path().to_str().unwrap().to_owned();
        let mut argv = vec!["cli-test".to_owned(), "--state-dir".to_owned(), state];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let backends = cloud.backends();
        let code = run_with(argv, fleet(), |_| backends, &mut self.console).await;
        (code, self.out.take(), self.err.take())
    }
}

#[tokio::test]
async fn check_needs_no_backend() {
    let mut s = session(false, false);
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
    let mut s = session(false, false);
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
    let mut s = session(false, true);

    let (code, out, _) = s.run(&cloud, &["plan", "--detailed-exitcode"]).await;
    assert_eq!(code, 2, "changes present");
    insta::assert_snapshot!("plan_before_apply", out);

    // Without a terminal and without --yes, apply refuses and changes nothing.
    let (code, _, err) = s.run(&cloud, &["apply"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("run again with --yes"), "{err}");
    assert!(cloud.writes().is_empty());

    let (code, out, _) = s.run(&cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0);
    insta::assert_snapshot!("apply", out);

    let (code, out, _) = s.run(&cloud, &["plan", "--detailed-exitcode"]).await;
    assert_eq!(code, 0, "no changes after an apply: {out}");
    assert!(out.contains("No changes"), "{out}");

    let (code, out, _) = s.run(&cloud, &["plan", "--json"]).await;
    assert_eq!(code, 0);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["planReport"], "v1");

    let (code, out, _) = s.run(&cloud, &["destroy", "--yes", "--json"]).await;
    assert_eq!(code, 0);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["apply"], "v2");
    assert_eq!(json["pruned"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn a_person_who_answers_no_changes_nothing() {
    let cloud = support::cloud(6);
    let mut s = session(true, false);
    let (code, _, err) = s.run(&cloud, &["apply"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("cancelled"), "{err}");
    assert!(cloud.writes().is_empty());
}

#[tokio::test]
async fn an_unreachable_provider_with_records_is_refused_by_name() {
    let cloud = support::cloud(8);
    let mut s = session(false, true);
    let (code, _, _) = s.run(&cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0);
    let state = s.state.path().to_str().unwrap().to_owned();
    let code = run_with(
        ["cli-test", "--state-dir", &state, "plan"],
        fleet(),
        |_| {
            Backends::new().with(Arc::new(Unreachable::new(
                "aws",
                "no AWS credentials were found",
            )))
        },
        &mut s.console,
    )
    .await;
    assert_eq!(code, 1);
    insta::assert_snapshot!(s.err.take());
}
