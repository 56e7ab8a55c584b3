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
//! - **A call's write costs what it changed.** A change is appended to the world's
//!   journal (`<name>.journal`, see `world_journal`), which is folded into the file
//!   when it outgrows it, when the world is saved and when the last handle on it is
//!   dropped. The file alone is the world whenever no process holds it open. A call
//!   answers once its line is on disk; the calls in flight together share their
//!   flushes (`world_flush`).
//! - **Written whole or not at all, and private.** A write of the whole file goes to a temporary file
//!   beside the world file, `.<name>.infra-tmp-<pid>-<n>`, created with mode 0600 (the
//!   file holds secret values), flushed to disk, then renamed over the world file. On
//!   any failure the temporary file is removed and the world file is as it was. A
//!   temporary file left by a killed process is removed by the next open.
//! - **One writer at a time.** Every read-modify-write holds an exclusive operating
//!   system lock on `<name>.lock` beside the world file (released by the kernel if the
//!   process dies). The lock file is kept open between calls, and removed, under the
//!   lock, when the world is let go of; a process waiting on a removed lock file opens
//!   the new one.
//! - **Another writer's change is seen.** What this process last read or wrote is
//!   kept as a stamp of each file (the file's identity, length and time, the
//!   journal's length); when the files differ from it, someone else wrote them, and
//!   the world is read again from them, under the lock, before the call is served.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::world::World;
use super::world_flush::Unflushed;

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

/// A world file, and what this process last read from it or wrote to it.
#[derive(Debug)]
pub(crate) struct WorldFile {
    path: PathBuf,
    /// The file's name, for the names of its lock, journal and temporary files.
    name: String,
    /// The files as last read or written.
    seen: Seen,
    /// The journal, open for appending, while it is the file at the journal's path.
    journal: Option<Arc<File>>,
    /// The lock file, kept open between locks.
    lock_file: Arc<Mutex<Option<File>>>,
}

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    inode: u64,
}

/// The world file's stamp (`None`: no file) and the journal's length and identity,
/// as last read or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Seen {
    file: Option<Stamp>,
    journal: u64,
    journal_inode: Option<u64>,
}

/// The stamp of the file at `path`, `None` when there is none.
fn stamp(path: &Path) -> Result<Option<Stamp>, WorldFileError> {
    match std::fs::metadata(path) {
        Ok(meta) => Ok(Some(Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode: inode(&meta),
        })),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(io(path)(source)),
    }
}

#[cfg(unix)]
fn inode(meta: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(meta)
}

#[cfg(not(unix))]
fn inode(_meta: &std::fs::Metadata) -> u64 {
    0
}

/// The world file's bytes, and its journal's changes, as read together.
pub(crate) struct Contents {
    pub(crate) file: Option<Vec<u8>>,
    pub(crate) changes: Vec<super::world_journal::ChangeIn>,
    /// Their stamps, to remember once the world they hold is taken.
    seen: Seen,
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
            seen: Seen::default(),
            journal: None,
            lock_file: Arc::default(),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn journal_path(&self) -> PathBuf {
        self.sibling(format!("{}.journal", self.name))
    }

    /// Whether the world file existed when it was last read or written.
    pub(crate) fn exists(&self) -> bool {
        self.seen.file.is_some()
    }

    /// Whether this process keeps the lock file open.
    pub(crate) fn holds_lock_file(&self) -> bool {
        self.lock_file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some()
    }

    /// Whether the journal holds changes not folded into the file yet.
    pub(crate) fn has_journal(&self) -> bool {
        self.seen.journal > 0
    }

    /// Whether the journal has outgrown the file, so that folding it in costs no
    /// more than the appends did.
    pub(crate) fn journal_outgrown(&self) -> bool {
        const FLOOR: u64 = 64 * 1024;
        self.seen.journal > self.seen.file.map_or(0, |f| f.len).max(FLOOR)
    }

    /// Whether the files differ from what this process last read or wrote.
    pub(crate) fn moved(&self) -> Result<bool, WorldFileError> {
        let journal = stamp(&self.journal_path())?;
        let (len, inode) = journal.map_or((0, None), |s| (s.len, Some(s.inode)));
        let journal_moved = len != self.seen.journal
            || (len > 0 && self.seen.journal_inode.is_some_and(|i| Some(i) != inode));
        Ok(stamp(&self.path)? != self.seen.file || journal_moved)
    }

    /// Whether the world file or its journal exists on disk now.
    pub(crate) fn on_disk(&self) -> Result<bool, WorldFileError> {
        Ok(stamp(&self.path)?.is_some() || stamp(&self.journal_path())?.is_some())
    }

    /// Remembers `contents` as what this process last read, once the world they hold
    /// is taken (a world that could not be read is not remembered as seen).
    pub(crate) fn saw(&mut self, contents: &Contents) {
        self.seen = contents.seen;
        // The journal may be another file now: it is opened again for the next line.
        self.journal = None;
    }

    /// Reads the file and its journal. A last journal line cut short (an append that
    /// never finished) is not read, and is cut off the journal. Call it holding
    /// [`WorldFile::lock`].
    pub(crate) fn read(&self) -> Result<Contents, WorldFileError> {
        let file_stamp = stamp(&self.path)?;
        let file = match std::fs::read(&self.path) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => return Err(io(&self.path)(source)),
        };
        let journal_path = self.journal_path();
        let journal = match std::fs::read(&journal_path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(io(&journal_path)(source)),
        };
        if file.is_none() && !journal.is_empty() {
            return Err(WorldFileError::Unsupported {
                path: journal_path,
                message: "a journal without its world file".into(),
            });
        }
        let (changes, complete) = super::world_journal::read(&journal_path, &journal)?;
        if complete == 0 && !journal.is_empty() {
            // Nothing but a line cut short: no journal at all.
            std::fs::remove_file(&journal_path).map_err(io(&journal_path))?;
        } else if complete < journal.len() {
            let cut = OpenOptions::new()
                .write(true)
                .open(&journal_path)
                .and_then(|f| f.set_len(complete as u64));
            cut.map_err(io(&journal_path))?;
        }
        let seen = Seen {
            file: file_stamp,
            journal: complete as u64,
            journal_inode: None,
        };
        Ok(Contents {
            file,
            changes,
            seen,
        })
    }

    /// Appends one change's line to the journal, and gives the journal to flush it
    /// with ([`Unflushed`]; see `world_flush`). On failure the journal is cut back to
    /// what it held. Call it holding [`WorldFile::lock`].
    pub(crate) fn append(&mut self, line: &[u8]) -> Result<Unflushed, WorldFileError> {
        let path = self.journal_path();
        let journal = match &self.journal {
            Some(journal) => Arc::clone(journal),
            None => {
                let opened = private()
                    .append(true)
                    .create(true)
                    .open(&path)
                    .and_then(|f| Ok((inode(&f.metadata()?), f)));
                let (ino, file) = opened.map_err(io(&path))?;
                self.seen.journal_inode = Some(ino);
                let file = Arc::new(file);
                self.journal = Some(Arc::clone(&file));
                file
            }
        };
        if let Err(source) = (&*journal).write_all(line) {
            let _ = journal.set_len(self.seen.journal);
            return Err(io(&path)(source));
        }
        self.seen.journal += line.len() as u64;
        Ok(Unflushed(journal))
    }

    /// Flushes the journal's lines to disk here and now; on failure the journal is cut
    /// back to `len`, what it held before the lines that were not flushed.
    pub(crate) fn flush_now(
        &mut self,
        unflushed: &Unflushed,
        len: u64,
    ) -> Result<(), WorldFileError> {
        if let Err(source) = unflushed.0.sync_data() {
            let _ = unflushed.0.set_len(len);
            self.seen.journal = len;
            return Err(io(&self.journal_path())(source));
        }
        Ok(())
    }

    /// The journal's length as last read or written.
    pub(crate) fn journal_len(&self) -> u64 {
        self.seen.journal
    }

    /// Writes `bytes` as the whole file: a temporary file (mode 0600) in the same
    /// directory, flushed, then renamed over it; then the journal it holds is
    /// removed. On failure the temporary file is removed and the world file is as it
    /// was. Call it holding [`WorldFile::lock`].
    pub(crate) fn write(&mut self, bytes: &[u8]) -> Result<(), WorldFileError> {
        let (temp, mut out) = self.temp_file().map_err(io(&self.path))?;
        let written = out
            .write_all(bytes)
            .and_then(|()| out.sync_all())
            .and_then(|()| {
                drop(out);
                std::fs::rename(&temp, &self.path)
            });
        if let Err(source) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(io(&self.path)(source));
        }
        self.seen.file = stamp(&self.path)?;
        // The file now holds every change the journal held: replaying them again
        // would change nothing, so a failure to remove it loses nothing.
        let journal = self.journal_path();
        self.journal = None;
        self.seen.journal_inode = None;
        match std::fs::remove_file(&journal) {
            Ok(()) => self.seen.journal = 0,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => self.seen.journal = 0,
            Err(source) => return Err(io(&journal)(source)),
        }
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
        let kept = self
            .lock_file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let mut file = match kept {
            Some(file) => file,
            None => open_lock_file(&path)?,
        };
        loop {
            file.lock().map_err(io(&path))?;
            // A lock taken on a lock file that was removed meanwhile guards nothing: the
            // file is opened again.
            if same_file(&file, &path) {
                return Ok(Lock {
                    file: Some(file),
                    path,
                    keep: Arc::clone(&self.lock_file),
                });
            }
            file = open_lock_file(&path)?;
        }
    }
}

fn open_lock_file(path: &Path) -> Result<File, WorldFileError> {
    private()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io(path))
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

/// The world file's lock, held until dropped: then released, and the lock file kept
/// open for the next lock ([`Lock::remove`] removes it instead).
#[derive(Debug)]
pub(crate) struct Lock {
    file: Option<File>,
    path: PathBuf,
    keep: Arc<Mutex<Option<File>>>,
}

impl Lock {
    /// Removes the lock file while still holding its lock, then releases it: who waits
    /// on it opens a new one.
    pub(crate) fn remove(mut self) {
        if let Some(file) = self.file.take()
            && same_file(&file, &self.path)
        {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if let Some(file) = self.file.take()
            && file.unlock().is_ok()
        {
            *self
                .keep
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(file);
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
    /// The world in the file at `path` with its journal replayed, or a new one with a
    /// random seed when there is no file. The temporary files a killed writer left
    /// beside it are removed first.
    pub(crate) fn open(path: &Path) -> Result<Self, WorldFileError> {
        let mut file = WorldFile::new(path)?;
        file.remove_leftovers();
        // No file yet: a new world, and nothing made on disk until its first write.
        let _lock = if file.on_disk()? {
            Some(file.lock()?)
        } else {
            None
        };
        let mut contents = file.read()?;
        let mut world = match &contents.file {
            Some(bytes) => World::decode(path, bytes, &mut contents.changes)?,
            None => World::new(random_seed(path)?),
        };
        file.saw(&contents);
        world.file = Some(file);
        Ok(world)
    }

    /// Runs `f` on the world as its files hold it now (read again if someone else
    /// wrote them). When `f` says it changed the world, the change is saved, and on
    /// disk, before this returns; with `write`, all of it under the file's lock, so
    /// that no other writer comes in between. A change that cannot be saved is undone
    /// and the error returned: the world stays what its files hold.
    pub(crate) fn transact<T>(
        &mut self,
        write: bool,
        f: impl FnOnce(&mut World) -> (T, bool),
    ) -> Result<T, WorldFileError> {
        let (value, unflushed) = self.transact_unflushed(write, f)?;
        if let Some((unflushed, len)) = unflushed
            && let Some(file) = &mut self.file
            && let Err(e) = file.flush_now(&unflushed, len)
        {
            self.reload()?;
            return Err(e);
        }
        Ok(value)
    }

    /// [`World::transact`], except that a change saved as a journal line is written
    /// and not yet flushed: it is given back, with the journal's length before it, for
    /// the caller to wait for its flush outside the world's lock (`world_flush`).
    pub(crate) fn transact_unflushed<T>(
        &mut self,
        write: bool,
        f: impl FnOnce(&mut World) -> (T, bool),
    ) -> Result<(T, Option<(Unflushed, u64)>), WorldFileError> {
        let _lock = match (&self.file, write) {
            (Some(file), true) => Some(file.lock()?),
            _ => None,
        };
        self.refresh(write)?;
        let (value, changed) = f(self);
        if !changed {
            return Ok((value, None));
        }
        let before = self.file.as_ref().map_or(0, WorldFile::journal_len);
        match self.persist() {
            Ok(unflushed) => Ok((value, unflushed.map(|u| (u, before)))),
            Err(e) => {
                self.reload()?;
                Err(e)
            }
        }
    }

    /// When the files changed since this process last read or wrote them, takes the
    /// world they hold (no file any more: an empty world of the same seed). `locked`:
    /// the caller holds the lock; otherwise it is taken for the reading.
    pub(crate) fn refresh(&mut self, locked: bool) -> Result<(), WorldFileError> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        if !file.moved()? {
            return Ok(());
        }
        let _lock = if locked { None } else { Some(file.lock()?) };
        self.reload()
    }

    /// Takes the world the files hold now (no file: an empty world of the same seed).
    /// Call it holding the lock.
    fn reload(&mut self) -> Result<(), WorldFileError> {
        let Some(file) = &mut self.file else {
            return Ok(());
        };
        let mut contents = file.read()?;
        let fresh = match &contents.file {
            Some(bytes) => World::decode(file.path(), bytes, &mut contents.changes)?,
            None => World::new(self.seed),
        };
        file.saw(&contents);
        self.adopt(fresh);
        Ok(())
    }

    /// Saves what changed since the last save: as a journal line, or, for a world
    /// whose file does not exist yet or whose journal outgrew it, as the whole file.
    /// Call it holding the file's lock.
    fn persist(&mut self) -> Result<Option<Unflushed>, WorldFileError> {
        let Some(file) = &self.file else {
            return Ok(None);
        };
        if !file.exists() || file.journal_outgrown() {
            self.write_whole()?;
            return Ok(None);
        }
        let line = self.change_line();
        let unflushed = match &mut self.file {
            Some(file) => Some(file.append(&line)?),
            None => None,
        };
        // What is in the files now holds every change made so far; a change not saved
        // (a call that failed after changing the world) goes with the next save.
        self.dirty.clear();
        Ok(unflushed)
    }

    /// Writes the world whole to its file and removes the journal. Call it holding the
    /// file's lock.
    fn write_whole(&mut self) -> Result<(), WorldFileError> {
        let bytes = self.encode();
        if let Some(file) = &mut self.file {
            file.write(&bytes)?;
        }
        self.dirty.clear();
        Ok(())
    }

    /// Folds the journal into the file, under the lock, from the world as the files
    /// hold it now; creates the file of a world never written.
    pub(crate) fn compact(&mut self) -> Result<(), WorldFileError> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let _lock = file.lock()?;
        self.refresh(true)?;
        self.write_whole()
    }
}

impl Drop for World {
    /// The last handle on a world with a file leaves the file whole: the journal is
    /// folded in, and the lock file removed. Should that fail, the journal stays, and
    /// the next open replays it.
    fn drop(&mut self) {
        let Some(file) = &self.file else {
            return;
        };
        if !file.has_journal() && !file.holds_lock_file() {
            return;
        }
        let Ok(lock) = file.lock() else {
            return;
        };
        let _ = self.refresh(true).and_then(|()| match &self.file {
            Some(file) if file.has_journal() => self.write_whole(),
            _ => Ok(()),
        });
        lock.remove();
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
        let err = file.write(b"{}\n").unwrap_err();
        assert!(matches!(err, WorldFileError::Io { .. }), "{err}");
        assert!(
            !file.exists(),
            "a failed write is not remembered as written"
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
