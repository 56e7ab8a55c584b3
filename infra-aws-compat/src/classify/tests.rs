use std::time::Duration;

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::{ConnectorError, SdkError};
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::error::ErrorMetadata;
use infra_core::sdk::{ErrorKind, Failure};

use super::*;

fn answer(
    status: u16,
    code: Option<&str>,
    headers: &[(&str, &str)],
) -> SdkError<ErrorMetadata, HttpResponse> {
    let mut raw = HttpResponse::new(StatusCode::try_from(status).unwrap(), SdkBody::empty());
    for (k, v) in headers {
        raw.headers_mut().insert(k.to_string(), v.to_string());
    }
    let mut meta = ErrorMetadata::builder().message("said so");
    if let Some(code) = code {
        meta = meta.code(code);
    }
    SdkError::service_error(meta.build(), raw)
}

fn refused() -> SdkError<ErrorMetadata, HttpResponse> {
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
    SdkError::dispatch_failure(ConnectorError::io(Box::new(io)))
}

fn reset() -> SdkError<ErrorMetadata, HttpResponse> {
    let io = std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "connection reset by peer",
    );
    SdkError::dispatch_failure(ConnectorError::io(Box::new(io)))
}

#[test]
fn a_throttled_answer_was_not_acted_on_whatever_its_status_and_carries_its_wait() {
    for (status, code) in [
        (503, Some("SlowDown")),
        (400, Some("Throttling")),
        (429, None),
    ] {
        let e = classify(
            "AWS",
            "s3:PutBucketTagging",
            answer(status, code, &[("Retry-After", "3")]),
            &[],
        );
        assert_eq!(e.kind, ErrorKind::Throttled, "{e}");
        assert!(!e.may_have_been_sent, "{e}");
        assert_eq!(e.retry_after, Some(Duration::from_secs(3)));
        assert_eq!(
            Failure::of(&e),
            Failure::Throttled {
                retry_after: Some(Duration::from_secs(3))
            }
        );
    }
}

#[test]
fn an_outage_answered_5xx_may_have_been_acted_on() {
    let e = classify(
        "AWS",
        "sqs:CreateQueue",
        answer(500, Some("InternalError"), &[]),
        &[],
    );
    assert_eq!(
        (e.kind, e.may_have_been_sent),
        (ErrorKind::Unavailable, true)
    );
    assert_eq!(Failure::of(&e), Failure::MaybeSent { retry_after: None });
    let e = classify("AWS", "x", answer(502, None, &[]), &[]);
    assert_eq!(
        (e.kind, e.may_have_been_sent),
        (ErrorKind::Unavailable, true)
    );
    // The service gave up reading the request: nothing was done.
    let e = classify("AWS", "x", answer(400, Some("RequestTimeout"), &[]), &[]);
    assert_eq!(
        (e.kind, e.may_have_been_sent),
        (ErrorKind::Unavailable, false)
    );
    assert_eq!(Failure::of(&e), Failure::NotSent);
}

#[test]
fn a_refusal_is_final_and_was_not_acted_on() {
    for (status, code, kind) in [
        (403, Some("AccessDenied"), ErrorKind::Denied),
        (403, None, ErrorKind::Denied),
        (409, Some("BucketAlreadyOwnedByYou"), ErrorKind::Conflict),
        (400, Some("InvalidParameterValue"), ErrorKind::Invalid),
        (409, Some("BucketNotEmpty"), ErrorKind::DependencyViolation),
    ] {
        let e = classify("AWS", "x", answer(status, code, &[]), &[]);
        assert_eq!(e.kind, kind, "{e}");
        assert!(!e.may_have_been_sent, "{e}");
        assert_eq!(Failure::of(&e), Failure::Final);
    }
}

#[test]
fn a_head_answer_without_a_body_is_not_found_only_where_the_call_says() {
    let e = classify(
        "AWS",
        "s3:HeadBucket",
        answer(404, None, &[]),
        &["NotFound"],
    );
    assert_eq!(e.kind, ErrorKind::NotFound);
    assert_eq!(e.code.as_deref(), Some("NotFound"));
    let e = classify(
        "AWS",
        "s3:HeadBucket",
        answer(404, None, &[]),
        &["NoSuchBucket"],
    );
    assert_eq!(e.kind, ErrorKind::Other);
}

#[test]
fn a_success_that_could_not_be_read_may_have_been_acted_on_but_is_not_retried() {
    let e = classify("AWS", "x", answer(200, None, &[]), &[]);
    assert!(e.may_have_been_sent);
    assert_eq!(Failure::of(&e), Failure::Final);
}

#[test]
fn no_answer_may_have_been_acted_on_unless_no_connection_was_made() {
    let timed_out: SdkError<ErrorMetadata, HttpResponse> = SdkError::timeout_error("slow");
    let e = classify("Scaleway", "s3:CreateBucket", timed_out, &[]);
    assert_eq!(
        (e.kind, e.may_have_been_sent),
        (ErrorKind::Unavailable, true)
    );
    assert_eq!(
        e.message,
        "s3:CreateBucket: no answer from Scaleway (timed out)"
    );

    let e = classify("AWS", "s3:CreateBucket", reset(), &[]);
    assert_eq!(
        (e.kind, e.may_have_been_sent),
        (ErrorKind::Unavailable, true)
    );
    assert!(e.message.contains("connection reset"), "{e}");

    let e = classify("AWS", "s3:CreateBucket", refused(), &[]);
    assert_eq!(
        (e.kind, e.may_have_been_sent),
        (ErrorKind::Unavailable, false)
    );
    assert_eq!(Failure::of(&e), Failure::NotSent);
}

#[test]
fn the_message_names_the_call_the_code_and_the_status() {
    let e = classify(
        "AWS",
        "s3:PutBucketTagging",
        answer(400, Some("InvalidTag"), &[]),
        &[],
    );
    assert_eq!(
        e.message,
        "s3:PutBucketTagging: said so (InvalidTag, HTTP 400)"
    );
    assert_eq!(e.code.as_deref(), Some("InvalidTag"));
    let e = classify("AWS", "s3:HeadBucket", answer(403, None, &[]), &[]);
    assert_eq!(e.message, "s3:HeadBucket: said so (HTTP 403)");
    assert_eq!(e.code, None);
}

#[test]
fn retry_after_is_whole_seconds_or_amazons_milliseconds() {
    let mut h = aws_smithy_runtime_api::http::Headers::new();
    assert_eq!(retry_after(&h), None);
    h.insert("x-amz-retry-after", "1500");
    assert_eq!(retry_after(&h), Some(Duration::from_millis(1500)));
    h.insert("Retry-After", "4");
    assert_eq!(retry_after(&h), Some(Duration::from_secs(4)));
    h.insert("Retry-After", "Wed, 21 Oct 2026 07:28:00 GMT");
    assert_eq!(retry_after(&h), Some(Duration::from_millis(1500)));
}
