//! Identities (§2): registering a principal with its roles (a token never holds
//! approver), and revoking one, which withdraws every approval it made and ends its
//! blanket approvals (choice §10.6).

use crate::contract::Role;
use crate::contract::plan::PlanEvent;
use crate::store::acts::approvals::Withdrawal;
use crate::store::common::*;
use crate::store::engine::SqlStore;
use crate::store::lookups::{lock_machine, require_role};
use crate::store::sql::query;
use crate::store::{Actor, PrincipalKind, PrincipalSpec, StoreError, StoreResult};

impl SqlStore {
    /// [`Store::register_principal`](crate::store::Store::register_principal): register an
    /// identity with its roles.
    pub(in crate::store) async fn register_principal(
        &self,
        spec: PrincipalSpec,
    ) -> StoreResult<()> {
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

    /// [`Store::revoke_identity`](crate::store::Store::revoke_identity): revoke an identity
    /// (recovery-admin); locks the principal row.
    pub(in crate::store) async fn revoke_identity(
        &self,
        actor: &Actor,
        principal: &str,
    ) -> StoreResult<()> {
        const ACT: &str = "revoking an identity";
        self.transaction(|tx| {
            Box::pin(async move {
                // Machines first, in a fixed order, as every commitment locks them; then
                // the principal row.
                let rows = query(
                    "SELECT DISTINCT p.machine_id FROM approvals a JOIN plans p ON \
                     p.id = a.plan_id WHERE a.approver_id = $1 ORDER BY \
                     p.machine_id",
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
                let row = query("SELECT revoked FROM principals WHERE id = $1 FOR UPDATE")
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
}
