//! The talosconfig file: contexts with endpoints, nodes, and the mutual-TLS material
//! (CA, client certificate and key, each base64 of PEM).
//!
//! ```yaml
//! context: prod
//! contexts:
//!   prod:
//!     endpoints: [10.0.0.2]
//!     nodes: [10.0.0.2, 10.0.0.3]
//!     ca: <base64 PEM>
//!     crt: <base64 PEM>
//!     key: <base64 PEM>
//! ```
//!
//! Every refusal names the file and says what is wrong; none quotes key material.
//! [`TalosContext::admin_credentials`] also requires the client certificate to carry
//! the `os:admin` role (as an organisation of its subject): observation reads the
//! machine configuration, which Talos shows to administrators only, and dispatch
//! applies configuration.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;

use crate::redact::redact;

/// The Talos role an administrator's client certificate carries.
pub const ADMIN_ROLE: &str = "os:admin";

/// Why a talosconfig was refused: the file, the context (when one was selected) and
/// the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("talosconfig {}: {problem}", path.display())]
pub struct TalosConfigError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub problem: TalosConfigProblem,
}

/// What is wrong with a talosconfig.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TalosConfigProblem {
    /// The file could not be read.
    #[error("cannot be read: {0}")]
    Unreadable(String),
    /// The file is not a talosconfig document.
    #[error("is not a valid talosconfig document: {0}")]
    Malformed(String),
    /// No context was asked for and the file names no current one.
    #[error("names no current context (set `context`) and none was asked for")]
    NoContext,
    /// The context asked for is not in the file.
    #[error("has no context named {name:?} (it has: {available})")]
    UnknownContext {
        /// The name asked for.
        name: String,
        /// The names the file has, comma-separated.
        available: String,
    },
    /// A field the context needs is absent or empty.
    #[error("context {context:?} has no `{field}`")]
    MissingField {
        /// The context.
        context: String,
        /// The field.
        field: &'static str,
    },
    /// A field is not valid base64.
    #[error("context {context:?}: `{field}` is not valid base64")]
    InvalidBase64 {
        /// The context.
        context: String,
        /// The field.
        field: &'static str,
    },
    /// A certificate field does not hold a PEM X.509 certificate.
    #[error("context {context:?}: `{field}` is not a PEM certificate ({detail})")]
    InvalidCertificate {
        /// The context.
        context: String,
        /// The field.
        field: &'static str,
        /// What the parser said.
        detail: String,
    },
    /// The key field does not hold a PEM private key.
    #[error("context {context:?}: `key` is not a PEM private key")]
    InvalidKey {
        /// The context.
        context: String,
    },
    /// The client certificate does not carry the `os:admin` role.
    #[error(
        "context {context:?}: the client certificate does not carry the os:admin role \
         (its organisations: [{organisations}]); use a talosconfig issued for os:admin"
    )]
    NotAdmin {
        /// The context.
        context: String,
        /// The certificate's organisations, comma-separated.
        organisations: String,
    },
}

#[derive(Deserialize)]
struct RawConfig {
    #[serde(default)]
    context: Option<String>,
    #[serde(default)]
    contexts: BTreeMap<String, RawContext>,
}

#[derive(Deserialize)]
struct RawContext {
    #[serde(default)]
    endpoints: Vec<String>,
    #[serde(default)]
    nodes: Vec<String>,
    #[serde(default)]
    ca: Option<String>,
    #[serde(default)]
    crt: Option<String>,
    #[serde(default)]
    key: Option<String>,
}

/// A parsed talosconfig file. Contexts are checked when selected.
pub struct TalosConfig {
    path: PathBuf,
    current: Option<String>,
    contexts: BTreeMap<String, RawContext>,
}

impl fmt::Debug for TalosConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TalosConfig")
            .field("path", &self.path)
            .field("current", &self.current)
            .field("contexts", &self.contexts.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl TalosConfig {
    /// Reads and parses the file at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, TalosConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|error| TalosConfigError {
            path: path.to_owned(),
            problem: TalosConfigProblem::Unreadable(error.to_string()),
        })?;
        TalosConfig::parse(&text, path)
    }

    /// Parses talosconfig text; `path` names it in refusals.
    pub fn parse(text: &str, path: impl Into<PathBuf>) -> Result<Self, TalosConfigError> {
        let path = path.into();
        let raw: RawConfig = serde_norway::from_str(text).map_err(|error| {
            // The parser's message can quote the offending value: redact it.
            let detail = match error.location() {
                Some(at) => format!(
                    "{} (line {}, column {})",
                    redact(&error.to_string()),
                    at.line(),
                    at.column()
                ),
                None => redact(&error.to_string()),
            };
            TalosConfigError {
                path: path.clone(),
                problem: TalosConfigProblem::Malformed(detail),
            }
        })?;
        Ok(TalosConfig {
            path,
            current: raw.context.filter(|name| !name.is_empty()),
            contexts: raw.contexts,
        })
    }

    /// The file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The current context's name, if the file names one.
    #[must_use]
    pub fn current_context(&self) -> Option<&str> {
        self.current.as_deref()
    }

    /// The names of the file's contexts.
    pub fn context_names(&self) -> impl Iterator<Item = &str> {
        self.contexts.keys().map(String::as_str)
    }

    fn error(&self, problem: TalosConfigProblem) -> TalosConfigError {
        TalosConfigError {
            path: self.path.clone(),
            problem,
        }
    }

    /// The context `name`, or the current one for `None`, with its TLS material
    /// decoded and checked.
    pub fn context(&self, name: Option<&str>) -> Result<TalosContext, TalosConfigError> {
        let name = name
            .or(self.current.as_deref())
            .ok_or_else(|| self.error(TalosConfigProblem::NoContext))?;
        let raw = self.contexts.get(name).ok_or_else(|| {
            self.error(TalosConfigProblem::UnknownContext {
                name: name.to_owned(),
                available: self.context_names().collect::<Vec<_>>().join(", "),
            })
        })?;
        let field =
            |field: &'static str, value: &Option<String>| -> Result<String, TalosConfigError> {
                let value = value
                    .as_deref()
                    .filter(|value| !value.trim().is_empty())
                    .ok_or_else(|| {
                        self.error(TalosConfigProblem::MissingField {
                            context: name.to_owned(),
                            field,
                        })
                    })?;
                let compact: String = value.chars().filter(|c| !c.is_whitespace()).collect();
                let bytes = BASE64.decode(compact).map_err(|_| {
                    self.error(TalosConfigProblem::InvalidBase64 {
                        context: name.to_owned(),
                        field,
                    })
                })?;
                String::from_utf8(bytes).map_err(|_| {
                    self.error(TalosConfigProblem::InvalidBase64 {
                        context: name.to_owned(),
                        field,
                    })
                })
            };
        let ca_pem = field("ca", &raw.ca)?;
        let crt_pem = field("crt", &raw.crt)?;
        let key_pem = field("key", &raw.key)?;

        let certificate = |field: &'static str, pem: &str| {
            organisations(pem).map_err(|detail| {
                self.error(TalosConfigProblem::InvalidCertificate {
                    context: name.to_owned(),
                    field,
                    detail,
                })
            })
        };
        certificate("ca", &ca_pem)?;
        let organisations = certificate("crt", &crt_pem)?;
        if !(key_pem.contains("-----BEGIN") && key_pem.contains("PRIVATE KEY-----")) {
            return Err(self.error(TalosConfigProblem::InvalidKey {
                context: name.to_owned(),
            }));
        }
        Ok(TalosContext {
            path: self.path.clone(),
            name: name.to_owned(),
            endpoints: raw.endpoints.clone(),
            nodes: raw.nodes.clone(),
            ca_pem,
            crt_pem,
            key_pem,
            organisations,
        })
    }
}

/// The organisations in the subject of the first certificate in `pem`.
fn organisations(pem: &str) -> Result<Vec<String>, String> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .map_err(|_| "no PEM block found".to_owned())?;
    if pem.label != "CERTIFICATE" {
        return Err(format!("the PEM block is a {}", pem.label));
    }
    let certificate = pem
        .parse_x509()
        .map_err(|_| "the certificate does not parse".to_owned())?;
    Ok(certificate
        .subject()
        .iter_organization()
        .filter_map(|organisation| organisation.as_str().ok())
        .map(str::to_owned)
        .collect())
}

/// One context of a talosconfig, its TLS material decoded. `Debug` leaves the key
/// out.
#[derive(Clone)]
pub struct TalosContext {
    path: PathBuf,
    name: String,
    endpoints: Vec<String>,
    nodes: Vec<String>,
    ca_pem: String,
    crt_pem: String,
    key_pem: String,
    organisations: Vec<String>,
}

impl fmt::Debug for TalosContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TalosContext")
            .field("name", &self.name)
            .field("endpoints", &self.endpoints)
            .field("nodes", &self.nodes)
            .field("organisations", &self.organisations)
            .finish_non_exhaustive()
    }
}

impl TalosContext {
    /// The context's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The endpoints.
    #[must_use]
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// The nodes.
    #[must_use]
    pub fn nodes(&self) -> &[String] {
        &self.nodes
    }

    /// The organisations (Talos roles) of the client certificate's subject.
    #[must_use]
    pub fn organisations(&self) -> &[String] {
        &self.organisations
    }

    /// The context's credentials, if its client certificate carries `os:admin`.
    pub fn admin_credentials(&self) -> Result<Credentials, TalosConfigError> {
        if !self.organisations.iter().any(|org| org == ADMIN_ROLE) {
            return Err(TalosConfigError {
                path: self.path.clone(),
                problem: TalosConfigProblem::NotAdmin {
                    context: self.name.clone(),
                    organisations: self.organisations.join(", "),
                },
            });
        }
        Ok(Credentials {
            ca_pem: self.ca_pem.clone(),
            crt_pem: self.crt_pem.clone(),
            key_pem: self.key_pem.clone(),
        })
    }
}

/// Mutual-TLS credentials whose client certificate carries `os:admin`. Made only by
/// [`TalosContext::admin_credentials`]. `Debug` shows nothing of them.
#[derive(Clone)]
pub struct Credentials {
    pub(crate) ca_pem: String,
    pub(crate) crt_pem: String,
    pub(crate) key_pem: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use infra_testkit::talos::TestPki;

    use super::*;

    fn b64(text: &str) -> String {
        BASE64.encode(text)
    }

    fn config_text(ca: &str, crt: &str, key: &str) -> String {
        format!(
            "context: a\ncontexts:\n  a:\n    endpoints: [10.0.0.2]\n    nodes:\n      - 10.0.0.2\n      - 10.0.0.3:50001\n    ca: {}\n    crt: {}\n    key: {}\n",
            b64(ca),
            b64(crt),
            b64(key)
        )
    }

    fn problem(result: Result<impl fmt::Debug, TalosConfigError>) -> TalosConfigProblem {
        let error = result.expect_err("refused");
        assert_eq!(error.path, Path::new("/etc/talos/config"));
        assert!(
            error
                .to_string()
                .starts_with("talosconfig /etc/talos/config: ")
        );
        error.problem
    }

    #[test]
    fn parses_the_current_context_and_checks_the_admin_role() {
        let pki = TestPki::generate().expect("pki");
        let admin = pki.admin_client().expect("client");
        let text = config_text(&pki.ca_pem(), admin.cert_pem(), admin.key_pem());
        let config = TalosConfig::parse(&text, "/etc/talos/config").expect("parse");
        assert_eq!(config.current_context(), Some("a"));
        let context = config.context(None).expect("context");
        assert_eq!(context.nodes(), ["10.0.0.2", "10.0.0.3:50001"]);
        assert_eq!(context.endpoints(), ["10.0.0.2"]);
        assert_eq!(context.organisations(), [ADMIN_ROLE]);
        let credentials = context.admin_credentials().expect("admin");
        let shown = format!("{credentials:?} {context:?} {config:?}");
        assert!(!shown.contains("PRIVATE KEY"), "{shown}");
        assert!(!shown.contains(&b64(admin.key_pem())[..20]), "{shown}");
    }

    #[test]
    fn refuses_a_certificate_without_os_admin() {
        let pki = TestPki::generate().expect("pki");
        let reader = pki.client("os:reader").expect("client");
        let text = config_text(&pki.ca_pem(), reader.cert_pem(), reader.key_pem());
        let config = TalosConfig::parse(&text, "/etc/talos/config").expect("parse");
        let context = config.context(None).expect("context");
        let refused = problem(context.admin_credentials());
        assert_eq!(
            refused,
            TalosConfigProblem::NotAdmin {
                context: "a".into(),
                organisations: "os:reader".into()
            }
        );
        assert!(
            refused
                .to_string()
                .contains("does not carry the os:admin role")
        );
    }

    #[test]
    fn refuses_malformed_files_clearly() {
        let pki = TestPki::generate().expect("pki");
        let admin = pki.admin_client().expect("client");
        let parse = |text: &str| TalosConfig::parse(text, "/etc/talos/config");

        assert!(matches!(
            problem(parse("contexts: [1, 2]")),
            TalosConfigProblem::Malformed(_)
        ));
        let no_current = parse("contexts: {}\n").expect("parse");
        assert_eq!(
            problem(no_current.context(None)),
            TalosConfigProblem::NoContext
        );
        let unknown = parse(&config_text(
            &pki.ca_pem(),
            admin.cert_pem(),
            admin.key_pem(),
        ))
        .expect("parse");
        assert_eq!(
            problem(unknown.context(Some("b"))),
            TalosConfigProblem::UnknownContext {
                name: "b".into(),
                available: "a".into()
            }
        );

        let missing_key =
            parse("context: a\ncontexts:\n  a:\n    ca: eA==\n    crt: eA==\n").expect("parse");
        assert_eq!(
            problem(missing_key.context(None)),
            TalosConfigProblem::MissingField {
                context: "a".into(),
                field: "key"
            }
        );
        let bad_base64 =
            parse("context: a\ncontexts:\n  a:\n    ca: '%%%'\n    crt: eA==\n    key: eA==\n")
                .expect("parse");
        assert_eq!(
            problem(bad_base64.context(None)),
            TalosConfigProblem::InvalidBase64 {
                context: "a".into(),
                field: "ca"
            }
        );
        let not_a_cert = parse(&config_text(
            &pki.ca_pem(),
            "not a certificate",
            admin.key_pem(),
        ))
        .expect("parse");
        assert!(matches!(
            problem(not_a_cert.context(None)),
            TalosConfigProblem::InvalidCertificate { field: "crt", .. }
        ));
        let key_is_cert = parse(&config_text(
            &pki.ca_pem(),
            admin.cert_pem(),
            admin.cert_pem(),
        ))
        .expect("parse");
        assert_eq!(
            problem(key_is_cert.context(None)),
            TalosConfigProblem::InvalidKey {
                context: "a".into()
            }
        );
    }

    #[test]
    fn parser_messages_do_not_quote_values() {
        let error = TalosConfig::parse(
            "context: a\ncontexts:\n  a:\n    key: [\"LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0t\"]\n",
            "/etc/talos/config",
        )
        .expect_err("a sequence is not a key");
        let shown = error.to_string();
        assert!(!shown.contains("LS0tLS1"), "{shown}");
    }

    #[test]
    fn unreadable_file_names_the_path() {
        let error = TalosConfig::load("/nonexistent/talosconfig").expect_err("refused");
        assert!(
            error
                .to_string()
                .starts_with("talosconfig /nonexistent/talosconfig: cannot be read")
        );
    }
}
