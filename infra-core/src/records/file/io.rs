//! Reading, checking and writing one record file: whole or not at all, never leaving a
//! temporary file behind, never reading a dangling link as "no file".
//!
//! A record written by an earlier schema version is migrated on its first write: the
//! file as it was is kept beside it as `<file>.v<N>.bak` (`ledger.json.v1.bak`) before
//! the new version replaces it, each step atomic. A backup already there with other
//! content is never overwritten: the write is refused, naming both files. A record of a
//! newer version than this build's is never written over.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::RecordError;

/// The prefix of every temporary file this store makes; a file so named in a directory
/// of ours is a leftover of a run killed mid-write, and is removed by the next run.
pub(super) const TEMP_PREFIX: &str = ".infra-tmp-";

/// Only the version field of a record, read first so that a newer schema is told apart
/// from a malformed file.
#[derive(Deserialize)]
struct Versioned {
    ledger: Option<u32>,
    cache: Option<serde_json::Value>,
    manifest: Option<u32>,
}

impl Versioned {
    fn version(&self) -> Option<u32> {
        // A manifest's `cache` is its list of files; a cache file's is its version.
        self.manifest
            .or(self.ledger)
            .or_else(|| self.cache.as_ref()?.as_u64()?.try_into().ok())
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> RecordError + '_ {
    move |source| RecordError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The text of a record, `None` when there is no file. A symbolic link to nothing is an
/// error naming it, never "no file".
pub(super) fn read(path: &Path) -> Result<Option<String>, RecordError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.file_type().is_symlink() => Err(RecordError::Dangling {
                    path: path.to_owned(),
                    target: std::fs::read_link(path).unwrap_or_default(),
                }),
                _ => Ok(None),
            }
        }
        Err(source) => Err(io_error(path)(source)),
    }
}

/// Parses a record of schema version at most `supported`.
pub(super) fn parse<T: serde::de::DeserializeOwned>(
    path: &Path,
    text: &str,
    supported: u32,
) -> Result<T, RecordError> {
    let malformed = |e: serde_json::Error| RecordError::Malformed {
        path: path.to_owned(),
        line: e.line().max(1),
        column: e.column().max(1),
        message: e
            .to_string()
            .split(" at line ")
            .next()
            .unwrap_or_default()
            .to_owned(),
    };
    let version: Versioned = serde_json::from_str(text).map_err(malformed)?;
    match version.version() {
        Some(found) if found > supported => Err(RecordError::NewerVersion {
            path: path.to_owned(),
            found,
            supported,
        }),
        Some(_) => serde_json::from_str(text).map_err(malformed),
        None => Err(RecordError::Malformed {
            path: path.to_owned(),
            line: 1,
            column: 1,
            message: "no schema version".into(),
        }),
    }
}

/// The schema version a record's text declares, if it declares one.
fn version_of(text: &str) -> Option<u32> {
    serde_json::from_str::<Versioned>(text).ok()?.version()
}

/// Where the copy of `path` as schema version `version` wrote it is kept:
/// `<file>.v<version>.bak` beside it.
pub(super) fn backup_path(path: &Path, version: u32) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".v{version}.bak"));
    path.with_file_name(name)
}

/// What migrating the record at `path` to schema `current` takes.
enum Migration {
    /// Nothing: no file, one of this version, or one without a readable version (the
    /// caller refuses a malformed file).
    None,
    /// The file (its text, of version `found`) is to be kept at `backup` first.
    Keep {
        text: String,
        found: u32,
        backup: PathBuf,
    },
    /// The file is kept at its backup already, byte for byte (a run stopped between
    /// the backup and the new version).
    Kept,
}

/// Whether the record at `path` can be migrated to (or written as) schema `current`:
/// refuses one of a newer version, and one of an earlier version whose backup exists
/// with other content.
fn migration(path: &Path, current: u32) -> Result<Migration, RecordError> {
    let Some(text) = read(path)? else {
        return Ok(Migration::None);
    };
    match version_of(&text) {
        Some(found) if found > current => Err(RecordError::NewerVersion {
            path: path.to_owned(),
            found,
            supported: current,
        }),
        Some(found) if found < current => {
            let backup = backup_path(path, found);
            match read(&backup)? {
                Some(kept) if kept == text => Ok(Migration::Kept),
                Some(_) => Err(RecordError::BackupDiffers {
                    path: path.to_owned(),
                    backup,
                    found,
                    current,
                }),
                None => Ok(Migration::Keep {
                    text,
                    found,
                    backup,
                }),
            }
        }
        _ => Ok(Migration::None),
    }
}

/// Checks, without writing, that the record at `path` could be written as schema
/// `current` (see [`migration`]).
pub(super) fn check_migration(path: &Path, current: u32) -> Result<(), RecordError> {
    migration(path, current).map(drop)
}

/// Before the record at `path` (schema `current`) is replaced or removed: refuses one
/// of a newer version, and keeps one of an earlier version as its backup.
fn keep_earlier(path: &Path, current: u32) -> Result<(), RecordError> {
    match migration(path, current)? {
        Migration::None | Migration::Kept => Ok(()),
        Migration::Keep {
            text,
            found,
            backup,
        } => {
            write_bytes_atomically(&backup, text.as_bytes())?;
            tracing::info!(
                file = %path.display(),
                backup = %backup.display(),
                from = found,
                to = current,
                "migrating a record to this build's schema; the earlier file is kept"
            );
            Ok(())
        }
    }
}

/// Writes `value`, a record of schema version `version`, as the whole of `path`. A file
/// there of an earlier version is first kept as `<file>.v<N>.bak` (see the module
/// documentation); one of a newer version is refused and left as it is.
pub(super) fn write_record(
    path: &Path,
    value: &impl Serialize,
    version: u32,
) -> Result<(), RecordError> {
    keep_earlier(path, version)?;
    write_atomically(path, value)
}

/// Removes the record at `path` (schema `version`), as [`remove`] does, keeping a file
/// of an earlier version as its backup first and refusing one of a newer version.
pub(super) fn remove_record(path: &Path, version: u32) -> Result<(), RecordError> {
    keep_earlier(path, version)?;
    remove(path)
}

/// Writes `value` as the whole of `path`: a temporary file in the same directory,
/// flushed to disk, then renamed over it. On any failure the temporary file is removed
/// and `path` is as it was.
pub(super) fn write_atomically(path: &Path, value: &impl Serialize) -> Result<(), RecordError> {
    let mut text = serde_json::to_vec_pretty(value).expect("records serialise");
    text.push(b'\n');
    write_bytes_atomically(path, &text)
}

/// Writes `text` as the whole of `path`, as [`write_atomically`] does.
pub(super) fn write_bytes_atomically(path: &Path, text: &[u8]) -> Result<(), RecordError> {
    let dir = path.parent().expect("a record path has a directory");
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let (temp, mut file) = temp_file_in(dir).map_err(io_error(dir))?;
    let written = file
        .write_all(text)
        .and_then(|()| file.sync_all())
        .and_then(|()| {
            drop(file);
            std::fs::rename(&temp, path)
        });
    if let Err(source) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(io_error(path)(source));
    }
    Ok(())
}

/// Removes a record file (and its directory, when that was the last thing in it).
pub(super) fn remove(path: &Path) -> Result<(), RecordError> {
    match std::fs::remove_file(path) {
        Ok(()) => {
            if let Some(dir) = path.parent() {
                let _ = std::fs::remove_dir(dir);
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(io_error(path)(source)),
    }
}

/// A new file beside the target, named so that it cannot collide with a record.
fn temp_file_in(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{TEMP_PREFIX}{}-{n}", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(file) => return Ok((path, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Whether `name` is one of our temporary files: `.infra-tmp-<pid>-<n>`, or
/// `.tmp-<pid>-<n>` as earlier versions named them.
pub(super) fn is_our_temp(name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix(TEMP_PREFIX)
        .or_else(|| name.strip_prefix(".tmp-"))
    else {
        return false;
    };
    let mut parts = rest.split('-');
    let digits =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    digits(parts.next()) && digits(parts.next()) && parts.next().is_none()
}

/// Removes the temporary files of ours left in `dir` by a run that was killed mid-write;
/// says which. Nothing else in the directory is touched.
pub(super) fn remove_leftover_temps(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| is_our_temp(&e.file_name().to_string_lossy()))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|p| std::fs::remove_file(p).is_ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_temporary_names_are_ours() {
        for ours in [".infra-tmp-12-0", ".tmp-4242-17"] {
            assert!(is_our_temp(ours), "{ours}");
        }
        for theirs in [
            ".tmp-notes",
            ".infra-tmp-12",
            ".infra-tmp-12-0-1",
            ".infra-tmp-a-0",
            "tmp-12-0",
            ".tmp--0",
            "ledger.json",
        ] {
            assert!(!is_our_temp(theirs), "{theirs}");
        }
    }

    #[test]
    fn leftovers_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        for name in [".infra-tmp-1-0", ".tmp-2-3", ".tmp-notes", "keep.json"] {
            std::fs::write(dir.path().join(name), "x").unwrap();
        }
        std::fs::create_dir(dir.path().join(".infra-tmp-9-9")).unwrap();
        let mut removed: Vec<String> = remove_leftover_temps(dir.path())
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        removed.sort();
        assert_eq!(removed, [".infra-tmp-1-0", ".tmp-2-3"]);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, [".infra-tmp-9-9", ".tmp-notes", "keep.json"]);
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file_and_the_record_as_it_was() {
        // The last step fails: the target is a directory that holds something.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.json");
        std::fs::write(&path, "before").unwrap();
        let target = dir.path().join("occupied");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("inside"), "x").unwrap();
        let err = write_atomically(&target, &serde_json::json!({"ledger": 2})).unwrap_err();
        assert!(err.to_string().contains("occupied"), "{err}");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().all(|n| !is_our_temp(n)),
            "a temporary file was left: {names:?}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "before");
    }

    #[test]
    fn a_dangling_link_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("ledger.json");
        std::os::unix::fs::symlink(dir.path().join("moved-away.json"), &link).unwrap();
        let err = read(&link).unwrap_err();
        assert!(matches!(err, RecordError::Dangling { .. }), "{err}");
        assert!(err.to_string().contains("ledger.json"), "{err}");
        assert!(err.to_string().contains("moved-away.json"), "{err}");
        assert!(read(&dir.path().join("absent.json")).unwrap().is_none());
    }
}
