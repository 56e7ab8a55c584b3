//! Scaleway's REST API: one `reqwest` client, `X-Auth-Token` on every call, JSON in and
//! out, errors through [`classify`](crate::error::classify).
//!
//! Paths are given whole (`/secret-manager/v1beta1/regions/fr-par/secrets`); the
//! region or zone is a path segment, as Scaleway's APIs have it. Listing calls are
//! paged with `page` and `page_size` and end when a page comes back short or the
//! `total_count` is reached ([`Api::list_all`]).

use infra_core::sdk::{BackendError, ErrorKind, SecretString};
use reqwest::Method;
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
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// One call: what it is (for errors), its method and path, its query, and the
/// resource types whose `not_found` means "absent" for it.
#[derive(Debug, Clone)]
pub(crate) struct Call<'a> {
    pub(crate) what: &'a str,
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) query: Vec<(&'a str, String)>,
    pub(crate) not_found: &'a [&'a str],
}

impl<'a> Call<'a> {
    /// A `GET` of `path`.
    pub(crate) fn get(what: &'a str, path: impl Into<String>) -> Self {
        Call::new(what, Method::GET, path)
    }

    /// A `POST` to `path`.
    pub(crate) fn post(what: &'a str, path: impl Into<String>) -> Self {
        Call::new(what, Method::POST, path)
    }

    /// A `PATCH` of `path`.
    pub(crate) fn patch(what: &'a str, path: impl Into<String>) -> Self {
        Call::new(what, Method::PATCH, path)
    }

    /// A `DELETE` of `path`.
    pub(crate) fn delete(what: &'a str, path: impl Into<String>) -> Self {
        Call::new(what, Method::DELETE, path)
    }

    fn new(what: &'a str, method: Method, path: impl Into<String>) -> Self {
        Call {
            what,
            method,
            path: path.into(),
            query: Vec::new(),
            not_found: &[],
        }
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

    fn writes(&self) -> bool {
        self.method != Method::GET
    }
}

impl Api {
    /// A client of the API at `base`, authenticating with `token` (the secret key).
    pub(crate) fn new(http: reqwest::Client, base: &str, token: SecretString) -> Self {
        Api {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token,
        }
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
    /// Object Storage URL: no token is sent there).
    pub(crate) async fn upload(
        &self,
        what: &str,
        url: &str,
        bytes: Vec<u8>,
    ) -> Result<(), BackendError> {
        let answer = self
            .http
            .put(url)
            .header("content-type", "application/octet-stream")
            .body(bytes)
            .send()
            .await
            .map_err(|e| transport(what, &e, true))?;
        let status = answer.status().as_u16();
        if status < 300 {
            return Ok(());
        }
        let text = answer.text().await.unwrap_or_default();
        Err(classify(what, status, &text, &[], true))
    }

    async fn send_raw(
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
        let text = answer
            .text()
            .await
            .map_err(|e| transport(call.what, &e, call.writes()))?;
        if status < 300 {
            Ok(text)
        } else {
            Err(classify(
                call.what,
                status,
                &text,
                call.not_found,
                call.writes(),
            ))
        }
    }
}

fn undecodable(call: &Call<'_>, e: &serde_json::Error) -> BackendError {
    let err = BackendError::new(
        ErrorKind::Other,
        format!("{}: Scaleway's answer could not be read: {e}", call.what),
    );
    if call.writes() { err.maybe_sent() } else { err }
}
