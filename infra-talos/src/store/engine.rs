//! The shared engine: [`SqlStore`], one store over either database, whose methods are
//! the contract's acts (§2–§7), each one transaction written once for both backends
//! over the dialect layer (`super::sql`); and [`Store`] for every store built on it
//! ([`OnEngine`]: `SqliteStore`, `PgStore`).
//!
//! On PostgreSQL the lock clauses are real row locks; on SQLite every transaction
//! starts with `BEGIN IMMEDIATE` and so runs alone.

use std::future::Future;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};

use crate::attempt::CommittedAttempt;
use crate::contract::accounting::{
    self, DecisionFacts, ExecutorStop, RecordedRead, TransportDeadline,
};
use crate::contract::classify::{self, Classification, ClassifyInput, RetryConditions};
use crate::contract::comparison::Comparison;
use crate::contract::drift;
use crate::contract::epoch::Epoch;
use crate::contract::evidence::{
    AttemptRecord, ObservationPurpose, ResponseClass, RestoreStatus, completion_verdict,
};
use crate::contract::gate::{self, FreezeAct, FreezeState, Mutation};
use crate::contract::operation::{
    self, AdmissionFacts, AttemptTransaction, ControllerId, Creation, OperationKind,
    OperationState, OwnerToken, RetryBasis, TransitionFacts,
};
use crate::contract::plan::{self, PlanEvent, PlanState, SelfApproval, Stage};
use crate::contract::recovery::{self, Dependency, ScopeEvent, ScopeState};
use crate::contract::{InstantMs, Revision, Role};

use super::common::*;
use super::sql::{Pool, Row, Tx, query};
use super::{
    AccountingRequest, Actor, AttemptAccounting, AttemptView, BlanketApproval, Committed,
    ContributionKind, DependencyCheck, HookPoint, IdentityKey, MachineSpec, MachineView,
    ObservationRequest, ObservationTicket, ObservationView, ObservedFacts, OperationView, PlanSpec,
    PlanView, PrincipalKind, PrincipalSpec, ReleaseSpec, ScopeAccounting, SealedReleaseSpec,
    Settings, Store, StoreError, StoreResult, TimelineEntry,
};
use crate::contract::SpanMs;
use crate::keys::{self, KeyBinding, SealedArtifact as BoundArtifact};

/// One store over either database: the pool and the settings every act runs with.
#[derive(Debug, Clone)]
pub(crate) struct SqlStore {
    pool: Pool,
    settings: Settings,
}

/// A store whose acts [`SqlStore`] performs; [`Store`] is implemented for every one.
pub(crate) trait OnEngine: Send + Sync {
    /// The engine.
    fn engine(&self) -> &SqlStore;
}

impl SqlStore {
    /// The engine over `pool`, whose database is migrated; with the scope guard off
    /// (tests only) the scope indexes are dropped.
    pub(super) async fn new(pool: Pool, settings: Settings, store: &str) -> StoreResult<Self> {
        if !settings.guards.scope_index {
            for sql in [
                "DROP INDEX operations_machine_scope",
                "DROP INDEX operations_rollout_slot",
            ] {
                pool.execute(query(sql))
                    .await
                    .map_err(|e| StoreError::open_failed(store, "cannot drop a scope index", e))?;
            }
        }
        Ok(Self { pool, settings })
    }
}

/// Every store built on the engine performs the contract's acts through it.
#[async_trait::async_trait]
impl<S: OnEngine> Store for S {
    async fn register_principal(&self, spec: PrincipalSpec) -> StoreResult<()> {
        self.engine().register_principal(spec).await
    }

    async fn create_machine(&self, actor: &Actor, spec: MachineSpec) -> StoreResult<()> {
        self.engine().create_machine(actor, spec).await
    }

    async fn publish_release(&self, actor: &Actor, spec: ReleaseSpec) -> StoreResult<()> {
        self.engine().publish_release(actor, spec).await
    }

    async fn create_plan(&self, actor: &Actor, spec: PlanSpec) -> StoreResult<PlanView> {
        self.engine().create_plan(actor, spec).await
    }

    async fn approve(&self, actor: &Actor, plan: &str) -> StoreResult<SelfApproval> {
        self.engine().approve(actor, plan).await
    }

    async fn revoke_approval(&self, actor: &Actor, plan: &str) -> StoreResult<()> {
        self.engine().revoke_approval(actor, plan).await
    }

    async fn revoke_identity(&self, actor: &Actor, principal: &str) -> StoreResult<()> {
        self.engine().revoke_identity(actor, principal).await
    }

    async fn cancel_plan(&self, actor: &Actor, plan: &str) -> StoreResult<()> {
        self.engine().cancel_plan(actor, plan).await
    }

    async fn grant_blanket_approval(
        &self,
        actor: &Actor,
        cluster_id: &str,
        reason: &str,
    ) -> StoreResult<BlanketApproval> {
        self.engine()
            .grant_blanket_approval(actor, cluster_id, reason)
            .await
    }

    async fn revoke_blanket_approval(&self, actor: &Actor, blanket: &str) -> StoreResult<()> {
        self.engine().revoke_blanket_approval(actor, blanket).await
    }

    async fn approve_under_blanket(&self, actor: &Actor, plan: &str) -> StoreResult<SelfApproval> {
        self.engine().approve_under_blanket(actor, plan).await
    }

    async fn blanket_approvals(&self) -> StoreResult<Vec<BlanketApproval>> {
        self.engine().blanket_approvals().await
    }

    async fn preflight(&self, plan: &str) -> StoreResult<()> {
        self.engine().preflight(plan).await
    }

    async fn begin_observation(
        &self,
        request: ObservationRequest,
    ) -> StoreResult<ObservationTicket> {
        self.engine().begin_observation(request).await
    }

    async fn record_observation(
        &self,
        ticket: &ObservationTicket,
        facts: ObservedFacts,
    ) -> StoreResult<Revision> {
        self.engine().record_observation(ticket, facts).await
    }

    async fn record_dependency_check(&self, check: DependencyCheck) -> StoreResult<Revision> {
        self.engine().record_dependency_check(check).await
    }

    async fn commit(&self, plan: &str, controller: ControllerId) -> StoreResult<Committed> {
        self.engine().commit(plan, controller).await
    }

    async fn attempt(&self, operation: &str, token: OwnerToken) -> StoreResult<CommittedAttempt> {
        self.engine().attempt(operation, token).await
    }

    async fn record_response(
        &self,
        operation: &str,
        attempt: u32,
        response: ResponseClass,
    ) -> StoreResult<OperationState> {
        self.engine()
            .record_response(operation, attempt, response)
            .await
    }

    async fn takeover(
        &self,
        operation: &str,
        expected_generation: u64,
        controller: ControllerId,
    ) -> StoreResult<OwnerToken> {
        self.engine()
            .takeover(operation, expected_generation, controller)
            .await
    }

    async fn record_accounting_decision(
        &self,
        actor: &Actor,
        request: AccountingRequest,
    ) -> StoreResult<()> {
        self.engine()
            .record_accounting_decision(actor, request)
            .await
    }

    async fn classify(&self, operation: &str, token: OwnerToken) -> StoreResult<Classification> {
        self.engine().classify(operation, token).await
    }

    async fn change_assignment(&self, actor: &Actor, machine: &str) -> StoreResult<u64> {
        self.engine().change_assignment(actor, machine).await
    }

    async fn freeze(&self, actor: &Actor, machine: &str, reason: &str) -> StoreResult<()> {
        self.engine().freeze(actor, machine, reason).await
    }

    async fn unfreeze(&self, actor: &Actor, machine: &str, reason: &str) -> StoreResult<()> {
        self.engine().unfreeze(actor, machine, reason).await
    }

    async fn enter_recovery(&self, actor: &Actor, controller: ControllerId) -> StoreResult<Epoch> {
        self.engine().enter_recovery(actor, controller).await
    }

    async fn release_scope(&self, actor: &Actor, machine: &str) -> StoreResult<()> {
        self.engine().release_scope(actor, machine).await
    }

    async fn account_scopes(&self, actor: &Actor, request: ScopeAccounting) -> StoreResult<()> {
        self.engine().account_scopes(actor, request).await
    }

    async fn mark_scope(
        &self,
        actor: &Actor,
        machine: &str,
        missing: Option<Dependency>,
    ) -> StoreResult<ScopeState> {
        self.engine().mark_scope(actor, machine, missing).await
    }

    async fn leave_recovery(&self, actor: &Actor) -> StoreResult<()> {
        self.engine().leave_recovery(actor).await
    }

    async fn current_epoch(&self) -> StoreResult<Epoch> {
        self.engine().current_epoch().await
    }

    async fn plan(&self, plan: &str) -> StoreResult<PlanView> {
        self.engine().plan(plan).await
    }

    async fn operation(&self, operation: &str) -> StoreResult<OperationView> {
        self.engine().operation(operation).await
    }

    async fn operations_of(&self, machine: &str) -> StoreResult<Vec<OperationView>> {
        self.engine().operations_of(machine).await
    }

    async fn machine(&self, machine: &str) -> StoreResult<MachineView> {
        self.engine().machine(machine).await
    }

    async fn timeline(&self, machine: &str) -> StoreResult<Vec<TimelineEntry>> {
        self.engine().timeline(machine).await
    }

    async fn publish_sealed_release(
        &self,
        actor: &Actor,
        spec: SealedReleaseSpec,
    ) -> StoreResult<()> {
        self.engine().publish_sealed_release(actor, spec).await
    }

    async fn sealed_artifact(&self, plan: &str) -> StoreResult<keys::SealedArtifact> {
        self.engine().sealed_artifact(plan).await
    }

    async fn record_response_text(
        &self,
        operation: &str,
        attempt: u32,
        response: ResponseClass,
        text: Option<String>,
    ) -> StoreResult<OperationState> {
        self.engine()
            .record_response_text(operation, attempt, response, text)
            .await
    }

    async fn takeover_requested(
        &self,
        operation: &str,
        expected_generation: u64,
        controller: ControllerId,
        requested_by: Option<&Actor>,
    ) -> StoreResult<OwnerToken> {
        self.engine()
            .takeover_requested(operation, expected_generation, controller, requested_by)
            .await
    }

    async fn now(&self) -> StoreResult<InstantMs> {
        self.engine().now().await
    }

    async fn machines(&self) -> StoreResult<Vec<MachineView>> {
        self.engine().machines().await
    }

    async fn open_operations(&self) -> StoreResult<Vec<OperationView>> {
        self.engine().open_operations().await
    }

    async fn attempts(&self, operation: &str) -> StoreResult<Vec<AttemptView>> {
        self.engine().attempts(operation).await
    }

    async fn observations(&self, machine: &str) -> StoreResult<Vec<ObservationView>> {
        self.engine().observations(machine).await
    }

    #[cfg(feature = "controls")]
    async fn dump_all_rows(&self) -> StoreResult<String> {
        self.engine().dump_all_rows().await
    }

    #[cfg(feature = "controls")]
    async fn raw_execute(&self, sql: &'static str) -> StoreResult<u64> {
        self.engine().raw_execute(sql).await
    }
}

/// Why a transaction body stopped.
enum Fail {
    Db(sqlx::Error),
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

type R<T> = Result<T, Fail>;

const MAX_RETRIES: u32 = 8;

/// A transaction as a body run by [`SqlStore::transaction`] holds it. It is a [`Tx`]
/// (through `Deref`); its lifetime `'e` is the body's environment, so that the body
/// may borrow the act's arguments for as long as it holds the transaction.
struct TxScope<'e> {
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
type Body<'t, T> = Pin<Box<dyn Future<Output = R<T>> + Send + 't>>;

impl SqlStore {
    /// Run `body` in a transaction; commit on success, roll back otherwise. Only the
    /// errors the dialect calls retryable (on PostgreSQL serialization failures and
    /// deadlocks) are retried, by running `body` again in a new transaction.
    async fn transaction<'e, T>(
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

// Every column, so that a row of a store not yet migrated to version 5 (recovery scope
// states) still reads: its scope is then `normal`, as the migration's default says.
macro_rules! machine_cols {
    () => {
        "*"
    };
}

macro_rules! plan_cols {
    () => {
        "id, machine_id, release_id, artifact_digest, key_provider, key_id, key_version, \
         identity_kind, identity_value, cluster_id, assignment_revision, desired_release, \
         baseline_revision, pre_dispatch_digest, bound_drift, route, talos_minor, \
         max_evidence_age_ms, transport_deadline_ms, verification_deadline_ms, max_attempts, \
         rollout_scope, expires_at_ms, creator_id, state, cancelled"
    };
}

macro_rules! op_cols {
    () => {
        "id, plan_id, machine_id, state, owner_controller, owner_generation, owner_epoch, \
         attempts, commit_revision, retry_revision, retry_controller, retry_generation, \
         retry_epoch, last_fact_revision, restored"
    };
}

macro_rules! obs_cols {
    () => {
        "s.basis, s.purpose, s.plan_id, s.controller, s.started_at_ms, o.recorded_at_ms, \
         o.smbios_uuid, o.node_id, o.cluster_id, o.talos_version, \
         o.digest, o.config_version, o.access_version \
         FROM observations o JOIN observation_starts s \
         ON s.machine_id = o.machine_id AND s.basis = o.basis"
    };
}

macro_rules! attempt_cols {
    () => {
        "attempt_no, revision, transport_deadline_ms, verification_deadline_ms, response, \
         response_revision, accounted_by_decision, decision_revision"
    };
}

fn machine_row(r: &Row) -> Result<MachineRow, sqlx::Error> {
    Ok(MachineRow {
        id: r.try_get("id")?,
        identity_kind: r.try_get("identity_kind")?,
        identity_value: r.try_get("identity_value")?,
        cluster_id: r.try_get("cluster_id")?,
        endpoint: r.try_get("endpoint")?,
        rollout_scope: r.try_get("rollout_scope")?,
        talos_minor: r.try_get("talos_minor")?,
        revision: r.try_get("revision")?,
        assignment_revision: r.try_get("assignment_revision")?,
        desired_release: r.try_get("desired_release")?,
        applied_release: r.try_get("applied_release")?,
        applied_digest: r.try_get("applied_digest")?,
        baseline_revision: r.try_get("baseline_revision")?,
        frozen: r.try_get("frozen")?,
        released_epoch: r.try_get("released_epoch")?,
        open_drift: r.try_get("open_drift")?,
        open_drift_digest: r.try_get("open_drift_digest")?,
        scope_state: r
            .try_get("scope_state")
            .or_else(|e| absent_column(e, || "normal".to_owned()))?,
        scope_mark_desired: r
            .try_get("scope_mark_desired")
            .or_else(|e| absent_column(e, || None))?,
        scope_decision_revision: r
            .try_get("scope_decision_revision")
            .or_else(|e| absent_column(e, || None))?,
    })
}

/// The value a column added by a later migration stands for in a row read from a
/// store not yet migrated to it; any other error stays an error.
fn absent_column<T>(e: sqlx::Error, default: impl FnOnce() -> T) -> Result<T, sqlx::Error> {
    match e {
        sqlx::Error::ColumnNotFound(_) => Ok(default()),
        other => Err(other),
    }
}

fn plan_row(r: &Row) -> Result<PlanRow, sqlx::Error> {
    Ok(PlanRow {
        id: r.try_get("id")?,
        machine_id: r.try_get("machine_id")?,
        release_id: r.try_get("release_id")?,
        artifact_digest: r.try_get("artifact_digest")?,
        key_version: r.try_get("key_version")?,
        identity_kind: r.try_get("identity_kind")?,
        identity_value: r.try_get("identity_value")?,
        cluster_id: r.try_get("cluster_id")?,
        assignment_revision: r.try_get("assignment_revision")?,
        desired_release: r.try_get("desired_release")?,
        baseline_revision: r.try_get("baseline_revision")?,
        pre_dispatch_digest: r.try_get("pre_dispatch_digest")?,
        bound_drift: r.try_get("bound_drift")?,
        route: r.try_get("route")?,
        talos_minor: r.try_get("talos_minor")?,
        max_evidence_age_ms: r.try_get("max_evidence_age_ms")?,
        transport_deadline_ms: r.try_get("transport_deadline_ms")?,
        verification_deadline_ms: r.try_get("verification_deadline_ms")?,
        max_attempts: r.try_get("max_attempts")?,
        rollout_scope: r.try_get("rollout_scope")?,
        expires_at_ms: r.try_get("expires_at_ms")?,
        creator_id: r.try_get("creator_id")?,
        state: r.try_get("state")?,
        cancelled: r.try_get("cancelled")?,
    })
}

fn token_from(controller: &[u8], generation: i64, epoch: &[u8]) -> Result<OwnerToken, StoreError> {
    Ok(OwnerToken {
        controller: controller_of(controller)?,
        generation: u(generation),
        epoch: epoch_of(epoch)?,
    })
}

fn op_row(r: &Row) -> R<OperationRow> {
    let state: String = r.try_get("state")?;
    let oc: Vec<u8> = r.try_get("owner_controller")?;
    let oe: Vec<u8> = r.try_get("owner_epoch")?;
    let rc: Option<Vec<u8>> = r.try_get("retry_controller")?;
    let rg: Option<i64> = r.try_get("retry_generation")?;
    let re: Option<Vec<u8>> = r.try_get("retry_epoch")?;
    let retry_by = match (rc, rg, re) {
        (Some(c), Some(g), Some(e)) => Some(token_from(&c, g, &e)?),
        _ => None,
    };
    Ok(OperationRow {
        id: r.try_get("id")?,
        plan_id: r.try_get("plan_id")?,
        machine_id: r.try_get("machine_id")?,
        state: state_of(&state)?,
        owner: token_from(&oc, r.try_get("owner_generation")?, &oe)?,
        attempts: r.try_get("attempts")?,
        commit_revision: r.try_get("commit_revision")?,
        retry_revision: r.try_get("retry_revision")?,
        retry_by,
        last_fact_revision: r.try_get("last_fact_revision")?,
        restored: r.try_get("restored")?,
    })
}

fn obs_row(r: &Row) -> R<ObsRow> {
    let purpose: String = r.try_get("purpose")?;
    Ok(ObsRow {
        basis: r.try_get("basis")?,
        purpose: purpose_of(&purpose)?,
        started_at_ms: r.try_get("started_at_ms")?,
        recorded_at_ms: r.try_get("recorded_at_ms")?,
        smbios_uuid: r.try_get("smbios_uuid")?,
        node_id: r.try_get("node_id")?,
        cluster_id: r.try_get("cluster_id")?,
        talos_version: r.try_get("talos_version")?,
        digest: r.try_get("digest")?,
        config_version: r.try_get("config_version")?,
        access_version: r.try_get("access_version")?,
    })
}

fn attempt_row(r: &Row) -> R<AttemptRow> {
    let response: String = r.try_get("response")?;
    Ok(AttemptRow {
        attempt_no: r.try_get("attempt_no")?,
        revision: r.try_get("revision")?,
        transport_deadline_ms: r.try_get("transport_deadline_ms")?,
        verification_deadline_ms: r.try_get("verification_deadline_ms")?,
        response: response_of(&response)?,
        response_revision: r.try_get("response_revision")?,
        accounted_by_decision: r.try_get("accounted_by_decision")?,
        decision_revision: r.try_get("decision_revision")?,
    })
}

/// A timeline entry about to be appended.
struct Entry<'a> {
    kind: &'static str,
    actor: String,
    role: &'a str,
    plan: Option<&'a str>,
    operation: Option<&'a str>,
    comparison: Option<Comparison>,
    detail: String,
    requested_by: Option<String>,
}

impl<'a> Entry<'a> {
    fn by(actor: &Actor, kind: &'static str) -> Self {
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

    fn controller(c: ControllerId, kind: &'static str) -> Self {
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

    fn token(t: &OwnerToken, kind: &'static str) -> Self {
        Entry {
            actor: token_text(t),
            ..Entry::controller(t.controller, kind)
        }
    }

    fn plan(mut self, plan: &'a str) -> Self {
        self.plan = Some(plan);
        self
    }

    fn op(mut self, operation: &'a str) -> Self {
        self.operation = Some(operation);
        self
    }

    fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }

    fn comparison(mut self, c: Comparison) -> Self {
        self.comparison = Some(c);
        self
    }
}

impl SqlStore {
    async fn store_time(&self, tx: &mut Tx) -> R<i64> {
        if let Some(clock) = &self.settings.clock {
            return Ok(i(clock.now().0));
        }
        let row = query(tx.dialect().now_sql()).fetch_one(tx).await?;
        Ok(row.try_get::<i64, _>(0)?)
    }

    async fn hook(&self, point: HookPoint) {
        if let Some(hook) = &self.settings.hook {
            hook(point).await;
        }
    }
}

async fn lock_machine(tx: &mut Tx, id: &str) -> R<MachineRow> {
    let row = query(concat!(
        "SELECT ",
        machine_cols!(),
        " FROM machines WHERE id = $1",
        " FOR UPDATE"
    ))
    .bind(id)
    .fetch_optional(tx)
    .await?
    .ok_or_else(|| not_found("machine", id))?;
    Ok(machine_row(&row)?)
}

async fn read_machine(tx: &mut Tx, id: &str) -> R<MachineRow> {
    let row = query(concat!(
        "SELECT ",
        machine_cols!(),
        " FROM machines WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(tx)
    .await?
    .ok_or_else(|| not_found("machine", id))?;
    Ok(machine_row(&row)?)
}

/// The installation row read to share (commitment, attempt) or to change (entry).
const INSTALLATION_SQL: [&str; 2] = [
    concat!("SELECT * FROM installation WHERE id = 1", " FOR SHARE"),
    concat!("SELECT * FROM installation WHERE id = 1", " FOR UPDATE"),
];

async fn installation(tx: &mut Tx, share: bool) -> R<InstallationRow> {
    let row = query(INSTALLATION_SQL[usize::from(!share)])
        .fetch_one(tx)
        .await?;
    let epoch: Vec<u8> = row.try_get("epoch")?;
    Ok(InstallationRow {
        epoch: epoch_of(&epoch)?,
        recovery_mode: row.try_get("recovery_mode")?,
        recovery_entered_at_ms: row
            .try_get("recovery_entered_at_ms")
            .or_else(|e| absent_column(e, || None))?,
    })
}

async fn next_rev(tx: &mut Tx, machine: &str) -> R<i64> {
    let row = query("UPDATE machines SET revision = revision + 1 WHERE id = $1 RETURNING revision")
        .bind(machine)
        .fetch_one(tx)
        .await?;
    Ok(row.try_get(0)?)
}

/// Append an entry at the machine's next revision.
async fn append(tx: &mut Tx, machine: &str, at: i64, e: Entry<'_>) -> R<i64> {
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

/// An approval about to be recorded: by an approver's own act, or under a blanket.
struct Approving<'a> {
    plan: &'a str,
    approver: &'a str,
    blanket: Option<&'a str>,
}

impl SqlStore {
    /// The common part of [`Store::approve`] and [`Store::approve_under_blanket`],
    /// inside their transaction and after their own checks: the recovery-mode gate,
    /// the plan's transition, the self-approval mark (§2, choice §10.4), the timeline
    /// entry and the approval row.
    async fn record_approval(
        &self,
        tx: &mut Tx,
        actor: &Actor,
        machine: &MachineRow,
        inst: &InstallationRow,
        approving: Approving<'_>,
        act: &'static str,
    ) -> R<SelfApproval> {
        let plan_id = approving.plan;
        if inst.recovery_mode
            && machine
                .released_epoch
                .as_deref()
                .map(epoch_of)
                .transpose()?
                != Some(inst.epoch)
        {
            return Err(refused(act, "recovery mode: the scope is not released").into());
        }
        let plan = read_plan(tx, plan_id).await?;
        let state = plan_state_of(&plan.state)?;
        let event = match (state, standing_approval(tx, plan_id).await?) {
            (PlanState::Approved, Some(a)) => PlanEvent::Reapprove {
                standing: a.epoch,
                current: inst.epoch,
            },
            _ => PlanEvent::Approve,
        };
        let next = plan::transition(state, event).map_err(|e| refused(act, e.to_string()))?;
        let to_actor = |kind: Option<(String, Option<String>)>, id: &str| match kind {
            Some((k, _)) if k == "human" => plan::Actor::Human(plan::PrincipalId(id.to_owned())),
            Some((_, responsible)) => plan::Actor::Token {
                token: plan::PrincipalId(id.to_owned()),
                responsible: responsible.map(plan::PrincipalId),
            },
            None => plan::Actor::Token {
                token: plan::PrincipalId(id.to_owned()),
                responsible: None,
            },
        };
        let creator_kind = query("SELECT kind, responsible FROM principals WHERE id = $1")
            .bind(&plan.creator_id)
            .fetch_optional(tx)
            .await?
            .map(|r| -> R<(String, Option<String>)> {
                Ok((r.try_get("kind")?, r.try_get("responsible")?))
            })
            .transpose()?;
        let creator = to_actor(creator_kind, &plan.creator_id);
        let rows = query(
            "SELECT c.principal_id, c.contribution, p.kind, p.responsible \
             FROM release_contributions c LEFT JOIN principals p ON p.id = c.principal_id \
             WHERE c.release_id = $1 ORDER BY c.principal_id, c.contribution",
        )
        .bind(&plan.release_id)
        .fetch_all(tx)
        .await?;
        let mut release = Vec::new();
        for r in &rows {
            let id: String = r.try_get("principal_id")?;
            let kind: Option<String> = r.try_get("kind")?;
            let responsible: Option<String> = r.try_get("responsible")?;
            let contribution: String = r.try_get("contribution")?;
            release.push(plan::ReleaseContribution {
                actor: to_actor(kind.map(|k| (k, responsible)), &id),
                contribution: if contribution == "authored" {
                    plan::Contribution::Authored
                } else {
                    plan::Contribution::Published
                },
            });
        }
        let approver = plan::PrincipalId(approving.approver.to_owned());
        let mark = plan::mark_self_approval(plan::SelfApprovalInput {
            approver: &approver,
            plan_creator: &creator,
            release: &release,
        });
        let now = self.store_time(tx).await?;
        let under = approving
            .blanket
            .map(|b| format!("under blanket approval {b} of {}; ", approving.approver))
            .unwrap_or_default();
        // Under a blanket the approval is its approver's, asked for by the actor.
        let entry = match approving.blanket {
            Some(_) => Entry {
                requested_by: Some(actor.id.clone()),
                ..Entry::by(&Actor::new(approving.approver, Role::Approver), "approval")
            },
            None => Entry::by(actor, "approval"),
        };
        // §6.4, choice §10.16: a revert's approval says it overwrites what nobody saw.
        let unseen = plan
            .bound_drift
            .map(|r| {
                format!(
                    "unseenOverwrite: overwrites the configuration of drift record r{r}, which \
                     no reviewer has seen; "
                )
            })
            .unwrap_or_default();
        let rev = append(
            tx,
            &machine.id,
            now,
            entry.plan(plan_id).detail(format!(
                "{under}{unseen}{}; epoch {}",
                self_approval_name(mark),
                inst.epoch
            )),
        )
        .await?;
        let seq: i64 = query("SELECT COUNT(*) FROM approvals WHERE plan_id = $1")
            .bind(plan_id)
            .fetch_one(tx)
            .await?
            .try_get(0)?;
        // The blanket's column is written only when there is one, so a database not
        // yet migrated to it takes every other approval.
        let sql = if approving.blanket.is_some() {
            "INSERT INTO approvals (plan_id, seq, approver_id, role, epoch, self_approval, \
             revision, blanket_id) VALUES ($1, $2, $3, 'approver', $4, $5, $6, $7)"
        } else {
            "INSERT INTO approvals (plan_id, seq, approver_id, role, epoch, self_approval, \
             revision) VALUES ($1, $2, $3, 'approver', $4, $5, $6)"
        };
        let mut query = query(sql)
            .bind(plan_id)
            .bind(seq + 1)
            .bind(approving.approver)
            .bind(inst.epoch.to_bytes().to_vec())
            .bind(self_approval_name(mark))
            .bind(rev);
        if let Some(b) = approving.blanket {
            query = query.bind(b);
        }
        query.execute(tx).await?;
        set_plan_state(tx, plan_id, next).await?;
        Ok(mark)
    }
}

/// An approval withdrawn from plans in bulk (an identity or a blanket approval
/// revoked): the plan event, and the timeline entry that says why.
struct Withdrawal<'a> {
    actor: &'a Actor,
    kind: &'static str,
    event: PlanEvent,
    why: String,
    now: i64,
}

impl Withdrawal<'_> {
    /// Applies the withdrawal to the plan of row `r` (columns `plan_id`,
    /// `machine_id`, `state`), locking its machine row first unless `machines`
    /// says this transaction holds it.
    async fn record(&self, tx: &mut Tx, machines: &mut Vec<String>, r: &Row) -> R<()> {
        let plan_id: String = r.try_get("plan_id")?;
        let machine_id: String = r.try_get("machine_id")?;
        if !machines.contains(&machine_id) {
            lock_machine(tx, &machine_id).await?;
            machines.push(machine_id.clone());
        }
        let state = plan_state_of(&r.try_get::<String, _>("state")?)?;
        let detail = match plan::transition(state, self.event) {
            Ok(next) => {
                set_plan_state(tx, &plan_id, next).await?;
                format!("{}; plan {state} -> {next}", self.why)
            }
            Err(e) => format!("{}; {e}", self.why),
        };
        append(
            tx,
            &machine_id,
            self.now,
            Entry::by(self.actor, self.kind)
                .plan(&plan_id)
                .detail(detail),
        )
        .await?;
        Ok(())
    }
}

/// The machine rows of cluster `cluster_id`, locked in id order; their ids.
async fn lock_cluster(tx: &mut Tx, cluster_id: &str) -> R<Vec<String>> {
    let rows = query(concat!(
        "SELECT id FROM machines WHERE cluster_id = $1 ORDER BY id",
        " FOR UPDATE"
    ))
    .bind(cluster_id)
    .fetch_all(tx)
    .await?;
    rows.iter()
        .map(|r| Ok(r.try_get::<String, _>(0)?))
        .collect()
}

/// A blanket approval as a transaction reads it.
struct BlanketRow {
    id: String,
    approver: String,
    epoch: Epoch,
}

/// The blanket approval in force for `cluster_id`, read to share: a revocation
/// waits for the reading transaction.
async fn live_blanket(tx: &mut Tx, cluster_id: &str) -> R<Option<BlanketRow>> {
    let row = query(concat!(
        "SELECT id, approver_id, epoch FROM blanket_approvals WHERE cluster_id = $1 AND NOT revoked",
        " FOR SHARE"
    ))
    .bind(cluster_id)
    .fetch_optional(tx)
    .await?;
    row.map(|r| -> R<BlanketRow> {
        let epoch: Vec<u8> = r.try_get("epoch")?;
        Ok(BlanketRow {
            id: r.try_get("id")?,
            approver: r.try_get("approver_id")?,
            epoch: epoch_of(&epoch)?,
        })
    })
    .transpose()
}

async fn read_plan(tx: &mut Tx, id: &str) -> R<PlanRow> {
    let row = query(concat!(
        "SELECT ",
        plan_cols!(),
        " FROM plans WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(tx)
    .await?
    .ok_or_else(|| not_found("plan", id))?;
    Ok(plan_row(&row)?)
}

/// The standing approval, read together with its approver's principal row so that a
/// revocation of either waits for this transaction (FOR SHARE on PostgreSQL).
async fn standing_approval(tx: &mut Tx, plan: &str) -> R<Option<ApprovalRow>> {
    let row = query(concat!(
        "SELECT a.approver_id, a.epoch, a.revision, a.revoked, p.revoked AS identity_revoked \
         FROM approvals a JOIN principals p ON p.id = a.approver_id \
         WHERE a.plan_id = $1 ORDER BY a.seq DESC LIMIT 1",
        " FOR SHARE"
    ))
    .bind(plan)
    .fetch_optional(tx)
    .await?;
    row.map(|r| -> R<ApprovalRow> {
        let epoch: Vec<u8> = r.try_get("epoch")?;
        Ok(ApprovalRow {
            epoch: epoch_of(&epoch)?,
            revision: r.try_get("revision")?,
            revoked: r.try_get("revoked")?,
            identity_revoked: r.try_get("identity_revoked")?,
        })
    })
    .transpose()
}

async fn read_op(tx: &mut Tx, id: &str) -> R<OperationRow> {
    let row = query(concat!(
        "SELECT ",
        op_cols!(),
        " FROM operations WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(tx)
    .await?
    .ok_or_else(|| not_found("operation", id))?;
    op_row(&row)
}

async fn read_attempts(tx: &mut Tx, op: &str) -> R<Vec<AttemptRow>> {
    let rows = query(concat!(
        "SELECT ",
        attempt_cols!(),
        " FROM attempts WHERE operation_id = $1 ORDER BY attempt_no"
    ))
    .bind(op)
    .fetch_all(tx)
    .await?;
    rows.iter().map(attempt_row).collect()
}

async fn observations_after(tx: &mut Tx, machine: &str, basis: i64) -> R<Vec<ObsRow>> {
    let rows = query(concat!(
        "SELECT ",
        obs_cols!(),
        " WHERE s.machine_id = $1 AND s.basis > $2 ORDER BY s.basis"
    ))
    .bind(machine)
    .bind(basis)
    .fetch_all(tx)
    .await?;
    rows.iter().map(obs_row).collect()
}

async fn latest_evidence(
    tx: &mut Tx,
    plan: &PlanRow,
    controller: ControllerId,
    after: i64,
) -> R<Option<ObsRow>> {
    let row = query(concat!(
        "SELECT ",
        obs_cols!(),
        " WHERE s.machine_id = $1 AND s.plan_id = $2 AND s.controller = $3 \
         AND s.purpose = 'evidence' AND s.basis > $4 ORDER BY s.basis DESC LIMIT 1"
    ))
    .bind(&plan.machine_id)
    .bind(&plan.id)
    .bind(controller_bytes(controller))
    .bind(after)
    .fetch_optional(tx)
    .await?;
    row.as_ref().map(obs_row).transpose()
}

async fn latest_check(
    tx: &mut Tx,
    plan: &PlanRow,
    controller: ControllerId,
) -> R<Option<DependencyRow>> {
    let row = query(
        "SELECT access_version, artifact_decrypts FROM dependency_checks \
         WHERE machine_id = $1 AND plan_id = $2 AND controller = $3 \
         ORDER BY revision DESC LIMIT 1",
    )
    .bind(&plan.machine_id)
    .bind(&plan.id)
    .bind(controller_bytes(controller))
    .fetch_optional(tx)
    .await?;
    row.map(|r| -> R<DependencyRow> {
        Ok(DependencyRow {
            access_version: r.try_get("access_version")?,
            artifact_decrypts: r.try_get("artifact_decrypts")?,
        })
    })
    .transpose()
}

/// Which evidence comparison 3 judges: `controller`'s newest evidence for `plan`
/// begun after revision `after` (a retry's last attempt), at store time `now`.
struct Judged<'a> {
    plan: &'a PlanRow,
    controller: ControllerId,
    after: i64,
    retry: bool,
    now: i64,
}

/// Comparison 3 for a commitment or an attempt: reads the evidence, every recorded
/// observation newer than it and the controller's latest use-time check, under the
/// machine row's lock the caller holds, and judges them (`evidence_refusal`).
async fn judge_evidence(
    tx: &mut Tx,
    judged: Judged<'_>,
    approval: Option<&ApprovalRow>,
) -> R<Option<EvidenceRefusal>> {
    let plan = judged.plan;
    let evidence = latest_evidence(tx, plan, judged.controller, judged.after).await?;
    let newer = match &evidence {
        Some(ev) => observations_after(tx, &plan.machine_id, ev.basis).await?,
        None => Vec::new(),
    };
    let check = latest_check(tx, plan, judged.controller).await?;
    Ok(evidence_refusal(
        plan,
        evidence.as_ref(),
        &newer,
        check.as_ref(),
        judged.now,
        judged.retry,
        approval.map(|a| a.revision),
    ))
}

async fn stored_artifact(tx: &mut Tx, plan: &PlanRow) -> R<Option<(String, i64)>> {
    let row = query(
        "SELECT digest, key_version FROM artifacts WHERE release_id = $1 AND machine_id = $2",
    )
    .bind(&plan.release_id)
    .bind(&plan.machine_id)
    .fetch_optional(tx)
    .await?;
    row.map(|r| -> R<(String, i64)> { Ok((r.try_get("digest")?, r.try_get("key_version")?)) })
        .transpose()
}

async fn holder(tx: &mut Tx, column_is_machine: bool, value: &str) -> R<Option<String>> {
    let row = if column_is_machine {
        query(
            "SELECT id FROM operations WHERE machine_id = $1 \
             AND state IN ('committed', 'sending', 'verifying', 'unresolved') LIMIT 1",
        )
        .bind(value)
        .fetch_optional(tx)
        .await?
    } else {
        query(
            "SELECT id FROM operations WHERE rollout_scope = $1 \
             AND state IN ('committed', 'sending', 'verifying', 'unresolved') LIMIT 1",
        )
        .bind(value)
        .fetch_optional(tx)
        .await?
    };
    row.map(|r| -> R<String> { Ok(r.try_get("id")?) })
        .transpose()
}

/// The principal acting, read FOR SHARE: it exists, holds the role, is not revoked.
async fn require_role(tx: &mut Tx, actor: &Actor, allowed: &[Role], act: &'static str) -> R<bool> {
    if !allowed.contains(&actor.role) {
        return Err(refused(
            act,
            format!("the role {} may not do this", role_name(actor.role)),
        )
        .into());
    }
    let row = query(concat!(
        "SELECT p.kind, p.revoked FROM principals p JOIN principal_roles r \
         ON r.principal_id = p.id WHERE p.id = $1 AND r.role = $2",
        " FOR SHARE"
    ))
    .bind(&actor.id)
    .bind(role_name(actor.role))
    .fetch_optional(tx)
    .await?
    .ok_or_else(|| {
        refused(
            act,
            format!(
                "{} does not hold the role {}",
                actor.id,
                role_name(actor.role)
            ),
        )
    })?;
    if row.try_get::<bool, _>("revoked")? {
        return Err(refused(act, format!("the identity {} is revoked", actor.id)).into());
    }
    let kind: String = row.try_get("kind")?;
    Ok(kind == "human")
}

async fn set_op_state(tx: &mut Tx, op: &str, state: OperationState) -> R<()> {
    query("UPDATE operations SET state = $2 WHERE id = $1")
        .bind(op)
        .bind(state.name())
        .execute(tx)
        .await?;
    Ok(())
}

async fn set_plan_state(tx: &mut Tx, plan: &str, state: PlanState) -> R<()> {
    query("UPDATE plans SET state = $2 WHERE id = $1")
        .bind(plan)
        .bind(state.name())
        .execute(tx)
        .await?;
    Ok(())
}

fn records(attempts: &[AttemptRow]) -> Vec<AttemptRecord> {
    attempts
        .iter()
        .map(|a| AttemptRecord {
            response: a.response,
            accounted_by_decision: a.accounted_by_decision,
        })
        .collect()
}

/// Comparison 1 for an operation's plan, as an attempt transaction makes it.
fn authority_now(
    plan: &PlanRow,
    approval: Option<&ApprovalRow>,
    now: i64,
    epoch: Epoch,
    stage: Stage,
) -> Result<(), plan::AuthorityRefusal> {
    plan::check_authority(
        stage,
        &authority_facts(plan, approval),
        InstantMs(u(now)),
        epoch,
    )
}

/// Apply §6.1 and §6.5 to an observation of `machine` at `basis` that read `digest`:
/// the facts are gathered here, the decision is `contract::drift::transition`'s, and
/// its result is written: a record opened (its opening entry is the digest-mismatch
/// alert, choice §10.35), extended with the latest differing digest, or closed as
/// returned. Anything the rules refuse leaves the record as it is.
async fn drift_rules(
    tx: &mut Tx,
    machine: &MachineRow,
    basis: i64,
    digest: &str,
    at: i64,
    actor: Entry<'_>,
    source: drift::DriftSource,
) -> R<()> {
    let Some(applied) = machine.applied_digest.as_deref() else {
        // No Applied: nothing to differ from (a machine awaiting its handover).
        return Ok(());
    };
    let observation = drift::DriftObservation {
        source,
        differs_from_applied: applied != digest,
        baseline_changed_since_basis: machine.baseline_revision > basis,
        higher_basis_digest_read: observations_after(tx, &machine.id, basis)
            .await?
            .iter()
            .any(|o| o.digest.is_some()),
        scope_held_since_basis: scope_held_since(tx, &machine.id, basis).await?,
    };
    let state = if machine.open_drift.is_some() {
        drift::DriftState::Open
    } else {
        drift::DriftState::None
    };
    let Ok(next) = drift::transition(state, drift::DriftEvent::Observed(observation)) else {
        return Ok(());
    };
    match (state, next) {
        (drift::DriftState::None, drift::DriftState::Open) => {
            let rev = append(
                tx,
                &machine.id,
                at,
                Entry {
                    kind: "drift_opened",
                    detail: format!(
                        "digest mismatch: observation basis r{basis} shows digest {digest}; \
                         Applied is {applied}"
                    ),
                    ..actor
                },
            )
            .await?;
            set_open_drift(tx, &machine.id, Some((rev, digest))).await
        }
        (drift::DriftState::Open, drift::DriftState::Open) => {
            let opened = machine.open_drift.unwrap_or_default();
            append(
                tx,
                &machine.id,
                at,
                Entry {
                    kind: "drift_extended",
                    detail: format!(
                        "record r{opened}: observation basis r{basis} shows digest {digest}"
                    ),
                    ..actor
                },
            )
            .await?;
            set_open_drift(tx, &machine.id, Some((opened, digest))).await
        }
        (_, drift::DriftState::Closed(closure)) => {
            let opened = machine.open_drift.unwrap_or_default();
            append(
                tx,
                &machine.id,
                at,
                Entry {
                    kind: "drift_closed",
                    detail: format!(
                        "record r{opened} closed ({}): observation basis r{basis} shows Applied's \
                         digest again",
                        closure_name(closure)
                    ),
                    ..actor
                },
            )
            .await?;
            set_open_drift(tx, &machine.id, None).await
        }
        _ => Ok(()),
    }
}

fn closure_name(closure: drift::Closure) -> &'static str {
    match closure {
        drift::Closure::Adopted => "adopted",
        drift::Closure::Reverted => "reverted",
        drift::Closure::Returned => "returned",
    }
}

/// Whether an operation held or took the machine scope at or after `basis` (§6.1):
/// one holds it now, or an entry naming an operation was appended after the basis.
async fn scope_held_since(tx: &mut Tx, machine: &str, basis: i64) -> R<bool> {
    if holder(tx, true, machine).await?.is_some() {
        return Ok(true);
    }
    let row = query(
        "SELECT revision FROM timeline WHERE machine_id = $1 AND revision > $2 \
         AND operation_id IS NOT NULL LIMIT 1",
    )
    .bind(machine)
    .bind(basis)
    .fetch_optional(tx)
    .await?;
    Ok(row.is_some())
}

/// Record the open drift record (its opening revision and latest differing digest),
/// or clear it.
async fn set_open_drift(tx: &mut Tx, machine: &str, open: Option<(i64, &str)>) -> R<()> {
    query("UPDATE machines SET open_drift = $2, open_drift_digest = $3 WHERE id = $1")
        .bind(machine)
        .bind(open.map(|(rev, _)| rev))
        .bind(open.map(|(_, digest)| digest))
        .execute(tx)
        .await?;
    Ok(())
}

fn commitment_refused(comparison: Comparison, reason: impl Into<String>) -> Fail {
    Fail::Store(StoreError::CommitmentRefused {
        comparison,
        reason: reason.into(),
    })
}

fn attempt_refused(comparison: Comparison, reason: impl Into<String>) -> Fail {
    Fail::Store(StoreError::AttemptRefused {
        comparison,
        reason: reason.into(),
    })
}

impl SqlStore {
    /// The commitment transaction body (§3.2). `digest_seen` receives the evidence's
    /// basis and digest when comparison 3 fails on the digest.
    async fn commitment(
        &self,
        tx: &mut Tx,
        plan_id: &str,
        controller: ControllerId,
        digest_seen: &Mutex<Option<(i64, String)>>,
    ) -> R<Committed> {
        let guards = self.settings.guards;
        let machine_id = read_plan(tx, plan_id).await?.machine_id;
        let machine = lock_machine(tx, &machine_id).await?;
        let inst = installation(tx, true).await?;
        let plan = read_plan(tx, plan_id).await?;
        let approval = standing_approval(tx, plan_id).await?;
        self.hook(HookPoint::CommitmentLocked {
            plan: plan_id.to_owned(),
            controller,
        })
        .await;
        let now = self.store_time(tx).await?;
        // 0: the plan has no operation.
        let existing = query("SELECT id FROM operations WHERE plan_id = $1")
            .bind(plan_id)
            .fetch_optional(tx)
            .await?;
        if existing.is_some() || plan.state == PlanState::Committed.name() {
            return Err(commitment_refused(
                Comparison::PlanHasNoOperation,
                "the plan already has its operation",
            ));
        }
        // 1: authority.
        if guards.approval_in_transaction {
            authority_now(&plan, approval.as_ref(), now, inst.epoch, Stage::Commitment)
                .map_err(|e| commitment_refused(Comparison::Authority, e.to_string()))?;
        }
        // 2: bindings, Desired included.
        let artifact = stored_artifact(tx, &plan).await?;
        if let Some(reason) = bindings_refusal(
            &plan,
            &machine,
            artifact.as_ref().map(|(d, v)| (d.as_str(), *v)),
            true,
        ) {
            return Err(commitment_refused(Comparison::Bindings, reason));
        }
        // 3: evidence.
        let judged = Judged {
            plan: &plan,
            controller,
            after: 0,
            retry: false,
            now,
        };
        if let Some(refusal) = judge_evidence(tx, judged, approval.as_ref()).await? {
            if refusal.missing {
                return Err(Fail::Store(StoreError::EvidenceMissing {
                    reason: refusal.reason,
                }));
            }
            *digest_seen.lock().unwrap_or_else(PoisonError::into_inner) = refusal.digest;
            return Err(commitment_refused(Comparison::Evidence, refusal.reason));
        }
        // 4: machine scope.
        if guards.scope_index
            && let Some(op) = holder(tx, true, &machine_id).await?
        {
            return Err(commitment_refused(
                Comparison::MachineScope,
                format!("operation {op} holds the machine scope"),
            ));
        }
        // 5: rollout slot (limit one).
        if guards.scope_index
            && let Some(op) = holder(tx, false, &plan.rollout_scope).await?
        {
            return Err(commitment_refused(
                Comparison::RolloutSlot,
                format!("operation {op} holds the rollout scope's only slot"),
            ));
        }
        // 6: gate.
        gate::check_gate(Mutation::Commitment, &gate_facts(&machine, &plan, &inst)?)
            .map_err(|e| commitment_refused(Comparison::Gate, e.to_string()))?;
        let facts = TransitionFacts {
            creation: Some(Creation::Commitment),
            ..TransitionFacts::quiet(OperationKind::ApplyConfig, &[])
        };
        operation::check_transition(None, OperationState::Committed, &facts)
            .map_err(|e| commitment_refused(Comparison::PlanHasNoOperation, e.to_string()))?;
        self.hook(HookPoint::CommitmentChecked {
            plan: plan_id.to_owned(),
            controller,
        })
        .await;
        let owner = OwnerToken::at_commitment(controller, inst.epoch);
        let op_id = hex16(super::random_128()?);
        let rev = append(
            tx,
            &machine_id,
            now,
            Entry::token(&owner, "commitment")
                .plan(plan_id)
                .op(&op_id)
                .detail(format!("operation {op_id} committed, generation 1")),
        )
        .await?;
        let inserted = query(
            "INSERT INTO operations (id, plan_id, machine_id, rollout_scope, state, \
             owner_controller, owner_generation, owner_epoch, commit_revision) \
             VALUES ($1, $2, $3, $4, 'committed', $5, 1, $6, $7)",
        )
        .bind(&op_id)
        .bind(plan_id)
        .bind(&machine_id)
        .bind(&plan.rollout_scope)
        .bind(controller_bytes(controller))
        .bind(inst.epoch.to_bytes().to_vec())
        .bind(rev)
        .execute(tx)
        .await;
        if let Err(e) = inserted {
            return Err(match tx.dialect().unique_comparison(&e) {
                Some(c) => commitment_refused(c, format!("the unique index refused: {e}")),
                None => Fail::Db(e),
            });
        }
        set_plan_state(tx, plan_id, PlanState::Committed).await?;
        Ok(Committed {
            operation: op_id,
            owner,
        })
    }

    /// Record a commitment refusal in its own transaction.
    async fn record_commitment_refusal(
        &self,
        plan_id: &str,
        controller: ControllerId,
        refusal: &StoreError,
        digest_seen: Option<(i64, String)>,
    ) -> StoreResult<()> {
        let comparison = refusal
            .comparison()
            .unwrap_or(Comparison::PlanHasNoOperation);
        let reason = match refusal {
            StoreError::CommitmentRefused { reason, .. } => reason.clone(),
            other => other.to_string(),
        };
        let (reason, digest_seen) = (&reason, &digest_seen);
        self.transaction(|tx| {
            Box::pin(async move {
                let plan = read_plan(tx, plan_id).await?;
                let machine = lock_machine(tx, &plan.machine_id).await?;
                let now = self.store_time(tx).await?;
                append(
                    tx,
                    &plan.machine_id,
                    now,
                    Entry::controller(controller, "commitment_refused")
                        .plan(plan_id)
                        .comparison(comparison)
                        .detail(reason.clone()),
                )
                .await?;
                // An expired plan moves to expired.
                if comparison == Comparison::Authority && now >= plan.expires_at_ms {
                    let state = plan_state_of(&plan.state)?;
                    if let Ok(next) = plan::transition(state, PlanEvent::Expire) {
                        set_plan_state(tx, plan_id, next).await?;
                    }
                }
                if let Some((basis, digest)) = &digest_seen {
                    drift_rules(
                        tx,
                        &machine,
                        *basis,
                        digest,
                        now,
                        Entry::controller(controller, "drift").plan(plan_id),
                        drift::DriftSource::RefusedCommitmentEvidence,
                    )
                    .await?;
                }
                Ok(())
            })
        })
        .await
    }

    /// The attempt transaction body (§3.3).
    async fn attempt_tx(&self, tx: &mut Tx, op_id: &str, token: OwnerToken) -> R<CommittedAttempt> {
        let guards = self.settings.guards;
        let machine_id = read_op(tx, op_id).await?.machine_id;
        let machine = lock_machine(tx, &machine_id).await?;
        let inst = installation(tx, true).await?;
        let op = read_op(tx, op_id).await?;
        let plan = read_plan(tx, &op.plan_id).await?;
        let approval = standing_approval(tx, &plan.id).await?;
        self.hook(HookPoint::AttemptLocked {
            operation: op_id.to_owned(),
        })
        .await;
        let now = self.store_time(tx).await?;
        // 1
        authority_now(&plan, approval.as_ref(), now, inst.epoch, Stage::Attempt)
            .map_err(|e| attempt_refused(Comparison::Authority, e.to_string()))?;
        // 2 (without the Desired term)
        let artifact = stored_artifact(tx, &plan).await?;
        if let Some(reason) = bindings_refusal(
            &plan,
            &machine,
            artifact.as_ref().map(|(d, v)| (d.as_str(), *v)),
            false,
        ) {
            return Err(attempt_refused(Comparison::Bindings, reason));
        }
        // 3: a retry needs evidence newer than the last attempt.
        let attempts = read_attempts(tx, op_id).await?;
        let retry = op.state == OperationState::Unresolved;
        let after = if retry {
            attempts.last().map_or(op.commit_revision, |a| a.revision)
        } else {
            0
        };
        let judged = Judged {
            plan: &plan,
            controller: token.controller,
            after,
            retry,
            now,
        };
        if let Some(refusal) = judge_evidence(tx, judged, approval.as_ref()).await? {
            return Err(attempt_refused(Comparison::Evidence, refusal.reason));
        }
        // 6
        gate::check_gate(Mutation::Attempt, &gate_facts(&machine, &plan, &inst)?)
            .map_err(|e| attempt_refused(Comparison::Gate, e.to_string()))?;
        // 7, 8, 9 inside the update that records the attempt.
        let rev = append(
            tx,
            &machine_id,
            now,
            Entry::token(&token, "attempt").plan(&plan.id).op(op_id),
        )
        .await?;
        let updated = if guards.ownership_fence {
            query(
                "UPDATE operations SET state = 'sending', attempts = attempts + 1, \
                 retry_revision = NULL, retry_controller = NULL, retry_generation = NULL, \
                 retry_epoch = NULL \
                 WHERE id = $1 AND owner_controller = $2 AND owner_generation = $3 \
                 AND owner_epoch = $4 AND owner_epoch = $5 \
                 AND (state = 'committed' OR (state = 'unresolved' \
                      AND retry_revision IS NOT NULL AND retry_controller = $2 \
                      AND retry_generation = $3 AND retry_epoch = $4 \
                      AND (last_fact_revision IS NULL OR last_fact_revision <= retry_revision))) \
                 AND attempts < $6 \
                 RETURNING attempts",
            )
            .bind(op_id)
            .bind(controller_bytes(token.controller))
            .bind(i(token.generation))
            .bind(token.epoch.to_bytes().to_vec())
            .bind(inst.epoch.to_bytes().to_vec())
            .bind(plan.max_attempts)
            .fetch_optional(tx)
            .await?
        } else {
            query(
                "UPDATE operations SET state = 'sending', attempts = attempts + 1 \
                 WHERE id = $1 AND state IN ('committed', 'unresolved') AND attempts < $2 \
                 RETURNING attempts",
            )
            .bind(op_id)
            .bind(plan.max_attempts)
            .fetch_optional(tx)
            .await?
        };
        let Some(row) = updated else {
            let facts = AdmissionFacts {
                state: op.state,
                owner: op.owner,
                presented: token,
                current_epoch: inst.epoch,
                retry: op
                    .retry_revision
                    .zip(op.retry_by)
                    .map(|(r, by)| RetryBasis {
                        classified_at: Revision(u(r)),
                        classified_by: by,
                        latest_fact: op.last_fact_revision.map(|l| Revision(u(l))),
                    }),
                attempts_recorded: u32::try_from(op.attempts).unwrap_or(u32::MAX),
                max_attempts: u32::try_from(plan.max_attempts).unwrap_or(u32::MAX),
            };
            return Err(match operation::check_admission(&facts) {
                Err(refusal) => attempt_refused(refusal.comparison().into(), refusal.to_string()),
                Ok(()) => {
                    attempt_refused(Comparison::Ownership, "the ownership update matched no row")
                }
            });
        };
        let attempt_no: i64 = row.try_get(0)?;
        let transport = plan.transport_deadline_ms;
        query(
            "INSERT INTO attempts (operation_id, attempt_no, revision, owner_controller, \
             owner_generation, owner_epoch, route, transport_deadline_ms, \
             verification_deadline_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(op_id)
        .bind(attempt_no)
        .bind(rev)
        .bind(controller_bytes(token.controller))
        .bind(i(token.generation))
        .bind(token.epoch.to_bytes().to_vec())
        .bind(&plan.route)
        .bind(now.saturating_add(transport))
        .bind(now.saturating_add(plan.verification_deadline_ms))
        .execute(tx)
        .await?;
        let digest = digest_of(&plan.artifact_digest)?;
        Ok(CommittedAttempt::new(
            op_id.to_owned(),
            u32::try_from(attempt_no).unwrap_or(u32::MAX),
            machine_id,
            digest,
            std::time::Duration::from_millis(u(transport)),
        ))
    }

    /// Record an attempt refusal in its own transaction and settle the operation as
    /// choice §10.30 says.
    async fn record_attempt_refusal(
        &self,
        op_id: &str,
        token: OwnerToken,
        comparison: Comparison,
        reason: &str,
    ) -> StoreResult<()> {
        self.transaction(|tx| {
            Box::pin(async move {
                let machine_id = read_op(tx, op_id).await?.machine_id;
                lock_machine(tx, &machine_id).await?;
                let inst = installation(tx, true).await?;
                let op = read_op(tx, op_id).await?;
                let plan = read_plan(tx, &op.plan_id).await?;
                let approval = standing_approval(tx, &plan.id).await?;
                let now = self.store_time(tx).await?;
                append(
                    tx,
                    &machine_id,
                    now,
                    Entry::token(&token, "attempt_refused")
                        .plan(&plan.id)
                        .op(op_id)
                        .comparison(comparison)
                        .detail(reason.to_owned()),
                )
                .await?;
                // 1, 2, 3 and 6, made by the owner, settle the operation; 7, 8 and 9 only
                // record the refusal.
                let by_owner = op.owner == token;
                let Some(kind) = comparison
                    .attempt()
                    .filter(|c| c.unresolves_committed() && by_owner)
                else {
                    return Ok(());
                };
                let attempts = records(&read_attempts(tx, op_id).await?);
                let mut state = op.state;
                if state == OperationState::Committed {
                    let facts = TransitionFacts {
                        attempt_transaction: AttemptTransaction::Refused {
                            comparison: kind,
                            by_owner: true,
                        },
                        ..TransitionFacts::quiet(OperationKind::ApplyConfig, &attempts)
                    };
                    if operation::check_transition(Some(state), OperationState::Unresolved, &facts)
                        .is_ok()
                    {
                        state = OperationState::Unresolved;
                        set_op_state(tx, op_id, state).await?;
                        append(
                            tx,
                            &machine_id,
                            now,
                            Entry::token(&token, "state_changed")
                                .op(op_id)
                                .detail(format!(
                                    "committed -> unresolved after comparison {comparison}"
                                )),
                        )
                        .await?;
                    }
                }
                let withdrawal =
                    authority_now(&plan, approval.as_ref(), now, inst.epoch, Stage::Attempt)
                        .err()
                        .and_then(|e| e.withdrawal());
                if state == OperationState::Unresolved && attempts.is_empty() {
                    let facts = TransitionFacts {
                        withdrawal,
                        ..TransitionFacts::quiet(OperationKind::ApplyConfig, &attempts)
                    };
                    if operation::check_transition(Some(state), OperationState::Cancelled, &facts)
                        .is_ok()
                    {
                        set_op_state(tx, op_id, OperationState::Cancelled).await?;
                        append(
                            tx,
                            &machine_id,
                            now,
                            Entry::token(&token, "state_changed")
                                .op(op_id)
                                .detail(format!(
                                    "unresolved -> cancelled: {}",
                                    withdrawal.map_or(String::new(), |w| w.to_string())
                                )),
                        )
                        .await?;
                    }
                }
                Ok(())
            })
        })
        .await
    }
}

fn hex16(bytes: [u8; 16]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn plan_view(p: &PlanRow, operation: Option<String>) -> StoreResult<PlanView> {
    Ok(PlanView {
        id: p.id.clone(),
        machine: p.machine_id.clone(),
        state: plan_state_of(&p.state)?,
        operation,
        artifact_digest: digest_of(&p.artifact_digest)?,
        baseline_revision: Revision(u(p.baseline_revision)),
        transport_deadline: SpanMs(u(p.transport_deadline_ms)),
        verification_deadline: SpanMs(u(p.verification_deadline_ms)),
        bound_drift: p.bound_drift.map(|r| Revision(u(r))),
    })
}

fn machine_view(m: &MachineRow) -> StoreResult<MachineView> {
    let identity = match m.identity_kind.as_str() {
        "node_id" => IdentityKey::NodeId(m.identity_value.clone()),
        "smbios_uuid" => IdentityKey::SmbiosUuid(m.identity_value.clone()),
        other => return Err(db_err(format!("unknown identity kind {other:?}"))),
    };
    Ok(MachineView {
        id: m.id.clone(),
        desired_release: m.desired_release.clone(),
        applied_release: m.applied_release.clone(),
        applied_digest: m.applied_digest.as_deref().map(digest_of).transpose()?,
        baseline_revision: Revision(u(m.baseline_revision)),
        assignment_revision: u(m.assignment_revision),
        frozen: m.frozen,
        open_drift: m.open_drift.map(|r| Revision(u(r))),
        revision: Revision(u(m.revision)),
        endpoint: m.endpoint.clone(),
        identity,
        cluster_id: m.cluster_id.clone(),
        scope: scope_of(&m.scope_state)?,
    })
}

/// The longest node message an attempt keeps; longer ones are cut at a character
/// boundary.
const RESPONSE_TEXT_LIMIT: usize = 2048;

fn bounded_text(text: Option<String>) -> Option<String> {
    text.map(|t| {
        if t.len() <= RESPONSE_TEXT_LIMIT {
            return t;
        }
        let mut end = RESPONSE_TEXT_LIMIT;
        while !t.is_char_boundary(end) {
            end -= 1;
        }
        t[..end].to_owned()
    })
}

/// An artifact row to insert: the binding's name and identity are `None` when the
/// publisher gave only the key's identifier.
struct ArtifactInsert<'a> {
    key_provider: &'a str,
    key_id: &'a str,
    key_name: Option<&'a str>,
    key_identity: Option<&'a str>,
    key_version: i64,
    ciphertext: &'a [u8],
    digest: crate::digest::Digest,
}

fn op_view(o: &OperationRow) -> OperationView {
    OperationView {
        id: o.id.clone(),
        plan: o.plan_id.clone(),
        machine: o.machine_id.clone(),
        state: o.state,
        owner: o.owner,
        attempts: u32::try_from(o.attempts).unwrap_or(u32::MAX),
    }
}

/// `(table, query)` for each table, with the query reading all its rows.
#[cfg(feature = "controls")]
macro_rules! dumped {
    ($($table:ident),* $(,)?) => {
        [$((stringify!($table), concat!("SELECT * FROM ", stringify!($table)))),*]
    };
}

/// The tables, in the order a dump lists them, with the query that reads each.
#[cfg(feature = "controls")]
const DUMPED: [(&str, &str); 15] = dumped!(
    installation,
    principals,
    principal_roles,
    machines,
    releases,
    release_contributions,
    artifacts,
    plans,
    approvals,
    operations,
    attempts,
    observation_starts,
    observations,
    dependency_checks,
    timeline,
);

/// Decode any column as text for a dump.
#[cfg(feature = "controls")]
fn cell_text(row: &Row, idx: usize) -> String {
    if let Ok(v) = row.try_get::<Option<String>, _>(idx) {
        return v.unwrap_or_default();
    }
    if let Ok(v) = row.try_get::<Option<i64>, _>(idx) {
        return v.map(|v| v.to_string()).unwrap_or_default();
    }
    if let Ok(v) = row.try_get::<Option<Vec<u8>>, _>(idx) {
        return v
            .map(|b| {
                format!(
                    "{} {}",
                    String::from_utf8_lossy(&b),
                    b.iter().map(|x| format!("{x:02x}")).collect::<String>()
                )
            })
            .unwrap_or_default();
    }
    if let Ok(v) = row.try_get::<Option<bool>, _>(idx) {
        return v.map(|v| v.to_string()).unwrap_or_default();
    }
    if let Ok(v) = row.try_get::<Option<i16>, _>(idx) {
        return v.map(|v| v.to_string()).unwrap_or_default();
    }
    String::from("?")
}

impl SqlStore {
    async fn register_principal(&self, spec: PrincipalSpec) -> StoreResult<()> {
        let (kind, responsible) = match &spec.kind {
            PrincipalKind::Human => ("human", None),
            PrincipalKind::Token { responsible } => ("token", responsible.clone()),
        };
        if kind == "token" && spec.roles.contains(&Role::Approver) {
            return Err(refused(
                "registering a principal",
                "a token never holds approver",
            ));
        }
        if kind == "human" && spec.roles.contains(&Role::Automation) {
            return Err(refused(
                "registering a principal",
                "automation is a token's role",
            ));
        }
        let (spec, responsible) = (&spec, &responsible);
        self.transaction(|tx| {
            Box::pin(async move {
                let exists = query("SELECT id FROM principals WHERE id = $1")
                    .bind(&spec.id)
                    .fetch_optional(tx)
                    .await?;
                if exists.is_some() {
                    return Err(StoreError::Exists {
                        what: "principal",
                        id: spec.id.clone(),
                    }
                    .into());
                }
                query("INSERT INTO principals (id, kind, responsible) VALUES ($1, $2, $3)")
                    .bind(&spec.id)
                    .bind(kind)
                    .bind(responsible)
                    .execute(tx)
                    .await?;
                for role in &spec.roles {
                    query("INSERT INTO principal_roles (principal_id, role) VALUES ($1, $2)")
                        .bind(&spec.id)
                        .bind(role_name(*role))
                        .execute(tx)
                        .await?;
                }
                Ok(())
            })
        })
        .await
    }

    async fn create_machine(&self, actor: &Actor, spec: MachineSpec) -> StoreResult<()> {
        let spec = &spec;
        self.transaction(|tx| Box::pin(async move {
            require_role(tx, actor, &[Role::Author, Role::Publisher], "adding a machine").await?;
            let exists = query("SELECT id FROM machines WHERE id = $1")
                .bind(&spec.id)
                .fetch_optional(tx)
                .await?;
            if exists.is_some() {
                return Err(StoreError::Exists { what: "machine", id: spec.id.clone() }.into());
            }
            let (kind, value) = match &spec.identity {
                IdentityKey::SmbiosUuid(v) => ("smbios_uuid", v),
                IdentityKey::NodeId(v) => ("node_id", v),
            };
            query(
                "INSERT INTO machines (id, identity_kind, identity_value, cluster_id, endpoint, \
                 rollout_scope, talos_minor) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(&spec.id)
            .bind(kind)
            .bind(value)
            .bind(&spec.cluster_id)
            .bind(&spec.endpoint)
            .bind(&spec.rollout_scope)
            .bind(&spec.talos_minor)
            .execute(tx)
            .await?;
            let now = self.store_time(tx).await?;
            append(tx, &spec.id, now, Entry::by(actor, "machine_created")
                .detail(format!("identity key {kind}, cluster {}", spec.cluster_id))).await?;
            // §7.4: a machine inventoried during recovery starts pre-restore
            // unaccounted, like every scope at entry.
            let inst = installation(tx, true).await?;
            if inst.recovery_mode {
                query("UPDATE machines SET scope_state = $2 WHERE id = $1")
                    .bind(&spec.id)
                    .bind(scope_text(recovery::inventoried(true)))
                    .execute(tx)
                    .await?;
            }
            if let Some(d) = spec.adopted_digest {
                let rev = append(tx, &spec.id, now, Entry::by(actor, "applied_changed")
                    .detail(format!("handed over at digest {d} (inventory adoption record)"))).await?;
                query(
                    "UPDATE machines SET applied_digest = $2, applied_source = 'inventory adoption', \
                     baseline_revision = $3 WHERE id = $1",
                )
                .bind(&spec.id)
                .bind(d.to_hex())
                .bind(rev)
                .execute(tx)
                .await?;
            }
            Ok(())
        })).await
    }

    async fn publish_release(&self, actor: &Actor, spec: ReleaseSpec) -> StoreResult<()> {
        let artifacts = spec
            .artifacts
            .iter()
            .map(|(m, a)| {
                (
                    m.as_str(),
                    ArtifactInsert {
                        key_provider: &a.key_provider,
                        key_id: &a.key_id,
                        key_name: None,
                        key_identity: None,
                        key_version: i(a.key_version),
                        ciphertext: &a.ciphertext,
                        digest: a.digest,
                    },
                )
            })
            .collect();
        self.publish(actor, &spec.id, &spec.contributions, artifacts)
            .await
    }

    async fn create_plan(&self, actor: &Actor, spec: PlanSpec) -> StoreResult<PlanView> {
        const ACT: &str = "creating a plan";
        if spec.transport_deadline > spec.verification_deadline {
            return Err(refused(
                ACT,
                "the transport deadline exceeds the verification deadline",
            ));
        }
        if spec.max_attempts == 0 {
            return Err(refused(ACT, "the attempt budget must be at least one"));
        }
        let ceiling = self.settings.max_transport_deadline;
        if spec.transport_deadline > ceiling {
            return Err(refused(
                ACT,
                format!(
                    "the transport deadline {} exceeds the deployment's maximum of {ceiling} \
                     (§7.3 step 1)",
                    spec.transport_deadline
                ),
            ));
        }
        let spec = &spec;
        self.transaction(|tx| {
            Box::pin(async move {
                let machine = lock_machine(tx, &spec.machine).await?;
                let inst = installation(tx, true).await?;
                require_role(tx, actor, &[Role::Publisher], ACT).await?;
                if inst.recovery_mode
                    && machine
                        .released_epoch
                        .as_deref()
                        .map(epoch_of)
                        .transpose()?
                        != Some(inst.epoch)
                {
                    return Err(refused(ACT, "recovery mode: the scope is not released").into());
                }
                if machine.desired_release.as_deref() != Some(spec.release.as_str()) {
                    return Err(refused(
                        ACT,
                        "an apply-config plan must target the machine's Desired release",
                    )
                    .into());
                }
                let art = query(
                    "SELECT key_provider, key_id, key_version, digest FROM artifacts \
                 WHERE release_id = $1 AND machine_id = $2",
                )
                .bind(&spec.release)
                .bind(&spec.machine)
                .fetch_optional(tx)
                .await?
                .ok_or_else(|| refused(ACT, "the release has no artifact for this machine"))?;
                let (pre_dispatch, bound_drift) = if spec.revert {
                    match (&machine.open_drift, &machine.open_drift_digest) {
                        (Some(r), Some(d)) => (d.clone(), Some(*r)),
                        _ => return Err(refused(ACT, "a revert needs an open drift record").into()),
                    }
                } else {
                    match &machine.applied_digest {
                        Some(d) => (d.clone(), None),
                        None => {
                            return Err(refused(ACT, "the machine has no accepted baseline").into());
                        }
                    }
                };
                let exists = query("SELECT id FROM plans WHERE id = $1")
                    .bind(&spec.id)
                    .fetch_optional(tx)
                    .await?;
                if exists.is_some() {
                    return Err(StoreError::Exists {
                        what: "plan",
                        id: spec.id.clone(),
                    }
                    .into());
                }
                let now = self.store_time(tx).await?;
                append(
                    tx,
                    &spec.machine,
                    now,
                    Entry::by(actor, "plan_created")
                        .plan(&spec.id)
                        .detail(format!(
                            "release {}, baseline r{}",
                            spec.release, machine.baseline_revision
                        )),
                )
                .await?;
                query(
                    "INSERT INTO plans (id, machine_id, release_id, artifact_digest, key_provider, \
                 key_id, key_version, identity_kind, identity_value, cluster_id, \
                 assignment_revision, desired_release, baseline_revision, pre_dispatch_digest, \
                 bound_drift, route, talos_minor, max_evidence_age_ms, transport_deadline_ms, \
                 verification_deadline_ms, max_attempts, rollout_scope, expires_at_ms, \
                 creator_id, creator_role, state) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, \
                 $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, \
                 'proposed')",
                )
                .bind(&spec.id)
                .bind(&spec.machine)
                .bind(&spec.release)
                .bind(art.try_get::<String, _>("digest")?)
                .bind(art.try_get::<String, _>("key_provider")?)
                .bind(art.try_get::<String, _>("key_id")?)
                .bind(art.try_get::<i64, _>("key_version")?)
                .bind(&machine.identity_kind)
                .bind(&machine.identity_value)
                .bind(&machine.cluster_id)
                .bind(machine.assignment_revision)
                .bind(&spec.release)
                .bind(machine.baseline_revision)
                .bind(&pre_dispatch)
                .bind(bound_drift)
                .bind(&machine.endpoint)
                .bind(&machine.talos_minor)
                .bind(i(spec.max_evidence_age.0))
                .bind(i(spec.transport_deadline.0))
                .bind(i(spec.verification_deadline.0))
                .bind(i64::from(spec.max_attempts))
                .bind(&machine.rollout_scope)
                .bind(i(spec.expires_at.0))
                .bind(&actor.id)
                .bind(role_name(actor.role))
                .execute(tx)
                .await?;
                let plan = read_plan(tx, &spec.id).await?;
                Ok(plan_view(&plan, None)?)
            })
        })
        .await
    }

    async fn approve(&self, actor: &Actor, plan_id: &str) -> StoreResult<SelfApproval> {
        const ACT: &str = "approving";
        self.transaction(|tx| {
            Box::pin(async move {
                let machine_id = read_plan(tx, plan_id).await?.machine_id;
                let machine = lock_machine(tx, &machine_id).await?;
                let inst = installation(tx, true).await?;
                let human = require_role(tx, actor, &[Role::Approver], ACT).await?;
                if !human {
                    return Err(refused(ACT, "automation is never an approver").into());
                }
                let approval = Approving {
                    plan: plan_id,
                    approver: &actor.id,
                    blanket: None,
                };
                self.record_approval(tx, actor, &machine, &inst, approval, ACT)
                    .await
            })
        })
        .await
    }

    async fn grant_blanket_approval(
        &self,
        actor: &Actor,
        cluster_id: &str,
        reason: &str,
    ) -> StoreResult<BlanketApproval> {
        const ACT: &str = "granting a blanket approval";
        self.transaction(|tx| Box::pin(async move {
            // The machine rows first, in the order every other transaction takes them.
            let machines = lock_cluster(tx, cluster_id).await?;
            let inst = installation(tx, true).await?;
            let human = require_role(tx, actor, &[Role::Approver], ACT).await?;
            if !human {
                return Err(refused(ACT, "automation is never an approver").into());
            }
            if reason.trim().is_empty() {
                return Err(refused(ACT, "a reason is required").into());
            }
            if inst.recovery_mode {
                return Err(refused(ACT, "recovery mode is in effect").into());
            }
            let now = self.store_time(tx).await?;
            if let Some(live) = live_blanket(tx, cluster_id).await? {
                if live.epoch == inst.epoch {
                    return Err(refused(ACT, format!("blanket approval {} is already in force for cluster {cluster_id}", live.id)).into());
                }
                // Granted in an earlier epoch, it holds no longer: this grant
                // replaces it on the record.
                query("UPDATE blanket_approvals SET revoked = TRUE, revoked_by = $2, revoked_ms = $3 WHERE id = $1")
                    .bind(&live.id)
                    .bind(&actor.id)
                    .bind(now)
                    .execute(tx)
                    .await?;
            }
            let id = format!("blanket-{}", hex16(super::random_128()?));
            query(
                "INSERT INTO blanket_approvals (id, cluster_id, approver_id, reason, epoch, granted_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&id)
            .bind(cluster_id)
            .bind(&actor.id)
            .bind(reason)
            .bind(inst.epoch.to_bytes().to_vec())
            .bind(now)
            .execute(tx)
            .await?;
            for m in &machines {
                append(tx, m, now, Entry::by(actor, "blanket_granted")
                    .detail(format!("blanket approval {id} for cluster {cluster_id}; epoch {}", inst.epoch))).await?;
            }
            Ok(BlanketApproval {
                id,
                cluster_id: cluster_id.to_owned(),
                approver: actor.id.clone(),
                reason: reason.to_owned(),
                granted_at: InstantMs(u(now)),
                current_epoch: true,
                revoked: None,
            })
        })).await
    }

    async fn revoke_blanket_approval(&self, actor: &Actor, blanket_id: &str) -> StoreResult<()> {
        const ACT: &str = "revoking a blanket approval";
        self.transaction(|tx| Box::pin(async move {
            let cluster_id: String = query("SELECT cluster_id FROM blanket_approvals WHERE id = $1")
                .bind(blanket_id)
                .fetch_optional(tx)
                .await?
                .ok_or_else(|| not_found("blanket approval", blanket_id))?
                .try_get(0)?;
            // Every machine row of the cluster first: an approval under the blanket
            // locks its machine's row before it reads the blanket, so none is made
            // while this runs.
            let cluster = lock_cluster(tx, &cluster_id).await?;
            let mut machines = cluster.clone();
            require_role(tx, actor, &[Role::Approver, Role::RecoveryAdmin], ACT).await?;
            self.hook(HookPoint::BlanketRevocationLocked { blanket: blanket_id.to_owned() }).await;
            let row = query(concat!("SELECT revoked FROM blanket_approvals WHERE id = $1", " FOR UPDATE"))
                .bind(blanket_id)
                .fetch_one(tx)
                .await?;
            if row.try_get::<bool, _>("revoked")? {
                return Err(refused(ACT, "the blanket approval is already revoked").into());
            }
            let now = self.store_time(tx).await?;
            query("UPDATE blanket_approvals SET revoked = TRUE, revoked_by = $2, revoked_ms = $3 WHERE id = $1")
                .bind(blanket_id)
                .bind(&actor.id)
                .bind(now)
                .execute(tx)
                .await?;
            let plans = query(
                "SELECT a.plan_id, a.seq, p.machine_id, p.state FROM approvals a JOIN plans p ON p.id = a.plan_id \
                 WHERE a.blanket_id = $1 AND NOT a.revoked ORDER BY a.plan_id",
            )
            .bind(blanket_id)
            .fetch_all(tx)
            .await?;
            let withdrawal = Withdrawal {
                actor,
                kind: "approval_revoked",
                event: PlanEvent::RevokeApproval,
                why: format!("blanket approval {blanket_id} revoked"),
                now,
            };
            for r in &plans {
                let plan_id: String = r.try_get("plan_id")?;
                query("UPDATE approvals SET revoked = TRUE WHERE plan_id = $1 AND seq = $2")
                    .bind(&plan_id)
                    .bind(r.try_get::<i64, _>("seq")?)
                    .execute(tx)
                    .await?;
                // A machine moved to another cluster after its approval is locked here.
                withdrawal.record(tx, &mut machines, r).await?;
            }
            for m in &cluster {
                append(tx, m, now, Entry::by(actor, "blanket_revoked")
                    .detail(format!("blanket approval {blanket_id} for cluster {cluster_id}"))).await?;
            }
            Ok(())
        })).await
    }

    async fn approve_under_blanket(
        &self,
        actor: &Actor,
        plan_id: &str,
    ) -> StoreResult<SelfApproval> {
        const ACT: &str = "approving under a blanket approval";
        self.transaction(|tx| Box::pin(async move {
            let machine_id = read_plan(tx, plan_id).await?.machine_id;
            let machine = lock_machine(tx, &machine_id).await?;
            let inst = installation(tx, true).await?;
            require_role(tx, actor, &[Role::Publisher, Role::Automation], ACT).await?;
            let blanket = live_blanket(tx, &machine.cluster_id).await?.ok_or_else(|| {
                refused(ACT, format!("no blanket approval is in force for cluster {}; an approver grants one, or the plan waits for an approver", machine.cluster_id))
            })?;
            if blanket.epoch != inst.epoch {
                return Err(refused(ACT, format!("blanket approval {} was granted in another epoch; an approver grants it again", blanket.id)).into());
            }
            // The approver's principal row, read to share as for any acting identity:
            // revoking it waits for this transaction, and a revoked identity, or one
            // no longer an approver, approves nothing.
            require_role(tx, &Actor::new(blanket.approver.clone(), Role::Approver), &[Role::Approver], ACT).await?;
            let approval = Approving { plan: plan_id, approver: &blanket.approver, blanket: Some(&blanket.id) };
            self.record_approval(tx, actor, &machine, &inst, approval, ACT).await
        })).await
    }

    async fn blanket_approvals(&self) -> StoreResult<Vec<BlanketApproval>> {
        self.transaction(|tx| Box::pin(async move {
            let inst = installation(tx, true).await?;
            let rows = query(
                "SELECT id, cluster_id, approver_id, reason, epoch, granted_ms, revoked, revoked_by, revoked_ms \
                 FROM blanket_approvals ORDER BY granted_ms, id",
            )
            .fetch_all(tx)
            .await?;
            let mut out = Vec::new();
            for r in &rows {
                let epoch: Vec<u8> = r.try_get("epoch")?;
                let revoked = if r.try_get::<bool, _>("revoked")? {
                    let by: Option<String> = r.try_get("revoked_by")?;
                    let at: Option<i64> = r.try_get("revoked_ms")?;
                    Some((by.unwrap_or_default(), InstantMs(u(at.unwrap_or_default()))))
                } else {
                    None
                };
                out.push(BlanketApproval {
                    id: r.try_get("id")?,
                    cluster_id: r.try_get("cluster_id")?,
                    approver: r.try_get("approver_id")?,
                    reason: r.try_get("reason")?,
                    granted_at: InstantMs(u(r.try_get("granted_ms")?)),
                    current_epoch: epoch_of(&epoch)? == inst.epoch,
                    revoked,
                });
            }
            Ok(out)
        })).await
    }

    async fn revoke_approval(&self, actor: &Actor, plan_id: &str) -> StoreResult<()> {
        const ACT: &str = "revoking an approval";
        self.transaction(|tx| {
            Box::pin(async move {
                let machine_id = read_plan(tx, plan_id).await?.machine_id;
                // The machine row first, then the approval (the order of §3.2's locks).
                lock_machine(tx, &machine_id).await?;
                require_role(tx, actor, &[Role::Approver, Role::RecoveryAdmin], ACT).await?;
                let row = query(concat!(
                "SELECT seq, revoked FROM approvals WHERE plan_id = $1 ORDER BY seq DESC LIMIT 1",
                " FOR UPDATE"
            ))
            .bind(plan_id)
            .fetch_optional(tx)
            .await?
            .ok_or_else(|| refused(ACT, "the plan has no approval"))?;
                if row.try_get::<bool, _>("revoked")? {
                    return Err(refused(ACT, "the approval is already revoked").into());
                }
                let seq: i64 = row.try_get("seq")?;
                query("UPDATE approvals SET revoked = TRUE WHERE plan_id = $1 AND seq = $2")
                    .bind(plan_id)
                    .bind(seq)
                    .execute(tx)
                    .await?;
                let plan = read_plan(tx, plan_id).await?;
                let state = plan_state_of(&plan.state)?;
                let detail = match plan::transition(state, PlanEvent::RevokeApproval) {
                    Ok(next) => {
                        set_plan_state(tx, plan_id, next).await?;
                        format!("plan {state} -> {next}")
                    }
                    Err(e) => e.to_string(),
                };
                let now = self.store_time(tx).await?;
                append(
                    tx,
                    &machine_id,
                    now,
                    Entry::by(actor, "approval_revoked")
                        .plan(plan_id)
                        .detail(detail),
                )
                .await?;
                Ok(())
            })
        })
        .await
    }

    async fn revoke_identity(&self, actor: &Actor, principal: &str) -> StoreResult<()> {
        const ACT: &str = "revoking an identity";
        self.transaction(|tx| {
            Box::pin(async move {
                // Machines first, in a fixed order, as every commitment locks them; then
                // the principal row.
                let rows = query(
                "SELECT DISTINCT p.machine_id FROM approvals a JOIN plans p ON p.id = a.plan_id \
                 WHERE a.approver_id = $1 ORDER BY p.machine_id",
            )
            .bind(principal)
            .fetch_all(tx)
            .await?;
                let mut machines = Vec::new();
                for r in &rows {
                    let m: String = r.try_get(0)?;
                    lock_machine(tx, &m).await?;
                    machines.push(m);
                }
                require_role(tx, actor, &[Role::RecoveryAdmin], ACT).await?;
                let row = query(concat!(
                    "SELECT revoked FROM principals WHERE id = $1",
                    " FOR UPDATE"
                ))
                .bind(principal)
                .fetch_optional(tx)
                .await?
                .ok_or_else(|| not_found("principal", principal))?;
                if row.try_get::<bool, _>("revoked")? {
                    return Err(refused(ACT, "the identity is already revoked").into());
                }
                query("UPDATE principals SET revoked = TRUE WHERE id = $1")
                    .bind(principal)
                    .execute(tx)
                    .await?;
                let now = self.store_time(tx).await?;
                // Its blanket approvals end with it (their approvals are among the
                // approvals revoked below).
                query(
                    "UPDATE blanket_approvals SET revoked = TRUE, revoked_by = $2, revoked_ms = $3 \
                 WHERE approver_id = $1 AND NOT revoked",
                )
                .bind(principal)
                .bind(&actor.id)
                .bind(now)
                .execute(tx)
                .await?;
                let plans = query(
                    "SELECT DISTINCT a.plan_id, p.machine_id, p.state FROM approvals a \
                 JOIN plans p ON p.id = a.plan_id WHERE a.approver_id = $1 ORDER BY a.plan_id",
                )
                .bind(principal)
                .fetch_all(tx)
                .await?;
                let withdrawal = Withdrawal {
                    actor,
                    kind: "identity_revoked",
                    event: PlanEvent::RevokeApproverIdentity,
                    why: format!("identity {principal} revoked"),
                    now,
                };
                for r in &plans {
                    withdrawal.record(tx, &mut machines, r).await?;
                }
                Ok(())
            })
        })
        .await
    }

    async fn cancel_plan(&self, actor: &Actor, plan_id: &str) -> StoreResult<()> {
        const ACT: &str = "cancelling a plan";
        self.transaction(|tx| {
            Box::pin(async move {
                let machine_id = read_plan(tx, plan_id).await?.machine_id;
                lock_machine(tx, &machine_id).await?;
                let plan = read_plan(tx, plan_id).await?;
                let allowed: &[Role] = if plan.creator_id == actor.id {
                    &[
                        Role::Author,
                        Role::Publisher,
                        Role::Approver,
                        Role::RecoveryAdmin,
                        Role::Automation,
                    ]
                } else {
                    &[Role::Approver, Role::RecoveryAdmin]
                };
                require_role(tx, actor, allowed, ACT).await?;
                if plan.cancelled {
                    return Err(refused(ACT, "the plan is already cancelled").into());
                }
                let state = plan_state_of(&plan.state)?;
                let detail = match plan::transition(state, PlanEvent::Cancel) {
                    Ok(next) => {
                        set_plan_state(tx, plan_id, next).await?;
                        format!("plan {state} -> {next}")
                    }
                    Err(plan::PlanRefusal::AfterCommitment { .. }) => {
                        "recorded against the committed plan".to_owned()
                    }
                    Err(e) => return Err(refused(ACT, e.to_string()).into()),
                };
                query("UPDATE plans SET cancelled = TRUE WHERE id = $1")
                    .bind(plan_id)
                    .execute(tx)
                    .await?;
                let now = self.store_time(tx).await?;
                append(
                    tx,
                    &machine_id,
                    now,
                    Entry::by(actor, "plan_cancelled")
                        .plan(plan_id)
                        .detail(detail),
                )
                .await?;
                Ok(())
            })
        })
        .await
    }

    async fn preflight(&self, plan_id: &str) -> StoreResult<()> {
        // Deliberately no locks: this is §3.1's quick check, not a guarantee.
        let mut tx = self.pool.begin().await.map_err(db_err)?;
        let result: R<()> = async {
            let plan = read_plan(&mut tx, plan_id).await?;
            let machine = read_machine(&mut tx, &plan.machine_id).await?;
            let row = query("SELECT epoch, recovery_mode FROM installation WHERE id = 1")
                .fetch_one(&mut tx)
                .await?;
            let epoch: Vec<u8> = row.try_get("epoch")?;
            let inst = InstallationRow {
                epoch: epoch_of(&epoch)?,
                recovery_mode: row.try_get("recovery_mode")?,
                recovery_entered_at_ms: None,
            };
            let approval = query(
                "SELECT a.approver_id, a.epoch, a.revision, a.revoked, p.revoked AS identity_revoked \
                 FROM approvals a JOIN principals p ON p.id = a.approver_id \
                 WHERE a.plan_id = $1 ORDER BY a.seq DESC LIMIT 1",
            )
            .bind(plan_id)
            .fetch_optional(&mut tx)
            .await?
            .map(|r| -> R<ApprovalRow> {
                let e: Vec<u8> = r.try_get("epoch")?;
                Ok(ApprovalRow {
                    epoch: epoch_of(&e)?,
                    revision: r.try_get("revision")?,
                    revoked: r.try_get("revoked")?,
                    identity_revoked: r.try_get("identity_revoked")?,
                })
            })
            .transpose()?;
            let now = self.store_time(&mut tx).await?;
            authority_now(&plan, approval.as_ref(), now, inst.epoch, Stage::Commitment)
                .map_err(|e| refused("preflight", e.to_string()))?;
            gate::check_gate(Mutation::Commitment, &gate_facts(&machine, &plan, &inst)?)
                .map_err(|e| refused("preflight", e.to_string()))?;
            Ok(())
        }
        .await;
        let _ = tx.rollback().await;
        result.map_err(|f| match f {
            Fail::Db(e) => db_err(e),
            Fail::Store(e) => e,
        })
    }

    async fn begin_observation(
        &self,
        request: ObservationRequest,
    ) -> StoreResult<ObservationTicket> {
        let request = &request;
        self.transaction(|tx| {
            Box::pin(async move {
                lock_machine(tx, &request.machine).await?;
                if let Some(p) = &request.plan {
                    let plan = read_plan(tx, p).await?;
                    if plan.machine_id != request.machine {
                        return Err(refused(
                            "starting an observation",
                            "the plan is for another machine",
                        )
                        .into());
                    }
                }
                let now = self.store_time(tx).await?;
                let purpose = purpose_name(request.purpose);
                let mut entry = Entry::controller(request.controller, "observation_started")
                    .detail(format!("purpose {purpose}"));
                entry.plan = request.plan.as_deref();
                let basis = append(tx, &request.machine, now, entry).await?;
                query(
                "INSERT INTO observation_starts (machine_id, basis, purpose, plan_id, controller, \
                 started_at_ms) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&request.machine)
            .bind(basis)
            .bind(purpose)
            .bind(&request.plan)
            .bind(controller_bytes(request.controller))
            .bind(now)
            .execute(tx)
            .await?;
                Ok(ObservationTicket {
                    machine: request.machine.clone(),
                    basis: Revision(u(basis)),
                })
            })
        })
        .await
    }

    async fn record_observation(
        &self,
        ticket: &ObservationTicket,
        facts: ObservedFacts,
    ) -> StoreResult<Revision> {
        const ACT: &str = "recording an observation";
        let facts = &facts;
        self.transaction(|tx| {
            Box::pin(async move {
                let machine = lock_machine(tx, &ticket.machine).await?;
                let basis = i(ticket.basis.0);
                let start = query(
                    "SELECT s.purpose, s.plan_id, s.controller, o.basis AS recorded \
                 FROM observation_starts s LEFT JOIN observations o \
                 ON o.machine_id = s.machine_id AND o.basis = s.basis \
                 WHERE s.machine_id = $1 AND s.basis = $2",
                )
                .bind(&ticket.machine)
                .bind(basis)
                .fetch_optional(tx)
                .await?
                .ok_or_else(|| refused(ACT, "no observation started at this basis"))?;
                if start.try_get::<Option<i64>, _>("recorded")?.is_some() {
                    return Err(refused(ACT, "the observation is already recorded").into());
                }
                let purpose: String = start.try_get("purpose")?;
                let plan: Option<String> = start.try_get("plan_id")?;
                let controller: Vec<u8> = start.try_get("controller")?;
                let now = self.store_time(tx).await?;
                let mut entry = Entry::controller(controller_of(&controller)?, "observation")
                    .detail(format!(
                        "purpose {purpose}, basis r{basis}, digest {}, config version {}",
                        facts
                            .digest
                            .map_or_else(|| "unread".to_owned(), |d| d.to_hex()),
                        facts
                            .config_version
                            .map_or_else(|| "unread".to_owned(), |v| v.to_string()),
                    ));
                entry.plan = plan.as_deref();
                let rev = append(tx, &ticket.machine, now, entry).await?;
                query(
                "INSERT INTO observations (machine_id, basis, recorded_revision, recorded_at_ms, \
                 smbios_uuid, node_id, cluster_id, talos_version, digest, config_version, \
                 access_version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            )
            .bind(&ticket.machine)
            .bind(basis)
            .bind(rev)
            .bind(now)
            .bind(&facts.smbios_uuid)
            .bind(&facts.node_id)
            .bind(&facts.cluster_id)
            .bind(&facts.talos_version)
            .bind(facts.digest.map(|d| d.to_hex()))
            .bind(facts.config_version.map(i))
            .bind(&facts.access_version)
            .execute(tx)
            .await?;
                // §6.1: a drift or restoration observation is compared with Applied.
                let source = match purpose_of(&purpose)? {
                    ObservationPurpose::Drift => Some(drift::DriftSource::Drift),
                    ObservationPurpose::Restoration => Some(drift::DriftSource::Restoration),
                    _ => None,
                };
                if let (Some(source), Some(digest)) = (source, facts.digest) {
                    let entry = Entry::controller(controller_of(&controller)?, "drift");
                    drift_rules(tx, &machine, basis, &digest.to_hex(), now, entry, source).await?;
                }
                Ok(Revision(u(rev)))
            })
        })
        .await
    }

    async fn record_dependency_check(&self, check: DependencyCheck) -> StoreResult<Revision> {
        let check = &check;
        self.transaction(|tx| {
            Box::pin(async move {
                let machine_id = read_plan(tx, &check.plan).await?.machine_id;
                lock_machine(tx, &machine_id).await?;
                let now = self.store_time(tx).await?;
                let rev = append(
                    tx,
                    &machine_id,
                    now,
                    Entry::controller(check.controller, "dependency_check")
                        .plan(&check.plan)
                        .detail(format!(
                            "access {} version {}; artifact decrypts: {}",
                            check.access_path, check.access_version, check.artifact_decrypts
                        )),
                )
                .await?;
                query(
                    "INSERT INTO dependency_checks (machine_id, revision, plan_id, controller, \
                 access_path, access_version, artifact_decrypts, checked_at_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                )
                .bind(&machine_id)
                .bind(rev)
                .bind(&check.plan)
                .bind(controller_bytes(check.controller))
                .bind(&check.access_path)
                .bind(&check.access_version)
                .bind(check.artifact_decrypts)
                .bind(now)
                .execute(tx)
                .await?;
                Ok(Revision(u(rev)))
            })
        })
        .await
    }

    async fn commit(&self, plan_id: &str, controller: ControllerId) -> StoreResult<Committed> {
        // The body may run more than once (a retry); the digest it saw is kept here.
        let digest_seen = Mutex::new(None);
        let seen = &digest_seen;
        let result = self
            .transaction(|tx| {
                Box::pin(async move { self.commitment(tx, plan_id, controller, seen).await })
            })
            .await;
        match result {
            Err(refusal @ StoreError::CommitmentRefused { .. }) => {
                let digest_seen = digest_seen
                    .into_inner()
                    .unwrap_or_else(PoisonError::into_inner);
                self.record_commitment_refusal(plan_id, controller, &refusal, digest_seen)
                    .await?;
                Err(refusal)
            }
            other => other,
        }
    }

    async fn attempt(&self, operation: &str, token: OwnerToken) -> StoreResult<CommittedAttempt> {
        let result = self
            .transaction(|tx| Box::pin(async move { self.attempt_tx(tx, operation, token).await }))
            .await;
        match result {
            Err(StoreError::AttemptRefused { comparison, reason }) => {
                self.record_attempt_refusal(operation, token, comparison, &reason)
                    .await?;
                Err(StoreError::AttemptRefused { comparison, reason })
            }
            other => other,
        }
    }

    async fn record_response(
        &self,
        op_id: &str,
        attempt: u32,
        response: ResponseClass,
    ) -> StoreResult<OperationState> {
        self.record_response_text(op_id, attempt, response, None)
            .await
    }

    async fn record_response_text(
        &self,
        op_id: &str,
        attempt: u32,
        response: ResponseClass,
        text: Option<String>,
    ) -> StoreResult<OperationState> {
        const ACT: &str = "recording a response";
        let text = bounded_text(text);
        if response == ResponseClass::Pending {
            return Err(refused(ACT, "pending is not a response"));
        }
        let text = &text;
        self.transaction(|tx| {
            Box::pin(async move {
                let machine_id = read_op(tx, op_id).await?.machine_id;
                lock_machine(tx, &machine_id).await?;
                let op = read_op(tx, op_id).await?;
                let mut attempts = read_attempts(tx, op_id).await?;
                let idx = attempts
                    .iter()
                    .position(|a| a.attempt_no == i64::from(attempt))
                    .ok_or_else(|| not_found("attempt", &format!("{op_id}#{attempt}")))?;
                if attempts[idx].response.from_target() {
                    return Err(refused(
                        ACT,
                        "the node's answer to this attempt is already recorded",
                    )
                    .into());
                }
                // The answer is the attempt's: it is recorded under the token that made the
                // attempt, which after a takeover is no longer the owner's (the fence stops
                // new attempts, not answers to requests already sent, §3.4).
                let by = query(
                    "SELECT owner_controller, owner_generation, owner_epoch FROM attempts \
                 WHERE operation_id = $1 AND attempt_no = $2",
                )
                .bind(op_id)
                .bind(i64::from(attempt))
                .fetch_one(tx)
                .await?;
                let controller: Vec<u8> = by.try_get("owner_controller")?;
                let epoch: Vec<u8> = by.try_get("owner_epoch")?;
                let attempt_token =
                    token_from(&controller, by.try_get("owner_generation")?, &epoch)?;
                let now = self.store_time(tx).await?;
                let rev = append(
                    tx,
                    &machine_id,
                    now,
                    Entry::token(&attempt_token, "response")
                        .op(op_id)
                        .detail(format!("attempt {attempt}: {}", response_name(response))),
                )
                .await?;
                query(
                    "UPDATE attempts SET response = $3, response_revision = $4, response_text = $5 \
                 WHERE operation_id = $1 AND attempt_no = $2",
                )
                .bind(op_id)
                .bind(i64::from(attempt))
                .bind(response_name(response))
                .bind(rev)
                .bind(text)
                .execute(tx)
                .await?;
                query("UPDATE operations SET last_fact_revision = $2 WHERE id = $1")
                    .bind(op_id)
                    .bind(rev)
                    .execute(tx)
                    .await?;
                attempts[idx].response = response;
                let latest = idx + 1 == attempts.len();
                let recs = records(&attempts);
                let mut state = op.state;
                if state == OperationState::Sending && latest {
                    let facts = TransitionFacts::quiet(OperationKind::ApplyConfig, &recs);
                    for to in [
                        OperationState::Verifying,
                        OperationState::Rejected,
                        OperationState::Unresolved,
                    ] {
                        if operation::check_transition(Some(state), to, &facts).is_ok() {
                            set_op_state(tx, op_id, to).await?;
                            append(
                                tx,
                                &machine_id,
                                now,
                                Entry::controller(op.owner.controller, "state_changed")
                                    .op(op_id)
                                    .detail(format!("{state} -> {to}")),
                            )
                            .await?;
                            state = to;
                            break;
                        }
                    }
                }
                Ok(state)
            })
        })
        .await
    }

    async fn takeover(
        &self,
        op_id: &str,
        expected_generation: u64,
        controller: ControllerId,
    ) -> StoreResult<OwnerToken> {
        self.takeover_requested(op_id, expected_generation, controller, None)
            .await
    }

    async fn takeover_requested(
        &self,
        op_id: &str,
        expected_generation: u64,
        controller: ControllerId,
        requested_by: Option<&Actor>,
    ) -> StoreResult<OwnerToken> {
        const ACT: &str = "taking over";
        self.transaction(|tx| Box::pin(async move {
            let machine_id = read_op(tx, op_id).await?.machine_id;
            lock_machine(tx, &machine_id).await?;
            if let Some(actor) = requested_by {
                require_role(tx, actor, &[Role::RecoveryAdmin], "requesting a takeover").await?;
            }
            let inst = installation(tx, true).await?;
            let op = read_op(tx, op_id).await?;
            let taken = operation::takeover(op.state, op.owner, expected_generation, controller, inst.epoch)
                .map_err(|e| refused(ACT, e.to_string()))?;
            let now = self.store_time(tx).await?;
            let mut entry = Entry::token(&taken.owner, "takeover")
                .op(op_id)
                .detail(format!("from {} ({})", token_text(&op.owner), op.state));
            if let Some(actor) = requested_by {
                entry.detail.push_str(&format!("; requested by {} as {}", actor.id, role_name(actor.role)));
                entry.requested_by = Some(actor.id.clone());
            }
            let rev = append(tx, &machine_id, now, entry).await?;
            // The fence: one conditional update on the generation.
            let row = query(
                "UPDATE operations SET owner_controller = $3, owner_generation = owner_generation + 1, \
                 owner_epoch = $4, last_fact_revision = $5, \
                 state = CASE WHEN state IN ('committed', 'sending', 'verifying') THEN 'unresolved' ELSE state END \
                 WHERE id = $1 AND owner_generation = $2 \
                 AND state IN ('committed', 'sending', 'verifying', 'unresolved') \
                 RETURNING owner_generation",
            )
            .bind(op_id)
            .bind(i(expected_generation))
            .bind(controller_bytes(controller))
            .bind(inst.epoch.to_bytes().to_vec())
            .bind(rev)
            .fetch_optional(tx)
            .await?
            .ok_or_else(|| refused(ACT, "another takeover won this generation"))?;
            let generation: i64 = row.try_get(0)?;
            Ok(OwnerToken { controller, generation: u(generation), epoch: inst.epoch })
        })).await
    }

    async fn record_accounting_decision(
        &self,
        actor: &Actor,
        request: AccountingRequest,
    ) -> StoreResult<()> {
        const ACT: &str = "recording an accounting decision";
        let request = &request;
        self.transaction(|tx| {
            Box::pin(async move {
                let machine_id = read_op(tx, &request.operation).await?.machine_id;
                lock_machine(tx, &machine_id).await?;
                let allowed = [
                    Role::Author,
                    Role::Publisher,
                    Role::Approver,
                    Role::RecoveryAdmin,
                    Role::Automation,
                ];
                require_role(tx, actor, &allowed, ACT).await?;
                self.hook(HookPoint::AccountingLocked {
                    operation: request.operation.clone(),
                })
                .await;
                let attempts = read_attempts(tx, &request.operation).await?;
                let a = attempts
                    .iter()
                    .find(|a| a.attempt_no == i64::from(request.attempt))
                    .ok_or_else(|| {
                        not_found(
                            "attempt",
                            &format!("{}#{}", request.operation, request.attempt),
                        )
                    })?;
                if a.response.from_target() || a.accounted_by_decision {
                    return Err(refused(ACT, "the attempt is already accounted for").into());
                }
                let takeover = query(
                    "SELECT at_ms FROM timeline WHERE machine_id = $1 AND operation_id = $2 \
                 AND kind = 'takeover' AND revision > $3 ORDER BY revision LIMIT 1",
                )
                .bind(&machine_id)
                .bind(&request.operation)
                .bind(a.revision)
                .fetch_optional(tx)
                .await?;
                let stop = match takeover {
                    Some(r) => ExecutorStop::TakenOver {
                        at: InstantMs(u(r.try_get(0)?)),
                    },
                    None => ExecutorStop::NotStopped,
                };
                let reads = recorded_reads(tx, &machine_id).await?;
                let now = self.store_time(tx).await?;
                let decision = accounting::check_decision(&DecisionFacts {
                    decider: actor.role,
                    stop,
                    deadline: TransportDeadline::Known(InstantMs(u(a.transport_deadline_ms))),
                    settle_floor: request.settle_floor,
                    reads: &reads,
                    now: InstantMs(u(now)),
                    version_change_explanation: request.explanation.as_deref(),
                })
                .map_err(|e| StoreError::AccountingRefused {
                    condition: e.condition(),
                    reason: e.to_string(),
                })?;
                let rev = append(tx, &machine_id, now, Entry::by(actor, "accounting")
                .op(&request.operation)
                .detail(format!(
                    "attempt {} accounted by decision (a judgement, not proof): {decision}; \
                     settle floor {}; explanation: {}",
                    request.attempt,
                    request.settle_floor,
                    request.explanation.as_deref().unwrap_or("none")
                ))).await?;
                query(
                    "UPDATE attempts SET accounted_by_decision = TRUE, decision_revision = $3 \
                 WHERE operation_id = $1 AND attempt_no = $2",
                )
                .bind(&request.operation)
                .bind(i64::from(request.attempt))
                .bind(rev)
                .execute(tx)
                .await?;
                Ok(())
            })
        })
        .await
    }

    async fn classify(&self, op_id: &str, token: OwnerToken) -> StoreResult<Classification> {
        const ACT: &str = "classifying";
        self.transaction(|tx| Box::pin(async move {
            let machine_id = read_op(tx, op_id).await?.machine_id;
            let machine = lock_machine(tx, &machine_id).await?;
            let inst = installation(tx, true).await?;
            let op = read_op(tx, op_id).await?;
            if op.owner != token || token.epoch != inst.epoch {
                return Err(refused(ACT, "only the current owner classifies its operation").into());
            }
            if op.state.is_terminal() {
                return Err(refused(ACT, format!("the operation is {}", op.state)).into());
            }
            let plan = read_plan(tx, &op.plan_id).await?;
            let approval = standing_approval(tx, &plan.id).await?;
            let now = self.store_time(tx).await?;
            let attempts = read_attempts(tx, op_id).await?;
            let recs = records(&attempts);
            // The observation that counts: begun after the commitment, the last
            // attempt and the last accounting entry, with no later-based recorded
            // observation disagreeing with it.
            let threshold = attempts
                .iter()
                .flat_map(|a| [Some(a.revision), a.response_revision.filter(|_| a.response.from_target()), a.decision_revision])
                .flatten()
                .chain([op.commit_revision])
                .max()
                .unwrap_or(op.commit_revision);
            let later = observations_after(tx, &machine_id, threshold).await?;
            let counting = later
                .iter()
                .rposition(|o| matches!(o.purpose, ObservationPurpose::Completion | ObservationPurpose::Recovery))
                .filter(|&k| !later[k + 1..].iter().any(|o| contradicts(&later[k], o)))
                .map(|k| later[k].clone());
            let observation = counting.as_ref().map(|o| contract_observation(&plan, o, machine.assignment_revision));
            let authority = authority_now(&plan, approval.as_ref(), now, inst.epoch, Stage::Attempt);
            let gate_open = gate::check_gate(Mutation::Attempt, &gate_facts(&machine, &plan, &inst)?).is_ok();
            let withdrawal = authority.as_ref().err().and_then(|e| e.withdrawal());
            let verification_passed = attempts.last().is_some_and(|a| now >= a.verification_deadline_ms);
            let transport_passed = attempts.last().is_some_and(|a| now >= a.transport_deadline_ms);
            let restore = if op.restored { RestoreStatus::ScopeUnaccounted } else { RestoreStatus::NotRestored };
            let c = classify::classify(&ClassifyInput {
                attempts: &recs,
                observation,
                withdrawal,
                cancel_resolution: false,
                retry: RetryConditions {
                    attempts_left: op.attempts < plan.max_attempts,
                    approval_passes: authority.is_ok(),
                    gate_open,
                },
                verification_deadline_passed: verification_passed,
                restore,
            });
            let facts = TransitionFacts {
                withdrawal,
                transport_deadline_passed: transport_passed,
                completion: completion_verdict(observation.as_ref()),
                verification_deadline_passed: verification_passed,
                safe_to_retry: c == Classification::SafeToRetry,
                restore,
                ..TransitionFacts::quiet(OperationKind::ApplyConfig, &recs)
            };
            let rev = append(tx, &machine_id, now, Entry::token(&token, "classification")
                .op(op_id)
                .detail(format!("{c}"))).await?;
            query("UPDATE operations SET last_fact_revision = $2 WHERE id = $1")
                .bind(op_id)
                .bind(rev)
                .execute(tx)
                .await?;
            let mut state = op.state;
            let target = match c {
                Classification::Completed => Some(OperationState::Completed),
                Classification::Failed(_) => Some(OperationState::Failed),
                Classification::Rejected => Some(OperationState::Rejected),
                Classification::Cancelled(_) => Some(OperationState::Cancelled),
                Classification::Unresolved(_) => Some(OperationState::Unresolved),
                Classification::SafeToRetry => None,
            };
            if state == OperationState::Committed
                && withdrawal.is_some()
                && operation::check_transition(Some(state), OperationState::Unresolved, &facts).is_ok()
            {
                set_op_state(tx, op_id, OperationState::Unresolved).await?;
                append(tx, &machine_id, now, Entry::token(&token, "state_changed")
                    .op(op_id)
                    .detail("committed -> unresolved: authority withdrawn after commitment")).await?;
                state = OperationState::Unresolved;
            }
            if let Some(to) = target.filter(|to| *to != state)
                && operation::check_transition(Some(state), to, &facts).is_ok()
            {
                set_op_state(tx, op_id, to).await?;
                append(tx, &machine_id, now, Entry::token(&token, "state_changed")
                    .op(op_id)
                    .detail(format!("{state} -> {to}"))).await?;
                state = to;
            }
            if c == Classification::SafeToRetry && state == OperationState::Unresolved {
                query(
                    "UPDATE operations SET retry_revision = $2, retry_controller = $3, \
                     retry_generation = $4, retry_epoch = $5 WHERE id = $1",
                )
                .bind(op_id)
                .bind(rev)
                .bind(controller_bytes(token.controller))
                .bind(i(token.generation))
                .bind(token.epoch.to_bytes().to_vec())
                .execute(tx)
                .await?;
            }
            if state == OperationState::Completed {
                let applied = append(tx, &machine_id, now, Entry::token(&token, "applied_changed")
                    .op(op_id)
                    .plan(&plan.id)
                    .detail(format!("release {} at digest {}", plan.release_id, plan.artifact_digest))).await?;
                query(
                    "UPDATE machines SET applied_release = $2, applied_digest = $3, \
                     applied_source = $4, baseline_revision = $5 WHERE id = $1",
                )
                .bind(&machine_id)
                .bind(&plan.release_id)
                .bind(&plan.artifact_digest)
                .bind(op_id)
                .bind(applied)
                .execute(tx)
                .await?;
                if let Some(opened) = plan.bound_drift.filter(|r| Some(*r) == machine.open_drift) {
                    append(tx, &machine_id, now, Entry::token(&token, "drift_closed")
                        .op(op_id)
                        .detail(format!("record r{opened} closed (reverted) by this operation's completion"))).await?;
                    set_open_drift(tx, &machine_id, None).await?;
                }
            }
            if state == OperationState::Failed
                && let Some(o) = counting.as_ref()
                && let Some(d) = o.digest.as_deref()
            {
                drift_rules(tx, &machine, o.basis, d, now, Entry::token(&token, "drift").op(op_id), drift::DriftSource::FailedCompletion).await?;
            }
            Ok(c)
        })).await
    }

    async fn change_assignment(&self, actor: &Actor, machine_id: &str) -> StoreResult<u64> {
        const ACT: &str = "changing the assignment";
        self.transaction(|tx| {
            Box::pin(async move {
                let machine = lock_machine(tx, machine_id).await?;
                require_role(tx, actor, &[Role::Author, Role::Publisher], ACT).await?;
                let inst = installation(tx, true).await?;
                if let Some(op) = holder(tx, true, machine_id).await? {
                    return Err(refused(
                        ACT,
                        format!("operation {op} holds the machine scope (§8 invariant 9)"),
                    )
                    .into());
                }
                if inst.recovery_mode
                    && machine
                        .released_epoch
                        .as_deref()
                        .map(epoch_of)
                        .transpose()?
                        != Some(inst.epoch)
                {
                    return Err(refused(ACT, "recovery mode: the scope is not released").into());
                }
                let now = self.store_time(tx).await?;
                let next = machine.assignment_revision + 1;
                append(
                    tx,
                    machine_id,
                    now,
                    Entry::by(actor, "assignment_changed").detail(format!(
                        "assignment revision {} -> {next}",
                        machine.assignment_revision
                    )),
                )
                .await?;
                query("UPDATE machines SET assignment_revision = $2 WHERE id = $1")
                    .bind(machine_id)
                    .bind(next)
                    .execute(tx)
                    .await?;
                Ok(u(next))
            })
        })
        .await
    }

    async fn freeze(&self, actor: &Actor, machine_id: &str, reason: &str) -> StoreResult<()> {
        self.freeze_act(actor, machine_id, reason, FreezeAct::Freeze)
            .await
    }

    async fn unfreeze(&self, actor: &Actor, machine_id: &str, reason: &str) -> StoreResult<()> {
        self.freeze_act(actor, machine_id, reason, FreezeAct::Unfreeze)
            .await
    }

    async fn enter_recovery(&self, actor: &Actor, controller: ControllerId) -> StoreResult<Epoch> {
        const ACT: &str = "entering recovery mode";
        let epoch = Epoch::from_bytes(super::random_128()?);
        self.transaction(|tx| Box::pin(async move {
            let rows = query("SELECT id FROM machines ORDER BY id").fetch_all(tx).await?;
            let mut machines = Vec::new();
            for r in &rows {
                let m: String = r.try_get(0)?;
                lock_machine(tx, &m).await?;
                machines.push(m);
            }
            let inst = installation(tx, false).await?;
            require_role(tx, actor, &[Role::RecoveryAdmin], ACT).await?;
            let now = self.store_time(tx).await?;
            query(
                "UPDATE installation SET epoch = $1, recovery_mode = TRUE, \
                 recovery_entered_at_ms = $2 WHERE id = 1",
            )
            .bind(epoch.to_bytes().to_vec())
            .bind(now)
            .execute(tx)
            .await?;
            // §7.2 item 4: every scope pre-restore unaccounted (choice §10.19).
            query(
                "UPDATE machines SET released_epoch = NULL, scope_state = $1, \
                 scope_mark_desired = NULL, scope_decision_revision = NULL",
            )
            .bind(scope_text(recovery::transition(ScopeState::Normal, ScopeEvent::Entry)
                .map_err(|e| refused(ACT, e.to_string()))?))
            .execute(tx)
            .await?;
            for m in &machines {
                append(tx, m, now, Entry::by(actor, "recovery_entry")
                    .detail(format!("epoch {} replaced by a new epoch; gate shut", inst.epoch))).await?;
                let ops = query(
                    "SELECT id, owner_generation, state FROM operations WHERE machine_id = $1 \
                     AND state IN ('committed', 'sending', 'verifying', 'unresolved')",
                )
                .bind(m)
                .fetch_all(tx)
                .await?;
                for o in &ops {
                    let id: String = o.try_get("id")?;
                    let token = OwnerToken { controller, generation: 0, epoch };
                    let rev = append(tx, m, now, Entry::token(&token, "takeover").op(&id)
                        .detail("taken over at recovery-mode entry")).await?;
                    query(
                        "UPDATE operations SET owner_controller = $2, owner_generation = owner_generation + 1, \
                         owner_epoch = $3, state = 'unresolved', restored = TRUE, last_fact_revision = $4 \
                         WHERE id = $1",
                    )
                    .bind(&id)
                    .bind(controller_bytes(controller))
                    .bind(epoch.to_bytes().to_vec())
                    .bind(rev)
                    .execute(tx)
                    .await?;
                }
            }
            Ok(epoch)
        })).await
    }

    async fn release_scope(&self, actor: &Actor, machine_id: &str) -> StoreResult<()> {
        const ACT: &str = "releasing a scope";
        self.transaction(|tx| {
            Box::pin(async move {
                let machine = lock_machine(tx, machine_id).await?;
                let inst = installation(tx, true).await?;
                require_role(tx, actor, &[Role::RecoveryAdmin], ACT).await?;
                if !inst.recovery_mode {
                    return Err(refused(ACT, "recovery mode is not in force").into());
                }
                if let Some(op) = holder(tx, true, machine_id).await? {
                    return Err(
                        refused(ACT, format!("operation {op} still holds the scope")).into(),
                    );
                }
                // §7.4: only a ready scope is released, and only while Desired is the
                // release its mark checked (§7.3 step 7, invariant 13).
                let state = scope_of(&machine.scope_state)?;
                let desired_matches_mark = machine.desired_release == machine.scope_mark_desired;
                let next = recovery::transition(
                    state,
                    ScopeEvent::Release {
                        desired_matches_mark,
                    },
                )
                .map_err(|e| refused(ACT, e.to_string()))?;
                let now = self.store_time(tx).await?;
                append(
                    tx,
                    machine_id,
                    now,
                    Entry::by(actor, "scope_released")
                        .detail(format!("released in epoch {}", inst.epoch)),
                )
                .await?;
                query("UPDATE machines SET released_epoch = $2, scope_state = $3 WHERE id = $1")
                    .bind(machine_id)
                    .bind(inst.epoch.to_bytes().to_vec())
                    .bind(scope_text(next))
                    .execute(tx)
                    .await?;
                Ok(())
            })
        })
        .await
    }

    async fn leave_recovery(&self, actor: &Actor) -> StoreResult<()> {
        const ACT: &str = "leaving recovery mode";
        self.transaction(|tx| {
            Box::pin(async move {
                let rows = query("SELECT id FROM machines ORDER BY id")
                    .fetch_all(tx)
                    .await?;
                let mut machines = Vec::new();
                for r in &rows {
                    let m: String = r.try_get(0)?;
                    machines.push(lock_machine(tx, &m).await?);
                }
                let inst = installation(tx, false).await?;
                require_role(tx, actor, &[Role::RecoveryAdmin], ACT).await?;
                if !inst.recovery_mode {
                    return Err(refused(ACT, "recovery mode is not in force").into());
                }
                for m in &machines {
                    let state = scope_of(&m.scope_state)?;
                    recovery::transition(
                        state,
                        ScopeEvent::Exit {
                            every_scope_released: true,
                        },
                    )
                    .map_err(|e| refused(ACT, format!("scope {}: {e}", m.id)))?;
                }
                let now = self.store_time(tx).await?;
                query("UPDATE installation SET recovery_mode = FALSE WHERE id = 1")
                    .execute(tx)
                    .await?;
                query("UPDATE machines SET scope_state = $1")
                    .bind(scope_text(ScopeState::Normal))
                    .execute(tx)
                    .await?;
                for m in &machines {
                    append(
                        tx,
                        &m.id,
                        now,
                        Entry::by(actor, "recovery_left").detail("scope state: released → normal"),
                    )
                    .await?;
                }
                Ok(())
            })
        })
        .await
    }

    async fn account_scopes(&self, actor: &Actor, request: ScopeAccounting) -> StoreResult<()> {
        const ACT: &str = "accounting restored scopes";
        let mut ids = request.machines.clone();
        ids.sort();
        ids.dedup();
        if ids.is_empty() {
            return Err(refused(ACT, "name at least one machine scope"));
        }
        let (ids, request) = (&ids, &request);
        self.transaction(|tx| {
            Box::pin(async move {
                let mut machines = Vec::new();
                for id in ids {
                    machines.push(lock_machine(tx, id).await?);
                }
                let inst = installation(tx, true).await?;
                require_role(tx, actor, &[Role::RecoveryAdmin], ACT).await?;
                let entered = match (inst.recovery_mode, inst.recovery_entered_at_ms) {
                    (true, Some(at)) => at,
                    _ => return Err(refused(ACT, "recovery mode is not in force").into()),
                };
                for m in &machines {
                    // Only a pre-restore unaccounted scope takes the decision (§7.4).
                    let decision = ScopeEvent::AccountingDecision {
                        restored_operation_holds_scope: false,
                    };
                    recovery::transition(scope_of(&m.scope_state)?, decision)
                        .map_err(|e| refused(ACT, format!("scope {}: {e}", m.id)))?;
                }
                let now = self.store_time(tx).await?;
                let mut reads = Vec::new();
                for m in &machines {
                    reads.push(recorded_reads(tx, &m.id).await?);
                }
                let facts: Vec<DecisionFacts<'_>> = reads
                    .iter()
                    .map(|r| DecisionFacts {
                        decider: actor.role,
                        stop: ExecutorStop::StoppedForRestore {
                            at: InstantMs(u(entered)),
                        },
                        deadline: TransportDeadline::ErasedByRestore {
                            max_transport_deadline: self.settings.max_transport_deadline,
                        },
                        settle_floor: request.settle_floor,
                        reads: r,
                        now: InstantMs(u(now)),
                        version_change_explanation: request.explanation.as_deref(),
                    })
                    .collect();
                let decisions = accounting::check_joint_decision(&facts).map_err(|e| {
                    let scope = ids.get(e.index).map_or("?", String::as_str);
                    StoreError::AccountingRefused {
                        condition: e.refusal.condition(),
                        reason: format!("scope {scope}: {}", e.refusal),
                    }
                })?;
                for (m, decision) in machines.iter().zip(&decisions) {
                    self.account_scope(tx, actor, m, decision, request, now)
                        .await?;
                }
                Ok(())
            })
        })
        .await
    }

    async fn mark_scope(
        &self,
        actor: &Actor,
        machine_id: &str,
        missing: Option<Dependency>,
    ) -> StoreResult<ScopeState> {
        const ACT: &str = "marking a scope";
        self.transaction(|tx| Box::pin(async move {
            let machine = lock_machine(tx, machine_id).await?;
            let inst = installation(tx, true).await?;
            require_role(tx, actor, &[Role::RecoveryAdmin], ACT).await?;
            if !inst.recovery_mode {
                return Err(refused(ACT, "recovery mode is not in force").into());
            }
            let latest = query(concat!(
                "SELECT ",
                obs_cols!(),
                " WHERE s.machine_id = $1 AND s.purpose = 'restoration' ORDER BY s.basis DESC LIMIT 1"
            ))
            .bind(machine_id)
            .fetch_optional(tx)
            .await?
            .as_ref()
            .map(obs_row)
            .transpose()?;
            let facts = recovery::MarkFacts {
                operation_holds_scope: holder(tx, true, machine_id).await?.is_some(),
                reading: restoration_reading(&machine, latest.as_ref(), machine.scope_decision_revision),
                missing,
            };
            let next = recovery::transition(scope_of(&machine.scope_state)?, ScopeEvent::Mark(facts))
                .map_err(|e| refused(ACT, e.to_string()))?;
            let now = self.store_time(tx).await?;
            append(tx, machine_id, now, Entry::by(actor, "scope_marked").detail(format!(
                "marked {next} on restoration observation {}, Desired {}",
                latest.as_ref().map_or_else(|| "none".to_owned(), |o| format!("r{}", o.basis)),
                machine.desired_release.as_deref().unwrap_or("none"),
            ))).await?;
            query("UPDATE machines SET scope_state = $2, scope_mark_desired = $3 WHERE id = $1")
                .bind(machine_id)
                .bind(scope_text(next))
                .bind(&machine.desired_release)
                .execute(tx)
                .await?;
            Ok(next)
        })).await
    }

    async fn current_epoch(&self) -> StoreResult<Epoch> {
        self.transaction(|tx| Box::pin(async move { Ok(installation(tx, true).await?.epoch) }))
            .await
    }

    async fn plan(&self, plan_id: &str) -> StoreResult<PlanView> {
        self.transaction(|tx| {
            Box::pin(async move {
                let p = read_plan(tx, plan_id).await?;
                let op = query("SELECT id FROM operations WHERE plan_id = $1")
                    .bind(plan_id)
                    .fetch_optional(tx)
                    .await?
                    .map(|r| r.try_get::<String, _>(0))
                    .transpose()?;
                Ok(plan_view(&p, op)?)
            })
        })
        .await
    }

    async fn operation(&self, op_id: &str) -> StoreResult<OperationView> {
        self.transaction(|tx| Box::pin(async move { Ok(op_view(&read_op(tx, op_id).await?)) }))
            .await
    }

    async fn operations_of(&self, machine_id: &str) -> StoreResult<Vec<OperationView>> {
        self.transaction(|tx| {
            Box::pin(async move {
                let rows = query(concat!(
                    "SELECT ",
                    op_cols!(),
                    " FROM operations WHERE machine_id = $1 ORDER BY commit_revision"
                ))
                .bind(machine_id)
                .fetch_all(tx)
                .await?;
                rows.iter()
                    .map(|r| op_row(r).map(|o| op_view(&o)))
                    .collect::<R<Vec<_>>>()
            })
        })
        .await
    }

    async fn machine(&self, machine_id: &str) -> StoreResult<MachineView> {
        self.transaction(|tx| {
            Box::pin(async move {
                let m = read_machine(tx, machine_id).await?;
                Ok(machine_view(&m)?)
            })
        })
        .await
    }

    async fn timeline(&self, machine_id: &str) -> StoreResult<Vec<TimelineEntry>> {
        self.transaction(|tx| {
            Box::pin(async move {
                let rows = query(
                    "SELECT revision, kind, at_ms, actor, actor_role, plan_id, operation_id, \
                 comparison, detail, requested_by FROM timeline WHERE machine_id = $1 \
                 ORDER BY revision",
                )
                .bind(machine_id)
                .fetch_all(tx)
                .await?;
                rows.iter()
                    .map(|r| -> R<TimelineEntry> {
                        let comparison: Option<i16> = r.try_get("comparison")?;
                        Ok(TimelineEntry {
                            revision: Revision(u(r.try_get("revision")?)),
                            kind: r.try_get("kind")?,
                            at: InstantMs(u(r.try_get("at_ms")?)),
                            actor: r.try_get("actor")?,
                            actor_role: r.try_get("actor_role")?,
                            plan: r.try_get("plan_id")?,
                            operation: r.try_get("operation_id")?,
                            comparison: comparison
                                .and_then(|c| u8::try_from(c).ok())
                                .and_then(Comparison::from_number),
                            detail: r.try_get("detail")?,
                            requested_by: r.try_get("requested_by")?,
                        })
                    })
                    .collect::<R<Vec<_>>>()
            })
        })
        .await
    }

    async fn publish_sealed_release(
        &self,
        actor: &Actor,
        spec: SealedReleaseSpec,
    ) -> StoreResult<()> {
        let artifacts = spec
            .artifacts
            .iter()
            .map(|(m, a)| {
                (
                    m.as_str(),
                    ArtifactInsert {
                        key_provider: &a.binding.provider,
                        key_id: &a.binding.key_identity,
                        key_name: Some(&a.binding.key_name),
                        key_identity: Some(&a.binding.key_identity),
                        key_version: i64::from(a.binding.version),
                        ciphertext: &a.ciphertext,
                        digest: a.digest,
                    },
                )
            })
            .collect();
        self.publish(actor, &spec.id, &spec.contributions, artifacts)
            .await
    }

    async fn sealed_artifact(&self, plan_id: &str) -> StoreResult<BoundArtifact> {
        const ACT: &str = "reading a sealed artifact";
        self.transaction(|tx| Box::pin(async move {
            let plan = read_plan(tx, plan_id).await?;
            let row = query(
                "SELECT key_provider, key_name, COALESCE(key_identity, key_id) AS key_identity, \
                 key_version, ciphertext, digest FROM artifacts \
                 WHERE release_id = $1 AND machine_id = $2",
            )
            .bind(&plan.release_id)
            .bind(&plan.machine_id)
            .fetch_optional(tx)
            .await?
            .ok_or_else(|| not_found("artifact", &format!("{}/{}", plan.release_id, plan.machine_id)))?;
            let digest: String = row.try_get("digest")?;
            let version: i64 = row.try_get("key_version")?;
            if digest != plan.artifact_digest || version != plan.key_version {
                return Err(refused(ACT, "the stored artifact differs from the bound one").into());
            }
            let key_name: Option<String> = row.try_get("key_name")?;
            let key_name = key_name.ok_or_else(|| {
                refused(ACT, "the artifact was published without its key name")
            })?;
            Ok(BoundArtifact {
                binding: KeyBinding {
                    provider: row.try_get("key_provider")?,
                    key_name,
                    key_identity: row.try_get("key_identity")?,
                    version: u32::try_from(version)
                        .map_err(|_| db_err("a stored key version exceeds 32 bits"))?,
                },
                ciphertext: row.try_get("ciphertext")?,
                digest: digest_of(&digest)?,
            })
        })).await
    }

    async fn now(&self) -> StoreResult<InstantMs> {
        if let Some(clock) = &self.settings.clock {
            return Ok(clock.now());
        }
        let row = self
            .pool
            .fetch_one(query(self.pool.dialect().now_sql()))
            .await
            .map_err(db_err)?;
        Ok(InstantMs(u(row.try_get::<i64, _>(0).map_err(db_err)?)))
    }

    async fn machines(&self) -> StoreResult<Vec<MachineView>> {
        self.transaction(|tx| {
            Box::pin(async move {
                let rows = query(concat!(
                    "SELECT ",
                    machine_cols!(),
                    " FROM machines ORDER BY id"
                ))
                .fetch_all(tx)
                .await?;
                rows.iter()
                    .map(|r| -> R<MachineView> { Ok(machine_view(&machine_row(r)?)?) })
                    .collect::<R<Vec<_>>>()
            })
        })
        .await
    }

    async fn open_operations(&self) -> StoreResult<Vec<OperationView>> {
        self.transaction(|tx| Box::pin(async move {
            let rows = query(concat!(
                "SELECT ",
                op_cols!(),
                " FROM operations WHERE state IN ('committed', 'sending', 'verifying', 'unresolved') \
                 ORDER BY machine_id, commit_revision"
            ))
            .fetch_all(tx)
            .await?;
            rows.iter().map(|r| op_row(r).map(|o| op_view(&o))).collect::<R<Vec<_>>>()
        })).await
    }

    async fn attempts(&self, op_id: &str) -> StoreResult<Vec<AttemptView>> {
        self.transaction(|tx| {
            Box::pin(async move {
                let op = read_op(tx, op_id).await?;
                let rows = query(
                "SELECT a.attempt_no, a.revision, t.at_ms, a.owner_controller, a.owner_generation, \
                 a.owner_epoch, a.transport_deadline_ms, a.verification_deadline_ms, a.response, \
                 a.response_revision, a.response_text, a.accounted_by_decision, \
                 a.decision_revision FROM attempts a JOIN timeline t \
                 ON t.machine_id = $2 AND t.revision = a.revision \
                 WHERE a.operation_id = $1 ORDER BY a.attempt_no",
            )
            .bind(op_id)
            .bind(&op.machine_id)
            .fetch_all(tx)
            .await?;
                rows.iter()
                    .map(|r| -> R<AttemptView> {
                        let response = response_of(&r.try_get::<String, _>("response")?)?;
                        let response_revision: Option<i64> = r.try_get("response_revision")?;
                        let decided: bool = r.try_get("accounted_by_decision")?;
                        let decision_revision: Option<i64> = r.try_get("decision_revision")?;
                        let from_node = response_revision.filter(|_| response.from_target());
                        let by_decision = decision_revision.filter(|_| decided);
                        let accounting = match (from_node, by_decision) {
                            (Some(a), Some(b)) if b < a => {
                                AttemptAccounting::Decision(Revision(u(b)))
                            }
                            (Some(a), _) => AttemptAccounting::Response(Revision(u(a))),
                            (None, Some(b)) => AttemptAccounting::Decision(Revision(u(b))),
                            (None, None) => AttemptAccounting::Unaccounted,
                        };
                        let oc: Vec<u8> = r.try_get("owner_controller")?;
                        let oe: Vec<u8> = r.try_get("owner_epoch")?;
                        let number: i64 = r.try_get("attempt_no")?;
                        Ok(AttemptView {
                            operation: op_id.to_owned(),
                            number: u32::try_from(number).unwrap_or(u32::MAX),
                            revision: Revision(u(r.try_get("revision")?)),
                            at: InstantMs(u(r.try_get("at_ms")?)),
                            owner: token_from(&oc, r.try_get("owner_generation")?, &oe)?,
                            transport_deadline: InstantMs(u(r.try_get("transport_deadline_ms")?)),
                            verification_deadline: InstantMs(u(
                                r.try_get("verification_deadline_ms")?
                            )),
                            response,
                            response_revision: response_revision.map(|v| Revision(u(v))),
                            response_text: r.try_get("response_text")?,
                            accounting,
                        })
                    })
                    .collect::<R<Vec<_>>>()
            })
        })
        .await
    }

    async fn observations(&self, machine_id: &str) -> StoreResult<Vec<ObservationView>> {
        self.transaction(|tx| Box::pin(async move {
            read_machine(tx, machine_id).await?;
            let rows = query(
                "SELECT s.basis, s.purpose, s.plan_id, s.controller, s.started_at_ms, \
                 o.basis AS recorded_basis, o.recorded_revision, o.recorded_at_ms, o.smbios_uuid, \
                 o.node_id, o.cluster_id, o.talos_version, o.digest, o.config_version, o.access_version \
                 FROM observation_starts s LEFT JOIN observations o \
                 ON o.machine_id = s.machine_id AND o.basis = s.basis \
                 WHERE s.machine_id = $1 ORDER BY s.basis",
            )
            .bind(machine_id)
            .fetch_all(tx)
            .await?;
            rows.iter()
                .map(|r| -> R<ObservationView> {
                    let purpose: String = r.try_get("purpose")?;
                    let controller: Option<Vec<u8>> = r.try_get("controller")?;
                    let recorded: Option<i64> = r.try_get("recorded_basis")?;
                    let read = if recorded.is_some() {
                        let digest: Option<String> = r.try_get("digest")?;
                        let config: Option<i64> = r.try_get("config_version")?;
                        Some(ObservedFacts {
                            smbios_uuid: r.try_get("smbios_uuid")?,
                            node_id: r.try_get("node_id")?,
                            cluster_id: r.try_get("cluster_id")?,
                            talos_version: r.try_get("talos_version")?,
                            digest: digest.as_deref().map(digest_of).transpose()?,
                            config_version: config.map(u),
                            access_version: r.try_get("access_version")?,
                        })
                    } else {
                        None
                    };
                    let recorded_at: Option<i64> = r.try_get("recorded_at_ms")?;
                    let recorded_revision: Option<i64> = r.try_get("recorded_revision")?;
                    Ok(ObservationView {
                        machine: machine_id.to_owned(),
                        basis: Revision(u(r.try_get("basis")?)),
                        purpose: purpose_of(&purpose)?,
                        plan: r.try_get("plan_id")?,
                        controller: controller.as_deref().map(controller_of).transpose()?,
                        started_at: InstantMs(u(r.try_get("started_at_ms")?)),
                        recorded_at: recorded_at.map(|v| InstantMs(u(v))),
                        recorded_revision: recorded_revision.map(|v| Revision(u(v))),
                        read,
                    })
                })
                .collect::<R<Vec<_>>>()
        })).await
    }

    #[cfg(feature = "controls")]
    async fn dump_all_rows(&self) -> StoreResult<String> {
        let mut out = String::new();
        let mut conn = self.pool.acquire().await.map_err(db_err)?;
        for (table, sql) in DUMPED {
            let rows = conn.fetch_all(query(sql)).await.map_err(db_err)?;
            for row in &rows {
                out.push_str(table);
                for (idx, name) in row.column_names().into_iter().enumerate() {
                    out.push(' ');
                    out.push_str(name);
                    out.push('=');
                    out.push_str(&cell_text(row, idx));
                }
                out.push('\n');
            }
        }
        Ok(out)
    }

    #[cfg(feature = "controls")]
    async fn raw_execute(&self, sql: &'static str) -> StoreResult<u64> {
        self.pool.execute(query(sql)).await.map_err(db_err)
    }
}

impl SqlStore {
    /// Publishing, for both forms of artifact.
    async fn publish(
        &self,
        actor: &Actor,
        release: &str,
        contributions: &[(String, ContributionKind)],
        mut artifacts: Vec<(&str, ArtifactInsert<'_>)>,
    ) -> StoreResult<()> {
        artifacts.sort_by(|a, b| a.0.cmp(b.0));
        let artifacts = &artifacts;
        self.transaction(|tx| {
            Box::pin(async move {
                // Machine rows first, in a fixed order, then the principal: the order
                // every transaction here takes them in.
                for (machine, _) in artifacts {
                    lock_machine(tx, machine).await?;
                }
                require_role(tx, actor, &[Role::Publisher], "publishing").await?;
                let now = self.store_time(tx).await?;
                let exists = query("SELECT id FROM releases WHERE id = $1")
                    .bind(release)
                    .fetch_optional(tx)
                    .await?;
                if exists.is_some() {
                    return Err(StoreError::Exists {
                        what: "release",
                        id: release.to_owned(),
                    }
                    .into());
                }
                query("INSERT INTO releases (id, published_by, published_at) VALUES ($1, $2, $3)")
                    .bind(release)
                    .bind(&actor.id)
                    .bind(now)
                    .execute(tx)
                    .await?;
                for (principal, kind) in contributions {
                    query(
                    "INSERT INTO release_contributions (release_id, principal_id, contribution) \
                     VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                )
                .bind(release)
                .bind(principal)
                .bind(match kind {
                    ContributionKind::Authored => "authored",
                    ContributionKind::Published => "published",
                })
                .execute(tx)
                .await?;
                }
                for (machine, a) in artifacts {
                    match (a.key_name, a.key_identity) {
                        (Some(name), Some(identity)) => {
                            query(
                            "INSERT INTO artifacts (release_id, machine_id, key_provider, key_id, \
                             key_version, ciphertext, digest, key_name, key_identity) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                        )
                        .bind(release)
                        .bind(*machine)
                        .bind(a.key_provider)
                        .bind(a.key_id)
                        .bind(a.key_version)
                        .bind(a.ciphertext)
                        .bind(a.digest.to_hex())
                        .bind(name)
                        .bind(identity)
                        .execute(tx)
                        .await?;
                        }
                        _ => {
                            query(
                            "INSERT INTO artifacts (release_id, machine_id, key_provider, key_id, \
                             key_version, ciphertext, digest) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                        )
                        .bind(release)
                        .bind(*machine)
                        .bind(a.key_provider)
                        .bind(a.key_id)
                        .bind(a.key_version)
                        .bind(a.ciphertext)
                        .bind(a.digest.to_hex())
                        .execute(tx)
                        .await?;
                        }
                    }
                    query("UPDATE machines SET desired_release = $2 WHERE id = $1")
                        .bind(*machine)
                        .bind(release)
                        .execute(tx)
                        .await?;
                    append(
                        tx,
                        machine,
                        now,
                        Entry::by(actor, "desired_changed").detail(format!(
                            "release {} selected; artifact digest {}, key {}/{} v{}",
                            release,
                            a.digest,
                            a.key_provider,
                            a.key_name.unwrap_or(a.key_id),
                            a.key_version
                        )),
                    )
                    .await?;
                }
                Ok(())
            })
        })
        .await
    }

    async fn freeze_act(
        &self,
        actor: &Actor,
        machine_id: &str,
        reason: &str,
        act: FreezeAct,
    ) -> StoreResult<()> {
        let name = match act {
            FreezeAct::Freeze => "freezing",
            FreezeAct::Unfreeze => "unfreezing",
        };
        self.transaction(|tx| {
            Box::pin(async move {
                let machine = lock_machine(tx, machine_id).await?;
                let allowed = [
                    Role::Author,
                    Role::Publisher,
                    Role::Approver,
                    Role::RecoveryAdmin,
                    Role::Automation,
                ];
                require_role(tx, actor, &allowed, name).await?;
                let state = if machine.frozen {
                    FreezeState::Frozen
                } else {
                    FreezeState::Unfrozen
                };
                let next = gate::freeze_transition(state, act, actor.role, reason)
                    .map_err(|e| refused(name, e.to_string()))?;
                // §7.5: unfreezing is refused on a scope still pre-restore unaccounted;
                // freezing removes authority and is always allowed.
                let inst = installation(tx, true).await?;
                if act == FreezeAct::Unfreeze {
                    let scope = scope_of(&machine.scope_state)?;
                    recovery::permits(scope, recovery::Act::Unfreeze)
                        .map_err(|e| refused(name, e.to_string()))?;
                }
                let now = self.store_time(tx).await?;
                append(
                    tx,
                    machine_id,
                    now,
                    Entry::by(
                        actor,
                        if act == FreezeAct::Freeze {
                            "frozen"
                        } else {
                            "unfrozen"
                        },
                    )
                    .detail(format!("{reason} (epoch {})", inst.epoch)),
                )
                .await?;
                query("UPDATE machines SET frozen = $2 WHERE id = $1")
                    .bind(machine_id)
                    .bind(next == FreezeState::Frozen)
                    .execute(tx)
                    .await?;
                Ok(())
            })
        })
        .await
    }
}

/// Every recorded read of `machine`, as a §5.2 decision relies on it.
async fn recorded_reads(tx: &mut Tx, machine: &str) -> R<Vec<RecordedRead>> {
    Ok(observations_after(tx, machine, 0)
        .await?
        .iter()
        .map(|o| RecordedRead {
            purpose: o.purpose,
            started_at: InstantMs(u(o.started_at_ms)),
            recorded_at: InstantMs(u(o.recorded_at_ms)),
            config_version: o.config_version.map(u),
        })
        .collect())
}

impl SqlStore {
    /// One scope of a §7.3 step 1 decision that passed: the entry, every restored
    /// attempt with no answer from the node accounted by it, every restored
    /// operation with no attempt cancelled (§7.3 step 5: the decision covers any
    /// attempt the restore erased), and the scope moved on (§7.4).
    async fn account_scope(
        &self,
        tx: &mut Tx,
        actor: &Actor,
        machine: &MachineRow,
        decision: &accounting::Decision,
        request: &ScopeAccounting,
        now: i64,
    ) -> R<()> {
        let rev = append(tx, &machine.id, now, Entry::by(actor, "accounting").detail(format!(
            "the scope's step 1 decision after the restore (a judgement, not proof): {decision}; settle floor {}; explanation: {}",
            request.settle_floor,
            request.explanation.as_deref().unwrap_or("none"),
        ))).await?;
        let restored = query(
            "SELECT id FROM operations WHERE machine_id = $1 AND restored \
             AND state IN ('committed', 'sending', 'verifying', 'unresolved') ORDER BY id",
        )
        .bind(&machine.id)
        .fetch_all(tx)
        .await?;
        for row in &restored {
            let op: String = row.try_get("id")?;
            let attempts = read_attempts(tx, &op).await?;
            if attempts.is_empty() {
                append(
                    tx,
                    &machine.id,
                    now,
                    Entry::by(actor, "cancelled").op(&op).detail(
                        "restored with no attempt: ends cancelled once its scope is accounted \
                     (§7.3 step 5); nothing was sent by this controller",
                    ),
                )
                .await?;
                set_op_state(tx, &op, OperationState::Cancelled).await?;
                continue;
            }
            for a in attempts
                .iter()
                .filter(|a| !a.response.from_target() && !a.accounted_by_decision)
            {
                query(
                    "UPDATE attempts SET accounted_by_decision = TRUE, decision_revision = $3 \
                     WHERE operation_id = $1 AND attempt_no = $2",
                )
                .bind(&op)
                .bind(a.attempt_no)
                .bind(rev)
                .execute(tx)
                .await?;
            }
        }
        let holds = holder(tx, true, &machine.id).await?.is_some();
        let next = recovery::transition(
            scope_of(&machine.scope_state)?,
            ScopeEvent::AccountingDecision {
                restored_operation_holds_scope: holds,
            },
        )
        .map_err(|e| refused("accounting restored scopes", e.to_string()))?;
        query("UPDATE machines SET scope_state = $2, scope_decision_revision = $3 WHERE id = $1")
            .bind(&machine.id)
            .bind(scope_text(next))
            .bind(rev)
            .execute(tx)
            .await?;
        Ok(())
    }
}
