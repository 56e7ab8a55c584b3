//! Running an act's transaction, and writing the timeline (§4.1).
//!
//! [`SqlStore::transaction`] runs an act's body in one database transaction and
//! commits it; a body that stops with a [`Fail`] is rolled back. It runs the body
//! again, in a new transaction, only when the dialect says the database aborted it
//! for a retry (on PostgreSQL a serialization failure or a deadlock).
//!
//! [`append`] writes an [`Entry`] at the machine's next revision: one counter per
//! machine, advanced under the machine row's lock, so that revision order is commit
//! order within a machine (§4.1). Refusals name their comparison (§3.2, §3.3).

use std::future::Future;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;

use crate::contract::comparison::Comparison;
use crate::contract::operation::{ControllerId, OwnerToken};
use crate::store::common::{db_err, role_name, token_text};
use crate::store::engine::SqlStore;
use crate::store::sql::{Statement, Tx, query};
use crate::store::{Actor, StoreError, StoreResult};

/// Why a transaction body stopped; either way the transaction rolls back.
pub(super) enum Fail {
    /// The database failed (retried if the dialect says it may be).
    Db(sqlx::Error),
    /// The act was refused, or found something missing or existing already.
    Store(StoreError),
}

impl From<sqlx::Error> for Fail {
    fn from(e: sqlx::Error) -> Self {
        Fail::Db(e)
    }
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        Fail::Store(e)
    }
}

/// What a transaction body, and every step it takes, returns.
pub(super) type R<T> = Result<T, Fail>;

/// How many times a transaction the database aborted for a retry runs again.
const MAX_RETRIES: u32 = 8;

/// A transaction as a body run by [`SqlStore::transaction`] holds it. It is a [`Tx`]
/// (through `Deref`); its lifetime `'e` is the body's environment, so that the body
/// may borrow the act's arguments for as long as it holds the transaction.
pub(super) struct TxScope<'e> {
    tx: Tx,
    env: PhantomData<&'e ()>,
}

impl Deref for TxScope<'_> {
    type Target = Tx;

    fn deref(&self) -> &Tx {
        &self.tx
    }
}

impl DerefMut for TxScope<'_> {
    fn deref_mut(&mut self) -> &mut Tx {
        &mut self.tx
    }
}

/// What a transaction body returns: its future, borrowing the transaction.
pub(super) type Body<'t, T> = Pin<Box<dyn Future<Output = R<T>> + Send + 't>>;

impl SqlStore {
    /// Run `body` in a transaction; commit on success, roll back otherwise. Only the
    /// errors the dialect calls retryable (on PostgreSQL serialization failures and
    /// deadlocks) are retried, by running `body` again in a new transaction.
    pub(super) async fn transaction<'e, T>(
        &'e self,
        mut body: impl for<'t> FnMut(&'t mut TxScope<'e>) -> Body<'t, T> + Send,
    ) -> StoreResult<T> {
        let dialect = self.pool.dialect();
        let mut tries = 0u32;
        loop {
            let mut scope = TxScope {
                tx: self.pool.begin().await.map_err(db_err)?,
                env: PhantomData,
            };
            match body(&mut scope).await {
                Ok(value) => match scope.tx.commit().await {
                    Ok(()) => break Ok(value),
                    Err(e) if dialect.retryable(&e) && tries < MAX_RETRIES => tries += 1,
                    Err(e) => break Err(db_err(e)),
                },
                Err(Fail::Db(e)) if dialect.retryable(&e) && tries < MAX_RETRIES => {
                    drop(scope);
                    tries += 1;
                }
                Err(Fail::Db(e)) => break Err(db_err(e)),
                Err(Fail::Store(e)) => break Err(e),
            }
        }
    }
}

/// A timeline entry about to be appended (§4.1).
#[derive(Clone)]
pub(super) struct Entry<'a> {
    /// What happened.
    pub(super) kind: &'static str,
    /// Who: a principal, or a controller (with its token when it acts as owner).
    pub(super) actor: String,
    /// The actor's role, or `controller`.
    pub(super) role: &'a str,
    /// The plan concerned.
    pub(super) plan: Option<&'a str>,
    /// The operation concerned.
    pub(super) operation: Option<&'a str>,
    /// For a refusal, the comparison that refused; the column holds its number.
    pub(super) comparison: Option<Comparison>,
    /// Details (never configuration or secret values).
    pub(super) detail: String,
    /// The principal at whose request a controller or an approver's approval acted.
    pub(super) requested_by: Option<String>,
}

impl<'a> Entry<'a> {
    /// An entry by principal `actor` in the role it acts in.
    pub(super) fn by(actor: &Actor, kind: &'static str) -> Self {
        Entry {
            kind,
            actor: actor.id.clone(),
            role: role_name(actor.role),
            plan: None,
            operation: None,
            comparison: None,
            detail: String::new(),
            requested_by: None,
        }
    }

    /// An entry by controller instance `c`.
    pub(super) fn controller(c: ControllerId, kind: &'static str) -> Self {
        Entry {
            kind,
            actor: format!("controller {:032x}", c.0),
            role: "controller",
            plan: None,
            operation: None,
            comparison: None,
            detail: String::new(),
            requested_by: None,
        }
    }

    /// An entry by the controller holding owner token `t`, named with the token.
    pub(super) fn token(t: &OwnerToken, kind: &'static str) -> Self {
        Entry {
            actor: token_text(t),
            ..Entry::controller(t.controller, kind)
        }
    }

    /// About plan `plan`.
    pub(super) fn plan(mut self, plan: &'a str) -> Self {
        self.plan = Some(plan);
        self
    }

    /// About operation `operation`.
    pub(super) fn op(mut self, operation: &'a str) -> Self {
        self.operation = Some(operation);
        self
    }

    /// With `detail`.
    pub(super) fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }

    /// A refusal by comparison `c`.
    pub(super) fn comparison(mut self, c: Comparison) -> Self {
        self.comparison = Some(c);
        self
    }
}

/// Advances the machine's revision counter (the caller holds the machine row's lock)
/// and returns the new revision.
async fn next_rev(tx: &mut Tx, machine: &str) -> R<i64> {
    let row = query("UPDATE machines SET revision = revision + 1 WHERE id = $1 RETURNING revision")
        .bind(machine)
        .fetch_one(tx)
        .await?;
    Ok(row.try_get(0)?)
}

/// The head of a statement that appends an entry as [`append`] does and then makes
/// the act's own writes (PostgreSQL's data-modifying `WITH`): `rev` holds the
/// entry's revision. Its parameters `$1`–`$9` are bound by [`bind_entry`]; the
/// rest of the statement (`$rest`, continuing the `WITH` list) numbers its own from
/// `$10`.
macro_rules! appending {
    ($rest:literal) => {
        concat!(
            "WITH rev AS (UPDATE machines SET revision = revision + 1 WHERE id = $1 \
             RETURNING revision), \
             appended AS (INSERT INTO timeline (machine_id, revision, kind, at_ms, actor, \
             actor_role, plan_id, operation_id, comparison, detail) \
             SELECT $1, revision, $2, $3, $4, $5, $6, $7, $8, $9 FROM rev)",
            $rest
        )
    };
}
pub(super) use appending;

/// Binds an [`appending`] statement's parameters `$1`–`$9`: entry `e` about
/// `machine` at `at` (an entry naming a requesting principal is not written this
/// way).
pub(super) fn bind_entry(statement: Statement, machine: &str, at: i64, e: Entry<'_>) -> Statement {
    debug_assert!(
        e.requested_by.is_none(),
        "appending writes no requesting principal"
    );
    statement
        .bind(machine)
        .bind(e.kind)
        .bind(at)
        .bind(e.actor)
        .bind(e.role)
        .bind(e.plan)
        .bind(e.operation)
        .bind(e.comparison.map(|c| i16::from(c.number())))
        .bind(e.detail)
}

/// Append an entry at the machine's next revision.
pub(super) async fn append(tx: &mut Tx, machine: &str, at: i64, e: Entry<'_>) -> R<i64> {
    let rev = next_rev(tx, machine).await?;
    // The requesting principal's column is written only when there is one, so a
    // database not yet migrated to it takes every other entry.
    let sql = if e.requested_by.is_some() {
        "INSERT INTO timeline (machine_id, revision, kind, at_ms, actor, actor_role, plan_id, \
         operation_id, comparison, detail, requested_by) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
    } else {
        "INSERT INTO timeline (machine_id, revision, kind, at_ms, actor, actor_role, plan_id, \
         operation_id, comparison, detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
    };
    let mut query = query(sql)
        .bind(machine)
        .bind(rev)
        .bind(e.kind)
        .bind(at)
        .bind(e.actor)
        .bind(e.role)
        .bind(e.plan)
        .bind(e.operation)
        .bind(e.comparison.map(|c| i16::from(c.number())))
        .bind(e.detail);
    if let Some(principal) = e.requested_by {
        query = query.bind(principal);
    }
    query.execute(tx).await?;
    Ok(rev)
}
