//! `Backend::mark` against moto's server: for every kind, a resource made with the plain
//! SDK ("by another tool", as `import-tfstate` finds them) carrying one unrelated tag is
//! marked; `ownership` then returns the marker and the unrelated tag, the configuration
//! reads as before, a second mark changes nothing, a resource that does not exist is
//! `NotFound`, and one carrying another fleet's marker is refused (`Conflict`) with its
//! tags left as they were.
//!
//! moto tags every kind this crate realises (S3 buckets, SQS queues, Secrets Manager
//! secrets, RDS instances and clusters, Lambda functions, ECR repositories, EC2
//! security groups and instances, IAM roles), so no kind is skipped; a kind whose
//! feature is off in this build is not compiled here at all.
//!
//! The server is found through `AWS_ENDPOINT_URL` (`.ci/run` starts one). Without it the
//! tests print a loud skip, and fail when `CI=true`.

mod moto_support;

use moto_support::{endpoint, sdk};

use infra_aws::AwsBackend;
use infra_core::sdk::Router;
use infra_core::sdk::{Backend, ErrorKind, MARKER_KEY, Marker, Ownership, RawTags};

/// The region every resource here is made in.
const REGION: &str = "eu-west-3";
/// The fleet that marks.
const FLEET: &str = "importer";
/// Another fleet, whose marker some resources carry already.
const OTHER_FLEET: &str = "someone-else";
/// The unrelated tag every resource is made with.
const TEAM: (&str, &str) = ("team", "web");

/// The backend and the plain SDK configuration, or `None` after a loud skip.
async fn moto() -> Option<(Router, aws_types::SdkConfig)> {
    let endpoint = endpoint("the AWS mark tests")?;
    let config = sdk(&endpoint, REGION).await;
    Some((AwsBackend::new(config.clone()), config))
}

fn prefix() -> String {
    infra_testkit::conformance::fresh_prefix(&infra_core::engine::SystemClock::new())
}

/// The tags a resource is made with: the unrelated one, and another fleet's marker when
/// `foreign`.
fn made_with(foreign: bool) -> RawTags {
    let mut tags = RawTags::from([(TEAM.0.to_owned(), TEAM.1.to_owned())]);
    if foreign {
        tags.insert(MARKER_KEY.to_owned(), OTHER_FLEET.to_owned());
    }
    tags
}

/// What a read says of a resource, tags aside: marking must leave all of it as it was.
async fn configuration(backend: &Router, kind: &'static str, handle: &str) -> String {
    let read = backend
        .read(kind, REGION, handle)
        .await
        .unwrap_or_else(|e| panic!("{kind} {handle} reads: {e}"));
    let mut reported = read.reported().clone();
    reported.remove("tags");
    format!("{:?} {:?}", read.observed_json(), reported)
}

/// Resources of one kind made with the plain SDK.
struct Made {
    kind: &'static str,
    /// Made with the unrelated tag alone.
    plain: String,
    /// Made with the unrelated tag and another fleet's marker.
    foreign: String,
    /// A handle of the kind's shape naming nothing.
    missing: String,
    /// Tags `mark` may add besides the marker (the IAM region tag).
    bookkeeping: &'static [&'static str],
}

/// Everything the behaviour of `mark` promises, on one kind.
async fn marks_as_promised(backend: &Router, made: &Made) {
    let Made {
        kind,
        plain,
        foreign,
        missing,
        bookkeeping,
    } = made;
    let kind = *kind;
    let marker = Marker::new(FLEET);

    // Made elsewhere: the unrelated tag, no marker.
    let before = backend
        .ownership(kind, REGION, plain)
        .await
        .unwrap_or_else(|e| panic!("{kind}: ownership before mark: {e}"));
    assert_eq!(
        before.get(TEAM.0).map(String::as_str),
        Some(TEAM.1),
        "{kind}: {before:?}"
    );
    assert_eq!(
        marker.verdict(&before),
        Ownership::Unmarked,
        "{kind}: {before:?}"
    );
    let configured = configuration(backend, kind, plain).await;

    // Marked: the marker and every tag it had, nothing else but bookkeeping.
    backend
        .mark(kind, REGION, plain, &marker)
        .await
        .unwrap_or_else(|e| panic!("{kind}: mark: {e}"));
    let after = backend
        .ownership(kind, REGION, plain)
        .await
        .unwrap_or_else(|e| panic!("{kind}: ownership after mark: {e}"));
    assert_eq!(
        after.get(MARKER_KEY).map(String::as_str),
        Some(FLEET),
        "{kind}: {after:?}"
    );
    assert_eq!(marker.verdict(&after), Ownership::Ours, "{kind}");
    for (key, value) in &before {
        assert_eq!(
            after.get(key),
            Some(value),
            "{kind}: tag {key} was not kept: {after:?}"
        );
    }
    let added: Vec<&String> = after
        .keys()
        .filter(|k| !before.contains_key(*k) && *k != MARKER_KEY)
        .filter(|k| !bookkeeping.contains(&k.as_str()))
        .collect();
    assert!(added.is_empty(), "{kind}: mark wrote {added:?} too");
    assert_eq!(
        configuration(backend, kind, plain).await,
        configured,
        "{kind}: mark changed the configuration"
    );

    // Twice: the same tags.
    backend
        .mark(kind, REGION, plain, &marker)
        .await
        .unwrap_or_else(|e| panic!("{kind}: second mark: {e}"));
    let again = backend
        .ownership(kind, REGION, plain)
        .await
        .unwrap_or_else(|e| panic!("{kind}: ownership after the second mark: {e}"));
    assert_eq!(again, after, "{kind}: marking twice changed the tags");

    // Nothing there: NotFound.
    let absent = backend
        .mark(kind, REGION, missing, &marker)
        .await
        .expect_err("marking what does not exist fails");
    assert_eq!(absent.kind, ErrorKind::NotFound, "{kind}: {absent}");

    // Another fleet's: refused, and its tags as they were.
    let theirs = backend
        .ownership(kind, REGION, foreign)
        .await
        .unwrap_or_else(|e| panic!("{kind}: ownership of the foreign one: {e}"));
    assert_eq!(
        theirs.get(MARKER_KEY).map(String::as_str),
        Some(OTHER_FLEET),
        "{kind}: {theirs:?}"
    );
    let refused = backend
        .mark(kind, REGION, foreign, &marker)
        .await
        .expect_err("another fleet's resource is not marked");
    assert_eq!(refused.kind, ErrorKind::Conflict, "{kind}: {refused}");
    assert!(
        refused.message.contains(OTHER_FLEET),
        "{kind}: the refusal names the other fleet: {refused}"
    );
    assert_eq!(
        backend
            .ownership(kind, REGION, foreign)
            .await
            .unwrap_or_else(|e| panic!("{kind}: ownership of the foreign one: {e}")),
        theirs,
        "{kind}: a refused mark changed the tags"
    );
}

/// Deletes what a test made, through the backend (any failure is reported, not hidden).
async fn remove(backend: &Router, kind: &'static str, handles: &[&str]) {
    for handle in handles {
        if let Err(e) = backend.delete(kind, REGION, handle).await {
            eprintln!("could not delete {kind} {handle} after the test: {e}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_kind_is_refused_as_the_other_calls_refuse_it() {
    let Some((backend, _)) = moto().await else {
        return;
    };
    let marked = backend
        .mark("noSuchKind", REGION, "anything", &Marker::new(FLEET))
        .await
        .expect_err("an unknown kind cannot be marked");
    let read = backend
        .read("noSuchKind", REGION, "anything")
        .await
        .expect_err("an unknown kind cannot be read");
    assert_eq!(marked.kind, ErrorKind::Invalid);
    assert_eq!((marked.kind, &marked.message), (read.kind, &read.message));
}

#[cfg(feature = "s3")]
mod s3 {
    use super::*;
    use aws_sdk_s3::types::{BucketLocationConstraint, CreateBucketConfiguration, Tag, Tagging};

    async fn bucket(s3: &aws_sdk_s3::Client, name: &str, tags: Option<RawTags>) {
        s3.create_bucket()
            .bucket(name)
            .create_bucket_configuration(
                CreateBucketConfiguration::builder()
                    .location_constraint(BucketLocationConstraint::from(REGION))
                    .build(),
            )
            .send()
            .await
            .expect("the bucket is made");
        let Some(tags) = tags else { return };
        let set = tags
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build().expect("a tag"))
            .collect();
        s3.put_bucket_tagging()
            .bucket(name)
            .tagging(
                Tagging::builder()
                    .set_tag_set(Some(set))
                    .build()
                    .expect("tags"),
            )
            .send()
            .await
            .expect("the bucket is tagged");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn buckets_made_elsewhere_are_marked_with_their_tags_kept() {
        let Some((backend, config)) = moto().await else {
            return;
        };
        let s3 = aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(&config)
                .force_path_style(true)
                .build(),
        );
        let p = prefix();
        // Both bucket kinds are S3 buckets, marked the same way; each gets its own.
        let mut made_here = Vec::new();
        for (kind, short) in [("s3Bucket", "b"), ("objectStore", "o")] {
            let (plain, foreign) = (format!("{p}{short}plain"), format!("{p}{short}foreign"));
            bucket(&s3, &plain, Some(made_with(false))).await;
            bucket(&s3, &foreign, Some(made_with(true))).await;
            let made = Made {
                kind,
                plain: plain.clone(),
                foreign: foreign.clone(),
                missing: format!("{p}missing"),
                bookkeeping: &[],
            };
            marks_as_promised(&backend, &made).await;
            made_here.extend([plain, foreign]);
        }
        let plain = made_here[0].clone();
        // A bucket with no tag set at all (S3 answers `NoSuchTagSet`): the marker alone.
        let bare = format!("{p}bare");
        bucket(&s3, &bare, None).await;
        backend
            .mark("s3Bucket", REGION, &bare, &Marker::new(FLEET))
            .await
            .expect("a bucket without tags is marked");
        assert_eq!(
            backend.ownership("s3Bucket", REGION, &bare).await.unwrap(),
            RawTags::from([(MARKER_KEY.to_owned(), FLEET.to_owned())])
        );
        // A bucket of another region is not here.
        let elsewhere = backend
            .mark("s3Bucket", "us-east-1", &plain, &Marker::new(FLEET))
            .await
            .expect_err("a bucket of another region is not marked");
        assert_eq!(elsewhere.kind, ErrorKind::NotFound, "{elsewhere}");
        made_here.push(bare);
        let all: Vec<&str> = made_here.iter().map(String::as_str).collect();
        remove(&backend, "s3Bucket", &all).await;
    }
}

#[cfg(feature = "sqs")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_made_elsewhere_are_marked_with_their_tags_kept() {
    let Some((backend, config)) = moto().await else {
        return;
    };
    let sqs = aws_sdk_sqs::Client::new(&config);
    let p = prefix();
    let make = |name: String, foreign: bool| {
        let sqs = sqs.clone();
        async move {
            sqs.create_queue()
                .queue_name(name)
                .set_tags(Some(made_with(foreign).into_iter().collect()))
                .send()
                .await
                .expect("the queue is made")
                .queue_url()
                .expect("a queue URL")
                .to_owned()
        }
    };
    let plain = make(format!("{p}plain"), false).await;
    let foreign = make(format!("{p}foreign"), true).await;
    let missing = plain.replace(&format!("{p}plain"), &format!("{p}missing"));
    let made = Made {
        kind: "queues",
        plain: plain.clone(),
        foreign: foreign.clone(),
        missing,
        bookkeeping: &[],
    };
    marks_as_promised(&backend, &made).await;
    remove(&backend, "queues", &[&plain, &foreign]).await;
}

#[cfg(feature = "secretsmanager")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_made_elsewhere_are_marked_with_their_tags_kept() {
    use aws_sdk_secretsmanager::types::Tag;
    let Some((backend, config)) = moto().await else {
        return;
    };
    let sm = aws_sdk_secretsmanager::Client::new(&config);
    let p = prefix();
    let make = |name: String, foreign: bool| {
        let sm = sm.clone();
        async move {
            let tags = made_with(foreign)
                .iter()
                .map(|(k, v)| Tag::builder().key(k).value(v).build())
                .collect();
            sm.create_secret()
                .name(name)
                .secret_string("made elsewhere")
                .description("made elsewhere")
                .set_tags(Some(tags))
                .send()
                .await
                .expect("the secret is made")
                .arn()
                .expect("an ARN")
                .to_owned()
        }
    };
    let plain = make(format!("{p}plain"), false).await;
    let foreign = make(format!("{p}foreign"), true).await;
    let made = Made {
        kind: "secrets",
        plain: plain.clone(),
        foreign: foreign.clone(),
        missing: format!("{p}missing"),
        bookkeeping: &[],
    };
    marks_as_promised(&backend, &made).await;
    remove(&backend, "secrets", &[&plain, &foreign]).await;
}

#[cfg(feature = "ecr")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repositories_made_elsewhere_are_marked_with_their_tags_kept() {
    use aws_sdk_ecr::types::Tag;
    let Some((backend, config)) = moto().await else {
        return;
    };
    let ecr = aws_sdk_ecr::Client::new(&config);
    let p = prefix();
    for (name, foreign) in [(format!("{p}plain"), false), (format!("{p}foreign"), true)] {
        let tags = made_with(foreign)
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build().expect("a tag"))
            .collect();
        ecr.create_repository()
            .repository_name(name)
            .set_tags(Some(tags))
            .send()
            .await
            .expect("the repository is made");
    }
    let (plain, foreign) = (format!("{p}plain"), format!("{p}foreign"));
    let made = Made {
        kind: "imageRegistry",
        plain: plain.clone(),
        foreign: foreign.clone(),
        missing: format!("{p}missing"),
        bookkeeping: &[],
    };
    marks_as_promised(&backend, &made).await;
    remove(&backend, "imageRegistry", &[&plain, &foreign]).await;
}

#[cfg(feature = "rds")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn databases_made_elsewhere_are_marked_with_their_tags_kept() {
    use aws_sdk_rds::types::Tag;
    let Some((backend, config)) = moto().await else {
        return;
    };
    let rds = aws_sdk_rds::Client::new(&config);
    let p = prefix();
    let tags = |foreign: bool| -> Vec<Tag> {
        made_with(foreign)
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect()
    };
    // Classic DB instances.
    for (name, foreign) in [(format!("{p}plain"), false), (format!("{p}foreign"), true)] {
        rds.create_db_instance()
            .db_instance_identifier(name)
            .engine("postgres")
            .engine_version("16.3")
            .db_instance_class("db.t4g.micro")
            .allocated_storage(20)
            .master_username("admin")
            .master_user_password("made-elsewhere-1")
            .set_tags(Some(tags(foreign)))
            .send()
            .await
            .expect("the DB instance is made");
    }
    let made = Made {
        kind: "postgres",
        plain: format!("{p}plain"),
        foreign: format!("{p}foreign"),
        missing: format!("{p}missing"),
        bookkeeping: &[],
    };
    marks_as_promised(&backend, &made).await;
    // Aurora clusters: the cluster is what is marked.
    for (name, foreign) in [
        (format!("{p}cplain"), false),
        (format!("{p}cforeign"), true),
    ] {
        rds.create_db_cluster()
            .db_cluster_identifier(name)
            .engine("aurora-postgresql")
            .engine_version("16.3")
            .master_username("admin")
            .master_user_password("made-elsewhere-1")
            .set_tags(Some(tags(foreign)))
            .send()
            .await
            .expect("the DB cluster is made");
    }
    let made = Made {
        kind: "postgres",
        plain: format!("{p}cplain"),
        foreign: format!("{p}cforeign"),
        missing: format!("{p}missing"),
        bookkeeping: &[],
    };
    marks_as_promised(&backend, &made).await;
    remove(
        &backend,
        "postgres",
        &[
            &format!("{p}plain"),
            &format!("{p}foreign"),
            &format!("{p}cplain"),
            &format!("{p}cforeign"),
        ],
    )
    .await;
}

/// A role Lambda can assume, made with the plain SDK; answers its ARN.
#[cfg(feature = "iam")]
async fn role(iam: &aws_sdk_iam::Client, name: &str, foreign: bool) -> String {
    use aws_sdk_iam::types::Tag;
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    let tags = made_with(foreign)
        .iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build().expect("a tag"))
        .collect();
    iam.create_role()
        .role_name(name)
        .assume_role_policy_document(trust)
        .description("made elsewhere")
        .set_tags(Some(tags))
        .send()
        .await
        .expect("the role is made")
        .role()
        .expect("a role")
        .arn()
        .to_owned()
}

/// Whether the backend lists the role `name` in [`REGION`].
#[cfg(feature = "iam")]
async fn listed(backend: &Router, name: &str) -> bool {
    backend
        .list("iam", REGION)
        .await
        .expect("roles are listed")
        .iter()
        .any(|l| l.handle == name)
}

#[cfg(feature = "iam")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_made_elsewhere_are_marked_with_their_tags_kept_and_listed_in_their_region() {
    let Some((backend, config)) = moto().await else {
        return;
    };
    let iam = aws_sdk_iam::Client::new(&config);
    let p = prefix();
    let (plain, foreign) = (format!("{p}plain"), format!("{p}foreign"));
    role(&iam, &plain, false).await;
    role(&iam, &foreign, true).await;
    // A role without the region tag is in no region's list...
    assert!(!listed(&backend, &plain).await);
    let made = Made {
        kind: "iam",
        plain: plain.clone(),
        foreign: foreign.clone(),
        missing: format!("{p}missing"),
        bookkeeping: &["infra-region"],
    };
    marks_as_promised(&backend, &made).await;
    // ...and once marked, it is listed in the region it was marked in, like any of ours.
    let tags = backend.ownership("iam", REGION, &plain).await.unwrap();
    assert_eq!(
        tags.get("infra-region").map(String::as_str),
        Some(REGION),
        "{tags:?}"
    );
    assert!(listed(&backend, &plain).await);
    remove(&backend, "iam", &[&plain]).await;
    let _ = iam.delete_role().role_name(&foreign).send().await;
}

#[cfg(all(feature = "lambda", feature = "iam"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn functions_made_elsewhere_are_marked_with_their_tags_kept() {
    use aws_sdk_lambda::primitives::Blob;
    use aws_sdk_lambda::types::{FunctionCode, Runtime};
    let Some((backend, config)) = moto().await else {
        return;
    };
    let iam = aws_sdk_iam::Client::new(&config);
    let lambda = aws_sdk_lambda::Client::new(&config);
    let p = prefix();
    let role_name = format!("{p}fnrole");
    let role_arn = role(&iam, &role_name, false).await;
    // The smallest valid zip archive: an end-of-central-directory record alone.
    let mut zip = b"PK\x05\x06".to_vec();
    zip.extend_from_slice(&[0; 18]);
    for (name, foreign) in [(format!("{p}plain"), false), (format!("{p}foreign"), true)] {
        lambda
            .create_function()
            .function_name(name)
            .runtime(Runtime::Python312)
            .handler("app.handler")
            .role(&role_arn)
            .code(
                FunctionCode::builder()
                    .zip_file(Blob::new(zip.clone()))
                    .build(),
            )
            .set_tags(Some(made_with(foreign).into_iter().collect()))
            .send()
            .await
            .expect("the function is made");
    }
    let (plain, foreign) = (format!("{p}plain"), format!("{p}foreign"));
    let made = Made {
        kind: "compute",
        plain: plain.clone(),
        foreign: foreign.clone(),
        missing: format!("{p}missing"),
        bookkeeping: &[],
    };
    marks_as_promised(&backend, &made).await;
    remove(&backend, "compute", &[&plain, &foreign]).await;
    let _ = iam.delete_role().role_name(&role_name).send().await;
}

#[cfg(feature = "ec2")]
mod ec2 {
    use super::*;
    use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};

    /// The tags a resource is made with, and `Name` when given.
    fn tagged(kind: ResourceType, foreign: bool, name: Option<&str>) -> TagSpecification {
        let mut tags = made_with(foreign);
        if let Some(name) = name {
            tags.insert("Name".to_owned(), name.to_owned());
        }
        TagSpecification::builder()
            .resource_type(kind)
            .set_tags(Some(
                tags.iter()
                    .map(|(k, v)| Tag::builder().key(k).value(v).build())
                    .collect(),
            ))
            .build()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn security_groups_made_elsewhere_are_marked_with_their_tags_kept() {
        let Some((backend, config)) = moto().await else {
            return;
        };
        let ec2 = aws_sdk_ec2::Client::new(&config);
        let p = prefix();
        let mut ids = Vec::new();
        for (name, foreign) in [(format!("{p}plain"), false), (format!("{p}foreign"), true)] {
            let out = ec2
                .create_security_group()
                .group_name(name)
                .description("made elsewhere")
                .tag_specifications(tagged(ResourceType::SecurityGroup, foreign, None))
                .send()
                .await
                .expect("the group is made");
            ids.push(out.group_id().expect("a group id").to_owned());
        }
        let made = Made {
            kind: "securityGroup",
            plain: ids[0].clone(),
            foreign: ids[1].clone(),
            missing: "sg-0123456789abcdef0".to_owned(),
            bookkeeping: &[],
        };
        marks_as_promised(&backend, &made).await;
        remove(&backend, "securityGroup", &[&ids[0], &ids[1]]).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn instances_made_elsewhere_are_marked_with_their_tags_and_name_kept() {
        let Some((backend, config)) = moto().await else {
            return;
        };
        let ec2 = aws_sdk_ec2::Client::new(&config);
        let image = ec2
            .describe_images()
            .owners("amazon")
            .send()
            .await
            .expect("images are described")
            .images()
            .iter()
            .find_map(|i| i.image_id().map(str::to_owned))
            .expect("moto knows an image");
        let p = prefix();
        let mut ids = Vec::new();
        for (name, foreign) in [(format!("{p}plain"), false), (format!("{p}foreign"), true)] {
            let out = ec2
                .run_instances()
                .image_id(&image)
                .instance_type(aws_sdk_ec2::types::InstanceType::T3Micro)
                .min_count(1)
                .max_count(1)
                .tag_specifications(tagged(ResourceType::Instance, foreign, Some(&name)))
                .send()
                .await
                .expect("the instance is made");
            let id = out
                .instances()
                .first()
                .and_then(|i| i.instance_id())
                .expect("an instance id");
            ids.push(id.to_owned());
        }
        let made = Made {
            kind: "awsInstance",
            plain: ids[0].clone(),
            foreign: ids[1].clone(),
            missing: "i-0123456789abcdef0".to_owned(),
            bookkeeping: &[],
        };
        marks_as_promised(&backend, &made).await;
        let tags = backend
            .ownership("awsInstance", REGION, &ids[0])
            .await
            .unwrap();
        assert_eq!(
            tags.get("Name").map(String::as_str),
            Some(format!("{p}plain").as_str())
        );
        remove(&backend, "awsInstance", &[&ids[0], &ids[1]]).await;
    }
}
