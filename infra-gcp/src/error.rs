//! Google Cloud errors, mapped onto the portable kinds.
//!
//! Google's APIs answer errors as a canonical status (`NOT_FOUND`, `PERMISSION_DENIED`,
//! …) with an HTTP code. The status decides, checked in this order:
//!
//! 1. a denial (`PERMISSION_DENIED`, `UNAUTHENTICATED`, or HTTP 401/403 without a
//!    status) is `Denied`, whatever the call: Google answers 403 for a resource the
//!    caller may not see **and** for one that does not exist where it may not look, so a
//!    403 is never read as absence;
//! 2. only the statuses the call lists in its own `not_found` are `NotFound`; a call
//!    whose 404 means something else (a create whose parent is missing, a dead-letter
//!    topic that does not exist) passes `&[]`, and the 404 is then `Invalid`;
//! 3. the shared tables below; anything else is `Other`.
//!
//! A request that timed out, lost its connection after sending, or got an answer that
//! could not be read may have been sent ([`BackendError::maybe_sent`]); one refused
//! before a connection was made was not.
//!
//! The wait a service asks for travels with the error
//! ([`BackendError::retry_after`]): the `Retry-After` header in seconds, or else the
//! `google.rpc.RetryInfo` detail of the error body. The retry policy
//! ([`crate::retry`]) reads the same mapping through [`failure_of`], so that the error
//! a call reports and the decision to repeat it never disagree.

use std::time::Duration;

use google_cloud_gax::error::rpc::StatusDetails;
use infra_core::sdk::{BackendError, ErrorKind, Failure};

/// The status that says "this resource does not exist": the one entry of most calls'
/// not-found lists.
pub(crate) const NOT_FOUND: &[&str] = &["NOT_FOUND"];

const DENIED: &[&str] = &["PERMISSION_DENIED", "UNAUTHENTICATED"];
const THROTTLED: &[&str] = &["RESOURCE_EXHAUSTED"];
const UNAVAILABLE: &[&str] = &["UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED", "UNKNOWN"];
const CONFLICT: &[&str] = &["ALREADY_EXISTS", "ABORTED"];
const DEPENDENCY: &[&str] = &["FAILED_PRECONDITION"];
const INVALID: &[&str] = &["INVALID_ARGUMENT", "OUT_OF_RANGE", "UNIMPLEMENTED"];

/// The canonical status an HTTP code stands for, when an answer carries no status of
/// its own (a proxy's answer, the Cloud Storage JSON API).
pub(crate) fn status_of_http(code: u16) -> &'static str {
    match code {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ALREADY_EXISTS",
        412 => "FAILED_PRECONDITION",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        500 => "INTERNAL",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "UNKNOWN",
    }
}

/// The portable kind of a canonical status. `not_found` lists the statuses that mean
/// "this resource does not exist" for the call at hand.
pub(crate) fn kind_of(status: &str, not_found: &[&str]) -> ErrorKind {
    if DENIED.contains(&status) {
        ErrorKind::Denied
    } else if not_found.contains(&status) {
        ErrorKind::NotFound
    } else if status == "NOT_FOUND" {
        // A 404 the call does not read as absence: something the request names is
        // missing (a parent, a referenced resource). The declaration is at fault.
        ErrorKind::Invalid
    } else if THROTTLED.contains(&status) {
        ErrorKind::Throttled
    } else if UNAVAILABLE.contains(&status) {
        ErrorKind::Unavailable
    } else if DEPENDENCY.contains(&status) {
        ErrorKind::DependencyViolation
    } else if CONFLICT.contains(&status) {
        ErrorKind::Conflict
    } else if INVALID.contains(&status) {
        ErrorKind::Invalid
    } else {
        ErrorKind::Other
    }
}

/// A service's refusal as a [`BackendError`]: `status` is the canonical status (or
/// the one an HTTP code stands for), `message` the service's words.
pub(crate) fn refusal(
    what: &str,
    status: &str,
    http: Option<u16>,
    message: &str,
    not_found: &[&str],
) -> BackendError {
    let kind = kind_of(status, not_found);
    let message = if message.is_empty() {
        match http {
            Some(code) => format!("{what}: {status} (HTTP {code})"),
            None => format!("{what}: {status}"),
        }
    } else {
        format!("{what}: {message}")
    };
    let mut out = BackendError::new(kind, message).with_code(status);
    if kind == ErrorKind::Unavailable || http.is_some_and(|c| c >= 500) {
        out = out.maybe_sent();
    }
    out
}

/// An error of an official client as a [`BackendError`]. `what` names the call (it
/// starts the message); `not_found` is the call's curated list of not-found statuses.
pub(crate) fn classify(
    what: &str,
    err: google_cloud_gax::error::Error,
    not_found: &[&str],
) -> BackendError {
    assess(what, &err, not_found)
}

/// What one failed attempt of an official client's call tells the retry policy: the
/// same mapping as [`classify`], read as a [`Failure`]. A credentials failure the
/// credentials call transient (the token endpoint or the metadata server did not
/// answer) was never sent.
pub(crate) fn failure_of(err: &google_cloud_gax::error::Error) -> Failure {
    if err.is_transient_and_before_rpc() {
        return Failure::NotSent;
    }
    Failure::of(&assess("", err, &[]))
}

/// [`classify`], on a borrowed error.
fn assess(what: &str, err: &google_cloud_gax::error::Error, not_found: &[&str]) -> BackendError {
    let asked = retry_after_of(err);
    let out = assess_status(what, err, not_found);
    match asked {
        Some(wait) => out.with_retry_after(wait),
        None => out,
    }
}

/// The wait a failed call's answer asks for: its `Retry-After` header, or else the
/// `google.rpc.RetryInfo` of its status.
pub(crate) fn retry_after_of(err: &google_cloud_gax::error::Error) -> Option<Duration> {
    if let Some(wait) = err.http_headers().and_then(retry_after_header) {
        return Some(wait);
    }
    err.status()?
        .details
        .iter()
        .find_map(|detail| match detail {
            StatusDetails::RetryInfo(info) => {
                info.retry_delay.and_then(|d| Duration::try_from(d).ok())
            }
            _ => None,
        })
}

/// A `Retry-After` header given in seconds. The HTTP-date form, which Google's APIs do
/// not send, is not read: it would need the wall clock.
pub(crate) fn retry_after_header(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    let seconds: f64 = value.parse().ok()?;
    (0.0..=86_400.0)
        .contains(&seconds)
        .then(|| Duration::from_secs_f64(seconds))
}

fn assess_status(
    what: &str,
    err: &google_cloud_gax::error::Error,
    not_found: &[&str],
) -> BackendError {
    if let Some(status) = err.status() {
        return refusal(
            what,
            status.code.name(),
            err.http_status_code(),
            &status.message,
            not_found,
        );
    }
    if let Some(code) = err.http_status_code() {
        return refusal(what, status_of_http(code), Some(code), "", not_found);
    }
    let text = source_text(err);
    if err.is_authentication() {
        // No token could be had: nothing was looked at, and nothing may be concluded.
        return BackendError::new(
            ErrorKind::Denied,
            format!("{what}: no credentials could be had: {text}"),
        )
        .with_code("UNAUTHENTICATED");
    }
    if err.is_binding() || err.is_serialization() {
        return BackendError::new(
            ErrorKind::Invalid,
            format!("{what}: the request could not be built: {text}"),
        );
    }
    if err.is_connect() {
        return BackendError::new(
            ErrorKind::Unavailable,
            format!("{what}: could not connect: {text}"),
        );
    }
    if err.is_timeout() {
        return BackendError::new(ErrorKind::Unavailable, format!("{what}: timed out: {text}"))
            .maybe_sent();
    }
    if err.is_deserialization() {
        return BackendError::new(
            ErrorKind::Other,
            format!("{what}: the answer could not be read: {text}"),
        )
        .maybe_sent();
    }
    if err.is_exhausted() {
        // A poller's deadline (`retry::StillRunning`): the operation was started, and
        // what it came to is not known.
        return BackendError::new(
            ErrorKind::Unavailable,
            format!("{what}: {text}; its outcome is unknown"),
        )
        .maybe_sent();
    }
    BackendError::new(ErrorKind::Unavailable, format!("{what}: {text}")).maybe_sent()
}

/// The error of a plain HTTP call (the Cloud Storage JSON API): a transport failure.
pub(crate) fn transport(what: &str, err: &reqwest::Error) -> BackendError {
    let text = source_text(err);
    if err.is_connect() {
        BackendError::new(
            ErrorKind::Unavailable,
            format!("{what}: could not connect: {text}"),
        )
    } else if err.is_builder() {
        BackendError::new(
            ErrorKind::Invalid,
            format!("{what}: the request could not be built: {text}"),
        )
    } else if err.is_decode() {
        BackendError::new(
            ErrorKind::Other,
            format!("{what}: the answer could not be read: {text}"),
        )
        .maybe_sent()
    } else {
        BackendError::new(ErrorKind::Unavailable, format!("{what}: {text}")).maybe_sent()
    }
}

/// A JSON error answer (`{"error": {"code", "message", "status"}}`) of a plain HTTP
/// call as a [`BackendError`]; the status comes from the HTTP code when the body has
/// none (the Cloud Storage JSON API names none).
pub(crate) fn from_body(what: &str, http: u16, body: &[u8], not_found: &[&str]) -> BackendError {
    from_answer(what, http, None, body, not_found)
}

/// [`from_body`], with the answer's headers: a `Retry-After` among them travels with
/// the error.
pub(crate) fn from_answer(
    what: &str,
    http: u16,
    headers: Option<&http::HeaderMap>,
    body: &[u8],
    not_found: &[&str],
) -> BackendError {
    let out = refusal_of_body(what, http, body, not_found);
    match headers.and_then(retry_after_header) {
        Some(wait) => out.with_retry_after(wait),
        None => out,
    }
}

fn refusal_of_body(what: &str, http: u16, body: &[u8], not_found: &[&str]) -> BackendError {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let status = error
        .and_then(|e| e.get("status"))
        .and_then(|s| s.as_str())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| status_of_http(http));
    let message = error
        .and_then(|e| e.get("message"))
        .and_then(|m| m.as_str())
        .unwrap_or("");
    refusal(what, status, Some(http), message, not_found)
}

fn source_text<E: std::error::Error + ?Sized>(err: &E) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use google_cloud_gax::error::Error;
    use google_cloud_gax::error::rpc::{Code, Status};

    #[test]
    fn not_found_is_only_what_the_call_lists_and_a_denial_never_is() {
        assert_eq!(kind_of("NOT_FOUND", NOT_FOUND), ErrorKind::NotFound);
        // A 404 the call does not read as absence names something else that is missing.
        assert_eq!(kind_of("NOT_FOUND", &[]), ErrorKind::Invalid);
        // Denial wins even over a list that (wrongly) names it.
        assert_eq!(
            kind_of("PERMISSION_DENIED", &["PERMISSION_DENIED"]),
            ErrorKind::Denied
        );
        assert_eq!(kind_of("UNAUTHENTICATED", NOT_FOUND), ErrorKind::Denied);
        assert_eq!(kind_of("RESOURCE_EXHAUSTED", &[]), ErrorKind::Throttled);
        assert_eq!(kind_of("UNAVAILABLE", &[]), ErrorKind::Unavailable);
        assert_eq!(kind_of("ALREADY_EXISTS", &[]), ErrorKind::Conflict);
        assert_eq!(
            kind_of("FAILED_PRECONDITION", &[]),
            ErrorKind::DependencyViolation
        );
        assert_eq!(kind_of("SOMETHING_NEW", &[]), ErrorKind::Other);
    }

    #[test]
    fn a_client_error_keeps_its_status_and_says_what_failed() {
        let err = Error::service(
            Status::default()
                .set_code(Code::PermissionDenied)
                .set_message("caller lacks secretmanager.secrets.get"),
        );
        let out = classify("secretmanager:GetSecret", err, NOT_FOUND);
        assert_eq!(out.kind, ErrorKind::Denied);
        assert_eq!(out.code.as_deref(), Some("PERMISSION_DENIED"));
        assert!(
            out.message
                .starts_with("secretmanager:GetSecret: caller lacks")
        );
        let missing = Error::service(Status::default().set_code(Code::NotFound));
        assert_eq!(classify("x", missing, NOT_FOUND).kind, ErrorKind::NotFound);
    }

    #[test]
    fn the_wait_a_service_asks_for_travels_with_the_error() {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::RETRY_AFTER, "12".parse().unwrap());
        let err = Error::service_with_http_metadata(
            Status::default().set_code(Code::ResourceExhausted),
            Some(429),
            Some(headers.clone()),
        );
        let out = classify("x", err, NOT_FOUND);
        assert_eq!(out.kind, ErrorKind::Throttled);
        assert_eq!(out.retry_after, Some(Duration::from_secs(12)));
        let body = br#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}"#;
        let out = from_answer("storage:buckets.insert", 429, Some(&headers), body, &[]);
        assert_eq!(out.retry_after, Some(Duration::from_secs(12)));
        assert_eq!(
            Failure::of(&out),
            Failure::Throttled {
                retry_after: Some(Duration::from_secs(12))
            }
        );
        // A date, or nonsense, is not read.
        let mut dated = http::HeaderMap::new();
        dated.insert(
            http::header::RETRY_AFTER,
            "Wed, 21 Oct 2026 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after_header(&dated), None);
        assert_eq!(retry_after_header(&http::HeaderMap::new()), None);
    }

    #[test]
    fn a_poller_past_its_deadline_may_have_done_its_work() {
        let err = Error::exhausted(crate::retry::StillRunning {
            deadline: Duration::from_secs(60),
        });
        let out = classify("run:CreateService", err, &[]);
        assert_eq!(out.kind, ErrorKind::Unavailable);
        assert!(out.may_have_been_sent);
        assert!(
            out.message.contains("still running after 60s"),
            "{}",
            out.message
        );
        assert!(
            out.message.contains("outcome is unknown"),
            "{}",
            out.message
        );
    }

    #[test]
    fn a_json_error_body_is_read_and_a_bare_http_code_stands_for_its_status() {
        let body = br#"{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED"}}"#;
        let out = from_body("storage:buckets.get", 429, body, NOT_FOUND);
        assert_eq!(out.kind, ErrorKind::Throttled);
        assert_eq!(out.message, "storage:buckets.get: slow down");
        let bare = from_body("storage:buckets.get", 403, b"<html>", NOT_FOUND);
        assert_eq!(bare.kind, ErrorKind::Denied);
        let gone = from_body(
            "storage:buckets.get",
            404,
            br#"{"error":{"code":404}}"#,
            NOT_FOUND,
        );
        assert_eq!(gone.kind, ErrorKind::NotFound);
        let server = from_body("storage:buckets.insert", 503, b"", &[]);
        assert_eq!(server.kind, ErrorKind::Unavailable);
        assert!(server.may_have_been_sent);
    }
}
