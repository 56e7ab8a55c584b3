//! Records on PostgreSQL, for a team sharing a fleet (feature `postgres`): what is
//! stored where, the lock and the migration rule are documented on [`PostgresStore`].
//! The submodules: `schema` (tables and migrations), `tables` (ledger and cache),
//! `lock` (the fleet's lock), `worker` (the thread owning the connections), `redact`
//! (URLs without passwords).

mod lock;
mod schema;
mod tables;
mod worker;

use std::fmt;
use std::time::Duration;

use sha2::{Digest as _, Sha256};
use sqlx::postgres::PgConnectOptions;

use self::lock::{Forced, Release, Taken};
use self::worker::{Failure, Worker};
use super::redact::Place;
use super::{
    CacheEntry, Lease, Ledger, LedgerProgress, LockError, LockGuard, LockHolder, RecordError,
    RecordStore, RecordWrite,
};

/// How long confirming the lock may take before the run takes it as lost.
const LEASE_WAIT: Duration = Duration::from_secs(10);

/// A stable 64-bit advisory lock key: the first eight bytes of SHA-256 of `text`.
fn key(text: &str) -> i64 {
    let digest = Sha256::digest(text.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(bytes)
}

/// Records on PostgreSQL, for a team sharing a fleet (feature `postgres`).
///
/// # What is stored where
///
/// Four tables, prefixed so that the database can hold other things:
///
/// ```text
/// infra_ledger_rows      fleet, provider, kind, name, region, discovered, intent,
///                        deleting (key: fleet, provider, kind, name, region)
/// infra_cache_entries    fleet, provider, kind, position, name, region, handle,
///                        observed jsonb, written jsonb (key: fleet, provider, kind, position)
/// infra_lock_holders     fleet, id, host, pid, verb, since, backend_pid (key: fleet)
/// infra_schema_versions  version, name, checksum (SHA-256 of the migration's SQL), applied_at
/// ```
///
/// `save_ledger` replaces a fleet's rows in one transaction; `record_progress` marks and
/// drops only the rows it names, in one transaction (a run writes one such batch per
/// delete it starts, so its cost is the batch's, not the ledger's); `save_cache` one
/// (fleet, provider, kind) pair in one transaction (an empty list deletes the pair): a
/// run killed mid-save leaves the records as they were before it. `save_together`
/// makes all its writes, of several fleets, in one transaction (`records move`). Cache entries come
/// back in the order saved. `jsonb` keeps values, not their spelling: an object's keys
/// come back in `jsonb`'s order, `-0.0` as `0.0`, an integral float of 10¹⁶ or more
/// that fits a 64-bit integer as that integer, and other floats in plain decimal, which
/// serde_json (without its `float_roundtrip` feature) reads back to within a few units
/// in the last place. PostgreSQL's text holds no NUL character: a name holding one is
/// refused ([`RecordError::BadName`]), as is a `\u0000` in observed JSON (by the
/// server). Unqualified table names follow the connection's `search_path`
/// (`?options=-c%20search_path%3Dteam_a` picks a schema).
///
/// # The lock
///
/// A fleet's lock is a session-level advisory lock (key: the first eight bytes of
/// SHA-256 of `infra fleet lock:<fleet>`), taken with `pg_try_advisory_lock` on a
/// connection kept out of the pool while the [`LockGuard`] lives. The holder is written
/// to `infra_lock_holders` (with the session's `pg_backend_pid()`) so that a run turned
/// away can name it. Dropping the guard deletes the row, unlocks and closes the
/// connection. A run that dies ends its session, and PostgreSQL releases the lock; the
/// row it leaves is reported by the next run to take the lock ([`LockGuard::replaced`]).
/// `force_unlock` ends the session holding the lock (`pg_terminate_backend`, found in
/// `pg_locks`; this needs the same role, or `pg_signal_backend`) when that session is
/// the one the row names, then deletes the row. Advisory locks are per database: two
/// schemas of one database share their fleets' locks. A session ended by the server
/// (`idle_session_timeout`, a restart) loses the lock with it, and the run stops
/// (see Fencing).
///
/// # Fencing
///
/// A run's lock lives as long as its session, and a session can end while the run
/// goes on (an administrator's `pg_terminate_backend`, `idle_session_timeout`, a server
/// restart, a cut connection); another run may then take the lock. So the guard's
/// [`LockGuard::lease`] is confirmed on the lock's own session (a query it must answer:
/// a session that answers still holds its advisory lock) before a run starts each batch
/// of calls, and the runner's engine starts nothing without it. Once it fails, the run
/// makes no further cloud call, reports every resource it had not started as not
/// attempted (`refused`, saying the lock was lost), writes no record, and exits 1. What
/// it did is in the records already: a create's row is written before the create, and a
/// delete's row is marked before the delete is sent, so the next run finds both.
///
/// **The window that remains:** a call already in flight when the session ends runs to
/// its end (a lease is confirmed before a call starts, not while it runs, and no
/// cloud call can be taken back), and so does the rest of that resource's step (the
/// delete after its ownership check). For that moment, the run that lost the lock and
/// one that took it may both be calling the cloud. Its record is already written, so
/// nothing is lost or made twice by the next run; the two runs may still race on that
/// one resource, as two operators could.
///
/// # Migrations
///
/// [`PostgresStore::connect`] brings the schema to this build's version in one
/// transaction, under an advisory lock, so that concurrent first connections take turns.
/// A database whose schema is newer than this build's is refused and left untouched
/// (never migrated down), as is one where a recorded migration's checksum is not this
/// build's. Errors name the URL without its password.
///
/// # TLS
///
/// This build has no TLS: `sslmode=prefer` (the default) connects in the clear, and
/// `sslmode=require`, `verify-ca` or `verify-full` is refused with an error that says so.
///
/// # Threads
///
/// [`RecordStore`] is synchronous. The store owns a thread running a current-thread
/// tokio runtime and the connection pool; each call sends it a request and waits for the
/// answer, so it can be called from any runtime or none.
pub struct PostgresStore {
    place: Place,
    worker: Worker,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("place", &self.place.shown())
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user:password@host:port/database?…`), checks the
    /// schema's version and applies the migrations this build has and the database
    /// lacks.
    ///
    /// # Errors
    ///
    /// [`RecordError::Store`], naming the URL without its password: the URL does not
    /// parse, the database cannot be reached, its schema is newer than this build's or
    /// was changed outside it, or a migration failed (nothing of it is kept).
    pub fn connect(url: &str) -> Result<Self, RecordError> {
        let options = url.parse::<PgConnectOptions>();
        let place = Place::of(url, options.is_ok());
        let failed = |message: Failure| RecordError::Store {
            place: place.shown().to_owned(),
            message: place.scrub(&message),
        };
        let options = options.map_err(|e| failed(worker::db(e)))?;
        let worker = Worker::start(options, schema::migrate).map_err(failed)?;
        Ok(PostgresStore { place, worker })
    }

    /// The schema version this build migrates to.
    pub const SCHEMA_VERSION: i64 = schema::SCHEMA_VERSION;

    fn failed(&self, message: Failure) -> RecordError {
        RecordError::Store {
            place: self.place.shown().to_owned(),
            message: self.place.scrub(&message),
        }
    }

    fn call<T, F, Fut>(&self, job: F) -> Result<T, RecordError>
    where
        T: Send + 'static,
        F: FnOnce(std::sync::Arc<worker::Shared>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, Failure>> + Send + 'static,
    {
        self.worker.call(job).map_err(|m| self.failed(m))
    }
}

/// Refuses a name PostgreSQL's text cannot hold.
fn check_text(what: &'static str, name: &str) -> Result<(), RecordError> {
    if name.contains('\0') {
        return Err(RecordError::BadName {
            what,
            name: name.to_owned(),
            why: "PostgreSQL text cannot hold a NUL character",
        });
    }
    Ok(())
}

fn check_pair(fleet: &str, provider: &str, kind: &str) -> Result<(), RecordError> {
    check_text("fleet", fleet)?;
    check_text("provider", provider)?;
    check_text("kind", kind)
}

fn check_ledger(fleet: &str, ledger: &Ledger) -> Result<(), RecordError> {
    check_text("fleet", fleet)?;
    ledger.rows.iter().try_for_each(|r| {
        check_pair(fleet, &r.provider, &r.kind)?;
        check_text("name", &r.name)?;
        check_text("region", &r.region)
    })
}

fn check_entries(entries: &[CacheEntry]) -> Result<(), RecordError> {
    entries.iter().try_for_each(|e| {
        check_text("name", &e.name)?;
        check_text("region", &e.region)?;
        check_text("handle", &e.handle)
    })
}

impl RecordStore for PostgresStore {
    fn load_ledger(&self, fleet: &str) -> Result<Ledger, RecordError> {
        check_text("fleet", fleet)?;
        let fleet = fleet.to_owned();
        self.call(move |shared| tables::load_ledger(shared, fleet))
    }

    fn save_ledger(&self, fleet: &str, ledger: &Ledger) -> Result<(), RecordError> {
        check_ledger(fleet, ledger)?;
        let (fleet, ledger) = (fleet.to_owned(), ledger.clone());
        self.call(move |shared| tables::save_ledger(shared, fleet, ledger))
    }

    fn record_progress(&self, fleet: &str, progress: &LedgerProgress) -> Result<(), RecordError> {
        if progress.is_empty() {
            return Ok(());
        }
        check_text("fleet", fleet)?;
        let (fleet, progress) = (fleet.to_owned(), progress.clone());
        self.call(move |shared| tables::record_progress(shared, fleet, progress))
    }

    fn load_cache(
        &self,
        fleet: &str,
        provider: &str,
        kind: &str,
    ) -> Result<Vec<CacheEntry>, RecordError> {
        check_pair(fleet, provider, kind)?;
        let (f, p, k) = (fleet.to_owned(), provider.to_owned(), kind.to_owned());
        self.call(move |shared| tables::load_cache(shared, f, p, k))
    }

    fn save_cache(
        &self,
        fleet: &str,
        provider: &str,
        kind: &str,
        entries: &[CacheEntry],
    ) -> Result<(), RecordError> {
        check_pair(fleet, provider, kind)?;
        check_entries(entries)?;
        let pair = (fleet.to_owned(), provider.to_owned(), kind.to_owned());
        let entries = entries.to_vec();
        self.call(move |shared| tables::save_cache(shared, pair, entries))
    }

    /// One transaction for every write: both fleets' records of a move change
    /// together, or neither does.
    fn save_together(&self, writes: &[RecordWrite]) -> Result<(), RecordError> {
        for write in writes {
            match write {
                RecordWrite::Ledger { fleet, ledger } => check_ledger(fleet, ledger)?,
                RecordWrite::Cache {
                    fleet,
                    provider,
                    kind,
                    entries,
                } => {
                    check_pair(fleet, provider, kind)?;
                    check_entries(entries)?;
                }
            }
        }
        let writes = writes.to_vec();
        self.call(move |shared| tables::save_together(shared, writes))
    }

    fn cached_pairs(&self, fleet: &str) -> Result<Vec<(String, String)>, RecordError> {
        check_text("fleet", fleet)?;
        let fleet = fleet.to_owned();
        self.call(move |shared| tables::cached_pairs(shared, fleet))
    }

    fn try_lock(&self, fleet: &str, holder: &LockHolder) -> Result<LockGuard, LockError> {
        check_text("fleet", fleet)?;
        let (f, h) = (fleet.to_owned(), holder.clone());
        match self.call(move |shared| lock::try_lock(shared, f, h))? {
            Taken::Locked { token, replaced } => {
                let release = Release {
                    worker: self.worker.clone(),
                    token,
                    fleet: fleet.to_owned(),
                    id: holder.id.clone(),
                };
                let (worker, place) = (self.worker.clone(), self.place.clone());
                let lease = Lease::checked_by(move || {
                    worker
                        .call_within(LEASE_WAIT, move |shared| lock::confirm(shared, token))
                        .map_err(|m| format!("{}: {}", place.shown(), place.scrub(&m)))
                });
                Ok(LockGuard::new(holder.clone(), replaced, release).with_lease(lease))
            }
            Taken::Held(current) => Err(LockError::Held {
                fleet: fleet.to_owned(),
                holder: current.map(Box::new),
                waited: Duration::ZERO,
            }),
        }
    }

    fn force_unlock(&self, fleet: &str, id: &str) -> Result<LockHolder, LockError> {
        check_text("fleet", fleet)?;
        let (f, i) = (fleet.to_owned(), id.to_owned());
        match self.call(move |shared| lock::force_unlock(shared, f, i))? {
            Forced::Removed(holder) => Ok(holder),
            Forced::NotThatOne(current) => Err(LockError::NoSuchLock {
                fleet: fleet.to_owned(),
                id: id.to_owned(),
                current: current.map(Box::new),
            }),
        }
    }

    fn verify(&self, fleet: &str) -> Result<(), RecordError> {
        check_text("fleet", fleet)?;
        let fleet = fleet.to_owned();
        self.call(move |shared| tables::verify(shared, fleet))
    }

    fn describe(&self) -> String {
        format!("PostgreSQL records at {}", self.place.shown())
    }
}
