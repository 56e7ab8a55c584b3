//! Reading a secret's current value from Secret Manager: for the `SecretValues` of the
//! backend, and for the writes that need one (a database administrator's password, a
//! serverless namespace's or container's secret environment variables).
//!
//! A `secrets` resource's handle is the secret's id (a UUID) in its region; its value is
//! the payload of its latest enabled version
//! (`GET /secret-manager/v1beta1/regions/{region}/secrets/{id}/versions/latest_enabled/access`),
//! which Scaleway answers base64-encoded in `data`. The value is held in a
//! [`SecretString`] from the moment it is decoded, and never reaches an error message, a
//! log line or a tag: errors name the secret, never its content.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use infra_core::sdk::{BackendError, ErrorKind, SecretString};
use serde::Deserialize;

use crate::api::Call;
use crate::clients::Clients;

/// The resource types whose `not_found` means "this secret has no value to read": the
/// secret itself, or its latest enabled version.
const NO_VALUE: &[&str] = &["secret", "secret_version"];

/// What `AccessSecretVersion` answers that is read here. Its `Debug` never shows `data`.
#[derive(Deserialize)]
struct Access {
    #[serde(default)]
    data: String,
}

/// The latest enabled value of the secret whose handle is `handle`, in `region`.
pub(crate) async fn latest_value(
    clients: &Clients,
    region: &str,
    handle: &str,
) -> Result<SecretString, BackendError> {
    check_handle(handle)?;
    let path = format!(
        "/secret-manager/v1beta1/regions/{region}/secrets/{handle}/versions/latest_enabled/access"
    );
    let access: Access = clients
        .api()
        .call(Call::get("secret-manager:AccessSecretVersion", path).not_found(NO_VALUE))
        .await?;
    decode(handle, access.data)
}

/// The payload `data` (base64) of the secret `handle` as text. Neither the payload nor
/// any part of it is ever put in the error.
fn decode(handle: &str, data: String) -> Result<SecretString, BackendError> {
    let data = SecretString::new(data);
    let bytes = STANDARD.decode(data.expose().as_bytes()).map_err(|_| {
        BackendError::new(
            ErrorKind::Other,
            format!(
                "the latest enabled version of secret {handle}: Scaleway's payload is not base64"
            ),
        )
    })?;
    match String::from_utf8(bytes) {
        Ok(text) => Ok(SecretString::new(text)),
        Err(_) => Err(BackendError::new(
            ErrorKind::Invalid,
            format!("the latest enabled version of secret {handle} is not UTF-8 text"),
        )),
    }
}

/// Refuses a handle that is not a Secret Manager secret id (a UUID), without a call: it
/// would name another path.
pub(crate) fn check_handle(handle: &str) -> Result<(), BackendError> {
    let groups: Vec<&str> = handle.split('-').collect();
    let lengths = [8, 4, 4, 4, 12];
    let ok = groups.len() == lengths.len()
        && groups
            .iter()
            .zip(lengths)
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()));
    if ok {
        Ok(())
    } else {
        Err(BackendError::invalid(format!(
            "{handle:?} is not a Secret Manager secret's id (a UUID)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_is_decoded_and_never_quoted() {
        let value = decode("s", STANDARD.encode("hunter2-hunter2")).unwrap();
        assert_eq!(value.expose(), "hunter2-hunter2");
        let e = decode("s", "not base64 hunter2!".to_owned()).unwrap_err();
        assert!(!e.message.contains("hunter2"), "{}", e.message);
        let e = decode("s", STANDARD.encode([0xff, 0xfe, b'x'])).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Invalid);
    }

    #[test]
    fn handles_are_uuids() {
        assert!(check_handle("00000001-5ca1-4e00-8000-000000001eef").is_ok());
        for bad in ["", "db", "../x", "00000001-5ca1-4e00-8000-000000001eeg"] {
            assert_eq!(check_handle(bad).unwrap_err().kind, ErrorKind::Invalid);
        }
    }
}

#[cfg(test)]
#[path = "recorded/secret_value.rs"]
mod recorded;
