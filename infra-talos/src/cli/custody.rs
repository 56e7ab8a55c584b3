//! Key custody: which key provider the command set and the service seal and open
//! artifacts with, and the warnings given at start about where a keyring file sits.
//!
//! **Transit** (recommended): an OpenBao or Vault Transit engine, configured by the
//! `transit` object of the configuration file (`address`, `token_file`, `mount`,
//! `namespace`, `key`, `ca_certificate`) or the environment
//! (`INFRA_TALOS_TRANSIT_ADDR`, `INFRA_TALOS_TRANSIT_TOKEN_FILE`,
//! `INFRA_TALOS_TRANSIT_MOUNT`, `INFRA_TALOS_TRANSIT_NAMESPACE`,
//! `INFRA_TALOS_TRANSIT_KEY`, `INFRA_TALOS_TRANSIT_CA`), the environment winning. The
//! token is only ever read from the token file: a `token` in the configuration and
//! `INFRA_TALOS_TRANSIT_TOKEN` are refused, and no flag takes one.
//!
//! **The keyring file** (development): a [`LocalKeyring`] directory (`keyring`,
//! `INFRA_TALOS_KEYRING`). Configuring both is refused.
//!
//! **Warnings.** A command that seals or opens artifacts, and `serve`, warn (a `warn`
//! log line on standard error; nothing is refused) when the keyring sits inside or
//! beside a place the store's backups are taken from — the configured `backups_dir`
//! (`INFRA_TALOS_BACKUPS_DIR`), and for a SQLite store the directory of its file —
//! when the keyring directory may be written by group or others, and when the
//! Transit token file may be read by them. A keyring file open to group or others is
//! refused outright by the keyring itself.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::Failure;
use crate::acts::Keys;
use crate::keys::{KeyProvider, LocalKeyring, TransitClient, TransitConfig, TransitToken};

/// The key `publish` seals with when neither `--key` nor `transit.key` names one.
const DEFAULT_KEY: &str = "artifacts";

/// The `transit` object of the configuration file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TransitFile {
    address: Option<String>,
    token_file: Option<PathBuf>,
    mount: Option<String>,
    namespace: Option<String>,
    key: Option<String>,
    ca_certificate: Option<PathBuf>,
    /// Refused when present: the token is read from `token_file` only.
    token: Option<serde_json::Value>,
}

/// Where the Transit engine is and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TransitCustody {
    address: String,
    token_file: PathBuf,
    mount: Option<String>,
    namespace: Option<String>,
    key: Option<String>,
    ca_certificate: Option<PathBuf>,
}

/// Which provider artifacts are sealed and opened with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Custody {
    /// An OpenBao / Vault Transit engine (recommended).
    Transit(TransitCustody),
    /// The local keyring in this directory (development).
    Keyring(PathBuf),
    /// None configured: an act that needs keys is refused, saying how to configure.
    Unconfigured,
}

impl Custody {
    /// The custody the configuration file's `transit` and `keyring` and the
    /// environment describe (the environment winning).
    pub(super) fn resolve(
        file: Option<TransitFile>,
        keyring: Option<PathBuf>,
        env: &BTreeMap<String, String>,
    ) -> Result<Custody, Failure> {
        if env.contains_key("INFRA_TALOS_TRANSIT_TOKEN") {
            return Err(Failure::Usage(
                "INFRA_TALOS_TRANSIT_TOKEN is set, and the Transit token is read from a file \
                 only: put it in a file readable by this user alone and name it in \
                 `transit.token_file` or INFRA_TALOS_TRANSIT_TOKEN_FILE; unset \
                 INFRA_TALOS_TRANSIT_TOKEN"
                    .into(),
            ));
        }
        let file = file.unwrap_or_default();
        if file.token.is_some() {
            return Err(Failure::Usage(
                "the configuration's `transit` names a `token`: the Transit token is read \
                 from a file only (`transit.token_file`), never from the configuration"
                    .into(),
            ));
        }
        let var = |name: &str| env.get(name).filter(|v| !v.is_empty()).cloned();
        let address = var("INFRA_TALOS_TRANSIT_ADDR").or(file.address);
        let token_file = var("INFRA_TALOS_TRANSIT_TOKEN_FILE")
            .map(PathBuf::from)
            .or(file.token_file);
        let mount = var("INFRA_TALOS_TRANSIT_MOUNT").or(file.mount);
        let namespace = var("INFRA_TALOS_TRANSIT_NAMESPACE").or(file.namespace);
        let key = var("INFRA_TALOS_TRANSIT_KEY").or(file.key);
        let ca_certificate = var("INFRA_TALOS_TRANSIT_CA")
            .map(PathBuf::from)
            .or(file.ca_certificate);
        let Some(address) = address else {
            let stray = [
                ("token_file", token_file.is_some()),
                ("mount", mount.is_some()),
                ("namespace", namespace.is_some()),
                ("key", key.is_some()),
                ("ca_certificate", ca_certificate.is_some()),
            ]
            .into_iter()
            .find(|(_, given)| *given);
            if let Some((name, _)) = stray {
                return Err(Failure::Usage(format!(
                    "Transit's `{name}` is set but no Transit address is: set \
                     `transit.address` or INFRA_TALOS_TRANSIT_ADDR"
                )));
            }
            return Ok(keyring.map_or(Custody::Unconfigured, Custody::Keyring));
        };
        if let Some(dir) = keyring {
            return Err(Failure::Usage(format!(
                "both Transit ({address}) and a keyring directory ({}) are configured: \
                 choose one (Transit is recommended; the keyring is for development)",
                dir.display()
            )));
        }
        let token_file = token_file.ok_or_else(|| {
            Failure::Usage(
                "Transit is configured without a token file: set `transit.token_file` or \
                 INFRA_TALOS_TRANSIT_TOKEN_FILE"
                    .into(),
            )
        })?;
        Ok(Custody::Transit(TransitCustody {
            address,
            token_file,
            mount,
            namespace,
            key,
            ca_certificate,
        }))
    }

    /// The key `publish` seals with when `--key` names none.
    pub(super) fn default_key(&self) -> &str {
        match self {
            Custody::Transit(transit) => transit.key.as_deref().unwrap_or(DEFAULT_KEY),
            Custody::Keyring(_) | Custody::Unconfigured => DEFAULT_KEY,
        }
    }

    /// The keys acts are made with: a configuration that cannot be used is kept as
    /// the reason an act needing keys is refused.
    pub(super) fn keys(&self) -> Keys {
        match self {
            Custody::Keyring(dir) => match LocalKeyring::open(dir) {
                Ok(keyring) => Keys::Keyring(Arc::new(keyring)),
                Err(e) => Keys::Missing(e.to_string()),
            },
            Custody::Transit(transit) => match transit.client() {
                Ok(client) => Keys::Provider(Arc::new(client)),
                Err(why) => Keys::Missing(why),
            },
            Custody::Unconfigured => Keys::Missing(
                "no key custody: set `transit` in the configuration (or \
                 INFRA_TALOS_TRANSIT_ADDR and INFRA_TALOS_TRANSIT_TOKEN_FILE), or for \
                 development `keyring` (INFRA_TALOS_KEYRING)"
                    .into(),
            ),
        }
    }

    /// The provider itself, for the service.
    pub(super) fn provider(&self) -> Result<Arc<dyn KeyProvider>, String> {
        match self.keys() {
            Keys::Keyring(keyring) => Ok(keyring),
            Keys::Provider(provider) => Ok(provider),
            Keys::Missing(why) => Err(why),
        }
    }

    /// What the service checks before it starts: that the Transit key it seals with
    /// can be read with its token (a wrong token, a missing key or an unreachable or
    /// sealed server is refused now, not at the first plan).
    pub(super) async fn check_at_start(&self) -> Result<(), String> {
        let Custody::Transit(transit) = self else {
            return Ok(());
        };
        let client = transit.client()?;
        let key = self.default_key();
        client.read_key(key).await.map(drop).map_err(|e| {
            format!(
                "the Transit key custody at {} cannot be used: {e}",
                transit.address
            )
        })
    }

    /// The warnings about this custody, given at start (see the module
    /// documentation). `database` is the store's URL; `backups_dir` the configured
    /// backups directory.
    pub(super) fn warnings(
        &self,
        database: Option<&str>,
        backups_dir: Option<&Path>,
    ) -> Vec<String> {
        match self {
            Custody::Keyring(dir) => keyring_warnings(dir, database, backups_dir),
            Custody::Transit(transit) => open_to_others(&transit.token_file, 0o044)
                .map(|mode| {
                    format!(
                        "the Transit token file {} may be read by group or others (mode \
                         {mode:04o}): restrict it to 0600",
                        transit.token_file.display()
                    )
                })
                .into_iter()
                .collect(),
            Custody::Unconfigured => Vec::new(),
        }
    }

    /// Whether this is the local keyring.
    pub(super) fn is_keyring(&self) -> bool {
        matches!(self, Custody::Keyring(_))
    }
}

impl TransitCustody {
    /// A client, with the token read from its file now.
    fn client(&self) -> Result<TransitClient, String> {
        let text =
            zeroize::Zeroizing::new(std::fs::read_to_string(&self.token_file).map_err(|e| {
                format!(
                    "cannot read the Transit token file {}: {e}",
                    self.token_file.display()
                )
            })?);
        let token = text.trim();
        if token.is_empty() {
            return Err(format!(
                "the Transit token file {} is empty",
                self.token_file.display()
            ));
        }
        let mut config = TransitConfig::new(self.address.clone(), TransitToken::new(token));
        if let Some(mount) = &self.mount {
            config = config.with_mount(mount.clone());
        }
        if let Some(namespace) = &self.namespace {
            config = config.with_namespace(namespace.clone());
        }
        if let Some(ca) = &self.ca_certificate {
            let pem = std::fs::read_to_string(ca).map_err(|e| {
                format!(
                    "cannot read the Transit CA certificate {}: {e}",
                    ca.display()
                )
            })?;
            config = config.with_ca_certificate_pem(pem);
        }
        TransitClient::new(config).map_err(|e| e.to_string())
    }
}

/// The keyring's warnings: inside or beside a backups location, or a directory
/// others may write.
fn keyring_warnings(dir: &Path, database: Option<&str>, backups_dir: Option<&Path>) -> Vec<String> {
    let mut out = Vec::new();
    let keyring = absolute(dir);
    let mut places: Vec<(PathBuf, String)> = Vec::new();
    if let Some(backups) = backups_dir {
        places.push((
            absolute(backups),
            format!("the backups directory {}", backups.display()),
        ));
    }
    if let Some(store) = database.and_then(sqlite_file)
        && let Some(parent) = absolute(&store).parent()
    {
        places.push((
            parent.to_path_buf(),
            format!("the directory of the SQLite store {}", store.display()),
        ));
    }
    for (place, named) in places {
        if let Some(relation) = near(&keyring, &place) {
            out.push(format!(
                "the keyring {} sits {relation} {named}: a backup of the store taken there \
                 holds the key beside the artifacts it seals; keep the keyring elsewhere, \
                 backed up apart from the store (or use Transit)",
                dir.join("keyring.json").display()
            ));
        }
    }
    if let Some(mode) = open_to_others(dir, 0o022) {
        out.push(format!(
            "the keyring directory {} may be written by group or others (mode {mode:04o}): \
             they can replace the keyring; restrict it to 0700",
            dir.display()
        ));
    }
    out
}

/// How `keyring` lies relative to a backups location `place`: inside it, or beside it
/// (sharing its parent, or being its parent), a shared parent of `/` not counting.
fn near(keyring: &Path, place: &Path) -> Option<&'static str> {
    if keyring.starts_with(place) {
        return Some("inside");
    }
    let parent = place.parent().filter(|p| p.parent().is_some())?;
    (keyring == parent || keyring.parent() == Some(parent)).then_some("beside")
}

/// The file a `sqlite:<path>` URL names.
fn sqlite_file(url: &str) -> Option<PathBuf> {
    let path = url.strip_prefix("sqlite:")?;
    let path = path.strip_prefix("//").unwrap_or(path);
    (!path.is_empty() && !path.starts_with(':') && !path.starts_with("file:"))
        .then(|| PathBuf::from(path))
}

/// The path made absolute and free of `.` and `..`, through the file system where it
/// exists.
fn absolute(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    let joined = std::env::current_dir().map_or_else(|_| path.to_path_buf(), |cwd| cwd.join(path));
    let mut out = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The mode of `path` when any of the `mask` bits are set in it.
fn open_to_others(path: &Path, mask: u32) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o7777;
        (mode & mask != 0).then_some(mode)
    }
    #[cfg(not(unix))]
    {
        let _ = (path, mask);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn usage(result: Result<Custody, Failure>) -> String {
        match result {
            Err(Failure::Usage(text)) => text,
            other => panic!("expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn transit_is_chosen_by_its_address_and_the_environment_wins() {
        let file: TransitFile = serde_json::from_str(
            r#"{"address": "http://127.0.0.1:1", "token_file": "/t", "key": "k"}"#,
        )
        .expect("parse");
        let custody = Custody::resolve(
            Some(file),
            None,
            &env(&[("INFRA_TALOS_TRANSIT_ADDR", "http://127.0.0.1:2")]),
        )
        .expect("custody");
        let Custody::Transit(transit) = &custody else {
            panic!("{custody:?}")
        };
        assert_eq!(transit.address, "http://127.0.0.1:2");
        assert_eq!(transit.token_file, PathBuf::from("/t"));
        assert_eq!(custody.default_key(), "k");
        let keyring = Custody::resolve(None, Some("/k".into()), &env(&[])).expect("keyring");
        assert_eq!(keyring, Custody::Keyring("/k".into()));
        assert_eq!(keyring.default_key(), "artifacts");
        assert_eq!(
            Custody::resolve(None, None, &env(&[])).expect("none"),
            Custody::Unconfigured
        );
    }

    #[test]
    fn a_token_is_never_taken_from_the_configuration_or_the_environment() {
        let file: TransitFile = serde_json::from_str(
            r#"{"address": "http://127.0.0.1:1", "token": "s.never-shown-7f3a"}"#,
        )
        .expect("parse");
        let text = usage(Custody::resolve(Some(file), None, &env(&[])));
        assert!(text.contains("never from the configuration"), "{text}");
        assert!(!text.contains("never-shown"), "{text}");
        let text = usage(Custody::resolve(
            None,
            None,
            &env(&[("INFRA_TALOS_TRANSIT_TOKEN", "s.never-shown-7f3a")]),
        ));
        assert!(
            text.starts_with("INFRA_TALOS_TRANSIT_TOKEN is set"),
            "{text}"
        );
        assert!(!text.contains("never-shown"), "{text}");
    }

    #[test]
    fn incomplete_or_doubled_custody_is_refused() {
        let text = usage(Custody::resolve(
            None,
            None,
            &env(&[("INFRA_TALOS_TRANSIT_TOKEN_FILE", "/t")]),
        ));
        assert!(text.starts_with("Transit's `token_file` is set"), "{text}");
        let text = usage(Custody::resolve(
            None,
            None,
            &env(&[("INFRA_TALOS_TRANSIT_ADDR", "http://127.0.0.1:1")]),
        ));
        assert!(text.starts_with("Transit is configured without a token file"));
        let text = usage(Custody::resolve(
            None,
            Some("/k".into()),
            &env(&[
                ("INFRA_TALOS_TRANSIT_ADDR", "http://127.0.0.1:1"),
                ("INFRA_TALOS_TRANSIT_TOKEN_FILE", "/t"),
            ]),
        ));
        assert!(text.starts_with("both Transit"), "{text}");
    }

    #[test]
    fn inside_and_beside_a_backups_location() {
        let p = Path::new;
        assert_eq!(
            near(p("/srv/backups/keys"), p("/srv/backups")),
            Some("inside")
        );
        assert_eq!(near(p("/srv/backups"), p("/srv/backups")), Some("inside"));
        assert_eq!(near(p("/srv/keys"), p("/srv/backups")), Some("beside"));
        assert_eq!(near(p("/srv"), p("/srv/backups")), Some("beside"));
        assert_eq!(near(p("/etc/infra-talos/keys"), p("/srv/backups")), None);
        // A shared parent of `/` alone is not "beside".
        assert_eq!(near(p("/keys"), p("/backups")), None);
        assert_eq!(
            sqlite_file("sqlite:/var/lib/t/store.db"),
            Some(PathBuf::from("/var/lib/t/store.db"))
        );
        assert_eq!(sqlite_file("sqlite::memory:"), None);
        assert_eq!(sqlite_file("postgres://h/db"), None);
    }
}
