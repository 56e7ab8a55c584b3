//! The approval page in a real browser: headless Chromium, driven over WebDriver by a
//! chromedriver this test starts itself, against `infra-talos serve` on the command
//! set's bench. An approver signs in with a token, reads the plan and approves it with
//! the page's own form; a publisher is offered no approve form; the page's text shows
//! no secret, sign-in token or CSRF value; a screenshot of the plan page is a real,
//! non-blank image (kept under `$INFRA_TEST_ARTIFACTS` when that is set).
//!
//! The page's hardening as the browser sees it: two fresh browsers get different
//! sign-in CSRF values; the browser holds the pre-session and session cookies as
//! `HttpOnly`, `Secure` and `SameSite=Strict` (read over WebDriver, which sees what
//! `document.cookie` cannot); the responses it received carry the content security
//! policy with `frame-ancestors 'none'` and `X-Frame-Options: DENY` (read from
//! Chromium's network log); the style sheet the policy allows by digest is applied;
//! and the publisher's plan page shows no configuration, only its digest.
//!
//! chromedriver is `$INFRA_TEST_CHROMEDRIVER` (default `/usr/bin/chromedriver`).
//! Without it the test is skipped loudly, and with `CI=true` it fails.
#![cfg(feature = "cli")]

mod cli_support;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use cli_support::bench::*;
use cli_support::https;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

const DRIVER_VAR: &str = "INFRA_TEST_CHROMEDRIVER";
const DEFAULT_DRIVER: &str = "/usr/bin/chromedriver";
const ARTIFACTS_VAR: &str = "INFRA_TEST_ARTIFACTS";

/// chromedriver's binary. Without one, a loud skip line (or a failure when
/// `CI=true`: the browser test must run in CI).
fn chromedriver() -> Option<PathBuf> {
    let path = PathBuf::from(
        std::env::var(DRIVER_VAR)
            .ok()
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| DEFAULT_DRIVER.to_owned()),
    );
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "chromedriver was not found at {} ({DRIVER_VAR}) and CI=true: the approval page's \
         browser test must run in CI (apt-get install chromium chromium-driver)",
        path.display()
    );
    // Written past the test harness's capture so the skip is always seen.
    let _ = writeln!(
        std::io::stderr(),
        "!!! SKIPPED: the approval page in a real browser — chromedriver was not found at {}; \
         install chromium and chromium-driver or set {DRIVER_VAR} !!!",
        path.display()
    );
    None
}

/// A chromedriver this test started, in a process group of its own; dropping it ends
/// the group (chromedriver and every browser it started) and reaps chromedriver,
/// whether the test passed or not.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    /// Starts `binary` on a free loopback port and waits until it answers.
    async fn start(binary: &Path) -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = std::os::unix::process::CommandExt::process_group(
            Command::new(binary)
                .arg(format!("--port={port}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
            0,
        )
        .spawn()
        .expect("chromedriver starts");
        let mut driver = Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        // Up to 30 s, in steps of 100 ms.
        for _ in 0..300 {
            if let Some(status) = driver.child.try_wait().expect("chromedriver's status") {
                panic!("chromedriver exited before answering: {status}");
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return driver;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("chromedriver did not answer on port {port}");
    }

    /// A new browser session: headless Chromium with a fresh profile in `profile`,
    /// accepting the service's certificate (the test's own authority issued it).
    async fn session(&self, profile: &Path) -> Client {
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--ignore-certificate-errors",
            "--window-size=1280,1400",
            &format!("--user-data-dir={}", profile.display()),
        ];
        let capabilities = json!({
            "browserName": "chrome",
            "acceptInsecureCerts": true,
            "goog:chromeOptions": { "args": args },
            // The network log, for the headers of the responses the browser received.
            "goog:loggingPrefs": { "performance": "ALL" },
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!("an object")
        };
        ClientBuilder::rustls()
            .expect("rustls")
            .capabilities(capabilities)
            .connect(&self.url)
            .await
            .expect("a browser session")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The whole group: chromedriver leaves its browsers behind when it is killed.
        let _ = Command::new("kill")
            .arg("-KILL")
            .arg("--")
            .arg(format!("-{}", self.child.id()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn token_for(dir: &Path, base: &str, who: &str) -> String {
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

async fn plan_state(dir: &Path, base: &str) -> String {
    let plan: Value = https(dir, Some("bob"))
        .get(format!("{base}/api/v1/plans/p1"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    plan["state"].as_str().expect("state").to_owned()
}

/// The path of the browser's current page.
async fn path_of(client: &Client) -> String {
    client.current_url().await.expect("url").path().to_owned()
}

/// The visible text of the page.
async fn body_text(client: &Client) -> String {
    client
        .find(Locator::Css("body"))
        .await
        .expect("body")
        .text()
        .await
        .expect("body text")
}

/// The browser's cookie `name`, as WebDriver reports it (HttpOnly ones included).
async fn cookie_named(client: &Client, name: &str) -> Option<fantoccini::cookies::Cookie<'static>> {
    client
        .get_all_cookies()
        .await
        .expect("the browser's cookies")
        .into_iter()
        .find(|c| c.name() == name)
}

/// Asserts that the browser keeps cookie `name` as `HttpOnly`, `Secure` and
/// `SameSite=Strict`.
async fn assert_hardened_cookie(client: &Client, name: &str) {
    let cookie = cookie_named(client, name)
        .await
        .unwrap_or_else(|| panic!("the browser holds no {name} cookie"));
    assert_eq!(cookie.http_only(), Some(true), "{cookie:?}");
    assert_eq!(cookie.secure(), Some(true), "{cookie:?}");
    assert_eq!(
        format!("{:?}", cookie.same_site()),
        "Some(Strict)",
        "{cookie:?}"
    );
}

const VISITOR: &str = "__Host-infra_talos_login";
const SESSION: &str = "infra_talos_session";

/// Signs in on `/login` by typing `token` into the form, as a person would; the
/// browser lands on the plans page, which lists `p1`. Returns the sign-in form's
/// CSRF value; checks the browser held the form's pre-session cookie, hardened, and
/// then holds the session cookie, hardened, and no pre-session cookie.
async fn sign_in(client: &Client, base: &str, token: &str) -> String {
    client.goto(&format!("{base}/login")).await.expect("/login");
    assert_eq!(path_of(client).await, "/login");
    let csrf = client
        .find(Locator::Css("form[action='/login'] input[name='csrf']"))
        .await
        .expect("the sign-in form's CSRF field")
        .attr("value")
        .await
        .expect("its value")
        .expect("a CSRF value");
    assert_hardened_cookie(client, VISITOR).await;
    client
        .find(Locator::Css("form[action='/login'] textarea[name='token']"))
        .await
        .expect("the token field")
        .send_keys(token)
        .await
        .expect("typing the token");
    client
        .find(Locator::Css("form[action='/login'] button[type='submit']"))
        .await
        .expect("the sign-in button")
        .click()
        .await
        .expect("signing in");
    client
        .wait()
        .for_element(Locator::Css("a[href='/plans/p1']"))
        .await
        .expect("the plans page lists p1");
    assert_eq!(path_of(client).await, "/");
    assert!(body_text(client).await.contains("Plans"));
    assert_hardened_cookie(client, SESSION).await;
    assert!(cookie_named(client, VISITOR).await.is_none());
    csrf
}

/// The headers of every response to `url` the browser received, from Chromium's
/// network log (read from chromedriver, which keeps it since the session began).
async fn response_headers(driver: &Driver, client: &Client, url: &str) -> Vec<Value> {
    let session = client
        .session_id()
        .await
        .expect("the session's id")
        .expect("a session");
    let log: Value = reqwest::Client::new()
        .post(format!("{}/session/{session}/se/log", driver.url))
        .json(&json!({ "type": "performance" }))
        .send()
        .await
        .expect("chromedriver's log")
        .json()
        .await
        .expect("the log as JSON");
    let entries = log["value"].as_array().expect("log entries");
    entries
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e["message"].as_str()?).ok())
        .filter(|m| m["message"]["method"] == "Network.responseReceived")
        .map(|m| m["message"]["params"]["response"].clone())
        .filter(|r| r["url"] == url)
        .map(|r| r["headers"].clone())
        .collect()
}

/// A response header by name, whatever its case.
fn header<'a>(headers: &'a Value, name: &str) -> Option<&'a str> {
    headers
        .as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .and_then(|(_, v)| v.as_str())
}

/// Asserts that the browser received `url` with a content security policy that
/// forbids framing and `X-Frame-Options: DENY`, and that the page it shows is styled
/// (the policy allows its style sheet by digest; a wrong digest leaves it bare).
async fn assert_unframeable(driver: &Driver, client: &Client, url: &str) {
    let received = response_headers(driver, client, url).await;
    assert!(
        !received.is_empty(),
        "the browser's log has no response to {url}"
    );
    for headers in &received {
        let policy = header(headers, "content-security-policy")
            .unwrap_or_else(|| panic!("{url}: no Content-Security-Policy in {headers}"));
        assert!(
            policy
                .split(';')
                .any(|d| d.trim() == "frame-ancestors 'none'"),
            "{url}: {policy}"
        );
        assert_eq!(header(headers, "x-frame-options"), Some("DENY"), "{url}");
    }
    let background = client
        .execute(
            "return getComputedStyle(document.querySelector('header')).backgroundColor;",
            Vec::new(),
        )
        .await
        .expect("the header's style");
    assert_eq!(
        background,
        json!("rgb(36, 41, 47)"),
        "{url}: the style sheet was not applied"
    );
}

/// The actions of every form on the page.
async fn form_actions(client: &Client) -> Vec<String> {
    let mut actions = Vec::new();
    for form in client.find_all(Locator::Css("form")).await.expect("forms") {
        actions.push(
            form.attr("action")
                .await
                .expect("action")
                .unwrap_or_default(),
        );
    }
    actions
}

/// What the page lets its reader see: no key material, no sign-in token, no CSRF
/// value in its text; the session cookie is out of the page's reach.
async fn assert_shows_no_secret(client: &Client, token: &str) {
    let text = body_text(client).await;
    let source = client.source().await.expect("source");
    for shown in [&text, &source] {
        assert!(!shown.contains("PRIVATE KEY"), "{shown}");
        assert!(!shown.contains(token), "the token is on the page: {shown}");
    }
    let csrf = client
        .find_all(Locator::Css("input[name='csrf']"))
        .await
        .expect("CSRF fields");
    assert!(!csrf.is_empty(), "{source}");
    for field in csrf {
        assert_eq!(field.attr("type").await.unwrap().as_deref(), Some("hidden"));
        assert!(!field.is_displayed().await.unwrap());
        let value = field.attr("value").await.unwrap().expect("a CSRF value");
        assert!(value.len() >= 16, "{value}");
        assert!(!text.contains(&value), "a CSRF value is visible: {text}");
    }
    // The session cookie is HttpOnly: no script on the page could read it.
    let cookies = client
        .execute("return document.cookie;", Vec::new())
        .await
        .expect("document.cookie");
    assert_eq!(cookies, json!(""));
    assert!(
        client.find(Locator::Css("script")).await.is_err(),
        "{source}"
    );
}

/// A decoded screenshot: its size and whether it is more than one colour.
fn decode_png(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
        .read_info()
        .expect("a PNG header");
    let mut buf = vec![0; reader.output_buffer_size().expect("a buffer size")];
    let info = reader.next_frame(&mut buf).expect("the PNG's image");
    buf.truncate(info.buffer_size());
    let samples = info.color_type.samples() * usize::from(info.bit_depth as u8).div_ceil(8);
    // One entry per pixel's bytes; their distinct values are the image's colours.
    let mut colours: Vec<&[u8]> = buf.chunks(samples).collect();
    colours.sort_unstable();
    colours.dedup();
    let distinct = colours.len();
    assert!(
        distinct >= 3,
        "the screenshot is (nearly) blank: {distinct} colour(s)"
    );
    (info.width, info.height, buf)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_approval_page_works_in_a_real_browser() {
    let Some(binary) = chromedriver() else {
        return;
    };
    // The WebDriver client speaks plain HTTP to chromedriver, through rustls' builder,
    // which needs a process-wide provider when more than one is compiled in.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let bench = Bench::new().await;
    bench.proposed_plan("p1").await;
    let (service, base) = bench.serve(false).await;
    let dir = bench.dir.path();
    let profiles = tempfile::tempdir().expect("profiles");
    let driver = Driver::start(&binary).await;

    // (b) The publisher alice signs in and reads the plan: no approve form, nothing on
    // the page posts an approval, and the page says why.
    let alice = driver.session(&profiles.path().join("alice")).await;
    let alice_token = token_for(dir, &base, "alice").await;
    let alice_login_csrf = sign_in(&alice, &base, &alice_token).await;
    assert_unframeable(&driver, &alice, &format!("{base}/login")).await;
    alice
        .goto(&format!("{base}/plans/p1"))
        .await
        .expect("/plans/p1");
    alice
        .wait()
        .for_element(Locator::Css("span.state"))
        .await
        .expect("the plan page");
    assert_eq!(path_of(&alice).await, "/plans/p1");
    let h1 = alice.find(Locator::Css("main h1")).await.unwrap();
    assert_eq!(h1.text().await.unwrap(), "Plan p1");
    let missing = alice
        .find(Locator::Css(
            "form[action='/plans/p1/approve'], button[formaction]",
        ))
        .await
        .expect_err("alice is offered no approve form");
    assert!(missing.is_no_such_element(), "{missing:?}");
    let actions = form_actions(&alice).await;
    assert!(
        actions.iter().all(|a| !a.ends_with("/approve")),
        "{actions:?}"
    );
    let text = body_text(&alice).await;
    assert!(
        text.contains("Approving is not offered: approving needs the approver role"),
        "{text}"
    );
    assert!(text.contains("Signed in as alice"), "{text}");
    // A publisher sees the configuration's digest, not the configuration.
    assert!(
        text.contains("The configuration is shown only to a principal who may approve this plan"),
        "{text}"
    );
    assert!(!text.contains("changed line"), "{text}");
    assert_shows_no_secret(&alice, &alice_token).await;
    assert_unframeable(&driver, &alice, &format!("{base}/plans/p1")).await;
    alice.close().await.expect("alice's session ends");
    assert_eq!(plan_state(dir, &base).await, "proposed");

    // (a) The approver bob, in a fresh browser: the sign-in page, then the plan.
    let bob = driver.session(&profiles.path().join("bob")).await;
    bob.goto(&format!("{base}/login")).await.expect("/login");
    let login_shot = bob
        .screenshot()
        .await
        .expect("the sign-in page's screenshot");
    let bob_token = token_for(dir, &base, "bob").await;
    let bob_login_csrf = sign_in(&bob, &base, &bob_token).await;
    // Two fresh browsers were given sign-in forms with different CSRF values.
    assert_ne!(alice_login_csrf, bob_login_csrf);
    bob.find(Locator::Css("a[href='/plans/p1']"))
        .await
        .unwrap()
        .click()
        .await
        .expect("following the link to p1");
    bob.wait()
        .for_element(Locator::Css("span.state"))
        .await
        .expect("the plan page");
    assert_eq!(path_of(&bob).await, "/plans/p1");
    let h1 = bob.find(Locator::Css("main h1")).await.unwrap();
    assert_eq!(h1.text().await.unwrap(), "Plan p1");
    let state = bob.find(Locator::Css("span.state")).await.unwrap();
    assert_eq!(state.text().await.unwrap(), "proposed");
    // The diff section: its heading and the redacted diff's summary after it.
    let headings = bob.find_all(Locator::Css("main h2")).await.unwrap();
    let mut titles = Vec::new();
    for h in &headings {
        titles.push(h.text().await.unwrap());
    }
    assert!(
        titles.iter().any(|t| t == "Configuration changes"),
        "{titles:?}"
    );
    let summary = bob
        .find(Locator::XPath(
            "//h2[.='Configuration changes']/following-sibling::p[1]",
        ))
        .await
        .expect("the diff's summary")
        .text()
        .await
        .unwrap();
    assert!(summary.contains("changed line"), "{summary}");
    let text = body_text(&bob).await;
    assert!(text.contains("Signed in as bob"), "{text}");
    assert!(!text.contains("shown only to a principal"), "{text}");
    assert_shows_no_secret(&bob, &bob_token).await;
    assert_unframeable(&driver, &bob, &format!("{base}/plans/p1")).await;
    let approve = bob
        .find(Locator::Css("form[action='/plans/p1/approve']"))
        .await
        .expect("bob is offered the approve form");
    let role = approve
        .find(Locator::Css("input[name='as']"))
        .await
        .unwrap();
    assert_eq!(
        role.attr("value").await.unwrap().as_deref(),
        Some("approver")
    );

    // (c) The plan page's screenshot: a real image, unlike the sign-in page's.
    let shot = bob.screenshot().await.expect("the plan page's screenshot");
    let (width, height, pixels) = decode_png(&shot);
    assert!(width > 100 && height > 100, "{width}x{height}");
    let (_, _, login_pixels) = decode_png(&login_shot);
    assert_ne!(
        pixels, login_pixels,
        "the plan page looks like the sign-in page"
    );
    if let Some(artifacts) = std::env::var_os(ARTIFACTS_VAR).filter(|v| !v.is_empty()) {
        let artifacts = PathBuf::from(artifacts);
        std::fs::create_dir_all(&artifacts).expect("the artifacts directory");
        std::fs::write(artifacts.join("approval-page.png"), &shot).expect("the screenshot");
    }

    // Approving with the page's own button.
    approve
        .find(Locator::Css("button[type='submit']"))
        .await
        .unwrap()
        .click()
        .await
        .expect("approving");
    // Up to 10 s, in steps of 100 ms.
    let mut approved = false;
    for _ in 0..100 {
        if plan_state(dir, &base).await == "approved" {
            approved = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(approved, "the plan was not approved");
    bob.wait()
        .for_element(Locator::Css("form[action='/plans/p1/revoke']"))
        .await
        .expect("the plan page again, now offering a revocation");
    assert_eq!(path_of(&bob).await, "/plans/p1");
    let state = bob.find(Locator::Css("span.state")).await.unwrap();
    assert_eq!(state.text().await.unwrap(), "approved");
    bob.close().await.expect("bob's session ends");

    drop(driver);
    service.shutdown().await;
    bench.stop().await;
}
