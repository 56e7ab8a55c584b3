//! What each real cloud does with each field of each kind: whether its `read` reports
//! the field, and how the field can change once the resource exists.
//!
//! The table is written from the providers' API documentation, field by field, and not
//! from the kinds' divergence tables ([`Spec::FIELDS`](infra_core::prelude::Spec::FIELDS)): the
//! simulator takes its behaviour from here, so a divergence table that plans an update
//! the cloud would refuse, or that counts on a value the cloud never reports, fails a
//! test offline instead of an apply against a real account.
//!
//! Every field of every kind a provider realises has exactly one row; [`behaviour`]
//! finds it. Fields are named as they serialise (camelCase).

use serde_json::{Map, Value};

use infra_core::sdk::BackendError;

use super::kinds;

/// Whether a cloud's `read` reports a field.
#[derive(Clone, Copy, Debug)]
pub enum Read {
    /// The cloud answers it.
    Reported,
    /// The cloud answers it only for a resource whose configuration passes this test
    /// (an SQS `maxReceiveCount` exists only inside a redrive policy).
    ReportedWhen(fn(&Map<String, Value>) -> bool),
    /// The cloud has no such value to answer: `read` leaves it out, unknown.
    Unreported,
}

impl Read {
    /// Whether a resource holding `config` has the field reported.
    pub fn reports(&self, config: &Map<String, Value>) -> bool {
        match self {
            Read::Reported => true,
            Read::ReportedWhen(test) => test(config),
            Read::Unreported => false,
        }
    }

    /// Whether the field is reported for some resources at least.
    pub fn ever(&self) -> bool {
        !matches!(self, Read::Unreported)
    }
}

/// How the cloud refuses a change it cannot make: its error code and its words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The provider's error code; `None` is the provider's generic "invalid argument".
    pub code: Option<&'static str>,
    /// What the provider says.
    pub says: &'static str,
}

impl Refusal {
    /// The error an update of `field` of `handle` meets.
    pub fn error(&self, provider: &str, handle: &str, field: &str) -> BackendError {
        let message = format!("{} ({field} of {handle}; nothing was changed)", self.says);
        match self.code {
            Some(code) => BackendError::invalid(message).with_code(code),
            None => kinds::invalid(provider, message),
        }
    }
}

/// How a field can change after the resource is created.
#[derive(Clone, Copy, Debug)]
pub enum Change {
    /// Any change is made in place.
    InPlace,
    /// Only at creation: an update that changes it is refused, and nothing is applied.
    AtCreation(Refusal),
    /// In place, except the changes from the value in force to the asked one that the
    /// test picks out, which are refused.
    InPlaceUnless(fn(&Value, &Value) -> bool, Refusal),
}

impl Change {
    /// The refusal a change from `before` (the value in force, if any) to `after`
    /// meets, if the cloud refuses it.
    pub fn refusal(&self, before: Option<&Value>, after: &Value) -> Option<Refusal> {
        if before == Some(after) {
            return None;
        }
        match (self, before) {
            (Change::InPlace, _) => None,
            (Change::AtCreation(refusal), _) => Some(*refusal),
            (Change::InPlaceUnless(refused, refusal), Some(before)) => {
                refused(before, after).then_some(*refusal)
            }
            (Change::InPlaceUnless(..), None) => None,
        }
    }
}

/// One row of the table: what `providers` do with `fields` of `kinds`.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    /// The providers the row speaks for.
    pub providers: &'static [&'static str],
    /// The kinds.
    pub kinds: &'static [&'static str],
    /// The fields, camelCase.
    pub fields: &'static [&'static str],
    /// Whether `read` reports them.
    pub read: Read,
    /// How they can change after creation.
    pub change: Change,
}

impl Row {
    /// Whether the row speaks of `field` of `kind` on `provider`.
    pub fn covers(&self, provider: &str, kind: &str, field: &str) -> bool {
        self.providers.contains(&provider)
            && self.kinds.contains(&kind)
            && self.fields.contains(&field)
    }
}

/// The row of `field` of `kind` on `provider`, if the table has one. It has one for
/// every field of every kind the provider realises; only test set-up (a field planted
/// with `SimCloud::set_field`) can put any other field in the world.
pub fn behaviour(provider: &str, kind: &str, field: &str) -> Option<&'static Row> {
    ROWS.iter().find(|row| row.covers(provider, kind, field))
}

/// Whether `read` of a resource of `kind` holding `config` reports `field`. A field
/// the table does not know was planted by a test, and is reported as planted.
pub(crate) fn reports(
    provider: &str,
    kind: &str,
    field: &str,
    config: &Map<String, Value>,
) -> bool {
    behaviour(provider, kind, field).is_none_or(|row| row.read.reports(config))
}

/// The refusal an update changing `field` from `before` to `after` meets, if any.
pub(crate) fn refusal(
    provider: &str,
    kind: &str,
    field: &str,
    before: Option<&Value>,
    after: &Value,
) -> Option<Refusal> {
    behaviour(provider, kind, field).and_then(|row| row.change.refusal(before, after))
}

// ---- the tests some rows hang on ----

fn has_dead_letter(config: &Map<String, Value>) -> bool {
    config.get("deadLetter").is_some_and(|v| !v.is_null())
}

/// A Pub/Sub queue has a subscription when its declaration asks for a delivery
/// setting: ordering, an ack deadline, a dead letter, a delivery count.
pub(crate) fn has_subscription(config: &Map<String, Value>) -> bool {
    config.get("fifo") == Some(&Value::Bool(true))
        || config
            .get("visibilityTimeoutSeconds")
            .is_some_and(|v| !v.is_null())
        || has_dead_letter(config)
        || config.get("maxReceiveCount").is_some_and(|v| !v.is_null())
}

fn has_retention(config: &Map<String, Value>) -> bool {
    config.get("retentionSeconds").is_some_and(|v| !v.is_null())
}

/// A Cloud Run service built from a source archive in Cloud Storage.
fn built_from_source(config: &Map<String, Value>) -> bool {
    config
        .get("code")
        .and_then(Value::as_str)
        .is_some_and(|c| c.starts_with("gs://"))
}

fn is_classic(config: &Map<String, Value>) -> bool {
    config
        .get("capacity")
        .and_then(|c| c.get("shape"))
        .is_some_and(|s| s == "classic")
}

/// A database moving between a provisioned and a serverless shape.
fn changes_shape(before: &Value, after: &Value) -> bool {
    before.get("shape") != after.get("shape")
}

fn shrinks(before: &Value, after: &Value) -> bool {
    matches!((before.as_u64(), after.as_u64()), (Some(b), Some(a)) if a < b)
}

fn turns_off(before: &Value, after: &Value) -> bool {
    before == &Value::Bool(true) && after == &Value::Bool(false)
}

// ---- the table ----

const AWS: &[&str] = &["aws"];
const GCP: &[&str] = &["gcp"];
const SCW: &[&str] = &["scaleway"];
const AWS_GCP: &[&str] = &["aws", "gcp"];
const AWS_SCW: &[&str] = &["aws", "scaleway"];
const GCP_SCW: &[&str] = &["gcp", "scaleway"];
const ALL: &[&str] = &["aws", "gcp", "scaleway"];

/// The kinds with a `tags` field.
const TAGGED: &[&str] = &[
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
    "functionNamespace",
    "containerNamespace",
];

/// Scaleway's function and container namespaces.
const NAMESPACES: &[&str] = &["functionNamespace", "containerNamespace"];

const REPORTED: Read = Read::Reported;
const UNREPORTED: Read = Read::Unreported;
const IN_PLACE: Change = Change::InPlace;

const fn row(
    providers: &'static [&'static str],
    kinds: &'static [&'static str],
    fields: &'static [&'static str],
    read: Read,
    change: Change,
) -> Row {
    Row {
        providers,
        kinds,
        fields,
        read,
        change,
    }
}

const fn refused(code: Option<&'static str>, says: &'static str) -> Refusal {
    Refusal { code, says }
}

// The changes clouds refuse, in their words.

const SQS_FIFO: Change = Change::AtCreation(refused(
    Some("InvalidAttributeName"),
    "FifoQueue can only be set when the queue is created",
));
const PUBSUB_ORDERING: Change = Change::AtCreation(refused(
    None,
    "enable_message_ordering is set when a subscription is created and cannot be updated",
));
const MASTER_USER: Change = Change::AtCreation(refused(
    None,
    "the master user name is chosen when the database is created and cannot be modified",
));
const RDS_SHAPE: Change = Change::InPlaceUnless(
    changes_shape,
    refused(
        Some("InvalidParameterCombination"),
        "an RDS DB instance cannot be turned into an Aurora Serverless v2 cluster, nor back",
    ),
);
const CLOUD_SQL_SHAPE: Change = Change::InPlaceUnless(
    changes_shape,
    refused(
        None,
        "a Cloud SQL instance keeps a machine tier; it cannot become a serverless database",
    ),
);
const SCW_RDB_SHAPE: Change = Change::InPlaceUnless(
    changes_shape,
    refused(
        None,
        "a Database Instance cannot become a Serverless SQL Database, nor the other way round",
    ),
);
const RDS_STORAGE: Change = Change::InPlaceUnless(
    shrinks,
    refused(
        Some("InvalidParameterCombination"),
        "the allocated storage of a DB instance can be increased, never decreased",
    ),
);
const CLOUD_SQL_STORAGE: Change = Change::InPlaceUnless(
    shrinks,
    refused(
        None,
        "the data disk of a Cloud SQL instance can be enlarged, not reduced",
    ),
);
const SCW_RDB_STORAGE: Change = Change::InPlaceUnless(
    shrinks,
    refused(
        None,
        "the volume of a Database Instance can only be upgraded to a larger size",
    ),
);
const OBJECT_LOCK: Change = Change::InPlaceUnless(
    turns_off,
    refused(
        Some("InvalidBucketState"),
        "Object Lock, once enabled on a bucket, cannot be disabled",
    ),
);
const GROUP_FIXED: Change = Change::AtCreation(refused(
    Some("OperationNotPermitted"),
    "a security group keeps the description and the VPC it was created with",
));
const LAUNCH_FIXED: Change = Change::AtCreation(refused(
    Some("OperationNotPermitted"),
    "an instance keeps the image, subnet and key pair it was launched with",
));
const NEEDS_STOPPED: Change = Change::AtCreation(refused(
    Some("IncorrectInstanceState"),
    "the instance is running: its type and user data can be modified only while it is stopped",
));
const NAMESPACE_FIXED: Change = Change::AtCreation(refused(
    None,
    "a function or a container cannot move to another namespace",
));

/// The table. Rows do not overlap: one (provider, kind, field) has one row.
#[rustfmt::skip]
pub const ROWS: &[Row] = &[
    // Tags are reported and changed in place everywhere: they are where a backend keeps
    // the ownership marker, and the conformance suite reads it back through `read`.
    // Scaleway Queues take no tags at all: a queue reports none (`{}`), and a declared
    // tag is refused whole, never planned as a change (see `kinds::tags_readable`).
    row(ALL, TAGGED, &["tags"], REPORTED, IN_PLACE),

    // ---- iam ----
    // UpdateRole, UpdateAssumeRolePolicy, Attach/DetachRolePolicy; GCP: the project's
    // and the account's setIamPolicy, serviceAccounts.patch.
    row(AWS_GCP, &["iam"], &["policies", "assumedBy", "description"], REPORTED, IN_PLACE),
    // Scaleway: policies name the application; UpdateApplication.
    row(SCW, &["iam"], &["policies", "description"], REPORTED, IN_PLACE),
    // A Scaleway application holds API keys; no service assumes it (no trust policy).
    row(SCW, &["iam"], &["assumedBy"], UNREPORTED, IN_PLACE),

    // ---- objectStore ----
    // PutBucketVersioning, PutBucketLifecycleConfiguration (S3, and Scaleway's S3 API);
    // buckets.patch on Cloud Storage.
    row(ALL, &["objectStore"], &["versioning", "expireAfterDays"], REPORTED, IN_PLACE),

    // ---- compute ----
    // UpdateFunctionConfiguration; functions.patch; UpdateFunction.
    row(AWS_SCW, &["compute"], &["runtime", "handler"], REPORTED, IN_PLACE),
    // Cloud Run: buildConfig.baseImage and functionTarget, which a service built from a
    // source archive has and one running a container image as it is has not.
    row(GCP, &["compute"], &["runtime", "handler"], Read::ReportedWhen(built_from_source), IN_PLACE),
    row(ALL, &["compute"], &["memoryMb", "timeoutSeconds", "environment"], REPORTED, IN_PLACE),
    // Lambda: the secrets' ARNs in the environment, the role; GCF:
    // secretEnvironmentVariables, serviceConfig.serviceAccountEmail.
    row(AWS_GCP, &["compute"], &["secretEnvironment", "role"], REPORTED, IN_PLACE),
    // Scaleway answers secret variables as hashes, and runs a function as no identity.
    row(SCW, &["compute"], &["secretEnvironment", "role"], UNREPORTED, IN_PLACE),
    // UpdateFunctionCode, a new upload: neither answers where the code came from.
    row(AWS_SCW, &["compute"], &["code"], UNREPORTED, IN_PLACE),
    // GCF answers buildConfig.source.storageSource (bucket and object).
    row(GCP, &["compute"], &["code"], REPORTED, IN_PLACE),
    // Lambda's CodeSha256 (GetFunctionConfiguration).
    row(AWS, &["compute"], &["codeSha256"], REPORTED, IN_PLACE),
    // Neither GCF nor Scaleway answers a digest of the deployed code.
    row(GCP_SCW, &["compute"], &["codeSha256"], UNREPORTED, IN_PLACE),
    // Who may call it: Cloud Run's ingress and its invoker binding of `allUsers`
    // (services.patch, services.setIamPolicy); Scaleway's `privacy` (UpdateFunction).
    row(GCP_SCW, &["compute"], &["access"], REPORTED, IN_PLACE),
    // A Lambda is called through IAM alone: no function URL is made, and none is read.
    row(AWS, &["compute"], &["access"], UNREPORTED, IN_PLACE),

    // ---- queues ----
    // SQS, and Scaleway's SQS API: FifoQueue is an attribute of CreateQueue only.
    row(AWS_SCW, &["queues"], &["fifo"], REPORTED, SQS_FIFO),
    // SetQueueAttributes: VisibilityTimeout, MessageRetentionPeriod, RedrivePolicy.
    row(AWS_SCW, &["queues"], &["visibilityTimeoutSeconds"], REPORTED, IN_PLACE),
    row(AWS_SCW, &["queues"], &["retentionSeconds", "deadLetter"], REPORTED, IN_PLACE),
    // maxReceiveCount lives in the RedrivePolicy: there is none without a dead letter.
    row(AWS_SCW, &["queues"], &["maxReceiveCount"], Read::ReportedWhen(has_dead_letter), IN_PLACE),
    // topics.patch messageRetentionDuration; a topic given none keeps no messages and
    // answers none.
    row(GCP, &["queues"], &["retentionSeconds"], Read::ReportedWhen(has_retention), IN_PLACE),
    // A Pub/Sub queue is a topic, and a subscription of the same name when the
    // declaration asks for a delivery setting: ordering, the ack deadline and the
    // dead-letter policy are the subscription's, so without one nothing reports them.
    row(GCP, &["queues"], &["fifo"], Read::ReportedWhen(has_subscription), PUBSUB_ORDERING),
    // subscriptions.patch ackDeadlineSeconds, deadLetterPolicy.
    row(GCP, &["queues"], &["visibilityTimeoutSeconds", "deadLetter"], Read::ReportedWhen(has_subscription), IN_PLACE),
    // maxDeliveryAttempts lives in the dead-letter policy.
    row(GCP, &["queues"], &["maxReceiveCount"], Read::ReportedWhen(has_dead_letter), IN_PLACE),

    // ---- secrets ----
    // A value is written as a new version, and never answered by a read.
    row(ALL, &["secrets"], &["valueFrom"], UNREPORTED, IN_PLACE),
    // UpdateSecret (Secrets Manager, Scaleway Secret Manager); on Secret Manager, which
    // has no description field, the `description` annotation (secrets.patch).
    row(ALL, &["secrets"], &["description"], REPORTED, IN_PLACE),

    // ---- imageRegistry ----
    // PutImageScanningConfiguration, PutImageTagMutability; repositories.patch
    // (vulnerabilityScanningConfig, dockerConfig.immutableTags).
    row(AWS_GCP, &["imageRegistry"], &["scanOnPush", "immutableTags"], REPORTED, IN_PLACE),
    // A Scaleway registry namespace has a description and a visibility, nothing more.
    row(SCW, &["imageRegistry"], &["scanOnPush", "immutableTags"], UNREPORTED, IN_PLACE),

    // ---- postgres ----
    // ModifyDBInstance (AllowMajorVersionUpgrade, BackupRetentionPeriod);
    // instances.patch; UpgradeInstance, UpdateInstance.
    row(ALL, &["postgres"], &["engineVersion", "backupRetentionDays"], REPORTED, IN_PLACE),
    // The administrator is made with the database; no API renames a user.
    row(ALL, &["postgres"], &["masterUsername"], REPORTED, MASTER_USER),
    // A new password can be set (ModifyDBInstance, users.update, UpdateUser); no read
    // ever answers one.
    row(ALL, &["postgres"], &["masterPassword"], UNREPORTED, IN_PLACE),
    // DBInstanceClass or ServerlessV2ScalingConfiguration in place; an instance is not
    // a cluster. Cloud SQL: settings.tier. Scaleway: UpgradeInstance node_type.
    row(AWS, &["postgres"], &["capacity"], REPORTED, RDS_SHAPE),
    row(GCP, &["postgres"], &["capacity"], REPORTED, CLOUD_SQL_SHAPE),
    row(SCW, &["postgres"], &["capacity"], REPORTED, SCW_RDB_SHAPE),
    // AllocatedStorage, settings.dataDiskSizeGb, volume_size: they only grow. A
    // serverless database has no allocated storage to report.
    row(AWS, &["postgres"], &["storageGb"], Read::ReportedWhen(is_classic), RDS_STORAGE),
    row(GCP, &["postgres"], &["storageGb"], Read::ReportedWhen(is_classic), CLOUD_SQL_STORAGE),
    row(SCW, &["postgres"], &["storageGb"], Read::ReportedWhen(is_classic), SCW_RDB_STORAGE),

    // ---- s3Bucket ----
    // PutBucketVersioning, PutPublicAccessBlock.
    row(AWS, &["s3Bucket"], &["versioning", "blockPublicAccess"], REPORTED, IN_PLACE),
    // PutObjectLockConfiguration turns Object Lock on for an existing bucket; nothing
    // turns it off.
    row(AWS, &["s3Bucket"], &["objectLock"], REPORTED, OBJECT_LOCK),

    // ---- securityGroup ----
    // No EC2 operation rewrites a group's description or moves it to another VPC.
    row(AWS, &["securityGroup"], &["description", "vpcId"], REPORTED, GROUP_FIXED),
    // Authorize/RevokeSecurityGroupIngress and Egress.
    row(AWS, &["securityGroup"], &["ingress", "egress"], REPORTED, IN_PLACE),

    // ---- awsInstance ----
    // ModifyInstanceAttribute Groups, on a running instance.
    row(AWS, &["awsInstance"], &["securityGroup"], REPORTED, IN_PLACE),
    // Nothing changes the AMI, the subnet or the key pair of a launched instance.
    row(AWS, &["awsInstance"], &["image", "subnetId", "keyName"], REPORTED, LAUNCH_FIXED),
    // ModifyInstanceAttribute InstanceType / UserData wants a stopped instance.
    row(AWS, &["awsInstance"], &["instanceType", "userData"], REPORTED, NEEDS_STOPPED),

    // ---- Scaleway serverless ----
    // UpdateNamespace.
    row(SCW, NAMESPACES, &["description", "environment"], REPORTED, IN_PLACE),
    // Secret variables are answered as hashes of their values.
    row(SCW, NAMESPACES, &["secretEnvironment"], UNREPORTED, IN_PLACE),
    row(SCW, &["container"], &["secretEnvironment"], UNREPORTED, IN_PLACE),
    // `privacy`, in UpdateFunction and UpdateContainer.
    row(SCW, &["function", "container"], &["access"], REPORTED, IN_PLACE),
    // UpdateFunction and UpdateContainer take no namespace_id.
    row(SCW, &["function", "container"], &["namespace"], REPORTED, NAMESPACE_FIXED),
    // UpdateFunction.
    row(SCW, &["function"], &["runtime", "handler", "memoryMb", "timeoutSeconds"], REPORTED, IN_PLACE),
    row(SCW, &["function"], &["minScale", "maxScale", "environment"], REPORTED, IN_PLACE),
    // The function API has no source bucket: code is uploaded to the function.
    row(SCW, &["function"], &["sourceBucket"], UNREPORTED, IN_PLACE),
    // A new archive goes up through the function's upload URL and is deployed; nothing
    // Scaleway answers says where it came from.
    row(SCW, &["function"], &["code"], UNREPORTED, IN_PLACE),
    // UpdateContainer.
    row(SCW, &["container"], &["image", "port", "cpuLimit", "memoryLimitMb"], REPORTED, IN_PLACE),
    row(SCW, &["container"], &["minScale", "maxScale", "environment"], REPORTED, IN_PLACE),
    // UpdateContainer `timeout`, a duration string ("300s").
    row(SCW, &["container"], &["timeoutSeconds"], REPORTED, IN_PLACE),
];

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::sim::kinds::{PROVIDERS, Site, fields, fill, kinds_of};

    fn config(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn no_two_rows_speak_of_one_field() {
        for provider in PROVIDERS {
            for kind in kinds_of(provider) {
                for field in fields(kind) {
                    let rows = ROWS
                        .iter()
                        .filter(|r| r.covers(provider, kind, field.name))
                        .count();
                    assert!(rows <= 1, "{provider} {kind} {}: {rows} rows", field.name);
                }
            }
        }
    }

    #[test]
    fn a_create_only_field_refuses_any_change_and_accepts_its_own_value() {
        let fifo = behaviour("aws", "queues", "fifo").unwrap().change;
        assert_eq!(fifo.refusal(Some(&json!(false)), &json!(false)), None);
        let refusal = fifo.refusal(Some(&json!(false)), &json!(true)).unwrap();
        assert_eq!(refusal.code, Some("InvalidAttributeName"));
        // Said for the first time after creation is a change too.
        let key = behaviour("aws", "awsInstance", "keyName").unwrap().change;
        assert!(key.refusal(None, &json!("ops")).is_some());
    }

    #[test]
    fn a_partly_mutable_field_refuses_only_the_changes_its_test_picks() {
        let capacity = behaviour("gcp", "postgres", "capacity").unwrap().change;
        let small = json!({"shape": "classic", "instanceClass": "db-f1-micro"});
        let large = json!({"shape": "classic", "instanceClass": "db-custom-2-7680"});
        let serverless = json!({"shape": "serverless", "minCapacity": 0.5, "maxCapacity": 2.0});
        assert_eq!(capacity.refusal(Some(&small), &large), None);
        assert!(capacity.refusal(Some(&small), &serverless).is_some());
        assert!(capacity.refusal(Some(&serverless), &small).is_some());
        let storage = behaviour("aws", "postgres", "storageGb").unwrap().change;
        assert_eq!(storage.refusal(Some(&json!(20)), &json!(100)), None);
        assert!(storage.refusal(Some(&json!(100)), &json!(20)).is_some());
        let lock = behaviour("aws", "s3Bucket", "objectLock").unwrap().change;
        assert_eq!(lock.refusal(Some(&json!(false)), &json!(true)), None);
        assert!(lock.refusal(Some(&json!(true)), &json!(false)).is_some());
    }

    #[test]
    fn a_refusal_is_invalid_in_the_providers_words() {
        let refusal = behaviour("aws", "securityGroup", "description")
            .and_then(|r| r.change.refusal(Some(&json!("a")), &json!("b")))
            .unwrap();
        let e = refusal.error("aws", "sg-1", "description");
        assert_eq!(e.kind, infra_core::sdk::ErrorKind::Invalid);
        assert_eq!(e.code.as_deref(), Some("OperationNotPermitted"));
        assert!(e.message.contains("sg-1"), "{}", e.message);
        // A row without a code of its own speaks with the provider's generic one.
        let refusal = behaviour("scaleway", "function", "namespace")
            .and_then(|r| r.change.refusal(Some(&json!("a")), &json!("b")))
            .unwrap();
        let e = refusal.error("scaleway", "f-1", "namespace");
        assert_eq!(e.code.as_deref(), Some("invalid_arguments"));
    }

    #[test]
    fn some_fields_are_reported_only_with_another() {
        let count = behaviour("aws", "queues", "maxReceiveCount").unwrap().read;
        assert!(!count.reports(&config(json!({"maxReceiveCount": 3}))));
        assert!(!count.reports(&config(json!({"deadLetter": null, "maxReceiveCount": 3}))));
        assert!(count.reports(&config(json!({"deadLetter": "q", "maxReceiveCount": 3}))));
        let storage = behaviour("scaleway", "postgres", "storageGb").unwrap().read;
        assert!(storage.reports(&config(json!({"capacity": {"shape": "classic"}}))));
        assert!(!storage.reports(&config(json!({"capacity": {"shape": "serverless"}}))));
        let ack = behaviour("gcp", "queues", "visibilityTimeoutSeconds")
            .unwrap()
            .read;
        assert!(!ack.reports(&config(json!({"fifo": false, "retentionSeconds": 600}))));
        assert!(ack.reports(&config(
            json!({"fifo": false, "visibilityTimeoutSeconds": 30})
        )));
        assert!(ack.reports(&config(json!({"fifo": true}))));
    }

    /// The cloud fills in only what its `read` then reports.
    #[test]
    fn fill_invents_nothing_the_cloud_does_not_report() {
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
                let mut config = config(json!({
                    "code": "s3://b/k.zip",
                    "capacity": { "shape": "classic", "instanceClass": "db.t4g.micro" },
                }));
                fill(&site, &mut config);
                for field in config.keys().filter(|f| *f != "code" && *f != "capacity") {
                    assert!(
                        reports(provider, kind, field, &config),
                        "{provider} {kind} fills {field}, which it does not report"
                    );
                }
            }
        }
    }
}
