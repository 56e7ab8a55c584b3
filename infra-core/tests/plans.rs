//! Plans: totality, teardown order, merge of writers, settling.

use infra_core::kinds::*;
use infra_core::{
    engine::{MapEnv, Plan, settle},
    interp,
    prelude::{AwsRegion, Expr, Fleet, Partial, SecretString, Status, compose_secret},
    sdk::{Dep, NotYet, Nothing},
};

fn group() -> SecurityGroup {
    SecurityGroup {
        description: "web".into(),
        vpc_id: Partial::Unknown,
        ingress: Expr::lit([Rule::tcp(443, "0.0.0.0/0")].into()),
        egress: Partial::Unknown,
        tags: Partial::Unknown,
    }
}

#[test]
fn teardown_keeps_the_declarations_edges() {
    let mut f = Fleet::builder("chain");
    let here = AwsRegion::EuWest3;
    // Declared in an order that is not a build order.
    let web = f.reserve::<_, SecurityGroup>(here, "web");
    let app = f.reserve::<_, AwsInstance>(here, "app");
    f.define(
        app,
        AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Micro), web),
    );
    f.define(web, group());
    let fleet = f.build().unwrap();
    assert_eq!(fleet.build_order(), &[0, 1]);
    let teardown = Plan::absent(&fleet);
    assert_eq!(teardown.build_order().unwrap(), vec![0, 1]);
    assert_eq!(teardown.dependencies(), vec![vec![], vec![0]]);
}

#[test]
fn an_all_unmanaged_plan_does_nothing_and_a_declared_one_does() {
    let mut f = Fleet::builder("quiet");
    f.declare(AwsRegion::EuWest3, "aaa", ObjectStore::new());
    let fleet = f.build().unwrap();
    assert!(Plan::unmanaged(&fleet).does_nothing());
    assert!(!fleet.plan().does_nothing());
    assert!(!Plan::absent(&fleet).does_nothing());
}

#[test]
fn a_plan_refuses_a_key_of_another_fleet() {
    let mut f = Fleet::builder("one");
    f.declare(AwsRegion::EuWest3, "aaa", ObjectStore::new());
    let one = f.build().unwrap();
    let mut g = Fleet::builder("two");
    let b = g.declare(AwsRegion::EuWest3, "bbb", ObjectStore::new());
    g.build().unwrap();
    let err = one.plan().with(b, Status::Absent).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the key does not belong to fleet `one`; use the keys its builder returned"
    );
}

fn versioned(v: bool) -> ObjectStore {
    ObjectStore {
        versioning: Partial::Known(Expr::lit(v)),
        ..ObjectStore::new()
    }
}

#[test]
fn writers_merge_key_by_key_and_a_collision_names_both() {
    let mut f = Fleet::builder("shared");
    let here = AwsRegion::EuWest3;
    let a = f.declare(here, "assets", ObjectStore::new());
    let logs = f.declare(here, "logs", ObjectStore::new());
    let fleet = f.build().unwrap();

    let base = Plan::unmanaged(&fleet)
        .with(a, Status::Present(versioned(true)))
        .unwrap();
    let tags = Plan::unmanaged(&fleet)
        .with(
            a,
            Status::Present(ObjectStore {
                tags: Partial::Known(Expr::lit([("team".to_owned(), "web".to_owned())].into())),
                ..ObjectStore::new()
            }),
        )
        .unwrap()
        .with(logs, Status::Absent)
        .unwrap();
    let merged = base
        .merge("platform", &tags, "web-team")
        .expect("compatible");
    let assets = merged.status(a).unwrap();
    let spec = assets.present().expect("present");
    assert_eq!(spec.versioning, Partial::Known(Expr::lit(true)));
    assert!(spec.tags.known().is_some());
    assert_eq!(merged.status(logs).unwrap().name(), "absent");

    let off = Plan::unmanaged(&fleet)
        .with(a, Status::Present(versioned(false)))
        .unwrap();
    let gone = Plan::unmanaged(&fleet).with(a, Status::Absent).unwrap();
    let conflicts: Vec<String> = [
        Plan::merge_writers(&[
            ("platform", base.clone()),
            ("web-team", tags.clone()),
            ("intern", off),
        ])
        .unwrap_err(),
        Plan::merge_writers(&[("platform", base), ("cleanup", gone)]).unwrap_err(),
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    insta::assert_snapshot!(conflicts.join("\n"));
}

#[test]
fn settling_waits_for_what_does_not_exist_yet() {
    let mut f = Fleet::builder("settle");
    let here = AwsRegion::EuWest3;
    let web = f.declare(here, "web", group());
    let pw = f.declare(here, "pw", Secrets::from_env("PW"));
    let db = f.declare(
        here,
        "db",
        Postgres::classic(PostgresClassic {
            engine_version: "16",
            instance_class: "db.t4g.micro",
            master_username: "app",
            master_password: pw,
        }),
    );
    let endpoint = Expr::observed(db).map(|o: &PostgresObserved| o.endpoint.clone());
    let app = AwsInstance {
        user_data: Partial::Known(interp!("DB={}", endpoint.clone())),
        ..AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Micro), web)
    };
    let url = Secrets::composed(compose_secret!(
        "postgres://app:{}@{}/main",
        Expr::secret(pw),
        endpoint
    ));
    f.declare(here, "app", app.clone());
    f.declare(here, "url", url.clone());
    let fleet = f.build().unwrap();
    assert_eq!(fleet.build_order(), &[0, 1, 2, 3, 4]);

    // Nothing exists: both wait, naming every missing dependency.
    assert_eq!(
        settle(&app, &Nothing).unwrap_err(),
        NotYet {
            missing: vec![Dep::Handle(web.id()), Dep::Observed(db.id())]
        }
    );

    let mut env = MapEnv::new();
    env.set_handle(web.id(), "sg-0123");
    env.set_observed(
        db.id(),
        PostgresObserved {
            id: "db".into(),
            endpoint: "db.example.internal".into(),
            port: 5432,
        },
    );
    let settled = settle(&app, &env).expect("everything exists");
    assert_eq!(settled.security_group.as_str(), "sg-0123");
    assert_eq!(
        settled.user_data,
        Partial::Known("DB=db.example.internal".to_owned())
    );
    assert_eq!(settled.subnet_id, Partial::Unknown);

    // The planning path holds no secrets: the composed secret waits for one.
    assert_eq!(
        settle(&url, &env).unwrap_err(),
        NotYet {
            missing: vec![Dep::Secret(pw.id())]
        }
    );

    // On the apply path it settles, and its value shows nowhere.
    env.set_secret(pw.id(), SecretString::new("sentinel-7f3a"));
    let settled = settle(&url, &env).expect("settles");
    match &settled.value_from {
        SecretSourceSettled::Composed(value) => {
            assert_eq!(
                value.expose(),
                "postgres://app:sentinel-7f3a@db.example.internal/main"
            )
        }
        other => panic!("expected a composed value, got {other:?}"),
    }
    let shown = format!("{settled:?} {}", serde_json::to_string(&settled).unwrap());
    assert!(
        !shown.contains("sentinel-7f3a"),
        "a secret reached a rendering: {shown}"
    );
    let plan = fleet.plan().to_json().to_string();
    assert!(!plan.contains("sentinel-7f3a"));
}

#[test]
fn expressions_list_every_read_and_combine_without_bind() {
    let mut f = Fleet::builder("exprs");
    let here = AwsRegion::EuWest3;
    let pw = f.declare(here, "pw", Secrets::from_env("PW"));
    let db = f.declare(
        here,
        "db",
        Postgres::classic(PostgresClassic {
            engine_version: "16",
            instance_class: "db.t4g.micro",
            master_username: "app",
            master_password: pw,
        }),
    );
    let bucket = f.declare(here, "bucket", ObjectStore::new());
    let host = Expr::observed(db).map(|o: &PostgresObserved| o.endpoint.clone());
    let name = Expr::observed(bucket).map(|o: &ObjectStoreObserved| o.id.clone());
    let both = host.clone().map2(name.clone(), |h, n| format!("{h}/{n}"));
    assert_eq!(
        both.deps(),
        &[Dep::Observed(db.id()), Dep::Observed(bucket.id())]
    );
    let text = interp!("{} and {}", host, name);
    assert_eq!(text.deps(), both.deps());

    // Literal-only combinations stay literals.
    assert_eq!(
        Expr::lit(2u32).map2(Expr::lit(3u32), |a, b| a * b).as_lit(),
        Some(&6)
    );
    assert_eq!(
        interp!("{}-{}", Expr::lit(1u32), Expr::lit("x".to_owned()))
            .as_lit()
            .map(String::as_str),
        Some("1-x")
    );

    // A computed expression equals itself, and no other computation.
    let again = Expr::observed(db).map(|o: &PostgresObserved| o.endpoint.clone());
    assert_eq!(both.clone(), both);
    assert_ne!(
        again,
        Expr::observed(db).map(|o: &PostgresObserved| o.endpoint.clone())
    );
}

#[test]
fn setting_a_target_redraws_the_graph_already_worked_out() {
    let queue = |dead_letter| Queues {
        fifo: Expr::lit(false),
        visibility_timeout_seconds: Partial::Unknown,
        retention_seconds: Partial::Unknown,
        dead_letter: Partial::Known(dead_letter),
        max_receive_count: Partial::Unknown,
        tags: Partial::Unknown,
    };
    let mut f = Fleet::builder("redraw");
    let first = f.declare(AwsRegion::EuWest3, "first", queue(None));
    let second = f.declare(AwsRegion::EuWest3, "second", queue(None));
    let fleet = f.build().unwrap();
    let mut plan = fleet.plan();
    assert_eq!(plan.dependencies(), vec![Vec::<usize>::new(), vec![]]);
    assert_eq!(plan.build_order().unwrap(), vec![0, 1]);
    // The first queue now sends its dead letters to the second: it must come after it.
    plan.set(first, Status::Present(queue(Some(second))))
        .unwrap();
    assert_eq!(plan.dependencies(), vec![vec![1], vec![]]);
    assert_eq!(plan.build_order().unwrap(), vec![1, 0]);
}
