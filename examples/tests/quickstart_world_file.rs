//! The quickstart binary against a simulated world that cannot be kept: the simulated
//! cloud is no kinder than a real one, so a resource whose creation was not saved is
//! never reported created, the run exits 1, and `--json` says what became of each one.

mod support;

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};
use support::quickstart;

use serde_json::Value;

/// A run of the quickstart: its exit code, standard output and standard error.
struct Run {
    code: i32,
    out: String,
    err: String,
}

/// Runs `quickstart --state-dir <state> <args>` with `INFRA_SIM_WORLD=<world>`.
fn run(world: &OsStr, state: &Path, args: &[&str]) -> Run {
    let output = Command::new(quickstart())
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .env("INFRA_SIM_WORLD", world)
        .stdin(Stdio::null())
        .output()
        .expect("the quickstart runs");
    Run {
        code: output.status.code().expect("an exit code, not a signal"),
        out: String::from_utf8(output.stdout).unwrap(),
        err: String::from_utf8(output.stderr).unwrap(),
    }
}

/// Whether a line of the text result says a resource was created.
fn says_created(out: &str) -> bool {
    out.lines().any(|l| l.trim_end().ends_with(" created"))
}

/// `apply --yes`, then `apply --yes --json`, against `world`: both exit 1, neither says
/// anything was created. Returns the text output and the JSON result.
fn apply_twice(world: &OsStr, state: &Path) -> (String, Value) {
    let text = run(world, state, &["apply", "--yes"]);
    assert_eq!(text.code, 1, "{}{}", text.out, text.err);
    assert!(!says_created(&text.out), "{}", text.out);
    assert!(text.out.contains(" 0 created"), "{}", text.out);
    let json = run(world, state, &["apply", "--yes", "--json"]);
    assert_eq!(json.code, 1, "{}{}", json.out, json.err);
    let result: Value = serde_json::from_str(&json.out).expect("a JSON result");
    assert_eq!(result["applied"], Value::Array(Vec::new()), "{result:#}");
    let accounted = result["failed"].as_array().unwrap().len()
        + result["notAttempted"].as_array().unwrap().len();
    assert_eq!(accounted, 9, "every resource is accounted for: {result:#}");
    (text.out, result)
}

/// The entry of `list` (`failed`, `notAttempted`) for the resource named `name`.
fn entry<'a>(result: &'a Value, list: &str, name: &str) -> Option<&'a Value> {
    result[list]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["resource"]["name"] == name)
}

/// The resources a save failure fails: every resource created first is listed as
/// failed, not made (never "may have been sent": the world file never saw it), with the
/// simulated cloud's reason; the rest wait on them.
fn assert_failed_unsaved(result: &Value) {
    let failed = entry(result, "failed", "app-web").expect("app-web failed");
    let error = &failed["error"];
    assert_eq!(error["mayHaveBeenSent"], false, "{failed:#}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("could not save its world"), "{message}");
    assert!(
        entry(result, "notAttempted", "app-web-1").is_some(),
        "the instance waits on its security group: {result:#}"
    );
}

#[test]
fn a_world_in_a_directory_that_does_not_exist_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let world = missing.join("world.json");
    let (out, result) = apply_twice(world.as_os_str(), &dir.path().join("state"));
    assert!(out.contains("could not save its world"), "{out}");
    assert!(out.contains("No such file or directory"), "{out}");
    assert_failed_unsaved(&result);
    assert!(!missing.exists(), "nothing was made for the world");
}

#[test]
fn an_empty_world_path_is_refused_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (out, result) = apply_twice(OsStr::new(""), &dir.path().join("state"));
    assert!(out.contains("the path is empty"), "{out}");
    // The world cannot even be opened, so no call reaches it: every resource is listed
    // as not attempted, with the reason, and none as failed or made.
    assert_eq!(result["failed"], Value::Array(Vec::new()), "{result:#}");
    for entry in result["notAttempted"].as_array().unwrap() {
        let detail = entry["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("the path is empty"), "{entry:#}");
    }
}

/// A directory that exists and can be read but where no file can be created, even by
/// root (tests may run as root, which permission bits do not stop): sysfs refuses every
/// new file with "Permission denied". Not `/dev/full` as the world file: reading it
/// never ends, and as root the write's rename would replace the device node.
#[cfg(target_os = "linux")]
fn unwritable_dir() -> Option<&'static Path> {
    let sys = Path::new("/sys");
    let probe = sys.join(format!("infra-probe-{}", std::process::id()));
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe);
    match created {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            None
        }
        Err(_) => sys.is_dir().then_some(sys),
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_world_whose_writes_fail_creates_nothing() {
    let Some(unwritable) = unwritable_dir() else {
        eprintln!("SKIPPED: /sys takes new files here, so it cannot stand for a failing disk");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let world = unwritable.join(format!("infra-world-{}.json", std::process::id()));
    let (out, result) = apply_twice(world.as_os_str(), &dir.path().join("state"));
    assert!(out.contains("Permission denied"), "{out}");
    assert_failed_unsaved(&result);
    assert!(!world.exists());
}
