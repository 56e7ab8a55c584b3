//! The staged scenario against a real AWS account: full → changed → trimmed → empty,
//! then a sweep that nothing with the run's prefix is left.
//!
//! It creates real resources, which cost money, so it runs only when asked twice: by
//! running this example, and with `INFRA_AWS_LIVE=yes` in the environment. Credentials
//! come the standard way (`AWS_PROFILE`, the environment's keys, SSO). Never run in CI.
//!
//! ```sh
//! INFRA_AWS_LIVE=yes AWS_PROFILE=sandbox cargo run -p infra-aws --example aws_live_stages
//! ```

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;

use infra_aws::AwsBackend;
use infra_core::kinds::*;
use infra_core::{
    engine::{Engine, MemoryStore, Options},
    prelude::{AwsRegion, Backends, Expr, Fleet, Partial},
};

fn staged(prefix: &str, stage: u8) -> Fleet {
    let mut f = Fleet::builder(format!("{prefix}live"));
    if stage == 3 {
        return f.build().expect("an empty fleet");
    }
    let here = AwsRegion::EuWest3;
    let label = if stage == 0 { "full" } else { "changed" };
    let tags = Partial::Known(Expr::lit(BTreeMap::from([(
        "stage".to_owned(),
        label.to_owned(),
    )])));
    f.declare(
        here,
        format!("{prefix}assets"),
        ObjectStore {
            tags: tags.clone(),
            ..ObjectStore::new()
        },
    );
    if stage != 2 {
        f.declare(
            here,
            format!("{prefix}artifacts"),
            S3Bucket {
                versioning: Partial::Known(Expr::lit(true)),
                object_lock: Partial::Unknown,
                block_public_access: Partial::Known(Expr::lit(true)),
                tags,
            },
        );
    } else {
        f.declare(here, format!("{prefix}logs"), ObjectStore::new());
    }
    f.build().expect("the live fleet is sound")
}

#[tokio::main]
async fn main() -> ExitCode {
    if std::env::var("INFRA_AWS_LIVE").as_deref() != Ok("yes") {
        eprintln!("refusing: this creates real AWS resources. Set INFRA_AWS_LIVE=yes to run it.");
        return ExitCode::from(2);
    }
    let backend = AwsBackend::from_env().await;
    if let Some(why) = backend.unreachable() {
        eprintln!("AWS is unreachable: {why}");
        return ExitCode::from(1);
    }
    let prefix = infra_testkit::conformance::fresh_prefix(&infra_core::engine::SystemClock::new());
    let engine = Engine::new(
        Backends::new().with(Arc::clone(&backend)),
        Arc::new(MemoryStore::new()),
    );
    let force = Options::default().force(true);
    for stage in 0..4u8 {
        let fleet = staged(&prefix, stage);
        match engine.apply(&fleet.plan(), &force).await {
            Ok(outcome) => {
                print!(
                    "stage {stage}:\n{}",
                    infra_core::cli::render_result(&outcome.result)
                );
                if !outcome.result.is_success() {
                    return ExitCode::from(1);
                }
            }
            Err(e) => {
                eprintln!("stage {stage}: {e}");
                return ExitCode::from(1);
            }
        }
    }
    let mut left = Vec::new();
    for kind in backend.capabilities().kinds {
        if let Ok(listed) = backend.list(kind, "eu-west-3").await {
            left.extend(
                listed
                    .into_iter()
                    .filter(|l| l.name.starts_with(&prefix))
                    .map(|l| format!("{kind} {}", l.name)),
            );
        }
    }
    if left.is_empty() {
        println!("every stage converged, and nothing with the prefix {prefix} is left");
        ExitCode::SUCCESS
    } else {
        eprintln!("left behind: {left:?}");
        ExitCode::from(1)
    }
}
