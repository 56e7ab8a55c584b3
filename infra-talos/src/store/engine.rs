//! The shared engine: [`SqlStore`], one store over either database (`super::sql`),
//! holding the pool and the settings (guards, clock, test hooks) every act runs with,
//! and [`Store`] for every store built on it ([`OnEngine`]: `SqliteStore` and
//! `PgStore`), which hands each act to the engine.
//!
//! The acts themselves are `SqlStore`'s methods in `super::acts` (§2–§7), the reads
//! in `super::views`; each is written, and compiled, once for both databases.

use crate::attempt::CommittedAttempt;
use crate::contract::classify::Classification;
use crate::contract::epoch::Epoch;
use crate::contract::evidence::ResponseClass;
use crate::contract::operation::{ControllerId, OperationState, OwnerToken};
use crate::contract::plan::SelfApproval;
use crate::contract::recovery::{Dependency, ScopeState};
use crate::contract::{InstantMs, Revision, Role};
use crate::keys;
use crate::store::common::i;
use crate::store::sql::{Pool, Tx, query};
use crate::store::transaction::R;
use crate::store::{
    AccountingRequest, Actor, AdoptPlanSpec, AdoptionOutcome, AttemptView, BlanketApproval,
    BootstrapSpec, CertificateBinding, CertificateSpec, Committed, DependencyCheck, HookPoint,
    IdentityEvent, InstallationIdentity, MachineSpec, MachineView, ObservationRequest,
    ObservationTicket, ObservationView, ObservedFacts, OperationView, PlanSpec, PlanView,
    PrincipalSpec, PrincipalView, RecoveryEntry, ReleaseSpec, ScopeAccounting, SealedReleaseSpec,
    Settings, Store, StoreError, StoreResult, TimelineEntry,
};

/// One store over either database: the pool and the settings every act runs with.
#[derive(Debug, Clone)]
pub(crate) struct SqlStore {
    pub(super) pool: Pool,
    pub(super) settings: Settings,
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

    /// The store's time inside `tx`: the database's clock, or the test clock.
    pub(super) async fn store_time(&self, tx: &mut Tx) -> R<i64> {
        if let Some(clock) = &self.settings.clock {
            return Ok(i(clock.now().0));
        }
        let row = query(tx.dialect().now_sql()).fetch_one(tx).await?;
        Ok(row.try_get::<i64, _>(0)?)
    }

    /// The store's time, given the database's clock `db_now` read inside the
    /// transaction: that clock, or the test clock.
    pub(super) fn time_from(&self, db_now: i64) -> i64 {
        self.settings
            .clock
            .as_ref()
            .map_or(db_now, |clock| i(clock.now().0))
    }

    /// Awaits the test hook at `point`, if there is one.
    pub(super) async fn hook(&self, point: HookPoint) {
        if let Some(hook) = &self.settings.hook {
            hook(point).await;
        }
    }
}

/// Every store built on the engine performs the contract's acts through it.
#[async_trait::async_trait]
impl<S: OnEngine> Store for S {
    async fn bootstrap(&self, spec: BootstrapSpec) -> StoreResult<()> {
        self.engine().bootstrap(spec).await
    }

    async fn installation_identity(&self) -> StoreResult<Option<InstallationIdentity>> {
        self.engine().installation_identity().await
    }

    async fn register_principal(&self, actor: &Actor, spec: PrincipalSpec) -> StoreResult<()> {
        self.engine().register_principal(actor, spec).await
    }

    async fn change_roles(
        &self,
        actor: &Actor,
        principal: &str,
        roles: Vec<Role>,
    ) -> StoreResult<()> {
        self.engine().change_roles(actor, principal, roles).await
    }

    async fn identity_journal(&self) -> StoreResult<Vec<IdentityEvent>> {
        self.engine().identity_journal().await
    }

    async fn principals(&self) -> StoreResult<Vec<PrincipalView>> {
        self.engine().principals().await
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

    async fn create_adopt_plan(&self, actor: &Actor, spec: AdoptPlanSpec) -> StoreResult<PlanView> {
        self.engine().create_adopt_plan(actor, spec).await
    }

    async fn record_adoption(
        &self,
        plan: &str,
        controller: ControllerId,
    ) -> StoreResult<AdoptionOutcome> {
        self.engine().record_adoption(plan, controller).await
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

    async fn bind_certificate(&self, actor: &Actor, spec: CertificateSpec) -> StoreResult<()> {
        self.engine().bind_certificate(actor, spec).await
    }

    async fn certificates(&self) -> StoreResult<Vec<CertificateBinding>> {
        self.engine().certificates().await
    }

    async fn cancel_plan(&self, actor: &Actor, plan: &str) -> StoreResult<()> {
        self.engine().cancel_plan(actor, plan).await
    }

    async fn grant_blanket_approval(
        &self,
        actor: &Actor,
        cluster_id: &str,
        reason: &str,
        lasting: crate::contract::SpanMs,
    ) -> StoreResult<BlanketApproval> {
        self.engine()
            .grant_blanket_approval(actor, cluster_id, reason, lasting)
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
        token: OwnerToken,
        response: ResponseClass,
    ) -> StoreResult<OperationState> {
        self.engine()
            .record_response(operation, attempt, token, response)
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

    async fn enter_recovery(&self, actor: &Actor, entry: RecoveryEntry) -> StoreResult<Epoch> {
        self.engine().enter_recovery(actor, entry).await
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

    async fn plans(&self) -> StoreResult<Vec<PlanView>> {
        self.engine().plans().await
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

    async fn keyed_artifact(
        &self,
        release: &str,
        machine: &str,
    ) -> StoreResult<Option<keys::SealedArtifact>> {
        self.engine().keyed_artifact(release, machine).await
    }

    async fn record_response_text(
        &self,
        operation: &str,
        attempt: u32,
        token: OwnerToken,
        response: ResponseClass,
        text: Option<String>,
    ) -> StoreResult<OperationState> {
        self.engine()
            .record_response_text(operation, attempt, token, response, text)
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
