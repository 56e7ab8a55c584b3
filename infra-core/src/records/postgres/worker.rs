//! The thread that owns the connections: a current-thread tokio runtime running the
//! sqlx pool, fed requests over a channel.
//!
//! [`RecordStore`](crate::records::RecordStore) is synchronous and is called from async
//! code; blocking on a future inside the caller's runtime would stall (or panic) it.
//! Each call instead sends a job here and waits for the answer on a plain channel, which
//! works from any thread, in any runtime or in none. Jobs run as tasks, so a slow one
//! does not hold up the others. The thread ends when the store and every lock it handed
//! out are gone (they hold the sending side), closing the pool.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use sqlx::Connection as _;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use tokio::sync::mpsc;

/// What a job answers when it fails: a message (the store adds the place).
pub(super) type Failure = String;

/// The state jobs share on the worker thread.
pub(super) struct Shared {
    /// The records' connections.
    pub(super) pool: PgPool,
    /// The connections holding a fleet's lock, by token: out of the pool while held.
    held: Mutex<HashMap<u64, PgConnection>>,
    next: AtomicU64,
}

impl Shared {
    /// Keeps `conn` (holding a lock) until [`Shared::take`] is called with the token.
    pub(super) fn keep(&self, conn: PgConnection) -> u64 {
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        self.held.lock().expect("held locks").insert(token, conn);
        token
    }

    /// The connection kept under `token`, if it still is.
    pub(super) fn take(&self, token: u64) -> Option<PgConnection> {
        self.held.lock().expect("held locks").remove(&token)
    }

    /// Keeps `conn` under `token` again, after [`Shared::take`].
    pub(super) fn put_back(&self, token: u64, conn: PgConnection) {
        self.held.lock().expect("held locks").insert(token, conn);
    }
}

type Job = Box<dyn FnOnce(Arc<Shared>) -> BoxFuture<'static, ()> + Send>;

/// The sending side of the worker: cheap to clone, usable from any thread.
#[derive(Clone)]
pub(super) struct Worker {
    jobs: mpsc::UnboundedSender<Job>,
}

const GONE: &str = "the PostgreSQL connection thread has stopped";

/// How many connections the records use (a lock's connection is apart).
const POOL_SIZE: u32 = 4;

/// How long connecting may take, and waiting for a free connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl Worker {
    /// Starts the thread, connects and runs `setup` (the migrations) on a first
    /// connection before answering.
    pub(super) fn start<F, Fut>(options: PgConnectOptions, setup: F) -> Result<Worker, Failure>
    where
        F: FnOnce(PgConnection) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), Failure>>,
    {
        let (jobs, receiver) = mpsc::unbounded_channel();
        let (ready, answer) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("infra-postgres".to_owned())
            .spawn(move || run(options, setup, receiver, ready))
            .map_err(|e| format!("cannot start the connection thread: {e}"))?;
        answer.recv().map_err(|_| GONE.to_owned())??;
        Ok(Worker { jobs })
    }

    /// Runs `job` on the worker and waits for its answer.
    pub(super) fn call<T, F, Fut>(&self, job: F) -> Result<T, Failure>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Shared>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, Failure>> + Send + 'static,
    {
        self.send(job)?.recv().map_err(|_| GONE.to_owned())?
    }

    /// Like [`Worker::call`], giving up after `limit` (the job may still finish).
    pub(super) fn call_within<T, F, Fut>(&self, limit: Duration, job: F) -> Result<T, Failure>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Shared>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, Failure>> + Send + 'static,
    {
        self.send(job)?.recv_timeout(limit).map_err(|e| match e {
            std::sync::mpsc::RecvTimeoutError::Timeout => {
                format!("no answer within {} s", limit.as_secs())
            }
            std::sync::mpsc::RecvTimeoutError::Disconnected => GONE.to_owned(),
        })?
    }

    fn send<T, F, Fut>(
        &self,
        job: F,
    ) -> Result<std::sync::mpsc::Receiver<Result<T, Failure>>, Failure>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Shared>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, Failure>> + Send + 'static,
    {
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        let job: Job = Box::new(move |shared| {
            Box::pin(async move {
                let _ = reply.send(job(shared).await);
            })
        });
        self.jobs.send(job).map_err(|_| GONE.to_owned())?;
        Ok(answer)
    }
}

/// The worker thread: connects, sets up, answers, then runs jobs until every sender is
/// gone.
fn run<F, Fut>(
    options: PgConnectOptions,
    setup: F,
    mut jobs: mpsc::UnboundedReceiver<Job>,
    ready: std::sync::mpsc::SyncSender<Result<(), Failure>>,
) where
    F: FnOnce(PgConnection) -> Fut,
    Fut: Future<Output = Result<(), Failure>>,
{
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(format!("cannot start a runtime: {e}")));
            return;
        }
    };
    runtime.block_on(async move {
        let pool = match open(options, setup).await {
            Ok(pool) => pool,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        let shared = Arc::new(Shared {
            pool: pool.clone(),
            held: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
        });
        while let Some(job) = jobs.recv().await {
            tokio::spawn(job(Arc::clone(&shared)));
        }
        pool.close().await;
    });
}

/// Connects once (so that a wrong address or password fails at once, not after the
/// pool's retries), sets up on that connection, then makes the pool.
async fn open<F, Fut>(options: PgConnectOptions, setup: F) -> Result<PgPool, Failure>
where
    F: FnOnce(PgConnection) -> Fut,
    Fut: Future<Output = Result<(), Failure>>,
{
    let first = tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&options))
        .await
        .map_err(|_| format!("no connection within {} s", CONNECT_TIMEOUT.as_secs()))?
        .map_err(db)?;
    setup(first).await?;
    Ok(PgPoolOptions::new()
        .max_connections(POOL_SIZE)
        .acquire_timeout(CONNECT_TIMEOUT)
        .connect_lazy_with(options))
}

/// What sqlx said, with what to do when it is about TLS this build lacks.
pub(super) fn db(e: sqlx::Error) -> Failure {
    match e {
        sqlx::Error::Tls(_) => format!(
            "{e}; this build reaches PostgreSQL without TLS: `sslmode=require`, `verify-ca` \
             and `verify-full` need infra-core built with a sqlx TLS feature (or a \
             connection over a trusted network with `sslmode=disable`)"
        ),
        e => e.to_string(),
    }
}
