//! AWS errors, mapped onto the portable kinds by the table `infra-aws-compat` holds for
//! every API that speaks AWS's protocols.
//!
//! Not-found is recognised only from each call's own curated list of codes; a code the
//! table does not know is `Other`, never absence. A request that timed out, lost its
//! connection, met a 5xx outage or got an unreadable answer may have been sent.

use std::error::Error as StdError;

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use infra_core::sdk::BackendError;

/// An SDK error as a [`BackendError`]. `what` says which call failed (it starts the
/// message); `not_found` is the call's curated list of not-found codes.
pub(crate) fn classify<E>(
    what: &str,
    err: SdkError<E, HttpResponse>,
    not_found: &[&str],
) -> BackendError
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    infra_aws_compat::classify("AWS", what, err, not_found)
}
