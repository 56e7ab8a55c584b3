//! The file a world opened with [`SimCloud::open`](super::SimCloud::open) lives in:
//! how it is read, locked and written, and how a call's change reaches it
//! (`World::transact`). The file plays the cloud's own storage, so the simulator treats
//! it as a cloud treats its storage:
//!
//! - **A change is made only once it is saved.** A call that changes the world is
//!   applied to the world as the file holds it, then saved; when the save fails, the
//!   world goes back to what the file holds and the call fails as not made. The file
//!   never saw the change, so "not made" is the truth, and every later call — from this
//!   process or another — sees the world the file holds.
//! - **Written whole or not at all, and private.** A write goes to a temporary file
//!   beside the world file, `.<name>.infra-tmp-<pid>-<n>`, created with mode 0600 (the
//!   file holds secret values), flushed to disk, then renamed over the world file. On
//!   any failure the temporary file is removed and the world file is as it was. A
//!   temporary file left by a killed process is removed by the next open.
//! - **One writer at a time.** Every read-modify-write holds an exclusive operating
//!   system lock on `<name>.lock` beside the world file (released by the kernel if the
//!   process dies; the lock file is removed when the lock is released).
//! - **Another writer's change is seen.** The file's bytes are kept as last read or
//!   written; when the file holds other bytes, someone else wrote it, and the world is
//!   read again from it before the call is served.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::world::World;

/// What a temporary file's name holds after `.<world file name>`.
const TEMP_MARK: &str = ".infra-tmp-";

/// Why a world file could not be opened or saved.
#[derive(Debug)]
pub enum WorldFileError {
    /// The path cannot name a world file (it is empty, or names no file).
    BadPath {
        /// The path as given.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The file could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file is not a world: it was left as it is.
    Malformed {
        /// The file.
        path: PathBuf,
        /// The line (1-based) where reading stopped.
        line: usize,
        /// The column (1-based) where reading stopped.
        column: usize,
        /// What was wrong there.
        message: String,
    },
    /// The file holds a world of another schema version, or an inconsistent one.
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
}

impl fmt::Display for WorldFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorldFileError::BadPath { path, message } => {
                write!(f, "{path:?} cannot be a world file: {message}")
            }
            WorldFileError::Io { path, source } => {
                write!(f, "{}: {source}", path.display())
            }
            WorldFileError::Malformed {
                path,
                line,
                column,
                message,
            } => write!(
                f,
                "{}:{line}:{column}: not a simulated world ({message}); the file was left untouched",
                path.display()
            ),
            WorldFileError::Unsupported { path, message } => {
                write!(
                    f,
                    "{}: {message}; the file was left untouched",
                    path.display()
                )
            }
        }
    }
}

impl std::error::Error for WorldFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WorldFileError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WorldFileError + '_ {
    move |source| WorldFileError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A world file, and the bytes this process last read from it or wrote to it.
#[derive(Debug)]
pub(crate) struct WorldFile {
    path: PathBuf,
    /// The file's name, for the names of its lock and temporary files.
    name: String,
    /// The bytes last read or written; `None` when there was no file.
    last: Option<Vec<u8>>,
}

impl WorldFile {
    /// The world file at `path`, not read yet. An empty path, or one that names no file
    /// (`/`, `..`), is refused.
    pub(crate) fn new(path: &Path) -> Result<Self, WorldFileError> {
        let bad = |message: &str| WorldFileError::BadPath {
            path: path.to_path_buf(),
            message: message.to_string(),
        };
        if path.as_os_str().is_empty() {
            return Err(bad("the path is empty"));
        }
        let name = path
            .file_name()
            .ok_or_else(|| bad("the path names no file"))?
            .to_string_lossy()
            .into_owned();
        Ok(WorldFile {
            path: path.to_path_buf(),
            name,
            last: None,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The bytes last read or written (`None`: there was no file).
    pub(crate) fn last(&self) -> Option<&[u8]> {
        self.last.as_deref()
    }

    /// The file's bytes now, `None` when there is no file.
    pub(crate) fn read(&self) -> Result<Option<Vec<u8>>, WorldFileError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(io(&self.path)(source)),
        }
    }

    /// Whether `now` differs from what this process last read or wrote.
    pub(crate) fn changed(&self, now: Option<&[u8]>) -> bool {
        self.last.as_deref() != now
    }

    /// Remembers `bytes` as the file's content, read from it.
    pub(crate) fn seen(&mut self, bytes: Option<Vec<u8>>) {
        self.last = bytes;
    }

    /// Writes `bytes` as the whole file: a temporary file (mode 0600) in the same
    /// directory, flushed, then renamed over it. On failure the temporary file is
    /// removed and the world file is as it was. Call it holding [`WorldFile::lock`].
    pub(crate) fn write(&mut self, bytes: Vec<u8>) -> Result<(), WorldFileError> {
        let (temp, mut out) = self.temp_file().map_err(io(&self.path))?;
        let written = out
            .write_all(&bytes)
            .and_then(|()| out.sync_all())
            .and_then(|()| {
                drop(out);
                std::fs::rename(&temp, &self.path)
            });
        if let Err(source) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(io(&self.path)(source));
        }
        self.last = Some(bytes);
        Ok(())
    }

    fn sibling(&self, name: String) -> PathBuf {
        self.path.with_file_name(name)
    }

    /// A new temporary file beside the world file, mode 0600 from the start.
    fn temp_file(&self) -> std::io::Result<(PathBuf, File)> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let pid = std::process::id();
            let path = self.sibling(format!(".{}{TEMP_MARK}{pid}-{n}", self.name));
            match private().write(true).create_new(true).open(&path) {
                Ok(file) => return Ok((path, file)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether `name` is one of this world file's temporary files.
    fn is_temp(&self, name: &str) -> bool {
        let Some(rest) = name
            .strip_prefix('.')
            .and_then(|n| n.strip_prefix(self.name.as_str()))
            .and_then(|n| n.strip_prefix(TEMP_MARK))
        else {
            return false;
        };
        let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
        rest.split_once('-')
            .is_some_and(|(pid, n)| digits(pid) && digits(n))
    }

    /// This world file's temporary files in its directory.
    fn temps(&self) -> Vec<PathBuf> {
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter(|e| self.is_temp(&e.file_name().to_string_lossy()))
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.path())
            .collect()
    }

    /// Removes the temporary files a killed process left, holding the lock (so that no
    /// live writer's file is taken). Nothing is done when the lock cannot be taken: the
    /// next write reports why.
    pub(crate) fn remove_leftovers(&self) {
        if self.temps().is_empty() {
            return;
        }
        if let Ok(_lock) = self.lock() {
            for temp in self.temps() {
                let _ = std::fs::remove_file(temp);
            }
        }
    }

    /// Takes the exclusive lock on `<name>.lock`, waiting for another holder.
    pub(crate) fn lock(&self) -> Result<Lock, WorldFileError> {
        let path = self.sibling(format!("{}.lock", self.name));
        loop {
            let file = private()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(io(&path))?;
            file.lock().map_err(io(&path))?;
            // The previous holder removes the file as it releases it: a lock taken on a
            // removed file guards nothing, and the file is opened again.
            if same_file(&file, &path) {
                return Ok(Lock { file, path });
            }
        }
    }
}

/// Options that create a file readable and writable by its owner only.
fn private() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
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

/// The world file's lock, held until dropped: then the lock file is removed (if it is
/// still the one locked) and closed, which releases the lock.
#[derive(Debug)]
pub(crate) struct Lock {
    file: File,
    path: PathBuf,
}

impl Drop for Lock {
    fn drop(&mut self) {
        if same_file(&self.file, &self.path) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A seed for a new world file, from the operating system's generator.
fn random_seed(path: &Path) -> Result<u64, WorldFileError> {
    getrandom::u64().map_err(|e| WorldFileError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(format!("no random seed for a new world: {e}")),
    })
}

/// How the world is kept in its file.
impl World {
    /// The world in the file at `path`, or a new one with a random seed when there is
    /// no file. The temporary files a killed writer left beside it are removed first.
    pub(crate) fn open(path: &Path) -> Result<Self, WorldFileError> {
        let mut file = WorldFile::new(path)?;
        file.remove_leftovers();
        let bytes = file.read()?;
        let mut world = match &bytes {
            Some(bytes) => World::decode(path, bytes)?,
            None => World::new(random_seed(path)?),
        };
        file.seen(bytes);
        world.file = Some(file);
        Ok(world)
    }

    /// Runs `f` on the world as its file holds it now (read again if someone else wrote
    /// it). When `f` says it changed the world, the change is saved before this returns;
    /// with `write`, all of it under the file's lock, so that no other writer comes in
    /// between. A change that cannot be saved is undone and the error returned: the
    /// world stays what its file holds.
    pub(crate) fn transact<T>(
        &mut self,
        write: bool,
        f: impl FnOnce(&mut World) -> (T, bool),
    ) -> Result<T, WorldFileError> {
        let _lock = match (&self.file, write) {
            (Some(file), true) => Some(file.lock()?),
            _ => None,
        };
        self.refresh()?;
        let (value, changed) = f(self);
        if changed && let Err(e) = self.persist() {
            self.rollback()?;
            return Err(e);
        }
        Ok(value)
    }

    /// Reads the file again and, when it changed since this process last read or wrote
    /// it, takes the world it holds (no file any more: an empty world of the same seed).
    pub(crate) fn refresh(&mut self) -> Result<(), WorldFileError> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let now = file.read()?;
        if !file.changed(now.as_deref()) {
            return Ok(());
        }
        self.reload(now.as_deref())?;
        if let Some(file) = &mut self.file {
            file.seen(now);
        }
        Ok(())
    }

    /// Goes back to the world as the file was last read or written.
    fn rollback(&mut self) -> Result<(), WorldFileError> {
        let last = self
            .file
            .as_ref()
            .and_then(WorldFile::last)
            .map(<[u8]>::to_vec);
        self.reload(last.as_deref())
    }

    /// Takes the world `bytes` hold (`None`: an empty world of the same seed).
    fn reload(&mut self, bytes: Option<&[u8]>) -> Result<(), WorldFileError> {
        let fresh = match (bytes, &self.file) {
            (Some(bytes), Some(file)) => World::decode(file.path(), bytes)?,
            _ => World::new(self.seed),
        };
        self.adopt(fresh);
        Ok(())
    }

    /// Saves the world to its file, if it has one: whole, or not at all. Call it
    /// holding the file's lock.
    fn persist(&mut self) -> Result<(), WorldFileError> {
        if self.file.is_none() {
            return Ok(());
        }
        let bytes = self.encode();
        match &mut self.file {
            Some(file) => file.write(bytes),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_worlds_temporary_names_are_its_own() {
        let file = WorldFile::new(Path::new("dir/world.json")).unwrap();
        assert!(file.is_temp(".world.json.infra-tmp-12-0"));
        for other in [
            ".world.json.infra-tmp-12",
            ".world.json.infra-tmp-12-0-1",
            ".world.json.infra-tmp-a-0",
            "world.json.infra-tmp-12-0",
            ".other.json.infra-tmp-12-0",
            ".world.json.tmp",
            "world.json",
        ] {
            assert!(!file.is_temp(other), "{other}");
        }
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file_and_the_target_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        // The target is a directory that is not empty: the temporary file is made,
        // written and flushed, and the rename over the target fails (even as root).
        let path = dir.path().join("world.json");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("keep"), "x").unwrap();
        let mut file = WorldFile::new(&path).unwrap();
        let err = file.write(b"{}\n".to_vec()).unwrap_err();
        assert!(matches!(err, WorldFileError::Io { .. }), "{err}");
        assert_eq!(
            file.last(),
            None,
            "a failed write is not remembered as read"
        );
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["world.json"]);
        assert!(path.join("keep").exists());
    }

    #[test]
    fn a_path_that_names_no_file_is_refused() {
        for path in ["", "/", ".."] {
            let err = WorldFile::new(Path::new(path)).unwrap_err();
            assert!(
                matches!(err, WorldFileError::BadPath { .. }),
                "{path:?}: {err}"
            );
        }
    }
}
