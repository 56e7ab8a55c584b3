//! Who is asking: the principal a verified client certificate names, or one a
//! short-lived token issued by this service names (as a bearer token, or as the
//! approval page's session cookie). Tokens and the page's CSRF values are signed with
//! a key made when the service starts and never stored: a restart ends every token.
//!
//! Every comparison of a presented value with the one this service would sign goes
//! through [`Mac::verify_slice`], which compares in constant time, so how long a
//! refusal takes says nothing about how much of a guess was right.

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use zeroize::Zeroizing;

type HmacSha256 = hmac::Hmac<Sha256>;

/// The longest a token may be issued for.
pub(crate) const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// How a request was authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proof {
    /// A client certificate verified in the TLS handshake.
    Certificate,
    /// A bearer token this service issued.
    Bearer,
    /// The approval page's session cookie (a token this service issued).
    Session,
}

/// An authenticated principal, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Principal {
    /// The principal's identifier.
    pub(crate) id: String,
    /// How it was proven.
    pub(crate) proof: Proof,
    /// The roles it holds, as the store held them when the request was proven.
    pub(crate) roles: Vec<crate::contract::Role>,
}

#[derive(Serialize, Deserialize)]
struct Claims {
    sub: String,
    exp: u64,
    nonce: String,
}

/// The service's signing key for tokens and CSRF values.
pub(crate) struct Signer {
    key: Zeroizing<[u8; 32]>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer").finish_non_exhaustive()
    }
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Signer {
    /// A fresh random key.
    pub(crate) fn generate() -> Result<Signer, getrandom::Error> {
        let mut key = Zeroizing::new([0u8; 32]);
        getrandom::fill(key.as_mut())?;
        Ok(Signer { key })
    }

    fn keyed(&self, parts: &[&[u8]]) -> HmacSha256 {
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(self.key.as_ref())
            .expect("HMAC takes a key of any length");
        for p in parts {
            mac.update(&(p.len() as u64).to_be_bytes());
            mac.update(p);
        }
        mac
    }

    fn mac(&self, parts: &[&[u8]]) -> Vec<u8> {
        self.keyed(parts).finalize().into_bytes().to_vec()
    }

    /// Whether `presented` (unpadded URL-safe base64) is this key's MAC of `parts`,
    /// compared in constant time.
    fn signed(&self, parts: &[&[u8]], presented: &str) -> bool {
        URL_SAFE_NO_PAD
            .decode(presented)
            .is_ok_and(|tag| self.keyed(parts).verify_slice(&tag).is_ok())
    }

    /// A token naming `principal`, valid until `now + lifetime`; returns it and its
    /// expiry (Unix milliseconds).
    pub(crate) fn issue(
        &self,
        principal: &str,
        now: SystemTime,
        lifetime: Duration,
    ) -> Result<(String, u64), getrandom::Error> {
        let mut nonce = [0u8; 12];
        getrandom::fill(&mut nonce)?;
        let exp = unix_ms(now + lifetime.min(MAX_TOKEN_LIFETIME));
        let claims = Claims {
            sub: principal.to_owned(),
            exp,
            nonce: URL_SAFE_NO_PAD.encode(nonce),
        };
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap_or_default());
        let sig = URL_SAFE_NO_PAD.encode(self.mac(&[b"token", body.as_bytes()]));
        Ok((format!("{body}.{sig}"), exp))
    }

    /// The principal `token` names, if this service signed it and it has not expired
    /// at `now`.
    pub(crate) fn verify(&self, token: &str, now: SystemTime) -> Option<String> {
        let (body, sig) = token.trim().split_once('.')?;
        if !self.signed(&[b"token", body.as_bytes()], sig) {
            return None;
        }
        let claims: Claims = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body).ok()?).ok()?;
        (unix_ms(now) < claims.exp).then_some(claims.sub)
    }

    /// The CSRF value the page's forms carry for `principal` under `session` (the
    /// session token, or empty for a certificate-authenticated browser).
    pub(crate) fn csrf(&self, principal: &str, session: &str) -> String {
        URL_SAFE_NO_PAD.encode(self.mac(&[b"csrf", principal.as_bytes(), session.as_bytes()]))
    }

    /// Whether `presented` is the CSRF value for `principal` under `session`
    /// (compared in constant time).
    pub(crate) fn csrf_ok(&self, principal: &str, session: &str, presented: &str) -> bool {
        self.signed(
            &[b"csrf", principal.as_bytes(), session.as_bytes()],
            presented,
        )
    }

    /// The sign-in form's CSRF value for the visitor whose pre-session cookie holds
    /// `visitor` (see [`visitor`]).
    pub(crate) fn login_csrf(&self, visitor: &str) -> String {
        URL_SAFE_NO_PAD.encode(self.mac(&[b"login-csrf", visitor.as_bytes()]))
    }

    /// Whether `presented` is the sign-in form's CSRF value for `visitor` (compared in
    /// constant time). An empty `visitor` (no pre-session cookie) has none.
    pub(crate) fn login_csrf_ok(&self, visitor: &str, presented: &str) -> bool {
        !visitor.is_empty() && self.signed(&[b"login-csrf", visitor.as_bytes()], presented)
    }
}

/// A fresh random value naming one visitor of the sign-in page (its pre-session
/// cookie): 128 bits, unpadded URL-safe base64.
pub(crate) fn visitor() -> Result<String, getrandom::Error> {
    let mut value = [0u8; 16];
    getrandom::fill(&mut value)?;
    Ok(URL_SAFE_NO_PAD.encode(value))
}

/// The value of cookie `name` in a `Cookie` header.
pub(crate) fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header
        .split(';')
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    #[test]
    fn a_token_names_its_principal_until_it_expires() {
        let s = Signer::generate().unwrap();
        let (token, exp) = s.issue("bob", now(), Duration::from_secs(60)).unwrap();
        assert_eq!(exp, unix_ms(now()) + 60_000);
        assert_eq!(s.verify(&token, now()).as_deref(), Some("bob"));
        assert_eq!(s.verify(&token, now() + Duration::from_secs(60)), None);
    }

    #[test]
    fn a_token_is_capped_and_tamper_evident() {
        let s = Signer::generate().unwrap();
        let (token, exp) = s
            .issue("bob", now(), Duration::from_secs(86_400 * 30))
            .unwrap();
        assert_eq!(exp, unix_ms(now() + MAX_TOKEN_LIFETIME));
        let (body, sig) = token.split_once('.').unwrap();
        let claims = String::from_utf8(URL_SAFE_NO_PAD.decode(body).unwrap()).unwrap();
        let forged = URL_SAFE_NO_PAD.encode(claims.replace("bob", "eve"));
        assert_eq!(s.verify(&format!("{forged}.{sig}"), now()), None);
        let other = Signer::generate().unwrap();
        assert_eq!(other.verify(&token, now()), None);
        for garbage in ["", ".", "x.y", "bob"] {
            assert_eq!(s.verify(garbage, now()), None);
        }
    }

    #[test]
    fn csrf_values_bind_principal_and_session() {
        let s = Signer::generate().unwrap();
        let v = s.csrf("bob", "t1");
        assert!(s.csrf_ok("bob", "t1", &v));
        assert!(!s.csrf_ok("eve", "t1", &v));
        assert!(!s.csrf_ok("bob", "t2", &v));
        assert!(!s.csrf_ok("bob", "t1", ""));
        assert!(!s.csrf_ok("bob", "t1", "not base64!"));
        let other = Signer::generate().unwrap();
        assert!(!other.csrf_ok("bob", "t1", &v));
    }

    #[test]
    fn each_visitor_has_a_login_csrf_value_of_its_own() {
        let s = Signer::generate().unwrap();
        let (a, b) = (visitor().unwrap(), visitor().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), 22);
        let (va, vb) = (s.login_csrf(&a), s.login_csrf(&b));
        assert_ne!(va, vb);
        assert!(s.login_csrf_ok(&a, &va));
        assert!(!s.login_csrf_ok(&a, &vb));
        assert!(!s.login_csrf_ok(&b, &va));
        assert!(!s.login_csrf_ok("", &s.login_csrf("")));
        // Not interchangeable with a session's CSRF value.
        assert!(!s.csrf_ok("", &a, &va));
        assert!(!s.login_csrf_ok(&a, &s.csrf("", &a)));
    }

    #[test]
    fn cookies_are_found_by_name() {
        assert_eq!(cookie("a=1; session=xyz; b=2", "session"), Some("xyz"));
        assert_eq!(cookie("sessionx=1", "session"), None);
    }
}
