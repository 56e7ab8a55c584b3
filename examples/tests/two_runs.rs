//! Two runs of the quickstart binary at once, as two people (or two pipelines) start
//! them: separate processes on one state directory and one simulated world. Nothing is
//! lost, and a run turned away says who holds the fleet.

mod support;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use support::quickstart;

use infra_core::engine::{FileStore, LockHolder, RecordStore};

fn command(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(quickstart());
    command
        .arg("--state-dir")
        .arg(dir.join("state"))
        .args(args)
        .env("INFRA_SIM_WORLD", dir.join("world.json"))
        .env_remove("INFRA_RECORDS_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn finish(child: Child) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().expect("the quickstart runs");
    (
        status.code().expect("an exit code, not a signal"),
        String::from_utf8(stdout).unwrap(),
        String::from_utf8(stderr).unwrap(),
    )
}

fn run(dir: &Path, args: &[&str]) -> (i32, String, String) {
    finish(command(dir, args).spawn().unwrap())
}

fn ledger_names(dir: &Path) -> Vec<String> {
    FileStore::new(dir.join("state"))
        .load_ledger("quickstart")
        .unwrap()
        .rows
        .iter()
        .map(|r| r.name.clone())
        .collect()
}

#[test]
fn two_processes_applying_different_targets_at_once_lose_nothing() {
    for round in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let wait = ["--lock-timeout", "2m"];
        let a = command(
            dir.path(),
            &[
                "apply",
                "--yes",
                "--target",
                "quickstart-artifacts",
                wait[0],
                wait[1],
            ],
        )
        .spawn()
        .unwrap();
        let b = command(
            dir.path(),
            &["apply", "--yes", "--target", "app-jobs", wait[0], wait[1]],
        )
        .spawn()
        .unwrap();
        let (a, b) = (finish(a), finish(b));
        assert_eq!(a.0, 0, "round {round}: {}{}", a.1, a.2);
        assert_eq!(b.0, 0, "round {round}: {}{}", b.1, b.2);
        assert_eq!(
            ledger_names(dir.path()),
            ["app-jobs", "quickstart-artifacts"],
            "round {round}"
        );
        // The world holds both too: a plan of the two sees nothing to do.
        let (code, out, _) = run(
            dir.path(),
            &[
                "plan",
                "--detailed-exitcode",
                "--target",
                "quickstart-artifacts",
                "--target",
                "app-jobs",
            ],
        );
        assert_eq!(code, 0, "round {round}: {out}");
    }
}

#[test]
fn apply_and_destroy_started_together_leave_the_world_and_the_records_agreeing() {
    for round in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let apply = command(dir.path(), &["apply", "--yes"]).spawn().unwrap();
        let destroy = command(dir.path(), &["destroy", "--yes"]).spawn().unwrap();
        let (apply, destroy) = (finish(apply), finish(destroy));
        for (code, _, err) in [&apply, &destroy] {
            assert!(
                *code == 0 || err.contains("is locked by"),
                "round {round}: a failure other than the lock: {err}"
            );
        }
        // Whatever ran, a plan now reads the world and the records as one: a complete
        // plan, whose only changes are creates (when the destroy went last) or none.
        let (code, out, _) = run(dir.path(), &["plan", "--json"]);
        assert_eq!(code, 0, "round {round}: {out}");
        let plan: serde_json::Value = serde_json::from_str(&out).unwrap();
        let actions: Vec<&str> = plan["changes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["action"].as_str().unwrap())
            .collect();
        let rows = ledger_names(dir.path()).len();
        if rows == 0 {
            assert!(actions.iter().all(|a| *a == "create"), "{actions:?}");
        } else {
            assert_eq!(rows, 9, "round {round}");
            assert!(actions.iter().all(|a| *a == "unchanged"), "{actions:?}");
            assert!(plan.get("records").is_none(), "{out}");
        }
    }
}

#[test]
fn a_run_holding_the_fleet_is_named_to_the_run_it_turns_away() {
    let dir = tempfile::tempdir().unwrap();
    let holder = LockHolder {
        id: "5eed5eed5eed5eed".into(),
        host: "ci-runner-3".into(),
        pid: 31337,
        verb: "destroy".into(),
        since: 1_796_146_673,
    };
    let guard = FileStore::new(dir.path().join("state"))
        .try_lock("quickstart", &holder)
        .unwrap();
    let (code, out, err) = run(dir.path(), &["apply", "--yes", "--json"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains(
            "fleet `quickstart` is locked by `destroy` (process 31337 on ci-runner-3, since \
             2026-12-01T17:37:53Z, lock id 5eed5eed5eed5eed)"
        ),
        "{err}"
    );
    let result: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(result["notAttempted"].as_array().unwrap().len(), 9, "{out}");
    assert!(
        !dir.path().join("world.json").exists(),
        "no cloud was touched"
    );

    // Waiting: the lock is released while the second run waits for it.
    let waiting = command(dir.path(), &["apply", "--yes", "--lock-timeout", "2m"])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    drop(guard);
    let (code, out, err) = finish(waiting);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(ledger_names(dir.path()).len(), 9);
}

/// The database the PostgreSQL records are tested in; without one, a loud skip (a
/// failure when `CI=true`: these tests must run in CI).
fn database_url() -> Option<String> {
    match std::env::var("INFRA_TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "INFRA_TEST_DATABASE_URL is not set and CI=true: the two-machine test must run"
            );
            eprintln!(
                "!!! SKIPPED: two runs on PostgreSQL records — set INFRA_TEST_DATABASE_URL !!!"
            );
            None
        }
    }
}

fn on_postgres(dir: &Path, url: &str, args: &[&str]) -> Command {
    let mut c = command(dir, args);
    c.env("INFRA_RECORDS_URL", url);
    c
}

fn run_on_postgres(dir: &Path, url: &str, args: &[&str]) -> (i32, String, String) {
    finish(on_postgres(dir, url, args).spawn().unwrap())
}

/// The ledger's names, as `state list --json` shows them.
fn pg_ledger_names(dir: &Path, url: &str) -> Vec<String> {
    let (code, out, err) = run_on_postgres(dir, url, &["state", "list", "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mut names: Vec<String> = doc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

/// Two machines sharing a fleet's records in PostgreSQL, as two processes: runs at once
/// lose nothing (waiting for each other, or one turned away naming the other), a run
/// killed while holding the fleet does not block the next, and the records move to files
/// and the copy is what a run there sees. One test, since every step uses the one fleet
/// `quickstart`. The quickstart has PostgreSQL records when built by `cargo test
/// --workspace` (or with `--features postgres`).
#[test]
fn two_machines_sharing_postgres_records_lose_nothing() {
    let Some(url) = database_url() else { return };
    let dir = tempfile::tempdir().unwrap();
    // A fresh start: whatever an earlier run left for this fleet goes (the fresh world
    // has none of it, so its rows are dropped).
    let (code, out, err) = run_on_postgres(dir.path(), &url, &["destroy", "--yes"]);
    if err.contains("built without PostgreSQL records") {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the quickstart was built without PostgreSQL records: run `cargo test --workspace`"
        );
        eprintln!("!!! SKIPPED: the quickstart was built without PostgreSQL records !!!");
        return;
    }
    assert_eq!(code, 0, "{out}{err}");

    let wait = ["--lock-timeout", "2m"];
    let a = on_postgres(
        dir.path(),
        &url,
        &[
            "apply",
            "--yes",
            "--target",
            "quickstart-artifacts",
            wait[0],
            wait[1],
        ],
    )
    .spawn()
    .unwrap();
    let b = on_postgres(
        dir.path(),
        &url,
        &["apply", "--yes", "--target", "app-jobs", wait[0], wait[1]],
    )
    .spawn()
    .unwrap();
    let (a, b) = (finish(a), finish(b));
    assert_eq!(a.0, 0, "{}{}", a.1, a.2);
    assert_eq!(b.0, 0, "{}{}", b.1, b.2);
    assert_eq!(
        pg_ledger_names(dir.path(), &url),
        ["app-jobs", "quickstart-artifacts"]
    );

    // Without waiting: whichever is turned away says so (naming the holder, or — in the
    // instant between taking the lock and describing itself — "another run"), and
    // nothing is lost.
    let a = on_postgres(dir.path(), &url, &["apply", "--yes"])
        .spawn()
        .unwrap();
    let b = on_postgres(dir.path(), &url, &["apply", "--yes"])
        .spawn()
        .unwrap();
    for (code, out, err) in [finish(a), finish(b)] {
        assert!(
            code == 0 || err.contains("fleet `quickstart` is locked by"),
            "{out}{err}"
        );
    }
    let (code, out, err) = run_on_postgres(dir.path(), &url, &["apply", "--yes"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(pg_ledger_names(dir.path(), &url).len(), 9);

    // A run killed while it holds the lock: its session ends, and the next run goes on.
    let mut killed = on_postgres(dir.path(), &url, &["destroy", "--yes"])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let _ = killed.kill();
    let _ = killed.wait();
    let (code, out, err) = run_on_postgres(dir.path(), &url, &["apply", "--yes"]);
    assert_eq!(code, 0, "{out}{err}");

    // To files, and the copy is what a run there sees.
    let files = format!("file:{}", dir.path().join("moved").display());
    let (code, out, err) =
        run_on_postgres(dir.path(), &url, &["records", "migrate", "--to", &files]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = run(
        dir.path(),
        &["--records", &files, "plan", "--detailed-exitcode"],
    );
    assert_eq!(code, 0, "{out}");

    let (code, out, err) = run_on_postgres(dir.path(), &url, &["destroy", "--yes"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(pg_ledger_names(dir.path(), &url).is_empty());
}
