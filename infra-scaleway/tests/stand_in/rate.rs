//! The stand-in's rate limit per API (a token bucket answering 429 with a
//! `Retry-After` when empty): the backend's client waits as asked and tries again, and
//! a create refused by the limit makes exactly one resource, carrying the marker.

use std::sync::Arc;
use std::time::Duration;

use infra_core::sdk::{Backend, Clock, MARKER_KEY, ManualClock};
use infra_testkit::scaleway::{ScalewayOptions, ScalewayServer};

use super::support::{backend_on, raw, secret};
use super::{ORGANIZATION, PROJECT};

const REGION: &str = "fr-par";
const FLEET: &str = "rated";

#[tokio::test]
async fn a_create_refused_by_the_rate_limit_is_retried_and_makes_exactly_one_secret() {
    let clock = Arc::new(ManualClock::new());
    let shared: Arc<dyn Clock> = clock.clone();
    let options = ScalewayOptions::new().clock(shared).rate_per_second(1);
    let server = ScalewayServer::start_with(PROJECT, ORGANIZATION, options)
        .await
        .expect("the stand-in starts");
    let backend = backend_on(&server, &clock, None);
    let secrets = format!("/secret-manager/v1beta1/regions/{REGION}/secrets");
    let listing = format!("{secrets}?project_id={PROJECT}");

    // The one token of the second is spent: the next call is refused, and says when to
    // come back.
    let (status, _) = raw(&server, "GET", &listing, None).await;
    assert_eq!(status, 200);
    let refused = reqwest::Client::new()
        .get(format!("{}{listing}", server.address()))
        .header("X-Auth-Token", server.token())
        .send()
        .await
        .expect("the stand-in answers");
    assert_eq!(refused.status().as_u16(), 429);
    assert_eq!(
        refused
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    server.clear_requests();

    let before = clock.now();
    let handle = secret(backend.as_ref(), REGION, "rated-secret", "value", FLEET).await;
    let requests = server.requests();
    let creates: Vec<u16> = requests
        .iter()
        .filter(|r| r.method == "POST" && r.path == secrets)
        .map(|r| r.status)
        .collect();
    assert!(
        creates.contains(&429),
        "the create was refused first: {creates:?}"
    );
    assert_eq!(
        creates.iter().filter(|s| **s == 200).count(),
        1,
        "exactly one create was carried out: {creates:?}"
    );
    assert!(
        clock.now() - before >= Duration::from_secs(1),
        "the client waited as the Retry-After asked"
    );

    // Exactly one secret of that name exists, and it is this fleet's.
    server.restore();
    let listed = backend.list("secrets", REGION).await.expect("secrets list");
    let named: Vec<_> = listed.iter().filter(|l| l.name == "rated-secret").collect();
    assert_eq!(named.len(), 1, "{listed:?}");
    assert_eq!(named[0].handle, handle);
    let tags = backend
        .ownership("secrets", REGION, &handle)
        .await
        .expect("its tags are read");
    assert_eq!(tags.get(MARKER_KEY).map(String::as_str), Some(FLEET));
    server.shutdown().await;
}

#[tokio::test]
async fn without_a_rate_the_stand_in_refuses_nothing() {
    let clock = Arc::new(ManualClock::new());
    let shared: Arc<dyn Clock> = clock.clone();
    let server =
        ScalewayServer::start_with(PROJECT, ORGANIZATION, ScalewayOptions::new().clock(shared))
            .await
            .expect("the stand-in starts");
    let backend = backend_on(&server, &clock, None);
    for _ in 0..50 {
        backend
            .list("secrets", REGION)
            .await
            .expect("never refused");
    }
    assert!(server.requests().iter().all(|r| r.status == 200));
    server.shutdown().await;
}
