//! Credentials for [`AwsBackend::from_env`](crate::AwsBackend::from_env): `aws-config`'s
//! default chain, and, when it yields nothing, a reason that names every place it
//! looked, what was seen there, and what to do.
//!
//! The reason never holds a secret. Of the variables that carry one, only whether they
//! are set is said; the SDK's own words (kept for a failure other than "nothing found",
//! such as an expired SSO login) are scrubbed of the values of those variables and of
//! anything shaped like an access key or a secret.
//!
//! Its first line is a summary, the lines after it the details: the runner prints the
//! whole reason once on standard error and repeats only the summary beside each
//! resource.

use std::error::Error as _;
use std::path::{Path, PathBuf};

use aws_credential_types::provider::ProvideCredentials as _;
use aws_credential_types::provider::error::CredentialsError;
use aws_types::SdkConfig;

/// The variables whose values are secret: never printed, and scrubbed from the SDK's
/// words.
const SECRET_VARS: [&str; 4] = [
    "AWS_SECRET_ACCESS_KEY",
    "SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ACCESS_KEY_ID",
];

/// What stands in for a scrubbed value.
const REDACTED: &str = "<redacted>";

/// The SDK configuration from the standard sources, if its credentials load; else the
/// reason, naming what was looked for.
pub(crate) async fn load() -> Result<SdkConfig, String> {
    let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let failure = match config.credentials_provider() {
        None => None,
        Some(provider) => match provider.provide_credentials().await {
            Ok(_) => return Ok(config),
            Err(e) => Some(e),
        },
    };
    Err(explain(failure.as_ref(), &Surroundings::process()))
}

/// What the process can see: its environment variables, and which files exist.
struct Surroundings<'a> {
    var: &'a dyn Fn(&str) -> Option<String>,
    exists: &'a dyn Fn(&Path) -> bool,
}

impl Surroundings<'static> {
    fn process() -> Self {
        Surroundings {
            var: &|name| std::env::var(name).ok(),
            exists: &|path| path.exists(),
        }
    }
}

impl Surroundings<'_> {
    /// The variable's value, if it is set to something other than blanks.
    fn set(&self, name: &str) -> Option<String> {
        (self.var)(name).filter(|v| !v.trim().is_empty())
    }

    /// The home directory, as the SDK finds it.
    fn home(&self) -> Option<PathBuf> {
        self.set("HOME")
            .or_else(|| self.set("USERPROFILE"))
            .map(PathBuf::from)
    }

    /// A shared file: as `override_var` names it, or `~/.aws/<name>`; how it is shown,
    /// and whether it exists.
    fn shared_file(&self, override_var: &str, name: &str) -> (String, bool) {
        match self.set(override_var) {
            Some(path) => {
                let full = match path.strip_prefix("~/") {
                    Some(rest) => self.home().map(|h| h.join(rest)),
                    None => Some(PathBuf::from(&path)),
                };
                let exists = full.is_some_and(|p| (self.exists)(&p));
                (format!("{path} ({override_var})"), exists)
            }
            None => {
                let exists = self
                    .home()
                    .is_some_and(|h| (self.exists)(&h.join(".aws").join(name)));
                (format!("~/.aws/{name}"), exists)
            }
        }
    }
}

/// The reason for an `Unreachable` AWS backend: a summary line, then each source in
/// the order the chain tries them, with what was seen of it, then what to do.
fn explain(failure: Option<&CredentialsError>, seen: &Surroundings<'_>) -> String {
    let mut out = match failure {
        None => "no AWS credentials provider is configured".to_owned(),
        Some(CredentialsError::CredentialsNotLoaded(_)) => {
            "no AWS credentials were found".to_owned()
        }
        Some(e) => format!(
            "AWS credentials could not be loaded: {}",
            scrub(&sdk_words(e), seen)
        ),
    };
    out.push_str("\nlooked for, in this order:");
    for (i, line) in sources(seen).iter().enumerate() {
        out.push_str(&format!("\n  {}. {line}", i + 1));
    }
    out.push_str(
        "\nto reach AWS: export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and \
         AWS_SESSION_TOKEN for temporary keys), or set AWS_PROFILE to a profile of \
         ~/.aws/config (`aws configure`; for SSO, `aws configure sso` then `aws sso login`)",
    );
    out
}

/// Each source of the default chain, with what was seen of it.
fn sources(seen: &Surroundings<'_>) -> Vec<String> {
    let pair = |a: &str, b: &str| match (seen.set(a).is_some(), seen.set(b).is_some()) {
        (false, false) => "not set".to_owned(),
        (true, false) => format!("{a} is set, {b} is not"),
        (false, true) => format!("{b} is set, {a} is not"),
        (true, true) => "both set".to_owned(),
    };
    let mut lines = Vec::new();

    let secret_key =
        if seen.set("AWS_SECRET_ACCESS_KEY").is_none() && seen.set("SECRET_ACCESS_KEY").is_some() {
            "SECRET_ACCESS_KEY"
        } else {
            "AWS_SECRET_ACCESS_KEY"
        };
    lines.push(format!(
        "the environment variables AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with \
         AWS_SESSION_TOKEN for temporary keys): {}",
        pair("AWS_ACCESS_KEY_ID", secret_key)
    ));

    let profile = match seen.set("AWS_PROFILE") {
        Some(name) => format!("the profile `{name}` (AWS_PROFILE)"),
        None => "the profile `default` (AWS_PROFILE is not set)".to_owned(),
    };
    let (config, config_exists) = seen.shared_file("AWS_CONFIG_FILE", "config");
    let (creds, creds_exists) = seen.shared_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    let files = match (config_exists, creds_exists) {
        (false, false) => "neither file exists".to_owned(),
        (true, false) => format!("{creds} does not exist, and {config} gave no credentials"),
        (false, true) => format!("{config} does not exist, and {creds} gave no credentials"),
        (true, true) => "both files exist, and gave no credentials".to_owned(),
    };
    lines.push(format!(
        "{profile} in the shared files {config} and {creds}, which may hold keys, an SSO \
         login (sso_session, sso_start_url), a role to assume, a credential_process or a web \
         identity token: {files}"
    ));

    lines.push(format!(
        "web identity, AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN: {}",
        pair("AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN")
    ));

    let container = [
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ]
    .into_iter()
    .find(|v| seen.set(v).is_some());
    lines.push(format!(
        "the container credentials endpoint (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or \
         AWS_CONTAINER_CREDENTIALS_FULL_URI): {}",
        match container {
            Some(var) => format!("{var} is set, and gave no credentials"),
            None => "not set".to_owned(),
        }
    ));

    let imds_off = seen
        .set("AWS_EC2_METADATA_DISABLED")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    lines.push(format!(
        "the EC2 instance metadata endpoint: {}",
        if imds_off {
            "turned off by AWS_EC2_METADATA_DISABLED=true"
        } else {
            "no credentials (not on EC2, or the instance has no role)"
        }
    ));
    lines
}

/// The SDK's error and its causes, one after another.
fn sdk_words(e: &CredentialsError) -> String {
    let mut words = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !text.is_empty() && !words.ends_with(&text) {
            words.push_str(": ");
            words.push_str(&text);
        }
        cause = c.source();
    }
    words.replace('\n', " ")
}

/// `text` with the values of the secret variables, and anything shaped like an access
/// key id or a secret, replaced by `<redacted>`.
fn scrub(text: &str, seen: &Surroundings<'_>) -> String {
    let mut out = text.to_owned();
    for var in SECRET_VARS {
        if let Some(value) = seen.set(var) {
            let value = value.trim();
            if value.len() >= 4 {
                out = out.replace(value, REDACTED);
            }
        }
    }
    scrub_shapes(&out)
}

/// Replaces each run of key-like characters (letters, digits, `+`, `/`, `=`) that is an
/// access key id (`AKIA…`, `ASIA…`, 20 characters) or is 32 characters or more with
/// mixed letters and digits (a secret key, a session token).
fn scrub_shapes(text: &str) -> String {
    let keyish = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=');
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        let key_id = run.len() == 20
            && (run.starts_with("AKIA") || run.starts_with("ASIA"))
            && run
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
        let secret = run.len() >= 32
            && run.chars().any(|c| c.is_ascii_digit())
            && run.chars().any(|c| c.is_ascii_uppercase())
            && run.chars().any(|c| c.is_ascii_lowercase());
        if key_id || secret {
            out.push_str(REDACTED);
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for c in text.chars() {
        if keyish(c) {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    /// The reason given `vars` and the files that exist.
    fn reason(vars: &[(&str, &str)], files: &[&str], failure: Option<&CredentialsError>) -> String {
        let vars: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let files: BTreeSet<PathBuf> = files.iter().map(PathBuf::from).collect();
        let var = move |name: &str| vars.get(name).cloned();
        let exists = move |path: &Path| files.contains(path);
        explain(
            failure,
            &Surroundings {
                var: &var,
                exists: &exists,
            },
        )
    }

    fn not_loaded() -> CredentialsError {
        CredentialsError::not_loaded("no providers in chain provided credentials")
    }

    #[test]
    fn nothing_set_names_every_source_and_what_to_do() {
        let text = reason(
            &[("HOME", "/home/u"), ("AWS_EC2_METADATA_DISABLED", "true")],
            &[],
            Some(&not_loaded()),
        );
        assert!(
            text.starts_with("no AWS credentials were found\n"),
            "{text}"
        );
        for needle in [
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "the profile `default` (AWS_PROFILE is not set)",
            "~/.aws/config and ~/.aws/credentials",
            "SSO",
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "turned off by AWS_EC2_METADATA_DISABLED=true",
            "neither file exists",
            "aws sso login",
        ] {
            assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
        }
    }

    #[test]
    fn what_was_seen_is_said_by_name_and_never_by_value() {
        let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
        let text = reason(
            &[
                ("HOME", "/home/u"),
                ("AWS_SECRET_ACCESS_KEY", secret),
                ("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEXAMPLETOKEN"),
                ("AWS_PROFILE", "sandbox"),
                ("AWS_SHARED_CREDENTIALS_FILE", "/etc/aws/creds"),
                ("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/ci"),
            ],
            &["/home/u/.aws/config"],
            Some(&not_loaded()),
        );
        assert!(
            text.contains("AWS_SECRET_ACCESS_KEY is set, AWS_ACCESS_KEY_ID is not"),
            "{text}"
        );
        assert!(
            text.contains("the profile `sandbox` (AWS_PROFILE)"),
            "{text}"
        );
        assert!(
            text.contains("/etc/aws/creds (AWS_SHARED_CREDENTIALS_FILE) does not exist"),
            "{text}"
        );
        assert!(text.contains("~/.aws/config gave no credentials"), "{text}");
        assert!(
            text.contains("AWS_ROLE_ARN is set, AWS_WEB_IDENTITY_TOKEN_FILE is not"),
            "{text}"
        );
        assert!(text.contains("not on EC2"), "{text}");
        assert!(
            !text.contains(secret) && !text.contains("EXAMPLETOKEN"),
            "{text}"
        );
    }

    #[test]
    fn the_sdk_words_are_kept_and_scrubbed_of_secrets() {
        let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
        let failure = CredentialsError::provider_error(format!(
            "external process exited with code 1. Stderr: bad AKIAIOSFODNN7EXAMPLE {secret} \
             and hunter2-but-longer and a long token Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MEFCQ0RFRkdISUpL"
        ));
        let text = reason(
            &[
                ("HOME", "/home/u"),
                ("AWS_SESSION_TOKEN", "hunter2-but-longer"),
            ],
            &[],
            Some(&failure),
        );
        let first = text.lines().next().unwrap();
        assert!(first.starts_with("AWS credentials could not be loaded: an error occurred while loading credentials: external process exited"), "{first}");
        for leaked in [
            secret,
            "AKIAIOSFODNN7EXAMPLE",
            "hunter2-but-longer",
            "Zm9vYmFyYmF6",
        ] {
            assert!(!text.contains(leaked), "{leaked} leaked:\n{text}");
        }
        assert!(first.contains("<redacted>"), "{first}");
    }

    #[test]
    fn ordinary_words_and_paths_are_left_alone() {
        let text = "profile `sandbox` was not defined in /home/someone/.aws/config (line 12)";
        assert_eq!(scrub_shapes(text), text);
        assert_eq!(
            scrub_shapes("arn:aws:iam::123456789012:role/ci"),
            "arn:aws:iam::123456789012:role/ci"
        );
    }
}
