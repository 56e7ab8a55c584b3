//! Where the project and the credentials come from, read the way `gcloud` and
//! Terraform's google provider read them, in one documented order.
//!
//! **The project**, the first of:
//! 1. `GOOGLE_CLOUD_PROJECT` (Google's client libraries);
//! 2. `GOOGLE_PROJECT`, then `GCLOUD_PROJECT` (Terraform's google provider);
//! 3. `CLOUDSDK_CORE_PROJECT` (gcloud's override of its configuration);
//! 4. gcloud's active configuration, its `[core] project`: the configuration directory
//!    is `CLOUDSDK_CONFIG` or `~/.config/gcloud`; the active configuration is named by
//!    `CLOUDSDK_ACTIVE_CONFIG_NAME`, or else the directory's `active_config` file, or
//!    else it is `default`, and lives in `configurations/config_<name>`;
//! 5. the metadata server of a Google Cloud machine (`GCE_METADATA_HOST`, or
//!    `metadata.google.internal`): `/computeMetadata/v1/project/project-id`, asked with
//!    `Metadata-Flavor: Google`, and believed only when the answer carries the same
//!    header back.
//!
//! **The credentials**, the first of:
//! 1. anonymous, when every service is sent to a stand-in on this machine and none of
//!    the variables below is set (no token is sent anywhere);
//! 2. `GOOGLE_OAUTH_ACCESS_TOKEN`: a bearer token, sent as it is and never refreshed
//!    (Terraform's `access_token`, which also comes before its `credentials`);
//! 3. `GOOGLE_CREDENTIALS`: a key's JSON itself, or the path of a file holding it
//!    (Terraform's `credentials`);
//! 4. `GOOGLE_APPLICATION_CREDENTIALS`: the path of a credentials file;
//! 5. gcloud's application default credentials, `application_default_credentials.json`
//!    in the configuration directory above;
//! 6. the metadata server (`GCE_METADATA_HOST`, or `metadata.google.internal`), through
//!    `google-cloud-auth`.
//!
//! A credentials file is a service-account key, the `authorized_user` file `gcloud auth
//! application-default login` writes, or another kind Google's libraries read
//! (`impersonated_service_account`, `external_account`,
//! `external_account_authorized_user`), each built by `google-cloud-auth`'s builder of
//! that kind. A key or a file that cannot be used is refused, naming the variable or the path and
//! what is wrong with it (not JSON at line and column, no `private_key`, a type this
//! crate does not read); its contents are never quoted, in an error or a log.
//!
//! Everything is read through [`Sources`]: the process's environment and home in
//! production ([`Sources::process`]), given values in tests.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use google_cloud_auth::credentials::{
    CacheableResource, Credentials, CredentialsProvider, EntityTag,
};
use http::{Extensions, HeaderMap, HeaderValue};
use serde_json::Value;

/// How a variable is looked up.
type Lookup = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The variables and the home directory the project and the credentials are read from.
pub(crate) struct Sources {
    var: Lookup,
    home: Option<PathBuf>,
}

impl fmt::Debug for Sources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sources")
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

impl Sources {
    /// The process's environment, and its `HOME`.
    pub(crate) fn process() -> Self {
        Sources {
            var: Box::new(|name| std::env::var(name).ok()),
            home: std::env::var_os("HOME").map(PathBuf::from),
        }
    }

    /// The variables `vars` and the home directory `home` (tests).
    #[cfg(test)]
    pub(crate) fn given(vars: &[(&str, &str)], home: Option<&Path>) -> Self {
        let vars: std::collections::BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Sources {
            var: Box::new(move |name| vars.get(name).cloned()),
            home: home.map(Path::to_path_buf),
        }
    }

    /// The variable `name`, when set and not blank.
    pub(crate) fn var(&self, name: &str) -> Option<String> {
        (self.var)(name).filter(|v| !v.trim().is_empty())
    }

    /// gcloud's configuration directory.
    fn gcloud_dir(&self) -> Option<PathBuf> {
        self.var("CLOUDSDK_CONFIG")
            .map(PathBuf::from)
            .or_else(|| self.home.as_ref().map(|h| h.join(".config/gcloud")))
    }

    /// The metadata server's host (and port).
    fn metadata_host(&self) -> String {
        self.var("GCE_METADATA_HOST")
            .unwrap_or_else(|| "metadata.google.internal".to_owned())
    }
}

/// Where a value was found, for the log and for errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// An environment variable.
    Var(&'static str),
    /// A file.
    File(PathBuf),
    /// The metadata server at this host.
    Metadata(String),
    /// Anonymous credentials, for stand-ins on this machine.
    Anonymous,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Var(name) => write!(f, "{name}"),
            Origin::File(path) => write!(f, "{}", path.display()),
            Origin::Metadata(host) => write!(f, "the metadata server at {host}"),
            Origin::Anonymous => f.write_str("no credentials (stand-ins on loopback)"),
        }
    }
}

const PROJECT_VARS: [&str; 4] = [
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_PROJECT",
    "GCLOUD_PROJECT",
    "CLOUDSDK_CORE_PROJECT",
];

/// How long the metadata server is given to answer.
const METADATA_TIMEOUT: Duration = Duration::from_secs(2);

/// The project, from the first source that names one (see the module documentation),
/// and where it came from; or why there is none.
pub(crate) async fn project(sources: &Sources) -> Result<(String, Origin), String> {
    crate::install_crypto();
    for name in PROJECT_VARS {
        if let Some(project) = sources.var(name) {
            return Ok((project.trim().to_owned(), Origin::Var(name)));
        }
    }
    if let Some(found) = gcloud_project(sources)? {
        return Ok(found);
    }
    let host = sources.metadata_host();
    match metadata_project(&host).await {
        Ok(project) => Ok((project, Origin::Metadata(host))),
        Err(why) => Err(format!(
            "no Google Cloud project is configured: {} are unset, gcloud's configuration \
             names none, and the metadata server at {host} {why}",
            PROJECT_VARS.join(", ")
        )),
    }
}

/// The `[core] project` of gcloud's active configuration, if it names one.
fn gcloud_project(sources: &Sources) -> Result<Option<(String, Origin)>, String> {
    let Some(dir) = sources.gcloud_dir() else {
        return Ok(None);
    };
    let name = match sources.var("CLOUDSDK_ACTIVE_CONFIG_NAME") {
        Some(name) => name.trim().to_owned(),
        None => match read_if_present(&dir.join("active_config"))? {
            Some(text) => text.trim().to_owned(),
            None => "default".to_owned(),
        },
    };
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return Err(format!(
            "gcloud's active configuration name (in CLOUDSDK_ACTIVE_CONFIG_NAME or {}) is not \
             a configuration name: letters, digits, `-` and `_`",
            dir.join("active_config").display()
        ));
    }
    let path = dir.join("configurations").join(format!("config_{name}"));
    let Some(text) = read_if_present(&path)? else {
        return Ok(None);
    };
    Ok(ini_value(&text, "core", "project").map(|p| (p, Origin::File(path))))
}

/// The text of `path`; `None` when there is no such file.
fn read_if_present(path: &Path) -> Result<Option<String>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{} cannot be read: {}", path.display(), e.kind())),
    }
}

/// The value of `key` in `[section]` of an INI file as gcloud writes them
/// (`key = value`, `#` and `;` comments); `None` when absent or empty.
fn ini_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut current = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name.trim().to_owned();
            continue;
        }
        if current != section {
            continue;
        }
        let Some((k, v)) = line.split_once('=').or_else(|| line.split_once(':')) else {
            continue;
        };
        if k.trim() == key {
            let v = v.trim();
            return (!v.is_empty()).then(|| v.to_owned());
        }
    }
    None
}

/// The project the metadata server at `host` names, or why it named none.
async fn metadata_project(host: &str) -> Result<String, String> {
    let url = format!("http://{host}/computeMetadata/v1/project/project-id");
    let client = reqwest::Client::builder()
        .timeout(METADATA_TIMEOUT)
        .build()
        .map_err(|e| format!("could not be asked: {e}"))?;
    let response = client
        .get(&url)
        .header("Metadata-Flavor", "Google")
        .send()
        .await
        .map_err(|e| {
            if e.is_timeout() {
                "did not answer in time (not a Google Cloud machine?)".to_owned()
            } else {
                "could not be reached (not a Google Cloud machine?)".to_owned()
            }
        })?;
    let flavor = response
        .headers()
        .get("Metadata-Flavor")
        .and_then(|v| v.to_str().ok());
    if flavor != Some("Google") {
        return Err("answered without `Metadata-Flavor: Google`: it is not Google's".to_owned());
    }
    if !response.status().is_success() {
        return Err(format!("answered HTTP {}", response.status().as_u16()));
    }
    let text = response
        .text()
        .await
        .map_err(|_| "answered a body that could not be read".to_owned())?;
    let project = text.trim();
    let plausible = !project.is_empty()
        && project.len() <= 100
        && project
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | ':' | '.'));
    if plausible {
        Ok(project.to_owned())
    } else {
        Err("answered something that is not a project id".to_owned())
    }
}

/// The credentials, from the first source that holds some (see the module
/// documentation), and where they came from; or why none can be used. `all_loopback`:
/// every service is sent to a stand-in on this machine.
pub(crate) fn credentials(
    sources: &Sources,
    all_loopback: bool,
) -> Result<(Credentials, Origin), String> {
    crate::install_crypto();
    let explicit = [
        "GOOGLE_OAUTH_ACCESS_TOKEN",
        "GOOGLE_CREDENTIALS",
        "GOOGLE_APPLICATION_CREDENTIALS",
    ];
    if all_loopback && explicit.iter().all(|v| sources.var(v).is_none()) {
        return Ok((
            google_cloud_auth::credentials::anonymous::Builder::new().build(),
            Origin::Anonymous,
        ));
    }
    if let Some(token) = sources.var("GOOGLE_OAUTH_ACCESS_TOKEN") {
        let bearer = BearerToken::new(token.trim()).ok_or_else(|| {
            "GOOGLE_OAUTH_ACCESS_TOKEN does not hold a token: it has characters an HTTP \
             header cannot carry"
                .to_owned()
        })?;
        return Ok((
            Credentials::from(bearer),
            Origin::Var("GOOGLE_OAUTH_ACCESS_TOKEN"),
        ));
    }
    if let Some(value) = sources.var("GOOGLE_CREDENTIALS") {
        let (key, origin) = if value.trim_start().starts_with('{') {
            (
                parse_key(value.as_bytes(), "GOOGLE_CREDENTIALS")?,
                Origin::Var("GOOGLE_CREDENTIALS"),
            )
        } else {
            let path = PathBuf::from(value.trim());
            let key = read_key(&path, "GOOGLE_CREDENTIALS").map_err(|why| {
                if looks_like_a_path(&value) {
                    why
                } else {
                    "GOOGLE_CREDENTIALS holds neither a JSON key nor the path of a file".to_owned()
                }
            })?;
            (key, Origin::File(path))
        };
        return Ok((build(key, &origin)?, origin));
    }
    if let Some(path) = sources.var("GOOGLE_APPLICATION_CREDENTIALS") {
        let path = PathBuf::from(path.trim());
        let key = read_key(&path, "GOOGLE_APPLICATION_CREDENTIALS")?;
        let origin = Origin::File(path);
        return Ok((build(key, &origin)?, origin));
    }
    if let Some(dir) = sources.gcloud_dir() {
        let path = dir.join("application_default_credentials.json");
        if path.exists() {
            let key = read_key(&path, "gcloud's application default credentials")?;
            let origin = Origin::File(path);
            return Ok((build(key, &origin)?, origin));
        }
    }
    let host = sources.metadata_host();
    let built = google_cloud_auth::credentials::mds::Builder::default()
        .with_endpoint(format!("http://{host}"))
        .build()
        .map_err(|e| {
            format!(
                "no Google Cloud credentials could be loaded: none of \
                 GOOGLE_OAUTH_ACCESS_TOKEN, GOOGLE_CREDENTIALS, GOOGLE_APPLICATION_CREDENTIALS \
                 is set, gcloud has no application default credentials, and the metadata \
                 server at {host} cannot be used ({})",
                builder_failure(&e)
            )
        })?;
    Ok((built, Origin::Metadata(host)))
}

/// Whether a variable's value may be shown as the path it would be: one line, short,
/// and nothing that looks like key material.
fn looks_like_a_path(value: &str) -> bool {
    value.len() <= 1024 && !value.contains('\n') && !value.contains("PRIVATE KEY")
}

/// The JSON of the key file at `path` (`what` names where the path came from).
fn read_key(path: &Path, what: &str) -> Result<Value, String> {
    let bytes = std::fs::read(path).map_err(|e| {
        format!(
            "{what} names {}, which cannot be read: {}",
            path.display(),
            e.kind()
        )
    })?;
    parse_key(&bytes, &format!("{} (named by {what})", path.display()))
}

/// The JSON of a key, or what is wrong with it; `what` names the key (a variable, a
/// path). Nothing of the text is quoted.
fn parse_key(bytes: &[u8], what: &str) -> Result<Value, String> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        let how = match e.classify() {
            serde_json::error::Category::Eof => "it ends too soon",
            serde_json::error::Category::Syntax => "it is not well-formed JSON",
            serde_json::error::Category::Data => "its JSON is of the wrong shape",
            serde_json::error::Category::Io => "it could not be read",
        };
        format!(
            "{what} is not a usable key: {how} (line {}, column {})",
            e.line(),
            e.column()
        )
    })?;
    if !value.is_object() {
        return Err(format!(
            "{what} is not a usable key: it is not a JSON object"
        ));
    }
    Ok(value)
}

/// The kinds of credentials file Google's loaders read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeyType {
    /// A service-account key.
    ServiceAccount,
    /// A user's refresh token (`gcloud auth application-default login`).
    AuthorizedUser,
    /// A service account impersonated with other credentials.
    Impersonated,
    /// Workload identity federation.
    ExternalAccount,
    /// Workforce identity federation of a user.
    ExternalAccountUser,
}

/// The key's `type`, refusing a key without one or of a kind no loader reads.
fn key_type(key: &Value, what: &str) -> Result<KeyType, String> {
    match key.get("type").and_then(Value::as_str) {
        Some("service_account") => Ok(KeyType::ServiceAccount),
        Some("authorized_user") => Ok(KeyType::AuthorizedUser),
        Some("impersonated_service_account") => Ok(KeyType::Impersonated),
        Some("external_account") => Ok(KeyType::ExternalAccount),
        Some("external_account_authorized_user") => Ok(KeyType::ExternalAccountUser),
        Some(_) => Err(format!(
            "{what} is not a usable key: its `type` is not one Google's libraries read \
             (service_account, authorized_user, impersonated_service_account, \
             external_account, external_account_authorized_user)"
        )),
        None => Err(format!(
            "{what} is not a usable key: it has no `type` (a service-account key says \
             \"service_account\")"
        )),
    }
}

/// Refuses a key whose string field `field` is missing or empty.
fn require(key: &Value, field: &str, what: &str) -> Result<(), String> {
    match key.get(field).and_then(Value::as_str) {
        Some(v) if !v.trim().is_empty() => Ok(()),
        _ => Err(format!("{what} is not a usable key: it has no `{field}`")),
    }
}

/// Credentials of a credentials file's JSON, checked first for what the common kinds
/// need, then built by `google-cloud-auth`'s builder of that kind.
fn build(key: Value, origin: &Origin) -> Result<Credentials, String> {
    use google_cloud_auth::credentials::{
        external_account, external_account_authorized_user, impersonated, service_account,
        user_account,
    };
    let what = origin.to_string();
    let built = match key_type(&key, &what)? {
        KeyType::ServiceAccount => {
            for field in ["client_email", "private_key"] {
                require(&key, field, &what)?;
            }
            let pem = key["private_key"].as_str().unwrap_or_default();
            if !(pem.contains("-----BEGIN") && pem.contains("PRIVATE KEY-----")) {
                return Err(format!(
                    "{what} is not a usable key: its `private_key` is not a PEM private key"
                ));
            }
            service_account::Builder::new(key).build()
        }
        KeyType::AuthorizedUser => {
            for field in ["client_id", "client_secret", "refresh_token"] {
                require(&key, field, &what)?;
            }
            user_account::Builder::new(key).build()
        }
        KeyType::Impersonated => impersonated::Builder::new(key).build(),
        KeyType::ExternalAccount => external_account::Builder::new(key).build(),
        KeyType::ExternalAccountUser => external_account_authorized_user::Builder::new(key).build(),
    };
    built.map_err(|e| format!("{what} is not a usable key ({})", builder_failure(&e)))
}

/// What kind of failure a credentials builder reported, without its text (which may
/// quote the key).
fn builder_failure(e: &google_cloud_auth::build_errors::Error) -> &'static str {
    if e.is_missing_field() {
        "a field is missing"
    } else if e.is_parsing() {
        "it could not be parsed"
    } else if e.is_unknown_type() {
        "of an unknown type"
    } else if e.is_loading() {
        "it could not be loaded"
    } else if e.is_not_supported() {
        "not supported"
    } else {
        "refused by google-cloud-auth"
    }
}

/// A bearer token used as it is (`GOOGLE_OAUTH_ACCESS_TOKEN`): sent in `Authorization`,
/// never refreshed, never printed.
struct BearerToken {
    header: HeaderValue,
    tag: EntityTag,
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

impl BearerToken {
    /// The token, or `None` when it cannot be a header's value.
    fn new(token: &str) -> Option<Self> {
        if token.is_empty() || token.chars().any(char::is_whitespace) {
            return None;
        }
        let mut header = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
        header.set_sensitive(true);
        Some(BearerToken {
            header,
            tag: EntityTag::new(),
        })
    }
}

impl CredentialsProvider for BearerToken {
    async fn headers(
        &self,
        extensions: Extensions,
    ) -> Result<CacheableResource<HeaderMap>, google_cloud_auth::errors::CredentialsError> {
        if extensions.get::<EntityTag>() == Some(&self.tag) {
            return Ok(CacheableResource::NotModified);
        }
        let mut headers = HeaderMap::new();
        headers.insert(http::header::AUTHORIZATION, self.header.clone());
        Ok(CacheableResource::New {
            entity_tag: self.tag.clone(),
            data: headers,
        })
    }

    async fn universe_domain(&self) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests;
