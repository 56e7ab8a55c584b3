//! The service's routes: health, metrics, and the JSON API (`/api/v1/…`) for the
//! acts of the command set. Every API route needs a proven principal (see
//! [`super::auth`]); every act names the role it is made in (`"as"`), which the store
//! checks the principal holds.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::Deserialize;
use serde_json::json;

use super::App;
use super::auth::{Principal, Proof, cookie};
use crate::contract::{Role, SpanMs};
use crate::store::{Actor, PrincipalKind, PrincipalSpec, StoreError};

/// The principal a connection's verified client certificate names, if any.
#[derive(Debug, Clone)]
pub(crate) struct Peer(pub(crate) Option<String>);

/// The name of the approval page's session cookie.
pub(crate) const SESSION: &str = "infra_talos_session";

/// A refusal as the API answers it.
#[derive(Debug)]
pub(crate) struct Problem {
    pub(crate) status: StatusCode,
    pub(crate) text: String,
}

impl Problem {
    pub(crate) fn new(status: StatusCode, text: impl Into<String>) -> Problem {
        Problem {
            status,
            text: text.into(),
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
            StoreError::NotFound { .. } => StatusCode::NOT_FOUND,
            StoreError::Exists { .. } => StatusCode::CONFLICT,
            StoreError::Database(_) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::FORBIDDEN,
        };
        Problem::new(status, format!("refused: {e}"))
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        (self.status, Json(json!({ "error": self.text }))).into_response()
    }
}

type Answer = Result<Response, Problem>;

fn ok(value: serde_json::Value) -> Answer {
    Ok(Json(value).into_response())
}

/// The service's routes, page included.
pub(crate) fn router(app: Arc<App>) -> Router {
    let api = Router::new()
        .route("/tokens", post(issue_token))
        .route("/whoami", get(whoami))
        .route("/recovery", get(recovery))
        .route("/plans", get(plans))
        .route("/plans/{id}", get(plan))
        .route("/plans/{id}/approve", post(approve))
        .route("/plans/{id}/revoke", post(revoke))
        .route("/plans/{id}/cancel", post(cancel))
        .route("/machines", get(machines))
        .route("/machines/{id}/timeline", get(timeline))
        .route("/machines/{id}/freeze", post(freeze))
        .route("/machines/{id}/unfreeze", post(unfreeze))
        .route("/blankets", get(blankets).post(grant_blanket))
        .route("/blankets/{id}/revoke", post(revoke_blanket))
        .route("/principals", get(principals).post(register))
        .route("/principals/{id}/roles", post(change_roles))
        .route("/principals/{id}/revoke", post(revoke_identity))
        .route("/identity-journal", get(journal));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(super::metrics_route))
        .nest("/api/v1", api)
        .merge(super::pages::routes())
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            super::count_status,
        ))
        .with_state(app)
}

/// The proven principal of a request: its certificate's, or a bearer or session
/// token's; registered and unrevoked.
pub(crate) async fn principal(
    app: &App,
    peer: &Peer,
    headers: &HeaderMap,
) -> Result<Principal, Problem> {
    let found = if let Some(id) = &peer.0 {
        Some(Principal {
            id: id.clone(),
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
        let peer = parts
            .extensions
            .get::<Peer>()
            .cloned()
            .unwrap_or(Peer(None));
        caller(app, &peer, &parts.headers).await.map(Caller)
    }
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
            "recovery mode is in effect: this service answers liveness, metrics and the \
             recovery status only; use the recovery commands until every scope is released",
        ));
    }
    Ok(())
}

fn acting(principal: &Principal, role: &str) -> Result<Actor, Problem> {
    let role: Role = role
        .parse()
        .map_err(|e: String| Problem::new(StatusCode::BAD_REQUEST, e))?;
    Ok(Actor::new(principal.id.clone(), role))
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(app): State<Arc<App>>) -> Response {
    if app.stopping.load(std::sync::atomic::Ordering::SeqCst) {
        return (StatusCode::SERVICE_UNAVAILABLE, "stopping\n").into_response();
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

async fn recovery(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    headers: HeaderMap,
) -> Answer {
    principal(&app, &peer, &headers).await?;
    let machines = app.timed(app.store.machines()).await?;
    let epoch = app.timed(app.store.current_epoch()).await?;
    let scopes: Vec<serde_json::Value> = machines
        .iter()
        .map(|m| json!({ "machine": m.id, "scope": m.scope.to_string() }))
        .collect();
    ok(json!({
        "recoveryMode": machines.iter().any(|m| m.scope != crate::contract::recovery::ScopeState::Normal),
        "epoch": epoch.to_string(),
        "scopes": scopes,
    }))
}

async fn plans(State(app): State<Arc<App>>, Caller(_): Caller) -> Answer {
    ok(json!(app.timed(app.store.plans()).await?))
}

async fn plan(State(app): State<Arc<App>>, Caller(_): Caller, Path(id): Path<String>) -> Answer {
    ok(json!(app.timed(app.store.plan(&id)).await?))
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

async fn approve(
    State(app): State<Arc<App>>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    Json(body): Json<ActBody>,
) -> Answer {
    let actor = acting(&principal, &body.role)?;
    let mark = if body.blanket {
        app.store.approve_under_blanket(&actor, &id).await?
    } else {
        app.store.approve(&actor, &id).await?
    };
    ok(
        json!({ "plan": id, "approvedBy": actor.id, "underGrant": body.blanket, "selfApproval": mark.to_string() }),
    )
}

async fn revoke(
    State(app): State<Arc<App>>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    Json(body): Json<ActBody>,
) -> Answer {
    let actor = acting(&principal, &body.role)?;
    app.store.revoke_approval(&actor, &id).await?;
    ok(json!({ "plan": id, "revokedBy": actor.id }))
}

async fn cancel(
    State(app): State<Arc<App>>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    Json(body): Json<ActBody>,
) -> Answer {
    let actor = acting(&principal, &body.role)?;
    app.store.cancel_plan(&actor, &id).await?;
    ok(json!({ "plan": id, "cancelledBy": actor.id }))
}

async fn machines(State(app): State<Arc<App>>, Caller(_): Caller) -> Answer {
    ok(json!(app.timed(app.store.machines()).await?))
}

async fn timeline(
    State(app): State<Arc<App>>,
    Caller(_): Caller,
    Path(id): Path<String>,
) -> Answer {
    ok(json!(app.timed(app.store.timeline(&id)).await?))
}

fn reason(body: &ActBody) -> Result<&str, Problem> {
    body.reason
        .as_deref()
        .ok_or_else(|| Problem::new(StatusCode::BAD_REQUEST, "a reason is required"))
}

async fn freeze(
    State(app): State<Arc<App>>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    Json(body): Json<ActBody>,
) -> Answer {
    let actor = acting(&principal, &body.role)?;
    app.store.freeze(&actor, &id, reason(&body)?).await?;
    ok(json!({ "machine": id, "frozenBy": actor.id }))
}

async fn unfreeze(
    State(app): State<Arc<App>>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    Json(body): Json<ActBody>,
) -> Answer {
    let actor = acting(&principal, &body.role)?;
    app.store.unfreeze(&actor, &id, reason(&body)?).await?;
    ok(json!({ "machine": id, "unfrozenBy": actor.id }))
}

async fn blankets(State(app): State<Arc<App>>, Caller(_): Caller) -> Answer {
    ok(json!(app.timed(app.store.blanket_approvals()).await?))
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
    let actor = acting(&principal, &body.role)?;
    let lasting = SpanMs(body.lasting_secs.saturating_mul(1000));
    let granted = app
        .store
        .grant_blanket_approval(&actor, &body.cluster, &body.reason, lasting)
        .await?;
    ok(json!(granted))
}

async fn revoke_blanket(
    State(app): State<Arc<App>>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    Json(body): Json<ActBody>,
) -> Answer {
    let actor = acting(&principal, &body.role)?;
    app.store.revoke_blanket_approval(&actor, &id).await?;
    ok(json!({ "blanket": id, "revokedBy": actor.id }))
}

async fn principals(State(app): State<Arc<App>>, Caller(_): Caller) -> Answer {
    ok(json!(app.timed(app.store.principals()).await?))
}

async fn journal(State(app): State<Arc<App>>, Caller(_): Caller) -> Answer {
    ok(json!(app.timed(app.store.identity_journal()).await?))
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
    let actor = acting(&principal, &body.role)?;
    if !crate::identity::valid_identifier(&body.id) {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            format!("{:?} is not a principal identifier", body.id),
        ));
    }
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
    app.store.register_principal(&actor, spec).await?;
    ok(json!({ "principal": body.id, "registeredBy": actor.id }))
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
    let actor = acting(&principal, &body.role)?;
    app.store
        .change_roles(&actor, &id, roles(&body.roles)?)
        .await?;
    ok(json!({ "principal": id, "roles": body.roles, "changedBy": actor.id }))
}

async fn revoke_identity(
    State(app): State<Arc<App>>,
    Caller(principal): Caller,
    Path(id): Path<String>,
    Json(body): Json<ActBody>,
) -> Answer {
    let actor = acting(&principal, &body.role)?;
    app.store.revoke_identity(&actor, &id).await?;
    ok(json!({ "principal": id, "revokedBy": actor.id }))
}
