//! A fleet that mixes the new kind with built-in ones.
//!
//! A bucket on AWS, a CNAME in the DNS service pointing at the host the bucket is served
//! from (known only once the bucket exists), and a plain `A` record. The CNAME reads the
//! bucket's observed state, across providers: that read is a dependency edge, so the
//! bucket is created first and deleted last.

use infra_core::kinds::{ObjectStore, ObjectStoreObserved};
use infra_core::prelude::{AwsRegion, CheckReport, Expr, Fleet, Partial};

use crate::{DnsRecord, DnsRegion, RecordType};

/// The fleet's name (and so the value of its ownership marker).
pub const FLEET_NAME: &str = "dns-demo";

/// The zone the example's records live in.
pub const ZONE: &str = "example.com";

/// The host a bucket is reached at: the host part of the endpoint the cloud reported.
///
/// When the cloud reported no endpoint, this is the bucket's id, which is not a host
/// name: the DNS service then refuses the CNAME and the apply fails on that record,
/// saying so. Guessing a host name here instead would publish a record pointing at a
/// name nobody checked.
///
/// ```
/// use custom_provider::bucket_host;
/// use infra_core::{prelude::Partial, kinds::ObjectStoreObserved};
/// let seen = ObjectStoreObserved {
///     id: "arn:aws:s3:::assets".into(),
///     endpoint: Partial::Known("https://assets.s3.eu-west-3.amazonaws.com/".into()),
/// };
/// assert_eq!(bucket_host(&seen), "assets.s3.eu-west-3.amazonaws.com");
/// ```
pub fn bucket_host(observed: &ObjectStoreObserved) -> String {
    match observed.endpoint.known() {
        Some(endpoint) => {
            let rest = endpoint
                .split_once("://")
                .map_or(endpoint.as_str(), |(_, rest)| rest);
            let host = rest.split(['/', ':']).next().unwrap_or(rest);
            host.to_ascii_lowercase()
        }
        None => observed.id.clone(),
    }
}

/// Declares the example fleet: a bucket on AWS (`dns-demo-assets`), a CNAME `assets`
/// to the bucket's host, and an `A` record `www`.
pub fn example_fleet() -> Result<Fleet, CheckReport> {
    let mut f = Fleet::builder(FLEET_NAME);
    let bucket = f.declare(
        AwsRegion::EuWest3,
        "dns-demo-assets",
        ObjectStore {
            versioning: Partial::Known(Expr::lit(true)),
            ..ObjectStore::new()
        },
    );
    let host = Expr::observed(bucket).map(bucket_host);
    f.declare(
        DnsRegion::Eu,
        "assets",
        DnsRecord::new(RecordType::Cname, ZONE, host)
            .with_ttl(600)
            .with_tags([("team", "web")]),
    );
    f.declare(
        DnsRegion::Global,
        "www",
        DnsRecord::new(RecordType::A, ZONE, "192.0.2.10"),
    );
    f.build()
}
