//! Reading a secret's current value from Secret Manager: for the `SecretValues` of the
//! backend, and for the one Cloud SQL write that sets an administrator's password.
//!
//! A `secrets` resource's handle is its resource name, `projects/{project}/secrets/{id}`;
//! the value is its latest version's payload. The value never reaches an error message,
//! a log line or a label: errors name the secret, never its content.

use infra_core::prelude::SecretString;
use infra_core::sdk::{BackendError, ErrorKind};

use crate::clients::Clients;
use crate::error::{NOT_FOUND, classify};

/// The latest value of the secret whose resource name is `handle`.
pub(crate) async fn latest_value(
    clients: &Clients,
    handle: &str,
) -> Result<SecretString, BackendError> {
    let answer = clients
        .secret_manager()
        .await?
        .access_secret_version()
        .set_name(format!("{}/versions/latest", handle.trim_end_matches('/')))
        .send()
        .await
        .map_err(|e| classify("secretmanager:AccessSecretVersion", e, NOT_FOUND))?;
    let data = answer.payload.map(|p| p.data).unwrap_or_default();
    match String::from_utf8(data.to_vec()) {
        Ok(text) => Ok(SecretString::new(text)),
        Err(_) => Err(BackendError::new(
            ErrorKind::Invalid,
            format!("the latest version of secret {handle} is not UTF-8 text"),
        )),
    }
}
