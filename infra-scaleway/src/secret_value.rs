//! Reading a secret's current value from Secret Manager: for the `SecretValues` of the
//! backend, and for the writes that need one (a database administrator's password, a
//! serverless namespace's or container's secret environment variables).

use infra_core::sdk::{BackendError, ErrorKind, SecretString};

use crate::clients::Clients;

/// The latest enabled value of the secret whose handle is `handle`, in `region`.
pub(crate) async fn latest_value(
    clients: &Clients,
    region: &str,
    handle: &str,
) -> Result<SecretString, BackendError> {
    let _ = (clients, region);
    Err(BackendError::new(
        ErrorKind::Invalid,
        format!("reading the value of secret {handle} is not written yet"),
    ))
}
