//! `DnsBackend` called directly through its typed `KindBackend<DnsRecord>`, one
//! `# Behavior` sentence of the `Backend` trait at a time; and the router it is handed
//! out as, for what the router answers on its own (provider, capabilities, account, a
//! kind or a secret it does not serve).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use custom_provider::{
    ACCOUNT_ID, Access, DEFAULT_TTL, DnsBackend, DnsRecordObserved, DnsRecordSettled, DnsService,
    NewRecord, RecordType,
};
use infra_core::sdk::layer::{Latency, Layered};
use infra_core::sdk::{
    Backend, CreateArgs, DeleteArgs, KindBackend, ListArgs, OwnershipArgs, ReadArgs, UpdateArgs,
};
use infra_core::{
    engine::{Clock, ManualClock},
    prelude::Partial,
    sdk::{ErrorKind, MARKER_KEY, Marker},
};
use serde_json::json;

const KIND: &str = "dnsRecord";

fn backend() -> (DnsService, DnsBackend) {
    let service = DnsService::new();
    (service.clone(), DnsBackend::new(service))
}

/// The backend as the engine takes it.
fn router() -> (DnsService, Arc<dyn Backend>) {
    let service = DnsService::new();
    (service.clone(), DnsBackend::new(service).into_backend())
}

/// The names listed in `region`.
async fn names(backend: &DnsBackend, region: &str) -> Vec<String> {
    backend
        .list(ListArgs::new(region))
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.name)
        .collect()
}

fn cname(target: &str) -> DnsRecordSettled {
    DnsRecordSettled {
        record_type: RecordType::Cname,
        zone: "example.com".into(),
        value: target.into(),
        ttl: Partial::Unknown,
        tags: Partial::Unknown,
    }
}

#[tokio::test]
async fn it_serves_dns_records_with_readable_ownership() {
    let (_, backend) = router();
    assert_eq!(backend.provider(), "dns");
    let caps = backend.capabilities();
    assert_eq!(caps.kinds, [KIND].into());
    assert_eq!(caps.ownership, [KIND].into());
    assert!(caps.duplicate_names.is_empty());
    assert_eq!(backend.unreachable(), None);
}

#[tokio::test]
async fn account_answers_the_same_id_every_time() {
    let (_, backend) = router();
    assert_eq!(backend.account().await.unwrap(), ACCOUNT_ID);
    assert_eq!(backend.account().await.unwrap(), ACCOUNT_ID);
}

#[tokio::test]
async fn list_answers_one_region_whatever_the_owner() {
    let (service, backend) = backend();
    assert!(
        names(&backend, "eu").await.is_empty(),
        "empty, not NotFound"
    );
    service
        .create_record(
            "eu",
            NewRecord::new("foreign", "example.com", RecordType::A, "192.0.2.1"),
        )
        .unwrap();
    let marker = Marker::new("demo");
    let target = cname("a.example.net");
    backend
        .create(CreateArgs::new("eu", "ours", &target, &marker))
        .await
        .unwrap()
        .expect_done("the service never defers");
    backend
        .create(CreateArgs::new("us", "elsewhere", &target, &marker))
        .await
        .unwrap()
        .expect_done("the service never defers");
    assert_eq!(names(&backend, "eu").await, ["foreign", "ours"]);

    service.set_access(Access::Denied);
    assert_eq!(
        backend.list(ListArgs::new("eu")).await.unwrap_err().kind,
        ErrorKind::Denied
    );
    service.set_access(Access::Full);
    assert_eq!(
        backend.list(ListArgs::new("mars")).await.unwrap_err().kind,
        ErrorKind::Invalid
    );
}

#[tokio::test]
async fn the_router_refuses_a_kind_it_does_not_realise() {
    let (_, backend) = router();
    assert!(backend.list(KIND, "eu").await.unwrap().is_empty());
    assert_eq!(
        backend.list("objectStore", "eu").await.unwrap_err().kind,
        ErrorKind::Invalid
    );
}

#[tokio::test]
async fn create_writes_the_marker_in_the_same_call_and_reports_what_the_service_filled_in() {
    let (service, backend) = backend();
    let settled = DnsRecordSettled {
        tags: Partial::Known(BTreeMap::from([("team".to_owned(), "web".to_owned())])),
        ..cname("Assets.Example.NET")
    };
    let made = backend
        .create(CreateArgs::new(
            "eu",
            "assets",
            &settled,
            &Marker::new("demo"),
        ))
        .await
        .unwrap()
        .expect_done("the service never defers");
    let writes = service.writes();
    assert_eq!(
        writes.len(),
        1,
        "one call: the record and its marker together"
    );

    // The observed state comes back typed.
    assert_eq!(
        made.observed(),
        &DnsRecordObserved {
            id: made.handle().to_owned(),
            fqdn: "assets.example.com".into()
        }
    );
    // Every field the service knows, in the kind's form: the CNAME without the dot the
    // service adds, the TTL it defaulted, the tags with the marker.
    assert_eq!(
        serde_json::Value::Object(made.reported().clone()),
        json!({
            "recordType": "CNAME",
            "zone": "example.com",
            "value": "assets.example.net",
            "ttl": DEFAULT_TTL,
            "tags": {MARKER_KEY: "demo", "team": "web"},
        })
    );
    let tags = backend
        .ownership(OwnershipArgs::new("eu", made.handle()))
        .await
        .unwrap();
    assert_eq!(tags.get(MARKER_KEY).map(String::as_str), Some("demo"));

    // The read says the same as the create's answer.
    let read = backend
        .read(ReadArgs::new("eu", made.handle()))
        .await
        .unwrap();
    assert_eq!(read.reported(), made.reported());
    assert_eq!(read.observed(), made.observed());
}

#[tokio::test]
async fn a_declared_marker_tag_never_overrides_the_fleets_marker() {
    let (_, backend) = backend();
    let settled = DnsRecordSettled {
        tags: Partial::Known(BTreeMap::from([(
            MARKER_KEY.to_owned(),
            "someone-else".to_owned(),
        )])),
        ..cname("a.example.net")
    };
    let made = backend
        .create(CreateArgs::new(
            "eu",
            "assets",
            &settled,
            &Marker::new("demo"),
        ))
        .await
        .unwrap()
        .expect_done("the service never defers");
    let tags = backend
        .ownership(OwnershipArgs::new("eu", made.handle()))
        .await
        .unwrap();
    assert_eq!(tags[MARKER_KEY], "demo");
}

#[tokio::test]
async fn a_name_taken_is_a_conflict_and_a_bad_value_is_invalid() {
    let (_, backend) = backend();
    let marker = Marker::new("demo");
    let (first, second) = (cname("a.example.net"), cname("b.example.net"));
    backend
        .create(CreateArgs::new("eu", "assets", &first, &marker))
        .await
        .unwrap()
        .expect_done("the service never defers");
    let twin = backend
        .create(CreateArgs::new("eu", "assets", &second, &marker))
        .await
        .unwrap_err();
    assert_eq!(
        (twin.kind, twin.code.as_deref()),
        (ErrorKind::Conflict, Some("NameTaken"))
    );
    let bad = DnsRecordSettled {
        record_type: RecordType::A,
        ..cname("a.example.net")
    };
    let err = backend
        .create(CreateArgs::new("eu", "api", &bad, &marker))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid);
    assert!(!err.may_have_been_sent);
}

#[tokio::test]
async fn a_missing_record_is_not_found_and_a_denied_one_is_denied() {
    let (service, backend) = backend();
    let target = cname("a.example.net");
    let missing = backend
        .read(ReadArgs::new("eu", "rr-0000ffff"))
        .await
        .unwrap_err();
    assert_eq!(
        (missing.kind, missing.code.as_deref()),
        (ErrorKind::NotFound, Some("NoSuchRecord"))
    );
    for err in [
        backend
            .ownership(OwnershipArgs::new("eu", "rr-0000ffff"))
            .await
            .unwrap_err(),
        backend
            .delete(DeleteArgs::new("eu", "rr-0000ffff"))
            .await
            .unwrap_err(),
        backend
            .update(UpdateArgs::new("eu", "rr-0000ffff", &target))
            .await
            .unwrap_err(),
    ] {
        assert_eq!(err.kind, ErrorKind::NotFound);
    }

    let made = backend
        .create(CreateArgs::new(
            "eu",
            "assets",
            &target,
            &Marker::new("demo"),
        ))
        .await
        .unwrap()
        .expect_done("the service never defers");
    let handle = made.handle();
    service.set_access(Access::ListOnly);
    for err in [
        backend.read(ReadArgs::new("eu", handle)).await.unwrap_err(),
        backend
            .ownership(OwnershipArgs::new("eu", handle))
            .await
            .unwrap_err(),
        backend
            .delete(DeleteArgs::new("eu", handle))
            .await
            .unwrap_err(),
    ] {
        assert_eq!(
            err.kind,
            ErrorKind::Denied,
            "a denial is never absence: {err}"
        );
    }
    service.set_access(Access::Full);
    service.fail_reads(1);
    let err = backend.read(ReadArgs::new("eu", handle)).await.unwrap_err();
    assert!(
        err.kind != ErrorKind::NotFound && err.kind.is_transient(),
        "{err}"
    );
}

#[tokio::test]
async fn update_changes_the_mutable_fields_keeps_the_marker_and_is_idempotent() {
    let (service, backend) = backend();
    let made = backend
        .create(CreateArgs::new(
            "eu",
            "assets",
            &cname("a.example.net"),
            &Marker::new("demo"),
        ))
        .await
        .unwrap()
        .expect_done("the service never defers");
    let handle = made.handle();
    let changed = DnsRecordSettled {
        ttl: Partial::Known(3600),
        tags: Partial::Known(BTreeMap::from([("team".to_owned(), "ops".to_owned())])),
        ..cname("b.example.net")
    };
    let first = backend
        .update(UpdateArgs::new("eu", handle, &changed))
        .await
        .unwrap()
        .expect_done("the service never defers");
    let second = backend
        .update(UpdateArgs::new("eu", handle, &changed))
        .await
        .unwrap()
        .expect_done("the service never defers");
    assert_eq!(first.reported(), second.reported());
    assert_eq!(
        serde_json::Value::Object(first.reported().clone()),
        json!({
            "recordType": "CNAME",
            "zone": "example.com",
            "value": "b.example.net",
            "ttl": 3600,
            "tags": {MARKER_KEY: "demo", "team": "ops"},
        })
    );

    // Unsaid fields are left as they are.
    let quiet = backend
        .update(UpdateArgs::new("eu", handle, &cname("b.example.net")))
        .await
        .unwrap()
        .expect_done("the service never defers");
    assert_eq!(quiet.reported(), first.reported());

    // A forces-replace field is never changed in place.
    let retyped = DnsRecordSettled {
        record_type: RecordType::Txt,
        ..cname("b.example.net")
    };
    let before = service.get_record("eu", handle).unwrap();
    let err = backend
        .update(UpdateArgs::new("eu", handle, &retyped))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid);
    assert_eq!(service.get_record("eu", handle).unwrap(), before);
}

#[tokio::test]
async fn delete_removes_the_record() {
    let (_, backend) = backend();
    let made = backend
        .create(CreateArgs::new(
            "eu",
            "assets",
            &cname("a.example.net"),
            &Marker::new("demo"),
        ))
        .await
        .unwrap()
        .expect_done("the service never defers");
    backend
        .delete(DeleteArgs::new("eu", made.handle()))
        .await
        .unwrap();
    assert_eq!(
        backend
            .read(ReadArgs::new("eu", made.handle()))
            .await
            .unwrap_err()
            .kind,
        ErrorKind::NotFound
    );
    assert!(names(&backend, "eu").await.is_empty());
}

#[tokio::test]
async fn a_lost_response_may_have_been_sent() {
    let (service, backend) = backend();
    service.lose_next_response();
    let err = backend
        .create(CreateArgs::new(
            "eu",
            "assets",
            &cname("a.example.net"),
            &Marker::new("demo"),
        ))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unavailable);
    assert!(err.may_have_been_sent);
    assert_eq!(service.find("assets").len(), 1, "and it was");
}

#[tokio::test]
async fn there_are_no_secrets_here() {
    let (_, backend) = router();
    let err = backend.secret_value("eu", "rr-00000001").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid);
}

/// Latency is a layer around the router, not a setting of the backend: every call
/// waits on the injected clock first.
#[tokio::test]
async fn latency_is_waited_on_the_injected_clock() {
    let clock = Arc::new(ManualClock::new());
    let (_, inner) = router();
    let backend: Arc<dyn Backend> = Layered::wrap(
        inner,
        Latency::new(clock.clone(), Duration::from_millis(250)),
    );
    backend.list(KIND, "eu").await.unwrap();
    backend.account().await.unwrap();
    assert_eq!(clock.now(), Duration::from_millis(500));
}
