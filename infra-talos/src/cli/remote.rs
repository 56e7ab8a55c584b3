//! `--server URL`: the command set's acts made through the service's JSON API
//! instead of on the database.
//!
//! The service is verified against the installation's authority (`--server-ca`,
//! the `ca.crt` of `init --pki`). The caller is proven by its client certificate
//! (`--certificate`, `--private-key`), or by a token the service issued
//! (`--token-file`, from `infra-talos token`); the service answers who that is, and
//! every act is made in the role `--as` names. A refusal comes back as the store
//! stated it, so the command line says the same words by either road.

use std::path::Path;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{Config, Failure};
use crate::acts::{
    ActError, ActResult, Acts, Approval, CreatedPlan, Deadlines, Entered, EntryRequest,
    InventoryRow, MachineHistory, Marked, PlanRequest, PublishRequest, Published, RecoveryStatus,
    RunReport, ScopeLine,
};
use crate::contract::{Role, SpanMs};
use crate::controller::{DriftPass, RecoveryPass};
use crate::serve::segment as seg;
use crate::store::{
    AccountingRequest, Actor, BlanketApproval, CertificateOrigin, IdentityEvent, MachineSpec,
    MachineView, PlanView, PrincipalKind, PrincipalSpec, PrincipalView, ScopeAccounting,
};

/// How long one request may take; a run or a pass waits on machines.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(900);

/// The service, as one proven principal reaches it.
pub(super) struct Remote {
    base: String,
    client: reqwest::Client,
    /// A bearer token, when the caller is proven by one.
    token: Option<zeroize::Zeroizing<String>>,
    /// The principal the service proved, in the role asked for.
    actor: Result<Actor, String>,
}

fn read(path: &Path, what: &str) -> Result<String, Failure> {
    std::fs::read_to_string(path)
        .map_err(|e| Failure::Usage(format!("cannot read the {what} {}: {e}", path.display())))
}

fn tls(config: &Config) -> Result<rustls::ClientConfig, Failure> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let ca_path = config.server_ca.as_ref().ok_or_else(|| {
        Failure::Usage(
            "--server needs the installation's authority to verify the service: give \
             --server-ca FILE (or `server_ca` in the configuration)"
                .into(),
        )
    })?;
    let bad = |what: &str, path: &Path, e: &dyn std::fmt::Display| {
        Failure::Usage(format!("the {what} {} is not usable: {e}", path.display()))
    };
    let ca = read(ca_path, "authority certificate")?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        let cert = cert.map_err(|e| bad("authority certificate", ca_path, &e))?;
        roots
            .add(cert)
            .map_err(|e| bad("authority certificate", ca_path, &e))?;
    }
    if roots.is_empty() {
        return Err(bad(
            "authority certificate",
            ca_path,
            &"it holds no PEM certificate",
        ));
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Failure::Usage(e.to_string()))?
        .with_root_certificates(roots);
    if config.token_file.is_some() {
        return Ok(builder.with_no_client_auth());
    }
    let (Some(cert_path), Some(key_path)) = (&config.certificate, &config.private_key) else {
        return Err(Failure::Usage(
            "no proof of identity for the service: give a client certificate and its key \
             (--certificate, --private-key) or a token (--token-file)"
                .into(),
        ));
    };
    let cert = read(cert_path, "certificate")?;
    let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad("certificate", cert_path, &e))?;
    let key_pem = zeroize::Zeroizing::new(read(key_path, "private key")?);
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| bad("private key", key_path, &e))?;
    builder
        .with_client_auth_cert(chain, key)
        .map_err(|e| bad("certificate", cert_path, &e))
}

impl Remote {
    /// Reaches the service at `base` and learns who the configured proof names.
    pub(super) async fn connect(config: &Config, base: &str) -> Result<Remote, Failure> {
        let base = base.trim_end_matches('/');
        if !base.starts_with("https://") {
            return Err(Failure::Usage(format!(
                "--server {base:?}: the service is reached over HTTPS only (https://HOST:PORT)"
            )));
        }
        let client = reqwest::Client::builder()
            .use_preconfigured_tls(tls(config)?)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| Failure::Usage(format!("--server: {e}")))?;
        let token = match &config.token_file {
            None => None,
            Some(path) => {
                let text = zeroize::Zeroizing::new(read(path, "token file")?);
                Some(zeroize::Zeroizing::new(text.trim().to_owned()))
            }
        };
        let mut remote = Remote {
            base: base.to_owned(),
            client,
            token,
            actor: Err(String::new()),
        };
        let who: Value = remote
            .call(Method::GET, "/whoami", None::<&()>)
            .await
            .map_err(Failure::from)?;
        let principal = who["principal"].as_str().unwrap_or_default().to_owned();
        remote.actor = match &config.role {
            None => Err("no acting role: give --as ROLE (or `role` in the configuration)".into()),
            Some(role) => role.parse::<Role>().map(|r| Actor::new(principal, r)),
        };
        Ok(remote)
    }

    /// Asks the service for a token naming the proven principal.
    pub(super) async fn token(&self, lifetime: SpanMs) -> ActResult<Value> {
        self.call(
            Method::POST,
            "/tokens",
            Some(&json!({ "lifetime_secs": lifetime.0 / 1000 })),
        )
        .await
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
    ) -> ActResult<T> {
        let url = format!("{}/api/v1{path}", self.base);
        let mut request = self.client.request(method, &url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token.as_str());
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| {
            ActError::Unavailable(format!(
                "cannot reach the service at {}: {}",
                self.base,
                causes(&e)
            ))
        })?;
        let status = response.status();
        let text = response.text().await.map_err(|e| {
            ActError::Unavailable(format!("the service's answer was cut short: {e}"))
        })?;
        if status.is_success() {
            return serde_json::from_str(&text).map_err(|e| {
                ActError::Unavailable(format!("the service's answer is not understood: {e}"))
            });
        }
        Err(problem(status, &text))
    }

    async fn act<T: DeserializeOwned>(&self, path: &str, body: Value) -> ActResult<T> {
        let role = self.actor()?.role.to_string();
        let mut body = body;
        body["as"] = Value::String(role);
        self.call(Method::POST, path, Some(&body)).await
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> ActResult<T> {
        self.call(Method::GET, path, None::<&()>).await
    }
}

/// An error with its causes, outermost first: a transport error's own text does not
/// say whether the connection, the handshake or the certificate failed.
fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A refusal as the service answered it.
fn problem(status: StatusCode, text: &str) -> ActError {
    let body: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    if let Some(refusal) = body
        .get("refusal")
        .and_then(|r| serde_json::from_value::<ActError>(r.clone()).ok())
    {
        return refusal;
    }
    let said = body["error"]
        .as_str()
        .map_or_else(|| format!("the service answered {status}"), str::to_owned);
    match status {
        StatusCode::UNAUTHORIZED => ActError::Unauthenticated(said),
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::INTERNAL_SERVER_ERROR => {
            ActError::Unavailable(said)
        }
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => ActError::Usage(said),
        _ => ActError::Refused(said),
    }
}

type Nothing = Value;

/// The service's answer to a binding.
#[derive(serde::Deserialize)]
struct Bound {
    fingerprint: String,
}

#[async_trait::async_trait]
impl Acts for Remote {
    fn actor(&self) -> ActResult<Actor> {
        self.actor.clone().map_err(ActError::Usage)
    }

    async fn machines(&self) -> ActResult<Vec<MachineView>> {
        self.get("/machines").await
    }

    async fn add_machine(&self, spec: MachineSpec) -> ActResult<()> {
        let _: Nothing = self.act("/machines", json!({ "spec": spec })).await?;
        Ok(())
    }

    async fn inventory(&self) -> ActResult<Vec<InventoryRow>> {
        self.get("/inventory").await
    }

    async fn publish(&self, request: PublishRequest) -> ActResult<Published> {
        self.act("/releases", json!({ "release": request })).await
    }

    async fn plans(&self) -> ActResult<Vec<PlanView>> {
        self.get("/plans").await
    }

    async fn create_plan(&self, request: PlanRequest) -> ActResult<CreatedPlan> {
        self.act("/plans", json!({ "plan": request })).await
    }

    async fn approve(&self, plan: &str, blanket: bool) -> ActResult<Approval> {
        let path = format!("/plans/{}/approve", seg(plan));
        self.act(&path, json!({ "blanket": blanket })).await
    }

    async fn revoke_approval(&self, plan: &str) -> ActResult<()> {
        let path = format!("/plans/{}/revoke", seg(plan));
        let _: Nothing = self.act(&path, json!({})).await?;
        Ok(())
    }

    async fn cancel(&self, plan: &str) -> ActResult<()> {
        let path = format!("/plans/{}/cancel", seg(plan));
        let _: Nothing = self.act(&path, json!({})).await?;
        Ok(())
    }

    async fn run(&self, plan: Option<&str>, _: Deadlines) -> ActResult<RunReport> {
        // The service runs with its own settle floor and deadlines.
        let path = plan.map_or_else(
            || "/resume".to_owned(),
            |p| format!("/plans/{}/run", seg(p)),
        );
        self.call(Method::POST, &path, Some(&json!({}))).await
    }

    async fn blankets(&self) -> ActResult<Vec<BlanketApproval>> {
        self.get("/blankets").await
    }

    async fn grant_blanket(
        &self,
        cluster: &str,
        reason: &str,
        lasting: SpanMs,
    ) -> ActResult<BlanketApproval> {
        let body =
            json!({ "cluster": cluster, "reason": reason, "lasting_secs": lasting.0 / 1000 });
        self.act("/blankets", body).await
    }

    async fn revoke_blanket(&self, id: &str) -> ActResult<()> {
        let path = format!("/blankets/{}/revoke", seg(id));
        let _: Nothing = self.act(&path, json!({})).await?;
        Ok(())
    }

    async fn freeze(&self, machine: &str, reason: &str) -> ActResult<()> {
        let path = format!("/machines/{}/freeze", seg(machine));
        let _: Nothing = self.act(&path, json!({ "reason": reason })).await?;
        Ok(())
    }

    async fn unfreeze(&self, machine: &str, reason: &str) -> ActResult<()> {
        let path = format!("/machines/{}/unfreeze", seg(machine));
        let _: Nothing = self.act(&path, json!({ "reason": reason })).await?;
        Ok(())
    }

    async fn history(&self, machine: &str) -> ActResult<MachineHistory> {
        self.get(&format!("/machines/{}/timeline", seg(machine)))
            .await
    }

    async fn drift(&self) -> ActResult<DriftPass> {
        self.call(Method::POST, "/drift", Some(&json!({}))).await
    }

    async fn account(&self, request: AccountingRequest) -> ActResult<()> {
        let _: Nothing = self
            .act("/accounting", json!({ "request": request }))
            .await?;
        Ok(())
    }

    async fn enter_recovery(&self, request: EntryRequest) -> ActResult<Entered> {
        self.act("/recovery/enter", json!({ "entry": request }))
            .await
    }

    async fn recovery_status(&self) -> ActResult<RecoveryStatus> {
        self.get("/recovery").await
    }

    async fn observe_recovery(&self, _: Deadlines) -> ActResult<RecoveryPass> {
        self.call(Method::POST, "/recovery/observe", Some(&json!({})))
            .await
    }

    async fn account_scopes(&self, request: ScopeAccounting) -> ActResult<Vec<ScopeLine>> {
        self.act("/recovery/account", json!({ "request": request }))
            .await
    }

    async fn mark_scope(&self, machine: &str) -> ActResult<Marked> {
        let path = format!("/recovery/{}/mark", seg(machine));
        self.act(&path, json!({})).await
    }

    async fn release_scope(&self, machine: &str) -> ActResult<()> {
        let path = format!("/recovery/{}/release", seg(machine));
        let _: Nothing = self.act(&path, json!({})).await?;
        Ok(())
    }

    async fn leave_recovery(&self) -> ActResult<()> {
        let _: Nothing = self.act("/recovery/leave", json!({})).await?;
        Ok(())
    }

    async fn principals(&self) -> ActResult<Vec<PrincipalView>> {
        self.get("/principals").await
    }

    async fn register_principal(&self, spec: PrincipalSpec) -> ActResult<()> {
        let (token, responsible) = match spec.kind {
            PrincipalKind::Human => (false, None),
            PrincipalKind::Token { responsible } => (true, responsible),
        };
        let names: Vec<String> = spec.roles.iter().map(ToString::to_string).collect();
        let body =
            json!({ "id": spec.id, "roles": names, "token": token, "responsible": responsible });
        let _: Nothing = self.act("/principals", body).await?;
        Ok(())
    }

    async fn change_roles(&self, principal: &str, roles: Vec<Role>) -> ActResult<()> {
        let path = format!("/principals/{}/roles", seg(principal));
        let names: Vec<String> = roles.iter().map(ToString::to_string).collect();
        let _: Nothing = self.act(&path, json!({ "roles": names })).await?;
        Ok(())
    }

    async fn revoke_identity(&self, principal: &str) -> ActResult<()> {
        let path = format!("/principals/{}/revoke", seg(principal));
        let _: Nothing = self.act(&path, json!({})).await?;
        Ok(())
    }

    async fn identity_journal(&self) -> ActResult<Vec<IdentityEvent>> {
        self.get("/identity-journal").await
    }

    async fn bind_certificate(
        &self,
        principal: &str,
        certificate_pem: &str,
        origin: CertificateOrigin,
    ) -> ActResult<String> {
        let path = format!("/principals/{}/certificates", seg(principal));
        let body = json!({ "certificate": certificate_pem, "origin": origin });
        let bound: Bound = self.act(&path, body).await?;
        Ok(bound.fingerprint)
    }
}
