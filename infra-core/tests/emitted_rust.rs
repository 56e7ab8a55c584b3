//! The declarations `discover --emit-rust` and `import` print are Rust that compiles,
//! and declaring exactly them makes the next plan say "No changes".
//!
//! Both are proven by compiling the printed code in a scratch crate under the test's
//! temporary directory, which depends on this repository's `infra-core` (and, to run,
//! `infra-testkit`) by path and builds in the same target directory as the tests (so
//! that the third-party crates are built once), with the workspace's lock file. The
//! second test runs the compiled fleet: its own `main` is the printed code, handed to
//! the runner on the simulated world the test made. Its plan leaves every resource
//! unchanged (what is left are the records' confirmations of the rows `discover`
//! adopted on their marker alone, now declared), its apply writes nothing to the
//! world, and the plan after says "No changes" — the printed code itself planned, not
//! a copy of it written by hand.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use infra_core::kinds::*;
use infra_core::{
    engine::ManualClock,
    prelude::{AwsRegion, CheckReport, Expr, Fleet, FleetBuilder, Key, Partial, ScalewayRegion},
    sdk::RawTags,
};
use infra_testkit::sim::SimCloud;
use serde_json::Value;
use support::console::{answering, json};

const HERE: AwsRegion = AwsRegion::EuWest3;
const PARIS: ScalewayRegion = ScalewayRegion::FrPar;

fn known<T: infra_core::prelude::Value>(v: T) -> Partial<Expr<T>> {
    Partial::Known(Expr::lit(v))
}

/// The security group every fleet here declares, as Rust source and as a value (the
/// scratch crate's fleet declares it from the source).
const WEB_SOURCE: &str = r#"let web = fleet.declare(AwsRegion::EuWest3, "web", SecurityGroup {
        description: "web".into(),
        vpc_id: Partial::Unknown,
        ingress: Expr::lit([Rule::tcp(443, "0.0.0.0/0")].into()),
        egress: Partial::Unknown,
        tags: Partial::Unknown,
    });"#;

fn web(f: &mut FleetBuilder) -> Key<SecurityGroup> {
    f.declare(
        HERE,
        "web",
        SecurityGroup {
            description: "web".into(),
            vpc_id: Partial::Unknown,
            ingress: Expr::lit([Rule::tcp(443, "0.0.0.0/0")].into()),
            egress: Partial::Unknown,
            tags: Partial::Unknown,
        },
    )
}

/// The Scaleway function namespace the fleets here declare, likewise.
const FNS_SOURCE: &str = r#"let fns = fleet.declare(ScalewayRegion::FrPar, "fns", FunctionNamespace {
        description: Partial::Known(Expr::lit("functions".to_owned())),
        environment: Partial::Unknown,
        secret_environment: Partial::Unknown,
        tags: Partial::Unknown,
    });"#;

fn fns(f: &mut FleetBuilder) -> Key<FunctionNamespace> {
    f.declare(
        PARIS,
        "fns",
        FunctionNamespace {
            description: known("functions".to_owned()),
            environment: Partial::Unknown,
            secret_environment: Partial::Unknown,
            tags: Partial::Unknown,
        },
    )
}

/// A fleet with every kind of this crate, some fields said and some not, references
/// of every shape (a required key, an optional one, a map of keys, a cross-cloud one).
fn every_kind(name: &str, with_database: bool) -> Result<Fleet, CheckReport> {
    let mut f = Fleet::builder(name);
    let web = web(&mut f);
    let fns = fns(&mut f);
    let role = f.declare(
        HERE,
        "app-role",
        Iam {
            policies: Expr::lit(["arn:aws:iam::aws:policy/ReadOnlyAccess".to_owned()].into()),
            assumed_by: Expr::lit(["lambda.amazonaws.com".to_owned()].into()),
            description: known("the app".to_owned()),
            tags: Partial::Unknown,
        },
    );
    let key = f.declare(HERE, "api-key", Secrets::generated(32));
    f.declare(
        HERE,
        "app-fn",
        Compute {
            runtime: "python3.12".into(),
            handler: "app.handler".into(),
            code: "s3://app-code/app.zip".into(),
            code_sha256: Partial::Unknown,
            memory_mb: known(256),
            timeout_seconds: Partial::Unknown,
            environment: known(BTreeMap::from([("MODE".to_owned(), "prod".to_owned())])),
            secret_environment: Partial::Known(BTreeMap::from([("API_KEY".to_owned(), key)])),
            role: Some(role),
            access: Access::Private.into(),
            tags: Partial::Unknown,
        },
    );
    let queue = |dead_letter| Queues {
        fifo: Expr::lit(false),
        visibility_timeout_seconds: known(60),
        retention_seconds: Partial::Unknown,
        dead_letter: Partial::Known(dead_letter),
        max_receive_count: Partial::Unknown,
        tags: Partial::Unknown,
    };
    let q1 = f.declare(HERE, "q1", queue(None));
    f.declare(HERE, "q2", queue(Some(q1)));
    f.declare(
        HERE,
        "app-images",
        ImageRegistry {
            scan_on_push: known(true),
            immutable_tags: Partial::Unknown,
            tags: Partial::Unknown,
        },
    );
    if with_database {
        let pw = f.declare(HERE, "db-password", Secrets::generated(24));
        f.declare(
            HERE,
            "app-db",
            Postgres::serverless(PostgresServerless {
                engine_version: "16",
                min_capacity: Acu::halves(1),
                max_capacity: Acu::whole(2),
                master_username: "app",
                master_password: pw,
            }),
        );
    }
    f.declare(
        HERE,
        "emitted-assets",
        ObjectStore {
            tags: known(BTreeMap::from([("team".to_owned(), "web".to_owned())])),
            ..ObjectStore::new()
        },
    );
    let bucket = f.declare(
        HERE,
        "emitted-artifacts",
        S3Bucket {
            versioning: known(true),
            object_lock: Partial::Unknown,
            block_public_access: known(true),
            tags: Partial::Unknown,
        },
    );
    f.declare(
        HERE,
        "web-1",
        AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Micro), web),
    );
    f.declare(
        PARIS,
        "worker",
        Function {
            namespace: fns,
            runtime: "python311".into(),
            handler: "worker.handle".into(),
            memory_mb: known(256),
            min_scale: known(0),
            max_scale: known(2),
            timeout_seconds: Partial::Unknown,
            source_bucket: Partial::Known(Some(bucket)),
            code: Partial::Unknown,
            environment: Partial::Unknown,
            access: Access::Private.into(),
        },
    );
    let cns = f.declare(
        PARIS,
        "cns",
        ContainerNamespace {
            description: Partial::Unknown,
            environment: known(BTreeMap::from([("REGION".to_owned(), "par".to_owned())])),
            secret_environment: Partial::Unknown,
            tags: known(["team=web".to_owned()].into()),
        },
    );
    f.declare(
        PARIS,
        "api",
        Container {
            namespace: cns,
            image: "rg.fr-par.scw.cloud/app/api:1.0.0".into(),
            port: known(8080),
            cpu_limit: Partial::Unknown,
            memory_limit_mb: known(512),
            min_scale: known(1),
            max_scale: known(3),
            timeout_seconds: Partial::Unknown,
            environment: Partial::Unknown,
            secret_environment: Partial::Unknown,
            access: Access::Public.into(),
        },
    );
    f.build()
}

/// The fleet whose records were lost: it declares only the security group and the
/// namespace (so that `discover` looks in their regions), and, for `import`, a bucket
/// made by hand, declared with versioning off.
fn survivor(name: &str) -> Result<Fleet, CheckReport> {
    let mut f = Fleet::builder(name);
    web(&mut f);
    fns(&mut f);
    f.declare(
        HERE,
        "hand-made",
        ObjectStore {
            versioning: known(false),
            ..ObjectStore::new()
        },
    );
    f.build()
}

/// The target directory the tests were built in: the one cargo was told, or the one
/// this test binary sits in (`<target>/debug/deps/<binary>`).
fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.ancestors()
        .nth(3)
        .expect("<target>/<profile>/deps/<binary>")
        .to_path_buf()
}

/// A crate of its own (its own workspace) in `dir`, depending on this repository's
/// `infra-core` and `infra-testkit` by path, with the workspace's lock file (so that it
/// resolves the very versions the tests were built with, offline).
fn scratch_crate(dir: &Path, name: &str, main: &str) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
             [dependencies]\ninfra-core = {{ path = {:?} }}\ninfra-testkit = {{ path = {:?} }}\n\n\
             [workspace]\n",
            repo.join("infra-core"),
            repo.join("infra-testkit"),
        ),
    )
    .unwrap();
    std::fs::copy(repo.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    std::fs::write(dir.join("src/main.rs"), main).unwrap();
}

/// Runs `cargo <verb> --offline` on the scratch crate in `dir`; panics with cargo's
/// words if it fails.
fn cargo(dir: &Path, verb: &str) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .arg(verb)
        .arg("--offline")
        .arg("--quiet")
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo {verb} failed on the emitted code:\n{}\n--- src/main.rs ---\n{}",
        String::from_utf8_lossy(&output.stderr),
        std::fs::read_to_string(dir.join("src/main.rs")).unwrap()
    );
}

/// The emitted code of `discover --emit-rust`: what follows its heading.
fn emitted_by_discover(out: &str) -> String {
    let (_, code) = out
        .split_once("as their clouds have them")
        .unwrap_or_else(|| panic!("no declarations printed:\n{out}"));
    code.split_once('\n').unwrap().1.to_owned()
}

/// The variables the code uses without defining them, from its comments: `` // `var`:
/// Type — what ``.
fn needs(code: &str) -> Vec<(String, String)> {
    code.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("// `")?;
            let (var, rest) = rest.split_once("`: ")?;
            let (ty, _) = rest.split_once(" — ")?;
            Some((var.to_owned(), ty.to_owned()))
        })
        .collect()
}

#[tokio::test]
async fn emitted_declarations_of_every_kind_compile() {
    let cloud = support::cloud(81);
    let mut s = answering(false, true);
    let (code, out, err) = s
        .run(every_kind("kinds", true), &cloud, &["apply", "--yes"])
        .await;
    assert_eq!(code, 0, "{out}{err}");

    // The records are lost; the fleet declares the group and the namespace only.
    let mut lost = answering(false, true);
    let (code, out, err) = lost
        .run(survivor("kinds"), &cloud, &["discover", "--emit-rust"])
        .await;
    assert_eq!(code, 0, "{out}{err}");
    let code = emitted_by_discover(&out);
    for kind in [
        "Iam {",
        "Compute {",
        "Queues {",
        "Secrets {",
        "ImageRegistry {",
        "Postgres {",
        "ObjectStore {",
        "S3Bucket {",
        "AwsInstance {",
        "Function {",
        "ContainerNamespace {",
        "Container {",
    ] {
        assert!(code.contains(kind), "no {kind} in:\n{code}");
    }
    // Declared already: the group and the namespace are used, not declared again; the
    // database's password is not reported by any cloud.
    let needs = needs(&code);
    let vars: Vec<&str> = needs.iter().map(|(v, _)| v.as_str()).collect();
    assert!(vars.contains(&"web"), "{needs:?}");
    assert!(vars.contains(&"fns"), "{needs:?}");
    assert!(vars.contains(&"secrets_app_db"), "{needs:?}");

    let params: Vec<String> = needs.iter().map(|(v, t)| format!("{v}: {t}")).collect();
    let main = format!(
        "#![allow(unused)]\nuse infra_core::{{kinds::*, prelude::*}};\n\n\
         fn declare(fleet: &mut FleetBuilder, {}) {{\n{code}}}\n\nfn main() {{}}\n",
        params.join(", ")
    );
    let dir = tempfile::tempdir().unwrap();
    scratch_crate(dir.path(), "emitted-kinds", &main);
    cargo(dir.path(), "check");
}

#[tokio::test]
async fn declaring_what_was_emitted_plans_no_changes() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path().join("world.json");
    let cloud = SimCloud::open_with_clock(&world, Arc::new(ManualClock::new())).unwrap();
    let mut s = answering(false, true);
    let (code, out, err) = s
        .run(every_kind("emitted", false), &cloud, &["apply", "--yes"])
        .await;
    assert_eq!(code, 0, "{out}{err}");
    let hand_made = cloud
        .insert_foreign_with(
            "aws",
            "objectStore",
            "eu-west-3",
            "hand-made",
            serde_json::json!({"versioning": true})
                .as_object()
                .unwrap()
                .clone(),
            RawTags::from([("team".to_owned(), "ops".to_owned())]),
        )
        .unwrap();

    // The records are lost: discover takes back what carries the marker, and the
    // bucket made by hand is imported.
    let mut lost = answering(false, true);
    let (code, out, err) = lost
        .run(survivor("emitted"), &cloud, &["discover", "--emit-rust"])
        .await;
    assert_eq!(code, 0, "{out}{err}");
    let discovered = emitted_by_discover(&out);
    let (code, out, err) = lost
        .run(
            survivor("emitted"),
            &cloud,
            &["import", "hand-made", &hand_made, "--yes", "--json"],
        )
        .await;
    assert_eq!(code, 0, "{err}");
    let outcome = json(&out);
    assert_eq!(outcome["plan"]["action"], "update", "{outcome:#}");
    assert_eq!(outcome["declaration"]["needs"], Value::Array(Vec::new()));
    let imported = outcome["declaration"]["rust"].as_str().unwrap();

    // Without the emitted declarations, the plan would prune what discover took back:
    // most of the fleet, so the brake would refuse it, and --detailed-exitcode says 1.
    let (code, out, err) = lost
        .run(
            survivor("emitted"),
            &cloud,
            &["plan", "--detailed-exitcode"],
        )
        .await;
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("applying this plan would be refused"), "{err}");

    // The fleet that declares what was emitted, as a program of its own.
    let needs = needs(&discovered);
    assert_eq!(
        needs.iter().map(|(v, _)| v.as_str()).collect::<Vec<_>>(),
        ["fns", "web"],
        "only the two declared resources are used without being defined"
    );
    let main = format!(
        "use infra_core::{{kinds::*, prelude::*}};\n\n\
         fn main() -> std::process::ExitCode {{\n\
         let mut fleet = Fleet::builder(\"emitted\");\n\
         {WEB_SOURCE}\n{FNS_SOURCE}\n{discovered}{imported}\
         let world = std::env::var_os(\"INFRA_SIM_WORLD\").expect(\"INFRA_SIM_WORLD\");\n\
         infra_core::cli::run(fleet.build(), |_| infra_testkit::sim::SimCloud::backends_at(world))\n}}\n"
    );
    let krate = dir.path().join("emitted-fleet");
    scratch_crate(&krate, "emitted-fleet", &main);
    cargo(&krate, "build");
    let binary = target_dir().join("debug").join("emitted-fleet");
    let run = |args: &[&str]| {
        let output = Command::new(&binary)
            .arg("--state-dir")
            .arg(lost.state.path())
            .args(args)
            .env("INFRA_SIM_WORLD", &world)
            .env("NO_COLOR", "1")
            .output()
            .expect("the emitted fleet runs");
        let out = String::from_utf8(output.stdout).unwrap();
        let err = String::from_utf8(output.stderr).unwrap();
        (output.status.code(), out, err)
    };

    // Every resource unchanged: what is left are the records' own confirmations of
    // the rows discover adopted on their marker alone, now that they are declared.
    let (code, out, err) = run(&["plan", "--json"]);
    assert_eq!(code, Some(0), "{out}{err}\n--- src/main.rs ---\n{main}");
    let plan = json(&out);
    let changes = plan["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 15, "{plan:#}");
    for change in changes {
        assert_eq!(
            change["action"], "unchanged",
            "{change:#}\n--- src/main.rs ---\n{main}"
        );
    }
    for record in plan["records"].as_array().unwrap() {
        assert_eq!(record["change"], "confirm", "{record:#}");
    }

    // The apply writes the records alone: the world is as it was.
    let before = cloud.resources();
    let (code, out, err) = run(&["apply", "--yes"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let after = cloud.resources();
    assert_eq!(before, after, "the apply changed the world");
    let (code, out, err) = run(&["plan", "--detailed-exitcode"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("No changes: the world matches the declaration."),
        "{out}"
    );
}
