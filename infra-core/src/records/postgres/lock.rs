//! A fleet's lock: a session-level advisory lock, held by a connection kept out of the
//! pool for as long as the lock is, and a row in `infra_lock_holders` describing the
//! holder for the runs it turns away.

use std::sync::Arc;
use std::time::Duration;

use sqlx::Connection as _;
use sqlx::postgres::PgConnection;

use super::key;
use super::worker::{Failure, Shared, Worker, db};
use crate::records::LockHolder;

/// The advisory lock key of a fleet's lock.
pub(super) fn fleet_key(fleet: &str) -> i64 {
    key(&format!("infra fleet lock:{fleet}"))
}

/// What asking for the lock gave.
pub(super) enum Taken {
    /// Held now, by the connection kept under this token; what a run that died left.
    Locked {
        token: u64,
        replaced: Option<LockHolder>,
    },
    /// Another session holds it; its holder, as described.
    Held(Option<LockHolder>),
}

type HolderColumns = (String, String, i64, String, i64, i32);

fn holder_of((id, host, pid, verb, since, _): HolderColumns) -> LockHolder {
    LockHolder {
        id,
        host,
        pid: u32::try_from(pid).unwrap_or(u32::MAX),
        verb,
        since: u64::try_from(since).unwrap_or(0),
    }
}

async fn holder_row(
    conn: &mut PgConnection,
    fleet: &str,
) -> Result<Option<HolderColumns>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, host, pid, verb, since, backend_pid FROM infra_lock_holders WHERE fleet = $1",
    )
    .bind(fleet)
    .fetch_optional(conn)
    .await
}

/// How long a run turned away waits for the session holding the lock to describe itself
/// (it writes its row right after taking the lock), asking every 25 ms.
const DESCRIBE_WAIT: Duration = Duration::from_millis(500);

/// The holder of a lock another session holds: the row written by that very session
/// (the row's `backend_pid` is the session in `pg_locks`). A row left by a run that died,
/// or none yet, is waited on briefly, then answered as unknown rather than named wrongly.
#[allow(
    clippy::disallowed_methods,
    reason = "waiting on another session is real time, outside any run's clock"
)]
async fn current_holder(
    conn: &mut PgConnection,
    fleet: &str,
) -> Result<Option<LockHolder>, sqlx::Error> {
    let deadline = tokio::time::Instant::now() + DESCRIBE_WAIT;
    loop {
        let session = lock_session(conn, fleet).await?;
        let row = holder_row(conn, fleet).await?;
        match (session, row) {
            (Some(pid), Some(row)) if row.5 == pid => return Ok(Some(holder_of(row))),
            // Released meanwhile: nobody to name.
            (None, _) => return Ok(None),
            _ if tokio::time::Instant::now() >= deadline => return Ok(None),
            _ => tokio::time::sleep(Duration::from_millis(25)).await,
        }
    }
}

/// Takes the fleet's lock on a connection of its own, or says who holds it.
pub(super) async fn try_lock(
    shared: Arc<Shared>,
    fleet: String,
    holder: LockHolder,
) -> Result<Taken, Failure> {
    let mut conn = shared.pool.acquire().await.map_err(db)?;
    let got: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(fleet_key(&fleet))
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
    if !got {
        let current = current_holder(&mut conn, &fleet).await.map_err(db)?;
        return Ok(Taken::Held(current));
    }
    // From here the connection holds the lock: out of the pool, and closed (which
    // unlocks it) if describing the holder fails.
    let mut conn = conn.detach();
    match describe_holder(&mut conn, &fleet, &holder).await {
        Ok(replaced) => Ok(Taken::Locked {
            token: shared.keep(conn),
            replaced,
        }),
        Err(e) => {
            let _ = conn.close().await;
            Err(db(e))
        }
    }
}

/// Writes this run as the holder; returns the holder a run that died left, if any.
async fn describe_holder(
    conn: &mut PgConnection,
    fleet: &str,
    holder: &LockHolder,
) -> Result<Option<LockHolder>, sqlx::Error> {
    let replaced = holder_row(conn, fleet).await?.map(holder_of);
    sqlx::query(
        "INSERT INTO infra_lock_holders (fleet, id, host, pid, verb, since, backend_pid) \
         VALUES ($1, $2, $3, $4, $5, $6, pg_backend_pid()) \
         ON CONFLICT (fleet) DO UPDATE SET id = EXCLUDED.id, host = EXCLUDED.host, \
         pid = EXCLUDED.pid, verb = EXCLUDED.verb, since = EXCLUDED.since, \
         backend_pid = EXCLUDED.backend_pid",
    )
    .bind(fleet)
    .bind(&holder.id)
    .bind(&holder.host)
    .bind(i64::from(holder.pid))
    .bind(&holder.verb)
    .bind(i64::try_from(holder.since).unwrap_or(i64::MAX))
    .execute(conn)
    .await?;
    Ok(replaced)
}

/// How long dropping a guard waits for the release before leaving it to the server
/// (the connection is closed when the worker ends, which unlocks it).
const RELEASE_WAIT: Duration = Duration::from_secs(10);

/// Releases the lock when dropped: deletes the holder row (if it is still this run's:
/// after a `force-unlock`, another run's may be there), unlocks, closes the connection.
pub(super) struct Release {
    pub(super) worker: Worker,
    pub(super) token: u64,
    pub(super) fleet: String,
    pub(super) id: String,
}

impl Drop for Release {
    fn drop(&mut self) {
        let (token, fleet, id) = (self.token, self.fleet.clone(), self.id.clone());
        let released = self
            .worker
            .call_within(RELEASE_WAIT, move |shared| async move {
                release(shared, token, fleet, id).await;
                Ok(())
            });
        if let Err(e) = released {
            tracing::warn!(
                fleet = %self.fleet,
                error = %e,
                "could not release the fleet's lock; the server releases it when the \
                 connection closes"
            );
        }
    }
}

async fn release(shared: Arc<Shared>, token: u64, fleet: String, id: String) {
    let Some(mut conn) = shared.take(token) else {
        return;
    };
    let unlocked = async {
        sqlx::query("DELETE FROM infra_lock_holders WHERE fleet = $1 AND id = $2")
            .bind(&fleet)
            .bind(&id)
            .execute(&mut conn)
            .await?;
        sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(fleet_key(&fleet))
            .execute(&mut conn)
            .await
    }
    .await;
    if let Err(e) = unlocked {
        // A force-unlock ended this session: the lock is gone already.
        tracing::debug!(fleet = %fleet, error = %e, "releasing the fleet's lock");
    }
    let _ = conn.close().await;
}

/// Confirms the lock kept under `token` is still held: its session answers. A session
/// holds its advisory lock until it unlocks (only [`release`] does) or ends, so a
/// session that answers holds it; one that was ended (`pg_terminate_backend`, a server
/// restart, a network cut) fails, and is not kept.
pub(super) async fn confirm(shared: Arc<Shared>, token: u64) -> Result<(), Failure> {
    let Some(mut conn) = shared.take(token) else {
        return Err("the session holding the fleet's lock is gone".to_owned());
    };
    match sqlx::query("SELECT 1").execute(&mut conn).await {
        Ok(_) => {
            shared.put_back(token, conn);
            Ok(())
        }
        Err(e) => Err(format!(
            "the session holding the fleet's lock ended: {}",
            db(e)
        )),
    }
}

/// What `force_unlock` found.
pub(super) enum Forced {
    /// The lock with that id was removed; its holder.
    Removed(LockHolder),
    /// No lock with that id; the fleet's holder, if any.
    NotThatOne(Option<LockHolder>),
}

/// Removes the fleet's lock whose id is `id`: ends the session holding it (if that is
/// still the session that wrote the row) and deletes the row.
pub(super) async fn force_unlock(
    shared: Arc<Shared>,
    fleet: String,
    id: String,
) -> Result<Forced, Failure> {
    let mut conn = shared.pool.acquire().await.map_err(db)?;
    let row = holder_row(&mut conn, &fleet).await.map_err(db)?;
    let row = match row {
        Some(row) if row.0 == id => row,
        other => return Ok(Forced::NotThatOne(other.map(holder_of))),
    };
    let session = lock_session(&mut conn, &fleet).await.map_err(db)?;
    if session == Some(row.5) {
        terminate(&mut conn, row.5).await.map_err(db)?;
    }
    sqlx::query("DELETE FROM infra_lock_holders WHERE fleet = $1 AND id = $2")
        .bind(&fleet)
        .bind(&id)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    Ok(Forced::Removed(holder_of(row)))
}

/// The backend holding the fleet's advisory lock in this database, if any.
async fn lock_session(conn: &mut PgConnection, fleet: &str) -> Result<Option<i32>, sqlx::Error> {
    // A bigint advisory key is held as classid (high half), objid (low half), objsubid 1.
    let k = fleet_key(fleet) as u64;
    sqlx::query_scalar(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted \
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
         AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1",
    )
    .bind((k >> 32) as i64)
    .bind((k & 0xffff_ffff) as i64)
    .fetch_optional(conn)
    .await
}

/// Ends a backend, waiting up to five seconds for it to be gone (and its locks with it).
async fn terminate(conn: &mut PgConnection, pid: i32) -> Result<(), sqlx::Error> {
    let ended: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1, 5000)")
        .bind(pid)
        .fetch_one(conn)
        .await?;
    if !ended {
        tracing::warn!(pid, "the session holding the lock did not end within 5 s");
    }
    Ok(())
}
