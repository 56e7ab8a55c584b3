//! What the stand-in answers, held against what Scaleway answered the Terraform
//! provider: the recorded requests are replayed against the stand-in (ids, the project
//! and the organization made the stand-in's; secret values made valid), and each answer
//! must have the recorded status, the recorded fields with their JSON types and no field
//! Scaleway never sent; a resource's statuses must follow a recorded sequence. Every
//! deliberate difference is in `infra_testkit::scaleway::DIFFERENCES`, the one table of
//! the stand-in's module docs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use base64::Engine as _;
use infra_core::sdk::ManualClock;
use infra_testkit::conformance::staged::EMPTY_ZIP;
use infra_testkit::evidence::{Evidence, Record};
use infra_testkit::scaleway::{DEFAULT_SETTLING, DIFFERENCES, ScalewayServer};
use serde_json::{Value, json};

use super::{Recorded, fixture, kind_of, recorded, types_agree, union_and_common};
use crate::support::stand_in_on;
use crate::{ORGANIZATION, PROJECT};

const REGION: &str = "fr-par";

/// One step of a resource's life: the act, the status code, the resource's status.
type Step = (String, u16, Option<String>);

/// One difference between an answer of the stand-in and the recorded ones.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Finding {
    product: &'static str,
    act: &'static str,
    field: String,
    what: String,
}

/// A replay of recorded requests against the stand-in, and what it found.
struct Replay {
    server: ScalewayServer,
    clock: Arc<ManualClock>,
    http: reqwest::Client,
    product: &'static str,
    findings: BTreeSet<Finding>,
    /// Per resource (`namespace`, `instance`): the steps `(act, code, status)`.
    steps: BTreeMap<&'static str, Vec<Step>>,
    evidence: Evidence,
}

impl Replay {
    async fn start(product: &'static str) -> Replay {
        // The REST client's TLS provider, as the backend installs it (the stand-in is
        // plain HTTP, but the client is built with rustls).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let clock = Arc::new(ManualClock::new());
        let server = stand_in_on(&clock).await;
        Replay {
            server,
            clock,
            http: reqwest::Client::new(),
            product,
            findings: BTreeSet::new(),
            steps: BTreeMap::new(),
            evidence: Evidence::new(
                "scaleway",
                Record::RecordedTraffic,
                &format!("stand-in-{product}"),
            ),
        }
    }

    /// Lets a change settle: the stand-in's settling time passes on its clock.
    fn settle(&self) {
        self.clock.advance(DEFAULT_SETTLING);
    }

    /// The first recorded request body of `act` that `pick` accepts, made the
    /// stand-in's with `adapt`.
    fn body(&self, act: &str, pick: impl Fn(&Value) -> bool, adapt: impl Fn(&mut Value)) -> Value {
        let mut body = recorded(self.product, act)
            .into_iter()
            .map(|r| r.request)
            .find(|b| pick(b))
            .unwrap_or_else(|| panic!("{} {act}: no recorded request fits", self.product));
        if let Some(map) = body.as_object_mut() {
            for (key, value) in [("project_id", PROJECT), ("organization_id", ORGANIZATION)] {
                if map.contains_key(key) {
                    map.insert(key.to_owned(), json!(value));
                }
            }
        }
        adapt(&mut body);
        body
    }

    /// Sends `act` to the stand-in and compares its answer with the recorded ones;
    /// `resource` names the resource whose status sequence the answer belongs to.
    async fn step(
        &mut self,
        act: &'static str,
        resource: Option<&'static str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.server.address()))
            .header("X-Auth-Token", self.server.token());
        if let Some(body) = &body {
            request = request.json(body);
        }
        let answer = request.send().await.expect("the stand-in answers");
        let code = answer.status().as_u16();
        let text = answer.text().await.expect("a body");
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        self.compare(act, code, &value);
        if let Some(resource) = resource {
            let status = (code < 300)
                .then(|| value["status"].as_str().map(str::to_owned))
                .flatten();
            self.steps
                .entry(resource)
                .or_default()
                .push((act.to_owned(), code, status));
        }
        (code, value)
    }

    fn note(&mut self, act: &'static str, field: String, what: String) {
        self.findings.insert(Finding {
            product: self.product,
            act,
            field,
            what,
        });
    }

    /// Compares an answer of the stand-in with the recorded answers of `act`.
    fn compare(&mut self, act: &'static str, code: u16, answer: &Value) {
        let all = recorded(self.product, act);
        assert!(!all.is_empty(), "{} {act}: nothing recorded", self.product);
        self.evidence.checked(kind_of(self.product, act), act);
        let same: Vec<&Recorded> = all.iter().filter(|r| r.status == code).collect();
        if same.is_empty() {
            let codes: BTreeSet<u16> = all.iter().map(|r| r.status).collect();
            let class = |c: u16| c / 100;
            if !codes.iter().any(|c| class(*c) == class(code)) || code >= 300 {
                self.note(
                    act,
                    "status".into(),
                    format!("{code}, recorded {codes:?}: {answer}"),
                );
                return;
            }
            // A success of another code (200 where Scaleway says 204): the code differs.
            self.note(act, "status".into(), format!("{code}, recorded {codes:?}"));
            return;
        }
        let (theirs, common) = union_and_common(same.iter().map(|r| &r.response));
        let (mine, _) = union_and_common([answer]);
        for field in &common {
            // An empty list (or a null) the stand-in answers says nothing of its items.
            if !mine.contains_key(field) && !unseen(field, &mine) {
                self.note(act, field.clone(), "recorded, not answered".into());
            }
        }
        for (field, kind) in &mine {
            match theirs.get(field) {
                // Nor does an empty list (or a null) Scaleway was recorded answering.
                None if unseen(field, &theirs) => {}
                None => self.note(
                    act,
                    field.clone(),
                    format!("answered ({kind}), never recorded"),
                ),
                Some(t) if !types_agree(t, kind) => {
                    self.note(
                        act,
                        field.clone(),
                        format!("answered as {kind}, recorded as {t}"),
                    );
                }
                Some(_) => {}
            }
        }
    }

    /// Checks the status sequence of `resource` against the recorded ones: the statuses
    /// (a 404 once gone) the stand-in went through, repeats folded, must be those of a
    /// recorded sequence of the same acts, or begin one, or be begun by one. How many reads
    /// saw a status depends on timing, which differs; the order of statuses does not.
    fn sequence(&mut self, resource: &'static str) {
        let steps = self.steps.get(resource).cloned().unwrap_or_default();
        let acts: BTreeSet<String> = steps.iter().map(|(a, ..)| a.clone()).collect();
        let ours = statuses(steps);
        let recorded: Vec<Vec<(u16, Option<String>)>> = fixture(self.product)["sequences"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["resource"] == resource)
            .map(|s| {
                let steps = s["steps"].as_array().into_iter().flatten().map(|step| {
                    (
                        step[0].as_str().unwrap_or_default().to_owned(),
                        u16::try_from(step[1].as_u64().unwrap_or(0)).unwrap_or(0),
                        step[2].as_str().map(str::to_owned),
                    )
                });
                statuses(steps.filter(|(a, ..)| acts.contains(a)).collect())
            })
            .collect();
        assert!(
            !recorded.is_empty(),
            "{} {resource}: no sequence recorded",
            self.product
        );
        let fits = |r: &Vec<(u16, Option<String>)>| {
            let n = r.len().min(ours.len());
            n >= 2 && r[..n] == ours[..n]
        };
        if !recorded.iter().any(fits) {
            self.note(
                "sequence",
                resource.to_owned(),
                format!("stand-in {ours:?}; recorded {recorded:?}"),
            );
        }
        let kind = kind_of(self.product, &format!("{resource}-"));
        self.evidence.checked(kind, "status-sequence");
    }

    /// Fails on every finding not among the stand-in's documented differences;
    /// publishes the pairs checked otherwise.
    async fn finish(self) {
        let allowed: BTreeSet<(&str, &str, &str)> = DIFFERENCES
            .iter()
            .map(|d| (d.product, d.act, d.field))
            .collect();
        let unexplained: Vec<&Finding> = self
            .findings
            .iter()
            .filter(|f| !allowed.contains(&(f.product, f.act, f.field.as_str())))
            .collect();
        self.server.shutdown().await;
        assert!(
            unexplained.is_empty(),
            "the stand-in answers otherwise than Scaleway was recorded answering:\n{}",
            unexplained
                .iter()
                .map(|f| format!("  {} {} `{}`: {}", f.product, f.act, f.field, f.what))
                .collect::<Vec<_>>()
                .join("\n")
        );
        self.evidence.publish();
    }
}

/// Whether `field` lies under a list or object that `other` holds but never filled
/// (`settings[].name` where `other` has `settings` and nothing under it): its items
/// were not shown, so neither their presence nor their absence is a difference.
fn unseen(field: &str, other: &BTreeMap<String, &'static str>) -> bool {
    let parents = field
        .char_indices()
        .filter(|(_, c)| *c == '.' || *c == '[')
        .map(|(i, _)| &field[..i]);
    parents.into_iter().any(|parent| {
        other.contains_key(parent)
            && !other
                .keys()
                .any(|k| k.len() > parent.len() && k.starts_with(parent) && k != parent)
    })
}

/// The statuses of `steps` (code and resource status), consecutive repeats folded.
fn statuses(steps: Vec<Step>) -> Vec<(u16, Option<String>)> {
    let mut out: Vec<(u16, Option<String>)> = Vec::new();
    for (_, code, status) in steps {
        let seen = (code, status);
        if out.last() != Some(&seen) {
            out.push(seen);
        }
    }
    out
}

fn id(value: &Value) -> String {
    value["id"]
        .as_str()
        .unwrap_or_else(|| panic!("an id in {value}"))
        .to_owned()
}

#[tokio::test]
async fn the_account_stand_in_answers_as_scaleway_was_recorded() {
    let mut r = Replay::start("account").await;
    let path = format!("/account/v3/projects/{PROJECT}");
    r.step("project-get", None, "GET", &path, None).await;
    let other = "/account/v3/projects/d660e627-2bff-4618-b736-922141374ad2";
    r.step("project-get", None, "GET", other, None).await;
    r.finish().await;
}

#[tokio::test]
async fn the_secret_manager_stand_in_answers_as_scaleway_was_recorded() {
    let mut r = Replay::start("secret").await;
    let base = format!("/secret-manager/v1beta1/regions/{REGION}/secrets");
    let body = r.body("secret-create", |b| b["path"] == "/", |_| {});
    let (_, made) = r
        .step("secret-create", None, "POST", &base, Some(body))
        .await;
    let secret = id(&made);
    let path = format!("{base}/{secret}");
    r.step("secret-get", None, "GET", &path, None).await;
    let list = format!("{base}?project_id={PROJECT}");
    r.step("secret-list", None, "GET", &list, None).await;
    let patch = r.body(
        "secret-update",
        |b| b.get("ephemeral_policy").is_none(),
        |_| {},
    );
    r.step("secret-update", None, "PATCH", &path, Some(patch))
        .await;
    let data = base64::engine::general_purpose::STANDARD.encode("a value");
    let version = r.body(
        "version-create",
        |b| b["data"].is_string(),
        |b| {
            b["data"] = json!(data);
        },
    );
    let versions = format!("{path}/versions");
    r.step("version-create", None, "POST", &versions, Some(version))
        .await;
    r.step("version-get", None, "GET", &format!("{versions}/1"), None)
        .await;
    let access = format!("{versions}/1/access");
    r.step("version-access", None, "GET", &access, None).await;
    r.step("secret-delete", None, "DELETE", &path, None).await;
    r.step("secret-get", None, "GET", &path, None).await;
    r.finish().await;
}

#[tokio::test]
async fn the_registry_stand_in_answers_as_scaleway_was_recorded() {
    let mut r = Replay::start("registry").await;
    let base = format!("/registry/v1/regions/{REGION}/namespaces");
    let body = r.body("namespace-create", |_| true, |_| {});
    let (_, made) = r
        .step(
            "namespace-create",
            Some("namespace"),
            "POST",
            &base,
            Some(body),
        )
        .await;
    let path = format!("{base}/{}", id(&made));
    r.step("namespace-get", Some("namespace"), "GET", &path, None)
        .await;
    let list = format!("{base}?project_id={PROJECT}");
    r.step("namespace-list", None, "GET", &list, None).await;
    let patch = r.body("namespace-update", |_| true, |_| {});
    r.step(
        "namespace-update",
        Some("namespace"),
        "PATCH",
        &path,
        Some(patch),
    )
    .await;
    r.step("namespace-get", Some("namespace"), "GET", &path, None)
        .await;
    r.step("namespace-delete", Some("namespace"), "DELETE", &path, None)
        .await;
    r.step("namespace-get", Some("namespace"), "GET", &path, None)
        .await;
    r.settle();
    r.step("namespace-get", Some("namespace"), "GET", &path, None)
        .await;
    r.sequence("namespace");
    r.finish().await;
}

#[tokio::test]
async fn the_rdb_stand_in_answers_as_scaleway_was_recorded() {
    let mut r = Replay::start("rdb").await;
    let base = format!("/rdb/v1/regions/{REGION}/instances");
    let engines = format!("/rdb/v1/regions/{REGION}/database-engines");
    r.step("engine-list", None, "GET", &engines, None).await;
    let body = r.body(
        "instance-create",
        |b| {
            b["engine"]
                .as_str()
                .is_some_and(|e| e.starts_with("PostgreSQL"))
        },
        |b| b["password"] = json!("Str0ng-Passw0rd!"),
    );
    let (_, made) = r
        .step(
            "instance-create",
            Some("instance"),
            "POST",
            &base,
            Some(body),
        )
        .await;
    let path = format!("{base}/{}", id(&made));
    r.step("instance-get", Some("instance"), "GET", &path, None)
        .await;
    r.settle();
    r.step("instance-get", Some("instance"), "GET", &path, None)
        .await;
    let list = format!("{base}?project_id={PROJECT}");
    r.step("instance-list", None, "GET", &list, None).await;
    let patch = r.body("instance-update", |b| b.get("tags").is_some(), |_| {});
    r.step(
        "instance-update",
        Some("instance"),
        "PATCH",
        &path,
        Some(patch),
    )
    .await;
    let users = format!("{path}/users");
    r.step("user-list", None, "GET", &users, None).await;
    let user = r.body(
        "user-create",
        |_| true,
        |b| b["password"] = json!("An0ther-Passw0rd!"),
    );
    let (_, made_user) = r
        .step("user-create", None, "POST", &users, Some(user))
        .await;
    let name = made_user["name"].as_str().unwrap_or("foo").to_owned();
    let change = r.body(
        "user-update",
        |_| true,
        |b| b["password"] = json!("Th1rd-Passw0rd!"),
    );
    r.step(
        "user-update",
        None,
        "PATCH",
        &format!("{users}/{name}"),
        Some(change),
    )
    .await;
    let upgrade = r.body("instance-upgrade", |b| b.get("node_type").is_some(), |_| {});
    r.step(
        "instance-upgrade",
        Some("instance"),
        "POST",
        &format!("{path}/upgrade"),
        Some(upgrade),
    )
    .await;
    r.settle();
    r.step("instance-get", Some("instance"), "GET", &path, None)
        .await;
    r.step("instance-delete", Some("instance"), "DELETE", &path, None)
        .await;
    r.step("instance-get", Some("instance"), "GET", &path, None)
        .await;
    r.settle();
    r.step("instance-get", Some("instance"), "GET", &path, None)
        .await;
    r.sequence("instance");
    r.finish().await;
}

#[tokio::test]
async fn the_iam_stand_in_answers_as_scaleway_was_recorded() {
    let mut r = Replay::start("iam").await;
    let apps = "/iam/v1alpha1/applications";
    let body = r.body("application-create", |_| true, |_| {});
    let (_, made) = r
        .step("application-create", None, "POST", apps, Some(body))
        .await;
    let app = id(&made);
    let path = format!("{apps}/{app}");
    r.step("application-get", None, "GET", &path, None).await;
    let list = format!("{apps}?organization_id={ORGANIZATION}");
    r.step("application-list", None, "GET", &list, None).await;
    let patch = r.body("application-update", |_| true, |_| {});
    r.step("application-update", None, "PATCH", &path, Some(patch))
        .await;
    let policy = r.body(
        "policy-create",
        |b| b.get("application_id").is_some(),
        |b| {
            b["application_id"] = json!(app);
            if let Some(rules) = b["rules"].as_array_mut() {
                for rule in rules {
                    if rule.get("project_ids").is_some() {
                        rule["project_ids"] = json!([PROJECT]);
                    }
                    if rule.get("organization_id").is_some() {
                        rule["organization_id"] = json!(ORGANIZATION);
                    }
                }
            }
        },
    );
    let (_, made_policy) = r
        .step(
            "policy-create",
            None,
            "POST",
            "/iam/v1alpha1/policies",
            Some(policy),
        )
        .await;
    let policy = id(&made_policy);
    let policy_path = format!("/iam/v1alpha1/policies/{policy}");
    r.step("policy-get", None, "GET", &policy_path, None).await;
    let policies =
        format!("/iam/v1alpha1/policies?organization_id={ORGANIZATION}&application_ids={app}");
    r.step("policy-list", None, "GET", &policies, None).await;
    let rules = format!("/iam/v1alpha1/rules?policy_id={policy}");
    r.step("rule-list", None, "GET", &rules, None).await;
    r.step("policy-delete", None, "DELETE", &policy_path, None)
        .await;
    r.step("policy-get", None, "GET", &policy_path, None).await;
    r.step("application-delete", None, "DELETE", &path, None)
        .await;
    r.step("application-get", None, "GET", &path, None).await;
    r.finish().await;
}

#[tokio::test]
async fn the_functions_stand_in_answers_as_scaleway_was_recorded() {
    let mut r = Replay::start("function").await;
    let base = format!("/functions/v1beta1/regions/{REGION}");
    let body = r.body("namespace-create", |_| true, |_| {});
    let (_, made) = r
        .step(
            "namespace-create",
            Some("namespace"),
            "POST",
            &format!("{base}/namespaces"),
            Some(body),
        )
        .await;
    let ns = id(&made);
    let ns_path = format!("{base}/namespaces/{ns}");
    r.step("namespace-get", Some("namespace"), "GET", &ns_path, None)
        .await;
    r.settle();
    r.step("namespace-get", Some("namespace"), "GET", &ns_path, None)
        .await;
    let list = format!("{base}/namespaces?project_id={PROJECT}");
    r.step("namespace-list", None, "GET", &list, None).await;
    let body = r.body(
        "function-create",
        |b| b.get("private_network_id").is_none(),
        |b| {
            b["namespace_id"] = json!(ns);
        },
    );
    let (_, made) = r
        .step(
            "function-create",
            Some("function"),
            "POST",
            &format!("{base}/functions"),
            Some(body),
        )
        .await;
    let f_path = format!("{base}/functions/{}", id(&made));
    r.step("function-get", Some("function"), "GET", &f_path, None)
        .await;
    let list = format!("{base}/functions?namespace_id={ns}");
    r.step("function-list", None, "GET", &list, None).await;
    // Code uploaded and deployed twice, as the recording `function-deploy` did.
    for _ in 0..2 {
        let upload = format!("{f_path}/upload-url?content_length={}", EMPTY_ZIP.len());
        let (_, url) = r
            .step("function-upload-url", None, "GET", &upload, None)
            .await;
        if let Some(url) = url["url"].as_str() {
            let put = r.http.put(url).body(EMPTY_ZIP.to_vec()).send().await;
            assert!(
                put.is_ok_and(|a| a.status().is_success()),
                "the archive is uploaded"
            );
        }
        let deploy = format!("{f_path}/deploy");
        r.step(
            "function-deploy",
            Some("function"),
            "POST",
            &deploy,
            Some(json!({})),
        )
        .await;
        r.step("function-get", Some("function"), "GET", &f_path, None)
            .await;
        r.settle();
        r.step("function-get", Some("function"), "GET", &f_path, None)
            .await;
    }
    let patch = r.body(
        "function-update",
        |b| b.get("private_network_id").is_none(),
        |_| {},
    );
    r.step("function-update", None, "PATCH", &f_path, Some(patch))
        .await;
    r.settle();
    let patch = r.body("namespace-update", |_| true, |_| {});
    r.step("namespace-update", None, "PATCH", &ns_path, Some(patch))
        .await;
    r.settle();
    r.step("function-delete", Some("function"), "DELETE", &f_path, None)
        .await;
    r.settle();
    r.step("function-delete", Some("function"), "DELETE", &f_path, None)
        .await;
    r.step(
        "namespace-delete",
        Some("namespace"),
        "DELETE",
        &ns_path,
        None,
    )
    .await;
    r.step("namespace-get", Some("namespace"), "GET", &ns_path, None)
        .await;
    r.settle();
    r.step("namespace-get", Some("namespace"), "GET", &ns_path, None)
        .await;
    r.sequence("namespace");
    r.sequence("function");
    r.finish().await;
}

#[tokio::test]
async fn the_containers_stand_in_answers_as_scaleway_was_recorded() {
    let mut r = Replay::start("container").await;
    let base = format!("/containers/v1beta1/regions/{REGION}");
    let body = r.body("namespace-create", |_| true, |_| {});
    let (_, made) = r
        .step(
            "namespace-create",
            Some("namespace"),
            "POST",
            &format!("{base}/namespaces"),
            Some(body),
        )
        .await;
    let ns = id(&made);
    let ns_path = format!("{base}/namespaces/{ns}");
    r.step("namespace-get", Some("namespace"), "GET", &ns_path, None)
        .await;
    r.settle();
    r.step("namespace-get", Some("namespace"), "GET", &ns_path, None)
        .await;
    let list = format!("{base}/namespaces?project_id={PROJECT}");
    r.step("namespace-list", None, "GET", &list, None).await;
    let body = r.body(
        "container-create",
        |b| b.get("command").is_some(),
        |b| {
            b["namespace_id"] = json!(ns);
        },
    );
    let (_, made) = r
        .step(
            "container-create",
            Some("container"),
            "POST",
            &format!("{base}/containers"),
            Some(body),
        )
        .await;
    let c_path = format!("{base}/containers/{}", id(&made));
    r.step("container-get", Some("container"), "GET", &c_path, None)
        .await;
    let list = format!("{base}/containers?namespace_id={ns}");
    r.step("container-list", None, "GET", &list, None).await;
    let patch = r.body("container-update", |b| b.get("port").is_some(), |_| {});
    r.step(
        "container-update",
        Some("container"),
        "PATCH",
        &c_path,
        Some(patch),
    )
    .await;
    r.step("container-get", Some("container"), "GET", &c_path, None)
        .await;
    r.settle();
    r.step("container-get", Some("container"), "GET", &c_path, None)
        .await;
    let patch = r.body("namespace-update", |_| true, |_| {});
    r.step("namespace-update", None, "PATCH", &ns_path, Some(patch))
        .await;
    r.settle();
    r.step(
        "container-delete",
        Some("container"),
        "DELETE",
        &c_path,
        None,
    )
    .await;
    r.settle();
    r.step(
        "container-delete",
        Some("container"),
        "DELETE",
        &c_path,
        None,
    )
    .await;
    r.step(
        "namespace-delete",
        Some("namespace"),
        "DELETE",
        &ns_path,
        None,
    )
    .await;
    r.step("namespace-get", Some("namespace"), "GET", &ns_path, None)
        .await;
    r.settle();
    r.step("namespace-get", Some("namespace"), "GET", &ns_path, None)
        .await;
    r.sequence("namespace");
    r.sequence("container");
    r.finish().await;
}
