//! The simulated cloud behaves like a cloud: server-side values, markers, regions,
//! errors, references, eventual consistency, faults, determinism and persistence.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use infra_core::kinds::*;
use infra_core::{
    engine::{Clock, ManualClock, MapEnv, settle},
    prelude::{
        AwsRegion, Expr, Fleet, GcpRegion, Key, Kind, Partial, ScalewayRegion, SecretString,
    },
    sdk::{Backend, ErrorKind, MARKER_KEY, Marker, RawTags, RetryPolicy, SettledSpec, Sighting},
};
use infra_testkit::sim::{CallFilter, Fault, FaultPlan, FaultRule, Op, Outcome, SimCloud};
use serde_json::{Value, json};

const PARIS: &str = "eu-west-3";

fn tags(pairs: &[(&str, &str)]) -> Tags {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn marker() -> Marker {
    Marker::new("shop")
}

/// Settles `spec` in `env` and creates it.
async fn create<K: Kind>(
    backend: &dyn Backend,
    region: &str,
    name: &str,
    spec: &K,
    env: &MapEnv,
) -> Result<Sighting, infra_core::sdk::BackendError> {
    let settled = settle(spec, env).expect("the spec settles");
    backend
        .create(
            K::ID,
            region,
            name,
            SettledSpec::new::<K>(&settled),
            &marker(),
        )
        .await
        .map(|w| w.expect_done("the simulated cloud writes at once"))
}

async fn update<K: Kind>(
    backend: &dyn Backend,
    region: &str,
    handle: &str,
    spec: &K,
    env: &MapEnv,
) -> Result<Sighting, infra_core::sdk::BackendError> {
    let settled = settle(spec, env).expect("the spec settles");
    backend
        .update(K::ID, region, handle, SettledSpec::new::<K>(&settled))
        .await
        .map(|w| w.expect_done("the simulated cloud writes at once"))
}

fn security_group() -> SecurityGroup {
    SecurityGroup {
        description: Expr::lit("web servers".to_string()),
        vpc_id: Partial::Unknown,
        ingress: Expr::lit(BTreeSet::from([Rule::tcp(443, "0.0.0.0/0")])),
        egress: Partial::Unknown,
        tags: Partial::Known(Expr::lit(tags(&[("team", "web")]))),
    }
}

fn bucket() -> ObjectStore {
    ObjectStore {
        versioning: Partial::Known(Expr::lit(true)),
        ..ObjectStore::new()
    }
}

/// A security group and an instance in it, declared in one fleet.
struct Web {
    group: Key<SecurityGroup>,
}

fn web() -> Web {
    let mut fleet = Fleet::builder("shop");
    let group = fleet.declare(AwsRegion::EuWest3, "web", security_group());
    fleet.declare(AwsRegion::EuWest3, "web-1", instance(group));
    Web { group }
}

fn instance(group: Key<SecurityGroup>) -> AwsInstance {
    AwsInstance::new(Image::Latest, InstanceType::T3(BurstableSize::Micro), group)
}

impl Web {
    fn instance(&self) -> AwsInstance {
        instance(self.group)
    }
}

fn is_hex(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
}

fn is_uuid(s: &str) -> bool {
    let parts: Vec<_> = s.split('-').collect();
    parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12]) && parts.iter().all(|p| is_hex(p))
}

#[tokio::test]
async fn aws_security_group_and_instance_round_trip() {
    let cloud = SimCloud::new(1);
    let aws = cloud.backend("aws");
    let web = web();
    let mut env = MapEnv::new();

    let created = create(&*aws, PARIS, "web", &security_group(), &env)
        .await
        .unwrap();
    let sg = created.handle.clone();
    assert!(
        sg.starts_with("sg-") && sg.len() == 20 && is_hex(&sg[3..]),
        "{sg}"
    );
    let observed = created.observed::<SecurityGroup>().unwrap();
    assert_eq!(observed.group_id, sg);
    assert_eq!(observed.vpc_id, cloud.default_vpc(PARIS));
    // The cloud filled in what the spec left unsaid, and reports the marker.
    let reported = created.reported();
    assert_eq!(reported["vpcId"], json!(cloud.default_vpc(PARIS)));
    assert_eq!(
        reported["egress"],
        json!([{ "protocol": "all", "fromPort": 0, "toPort": 65535, "cidr": "0.0.0.0/0" }])
    );
    assert_eq!(reported["description"], json!("web servers"));
    assert_eq!(
        reported["tags"],
        json!({ MARKER_KEY: "shop", "team": "web" })
    );

    let listed = aws.list("securityGroup", PARIS).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].name.as_str(), listed[0].handle.as_str()),
        ("web", sg.as_str())
    );
    assert!(
        aws.list("securityGroup", "eu-west-1")
            .await
            .unwrap()
            .is_empty()
    );

    let read = aws.read("securityGroup", PARIS, &sg).await.unwrap();
    assert_eq!(read.reported(), created.reported());
    assert_eq!(read.observed_json(), created.observed_json());
    let raw = aws.ownership("securityGroup", PARIS, &sg).await.unwrap();
    assert_eq!(raw.get(MARKER_KEY).map(String::as_str), Some("shop"));
    assert_eq!(raw.get("team").map(String::as_str), Some("web"));

    // An instance of `latest`: the AMI is resolved, the subnet filled in.
    env.set_handle(web.group.id(), &sg);
    let created = create(&*aws, PARIS, "web-1", &web.instance(), &env)
        .await
        .unwrap();
    let id = created.handle.clone();
    assert!(
        id.starts_with("i-") && id.len() == 19 && is_hex(&id[2..]),
        "{id}"
    );
    let reported = created.reported();
    let ami = cloud.latest_ami(PARIS);
    assert!(ami.starts_with("ami-"));
    assert_eq!(reported["image"], json!(ami));
    assert_ne!(reported["image"], json!("latest"));
    assert_eq!(reported["subnetId"], json!(cloud.default_subnet(PARIS)));
    assert_eq!(reported["securityGroup"], json!(sg));
    assert_eq!(reported["instanceType"], json!("t3.micro"));
    assert!(
        !reported.contains_key("keyName"),
        "an unsaid field is not reported"
    );
    let observed = created.observed::<AwsInstance>().unwrap();
    assert_eq!(observed.instance_id, id);
    assert_eq!(observed.image_id, ami);
    assert!(matches!(&observed.private_ip, Partial::Known(ip) if ip.starts_with("172.31.")));
    assert_ne!(cloud.latest_ami("eu-west-1"), ami, "AMIs are regional");
}

#[tokio::test]
async fn aws_portable_kinds_get_server_side_values() {
    let cloud = SimCloud::new(2);
    cloud.set_account("aws", "sim-aws-123456789012");
    let aws = cloud.backend("aws");
    let mut fleet = Fleet::builder("shop");
    let password = fleet.declare(AwsRegion::EuWest3, "db-password", Secrets::generated(32));
    let mut env = MapEnv::new();

    let store = create(&*aws, PARIS, "assets-bucket", &bucket(), &env)
        .await
        .unwrap();
    assert_eq!(store.handle, "arn:aws:s3:::assets-bucket");
    assert!(matches!(
        &store.observed::<ObjectStore>().unwrap().endpoint,
        Partial::Known(e) if e == "https://assets-bucket.s3.eu-west-3.amazonaws.com"
    ));
    assert_eq!(store.reported()["versioning"], json!(true));
    assert_eq!(store.reported()["expireAfterDays"], Value::Null);

    let queue = Queues {
        fifo: Expr::lit(true),
        visibility_timeout_seconds: Partial::Unknown,
        retention_seconds: Partial::Unknown,
        dead_letter: Partial::Unknown,
        max_receive_count: Partial::Unknown,
        tags: Partial::Unknown,
    };
    let q = create(&*aws, PARIS, "jobs", &queue, &env).await.unwrap();
    assert_eq!(
        q.handle,
        "https://sqs.eu-west-3.amazonaws.com/123456789012/jobs.fifo"
    );
    assert_eq!(q.reported()["retentionSeconds"], json!(345_600));
    assert_eq!(q.reported()["tags"], json!({ MARKER_KEY: "shop" }));

    let registry = ImageRegistry {
        scan_on_push: Partial::Known(Expr::lit(true)),
        immutable_tags: Partial::Unknown,
        tags: Partial::Unknown,
    };
    let r = create(&*aws, PARIS, "app", &registry, &env).await.unwrap();
    assert_eq!(
        r.observed::<ImageRegistry>().unwrap().uri,
        "123456789012.dkr.ecr.eu-west-3.amazonaws.com/app"
    );

    let secret = create(&*aws, PARIS, "db-password", &Secrets::generated(32), &env)
        .await
        .unwrap();
    assert!(
        secret
            .handle
            .starts_with("arn:aws:secretsmanager:eu-west-3:123456789012:secret:db-password-")
    );
    assert!(!secret.reported().contains_key("valueFrom"));
    env.set_handle(password.id(), &secret.handle);

    let pg = Postgres::classic(PostgresClassic {
        engine_version: "16",
        instance_class: "db.t4g.micro",
        master_username: "admin",
        master_password: password,
    });
    let created = create(&*aws, PARIS, "orders", &pg, &env).await.unwrap();
    let observed = created.observed::<Postgres>().unwrap();
    assert_eq!(observed.port, 5432);
    assert!(
        observed.endpoint.starts_with("orders.")
            && observed.endpoint.ends_with(".eu-west-3.rds.amazonaws.com")
    );
    // RDS never reports the password, nor where it came from; the world keeps the
    // reference, and with it the dependency.
    assert!(!created.reported().contains_key("masterPassword"));
    assert_eq!(
        cloud.resource(&created.handle).unwrap().config["masterPassword"],
        json!(secret.handle)
    );
    assert_eq!(
        created.reported()["storageGb"],
        json!(20),
        "the cloud's default"
    );

    // The password secret is in use by the database.
    let err = aws
        .delete("secrets", PARIS, &secret.handle)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::DependencyViolation);
    assert!(err.message.contains("orders"), "{}", err.message);
}

#[tokio::test]
async fn gcp_handles_secrets_and_regions() {
    let cloud = SimCloud::new(3);
    let gcp = cloud.backend("gcp");
    assert_eq!(gcp.provider(), "gcp");
    let mut fleet = Fleet::builder("shop");
    let root = fleet.declare(GcpRegion::EuropeWest1, "root", Secrets::from_env("PATH"));
    let derived_spec = Secrets::composed(Expr::secret(root));
    let mut env = MapEnv::new();
    env.set_secret(root.id(), SecretString::new("hunter2"));

    let created = create(&*gcp, "europe-west1", "api-token", &derived_spec, &env)
        .await
        .unwrap();
    assert_eq!(created.handle, "projects/sim-gcp-project/secrets/api-token");
    assert!(!created.reported().contains_key("valueFrom"));
    let value = gcp
        .secret_value("europe-west1", &created.handle)
        .await
        .unwrap();
    assert_eq!(value.expose(), "hunter2");

    // Updating the value moves the version on; the same update again does not.
    env.set_secret(root.id(), SecretString::new("correct horse"));
    let updated = update(&*gcp, "europe-west1", &created.handle, &derived_spec, &env)
        .await
        .unwrap();
    assert_eq!(
        updated.observed::<Secrets>().unwrap().version,
        Partial::Known("2".to_string())
    );
    let again = update(&*gcp, "europe-west1", &created.handle, &derived_spec, &env)
        .await
        .unwrap();
    assert_eq!(again.observed_json(), updated.observed_json());
    assert_eq!(
        gcp.secret_value("europe-west1", &created.handle)
            .await
            .unwrap()
            .expose(),
        "correct horse"
    );

    let store = create(&*gcp, "europe-west1", "media-bucket", &bucket(), &env)
        .await
        .unwrap();
    assert_eq!(store.handle, "projects/_/buckets/media-bucket");
    // Bucket names are global: the same name in another region is taken.
    let err = create(&*gcp, "us-central1", "media-bucket", &bucket(), &env)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict);
    assert_eq!(err.code.as_deref(), Some("ALREADY_EXISTS"));

    // A resource read in another region than its own is not found there.
    let err = gcp
        .read("objectStore", "us-central1", &store.handle)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);
    assert_eq!(err.code.as_deref(), Some("NOT_FOUND"));
    assert_eq!(
        gcp.list("objectStore", "europe-west1").await.unwrap().len(),
        1
    );
    assert!(
        gcp.list("objectStore", "us-central1")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(cloud.count("gcp", "secrets"), 1);
}

#[tokio::test]
async fn scaleway_string_tags_uuids_and_namespaces() {
    let cloud = SimCloud::new(4);
    let scw = cloud.backend("scaleway");
    let mut fleet = Fleet::builder("shop");
    let namespace_spec = FunctionNamespace {
        description: Partial::Unknown,
        environment: Partial::Unknown,
        secret_environment: Partial::Unknown,
        tags: Partial::Known(Expr::lit(BTreeSet::from([
            "env=prod".to_string(),
            "edge".to_string(),
        ]))),
    };
    let ns = fleet.declare(ScalewayRegion::FrPar, "fns", namespace_spec.clone());
    let function = Function {
        namespace: ns,
        runtime: Expr::lit("python311".to_string()),
        handler: Expr::lit("handler.handle".to_string()),
        memory_mb: Partial::Known(Expr::lit(512)),
        min_scale: Partial::Unknown,
        max_scale: Partial::Unknown,
        timeout_seconds: Partial::Unknown,
        source_bucket: Partial::Known(None),
        code: Partial::Unknown,
        environment: Partial::Unknown,
        access: Access::Private.into(),
    };
    let mut env = MapEnv::new();

    let created = create(&*scw, "fr-par", "fns", &namespace_spec, &env)
        .await
        .unwrap();
    assert!(is_uuid(&created.handle), "{}", created.handle);
    let tags = created.reported()["tags"].as_array().unwrap().clone();
    assert!(tags.contains(&json!("managed-by-infra=shop")), "{tags:?}");
    assert!(tags.contains(&json!("env=prod")) && tags.contains(&json!("edge")));
    let raw = scw
        .ownership("functionNamespace", "fr-par", &created.handle)
        .await
        .unwrap();
    assert_eq!(raw.get(MARKER_KEY).map(String::as_str), Some("shop"));
    let mut stripped = created.reported().clone();
    infra_core::sdk::strip_marker(&mut stripped);
    assert_eq!(stripped["tags"], json!(["edge", "env=prod"]));

    env.set_handle(ns.id(), &created.handle);
    let f = create(&*scw, "fr-par", "hello", &function, &env)
        .await
        .unwrap();
    assert!(is_uuid(&f.handle));
    let reported = f.reported();
    assert_eq!(reported["memoryMb"], json!(512));
    assert_eq!(reported["maxScale"], json!(20), "the cloud's default");
    assert!(
        !reported.contains_key("sourceBucket"),
        "Scaleway's function API has no source bucket to report"
    );
    assert!(
        !reported.contains_key("tags"),
        "a function's spec has no tags"
    );
    let raw = scw
        .ownership("function", "fr-par", &f.handle)
        .await
        .unwrap();
    assert_eq!(raw.get(MARKER_KEY).map(String::as_str), Some("shop"));
    assert!(matches!(
        &f.observed::<Function>().unwrap().domain_name,
        Partial::Known(d) if d.ends_with(".functions.fnc.fr-par.scw.cloud")
    ));

    // The namespace holds a function: it cannot go first.
    let err = scw
        .delete("functionNamespace", "fr-par", &created.handle)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::DependencyViolation);
    assert!(err.message.contains("hello"), "{}", err.message);
    scw.delete("function", "fr-par", &f.handle).await.unwrap();
    scw.delete("functionNamespace", "fr-par", &created.handle)
        .await
        .unwrap();
    assert!(cloud.is_empty());
}

#[tokio::test]
async fn capabilities_and_accounts() {
    let cloud = SimCloud::new(5);
    let aws = cloud.backend("aws").capabilities();
    assert_eq!(aws.kinds.len(), 10);
    assert_eq!(aws.ownership, aws.kinds);
    assert_eq!(aws.duplicate_names, BTreeSet::from(["awsInstance"]));
    let gcp = cloud.backend("gcp").capabilities();
    assert_eq!(gcp.kinds.len(), 7);
    assert!(!gcp.kinds.contains("securityGroup"));
    let scw = cloud.backend("scaleway").capabilities();
    assert_eq!(scw.kinds.len(), 11);
    assert!(scw.kinds.contains("container"));
    let backends = cloud.backends();
    assert_eq!(
        backends.providers().collect::<Vec<_>>(),
        ["aws", "gcp", "scaleway"]
    );
    for provider in ["aws", "gcp", "scaleway"] {
        let backend = backends.get(provider).unwrap();
        assert_eq!(backend.provider(), provider);
        assert!(backend.unreachable().is_none());
        let first = backend.account().await.unwrap();
        assert_eq!(first, backend.account().await.unwrap());
    }
    cloud.set_account("gcp", "my-project");
    assert_eq!(cloud.backend("gcp").account().await.unwrap(), "my-project");
}

/// Each provider is a router of exactly its kinds, and a provider's kinds can be used
/// through the typed trait directly: the call reaches the world and its log as through
/// the router.
#[tokio::test]
async fn each_provider_is_a_router_of_its_typed_kinds() {
    use infra_core::sdk::{KindBackend, ReadArgs};

    let cloud = SimCloud::new(6);
    for provider in ["aws", "gcp", "scaleway"] {
        let router = cloud.router(provider);
        let kinds: BTreeSet<_> = router.kinds().collect();
        assert_eq!(kinds, cloud.backend(provider).capabilities().kinds);
    }
    let aws = cloud.backend("aws");
    let sg = create(&*aws, PARIS, "web", &security_group(), &MapEnv::new())
        .await
        .unwrap();
    let sim = cloud.sim_provider("aws");
    assert_eq!(sim.provider(), "aws");
    let reading = KindBackend::<SecurityGroup>::read(&sim, ReadArgs::new(PARIS, &sg.handle))
        .await
        .unwrap();
    assert_eq!(reading.handle(), sg.handle);
    assert_eq!(reading.observed().group_id, sg.handle);
    assert_eq!(reading.observed().vpc_id, cloud.default_vpc(PARIS));
    let last = cloud.calls().pop().unwrap();
    assert_eq!(
        (last.op, last.kind, last.name.as_deref()),
        (Op::Read, Some("securityGroup"), Some("web"))
    );
    // A kind the provider lacks is the router's to refuse: it never reaches the world.
    let before = cloud.calls().len();
    let err = aws.list("function", "fr-par").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid);
    assert_eq!(cloud.calls().len(), before);
}

#[tokio::test]
async fn missing_is_not_found_and_denied_is_denied() {
    let cloud = SimCloud::new(6);
    let aws = cloud.backend("aws");
    let cases = [
        (
            "securityGroup",
            "sg-0123456789abcdef0",
            "InvalidGroup.NotFound",
        ),
        (
            "awsInstance",
            "i-0123456789abcdef0",
            "InvalidInstanceID.NotFound",
        ),
        ("s3Bucket", "arn:aws:s3:::nope", "NoSuchBucket"),
        (
            "secrets",
            "arn:aws:secretsmanager:eu-west-3:0:secret:x",
            "ResourceNotFoundException",
        ),
    ];
    for (kind, handle, code) in cases {
        let err = aws.read(kind, PARIS, handle).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::NotFound, "{kind}");
        assert_eq!(err.code.as_deref(), Some(code), "{kind}");
        assert!(!err.may_have_been_sent);
        assert_eq!(
            aws.delete(kind, PARIS, handle).await.unwrap_err().kind,
            ErrorKind::NotFound
        );
        assert_eq!(
            aws.ownership(kind, PARIS, handle).await.unwrap_err().kind,
            ErrorKind::NotFound
        );
    }
    let env = MapEnv::new();
    let err = update(
        &*aws,
        PARIS,
        "sg-0123456789abcdef0",
        &security_group(),
        &env,
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);

    // A denial is Denied, never NotFound, for a list too.
    let sg = create(&*aws, PARIS, "web", &security_group(), &env)
        .await
        .unwrap();
    cloud.deny("aws", Some("securityGroup"), Some(PARIS));
    let err = aws.list("securityGroup", PARIS).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Denied);
    assert_eq!(err.code.as_deref(), Some("UnauthorizedOperation"));
    let err = aws
        .read("securityGroup", PARIS, &sg.handle)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Denied);
    let err = aws
        .read("securityGroup", PARIS, "sg-0123456789abcdef0")
        .await
        .unwrap_err();
    assert_eq!(
        err.kind,
        ErrorKind::Denied,
        "a denied scope does not reveal absence"
    );
    // Other regions and kinds are not denied.
    assert!(aws.list("securityGroup", "eu-west-1").await.is_ok());
    assert!(aws.list("s3Bucket", PARIS).await.is_ok());
    // A denied delete changes nothing.
    assert_eq!(
        aws.delete("securityGroup", PARIS, &sg.handle)
            .await
            .unwrap_err()
            .kind,
        ErrorKind::Denied
    );
    assert_eq!(cloud.len(), 1);
    cloud.allow_all();
    assert_eq!(aws.list("securityGroup", PARIS).await.unwrap().len(), 1);

    cloud.deny("gcp", None, None);
    let err = cloud.backend("gcp").account().await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Denied);
    assert_eq!(err.code.as_deref(), Some("PERMISSION_DENIED"));
}

#[tokio::test]
async fn a_referenced_security_group_cannot_be_deleted() {
    let cloud = SimCloud::new(7);
    let aws = cloud.backend("aws");
    let web = web();
    let mut env = MapEnv::new();
    let sg = create(&*aws, PARIS, "web", &security_group(), &env)
        .await
        .unwrap()
        .handle;
    env.set_handle(web.group.id(), &sg);
    let instance = create(&*aws, PARIS, "web-1", &web.instance(), &env)
        .await
        .unwrap()
        .handle;
    let before = cloud.resources();

    let err = aws.delete("securityGroup", PARIS, &sg).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::DependencyViolation);
    assert_eq!(err.code.as_deref(), Some("DependencyViolation"));
    assert!(err.message.contains(&instance), "{}", err.message);
    assert!(err.message.contains(&sg), "{}", err.message);
    assert_eq!(
        cloud.resources(),
        before,
        "a refused delete changes nothing"
    );
    let log = cloud.calls();
    let last = log.last().unwrap();
    assert_eq!(
        last.outcome,
        Outcome::Failed(ErrorKind::DependencyViolation)
    );
    assert!(!last.applied);

    aws.delete("awsInstance", PARIS, &instance).await.unwrap();
    aws.delete("securityGroup", PARIS, &sg).await.unwrap();
    assert!(cloud.is_empty());
    assert_eq!(
        aws.read("securityGroup", PARIS, &sg)
            .await
            .unwrap_err()
            .kind,
        ErrorKind::NotFound
    );
}

#[tokio::test]
async fn names_are_unique_except_instances() {
    let cloud = SimCloud::new(8);
    let aws = cloud.backend("aws");
    let web = web();
    let mut env = MapEnv::new();
    let sg = create(&*aws, PARIS, "web", &security_group(), &env)
        .await
        .unwrap();
    let err = create(&*aws, PARIS, "web", &security_group(), &env)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict);
    assert_eq!(err.code.as_deref(), Some("InvalidGroup.Duplicate"));
    // Another region is another namespace for groups.
    create(&*aws, "eu-west-1", "web", &security_group(), &env)
        .await
        .unwrap();
    // Instances may share a name (a replace creates before it deletes).
    env.set_handle(web.group.id(), &sg.handle);
    let a = create(&*aws, PARIS, "web-1", &web.instance(), &env)
        .await
        .unwrap();
    let b = create(&*aws, PARIS, "web-1", &web.instance(), &env)
        .await
        .unwrap();
    assert_ne!(a.handle, b.handle);
    assert_eq!(aws.list("awsInstance", PARIS).await.unwrap().len(), 2);
    // S3 bucket names are global, and objectStore and s3Bucket share them.
    create(&*aws, PARIS, "logs-bucket", &bucket(), &env)
        .await
        .unwrap();
    let s3 = S3Bucket {
        versioning: Partial::Unknown,
        object_lock: Partial::Unknown,
        block_public_access: Partial::Unknown,
        tags: Partial::Unknown,
    };
    let err = create(&*aws, "us-east-1", "logs-bucket", &s3, &env)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict);
    assert_eq!(err.code.as_deref(), Some("BucketAlreadyOwnedByYou"));
    let ok = create(&*aws, "us-east-1", "other-bucket", &s3, &env)
        .await
        .unwrap();
    assert_eq!(ok.reported()["blockPublicAccess"], json!(true));
    assert_eq!(ok.observed::<S3Bucket>().unwrap().region, "us-east-1");
}

#[tokio::test]
async fn update_keeps_the_marker_and_what_the_cloud_filled_in() {
    let cloud = SimCloud::new(9);
    let aws = cloud.backend("aws");
    let env = MapEnv::new();
    let sg = create(&*aws, PARIS, "web", &security_group(), &env)
        .await
        .unwrap();
    let mut changed = security_group();
    changed.ingress = Expr::lit(BTreeSet::from([Rule::tcp(80, "10.0.0.0/8")]));
    changed.tags = Partial::Known(Expr::lit(tags(&[("team", "edge")])));
    let updated = update(&*aws, PARIS, &sg.handle, &changed, &env)
        .await
        .unwrap();
    let reported = updated.reported();
    assert_eq!(
        reported["ingress"],
        json!([{ "protocol": "tcp", "fromPort": 80, "toPort": 80, "cidr": "10.0.0.0/8" }])
    );
    assert_eq!(
        reported["tags"],
        json!({ MARKER_KEY: "shop", "team": "edge" })
    );
    assert_eq!(reported["vpcId"], json!(cloud.default_vpc(PARIS)));
    assert_eq!(reported["description"], json!("web servers"));
    let again = update(&*aws, PARIS, &sg.handle, &changed, &env)
        .await
        .unwrap();
    assert_eq!(again.reported(), updated.reported(), "idempotent");
    assert_eq!(cloud.len(), 1);
}

#[tokio::test]
async fn eventual_consistency_hides_a_fresh_create_from_list() {
    let cloud = SimCloud::new(10);
    let aws = cloud.backend("aws");
    let env = MapEnv::new();
    cloud.set_list_lag(2);
    let sg = create(&*aws, PARIS, "web", &security_group(), &env)
        .await
        .unwrap();
    // Another region's list does not use up the lag.
    assert!(
        aws.list("securityGroup", "eu-west-1")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(aws.list("securityGroup", PARIS).await.unwrap().is_empty());
    assert!(aws.list("securityGroup", PARIS).await.unwrap().is_empty());
    // It can be read by handle all along.
    assert!(aws.read("securityGroup", PARIS, &sg.handle).await.is_ok());
    let listed = aws.list("securityGroup", PARIS).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].handle, sg.handle);
}

#[tokio::test]
async fn fail_nth_is_not_applied() {
    let cloud = SimCloud::new(11);
    // The faults themselves, as a client that tries each call once meets them.
    cloud.set_retry_policy(RetryPolicy::none());
    let aws = cloud.backend("aws");
    let env = MapEnv::new();
    cloud.fail_nth(2, ErrorKind::Unavailable, true);
    aws.list("securityGroup", PARIS).await.unwrap();
    let err = create(&*aws, PARIS, "web", &security_group(), &env)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unavailable);
    assert!(err.may_have_been_sent);
    assert!(cloud.is_empty(), "a failed call is not applied");
    // Only the second call was hit.
    create(&*aws, PARIS, "web", &security_group(), &env)
        .await
        .unwrap();
    assert_eq!(cloud.len(), 1);

    // Counting only deletes.
    cloud.fail_nth_matching(CallFilter::op(Op::Delete), 1, ErrorKind::Throttled, false);
    let handle = cloud.resources()[0].handle.clone();
    aws.read("securityGroup", PARIS, &handle).await.unwrap();
    let err = aws
        .delete("securityGroup", PARIS, &handle)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Throttled);
    assert!(!err.may_have_been_sent);
    assert_eq!(cloud.len(), 1);
    aws.delete("securityGroup", PARIS, &handle).await.unwrap();
    assert!(cloud.is_empty());
}

#[tokio::test]
async fn a_lost_response_is_applied() {
    let cloud = SimCloud::new(12);
    let aws = cloud.backend("aws");
    let env = MapEnv::new();
    cloud.lose_response_nth(1);
    let err = create(&*aws, PARIS, "web", &security_group(), &env)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unavailable);
    assert!(err.may_have_been_sent);
    let resources = cloud.resources();
    assert_eq!(resources.len(), 1, "the create happened");
    assert_eq!(
        resources[0].raw_tags.get(MARKER_KEY).map(String::as_str),
        Some("shop")
    );
    let call = cloud.calls().pop().unwrap();
    assert!(call.applied);
    assert_eq!(call.outcome, Outcome::Failed(ErrorKind::Unavailable));
    assert_eq!(call.handle.as_deref(), Some(resources[0].handle.as_str()));
    assert_eq!(cloud.writes().len(), 1);
    // Retrying the create finds the name taken.
    let err = create(&*aws, PARIS, "web", &security_group(), &env)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict);
}

#[tokio::test]
async fn throttling_is_not_applied() {
    let cloud = SimCloud::new(13);
    // The faults themselves, as a client that tries each call once meets them.
    cloud.set_retry_policy(RetryPolicy::none());
    let aws = cloud.backend("aws");
    let env = MapEnv::new();
    cloud.throttle_next(2);
    for _ in 0..2 {
        let err = create(&*aws, PARIS, "web", &security_group(), &env)
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Throttled);
        assert!(!err.may_have_been_sent);
    }
    assert!(cloud.is_empty());
    create(&*aws, PARIS, "web", &security_group(), &env)
        .await
        .unwrap();

    cloud.set_throttle_rate(1.0);
    assert_eq!(
        aws.list("securityGroup", PARIS).await.unwrap_err().kind,
        ErrorKind::Throttled
    );
    cloud.clear_faults();
    assert!(aws.list("securityGroup", PARIS).await.is_ok());
}

#[tokio::test]
async fn a_crash_point_stops_the_world_until_revived() {
    let cloud = SimCloud::new(14);
    let aws = cloud.backend("aws");
    let gcp = cloud.backend("gcp");
    let env = MapEnv::new();
    cloud.crash_after(2);
    create(&*aws, PARIS, "web", &security_group(), &env)
        .await
        .unwrap();
    gcp.list("objectStore", "europe-west1").await.unwrap();
    assert!(!cloud.is_crashed());
    let err = create(&*aws, "eu-west-1", "web", &security_group(), &env)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Other);
    assert!(err.message.contains("crashed"), "{}", err.message);
    assert!(!err.may_have_been_sent);
    assert!(cloud.is_crashed());
    assert_eq!(
        gcp.account().await.unwrap_err().kind,
        ErrorKind::Other,
        "every later call is refused"
    );
    assert_eq!(cloud.len(), 1, "nothing after the crash point was applied");
    assert_eq!(cloud.writes().len(), 1);
    assert_eq!(cloud.write_attempts().len(), 2);

    cloud.revive();
    create(&*aws, "eu-west-1", "web", &security_group(), &env)
        .await
        .unwrap();
    assert_eq!(cloud.len(), 2);
}

#[tokio::test]
async fn fault_plans_are_deterministic() {
    let a = FaultPlan::random(42, 200, 0.2);
    let b = FaultPlan::random(42, 200, 0.2);
    assert_eq!(a, b);
    assert!(!a.rules.is_empty());
    assert_ne!(a, FaultPlan::random(43, 200, 0.2));

    // Installed, a plan hits the calls it names.
    let cloud = SimCloud::new(15);
    // The faults themselves, as a client that tries each call once meets them.
    cloud.set_retry_policy(RetryPolicy::none());
    let aws = cloud.backend("aws");
    let plan = FaultPlan::new().with(FaultRule {
        nth: 3,
        filter: CallFilter::any().provider("aws").kind("securityGroup"),
        fault: Fault::Throttle,
    });
    cloud.install(&plan);
    let gcp = cloud.backend("gcp");
    for _ in 0..3 {
        gcp.list("iam", "europe-west1").await.unwrap();
    }
    aws.list("securityGroup", PARIS).await.unwrap();
    aws.list("securityGroup", PARIS).await.unwrap();
    assert_eq!(
        aws.list("securityGroup", PARIS).await.unwrap_err().kind,
        ErrorKind::Throttled
    );
    aws.list("securityGroup", PARIS).await.unwrap();
}

async fn build_some(cloud: &SimCloud) -> Vec<String> {
    let aws = cloud.backend("aws");
    let scw = cloud.backend("scaleway");
    let web = web();
    let mut env = MapEnv::new();
    let sg = create(&*aws, PARIS, "web", &security_group(), &env)
        .await
        .unwrap();
    env.set_handle(web.group.id(), &sg.handle);
    let i = create(&*aws, PARIS, "web-1", &web.instance(), &env)
        .await
        .unwrap();
    let s = create(&*aws, PARIS, "token", &Secrets::generated(32), &env)
        .await
        .unwrap();
    let r = ImageRegistry {
        scan_on_push: Partial::Unknown,
        immutable_tags: Partial::Unknown,
        tags: Partial::Unknown,
    };
    let reg = create(&*scw, "nl-ams", "images", &r, &env).await.unwrap();
    vec![
        sg.handle,
        i.handle.clone(),
        serde_json::to_string(i.observed_json()).unwrap(),
        s.handle,
        reg.handle.clone(),
        serde_json::to_string(reg.observed_json()).unwrap(),
    ]
}

#[tokio::test]
async fn one_seed_one_world() {
    let a = build_some(&SimCloud::new(99)).await;
    let b = build_some(&SimCloud::new(99)).await;
    assert_eq!(a, b);
    let c = build_some(&SimCloud::new(100)).await;
    assert_ne!(a[0], c[0]);
    assert_ne!(a[4], c[4]);
}

#[tokio::test]
async fn latency_is_slept_on_the_injected_clock() {
    let clock = Arc::new(ManualClock::new());
    let cloud = SimCloud::with_clock(16, clock.clone());
    let aws = cloud.backend("aws");
    cloud.set_latency(Duration::from_millis(100));
    cloud.set_latency_for(Op::Create, Duration::from_secs(2));
    aws.list("securityGroup", PARIS).await.unwrap();
    assert_eq!(clock.now(), Duration::from_millis(100));
    create(&*aws, PARIS, "web", &security_group(), &MapEnv::new())
        .await
        .unwrap();
    assert_eq!(clock.now(), Duration::from_millis(2100));
}

#[tokio::test]
async fn the_call_log_records_every_call() {
    let cloud = SimCloud::new(17);
    let aws = cloud.backend("aws");
    let env = MapEnv::new();
    let sg = create(&*aws, PARIS, "web", &security_group(), &env)
        .await
        .unwrap();
    aws.read("securityGroup", PARIS, &sg.handle).await.unwrap();
    aws.ownership("securityGroup", PARIS, &sg.handle)
        .await
        .unwrap();
    let _ = aws
        .read("securityGroup", PARIS, "sg-00000000000000000")
        .await;
    aws.delete("securityGroup", PARIS, &sg.handle)
        .await
        .unwrap();

    let calls = cloud.calls();
    let ops: Vec<Op> = calls.iter().map(|c| c.op).collect();
    assert_eq!(
        ops,
        [Op::Create, Op::Read, Op::Ownership, Op::Read, Op::Delete]
    );
    assert_eq!(
        calls.iter().map(|c| c.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    let create_call = &calls[0];
    assert_eq!(create_call.provider, "aws");
    assert_eq!(create_call.kind, Some("securityGroup"));
    assert_eq!(create_call.region.as_deref(), Some(PARIS));
    assert_eq!(create_call.name.as_deref(), Some("web"));
    assert_eq!(create_call.handle.as_deref(), Some(sg.handle.as_str()));
    assert!(create_call.applied && create_call.outcome.is_ok());
    assert_eq!(calls[3].outcome.error(), Some(ErrorKind::NotFound));
    assert!(!calls[3].applied);
    assert_eq!(
        calls[4].name.as_deref(),
        Some("web"),
        "named from its handle"
    );

    let writes = cloud.writes();
    assert_eq!(
        writes.iter().map(|c| c.op).collect::<Vec<_>>(),
        [Op::Create, Op::Delete]
    );
    assert!(calls[0].to_string().contains("create securityGroup"));

    cloud.clear_calls();
    assert!(cloud.calls().is_empty());
    aws.account().await.unwrap();
    assert!(cloud.writes().is_empty(), "reads are not writes");
    assert_eq!(cloud.calls()[0].op, Op::Account);
}

#[tokio::test]
async fn tests_can_reach_into_the_world() {
    let cloud = SimCloud::new(18);
    let aws = cloud.backend("aws");
    let foreign = cloud
        .insert_foreign("aws", "securityGroup", PARIS, "legacy", RawTags::new())
        .unwrap();
    let other_fleet = cloud
        .insert_foreign(
            "aws",
            "securityGroup",
            PARIS,
            "theirs",
            RawTags::from([(MARKER_KEY.to_string(), "billing".to_string())]),
        )
        .unwrap();
    let listed = aws.list("securityGroup", PARIS).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert!(
        aws.ownership("securityGroup", PARIS, &foreign)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        aws.ownership("securityGroup", PARIS, &other_fleet)
            .await
            .unwrap()[MARKER_KEY],
        "billing"
    );
    let read = aws.read("securityGroup", PARIS, &foreign).await.unwrap();
    assert_eq!(read.reported()["vpcId"], json!(cloud.default_vpc(PARIS)));
    assert!(
        !read.reported().contains_key("description"),
        "not said, not reported"
    );
    assert_eq!(
        cloud
            .insert_foreign("aws", "securityGroup", PARIS, "legacy", RawTags::new())
            .unwrap_err()
            .kind,
        ErrorKind::Conflict
    );

    // Drift: a field changed behind the engine's back shows in the next read.
    assert!(cloud.set_field(&foreign, "description", json!("edited by hand")));
    let read = aws.read("securityGroup", PARIS, &foreign).await.unwrap();
    assert_eq!(read.reported()["description"], json!("edited by hand"));
    assert!(cloud.remove_field(&foreign, "vpcId"));
    let read = aws.read("securityGroup", PARIS, &foreign).await.unwrap();
    assert!(!read.reported().contains_key("vpcId"));
    assert!(cloud.set_raw_tags(
        &foreign,
        RawTags::from([("a".to_string(), "b".to_string())])
    ));
    assert_eq!(cloud.resource(&foreign).unwrap().raw_tags["a"], "b");

    assert_eq!(cloud.find("aws", "securityGroup", "legacy").len(), 1);
    assert_eq!(cloud.count("aws", "securityGroup"), 2);
    assert!(cloud.remove(&foreign));
    assert!(!cloud.remove(&foreign));
    assert_eq!(
        aws.read("securityGroup", PARIS, &foreign)
            .await
            .unwrap_err()
            .kind,
        ErrorKind::NotFound
    );
    assert!(cloud.writes().is_empty(), "direct edits are not calls");
    assert_eq!(cloud.resources().len(), 1);
}

#[tokio::test]
async fn a_world_persists_across_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.json");
    let mut fleet = Fleet::builder("shop");
    let root = fleet.declare(AwsRegion::EuWest3, "root", Secrets::from_env("PATH"));
    let mut env = MapEnv::new();
    env.set_secret(root.id(), SecretString::new("s3cret"));

    let (sg, secret) = {
        let cloud = SimCloud::open(&path).unwrap();
        assert!(cloud.is_empty());
        assert_eq!(cloud.path().as_deref(), Some(path.as_path()));
        let aws = cloud.backend("aws");
        let sg = create(&*aws, PARIS, "web", &security_group(), &env)
            .await
            .unwrap();
        let secret = create(
            &*aws,
            PARIS,
            "api",
            &Secrets::composed(Expr::secret(root)),
            &env,
        )
        .await
        .unwrap();
        assert!(path.exists(), "saved after a write");
        (sg, secret)
    };
    let text = std::fs::read_to_string(&path).unwrap();
    let file: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(file["version"], json!(1));

    let cloud = SimCloud::open(&path).unwrap();
    assert_eq!(cloud.len(), 2);
    let aws = cloud.backend("aws");
    let read = aws.read("securityGroup", PARIS, &sg.handle).await.unwrap();
    assert_eq!(read.reported(), sg.reported());
    assert_eq!(read.observed_json(), sg.observed_json());
    assert_eq!(
        aws.secret_value(PARIS, &secret.handle)
            .await
            .unwrap()
            .expose(),
        "s3cret"
    );
    // The generator carries on where it stopped: no handle is handed out twice.
    let next = create(&*aws, "eu-west-1", "web", &security_group(), &env)
        .await
        .unwrap();
    assert_ne!(next.handle, sg.handle);
    aws.delete("securityGroup", PARIS, &sg.handle)
        .await
        .unwrap();
    let reopened = SimCloud::open(&path).unwrap();
    assert_eq!(reopened.len(), 2);
    assert!(reopened.resource(&sg.handle).is_none());
    // With every handle dropped, the journal is folded into the file, which alone
    // holds the world; no journal or temporary file is left behind.
    drop((aws, cloud, reopened));
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(file["resources"].as_array().unwrap().len(), 2, "{file}");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["world.json"]);
}

#[tokio::test]
async fn a_malformed_world_file_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.json");
    let text = "{\n  \"version\": 1,\n  \"seed\": oops\n}\n";
    std::fs::write(&path, text).unwrap();
    let err = SimCloud::open(&path).unwrap_err();
    let message = err.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains(":3:"), "{message}");
    match err {
        infra_testkit::sim::WorldFileError::Malformed { line, .. } => assert_eq!(line, 3),
        other => panic!("expected Malformed, got {other:?}"),
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);

    let future = "{\"version\": 99, \"seed\": 0, \"rng\": 0, \"nextId\": 1, \"accounts\": {}, \"resources\": []}";
    std::fs::write(&path, future).unwrap();
    let err = SimCloud::open(&path).unwrap_err();
    assert!(err.to_string().contains("version 99"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), future);
}

#[tokio::test]
async fn a_spec_of_another_kind_is_invalid() {
    let cloud = SimCloud::new(19);
    let aws = cloud.backend("aws");
    let settled = settle(&bucket(), &MapEnv::new()).unwrap();
    let err = aws
        .create(
            "securityGroup",
            PARIS,
            "web",
            SettledSpec::new::<ObjectStore>(&settled),
            &marker(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid);
    // A kind the provider lacks, and a region it does not have.
    let gcp = cloud.backend("gcp");
    assert_eq!(
        gcp.list("securityGroup", "europe-west1")
            .await
            .unwrap_err()
            .kind,
        ErrorKind::Invalid
    );
    assert_eq!(
        gcp.list("iam", "eu-west-3").await.unwrap_err().kind,
        ErrorKind::Invalid
    );
    assert!(cloud.is_empty());
}

#[tokio::test]
async fn an_unset_secret_variable_fails_the_create() {
    let cloud = SimCloud::new(20);
    let aws = cloud.backend("aws");
    let spec = Secrets::from_env("INFRA_TESTKIT_SURELY_UNSET_VARIABLE");
    let err = create(&*aws, PARIS, "token", &spec, &MapEnv::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Invalid);
    assert!(cloud.is_empty());
}

#[tokio::test]
async fn a_generated_secret_is_drawn_on_create_and_kept() {
    let cloud = SimCloud::new(21);
    let scw = cloud.backend("scaleway");
    let env = MapEnv::new();
    let spec = Secrets::generated(24);
    let created = create(&*scw, "fr-par", "db-password", &spec, &env)
        .await
        .unwrap();
    assert!(!created.reported().contains_key("valueFrom"));
    let value = scw.secret_value("fr-par", &created.handle).await.unwrap();
    assert_eq!(value.expose().len(), 24);
    update(&*scw, "fr-par", &created.handle, &spec, &env)
        .await
        .unwrap();
    let again = scw.secret_value("fr-par", &created.handle).await.unwrap();
    assert_eq!(again, value, "an update does not draw a new value");
    assert_eq!(cloud.stored_secret(&created.handle), Some(value));
}
