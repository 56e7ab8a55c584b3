//! The service's routes: health, metrics, and the JSON API (`/api/v1/…`) for the
//! acts of the command set. Every API route needs a proven principal (see
//! [`super::auth`]); every act names the role it is made in (`"as"`), which the store
//! checks the principal holds.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::Deserialize;
use serde_json::json;

use super::App;
use super::auth::{Principal, Proof, cookie};
use crate::acts::{ActError, Acts, Deadlines, Direct, EntryRequest, PlanRequest, PublishRequest};
use crate::contract::{Role, SpanMs};
use crate::store::{
    AccountingRequest, Actor, CertificateOrigin, MachineSpec, PrincipalKind, PrincipalSpec,
    ScopeAccounting, StoreError,
};

/// The largest release a publisher may upload in one request (its configurations,
/// base64-encoded).
const RELEASE_LIMIT: usize = 64 * 1024 * 1024;

/// The principal a connection's verified client certificate names, with the
/// certificate's fingerprint, if any.
#[derive(Debug, Clone)]
pub(crate) struct Peer(pub(crate) Option<super::tls::PeerCertificate>);

/// The name of the approval page's session cookie.
pub(crate) const SESSION: &str = "infra_talos_session";

/// A refusal as the API answers it.
#[derive(Debug)]
pub(crate) struct Problem {
    pub(crate) status: StatusCode,
    pub(crate) text: String,
    /// The act's refusal as it was made, for the command line to say again.
    pub(crate) refusal: Option<ActError>,
}

impl Problem {
    pub(crate) fn new(status: StatusCode, text: impl Into<String>) -> Problem {
        Problem {
            status,
            text: text.into(),
            refusal: None,
        }
    }

    pub(crate) fn unauthenticated() -> Problem {
        Problem::new(
            StatusCode::UNAUTHORIZED,
            "no proven principal: present a client certificate from the installation's \
             authority, or a token this service issued",
        )
    }
}

impl From<StoreError> for Problem {
    fn from(e: StoreError) -> Problem {
        let status = match &e {
            StoreError::Exists { .. } => Some(StatusCode::CONFLICT),
            StoreError::NotFound { .. } => Some(StatusCode::NOT_FOUND),
            _ => None,
        };
        let mut problem = Problem::from(ActError::from(e));
        if let Some(status) = status {
            problem.status = status;
        }
        problem
    }
}

impl From<ActError> for Problem {
    fn from(e: ActError) -> Problem {
        let status = match &e {
            ActError::Usage(_) => StatusCode::BAD_REQUEST,
            ActError::Refused(_) => StatusCode::FORBIDDEN,
            ActError::MissingMachine { .. } => StatusCode::NOT_FOUND,
            ActError::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            ActError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        Problem {
            status,
            text: e.to_string(),
            refusal: Some(e),
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = match &self.refusal {
            Some(refusal) => json!({ "error": self.text, "refusal": refusal }),
            None => json!({ "error": self.text }),
        };
        (self.status, Json(body)).into_response()
    }
}

type Answer = Result<Response, Problem>;

fn ok(value: serde_json::Value) -> Answer {
    Ok(Json(value).into_response())
}

/// Data as the answer's JSON (written straight out: identifiers wider than 64 bits
/// stay numbers).
fn answer<T: serde::Serialize>(value: T) -> Answer {
    Ok(Json(value).into_response())
}

/// The service's routes, page included.
pub(crate) fn router(app: Arc<App>) -> Router {
    let api = Router::new()
        .route("/tokens", post(issue_token))
        .route("/whoami", get(whoami))
        .route("/recovery", get(recovery))
        .route("/plans", get(plans).post(create_plan))
        .route("/plans/{id}", get(plan))
        .route("/plans/{id}/approve", post(approve))
        .route("/plans/{id}/revoke", post(revoke))
        .route("/plans/{id}/cancel", post(cancel))
        .route("/plans/{id}/run", post(run_plan))
        .route("/resume", post(resume))
        .route(
            "/releases",
            post(publish).layer(DefaultBodyLimit::max(RELEASE_LIMIT)),
        )
        .route("/inventory", get(inventory))
        .route("/drift", post(drift))
        .route("/accounting", post(account))
        .route("/recovery/enter", post(enter_recovery))
        .route("/recovery/observe", post(observe_recovery))
        .route("/recovery/account", post(account_scopes))
        .route("/recovery/{machine}/mark", post(mark_scope))
        .route("/recovery/{machine}/release", post(release_scope))
        .route("/recovery/leave", post(leave_recovery))
        .route("/machines", get(machines).post(add_machine))
        .route("/machines/{id}/timeline", get(timeline))
        .route("/machines/{id}/freeze", post(freeze))
        .route("/machines/{id}/unfreeze", post(unfreeze))
        .route("/blankets", get(blankets).post(grant_blanket))
        .route("/blankets/{id}/revoke", post(revoke_blanket))
        .route("/principals", get(principals).post(register))
        .route("/principals/{id}/roles", post(change_roles))
        .route("/principals/{id}/revoke", post(revoke_identity))
        .route("/identity-journal", get(journal))
        .route("/principals/{id}/certificates", post(bind_certificate));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(super::metrics_route))
        .nest("/api/v1", api)
        .merge(super::pages::routes())
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            super::recovery_start::gate,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            super::count_status,
        ))
        .layer(axum::middleware::map_response(super::headers::secure))
        .with_state(app)
}

/// The proven principal of a request: its certificate's, or a bearer or session
/// token's; registered and unrevoked.
pub(crate) async fn principal(
    app: &App,
    peer: &Peer,
    headers: &HeaderMap,
) -> Result<Principal, Problem> {
    let found = if let Some(certificate) = &peer.0 {
        Some(Principal {
            id: certificate.id.clone(),
            proof: Proof::Certificate,
            roles: Vec::new(),
        })
    } else if let Some(token) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        app.signer
            .verify(token, app.wall.system_time())
            .map(|id| Principal {
                id,
                proof: Proof::Bearer,
                roles: Vec::new(),
            })
    } else {
        session_token(headers).and_then(|token| {
            app.signer
                .verify(token, app.wall.system_time())
                .map(|id| Principal {
                    id,
                    proof: Proof::Session,
                    roles: Vec::new(),
                })
        })
    };
    let mut principal = found.ok_or_else(Problem::unauthenticated)?;
    admitted(app, &principal, peer).await?;
    let known = app.timed(app.store.principals()).await?;
    let Some(held) = known
        .into_iter()
        .find(|p| p.id == principal.id && !p.revoked)
    else {
        return Err(Problem::new(
            StatusCode::UNAUTHORIZED,
            format!("{} is not a registered, unrevoked principal", principal.id),
        ));
    };
    principal.roles = held.roles;
    Ok(principal)
}

/// Refuses a principal the denied-subject list names (by any proof), and a
/// certificate the store does not bind to it (see [`crate::identity::admit`]).
async fn admitted(app: &App, principal: &Principal, peer: &Peer) -> Result<(), Problem> {
    let denied = match &app.denied {
        Some(list) => Some(list.read().map_err(|e| {
            Problem::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("cannot authenticate: {e}"),
            )
        })?),
        None => None,
    };
    let refused =
        |e: crate::identity::Refusal| Problem::new(StatusCode::UNAUTHORIZED, e.to_string());
    match (&peer.0, principal.proof) {
        (Some(certificate), Proof::Certificate) => {
            let bindings = app.timed(app.store.certificates()).await?;
            crate::identity::admit(
                &principal.id,
                &certificate.fingerprint,
                &bindings,
                denied.as_ref(),
            )
            .map_err(refused)
        }
        _ => match denied.and_then(|d| d.refusal(&principal.id, None)) {
            Some(why) => Err(refused(crate::identity::Refusal::Denied(why))),
            None => Ok(()),
        },
    }
}

/// The session token the page's cookie carries.
pub(crate) fn session_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::COOKIE)
        .and_then(|v| v.to_str().ok())
        .and_then(|c| cookie(c, SESSION))
}

/// An API request's proven principal, outside recovery mode: the extractor every
/// route but health, metrics, tokens, `whoami` and the recovery status takes.
pub(crate) struct Caller(pub(crate) Principal);

impl axum::extract::FromRequestParts<Arc<App>> for Caller {
    type Rejection = Problem;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        app: &Arc<App>,
    ) -> Result<Self, Problem> {
        caller(app, &peer_of(parts), &parts.headers)
            .await
            .map(Caller)
    }
}

/// The principal the connection's certificate proved, if any.
fn peer_of(parts: &axum::http::request::Parts) -> Peer {
    parts
        .extensions
        .get::<Peer>()
        .cloned()
        .unwrap_or(Peer(None))
}

/// An API request's principal, refused in recovery mode.
async fn caller(app: &App, peer: &Peer, headers: &HeaderMap) -> Result<Principal, Problem> {
    let principal = principal(app, peer, headers).await?;
    refuse_in_recovery(app).await?;
    Ok(principal)
}

pub(crate) async fn refuse_in_recovery(app: &App) -> Result<(), Problem> {
    if app.in_recovery().await? {
        return Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "recovery mode is in effect: this service answers liveness, metrics, the \
             recovery status and acts, and the acts recovery never stops (revoking an \
             approval, a blanket grant or an identity; cancelling a plan; freezing a \
             machine); everything else waits until every scope is released and recovery \
             mode is left",
        ));
    }
    Ok(())
}

/// An API request's proven principal, in recovery mode too: the recovery routes'
/// (entry included), and those of the acts §7.5 always allows — revoking an
/// approval, a blanket grant or an identity, cancelling a plan, freezing a scope.
/// Everything else takes [`Caller`] and is refused in recovery mode.
pub(crate) struct Recoverer(pub(crate) Principal);

impl axum::extract::FromRequestParts<Arc<App>> for Recoverer {
    type Rejection = Problem;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        app: &Arc<App>,
    ) -> Result<Self, Problem> {
        principal(app, &peer_of(parts), &parts.headers)
            .await
            .map(Recoverer)
    }
}

fn acting(principal: &Principal, role: &str) -> Result<Actor, Problem> {
    let role: Role = role
        .parse()
        .map_err(|e: String| Problem::new(StatusCode::BAD_REQUEST, e))?;
    Ok(Actor::new(principal.id.clone(), role))
}

/// Acts made by `principal` in `role`.
fn acts(app: &App, principal: &Principal, role: &str) -> Result<Direct, Problem> {
    Ok(app.grounds.acting(Ok(acting(principal, role)?)))
}

/// Reads, and the controller's acts a principal asks for (no role of theirs).
fn reading(app: &App, principal: &Principal) -> Direct {
    app.grounds.acting(Err(format!(
        "{} asked without a role: an act names the role it is made in (\"as\")",
        principal.id
    )))
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(app): State<Arc<App>>) -> Response {
    if app.stopping.load(std::sync::atomic::Ordering::SeqCst) {
        return (StatusCode::SERVICE_UNAVAILABLE, "stopping\n").into_response();
    }
    match app.awaiting_entry().await {
        Ok(false) => {}
        Ok(true) => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "awaiting recovery-mode entry\n",
            )
                .into_response();
        }
        Err(e) => {
            return (StatusCode::SERVICE_UNAVAILABLE, format!("store: {e}\n")).into_response();
        }
    }
    match app.in_recovery().await {
        Ok(false) => (StatusCode::OK, "ready\n").into_response(),
        Ok(true) => (StatusCode::SERVICE_UNAVAILABLE, "recovery mode\n").into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("store: {e}\n")).into_response(),
    }
}

#[derive(Deserialize)]
struct TokenRequest {
    /// Seconds; at most twelve hours.
    lifetime_secs: Option<u64>,
}

async fn issue_token(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    headers: HeaderMap,
    body: Option<Json<TokenRequest>>,
) -> Answer {
    let principal = principal(&app, &peer, &headers).await?;
    if principal.proof != Proof::Certificate {
        return Err(Problem::new(
            StatusCode::FORBIDDEN,
            "a token is issued only to a principal proven by its client certificate",
        ));
    }
    let lifetime = Duration::from_secs(body.and_then(|b| b.lifetime_secs).unwrap_or(900));
    let (token, expires) = app
        .signer
        .issue(&principal.id, app.wall.system_time(), lifetime)
        .map_err(|e| Problem::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    ok(json!({ "principal": principal.id, "token": token, "expiresAtMs": expires }))
}

async fn whoami(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    headers: HeaderMap,
) -> Answer {
    let principal = principal(&app, &peer, &headers).await?;
    let roles = &principal.roles;
    let roles: Vec<String> = roles.iter().map(ToString::to_string).collect();
    ok(
        json!({ "principal": principal.id, "proof": format!("{:?}", principal.proof), "roles": roles }),
    )
}

async fn recovery(State(app): State<Arc<App>>, Recoverer(principal): Recoverer) -> Answer {
    answer(reading(&app, &principal).recovery_status().await?)
}

async fn plans(State(app): State<Arc<App>>, Caller(p): Caller) -> Answer {
    answer(reading(&app, &p).plans().await?)
}

async fn plan(State(app): State<Arc<App>>, Caller(_): Caller, Path(id): Path<String>) -> Answer {
    answer(app.timed(app.store.plan(&id)).await?)
}

async fn machines(State(app): State<Arc<App>>, Caller(p): Caller) -> Answer {
    answer(reading(&app, &p).machines().await?)
}

async fn inventory(State(app): State<Arc<App>>, Caller(p): Caller) -> Answer {
    answer(reading(&app, &p).inventory().await?)
}

async fn timeline(
    State(app): State<Arc<App>>,
    Caller(p): Caller,
    Path(id): Path<String>,
) -> Answer {
    answer(reading(&app, &p).history(&id).await?)
}

async fn blankets(State(app): State<Arc<App>>, Caller(p): Caller) -> Answer {
    answer(reading(&app, &p).blankets().await?)
}

async fn principals(State(app): State<Arc<App>>, Caller(p): Caller) -> Answer {
    answer(reading(&app, &p).principals().await?)
}

async fn journal(State(app): State<Arc<App>>, Caller(p): Caller) -> Answer {
    answer(reading(&app, &p).identity_journal().await?)
}

/// An act's body: the role it is made in, and what some acts need.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ActBody {
    #[serde(rename = "as")]
    role: String,
    #[serde(default)]
    blanket: bool,
    reason: Option<String>,
}

fn reason(body: &ActBody) -> Result<&str, Problem> {
    body.reason
        .as_deref()
        .ok_or_else(|| Problem::new(StatusCode::BAD_REQUEST, "a reason is required"))
}

async fn approve(
    State(app): State<Arc<App>>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    Json(body): Json<ActBody>,
) -> Answer {
    let acts = acts(&app, &principal, &body.role)?;
    let approval = acts.approve(&id, body.blanket).await?;
    answer(approval)
}

async fn revoke(
    State(app): State<Arc<App>>,
    Recoverer(principal): Recoverer,
    Path(id): Path<String>,
    Json(body): Json<ActBody>,
) -> Answer {
    acts(&app, &principal, &body.role)?
        .revoke_approval(&id)
        .await?;
    ok(json!({ "plan": id, "revokedBy": principal.id }))
}

async fn cancel(
    State(app): State<Arc<App>>,
    Recoverer(principal): Recoverer,
    Path(id): Path<String>,
    Json(body): Json<ActBody>,
) -> Answer {
    acts(&app, &principal, &body.role)?.cancel(&id).await?;
    ok(json!({ "plan": id, "cancelledBy": principal.id }))
}

async fn freeze(
    State(app): State<Arc<App>>,
    Recoverer(principal): Recoverer,
    Path(id): Path<String>,
    Json(body): Json<ActBody>,
) -> Answer {
    acts(&app, &principal, &body.role)?
        .freeze(&id, reason(&body)?)
        .await?;
    ok(json!({ "machine": id, "frozenBy": principal.id }))
}

async fn unfreeze(
    State(app): State<Arc<App>>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    Json(body): Json<ActBody>,
) -> Answer {
    acts(&app, &principal, &body.role)?
        .unfreeze(&id, reason(&body)?)
        .await?;
    ok(json!({ "machine": id, "unfrozenBy": principal.id }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantBody {
    #[serde(rename = "as")]
    role: String,
    cluster: String,
    reason: String,
    lasting_secs: u64,
}

async fn grant_blanket(
    State(app): State<Arc<App>>,
    Caller(principal): Caller,
    Json(body): Json<GrantBody>,
) -> Answer {
    let lasting = SpanMs(body.lasting_secs.saturating_mul(1000));
    let granted = acts(&app, &principal, &body.role)?
        .grant_blanket(&body.cluster, &body.reason, lasting)
        .await?;
    answer(granted)
}

async fn revoke_blanket(
    State(app): State<Arc<App>>,
    Recoverer(principal): Recoverer,
    Path(id): Path<String>,
    Json(body): Json<ActBody>,
) -> Answer {
    acts(&app, &principal, &body.role)?
        .revoke_blanket(&id)
        .await?;
    ok(json!({ "blanket": id, "revokedBy": principal.id }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegisterBody {
    #[serde(rename = "as")]
    role: String,
    id: String,
    roles: Vec<String>,
    #[serde(default)]
    token: bool,
    responsible: Option<String>,
}

fn roles(names: &[String]) -> Result<Vec<Role>, Problem> {
    names
        .iter()
        .map(|n| {
            n.parse()
                .map_err(|e: String| Problem::new(StatusCode::BAD_REQUEST, e))
        })
        .collect()
}

async fn register(
    State(app): State<Arc<App>>,
    Caller(principal): Caller,
    Json(body): Json<RegisterBody>,
) -> Answer {
    let kind = if body.token {
        PrincipalKind::Token {
            responsible: body.responsible.clone(),
        }
    } else {
        PrincipalKind::Human
    };
    let spec = PrincipalSpec {
        id: body.id.clone(),
        kind,
        roles: roles(&body.roles)?,
    };
    acts(&app, &principal, &body.role)?
        .register_principal(spec)
        .await?;
    ok(json!({ "principal": body.id, "registeredBy": principal.id }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RolesBody {
    #[serde(rename = "as")]
    role: String,
    roles: Vec<String>,
}

async fn change_roles(
    State(app): State<Arc<App>>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    Json(body): Json<RolesBody>,
) -> Answer {
    acts(&app, &principal, &body.role)?
        .change_roles(&id, roles(&body.roles)?)
        .await?;
    ok(json!({ "principal": id, "roles": body.roles, "changedBy": principal.id }))
}

async fn revoke_identity(
    State(app): State<Arc<App>>,
    Recoverer(principal): Recoverer,
    Path(id): Path<String>,
    Json(body): Json<ActBody>,
) -> Answer {
    acts(&app, &principal, &body.role)?
        .revoke_identity(&id)
        .await?;
    ok(json!({ "principal": id, "revokedBy": principal.id }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CertificateBody {
    #[serde(rename = "as")]
    role: String,
    /// The certificate, PEM (no key: a certificate is public).
    certificate: String,
    origin: CertificateOrigin,
}

async fn bind_certificate(
    State(app): State<Arc<App>>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    Json(body): Json<CertificateBody>,
) -> Answer {
    let fingerprint = acts(&app, &principal, &body.role)?
        .bind_certificate(&id, &body.certificate, body.origin)
        .await?;
    ok(json!({ "principal": id, "fingerprint": fingerprint, "boundBy": principal.id }))
}

/// The body of an act carrying one piece of data besides its role.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct With<T> {
    #[serde(rename = "as")]
    role: String,
    #[serde(
        alias = "spec",
        alias = "release",
        alias = "plan",
        alias = "request",
        alias = "entry"
    )]
    data: T,
}

/// Only a role.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleOnly {
    #[serde(rename = "as")]
    role: String,
}

async fn add_machine(
    State(app): State<Arc<App>>,
    Caller(principal): Caller,
    Json(body): Json<With<MachineSpec>>,
) -> Answer {
    let id = body.data.id.clone();
    acts(&app, &principal, &body.role)?
        .add_machine(body.data)
        .await?;
    ok(json!({ "machine": id, "addedBy": principal.id }))
}

async fn publish(
    State(app): State<Arc<App>>,
    Caller(principal): Caller,
    Json(body): Json<With<PublishRequest>>,
) -> Answer {
    let published = acts(&app, &principal, &body.role)?
        .publish(body.data)
        .await?;
    tracing::info!(release = %published.release, by = %principal.id, "release published");
    answer(published)
}

async fn create_plan(
    State(app): State<Arc<App>>,
    Caller(principal): Caller,
    Json(body): Json<With<PlanRequest>>,
) -> Answer {
    let created = acts(&app, &principal, &body.role)?
        .create_plan(body.data)
        .await?;
    answer(created)
}

/// The service's own deadlines govern; these only satisfy the signature.
const SERVICE_DEADLINES: Deadlines = Deadlines {
    settle_floor_secs: 30,
    max_transport_deadline_secs: 300,
};

async fn run_plan(
    State(app): State<Arc<App>>,
    Caller(principal): Caller,
    Path(id): Path<String>,
) -> Answer {
    tracing::info!(plan = %id, by = %principal.id, "run asked for");
    let report = reading(&app, &principal)
        .run(Some(&id), SERVICE_DEADLINES)
        .await?;
    answer(report)
}

async fn resume(State(app): State<Arc<App>>, Caller(principal): Caller) -> Answer {
    tracing::info!(by = %principal.id, "resume asked for");
    let report = reading(&app, &principal)
        .run(None, SERVICE_DEADLINES)
        .await?;
    answer(report)
}

async fn drift(State(app): State<Arc<App>>, Caller(principal): Caller) -> Answer {
    answer(reading(&app, &principal).drift().await?)
}

async fn account(
    State(app): State<Arc<App>>,
    Caller(principal): Caller,
    Json(body): Json<With<AccountingRequest>>,
) -> Answer {
    acts(&app, &principal, &body.role)?
        .account(body.data)
        .await?;
    ok(json!({ "accountedBy": principal.id }))
}

async fn enter_recovery(
    State(app): State<Arc<App>>,
    Recoverer(principal): Recoverer,
    Json(body): Json<With<EntryRequest>>,
) -> Answer {
    let entered = acts(&app, &principal, &body.role)?
        .enter_recovery(body.data)
        .await?;
    tracing::warn!(epoch = %entered.epoch, by = %principal.id, "recovery mode entered");
    answer(entered)
}

async fn observe_recovery(State(app): State<Arc<App>>, Recoverer(principal): Recoverer) -> Answer {
    let pass = reading(&app, &principal)
        .observe_recovery(SERVICE_DEADLINES)
        .await?;
    answer(pass)
}

async fn account_scopes(
    State(app): State<Arc<App>>,
    Recoverer(principal): Recoverer,
    Json(body): Json<With<ScopeAccounting>>,
) -> Answer {
    let lines = acts(&app, &principal, &body.role)?
        .account_scopes(body.data)
        .await?;
    answer(lines)
}

async fn mark_scope(
    State(app): State<Arc<App>>,
    Recoverer(principal): Recoverer,
    Path(machine): Path<String>,
    Json(body): Json<RoleOnly>,
) -> Answer {
    let marked = acts(&app, &principal, &body.role)?
        .mark_scope(&machine)
        .await?;
    answer(marked)
}

async fn release_scope(
    State(app): State<Arc<App>>,
    Recoverer(principal): Recoverer,
    Path(machine): Path<String>,
    Json(body): Json<RoleOnly>,
) -> Answer {
    acts(&app, &principal, &body.role)?
        .release_scope(&machine)
        .await?;
    ok(json!({ "machine": machine, "releasedBy": principal.id }))
}

async fn leave_recovery(
    State(app): State<Arc<App>>,
    Recoverer(principal): Recoverer,
    Json(body): Json<RoleOnly>,
) -> Answer {
    acts(&app, &principal, &body.role)?.leave_recovery().await?;
    ok(json!({ "leftBy": principal.id }))
}
