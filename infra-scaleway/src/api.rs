//! Scaleway's REST API: one `reqwest` client, `X-Auth-Token` on every call, JSON in and
//! out, errors through [`classify`](crate::error::classify), and every call retried by
//! the one policy of `infra_core::sdk::retry` (this client has no retry machinery of its
//! own, and the engine retries nothing).
//!
//! Paths are given whole (`/secret-manager/v1beta1/regions/fr-par/secrets`); the
//! region or zone is a path segment, as Scaleway's APIs have it. Listing calls are
//! paged with `page` and `page_size` and end when a page comes back short or the
//! `total_count` is reached ([`Api::list_all`]).
//!
//! **Whether a call may be repeated** is stated where it is built, by the constructor
//! that builds it, never guessed from its method:
//!
//! | constructor | method | [`Idempotence`] | why |
//! |---|---|---|---|
//! | [`Call::get`] | `GET` | idempotent | a read changes nothing |
//! | [`Call::create`] | `POST` | not idempotent | each call that lands makes something new (a secret, a version of it, a function, credentials, …): a repeat would make a twin, or a `Conflict` hiding that the first succeeded |
//! | [`Call::patch`] | `PATCH` | idempotent | it sets fields to values: twice is once |
//! | [`Call::put`] | `PUT` | idempotent | it sets the whole of something: twice is once |
//! | [`Call::delete`] | `DELETE` | idempotent | a repeat finds the resource gone or going |
//! | [`Call::action`] | `POST` | as the caller says | an action (`deploy`, `upgrade`, `activate-sqs`): each call site says why its repeat is or is not harmless |
//!
//! The [`Retrier`] then retries a call that was throttled (429, with the wait of its
//! `Retry-After`), that never left this machine (no connection), or that Scaleway
//! refused because the resource was busy (`transient_state`: nothing was done) —
//! whatever the call, unless its caller follows the resource's status itself
//! ([`Call::busy_awaited`]); and one that may have been acted on (a 5xx, a timeout, an
//! answer lost or unreadable) only when it is idempotent. Once an attempt may have been
//! acted on, so may the call: its final error says so. A create that may have landed is
//! answered as the error it is, "may have been sent", for the kind to look for what it
//! made. Each attempt waits for its answer at most the policy's request timeout.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use infra_core::sdk::{BackendError, ErrorKind, Idempotence, Retrier, RetryPolicy, SecretString};
use reqwest::Method;
use reqwest::header::HeaderMap;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{classify, transport};

/// The size of each page of a listing.
pub(crate) const PAGE_SIZE: u32 = 100;

/// A client of Scaleway's REST API.
#[derive(Clone)]
pub(crate) struct Api {
    http: reqwest::Client,
    base: String,
    token: SecretString,
    retrier: Retrier,
    /// Every call made so far, by its name: its method and idempotence (tests list
    /// them).
    #[cfg(test)]
    pub(crate) made:
        std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, (Method, Idempotence)>>>,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("base", &self.base)
            .field("retrier", &self.retrier)
            .finish_non_exhaustive()
    }
}

/// One call: what it is (for errors), its method and path, its query, the resource
/// types whose `not_found` means "absent" for it, and whether it may be repeated.
#[derive(Debug, Clone)]
pub(crate) struct Call<'a> {
    pub(crate) what: &'a str,
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) query: Vec<(&'a str, String)>,
    pub(crate) not_found: &'a [&'a str],
    pub(crate) idempotence: Idempotence,
    /// The caller follows the resource's status itself when it is busy.
    pub(crate) busy_awaited: bool,
}

impl<'a> Call<'a> {
    /// A `GET` of `path`: a read, repeated freely.
    pub(crate) fn get(what: &'a str, path: impl Into<String>) -> Self {
        Call::new(what, Method::GET, path, Idempotence::Idempotent)
    }

    /// A `POST` to `path` that makes something new each time it lands: never repeated
    /// once it may have been acted on.
    pub(crate) fn create(what: &'a str, path: impl Into<String>) -> Self {
        Call::new(what, Method::POST, path, Idempotence::NotIdempotent)
    }

    /// A `POST` to `path` that acts on something that exists (`…/deploy`,
    /// `…/upgrade`, `…/activate-sqs`): the caller says whether a repeat is harmless.
    pub(crate) fn action(what: &'a str, path: impl Into<String>, idempotence: Idempotence) -> Self {
        Call::new(what, Method::POST, path, idempotence)
    }

    /// A `PATCH` of `path`: fields set to values, repeated freely.
    pub(crate) fn patch(what: &'a str, path: impl Into<String>) -> Self {
        Call::new(what, Method::PATCH, path, Idempotence::Idempotent)
    }

    /// A `PUT` of `path`: the whole of something set (a policy's rules), repeated
    /// freely.
    pub(crate) fn put(what: &'a str, path: impl Into<String>) -> Self {
        Call::new(what, Method::PUT, path, Idempotence::Idempotent)
    }

    /// A `DELETE` of `path`: repeated freely (a repeat finds it gone).
    pub(crate) fn delete(what: &'a str, path: impl Into<String>) -> Self {
        Call::new(what, Method::DELETE, path, Idempotence::Idempotent)
    }

    fn new(
        what: &'a str,
        method: Method,
        path: impl Into<String>,
        idempotence: Idempotence,
    ) -> Self {
        Call {
            what,
            method,
            path: path.into(),
            query: Vec::new(),
            not_found: &[],
            idempotence,
            busy_awaited: false,
        }
    }

    /// The caller follows the resource's status itself when Scaleway answers it busy
    /// (`transient_state`: a database being upgraded for many minutes, a container its
    /// namespace's deletion takes along): that answer is handed back at once rather
    /// than retried for the policy's budget.
    #[must_use]
    pub(crate) fn busy_awaited(mut self) -> Self {
        self.busy_awaited = true;
        self
    }

    /// Adds a query parameter.
    #[must_use]
    pub(crate) fn query(mut self, name: &'a str, value: impl Into<String>) -> Self {
        self.query.push((name, value.into()));
        self
    }

    /// The resource types whose `not_found` answer means the resource is absent.
    #[must_use]
    pub(crate) fn not_found(mut self, resources: &'a [&'a str]) -> Self {
        self.not_found = resources;
        self
    }

    /// Whether the call changes something (its failures "may have been sent").
    fn writes(&self) -> bool {
        self.method != Method::GET
    }
}

impl Api {
    /// A client of the API at `base`, authenticating with `token` (the secret key),
    /// retrying by `retrier`. `http` carries the request timeout.
    pub(crate) fn new(
        http: reqwest::Client,
        base: &str,
        token: SecretString,
        retrier: Retrier,
    ) -> Self {
        Api {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token,
            retrier,
            #[cfg(test)]
            made: std::sync::Arc::default(),
        }
    }

    /// The same client, retrying by `policy` (on the same clock).
    pub(crate) fn retrying(&self, policy: RetryPolicy) -> Self {
        let mut api = self.clone();
        api.retrier = Retrier::new(policy, Arc::clone(self.retrier.clock()));
        api
    }

    /// Makes `call` with `body` (none for `GET` and `DELETE`), answering the decoded
    /// answer. An empty answer decodes as `null`.
    pub(crate) async fn send<T: DeserializeOwned>(
        &self,
        call: Call<'_>,
        body: Option<&(impl Serialize + Sync)>,
    ) -> Result<T, BackendError> {
        let text = self.send_raw(&call, body).await?;
        let value: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).map_err(|e| undecodable(&call, &e))?
        };
        serde_json::from_value(value).map_err(|e| undecodable(&call, &e))
    }

    /// Makes `call` with no body.
    pub(crate) async fn call<T: DeserializeOwned>(
        &self,
        call: Call<'_>,
    ) -> Result<T, BackendError> {
        self.send(call, None::<&()>).await
    }

    /// Makes `call` and ignores what it answers (a `DELETE`, an action).
    pub(crate) async fn act(
        &self,
        call: Call<'_>,
        body: Option<&(impl Serialize + Sync)>,
    ) -> Result<(), BackendError> {
        self.send_raw(&call, body).await.map(|_| ())
    }

    /// Every item of a paged listing: `call` is repeated with `page` = 1, 2, … and the
    /// array under `field` of each answer collected, until a page is short or
    /// `total_count` items are in hand.
    pub(crate) async fn list_all<T: DeserializeOwned>(
        &self,
        call: Call<'_>,
        field: &str,
    ) -> Result<Vec<T>, BackendError> {
        let mut all = Vec::new();
        for page in 1u32.. {
            let paged = call
                .clone()
                .query("page", page.to_string())
                .query("page_size", PAGE_SIZE.to_string());
            let answer: Value = self.call(paged).await?;
            let items = answer.get(field).and_then(Value::as_array).ok_or_else(|| {
                BackendError::new(
                    ErrorKind::Other,
                    format!("{}: the answer has no `{field}` list", call.what),
                )
            })?;
            let got = items.len();
            for item in items {
                all.push(serde_json::from_value(item.clone()).map_err(|e| undecodable(&call, &e))?);
            }
            let total = answer.get("total_count").and_then(Value::as_u64);
            let done = got < PAGE_SIZE as usize || total.is_some_and(|t| all.len() as u64 >= t);
            if done {
                break;
            }
        }
        Ok(all)
    }

    /// Sends a file's bytes with `PUT` to an upload URL Scaleway gave (a presigned
    /// Object Storage URL: no token is sent there). Repeated freely: the same bytes put
    /// twice at one place are one object.
    pub(crate) async fn upload(
        &self,
        what: &str,
        url: &str,
        bytes: Vec<u8>,
    ) -> Result<(), BackendError> {
        self.note(what, &Method::PUT, Idempotence::Idempotent);
        let attempt = || async {
            let answer = self
                .http
                .put(url)
                .header("content-type", "application/octet-stream")
                .body(bytes.clone())
                .send()
                .await
                .map_err(|e| transport(what, &e, true))?;
            let status = answer.status().as_u16();
            if status < 300 {
                return Ok(());
            }
            let wait = retry_after(answer.headers());
            let text = answer.text().await.unwrap_or_default();
            Err(with_wait(classify(what, status, &text, &[], true), wait))
        };
        self.retrier.run(Idempotence::Idempotent, attempt).await
    }

    /// Makes `call`, retried by the policy, answering the body of its successful
    /// answer.
    ///
    /// Once an attempt may have been acted on, the call as a whole may have been: its
    /// final error says so whatever the later attempts answered (a repeated delete
    /// finding the resource gone or going, say), and an answer that the resource is
    /// busy is handed back at once, as it is most likely busy with that very attempt.
    async fn send_raw(
        &self,
        call: &Call<'_>,
        body: Option<&(impl Serialize + Sync)>,
    ) -> Result<String, BackendError> {
        self.note(call.what, &call.method, call.idempotence);
        let sent = AtomicBool::new(false);
        let outcome = self
            .retrier
            .run(call.idempotence, || async {
                match self.attempt(call, body).await {
                    Ok(text) => Ok(Ok(text)),
                    Err(e)
                        if is_busy(&e) && (call.busy_awaited || sent.load(Ordering::Relaxed)) =>
                    {
                        Ok(Err(e))
                    }
                    Err(e) => {
                        if e.may_have_been_sent {
                            sent.store(true, Ordering::Relaxed);
                        }
                        Err(e)
                    }
                }
            })
            .await;
        match outcome.and_then(|answer| answer) {
            Err(e) if sent.load(Ordering::Relaxed) => Err(e.maybe_sent()),
            other => other,
        }
    }

    /// One attempt of `call`.
    async fn attempt(
        &self,
        call: &Call<'_>,
        body: Option<&(impl Serialize + Sync)>,
    ) -> Result<String, BackendError> {
        let url = format!("{}{}", self.base, call.path);
        let mut request = self
            .http
            .request(call.method.clone(), &url)
            .header("X-Auth-Token", self.token.expose())
            .query(&call.query);
        if let Some(body) = body {
            request = request.json(body);
        }
        let answer = request
            .send()
            .await
            .map_err(|e| transport(call.what, &e, call.writes()))?;
        let status = answer.status().as_u16();
        let wait = retry_after(answer.headers());
        let text = answer
            .text()
            .await
            .map_err(|e| transport(call.what, &e, call.writes()))?;
        if status < 300 {
            Ok(text)
        } else {
            let error = classify(call.what, status, &text, call.not_found, call.writes());
            Err(with_wait(error, wait))
        }
    }

    /// Notes a call made, for the tests that list them.
    fn note(&self, what: &str, method: &Method, idempotence: Idempotence) {
        #[cfg(test)]
        self.made
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(what.to_owned(), (method.clone(), idempotence));
        #[cfg(not(test))]
        let _ = (self, what, method, idempotence);
    }
}

/// Whether `error` says the resource is busy with other work (`transient_state`).
pub(crate) fn is_busy(error: &BackendError) -> bool {
    error.code.as_deref() == Some("transient_state")
}

/// `error` with the wait the service asked for, when it asked.
fn with_wait(error: BackendError, wait: Option<Duration>) -> BackendError {
    match wait {
        Some(wait) => error.with_retry_after(wait),
        None => error,
    }
}

/// The wait an answer's `Retry-After` asks for: a number of seconds, or an HTTP date,
/// taken relative to the answer's own `Date` (the service's clock, not this machine's:
/// no skew between the two counts). A date without a `Date` beside it, in the past, or
/// unreadable, asks for nothing.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get("retry-after")?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at: SystemTime = httpdate::parse_http_date(value).ok()?;
    let now = headers.get("date")?.to_str().ok()?;
    let now: SystemTime = httpdate::parse_http_date(now.trim()).ok()?;
    at.duration_since(now).ok()
}

fn undecodable(call: &Call<'_>, e: &serde_json::Error) -> BackendError {
    let err = BackendError::new(
        ErrorKind::Other,
        format!("{}: Scaleway's answer could not be read: {e}", call.what),
    );
    if call.writes() { err.maybe_sent() } else { err }
}

#[cfg(test)]
mod tests;
