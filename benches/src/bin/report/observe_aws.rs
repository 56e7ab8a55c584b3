//! O (AWS): calls per resource of a no-change plan on moto's server. A fleet of `n`
//! resources spread over kinds whose lists are complete (security groups, secrets:
//! the list hands over each one's whole read) and kinds read one by one (object stores,
//! whose owner comes from the tag index, and queues, whose read carries its tags) is
//! applied through the engine and `infra-aws`; a no-change plan is then made twice,
//! counting every backend call with a `Recorder` layer: as the backend answers, and
//! through a layer that strips the reads and tags each list hands over (one read per
//! resource, and an `ownership` call wherever the read carries no tags: the baseline).
//! Runs when `AWS_ENDPOINT_URL` names a moto server (`.ci/run` starts one); says why
//! not otherwise.

use std::sync::Arc;

use infra_core::engine::{Engine, MemoryStore, Options};
use infra_core::kinds::{ObjectStore, Queues, Rule, Secrets, SecurityGroup};
use infra_core::prelude::{AwsRegion, Backends, Expr, Fleet, Partial};
use infra_core::sdk::Backend;
use infra_core::sdk::layer::{BareLists, Layered, Recorder};

const PARALLELISM: usize = 16;

/// The kinds whose lists hand over complete reads, and each kind's share of the fleet
/// in tenths.
const MIX: [(&str, bool, usize); 4] = [
    ("securityGroup", true, 4),
    ("secrets", true, 3),
    ("objectStore", false, 2),
    ("queues", false, 1),
];

/// Prints `O calls_per_resource cloud=aws`, or why not on standard error.
pub(crate) fn o(rt: &tokio::runtime::Runtime, n: usize) {
    let Some(endpoint) = std::env::var("AWS_ENDPOINT_URL")
        .ok()
        .filter(|e| !e.is_empty())
    else {
        eprintln!("O calls_per_resource cloud=aws skipped: set AWS_ENDPOINT_URL to a moto server");
        return;
    };
    let config = rt.block_on(
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(endpoint)
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_credential_types::Credentials::new(
                "test", "test", None, None, "bench",
            ))
            .load(),
    );
    let prefix = format!("o-{}", std::process::id());
    let fleet = fleet(&prefix, n);
    let backend: Arc<dyn Backend> = Arc::new(infra_aws::AwsBackend::new(config));
    let options = Options::default().parallelism(PARALLELISM);
    let store = Arc::new(MemoryStore::new());
    let made = Engine::new(Backends::new().with(Arc::clone(&backend)), store.clone());
    let applied = rt
        .block_on(made.apply(&fleet.plan(), &options))
        .expect("apply");
    assert!(applied.result.is_success(), "the apply succeeds");

    // Each plan on the records the apply left (a plan writes none).
    let plan_calls = |backend: Arc<dyn Backend>| {
        let recorder = Recorder::new();
        let engine = Engine::new(
            Backends::new().with(Layered::wrap(backend, recorder.clone())),
            store.clone(),
        );
        let plan = rt
            .block_on(engine.plan(&fleet.plan(), &options))
            .expect("plan");
        assert!(!plan.has_changes(), "a no-change plan: {}", plan.render());
        recorder.calls()
    };
    let complete = plan_calls(Arc::clone(&backend));
    let baseline = plan_calls(Layered::wrap(Arc::clone(&backend), BareLists));

    let per = |calls: usize, of: usize| calls as f64 / of.max(1) as f64;
    let complete_kinds: Vec<&str> = MIX.iter().filter(|m| m.1).map(|m| m.0).collect();
    let in_complete = complete
        .iter()
        .filter(|c| c.kind.is_some_and(|k| complete_kinds.contains(&k)))
        .count();
    let complete_n = counts(n)
        .iter()
        .zip(MIX)
        .filter(|(_, m)| m.1)
        .map(|(c, _)| c)
        .sum();
    println!(
        "O calls_per_resource cloud=aws n={n} complete_lists={:.3} one_read_each={:.3} \
         target=1.2 complete_kinds={:.3}",
        per(complete.len(), n),
        per(baseline.len(), n),
        per(in_complete, complete_n),
    );

    let destroyed = rt
        .block_on(made.apply(&fleet.teardown(), &options.force(true)))
        .expect("destroy");
    assert!(destroyed.result.is_success(), "the destroy succeeds");
}

/// How many of each kind of [`MIX`] a fleet of `n` holds.
fn counts(n: usize) -> Vec<usize> {
    let mut counts: Vec<usize> = MIX.iter().map(|m| n * m.2 / 10).collect();
    counts[0] += n - counts.iter().sum::<usize>();
    counts
}

fn fleet(prefix: &str, n: usize) -> Fleet {
    let here = AwsRegion::UsEast1;
    let mut f = Fleet::builder(prefix);
    for ((kind, _, _), count) in MIX.iter().zip(counts(n)) {
        for i in 0..count {
            let name = format!("{prefix}-{}-{i}", kind.to_ascii_lowercase());
            match *kind {
                "securityGroup" => {
                    f.declare(
                        here,
                        name,
                        SecurityGroup {
                            description: "o".into(),
                            vpc_id: Partial::Unknown,
                            ingress: Expr::lit([Rule::tcp(443, "10.0.0.0/8")].into()),
                            egress: Partial::Unknown,
                            tags: Partial::Unknown,
                        },
                    );
                }
                "secrets" => {
                    f.declare(here, name, Secrets::generated(24));
                }
                "objectStore" => {
                    f.declare(here, name, ObjectStore::new());
                }
                _ => {
                    f.declare(
                        here,
                        name,
                        Queues {
                            fifo: Expr::lit(false),
                            visibility_timeout_seconds: Partial::Unknown,
                            retention_seconds: Partial::Unknown,
                            dead_letter: Partial::Known(None),
                            max_receive_count: Partial::Unknown,
                            tags: Partial::Unknown,
                        },
                    );
                }
            }
        }
    }
    f.build().expect("a fleet of the mix")
}
