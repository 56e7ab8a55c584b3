//! Errors of the AWS SDK clients that reach Object Storage and Queues (their S3 and SQS
//! APIs), mapped onto `ErrorKind`: denial first, then each call's curated not-found
//! codes, then the codes of throttling, conflicts, refusals and outages.

use std::error::Error as StdError;

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use infra_core::sdk::{BackendError, ErrorKind};

/// Codes of a refused permission or credentials: `Denied`, whatever the call.
const DENIED: &[&str] = &[
    "AccessDenied",
    "AccessDeniedException",
    "AllAccessDisabled",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidSecurity",
    "ExpiredToken",
    "InvalidClientTokenId",
    "AuthFailure",
];
/// Codes of a request refused for its rate.
const THROTTLED: &[&str] = &[
    "SlowDown",
    "Throttling",
    "ThrottlingException",
    "RequestThrottled",
    "TooManyRequests",
    "TooManyRequestsException",
];
/// Codes of a service that could not answer.
const UNAVAILABLE: &[&str] = &[
    "InternalError",
    "InternalFailure",
    "ServiceUnavailable",
    "ServiceUnavailableException",
];
/// Codes of a name already taken, or a change meeting another.
const CONFLICT: &[&str] = &[
    "BucketAlreadyExists",
    "BucketAlreadyOwnedByYou",
    "OperationAborted",
    "QueueAlreadyExists",
    "QueueNameExists",
    "AWS.SimpleQueueService.QueueNameExists",
];
/// Codes of a resource something else still holds.
const DEPENDENCY: &[&str] = &["BucketNotEmpty"];
/// Codes of a request refused for what it asks.
const INVALID: &[&str] = &[
    "InvalidArgument",
    "InvalidRequest",
    "InvalidBucketName",
    "InvalidBucketState",
    "InvalidLocationConstraint",
    "IllegalLocationConstraintException",
    "InvalidTag",
    "MalformedXML",
    "TooManyBuckets",
    "NotImplemented",
    "InvalidAttributeName",
    "InvalidAttributeValue",
    "InvalidParameterValue",
    "InvalidParameterValueException",
    "MissingParameter",
    "AWS.SimpleQueueService.UnsupportedOperation",
    "UnsupportedOperation",
];

/// The portable kind of an S3 or SQS error `code` with HTTP `status`, for a call whose
/// curated not-found codes are `not_found`. Denial is checked first, so that no list
/// can make a refused permission look like absence.
fn kind_of(code: &str, status: u16, not_found: &[&str]) -> ErrorKind {
    let known = |list: &[&str]| list.contains(&code);
    if known(DENIED) || (code.is_empty() && matches!(status, 401 | 403)) {
        ErrorKind::Denied
    } else if !code.is_empty() && not_found.contains(&code) {
        ErrorKind::NotFound
    } else if known(THROTTLED) || status == 429 {
        ErrorKind::Throttled
    } else if known(DEPENDENCY) {
        ErrorKind::DependencyViolation
    } else if known(CONFLICT) {
        ErrorKind::Conflict
    } else if known(INVALID) {
        ErrorKind::Invalid
    } else if known(UNAVAILABLE) || status >= 500 {
        ErrorKind::Unavailable
    } else {
        ErrorKind::Other
    }
}

/// An error of Object Storage's or Queues' SDK as a [`BackendError`]. `what` names the
/// call (it starts the message), `not_found` is the call's curated list of codes that
/// mean the resource it names does not exist, `write` says the call changes something:
/// a write that timed out, could not be dispatched, met a server error or got an answer
/// that could not be read may have been sent.
pub(crate) fn sdk_error<E>(
    what: &str,
    err: SdkError<E, HttpResponse>,
    not_found: &[&str],
    write: bool,
) -> BackendError
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    let sent = |e: BackendError| if write { e.maybe_sent() } else { e };
    match &err {
        SdkError::ConstructionFailure(_) => BackendError::invalid(format!(
            "{what}: the request could not be built: {}",
            chain(&err)
        )),
        SdkError::TimeoutError(_) => sent(BackendError::new(
            ErrorKind::Unavailable,
            format!("{what}: no answer from Scaleway (timed out)"),
        )),
        SdkError::DispatchFailure(_) => sent(BackendError::new(
            ErrorKind::Unavailable,
            format!("{what}: no answer from Scaleway: {}", chain(&err)),
        )),
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            let e = service.err();
            let code = e.code().unwrap_or_default().to_owned();
            let kind = kind_of(&code, status, not_found);
            let said = e.message().map_or_else(|| chain(e), str::to_owned);
            let said = if code.is_empty() {
                format!("{what}: {said} (HTTP {status})")
            } else {
                format!("{what}: {said} ({code}, HTTP {status})")
            };
            let out = BackendError::new(kind, said).with_code(code);
            if status >= 500 || (200..300).contains(&status) {
                sent(out)
            } else {
                out
            }
        }
        _ => sent(BackendError::new(
            ErrorKind::Other,
            format!("{what}: the answer could not be read: {}", chain(&err)),
        )),
    }
}

/// An error and its sources, as one line.
fn chain(err: &dyn StdError) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denial_comes_first_and_not_found_is_only_what_the_call_lists() {
        assert_eq!(
            kind_of("AccessDenied", 403, &["AccessDenied"]),
            ErrorKind::Denied
        );
        assert_eq!(kind_of("", 403, &[""]), ErrorKind::Denied);
        assert_eq!(
            kind_of("NoSuchBucket", 404, &["NoSuchBucket"]),
            ErrorKind::NotFound
        );
        assert_eq!(kind_of("NoSuchBucket", 404, &[]), ErrorKind::Other);
        assert_eq!(kind_of("", 404, &["NoSuchBucket"]), ErrorKind::Other);
        assert_eq!(
            kind_of("NoSuchTagSet", 404, &["NoSuchBucket"]),
            ErrorKind::Other
        );
        assert_eq!(kind_of("SlowDown", 503, &[]), ErrorKind::Throttled);
        assert_eq!(kind_of("", 429, &[]), ErrorKind::Throttled);
        assert_eq!(kind_of("InternalError", 500, &[]), ErrorKind::Unavailable);
        assert_eq!(kind_of("", 502, &[]), ErrorKind::Unavailable);
        assert_eq!(kind_of("NotImplemented", 501, &[]), ErrorKind::Invalid);
        assert_eq!(
            kind_of("BucketNotEmpty", 409, &[]),
            ErrorKind::DependencyViolation
        );
        assert_eq!(
            kind_of("BucketAlreadyExists", 409, &[]),
            ErrorKind::Conflict
        );
        assert_eq!(kind_of("QueueAlreadyExists", 400, &[]), ErrorKind::Conflict);
        assert_eq!(kind_of("InvalidBucketName", 400, &[]), ErrorKind::Invalid);
        assert_eq!(kind_of("SomethingNew", 400, &[]), ErrorKind::Other);
    }
}
