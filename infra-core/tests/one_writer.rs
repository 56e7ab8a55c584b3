//! One writer per fleet, and a state directory that holds only what the tool wrote:
//! runs at once on one fleet never lose a resource or a ledger row and never both
//! report success on a stale view; the lock says who holds it; foreign files are never
//! read, rewritten or deleted; a malformed record is refused before the first cloud
//! call.

mod support;

use std::path::Path;
use std::time::Duration;

use infra_core::cli::run_with;
use infra_core::kinds::*;
use infra_core::{
    engine::{FileStore, LockHolder, RecordStore},
    prelude::{AwsRegion, Fleet},
};
use infra_testkit::sim::SimCloud;
use support::console::{Session, answering, json};

fn buckets(names: &[&str]) -> Result<Fleet, infra_core::prelude::CheckReport> {
    let mut f = Fleet::builder("shop");
    for name in names {
        f.declare(AwsRegion::EuWest3, *name, ObjectStore::new());
    }
    f.build()
}

/// A cloud on the real clock whose calls take a while, so that runs started together
/// overlap.
fn slow_cloud(seed: u64) -> SimCloud {
    let cloud = SimCloud::new(seed);
    cloud.set_latency(Duration::from_millis(20));
    cloud
}

/// Runs a command line with `state` as the state directory, from a console of its own.
async fn run_in(
    state: &Path,
    fleet: Result<Fleet, infra_core::prelude::CheckReport>,
    cloud: &SimCloud,
    args: &[&str],
) -> (u8, String, String) {
    let mut s = answering(false, true);
    let mut argv = vec![
        "infra-test".to_owned(),
        "--state-dir".to_owned(),
        state.to_str().unwrap().to_owned(),
    ];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    let backends = cloud.backends();
    let code = run_with(argv, fleet, |_| backends, &mut s.console).await;
    (code, s.out.take(), s.err.take())
}

fn rows(state: &Path) -> Vec<String> {
    FileStore::new(state)
        .load_ledger("shop")
        .unwrap()
        .rows
        .iter()
        .map(|r| r.name.clone())
        .collect()
}

/// How many resources an `apply --json` result lists as not attempted, refused.
fn refused_count(out: &str) -> usize {
    let result = json(out);
    let all = result["notAttempted"].as_array().expect("a result");
    assert!(all.iter().all(|n| n["reason"] == "refused"), "{out}");
    all.len()
}

fn in_cloud(cloud: &SimCloud) -> Vec<String> {
    let mut names: Vec<String> = cloud.resources().into_iter().map(|r| r.name).collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_applies_with_different_targets_at_once_lose_nothing() {
    for round in 0..5 {
        let cloud = slow_cloud(100 + round);
        let state = tempfile::tempdir().unwrap();
        let both = || buckets(&["alpha", "beta"]);
        let args_a = [
            "apply",
            "--yes",
            "--target",
            "alpha",
            "--lock-timeout",
            "60s",
        ];
        let args_b = [
            "apply",
            "--yes",
            "--target",
            "beta",
            "--lock-timeout",
            "60s",
        ];
        let a = run_in(state.path(), both(), &cloud, &args_a);
        let b = run_in(state.path(), both(), &cloud, &args_b);
        let ((code_a, out_a, err_a), (code_b, out_b, err_b)) = tokio::join!(a, b);
        assert_eq!(code_a, 0, "round {round}: {out_a}{err_a}");
        assert_eq!(code_b, 0, "round {round}: {out_b}{err_b}");
        assert_eq!(in_cloud(&cloud), ["alpha", "beta"], "round {round}");
        assert_eq!(rows(state.path()), ["alpha", "beta"], "round {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_waiting_the_second_run_is_refused_and_nothing_is_lost() {
    for round in 0..5 {
        let cloud = slow_cloud(200 + round);
        let state = tempfile::tempdir().unwrap();
        let both = || buckets(&["alpha", "beta"]);
        let a = run_in(
            state.path(),
            both(),
            &cloud,
            &["apply", "--yes", "--target", "alpha", "--json"],
        );
        let b = run_in(
            state.path(),
            both(),
            &cloud,
            &["apply", "--yes", "--target", "beta", "--json"],
        );
        let (a, b) = tokio::join!(a, b);
        let outcomes = [&a, &b];
        let refused: Vec<_> = outcomes.iter().filter(|o| o.0 != 0).collect();
        assert!(refused.len() <= 1, "round {round}: both refused");
        for (_, out, err) in &refused {
            assert!(err.contains("is locked by `apply`"), "{err}");
            assert_eq!(refused_count(out), 2, "{out}");
        }
        // Whatever ran is in the cloud and in the ledger, and nothing else is.
        assert_eq!(in_cloud(&cloud), rows(state.path()), "round {round}");
        assert_eq!(in_cloud(&cloud).len(), 2 - refused.len(), "round {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn apply_and_destroy_at_once_never_both_report_success_on_a_stale_view() {
    for round in 0..5 {
        let cloud = slow_cloud(300 + round);
        let state = tempfile::tempdir().unwrap();
        let (code, out, _) = run_in(
            state.path(),
            buckets(&["alpha", "beta"]),
            &cloud,
            &["apply", "--yes"],
        )
        .await;
        assert_eq!(code, 0, "{out}");
        let apply = run_in(
            state.path(),
            buckets(&["alpha", "beta", "gamma"]),
            &cloud,
            &["apply", "--yes"],
        );
        let destroy = run_in(
            state.path(),
            buckets(&["alpha", "beta", "gamma"]),
            &cloud,
            &["destroy", "--yes"],
        );
        let ((code_a, out_a, err_a), (code_d, out_d, err_d)) = tokio::join!(apply, destroy);
        assert!(
            code_a != 0 || code_d != 0,
            "round {round}: both succeeded:\n{out_a}\n{out_d}"
        );
        let refused = if code_a != 0 { &err_a } else { &err_d };
        assert!(refused.contains("is locked by"), "{refused}");
        // The world and the records agree with the run that went through.
        assert_eq!(in_cloud(&cloud), rows(state.path()), "round {round}");
        let expected: &[&str] = if code_a == 0 {
            &["alpha", "beta", "gamma"]
        } else {
            &[]
        };
        assert_eq!(in_cloud(&cloud), expected, "round {round}");
    }
}

/// A lock held by a run on another host, with a fixed description.
fn held_elsewhere(state: &Path) -> infra_core::engine::LockGuard {
    let holder = LockHolder {
        id: "0f1e2d3c4b5a6978".into(),
        host: "build-host-7".into(),
        pid: 4242,
        verb: "apply".into(),
        since: 1_796_146_673,
    };
    FileStore::new(state).try_lock("shop", &holder).unwrap()
}

#[tokio::test]
async fn a_locked_fleet_names_its_holder_and_force_unlock_frees_it() {
    let cloud = support::cloud(41);
    let mut s = answering(false, true);
    let _held = held_elsewhere(s.state.path());

    let (code, out, err) = s
        .run(buckets(&["alpha"]), &cloud, &["apply", "--yes", "--json"])
        .await;
    assert_eq!(code, 1);
    insta::assert_snapshot!("locked", err);
    assert_eq!(refused_count(&out), 1, "{out}");
    assert!(cloud.calls().is_empty(), "a refused run calls no cloud");

    for verb in [&["refresh"][..], &["discover"], &["destroy", "--yes"]] {
        let (code, _, err) = s.run(buckets(&["alpha"]), &cloud, verb).await;
        assert_eq!(code, 1, "{verb:?}");
        assert!(err.contains("is locked by `apply`"), "{verb:?}: {err}");
    }
    // Reading does not need the lock.
    let (code, out, _) = s.run(buckets(&["alpha"]), &cloud, &["plan"]).await;
    assert_eq!(code, 0, "{out}");

    let (code, _, err) = s
        .run(
            buckets(&["alpha"]),
            &cloud,
            &["force-unlock", "ffffffffffffffff"],
        )
        .await;
    assert_eq!(code, 1);
    assert!(err.contains("no lock with id ffffffffffffffff"), "{err}");
    assert!(
        err.contains("0f1e2d3c4b5a6978"),
        "it names the lock it has: {err}"
    );

    let (code, out, _) = s
        .run(
            buckets(&["alpha"]),
            &cloud,
            &["force-unlock", "0f1e2d3c4b5a6978"],
        )
        .await;
    assert_eq!(code, 0);
    assert!(
        out.contains(
            "removed the lock of fleet `shop` held by `apply` (process 4242 on build-host-7"
        ),
        "{out}"
    );
    let (code, out, _) = s
        .run(buckets(&["alpha"]), &cloud, &["apply", "--yes"])
        .await;
    assert_eq!(code, 0, "{out}");
    assert_eq!(in_cloud(&cloud), ["alpha"]);
}

#[tokio::test]
async fn a_lock_left_by_a_run_that_died_is_reported_and_taken_over() {
    let cloud = support::cloud(42);
    let mut s = answering(false, true);
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let dead = LockHolder {
        pid,
        ..LockHolder::this_process("destroy")
    };
    let dir = s.state.path().join("shop");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("lock.json"), serde_json::to_string(&dead).unwrap()).unwrap();

    let (code, out, err) = s
        .run(buckets(&["alpha"]), &cloud, &["apply", "--yes"])
        .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains(&format!(
            "note: the lock of a run that ended without releasing it was taken over: `destroy` (process {pid}"
        )),
        "{err}"
    );
    assert!(!dir.join("lock.json").exists(), "released at the end");
}

/// Files a person keeps in the state directory.
fn plant_foreign_files(state: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let files = [
        ("shop/aws.bak/objectStore.json", "{ a backup, not JSON"),
        ("shop/notes/todo.json", "[\"rename the buckets\"]"),
        ("shop/cache/aws/objectStore.json.orig", "old"),
        ("shop/.tmp-notes", "mine"),
        ("shop/README", "what this directory is"),
        ("other-team.json", "{}"),
    ];
    files
        .iter()
        .map(|(name, text)| {
            let path = state.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text).unwrap();
            (path, text.as_bytes().to_vec())
        })
        .collect()
}

#[tokio::test]
async fn files_the_tool_did_not_write_are_never_read_rewritten_or_deleted() {
    let cloud = support::cloud(43);
    let mut s = answering(false, true);
    let planted = plant_foreign_files(s.state.path());
    for args in [
        &["apply", "--yes"][..],
        &["refresh"],
        &["plan", "--detailed-exitcode"],
        &["discover"],
        &["destroy", "--yes"],
    ] {
        let (code, out, err) = s.run(buckets(&["alpha", "beta"]), &cloud, args).await;
        assert_eq!(code, 0, "{args:?}: {out}{err}");
    }
    assert!(cloud.is_empty());
    for (path, bytes) in planted {
        assert_eq!(
            std::fs::read(&path).unwrap(),
            bytes,
            "{} changed",
            path.display()
        );
    }
}

#[tokio::test]
async fn a_malformed_cache_is_refused_before_the_first_cloud_call() {
    let cloud = support::cloud(44);
    let mut s = answering(false, true);
    let (code, _, _) = s
        .run(buckets(&["alpha", "beta"]), &cloud, &["apply", "--yes"])
        .await;
    assert_eq!(code, 0);
    let cache = s.state.path().join("shop/cache/aws/objectStore.json");
    let broken = "{\n  \"cache\": 2,\n  \"provider\": \"aws\",\n  oops\n}\n";
    std::fs::write(&cache, broken).unwrap();
    cloud.clear_calls();

    // A run that would delete `beta`: refused before it looks at any cloud.
    let (code, _, err) = s
        .run(buckets(&["alpha"]), &cloud, &["apply", "--yes"])
        .await;
    assert_eq!(code, 1);
    assert!(err.contains("objectStore.json:4:3"), "{err}");
    assert!(cloud.calls().is_empty(), "{:?}", cloud.calls());
    assert_eq!(in_cloud(&cloud), ["alpha", "beta"]);
    assert_eq!(std::fs::read_to_string(&cache).unwrap(), broken);
    for verb in [
        &["plan"][..],
        &["refresh"],
        &["discover"],
        &["destroy", "--yes"],
    ] {
        let (code, _, err) = s.run(buckets(&["alpha"]), &cloud, verb).await;
        assert_eq!(code, 1, "{verb:?}");
        assert!(err.contains("objectStore.json:4:3"), "{verb:?}: {err}");
    }
    assert!(cloud.writes().is_empty());
}

#[tokio::test]
async fn another_fleets_ledger_and_a_dangling_link_are_refused_not_read_as_empty() {
    let cloud = support::cloud(45);
    let mut s = answering(false, true);
    let dir = s.state.path().join("shop");
    std::fs::create_dir_all(&dir).unwrap();
    let theirs = "{\"ledger\": 2, \"fleet\": \"billing\", \"rows\": []}\n";
    std::fs::write(dir.join("ledger.json"), theirs).unwrap();
    let (code, _, err) = s
        .run(buckets(&["alpha"]), &cloud, &["apply", "--yes"])
        .await;
    assert_eq!(code, 1);
    assert!(
        err.contains("this ledger is fleet `billing`'s, not `shop`'s"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("ledger.json")).unwrap(),
        theirs
    );

    std::fs::remove_file(dir.join("ledger.json")).unwrap();
    std::os::unix::fs::symlink(dir.join("on-the-old-disk.json"), dir.join("ledger.json")).unwrap();
    let (code, out, err) = s.run(buckets(&["alpha"]), &cloud, &["plan"]).await;
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("ledger.json: a symbolic link to"), "{err}");
    assert!(
        err.contains("on-the-old-disk.json, which does not exist"),
        "{err}"
    );
    assert!(cloud.writes().is_empty());
}

#[tokio::test]
async fn temporary_files_left_by_a_killed_run_are_removed_at_the_next_start() {
    let cloud = support::cloud(46);
    let mut s = answering(false, true);
    let dir = s.state.path().join("shop");
    std::fs::create_dir_all(dir.join("cache/aws")).unwrap();
    let leftovers = [
        dir.join(".infra-tmp-99999-0"),
        dir.join(".tmp-99999-3"),
        dir.join("cache/aws/.infra-tmp-99999-1"),
    ];
    for l in &leftovers {
        std::fs::write(l, "half a ledger").unwrap();
    }
    std::fs::write(dir.join(".tmp-notes"), "mine").unwrap();
    let (code, _, _) = s
        .run(buckets(&["alpha"]), &cloud, &["apply", "--yes"])
        .await;
    assert_eq!(code, 0);
    for l in &leftovers {
        assert!(!l.exists(), "{} was left", l.display());
    }
    assert!(dir.join(".tmp-notes").exists(), "not ours: kept");
}

#[tokio::test]
async fn a_typo_in_the_lock_timeout_is_a_usage_error() {
    let cloud = support::cloud(47);
    let mut s: Session = answering(false, true);
    let (code, _, err) = s
        .run(
            buckets(&["alpha"]),
            &cloud,
            &["apply", "--lock-timeout", "5 minutes"],
        )
        .await;
    assert_eq!(code, 1);
    assert!(err.contains("--lock-timeout"), "{err}");
    assert!(cloud.calls().is_empty());
}

#[tokio::test]
async fn records_move_between_stores_without_loss_and_the_copy_is_used() {
    let cloud = support::cloud(48);
    let mut s = answering(false, true);
    let (code, _, _) = s
        .run(buckets(&["alpha", "beta"]), &cloud, &["apply", "--yes"])
        .await;
    assert_eq!(code, 0);
    let elsewhere = tempfile::tempdir().unwrap();
    let to = format!("file:{}", elsewhere.path().display());
    let (code, out, err) = s
        .run(
            buckets(&["alpha", "beta"]),
            &cloud,
            &["records", "migrate", "--to", &to],
        )
        .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("(2 ledger rows, 1 cache record)"), "{out}");
    assert_eq!(rows(elsewhere.path()), ["alpha", "beta"]);
    assert_eq!(
        rows(s.state.path()),
        ["alpha", "beta"],
        "the source is kept"
    );

    // The copy is what a run on the other store sees: nothing to do.
    let (code, out, _) = s
        .run(
            buckets(&["alpha", "beta"]),
            &cloud,
            &["--records", &to, "plan", "--detailed-exitcode"],
        )
        .await;
    assert_eq!(code, 0, "{out}");
    // And back, into a fresh directory.
    let back = tempfile::tempdir().unwrap();
    let back_to = format!("file:{}", back.path().display());
    let (code, _, _) = s
        .run(
            buckets(&["alpha", "beta"]),
            &cloud,
            &["--records", &to, "records", "migrate", "--to", &back_to],
        )
        .await;
    assert_eq!(code, 0);
    assert_eq!(rows(back.path()), ["alpha", "beta"]);

    // A destination holding other records is refused and left as it was.
    let (code, _, _) = s
        .run(
            buckets(&["alpha"]),
            &cloud,
            &["--records", &to, "apply", "--yes"],
        )
        .await;
    assert_eq!(code, 0);
    let (code, _, err) = s
        .run(
            buckets(&["alpha"]),
            &cloud,
            &["records", "migrate", "--to", &to],
        )
        .await;
    assert_eq!(code, 1);
    assert!(
        err.contains("already holds different records for this fleet"),
        "{err}"
    );
    assert_eq!(rows(elsewhere.path()), ["alpha"]);
}

#[tokio::test]
async fn a_record_store_that_cannot_be_opened_is_an_error_without_its_password() {
    let cloud = support::cloud(49);
    let mut s = answering(false, true);
    let (code, out, err) = s
        .run(
            buckets(&["alpha"]),
            &cloud,
            &["--records", "mysql://infra:hunter2@db/infra", "plan"],
        )
        .await;
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("is not a record store"), "{err}");
    assert!(
        !err.contains("hunter2") && !out.contains("hunter2"),
        "{err}"
    );
    assert!(cloud.calls().is_empty());
}
