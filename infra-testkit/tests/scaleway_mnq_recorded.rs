//! The Messaging and Queuing stand-in against traffic recorded on Scaleway's live API
//! (`tests/recorded/mnq/`, from Scaleway's Terraform provider): each recorded call is
//! made, in order, on a fresh stand-in, and its answer must have the recorded status,
//! the recorded fields, and the recorded values of those that do not depend on the
//! moment or the account (statuses, error types and resources, permissions, the SQS
//! endpoint, names, which dates are null).
//!
//! Skipped, as the stand-in does not model them: the moments right after a project is
//! made or credentials are, when Scaleway answers `sqs-info` 403 and the credentials 404
//! (of resource `namespace`) while its permissions and stores catch up.

#![cfg(feature = "scaleway")]

use std::collections::{BTreeMap, BTreeSet};

use infra_testkit::evidence::{Evidence, Record};
use infra_testkit::scaleway::ScalewayServer;
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PROJECT: &str = "11111111-1111-4111-8111-111111111111";
const ORGANIZATION: &str = "22222222-2222-4222-8222-222222222222";

/// The fields whose recorded values the stand-in must answer as they are.
const SAME_VALUES: &[&str] = &[
    "status",
    "type",
    "resource",
    "region",
    "sqs_endpoint_url",
    "permissions",
    "name",
    "message",
    "help_message",
];

/// The fields whose value is null, or not, as recorded (dates).
const SAME_NULLNESS: &[&str] = &["created_at", "updated_at"];

#[derive(Debug, Deserialize)]
struct Interaction {
    method: String,
    path: String,
    query: BTreeMap<String, String>,
    body: Option<Value>,
    status: u16,
    answer: Option<Value>,
}

/// `text` with the recorded project's id and the recorded ids of credentials replaced
/// by the stand-in's.
fn translated(text: &str, ids: &BTreeMap<String, String>) -> String {
    ids.iter().fold(text.to_owned(), |text, (recorded, ours)| {
        text.replace(recorded, ours)
    })
}

/// Whether Scaleway answered this while catching up with a change (not modelled).
fn catching_up(i: &Interaction) -> bool {
    let resource = i
        .answer
        .as_ref()
        .and_then(|a| a.get("resource"))
        .and_then(Value::as_str);
    (i.status == 403 && i.path.ends_with("/sqs-info"))
        || (i.method == "GET" && i.status == 404 && resource == Some("namespace"))
}

/// `method` `target` with `body` (JSON) to the stand-in at `address`
/// (`http://127.0.0.1:PORT`), carrying `token`: the status and the body answered.
async fn call(
    address: &str,
    token: &str,
    method: &str,
    target: &str,
    body: Option<&Value>,
) -> (u16, String) {
    let host = address.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(host)
        .await
        .expect("the stand-in listens");
    let body = body.map(Value::to_string).unwrap_or_default();
    let head = format!(
        "{method} {target} HTTP/1.1\r\nHost: {host}\r\nX-Auth-Token: {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("sent");
    stream.write_all(body.as_bytes()).await.expect("sent");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("answered");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    (status, body.to_owned())
}

/// `pairs` as a query string, percent-encoding what needs it.
fn query_string(pairs: &[(String, String)]) -> String {
    let encode = |s: &str| {
        s.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                    char::from(b).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect::<String>()
    };
    let joined: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    if joined.is_empty() {
        String::new()
    } else {
        format!("?{}", joined.join("&"))
    }
}

/// The act a call is, for the evidence.
fn act(i: &Interaction) -> &'static str {
    let last = i.path.rsplit('/').next().unwrap_or_default();
    match (i.method.as_str(), last) {
        ("POST", "activate-sqs") => "activate",
        ("POST", "deactivate-sqs") => "deactivate",
        ("GET", "sqs-info") => "status",
        ("POST", "sqs-credentials") => "credentials-create",
        ("GET", _) => "credentials-read",
        ("PATCH", _) => "credentials-update",
        ("DELETE", _) => "credentials-delete",
        _ => "other",
    }
}

/// What differs between the recorded answer and the stand-in's.
fn differences(recorded: &Map<String, Value>, ours: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    let keys = |m: &Map<String, Value>| m.keys().cloned().collect::<BTreeSet<_>>();
    if keys(recorded) != keys(ours) {
        out.push(format!(
            "fields: recorded {:?}, answered {:?}",
            keys(recorded),
            keys(ours)
        ));
    }
    for field in SAME_VALUES {
        if recorded.get(*field) != ours.get(*field) {
            out.push(format!(
                "`{field}`: recorded {:?}, answered {:?}",
                recorded.get(*field),
                ours.get(*field)
            ));
        }
    }
    for field in SAME_NULLNESS {
        let null = |m: &Map<String, Value>| m.get(*field).map(Value::is_null);
        if null(recorded) != null(ours) {
            out.push(format!("`{field}`: null in one answer only"));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stand_in_answers_queues_control_plane_calls_as_scaleway_recorded_them() {
    let recorded: BTreeMap<String, Vec<Interaction>> =
        serde_json::from_str(include_str!("recorded/mnq/interactions.json"))
            .expect("the recordings read");
    let mut evidence = Evidence::new("scaleway", Record::RecordedTraffic, "mnq-stand-in");
    let mut problems = Vec::new();
    let mut played = 0;
    for (recording, interactions) in &recorded {
        let server = ScalewayServer::start(PROJECT, ORGANIZATION)
            .await
            .expect("the stand-in starts");
        let mut ids = BTreeMap::new();
        for (n, i) in interactions.iter().enumerate() {
            if let Some(project) = i
                .body
                .as_ref()
                .and_then(|b| b.get("project_id"))
                .or_else(|| i.answer.as_ref().and_then(|a| a.get("project_id")))
                .and_then(Value::as_str)
            {
                ids.entry(project.to_owned())
                    .or_insert_with(|| PROJECT.to_owned());
            }
            if catching_up(i) {
                continue;
            }
            let query: Vec<(String, String)> = i
                .query
                .iter()
                .map(|(k, v)| (k.clone(), translated(v, &ids)))
                .collect();
            let body: Option<Value> = i.body.as_ref().map(|body| {
                serde_json::from_str(&translated(&body.to_string(), &ids)).expect("JSON")
            });
            let target = format!("{}{}", translated(&i.path, &ids), query_string(&query));
            let (status, text) = call(
                &server.address(),
                &server.token(),
                &i.method,
                &target,
                body.as_ref(),
            )
            .await;
            let ours: Option<Value> = serde_json::from_str(&text).ok();
            let at = format!("{recording} #{n} {} {}", i.method, i.path);
            if status != i.status {
                problems.push(format!("{at}: recorded {}, answered {status}", i.status));
                continue;
            }
            match (&i.answer, &ours) {
                (Some(Value::Object(rec)), Some(Value::Object(got))) => {
                    if let (Some(r), Some(o)) = (
                        rec.get("id").and_then(Value::as_str),
                        got.get("id").and_then(Value::as_str),
                    ) {
                        ids.entry(r.to_owned()).or_insert_with(|| o.to_owned());
                    }
                    let translated_rec: Map<String, Value> = serde_json::from_str(&translated(
                        &Value::Object(rec.clone()).to_string(),
                        &ids,
                    ))
                    .expect("JSON");
                    for d in differences(&translated_rec, got) {
                        problems.push(format!("{at}: {d}"));
                    }
                }
                (None, None) => {}
                (rec, got) => problems.push(format!("{at}: recorded {rec:?}, answered {got:?}")),
            }
            evidence.checked("queues", act(i));
            played += 1;
        }
        server.shutdown().await;
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
    assert!(played >= 20, "only {played} recorded calls were played");
    evidence.publish();
}
