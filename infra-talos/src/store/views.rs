//! The store's structured reads for the executor and the command line: plans,
//! operations, machines, timelines (§4.1), attempts with their deadlines and
//! accounting (§3.3, §5.1), observations and the store's time. The test-only reads
//! are in `super::dump`.
//!
//! Each read runs in a transaction of its own and takes no row lock, except the
//! current epoch, which reads the installation row to share as the acts do; the
//! store's time reads outside a transaction.

use crate::contract::comparison::Comparison;
use crate::contract::epoch::Epoch;
use crate::contract::{InstantMs, Revision, SpanMs};
use crate::store::common::*;
use crate::store::engine::SqlStore;
use crate::store::lookups::{
    all_machines, installation, open_operations, operations_of_machine, read_machine, read_op,
    read_plan,
};
use crate::store::rows::token_from;
use crate::store::sql::query;
use crate::store::transaction::R;
use crate::store::{
    AttemptAccounting, AttemptView, MachineView, ObservationView, ObservedFacts, OperationView,
    PlanView, StoreResult, TimelineEntry,
};

/// A plan row as the store shows it, with its operation once committed.
pub(super) fn plan_view(p: &PlanRow, operation: Option<String>) -> StoreResult<PlanView> {
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
        kind: operation_kind_of(&p.operation_kind)?,
    })
}

/// A machine row as the store shows it.
fn machine_view(m: &MachineRow) -> StoreResult<MachineView> {
    let identity = identity_key(&m.identity_kind, m.identity_value.clone())?;
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

/// An operation row as the store shows it.
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

impl SqlStore {
    /// [`Store::current_epoch`](crate::store::Store::current_epoch): the present recovery
    /// epoch.
    pub(super) async fn current_epoch(&self) -> StoreResult<Epoch> {
        self.transaction(|tx| Box::pin(async move { Ok(installation(tx, true).await?.epoch) }))
            .await
    }

    /// [`Store::plan`](crate::store::Store::plan): a plan.
    pub(super) async fn plan(&self, plan_id: &str) -> StoreResult<PlanView> {
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

    /// [`Store::plans`](crate::store::Store::plans): every plan, by machine then
    /// identifier.
    pub(super) async fn plans(&self) -> StoreResult<Vec<PlanView>> {
        self.transaction(|tx| {
            Box::pin(async move {
                let ids = query("SELECT id FROM plans ORDER BY machine_id, id")
                    .fetch_all(tx)
                    .await?;
                let mut out = Vec::with_capacity(ids.len());
                for r in &ids {
                    let id: String = r.try_get(0)?;
                    let p = read_plan(tx, &id).await?;
                    let op = query("SELECT id FROM operations WHERE plan_id = $1")
                        .bind(&id)
                        .fetch_optional(tx)
                        .await?
                        .map(|r| r.try_get::<String, _>(0))
                        .transpose()?;
                    out.push(plan_view(&p, op)?);
                }
                Ok(out)
            })
        })
        .await
    }

    /// [`Store::operation`](crate::store::Store::operation): an operation.
    pub(super) async fn operation(&self, op_id: &str) -> StoreResult<OperationView> {
        self.transaction(|tx| Box::pin(async move { Ok(op_view(&read_op(tx, op_id).await?)) }))
            .await
    }

    /// [`Store::operations_of`](crate::store::Store::operations_of): every operation of a
    /// machine, oldest first.
    pub(super) async fn operations_of(&self, machine_id: &str) -> StoreResult<Vec<OperationView>> {
        self.transaction(|tx| {
            Box::pin(async move {
                let rows = operations_of_machine(tx, machine_id).await?;
                Ok(rows.iter().map(op_view).collect())
            })
        })
        .await
    }

    /// [`Store::machine`](crate::store::Store::machine): a machine.
    pub(super) async fn machine(&self, machine_id: &str) -> StoreResult<MachineView> {
        self.transaction(|tx| {
            Box::pin(async move {
                let m = read_machine(tx, machine_id).await?;
                Ok(machine_view(&m)?)
            })
        })
        .await
    }

    /// [`Store::timeline`](crate::store::Store::timeline): a machine's timeline, in revision
    /// order.
    pub(super) async fn timeline(&self, machine_id: &str) -> StoreResult<Vec<TimelineEntry>> {
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

    /// [`Store::now`](crate::store::Store::now): the store's present time: the database's clock
    /// on PostgreSQL, the store's clock on SQLite.
    pub(super) async fn now(&self) -> StoreResult<InstantMs> {
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

    /// [`Store::machines`](crate::store::Store::machines): every machine, by identifier.
    pub(super) async fn machines(&self) -> StoreResult<Vec<MachineView>> {
        self.transaction(|tx| {
            Box::pin(async move {
                let rows = all_machines(tx).await?;
                rows.iter()
                    .map(|m| -> R<MachineView> { Ok(machine_view(m)?) })
                    .collect::<R<Vec<_>>>()
            })
        })
        .await
    }

    /// [`Store::open_operations`](crate::store::Store::open_operations): every operation
    /// holding its scope (committed, sending, verifying, unresolved), by machine and then
    /// commitment order.
    pub(super) async fn open_operations(&self) -> StoreResult<Vec<OperationView>> {
        self.transaction(|tx| {
            Box::pin(async move {
                let rows = open_operations(tx).await?;
                Ok(rows.iter().map(op_view).collect())
            })
        })
        .await
    }

    /// [`Store::attempts`](crate::store::Store::attempts): an operation's attempts, oldest
    /// first.
    pub(super) async fn attempts(&self, op_id: &str) -> StoreResult<Vec<AttemptView>> {
        self.transaction(|tx| {
            Box::pin(async move {
                let op = read_op(tx, op_id).await?;
                let rows = query(
                    "SELECT a.attempt_no, a.revision, t.at_ms, a.owner_controller, \
                     a.owner_generation, a.owner_epoch, a.transport_deadline_ms, \
                     a.verification_deadline_ms, a.response, a.response_revision, a.response_text, \
                     a.accounted_by_decision, a.decision_revision FROM attempts a JOIN timeline t \
                     ON t.machine_id = $2 AND t.revision = a.revision WHERE a.operation_id = $1 \
                     ORDER BY a.attempt_no",
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

    /// [`Store::observations`](crate::store::Store::observations): every observation started on
    /// a machine, recorded or not, by basis.
    pub(super) async fn observations(&self, machine_id: &str) -> StoreResult<Vec<ObservationView>> {
        self.transaction(|tx| {
            Box::pin(async move {
                read_machine(tx, machine_id).await?;
                let rows = query(
                    "SELECT s.basis, s.purpose, s.plan_id, s.controller, s.started_at_ms, \
                     o.basis AS recorded_basis, o.recorded_revision, o.recorded_at_ms, \
                     o.smbios_uuid, o.node_id, o.cluster_id, o.talos_version, o.digest, \
                     o.config_version, o.access_version \
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
            })
        })
        .await
    }
}
