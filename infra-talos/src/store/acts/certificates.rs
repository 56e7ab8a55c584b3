//! Certificate bindings (issue 36, the trust root): a client certificate is accepted
//! only when its fingerprint is bound here to the principal it names, by an act
//! journaled in the identity journal — the bootstrap for the administrator's own,
//! recovery-admin for every other. Revoking an identity ends its bindings
//! (`identities`).

use crate::contract::InstantMs;
use crate::store::acts::identities::{authorise, journal};
use crate::store::common::*;
use crate::store::engine::SqlStore;
use crate::store::sql::{Tx, query};
use crate::store::transaction::R;
use crate::store::{
    Actor, CertificateBinding, CertificateSpec, IdentityEventKind, StoreError, StoreResult,
};

const ACT: &str = "binding a certificate";

impl SqlStore {
    /// [`Store::bind_certificate`](crate::store::Store::bind_certificate).
    pub(in crate::store) async fn bind_certificate(
        &self,
        actor: &Actor,
        spec: CertificateSpec,
    ) -> StoreResult<()> {
        check_fingerprint(ACT, &spec.fingerprint)?;
        let spec = &spec;
        self.transaction(|tx| {
            Box::pin(async move {
                authorise(tx, actor, ACT).await?;
                let row = query("SELECT revoked FROM principals WHERE id = $1 FOR UPDATE")
                    .bind(&spec.principal)
                    .fetch_optional(tx)
                    .await?
                    .ok_or_else(|| not_found("principal", &spec.principal))?;
                if row.try_get::<bool, _>("revoked")? {
                    return Err(refused(
                        ACT,
                        format!(
                            "{} is revoked: no certificate of it is accepted",
                            spec.principal
                        ),
                    )
                    .into());
                }
                let now = self.store_time(tx).await?;
                bind(tx, now, actor, spec).await
            })
        })
        .await
    }

    /// [`Store::certificates`](crate::store::Store::certificates).
    pub(in crate::store) async fn certificates(&self) -> StoreResult<Vec<CertificateBinding>> {
        self.transaction(|tx| {
            Box::pin(async move {
                let rows = query(
                    "SELECT fingerprint, principal_id, bound_ms, bound_by, ended_ms \
                     FROM principal_certificates ORDER BY principal_id, bound_ms, fingerprint",
                )
                .fetch_all(tx)
                .await?;
                let mut out = Vec::with_capacity(rows.len());
                for r in &rows {
                    out.push(CertificateBinding {
                        fingerprint: r.try_get("fingerprint")?,
                        principal: r.try_get("principal_id")?,
                        bound_at: InstantMs(u(r.try_get("bound_ms")?)),
                        bound_by: r.try_get("bound_by")?,
                        ended_at: r
                            .try_get::<Option<i64>, _>("ended_ms")?
                            .map(|ms| InstantMs(u(ms))),
                    });
                }
                Ok(out)
            })
        })
        .await
    }
}

/// A fingerprint is 64 lowercase hex digits.
pub(super) fn check_fingerprint(act: &'static str, fingerprint: &str) -> StoreResult<()> {
    let hex = fingerprint.len() == 64
        && fingerprint
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if hex {
        Ok(())
    } else {
        Err(refused(
            act,
            "a certificate's fingerprint is the SHA-256 of its DER, 64 lowercase hex digits",
        ))
    }
}

/// Records the binding and journals it, inside the caller's transaction.
pub(super) async fn bind(tx: &mut Tx, now: i64, actor: &Actor, spec: &CertificateSpec) -> R<()> {
    let existing = query("SELECT principal_id FROM principal_certificates WHERE fingerprint = $1")
        .bind(&spec.fingerprint)
        .fetch_optional(tx)
        .await?;
    if existing.is_some() {
        return Err(StoreError::Exists {
            what: "certificate binding",
            id: format!("sha256:{}", spec.fingerprint),
        }
        .into());
    }
    query(
        "INSERT INTO principal_certificates (fingerprint, principal_id, bound_ms, bound_by) \
         VALUES ($1, $2, $3, $4)",
    )
    .bind(&spec.fingerprint)
    .bind(&spec.principal)
    .bind(now)
    .bind(&actor.id)
    .execute(tx)
    .await?;
    let detail = format!(
        "certificate sha256:{} ({})",
        spec.fingerprint,
        spec.origin.name()
    );
    journal(
        tx,
        now,
        IdentityEventKind::CertificateBound,
        actor,
        &spec.principal,
        &detail,
    )
    .await
}
