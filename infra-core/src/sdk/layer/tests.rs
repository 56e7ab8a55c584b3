//! The router and the layers, over a small in-memory kind implementation.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use super::*;
use crate::Partial;
use crate::clock::{Clock as _, ManualClock};
use crate::kinds::{ObjectStore, ObjectStoreObserved, ObjectStoreReported};
use crate::sdk::{
    CreateArgs, Deferral, DeleteArgs, KindBackend, ListArgs, OwnershipArgs, ReadArgs, Reading,
    Router, UpdateArgs,
};
use crate::settle::{MapEnv, settle};

/// Buckets in memory: name → tags. A bucket named `gated` is never written: its
/// create and update are deferred for approval.
#[derive(Default)]
struct Buckets(Mutex<BTreeMap<String, RawTags>>);

impl Buckets {
    fn reading(&self, name: &str) -> Result<Reading<ObjectStore>, BackendError> {
        let tags = self
            .0
            .lock()
            .unwrap()
            .get(name)
            .cloned()
            .ok_or_else(|| BackendError::not_found(format!("no bucket {name}")))?;
        let observed = ObjectStoreObserved {
            id: name.to_owned(),
            endpoint: Partial::Unknown,
        };
        let reported = ObjectStoreReported {
            tags: Partial::Known(tags.clone()),
            ..Default::default()
        };
        Ok(Reading::new(name, observed, reported).with_raw_tags(tags))
    }
}

#[async_trait]
impl KindBackend<ObjectStore> for Buckets {
    async fn list(&self, _: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        Ok(self
            .0
            .lock()
            .unwrap()
            .keys()
            .map(|n| Listed::new(n.clone(), n.clone()))
            .collect())
    }
    async fn read(&self, args: ReadArgs<'_>) -> Result<Reading<ObjectStore>, BackendError> {
        self.reading(args.handle)
    }
    async fn create(
        &self,
        args: CreateArgs<'_, ObjectStore>,
    ) -> Result<Written<Reading<ObjectStore>>, BackendError> {
        if args.name == "gated" {
            return Ok(Deferral::awaiting_approval("plan 7 awaits approval").into());
        }
        let mut tags = args.spec.tags.known().cloned().unwrap_or_default();
        tags.insert(args.marker.key().into(), args.marker.value().into());
        self.0.lock().unwrap().insert(args.name.to_owned(), tags);
        Ok(Written::Done(self.reading(args.name)?))
    }
    async fn update(
        &self,
        args: UpdateArgs<'_, ObjectStore>,
    ) -> Result<Written<Reading<ObjectStore>>, BackendError> {
        self.reading(args.handle).map(Written::Done)
    }
    async fn delete(&self, args: DeleteArgs<'_>) -> Result<(), BackendError> {
        self.0
            .lock()
            .unwrap()
            .remove(args.handle)
            .map(|_| ())
            .ok_or_else(|| BackendError::not_found(args.handle))
    }
    async fn ownership(&self, args: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        Ok(self
            .reading(args.handle)?
            .into_sighting()
            .raw_tags()
            .cloned()
            .unwrap_or_default())
    }
}

fn router() -> Arc<dyn Backend> {
    Arc::new(Router::new("acme", "acct-1".to_owned()).kind::<ObjectStore>(Buckets::default()))
}

fn bucket() -> <ObjectStore as crate::Settle>::Settled {
    settle(&ObjectStore::new(), &MapEnv::default()).unwrap()
}

async fn create(backend: &dyn Backend, name: &str) -> Result<Written, BackendError> {
    let spec = bucket();
    backend
        .create(
            "objectStore",
            "moon-1",
            name,
            SettledSpec::new::<ObjectStore>(&spec),
            &Marker::new("shop"),
        )
        .await
}

#[tokio::test]
async fn the_router_routes_by_kind_and_names_what_it_realises_when_asked_for_another() {
    let backend = router();
    assert_eq!(backend.account().await.unwrap(), "acct-1");
    let caps = backend.capabilities();
    assert!(caps.kinds.contains("objectStore") && caps.ownership.contains("objectStore"));
    let made = create(&*backend, "assets").await.unwrap().done().unwrap();
    assert_eq!(made.handle, "assets");
    let tags = backend
        .ownership("objectStore", "moon-1", "assets")
        .await
        .unwrap();
    assert_eq!(
        tags.get(crate::backend::MARKER_KEY).map(String::as_str),
        Some("shop")
    );
    let err = backend.list("queues", "moon-1").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid);
    assert!(
        err.message.contains("realises: objectStore"),
        "{}",
        err.message
    );
    let secret = backend.secret_value("moon-1", "x").await.unwrap_err();
    assert_eq!(secret.kind, ErrorKind::Invalid);
    let mark = backend
        .mark("objectStore", "moon-1", "assets", &Marker::new("shop"))
        .await
        .unwrap_err();
    assert_eq!(mark.kind, ErrorKind::Invalid, "the default mark refuses");
}

#[tokio::test]
async fn a_spec_of_another_kind_is_refused_before_the_kind_sees_it() {
    let backend = router();
    let spec = bucket();
    let wrong = SettledSpec::new::<ObjectStore>(&spec);
    // Routed to objectStore, so it fits; the same spec under another kind id would not.
    let router = Router::new("acme", "a".to_owned()).kind::<crate::kinds::Queues>(NoQueues);
    let err = router
        .create("queues", "moon-1", "q", wrong, &Marker::new("shop"))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid);
    assert!(err.message.contains("objectStore spec"), "{}", err.message);
    drop(backend);
}

struct NoQueues;
#[async_trait]
impl KindBackend<crate::kinds::Queues> for NoQueues {
    async fn list(&self, _: ListArgs<'_>) -> Result<Vec<Listed>, BackendError> {
        Ok(vec![])
    }
    async fn read(&self, a: ReadArgs<'_>) -> Result<Reading<crate::kinds::Queues>, BackendError> {
        Err(BackendError::not_found(a.handle))
    }
    async fn create(
        &self,
        _: CreateArgs<'_, crate::kinds::Queues>,
    ) -> Result<Written<Reading<crate::kinds::Queues>>, BackendError> {
        panic!("a spec of another kind reached the kind")
    }
    async fn update(
        &self,
        _: UpdateArgs<'_, crate::kinds::Queues>,
    ) -> Result<Written<Reading<crate::kinds::Queues>>, BackendError> {
        panic!("a spec of another kind reached the kind")
    }
    async fn delete(&self, a: DeleteArgs<'_>) -> Result<(), BackendError> {
        Err(BackendError::not_found(a.handle))
    }
    async fn ownership(&self, a: OwnershipArgs<'_>) -> Result<RawTags, BackendError> {
        Err(BackendError::not_found(a.handle))
    }
}

#[tokio::test]
async fn a_deferred_write_is_an_answer_not_an_error_and_the_recorder_says_so() {
    let recorder = Recorder::new();
    let backend = Layered::wrap(router(), recorder.clone());
    let written = create(&*backend, "gated").await.unwrap();
    let deferral = written.deferral().expect("deferred");
    assert_eq!(
        deferral.reason,
        crate::sdk::DeferralReason::AwaitingApproval
    );
    assert!(
        backend
            .list("objectStore", "moon-1")
            .await
            .unwrap()
            .is_empty()
    );
    let _ = backend.read("objectStore", "moon-1", "gated").await;
    let calls = recorder.calls();
    let ended: Vec<_> = calls.iter().map(|c| (c.op, c.ended)).collect();
    assert_eq!(
        ended,
        [
            (Op::Create, Ended::Deferred),
            (Op::List, Ended::Ok),
            (Op::Read, Ended::Failed(ErrorKind::NotFound)),
        ]
    );
    assert_eq!(calls[0].target.as_deref(), Some("gated"));
    assert_eq!(calls[0].provider, "acme");
    assert_eq!(recorder.writes().len(), 1);
}

#[tokio::test]
async fn faults_hit_the_calls_they_name_as_often_as_they_say_and_a_lost_answer_still_lands() {
    let faults = Faults::new();
    faults
        .add(Fault::on(Op::List).fails(ErrorKind::Throttled).times(2))
        .add(Fault::on(Op::Create).target("lost").answer_lost());
    let backend = Layered::wrap(router(), faults.clone());
    for _ in 0..2 {
        let e = backend.list("objectStore", "moon-1").await.unwrap_err();
        assert_eq!(
            (e.kind, e.may_have_been_sent),
            (ErrorKind::Throttled, false)
        );
    }
    assert!(
        backend.list("objectStore", "moon-1").await.is_ok(),
        "only twice"
    );
    let e = create(&*backend, "lost").await.unwrap_err();
    assert!(e.may_have_been_sent);
    // The create reached the cloud: the bucket is there, its answer was lost.
    let listed = backend.list("objectStore", "moon-1").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert!(create(&*backend, "kept").await.is_ok(), "other names pass");
    assert_eq!(faults.hits(), 3);
}

#[tokio::test]
async fn latency_waits_on_the_injected_clock_and_layers_stack() {
    let clock = Arc::new(ManualClock::new());
    let latency = Latency::new(clock.clone(), Duration::from_secs(1))
        .for_op(Op::Create, Duration::from_secs(10));
    let recorder = Recorder::new();
    let backend: Arc<dyn Backend> = Layered::wrap(
        Layered::wrap(Layered::wrap(router(), latency), Traced),
        recorder.clone(),
    );
    backend.list("objectStore", "moon-1").await.unwrap();
    let _ = create(&*backend, "slow")
        .await
        .unwrap()
        .expect_done("the bucket is written");
    assert_eq!(clock.now(), Duration::from_secs(11));
    assert_eq!(recorder.count(Op::List), 1);
    assert_eq!(recorder.count(Op::Create), 1);
    assert_eq!(backend.provider(), "acme");
}

/// A layer that answers a call with the wrong shape is reported, not guessed around.
struct Confused;
#[async_trait]
impl Layer for Confused {
    async fn call(&self, _: Call<'_>, _: Next<'_>) -> Result<Answer, BackendError> {
        Ok(Answer::Deleted)
    }
}

#[tokio::test]
async fn an_answer_of_the_wrong_shape_is_an_error_naming_the_call() {
    let backend = Layered::wrap(router(), Confused);
    let e = backend.list("objectStore", "moon-1").await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Other);
    assert!(e.message.contains("list call"), "{}", e.message);
}

#[tokio::test]
async fn the_retry_layer_waits_out_throttling_and_never_repeats_a_create_that_may_have_landed() {
    let clock = Arc::new(ManualClock::new());
    let faults = Faults::new();
    faults
        .add(Fault::on(Op::List).fails(ErrorKind::Throttled).times(3))
        .add(
            Fault::on(Op::Create)
                .target("throttled")
                .fails(ErrorKind::Throttled)
                .times(2),
        )
        .add(Fault::on(Op::Create).target("lost").answer_lost().times(1));
    let retrier = crate::sdk::Retrier::new(crate::sdk::RetryPolicy::default(), clock.clone())
        .with_jitter(crate::sdk::Jitter::seeded(3));
    let backend = Layered::wrap(Layered::wrap(router(), faults.clone()), Retry::new(retrier));
    // Throttled three times, then answered: the caller sees the answer.
    assert!(backend.list("objectStore", "moon-1").await.is_ok());
    assert!(
        clock.now() > Duration::ZERO,
        "the retries waited on the clock"
    );
    // A throttled create did nothing: it is retried until it is made, once.
    create(&*backend, "throttled")
        .await
        .unwrap()
        .expect_done("made after the throttling");
    // A create whose answer was lost may have landed: it is not repeated, and the
    // caller is told it may have been sent.
    let lost = create(&*backend, "lost").await.unwrap_err();
    assert!(lost.may_have_been_sent);
    assert_eq!(faults.hits(), 6);
    let listed = backend.list("objectStore", "moon-1").await.unwrap();
    let names: Vec<_> = listed.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["lost", "throttled"]);
}

#[tokio::test]
async fn an_observing_retry_layer_tries_writes_once() {
    let clock = Arc::new(ManualClock::new());
    let faults = Faults::new();
    faults
        .add(Fault::on(Op::Read).fails(ErrorKind::Unavailable).times(1))
        .add(Fault::on(Op::Create).fails(ErrorKind::Throttled).times(1));
    let retrier = crate::sdk::Retrier::new(crate::sdk::RetryPolicy::default(), clock);
    let backend = Layered::wrap(
        Layered::wrap(router(), faults.clone()),
        Retry::observing_only(retrier),
    );
    let refused = create(&*backend, "once").await.unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Throttled);
    create(&*backend, "once")
        .await
        .unwrap()
        .expect_done("the second call is the caller's");
    assert!(backend.read("objectStore", "moon-1", "once").await.is_ok());
    assert_eq!(faults.hits(), 2);
}

/// Lists made whole: each bucket handed over with its read.
struct Whole;

#[async_trait]
impl Layer for Whole {
    fn capabilities(&self, mut inner: Capabilities) -> Capabilities {
        inner.complete_lists.insert("objectStore");
        inner
    }

    async fn call(&self, call: Call<'_>, next: Next<'_>) -> Result<Answer, BackendError> {
        let Call::List { kind, region } = call else {
            return next.run(call).await;
        };
        let Answer::List(listed) = next.run(call).await? else {
            return Err(BackendError::invalid("a list answers a list"));
        };
        let mut whole = Vec::new();
        for l in listed {
            let reading = next.backend().read(kind, region, &l.handle).await?;
            whole.push(Listed::new(l.name, l.handle).with_reading(reading));
        }
        Ok(Answer::List(whole))
    }
}

#[tokio::test]
async fn bare_lists_keep_names_and_handles_and_drop_the_readings_and_the_claim() {
    let router = router();
    for name in ["a", "b"] {
        let made = create(router.as_ref(), name).await.unwrap();
        assert!(made.done().is_some(), "{name} is made at once");
    }
    let whole = Layered::wrap(Arc::clone(&router), Whole);
    assert!(whole.capabilities().complete_lists.contains("objectStore"));
    let listed = whole.list("objectStore", "moon-1").await.unwrap();
    assert!(listed.iter().all(|l| l.reading().is_some()));

    let bare = Layered::wrap(whole, BareLists);
    assert!(bare.capabilities().complete_lists.is_empty());
    let listed = bare.list("objectStore", "moon-1").await.unwrap();
    let named: Vec<(&str, &str)> = listed
        .iter()
        .map(|l| (l.name.as_str(), l.handle.as_str()))
        .collect();
    assert_eq!(named, [("a", "a"), ("b", "b")]);
    assert!(listed.iter().all(|l| l.reading().is_none()));
}
