//! Identities (§2, and the operators' issue §1): the installation's bootstrap, made
//! once, which names the certificate authority and the first administrator;
//! registering a principal with its roles (a token never holds approver) and
//! changing them, each by an unrevoked recovery-admin; and revoking one, which
//! withdraws every approval it made and ends its blanket approvals (choice §10.6).
//! Every one of these acts is kept in the append-only identity journal.

use crate::contract::plan::PlanEvent;
use crate::contract::{InstantMs, Role};
use crate::store::acts::approvals::Withdrawal;
use crate::store::acts::certificates::{bind, check_fingerprint};
use crate::store::common::*;
use crate::store::engine::SqlStore;
use crate::store::lookups::{lock_machine, require_role};
use crate::store::sql::{Tx, query};
use crate::store::transaction::R;
use crate::store::{
    Actor, BootstrapSpec, CertificateOrigin, CertificateSpec, IdentityEvent, IdentityEventKind,
    InstallationIdentity, PrincipalKind, PrincipalSpec, PrincipalView, StoreError, StoreResult,
};

/// The act every principal change is refused under before the bootstrap.
const NOT_BOOTSTRAPPED: &str =
    "the installation has no identity root yet: bootstrap it first (`infra-talos init`)";

impl SqlStore {
    /// [`Store::bootstrap`](crate::store::Store::bootstrap): the installation's identity
    /// root, once.
    pub(in crate::store) async fn bootstrap(&self, spec: BootstrapSpec) -> StoreResult<()> {
        const ACT: &str = "bootstrapping the installation";
        let admin = &spec.administrator;
        if admin.kind != PrincipalKind::Human || !admin.roles.contains(&Role::RecoveryAdmin) {
            return Err(refused(
                ACT,
                "the first administrator is a person holding recovery-admin",
            ));
        }
        check_roles(ACT, &admin.kind, &admin.roles)?;
        if let Some(fingerprint) = &spec.administrator_certificate {
            check_fingerprint(ACT, fingerprint)?;
        }
        if !spec.ca_certificate.contains("-----BEGIN CERTIFICATE-----") {
            return Err(refused(
                ACT,
                "the certificate authority is not a PEM certificate",
            ));
        }
        let spec = &spec;
        self.transaction(|tx| {
            Box::pin(async move {
                if read_identity(tx).await?.is_some() {
                    return Err(refused(ACT, "the installation is already bootstrapped").into());
                }
                let admin = &spec.administrator;
                let existing = query("SELECT revoked FROM principals WHERE id = $1 FOR UPDATE")
                    .bind(&admin.id)
                    .fetch_optional(tx)
                    .await?;
                match existing {
                    None => insert_principal(tx, admin).await?,
                    Some(row) => {
                        let holds = query(
                            "SELECT role FROM principal_roles WHERE principal_id = $1 AND role = $2",
                        )
                        .bind(&admin.id)
                        .bind(role_name(Role::RecoveryAdmin))
                        .fetch_optional(tx)
                        .await?;
                        if row.try_get::<bool, _>("revoked")? || holds.is_none() {
                            return Err(refused(
                                ACT,
                                format!(
                                    "{} is registered already, and is revoked or does not hold \
                                     recovery-admin",
                                    admin.id
                                ),
                            )
                            .into());
                        }
                    }
                }
                let now = self.store_time(tx).await?;
                query(
                    "INSERT INTO installation_identity (singleton, ca_certificate, administrator, \
                     bootstrapped_ms) VALUES (1, $1, $2, $3)",
                )
                .bind(&spec.ca_certificate)
                .bind(&admin.id)
                .bind(now)
                .execute(tx)
                .await?;
                query("UPDATE installation SET approvals_need_second_person = $1 WHERE id = 1")
                    .bind(spec.approval_policy.needs_second_person())
                    .execute(tx)
                    .await?;
                let actor = Actor::new(admin.id.clone(), Role::RecoveryAdmin);
                let detail = format!(
                    "{}; {}",
                    roles_detail(&admin.roles),
                    spec.approval_policy
                );
                journal(tx, now, IdentityEventKind::Bootstrap, &actor, &admin.id, &detail).await?;
                if let Some(fingerprint) = &spec.administrator_certificate {
                    let certificate = CertificateSpec {
                        principal: admin.id.clone(),
                        fingerprint: fingerprint.clone(),
                        origin: CertificateOrigin::Issued,
                    };
                    bind(tx, now, &actor, &certificate).await?;
                }
                Ok(())
            })
        })
        .await
    }

    /// [`Store::installation_identity`](crate::store::Store::installation_identity).
    pub(in crate::store) async fn installation_identity(
        &self,
    ) -> StoreResult<Option<InstallationIdentity>> {
        self.transaction(|tx| Box::pin(async move { read_identity(tx).await }))
            .await
    }

    /// [`Store::register_principal`](crate::store::Store::register_principal): register an
    /// identity with its roles.
    pub(in crate::store) async fn register_principal(
        &self,
        actor: &Actor,
        spec: PrincipalSpec,
    ) -> StoreResult<()> {
        const ACT: &str = "registering a principal";
        check_roles(ACT, &spec.kind, &spec.roles)?;
        let spec = &spec;
        self.transaction(|tx| {
            Box::pin(async move {
                authorise(tx, actor, ACT).await?;
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
                insert_principal(tx, spec).await?;
                let now = self.store_time(tx).await?;
                let detail = roles_detail(&spec.roles);
                journal(
                    tx,
                    now,
                    IdentityEventKind::Registered,
                    actor,
                    &spec.id,
                    &detail,
                )
                .await
            })
        })
        .await
    }

    /// [`Store::change_roles`](crate::store::Store::change_roles): replace a principal's
    /// roles.
    pub(in crate::store) async fn change_roles(
        &self,
        actor: &Actor,
        principal: &str,
        roles: Vec<Role>,
    ) -> StoreResult<()> {
        const ACT: &str = "changing a principal's roles";
        if actor.id == principal {
            return Err(refused(ACT, "no principal changes its own roles"));
        }
        let roles = &roles;
        self.transaction(|tx| {
            Box::pin(async move {
                authorise(tx, actor, ACT).await?;
                let row = query(
                    "SELECT kind, responsible, revoked FROM principals WHERE id = $1 FOR UPDATE",
                )
                .bind(principal)
                .fetch_optional(tx)
                .await?
                .ok_or_else(|| not_found("principal", principal))?;
                if row.try_get::<bool, _>("revoked")? {
                    return Err(refused(ACT, "the identity is revoked").into());
                }
                let kind = match row.try_get::<String, _>("kind")?.as_str() {
                    "human" => PrincipalKind::Human,
                    _ => PrincipalKind::Token {
                        responsible: row.try_get("responsible")?,
                    },
                };
                check_roles(ACT, &kind, roles)?;
                query("DELETE FROM principal_roles WHERE principal_id = $1")
                    .bind(principal)
                    .execute(tx)
                    .await?;
                insert_roles(tx, principal, roles).await?;
                let now = self.store_time(tx).await?;
                let detail = roles_detail(roles);
                journal(
                    tx,
                    now,
                    IdentityEventKind::RolesChanged,
                    actor,
                    principal,
                    &detail,
                )
                .await
            })
        })
        .await
    }

    /// [`Store::principals`](crate::store::Store::principals).
    pub(in crate::store) async fn principals(&self) -> StoreResult<Vec<PrincipalView>> {
        self.transaction(|tx| {
            Box::pin(async move {
                let rows =
                    query("SELECT id, kind, responsible, revoked FROM principals ORDER BY id")
                        .fetch_all(tx)
                        .await?;
                let roles = query(
                    "SELECT principal_id, role FROM principal_roles ORDER BY principal_id, role",
                )
                .fetch_all(tx)
                .await?;
                let mut out = Vec::with_capacity(rows.len());
                for r in &rows {
                    let id: String = r.try_get("id")?;
                    let kind = match r.try_get::<String, _>("kind")?.as_str() {
                        "human" => PrincipalKind::Human,
                        _ => PrincipalKind::Token {
                            responsible: r.try_get("responsible")?,
                        },
                    };
                    let mut held = Vec::new();
                    for role in &roles {
                        if role.try_get::<String, _>("principal_id")? == id {
                            held.push(role_of(&role.try_get::<String, _>("role")?)?);
                        }
                    }
                    out.push(PrincipalView {
                        id,
                        kind,
                        roles: held,
                        revoked: r.try_get("revoked")?,
                    });
                }
                Ok(out)
            })
        })
        .await
    }

    /// [`Store::identity_journal`](crate::store::Store::identity_journal).
    pub(in crate::store) async fn identity_journal(&self) -> StoreResult<Vec<IdentityEvent>> {
        self.transaction(|tx| {
            Box::pin(async move {
                let rows = query(
                    "SELECT seq, kind, at_ms, actor, actor_role, principal, detail \
                     FROM identity_journal ORDER BY seq",
                )
                .fetch_all(tx)
                .await?;
                let mut out = Vec::with_capacity(rows.len());
                for r in &rows {
                    let kind: String = r.try_get("kind")?;
                    let kind = [
                        IdentityEventKind::Bootstrap,
                        IdentityEventKind::Registered,
                        IdentityEventKind::RolesChanged,
                        IdentityEventKind::Revoked,
                        IdentityEventKind::CertificateBound,
                    ]
                    .into_iter()
                    .find(|k| k.name() == kind)
                    .ok_or_else(|| db_err(format!("unknown identity event {kind:?}")))?;
                    out.push(IdentityEvent {
                        seq: u(r.try_get("seq")?),
                        kind,
                        at: InstantMs(u(r.try_get("at_ms")?)),
                        actor: r.try_get("actor")?,
                        actor_role: r.try_get("actor_role")?,
                        principal: r.try_get("principal")?,
                        detail: r.try_get("detail")?,
                    });
                }
                Ok(out)
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
                authorise(tx, actor, ACT).await?;
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
                journal(tx, now, IdentityEventKind::Revoked, actor, principal, "").await?;
                // Its certificates are accepted no more.
                query(
                    "UPDATE principal_certificates SET ended_ms = $2 \
                     WHERE principal_id = $1 AND ended_ms IS NULL",
                )
                .bind(principal)
                .bind(now)
                .execute(tx)
                .await?;
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

/// A token never holds approver; automation is a token's role.
fn check_roles(act: &'static str, kind: &PrincipalKind, roles: &[Role]) -> StoreResult<()> {
    let token = matches!(kind, PrincipalKind::Token { .. });
    if token && roles.contains(&Role::Approver) {
        return Err(refused(act, "a token never holds approver"));
    }
    if !token && roles.contains(&Role::Automation) {
        return Err(refused(act, "automation is a token's role"));
    }
    if roles.is_empty() {
        return Err(refused(act, "a principal holds at least one role"));
    }
    Ok(())
}

/// The actor is an unrevoked recovery-admin of a bootstrapped installation.
pub(super) async fn authorise(tx: &mut Tx, actor: &Actor, act: &'static str) -> R<()> {
    if read_identity(tx).await?.is_none() {
        return Err(refused(act, NOT_BOOTSTRAPPED).into());
    }
    require_role(tx, actor, &[Role::RecoveryAdmin], act).await?;
    Ok(())
}

async fn read_identity(tx: &mut Tx) -> R<Option<InstallationIdentity>> {
    let row = query(
        "SELECT ca_certificate, administrator, bootstrapped_ms FROM installation_identity \
         WHERE singleton = 1",
    )
    .fetch_optional(tx)
    .await?;
    let Some(r) = row else {
        return Ok(None);
    };
    // A plain read: the principal acts call this first, and must take no lock on the
    // installation row before the machine rows they may lock.
    let second_person: bool =
        query("SELECT approvals_need_second_person FROM installation WHERE id = 1")
            .fetch_one(tx)
            .await?
            .try_get("approvals_need_second_person")?;
    let approval_policy = crate::store::lookups::approval_policy(second_person);
    Ok(Some(InstallationIdentity {
        ca_certificate: r.try_get("ca_certificate")?,
        administrator: r.try_get("administrator")?,
        bootstrapped_at: InstantMs(u(r.try_get("bootstrapped_ms")?)),
        approval_policy,
    }))
}

async fn insert_principal(tx: &mut Tx, spec: &PrincipalSpec) -> R<()> {
    let (kind, responsible) = match &spec.kind {
        PrincipalKind::Human => ("human", None),
        PrincipalKind::Token { responsible } => ("token", responsible.clone()),
    };
    query("INSERT INTO principals (id, kind, responsible) VALUES ($1, $2, $3)")
        .bind(&spec.id)
        .bind(kind)
        .bind(responsible)
        .execute(tx)
        .await?;
    insert_roles(tx, &spec.id, &spec.roles).await
}

async fn insert_roles(tx: &mut Tx, principal: &str, roles: &[Role]) -> R<()> {
    for role in roles {
        query("INSERT INTO principal_roles (principal_id, role) VALUES ($1, $2)")
            .bind(principal)
            .bind(role_name(*role))
            .execute(tx)
            .await?;
    }
    Ok(())
}

fn roles_detail(roles: &[Role]) -> String {
    let mut names: Vec<&str> = roles.iter().map(|r| role_name(*r)).collect();
    names.sort_unstable();
    names.dedup();
    format!("roles: {}", names.join(", "))
}

/// Appends to the identity journal. The journal's order is its sequence; the
/// installation's identity row, locked first, serialises writers on PostgreSQL.
pub(super) async fn journal(
    tx: &mut Tx,
    now: i64,
    kind: IdentityEventKind,
    actor: &Actor,
    principal: &str,
    detail: &str,
) -> R<()> {
    query("SELECT singleton FROM installation_identity WHERE singleton = 1 FOR UPDATE")
        .fetch_optional(tx)
        .await?;
    let next: i64 = query("SELECT COALESCE(MAX(seq), 0) + 1 FROM identity_journal")
        .fetch_one(tx)
        .await?
        .try_get(0)?;
    query(
        "INSERT INTO identity_journal (seq, kind, at_ms, actor, actor_role, principal, detail) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(next)
    .bind(kind.name())
    .bind(now)
    .bind(&actor.id)
    .bind(role_name(actor.role))
    .bind(principal)
    .bind(detail)
    .execute(tx)
    .await?;
    Ok(())
}
