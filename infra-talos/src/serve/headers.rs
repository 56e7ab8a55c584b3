//! The headers every answer of the service carries, pages, API, errors, redirects
//! and health alike: one layer over the whole router ([`secure`]), so no route can
//! forget them.
//!
//! - `Content-Security-Policy`: nothing loads but the page's own inline style sheet,
//!   allowed by its SHA-256 digest (the page has no script, image or font); forms post
//!   to this service only; no `<base>`; and no page may be framed
//!   (`frame-ancestors 'none'`).
//! - `X-Frame-Options: DENY`, the same refusal for browsers that predate
//!   `frame-ancestors`.
//! - `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`.

use std::sync::LazyLock;

use axum::http::{HeaderName, HeaderValue, header};
use axum::response::Response;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest as _, Sha256};

/// The service's content security policy.
pub(crate) fn content_security_policy() -> &'static str {
    static POLICY: LazyLock<String> = LazyLock::new(|| {
        let style = STANDARD.encode(Sha256::digest(super::page::STYLE.as_bytes()));
        format!(
            "default-src 'none'; style-src 'sha256-{style}'; form-action 'self'; \
             base-uri 'none'; frame-ancestors 'none'"
        )
    });
    &POLICY
}

/// Adds the security headers to `response`, replacing any a route set.
pub(crate) async fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    let fixed: [(HeaderName, &'static str); 4] = [
        (header::CONTENT_SECURITY_POLICY, content_security_policy()),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_allows_the_style_sheet_by_its_digest_and_no_framing() {
        let policy = content_security_policy();
        assert!(policy.starts_with("default-src 'none'; "), "{policy}");
        assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
        assert!(!policy.contains("unsafe-inline"), "{policy}");
        // The digest of the style sheet the pages carry, as a browser computes it.
        let digest = Sha256::digest(super::super::page::STYLE.as_bytes());
        assert!(
            policy.contains(&format!("'sha256-{}'", STANDARD.encode(digest))),
            "{policy}"
        );
    }
}
