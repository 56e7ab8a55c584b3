//! The denied-subject list: every identity revoked, kept in a file outside the
//! database, so that restoring the database from a backup taken before a
//! revocation cannot make the revoked principal trusted again (§7.3 step 2).
//!
//! **Format.** UTF-8 text, one denial a line: `deny <subject>`, then the
//! fingerprints (`sha256:<64 hex>`) of the certificates bound to it when it was
//! revoked, then optionally `# ` and a note (who revoked it). Blank lines and lines
//! starting with `#` are comments. It holds no secret. Lines are only ever appended;
//! a subject once listed is refused for good, whatever the database says.
//!
//! **Reading it fails closed.** When a list is configured, a missing file, one that
//! cannot be read (a permission error is never taken for an empty list), a line
//! that does not parse, or a last line without its newline (a write cut short) is an
//! error naming the file: the service refuses to start, and a principal is not
//! authenticated while it lasts.
//!
//! **Appending.** [`DeniedList::prepare`] checks the file is readable, well formed
//! and writable, and holds an exclusive lock on it, before the store is asked to
//! revoke; [`Appending::append`] then writes the whole line in one write to the
//! file opened for appending and syncs it to disk before the revocation is
//! reported.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::{Fingerprint, valid_identifier};

/// The first line of a list `init` makes.
const HEADER: &str = "# infra-talos denied-subject list: `deny <subject> [sha256:<fingerprint> ...]`, \
                      one revoked identity a line; append only, never restored from a database backup\n";

/// Why the list could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeniedListError {
    /// The configured file does not exist.
    #[error(
        "the denied-subject list {path} does not exist: a missing list is never read as \
         empty. Restore it from its own backup; only for a new installation, create it \
         empty (`infra-talos init` does, or `touch {path}`)"
    )]
    Missing {
        /// The file.
        path: String,
    },
    /// The file exists but cannot be read (a permission error, a directory).
    #[error(
        "the denied-subject list {path} cannot be read ({error}): no principal is \
         authenticated until it can be (an unreadable list is never read as empty)"
    )]
    Unreadable {
        /// The file.
        path: String,
        /// The operating system's error.
        error: String,
    },
    /// A line does not parse.
    #[error(
        "the denied-subject list {path} is corrupt at line {line}: {reason}; no principal \
         is authenticated until it is repaired from its backup"
    )]
    Corrupt {
        /// The file.
        path: String,
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The file cannot be written.
    #[error("the denied-subject list {path} cannot be written ({error})")]
    Unwritable {
        /// The file.
        path: String,
        /// The operating system's error.
        error: String,
    },
}

/// The denied subjects and certificates a list names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Denied {
    subjects: BTreeSet<String>,
    fingerprints: BTreeSet<Fingerprint>,
}

impl Denied {
    /// Why `subject` (presenting the certificate `fingerprint`, if one) is refused,
    /// or `None` when the list does not name it.
    #[must_use]
    pub fn refusal(&self, subject: &str, fingerprint: Option<&Fingerprint>) -> Option<String> {
        if self.subjects.contains(subject) {
            return Some(format!(
                "{subject} is on the denied-subject list: its identity was revoked, and a \
                 database restore does not undo that"
            ));
        }
        let fingerprint = fingerprint.filter(|f| self.fingerprints.contains(f))?;
        Some(format!(
            "the certificate {fingerprint} is on the denied-subject list: it was revoked"
        ))
    }

    /// Whether the list names `subject`.
    #[must_use]
    pub fn denies(&self, subject: &str) -> bool {
        self.subjects.contains(subject)
    }

    /// How many subjects the list names.
    #[must_use]
    pub fn len(&self) -> usize {
        self.subjects.len()
    }

    /// Whether the list names no one.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.subjects.is_empty()
    }
}

/// The denied-subject list file a configuration names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeniedList {
    path: PathBuf,
}

impl DeniedList {
    /// The list kept in `path`.
    #[must_use]
    pub fn new(path: impl Into<PathBuf>) -> DeniedList {
        DeniedList { path: path.into() }
    }

    /// The file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn shown(&self) -> String {
        self.path.display().to_string()
    }

    fn unreadable(&self, e: &std::io::Error) -> DeniedListError {
        if e.kind() == std::io::ErrorKind::NotFound {
            DeniedListError::Missing { path: self.shown() }
        } else {
            DeniedListError::Unreadable {
                path: self.shown(),
                error: e.to_string(),
            }
        }
    }

    /// Reads the list.
    ///
    /// # Errors
    ///
    /// Missing, unreadable or corrupt (see the module's documentation).
    pub fn read(&self) -> Result<Denied, DeniedListError> {
        let text = std::fs::read_to_string(&self.path).map_err(|e| self.unreadable(&e))?;
        parse(&text).map_err(|(line, reason)| DeniedListError::Corrupt {
            path: self.shown(),
            line,
            reason,
        })
    }

    /// Makes the list, empty but for its header, unless it exists; `true` when made.
    ///
    /// # Errors
    ///
    /// It cannot be made.
    pub fn create_if_missing(&self) -> Result<bool, DeniedListError> {
        let unwritable = |e: std::io::Error| DeniedListError::Unwritable {
            path: self.shown(),
            error: e.to_string(),
        };
        let mut file = match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&self.path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(unwritable(e)),
        };
        file.write_all(HEADER.as_bytes()).map_err(unwritable)?;
        file.sync_all().map_err(unwritable)?;
        sync_directory(&self.path);
        Ok(true)
    }

    /// Checks the list can be read and written and locks it for one append, before
    /// the act whose denial it will record is made.
    ///
    /// # Errors
    ///
    /// Missing, unreadable, corrupt or not writable.
    pub fn prepare(&self) -> Result<Appending, DeniedListError> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => self.unreadable(&e),
                _ => DeniedListError::Unwritable {
                    path: self.shown(),
                    error: e.to_string(),
                },
            })?;
        file.lock().map_err(|e| DeniedListError::Unwritable {
            path: self.shown(),
            error: e.to_string(),
        })?;
        self.read()?;
        Ok(Appending {
            list: self.clone(),
            file,
        })
    }
}

/// A list locked for one append (see [`DeniedList::prepare`]); the lock ends when
/// it is dropped.
#[derive(Debug)]
pub struct Appending {
    list: DeniedList,
    file: File,
}

impl Appending {
    /// Appends the denial of `subject` and the certificates `fingerprints`, with a
    /// note (who revoked it), and syncs it to disk.
    ///
    /// # Errors
    ///
    /// The line could not be written or synced.
    pub fn append(
        mut self,
        subject: &str,
        fingerprints: &[Fingerprint],
        note: &str,
    ) -> Result<(), DeniedListError> {
        let line = line_of(subject, fingerprints, note);
        let unwritable = |e: std::io::Error| DeniedListError::Unwritable {
            path: self.list.shown(),
            error: e.to_string(),
        };
        self.file.write_all(line.as_bytes()).map_err(unwritable)?;
        self.file.sync_all().map_err(unwritable)?;
        Ok(())
    }
}

/// One denial as its line.
fn line_of(subject: &str, fingerprints: &[Fingerprint], note: &str) -> String {
    let mut line = format!("deny {subject}");
    for f in fingerprints {
        let _ = write!(line, " {f}");
    }
    let note: String = note
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if !note.trim().is_empty() {
        let _ = write!(line, " # {}", note.trim());
    }
    line.push('\n');
    line
}

/// The list a text holds, or the line (from 1) that does not parse and why.
fn parse(text: &str) -> Result<Denied, (usize, String)> {
    let mut denied = Denied::default();
    let lines: Vec<&str> = text.split('\n').collect();
    for (at, raw) in lines.iter().enumerate() {
        let number = at + 1;
        let last = at + 1 == lines.len();
        if last && !raw.is_empty() {
            return Err((
                number,
                "the last line has no newline: a write was cut short (check the line, \
                 and end it with a newline)"
                    .into(),
            ));
        }
        let content = raw.split_once('#').map_or(*raw, |(before, _)| before);
        let mut words = content.split_whitespace();
        let Some(first) = words.next() else { continue };
        if first != "deny" {
            return Err((number, format!("{first:?} is not `deny`")));
        }
        let subject = words
            .next()
            .ok_or((number, "`deny` names no subject".to_owned()))?;
        if !valid_identifier(subject) {
            return Err((number, format!("{subject:?} is not a principal identifier")));
        }
        denied.subjects.insert(subject.to_owned());
        for word in words {
            let fingerprint = word
                .strip_prefix("sha256:")
                .and_then(|_| Fingerprint::parse(word))
                .ok_or((number, format!("{word:?} is not sha256:<64 hex digits>")))?;
            denied.fingerprints.insert(fingerprint);
        }
    }
    Ok(denied)
}

/// Syncs the directory holding `path`, so a new file's name is on disk too.
fn sync_directory(path: &Path) {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && let Ok(dir) = File::open(dir)
    {
        let _ = dir.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(byte: u8) -> Fingerprint {
        Fingerprint::of_der(&[byte])
    }

    #[test]
    fn appended_lines_read_back_as_denials() {
        let dir = tempfile::tempdir().unwrap();
        let list = DeniedList::new(dir.path().join("denied"));
        assert!(list.create_if_missing().unwrap());
        assert!(!list.create_if_missing().unwrap());
        assert!(list.read().unwrap().is_empty());
        list.prepare()
            .unwrap()
            .append("bob", &[fp(1)], "revoked by root (recovery-admin)\nx")
            .unwrap();
        let text = std::fs::read_to_string(list.path()).unwrap();
        assert!(
            text.ends_with(&format!(
                "deny bob {} # revoked by root (recovery-admin) x\n",
                fp(1)
            )),
            "{text}"
        );
        let denied = list.read().unwrap();
        assert!(denied.denies("bob"));
        assert!(
            denied
                .refusal("bob", None)
                .unwrap()
                .contains("denied-subject list")
        );
        assert!(denied.refusal("alice", None).is_none());
        assert!(denied.refusal("alice", Some(&fp(1))).is_some());
        assert!(denied.refusal("alice", Some(&fp(2))).is_none());
    }

    #[test]
    fn a_missing_or_corrupt_list_is_an_error_never_an_empty_list() {
        let dir = tempfile::tempdir().unwrap();
        let list = DeniedList::new(dir.path().join("denied"));
        assert!(matches!(list.read(), Err(DeniedListError::Missing { .. })));
        assert!(matches!(
            list.prepare(),
            Err(DeniedListError::Missing { .. })
        ));
        for (text, line) in [
            ("deny bob\ndeny\n", 2),
            ("allow bob\n", 1),
            ("deny bob sha256:12\n", 1),
            ("deny b!b\n", 1),
            ("deny bob\ndeny al", 2),
        ] {
            std::fs::write(list.path(), text).unwrap();
            match list.read() {
                Err(DeniedListError::Corrupt { line: at, .. }) => assert_eq!(at, line, "{text:?}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
        let directory = DeniedList::new(dir.path());
        assert!(matches!(
            directory.read(),
            Err(DeniedListError::Unreadable { .. })
        ));
    }
}
