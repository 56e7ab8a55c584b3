//! How the backend reaches Scaleway: the API key, the project and organization, the
//! endpoints, and the clock asynchronous work is awaited on.
//!
//! [`ScalewayConfig::from_env`] reads what Scaleway's own tools read, in their order:
//! the environment (`SCW_ACCESS_KEY`, `SCW_SECRET_KEY`, `SCW_DEFAULT_PROJECT_ID`,
//! `SCW_DEFAULT_ORGANIZATION_ID`, `SCW_API_URL`) over the active profile of the CLI's
//! configuration file (`SCW_CONFIG_PATH`, else `$XDG_CONFIG_HOME/scw/config.yaml`, else
//! `~/.config/scw/config.yaml`; `SCW_PROFILE` or the file's `active_profile` picks the
//! profile) over the file's top level, and the retry policy from `INFRA_RETRY_BUDGET`
//! and `INFRA_REQUEST_TIMEOUT`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use infra_core::sdk::{Clock, Polling, RetryPolicy, SecretString, SystemClock};
use serde::Deserialize;

/// Scaleway's API, for every product but Object Storage and Queues.
pub const DEFAULT_API_URL: &str = "https://api.scaleway.com";

/// The configuration of a [`ScalewayBackend`](crate::ScalewayBackend).
#[derive(Clone)]
pub struct ScalewayConfig {
    pub(crate) access_key: String,
    pub(crate) secret_key: SecretString,
    pub(crate) project_id: String,
    pub(crate) organization_id: Option<String>,
    pub(crate) api_url: String,
    pub(crate) s3_endpoint: Option<String>,
    pub(crate) sqs_endpoint: Option<String>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) polling: Polling,
    pub(crate) retry: RetryPolicy,
    pub(crate) queues_key: Option<QueuesKey>,
}

/// Credentials of Scaleway Queues (made with `POST …/sqs-credentials`, or in the
/// console): what signs the SQS calls. Queues does not take the API key.
#[derive(Clone)]
pub struct QueuesKey {
    pub(crate) access_key: String,
    pub(crate) secret_key: SecretString,
}

impl QueuesKey {
    /// Credentials with `access_key` and `secret_key` (never printed).
    pub fn new(access_key: impl Into<String>, secret_key: SecretString) -> Self {
        QueuesKey {
            access_key: access_key.into(),
            secret_key,
        }
    }

    /// The access key (not secret: it names the credentials).
    pub fn access_key(&self) -> &str {
        &self.access_key
    }
}

impl fmt::Debug for QueuesKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueuesKey")
            .field("access_key", &self.access_key)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for ScalewayConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScalewayConfig")
            .field("access_key", &self.access_key)
            .field("project_id", &self.project_id)
            .field("organization_id", &self.organization_id)
            .field("api_url", &self.api_url)
            .field("s3_endpoint", &self.s3_endpoint)
            .field("sqs_endpoint", &self.sqs_endpoint)
            .field("polling", &self.polling)
            .field("retry", &self.retry)
            .field("queues_key", &self.queues_key)
            .finish_non_exhaustive()
    }
}

impl ScalewayConfig {
    /// The project every resource lives in, reached with an API key (its access key,
    /// `SCW…`, and its secret key, sent as `X-Auth-Token` and never printed). Calls are
    /// retried by [`RetryPolicy::from_env`] (the default policy, with a warning, when
    /// its variables are not durations), on the system clock.
    pub fn new(
        access_key: impl Into<String>,
        secret_key: SecretString,
        project_id: impl Into<String>,
    ) -> Self {
        ScalewayConfig {
            access_key: access_key.into(),
            secret_key,
            project_id: project_id.into(),
            organization_id: None,
            api_url: DEFAULT_API_URL.to_owned(),
            s3_endpoint: None,
            sqs_endpoint: None,
            clock: Arc::new(SystemClock::new()),
            polling: Polling::default(),
            retry: RetryPolicy::from_env().unwrap_or_else(|why| {
                tracing::warn!("{why}; the default retry policy applies");
                RetryPolicy::default()
            }),
            queues_key: None,
        }
    }

    /// A configuration for stand-ins on this machine: the REST APIs at `api_url`, and
    /// Object Storage and Queues at `aws_url` (moto's server), with the key
    /// `SCWSTANDIN0000000000` and the secret `5ca1ab1e-0000-4000-8000-000000000000`
    /// (a key of Scaleway's shape: an access key of `SCW` and 17 uppercase letters or
    /// digits, a secret key that is a UUID, as Scaleway and its SDKs require). Refused for
    /// an address off the loopback interface, so that a test key never reaches a real
    /// cloud.
    ///
    /// # Errors
    /// When either address is not `http://127.0.0.1:…`, `http://localhost:…` or
    /// `http://[::1]:…`.
    pub fn stand_in(
        project_id: impl Into<String>,
        organization_id: impl Into<String>,
        api_url: &str,
        aws_url: &str,
    ) -> Result<Self, String> {
        for url in [api_url, aws_url] {
            if !is_loopback(url) {
                return Err(format!(
                    "{url} is not a loopback address: stand-in keys are only for stand-ins on \
                     this machine"
                ));
            }
        }
        Ok(ScalewayConfig::new(
            "SCWSTANDIN0000000000",
            SecretString::new("5ca1ab1e-0000-4000-8000-000000000000"),
            project_id,
        )
        .organization(organization_id)
        .api_url(api_url)
        .s3_endpoint(aws_url)
        .sqs_endpoint(aws_url))
    }

    /// The organization the project belongs to (IAM applications and policies live in
    /// it). Without one, the `iam` kind asks the project for it.
    #[must_use]
    pub fn organization(mut self, organization_id: impl Into<String>) -> Self {
        self.organization_id = Some(organization_id.into());
        self
    }

    /// Scaleway's REST API at `url` instead of [`DEFAULT_API_URL`].
    #[must_use]
    pub fn api_url(mut self, url: impl Into<String>) -> Self {
        self.api_url = url.into().trim_end_matches('/').to_owned();
        self
    }

    /// Object Storage at `url` in every region, instead of `https://s3.{region}.scw.cloud`.
    #[must_use]
    pub fn s3_endpoint(mut self, url: impl Into<String>) -> Self {
        self.s3_endpoint = Some(url.into().trim_end_matches('/').to_owned());
        self
    }

    /// Queues' SQS API at `url` in every region, instead of
    /// `https://sqs.mnq.{region}.scaleway.com`.
    #[must_use]
    pub fn sqs_endpoint(mut self, url: impl Into<String>) -> Self {
        self.sqs_endpoint = Some(url.into().trim_end_matches('/').to_owned());
        self
    }

    /// The clock asynchronous work is awaited on, and Object Storage's and Queues'
    /// retries wait on (a `ManualClock` in tests; their timeouts run on real time).
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How asynchronous work (a database being made ready, a function deployed) is
    /// awaited.
    #[must_use]
    pub fn polling(mut self, polling: Polling) -> Self {
        self.polling = polling;
        self
    }

    /// How every call is retried, and how long each attempt may take (by default
    /// [`RetryPolicy::from_env`]: `INFRA_RETRY_BUDGET`, `INFRA_REQUEST_TIMEOUT`): the REST
    /// calls by the crate's own loop, Object Storage's and Queues' through the AWS SDK's
    /// retry machinery; the waits are taken on the configuration's clock.
    #[must_use]
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Queues credentials to sign the SQS calls with, in every region, as they are:
    /// the backend then neither activates Queues nor makes credentials of its own (see
    /// the crate's documentation, *Queues*). Queues credentials belong to one region:
    /// give these only to a fleet whose queues are all in it.
    #[must_use]
    pub fn queues_key(mut self, key: QueuesKey) -> Self {
        self.queues_key = Some(key);
        self
    }

    /// The project.
    pub fn project_id(&self) -> &str {
        &self.project_id
    }

    /// The access key (not secret: it names the key).
    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// Object Storage's endpoint in `region`.
    pub fn s3_endpoint_of(&self, region: &str) -> String {
        self.s3_endpoint
            .clone()
            .unwrap_or_else(|| format!("https://s3.{region}.scw.cloud"))
    }

    /// Queues' SQS endpoint in `region`: the configured one, else the one Scaleway
    /// documents. (The backend takes it from `GET …/sqs-info` when it can.)
    pub fn sqs_endpoint_of(&self, region: &str) -> String {
        self.sqs_endpoint
            .clone()
            .unwrap_or_else(|| format!("https://sqs.mnq.{region}.scaleway.com"))
    }

    /// Reads the configuration as Scaleway's tools do (see the module documentation),
    /// plus `INFRA_SCALEWAY_S3_ENDPOINT`, `INFRA_SCALEWAY_SQS_ENDPOINT`, the Queues
    /// credentials `INFRA_SCALEWAY_QUEUES_ACCESS_KEY` and
    /// `INFRA_SCALEWAY_QUEUES_SECRET_KEY` (both or neither), and the retry policy's
    /// `INFRA_RETRY_BUDGET` and `INFRA_REQUEST_TIMEOUT`. The answer when something is
    /// missing says what, and never holds a secret.
    ///
    /// # Errors
    /// No access key, secret key or project; a configuration file that cannot be read
    /// or parsed (named, with the line); a profile that the file does not hold; one of
    /// the two Queues variables without the other; a retry variable that is not a
    /// duration.
    pub fn from_env() -> Result<Self, String> {
        let retry_policy = RetryPolicy::from_env()?;
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let profile = match config_path(&var) {
            Some(path) => read_profile(&path, var("SCW_PROFILE").as_deref())?,
            None => Profile::default(),
        };
        let pick = |env: &str, file: &Option<String>| var(env).or_else(|| file.clone());
        let missing = |what: &str, env: &str| {
            format!(
                "no Scaleway {what} is configured: {env} is unset and the CLI's configuration \
                 file (SCW_CONFIG_PATH, ~/.config/scw/config.yaml) gives none"
            )
        };
        let access_key = pick("SCW_ACCESS_KEY", &profile.access_key)
            .ok_or_else(|| missing("access key", "SCW_ACCESS_KEY"))?;
        let secret_key = pick("SCW_SECRET_KEY", &profile.secret_key)
            .ok_or_else(|| missing("secret key", "SCW_SECRET_KEY"))?;
        let project = pick("SCW_DEFAULT_PROJECT_ID", &profile.default_project_id)
            .ok_or_else(|| missing("project", "SCW_DEFAULT_PROJECT_ID"))?;
        let mut config = ScalewayConfig::new(access_key, SecretString::new(secret_key), project);
        if let Some(org) = pick(
            "SCW_DEFAULT_ORGANIZATION_ID",
            &profile.default_organization_id,
        ) {
            config = config.organization(org);
        }
        if let Some(url) = pick("SCW_API_URL", &profile.api_url) {
            config = config.api_url(url);
        }
        if let Some(url) = var("INFRA_SCALEWAY_S3_ENDPOINT") {
            config = config.s3_endpoint(url);
        }
        if let Some(url) = var("INFRA_SCALEWAY_SQS_ENDPOINT") {
            config = config.sqs_endpoint(url);
        }
        if let Some(key) = queues_key_of(&var)? {
            config = config.queues_key(key);
        }
        Ok(config.retry_policy(retry_policy))
    }
}

/// The variable naming the access key of configured Queues credentials.
pub(crate) const QUEUES_ACCESS_KEY_VAR: &str = "INFRA_SCALEWAY_QUEUES_ACCESS_KEY";
/// The variable holding the secret key of configured Queues credentials.
pub(crate) const QUEUES_SECRET_KEY_VAR: &str = "INFRA_SCALEWAY_QUEUES_SECRET_KEY";

/// The Queues credentials the variables give: both, or neither.
fn queues_key_of(var: &dyn Fn(&str) -> Option<String>) -> Result<Option<QueuesKey>, String> {
    match (var(QUEUES_ACCESS_KEY_VAR), var(QUEUES_SECRET_KEY_VAR)) {
        (Some(access), Some(secret)) => Ok(Some(QueuesKey::new(access, SecretString::new(secret)))),
        (None, None) => Ok(None),
        (Some(_), None) => Err(format!(
            "{QUEUES_ACCESS_KEY_VAR} is set but {QUEUES_SECRET_KEY_VAR} is not: give both \
             Queues keys, or neither (the backend then makes credentials of its own)"
        )),
        (None, Some(_)) => Err(format!(
            "{QUEUES_SECRET_KEY_VAR} is set but {QUEUES_ACCESS_KEY_VAR} is not: give both \
             Queues keys, or neither (the backend then makes credentials of its own)"
        )),
    }
}

/// The fields of one profile of the CLI's configuration file that this crate reads.
#[derive(Clone, Debug, Default, Deserialize)]
struct Profile {
    access_key: Option<String>,
    secret_key: Option<String>,
    default_project_id: Option<String>,
    default_organization_id: Option<String>,
    api_url: Option<String>,
}

/// The CLI's configuration file: a top-level profile, named ones, the active one.
#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    #[serde(flatten)]
    top: Profile,
    active_profile: Option<String>,
    #[serde(default)]
    profiles: BTreeMap<String, Profile>,
}

/// Where the configuration file is, if there is one to read.
fn config_path(var: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(path) = var("SCW_CONFIG_PATH") {
        return Some(PathBuf::from(path));
    }
    let base = var("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| Path::new(&h).join(".config")))?;
    let path = base.join("scw").join("config.yaml");
    path.exists().then_some(path)
}

/// The profile `wanted` (else the active one) of the file at `path`, over its top
/// level. A file named by `SCW_CONFIG_PATH` that is missing is an error.
fn read_profile(path: &Path, wanted: Option<&str>) -> Result<Profile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "the Scaleway configuration file {} cannot be read: {e}",
            path.display()
        )
    })?;
    parse_profile(&text, wanted).map_err(|e| format!("{}: {e}", path.display()))
}

fn parse_profile(text: &str, wanted: Option<&str>) -> Result<Profile, String> {
    let file: ConfigFile = if text.trim().is_empty() {
        ConfigFile::default()
    } else {
        serde_norway::from_str(text).map_err(|e| match e.location() {
            Some(at) => format!(
                "line {}, column {}: not a Scaleway configuration file ({})",
                at.line(),
                at.column(),
                without_location(&e.to_string())
            ),
            None => format!("not a Scaleway configuration file ({e})"),
        })?
    };
    let name = wanted.map(str::to_owned).or(file.active_profile);
    let Some(name) = name else {
        return Ok(file.top);
    };
    let chosen = file.profiles.get(&name).cloned().ok_or_else(|| {
        let known: Vec<&str> = file.profiles.keys().map(String::as_str).collect();
        format!(
            "the profile `{name}` is not in the file (it has: {})",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        )
    })?;
    let top = file.top;
    Ok(Profile {
        access_key: chosen.access_key.or(top.access_key),
        secret_key: chosen.secret_key.or(top.secret_key),
        default_project_id: chosen.default_project_id.or(top.default_project_id),
        default_organization_id: chosen
            .default_organization_id
            .or(top.default_organization_id),
        api_url: chosen.api_url.or(top.api_url),
    })
}

/// A parser message without its own " at line …" tail (the line is given once).
fn without_location(message: &str) -> &str {
    message.split(" at line ").next().unwrap_or(message)
}

/// Whether `endpoint` is a plain-HTTP address on the loopback interface.
pub(crate) fn is_loopback(endpoint: &str) -> bool {
    let Some(rest) = endpoint.strip_prefix("http://") else {
        return false;
    };
    let host = rest.split('/').next().unwrap_or("");
    let host = if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host.split(':').next().unwrap_or("")
    };
    matches!(host, "127.0.0.1" | "localhost" | "::1")
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
access_key: SCWTOPLEVEL000000000
secret_key: 11111111-1111-1111-1111-111111111111
default_project_id: top-project
active_profile: work
profiles:
  work:
    default_project_id: work-project
  other:
    access_key: SCWOTHER000000000000
";

    #[test]
    fn a_profile_overrides_the_top_level_and_the_active_one_is_the_default() {
        let active = parse_profile(FILE, None).unwrap();
        assert_eq!(active.default_project_id.as_deref(), Some("work-project"));
        assert_eq!(active.access_key.as_deref(), Some("SCWTOPLEVEL000000000"));
        let other = parse_profile(FILE, Some("other")).unwrap();
        assert_eq!(other.access_key.as_deref(), Some("SCWOTHER000000000000"));
        assert_eq!(other.default_project_id.as_deref(), Some("top-project"));
    }

    #[test]
    fn a_missing_profile_or_a_broken_file_is_named_never_a_secret() {
        let missing = parse_profile(FILE, Some("prod")).unwrap_err();
        assert!(
            missing.contains("`prod`") && missing.contains("work"),
            "{missing}"
        );
        let broken =
            parse_profile("access_key: [unclosed\nsecret_key: s3cr3t\n", None).unwrap_err();
        assert!(broken.starts_with("line "), "{broken}");
        assert!(!broken.contains("s3cr3t"), "{broken}");
    }

    #[test]
    fn stand_in_keys_are_only_for_loopback_and_debug_never_shows_the_secret() {
        assert!(is_loopback("http://127.0.0.1:5000"));
        assert!(!is_loopback("https://api.scaleway.com"));
        assert!(!is_loopback("http://127.0.0.1.example.com:80"));
        let refused = ScalewayConfig::stand_in("p", "o", "http://10.0.0.1:1", "http://127.0.0.1:2")
            .unwrap_err();
        assert!(refused.contains("not a loopback address"), "{refused}");
        let config = ScalewayConfig::new("SCWX", SecretString::new("very-secret"), "p");
        assert!(!format!("{config:?}").contains("very-secret"));
        assert_eq!(
            config.s3_endpoint_of("nl-ams"),
            "https://s3.nl-ams.scw.cloud"
        );
        let config = config.queues_key(QueuesKey::new("SCWQ", SecretString::new("q-secret")));
        let shown = format!("{config:?}");
        assert!(
            shown.contains("SCWQ") && !shown.contains("q-secret"),
            "{shown}"
        );
    }

    #[test]
    fn queues_keys_come_in_pairs_and_the_refusal_holds_no_secret() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert!(queues_key_of(&vars(&[])).unwrap().is_none());
        let both = queues_key_of(&vars(&[
            (QUEUES_ACCESS_KEY_VAR, "SCWQ"),
            (QUEUES_SECRET_KEY_VAR, "q-secret"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(both.access_key(), "SCWQ");
        let half = queues_key_of(&vars(&[(QUEUES_SECRET_KEY_VAR, "q-secret")])).unwrap_err();
        assert!(
            half.contains(QUEUES_ACCESS_KEY_VAR) && !half.contains("q-secret"),
            "{half}"
        );
    }
}
