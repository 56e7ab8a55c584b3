//! Scaleway's errors mapped onto [`ErrorKind`], denial first.
//!
//! Scaleway answers errors with a JSON body whose `type` names the error
//! (`not_found`, `permissions_denied`, `invalid_arguments`, `quotas_exceeded`,
//! `precondition_failed`, `transient_state`, …), a `message`, and for some types the
//! `resource` concerned. The mapping:
//!
//! | answer | kind |
//! |---|---|
//! | 401, 403 `permissions_denied`, `denied_authentication`, `locked` | `Denied` — never "absent" |
//! | 403 `quotas_exceeded`, 409/412 `precondition_failed` | `Invalid` (with the quota or condition) |
//! | 404 `not_found` of a resource type the call lists | `NotFound` |
//! | any other 404 (an unknown path, another resource type) | `Invalid` |
//! | 409 `already_exists`, other 409 | `Conflict` |
//! | 409 `transient_state` | `Unavailable`, not sent: the resource is busy and nothing was done, so the call is retried, a create included |
//! | 429, `too_many_requests` | `Throttled` (its `Retry-After` read by the client into `retry_after`) |
//! | 5xx, a timeout, an answer lost | `Unavailable`, and for a write "may have been sent" |
//! | no connection made | `Unavailable`, not sent |
//!
//! Messages carry Scaleway's own `message` and `type`; a request body (which may hold
//! a password or a secret's value) is never put in an error.

use infra_core::sdk::{BackendError, ErrorKind};
use serde::Deserialize;

/// The fields of Scaleway's error bodies this crate reads.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ErrorBody {
    #[serde(default, rename = "type")]
    pub(crate) kind: Option<String>,
    #[serde(default)]
    pub(crate) message: Option<String>,
    #[serde(default)]
    pub(crate) resource: Option<String>,
    #[serde(default)]
    pub(crate) resource_id: Option<String>,
    #[serde(default)]
    pub(crate) details: Vec<serde_json::Value>,
    #[serde(default)]
    pub(crate) help_message: Option<String>,
}

/// The error for an answer with `status` and `body` to the call `what`, whose curated
/// not-found list is `not_found` (the `resource` types whose `not_found` means the
/// resource the call names does not exist). `write` says the call changes something.
pub(crate) fn classify(
    what: &str,
    status: u16,
    body: &str,
    not_found: &[&str],
    write: bool,
) -> BackendError {
    let parsed: ErrorBody = serde_json::from_str(body).unwrap_or_default();
    let kind_name = parsed.kind.clone().unwrap_or_default();
    let message = describe(&parsed, status, body);
    let code = if kind_name.is_empty() {
        status.to_string()
    } else {
        kind_name.clone()
    };
    let kind = match (status, kind_name.as_str()) {
        (401, _) | (_, "permissions_denied" | "denied_authentication" | "locked") => {
            ErrorKind::Denied
        }
        (403, "quotas_exceeded") | (_, "precondition_failed" | "out_of_stock" | "expired") => {
            ErrorKind::Invalid
        }
        (403, _) => ErrorKind::Denied,
        (404, "not_found")
            if parsed
                .resource
                .as_deref()
                .is_some_and(|r| not_found.contains(&r)) =>
        {
            ErrorKind::NotFound
        }
        // Serverless Functions and Containers answer a missing resource with a bare
        // `{"message": "Namespace was not found"}`: no `type`, no `resource`.
        (404, "") if bare_not_found(parsed.message.as_deref(), not_found) => ErrorKind::NotFound,
        (404, _) => ErrorKind::Invalid,
        (409, "transient_state") => ErrorKind::Unavailable,
        (409, _) | (_, "already_exists") => ErrorKind::Conflict,
        (429, _) | (_, "too_many_requests") => ErrorKind::Throttled,
        (500..=599, _) => ErrorKind::Unavailable,
        (400..=499, _) => ErrorKind::Invalid,
        _ => ErrorKind::Other,
    };
    let mut err = BackendError::new(kind, format!("{what}: {message}")).with_code(code);
    if write && status >= 500 {
        err = err.maybe_sent();
    }
    err
}

/// Whether a bare message (`Namespace was not found`) names a resource type of the call's
/// not-found list (`namespace`; `Secret version` would be `secret_version`).
fn bare_not_found(message: Option<&str>, not_found: &[&str]) -> bool {
    message
        .and_then(|m| m.strip_suffix(" was not found"))
        .map(|r| r.to_ascii_lowercase().replace(' ', "_"))
        .is_some_and(|r| not_found.contains(&r.as_str()))
}

/// The words of an error body: its message, the arguments it names, the resource.
fn describe(parsed: &ErrorBody, status: u16, raw: &str) -> String {
    let mut out = match (&parsed.message, &parsed.kind) {
        (Some(m), Some(k)) => format!("{m} ({k}, HTTP {status})"),
        (Some(m), None) => format!("{m} (HTTP {status})"),
        (None, Some(k)) => format!("{k} (HTTP {status})"),
        (None, None) => {
            let short: String = raw.chars().take(200).collect();
            format!("HTTP {status}: {short}")
        }
    };
    for detail in &parsed.details {
        let name = detail.get("argument_name").and_then(|v| v.as_str());
        let reason = detail.get("reason").and_then(|v| v.as_str());
        let help = detail.get("help_message").and_then(|v| v.as_str());
        if let Some(name) = name {
            out.push_str(&format!(
                "; `{name}`: {}",
                help.or(reason).unwrap_or("refused")
            ));
        }
    }
    if let Some(help) = &parsed.help_message {
        out.push_str(&format!("; {help}"));
    }
    if let (Some(resource), Some(id)) = (&parsed.resource, &parsed.resource_id) {
        out.push_str(&format!(" [{resource} {id}]"));
    }
    out
}

/// A call that got no answer. One that never reached Scaleway (no connection could be
/// made) is `Unavailable` and was not sent: the retry policy repeats it, a create
/// included. One that may have reached it (a timeout, a connection lost midway) is
/// `Unavailable` too, and for a write "may have been sent".
pub(crate) fn transport(what: &str, err: &reqwest::Error, write: bool) -> BackendError {
    let e = BackendError::new(
        ErrorKind::Unavailable,
        format!("{what}: no answer from Scaleway: {err}"),
    );
    if write && !err.is_connect() {
        e.maybe_sent()
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denial_is_never_absence_and_not_found_is_curated() {
        let denied = r#"{"type":"permissions_denied","message":"insufficient permissions","details":[{"resource":"secret_manager","action":"read"}]}"#;
        assert_eq!(
            classify("read", 403, denied, &["secret"], false).kind,
            ErrorKind::Denied
        );
        let gone = r#"{"type":"not_found","message":"resource is not found","resource":"secret","resource_id":"1"}"#;
        assert_eq!(
            classify("read", 404, gone, &["secret"], false).kind,
            ErrorKind::NotFound
        );
        // The same answer for another resource type (the project, say) is not absence.
        assert_eq!(
            classify("read", 404, gone, &["namespace"], false).kind,
            ErrorKind::Invalid
        );
        // A bare 404 (an unknown path) is not absence either.
        assert_eq!(
            classify("read", 404, "404 page not found", &["secret"], false).kind,
            ErrorKind::Invalid
        );
        assert_eq!(
            classify("read", 401, "", &["secret"], false).kind,
            ErrorKind::Denied
        );
    }

    #[test]
    fn quotas_busy_resources_throttling_and_outages() {
        let quota = r#"{"type":"quotas_exceeded","message":"quota exceeded","details":[{"resource":"secrets","quota":10,"current":10}]}"#;
        let e = classify("create", 403, quota, &[], true);
        assert_eq!(
            (e.kind, e.code.as_deref()),
            (ErrorKind::Invalid, Some("quotas_exceeded"))
        );
        let busy = r#"{"type":"transient_state","message":"resource is in a transient state","resource":"instance","resource_id":"x","current_state":"provisioning"}"#;
        assert_eq!(
            classify("upgrade", 409, busy, &[], true).kind,
            ErrorKind::Unavailable
        );
        let exists = r#"{"type":"already_exists","message":"resource already exists","resource":"namespace"}"#;
        assert_eq!(
            classify("create", 409, exists, &[], true).kind,
            ErrorKind::Conflict
        );
        assert_eq!(
            classify("list", 429, "", &[], false).kind,
            ErrorKind::Throttled
        );
        let down = classify("create", 503, "", &[], true);
        assert!(down.kind == ErrorKind::Unavailable && down.may_have_been_sent);
        assert!(!classify("list", 503, "", &[], false).may_have_been_sent);
    }

    #[test]
    fn invalid_arguments_name_the_argument() {
        let bad = r#"{"type":"invalid_arguments","message":"invalid argument(s)","details":[{"argument_name":"name","reason":"constraint","help_message":"must match ^[a-z0-9-]+$"}]}"#;
        let e = classify("create", 400, bad, &[], true);
        assert_eq!(e.kind, ErrorKind::Invalid);
        assert!(e.message.contains("`name`: must match"), "{}", e.message);
    }
}
