//! The one table: an AWS-style error code and HTTP status as a portable
//! [`ErrorKind`].
//!
//! The order is the rule: a refused permission first (no list can make a denial look
//! like absence), then the codes the call at hand lists as "this resource does not
//! exist", then throttling, conflicts, resources something else holds, refused
//! requests, and services that could not answer. A code in none of the lists is
//! judged by its status alone: 401 and 403 are denials, 429 is throttling, 5xx is an
//! outage; anything else is [`ErrorKind::Other`], never absence.

use infra_core::sdk::ErrorKind;

/// Codes of a refused permission or credentials: `Denied`, whatever the call.
pub const DENIED: &[&str] = &[
    "AccessDenied",
    "AccessDeniedException",
    "AllAccessDisabled",
    "UnauthorizedOperation",
    "UnauthorizedAccess",
    "AuthFailure",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "ExpiredToken",
    "ExpiredTokenException",
    "SignatureDoesNotMatch",
    "InvalidAccessKeyId",
    "InvalidSecurity",
    "OptInRequired",
];

/// Codes of a request refused for its rate: nothing was done.
pub const THROTTLED: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequests",
    "TooManyRequestsException",
    "SlowDown",
    "ProvisionedThroughputExceededException",
    "PriorRequestNotComplete",
    "BandwidthLimitExceeded",
    "EC2ThrottledException",
];

/// Codes of a name already taken, or of a change meeting another.
pub const CONFLICT: &[&str] = &[
    "BucketAlreadyExists",
    "BucketAlreadyOwnedByYou",
    "EntityAlreadyExists",
    "InvalidGroup.Duplicate",
    "QueueAlreadyExists",
    "QueueNameExists",
    "AWS.SimpleQueueService.QueueNameExists",
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

/// Codes of a resource something else still holds.
pub const DEPENDENCY: &[&str] = &[
    "DependencyViolation",
    "DeleteConflict",
    "BucketNotEmpty",
    "RepositoryNotEmptyException",
];

/// Codes of a request refused for what it asks.
pub const INVALID: &[&str] = &[
    "ValidationError",
    "ValidationException",
    "InvalidArgument",
    "InvalidParameter",
    "InvalidParameterValue",
    "InvalidParameterValueException",
    "InvalidParameterCombination",
    "InvalidParameterException",
    "InvalidRequest",
    "InvalidRequestException",
    "InvalidInput",
    "MissingParameter",
    "MalformedPolicyDocument",
    "MalformedXML",
    "InvalidBucketName",
    "InvalidBucketState",
    "InvalidLocationConstraint",
    "IllegalLocationConstraintException",
    "InvalidTag",
    "TooManyBuckets",
    "InvalidAMIID.Malformed",
    "InvalidAttributeName",
    "InvalidAttributeValue",
    "UnsupportedOperation",
    "AWS.SimpleQueueService.UnsupportedOperation",
    "NotImplemented",
];

/// Codes of a service that could not answer (or gave up reading the request).
pub const UNAVAILABLE: &[&str] = &[
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "InternalError",
    "InternalFailure",
    "InternalServerError",
    "InternalServiceError",
    "ServiceException",
    "RequestTimeout",
    "RequestTimeoutException",
];

/// The portable kind of an error answered with `code` (empty when the answer named
/// none, a `HEAD` for one) and HTTP `status`, for a call whose curated not-found codes
/// are `not_found`.
///
/// ```
/// use infra_aws_compat::codes::kind_of;
/// use infra_core::sdk::ErrorKind;
///
/// assert_eq!(kind_of("NoSuchBucket", 404, &["NoSuchBucket"]), ErrorKind::NotFound);
/// // Absence only where the call says so.
/// assert_eq!(kind_of("NoSuchBucket", 404, &[]), ErrorKind::Other);
/// assert_eq!(kind_of("AccessDenied", 403, &["AccessDenied"]), ErrorKind::Denied);
/// assert_eq!(kind_of("", 429, &[]), ErrorKind::Throttled);
/// ```
pub fn kind_of(code: &str, status: u16, not_found: &[&str]) -> ErrorKind {
    let known = |list: &[&str]| !code.is_empty() && list.contains(&code);
    if known(DENIED) || (code.is_empty() && matches!(status, 401 | 403)) {
        ErrorKind::Denied
    } else if known(not_found) {
        ErrorKind::NotFound
    } else if known(THROTTLED) || status == 429 {
        ErrorKind::Throttled
    } else if known(CONFLICT) {
        ErrorKind::Conflict
    } else if known(DEPENDENCY) {
        ErrorKind::DependencyViolation
    } else if known(INVALID) {
        ErrorKind::Invalid
    } else if known(UNAVAILABLE) || status >= 500 {
        ErrorKind::Unavailable
    } else {
        ErrorKind::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LISTS: [(&[&str], ErrorKind); 6] = [
        (DENIED, ErrorKind::Denied),
        (THROTTLED, ErrorKind::Throttled),
        (CONFLICT, ErrorKind::Conflict),
        (DEPENDENCY, ErrorKind::DependencyViolation),
        (INVALID, ErrorKind::Invalid),
        (UNAVAILABLE, ErrorKind::Unavailable),
    ];

    #[test]
    fn no_code_is_in_two_lists() {
        let mut seen = std::collections::BTreeMap::new();
        for (list, kind) in LISTS {
            for code in list {
                if let Some(other) = seen.insert(*code, kind) {
                    panic!("{code} is both {other} and {kind}");
                }
            }
        }
    }

    #[test]
    fn each_listed_code_is_its_lists_kind_at_any_status_but_429() {
        for (list, kind) in LISTS {
            for code in list {
                for status in [400, 403, 404, 409, 500, 503] {
                    assert_eq!(kind_of(code, status, &[]), kind, "{code} at {status}");
                }
                // A 429 is throttling, unless the code is a denial.
                let at_429 = if kind == ErrorKind::Denied {
                    ErrorKind::Denied
                } else {
                    ErrorKind::Throttled
                };
                assert_eq!(kind_of(code, 429, &[]), at_429, "{code} at 429");
            }
        }
    }

    #[test]
    fn a_code_the_table_does_not_know_is_judged_by_its_status() {
        assert_eq!(kind_of("", 403, &[]), ErrorKind::Denied);
        assert_eq!(kind_of("", 401, &[]), ErrorKind::Denied);
        assert_eq!(kind_of("RateExceeded", 429, &[]), ErrorKind::Throttled);
        assert_eq!(kind_of("Oops", 502, &[]), ErrorKind::Unavailable);
        assert_eq!(kind_of("SomethingNew", 400, &[]), ErrorKind::Other);
        // A named code at 403 is its own: a listed one decides, an unknown one is not
        // read as a denial.
        assert_eq!(kind_of("SomethingNew", 403, &[]), ErrorKind::Other);
        // S3 answers `SlowDown` with 503: throttled, not an outage.
        assert_eq!(kind_of("SlowDown", 503, &[]), ErrorKind::Throttled);
        // `NotImplemented` is 501: refused for what it asks.
        assert_eq!(kind_of("NotImplemented", 501, &[]), ErrorKind::Invalid);
    }

    proptest! {
        /// Denial comes first: no not-found list makes a denied call absent.
        #[test]
        fn a_denial_is_never_absence(
            code in proptest::sample::select(DENIED),
            status in 400u16..600,
            extra in proptest::collection::vec("[A-Za-z.]{1,20}", 0..4),
        ) {
            let mut not_found: Vec<&str> = extra.iter().map(String::as_str).collect();
            not_found.push(code);
            prop_assert_eq!(kind_of(code, status, &not_found), ErrorKind::Denied);
        }

        /// Absence is only what the call lists: a code is `NotFound` exactly when the
        /// call lists it (and it is no denial).
        #[test]
        fn not_found_is_exactly_what_the_call_lists(
            code in "[A-Za-z.]{0,24}",
            status in 400u16..600,
            listed in any::<bool>(),
        ) {
            let not_found: &[&str] = if listed { &[code.as_str()] } else { &[] };
            let kind = kind_of(&code, status, not_found);
            let denied = DENIED.contains(&code.as_str())
                || (code.is_empty() && matches!(status, 401 | 403));
            prop_assert_eq!(
                kind == ErrorKind::NotFound,
                listed && !code.is_empty() && !denied
            );
        }

        /// A code the table does not know says nothing: its kind is its status's.
        #[test]
        fn an_unknown_code_is_read_by_its_status(code in "Zz[A-Za-z]{0,12}", status in 400u16..600) {
            let kind = kind_of(&code, status, &[]);
            let expected = match status {
                429 => ErrorKind::Throttled,
                500.. => ErrorKind::Unavailable,
                _ => ErrorKind::Other,
            };
            prop_assert_eq!(kind, expected);
        }
    }
}
