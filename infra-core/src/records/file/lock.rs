//! The lock of a fleet kept in files: `lock.json` in the fleet's directory, locked with
//! the operating system's file lock (released by the kernel when the holding process
//! dies) and holding a description of its holder for the runs it turns away.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::io::{read, remove_leftover_temps};
use crate::records::{LockError, LockGuard, LockHolder, RecordError};

/// Releases the lock when dropped: removes `lock.json` (if it is still the file this
/// run locked: a `force-unlock` may have replaced it), then closes it, which unlocks it.
struct Release {
    file: File,
    path: PathBuf,
}

impl Drop for Release {
    fn drop(&mut self) {
        if same_file(&self.file, &self.path) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RecordError + '_ {
    move |source| RecordError::Io {
        path: path.to_owned(),
        source,
    }
}

#[cfg(unix)]
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file(_file: &File, path: &Path) -> bool {
    path.exists()
}

/// The holder described in the lock file, if it can be read.
fn described(text: &str) -> Option<LockHolder> {
    serde_json::from_str(text).ok()
}

/// Takes the lock of the fleet whose directory is `dir`, or says who holds it.
pub(super) fn try_lock(
    dir: &Path,
    fleet: &str,
    holder: &LockHolder,
) -> Result<LockGuard, LockError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let path = dir.join("lock.json");
    loop {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io(&path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(LockError::Held {
                    fleet: fleet.to_owned(),
                    holder: described(&text).map(Box::new),
                    waited: Duration::ZERO,
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(&path)(e).into()),
        }
        // The holder before this run may have removed the file between our open and our
        // lock: then this lock guards nothing, and the file is opened again.
        if !same_file(&file, &path) {
            continue;
        }
        let mut previous = String::new();
        file.read_to_string(&mut previous).map_err(io(&path))?;
        let replaced = described(&previous);
        let text = serde_json::to_vec_pretty(holder).expect("a lock holder serialises");
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(&text))
            .and_then(|()| file.sync_all())
            .map_err(io(&path))?;
        // Holding the lock, this run is the only writer: what a killed writer left is
        // removed now.
        for leftover in leftover_temps(dir) {
            tracing::info!(file = %leftover.display(), "removed a temporary file left by a killed run");
        }
        return Ok(LockGuard::new(
            holder.clone(),
            replaced,
            Release { file, path },
        ));
    }
}

/// Removes the temporary files of ours under the fleet's directory (the directory
/// itself, `cache/`, and each provider's directory under it).
fn leftover_temps(dir: &Path) -> Vec<PathBuf> {
    let mut removed = remove_leftover_temps(dir);
    let cache = dir.join("cache");
    removed.extend(remove_leftover_temps(&cache));
    if let Ok(providers) = std::fs::read_dir(&cache) {
        for p in providers.flatten() {
            if p.file_type().is_ok_and(|t| t.is_dir()) {
                removed.extend(remove_leftover_temps(&p.path()));
            }
        }
    }
    removed
}

/// Removes the fleet's lock file if its id is `id`.
pub(super) fn force_unlock(dir: &Path, fleet: &str, id: &str) -> Result<LockHolder, LockError> {
    let path = dir.join("lock.json");
    let current = read(&path)?.as_deref().and_then(described);
    match current {
        Some(holder) if holder.id == id => {
            std::fs::remove_file(&path).map_err(io(&path))?;
            Ok(holder)
        }
        current => Err(LockError::NoSuchLock {
            fleet: fleet.to_owned(),
            id: id.to_owned(),
            current: current.map(Box::new),
        }),
    }
}
