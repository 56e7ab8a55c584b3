//! Google's own Python client, `google-api-python-client`, as a second client of the
//! stand-in (`tests/official_client/drive.py`), and the check that the discovery
//! extracts committed under `tests/discovery/` are the documents that client ships.
//!
//! Both need a Python with the package, named by `INFRA_GCP_DISCOVERY_PYTHON` (`.ci/run`
//! installs it in a virtual environment); without it they skip loudly, and fail when
//! `CI=true`.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use infra_core::sdk::SystemClock;
use infra_testkit::evidence::{Evidence, Record};
use infra_testkit::gcp::GcpServer;
use infra_testkit::relay::Relay;
use serde_json::Value;

use super::{PROJECT, schema};

/// The variable naming the Python that has the package.
const PYTHON: &str = "INFRA_GCP_DISCOVERY_PYTHON";

/// The version of `google-api-python-client` the extracts were taken from.
const PACKAGE_VERSION: &str = "2.202.0";

/// The Python to run, or `None` after a loud skip (failing under CI).
fn python() -> Option<PathBuf> {
    if let Some(python) = std::env::var_os(PYTHON).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(python));
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    eprintln!("\n==================== SKIPPED ====================");
    eprintln!("{PYTHON} is not set: Google's Python client (google-api-python-client");
    eprintln!("{PACKAGE_VERSION}) is not run against the stand-in, and the discovery");
    eprintln!("extracts are not compared with the documents it ships (see .ci/run).");
    eprintln!("=================================================\n");
    assert!(
        !ci,
        "CI=true and {PYTHON} is not set: the official client's tests did not run"
    );
    None
}

/// Runs `code` with `python`; its standard output, trimmed.
fn python_says(python: &PathBuf, code: &str) -> String {
    let out = Command::new(python)
        .args(["-c", code])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    assert!(
        out.status.success(),
        "{}: {}",
        python.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The (kind, act) pairs the driver checks.
const ACTS: [&str; 6] = ["create", "read", "update", "list", "error", "delete"];
const KINDS: [&str; 6] = [
    "objectStore",
    "secrets",
    "imageRegistry",
    "compute",
    "postgres",
    "iam",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn googles_python_client_drives_every_kind_on_the_stand_in() {
    let Some(python) = python() else { return };
    // The Python client waits on real time: the stand-in keeps the real clock, and its
    // long-running work takes a moment, so that the client sees it running first.
    let server = GcpServer::start_with(PROJECT, 0, Arc::new(SystemClock::new()))
        .await
        .expect("the stand-in starts");
    server.settling(Duration::from_millis(300));
    let relay = Relay::start(&server.address())
        .await
        .expect("the relay starts");
    let endpoint = relay.address();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/official_client/drive.py"
    );
    let run = {
        let python = python.clone();
        tokio::task::spawn_blocking(move || {
            Command::new(&python)
                .arg(script)
                .args(["--endpoint", &endpoint, "--project", PROJECT])
                .output()
        })
    };
    let out = run
        .await
        .expect("the driver ran")
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Python client found the stand-in wanting:\n{stderr}\n(checked so far:\n{stdout})"
    );
    let mut evidence = Evidence::new("gcp", Record::OfficialSdk, "python-client");
    for line in stdout.lines() {
        let pair: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("the driver printed {line:?}: {e}"));
        let (Some(kind), Some(act)) = (pair["kind"].as_str(), pair["act"].as_str()) else {
            panic!("the driver printed {line:?}");
        };
        evidence.checked(kind, act);
    }
    let seen: Vec<(String, String)> = evidence
        .pairs()
        .map(|(k, a)| (k.to_owned(), a.to_owned()))
        .collect();
    for kind in KINDS {
        for act in ACTS {
            assert!(
                seen.contains(&(kind.to_owned(), act.to_owned())),
                "the driver did not check {kind} {act}: {seen:?}"
            );
        }
    }
    // The same traffic, held against the schema: the Python client asks for no
    // integer enums, so every answer must carry names.
    let held = schema::Held::check(&schema::catalogue(), &relay.take());
    held.assert_agreed();
    held.assert_covers(
        &KINDS,
        &["create", "read", "list", "update", "delete", "error"],
    );
    evidence.publish();
    held.publish("python-client");
    relay.shutdown().await;
    server.shutdown().await;
}

/// Whether `key: value` is prose, which the extracts leave out: a `description` that
/// is text (a field named `description` has a schema for its value, and stays), an
/// `enumDescriptions` list.
fn is_prose(key: &str, value: &Value) -> bool {
    match key {
        "description" => value.is_string(),
        "enumDescriptions" => value
            .as_array()
            .is_some_and(|items| items.iter().all(Value::is_string)),
        _ => false,
    }
}

/// `value` without its prose.
fn without_prose(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, v)| !is_prose(k, v))
                .map(|(k, v)| (k.clone(), without_prose(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_prose).collect()),
        other => other.clone(),
    }
}

/// Every method of `resources`, by its id.
fn methods(resources: &Value, out: &mut Vec<(String, Value)>) {
    let Some(resources) = resources.as_object() else {
        return;
    };
    for resource in resources.values() {
        if let Some(ms) = resource.get("methods").and_then(Value::as_object) {
            for m in ms.values() {
                let id = m["id"].as_str().unwrap_or_default().to_owned();
                out.push((id, m.clone()));
            }
        }
        if let Some(nested) = resource.get("resources") {
            methods(nested, out);
        }
    }
}

#[test]
fn the_committed_discovery_extracts_match_the_installed_documents() {
    let Some(python) = python() else { return };
    let version = python_says(
        &python,
        "import importlib.metadata as m; print(m.version('google-api-python-client'))",
    );
    assert_eq!(
        version, PACKAGE_VERSION,
        "the extracts were taken from google-api-python-client {PACKAGE_VERSION} (see tests/discovery/README.md)"
    );
    let package = python_says(
        &python,
        "import googleapiclient, os; print(os.path.dirname(googleapiclient.__file__))",
    );
    let documents = PathBuf::from(package).join("discovery_cache/documents");
    for (api, extract) in schema::extracts() {
        let path = documents.join(format!("{api}.json"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let full: Value = serde_json::from_str(&text).expect("a JSON document");
        let full = without_prose(&full);
        for key in [
            "kind",
            "name",
            "version",
            "revision",
            "rootUrl",
            "servicePath",
            "parameters",
        ] {
            assert_eq!(extract.get(key), full.get(key), "{api}: {key}");
        }
        let mut theirs = Vec::new();
        methods(&full["resources"], &mut theirs);
        let mut ours = Vec::new();
        methods(&extract["resources"], &mut ours);
        assert!(!ours.is_empty(), "{api}: no method");
        for (id, method) in &ours {
            let found = theirs.iter().find(|(i, _)| i == id);
            assert_eq!(
                Some(method),
                found.map(|(_, m)| m),
                "{api}: the method {id}"
            );
        }
        let schemas = extract["schemas"].as_object().expect("schemas");
        for (id, schema) in schemas {
            assert_eq!(
                Some(schema),
                full["schemas"].get(id),
                "{api}: the schema {id}"
            );
        }
        let keys: Vec<&String> = extract.as_object().expect("an object").keys().collect();
        for key in keys {
            assert!(
                [
                    "kind",
                    "name",
                    "version",
                    "revision",
                    "rootUrl",
                    "servicePath",
                    "parameters",
                    "resources",
                    "schemas"
                ]
                .contains(&key.as_str()),
                "{api}: the extract holds {key}, which is not compared"
            );
        }
    }
    // Every reference resolves, and the operations' types are there.
    let catalogue = schema::catalogue();
    assert_eq!(catalogue.apis().len(), 8);
}
