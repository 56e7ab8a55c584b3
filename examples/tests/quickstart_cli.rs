//! The quickstart binary run as a newcomer runs it: a separate process, its streams
//! piped, its world and records in fresh directories. What is checked is what a person
//! sees: the exit code, the text, and what is left on disk.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use support::quickstart;

/// A fresh world file and state directory.
struct Place {
    dir: tempfile::TempDir,
}

impl Place {
    fn new() -> Self {
        Place {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn world(&self) -> PathBuf {
        self.dir.path().join("world.json")
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(quickstart());
        command
            .arg("--state-dir")
            .arg(self.dir.path().join("state"))
            .args(args)
            .env("INFRA_SIM_WORLD", self.world())
            .env_remove("NO_COLOR")
            .stdin(Stdio::null());
        command
    }

    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let Output {
            status,
            stdout,
            stderr,
        } = self.command(args).output().expect("the quickstart runs");
        (
            status.code().expect("an exit code, not a signal"),
            String::from_utf8(stdout).unwrap(),
            String::from_utf8(stderr).unwrap(),
        )
    }
}

#[test]
fn a_corrupt_world_and_a_fresh_state_directory_never_read_as_no_changes() {
    let place = Place::new();
    std::fs::write(place.world(), "{ this is not a world").unwrap();
    let (code, out, _) = place.run(&["plan", "--detailed-exitcode"]);
    assert_eq!(code, 1, "{out}");
    assert!(!out.contains("No changes"), "{out}");
    assert!(
        out.contains("world.json:1:3: not a simulated world"),
        "{out}"
    );
    assert!(out.contains("Incomplete: 9 of 9 resources"), "{out}");
    let (code, out, _) = place.run(&["plan", "--json"]);
    assert_eq!(code, 1);
    let plan: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(plan["complete"], false);
    // And the world file is left as it was.
    assert_eq!(
        std::fs::read_to_string(place.world()).unwrap(),
        "{ this is not a world"
    );
}

#[test]
fn a_typo_in_a_target_is_an_error_naming_the_nearest_resources() {
    let place = Place::new();
    let (code, out, err) = place.run(&["plan", "--target", "no-such-name"]);
    assert_eq!(code, 1);
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("--target \"no-such-name\" names no resource"),
        "{err}"
    );
    let (code, _, err) = place.run(&["plan", "--target", "app-bd"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("did you mean 'aws/postgres/app-db (eu-west-3)'"),
        "{err}"
    );
}

#[test]
fn a_plan_file_applies_exactly_and_a_stale_one_is_refused() {
    let place = Place::new();
    let file = place.file("p.json");
    let file = file.to_str().unwrap();
    let (code, planned, _) = place.run(&["plan", "--out", file]);
    assert_eq!(code, 0, "{planned}");
    let (code, out, _) = place.run(&["apply", file]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("9 created"), "{out}");
    let (code, _, _) = place.run(&["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0);
    let world = std::fs::read_to_string(place.world()).unwrap();
    let (code, out, err) = place.run(&["apply", file]);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("the plan is stale"), "{err}");
    assert_eq!(
        std::fs::read_to_string(place.world()).unwrap(),
        world,
        "a stale plan changed the world"
    );
    let (code, _, _) = place.run(&["destroy", "--yes"]);
    assert_eq!(code, 0);
}

#[test]
fn output_that_cannot_be_written_exits_non_zero() {
    let full = Path::new("/dev/full");
    if !full.exists() {
        eprintln!("SKIPPED: this system has no /dev/full to write to");
        return;
    }
    let place = Place::new();
    let status = place
        .command(&["check"])
        .stdout(std::fs::File::create(full).unwrap())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1));
}

#[test]
fn piped_output_holds_no_colour_and_no_cursor_control() {
    let place = Place::new();
    let (code, out, err) = place.run(&["apply", "--yes"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out2, err2) = place.run(&["destroy", "--yes"]);
    assert_eq!(code, 0);
    for text in [out, err, out2, err2] {
        assert!(!text.contains('\u{1b}'), "an escape sequence in: {text:?}");
        assert!(!text.contains('\r'), "a carriage return in: {text:?}");
    }
}

#[test]
fn usage_errors_exit_1_and_help_exits_0() {
    let place = Place::new();
    let (code, _, err) = place.run(&["plan", "--bogus"]);
    assert_eq!(code, 1, "{err}");
    let (code, out, _) = place.run(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("Exit codes:"), "{out}");
}

#[test]
fn credentials_in_the_environment_never_send_the_quickstart_to_a_real_cloud() {
    let place = Place::new();
    let with_credentials = |args: &[&str], clouds: Option<&str>| {
        let mut command = place.command(args);
        command
            .env("AWS_ACCESS_KEY_ID", "AKIAQUICKSTARTTEST00")
            .env("AWS_SECRET_ACCESS_KEY", "quickstart-test-secret")
            .env("SCW_ACCESS_KEY", "SCWQUICKSTARTTEST000")
            .env("SCW_SECRET_KEY", "11111111-1111-4111-8111-111111111111")
            .env(
                "SCW_DEFAULT_PROJECT_ID",
                "22222222-2222-4222-8222-222222222222",
            );
        match clouds {
            Some(value) => command.env("INFRA_QUICKSTART_CLOUDS", value),
            None => command.env_remove("INFRA_QUICKSTART_CLOUDS"),
        };
        let out = command.output().expect("the quickstart runs");
        (
            out.status.code().expect("an exit code"),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    // Credentials alone: the simulated cloud, which now holds the fleet.
    let (code, err) = with_credentials(&["apply", "--yes"], None);
    assert_eq!(code, 0, "{err}");
    let world = std::fs::read_to_string(place.world()).expect("the simulated world is written");
    assert!(world.contains("app-db"), "{world}");
    // A value that is neither choice is refused before anything runs.
    let (code, err) = with_credentials(&["plan"], Some("prod"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("INFRA_QUICKSTART_CLOUDS is \"prod\""), "{err}");
    if cfg!(feature = "real-clouds") {
        // This build has the real backends: asking for them would reach for real clouds.
        return;
    }
    // The opt-in, in a build without the real backends: refused, saying how to build.
    let before = std::fs::read_to_string(place.world()).unwrap();
    let (code, err) = with_credentials(&["plan"], Some("real"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--features real-clouds"), "{err}");
    assert_eq!(std::fs::read_to_string(place.world()).unwrap(), before);
}

#[test]
fn replace_previews_and_replaces_a_resource_with_what_cannot_outlive_it() {
    let place = Place::new();
    let (code, out, err) = place.run(&["apply", "--yes"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = place.run(&["plan", "--replace", "app-web", "--json"]);
    assert_eq!(code, 0, "{out}");
    let plan: serde_json::Value = serde_json::from_str(&out).unwrap();
    let replaced: Vec<&str> = plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["action"] == "replace")
        .map(|c| c["resource"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(replaced, ["app-web", "app-web-1"], "{out}");
    let (code, _, err) = place.run(&["plan", "--replace", "app-wbe"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("--replace \"app-wbe\" names no resource") && err.contains("did you mean"),
        "{err}"
    );
    assert!(
        err.contains("'aws/securityGroup/app-web (eu-west-3)'"),
        "{err}"
    );
    let world = std::fs::read_to_string(place.world()).unwrap();
    let (code, out, err) = place.run(&["apply", "--yes", "--replace", "app-web"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2 replaced"), "{out}");
    assert_ne!(std::fs::read_to_string(place.world()).unwrap(), world);
    let (code, _, _) = place.run(&["plan", "--detailed-exitcode"]);
    assert_eq!(code, 0);
}

#[test]
fn outputs_are_printed_from_the_records_and_a_secret_only_when_named() {
    let place = Place::new();
    let (code, out, err) = place.run(&["apply", "--yes"]);
    assert_eq!(code, 0, "{out}{err}");
    let world = std::fs::read_to_string(place.world()).unwrap();
    let (code, out, err) = place.run(&["output"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("db-endpoint = \"app-db."), "{out}");
    assert_eq!(
        lines[1],
        "db-url = (sensitive: `output --show-secret db-url` shows it)"
    );
    let (code, url, err) = place.run(&["output", "db-url", "--show-secret", "db-url"]);
    assert_eq!(code, 0, "{err}");
    assert!(url.starts_with("postgres://app:"), "{url}");
    let endpoint = lines[0]
        .trim_start_matches("db-endpoint = \"")
        .trim_end_matches('"');
    assert!(
        url.trim_end().ends_with(&format!("@{endpoint}/app")),
        "{url}"
    );
    // Reading outputs changed nothing in the world.
    assert_eq!(std::fs::read_to_string(place.world()).unwrap(), world);
}

/// A `watch` running in the background, killed should the test end before stopping it.
struct Watching {
    child: std::process::Child,
    stderr: std::io::BufReader<std::process::ChildStderr>,
    err: String,
}

impl Watching {
    /// Starts `watch` with `args` and waits until its first round is reported.
    fn start(place: &Place, args: &[&str]) -> Watching {
        let mut child = place
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut watching = Watching {
            child,
            stderr,
            err: String::new(),
        };
        while !watching.err.contains("round 1:") {
            let read =
                std::io::BufRead::read_line(&mut watching.stderr, &mut watching.err).unwrap();
            assert_ne!(read, 0, "the watch ended by itself: {}", watching.err);
        }
        watching
    }

    /// Sends SIGTERM and waits for the end: the exit code, standard output and standard
    /// error.
    fn terminate(mut self) -> (Option<i32>, String, String) {
        let killed = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("the kill command, to send SIGTERM with");
        assert!(killed.success());
        let mut err = std::mem::take(&mut self.err);
        std::io::Read::read_to_string(&mut self.stderr, &mut err).unwrap();
        let mut out = String::new();
        std::io::Read::read_to_string(&mut self.child.stdout.take().unwrap(), &mut out).unwrap();
        let status = self.child.wait().unwrap();
        (status.code(), out, err)
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn watch_stops_cleanly_on_sigterm_between_rounds() {
    let place = Place::new();
    let (code, out, err) = place.run(&["apply", "--yes"]);
    assert_eq!(code, 0, "{out}{err}");
    let world = std::fs::read_to_string(place.world()).unwrap();
    // Once the first round is reported, signal it: the round under way (or the wait)
    // ends, and no other starts.
    let watching = Watching::start(&place, &["watch", "--every", "200ms"]);
    let (code, out, err) = watching.terminate();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("round 1: 0 drifted, 0 not looked at"), "{err}");
    assert!(out.is_empty(), "no drift, no line: {out}");
    assert_eq!(std::fs::read_to_string(place.world()).unwrap(), world);
}

/// `watch --apply` takes the fleet's lock for its applies alone: while it waits between
/// rounds, another run that writes the records (`refresh`) takes the lock at once.
#[test]
fn watch_with_apply_leaves_the_lock_free_between_rounds() {
    let place = Place::new();
    let (code, out, err) = place.run(&["apply", "--yes"]);
    assert_eq!(code, 0, "{out}{err}");
    let watching = Watching::start(&place, &["watch", "--every", "1h", "--apply"]);
    let (code, out, refresh_err) = place.run(&["refresh"]);
    let (watch_code, _, err) = watching.terminate();
    assert_eq!(code, 0, "refresh while watching: {out}{refresh_err}");
    assert!(!refresh_err.contains("lock"), "{refresh_err}");
    assert_eq!(watch_code, Some(0), "{err}");
    assert!(err.contains("round 1: 0 drifted, 0 not looked at"), "{err}");
}

/// A malformed ledger is the fleet's own records, not a cloud out of reach: `watch`
/// ends at once with the file and line (exit 1, no "0 drifted"), `output` prints no
/// value read beside it, and the file is left as it was.
#[test]
fn a_malformed_ledger_ends_a_watch_and_refuses_outputs() {
    let place = Place::new();
    let (code, out, err) = place.run(&["apply", "--yes"]);
    assert_eq!(code, 0, "{out}{err}");
    let ledger = place.dir.path().join("state/quickstart/ledger.json");
    std::fs::write(&ledger, "{\"broken").unwrap();
    let ledger_text = ledger.display().to_string();

    let (code, out, err) = place.run(&["watch", "--every", "1s", "--rounds", "3"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains(&format!("{ledger_text}:1:")), "{err}");
    assert!(!err.contains("round 1"), "no round is reported: {err}");
    assert!(out.is_empty(), "{out}");

    for args in [
        &["output"][..],
        &["output", "--json"],
        &["output", "db-endpoint"],
    ] {
        let (code, out, err) = place.run(args);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(err.contains(&ledger_text), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read_to_string(&ledger).unwrap(), "{\"broken");
}
