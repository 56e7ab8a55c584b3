//! `access`, private unless declared: Scaleway makes a function or a container public
//! when its create says nothing of `privacy`, so every create and update says it; the
//! read reports it, and a resource found public when declared private (made so by
//! another tool) is planned as an update and made private again.

use std::sync::Arc;

use infra_core::engine::{Engine, MemoryStore, Options};
use infra_core::kinds::{
    Access, Compute, Container, ContainerNamespace, Function, FunctionNamespace,
};
use infra_core::prelude::{Backends, Expr, Fleet, Partial, ScalewayRegion};
use infra_core::sdk::{Backend, ManualClock, Router};
use infra_testkit::conformance::staged::EMPTY_ZIP;
use infra_testkit::scaleway::ScalewayServer;
use serde_json::{Value, json};

use super::support::{raw, stand_in_and_backend};

const REGION: &str = "fr-par";

fn known<T: infra_core::prelude::Value>(value: T) -> Partial<Expr<T>> {
    Partial::Known(Expr::lit(value))
}

/// A function, a compute and a container, each declared `access`.
fn fleet(access: Access, archive: &str) -> Fleet {
    let here = ScalewayRegion::FrPar;
    let mut f = Fleet::builder("doors");
    let functions = f.declare(
        here,
        "doors-fns",
        FunctionNamespace {
            description: Partial::Unknown,
            environment: Partial::Unknown,
            secret_environment: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    f.declare(
        here,
        "doors-worker",
        Function {
            namespace: functions,
            runtime: Expr::lit("python311".to_owned()),
            handler: Expr::lit("handler.handle".to_owned()),
            memory_mb: known(256),
            min_scale: Partial::Unknown,
            max_scale: Partial::Unknown,
            timeout_seconds: Partial::Unknown,
            source_bucket: Partial::Known(None),
            code: Partial::Unknown,
            environment: Partial::Unknown,
            access: access.into(),
        },
    );
    f.declare(
        here,
        "doors-api",
        Compute {
            runtime: Expr::lit("python3.11".to_owned()),
            handler: Expr::lit("handler.handle".to_owned()),
            code: Expr::lit(archive.to_owned()),
            code_sha256: Partial::Unknown,
            memory_mb: known(256),
            timeout_seconds: Partial::Unknown,
            environment: Partial::Unknown,
            secret_environment: Partial::Unknown,
            role: None,
            tags: Partial::Unknown,
            access: access.into(),
        },
    );
    let containers = f.declare(
        here,
        "doors-apps",
        ContainerNamespace {
            description: Partial::Unknown,
            environment: Partial::Unknown,
            secret_environment: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    f.declare(
        here,
        "doors-web",
        Container {
            namespace: containers,
            image: Expr::lit("rg.fr-par.scw.cloud/doors/web:1.0".to_owned()),
            port: Partial::Unknown,
            cpu_limit: Partial::Unknown,
            memory_limit_mb: Partial::Unknown,
            min_scale: Partial::Unknown,
            max_scale: Partial::Unknown,
            timeout_seconds: Partial::Unknown,
            environment: Partial::Unknown,
            secret_environment: Partial::Unknown,
            access: access.into(),
        },
    );
    f.build().expect("a sound fleet")
}

/// The stand-in's paths of the function, the compute's function and the container.
async fn paths(backend: &Router) -> Vec<(&'static str, String)> {
    let id = |kind: &'static str, name: &'static str| async move {
        let listed = backend.list(kind, REGION).await.expect("listed");
        let found = listed.iter().find(|l| l.name == name).expect("made");
        found.handle.rsplit('/').next().expect("an id").to_owned()
    };
    vec![
        (
            "function",
            format!(
                "/functions/v1beta1/regions/{REGION}/functions/{}",
                id("function", "doors-worker").await
            ),
        ),
        (
            "compute",
            format!(
                "/functions/v1beta1/regions/{REGION}/functions/{}",
                id("compute", "doors-api").await
            ),
        ),
        (
            "container",
            format!(
                "/containers/v1beta1/regions/{REGION}/containers/{}",
                id("container", "doors-web").await
            ),
        ),
    ]
}

/// The `privacy` the stand-in holds at `path`.
async fn privacy(server: &ScalewayServer, path: &str) -> Value {
    raw(server, "GET", path, None).await.1["privacy"].clone()
}

fn engine(backend: &Arc<Router>) -> Engine {
    Engine::new(
        Backends::new().with(backend.clone() as Arc<dyn Backend>),
        Arc::new(MemoryStore::new()),
    )
    .with_clock(Arc::new(ManualClock::new()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn functions_computes_and_containers_are_made_private_unless_declared_public() {
    let (server, backend) = stand_in_and_backend().await;
    let dir = tempfile::tempdir().expect("a scratch directory");
    let archive = dir.path().join("api.zip");
    std::fs::write(&archive, EMPTY_ZIP).expect("the archive is written");
    let declared = fleet(Access::Private, &archive.to_string_lossy());
    let engine = engine(&backend);
    let applied = engine
        .apply(&declared.plan(), &Options::default())
        .await
        .expect("the apply runs");
    assert!(applied.is_success(), "{:#?}", applied.result);

    // Said in every create, as Scaleway makes public what a create leaves unsaid.
    let creates: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| {
            r.method == "POST"
                && (r.path.ends_with("/functions") || r.path.ends_with("/containers"))
        })
        .collect();
    assert_eq!(creates.len(), 3, "{creates:?}");
    for create in &creates {
        assert_eq!(create.body["privacy"], json!("private"), "{create:?}");
    }
    for (kind, path) in paths(&backend).await {
        assert_eq!(privacy(&server, &path).await, json!("private"), "{kind}");
        let handle = backend
            .list(kind, REGION)
            .await
            .unwrap()
            .into_iter()
            .find(|l| l.name.starts_with("doors-"))
            .expect("listed")
            .handle;
        let read = backend.read(kind, REGION, &handle).await.expect("read");
        assert_eq!(read.reported()["access"], json!("private"), "{kind}");
    }
    let again = engine
        .plan(&declared.plan(), &Options::default())
        .await
        .expect("the plan runs");
    assert!(!again.has_changes(), "{}", again.render());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_found_public_when_declared_private_is_made_private_again() {
    let (server, backend) = stand_in_and_backend().await;
    let dir = tempfile::tempdir().expect("a scratch directory");
    let archive = dir.path().join("api.zip");
    std::fs::write(&archive, EMPTY_ZIP).expect("the archive is written");
    let archive = archive.to_string_lossy().into_owned();
    let engine = engine(&backend);
    let applied = engine
        .apply(
            &fleet(Access::Private, &archive).plan(),
            &Options::default(),
        )
        .await
        .expect("the apply runs");
    assert!(applied.is_success(), "{:#?}", applied.result);

    // Another tool opens all three to the world.
    let paths = paths(&backend).await;
    for (kind, path) in &paths {
        let (status, _) = raw(&server, "PATCH", path, Some(json!({"privacy": "public"}))).await;
        assert_eq!(status, 200, "{kind}");
    }
    let plan = engine
        .plan(
            &fleet(Access::Private, &archive).plan(),
            &Options::default(),
        )
        .await
        .expect("the plan runs");
    for name in ["doors-worker", "doors-api", "doors-web"] {
        let line = plan
            .changes
            .iter()
            .find(|c| c.resource.name == name)
            .unwrap_or_else(|| panic!("{name} is not planned:\n{}", plan.render()));
        assert_eq!(line.action, "update", "{line:?}");
        assert!(line.fields.iter().any(|f| f.field == "access"), "{line:?}");
    }
    let repaired = engine
        .apply(
            &fleet(Access::Private, &archive).plan(),
            &Options::default(),
        )
        .await
        .expect("the apply runs");
    assert!(repaired.is_success(), "{:#?}", repaired.result);
    for (kind, path) in &paths {
        assert_eq!(privacy(&server, path).await, json!("private"), "{kind}");
    }

    // Declared public, they are opened, and only then.
    let opened = engine
        .apply(&fleet(Access::Public, &archive).plan(), &Options::default())
        .await
        .expect("the apply runs");
    assert!(opened.is_success(), "{:#?}", opened.result);
    for (kind, path) in &paths {
        assert_eq!(privacy(&server, path).await, json!("public"), "{kind}");
    }
    server.shutdown().await;
}
