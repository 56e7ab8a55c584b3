//! What each provider does with each kind: which kinds it has, the handles and observed
//! values it assigns, the defaults it fills in, and how it words its errors.

use infra_core::kinds::{
    AwsInstance, AwsInstanceObserved, Compute, ComputeObserved, Container, ContainerNamespace,
    Function, FunctionNamespace, Iam, IamObserved, ImageRegistry, ImageRegistryObserved,
    NamespaceObserved, ObjectStore, ObjectStoreObserved, Postgres, PostgresObserved, Queues,
    QueuesObserved, S3Bucket, S3BucketObserved, Secrets, SecretsObserved, SecurityGroup,
    SecurityGroupObserved, ServerlessObserved, code_digest,
};
use infra_core::sdk::Router;
use infra_core::{
    prelude::{AwsRegion, GcpRegion, Kind, Partial, Region, ScalewayRegion},
    sdk::{BackendError, ErrorKind, FieldInfo},
};
use serde_json::{Map, Value, json};
use std::time::Duration;

use super::SimProvider;
use super::rng::Rng;

/// The providers the simulator serves.
pub(crate) const PROVIDERS: [&str; 3] = ["aws", "gcp", "scaleway"];

const AWS_KINDS: &[&str] = &[
    "iam",
    "objectStore",
    "compute",
    "queues",
    "secrets",
    "imageRegistry",
    "postgres",
    "s3Bucket",
    "securityGroup",
    "awsInstance",
];

const GCP_KINDS: &[&str] = &[
    "iam",
    "objectStore",
    "compute",
    "queues",
    "secrets",
    "imageRegistry",
    "postgres",
];

const SCALEWAY_KINDS: &[&str] = &[
    "iam",
    "objectStore",
    "compute",
    "queues",
    "secrets",
    "imageRegistry",
    "postgres",
    "functionNamespace",
    "function",
    "containerNamespace",
    "container",
];

/// The provider id as a `'static` string, if the simulator serves it.
pub(crate) fn provider_id(provider: &str) -> Option<&'static str> {
    PROVIDERS.iter().copied().find(|p| *p == provider)
}

/// The kinds a provider realises.
pub(crate) fn kinds_of(provider: &str) -> &'static [&'static str] {
    match provider {
        "aws" => AWS_KINDS,
        "gcp" => GCP_KINDS,
        "scaleway" => SCALEWAY_KINDS,
        _ => &[],
    }
}

/// The kind id as a `'static` string, if some provider realises it.
pub(crate) fn kind_id(kind: &str) -> Option<&'static str> {
    AWS_KINDS
        .iter()
        .chain(SCALEWAY_KINDS)
        .copied()
        .find(|k| *k == kind)
}

/// Whether `region` is a region of `provider`.
pub(crate) fn region_exists(provider: &str, region: &str) -> bool {
    match provider {
        "aws" => AwsRegion::parse(region).is_some(),
        "gcp" => GcpRegion::parse(region).is_some(),
        "scaleway" => ScalewayRegion::parse(region).is_some(),
        _ => false,
    }
}

/// Whether the provider keeps tags on resources of the kind: Scaleway Queues take none.
pub(crate) fn tags_kept(provider: &str, kind: &str) -> bool {
    !(provider == "scaleway" && kind == "queues")
}

/// Whether the ownership of resources of the kind can be read: not where there are no
/// tags (Scaleway Queues), nor where what stands in for them can be written by anyone
/// with rights to the resource (a Scaleway registry namespace keeps its tags in its
/// description).
pub(crate) fn tags_readable(provider: &str, kind: &str) -> bool {
    tags_kept(provider, kind) && !(provider == "scaleway" && kind == "imageRegistry")
}

/// The refusal of an ownership read or a marking on a kind whose ownership cannot be
/// read.
pub(crate) fn unprovable(provider: &str, kind: &str) -> BackendError {
    if tags_kept(provider, kind) {
        invalid(
            provider,
            format!("the ownership of {provider} {kind} cannot be read"),
        )
    } else {
        no_tags(provider, kind)
    }
}

/// Whether the cloud's read of a resource of the kind answers with its tags (or
/// labels), as AWS's `GetRole` and `DescribeInstances` do, so that one read tells whose
/// it is; S3, SQS and ECR, among others, keep tags behind a call of their own.
pub(crate) fn read_carries_tags(provider: &str, kind: &str) -> bool {
    matches!(
        (provider, kind),
        (
            "aws",
            "iam" | "secrets" | "postgres" | "securityGroup" | "awsInstance"
        ) | ("gcp", "objectStore" | "queues" | "secrets" | "postgres")
            | (
                "scaleway",
                "secrets" | "functionNamespace" | "containerNamespace"
            )
    )
}

/// Whether the cloud's list of the kind answers whole objects, tags included, so that
/// a list hands over each resource's complete read: EC2's `DescribeInstances` and
/// `DescribeSecurityGroups`, RDS's `DescribeDBInstances`/`DescribeDBClusters` (with
/// `TagList`), Secrets Manager's `ListSecrets`; every GCP kind's `list` (each answers the
/// resources as `get` does, labels included); every kind of Scaleway's REST APIs (each
/// `GET` of a collection answers the objects as the `GET` of one does). Not S3's
/// `ListBuckets`, SQS's `ListQueues`, IAM's `ListRoles` (no tags), Lambda's
/// `ListFunctions` (no tags) nor ECR's `DescribeRepositories` (no tags), nor Scaleway's
/// S3 and SQS APIs (Object Storage and Queues): those answer names, and a resource's
/// settings and tags take calls of their own.
pub(crate) fn lists_complete(provider: &str, kind: &str) -> bool {
    match provider {
        "aws" => matches!(
            kind,
            "securityGroup" | "awsInstance" | "postgres" | "secrets"
        ),
        "gcp" => true,
        "scaleway" => !matches!(kind, "objectStore" | "queues"),
        _ => false,
    }
}

/// How many resources one page of the kind's list answers: the real API's largest page
/// (or its default, where the provider's client sets none and the API documents one).
///
/// - AWS: `DescribeInstances` and `DescribeSecurityGroups` 1,000 (`MaxResults`);
///   `DescribeDBInstances` 100 (`MaxRecords`); `ListSecrets` 100; `ListBuckets` 10,000
///   (`MaxBuckets`); `ListQueues` 1,000; `ListRoles` 1,000 (`MaxItems`); `ListFunctions`
///   50; `DescribeRepositories` 100 (its default).
/// - GCP: `buckets.list` 1,000; `instances.list` (Cloud SQL) 500 (its default);
///   `repositories.list` (Artifact Registry) 1,000; `serviceAccounts.list`, `topics.list`
///   100 (what the provider asks for); `secrets.list` and `services.list` (Cloud Run),
///   which document no default, 100.
/// - Scaleway: 100 (`page_size`, its largest), S3 `ListBuckets` 1,000, SQS `ListQueues`
///   1,000.
pub(crate) fn page_size(provider: &str, kind: &str) -> usize {
    match (provider, kind) {
        ("aws", "securityGroup" | "awsInstance" | "queues" | "iam") => 1000,
        ("aws", "objectStore" | "s3Bucket") => 10_000,
        ("aws", "compute") => 50,
        ("gcp", "objectStore" | "imageRegistry") => 1000,
        ("gcp", "postgres") => 500,
        ("scaleway", "objectStore" | "queues") => 1000,
        _ => 100,
    }
}

/// A call refused for its API's rate: throttled, not applied, with the wait the
/// bucket needs as its `Retry-After`, in the provider's words and codes (EC2's
/// `RequestLimitExceeded`, S3's `SlowDown`, GCP's `RESOURCE_EXHAUSTED`, Scaleway's 429).
pub(crate) fn over_rate(provider: &str, kind: Option<&str>, wait: Duration) -> BackendError {
    let (code, message) = match (provider, kind) {
        ("aws", Some("securityGroup" | "awsInstance")) => (
            "RequestLimitExceeded",
            "Request limit exceeded.".to_string(),
        ),
        ("aws", Some("objectStore" | "s3Bucket")) => {
            ("SlowDown", "Please reduce your request rate.".to_string())
        }
        ("aws", _) => ("ThrottlingException", "Rate exceeded".to_string()),
        ("gcp", _) => (
            "RESOURCE_EXHAUSTED",
            "Quota exceeded for quota metric 'Requests' and limit 'Requests per second'"
                .to_string(),
        ),
        _ => (
            "too_many_requests",
            format!("too many requests, retry in {} ms", wait.as_millis().max(1)),
        ),
    };
    BackendError::new(ErrorKind::Throttled, message)
        .with_code(code)
        .with_retry_after(wait)
}

/// The refusal of a tag call on a kind that keeps no tags.
pub(crate) fn no_tags(provider: &str, kind: &str) -> BackendError {
    invalid(provider, format!("{provider} {kind} take no tags"))
}

/// Checks that a call names a kind and a region the provider has.
pub(crate) fn check_scope(provider: &str, kind: &str, region: &str) -> Result<(), BackendError> {
    if !kinds_of(provider).contains(&kind) {
        return Err(invalid(
            provider,
            format!("{provider} has no resources of kind {kind}"),
        ));
    }
    if !region_exists(provider, region) {
        return Err(invalid(
            provider,
            format!("{region:?} is not a {provider} region"),
        ));
    }
    Ok(())
}

/// Calls a function generic over the kind whose id is given (`None` for an id that no
/// provider has).
macro_rules! by_kind {
    ($kind:expr, $f:ident ( $($arg:expr),* )) => {
        match $kind {
            "iam" => Some($f::<Iam>($($arg),*)),
            "objectStore" => Some($f::<ObjectStore>($($arg),*)),
            "compute" => Some($f::<Compute>($($arg),*)),
            "queues" => Some($f::<Queues>($($arg),*)),
            "secrets" => Some($f::<Secrets>($($arg),*)),
            "imageRegistry" => Some($f::<ImageRegistry>($($arg),*)),
            "postgres" => Some($f::<Postgres>($($arg),*)),
            "s3Bucket" => Some($f::<S3Bucket>($($arg),*)),
            "securityGroup" => Some($f::<SecurityGroup>($($arg),*)),
            "awsInstance" => Some($f::<AwsInstance>($($arg),*)),
            "functionNamespace" => Some($f::<FunctionNamespace>($($arg),*)),
            "function" => Some($f::<Function>($($arg),*)),
            "containerNamespace" => Some($f::<ContainerNamespace>($($arg),*)),
            "container" => Some($f::<Container>($($arg),*)),
            _ => None,
        }
    };
}

fn typed_register<K: Kind>(router: Router, sim: &SimProvider) -> Router {
    router.kind::<K>(sim.clone())
}

/// `router` with the kind whose id is given served by `sim`.
///
/// # Panics
/// For an id that no provider has (the ids come from [`kinds_of`]).
pub(crate) fn register(router: Router, kind: &str, sim: &SimProvider) -> Router {
    by_kind!(kind, typed_register(router, sim))
        .unwrap_or_else(|| panic!("the simulated cloud has no kind {kind:?}"))
}

fn typed_fields<K: Kind>() -> &'static [FieldInfo] {
    K::FIELDS
}

/// The kind's fields, from its divergence table. The simulator uses their names only:
/// how each behaves on each cloud is [`clouds`](super::clouds)' to say.
pub(crate) fn fields(kind: &str) -> &'static [FieldInfo] {
    by_kind!(kind, typed_fields()).unwrap_or(&[])
}

/// How a kind holds its tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TagShape {
    /// A `tags` map of keys to values.
    Map,
    /// A `tags` list of plain strings (`key=value`), as Scaleway's namespaces hold them.
    Strings,
    /// No `tags` field in the spec: the cloud keeps tags the spec cannot say.
    Hidden,
}

pub(crate) fn tag_shape(kind: &str) -> TagShape {
    match kind {
        "functionNamespace" | "containerNamespace" => TagShape::Strings,
        _ if fields(kind).iter().any(|f| f.name == "tags") => TagShape::Map,
        _ => TagShape::Hidden,
    }
}

/// The namespace in which a name must be unique: `(namespace, global)`. A global name is
/// unique across the provider's regions (buckets, and kinds whose handle does not hold
/// the region). `None` when names may repeat.
pub(crate) fn name_scope(provider: &str, kind: &str) -> Option<(&'static str, bool)> {
    match (provider, kind) {
        (_, "awsInstance") => None,
        ("aws", "objectStore" | "s3Bucket") => Some(("bucket", true)),
        ("aws", "iam") => Some(("iam", true)),
        ("gcp", "iam" | "objectStore" | "queues" | "secrets" | "postgres") => {
            kind_id(kind).map(|k| (k, true))
        }
        ("scaleway", "objectStore") => Some(("objectStore", true)),
        _ => kind_id(kind).map(|k| (k, false)),
    }
}

/// Where a resource is created: what its handle and observed values are made of.
pub(crate) struct Site<'a> {
    pub(crate) provider: &'a str,
    pub(crate) kind: &'a str,
    pub(crate) region: &'a str,
    pub(crate) name: &'a str,
    pub(crate) account: &'a str,
    pub(crate) seed: u64,
}

/// The twelve digits an ARN carries for an account: the account id's own, when it ends
/// with twelve digits.
fn aws_account_number(account: &str) -> String {
    let tail = account
        .get(account.len().saturating_sub(12)..)
        .unwrap_or("");
    if tail.len() == 12 && tail.bytes().all(|b| b.is_ascii_digit()) {
        tail.to_string()
    } else {
        "000000000000".to_string()
    }
}

/// The region's default VPC.
pub(crate) fn default_vpc(seed: u64, region: &str) -> String {
    format!(
        "vpc-{}",
        Rng::derived(seed, &["aws", region, "default-vpc"]).hex(17)
    )
}

/// The default subnet of the region's default VPC.
pub(crate) fn default_subnet(seed: u64, region: &str) -> String {
    format!(
        "subnet-{}",
        Rng::derived(seed, &["aws", region, "default-subnet"]).hex(17)
    )
}

/// The image `latest` resolves to in the region.
pub(crate) fn latest_ami(seed: u64, region: &str) -> String {
    format!(
        "ami-{}",
        Rng::derived(seed, &["aws", region, "latest-ami"]).hex(17)
    )
}

fn default_to(config: &mut Map<String, Value>, field: &str, value: Value) {
    config.entry(field).or_insert(value);
}

/// Fills in what the cloud decides when the spec does not say, and carries out
/// instructions (an image of `latest`). Runs on create, and on update for fields still
/// unset. It fills only what the provider then reports.
pub(crate) fn fill(site: &Site<'_>, config: &mut Map<String, Value>) {
    let c = config;
    match (site.provider, site.kind) {
        ("aws", "securityGroup") => {
            default_to(c, "vpcId", json!(default_vpc(site.seed, site.region)));
            default_to(
                c,
                "egress",
                json!([{ "protocol": "all", "fromPort": 0, "toPort": 65535, "cidr": "0.0.0.0/0" }]),
            );
        }
        ("aws", "awsInstance") => {
            if c.get("image").is_none_or(|v| v == "latest") {
                c.insert("image".into(), json!(latest_ami(site.seed, site.region)));
            }
            default_to(c, "subnetId", json!(default_subnet(site.seed, site.region)));
        }
        ("aws", "s3Bucket") => {
            default_to(c, "versioning", json!(false));
            default_to(c, "objectLock", json!(false));
            default_to(c, "blockPublicAccess", json!(true));
        }
        (_, "objectStore") => {
            default_to(c, "versioning", json!(false));
            default_to(c, "expireAfterDays", Value::Null);
        }
        (provider, "compute") => {
            let (memory, timeout) = match provider {
                "aws" => (128, 3),
                // Cloud Run's defaults: 512 MiB, five minutes.
                "gcp" => (512, 300),
                _ => (256, 300),
            };
            default_to(c, "memoryMb", json!(memory));
            default_to(c, "timeoutSeconds", json!(timeout));
            if provider == "aws" {
                // Lambda digests the code it deploys; the simulator takes the artifact's
                // location for its bytes.
                let code = c.get("code").and_then(Value::as_str).unwrap_or_default();
                let digest = code_digest(code.as_bytes());
                default_to(c, "codeSha256", json!(digest));
            }
        }
        // A Pub/Sub topic keeps no messages unless told to; its subscription, when the
        // declaration asks for one, delivers unordered with a 10-second ack deadline.
        ("gcp", "queues") if super::clouds::has_subscription(c) => {
            default_to(c, "fifo", json!(false));
            default_to(c, "visibilityTimeoutSeconds", json!(10));
            default_to(c, "deadLetter", Value::Null);
        }
        ("gcp", "queues") => {}
        (_, "queues") => {
            default_to(c, "visibilityTimeoutSeconds", json!(30));
            default_to(c, "retentionSeconds", json!(345_600));
            default_to(c, "deadLetter", Value::Null);
        }
        // A Scaleway registry namespace has neither setting.
        ("scaleway", "imageRegistry") => {}
        (_, "imageRegistry") => {
            default_to(c, "scanOnPush", json!(false));
            default_to(c, "immutableTags", json!(false));
        }
        (provider, "postgres") => {
            let (days, storage) = match provider {
                "aws" => (1, 20),
                "gcp" => (7, 10),
                _ => (7, 20),
            };
            default_to(c, "backupRetentionDays", json!(days));
            let classic = c
                .get("capacity")
                .and_then(|cap| cap.get("shape"))
                .is_some_and(|s| s == "classic");
            if classic {
                default_to(c, "storageGb", json!(storage));
            }
        }
        ("scaleway", "function") => {
            default_to(c, "memoryMb", json!(256));
            default_to(c, "minScale", json!(0));
            default_to(c, "maxScale", json!(20));
            default_to(c, "timeoutSeconds", json!(300));
        }
        ("scaleway", "container") => {
            default_to(c, "port", json!(8080));
            default_to(c, "cpuLimit", json!(1000));
            default_to(c, "memoryLimitMb", json!(2048));
            default_to(c, "minScale", json!(0));
            default_to(c, "maxScale", json!(5));
        }
        _ => {}
    }
}

/// Takes out of an update's configuration the instructions that ask for nothing once
/// the resource exists: an image of `latest` was carried out when the instance was
/// launched, and the image it resolved to stays.
pub(crate) fn drop_instructions(provider: &str, kind: &str, asked: &mut Map<String, Value>) {
    if (provider, kind) == ("aws", "awsInstance")
        && asked.get("image").is_some_and(|v| v == "latest")
    {
        asked.remove("image");
    }
}

/// The fields the cloud derives again on every update that does not say them: the
/// digest of the code Lambda deploys anew.
pub(crate) fn rederived(provider: &str, kind: &str) -> &'static [&'static str] {
    match (provider, kind) {
        ("aws", "compute") => &["codeSha256"],
        _ => &[],
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn ip(rng: &mut Rng, first: u8, second: Option<u8>) -> String {
    let second = second.unwrap_or_else(|| rng.octet(0, 255));
    format!(
        "{first}.{second}.{}.{}",
        rng.octet(0, 255),
        rng.octet(1, 254)
    )
}

/// Assigns a new resource its handle and observed state, as the provider would.
pub(crate) fn assign(
    site: &Site<'_>,
    config: &Map<String, Value>,
    rng: &mut Rng,
) -> (String, Value) {
    let Site {
        provider,
        kind,
        region,
        name,
        account,
        ..
    } = *site;
    let acct = aws_account_number(account);
    let known = |s: String| Partial::Known(s);
    match (provider, kind) {
        ("aws", "iam") => {
            let arn = format!("arn:aws:iam::{acct}:role/{name}");
            (arn.clone(), to_json(&IamObserved { id: arn }))
        }
        ("aws", "objectStore") => {
            let arn = format!("arn:aws:s3:::{name}");
            let endpoint = known(format!("https://{name}.s3.{region}.amazonaws.com"));
            (
                arn.clone(),
                to_json(&ObjectStoreObserved { id: arn, endpoint }),
            )
        }
        ("aws", "s3Bucket") => {
            let arn = format!("arn:aws:s3:::{name}");
            let observed = S3BucketObserved {
                arn: arn.clone(),
                region: region.to_string(),
            };
            (arn, to_json(&observed))
        }
        ("aws", "compute") => {
            let arn = format!("arn:aws:lambda:{region}:{acct}:function:{name}");
            let observed = ComputeObserved {
                id: arn.clone(),
                url: Partial::Unknown,
                version: known("1".into()),
            };
            (arn, to_json(&observed))
        }
        ("aws", "queues") => {
            let fifo = config.get("fifo") == Some(&Value::Bool(true));
            let queue = if fifo {
                format!("{name}.fifo")
            } else {
                name.to_string()
            };
            let url = format!("https://sqs.{region}.amazonaws.com/{acct}/{queue}");
            let arn = known(format!("arn:aws:sqs:{region}:{acct}:{queue}"));
            (url.clone(), to_json(&QueuesObserved { id: url, arn }))
        }
        ("aws", "secrets") => {
            let arn = format!(
                "arn:aws:secretsmanager:{region}:{acct}:secret:{name}-{}",
                rng.mixed(6)
            );
            let observed = SecretsObserved {
                id: arn.clone(),
                version: known(rng.uuid()),
            };
            (arn, to_json(&observed))
        }
        ("aws", "imageRegistry") => {
            let arn = format!("arn:aws:ecr:{region}:{acct}:repository/{name}");
            let uri = format!("{acct}.dkr.ecr.{region}.amazonaws.com/{name}");
            (
                arn.clone(),
                to_json(&ImageRegistryObserved { id: arn, uri }),
            )
        }
        ("aws", "postgres") => {
            let arn = format!("arn:aws:rds:{region}:{acct}:db:{name}");
            let endpoint = format!("{name}.{}.{region}.rds.amazonaws.com", rng.alnum(12));
            let observed = PostgresObserved {
                id: arn.clone(),
                endpoint,
                port: 5432,
            };
            (arn, to_json(&observed))
        }
        ("aws", "securityGroup") => {
            let id = format!("sg-{}", rng.hex(17));
            let vpc_id = config
                .get("vpcId")
                .and_then(Value::as_str)
                .map_or_else(|| default_vpc(site.seed, region), str::to_string);
            let observed = SecurityGroupObserved {
                group_id: id.clone(),
                vpc_id,
            };
            (id, to_json(&observed))
        }
        ("aws", "awsInstance") => {
            let id = format!("i-{}", rng.hex(17));
            let image_id = config
                .get("image")
                .and_then(Value::as_str)
                .map_or_else(|| latest_ami(site.seed, region), str::to_string);
            let private_ip = known(ip(rng, 172, Some(31)));
            let public_ip = known(ip(rng, 13, None));
            let observed = AwsInstanceObserved {
                instance_id: id.clone(),
                image_id,
                private_ip,
                public_ip,
            };
            (id, to_json(&observed))
        }
        ("gcp", "iam") => {
            let email = format!("{name}@{account}.iam.gserviceaccount.com");
            let handle = format!("projects/{account}/serviceAccounts/{email}");
            (handle, to_json(&IamObserved { id: email }))
        }
        ("gcp", "objectStore") => {
            let handle = format!("projects/_/buckets/{name}");
            let observed = ObjectStoreObserved {
                id: name.to_string(),
                endpoint: known(format!("https://storage.googleapis.com/{name}")),
            };
            (handle, to_json(&observed))
        }
        ("gcp", "compute") => {
            let handle = format!("projects/{account}/locations/{region}/functions/{name}");
            let observed = ComputeObserved {
                id: handle.clone(),
                url: known(format!(
                    "https://{region}-{account}.cloudfunctions.net/{name}"
                )),
                version: known("1".into()),
            };
            (handle, to_json(&observed))
        }
        ("gcp", "queues") => {
            let handle = format!("projects/{account}/topics/{name}");
            let observed = QueuesObserved {
                id: handle.clone(),
                arn: known(handle.clone()),
            };
            (handle, to_json(&observed))
        }
        ("gcp", "secrets") => {
            let handle = format!("projects/{account}/secrets/{name}");
            let observed = SecretsObserved {
                id: handle.clone(),
                version: known("1".into()),
            };
            (handle, to_json(&observed))
        }
        ("gcp", "imageRegistry") => {
            let handle = format!("projects/{account}/locations/{region}/repositories/{name}");
            let uri = format!("{region}-docker.pkg.dev/{account}/{name}");
            (
                handle.clone(),
                to_json(&ImageRegistryObserved { id: handle, uri }),
            )
        }
        ("gcp", "postgres") => {
            let handle = format!("projects/{account}/instances/{name}");
            let observed = PostgresObserved {
                id: handle.clone(),
                endpoint: ip(rng, 34, None),
                port: 5432,
            };
            (handle, to_json(&observed))
        }
        ("scaleway", "objectStore") => {
            let handle = format!("{region}/{name}");
            let observed = ObjectStoreObserved {
                id: name.to_string(),
                endpoint: known(format!("https://{name}.s3.{region}.scw.cloud")),
            };
            (handle, to_json(&observed))
        }
        ("scaleway", _) => {
            let id = rng.uuid();
            let squashed: String = name.chars().filter(|c| *c != '-').collect();
            let observed = match kind {
                "compute" => to_json(&ComputeObserved {
                    id: id.clone(),
                    url: known(format!(
                        "https://{squashed}{}-{name}.functions.fnc.{region}.scw.cloud",
                        rng.alnum(8)
                    )),
                    version: Partial::Unknown,
                }),
                "queues" => to_json(&QueuesObserved {
                    id: id.clone(),
                    arn: known(format!("arn:scw:sqs:{region}:project-{account}:{name}")),
                }),
                "secrets" => to_json(&SecretsObserved {
                    id: id.clone(),
                    version: known("1".into()),
                }),
                "imageRegistry" => to_json(&ImageRegistryObserved {
                    id: id.clone(),
                    uri: format!("rg.{region}.scw.cloud/{name}"),
                }),
                "postgres" => to_json(&PostgresObserved {
                    id: id.clone(),
                    endpoint: ip(rng, 51, Some(159)),
                    port: 5432,
                }),
                "functionNamespace" | "containerNamespace" => to_json(&NamespaceObserved {
                    id: id.clone(),
                    registry_endpoint: known(format!(
                        "rg.{region}.scw.cloud/funcscw{squashed}{}",
                        rng.alnum(8)
                    )),
                }),
                "function" | "container" => {
                    let family = if kind == "function" {
                        "functions"
                    } else {
                        "containers"
                    };
                    to_json(&ServerlessObserved {
                        id: id.clone(),
                        domain_name: known(format!(
                            "{squashed}{}-{name}.{family}.fnc.{region}.scw.cloud",
                            rng.alnum(8)
                        )),
                    })
                }
                _ => to_json(&IamObserved { id: id.clone() }),
            };
            (id, observed)
        }
        _ => {
            let id = rng.uuid();
            (id.clone(), json!({ "id": id }))
        }
    }
}

/// Moves the observed state on after an update that changed something: a function
/// publishes a new version, a secret a new version of its value.
pub(crate) fn bump_version(provider: &str, kind: &str, observed: &mut Value, rng: &mut Rng) {
    let Some(version) = observed.get_mut("version") else {
        return;
    };
    let Some(current) = version.as_str() else {
        return;
    };
    let next = match (provider, kind) {
        ("aws", "secrets") => rng.uuid(),
        _ => match current.parse::<u64>() {
            Ok(n) => (n + 1).to_string(),
            Err(_) => return,
        },
    };
    *version = Value::String(next);
}

fn noun(provider: &str, kind: &str) -> &'static str {
    match (provider, kind) {
        ("aws", "iam") => "role",
        ("aws", "objectStore" | "s3Bucket") | (_, "objectStore") => "bucket",
        ("aws", "compute") => "function",
        ("aws", "queues") => "queue",
        ("aws", "secrets") => "secret",
        ("aws", "imageRegistry") => "repository",
        ("aws", "postgres") => "DB instance",
        ("aws", "securityGroup") => "security group",
        ("aws", "awsInstance") => "instance",
        ("gcp", "iam") => "service account",
        ("gcp", "compute") => "function",
        ("gcp", "queues") => "topic",
        ("gcp", "secrets") => "secret",
        ("gcp", "imageRegistry") => "repository",
        ("gcp", "postgres") => "Cloud SQL instance",
        ("scaleway", "iam") => "application",
        ("scaleway", "compute" | "function") => "function",
        ("scaleway", "queues") => "queue",
        ("scaleway", "secrets") => "secret",
        ("scaleway", "imageRegistry") => "namespace",
        ("scaleway", "postgres") => "instance",
        ("scaleway", "functionNamespace" | "containerNamespace") => "namespace",
        ("scaleway", "container") => "container",
        _ => "resource",
    }
}

/// A resource that does not exist, in the provider's words and codes.
pub(crate) fn not_found(provider: &str, kind: &str, handle: &str) -> BackendError {
    let noun = noun(provider, kind);
    let (code, message) = match provider {
        "aws" => {
            let code = match kind {
                "iam" => "NoSuchEntity",
                "objectStore" | "s3Bucket" => "NoSuchBucket",
                "queues" => "AWS.SimpleQueueService.NonExistentQueue",
                "imageRegistry" => "RepositoryNotFoundException",
                "postgres" => "DBInstanceNotFound",
                "securityGroup" => "InvalidGroup.NotFound",
                "awsInstance" => "InvalidInstanceID.NotFound",
                _ => "ResourceNotFoundException",
            };
            (code, format!("The {noun} '{handle}' does not exist"))
        }
        "gcp" => ("NOT_FOUND", format!("Resource '{handle}' was not found")),
        _ => ("not_found", format!("{noun} {handle} is not found")),
    };
    BackendError::new(ErrorKind::NotFound, message).with_code(code)
}

/// A call the credentials may not make.
pub(crate) fn denied(provider: &str, kind: Option<&str>, op: &str) -> BackendError {
    let what = kind.unwrap_or("account");
    let (code, message) = match (provider, kind) {
        ("aws", Some("securityGroup" | "awsInstance")) => (
            "UnauthorizedOperation",
            format!("You are not authorized to perform this operation ({op} {what})."),
        ),
        ("aws", _) => (
            "AccessDenied",
            format!("User is not authorized to perform {op} on {what} resources"),
        ),
        ("gcp", _) => (
            "PERMISSION_DENIED",
            format!("Permission denied to {op} {what} resources (or they may not exist)"),
        ),
        _ => (
            "permissions_denied",
            format!("insufficient permissions to {op} {what} resources"),
        ),
    };
    BackendError::new(ErrorKind::Denied, message).with_code(code)
}

/// A name already taken.
pub(crate) fn conflict(provider: &str, kind: &str, name: &str) -> BackendError {
    let noun = noun(provider, kind);
    let code = match (provider, kind) {
        ("aws", "iam") => "EntityAlreadyExists",
        ("aws", "objectStore" | "s3Bucket") => "BucketAlreadyOwnedByYou",
        ("aws", "compute") => "ResourceConflictException",
        ("aws", "queues") => "QueueAlreadyExists",
        ("aws", "secrets") => "ResourceExistsException",
        ("aws", "imageRegistry") => "RepositoryAlreadyExistsException",
        ("aws", "postgres") => "DBInstanceAlreadyExists",
        ("aws", "securityGroup") => "InvalidGroup.Duplicate",
        ("aws", _) => "AlreadyExists",
        ("gcp", _) => "ALREADY_EXISTS",
        _ => "already_exists",
    };
    BackendError::new(
        ErrorKind::Conflict,
        format!("a {noun} named '{name}' already exists"),
    )
    .with_code(code)
}

/// A resource something still depends on.
pub(crate) fn dependency_violation(
    provider: &str,
    kind: &str,
    handle: &str,
    dependant: (&str, &str, &str),
) -> BackendError {
    let (dep_kind, dep_name, dep_handle) = dependant;
    let noun = noun(provider, kind);
    let (code, message) = match provider {
        "aws" => (
            if matches!(kind, "securityGroup" | "awsInstance") {
                "DependencyViolation"
            } else {
                "ResourceInUseException"
            },
            format!(
                "resource {handle} has a dependent object: {dep_kind} '{dep_name}' ({dep_handle})"
            ),
        ),
        "gcp" => (
            "FAILED_PRECONDITION",
            format!("The {noun} '{handle}' is in use by {dep_kind} '{dep_name}' ({dep_handle})"),
        ),
        _ => (
            "precondition_failed",
            format!("{noun} {handle} is still used by {dep_kind} {dep_name} ({dep_handle})"),
        ),
    };
    BackendError::new(ErrorKind::DependencyViolation, message).with_code(code)
}

/// A request the provider refuses as malformed.
pub(crate) fn invalid(provider: &str, message: impl Into<String>) -> BackendError {
    let code = match provider {
        "aws" => "InvalidParameterValue",
        "gcp" => "INVALID_ARGUMENT",
        _ => "invalid_arguments",
    };
    BackendError::invalid(message).with_code(code)
}

/// The provider's code for an error of `kind` that it made up on its side (a fault).
pub(crate) fn fault_code(provider: &str, kind: ErrorKind) -> &'static str {
    match (provider, kind) {
        ("aws", ErrorKind::Throttled) => "ThrottlingException",
        ("aws", ErrorKind::Unavailable) => "ServiceUnavailable",
        ("aws", ErrorKind::NotFound) => "ResourceNotFoundException",
        ("aws", ErrorKind::Denied) => "AccessDenied",
        ("aws", ErrorKind::Conflict) => "ConflictException",
        ("aws", ErrorKind::DependencyViolation) => "DependencyViolation",
        ("aws", ErrorKind::Invalid) => "InvalidParameterValue",
        ("aws", _) => "InternalError",
        ("gcp", ErrorKind::Throttled) => "RESOURCE_EXHAUSTED",
        ("gcp", ErrorKind::Unavailable) => "UNAVAILABLE",
        ("gcp", ErrorKind::NotFound) => "NOT_FOUND",
        ("gcp", ErrorKind::Denied) => "PERMISSION_DENIED",
        ("gcp", ErrorKind::Conflict) => "ABORTED",
        ("gcp", ErrorKind::DependencyViolation) => "FAILED_PRECONDITION",
        ("gcp", ErrorKind::Invalid) => "INVALID_ARGUMENT",
        ("gcp", _) => "INTERNAL",
        (_, ErrorKind::Throttled) => "too_many_requests",
        (_, ErrorKind::Unavailable) => "service_unavailable",
        (_, ErrorKind::NotFound) => "not_found",
        (_, ErrorKind::Denied) => "permissions_denied",
        (_, ErrorKind::Conflict) => "conflict",
        (_, ErrorKind::DependencyViolation) => "precondition_failed",
        (_, ErrorKind::Invalid) => "invalid_arguments",
        // `Other`, and any kind added later: the cloud's own catch-all.
        (_, _) => "internal_error",
    }
}

#[cfg(test)]
mod tests {
    use infra_core::sdk::Sighting;

    use super::*;

    fn typed_sighting<K: Kind>(
        handle: &str,
        observed: Value,
        reported: Map<String, Value>,
    ) -> Result<Sighting, BackendError> {
        Sighting::from_json::<K>(handle, observed, reported)
    }

    /// A sighting of a resource of `kind`, its observed state checked against the
    /// kind's type.
    fn sighting(
        kind: &str,
        handle: &str,
        observed: Value,
        reported: Map<String, Value>,
    ) -> Result<Sighting, BackendError> {
        by_kind!(kind, typed_sighting(handle, observed, reported))
            .unwrap_or_else(|| Err(BackendError::invalid(format!("no kind is named {kind:?}"))))
    }

    /// Every field the cloud fills in is a field of the kind, spelled as it serialises.
    #[test]
    fn filled_fields_belong_to_their_kind() {
        for provider in PROVIDERS {
            for kind in kinds_of(provider) {
                let site = Site {
                    provider,
                    kind,
                    region: "eu-west-3",
                    name: "x",
                    account: "a",
                    seed: 1,
                };
                let mut config = Map::new();
                config.insert(
                    "capacity".into(),
                    json!({ "shape": "classic", "instanceClass": "db.t4g.micro" }),
                );
                fill(&site, &mut config);
                let names: Vec<_> = fields(kind).iter().map(|f| f.name).collect();
                for key in config.keys() {
                    assert!(
                        key == "capacity" || names.contains(&key.as_str()),
                        "{provider} {kind} fills {key}, which is not one of {names:?}"
                    );
                }
            }
        }
    }

    /// Every observed state the cloud assigns fits the kind's type.
    #[test]
    fn assigned_observed_states_fit_their_types() {
        let mut rng = Rng::new(5);
        for provider in PROVIDERS {
            for kind in kinds_of(provider) {
                let site = Site {
                    provider,
                    kind,
                    region: "fr-par",
                    name: "thing",
                    account: "acct",
                    seed: 1,
                };
                let (handle, observed) = assign(&site, &Map::new(), &mut rng);
                assert!(!handle.is_empty());
                sighting(kind, &handle, observed, Map::new())
                    .unwrap_or_else(|e| panic!("{provider} {kind}: {e}"));
            }
        }
    }

    #[test]
    fn account_numbers_in_arns() {
        assert_eq!(aws_account_number("sim-aws-123456789012"), "123456789012");
        assert_eq!(aws_account_number("short"), "000000000000");
    }
}
