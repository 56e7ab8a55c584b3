//! Object Storage's and Queues' clients, the AWS SDK's S3 and SQS clients made as
//! Scaleway's own tools make theirs, and retrying by the one policy
//! (`infra_aws_compat`).
//!
//! What Scaleway's tools send, from the recordings of the Terraform provider's
//! acceptance tests against the live API (aws-sdk-go-v2 underneath; see the README's
//! "On the wire"):
//!
//! - **Buckets land in the configured project.** Object Storage files a bucket under
//!   the API key's preferred project unless the access key is written
//!   `ACCESS_KEY@PROJECT_ID`, which is what the Terraform provider and the `scw` CLI
//!   sign with; so does [`s3`].
//! - **Checksums only where S3 requires one.** The provider's S3 client sends no
//!   checksum on `PutObject`, and on the calls S3 requires an integrity check of
//!   (`PutBucketTagging`, `PutBucketVersioning`, `PutBucketLifecycleConfiguration`)
//!   the header `x-amz-checksum-crc32` alone, which Object Storage accepted. The SDK for
//!   Rust, asked for checksums only when required, sends the same header, plus
//!   `x-amz-sdk-checksum-algorithm` naming it: [`ChecksumHeaderAlone`] drops that one
//!   before the request is signed, so that what is sent is what was recorded.
//! - **Queues speak SQS's JSON protocol**: `POST /` with `X-Amz-Target: AmazonSQS.*`
//!   and `Content-Type: application/x-amz-json-1.0`, which is the SDK's own.
//! - **TLS on ring.** The clients use the SDK without its default HTTPS client (rustls
//!   on aws-lc, built from C) and are given one on rustls with ring, the provider the
//!   REST client installs.

use aws_credential_types::Credentials;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextMut;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use infra_aws_compat::{ClientSetup, Operations};

/// The header the SDK adds to name the checksum it sends.
const ALGORITHM_HEADER: &str = "x-amz-sdk-checksum-algorithm";

/// The HTTPS client both SDK clients share: rustls on ring, the system's roots.
pub(crate) fn https_client() -> SharedHttpClient {
    aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

/// The operations of Object Storage and Queues that are not repeated once they may
/// have been acted on: `CreateBucket` and `CreateQueue`.
pub(crate) fn operations() -> Operations {
    #[allow(unused_mut)] // with neither product on, nothing is listed
    let mut operations = Operations::new();
    #[cfg(feature = "s3")]
    {
        operations =
            operations.not_idempotent(&aws_sdk_s3::operation::create_bucket::CreateBucket::new());
    }
    #[cfg(feature = "sqs")]
    {
        operations =
            operations.not_idempotent(&aws_sdk_sqs::operation::create_queue::CreateQueue::new());
    }
    operations
}

/// The credentials of Object Storage for `project`: the API key, its access key
/// written `ACCESS_KEY@PROJECT_ID` so that what it makes lands in `project`.
#[cfg(feature = "s3")]
pub(crate) fn project_credentials(
    access_key: &str,
    secret_key: &str,
    project: &str,
) -> Credentials {
    Credentials::new(
        format!("{access_key}@{project}"),
        secret_key.to_owned(),
        None,
        None,
        "scaleway",
    )
}

/// The S3 client of Object Storage in `region` at `endpoint` (path-style), signing with
/// `credentials`, checksums only where S3 requires one.
#[cfg(feature = "s3")]
pub(crate) fn s3(
    region: &str,
    endpoint: &str,
    credentials: Credentials,
    setup: &ClientSetup,
    http: &SharedHttpClient,
) -> aws_sdk_s3::Client {
    use aws_sdk_s3::config::{
        BehaviorVersion, Region, RequestChecksumCalculation, ResponseChecksumValidation,
    };
    let builder = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region.to_owned()))
        .endpoint_url(endpoint)
        .force_path_style(true)
        .credentials_provider(credentials)
        .http_client(http.clone())
        .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
        .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
        .interceptor(ChecksumHeaderAlone);
    aws_sdk_s3::Client::from_conf(infra_aws_compat::configure!(builder, setup).build())
}

/// The SQS client of Queues in `region` at `endpoint`, signing with `credentials`.
#[cfg(feature = "sqs")]
pub(crate) fn sqs(
    region: &str,
    endpoint: &str,
    credentials: Credentials,
    setup: &ClientSetup,
    http: &SharedHttpClient,
) -> aws_sdk_sqs::Client {
    use aws_sdk_sqs::config::{BehaviorVersion, Region};
    let builder = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region.to_owned()))
        .endpoint_url(endpoint)
        .credentials_provider(credentials)
        .http_client(http.clone());
    aws_sdk_sqs::Client::from_conf(infra_aws_compat::configure!(builder, setup).build())
}

/// Drops the SDK's `x-amz-sdk-checksum-algorithm` from a request whose body is in
/// memory, before it is signed: the checksum then travels in its own header alone
/// (`x-amz-checksum-crc32`), as Scaleway's tools send it. The SDK reads the algorithm
/// from its own state, not from the header, so the checksum itself is unchanged.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChecksumHeaderAlone;

impl Intercept for ChecksumHeaderAlone {
    fn name(&self) -> &'static str {
        "the checksum header alone"
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let request = context.request_mut();
        if request.body().bytes().is_some() {
            request.headers_mut().remove(ALGORITHM_HEADER);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "s3")]
    #[test]
    fn the_access_key_names_the_project_and_the_secret_stays_the_keys() {
        use aws_credential_types::provider::ProvideCredentials as _;
        let credentials = project_credentials(
            "SCWXXXXXXXXXXXXXXXXX",
            "11111111-2222-4333-8444-555555555555",
            "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee",
        );
        let creds = ready_now(credentials.provide_credentials()).expect("static credentials");
        assert_eq!(
            creds.access_key_id(),
            "SCWXXXXXXXXXXXXXXXXX@aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
        );
        assert_eq!(
            creds.secret_access_key(),
            "11111111-2222-4333-8444-555555555555"
        );
    }

    /// Runs a future that is ready at once.
    #[cfg(feature = "s3")]
    fn ready_now<F: std::future::Future>(future: F) -> F::Output {
        let mut future = std::pin::pin!(future);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match future.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(out) => out,
            std::task::Poll::Pending => panic!("static credentials are ready at once"),
        }
    }

    #[test]
    fn creates_are_the_operations_never_repeated() {
        use infra_core::sdk::Idempotence;
        let operations = operations();
        #[cfg(feature = "s3")]
        assert_eq!(
            operations.idempotence("S3", "CreateBucket"),
            Idempotence::NotIdempotent
        );
        #[cfg(feature = "sqs")]
        assert_eq!(
            operations.idempotence("SQS", "CreateQueue"),
            Idempotence::NotIdempotent
        );
        assert_eq!(
            operations.idempotence("S3", "PutBucketTagging"),
            Idempotence::Idempotent
        );
    }
}
