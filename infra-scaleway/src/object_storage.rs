//! Object Storage (objectStore), through its S3 API.

use std::sync::Arc;

use infra_core::sdk::Router;

use crate::clients::Clients;

/// Adds this product's kinds to `router`.
pub(crate) fn register(router: Router, _clients: &Arc<Clients>) -> Router {
    router
}
