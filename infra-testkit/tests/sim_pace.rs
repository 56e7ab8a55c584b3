//! The simulated cloud sets the pace as the clouds do: lists come in pages, each page a
//! call; where the real list answers whole objects, the simulated one hands over each
//! resource's read; and each API admits calls at a rate, throttling the rest.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use infra_core::engine::{Clock, Engine, ManualClock, MemoryStore, Options};
use infra_core::kinds::{Queues, Rule, SecurityGroup};
use infra_core::prelude::{AwsRegion, Expr, Fleet, Partial};
use infra_core::sdk::{Backend, ErrorKind, MARKER_KEY, RawTags};
use infra_testkit::sim::{CallFilter, Op, Outcome, SimCloud};

const PARIS: &str = "eu-west-3";

/// The kinds whose real list answers whole objects with their tags: EC2 instances and
/// security groups, RDS, Secrets Manager; every GCP kind; every kind of Scaleway's REST
/// APIs (not its S3 and SQS APIs).
fn complete_kinds(provider: &str) -> BTreeSet<&'static str> {
    let kinds: &[&'static str] = match provider {
        "aws" => &["awsInstance", "securityGroup", "postgres", "secrets"],
        "gcp" => &[
            "iam",
            "objectStore",
            "compute",
            "queues",
            "secrets",
            "imageRegistry",
            "postgres",
        ],
        _ => &[
            "iam",
            "compute",
            "secrets",
            "imageRegistry",
            "postgres",
            "functionNamespace",
            "function",
            "containerNamespace",
            "container",
        ],
    };
    kinds.iter().copied().collect()
}

fn region_of(provider: &str) -> &'static str {
    match provider {
        "aws" => PARIS,
        "gcp" => "europe-west1",
        _ => "fr-par",
    }
}

fn marked() -> RawTags {
    RawTags::from([
        (MARKER_KEY.to_string(), "shop".to_string()),
        ("team".to_string(), "web".to_string()),
    ])
}

/// Each kind's list: complete where the real one is, and then each item's reading is
/// the very read `read` answers, tags included (on the item, where the read carries
/// none); bare elsewhere.
#[tokio::test]
async fn complete_lists_hand_over_what_read_answers_and_bare_lists_do_not() {
    let cloud = SimCloud::new(11);
    for provider in ["aws", "gcp", "scaleway"] {
        let backend = cloud.backend(provider);
        let caps = backend.capabilities();
        assert_eq!(
            caps.complete_lists,
            complete_kinds(provider),
            "{provider}'s complete lists"
        );
        let region = region_of(provider);
        for kind in caps.kinds.clone() {
            let tags = if caps.ownership.contains(kind) || kind == "imageRegistry" {
                marked()
            } else {
                RawTags::new()
            };
            for name in ["one", "two"] {
                let name = format!("{}-{name}", kind.to_lowercase());
                cloud
                    .insert_foreign(provider, kind, region, &name, tags.clone())
                    .unwrap_or_else(|e| panic!("{provider} {kind}: {e}"));
            }
            let listed = backend.list(kind, region).await.unwrap();
            assert_eq!(listed.len(), 2, "{provider} {kind}");
            for item in &listed {
                let complete = caps.complete_lists.contains(kind);
                let what = format!("{provider} {kind} {}", item.name);
                let Some(reading) = item.reading() else {
                    assert!(!complete, "{what}: a complete list hands over the read");
                    assert!(item.raw_tags().is_none(), "{what}: a bare list is bare");
                    continue;
                };
                assert!(complete, "{what}: a bare list hands over no read");
                let read = backend.read(kind, region, &item.handle).await.unwrap();
                assert_eq!(format!("{reading:?}"), format!("{read:?}"), "{what}");
                assert_eq!(reading.raw_tags(), read.raw_tags(), "{what}");
                match (read.raw_tags(), caps.ownership.contains(kind)) {
                    (Some(_), _) => assert!(item.raw_tags().is_none(), "{what}"),
                    (None, true) => {
                        let owned = backend.ownership(kind, region, &item.handle).await;
                        assert_eq!(item.raw_tags(), Some(&owned.unwrap()), "{what}");
                        assert_eq!(item.raw_tags(), Some(&marked()), "{what}");
                    }
                    (None, false) => assert!(item.raw_tags().is_none(), "{what}"),
                }
            }
        }
    }
    // Switched off, every list is bare, and the backends say so.
    cloud.set_bare_lists(true);
    for provider in ["aws", "gcp", "scaleway"] {
        let backend = cloud.backend(provider);
        assert!(backend.capabilities().complete_lists.is_empty());
        let listed = backend.list("secrets", region_of(provider)).await.unwrap();
        assert_eq!(listed.len(), 2);
        assert!(
            listed
                .iter()
                .all(|l| l.reading().is_none() && l.raw_tags().is_none())
        );
    }
}

fn insert_secrets(cloud: &SimCloud, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let name = format!("s{i:03}");
            cloud
                .insert_foreign("scaleway", "secrets", "fr-par", &name, marked())
                .unwrap();
            name
        })
        .collect()
}

fn list_calls(cloud: &SimCloud) -> Vec<Outcome> {
    cloud
        .calls()
        .iter()
        .filter(|c| c.op == Op::List)
        .map(|c| c.outcome)
        .collect()
}

/// A list is as many calls as its pages (100 a page on Scaleway), each waiting its
/// latency, and it answers every resource once, in the order they were made.
#[tokio::test]
async fn a_list_is_one_call_per_page() {
    let clock = Arc::new(ManualClock::new());
    let cloud = SimCloud::with_clock(12, clock.clone());
    let scw: Arc<dyn Backend> = Arc::new(cloud.router("scaleway"));
    let list = |scw: &Arc<dyn Backend>| {
        let scw = Arc::clone(scw);
        async move { scw.list("secrets", "fr-par").await }
    };
    // An empty scope is one call, as is a full page.
    assert!(list(&scw).await.unwrap().is_empty());
    assert_eq!(list_calls(&cloud).len(), 1);
    let mut names = insert_secrets(&cloud, 100);
    cloud.clear_calls();
    assert_eq!(list(&scw).await.unwrap().len(), 100);
    assert_eq!(list_calls(&cloud).len(), 1, "one full page");

    names.extend((100..250).map(|i| {
        let name = format!("s{i:03}");
        cloud
            .insert_foreign("scaleway", "secrets", "fr-par", &name, marked())
            .unwrap();
        name
    }));
    cloud.clear_calls();
    cloud.set_latency(Duration::from_millis(100));
    let before = clock.now();
    let listed = list(&scw).await.unwrap();
    let got: Vec<_> = listed.iter().map(|l| l.name.clone()).collect();
    assert_eq!(got, names, "every resource once, in order");
    assert_eq!(list_calls(&cloud), [Outcome::Ok; 3], "three pages");
    assert_eq!(clock.now() - before, Duration::from_millis(300));
}

/// A page that fails fails the list (the router retries nothing); the client's retry
/// lists again from the first page.
#[tokio::test]
async fn a_failed_page_fails_the_list_and_a_retry_begins_it_again() {
    let cloud = SimCloud::new(13);
    insert_secrets(&cloud, 250);
    cloud.fail_nth_matching(CallFilter::op(Op::List), 2, ErrorKind::Unavailable, false);
    let err = cloud
        .router("scaleway")
        .list("secrets", "fr-par")
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unavailable);
    assert_eq!(
        list_calls(&cloud),
        [Outcome::Ok, Outcome::Failed(ErrorKind::Unavailable)]
    );

    cloud.clear_calls();
    cloud.fail_nth_matching(CallFilter::op(Op::List), 3, ErrorKind::Throttled, false);
    let listed = cloud
        .backend("scaleway")
        .list("secrets", "fr-par")
        .await
        .unwrap();
    assert_eq!(listed.len(), 250);
    assert_eq!(
        list_calls(&cloud),
        [
            Outcome::Ok,
            Outcome::Ok,
            Outcome::Failed(ErrorKind::Throttled),
            Outcome::Ok,
            Outcome::Ok,
            Outcome::Ok,
        ]
    );
}

/// A resource lagging behind its create is missing from the next list, on whichever
/// page it falls, and no other resource is.
#[tokio::test]
async fn a_lagging_resource_is_missing_from_its_page_only() {
    let cloud = SimCloud::new(14);
    insert_secrets(&cloud, 150);
    cloud.set_list_lag(1);
    cloud
        .insert_foreign("scaleway", "secrets", "fr-par", "late", marked())
        .unwrap();
    cloud.set_list_lag(0);
    let scw = cloud.router("scaleway");
    let first = scw.list("secrets", "fr-par").await.unwrap();
    assert_eq!(first.len(), 150);
    assert!(first.iter().all(|l| l.name != "late"));
    let second = scw.list("secrets", "fr-par").await.unwrap();
    assert_eq!(second.len(), 151);
    assert_eq!(second.last().map(|l| l.name.as_str()), Some("late"));
}

/// A rate of five a second: a burst of five is admitted, the sixth call is throttled
/// with the wait its bucket needs, another API is not, and calls spaced under the rate
/// are never throttled.
#[tokio::test]
async fn a_burst_above_the_rate_is_throttled_and_calls_under_it_are_not() {
    let clock = Arc::new(ManualClock::new());
    let cloud = SimCloud::with_clock(15, clock.clone());
    cloud.set_rate_limit(Some(5));
    assert_eq!(cloud.rate_limit(), Some(5));
    let aws = cloud.router("aws");
    for _ in 0..5 {
        aws.list("queues", PARIS).await.unwrap();
    }
    let err = aws.list("queues", PARIS).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Throttled);
    assert_eq!(err.code.as_deref(), Some("ThrottlingException"));
    assert_eq!(err.retry_after, Some(Duration::from_millis(200)));
    assert!(!err.may_have_been_sent);
    // Another API of the same provider has a bucket of its own.
    aws.list("queues", "us-east-1").await.unwrap();
    aws.list("securityGroup", PARIS).await.unwrap();
    let err = cloud.router("gcp").list("queues", "europe-west1").await;
    assert!(err.is_ok());
    // After the wait, one call again.
    clock.advance(Duration::from_millis(200));
    aws.list("queues", PARIS).await.unwrap();

    // Under the rate: one call every 250 ms at five a second, never throttled.
    clock.advance(Duration::from_secs(1));
    cloud.clear_calls();
    for _ in 0..40 {
        aws.read(
            "queues",
            PARIS,
            "https://sqs.eu-west-3.amazonaws.com/0/none",
        )
        .await
        .unwrap_err();
        clock.advance(Duration::from_millis(250));
    }
    let calls = cloud.calls();
    assert_eq!(calls.len(), 40);
    assert!(
        calls
            .iter()
            .all(|c| c.outcome == Outcome::Failed(ErrorKind::NotFound)),
        "read, found missing, never throttled"
    );
}

fn queue() -> Queues {
    Queues {
        fifo: Expr::lit(false),
        visibility_timeout_seconds: Partial::Unknown,
        retention_seconds: Partial::Unknown,
        dead_letter: Partial::Unknown,
        max_receive_count: Partial::Unknown,
        tags: Partial::Unknown,
    }
}

fn group(i: usize) -> SecurityGroup {
    SecurityGroup {
        description: Expr::lit(format!("group {i}")),
        vpc_id: Partial::Unknown,
        ingress: Expr::lit(BTreeSet::from([Rule::tcp(443, "10.0.0.0/8")])),
        egress: Partial::Unknown,
        tags: Partial::Unknown,
    }
}

/// A fleet of `groups` security groups and `queues` queues in Paris.
fn fleet(groups: usize, queues: usize) -> Fleet {
    let mut f = Fleet::builder("paced");
    for i in 0..groups {
        f.declare(AwsRegion::EuWest3, format!("group-{i}"), group(i));
    }
    for i in 0..queues {
        f.declare(AwsRegion::EuWest3, format!("queue-{i}"), queue());
    }
    f.build().expect("the fleet is sound")
}

/// A throttled create is refused before it reaches the world: nothing is created, the
/// call is logged as throttled and not applied.
#[tokio::test]
async fn a_throttled_create_creates_nothing() {
    let cloud = SimCloud::new(16);
    cloud.set_rate_limit(Some(1));
    let aws: Arc<dyn Backend> = Arc::new(cloud.router("aws"));
    let spec = infra_core::engine::settle(&queue(), &infra_core::engine::MapEnv::new()).unwrap();
    let marker = infra_core::sdk::Marker::new("paced");
    let create = |name: &'static str| {
        let aws = Arc::clone(&aws);
        let (spec, marker) = (spec.clone(), marker.clone());
        async move {
            aws.create(
                "queues",
                PARIS,
                name,
                infra_core::sdk::SettledSpec::new::<Queues>(&spec),
                &marker,
            )
            .await
        }
    };
    let _first = create("first").await.unwrap();
    let err = create("second").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Throttled);
    assert_eq!(err.retry_after, Some(Duration::from_secs(1)));
    assert!(!err.may_have_been_sent, "a throttled call was not acted on");
    assert_eq!(cloud.len(), 1);
    assert!(cloud.find("aws", "queues", "second").is_empty());
    let last = cloud.calls().pop().unwrap();
    assert_eq!(
        (last.op, last.outcome, last.applied),
        (Op::Create, Outcome::Failed(ErrorKind::Throttled), false)
    );
    assert!(
        cloud
            .writes()
            .iter()
            .all(|w| w.name.as_deref() == Some("first"))
    );
}

/// Through the engine and the cloud's client with its retry policy, an apply under a
/// rate of three calls a second per API converges: every call throttled is waited out,
/// and each declaration is exactly one resource, carrying the fleet's marker. A
/// no-change plan after it reads nothing for the kinds whose lists are complete.
#[tokio::test]
async fn an_apply_under_throttling_converges_with_one_resource_per_declaration() {
    let clock = Arc::new(ManualClock::new());
    let cloud = SimCloud::with_clock(17, clock.clone());
    cloud.set_rate_limit(Some(3));
    let engine = Engine::new(cloud.backends(), Arc::new(MemoryStore::new())).with_clock(clock);
    let fleet = fleet(12, 12);
    let outcome = engine
        .apply(&fleet.plan(), &Options::default())
        .await
        .expect("apply");
    assert!(outcome.result.is_success(), "{:?}", outcome.result);
    let throttled = cloud
        .calls()
        .iter()
        .filter(|c| c.outcome == Outcome::Failed(ErrorKind::Throttled))
        .count();
    assert!(throttled > 0, "the rate was felt");
    let mut per_name: BTreeMap<String, usize> = BTreeMap::new();
    for r in cloud.resources() {
        assert_eq!(
            r.raw_tags.get(MARKER_KEY).map(String::as_str),
            Some("paced"),
            "{} carries the fleet's marker",
            r.name
        );
        *per_name.entry(r.name).or_default() += 1;
    }
    assert_eq!(per_name.len(), 24);
    assert!(per_name.values().all(|n| *n == 1), "{per_name:?}");

    // A no-change plan: the groups come whole from their list; the queues (whose list
    // is bare) are read, and asked for their tags.
    cloud.clear_calls();
    let report = engine
        .plan(&fleet.plan(), &Options::default())
        .await
        .expect("plan");
    assert!(!report.has_changes());
    let answered = |op: Op, kind: &str| {
        cloud
            .calls()
            .iter()
            .filter(|c| c.op == op && c.kind == Some(kind) && c.outcome.is_ok())
            .count()
    };
    assert_eq!(answered(Op::Read, "securityGroup"), 0);
    assert_eq!(answered(Op::Ownership, "securityGroup"), 0);
    assert_eq!(answered(Op::Read, "queues"), 12);
    assert_eq!(answered(Op::Ownership, "queues"), 12);
}
