//! The simulated cloud behaves as its table of what each real cloud does says, and no
//! kinder: unreported fields are absent from `read`, a change the cloud cannot make is
//! refused with nothing applied, Lambda reports a digest of its code. The table covers
//! every field, and every kind's divergence table agrees with it.

use std::collections::BTreeSet;

use infra_core::kinds::*;
use infra_core::{
    engine::{MapEnv, settle},
    prelude::{AwsRegion, Expr, Fleet, Key, Kind, Partial, ScalewayRegion, Spec},
    sdk::{Backend, BackendError, ErrorKind, FieldInfo, Marker, Mutability, SettledSpec, Sighting},
};
use infra_testkit::sim::clouds::{self, Change, ROWS, Read};
use infra_testkit::sim::{Op, Outcome, SimCloud};
use serde_json::{Value, json};

const PARIS: &str = "eu-west-3";
const BELGIUM: &str = "europe-west1";

async fn create<K: Kind>(
    backend: &dyn Backend,
    region: &str,
    name: &str,
    spec: &K,
    env: &MapEnv,
) -> Result<Sighting, BackendError> {
    let settled = settle(spec, env).expect("the spec settles");
    let spec = SettledSpec::new::<K>(&settled);
    backend
        .create(K::ID, region, name, spec, &Marker::new("shop"))
        .await
        .map(|w| w.expect_done("the simulated cloud writes at once"))
}

async fn update<K: Kind>(
    backend: &dyn Backend,
    region: &str,
    handle: &str,
    spec: &K,
    env: &MapEnv,
) -> Result<Sighting, BackendError> {
    let settled = settle(spec, env).expect("the spec settles");
    backend
        .update(K::ID, region, handle, SettledSpec::new::<K>(&settled))
        .await
        .map(|w| w.expect_done("the simulated cloud writes at once"))
}

fn known<T: infra_core::prelude::Value>(value: T) -> Partial<Expr<T>> {
    Partial::Known(Expr::lit(value))
}

fn queue(fifo: bool) -> Queues {
    Queues {
        fifo: Expr::lit(fifo),
        visibility_timeout_seconds: known(45),
        retention_seconds: Partial::Unknown,
        dead_letter: Partial::Known(None),
        max_receive_count: known(4),
        tags: Partial::Unknown,
    }
}

fn function(code: &str, digest: Option<String>) -> Compute {
    Compute {
        runtime: Expr::lit("python3.12".to_owned()),
        handler: Expr::lit("app.handler".to_owned()),
        code: Expr::lit(code.to_owned()),
        code_sha256: digest.map_or(Partial::Unknown, known),
        memory_mb: known(256),
        timeout_seconds: Partial::Unknown,
        environment: Partial::Unknown,
        secret_environment: Partial::Unknown,
        role: None,
        tags: Partial::Unknown,
        access: Access::Private.into(),
    }
}

/// Asserts that an update was refused as the cloud refuses it: `Invalid` with the
/// given code, the resource as it was, no write, and the call logged as failed.
fn assert_refused(
    cloud: &SimCloud,
    result: Result<Sighting, BackendError>,
    handle: &str,
    before: &infra_testkit::sim::SimResource,
    code: &str,
) {
    let err = result.expect_err("the cloud refuses the update");
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    assert_eq!(err.code.as_deref(), Some(code), "{err}");
    assert!(!err.may_have_been_sent);
    assert_eq!(
        cloud.resource(handle).as_ref(),
        Some(before),
        "nothing applied"
    );
    assert!(
        cloud.writes().iter().all(|c| c.op != Op::Update),
        "a refused update is no write"
    );
    let last = cloud.calls().pop().unwrap();
    assert_eq!(last.op, Op::Update);
    assert_eq!(last.outcome, Outcome::Failed(ErrorKind::Invalid));
    assert!(!last.applied);
}

#[tokio::test]
async fn a_pubsub_queue_reports_delivery_settings_only_with_a_subscription() {
    let cloud = SimCloud::new(1);
    let gcp = cloud.backend("gcp");
    let env = MapEnv::new();
    // A topic alone: no delivery setting was asked for, so there is no subscription.
    let bare = Queues {
        visibility_timeout_seconds: Partial::Unknown,
        max_receive_count: Partial::Unknown,
        ..queue(false)
    };
    let created = create(&*gcp, BELGIUM, "events", &bare, &env).await.unwrap();
    let read = gcp.read("queues", BELGIUM, &created.handle).await.unwrap();
    for sighting in [&created, &read] {
        let reported = sighting.reported();
        for field in [
            "visibilityTimeoutSeconds",
            "fifo",
            "deadLetter",
            "maxReceiveCount",
        ] {
            assert!(!reported.contains_key(field), "{field} in {reported:?}");
        }
        // Unsaid, a topic keeps no messages: there is no retention to report either.
        assert!(!reported.contains_key("retentionSeconds"), "{reported:?}");
        assert!(reported.contains_key("tags"));
    }
    // An ack deadline asks for a subscription: its settings are reported, the delivery
    // count only with a dead-letter policy.
    let jobs = create(&*gcp, BELGIUM, "jobs", &queue(false), &env)
        .await
        .unwrap();
    let reported = jobs.reported();
    assert_eq!(reported["visibilityTimeoutSeconds"], json!(45));
    assert_eq!(reported["fifo"], json!(false));
    assert_eq!(reported["deadLetter"], Value::Null);
    assert!(!reported.contains_key("maxReceiveCount"), "{reported:?}");
    // The world still holds what was asked, as the backend sent it.
    let stored = cloud.resource(&jobs.handle).unwrap();
    assert_eq!(stored.config["maxReceiveCount"], json!(4));

    // SQS does report a visibility timeout, and the redrive count only with a policy.
    let aws = cloud.backend("aws");
    let sqs = create(&*aws, PARIS, "jobs", &queue(false), &env)
        .await
        .unwrap();
    assert_eq!(sqs.reported()["visibilityTimeoutSeconds"], json!(45));
    assert_eq!(sqs.reported()["retentionSeconds"], json!(345_600));
    assert!(!sqs.reported().contains_key("maxReceiveCount"));
    let mut fleet = Fleet::builder("shop");
    let dead: Key<Queues> = fleet.declare(AwsRegion::EuWest3, "dead", queue(false));
    let mut env = MapEnv::new();
    env.set_handle(dead.id(), &sqs.handle);
    let with_dead_letter = Queues {
        dead_letter: Partial::Known(Some(dead)),
        ..queue(false)
    };
    let redriven = create(&*aws, PARIS, "work", &with_dead_letter, &env)
        .await
        .unwrap();
    assert_eq!(redriven.reported()["maxReceiveCount"], json!(4));
}

#[tokio::test]
async fn changing_a_create_only_field_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.json");
    let cloud = SimCloud::open(&path).unwrap();
    let aws = cloud.backend("aws");
    let env = MapEnv::new();
    let created = create(&*aws, PARIS, "jobs", &queue(false), &env)
        .await
        .unwrap();
    let handle = created.handle.clone();
    let before = cloud.resource(&handle).unwrap();
    let saved = std::fs::read_to_string(&path).unwrap();
    cloud.clear_calls();

    // FIFO and a new visibility timeout and tags in one update: all or nothing.
    let changed = Queues {
        visibility_timeout_seconds: known(90),
        tags: known(Tags::from([("team".to_owned(), "ops".to_owned())])),
        ..queue(true)
    };
    let result = update(&*aws, PARIS, &handle, &changed, &env).await;
    assert_refused(&cloud, result, &handle, &before, "InvalidAttributeName");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), saved, "not saved");
    let read = aws.read("queues", PARIS, &handle).await.unwrap();
    assert_eq!(read.reported(), created.reported());

    // The same update without the FIFO change goes through.
    let allowed = Queues {
        fifo: Expr::lit(false),
        ..changed
    };
    let updated = update(&*aws, PARIS, &handle, &allowed, &env).await.unwrap();
    assert_eq!(updated.reported()["visibilityTimeoutSeconds"], json!(90));
    assert_eq!(cloud.writes().len(), 1);
}

#[tokio::test]
async fn a_security_group_keeps_its_description_and_an_instance_its_launch() {
    let cloud = SimCloud::new(2);
    let aws = cloud.backend("aws");
    let mut env = MapEnv::new();
    let group = SecurityGroup {
        description: Expr::lit("web".to_owned()),
        vpc_id: Partial::Unknown,
        ingress: Expr::lit(BTreeSet::from([Rule::tcp(443, "0.0.0.0/0")])),
        egress: Partial::Unknown,
        tags: Partial::Unknown,
    };
    let sg = create(&*aws, PARIS, "web", &group, &env).await.unwrap();
    let before = cloud.resource(&sg.handle).unwrap();
    let renamed = SecurityGroup {
        description: Expr::lit("web servers".to_owned()),
        ..group.clone()
    };
    let result = update(&*aws, PARIS, &sg.handle, &renamed, &env).await;
    assert_refused(&cloud, result, &sg.handle, &before, "OperationNotPermitted");

    let mut fleet = Fleet::builder("shop");
    let key = fleet.declare(AwsRegion::EuWest3, "web", group);
    env.set_handle(key.id(), &sg.handle);
    let instance = AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Micro), key);
    let i = create(&*aws, PARIS, "web-1", &instance, &env)
        .await
        .unwrap();
    // `latest` asks for nothing once launched: a tag update goes through.
    let tagged = AwsInstance {
        tags: known(Tags::from([("role".to_owned(), "web".to_owned())])),
        ..instance.clone()
    };
    update(&*aws, PARIS, &i.handle, &tagged, &env)
        .await
        .unwrap();
    let before = cloud.resource(&i.handle).unwrap();
    let bigger = AwsInstance {
        instance_type: Expr::lit(InstanceType::T3(BurstableSize::Small)),
        ..tagged
    };
    cloud.clear_calls();
    let result = update(&*aws, PARIS, &i.handle, &bigger, &env).await;
    assert_refused(&cloud, result, &i.handle, &before, "IncorrectInstanceState");
}

#[tokio::test]
async fn a_database_changes_class_in_place_but_never_shape_nor_user_nor_shrinks() {
    let cloud = SimCloud::new(3);
    let aws = cloud.backend("aws");
    let mut fleet = Fleet::builder("shop");
    let password = fleet.declare(AwsRegion::EuWest3, "pw", Secrets::generated(16));
    let mut env = MapEnv::new();
    let secret = create(&*aws, PARIS, "pw", &Secrets::generated(16), &env)
        .await
        .unwrap();
    env.set_handle(password.id(), &secret.handle);
    let classic = Postgres {
        storage_gb: known(100),
        ..Postgres::classic(PostgresClassic {
            engine_version: "16",
            instance_class: "db.t4g.micro",
            master_username: "admin",
            master_password: password,
        })
    };
    let db = create(&*aws, PARIS, "orders", &classic, &env)
        .await
        .unwrap();
    let handle = db.handle.clone();
    // RDS never reports a password, nor where it came from.
    assert!(!db.reported().contains_key("masterPassword"));
    cloud.clear_calls();

    let cases: [(Postgres, &str); 3] = [
        (
            Postgres {
                storage_gb: Partial::Unknown,
                ..Postgres::serverless(PostgresServerless {
                    engine_version: "16",
                    min_capacity: Acu::halves(1),
                    max_capacity: Acu::whole(4),
                    master_username: "admin",
                    master_password: password,
                })
            },
            "InvalidParameterCombination",
        ),
        (
            Postgres::classic(PostgresClassic {
                engine_version: "16",
                instance_class: "db.t4g.micro",
                master_username: "root",
                master_password: password,
            }),
            "InvalidParameterValue",
        ),
        (
            Postgres {
                storage_gb: known(50),
                ..classic.clone()
            },
            "InvalidParameterCombination",
        ),
    ];
    for (asked, code) in cases {
        let before = cloud.resource(&handle).unwrap();
        let result = update(&*aws, PARIS, &handle, &asked, &env).await;
        assert_refused(&cloud, result, &handle, &before, code);
    }

    let larger = Postgres {
        storage_gb: known(200),
        ..Postgres::classic(PostgresClassic {
            engine_version: "16",
            instance_class: "db.t4g.large",
            master_username: "admin",
            master_password: password,
        })
    };
    let updated = update(&*aws, PARIS, &handle, &larger, &env).await.unwrap();
    let large = Capacity::Classic {
        instance_class: "db.t4g.large".to_owned(),
    };
    assert_eq!(
        updated.reported()["capacity"],
        serde_json::to_value(large).unwrap()
    );
    assert_eq!(updated.reported()["storageGb"], json!(200));
    assert_eq!(updated.handle, handle);

    // A serverless database has no allocated storage to report, and resizes its range.
    let serverless = Postgres::serverless(PostgresServerless {
        engine_version: "16",
        min_capacity: Acu::halves(1),
        max_capacity: Acu::whole(2),
        master_username: "admin",
        master_password: password,
    });
    let aurora = create(&*aws, PARIS, "events", &serverless, &env)
        .await
        .unwrap();
    assert!(!aurora.reported().contains_key("storageGb"));
    let wider = Postgres::serverless(PostgresServerless {
        engine_version: "16",
        min_capacity: Acu::halves(1),
        max_capacity: Acu::whole(8),
        master_username: "admin",
        master_password: password,
    });
    let resized = update(&*aws, PARIS, &aurora.handle, &wider, &env)
        .await
        .unwrap();
    assert_eq!(resized.reported()["capacity"]["maxCapacity"], json!(8.0));
}

#[tokio::test]
async fn lambda_reports_the_digest_of_its_code_and_other_clouds_none() {
    let cloud = SimCloud::new(4);
    let aws = cloud.backend("aws");
    let env = MapEnv::new();
    let code = "s3://artifacts/app.zip";

    // Undeclared: derived from the artifact, on create and again on every update.
    let created = create(&*aws, PARIS, "app", &function(code, None), &env)
        .await
        .unwrap();
    assert_eq!(
        created.reported()["codeSha256"],
        json!(code_digest(code.as_bytes()))
    );
    assert!(!created.reported().contains_key("code"));
    let moved = "s3://artifacts/app-2.zip";
    let updated = update(&*aws, PARIS, &created.handle, &function(moved, None), &env)
        .await
        .unwrap();
    assert_eq!(
        updated.reported()["codeSha256"],
        json!(code_digest(moved.as_bytes()))
    );

    // Declared: the declared digest, on update as on create.
    let declared = code_digest(b"the artifact's bytes");
    let pinned = update(
        &*aws,
        PARIS,
        &created.handle,
        &function(moved, Some(declared.clone())),
        &env,
    )
    .await
    .unwrap();
    assert_eq!(pinned.reported()["codeSha256"], json!(declared));
    let other = create(
        &*aws,
        PARIS,
        "other",
        &function(code, Some(declared.clone())),
        &env,
    )
    .await
    .unwrap();
    assert_eq!(other.reported()["codeSha256"], json!(declared));

    // Cloud Functions and Scaleway Functions report no digest, declared or not.
    for (provider, region) in [("gcp", BELGIUM), ("scaleway", "fr-par")] {
        let backend = cloud.backend(provider);
        for (name, digest) in [("plain", None), ("pinned", Some(declared.clone()))] {
            let f = create(&*backend, region, name, &function(code, digest), &env)
                .await
                .unwrap();
            assert!(
                !f.reported().contains_key("codeSha256"),
                "{provider}: {:?}",
                f.reported()
            );
            let read = backend.read("compute", region, &f.handle).await.unwrap();
            assert!(!read.reported().contains_key("codeSha256"));
        }
    }
}

#[tokio::test]
async fn a_scaleway_function_cannot_change_namespace() {
    let cloud = SimCloud::new(5);
    let scw = cloud.backend("scaleway");
    let mut fleet = Fleet::builder("shop");
    let namespace = FunctionNamespace {
        description: Partial::Unknown,
        environment: Partial::Unknown,
        secret_environment: Partial::Unknown,
        tags: Partial::Unknown,
    };
    let first = fleet.declare(ScalewayRegion::FrPar, "a", namespace.clone());
    let second = fleet.declare(ScalewayRegion::FrPar, "b", namespace.clone());
    let mut env = MapEnv::new();
    for (key, name) in [(first, "a"), (second, "b")] {
        let ns = create(&*scw, "fr-par", name, &namespace, &env)
            .await
            .unwrap();
        env.set_handle(key.id(), &ns.handle);
    }
    let spec = |namespace| Function {
        namespace,
        runtime: Expr::lit("python311".to_owned()),
        handler: Expr::lit("handler.handle".to_owned()),
        memory_mb: Partial::Unknown,
        min_scale: Partial::Unknown,
        max_scale: Partial::Unknown,
        timeout_seconds: Partial::Unknown,
        source_bucket: Partial::Known(None),
        code: Partial::Unknown,
        environment: Partial::Unknown,
        access: Access::Private.into(),
    };
    let f = create(&*scw, "fr-par", "hello", &spec(first), &env)
        .await
        .unwrap();
    assert!(!f.reported().contains_key("sourceBucket"));
    cloud.clear_calls();
    let before = cloud.resource(&f.handle).unwrap();
    let result = update(&*scw, "fr-par", &f.handle, &spec(second), &env).await;
    assert_refused(&cloud, result, &f.handle, &before, "invalid_arguments");
}

// ---- the table against the kinds ----

fn fields(kind: &str) -> &'static [FieldInfo] {
    match kind {
        "iam" => Iam::FIELDS,
        "objectStore" => ObjectStore::FIELDS,
        "compute" => Compute::FIELDS,
        "queues" => Queues::FIELDS,
        "secrets" => Secrets::FIELDS,
        "imageRegistry" => ImageRegistry::FIELDS,
        "postgres" => Postgres::FIELDS,
        "s3Bucket" => S3Bucket::FIELDS,
        "securityGroup" => SecurityGroup::FIELDS,
        "awsInstance" => AwsInstance::FIELDS,
        "functionNamespace" => FunctionNamespace::FIELDS,
        "function" => Function::FIELDS,
        "containerNamespace" => ContainerNamespace::FIELDS,
        "container" => Container::FIELDS,
        other => panic!("no built-in kind {other}"),
    }
}

/// Every (provider, kind) the simulator realises.
fn realised() -> Vec<(&'static str, &'static str)> {
    let cloud = SimCloud::new(0);
    ["aws", "gcp", "scaleway"]
        .into_iter()
        .flat_map(|p| {
            let kinds = cloud.backend(p).capabilities().kinds;
            kinds.into_iter().map(move |k| (p, k))
        })
        .collect()
}

#[test]
fn every_field_of_every_realised_kind_has_a_row() {
    let mut missing = Vec::new();
    let mut rows = std::collections::BTreeMap::<&str, usize>::new();
    for (provider, kind) in realised() {
        for field in fields(kind) {
            match clouds::behaviour(provider, kind, field.name) {
                Some(_) => *rows.entry(provider).or_default() += 1,
                None => missing.push(format!("{provider} {kind} {}", field.name)),
            }
        }
    }
    assert!(missing.is_empty(), "fields without a row: {missing:#?}");
    // `access` on compute (every provider), function and container (Scaleway) included.
    assert_eq!(rows["aws"], 53, "{rows:?}");
    assert_eq!(rows["gcp"], 37, "{rows:?}");
    assert_eq!(rows["scaleway"], 67, "{rows:?}");
}

#[test]
fn every_field_the_table_names_is_a_field_of_its_kind() {
    let realised = realised();
    for row in ROWS {
        for kind in row.kinds {
            assert!(
                row.providers
                    .iter()
                    .any(|p| realised.contains(&(*p, *kind))),
                "a row speaks of {kind} for {:?}, which realise no such kind",
                row.providers
            );
            let names: Vec<_> = fields(kind).iter().map(|f| f.name).collect();
            for field in row.fields {
                assert!(names.contains(field), "{kind} has no field {field}");
            }
        }
    }
}

/// Values of a field's own shape to try its changes with, for the fields whose rows
/// refuse only some changes.
fn shaped_values(field: &str) -> Option<Vec<Value>> {
    Some(match field {
        "capacity" => [
            Capacity::Classic {
                instance_class: "db.t4g.micro".to_owned(),
            },
            Capacity::Classic {
                instance_class: "db.t4g.large".to_owned(),
            },
            Capacity::Serverless {
                min_capacity: Acu::halves(1),
                max_capacity: Acu::whole(2),
            },
            Capacity::Serverless {
                min_capacity: Acu::whole(1),
                max_capacity: Acu::whole(8),
            },
        ]
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect(),
        "storageGb" => vec![json!(20), json!(100)],
        "objectLock" => vec![json!(false), json!(true)],
        _ => return None,
    })
}

/// The point of the table: a change a cloud refuses must never be planned as an
/// update by the kind's divergence table (its mutability, and its `replace_when` test).
/// Every such pair is listed; a listed one is a bug in the kind's table.
#[test]
fn no_kind_plans_in_place_a_change_a_cloud_refuses() {
    let mut mismatches = Vec::new();
    let mut partial_rules_tried = 0;
    for (provider, kind) in realised() {
        for info in fields(kind) {
            let row = clouds::behaviour(provider, kind, info.name).expect("covered");
            let partial = matches!(row.change, Change::InPlaceUnless(..));
            let values = match shaped_values(info.name) {
                Some(values) => values,
                None if partial => panic!(
                    "{provider} {kind}.{}: give this test values to try its changes with",
                    info.name
                ),
                // Any change of a field refused or allowed whole: two values will do.
                None => vec![json!("a"), json!("b")],
            };
            for before in &values {
                for after in values.iter().filter(|v| *v != before) {
                    if row.change.refusal(Some(before), after).is_none() {
                        continue;
                    }
                    if partial {
                        partial_rules_tried += 1;
                    }
                    if info.repair_of_change(before, after) == Mutability::Mutable {
                        mismatches.push(format!(
                            "{provider} {kind}.{}: {before} -> {after} is refused by the cloud \
                             but planned in place",
                            info.name
                        ));
                    }
                }
            }
        }
    }
    assert!(partial_rules_tried > 0, "no partial rule was tried");
    assert!(
        mismatches.is_empty(),
        "kind tables that plan an update the cloud refuses:\n{}",
        mismatches.join("\n")
    );
}

#[test]
fn unreported_fields_are_never_compared_so_never_create_only() {
    // A field no read reports can never be seen to differ: a refusal on it could never
    // be planned around. The table has none.
    for row in ROWS {
        if matches!(row.read, Read::Unreported) {
            assert!(
                matches!(row.change, Change::InPlace),
                "{:?} {:?} {:?}",
                row.providers,
                row.kinds,
                row.fields
            );
        }
    }
}

// ---- what the honest table shows of the engine ----

/// RDS never reports a master password, nor which secret it came from (the AWS
/// backend's `read` leaves `masterPassword` unknown). When the password's secret is
/// renamed, a new secret (with a new generated value) is created and the old one
/// deleted: the database must be pointed at the new one, or it keeps a password that no
/// secret holds any more. The engine finds updates only by comparing reported fields,
/// so it never updates the database here; the simulator, which keeps the reference,
/// then refuses to delete the old secret (on AWS the delete would go through, and the
/// drift would be silent).
#[tokio::test]
async fn a_renamed_password_secret_reaches_the_database_that_reads_it() {
    use std::sync::Arc;

    use infra_core::engine::{Engine, MemoryStore, Options};

    let declare = |secret_name: &str| {
        let mut fleet = Fleet::builder("shop");
        let password = fleet.declare(AwsRegion::EuWest3, secret_name, Secrets::generated(16));
        fleet.declare(
            AwsRegion::EuWest3,
            "orders",
            Postgres::classic(PostgresClassic {
                engine_version: "16",
                instance_class: "db.t4g.micro",
                master_username: "admin",
                master_password: password,
            }),
        );
        fleet.build().expect("the fleet is sound")
    };
    let cloud = SimCloud::new(6);
    let engine =
        Engine::new(cloud.backends(), Arc::new(MemoryStore::new())).with_clock(cloud.clock());
    let first = engine
        .apply(&declare("pw").plan(), &Options::default())
        .await
        .unwrap();
    assert!(first.result.is_success(), "{:#?}", first.result);

    let renamed = engine
        .apply(&declare("pw-v2").plan(), &Options::default())
        .await
        .unwrap();
    assert!(renamed.result.is_success(), "{:#?}", renamed.result);
    let secret = &cloud.find("aws", "secrets", "pw-v2")[0];
    let db = &cloud.find("aws", "postgres", "orders")[0];
    assert_eq!(db.config["masterPassword"], json!(secret.handle));
}
