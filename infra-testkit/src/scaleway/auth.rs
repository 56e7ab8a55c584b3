//! The API keys the stand-in accepts, and what it answers a request carrying any other.
//!
//! A Scaleway API key is a pair: an access key (`SCW` and 17 uppercase letters or
//! digits), which names the key, and a secret key (a UUID), which REST calls carry in
//! `X-Auth-Token`. Scaleway's official SDKs refuse to start with a key of another shape,
//! and Scaleway answers a request whose token is missing or malformed 401
//! `denied_authentication` with the reason `invalid_argument`, and one whose well-formed
//! token names no key with the reason `not_found`. The stand-in does the same: it takes
//! any well-formed secret key, or only the one of the pair it was given.

use serde_json::json;

use super::wire::Reply;

/// A Scaleway API key: its access key and its secret key. Its `Debug` never shows the
/// secret key.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    access_key: String,
    secret_key: String,
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKey")
            .field("access_key", &self.access_key)
            .finish_non_exhaustive()
    }
}

impl ApiKey {
    /// The key of `access_key` and `secret_key`.
    ///
    /// # Errors
    /// When either is not of Scaleway's shape (the message never holds the secret key).
    pub fn new(access_key: &str, secret_key: &str) -> Result<Self, String> {
        if !is_access_key(access_key) {
            return Err(format!(
                "`{access_key}` is not an access key: `SCW` and 17 uppercase letters or digits"
            ));
        }
        if !is_secret_key(secret_key) {
            return Err(
                "the secret key is not a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)".into(),
            );
        }
        Ok(ApiKey {
            access_key: access_key.to_owned(),
            secret_key: secret_key.to_ascii_lowercase(),
        })
    }

    /// The access key.
    #[must_use]
    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// The secret key, which REST calls carry in `X-Auth-Token`.
    #[must_use]
    pub fn secret_key(&self) -> &str {
        &self.secret_key
    }
}

/// Whether `key` is of the shape of an access key: `SCW` and 17 uppercase letters or
/// digits.
#[must_use]
pub fn is_access_key(key: &str) -> bool {
    key.len() == 20
        && key.starts_with("SCW")
        && key[3..]
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
}

/// Whether `key` is of the shape of a secret key: a UUID
/// (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, hexadecimal digits).
#[must_use]
pub fn is_secret_key(key: &str) -> bool {
    let groups: Vec<&str> = key.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The keys a stand-in accepts.
#[derive(Clone, Debug, Default)]
pub(crate) enum Keys {
    /// Any well-formed secret key.
    #[default]
    AnyWellFormed,
    /// Only this key's.
    Only(ApiKey),
}

impl Keys {
    /// A secret key this stand-in accepts, for calls made on a test's behalf.
    pub(crate) fn accepted(&self) -> String {
        match self {
            Keys::AnyWellFormed => STAND_IN_SECRET_KEY.to_owned(),
            Keys::Only(key) => key.secret_key.clone(),
        }
    }

    /// `None` when `token` (the `X-Auth-Token` of a request) is accepted, else
    /// Scaleway's 401.
    pub(crate) fn refusal(&self, token: Option<&str>) -> Option<Reply> {
        let token = token.map(str::trim).filter(|t| !t.is_empty());
        let reason = match (token, self) {
            (Some(t), _) if !is_secret_key(t) => "invalid_argument",
            (None, _) => "invalid_argument",
            (Some(_), Keys::AnyWellFormed) => return None,
            (Some(t), Keys::Only(key)) if t.eq_ignore_ascii_case(&key.secret_key) => return None,
            (Some(_), Keys::Only(_)) => "not_found",
        };
        Some(Reply::error(
            401,
            "denied_authentication",
            "authentication is denied",
            json!({ "method": "api_key", "reason": reason }),
        ))
    }
}

/// The access key of [`ScalewayServer::token`](super::ScalewayServer::token) when the
/// stand-in takes any well-formed key.
pub const STAND_IN_ACCESS_KEY: &str = "SCWSTANDIN0000000000";

/// The secret key [`ScalewayServer::token`](super::ScalewayServer::token) answers when
/// the stand-in takes any well-formed key (a UUID, as every secret key is).
pub const STAND_IN_SECRET_KEY: &str = "5ca1ab1e-0000-4000-8000-000000000000";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_scaleway_s_shape_are_told_from_others() {
        assert!(is_access_key(STAND_IN_ACCESS_KEY));
        assert!(is_access_key("SCWXXXXXXXXXXXXXXXXX"));
        assert!(!is_access_key("SCWXXXXXXXXXXXXXXXX"));
        assert!(!is_access_key("SCWxxxxxxxxxxxxxxxxx"));
        assert!(!is_access_key("ABCXXXXXXXXXXXXXXXXX"));
        assert!(is_secret_key(STAND_IN_SECRET_KEY));
        assert!(is_secret_key("105BDCE1-64C0-48AB-899D-868455867ECF"));
        assert!(!is_secret_key("stand-in"));
        assert!(!is_secret_key("105bdce1-64c0-48ab-899d-868455867ec"));
        assert!(!is_secret_key("105bdce1x64c0-48ab-899d-868455867ecf"));
        assert!(ApiKey::new("SCWXXXXXXXXXXXXXXXXX", "stand-in").is_err());
        let refused = ApiKey::new("nope", STAND_IN_SECRET_KEY).unwrap_err();
        assert!(!refused.contains(STAND_IN_SECRET_KEY), "{refused}");
    }

    #[test]
    fn a_missing_or_malformed_token_is_invalid_and_an_unknown_one_not_found() {
        let reason = |keys: &Keys, token: Option<&str>| {
            keys.refusal(token)
                .map(|r| (r.status, r.body["reason"].as_str().unwrap_or("").to_owned()))
        };
        let any = Keys::AnyWellFormed;
        assert_eq!(reason(&any, Some(STAND_IN_SECRET_KEY)), None);
        let invalid = Some((401, "invalid_argument".to_owned()));
        assert_eq!(reason(&any, None), invalid);
        assert_eq!(reason(&any, Some("")), invalid);
        assert_eq!(reason(&any, Some("stand-in")), invalid);
        let key = ApiKey::new(
            "SCWAAAAAAAAAAAAAAAAA",
            "11111111-2222-4333-8444-555555555555",
        )
        .unwrap();
        let only = Keys::Only(key);
        assert_eq!(
            reason(&only, Some("11111111-2222-4333-8444-555555555555")),
            None
        );
        assert_eq!(
            reason(&only, Some(STAND_IN_SECRET_KEY)),
            Some((401, "not_found".to_owned()))
        );
        assert_eq!(reason(&only, Some("stand-in")), invalid);
        assert!(!format!("{only:?}").contains("5555"), "{only:?}");
    }
}
