//! One writer per fleet: the lock a run that may write records holds from its first
//! read of them to its last write.
//!
//! A store hands out the lock ([`RecordStore::try_lock`]); [`lock_fleet`] asks again
//! until a deadline. The lock is released when its [`LockGuard`] is dropped, and by the
//! store itself when the process holding it dies (an operating-system file lock, a
//! database session), so a crashed run never blocks the next one. What is left behind
//! by a run that died — its holder's description — is reported by the run that takes
//! the lock over ([`LockGuard::replaced`]). `force-unlock` removes a lock deliberately.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::{RecordError, RecordStore};

/// Who holds (or held) a fleet's lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockHolder {
    /// The lock's identifier, for `force-unlock`.
    pub id: String,
    /// The host the run is on.
    pub host: String,
    /// The run's process id on that host.
    pub pid: u32,
    /// What the run is doing (`apply`, `destroy`, …).
    pub verb: String,
    /// When the lock was taken, in seconds since the Unix epoch.
    pub since: u64,
}

impl LockHolder {
    /// This process, now, doing `verb`.
    #[allow(
        clippy::disallowed_methods,
        reason = "a lock's holder is described to people with the wall-clock time"
    )]
    pub fn this_process(verb: &str) -> Self {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let host = host_name();
        let pid = std::process::id();
        let seed = format!("{host}/{pid}/{}/{verb}", since.as_nanos());
        let digest = <sha2::Sha256 as sha2::Digest>::digest(seed.as_bytes());
        let id = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        LockHolder {
            id,
            host,
            pid,
            verb: verb.to_owned(),
            since: since.as_secs(),
        }
    }

    /// When the lock was taken, as an RFC 3339 UTC time.
    pub fn since_text(&self) -> String {
        rfc3339(self.since)
    }

    /// Whether the holder is known to be gone: a process on this host that is no longer
    /// running. A holder on another host cannot be looked at from here (`false`).
    pub fn is_gone(&self) -> bool {
        self.host == host_name() && !process_is_running(self.pid)
    }
}

impl fmt::Display for LockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` (process {} on {}, since {}, lock id {})",
            self.verb,
            self.pid,
            self.host,
            self.since_text(),
            self.id
        )
    }
}

/// Whether a fleet's lock is still held: asked by a run before it starts calls, so that
/// a run whose lock was lost (a database session ended under it) starts no more.
///
/// A lease confirmed is a lock held *then*: a call started right after stays in flight
/// if the lock is lost while it runs (see [`crate::engine::Engine::with_lease`]).
#[derive(Clone)]
pub struct Lease {
    check: Option<Arc<LeaseCheck>>,
}

type LeaseCheck = dyn Fn() -> Result<(), String> + Send + Sync;

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("checked", &self.check.is_some())
            .finish()
    }
}

impl Lease {
    /// A lock that cannot be lost while its holder lives (an operating-system file
    /// lock, a lock in memory): always confirmed.
    pub fn held_while_alive() -> Self {
        Lease { check: None }
    }

    /// A lock confirmed by `check`, which answers why it is no longer held.
    pub fn checked_by(check: impl Fn() -> Result<(), String> + Send + Sync + 'static) -> Self {
        Lease {
            check: Some(Arc::new(check)),
        }
    }

    /// Confirms the lock is held now, or says why it is not (or cannot be told).
    pub fn confirm(&self) -> Result<(), String> {
        match &self.check {
            None => Ok(()),
            Some(check) => check(),
        }
    }
}

/// A fleet's lock, held until dropped.
#[must_use = "the fleet's lock is released when the guard is dropped"]
pub struct LockGuard {
    holder: LockHolder,
    replaced: Option<LockHolder>,
    lease: Lease,
    _release: Box<dyn Send + Sync>,
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("holder", &self.holder)
            .field("replaced", &self.replaced)
            .finish_non_exhaustive()
    }
}

impl LockGuard {
    /// A lock held by `holder`; `release` is dropped when the lock is (and releases it
    /// there). `replaced` is what a run that died left behind, if anything.
    pub fn new(
        holder: LockHolder,
        replaced: Option<LockHolder>,
        release: impl Send + Sync + 'static,
    ) -> Self {
        LockGuard {
            holder,
            replaced,
            lease: Lease::held_while_alive(),
            _release: Box::new(release),
        }
    }

    /// The same guard, its lock confirmed by `lease` (a lock that can be lost while its
    /// holder lives: a database session).
    pub fn with_lease(mut self, lease: Lease) -> Self {
        self.lease = lease;
        self
    }

    /// How a run confirms it still holds this lock.
    pub fn lease(&self) -> Lease {
        self.lease.clone()
    }

    /// Who holds it: this run.
    pub fn holder(&self) -> &LockHolder {
        &self.holder
    }

    /// The lock a run that is gone left behind, taken over by this one.
    pub fn replaced(&self) -> Option<&LockHolder> {
        self.replaced.as_ref()
    }
}

/// The lock could not be taken or removed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Another run holds it.
    #[error("{}", held_message(fleet, holder.as_deref(), *waited))]
    Held {
        /// The fleet.
        fleet: String,
        /// Who holds it, when the store could say.
        holder: Option<Box<LockHolder>>,
        /// How long this run waited for it.
        waited: Duration,
    },
    /// `force-unlock` named a lock that is not the fleet's.
    #[error(
        "fleet `{fleet}` has no lock with id {id}{}",
        match current {
            Some(h) => format!("; its lock is held by {h}"),
            None => "; it is not locked".to_owned(),
        }
    )]
    NoSuchLock {
        /// The fleet.
        fleet: String,
        /// The id given.
        id: String,
        /// The lock the fleet has, if any.
        current: Option<Box<LockHolder>>,
    },
    /// The store failed.
    #[error(transparent)]
    Record(#[from] RecordError),
}

fn held_message(fleet: &str, holder: Option<&LockHolder>, waited: Duration) -> String {
    let who = match holder {
        Some(h) => format!("by {h}"),
        None => "by another run".to_owned(),
    };
    let waited = if waited.is_zero() {
        String::new()
    } else {
        format!(" (waited {})", show_duration(waited))
    };
    let advice = match holder {
        Some(h) if h.is_gone() => format!(
            "process {} is no longer running on this host: the lock is stale; \
             `force-unlock {}` removes it",
            h.pid, h.id
        ),
        Some(h) => format!(
            "another run is writing this fleet's records; wait for it (--lock-timeout \
             DURATION waits), or, if that run is gone, `force-unlock {}`",
            h.id
        ),
        None => "another run is writing this fleet's records; wait for it \
                 (--lock-timeout DURATION waits)"
            .to_owned(),
    };
    format!("fleet `{fleet}` is locked {who}{waited}: {advice}")
}

/// Takes the fleet's lock, asking again every 100 ms until `timeout` has passed (zero:
/// once).
#[allow(
    clippy::disallowed_methods,
    reason = "waiting for another process is real time, outside any run's clock"
)]
pub async fn lock_fleet(
    store: &dyn RecordStore,
    fleet: &str,
    verb: &str,
    timeout: Duration,
) -> Result<LockGuard, LockError> {
    let holder = LockHolder::this_process(verb);
    let started = tokio::time::Instant::now();
    loop {
        match store.try_lock(fleet, &holder) {
            Err(LockError::Held { fleet, holder, .. }) => {
                let waited = started.elapsed();
                if waited >= timeout {
                    return Err(LockError::Held {
                        fleet,
                        holder,
                        waited: if timeout.is_zero() {
                            Duration::ZERO
                        } else {
                            waited
                        },
                    });
                }
                tokio::time::sleep(Duration::from_millis(100).min(timeout - waited)).await;
            }
            other => return other,
        }
    }
}

/// Reads a duration as `--lock-timeout` takes it: a number and a unit (`500ms`, `30s`,
/// `5m`, `1h`), or `0`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?} has no unit (ms, s, m or h)"))?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} does not start with a whole number"))?;
    let seconds = |k: u64| {
        n.checked_mul(k)
            .map(Duration::from_secs)
            .ok_or_else(|| format!("{text:?} is too long"))
    };
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => seconds(1),
        "m" => seconds(60),
        "h" => seconds(3600),
        other => Err(format!("{text:?}: unknown unit {other:?} (ms, s, m or h)")),
    }
}

fn show_duration(d: Duration) -> String {
    if d.as_secs() >= 1 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// The name of this host, as the kernel has it (the `HOSTNAME` variable otherwise).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned())
}

/// Whether a process of this host is running; `true` when that cannot be told.
fn process_is_running(pid: u32) -> bool {
    let proc = std::path::Path::new("/proc");
    if !proc.join("self").exists() {
        return true;
    }
    proc.join(pid.to_string()).exists()
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian, UTC).
fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days to civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_documented() {
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        for bad in ["", "5", "s", "5 days", "-1s", "1.5s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn times_are_written_in_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_796_146_673), "2026-12-01T17:37:53Z");
    }

    #[test]
    fn this_process_is_running_and_a_dead_one_is_gone() {
        let me = LockHolder::this_process("apply");
        assert!(!me.is_gone());
        assert_eq!(me.id.len(), 16);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let gone = LockHolder { pid, ..me.clone() };
        assert!(gone.is_gone(), "process {pid} was reaped");
        let elsewhere = LockHolder {
            host: "another-host".into(),
            ..gone
        };
        assert!(
            !elsewhere.is_gone(),
            "another host's process cannot be looked at"
        );
    }
}
