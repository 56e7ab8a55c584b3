//! The state commands, `graph` and `import-tfstate`, driven as a person would against
//! the simulated cloud: what they print (snapshots), how they exit, what is on disk
//! afterwards, and what the cloud holds.

mod support;

use async_trait::async_trait;
use infra_core::kinds::*;
use infra_core::sdk::layer::{Answer, Call, Layer, Layered, Next};
use infra_core::{
    engine::{FileStore, LedgerRow, RecordStore},
    prelude::{AwsRegion, Backends, CheckReport, Expr, Fleet, compose_secret},
    sdk::{BackendError, RawTags},
};
use infra_testkit::sim::SimCloud;
use support::altered::{Alteration, Altered};
use support::console::{Session, answering, json, session};

const HERE: AwsRegion = AwsRegion::EuWest3;

/// A database, its generated password, a URL composed from both, and a bucket.
fn fleet(with_assets: bool) -> Result<Fleet, CheckReport> {
    let mut f = Fleet::builder("state");
    let pw = f.declare(HERE, "db-password", Secrets::generated(24));
    let db = f.declare(
        HERE,
        "db",
        Postgres::serverless(PostgresServerless {
            engine_version: "16",
            min_capacity: Acu::halves(1),
            max_capacity: Acu::whole(2),
            master_username: "app",
            master_password: pw,
        }),
    );
    let endpoint = Expr::observed(db).map(|o: &PostgresObserved| o.endpoint.clone());
    f.declare(
        HERE,
        "db-url",
        Secrets::composed(compose_secret!(
            "postgres://app:{}@{}/app",
            Expr::secret(pw),
            endpoint
        )),
    );
    if with_assets {
        f.declare(HERE, "state-assets", ObjectStore::new());
    }
    f.build()
}

fn records(s: &Session) -> FileStore {
    FileStore::new(s.state.path())
}

fn row(kind: &str, name: &str) -> LedgerRow {
    LedgerRow {
        provider: "aws".into(),
        kind: kind.into(),
        name: name.into(),
        region: "eu-west-3".into(),
    }
}

async fn applied(cloud: &SimCloud, s: &mut Session, f: Result<Fleet, CheckReport>) {
    let (code, out, err) = s.run(f, cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0, "{out}{err}");
}

#[tokio::test]
async fn every_new_verb_is_in_the_help() {
    let mut s = answering(false, true);
    let (code, out, _) = s.run_on(fleet(true), Backends::new(), &["--help"]).await;
    assert_eq!(code, 0);
    for verb in ["state", "forget", "graph", "import-tfstate"] {
        assert!(
            out.contains(&format!("  {verb} ")),
            "{verb} missing from:\n{out}"
        );
    }
    let (code, out, _) = s
        .run_on(fleet(true), Backends::new(), &["state", "--help"])
        .await;
    assert_eq!(code, 0);
    for sub in ["list", "show", "mv"] {
        assert!(
            out.contains(&format!("  {sub} ")),
            "{sub} missing from:\n{out}"
        );
    }
}

#[tokio::test]
async fn state_list_and_show_say_what_the_records_hold_and_never_a_secret() {
    let cloud = support::cloud(41);
    let mut s = answering(false, true);
    applied(&cloud, &mut s, fleet(true)).await;

    // Without the bucket in the declaration, its row is flagged: the next apply deletes it.
    let (code, out, _) = s.run(fleet(false), &cloud, &["state", "list"]).await;
    assert_eq!(code, 0);
    insta::assert_snapshot!("state_list", out);

    let (code, out, _) = s
        .run(fleet(true), &cloud, &["state", "list", "--json"])
        .await;
    assert_eq!(code, 0);
    let list = json(&out);
    assert_eq!(list["state"], "v1");
    let resources = list["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 4);
    assert_eq!(
        resources[0]["address"],
        "aws/objectStore/state-assets (eu-west-3)"
    );
    assert_eq!(resources[0]["declared"], true);
    assert_eq!(resources[0]["discovered"], false);
    assert_eq!(resources[0]["intent"], false);
    assert_eq!(resources[0]["cached"], true);

    let (code, out, _) = s.run(fleet(true), &cloud, &["state", "show", "db"]).await;
    assert_eq!(code, 0);
    insta::assert_snapshot!("state_show", out);

    // No secret value anywhere: not the generated password, not the composed URL.
    let mut shown = out;
    for name in ["db-password", "db-url"] {
        let (code, out, _) = s.run(fleet(true), &cloud, &["state", "show", name]).await;
        assert_eq!(code, 0);
        shown.push_str(&out);
        let (_, out, _) = s
            .run(fleet(true), &cloud, &["state", "show", name, "--json"])
            .await;
        shown.push_str(&out);
    }
    for secret in cloud.find("aws", "secrets", "db-password") {
        let value = cloud.stored_secret(&secret.handle).unwrap();
        assert!(!shown.contains(value.expose()), "a secret value was shown");
    }
    let url = cloud.find("aws", "secrets", "db-url").remove(0);
    let url = cloud.stored_secret(&url.handle).unwrap();
    assert!(!shown.contains(url.expose()), "a composed secret was shown");

    let (code, out, _) = s
        .run(
            fleet(true),
            &cloud,
            &["state", "show", "aws/postgres/db", "--json"],
        )
        .await;
    assert_eq!(code, 0);
    let show = json(&out);
    let db = cloud.find("aws", "postgres", "db").remove(0);
    assert_eq!(show["resource"]["address"], "aws/postgres/db (eu-west-3)");
    assert_eq!(show["resource"]["cached"]["handle"], db.handle.as_str());
    assert_eq!(show["resource"]["cached"]["observed"], db.observed);

    // A typo names the nearest rows and exits 1, printing nothing on standard output.
    let (code, out, err) = s.run(fleet(true), &cloud, &["state", "show", "bd"]).await;
    assert_eq!((code, out.as_str()), (1, ""));
    insta::assert_snapshot!("state_show_typo", err);
}

#[tokio::test]
async fn forget_lets_a_resource_go_and_leaves_it_in_the_cloud() {
    let cloud = support::cloud(42);
    let mut s = answering(false, true);
    applied(&cloud, &mut s, fleet(true)).await;
    let store = records(&s);

    // Still declared: the next apply would take it back, so it is refused.
    let (code, out, err) = s
        .run(fleet(true), &cloud, &["forget", "state-assets"])
        .await;
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(err.contains("is still declared (present)"), "{err}");
    assert_eq!(store.load_ledger("state").unwrap().len(), 4);

    // Another run holds the lock: refused, nothing changed.
    let holder = infra_core::engine::LockHolder::this_process("apply");
    let guard = store.try_lock("state", &holder).unwrap();
    let (code, _, err) = s
        .run(fleet(false), &cloud, &["forget", "state-assets"])
        .await;
    assert_eq!(code, 1);
    assert!(err.contains("fleet `state` is locked by `apply`"), "{err}");
    drop(guard);
    assert_eq!(store.load_ledger("state").unwrap().len(), 4);

    cloud.clear_calls();
    let (code, out, _) = s
        .run(fleet(false), &cloud, &["forget", "state-assets"])
        .await;
    assert_eq!(code, 0);
    insta::assert_snapshot!("forget", out);
    assert!(cloud.calls().is_empty(), "forget reaches no cloud");

    // On disk: no row, no cached observation. In the cloud: the bucket, marker and all.
    let ledger = store.load_ledger("state").unwrap();
    assert!(!ledger.rows.contains(&row("objectStore", "state-assets")));
    assert_eq!(ledger.len(), 3);
    assert!(
        store
            .load_cache("state", "aws", "objectStore")
            .unwrap()
            .is_empty()
    );
    let bucket = cloud.find("aws", "objectStore", "state-assets").remove(0);
    assert_eq!(bucket.raw_tags["managed-by-infra"], "state");

    // The next plan and apply leave it alone.
    let (code, out, _) = s
        .run(fleet(false), &cloud, &["plan", "--detailed-exitcode"])
        .await;
    assert_eq!(code, 0, "{out}");
    let (code, _, _) = s.run(fleet(false), &cloud, &["apply", "--yes"]).await;
    assert_eq!(code, 0);
    assert_eq!(cloud.find("aws", "objectStore", "state-assets").len(), 1);

    let (code, _, err) = s
        .run(fleet(false), &cloud, &["forget", "state-assets"])
        .await;
    assert_eq!(code, 1);
    assert!(err.contains("names no resource in the records"), "{err}");
}

/// The bucket fleet of the rename scenario.
fn bucket_fleet(name: &str) -> Result<Fleet, CheckReport> {
    let mut f = Fleet::builder("moves");
    f.declare(HERE, name, ObjectStore::new());
    f.build()
}

#[tokio::test]
async fn state_mv_refuses_a_rename_the_cloud_cannot_follow() {
    let cloud = support::cloud(43);
    let mut s = answering(false, true);
    applied(&cloud, &mut s, bucket_fleet("moves-a")).await;
    let before = records(&s).load_ledger("moves").unwrap();

    let (code, out, err) = s
        .run(
            bucket_fleet("moves-b"),
            &cloud,
            &["state", "mv", "moves-a", "moves-b"],
        )
        .await;
    assert_eq!((code, out.as_str()), (1, ""));
    insta::assert_snapshot!("state_mv_refused", err);
    assert_eq!(records(&s).load_ledger("moves").unwrap(), before);
    assert_eq!(
        records(&s)
            .load_cache("moves", "aws", "objectStore")
            .unwrap()
            .len(),
        1
    );

    // Nor can the records move a resource to another region.
    let (code, _, err) = s
        .run(
            bucket_fleet("moves-a"),
            &cloud,
            &[
                "state",
                "mv",
                "moves-a",
                "aws/objectStore/moves-a (us-east-1)",
            ],
        )
        .await;
    assert_eq!(code, 1);
    assert!(
        err.contains("stays with its provider and in its region"),
        "{err}"
    );
    assert_eq!(records(&s).load_ledger("moves").unwrap(), before);
}

/// A cloud in which one resource was renamed outside this tool, keeping its handle (as
/// an EC2 instance's `Name` tag is changed in the console): `list` shows it by its new
/// name; everything else reaches the simulated cloud unchanged.
struct RenamedInCloud {
    from: &'static str,
    to: &'static str,
}

#[async_trait]
impl Layer for RenamedInCloud {
    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        let answer = next.run(call).await?;
        match (call, answer) {
            (
                Call::List {
                    kind: "awsInstance",
                    ..
                },
                Answer::List(mut listed),
            ) => {
                for l in &mut listed {
                    if l.name == self.from {
                        l.name = self.to.to_owned();
                    }
                }
                Ok(Answer::List(listed))
            }
            (_, answer) => Ok(answer),
        }
    }
}

fn instance_fleet(name: &str) -> Result<Fleet, CheckReport> {
    let mut f = Fleet::builder("moves");
    let web = f.declare(
        HERE,
        "web",
        SecurityGroup {
            description: "web".into(),
            vpc_id: infra_core::prelude::Partial::Unknown,
            ingress: Expr::lit([Rule::tcp(443, "0.0.0.0/0")].into()),
            egress: infra_core::prelude::Partial::Unknown,
            tags: infra_core::prelude::Partial::Unknown,
        },
    );
    f.declare(
        HERE,
        name,
        AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Micro), web),
    );
    f.build()
}

#[tokio::test]
async fn state_mv_follows_a_rename_made_in_the_cloud_without_a_recreate() {
    let cloud = support::cloud(44);
    let mut s = answering(false, true);
    applied(&cloud, &mut s, instance_fleet("web-1")).await;
    let handle = cloud.find("aws", "awsInstance", "web-1").remove(0).handle;
    let renamed = || {
        Backends::new().with(Layered::wrap(
            cloud.backend("aws"),
            RenamedInCloud {
                from: "web-1",
                to: "web-2",
            },
        ))
    };

    // Without the move, the old row reads as gone and the renamed instance as a
    // stranger found in place.
    let (code, out, _) = s
        .run_on(instance_fleet("web-2"), renamed(), &["plan"])
        .await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("aws/awsInstance/web-1 (eu-west-3)  prune"),
        "{out}"
    );

    let (code, out, err) = s
        .run_on(
            instance_fleet("web-2"),
            renamed(),
            &["state", "mv", "web-1", "web-2"],
        )
        .await;
    assert_eq!(code, 0, "{err}");
    insta::assert_snapshot!("state_mv", out);
    let store = records(&s);
    let ledger = store.load_ledger("moves").unwrap();
    assert!(ledger.rows.contains(&row("awsInstance", "web-2")));
    assert!(!ledger.rows.contains(&row("awsInstance", "web-1")));
    let cache = store.load_cache("moves", "aws", "awsInstance").unwrap();
    assert_eq!(cache.len(), 1);
    assert_eq!(
        (cache[0].name.as_str(), cache[0].handle.as_str()),
        ("web-2", handle.as_str())
    );

    // The declaration of web-2 finds the same instance: no create, no delete.
    let (code, out, _) = s
        .run_on(
            instance_fleet("web-2"),
            renamed(),
            &["plan", "--detailed-exitcode"],
        )
        .await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("No changes"), "{out}");
    let (code, out, _) = s
        .run_on(
            instance_fleet("web-2"),
            renamed(),
            &["apply", "--yes", "--json"],
        )
        .await;
    assert_eq!(code, 0);
    let result = json(&out);
    assert_eq!(result["applied"].as_array().unwrap().len(), 2);
    assert_eq!(cloud.count("aws", "awsInstance"), 1);
    assert!(cloud.resource(&handle).is_some());
}

#[tokio::test]
async fn graph_prints_the_dependency_graph_as_dot() {
    let cloud = support::cloud(45);
    let mut s = answering(false, true);
    cloud.clear_calls();
    let (code, out, _) = s.run(fleet(true), &cloud, &["graph"]).await;
    assert_eq!(code, 0);
    assert!(cloud.calls().is_empty(), "graph alone reaches no cloud");
    insta::assert_snapshot!("graph", out);

    let (code, out, _) = s.run(fleet(true), &cloud, &["graph", "--plan"]).await;
    assert_eq!(code, 0);
    insta::assert_snapshot!("graph_plan_before_apply", out);

    applied(&cloud, &mut s, fleet(true)).await;
    let (code, out, _) = s.run(fleet(false), &cloud, &["graph", "--plan"]).await;
    assert_eq!(code, 0);
    insta::assert_snapshot!("graph_plan_without_the_bucket", out);

    // Nothing to look with: every node unknown, and the run says so and exits 1.
    let mut fresh = answering(false, true);
    let (code, out, err) = fresh
        .run_on(fleet(true), Backends::new(), &["graph", "--plan"])
        .await;
    assert_eq!(code, 1);
    assert!(out.contains("unknown (no-binding)"), "{out}");
    assert!(!out.contains("palegreen"), "{out}");
    assert!(err.contains("the plan is incomplete: 4 resources"), "{err}");
}

/// What a Terraform-managed estate left in the cloud: a bucket and a queue nobody
/// marked, a secret another fleet owns.
fn terraformed_cloud(seed: u64) -> SimCloud {
    let cloud = support::cloud(seed);
    cloud
        .insert_foreign(
            "aws",
            "objectStore",
            "eu-west-3",
            "tf-assets",
            RawTags::new(),
        )
        .unwrap();
    let queue = serde_json::json!({"fifo": false})
        .as_object()
        .unwrap()
        .clone();
    cloud
        .insert_foreign_with(
            "aws",
            "queues",
            "eu-west-3",
            "tf-jobs",
            queue,
            RawTags::new(),
        )
        .unwrap();
    let billing = RawTags::from([("managed-by-infra".to_owned(), "billing".to_owned())]);
    cloud
        .insert_foreign("aws", "secrets", "eu-west-3", "tf-api-key", billing)
        .unwrap();
    cloud
}

const LEGACY: &str = "tests/fixtures/legacy.tfstate";

fn imported_fleet(declared: bool) -> Result<Fleet, CheckReport> {
    let mut f = Fleet::builder("tf");
    f.declare(HERE, "tf-home", ObjectStore::new());
    if declared {
        f.declare(HERE, "tf-assets", ObjectStore::new());
        f.declare(
            HERE,
            "tf-jobs",
            Queues {
                fifo: Expr::lit(false),
                visibility_timeout_seconds: infra_core::prelude::Partial::Unknown,
                retention_seconds: infra_core::prelude::Partial::Unknown,
                dead_letter: infra_core::prelude::Partial::Unknown,
                max_receive_count: infra_core::prelude::Partial::Unknown,
                tags: infra_core::prelude::Partial::Unknown,
            },
        );
    }
    f.build()
}

#[tokio::test]
async fn import_tfstate_takes_over_what_exists_and_is_nobody_elses() {
    let cloud = terraformed_cloud(46);
    let mut s = answering(false, true);

    // No terminal, no --yes: the list, a refusal, and nothing touched.
    let (code, out, err) = s
        .run(imported_fleet(false), &cloud, &["import-tfstate", LEGACY])
        .await;
    assert_eq!(code, 1);
    insta::assert_snapshot!("import_list", out);
    assert!(err.contains("no terminal to ask on"), "{err}");
    assert!(cloud.writes().is_empty());
    assert!(records(&s).load_ledger("tf").unwrap().is_empty());

    let (code, out, err) = s
        .run(
            imported_fleet(false),
            &cloud,
            &["import-tfstate", LEGACY, "--yes"],
        )
        .await;
    assert_eq!(code, 0, "{err}");
    insta::assert_snapshot!("import_yes", out);

    // The records hold the two rows, marked discovered until declared; the cloud
    // resources carry the marker; the other fleet's secret is untouched.
    let ledger = records(&s).load_ledger("tf").unwrap();
    let rows = [row("objectStore", "tf-assets"), row("queues", "tf-jobs")];
    assert_eq!(ledger.rows, rows.iter().cloned().collect());
    assert_eq!(ledger.discovered, ledger.rows);
    for (kind, name) in [("objectStore", "tf-assets"), ("queues", "tf-jobs")] {
        let r = cloud.find("aws", kind, name).remove(0);
        assert_eq!(r.raw_tags["managed-by-infra"], "tf", "{kind} {name}");
    }
    let secret = cloud.find("aws", "secrets", "tf-api-key").remove(0);
    assert_eq!(secret.raw_tags["managed-by-infra"], "billing");
    assert_eq!(cloud.writes().len(), 2, "one mark each, nothing else");

    // Until declared, an apply does not delete them unless confirmed by name.
    let (code, _, _) = s
        .run(imported_fleet(false), &cloud, &["apply", "--yes"])
        .await;
    assert_eq!(code, 1, "the unconfirmed deletes are not attempted");
    assert_eq!(cloud.count("aws", "queues"), 1);

    // Declared: the plan creates nothing and deletes nothing.
    let (code, out, _) = s
        .run(imported_fleet(true), &cloud, &["plan", "--json"])
        .await;
    assert_eq!(code, 0, "{out}");
    let plan = json(&out);
    for change in plan["changes"].as_array().unwrap() {
        let name = change["resource"]["name"].as_str().unwrap();
        if name.starts_with("tf-") && name != "tf-home" {
            let action = change["action"].as_str().unwrap();
            assert!(
                ["unchanged", "update"].contains(&action),
                "{name}: {action}"
            );
        }
    }
    let (code, _, _) = s
        .run(imported_fleet(true), &cloud, &["apply", "--yes"])
        .await;
    assert_eq!(code, 0);
    assert!(records(&s).load_ledger("tf").unwrap().discovered.is_empty());
    assert_eq!(cloud.count("aws", "objectStore"), 2);
    assert_eq!(cloud.count("aws", "queues"), 1);

    // Run again: what is in the records already is left alone.
    let (code, out, _) = s
        .run(
            imported_fleet(true),
            &cloud,
            &["import-tfstate", LEGACY, "--json"],
        )
        .await;
    assert_eq!(code, 0);
    let outcome = json(&out);
    assert_eq!(outcome["importTfstate"], "v1");
    assert_eq!(
        outcome["resources"][1]["reason"],
        "it is in this fleet's records already"
    );
}

#[tokio::test]
async fn import_tfstate_asks_one_resource_at_a_time() {
    let cloud = terraformed_cloud(47);
    let mut s = session(true, Box::new(|q| q.contains("tf-assets")));
    let (code, out, err) = s
        .run(
            imported_fleet(false),
            &cloud,
            &["import-tfstate", LEGACY, "--json"],
        )
        .await;
    assert_eq!(code, 0, "{err}");
    let questions = s.questions.lock().unwrap().clone();
    assert_eq!(
        questions,
        [
            "Take over aws_s3_bucket.assets as aws/objectStore/tf-assets (eu-west-3), putting managed-by-infra=tf on it?",
            "Take over aws_sqs_queue.jobs as aws/queues/tf-jobs (eu-west-3), putting managed-by-infra=tf on it?",
        ]
    );
    let outcome = json(&out);
    let status = |i: usize| {
        outcome["resources"][i]["status"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        (0..7).map(status).collect::<Vec<_>>(),
        [
            "not-imported",
            "imported",
            "declined",
            "not-imported",
            "not-imported",
            "not-imported",
            "not-imported"
        ]
    );
    assert_eq!(
        outcome["resources"][1]["declaration"],
        "fleet.declare(AwsRegion::EuWest3, \"tf-assets\", ObjectStore::new());"
    );
    assert_eq!(outcome["resources"][1]["markedNow"], true);
    assert_eq!(records(&s).load_ledger("tf").unwrap().len(), 1);
    let queue = cloud.find("aws", "queues", "tf-jobs").remove(0);
    assert!(!queue.raw_tags.contains_key("managed-by-infra"));
}

#[tokio::test]
async fn import_tfstate_leaves_out_what_the_provider_cannot_mark() {
    let cloud = terraformed_cloud(48);
    let mut s = answering(false, true);
    // A backend that does not implement `mark`: the default refuses.
    let unmarking = Backends::new().with(Altered::new(
        cloud.backend("aws"),
        "queues",
        Alteration::CannotMark,
    ));
    let (code, out, _) = s
        .run_on(
            imported_fleet(false),
            unmarking,
            &["import-tfstate", LEGACY, "--yes"],
        )
        .await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("not imported: it could not be marked: invalid: the aws provider cannot put an ownership marker on an existing objectStore"),
        "{out}"
    );
    assert!(records(&s).load_ledger("tf").unwrap().is_empty());
    assert!(cloud.writes().is_empty());
}

#[tokio::test]
async fn a_state_file_that_is_not_a_version_4_state_is_refused_with_its_line() {
    let cloud = terraformed_cloud(49);
    let mut s = answering(false, true);
    for (file, expected) in [
        (
            "tests/fixtures/malformed.tfstate",
            "tests/fixtures/malformed.tfstate:5:",
        ),
        (
            "tests/fixtures/version3.tfstate",
            "tests/fixtures/version3.tfstate:2: Terraform state version 3",
        ),
        (
            "tests/fixtures/missing.tfstate",
            "tests/fixtures/missing.tfstate: No such file",
        ),
    ] {
        let (code, out, err) = s
            .run(
                imported_fleet(false),
                &cloud,
                &["import-tfstate", file, "--yes"],
            )
            .await;
        assert_eq!((code, out.as_str()), (1, ""), "{file}");
        assert!(err.contains(expected), "{file}: {err}");
    }
    assert!(cloud.writes().is_empty());
}
