//! The runner with an async backend factory (`run_async`, `run_with_async`), the form a
//! real cloud's backend needs: the factory is awaited, its backends are the ones used,
//! and it is never called for a verb that needs no backend.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use infra_core::cli::run_with_async;
use infra_core::kinds::ObjectStore;
use infra_core::prelude::{AwsRegion, Backends, Fleet};
use support::console::answering;

fn fleet() -> Result<Fleet, infra_core::prelude::CheckReport> {
    let mut f = Fleet::builder("async");
    f.declare(AwsRegion::EuWest3, "async-assets", ObjectStore::new());
    f.build()
}

#[tokio::test]
async fn an_async_factory_is_awaited_and_its_backends_are_used() {
    let cloud = support::cloud(11);
    let calls = Arc::new(AtomicUsize::new(0));
    let mut s = answering(false, true);
    let state = s.state.path().to_str().unwrap().to_owned();

    let counted = Arc::clone(&calls);
    let backends = cloud.backends();
    let code = run_with_async(
        ["infra-test", "--state-dir", &state, "apply", "--yes"],
        fleet(),
        async move |fleet: &Fleet| {
            assert_eq!(fleet.name(), "async", "the factory is given the fleet");
            // Suspends, as loading credentials does, before the backends exist.
            tokio::task::yield_now().await;
            let (tx, rx) = tokio::sync::oneshot::channel();
            tokio::spawn(async move { tx.send(backends).ok() });
            let backends = rx.await.expect("the backends arrive");
            counted.fetch_add(1, Ordering::SeqCst);
            backends
        },
        &mut s.console,
    )
    .await;
    let (out, err) = (s.out.take(), s.err.take());
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "awaited exactly once");
    assert!(
        !cloud.writes().is_empty(),
        "the apply went through the factory's backends"
    );
    assert!(out.contains("async-assets"), "{out}");

    // The same backends, through a second run, see what the first one made.
    let counted = Arc::clone(&calls);
    let backends = cloud.backends();
    let code = run_with_async(
        [
            "infra-test",
            "--state-dir",
            &state,
            "plan",
            "--detailed-exitcode",
        ],
        fleet(),
        async move |_fleet: &Fleet| {
            tokio::task::yield_now().await;
            counted.fetch_add(1, Ordering::SeqCst);
            backends
        },
        &mut s.console,
    )
    .await;
    let out = s.out.take();
    assert_eq!(code, 0, "no changes after the apply: {out}");
    assert!(out.contains("No changes"), "{out}");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn check_never_calls_an_async_factory() {
    let called = Arc::new(AtomicUsize::new(0));
    for argv in [
        vec!["infra-test", "check"],
        vec!["infra-test", "--help"],
        vec!["infra-test", "--no-such-flag"],
    ] {
        let mut s = answering(false, false);
        let state = s.state.path().to_str().unwrap().to_owned();
        let mut argv: Vec<&str> = argv;
        argv.splice(1..1, ["--state-dir", &state]);
        let counted = Arc::clone(&called);
        let shown = format!("{argv:?}");
        let expected = if argv.contains(&"--no-such-flag") {
            1
        } else {
            0
        };
        let code = run_with_async(
            argv,
            fleet(),
            async move |_fleet: &Fleet| -> Backends {
                counted.fetch_add(1, Ordering::SeqCst);
                panic!("{shown} must not build backends")
            },
            &mut s.console,
        )
        .await;
        assert_eq!(code, expected, "{}", s.err.take());
    }
    assert_eq!(called.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_refused_fleet_never_calls_an_async_factory() {
    let mut s = answering(false, true);
    let mut f = Fleet::builder("async");
    f.declare(AwsRegion::EuWest3, "x", ObjectStore::new());
    let code = run_with_async(
        ["infra-test", "plan"],
        f.build(),
        async |_fleet: &Fleet| -> Backends { panic!("an unsound fleet must not build backends") },
        &mut s.console,
    )
    .await;
    assert_eq!(code, 1);
    assert!(s.err.take().starts_with("error: "));
}

#[tokio::test]
async fn a_long_unreachable_reason_is_said_once_on_standard_error() {
    let why = "no credentials were found\nlooked for:\n  1. here: not set";
    let blind = || Backends::new().with(Arc::new(infra_core::sdk::Unreachable::new("aws", why)));
    let mut s = answering(false, true);
    let state = s.state.path().to_str().unwrap().to_owned();
    for verb in [&["plan"][..], &["apply", "--yes"]] {
        let mut argv = vec!["infra-test", "--state-dir", &state];
        argv.extend_from_slice(verb);
        let backends = blind();
        let code = run_with_async(argv, fleet(), async |_: &Fleet| backends, &mut s.console).await;
        let (out, err) = (s.out.take(), s.err.take());
        assert_eq!(code, 1, "{verb:?}");
        assert_eq!(
            err.trim_end(),
            format!("error: aws is unreachable: {why}"),
            "{verb:?}"
        );
        assert!(
            out.contains("aws is unreachable: no credentials were found (see standard error)"),
            "{verb:?}: {out}"
        );
        assert!(!out.contains("looked for"), "{verb:?}: {out}");
    }

    // A verb that reads only the records says nothing about the clouds.
    let backends = blind();
    let code = run_with_async(
        ["infra-test", "--state-dir", &state, "state", "list"],
        fleet(),
        async |_: &Fleet| backends,
        &mut s.console,
    )
    .await;
    assert_eq!(code, 0);
    assert!(!s.err.take().contains("unreachable"));

    // A reason of one line is left as it was: the report of each resource holds it.
    let backends = Backends::new().with(Arc::new(infra_core::sdk::Unreachable::new(
        "aws",
        "no AWS credentials were found",
    )));
    let code = run_with_async(
        ["infra-test", "--state-dir", &state, "plan"],
        fleet(),
        async |_: &Fleet| backends,
        &mut s.console,
    )
    .await;
    assert_eq!(code, 1);
    assert_eq!(s.err.take(), "");
    assert!(
        s.out
            .take()
            .contains("aws is unreachable: no AWS credentials were found\n")
    );
}
