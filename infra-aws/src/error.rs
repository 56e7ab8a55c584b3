//! AWS errors, mapped onto the portable kinds.
//!
//! Not-found is recognised only from each call's own curated list of codes; a code this
//! module does not know is `Other`, never absence. A request that timed out, failed to
//! dispatch, or got an unparseable answer may have been sent.

use std::error::Error as StdError;

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use infra_core::sdk::{BackendError, ErrorKind};

const DENIED: &[&str] = &[
    "AccessDenied",
    "AccessDeniedException",
    "UnauthorizedOperation",
    "UnauthorizedAccess",
    "AuthFailure",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "ExpiredToken",
    "ExpiredTokenException",
    "SignatureDoesNotMatch",
    "InvalidAccessKeyId",
    "OptInRequired",
];

const THROTTLED: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "SlowDown",
    "ProvisionedThroughputExceededException",
    "PriorRequestNotComplete",
];

const UNAVAILABLE: &[&str] = &[
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "InternalError",
    "InternalFailure",
    "InternalServerError",
    "InternalServiceError",
    "ServiceException",
];

const CONFLICT: &[&str] = &[
    "BucketAlreadyExists",
    "BucketAlreadyOwnedByYou",
    "EntityAlreadyExists",
    "InvalidGroup.Duplicate",
    "QueueAlreadyExists",
    "QueueNameExists",
    "ResourceExistsException",
    "RepositoryAlreadyExistsException",
    "DBInstanceAlreadyExists",
    "DBClusterAlreadyExistsFault",
    "ResourceConflictException",
    "OperationAborted",
    "InvalidDBInstanceState",
    "InvalidDBClusterStateFault",
    "ConcurrentModification",
    "IncorrectInstanceState",
];

const DEPENDENCY: &[&str] = &[
    "DependencyViolation",
    "DeleteConflict",
    "BucketNotEmpty",
    "RepositoryNotEmptyException",
];

const INVALID: &[&str] = &[
    "ValidationError",
    "ValidationException",
    "InvalidParameterValue",
    "InvalidParameterValueException",
    "InvalidParameter",
    "InvalidParameterCombination",
    "InvalidParameterException",
    "InvalidRequest",
    "InvalidRequestException",
    "MalformedPolicyDocument",
    "InvalidBucketName",
    "InvalidAMIID.Malformed",
    "InvalidInput",
    "MissingParameter",
];

/// The portable kind of an AWS error code. `not_found` lists the codes that mean
/// "this resource does not exist" for the call at hand.
pub(crate) fn kind_of(code: &str, not_found: &[&str]) -> ErrorKind {
    if not_found.contains(&code) {
        ErrorKind::NotFound
    } else if DENIED.contains(&code) {
        ErrorKind::Denied
    } else if THROTTLED.contains(&code) {
        ErrorKind::Throttled
    } else if UNAVAILABLE.contains(&code) {
        ErrorKind::Unavailable
    } else if DEPENDENCY.contains(&code) {
        ErrorKind::DependencyViolation
    } else if CONFLICT.contains(&code) {
        ErrorKind::Conflict
    } else if INVALID.contains(&code) {
        ErrorKind::Invalid
    } else {
        ErrorKind::Other
    }
}

/// An SDK error as a [`BackendError`]. `what` says which call failed (it is part of
/// the message); `not_found` is the call's curated list of not-found codes.
pub(crate) fn classify<E>(
    what: &str,
    err: SdkError<E, HttpResponse>,
    not_found: &[&str],
) -> BackendError
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
{
    match &err {
        SdkError::ConstructionFailure(_) => BackendError::new(
            ErrorKind::Invalid,
            format!(
                "{what}: the request could not be built: {}",
                source_text(&err)
            ),
        ),
        SdkError::TimeoutError(_) => {
            BackendError::new(ErrorKind::Unavailable, format!("{what}: timed out")).maybe_sent()
        }
        SdkError::DispatchFailure(_) => BackendError::new(
            ErrorKind::Unavailable,
            format!("{what}: could not be dispatched: {}", source_text(&err)),
        )
        .maybe_sent(),
        SdkError::ResponseError(_) => BackendError::new(
            ErrorKind::Other,
            format!(
                "{what}: the answer could not be read: {}",
                source_text(&err)
            ),
        )
        .maybe_sent(),
        SdkError::ServiceError(service) => {
            let e = service.err();
            let code = e.code().unwrap_or("").to_owned();
            let status = service.raw().status().as_u16();
            // A HEAD answers without a body: its 404 has no code.
            let code = if code.is_empty() && status == 404 {
                "NotFound".to_owned()
            } else {
                code
            };
            let kind = kind_of(&code, not_found);
            let message = match e.message() {
                Some(m) => m.to_owned(),
                None => format!("{e} (HTTP {status})"),
            };
            let mut out = BackendError::new(kind, format!("{what}: {message}")).with_code(code);
            if kind == ErrorKind::Unavailable || status >= 500 {
                out = out.maybe_sent();
            }
            out
        }
        _ => BackendError::new(ErrorKind::Other, format!("{what}: {}", source_text(&err)))
            .maybe_sent(),
    }
}

fn source_text<E: StdError>(err: &E) -> String {
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
    fn not_found_is_only_what_the_call_lists() {
        assert_eq!(
            kind_of("NoSuchBucket", &["NoSuchBucket"]),
            ErrorKind::NotFound
        );
        assert_eq!(kind_of("NoSuchBucket", &[]), ErrorKind::Other);
        assert_eq!(
            kind_of("AccessDenied", &["NoSuchBucket"]),
            ErrorKind::Denied
        );
        assert_eq!(kind_of("UnauthorizedOperation", &[]), ErrorKind::Denied);
        assert_eq!(kind_of("RequestLimitExceeded", &[]), ErrorKind::Throttled);
        assert_eq!(
            kind_of("DependencyViolation", &[]),
            ErrorKind::DependencyViolation
        );
        assert_eq!(kind_of("SomethingNew", &[]), ErrorKind::Other);
    }
}
