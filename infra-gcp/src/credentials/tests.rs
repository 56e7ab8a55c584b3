use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use super::*;

/// A made-up key that looks like a PEM private key and is none (nothing signs with it
/// in these tests).
const FAKE_PEM: &str = "-----BEGIN PRIVATE KEY-----\nTk9UIEEgS0VZ\n-----END PRIVATE KEY-----\n";
/// Text that must never appear in an error.
const SECRET_MARK: &str = "s3cr3t-m4rk";

fn service_account_key() -> String {
    serde_json::json!({
        "type": "service_account",
        "project_id": "key-project",
        "private_key_id": SECRET_MARK,
        "private_key": FAKE_PEM,
        "client_email": "deployer@key-project.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": "https://oauth2.googleapis.com/token",
    })
    .to_string()
}

fn authorized_user() -> String {
    serde_json::json!({
        "type": "authorized_user",
        "client_id": "id.apps.googleusercontent.com",
        "client_secret": SECRET_MARK,
        "refresh_token": SECRET_MARK,
    })
    .to_string()
}

/// A metadata server on loopback that names `project` to requests carrying
/// `Metadata-Flavor: Google` (and answers with that header when `genuine`); the paths
/// it was asked for are recorded.
struct MetadataServer {
    host: String,
    asked: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl MetadataServer {
    async fn start(project: &'static str, genuine: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&asked);
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let mut buf = vec![0u8; 4096];
                let mut read = 0;
                while !buf[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf[read..]).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => read += n,
                    }
                }
                let request = String::from_utf8_lossy(&buf[..read]).to_string();
                let line = request.lines().next().unwrap_or("").to_owned();
                log.lock().unwrap().push(line.clone());
                let flavored = request
                    .lines()
                    .any(|l| l.eq_ignore_ascii_case("metadata-flavor: google"));
                let (status, body) = if !flavored {
                    ("403 Forbidden", "Missing Metadata-Flavor:Google header.")
                } else if line.starts_with("GET /computeMetadata/v1/project/project-id ") {
                    ("200 OK", project)
                } else {
                    ("404 Not Found", "not found")
                };
                let flavor = if genuine {
                    "Metadata-Flavor: Google\r\n"
                } else {
                    ""
                };
                let answer = format!(
                    "HTTP/1.1 {status}\r\n{flavor}Content-Type: application/text\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
                let _ = socket.shutdown().await;
            }
        });
        MetadataServer { host, asked, task }
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl Drop for MetadataServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Variables as a test gives them.
type Vars<'a> = &'a [(&'a str, &'a str)];

/// A gcloud configuration directory naming `project` in configuration `name`, made
/// the active one when `active`.
fn gcloud_dir(root: &Path, name: &str, project: &str, active: bool) -> PathBuf {
    let dir = root.join("gcloud");
    std::fs::create_dir_all(dir.join("configurations")).unwrap();
    std::fs::write(
        dir.join("configurations").join(format!("config_{name}")),
        format!("[core]\naccount = someone@example.com\nproject = {project}\n\n[compute]\nregion = europe-west1\n"),
    )
    .unwrap();
    if active {
        std::fs::write(dir.join("active_config"), format!("{name}\n")).unwrap();
    }
    dir
}

#[tokio::test]
async fn the_project_comes_from_the_first_source_in_the_documented_order() {
    let home = tempfile::tempdir().unwrap();
    let config = gcloud_dir(home.path(), "work", "from-gcloud", true);
    let config = config.to_str().unwrap();
    let metadata = MetadataServer::start("from-metadata", true).await;
    let m = metadata.host.as_str();
    let cases: [(Vars<'_>, &str, Origin); 6] = [
        (
            &[
                ("GOOGLE_CLOUD_PROJECT", "a"),
                ("GOOGLE_PROJECT", "b"),
                ("CLOUDSDK_CORE_PROJECT", "c"),
                ("CLOUDSDK_CONFIG", config),
                ("GCE_METADATA_HOST", m),
            ],
            "a",
            Origin::Var("GOOGLE_CLOUD_PROJECT"),
        ),
        (
            &[
                ("GOOGLE_PROJECT", "b"),
                ("GCLOUD_PROJECT", "g"),
                ("CLOUDSDK_CORE_PROJECT", "c"),
                ("CLOUDSDK_CONFIG", config),
            ],
            "b",
            Origin::Var("GOOGLE_PROJECT"),
        ),
        (
            &[("GCLOUD_PROJECT", "g"), ("CLOUDSDK_CORE_PROJECT", "c")],
            "g",
            Origin::Var("GCLOUD_PROJECT"),
        ),
        (
            &[
                ("CLOUDSDK_CORE_PROJECT", "c"),
                ("CLOUDSDK_CONFIG", config),
                ("GCE_METADATA_HOST", m),
            ],
            "c",
            Origin::Var("CLOUDSDK_CORE_PROJECT"),
        ),
        (
            &[("CLOUDSDK_CONFIG", config), ("GCE_METADATA_HOST", m)],
            "from-gcloud",
            Origin::File(PathBuf::from(config).join("configurations/config_work")),
        ),
        (
            &[("GCE_METADATA_HOST", m)],
            "from-metadata",
            Origin::Metadata(m.to_owned()),
        ),
    ];
    for (vars, want, origin) in cases {
        // No home: gcloud's default directory is not looked at.
        let got = project(&Sources::given(vars, None)).await.unwrap();
        assert_eq!(got, (want.to_owned(), origin), "{vars:?}");
    }
    // Only the last case reached the metadata server, with its header.
    assert_eq!(
        metadata.asked(),
        ["GET /computeMetadata/v1/project/project-id HTTP/1.1"]
    );
}

#[tokio::test]
async fn gcloud_s_active_configuration_is_found_as_gcloud_finds_it() {
    let home = tempfile::tempdir().unwrap();
    // ~/.config/gcloud, with two configurations; `active_config` names the second.
    let dir = home.path().join(".config");
    std::fs::create_dir_all(&dir).unwrap();
    gcloud_dir(&dir, "default", "the-default", false);
    gcloud_dir(&dir, "work", "the-work-one", true);
    let from_home = Sources::given(&[("GCE_METADATA_HOST", "127.0.0.1:9")], Some(home.path()));
    assert_eq!(project(&from_home).await.unwrap().0, "the-work-one");
    // CLOUDSDK_ACTIVE_CONFIG_NAME wins over the file.
    let named = Sources::given(
        &[("CLOUDSDK_ACTIVE_CONFIG_NAME", "default")],
        Some(home.path()),
    );
    assert_eq!(project(&named).await.unwrap().0, "the-default");
    // Without `active_config`, the configuration is `default`.
    std::fs::remove_file(dir.join("gcloud/active_config")).unwrap();
    assert_eq!(project(&from_home).await.unwrap().0, "the-default");
    // A name that could leave the directory is refused.
    let odd = Sources::given(
        &[("CLOUDSDK_ACTIVE_CONFIG_NAME", "../../etc/passwd")],
        Some(home.path()),
    );
    let err = project(&odd).await.unwrap_err();
    assert!(err.contains("not a configuration name"), "{err}");
    assert_eq!(ini_value("[core]\nproject =\n", "core", "project"), None);
    assert_eq!(
        ini_value(
            "# c\n[auth]\nproject = no\n[core]\n project = yes \n",
            "core",
            "project"
        ),
        Some("yes".to_owned())
    );
}

#[tokio::test]
async fn a_metadata_server_that_is_not_google_s_is_not_believed() {
    let fake = MetadataServer::start("from-a-fake", false).await;
    let sources = Sources::given(&[("GCE_METADATA_HOST", &fake.host)], None);
    let err = project(&sources).await.unwrap_err();
    assert!(err.contains("not Google's"), "{err}");
    assert!(
        err.contains("GOOGLE_CLOUD_PROJECT"),
        "says what was looked at: {err}"
    );
    // Nothing listening: unreachable, said as such.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = closed.local_addr().unwrap().to_string();
    drop(closed);
    let err = project(&Sources::given(&[("GCE_METADATA_HOST", &host)], None))
        .await
        .unwrap_err();
    assert!(err.contains("could not be reached"), "{err}");
}

async fn authorization(creds: &Credentials) -> Option<String> {
    match creds.headers(Extensions::new()).await.unwrap() {
        CacheableResource::New { data, .. } => data
            .get(http::header::AUTHORIZATION)
            .map(|v| v.to_str().unwrap().to_owned()),
        CacheableResource::NotModified => panic!("no tag was given"),
    }
}

#[tokio::test]
async fn credentials_come_from_the_first_source_in_the_documented_order() {
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("key.json");
    std::fs::write(&key_path, service_account_key()).unwrap();
    let key_path_text = key_path.to_str().unwrap();
    let gcloud = dir.path().join("gcloud");
    std::fs::create_dir_all(&gcloud).unwrap();
    std::fs::write(
        gcloud.join("application_default_credentials.json"),
        authorized_user(),
    )
    .unwrap();
    let gcloud_text = gcloud.to_str().unwrap();
    let inline = service_account_key();

    // Stand-ins on loopback and nothing set: anonymous, no token sent.
    let (creds, origin) = credentials(
        &Sources::given(&[("CLOUDSDK_CONFIG", gcloud_text)], None),
        true,
    )
    .unwrap();
    assert_eq!(origin, Origin::Anonymous);
    assert_eq!(authorization(&creds).await, None);

    // The access token wins over everything, even on loopback, and is sent as it is.
    let all: &[(&str, &str)] = &[
        ("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.a-token"),
        ("GOOGLE_CREDENTIALS", &inline),
        ("GOOGLE_APPLICATION_CREDENTIALS", key_path_text),
        ("CLOUDSDK_CONFIG", gcloud_text),
    ];
    let (creds, origin) = credentials(&Sources::given(all, None), true).unwrap();
    assert_eq!(origin, Origin::Var("GOOGLE_OAUTH_ACCESS_TOKEN"));
    assert_eq!(
        authorization(&creds).await.as_deref(),
        Some("Bearer ya29.a-token")
    );
    assert!(!format!("{creds:?}").contains("a-token"), "{creds:?}");
    // Asked again with the tag it gave, it says nothing changed.
    let tag = match creds.headers(Extensions::new()).await.unwrap() {
        CacheableResource::New { entity_tag, .. } => entity_tag,
        CacheableResource::NotModified => unreachable!(),
    };
    let mut again = Extensions::new();
    again.insert(tag);
    assert_eq!(
        creds.headers(again).await.unwrap(),
        CacheableResource::NotModified
    );

    let (_, origin) = credentials(&Sources::given(&all[1..], None), false).unwrap();
    assert_eq!(origin, Origin::Var("GOOGLE_CREDENTIALS"));
    let by_path: &[(&str, &str)] = &[("GOOGLE_CREDENTIALS", key_path_text)];
    let (_, origin) = credentials(&Sources::given(by_path, None), false).unwrap();
    assert_eq!(origin, Origin::File(key_path.clone()));
    let (_, origin) = credentials(&Sources::given(&all[2..], None), false).unwrap();
    assert_eq!(origin, Origin::File(key_path.clone()));
    let (_, origin) = credentials(&Sources::given(&all[3..], None), false).unwrap();
    assert_eq!(
        origin,
        Origin::File(gcloud.join("application_default_credentials.json"))
    );
    // Nothing at all: the metadata server.
    let (_, origin) = credentials(
        &Sources::given(&[("GCE_METADATA_HOST", "127.0.0.1:9")], None),
        false,
    )
    .unwrap();
    assert_eq!(origin, Origin::Metadata("127.0.0.1:9".to_owned()));
}

#[test]
fn a_broken_key_is_refused_with_its_path_and_what_is_wrong_never_its_contents() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let cut = write(
        "cut.json",
        &service_account_key()[..service_account_key().len() / 2],
    );
    let no_key = write(
        "no-key.json",
        &serde_json::json!({"type": "service_account", "client_email": "a@b.c", "private_key_id": SECRET_MARK}).to_string(),
    );
    let not_pem = write(
        "not-pem.json",
        &serde_json::json!({"type": "service_account", "client_email": "a@b.c", "private_key": SECRET_MARK}).to_string(),
    );
    let no_type = write(
        "no-type.json",
        &serde_json::json!({"private_key": SECRET_MARK}).to_string(),
    );
    let odd_type = write(
        "odd-type.json",
        &serde_json::json!({"type": SECRET_MARK}).to_string(),
    );
    let list = write("list.json", &format!("[\"{SECRET_MARK}\"]"));
    let user = write(
        "user.json",
        &serde_json::json!({"type": "authorized_user", "client_id": "x", "client_secret": SECRET_MARK}).to_string(),
    );
    let missing = dir.path().join("missing.json");
    let cases = [
        (&cut, "ends too soon (line 1, column"),
        (&no_key, "it has no `private_key`"),
        (&not_pem, "`private_key` is not a PEM private key"),
        (&no_type, "it has no `type`"),
        (&odd_type, "its `type` is not one Google's libraries read"),
        (&list, "it is not a JSON object"),
        (&user, "it has no `refresh_token`"),
        (&missing, "cannot be read"),
    ];
    for var in ["GOOGLE_CREDENTIALS", "GOOGLE_APPLICATION_CREDENTIALS"] {
        for (path, what) in &cases {
            let sources = Sources::given(&[(var, path.to_str().unwrap())], None);
            let err = credentials(&sources, false).unwrap_err();
            assert!(err.contains(&path.display().to_string()), "{var}: {err}");
            assert!(err.contains(what), "{var}, {}: {err}", path.display());
            assert!(!err.contains(SECRET_MARK), "{var}: quoted: {err}");
        }
    }
    // Inline JSON that is broken: named by its variable, never quoted.
    let inline = format!("{{\"type\": \"service_account\", \"private_key\": \"{SECRET_MARK}");
    let err = credentials(
        &Sources::given(&[("GOOGLE_CREDENTIALS", &inline)], None),
        false,
    )
    .unwrap_err();
    assert!(
        err.starts_with("GOOGLE_CREDENTIALS is not a usable key"),
        "{err}"
    );
    assert!(!err.contains(SECRET_MARK), "{err}");
    // Key material pasted without its braces is not shown as a path either.
    let pasted = format!("-----BEGIN PRIVATE KEY-----\n{SECRET_MARK}\n");
    let err = credentials(
        &Sources::given(&[("GOOGLE_CREDENTIALS", &pasted)], None),
        false,
    )
    .unwrap_err();
    assert!(err.contains("neither a JSON key nor the path"), "{err}");
    assert!(!err.contains(SECRET_MARK), "{err}");
    // A token that cannot be a header is refused without being shown.
    let err = credentials(
        &Sources::given(&[("GOOGLE_OAUTH_ACCESS_TOKEN", "two words")], None),
        false,
    )
    .unwrap_err();
    assert!(!err.contains("two words"), "{err}");
}
