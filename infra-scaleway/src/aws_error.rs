//! Errors of the AWS SDK clients that reach Object Storage and Queues (their S3 and SQS
//! APIs), mapped onto `ErrorKind` by the table `infra-aws-compat` holds for every API
//! that speaks AWS's protocols: denial first, then each call's curated not-found codes,
//! then the codes of throttling, conflicts, refusals and outages.

use std::error::Error as StdError;

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use infra_core::sdk::BackendError;

/// An error of Object Storage's or Queues' SDK as a [`BackendError`]. `what` names the
/// call (it starts the message), `not_found` is the call's curated list of codes that
/// mean the resource it names does not exist, `write` says the call changes something:
/// only a write that timed out, lost its connection, met a server error or got an
/// answer that could not be read may have been sent (a read changes nothing).
pub(crate) fn sdk_error<E>(
    what: &str,
    err: SdkError<E, HttpResponse>,
    not_found: &[&str],
    write: bool,
) -> BackendError
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    let mut error = infra_aws_compat::classify("Scaleway", what, err, not_found);
    error.may_have_been_sent &= write;
    error
}
