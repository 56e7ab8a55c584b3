//! Observation by the page, on moto's server with the real SDK.
//!
//! - A no-change plan of a fleet of the kinds whose lists are complete (security
//!   groups, secrets, databases) makes no `read` and no `ownership` call for them; the
//!   buckets and queues of the same fleet make no `ownership` call (the tag index, or
//!   the read itself, carries their tags). A repository, which moto's tag index does
//!   not serve, is asked for its owner and found this fleet's: absence from the index
//!   is not taken for "unmarked".
//! - The tags the tag index (`tag:GetResources`) hands over with a listed bucket are
//!   what `ownership` answers for it.
//! - With `tag:GetResources` refused (a relay in front of moto answers
//!   `AccessDeniedException` for that operation alone), lists fall back to
//!   per-resource `ownership` calls, the plan is the same, and the backend says so in
//!   one warning.
//! - A create answered `ThrottlingException` a few times is retried and makes exactly
//!   one resource, which carries the fleet's marker.
//!
//! The server is found through `AWS_ENDPOINT_URL` (`.ci/run` starts one). Without it the
//! tests print a loud skip, and fail when `CI=true`.

mod moto_support;

use moto_support::{endpoint, sdk};

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use infra_aws::AwsBackend;
use infra_core::engine::{Engine, MemoryStore, Options, SystemClock};
use infra_core::kinds::*;
use infra_core::prelude::{AwsRegion, Backends, Expr, Fleet, Partial};
use infra_core::sdk::layer::{Layered, Op, Recorder};
use infra_core::sdk::{Backend, MARKER_KEY, ManualClock, RetryPolicy, Router};
use infra_testkit::relay::{Fault, Refusal, Relay};

/// The region every resource is made in.
const REGION: &str = "eu-west-3";
/// The kinds whose lists hand over complete reads.
const COMPLETE: [&str; 3] = ["securityGroup", "secrets", "postgres"];

/// A backend at `endpoint` whose retries wait on a manual clock (nothing waits for
/// real).
async fn backend(endpoint: &str) -> Arc<Router> {
    Arc::new(
        AwsBackend::builder(sdk(endpoint, REGION).await)
            .retry_policy(RetryPolicy::default())
            .clock(Arc::new(ManualClock::new()))
            .build(),
    )
}

/// A fleet of `n` of each of security groups, secrets, object stores and queues, one
/// repository and one database (its password one of the secrets); empty without `n`.
fn fleet(prefix: &str, n: Option<usize>) -> Fleet {
    let here = AwsRegion::EuWest3;
    let mut f = Fleet::builder(format!("{prefix}pages"));
    let Some(n) = n else {
        return f.build().expect("an empty fleet");
    };
    let mut first_secret = None;
    for i in 0..n {
        f.declare(
            here,
            format!("{prefix}sg-{i}"),
            SecurityGroup {
                description: "pages".into(),
                vpc_id: Partial::Unknown,
                ingress: Expr::lit([Rule::tcp(443, "10.0.0.0/8")].into()),
                egress: Partial::Unknown,
                tags: Partial::Known(Expr::lit([("team".to_owned(), "a".to_owned())].into())),
            },
        );
        let secret = f.declare(here, format!("{prefix}secret-{i}"), Secrets::generated(24));
        first_secret.get_or_insert(secret);
        f.declare(here, format!("{prefix}store-{i}"), ObjectStore::new());
        f.declare(
            here,
            format!("{prefix}queue-{i}"),
            Queues {
                fifo: Expr::lit(false),
                visibility_timeout_seconds: Partial::Known(Expr::lit(30)),
                retention_seconds: Partial::Unknown,
                dead_letter: Partial::Known(None),
                max_receive_count: Partial::Unknown,
                tags: Partial::Unknown,
            },
        );
    }
    // A repository: moto's tag index serves no ECR repository, so its owner is asked
    // by the usual call, and it must not pass for unowned.
    f.declare(
        here,
        format!("{prefix}repo"),
        ImageRegistry {
            scan_on_push: Partial::Known(Expr::lit(false)),
            immutable_tags: Partial::Known(Expr::lit(true)),
            tags: Partial::Unknown,
        },
    );
    if let Some(password) = first_secret {
        f.declare(
            here,
            format!("{prefix}db"),
            Postgres::classic(PostgresClassic {
                engine_version: "16",
                instance_class: "db.t4g.micro",
                master_username: "admin",
                master_password: password,
            }),
        );
    }
    f.build().expect("the fleet is sound")
}

/// Calls of `op` the recorder saw for `kind`.
fn count(recorder: &Recorder, op: Op, kind: &str) -> usize {
    recorder
        .calls()
        .iter()
        .filter(|c| c.op == op && c.kind == Some(kind))
        .count()
}

/// Everything `tracing` says while the guard lives, on this thread (the tests run on a
/// current-thread runtime, so every task's events are seen).
#[derive(Clone, Default)]
struct Said(Arc<Mutex<Vec<u8>>>);

impl Said {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

impl io::Write for Said {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn listen(said: &Said) -> tracing::subscriber::DefaultGuard {
    let said = said.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .with_writer(move || said.clone())
        .finish();
    tracing::subscriber::set_default(subscriber)
}

#[tokio::test]
async fn a_no_change_plan_reads_nothing_a_complete_list_carried() {
    let Some(endpoint) = endpoint("the AWS page tests") else {
        return;
    };
    let recorder = Recorder::new();
    let backend: Arc<dyn Backend> = Layered::wrap(backend(&endpoint).await, recorder.clone());
    let engine = Engine::new(Backends::new().with(backend), Arc::new(MemoryStore::new()));
    let prefix = infra_testkit::conformance::fresh_prefix(&SystemClock::new());
    let options = Options::default();
    let made = engine
        .apply(&fleet(&prefix, Some(3)).plan(), &options)
        .await
        .expect("apply");
    assert!(made.result.is_success(), "{:#?}", made.result);

    recorder.clear();
    let quiet = engine
        .plan(&fleet(&prefix, Some(3)).plan(), &options)
        .await
        .expect("plan");
    assert!(!quiet.has_changes(), "{}", quiet.render());
    for kind in COMPLETE {
        assert!(count(&recorder, Op::List, kind) >= 1, "{kind} was listed");
        assert_eq!(count(&recorder, Op::Read, kind), 0, "reads of {kind}");
        assert_eq!(
            count(&recorder, Op::Ownership, kind),
            0,
            "ownership of {kind}"
        );
    }
    // Buckets and queues are read one by one (lifecycle, attributes), and their owner
    // comes with the list (the tag index) or the read: no ownership call.
    for kind in ["objectStore", "queues"] {
        assert_eq!(count(&recorder, Op::Read, kind), 3, "reads of {kind}");
        assert_eq!(
            count(&recorder, Op::Ownership, kind),
            0,
            "ownership of {kind}"
        );
    }
    // The repository the index did not name was asked for its owner, and found ours
    // (the plan above has no change).
    assert_eq!(count(&recorder, Op::Ownership, "imageRegistry"), 1);

    let emptied = engine
        .apply(&fleet(&prefix, None).plan(), &options.force(true))
        .await
        .expect("teardown");
    assert!(emptied.result.is_success(), "{:#?}", emptied.result);
}

#[tokio::test]
async fn the_tag_index_hands_over_what_ownership_answers() {
    let Some(endpoint) = endpoint("the AWS page tests") else {
        return;
    };
    let backend = backend(&endpoint).await;
    let engine = Engine::new(
        Backends::new().with(backend.clone()),
        Arc::new(MemoryStore::new()),
    );
    let prefix = infra_testkit::conformance::fresh_prefix(&SystemClock::new());
    let options = Options::default();
    let made = engine
        .apply(&fleet(&prefix, Some(2)).plan(), &options)
        .await
        .expect("apply");
    assert!(made.result.is_success(), "{:#?}", made.result);
    // A bucket of no fleet, with a tag of its own: the index (filtered on the marker
    // key) does not name it, so it is handed over without tags.
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk(&endpoint, REGION).await)
            .force_path_style(true)
            .build(),
    );
    let stranger = format!("{prefix}stranger");
    s3.create_bucket()
        .bucket(&stranger)
        .create_bucket_configuration(
            aws_sdk_s3::types::CreateBucketConfiguration::builder()
                .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::from(REGION))
                .build(),
        )
        .send()
        .await
        .expect("a bucket of no fleet");
    let tagging = aws_sdk_s3::types::Tagging::builder()
        .tag_set(
            aws_sdk_s3::types::Tag::builder()
                .key("team")
                .value("b")
                .build()
                .expect("a tag"),
        )
        .build()
        .expect("a tag set");
    s3.put_bucket_tagging()
        .bucket(&stranger)
        .tagging(tagging)
        .send()
        .await
        .expect("the stranger's tag");

    let listed = backend.list("objectStore", REGION).await.expect("list");
    let ours: Vec<_> = listed
        .iter()
        .filter(|l| l.name.starts_with(&prefix))
        .collect();
    assert_eq!(ours.len(), 3, "{ours:?}");
    for l in &ours {
        let told = backend
            .ownership("objectStore", REGION, &l.handle)
            .await
            .expect("ownership");
        if l.name == stranger {
            assert!(l.raw_tags().is_none(), "{l:?}");
            assert!(!told.contains_key(MARKER_KEY), "{told:?}");
        } else {
            assert_eq!(l.raw_tags(), Some(&told), "{}", l.name);
            assert!(told.contains_key(MARKER_KEY), "{told:?}");
        }
    }

    s3.delete_bucket()
        .bucket(&stranger)
        .send()
        .await
        .expect("the stranger goes");
    let emptied = engine
        .apply(&fleet(&prefix, None).plan(), &options.force(true))
        .await
        .expect("teardown");
    assert!(emptied.result.is_success(), "{:#?}", emptied.result);
}

#[tokio::test]
async fn a_refused_tag_index_falls_back_and_says_so_once() {
    let Some(endpoint) = endpoint("the AWS page tests") else {
        return;
    };
    let said = Said::default();
    let _guard = listen(&said);
    let relay = Relay::start(&endpoint).await.expect("the relay starts");
    relay.rule(|x| {
        (x.action() == "GetResources").then(|| {
            Fault::Refuse(Refusal::aws(
                x,
                400,
                "AccessDeniedException",
                "User is not authorized to perform: tag:GetResources",
            ))
        })
    });
    let recorder = Recorder::new();
    let backend: Arc<dyn Backend> =
        Layered::wrap(backend(&relay.address()).await, recorder.clone());
    let engine = Engine::new(Backends::new().with(backend), Arc::new(MemoryStore::new()));
    let prefix = infra_testkit::conformance::fresh_prefix(&SystemClock::new());
    let options = Options::default();
    let made = engine
        .apply(&fleet(&prefix, Some(2)).plan(), &options)
        .await
        .expect("apply");
    assert!(made.result.is_success(), "{:#?}", made.result);

    recorder.clear();
    for _ in 0..2 {
        let quiet = engine
            .plan(&fleet(&prefix, Some(2)).plan(), &options)
            .await
            .expect("plan");
        assert!(!quiet.has_changes(), "{}", quiet.render());
    }
    // The buckets' owner was asked one by one, each plan.
    assert_eq!(count(&recorder, Op::Ownership, "objectStore"), 4);
    let refused = relay
        .take()
        .iter()
        .filter(|x| x.action() == "GetResources" && x.fault.is_some())
        .count();
    assert_eq!(refused, 1, "a refusal is not asked again");
    let text = said.text();
    let warnings: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("Resource Groups Tagging API"))
        .collect();
    assert_eq!(warnings.len(), 1, "{text}");
    assert!(warnings[0].contains("tag:GetResources"), "{text}");
    assert!(warnings[0].contains("one call per resource"), "{text}");

    relay.restore();
    let emptied = engine
        .apply(&fleet(&prefix, None).plan(), &options.force(true))
        .await
        .expect("teardown");
    assert!(emptied.result.is_success(), "{:#?}", emptied.result);
}

#[tokio::test]
async fn a_throttled_create_is_retried_and_makes_one_resource() {
    let Some(endpoint) = endpoint("the AWS page tests") else {
        return;
    };
    let relay = Relay::start(&endpoint).await.expect("the relay starts");
    let refused = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&refused);
    relay.rule(move |x| {
        (x.action() == "CreateQueue" && counter.fetch_add(1, Ordering::SeqCst) < 3)
            .then(|| Fault::Refuse(Refusal::throttled(x, None)))
    });
    let engine = Engine::new(
        Backends::new().with(backend(&relay.address()).await),
        Arc::new(MemoryStore::new()),
    );
    let prefix = infra_testkit::conformance::fresh_prefix(&SystemClock::new());
    let here = AwsRegion::EuWest3;
    let one = |declare: bool| {
        let mut f = Fleet::builder(format!("{prefix}throttled"));
        if declare {
            f.declare(
                here,
                format!("{prefix}queue"),
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
        f.build().expect("the fleet is sound")
    };
    let options = Options::default();
    let made = engine
        .apply(&one(true).plan(), &options)
        .await
        .expect("apply");
    assert!(made.result.is_success(), "{:#?}", made.result);
    let exchanges = relay.take();
    let creates: Vec<_> = exchanges
        .iter()
        .filter(|x| x.action() == "CreateQueue")
        .collect();
    assert_eq!(creates.len(), 4, "three refusals, then the create");
    assert_eq!(creates.iter().filter(|x| x.fault.is_some()).count(), 3);

    // One queue in moto, asked directly, carrying this fleet's marker.
    let sqs = aws_sdk_sqs::Client::new(&sdk(&endpoint, REGION).await);
    let urls = sqs
        .list_queues()
        .queue_name_prefix(&prefix)
        .send()
        .await
        .expect("ListQueues")
        .queue_urls()
        .to_vec();
    assert_eq!(urls.len(), 1, "{urls:?}");
    let tags = sqs
        .list_queue_tags()
        .queue_url(&urls[0])
        .send()
        .await
        .expect("ListQueueTags");
    assert_eq!(
        tags.tags()
            .and_then(|t| t.get(MARKER_KEY))
            .map(String::as_str),
        Some(format!("{prefix}throttled").as_str())
    );

    relay.restore();
    let emptied = engine
        .apply(&one(false).plan(), &options.force(true))
        .await
        .expect("teardown");
    assert!(emptied.result.is_success(), "{:#?}", emptied.result);
}
