//! The approval page's routes (server-rendered HTML, no script): sign-in with a
//! token, plans awaiting approval with the redacted whole-configuration diff they
//! would apply, approve / revoke / cancel forms, machine timelines and drift records
//! with freeze / unfreeze and the adopt and revert plans that settle them.
//!
//! Every page needs a proven principal (a client certificate, or the session cookie
//! `POST /login` sets from a token the service issued); every form carries a CSRF
//! value bound to the principal and the session, checked (in constant time) before
//! anything is done; the store checks the role each act is made in.
//!
//! **Sign-in.** The sign-in form is the one form posted without a session: each
//! `GET /login` sets a fresh random pre-session cookie ([`VISITOR`]) and the form's
//! CSRF value is the service's signature of it, so no two visitors share one and a
//! form posted from another site, without that cookie, is refused.
//!
//! **Cookies.** Both cookies are `HttpOnly`, `Secure` and `SameSite=Strict`. The
//! service only ever serves TLS (see [`super::tls`]), so `Secure` is always set;
//! browsers keep such a cookie from `https://127.0.0.1` as from any other origin.
//!
//! **Recovery mode.** recovery-admin's front page carries the entry form (§7.2).
//! In recovery mode the front page shows each scope's state with the forms §7.5
//! always allows — revoking an approval, cancelling a plan, freezing a machine —
//! and those acts are made; every other page and form says recovery mode is in
//! effect.
//!
//! **Configuration.** A plan's page shows the redacted diff of the configuration it
//! applies only to a viewer who may approve the plan (the approver role; the
//! controller, not a principal, dispatches it). Anyone else sees its artifact digest,
//! and the artifact is not even opened for them.

use std::sync::Arc;

use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde::Deserialize;

use super::App;
use super::api::{Peer, Problem, SESSION, principal, refuse_in_recovery, session_token};
use super::auth::{Proof, cookie, visitor};
use super::page::{self, Who};
use super::review::review_diff;
use crate::acts::{Acts, Direct, EntryRequest, PlanRequest};
use crate::contract::Role;
use crate::store::Actor;

/// The page's routes.
pub(crate) fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/", get(plans))
        .route("/plans", get(plans))
        .route("/login", get(login_form).post(login))
        .route("/logout", post(logout))
        .route("/plans/{id}", get(plan))
        .route("/plans/{id}/{act}", post(plan_act))
        .route("/machines/{id}/timeline", get(timeline))
        .route("/machines/{id}/{act}", post(machine_act))
        .route("/drift", get(drift))
        .route("/recovery/enter", post(enter_recovery))
}

/// The page's acts §7.5 always allows, in recovery mode too: revoking an approval,
/// cancelling a plan, freezing a machine. Every other form waits until recovery mode
/// is left.
const ALWAYS_ALLOWED: [&str; 3] = ["revoke", "cancel", "freeze"];

/// The name of the sign-in page's pre-session cookie. The `__Host-` prefix has a
/// browser refuse it unless it is `Secure`, set by this origin and for path `/`, so
/// no other host (a sibling domain) can plant one.
pub(crate) const VISITOR: &str = "__Host-infra_talos_login";

/// How long a sign-in form stays usable.
const VISITOR_MAX_AGE_SECS: u64 = 15 * 60;

/// A page's viewer: who, the roles held, and the CSRF value for their forms.
async fn viewer(app: &App, peer: &Peer, headers: &HeaderMap) -> Result<Who, Response> {
    signed_in(app, peer, headers).await.map(|(who, _)| who)
}

/// A viewer, and the session their CSRF value is bound to (the session token when
/// the session cookie proved them, empty for a client certificate).
async fn signed_in(app: &App, peer: &Peer, headers: &HeaderMap) -> Result<(Who, String), Response> {
    let principal = match principal(app, peer, headers).await {
        Ok(p) => p,
        Err(problem) if problem.status == StatusCode::UNAUTHORIZED => {
            return Err(Redirect::to("/login").into_response());
        }
        Err(problem) => return Err(refusal(None, problem)),
    };
    let session = match principal.proof {
        Proof::Session => session_token(headers).unwrap_or_default(),
        _ => "",
    };
    let who = Who {
        csrf: app.signer.csrf(&principal.id, session),
        principal: principal.id,
        roles: principal.roles,
    };
    Ok((who, session.to_owned()))
}

/// The viewer of a posted form, refused (as a page) unless the form carries the CSRF
/// value of their session, compared in constant time.
async fn poster(
    app: &App,
    peer: &Peer,
    headers: &HeaderMap,
    presented: &str,
) -> Result<Who, Response> {
    let (who, session) = signed_in(app, peer, headers).await?;
    if !app.signer.csrf_ok(&who.principal, &session, presented) {
        return Err(refusal(Some(&who), forged()));
    }
    Ok(who)
}

fn refusal(who: Option<&Who>, problem: Problem) -> Response {
    let title = match problem.status {
        StatusCode::UNAUTHORIZED => "Not signed in",
        StatusCode::NOT_FOUND => "Not found",
        StatusCode::SERVICE_UNAVAILABLE => "Unavailable",
        _ => "Refused",
    };
    let hint = problem.status.as_u16().to_string();
    (
        problem.status,
        Html(page::message_page(who, title, &problem.text, &hint)),
    )
        .into_response()
}

/// The viewer, in normal operation only.
async fn viewer_outside_recovery(
    app: &App,
    peer: &Peer,
    headers: &HeaderMap,
) -> Result<Who, Response> {
    let who = viewer(app, peer, headers).await?;
    refuse_in_recovery(app)
        .await
        .map_err(|p| refusal(Some(&who), p))?;
    Ok(who)
}

/// The plans; in recovery mode, the scopes and the acts recovery never stops.
async fn plans(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    headers: HeaderMap,
) -> Response {
    let who = match viewer(&app, &peer, &headers).await {
        Ok(who) => who,
        Err(r) => return r,
    };
    let listed = async {
        let plans = app.timed(app.store.plans()).await?;
        let machines = app.timed(app.store.machines()).await?;
        let epoch = if crate::acts::in_recovery(&machines) {
            Some(app.timed(app.store.current_epoch()).await?)
        } else {
            None
        };
        Ok::<_, crate::store::StoreError>((plans, machines, epoch))
    };
    match listed.await {
        Ok((plans, machines, None)) => {
            Html(page::plans_page(&who, &plans, &machines)).into_response()
        }
        Ok((plans, machines, Some(epoch))) => Html(page::recovery_page(
            &who,
            &epoch.to_string(),
            &machines,
            &plans,
        ))
        .into_response(),
        Err(e) => refusal(Some(&who), e.into()),
    }
}

async fn login_form(State(app): State<Arc<App>>) -> Response {
    login_answer(&app, StatusCode::OK, None)
}

/// The sign-in page with `status` and `error`, for a new visitor: a fresh
/// pre-session cookie, and the form's CSRF value bound to it.
fn login_answer(app: &App, status: StatusCode, error: Option<&str>) -> Response {
    let Ok(visitor) = visitor() else {
        let problem = Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no randomness for the sign-in form; try again",
        );
        return refusal(None, problem);
    };
    let csrf = app.signer.login_csrf(&visitor);
    let mut response = (status, Html(page::login_page(error, &csrf))).into_response();
    set_cookie(
        &mut response,
        &format!(
            "{VISITOR}={visitor}; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age={VISITOR_MAX_AGE_SECS}"
        ),
    );
    response
}

/// Adds a `Set-Cookie` header to `response` (one per cookie).
fn set_cookie(response: &mut Response, cookie: &str) {
    if let Ok(value) = HeaderValue::from_str(cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
    csrf: String,
}

async fn login(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let visitor = headers
        .get(header::COOKIE)
        .and_then(|v| v.to_str().ok())
        .and_then(|c| cookie(c, VISITOR))
        .unwrap_or_default();
    if !app.signer.login_csrf_ok(visitor, &form.csrf) {
        return login_answer(
            &app,
            StatusCode::FORBIDDEN,
            Some("the form expired; sign in again"),
        );
    }
    let token = form.token.trim();
    if app.signer.verify(token, app.wall.system_time()).is_none() {
        return login_answer(
            &app,
            StatusCode::UNAUTHORIZED,
            Some("that token was not issued by this service, or it has expired"),
        );
    }
    let mut response = Redirect::to("/").into_response();
    set_cookie(
        &mut response,
        &format!("{SESSION}={token}; HttpOnly; Secure; SameSite=Strict; Path=/"),
    );
    // The sign-in form is used up.
    set_cookie(
        &mut response,
        &format!("{VISITOR}=; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=0"),
    );
    response
}

#[derive(Deserialize)]
struct CsrfForm {
    csrf: String,
    reason: Option<String>,
    /// The role the form acts in; it must be one the viewer holds.
    #[serde(rename = "as")]
    role: Option<String>,
}

async fn logout(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Err(r) = poster(&app, &peer, &headers, &form.csrf).await {
        return r;
    }
    let mut response = Redirect::to("/login").into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "infra_talos_session=; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=0",
        ),
    );
    response
}

fn forged() -> Problem {
    Problem::new(
        StatusCode::FORBIDDEN,
        "the form's CSRF value is not this session's: nothing was done; reload the page",
    )
}

/// A plan's page: its bound facts, the redacted diff against what the machine runs,
/// the evidence, and the forms the viewer may use.
async fn plan(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let who = match viewer_outside_recovery(&app, &peer, &headers).await {
        Ok(who) => who,
        Err(r) => return r,
    };
    match plan_page(&app, &who, &id).await {
        Ok(html) => Html(html).into_response(),
        Err(problem) => refusal(Some(&who), problem),
    }
}

async fn plan_page(app: &App, who: &Who, id: &str) -> Result<String, Problem> {
    let plan = app.timed(app.store.plan(id)).await?;
    let machine = app.timed(app.store.machine(&plan.machine)).await?;
    let evidence = app.timed(app.store.observations(&plan.machine)).await?;
    let history: Vec<_> = app
        .timed(app.store.timeline(&plan.machine))
        .await?
        .into_iter()
        .filter(|e| e.plan.as_deref() == Some(id))
        .collect();
    if !who.reads_configuration() {
        return Ok(page::plan_page(
            who, &plan, &machine, None, &evidence, &history,
        ));
    }
    let keys = app.keys.as_ref().ok_or_else(|| {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "this service has no keyring, so it cannot show the configuration a plan applies",
        )
    })?;
    let unopened = |e: &dyn std::fmt::Display| {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the plan's artifact could not be opened to show its diff: {e}"),
        )
    };
    let desired = keys
        .open(&app.timed(app.store.sealed_artifact(id)).await?)
        .await
        .map_err(|e| unopened(&e))?;
    let applied = match &machine.applied_release {
        Some(release) => match app
            .timed(app.store.keyed_artifact(release, &machine.id))
            .await?
        {
            Some(sealed) => Some(keys.open(&sealed).await.map_err(|e| unopened(&e))?),
            None => None,
        },
        None => None,
    };
    let diff = review_diff(applied.as_ref().map(|p| p.bytes()), desired.bytes());
    Ok(page::plan_page(
        who,
        &plan,
        &machine,
        Some(&diff),
        &evidence,
        &history,
    ))
}

/// The role a form acts in: the one it names, if the viewer holds it; otherwise the
/// first held of those `act` may be made in.
fn acting_role(form: &CsrfForm, act: &str, who: &Who) -> Option<Role> {
    match form.role.as_deref().map(str::parse::<Role>) {
        Some(Ok(role)) => who.roles.contains(&role).then_some(role),
        Some(Err(_)) => None,
        None => role_for(act, who),
    }
}

/// The role the page acts in for `act` when the form names none.
fn role_for(act: &str, who: &Who) -> Option<Role> {
    let prefer: &[Role] = match act {
        "approve" | "unfreeze" => &[Role::Approver],
        "revoke" => &[Role::Approver, Role::RecoveryAdmin],
        "adopt" | "revert" => &[Role::Publisher],
        "cancel" | "freeze" => &[
            Role::Approver,
            Role::Publisher,
            Role::Author,
            Role::RecoveryAdmin,
        ],
        _ => &[],
    };
    prefer.iter().copied().find(|r| who.roles.contains(r))
}

/// The viewer of a posted form and the acts it may make: refused, as a page, without
/// a session (or in recovery mode, but for [`ALWAYS_ALLOWED`]), with another session's CSRF value, for an act not
/// among `known`, or in a role the viewer does not hold.
async fn form_acts(
    app: &App,
    peer: &Peer,
    headers: &HeaderMap,
    act: &str,
    known: &[&str],
    form: &CsrfForm,
) -> Result<(Who, Direct), Response> {
    let who = poster(app, peer, headers, &form.csrf).await?;
    if !ALWAYS_ALLOWED.contains(&act) {
        refuse_in_recovery(app)
            .await
            .map_err(|p| refusal(Some(&who), p))?;
    }
    if !known.contains(&act) {
        let problem = Problem::new(StatusCode::NOT_FOUND, "no such act");
        return Err(refusal(Some(&who), problem));
    }
    let Some(role) = acting_role(form, act, &who) else {
        let text = format!("{act} needs a role {} does not hold", who.principal);
        return Err(refusal(
            Some(&who),
            Problem::new(StatusCode::FORBIDDEN, text),
        ));
    };
    let acts = app
        .grounds
        .acting(Ok(Actor::new(who.principal.clone(), role)));
    Ok((who, acts))
}

async fn plan_act(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    headers: HeaderMap,
    Path((id, act)): Path<(String, String)>,
    Form(form): Form<CsrfForm>,
) -> Response {
    let known = ["approve", "revoke", "cancel"];
    let (who, acts) = match form_acts(&app, &peer, &headers, &act, &known, &form).await {
        Ok(found) => found,
        Err(r) => return r,
    };
    let done = match act.as_str() {
        "approve" => acts.approve(&id, false).await.map(|_| ()),
        "revoke" => acts.revoke_approval(&id).await,
        _ => acts.cancel(&id).await,
    };
    match done {
        Ok(()) => Redirect::to(&format!("/plans/{}", page::segment(&id))).into_response(),
        Err(e) => refusal(Some(&who), e.into()),
    }
}

async fn timeline(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let who = match viewer_outside_recovery(&app, &peer, &headers).await {
        Ok(who) => who,
        Err(r) => return r,
    };
    let read = async {
        let machine = app.timed(app.store.machine(&id)).await?;
        let entries = app.timed(app.store.timeline(&id)).await?;
        Ok::<_, crate::store::StoreError>((machine, entries))
    };
    match read.await {
        Ok((machine, entries)) => {
            Html(page::timeline_page(&who, &machine, &entries)).into_response()
        }
        Err(e) => refusal(Some(&who), e.into()),
    }
}

async fn drift(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    headers: HeaderMap,
) -> Response {
    let who = match viewer_outside_recovery(&app, &peer, &headers).await {
        Ok(who) => who,
        Err(r) => return r,
    };
    match app.timed(app.store.machines()).await {
        Ok(machines) => Html(page::drift_page(&who, &machines)).into_response(),
        Err(e) => refusal(Some(&who), e.into()),
    }
}

async fn machine_act(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    headers: HeaderMap,
    Path((id, act)): Path<(String, String)>,
    Form(form): Form<CsrfForm>,
) -> Response {
    let known = ["freeze", "unfreeze", "adopt", "revert"];
    let (who, acts) = match form_acts(&app, &peer, &headers, &act, &known, &form).await {
        Ok(found) => found,
        Err(r) => return r,
    };
    let reason = form.reason.unwrap_or_default();
    let done = match act.as_str() {
        "adopt" | "revert" => {
            let mut request = PlanRequest::new(id.clone());
            request.adopt = act == "adopt";
            request.revert = act == "revert";
            acts.create_plan(request)
                .await
                .map(|created| format!("/plans/{}", page::segment(&created.plan.id)))
        }
        "freeze" => acts
            .freeze(&id, &reason)
            .await
            .map(|()| "/drift".to_owned()),
        _ => acts
            .unfreeze(&id, &reason)
            .await
            .map(|()| "/drift".to_owned()),
    };
    match done {
        Ok(to) => Redirect::to(&to).into_response(),
        Err(e) => refusal(Some(&who), e.into()),
    }
}

#[derive(Deserialize)]
struct EntryForm {
    csrf: String,
    #[serde(rename = "as")]
    role: Option<String>,
    stopped_at: String,
    /// One `FAMILY=ID@TIME` a line.
    backups: String,
}

/// recovery-admin's entry into recovery mode (§7.2), with the same checks and
/// refusals as the API and the command line.
async fn enter_recovery(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    headers: HeaderMap,
    Form(form): Form<EntryForm>,
) -> Response {
    let who = match poster(&app, &peer, &headers, &form.csrf).await {
        Ok(who) => who,
        Err(r) => return r,
    };
    let role = match form.role.as_deref().map(str::parse::<Role>) {
        None => Role::RecoveryAdmin,
        Some(Ok(role)) => role,
        Some(Err(e)) => return refusal(Some(&who), Problem::new(StatusCode::BAD_REQUEST, e)),
    };
    let backups: Vec<&str> = form
        .backups
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let request = match EntryRequest::parse(&form.stopped_at, &backups) {
        Ok(request) => request,
        Err(e) => return refusal(Some(&who), Problem::new(StatusCode::BAD_REQUEST, e)),
    };
    let acts = app
        .grounds
        .acting(Ok(Actor::new(who.principal.clone(), role)));
    match acts.enter_recovery(request).await {
        Ok(entered) => {
            tracing::warn!(epoch = %entered.epoch, by = %who.principal, "recovery mode entered");
            Redirect::to("/").into_response()
        }
        Err(e) => refusal(Some(&who), e.into()),
    }
}
