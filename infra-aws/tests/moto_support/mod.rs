//! The moto server the AWS tests run against: where it is, and SDK configurations
//! that reach it.

/// The endpoint of the moto server named by `AWS_ENDPOINT_URL`, or `None` after a loud
/// skip that says what did not run (`what`, e.g. "the AWS page tests"); under
/// `CI=true` a missing server fails instead.
pub(crate) fn endpoint(what: &str) -> Option<String> {
    let found = std::env::var("AWS_ENDPOINT_URL")
        .ok()
        .filter(|e| !e.is_empty());
    if found.is_none() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        eprintln!("\n==================== SKIPPED ====================");
        eprintln!("AWS_ENDPOINT_URL is not set: no moto server for {what}.");
        eprintln!("Start one (see .ci/run) and set AWS_ENDPOINT_URL to run it.");
        eprintln!("=================================================\n");
        assert!(
            !ci,
            "CI=true and AWS_ENDPOINT_URL is not set: {what} did not run"
        );
    }
    found
}

/// An SDK configuration at `endpoint`, in `region`, with moto's test keys.
pub(crate) async fn sdk(endpoint: &str, region: &'static str) -> aws_types::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_config::Region::new(region))
        .credentials_provider(aws_credential_types::Credentials::new(
            "test", "test", None, None, "moto",
        ))
        .load()
        .await
}
