//! Scaleway's official Python SDK as a second client of the stand-in
//! (`infra_testkit::scaleway`): every product and act the backend uses, made through the
//! SDK by `official_sdk/drive.py`, must succeed, and every answer must have the fields of
//! the SDK's own types (see the driver's documentation). The stand-in was written here;
//! the SDK was not: a stand-in that only agreed with this crate's client fails here.
//!
//! Needs `INFRA_SCALEWAY_SDK_PYTHON`, a Python with `scaleway` installed (`.ci/run`
//! installs the version it pins in a virtual environment); without it, a loud skip, and a
//! failure when `CI=true`.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use infra_core::sdk::SystemClock;
use infra_testkit::evidence::{Evidence, Record};
use infra_testkit::scaleway::{ApiKey, ScalewayOptions, ScalewayServer};
use serde_json::Value;

const PROJECT: &str = "11111111-1111-4111-8111-111111111111";
const ORGANIZATION: &str = "22222222-2222-4222-8222-222222222222";
const ACCESS_KEY: &str = "SCWSDKDRIVER00000000";
const SECRET_KEY: &str = "5d4e3c2b-1a09-4f8e-9d7c-6b5a49382716";

/// The Python to run the driver with, or `None` after a loud skip (failing under CI).
fn python() -> Option<String> {
    match std::env::var("INFRA_SCALEWAY_SDK_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
    {
        Some(python) => Some(python),
        None => {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
            eprintln!("\n==================== SKIPPED ====================");
            eprintln!("INFRA_SCALEWAY_SDK_PYTHON is not set: Scaleway's official SDK was not run");
            eprintln!("against the stand-in (see .ci/run for the virtual environment it needs).");
            eprintln!("=================================================\n");
            assert!(
                !ci,
                "CI=true and INFRA_SCALEWAY_SDK_PYTHON is not set: the official SDK did not run"
            );
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaleway_s_python_sdk_runs_every_act_against_the_stand_in() {
    let Some(python) = python() else {
        return;
    };
    let key = ApiKey::new(ACCESS_KEY, SECRET_KEY).expect("a key of Scaleway's shape");
    // The real clock, and a short settling time: the driver waits as a client does.
    let options = ScalewayOptions::new()
        .clock(Arc::new(SystemClock::new()))
        .settling(Duration::from_millis(60))
        .key(key);
    let server = ScalewayServer::start_with(PROJECT, ORGANIZATION, options)
        .await
        .expect("the stand-in starts");
    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/official_sdk/drive.py");
    let args = [
        driver.to_string_lossy().into_owned(),
        server.address(),
        PROJECT.to_owned(),
        ORGANIZATION.to_owned(),
        ACCESS_KEY.to_owned(),
        SECRET_KEY.to_owned(),
    ];
    let output = tokio::task::spawn_blocking(move || Command::new(python).args(args).output())
        .await
        .expect("the driver's thread")
        .expect("the driver runs");
    server.shutdown().await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report: Value = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("the driver printed no report:\n{stdout}\n{stderr}"));
    let problems: Vec<&str> = report["problems"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        problems.is_empty() && output.status.success(),
        "the official SDK found problems with the stand-in:\n  {}\n{stderr}",
        problems.join("\n  ")
    );
    let mut evidence = Evidence::new("scaleway", Record::OfficialSdk, "python-sdk");
    for pair in report["pairs"].as_array().into_iter().flatten() {
        if let (Some(kind), Some(act)) = (pair[0].as_str(), pair[1].as_str()) {
            evidence.checked(kind, act);
        }
    }
    evidence.publish();
}
