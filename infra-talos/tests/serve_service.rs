//! `infra-talos serve` over HTTPS, against the command set's bench (a store, the
//! installation's authority, a simulated Talos node): every read and act needs a
//! proven principal — a client certificate from the installation's authority or a
//! token the service issued — and the store refuses a role the principal does not
//! hold; a plan approved through the service is applied by its controller; health
//! and metrics answer without a principal. The page's hardening, seen over HTTP:
//! each visitor's sign-in form has a CSRF value of its own, every answer forbids
//! framing, cookies are `HttpOnly`, `Secure` and `SameSite=Strict`, and a plan's
//! configuration is shown only to an approver.
#![cfg(feature = "cli")]

mod cli_support;

use cli_support::bench::*;
use cli_support::{https, https_with};
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn status_and_body(response: reqwest::Response) -> (StatusCode, String) {
    let status = response.status();
    (status, response.text().await.expect("body"))
}

/// Unproven, forged, wrong-role and revoked requests are refused on every API path;
/// an approver approves; a token stands in for the certificate it was issued to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_acts_only_for_proven_principals_in_roles_they_hold() {
    let bench = Bench::new().await;
    bench.proposed_plan("p1").await;
    let (service, base) = bench.serve(false).await;
    let dir = bench.dir.path();
    let anonymous = https(dir, None);
    let (alice, bob, root) = (
        https(dir, Some("alice")),
        https(dir, Some("bob")),
        https(dir, Some("root")),
    );

    // Health and metrics need no principal; nothing else is answered without one.
    let (status, body) = status_and_body(
        anonymous
            .get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "ok\n"));
    for path in [
        "/api/v1/plans",
        "/api/v1/plans/p1",
        "/api/v1/machines",
        "/api/v1/whoami",
    ] {
        let (status, body) =
            status_and_body(anonymous.get(format!("{base}{path}")).send().await.unwrap()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}: {body}");
    }
    let approve = format!("{base}/api/v1/plans/p1/approve");
    let (status, _) = status_and_body(
        anonymous
            .post(&approve)
            .json(&json!({"as": "approver"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // A publisher cannot approve, in any role it names.
    for (role, says) in [
        ("approver", "alice does not hold the role approver"),
        ("publisher", "the role publisher may not do this"),
    ] {
        let (status, body) = status_and_body(
            alice
                .post(&approve)
                .json(&json!({"as": role}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(body.contains(says), "{body}");
    }
    // An unknown role is a bad request, not a guess.
    let (status, _) = status_and_body(
        bob.post(&approve)
            .json(&json!({"as": "chief"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // The approver approves.
    let (status, body) = status_and_body(
        bob.post(&approve)
            .json(&json!({"as": "approver"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let plan: Value = bob
        .get(format!("{base}/api/v1/plans/p1"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(plan["state"], "approved", "{plan}");

    // A token is issued to a certificate's principal and acts as it, alone.
    let issued: Value = bob
        .post(format!("{base}/api/v1/tokens"))
        .json(&json!({"lifetime_secs": 60}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = issued["token"].as_str().expect("token").to_owned();
    let who: Value = anonymous
        .get(format!("{base}/api/v1/whoami"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(who["principal"], "bob", "{who}");
    // A token does not beget a token; a tampered one proves no one.
    let (status, _) = status_and_body(
        anonymous
            .post(format!("{base}/api/v1/tokens"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let mut tampered = token.clone();
    tampered.insert(3, 'x');
    let (status, _) = status_and_body(
        anonymous
            .get(format!("{base}/api/v1/whoami"))
            .bearer_auth(&tampered)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = status_and_body(
        anonymous
            .post(format!("{base}/api/v1/plans/p1/revoke"))
            .bearer_auth(&token)
            .json(&json!({"as": "approver"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // A revoked identity's certificate and tokens no longer prove anyone.
    let (status, body) = status_and_body(
        root.post(format!("{base}/api/v1/principals/bob/revoke"))
            .json(&json!({"as": "recovery-admin"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for request in [
        bob.get(format!("{base}/api/v1/plans")),
        anonymous
            .get(format!("{base}/api/v1/plans"))
            .bearer_auth(&token),
    ] {
        let (status, body) = status_and_body(request.send().await.unwrap()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    }

    // A certificate from another authority does not even complete the handshake.
    let foreign = tempfile::tempdir().unwrap();
    let now = cli_support::wall_now();
    let other = infra_talos::identity::Authority::generate("elsewhere", now).unwrap();
    let forged = infra_talos::identity::issue_client(
        &other.certificate_pem,
        &other.key_pem,
        "root",
        now,
        std::time::Duration::from_secs(3600),
    )
    .unwrap();
    let pki = foreign.path().join(cli_support::PKI);
    std::fs::create_dir(&pki).unwrap();
    std::fs::copy(
        dir.join(cli_support::PKI).join("ca.crt"),
        pki.join("ca.crt"),
    )
    .unwrap();
    std::fs::write(pki.join("root.crt"), &forged.certificate_pem).unwrap();
    std::fs::write(pki.join("root.key"), forged.key_pem.as_str()).unwrap();
    let impostor = https(foreign.path(), Some("root"));
    assert!(
        impostor
            .get(format!("{base}/api/v1/plans"))
            .send()
            .await
            .is_err(),
        "a foreign client certificate was accepted"
    );

    let metrics = anonymous
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("infra_talos_http_requests_total{status=\"401\"}"),
        "{metrics}"
    );
    service.shutdown().await;
    bench.stop().await;
}

/// A plan approved through the service is run by the service's controller: the
/// node receives exactly one apply, Applied moves, and the metrics say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_approved_through_the_service_is_applied_by_its_controller() {
    let bench = Bench::new().await;
    bench.proposed_plan("p1").await;
    let (service, base) = bench.serve(true).await;
    let bob = https(bench.dir.path(), Some("bob"));
    // Proposed plans are not run.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(bench.applies().is_empty());
    let (status, body) = status_and_body(
        bob.post(format!("{base}/api/v1/plans/p1/approve"))
            .json(&json!({"as": "approver"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Up to 30 s, in 100 ms steps.
    let mut tries = 300;
    let applied = loop {
        let machines: Value = bob
            .get(format!("{base}/api/v1/machines"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if machines[0]["applied_release"] == RELEASE {
            break machines;
        }
        tries -= 1;
        assert!(tries > 0, "not applied: {machines}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(applied[0]["id"], MACHINE);
    assert_eq!(bench.applies().len(), 1);
    let metrics = reqwest_text(&bob, &format!("{base}/metrics")).await;
    for line in [
        "infra_talos_operations{state=\"completed\"} 2",
        "infra_talos_attempts_total 1",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "{line} missing from\n{metrics}"
        );
    }
    service.shutdown().await;
    // Nothing more is sent after it stopped.
    assert_eq!(bench.applies().len(), 1);
    bench.stop().await;
}

async fn reqwest_text(client: &reqwest::Client, url: &str) -> String {
    client.get(url).send().await.unwrap().text().await.unwrap()
}

/// The CSRF value a page's forms carry.
fn csrf_of(html: &str) -> String {
    const NEEDLE: &str = "name=\"csrf\" value=\"";
    let at = html.find(NEEDLE).expect("a form with a CSRF value") + NEEDLE.len();
    html[at..].split('"').next().unwrap().to_owned()
}

/// The `Set-Cookie` header of `response` that sets cookie `name`, whole.
fn set_cookie(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with(&format!("{name}=")))
}

/// A cookie's attributes (after `name=value`), trimmed.
fn attributes(set_cookie: &str) -> Vec<&str> {
    set_cookie.split(';').skip(1).map(str::trim).collect()
}

/// Asserts that a `Set-Cookie` line is `HttpOnly`, `Secure` and `SameSite=Strict`, for
/// path `/`.
fn assert_hardened(set_cookie: &str) {
    let attributes = attributes(set_cookie);
    for flag in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/"] {
        assert!(attributes.contains(&flag), "{flag} missing: {set_cookie}");
    }
}

/// The pre-session cookie of the sign-in page.
const VISITOR: &str = "__Host-infra_talos_login";

/// A fresh sign-in form: its pre-session cookie (`name=value`, checked hardened) and
/// its CSRF value.
async fn login_form(browser: &reqwest::Client, base: &str) -> (String, String) {
    let r = browser.get(format!("{base}/login")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let visitor = set_cookie(&r, VISITOR).expect("the sign-in page sets its cookie");
    assert_hardened(&visitor);
    let html = r.text().await.unwrap();
    let pair = visitor.split(';').next().unwrap().to_owned();
    (pair, csrf_of(&html))
}

/// Signs `who` in on the page with a token the service issued to its certificate;
/// returns the session cookie (`name=value`), checked to be HttpOnly, Secure and
/// SameSite=Strict.
async fn sign_in(
    browser: &reqwest::Client,
    dir: &std::path::Path,
    base: &str,
    who: &str,
) -> String {
    let (visitor, login_csrf) = login_form(browser, base).await;
    let token = token_for(dir, base, who).await;
    let r = browser
        .post(format!("{base}/login"))
        .header("cookie", &visitor)
        .form(&[("token", token.as_str()), ("csrf", login_csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let cookie = set_cookie(&r, "infra_talos_session").expect("the session cookie");
    assert_hardened(&cookie);
    // The sign-in form is used up: its cookie is cleared.
    let cleared = set_cookie(&r, VISITOR).expect("the pre-session cookie is cleared");
    assert!(cleared.starts_with(&format!("{VISITOR}=;")), "{cleared}");
    assert!(attributes(&cleared).contains(&"Max-Age=0"), "{cleared}");
    cookie.split(';').next().unwrap().to_owned()
}

/// A token the service issues to `who`'s certificate.
async fn token_for(dir: &std::path::Path, base: &str, who: &str) -> String {
    let issued: Value = https(dir, Some(who))
        .post(format!("{base}/api/v1/tokens"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    issued["token"].as_str().expect("token").to_owned()
}

/// The page: a browser with no certificate signs in with a token, reads the plan
/// and approves it with its form; a forged CSRF value, a publisher's session and
/// no session at all each change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_approval_page_needs_a_session_a_csrf_value_and_the_approver_role() {
    let bench = Bench::new().await;
    bench.proposed_plan("p1").await;
    let (service, base) = bench.serve(false).await;
    let dir = bench.dir.path();
    let browser = https_with(dir, None, false);
    let state = |client: reqwest::Client| {
        let url = format!("{base}/api/v1/plans/p1");
        async move {
            let plan: Value = client.get(url).send().await.unwrap().json().await.unwrap();
            plan["state"].as_str().unwrap().to_owned()
        }
    };

    // No session: every page sends the browser to sign in; a form does nothing.
    for path in ["/", "/plans/p1", "/drift", "/machines/m1/timeline"] {
        let r = browser.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::SEE_OTHER, "{path}");
        assert_eq!(r.headers()["location"], "/login", "{path}");
    }
    let r = browser
        .post(format!("{base}/plans/p1/approve"))
        .form(&[("csrf", "x"), ("as", "approver")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (visitor, login_csrf) = login_form(&browser, &base).await;
    // A made-up token is refused at sign-in.
    let r = browser
        .post(format!("{base}/login"))
        .header("cookie", &visitor)
        .form(&[("token", "not.a-token"), ("csrf", login_csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // Signing in sets the session cookie.
    let alice = sign_in(&browser, dir, &base, "alice").await;
    let bob = sign_in(&browser, dir, &base, "bob").await;

    // A publisher reads the plan but is offered no approve form, and a forged
    // approval of hers is refused.
    let page = browser
        .get(format!("{base}/plans/p1"))
        .header("cookie", &alice)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let html = page.text().await.unwrap();
    assert!(!html.contains("/plans/p1/approve"), "{html}");
    assert!(!html.contains("<script"), "{html}");
    let alice_csrf = csrf_of(&html);
    let r = browser
        .post(format!("{base}/plans/p1/approve"))
        .header("cookie", &alice)
        .form(&[("csrf", alice_csrf.as_str()), ("as", "approver")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(state(https(dir, Some("bob"))).await, "proposed");

    // The approver reads the plan and its diff, then approves with the form.
    let html = browser
        .get(format!("{base}/plans/p1"))
        .header("cookie", &bob)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("/plans/p1/approve"), "{html}");
    assert!(
        html.contains("machine.install.disk") || html.contains("unchanged"),
        "{html}"
    );
    let bob_csrf = csrf_of(&html);
    // Another session's CSRF value (alice's) does nothing for bob.
    let r = browser
        .post(format!("{base}/plans/p1/approve"))
        .header("cookie", &bob)
        .form(&[("csrf", alice_csrf.as_str()), ("as", "approver")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(state(https(dir, Some("bob"))).await, "proposed");
    let r = browser
        .post(format!("{base}/plans/p1/approve"))
        .header("cookie", &bob)
        .form(&[("csrf", bob_csrf.as_str()), ("as", "approver")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/plans/p1");
    assert_eq!(state(https(dir, Some("bob"))).await, "approved");
    // The timeline page shows the approval as bob's own act.
    let timeline = browser
        .get(format!("{base}/machines/m1/timeline"))
        .header("cookie", &bob)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(timeline.contains("approval"), "{timeline}");
    service.shutdown().await;
    bench.stop().await;
}

/// A drift record settled from the page: a publisher plans the adoption with the
/// drift page's form (an approver, holding no publisher role, is offered none and is
/// refused), and once approved and run, Applied is what the machine runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drift_record_is_settled_from_the_page() {
    let bench = Bench::new().await;
    let drifted = b"machine:\n  type: controlplane\n  # changed out of band\n".to_vec();
    bench.sim.drift_config(drifted.clone());
    let (service, base) = bench
        .serve_every(true, std::time::Duration::from_secs(3600))
        .await;
    let dir = bench.dir.path();
    let bob_api = https(dir, Some("bob"));
    let pass: Value = bob_api
        .post(format!("{base}/api/v1/drift"))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(pass["readings"][0]["machine"], MACHINE, "{pass}");
    let browser = https_with(dir, None, false);
    let alice = sign_in(&browser, dir, &base, "alice").await;
    let bob = sign_in(&browser, dir, &base, "bob").await;
    let page_of = |cookie: String| {
        let browser = browser.clone();
        let url = format!("{base}/drift");
        async move {
            let r = browser
                .get(url)
                .header("cookie", cookie)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::OK);
            r.text().await.unwrap()
        }
    };

    // The approver sees the record but no plan form, and cannot plan by posting.
    let html = page_of(bob.clone()).await;
    assert!(html.contains("m1"), "{html}");
    assert!(!html.contains("/machines/m1/adopt"), "{html}");
    assert!(html.contains("a publisher makes plans"), "{html}");
    let r = browser
        .post(format!("{base}/machines/m1/adopt"))
        .header("cookie", &bob)
        .form(&[("csrf", csrf_of(&html).as_str()), ("as", "publisher")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);

    // The publisher plans the adoption with the form, and lands on the plan.
    let html = page_of(alice.clone()).await;
    assert!(html.contains("action=\"/machines/m1/adopt\""), "{html}");
    assert!(html.contains("action=\"/machines/m1/revert\""), "{html}");
    let r = browser
        .post(format!("{base}/machines/m1/adopt"))
        .header("cookie", &alice)
        .form(&[("csrf", csrf_of(&html).as_str()), ("as", "publisher")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let location = r.headers()["location"].to_str().unwrap().to_owned();
    let plan = location
        .strip_prefix("/plans/")
        .expect("a plan page")
        .to_owned();
    assert!(plan.ends_with("-adopt"), "{plan}");
    let shown: Value = bob_api
        .get(format!("{base}/api/v1/plans/{plan}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(shown["state"], "proposed", "{shown}");
    assert_eq!(shown["kind"], "adopt", "{shown}");

    // Approved and run: Applied is the drifted configuration, the record closed,
    // and nothing was sent to the machine.
    let sent_before = bench.applies().len();
    for (path, body) in [
        (
            format!("{base}/api/v1/plans/{plan}/approve"),
            json!({"as": "approver"}),
        ),
        (format!("{base}/api/v1/plans/{plan}/run"), json!({})),
    ] {
        let r = bob_api.post(path).json(&body).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await.unwrap());
    }
    let machines: Value = bob_api
        .get(format!("{base}/api/v1/machines"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        machines[0]["applied_digest"],
        infra_talos::config_digest(&drifted).to_hex(),
        "{machines}"
    );
    assert!(machines[0]["open_drift"].is_null(), "{machines}");
    assert_eq!(bench.applies().len(), sent_before);
    service.shutdown().await;
    bench.stop().await;
}

/// Each visitor of the sign-in page gets a CSRF value of its own, bound to a fresh
/// pre-session cookie: two visitors' values differ, and a form posted with another
/// visitor's value, or without the cookie (as a form posted from another site
/// would be, the cookie being `SameSite=Strict`), signs no one in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_visitor_signs_in_with_a_csrf_value_of_its_own() {
    let bench = Bench::new().await;
    let (service, base) = bench.serve(false).await;
    let dir = bench.dir.path();
    let browser = https_with(dir, None, false);
    let (first_cookie, first_csrf) = login_form(&browser, &base).await;
    let (second_cookie, second_csrf) = login_form(&browser, &base).await;
    assert_ne!(first_csrf, second_csrf);
    assert_ne!(first_cookie, second_cookie);
    assert!(first_csrf.len() >= 32, "{first_csrf}");
    let token = token_for(dir, &base, "bob").await;
    let post = |cookie: Option<String>, csrf: String| {
        let browser = browser.clone();
        let (url, token) = (format!("{base}/login"), token.clone());
        async move {
            let mut request = browser.post(url);
            if let Some(cookie) = cookie {
                request = request.header("cookie", cookie);
            }
            let r = request
                .form(&[("token", token.as_str()), ("csrf", csrf.as_str())])
                .send()
                .await
                .unwrap();
            let session = set_cookie(&r, "infra_talos_session");
            (r.status(), session)
        }
    };
    for (cookie, csrf) in [
        // The second visitor's value under the first visitor's cookie, and back.
        (Some(first_cookie.clone()), second_csrf.clone()),
        (Some(second_cookie.clone()), first_csrf.clone()),
        // No pre-session cookie: what a cross-site form brings.
        (None, first_csrf.clone()),
        // A made-up pre-session cookie.
        (
            Some(format!("{VISITOR}=AAAAAAAAAAAAAAAAAAAAAA")),
            first_csrf.clone(),
        ),
        (Some(first_cookie.clone()), String::new()),
    ] {
        let (status, session) = post(cookie.clone(), csrf).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{cookie:?}");
        assert_eq!(session, None, "{cookie:?}");
    }
    // Each visitor's own pair signs in.
    for (cookie, csrf) in [(first_cookie, first_csrf), (second_cookie, second_csrf)] {
        let (status, session) = post(Some(cookie), csrf).await;
        assert_eq!(status, StatusCode::SEE_OTHER);
        assert!(session.is_some());
    }
    service.shutdown().await;
    bench.stop().await;
}

/// The headers that keep every answer out of a frame, asserted on `response`.
fn assert_unframeable(response: &reqwest::Response, what: &str) {
    let headers = response.headers();
    let policy = headers
        .get("content-security-policy")
        .unwrap_or_else(|| panic!("{what}: no Content-Security-Policy"))
        .to_str()
        .unwrap();
    let directives: Vec<&str> = policy.split(';').map(str::trim).collect();
    assert!(
        directives.contains(&"frame-ancestors 'none'"),
        "{what}: {policy}"
    );
    assert!(
        directives.contains(&"default-src 'none'"),
        "{what}: {policy}"
    );
    assert_eq!(
        headers
            .get_all("x-frame-options")
            .iter()
            .collect::<Vec<_>>(),
        ["DENY"],
        "{what}"
    );
    assert_eq!(headers["x-content-type-options"], "nosniff", "{what}");
}

/// Every answer carries `Content-Security-Policy` with `frame-ancestors 'none'` and
/// `X-Frame-Options: DENY`: pages, redirects, refusals, the API's answers and errors,
/// health, metrics, an unknown path and a wrong method. The policy allows the pages'
/// inline style sheet by the digest of what the page really carries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_forbids_framing() {
    use base64::Engine as _;
    use sha2::Digest as _;

    let bench = Bench::new().await;
    bench.proposed_plan("p1").await;
    let (service, base) = bench.serve(false).await;
    let dir = bench.dir.path();
    let browser = https_with(dir, None, false);
    let bob = sign_in(&browser, dir, &base, "bob").await;
    let anonymous = https(dir, None);
    let certified = https(dir, Some("bob"));
    let mut seen = Vec::new();
    let cases: Vec<(&str, reqwest::RequestBuilder, StatusCode)> = vec![
        (
            "sign-in page",
            browser.get(format!("{base}/login")),
            StatusCode::OK,
        ),
        (
            "redirect to sign in",
            browser.get(format!("{base}/plans/p1")),
            StatusCode::SEE_OTHER,
        ),
        (
            "plan page",
            browser
                .get(format!("{base}/plans/p1"))
                .header("cookie", &bob),
            StatusCode::OK,
        ),
        (
            "forged form",
            browser
                .post(format!("{base}/plans/p1/approve"))
                .header("cookie", &bob)
                .form(&[("csrf", "forged"), ("as", "approver")]),
            StatusCode::FORBIDDEN,
        ),
        (
            "missing page",
            browser
                .get(format!("{base}/plans/nope"))
                .header("cookie", &bob),
            StatusCode::NOT_FOUND,
        ),
        (
            "API answer",
            certified.get(format!("{base}/api/v1/plans")),
            StatusCode::OK,
        ),
        (
            "API refusal",
            anonymous.get(format!("{base}/api/v1/plans")),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "health",
            anonymous.get(format!("{base}/healthz")),
            StatusCode::OK,
        ),
        (
            "metrics",
            anonymous.get(format!("{base}/metrics")),
            StatusCode::OK,
        ),
        (
            "unknown path",
            anonymous.get(format!("{base}/no/such/path")),
            StatusCode::NOT_FOUND,
        ),
        (
            "wrong method",
            anonymous.delete(format!("{base}/login")),
            StatusCode::METHOD_NOT_ALLOWED,
        ),
    ];
    for (what, request, status) in cases {
        let r = request.send().await.unwrap();
        assert_eq!(r.status(), status, "{what}");
        assert_unframeable(&r, what);
        let policy = r.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_owned();
        seen.push((what, policy, r.text().await.unwrap()));
    }
    // The plan page's style sheet is the one the policy names by its digest.
    let (_, policy, html) = &seen[2];
    let style = html
        .split_once("<style>")
        .and_then(|(_, rest)| rest.split_once("</style>"))
        .expect("the page's style sheet")
        .0;
    let digest = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(style));
    assert!(
        policy
            .split(';')
            .any(|d| d.trim() == format!("style-src 'sha256-{digest}'")),
        "{policy}"
    );
    service.shutdown().await;
    bench.stop().await;
}

/// A plan's configuration (its redacted diff, opened from the artifact) reaches only a
/// viewer who may approve the plan: the approver sees it; the publisher who made the
/// plan and an author, by session or by certificate, see its artifact digest only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plans_configuration_is_shown_only_to_an_approver() {
    let bench = Bench::new().await;
    bench.proposed_plan("p1").await;
    let (service, base) = bench.serve(false).await;
    let dir = bench.dir.path();
    let browser = https_with(dir, None, false);
    let plan: Value = https(dir, Some("bob"))
        .get(format!("{base}/api/v1/plans/p1"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let digest = plan["artifactDigest"]
        .as_str()
        .or_else(|| plan["artifact_digest"].as_str())
        .unwrap_or_else(|| panic!("the plan's artifact digest: {plan}"))
        .to_owned();
    let page_of = |request: reqwest::RequestBuilder| async move {
        let r = request.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        r.text().await.unwrap()
    };
    const WITHHELD: &str =
        "The configuration is shown only to a principal who may approve this plan";
    let bob = sign_in(&browser, dir, &base, "bob").await;
    let html = page_of(
        browser
            .get(format!("{base}/plans/p1"))
            .header("cookie", &bob),
    )
    .await;
    // The bench's release differs from what the machine runs by a comment only: the
    // diff's summary counts its values, and no line changes.
    assert!(
        html.contains("0 changed lines, 0 withheld, 3 unchanged values."),
        "{html}"
    );
    assert!(!html.contains(WITHHELD), "{html}");
    for who in ["alice", "ann"] {
        let session = sign_in(&browser, dir, &base, who).await;
        let by_session = page_of(
            browser
                .get(format!("{base}/plans/p1"))
                .header("cookie", &session),
        )
        .await;
        let by_certificate =
            page_of(https_with(dir, Some(who), false).get(format!("{base}/plans/p1"))).await;
        for html in [by_session, by_certificate] {
            assert!(html.contains(WITHHELD), "{who}: {html}");
            assert!(html.contains(&digest), "{who}: {html}");
            assert!(!html.contains("unchanged value"), "{who}: {html}");
            assert!(!html.contains("changed line"), "{who}: {html}");
            assert!(!html.contains("the one the machine runs"), "{who}: {html}");
        }
    }
    service.shutdown().await;
    bench.stop().await;
}

/// Signing out needs the session's own CSRF value (another session's, or none, is
/// refused and the session still works); with it, the session cookie is cleared with
/// the same flags it was set with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_out_needs_the_sessions_csrf_value() {
    let bench = Bench::new().await;
    bench.proposed_plan("p1").await;
    let (service, base) = bench.serve(false).await;
    let dir = bench.dir.path();
    let browser = https_with(dir, None, false);
    let alice = sign_in(&browser, dir, &base, "alice").await;
    let bob = sign_in(&browser, dir, &base, "bob").await;
    let csrf_of_page = |cookie: String| {
        let (browser, url) = (browser.clone(), format!("{base}/plans"));
        async move {
            let html = browser
                .get(url)
                .header("cookie", cookie)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            csrf_of(&html)
        }
    };
    let alice_csrf = csrf_of_page(alice.clone()).await;
    let bob_csrf = csrf_of_page(bob.clone()).await;
    assert_ne!(alice_csrf, bob_csrf);
    for csrf in [alice_csrf.as_str(), "", "forged"] {
        let r = browser
            .post(format!("{base}/logout"))
            .header("cookie", &bob)
            .form(&[("csrf", csrf)])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{csrf}");
        assert_eq!(set_cookie(&r, "infra_talos_session"), None, "{csrf}");
    }
    let r = browser
        .post(format!("{base}/logout"))
        .header("cookie", &bob)
        .form(&[("csrf", bob_csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/login");
    let cleared = set_cookie(&r, "infra_talos_session").expect("the session cookie is cleared");
    assert!(cleared.starts_with("infra_talos_session=;"), "{cleared}");
    assert_hardened(&cleared);
    assert!(attributes(&cleared).contains(&"Max-Age=0"), "{cleared}");
    service.shutdown().await;
    bench.stop().await;
}
