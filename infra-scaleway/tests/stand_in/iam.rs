//! IAM applications and policies: the conformance suite with a sample Scaleway can
//! serve (real permission-set names, no assumer), and what the suite does not reach:
//! the marker and the region in the creating call, the policy's rules on the wire and
//! replaced in place, refusals before any call, denial, throttling, a lost answer,
//! listing per region, `assumedBy`, policies made elsewhere, and `mark`.

use std::collections::BTreeSet;

use infra_core::kinds::{Iam, IamSettled, Tags};
use infra_core::prelude::{Expr, Partial, Scaleway};
use infra_core::sdk::{Backend, ErrorKind, MARKER_KEY, Marker};
use infra_testkit::conformance::{KindSample, Variant};
use infra_testkit::scaleway::{ScalewayProduct, ScalewayServer};
use serde_json::{Value, json};

use super::support::{
    self, calls, create, lines, passes_conformance, raw, stand_in_and_backend, untried, update,
};
use super::{ORGANIZATION, PROJECT};

const HERE: &str = "fr-par";
const THERE: &str = "nl-ams";
const APPLICATIONS: &str = "/iam/v1alpha1/applications";
const POLICIES: &str = "/iam/v1alpha1/policies";

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn spec(policies: &[&str], description: Option<&str>, tags: Option<&[(&str, &str)]>) -> IamSettled {
    IamSettled {
        policies: set(policies),
        assumed_by: BTreeSet::new(),
        description: description.map_or(Partial::Unknown, |d| Partial::Known(d.to_owned())),
        tags: tags.map_or(Partial::Unknown, |t| Partial::Known(support::tags(t))),
    }
}

/// An identity granted `policies`, saying nothing else.
fn grants(policies: &[&str]) -> IamSettled {
    spec(policies, None, None)
}

/// Every policy of the organization, straight from the stand-in.
async fn all_policies(server: &ScalewayServer) -> Vec<Value> {
    let path = format!("{POLICIES}?organization_id={ORGANIZATION}&page_size=100");
    let (status, body) = raw(server, "GET", &path, None).await;
    assert_eq!(status, 200, "{body}");
    body["policies"].as_array().cloned().unwrap_or_default()
}

/// The writes (non-GET requests) recorded, as `METHOD path`.
fn writes(server: &ScalewayServer) -> Vec<String> {
    lines(&support::writes(server))
}

fn iam_sample() -> KindSample {
    KindSample::new::<Scaleway, Iam>(|fleet, region, name, variant| {
        let mut policies = set(&["ObjectStorageReadOnly"]);
        let mut tags = Tags::from([("suite".to_owned(), "conformance".to_owned())]);
        if variant == Variant::Mutable {
            policies.insert("SecretManagerReadOnly".to_owned());
            tags.insert("variant".to_owned(), "mutable".to_owned());
        }
        fleet.declare(
            region,
            name,
            Iam {
                policies: Expr::lit(policies),
                assumed_by: Expr::lit(BTreeSet::new()),
                description: Partial::Known(Expr::lit(
                    "an identity of the conformance suite".to_owned(),
                )),
                tags: Partial::Known(Expr::lit(tags)),
            },
        );
    })
    .mutable(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iam_passes_the_conformance_suite_with_permission_sets_and_no_assumer() {
    let (server, backend) = stand_in_and_backend().await;
    passes_conformance(&server, backend, vec![iam_sample()]).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_create_carries_marker_and_region_and_the_policy_grants_on_the_project() {
    let (server, backend) = stand_in_and_backend().await;
    let declared = spec(
        &["SecretManagerReadOnly", "ObjectStorageReadOnly"],
        Some("Runs the web front end."),
        Some(&[("team", "web")]),
    );
    let read = create(&*backend, HERE, "web front", &declared, "shop")
        .await
        .expect("created");
    let id = read.handle.clone();

    let app_create = calls(&server, "POST", APPLICATIONS);
    assert_eq!(app_create.len(), 1, "one application create");
    assert_eq!(
        app_create[0].body,
        json!({
            "name": "web front",
            "description": "Runs the web front end.",
            "organization_id": ORGANIZATION,
            "tags": ["infra-region=fr-par", "managed-by-infra=shop", "team=web"],
        }),
        "the marker and the region travel in the creating call"
    );
    let policy_create = calls(&server, "POST", POLICIES);
    assert_eq!(policy_create.len(), 1, "one policy create");
    let body = &policy_create[0].body;
    assert_eq!(body["application_id"], id.as_str());
    assert_eq!(body["organization_id"], ORGANIZATION);
    assert_eq!(body["name"], "web front");
    assert_eq!(body["tags"], json!(["managed-by-infra=shop"]));
    assert_eq!(
        body["rules"],
        json!([{
            "permission_set_names": ["ObjectStorageReadOnly", "SecretManagerReadOnly"],
            "project_ids": [PROJECT],
        }]),
        "one rule: the declared permission sets, on the configured project"
    );

    let reported = read.reported();
    assert_eq!(
        reported["policies"],
        json!(["ObjectStorageReadOnly", "SecretManagerReadOnly"])
    );
    assert_eq!(reported["description"], "Runs the web front end.");
    assert_eq!(
        reported["tags"],
        json!({"managed-by-infra": "shop", "team": "web"}),
        "the region is bookkeeping; the marker is reported for the engine to strip"
    );
    assert!(
        reported.get("assumedBy").is_none_or(Value::is_null),
        "assumedBy is never said: {reported:?}"
    );
    assert_eq!(read.observed_json()["id"], id.as_str());
    let raw_tags = backend
        .ownership("iam", HERE, &id)
        .await
        .expect("ownership");
    assert_eq!(raw_tags.get(MARKER_KEY).map(String::as_str), Some("shop"));
    assert_eq!(raw_tags.get("infra-region").map(String::as_str), Some(HERE));

    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_region_lists_its_own_and_delete_leaves_nothing() {
    let (server, backend) = stand_in_and_backend().await;
    let declared = grants(&["ObjectStorageReadOnly"]);
    let id = create(&*backend, HERE, "web front", &declared, "shop")
        .await
        .expect("created")
        .handle;
    // Listed in its region only; another region's read is NotFound.
    let here = backend.list("iam", HERE).await.expect("list");
    assert!(here.iter().any(|l| l.name == "web front" && l.handle == id));
    let there = backend.list("iam", THERE).await.expect("list");
    assert!(there.is_empty(), "{there:?}");
    let elsewhere = backend.read("iam", THERE, &id).await.unwrap_err();
    assert_eq!(elsewhere.kind, ErrorKind::NotFound, "{elsewhere}");
    let elsewhere = backend.delete("iam", THERE, &id).await.unwrap_err();
    assert_eq!(elsewhere.kind, ErrorKind::NotFound, "{elsewhere}");

    // Delete takes the policy, then the application; nothing of it is left.
    backend.delete("iam", HERE, &id).await.expect("deleted");
    assert!(all_policies(&server).await.is_empty());
    let again = backend.delete("iam", HERE, &id).await.unwrap_err();
    assert_eq!(again.kind, ErrorKind::NotFound, "{again}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_of_permission_sets_replaces_the_rules_in_place() {
    let (server, backend) = stand_in_and_backend().await;
    let read = create(
        &*backend,
        HERE,
        "worker",
        &grants(&["ObjectStorageReadOnly"]),
        "shop",
    )
    .await
    .expect("created");
    let id = read.handle.clone();
    let policy_id = all_policies(&server).await[0]["id"].clone();

    server.clear_requests();
    let read = update(&*backend, HERE, &id, &grants(&["ObjectStorageFullAccess"]))
        .await
        .expect("updated");
    assert_eq!(
        read.reported()["policies"],
        json!(["ObjectStorageFullAccess"])
    );
    assert_eq!(
        writes(&server),
        ["PUT /iam/v1alpha1/rules"],
        "the rules alone"
    );
    let put = server
        .requests()
        .into_iter()
        .find(|r| r.method == "PUT")
        .expect("a PUT");
    assert_eq!(
        put.body,
        json!({
            "policy_id": policy_id,
            "rules": [{"permission_set_names": ["ObjectStorageFullAccess"], "project_ids": [PROJECT]}],
        })
    );
    let policies = all_policies(&server).await;
    assert_eq!(policies.len(), 1);
    assert_eq!(
        policies[0]["id"], policy_id,
        "the same policy, changed in place"
    );

    // The same update again writes nothing.
    server.clear_requests();
    update(&*backend, HERE, &id, &grants(&["ObjectStorageFullAccess"]))
        .await
        .expect("updated again");
    assert!(writes(&server).is_empty(), "{:?}", writes(&server));

    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_permission_sets_is_no_policy() {
    let (server, backend) = stand_in_and_backend().await;
    let id = create(&*backend, HERE, "bare", &grants(&[]), "shop")
        .await
        .expect("created")
        .handle;
    assert!(all_policies(&server).await.is_empty(), "no policy is made");
    update(&*backend, HERE, &id, &grants(&["ObjectStorageReadOnly"]))
        .await
        .expect("granted");
    assert_eq!(all_policies(&server).await.len(), 1);
    // No permission sets: no policy. Some again: a new one.
    let read = update(&*backend, HERE, &id, &grants(&[]))
        .await
        .expect("emptied");
    assert_eq!(read.reported()["policies"], json!([]));
    assert!(all_policies(&server).await.is_empty());
    server.clear_requests();
    let read = update(&*backend, HERE, &id, &grants(&["SecretManagerReadOnly"]))
        .await
        .expect("granted again");
    assert_eq!(
        read.reported()["policies"],
        json!(["SecretManagerReadOnly"])
    );
    assert_eq!(writes(&server), ["POST /iam/v1alpha1/policies"]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_permission_sets_and_assumers_are_refused_before_anything_is_created() {
    let (server, backend) = stand_in_and_backend().await;
    for (policies, why) in [
        (&["conformance-read-only"][..], "conformance-read-only"),
        (&["IAMManager"][..], "organization"),
    ] {
        let err = create(&*backend, HERE, "refused", &grants(policies), "shop")
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
        assert!(err.message.contains(why), "{err}");
    }
    assert!(
        writes(&server).is_empty(),
        "nothing was written: {:?}",
        writes(&server)
    );

    let mut assumed = grants(&["ObjectStorageReadOnly"]);
    assumed.assumed_by = set(&["lambda.amazonaws.com"]);
    let err = create(&*backend, HERE, "assumed", &assumed, "shop")
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    assert!(err.message.contains("API keys"), "{err}");
    for bad in ["a/b", ""] {
        let err = create(&*backend, HERE, bad, &grants(&[]), "shop")
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    }
    assert!(writes(&server).is_empty(), "{:?}", writes(&server));

    // An update too refuses an assumer and unknown sets, writing nothing.
    let id = create(&*backend, HERE, "kept", &grants(&[]), "shop")
        .await
        .expect("created")
        .handle;
    server.clear_requests();
    let err = update(&*backend, HERE, &id, &assumed).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    let err = update(
        &*backend,
        HERE,
        &id,
        &spec(&["NoSuchSet"], Some("new"), None),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid, "{err}");
    assert!(writes(&server).is_empty(), "{:?}", writes(&server));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_is_denied_and_throttling_is_throttled_never_absent() {
    let (server, backend) = stand_in_and_backend().await;
    let id = create(
        &*backend,
        HERE,
        "guarded",
        &grants(&["ObjectStorageReadOnly"]),
        "shop",
    )
    .await
    .expect("created")
    .handle;
    server.deny(ScalewayProduct::Iam);
    let read = backend.read("iam", HERE, &id).await.unwrap_err();
    assert_eq!(read.kind, ErrorKind::Denied, "{read}");
    let list = backend.list("iam", HERE).await.unwrap_err();
    assert_eq!(
        list.kind,
        ErrorKind::Denied,
        "a denied listing is an error: {list}"
    );
    let delete = backend.delete("iam", HERE, &id).await.unwrap_err();
    assert_eq!(delete.kind, ErrorKind::Denied, "{delete}");
    let owner = backend.ownership("iam", HERE, &id).await.unwrap_err();
    assert_eq!(owner.kind, ErrorKind::Denied, "{owner}");
    server.restore();

    // Tried once, a throttled call is Throttled; with the retry policy, a throttled
    // create is made again (it did nothing), once.
    let once = untried(&server);
    server.throttle(ScalewayProduct::Iam, 1);
    let read = once.read("iam", HERE, &id).await.unwrap_err();
    assert_eq!(read.kind, ErrorKind::Throttled, "{read}");
    assert!(read.kind.is_transient());
    server.throttle(ScalewayProduct::Iam, 1);
    let err = create(&*once, HERE, "throttled", &grants(&[]), "shop")
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Throttled, "{err}");
    server.clear_requests();
    server.throttle(ScalewayProduct::Iam, 2);
    create(&*backend, HERE, "throttled", &grants(&[]), "shop")
        .await
        .expect("made once the throttling is over");
    let made: Vec<u16> = calls(&server, "POST", "/iam/v1alpha1/applications")
        .iter()
        .map(|r| r.status)
        .filter(|s| *s < 300)
        .collect();
    assert_eq!(made.len(), 1, "made once");
    backend
        .read("iam", HERE, &id)
        .await
        .expect("read once the throttling is over");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_answers_were_lost_is_settled_by_name_and_marker() {
    let (server, backend) = stand_in_and_backend().await;
    // The application's answer and the policy's are both lost.
    server.lose_answers(ScalewayProduct::Iam, 2);
    let read = create(
        &*backend,
        HERE,
        "lost answer",
        &grants(&["ObjectStorageReadOnly"]),
        "shop",
    )
    .await
    .expect("found by name and marker, and answered created");
    assert_eq!(
        read.reported()["policies"],
        json!(["ObjectStorageReadOnly"])
    );
    let lost = server.requests().iter().filter(|r| r.status == 504).count();
    assert_eq!(lost, 2, "both answers were lost");
    let sent = writes(&server);
    assert_eq!(
        sent,
        [
            "POST /iam/v1alpha1/applications",
            "POST /iam/v1alpha1/policies"
        ],
        "neither create was sent twice"
    );
    let listed = backend.list("iam", HERE).await.expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].handle, read.handle);
    assert_eq!(all_policies(&server).await.len(), 1);
    let raw_tags = backend
        .ownership("iam", HERE, &read.handle)
        .await
        .expect("ownership");
    assert_eq!(raw_tags.get(MARKER_KEY).map(String::as_str), Some("shop"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_name_is_conflict_in_its_region_and_free_in_another() {
    let (server, backend) = stand_in_and_backend().await;
    let first = create(&*backend, HERE, "My app (v2)", &grants(&[]), "shop")
        .await
        .expect("created");
    let err = create(&*backend, HERE, "My app (v2)", &grants(&[]), "shop")
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict, "{err}");
    assert!(err.message.contains(&first.handle), "{err}");
    // Scaleway lets names repeat: another region's application may bear it.
    let there = create(&*backend, THERE, "My app (v2)", &grants(&[]), "shop")
        .await
        .expect("created in another region");
    assert_ne!(there.handle, first.handle);
    let listed = backend.list("iam", THERE).await.expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].handle, there.handle);

    // An application made elsewhere, without a region, holds its name everywhere.
    let (status, made) = raw(
        &server,
        "POST",
        APPLICATIONS,
        Some(json!({"name": "hand made", "organization_id": ORGANIZATION})),
    )
    .await;
    assert_eq!(status, 200, "{made}");
    let err = create(&*backend, HERE, "hand made", &grants(&[]), "shop")
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict, "{err}");
    assert!(err.message.contains("infra-region=fr-par"), "{err}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_made_elsewhere_is_reported_and_left_alone_and_an_update_says_so() {
    let (server, backend) = stand_in_and_backend().await;
    let id = create(
        &*backend,
        HERE,
        "shared",
        &grants(&["ObjectStorageReadOnly"]),
        "shop",
    )
    .await
    .expect("created")
    .handle;
    let (status, theirs) = raw(
        &server,
        "POST",
        POLICIES,
        Some(json!({
            "name": "by hand",
            "organization_id": ORGANIZATION,
            "application_id": id,
            "rules": [{"permission_set_names": ["ContainerRegistryReadOnly"], "project_ids": [PROJECT]}],
        })),
    )
    .await;
    assert_eq!(status, 200, "{theirs}");
    let read = backend.read("iam", HERE, &id).await.expect("read");
    assert_eq!(
        read.reported()["policies"],
        json!(["ContainerRegistryReadOnly", "ObjectStorageReadOnly"]),
        "what the application is granted on the project, whatever the policy"
    );
    let err = update(&*backend, HERE, &id, &grants(&["ObjectStorageReadOnly"]))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict, "{err}");
    assert!(err.message.contains("by hand"), "{err}");
    // Declared, the other policy's sets are no drift.
    update(
        &*backend,
        HERE,
        &id,
        &grants(&["ObjectStorageReadOnly", "ContainerRegistryReadOnly"]),
    )
    .await
    .expect("updated");

    // Delete takes this kind's policy; Scaleway leaves the other without a principal.
    backend.delete("iam", HERE, &id).await.expect("deleted");
    let left = all_policies(&server).await;
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["name"], "by hand");
    assert_eq!(left[0]["no_principal"], true);
    assert!(left[0].get("application_id").is_none());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_made_elsewhere_is_marked_with_its_region_and_then_listed() {
    let (server, backend) = stand_in_and_backend().await;
    let (status, made) = raw(
        &server,
        "POST",
        APPLICATIONS,
        Some(json!({"name": "made elsewhere", "organization_id": ORGANIZATION, "tags": ["team=ops"]})),
    )
    .await;
    assert_eq!(status, 200, "{made}");
    let id = made["id"].as_str().expect("an id").to_owned();
    assert!(backend.list("iam", HERE).await.expect("list").is_empty());
    backend
        .mark("iam", HERE, &id, &Marker::new("shop"))
        .await
        .expect("marked");
    let raw_tags = backend
        .ownership("iam", HERE, &id)
        .await
        .expect("ownership");
    assert_eq!(raw_tags.get(MARKER_KEY).map(String::as_str), Some("shop"));
    assert_eq!(raw_tags.get("infra-region").map(String::as_str), Some(HERE));
    assert_eq!(
        raw_tags.get("team").map(String::as_str),
        Some("ops"),
        "kept: {raw_tags:?}"
    );
    let listed = backend.list("iam", HERE).await.expect("list");
    assert_eq!(listed.len(), 1);
    let err = backend
        .mark("iam", HERE, &id, &Marker::new("blog"))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict, "{err}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stand_in_refuses_what_iam_refuses() {
    let (server, _backend) = stand_in_and_backend().await;
    let other = "33333333-3333-4333-8333-333333333333";
    let policy = |rule: Value| json!({"name": "p", "organization_id": ORGANIZATION, "no_principal": true, "rules": [rule]});
    let cases = [
        // Another organization, another project.
        (
            "GET",
            format!("{APPLICATIONS}?organization_id={other}"),
            None,
            403,
            "permissions_denied",
        ),
        (
            "POST",
            POLICIES.to_owned(),
            Some(policy(
                json!({"permission_set_names": ["ObjectStorageReadOnly"], "project_ids": [other]}),
            )),
            403,
            "permissions_denied",
        ),
        // An unknown application, policy or permission set; mixed scope types.
        (
            "POST",
            POLICIES.to_owned(),
            Some(json!({"name": "p", "organization_id": ORGANIZATION, "application_id": other})),
            404,
            "not_found",
        ),
        ("GET", format!("{POLICIES}/{other}"), None, 404, "not_found"),
        (
            "POST",
            POLICIES.to_owned(),
            Some(policy(
                json!({"permission_set_names": ["NoSuchSet"], "project_ids": [PROJECT]}),
            )),
            400,
            "invalid_arguments",
        ),
        (
            "POST",
            POLICIES.to_owned(),
            Some(policy(
                json!({"permission_set_names": ["ObjectStorageReadOnly", "IAMManager"], "project_ids": [PROJECT]}),
            )),
            400,
            "invalid_arguments",
        ),
        // A tag IAM's pattern refuses.
        (
            "POST",
            APPLICATIONS.to_owned(),
            Some(json!({"name": "x", "organization_id": ORGANIZATION, "tags": ["env:prod"]})),
            400,
            "invalid_arguments",
        ),
    ];
    for (method, path, body, status, kind) in cases {
        let (got, answer) = raw(&server, method, &path, body).await;
        assert_eq!(
            (got, answer["type"].as_str()),
            (status, Some(kind)),
            "{method} {path}: {answer}"
        );
    }
    let (_, answer) = raw(&server, "GET", &format!("{POLICIES}/{other}"), None).await;
    assert_eq!(answer["resource"], "policy");

    // Listings are paged, and names may repeat.
    for _ in 0..3 {
        let made = json!({"name": "same", "organization_id": ORGANIZATION});
        assert_eq!(raw(&server, "POST", APPLICATIONS, Some(made)).await.0, 200);
    }
    let path = format!("{APPLICATIONS}?organization_id={ORGANIZATION}&page=2&page_size=2");
    let (_, page) = raw(&server, "GET", &path, None).await;
    assert_eq!(page["total_count"], 3);
    assert_eq!(page["applications"].as_array().map(Vec::len), Some(1));
    server.shutdown().await;
}
